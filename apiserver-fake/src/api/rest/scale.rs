//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets and ReplicationControllers
//! (`kubectl scale`, HPAs): an `autoscaling/v1` `Scale` view of the parent, as upstream's
//! `ScaleREST` serves it — `spec.replicas` from the parent's, `status.replicas` and the `status.selector`
//! string from the parent's status and selector — and writes (PUT, PATCH) that change only the
//! parent's `spec.replicas` (optimistic concurrency on the parent's resourceVersion, generation bumped,
//! a `scale` managedFields entry).

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

/// Whether `resource` has a scale subresource the fake serves (the built-in workloads).
pub fn served_for(resource: &super::ResourceInfo) -> bool {
    !resource.custom
        && matches!(
            (resource.group.as_str(), resource.resource.as_str()),
            ("apps", "deployments" | "replicasets" | "statefulsets") | ("", "replicationcontrollers")
        )
}

/// Whether the request addresses a scale subresource the fake serves.
pub fn serves(req: &RestRequest<'_>) -> bool {
    req.info.subresource == "scale" && served_for(&req.resource)
}

/// The `Scale` of `parent`.
pub fn scale_of(parent: &Value) -> Value {
    let metadata = &parent["metadata"];
    let mut scale_metadata = serde_json::Map::new();
    for field in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(value) = metadata.get(field) {
            scale_metadata.insert(field.to_owned(), value.clone());
        }
    }
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

/// GET, PUT or PATCH on `…/<name>/scale`.
pub async fn handle(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let storage = req.resource.storage();
    let current = req.ctx.store.get(&storage, &req.key()).await?;
    if req.info.verb == "get" {
        return Ok(req.respond(StatusCode::OK, &scale_of(&current)));
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
        let scale = scale_of(&current);
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
        next["spec"]["replicas"] = json!(replicas);
        generation::prepare_for_update(req.generation_bump(), &current, &mut next);
        super::write::record_update(req, Some(&current), &mut next);
        if req.query.dry_run().unwrap_or(false) {
            return Ok(super::write::with_warnings(
                req.respond(StatusCode::OK, &scale_of(&next)),
                &warnings,
            ));
        }
        match req.ctx.store.update(&storage, &req.key(), next, current_rv).await {
            Ok(written) => {
                return Ok(super::write::with_warnings(
                    req.respond(StatusCode::OK, &scale_of(&written)),
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
