//! The garbage collector through the server that lacks the owner's group: `a` serves batch/v1, `b`
//! does not, and the controller manager talks through `b`. A ConfigMap owned by a Job (stored through
//! `a`) lives while the Job does, because the collector's live GET of the Job is proxied to `a`; it goes
//! once the Job is deleted. Without the proxy filter on `b`, `b`'s discovery does not list Jobs: the
//! collector cannot resolve the owner's kind and, as upstream, never takes that for absence (the
//! dependent survives, and is not collected after the Job goes either: a leak, not a wrongful delete).
//! A dependent of an owner that never existed, created after the first, tells when the collector has
//! looked.

mod support;

use std::time::Duration;

use e2e::{ClusterBuilder, PeerProxy, PeerResolutionMode, TestCluster, eventually};
use serde_json::{Value, json};
use support::*;

/// How long the collector may take (it acts on watch events: a deadline, not a wait).
const WITHIN: Duration = Duration::from_secs(30);

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

async fn collector_through_b(proxy_on_b: bool) -> TestCluster {
    let m = in_mode(PeerResolutionMode::Discovery);
    let m2 = m.clone();
    let cluster = ClusterBuilder::new()
        .server("a", m)
        .server("b", move |s| {
            let s = m2(s).runtime_config("batch/v1=false");
            if proxy_on_b {
                s
            } else {
                s.peer_proxy(PeerProxy::Never)
            }
        })
        .controller_manager_through("b")
        .start()
        .await
        .expect("cluster starts");
    if proxy_on_b {
        wait_until_b_proxies_jobs(&cluster).await;
    }
    cluster
}

/// A ConfigMap named `name` owned by `owner` (`apiVersion`, `kind`, `name`, `uid`).
fn dependent(name: &str, owner: [&str; 4]) -> Value {
    let [api_version, kind, owner_name, uid] = owner;
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [
        {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid}]}})
}

/// Creates the Job (through `a`), its dependent and the canary (through `b`), and waits for the
/// collector to delete the canary. Returns the Job's uid.
async fn job_with_dependent(cluster: &TestCluster) -> String {
    let (a, b) = (cluster.client("a").unwrap(), cluster.client("b").unwrap());
    let created = a
        .post_json("/apis/batch/v1/namespaces/default/jobs", &job("owner"))
        .await
        .unwrap();
    assert_eq!(created.code(), 201, "{created:#?}");
    let uid = created.raw_json()["metadata"]["uid"].as_str().unwrap().to_owned();
    let of_job = dependent("of-the-job", ["batch/v1", "Job", "owner", &uid]);
    assert_eq!(b.post_json(CONFIGMAPS, &of_job).await.unwrap().code(), 201);
    let canary = dependent(
        "canary",
        [
            "v1",
            "ConfigMap",
            "never-existed",
            "00000000-0000-0000-0000-000000000000",
        ],
    );
    assert_eq!(b.post_json(CONFIGMAPS, &canary).await.unwrap().code(), 201);
    eventually("the collector to delete the canary", WITHIN, || async {
        let reply = b.get(&format!("{CONFIGMAPS}/canary")).await.ok()?;
        (reply.code() == 404).then_some(())
    })
    .await
    .unwrap();
    uid
}

async fn code_of(cluster: &TestCluster, via: &str, path: &str) -> u16 {
    cluster.client(via).unwrap().get(path).await.unwrap().code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_dependent_lives_while_the_job_does_when_the_collector_asks_the_server_lacking_jobs() {
    let cluster = collector_through_b(true).await;
    job_with_dependent(&cluster).await;
    let while_the_job_exists = code_of(&cluster, "b", &format!("{CONFIGMAPS}/of-the-job")).await;
    let b = cluster.client("b").unwrap();
    let deleted = b
        .delete("/apis/batch/v1/namespaces/default/jobs/owner?propagationPolicy=Background")
        .await
        .unwrap();
    assert_eq!(deleted.code(), 200, "{deleted:#?}");
    eventually("the dependent to be collected", WITHIN, || async {
        let reply = b.get(&format!("{CONFIGMAPS}/of-the-job")).await.ok()?;
        (reply.code() == 404).then_some(())
    })
    .await
    .unwrap();
    insta::assert_yaml_snapshot!(
        "dependent_of_a_peer_served_job",
        json!({"dependent while the Job exists": while_the_job_exists, "dependent after the Job's delete": 404})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_proxy_an_unresolvable_owner_kind_is_never_taken_for_absent() {
    let cluster = collector_through_b(false).await;
    job_with_dependent(&cluster).await;
    let b = cluster.client("b").unwrap();
    let discovered = b.get("/apis/batch/v1").await.unwrap().code();
    let while_the_job_exists = code_of(&cluster, "b", &format!("{CONFIGMAPS}/of-the-job")).await;
    let a = cluster.client("a").unwrap();
    let deleted = a
        .delete("/apis/batch/v1/namespaces/default/jobs/owner?propagationPolicy=Background")
        .await
        .unwrap();
    assert_eq!(deleted.code(), 200, "{deleted:#?}");
    // A second canary: once it is collected, the collector has been through its queue again.
    let canary = dependent(
        "canary-2",
        [
            "v1",
            "ConfigMap",
            "never-existed",
            "00000000-0000-0000-0000-000000000001",
        ],
    );
    assert_eq!(b.post_json(CONFIGMAPS, &canary).await.unwrap().code(), 201);
    eventually("the collector to delete the second canary", WITHIN, || async {
        let reply = b.get(&format!("{CONFIGMAPS}/canary-2")).await.ok()?;
        (reply.code() == 404).then_some(())
    })
    .await
    .unwrap();
    let after = code_of(&cluster, "b", &format!("{CONFIGMAPS}/of-the-job")).await;
    insta::assert_yaml_snapshot!(
        "dependent_of_an_undiscoverable_job",
        json!({
            "b's /apis/batch/v1": discovered,
            "dependent while the Job exists": while_the_job_exists,
            "dependent after the Job's delete": after,
        })
    );
}
