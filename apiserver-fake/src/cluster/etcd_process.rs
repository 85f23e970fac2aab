//! A private etcd for a cluster of fakes: the `etcd` binary on `PATH` (Debian: `etcd-server`), one
//! member listening on loopback, its data in a directory of the caller's (a second start on the same
//! directory finds the objects again).

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a private etcd could not be started.
#[derive(Debug, thiserror::Error)]
pub enum EtcdProcessError {
    /// There is no `etcd` on `PATH`.
    #[error("no etcd binary on PATH (Debian: apt-get install -y etcd-server)")]
    NotInstalled,
    /// Spawning or talking to it failed.
    #[error("etcd")]
    Io(#[from] std::io::Error),
    /// It did not report healthy in time; the tail of its log says why.
    #[error("etcd did not become healthy within {seconds} s: {log_tail}")]
    NotHealthy {
        /// How long we waited.
        seconds: u64,
        /// The last lines etcd wrote.
        log_tail: String,
    },
}

/// Whether an `etcd` binary is on `PATH`.
pub fn etcd_installed() -> bool {
    Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A running private etcd; dropping it kills the process (SIGKILL) and waits for it.
#[derive(Debug)]
pub struct EtcdProcess {
    child: Child,
    client_url: String,
    data_dir: PathBuf,
    tied: bool,
}

/// A free TCP port on `ip` (the kernel's choice; released before the caller's process binds it).
pub(crate) fn free_port(ip: impl Into<std::net::IpAddr>) -> std::io::Result<u16> {
    let ip = ip.into();
    Ok(TcpListener::bind((ip, 0))?.local_addr()?.port())
}

impl EtcdProcess {
    /// Starts etcd with its data in `data_dir` (created if missing), listening on `ip` at `port` for
    /// clients (0: a free port), and waits until `/health` says so. Its log goes to
    /// `<data_dir>.log` when `log` is `None`.
    ///
    /// With `tie_to_parent`, etcd runs under `sh` holding a pipe from this process and is killed when
    /// the pipe closes: it cannot outlive a test process that exits without dropping it (a shared
    /// etcd held in a `static`), even one that is killed.
    pub fn start(
        data_dir: &Path,
        ip: Ipv4Addr,
        port: u16,
        log: Option<&Path>,
        tie_to_parent: bool,
    ) -> Result<Self, EtcdProcessError> {
        if tie_to_parent {
            Self::start_with(data_dir, ip, port, log, Some(Path::new("")))
        } else {
            Self::start_with(data_dir, ip, port, log, None)
        }
    }

    /// [`EtcdProcess::start`]; `tied` is `Some(dir)` to tie etcd to this process and remove `dir`
    /// (when not empty) once it is gone.
    fn start_with(
        data_dir: &Path,
        ip: Ipv4Addr,
        port: u16,
        log: Option<&Path>,
        tied: Option<&Path>,
    ) -> Result<Self, EtcdProcessError> {
        let tie_to_parent = tied.is_some();
        if !etcd_installed() {
            return Err(EtcdProcessError::NotInstalled);
        }
        std::fs::create_dir_all(data_dir)?;
        let log_path = match log {
            Some(path) => path.to_owned(),
            None => data_dir.with_extension("log"),
        };
        let client_port = if port == 0 { free_port(ip)? } else { port };
        let peer_port = free_port(ip)?;
        let client_url = format!("http://{ip}:{client_port}");
        let peer_url = format!("http://{ip}:{peer_port}");
        let args = [
            "--name".to_owned(),
            "default".to_owned(),
            "--data-dir".to_owned(),
            data_dir.display().to_string(),
            "--listen-client-urls".to_owned(),
            client_url.clone(),
            "--advertise-client-urls".to_owned(),
            client_url.clone(),
            "--listen-peer-urls".to_owned(),
            peer_url.clone(),
            "--initial-advertise-peer-urls".to_owned(),
            peer_url.clone(),
            "--initial-cluster".to_owned(),
            format!("default={peer_url}"),
            // A single member elects itself after one election timeout: keep start-up short.
            "--heartbeat-interval".to_owned(),
            "20".to_owned(),
            "--election-timeout".to_owned(),
            "200".to_owned(),
        ];
        let log_file = std::fs::File::create(&log_path)?;
        let mut command = if tie_to_parent {
            let mut command = Command::new("sh");
            command
                .arg("-c")
                .arg(
                    r#"etcd "$@" & pid=$!; cat >/dev/null; kill -9 $pid; wait $pid; [ -z "$REMOVE_DIR" ] || rm -rf "$REMOVE_DIR""#,
                )
                .arg("etcd")
                .args(&args)
                .env("REMOVE_DIR", tied.unwrap_or(Path::new("")))
                .stdin(Stdio::piped());
            command
        } else {
            let mut command = Command::new("etcd");
            command.args(&args).stdin(Stdio::null());
            command
        };
        command.stdout(log_file.try_clone()?).stderr(log_file);
        let child = command.spawn()?;
        let mut process = Self {
            child,
            client_url,
            data_dir: data_dir.to_owned(),
            tied: tie_to_parent,
        };
        let timeout = Duration::from_secs(20);
        let deadline = Instant::now() + timeout;
        let addr = SocketAddr::from((ip, client_port));
        while !healthy(addr) {
            if Instant::now() >= deadline || process.child.try_wait()?.is_some() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let log_tail = log.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
                return Err(EtcdProcessError::NotHealthy {
                    seconds: timeout.as_secs(),
                    log_tail,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(process)
    }

    /// The client URL (`--etcd-servers`).
    pub fn client_url(&self) -> &str {
        &self.client_url
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A private etcd for this whole process, started on first use with its data in a temporary
    /// directory, tied to the process (see [`EtcdProcess::start`]; the directory is removed when the
    /// process exits): test suites share it and keep their clusters apart by `--etcd-prefix`.
    pub fn shared() -> Result<&'static EtcdProcess, String> {
        static SHARED: std::sync::OnceLock<Result<EtcdProcess, String>> = std::sync::OnceLock::new();
        SHARED
            .get_or_init(|| {
                let dir = tempfile::Builder::new()
                    .prefix("kube-mvp-etcd-")
                    .tempdir()
                    .map_err(|e| format!("etcd: {e}"))?
                    .keep();
                // The whole chain (`{:#}`): an I/O cause is the error's source, not in its Display.
                Self::start_with(&dir.join("data"), Ipv4Addr::LOCALHOST, 0, None, Some(&dir))
                    .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The process ID of etcd (of its `sh` wrapper when tied to the parent).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        // Closing the pipe makes a tied etcd's wrapper kill it and exit; a plain one is killed.
        drop(self.child.stdin.take());
        if !self.tied {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Whether etcd's `/health` on `addr` says `"health":"true"`.
pub(crate) fn healthy(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: etcd\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    body.contains(r#""health":"true""#)
}
