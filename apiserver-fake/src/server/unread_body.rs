//! What happens to a request body the handler chain did not read, on HTTP/1.1: Go's `net/http` server
//! rules (`chunkWriter.writeHeader`), so that a keep-alive client's next request on the connection
//! gets an answer. Also Go's limit on the size of an HTTP/1.1 request head (`MaxHeaderBytes`). (On
//! HTTP/2 the handler chain's first filter, [`crate::chain::h2_drain`], reads what a handler left.)
//!
//! A handler may answer without reading the body (401, 403, 415, a proxied request whose peer is
//! down, …) or after reading part of it (413). hyper would then close the connection after the
//! response without saying so, and a client that sent its next request on it gets no answer. As Go's
//! server does before it writes the response headers:
//!
//! * a body the client sent with `Expect: 100-continue` and that was not read to its end: the
//!   response gets `Connection: close` (the client is told not to send the rest);
//! * otherwise up to 256 KiB of what is left is read and discarded (`maxPostHandlerReadBytes`); if
//!   the body ends there the connection stays open, else (or on a read error, or when the client
//!   stalls for [`DRAIN_TIMEOUT`]) the response gets `Connection: close`.
//!
//! A body the handler still holds when its response starts (a proxied request streaming to a peer) is
//! left to it. When the connection then closes, [`Linger`] keeps the socket open for a moment after the
//! response, reading and discarding, as Go's `closeWriteAndWait` does, so that the close does not reset
//! the connection before the client has read the answer.

use std::convert::Infallible;
use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, Version, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tower::ServiceExt;

use crate::chain::HandlerChain;

/// Go's `maxPostHandlerReadBytes`: how much of an unread body the server reads to keep the connection.
pub(super) const MAX_POST_HANDLER_READ_BYTES: u64 = 256 << 10;

/// How long the server waits for the rest of an unread body before it gives up the connection.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Go's `rstAvoidanceDelay`: how long a closing connection keeps reading after its last response.
const LINGER: Duration = Duration::from_millis(500);

/// The most of the body the handler chain gets in one frame. hyper hands over what its read buffer
/// holds (up to the 1 MiB it may grow to for large request heads), where Go's handlers read through
/// small buffers and stop one byte past their limit: a 413 for a 4 MiB body would otherwise have
/// consumed most of it, and the connection kept where Go's closes. With frames this small, what the
/// chain leaves unread is within one frame of what a Go handler leaves.
const MAX_FRAME_BYTES: usize = 16 << 10;

/// The request body as the connection holds it: the rest of the frame the chain is reading, then the
/// connection's stream.
#[derive(Default)]
struct BodyState {
    /// What is left of a frame larger than [`MAX_FRAME_BYTES`] (not yet seen by the chain).
    pending: Bytes,
    incoming: Option<Incoming>,
}

impl BodyState {
    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.incoming.as_ref().is_none_or(HttpBody::is_end_stream)
    }
}

/// The request body shared between the handler chain (which reads it through [`TrackedBody`]) and the
/// connection (which drains what the chain left once the chain has dropped it).
#[derive(Default)]
struct Shared {
    body: Mutex<BodyState>,
    /// The body was read to its end.
    finished: AtomicBool,
    /// The handler chain no longer holds the body.
    released: AtomicBool,
}

impl Shared {
    fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
            || self.body.lock().map(|body| body.is_end_stream()).unwrap_or(false)
    }
}

/// The request body the handler chain sees: the connection's, in frames of at most
/// [`MAX_FRAME_BYTES`], with what became of it recorded.
struct TrackedBody {
    shared: Arc<Shared>,
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        self.shared.released.store(true, Ordering::Release);
    }
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Ok(mut body) = self.shared.body.lock() else {
            return Poll::Ready(None);
        };
        let body = &mut *body;
        if !body.pending.is_empty() {
            let take = body.pending.len().min(MAX_FRAME_BYTES);
            return Poll::Ready(Some(Ok(Frame::data(body.pending.split_to(take)))));
        }
        let Some(incoming) = body.incoming.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(incoming).poll_frame(cx) {
            Poll::Ready(None) => {
                self.shared.finished.store(true, Ordering::Release);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(mut data) if data.len() > MAX_FRAME_BYTES => {
                    body.pending = data.split_off(MAX_FRAME_BYTES);
                    Poll::Ready(Some(Ok(Frame::data(data))))
                }
                Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.shared
            .body
            .lock()
            .map(|body| body.is_end_stream())
            .unwrap_or(true)
    }

    fn size_hint(&self) -> SizeHint {
        let Ok(body) = self.shared.body.lock() else {
            return SizeHint::with_exact(0);
        };
        let pending = body.pending.len() as u64;
        let mut hint = body
            .incoming
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint);
        // The upper bound first: `set_lower` refuses a lower bound above the upper one.
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + pending);
        }
        hint.set_lower(hint.lower() + pending);
        hint
    }
}

/// Serves one request with `app`, then applies the module's rules to its unread body (HTTP/1.x only:
/// an HTTP/2 stream ends on its own).
pub(super) async fn serve(app: HandlerChain, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if req.version() == Version::HTTP_2 {
        return app.oneshot(req.map(Body::new)).await;
    }
    if head_bytes(&req) > super::listener::MAX_HEADER_BYTES + 4096 {
        return Ok(request_head_too_large());
    }
    let expects_continue = req
        .headers()
        .get(header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    let shared = Arc::new(Shared::default());
    let req = req.map(|incoming| {
        if let Ok(mut body) = shared.body.lock() {
            body.incoming = Some(incoming);
        }
        Body::new(TrackedBody {
            shared: shared.clone(),
        })
    });
    let Ok(mut response) = app.oneshot(req).await;
    if shared.finished() || !shared.released.load(Ordering::Acquire) {
        return Ok(response);
    }
    let keep = !expects_continue && drain(&shared).await;
    if !keep {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(response)
}

/// The size of the request's head as it came on the wire (request line, header lines, blank line).
fn head_bytes<B>(req: &Request<B>) -> usize {
    let uri = req.uri();
    let target = uri.path_and_query().map_or(1, |pq| pq.as_str().len())
        + uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len());
    let line = req.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let fields: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    line + fields + 2
}

/// Go's answer to a request head over `MaxHeaderBytes` (plus its 4 KiB of slack): 431, the status line
/// as the body, and the connection closed. hyper refuses a head that does not fit its read buffer, but
/// one made of many fields can get through it whole, so the limit is checked here too.
fn request_head_too_large() -> Response<Body> {
    let mut response = Response::new(Body::from("431 Request Header Fields Too Large"));
    *response.status_mut() = http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Reads and discards what is left of the body, up to [`MAX_POST_HANDLER_READ_BYTES`]; whether it
/// ended there (the connection can carry the next request).
async fn drain(shared: &Shared) -> bool {
    let Some((pending, incoming)) = shared.body.lock().ok().map(|mut body| {
        let body = &mut *body;
        (std::mem::take(&mut body.pending), body.incoming.take())
    }) else {
        return true;
    };
    let Some(mut left) = MAX_POST_HANDLER_READ_BYTES.checked_sub(pending.len() as u64) else {
        return false;
    };
    let Some(mut body) = incoming else {
        return true;
    };
    let read = async {
        loop {
            match body.frame().await {
                None => return true,
                Some(Ok(frame)) => {
                    let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                    if len > left {
                        return false;
                    }
                    left -= len;
                }
                Some(Err(_)) => return false,
            }
        }
    };
    tokio::time::timeout(DRAIN_TIMEOUT, read).await.unwrap_or(false)
}

/// A connection's socket that, when the server closes it, first says so (FIN) and then keeps reading
/// and discarding for up to [`LINGER`] until the client closes too (Go's `closeWriteAndWait`): closing
/// a socket with unread input resets the connection, and a reset can destroy the response the client
/// has not read yet (a 413 for a body it is still sending).
pub(super) struct Linger<T> {
    inner: T,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> Linger<T> {
    /// Wraps a socket.
    pub(super) fn new(inner: T) -> Self {
        Self {
            inner,
            deadline: None,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Linger<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Linger<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.deadline.is_none() {
            match Pin::new(&mut this.inner).poll_shutdown(cx) {
                Poll::Ready(Ok(())) => this.deadline = Some(Box::pin(tokio::time::sleep(LINGER))),
                other => return other,
            }
        }
        let mut scratch = [0u8; 8192];
        loop {
            if let Some(deadline) = this.deadline.as_mut()
                && deadline.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                // The client closed its side (or the socket failed): nothing more to wait for.
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {}
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
