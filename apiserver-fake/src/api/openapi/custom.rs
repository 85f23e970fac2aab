//! The OpenAPI definitions of custom resources, as apiextensions-apiserver's OpenAPI builder
//! (`pkg/controller/openapi/builder/builder.go`) makes them from each served CRD version:
//!
//! - the kind's definition is named after the reversed group, the version and the kind
//!   (`stable.example.com/v1 CronTab` → `com.example.stable.v1.CronTab`, kube-openapi's
//!   `ToRESTFriendlyName`), and the list kind's likewise (`…CronTabList`);
//! - the kind's definition is the version's `openAPIV3Schema` as a structural schema holds it (other
//!   keywords dropped), with `x-kubernetes-int-or-string` unfolded into its `anyOf` (`Unfold`), then
//!   `apiVersion`, `kind` and `metadata` (a reference to `ObjectMeta`) set at the root and in every
//!   `x-kubernetes-embedded-resource` (`buildKubeNative`, `addEmbeddedProperties`), and
//!   `x-kubernetes-group-version-kind`;
//! - for OpenAPI v2 the schema first loses what v2 cannot say (`openapi/v2/conversion.go`
//!   `ToStructuralOpenAPIV2`): `allOf`/`anyOf`/`oneOf`/`not`; a `nullable` field's type, items and
//!   properties; the items and properties (and `object` type) under `x-kubernetes-preserve-unknown-fields`;
//!   an `array` type without items; required fields that are nullable. A root preserving unknown fields
//!   (or a version without a schema) is just `{"type": "object"}`, so kubectl validates nothing there;
//! - the list kind is `{apiVersion, items: [kind], kind, metadata: ListMeta}` (`buildListSchema`).
//!
//! References use the v2 form (`#/definitions/…`); the v3 document rewrites them as it does for
//! built-in definitions.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use crate::api::catalog::{ApiResource, ServedApis};

use super::definitions::V2_REF_PREFIX;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const PRESERVE_UNKNOWN_FIELDS: &str = "x-kubernetes-preserve-unknown-fields";
const EMBEDDED_RESOURCE: &str = "x-kubernetes-embedded-resource";
const INT_OR_STRING: &str = "x-kubernetes-int-or-string";

/// Upstream's descriptions of the type and object metadata properties it adds.
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const EMBEDDED_API_VERSION_DOC: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DOC: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The keywords a structural schema keeps (`schema.Structural`: generic, extensions, value
/// validations); anything else in a CRD's schema (`example`, `externalDocs`, `$schema`, …) is not
/// published.
const STRUCTURAL_KEYWORDS: &[&str] = &[
    "description",
    "type",
    "title",
    "default",
    "nullable",
    "format",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "items",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// Which document the definitions are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `/openapi/v2`: converted to what OpenAPI v2 (and kubectl reading it) can take.
    V2,
    /// `/openapi/v3/apis/<group>/<version>`.
    V3,
}

/// The definitions of the served custom resources, laid over a minor's built-in ones.
#[derive(Debug, Default)]
pub struct CustomDefinitions {
    schemas: BTreeMap<String, Value>,
    by_kind: HashMap<(String, String, String), String>,
}

impl CustomDefinitions {
    /// The definitions of every custom resource `served` serves.
    pub fn of_served(served: &ServedApis, flavor: Flavor) -> Self {
        let mut out = Self::default();
        for group in &served.groups {
            for version in &group.versions {
                out.add_group_version(&group.name, &version.version, &version.resources, flavor);
            }
        }
        out
    }

    /// The definitions of the custom resources among `resources` of one group-version.
    pub fn of_group_version(group: &str, version: &str, resources: &[ApiResource], flavor: Flavor) -> Self {
        let mut out = Self::default();
        out.add_group_version(group, version, resources, flavor);
        out
    }

    fn add_group_version(&mut self, group: &str, version: &str, resources: &[ApiResource], flavor: Flavor) {
        for resource in resources {
            let Some(crd) = &resource.crd_schema else {
                continue;
            };
            let kind_name = definition_name(group, version, &resource.kind);
            let list_name = definition_name(group, version, &crd.list_kind);
            self.schemas.insert(
                kind_name.clone(),
                kind_definition(
                    group,
                    version,
                    &resource.kind,
                    crd.open_api_v3_schema.as_ref(),
                    flavor,
                ),
            );
            self.schemas.insert(
                list_name.clone(),
                list_definition(group, version, &resource.kind, &crd.list_kind, &resource.name),
            );
            let key = |kind: &str| (group.to_owned(), version.to_owned(), kind.to_owned());
            self.by_kind.insert(key(&resource.kind), kind_name);
            // The path builder asks for `<Kind>List`; a CRD may name its list kind otherwise.
            self.by_kind
                .insert(key(&format!("{}List", resource.kind)), list_name.clone());
            self.by_kind.insert(key(&crd.list_kind), list_name);
        }
    }

    /// The name of the definition of a custom group/version/kind.
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_kind
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
            .map(String::as_str)
    }

    /// The definition named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name)
    }
}

/// kube-openapi's `ToRESTFriendlyName` of `<group>/<version>.<kind>`: the group's labels reversed
/// (`stable.example.com`, `v1`, `CronTab` → `com.example.stable.v1.CronTab`).
pub(crate) fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

fn reference(name: &str, description: &str) -> Value {
    json!({"$ref": format!("{V2_REF_PREFIX}{name}"), "description": description})
}

fn flag(schema: &Map<String, Value>, extension: &str) -> bool {
    schema.get(extension).and_then(Value::as_bool) == Some(true)
}

/// The definition of a custom kind (upstream `buildKubeNative`).
pub(crate) fn kind_definition(
    group: &str,
    version: &str,
    kind: &str,
    schema: Option<&Value>,
    flavor: Flavor,
) -> Value {
    let structural = schema
        .map(structural)
        .filter(|s| !(flavor == Flavor::V2 && flag(s, PRESERVE_UNKNOWN_FIELDS)));
    let mut definition = match structural {
        Some(mut schema) => {
            unfold(&mut schema);
            if flavor == Flavor::V2 {
                to_v2(&mut schema);
            }
            set_properties(
                &mut schema,
                [
                    ("metadata", reference(OBJECT_META, METADATA_DOC)),
                    (
                        "apiVersion",
                        json!({"type": "string", "description": API_VERSION_DOC}),
                    ),
                    ("kind", json!({"type": "string", "description": KIND_DOC})),
                ],
            );
            sort_properties(&mut schema);
            add_embedded_properties(&mut schema, flavor);
            schema
        }
        None => {
            let mut object = Map::new();
            object.insert("type".to_owned(), json!("object"));
            object
        }
    };
    definition.insert(
        "x-kubernetes-group-version-kind".to_owned(),
        gvk(group, version, kind),
    );
    Value::Object(definition)
}

/// The definition of a custom list kind (upstream `buildListSchema`).
pub(crate) fn list_definition(
    group: &str,
    version: &str,
    kind: &str,
    list_kind: &str,
    plural: &str,
) -> Value {
    let items = format!(
        "List of {plural}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
    );
    json!({
        "description": format!("{list_kind} is a list of {kind}"),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DOC},
            "items": {
                "type": "array",
                "description": items,
                "items": {"$ref": format!("{V2_REF_PREFIX}{}", definition_name(group, version, kind))},
            },
            "kind": {"type": "string", "description": KIND_DOC},
            "metadata": reference(LIST_META, LIST_METADATA_DOC),
        },
        "x-kubernetes-group-version-kind": gvk(group, version, list_kind),
    })
}

/// `schema` with only the keywords a structural schema keeps, recursively (property names and
/// `default`/`enum` values are data); the `true`-only extensions are left out when `false`.
fn structural(schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(map) = schema.as_object() else {
        return out;
    };
    for (key, value) in map {
        if !STRUCTURAL_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        let value = match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => Value::Object(
                properties
                    .iter()
                    .map(|(name, p)| (name.clone(), Value::Object(structural(p))))
                    .collect(),
            ),
            ("items" | "additionalProperties" | "not", Value::Object(_)) => Value::Object(structural(value)),
            ("allOf" | "anyOf" | "oneOf", Value::Array(items)) => {
                Value::Array(items.iter().map(|i| Value::Object(structural(i))).collect())
            }
            (PRESERVE_UNKNOWN_FIELDS | EMBEDDED_RESOURCE | INT_OR_STRING, Value::Bool(false)) => continue,
            (_, other) => other.clone(),
        };
        out.insert(key.clone(), value);
    }
    out
}

/// Calls `visit` on `schema` and then on every schema below it (properties, items, map values), as
/// upstream's `structuralschema.Visitor` does.
fn visit(schema: &mut Map<String, Value>, visit_one: &mut impl FnMut(&mut Map<String, Value>)) {
    visit_one(schema);
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(p) = property {
                visit(p, visit_one);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(child)) = schema.get_mut(key) {
            visit(child, visit_one);
        }
    }
}

/// Upstream `Structural.Unfold`: an `x-kubernetes-int-or-string` says so in value validations too,
/// `anyOf: [{type: integer}, {type: string}]` (or prepended to `allOf` when `anyOf` is taken).
fn unfold(schema: &mut Map<String, Value>) {
    visit(schema, &mut |s| {
        if !flag(s, INT_OR_STRING) {
            return;
        }
        let pattern = json!([{"type": "integer"}, {"type": "string"}]);
        if s.get("anyOf") == Some(&pattern)
            || s.get("allOf")
                .and_then(|a| a.get(0))
                .and_then(|first| first.get("anyOf"))
                == Some(&pattern)
        {
            return;
        }
        if s.contains_key("anyOf") {
            let mut all = vec![json!({"anyOf": pattern})];
            if let Some(Value::Array(existing)) = s.remove("allOf") {
                all.extend(existing);
            }
            s.insert("allOf".to_owned(), Value::Array(all));
        } else {
            s.insert("anyOf".to_owned(), pattern);
        }
    });
}

/// Upstream `ToStructuralOpenAPIV2` (see the module docs).
fn to_v2(schema: &mut Map<String, Value>) {
    visit(schema, &mut |s| {
        for junctor in ["allOf", "oneOf", "anyOf", "not"] {
            s.remove(junctor);
        }
        if s.remove("nullable").and_then(|n| n.as_bool()) == Some(true) {
            s.remove("type");
            s.remove("items");
            s.remove("properties");
        }
        let preserve = flag(s, PRESERVE_UNKNOWN_FIELDS);
        if preserve {
            s.remove("items");
            s.remove("properties");
        }
        let typed = |s: &Map<String, Value>, t: &str| s.get("type").and_then(Value::as_str) == Some(t);
        if !s.contains_key("items") && typed(s, "array") {
            s.remove("type");
        }
        if preserve && typed(s, "object") {
            s.remove("type");
        }
        let nullable_fields: Vec<String> = s
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .filter(|(_, p)| p.get("nullable").and_then(Value::as_bool) == Some(true))
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default();
        let nullable_values = s
            .get("additionalProperties")
            .and_then(|a| a.get("nullable"))
            .and_then(Value::as_bool)
            == Some(true);
        if nullable_values {
            s.remove("required");
        } else if let Some(Value::Array(required)) = s.get_mut("required") {
            required.retain(|name| {
                !name
                    .as_str()
                    .is_some_and(|n| nullable_fields.iter().any(|f| f == n))
            });
            if required.is_empty() {
                s.remove("required");
            }
        }
    });
}

/// Sets `entries` in the schema's `properties` (made an object when it is not one).
fn set_properties(schema: &mut Map<String, Value>, entries: [(&str, Value); 3]) {
    let mut properties = match schema.remove("properties") {
        Some(Value::Object(properties)) => properties,
        _ => Map::new(),
    };
    for (name, property) in entries {
        properties.insert(name.to_owned(), property);
    }
    schema.insert("properties".to_owned(), Value::Object(properties));
}

/// Properties in name order, as kube-openapi (Go maps) writes them.
fn sort_properties(schema: &mut Map<String, Value>) {
    visit(schema, &mut |s| {
        if let Some(Value::Object(properties)) = s.get_mut("properties") {
            let sorted: BTreeMap<String, Value> = std::mem::take(properties).into_iter().collect();
            properties.extend(sorted);
        }
    });
}

/// Upstream `addEmbeddedProperties`: every `x-kubernetes-embedded-resource` gets `apiVersion`, `kind`
/// and `metadata`, the first two required (not in v2 where it also preserves unknown fields).
fn add_embedded_properties(schema: &mut Map<String, Value>, flavor: Flavor) {
    visit(schema, &mut |s| {
        if !flag(s, EMBEDDED_RESOURCE) || (flavor == Flavor::V2 && flag(s, PRESERVE_UNKNOWN_FIELDS)) {
            return;
        }
        set_properties(
            s,
            [
                (
                    "apiVersion",
                    json!({"type": "string", "description": EMBEDDED_API_VERSION_DOC}),
                ),
                (
                    "kind",
                    json!({"type": "string", "description": EMBEDDED_KIND_DOC}),
                ),
                ("metadata", reference(OBJECT_META, METADATA_DOC)),
            ],
        );
        let required = s.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(required) = required {
            for name in ["kind", "apiVersion"] {
                if !required.iter().any(|r| r == name) {
                    required.push(json!(name));
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "description": "A CronTab.", "example": {"x": 1}, "properties": {
            "spec": {"type": "object", "required": ["cronSpec", "note"], "properties": {
                "cronSpec": {"type": "string", "description": "The schedule."},
                "note": {"type": "string", "nullable": true},
                "port": {"x-kubernetes-int-or-string": true},
                "choice": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "^b"}]},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"a": {"type": "string"}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true},
            }},
        }})
    }

    #[test]
    fn names_reverse_the_group() {
        assert_eq!(
            definition_name("stable.example.com", "v1", "CronTab"),
            "com.example.stable.v1.CronTab"
        );
        assert_eq!(
            definition_name("example", "v2beta1", "Foo"),
            "example.v2beta1.Foo"
        );
    }

    #[test]
    fn kind_definition_has_type_meta_object_meta_and_its_gvk() {
        let v3 = kind_definition("stable.example.com", "v1", "CronTab", Some(&schema()), Flavor::V3);
        assert_eq!(
            v3["x-kubernetes-group-version-kind"],
            json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
        );
        assert_eq!(
            v3["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(v3["properties"]["apiVersion"]["type"], "string");
        assert_eq!(v3["properties"]["kind"]["type"], "string");
        let names: Vec<&String> = v3["properties"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["apiVersion", "kind", "metadata", "spec"]);
        assert!(v3.get("example").is_none(), "not a structural keyword");
        let spec = &v3["properties"]["spec"];
        assert_eq!(spec["properties"]["cronSpec"]["description"], "The schedule.");
        // v3 keeps what v3 can say; int-or-string is unfolded.
        assert_eq!(spec["properties"]["note"]["nullable"], true);
        assert_eq!(
            spec["properties"]["port"]["anyOf"],
            json!([{"type": "integer"}, {"type": "string"}])
        );
        assert!(spec["properties"]["choice"]["oneOf"].is_array());
        assert_eq!(spec["properties"]["free"]["properties"]["a"]["type"], "string");
        // Embedded resources get type and object metadata.
        let template = &spec["properties"]["template"];
        assert_eq!(
            template["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(template["required"], json!(["kind", "apiVersion"]));
    }

    #[test]
    fn v2_drops_what_v2_cannot_say() {
        let v2 = kind_definition("stable.example.com", "v1", "CronTab", Some(&schema()), Flavor::V2);
        let spec = &v2["properties"]["spec"];
        assert_eq!(
            spec["required"],
            json!(["cronSpec"]),
            "nullable fields are not required"
        );
        assert_eq!(spec["properties"]["note"], json!({}));
        assert_eq!(
            spec["properties"]["port"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(spec["properties"]["choice"], json!({"type": "string"}));
        assert_eq!(
            spec["properties"]["free"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        // An embedded resource preserving unknown fields gets no metadata in v2.
        assert!(spec["properties"]["template"].get("properties").is_none());
        // A root preserving unknown fields, or no schema at all: just an object.
        let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let expected = json!({"type": "object", "x-kubernetes-group-version-kind":
            [{"group": "g.io", "kind": "K", "version": "v1"}]});
        assert_eq!(
            kind_definition("g.io", "v1", "K", Some(&free), Flavor::V2),
            expected
        );
        assert_eq!(kind_definition("g.io", "v1", "K", None, Flavor::V3), expected);
        let v3 = kind_definition("g.io", "v1", "K", Some(&free), Flavor::V3);
        assert_eq!(v3["x-kubernetes-preserve-unknown-fields"], true);
        assert!(v3["properties"]["metadata"].is_object());
    }

    #[test]
    fn list_kind_lists_the_kind() {
        let list = list_definition("stable.example.com", "v1", "CronTab", "CronTabList", "crontabs");
        assert_eq!(
            list["properties"]["items"]["items"]["$ref"],
            "#/definitions/com.example.stable.v1.CronTab"
        );
        assert_eq!(
            list["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
        );
        assert_eq!(list["required"], json!(["items"]));
        assert_eq!(
            list["x-kubernetes-group-version-kind"],
            json!([{"group": "stable.example.com", "kind": "CronTabList", "version": "v1"}])
        );
    }
}
