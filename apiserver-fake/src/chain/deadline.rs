//! The request deadline (`--request-timeout`, a request's `?timeout=`) and, within it, the seat the
//! request runs in: API Priority and Fairness ([`super::flow_control`]) or, when that is off, the
//! max-in-flight limit ([`super::inflight`]). kube-apiserver's `WithRequestDeadline` and
//! `WithTimeoutForNonLongRunningRequests` around `WithPriorityAndFairness` or `WithMaxInFlightLimit`.
//!
//! It runs inside authorization (upstream seats before authorizing; here a denied request takes no
//! seat) and wraps the MVP filter, so a hung peer cannot hold a proxied request for ever.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mvp_core::{RequestInfo, UserInfo};

use super::ServerContext;
use crate::api::status::Status;

/// The filter: a request that is not long-running must be answered within `--request-timeout`, or
/// within its `?timeout=` if that is shorter (`0s`: the server's), else it gets upstream's 504 `Timeout`
/// Status; it waits for a seat at most a quarter of that, then gets 429. The deadline ends with the
/// response headers: a body still streaming (a proxied list, say) is not cut.
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
