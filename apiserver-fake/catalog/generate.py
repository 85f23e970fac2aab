#!/usr/bin/env python3
"""Generate apiserver-fake's built-in API tables (catalog/v1.NN.json) from the kube-apis reference data.

Usage: python3 apiserver-fake/catalog/generate.py <kube-apis-dir> [<output-dir>] [--check]

<kube-apis-dir> holds v1.28.json ... v1.36.json (schema: its README.md). The output (default: this
script's folder, apiserver-fake/catalog) keeps only what a server needs, in a compact layout read by
apiserver-fake/src/api/catalog/minors.rs. With --check nothing is written: the script exits 1 when a
committed table differs from what the data gives (`just check-generated <dir>`).

  {"kubernetesVersion": "1.36",
   "groups": [{"name": "" | "apps" | ...,                       # server order (/api first, then /apis)
               "versions": [{"version": "v1", "enabledByDefault": true,   # preference order
                             "resources": [{"name", "singular", "kind", "namespaced", "verbs",
                                            "shortNames"?, "categories"?, "subresources"?,
                                            "featureGate"?, "featureGateEnabledByDefault"?,
                                            "storageVersion"?: "group/version" | "v1"}]}]}]}

subresources: {"name", "kind", "verbs", "responseGroup"?, "responseVersion"?, "featureGate"?,
"enabledByDefault"?}. Empty lists and absent optional values are omitted.

storageVersion is the group-version a resource is stored in (its StorageVersion encoding version, and the
input of discovery's storageVersionHash). kube-apiserver picks the highest-priority version of the resource
that already existed at the binary's minimum compatibility version (minor - 1), with two fixed overrides
(events.k8s.io events are stored as core v1 Event, CRDs as apiextensions.k8s.io/v1beta1). When
<kube-apis-dir>/v1.36-discovery exists, the 1.36 values are read from the storageVersionHash of its legacy
documents instead (exact), and the rule is checked against them; mismatches are printed.
Only derived facts are written; no reference document is copied.
"""
import base64
import glob
import hashlib
import json
import os
import sys

FIRST, LAST = 28, 36
# Resources whose storage group-version is fixed by kube-apiserver's storage factory.
STORAGE_OVERRIDES = {
    ("events.k8s.io", "events"): "v1",  # stored as core v1 Event
    ("apiextensions.k8s.io", "customresourcedefinitions"): "apiextensions.k8s.io/v1beta1",
}


def gv_string(group, version):
    return version if group == "" else f"{group}/{version}"


def storage_hash(gv, kind):
    group, version = gv.split("/") if "/" in gv else ("", gv)
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def load(src, minor):
    with open(os.path.join(src, f"v1.{minor}.json"), encoding="utf-8") as f:
        return json.load(f)


def introductions(tables):
    """(group, version, resource) -> first minor whose table lists it (FIRST - 1 for anything in FIRST)."""
    first = {}
    for minor in range(FIRST, LAST + 1):
        for g in tables[minor]["groups"]:
            for v in g["versions"]:
                for r in v["resources"]:
                    key = (g["group"], v["version"], r["resource"])
                    first.setdefault(key, minor if minor > FIRST else FIRST - 1)
    return first


def storage_version_by_rule(table, minor, group, resource, first):
    """None for resources without storage (reviews, bindings, componentstatuses: the ones without watch)."""
    if not any("watch" in r["verbs"] for v in group["versions"] for r in v["resources"]
               if r["resource"] == resource):
        return None
    override = STORAGE_OVERRIDES.get((group["group"], resource))
    if override:
        return override
    candidates = [v["version"] for v in group["versions"]
                  if any(r["resource"] == resource for r in v["resources"])]
    for version in candidates:
        if first[(group["group"], version, resource)] <= minor - 1:
            return gv_string(group["group"], version)
    return gv_string(group["group"], candidates[0])


def storage_versions_from_discovery(src, table):
    """(group, resource) -> storage group-version, matched from the 1.36 legacy documents' hashes."""
    directory = os.path.join(src, "v1.36-discovery")
    if not os.path.isdir(directory):
        return None
    candidates = []
    for g in table["groups"]:
        for v in g["versions"]:
            candidates.append(gv_string(g["group"], v["version"]))
    candidates += [gv for gv in STORAGE_OVERRIDES.values() if gv not in candidates]
    found = {}
    for path in sorted(glob.glob(os.path.join(directory, "api*__*.json"))):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        gv = doc.get("groupVersion", "")
        group = gv.split("/")[0] if "/" in gv else ""
        for r in doc.get("resources", []):
            want = r.get("storageVersionHash")
            if not want:
                continue
            match = [c for c in candidates if storage_hash(c, r["kind"]) == want]
            if len(match) != 1:
                sys.exit(f"{path}: {r['name']}: storage version not determined ({match})")
            found[(group, r["name"])] = match[0]
    return found


def compact_subresource(s):
    out = {"name": s["subresource"], "kind": s["kind"], "verbs": s["verbs"]}
    for src_key in ("responseGroup", "responseVersion", "featureGate", "enabledByDefault"):
        if src_key in s:
            out[src_key] = s[src_key]
    return out


def compact_resource(r, storage):
    out = {"name": r["resource"], "singular": r["singularResource"], "kind": r["kind"],
           "namespaced": r["namespaced"], "verbs": r["verbs"]}
    for key in ("shortNames", "categories"):
        if r.get(key):
            out[key] = r[key]
    if r.get("subresources"):
        out["subresources"] = [compact_subresource(s) for s in r["subresources"]]
    for key in ("featureGate", "featureGateEnabledByDefault"):
        if key in r:
            out[key] = r[key]
    if storage is not None:
        out["storageVersion"] = storage
    return out


def render(minor, groups):
    """One resource per line: small diffs between releases, still valid JSON."""
    lines = ["{", f'  "kubernetesVersion": "1.{minor}",',
             '  "generatedBy": "catalog/generate.py from the kube-apis reference tables",', '  "groups": [']
    for gi, g in enumerate(groups):
        lines.append(f'    {{"name": {json.dumps(g["name"])}, "versions": [')
        for vi, v in enumerate(g["versions"]):
            lines.append(f'      {{"version": {json.dumps(v["version"])}, '
                         f'"enabledByDefault": {json.dumps(v["enabledByDefault"])}, "resources": [')
            for ri, r in enumerate(v["resources"]):
                sep = "," if ri + 1 < len(v["resources"]) else ""
                lines.append("        " + json.dumps(r, separators=(", ", ": ")) + sep)
            lines.append("      ]}" + ("," if vi + 1 < len(g["versions"]) else ""))
        lines.append("    ]}" + ("," if gi + 1 < len(groups) else ""))
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return
    unknown = [a for a in sys.argv[1:] if a.startswith("-") and a != "--check"]
    if unknown:
        sys.exit(f"generate.py: unknown option {unknown[0]} (see --help)")
    args = [a for a in sys.argv[1:] if a != "--check"]
    check = len(args) < len(sys.argv) - 1
    if len(args) not in (1, 2):
        sys.exit("usage: generate.py <kube-apis-dir> [<output-dir>] [--check] (see --help)")
    src = args[0]
    if not os.path.isfile(os.path.join(src, f"v1.{FIRST}.json")):
        sys.exit(f"generate.py: {src} holds no v1.{FIRST}.json: not a kube-apis data folder")
    out_dir = args[1] if len(args) == 2 else os.path.dirname(os.path.abspath(__file__))
    stale = []
    tables = {minor: load(src, minor) for minor in range(FIRST, LAST + 1)}
    first = introductions(tables)
    exact = storage_versions_from_discovery(src, tables[LAST])
    for minor, table in tables.items():
        groups = []
        for g in table["groups"]:
            versions = []
            for v in g["versions"]:
                resources = []
                for r in v["resources"]:
                    storage = storage_version_by_rule(table, minor, g, r["resource"], first)
                    if minor == LAST and exact is not None:
                        real = exact.get((g["group"], r["resource"]))
                        if real != storage:
                            print(f"note: 1.{minor} {g['group']} {r['resource']}: rule says {storage}, "
                                  f"discovery says {real}", file=sys.stderr)
                        storage = real
                    resources.append(compact_resource(r, storage))
                versions.append({"version": v["version"], "enabledByDefault": v["enabledByDefault"],
                                 "resources": resources})
            groups.append({"name": g["group"], "versions": versions})
        path = os.path.join(out_dir, f"v1.{minor}.json")
        text = render(minor, groups)
        json.loads(text)  # the custom layout must stay valid JSON
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    stale.append(path)
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}")
    if stale:
        sys.exit(f"out of date (rerun without --check): {', '.join(stale)}")
    if check:
        print(f"v1.{FIRST}.json ... v1.{LAST}.json in {out_dir} are up to date")


if __name__ == "__main__":
    main()
