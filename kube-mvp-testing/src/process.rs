//! [`ClusterProcess`]: the `apiserver-fake cluster` command as a script runs it — started with its own
//! arguments, waited on through the `cluster.json` it writes last, and stopped. [`crate::Cluster`] is
//! built on it; tests of the binary's own command line use it directly.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::eventually::POLL_INTERVAL;

/// How long [`ClusterProcess::stop`] waits for the command to clean up after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// A running `apiserver-fake cluster --port 0 --dir DIR ARGS…`, its output (stdout and stderr) in
/// `DIR/cluster.log`. Dropping it stops it as [`Self::stop`] does (SIGTERM, so it removes its
/// containers, balancer and `cluster.json`; SIGKILL after [`STOP_GRACE`]).
///
/// Its [`child`](Self::child) is the command's process, for a test that injects its own faults (a
/// SIGKILL as a crash, SIGINT as Ctrl-C) and waits for it; the methods here see how it ended (a reaped
/// child keeps its exit status).
#[derive(Debug)]
pub struct ClusterProcess {
    /// The `cluster` command's process.
    pub child: Child,
    dir: PathBuf,
}

impl ClusterProcess {
    /// Starts `binary cluster --port 0 --dir dir args…` (stdin closed, output to `dir/cluster.log`).
    /// `dir` is created if missing. Returns once the process is spawned; [`Self::wait_for_manifest`]
    /// waits for the cluster to be up.
    pub fn start<S: AsRef<OsStr>>(binary: &Path, dir: &Path, args: &[S]) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let log_path = dir.join("cluster.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| Error::io(format!("create {}", log_path.display()), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| Error::io(format!("open {}", log_path.display()), e))?;
        let child = Command::new(binary)
            .args(["cluster", "--port", "0", "--dir"])
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| Error::io(format!("run {}", binary.display()), e))?;
        Ok(Self {
            child,
            dir: dir.to_owned(),
        })
    }

    /// The process id of the `cluster` command.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The cluster's directory (`--dir`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The command's output: `dir/cluster.log`.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("cluster.log")
    }

    /// The last `lines` non-empty lines of [`Self::log_path`], joined by ` | `.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        tail[tail.len().saturating_sub(lines)..].join(" | ")
    }

    /// How the command exited, if it has (without waiting).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        self.child
            .try_wait()
            .map_err(|e| Error::io("wait for apiserver-fake cluster", e))
    }

    /// One look for `dir/cluster.json`: `Some` manifest once it is there (the binary writes it
    /// atomically, last, once every server is ready, so it is parsed at once and an incomplete file is
    /// [`Error::Manifest`]); [`Error::ClusterExited`] (with the end of the log) when the command
    /// exited without it; `None` while it is still starting.
    pub fn manifest(&mut self) -> Result<Option<Value>> {
        let path = self.dir.join("cluster.json");
        if let Ok(text) = std::fs::read_to_string(&path) {
            return serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| Error::Manifest {
                    path,
                    message: format!("{e}: {text}"),
                });
        }
        match self.try_wait()? {
            Some(status) => Err(Error::ClusterExited {
                status: status.to_string(),
                log: self.log_tail(3),
            }),
            None => Ok(None),
        }
    }

    /// [`Self::manifest`] every [`POLL_INTERVAL`] until the manifest is there (or the command exits),
    /// for at most `timeout` ([`Error::Timeout`], naming the end of the log).
    pub async fn wait_for_manifest(&mut self, timeout: Duration) -> Result<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(manifest) = self.manifest()? {
                return Ok(manifest);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(self.timeout(timeout));
            }
            tokio::time::sleep(POLL_INTERVAL).await; // poll interval
        }
    }

    /// [`Self::wait_for_manifest`] on this thread, polling every `interval` (a test of the binary
    /// polls every few milliseconds, as a tight shell loop would, to see that the file is complete
    /// whenever it is there).
    pub fn wait_for_manifest_blocking(&mut self, timeout: Duration, interval: Duration) -> Result<Value> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(manifest) = self.manifest()? {
                return Ok(manifest);
            }
            if std::time::Instant::now() >= deadline {
                return Err(self.timeout(timeout));
            }
            std::thread::sleep(interval); // poll interval
        }
    }

    fn timeout(&self, timeout: Duration) -> Error {
        Error::Timeout {
            what: format!(
                "{} (the cluster's log: {})",
                self.dir.join("cluster.json").display(),
                self.log_tail(3)
            ),
            seconds: timeout.as_secs(),
        }
    }

    /// Stops the command: SIGTERM (it stops its servers, etcd, balancer and containers and removes
    /// `cluster.json`), up to [`STOP_GRACE`] for it to exit, then SIGKILL; returns how it exited
    /// (a clean stop is success). Blocks this thread while it waits.
    pub fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.try_wait()? {
            return Ok(status);
        }
        if send(self.id(), Signal::Term).is_ok() {
            let deadline = std::time::Instant::now() + STOP_GRACE;
            while std::time::Instant::now() < deadline {
                if let Some(status) = self.try_wait()? {
                    return Ok(status);
                }
                std::thread::sleep(POLL_INTERVAL); // poll interval
            }
        }
        self.kill()
    }

    /// Kills the command (SIGKILL: it cannot clean up, so `cluster.json` stays behind) and waits for
    /// it; returns how it exited.
    pub fn kill(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.try_wait()? {
            return Ok(status);
        }
        let _ = self.child.kill();
        self.child
            .wait()
            .map_err(|e| Error::io("wait for apiserver-fake cluster", e))
    }
}

impl Drop for ClusterProcess {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The signals the fixture sends.
#[derive(Clone, Copy)]
pub(crate) enum Signal {
    Kill,
    Stop,
    Cont,
    Term,
}

/// Sends `signal` to process `pid`.
#[cfg(unix)]
pub(crate) fn send(pid: u32, signal: Signal) -> std::result::Result<(), String> {
    use nix::sys::signal::{Signal as S, kill};
    let pid = i32::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    let signal = match signal {
        Signal::Kill => S::SIGKILL,
        Signal::Stop => S::SIGSTOP,
        Signal::Cont => S::SIGCONT,
        Signal::Term => S::SIGTERM,
    };
    kill(nix::unistd::Pid::from_raw(pid), signal).map_err(|e| format!("{signal} to pid {pid}: {e}"))
}

/// Signals need a Unix system.
#[cfg(not(unix))]
pub(crate) fn send(_pid: u32, _signal: Signal) -> std::result::Result<(), String> {
    Err("signals need a Unix system".to_owned())
}
