//! The fixture behind a load balancer ([`ClusterBuilder::load_balancer`]), as a production HA control
//! plane is: kubectl with the balancer's one kubeconfig reaches every server in turn (round robin per
//! connection), never gets a false 404 from the server without batch/v1 (it proxies), and keeps being
//! answered when a server is killed (the balancer skips it).
//!
//! HAProxy's variant needs `haproxy` on `PATH`; without it the test says it is skipped (and fails
//! when `KUBE_MVP_REQUIRE_HAPROXY=1`, as CI sets it).

mod support;

use std::time::Duration;

use e2e::{ClusterBuilder, LoadBalancerKind, TestCluster, eventually};
use support::*;

const REQUIRE_HAPROXY: &str = "KUBE_MVP_REQUIRE_HAPROXY";

/// `a` and `c` serve batch/v1, `b` does not (it proxies Jobs to them); 1.36 servers, a balancer of
/// `kind` in front, no controller manager (its requests would go to the servers too).
async fn behind(kind: LoadBalancerKind) -> TestCluster {
    let m = in_mode(e2e::PeerResolutionMode::Discovery);
    let m2 = m.clone();
    let cluster = ClusterBuilder::new()
        .server("a", m.clone())
        .server("b", move |s| m2(s).runtime_config("batch/v1=false"))
        .server("c", m)
        .without_controller_manager()
        .load_balancer(kind)
        .start()
        .await
        .expect("cluster starts");
    wait_until_b_reaches(&cluster, &["a", "c"]).await;
    cluster
}

/// The Jobs lists server `name` answered since `mark` for a client of its own (not proxied to it).
fn lists_answered_by(cluster: &TestCluster, name: &str, mark: usize) -> usize {
    cluster
        .server(name)
        .expect("server")
        .served_requests()
        .iter()
        .skip(mark)
        .filter(|r| !r.peer_proxied && r.method == "GET" && r.uri.starts_with(JOBS))
        .count()
}

async fn kubectl_reaches_every_server_and_never_a_false_404(kind: LoadBalancerKind) {
    let cluster = behind(kind).await;
    let Some(kubectl) = cluster.balancer_kubectl().expect("kubeconfig") else {
        return;
    };
    let created = kubectl
        .run(&["create", "job", "hello", "--image=busybox"], SETTLE)
        .await
        .expect("kubectl runs");
    assert!(created.success, "{created:?}");
    let marks: Vec<usize> = ["a", "b", "c"].iter().map(|n| log_mark(&cluster, n)).collect();
    for _ in 0..9 {
        let listed = kubectl
            .run(&["get", "jobs", "-o", "name"], SETTLE)
            .await
            .expect("kubectl runs");
        assert!(listed.success, "{listed:?}");
        assert_eq!(listed.stdout, "job.batch/hello\n", "{listed:?}");
    }
    for (name, mark) in ["a", "b", "c"].iter().zip(marks) {
        assert!(
            lists_answered_by(&cluster, name, mark) >= 1,
            "round robin: {name} answered some of kubectl's lists"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_embedded_balancer_kubectl_reaches_every_server_and_never_a_false_404() {
    kubectl_reaches_every_server_and_never_a_false_404(LoadBalancerKind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_haproxy_kubectl_reaches_every_server_and_never_a_false_404() {
    if !apiserver_fake::cluster::load_balancer::haproxy::available() {
        assert!(
            std::env::var(REQUIRE_HAPROXY).as_deref() != Ok("1"),
            "{REQUIRE_HAPROXY}=1 but haproxy is not on PATH"
        );
        eprintln!("skipped: haproxy is not on PATH (set {REQUIRE_HAPROXY}=1 to make this a failure)");
        return;
    }
    kubectl_reaches_every_server_and_never_a_false_404(LoadBalancerKind::Haproxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_skipped_and_taken_out_of_rotation() {
    let mut cluster = behind(LoadBalancerKind::Embedded).await;
    let Some(kubectl) = cluster.balancer_kubectl().expect("kubeconfig") else {
        return;
    };
    cluster.kill("b").await.expect("kill b");
    // Refused connections go to the next server at once (HAProxy's `option redispatch`).
    for _ in 0..6 {
        let listed = kubectl
            .run(&["get", "jobs", "-o", "name"], SETTLE)
            .await
            .expect("kubectl runs");
        assert!(listed.success, "{listed:?}");
    }
    // And its health checks take it out.
    let balancer = cluster.balancer().expect("balancer");
    eventually(
        "b is DOWN in the balancer's stats",
        Duration::from_secs(10),
        || async {
            let stats = balancer.stats().await.ok()?;
            stats
                .iter()
                .any(|b| b.name == "b" && b.status == "DOWN")
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}
