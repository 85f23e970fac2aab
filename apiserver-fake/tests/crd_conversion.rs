//! CRDs of several versions as an operator meets them, driven from outside: the built binary's
//! `cluster` (servers `a` and `b`, both reaching Service `webhooks/convert` through
//! `--webhook-service-address`), an HTTPS conversion webhook in this test (v1's `spec.cronSpec` is v2's
//! `spec.schedule`), and kubectl. Objects are written at the storage version (v1) whatever version a
//! client writes, and read, listed, watched and patched at the version it asks for; the webhook's
//! failures come back with upstream's texts; `status.storedVersions` grows when the storage version
//! changes.

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};
use support::demo::{Demo, admin, server};
use support::https::HttpsServer;
use support::{kubectl, kubectl_available, kubectl_eventually, kubectl_ok};

/// The ConversionReview requests the webhook received.
type Calls = Arc<Mutex<Vec<Value>>>;

/// v1 ↔ v2 of a CronTab: `spec.cronSpec` ↔ `spec.schedule`.
fn convert_object(mut object: Value, desired: &str) -> Value {
    let spec = object["spec"].as_object_mut().cloned().unwrap_or_default();
    let mut out = serde_json::Map::new();
    for (key, value) in spec {
        let key = match (desired, key.as_str()) {
            ("stable.example.com/v2", "cronSpec") => "schedule".to_owned(),
            ("stable.example.com/v1", "schedule") => "cronSpec".to_owned(),
            _ => key,
        };
        out.insert(key, value);
    }
    object["spec"] = Value::Object(out);
    object["apiVersion"] = json!(desired);
    object
}

/// The webhook's behaviour by path: `/convert` converts; the others misbehave as named.
fn answer(path: &str, review: &Value) -> Bytes {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let objects: Vec<Value> = request["objects"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|o| convert_object(o, desired))
        .collect();
    let ok = |converted: Vec<Value>| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": converted}})
    };
    let reply = match path {
        "/convert" => ok(objects),
        "/garbage" => return Bytes::from_static(b"this is not JSON"),
        "/rename" => ok(objects
            .into_iter()
            .map(|mut o| {
                o["metadata"]["name"] = json!("renamed");
                o
            })
            .collect()),
        "/twice" => ok(objects.iter().chain(objects.iter()).cloned().collect()),
        "/refuse" => json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Failure", "message": "v3 is not supported yet"}}}),
        _ => json!({}),
    };
    Bytes::from(reply.to_string())
}

struct ConversionWebhook {
    server: HttpsServer,
    calls: Calls,
}

impl ConversionWebhook {
    fn start() -> Self {
        let calls = Calls::default();
        let recorded = calls.clone();
        let server = HttpsServer::start("convert.webhooks.svc", move |path, body| {
            let calls = recorded.clone();
            async move {
                let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                calls.lock().expect("calls").push(review.clone());
                answer(&path, &review)
            }
        });
        Self { server, calls }
    }

    /// `(name, apiVersion sent, desiredAPIVersion)` of every object converted so far.
    fn conversions(&self) -> Vec<(String, String, String)> {
        let calls = self.calls.lock().expect("calls");
        calls
            .iter()
            .flat_map(|review| {
                let desired = review["request"]["desiredAPIVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                review["request"]["objects"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |o| {
                        (
                            o["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                            o["apiVersion"].as_str().unwrap_or_default().to_owned(),
                            desired.clone(),
                        )
                    })
            })
            .collect()
    }
}

fn crd(webhook: &ConversionWebhook, client_config: &str, storage: &str) -> String {
    let ca = &webhook.server.ca_bundle;
    let (v1_storage, v2_storage) = (storage == "v1", storage == "v2");
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: crontabs.stable.example.com}}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {{plural: crontabs, singular: crontab, kind: CronTab}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        caBundle: {ca}
        {client_config}
  versions:
  - name: v1
    served: true
    storage: {v1_storage}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {{type: string}}
  - name: v2
    served: true
    storage: {v2_storage}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              schedule: {{type: string}}
"
    )
}

fn service(path: &str) -> String {
    format!("service: {{namespace: webhooks, name: convert, path: {path}}}")
}

fn start_cluster(dir: &Path, port: u16) -> Demo {
    let config = dir.join("cluster.yaml");
    let flags = format!("webhook-service-address: \"webhooks/convert=127.0.0.1:{port}\"");
    std::fs::write(
        &config,
        format!(
            "servers:\n\
             - {{name: a, version: \"1.36\", flags: {{{flags}}}}}\n\
             - {{name: b, version: \"1.36\", flags: {{{flags}}}}}\n\
             store: memory\nrun: in-process\nlb: none\ncontrollers: false\n"
        ),
    )
    .expect("cluster.yaml");
    let config = config.display().to_string();
    let mut demo = Demo::start(dir, &["--config", &config]);
    demo.wait_for_manifest(dir);
    demo
}

fn apply(kubeconfig: &Path, dir: &Path, name: &str, manifest: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, manifest).expect("manifest");
    kubectl_ok(kubeconfig, &["apply", "-f", &file.display().to_string()])
}

fn get_json(kubeconfig: &Path, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&kubectl_ok(kubeconfig, &all)).expect("JSON")
}

/// kubectl's stderr for a failing command, with the temporary directory and ports redacted.
fn failure(kubeconfig: &Path, dir: &Path, args: &[&str]) -> String {
    let (ok, out, err) = kubectl(kubeconfig, args);
    assert!(!ok, "kubectl {args:?} should fail: {out}");
    let err = err.replace(&dir.display().to_string(), "[dir]");
    regex_lite_ports(&err)
}

/// Replaces `127.0.0.1:<port>` with `127.0.0.1:[port]`.
fn regex_lite_ports(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("127.0.0.1:") {
        let (head, tail) = rest.split_at(at + "127.0.0.1:".len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        out.push_str(if digits > 0 { "[port]" } else { "" });
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

fn kubeconfigs(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("a.kubeconfig"), dir.join("b.kubeconfig"))
}

const V2: &str = "crontabs.v2.stable.example.com";
const V1: &str = "crontabs.v1.stable.example.com";

#[test]
fn objects_are_stored_at_the_storage_version_and_served_at_the_requested_one_through_the_webhook() {
    if !kubectl_available() {
        return;
    }
    let webhook = ConversionWebhook::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = start_cluster(dir.path(), webhook.server.port);
    let manifest = demo.wait_for_manifest(dir.path());
    let (a, b) = kubeconfigs(dir.path());
    apply(
        &b,
        dir.path(),
        "crd.yaml",
        &crd(&webhook, &service("/convert"), "v1"),
    );

    // Created at v1 (the storage version): no conversion on the way in.
    let file = dir.path().join("tab.yaml");
    std::fs::write(
        &file,
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: tab, namespace: default}\nspec: {cronSpec: \"* * * * */5\"}\n",
    )
    .expect("tab");
    kubectl_eventually(&b, &["create", "-f", &file.display().to_string()]);
    assert_eq!(webhook.conversions(), vec![]);

    // Read at v2 through either server: converted by the webhook, from v1.
    for kubeconfig in [&a, &b] {
        let tab = get_json(kubeconfig, &[V2, "tab"]);
        assert_eq!(tab["apiVersion"], "stable.example.com/v2");
        assert_eq!(tab["spec"], json!({"schedule": "* * * * */5"}));
    }
    assert_eq!(
        webhook.conversions()[0],
        (
            "tab".to_owned(),
            "stable.example.com/v1".to_owned(),
            "stable.example.com/v2".to_owned()
        )
    );

    // Created at v2: the webhook converts it to v1 for storage, and the response back to v2.
    let file = dir.path().join("other.yaml");
    std::fs::write(
        &file,
        "apiVersion: stable.example.com/v2\nkind: CronTab\nmetadata: {name: other, namespace: default}\nspec: {schedule: \"@daily\"}\n",
    )
    .expect("other");
    let before = webhook.conversions().len();
    let created: Value = serde_json::from_str(&kubectl_ok(
        &b,
        &["create", "-f", &file.display().to_string(), "-o", "json"],
    ))
    .expect("JSON");
    assert_eq!(created["apiVersion"], "stable.example.com/v2");
    assert_eq!(created["spec"], json!({"schedule": "@daily"}));
    assert_eq!(
        webhook.conversions()[before..],
        [
            (
                "other".to_owned(),
                "stable.example.com/v2".to_owned(),
                "stable.example.com/v1".to_owned()
            ),
            (
                "other".to_owned(),
                "stable.example.com/v1".to_owned(),
                "stable.example.com/v2".to_owned()
            ),
        ]
    );
    // Read at v1 it is what is stored: v1's field, and no webhook call.
    let before = webhook.conversions().len();
    let stored = get_json(&a, &[V1, "other"]);
    assert_eq!(stored["apiVersion"], "stable.example.com/v1");
    assert_eq!(stored["spec"], json!({"cronSpec": "@daily"}));
    assert_eq!(
        webhook.conversions().len(),
        before,
        "a read at the storage version converts nothing"
    );

    // Listed at v2: every item converted.
    let list = get_json(&a, &[V2]);
    assert_eq!(list["apiVersion"], "v1", "kubectl's List");
    let items: Vec<(Value, Value)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| (i["apiVersion"].clone(), i["spec"].clone()))
        .collect();
    assert_eq!(
        items,
        vec![
            (json!("stable.example.com/v2"), json!({"schedule": "@daily"})),
            (json!("stable.example.com/v2"), json!({"schedule": "* * * * */5"})),
        ]
    );

    // Patched at v2 (a merge patch on v2's field): stored at v1, answered at v2.
    let patched: Value = serde_json::from_str(&kubectl_ok(
        &b,
        &[
            "patch",
            V2,
            "tab",
            "--type=merge",
            "-p",
            r#"{"spec":{"schedule":"@hourly"}}"#,
            "-o",
            "json",
        ],
    ))
    .expect("JSON");
    assert_eq!(patched["apiVersion"], "stable.example.com/v2");
    assert_eq!(patched["spec"], json!({"schedule": "@hourly"}));
    assert_eq!(get_json(&a, &[V1, "tab"])["spec"], json!({"cronSpec": "@hourly"}));

    // Watched at v2: the initial events are converted.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = admin(dir.path(), server(&manifest, "a"));
    let watch = runtime.block_on(client.get(
        "/apis/stable.example.com/v2/namespaces/default/crontabs?watch=1&timeoutSeconds=1&resourceVersion=0",
    ));
    assert_eq!(watch.status, 200, "{}", watch.text());
    let events: Vec<Value> = watch
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    for event in &events {
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["apiVersion"], "stable.example.com/v2");
        assert!(event["object"]["spec"]["schedule"].is_string(), "{event}");
    }

    // The webhook failing, each way upstream words it: reads fail with 500 and the text alone, writes
    // with an internal error.
    let mut errors = Vec::new();
    for path in ["/garbage", "/rename", "/twice", "/refuse", "/empty"] {
        apply(&b, dir.path(), "crd.yaml", &crd(&webhook, &service(path), "v1"));
        errors.push(format!(
            "{path}: {}",
            failure(&a, dir.path(), &["get", V2, "tab"])
        ));
    }
    // Down: a URL nobody listens at.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_port = closed.local_addr().expect("addr").port();
    drop(closed);
    let url = format!("url: https://127.0.0.1:{closed_port}/convert");
    apply(&b, dir.path(), "crd.yaml", &crd(&webhook, &url, "v1"));
    errors.push(format!("down: {}", failure(&a, dir.path(), &["get", V2, "tab"])));
    errors.push(format!(
        "down, create: {}",
        failure(&b, dir.path(), &["create", "-f", &file.display().to_string()])
    ));
    insta::assert_snapshot!("conversion_failures", errors.join("\n"));
    // Reads at the storage version need no webhook, and still work.
    assert_eq!(get_json(&a, &[V1, "tab"])["spec"], json!({"cronSpec": "@hourly"}));

    // A new storage version is added to `status.storedVersions`; the old one stays.
    let stored_versions = |kubeconfig: &Path| {
        get_json(kubeconfig, &["crd", "crontabs.stable.example.com"])["status"]["storedVersions"].clone()
    };
    assert_eq!(stored_versions(&b), json!(["v1"]));
    apply(
        &b,
        dir.path(),
        "crd.yaml",
        &crd(&webhook, &service("/convert"), "v2"),
    );
    assert_eq!(stored_versions(&a), json!(["v1", "v2"]));
    // Objects stored at v1 are still read at v2 (converted), and a write stores them at v2.
    kubectl_ok(&a, &["label", V2, "tab", "moved=yes"]);
    let before = webhook.conversions().len();
    assert_eq!(get_json(&a, &[V2, "tab"])["spec"], json!({"schedule": "@hourly"}));
    assert_eq!(webhook.conversions().len(), before, "stored at v2 now");
}

/// Without the `etcd` feature the etcd variant cannot run: say so (a failure under
/// `KUBE_MVP_REQUIRE_ETCD=1`, as CI's all-features run sets it).
#[cfg(not(feature = "etcd"))]
#[test]
fn objects_in_etcd_are_at_the_storage_version_is_skipped_without_the_feature() {
    support::etcd::skip("built without the `etcd` feature");
}

/// On etcd (`cluster --etcd`, servers as processes), what is stored is the storage version's form, as
/// `etcdctl` reads it under kube-apiserver's key: an object created at v2 is in etcd at v1.
#[cfg(feature = "etcd")]
#[test]
fn objects_in_etcd_are_at_the_storage_version() {
    if !kubectl_available() || !support::etcd::etcd_on_path() {
        return;
    }
    let webhook = ConversionWebhook::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--etcd"]);
    let manifest = demo.wait_for_manifest(dir.path());
    let (_, b) = kubeconfigs(dir.path());
    let url = format!("url: https://127.0.0.1:{}/convert", webhook.server.port);
    apply(&b, dir.path(), "crd.yaml", &crd(&webhook, &url, "v1"));
    let file = dir.path().join("other.yaml");
    std::fs::write(
        &file,
        "apiVersion: stable.example.com/v2\nkind: CronTab\nmetadata: {name: other, namespace: default}\nspec: {schedule: \"@daily\"}\n",
    )
    .expect("other");
    kubectl_eventually(&b, &["create", "-f", &file.display().to_string()]);
    let etcd = manifest["etcd"].as_str().expect("etcd URL");
    let output = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={etcd}"))
        .args([
            "get",
            "--print-value-only",
            "/registry/stable.example.com/crontabs/default/other",
        ])
        .output()
        .expect("etcdctl runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stored: Value = serde_json::from_slice(&output.stdout).expect("custom resources are stored as JSON");
    assert_eq!(stored["apiVersion"], "stable.example.com/v1");
    assert_eq!(stored["spec"], json!({"cronSpec": "@daily"}));
    // And read back at v2.
    assert_eq!(
        get_json(&b, &[V2, "other"])["spec"],
        json!({"schedule": "@daily"})
    );
}
