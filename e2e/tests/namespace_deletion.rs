//! Namespace deletion with the controller manager running through the server that lacks a group
//! (`b`, no batch/v1): the harm the Mixed Version Proxy prevents. The namespace controller discovers
//! through `b` (peer-aggregated discovery lists batch/v1, served by `a`), deletes the Jobs through `b`
//! (proxied to `a`) and only then finalizes: nothing is left in the store and nothing comes back when
//! the namespace is re-created. When `a` cannot be reached the deletion of its Jobs fails (503), and
//! the namespace stays `Terminating` with upstream's `NamespaceDeletionContentFailure` condition until
//! `a` is back.

mod support;

use std::time::Duration;

use apiserver_fake::store::StorageResource;
use e2e::{ClusterBuilder, ControllerManagerOptions, PeerResolutionMode, TestCluster, eventually};
use serde_json::{Value, json};
use support::*;

/// How long a namespace may take to go (the controller's grace period, a few retries).
const GONE_WITHIN: Duration = Duration::from_secs(30);

/// `a` serves batch/v1, `b` does not; the controller manager talks through `b`.
async fn controllers_through_b() -> TestCluster {
    let m = in_mode(PeerResolutionMode::Discovery);
    let m2 = m.clone();
    let cluster = ClusterBuilder::new()
        .server("a", m)
        .server("b", move |s| m2(s).runtime_config("batch/v1=false"))
        .controller_manager_through("b")
        .controller_manager_options(ControllerManagerOptions {
            // Upstream waits 5 s; nothing here needs the wait (every server reads the same store).
            namespace_deletion_grace_period: Duration::from_millis(100),
            ..ControllerManagerOptions::default()
        })
        .start()
        .await
        .expect("cluster starts");
    wait_until_b_proxies_jobs(&cluster).await;
    cluster
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Creates namespace `ns` with a Job (stored through `a`'s group) and a ConfigMap, both through `b`.
async fn fill(cluster: &TestCluster, ns: &str) {
    let b = cluster.client("b").unwrap();
    let created = b.post_json("/api/v1/namespaces", &namespace(ns)).await.unwrap();
    assert_eq!(created.code(), 201, "{created:#?}");
    let mut job = job("doomed");
    job["metadata"]["namespace"] = json!(ns);
    let created = b
        .post_json(&format!("/apis/batch/v1/namespaces/{ns}/jobs"), &job)
        .await
        .unwrap();
    assert_eq!(created.code(), 201, "{created:#?}");
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doomed"}});
    let created = b
        .post_json(&format!("/api/v1/namespaces/{ns}/configmaps"), &config_map)
        .await
        .unwrap();
    assert_eq!(created.code(), 201, "{created:#?}");
}

/// How many objects of `group`/`resource` the store holds in `ns`.
async fn stored(cluster: &TestCluster, group: &str, resource: &str, ns: &str) -> usize {
    cluster
        .store()
        .list(&StorageResource::new(group, resource), Some(ns))
        .await
        .map(|(items, _)| items.len())
        .unwrap_or(0)
}

async fn wait_until_gone(cluster: &TestCluster, ns: &str) -> e2e::Exchange {
    let b = cluster.client("b").unwrap();
    eventually(&format!("namespace {ns} to go"), GONE_WITHIN, || async {
        let reply = b.get(&format!("/api/v1/namespaces/{ns}")).await.ok()?;
        (reply.code() == 404).then_some(reply)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_with_objects_only_a_peer_serves_is_emptied_through_the_server_lacking_them() {
    let cluster = controllers_through_b().await;
    fill(&cluster, "tns").await;
    let b = cluster.client("b").unwrap();
    let deleted = b.delete("/api/v1/namespaces/tns").await.unwrap();
    assert_eq!(deleted.code(), 200, "{deleted:#?}");
    assert_eq!(deleted.json()["status"]["phase"], "Terminating");
    assert_eq!(deleted.json()["spec"]["finalizers"], json!(["kubernetes"]));
    let gone = wait_until_gone(&cluster, "tns").await;
    assert_eq!(
        stored(&cluster, "batch", "jobs", "tns").await,
        0,
        "the Job was deleted"
    );
    assert_eq!(stored(&cluster, "", "configmaps", "tns").await, 0);

    // Re-created, the namespace is empty: nothing resurrected.
    let created = b
        .post_json("/api/v1/namespaces", &namespace("tns"))
        .await
        .unwrap();
    assert_eq!(created.code(), 201, "{created:#?}");
    let jobs = b.get("/apis/batch/v1/namespaces/tns/jobs").await.unwrap();
    assert_eq!(jobs.json()["items"], json!([]), "{jobs:#?}");
    let deleted = redact_namespace(deleted.json().clone());
    insta::assert_yaml_snapshot!(
        "namespace_deleted_through_b",
        json!({"delete": deleted, "afterwards": gone.json()})
    );
}

/// The namespace as a snapshot shows it: timestamps and resourceVersions already redacted by the
/// exchange; managedFields dropped.
fn redact_namespace(mut namespace: Value) -> Value {
    if let Some(metadata) = namespace.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    namespace
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_is_not_finalized_while_the_peer_serving_its_objects_is_unreachable() {
    let mut cluster = controllers_through_b().await;
    fill(&cluster, "held").await;
    cluster.kill("a").await.unwrap();
    let b = cluster.client("b").unwrap();
    let deleted = b.delete("/api/v1/namespaces/held").await.unwrap();
    assert_eq!(deleted.code(), 200, "{deleted:#?}");
    // The Jobs cannot be deleted through b (its proxy answers 503): the controller says so and
    // keeps the finalizer.
    let conditions = eventually("the content failure condition", GONE_WITHIN, || async {
        let namespace = b.get("/api/v1/namespaces/held").await.ok()?;
        let conditions = namespace.json()["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "NamespaceDeletionContentFailure" && c["status"] == "True")
            .then_some(conditions)
    })
    .await;
    let conditions = match conditions {
        Ok(conditions) => conditions,
        Err(e) => {
            let namespace = b.get("/api/v1/namespaces/held").await.unwrap();
            panic!("{e}; the namespace: {namespace:#?}");
        }
    };
    let failure = conditions
        .iter()
        .find(|c| c["type"] == "NamespaceDeletionContentFailure")
        .unwrap();
    let message = failure["message"].as_str().unwrap();
    // Both batch/v1 resources (cronjobs, jobs): the proxy's 503 text, the transport error.
    assert!(
        message.starts_with("Failed to delete all resource types, 2 remaining: dial tcp ")
            && message.ends_with(": connect: connection refused"),
        "{message}"
    );
    let summary: Vec<Value> = conditions
        .iter()
        .map(|c| json!({"type": c["type"], "status": c["status"], "reason": c["reason"]}))
        .collect();
    insta::assert_yaml_snapshot!("conditions_while_the_peer_is_down", summary);
    assert_eq!(
        stored(&cluster, "batch", "jobs", "held").await,
        1,
        "not finalized, not emptied"
    );
    let namespace = b.get("/api/v1/namespaces/held").await.unwrap();
    assert_eq!(namespace.json()["spec"]["finalizers"], json!(["kubernetes"]));

    cluster.restart("a").await.unwrap();
    wait_until_gone(&cluster, "held").await;
    assert_eq!(stored(&cluster, "batch", "jobs", "held").await, 0);
}
