//! The built binary's controller manager, driven from outside with kubectl: `apiserver-fake cluster`
//! runs one by default (so `kubectl delete ns` empties and removes a namespace, also through the
//! server that lacks the group of its objects), `--no-controller-manager` leaves namespaces
//! `Terminating`, and `apiserver-fake controller-manager --kubeconfig` started beside such a cluster
//! finishes them; with its flags (`--concurrent-gc-syncs`, `--bind-address`, `--secure-port`) it serves
//! its metrics over HTTPS, read with curl.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::demo::Demo;
use support::{kubectl, kubectl_available};

/// How long a namespace may take to go: upstream's 5 s grace period and a few retries.
const GONE_WITHIN: Duration = Duration::from_secs(40);

fn kubeconfigs(demo: &mut Demo, dir: &Path) -> (PathBuf, PathBuf) {
    let manifest = demo.wait_for_manifest(dir);
    let kubeconfig = |name: &str| support::demo::kubeconfig(&manifest, name);
    (kubeconfig("a"), kubeconfig("b"))
}

/// Polls `kubectl get ns NAME` until it says NotFound.
fn wait_until_namespace_is_gone(kubeconfig: &Path, name: &str) {
    until_not_found(kubeconfig, &["get", "namespace", name]);
}

/// Polls `kubectl args` (every 200 ms, for [`GONE_WITHIN`] at most) until it says NotFound.
fn until_not_found(kubeconfig: &Path, args: &[&str]) {
    let mut last = String::new();
    let what = format!("kubectl {args:?} to say NotFound");
    kube_mvp_testing::eventually_blocking(&what, GONE_WITHIN, Duration::from_millis(200), || {
        let (found, _, err) = kubectl(kubeconfig, args);
        let gone = !found && err.contains("NotFound");
        last = err;
        gone.then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}; last: {last}"));
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
            .arg("--secure-port=0")
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

/// A port nothing listens on now (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `curl -sk https://ADDRESS/PATH`: (HTTP status, body).
fn curl(address: &str, path: &str) -> (String, String) {
    let output = Command::new("curl")
        .args(["-sk", "-w", "\n%{http_code}", &format!("https://{address}{path}")])
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.to_owned(), body.to_owned())
}

#[test]
fn controller_manager_serves_metrics_on_its_secure_port_with_its_flags() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--no-controller-manager"]);
    let (a, b) = kubeconfigs(&mut demo, dir.path());
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .arg("controller-manager")
        .arg("--kubeconfig")
        .arg(&a)
        .args([
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--concurrent-gc-syncs=2",
            "--concurrent-namespace-syncs=1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the controller manager starts");
    let stderr = child.stderr.take().expect("stderr");
    let _manager = ControllerManager(child);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let serving = lines
        .find_map(|line| line.ok().filter(|l| l.starts_with("Serving securely on ")))
        .expect("it says where it serves");
    assert_eq!(serving, format!("Serving securely on {address}"));
    // Keep reading its log so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));

    // A ConfigMap owned by an owner that does not exist: the collector's queue counts it, and deletes it.
    let orphan = dir.path().join("orphan.json");
    std::fs::write(
        &orphan,
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orphan", "namespace": "default",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
            "uid": "6f1d4c4e-0000-4000-8000-000000000000"}]}}"#,
    )
    .expect("manifest");
    let (ok, out, err) = kubectl(&b, &["create", "-f", orphan.to_str().expect("utf-8")]);
    assert!(ok, "{out}{err}");
    // The dangling dependent goes.
    until_not_found(&b, &["get", "configmap", "orphan"]);

    let (code, body) = curl(&address, "/metrics");
    assert_eq!(code, "200", "{body}");
    let adds = body
        .lines()
        .find_map(|l| l.strip_prefix("workqueue_adds_total{name=\"garbage_collector_attempt_to_delete\"} "))
        .unwrap_or_else(|| panic!("no attempt-to-delete adds in:\n{body}"));
    assert!(adds.parse::<u64>().expect("a count") >= 1, "{adds}");
    assert!(
        body.lines()
            .any(|l| l.starts_with("garbagecollector_controller_resources_sync_error_total ")),
        "{body}"
    );
    assert_eq!(curl(&address, "/healthz"), ("200".to_owned(), "ok".to_owned()));
    assert_eq!(
        curl(&address, "/nope"),
        ("404".to_owned(), "404 page not found\n".to_owned())
    );

    // The port is taken now: a second one says so in one line and exits.
    let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .arg("controller-manager")
        .arg("--kubeconfig")
        .arg(&a)
        .args(["--bind-address=127.0.0.1", &format!("--secure-port={port}")])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.starts_with(&format!("error: failed to listen on {address}: ")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn controller_manager_refuses_bad_worker_counts_and_ports() {
    for flag in [
        "--concurrent-gc-syncs=-1",
        "--concurrent-namespace-syncs=many",
        "--secure-port=65536",
        "--bind-address=localhost:1",
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .args(["controller-manager", "--kubeconfig", "/nonexistent", flag])
            .output()
            .expect("runs");
        assert!(!output.status.success(), "{flag}");
        let err = String::from_utf8_lossy(&output.stderr);
        let name = flag.split_once('=').map_or(flag, |(name, _)| name);
        assert!(
            err.starts_with("error: invalid value ") && err.lines().next().is_some_and(|l| l.contains(name)),
            "{flag}: {err}"
        );
    }
}
