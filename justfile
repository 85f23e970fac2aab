# kube-mvp: thin recipes around cargo. `just` lists them.

[private]
default:
    @just --list --unsorted

# Start the demo mixed-version cluster (servers a and b; a lacks batch/v1). Ctrl-C stops it.
demo *ARGS:
    cargo run -p apiserver-fake -- cluster {{ARGS}}

# Every test of the workspace (what CI runs, with fmt and clippy).
test:
    cargo test --workspace

# The end-to-end suite: clusters of fakes driven by real clients, snapshot-tested with insta.
e2e:
    cargo test -p e2e

# The demo with every server its own process on a private etcd (needs etcd on PATH).
demo-etcd *ARGS:
    cargo run --features etcd -p apiserver-fake -- cluster --etcd {{ARGS}}

# The whole e2e suite on etcd, the etcd backend's and process clusters' tests, and the containers suite.
e2e-etcd:
    cargo build --features etcd -p apiserver-fake
    KUBE_MVP_STORE=etcd cargo test --all-features -p e2e -p apiserver-fake

# Review changed snapshots (installs cargo-insta if missing).
review:
    command -v cargo-insta >/dev/null || cargo install cargo-insta --locked
    cargo insta review

fmt:
    cargo fmt --all

clippy:
    cargo clippy --workspace --all-targets -- -D warnings

# Every fuzz target for SECONDS each (cargo fuzz on the stable toolchain; installs cargo-fuzz if missing).
fuzz SECONDS="10":
    fuzz/run {{SECONDS}}

# What CI runs.
ci:
    .ci/run

# Check that generated files are what their generators make, byte for byte (CI runs it): the protobuf
# table (its inputs fetched into cargo's registry), the RBAC policy's transform, catalog/openapi.json
# (kubernetes-validate 1.37.0 from PyPI, installed when missing) and, given the kube-apis data (a folder,
# $KUBE_MVP_KUBE_APIS or ../shared/data/kube-apis), the API tables.
check-generated KUBE_APIS="":
    apiserver-fake/scripts/generated-files check {{KUBE_APIS}}

# Regenerate the generated files in place (then `git diff` shows what changed): the protobuf table,
# catalog/openapi.json and, given the kube-apis data folder, the API tables.
generate KUBE_APIS="":
    apiserver-fake/scripts/generated-files write {{KUBE_APIS}}

