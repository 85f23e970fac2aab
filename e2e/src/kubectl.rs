//! Running the real kubectl against a fixture server.
//!
//! kubectl is optional: [`Kubectl::find`] returns `None` (and prints why the test is skipped) when it is
//! not installed or older than 1.[`MIN_KUBECTL_MINOR`]. Every run gets the server's admin kubeconfig
//! and a discovery cache inside the cluster's temporary directory, so runs never share state with the
//! user's `~/.kube` and leave no files behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::error::{FixtureError, Result};
use crate::exchange::redact_text;

/// kubectl bound to one server's kubeconfig.
#[derive(Debug, Clone)]
pub struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache_dir: PathBuf,
}

/// The outcome of one kubectl run, as snapshotted (ports redacted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KubectlOutput {
    /// The command line after `kubectl --kubeconfig …`.
    pub command: String,
    /// Whether kubectl exited with status 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// The oldest kubectl minor version (of major version 1) the kubectl tests are written for.
pub const MIN_KUBECTL_MINOR: u32 = 28;

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

impl Kubectl {
    /// The kubectl binary on `PATH` (or `$KUBECTL`) if it is at least 1.[`MIN_KUBECTL_MINOR`], or
    /// `None` after printing that kubectl tests are skipped and why.
    pub fn find() -> Option<PathBuf> {
        let candidate = std::env::var_os("KUBECTL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("kubectl"));
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
             $KUBECTL at one to run it"
        );
        None
    }

    /// kubectl `binary` using `kubeconfig`, caching discovery under `scratch_dir`.
    pub fn new(binary: PathBuf, kubeconfig: PathBuf, scratch_dir: &Path) -> Self {
        let stem = kubeconfig
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self {
            binary,
            cache_dir: scratch_dir.join(format!("kubectl-cache-{stem}")),
            kubeconfig,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs `kubectl args…` to completion (at most `timeout`; then it is killed and reported as failed).
    pub async fn run(&self, args: &[&str], timeout: Duration) -> Result<KubectlOutput> {
        let child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| FixtureError::Kubectl(format!("failed to run {}: {e}", self.binary.display())))?;
        let command = args.join(" ");
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(output)) => Ok(KubectlOutput {
                command,
                success: output.status.success(),
                stdout: redact_text(&String::from_utf8_lossy(&output.stdout)),
                stderr: redact_text(&String::from_utf8_lossy(&output.stderr)),
            }),
            Ok(Err(e)) => Err(FixtureError::Kubectl(format!("kubectl {command}: {e}"))),
            // Dropping the wait future drops the child, which kill_on_drop kills.
            Err(_) => Err(FixtureError::Timeout {
                what: format!("kubectl {command}"),
                seconds: timeout.as_secs(),
            }),
        }
    }

    /// Starts a long-running kubectl (e.g. `get jobs --watch`), returns the first `lines` lines of its
    /// standard output (or fewer when `timeout` passes first), and kills it.
    pub async fn stream_lines(&self, args: &[&str], lines: usize, timeout: Duration) -> Result<Vec<String>> {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| FixtureError::Kubectl(format!("failed to run {}: {e}", self.binary.display())))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| FixtureError::Kubectl("no stdout pipe".to_owned()))?;
        let mut reader = BufReader::new(stdout).lines();
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while out.len() < lines {
            match tokio::time::timeout_at(deadline, reader.next_line()).await {
                Ok(Ok(Some(line))) => out.push(redact_text(&line)),
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
}
