//! The built binary's `cluster` command as a script runs it: started, waited on through
//! `cluster.json` only, and stopped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::TestClient;

/// A running `apiserver-fake cluster`; dropping it kills the command (SIGKILL).
pub struct Demo {
    pub child: Child,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    /// `apiserver-fake cluster --port 0 --dir DIR [extra]`.
    pub fn start(dir: &Path, extra: &[&str]) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .args(["cluster", "--port", "0", "--dir"])
            .arg(dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        Self { child }
    }

    /// Polls for `cluster.json` every 2 ms, as a tight shell loop would, and parses it at once.
    pub fn wait_for_manifest(&mut self, dir: &Path) -> Value {
        let path = dir.join("cluster.json");
        let what = format!("{} to be written", path.display());
        let text = kube_mvp_testing::eventually_blocking(
            &what,
            Duration::from_secs(60),
            Duration::from_millis(2),
            || {
                let text = std::fs::read_to_string(&path).ok();
                if text.is_none()
                    && let Some(status) = self.child.try_wait().expect("wait")
                {
                    panic!("the cluster exited before writing cluster.json: {status}");
                }
                text
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("cluster.json is complete when it appears ({e}): {text}"))
    }
}

/// Server `name` in a `cluster.json`.
pub fn server<'a>(manifest: &'a Value, name: &str) -> &'a Value {
    manifest["servers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("server {name} in {manifest}"))
}

/// The kubeconfig of server `name` in a `cluster.json`.
pub fn kubeconfig(manifest: &Value, name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(server(manifest, name)["kubeconfig"].as_str().expect("kubeconfig"))
}

/// An admin client of server `s` of the cluster in `dir`.
pub fn admin(dir: &Path, s: &Value) -> TestClient {
    TestClient::new(
        s["url"].as_str().expect("url"),
        &dir.join("ca.crt"),
        Some((&dir.join("admin.crt"), &dir.join("admin.key"))),
    )
}
