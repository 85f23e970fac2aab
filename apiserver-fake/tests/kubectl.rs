//! kubectl, a real client, against a fake: discovery, create, get, leases.

mod support;

use support::{cluster, kubectl, kubectl_available, member};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovers_creates_and_lists_against_a_fake() {
    if !kubectl_available() {
        return;
    }
    let cluster = cluster(vec![member("b", 2, "1.36", &[])]).await;
    let kubeconfig = cluster.dir.join("b.kubeconfig");
    let run = |args: &'static [&'static str]| {
        let kubeconfig = kubeconfig.clone();
        tokio::task::spawn_blocking(move || kubectl(&kubeconfig, args))
    };

    let (ok, out, err) = run(&["get", "--raw", "/apis"]).await.unwrap();
    assert!(ok, "{err}");
    let groups: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(groups["kind"], "APIGroupList");

    let (ok, out, err) = run(&["api-resources", "--api-group=batch", "-o", "name"])
        .await
        .unwrap();
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        vec!["cronjobs.batch", "jobs.batch"]
    );

    let (ok, out, err) = run(&["create", "job", "hello", "--image=busybox"]).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "job.batch/hello created");

    let (ok, out, err) = run(&["get", "jobs", "-o", "name"]).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "job.batch/hello");

    let (ok, out, err) = run(&["get", "jobs"]).await.unwrap();
    assert!(ok, "{err}");
    assert!(out.starts_with("NAME"), "{out}");
    assert!(out.contains("hello"), "{out}");

    let (ok, out, err) = run(&["get", "leases", "-n", "kube-system", "-o", "name"])
        .await
        .unwrap();
    assert!(ok, "{err}");
    let expected = format!(
        "lease.coordination.k8s.io/{}",
        apiserver_fake::controllers::identity::server_id("b")
    );
    assert_eq!(out.trim(), expected);

    let (ok, _, err) = run(&["get", "jobs", "nosuchjob"]).await.unwrap();
    assert!(!ok);
    assert!(err.contains(r#"jobs.batch "nosuchjob" not found"#), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_and_deletes_jobs_through_the_server_without_batch_v1() {
    if !kubectl_available() {
        return;
    }
    let cluster = cluster(support::seed_members(&[], &[])).await;
    support::wait_for_proxy(&support::TestClient::admin(&cluster, 0)).await;
    let kubeconfig = cluster.dir.join("a.kubeconfig");
    let run = |args: &'static [&'static str]| {
        let kubeconfig = kubeconfig.clone();
        tokio::task::spawn_blocking(move || kubectl(&kubeconfig, args))
    };
    let (ok, out, err) = run(&["create", "job", "via-a", "--image=busybox"]).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "job.batch/via-a created");
    let (ok, out, err) = run(&["get", "jobs", "-o", "name"]).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "job.batch/via-a");
    // The job lives in the shared store, written by the peer that serves batch/v1.
    let b = support::TestClient::admin(&cluster, 1);
    assert_eq!(
        b.get(&format!("{}/via-a", support::JOBS)).await.status,
        http::StatusCode::OK
    );
    let (ok, out, err) = run(&["delete", "job", "via-a"]).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(out.trim(), r#"job.batch "via-a" deleted"#);
    let proxied = cluster.servers[1].1.state().requests.snapshot();
    assert!(
        proxied
            .iter()
            .any(|r| r.peer_proxied && r.method == "DELETE" && r.user.name == "admin"),
        "{proxied:?}"
    );
}

#[test]
fn kubectl_client_version_reads_vendor_minor_versions_and_rejects_other_output() {
    let json = br#"{"clientVersion": {"major": "1", "minor": "32+", "gitVersion": "v1.32.4-x"}}"#;
    assert_eq!(support::kubectl_client_version(json), Some((1, 32)));
    assert_eq!(
        support::kubectl_client_version(br#"{"clientVersion": {"major": "1", "minor": "20"}}"#),
        Some((1, 20))
    );
    assert_eq!(support::kubectl_client_version(b"Client Version: v1.32.4"), None);
    assert_eq!(
        support::kubectl_client_version(br#"{"clientVersion": {"major": "1", "minor": "+"}}"#),
        None
    );
}
