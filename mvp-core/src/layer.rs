//! `MvpLayer`: the configuration of the Mixed Version Proxy filter, as a tower [`Layer`].

use std::sync::Arc;

use tower_layer::Layer;

use crate::decision::PeerResolutionMode;
use crate::discovery::controllers::{DiscoveryConfig, DiscoveryPeers};
use crate::metrics::MvpMetrics;
use crate::resolve::{LocalServedResources, PeerChooser, PeerEndpoints, PeerResolver, RandomPeerChooser};
use crate::service::Mvp;
use crate::storage_version::{StorageVersionMode, StorageVersionResolver};
use crate::transport::PeerTransport;

/// Everything the filter reads on each request, shared by all clones.
pub(crate) struct Shared {
    pub(crate) mode: PeerResolutionMode,
    pub(crate) local: Arc<dyn LocalServedResources>,
    pub(crate) peers: Arc<dyn PeerResolver>,
    pub(crate) endpoints: Arc<dyn PeerEndpoints>,
    pub(crate) chooser: Arc<dyn PeerChooser>,
    pub(crate) transport: PeerTransport,
    pub(crate) metrics: Option<MvpMetrics>,
}

/// Wraps a service with the Mixed Version Proxy filter ([`Mvp`]).
///
/// Put it around the *whole* router (before routing, as upstream puts the filter in front of
/// the aggregator), inside authentication: the filter reads the caller's
/// [`UserInfo`](crate::UserInfo) and, if present, the [`RequestInfo`](crate::RequestInfo)
/// from the request extensions.
#[derive(Clone)]
pub struct MvpLayer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MvpLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MvpLayer")
            .field("mode", &self.shared.mode)
            .finish_non_exhaustive()
    }
}

impl MvpLayer {
    /// Starts building the layer of server `server_id`, which reaches its peers at the
    /// addresses of `endpoints` (upstream's peer endpoint leases) through `transport`. Finish
    /// with one of the peer-resolution modes: [`MvpBuilder::discovery`],
    /// [`MvpBuilder::storage_version`] or [`MvpBuilder::resolver`].
    pub fn builder(
        server_id: impl Into<String>,
        endpoints: Arc<dyn PeerEndpoints>,
        transport: PeerTransport,
    ) -> MvpBuilder {
        MvpBuilder {
            server_id: server_id.into(),
            endpoints,
            transport,
            chooser: Arc::new(RandomPeerChooser),
            metrics: None,
        }
    }

    /// The peer-resolution semantics in use.
    pub fn mode(&self) -> PeerResolutionMode {
        self.shared.mode
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

/// Builds an [`MvpLayer`] (see [`MvpLayer::builder`]). Each way to finish it fixes the mode and
/// the resolver together, so a layer cannot follow one mode's semantics with the other's data.
pub struct MvpBuilder {
    server_id: String,
    endpoints: Arc<dyn PeerEndpoints>,
    transport: PeerTransport,
    chooser: Arc<dyn PeerChooser>,
    metrics: Option<MvpMetrics>,
}

impl std::fmt::Debug for MvpBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MvpBuilder")
            .field("server_id", &self.server_id)
            .finish_non_exhaustive()
    }
}

impl MvpBuilder {
    /// Records `apiserver_rerouted_request_total` and friends (and, in Discovery mode, the
    /// peer discovery sync errors) in `metrics`. Without it nothing is recorded.
    pub fn metrics(mut self, metrics: MvpMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Replaces upstream's uniformly random choice among the peers that serve a resource
    /// (for deterministic tests: `|_| 0` always takes the first).
    pub fn chooser(mut self, chooser: impl PeerChooser) -> Self {
        self.chooser = Arc::new(chooser);
        self
    }

    /// Discovery mode (upstream beta, the default from 1.33): peers are found through their
    /// aggregated discovery. Returns the layer and the [`DiscoveryPeers`] the server feeds
    /// (identity leases, address changes, CRD/APIService group versions) and runs.
    pub fn discovery(self, config: DiscoveryConfig) -> (MvpLayer, DiscoveryPeers) {
        let peers = DiscoveryPeers::new(
            self.server_id.clone(),
            self.endpoints.clone(),
            self.transport.clone(),
            self.metrics.clone(),
            config,
        );
        let resolver = peers.resolver();
        (self.finish(PeerResolutionMode::Discovery, resolver), peers)
    }

    /// StorageVersion mode (upstream alpha, 1.28–1.32): peers are found through the
    /// StorageVersion objects every server writes. Returns the layer and the resolver the
    /// server's StorageVersion informer feeds ([`StorageVersionResolver::replace`],
    /// [`StorageVersionResolver::mark_synced`]).
    pub fn storage_version(self) -> (MvpLayer, Arc<StorageVersionResolver>) {
        let resolver = Arc::new(StorageVersionResolver::new(self.server_id.clone()));
        let mode = Arc::new(StorageVersionMode(resolver.clone()));
        (self.finish(PeerResolutionMode::StorageVersion, mode), resolver)
    }

    /// A resolver of the server's own (another source of peer capability, or a test double),
    /// answering both "served here?" and "served by which peers?", with the semantics of `mode`
    /// where the two modes differ (docs/mvp-behaviour.md §1.3).
    pub fn resolver<R>(self, mode: PeerResolutionMode, resolver: Arc<R>) -> MvpLayer
    where
        R: LocalServedResources + PeerResolver,
    {
        self.finish(mode, resolver)
    }

    fn finish<R>(self, mode: PeerResolutionMode, resolver: Arc<R>) -> MvpLayer
    where
        R: LocalServedResources + PeerResolver,
    {
        MvpLayer {
            shared: Arc::new(Shared {
                mode,
                local: resolver.clone(),
                peers: resolver,
                endpoints: self.endpoints,
                chooser: self.chooser,
                transport: self.transport,
                metrics: self.metrics,
            }),
        }
    }
}

impl<S> Layer<S> for MvpLayer {
    type Service = Mvp<S>;

    fn layer(&self, inner: S) -> Mvp<S> {
        Mvp::new(inner, self)
    }
}
