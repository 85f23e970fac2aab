//! What collecting many dependents costs: on the demo cluster (in this process, in-memory store), one
//! ConfigMap owning 10,000 ConfigMaps; the figure is the time from the owner's `DELETE`
//! (`propagationPolicy: Background`) until a list of the dependents is empty, with the controller
//! manager's garbage collector running through `a` (and nothing else). The goal (issue 18) is under 5 s.
//!
//! Run with: `cargo bench -p apiserver-fake --bench garbage_collection` (`-- --quick` for 1,000).

use std::time::{Duration, Instant};

use apiserver_fake::cluster::controller_manager::InProcessControllerManager;
use apiserver_fake::cluster::{AdminClient, Preset, start_cluster};
use bytes::Bytes;
use controller_manager::ControllerManagerOptions;
use futures_util::StreamExt;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

async fn send(client: &AdminClient, method: Method, url: &str, body: Option<Value>) -> (u16, Bytes) {
    let mut request = Request::builder().method(method).uri(url);
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))
        .expect("request");
    let response = client.request(request).await.expect("answered");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (status, body)
}

/// How many dependents are left (one page of a labelled list is enough to tell).
async fn dependents_left(client: &AdminClient, configmaps: &str) -> usize {
    let (status, body) = send(
        client,
        Method::GET,
        &format!("{configmaps}?labelSelector=gc%3Dbench"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let list: Value = serde_json::from_slice(&body).expect("JSON");
    list["items"].as_array().map_or(0, Vec::len)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dependents = if quick { 1_000 } else { 10_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cluster = start_cluster(None, Preset::Default.members(), 0).await.expect("cluster");
        let client = cluster.admin_client().expect("admin client");
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
        let filled = Instant::now();
        futures_util::stream::iter(0..dependents)
            .for_each_concurrent(32, |i| {
                let (client, configmaps, reference) = (&client, &configmaps, &reference);
                async move {
                    let object = json!({"metadata": {"name": format!("d{i}"), "labels": {"gc": "bench"},
                        "ownerReferences": reference}});
                    let (status, reply) = send(client, Method::POST, configmaps, Some(object)).await;
                    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&reply));
                }
            })
            .await;
        eprintln!(
            "filled: {dependents} dependents in {:.2} s",
            filled.elapsed().as_secs_f64()
        );
        let started = Instant::now();
        let (status, body) = send(
            &client,
            Method::DELETE,
            &format!("{configmaps}/owner?propagationPolicy=Background"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        loop {
            if dependents_left(&client, &configmaps).await == 0 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "dependents not collected within 300 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let took = started.elapsed();
        println!(
            "garbage collection: {dependents} dependents of one owner gone {:.3} s after the owner's DELETE (goal < 5 s)",
            took.as_secs_f64()
        );
        manager.stop().await;
        cluster.shutdown().await;
    });
}
