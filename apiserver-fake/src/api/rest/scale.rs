//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets and ReplicationControllers
//! (`kubectl scale`, HPAs): an `autoscaling/v1` `Scale` view of the parent, as upstream's
//! `ScaleREST` serves it — `spec.replicas` from the parent's, `status.replicas` and the `status.selector`
//! string from the parent's status and selector — and writes (PUT, PATCH) that change only the
//! parent's `spec.replicas` (optimistic concurrency on the parent's resourceVersion, generation bumped,
//! a `scale` managedFields entry).
//!
//! Custom resources whose CRD version declares `subresources.scale` get the same view through the CRD's
//! JSON paths, as the apiextensions server's `scaleFromCustomResource`: `specReplicasPath` and
//! `statusReplicasPath` (0 when absent) and the optional `labelSelectorPath` (a string). A write of it
//! is validated as an update of the custom resource (its schema, `maximum` included, and its
//! `x-kubernetes-validations`, ratcheted): a refusal is the custom resource's 422
//! (`Widget.example.com "w" is invalid: spec.replicas: ...`), as upstream's `ScaleREST.Update`.

use super::admission::{self, Attributes, Operation};
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::RestRequest;
use super::field_validation::{self, FieldValidation};
use super::negotiation::{content_type, decode_body};
use super::object::check_type_meta;
use super::patch::{self, PatchSchema, PatchType};
use super::table::format::label_selector;
use super::{generation, read_body};
use crate::api::status::{GroupKind, Status, StatusCause};
use crate::store::{StoreError, resource_version};

/// The OpenAPI definition a scale body is decoded against.
const SCALE_DEFINITION: &str = "io.k8s.api.autoscaling.v1.Scale";

/// How often a scale write is retried after losing an optimistic-concurrency race.
const ATTEMPTS: usize = 5;

/// Whether `resource` has a scale subresource the fake serves (the built-in workloads, and custom
/// resources whose CRD declares one).
pub(crate) fn served_for(resource: &super::ResourceInfo) -> bool {
    if resource.custom {
        return resource.subresources.iter().any(|s| s.name == "scale");
    }
    matches!(
        (resource.group.as_str(), resource.resource.as_str()),
        ("apps", "deployments" | "replicasets" | "statefulsets") | ("", "replicationcontrollers")
    )
}

/// Whether the request addresses a scale subresource the fake serves.
pub(crate) fn serves(req: &RestRequest<'_>) -> bool {
    req.info.subresource == "scale" && served_for(&req.resource)
}

/// How a custom resource's fields map to its `Scale` (the CRD version's `subresources.scale`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CustomScale {
    /// `specReplicasPath` as path segments (`.spec.replicas` → `["spec", "replicas"]`).
    pub spec_replicas: Vec<String>,
    /// `statusReplicasPath`.
    pub status_replicas: Vec<String>,
    /// `labelSelectorPath`, when set.
    pub label_selector: Option<Vec<String>>,
}

impl CustomScale {
    /// The scale mapping of `version` in `crd` (per-version `subresources`, else the top-level ones).
    pub(crate) fn of_crd(crd: &Value, version: &str) -> Option<Self> {
        let scale = crate::api::catalog::crd_version_field(crd, version, "subresources")?.get("scale")?;
        let path = |field: &str| {
            scale
                .get(field)
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    p.trim_start_matches('.')
                        .split('.')
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
        };
        Some(Self {
            spec_replicas: path("specReplicasPath")?,
            status_replicas: path("statusReplicasPath").unwrap_or_default(),
            label_selector: path("labelSelectorPath"),
        })
    }

    fn lookup<'v>(object: &'v Value, path: &[String]) -> Option<&'v Value> {
        if path.is_empty() {
            return None;
        }
        path.iter().try_fold(object, |at, key| at.get(key))
    }

    /// The `Scale` of custom resource `parent`.
    pub(crate) fn scale_of(&self, parent: &Value) -> Value {
        let replicas = |path: &[String]| Self::lookup(parent, path).and_then(Value::as_i64).unwrap_or(0);
        let mut scale = json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": scale_metadata(parent),
            "spec": {"replicas": replicas(&self.spec_replicas)},
            "status": {"replicas": replicas(&self.status_replicas)},
        });
        if let Some(selector) = self
            .label_selector
            .as_deref()
            .and_then(|path| Self::lookup(parent, path))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            scale["status"]["selector"] = json!(selector);
        }
        scale
    }

    /// Sets the replicas at `specReplicasPath` (creating the objects on the way).
    fn set_replicas(&self, object: &mut Value, replicas: i64) {
        let Some((last, parents)) = self.spec_replicas.split_last() else {
            return;
        };
        let mut at = object;
        for key in parents {
            if !at.get(key).is_some_and(Value::is_object) {
                at[key.as_str()] = json!({});
            }
            at = &mut at[key.as_str()];
        }
        at[last.as_str()] = json!(replicas);
    }
}

/// How a resource's objects map to a `Scale`.
enum Mapping {
    /// The built-in workloads.
    Builtin,
    /// A custom resource, by its CRD.
    Custom(CustomScale),
}

impl Mapping {
    async fn of(req: &RestRequest<'_>) -> Result<Self, Status> {
        if !req.resource.custom {
            return Ok(Self::Builtin);
        }
        let crd =
            crate::store::ObjectKey::cluster(&format!("{}.{}", req.resource.resource, req.resource.group));
        let definition = req
            .ctx
            .store
            .get(&super::lifecycle::custom_resource_definitions(), &crd)
            .await?;
        CustomScale::of_crd(&definition, &req.resource.version)
            .map(Self::Custom)
            .ok_or_else(Status::route_not_found)
    }

    fn scale_of(&self, parent: &Value) -> Value {
        match self {
            Self::Builtin => scale_of(parent),
            Self::Custom(custom) => custom.scale_of(parent),
        }
    }

    fn set_replicas(&self, object: &mut Value, replicas: i64) {
        match self {
            Self::Builtin => object["spec"]["replicas"] = json!(replicas),
            Self::Custom(custom) => custom.set_replicas(object, replicas),
        }
    }
}

fn scale_metadata(parent: &Value) -> serde_json::Map<String, Value> {
    let metadata = &parent["metadata"];
    let mut scale_metadata = serde_json::Map::new();
    for field in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(value) = metadata.get(field) {
            scale_metadata.insert(field.to_owned(), value.clone());
        }
    }
    scale_metadata
}

/// The `Scale` of `parent`.
pub(crate) fn scale_of(parent: &Value) -> Value {
    let scale_metadata = scale_metadata(parent);
    // ReplicationControllers select by a plain map; the others by a LabelSelector.
    let selector = match parent.pointer("/spec/selector") {
        Some(Value::Object(map))
            if !map.contains_key("matchLabels") && !map.contains_key("matchExpressions") =>
        {
            label_selector(Some(&json!({"matchLabels": map}))).unwrap_or_default()
        }
        other => label_selector(other).unwrap_or_default(),
    };
    let mut status =
        json!({"replicas": parent.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0)});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_metadata,
        "spec": {"replicas": parent.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
        "status": status,
    })
}

/// The replicas of the `Scale` `wanted`, checked as upstream's `ValidateScale` (not negative) after
/// the name on the URL (an update's body must name the object addressed).
fn checked_replicas(req: &RestRequest<'_>, wanted: &Value) -> Result<i64, Status> {
    let replicas = wanted
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let name = wanted
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if req.info.verb == "update" && name != req.info.name {
        return Err(Status::bad_request(
            "the name of the object (".to_owned()
                + name
                + ") does not match the name on the URL ("
                + &req.info.name
                + ")",
        ));
    }
    if replicas < 0 {
        return Err(Status::invalid(
            &GroupKind::new("autoscaling", "Scale"),
            &req.info.name,
            vec![StatusCause {
                reason: "FieldValueInvalid".to_owned(),
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                field: "spec.replicas".to_owned(),
            }],
        ));
    }
    Ok(replicas)
}

/// GET, PUT or PATCH on `…/<name>/scale`.
pub(crate) async fn handle(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let storage = req.resource.storage();
    let mapping = Mapping::of(req).await?;
    let current = req.ctx.store.get(&storage, &req.key()).await?;
    if req.info.verb == "get" {
        return Ok(req.respond(StatusCode::OK, &mapping.scale_of(&current)));
    }
    req.query.dry_run()?;
    let (options, source_prefix) = if req.info.verb == "update" {
        ("UpdateOptions", true)
    } else {
        ("PatchOptions", false)
    };
    let directive = FieldValidation::from_query(req.query.get("fieldValidation"), options)?;
    let body = read_body(body).await?;
    let definitions = crate::api::openapi::definitions::Definitions::of(req.ctx.binary_version);
    let mut current = current;
    for _ in 0..ATTEMPTS {
        let scale = mapping.scale_of(&current);
        let mut wanted = match req.info.verb.as_str() {
            "update" => {
                let wanted = decode_body(&req.headers, &body, false)?;
                check_type_meta(&wanted, "autoscaling/v1", "Scale")?;
                wanted
            }
            _ => {
                let patch_type = PatchType::from_content_type(content_type(&req.headers).as_deref(), false)?;
                let schema = PatchSchema::of_kind(definitions, "autoscaling", "v1", "Scale");
                patch::apply(patch_type, &scale, &body, schema)?
            }
        };
        // Decoded as upstream decodes a Scale: undeclared fields dropped (and reported as the directive
        // says), wrong types with Go's message, `replicas` an int32.
        let prefix = field_validation::kind_prefix("Scale", "v1");
        let findings = field_validation::decode(definitions, SCALE_DEFINITION, &mut wanted)
            .map_err(|e| Status::bad_request(format!("{prefix}{e}")))?;
        let warnings = findings.enforce(directive, if source_prefix { &prefix } else { "" })?;
        // Mutating admission sees the Scale (`autoscaling/v1`) of the parent's resource.
        let mut attributes = Attributes::of(req, Operation::Update, Some(&wanted), Some(&scale), options);
        attributes.kind = "Scale".to_owned();
        attributes.kind_api_version = Some("autoscaling/v1".to_owned());
        let mut admission_warnings = admission::mutate(req, &mut attributes).await?.warnings;
        let wanted = attributes.object.take().unwrap_or(wanted);
        let replicas = checked_replicas(req, &wanted)?;
        let current_rv = resource_version(&current);
        let precondition = wanted
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty());
        if let Some(rv) = precondition
            && rv.parse::<u64>().ok() != current_rv
        {
            return Err(Status::conflict(&req.resource.group_resource(), &req.info.name));
        }
        let mut next = current.clone();
        mapping.set_replicas(&mut next, replicas);
        generation::prepare_for_update(req.generation_bump(), &current, &mut next);
        super::write::record_update(req, Some(&current), &mut next);
        // The parent's strategy validates the parent as any update of it: a custom resource's schema
        // and rules (upstream's `ScaleREST.Update` goes through the store's update with the custom
        // resource strategy), before validating admission.
        let rule_warnings = super::write::validate_rules(req, Some(&current), &next)?;
        let mut attributes = Attributes::of(
            req,
            Operation::Update,
            Some(&mapping.scale_of(&next)),
            Some(&scale),
            options,
        );
        attributes.kind = "Scale".to_owned();
        attributes.kind_api_version = Some("autoscaling/v1".to_owned());
        admission_warnings.extend(admission::validate(req, &attributes).await?.warnings);
        let warnings: Vec<String> = warnings
            .into_iter()
            .chain(rule_warnings)
            .chain(admission_warnings)
            .collect();
        if req.query.dry_run().unwrap_or(false) {
            return Ok(super::write::with_warnings(
                req.respond(StatusCode::OK, &mapping.scale_of(&next)),
                &warnings,
            ));
        }
        match req.ctx.store.update(&storage, &req.key(), next, current_rv).await {
            Ok(written) => {
                return Ok(super::write::with_warnings(
                    req.respond(StatusCode::OK, &mapping.scale_of(&written)),
                    &warnings,
                ));
            }
            Err(StoreError::Conflict { .. }) if precondition.is_none() => {
                current = req.ctx.store.get(&storage, &req.key()).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Status::conflict(&req.resource.group_resource(), &req.info.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_of_a_custom_resource_follows_the_crd_paths() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "subresources": {"scale": {
            "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.ready",
            "labelSelectorPath": ".status.selector"}}}]}});
        let mapping = CustomScale::of_crd(&crd, "v1").unwrap();
        let cr = json!({"metadata": {"name": "w", "namespace": "default", "uid": "u", "labels": {"x": "y"}},
                        "spec": {"size": 4}, "status": {"ready": 2, "selector": "app=w"}});
        assert_eq!(
            mapping.scale_of(&cr),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "w", "namespace": "default", "uid": "u"},
                   "spec": {"replicas": 4}, "status": {"replicas": 2, "selector": "app=w"}})
        );
        // Absent paths read as 0; writing creates them.
        let mut bare = json!({"metadata": {"name": "w"}});
        assert_eq!(mapping.scale_of(&bare)["spec"]["replicas"], 0);
        assert!(mapping.scale_of(&bare)["status"].get("selector").is_none());
        mapping.set_replicas(&mut bare, 3);
        assert_eq!(bare["spec"]["size"], 3);
        assert!(CustomScale::of_crd(&crd, "v2").is_none());
    }

    #[test]
    fn scale_of_a_deployment_and_a_replication_controller() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "tier": "front"}}},
            "status": {"replicas": 2},
        });
        assert_eq!(
            scale_of(&deployment),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "web", "namespace": "default", "uid": "u", "resourceVersion": "7"},
                   "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web,tier=front"}})
        );
        let rc = json!({"metadata": {"name": "rc"}, "spec": {"selector": {"app": "x"}}});
        assert_eq!(
            scale_of(&rc)["status"],
            json!({"replicas": 0, "selector": "app=x"})
        );
        assert_eq!(scale_of(&rc)["spec"]["replicas"], 1);
    }
}
