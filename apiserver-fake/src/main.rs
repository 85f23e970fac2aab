//! `apiserver-fake`: run one fake kube-apiserver, or `apiserver-fake cluster` for the demo cluster.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use apiserver_fake::cluster::controller_manager::{ControllerManagerArgs, run_controller_manager};
use apiserver_fake::cluster::upgrade::{UpgradeArgs, run_upgrade};
use apiserver_fake::cluster::{ClusterArgs, run_cluster};
use apiserver_fake::server::config::ServerFlags;
use apiserver_fake::server::logging::{self, LoggingFormat};
use clap::{Parser, Subcommand};

/// jemalloc, not the system allocator: glibc's malloc keeps what a burst of writes freed (20,000
/// objects written and deleted left the demo at 7× its RSS, for good); jemalloc returns freed pages
/// to the system after its decay time, on a background thread (enabled in `main`) so that an idle
/// server returns them too.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The optional backends compiled in, as `--version` names them (tools check for `etcd`).
#[cfg(feature = "etcd")]
const FEATURES: &str = " (features: etcd)";
#[cfg(not(feature = "etcd"))]
const FEATURES: &str = "";

/// `--version`: kube-apiserver's first line (`Kubernetes vX.Y.Z`, for the default
/// `--kubernetes-version`, as `/version`'s `gitVersion`), then the fake's own version, its compiled-in
/// backends and the Kubernetes versions it can be and emulate.
fn version_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        use apiserver_fake::api::catalog::KubeVersion;
        let default = KubeVersion::NEWEST;
        format!(
            "Kubernetes v{default}.0\napiserver-fake {}{FEATURES}: serves Kubernetes v{}\u{2013}v{} \
             (--kubernetes-version), each emulating down to three minors below it (--emulated-version)",
            env!("CARGO_PKG_VERSION"),
            KubeVersion::OLDEST,
            KubeVersion::NEWEST,
        )
    })
}

/// A fake multi-version kube-apiserver for testing the Mixed Version Proxy.
#[derive(Debug, Parser)]
#[command(
    name = "apiserver-fake",
    disable_version_flag = true,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    server: ServerFlags,
    /// (fake, for `cluster --etcd`) Shut down gracefully when standard input reaches its end: a server
    /// process whose parent holds the other end of a pipe then never outlives it.
    #[arg(long, hide = true)]
    exit_when_stdin_closes: bool,
    /// Print version information and quit: `Kubernetes vX.Y.Z` as kube-apiserver, then the fake's own
    /// version and the Kubernetes versions it serves and emulates.
    #[arg(long, short = 'V')]
    version: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a cluster of fakes on loopback addresses: the demo (one in-memory store), a preset or a
    /// `--config` file (in-process, processes or containers; memory or etcd; a load balancer in front).
    Cluster(ClusterArgs),
    /// Roll a cluster of fakes from one Kubernetes minor to the next under client load and report what
    /// clients saw, with the Mixed Version Proxy and without.
    Upgrade(UpgradeArgs),
    /// Run the controller manager (the namespace controller and the garbage collector) against a
    /// cluster through a kubeconfig, as kube-controller-manager runs beside kube-apiserver.
    ControllerManager(ControllerManagerArgs),
    /// (internal, for `cluster`) Run a real kube-apiserver member in a host name of its own.
    #[command(hide = true)]
    ExecMember {
        /// The member's name, its host name.
        #[arg(long)]
        hostname: String,
        /// The kube-apiserver binary.
        binary: std::path::PathBuf,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    // Best effort: without it pages are still purged, only later (on the next allocations).
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    let cli = Cli::parse();
    if cli.version {
        // A closed pipe (`| head -1`) is not an error worth a panic.
        let _ = writeln!(std::io::stdout().lock(), "{}", version_text());
        return ExitCode::SUCCESS;
    }
    if let Some(Command::ExecMember {
        hostname,
        binary,
        args,
    }) = &cli.command
    {
        let err = apiserver_fake::cluster::real_member::exec_member(hostname, binary, args);
        eprintln!("apiserver-fake: failed to run {}: {err}", binary.display());
        return ExitCode::FAILURE;
    }
    // The server's logging flags are applied before anything logs, as kube-apiserver applies them
    // first; a malformed one ends the process with its one-line error.
    let (default_filter, format) = match &cli.command {
        None => match cli.server.logging.validate() {
            Ok(logging) => (logging.verbosity.filter(), logging.format),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
        // The simulator's servers fail requests on purpose (that is what it counts); their logs would
        // bury its progress line. `RUST_LOG` still turns them on.
        Some(Command::Upgrade(_)) => ("off".to_owned(), LoggingFormat::Text),
        // Its decisions (what it deleted, what it finalized) are what an operator reads.
        Some(Command::ControllerManager(_)) => {
            ("warn,controller_manager=info".to_owned(), LoggingFormat::Text)
        }
        _ => ("warn".to_owned(), LoggingFormat::Text),
    };
    logging::init(&default_filter, format);
    // Every connection and every proxied watch holds a descriptor; the usual soft limit (1024) is far
    // below what a busy apiserver needs. Raise it to the hard limit, as Go's runtime does at start-up.
    if let Err(err) = rlimit::increase_nofile_limit(u64::MAX) {
        tracing::warn!(error = %err, "could not raise the open-files limit");
    }
    // Large worker stacks (reserved, touched only as deep as a request goes): a JSON body may nest
    // 10,000 levels as upstream allows, and every pass over it (decoding, validation, merging,
    // encoding, dropping) recurses that deep. See `rest::negotiation::parse_json`.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(apiserver_fake::api::rest::negotiation::DEEP_BODY_STACK_BYTES)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Some(Command::Cluster(args)) => run_cluster(args).await,
            Some(Command::Upgrade(args)) => run_upgrade(args).await,
            Some(Command::ControllerManager(args)) => run_controller_manager(args).await,
            Some(Command::ExecMember { .. }) => unreachable!("handled before the runtime starts"),
            None => run_server(cli.server, cli.exit_when_stdin_closes).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run_server(flags: ServerFlags, exit_when_stdin_closes: bool) -> anyhow::Result<()> {
    let options = flags.validate()?;
    let signal = apiserver_fake::shutdown_signal();
    let (stdin_closed_tx, stdin_closed) = tokio::sync::oneshot::channel::<()>();
    if exit_when_stdin_closes {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = stdin_closed_tx.send(());
        });
    } else {
        // Never sent: the server runs until a signal.
        std::mem::forget(stdin_closed_tx);
    }
    let store = options
        .flags
        .open_store(Duration::from_secs(5))
        .await
        .with_context(|| match options.flags.etcd_servers.as_slice() {
            [] => "failed to open the store".to_owned(),
            servers => format!("failed to reach etcd at {}", servers.join(",")),
        })?;
    let server = apiserver_fake::server::start(options, store)
        .await
        .context("failed to start")?;
    eprintln!(
        "apiserver-fake {} listening on {} (server ID {})",
        env!("CARGO_PKG_VERSION"),
        server.url(),
        server.server_id()
    );
    tokio::select! {
        () = signal => {}
        _ = stdin_closed => {}
    }
    server.shutdown().await;
    Ok(())
}
