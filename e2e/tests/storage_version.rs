//! StorageVersion mode (upstream alpha) specifics (checklist items 29 and 30).

mod support;

use e2e::PeerResolutionMode;
use http::Method;
use serde_json::json;
use support::*;

const SV: &str = "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capability_comes_from_storage_version_objects_with_core_written_as_core() {
    // The internal.apiserver.k8s.io/v1alpha1 API is alpha: enabled explicitly, as upstream's test does.
    let sv_api = |s: e2e::ServerBuilder| s.runtime_config("internal.apiserver.k8s.io/v1alpha1=true");
    let cluster = a_and_b_with(PeerResolutionMode::StorageVersion, sv_api, sv_api).await;
    let client = cluster.client("b").unwrap();
    let jobs = client.get(&format!("{SV}/batch.jobs")).await.unwrap();
    assert_eq!(jobs.code(), 200, "{jobs:?}");
    let pods = client.get(&format!("{SV}/core.pods")).await.unwrap();
    let ids = |reply: &e2e::Exchange| -> Vec<String> {
        reply.json()["status"]["storageVersions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["apiServerID"].as_str().unwrap().to_owned())
            .collect()
    };
    let (a_id, b_id) = (cluster.server_id("a").unwrap(), cluster.server_id("b").unwrap());
    assert_eq!(ids(&jobs), std::slice::from_ref(&a_id), "only a stores jobs");
    let mut both = vec![a_id, b_id];
    both.sort();
    let mut pods_ids = ids(&pods);
    pods_ids.sort();
    assert_eq!(pods_ids, both);
    // Keys sorted: the etcd store gives objects Go's field order, the in-memory store the order they
    // were written in.
    insta::with_settings!({sort_maps => true}, {
        insta::assert_yaml_snapshot!("storage_version_batch_jobs", jobs);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_without_storage_version_are_always_local_in_storage_version_mode() {
    // b does not serve authentication.k8s.io/v1. SelfSubjectReviews have no storage, hence no
    // StorageVersion: in StorageVersion mode b answers its own 404; Discovery mode proxies to a.
    let mut out = Vec::new();
    for mode in MODES {
        let cluster = a_and_b_with(
            mode,
            |a| a,
            |b| b.runtime_config("authentication.k8s.io/v1=false"),
        )
        .await;
        wait_until_b_proxies_jobs(&cluster).await;
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
        let reply = cluster
            .client("b")
            .unwrap()
            .request(Method::POST, "/apis/authentication.k8s.io/v1/selfsubjectreviews")
            .json(&review)
            .send()
            .await
            .unwrap();
        let expected = if mode == PeerResolutionMode::StorageVersion {
            404
        } else {
            201
        };
        assert_eq!(reply.code(), expected, "{mode:?}: {reply:?}");
        out.push((mode_name(mode), reply.status.clone()));
    }
    insta::assert_yaml_snapshot!("selfsubjectreview_via_b_by_mode", out);
}
