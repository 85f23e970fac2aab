//! The built binary's `cluster` command as a script runs it: started, waited on through
//! `cluster.json` only, and stopped — the shared fixture's [`ClusterProcess`] with this crate's binary.

use std::path::Path;
use std::time::Duration;

use kube_mvp_testing::ClusterProcess;
use serde_json::Value;

use super::TestClient;

/// A running `apiserver-fake cluster` (this crate's binary, its output in `DIR/cluster.log`): the
/// shared fixture's [`ClusterProcess`] (so `demo.child` is the command's process), except that
/// dropping it kills the command (SIGKILL, as a crash would; a test wanting a clean stop signals it).
pub struct Demo(ClusterProcess);

impl std::ops::Deref for Demo {
    type Target = ClusterProcess;
    fn deref(&self) -> &ClusterProcess {
        &self.0
    }
}

impl std::ops::DerefMut for Demo {
    fn deref_mut(&mut self) -> &mut ClusterProcess {
        &mut self.0
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

impl Demo {
    /// `apiserver-fake cluster --port 0 --dir DIR [extra]`.
    pub fn start(dir: &Path, extra: &[&str]) -> Self {
        let binary = Path::new(env!("CARGO_BIN_EXE_apiserver-fake"));
        Self(ClusterProcess::start(binary, dir, extra).unwrap_or_else(|e| panic!("{e}")))
    }

    /// Polls for `cluster.json` in `dir` (the directory it was started in) every 2 ms, as a tight
    /// shell loop would, for at most 60 s, and parses it at once (it must be complete whenever it is
    /// there); panics if the cluster exits first.
    pub fn wait_for_manifest(&mut self, dir: &Path) -> Value {
        assert_eq!(dir, self.0.dir(), "the directory the cluster was started in");
        self.0
            .wait_for_manifest_blocking(Duration::from_secs(60), Duration::from_millis(2))
            .unwrap_or_else(|e| panic!("{e}"))
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
