//! Go's `http.NotFound`, which kube-apiserver answers for paths nothing serves.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

/// Go's `http.NotFound`, which kube-apiserver answers for paths nothing serves.
pub(crate) fn not_found() -> Response {
    let mut response = (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// [`not_found`] for handlers that build `Response<Bytes>`.
pub(crate) fn not_found_bytes() -> http::Response<bytes::Bytes> {
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
