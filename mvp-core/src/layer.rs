//! `MvpLayer`: the configuration of the Mixed Version Proxy filter, as a tower [`Layer`].

use std::sync::Arc;

use tower::Layer;

use crate::decision::PeerResolutionMode;
use crate::metrics::MvpMetrics;
use crate::resolve::{LocalServedResources, PeerChooser, PeerEndpoints, PeerResolver, RandomPeerChooser};
use crate::service::Mvp;
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
    /// A layer answering "who serves what" with `local` and `peers`, reaching peers at the
    /// addresses of `endpoints` through `transport`. Peers are chosen at random; no metrics
    /// are recorded until [`MvpLayer::with_metrics`].
    pub fn new(
        mode: PeerResolutionMode,
        local: Arc<dyn LocalServedResources>,
        peers: Arc<dyn PeerResolver>,
        endpoints: Arc<dyn PeerEndpoints>,
        transport: PeerTransport,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                mode,
                local,
                peers,
                endpoints,
                chooser: Arc::new(RandomPeerChooser),
                transport,
                metrics: None,
            }),
        }
    }

    /// Records `apiserver_rerouted_request_total` and friends in `metrics`.
    pub fn with_metrics(self, metrics: MvpMetrics) -> Self {
        self.map_shared(|s| s.metrics = Some(metrics))
    }

    /// Replaces the random peer choice (for deterministic tests).
    pub fn with_chooser(self, chooser: impl PeerChooser) -> Self {
        self.map_shared(|s| s.chooser = Arc::new(chooser))
    }

    /// The peer-resolution semantics in use.
    pub fn mode(&self) -> PeerResolutionMode {
        self.shared.mode
    }

    fn map_shared(self, f: impl FnOnce(&mut Shared)) -> Self {
        let mut shared = match Arc::try_unwrap(self.shared) {
            Ok(shared) => shared,
            Err(arc) => Shared {
                mode: arc.mode,
                local: arc.local.clone(),
                peers: arc.peers.clone(),
                endpoints: arc.endpoints.clone(),
                chooser: arc.chooser.clone(),
                transport: arc.transport.clone(),
                metrics: arc.metrics.clone(),
            },
        };
        f(&mut shared);
        Self {
            shared: Arc::new(shared),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl<S> Layer<S> for MvpLayer {
    type Service = Mvp<S>;

    fn layer(&self, inner: S) -> Mvp<S> {
        Mvp::new(inner, self)
    }
}
