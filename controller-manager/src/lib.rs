//! The process side of kube-controller-manager for kube-mvp: the controllers that act on what the API
//! answers, so that a false 404 or a missing group does the harm it does in a real cluster.
//!
//! A [`ControllerManager`] talks to the API **only through a client** (built from a kubeconfig): it
//! sees exactly what any client sees through the server it is pointed at, proxied requests and false
//! 404s included, and never reads the store. It runs
//!
//! - a shared [`DiscoveryCache`] (aggregated discovery, refreshed every 30 s),
//! - the controllers [`controllers::known`] lists that `--controllers` selects, each with upstream's
//!   name: the namespace controller (`namespace-controller`, alias `namespace`), the garbage
//!   collector (`garbage-collector-controller`, alias `garbagecollector`) and the
//!   ValidatingAdmissionPolicy status controller (`validatingadmissionpolicy-status-controller`), and
//! - a Prometheus registry their metrics go to (upstream's names, e.g. `workqueue_adds_total`), which
//!   [`serving`] serves over HTTPS at `/metrics` as kube-controller-manager's secure port does.
//!
//! It runs no workload controllers (no Deployment, ReplicaSet, Job or Pod controllers): objects are
//! stored and served, never acted on, as in envtest.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use controller_manager::{ControllerManager, ControllerManagerOptions};
//! use tokio_util::sync::CancellationToken;
//!
//! let client = controller_manager::client_from_kubeconfig("a.kubeconfig".as_ref()).await?;
//! let manager = ControllerManager::new(client, ControllerManagerOptions::default())?;
//! let cancel = CancellationToken::new();
//! tokio::spawn(manager.run(cancel.clone()));
//! // ... later
//! cancel.cancel();
//! # Ok(()) }
//! ```
#![warn(unreachable_pub)]

pub mod controllers;
pub mod discovery;
pub mod queue;
pub mod serving;
mod sparse_maps;

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use discovery::{DiscoveryCache, DiscoverySnapshot};
use tokio_util::sync::CancellationToken;

/// Errors of the controller manager.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--controllers` names a controller that does not exist (upstream's message).
    #[error("{0:?} is not in the list of known controllers")]
    UnknownController(String),
    /// The kubeconfig could not be read or used.
    #[error("invalid kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A metric could not be registered.
    #[error("metrics")]
    Metrics(#[from] prometheus::Error),
    /// A controller stopped with an error.
    #[error("controller {name}: {message}")]
    Controller {
        /// The controller's name.
        name: &'static str,
        /// Why it stopped.
        message: String,
    },
}

/// What a controller's run returns.
pub type ControllerFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A controller the manager can start: its upstream name and aliases (for `--controllers`), whether
/// `*` includes it, and how to run it. A controller runs until its cancellation token fires; an error
/// it returns stops the manager, as a failing controller stops kube-controller-manager.
#[derive(Debug, Clone, Copy)]
pub struct ControllerDescriptor {
    /// Upstream's canonical name (`namespace-controller`).
    pub name: &'static str,
    /// Older names `--controllers` also accepts (`namespace`).
    pub aliases: &'static [&'static str],
    /// Whether only naming it in `--controllers` enables it (`*` does not).
    pub disabled_by_default: bool,
    /// Runs the controller.
    pub run: fn(ControllerContext, CancellationToken) -> ControllerFuture,
}

/// Settings of a [`ControllerManager`].
#[derive(Debug, Clone)]
pub struct ControllerManagerOptions {
    /// kube-controller-manager's `--controllers`: `*` (every controller on by default), a name or
    /// alias to enable, `-name` to disable. Default `["*"]`.
    pub controllers: Vec<String>,
    /// How often discovery is refreshed ([`discovery::RESYNC_PERIOD`]).
    pub discovery_period: Duration,
    /// `--concurrent-namespace-syncs` (upstream default 10): namespaces deleted at once.
    pub concurrent_namespace_syncs: usize,
    /// `--concurrent-gc-syncs` (upstream default 20): workers of each of the garbage collector's two
    /// queues (0 runs none, as upstream accepts).
    pub concurrent_gc_syncs: usize,
    /// How long the namespace controller waits after seeing a namespace's deletion before it empties
    /// it (upstream's constant `namespaceDeletionGracePeriod`, 5 s: lets every server's admission see
    /// the namespace terminating). Benchmarks and tests may shorten it.
    pub namespace_deletion_grace_period: Duration,
    /// Where the controllers' metrics go.
    pub metrics: prometheus::Registry,
}

impl Default for ControllerManagerOptions {
    fn default() -> Self {
        Self {
            controllers: vec!["*".to_owned()],
            discovery_period: discovery::RESYNC_PERIOD,
            concurrent_namespace_syncs: 10,
            concurrent_gc_syncs: controllers::garbage_collector::CONCURRENT_GC_SYNCS,
            namespace_deletion_grace_period: Duration::from_secs(5),
            metrics: prometheus::Registry::new(),
        }
    }
}

/// What every controller gets: the client, the shared discovery, the options and the metrics.
#[derive(Clone)]
pub struct ControllerContext {
    /// The API client (the only way to the cluster).
    pub client: kube::Client,
    /// The shared discovery.
    pub discovery: DiscoveryCache,
    /// The manager's options.
    pub options: Arc<ControllerManagerOptions>,
    /// The work queues' metrics (registered once in `options.metrics`).
    pub queue_metrics: queue::QueueMetrics,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("discovery", &self.discovery)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// A kube-controller-manager: the selected controllers and the shared discovery they use.
#[derive(Debug)]
pub struct ControllerManager {
    context: ControllerContext,
    enabled: Vec<ControllerDescriptor>,
}

impl ControllerManager {
    /// A manager of the controllers `options.controllers` selects, talking through `client`. Fails
    /// on an unknown controller name.
    pub fn new(client: kube::Client, options: ControllerManagerOptions) -> Result<Self, Error> {
        let enabled = select_controllers(&controllers::known(), &options.controllers)?;
        let queue_metrics = queue::QueueMetrics::register(&options.metrics)?;
        Ok(Self {
            context: ControllerContext {
                discovery: DiscoveryCache::new(client.clone()),
                client,
                options: Arc::new(options),
                queue_metrics,
            },
            enabled,
        })
    }

    /// The names of the controllers it runs.
    pub fn enabled_controllers(&self) -> Vec<&'static str> {
        self.enabled.iter().map(|c| c.name).collect()
    }

    /// The registry of the controllers' metrics (what `/metrics` serves).
    pub fn metrics(&self) -> prometheus::Registry {
        self.context.options.metrics.clone()
    }

    /// The shared discovery.
    pub fn discovery(&self) -> DiscoveryCache {
        self.context.discovery.clone()
    }

    /// Runs discovery and the controllers until `cancel` fires (then stops them all and returns) or
    /// a controller fails (then stops the others and returns its error).
    pub async fn run(self, cancel: CancellationToken) -> Result<(), Error> {
        let inner = cancel.child_token();
        let discovery = self.context.discovery.clone();
        if let Err(err) = discovery.refresh().await {
            tracing::info!(error = %err, "initial discovery failed; retrying in the background");
        }
        let period = self.context.options.discovery_period;
        let discovery_task = tokio::spawn({
            let cancel = inner.clone();
            async move {
                tokio::select! {
                    () = tokio::time::sleep(period) => discovery.run(period, cancel).await,
                    () = cancel.cancelled() => {}
                }
            }
        });
        let mut tasks = tokio::task::JoinSet::new();
        for controller in &self.enabled {
            tracing::info!(controller = controller.name, "starting controller");
            let run = (controller.run)(self.context.clone(), inner.clone());
            let name = controller.name;
            tasks.spawn(async move { (name, run.await) });
        }
        let mut outcome = Ok(());
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((_, Ok(()))) => {}
                Ok((name, Err(message))) => {
                    tracing::error!(controller = name, error = %message, "controller failed");
                    if outcome.is_ok() {
                        outcome = Err(Error::Controller { name, message });
                    }
                    inner.cancel();
                }
                Err(join) => {
                    if outcome.is_ok() {
                        outcome = Err(Error::Controller {
                            name: "unknown",
                            message: join.to_string(),
                        });
                    }
                    inner.cancel();
                }
            }
        }
        inner.cancel();
        let _ = discovery_task.await;
        outcome
    }
}

/// kube-controller-manager's `IsControllerEnabled` over `known`, aliases resolved; unknown names are
/// an error (upstream's validation).
pub fn select_controllers(
    known: &[ControllerDescriptor],
    selection: &[String],
) -> Result<Vec<ControllerDescriptor>, Error> {
    let canonical = |name: &str| {
        known
            .iter()
            .find(|c| c.name == name || c.aliases.contains(&name))
            .map(|c| c.name)
    };
    let mut enabled = BTreeSet::new();
    let mut disabled = BTreeSet::new();
    let mut star = false;
    for entry in selection.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if entry == "*" {
            star = true;
            continue;
        }
        let (negated, name) = match entry.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, entry),
        };
        let name = canonical(name).ok_or_else(|| Error::UnknownController(name.to_owned()))?;
        // The first mention of a controller decides, as upstream's loop returns on it.
        if !enabled.contains(name) && !disabled.contains(name) {
            if negated {
                disabled.insert(name);
            } else {
                enabled.insert(name);
            }
        }
    }
    Ok(known
        .iter()
        .filter(|c| {
            enabled.contains(c.name) || (star && !disabled.contains(c.name) && !c.disabled_by_default)
        })
        .copied()
        .collect())
}

/// The product of the controller manager's `User-Agent` (kube-controller-manager's), by which audit logs
/// and request logs tell its requests from others.
pub const USER_AGENT_PRODUCT: &str = "kube-controller-manager";

/// The whole `User-Agent`, in client-go's shape (`NAME/VERSION (OS/ARCH) kubernetes/COMMIT`).
pub fn user_agent() -> String {
    format!(
        "{USER_AGENT_PRODUCT}/v{} ({}/{}) kube-mvp",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        }
    )
}

/// A client of the cluster `path` (a kubeconfig file) points at, with its current context, that does
/// not retry failed requests itself (client-go's behaviour for answers without `Retry-After`).
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, Error> {
    let fail = |message: String| Error::Kubeconfig {
        path: path.display().to_string(),
        message,
    };
    // kube's TLS builds on the process's default provider; with more than one compiled in, rustls
    // cannot choose. Already installed (by the embedding process) is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| fail(e.to_string()))?;
    // kube's default retries every 503 up to 15 times (backing off to minutes): a failing proxied
    // delete would hold a namespace sync for that long. client-go retries only answers carrying
    // Retry-After; the controllers' work queues do the retrying.
    config.default_retry = false;
    if let Ok(agent) = http::HeaderValue::from_str(&user_agent()) {
        config.headers.push((http::header::USER_AGENT, agent));
    }
    kube::Client::try_from(config).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: ControllerContext, _: CancellationToken) -> ControllerFuture {
        Box::pin(async { Ok(()) })
    }

    fn known() -> Vec<ControllerDescriptor> {
        let descriptor = |name, aliases, disabled_by_default| ControllerDescriptor {
            name,
            aliases,
            disabled_by_default,
            run: never,
        };
        vec![
            descriptor("namespace-controller", &["namespace"], false),
            descriptor("garbage-collector-controller", &["garbagecollector"], false),
            descriptor("bootstrap-signer-controller", &["bootstrapsigner"], true),
        ]
    }

    fn names(selection: &[&str]) -> Result<Vec<&'static str>, Error> {
        let selection: Vec<String> = selection.iter().map(|s| (*s).to_owned()).collect();
        Ok(select_controllers(&known(), &selection)?
            .into_iter()
            .map(|c| c.name)
            .collect())
    }

    #[test]
    fn controllers_flag_selects_as_kube_controller_manager() {
        assert_eq!(
            names(&["*"]).unwrap(),
            ["namespace-controller", "garbage-collector-controller"]
        );
        assert_eq!(
            names(&["*", "-namespace"]).unwrap(),
            ["garbage-collector-controller"]
        );
        assert_eq!(names(&["namespace"]).unwrap(), ["namespace-controller"]);
        assert_eq!(
            names(&["*", "bootstrapsigner"]).unwrap(),
            [
                "namespace-controller",
                "garbage-collector-controller",
                "bootstrap-signer-controller"
            ]
        );
        assert!(names(&[]).unwrap().is_empty());
        assert_eq!(
            names(&["*", "-nope"]).unwrap_err().to_string(),
            "\"nope\" is not in the list of known controllers"
        );
    }
}
