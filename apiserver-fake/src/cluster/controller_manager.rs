//! The cluster's kube-controller-manager (the `controller-manager` crate): `apiserver-fake
//! controller-manager --kubeconfig K`, its own process like kube-controller-manager, and the instance
//! `apiserver-fake cluster` runs by default (an in-process task, or its own process for `cluster
//! --etcd`), talking to the cluster through an admin kubeconfig, never through the store.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ::controller_manager::{ControllerManager, ControllerManagerOptions};
use anyhow::Context;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// `apiserver-fake controller-manager` flags (kube-controller-manager's names).
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerManagerArgs {
    /// Path to a kubeconfig file with the cluster's address and credentials (its current context).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Controllers to enable: `*` enables every controller on by default, `foo` enables foo, `-foo`
    /// disables it (names: namespace-controller, alias namespace).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// The number of namespace objects that are allowed to sync concurrently. Larger number = more
    /// responsive namespace termination, but more CPU (and network) load.
    #[arg(long, default_value_t = 10)]
    pub concurrent_namespace_syncs: usize,
    /// The number of garbage collector workers that are allowed to sync concurrently.
    #[arg(long, default_value_t = ::controller_manager::controllers::garbage_collector::CONCURRENT_GC_SYNCS)]
    pub concurrent_gc_syncs: usize,
    /// The IP address on which to listen for the --secure-port port.
    #[arg(long, default_value_t = ::controller_manager::serving::DEFAULT_BIND_ADDRESS)]
    pub bind_address: std::net::IpAddr,
    /// The port on which to serve HTTPS (`/metrics`, `/healthz`). If 0, don't serve HTTPS at all.
    #[arg(long, default_value_t = ::controller_manager::serving::DEFAULT_SECURE_PORT)]
    pub secure_port: u16,
    /// (fake, for `cluster --etcd`) Stop when standard input reaches its end: a controller manager
    /// whose parent holds the other end of a pipe then never outlives it.
    #[arg(long, hide = true)]
    pub exit_when_stdin_closes: bool,
}

impl ControllerManagerArgs {
    fn options(&self) -> ControllerManagerOptions {
        ControllerManagerOptions {
            controllers: self.controllers.clone(),
            concurrent_namespace_syncs: self.concurrent_namespace_syncs,
            concurrent_gc_syncs: self.concurrent_gc_syncs,
            ..ControllerManagerOptions::default()
        }
    }
}

/// The `controller-manager` subcommand: run until SIGINT/SIGTERM (or standard input's end).
pub async fn run_controller_manager(args: ControllerManagerArgs) -> anyhow::Result<()> {
    let signal = crate::shutdown_signal();
    // Flags first, as kube-controller-manager validates them before it connects.
    ::controller_manager::select_controllers(&::controller_manager::controllers::known(), &args.controllers)?;
    let client = ::controller_manager::client_from_kubeconfig(&args.kubeconfig).await?;
    let manager = ControllerManager::new(client, args.options())?;
    let serving = match args.secure_port {
        0 => None,
        port => Some(
            ::controller_manager::serving::SecureServer::bind(
                std::net::SocketAddr::new(args.bind_address, port),
                manager.metrics(),
            )
            .await?,
        ),
    };
    eprintln!(
        "controller-manager {} running {} through {}",
        env!("CARGO_PKG_VERSION"),
        manager.enabled_controllers().join(","),
        args.kubeconfig.display()
    );
    let (stdin_closed_tx, stdin_closed) = tokio::sync::oneshot::channel::<()>();
    if args.exit_when_stdin_closes {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = stdin_closed_tx.send(());
        });
    } else {
        std::mem::forget(stdin_closed_tx);
    }
    let cancel = CancellationToken::new();
    if let Some(serving) = serving {
        if let Some(address) = serving.local_addr() {
            eprintln!("Serving securely on {address}");
        }
        tokio::spawn(serving.serve(cancel.clone()));
    }
    let run = tokio::spawn(manager.run(cancel.clone()));
    tokio::select! {
        () = signal => {}
        _ = stdin_closed => {}
    }
    cancel.cancel();
    run.await.context("the controller manager panicked")??;
    Ok(())
}

/// A controller manager running as a task of this process (for `cluster` and test fixtures).
#[derive(Debug)]
pub struct InProcessControllerManager {
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), ::controller_manager::Error>>>,
}

impl InProcessControllerManager {
    /// Starts the controllers `options` selects, talking through `kubeconfig`.
    pub async fn start(kubeconfig: &Path, options: ControllerManagerOptions) -> anyhow::Result<Self> {
        let client = ::controller_manager::client_from_kubeconfig(kubeconfig).await?;
        let manager = ControllerManager::new(client, options)?;
        let cancel = CancellationToken::new();
        let task = tokio::spawn(manager.run(cancel.clone()));
        Ok(Self {
            cancel,
            task: Some(task),
        })
    }

    /// Stops the controllers and waits for them.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take()
            && let Ok(Err(err)) = task.await
        {
            tracing::warn!(error = %err, "the controller manager had stopped");
        }
    }
}

impl Drop for InProcessControllerManager {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A controller manager process of this binary (for `cluster --etcd`), its log in
/// `DIR/controller-manager.log`, tied to this process by a pipe on its standard input.
#[derive(Debug)]
pub struct ControllerManagerProcess {
    child: Child,
}

impl ControllerManagerProcess {
    /// Starts `binary controller-manager --kubeconfig KUBECONFIG`, logging into `dir`.
    pub fn spawn(binary: &Path, dir: &Path, kubeconfig: &Path) -> anyhow::Result<Self> {
        let log_path = dir.join("controller-manager.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("failed to open {}", log_path.display()))?;
        let child = Command::new(binary)
            .arg("controller-manager")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--exit-when-stdin-closes")
            // Several clusters may run at once: no fixed metrics port.
            .arg("--secure-port=0")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("failed to start the controller manager ({})", binary.display()))?;
        Ok(Self { child })
    }

    /// Stops it: closes its standard input (it exits), killing it after 10 s.
    pub async fn stop(mut self) {
        drop(self.child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
