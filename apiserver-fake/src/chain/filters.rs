//! The filters of the handler chain that wrap the stage modules (authentication, authorization, ...)
//! into middleware; [`super::handler_chain`] puts them in order.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use mvp_core::{PEER_PROXIED_HEADER, RequestInfo, UserInfo};

use super::ServerContext;
use super::authentication::{Authenticator, ConnectionInfo};
use super::authorization::{self, Authorize, Decision};
use super::request_log::ServedRequest;
use crate::api::status::Status;

/// Paths answered without credentials, as a default RBAC setup lets `system:anonymous` read them
/// (`system:public-info-viewer`), so health probes work without a client certificate.
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// kube-apiserver's audit ID header.
const AUDIT_ID_HEADER: &str = "audit-id";

/// kube-apiserver's `WithCacheControl`: every response that does not set `Cache-Control`
/// itself (discovery and OpenAPI do) gets `no-cache, private`, so no shared cache keeps API answers.
pub(super) fn default_cache_control(mut response: Response) -> Response {
    response
        .headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache, private"));
    response
}

/// Authentication, then impersonation (the caller must be allowed to impersonate the user it
/// names). Unauthenticated requests get kube-apiserver's 401 Status.
pub(super) async fn authenticate<S: ServerContext>(
    State((authenticator, state)): State<(Arc<Authenticator>, Arc<S>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let conn = req
        .extensions()
        .get::<ConnectionInfo>()
        .cloned()
        .unwrap_or_default();
    let user = authenticator
        .authenticate_request(&conn, req.headers_mut(), state.store().as_ref())
        .await;
    match user {
        Some(user) => match super::impersonation::impersonated_user(req.headers_mut()) {
            Ok(Some(impersonated)) => {
                let attributes = authorization::impersonation_request(&impersonated.name);
                if let Decision::Deny(reason) = state.authorizer().authorize(&user, &attributes) {
                    return authorization::forbidden(&user, &attributes, &reason).into_response();
                }
                let logged = super::http_log::logged_user(&impersonated);
                req.extensions_mut().insert(impersonated);
                let mut response = next.run(req).await;
                super::http_log::attach_user(&mut response, logged);
                response
            }
            Ok(None) => {
                let logged = super::http_log::logged_user(&user);
                req.extensions_mut().insert(user);
                let mut response = next.run(req).await;
                super::http_log::attach_user(&mut response, logged);
                response
            }
            Err(status) => status.into_response(),
        },
        None if PUBLIC_PATHS.contains(&req.uri().path()) => next.run(req).await,
        None => Status::unauthorized().into_response(),
    }
}

/// Request classification (kube's RequestInfo, kept in the extensions), the request log that
/// lets tests see which user a server believed it served, and authorization (`--authorization-mode`; a
/// denied request gets upstream's 403 here, before the MVP filter could proxy it).
pub(super) async fn record_and_classify<S: ServerContext>(
    State(state): State<Arc<S>>,
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
    let audited = state.audit().and_then(|audit| {
        let anonymous;
        let user = match req.extensions().get::<UserInfo>() {
            Some(user) => user,
            None => {
                anonymous = UserInfo {
                    name: "system:anonymous".to_owned(),
                    groups: vec!["system:unauthenticated".to_owned()],
                    ..UserInfo::default()
                };
                &anonymous
            }
        };
        let source_ip = req
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|c| c.remote_addr)
            .map(|a| a.ip());
        audit.begin(
            user,
            &info,
            &String::from_utf8_lossy(audit_id.as_bytes()),
            &req.uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default(),
            req.headers()
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok()),
            source_ip,
        )
    });
    let long_running = info.is_long_running();
    if let Some(user) = req.extensions().get::<UserInfo>() {
        state.requests().record(ServedRequest {
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
        .map(|user| super::flow_control::headers_for(user, req.uri().path()));
    let (verb, group, version, resource) = (
        info.verb.clone(),
        info.api_group.clone(),
        info.api_version.clone(),
        info.resource.clone(),
    );
    let authorizer = state.authorizer();
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
        .metrics()
        .observe_request(&verb, &group, &version, &resource, response.status().as_u16());
    if let (Some(audit), Some(audited)) = (state.audit(), audited) {
        audit.finish(
            audited,
            long_running,
            response.status().as_u16(),
            response.extensions().get::<Status>(),
            response
                .extensions()
                .get::<crate::api::rest::admission::AuditAnnotations>(),
        );
    }
    response
}

/// The request deadline and, within it, the seat the request runs in (kube-apiserver's
/// `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests` around `WithPriorityAndFairness`,
/// or around `WithMaxInFlightLimit` when API Priority and Fairness is off): a request that is not
/// long-running must be answered within `--request-timeout`, or within its `?timeout=` if that is
/// shorter (`0s`: the server's), else it gets upstream's 504 `Timeout` Status; it waits for a seat at
/// most a quarter of that, then gets 429. It wraps the MVP filter, so a hung peer cannot hold a proxied
/// request for ever. The deadline ends with the response headers: a body still streaming (a proxied
/// list, say) is not cut.
pub(super) async fn request_deadline<S: ServerContext>(
    State(state): State<Arc<S>>,
    req: Request,
    next: Next,
) -> Response {
    let long_running = req
        .extensions()
        .get::<RequestInfo>()
        .is_some_and(RequestInfo::is_long_running);
    let flow_control = state.flow_control();
    // kube-apiserver's max-in-flight filter (APF off) runs just outside the deadline (see
    // `crate::chain::inflight`).
    let _slot = if flow_control.is_none() {
        match state.inflight().admit(
            req.extensions().get::<RequestInfo>(),
            req.extensions().get::<UserInfo>(),
        ) {
            Ok(slot) => slot,
            Err(too_many) => return too_many.into_response(),
        }
    } else {
        None
    };
    if long_running {
        return next.run(req).await;
    }
    let maximum = state.request_timeout();
    let requested = form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "timeout")
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty());
    let timeout = match requested {
        None => maximum,
        // Zero or negative: no timeout of the client's own, so the server's.
        Some(value) => match crate::go_duration::parse_std(&value) {
            Ok(timeout) => timeout
                .filter(|t| !t.is_zero() && *t < maximum)
                .unwrap_or(maximum),
            Err(err) => {
                return Status::bad_request(format!("invalid timeout specified in the request URL - {err}"))
                    .into_response();
            }
        },
    };
    let user = req.extensions().get::<UserInfo>().cloned().unwrap_or_default();
    let path = req.uri().path().to_owned();
    let seated = async move {
        let _seat = match flow_control {
            Some(flow_control) => match flow_control.admit(&user, &path, timeout / 4).await {
                Ok(seat) => seat,
                Err(too_many) => return too_many.into_response(),
            },
            None => None,
        };
        next.run(req).await
    };
    match tokio::time::timeout(timeout, seated).await {
        Ok(response) => response,
        Err(_) => Status::timeout(
            "request did not complete within requested timeout - context deadline exceeded",
            0,
        )
        .into_response(),
    }
}
