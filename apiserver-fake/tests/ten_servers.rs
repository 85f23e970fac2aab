//! A control plane of ten servers, as `cluster --config` runs it on etcd (every server its own process),
//! driven with kubectl as a user would: nine servers without `batch/v1` and one with it, so that every
//! Job request through the nine is proxied to the tenth, and every server's peer-aggregated `/apis`
//! lists `batch/v1`.
//!
//! Needs the `etcd` feature, etcd on PATH and kubectl >= 1.28.
#![cfg(feature = "etcd")]

mod support;

use support::demo::Demo;
use support::{kubectl_available, kubectl_ok as ok};

const SERVERS: usize = 10;

#[test]
fn ten_servers_proxy_to_the_one_that_serves_jobs() {
    if !support::etcd::etcd_on_path() || !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = String::from("servers:\n");
    for i in 0..SERVERS {
        // Versions alternate between the two minors of an upgrade; only the last serves batch/v1.
        let version = if i % 2 == 0 { "1.35" } else { "1.36" };
        let runtime = if i + 1 == SERVERS { "" } else { "batch/v1=false" };
        config.push_str(&format!(
            "- {{name: s{i}, version: \"{version}\", runtime-config: \"{runtime}\", \
             feature-gates: \"UnknownVersionInteroperabilityProxy=true\"}}\n"
        ));
    }
    config.push_str("store: etcd\nrun: processes\nlb: none\ncontrollers: false\n");
    let path = dir.path().join("ten.yaml");
    std::fs::write(&path, config).expect("write the config");
    let cluster_dir = dir.path().join("cluster");
    let mut demo = Demo::start(&cluster_dir, &["--config", path.to_str().expect("utf-8")]);
    let manifest = demo.wait_for_manifest(&cluster_dir);
    assert_eq!(
        manifest["servers"].as_array().map(Vec::len),
        Some(SERVERS),
        "{manifest}"
    );

    let kubeconfig = |i: usize| cluster_dir.join(format!("s{i}.kubeconfig"));
    ok(
        &kubeconfig(0),
        &["create", "job", "through-s0", "--image=busybox"],
    );
    for i in 0..SERVERS {
        // Served by s9, whichever server the request reaches; and listed in every server's discovery.
        let name = ok(
            &kubeconfig(i),
            &["get", "job", "through-s0", "-o", "jsonpath={.metadata.name}"],
        );
        assert_eq!(name, "through-s0", "through s{i}");
        let resources = ok(
            &kubeconfig(i),
            &["api-resources", "--api-group=batch", "-o", "name"],
        );
        assert!(resources.lines().any(|r| r == "jobs.batch"), "s{i}: {resources}");
    }
    drop(demo);
}
