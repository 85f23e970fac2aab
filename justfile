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

# Check that generated files are what their generators make: the protobuf table (needs k8s-pb 0.9.0 and
# k8s-openapi 0.29.0 in cargo's registry, see the script), the RBAC policy's transform and, given the
# kube-apis data, the API tables.
check-generated KUBE_APIS="":
    python3 apiserver-fake/scripts/gen_protobuf_table.py --check
    python3 apiserver-fake/catalog/generate_rbac_bootstrap.py --self-test
    if [ -n "{{KUBE_APIS}}" ]; then python3 apiserver-fake/catalog/generate.py "{{KUBE_APIS}}" --check; else echo "API tables not checked: pass the kube-apis data folder (just check-generated DIR)"; fi
