//! Group-version exclusion's inputs (docs/mvp-behaviour.md §2.3, checklist 37): the group versions this
//! server serves through CRDs and aggregated APIServices, read by informers and handed to the Mixed
//! Version Proxy, which keeps them (and, for a grace period, deleted ones) out of peers' discovery.

use std::collections::HashSet;
use std::sync::Arc;

use mvp_core::{ApiService, CustomResourceDefinition, DiscoveryPeers, GroupVersion};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controllers::informer::{decoded, run_informer};
use crate::store::{StorageResource, Store};

/// The storage resource of APIServices.
pub(crate) fn apiservice_resource() -> StorageResource {
    StorageResource::new("apiregistration.k8s.io", "apiservices")
}

/// The group versions of the objects in an informer's list that decode as `T`.
fn group_versions<T: DeserializeOwned>(
    objects: &[Value],
    of: fn(&T) -> Vec<GroupVersion>,
) -> HashSet<GroupVersion> {
    decoded::<T>(objects).iter().flat_map(of).collect()
}

/// Hands `peers` the group versions of the CRDs and aggregated APIServices in `store`, whenever
/// either changes, until `cancel`.
pub(crate) async fn run_gv_exclusion(
    store: Arc<dyn Store>,
    peers: DiscoveryPeers,
    cancel: CancellationToken,
) {
    let (crd_tx, mut crd_rx) = watch::channel(HashSet::<GroupVersion>::new());
    let (svc_tx, mut svc_rx) = watch::channel(HashSet::<GroupVersion>::new());
    let mut informers = tokio::task::JoinSet::new();
    informers.spawn(run_informer(
        store.clone(),
        crate::controllers::crd::crd_resource(),
        None,
        cancel.clone(),
        move |crds| {
            crd_tx.send_replace(group_versions(crds, CustomResourceDefinition::group_versions));
        },
    ));
    informers.spawn(run_informer(
        store,
        apiservice_resource(),
        None,
        cancel.clone(),
        move |services| {
            svc_tx.send_replace(group_versions(services, ApiService::group_versions));
        },
    ));
    loop {
        let served = crd_rx
            .borrow_and_update()
            .union(&svc_rx.borrow_and_update())
            .cloned()
            .collect::<Vec<_>>();
        peers.set_extension_group_versions(served);
        tokio::select! {
            () = cancel.cancelled() => break,
            changed = crd_rx.changed() => if changed.is_err() { break },
            changed = svc_rx.changed() => if changed.is_err() { break },
        }
    }
    informers.abort_all();
}
