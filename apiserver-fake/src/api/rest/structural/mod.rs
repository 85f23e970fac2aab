//! Custom resources against their CRD version's structural schema, as apiextensions-apiserver decodes
//! and validates them:
//!
//! - [`coerce`] is what its decoder does to every object it reads (`unstructuredSchemaCoercer.apply` in
//!   `pkg/apiserver/customresource_handler.go`): the root `metadata` is read as an `ObjectMeta`
//!   (`schema/objectmeta`), fields the schema does not declare are pruned (`schema/pruning/algorithm.go`:
//!   kept under `x-kubernetes-preserve-unknown-fields`, and `apiVersion`/`kind`/`metadata` kept at the
//!   root and in `x-kubernetes-embedded-resource` objects), nulls of non-nullable fields without a
//!   default are dropped (`PruneNonNullableNullsWithoutDefaults`), and the `metadata` of embedded
//!   resources is read as an `ObjectMeta` too (`objectmeta.Coerce`). What was dropped comes back as
//!   paths (`spec.foo`, `spec.items[0].bar`, `metadata.colour`), in upstream's order: root metadata,
//!   pruned fields (sorted), embedded metadata (sorted); they become the strict decoding error
//!   `unknown field "spec.foo"` or warnings.
//! - [`validate`] is the schema validation of the registry's strategy
//!   (`pkg/registry/customresource/validator.go` → `validation.ValidateCustomResource`, kube-openapi's
//!   validators), with upstream's ratcheting of unchanged values on updates ([`schema_validation`]):
//!   wrong types, missing required fields, `enum`, lengths, patterns, bounds and sizes are causes with
//!   kube-openapi's messages (`spec.replicas: Invalid value: "string": spec.replicas in body must be of
//!   type integer: "string"`).
//! - `defaulting` applies the schema's `default`s.
//! - [`validation_rules`] runs the schema's `x-kubernetes-validations` CEL rules.

pub(crate) mod defaulting;
pub(crate) mod rule_cost;
pub mod schema_validation;
pub mod validation_rules;

use serde_json::{Map, Value};

use super::field_validation::coerce_object_meta;
use crate::api::openapi::definitions::Definitions;

const PRESERVE_UNKNOWN_FIELDS: &str = "x-kubernetes-preserve-unknown-fields";
const EMBEDDED_RESOURCE: &str = "x-kubernetes-embedded-resource";
const INT_OR_STRING: &str = "x-kubernetes-int-or-string";

/// `apiVersion`, `kind` and `metadata`: kept by pruning at the root and in embedded resources.
fn is_meta_field(name: &str) -> bool {
    matches!(name, "apiVersion" | "kind" | "metadata")
}

fn flag(schema: &Value, extension: &str) -> bool {
    schema.get(extension).and_then(Value::as_bool) == Some(true)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// The schema of map values: `Some(Some(schema))` for `additionalProperties: {…}`, `Some(None)` for
/// `additionalProperties: true` (values without a schema), `None` when unset.
fn additional_properties(schema: &Value) -> Option<Option<&Value>> {
    match schema.get("additionalProperties") {
        Some(Value::Bool(true)) => Some(None),
        Some(additional @ Value::Object(_)) => Some(Some(additional)),
        _ => None,
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Prunes, drops non-nullable nulls and coerces metadata of a custom resource read against `schema`
/// (its CRD version's `openAPIV3Schema`); the paths of the unknown fields dropped, as upstream orders them.
pub fn coerce(definitions: &'static Definitions, schema: &Value, object: &mut Value) -> Vec<String> {
    let Some(map) = object.as_object_mut() else {
        return Vec::new();
    };
    let mut unknown = coerce_object_meta(definitions, map, "");
    let mut pruned = Vec::new();
    prune(object, Some(schema), true, "", &mut pruned);
    pruned.sort();
    unknown.extend(pruned);
    drop_non_nullable_nulls(object, schema);
    let mut embedded = Vec::new();
    coerce_embedded(definitions, object, schema, false, "", &mut embedded);
    embedded.sort();
    unknown.extend(embedded);
    unknown
}

/// Upstream `prune`: drops the fields of `value` that `schema` does not declare, recording their paths.
/// `embedded` marks a resource root (the object itself, or an `x-kubernetes-embedded-resource`).
fn prune(value: &mut Value, schema: Option<&Value>, embedded: bool, path: &str, found: &mut Vec<String>) {
    if let Some(schema) = schema
        && flag(schema, PRESERVE_UNKNOWN_FIELDS)
    {
        skip_prune(value, schema, embedded, path, found);
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(schema) = schema else {
                found.extend(map.keys().map(|k| child(path, k)));
                map.clear();
                return;
            };
            let embedded = embedded || flag(schema, EMBEDDED_RESOURCE);
            let declared = properties(schema);
            let additional = additional_properties(schema);
            map.retain(|key, field| {
                if embedded && is_meta_field(key) {
                    return true;
                }
                let at = child(path, key);
                if let Some(property) = declared.and_then(|p| p.get(key)) {
                    prune(field, Some(property), false, &at, found);
                    true
                } else if let Some(additional) = additional {
                    prune(field, additional, false, &at, found);
                    true
                } else {
                    if !is_meta_field(key) || !path.is_empty() {
                        found.push(at);
                    }
                    false
                }
            });
        }
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            for (index, item) in items.iter_mut().enumerate() {
                prune(item, item_schema, false, &format!("{path}[{index}]"), found);
            }
        }
        _ => {}
    }
}

/// Upstream `skipPrune`: under `x-kubernetes-preserve-unknown-fields` undeclared fields stay, declared
/// ones are pruned by their own schemas.
fn skip_prune(value: &mut Value, schema: &Value, embedded: bool, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let embedded = embedded || flag(schema, EMBEDDED_RESOURCE);
            let declared = properties(schema);
            let additional = additional_properties(schema);
            for (key, field) in map.iter_mut() {
                if embedded && is_meta_field(key) {
                    continue;
                }
                let at = child(path, key);
                if let Some(property) = declared.and_then(|p| p.get(key)) {
                    prune(field, Some(property), false, &at, found);
                } else if let Some(additional) = additional {
                    prune(field, additional, false, &at, found);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_schema, false, &format!("{path}[{index}]"), found);
                }
            }
        }
        _ => {}
    }
}

/// Upstream `PruneNonNullableNullsWithoutDefaults`: a `null` where the schema neither allows it
/// (`nullable: true`) nor has a default is dropped, as if the field were not there.
fn drop_non_nullable_nulls(value: &mut Value, schema: &Value) {
    let keeps_null =
        |s: &Value| s.get("nullable").and_then(Value::as_bool) == Some(true) || s.get("default").is_some();
    match value {
        Value::Object(map) => {
            let declared = properties(schema);
            let additional = additional_properties(schema).flatten();
            map.retain(|key, field| {
                let field_schema = declared.and_then(|p| p.get(key)).or(additional);
                match field_schema {
                    Some(s) if field.is_null() => keeps_null(s),
                    Some(s) => {
                        drop_non_nullable_nulls(field, s);
                        true
                    }
                    None => true,
                }
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                items
                    .iter_mut()
                    .for_each(|item| drop_non_nullable_nulls(item, item_schema));
            }
        }
        _ => {}
    }
}

/// Upstream `objectmeta.Coerce` below the root: the `metadata` of every embedded resource is read as
/// an `ObjectMeta` (its unknown fields recorded), and an `apiVersion`/`kind` there that is not a
/// string is dropped.
fn coerce_embedded(
    definitions: &'static Definitions,
    value: &mut Value,
    schema: &Value,
    embedded_root: bool,
    path: &str,
    found: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            if embedded_root || flag(schema, EMBEDDED_RESOURCE) {
                map.retain(|key, field| !matches!(key.as_str(), "apiVersion" | "kind") || field.is_string());
                if !path.is_empty() {
                    found.extend(coerce_object_meta(definitions, map, path));
                }
            }
            let declared = properties(schema);
            let additional = additional_properties(schema).flatten();
            for (key, field) in map.iter_mut() {
                if let Some(property) = declared.and_then(|p| p.get(key)) {
                    coerce_embedded(definitions, field, property, false, &child(path, key), found);
                } else if let Some(additional) = additional {
                    coerce_embedded(
                        definitions,
                        field,
                        additional,
                        false,
                        &format!("{path}[{key}]"),
                        found,
                    );
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter_mut().enumerate() {
                    coerce_embedded(
                        definitions,
                        item,
                        item_schema,
                        false,
                        &format!("{path}[{index}]"),
                        found,
                    );
                }
            }
        }
        _ => {}
    }
}

/// The JSON type of a value as kube-openapi names it (`integer` for whole numbers, Go's decoding of
/// `1.0` included).
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub use schema_validation::validate;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::catalog::KubeVersion;

    fn defs() -> &'static Definitions {
        Definitions::of(KubeVersion { major: 1, minor: 36 })
    }

    fn crontab_schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["cronSpec"], "properties": {
                "cronSpec": {"type": "string"},
                "replicas": {"type": "integer"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "port": {"type": "integer"}, "name": {"type": "string"}}}},
                "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                           "properties": {"strict": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
                "note": {"type": "string", "nullable": true},
                "image": {"type": "string"},
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }})
    }

    #[test]
    fn prunes_nested_fields_arrays_of_objects_and_metadata() {
        let mut object = json!({
            "apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "c", "colour": "red", "labels": {"a": "b"}},
            "spec": {"cronSpec": "* * * * *", "foo": 1,
                     "ports": [{"port": 80, "bar": true}, {"name": "x"}]},
            "extra": {"deep": 1},
        });
        let unknown = coerce(defs(), &crontab_schema(), &mut object);
        assert_eq!(
            unknown,
            ["metadata.colour", "extra", "spec.foo", "spec.ports[0].bar"]
        );
        assert_eq!(
            object,
            json!({
                "apiVersion": "stable.example.com/v1", "kind": "CronTab",
                "metadata": {"name": "c", "labels": {"a": "b"}},
                "spec": {"cronSpec": "* * * * *", "ports": [{"port": 80}, {"name": "x"}]},
            })
        );
    }

    #[test]
    fn preserve_unknown_fields_keeps_undeclared_fields_but_prunes_declared_ones() {
        let mut object = json!({
            "metadata": {"name": "c"},
            "spec": {"cronSpec": "x", "config": {"anything": {"goes": 1}, "strict": {"a": "1", "b": 2}},
                     "labels": {"k": "v"}},
            "status": {"whatever": [1, 2]},
        });
        let unknown = coerce(defs(), &crontab_schema(), &mut object);
        assert_eq!(unknown, ["spec.config.strict.b"]);
        assert_eq!(
            object["spec"]["config"],
            json!({"anything": {"goes": 1}, "strict": {"a": "1"}})
        );
        assert_eq!(object["spec"]["labels"], json!({"k": "v"}));
        assert_eq!(object["status"], json!({"whatever": [1, 2]}));
        // A schema preserving everything at the root prunes nothing.
        let mut free = json!({"metadata": {"name": "c"}, "spec": {"anything": 1}});
        let preserve = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert!(coerce(defs(), &preserve, &mut free).is_empty());
        assert_eq!(free["spec"]["anything"], 1);
    }

    #[test]
    fn embedded_resources_keep_type_meta_and_coerce_their_metadata() {
        let mut object = json!({
            "metadata": {"name": "c"},
            "spec": {"cronSpec": "x", "template": {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "shade": "blue"},
                "spec": {"x": "y", "z": 1}}},
        });
        let unknown = coerce(defs(), &crontab_schema(), &mut object);
        assert_eq!(unknown, ["spec.template.spec.z", "spec.template.metadata.shade"]);
        assert_eq!(
            object["spec"]["template"],
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": "y"}})
        );
    }

    #[test]
    fn nulls_of_non_nullable_fields_are_dropped() {
        let mut object = json!({"spec": {"cronSpec": "x", "image": null, "note": null}});
        assert!(coerce(defs(), &crontab_schema(), &mut object).is_empty());
        assert_eq!(object["spec"], json!({"cronSpec": "x", "note": null}));
    }

    #[test]
    fn wrong_types_and_missing_required_fields_are_invalid() {
        let object = json!({"spec": {"replicas": "string", "ports": [{"port": 1.5}, {"port": 2.0}]}});
        let causes = validate(
            &crontab_schema(),
            &object,
            None,
            schema_validation::Options {
                version: KubeVersion { major: 1, minor: 36 },
                ratcheting: true,
            },
        );
        let messages: Vec<(String, String, String)> = causes
            .iter()
            .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
            .collect();
        assert_eq!(
            messages,
            [
                (
                    "FieldValueRequired".to_owned(),
                    "spec.cronSpec".to_owned(),
                    "Required value".to_owned()
                ),
                (
                    "FieldValueTypeInvalid".to_owned(),
                    "spec.replicas".to_owned(),
                    r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#
                        .to_owned()
                ),
                (
                    "FieldValueTypeInvalid".to_owned(),
                    "spec.ports[0].port".to_owned(),
                    r#"Invalid value: "number": spec.ports[0].port in body must be of type integer: "number""#
                        .to_owned()
                ),
            ]
        );
    }
}
