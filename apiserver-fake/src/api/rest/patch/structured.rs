//! Server-side apply's merge of an applied configuration over the live object, as
//! sigs.k8s.io/structured-merge-diff's `typed.TypedValue.Merge` (the `mergingWalker` with the
//! keep-the-right-hand-side rule) does with the kind's schema:
//!
//! * objects merge field by field, unless `x-kubernetes-map-type: atomic` (then replaced);
//! * lists are atomic (replaced) unless `x-kubernetes-list-type` says `map` (associative: elements
//!   merge by their `x-kubernetes-list-map-keys`) or `set` (scalars merge as a set);
//! * scalars take the applied value.
//!
//! Where nothing is known (custom resources, whose CRD schemas are not used here yet, and free-form
//! values) structured-merge-diff's deduced schema applies: objects merge, lists are atomic.

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value};

use super::schema::{Field, PatchSchema};
use crate::api::status::{Status, StatusReason};

/// An applied configuration or live object that structured-merge-diff cannot type.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApplyMergeError {
    /// An element of an associative list lacks a key field that has no default.
    #[error(
        "failed to create typed {side} object: {path}: element {index}: associative list with keys has an \
         element that omits key field \"{key}\" (and doesn't have default value)"
    )]
    MissingKeyField {
        side: Side,
        path: String,
        index: usize,
        key: String,
    },
    /// An element of an associative list that is not an object.
    #[error("failed to create typed {side} object: {path}: element {index}: expected map, got {value}")]
    ElementNotMap {
        side: Side,
        path: String,
        index: usize,
        value: String,
    },
    /// Two elements of the applied configuration with the same key.
    #[error("failed to create typed patch object: {path}: duplicate entries for key {key}")]
    DuplicateEntries { path: String, key: String },
}

/// Which object an [`ApplyMergeError`] is about (upstream's "typed live object" / "typed patch object").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Live,
    Patch,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Live => "live",
            Self::Patch => "patch",
        })
    }
}

impl From<ApplyMergeError> for Status {
    /// Upstream's field manager returns these as plain errors: a 500 without a reason.
    fn from(err: ApplyMergeError) -> Status {
        Status::failure(500, StatusReason::Unknown, err.to_string())
    }
}

type Result<T> = std::result::Result<T, ApplyMergeError>;

/// Merges the applied configuration `applied` over `live` (structured-merge-diff's `Merge`).
pub(super) fn structured_merge(live: &Value, applied: &Value, schema: PatchSchema) -> Result<Value> {
    let root = Field::element(schema);
    Ok(merge(Some(live), Some(applied), &root, "")?.unwrap_or_else(|| Value::Object(Map::new())))
}

/// The merge of one value (`mergingWalker.merge`): `None` when the result has no value.
fn merge(lhs: Option<&Value>, rhs: Option<&Value>, field: &Field, path: &str) -> Result<Option<Value>> {
    let Some(rhs) = rhs else {
        return Ok(lhs.cloned());
    };
    let schema = field.schema;
    let object = if schema.is_known() {
        schema.is_object()
    } else {
        rhs.is_object()
    };
    let list = schema.is_list();
    if object && (rhs.is_object() || rhs.is_null()) {
        merge_map(lhs.and_then(Value::as_object), rhs, field, path)
    } else if list && (rhs.is_array() || rhs.is_null()) {
        merge_list(lhs.and_then(Value::as_array), rhs, field, path)
    } else {
        // A scalar, or a value of another shape than the schema's: the applied value.
        Ok(Some(rhs.clone()))
    }
}

/// `mergingWalker.doMap`: atomic or empty objects are replaced, others merge field by field.
fn merge_map(
    lhs: Option<&Map<String, Value>>,
    rhs: &Value,
    field: &Field,
    path: &str,
) -> Result<Option<Value>> {
    let rhs_map = rhs.as_object();
    let empty = lhs.is_none_or(Map::is_empty) && rhs_map.is_none_or(Map::is_empty);
    if field.is_atomic_map() || empty {
        return Ok(Some(rhs.clone()));
    }
    let mut out = Map::new();
    let mut visit = |key: &String, l: Option<&Value>, r: Option<&Value>| -> Result<()> {
        let child = field.schema.field(key);
        match merge(l, r, &child, &format!("{path}.{key}"))? {
            // A null decodes to the field's zero value, which the object omits.
            Some(Value::Null) | None => {}
            Some(value) => {
                out.insert(key.clone(), value);
            }
        }
        Ok(())
    };
    for (key, l) in lhs.into_iter().flatten() {
        visit(key, Some(l), rhs_map.and_then(|r| r.get(key)))?;
    }
    for (key, r) in rhs_map.into_iter().flatten() {
        if !lhs.is_some_and(|l| l.contains_key(key)) {
            visit(key, None, Some(r))?;
        }
    }
    Ok((!out.is_empty()).then_some(Value::Object(out)))
}

/// `mergingWalker.doList`: atomic or empty lists are replaced, sets and associative lists merge.
fn merge_list(lhs: Option<&Vec<Value>>, rhs: &Value, field: &Field, path: &str) -> Result<Option<Value>> {
    let rhs_list = rhs.as_array();
    let empty = lhs.is_none_or(Vec::is_empty) && rhs_list.is_none_or(Vec::is_empty);
    let keys = match field.list_type() {
        Some("map") => Some(field.list_map_keys()),
        Some("set") => None,
        _ => return Ok(Some(rhs.clone())),
    };
    if empty {
        return Ok(Some(rhs.clone()));
    }
    let element = Field::element(field.schema.items());
    let key_of = |side: Side, index: usize, item: &Value| match &keys {
        Some(keys) => associative_key(side, path, index, item, keys, &element.schema),
        None => Ok(format!("={}", item)),
    };
    let index_side =
        |side: Side, list: Option<&Vec<Value>>| -> Result<(Vec<String>, HashMap<String, usize>)> {
            let mut order = Vec::new();
            let mut observed = HashMap::new();
            for (i, item) in list.into_iter().flatten().enumerate() {
                let key = key_of(side, i, item)?;
                if observed.contains_key(&key) {
                    if side == Side::Patch {
                        return Err(ApplyMergeError::DuplicateEntries {
                            path: path.to_owned(),
                            key: format!("[{key}]"),
                        });
                    }
                    continue;
                }
                observed.insert(key.clone(), i);
                order.push(key);
            }
            Ok((order, observed))
        };
    let (rhs_order, rhs_observed) = index_side(Side::Patch, rhs_list)?;
    let (lhs_order, lhs_observed) = index_side(Side::Live, lhs)?;
    let lhs_item = |key: &str| lhs_observed.get(key).and_then(|&i| lhs.and_then(|l| l.get(i)));
    let rhs_item = |key: &str| {
        rhs_observed
            .get(key)
            .and_then(|&i| rhs_list.and_then(|l| l.get(i)))
    };

    // visitListItems: both orders kept, the applied order for the elements both have.
    let mut shared: VecDeque<&String> = rhs_order
        .iter()
        .filter(|k| lhs_observed.contains_key(*k))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut out = Vec::with_capacity(lhs_order.len().max(rhs_order.len()));
    let mut merge_item = |key: &str, l: Option<&Value>, r: Option<&Value>| -> Result<()> {
        out.extend(merge(l, r, &element, &format!("{path}[{key}]"))?);
        Ok(())
    };
    let (mut li, mut ri) = (0, 0);
    while li < lhs_order.len() || ri < rhs_order.len() {
        if li < lhs_order.len() && ri < rhs_order.len() {
            let key = &lhs_order[li];
            if *key == rhs_order[ri] {
                merge_item(key, lhs_item(key), rhs_item(key))?;
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if rhs_observed.contains_key(key) && next_shared.is_some_and(|n| n != key) {
                // A shared element, but not the one due now.
                li += 1;
                continue;
            }
        }
        if li < lhs_order.len() {
            let key = &lhs_order[li];
            if !rhs_observed.contains_key(key) {
                merge_item(key, lhs_item(key), None)?;
                li += 1;
                continue;
            }
        }
        if ri < rhs_order.len() {
            let key = &rhs_order[ri];
            merge_item(key, lhs_item(key), rhs_item(key))?;
            ri += 1;
            if next_shared == Some(key) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok((!out.is_empty()).then_some(Value::Array(out)))
}

/// The key of an associative list's element (structured-merge-diff's `keyedAssociativeListItemToPathElement`):
/// its key fields, a missing one from its schema default.
fn associative_key(
    side: Side,
    path: &str,
    index: usize,
    item: &Value,
    keys: &[&str],
    element: &PatchSchema,
) -> Result<String> {
    let Some(map) = item.as_object() else {
        return Err(ApplyMergeError::ElementNotMap {
            side,
            path: path.to_owned(),
            index,
            value: item.to_string(),
        });
    };
    let mut parts = Vec::with_capacity(keys.len());
    for key in keys {
        let value = match map.get(*key) {
            Some(value) => value.clone(),
            None => element
                .field_default(key)
                .ok_or_else(|| ApplyMergeError::MissingKeyField {
                    side,
                    path: path.to_owned(),
                    index,
                    key: (*key).to_owned(),
                })?,
        };
        parts.push(format!("{key}={value}"));
    }
    Ok(parts.join(","))
}

/// The paths of the atomic lists, maps and structs an apply configuration sets (upstream's
/// `findAtomics` of a mutating admission policy's `validatePatch`), as structured-merge-diff prints
/// them (`.spec.selector`, `.spec.containers[0].args`). A kind without a schema has none.
pub(super) fn atomic_paths(applied: &Value, schema: PatchSchema) -> Vec<String> {
    let mut paths = Vec::new();
    find_atomics(applied, &Field::element(schema), String::new(), &mut paths);
    paths
}

fn find_atomics(value: &Value, field: &Field, path: String, paths: &mut Vec<String>) {
    match value {
        Value::Object(map) if field.schema.is_object() => {
            if field.is_atomic_map() {
                paths.push(path.clone());
            }
            for (key, item) in map {
                let child = field.schema.field(key);
                if child.schema.is_known() {
                    find_atomics(item, &child, format!("{path}.{key}"), paths);
                }
            }
        }
        Value::Array(items) if field.schema.is_list() => {
            if !matches!(field.list_type(), Some("map" | "set")) {
                paths.push(path.clone());
            }
            let element = Field::element(field.schema.items());
            for (index, item) in items.iter().enumerate() {
                find_atomics(item, &element, format!("{path}[{index}]"), paths);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::catalog::KubeVersion;
    use crate::api::openapi::definitions::Definitions;

    fn schema(group: &str, version: &str, kind: &str) -> PatchSchema {
        let definitions = Definitions::of(KubeVersion { major: 1, minor: 36 });
        PatchSchema::of_kind(definitions, group, version, kind)
    }

    fn deployment() -> Value {
        json!({
            "metadata": {"name": "d", "labels": {"app": "d"}, "finalizers": ["a"]},
            "spec": {"template": {"spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "app:1",
                        "args": ["--a", "--b"],
                        "ports": [
                            {"containerPort": 53, "protocol": "TCP", "name": "dns-tcp"},
                            {"containerPort": 53, "protocol": "UDP", "name": "dns"}
                        ]
                    },
                    {"name": "side", "image": "side:1"}
                ],
                "tolerations": [{"key": "a", "operator": "Exists"}],
                "nodeSelector": {"disk": "ssd"}
            }}}
        })
    }

    #[test]
    fn associative_lists_merge_by_their_list_map_keys() {
        let applied = json!({
            "metadata": {"labels": {"tier": "web"}, "finalizers": ["b"]},
            "spec": {"template": {"spec": {"containers": [{
                "name": "app",
                "image": "app:2",
                // protocol omitted: keyed by its default, TCP.
                "ports": [{"containerPort": 53, "name": "dns-over-tcp"}]
            }]}}}
        });
        let merged = structured_merge(&deployment(), &applied, schema("apps", "v1", "Deployment")).unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"app": "d", "tier": "web"}));
        assert_eq!(merged["metadata"]["finalizers"], json!(["a", "b"]));
        let containers = &merged["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["image"], "app:2");
        assert_eq!(containers[0]["args"], json!(["--a", "--b"]));
        assert_eq!(
            containers[0]["ports"],
            json!([
                {"containerPort": 53, "protocol": "TCP", "name": "dns-over-tcp"},
                {"containerPort": 53, "protocol": "UDP", "name": "dns"}
            ])
        );
        assert_eq!(containers[1]["name"], "side");
    }

    #[test]
    fn atomic_lists_and_maps_are_replaced() {
        let applied = json!({"spec": {"template": {"spec": {
            "containers": [{"name": "app", "args": ["--c"]}],
            "tolerations": [{"key": "b", "operator": "Exists"}],
            "nodeSelector": {"zone": "a"}
        }}}});
        let merged = structured_merge(&deployment(), &applied, schema("apps", "v1", "Deployment")).unwrap();
        let spec = &merged["spec"]["template"]["spec"];
        assert_eq!(spec["containers"][0]["args"], json!(["--c"]));
        assert_eq!(spec["tolerations"], json!([{"key": "b", "operator": "Exists"}]));
        assert_eq!(spec["nodeSelector"], json!({"zone": "a"}));
    }

    #[test]
    fn element_order_follows_structured_merge_diff() {
        let applied = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "side", "image": "side:2"},
            {"name": "new", "image": "n"}
        ]}}}});
        let merged = structured_merge(&deployment(), &applied, schema("apps", "v1", "Deployment")).unwrap();
        let names: Vec<&str> = merged["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, ["app", "side", "new"]);
    }

    #[test]
    fn custom_resources_merge_objects_and_replace_lists() {
        let live = json!({"spec": {"size": 1, "items": [{"name": "a"}, {"name": "b"}], "extra": {"x": 1}}});
        let applied = json!({"spec": {"items": [{"name": "c"}], "extra": {"y": 2}}});
        let merged = structured_merge(&live, &applied, schema("example.com", "v1", "Widget")).unwrap();
        assert_eq!(
            merged,
            json!({"spec": {"size": 1, "items": [{"name": "c"}], "extra": {"x": 1, "y": 2}}})
        );
    }

    #[test]
    fn keyless_and_duplicate_elements_are_errors() {
        let schema = schema("apps", "v1", "Deployment");
        let applied = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        let err = structured_merge(&deployment(), &applied, schema).unwrap_err();
        assert!(
            err.to_string().contains(
                ".spec.template.spec.containers: element 0: associative list with keys has an element \
                 that omits key field \"name\""
            ),
            "{err}"
        );
        let applied = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}});
        let err = structured_merge(&deployment(), &applied, schema).unwrap_err();
        assert_eq!(Status::from(err).code, 500);
    }
}
