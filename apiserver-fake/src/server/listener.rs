//! The listener: accepts connections, completes TLS, records each connection's identity for
//! authentication and serves the handler chain over HTTP/1.1 and HTTP/2.

use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::chain::HandlerChain;
use crate::chain::authentication::ConnectionInfo;

/// kube-apiserver's `MaxHeaderBytes` (`1 << 20`): the request headers one request may carry, over
/// HTTP/1.1 and HTTP/2 (hyper's defaults are about 400 KiB and 16 KiB).
pub(super) const MAX_HEADER_BYTES: usize = 1 << 20;

/// Concurrent HTTP/2 streams per connection: kube-apiserver sets `--http2-max-streams-per-connection`
/// to 1000 (hyper's default, 200, lets 200 open watches of one client stall all its other requests).
const HTTP2_MAX_STREAMS_PER_CONNECTION: u32 = 1000;

/// How many header fields an HTTP/1.1 request head may have; beyond it, 431. Go counts bytes only
/// (`MaxHeaderBytes`), so this is a deviation, chosen for its cost: hyper writes a table of 64 bytes per
/// allowed field for every request head it parses (at 16,384 fields, 12% of the CPU of an HTTP/1.1 GET).
/// 4,096 is far above what clients send (kubectl sends under ten fields; a front proxy's
/// `X-Remote-Group`, one field per group, stays under it for a user in thousands of groups) at 2–3% of a
/// GET's CPU; hyper's own default is 100. HTTP/2 counts bytes only, as Go does.
const MAX_HEADER_FIELDS: usize = 4096;

/// Go's `http.Server` accept back-off bounds.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// See [`ACCEPT_BACKOFF_MIN`].
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// kube-apiserver's `ReadHeaderTimeout` (`secure_serving.go`: 32 s, just below the request timeout's
/// upper bound).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

pub(super) async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: HandlerChain,
    cancel: CancellationToken,
    crash: CancellationToken,
) {
    let mut connections = JoinSet::new();
    let mut accept_delay = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = cancel.cancelled() => break,
            () = crash.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (tcp, remote_addr) = match accepted {
            Ok(accepted) => {
                accept_delay = Duration::ZERO;
                accepted
            }
            Err(err) => {
                // Out of descriptors (EMFILE) and the like: back off as Go's http.Server does (5 ms,
                // doubling up to 1 s) instead of spinning on an accept that keeps failing.
                accept_delay = (accept_delay * 2).clamp(ACCEPT_BACKOFF_MIN, ACCEPT_BACKOFF_MAX);
                tracing::warn!(error = %err, retry_in = ?accept_delay, "accept failed");
                tokio::select! {
                    () = tokio::time::sleep(accept_delay) => {}
                    () = cancel.cancelled() => break,
                    () = crash.cancelled() => break,
                }
                continue;
            }
        };
        // Watch events are small writes that must leave at once (Nagle would hold them ~40 ms).
        let _ = tcp.set_nodelay(true);
        let (acceptor, app, cancel) = (acceptor.clone(), app.clone(), cancel.clone());
        connections.spawn(async move {
            let accepted = acceptor.accept(super::unread_body::Linger::new(tcp));
            let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), accepted).await else {
                return;
            };
            let client_chain = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|chain| Arc::new(chain.iter().map(|c| c.clone().into_owned()).collect()));
            let info = ConnectionInfo {
                remote_addr: Some(remote_addr),
                client_chain,
                chain_verdicts: Arc::default(),
            };
            let svc = tower::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(info.clone());
                // What the Mixed Version Proxy forwards to a peer as `X-Forwarded-For`.
                req.extensions_mut().insert(mvp_core::RemoteAddr(remote_addr));
                super::unread_body::serve(app.clone(), req)
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // kube-apiserver's ReadHeaderTimeout: a client that never finishes its request headers is
            // cut off instead of holding a connection for good.
            builder
                .http1()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                // Go's http.Server reads MaxHeaderBytes (kube-apiserver: 1 MiB) plus 4 KiB of slack,
                // with no limit on the number of fields (here: MAX_HEADER_FIELDS); beyond either, 431.
                .max_buf_size(MAX_HEADER_BYTES + 4096)
                .max_headers(MAX_HEADER_FIELDS);
            builder
                .http2()
                .max_header_list_size(MAX_HEADER_BYTES as u32)
                .max_concurrent_streams(HTTP2_MAX_STREAMS_PER_CONNECTION);
            let conn =
                builder.serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(svc));
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
                }
            }
        });
    }
    drop(listener);
    if !crash.is_cancelled() {
        // Graceful: connections finish their in-flight requests (bounded per connection) ...
        let crashed = crash.cancelled();
        tokio::pin!(crashed);
        loop {
            tokio::select! {
                joined = connections.join_next() => if joined.is_none() { break },
                () = crashed.as_mut() => break,
            }
        }
    }
    // ... and whatever is still open (e.g. watches, or everything after a crash) is cut; this returns
    // once every connection's socket is closed.
    connections.shutdown().await;
}
