//! Discovery mode's controllers (upstream beta, 1.33+; docs/mvp-behaviour.md §1.4, §2.3): what
//! this server serves, what each peer serves, and which group versions stay local.
//!
//! The embedding server feeds [`DiscoveryPeers`] with what its informers see (identity leases,
//! CRDs and aggregated APIServices, a change of peer addresses) and runs [`DiscoveryPeers::run`];
//! the layer built beside it reads the caches on every request.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::discovery::caches::{DiscoveryResolver, LocalDiscoveryCache, PeerDiscoveryCache};
use crate::discovery::sync::{MAX_RETRIES, PeerDiscoverySync, backoff};
use crate::gv_exclusion::GvExclusionTracker;
use crate::gvr::GroupVersionResource;
use crate::metrics::MvpMetrics;
use crate::objects::{GroupVersion, Lease};
use crate::resolve::{PeerEndpoints, PeerResolver};
use crate::transport::PeerTransport;

/// Upstream's local discovery refresh period (`RunLocalDiscoveryCacheSync`).
pub const DEFAULT_LOCAL_REFRESH: Duration = Duration::from_secs(30 * 60);

/// Upstream's grace period for the group versions of deleted CRDs and APIServices.
pub const DEFAULT_EXCLUSION_GRACE: Duration = Duration::from_secs(5 * 60);

/// How long a peer whose identity lease was deleted stays known (not upstream: see
/// [`DiscoveryConfig::departed_peer_grace`]).
pub const DEFAULT_DEPARTED_PEER_GRACE: Duration = Duration::from_secs(5);

/// What this server serves itself, asked at start-up and then every refresh period.
type LocalResources = Arc<dyn Fn() -> HashSet<GroupVersionResource> + Send + Sync>;

/// How Discovery mode learns what this server serves, and its two timers.
#[derive(Clone)]
pub struct DiscoveryConfig {
    local_resources: LocalResources,
    local_refresh: Duration,
    exclusion_grace: Duration,
    departed_peer_grace: Duration,
}

impl std::fmt::Debug for DiscoveryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveryConfig")
            .field("local_refresh", &self.local_refresh)
            .field("exclusion_grace", &self.exclusion_grace)
            .field("departed_peer_grace", &self.departed_peer_grace)
            .finish_non_exhaustive()
    }
}

impl DiscoveryConfig {
    /// `local_resources` lists every GVR this server serves, `resource/subresource` keys
    /// included, as its aggregated discovery lists them. Upstream's timers: a local refresh every
    /// 30 minutes and a 5-minute exclusion grace; departed peers are kept for
    /// [`DEFAULT_DEPARTED_PEER_GRACE`].
    pub fn new(local_resources: impl Fn() -> HashSet<GroupVersionResource> + Send + Sync + 'static) -> Self {
        Self {
            local_resources: Arc::new(local_resources),
            local_refresh: DEFAULT_LOCAL_REFRESH,
            exclusion_grace: DEFAULT_EXCLUSION_GRACE,
            departed_peer_grace: DEFAULT_DEPARTED_PEER_GRACE,
        }
    }

    /// How often the local discovery snapshot is retaken (`--local-discovery-refresh`).
    /// CRDs and aggregated APIs that appear in between stay local through exclusion. At least
    /// a millisecond.
    pub fn local_refresh(mut self, period: Duration) -> Self {
        self.local_refresh = period.max(Duration::from_millis(1));
        self
    }

    /// How long the group versions of a deleted CRD or aggregated APIService stay excluded
    /// from peers' discovery.
    pub fn exclusion_grace(mut self, grace: Duration) -> Self {
        self.exclusion_grace = grace;
        self
    }

    /// How long a peer whose identity lease was deleted stays known for what it served
    /// ([`DEFAULT_DEPARTED_PEER_GRACE`] by default; zero forgets it at once, as upstream does).
    ///
    /// kube-apiserver 1.35+ deletes the lease a crashed predecessor left behind when it starts,
    /// then creates its own: forgotten at once, the restarting peer's resources would be false
    /// 404s (and garbage collection could act on them) until its new run is fetched. Kept, they
    /// are 503s while it is unreachable, and its new run's discovery replaces the entry once
    /// fetched. A peer stopped for good is forgotten after the grace.
    pub fn departed_peer_grace(mut self, grace: Duration) -> Self {
        self.departed_peer_grace = grace;
        self
    }
}

/// One run of a peer: its server ID and the `holderIdentity` of its identity lease (which
/// changes when, and only when, the peer restarts).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PeerRun {
    /// The peer's server ID (its identity lease's name).
    pub server_id: String,
    /// Its identity lease's holder.
    pub holder_identity: String,
}

/// The list of peer runs the lease informer last saw; `None` until it has listed once.
type PeerRuns = Option<Arc<Vec<PeerRun>>>;

struct Inner {
    resolver: Arc<DiscoveryResolver>,
    sync: PeerDiscoverySync,
    endpoints: Arc<dyn PeerEndpoints>,
    config: DiscoveryConfig,
    leases: watch::Sender<PeerRuns>,
    addresses: watch::Sender<u64>,
    extensions: watch::Sender<HashSet<GroupVersion>>,
    known: watch::Sender<PeerRuns>,
    /// The peer runs the last sync attempt reached (see [`DiscoveryPeers::is_ready`]).
    reached: std::sync::RwLock<HashSet<PeerRun>>,
}

/// Discovery mode's view of the cluster, fed by the embedding server (upstream's
/// `peer-discovery-cache-sync`, local discovery sync and `GVExclusionManager` in one).
///
/// Cheap to clone; every clone is the same view. Built by
/// [`MvpBuilder::discovery`](crate::MvpBuilder::discovery).
#[derive(Clone)]
pub struct DiscoveryPeers {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DiscoveryPeers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveryPeers")
            .field("synced", &self.has_synced())
            .finish_non_exhaustive()
    }
}

impl DiscoveryPeers {
    pub(crate) fn new(
        server_id: String,
        endpoints: Arc<dyn PeerEndpoints>,
        transport: PeerTransport,
        metrics: Option<MvpMetrics>,
        config: DiscoveryConfig,
    ) -> Self {
        let local = Arc::new(LocalDiscoveryCache::new());
        let peers = Arc::new(PeerDiscoveryCache::new());
        let sync = PeerDiscoverySync::new(peers.clone(), endpoints.clone(), transport, metrics);
        Self {
            inner: Arc::new(Inner {
                resolver: Arc::new(DiscoveryResolver::new(server_id, local, peers)),
                sync,
                endpoints,
                config,
                leases: watch::Sender::new(None),
                addresses: watch::Sender::new(0),
                extensions: watch::Sender::new(HashSet::new()),
                known: watch::Sender::new(None),
                reached: std::sync::RwLock::default(),
            }),
        }
    }

    pub(crate) fn resolver(&self) -> Arc<DiscoveryResolver> {
        self.inner.resolver.clone()
    }

    /// The identity leases the server's informer lists now (all of them; the invalid ones, and
    /// this server's own, are filtered here). A sync of every peer's discovery follows when a
    /// lease was added or deleted or changed holder, not on renewals (docs/mvp-behaviour.md
    /// §2.3): call this on every informer event.
    pub fn set_identity_leases<'a>(&self, leases: impl IntoIterator<Item = &'a Lease>) {
        let own_id = self.inner.resolver.server_id();
        let mut runs: Vec<PeerRun> = leases
            .into_iter()
            .filter(|lease| lease.is_peer_identity_lease_of(own_id))
            .filter_map(|lease| {
                Some(PeerRun {
                    server_id: lease.metadata.name.clone(),
                    holder_identity: lease.spec.holder_identity.clone()?,
                })
            })
            .collect();
        // In a fixed order, so that an informer listing in another order is no change.
        runs.sort_by(|a, b| a.server_id.cmp(&b.server_id));
        self.inner.leases.send_if_modified(|current| {
            let changed = current.as_deref() != Some(&runs);
            if changed {
                *current = Some(Arc::new(runs));
            }
            changed
        });
    }

    /// Tells the sync that the [`PeerEndpoints`] changed. A peer the last sync could not
    /// address (a starting peer's lease exists before its address is published) is asked at
    /// once, and so is a peer that came back at another address, rather than after a backoff
    /// that would leave a window of false 404s.
    pub fn peer_endpoints_changed(&self) {
        self.inner.addresses.send_modify(|generation| *generation += 1);
    }

    /// The group versions this server serves through CRDs and aggregated APIServices now (see
    /// [`CustomResourceDefinition::group_versions`](crate::CustomResourceDefinition::group_versions)
    /// and [`ApiService::group_versions`](crate::ApiService::group_versions)). They, and for the
    /// grace period those that stop being served, are removed from every peer's discovery, so
    /// requests for them are always handled locally.
    pub fn set_extension_group_versions(&self, group_versions: impl IntoIterator<Item = GroupVersion>) {
        let fresh: HashSet<GroupVersion> = group_versions.into_iter().collect();
        self.inner.extensions.send_if_modified(|current| {
            let changed = *current != fresh;
            if changed {
                *current = fresh;
            }
            changed
        });
    }

    /// Drives the view: takes the local snapshot now and every refresh period, syncs peers'
    /// discovery on lease and address changes (retrying a failed sync with client-go's backoff,
    /// up to 20 times, as upstream since 1.35), and applies exclusion with its grace timers. Spawn it once;
    /// it runs until dropped.
    pub fn run(&self) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            futures_util::future::join3(this.local_loop(), this.sync_loop(), this.exclusion_loop()).await;
        }
    }

    /// Whether the caches have synced once: the local snapshot is taken and a first peer sync
    /// ran. Upstream's whole `unknown-version-proxy-filter` post-start hook; until then the
    /// filter serves every request locally.
    pub fn has_synced(&self) -> bool {
        self.inner.resolver.has_synced()
    }

    /// [`Self::has_synced`], and every peer run (identity lease and holder) with a valid address
    /// has been asked for its discovery (an answer or a transport error: a broken peer must not keep
    /// this server unready). Upstream's hook can pass before a peer starting at the same time is
    /// known, and the server then answers false 404s for that peer's resources while ready; a
    /// readiness check on this closes that window.
    pub fn is_ready(&self) -> bool {
        self.has_synced()
            && self.inner.leases.borrow().as_ref().is_some_and(|runs| {
                runs.iter()
                    .all(|run| self.has_reached(run) || !self.is_reachable(&run.server_id))
            })
    }

    /// Whether the last sync attempt asked this run of a peer.
    fn has_reached(&self, run: &PeerRun) -> bool {
        self.inner
            .reached
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(run)
    }

    /// The peer runs whose discovery this server holds, published after each sync attempt
    /// (`None` before the first). A server can publish them so that a starting peer knows when
    /// it is known.
    pub fn known_peers(&self) -> watch::Receiver<Option<Arc<Vec<PeerRun>>>> {
        self.inner.known.subscribe()
    }

    /// The peers' discovery, as the last sync found it with exclusion applied; peer-aggregated
    /// discovery reads it.
    pub(crate) fn peer_cache(&self) -> &Arc<PeerDiscoveryCache> {
        self.inner.resolver.peers()
    }

    fn is_reachable(&self, server_id: &str) -> bool {
        self.inner.endpoints.is_reachable(server_id)
    }

    async fn local_loop(&self) {
        let mut interval = tokio::time::interval(self.inner.config.local_refresh);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            self.inner
                .resolver
                .local()
                .replace((self.inner.config.local_resources)());
        }
    }

    /// The work queue of upstream's `peer-discovery-cache-sync`, with one key. An attempt is a
    /// full sync of the peers the lease informer last listed; as in a work queue, an attempt
    /// under way is never abandoned for new work: the new work runs right after it.
    async fn sync_loop(&self) {
        let inner = &self.inner;
        let cache = inner.resolver.peers().clone();
        let mut leases = inner.leases.subscribe();
        let mut addresses = inner.addresses.subscribe();
        // The addresses the last attempt used: a peer that comes back at another address (a
        // restart on a new port, its old address not yet withdrawn) is asked again there, even
        // though the attempt at the old address "reached" it with a transport error.
        let mut used: HashMap<String, Option<String>> = HashMap::new();
        // The first list the informer publishes is work, whether it came before this task
        // started or comes after.
        let mut pending = true;
        let mut failures = 0u32;
        // When a failed attempt is retried: fixed when it fails, so that other wake-ups do not
        // push the retry back.
        let mut retry_at: Option<Instant> = None;
        // Peers whose lease went away, with when they are forgotten
        // (DiscoveryConfig::departed_peer_grace).
        let mut departed: HashMap<String, Instant> = HashMap::new();
        // The run each cached entry was fetched from: an entry kept from an earlier run of a
        // restarted peer does not make its new run known.
        let mut entry_runs: HashMap<String, String> = HashMap::new();
        loop {
            let runs = leases.borrow_and_update().clone();
            if let Some(runs) = runs.filter(|_| pending) {
                addresses.borrow_and_update();
                used = runs
                    .iter()
                    .map(|run| (run.server_id.clone(), inner.endpoints.endpoint(&run.server_id)))
                    .collect();
                let ids: Vec<String> = runs.iter().map(|run| run.server_id.clone()).collect();
                let now = Instant::now();
                for id in cache.entries().keys().filter(|id| !used.contains_key(*id)) {
                    departed
                        .entry(id.clone())
                        .or_insert(now + inner.config.departed_peer_grace);
                }
                departed.retain(|id, until| !used.contains_key(id) && *until > now);
                let outcome = inner.sync.sync(&ids, &departed.keys().cloned().collect()).await;
                cache.mark_synced();
                for run in runs.iter().filter(|run| outcome.fresh.contains(&run.server_id)) {
                    entry_runs.insert(run.server_id.clone(), run.holder_identity.clone());
                }
                let entries = cache.entries();
                entry_runs.retain(|id, _| entries.contains_key(id));
                // Only runs whose discovery this proxy holds: a peer this attempt could not fetch
                // counts as reached for this server's readiness (one broken peer cannot hold
                // everyone back), but must not take itself for known.
                let known = runs
                    .iter()
                    .filter(|run| entry_runs.get(&run.server_id) == Some(&run.holder_identity))
                    .cloned()
                    .collect();
                inner.known.send_replace(Some(Arc::new(known)));
                // By run: a peer restarted at the same address is not reached until its new run is.
                let reached = runs
                    .iter()
                    .filter(|run| outcome.reached.contains(&run.server_id))
                    .cloned()
                    .collect();
                *inner
                    .reached
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = reached;
                failures = if outcome.result.is_ok() { 0 } else { failures + 1 };
                retry_at =
                    (failures > 0 && failures <= MAX_RETRIES).then(|| Instant::now() + backoff(failures - 1));
            }
            tokio::select! {
                // A lease change first: when both changed, the address branch's judgement must
                // not swallow the lease event (a deleted peer or a new run at the same address).
                biased;
                _ = leases.changed() => {
                    failures = 0;
                    retry_at = None;
                    pending = true;
                }
                _ = addresses.changed() => {
                    addresses.borrow_and_update();
                    pending = leases.borrow().as_ref().is_some_and(|runs| {
                        runs.iter().any(|run| {
                            let now = inner.endpoints.endpoint(&run.server_id);
                            let moved = now.is_some() && used.get(&run.server_id) != Some(&now);
                            moved || (!self.has_reached(run) && self.is_reachable(&run.server_id))
                        })
                    });
                }
                () = sleep_until(retry_at) => pending = true,
                () = sleep_until(departed.values().min().copied()) => {
                    let now = Instant::now();
                    departed.retain(|_, until| *until > now);
                    cache.retain_peers(|id| used.contains_key(id) || departed.contains_key(id));
                    pending = false;
                }
            }
        }
    }

    async fn exclusion_loop(&self) {
        let cache = self.inner.resolver.peers();
        let mut extensions = self.inner.extensions.subscribe();
        let mut tracker = GvExclusionTracker::new(self.inner.config.exclusion_grace);
        loop {
            let fresh = extensions.borrow_and_update().clone();
            if tracker.observe(fresh, Instant::now()) {
                cache.set_excluded_group_versions(tracker.exclusion_set());
            }
            let reap_at = tracker.next_expiry();
            tokio::select! {
                _ = extensions.changed() => {}
                () = sleep_until(reap_at) => {}
            }
        }
    }
}

/// Which peers serve a GVR, as the layer sees it (exclusion applied); synced as
/// [`DiscoveryPeers::has_synced`]. Lets a server observe what its proxy would do.
impl PeerResolver for DiscoveryPeers {
    fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String> {
        self.inner.resolver.peers_serving(gvr)
    }

    fn has_synced(&self) -> bool {
        DiscoveryPeers::has_synced(self)
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
