//! The request metrics: every classified request is counted in `apiserver_request_total`
//! ([`crate::api::metrics::ServerMetrics`]) by verb, group, version, resource and response code,
//! whichever stage answered it: authorization's 403, the deadline's 429 or 504, the MVP filter's
//! proxied answer, a route.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use mvp_core::RequestInfo;

use super::{ServerContext, request_info};

/// The filter: counts the request once its response (headers) is known.
pub(super) async fn observe<S: ServerContext>(
    State(state): State<Arc<S>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(info) = req.extensions().get::<RequestInfo>() else {
        return request_info::missing();
    };
    let (verb, group, version, resource) = (
        info.verb.clone(),
        info.api_group.clone(),
        info.api_version.clone(),
        info.resource.clone(),
    );
    let response = next.run(req).await;
    state
        .metrics()
        .observe_request(&verb, &group, &version, &resource, response.status().as_u16());
    response
}
