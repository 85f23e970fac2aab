//! The error responses the filter writes itself, byte for byte as upstream (docs/mvp-behaviour.md §4).
//!
//! Two shapes on purpose: address resolution failures are a JSON `Status` (via
//! `responsewriters.ErrorNegotiated`), transport failures are Go's plain-text `http.Error`.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

/// The message of the 503 Status written when capable peers exist but none has a usable
/// address (docs/mvp-behaviour.md §4).
#[cfg(test)]
pub(crate) const ENDPOINT_RESOLUTION_MESSAGE: &str =
    "Error getting ip and port info of the remote server while proxying";

/// The serialized `Status` upstream writes for [`ENDPOINT_RESOLUTION_MESSAGE`]
/// (`apierrors.NewServiceUnavailable`, no `details`), with the JSON encoder's newline.
const ENDPOINT_RESOLUTION_STATUS_JSON: &str = concat!(
    r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
    r#""message":"Error getting ip and port info of the remote server while proxying","#,
    r#""reason":"ServiceUnavailable","code":503}"#,
    "\n"
);

const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");
const X_CONTENT_TYPE_OPTIONS: &str = "x-content-type-options";

/// 503 `application/json` Status "Error getting ip and port info of the remote server while
/// proxying", reason `ServiceUnavailable`.
pub(crate) fn endpoint_resolution_failed() -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from_static(
        ENDPOINT_RESOLUTION_STATUS_JSON.as_bytes(),
    )));
    *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, NOSNIFF);
    resp
}

/// Go's `http.Error(w, text, code)`: `text/plain; charset=utf-8`, `X-Content-Type-Options:
/// nosniff`, body `text` plus a newline.
pub(crate) fn http_error(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut body = String::with_capacity(text.len() + 1);
    body.push_str(text);
    body.push('\n');
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, NOSNIFF);
    resp
}

/// `responsewriters.InternalError`: 500 plain text
/// `Internal Server Error: "<request URI>": <err>`, HTML-escaped, as `http.Error` writes it.
pub(crate) fn internal_error(request_uri: &str, err: &str) -> Response<Full<Bytes>> {
    let text = format!("Internal Server Error: {}: {}", go_quote(request_uri), err);
    http_error(StatusCode::INTERNAL_SERVER_ERROR, &html_escape(&text))
}

/// Go's `strconv.Quote` for the characters a request URI can contain.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `html.EscapeString`.
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body(resp: Response<Full<Bytes>>) -> String {
        String::from_utf8(resp.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn endpoint_resolution_status_is_upstream_json() {
        let resp = endpoint_resolution_failed();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/json");
        let text = body(resp).await;
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message": ENDPOINT_RESOLUTION_MESSAGE,"reason":"ServiceUnavailable","code":503})
        );
        assert!(text.ends_with("}\n"));
    }

    #[tokio::test]
    async fn http_error_is_go_plain_text() {
        let resp = http_error(StatusCode::SERVICE_UNAVAILABLE, "dial tcp: connection refused");
        assert_eq!(resp.headers()[CONTENT_TYPE], "text/plain; charset=utf-8");
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert_eq!(body(resp).await, "dial tcp: connection refused\n");
    }

    #[tokio::test]
    async fn internal_error_quotes_and_escapes_like_go() {
        let resp = internal_error("/api/v1/watch?a=<b>", "failed to create RequestInfo: x");
        assert_eq!(resp.status(), 500);
        assert_eq!(
            body(resp).await,
            "Internal Server Error: &#34;/api/v1/watch?a=&lt;b&gt;&#34;: failed to create RequestInfo: x\n"
        );
    }
}
