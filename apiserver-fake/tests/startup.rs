//! Start-up as a script sees it: the built binary's `cluster` command, driven from outside, waited on
//! only through what a script can see (`cluster.json`). Once that file exists the cluster must be
//! usable: the very first request to the server without `batch/v1` is proxied, never a false 404.

mod support;

use http::StatusCode;
use support::demo::{Demo, admin, server};
use support::{JOBS, job};

/// How many fresh demos to start: the false 404 this guards against was seen in 15 of 51 starts.
const ROUNDS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_once_cluster_json_exists_is_proxied_not_a_false_404() {
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut demo = Demo::start(dir.path(), &[]);
        let manifest = demo.wait_for_manifest(dir.path());
        let (a, b) = (server(&manifest, "a"), server(&manifest, "b"));
        for s in [a, b] {
            let kubeconfig = s["kubeconfig"].as_str().expect("kubeconfig path");
            let text =
                std::fs::read_to_string(kubeconfig).expect("every kubeconfig exists before cluster.json");
            assert!(
                text.contains(s["url"].as_str().unwrap()),
                "{kubeconfig} names its server"
            );
        }
        let client = |s| admin(dir.path(), s);
        // `a` has batch/v1 disabled: a 201 can only come from `b`, through the proxy.
        let created = client(a).post(JOBS, &job(&format!("first-{round}"))).await;
        assert_eq!(
            created.status,
            StatusCode::CREATED,
            "round {round}: the first request through a: {}",
            created.text()
        );
        let fetched = client(b).get(&format!("{JOBS}/first-{round}")).await;
        assert_eq!(fetched.status, StatusCode::OK, "round {round}: stored by b");
        for s in [a, b] {
            let ready = client(s).get("/readyz").await;
            assert_eq!((ready.status, ready.text().as_str()), (StatusCode::OK, "ok"));
        }
        drop(demo);
    }
}

/// `cluster --authorization-mode Node,RBAC` as a user runs it: once `cluster.json` exists the bootstrap
/// policy is there (`cluster-admin` bound to `system:masters`, the admin kubeconfig's group), the
/// aggregated `edit` role holds the rules of `system:aggregate-to-edit`, and the admin's first request
/// is proxied as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rbac_cluster_is_bootstrapped_before_its_manifest_appears() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--authorization-mode", "Node,RBAC"]);
    let manifest = demo.wait_for_manifest(dir.path());
    let a = admin(dir.path(), server(&manifest, "a"));
    assert_eq!(a.post(JOBS, &job("first")).await.status, StatusCode::CREATED);
    let binding = a
        .get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin")
        .await;
    assert_eq!(binding.status, StatusCode::OK);
    assert_eq!(binding.json()["subjects"][0]["name"], "system:masters");
    let edit = a
        .get("/apis/rbac.authorization.k8s.io/v1/clusterroles/edit")
        .await;
    let rules = edit.json()["rules"].as_array().cloned().unwrap_or_default();
    assert!(rules.len() > 5, "aggregated into edit: {rules:?}");
    drop(demo);
}

/// A `cluster` killed with SIGKILL leaves its `cluster.json` behind; the next run in the same directory
/// removes it before anything else, and its own manifest names its own pid. A script polling the file
/// sees the old run's manifest (its pid that of a dead process), then no file, then the new run's,
/// never the old one once the new run has started removing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_runs_manifest_is_gone_before_the_next_run_writes_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.json");
    let mut first = Demo::start(dir.path(), &[]);
    let manifest = first.wait_for_manifest(dir.path());
    assert_eq!(
        manifest["pid"],
        first.child.id(),
        "the manifest names the cluster process"
    );
    let old_pid = first.child.id();
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    assert!(path.exists(), "a SIGKILLed run cannot remove its manifest");

    let mut second = Demo::start(dir.path(), &[]);
    let new_pid = second.child.id();
    // Poll as a tight shell loop would: old* → absent+ → new, nothing else.
    let mut saw_absent = false;
    kube_mvp_testing::eventually_blocking(
        "the second run's manifest",
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(2),
        || {
            match std::fs::read_to_string(&path) {
                Err(_) => saw_absent = true,
                Ok(text) => {
                    let manifest: serde_json::Value =
                        serde_json::from_str(&text).expect("a complete manifest");
                    if manifest["pid"] == new_pid {
                        assert!(
                            saw_absent,
                            "the old manifest was removed before the new one was written"
                        );
                        return Some(());
                    }
                    assert_eq!(
                        manifest["pid"], old_pid,
                        "only the old run's manifest before the new one"
                    );
                    assert!(!saw_absent, "the old manifest came back after it was removed");
                }
            }
            if let Some(status) = second.child.try_wait().expect("wait") {
                panic!("the second cluster exited: {status}");
            }
            None
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let manifest = second.wait_for_manifest(dir.path());
    let a = admin(dir.path(), server(&manifest, "a"));
    assert_eq!(a.get("/readyz").await.status, StatusCode::OK);
    drop(second);
}
