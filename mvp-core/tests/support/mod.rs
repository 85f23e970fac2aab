//! Test support: a throw-away PKI and a tiny TLS "peer apiserver" on 127.0.0.1.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use mvp_core::{PeerTlsConfig, RequestHeaderAuthenticator, RequestHeaderConfig};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

#[path = "../../src/test_pki.rs"]
mod test_pki;
pub(crate) use test_pki::TestCa;

pub type Chain = Vec<CertificateDer<'static>>;

pub struct Pki {
    pub cluster_ca: TestCa,
    pub front_proxy_ca: TestCa,
}

impl Pki {
    pub fn new() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            cluster_ca: TestCa::new("kubernetes"),
            front_proxy_ca: TestCa::new("front-proxy-ca"),
        }
    }

    /// A serving cert with SAN `kubernetes.default.svc` only (no IP SAN: the proxy must
    /// verify that name, not the dialed address).
    pub fn serving(&self) -> (Chain, PrivateKeyDer<'static>) {
        self.cluster_ca
            .serving("kube-apiserver", &["kubernetes.default.svc"])
    }

    pub fn serving_with_sans(&self, sans: &[&str]) -> (Chain, PrivateKeyDer<'static>) {
        self.cluster_ca.serving("kube-apiserver", sans)
    }

    /// The proxy's TLS material: trusts the cluster CA, presents a front-proxy cert `cn`.
    pub fn peer_tls(&self, cn: &str) -> PeerTlsConfig {
        let (client_cert_chain, client_key) = self.front_proxy_ca.client(cn, &[]);
        PeerTlsConfig {
            peer_ca: vec![self.cluster_ca.cert_der()],
            client_cert_chain,
            client_key,
        }
    }

    pub fn requestheader(&self, allowed: &[&str]) -> RequestHeaderAuthenticator {
        let mut cfg = RequestHeaderConfig::with_standard_headers(vec![self.front_proxy_ca.cert_der()]);
        cfg.allowed_names = allowed.iter().map(|s| (*s).to_owned()).collect();
        RequestHeaderAuthenticator::new(&cfg).unwrap()
    }
}

/// What the peer's handler gets for each request.
pub struct PeerRequest {
    pub req: Request<Incoming>,
    pub client_chain: Chain,
}

pub type PeerBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

pub fn full(body: impl Into<Bytes>) -> PeerBody {
    Full::new(body.into()).boxed()
}

/// A body fed chunk by chunk through the returned sender.
pub fn channel_body() -> (mpsc::Sender<Bytes>, PeerBody) {
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    (tx, StreamBody::new(stream).boxed())
}

/// A running peer; dropping it stops the listener and every connection.
pub struct Peer {
    pub addr: SocketAddr,
    _tasks: JoinSet<()>,
}

/// Starts a TLS peer on 127.0.0.1:0 serving `handler`. `alpn` picks the protocols offered.
pub async fn start_peer<H, Fut>(
    pki: &Pki,
    serving: (Chain, PrivateKeyDer<'static>),
    alpn: &[&[u8]],
    handler: H,
) -> Peer
where
    H: Fn(PeerRequest) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<PeerBody>> + Send + 'static,
{
    let mut roots = RootCertStore::empty();
    roots.add(pki.front_proxy_ca.cert_der()).unwrap();
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
        .allow_unauthenticated()
        .build()
        .unwrap();
    let mut cfg = ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(serving.0, serving.1)
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    serve_tls(cfg, move |_conn, tls| {
        let handler = handler.clone();
        async move {
            let chain: Chain = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| c.to_vec())
                .unwrap_or_default();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let fut = handler(PeerRequest {
                    req,
                    client_chain: chain.clone(),
                });
                async move { Ok::<_, Infallible>(fut.await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(tls), svc)
                .await;
        }
    })
    .await
}

/// Listens on 127.0.0.1:0 with `config` and runs `serve(n, stream)` for the `n`-th connection (from 0)
/// once its handshake succeeded.
async fn serve_tls<F, Fut>(config: ServerConfig, serve: F) -> Peer
where
    F: Fn(usize, tokio_rustls::server::TlsStream<tokio::net::TcpStream>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let serve = Arc::new(serve);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
        let mut conns = JoinSet::new();
        for conn in 0.. {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, serve) = (acceptor.clone(), serve.clone());
            conns.spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    serve(conn, tls).await;
                }
            });
        }
    });
    Peer { addr, _tasks: tasks }
}

/// A peer speaking HTTP/1.1 by hand so a test controls the socket: each connection (numbered from
/// 0) answers its first request with `200` and body `conn<N>`, keeps the connection, and on the next
/// request reads it and closes the connection without answering (a peer that went away under a
/// pooled keep-alive connection). The returned log holds `conn<N> <METHOD>` for each request the
/// peer received in full.
pub async fn start_peer_answering_once_per_connection(
    pki: &Pki,
) -> (Peer, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    let (chain, key) = pki.serving();
    let mut cfg = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = log.clone();
    let peer = serve_tls(cfg, move |conn, tls| {
        let seen = seen.clone();
        async move {
            let mut stream = BufReader::new(tls);
            for request in 0.. {
                let mut head = String::new();
                let mut content_length = 0usize;
                loop {
                    let mut line = String::new();
                    if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        content_length = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if head.is_empty() {
                        head = line;
                    }
                }
                let mut body = vec![0; content_length];
                if stream.read_exact(&mut body).await.is_err() {
                    return;
                }
                let method = head.split(' ').next().unwrap_or_default().to_owned();
                seen.lock().unwrap().push(format!("conn{conn} {method}"));
                if request > 0 {
                    return; // dropped: the socket closes without an answer or close_notify
                }
                let answer = format!("conn{conn}");
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{answer}",
                    answer.len()
                );
                if stream.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    (peer, log)
}
