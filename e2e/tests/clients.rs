//! Real clients through the proxy: kubectl and kube-rs against a server that lacks `batch/v1`.

mod support;

use std::time::Duration;

use e2e::{Kubectl, KubectlOutput, PeerResolutionMode, eventually};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use support::*;

const KUBECTL_TIMEOUT: Duration = Duration::from_secs(30);

/// kubectl for server `name`, or None when kubectl is not installed (the test is skipped and says so).
fn kubectl(cluster: &e2e::TestCluster, name: &str) -> Option<Kubectl> {
    cluster.kubectl(name).unwrap()
}

async fn run(kubectl: &Kubectl, args: &[&str]) -> KubectlOutput {
    kubectl.run(args, KUBECTL_TIMEOUT).await.unwrap()
}

/// Waits until the proxy routes jobs for b, then returns.
async fn proxied_cluster(mode: PeerResolutionMode) -> e2e::TestCluster {
    let cluster = a_serves_batch_b_does_not(mode).await;
    wait_until_b_proxies_jobs(&cluster).await;
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_gets_watches_and_deletes_jobs_through_the_server_lacking_batch() {
    let cluster = proxied_cluster(PeerResolutionMode::Discovery).await;
    let Some(b) = kubectl(&cluster, "b") else { return };
    let mut transcript = Vec::new();
    transcript.push(run(&b, &["create", "job", "hello", "--image=busybox"]).await);
    transcript.push(run(&b, &["get", "jobs", "-o", "name"]).await);
    transcript.push(
        run(
            &b,
            &[
                "get",
                "job",
                "hello",
                "-o",
                "jsonpath={.metadata.name} {.spec.template.spec.containers[0].image}",
            ],
        )
        .await,
    );
    // Watch through b while a second job is created through a.
    let mark = log_mark(&cluster, "a");
    let a_client = cluster.client("a").unwrap();
    let (watched, ()) = tokio::join!(
        b.stream_lines(&["get", "jobs", "--watch", "-o", "name"], 2, KUBECTL_TIMEOUT),
        async {
            eventually("kubectl's watch reaches a", SETTLE, || async {
                cluster
                    .server("a")
                    .unwrap()
                    .served_requests()
                    .iter()
                    .skip(mark)
                    .any(|r| r.uri.contains("watch=true"))
                    .then_some(())
            })
            .await
            .unwrap();
            assert_eq!(
                a_client.post_json(JOBS, &job("second")).await.unwrap().code(),
                201
            );
        }
    );
    transcript.push(KubectlOutput {
        command: "get jobs --watch -o name (first two lines)".into(),
        success: true,
        stdout: watched.unwrap().join("\n"),
        stderr: String::new(),
    });
    transcript.push(run(&b, &["delete", "job", "hello"]).await);
    transcript.push(run(&b, &["get", "jobs", "-o", "name"]).await);
    assert!(transcript.iter().all(|o| o.success), "{transcript:#?}");
    assert_eq!(transcript[1].stdout, "job.batch/hello\n");
    assert_eq!(transcript[3].stdout, "job.batch/hello\njob.batch/second");
    assert_eq!(transcript[5].stdout, "job.batch/second\n");
    insta::assert_yaml_snapshot!("kubectl_jobs_via_b_discovery_mode", transcript);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_shows_peer_groups_only_with_peer_aggregated_discovery() {
    let mut outputs = Vec::new();
    for mode in MODES {
        let cluster = proxied_cluster(mode).await;
        let Some(b) = kubectl(&cluster, "b") else { return };
        let resources = run(&b, &["api-resources", "--api-group=batch", "-o", "name"]).await;
        // `kubectl create job` uses the typed batch/v1 client without discovery: proxied in both modes.
        let create = run(&b, &["create", "job", "hello", "--image=busybox"]).await;
        assert!(create.success, "{create:?}");
        // `kubectl get jobs` maps the resource through discovery first.
        let get = run(&b, &["get", "jobs", "-o", "name"]).await;
        match mode {
            // 1.32 (alpha): b's discovery is its own, so kubectl does not know jobs at all, even though
            // the proxy would serve them.
            PeerResolutionMode::StorageVersion => {
                assert_eq!(resources.stdout, "", "{resources:?}");
                assert!(!get.success, "{get:?}");
            }
            // 1.36 (beta): b's /apis merges a's groups, so kubectl finds batch and the list is proxied.
            PeerResolutionMode::Discovery => {
                assert_eq!(resources.stdout, "cronjobs.batch\njobs.batch\n", "{resources:?}");
                assert_eq!(get.stdout, "job.batch/hello\n", "{get:?}");
            }
        }
        outputs.push((mode_name(mode), vec![resources, create, get]));
    }
    insta::assert_yaml_snapshot!("kubectl_api_resources_and_create_via_b_by_mode", outputs);
}

async fn kube_client(cluster: &e2e::TestCluster, name: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig(name).unwrap()).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_lists_creates_and_watches_jobs_through_the_proxy() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    for mode in MODES {
        let cluster = proxied_cluster(mode).await;
        let a: Api<Job> = Api::namespaced(kube_client(&cluster, "a").await, "default");
        let b: Api<Job> = Api::namespaced(kube_client(&cluster, "b").await, "default");
        let first: Job = serde_json::from_value(job("from-a")).unwrap();
        a.create(&PostParams::default(), &first).await.unwrap();
        // List through b (served by a).
        let names: Vec<String> = b
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|j| j.metadata.name)
            .collect();
        assert_eq!(names, ["from-a"], "{mode:?}");
        // Create through b.
        let second: Job = serde_json::from_value(job("from-b")).unwrap();
        let created = b.create(&PostParams::default(), &second).await.unwrap();
        assert_eq!(created.metadata.name.as_deref(), Some("from-b"));
        assert!(created.metadata.uid.is_some(), "{mode:?}: a stored it");
        // Watch through b from the start: both jobs arrive as ADDED, then a third one created via a.
        let stream = b.watch(&WatchParams::default().timeout(20), "0").await.unwrap();
        let mut stream = Box::pin(stream);
        let mut added = Vec::new();
        while added.len() < 2 {
            match tokio::time::timeout(SETTLE, stream.try_next())
                .await
                .unwrap()
                .unwrap()
            {
                Some(WatchEvent::Added(job)) => added.push(job.metadata.name.unwrap_or_default()),
                Some(_) => {}
                None => panic!("{mode:?}: watch ended"),
            }
        }
        a.create(
            &PostParams::default(),
            &serde_json::from_value(job("later")).unwrap(),
        )
        .await
        .unwrap();
        loop {
            match tokio::time::timeout(SETTLE, stream.next()).await.unwrap() {
                Some(Ok(WatchEvent::Added(job))) => {
                    added.push(job.metadata.name.unwrap_or_default());
                    break;
                }
                Some(Ok(_)) => {}
                other => panic!("{mode:?}: {other:?}"),
            }
        }
        added[..2].sort();
        assert_eq!(added, ["from-a", "from-b", "later"], "{mode:?}");
        let proxied = proxied_requests_seen_by(&cluster, "a", 0);
        assert!(
            proxied
                .iter()
                .any(|r| r.starts_with("GET /apis/batch/v1/namespaces/default/jobs?")
                    && r.contains("watch=true")),
            "{proxied:#?}"
        );
        assert!(
            proxied
                .iter()
                .any(|r| r.starts_with("POST /apis/batch/v1/namespaces/default/jobs")),
            "{proxied:#?}"
        );
    }
}
