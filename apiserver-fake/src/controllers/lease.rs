//! The identity lease controller (docs/mvp-behaviour.md §2.2): publishes and renews this server's identity
//! lease in `kube-system`, and marks the server ready once the lease exists.
//!
//! From 1.35 kube-apiserver also deletes a stale lease of its own name at startup (a previous run that
//! crashed) and its own lease on graceful shutdown, so peers forget it at once (PR #134514).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use mvp_core::feeders::{IdentityLease, IdentityLeaseTask, delete_identity_lease};
use tokio_util::sync::CancellationToken;

use crate::controllers::cluster_api::StoreCluster;
use crate::store::Store;

/// The identity lease of one run of a server, as its controller writes it.
#[derive(Debug, Clone)]
pub(crate) struct OwnLease {
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

/// Publishes and renews one server's identity lease: mvp-core's [`IdentityLeaseTask`] over this
/// server's store, which deletes the lease itself at the right point of its shutdown
/// ([`Self::delete_own_lease`]).
pub(crate) struct IdentityLeaseController {
    task: IdentityLeaseTask,
    published: Arc<AtomicBool>,
}

impl std::fmt::Debug for IdentityLeaseController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityLeaseController")
            .field("task", &self.task)
            .finish_non_exhaustive()
    }
}

impl IdentityLeaseController {
    /// A controller writing `lease` to `store`; it sets `published` once the lease is written by
    /// [`Self::run`].
    pub(crate) fn new(lease: OwnLease, store: Arc<dyn Store>, published: Arc<AtomicBool>) -> Self {
        let lease = IdentityLease {
            server_id: lease.server_id,
            holder_identity: lease.holder_identity,
            hostname: lease.hostname,
            duration: lease.duration,
            renew_interval: lease.renew_interval,
            peer_advertise_address: lease.peer_address,
            clean_up: lease.delete_stale,
        };
        let task = IdentityLeaseTask::new(Arc::new(StoreCluster(store)), lease).keep_on_stop();
        Self { task, published }
    }

    /// Startup, before anything else refers to this server's ID (e.g. StorageVersion entries, which the
    /// StorageVersion garbage collector would otherwise remove as lease-less): (1.35+) deletes a stale
    /// lease of the same name left by a previous run, then writes this run's lease once. Errors are left
    /// to [`Self::run`], which retries every renew interval.
    pub(crate) async fn initialize(&self) {
        if let Err(err) = self.task.initialize().await {
            tracing::warn!(error = %err, "failed to write the identity lease; retrying");
        }
    }

    /// Runs until `cancel`: renews the lease every renew interval (the first time at once) and sets the
    /// published flag (the server's readiness) once it is written. Call [`Self::initialize`] first.
    /// Store errors are retried on the next tick.
    pub(crate) async fn run(self, cancel: CancellationToken) {
        self.task
            .with_published(self.published)
            .run(cancel.cancelled_owned())
            .await;
    }

    /// Deletes this server's lease (graceful shutdown, 1.35+) if it is still this run's: a lease already
    /// taken over by a newer run of the same host is left alone.
    pub(crate) async fn delete_own_lease(store: Arc<dyn Store>, server_id: &str, holder_identity: &str) {
        if let Err(err) = delete_identity_lease(&StoreCluster(store), server_id, holder_identity).await {
            tracing::warn!(error = %err, "failed to delete the identity lease");
        }
    }
}
