//! One fake kube-apiserver: its configuration ([`config`]), shared state (`ServerState`), listener and
//! TLS, the wiring of the Mixed Version Proxy (`mvp`), and its lifecycle.
//!
//! [`start`] binds the secure port, builds the handler chain (`crate::chain::handler_chain`) and starts
//! the background controllers ([`crate::controllers`]) a real kube-apiserver runs for the proxy: the
//! identity lease, the peer endpoint record, the StorageVersion and CRD controllers.
//! [`RunningServer::shutdown`] stops it gracefully (cleaning up what it published);
//! [`RunningServer::kill`] stops it the way a crash does.

pub(crate) mod accepted_flags;
pub mod config;
mod listener;
pub mod logging;
pub(crate) mod mvp;
mod tls;
mod unread_body;

pub use crate::chain::request_log::ServedRequest;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use mvp_core::PeerAggregatedDiscoveryHandler;

use crate::api::catalog::{CatalogError, ServedApis};
use crate::api::discovery::DiscoveryContext;
use crate::api::metrics::ServerMetrics;
use crate::chain::authentication::{AuthSetupError, Authenticator};
use crate::controllers::crd;
use crate::controllers::identity;
use crate::controllers::lease::{IdentityLeaseController, OwnLease};
use crate::server::config::ServerOptions;
use crate::server::mvp::install::{PeerProxy, ProxyInputs};
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
    PeerProxy(#[from] crate::server::mvp::install::PeerProxyError),
    /// The audit log cannot be opened.
    #[error(transparent)]
    Audit(#[from] crate::chain::audit::AuditError),
    /// The secure port could not be bound.
    #[error("failed to listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Everything the handlers of one server share.
pub(crate) struct ServerState {
    /// The validated configuration.
    pub(crate) options: ServerOptions,
    /// The APIServerID (also the identity lease name).
    pub(crate) server_id: String,
    /// `spec.holderIdentity` of this run's identity lease: `<server ID>_<uuid>`.
    pub(crate) holder_identity: String,
    /// The cluster's shared store.
    pub(crate) store: Arc<dyn Store>,
    /// What this server serves now (built-ins plus CRDs); updated by background tasks.
    pub(crate) served: watch::Receiver<Arc<ServedApis>>,
    /// Set once the identity lease is published (`/readyz`).
    pub(crate) ready: Arc<AtomicBool>,
    /// `--max-requests-inflight` and `--max-mutating-requests-inflight` (`None`: no limit), applied
    /// when API Priority and Fairness is off.
    pub(crate) inflight: crate::chain::inflight::InFlightLimits,
    /// API Priority and Fairness (`--enable-priority-and-fairness`), sharing the max-in-flight values'
    /// sum as its seats.
    pub(crate) flow_control: Option<crate::chain::flow_control::FlowControl>,
    /// Set once this server's peer endpoint record is first written (gate on): until then no peer
    /// can reach it, so `/readyz` waits for it too.
    pub(crate) peer_endpoint_published: Arc<AtomicBool>,
    /// Prometheus metrics of this server.
    pub(crate) metrics: ServerMetrics,
    /// Which users this server believed it served.
    pub(crate) requests: crate::chain::request_log::RequestLog,
    /// The audit log, when `--audit-log-path` and `--audit-policy-file` are set.
    pub(crate) audit: Option<crate::chain::audit::AuditLog>,
    /// The address the server listens on.
    pub(crate) local_addr: SocketAddr,
    /// What discovery documents need to know about this server.
    pub(crate) discovery: DiscoveryContext,
    /// `/openapi/v2` and `/openapi/v3`, cached per served API set.
    pub(crate) openapi: crate::api::openapi::OpenApiService,
    /// The Mixed Version Proxy, when enabled: its resolver, view of peer addresses and readiness
    /// checks (`/readyz` waits for them).
    pub(crate) proxy: Option<PeerProxy>,
    /// The bootstrap RBAC policy and its snapshot, kept whatever the authorization mode (the
    /// authorizer's own in RBAC mode); `/readyz` waits for its bootstrap.
    pub(crate) rbac: Arc<crate::chain::rbac::RbacAuthorizer>,
    /// The authenticator union (TokenRequest signs with its service-account key, TokenReview asks it).
    pub(crate) authenticator: Arc<Authenticator>,
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
    pub(crate) fn is_ready(&self) -> bool {
        self.failed_readiness_check().is_none()
    }

    /// [`Self::failed_readiness_check`] on a fresh view of the peers' addresses and receipts (read
    /// from the store now, while the checks have not all passed yet): what `/readyz` answers.
    pub(crate) async fn check_readiness(&self) -> Option<&'static str> {
        if self.is_ready() {
            return None;
        }
        if let Some(proxy) = &self.proxy {
            proxy.peers_know_server.refresh(self.store.as_ref()).await;
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
    pub(crate) fn failed_readiness_check(&self) -> Option<&'static str> {
        if !self.rbac.is_ready() {
            Some("rbac/bootstrap-roles")
        } else if !self.ready.load(Ordering::Acquire) {
            Some("start-kube-apiserver-identity-lease-controller")
        } else if !self.proxy_synced() {
            Some("unknown-version-proxy-filter")
        } else if self.options.mvp_gate_enabled() && !self.peer_endpoint_published.load(Ordering::Acquire) {
            Some("peer-endpoint-reconciler-controller")
        } else if !self.proxy.as_ref().is_none_or(|proxy| proxy.readiness.is_ready()) {
            Some("unknown-version-proxy-filter")
        } else if !self.proxy.as_ref().is_none_or(|proxy| {
            proxy
                .peers_know_server
                .is_ready(&self.server_id, &self.holder_identity)
        }) {
            Some("peer-discovery-receipts")
        } else {
            None
        }
    }

    /// Whether the identity lease is published and the proxy (if any) has synced its caches once:
    /// what the peer endpoint reconciler waits for, as upstream writes the record once started.
    pub(crate) fn is_started(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.proxy_synced()
    }

    /// Whether the proxy (if any) has synced its caches once, as upstream's
    /// `unknown-version-proxy-filter` post-start hook waits for (docs/mvp-behaviour.md §1.3 step 4).
    fn proxy_synced(&self) -> bool {
        self.proxy
            .as_ref()
            .is_none_or(|proxy| proxy.readiness.has_synced())
    }

    /// The proxy's resolver: which peers it would send a resource's requests to.
    pub(crate) fn proxy_resolver(&self) -> Option<Arc<dyn mvp_core::PeerResolver>> {
        self.proxy.as_ref().map(|proxy| proxy.resolver.clone())
    }

    /// The proxy's view of peer addresses (tests and tools observe it).
    pub(crate) fn proxy_endpoints(&self) -> Option<Arc<dyn mvp_core::PeerEndpoints>> {
        self.proxy
            .as_ref()
            .map(|proxy| proxy.endpoints.clone() as Arc<dyn mvp_core::PeerEndpoints>)
    }
}

impl crate::chain::ServerContext for ServerState {
    fn authorizer(&self) -> &crate::chain::authorization::Authorizer {
        &self.options.authorizer
    }

    fn inflight(&self) -> &crate::chain::inflight::InFlightLimits {
        &self.inflight
    }

    fn flow_control(&self) -> Option<&crate::chain::flow_control::FlowControl> {
        self.flow_control.as_ref()
    }

    fn request_timeout(&self) -> Duration {
        self.options.request_timeout
    }

    fn requests(&self) -> &crate::chain::request_log::RequestLog {
        &self.requests
    }

    fn audit(&self) -> Option<&crate::chain::audit::AuditLog> {
        self.audit.as_ref()
    }

    fn metrics(&self) -> &ServerMetrics {
        &self.metrics
    }

    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn served(&self) -> Arc<ServedApis> {
        self.served.borrow().clone()
    }

    fn binary_version(&self) -> crate::api::catalog::KubeVersion {
        self.options.binary_version
    }

    fn emulated_version(&self) -> crate::api::catalog::KubeVersion {
        self.options.emulated_version
    }

    fn feature_enabled(&self, name: &str) -> bool {
        self.options
            .feature_gates
            .enabled(name, self.options.emulated_version)
    }

    fn service_cidr(&self) -> crate::api::rest::defaults::service_ip::ServiceCidr {
        self.options.service_cidr
    }

    fn watch_bookmark_interval(&self) -> std::time::Duration {
        self.options.watch_bookmark_interval
    }

    fn webhook_service_addresses(&self) -> Arc<crate::api::rest::admission::ServiceAddresses> {
        self.options.webhook_service_addresses.clone()
    }

    fn discovery(&self) -> &DiscoveryContext {
        &self.discovery
    }

    fn openapi(&self) -> &crate::api::openapi::OpenApiService {
        &self.openapi
    }

    fn authenticator(&self) -> &Authenticator {
        &self.authenticator
    }

    async fn check_readiness(&self) -> Option<&'static str> {
        ServerState::check_readiness(self).await
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

    /// `spec.holderIdentity` of this run's identity lease (`<server ID>_<uuid>`): tells this run of
    /// the server from an earlier or later one with the same APIServerID.
    pub fn holder_identity(&self) -> &str {
        &self.state.holder_identity
    }

    /// A copy of the requests this server served lately, oldest first, each with the user it
    /// believed it served it for and whether it came proxied from a peer. The log is bounded (it
    /// keeps the last 1,024 requests), so compare lengths only between two calls close together.
    pub fn served_requests(&self) -> Vec<ServedRequest> {
        self.state.requests.snapshot()
    }

    /// The Mixed Version Proxy's view of its peers' addresses, as it refreshes it from their peer
    /// endpoint records; `None` when the server runs no proxy (feature gate off).
    pub fn proxy_endpoints(&self) -> Option<Arc<dyn mvp_core::PeerEndpoints>> {
        self.state.proxy_endpoints()
    }

    /// Shared state (configuration, store, metrics, request log) for the crate's own use.
    pub(crate) fn state(&self) -> &Arc<ServerState> {
        &self.state
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
            crate::controllers::peer_endpoint::remove(self.state.store.as_ref(), &self.state.server_id).await;
            tokio::time::sleep(2 * crate::server::mvp::peer_endpoints::ENDPOINT_REFRESH).await;
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
        crate::controllers::peer_endpoint::remove(self.state.store.as_ref(), &self.state.server_id).await;
        // Upstream's RemoveEndpoints: this server's master lease and address go with it.
        let public = SocketAddr::new(self.state.options.public_address(), self.state.local_addr.port());
        if let Err(err) = crate::controllers::kubernetes_service::reconcile(
            self.state.store.as_ref(),
            &self.state.options.service_cidr,
            public,
            false,
        )
        .await
        {
            tracing::warn!(error = %err, "could not remove this server from the default/kubernetes endpoints");
        }
        if self.state.options.emulated_version.minor >= 35 {
            IdentityLeaseController::delete_own_lease(
                self.state.store.clone(),
                &self.state.server_id,
                &self.state.holder_identity,
            )
            .await;
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
    let acceptor = TlsAcceptor::from(Arc::new(tls::server_tls_config(&options)?));
    let authenticator = Arc::new(Authenticator::new(
        &options.flags.authentication(),
        options.binary_version,
    )?);
    let builtin = Arc::new(ServedApis::builtin(
        options.emulated_version,
        &options.runtime_config,
        &options.feature_gates,
    )?);
    let (served_tx, served) = watch::channel(builtin.clone());
    let served_tx = Arc::new(served_tx);
    seed_store(&options, store.as_ref()).await?;
    let (listener, local_addr) = bind(&options).await?;

    // The bootstrap controller's `default/kubernetes` Service, with this server among its endpoints.
    let public = SocketAddr::new(options.public_address(), local_addr.port());
    if let Err(e) =
        crate::controllers::kubernetes_service::ensure(store.as_ref(), &options.service_cidr, public).await
    {
        tracing::warn!(error = %e, "could not publish the default/kubernetes Service");
    }

    let server_id = identity::server_id(&options.hostname);
    let holder_identity = format!("{server_id}_{}", uuid::Uuid::new_v4());
    let mut discovery = DiscoveryContext::new(
        options.emulated_version,
        options.feature_gates.clone(),
        public.to_string(),
    );
    let metrics = ServerMetrics::new();
    let peer_aggregated = peer_aggregated_handler(&options, &server_id, &metrics)?;
    discovery.peer_aggregated = peer_aggregated.clone();
    let (inflight, flow_control) = concurrency_limits(&options);
    let ready: Arc<AtomicBool> = Arc::default();
    let lease_controller =
        identity_lease(&options, &store, &server_id, &holder_identity, local_addr, &ready).await;
    let storage_version_api = options
        .feature_gates
        .enabled("StorageVersionAPI", options.emulated_version);
    if storage_version_api {
        // Before readiness, as kube-apiserver's readiness waits for the storage version manager.
        let now = crate::controllers::identity::micro_time(time::OffsetDateTime::now_utc());
        crate::controllers::storage_version::publish(store.as_ref(), &builtin, &server_id, &now).await;
    }

    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let installed = crate::server::mvp::install::install(
        ProxyInputs {
            options: &options,
            store: &store,
            server_id: &server_id,
            served: &served,
            registry: metrics.registry(),
            peer_aggregated: peer_aggregated.as_ref(),
        },
        &mut tasks,
        &cancel,
    )
    .await?;
    let (mvp, proxy) = installed.unzip();
    let rbac = options.authorizer.rbac().cloned().unwrap_or_default();
    // As kube-apiserver: a log path without a policy audits nothing.
    let audit = match (&options.flags.audit_log_path, &options.audit_policy) {
        (Some(path), Some(policy)) => Some(crate::chain::audit::AuditLog::open(path, policy.clone())?),
        _ => None,
    };
    let state = Arc::new(ServerState {
        proxy,
        discovery,
        openapi: Default::default(),
        metrics,
        options,
        server_id,
        holder_identity,
        store,
        served,
        ready,
        peer_endpoint_published: Arc::default(),
        inflight,
        flow_control,
        requests: Default::default(),
        audit,
        local_addr,
        rbac,
        authenticator: authenticator.clone(),
    });
    let app = crate::chain::handler_chain(state.clone(), authenticator, mvp);
    let crash = CancellationToken::new();
    let accept = tokio::spawn(listener::accept_loop(
        listener,
        acceptor,
        app,
        cancel.clone(),
        crash.clone(),
    ));
    tasks.spawn(lease_controller.run(cancel.clone()));
    let controllers = Controllers {
        state: &state,
        cancel: &cancel,
    };
    controllers.spawn(&mut tasks, builtin, served_tx, storage_version_api);
    tracing::info!(server_id = %state.server_id, addr = %local_addr, "fake kube-apiserver listening");
    Ok(RunningServer {
        state,
        cancel,
        crash,
        accept: Some(accept),
        tasks,
    })
}

/// What a server puts in its store before it serves: the system namespaces and the custom resources
/// of `--custom-resources-file`.
async fn seed_store(options: &ServerOptions, store: &dyn Store) -> Result<(), ServerError> {
    if let Err(e) = crate::api::rest::lifecycle::ensure_system_namespaces(store).await {
        tracing::warn!(error = %e, "could not create the system namespaces");
    }
    if let Some(path) = &options.flags.custom_resources_file {
        crd::create_crds(
            store,
            crd::read_custom_resources_file(path)?,
            options.binary_version,
        )
        .await;
    }
    Ok(())
}

/// The listener on `--bind-address`:`--secure-port`, and the address it got (the port may be 0).
async fn bind(options: &ServerOptions) -> Result<(TcpListener, SocketAddr), ServerError> {
    let bind = SocketAddr::new(options.flags.bind_address, options.flags.secure_port);
    let listener = TcpListener::bind(bind)
        .await
        .map_err(|source| ServerError::Bind { addr: bind, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr: bind, source })?;
    Ok((listener, local_addr))
}

/// The peer-aggregated discovery handler, with its metrics: served from 1.35 with the proxy's gate on.
fn peer_aggregated_handler(
    options: &ServerOptions,
    server_id: &str,
    metrics: &ServerMetrics,
) -> Result<Option<Arc<PeerAggregatedDiscoveryHandler>>, ServerError> {
    if !(options.mvp_gate_enabled() && options.emulated_version.minor >= 35) {
        return Ok(None);
    }
    let counters = mvp_core::PeerAggregatedMetrics::register(metrics.registry())
        .map_err(crate::server::mvp::install::PeerProxyError::from)?;
    let handler = PeerAggregatedDiscoveryHandler::new(server_id.to_owned()).with_metrics(counters);
    Ok(Some(Arc::new(handler)))
}

/// The in-flight limits of `--max-requests-inflight` and `--max-mutating-requests-inflight`, and
/// priority and fairness sharing their sum (`--enable-priority-and-fairness`).
fn concurrency_limits(
    options: &ServerOptions,
) -> (
    crate::chain::inflight::InFlightLimits,
    Option<crate::chain::flow_control::FlowControl>,
) {
    let inflight = crate::chain::inflight::InFlightLimits::new(
        options.flags.max_requests_inflight,
        options.flags.max_mutating_requests_inflight,
    );
    let flow_control = options.flags.enable_priority_and_fairness.then(|| {
        crate::chain::flow_control::FlowControl::new(
            options.flags.max_requests_inflight + options.flags.max_mutating_requests_inflight,
        )
    });
    (inflight, flow_control)
}

/// This server's identity lease controller, its lease already written: the lease exists before
/// anything names this server (StorageVersion entries of a server without lease are garbage).
async fn identity_lease(
    options: &ServerOptions,
    store: &Arc<dyn Store>,
    server_id: &str,
    holder_identity: &str,
    local_addr: SocketAddr,
    ready: &Arc<AtomicBool>,
) -> IdentityLeaseController {
    let lease_controller = IdentityLeaseController::new(
        OwnLease {
            server_id: server_id.to_owned(),
            holder_identity: holder_identity.to_owned(),
            hostname: options.hostname.clone(),
            duration: options.identity_lease_duration,
            renew_interval: options.identity_lease_renew_interval,
            peer_address: options
                .mvp_gate_enabled()
                .then(|| options.peer_address(local_addr.port()).to_string()),
            delete_stale: options.emulated_version.minor >= 35,
        },
        store.clone(),
        ready.clone(),
    );
    lease_controller.initialize().await;
    lease_controller
}

/// The control-plane loops a started server runs until `cancel`.
struct Controllers<'a> {
    state: &'a Arc<ServerState>,
    cancel: &'a CancellationToken,
}

impl Controllers<'_> {
    /// RBAC bootstrap, identity lease GC, StorageVersion GC (with the API), CRDs, the peer endpoint
    /// (with the proxy's gate) and the `kubernetes` Service's endpoints.
    fn spawn(
        &self,
        tasks: &mut JoinSet<()>,
        builtin: Arc<ServedApis>,
        served_tx: Arc<watch::Sender<Arc<ServedApis>>>,
        storage_version_api: bool,
    ) {
        let (state, cancel) = (self.state, self.cancel);
        // The bootstrap roles exist whatever the authorization mode (kube-apiserver's rbac storage
        // installs its post-start hook with the API group); RBAC mode also decides on the policy kept
        // here.
        tasks.spawn(crate::chain::rbac::run_controller(
            state.store.clone(),
            state.rbac.clone(),
            cancel.clone(),
        ));
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
            served_tx,
            cancel.clone(),
        ));
        if state.options.mvp_gate_enabled() {
            // Upstream runs the peer endpoint reconciler whenever the gate is on, even without
            // --peer-ca-file.
            tasks.spawn(self.peer_endpoint_task().run(cancel.clone().cancelled_owned()));
        }
        // The lease endpoint reconciler keeps this server among the `kubernetes` Service's endpoints.
        tasks.spawn(crate::controllers::kubernetes_service::run_reconciler(
            state.store.clone(),
            state.options.service_cidr,
            SocketAddr::new(state.options.public_address(), state.local_addr.port()),
            crate::controllers::kubernetes_service::RECONCILE_INTERVAL,
            cancel.clone(),
        ));
    }

    /// mvp-core's task over this server's store: written once the server has started (identity lease
    /// and proxy caches), as upstream waits for `/readyz`; `/readyz` also waits for that first write,
    /// since peers cannot reach this server before it. The shutdown sequence removes it.
    fn peer_endpoint_task(&self) -> mvp_core::PeerEndpointTask {
        let state = self.state;
        let started = state.clone();
        let cluster = Arc::new(crate::controllers::cluster_api::StoreCluster(state.store.clone()));
        mvp_core::PeerEndpointTask::new(
            cluster,
            state.server_id.clone(),
            state.options.peer_address(state.local_addr.port()),
            Arc::new(move || started.is_started()),
        )
        .with_timing(
            state.options.peer_endpoint_ttl,
            state.options.peer_endpoint_refresh,
        )
        .with_published(state.peer_endpoint_published.clone())
        .keep_on_stop()
    }
}

#[cfg(test)]
impl ServerState {
    /// A server's state as [`start`] builds it, on a fresh in-memory store and without a listener, TLS,
    /// background controllers or proxy, for in-memory tests of the handler chain: `args` are the
    /// server's flags (dummy serving-certificate paths are added; nothing reads them). Returns the state
    /// and its authenticator, what [`crate::chain::handler_chain`] takes.
    pub(crate) async fn for_test(args: &[&str]) -> (Arc<Self>, Arc<Authenticator>) {
        let mut words = vec!["--tls-cert-file=unused.crt", "--tls-private-key-file=unused.key"];
        words.extend_from_slice(args);
        let flags = crate::server::config::ServerFlags::from_args(words).expect("test flags parse");
        let options = flags.validate().expect("test flags are valid");
        let store: Arc<dyn Store> = Arc::new(crate::store::MemoryStore::new());
        seed_store(&options, store.as_ref()).await.expect("store seeds");
        let authenticator = Arc::new(
            Authenticator::new(&options.flags.authentication(), options.binary_version)
                .expect("authenticator builds"),
        );
        let builtin = ServedApis::builtin(
            options.emulated_version,
            &options.runtime_config,
            &options.feature_gates,
        )
        .expect("built-in APIs");
        let (_, served) = watch::channel(Arc::new(builtin));
        let local_addr = SocketAddr::from(([127, 0, 0, 1], 6443));
        let discovery = DiscoveryContext::new(
            options.emulated_version,
            options.feature_gates.clone(),
            local_addr.to_string(),
        );
        let (inflight, flow_control) = concurrency_limits(&options);
        let rbac = options.authorizer.rbac().cloned().unwrap_or_default();
        let state = Arc::new(ServerState {
            proxy: None,
            discovery,
            openapi: Default::default(),
            metrics: ServerMetrics::new(),
            server_id: "kube-apiserver-test".to_owned(),
            holder_identity: "kube-apiserver-test_0".to_owned(),
            options,
            store,
            served,
            ready: Arc::default(),
            peer_endpoint_published: Arc::default(),
            inflight,
            flow_control,
            requests: Default::default(),
            audit: None,
            local_addr,
            rbac,
            authenticator: authenticator.clone(),
        });
        (state, authenticator)
    }
}
