//! Cluster layouts and objects shared by the e2e tests.
#![allow(dead_code)]

use std::time::Duration;

use e2e::{ClusterBuilder, Exchange, PeerProxy, PeerResolutionMode, ServerBuilder, TestCluster, eventually};
use serde_json::{Value, json};

/// Both peer-resolution modes: upstream alpha (StorageVersion, emulated here by a 1.32 server with the
/// alpha gates on) and upstream beta (Discovery, 1.36 where the gate is on by default).
pub const MODES: [PeerResolutionMode; 2] =
    [PeerResolutionMode::StorageVersion, PeerResolutionMode::Discovery];

/// How long a test waits for something that normally happens within milliseconds.
pub const SETTLE: Duration = Duration::from_secs(15);

pub const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

/// A short name of a mode for snapshot names.
pub fn mode_name(mode: PeerResolutionMode) -> &'static str {
    match mode {
        PeerResolutionMode::StorageVersion => "storage_version_mode",
        PeerResolutionMode::Discovery => "discovery_mode",
    }
}

/// A server of `mode`: 1.32 with `UnknownVersionInteroperabilityProxy` and `StorageVersionAPI` on
/// (upstream alpha), or 1.36 (beta, gate on by default).
pub fn in_mode(mode: PeerResolutionMode) -> impl Fn(ServerBuilder) -> ServerBuilder + Clone {
    move |s: ServerBuilder| match mode {
        PeerResolutionMode::StorageVersion => s
            .version("1.32")
            .feature_gate("UnknownVersionInteroperabilityProxy", true)
            .feature_gate("StorageVersionAPI", true)
            .feature_gate("APIServerIdentity", true),
        PeerResolutionMode::Discovery => s.version("1.36"),
    }
}

/// The upstream integration test's layout: `a` serves everything, `b` has `batch/v1` disabled.
pub async fn a_serves_batch_b_does_not(mode: PeerResolutionMode) -> TestCluster {
    let m = in_mode(mode);
    ClusterBuilder::new()
        .server("a", m.clone())
        .server("b", move |s| m(s).runtime_config("batch/v1=false"))
        .start()
        .await
        .expect("cluster starts")
}

/// Same as [`a_serves_batch_b_does_not`] with extra configuration of `b`.
pub async fn a_and_b_with(
    mode: PeerResolutionMode,
    a: impl FnOnce(ServerBuilder) -> ServerBuilder,
    b: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> TestCluster {
    let m = in_mode(mode);
    let m2 = m.clone();
    ClusterBuilder::new()
        .server("a", move |s| a(m(s)))
        .server("b", move |s| b(m2(s).runtime_config("batch/v1=false")))
        .start()
        .await
        .expect("cluster starts")
}

/// [`a_serves_batch_b_does_not`] at 1.36 (discovery mode) with `b` started without a peer proxy (no
/// `--peer-ca-file`, [`PeerProxy::Never`]): `b` answers its own 404 for Jobs, `a` proxies them.
pub async fn b_without_a_peer_proxy() -> TestCluster {
    a_and_b_with(
        PeerResolutionMode::Discovery,
        |s| s,
        |s| s.peer_proxy(PeerProxy::Never),
    )
    .await
}

/// Waits until `via` answers `GET path` with `code` (the proxy has learned about its peers).
pub async fn wait_for_code(cluster: &TestCluster, via: &str, path: &str, code: u16) -> Exchange {
    let client = cluster.client(via).expect("client");
    let last = std::sync::Mutex::new(None);
    eventually(
        &format!("GET {path} via {via} answers {code}"),
        SETTLE,
        || async {
            let reply = client.get(path).await.ok()?;
            if reply.code() == code {
                return Some(reply);
            }
            *last.lock().unwrap() = Some(reply);
            None
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; last answer: {:#?}", last.lock().unwrap()))
}

/// Waits until `b` proxies the jobs list to a peer (answers 200).
pub async fn wait_until_b_proxies_jobs(cluster: &TestCluster) {
    wait_for_code(cluster, "b", JOBS, 200).await;
}

/// A minimal Job.
pub fn job(name: &str) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox"}]}}}
    })
}

/// How many requests server `name` has logged so far: a mark for [`proxied_requests_seen_by`].
pub fn log_mark(cluster: &TestCluster, name: &str) -> usize {
    cluster.server(name).expect("server").served_requests().len()
}

/// The requests server `name` served with the peer-proxied header since `mark` (see [`log_mark`]), as
/// `METHOD uri as user`. Discovery fetches by peers (`system:apiserver`) are left out.
pub fn proxied_requests_seen_by(cluster: &TestCluster, name: &str, mark: usize) -> Vec<String> {
    cluster
        .server(name)
        .expect("server")
        .served_requests()
        .into_iter()
        .skip(mark)
        .filter(|r| r.peer_proxied && r.user.name != "system:apiserver")
        .map(|r| format!("{} {} as {}", r.method, r.uri, r.user.name))
        .collect()
}

/// How many requests server `name` served for `uri_prefix` since `mark` (any user, proxied or not).
pub fn requests_seen_by(cluster: &TestCluster, name: &str, mark: usize, uri_prefix: &str) -> usize {
    cluster
        .server(name)
        .expect("server")
        .served_requests()
        .iter()
        .skip(mark)
        .filter(|r| r.uri.starts_with(uri_prefix))
        .count()
}

/// One line of a Prometheus text exposition of `metric` (all series, sorted), ports redacted.
pub async fn metric_lines(cluster: &TestCluster, via: &str, metric: &str) -> Vec<String> {
    let reply = cluster
        .client(via)
        .expect("client")
        .get("/metrics")
        .await
        .expect("metrics");
    let mut lines: Vec<String> = reply
        .raw_text()
        .lines()
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// Three servers: `a` and `c` serve everything, `b` has `batch/v1` disabled.
pub async fn a_and_c_serve_batch_b_does_not(mode: PeerResolutionMode) -> TestCluster {
    let m = in_mode(mode);
    let m2 = m.clone();
    ClusterBuilder::new()
        .server("a", m.clone())
        .server("b", move |s| m2(s).runtime_config("batch/v1=false"))
        .server("c", m)
        .start()
        .await
        .expect("cluster starts")
}

/// Removes the peer endpoint record of server `name` from the store's internal keyspace (what happens
/// when its 15 s TTL lapses after a crash). Kill the server first, or it writes the record again.
pub async fn forget_peer_address(cluster: &TestCluster, server_id: &str) {
    let key = format!(
        "{}{server_id}",
        apiserver_fake::controllers::peer_endpoint::PREFIX
    );
    assert!(
        cluster.store().delete_internal(&key).await.expect("store"),
        "record {key} existed"
    );
}

/// The body of an exchange as text, for assertions on plain-text answers.
pub fn text(exchange: &Exchange) -> String {
    exchange.raw_text()
}

/// Waits until `b`'s proxy has reached every server in `peers` with a jobs list (it knows all of them
/// as capable peers; peers join b's caches one by one at startup).
pub async fn wait_until_b_reaches(cluster: &TestCluster, peers: &[&str]) {
    let b = cluster.client("b").expect("client");
    let marks: Vec<usize> = peers.iter().map(|p| log_mark(cluster, p)).collect();
    eventually(
        &format!("b proxies jobs to each of {peers:?}"),
        SETTLE,
        || async {
            let _ = b.get(JOBS).await;
            peers
                .iter()
                .zip(&marks)
                .all(|(peer, mark)| !proxied_requests_seen_by(cluster, peer, *mark).is_empty())
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Waits until a series of `metric` on `via` contains `needle`; returns all series of the metric.
pub async fn wait_for_metric(cluster: &TestCluster, via: &str, metric: &str, needle: &str) -> Vec<String> {
    eventually(
        &format!("{metric} on {via} has a series with {needle}"),
        SETTLE,
        || async {
            let lines = metric_lines(cluster, via, metric).await;
            lines.iter().any(|l| l.contains(needle)).then_some(lines)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Checks a plain-text transport-error 503 as upstream writes it (`http.Error` with Go's error text and a
/// trailing newline) and returns it; its snapshot shows the text with ports redacted.
pub fn transport_error_503(reply: &Exchange, expected_text: &str) -> Exchange {
    assert_eq!(reply.code(), 503, "{reply:?}");
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; charset=utf-8"),
        "{reply:?}"
    );
    assert_eq!(
        e2e::redact_text(&reply.raw_text()),
        format!("{expected_text}\n"),
        "Go's error text, newline-terminated"
    );
    reply.clone()
}
