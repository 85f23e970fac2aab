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
    let proxied = cluster.servers[1].1.served_requests();
    assert!(
        proxied
            .iter()
            .any(|r| r.peer_proxied && r.method == "DELETE" && r.user.name == "admin"),
        "{proxied:?}"
    );
}

/// `kubectl apply --server-side` of a ConfigMap with `data: {}`, then with `data: {k1: new}` by the same
/// manager: the data is there in the answer and afterwards (the empty map applied first once made the
/// second apply prune `data`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_into_a_map_applied_empty_before_keeps_the_data() {
    if !kubectl_available() {
        return;
    }
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let kubeconfig = cluster.dir.join("a.kubeconfig");
    let manifest = |name: &str, data: &str| {
        let path = cluster.dir.join(name);
        std::fs::write(
            &path,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata: {data}\n"),
        )
        .unwrap();
        path.to_string_lossy().into_owned()
    };
    let empty = manifest("empty.yaml", "{}");
    let k1 = manifest("k1.yaml", "{k1: new}");
    let run = |args: Vec<String>| {
        let kubeconfig = kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(&kubeconfig, &args)
        })
    };
    for file in [&empty, &k1] {
        let (ok, out, err) = run(vec![
            "apply".into(),
            "--server-side".into(),
            "-f".into(),
            file.clone(),
        ])
        .await
        .unwrap();
        assert!(ok, "{err}");
        assert_eq!(out.trim(), "configmap/ssa serverside-applied");
    }
    let (ok, out, err) = run(vec![
        "get".into(),
        "configmap".into(),
        "ssa".into(),
        "-o".into(),
        "jsonpath={.data}".into(),
    ])
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert_eq!(out, r#"{"k1":"new"}"#);
}

/// What kubectl users look at in a fresh cluster: the `kubernetes` Service (first address of the
/// service range, port 443), the bootstrap ClusterRoles (whatever the authorization mode: this server
/// runs `AlwaysAllow`), `kubectl get componentstatuses`, and a field selector on a defaulted field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_the_kubernetes_service_bootstrap_roles_and_componentstatuses() {
    if !kubectl_available() {
        return;
    }
    let cluster = cluster(vec![member(
        "a",
        1,
        "1.36",
        &["--authorization-mode=AlwaysAllow"],
    )])
    .await;
    let kubeconfig = cluster.dir.join("a.kubeconfig");
    let node = cluster.dir.join("node.yaml");
    std::fs::write(&node, "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n").unwrap();
    let node = node.to_string_lossy().into_owned();
    let run = |args: Vec<&str>| {
        let kubeconfig = kubeconfig.clone();
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(&kubeconfig, &args)
        })
    };
    let (ok, out, err) = run(vec![
        "get",
        "service",
        "kubernetes",
        "-o",
        "jsonpath={.spec.clusterIP} {.spec.ports[0].name} {.spec.ports[0].port}",
    ])
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert_eq!(out, "10.96.0.1 https 443");
    let (ok, out, err) = run(vec![
        "get",
        "clusterroles",
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "-o",
        "name",
    ])
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "clusterrole.rbac.authorization.k8s.io/cluster-admin",
            "clusterrole.rbac.authorization.k8s.io/admin",
            "clusterrole.rbac.authorization.k8s.io/edit",
            "clusterrole.rbac.authorization.k8s.io/view",
        ]
    );
    let (ok, out, err) = run(vec!["get", "componentstatuses"]).await.unwrap();
    assert!(ok, "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().take(2).collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAME", "STATUS"],
            vec!["controller-manager", "Healthy"],
            vec!["etcd-0", "Healthy"],
            vec!["scheduler", "Unhealthy"],
        ],
        "{out}"
    );
    assert!(
        err.contains("v1 ComponentStatus is deprecated in v1.19+"),
        "{err}"
    );
    let (ok, _, err) = run(vec!["create", "-f", &node]).await.unwrap();
    assert!(ok, "{err}");
    let (ok, out, err) = run(vec![
        "get",
        "nodes",
        "--field-selector",
        "spec.unschedulable=false",
        "-o",
        "name",
    ])
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "node/n1");
}
