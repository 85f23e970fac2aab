//! The official Kubernetes Python client (PyPI `kubernetes`) against a cluster of fakes, through the
//! server that proxies `batch/v1` to a peer (`b`) and the one that serves it (`a`): the writes (whose
//! JSON bodies the client sends without a `Content-Type`), reads, a list, a watch, all four patch
//! types and deletes, and what clients expect a cluster to have. Skipped (and says why) without the
//! client, unless `KUBE_MVP_REQUIRE_PYTHON_CLIENT=1`.

mod support;

use std::time::Duration;

use e2e::{PeerResolutionMode, PythonClient};
use serde_json::Value;
use support::*;

const PYTHON_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `e2e/python/workout.py` for `scenario` through server `name`, its objects' names ending in
/// `-<suffix>`.
async fn workout(
    python: &PythonClient,
    cluster: &e2e::TestCluster,
    name: &str,
    scenario: &str,
    suffix: &str,
) -> Value {
    let kubeconfig = cluster.kubeconfig(name).unwrap();
    python
        .run_json(
            &PythonClient::script("workout.py"),
            &[&kubeconfig.to_string_lossy(), scenario, suffix],
            PYTHON_TIMEOUT,
        )
        .await
        .unwrap()
}

/// The steps that answered with an API error (but the read of a deleted object, which must).
fn errors(result: &Value) -> Vec<String> {
    result
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(step, value)| value.get("error").is_some() && *step != "read_deleted_configmap")
        .map(|(step, value)| format!("{step}: {value}"))
        .collect()
}

/// `result` with the run's suffix (in names and labels) replaced by `SUFFIX`, to compare runs through
/// two servers.
fn normalized(result: &Value, suffix: &str) -> Value {
    serde_json::from_str(&result.to_string().replace(suffix, "SUFFIX")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_writes_reads_lists_watches_patches_and_deletes_through_the_proxying_and_the_serving_server()
 {
    let Some(python) = PythonClient::find() else {
        return;
    };
    let cluster = a_serves_batch_b_does_not(PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;

    let mark = log_mark(&cluster, "a");
    let proxied = workout(&python, &cluster, "b", "workloads", "proxied").await;
    let job_requests: Vec<String> = proxied_requests_seen_by(&cluster, "a", mark)
        .into_iter()
        .filter(|r| r.contains("/jobs"))
        .collect();
    assert!(
        job_requests
            .iter()
            .any(|r| r.starts_with("POST /apis/batch/v1/namespaces/default/jobs")),
        "b proxied the job create to a: {job_requests:#?}"
    );
    let served = workout(&python, &cluster, "a", "workloads", "served").await;

    // The run through the proxy reads as the run on the server itself.
    assert_eq!(errors(&proxied), Vec::<String>::new(), "{proxied:#}");
    assert_eq!(normalized(&proxied, "proxied"), normalized(&served, "served"));
    // The zero counters the client requires.
    assert_eq!(
        proxied["create_daemonset"]["status"],
        serde_json::json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                           "numberMisscheduled": 0, "numberReady": 0})
    );
    assert_eq!(proxied["read_deleted_configmap"]["error"], 404);
    insta::assert_yaml_snapshot!("python_workloads", normalized(&proxied, "proxied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_finds_the_kubernetes_service_bootstrap_roles_componentstatuses_and_applies_into_empty_maps()
 {
    let Some(python) = PythonClient::find() else {
        return;
    };
    let cluster = a_serves_batch_b_does_not(PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;

    let proxied = workout(&python, &cluster, "b", "cluster", "proxied").await;
    let served = workout(&python, &cluster, "a", "cluster", "served").await;
    assert_eq!(errors(&proxied), Vec::<String>::new(), "{proxied:#}");
    assert_eq!(normalized(&proxied, "proxied"), normalized(&served, "served"));
    assert_eq!(proxied["kubernetes_service"]["clusterIP"], "10.96.0.1");
    assert_eq!(
        proxied["nodes_schedulable"],
        serde_json::json!(["py-node-proxied"])
    );
    assert_eq!(
        proxied["get_after_apply"],
        serde_json::json!({"k1": "new"}),
        "server-side apply keeps the map applied empty before"
    );
    insta::assert_yaml_snapshot!("python_cluster", normalized(&proxied, "proxied"));
}
