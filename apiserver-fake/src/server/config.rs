//! Command-line flags of one fake server, with kube-apiserver's names, and their validation.
//!
//! [`ServerFlags`] is what a user types; [`ServerFlags::validate`] turns it into [`ServerOptions`], the
//! checked configuration a [`crate::server`] starts from. Validation messages copy kube-apiserver's where it
//! has one (docs/mvp-behaviour.md §1.1), so scripts written against the real server read the same errors.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use std::sync::Arc;

use crate::api::catalog::{FeatureGates, KubeVersion, RuntimeConfig};
use crate::chain::authentication::AuthenticationOptions;
#[cfg(feature = "etcd")]
use crate::store::{EtcdConfig, EtcdStore};
use crate::store::{MemoryStore, Store, StoreResult};

/// The feature gate of the Mixed Version Proxy.
pub const MVP_FEATURE_GATE: &str = "UnknownVersionInteroperabilityProxy";

/// Flags of one fake kube-apiserver. Names and meanings follow kube-apiserver; the fake's own flags are
/// marked as such.
#[derive(Debug, Clone, Args)]
pub struct ServerFlags {
    /// The port on which to serve HTTPS with authentication and authorization (0 picks a free port).
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// The IP address on which to listen for the --secure-port port.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub bind_address: IpAddr,
    /// The IP address on which to advertise the apiserver to members of the cluster.
    #[arg(long)]
    pub advertise_address: Option<IpAddr>,
    /// File containing the default x509 certificate for HTTPS.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// If set, any request presenting a client certificate signed by one of the authorities in the
    /// client-ca-file is authenticated with an identity corresponding to the CommonName of the client
    /// certificate.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// If set, the file that will be used to secure the secure port of the API server via token
    /// authentication (kube-apiserver's static token CSV: token,user,uid,"group1,group2").
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Enables anonymous requests to the secure port. The fake has no RBAC to restrict
    /// `system:anonymous`, so this defaults to false (kube-apiserver defaults to true and relies on RBAC).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// Root certificate bundle to use to verify client certificates on incoming requests before trusting
    /// usernames in headers specified by --requestheader-username-headers.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// List of client certificate common names to allow to provide usernames in headers. If empty, any
    /// client certificate validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,
    /// Ordered list of plug-ins to do authorization on the secure port (the help text lists the modes
    /// the fake implements, from [`crate::chain::authorization::AuthorizationMode::ALL`]).
    #[arg(long, default_value = "AlwaysAllow",
          help = crate::chain::authorization::AuthorizationMode::flag_help())]
    pub authorization_mode: String,
    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_username_headers: Vec<String>,
    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,
    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_group_headers: Vec<String>,
    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// Client certificate used to prove the identity of the aggregator or kube-apiserver when it must call
    /// out during a request (here: when it proxies to a peer).
    #[arg(long)]
    pub proxy_client_cert_file: Option<PathBuf>,
    /// Private key for the client certificate in --proxy-client-cert-file.
    #[arg(long)]
    pub proxy_client_key_file: Option<PathBuf>,
    /// If set and the UnknownVersionInteroperabilityProxy feature gate is enabled, this file is used to
    /// verify serving certificates of peer kube-apiservers.
    #[arg(long)]
    pub peer_ca_file: Option<PathBuf>,
    /// If set and the UnknownVersionInteroperabilityProxy feature gate is enabled, this IP is used by peer
    /// kube-apiservers to proxy requests to this kube-apiserver.
    #[arg(long)]
    pub peer_advertise_ip: Option<IpAddr>,
    /// If set and the UnknownVersionInteroperabilityProxy feature gate is enabled, this port is used by
    /// peer kube-apiservers to proxy requests to this kube-apiserver.
    #[arg(long)]
    pub peer_advertise_port: Option<u16>,
    /// A set of key=value pairs that describe feature gates for alpha/experimental features.
    #[arg(long, default_value = "")]
    pub feature_gates: String,
    /// A set of key=value pairs that enable or disable built-in APIs (e.g. `batch/v1=false`, `api/all=true`).
    #[arg(long, default_value = "")]
    pub runtime_config: String,
    /// The Kubernetes version this server emulates (`1.35` or `kube=1.35`); at most three minors below
    /// the binary version, as kube-apiserver allows.
    #[arg(long)]
    pub emulated_version: Option<String>,
    /// (fake) The Kubernetes version this fake binary is, 1.28 to 1.36.
    #[arg(long, default_value = "1.36")]
    pub kubernetes_version: String,
    /// (fake) Hostname the server ID and identity lease name are derived from (default: the machine's).
    #[arg(long)]
    pub hostname: Option<String>,
    /// (fake) A JSON or YAML file of CustomResourceDefinition objects to create at startup.
    #[arg(long)]
    pub custom_resources_file: Option<PathBuf>,
    /// (fake) How the proxy learns which peer serves what: `storage-version` (upstream alpha, 1.28–1.32)
    /// or `discovery` (upstream 1.33+, beta in 1.36). Default: by the emulated version.
    #[arg(long)]
    pub peer_resolution_mode: Option<PeerResolutionModeFlag>,
    /// (fake) Identity lease duration in seconds (upstream: 3600).
    #[arg(long, default_value_t = 3600)]
    pub identity_lease_duration_seconds: u64,
    /// (fake) Identity lease renew interval in seconds (upstream: 10).
    #[arg(long, default_value_t = 10)]
    pub identity_lease_renew_interval_seconds: u64,
    /// (fake) How often expired identity leases (renewTime + leaseDurationSeconds in the past) are deleted
    /// from kube-system, in seconds (upstream: 3600). With the other knobs it bounds how long a crashed
    /// peer stays known.
    #[arg(long, default_value_t = 3600)]
    pub identity_lease_gc_period_seconds: u64,
    /// (fake) TTL of this server's peer endpoint record in seconds (upstream: 15). A crashed server's
    /// address disappears after at most this long.
    #[arg(long, default_value_t = 15)]
    pub peer_endpoint_ttl_seconds: u64,
    /// (fake) Refresh interval of the peer endpoint record in seconds (upstream: 10); must be below the TTL.
    #[arg(long, default_value_t = 10)]
    pub peer_endpoint_refresh_seconds: u64,
    /// (fake) Refresh interval of the proxy's local discovery cache in seconds (upstream: 1800). CRDs and
    /// aggregated APIs created in between are kept local by the group-version exclusion.
    #[arg(long, default_value_t = 1800)]
    pub local_discovery_refresh_seconds: u64,
    /// (fake) How long the group versions of a deleted CRD or aggregated APIService stay excluded from
    /// peer discovery data, in seconds (upstream: 300).
    #[arg(long, default_value_t = 300)]
    pub gv_exclusion_grace_period_seconds: u64,
    /// (fake) How long the proxy keeps what a peer served after its identity lease is deleted, in
    /// seconds (Discovery mode; 0 forgets it at once, as upstream). A restarting 1.35+ server deletes
    /// its crashed predecessor's lease before creating its own: kept, the peer's resources are 503s
    /// while it comes back instead of false 404s.
    #[arg(long, default_value_t = 5)]
    pub departed_peer_grace_seconds: u64,
    /// (fake) How often the StorageVersion garbage collector (kube-controller-manager's, run by the fake)
    /// re-checks StorageVersion entries against identity leases, in seconds; it also runs on every lease
    /// or StorageVersion change.
    #[arg(long, default_value_t = 60)]
    pub storage_version_gc_period_seconds: u64,
    /// (fake) How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK, a Go duration
    /// (upstream: about every minute, its cacher's bookmark frequency).
    #[arg(long, default_value = "1m0s")]
    pub watch_bookmark_interval: String,
    /// An optional field indicating the duration a handler must keep a request open before timing it
    /// out. This is the default request timeout for requests but may be overridden by flags such as
    /// --min-request-timeout for specific types of requests. (kube-apiserver's flag and default; a Go
    /// duration such as `1m0s`.)
    #[arg(long, default_value = "1m0s")]
    pub request_timeout: String,
    /// The maximum number of non-mutating requests in flight at a given time. When the server exceeds
    /// this, it rejects requests. Zero for no limit. (kube-apiserver's flag and default.)
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// The maximum number of mutating requests in flight at a given time. When the server exceeds
    /// this, it rejects requests. Zero for no limit. (kube-apiserver's flag and default.)
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// If true, replace the max-in-flight handler with an enhanced one that queues and dispatches with
    /// priority and fairness. (kube-apiserver's flag and default: the two max-in-flight values then
    /// set the server's total concurrency, which the bootstrap priority levels share.)
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_priority_and_fairness: bool,
    /// List of etcd servers to connect with (scheme://ip:port), comma separated. (kube-apiserver's
    /// flag; without it the fake keeps objects in a store of its own process, in memory.) Needs the
    /// binary built with the `etcd` feature.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The prefix to prepend to all resource paths in etcd. (kube-apiserver's flag and default.)
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,
    /// The media type to use to store objects in storage: application/json or
    /// application/vnd.kubernetes.protobuf (built-in kinds; custom resources are always JSON). Values in
    /// either are read. (kube-apiserver's flag and default.)
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    pub storage_media_type: crate::store::StorageMediaType,
    /// Enable watch caching in the apiserver. (kube-apiserver's flag and default; the fake caches only
    /// in front of etcd, docs/decisions.md §21.)
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_cache: bool,
    /// Watch cache size settings for some resources (pods, nodes, etc.), comma separated. The
    /// individual setting format: resource[.group]#size, where resource is lowercase plural (no
    /// version), group is omitted for resources of apiVersion v1 (the legacy core API) and included
    /// for others, and size is a number. The only meaningful size setting to supply here is zero,
    /// which means to disable watch caching for the associated resource; all non-zero values are
    /// equivalent and mean to not disable watch caching for that resource. (kube-apiserver's flag.)
    #[arg(long, value_delimiter = ',')]
    pub watch_cache_sizes: Vec<String>,
    /// A CIDR notation IP range from which to assign service cluster IPs. (kube-apiserver's flag; the
    /// default is kubeadm's, kube-apiserver has none. The fake serves one, single-stack range.)
    #[arg(long, default_value = "10.96.0.0/12")]
    pub service_cluster_ip_range: String,
    /// Identifier of the service account token issuer (the `iss` claim of the tokens it issues). The
    /// first value issues; every value is accepted. (The fake defaults to
    /// `https://kubernetes.default.svc.cluster.local`, kube-apiserver requires the flag.)
    #[arg(long)]
    pub service_account_issuer: Vec<String>,
    /// File containing PEM-encoded x509 RSA or ECDSA private or public keys, used to verify
    /// ServiceAccount tokens. The file may contain multiple keys, and the flag may be repeated.
    #[arg(long)]
    pub service_account_key_file: Vec<PathBuf>,
    /// Path to the file that contains the current private key of the service account token issuer.
    /// (Without it the fake signs with a key it generates at start-up, valid on this server only.)
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Identifiers of the API. The service account token authenticator will validate that tokens used
    /// against the API are bound to at least one of these audiences (default: the issuers).
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// The maximum validity duration of a token created by the service account token issuer (a Go
    /// duration; none: no cap).
    #[arg(long)]
    pub service_account_max_token_expiration: Option<String>,
    /// If set, all requests coming to the apiserver will be logged to this file. '-' means standard
    /// out. (kube-apiserver's flag; JSON lines of audit.k8s.io/v1 Events, see `chain::audit`.)
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
    /// Path to the file that defines the audit policy configuration. (kube-apiserver's flag; without
    /// it nothing is audited.)
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,
    /// kube-apiserver flags the fake accepts without acting on them (kubelet, etcd TLS, admission).
    #[command(flatten, next_help_heading = "Accepted, inert flags")]
    pub accepted: crate::server::accepted_flags::AcceptedFlags,
    /// kube-apiserver's logging flags (`-v`, `--vmodule`, `--log-flush-frequency`, `--logging-format`).
    #[command(flatten, next_help_heading = "Logs flags")]
    pub logging: crate::server::logging::LoggingFlags,
    /// (fake) Reach the admission webhooks behind Service NAMESPACE/NAME at HOST:PORT (repeatable, or
    /// comma-separated): a Service's cluster IP does not route to a webhook outside a cluster, so
    /// envtest-style setups name the address here. Without it, a Service's `spec.externalName`, then its
    /// EndpointSlices' addresses are used. The TLS server name stays `NAME.NAMESPACE.svc`.
    #[arg(long, value_delimiter = ',', value_name = "NAMESPACE/NAME=HOST:PORT")]
    pub webhook_service_address: Vec<String>,
}

/// Values of `--peer-resolution-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerResolutionModeFlag {
    /// StorageVersion objects (upstream alpha).
    StorageVersion,
    /// Peers' aggregated discovery (upstream 1.33+).
    Discovery,
}

/// A checked configuration for one fake server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The flags as given (paths, names and lists are used as they are).
    pub flags: ServerFlags,
    /// The version of the fake binary.
    pub binary_version: KubeVersion,
    /// The version whose APIs and behaviour are served.
    pub emulated_version: KubeVersion,
    /// Parsed `--runtime-config`.
    pub runtime_config: RuntimeConfig,
    /// Parsed `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// The hostname the server ID derives from.
    pub hostname: String,
    /// How the proxy resolves peers.
    pub peer_resolution_mode: mvp_core::PeerResolutionMode,
    /// Identity lease duration.
    pub identity_lease_duration: Duration,
    /// Identity lease renew interval.
    pub identity_lease_renew_interval: Duration,
    /// Period of the expired identity lease garbage collector.
    pub identity_lease_gc_period: Duration,
    /// TTL of the peer endpoint record.
    pub peer_endpoint_ttl: Duration,
    /// Refresh interval of the peer endpoint record.
    pub peer_endpoint_refresh: Duration,
    /// Refresh interval of the proxy's local discovery cache.
    pub local_discovery_refresh: Duration,
    /// Grace period of the group versions of deleted CRDs/APIServices in the exclusion set.
    pub gv_exclusion_grace_period: Duration,
    /// How long a peer whose identity lease was deleted stays known.
    pub departed_peer_grace: Duration,
    /// Period of the StorageVersion garbage collector's full pass.
    pub storage_version_gc_period: Duration,
    /// `--request-timeout`: the deadline of every request that is not long-running.
    pub request_timeout: Duration,
    /// `--watch-bookmark-interval`.
    pub watch_bookmark_interval: Duration,
    /// The parsed `--authorization-mode`.
    pub(crate) authorizer: crate::chain::authorization::Authorizer,
    /// The parsed `--service-cluster-ip-range`.
    pub(crate) service_cidr: crate::api::rest::defaults::service_ip::ServiceCidr,
    /// The loaded `--audit-policy-file`, when there is one.
    pub(crate) audit_policy: Option<crate::chain::audit::AuditPolicy>,
    /// The checked logging flags.
    pub logging: crate::server::logging::LoggingOptions,
    /// The parsed `--webhook-service-address`.
    pub(crate) webhook_service_addresses: std::sync::Arc<crate::api::rest::admission::ServiceAddresses>,
}

/// Why a set of flags was rejected. Each message is one line, kube-apiserver's wording where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flag value does not parse.
    #[error("invalid argument {value:?} for \"--{flag}\" flag: {reason}")]
    InvalidValue {
        /// The flag name without dashes.
        flag: &'static str,
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A peer flag was set while the proxy's feature gate is off (docs/mvp-behaviour.md §1.1).
    #[error("--{flag} requires UnknownVersionInteroperabilityProxy feature to be turned on")]
    PeerFlagWithoutGate {
        /// The peer flag that was set.
        flag: &'static str,
    },
    /// Alpha (StorageVersion-era) MVP also needs the StorageVersionAPI gate (docs/mvp-behaviour.md §1.1).
    #[error(
        "UnknownVersionInteroperabilityProxy feature requires StorageVersionAPI feature flag to be enabled"
    )]
    ProxyNeedsStorageVersionApi,
    /// The peer proxy was requested without a proxy client certificate (docs/mvp-behaviour.md §1.1).
    #[error("error building peer proxy handler, proxy-cert-file not specified")]
    ProxyCertMissing,
    /// The peer proxy was requested without a proxy client key (docs/mvp-behaviour.md §1.1).
    #[error("error building peer proxy handler, proxy-key-file not specified")]
    ProxyKeyMissing,
    /// Serving needs a certificate and a key.
    #[error("--tls-cert-file and --tls-private-key-file are required (the fake does not self-sign)")]
    ServingCertMissing,
    /// The emulated version is outside what the binary can emulate.
    #[error("emulation version {emulated} is not between [{min}, {binary}]")]
    EmulatedVersionOutOfRange {
        /// Requested emulation version.
        emulated: KubeVersion,
        /// Lowest emulable version.
        min: KubeVersion,
        /// The binary version.
        binary: KubeVersion,
    },
    /// A timing knob is zero or inconsistent.
    #[error("{0}")]
    Timing(String),
    /// API Priority and Fairness is on and the max-in-flight values leave it no seats.
    #[error(
        "--max-requests-inflight={0} plus --max-mutating-requests-inflight={1} must be positive when \
         --enable-priority-and-fairness=true"
    )]
    NoConcurrency(usize, usize),
    /// `--etcd-servers` names something that is not an `http://host:port` URL, or the binary was
    /// built without etcd support.
    #[error("--etcd-servers: {0}")]
    EtcdServers(String),
    /// A `--watch-cache-sizes` entry is not `resource[.group]#size` (upstream's
    /// `ParseWatchCacheSizes` text).
    #[error("{0}")]
    WatchCacheSizes(String),
    /// `--authorization-mode` names no mode, an unknown or unsupported one, or one twice.
    #[error(transparent)]
    AuthorizationMode(#[from] crate::chain::authorization::AuthorizationModeError),
    /// `--audit-policy-file` cannot be read or is not an audit policy.
    #[error(transparent)]
    Audit(#[from] crate::chain::audit::AuditError),
    /// A logging flag is malformed, or is one of klog's removed flags.
    #[error(transparent)]
    Logging(#[from] crate::server::logging::LoggingError),
}

#[derive(Debug, clap::Parser)]
#[command(name = "apiserver-fake", no_binary_name = true)]
struct FlagsOnly {
    #[command(flatten)]
    flags: ServerFlags,
}

impl ServerFlags {
    /// The flags `crate::chain::authentication::Authenticator` is built from.
    pub fn authentication(&self) -> AuthenticationOptions {
        AuthenticationOptions {
            client_ca_file: self.client_ca_file.clone(),
            token_auth_file: self.token_auth_file.clone(),
            anonymous_auth: self.anonymous_auth,
            requestheader_client_ca_file: self.requestheader_client_ca_file.clone(),
            requestheader_allowed_names: self.requestheader_allowed_names.clone(),
            requestheader_username_headers: self.requestheader_username_headers.clone(),
            requestheader_uid_headers: self.requestheader_uid_headers.clone(),
            requestheader_group_headers: self.requestheader_group_headers.clone(),
            requestheader_extra_headers_prefix: self.requestheader_extra_headers_prefix.clone(),
            service_account: crate::api::serviceaccount::ServiceAccountOptions {
                issuers: self.service_account_issuer.clone(),
                key_files: self.service_account_key_file.clone(),
                signing_key_file: self.service_account_signing_key_file.clone(),
                api_audiences: self.api_audiences.clone(),
                // Checked by `validate`.
                max_expiration: self
                    .service_account_max_token_expiration
                    .as_deref()
                    .and_then(go_duration),
            },
        }
    }

    /// The store these flags ask for: etcd at `--etcd-servers` (under `--etcd-prefix`), waiting at
    /// most `timeout` for it to answer, or, without that flag, a new in-memory store of its own.
    pub async fn open_store(&self, timeout: Duration) -> StoreResult<Arc<dyn Store>> {
        if self.etcd_servers.is_empty() {
            return Ok(Arc::new(MemoryStore::new()));
        }
        #[cfg(feature = "etcd")]
        {
            let config = EtcdConfig {
                servers: self.etcd_servers.clone(),
                prefix: self.etcd_prefix.clone(),
            };
            let etcd: Arc<dyn Store> = Arc::new(
                EtcdStore::connect(&config, timeout)
                    .await?
                    .with_media_type(self.storage_media_type),
            );
            if !self.watch_cache {
                return Ok(etcd);
            }
            let sizes = crate::store::WatchCacheSizes::parse(&self.watch_cache_sizes)
                .map_err(crate::store::StoreError::Unavailable)?;
            Ok(Arc::new(crate::store::CachedStore::new(etcd, sizes)))
        }
        #[cfg(not(feature = "etcd"))]
        {
            let _ = timeout;
            Err(crate::store::StoreError::Unavailable(
                "this binary was built without etcd support (cargo build --features etcd)".to_owned(),
            ))
        }
    }

    /// Parses flags given as command-line words (without the program name), with the same names, defaults
    /// and parse errors as the binary. This is how in-process users (the demo cluster, tests) configure a
    /// server: `ServerFlags::from_args(["--secure-port=0", "--runtime-config=batch/v1=false"])`.
    pub fn from_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::Parser;
        FlagsOnly::try_parse_from(args).map(|parsed| parsed.flags)
    }

    /// The long names (`--peer-resolution-mode`) of the fake's own flags, those kube-apiserver does not
    /// have: the flags whose help begins with `(fake)`. What a real kube-apiserver in the cluster must
    /// not be given (`cluster::real_member`).
    pub fn fake_only_flags() -> std::collections::BTreeSet<String> {
        use clap::CommandFactory;
        FlagsOnly::command()
            .get_arguments()
            .filter(|arg| {
                arg.get_help()
                    .is_some_and(|help| help.to_string().starts_with("(fake)"))
            })
            .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
            .collect()
    }

    /// Checks `--etcd-servers`: plain-HTTP URLs (the fake has no `--etcd-cafile`), in a binary that
    /// has the etcd backend.
    fn validate_etcd(&self) -> Result<(), ConfigError> {
        crate::store::WatchCacheSizes::parse(&self.watch_cache_sizes)
            .map_err(ConfigError::WatchCacheSizes)?;
        if self.etcd_servers.is_empty() {
            return Ok(());
        }
        if !cfg!(feature = "etcd") {
            return Err(ConfigError::EtcdServers(
                "this binary was built without etcd support (cargo build --features etcd)".to_owned(),
            ));
        }
        for server in &self.etcd_servers {
            let host = server.strip_prefix("http://").ok_or_else(|| {
                ConfigError::EtcdServers(format!(
                    "{server:?} is not an http:// URL (TLS to etcd is not supported by the fake)"
                ))
            })?;
            if host.is_empty() || host.contains('/') {
                return Err(ConfigError::EtcdServers(format!(
                    "{server:?} is not scheme://host:port"
                )));
            }
        }
        Ok(())
    }

    /// Checks the flags the way kube-apiserver validates its options and resolves defaults.
    pub fn validate(&self) -> Result<ServerOptions, ConfigError> {
        let logging = self.logging.validate()?;
        let (binary_version, emulated_version) = self.versions()?;
        let runtime_config: RuntimeConfig = parse_flag("runtime-config", &self.runtime_config)?;
        let feature_gates: FeatureGates = parse_flag("feature-gates", &self.feature_gates)?;
        if self.tls_cert_file.is_none() || self.tls_private_key_file.is_none() {
            return Err(ConfigError::ServingCertMissing);
        }
        self.check_peer_flags(&feature_gates, emulated_version)?;
        self.check_timing()?;
        let request_timeout = self.request_timeout()?;
        let hostname = match &self.hostname {
            Some(h) => h.clone(),
            None => machine_hostname(),
        };
        let peer_resolution_mode = self.peer_resolution_mode(emulated_version);
        self.validate_etcd()?;
        let service_cidr = self.service_cluster_ip_range.parse().map_err(
            |e: crate::api::rest::defaults::service_ip::ServiceCidrError| ConfigError::InvalidValue {
                flag: "service-cluster-ip-range",
                value: self.service_cluster_ip_range.clone(),
                reason: e.to_string(),
            },
        )?;
        let watch_bookmark_interval = match go_duration(&self.watch_bookmark_interval) {
            Some(interval) if !interval.is_zero() => interval,
            _ => {
                return Err(ConfigError::InvalidValue {
                    flag: "watch-bookmark-interval",
                    value: self.watch_bookmark_interval.clone(),
                    reason: "must be a positive duration such as 1m0s".to_owned(),
                });
            }
        };
        let audit_policy = match &self.audit_policy_file {
            Some(path) => Some(crate::chain::audit::AuditPolicy::load(path)?),
            None => None,
        };
        let webhook_service_addresses = crate::api::rest::admission::ServiceAddresses::parse(
            &self.webhook_service_address,
        )
        .map_err(|reason| ConfigError::InvalidValue {
            flag: "webhook-service-address",
            value: self.webhook_service_address.join(","),
            reason,
        })?;
        Ok(ServerOptions {
            logging,
            webhook_service_addresses: std::sync::Arc::new(webhook_service_addresses),
            audit_policy,
            service_cidr,
            peer_resolution_mode,
            flags: self.clone(),
            binary_version,
            emulated_version,
            runtime_config,
            feature_gates,
            hostname,
            identity_lease_duration: Duration::from_secs(self.identity_lease_duration_seconds),
            identity_lease_renew_interval: Duration::from_secs(self.identity_lease_renew_interval_seconds),
            identity_lease_gc_period: Duration::from_secs(self.identity_lease_gc_period_seconds),
            peer_endpoint_ttl: Duration::from_secs(self.peer_endpoint_ttl_seconds),
            peer_endpoint_refresh: Duration::from_secs(self.peer_endpoint_refresh_seconds),
            local_discovery_refresh: Duration::from_secs(self.local_discovery_refresh_seconds),
            gv_exclusion_grace_period: Duration::from_secs(self.gv_exclusion_grace_period_seconds),
            departed_peer_grace: Duration::from_secs(self.departed_peer_grace_seconds),
            storage_version_gc_period: Duration::from_secs(self.storage_version_gc_period_seconds),
            request_timeout,
            watch_bookmark_interval,
            authorizer: crate::chain::authorization::Authorizer::from_flag(&self.authorization_mode)?,
        })
    }

    /// `--kubernetes-version` and `--emulated-version` (the binary's by default; kube-apiserver 1.36
    /// emulates down to 1.33: three minors, component-base/compatibility).
    fn versions(&self) -> Result<(KubeVersion, KubeVersion), ConfigError> {
        let binary_version: KubeVersion = parse_flag("kubernetes-version", &self.kubernetes_version)?;
        let Some(raw) = &self.emulated_version else {
            return Ok((binary_version, binary_version));
        };
        let value = raw.strip_prefix("kube=").unwrap_or(raw);
        let emulated: KubeVersion =
            value
                .parse()
                .map_err(|e: crate::api::catalog::CatalogError| ConfigError::InvalidValue {
                    flag: "emulated-version",
                    value: raw.clone(),
                    reason: e.to_string(),
                })?;
        let min = KubeVersion {
            major: binary_version.major,
            minor: binary_version.minor.saturating_sub(3).max(28),
        };
        if emulated > binary_version || emulated < min {
            return Err(ConfigError::EmulatedVersionOutOfRange {
                emulated,
                min,
                binary: binary_version,
            });
        }
        Ok((binary_version, emulated))
    }

    /// The `--peer-*` and proxy certificate flags: only with the proxy's gate on; with `--peer-ca-file`,
    /// the proxy's client certificate and (in StorageVersion mode) the StorageVersion API.
    fn check_peer_flags(
        &self,
        feature_gates: &FeatureGates,
        emulated_version: KubeVersion,
    ) -> Result<(), ConfigError> {
        let mvp_enabled = feature_gates.enabled(MVP_FEATURE_GATE, emulated_version);
        if !mvp_enabled {
            if self.peer_ca_file.is_some() {
                return Err(ConfigError::PeerFlagWithoutGate { flag: "peer-ca-file" });
            }
            if self.peer_advertise_ip.is_some() {
                return Err(ConfigError::PeerFlagWithoutGate {
                    flag: "peer-advertise-ip",
                });
            }
            if self.peer_advertise_port.is_some() {
                return Err(ConfigError::PeerFlagWithoutGate {
                    flag: "peer-advertise-port",
                });
            }
        } else if self.peer_ca_file.is_some() {
            // Alpha (StorageVersion era, before 1.33) needs StorageVersionAPI (docs/mvp-behaviour.md §1.1).
            let storage_version_mode = match self.peer_resolution_mode {
                Some(mode) => mode == PeerResolutionModeFlag::StorageVersion,
                None => emulated_version.minor < 33,
            };
            if storage_version_mode && !feature_gates.enabled("StorageVersionAPI", emulated_version) {
                return Err(ConfigError::ProxyNeedsStorageVersionApi);
            }
            if self.proxy_client_cert_file.is_none() {
                return Err(ConfigError::ProxyCertMissing);
            }
            if self.proxy_client_key_file.is_none() {
                return Err(ConfigError::ProxyKeyMissing);
            }
        }
        Ok(())
    }

    /// Periods, lease timing and concurrency limits: positive, a refresh shorter than its TTL, some
    /// concurrency for priority and fairness to share.
    fn check_timing(&self) -> Result<(), ConfigError> {
        if self.identity_lease_duration_seconds == 0 || self.identity_lease_renew_interval_seconds == 0 {
            return Err(ConfigError::Timing(
                "identity lease duration and renew interval must be positive".to_owned(),
            ));
        }
        for (flag, value) in [
            (
                "identity-lease-gc-period-seconds",
                self.identity_lease_gc_period_seconds,
            ),
            ("peer-endpoint-ttl-seconds", self.peer_endpoint_ttl_seconds),
            (
                "peer-endpoint-refresh-seconds",
                self.peer_endpoint_refresh_seconds,
            ),
            (
                "local-discovery-refresh-seconds",
                self.local_discovery_refresh_seconds,
            ),
            (
                "storage-version-gc-period-seconds",
                self.storage_version_gc_period_seconds,
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::Timing(format!("--{flag} must be positive")));
            }
        }
        if self.enable_priority_and_fairness
            && self.max_requests_inflight + self.max_mutating_requests_inflight == 0
        {
            return Err(ConfigError::NoConcurrency(
                self.max_requests_inflight,
                self.max_mutating_requests_inflight,
            ));
        }
        if self.peer_endpoint_refresh_seconds >= self.peer_endpoint_ttl_seconds {
            return Err(ConfigError::Timing(
                "--peer-endpoint-refresh-seconds must be less than --peer-endpoint-ttl-seconds".to_owned(),
            ));
        }
        Ok(())
    }

    /// `--request-timeout`, a positive Go duration (`--service-account-max-token-expiration` too, when
    /// given).
    fn request_timeout(&self) -> Result<Duration, ConfigError> {
        let request_timeout = match go_duration(&self.request_timeout) {
            Some(timeout) if !timeout.is_zero() => timeout,
            _ => {
                return Err(ConfigError::InvalidValue {
                    flag: "request-timeout",
                    value: self.request_timeout.clone(),
                    reason: "must be a positive duration such as 1m0s".to_owned(),
                });
            }
        };
        if let Some(max) = &self.service_account_max_token_expiration
            && go_duration(max).is_none_or(|d| d.is_zero())
        {
            return Err(ConfigError::InvalidValue {
                flag: "service-account-max-token-expiration",
                value: max.clone(),
                reason: "must be a positive duration such as 24h0m0s".to_owned(),
            });
        }
        Ok(request_timeout)
    }

    /// `--peer-resolution-mode`, by default StorageVersion before 1.33 and discovery from 1.33.
    fn peer_resolution_mode(&self, emulated_version: KubeVersion) -> mvp_core::PeerResolutionMode {
        match self.peer_resolution_mode {
            Some(PeerResolutionModeFlag::StorageVersion) => mvp_core::PeerResolutionMode::StorageVersion,
            Some(PeerResolutionModeFlag::Discovery) => mvp_core::PeerResolutionMode::Discovery,
            None if emulated_version.minor < 33 => mvp_core::PeerResolutionMode::StorageVersion,
            None => mvp_core::PeerResolutionMode::Discovery,
        }
    }
}

/// A flag whose value parses as the catalog parses versions, runtime-config and feature gates.
fn parse_flag<T>(flag: &'static str, value: &str) -> Result<T, ConfigError>
where
    T: std::str::FromStr<Err = crate::api::catalog::CatalogError>,
{
    value
        .parse()
        .map_err(|e: crate::api::catalog::CatalogError| ConfigError::InvalidValue {
            flag,
            value: value.to_owned(),
            reason: e.to_string(),
        })
}

impl ServerOptions {
    /// Whether the Mixed Version Proxy gate is on for the emulated version.
    pub fn mvp_gate_enabled(&self) -> bool {
        self.feature_gates
            .enabled(MVP_FEATURE_GATE, self.emulated_version)
    }

    /// Whether the peer proxy filter is installed: the gate is on and `--peer-ca-file` is set
    /// (docs/mvp-behaviour.md §1.1).
    pub fn peer_proxy_enabled(&self) -> bool {
        self.mvp_gate_enabled() && self.flags.peer_ca_file.is_some()
    }

    /// The address peers use to reach this server (docs/mvp-behaviour.md §2.4): `--peer-advertise-ip:port`
    /// only when both are set, else the advertise address (or bind address) and the serving port.
    pub fn peer_address(&self, serving_port: u16) -> std::net::SocketAddr {
        if let (Some(ip), Some(port)) = (self.flags.peer_advertise_ip, self.flags.peer_advertise_port) {
            return (ip, port).into();
        }
        (self.public_address(), serving_port).into()
    }

    /// kube-apiserver's public address: `--advertise-address`, else `--bind-address` when it is not
    /// unspecified, else the address of the host's default interface (loopback without one).
    pub fn public_address(&self) -> IpAddr {
        if let Some(ip) = self.flags.advertise_address {
            return ip;
        }
        if !self.flags.bind_address.is_unspecified() {
            return self.flags.bind_address;
        }
        default_interface_address().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

fn machine_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The address of the interface the default route leaves by, as kube-apiserver advertises when
/// `--bind-address` is unspecified (`ChooseHostInterface`): the source address the kernel picks for
/// a datagram to a routed address (nothing is sent). `None` without a default route.
fn default_interface_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified() && !ip.is_loopback()).then_some(ip)
}

/// A Go duration (`time.ParseDuration`: `1m0s`, `500ms`, `1h30m`); `None` if malformed or negative.
pub fn go_duration(text: &str) -> Option<Duration> {
    crate::go_duration::parse_std(text).ok().flatten()
}
