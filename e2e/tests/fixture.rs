//! The fixture itself: teardown leaks no tasks, ports or files, also when a test fails.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use e2e::{ClusterBuilder, FixtureError, eventually};
use futures_util::FutureExt;
use support::*;

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

async fn assert_released(addresses: &[SocketAddr], dir: &std::path::Path, baseline: usize) {
    assert!(!dir.exists(), "{} was removed", dir.display());
    for addr in addresses {
        eventually(
            &format!("{addr} refuses connections"),
            Duration::from_secs(5),
            || async { tokio::net::TcpStream::connect(addr).await.is_err().then_some(()) },
        )
        .await
        .unwrap();
    }
    eventually(
        "every task of the cluster ended",
        Duration::from_secs(10),
        || async { (alive_tasks() <= baseline).then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {} alive, {baseline} before", alive_tasks()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_releases_tasks_ports_and_files_even_when_the_test_panics() {
    let baseline = alive_tasks();
    let (sender, receiver) = std::sync::mpsc::channel();
    let failing_test = std::panic::AssertUnwindSafe(async {
        let cluster = a_serves_batch_b_does_not(e2e::PeerResolutionMode::Discovery).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let addresses: Vec<SocketAddr> = cluster
            .names()
            .iter()
            .map(|n| cluster.server(n).unwrap().local_addr())
            .collect();
        sender.send((addresses, cluster.dir().to_owned())).unwrap();
        panic!("a failing test");
    });
    assert!(failing_test.catch_unwind().await.is_err());
    // The test's body may also fail before it sends (a cluster that does not start): no hang then.
    let (addresses, dir) = receiver
        .recv_timeout(Duration::from_secs(1))
        .expect("the cluster started before the test failed");
    assert_released(&addresses, &dir, baseline).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_and_killing_servers_release_everything() {
    let baseline = alive_tasks();
    let mut cluster = a_and_c_serve_batch_b_does_not(e2e::PeerResolutionMode::Discovery).await;
    wait_until_b_reaches(&cluster, &["a", "c"]).await;
    let addresses: Vec<SocketAddr> = cluster
        .names()
        .iter()
        .map(|n| cluster.server(n).unwrap().local_addr())
        .collect();
    let dir = cluster.dir().to_owned();
    cluster.kill("c").await.unwrap();
    cluster.restart("c").await.unwrap();
    let restarted = cluster.server("c").unwrap().local_addr();
    cluster.shutdown().await;
    let mut all = addresses;
    all.push(restarted);
    assert_released(&all, &dir, baseline).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_get_their_own_loopback_address_ephemeral_port_and_kubeconfig() {
    let cluster = ClusterBuilder::new()
        .server("a", |s| s)
        .server("b", |s| s.version("1.35").hostname("test-server-b"))
        .server("c", |s| s.ip(std::net::Ipv4Addr::new(127, 0, 0, 42)))
        .start()
        .await
        .unwrap();
    let ips: Vec<String> = cluster
        .names()
        .iter()
        .map(|n| cluster.server(n).unwrap().local_addr().ip().to_string())
        .collect();
    assert_eq!(ips, ["127.0.0.1", "127.0.0.2", "127.0.0.42"]);
    assert!(
        cluster
            .names()
            .iter()
            .all(|n| cluster.server(n).unwrap().local_addr().port() != 0)
    );
    assert_eq!(
        cluster.server_id("b").unwrap(),
        apiserver_fake::controllers::identity::server_id("test-server-b")
    );
    let kubeconfig = std::fs::read_to_string(cluster.kubeconfig("c").unwrap()).unwrap();
    assert!(kubeconfig.contains(&cluster.url("c").unwrap()), "{kubeconfig}");
    let version = cluster.client("b").unwrap().get("/version").await.unwrap();
    assert_eq!(version.json()["gitVersion"], "v1.35.0");
    // Mistakes are reported, not panicked on.
    let twice = ClusterBuilder::new()
        .server("a", |s| s)
        .server("a", |s| s)
        .start()
        .await
        .unwrap_err();
    assert!(matches!(twice, FixtureError::Layout(_)), "{twice}");
    let bad = ClusterBuilder::new()
        .server("a", |s| s.runtime_config("batch/v1=maybe"))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(
            bad,
            FixtureError::InvalidFlags { .. } | FixtureError::Start { .. }
        ),
        "{bad}"
    );
    assert!(
        bad.to_string().contains(r#"strconv.ParseBool: parsing "maybe""#),
        "{bad}"
    );
    assert!(matches!(
        cluster.server("zz"),
        Err(FixtureError::UnknownServer(_))
    ));
}

/// The suite runs on the store `KUBE_MVP_STORE` names: objects written through a server are where
/// that store keeps them (on etcd, read back with `etcdctl` under the cluster's own prefix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_run_on_the_store_the_environment_names() {
    let cluster = ClusterBuilder::new().server("a", |s| s).start().await.unwrap();
    assert_eq!(cluster.backend(), e2e::StoreBackend::from_env().unwrap());
    let created = cluster
        .client("a")
        .unwrap()
        .post_json(
            "/api/v1/namespaces/default/configmaps",
            &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "where"}}),
        )
        .await
        .unwrap();
    assert_eq!(created.code(), 201, "{}", created.status);
    match cluster.etcd() {
        None => {
            let stored = cluster
                .store()
                .get(
                    &apiserver_fake::store::StorageResource::new("", "configmaps"),
                    &apiserver_fake::store::ObjectKey::namespaced("default", "where"),
                )
                .await;
            assert!(stored.is_ok(), "{stored:?}");
        }
        Some((url, prefix)) => {
            let output = std::process::Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .arg(format!("--endpoints={url}"))
                .args([
                    "get",
                    "--keys-only",
                    &format!("{prefix}/configmaps/default/where"),
                ])
                .output()
                .expect("etcdctl runs (Debian: etcd-client)");
            let keys = String::from_utf8_lossy(&output.stdout);
            assert_eq!(keys.trim(), format!("{prefix}/configmaps/default/where"));
        }
    }
}
