//! The readiness checks the proxy adds to `/readyz`. Upstream has one, the
//! `unknown-version-proxy-filter` post-start hook, which waits for the proxy's caches to sync once;
//! that can pass before a peer starting at the same time is known, and then the server answers a
//! false 404 for that peer's resources while `/readyz` says ok. So here [`ProxyReadiness`] also
//! waits until the proxy has reached its peers, and [`PeersKnowServer`] (not upstream) until its
//! peers have reached this server. Both stay passed once they have passed, as post-start hooks do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mvp_core::{DiscoveryPeers, PeerResolver};

use super::peer_endpoints::StorePeerEndpoints;
use crate::store::Store;

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
    /// The check for the proxy of server `own_id`, deciding with `resolver` (and, in Discovery mode,
    /// `discovery`) on the peer addresses of `endpoints`; not passed yet.
    pub(super) fn new(
        own_id: String,
        resolver: Arc<dyn PeerResolver>,
        discovery: Option<DiscoveryPeers>,
        endpoints: Arc<StorePeerEndpoints>,
    ) -> Self {
        Self {
            own_id,
            resolver,
            discovery,
            endpoints,
            passed: Latch::default(),
        }
    }

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
    /// The check on the peer addresses and receipts of `endpoints`; not passed, its deadline not
    /// started (it starts when the check first runs).
    pub(super) fn new(endpoints: Arc<StorePeerEndpoints>) -> Self {
        Self {
            endpoints,
            since: std::sync::OnceLock::new(),
            passed: Latch::default(),
        }
    }

    /// Re-reads the peer addresses and receipts from the store now, rather than at the next
    /// background refresh: a readiness check judged on a view up to
    /// [`ENDPOINT_REFRESH`](super::peer_endpoints::ENDPOINT_REFRESH) old would take a peer whose
    /// address was just published for unreachable and pass without it.
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
