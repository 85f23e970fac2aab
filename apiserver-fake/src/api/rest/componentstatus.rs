//! `componentstatuses` (core/v1, deprecated since 1.19 but served): kube-apiserver's
//! `pkg/registry/core/componentstatus` probes the scheduler, the controller manager and each etcd
//! server at request time; nothing is stored.
//!
//! What a fake can truthfully report, in upstream's shapes (one `Healthy` condition each):
//!
//! * `etcd-0`: the cluster's store, probed with a read: `True` with etcd's health body
//!   `{"health":"true","reason":""}`, or `False` with the store's error.
//! * `controller-manager`: `True`, `ok`: the fake runs in-process the controllers of
//!   kube-controller-manager that it simulates (storage version and lease garbage collection, RBAC
//!   aggregation).
//! * `scheduler`: `False` with the error kube-apiserver reports when no scheduler listens on its
//!   default secure port: the fake schedules nothing.

use http::StatusCode;
use serde_json::{Value, json};

use super::RestRequest;
use super::read::{Selection, render_list, render_object};
use crate::api::status::{Status, StatusReason};
use crate::store::{ObjectKey, Store, StoreError};

/// Whether `req` addresses `componentstatuses`.
pub(crate) fn serves(req: &RestRequest<'_>) -> bool {
    req.resource.group.is_empty() && req.resource.resource == "componentstatuses"
}

/// The components, in name order.
const COMPONENTS: &[&str] = &["controller-manager", "etcd-0", "scheduler"];

fn condition(healthy: bool, message: &str, error: &str) -> Value {
    let mut condition = json!({"type": "Healthy", "status": if healthy { "True" } else { "False" }});
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    if !error.is_empty() {
        condition["error"] = json!(error);
    }
    condition
}

/// The ComponentStatus of `name`, probed now (`None` for an unknown component).
async fn probe(store: &dyn Store, name: &str) -> Option<Value> {
    let condition = match name {
        "controller-manager" => condition(true, "ok", ""),
        "scheduler" => condition(
            false,
            "",
            "Get \"https://127.0.0.1:10259/healthz\": dial tcp 127.0.0.1:10259: connect: connection refused",
        ),
        "etcd-0" => {
            let probe = store
                .get(&super::lifecycle::namespaces(), &ObjectKey::cluster("default"))
                .await;
            match probe {
                Ok(_) | Err(StoreError::NotFound { .. }) => {
                    condition(true, r#"{"health":"true","reason":""}"#, "")
                }
                Err(e) => condition(false, "", &e.to_string()),
            }
        }
        _ => return None,
    };
    Some(json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": null},
        "conditions": [condition],
    }))
}

/// The warning kube-apiserver adds to every answer of this deprecated API (its type's
/// `prerelease-lifecycle-gen:deprecated=1.19` tag).
const DEPRECATED: &str = "v1 ComponentStatus is deprecated in v1.19+";

/// `get` and `list` (other verbs are refused by the route check: discovery lists only these), with
/// the deprecation warning.
pub(crate) async fn handle(req: &RestRequest<'_>) -> Result<axum::response::Response, Status> {
    let response = answer(req).await?;
    Ok(super::write::with_warnings(response, &[DEPRECATED.to_owned()]))
}

async fn answer(req: &RestRequest<'_>) -> Result<axum::response::Response, Status> {
    let store = req.ctx.store.as_ref();
    match req.info.verb.as_str() {
        "get" => match probe(store, &req.info.name).await {
            Some(status) => Ok(req.respond(StatusCode::OK, &render_object(req, status))),
            // Upstream's registry returns a plain error here, which becomes a 500 without a reason.
            None => Err(Status::failure(
                500,
                StatusReason::Unknown,
                format!("Component not found: {}", req.info.name),
            )),
        },
        "list" => {
            let selection = Selection::from_request(req)?;
            let mut items = Vec::new();
            for name in COMPONENTS {
                if let Some(status) = probe(store, name).await.filter(|s| selection.matches(s)) {
                    items.push(status);
                }
            }
            Ok(req.respond(StatusCode::OK, &render_list(req, json!({}), items)))
        }
        _ => Err(Status::route_method_not_allowed()),
    }
}
