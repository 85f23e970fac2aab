//! The proxy's and peer-aggregated discovery's metrics on `/metrics` (checklist items 45–48).

mod support;

use std::collections::BTreeMap;

use e2e::{ClusterBuilder, PeerResolutionMode, TestCluster};
use http::Method;
use support::*;

const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// `series -> value` of every series of `metric` on `via`.
async fn series(cluster: &TestCluster, via: &str, metric: &str) -> BTreeMap<String, f64> {
    metric_lines(cluster, via, metric)
        .await
        .into_iter()
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// What changed between two readings (series that did not change are left out).
fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d != 0.0).then(|| (k.clone(), d))
        })
        .collect()
}

/// The `# HELP` and `# TYPE` lines of `metric`.
async fn help(cluster: &TestCluster, via: &str, metric: &str) -> Vec<String> {
    let text = cluster
        .client(via)
        .unwrap()
        .get("/metrics")
        .await
        .unwrap()
        .raw_text();
    text.lines()
        .filter(|l| {
            l.starts_with(&format!("# HELP {metric} ")) || l.starts_with(&format!("# TYPE {metric} "))
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerouted_request_total_counts_each_proxied_request_by_returned_code() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let metric = "apiserver_rerouted_request_total";
        let before = series(&cluster, "b", metric).await;
        let b = cluster.client("b").unwrap();
        for path in [JOBS.to_owned(), JOBS.to_owned(), format!("{JOBS}/missing")] {
            b.get(&path).await.unwrap();
        }
        // Requests b serves itself are not counted.
        b.get("/apis/apps/v1/namespaces/default/deployments")
            .await
            .unwrap();
        let counted = delta(&before, &series(&cluster, "b", metric).await);
        let mut out = help(&cluster, "b", metric).await;
        out.extend(counted.iter().map(|(k, v)| format!("{k} +{v}")));
        // 1.32 (alpha) labels by code only; 1.36 adds group, version and resource.
        insta::assert_yaml_snapshot!(format!("rerouted_requests_on_b_{}", mode_name(mode)), out);
        assert_eq!(counted.values().sum::<f64>(), 3.0, "{mode:?}: {counted:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerouted_metric_has_gvr_labels_from_1_36_with_empty_labels_for_discovery_fetches() {
    let mut out = BTreeMap::new();
    for version in ["1.35", "1.36"] {
        let cluster = ClusterBuilder::new()
            .server("a", |s| {
                s.version(version)
                    .feature_gate("UnknownVersionInteroperabilityProxy", true)
            })
            .server("b", |s| {
                s.version(version)
                    .feature_gate("UnknownVersionInteroperabilityProxy", true)
                    .runtime_config("batch/v1=false")
            })
            .start()
            .await
            .unwrap();
        wait_until_b_proxies_jobs(&cluster).await;
        let lines: Vec<String> = series(&cluster, "b", "apiserver_rerouted_request_total")
            .await
            .into_keys()
            .collect();
        // Discovery fetches (GET /api and /apis on the peer) are counted too: with empty group,
        // version and resource in 1.36, indistinguishable from proxied requests before.
        out.insert(version, lines);
    }
    assert_eq!(
        out["1.36"],
        [
            r#"apiserver_rerouted_request_total{code="200",group="",resource="",version=""}"#,
            r#"apiserver_rerouted_request_total{code="200",group="batch",resource="jobs",version="v1"}"#
        ]
    );
    insta::assert_yaml_snapshot!("rerouted_series_by_version", out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_proxy_and_discovery_sync_errors_are_counted_by_type() {
    let mut cluster = a_serves_batch_b_does_not(PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;
    // endpoint_resolution: a is gone and so is its address.
    let a_id = cluster.server_id("a").unwrap();
    cluster.kill("a").await.unwrap();
    forget_peer_address(&cluster, &a_id).await;
    // A request finds a still in b's discovery cache but without an address (once b's endpoint cache
    // has noticed).
    let b = cluster.client("b").unwrap();
    let proxy_errors = e2e::eventually("an endpoint_resolution error", SETTLE, || async {
        let _ = b.get(JOBS).await;
        let lines = metric_lines(&cluster, "b", "apiserver_peer_proxy_errors_total").await;
        lines
            .iter()
            .any(|l| l.contains("endpoint_resolution"))
            .then_some(lines)
    })
    .await
    .unwrap();
    // hostport_resolution: a lease appears for a server that never published an address, which
    // triggers a discovery sync that cannot reach it.
    let ghost = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "apiserver-ghost", "namespace": "kube-system",
                     "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
        "spec": {"holderIdentity": "apiserver-ghost_0", "leaseDurationSeconds": 3600}
    });
    let created = cluster
        .client("b")
        .unwrap()
        .post_json(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            &ghost,
        )
        .await
        .unwrap();
    assert_eq!(created.code(), 201, "{created:?}");
    let sync_errors = wait_for_metric(
        &cluster,
        "b",
        "apiserver_peer_discovery_sync_errors_total",
        "hostport_resolution",
    )
    .await;
    let names = |lines: &[String]| {
        lines
            .iter()
            .map(|l| l.rsplit_once(' ').map_or(l.clone(), |(n, _)| n.to_owned()))
            .collect::<Vec<_>>()
    };
    let mut out = help(&cluster, "b", "apiserver_peer_proxy_errors_total").await;
    out.extend(names(&proxy_errors));
    out.extend(help(&cluster, "b", "apiserver_peer_discovery_sync_errors_total").await);
    out.extend(
        names(&sync_errors)
            .into_iter()
            .filter(|n| n.contains("hostport_resolution")),
    );
    insta::assert_yaml_snapshot!("peer_proxy_and_discovery_sync_error_series_on_b", out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_cache_hits_misses_and_nopeer_requests_are_counted() {
    // a lacks apps/v1, b lacks batch/v1: once each proxies to the other, both peer caches are synced
    // and no discovery fetch (nopeer requests of their own) is pending.
    let cluster = ClusterBuilder::new()
        .server("a", |s| s.version("1.36").runtime_config("apps/v1=false"))
        .server("b", |s| s.version("1.36").runtime_config("batch/v1=false"))
        .start()
        .await
        .unwrap();
    wait_until_b_proxies_jobs(&cluster).await;
    wait_for_code(&cluster, "a", "/apis/apps/v1/namespaces/default/deployments", 200).await;
    let metrics = [
        "aggregator_discovery_peer_aggregated_cache_hits_total",
        "aggregator_discovery_peer_aggregated_cache_misses_total",
        "aggregator_discovery_nopeer_requests_total",
    ];
    let read = async || {
        let mut all = BTreeMap::new();
        for m in metrics {
            all.extend(series(&cluster, "b", m).await);
        }
        all
    };
    let mark = log_mark(&cluster, "b");
    let before = read().await;
    let b = cluster.client("b").unwrap();
    // As upstream's unit test: three peer-aggregated requests (one with an unknown profile, which means
    // peer-aggregated) and two nopeer requests.
    for accept in [
        V2.to_owned(),
        V2.to_owned(),
        format!("{V2};profile=foo"),
        format!("{V2};profile=nopeer"),
        format!("{V2};profile=nopeer"),
    ] {
        let reply = b
            .request(Method::GET, "/apis")
            .header("accept", &accept)
            .send()
            .await
            .unwrap();
        assert_eq!(reply.code(), 200);
    }
    let counted = delta(&before, &read().await);
    // a's discovery fetches of b (nopeer, as system:apiserver) may land in the window: subtract them.
    let peer_fetches = cluster
        .server("b")
        .unwrap()
        .served_requests()
        .iter()
        .skip(mark)
        .filter(|r| r.user.name == "system:apiserver" && r.uri == "/apis")
        .count() as f64;
    let get = |m: &str| counted.get(m).copied().unwrap_or(0.0);
    let observed = BTreeMap::from([
        ("cache_hits", get(metrics[0])),
        ("cache_misses", get(metrics[1])),
        ("nopeer_requests", get(metrics[2]) - peer_fetches),
    ]);
    insta::assert_yaml_snapshot!(
        "discovery_metrics_after_three_default_and_two_nopeer_requests",
        observed
    );
    assert_eq!(
        observed,
        BTreeMap::from([
            ("cache_hits", 2.0),
            ("cache_misses", 1.0),
            ("nopeer_requests", 2.0)
        ])
    );
}
