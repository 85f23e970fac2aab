//! Flags that decide whether and how the proxy runs (checklist items 23–27 and 31).

mod support;

use e2e::{ClusterBuilder, FixtureError, PeerProxy, TestCluster};
use serde_json::{Value, json};
use support::*;

async fn start_error(builder: ClusterBuilder) -> String {
    match builder.start().await {
        Ok(_) => panic!("the server should not start"),
        Err(FixtureError::InvalidFlags { message, .. } | FixtureError::Start { message, .. }) => message,
        Err(other) => panic!("unexpected error {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_peer_ca_file_no_proxy_is_installed() {
    let cluster = b_without_a_peer_proxy().await;
    // The gate is on (1.36 default), yet b answers its own 404; a, with a proxy, would serve it.
    let reply = cluster.client("b").unwrap().get(JOBS).await.unwrap();
    assert_eq!(reply.code(), 404);
    assert_eq!(requests_seen_by(&cluster, "a", 0, JOBS), 0);
    assert!(
        metric_lines(&cluster, "b", "apiserver_rerouted_request_total")
            .await
            .is_empty()
    );
    insta::assert_yaml_snapshot!("jobs_via_b_without_peer_ca_file", reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_fails_when_the_proxy_lacks_a_client_certificate_or_key() {
    let mut messages = Vec::new();
    for flag in ["--proxy-client-cert-file", "--proxy-client-key-file"] {
        let builder = ClusterBuilder::new().server("a", |s| {
            s.version("1.36").peer_proxy(PeerProxy::Always).unset_flag(flag)
        });
        messages.push(start_error(builder).await);
    }
    assert_eq!(
        messages,
        [
            "error building peer proxy handler, proxy-cert-file not specified",
            "error building peer proxy handler, proxy-key-file not specified"
        ]
    );
    insta::assert_yaml_snapshot!("startup_errors_without_proxy_client_cert_or_key", messages);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_flags_require_the_feature_gate() {
    let mut messages = Vec::new();
    for flag in [
        None,
        Some("--peer-advertise-ip=127.0.0.9"),
        Some("--peer-advertise-port=6443"),
    ] {
        // 1.35: the gate is alpha and off by default.
        let builder = ClusterBuilder::new().server("a", |s| {
            let s = s.version("1.35");
            match flag {
                None => s.peer_proxy(PeerProxy::Always),
                Some(flag) => s.peer_proxy(PeerProxy::Never).flag(flag),
            }
        });
        messages.push(start_error(builder).await);
    }
    // Alpha (StorageVersion era) additionally needs StorageVersionAPI.
    messages.push(
        start_error(ClusterBuilder::new().server("a", |s| {
            s.version("1.32")
                .feature_gate("UnknownVersionInteroperabilityProxy", true)
                .peer_proxy(PeerProxy::Always)
        }))
        .await,
    );
    insta::assert_yaml_snapshot!("peer_flag_validation_errors", messages);
    assert_eq!(
        messages[0],
        "--peer-ca-file requires UnknownVersionInteroperabilityProxy feature to be turned on"
    );
}

async fn endpoint_record(cluster: &TestCluster, name: &str) -> Option<Value> {
    let key = format!(
        "{}{}",
        apiserver_fake::controllers::peer_endpoint::PREFIX,
        cluster.server_id(name).unwrap()
    );
    cluster.store().get_internal(&key).await.unwrap()
}

async fn wait_for_record(cluster: &TestCluster, name: &str) -> Value {
    e2e::eventually(&format!("{name}'s peer endpoint record"), SETTLE, || {
        endpoint_record(cluster, name)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_address_is_the_advertised_ip_and_port_only_when_both_are_set() {
    let cluster = ClusterBuilder::new()
        .server("both", |s| {
            s.flag("--peer-advertise-ip=127.0.0.9")
                .flag("--peer-advertise-port=1")
        })
        .server("ip-only", |s| s.flag("--peer-advertise-ip=127.0.0.9"))
        .server("advertise", |s| s.flag("--advertise-address=127.0.0.8"))
        .server("default", |s| s)
        .start()
        .await
        .unwrap();
    let mut out = Vec::new();
    for name in ["both", "ip-only", "advertise", "default"] {
        let record = wait_for_record(&cluster, name).await;
        let subset = &record["subsets"][0];
        let address = format!(
            "{}:{}",
            subset["addresses"][0]["ip"].as_str().unwrap(),
            subset["ports"][0]["port"]
        );
        let port = cluster.server(name).unwrap().local_addr().port();
        let ip = cluster.server(name).unwrap().local_addr().ip();
        let expected = match name {
            "both" => "127.0.0.9:1".to_owned(),
            "advertise" => format!("127.0.0.8:{port}"),
            _ => format!("{ip}:{port}"),
        };
        assert_eq!(address, expected, "{name}");
        out.push(json!({"server": name, "peer address": e2e::redact_text(&address)}));
    }
    insta::assert_yaml_snapshot!("peer_addresses_by_flags", out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_address_is_published_in_the_internal_keyspace_and_removed_on_shutdown() {
    let mut cluster = ClusterBuilder::new()
        .server("a", |s| s.version("1.36"))
        .server("b", |s| s.version("1.36"))
        .start()
        .await
        .unwrap();
    let record = wait_for_record(&cluster, "a").await;
    wait_for_record(&cluster, "b").await;
    // Not an API object: no API path lists it.
    let endpoints = cluster
        .client("a")
        .unwrap()
        .get("/api/v1/namespaces/kube-system/endpoints")
        .await
        .unwrap();
    assert!(
        !endpoints.raw_text().contains("apiserverIdentity"),
        "{endpoints:?}"
    );
    let mut record = record;
    assert_eq!(
        record["subsets"][0]["ports"][0]["port"],
        cluster.server("a").unwrap().local_addr().port()
    );
    record["subsets"][0]["ports"][0]["port"] = json!("[port]");
    insta::assert_yaml_snapshot!("peer_endpoint_record_of_a", record);
    cluster.stop("a").await.unwrap();
    assert_eq!(
        endpoint_record(&cluster, "a").await,
        None,
        "removed on graceful shutdown"
    );
    let b_id = cluster.server_id("b").unwrap();
    cluster.kill("b").await.unwrap();
    let key = format!("{}{b_id}", apiserver_fake::controllers::peer_endpoint::PREFIX);
    assert!(
        cluster.store().get_internal(&key).await.unwrap().is_some(),
        "kept after a crash until its TTL lapses"
    );
}
