//! Stage 4 of a request: the Mixed Version Proxy filter, built from `mvp-core` and fed from this server's
//! state and the shared store.
//!
//! This module implements `mvp-core`'s seams for the fake, as kube-apiserver's `BuildPeerProxy` does:
//! - local capability: the server's own served APIs (Discovery mode) or StorageVersion objects
//!   (StorageVersion mode, upstream alpha);
//! - peer capability: StorageVersion objects, or the peers' discovery, re-fetched when an identity lease
//!   is added, deleted or changes holder (not on renewals, docs/mvp-behaviour.md §2.3);
//! - peer addresses: the peer endpoint records of the store's internal keyspace (docs/mvp-behaviour.md §2.4).
//!
//! Like upstream, the filter is installed only when the gate is on and `--peer-ca-file` is set.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mvp_core::discovery_fetch::{MAX_RETRIES, backoff};
use mvp_core::peer_discovery::is_valid_peer_identity_lease;
use mvp_core::resolve::is_valid_host_port;
use mvp_core::snapshot::Snapshot;
use mvp_core::{
    DiscoveryResolver, GroupVersionResource, LocalDiscoveryCache, MetricsGeneration, MvpLayer, MvpMetrics,
    PeerDiscoveryCache, PeerDiscoverySync, PeerEndpoints, PeerResolutionMode, PeerResolver, PeerTlsConfig,
    PeerTransport, StorageVersionIndex, StorageVersionResolver,
};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::catalog::ServedApis;
use crate::controllers::identity::IDENTITY_LEASE_NAMESPACE;
use crate::controllers::informer::run_informer;
use crate::controllers::{peer_endpoint, peer_receipts};
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
pub const ENDPOINT_REFRESH: Duration = Duration::from_millis(100);

/// Peer addresses from the store's internal keyspace, cached and refreshed in the background.
/// Subscribers learn when the set of addresses changes (a peer became reachable or went away).
#[derive(Debug)]
pub struct StorePeerEndpoints {
    addresses: watch::Sender<Arc<HashMap<String, String>>>,
    /// Each peer's discovery receipt (see [`crate::controllers::peer_receipts`]).
    receipts: Snapshot<HashMap<String, peer_receipts::Receipt>>,
}

impl Default for StorePeerEndpoints {
    fn default() -> Self {
        Self {
            addresses: watch::Sender::new(Arc::default()),
            receipts: Snapshot::default(),
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
            self.receipts.store(receipts);
        }
    }

    /// Whether every reachable peer that publishes discovery receipts has asked this server's run
    /// (`own_id` holding its lease as `holder`) for its discovery.
    fn peers_know(&self, own_id: &str, holder: &str) -> bool {
        let receipts = self.receipts.load();
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

    /// Whether the view includes `own_id`'s own record: then it was read after that record was
    /// written, so it holds every peer record written before it. A view older than the own record
    /// would take peers that published theirs just before for unreachable.
    fn sees(&self, own_id: &str) -> bool {
        self.addresses.borrow().contains_key(own_id)
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

/// A readiness check that, like a post-start hook, stays passed once it has passed: a peer
/// joining or failing later never takes a serving server out of a load balancer.
#[derive(Debug, Default)]
struct Latch(AtomicBool);

impl Latch {
    fn check(&self, passes: impl FnOnce() -> bool) -> bool {
        if self.0.load(Ordering::Acquire) {
            return true;
        }
        let passed = passes();
        if passed {
            self.0.store(true, Ordering::Release);
        }
        passed
    }
}

/// The `unknown-version-proxy-filter` readiness check: upstream's post-start hook waits for the
/// proxy's caches to sync once, which can pass before a peer that is starting at the same time is
/// known, so the server answers a false 404 for that peer's resources while `/readyz` says ok.
/// This check also waits, in Discovery mode, until every peer that has an identity lease and a
/// published address has been asked for its discovery (an answer or a transport error: a broken
/// peer must not keep every other server unready).
pub struct ProxyReadiness {
    own_id: String,
    resolver: Arc<dyn PeerResolver>,
    discovery: Option<(Arc<PeerDiscoveryCache>, watch::Receiver<PeerIds>)>,
    endpoints: Arc<StorePeerEndpoints>,
    passed: Latch,
}

impl std::fmt::Debug for ProxyReadiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyReadiness")
            .field("passed", &self.passed)
            .finish_non_exhaustive()
    }
}

impl ProxyReadiness {
    /// Whether the proxy's caches have synced once: upstream's whole post-start hook, and what
    /// the peer endpoint record waits for.
    pub fn has_synced(&self) -> bool {
        self.resolver.has_synced()
    }

    /// Whether the check passes (and from then on always will): synced, and, once the view of
    /// peer addresses includes this server's own record (so it is not older than that record),
    /// every peer with a lease and an address reached.
    pub fn is_ready(&self) -> bool {
        self.passed.check(|| {
            self.resolver.has_synced()
                && self.endpoints.sees(&self.own_id)
                && self.discovery.as_ref().is_none_or(|(cache, peer_ids)| {
                    peer_ids.borrow().as_ref().is_some_and(|ids| {
                        ids.iter()
                            .all(|(id, _)| cache.has_reached(id) || !self.endpoints.is_reachable(id))
                    })
                })
        })
    }
}

/// How long [`PeersKnowServer`] waits at most: a peer that has not asked for this server's
/// discovery by then (stalled, or crashed with its endpoint record not yet lapsed) no longer holds
/// readiness back.
pub const PEERS_KNOW_SERVER_DEADLINE: Duration = Duration::from_secs(5);

/// The check that this server's peers know it: every reachable peer that publishes discovery
/// receipts has asked this run of the server for its discovery ([`crate::controllers::peer_receipts`]), or
/// [`PEERS_KNOW_SERVER_DEADLINE`] has passed since the check first ran.
#[derive(Debug)]
pub struct PeersKnowServer {
    endpoints: Arc<StorePeerEndpoints>,
    since: std::sync::OnceLock<std::time::Instant>,
    passed: Latch,
}

impl PeersKnowServer {
    /// Re-reads the peer addresses and receipts from the store now, rather than at the next
    /// background refresh: a readiness check judged on a view up to [`ENDPOINT_REFRESH`] old would
    /// take a peer whose address was just published for unreachable and pass without it.
    pub async fn refresh(&self, store: &dyn Store) {
        self.endpoints.refresh(store).await;
    }

    /// Whether the check passes for `own_id` whose identity lease `holder` holds.
    pub fn is_ready(&self, own_id: &str, holder: &str) -> bool {
        self.passed.check(|| {
            let since = *self.since.get_or_init(std::time::Instant::now);
            self.endpoints.sees(own_id)
                && (self.endpoints.peers_know(own_id, holder)
                    || since.elapsed() >= PEERS_KNOW_SERVER_DEADLINE)
        })
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
        since: std::sync::OnceLock::new(),
        passed: Latch::default(),
    });

    // Both modes follow the peers' identity leases and publish a receipt of the peers they know.
    let (peer_ids_tx, peer_ids) = watch::channel(None);
    tasks.spawn(run_identity_lease_informer(
        state.clone(),
        peer_ids_tx,
        cancel.clone(),
    ));
    let receipts = publish_receipts(state, tasks, cancel);

    let mode = state.options.peer_resolution_mode;
    let layer = match mode {
        PeerResolutionMode::StorageVersion => {
            let resolver = Arc::new(StorageVersionResolver::new(state.server_id.clone()));
            tasks.spawn(run_storage_version_informer(
                state.store.clone(),
                resolver.clone(),
                cancel.clone(),
            ));
            // StorageVersion mode asks peers for nothing, so its receipt says whom it can address:
            // a peer coming up waits until this proxy knows its address (else the alpha 503).
            tasks.spawn(run_address_receipts(
                peer_ids,
                endpoints.clone(),
                receipts,
                cancel.clone(),
            ));
            state.set_proxy(
                resolver.clone(),
                ProxyReadiness {
                    own_id: state.server_id.clone(),
                    resolver: resolver.clone(),
                    discovery: None,
                    endpoints: endpoints.clone(),
                    passed: Latch::default(),
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
            tasks.spawn(crate::server::mvp::gv_exclusion::run_gv_exclusion(
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
            tasks.spawn(run_peer_discovery_sync(
                sync,
                peer_ids.clone(),
                endpoints.clone(),
                receipts,
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
                    own_id: state.server_id.clone(),
                    resolver: resolver.clone(),
                    discovery: Some((peers, peer_ids)),
                    endpoints: endpoints.clone(),
                    passed: Latch::default(),
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
    let resource = StorageResource::new(
        crate::controllers::storage_version::GROUP,
        crate::controllers::storage_version::RESOURCE,
    );
    run_informer(store, resource, None, cancel, move |objects| {
        resolver.replace(StorageVersionIndex::from_objects(objects));
        resolver.mark_synced();
    })
    .await;
}

/// Discovery mode, local side: the local discovery cache is a snapshot of what this server serves, taken at
/// startup and then every `--local-discovery-refresh-seconds` (upstream: 30 min, docs/mvp-behaviour.md §1.4).
/// CRDs and aggregated APIs that appear in between are kept local by [`crate::server::mvp::gv_exclusion`].
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
/// is added, deleted or changes holder (a restart), but not on renewals (docs/mvp-behaviour.md §2.3).
async fn run_identity_lease_informer(
    state: Arc<ServerState>,
    peer_ids: watch::Sender<PeerIds>,
    cancel: CancellationToken,
) {
    let resource = StorageResource::new("coordination.k8s.io", "leases");
    let own_id = state.server_id.clone();
    run_informer(
        state.store.clone(),
        resource,
        Some(IDENTITY_LEASE_NAMESPACE),
        cancel,
        move |leases| {
            let ids: Vec<(String, String)> = leases
                .iter()
                .filter(|l| is_valid_peer_identity_lease(l, &own_id))
                .filter_map(|l| {
                    let name = l.pointer("/metadata/name")?.as_str()?;
                    let holder = l.pointer("/spec/holderIdentity")?.as_str()?;
                    Some((name.to_owned(), holder.to_owned()))
                })
                .collect();
            // A renewal changes neither names nor holders, so it sends nothing.
            peer_ids.send_if_modified(|current| {
                let changed = current.as_deref() != Some(&ids);
                if changed {
                    *current = Some(Arc::new(ids));
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
fn publish_receipts(
    state: &Arc<ServerState>,
    tasks: &mut JoinSet<()>,
    cancel: &CancellationToken,
) -> watch::Sender<Option<peer_receipts::Receipt>> {
    let (receipts_tx, receipts) = watch::channel(Some(peer_receipts::Receipt::new()));
    tasks.spawn(peer_receipts::run_publisher(
        state.store.clone(),
        state.server_id.clone(),
        receipts,
        state.options.peer_endpoint_ttl,
        state.options.peer_endpoint_refresh,
        cancel.clone(),
    ));
    receipts_tx
}

/// StorageVersion mode's receipt: the peers (with their lease holders) whose address this proxy
/// holds, renewed whenever the leases or the addresses change.
async fn run_address_receipts(
    mut peer_ids: watch::Receiver<PeerIds>,
    endpoints: Arc<StorePeerEndpoints>,
    receipts: watch::Sender<Option<peer_receipts::Receipt>>,
    cancel: CancellationToken,
) {
    let mut addresses = endpoints.subscribe();
    loop {
        if let Some(ids) = peer_ids.borrow_and_update().clone() {
            let receipt: peer_receipts::Receipt = ids
                .iter()
                .filter(|(id, _)| endpoints.is_reachable(id))
                .cloned()
                .collect();
            receipts.send_if_modified(|current| {
                let changed = current.as_ref() != Some(&receipt);
                if changed {
                    *current = Some(receipt);
                }
                changed
            });
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = peer_ids.changed() => if changed.is_err() { return },
            changed = addresses.changed() => if changed.is_err() { return },
        }
    }
}

/// Discovery mode: the work queue of upstream's `peer-discovery-cache-sync`, with one key. An
/// attempt is a full sync of the peers the lease informer last listed. It runs when that list
/// changes (a lease added, deleted or held by a new run), when a peer the last attempt could not
/// address publishes its address (a starting peer's lease exists before its endpoint record; waiting
/// for the backoff would leave a window of false 404s), and again after a failed attempt, with
/// client-go's backoff, up to [`MAX_RETRIES`] times. As in a work queue, an attempt under way is
/// never abandoned for new work: the new work runs right after it. After each attempt the peers it
/// reached, with the lease holders it was given, go to `receipts`.
async fn run_peer_discovery_sync(
    sync: PeerDiscoverySync,
    mut peer_ids: watch::Receiver<PeerIds>,
    endpoints: Arc<StorePeerEndpoints>,
    receipts: watch::Sender<Option<peer_receipts::Receipt>>,
    cancel: CancellationToken,
) {
    let mut addresses = endpoints.subscribe();
    let cache = sync.cache().clone();
    // The addresses the last attempt used: a peer that comes back at another address (a restart
    // on a new port, its old record not yet lapsed) is asked again there, even though the attempt
    // at the old address "reached" it with a transport error.
    let mut used = addresses.borrow().clone();
    let worth_asking =
        |ids: &[(String, String)], now: &HashMap<String, String>, used: &HashMap<String, String>| {
            ids.iter().any(|(id, _)| {
                let moved = now.get(id).is_some_and(|address| used.get(id) != Some(address));
                moved || (!cache.has_reached(id) && endpoints.is_reachable(id))
            })
        };
    // The first list the informer publishes is work too, whether it came before this task started
    // or comes after.
    let mut pending = true;
    let mut failures = 0u32;
    loop {
        let ids = peer_ids.borrow_and_update().clone();
        if let Some(ids) = ids.filter(|_| pending) {
            used = addresses.borrow().clone();
            let names: Vec<String> = ids.iter().map(|(id, _)| id.clone()).collect();
            let result = tokio::select! {
                () = cancel.cancelled() => return,
                result = sync.sync(&names) => result,
            };
            cache.mark_synced();
            // Only peers whose discovery this proxy holds: a peer this attempt could not fetch
            // (it counts as reached for this server's own readiness, so one broken peer cannot
            // hold everyone back) must not take itself for known.
            let entries = cache.entries();
            let receipt = ids
                .iter()
                .filter(|(id, _)| entries.contains_key(id))
                .cloned()
                .collect();
            receipts.send_replace(Some(receipt));
            failures = if result.is_ok() { 0 } else { failures + 1 };
        }
        let retry = failures > 0 && failures <= MAX_RETRIES;
        let backoff = backoff(failures.saturating_sub(1));
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = peer_ids.changed() => {
                if changed.is_err() {
                    return;
                }
                failures = 0;
                pending = true;
            }
            changed = addresses.changed() => {
                if changed.is_err() {
                    return;
                }
                let ids = peer_ids.borrow().clone();
                let now = addresses.borrow().clone();
                pending = ids.is_some_and(|ids| worth_asking(&ids, &now, &used));
            }
            () = tokio::time::sleep(backoff), if retry => pending = true,
        }
    }
}
