//! `PeerTransport`: the pooled HTTPS client used to reach peers.
//!
//! hyper-util's legacy client over hyper-rustls, built once and shared (upstream builds the
//! transport once in the constructor). HTTP/2 is used when the peer offers it via ALPN, else
//! HTTP/1.1. Bodies stream in both directions.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_rustls::{FixedServerNameResolver, HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_pki_types::ServerName;

use crate::body::BoxError;
use crate::peer_tls::{PEER_SERVER_NAME, PeerTlsConfig, PeerTlsError};

/// The request body type sent to peers: any `Bytes` body, boxed.
pub type PeerRequestBody = UnsyncBoxBody<Bytes, BoxError>;

/// Go's default dial timeout (`net.Dialer{Timeout: 30 * time.Second}` in client-go).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A cheap-to-clone HTTPS client for peer requests (connection pool shared by clones).
#[derive(Clone)]
pub struct PeerTransport {
    client: Client<HttpsConnector<HttpConnector>, PeerRequestBody>,
}

impl std::fmt::Debug for PeerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTransport").finish_non_exhaustive()
    }
}

impl PeerTransport {
    /// A transport verifying peers for [`PEER_SERVER_NAME`] with the given TLS material.
    pub fn new(tls: &PeerTlsConfig) -> Result<Self, PeerTlsError> {
        Self::from_client_config(tls.client_config()?, PEER_SERVER_NAME)
    }

    /// A transport from a ready rustls configuration, verifying every peer's certificate for
    /// `server_name` instead of the dialed address. Any ALPN list in `config` is replaced by
    /// `h2`, `http/1.1`.
    pub fn from_client_config(
        mut config: rustls::ClientConfig,
        server_name: &str,
    ) -> Result<Self, PeerTlsError> {
        let name = ServerName::try_from(server_name.to_owned())
            .map_err(|_| PeerTlsError::InvalidServerName(server_name.to_owned()))?;
        // hyper-rustls asserts an empty list and then sets its own.
        config.alpn_protocols.clear();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.set_nodelay(true);
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .with_server_name_resolver(FixedServerNameResolver::new(name))
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .timer(TokioTimer::new())
            .build(https);
        Ok(Self { client })
    }

    /// Sends a request prepared by [`crate::forward::prepare_request`]; the response body
    /// streams.
    ///
    /// Like Go's `http.Transport`, a replayable request (idempotent method, no body) that fails
    /// after a connection was established (typically a pooled connection the peer had already
    /// closed, e.g. because it crashed) is sent once more on a fresh connection, so the caller sees
    /// the peer's real state (its answer, or "connection refused") rather than a stale socket.
    /// Failures to connect are never repeated.
    pub async fn send(&self, req: Request<PeerRequestBody>) -> Result<Response<Incoming>, TransportError> {
        let replay = replayable_copy(&req);
        match self.client.request(req).await {
            Ok(resp) => Ok(resp),
            Err(err) if err.is_connect() => Err(TransportError(Arc::new(err))),
            Err(err) => match replay {
                Some(again) => {
                    tracing::debug!(error = %err, "peer connection failed before a response; retrying once");
                    self.client
                        .request(again)
                        .await
                        .map_err(|e| TransportError(Arc::new(e)))
                }
                None => Err(TransportError(Arc::new(err))),
            },
        }
    }
}

/// A copy of `req` to send again, when Go's transport would consider it replayable: an idempotent
/// method and an empty body.
fn replayable_copy(req: &Request<PeerRequestBody>) -> Option<Request<PeerRequestBody>> {
    let idempotent = matches!(
        *req.method(),
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    );
    if !idempotent || !req.body().is_end_stream() {
        return None;
    }
    let mut copy = Request::new(Empty::new().map_err(|never| match never {}).boxed_unsync());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    Some(copy)
}

/// A failure to get a response from a peer (connect, TLS, protocol).
///
/// Its `Display` joins the whole source chain, like Go's wrapped errors, because that text
/// becomes the body of the plain-text 503 (spec §4).
#[derive(Clone, Debug)]
pub struct TransportError(Arc<hyper_util::client::legacy::Error>);

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = std::error::Error::source(&*self.0);
        while let Some(err) = source {
            write!(f, ": {err}")?;
            source = err.source();
        }
        Ok(())
    }
}

impl std::error::Error for TransportError {}
