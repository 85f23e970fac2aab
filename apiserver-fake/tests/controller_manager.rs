//! The built binary's controller manager, driven from outside with kubectl: `apiserver-fake cluster`
//! runs one by default (so `kubectl delete ns` empties and removes a namespace, also through the
//! server that lacks the group of its objects), `--no-controller-manager` leaves namespaces
//! `Terminating`, and `apiserver-fake controller-manager --kubeconfig` started beside such a cluster
//! finishes them.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::demo::{Demo, server};
use support::{kubectl, kubectl_available};

/// How long a namespace may take to go: upstream's 5 s grace period and a few retries.
const GONE_WITHIN: Duration = Duration::from_secs(40);

fn kubeconfigs(demo: &mut Demo, dir: &Path) -> (PathBuf, PathBuf) {
    let manifest = demo.wait_for_manifest(dir);
    let kubeconfig = |name: &str| {
        PathBuf::from(
            server(&manifest, name)["kubeconfig"]
                .as_str()
                .expect("kubeconfig"),
        )
    };
    (kubeconfig("a"), kubeconfig("b"))
}

/// Polls `kubectl get ns NAME` until it says NotFound.
fn wait_until_namespace_is_gone(kubeconfig: &Path, name: &str) {
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let (found, _, err) = kubectl(kubeconfig, &["get", "namespace", name]);
        if !found && err.contains("NotFound") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "namespace {name} still there after {GONE_WITHIN:?}: {err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A namespace holding a Job (batch/v1: only `b` serves it) and a ConfigMap, made through `b`.
fn fill(b: &Path, name: &str) {
    let run = |args: &[&str]| {
        let (ok, out, err) = kubectl(b, args);
        assert!(ok, "kubectl {args:?}: {out}{err}");
    };
    run(&["create", "namespace", name]);
    run(&["-n", name, "create", "job", "doomed", "--image=busybox"]);
    run(&["-n", name, "create", "configmap", "doomed", "--from-literal=k=v"]);
}

#[test]
fn kubectl_delete_namespace_through_the_server_lacking_batch_empties_and_removes_it() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let (a, b) = kubeconfigs(&mut demo, dir.path());
    fill(&b, "tns");
    // `a` does not serve batch/v1 and its controller manager talks through `a`.
    let (ok, out, err) = kubectl(&a, &["delete", "namespace", "tns", "--wait=false"]);
    assert!(ok, "{out}{err}");
    assert_eq!(out, "namespace \"tns\" deleted\n");
    wait_until_namespace_is_gone(&a, "tns");
    let (ok, out, err) = kubectl(&b, &["create", "namespace", "tns"]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = kubectl(&b, &["-n", "tns", "get", "jobs,configmaps", "-o", "name"]);
    assert!(ok, "{err}");
    assert_eq!(out, "", "nothing resurrected");
}

/// `apiserver-fake controller-manager` as its own process, stopped when dropped.
struct ControllerManager(Child);

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn controller_manager_subcommand_finishes_what_a_cluster_without_one_leaves_terminating() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--no-controller-manager"]);
    let (a, b) = kubeconfigs(&mut demo, dir.path());
    fill(&b, "left");
    let (ok, out, err) = kubectl(&a, &["delete", "namespace", "left", "--wait=false"]);
    assert!(ok, "{out}{err}");
    let (_, phase, _) = kubectl(
        &a,
        &["get", "namespace", "left", "-o", "jsonpath={.status.phase}"],
    );
    assert_eq!(phase, "Terminating");
    let (refused, _, err) = kubectl(&b, &["-n", "left", "create", "configmap", "late"]);
    assert!(!refused);
    assert_eq!(
        err,
        "error: failed to create configmap: configmaps \"late\" is forbidden: unable to create new content in namespace left because it is being terminated\n"
    );

    let _manager = ControllerManager(
        Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .arg("controller-manager")
            .arg("--kubeconfig")
            .arg(&a)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the controller manager starts"),
    );
    wait_until_namespace_is_gone(&a, "left");
    let (_, jobs, _) = kubectl(&b, &["get", "jobs", "-A", "-o", "name"]);
    assert_eq!(jobs, "", "the Job went with its namespace");
}

#[test]
fn controller_manager_subcommand_refuses_bad_flags_in_one_line() {
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .arg("controller-manager")
            .args(args)
            .output()
            .expect("runs");
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert_eq!(
        run(&["--kubeconfig", "/nonexistent", "--controllers=*,-nope"]),
        "error: \"nope\" is not in the list of known controllers\n"
    );
    let err = run(&["--kubeconfig", "/nonexistent"]);
    assert!(
        err.starts_with("error: invalid kubeconfig /nonexistent: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
