#!/usr/bin/env python3
"""MSRV check without a second toolchain: mvp-core's declared `rust-version` is at least what every crate
it builds with declares.

CI has one Rust toolchain (no older one can be fetched), so it cannot build mvp-core with its minimum
supported version. What it can check, and this script does: every package in mvp-core's normal
dependency closure (all features on, as `cargo metadata` resolves the workspace's lock file) declares a
`rust-version` no newer than mvp-core's. Clippy's `incompatible_msrv` lint (on in CI's `-D warnings`
clippy runs) covers the standard library APIs mvp-core itself calls. Language features (let chains need
1.88) are not checked by either; mvp-core's 1.89 covers every feature the crate uses today.

Usage: python3 scripts/check-msrv.py [PACKAGE]   (default mvp-core; exit 1 naming each crate that
requires a newer Rust than PACKAGE declares)
"""
import json
import subprocess
import sys


def version_tuple(text):
    """`1.85` and `1.85.0` alike, as (1, 85, 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return
    package = sys.argv[1] if len(sys.argv) > 1 else "mvp-core"
    run = subprocess.run(["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"check-msrv: cargo metadata failed: {last}")
    metadata = json.loads(run.stdout)
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    roots = [p for p in metadata["packages"] if p["name"] == package and p["source"] is None]
    if not roots:
        sys.exit(f"check-msrv: no workspace package named {package}")
    root = roots[0]
    if not root.get("rust_version"):
        sys.exit(f"check-msrv: {package} declares no rust-version")
    msrv = version_tuple(root["rust_version"])
    seen, todo, newer = set(), [root["id"]], []
    while todo:
        node = nodes[todo.pop()]
        for dep in node["deps"]:
            if not any(k["kind"] is None for k in dep["dep_kinds"]) or dep["pkg"] in seen:
                continue
            seen.add(dep["pkg"])
            todo.append(dep["pkg"])
            declared = packages[dep["pkg"]].get("rust_version")
            if declared and version_tuple(declared) > msrv:
                newer.append(f"{packages[dep['pkg']]['name']} {packages[dep['pkg']]['version']} needs Rust {declared}")
    if newer:
        sys.exit(f"check-msrv: {package} declares rust-version {root['rust_version']}, but " + "; ".join(sorted(newer)))
    print(f"{package}: rust-version {root['rust_version']} covers the {len(seen)} crates it builds with (all features)")


if __name__ == "__main__":
    main()
