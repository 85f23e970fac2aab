//! Request classification: kube's `RequestInfo` (verb, API group and version, resource, namespace,
//! name, subresource), derived from the method and URI and kept in the request's extensions, where
//! every stage inside reads it (metrics, audit, authorization, the deadline and the in-flight limit,
//! the MVP filter, the routes). kube-apiserver's `WithRequestInfo`.
//!
//! Upstream classifies outermost; here it runs just inside authentication, so a request that fails
//! authentication gets its 401 without being classified, and a request that cannot be classified is
//! answered before the audit ID is kept or minted (its 500 carries none) and before the request log.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mvp_core::RequestInfo;

use crate::api::status::Status;

/// The filter: classifies the request, or answers upstream's 500 when its URL cannot be (a special verb
/// with nothing after it, such as `/api/v1/watch`).
pub(super) async fn classify(mut req: Request, next: Next) -> Response {
    match RequestInfo::from_parts(req.method(), req.uri()) {
        Ok(info) => {
            req.extensions_mut().insert(info);
            next.run(req).await
        }
        Err(e) => Status::internal_error(&format!("failed to create RequestInfo: {e}")).into_response(),
    }
}

/// The answer of a stage that needs the `RequestInfo` of a request [`classify`] did not see (a chain
/// built in the wrong order): upstream's 500 for that case, rather than serving the request
/// unclassified (unaudited, or unauthorized).
pub(super) fn missing() -> Response {
    Status::internal_error("no RequestInfo found in the context").into_response()
}
