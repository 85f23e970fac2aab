//! The Kubernetes Mixed Version Proxy (KEP-4020) as a reusable tower [`Layer`](tower_layer::Layer).
//!
//! In a control plane whose apiservers run different versions, a request for a resource the
//! receiving server does not serve is proxied to a peer that does, exactly as
//! kube-apiserver's `peerproxy` filter does it: same decision procedure, same headers, same
//! two 503 shapes, same metrics. The crate has no web-framework dependency; the layer wraps
//! any `tower::Service<http::Request<B>>`.
//!
//! The pieces:
//! - [`MvpLayer`], made by [`MvpLayer::builder`] for one of upstream's two ways to find out
//!   which peer serves what, each with the input the server feeds:
//!   - Discovery mode (upstream beta, the default from 1.33): [`DiscoveryPeers`], fed with
//!     identity [`Lease`]s, address changes and the group versions of
//!     [`CustomResourceDefinition`]s and [`ApiService`]s; it fetches peers' discovery itself;
//!   - StorageVersion mode (upstream alpha): [`StorageVersionResolver`], fed with
//!     [`StorageVersion`] objects;
//!   - or a source of one's own behind [`LocalServedResources`] and [`PeerResolver`];
//! - [`PeerEndpoints`] (where peers listen), [`PeerTlsConfig`] and [`PeerTransport`] (mTLS to them);
//! - classification: [`RequestInfo`] (kube-apiserver's `RequestInfoFactory`), [`GroupVersionResource`];
//! - the receiving side of the front-proxy handshake: [`RequestHeaderAuthenticator`];
//! - peer-aggregated `/apis` discovery: [`PeerAggregatedDiscoveryHandler`] and
//!   [`merge_peer_discovery`], over the wire types of [`apidiscovery`];
//! - the [`feeders`]: ready-made tasks that publish this server to its peers (identity lease,
//!   peer endpoint record, StorageVersion entries, discovery receipts) and feed the proxy (the
//!   peers' identity leases), over one trait for the cluster API, [`ClusterApi`] (on kube-rs's
//!   `Client` as `KubeCluster`, feature `kube`);
//! - client certificates as [`UserInfo`]: [`user_from_certificate`], [`UserInfoLayer`],
//!   [`server_tls_config`] (and `serve_tls`, feature `server`, the accept loop for hyper and axum);
//! - [`MvpMetrics`] for `apiserver_rerouted_request_total` and friends (cargo feature `prometheus`;
//!   without it no `prometheus` type is in the API and nothing is recorded).
//!
//! # Embedding
//!
//! Put the layer around the whole router (routing happens *after* the filter), inside
//! authentication: the filter reads the caller's [`UserInfo`] from the request extensions and
//! forwards it as `X-Remote-*` headers. The client's address is the accept loop's to give: a
//! [`RemoteAddr`] in the request extensions reaches the peer as `X-Forwarded-For` (`serve_tls` puts it
//! there).
//!
//! ```no_run
//! use std::{collections::HashSet, convert::Infallible, sync::Arc};
//! use mvp_core::{DiscoveryConfig, GroupVersionResource, MvpLayer, PeerEndpoints, PeerTlsConfig, PeerTransport};
//!
//! /// Where peers listen (a real server reads its peer endpoint leases).
//! struct Endpoints;
//! impl PeerEndpoints for Endpoints {
//!     fn endpoint(&self, _server_id: &str) -> Option<String> {
//!         Some("10.0.0.2:6443".to_owned())
//!     }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let _ = rustls::crypto::ring::default_provider().install_default();
//! let tls = PeerTlsConfig::from_files(
//!     "/etc/kubernetes/pki/ca.crt",                  // --peer-ca-file
//!     "/etc/kubernetes/pki/front-proxy-client.crt",  // --proxy-client-cert-file
//!     "/etc/kubernetes/pki/front-proxy-client.key",  // --proxy-client-key-file
//! )?;
//! // What this server serves itself, as its aggregated discovery lists it.
//! let served = || HashSet::from([GroupVersionResource::new("", "v1", "pods")]);
//! let (layer, peers) = MvpLayer::builder("apiserver-abc", Arc::new(Endpoints), PeerTransport::new(&tls)?)
//!     .discovery(DiscoveryConfig::new(served));
//! tokio::spawn(peers.run());
//! // From the server's informers: peers.set_identity_leases(..), peers.peer_endpoints_changed(),
//! // peers.set_extension_group_versions(..).
//! let local = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
//!     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("local"))))
//! });
//! let service = tower::ServiceBuilder::new().layer(layer).service(local);
//! // Serve `service` with hyper-util or axum (see the crate's examples).
//! # let _ = service;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
// Items inside private modules are `pub(crate)`: what embedders get is what `lib.rs` re-exports.
#![warn(unreachable_pub)]

pub mod apidiscovery;
mod body;
mod client_cert;
pub mod cluster;
mod decision;
mod discovery;
pub mod feeders;
mod forward;
mod future;
mod gv_exclusion;
mod gvr;
#[cfg(feature = "kube")]
mod kube_cluster;
mod layer;
mod metrics;
pub mod objects;
mod peer_tls;
mod proxy;
mod request_info;
mod requestheader;
mod resolve;
mod service;
mod snapshot;
mod status;
mod storage_version;
mod transport;
mod user;

#[cfg(test)]
mod test_pki;

/// The README's examples, compiled as doctests so that they stay in step with the crate.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use body::{BoxError, MvpBody};
#[cfg(feature = "server")]
pub use client_cert::serve_tls;
pub use client_cert::{
    UserInfoLayer, WithUserInfo, connection_user, server_tls_config, user_from_certificate,
};
pub use cluster::{ClusterApi, ClusterError, ObjectRef};
pub use decision::{PEER_PROXIED_HEADER, PeerResolutionMode};
pub use discovery::caches::PeerDiscoveryCache;
pub use discovery::controllers::{
    DEFAULT_DEPARTED_PEER_GRACE, DEFAULT_EXCLUSION_GRACE, DEFAULT_LOCAL_REFRESH, DiscoveryConfig,
    DiscoveryPeers, PeerRun,
};
pub use discovery::merge::merge_peer_discovery;
pub use discovery::peer_aggregated::{
    DiscoveryAnswer, DiscoveryProfile, PeerAggregatedDiscoveryHandler, PeerAggregatedMetrics,
};
pub use feeders::{IdentityLease, IdentityLeaseTask, LeaseAddresses, PeerEndpointTask, PeerLeaseFeed};
pub use forward::RemoteAddr;
pub use future::ResponseFuture;
pub use gvr::GroupVersionResource;
#[cfg(feature = "kube")]
pub use kube_cluster::KubeCluster;
pub use layer::{MvpBuilder, MvpLayer};
pub use metrics::{MetricsGeneration, MvpMetrics};
pub use objects::{ApiService, CustomResourceDefinition, GroupVersion, Lease, StorageVersion};
pub use peer_tls::{PEER_SERVER_NAME, PeerTlsConfig, PeerTlsError};
pub use proxy::ProxiedTo;
pub use request_info::{RequestInfo, RequestInfoError};
pub use requestheader::{
    RequestHeaderAuthenticator, RequestHeaderConfig, RequestHeaderError, strip_standard_identity_headers,
};
pub use resolve::{LocalServedResources, PeerChooser, PeerEndpoints, PeerResolver};
pub use service::Mvp;
pub use storage_version::{StorageVersionIndex, StorageVersionResolver};
pub use transport::{PeerTransport, TransportError};
pub use user::UserInfo;
