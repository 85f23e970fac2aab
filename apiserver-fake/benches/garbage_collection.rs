//! What collecting many dependents costs: on the demo cluster (in this process, in-memory store), one
//! ConfigMap owning 10,000 ConfigMaps; the figure is the time from the owner's `DELETE`
//! (`propagationPolicy: Background`) until a list of the dependents is empty, with the controller
//! manager's garbage collector running through `a` (and nothing else). The goal (issue 18) is under 5 s.
//! Beside it, measured in the same run on the same server: creating as many ConfigMaps, and deleting
//! them with one delete-collection (what the collector's one-DELETE-per-dependent costs is compared to).
//!
//! Run with: `cargo bench -p apiserver-fake --bench garbage_collection` (`-- --quick` for 1,000).

mod support;

use std::time::{Duration, Instant};

use apiserver_fake::cluster::AdminClient;
use apiserver_fake::cluster::controller_manager::InProcessControllerManager;
use controller_manager::ControllerManagerOptions;
use futures_util::StreamExt;
use http::Method;
use serde_json::{Value, json};
use support::send;

/// Whether any ConfigMap labelled `gc=LABEL` is left (a `limit=1` page tells, without loading the server
/// the collector is measured on with a full list).
async fn any_left(client: &AdminClient, configmaps: &str, label: &str) -> bool {
    let (status, body) = send(
        client,
        Method::GET,
        &format!("{configmaps}?labelSelector=gc%3D{label}&limit=1"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let list: Value = serde_json::from_slice(&body).expect("JSON");
    list["items"].as_array().is_some_and(|items| !items.is_empty())
}

/// Creates `count` ConfigMaps labelled `gc=LABEL` (with `ownerReferences` when given), 32 at a time;
/// how long it took.
async fn fill(
    client: &AdminClient,
    configmaps: &str,
    label: &str,
    count: usize,
    owners: Option<&Value>,
) -> Duration {
    let started = Instant::now();
    futures_util::stream::iter(0..count)
        .for_each_concurrent(32, |i| async move {
            let mut object = json!({"metadata": {"name": format!("{label}-{i}"), "labels": {"gc": label}}});
            if let Some(owners) = owners {
                object["metadata"]["ownerReferences"] = owners.clone();
            }
            let (status, reply) = send(client, Method::POST, configmaps, Some(object)).await;
            assert_eq!(status, 201, "{}", String::from_utf8_lossy(&reply));
        })
        .await;
    started.elapsed()
}

/// Polls until no ConfigMap labelled `gc=LABEL` is left; how long since `started`.
async fn until_gone(client: &AdminClient, configmaps: &str, label: &str, started: Instant) -> Duration {
    while any_left(client, configmaps, label).await {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{label}: not gone within 300 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

fn main() {
    let dependents = if support::quick() { 1_000 } else { 10_000 };
    support::runtime().block_on(async move {
        let (cluster, client) = support::demo_cluster().await;
        let a = cluster.servers[0].1.url();
        let manager = InProcessControllerManager::start(
            &cluster.dir.join("a.kubeconfig"),
            ControllerManagerOptions {
                controllers: vec!["garbage-collector-controller".to_owned()],
                ..ControllerManagerOptions::default()
            },
        )
        .await
        .expect("controller manager");
        let configmaps = format!("{a}/api/v1/namespaces/default/configmaps");

        // Reference, same run, same server: the same number of ConfigMaps created, then deleted by one
        // delete-collection (no collector involved: nothing owns them).
        let created = fill(&client, &configmaps, "plain", dependents, None).await;
        let started = Instant::now();
        let (status, body) = send(
            &client,
            Method::DELETE,
            &format!("{configmaps}?labelSelector=gc%3Dplain"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let collection = until_gone(&client, &configmaps, "plain", started).await;

        let (status, body) = send(
            &client,
            Method::POST,
            &configmaps,
            Some(json!({"metadata": {"name": "owner"}})),
        )
        .await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        let owner: Value = serde_json::from_slice(&body).expect("JSON");
        let reference = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner["metadata"]["uid"]}]);
        let filled = fill(&client, &configmaps, "dependent", dependents, Some(&reference)).await;
        let started = Instant::now();
        let (status, body) = send(
            &client,
            Method::DELETE,
            &format!("{configmaps}/owner?propagationPolicy=Background"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let collected = until_gone(&client, &configmaps, "dependent", started).await;
        println!(
            "reference: {dependents} ConfigMaps created in {:.3} s (32 at a time), deleted by one delete-collection in {:.3} s",
            created.as_secs_f64(),
            collection.as_secs_f64()
        );
        println!(
            "garbage collection: {dependents} dependents (created in {:.3} s) of one owner gone {:.3} s after the owner's DELETE (goal < 5 s)",
            filled.as_secs_f64(),
            collected.as_secs_f64()
        );
        manager.stop().await;
        cluster.shutdown().await;
    });
}
