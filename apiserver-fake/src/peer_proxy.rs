//! Stage 4 of a request: the Mixed Version Proxy filter, built from `mvp-core` and fed from this server's
//! state and the shared store.
//!
//! This module implements `mvp-core`'s seams for the fake, as kube-apiserver's `BuildPeerProxy` does:
//! - local capability: the server's own served APIs (Discovery mode) or StorageVersion objects
//!   (StorageVersion mode, upstream alpha);
//! - peer capability: StorageVersion objects, or the peers' discovery, re-fetched when an identity lease
//!   is added, deleted or changes holder (not on renewals, spec §2.3);
//! - peer addresses: the peer endpoint records of the store's internal keyspace (spec §2.4).
//!
//! Like upstream, the filter is installed only when the gate is on and `--peer-ca-file` is set.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use mvp_core::peer_discovery::is_valid_peer_identity_lease;
use mvp_core::{
    DiscoveryResolver, GroupVersionResource, LocalDiscoveryCache, MetricsGeneration, MvpLayer, MvpMetrics,
    PeerDiscoveryCache, PeerDiscoverySync, PeerEndpoints, PeerResolutionMode, PeerTlsConfig, PeerTransport,
    StorageVersionIndex, StorageVersionResolver,
};
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::catalog::ServedApis;
use crate::identity::{IDENTITY_LEASE_COMPONENT, IDENTITY_LEASE_LABEL, IDENTITY_LEASE_NAMESPACE};
use crate::informer::run_informer;
use crate::peer_endpoint;
use crate::server::ServerState;
use crate::store::{StorageResource, Store};

/// Why the peer proxy could not be built (kube-apiserver fails startup in these cases).
#[derive(Debug, thiserror::Error)]
pub enum PeerProxyError {
    /// The peer CA or proxy client certificate is unusable.
    #[error("error building peer proxy handler, {0}")]
    Tls(#[from] mvp_core::PeerTlsError),
    /// The metrics could not be registered.
    #[error("error registering peer proxy metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// How often the cached peer addresses are re-read from the internal keyspace. Upstream reads etcd on
/// every proxied request; a short-lived snapshot keeps the hot path free of I/O.
const ENDPOINT_REFRESH: Duration = Duration::from_millis(100);

/// Peer addresses from the store's internal keyspace, cached and refreshed in the background.
#[derive(Debug, Default)]
pub struct StorePeerEndpoints {
    addresses: RwLock<Arc<HashMap<String, String>>>,
}

impl StorePeerEndpoints {
    async fn refresh(&self, store: &dyn Store) {
        let Ok(records) = store.list_internal(peer_endpoint::PREFIX).await else {
            return;
        };
        let addresses: HashMap<String, String> = records
            .iter()
            .filter_map(|(key, record)| {
                let id = key.strip_prefix(peer_endpoint::PREFIX)?;
                Some((id.to_owned(), peer_endpoint::record_address(record)?))
            })
            .collect();
        *self.addresses.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(addresses);
    }

    async fn run(self: Arc<Self>, store: Arc<dyn Store>, cancel: CancellationToken) {
        loop {
            self.refresh(store.as_ref()).await;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(ENDPOINT_REFRESH) => {}
            }
        }
    }
}

impl PeerEndpoints for StorePeerEndpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        self.addresses
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(server_id)
            .cloned()
    }
}

/// Every GVR a server serves, including `resource/subresource` keys as discovery lists them.
pub fn served_gvrs(apis: &ServedApis) -> HashSet<GroupVersionResource> {
    let mut gvrs = HashSet::new();
    for (group, version, resource) in apis.gvrs() {
        gvrs.insert(GroupVersionResource::new(group, version, &resource.name));
        for sub in &resource.subresources {
            gvrs.insert(GroupVersionResource::new(
                group,
                version,
                format!("{}/{}", resource.name, sub.name),
            ));
        }
    }
    gvrs
}

/// Builds the filter for the server behind `state` and starts the controllers that feed it. `None` when
/// the proxy is not enabled (gate off or no `--peer-ca-file`).
pub async fn install(
    state: &Arc<ServerState>,
    tasks: &mut JoinSet<()>,
    cancel: &CancellationToken,
) -> Result<Option<MvpLayer>, PeerProxyError> {
    if !state.options.peer_proxy_enabled() {
        return Ok(None);
    }
    let flags = &state.options.flags;
    let path =
        |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let tls = PeerTlsConfig::from_files(
        &path(&flags.peer_ca_file),
        &path(&flags.proxy_client_cert_file),
        &path(&flags.proxy_client_key_file),
    )?;
    let transport = PeerTransport::new(&tls)?;
    let generation = if state.options.emulated_version.minor >= 36 {
        MetricsGeneration::V1_36
    } else {
        MetricsGeneration::Alpha
    };
    let metrics = MvpMetrics::register(state.metrics.registry(), generation)?;

    let endpoints = Arc::new(StorePeerEndpoints::default());
    endpoints.refresh(state.store.as_ref()).await;
    tasks.spawn(endpoints.clone().run(state.store.clone(), cancel.clone()));
    let _ = state.proxy_endpoints.set(endpoints.clone());

    let mode = state.options.peer_resolution_mode;
    let layer = match mode {
        PeerResolutionMode::StorageVersion => {
            let resolver = Arc::new(StorageVersionResolver::new(state.server_id.clone()));
            tasks.spawn(run_storage_version_informer(
                state.store.clone(),
                resolver.clone(),
                cancel.clone(),
            ));
            state.set_proxy_resolver(resolver.clone());
            MvpLayer::new(mode, resolver.clone(), resolver, endpoints, transport)
        }
        PeerResolutionMode::Discovery => {
            let local = Arc::new(LocalDiscoveryCache::new());
            let peers = Arc::new(PeerDiscoveryCache::new());
            if let Some(handler) = &state.peer_aggregated {
                handler.set_peer_cache(peers.clone());
            }
            tasks.spawn(run_local_discovery(state.clone(), local.clone(), cancel.clone()));
            tasks.spawn(crate::gv_exclusion::run_gv_exclusion(
                state.store.clone(),
                peers.clone(),
                state.options.gv_exclusion_grace_period,
                cancel.clone(),
            ));
            let sync = PeerDiscoverySync::new(
                peers.clone(),
                endpoints.clone(),
                transport.clone(),
                Some(metrics.clone()),
            );
            tasks.spawn(run_identity_lease_informer(state.clone(), sync, cancel.clone()));
            let resolver = Arc::new(DiscoveryResolver::new(state.server_id.clone(), local, peers));
            state.set_proxy_resolver(resolver.clone());
            MvpLayer::new(mode, resolver.clone(), resolver, endpoints, transport)
        }
    };
    Ok(Some(layer.with_metrics(metrics)))
}

/// StorageVersion mode: keeps the resolver's index equal to the StorageVersion objects in the store.
async fn run_storage_version_informer(
    store: Arc<dyn Store>,
    resolver: Arc<StorageVersionResolver>,
    cancel: CancellationToken,
) {
    let resource = StorageResource::new(crate::storage_version::GROUP, crate::storage_version::RESOURCE);
    run_informer(store, resource, None, cancel, move |objects| {
        resolver.replace(StorageVersionIndex::from_objects(objects));
        resolver.mark_synced();
    })
    .await;
}

/// Discovery mode, local side: the local discovery cache is a snapshot of what this server serves, taken
/// at startup and then every `--local-discovery-refresh-seconds` (upstream: 30 min, spec §1.4). CRDs and
/// aggregated APIs that appear in between are kept local by [`crate::gv_exclusion`].
async fn run_local_discovery(
    state: Arc<ServerState>,
    local: Arc<LocalDiscoveryCache>,
    cancel: CancellationToken,
) {
    let mut interval = tokio::time::interval(state.options.local_discovery_refresh);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = interval.tick() => {}
        }
        let gvrs = served_gvrs(&state.served.borrow());
        local.replace(gvrs);
    }
}

/// Discovery mode, peer side: re-fetch every peer's discovery when an identity lease is added, deleted
/// or changes holder (a restart), but not on renewals (spec §2.3).
async fn run_identity_lease_informer(
    state: Arc<ServerState>,
    sync: PeerDiscoverySync,
    cancel: CancellationToken,
) {
    let resource = StorageResource::new("coordination.k8s.io", "leases");
    let own_id = state.server_id.clone();
    let mut holders: Option<HashMap<String, String>> = None;
    let mut running: Option<tokio::task::JoinHandle<()>> = None;
    let sync_cancel = cancel.clone();
    run_informer(
        state.store.clone(),
        resource,
        Some(IDENTITY_LEASE_NAMESPACE),
        cancel,
        move |leases| {
            let current: HashMap<String, String> = leases
                .iter()
                .filter(|l| {
                    l.pointer(&format!(
                        "/metadata/labels/{}",
                        IDENTITY_LEASE_LABEL.replace('/', "~1")
                    )) == Some(&Value::from(IDENTITY_LEASE_COMPONENT))
                })
                .filter_map(|l| {
                    let name = l.pointer("/metadata/name")?.as_str()?.to_owned();
                    let holder = l
                        .pointer("/spec/holderIdentity")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    Some((name, holder))
                })
                .collect();
            if holders.as_ref() == Some(&current) {
                return;
            }
            holders = Some(current);
            let peer_ids: Vec<String> = leases
                .iter()
                .filter(|l| is_valid_peer_identity_lease(l, &own_id))
                .filter_map(|l| {
                    l.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect();
            // Like a work queue keyed by lease name, a newer change supersedes a sync still retrying.
            if let Some(previous) = running.take() {
                previous.abort();
            }
            let (sync, cancel) = (sync.clone(), sync_cancel.clone());
            // Tied to the server's lifetime: a sync still retrying must not outlive a shutdown or kill.
            running = Some(tokio::spawn(async move {
                tokio::select! {
                    () = cancel.cancelled() => {}
                    _ = sync.sync_with_retries(|| Ok(peer_ids.clone())) => {}
                }
            }));
        },
    )
    .await;
}
