//! The containers suite: fakes and etcd in Docker containers on a network of their own
//! ([`e2e::containers`]), each server with its own IP address and hostname, and the faults of real
//! hosts: a crash (`docker kill`), a stalled host (`docker pause`), a partitioned host (`docker network
//! disconnect`) and a rolling restart onto a newer version.
//!
//! `a` (batch/v1 disabled) reaches Jobs only through `b` or `c`. Timing knobs: identity leases of 3 s
//! renewed every second, endpoint records of 3 s refreshed every second, a 2 s request timeout.
//!
//! The built binary's own containers mode is here too: `apiserver-fake cluster --config` with `run:
//! containers` (three versions behind the embedded balancer, kubectl through `cluster.kubeconfig`)
//! and `apiserver-fake upgrade --run containers --store etcd` (both ways, with the expected results).
//!
//! Needs the `containers` feature, a Docker engine and the `apiserver-fake` binary built with the
//! `etcd` feature (`cargo test --workspace --all-features` builds it); otherwise it says it is
//! skipped (and fails when `KUBE_MVP_REQUIRE_DOCKER=1`, as CI sets it).

/// Set to `1` (CI does) to make a missing Docker engine, feature or binary a failure.
const REQUIRE_DOCKER: &str = "KUBE_MVP_REQUIRE_DOCKER";

fn skip(why: &str) {
    assert!(
        std::env::var(REQUIRE_DOCKER).as_deref() != Ok("1"),
        "{REQUIRE_DOCKER}=1 but the containers suite cannot run: {why}"
    );
    eprintln!("skipped: {why} (set {REQUIRE_DOCKER}=1 to make this a failure)");
}

#[cfg(not(feature = "containers"))]
#[test]
fn containers_suite_is_skipped_without_the_feature() {
    skip("e2e was built without the `containers` feature");
}

#[cfg(feature = "containers")]
mod with_docker {
    use std::time::Duration;

    use e2e::containers::{ContainerCluster, ContainerClusterBuilder, docker_available, fake_binary};
    use e2e::{HttpsClient, ServerBuilder, eventually};

    use super::skip;

    const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

    fn fast(server: ServerBuilder) -> ServerBuilder {
        server
            .identity_lease_duration(Duration::from_secs(3))
            .identity_lease_renew_interval(Duration::from_secs(1))
            .peer_endpoint_ttl(Duration::from_secs(3))
            .peer_endpoint_refresh(Duration::from_secs(1))
            .flag("--identity-lease-gc-period-seconds=1")
            .flag("--request-timeout=2s")
    }

    /// The `apiserver-fake` binary built with etcd ([`fake_binary`]), when a Docker engine answers too;
    /// otherwise `None`, after saying why the test is skipped ([`skip`]).
    fn docker_and_binary() -> Option<std::path::PathBuf> {
        if !docker_available() {
            skip("no Docker engine answers `docker info`");
            return None;
        }
        fake_binary().map_err(|why| skip(&why)).ok()
    }

    /// `a` without batch/v1, `b` and `c` with it, all 1.36; `None` (after saying why) when the
    /// suite cannot run here.
    async fn three_servers() -> Option<ContainerCluster> {
        let binary = docker_and_binary()?;
        let cluster = ContainerClusterBuilder::new()
            .server("a", "1.36", |s| fast(s).runtime_config("batch/v1=false"))
            .server("b", "1.36", fast)
            .server("c", "1.36", fast)
            .start(&binary)
            .await
            .expect("the container cluster starts");
        Some(cluster)
    }

    /// Lists Jobs through `client` until 20 answers in a row are 200, for at most `within`;
    /// returns the status codes of the failures before that.
    async fn until_steady(client: &HttpsClient, within: Duration) -> Vec<(u16, String)> {
        kube_mvp_testing::until_steady("Jobs listed through a", 20, within, || async {
            match tokio::time::timeout(Duration::from_secs(10), client.get(JOBS)).await {
                Ok(Ok(reply)) if reply.code() == 200 => Ok(()),
                Ok(Ok(reply)) => Err((reply.code(), reply.raw_text())),
                Ok(Err(err)) => Err((0, err.to_string())),
                Err(_) => Err((0, "no answer within 10 s".to_owned())),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Asserts that every one of `failures` is a proxied request that failed because its peer
    /// vanished: 503 with Go's dial error text, or 504 when it hung on a connection to a host that no
    /// longer answers.
    fn assert_peer_gone(failures: &[(u16, String)]) {
        let peer_gone = |code: u16, body: &str| match code {
            503 => body.starts_with("dial tcp ") || body.contains("Error getting ip and port info"),
            504 => body.contains("\"reason\":\"Timeout\""),
            _ => false,
        };
        assert!(
            failures.iter().all(|(code, body)| peer_gone(*code, body)),
            "{failures:?}"
        );
    }

    /// A client of `a`, once 20 lists of Jobs in a row through it succeeded (within 10 s): the
    /// cluster is steady before a test injects its fault.
    async fn steady_a(cluster: &ContainerCluster) -> HttpsClient {
        let a = cluster.client("a").unwrap();
        assert!(until_steady(&a, Duration::from_secs(10)).await.is_empty());
        a
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn docker_kill_of_a_peer_fails_over_to_the_third_server() {
        let Some(mut cluster) = three_servers().await else {
            return;
        };
        let a = steady_a(&cluster).await;
        cluster.kill("b").await.unwrap();
        let failures = until_steady(&a, Duration::from_secs(20)).await;
        assert_peer_gone(&failures);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn docker_pause_of_a_peer_times_out_until_its_record_lapses_and_unpause_brings_it_back() {
        let Some(cluster) = three_servers().await else {
            return;
        };
        let a = steady_a(&cluster).await;
        cluster.pause("b").await.unwrap();
        let failures = until_steady(&a, Duration::from_secs(20)).await;
        assert!(!failures.is_empty(), "a picked the paused b at least once");
        assert!(
            failures
                .iter()
                .all(|(code, body)| *code == 504 && body.contains("\"reason\":\"Timeout\"")),
            "{failures:?}"
        );
        cluster.unpause("b").await.unwrap();
        let b = cluster.client("b").unwrap();
        eventually(
            "b to serve /readyz again after unpause",
            Duration::from_secs(15),
            || async {
                b.get("/readyz")
                    .await
                    .is_ok_and(|r| r.code() == 200)
                    .then_some(())
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_partitioned_peer_is_dropped_once_its_record_lapses_and_rejoins_when_reconnected() {
        let Some(mut cluster) = three_servers().await else {
            return;
        };
        let a = steady_a(&cluster).await;
        cluster.disconnect("b").await.unwrap();
        // b cannot renew its record in etcd either: it lapses and a stops choosing b.
        let failures = until_steady(&a, Duration::from_secs(20)).await;
        assert_peer_gone(&failures);
        cluster.reconnect("b").await.unwrap();
        let b = cluster.client("b").unwrap();
        let last = std::cell::RefCell::new(String::new());
        eventually(
            "b to serve Jobs from etcd again once reconnected",
            Duration::from_secs(15),
            || async {
                let reply = tokio::time::timeout(Duration::from_secs(5), b.get(JOBS)).await;
                *last.borrow_mut() = match reply {
                    Ok(Ok(reply)) if reply.code() == 200 => return Some(()),
                    Ok(Ok(reply)) => format!("{} {}", reply.code(), reply.raw_text()),
                    Ok(Err(err)) => err.to_string(),
                    Err(_) => "no answer within 5 s".to_owned(),
                };
                None
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}; last: {}", last.borrow()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rolling_restart_onto_a_newer_version_never_answers_a_false_404() {
        let Some(binary) = docker_and_binary() else {
            return;
        };
        let gate = |s: ServerBuilder| fast(s).feature_gate(e2e::MVP_GATE, true);
        let mut cluster = ContainerClusterBuilder::new()
            .server("a", "1.35", gate)
            .server("b", "1.35", gate)
            .start(&binary)
            .await
            .expect("the container cluster starts");
        let maps = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies";
        assert_eq!(cluster.client("a").unwrap().get(maps).await.unwrap().code(), 404);
        // b first: once it is back (ready) at 1.36, the 1.35 a serves v1 MAPs through it.
        cluster.restart_at("b", "1.36").await.unwrap();
        let through_a = cluster.client("a").unwrap().get(maps).await.unwrap();
        assert_eq!(through_a.code(), 200, "{}", through_a.raw_text());
        // Then a: both 1.36, each serves them itself.
        cluster.restart_at("a", "1.36").await.unwrap();
        for name in ["a", "b"] {
            assert_eq!(cluster.client(name).unwrap().get(maps).await.unwrap().code(), 200);
        }
    }
    fn docker_lines(args: &[&str]) -> Vec<String> {
        let output = std::process::Command::new("docker")
            .args(args)
            .output()
            .expect("docker");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cluster_with_run_containers_serves_three_versions_through_the_balancer_and_cleans_up() {
        let Some(binary) = docker_and_binary() else {
            return;
        };
        let Some(kubectl) = e2e::Kubectl::find() else {
            return;
        };
        let proxy = |s: kube_mvp_testing::ServerBuilder| s.feature_gate(e2e::MVP_GATE, true);
        let cluster = kube_mvp_testing::ClusterBuilder::new()
            .server("old", |s| proxy(s.version("1.34")))
            .server("mid", |s| proxy(s.version("1.35")))
            .server("new", |s| s.version("1.36"))
            .store(kube_mvp_testing::Store::Etcd)
            .run(kube_mvp_testing::Run::Containers)
            .load_balancer(kube_mvp_testing::LoadBalancer::Embedded)
            .controller_manager(false)
            .binary(&binary)
            // The first start builds the images.
            .startup_timeout(Duration::from_secs(180))
            .start()
            .await
            .expect("the cluster starts");
        let etcd = cluster.etcd().expect("etcd").to_owned();
        let network = etcd
            .trim_start_matches("http://")
            .trim_end_matches("-etcd:2379")
            .to_owned();
        assert!(network.starts_with("kube-mvp-"), "{etcd}");
        let names = docker_lines(&[
            "ps",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("label=kube-mvp.cluster={network}"),
        ]);
        for server in ["old", "mid", "new", "etcd"] {
            assert!(
                names.contains(&format!("{network}-{server}")),
                "{server} runs in a container: {names:?}"
            );
        }
        let kubeconfig = cluster
            .balancer()
            .expect("the embedded balancer")
            .kubeconfig
            .clone();
        let through =
            e2e::Kubectl::new(kubectl, kubeconfig, cluster.dir()).with_output_filter(e2e::redact_text);
        let mut versions = std::collections::BTreeSet::new();
        for _ in 0..9 {
            let out = through
                .run(&["get", "--raw", "/version"], Duration::from_secs(30))
                .await
                .expect("kubectl runs");
            assert!(out.success, "{out:?}");
            let version: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
            versions.insert(version["minor"].as_str().unwrap_or_default().to_owned());
        }
        assert_eq!(
            versions.into_iter().collect::<Vec<_>>(),
            ["34", "35", "36"],
            "round robin over the three containers"
        );
        let stopped = cluster.stop().await;
        assert!(
            stopped.is_some_and(|s| s.success()),
            "SIGTERM ends the cluster cleanly: {stopped:?}"
        );
        let left = docker_lines(&[
            "ps",
            "--all",
            "--quiet",
            "--filter",
            &format!("label=kube-mvp.cluster={network}"),
        ]);
        assert!(left.is_empty(), "no container of the cluster is left: {left:?}");
        assert!(
            docker_lines(&[
                "network",
                "ls",
                "--quiet",
                "--filter",
                &format!("name=^{network}$")
            ])
            .is_empty(),
            "its network is gone"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn upgrade_with_run_containers_shows_false_404s_only_without_the_proxy() {
        let Some(binary) = docker_and_binary() else {
            return;
        };
        let out = tempfile::tempdir().expect("tempdir");
        let output = tokio::process::Command::new(&binary)
            .args([
                "upgrade",
                "--from=1.35",
                "--to=1.36",
                "--servers=2",
                "--run=containers",
                "--store=etcd",
            ])
            .args(["--dwell-seconds=2", "--final-dwell-seconds=1", "--out"])
            .arg(out.path())
            .output()
            .await
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "upgrade failed (the gate: harm with the proxy on?): {stderr}"
        );
        kube_mvp_testing::UpgradeReport::read(out.path())
            .expect("report.json")
            .assert_false_404s_only_without_the_proxy();
    }
}
