//! kube-rs as a client of the fakes, through the proxying server (`b`, lacking batch/v1) and the serving
//! one (`a`): writes, reads, a watch, patches of all four types, and the subresources (TokenRequest and
//! the token it issues, TokenReview, pod logs, ephemeral containers, eviction, CSR approval, the scale
//! of a custom resource).

mod support;

use e2e::PeerResolutionMode;
use futures_util::TryStreamExt;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams, LogParams,
    Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use support::*;

async fn kube_client(cluster: &e2e::TestCluster, name: &str) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig(name).unwrap()).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A client of server `name` that authenticates with `token` only.
async fn token_client(cluster: &e2e::TestCluster, name: &str, token: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig(name).unwrap()).unwrap();
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_owned().into()),
        ..Default::default()
    };
    kube::Client::try_from(config).unwrap()
}

async fn proxying_cluster() -> e2e::TestCluster {
    let cluster = a_serves_batch_b_does_not(PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_writes_reads_watches_and_patches_four_ways_via_the_proxying_and_the_serving_server() {
    let cluster = proxying_cluster().await;
    let mut transcript = Vec::new();
    for via in ["b", "a"] {
        let jobs: Api<Job> = Api::namespaced(kube_client(&cluster, via).await, "default");
        let name = format!("kube-rs-{via}");
        let stream = jobs
            .watch(
                &WatchParams::default()
                    .fields(&format!("metadata.name={name}"))
                    .timeout(20),
                "0",
            )
            .await
            .unwrap();
        let mut stream = Box::pin(stream);
        let created = jobs
            .create(
                &PostParams::default(),
                &serde_json::from_value(job(&name)).unwrap(),
            )
            .await
            .unwrap();
        assert!(created.metadata.uid.is_some(), "via {via}");
        let event = tokio::time::timeout(SETTLE, stream.try_next())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(event, Some(WatchEvent::Added(ref j)) if j.metadata.name.as_deref() == Some(&name)));
        let listed = jobs.list(&ListParams::default()).await.unwrap();
        assert!(
            listed
                .items
                .iter()
                .any(|j| j.metadata.name.as_deref() == Some(&name))
        );

        let params = PatchParams::default();
        let json_patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"patched": "json"}}
        ]))
        .unwrap();
        let patched = jobs
            .patch(&name, &params, &Patch::<()>::Json(json_patch))
            .await
            .unwrap();
        let label = |j: &Job, key: &str| j.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned();
        assert_eq!(label(&patched, "patched").as_deref(), Some("json"));
        let patched = jobs
            .patch(
                &name,
                &params,
                &Patch::Merge(json!({"metadata": {"labels": {"patched": "merge"}}})),
            )
            .await
            .unwrap();
        assert_eq!(label(&patched, "patched").as_deref(), Some("merge"));
        let patched = jobs
            .patch(
                &name,
                &params,
                // A Job's pod template is immutable (upstream's `spec.template: … field is
                // immutable`), so the strategic merge patch changes a mutable field.
                &Patch::Strategic(json!({"spec": {"backoffLimit": 3}})),
            )
            .await
            .unwrap();
        assert_eq!(patched.spec.as_ref().and_then(|s| s.backoff_limit), Some(3));
        let applied = jobs
            .patch(
                &name,
                &PatchParams::apply("kube-rs-test").force(),
                &Patch::Apply(json!({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": name, "labels": {"applied": "yes"}}})),
            )
            .await
            .unwrap();
        assert_eq!(label(&applied, "applied").as_deref(), Some("yes"));
        let managers: Vec<String> = applied
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| Some(format!("{}:{}", m.manager?, m.operation?)))
            .collect();
        assert!(
            managers.contains(&"kube-rs-test:Apply".to_owned()),
            "{managers:?}"
        );
        let got = jobs.get(&name).await.unwrap();
        assert_eq!(label(&got, "patched").as_deref(), Some("merge"));
        jobs.delete(&name, &DeleteParams::default()).await.unwrap();
        transcript.push(json!({"via": via, "managers": managers}));
    }
    insta::assert_yaml_snapshot!("kube_rs_writes_and_patches_via_b_and_a", transcript);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_token_request_issues_a_token_that_authenticates_and_token_review_confirms() {
    let cluster = proxying_cluster().await;
    for via in ["b", "a"] {
        let client = kube_client(&cluster, via).await;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        let name = format!("robot-{via}");
        accounts
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(1200),
                ..Default::default()
            },
            ..Default::default()
        };
        let issued = accounts
            .create_token_request(&name, &PostParams::default(), &request)
            .await
            .unwrap();
        assert_eq!(issued.spec.expiration_seconds, Some(1200));
        assert_eq!(
            issued.spec.audiences,
            ["https://kubernetes.default.svc.cluster.local"]
        );
        let token = issued.status.expect("a token").token;

        // The token works on both servers, and through b a Job list is proxied to a as the account.
        for server in ["a", "b"] {
            let as_robot = token_client(&cluster, server, &token).await;
            let jobs: Api<Job> = Api::namespaced(as_robot.clone(), "default");
            jobs.list(&ListParams::default()).await.unwrap();
            let maps: Api<ConfigMap> = Api::namespaced(as_robot, "default");
            maps.list(&ListParams::default()).await.unwrap();
        }
        let reviews: Api<TokenReview> = Api::all(client.clone());
        let review = reviews
            .create(
                &PostParams::default(),
                &TokenReview {
                    spec: TokenReviewSpec {
                        token: Some(token.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let status = review.status.expect("status");
        assert_eq!(status.authenticated, Some(true), "{status:?}");
        let user = status.user.expect("user");
        assert_eq!(
            user.username.as_deref(),
            Some(format!("system:serviceaccount:default:{name}").as_str())
        );
        assert_eq!(
            user.groups.unwrap_or_default(),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        accounts.delete(&name, &DeleteParams::default()).await.unwrap();
        let jobs: Api<Job> = Api::namespaced(token_client(&cluster, via, &token).await, "default");
        let refused = jobs.list(&ListParams::default()).await.unwrap_err();
        assert!(
            matches!(refused, kube::Error::Api(ref s) if s.code == 401),
            "{refused:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_pod_subresources_logs_ephemeral_containers_and_eviction() {
    let cluster = proxying_cluster().await;
    let mut transcript = Vec::new();
    for via in ["b", "a"] {
        let pods: Api<Pod> = Api::namespaced(kube_client(&cluster, via).await, "default");
        let name = format!("web-{via}");
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
        // No node: an empty log (204).
        assert_eq!(pods.logs(&name, &LogParams::default()).await.unwrap(), "");
        let wrong = pods
            .logs(
                &name,
                &LogParams {
                    container: Some("nope".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        transcript.push(json!({"via": via, "logs of a missing container": error(&wrong)}));

        // Ephemeral containers: added through the subresource, and only there.
        let patched = pods
            .patch_ephemeral_containers(
                &name,
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"ephemeralContainers": [
                    {"name": "debugger", "image": "busybox", "command": ["sh"]}]}})),
            )
            .await
            .unwrap();
        let ephemeral = patched.spec.unwrap().ephemeral_containers.unwrap_or_default();
        assert_eq!(ephemeral.len(), 1);
        assert_eq!(ephemeral[0].termination_message_policy.as_deref(), Some("File"));
        let got = pods.get_ephemeral_containers(&name).await.unwrap();
        assert_eq!(
            got.spec.unwrap().ephemeral_containers.unwrap_or_default().len(),
            1
        );
        let removed = pods
            .patch_ephemeral_containers(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"ephemeralContainers": null}})),
            )
            .await
            .unwrap_err();
        transcript.push(json!({"via": via, "removing an ephemeral container": error(&removed)}));

        // Eviction deletes the pod.
        let evicted = pods.evict(&name, &EvictParams::default()).await.unwrap();
        assert_eq!(evicted.code, 201);
        let gone = pods.get(&name).await.unwrap_err();
        assert!(
            matches!(gone, kube::Error::Api(ref s) if s.code == 404),
            "{gone:?}"
        );
    }
    insta::assert_yaml_snapshot!("kube_rs_pod_subresource_errors_via_b_and_a", transcript);
}

fn error(err: &kube::Error) -> serde_json::Value {
    match err {
        kube::Error::Api(status) => {
            json!({"code": status.code, "reason": status.reason, "message": status.message})
        }
        other => json!(other.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_approves_a_csr_and_scales_a_custom_resource() {
    let cluster = proxying_cluster().await;
    let admin = kube_client(&cluster, "a").await;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                        "statusReplicasPath": ".status.ready", "labelSelectorPath": ".status.selector"}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets");
    for via in ["b", "a"] {
        let client = kube_client(&cluster, via).await;
        let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
        let name = format!("w-{via}");
        let widget: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1",
            "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 2}}))
        .unwrap();
        e2e::eventually("the CRD to be served", SETTLE, || async {
            widgets.create(&PostParams::default(), &widget).await.ok()
        })
        .await
        .unwrap();
        let scale = widgets.get_scale(&name).await.unwrap();
        assert_eq!(scale.spec.unwrap().replicas, Some(2));
        assert_eq!(scale.status.unwrap().replicas, 0);
        let scaled = widgets
            .patch_scale(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 5}})),
            )
            .await
            .unwrap();
        assert_eq!(scaled.spec.unwrap().replicas, Some(5));
        assert_eq!(widgets.get(&name).await.unwrap().data["spec"]["size"], 5);

        // CSR approval changes only the conditions.
        let csrs: Api<CertificateSigningRequest> = Api::all(client);
        let csr_name = format!("csr-{via}");
        csrs.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": csr_name},
                "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                    "signerName": "example.com/signer", "usages": ["client auth"]}}))
            .unwrap(),
        )
        .await
        .unwrap();
        let approved = csrs
            .patch_approval(
                &csr_name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"signerName": "changed"}, "status": {"conditions": [
                    {"type": "Approved", "status": "True", "reason": "KubeRs", "message": "approved"}]}}),
                ),
            )
            .await
            .unwrap();
        assert_eq!(approved.spec.signer_name, "example.com/signer");
        let conditions = approved.status.unwrap().conditions.unwrap_or_default();
        assert_eq!(conditions[0].type_, "Approved");
        assert!(conditions[0].last_update_time.is_some());
        assert_eq!(
            csrs.get_approval(&csr_name)
                .await
                .unwrap()
                .status
                .unwrap()
                .conditions
                .unwrap_or_default()
                .len(),
            1
        );
    }
}
