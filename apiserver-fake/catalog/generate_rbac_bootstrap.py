#!/usr/bin/env python3
"""Generate apiserver-fake/catalog/rbac-bootstrap.json: the bootstrap RBAC policy the fake creates.

Usage:
    python3 apiserver-fake/catalog/generate_rbac_bootstrap.py <testdata-dir> [--kubernetes 1.35] [--check]
    python3 apiserver-fake/catalog/generate_rbac_bootstrap.py --self-test

<testdata-dir> is kubernetes/kubernetes' plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata at the
release's tag (a checkout, or the two files it reads: cluster-roles.yaml and cluster-role-bindings.yaml,
kube-apiserver's bootstrap policy with default feature gates, as `kind: List` documents). The output keeps
the subset the fake's `chain/rbac` creates (ROLES and BINDINGS below), in the compact layout it reads:

  {"source": "...",
   "clusterRoles": [{"name", "labels", "aggregationRule"?, "rules": [{"verbs", "apiGroups"?,
                     "resources"?, "resourceNames"?, "nonResourceURLs"?}]}],
   "clusterRoleBindings": [{"name", "roleRef": "<ClusterRole name>", "subjects": [{"kind", "name",
                            "namespace"?}]}]}

Rule keys are in Go's `PolicyRule` field order, roles in ROLES' order, bindings in upstream's (by name).
--kubernetes names the release in the `source` note. --check writes nothing and exits 1 when the
committed file differs. --self-test renders the committed file back into upstream's testdata shape (with
roles and bindings the fake does not create around them), regenerates from that, and checks that the
result is the committed file byte for byte: the transform is exact, whatever the release.

Needs PyYAML (`python3 -m pip install pyyaml`; the Kubernetes Python client depends on it).
"""
import json
import os
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "rbac-bootstrap.json")

# The ClusterRoles the fake creates, in the order it creates them.
ROLES = [
    "cluster-admin",
    "admin",
    "edit",
    "view",
    "system:aggregate-to-admin",
    "system:aggregate-to-edit",
    "system:aggregate-to-view",
    "system:discovery",
    "system:basic-user",
    "system:public-info-viewer",
    "system:monitoring",
    "system:node",
]
# The ClusterRoleBindings it creates.
BINDINGS = {
    "cluster-admin",
    "system:basic-user",
    "system:discovery",
    "system:monitoring",
    "system:node",
    "system:public-info-viewer",
}
# Go's rbacv1.PolicyRule field order (its JSON encoding order).
RULE_KEYS = ["verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"]

SOURCE = (
    "kube-apiserver bootstrap RBAC policy as laid out in kubernetes/kubernetes "
    "plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/cluster-roles.yaml and "
    "cluster-role-bindings.yaml (Kubernetes {release} era, default feature gates): the subset the fake "
    "creates; see docs/authorization.md"
)


def items(path, kind):
    with open(path, encoding="utf-8") as f:
        document = yaml.safe_load(f)
    found = {}
    for item in document.get("items") or []:
        if item.get("kind") == kind:
            found[item["metadata"]["name"]] = item
    return found


def compact_role(role):
    out = {"name": role["metadata"]["name"], "labels": role["metadata"].get("labels") or {}}
    if role.get("aggregationRule"):
        out["aggregationRule"] = role["aggregationRule"]
    out["rules"] = [
        {key: rule[key] for key in RULE_KEYS if rule.get(key)} for rule in role.get("rules") or []
    ]
    return out


def compact_binding(binding):
    subjects = []
    for subject in binding.get("subjects") or []:
        compact = {"kind": subject["kind"], "name": subject["name"]}
        if subject.get("namespace"):
            compact["namespace"] = subject["namespace"]
        subjects.append(compact)
    return {
        "name": binding["metadata"]["name"],
        "roleRef": binding["roleRef"]["name"],
        "subjects": subjects,
    }


def generate(testdata, release):
    roles = items(os.path.join(testdata, "cluster-roles.yaml"), "ClusterRole")
    bindings = items(os.path.join(testdata, "cluster-role-bindings.yaml"), "ClusterRoleBinding")
    missing = [name for name in ROLES if name not in roles]
    missing += [name for name in sorted(BINDINGS) if name not in bindings]
    if missing:
        sys.exit(f"not in {testdata}: {missing}")
    document = {
        "source": SOURCE.format(release=release),
        "clusterRoles": [compact_role(roles[name]) for name in ROLES],
        "clusterRoleBindings": [compact_binding(bindings[name]) for name in sorted(BINDINGS)],
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def upstream_shape(committed, directory):
    """Writes the committed policy as upstream's testdata lays it out (sorted keys, `kind: List`,
    apiGroup on subjects, the autoupdate annotation), with a role and a binding the fake does not
    create; returns the release named in its source note."""
    meta = lambda name, labels: {  # noqa: E731
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        "creationTimestamp": None,
        "labels": labels,
        "name": name,
    }
    roles = []
    for role in committed["clusterRoles"] + [
        {"name": "system:kube-scheduler", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
         "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["events"]}]}
    ]:
        item = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": meta(role["name"], role["labels"]), "rules": role["rules"] or None}
        if "aggregationRule" in role:
            item["aggregationRule"] = role["aggregationRule"]
        roles.append(item)
    bindings = []
    for binding in committed["clusterRoleBindings"] + [
        {"name": "system:kube-scheduler", "roleRef": "system:kube-scheduler",
         "subjects": [{"kind": "User", "name": "system:kube-scheduler"}]}
    ]:
        item = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": meta(binding["name"], {"kubernetes.io/bootstrapping": "rbac-defaults"}),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": binding["roleRef"]}}
        if binding["subjects"]:
            item["subjects"] = [dict(s, apiGroup="rbac.authorization.k8s.io") for s in binding["subjects"]]
        bindings.append(item)
    for name, listed in (("cluster-roles.yaml", roles), ("cluster-role-bindings.yaml", bindings)):
        listed.sort(key=lambda item: item["metadata"]["name"])
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            yaml.safe_dump({"apiVersion": "v1", "items": listed, "kind": "List", "metadata": {}}, f)
    source = committed["source"]
    return source[source.index("(Kubernetes ") + len("(Kubernetes "):source.index(" era")]


def main():
    with open(OUTPUT, encoding="utf-8") as f:
        committed_text = f.read()
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return
    if sys.argv[1:] == ["--self-test"]:
        with tempfile.TemporaryDirectory() as directory:
            release = upstream_shape(json.loads(committed_text), directory)
            if generate(directory, release) != committed_text:
                sys.exit("self-test failed: the transform does not reproduce rbac-bootstrap.json")
        print("self-test: rbac-bootstrap.json regenerates byte for byte from its upstream shape")
        return
    args = sys.argv[1:]
    check = "--check" in args
    release = "1.35"
    if "--kubernetes" in args:
        release = args[args.index("--kubernetes") + 1]
        del args[args.index("--kubernetes"):args.index("--kubernetes") + 2]
    args = [a for a in args if a != "--check"]
    if len(args) != 1 or args[0].startswith("-"):
        sys.exit("usage: generate_rbac_bootstrap.py <testdata-dir> [--kubernetes X.Y] [--check] | --self-test (see --help)")
    if not os.path.isfile(os.path.join(args[0], "cluster-roles.yaml")):
        sys.exit(f"generate_rbac_bootstrap.py: {args[0]} holds no cluster-roles.yaml: not upstream's bootstrap-policy testdata")
    text = generate(args[0], release)
    if check:
        if text != committed_text:
            sys.exit(f"{OUTPUT} is out of date: rerun without --check")
        print(f"{OUTPUT} is up to date")
        return
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
