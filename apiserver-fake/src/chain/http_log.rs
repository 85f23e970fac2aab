//! The per-request log line, kube-apiserver's `httplog` (`staging/src/k8s.io/apiserver/pkg/server/httplog/httplog.go`,
//! `respLogger.Log`): from `--v=3` on, every request gets one `HTTP` line once its response headers are
//! written, with upstream's keys in upstream's order (`verb`, `URI`, `latency`, `userAgent`, `audit-ID`,
//! `srcIP`, `resp`), the fake adding the authenticated `user` and, for a request the Mixed Version Proxy
//! forwarded, the peer it went to (`proxiedTo`).
//!
//! As upstream's `WithHTTPLogging`, the filter sits outside authentication, so a 401 is logged too (with
//! no user). The line is emitted on the [`TARGET`] target at `info`; the binary enables that target from
//! `--v=3` (see `server::logging`). When it is off, the filter costs one cached `enabled` check.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::{Method, header};
use mvp_core::{ProxiedTo, RequestInfo, UserInfo};

use super::authentication::ConnectionInfo;

/// The `tracing` target of the line.
pub(crate) const TARGET: &str = "httplog";

/// The name of the user a request was served for, put in the response extensions by the
/// authentication filter while the log is on (the user lives in the request, which the inner stages
/// consume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoggedUser(pub String);

/// Whether the line is written (the subscriber enables [`TARGET`]).
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// Marks `response` as served for `user`, when the log is on.
pub(super) fn attach_user(response: &mut Response, user: Option<LoggedUser>) {
    if let Some(user) = user {
        response.extensions_mut().insert(user);
    }
}

/// What [`attach_user`] needs, taken before the user moves into the request; `None` when the log is
/// off (no allocation).
pub(super) fn logged_user(user: &UserInfo) -> Option<LoggedUser> {
    enabled().then(|| LoggedUser(user.name.clone()))
}

/// The filter: times the request and writes its line.
pub(super) async fn log_request(req: Request, next: Next) -> Response {
    if !enabled() {
        return next.run(req).await;
    }
    let start = Instant::now();
    let verb = canonical_verb(&req);
    let uri = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_owned(), ToString::to_string);
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let src_ip = req
        .extensions()
        .get::<ConnectionInfo>()
        .and_then(|c| c.remote_addr)
        .map(|a| a.to_string())
        .unwrap_or_default();
    let response = next.run(req).await;
    let latency = format!("{:?}", start.elapsed());
    let audit_id = response
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let user = response.extensions().get::<LoggedUser>().map(|u| u.0.as_str());
    let proxied_to = response.extensions().get::<ProxiedTo>().map(|p| p.0.as_str());
    // Strings as `&str`: quoted by the text formatter (as klog quotes them), plain JSON strings in
    // `--logging-format=json`.
    tracing::info!(
        target: TARGET,
        verb = verb.as_str(),
        "URI" = uri.as_str(),
        latency = latency.as_str(),
        userAgent = user_agent.as_str(),
        "audit-ID" = audit_id,
        srcIP = src_ip.as_str(),
        user,
        proxiedTo = proxied_to,
        resp = response.status().as_u16(),
        "HTTP"
    );
    response
}

/// Upstream's verb for the line (`metrics.CanonicalVerb` then `metrics.CleanVerb`): the HTTP method,
/// except `LIST` for a GET of a collection, `WATCH` for a watch, `APPLY` for a server-side apply patch.
fn canonical_verb(req: &Request) -> String {
    let method = req.method();
    let info = RequestInfo::from_parts(method, req.uri()).ok();
    match info.as_ref().map(|i| i.verb.as_str()) {
        Some("list") => "LIST".to_owned(),
        Some("watch") => "WATCH".to_owned(),
        _ if method == Method::PATCH
            && req
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|t| t.starts_with("application/apply-patch")) =>
        {
            "APPLY".to_owned()
        }
        _ => method.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verb(method: Method, uri: &str, content_type: Option<&str>) -> String {
        let mut builder = http::Request::builder().method(method).uri(uri);
        if let Some(t) = content_type {
            builder = builder.header(header::CONTENT_TYPE, t);
        }
        canonical_verb(&builder.body(axum::body::Body::empty()).expect("request"))
    }

    #[test]
    fn verbs_are_upstreams_canonical_ones() {
        assert_eq!(verb(Method::GET, "/api/v1/namespaces/default/pods", None), "LIST");
        assert_eq!(
            verb(Method::GET, "/api/v1/namespaces/default/pods/p", None),
            "GET"
        );
        assert_eq!(verb(Method::GET, "/api/v1/pods?watch=true", None), "WATCH");
        assert_eq!(verb(Method::GET, "/readyz", None), "GET");
        assert_eq!(verb(Method::POST, "/api/v1/namespaces", None), "POST");
        assert_eq!(
            verb(
                Method::PATCH,
                "/api/v1/namespaces/default/configmaps/c",
                Some("application/apply-patch+yaml")
            ),
            "APPLY"
        );
        assert_eq!(
            verb(
                Method::PATCH,
                "/api/v1/namespaces/default/configmaps/c",
                Some("application/merge-patch+json")
            ),
            "PATCH"
        );
    }
}
