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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mvp_core::peer_discovery::is_valid_peer_identity_lease;
use mvp_core::resolve::is_valid_host_port;
use mvp_core::{
    DiscoveryResolver, GroupVersionResource, LocalDiscoveryCache, MetricsGeneration, MvpLayer, MvpMetrics,
    PeerDiscoveryCache, PeerDiscoverySync, PeerEndpoints, PeerResolutionMode, PeerResolver, PeerTlsConfig,
    PeerTransport, StorageVersionIndex, StorageVersionResolver,
};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::catalog::ServedApis;
use crate::identity::{IDENTITY_LEASE_COMPONENT, IDENTITY_LEASE_LABEL, IDENTITY_LEASE_NAMESPACE};
use crate::informer::run_informer;
use crate::server::ServerState;
use crate::store::{StorageResource, Store};
use crate::{peer_endpoint, peer_receipts};

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
pub const ENDPOINT_REFRESH: Duration = Duration::from_millis(100);

/// Peer addresses from the store's internal keyspace, cached and refreshed in the background.
/// Subscribers learn when the set of addresses changes (a peer became reachable or went away).
#[derive(Debug)]
pub struct StorePeerEndpoints {
    addresses: watch::Sender<Arc<HashMap<String, String>>>,
    /// Each peer's discovery receipt (see [`crate::peer_receipts`]).
    receipts: std::sync::RwLock<Arc<HashMap<String, peer_receipts::Receipt>>>,
}

impl Default for StorePeerEndpoints {
    fn default() -> Self {
        Self {
            addresses: watch::Sender::new(Arc::default()),
            receipts: std::sync::RwLock::default(),
        }
    }
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
        self.addresses.send_if_modified(|current| {
            let changed = **current != addresses;
            if changed {
                *current = Arc::new(addresses);
            }
            changed
        });
        if let Ok(records) = store.list_internal(peer_receipts::PREFIX).await {
            let receipts = records
                .iter()
                .filter_map(|(key, record)| {
                    let id = key.strip_prefix(peer_receipts::PREFIX)?;
                    Some((id.to_owned(), peer_receipts::from_record(record)?))
                })
                .collect();
            *self
                .receipts
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(receipts);
        }
    }

    /// Whether every reachable peer that publishes discovery receipts has asked this server's run
    /// (`own_id` holding its lease as `holder`) for its discovery.
    fn peers_know(&self, own_id: &str, holder: &str) -> bool {
        let receipts = self
            .receipts
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        receipts.iter().all(|(peer, receipt)| {
            peer == own_id || !self.is_reachable(peer) || receipt.get(own_id).is_some_and(|h| h == holder)
        })
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

    /// Notified whenever the known addresses change.
    fn subscribe(&self) -> watch::Receiver<Arc<HashMap<String, String>>> {
        self.addresses.subscribe()
    }

    /// Whether `server_id` has an address a request could be sent to.
    fn is_reachable(&self, server_id: &str) -> bool {
        self.endpoint(server_id).is_some_and(|hp| is_valid_host_port(&hp))
    }
}

impl PeerEndpoints for StorePeerEndpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        self.addresses.borrow().get(server_id).cloned()
    }
}

/// The peer IDs of the valid identity leases other than this server's, each with its lease's
/// `holderIdentity` (which run of the peer it is), as the lease informer last saw them; `None` until
/// it has listed them once.
type PeerIds = Option<Arc<Vec<(String, String)>>>;

/// The `unknown-version-proxy-filter` readiness check: upstream's post-start hook waits for the
/// proxy's caches to sync once, which can pass before a peer that is starting at the same time is
/// known, so the server answers a false 404 for that peer's resources while `/readyz` says ok.
/// This check also waits, in Discovery mode, until every peer that has an identity lease and a
/// published address has been asked for its discovery (an answer or a transport error: a broken
/// peer must not keep every other server unready). Like a post-start hook, once passed it stays
/// passed, so a peer joining later never takes a serving server out of a load balancer.
pub struct ProxyReadiness {
    resolver: Arc<dyn PeerResolver>,
    discovery: Option<(Arc<PeerDiscoveryCache>, watch::Receiver<PeerIds>)>,
    endpoints: Arc<StorePeerEndpoints>,
    passed: AtomicBool,
}

/// The check that this server's peers know it: every reachable peer that publishes discovery
/// receipts has asked this run of the server for its discovery ([`crate::peer_receipts`]). Waits at
/// most until a stalled peer's endpoint record lapses. Once passed it stays passed.
#[derive(Debug)]
pub struct PeersKnowServer {
    endpoints: Arc<StorePeerEndpoints>,
    passed: AtomicBool,
}

impl PeersKnowServer {
    /// Whether the check passes for `own_id` whose identity lease `holder` holds.
    pub fn is_ready(&self, own_id: &str, holder: &str) -> bool {
        if self.passed.load(Ordering::Acquire) {
            return true;
        }
        let ready = self.endpoints.peers_know(own_id, holder);
        if ready {
            self.passed.store(true, Ordering::Release);
        }
        ready
    }
}

impl std::fmt::Debug for ProxyReadiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyReadiness")
            .field("passed", &self.passed)
            .finish_non_exhaustive()
    }
}

impl ProxyReadiness {
    /// Whether the check passes (and from then on always will).
    pub fn is_ready(&self) -> bool {
        if self.passed.load(Ordering::Acquire) {
            return true;
        }
        let ready = self.resolver.has_synced()
            && self.discovery.as_ref().is_none_or(|(cache, peer_ids)| {
                peer_ids.borrow().as_ref().is_some_and(|ids| {
                    ids.iter()
                        .all(|(id, _)| cache.has_reached(id) || !self.endpoints.is_reachable(id))
                })
            });
        if ready {
            self.passed.store(true, Ordering::Release);
        }
        ready
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
    let _ = state.peers_know_server.set(PeersKnowServer {
        endpoints: endpoints.clone(),
        passed: AtomicBool::new(false),
    });

    let mode = state.options.peer_resolution_mode;
    let layer = match mode {
        PeerResolutionMode::StorageVersion => {
            let resolver = Arc::new(StorageVersionResolver::new(state.server_id.clone()));
            tasks.spawn(run_storage_version_informer(
                state.store.clone(),
                resolver.clone(),
                cancel.clone(),
            ));
            state.set_proxy(
                resolver.clone(),
                ProxyReadiness {
                    resolver: resolver.clone(),
                    discovery: None,
                    endpoints: endpoints.clone(),
                    passed: AtomicBool::new(false),
                },
            );
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
            let (peer_ids_tx, peer_ids) = watch::channel(None);
            tasks.spawn(run_identity_lease_informer(
                state.clone(),
                peer_ids_tx,
                cancel.clone(),
            ));
            let (receipts_tx, receipts) = watch::channel(None);
            tasks.spawn(run_peer_discovery_sync(
                sync,
                peer_ids.clone(),
                endpoints.clone(),
                receipts_tx,
                cancel.clone(),
            ));
            tasks.spawn(peer_receipts::run_publisher(
                state.store.clone(),
                state.server_id.clone(),
                receipts,
                state.options.peer_endpoint_ttl,
                state.options.peer_endpoint_refresh,
                cancel.clone(),
            ));
            let resolver = Arc::new(DiscoveryResolver::new(
                state.server_id.clone(),
                local,
                peers.clone(),
            ));
            state.set_proxy(
                resolver.clone(),
                ProxyReadiness {
                    resolver: resolver.clone(),
                    discovery: Some((peers, peer_ids)),
                    endpoints: endpoints.clone(),
                    passed: AtomicBool::new(false),
                },
            );
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

/// Discovery mode, peer side: the lease informer publishes the valid peer IDs when an identity lease
/// is added, deleted or changes holder (a restart), but not on renewals (spec §2.3).
async fn run_identity_lease_informer(
    state: Arc<ServerState>,
    peer_ids: watch::Sender<PeerIds>,
    cancel: CancellationToken,
) {
    let resource = StorageResource::new("coordination.k8s.io", "leases");
    let own_id = state.server_id.clone();
    let mut holders: Option<HashMap<String, String>> = None;
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
            let ids: Vec<(String, String)> = leases
                .iter()
                .filter(|l| is_valid_peer_identity_lease(l, &own_id))
                .filter_map(|l| {
                    let name = l.pointer("/metadata/name")?.as_str()?;
                    let holder = l.pointer("/spec/holderIdentity")?.as_str()?;
                    Some((name.to_owned(), holder.to_owned()))
                })
                .collect();
            peer_ids.send_replace(Some(Arc::new(ids)));
        },
    )
    .await;
}

/// Discovery mode: the work queue of upstream's `peer-discovery-cache-sync`, with one key. A full
/// sync runs when the peer IDs change (a newer change supersedes a sync still retrying), and also
/// when a peer that the last sync could not address publishes its address: a starting peer's
/// identity lease exists before its endpoint record, and waiting for the retry backoff to find the
/// record would leave a window of false 404s for that peer's resources. After each attempt the
/// peers it reached, with the lease holders it was given, go to `receipts`.
async fn run_peer_discovery_sync(
    sync: PeerDiscoverySync,
    mut peer_ids: watch::Receiver<PeerIds>,
    endpoints: Arc<StorePeerEndpoints>,
    receipts: watch::Sender<Option<peer_receipts::Receipt>>,
    cancel: CancellationToken,
) {
    let mut addresses = endpoints.subscribe();
    let cache = sync.cache().clone();
    let unreached_with_address = |ids: &[(String, String)]| {
        ids.iter()
            .any(|(id, _)| !cache.has_reached(id) && endpoints.is_reachable(id))
    };
    // What the cache's reached set means for `ids`, once an attempt with exactly `ids` has ended.
    let receipt = |ids: &[(String, String)]| -> peer_receipts::Receipt {
        ids.iter()
            .filter(|(id, _)| cache.has_reached(id))
            .cloned()
            .collect()
    };
    // The first list the informer publishes is work too, whether it came before this task started
    // or comes after.
    let mut pending = true;
    loop {
        let ids = peer_ids.borrow_and_update().clone();
        if let Some(ids) = ids.filter(|_| pending) {
            pending = false;
            // Called before each attempt: from the second on, the previous attempt used these `ids`.
            let attempts = std::sync::atomic::AtomicU32::new(0);
            let list = || {
                if attempts.fetch_add(1, Ordering::AcqRel) > 0 {
                    receipts.send_replace(Some(receipt(&ids)));
                }
                Ok(ids.iter().map(|(id, _)| id.clone()).collect())
            };
            let run = sync.sync_with_retries(list);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = &mut run => {
                        receipts.send_replace(Some(receipt(&ids)));
                        break;
                    }
                    changed = peer_ids.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        pending = true;
                        break;
                    }
                    changed = addresses.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        if unreached_with_address(&ids) {
                            pending = true;
                            break;
                        }
                    }
                }
            }
            continue;
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = peer_ids.changed() => {
                if changed.is_err() {
                    return;
                }
                pending = true;
            }
            changed = addresses.changed() => {
                if changed.is_err() {
                    return;
                }
                let ids = peer_ids.borrow().clone();
                pending = ids.is_some_and(|ids| unreached_with_address(&ids));
            }
        }
    }
}
