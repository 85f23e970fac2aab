//! The identity lease controller (docs/mvp-behaviour.md §2.2): publishes and renews this server's identity
//! lease in `kube-system`, and marks the server ready once the lease exists.
//!
//! From 1.35 kube-apiserver also deletes a stale lease of its own name at startup (a previous run that
//! crashed) and its own lease on graceful shutdown, so peers forget it at once (PR #134514).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::controllers::identity::{IDENTITY_LEASE_NAMESPACE, identity_lease, micro_time};
use crate::store::{ObjectKey, Preconditions, StorageResource, Store};

fn lease_resource() -> StorageResource {
    StorageResource::new("coordination.k8s.io", "leases")
}

fn own_key(server_id: &str) -> ObjectKey {
    ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, server_id)
}

/// The identity lease of one run of a server, as its controller writes it.
#[derive(Debug, Clone)]
pub struct OwnLease {
    /// The APIServerID (the lease's name).
    pub server_id: String,
    /// `spec.holderIdentity`: `<server ID>_<uuid>`, one per run.
    pub holder_identity: String,
    /// The server's host name.
    pub hostname: String,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// How often the lease is renewed.
    pub renew_interval: Duration,
    /// The address peers reach the server at (feature gate on), published in the lease.
    pub peer_address: Option<String>,
    /// Whether a stale lease of the same name is deleted at startup (1.35+).
    pub delete_stale: bool,
}

/// Publishes and renews one server's identity lease.
pub struct IdentityLeaseController {
    lease: OwnLease,
    store: Arc<dyn Store>,
    published: Arc<AtomicBool>,
}

impl std::fmt::Debug for IdentityLeaseController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityLeaseController")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl IdentityLeaseController {
    /// A controller writing `lease` to `store`; it sets `published` once the lease is written.
    pub fn new(lease: OwnLease, store: Arc<dyn Store>, published: Arc<AtomicBool>) -> Self {
        Self {
            lease,
            store,
            published,
        }
    }

    fn desired(&self) -> Value {
        let lease = &self.lease;
        identity_lease(
            &lease.server_id,
            &lease.holder_identity,
            &lease.hostname,
            lease.duration.as_secs(),
            &micro_time(time::OffsetDateTime::now_utc()),
            lease.peer_address.as_deref(),
        )
    }

    /// Startup, before anything else refers to this server's ID (e.g. StorageVersion entries, which the
    /// StorageVersion garbage collector would otherwise remove as lease-less): (1.35+) deletes a stale
    /// lease of the same name left by a previous run, then writes this run's lease once. Errors are left
    /// to [`Self::run`], which retries every renew interval.
    pub async fn initialize(&self) {
        let store = self.store.as_ref();
        let resource = lease_resource();
        let key = own_key(&self.lease.server_id);
        if self.lease.delete_stale
            && let Ok(existing) = store.get(&resource, &key).await
            && existing.pointer("/spec/holderIdentity").and_then(Value::as_str)
                != Some(self.lease.holder_identity.as_str())
        {
            let _ = store
                .delete(&resource, &key, existing_preconditions(&existing))
                .await;
        }
        self.write().await;
    }

    /// Creates or renews the lease; whether it was written.
    async fn write(&self) -> bool {
        let store = self.store.as_ref();
        let resource = lease_resource();
        let key = own_key(&self.lease.server_id);
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

    /// Runs until `cancel`: renews the lease every renew interval (the first time at once) and sets the
    /// published flag (the server's readiness) once it is written. Call [`Self::initialize`] first. Store errors are retried on the
    /// next tick.
    pub async fn run(self, cancel: CancellationToken) {
        let mut interval = tokio::time::interval(self.lease.renew_interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = interval.tick() => {}
            }
            if self.write().await {
                self.published.store(true, Ordering::Release);
            }
        }
    }

    /// Deletes this server's lease (graceful shutdown, 1.35+) if it is still this run's: a lease already
    /// taken over by a newer run of the same host is left alone.
    pub async fn delete_own_lease(store: &dyn Store, server_id: &str, holder_identity: &str) {
        let (resource, key) = (lease_resource(), own_key(server_id));
        if let Ok(existing) = store.get(&resource, &key).await
            && existing.pointer("/spec/holderIdentity").and_then(Value::as_str) == Some(holder_identity)
        {
            let _ = store
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
