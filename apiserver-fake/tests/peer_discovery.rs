//! Peer-aggregated discovery (KEP-4020 beta): the default aggregated `/apis` of a server lists what its
//! peers serve; `profile=nopeer` and every other discovery document stay local. Mirrors upstream's
//! `TestPeerAggregatedDiscovery` and `TestPeerAggregatedDiscoveryWithCRD`
//! (`test/integration/apiserver/discovery/peer_agg_discovery_test.go`).

mod support;

use std::time::Duration;

use http::{Method, StatusCode, header};
use serde_json::Value;
use support::{FOO_CRD, JOBS, TestClient, cluster, eventually, kubectl_available, member, wait_for_proxy};

const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const V2_NOPEER: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer";
const V2_OTHER_PROFILE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=foo";

async fn aggregated(client: &TestClient, path: &str, accept: &str) -> Value {
    let reply = client.send(Method::GET, path, &[("accept", accept)], None).await;
    assert_eq!(reply.status, StatusCode::OK, "{path} {accept}: {}", reply.text());
    reply.json()
}

fn group_names(document: &Value) -> Vec<String> {
    document["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| g["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn has(document: &Value, group: &str) -> bool {
    group_names(document).iter().any(|g| g == group)
}

/// Upstream's servers: A without apps/v1, B without batch/v1, both 1.36.
fn upstream_pair() -> Vec<apiserver_fake::cluster::MemberSpec> {
    vec![
        member("a", 1, "1.36", &["--runtime-config=apps/v1=false"]),
        member("b", 2, "1.36", &["--runtime-config=batch/v1=false"]),
    ]
}

/// Waits until the default `/apis` of `client` lists every group of `groups`.
async fn wait_for_groups(client: &TestClient, groups: &[&str]) -> Value {
    eventually(
        "peer-aggregated discovery to list the peer's groups",
        Duration::from_secs(30),
        || async {
            let document = aggregated(client, "/apis", V2).await;
            groups.iter().all(|g| has(&document, g)).then_some(document)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_peer_aggregated_discovery() {
    let cluster = cluster(upstream_pair()).await;
    let (a, b) = (TestClient::admin(&cluster, 0), TestClient::admin(&cluster, 1));

    // CheckIdentityLeases: both servers publish their identity lease.
    let leases = a
        .get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver")
        .await
        .json();
    assert_eq!(leases["items"].as_array().map(Vec::len), Some(2), "{leases}");

    // NoPeerDiscoveryWorks.
    let a_local = aggregated(&a, "/apis", V2_NOPEER).await;
    assert!(
        !has(&a_local, "apps") && has(&a_local, "batch"),
        "{:?}",
        group_names(&a_local)
    );
    let b_local = aggregated(&b, "/apis", V2_NOPEER).await;
    assert!(
        has(&b_local, "apps") && !has(&b_local, "batch"),
        "{:?}",
        group_names(&b_local)
    );

    // PeerAggregatedDiscoveryEndpoint.
    for client in [&a, &b] {
        wait_for_groups(client, &["apps", "batch"]).await;
    }

    // An unknown profile means peer-aggregated; nopeer still means local.
    assert!(has(&aggregated(&b, "/apis", V2_OTHER_PROFILE).await, "batch"));
    assert!(!has(&aggregated(&b, "/apis", V2_NOPEER).await, "batch"));
    // Every other discovery document is local: /apis/G, /apis/G/V, the legacy /apis, /api.
    assert_eq!(b.get("/apis/batch/v1").await.status, StatusCode::NOT_FOUND);
    assert_eq!(b.get("/apis/batch").await.status, StatusCode::NOT_FOUND);
    let legacy = b.get("/apis").await.json();
    assert_eq!(legacy["kind"], "APIGroupList");
    assert!(
        !legacy["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "batch")
    );
    assert_eq!(
        aggregated(&b, "/api", V2).await,
        aggregated(&b, "/api", V2_NOPEER).await
    );
    // ... while the resources themselves are proxied.
    wait_for_proxy(&b).await;
    assert_eq!(b.get(JOBS).await.status, StatusCode::OK);

    // The merged document of one server has the group data of the other, verbatim.
    let merged = aggregated(&b, "/apis", V2).await;
    let batch = merged["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "batch")
        .unwrap();
    let a_batch = a_local["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "batch")
        .unwrap();
    assert_eq!(batch, a_batch);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_peer_aggregated_discovery_with_crd() {
    let cluster = cluster(upstream_pair()).await;
    let (a, b) = (TestClient::admin(&cluster, 0), TestClient::admin(&cluster, 1));
    for client in [&a, &b] {
        wait_for_groups(client, &["apps", "batch"]).await;
    }

    let created = a
        .post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", FOO_CRD)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    for client in [&a, &b] {
        wait_for_groups(client, &["example.com"]).await;
    }

    let deleted = a
        .send(
            Method::DELETE,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.example.com",
            &[],
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text());
    for client in [&a, &b] {
        eventually(
            "the deleted CRD's group to leave peer-aggregated discovery",
            Duration::from_secs(60),
            || async { (!has(&aggregated(client, "/apis", V2).await, "example.com")).then_some(()) },
        )
        .await;
        assert!(!has(&aggregated(client, "/apis", V2_NOPEER).await, "example.com"));
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_discovery_has_its_own_etag_and_honours_if_none_match() {
    let cluster = cluster(upstream_pair()).await;
    let b = TestClient::admin(&cluster, 1);
    wait_for_groups(&b, &["batch"]).await;

    let merged = b.send(Method::GET, "/apis", &[("accept", V2)], None).await;
    let etag = merged.headers[header::ETAG].to_str().unwrap().to_owned();
    let local = b.send(Method::GET, "/apis", &[("accept", V2_NOPEER)], None).await;
    assert_ne!(local.headers[header::ETAG].to_str().unwrap(), etag);

    let cached = b
        .send(
            Method::GET,
            "/apis",
            &[("accept", V2), ("if-none-match", &etag)],
            None,
        )
        .await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);
    assert!(cached.body.is_empty());
    assert_eq!(cached.headers[header::ETAG].to_str().unwrap(), etag);
    // The local document's validator does not match the merged one (and vice versa).
    let stale = b
        .send(
            Method::GET,
            "/apis",
            &[("accept", V2_NOPEER), ("if-none-match", &etag)],
            None,
        )
        .await;
    assert_eq!(stale.status, StatusCode::OK);

    // Served from the cache: repeated requests count hits, not recomputations.
    let counter = |metrics: &str, name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
    };
    let before = b.get("/metrics").await.text();
    for _ in 0..3 {
        b.send(Method::GET, "/apis", &[("accept", V2)], None).await;
    }
    let after = b.get("/metrics").await.text();
    let hits = "aggregator_discovery_peer_aggregated_cache_hits_total";
    assert!(counter(&after, hits) >= counter(&before, hits) + 2, "{after}");
    let nopeer = "aggregator_discovery_nopeer_requests_total";
    assert!(counter(&after, nopeer) >= 1);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_departed_peers_groups_leave_the_merged_document() {
    let mut cluster = cluster(vec![
        member("a", 1, "1.36", &["--runtime-config=batch/v1=false"]),
        member("b", 2, "1.36", &[]),
    ])
    .await;
    let a = TestClient::admin(&cluster, 0);
    let with_peer = wait_for_groups(&a, &["batch"]).await;
    let etag_with_peer = a
        .send(Method::GET, "/apis", &[("accept", V2)], None)
        .await
        .headers[header::ETAG]
        .clone();

    // B leaves gracefully (1.35+ deletes its identity lease); A's last peer is gone.
    let (_, b) = cluster.servers.remove(1);
    b.shutdown().await;
    let alone = eventually(
        "the departed peer's groups to leave A's discovery",
        Duration::from_secs(30),
        || async {
            let document = aggregated(&a, "/apis", V2).await;
            (!has(&document, "batch")).then_some(document)
        },
    )
    .await;
    assert_eq!(alone, aggregated(&a, "/apis", V2_NOPEER).await);
    assert_ne!(alone, with_peer);
    let now = a.send(Method::GET, "/apis", &[("accept", V2)], None).await;
    assert_ne!(now.headers[header::ETAG], etag_with_peer);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_document_of_a_135_and_136_pair() {
    let gate = "--feature-gates=UnknownVersionInteroperabilityProxy=true";
    let cluster = cluster(vec![
        member("new", 1, "1.36", &[]),
        member("old", 2, "1.35", &[gate]),
    ])
    .await;
    let (new, old) = (TestClient::admin(&cluster, 0), TestClient::admin(&cluster, 1));
    let new_local = aggregated(&new, "/apis", V2_NOPEER).await;
    let old_local = aggregated(&old, "/apis", V2_NOPEER).await;
    assert_ne!(new_local, old_local, "1.35 and 1.36 serve different APIs");

    // The 1.35 server's merge is complete once it no longer equals its local document.
    let old_merged = eventually(
        "1.35's merge to include 1.36's APIs",
        Duration::from_secs(30),
        || async {
            let merged = aggregated(&old, "/apis", V2).await;
            (merged != old_local).then_some(merged)
        },
    )
    .await;
    let new_merged = aggregated(&new, "/apis", V2).await;
    insta::assert_json_snapshot!("merged_apis_135_with_136_peer", old_merged);
    // 1.36 serves a superset of 1.35: both servers advertise the same document.
    assert_eq!(new_merged, old_merged);
    assert_eq!(new_merged, new_local);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_through_a_server_lacking_batch_lists_batch() {
    if !kubectl_available() {
        return;
    }
    let cluster = cluster(vec![
        member("a", 1, "1.36", &["--runtime-config=batch/v1=false"]),
        member("b", 2, "1.36", &[]),
    ])
    .await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_groups(&a, &["batch"]).await;
    let kubeconfig = cluster.dir.join("a.kubeconfig");
    let run = |args: &'static [&'static str]| {
        let kubeconfig = kubeconfig.clone();
        tokio::task::spawn_blocking(move || support::kubectl(&kubeconfig, args))
    };
    let (ok, out, err) = run(&["api-resources", "--api-group=batch", "-o", "name"])
        .await
        .unwrap();
    assert!(ok, "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["cronjobs.batch", "jobs.batch"]);
    // With discovery knowing jobs, kubectl's `get jobs` works through A (proxied to B).
    wait_for_proxy(&a).await;
    let (ok, out, err) = run(&["get", "jobs", "-A"]).await.unwrap();
    assert!(ok, "{err}");
    assert!(
        out.is_empty() || out.starts_with("NAME") || err.contains("No resources found"),
        "{out}"
    );
    cluster.shutdown().await;
}
