//! The garbage collector as a user meets it: the built binary's `cluster` (which runs the controller
//! manager through `a`), driven with kubectl's `delete --cascade=background|foreground|orphan`, waited
//! on through what kubectl shows. Plus the mixed-version case the proxy exists for: the owner is a Job,
//! which only `b` serves, and the collector asks `a` about it.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::demo::Demo;
use support::{eventually, kubectl, kubectl_available};

/// How long the collector may take to act (it reacts to watch events; this is a deadline, not a wait).
const DEADLINE: Duration = Duration::from_secs(30);

/// A demo cluster and the kubeconfigs of its servers.
struct Cluster {
    _demo: Demo,
    _dir: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
}

fn start() -> Cluster {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let kubeconfig = |name: &str| support::demo::kubeconfig(&manifest, name);
    Cluster {
        a: kubeconfig("a"),
        b: kubeconfig("b"),
        _demo: demo,
        _dir: dir,
    }
}

/// Runs kubectl and returns its stdout, panicking with its stderr on failure.
fn ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (success, stdout, stderr) = kubectl(kubeconfig, args);
    assert!(success, "kubectl {args:?} failed: {stderr}");
    stdout
}

/// kubectl's JSON of one object, or `None` when it is not found.
fn get(kubeconfig: &Path, kind: &str, name: &str, namespace: &str) -> Option<Value> {
    let (success, stdout, stderr) = kubectl(kubeconfig, &["get", kind, name, "-n", namespace, "-o", "json"]);
    if !success {
        assert!(stderr.contains("NotFound"), "kubectl get {kind} {name}: {stderr}");
        return None;
    }
    Some(serde_json::from_str(&stdout).expect("JSON"))
}

fn uid(object: &Value) -> String {
    object["metadata"]["uid"].as_str().expect("uid").to_owned()
}

/// Creates ConfigMap `name` in `namespace` owned by `owner` (`apiVersion`, `kind`, `name`, `uid`), with
/// `extra` metadata lines.
fn create_dependent(kubeconfig: &Path, namespace: &str, name: &str, owner: [&str; 4], extra: &str) {
    let [api_version, kind, owner_name, owner_uid] = owner;
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n{extra}  ownerReferences:\n  - apiVersion: {api_version}\n    kind: {kind}\n    name: {owner_name}\n    uid: {owner_uid}\n    blockOwnerDeletion: true\n"
    );
    let path = kubeconfig.with_file_name(format!("{namespace}-{name}.yaml"));
    std::fs::write(&path, manifest).expect("manifest");
    ok(kubeconfig, &["create", "-f", path.to_str().expect("utf-8")]);
}

/// The metadata a snapshot shows: owner references, finalizers, whether deletion started (times,
/// uids and versions redacted).
fn shown(object: &Option<Value>) -> Value {
    let Some(object) = object else {
        return Value::String("not found".to_owned());
    };
    let meta = &object["metadata"];
    let references: Vec<String> = meta["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .map(|r| {
                    format!(
                        "{}/{} {}",
                        r["apiVersion"].as_str().unwrap_or(""),
                        r["kind"].as_str().unwrap_or(""),
                        r["name"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "name": meta["name"],
        "ownerReferences": references,
        "finalizers": meta["finalizers"],
        "deletionTimestamp": meta.get("deletionTimestamp").map(|_| "[time]"),
        "deletionGracePeriodSeconds": meta["deletionGracePeriodSeconds"],
    })
}

async fn wait_gone(kubeconfig: &Path, kind: &str, name: &str, namespace: &str) {
    eventually(
        &format!("{kind} {namespace}/{name} to be gone"),
        DEADLINE,
        || async { get(kubeconfig, kind, name, namespace).is_none().then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cascade_background_deletes_the_dependents() {
    if !kubectl_available() {
        return;
    }
    let cluster = start();
    let a = cluster.a.as_path();
    ok(a, &["create", "configmap", "owner"]);
    let owner = uid(&get(a, "configmap", "owner", "default").expect("owner"));
    for name in ["dep-1", "dep-2"] {
        create_dependent(a, "default", name, ["v1", "ConfigMap", "owner", &owner], "");
    }
    let deleted = ok(a, &["delete", "configmap", "owner", "--cascade=background"]);
    for name in ["dep-1", "dep-2"] {
        wait_gone(a, "configmap", name, "default").await;
    }
    let left = ok(a, &["get", "configmaps", "-o", "name"]);
    insta::assert_snapshot!("cascade_background", format!("{deleted}---\n{left}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cascade_foreground_keeps_the_owner_until_its_blocking_dependent_goes() {
    if !kubectl_available() {
        return;
    }
    let cluster = start();
    let a = cluster.a.as_path();
    ok(a, &["create", "configmap", "owner"]);
    let owner = uid(&get(a, "configmap", "owner", "default").expect("owner"));
    // The dependent holds a finalizer of its own, so its deletion (by the collector) waits for us.
    create_dependent(
        a,
        "default",
        "blocker",
        ["v1", "ConfigMap", "owner", &owner],
        "  finalizers: [example.com/hold]\n",
    );
    let deleted = ok(
        a,
        &[
            "delete",
            "configmap",
            "owner",
            "--cascade=foreground",
            "--wait=false",
        ],
    );
    let blocker = eventually(
        "the collector to delete the blocking dependent",
        DEADLINE,
        || async {
            get(a, "configmap", "blocker", "default")
                .filter(|b| b["metadata"].get("deletionTimestamp").is_some())
        },
    )
    .await;
    let waiting = get(a, "configmap", "owner", "default");
    ok(
        a,
        &[
            "patch",
            "configmap",
            "blocker",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    wait_gone(a, "configmap", "blocker", "default").await;
    wait_gone(a, "configmap", "owner", "default").await;
    insta::assert_yaml_snapshot!(
        "cascade_foreground",
        serde_json::json!({
            "kubectl delete": deleted,
            "owner while its dependent blocks": shown(&waiting),
            "blocking dependent": shown(&Some(blocker)),
            "owner after the dependent went": shown(&get(a, "configmap", "owner", "default")),
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cascade_orphan_keeps_the_dependent_without_its_owner_reference() {
    if !kubectl_available() {
        return;
    }
    let cluster = start();
    let a = cluster.a.as_path();
    ok(a, &["create", "configmap", "owner"]);
    let owner = uid(&get(a, "configmap", "owner", "default").expect("owner"));
    create_dependent(a, "default", "kept", ["v1", "ConfigMap", "owner", &owner], "");
    let deleted = ok(a, &["delete", "configmap", "owner", "--cascade=orphan"]);
    wait_gone(a, "configmap", "owner", "default").await;
    let kept = eventually("the orphan to lose its owner reference", DEADLINE, || async {
        get(a, "configmap", "kept", "default").filter(|k| k["metadata"].get("ownerReferences").is_none())
    })
    .await;
    insta::assert_yaml_snapshot!(
        "cascade_orphan",
        serde_json::json!({"kubectl delete": deleted, "dependent": shown(&Some(kept))})
    );
}

/// The harm the proxy prevents. The owner is a Job, served only by `b`; the collector runs through `a`,
/// whose peer-aggregated discovery lists Jobs and whose GET of the Job is proxied to `b`: the dependent
/// lives while the Job does (a dependent of an owner that never existed, created after it, is collected
/// meanwhile: the collector has looked), and goes once the Job is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_of_a_job_only_the_peer_serves_survives_while_the_job_exists() {
    if !kubectl_available() {
        return;
    }
    let cluster = start();
    let (a, b) = (cluster.a.as_path(), cluster.b.as_path());
    ok(b, &["create", "job", "owner", "--image=busybox"]);
    let job = uid(&get(b, "job", "owner", "default").expect("job"));
    create_dependent(a, "default", "of-the-job", ["batch/v1", "Job", "owner", &job], "");
    create_dependent(
        a,
        "default",
        "canary",
        [
            "v1",
            "ConfigMap",
            "never-existed",
            "00000000-0000-0000-0000-000000000000",
        ],
        "",
    );
    wait_gone(a, "configmap", "canary", "default").await;
    let survivor = get(a, "configmap", "of-the-job", "default");
    assert!(
        survivor.is_some(),
        "the collector deleted a dependent of a live Job"
    );
    let deleted = ok(b, &["delete", "job", "owner", "--cascade=background"]);
    wait_gone(a, "configmap", "of-the-job", "default").await;
    insta::assert_yaml_snapshot!(
        "job_owner_through_the_proxy",
        serde_json::json!({
            "dependent while the Job exists": shown(&survivor),
            "kubectl delete job": deleted,
            "dependent after": shown(&get(a, "configmap", "of-the-job", "default")),
        })
    );
}

/// A namespaced dependent naming an owner that lives in another namespace: upstream's
/// `OwnerRefInvalidNamespace` warning Event, and the dependent is collected (its owner does not exist
/// in its namespace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_reference_across_namespaces_gets_upstreams_event_and_the_dependent_goes() {
    if !kubectl_available() {
        return;
    }
    let cluster = start();
    let a = cluster.a.as_path();
    ok(a, &["create", "namespace", "other"]);
    ok(a, &["create", "configmap", "owner"]);
    let owner = uid(&get(a, "configmap", "owner", "default").expect("owner"));
    // Seen by the collector first, so that the owner is an observed node when the dependent arrives.
    create_dependent(
        a,
        "default",
        "same-namespace",
        ["v1", "ConfigMap", "owner", &owner],
        "",
    );
    create_dependent(a, "other", "elsewhere", ["v1", "ConfigMap", "owner", &owner], "");
    wait_gone(a, "configmap", "elsewhere", "other").await;
    let event = eventually("the OwnerRefInvalidNamespace event", DEADLINE, || async {
        let events: Value =
            serde_json::from_str(&ok(a, &["get", "events", "-n", "other", "-o", "json"])).ok()?;
        events["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == "OwnerRefInvalidNamespace")
            .cloned()
    })
    .await;
    assert!(get(a, "configmap", "same-namespace", "default").is_some());
    let message = event["message"]
        .as_str()
        .unwrap_or_default()
        .replace(&owner, "[uid]");
    insta::assert_yaml_snapshot!(
        "owner_in_another_namespace",
        serde_json::json!({
            "type": event["type"], "reason": event["reason"], "message": message,
            "involvedObject": format!("{}/{} {}/{}", event["involvedObject"]["apiVersion"].as_str().unwrap_or(""),
                event["involvedObject"]["kind"].as_str().unwrap_or(""), event["involvedObject"]["namespace"].as_str().unwrap_or(""),
                event["involvedObject"]["name"].as_str().unwrap_or("")),
            "source": event["source"],
        })
    );
}
