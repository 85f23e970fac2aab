//! Routing, the last stage of the handler chain: health checks, `/version`, `/metrics`, then discovery,
//! OpenAPI and resources under `/api` and `/apis`, or Go's 404.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use mvp_core::{RequestInfo, UserInfo};

use super::ServerContext;
use crate::api::not_found;

/// The router of one server.
pub(crate) fn router<S: ServerContext>(state: Arc<S>) -> Router {
    Router::new()
        .route("/healthz", get(healthz::<S>))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz::<S>))
        .route("/version", get(version::<S>))
        .route("/metrics", get(metrics::<S>))
        .fallback(api::<S>)
        .with_state(state)
}

async fn livez() -> Response {
    text(StatusCode::OK, "ok")
}

/// `/healthz`: the storage check (`[-]etcd failed`), as kube-apiserver's.
async fn healthz<S: ServerContext>(State(state): State<Arc<S>>) -> Response {
    match state.store().check_health().await {
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
async fn readyz<S: ServerContext>(State(state): State<Arc<S>>) -> Response {
    if state.store().check_health().await.is_err() {
        return check_failed("etcd failed: reason withheld", "readyz");
    }
    match state.check_readiness().await {
        None => text(StatusCode::OK, "ok"),
        Some(hook) => check_failed(&format!("poststarthook/{hook} failed: not finished"), "readyz"),
    }
}

async fn version<S: ServerContext>(State(state): State<Arc<S>>) -> Response {
    axum::Json(crate::api::version_info::version_info(
        state.binary_version(),
        state.emulated_version(),
    ))
    .into_response()
}

async fn metrics<S: ServerContext>(State(state): State<Arc<S>>) -> Response {
    let mut response = state.metrics().render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// Everything under `/api` and `/apis` (and anything unknown): discovery, resources, or Go's 404.
async fn api<S: ServerContext>(State(state): State<Arc<S>>, req: Request) -> Response {
    let served = state.served();
    let (parts, body) = req.into_parts();
    if let Some(response) = crate::api::discovery::serve(&parts, &served, state.discovery()) {
        return response.map(Body::from);
    }
    if let Some(response) = state.openapi().serve(&parts, state.binary_version(), &served) {
        return response.map(Body::from);
    }
    let Some(info) = parts.extensions.get::<RequestInfo>().cloned() else {
        return not_found::not_found();
    };
    if !info.is_resource_request {
        return not_found::not_found();
    }
    let served_here = || {
        served
            .resource(&info.api_group, &info.api_version, &info.resource)
            .is_some()
    };
    if crate::api::whoami::is_self_subject_review(&info) && served_here() {
        let user = parts.extensions.get::<UserInfo>().cloned().unwrap_or_default();
        return crate::api::whoami::self_subject_review(&info, &user, &parts, body).await;
    }
    if super::access_review::is_access_review(&info) && served_here() {
        let user = parts.extensions.get::<UserInfo>().cloned().unwrap_or_default();
        return super::access_review::serve(state.authorizer(), &info, &user, &parts, body).await;
    }
    if crate::api::serviceaccount::is_token_review(&info.api_group, &info.resource, &info.verb)
        && info.name.is_empty()
        && served
            .resource(&info.api_group, &info.api_version, &info.resource)
            .is_some()
    {
        return token_review(state.as_ref(), &info, body).await;
    }
    let ctx = crate::api::rest::RestContext::new(state.store().clone(), served, state.binary_version())
        .with_emulated_version(state.emulated_version())
        .with_service_cidr(state.service_cidr())
        .with_bookmark_interval(state.watch_bookmark_interval())
        .with_webhook_service_addresses(state.webhook_service_addresses())
        .with_crd_validation_ratcheting(state.feature_enabled("CRDValidationRatcheting"))
        .with_authorizer(Arc::new(state.authorizer().clone()))
        .with_service_account_tokens(state.authenticator().service_account_tokens().clone());
    crate::api::rest::handle(&ctx, &info, Request::from_parts(parts, body)).await
}

/// A TokenReview: never stored, so it needs no name (see [`crate::api::serviceaccount::token_review`]).
async fn token_review<S: ServerContext>(state: &S, info: &RequestInfo, body: Body) -> Response {
    let body = match crate::api::rest::read_body(body).await {
        Ok(body) => body,
        Err(status) => return status.into_response(),
    };
    let authenticator = state.authenticator();
    crate::api::serviceaccount::token_review(
        authenticator.service_account_tokens(),
        state.store().as_ref(),
        &|token| authenticator.static_token_user(token),
        &info.api_version,
        &body,
    )
    .await
}

fn text(code: StatusCode, body: &'static str) -> Response {
    let mut response = (code, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
