//! Peer lifecycle: fail-over after a crash (upstream's TestPeerProxiedRequestToThirdServerAfterFirstDies),
//! identity lease clean-up on graceful shutdown and at startup (1.35+), and the exclusion of CRD group
//! versions from peer data (1.36).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver_fake::cluster::Cluster;
use apiserver_fake::controllers::identity::{IDENTITY_LEASE_NAMESPACE, server_id};
use apiserver_fake::server::RunningServer;
use apiserver_fake::server::config::ServerFlags;
use apiserver_fake::store::{ObjectKey, StorageResource, Store};
use http::{Method, StatusCode};
use mvp_core::feeders::{RECEIPT_PREFIX, receipt_from_record};
use serde_json::Value;
use support::{FOO_CRD, JOBS, TestClient, cluster, eventually, job, member};

/// Timing knobs that make a crashed server disappear within seconds.
const FAST: &[&str] = &[
    "--identity-lease-duration-seconds=3",
    "--identity-lease-renew-interval-seconds=1",
    "--identity-lease-gc-period-seconds=1",
    "--peer-endpoint-ttl-seconds=3",
    "--peer-endpoint-refresh-seconds=1",
    "--storage-version-gc-period-seconds=1",
];

const STORAGE_VERSION_MODE: &[&str] = &[
    "--peer-resolution-mode=storage-version",
    "--feature-gates=StorageVersionAPI=true",
];

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const FOOS: &str = "/apis/example.com/v1/namespaces/default/foos";

fn leases() -> StorageResource {
    StorageResource::new("coordination.k8s.io", "leases")
}

async fn identity_lease(store: &Arc<dyn Store>, hostname: &str) -> Option<Value> {
    store
        .get(
            &leases(),
            &ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, &server_id(hostname)),
        )
        .await
        .ok()
}

fn client_of(cluster: &Cluster, server: &RunningServer) -> TestClient {
    let dir = &cluster.dir;
    TestClient::new(
        &server.url(),
        &dir.join("ca.crt"),
        Some((&dir.join("admin.crt"), &dir.join("admin.key"))),
    )
}

fn proxied_requests_for(server: &RunningServer, path: &str) -> usize {
    server
        .served_requests()
        .iter()
        .filter(|r| r.peer_proxied && r.uri.starts_with(path))
        .count()
}

/// Upstream's TestPeerProxiedRequestToThirdServerAfterFirstDies: A and C serve batch/v1, B does not. A job
/// is created through A, A crashes, and B's job list must eventually be served by C (transient 503s are
/// allowed while B still picks the dead A).
async fn third_server_after_first_dies(mode: &[&str]) {
    let a_flags = [FAST, mode].concat();
    let mut b_flags = [FAST, mode].concat();
    b_flags.push("--runtime-config=batch/v1=false");
    let mut cluster = cluster(vec![
        member("a", 1, "1.36", &a_flags),
        member("b", 2, "1.36", &b_flags),
        member("c", 3, "1.36", &a_flags),
    ])
    .await;
    let a = TestClient::admin(&cluster, 0);
    let b = TestClient::admin(&cluster, 1);
    let created = a.post(JOBS, &job("test-job")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    support::wait_for_proxy(&b).await;
    // As upstream's test has C up before A dies: wait until B's proxy knows both capable peers (each
    // has served one of B's lists), so the crash is not mixed up with C's own start-up.
    eventually("B to reach both A and C", Duration::from_secs(10), || async {
        b.get(JOBS).await;
        let reached = |i: usize| proxied_requests_for(&cluster.servers[i].1, JOBS) > 0;
        (reached(0) && reached(2)).then_some(())
    })
    .await;

    let (_, dead) = cluster.servers.remove(0);
    dead.kill().await;
    let killed_at = Instant::now();
    // Poll B's job list (upstream: every 1 s for up to a minute) until ten answers in a row are the job
    // list: a single success could be a lucky random choice of C while A is still a candidate.
    // The streak's first success and its latest list.
    let streak = std::cell::RefCell::new(None::<(Instant, Value)>);
    let transient = kube_mvp_testing::until_steady(
        "B's job list served (by C) ten times in a row",
        10,
        Duration::from_secs(30),
        || async {
            let reply = b.get(JOBS).await;
            let mut streak = streak.borrow_mut();
            if reply.status == StatusCode::OK {
                streak.get_or_insert_with(|| (Instant::now(), Value::Null)).1 = reply.json();
                Ok(())
            } else {
                *streak = None;
                Err(reply.status)
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("B did not reach C: {e}"));
    let (first_success, list) = streak.into_inner().expect("a streak of successes");
    let failed_over_after = first_success.duration_since(killed_at);
    assert_eq!(list["items"][0]["metadata"]["name"], "test-job");
    assert!(
        transient.iter().all(|s| *s == StatusCode::SERVICE_UNAVAILABLE),
        "only 503s are expected while failing over: {transient:?}"
    );
    let c = &cluster.servers[1].1;
    assert!(proxied_requests_for(c, JOBS) > 0, "C served B's list");

    // The crashed server is then forgotten: its lease is collected, and requests keep succeeding.
    eventually(
        "A's identity lease to be collected",
        Duration::from_secs(10),
        || async { identity_lease(&cluster.store, "a").await.is_none().then_some(()) },
    )
    .await;
    let forgotten_after = killed_at.elapsed();
    if mode == STORAGE_VERSION_MODE {
        let jobs_sv = cluster
            .store
            .get(
                &StorageResource::new("internal.apiserver.k8s.io", "storageversions"),
                &ObjectKey::cluster("batch.jobs"),
            )
            .await
            .unwrap();
        let ids: Vec<&str> = jobs_sv["status"]["storageVersions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["apiServerID"].as_str())
            .collect();
        eventually(
            "A's StorageVersion entries to be collected",
            Duration::from_secs(5),
            || {
                let store = cluster.store.clone();
                async move {
                    let sv = store
                        .get(
                            &StorageResource::new("internal.apiserver.k8s.io", "storageversions"),
                            &ObjectKey::cluster("batch.jobs"),
                        )
                        .await
                        .ok()?;
                    let ids: Vec<String> = sv["status"]["storageVersions"]
                        .as_array()?
                        .iter()
                        .filter_map(|e| e["apiServerID"].as_str().map(str::to_owned))
                        .collect();
                    (ids == vec![server_id("c")]).then_some(())
                }
            },
        )
        .await;
        assert!(
            !ids.contains(&server_id("b").as_str()),
            "B serves no jobs: {ids:?}"
        );
    }
    // Once B has seen the lease go too (its lease informer may lag the store), A is no longer a
    // candidate: ten answers in a row are the job list.
    eventually(
        "ten of B's job lists in a row without A",
        Duration::from_secs(10),
        || async {
            for _ in 0..10 {
                if b.get(JOBS).await.status != StatusCode::OK {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    eprintln!(
        "fail-over {mode:?}: B served by C {failed_over_after:?} after the crash ({} transient 503s); \
         A's lease collected after {forgotten_after:?}",
        transient.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reaches_third_server_after_first_dies_discovery_mode() {
    third_server_after_first_dies(&["--peer-resolution-mode=discovery"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reaches_third_server_after_first_dies_storage_version_mode() {
    third_server_after_first_dies(STORAGE_VERSION_MODE).await;
}

/// Gracefully stops A (the only server of Jobs) with B's `--departed-peer-grace-seconds` at
/// `grace_flag`, and returns what B answered for Jobs from the stop until it answered the local
/// 404, with when.
async fn after_graceful_shutdown(grace_flag: &str) -> Vec<(Duration, StatusCode, String)> {
    // Upstream's default lease timings: only the shutdown clean-up can make peers forget A quickly.
    let mut cluster = cluster(vec![
        member("a", 1, "1.36", &[]),
        member("b", 2, "1.36", &["--runtime-config=batch/v1=false", grace_flag]),
    ])
    .await;
    let b = TestClient::admin(&cluster, 1);
    support::wait_for_proxy(&b).await;
    assert!(identity_lease(&cluster.store, "a").await.is_some());

    let (_, a) = cluster.servers.remove(0);
    a.shutdown().await;
    let stopped_at = Instant::now();
    assert!(
        identity_lease(&cluster.store, "a").await.is_none(),
        "the lease is deleted by the shutdown itself"
    );
    let answers = std::cell::RefCell::new(Vec::new());
    kube_mvp_testing::eventually(
        "B to answer its local 404 for Jobs (A forgotten)",
        Duration::from_secs(15),
        || async {
            let reply = b.get(JOBS).await;
            let status = reply.status;
            answers
                .borrow_mut()
                .push((stopped_at.elapsed(), status, reply.text()));
            (status == StatusCode::NOT_FOUND).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; B still answers for A's Jobs: {:?}", answers.borrow()));
    answers.into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_deletes_the_lease_and_peers_forget_it_after_the_departed_grace() {
    let answers = after_graceful_shutdown("--departed-peer-grace-seconds=2").await;
    let (forgotten_after, _, body) = answers.last().unwrap();
    assert_eq!(body, "404 page not found\n");
    // Until then A is kept as a server of Jobs, without an address (it withdrew its record
    // before its lease): the unresolvable-peer 503, never a dial to a server that is gone.
    for (at, status, body) in &answers[..answers.len() - 1] {
        assert_eq!(*status, StatusCode::SERVICE_UNAVAILABLE, "{at:?}: {body}");
        assert!(
            body.contains("Error getting ip and port info of the remote server while proxying"),
            "{at:?}: {body}"
        );
    }
    assert!(
        *forgotten_after >= Duration::from_secs(2) && *forgotten_after < Duration::from_secs(7),
        "forgotten {forgotten_after:?} after the stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_departed_grace_peers_stop_proxying_at_once_as_upstream() {
    let answers = after_graceful_shutdown("--departed-peer-grace-seconds=0").await;
    let (forgotten_after, _, body) = answers.last().unwrap();
    assert_eq!(body, "404 page not found\n");
    assert!(*forgotten_after < Duration::from_secs(5), "{answers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lease_of_the_same_name_is_replaced_at_startup() {
    let mut cluster = cluster(vec![
        member("a", 1, "1.36", &[]),
        member("b", 2, "1.36", &["--runtime-config=batch/v1=false"]),
    ])
    .await;
    let b = TestClient::admin(&cluster, 1);
    support::wait_for_proxy(&b).await;
    let stale = identity_lease(&cluster.store, "a").await.unwrap();

    // A crashes: its lease stays (3600 s), then a new process of the same host starts.
    let (spec, crashed) = cluster.servers.remove(0);
    crashed.kill().await;
    assert_eq!(
        identity_lease(&cluster.store, "a").await.unwrap()["metadata"]["uid"],
        stale["metadata"]["uid"]
    );
    let restarted = cluster.start_member(&spec, 0).await.unwrap();
    let fresh = identity_lease(&cluster.store, "a").await.unwrap();
    assert_ne!(
        fresh["metadata"]["uid"], stale["metadata"]["uid"],
        "deleted and re-created, not taken over"
    );
    assert_eq!(
        fresh["spec"]["holderIdentity"].as_str(),
        Some(restarted.holder_identity())
    );
    assert_ne!(fresh["spec"]["holderIdentity"], stale["spec"]["holderIdentity"]);

    // B's peer cache follows the restart (holder change) and proxies to the new process.
    let a_new = client_of(&cluster, &restarted);
    let created = a_new.post(JOBS, &job("after-restart")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    eventually(
        "B to proxy to the restarted A",
        Duration::from_secs(10),
        || async {
            let reply = b.get(JOBS).await;
            (reply.status == StatusCode::OK && proxied_requests_for(&restarted, JOBS) > 0).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_1_35_a_restarted_server_takes_its_old_lease_over() {
    let mut cluster = cluster(vec![member("a", 1, "1.34", &[])]).await;
    let old = identity_lease(&cluster.store, "a").await.unwrap();
    let (spec, crashed) = cluster.servers.remove(0);
    crashed.kill().await;
    let restarted = cluster.start_member(&spec, 0).await.unwrap();
    let renewed = identity_lease(&cluster.store, "a").await.unwrap();
    assert_eq!(
        renewed["metadata"]["uid"], old["metadata"]["uid"],
        "updated in place"
    );
    assert_eq!(
        renewed["spec"]["holderIdentity"].as_str(),
        Some(restarted.holder_identity())
    );
}

/// 1.36 group-version exclusion: the GVs of local CRDs are never proxied, even when a peer's cached
/// discovery lists them, and stay excluded for the grace period after the CRD is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_group_versions_are_excluded_from_peer_data_with_a_grace_after_deletion() {
    // b never renews during the test, so a's copy of b's discovery changes only when the test says so.
    let cluster = cluster(vec![
        member("a", 1, "1.36", &["--gv-exclusion-grace-period-seconds=3"]),
        member("b", 2, "1.36", &["--identity-lease-renew-interval-seconds=3600"]),
    ])
    .await;
    let a = TestClient::admin(&cluster, 0);
    let b = TestClient::admin(&cluster, 1);
    let server_b = &cluster.servers[1].1;
    let created = a.post(CRD_PATH, FOO_CRD).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let local_only = [("x-kubernetes-peer-proxied", "true")];
    for client in [&a, &b] {
        eventually("the CRD to be served", Duration::from_secs(5), || async {
            let reply = client.send(Method::GET, FOOS, &local_only, None).await;
            (reply.status == StatusCode::OK).then_some(())
        })
        .await;
    }

    // Make a re-fetch b's discovery, which now lists example.com/v1 foos: a holder change, as when b
    // restarts. a's own local discovery cache is refreshed only every 30 minutes and lacks foos.
    let key = ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, server_b.server_id());
    let mut lease = cluster.store.get(&leases(), &key).await.unwrap();
    let restarted = format!("{}_restarted", server_b.server_id());
    lease["spec"]["holderIdentity"] = Value::from(restarted.as_str());
    cluster.store.update(&leases(), &key, lease, None).await.unwrap();
    // a holds b's new documents once its discovery receipt, published after the sync that stored
    // them, lists b's new run.
    let receipt_key = format!("{RECEIPT_PREFIX}{}", cluster.servers[0].1.server_id());
    eventually(
        "a to hold b's re-fetched discovery",
        Duration::from_secs(5),
        || async {
            let record = cluster.store.get_internal(&receipt_key).await.ok()??;
            let receipt = receipt_from_record(&record)?;
            (receipt.get(server_b.server_id()) == Some(&restarted)).then_some(())
        },
    )
    .await;

    // The test's own local-only requests to b carry the header too; count from here.
    let baseline = proxied_requests_for(server_b, FOOS);
    let reply = a.get(FOOS).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(
        proxied_requests_for(server_b, FOOS),
        baseline,
        "served by a itself"
    );

    let deleted = a
        .send(Method::DELETE, &format!("{CRD_PATH}/foos.example.com"), &[], None)
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text());
    let deleted_at = Instant::now();
    eventually("the CRD to be gone on a", Duration::from_secs(2), || async {
        let reply = a.send(Method::GET, FOOS, &local_only, None).await;
        (reply.status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    // Within the grace period the deleted GV is still excluded: a's own 404, nothing sent to b.
    let reply = a.get(FOOS).await;
    assert!(
        deleted_at.elapsed() < Duration::from_secs(3),
        "the check ran within the grace period"
    );
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.text(), "404 page not found\n");
    assert_eq!(proxied_requests_for(server_b, FOOS), baseline);

    // After the grace, a's stale copy of b's discovery routes the request to b again (upstream's
    // behaviour too): proof that only the exclusion kept it local.
    eventually("the grace period to end", Duration::from_secs(10), || async {
        let reply = a.get(FOOS).await;
        (proxied_requests_for(server_b, FOOS) > baseline).then_some(reply)
    })
    .await;
    assert!(deleted_at.elapsed() >= Duration::from_secs(3));
}

#[test]
fn timing_knobs_default_to_upstream_and_are_validated() {
    let base = ["--tls-cert-file=c", "--tls-private-key-file=k"];
    let options = ServerFlags::from_args(base).unwrap().validate().unwrap();
    assert_eq!(options.identity_lease_duration, Duration::from_secs(3600));
    assert_eq!(options.identity_lease_renew_interval, Duration::from_secs(10));
    assert_eq!(options.identity_lease_gc_period, Duration::from_secs(3600));
    assert_eq!(options.peer_endpoint_ttl, Duration::from_secs(15));
    assert_eq!(options.peer_endpoint_refresh, Duration::from_secs(10));
    assert_eq!(options.local_discovery_refresh, Duration::from_secs(30 * 60));
    assert_eq!(options.gv_exclusion_grace_period, Duration::from_secs(5 * 60));
    // Not upstream's (0): a restarting peer is kept across its lease's replacement.
    assert_eq!(options.departed_peer_grace, Duration::from_secs(5));

    let invalid = |extra: &str| {
        let args = [base[0], base[1], extra];
        ServerFlags::from_args(args)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        invalid("--peer-endpoint-refresh-seconds=15"),
        "--peer-endpoint-refresh-seconds must be less than --peer-endpoint-ttl-seconds"
    );
    assert_eq!(
        invalid("--identity-lease-gc-period-seconds=0"),
        "--identity-lease-gc-period-seconds must be positive"
    );
    let no_grace = ["--gv-exclusion-grace-period-seconds=0", base[0], base[1]];
    assert!(ServerFlags::from_args(no_grace).unwrap().validate().is_ok());
}
