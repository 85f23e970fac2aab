//! The ValidatingAdmissionPolicy status controller (`pkg/controller/validatingadmissionpolicystatus`):
//! writes each policy's `status` once its `generation` is newer than `status.observedGeneration`, so
//! that clients (and upstream's e2e) that wait for `status.observedGeneration == metadata.generation`
//! or `status.typeChecking` before relying on a policy stop waiting.
//!
//! As upstream's `reconcile`: a policy whose `generation` is not above `status.observedGeneration` is
//! left alone; otherwise the status is server-side applied (field manager
//! `validatingadmissionpolicy-status`, forced) as `{observedGeneration: <generation>, typeChecking:
//! {expressionWarnings: [...]}}` — `typeChecking: {}` when there are no warnings, as upstream's
//! `omitempty` list. `conditions` are not written (upstream's controller does not either).
//!
//! The type checker is not modelled: every policy type-checks without warnings (upstream warns of
//! expressions that do not type-check against the `matchConstraints`' resources' schemas).
//!
//! It runs where the server serves `validatingadmissionpolicies` (its preferred version, `v1` from 1.30,
//! `v1beta1` where only that is on), waiting for discovery to show the resource otherwise.

use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::discovery::{DiscoverySnapshot, error_message};
use crate::queue::{Backoff, WorkQueue};
use crate::{ControllerContext, ControllerDescriptor, ControllerFuture};

/// Upstream's canonical name (`names.ValidatingAdmissionPolicyStatusController`).
pub const NAME: &str = "validatingadmissionpolicy-status-controller";
/// The field manager of the status it applies (upstream's `ControllerName`).
pub const FIELD_MANAGER: &str = "validatingadmissionpolicy-status";
/// The group of the policies.
const GROUP: &str = "admissionregistration.k8s.io";
/// The resource of the policies.
const RESOURCE: &str = "validatingadmissionpolicies";

/// The controller's descriptor (on by default, as upstream's).
pub fn descriptor() -> ControllerDescriptor {
    ControllerDescriptor {
        name: NAME,
        aliases: &[],
        disabled_by_default: false,
        run,
    }
}

/// The served policy resource of `snapshot`: its preferred version, else any served one.
fn policy_resource(snapshot: &DiscoverySnapshot) -> Option<ApiResource> {
    let all: Vec<_> = snapshot
        .resources
        .iter()
        .filter(|r| r.api_resource.group == GROUP && r.api_resource.plural == RESOURCE)
        .collect();
    all.iter()
        .find(|r| r.preferred)
        .or_else(|| all.first())
        .map(|r| r.api_resource.clone())
}

/// The status `policy` should have, when its `generation` is newer than its `observedGeneration`
/// (upstream's `reconcile`); `None` when it is up to date.
pub fn desired_status(policy: &Value) -> Option<Value> {
    let generation = policy.pointer("/metadata/generation").and_then(Value::as_i64)?;
    let observed = policy
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    (generation > observed).then(|| json!({"observedGeneration": generation, "typeChecking": {}}))
}

fn run(context: ControllerContext, cancel: CancellationToken) -> ControllerFuture {
    Box::pin(async move {
        let mut discovery = context.discovery.subscribe();
        let resource = loop {
            if let Some(resource) = policy_resource(&discovery.borrow_and_update()) {
                break resource;
            }
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                changed = discovery.changed() => if changed.is_err() { return Ok(()) },
            }
        };
        let api: Api<DynamicObject> = Api::all_with(context.client.clone(), &resource);
        let queue: WorkQueue<String> = WorkQueue::new(
            "validatingadmissionpolicy-status",
            Backoff {
                base: Duration::from_millis(5),
                max: Duration::from_secs(60),
            },
            Some(context.queue_metrics.clone()),
        );
        let worker = tokio::spawn({
            let queue = queue.clone();
            let api = api.clone();
            async move {
                while let Some(name) = queue.get().await {
                    match reconcile(&api, &resource, &name).await {
                        Ok(()) => queue.forget(&name),
                        Err(err) => {
                            tracing::info!(controller = NAME, policy = %name, error = %err, "status update failed; retrying");
                            queue.add_rate_limited(name.clone());
                        }
                    }
                    queue.done(&name);
                }
            }
        });
        let informer = watcher(api, watcher::Config::default()).default_backoff();
        tokio::pin!(informer);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                event = informer.next() => match event {
                    Some(Ok(watcher::Event::Apply(policy) | watcher::Event::InitApply(policy))) => {
                        let policy = serde_json::to_value(&policy).unwrap_or_default();
                        if desired_status(&policy).is_some()
                            && let Some(name) = policy.pointer("/metadata/name").and_then(Value::as_str)
                        {
                            queue.add(name.to_owned());
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => tracing::info!(controller = NAME, error = %err, "policy watch failed; retrying"),
                    None => break,
                },
            }
        }
        queue.shut_down();
        let _ = worker.await;
        Ok(())
    })
}

/// Reads policy `name` live and applies its status if its generation is newer than what was observed.
async fn reconcile(api: &Api<DynamicObject>, resource: &ApiResource, name: &str) -> Result<(), String> {
    let policy = match api.get_opt(name).await {
        Ok(Some(policy)) => serde_json::to_value(&policy).map_err(|e| e.to_string())?,
        Ok(None) => return Ok(()),
        Err(err) => return Err(error_message(&err)),
    };
    let Some(status) = desired_status(&policy) else {
        return Ok(());
    };
    let apply = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name},
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&apply),
    )
    .await
    .map(|_| ())
    .map_err(|err| error_message(&err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_written_for_a_newer_generation_only() {
        let policy = json!({"metadata": {"name": "p", "generation": 2},
                            "status": {"observedGeneration": 1}});
        assert_eq!(
            desired_status(&policy),
            Some(json!({"observedGeneration": 2, "typeChecking": {}}))
        );
        let fresh = json!({"metadata": {"name": "p", "generation": 1}});
        assert_eq!(desired_status(&fresh).unwrap()["observedGeneration"], 1);
        let seen = json!({"metadata": {"name": "p", "generation": 2},
                          "status": {"observedGeneration": 2, "typeChecking": {}}});
        assert_eq!(desired_status(&seen), None);
    }
}
