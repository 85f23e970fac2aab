//! Stage 1 of a request: the listener, TLS and the per-connection identity; and the server's lifecycle.
//!
//! [`start`] binds the secure port, builds the handler chain (authentication → authorization →
//! [the MVP filter] → local routing, see [`crate::chain`]) and starts the background controllers a real
//! kube-apiserver runs for the proxy: the identity lease and, in later stages, the peer endpoint record.
//! [`RunningServer::shutdown`] stops it gracefully (cleaning up what it published);
//! [`RunningServer::kill`] stops it the way a crash does.

pub mod config;
pub mod mvp;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use mvp_core::UserInfo;
use rustls::ServerConfig;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::{self, PemObject};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::api::catalog::{CatalogError, ServedApis};
use crate::api::discovery::DiscoveryContext;
use crate::api::metrics::ServerMetrics;
use crate::chain::authentication::{AuthSetupError, Authenticator, ConnectionInfo, read_pem_certs};
use crate::controllers::crd;
use crate::controllers::identity;
use crate::controllers::lease::IdentityLeaseController;
use crate::controllers::peer_endpoint::PeerEndpointReconciler;
use crate::server::config::ServerOptions;
use crate::server::mvp::peer_aggregated::PeerAggregatedDiscoveryHandler;
use crate::store::Store;

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Authentication could not be configured.
    #[error(transparent)]
    Auth(#[from] AuthSetupError),
    /// The serving certificate or key is unusable.
    #[error("serving certificate: {0}")]
    ServingCert(String),
    /// The API tables rejected the configuration.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The custom-resources file is unusable.
    #[error(transparent)]
    CustomResources(#[from] crd::CustomResourcesFileError),
    /// The peer proxy could not be built.
    #[error(transparent)]
    PeerProxy(#[from] crate::server::mvp::peer_proxy::PeerProxyError),
    /// The secure port could not be bound.
    #[error("failed to listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// One request as the server understood it, kept so tests can see which user a server believed it
/// served (for example the original user behind a proxied request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRequest {
    /// The authenticated user.
    pub user: UserInfo,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// Whether the request carried the peer-proxied header.
    pub peer_proxied: bool,
    /// The request's audit ID (the caller's, or one this server minted).
    pub audit_id: String,
}

/// The last requests a server served, newest last (bounded).
#[derive(Debug, Default)]
pub struct RequestLog {
    entries: Mutex<VecDeque<ServedRequest>>,
}

impl RequestLog {
    const CAPACITY: usize = 1024;

    /// Records one request, forgetting the oldest when full.
    pub fn record(&self, entry: ServedRequest) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() == Self::CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// A copy of the recorded requests, oldest first.
    pub fn snapshot(&self) -> Vec<ServedRequest> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// Everything the handlers of one server share.
pub struct ServerState {
    /// The validated configuration.
    pub options: ServerOptions,
    /// The APIServerID (also the identity lease name).
    pub server_id: String,
    /// `spec.holderIdentity` of this run's identity lease: `<server ID>_<uuid>`.
    pub holder_identity: String,
    /// The cluster's shared store.
    pub store: Arc<dyn Store>,
    /// What this server serves now (built-ins plus CRDs); updated by background tasks.
    pub served: watch::Receiver<Arc<ServedApis>>,
    /// Set once the identity lease is published (`/readyz`).
    pub ready: AtomicBool,
    /// `--max-requests-inflight` and `--max-mutating-requests-inflight` (`None`: no limit).
    pub inflight: crate::chain::inflight::InFlightLimits,
    /// Set once this server's peer endpoint record is first written (gate on): until then no peer
    /// can reach it, so `/readyz` waits for it too.
    pub peer_endpoint_published: AtomicBool,
    /// Prometheus metrics of this server.
    pub metrics: ServerMetrics,
    /// Which users this server believed it served.
    pub requests: RequestLog,
    /// The address the server listens on.
    pub local_addr: SocketAddr,
    /// What discovery documents need to know about this server.
    pub discovery: DiscoveryContext,
    /// `/openapi/v2` and `/openapi/v3`, cached per served API set.
    pub openapi: crate::api::openapi::OpenApiService,
    /// The peer proxy's resolver, once installed.
    pub proxy_resolver: std::sync::OnceLock<Arc<dyn mvp_core::PeerResolver>>,
    /// The peer proxy's readiness check, once installed; `/readyz` waits for it.
    pub proxy_readiness: std::sync::OnceLock<crate::server::mvp::peer_proxy::ProxyReadiness>,
    /// Whether the peers know this server (needs the proxy's view of peers); `/readyz` waits for it.
    pub peers_know_server: std::sync::OnceLock<crate::server::mvp::peer_proxy::PeersKnowServer>,
    /// The peer proxy's view of peer addresses, once installed (tests and tools can observe it).
    pub proxy_endpoints: std::sync::OnceLock<Arc<dyn mvp_core::PeerEndpoints>>,
    /// Peer-aggregated `/apis` (gate on, 1.35+); the peer proxy connects its peer cache to it.
    pub peer_aggregated: Option<Arc<PeerAggregatedDiscoveryHandler>>,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("server_id", &self.server_id)
            .finish_non_exhaustive()
    }
}

impl ServerState {
    /// Whether `/readyz` reports ready: [`Self::failed_readiness_check`] finds nothing.
    pub fn is_ready(&self) -> bool {
        self.failed_readiness_check().is_none()
    }

    /// [`Self::failed_readiness_check`] on a fresh view of the peers' addresses and receipts (read
    /// from the store now, while the checks have not all passed yet): what `/readyz` answers.
    pub async fn check_readiness(&self) -> Option<&'static str> {
        if self.is_ready() {
            return None;
        }
        if let Some(check) = self.peers_know_server.get() {
            check.refresh(self.store.as_ref()).await;
        }
        self.failed_readiness_check()
    }

    /// The first post-start hook `/readyz` reports as not finished, in the order they run: the
    /// identity lease, the proxy's caches synced once, then (gate on) the peer endpoint record,
    /// which is written once the first two pass, as upstream writes it once the server is started.
    /// Then, not upstream, two checks judged on a view of the peers' records that includes this
    /// server's own (so no older than it): the proxy has asked every peer with a lease and an
    /// address for its discovery, and every reachable peer publishing discovery receipts has asked
    /// this run for its discovery ([`crate::controllers::peer_receipts`]). So a server that says ready routes to
    /// its peers, and they to it: no false 404 either way.
    pub fn failed_readiness_check(&self) -> Option<&'static str> {
        if self
            .options
            .authorizer
            .rbac()
            .is_some_and(|rbac| !rbac.is_ready())
        {
            Some("rbac/bootstrap-roles")
        } else if !self.ready.load(Ordering::Acquire) {
            Some("start-kube-apiserver-identity-lease-controller")
        } else if !self.proxy_synced() {
            Some("unknown-version-proxy-filter")
        } else if self.options.mvp_gate_enabled() && !self.peer_endpoint_published.load(Ordering::Acquire) {
            Some("peer-endpoint-reconciler-controller")
        } else if !self
            .proxy_readiness
            .get()
            .is_none_or(crate::server::mvp::peer_proxy::ProxyReadiness::is_ready)
        {
            Some("unknown-version-proxy-filter")
        } else if !self
            .peers_know_server
            .get()
            .is_none_or(|check| check.is_ready(&self.server_id, &self.holder_identity))
        {
            Some("peer-discovery-receipts")
        } else {
            None
        }
    }

    /// Whether the identity lease is published and the proxy (if any) has synced its caches once:
    /// what the peer endpoint reconciler waits for, as upstream writes the record once started.
    pub fn is_started(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.proxy_synced()
    }

    fn proxy_synced(&self) -> bool {
        self.proxy_readiness
            .get()
            .is_none_or(crate::server::mvp::peer_proxy::ProxyReadiness::has_synced)
    }

    /// Records the installed peer proxy's resolver and makes `/readyz` wait for its readiness check, as
    /// upstream's `unknown-version-proxy-filter` post-start hook does (docs/mvp-behaviour.md §1.3 step 4).
    pub fn set_proxy(
        &self,
        resolver: Arc<dyn mvp_core::PeerResolver>,
        readiness: crate::server::mvp::peer_proxy::ProxyReadiness,
    ) {
        let _ = self.proxy_resolver.set(resolver);
        let _ = self.proxy_readiness.set(readiness);
    }
}

/// A started server. Dropping it without [`RunningServer::shutdown`] aborts it like [`RunningServer::kill`].
#[derive(Debug)]
pub struct RunningServer {
    state: Arc<ServerState>,
    cancel: CancellationToken,
    crash: CancellationToken,
    accept: Option<JoinHandle<()>>,
    tasks: JoinSet<()>,
    served_tx: Arc<watch::Sender<Arc<ServedApis>>>,
}

impl RunningServer {
    /// The listening address (with the real port when `--secure-port=0`).
    pub fn local_addr(&self) -> SocketAddr {
        self.state.local_addr
    }

    /// `https://ip:port` of this server.
    pub fn url(&self) -> String {
        format!("https://{}", self.state.local_addr)
    }

    /// The APIServerID.
    pub fn server_id(&self) -> &str {
        &self.state.server_id
    }

    /// Shared state (configuration, metrics, request log).
    pub fn state(&self) -> &Arc<ServerState> {
        &self.state
    }

    /// Replaces what the server serves (used by the CRD controller and by tests).
    pub fn served_sender(&self) -> &Arc<watch::Sender<Arc<ServedApis>>> {
        &self.served_tx
    }

    /// Waits until `/readyz` would answer ok, or the timeout passes; returns whether it is ready.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.state.check_readiness().await.is_some() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Graceful shutdown: stop accepting, delete the own identity lease (1.35+, docs/mvp-behaviour.md §2.2),
    /// close connections (open watches are cut after a short grace period).
    pub async fn shutdown(mut self) {
        self.state.ready.store(false, Ordering::Release);
        if self.state.options.mvp_gate_enabled() {
            // Upstream's pre-shutdown hook: the peer endpoint record goes first, while the server
            // still serves, and peers' address caches get two refreshes to notice (the role of
            // kube-apiserver's --shutdown-delay-duration). Otherwise a peer could still hold this
            // address when the next run of the server comes up on it, ask that run for its discovery
            // before its record exists, and answer 503 for what only it serves until then. The
            // reconciler no longer writes: it waits for readiness, just withdrawn.
            PeerEndpointReconciler::remove(&self.state).await;
            tokio::time::sleep(2 * crate::server::mvp::peer_proxy::ENDPOINT_REFRESH).await;
        }
        self.cancel.cancel();
        let accept = self.accept.take();
        let drain = async {
            if let Some(accept) = accept {
                let _ = accept.await;
            }
            while self.tasks.join_next().await.is_some() {}
        };
        if tokio::time::timeout(Duration::from_secs(2), drain).await.is_err() {
            self.crash.cancel();
            self.tasks.abort_all();
        }
        // Controllers have stopped, so nothing re-creates what we remove now (again: a write that was
        // under way when the record was first removed).
        PeerEndpointReconciler::remove(&self.state).await;
        if self.state.options.emulated_version.minor >= 35 {
            IdentityLeaseController::delete_own_lease(&self.state).await;
        }
    }

    /// Stops the server the way a crash does: nothing it published is cleaned up, connections are cut
    /// without a goodbye (no GOAWAY, no TLS close_notify). When this returns the listening socket and
    /// every connection are closed, so a peer's next dial is refused.
    pub async fn kill(mut self) {
        self.tasks.abort_all();
        self.crash.cancel();
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
        while self.tasks.join_next().await.is_some() {}
        // Detached work tied to the server's token (a peer discovery sync still retrying) stops too.
        self.cancel.cancel();
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.crash.cancel();
        self.cancel.cancel();
        self.tasks.abort_all();
        if let Some(accept) = &self.accept {
            accept.abort();
        }
    }
}

/// Starts one fake kube-apiserver on `store`.
pub async fn start(options: ServerOptions, store: Arc<dyn Store>) -> Result<RunningServer, ServerError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let acceptor = TlsAcceptor::from(Arc::new(server_tls_config(&options)?));
    let authenticator = Arc::new(Authenticator::from_flags(&options.flags)?);
    let builtin = Arc::new(ServedApis::builtin(
        options.emulated_version,
        &options.runtime_config,
        &options.feature_gates,
    )?);
    let (served_tx, served) = watch::channel(builtin.clone());
    let served_tx = Arc::new(served_tx);
    if let Err(e) = crate::api::rest::lifecycle::ensure_system_namespaces(store.as_ref()).await {
        tracing::warn!(error = %e, "could not create the system namespaces");
    }
    if let Some(path) = &options.flags.custom_resources_file {
        crd::create_crds(
            store.as_ref(),
            crd::read_custom_resources_file(path)?,
            options.binary_version,
        )
        .await;
    }

    let bind = SocketAddr::new(options.flags.bind_address, options.flags.secure_port);
    let listener = TcpListener::bind(bind)
        .await
        .map_err(|source| ServerError::Bind { addr: bind, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr: bind, source })?;

    let server_id = identity::server_id(&options.hostname);
    let holder_identity = format!("{server_id}_{}", uuid::Uuid::new_v4());
    let mut discovery = DiscoveryContext::new(
        options.emulated_version,
        options.feature_gates.clone(),
        SocketAddr::new(options.public_address(), local_addr.port()).to_string(),
    );
    let metrics = ServerMetrics::new();
    let peer_aggregated = if options.mvp_gate_enabled() && options.emulated_version.minor >= 35 {
        let handler = PeerAggregatedDiscoveryHandler::new(server_id.clone(), metrics.registry())
            .map_err(crate::server::mvp::peer_proxy::PeerProxyError::from)?;
        Some(Arc::new(handler))
    } else {
        None
    };
    discovery.peer_aggregated = peer_aggregated
        .clone()
        .map(|h| h as Arc<dyn crate::api::discovery::PeerAggregatedDiscovery>);
    let inflight = crate::chain::inflight::InFlightLimits::new(
        options.flags.max_requests_inflight,
        options.flags.max_mutating_requests_inflight,
    );
    let state = Arc::new(ServerState {
        proxy_resolver: std::sync::OnceLock::new(),
        proxy_readiness: std::sync::OnceLock::new(),
        peers_know_server: std::sync::OnceLock::new(),
        proxy_endpoints: std::sync::OnceLock::new(),
        discovery,
        openapi: Default::default(),
        peer_aggregated,
        metrics,
        options,
        server_id,
        holder_identity,
        store,
        served,
        ready: AtomicBool::new(false),
        peer_endpoint_published: AtomicBool::new(false),
        inflight,
        requests: RequestLog::default(),
        local_addr,
    });

    // The identity lease exists before anything names this server (StorageVersion entries of a server
    // without lease are garbage).
    let lease_controller = IdentityLeaseController::new(state.clone());
    lease_controller.initialize().await;
    let storage_version_api = state
        .options
        .feature_gates
        .enabled("StorageVersionAPI", state.options.emulated_version);
    if storage_version_api {
        // Before readiness, as kube-apiserver's readiness waits for the storage version manager.
        let now = crate::controllers::identity::micro_time(time::OffsetDateTime::now_utc());
        crate::controllers::storage_version::publish(state.store.as_ref(), &builtin, &state.server_id, &now)
            .await;
    }

    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let mvp = crate::server::mvp::peer_proxy::install(&state, &mut tasks, &cancel).await?;
    let app = crate::chain::handler_chain(state.clone(), authenticator, mvp);
    let crash = CancellationToken::new();
    let accept = tokio::spawn(accept_loop(
        listener,
        acceptor,
        app,
        cancel.clone(),
        crash.clone(),
    ));
    tasks.spawn(lease_controller.run(cancel.clone()));
    if let Some(rbac) = state.options.authorizer.rbac() {
        tasks.spawn(crate::chain::rbac::run_controller(
            state.store.clone(),
            rbac.clone(),
            cancel.clone(),
        ));
    }
    tasks.spawn(crate::controllers::lease_gc::run_identity_lease_gc(
        state.store.clone(),
        state.options.identity_lease_gc_period,
        cancel.clone(),
    ));
    if storage_version_api {
        // kube-controller-manager's storageversiongc; the fake plays the whole control plane.
        tasks.spawn(crate::controllers::storage_version_gc::run_storage_version_gc(
            state.store.clone(),
            state.options.storage_version_gc_period,
            cancel.clone(),
        ));
    }
    tasks.spawn(crd::run_crd_controller(
        state.store.clone(),
        builtin,
        served_tx.clone(),
        cancel.clone(),
    ));
    if state.options.mvp_gate_enabled() {
        // Upstream runs the peer endpoint reconciler whenever the gate is on, even without --peer-ca-file.
        let reconciler = PeerEndpointReconciler::new(state.clone()).with_timing(
            state.options.peer_endpoint_ttl,
            state.options.peer_endpoint_refresh,
        );
        tasks.spawn(reconciler.run(cancel.clone()));
    }
    tracing::info!(server_id = %state.server_id, addr = %local_addr, "fake kube-apiserver listening");
    Ok(RunningServer {
        state,
        cancel,
        crash,
        accept: Some(accept),
        tasks,
        served_tx,
    })
}

/// kube-apiserver's `MaxHeaderBytes` (`1 << 20`): the request headers one request may carry, over
/// HTTP/1.1 and HTTP/2 (hyper's defaults are about 400 KiB and 16 KiB).
const MAX_HEADER_BYTES: usize = 1 << 20;

/// Concurrent HTTP/2 streams per connection: kube-apiserver sets `--http2-max-streams-per-connection`
/// to 1000 (hyper's default, 200, lets 200 open watches of one client stall all its other requests).
const HTTP2_MAX_STREAMS_PER_CONNECTION: u32 = 1000;

/// How many header fields an HTTP/1.1 request may have (Go counts bytes only; hyper's default is 100).
const MAX_HEADER_FIELDS: usize = 16 * 1024;

/// Go's `tls.RequestClientCert`: a client certificate is asked for (with the client CAs' names as
/// hints) and, when one is sent, the client must prove it holds its key; whether the chain is
/// trusted, current or from the right CA is the authenticators' question, answered per request.
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<rustls::DistinguishedName>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl RequestClientCert {
    fn new(roots: &rustls::RootCertStore) -> Self {
        Self {
            hints: roots.subjects(),
            algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        }
    }
}

impl rustls::server::danger::ClientCertVerifier for RequestClientCert {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn server_tls_config(options: &ServerOptions) -> Result<ServerConfig, ServerError> {
    let (Some(cert_file), Some(key_file)) =
        (&options.flags.tls_cert_file, &options.flags.tls_private_key_file)
    else {
        return Err(ServerError::ServingCert(
            "--tls-cert-file and --tls-private-key-file are required".into(),
        ));
    };
    let chain = read_pem_certs(cert_file)?;
    let key_pem = std::fs::read(key_file)
        .map_err(|e| ServerError::ServingCert(format!("failed to read {}: {e}", key_file.display())))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        ServerError::ServingCert(match e {
            pem::Error::NoItemsFound => format!("{}: no private key found", key_file.display()),
            e => format!("{}: {e}", key_file.display()),
        })
    })?;

    // As kube-apiserver (`tls.RequestClientCert`): ask for a client certificate, naming the client
    // CAs as hints, but verify nothing in the handshake beyond the client's proof that it holds the
    // key. The authenticators verify the chain against the CA each trusts; a chain none accepts is a
    // 401 Status, not a failed handshake.
    let mut roots = rustls::RootCertStore::empty();
    for path in [
        &options.flags.client_ca_file,
        &options.flags.requestheader_client_ca_file,
    ]
    .into_iter()
    .flatten()
    {
        for cert in read_pem_certs(path)? {
            roots
                .add(cert)
                .map_err(|e| ServerError::ServingCert(format!("{}: {e}", path.display())))?;
        }
    }
    let builder = if roots.is_empty() {
        ServerConfig::builder().with_no_client_auth()
    } else {
        ServerConfig::builder().with_client_cert_verifier(Arc::new(RequestClientCert::new(&roots)))
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| ServerError::ServingCert(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Go's `http.Server` accept back-off bounds.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// See [`ACCEPT_BACKOFF_MIN`].
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// kube-apiserver's `ReadHeaderTimeout` (`secure_serving.go`: 32 s, just below the request timeout's
/// upper bound).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: crate::chain::HandlerChain,
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
            let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
            else {
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
            let svc = app.map_request(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(info.clone());
                req.map(Body::new)
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // kube-apiserver's ReadHeaderTimeout: a client that never finishes its request headers is
            // cut off instead of holding a connection for good.
            builder
                .http1()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                // Go's http.Server reads MaxHeaderBytes (kube-apiserver: 1 MiB) plus 4 KiB of slack,
                // with no limit on the number of fields; beyond that, 431.
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
