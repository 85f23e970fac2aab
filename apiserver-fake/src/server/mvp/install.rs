//! Building the Mixed Version Proxy filter with `mvp-core` (where its logic lives), as
//! kube-apiserver's `BuildPeerProxy` builds it: the peer TLS and transport, the metrics, and the
//! mode's resolver, handed its local capability (the server's own served APIs in Discovery mode, or
//! StorageVersion objects in StorageVersion mode, upstream alpha). [`install`] also starts what
//! feeds the filter ([`super::peer_endpoints`], [`super::feeds`], [`super::gv_exclusion`]) and
//! returns, beside the layer, the [`PeerProxy`] the server's readiness checks
//! ([`super::readiness`]) and tools read.
//!
//! Like upstream, the filter is installed only when the gate is on and `--peer-ca-file` is set.

use std::collections::HashSet;
use std::sync::Arc;

use mvp_core::{
    DiscoveryConfig, GroupVersionResource, MetricsGeneration, MvpLayer, MvpMetrics,
    PeerAggregatedDiscoveryHandler, PeerResolutionMode, PeerResolver, PeerTlsConfig, PeerTransport,
};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::feeds::{
    feed_discovery_peers, publish_receipts, run_address_receipts, run_identity_lease_informer,
    run_storage_version_informer, until_cancelled,
};
use super::gv_exclusion::run_gv_exclusion;
use super::peer_endpoints::StorePeerEndpoints;
use super::readiness::{PeersKnowServer, ProxyReadiness};
use crate::api::catalog::ServedApis;
use crate::server::config::ServerOptions;
use crate::store::Store;

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
            tasks.spawn(run_gv_exclusion(store.clone(), peers.clone(), cancel.clone()));
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
    let readiness = ProxyReadiness::new(
        server_id.to_owned(),
        resolver.clone(),
        discovery,
        endpoints.clone(),
    );
    let peers_know_server = PeersKnowServer::new(endpoints.clone());
    let proxy = PeerProxy {
        resolver,
        readiness,
        peers_know_server,
        endpoints,
    };
    Ok(Some((layer, proxy)))
}
