//! The embedded TCP load balancer: what HAProxy does with kubeadm's HA configuration, in this process,
//! so that a cluster needs nothing installed.
//!
//! - **TCP mode**: each client connection is spliced, byte for byte, to one backend; TLS is between
//!   the client and the apiserver (the servers' certificates carry the balancer's address, as kubeadm
//!   adds the control-plane endpoint to them). A client's requests on one connection (HTTP/2
//!   multiplexes many) all reach the same server, as through HAProxy in `mode tcp`.
//! - **Round robin** over the backends that are up and enabled, per connection (`balance roundrobin`);
//!   a backend that refuses the connection is skipped for the next one (`option redispatch`).
//! - **Health checks** (`option httpchk GET /readyz`, `http-check expect status 200`, `check-ssl
//!   verify none`): every [`HealthCheck::interval`] a fresh TLS connection to each backend sends `GET
//!   /readyz`; no answer within [`HealthCheck::timeout`] or another status is a failure. A backend goes
//!   down after [`HealthCheck::fall`] consecutive failures and up after [`HealthCheck::rise`]
//!   successes (HAProxy's `fall`/`rise`). Connections already spliced to a backend that goes down are
//!   left alone, as HAProxy leaves them (no `on-marked-down shutdown-sessions`).
//! - **Administrative state** ([`EmbeddedBalancer::set_enabled`], HAProxy's `set server … state
//!   maint`): an orchestrator drains a server before it stops it.
//!
//! [`EmbeddedBalancer::backend_of`] tells which backend a client connection (by the client's local
//! address) was sent to: the upgrade simulator judges each answer by the server that gave it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{BackendStats, HealthCheck};

/// How long a connection to a backend may take before the next backend is tried (HAProxy's
/// `timeout connect`, kubeadm's guide: 5 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
struct BackendState {
    name: String,
    addr: SocketAddr,
    /// Passing its health checks.
    up: bool,
    /// Not put in maintenance by an operator.
    enabled: bool,
    /// Consecutive check results against the current state (towards `rise` or `fall`).
    streak: u32,
    connections: u64,
    active: u64,
    checks_failed: u64,
}

#[derive(Debug)]
struct Shared {
    backends: RwLock<Vec<BackendState>>,
    next: AtomicUsize,
    /// Client address → backend index, while the connection lasts.
    clients: Mutex<HashMap<SocketAddr, usize>>,
}

impl Shared {
    fn backends(&self) -> std::sync::RwLockReadGuard<'_, Vec<BackendState>> {
        self.backends
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn backends_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<BackendState>> {
        self.backends
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, usize>> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next backend in rotation after the round-robin cursor, skipping `tried`.
    fn pick(&self, tried: &[usize]) -> Option<(usize, SocketAddr)> {
        let backends = self.backends();
        let n = backends.len();
        for _ in 0..n {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % n;
            let b = &backends[i];
            if b.up && b.enabled && !tried.contains(&i) {
                return Some((i, b.addr));
            }
        }
        None
    }
}

/// A running embedded balancer; dropping it stops it (listener, checks and spliced connections).
#[derive(Debug)]
pub struct EmbeddedBalancer {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    cancel: CancellationToken,
    tasks: JoinSet<()>,
}

impl Drop for EmbeddedBalancer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl EmbeddedBalancer {
    /// Listens on `listen` and balances over `backends` (`(name, address)`), checking them with
    /// `check`. One round of checks runs before the first connection is accepted, so a backend is in
    /// rotation from the start only if it is ready.
    pub async fn start(
        listen: SocketAddr,
        backends: Vec<(String, SocketAddr)>,
        check: HealthCheck,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let local_addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            backends: RwLock::new(
                backends
                    .into_iter()
                    .map(|(name, addr)| BackendState {
                        name,
                        addr,
                        up: false,
                        enabled: true,
                        streak: 0,
                        connections: 0,
                        active: 0,
                        checks_failed: 0,
                    })
                    .collect(),
            ),
            next: AtomicUsize::new(0),
            clients: Mutex::new(HashMap::new()),
        });
        let tls = check_tls_config();
        // The first round decides the initial state at once (no `rise` to wait for).
        let addrs: Vec<SocketAddr> = shared.backends().iter().map(|b| b.addr).collect();
        for (i, addr) in addrs.into_iter().enumerate() {
            let ok = check_readyz(addr, &tls, check.timeout).await;
            let mut backends = shared.backends_mut();
            backends[i].up = ok;
            if !ok {
                backends[i].checks_failed += 1;
            }
        }
        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        tasks.spawn(run_checks(shared.clone(), check, tls, cancel.clone()));
        tasks.spawn(accept(listener, shared.clone(), cancel.clone()));
        Ok(Self {
            shared,
            local_addr,
            cancel,
            tasks,
        })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Points backend `index` at `addr` (a restarted server may come back on another port).
    pub fn set_backend(&self, index: usize, addr: SocketAddr) {
        if let Some(b) = self.shared.backends_mut().get_mut(index) {
            b.addr = addr;
        }
    }

    /// Takes backend `index` out of rotation (`false`, maintenance) or puts it back (`true`); a
    /// backend put back still needs to pass its checks, and is checked at once.
    pub fn set_enabled(&self, index: usize, enabled: bool) {
        if let Some(b) = self.shared.backends_mut().get_mut(index) {
            b.enabled = enabled;
        }
    }

    /// Marks backend `index` up or down now, as a passed or failed check would; for an orchestrator
    /// that has just seen the server's `/readyz` answer itself.
    pub fn set_up(&self, index: usize, up: bool) {
        if let Some(b) = self.shared.backends_mut().get_mut(index) {
            b.up = up;
            b.streak = 0;
        }
    }

    /// Whether backend `index` is passing its checks.
    pub fn is_up(&self, index: usize) -> bool {
        self.shared.backends().get(index).is_some_and(|b| b.up)
    }

    /// The backend a client connection from `client` (the client's local address) was sent to, while
    /// that connection lasts.
    pub fn backend_of(&self, client: SocketAddr) -> Option<usize> {
        self.shared.clients().get(&client).copied()
    }

    /// Per backend: state and connection counts.
    pub fn stats(&self) -> Vec<BackendStats> {
        self.shared
            .backends()
            .iter()
            .map(|b| BackendStats {
                name: b.name.clone(),
                addr: b.addr.to_string(),
                status: match (b.enabled, b.up) {
                    (false, _) => "MAINT",
                    (true, true) => "UP",
                    (true, false) => "DOWN",
                }
                .to_owned(),
                connections: b.connections,
                active: b.active,
                checks_failed: b.checks_failed,
            })
            .collect()
    }

    /// Stops accepting, checking and splicing.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>, cancel: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let Ok((client, peer)) = accepted else {
            // Out of descriptors, say: back off a little rather than spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = client.set_nodelay(true);
        let shared = shared.clone();
        let cancel = cancel.clone();
        connections.spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = splice(client, peer, &shared) => {}
            }
            shared.clients().remove(&peer);
        });
    }
    connections.shutdown().await;
}

/// Connects `client` to the next backend in rotation (another on a refused connection) and copies
/// both ways until either side closes.
async fn splice(mut client: TcpStream, peer: SocketAddr, shared: &Shared) {
    let mut tried = Vec::new();
    let (index, mut server) = loop {
        let Some((index, addr)) = shared.pick(&tried) else {
            return; // no backend: the client's connection is closed, as HAProxy's 503-less TCP mode does
        };
        tried.push(index);
        if let Ok(Ok(server)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            break (index, server);
        }
    };
    let _ = server.set_nodelay(true);
    shared.clients().insert(peer, index);
    if let Some(b) = shared.backends_mut().get_mut(index) {
        b.connections += 1;
        b.active += 1;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    if let Some(b) = shared.backends_mut().get_mut(index) {
        b.active = b.active.saturating_sub(1);
    }
}

async fn run_checks(
    shared: Arc<Shared>,
    check: HealthCheck,
    tls: Arc<rustls::ClientConfig>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(check.interval) => {}
        }
        let addrs: Vec<SocketAddr> = shared.backends().iter().map(|b| b.addr).collect();
        let results =
            futures_util::future::join_all(addrs.iter().map(|addr| check_readyz(*addr, &tls, check.timeout)))
                .await;
        let mut backends = shared.backends_mut();
        for (b, (addr, ok)) in backends.iter_mut().zip(addrs.iter().zip(results)) {
            if b.addr != *addr {
                continue; // re-pointed while checking
            }
            if !ok {
                b.checks_failed += 1;
            }
            if ok == b.up {
                b.streak = 0;
                continue;
            }
            b.streak += 1;
            let needed = if b.up { check.fall } else { check.rise };
            if b.streak >= needed {
                b.up = ok;
                b.streak = 0;
            }
        }
    }
}

/// One health check: a fresh TLS connection (the certificate is not verified, as `check-ssl verify
/// none`), `GET /readyz`, status 200 within `timeout`.
pub(crate) async fn check_readyz(
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> bool {
    let attempt = async {
        let tcp = TcpStream::connect(addr).await.ok()?;
        let connector = tokio_rustls::TlsConnector::from(tls.clone());
        let name = rustls_pki_types::ServerName::IpAddress(addr.ip().into());
        let mut stream = connector.connect(name, tcp).await.ok()?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: apiserver\r\nUser-Agent: kube-mvp-lb-check\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.ok()?;
        Some(&head[..] == b"HTTP/1.1 200")
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}

/// TLS for health checks: HTTP/1.1, no client certificate (`/readyz` is public), any server
/// certificate accepted (HAProxy's `verify none`).
pub(crate) fn check_tls_config() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.dangerous()
                .with_custom_certificate_verifier(Arc::new(VerifyNone(provider)))
                .with_no_client_auth()
        });
    match config {
        Ok(config) => Arc::new(config),
        // The default protocol versions are always available with ring.
        Err(_) => Arc::new(
            rustls::ClientConfig::builder()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(VerifyNone(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))))
                .with_no_client_auth(),
        ),
    }
}

/// Accepts any server certificate, still checking the handshake's signatures (`verify none`).
#[derive(Debug)]
struct VerifyNone(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for VerifyNone {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
