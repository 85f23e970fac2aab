//! The identity lease controller (docs/mvp-behaviour.md §2.2): publishes and renews this server's identity
//! lease in `kube-system`, and marks the server ready once the lease exists.
//!
//! From 1.35 kube-apiserver also deletes a stale lease of its own name at startup (a previous run that
//! crashed) and its own lease on graceful shutdown, so peers forget it at once (PR #134514).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::controllers::identity::{IDENTITY_LEASE_NAMESPACE, identity_lease, micro_time};
use crate::server::ServerState;
use crate::store::{ObjectKey, Preconditions, StorageResource};

fn lease_resource() -> StorageResource {
    StorageResource::new("coordination.k8s.io", "leases")
}

fn own_key(state: &ServerState) -> ObjectKey {
    ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, &state.server_id)
}

/// Publishes and renews one server's identity lease.
#[derive(Debug)]
pub struct IdentityLeaseController {
    state: Arc<ServerState>,
}

impl IdentityLeaseController {
    /// A controller for the server behind `state`.
    pub fn new(state: Arc<ServerState>) -> Self {
        Self { state }
    }

    fn desired(&self) -> Value {
        let state = &self.state;
        let address = state
            .options
            .mvp_gate_enabled()
            .then(|| state.options.peer_address(state.local_addr.port()).to_string());
        identity_lease(
            &state.server_id,
            &state.holder_identity,
            &state.options.hostname,
            state.options.identity_lease_duration.as_secs(),
            &micro_time(time::OffsetDateTime::now_utc()),
            address.as_deref(),
        )
    }

    /// Startup, before anything else refers to this server's ID (e.g. StorageVersion entries, which the
    /// StorageVersion garbage collector would otherwise remove as lease-less): (1.35+) deletes a stale
    /// lease of the same name left by a previous run, then writes this run's lease once. Errors are left
    /// to [`Self::run`], which retries every renew interval.
    pub async fn initialize(&self) {
        let store = self.state.store.as_ref();
        let resource = lease_resource();
        let key = own_key(&self.state);
        if self.state.options.emulated_version.minor >= 35
            && let Ok(existing) = store.get(&resource, &key).await
            && existing.pointer("/spec/holderIdentity").and_then(Value::as_str)
                != Some(self.state.holder_identity.as_str())
        {
            let _ = store
                .delete(&resource, &key, existing_preconditions(&existing))
                .await;
        }
        self.write().await;
    }

    /// Creates or renews the lease; whether it was written.
    async fn write(&self) -> bool {
        let store = self.state.store.as_ref();
        let resource = lease_resource();
        let key = own_key(&self.state);
        let desired = self.desired();
        match store.get(&resource, &key).await {
            Ok(mut current) => {
                // Renew: keep metadata (uid, resourceVersion), replace spec and labels.
                current["spec"] = desired["spec"].clone();
                current["metadata"]["labels"] = desired["metadata"]["labels"].clone();
                if let Some(annotations) = desired["metadata"].get("annotations") {
                    current["metadata"]["annotations"] = annotations.clone();
                }
                store.update(&resource, &key, current, None).await.is_ok()
            }
            Err(_) => store.create(&resource, &key, desired).await.is_ok(),
        }
    }

    /// Runs until `cancel`: renews the lease every renew interval (the first time at once) and marks the
    /// server ready once it is written. Call [`Self::initialize`] first. Store errors are retried on the
    /// next tick.
    pub async fn run(self, cancel: CancellationToken) {
        let mut interval = tokio::time::interval(self.state.options.identity_lease_renew_interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = interval.tick() => {}
            }
            if self.write().await {
                self.state.ready.store(true, Ordering::Release);
            }
        }
    }

    /// Deletes this server's lease (graceful shutdown, 1.35+) if it is still this run's: a lease already
    /// taken over by a newer run of the same host is left alone.
    pub async fn delete_own_lease(state: &ServerState) {
        let (resource, key) = (lease_resource(), own_key(state));
        if let Ok(existing) = state.store.get(&resource, &key).await
            && existing.pointer("/spec/holderIdentity").and_then(Value::as_str)
                == Some(state.holder_identity.as_str())
        {
            let _ = state
                .store
                .delete(&resource, &key, existing_preconditions(&existing))
                .await;
        }
    }
}

/// Delete preconditions pinning the object as read (uid and resourceVersion), so a concurrent rewrite is
/// not deleted by mistake.
fn existing_preconditions(existing: &Value) -> Option<Preconditions> {
    Some(Preconditions {
        uid: existing
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        resource_version: crate::store::resource_version(existing),
    })
}
