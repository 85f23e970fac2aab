//! PATCH bodies, by `Content-Type`, as kube-apiserver's patch handler accepts them:
//!
//! * `application/json-patch+json`: RFC 6902 (the `json-patch` crate). A patch that does not parse is
//!   400, one that does not apply 422 (upstream's generic "the server rejected our request ..." Status).
//! * `application/merge-patch+json`: RFC 7386.
//! * `application/strategic-merge-patch+json` (built-in resources only; custom resources answer 415 as
//!   upstream): a merge patch whose object lists merge by their Kubernetes merge key (`name` for
//!   containers, volumes, env, ...; `type` for conditions; `containerPort`/`port` for ports; `mountPath`
//!   for volume mounts; `uid` for ownerReferences), `finalizers` merge as a set, `$patch: delete|replace`
//!   is honoured, and the other `$` directives kubectl sends (`$setElementOrder/...`, `$retainKeys`,
//!   `$deleteFromPrimitiveList/...`) are applied or dropped. Without Go's struct tags this is a
//!   documented approximation of upstream's schema-driven merge.
//! * `application/apply-patch+yaml` (server-side apply): the applied configuration is merged over the
//!   live object like a strategic merge patch without deletions, and creates the object when absent;
//!   `fieldManager` is required. Field ownership, conflicts and the removal of fields a manager stops
//!   applying are the write path's ([`super::managed_fields`]).

use serde_json::{Map, Value};

use crate::status::{GroupKind, Status, StatusCause};

/// The patch media types kube-apiserver knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902.
    Json,
    /// RFC 7386.
    Merge,
    /// Kubernetes strategic merge patch.
    StrategicMerge,
    /// Server-side apply (YAML).
    Apply,
}

impl PatchType {
    /// The media type.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Json => "application/json-patch+json",
            Self::Merge => "application/merge-patch+json",
            Self::StrategicMerge => "application/strategic-merge-patch+json",
            Self::Apply => "application/apply-patch+yaml",
        }
    }

    /// Parses the request's `Content-Type` essence. Custom resources do not accept strategic merge
    /// patches; an unknown type is upstream's 415 listing the accepted ones.
    pub fn from_content_type(content_type: Option<&str>, custom_resource: bool) -> Result<Self, Status> {
        let accepted: &[PatchType] = if custom_resource {
            &[Self::Json, Self::Merge, Self::Apply]
        } else {
            &[Self::Json, Self::Merge, Self::StrategicMerge, Self::Apply]
        };
        accepted
            .iter()
            .copied()
            .find(|t| Some(t.media_type()) == content_type)
            .ok_or_else(|| {
                let names: Vec<&str> = accepted.iter().map(|t| t.media_type()).collect();
                Status::unsupported_media_type(&names)
            })
    }
}

/// Parses a JSON patch document body.
fn parse_json(body: &[u8]) -> Result<Value, Status> {
    serde_json::from_slice(body).map_err(|e| Status::bad_request(e.to_string()))
}

/// Applies a patch of `patch_type` to `original`.
pub fn apply(patch_type: PatchType, original: &Value, body: &[u8]) -> Result<Value, Status> {
    match patch_type {
        PatchType::Json => {
            let patch: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| Status::bad_request(e.to_string()))?;
            let mut doc = original.clone();
            json_patch::patch(&mut doc, &patch).map_err(|_| Status::unprocessable_patch())?;
            Ok(doc)
        }
        PatchType::Merge => {
            let patch = parse_json(body)?;
            let mut doc = original.clone();
            json_patch::merge(&mut doc, &patch);
            Ok(doc)
        }
        PatchType::StrategicMerge => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                return Err(Status::bad_request(
                    "unable to find api field in struct for the patch",
                ));
            }
            Ok(strategic_merge(original, &patch, true))
        }
        PatchType::Apply => {
            let applied = crate::rest::negotiation::decode_yaml(body)?;
            let applied = crate::rest::negotiation::require_object(applied)?;
            Ok(strategic_merge(original, &applied, false))
        }
    }
}

/// The merge key of the list under `field`, given its elements (Kubernetes' `patchMergeKey` tags).
fn merge_key(field: &str, elements: &[Value]) -> Option<&'static str> {
    let has = |key: &str| elements.iter().all(|e| e.get(key).is_some()) && !elements.is_empty();
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => Some("name"),
        "conditions" => Some("type"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ownerReferences" => Some("uid"),
        "hostAliases" => Some("ip"),
        "ports" if has("containerPort") => Some("containerPort"),
        "ports" if has("port") => Some("port"),
        _ => None,
    }
}

/// Lists of scalars that merge as sets.
fn is_primitive_set(field: &str) -> bool {
    matches!(field, "finalizers")
}

/// Strategic merge of `patch` into `original`. `deletions`: whether `null` and `$patch: delete` remove
/// (false for apply, whose configuration only sets fields).
pub fn strategic_merge(original: &Value, patch: &Value, deletions: bool) -> Value {
    let Value::Object(patch_map) = patch else {
        return patch.clone();
    };
    match patch_map.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch_map.clone();
            replaced.remove("$patch");
            return Value::Object(replaced);
        }
        Some("delete") if deletions => return Value::Null,
        _ => {}
    }
    let mut result: Map<String, Value> = original.as_object().cloned().unwrap_or_default();
    // Lists of scalars may carry `$deleteFromPrimitiveList/<field>` directives.
    for (key, value) in patch_map {
        if let Some(target) = key.strip_prefix("$deleteFromPrimitiveList/")
            && let (Some(Value::Array(items)), Value::Array(remove)) = (result.get_mut(target), value)
        {
            items.retain(|item| !remove.contains(item));
        }
    }
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null if deletions => {
                result.remove(key);
            }
            Value::Object(_) => {
                let merged = strategic_merge(result.get(key).unwrap_or(&Value::Null), value, deletions);
                if merged.is_null() {
                    result.remove(key);
                } else {
                    result.insert(key.clone(), merged);
                }
            }
            Value::Array(patch_items) => {
                let merged = match result.get(key) {
                    Some(Value::Array(original_items)) => {
                        merge_list(key, original_items, patch_items, deletions)
                    }
                    _ => Value::Array(
                        patch_items
                            .iter()
                            .filter(|i| i.get("$patch").is_none())
                            .cloned()
                            .collect(),
                    ),
                };
                result.insert(key.clone(), merged);
            }
            other => {
                result.insert(key.clone(), other.clone());
            }
        }
    }
    Value::Object(result)
}

fn merge_list(field: &str, original: &[Value], patch: &[Value], deletions: bool) -> Value {
    if is_primitive_set(field) {
        let mut merged = original.to_vec();
        for item in patch {
            if !merged.contains(item) {
                merged.push(item.clone());
            }
        }
        return Value::Array(merged);
    }
    let Some(key) = merge_key(field, patch).or_else(|| merge_key(field, original)) else {
        return Value::Array(patch.to_vec());
    };
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace") && p.get(key).is_none())
    {
        return Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    }
    let mut merged: Vec<Value> = original.to_vec();
    for item in patch {
        let id = item.get(key);
        let position = id.and_then(|id| merged.iter().position(|m| m.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) if deletions => {
                merged.remove(i);
            }
            (_, true) => {}
            (Some(i), false) => {
                merged[i] = strategic_merge(&merged[i], item, deletions);
            }
            (None, false) => merged.push(strategic_merge(&Value::Null, item, deletions)),
        }
    }
    Value::Array(merged)
}

/// Server-side apply requires `?fieldManager=` (upstream's validation of PatchOptions).
pub fn require_field_manager(field_manager: Option<&str>) -> Result<(), Status> {
    if field_manager.is_some_and(|m| !m.is_empty()) {
        return Ok(());
    }
    Err(Status::invalid(
        &GroupKind::new("meta.k8s.io", "PatchOptions"),
        "",
        vec![StatusCause::field_required(
            "fieldManager",
            "is required for apply patch",
        )],
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({
            "metadata": {"name": "d", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "side:1"}
            ]}}}
        })
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let patched = apply(
            PatchType::Merge,
            &deployment(),
            br#"{"metadata":{"labels":{"a":null,"c":"3"}}}"#,
        )
        .unwrap();
        assert_eq!(patched["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        // Lists are replaced wholesale.
        let patched = apply(
            PatchType::Merge,
            &deployment(),
            br#"{"spec":{"template":{"spec":{"containers":[{"name":"only"}]}}}}"#,
        )
        .unwrap();
        assert_eq!(
            patched["spec"]["template"]["spec"]["containers"],
            json!([{"name": "only"}])
        );
        assert_eq!(
            apply(PatchType::Merge, &deployment(), b"{oops").unwrap_err().code,
            400
        );
    }

    #[test]
    fn json_patch_applies_and_reports_failures() {
        let patched = apply(
            PatchType::Json,
            &deployment(),
            br#"[{"op":"replace","path":"/metadata/labels/a","value":"9"},{"op":"add","path":"/metadata/finalizers/-","value":"y"}]"#,
        )
        .unwrap();
        assert_eq!(patched["metadata"]["labels"]["a"], "9");
        assert_eq!(patched["metadata"]["finalizers"], json!(["x", "y"]));
        let err = apply(
            PatchType::Json,
            &deployment(),
            br#"[{"op":"remove","path":"/nope"}]"#,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "the server rejected our request due to an error in our request"
        );
        assert_eq!(
            apply(PatchType::Json, &deployment(), br#"{"op":"x"}"#)
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let patch = br#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"},{"name":"new","image":"n"}]}}},"metadata":{"finalizers":["z"]}}"#;
        let patched = apply(PatchType::StrategicMerge, &deployment(), patch).unwrap();
        let containers = &patched["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers.as_array().unwrap().len(), 3);
        assert_eq!(containers[0]["image"], "app:2");
        assert_eq!(containers[0]["env"][0]["name"], "A", "nested fields survive");
        assert_eq!(containers[1]["name"], "side");
        assert_eq!(containers[2]["name"], "new");
        assert_eq!(patched["metadata"]["finalizers"], json!(["x", "z"]));
    }

    #[test]
    fn strategic_merge_directives() {
        let patch = br#"{"$setElementOrder/containers":[{"name":"app"}],"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"}]}}},"metadata":{"$deleteFromPrimitiveList/finalizers":["x"],"labels":{"$patch":"replace","only":"1"}}}"#;
        let patched = apply(PatchType::StrategicMerge, &deployment(), patch).unwrap();
        let containers = patched["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0]["name"], "app");
        assert_eq!(patched["metadata"]["finalizers"], json!([]));
        assert_eq!(patched["metadata"]["labels"], json!({"only": "1"}));
        assert!(patched.get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn apply_merges_without_deleting() {
        let applied = b"metadata:\n  labels:\n    a: \"5\"\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:3\n";
        let patched = apply(PatchType::Apply, &deployment(), applied).unwrap();
        assert_eq!(patched["metadata"]["labels"], json!({"a": "5", "b": "2"}));
        let containers = patched["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        assert_eq!(
            (containers.len(), containers[0]["image"].as_str()),
            (2, Some("app:3"))
        );
        assert_eq!(
            apply(PatchType::Apply, &deployment(), b"- a\n").unwrap_err().code,
            400
        );
    }

    #[test]
    fn content_types_and_field_manager() {
        assert_eq!(
            PatchType::from_content_type(Some("application/merge-patch+json"), true).unwrap(),
            PatchType::Merge
        );
        let err =
            PatchType::from_content_type(Some("application/strategic-merge-patch+json"), true).unwrap_err();
        assert_eq!(err.code, 415);
        assert_eq!(
            err.message,
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        );
        assert!(PatchType::from_content_type(Some("application/strategic-merge-patch+json"), false).is_ok());
        assert_eq!(PatchType::from_content_type(None, false).unwrap_err().code, 415);
        assert!(require_field_manager(Some("kubectl")).is_ok());
        assert_eq!(require_field_manager(None).unwrap_err().code, 422);
    }
}
