//! The Mixed Version Proxy filter, built with `mvp-core` (where its logic lives) and fed from this
//! server's state and the shared store, as kube-apiserver's `BuildPeerProxy` wires it:
//! - local capability: the server's own served APIs (Discovery mode) or StorageVersion objects
//!   (StorageVersion mode, upstream alpha), handed to the library;
//! - what the library's peer discovery sync reacts to: the identity leases and CRDs/APIServices the
//!   informers list, and changes of peer addresses;
//! - peer addresses: the peer endpoint records of the store's internal keyspace (docs/mvp-behaviour.md §2.4);
//! - this server's readiness and discovery receipt, from what the library reports.
//!
//! Like upstream, the filter is installed only when the gate is on and `--peer-ca-file` is set.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use mvp_core::{
    DiscoveryConfig, DiscoveryPeers, GroupVersionResource, Lease, MetricsGeneration, MvpLayer, MvpMetrics,
    PeerAggregatedDiscoveryHandler, PeerEndpoints, PeerResolutionMode, PeerResolver, PeerTlsConfig,
    PeerTransport, StorageVersion, StorageVersionIndex, StorageVersionResolver,
};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::catalog::ServedApis;
use crate::controllers::identity::IDENTITY_LEASE_NAMESPACE;
use crate::controllers::informer::{decoded, run_informer};
use crate::controllers::{peer_endpoint, peer_receipts};
use crate::server::config::ServerOptions;
use crate::store::{StorageResource, Store};

/// Why the peer proxy could not be built (kube-apiserver fails startup in these cases).
#[derive(Debug, thiserror::Error)]
pub enum PeerProxyError {
    /// The peer CA or proxy client certificate is unusable (its messages name the peer proxy handler
    /// where upstream's do).
    #[error(transparent)]
    Tls(#[from] mvp_core::PeerTlsError),
    /// The metrics could not be registered.
    #[error("error registering peer proxy metrics")]
    Metrics(#[from] prometheus::Error),
}

/// How often the cached peer addresses are re-read from the internal keyspace. Upstream reads etcd on
/// every proxied request; a short-lived snapshot keeps the hot path free of I/O.
pub(crate) const ENDPOINT_REFRESH: Duration = Duration::from_millis(100);

/// Peer addresses from the store's internal keyspace, cached and refreshed in the background.
/// Subscribers learn when the set of addresses changes (a peer became reachable or went away).
#[derive(Debug)]
pub(crate) struct StorePeerEndpoints {
    addresses: watch::Sender<Arc<HashMap<String, String>>>,
    /// Each peer's discovery receipt (see [`crate::controllers::peer_receipts`]).
    receipts: ArcSwap<HashMap<String, peer_receipts::Receipt>>,
}

impl Default for StorePeerEndpoints {
    fn default() -> Self {
        Self {
            addresses: watch::Sender::new(Arc::default()),
            receipts: ArcSwap::default(),
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
            self.receipts.store(Arc::new(receipts));
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
}

impl PeerEndpoints for StorePeerEndpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        self.addresses.borrow().get(server_id).cloned()
    }
}

/// The identity leases as the lease informer last listed them (only the fields the proxy reads,
/// so a renewal is no change); `None` until it has listed them once.
type IdentityLeases = Option<Arc<Vec<Lease>>>;

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
pub(crate) struct ProxyReadiness {
    own_id: String,
    resolver: Arc<dyn PeerResolver>,
    discovery: Option<DiscoveryPeers>,
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
    pub(crate) fn has_synced(&self) -> bool {
        self.resolver.has_synced()
    }

    /// Whether the check passes (and from then on always will): synced, and, once the view of
    /// peer addresses includes this server's own record (so it is not older than that record),
    /// every peer with a lease and an address reached.
    pub(crate) fn is_ready(&self) -> bool {
        self.passed.check(|| {
            self.resolver.has_synced()
                && self.endpoints.sees(&self.own_id)
                && self.discovery.as_ref().is_none_or(DiscoveryPeers::is_ready)
        })
    }
}

/// How long [`PeersKnowServer`] waits at most: a peer that has not asked for this server's
/// discovery by then (stalled, or crashed with its endpoint record not yet lapsed) no longer holds
/// readiness back.
pub(crate) const PEERS_KNOW_SERVER_DEADLINE: Duration = Duration::from_secs(5);

/// The check that this server's peers know it: every reachable peer that publishes discovery
/// receipts has asked this run of the server for its discovery ([`crate::controllers::peer_receipts`]), or
/// [`PEERS_KNOW_SERVER_DEADLINE`] has passed since the check first ran.
#[derive(Debug)]
pub(crate) struct PeersKnowServer {
    endpoints: Arc<StorePeerEndpoints>,
    since: std::sync::OnceLock<std::time::Instant>,
    passed: Latch,
}

impl PeersKnowServer {
    /// Re-reads the peer addresses and receipts from the store now, rather than at the next
    /// background refresh: a readiness check judged on a view up to [`ENDPOINT_REFRESH`] old would
    /// take a peer whose address was just published for unreachable and pass without it.
    pub(crate) async fn refresh(&self, store: &dyn Store) {
        self.endpoints.refresh(store).await;
    }

    /// Whether the check passes for `own_id` whose identity lease `holder` holds.
    pub(crate) fn is_ready(&self, own_id: &str, holder: &str) -> bool {
        self.passed.check(|| {
            let since = *self.since.get_or_init(std::time::Instant::now);
            self.endpoints.sees(own_id)
                && (self.endpoints.peers_know(own_id, holder)
                    || since.elapsed() >= PEERS_KNOW_SERVER_DEADLINE)
        })
    }
}

/// Every GVR a server serves, including `resource/subresource` keys as discovery lists them.
pub(crate) fn served_gvrs(apis: &ServedApis) -> HashSet<GroupVersionResource> {
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

/// What [`install`] needs of the server being started.
pub(crate) struct ProxyInputs<'a> {
    /// The server's options (flags, version, the proxy's timers).
    pub options: &'a ServerOptions,
    /// The shared store (identity leases, StorageVersions, CRDs, the internal keyspace).
    pub store: &'a Arc<dyn Store>,
    /// This server's ID.
    pub server_id: &'a str,
    /// The APIs this server serves (Discovery mode's local capability).
    pub served: &'a watch::Receiver<Arc<ServedApis>>,
    /// Where the proxy's metrics are registered.
    pub registry: &'a prometheus::Registry,
    /// Peer-aggregated `/apis`, connected to the peer discovery in Discovery mode.
    pub peer_aggregated: Option<&'a Arc<PeerAggregatedDiscoveryHandler>>,
}

/// An installed proxy, as the server's readiness checks and tools read it (the layer itself goes into
/// the handler chain).
pub(crate) struct PeerProxy {
    /// Which peers serve what, as the layer decides.
    pub resolver: Arc<dyn PeerResolver>,
    /// The `unknown-version-proxy-filter` readiness check.
    pub readiness: ProxyReadiness,
    /// The `peer-discovery-receipts` readiness check.
    pub peers_know_server: PeersKnowServer,
    /// The proxy's view of peer addresses.
    pub endpoints: Arc<StorePeerEndpoints>,
}

impl std::fmt::Debug for PeerProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerProxy").finish_non_exhaustive()
    }
}

/// Builds the filter for the server described by `inputs` and starts the controllers that feed it
/// (in `tasks`, until `cancel`). `None` when the proxy is not enabled (gate off or no
/// `--peer-ca-file`).
pub(crate) async fn install(
    inputs: ProxyInputs<'_>,
    tasks: &mut JoinSet<()>,
    cancel: &CancellationToken,
) -> Result<Option<(MvpLayer, PeerProxy)>, PeerProxyError> {
    let ProxyInputs {
        options,
        store,
        server_id,
        served,
        registry,
        peer_aggregated,
    } = inputs;
    if !options.peer_proxy_enabled() {
        return Ok(None);
    }
    let flags = &options.flags;
    let path =
        |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let tls = PeerTlsConfig::from_files(
        &path(&flags.peer_ca_file),
        &path(&flags.proxy_client_cert_file),
        &path(&flags.proxy_client_key_file),
    )?;
    let transport = PeerTransport::new(&tls)?;
    let generation = if options.emulated_version.minor >= 36 {
        MetricsGeneration::V1_36
    } else {
        MetricsGeneration::Alpha
    };
    let metrics = MvpMetrics::register(registry, generation)?;

    let endpoints = Arc::new(StorePeerEndpoints::default());
    endpoints.refresh(store.as_ref()).await;
    tasks.spawn(endpoints.clone().run(store.clone(), cancel.clone()));

    // Both modes follow the peers' identity leases and publish a receipt of the peers they know.
    let (leases_tx, peer_leases) = watch::channel(None);
    tasks.spawn(run_identity_lease_informer(
        store.clone(),
        leases_tx,
        cancel.clone(),
    ));
    let receipts = publish_receipts(store, server_id, options, tasks, cancel);

    let builder = MvpLayer::builder(server_id, endpoints.clone(), transport).metrics(metrics);
    let (layer, resolver, discovery): (_, Arc<dyn PeerResolver>, _) = match options.peer_resolution_mode {
        PeerResolutionMode::StorageVersion => {
            let (layer, resolver) = builder.storage_version();
            tasks.spawn(run_storage_version_informer(
                store.clone(),
                resolver.clone(),
                cancel.clone(),
            ));
            // StorageVersion mode asks peers for nothing, so its receipt says whom it can address:
            // a peer coming up waits until this proxy knows its address (else the alpha 503).
            tasks.spawn(run_address_receipts(
                server_id.to_owned(),
                peer_leases,
                endpoints.clone(),
                receipts,
                cancel.clone(),
            ));
            (layer, resolver, None)
        }
        PeerResolutionMode::Discovery => {
            let served = served.clone();
            let config = DiscoveryConfig::new(move || served_gvrs(&served.borrow()))
                .local_refresh(options.local_discovery_refresh)
                .exclusion_grace(options.gv_exclusion_grace_period)
                .departed_peer_grace(options.departed_peer_grace);
            let (layer, peers) = builder.discovery(config);
            if let Some(handler) = peer_aggregated {
                handler.connect(&peers);
            }
            tasks.spawn(until_cancelled(peers.run(), cancel.clone()));
            tasks.spawn(crate::server::mvp::gv_exclusion::run_gv_exclusion(
                store.clone(),
                peers.clone(),
                cancel.clone(),
            ));
            tasks.spawn(feed_discovery_peers(
                peers.clone(),
                peer_leases,
                endpoints.clone(),
                receipts,
                cancel.clone(),
            ));
            (layer, Arc::new(peers.clone()), Some(peers))
        }
    };
    let readiness = ProxyReadiness {
        own_id: server_id.to_owned(),
        resolver: resolver.clone(),
        discovery,
        endpoints: endpoints.clone(),
        passed: Latch::default(),
    };
    let peers_know_server = PeersKnowServer {
        endpoints: endpoints.clone(),
        since: std::sync::OnceLock::new(),
        passed: Latch::default(),
    };
    let proxy = PeerProxy {
        resolver,
        readiness,
        peers_know_server,
        endpoints,
    };
    Ok(Some((layer, proxy)))
}

/// Runs `future` until `cancel` fires.
async fn until_cancelled(future: impl std::future::Future<Output = ()>, cancel: CancellationToken) {
    tokio::select! {
        () = cancel.cancelled() => {}
        () = future => {}
    }
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
        let storage_versions: Vec<StorageVersion> = decoded(objects);
        resolver.replace(StorageVersionIndex::from_objects(&storage_versions));
        resolver.mark_synced();
    })
    .await;
}

/// Both modes: the identity leases of `kube-system`, published when one is added or deleted or
/// changes holder (a restart), not on renewals (docs/mvp-behaviour.md §2.3).
async fn run_identity_lease_informer(
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
fn publish_receipts(
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
async fn run_address_receipts(
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
async fn feed_discovery_peers(
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
