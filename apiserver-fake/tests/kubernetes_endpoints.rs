//! The `default/kubernetes` Service's endpoints kept current as servers come and go, as kube-apiserver's
//! lease endpoint reconciler keeps them: `apiserver-fake cluster --etcd` (every server its own process),
//! read with kubectl as a user would. A server stopped gracefully (SIGTERM) leaves the EndpointSlice at
//! once; a crashed one (SIGKILL) once its master lease lapses (15 s TTL, 10 s refresh).
//!
//! Needs the `etcd` feature, etcd on PATH and kubectl >= 1.28.
#![cfg(feature = "etcd")]

mod support;

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::demo::{Demo, server};
use support::{kubectl, kubectl_available};

/// The addresses of the `kubernetes` EndpointSlice, as kubectl prints them, sorted.
fn slice_addresses(kubeconfig: &Path) -> Option<Vec<String>> {
    let (ok, out, _) = kubectl(
        kubeconfig,
        &[
            "get",
            "endpointslice",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "jsonpath={.endpoints[*].addresses[0]}",
        ],
    );
    ok.then(|| {
        let mut addresses: Vec<String> = out.split_whitespace().map(str::to_owned).collect();
        addresses.sort();
        addresses
    })
}

/// Polls until the slice lists exactly `want`, failing after `within`.
fn wait_for(kubeconfig: &Path, want: &[&str], within: Duration) {
    let mut got = None;
    let what = format!("the kubernetes EndpointSlice to list {want:?}");
    kube_mvp_testing::eventually_blocking(&what, within, Duration::from_millis(200), || {
        got = slice_addresses(kubeconfig);
        got.as_deref().is_some_and(|g| g == want).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}; it lists {got:?}"));
}

fn pid_of(manifest: &serde_json::Value, name: &str) -> Pid {
    Pid::from_raw(
        server(manifest, name)["pid"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .expect("pid"),
    )
}

#[test]
fn the_kubernetes_service_lists_the_servers_alive() {
    if !support::etcd::etcd_on_path() || !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("three.yaml");
    std::fs::write(
        &config,
        "servers:\n- {name: a, version: \"1.36\"}\n- {name: b, version: \"1.36\"}\n- {name: c, version: \"1.36\"}\n\
         store: etcd\nrun: processes\nlb: none\ncontrollers: false\n",
    )
    .expect("write the config");
    let cluster_dir = dir.path().join("cluster");
    let mut demo = Demo::start(&cluster_dir, &["--config", config.to_str().expect("utf-8")]);
    let manifest = demo.wait_for_manifest(&cluster_dir);
    let kubeconfig = cluster_dir.join("a.kubeconfig");
    wait_for(
        &kubeconfig,
        &["127.0.0.1", "127.0.0.2", "127.0.0.3"],
        Duration::from_secs(5),
    );

    // Graceful: the server removes its own address as it stops.
    kill(pid_of(&manifest, "c"), Signal::SIGTERM).expect("SIGTERM");
    wait_for(&kubeconfig, &["127.0.0.1", "127.0.0.2"], Duration::from_secs(15));
    // A crash: the address goes once the master lease lapses (TTL 15 s; a reconcile every 10 s).
    kill(pid_of(&manifest, "b"), Signal::SIGKILL).expect("SIGKILL");
    wait_for(&kubeconfig, &["127.0.0.1"], Duration::from_secs(40));
    // The Service itself stays, with its cluster IP.
    let (ok, out, err) = kubectl(
        &kubeconfig,
        &["get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "10.96.0.1");
    drop(demo);
}
