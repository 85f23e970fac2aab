//! PATCH bodies, by `Content-Type`, as kube-apiserver's patch handler accepts them:
//!
//! * `application/json-patch+json`: RFC 6902 (the `json-patch` crate). A patch that does not parse is
//!   400, one that does not apply 422 (upstream's generic "the server rejected our request ..." Status).
//! * `application/merge-patch+json`: RFC 7386.
//! * `application/strategic-merge-patch+json` (built-in resources only; custom resources answer 415 as
//!   upstream): upstream's strategic merge (`strategic`), driven by the kind's OpenAPI schema as
//!   upstream is by the Go struct tags the schema publishes: a list merges only when its field has the
//!   `merge` patch strategy (objects by `x-kubernetes-patch-merge-key`, scalars as a set), any other list
//!   is replaced; objects and maps merge key by key (unless the strategy is `replace`); `null` deletes;
//!   `$patch: delete|replace`, `$retainKeys`, `$setElementOrder/<field>` and
//!   `$deleteFromPrimitiveList/<field>` are honoured, with upstream's errors and element order.
//! * `application/apply-patch+yaml` (server-side apply): the applied configuration is merged over the
//!   live object as structured-merge-diff merges (`structured`): associative lists
//!   (`x-kubernetes-list-type: map`) by their `x-kubernetes-list-map-keys`, sets as sets, atomic lists
//!   and atomic maps replaced; custom resources (their CRD schemas are not used for merging yet) merge their
//!   objects and replace their lists. Apply creates the object when absent; `fieldManager` is required.
//!   Field ownership, conflicts and the removal of fields a manager stops applying are the write path's
//!   ([`super::managed_fields`]).

mod schema;
mod strategic;
mod structured;

pub use schema::PatchSchema;

use serde_json::Value;

use crate::api::status::{GroupKind, Status, StatusCause};

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
    super::negotiation::parse_json(body).map_err(|e| Status::bad_request(e.to_string()))
}

/// Applies a patch of `patch_type` to `original`, an object of the kind `schema` describes.
pub fn apply(
    patch_type: PatchType,
    original: &Value,
    body: &[u8],
    schema: PatchSchema,
) -> Result<Value, Status> {
    match patch_type {
        PatchType::Json => {
            let patch: json_patch::Patch =
                serde_json::from_value(parse_json(body)?).map_err(|e| Status::bad_request(e.to_string()))?;
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
            let Value::Object(patch) = patch else {
                return Err(Status::bad_request(
                    "unable to find api field in struct for the patch",
                ));
            };
            Ok(strategic::strategic_merge(original, &patch, schema)?)
        }
        PatchType::Apply => {
            let applied = crate::api::rest::negotiation::decode_yaml(body)?;
            let applied = crate::api::rest::negotiation::require_object(applied)?;
            Ok(structured::structured_merge(original, &applied, schema)?)
        }
    }
}

/// A mutating admission policy's `ApplyConfiguration` merged over `live` (upstream's
/// `ApplyStructuredMergeDiff`): refused when it sets atomic lists, maps or structs (`invalid
/// ApplyConfiguration: may not mutate atomic arrays, maps or structs: <paths>`), else merged as
/// server-side apply merges, without recording field ownership.
pub fn merge_apply_configuration(
    live: &Value,
    applied: &Value,
    schema: PatchSchema,
) -> Result<Value, String> {
    let atomics = structured::atomic_paths(applied, schema);
    if !atomics.is_empty() {
        return Err(format!(
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    structured::structured_merge(live, applied, schema).map_err(|e| format!("failed to merge patch: {e}"))
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
    use crate::api::catalog::KubeVersion;
    use crate::api::openapi::definitions::Definitions;

    /// `super::apply` for an apps/v1 Deployment of Kubernetes 1.36.
    fn apply(patch_type: PatchType, original: &Value, body: &[u8]) -> Result<Value, Status> {
        let definitions = Definitions::of(KubeVersion { major: 1, minor: 36 });
        let schema = PatchSchema::of_kind(definitions, "apps", "v1", "Deployment");
        super::apply(patch_type, original, body, schema)
    }

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
        // Upstream's mergeSortedSlice: the patch's new elements precede the server's remaining ones.
        assert_eq!(containers[1]["name"], "new");
        assert_eq!(containers[2]["name"], "side");
        assert_eq!(patched["metadata"]["finalizers"], json!(["z", "x"]));
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
