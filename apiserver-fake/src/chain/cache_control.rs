//! kube-apiserver's `WithCacheControl`: a default `Cache-Control` for answers that set none, so no
//! shared cache keeps API answers. It acts on the response only, so it also covers the 401s of
//! authentication, inside it.

use axum::response::Response;
use http::{HeaderValue, header};

/// The filter (a response map): every response that does not set `Cache-Control` itself (discovery and
/// OpenAPI do) gets `no-cache, private`.
pub(super) fn default_cache_control(mut response: Response) -> Response {
    response
        .headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache, private"));
    response
}
