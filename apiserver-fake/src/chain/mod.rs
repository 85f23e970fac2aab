//! The handler chain of one server: the stages a request passes through, built in `handler_chain`,
//! the one place that states their order.
//!
//! Outermost first, as a request travels them, one filter a module:
//!
//! 0. over HTTP/2, reading what a handler left unread of the request body before answering
//!    (`h2_drain`), so clients always get early answers (405, 401, ...) instead of a reset stream;
//! 0. the per-request log line at `--v=3` (`http_log`, kube-apiserver's `WithHTTPLogging`: outside
//!    authentication, so 401s are logged too);
//! 1. response `Cache-Control` default (`cache_control`, kube-apiserver's `WithCacheControl`; acts on
//!    the response);
//! 2. authentication (`authentication`), then impersonation (`impersonation`, whose permission is
//!    checked with the authorizer here); 401 for nobody;
//! 3. request classification (`request_info`, kube's `RequestInfo`; 500 when the URL cannot be
//!    classified);
//! 4. the request metrics (`metrics`), counting every answer from here in;
//! 5. the audit ID and the audit event (`audit`);
//! 6. the request log (`request_log`);
//! 7. API Priority and Fairness classification, its response headers (`flow_control`);
//! 8. authorization ([`authorization`], 403 here), so everything above sees a 403 like any answer;
//! 9. the request deadline (`--request-timeout`, 504) and, within it, API Priority and Fairness
//!    (`flow_control`: seats and fair queues, 429), or the max-in-flight limit (`inflight`, 429)
//!    when that is off (`deadline`);
//! 10. the Mixed Version Proxy filter, when the server installed one (see `crate::server::mvp`);
//! 11. routing (`routing`): health, `/version`, `/metrics`, discovery, OpenAPI, resources.
//!
//! This follows kube-apiserver's `DefaultBuildHandlerChain` (authentication, audit, impersonation,
//! priority and fairness, authorization), but for three differences: classification follows
//! authentication (a 401 is answered unclassified), impersonation is resolved with authentication (the
//! audit event names the impersonated user only), and seats are taken after authorization, within the
//! deadline (a denied request takes none).
//!
//! Like kube-apiserver, the MVP filter sits after authentication and authorization
//! (docs/mvp-behaviour.md §1.1), so 401 and 403 are always answered by the server the client talked to,
//! and in front of routing, so it sees every resource request before the router would answer 404. The
//! deadline wraps it, so a hung peer cannot hold a proxied request for ever.

pub(crate) mod access_review;
pub(crate) mod audit;
pub(crate) mod authentication;
pub mod authorization;
mod cache_control;
mod deadline;
pub(crate) mod flow_control;
pub(crate) mod h2_drain;
pub(crate) mod http_log;
pub(crate) mod impersonation;
pub(crate) mod inflight;
mod metrics;
pub(crate) mod rbac;
mod request_info;
pub(crate) mod request_log;
pub(crate) mod routing;
#[cfg(test)]
mod tests;
pub(crate) mod x509_v1;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use mvp_core::{MvpBody, MvpLayer};
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

use self::authentication::Authenticator;
use self::authorization::Authorizer;
use self::inflight::InFlightLimits;
use self::request_log::RequestLog;
use crate::api::catalog::{KubeVersion, ServedApis};
use crate::api::discovery::DiscoveryContext;
use crate::api::metrics::ServerMetrics;
use crate::api::openapi::OpenApiService;
use crate::api::rest::defaults::service_ip::ServiceCidr;
use crate::store::Store;

/// The complete, type-erased service a connection serves.
pub(crate) type HandlerChain = BoxCloneSyncService<Request<Body>, Response, Infallible>;

/// What the stages of the chain read from the server they run in (`ServerState` in
/// [`crate::server`] provides it).
pub(crate) trait ServerContext: Send + Sync + 'static {
    /// `--authorization-mode`.
    fn authorizer(&self) -> &Authorizer;
    /// `--max-requests-inflight` and `--max-mutating-requests-inflight`, when API Priority and
    /// Fairness is off.
    fn inflight(&self) -> &InFlightLimits;
    /// API Priority and Fairness (`--enable-priority-and-fairness`); `None` when off.
    fn flow_control(&self) -> Option<&flow_control::FlowControl>;
    /// `--request-timeout`.
    fn request_timeout(&self) -> Duration;
    /// Which users this server believed it served.
    fn requests(&self) -> &RequestLog;
    /// The audit log (`--audit-log-path` with `--audit-policy-file`), when there is one.
    fn audit(&self) -> Option<&audit::AuditLog>;
    /// Prometheus metrics of this server.
    fn metrics(&self) -> &ServerMetrics;
    /// The cluster's shared store.
    fn store(&self) -> &Arc<dyn Store>;
    /// What this server serves now.
    fn served(&self) -> Arc<ServedApis>;
    /// The server's binary version.
    fn binary_version(&self) -> KubeVersion;
    /// The version the server emulates.
    fn emulated_version(&self) -> KubeVersion;
    /// Whether feature gate `name` is on: `--feature-gates` resolved at the emulated version.
    fn feature_enabled(&self, name: &str) -> bool;
    /// `--service-cluster-ip-range`.
    fn service_cidr(&self) -> ServiceCidr;
    /// `--watch-bookmark-interval`.
    fn watch_bookmark_interval(&self) -> std::time::Duration;
    /// `--webhook-service-address`.
    fn webhook_service_addresses(&self) -> Arc<crate::api::rest::admission::ServiceAddresses>;
    /// What discovery documents need to know about this server.
    fn discovery(&self) -> &DiscoveryContext;
    /// `/openapi/v2` and `/openapi/v3`.
    fn openapi(&self) -> &OpenApiService;
    /// The authenticator union (its ServiceAccount token keys and static tokens serve TokenRequest and
    /// TokenReview).
    fn authenticator(&self) -> &Authenticator;
    /// The first readiness check that has not passed (`/readyz`), or `None` when ready.
    fn check_readiness(&self) -> impl Future<Output = Option<&'static str>> + Send;
}

/// Builds the chain for one server, its stages in the order of the module documentation; `mvp` is the
/// peer proxy filter when it is installed.
pub(crate) fn handler_chain<S: ServerContext>(
    state: Arc<S>,
    authenticator: Arc<Authenticator>,
    mvp: Option<MvpLayer>,
) -> HandlerChain {
    let router = routing::router(state.clone());
    let front = ServiceBuilder::new()
        .layer(axum::middleware::from_fn(h2_drain::read_unread_body))
        .layer(axum::middleware::from_fn(http_log::log_request))
        .map_response(cache_control::default_cache_control)
        .layer(from_fn_with_state(
            (authenticator, state.clone()),
            authentication::authenticate::<S>,
        ))
        .layer(axum::middleware::from_fn(request_info::classify))
        .layer(from_fn_with_state(state.clone(), metrics::observe::<S>))
        .layer(from_fn_with_state(state.clone(), audit::audit_request::<S>))
        .layer(from_fn_with_state(
            state.clone(),
            request_log::record_request::<S>,
        ))
        .layer(axum::middleware::from_fn(flow_control::priority_headers))
        .layer(from_fn_with_state(
            state.clone(),
            authorization::authorize_request::<S>,
        ))
        .layer(from_fn_with_state(state, deadline::request_deadline::<S>));
    match mvp {
        Some(mvp) => BoxCloneSyncService::new(
            front
                .map_response(|response: http::Response<MvpBody<Body>>| response.map(Body::new))
                .layer(mvp)
                .service(router),
        ),
        None => BoxCloneSyncService::new(front.service(router)),
    }
}
