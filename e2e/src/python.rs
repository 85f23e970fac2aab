//! Running the official Kubernetes Python client (PyPI `kubernetes`) against a fixture server.
//!
//! The client is optional, like kubectl: [`PythonClient::find`] returns `None` (and prints why the test
//! is skipped) when `python3` or its `kubernetes` package is missing, unless
//! [`REQUIRE_PYTHON_CLIENT_ENV`] is `1` (CI), where a missing client is a failure. The scripts live in
//! the crate's `python/` directory; each takes a kubeconfig and prints one JSON document, which the
//! Rust test asserts and snapshots.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::error::{FixtureError, Result};

/// `KUBE_MVP_REQUIRE_PYTHON_CLIENT=1` makes a missing Python client fail the tests that need it.
pub const REQUIRE_PYTHON_CLIENT_ENV: &str = "KUBE_MVP_REQUIRE_PYTHON_CLIENT";

/// `python3` (or `$PYTHON`) with the official Kubernetes client importable.
#[derive(Debug, Clone)]
pub struct PythonClient {
    python: PathBuf,
    /// The client's version (`kubernetes.__version__`).
    pub version: String,
}

impl PythonClient {
    /// The interpreter if `import kubernetes` works in it; otherwise prints that the test is skipped and
    /// why and returns `None`, or panics when [`REQUIRE_PYTHON_CLIENT_ENV`] is `1`.
    pub fn find() -> Option<Self> {
        let python = std::env::var_os("PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("python3"));
        let output = std::process::Command::new(&python)
            .args(["-c", "import kubernetes; print(kubernetes.__version__)"])
            .stdin(Stdio::null())
            .output();
        let why = match output {
            Ok(output) if output.status.success() => {
                let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
                return Some(Self { python, version });
            }
            Ok(output) => format!(
                "`import kubernetes` failed in {}: {}",
                python.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            Err(e) => format!("{} did not run: {e}", python.display()),
        };
        let hint = "install it with `python3 -m pip install kubernetes`";
        if std::env::var(REQUIRE_PYTHON_CLIENT_ENV).is_ok_and(|v| v == "1") {
            panic!("{REQUIRE_PYTHON_CLIENT_ENV}=1 but the official Python client is missing ({why}); {hint}");
        }
        eprintln!("skipped: {why}; this test needs the official Kubernetes Python client: {hint}");
        None
    }

    /// The path of the crate's Python script `name` (in `e2e/python/`).
    pub fn script(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(name)
    }

    /// Runs `script args…` to completion (killed after `timeout`) and parses the JSON document it
    /// printed. A script that fails or prints something else is an error carrying its output.
    pub async fn run_json(
        &self,
        script: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<serde_json::Value> {
        let command_line = format!("{} {}", script.display(), args.join(" "));
        let child = Command::new(&self.python)
            .arg(script)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| FixtureError::Python(format!("{command_line}: {e}")))?;
        let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => return Err(FixtureError::Python(format!("{command_line}: {e}"))),
            Err(_) => {
                return Err(FixtureError::Timeout {
                    what: command_line,
                    seconds: timeout.as_secs(),
                });
            }
        };
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(FixtureError::Python(format!(
                "{command_line} exited with {}:\n{stdout}\n{stderr}",
                output.status
            )));
        }
        serde_json::from_str(&stdout).map_err(|e| {
            FixtureError::Python(format!(
                "{command_line} printed no JSON ({e}):\n{stdout}\n{stderr}"
            ))
        })
    }
}
