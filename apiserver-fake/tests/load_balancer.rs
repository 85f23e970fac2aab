//! The load balancer in front of a cluster: `cluster --config FILE` as a user runs it, with
//! `DIR/cluster.kubeconfig` reaching every server round robin (seen in each server's request counts),
//! through the embedded balancer and through HAProxy; and each balancer taking a server whose
//! `/readyz` stops answering out of the rotation, and back once it answers again.
//!
//! The HAProxy tests need `haproxy` on `PATH`; without it they say they are skipped (and fail when
//! `KUBE_MVP_REQUIRE_HAPROXY=1`, as CI sets it). The kubectl tests need kubectl >= 1.28.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use apiserver_fake::cluster::load_balancer::embedded::EmbeddedBalancer;
use apiserver_fake::cluster::load_balancer::haproxy::{self, HaproxyBalancer};
use apiserver_fake::cluster::load_balancer::{BackendStats, HealthCheck, LB_IP};
use http::StatusCode;
use serde_json::Value;
use support::demo::{Demo, admin};
use support::{TestClient, kubectl, kubectl_available, member};

/// Set to `1` (CI does) to make a missing `haproxy` a failure.
const REQUIRE_HAPROXY: &str = "KUBE_MVP_REQUIRE_HAPROXY";

fn haproxy_available() -> bool {
    if haproxy::available() {
        return true;
    }
    assert!(
        std::env::var(REQUIRE_HAPROXY).as_deref() != Ok("1"),
        "{REQUIRE_HAPROXY}=1 but haproxy is not on PATH"
    );
    eprintln!(
        "skipped: no haproxy on PATH (Debian: apt-get install haproxy; set {REQUIRE_HAPROXY}=1 to make this a failure)"
    );
    false
}

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/clusters")
        .join(name)
        .display()
        .to_string()
}

/// `configmaps` lists a server has answered, from its `/metrics`.
async fn configmap_lists(dir: &Path, server: &Value) -> u64 {
    let metrics = admin(dir, server).get("/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    metrics
        .text()
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"configmaps\"")
                && l.contains("verb=\"list\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Starts `cluster --config three-versions.yaml [extra]`, then runs `kubectl get configmaps` nine
/// times through `DIR/cluster.kubeconfig`: every run succeeds and every server answers some of them.
async fn every_server_is_reached_through_the_balancer(extra: &[&str], kind: &str) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = example("three-versions.yaml");
    // Without the controller manager, whose informers list ConfigMaps too: the servers' counts are
    // then kubectl's alone.
    let mut args = vec!["--config", config.as_str(), "--no-controller-manager"];
    args.extend_from_slice(extra);
    let mut demo = Demo::start(dir.path(), &args);
    let manifest = demo.wait_for_manifest(dir.path());
    let lb = &manifest["lb"];
    assert_eq!(lb["kind"], kind, "{manifest}");
    let kubeconfig = dir.path().join("cluster.kubeconfig");
    assert_eq!(lb["kubeconfig"], kubeconfig.display().to_string());
    let text = std::fs::read_to_string(&kubeconfig).expect("cluster.kubeconfig");
    assert!(text.contains(lb["url"].as_str().expect("url")), "{text}");
    let servers = manifest["servers"].as_array().expect("servers").clone();
    assert_eq!(
        servers
            .iter()
            .map(|s| s["kubernetesVersion"].as_str().unwrap_or_default())
            .collect::<Vec<_>>(),
        vec!["1.34", "1.35", "1.36"]
    );
    let mut before = Vec::new();
    for s in &servers {
        before.push(configmap_lists(dir.path(), s).await);
    }
    for round in 0..9 {
        let (ok, out, err) = kubectl(&kubeconfig, &["get", "configmaps", "-A"]);
        assert!(ok, "round {round}: {out}{err}");
    }
    let mut served = Vec::new();
    for (s, before) in servers.iter().zip(before) {
        served.push(configmap_lists(dir.path(), s).await - before);
    }
    assert_eq!(served.iter().sum::<u64>(), 9, "{served:?}");
    assert!(
        served.iter().all(|n| *n >= 2),
        "round robin: each of three servers answers about a third of 9 lists: {served:?}"
    );
    drop(demo);
    manifest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_with_three_versions_behind_the_embedded_balancer_reaches_every_server() {
    if !kubectl_available() {
        return;
    }
    let manifest = every_server_is_reached_through_the_balancer(&[], "embedded").await;
    assert_eq!(manifest["lb"]["stats"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_with_three_versions_behind_haproxy_reaches_every_server() {
    if !kubectl_available() || !haproxy_available() {
        return;
    }
    let manifest = every_server_is_reached_through_the_balancer(&["--lb", "haproxy"], "haproxy").await;
    assert!(
        manifest["lb"]["stats"]
            .as_str()
            .is_some_and(|s| s.starts_with("http://127.0.0.254:") && s.ends_with("/stats")),
        "{manifest}"
    );
}

/// Resource requests (any resource, any verb) a server has answered, from its `/metrics`.
async fn resource_requests(dir: &Path, server: &Value) -> u64 {
    let metrics = admin(dir, server).get("/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    metrics
        .text()
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && !l.contains("resource=\"\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// `cluster` runs its controller manager through `DIR/cluster.kubeconfig`, as kube-controller-manager
/// reaches an HA control plane through its endpoint: its informers' lists and watches, each on a
/// connection of its own (nobody else sends resource requests here), reach every server, not only
/// the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_manager_reaches_every_server_through_the_balancer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = example("three-versions.yaml");
    let mut demo = Demo::start(dir.path(), &["--config", config.as_str()]);
    let manifest = demo.wait_for_manifest(dir.path());
    let servers = manifest["servers"].as_array().expect("servers").clone();
    support::eventually(
        "the controller manager's requests to reach every server",
        Duration::from_secs(30),
        || async {
            let mut counts = Vec::new();
            for s in &servers {
                counts.push(resource_requests(dir.path(), s).await);
            }
            counts.iter().all(|n| *n > 0).then_some(())
        },
    )
    .await;
    drop(demo);
}

/// A TCP forwarder in front of one server that can be made to stall: it then accepts connections and
/// never answers, as a server stopped with SIGSTOP (or on a frozen VM) does, so its `/readyz` checks
/// time out.
struct Stallable {
    addr: SocketAddr,
    stalled: Arc<AtomicBool>,
}

impl Stallable {
    async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stalled = Arc::new(AtomicBool::new(false));
        let flag = stalled.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                let flag = flag.clone();
                tokio::spawn(async move {
                    if flag.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Self { addr, stalled }
    }
}

/// Either balancer, as the test drives it.
enum Balancer {
    Embedded(EmbeddedBalancer),
    Haproxy(Box<HaproxyBalancer>),
}

impl Balancer {
    fn addr(&self) -> SocketAddr {
        match self {
            Self::Embedded(b) => b.local_addr(),
            Self::Haproxy(b) => b.local_addr(),
        }
    }

    async fn stats(&self) -> Vec<BackendStats> {
        match self {
            Self::Embedded(b) => b.stats(),
            Self::Haproxy(b) => b.stats().await.expect("haproxy stats"),
        }
    }

    async fn wait_for_status(&self, name: &str, status: &str) {
        let what = format!("{name} to be {status}");
        support::eventually(&what, Duration::from_secs(15), || async {
            let stats = self.stats().await;
            stats
                .iter()
                .any(|s| s.name == name && s.status == status)
                .then_some(())
        })
        .await;
    }

    async fn connections(&self) -> Vec<u64> {
        self.stats().await.iter().map(|s| s.connections).collect()
    }
}

/// Three servers behind `start`'s balancer, `c` behind a [`Stallable`]: while `c` stalls, the balancer
/// marks it down and every request (each on a new connection) is answered by `a` or `b`; once it
/// answers again it is back in the rotation.
async fn a_server_whose_readyz_fails_is_skipped<F, Fut>(start: F)
where
    F: FnOnce(Vec<(String, SocketAddr)>, std::path::PathBuf) -> Fut,
    Fut: std::future::Future<Output = Balancer>,
{
    let cluster = support::cluster(vec![
        member("a", 1, "1.36", &[]),
        member("b", 2, "1.36", &[]),
        member("c", 3, "1.36", &[]),
    ])
    .await;
    let addr = |i: usize| cluster.servers[i].1.local_addr();
    let stallable = Stallable::start(addr(2)).await;
    let backends = vec![
        ("a".to_owned(), addr(0)),
        ("b".to_owned(), addr(1)),
        ("c".to_owned(), stallable.addr),
    ];
    let balancer = start(backends, cluster.dir.clone()).await;
    balancer.wait_for_status("c", "UP").await;
    let url = format!("https://{}", balancer.addr());
    let dir = &cluster.dir;
    // A new client (so a new connection) per request, as a new kubectl invocation.
    let get = || async {
        let client = TestClient::new(
            &url,
            &dir.join("ca.crt"),
            Some((&dir.join("admin.crt"), &dir.join("admin.key"))),
        );
        client.get("/api/v1/namespaces/default/configmaps").await.status
    };
    for _ in 0..3 {
        assert_eq!(get().await, StatusCode::OK);
    }

    stallable.stalled.store(true, Ordering::SeqCst);
    balancer.wait_for_status("c", "DOWN").await;
    let before = balancer.connections().await;
    for round in 0..6 {
        assert_eq!(get().await, StatusCode::OK, "round {round}");
    }
    let after = balancer.connections().await;
    assert_eq!(
        after[2], before[2],
        "nothing sent to the stalled server: {before:?} → {after:?}"
    );
    assert_eq!(after[0] - before[0], 3, "{before:?} → {after:?}");
    assert_eq!(after[1] - before[1], 3, "{before:?} → {after:?}");

    stallable.stalled.store(false, Ordering::SeqCst);
    balancer.wait_for_status("c", "UP").await;
    let before = balancer.connections().await;
    for _ in 0..6 {
        assert_eq!(get().await, StatusCode::OK);
    }
    let after = balancer.connections().await;
    assert!(
        after[2] > before[2],
        "c is back in the rotation: {before:?} → {after:?}"
    );
    match balancer {
        Balancer::Embedded(b) => b.shutdown().await,
        Balancer::Haproxy(b) => b.shutdown().await,
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_balancer_skips_a_server_whose_readyz_fails() {
    a_server_whose_readyz_fails_is_skipped(|backends, _dir| async move {
        let listen = SocketAddr::new(LB_IP, 0);
        Balancer::Embedded(
            EmbeddedBalancer::start(listen, backends, HealthCheck::default())
                .await
                .expect("balancer"),
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_skips_a_server_whose_readyz_fails() {
    if !haproxy_available() {
        return;
    }
    a_server_whose_readyz_fails_is_skipped(|backends, dir| async move {
        Balancer::Haproxy(Box::new(
            HaproxyBalancer::start(&dir, 0, backends, HealthCheck::default())
                .await
                .expect("haproxy"),
        ))
    })
    .await;
}

/// Every mistake in a config file is one line naming the file position and the key, and a non-zero
/// exit, before anything starts.
#[test]
fn a_bad_config_file_is_one_line_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "servers:\n- {name: a, version: \"1.36\"}\n- {name: a, version: \"1.40\"}\n",
    )
    .expect("write");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .args(["cluster", "--port", "0", "--config"])
        .arg(&path)
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: {}:3:10: servers[1].name: duplicate name \"a\" (also servers[0])",
            path.display()
        )
    );
    assert!(!dir.path().join("cluster.json").exists());
}

/// `cluster --config etcd-processes.yaml` (every server its own process on a private etcd, HAProxy in
/// front; the embedded balancer when haproxy is missing) as a user runs it: the balancer's kubeconfig
/// works, and once server `c` is stalled (SIGSTOP: its `/readyz` stops answering) requests through the
/// balancer keep succeeding, answered by `a` and `b`. Needs the `etcd` feature and etcd on PATH.
#[cfg(feature = "etcd")]
#[test]
fn a_process_cluster_from_a_config_file_skips_a_stalled_server() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    if !apiserver_fake::cluster::etcd_process::etcd_installed() {
        support::etcd::skip("no etcd binary on PATH (Debian: apt-get install -y etcd-server)");
        return;
    }
    if !kubectl_available() {
        return;
    }
    let lb = if haproxy_available() {
        "haproxy"
    } else {
        "embedded"
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = example("etcd-processes.yaml");
    let mut demo = Demo::start(dir.path(), &["--config", config.as_str(), "--lb", lb]);
    let manifest = demo.wait_for_manifest(dir.path());
    assert_eq!(manifest["lb"]["kind"], lb, "{manifest}");
    let kubeconfig = dir.path().join("cluster.kubeconfig");
    // `a` has no batch/v1: whichever server a connection lands on, the Job is served (by proxy).
    let (ok, out, err) = kubectl(&kubeconfig, &["create", "job", "hello", "--image=busybox"]);
    assert!(ok, "{out}{err}");
    let c = support::demo::server(&manifest, "c");
    let pid = Pid::from_raw(
        c["pid"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .expect("pid"),
    );
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
    // Eventually (once the balancer's checks fail) six requests in a row succeed, each in time
    // (ConfigMaps: served by every server itself, so only the balancer decides who answers).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut streak = 0;
    while streak < 6 {
        assert!(
            std::time::Instant::now() < deadline,
            "requests kept reaching the stalled server"
        );
        let (ok, _, _) = kubectl(&kubeconfig, &["get", "configmaps", "--request-timeout=3s"]);
        streak = if ok { streak + 1 } else { 0 };
    }
    kill(pid, Signal::SIGCONT).expect("SIGCONT");
    drop(demo);
}
