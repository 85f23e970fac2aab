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

/// A [`Demo`] for kubectl tests, in a temporary directory of its own, started and up: `apiserver-fake
/// cluster --no-controller-manager` (the admission policy tests: no controller writes behind their
/// back), with kubectl ≥ 1.28 there to drive it.
pub struct KubectlDemo {
    /// The command (declared first: dropped, so killed, before its directory goes).
    pub demo: Demo,
    /// Its `cluster.json`.
    pub manifest: Value,
    /// Its `--dir`: PKI, kubeconfigs, and the files the test writes ([`Self::apply`]).
    pub dir: tempfile::TempDir,
}

impl KubectlDemo {
    /// `cluster --no-controller-manager [extra]` (the `demo` preset's servers unless `extra` says
    /// otherwise); `None`, after saying why the test is skipped, without kubectl ([`super::kubectl_available`]).
    pub fn start(extra: &[&str]) -> Option<Self> {
        Self::start_in(tempfile::tempdir().expect("tempdir"), extra)
    }

    /// [`Self::start`] with `--config DIR/cluster.yaml`, the file `config(DIR)` renders (so that it can
    /// name other files in the directory).
    pub fn with_config(config: impl FnOnce(&Path) -> String) -> Option<Self> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("cluster.yaml");
        std::fs::write(&file, config(dir.path())).expect("config");
        let file = file.display().to_string();
        Self::start_in(dir, &["--config", &file])
    }

    fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Option<Self> {
        if !super::kubectl_available() {
            return None;
        }
        let args: Vec<&str> = ["--no-controller-manager"].iter().chain(extra).copied().collect();
        let mut demo = Demo::start(dir.path(), &args);
        let manifest = demo.wait_for_manifest(dir.path());
        Some(Self { demo, manifest, dir })
    }

    /// The admin kubeconfig of server `name`.
    pub fn kubeconfig(&self, name: &str) -> std::path::PathBuf {
        kubeconfig(&self.manifest, name)
    }

    /// Writes `yaml` to `DIR/file` and runs `kubectl apply -f` on it through `kubeconfig`, which must
    /// succeed (else it panics with kubectl's stderr): kubectl's stdout, a line per object.
    pub fn apply(&self, kubeconfig: &Path, file: &str, yaml: &str) -> String {
        let path = self.dir.path().join(file);
        std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        super::kubectl_ok(kubeconfig, &["apply", "-f", &path.to_string_lossy()])
    }
}
