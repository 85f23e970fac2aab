//! Identity leases and how the Discovery-mode proxy reacts to them (checklist items 28, 34, 35, 36, 50).

mod support;

use std::time::Duration;

use e2e::{ClusterBuilder, HttpsClient, TestCluster, eventually};
use serde_json::{Value, json};
use support::*;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

async fn lease(client: &HttpsClient, id: &str) -> Option<Value> {
    let reply = client.get(&format!("{LEASES}/{id}")).await.unwrap();
    (reply.code() == 200).then(|| reply.raw_json())
}

/// How many times server `name` served a discovery fetch (`GET /apis` as `system:apiserver`).
fn discovery_fetches(cluster: &TestCluster, name: &str) -> usize {
    cluster
        .server(name)
        .unwrap()
        .served_requests()
        .iter()
        .filter(|r| r.user.name == "system:apiserver" && r.uri == "/apis")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_lease_is_named_after_the_hostname_hash_and_advertises_the_peer_address() {
    let cluster = ClusterBuilder::new()
        .server("a", |s| s.version("1.36").hostname("test-server-a"))
        .server("b", |s| s.version("1.34").hostname("test-server-b"))
        .start()
        .await
        .unwrap();
    let client = cluster.client("a").unwrap();
    let list = client
        .get(&format!(
            "{LEASES}?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver"
        ))
        .await
        .unwrap();
    let names: Vec<&str> = list.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["metadata"]["name"].as_str())
        .collect();
    let mut expected = vec![cluster.server_id("a").unwrap(), cluster.server_id("b").unwrap()];
    expected.sort();
    assert_eq!(names, expected);
    // b (1.34, gate off) has no peer-advertise-address annotation.
    let a_id = cluster.server_id("a").unwrap();
    let a_lease = client.get(&format!("{LEASES}/{a_id}")).await.unwrap();
    let holder = a_lease.raw_json()["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        holder.starts_with(&format!("{a_id}_")) && holder.len() == a_id.len() + 37,
        "{holder}"
    );
    // Leases carry no metadata.generation (their registry strategy does not set it), so renewals do not
    // change the snapshot.
    assert!(
        list.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["metadata"].get("generation").is_none())
    );
    insta::assert_yaml_snapshot!("identity_leases_of_test_server_a_and_b", list);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_renewals_do_not_refetch_discovery_but_a_restart_does() {
    let mut cluster = ClusterBuilder::new()
        .server("a", |s| {
            s.version("1.36")
                .identity_lease_renew_interval(Duration::from_secs(1))
        })
        .server("b", |s| s.version("1.36").runtime_config("batch/v1=false"))
        .start()
        .await
        .unwrap();
    wait_until_b_proxies_jobs(&cluster).await;
    let fetches = discovery_fetches(&cluster, "a");
    // Let a renew its lease twice.
    let client = cluster.client("b").unwrap();
    let a_id = cluster.server_id("a").unwrap();
    let first = lease(&client, &a_id).await.unwrap()["spec"]["renewTime"].clone();
    let seen = std::sync::Mutex::new(vec![first]);
    eventually("a renews its lease twice", SETTLE, || async {
        let renew = lease(&client, &a_id).await?["spec"]["renewTime"].clone();
        let mut seen = seen.lock().unwrap();
        if seen.last() != Some(&renew) {
            seen.push(renew);
        }
        (seen.len() >= 3).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(
        discovery_fetches(&cluster, "a"),
        fetches,
        "renewals triggered no discovery fetch"
    );
    // A restart changes holderIdentity: b fetches the new a's discovery.
    cluster.restart("a").await.unwrap();
    eventually("b fetches the restarted a's discovery", SETTLE, || async {
        (discovery_fetches(&cluster, "a") > 0).then_some(())
    })
    .await
    .unwrap();
    wait_until_b_proxies_jobs(&cluster).await;
}

/// Makes sure b ran a full peer-discovery rebuild after everything done so far: adds a valid identity
/// lease for a server that has no address and waits until b counts the failed resolution.
async fn sync_barrier(cluster: &TestCluster, name: &str) {
    let metric = "apiserver_peer_discovery_sync_errors_total";
    let count = || async {
        metric_lines(cluster, "b", metric)
            .await
            .iter()
            .filter_map(|l| l.strip_prefix(&format!("{metric}{{type=\"hostport_resolution\"}} ")))
            .filter_map(|v| v.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = count().await;
    let ghost = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-system", "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
        "spec": {"holderIdentity": format!("{name}_0"), "leaseDurationSeconds": 3600}});
    assert_eq!(
        cluster
            .client("a")
            .unwrap()
            .post_json(LEASES, &ghost)
            .await
            .unwrap()
            .code(),
        201
    );
    eventually("b re-synced its peers", SETTLE, || async {
        (count().await > before).then_some(())
    })
    .await
    .unwrap();
}

/// a and b lack batch/v1; c serves it but writes its lease only once (renew interval one hour), so the
/// test controls which lease b sees for c.
async fn c_with_a_lease_under_test_control() -> TestCluster {
    // No server renews its lease during a test: every identity lease change (a renewal too) makes the
    // proxies re-sync, which would race the assertions about what they hold between changes.
    ClusterBuilder::new()
        .server("a", |s| {
            s.version("1.36")
                .runtime_config("batch/v1=false")
                .identity_lease_renew_interval(Duration::from_secs(3600))
        })
        .server("b", |s| {
            s.version("1.36")
                .runtime_config("batch/v1=false")
                .identity_lease_renew_interval(Duration::from_secs(3600))
        })
        .server("c", |s| {
            s.version("1.36")
                .identity_lease_renew_interval(Duration::from_secs(3600))
        })
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_without_identity_label_or_holder_are_ignored_and_expiry_is_not_checked() {
    let cluster = c_with_a_lease_under_test_control().await;
    wait_until_b_proxies_jobs(&cluster).await;
    let b = cluster.client("b").unwrap();
    let c_id = cluster.server_id("c").unwrap();
    // Without c's lease b forgets c.
    assert_eq!(b.delete(&format!("{LEASES}/{c_id}")).await.unwrap().code(), 200);
    wait_for_code(&cluster, "b", JOBS, 404).await;
    let mut out = Vec::new();
    let variants = [
        (
            "no identity label",
            json!({"name": c_id, "namespace": "kube-system"}),
            json!({"holderIdentity": format!("{c_id}_1"), "leaseDurationSeconds": 3600}),
        ),
        (
            "no holderIdentity",
            json!({"name": c_id, "namespace": "kube-system", "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}}),
            json!({"leaseDurationSeconds": 3600}),
        ),
        // Expired long ago: upstream does not check expiry, so c is a peer again.
        (
            "label and holder, expired in 2020",
            json!({"name": c_id, "namespace": "kube-system", "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}}),
            json!({"holderIdentity": format!("{c_id}_3"), "leaseDurationSeconds": 1, "renewTime": "2020-01-01T00:00:00.000000Z"}),
        ),
    ];
    for (what, metadata, spec) in variants {
        let _ = b.delete(&format!("{LEASES}/{c_id}")).await.unwrap();
        let created = b.post_json(LEASES, &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec})).await.unwrap();
        assert_eq!(created.code(), 201, "{created:?}");
        let expected = if what.starts_with("label and holder") {
            200
        } else {
            404
        };
        if expected == 404 {
            sync_barrier(&cluster, &format!("apiserver-barrier-{}", out.len())).await;
        }
        let reply = wait_for_code(&cluster, "b", JOBS, expected).await;
        out.push(json!({"lease for c": what, "jobs via b": reply.status}));
    }
    insta::assert_yaml_snapshot!("jobs_via_b_by_shape_of_c_lease", out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_whose_discovery_fetch_fails_keeps_its_last_entry() {
    let mut cluster = c_with_a_lease_under_test_control().await;
    wait_until_b_proxies_jobs(&cluster).await;
    // c crashes; b still routes to it (transport errors).
    cluster.kill("c").await.unwrap();
    let reply = cluster.client("b").unwrap().get(JOBS).await.unwrap();
    assert_eq!(
        (reply.code(), reply.header("content-type")),
        (503, Some("text/plain; charset=utf-8"))
    );
    // Any identity lease change triggers a full rebuild, in which c's fetch fails. Upstream then
    // leaves c out and b answers its local 404: a false 404 for a server that is only down. Here
    // c keeps what it served until a fetch of it succeeds (docs/decisions.md §8): still the 503.
    sync_barrier(&cluster, "apiserver-ghost").await;
    let reply = cluster.client("b").unwrap().get(JOBS).await.unwrap();
    insta::assert_yaml_snapshot!("jobs_via_b_after_c_fetch_failed", reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_lease_is_deleted_on_graceful_shutdown_and_replaced_on_restart_from_1_35() {
    let mut cluster = ClusterBuilder::new()
        .server("a", |s| s.version("1.36"))
        .server("b", |s| s.version("1.35"))
        .server("old", |s| s.version("1.34"))
        .server("observer", |s| s.version("1.36"))
        .start()
        .await
        .unwrap();
    let observer = cluster.client("observer").unwrap();
    let mut out = Vec::new();
    // 1.35 b: graceful stop deletes its lease.
    let b_id = cluster.server_id("b").unwrap();
    cluster.stop("b").await.unwrap();
    out.push(json!({"1.35 after graceful shutdown": lease(&observer, &b_id).await.is_some()}));
    // 1.34: the lease stays behind.
    let old_id = cluster.server_id("old").unwrap();
    cluster.stop("old").await.unwrap();
    out.push(json!({"1.34 after graceful shutdown": lease(&observer, &old_id).await.is_some()}));
    // 1.36 a crashes (lease kept), restarts: the stale lease is deleted and a new one created.
    let a_id = cluster.server_id("a").unwrap();
    let before = lease(&observer, &a_id).await.unwrap();
    cluster.kill("a").await.unwrap();
    out.push(json!({"1.36 after a crash": lease(&observer, &a_id).await.is_some()}));
    cluster.restart("a").await.unwrap();
    let after = lease(&observer, &a_id).await.unwrap();
    assert_ne!(
        before["metadata"]["uid"], after["metadata"]["uid"],
        "deleted and created, not updated"
    );
    assert_ne!(before["spec"]["holderIdentity"], after["spec"]["holderIdentity"]);
    out.push(json!({"1.36 after restart: same lease object": before["metadata"]["uid"] == after["metadata"]["uid"]}));
    insta::assert_yaml_snapshot!("identity_lease_presence_across_shutdowns", out);
}
