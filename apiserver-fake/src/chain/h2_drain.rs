//! HTTP/2 only: reads what a handler left of a request body before the response goes out.
//!
//! A handler that answers early (405 for a verb a route does not take, 401, 403, 415, ...) drops the
//! request body unread. Over HTTP/2, hyper then resets the stream (`RST_STREAM`) while the client may
//! still be sending the body, and clients such as curl (nghttp2) take the reset for a failed request
//! and never show the answer (`Stream error in the HTTP/2 framing layer`): with a 300 kB body, about
//! half the time. Go's server, which kube-apiserver runs on, always lets the client see the answer.
//! This filter, for HTTP/2 (HTTP/1.1 connections follow Go's own rules for unread bodies, in
//! `server/unread_body.rs`), hands the handler a body that gives the rest back when dropped, and once
//! the response is ready, reads what is left (at most [`DRAIN_LIMIT_BYTES`], for at most
//! [`DRAIN_TIMEOUT`]) and discards it.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;

/// The most of an unread body read before answering (the largest body the fake accepts, plus room).
pub(crate) const DRAIN_LIMIT_BYTES: usize = crate::api::rest::MAX_REQUEST_BODY_BYTES + 64 * 1024;

/// The longest the answer waits for the rest of an unread body (a client that stalls mid-body gets
/// its answer after this).
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// The request body, shared between the handler (through [`SharedBody`]) and this filter.
type Slot = Arc<Mutex<Option<Body>>>;

/// The body a handler sees: reads through to the request's body, which stays in the [`Slot`].
struct SharedBody(Slot);

impl http_body::Body for SharedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().map(http_body::Body::size_hint).unwrap_or_default()
    }
}

/// The filter (see the module docs). HTTP/2 only: on HTTP/1.1 the connection applies Go's rules
/// for unread bodies (256 KiB drained, else `Connection: close`; `crate::server`'s `unread_body`).
pub(crate) async fn read_unread_body(req: Request, next: Next) -> Response {
    if req.version() != http::Version::HTTP_2 {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    if http_body::Body::is_end_stream(&body) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let slot: Slot = Arc::new(Mutex::new(Some(body)));
    let response = next
        .run(Request::from_parts(parts, Body::new(SharedBody(slot.clone()))))
        .await;
    // Only once the handler has let go of the body (a streaming forward may still be reading it).
    if Arc::strong_count(&slot) == 1 {
        let rest = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(rest) = rest.filter(|body| !http_body::Body::is_end_stream(body)) {
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, discard(rest)).await;
        }
    }
    response
}

/// Reads and drops `body` to its end or until [`DRAIN_LIMIT_BYTES`] have been read, without keeping it.
async fn discard(mut body: Body) {
    let mut read = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        read += frame.data_ref().map_or(0, Bytes::len);
        if read > DRAIN_LIMIT_BYTES {
            return;
        }
    }
}
