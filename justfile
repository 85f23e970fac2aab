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

# Review changed snapshots (installs cargo-insta if missing).
review:
    command -v cargo-insta >/dev/null || cargo install cargo-insta --locked
    cargo insta review

fmt:
    cargo fmt --all

clippy:
    cargo clippy --workspace --all-targets -- -D warnings

# What CI runs.
ci:
    .ci/run
