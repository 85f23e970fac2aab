#!/usr/bin/env python3
"""Generate apiserver-fake's OpenAPI schema tables (apiserver-fake/catalog/openapi.json) from the kubernetes-validate package.

Usage:
    python3 -m pip install kubernetes-validate==1.37.0
    python3 apiserver-fake/catalog/generate_openapi.py [<schema-dir> [<output>]] [--check]

<schema-dir> defaults to the installed package's `kubernetes-json-schema` folder (or, without installing:
`pip download kubernetes-validate==1.37.0 --no-deps -d /tmp/kv && unzip -q /tmp/kv/*.whl -d /tmp/kv/x`, then
/tmp/kv/x/kubernetes_validate/kubernetes-json-schema). With --check nothing is written: the script exits 1
when the committed table differs from what the schemas give.

kubernetes-validate carries, per Kubernetes version, the definitions of kube-apiserver's OpenAPI document
as JSON Schema (`v1.NN.0-local/_definitions.json`). This script turns them back into OpenAPI v2 schema
objects and keeps only the facts a server needs to describe and check objects: property names, types,
formats, `required`, `enum`, `items`, `additionalProperties`, `default` and the `x-kubernetes-*`
extensions (group-version-kind, list and map types, patch strategies and merge keys, unions). Prose
descriptions are dropped. The output deduplicates definitions across versions:

  {"definitions": {"<definition name>": [{"from": 28, "to": 36, "schema": <OpenAPI v2 schema object>},
                                          ...]}}   # Kubernetes minors 1.<from>..1.<to>, inclusive

References are OpenAPI v2 (`#/definitions/<name>`); the server rewrites them for OpenAPI v3.
"""
import json
import os
import sys

FIRST, LAST = 28, 36
# The kubernetes-validate release the committed tables come from.
PINNED = "1.37.0"

# JSON Schema has no int-or-string; kube-apiserver's OpenAPI describes these two as strings.
SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
}

KEPT = {
    "type", "format", "required", "enum", "default", "properties", "items", "additionalProperties", "$ref",
}


def convert(schema, top_level_kind=False):
    """One JSON Schema node as the OpenAPI v2 schema object it came from."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in sorted(schema.items()):
        if key == "$ref":
            out["$ref"] = value.replace("#/$defs/", "#/definitions/")
        elif key == "type":
            types = [t for t in (value if isinstance(value, list) else [value]) if t != "null"]
            if len(types) == 1:
                out["type"] = types[0]
        elif key == "properties":
            props = {}
            for name, prop in sorted(value.items()):
                converted = convert(prop)
                # openapi2jsonschema pins apiVersion and kind of each kind to one value; upstream does not.
                if top_level_kind and name in ("apiVersion", "kind"):
                    converted.pop("enum", None)
                props[name] = converted
            out["properties"] = props
        elif key in ("items", "additionalProperties"):
            out[key] = convert(value) if isinstance(value, dict) else value
        elif key == "enum":
            out["enum"] = [v for v in value if v is not None]
        elif key in KEPT or key.startswith("x-kubernetes-"):
            out[key] = value
    # A property that is only a reference carries nothing else in upstream's document either.
    return out


def installed_schemas():
    """The installed kubernetes-validate's schema folder (it must be 1.37.0, the pinned input)."""
    try:
        import kubernetes_validate
        from importlib.metadata import version
    except ImportError:
        sys.exit("generate_openapi.py: no schema folder given and kubernetes-validate is not installed "
                 "(python3 -m pip install kubernetes-validate==1.37.0)")
    if version("kubernetes-validate") != PINNED:
        sys.exit(f"generate_openapi.py: kubernetes-validate {version('kubernetes-validate')} is installed, "
                 f"the tables come from {PINNED} (python3 -m pip install kubernetes-validate=={PINNED})")
    return os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return
    check = "--check" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != "--check"]
    if any(a.startswith("-") for a in args) or len(args) > 2:
        sys.exit("usage: generate_openapi.py [<schema-dir> [<output>]] [--check] (see --help)")
    source = args[0] if args else installed_schemas()
    if not os.path.isfile(os.path.join(source, f"v1.{FIRST}.0-local", "_definitions.json")):
        sys.exit(f"generate_openapi.py: {source} holds no v1.{FIRST}.0-local/_definitions.json: "
                 "not kubernetes-validate's schema folder")
    here = os.path.dirname(os.path.abspath(__file__))
    output = args[1] if len(args) > 1 else os.path.join(here, "openapi.json")
    spans = {}  # name -> [{"from", "to", "schema"}], in minor order
    for minor in range(FIRST, LAST + 1):
        path = os.path.join(source, f"v1.{minor}.0-local", "_definitions.json")
        with open(path) as f:
            definitions = json.load(f)["$defs"]
        for name, schema in sorted(definitions.items()):
            converted = SPECIAL.get(name) or convert(schema, "x-kubernetes-group-version-kind" in schema)
            history = spans.setdefault(name, [])
            if history and history[-1]["to"] == minor - 1 and history[-1]["schema"] == converted:
                history[-1]["to"] = minor
            else:
                history.append({"from": minor, "to": minor, "schema": converted})
    text = json.dumps({"definitions": spans}, sort_keys=True, separators=(",", ":")) + "\n"
    if check:
        with open(output, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{output} is out of date: rerun without --check")
        print(f"{output} is up to date")
        return
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    variants = sum(len(h) for h in spans.values())
    print(f"{output}: {len(spans)} definitions, {variants} variants over 1.{FIRST}-1.{LAST}", file=sys.stderr)


if __name__ == "__main__":
    main()
