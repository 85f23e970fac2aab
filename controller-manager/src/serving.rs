//! kube-controller-manager's secure serving (`--bind-address`, `--secure-port`, default `0.0.0.0:10257`):
//! HTTPS with `/metrics` (the manager's Prometheus registry: `workqueue_*`,
//! `garbagecollector_controller_resources_sync_error_total`, ...) and `/healthz`.
//!
//! As upstream without `--tls-cert-file`, the certificate is self-signed at start-up, for `localhost`
//! and `127.0.0.1` by a CA named `localhost-ca@<unix time>` (client-go's `GenerateSelfSignedCertKey`):
//! scrapers skip verification (`curl -k`, Prometheus' `insecure_skip_verify`). Upstream also
//! authenticates and authorizes `/metrics` by delegation to the API server (TokenReview,
//! SubjectAccessReview); the fake does not, so every client may read it (as if `/metrics` were in
//! `--authorization-always-allow-paths`) — see docs/decisions.md.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// kube-controller-manager's default `--secure-port`.
pub const DEFAULT_SECURE_PORT: u16 = 10257;

/// kube-controller-manager's default `--bind-address`.
pub const DEFAULT_BIND_ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// client_golang's `expfmt.FmtText`, what upstream's `/metrics` answers with.
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    /// The address could not be bound (upstream's message shape).
    #[error("failed to listen on {address}: {message}")]
    Listen {
        /// `--bind-address:--secure-port`.
        address: SocketAddr,
        /// The system's reason.
        message: String,
    },
    /// The self-signed certificate could not be made.
    #[error("failed to create self-signed certificates: {0}")]
    Certificate(String),
}

/// The secure port, bound and ready to serve.
pub struct SecureServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    registry: Registry,
}

impl std::fmt::Debug for SecureServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureServer")
            .field("address", &self.local_addr())
            .finish_non_exhaustive()
    }
}

impl SecureServer {
    /// Binds `address` (port 0: any free port) with a fresh self-signed certificate; `registry` is what
    /// `/metrics` shows.
    pub async fn bind(address: SocketAddr, registry: Registry) -> Result<Self, ServingError> {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|e| ServingError::Listen {
                address,
                message: e.to_string(),
            })?;
        let acceptor = TlsAcceptor::from(Arc::new(self_signed_tls()?));
        Ok(Self {
            listener,
            acceptor,
            registry,
        })
    }

    /// The bound address (the actual port when 0 was asked for).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `cancel` fires.
    pub async fn serve(self, cancel: CancellationToken) {
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = cancel.cancelled() => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let Ok((tcp, _)) = accepted else {
                // Out of descriptors and the like: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let (acceptor, registry) = (self.acceptor.clone(), self.registry.clone());
            connections.spawn(async move {
                let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
                else {
                    return;
                };
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let response = respond(&registry, request.method(), request.uri().path());
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(32))
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
        connections.shutdown().await;
    }
}

/// The answer to `method path`: Go's `http.ServeMux` texts for what is not served.
fn respond(registry: &Registry, method: &Method, path: &str) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, content_type: &str, body: Vec<u8>| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = header::HeaderValue::from_str(content_type) {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        response.headers_mut().insert(
            header::HeaderName::from_static("x-content-type-options"),
            header::HeaderValue::from_static("nosniff"),
        );
        response
    };
    const PLAIN: &str = "text/plain; charset=utf-8";
    let readable = method == Method::GET || method == Method::HEAD;
    match path {
        "/metrics" | "/healthz" if !readable => text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            b"Method Not Allowed\n".to_vec(),
        ),
        "/metrics" => {
            let encoder = TextEncoder::new();
            let mut body = Vec::new();
            match encoder.encode(&registry.gather(), &mut body) {
                Ok(()) => text(StatusCode::OK, METRICS_CONTENT_TYPE, body),
                Err(err) => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    PLAIN,
                    format!("error gathering metrics: {err}\n").into_bytes(),
                ),
            }
        }
        "/healthz" => text(StatusCode::OK, PLAIN, b"ok".to_vec()),
        _ => text(StatusCode::NOT_FOUND, PLAIN, b"404 page not found\n".to_vec()),
    }
}

/// client-go's `GenerateSelfSignedCertKey("localhost", [127.0.0.1], nil)`: a CA
/// `localhost-ca@<unix time>` and a serving certificate `localhost@<unix time>` it signs.
fn self_signed_tls() -> Result<rustls::ServerConfig, ServingError> {
    let fail = |e: &dyn std::fmt::Display| ServingError::Certificate(e.to_string());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let ca =
        certs::CertificateAuthority::new_self_signed(&format!("localhost-ca@{now}")).map_err(|e| fail(&e))?;
    let serving = ca
        .issue_serving_cert(
            &format!("localhost@{now}"),
            &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
            &["localhost".to_owned()],
        )
        .map_err(|e| fail(&e))?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![serving.cert_der(), ca.cert().cert_der()], serving.key_der())
        .map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_healthz_and_go_mux_answers() {
        let registry = Registry::new();
        let counter = prometheus::IntCounter::new(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
        )
        .unwrap();
        registry.register(Box::new(counter.clone())).unwrap();
        counter.inc();
        let metrics = respond(&registry, &Method::GET, "/metrics");
        assert_eq!(metrics.status(), StatusCode::OK);
        assert_eq!(
            metrics.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert_eq!(
            respond(&registry, &Method::GET, "/healthz").status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&registry, &Method::GET, "/nope").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            respond(&registry, &Method::POST, "/metrics").status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }

    #[test]
    fn the_self_signed_certificate_is_made() {
        assert!(self_signed_tls().is_ok());
    }
}
