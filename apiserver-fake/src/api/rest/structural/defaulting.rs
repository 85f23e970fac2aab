//! Structural-schema defaulting of custom resources: upstream's
//! `apiextensions-apiserver/pkg/apiserver/schema/defaulting/algorithm.go` (`Default`).
//!
//! Upstream runs it wherever a custom resource is decoded: the body of a create or update and the
//! result of a patch (with the request version's schema), and every object read from storage (with the
//! storage version's schema), so objects stored before a default was added read back defaulted.
//! A field gets its `default` when it is absent, or `null` while its schema is not `nullable`; defaults
//! are applied top-down, so a defaulted object gets the defaults of its own properties too. Defaults
//! apply inside `properties`, `items` and `additionalProperties`; `metadata` is only defaulted where
//! the CRD's schema says (upstream's CRD validation forbids defaults there except `name`/`generateName`
//! of embedded resources, a check this fake does not make).

use serde_json::{Map, Value};

fn nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

/// Upstream `isNonNullableNull`: a `null` whose schema does not allow it.
fn is_non_nullable_null(value: &Value, schema: Option<&Value>) -> bool {
    value.is_null() && schema.is_some_and(|s| !nullable(s))
}

/// Applies the `default`s of `schema` to `value` (see the module docs).
pub(crate) fn apply(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => default_object(schema, map),
        Value::Array(items) => {
            let item_schema = schema.get("items").filter(|s| s.is_object());
            for item in items.iter_mut() {
                if is_non_nullable_null(item, item_schema)
                    && let Some(default) = item_schema.and_then(|s| s.get("default"))
                {
                    *item = default.clone();
                }
                if let Some(item_schema) = item_schema {
                    apply(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn default_object(schema: &Value, map: &mut Map<String, Value>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let Some(default) = property.get("default") else {
            continue;
        };
        let missing = map
            .get(name)
            .is_none_or(|v| is_non_nullable_null(v, Some(property)));
        if missing {
            map.insert(name.clone(), default.clone());
        }
    }
    let additional = schema.get("additionalProperties").filter(|s| s.is_object());
    for (name, field) in map.iter_mut() {
        if let Some(property) = properties.and_then(|p| p.get(name)) {
            apply(property, field);
        } else if let Some(additional) = additional {
            if is_non_nullable_null(field, Some(additional))
                && let Some(default) = additional.get("default")
            {
                *field = default.clone();
            }
            apply(additional, field);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "note": {"type": "string", "nullable": true, "default": "n"},
                "ports": {"type": "array", "items": {"type": "object", "default": {"port": 1},
                    "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
                "limits": {"type": "object", "additionalProperties": {"type": "object",
                    "properties": {"max": {"type": "integer", "default": 10}}}},
            }},
        }})
    }

    #[test]
    fn absent_fields_get_defaults_and_defaults_get_their_own_defaults() {
        let mut object = json!({"metadata": {"name": "x"}});
        apply(&schema(), &mut object);
        assert_eq!(
            object,
            json!({"metadata": {"name": "x"}, "spec": {"replicas": 1, "mode": "fast", "note": "n"}})
        );
    }

    #[test]
    fn set_values_stay_and_non_nullable_nulls_are_defaulted() {
        let mut object = json!({"spec": {"replicas": null, "mode": "slow", "note": null}});
        apply(&schema(), &mut object);
        assert_eq!(object["spec"]["replicas"], 1, "a non-nullable null is replaced");
        assert_eq!(object["spec"]["mode"], "slow");
        assert_eq!(object["spec"]["note"], Value::Null, "a nullable null stays");
    }

    #[test]
    fn items_and_additional_properties_are_defaulted() {
        let mut object =
            json!({"spec": {"ports": [{"port": 80}, null], "limits": {"a": {}, "b": {"max": 2}}}});
        apply(&schema(), &mut object);
        assert_eq!(
            object["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP"}, {"port": 1, "protocol": "TCP"}])
        );
        assert_eq!(
            object["spec"]["limits"],
            json!({"a": {"max": 10}, "b": {"max": 2}})
        );
    }
}
