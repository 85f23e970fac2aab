//! `PeerTransport`: the pooled HTTPS client used to reach peers.
//!
//! hyper-util's legacy client over hyper-rustls, built once per sending thread (upstream builds
//! the transport once in the constructor; [`PeerTransport`] says why per thread). HTTP/2 is used
//! when the peer offers it via ALPN, else HTTP/1.1. Bodies stream in both directions.

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
use thread_local::ThreadLocal;

use crate::body::BoxError;
use crate::peer_tls::{PEER_SERVER_NAME, PeerTlsConfig, PeerTlsError};
use crate::request_info::RequestInfo;

/// The request body type sent to peers: any `Bytes` body, boxed.
pub(crate) type PeerRequestBody = UnsyncBoxBody<Bytes, BoxError>;

/// Go's default dial timeout (`net.Dialer{Timeout: 30 * time.Second}` in client-go).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

type PeerClient = Client<HttpsConnector<HttpConnector>, PeerRequestBody>;

/// A cheap-to-clone HTTPS client for peer requests (connection pools shared by clones).
///
/// Two pools: ordinary requests share one HTTP/2 connection per peer (HTTP/1.1 if the peer offers
/// nothing else); long-running requests ([`RequestInfo::is_long_running`]: watches, logs, exec…)
/// each get an HTTP/1.1 connection of their own. An HTTP/2 connection carries at most the peer's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` (kube-apiserver: 100 to 1000; hyper: 200) at once, and
/// hyper-util's pool never opens a second one to the same peer, so watches sharing it would
/// starve every other proxied request once they reach the limit. (Go's HTTP/2 transport opens
/// another connection instead; a connection per long-running request is what client-go gets
/// over HTTP/1.1.)
///
/// Each thread that sends has pools of its own (built on its first request), as each nginx
/// worker keeps its own upstream connections: a peer connection's task starts on the thread that
/// uses it. With one pool for every thread, that task lives wherever the first request dialed the
/// peer (often the proxy's discovery fetch), and each request forwarded from another thread wakes
/// that thread twice; per-thread pools cut the hop's added latency and CPU by 5–15% in the
/// repository's external proxy bench. The price: up to one connection per peer per sending thread,
/// and a TLS handshake on each thread's first request to a peer.
#[derive(Clone)]
pub struct PeerTransport {
    /// Behind one `Arc`: the proxy clones the transport for every forwarded request.
    shared: Arc<SharedPools>,
}

/// What every clone of a [`PeerTransport`] shares: each thread's pools and what builds them.
struct SharedPools {
    pools: ThreadLocal<PeerPools>,
    config: rustls::ClientConfig,
    server_name: ServerName<'static>,
}

/// One thread's pools (see [`PeerTransport`]).
struct PeerPools {
    client: PeerClient,
    long_running: PeerClient,
}

impl PeerPools {
    fn new(config: &rustls::ClientConfig, name: &ServerName<'static>) -> Self {
        let client = |config: rustls::ClientConfig, http2: bool| {
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            http.set_connect_timeout(Some(CONNECT_TIMEOUT));
            http.set_nodelay(true);
            let builder = HttpsConnectorBuilder::new()
                .with_tls_config(config)
                .https_only()
                .with_server_name_resolver(FixedServerNameResolver::new(name.clone()))
                .enable_http1();
            let https = if http2 {
                builder.enable_http2().wrap_connector(http)
            } else {
                builder.wrap_connector(http)
            };
            Client::builder(TokioExecutor::new())
                .pool_timer(TokioTimer::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .timer(TokioTimer::new())
                .build(https)
        };
        Self {
            client: client(config.clone(), true),
            long_running: client(config.clone(), false),
        }
    }
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
        Ok(Self {
            shared: Arc::new(SharedPools {
                pools: ThreadLocal::new(),
                config,
                server_name: name,
            }),
        })
    }

    /// Sends a request prepared by [`crate::forward::prepare_request`]; the response body
    /// streams.
    ///
    /// Like Go's `http.Transport`, a replayable request (idempotent method, no body) that fails
    /// after a connection was established (typically a pooled connection the peer had already
    /// closed, e.g. because it crashed) is sent once more on a fresh connection, so the caller sees
    /// the peer's real state (its answer, or "connection refused") rather than a stale socket.
    /// Failures to connect are never repeated.
    pub(crate) async fn send(
        &self,
        req: Request<PeerRequestBody>,
    ) -> Result<Response<Incoming>, TransportError> {
        let endpoint = req.uri().authority().map(ToString::to_string).unwrap_or_default();
        let shared = &*self.shared;
        let pools = shared
            .pools
            .get_or(|| PeerPools::new(&shared.config, &shared.server_name));
        let client = if req
            .extensions()
            .get::<RequestInfo>()
            .is_some_and(RequestInfo::is_long_running)
        {
            &pools.long_running
        } else {
            &pools.client
        };
        let replay = replayable_copy(&req);
        match client.request(req).await {
            Ok(resp) => Ok(resp),
            Err(err) if err.is_connect() => Err(TransportError::new(err, &endpoint)),
            Err(err) => match replay {
                Some(again) => {
                    tracing::debug!(error = %err, "peer connection failed before a response; retrying once");
                    client
                        .request(again)
                        .await
                        .map_err(|e| TransportError::new(e, &endpoint))
                }
                None => Err(TransportError::new(err, &endpoint)),
            },
        }
    }
}

/// A copy of `req` to send again, when Go's transport would consider it replayable: an idempotent
/// method and an empty body. It is made before the first attempt (which consumes `req`), on the hot
/// path, so it holds only what goes on the wire: extensions (the source server's per-request state,
/// which the client never reads) are left out.
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
    Some(copy)
}

/// A failure to get a response from a peer (connect, TLS, protocol).
///
/// Its `Display` is the body of the plain-text 503 (docs/mvp-behaviour.md §4), where upstream writes Go's
/// error text: for the failures an operator meets (refused or timed-out dial, unknown CA, wrong name, TLS
/// alert from the peer, peer gone) it is Go's wording, e.g. `dial tcp 10.0.0.2:6443: connect: connection
/// refused` or `tls: failed to verify certificate: x509: certificate signed by unknown authority`; anything
/// else is the whole Rust source chain, like Go's wrapped errors.
#[derive(Clone, Debug)]
pub struct TransportError {
    error: Arc<hyper_util::client::legacy::Error>,
    /// The dialed `host:port`.
    endpoint: String,
}

impl TransportError {
    /// The failure `error` of a request to `endpoint` (the dialed `host:port`), e.g. of an admission
    /// webhook call, whose `Display` is Go's wording.
    pub fn new(error: hyper_util::client::legacy::Error, endpoint: &str) -> Self {
        Self {
            error: Arc::new(error),
            endpoint: endpoint.to_owned(),
        }
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(text) = go_error_text(&*self.error, &self.endpoint) {
            return f.write_str(&text);
        }
        write!(f, "{}", self.error)?;
        let mut source = std::error::Error::source(&*self.error);
        while let Some(err) = source {
            write!(f, ": {err}")?;
            source = err.source();
        }
        Ok(())
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

/// Go's text for the error at the bottom of `error`'s chain, when it is one Go names differently.
fn go_error_text(error: &(dyn std::error::Error + 'static), endpoint: &str) -> Option<String> {
    let mut current = Some(error);
    while let Some(err) = current {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return go_tls_text(tls);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return Some(format!("dial tcp {endpoint}: connect: connection refused"));
                }
                std::io::ErrorKind::TimedOut => return Some(format!("dial tcp {endpoint}: i/o timeout")),
                // The peer vanished mid-exchange (rustls: closed without close_notify).
                std::io::ErrorKind::UnexpectedEof => return Some("EOF".to_owned()),
                _ => {}
            }
            // `io::Error::source` skips a wrapped error and returns *its* source; look at the
            // wrapped error itself (hyper-rustls wraps tokio-rustls's io::Error, which wraps
            // rustls's).
            if let Some(inner) = io.get_ref() {
                current = Some(inner as &(dyn std::error::Error + 'static));
                continue;
            }
        }
        if let Some(hyper) = err.downcast_ref::<hyper::Error>()
            && hyper.is_incomplete_message()
        {
            return Some("EOF".to_owned());
        }
        current = err.source();
    }
    None
}

/// Go's `crypto/tls` / `crypto/x509` wording for the TLS failures a peer hop can meet.
fn go_tls_text(error: &rustls::Error) -> Option<String> {
    use rustls::{AlertDescription, CertificateError};
    const VERIFY: &str = "tls: failed to verify certificate: x509:";
    match error {
        // A same-named CA with another key is also an unknown authority to Go (which adds a
        // "possibly because of …" remark that names the candidate).
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => Some(format!("{VERIFY} certificate signed by unknown authority")),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected,
            presented,
        }) => {
            let expected = match expected {
                ServerName::DnsName(name) => name.as_ref().to_owned(),
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                _ => return None,
            };
            // rustls-webpki presents SANs as `DnsName("…")` / `IpAddress(…)`; Go lists the DNS names.
            let dns: Vec<&str> = presented
                .iter()
                .filter_map(|p| p.strip_prefix("DnsName(\"")?.strip_suffix("\")"))
                .collect();
            Some(if dns.is_empty() {
                format!("{VERIFY} certificate is not valid for any names, but wanted to match {expected}")
            } else {
                format!(
                    "{VERIFY} certificate is valid for {}, not {expected}",
                    dns.join(", ")
                )
            })
        }
        rustls::Error::AlertReceived(alert) => {
            let text = match alert {
                AlertDescription::BadCertificate => "bad certificate",
                AlertDescription::UnknownCA => "unknown certificate authority",
                AlertDescription::CertificateRequired => "certificate required",
                AlertDescription::HandshakeFailure => "handshake failure",
                AlertDescription::CertificateExpired => "expired certificate",
                _ => return None,
            };
            Some(format!("remote error: tls: {text}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_failures_read_as_go_writes_them() {
        let unknown = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert_eq!(
            go_tls_text(&unknown).unwrap(),
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        );
        let wrong_name =
            rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("kubernetes.default.svc").unwrap(),
                presented: vec![
                    "DnsName(\"localhost\")".to_owned(),
                    "IpAddress(127.0.0.1)".to_owned(),
                    "DnsName(\"kubernetes\")".to_owned(),
                ],
            });
        assert_eq!(
            go_tls_text(&wrong_name).unwrap(),
            "tls: failed to verify certificate: x509: certificate is valid for localhost, kubernetes, \
             not kubernetes.default.svc"
        );
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::BadCertificate);
        assert_eq!(go_tls_text(&alert).unwrap(), "remote error: tls: bad certificate");
        assert_eq!(go_tls_text(&rustls::Error::HandshakeNotComplete), None);
    }

    #[test]
    fn io_failures_in_the_chain_read_as_go_writes_them() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            go_error_text(&refused, "127.0.0.1:6443").unwrap(),
            "dial tcp 127.0.0.1:6443: connect: connection refused"
        );
        // As hyper-rustls hands it over: io::Error::other(tokio-rustls's io::Error(rustls::Error)).
        let wrapped_tls = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        assert!(
            go_error_text(&wrapped_tls, "x:1")
                .unwrap()
                .ends_with("certificate signed by unknown authority")
        );
        let other = std::io::Error::other("something else");
        assert_eq!(go_error_text(&other, "x:1"), None);
    }
}
