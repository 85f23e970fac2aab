//! The Kubernetes Mixed Version Proxy (KEP-4020) as a reusable tower [`Layer`](tower::Layer).
//!
//! In a control plane whose apiservers run different versions, a request for a resource the
//! receiving server does not serve is proxied to a peer that does, exactly as
//! kube-apiserver's `peerproxy` filter does it: same decision procedure, same headers, same
//! two 503 shapes, same metrics. The crate has no web-framework dependency; the layer wraps
//! any `tower::Service<http::Request<B>>`.
//!
//! The pieces, one concept per module:
//! - classification: [`RequestInfo`] (kube-apiserver's `RequestInfoFactory`), [`GroupVersionResource`];
//! - the decision ([`decision`]) behind small seams ([`resolve`]): [`LocalServedResources`],
//!   [`PeerResolver`], [`PeerEndpoints`], with two ready-made resolvers:
//!   [`StorageVersionResolver`] (upstream alpha) and [`DiscoveryResolver`] (upstream beta,
//!   fed by [`PeerDiscoverySync`]);
//! - forwarding over mTLS ([`PeerTransport`], [`PeerTlsConfig`], [`forward`], [`proxy`]);
//! - the receiving side of the front-proxy handshake ([`RequestHeaderAuthenticator`]);
//! - [`MvpMetrics`] for `apiserver_rerouted_request_total` and friends;
//! - peer-aggregated `/apis` discovery ([`PeerAggregatedDiscoveryHandler`], [`merge_peer_discovery`])
//!   over the aggregated discovery wire types ([`apidiscovery`]).
//!
//! # Embedding
//!
//! Put the layer around the whole router (routing happens *after* the filter), inside
//! authentication: the filter reads the caller's [`UserInfo`] from the request extensions and
//! forwards it as `X-Remote-*` headers.
//!
//! ```no_run
//! use std::{convert::Infallible, sync::Arc};
//! use mvp_core::{MvpLayer, PeerEndpoints, PeerTlsConfig, PeerTransport};
//!
//! /// Where peers listen (a real server reads its peer endpoint leases).
//! struct Endpoints;
//! impl PeerEndpoints for Endpoints {
//!     fn endpoint(&self, _server_id: &str) -> Option<String> {
//!         Some("10.0.0.2:6443".to_owned())
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let _ = rustls::crypto::ring::default_provider().install_default();
//! let tls = PeerTlsConfig::from_files(
//!     "/etc/kubernetes/pki/ca.crt",                  // --peer-ca-file
//!     "/etc/kubernetes/pki/front-proxy-client.crt",  // --proxy-client-cert-file
//!     "/etc/kubernetes/pki/front-proxy-client.key",  // --proxy-client-key-file
//! )?;
//! let (layer, storage_versions) =
//!     MvpLayer::builder("apiserver-abc", Arc::new(Endpoints), PeerTransport::new(&tls)?).storage_version();
//! // Feed `storage_versions` from a StorageVersion informer: `replace(...)`, then `mark_synced()`.
//! # let _ = storage_versions;
//! let local = tower::service_fn(|_req: http::Request<hyper::body::Incoming>| async {
//!     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("local"))))
//! });
//! let service = tower::ServiceBuilder::new().layer(layer).service(local);
//! // Serve `service` with hyper-util (see examples/embed.rs).
//! # let _ = service;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod apidiscovery;
pub mod body;
pub mod decision;
pub mod discovery_fetch;
mod discovery_merge;
pub mod discovery_peers;
pub mod forward;
pub mod future;
mod gv_exclusion;
pub mod gvr;
pub mod layer;
pub mod metrics;
pub mod objects;
mod peer_aggregated;
pub mod peer_discovery;
pub mod peer_tls;
pub mod proxy;
pub mod request_info;
pub mod requestheader;
pub mod resolve;
pub mod service;
pub mod snapshot;
pub mod status;
pub mod storage_version;
pub mod transport;
pub mod user;

#[cfg(test)]
mod test_pki;

/// The README's examples, compiled as doctests so that they stay in step with the crate.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use body::{BoxError, MvpBody};
pub use decision::{PEER_PROXIED_HEADER, PeerResolutionMode};
pub use discovery_fetch::PeerDiscoverySync;
pub use discovery_merge::{merge_peer_discovery, merge_preserving_relative_order};
pub use discovery_peers::{DiscoveryConfig, DiscoveryPeers, LocalResources, PeerRun};
pub use gvr::GroupVersionResource;
pub use layer::{MvpBuilder, MvpLayer};
pub use metrics::{MetricsGeneration, MvpMetrics};
pub use objects::{ApiService, CustomResourceDefinition, GroupVersion, Lease, StorageVersion};
pub use peer_aggregated::{
    DiscoveryAnswer, DiscoveryProfile, PeerAggregatedDiscoveryHandler, PeerAggregatedMetrics,
};
pub use peer_discovery::{DiscoveryResolver, LocalDiscoveryCache, PeerDiscoveryCache, PeerDiscoveryEntry};
pub use peer_tls::{PEER_SERVER_NAME, PeerTlsConfig, PeerTlsError};
pub use request_info::{RequestInfo, RequestInfoError};
pub use requestheader::{RequestHeaderAuthenticator, RequestHeaderConfig, RequestHeaderError};
pub use resolve::{LocalServedResources, PeerChooser, PeerEndpoints, PeerResolver};
pub use service::Mvp;
pub use storage_version::{StorageVersionIndex, StorageVersionResolver};
pub use transport::PeerTransport;
pub use user::UserInfo;
