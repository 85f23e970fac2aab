//! The background loops between the store and the `mvp-core` library that [`install`](super::install::install) starts:
//! informers that hand the library what the store holds (StorageVersion objects in StorageVersion
//! mode; identity leases and changes of peer addresses in Discovery mode, what its peer discovery
//! sync reacts to), and the publication of this server's discovery receipt
//! ([`crate::controllers::peer_receipts`]) from what the library reports. Group-version exclusion's
//! informers are in [`super::gv_exclusion`].

use std::sync::Arc;

use mvp_core::{
    DiscoveryPeers, Lease, PeerEndpoints, StorageVersion, StorageVersionIndex, StorageVersionResolver,
};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::peer_endpoints::StorePeerEndpoints;
use crate::controllers::identity::IDENTITY_LEASE_NAMESPACE;
use crate::controllers::informer::{decoded, run_informer};
use crate::controllers::peer_receipts;
use crate::server::config::ServerOptions;
use crate::store::{StorageResource, Store};

/// The identity leases as the lease informer last listed them (only the fields the proxy reads,
/// so a renewal is no change); `None` until it has listed them once.
pub(super) type IdentityLeases = Option<Arc<Vec<Lease>>>;

/// Runs `future` until `cancel` fires.
pub(super) async fn until_cancelled(
    future: impl std::future::Future<Output = ()>,
    cancel: CancellationToken,
) {
    tokio::select! {
        () = cancel.cancelled() => {}
        () = future => {}
    }
}

/// StorageVersion mode: keeps the resolver's index equal to the StorageVersion objects in the store.
pub(super) async fn run_storage_version_informer(
    store: Arc<dyn Store>,
    resolver: Arc<StorageVersionResolver>,
    cancel: CancellationToken,
) {
    let resource = StorageResource::new(
        crate::controllers::storage_version::GROUP,
        crate::controllers::storage_version::RESOURCE,
    );
    run_informer(store, resource, None, cancel, move |objects| {
        let storage_versions: Vec<StorageVersion> = decoded(objects);
        resolver.replace(StorageVersionIndex::from_objects(&storage_versions));
        resolver.mark_synced();
    })
    .await;
}

/// Both modes: the identity leases of `kube-system`, published when one is added or deleted or
/// changes holder (a restart), not on renewals (docs/mvp-behaviour.md §2.3).
pub(super) async fn run_identity_lease_informer(
    store: Arc<dyn Store>,
    leases: watch::Sender<IdentityLeases>,
    cancel: CancellationToken,
) {
    let resource = StorageResource::new("coordination.k8s.io", "leases");
    run_informer(
        store,
        resource,
        Some(IDENTITY_LEASE_NAMESPACE),
        cancel,
        move |objects| {
            let listed: Vec<Lease> = decoded(objects);
            leases.send_if_modified(|current| {
                let changed = current.as_deref() != Some(&listed);
                if changed {
                    *current = Some(Arc::new(listed));
                }
                changed
            });
        },
    )
    .await;
}

/// Starts publishing this server's discovery receipt and returns where the proxy reports it. It is
/// published at once, empty: a peer that comes up while this proxy has not yet synced must wait for
/// it rather than find no receipt and take itself for known.
pub(super) fn publish_receipts(
    store: &Arc<dyn Store>,
    server_id: &str,
    options: &ServerOptions,
    tasks: &mut JoinSet<()>,
    cancel: &CancellationToken,
) -> watch::Sender<Option<peer_receipts::Receipt>> {
    let (receipts_tx, receipts) = watch::channel(Some(peer_receipts::Receipt::new()));
    tasks.spawn(peer_receipts::run_publisher(
        store.clone(),
        server_id.to_owned(),
        receipts,
        options.peer_endpoint_ttl,
        options.peer_endpoint_refresh,
        cancel.clone(),
    ));
    receipts_tx
}

/// StorageVersion mode's receipt: the peers (with their lease holders) whose address this proxy
/// holds, renewed whenever the leases or the addresses change.
pub(super) async fn run_address_receipts(
    own_id: String,
    mut leases: watch::Receiver<IdentityLeases>,
    endpoints: Arc<StorePeerEndpoints>,
    receipts: watch::Sender<Option<peer_receipts::Receipt>>,
    cancel: CancellationToken,
) {
    let mut addresses = endpoints.subscribe();
    loop {
        if let Some(listed) = leases.borrow_and_update().clone() {
            let receipt: peer_receipts::Receipt = listed
                .iter()
                .filter(|lease| lease.is_peer_identity_lease_of(&own_id))
                .filter(|lease| endpoints.is_reachable(&lease.metadata.name))
                .filter_map(|lease| Some((lease.metadata.name.clone(), lease.spec.holder_identity.clone()?)))
                .collect();
            publish(&receipts, receipt);
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = leases.changed() => if changed.is_err() { return },
            changed = addresses.changed() => if changed.is_err() { return },
        }
    }
}

/// Publishes `receipt` as this server's receipt unless it is the one already published (each
/// publication is a store write).
fn publish(receipts: &watch::Sender<Option<peer_receipts::Receipt>>, receipt: peer_receipts::Receipt) {
    receipts.send_if_modified(|current| {
        let changed = current.as_ref() != Some(&receipt);
        if changed {
            *current = Some(receipt);
        }
        changed
    });
}

/// Discovery mode: hands the library what this server's informers see (identity leases, a change
/// of peer addresses) and publishes, as this server's receipt, the peer runs whose discovery the
/// proxy holds after each sync.
pub(super) async fn feed_discovery_peers(
    peers: DiscoveryPeers,
    mut leases: watch::Receiver<IdentityLeases>,
    endpoints: Arc<StorePeerEndpoints>,
    receipts: watch::Sender<Option<peer_receipts::Receipt>>,
    cancel: CancellationToken,
) {
    let mut addresses = endpoints.subscribe();
    let mut known = peers.known_peers();
    loop {
        if let Some(listed) = leases.borrow_and_update().clone() {
            peers.set_identity_leases(listed.iter());
        }
        if addresses.has_changed().unwrap_or(false) {
            addresses.borrow_and_update();
            peers.peer_endpoints_changed();
        }
        if let Some(runs) = known.borrow_and_update().clone() {
            let receipt: peer_receipts::Receipt = runs
                .iter()
                .map(|run| (run.server_id.clone(), run.holder_identity.clone()))
                .collect();
            publish(&receipts, receipt);
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = leases.changed() => if changed.is_err() { return },
            changed = addresses.changed() => if changed.is_err() { return },
            changed = known.changed() => if changed.is_err() { return },
        }
    }
}
