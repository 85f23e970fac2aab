//! The handler chain of one server, read top to bottom as a request travels it:
//! authentication → authorization → request info → request deadline → (the MVP filter) → local
//! routing (health, `/version`, `/metrics`, discovery, resources) → storage.
//!
//! Like kube-apiserver, the MVP filter sits after authentication and authorization
//! (docs/mvp-behaviour.md §1.1), so 401 and 403 are always answered by the server the client talked to,
//! and in front of local routing, so it sees every resource request before the router would answer 404.

pub mod authentication;
pub mod authorization;
pub mod flow_control;
pub mod impersonation;
pub mod inflight;
pub mod rbac;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use mvp_core::{MvpBody, MvpLayer, RequestInfo, UserInfo};
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

use self::authorization::{Authorize, Decision};
use crate::api::status::Status;
use crate::chain::authentication::{Authenticator, ConnectionInfo};
use crate::server::{ServedRequest, ServerState};

/// The complete, type-erased service a connection serves.
pub type HandlerChain = BoxCloneSyncService<Request<Body>, Response, Infallible>;

/// Paths answered without credentials, as a default RBAC setup lets `system:anonymous` read them
/// (`system:public-info-viewer`), so health probes work without a client certificate.
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// kube-apiserver's audit ID header.
const AUDIT_ID_HEADER: &str = "audit-id";

/// Header the MVP adds to proxied requests (docs/mvp-behaviour.md §3.1).
const PEER_PROXIED_HEADER: &str = "x-kubernetes-peer-proxied";

/// Builds the chain for one server; `mvp` is the peer proxy filter when it is installed.
pub fn handler_chain(
    state: Arc<ServerState>,
    authenticator: Arc<Authenticator>,
    mvp: Option<MvpLayer>,
) -> HandlerChain {
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/version", get(version))
        .route("/metrics", get(metrics))
        .fallback(api)
        .with_state(state.clone());
    let front = ServiceBuilder::new()
        .map_response(default_cache_control)
        .layer(from_fn_with_state((authenticator, state.clone()), authenticate))
        .layer(from_fn_with_state(state.clone(), record_and_classify))
        .layer(from_fn_with_state(state, request_deadline));
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

/// Outermost, kube-apiserver's `WithCacheControl`: every response that does not set `Cache-Control`
/// itself (discovery and OpenAPI do) gets `no-cache, private`, so no shared cache keeps API answers.
fn default_cache_control(mut response: Response) -> Response {
    response
        .headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache, private"));
    response
}

/// Between authorization and the MVP filter, the request deadline (kube-apiserver's `WithRequestDeadline` and
/// `WithTimeoutForNonLongRunningRequests`): a request that is not long-running must be answered
/// within `--request-timeout`, or within its `?timeout=` if that is shorter (`0s`: the server's),
/// else it gets upstream's 504 `Timeout` Status. It wraps the MVP filter, so a hung peer cannot
/// hold a proxied request for ever. The deadline ends with the response headers: a body still
/// streaming (a proxied list, say) is not cut.
async fn request_deadline(State(state): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    // kube-apiserver's max-in-flight filter runs just outside the deadline (see `crate::chain::inflight`).
    let _slot = match state.inflight.admit(
        req.extensions().get::<RequestInfo>(),
        req.extensions().get::<UserInfo>(),
    ) {
        Ok(slot) => slot,
        Err(too_many) => return too_many.into_response(),
    };
    let long_running = req
        .extensions()
        .get::<RequestInfo>()
        .is_some_and(RequestInfo::is_long_running);
    if long_running {
        return next.run(req).await;
    }
    let maximum = state.options.request_timeout;
    let requested = form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "timeout")
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty());
    let timeout = match requested {
        None => maximum,
        // Zero or negative: no timeout of the client's own, so the server's.
        Some(value) => match go_parse_duration::parse_duration(&value) {
            Ok(nanos) => u64::try_from(nanos)
                .ok()
                .map(Duration::from_nanos)
                .filter(|t| !t.is_zero() && *t < maximum)
                .unwrap_or(maximum),
            Err(_) => {
                return Status::bad_request(format!(
                    "invalid timeout specified in the request URL - time: invalid duration {value:?}"
                ))
                .into_response();
            }
        },
    };
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => Status::timeout(
            "request did not complete within requested timeout - context deadline exceeded",
            0,
        )
        .into_response(),
    }
}

/// Stage 2: authentication, then impersonation (the caller must be allowed to impersonate the user it
/// names). Unauthenticated requests get kube-apiserver's 401 Status.
async fn authenticate(
    State((authenticator, state)): State<(Arc<Authenticator>, Arc<ServerState>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let conn = req
        .extensions()
        .get::<ConnectionInfo>()
        .cloned()
        .unwrap_or_default();
    match authenticator.authenticate(&conn, req.headers_mut()) {
        Some(user) => match crate::chain::impersonation::impersonated_user(req.headers_mut()) {
            Ok(Some(impersonated)) => {
                let attributes = authorization::impersonation_request(&impersonated.name);
                if let Decision::Deny(reason) = state.options.authorizer.authorize(&user, &attributes) {
                    return authorization::forbidden(&user, &attributes, &reason).into_response();
                }
                req.extensions_mut().insert(impersonated);
                next.run(req).await
            }
            Ok(None) => {
                req.extensions_mut().insert(user);
                next.run(req).await
            }
            Err(status) => status.into_response(),
        },
        None if PUBLIC_PATHS.contains(&req.uri().path()) => next.run(req).await,
        None => Status::unauthorized().into_response(),
    }
}

/// Stages 3–4: request classification (kube's RequestInfo, kept in the extensions), the request log that
/// lets tests see which user a server believed it served, and authorization (`--authorization-mode`; a
/// denied request gets upstream's 403 here, before the MVP filter could proxy it).
async fn record_and_classify(
    State(state): State<Arc<ServerState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let info = match RequestInfo::from_parts(req.method(), req.uri()) {
        Ok(info) => info,
        Err(e) => {
            return Status::internal_error(&format!("failed to create RequestInfo: {e}")).into_response();
        }
    };
    // Like kube-apiserver's audit filter: keep the caller's Audit-ID or mint one, and echo it back. The
    // proxy forwards it, so a proxied request carries the source server's audit ID.
    let audit_id = match req.headers().get(AUDIT_ID_HEADER) {
        Some(id) if !id.is_empty() => id.clone(),
        _ => HeaderValue::try_from(uuid::Uuid::new_v4().to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
    };
    req.headers_mut().insert(AUDIT_ID_HEADER, audit_id.clone());
    if let Some(user) = req.extensions().get::<UserInfo>() {
        state.requests.record(ServedRequest {
            user: user.clone(),
            method: req.method().to_string(),
            uri: req
                .uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default(),
            peer_proxied: req
                .headers()
                .get(PEER_PROXIED_HEADER)
                .is_some_and(|v| v.as_bytes() == b"true"),
            audit_id: String::from_utf8_lossy(audit_id.as_bytes()).into_owned(),
        });
    }
    // API Priority and Fairness classifies after authentication, before authorization.
    let flow_headers = req
        .extensions()
        .get::<UserInfo>()
        .map(|user| crate::chain::flow_control::headers_for(user, req.uri().path()));
    let (verb, group, version, resource) = (
        info.verb.clone(),
        info.api_group.clone(),
        info.api_version.clone(),
        info.resource.clone(),
    );
    let authorizer = &state.options.authorizer;
    let denied = match req.extensions().get::<UserInfo>() {
        Some(user) if !authorizer.allows_everything() => match authorizer.authorize(user, &info) {
            Decision::Deny(reason) => Some(authorization::forbidden(user, &info, &reason)),
            Decision::Allow => None,
        },
        _ => None,
    };
    let mut response = match denied {
        Some(status) => status.into_response(),
        None => {
            req.extensions_mut().insert(info);
            next.run(req).await
        }
    };
    response.headers_mut().insert(AUDIT_ID_HEADER, audit_id);
    for (header, value) in flow_headers.into_iter().flatten() {
        if let Some(value) = value {
            response.headers_mut().insert(header, value);
        }
    }
    state
        .metrics
        .observe_request(&verb, &group, &version, &resource, response.status().as_u16());
    response
}

async fn livez() -> Response {
    text(StatusCode::OK, "ok")
}

/// `/healthz`: the storage check (`[-]etcd failed`), as kube-apiserver's.
async fn healthz(State(state): State<Arc<ServerState>>) -> Response {
    match state.store.check_health().await {
        Ok(()) => text(StatusCode::OK, "ok"),
        Err(_) => check_failed("etcd failed: reason withheld", "healthz"),
    }
}

/// A failed health check's body as kube-apiserver writes it (text/plain, 500).
fn check_failed(line: &str, endpoint: &str) -> Response {
    let mut response = (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("[-]{line}\n{endpoint} check failed\n"),
    )
        .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `/readyz`: not ready until this server's identity is published, its proxy knows the peers it can
/// reach and its own peer endpoint record exists (post-start hooks gate kube-apiserver's readiness).
async fn readyz(State(state): State<Arc<ServerState>>) -> Response {
    if state.store.check_health().await.is_err() {
        return check_failed("etcd failed: reason withheld", "readyz");
    }
    match state.check_readiness().await {
        None => text(StatusCode::OK, "ok"),
        Some(hook) => check_failed(&format!("poststarthook/{hook} failed: not finished"), "readyz"),
    }
}

async fn version(State(state): State<Arc<ServerState>>) -> Response {
    axum::Json(crate::api::version_info::version_info(
        state.options.binary_version,
        state.options.emulated_version,
    ))
    .into_response()
}

async fn metrics(State(state): State<Arc<ServerState>>) -> Response {
    let mut response = state.metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// Everything under `/api` and `/apis` (and anything unknown): discovery, resources, or Go's 404.
async fn api(State(state): State<Arc<ServerState>>, req: Request) -> Response {
    let served = state.served.borrow().clone();
    let (parts, body) = req.into_parts();
    if let Some(response) = crate::api::discovery::serve(&parts, &served, &state.discovery) {
        return response.map(Body::from);
    }
    if let Some(response) = state.openapi.serve(&parts, state.options.binary_version, &served) {
        return response.map(Body::from);
    }
    let Some(info) = parts.extensions.get::<RequestInfo>().cloned() else {
        return not_found();
    };
    if !info.is_resource_request {
        return not_found();
    }
    if crate::api::whoami::is_self_subject_review(&info)
        && served
            .resource(&info.api_group, &info.api_version, &info.resource)
            .is_some()
    {
        let user = parts.extensions.get::<UserInfo>().cloned().unwrap_or_default();
        return crate::api::whoami::self_subject_review(&info, &user);
    }
    let ctx = crate::api::rest::RestContext::new(state.store.clone(), served, state.options.binary_version)
        .with_service_cidr(state.options.service_cidr);
    crate::api::rest::handle(&ctx, &info, Request::from_parts(parts, body)).await
}

/// Go's `http.NotFound`, which kube-apiserver answers for paths nothing serves.
pub fn not_found() -> Response {
    let mut response = text(StatusCode::NOT_FOUND, "404 page not found\n");
    response
        .headers_mut()
        .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// [`not_found`] for handlers that build `Response<Bytes>`.
pub fn not_found_bytes() -> http::Response<bytes::Bytes> {
    let mut response = http::Response::new(bytes::Bytes::from_static(b"404 page not found\n"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}

fn text(code: StatusCode, body: &'static str) -> Response {
    let mut response = (code, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
