//! The real kubectl, run against one server's (or the load balancer's) kubeconfig.
//!
//! kubectl is optional: [`Kubectl::find`] returns `None` (and prints why the test is skipped) when it is
//! not installed or older than 1.[`MIN_KUBECTL_MINOR`]. Every run gets its kubeconfig and a discovery
//! cache in a scratch directory (the cluster's), so runs never share state with the user's `~/.kube`
//! and leave no files behind; `$KUBECONFIG` is ignored.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::error::{Error, Result};

/// The oldest kubectl minor version (of major version 1) the fixture is written for.
pub const MIN_KUBECTL_MINOR: u32 = 28;

/// The environment variable naming the kubectl binary to use instead of the one on `PATH`.
pub const KUBECTL_ENV: &str = "KUBECTL";

/// kubectl bound to one kubeconfig.
#[derive(Debug, Clone)]
pub struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache_dir: PathBuf,
    filter: Option<fn(&str) -> String>,
}

/// The outcome of one kubectl run (serializable, for snapshots).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KubectlOutput {
    /// The command line after `kubectl --kubeconfig …`.
    pub command: String,
    /// Whether kubectl exited with status 0.
    pub success: bool,
    /// Standard output (through the output filter, if any).
    pub stdout: String,
    /// Standard error (through the output filter, if any).
    pub stderr: String,
}

/// The `(major, minor)` client version in the output of `kubectl version --client -o json`.
///
/// Vendor builds append to the minor version (`"32+"`); only its leading digits count. `None` when
/// the output is not such a document.
pub fn client_version(json: &[u8]) -> Option<(u32, u32)> {
    fn number(value: &serde_json::Value) -> Option<u32> {
        let text = value.as_str()?;
        let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        text[..end].parse().ok()
    }
    let document: serde_json::Value = serde_json::from_slice(json).ok()?;
    let client = document.get("clientVersion")?;
    Some((number(client.get("major")?)?, number(client.get("minor")?)?))
}

/// The kubectl to run: `$KUBECTL`, else `kubectl` (looked up on `PATH` when it runs). Unchecked; see
/// [`Kubectl::find`].
pub fn binary() -> PathBuf {
    std::env::var_os(KUBECTL_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

impl Kubectl {
    /// The kubectl binary (see [`binary`]) if it is at least 1.[`MIN_KUBECTL_MINOR`], or `None` after
    /// printing that the calling test is skipped and why.
    pub fn find() -> Option<PathBuf> {
        let candidate = binary();
        let output = std::process::Command::new(&candidate)
            .args(["version", "--client", "-o", "json"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        let why = match output {
            Ok(output) if output.status.success() => match client_version(&output.stdout) {
                Some(version) if version >= (1, MIN_KUBECTL_MINOR) => return Some(candidate),
                Some((major, minor)) => format!("{} is kubectl {major}.{minor}", candidate.display()),
                None => format!("{} printed no client version", candidate.display()),
            },
            Ok(output) => format!(
                "`{} version --client` failed ({})",
                candidate.display(),
                output.status
            ),
            Err(e) => format!(
                "kubectl is not installed ({} did not run: {e})",
                candidate.display()
            ),
        };
        eprintln!(
            "skipped: {why}; this test needs kubectl >= 1.{MIN_KUBECTL_MINOR}: install one or point \
             ${KUBECTL_ENV} at one to run it"
        );
        None
    }

    /// kubectl `binary` using `kubeconfig`, caching discovery under `scratch_dir` (one cache per
    /// kubeconfig name).
    pub fn new(binary: PathBuf, kubeconfig: PathBuf, scratch_dir: &Path) -> Self {
        let stem = kubeconfig
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self {
            binary,
            cache_dir: scratch_dir.join(format!("kubectl-cache-{stem}")),
            kubeconfig,
            filter: None,
        }
    }

    /// Passes stdout, stderr and every streamed line through `filter` (e.g. one that redacts ports for
    /// snapshots).
    pub fn with_output_filter(mut self, filter: fn(&str) -> String) -> Self {
        self.filter = Some(filter);
        self
    }

    /// The kubeconfig this kubectl uses.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn filtered(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes);
        match self.filter {
            Some(filter) => filter(&text),
            None => text.into_owned(),
        }
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(&self.binary);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null());
        command
    }

    fn spawn_error(&self, e: std::io::Error) -> Error {
        Error::Kubectl(format!("failed to run {}: {e}", self.binary.display()))
    }

    /// Runs `kubectl args…` to completion (at most `timeout`; then it is killed and this fails with
    /// [`Error::Timeout`]).
    pub async fn run(&self, args: &[&str], timeout: Duration) -> Result<KubectlOutput> {
        let child = tokio::process::Command::from(self.command(args))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        let command = args.join(" ");
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(output)) => Ok(KubectlOutput {
                command,
                success: output.status.success(),
                stdout: self.filtered(&output.stdout),
                stderr: self.filtered(&output.stderr),
            }),
            Ok(Err(e)) => Err(Error::Kubectl(format!("kubectl {command}: {e}"))),
            // Dropping the wait future drops the child, which kill_on_drop kills.
            Err(_) => Err(Error::Timeout {
                what: format!("kubectl {command}"),
                seconds: timeout.as_secs(),
            }),
        }
    }

    /// Runs `kubectl args…` to completion on this thread, without a deadline: for synchronous tests
    /// and for commands that end by themselves.
    pub fn run_blocking(&self, args: &[&str]) -> Result<KubectlOutput> {
        let output = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| self.spawn_error(e))?;
        Ok(KubectlOutput {
            command: args.join(" "),
            success: output.status.success(),
            stdout: self.filtered(&output.stdout),
            stderr: self.filtered(&output.stderr),
        })
    }

    /// Starts a long-running kubectl (e.g. `get jobs --watch`), returns the first `lines` lines of its
    /// standard output (or fewer when `timeout` passes first), and kills it.
    pub async fn stream_lines(&self, args: &[&str], lines: usize, timeout: Duration) -> Result<Vec<String>> {
        let mut child = tokio::process::Command::from(self.command(args))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error::Kubectl("no stdout pipe".to_owned()))?;
        let mut reader = BufReader::new(stdout).lines();
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while out.len() < lines {
            match tokio::time::timeout_at(deadline, reader.next_line()).await {
                Ok(Ok(Some(line))) => out.push(self.filtered(line.as_bytes())),
                _ => break,
            }
        }
        let _ = child.kill().await;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_version_reads_vendor_minor_versions() {
        let json = br#"{"clientVersion": {"major": "1", "minor": "32+", "gitVersion": "v1.32.4-x"},
                        "kustomizeVersion": "v5.5.0"}"#;
        assert_eq!(client_version(json), Some((1, 32)));
        assert_eq!(
            client_version(br#"{"clientVersion": {"major": "1", "minor": "20"}}"#),
            Some((1, 20))
        );
    }

    #[test]
    fn client_version_rejects_other_documents() {
        for json in [
            &b"Client Version: v1.32.4"[..],
            br#"{"serverVersion": {"major": "1", "minor": "32"}}"#,
            br#"{"clientVersion": {"major": "1", "minor": "+"}}"#,
            br#"{"clientVersion": {"major": 1, "minor": 32}}"#,
        ] {
            assert_eq!(client_version(json), None, "{}", String::from_utf8_lossy(json));
        }
    }

    #[test]
    fn old_versions_are_below_the_minimum() {
        assert!((1, 20) < (1, MIN_KUBECTL_MINOR));
        assert!((1, 28) >= (1, MIN_KUBECTL_MINOR));
        assert!((2, 0) >= (1, MIN_KUBECTL_MINOR));
    }

    #[test]
    fn a_missing_binary_is_an_error_not_a_panic() {
        let kubectl = Kubectl::new(
            PathBuf::from("/nonexistent/kubectl"),
            PathBuf::from("/nonexistent/a.kubeconfig"),
            Path::new("/nonexistent"),
        );
        let err = kubectl.run_blocking(&["get", "pods"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("kubectl: failed to run /nonexistent/kubectl: "),
            "{err}"
        );
    }
}
