//! Admission webhooks as an operator meets them, driven from outside: the built binary's `cluster`
//! (servers `a`, which lacks `batch/v1`, and `b`, both with `--webhook-service-address`), a small
//! HTTPS webhook server in this test (its certificate from the `certs` crate, its CA as `caBundle`),
//! and kubectl: a mutating webhook behind a Service labels ConfigMaps, Deployments, Jobs and a custom
//! resource; a validating webhook at a URL denies what is labelled `deny=true` with its own message and
//! warns about the rest; failure policies with a webhook that is down, slow, answers garbage or sends a
//! patch that does not apply. A Job created through `a` is proxied to `b` and admitted there, once.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use support::demo::Demo;
use support::https::HttpsServer;
use support::{kubectl, kubectl_available, kubectl_eventually};

/// The requests each path of the webhook server received (path → AdmissionReview requests).
type Calls = Arc<Mutex<BTreeMap<String, Vec<Value>>>>;

/// An HTTPS webhook server on 127.0.0.1 answering by path (see [`answer`]).
struct WebhookServer {
    port: u16,
    ca_bundle: String,
    calls: Calls,
    _server: HttpsServer,
}

impl WebhookServer {
    fn start() -> Self {
        let calls = Calls::default();
        let recorded = calls.clone();
        let server = HttpsServer::start("admission.webhooks.svc", move |path, body| {
            let calls = recorded.clone();
            async move {
                let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let request = review["request"].clone();
                calls
                    .lock()
                    .expect("calls")
                    .entry(path.clone())
                    .or_default()
                    .push(request.clone());
                answer(&path, &request).await
            }
        });
        Self {
            port: server.port,
            ca_bundle: server.ca_bundle.clone(),
            calls,
            _server: server,
        }
    }

    /// A `kind` (`Validating`/`MutatingWebhookConfiguration`) named `name` with one webhook,
    /// `<name>.example.com`, calling this test's server at `path` for `rules` (a YAML flow sequence).
    fn one_webhook(&self, kind: &str, name: &str, path: &str, rules: &str) -> String {
        let (port, ca) = (self.port, &self.ca_bundle);
        format!(
            "apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata: {{name: {name}}}
webhooks:
- name: {name}.example.com
  clientConfig: {{url: \"https://127.0.0.1:{port}{path}\", caBundle: {ca}}}
  rules: {rules}
  sideEffects: None
  admissionReviewVersions: [v1]
"
        )
    }

    /// How often `path` was called for the object named `name`.
    fn calls_for(&self, path: &str, name: &str) -> usize {
        self.calls
            .lock()
            .expect("calls")
            .get(path)
            .map(|calls| calls.iter().filter(|r| r["name"] == name).count())
            .unwrap_or_default()
    }

    /// How often `path` was called for objects of `resource`.
    fn calls(&self, path: &str, resource: &str) -> usize {
        self.calls
            .lock()
            .expect("calls")
            .get(path)
            .map(|calls| {
                calls
                    .iter()
                    .filter(|r| r["resource"]["resource"] == resource)
                    .count()
            })
            .unwrap_or_default()
    }
}

/// The webhook's behaviour by path.
async fn answer(path: &str, request: &Value) -> Bytes {
    let uid = request["uid"].clone();
    let review = |response: Value| {
        Bytes::from(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
                .to_string(),
        )
    };
    let patch = |ops: Value| data_encoding::BASE64.encode(ops.to_string().as_bytes());
    match path {
        "/label" => {
            let ops = if request["object"]["metadata"]["labels"].is_object() {
                json!([{"op": "add", "path": "/metadata/labels/admitted-by", "value": "label-webhook"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"admitted-by": "label-webhook"}}])
            };
            review(json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch(ops)}))
        }
        "/deny" => {
            if request["object"]["metadata"]["labels"]["deny"] == "true" {
                review(json!({"uid": uid, "allowed": false,
                    "status": {"code": 403, "reason": "Forbidden", "message": "objects labelled deny=true are refused"}}))
            } else {
                review(
                    json!({"uid": uid, "allowed": true, "warnings": ["checked by the deny webhook"],
                    "auditAnnotations": {"checked": "true"}}),
                )
            }
        }
        "/max-replicas" => {
            if request["object"]["spec"]["replicas"].as_i64().unwrap_or_default() > 5 {
                review(
                    json!({"uid": uid, "allowed": false, "status": {"code": 422, "message": "at most 5 replicas"}}),
                )
            } else {
                review(json!({"uid": uid, "allowed": true}))
            }
        }
        "/annotate" => {
            let ops = json!([{"op": "add", "path": "/metadata/annotations", "value": {"annotated-by": "annotate-webhook"}}]);
            review(json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch(ops)}))
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            review(json!({"uid": uid, "allowed": true}))
        }
        "/refuse" => review(json!({"uid": uid, "allowed": false,
            "status": {"code": 403, "reason": "Forbidden", "message": "refused by the conditional webhook"}})),
        "/eviction" => {
            if request["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("protected-"))
            {
                review(json!({"uid": uid, "allowed": false,
                    "status": {"code": 429, "reason": "TooManyRequests", "message": "protected pods are not evicted"}}))
            } else {
                review(json!({"uid": uid, "allowed": true, "warnings": ["eviction checked by the webhook"]}))
            }
        }
        "/delete-warning" => review(json!({"uid": uid, "allowed": true,
            "warnings": [format!("{} is being deleted", request["oldObject"]["metadata"]["name"].as_str().unwrap_or("?")),
                "deletes are audited"]})),
        "/token" => {
            let audiences = request["object"]["spec"]["audiences"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if audiences.contains(&json!("untrusted")) {
                review(json!({"uid": uid, "allowed": false,
                    "status": {"code": 403, "reason": "Forbidden", "message": "no tokens for untrusted audiences"}}))
            } else {
                review(
                    json!({"uid": uid, "allowed": true, "warnings": ["token request checked by the webhook"]}),
                )
            }
        }
        "/exec" => {
            if request["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("prod-"))
            {
                review(json!({"uid": uid, "allowed": false,
                    "status": {"code": 403, "reason": "Forbidden", "message": "no exec into production pods"}}))
            } else {
                review(json!({"uid": uid, "allowed": true, "warnings": ["exec checked by the webhook"]}))
            }
        }
        "/garbage" => Bytes::from_static(b"garbage"),
        "/bad-patch" => review(json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
            "patch": patch(json!([{"op": "remove", "path": "/spec/nothing"}]))})),
        _ => review(json!({"uid": uid, "allowed": true})),
    }
}

/// A cluster of the default layout whose servers reach Service `webhooks/admission` at `port`, each
/// writing an audit log of every request at `Metadata` level to `DIR/audit-<name>.log`.
fn start_cluster(dir: &Path, port: u16) -> Demo {
    let config = dir.join("cluster.yaml");
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n")
        .expect("audit policy");
    let flags = |name: &str| {
        format!(
            "webhook-service-address: \"webhooks/admission=127.0.0.1:{port}\", audit-policy-file: {}, audit-log-path: {}",
            policy.display(),
            dir.join(format!("audit-{name}.log")).display()
        )
    };
    let (flags_a, flags_b) = (flags("a"), flags("b"));
    std::fs::write(
        &config,
        format!(
            "servers:\n\
             - {{name: a, version: \"1.36\", runtime-config: \"batch/v1=false\", flags: {{{flags_a}}}}}\n\
             - {{name: b, version: \"1.36\", flags: {{{flags_b}}}}}\n\
             store: memory\nrun: in-process\nlb: none\ncontrollers: false\n"
        ),
    )
    .expect("cluster.yaml");
    let config = config.display().to_string();
    let mut demo = Demo::start(dir, &["--config", &config]);
    demo.wait_for_manifest(dir);
    demo
}

fn apply(kubeconfig: &Path, dir: &Path, name: &str, manifest: &str) {
    let file = dir.join(name);
    std::fs::write(&file, manifest).expect("manifest");
    let (ok, out, err) = kubectl(kubeconfig, &["apply", "-f", &file.display().to_string()]);
    assert!(ok, "{out}{err}");
}

/// `kubectl create -f` of `manifest` written to `dir/name`; the directory reads `[dir]` in stderr.
fn create(kubeconfig: &Path, dir: &Path, name: &str, manifest: &str) -> (bool, String, String) {
    let file = dir.join(name);
    std::fs::write(&file, manifest).expect("manifest");
    let (ok, out, err) = kubectl(kubeconfig, &["create", "-f", &file.display().to_string()]);
    (ok, out, err.replace(&dir.display().to_string(), "[dir]"))
}

fn label(kubeconfig: &Path, args: &[&str]) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "jsonpath={.metadata.labels.admitted-by}"]);
    kubectl(kubeconfig, &all).1
}

const CRONTAB_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
";

fn configurations(server: &WebhookServer) -> String {
    let (port, ca) = (server.port, &server.ca_bundle);
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: label}}
webhooks:
- name: label.example.com
  clientConfig:
    service: {{namespace: webhooks, name: admission, path: /label}}
    caBundle: {ca}
  rules:
  - {{operations: [CREATE], apiGroups: [\"\", apps, batch, stable.example.com], apiVersions: [\"*\"], resources: [configmaps, deployments, jobs, crontabs]}}
  objectSelector: {{matchExpressions: [{{key: case, operator: DoesNotExist}}]}}
  reinvocationPolicy: IfNeeded
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: zz-annotate}}
webhooks:
- name: annotate.example.com
  clientConfig:
    service: {{namespace: webhooks, name: admission, path: /annotate}}
    caBundle: {ca}
  rules:
  - {{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}}
  objectSelector: {{matchLabels: {{reinvoke: \"yes\"}}}}
  sideEffects: NoneOnDryRun
  admissionReviewVersions: [v1beta1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: deny}}
webhooks:
- name: deny.example.com
  clientConfig:
    url: https://127.0.0.1:{port}/deny
    caBundle: {ca}
  rules:
  - {{operations: [CREATE, UPDATE], apiGroups: [\"\", batch, stable.example.com], apiVersions: [\"*\"], resources: [configmaps, jobs, crontabs]}}
  objectSelector: {{matchExpressions: [{{key: case, operator: DoesNotExist}}]}}
  sideEffects: None
  admissionReviewVersions: [v1]
- name: equivalent.example.com
  clientConfig:
    url: https://127.0.0.1:{port}/equivalent
    caBundle: {ca}
  rules:
  - {{operations: [CREATE], apiGroups: [stable.example.com], apiVersions: [v1], resources: [crontabs]}}
  sideEffects: None
  admissionReviewVersions: [v1]
- name: replicas.example.com
  clientConfig:
    url: https://127.0.0.1:{port}/max-replicas
    caBundle: {ca}
  rules:
  - {{operations: [UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments/scale]}}
  sideEffects: None
  admissionReviewVersions: [v1]
"
    )
}

/// What each test starts: the webhook server and a cluster of the default layout whose servers reach
/// it ([`start_cluster`]), with the kubeconfigs of `a` and `b`.
struct WebhookCluster {
    server: WebhookServer,
    dir: tempfile::TempDir,
    _demo: Demo,
    a: PathBuf,
    b: PathBuf,
}

impl WebhookCluster {
    /// `None` (the test is skipped) without a kubectl to drive the cluster with.
    fn start() -> Option<Self> {
        if !kubectl_available() {
            return None;
        }
        let server = WebhookServer::start();
        let dir = tempfile::tempdir().expect("tempdir");
        let demo = start_cluster(dir.path(), server.port);
        Some(Self {
            server,
            a: dir.path().join("a.kubeconfig"),
            b: dir.path().join("b.kubeconfig"),
            dir,
            _demo: demo,
        })
    }
}

#[test]
fn webhooks_mutate_and_deny_built_in_and_custom_resources_and_are_called_once_behind_the_proxy() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        a,
        b,
    } = cluster;
    apply(&b, dir.path(), "crd.yaml", CRONTAB_CRD);
    apply(&b, dir.path(), "webhooks.yaml", &configurations(&server));

    // The mutating webhook (a Service reference) labels what is created; the validating one warns.
    let (ok, _, err) = kubectl(&b, &["create", "configmap", "plain", "--from-literal=k=v"]);
    assert!(ok, "{err}");
    assert_eq!(err, "Warning: checked by the deny webhook\n");
    assert_eq!(label(&b, &["configmap", "plain"]), "label-webhook");
    // The webhook's audit annotations are in the request's audit event, under its name, with the
    // mutating dispatcher's record of each mutating webhook it called (the patch only from level
    // `Request`: this log is at `Metadata`).
    let log = std::fs::read_to_string(dir.path().join("audit-b.log")).expect("b's audit log");
    let event = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "configmaps")
        .expect("the create's audit event");
    assert_eq!(
        event["annotations"],
        json!({"deny.example.com/checked": "true",
            "mutation.webhook.admission.k8s.io/round_0_index_0":
                r#"{"configuration":"label","webhook":"label.example.com","mutated":true}"#})
    );
    let (ok, _, err) = kubectl(&b, &["create", "deployment", "web", "--image=nginx"]);
    assert!(ok, "{err}");
    assert_eq!(label(&b, &["deployment", "web"]), "label-webhook");
    let crontab = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: tab}\nspec: {cronSpec: \"* * * * */5\"}\n";
    let file = dir.path().join("crontab.yaml");
    std::fs::write(&file, crontab).expect("crontab");
    kubectl_eventually(&b, &["create", "-f", &file.display().to_string()]);
    assert_eq!(label(&b, &["crontab", "tab"]), "label-webhook");

    // The scale subresource is admitted with its `autoscaling/v1` Scale.
    let (ok, out, err) = kubectl(&b, &["scale", "deployment", "web", "--replicas=3"]);
    assert!(ok, "{err}");
    assert_eq!(out, "deployment.apps/web scaled\n");
    let (ok, _, err) = kubectl(&b, &["scale", "deployment", "web", "--replicas=9"]);
    assert!(!ok);
    insta::assert_snapshot!("denied_scale", err);
    let replicas = kubectl(
        &b,
        &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"],
    )
    .1;
    assert_eq!(replicas, "3");
    let scale = server.calls.lock().expect("calls")["/max-replicas"][0].clone();
    assert_eq!(
        scale["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        scale["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(scale["subResource"], "scale");
    assert_eq!(scale["object"]["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["oldObject"]["spec"]["replicas"], 1);

    // A server-side dry run calls webhooks whose side effects allow it, and tells them.
    let (ok, out, err) = kubectl(
        &b,
        &[
            "create",
            "configmap",
            "dry",
            "--dry-run=server",
            "-o",
            "jsonpath={.metadata.labels.admitted-by}",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "label-webhook", "the dry run's answer shows the mutation");
    let dry = server.calls.lock().expect("calls")["/deny"]
        .iter()
        .find(|r| r["name"] == "dry")
        .cloned()
        .expect("the validating webhook saw the dry run");
    assert_eq!(dry["dryRun"], true);
    assert_eq!(dry["options"]["dryRun"], json!(["All"]));
    assert!(
        !kubectl(&b, &["get", "configmap", "dry"]).0,
        "nothing was written"
    );

    // A later webhook's change reinvokes an earlier `IfNeeded` one, once; the later one speaks v1beta1.
    let (ok, _, err) = kubectl(&b, &["create", "configmap", "twice"]);
    assert!(ok, "{err}");
    assert_eq!(
        server.calls_for("/label", "twice"),
        1,
        "no change after it, no reinvocation"
    );
    let reinvoked =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: reinvoked, labels: {reinvoke: \"yes\"}}\n";
    let (ok, _, err) = create(&b, dir.path(), "reinvoked.yaml", reinvoked);
    assert!(ok, "{err}");
    assert_eq!(server.calls_for("/label", "reinvoked"), 2);
    assert_eq!(server.calls_for("/annotate", "reinvoked"), 1);
    let (_, annotations, _) = kubectl(
        &b,
        &[
            "get",
            "configmap",
            "reinvoked",
            "-o",
            "jsonpath={.metadata.annotations}",
        ],
    );
    assert_eq!(annotations, r#"{"annotated-by":"annotate-webhook"}"#);
    assert_eq!(label(&b, &["configmap", "reinvoked"]), "label-webhook");

    // `matchPolicy: Equivalent`: a rule on v1 matches a create through v2, sent as v1.
    let v2 = "apiVersion: stable.example.com/v2\nkind: CronTab\nmetadata: {name: tab2}\nspec: {cronSpec: \"* * * * */2\"}\n";
    let (ok, _, err) = create(&b, dir.path(), "crontab-v2.yaml", v2);
    assert!(ok, "{err}");
    let equivalent = server.calls.lock().expect("calls")["/equivalent"]
        .iter()
        .find(|r| r["name"] == "tab2")
        .cloned()
        .expect("the v1 webhook saw the v2 create");
    assert_eq!(equivalent["kind"]["version"], "v1");
    assert_eq!(equivalent["resource"]["version"], "v1");
    assert_eq!(equivalent["requestKind"]["version"], "v2");
    assert_eq!(equivalent["object"]["apiVersion"], "stable.example.com/v1");

    // The webhook's own denial, exactly: its code, reason and message behind upstream's prefix.
    let denied = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: refused, labels: {deny: \"true\"}}\n";
    let (ok, _, err) = create(&b, dir.path(), "refused.yaml", denied);
    assert!(!ok);
    insta::assert_snapshot!("denied_configmap", err);
    let denied_tab = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: refused, labels: {deny: \"true\"}}\n";
    let (ok, _, err) = create(&b, dir.path(), "refused-tab.yaml", denied_tab);
    assert!(!ok);
    insta::assert_snapshot!("denied_crontab", err);
    let (ok, _, err) = kubectl(&b, &["label", "configmap", "plain", "deny=true"]);
    assert!(!ok, "updates are validated too");
    insta::assert_snapshot!("denied_update", err);
    let (_, out, _) = kubectl(
        &b,
        &[
            "get",
            "configmap",
            "plain",
            "-o",
            "jsonpath={.metadata.labels.deny}",
        ],
    );
    assert_eq!(out, "", "the denied update wrote nothing");

    // A Job through `a` (no batch/v1) is proxied to `b`, which admits it: each webhook is called once.
    let (ok, _, err) = kubectl(&a, &["create", "job", "pi", "--image=perl"]);
    assert!(ok, "{err}");
    assert_eq!(label(&a, &["job", "pi"]), "label-webhook");
    assert_eq!(server.calls("/label", "jobs"), 1);
    assert_eq!(server.calls("/deny", "jobs"), 1);
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: refused, labels: {deny: \"true\"}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: perl}]\n";
    let (ok, _, through_a) = create(&a, dir.path(), "refused-job.yaml", job);
    assert!(!ok);
    let (ok, _, through_b) = create(&b, dir.path(), "refused-job.yaml", job);
    assert!(!ok);
    assert_eq!(
        through_a, through_b,
        "the proxy passes the peer's denial through unchanged"
    );
    insta::assert_snapshot!("denied_job", through_a);

    // What the webhook was told about the first ConfigMap (uids, times and the user agent vary).
    let first = server.calls.lock().expect("calls")["/deny"][0].clone();
    insta::assert_json_snapshot!("configmap_review_request", first, {
        ".uid" => "[uid]",
        ".object.metadata.uid" => "[uid]",
        ".object.metadata.creationTimestamp" => "[timestamp]",
        ".object.metadata.managedFields[].time" => "[timestamp]",
    });
}

#[test]
fn failure_policies_decide_what_a_down_slow_or_broken_webhook_means() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        b,
        ..
    } = cluster;
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (port, ca) = (server.port, &server.ca_bundle);
    let hook = |name: &str, kind: &str, url: String, policy: &str, timeout: u32| {
        format!(
            "- name: {name}.example.com
  clientConfig: {{url: \"{url}\", caBundle: {ca}}}
  rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}}]
  objectSelector: {{matchLabels: {{case: {name}}}}}
  failurePolicy: {policy}
  timeoutSeconds: {timeout}
  sideEffects: None
  admissionReviewVersions: [v1]
{}",
            if kind == "mutating" {
                "  reinvocationPolicy: Never\n"
            } else {
                ""
            }
        )
    };
    let validating = [
        hook(
            "down",
            "validating",
            format!("https://127.0.0.1:{closed}/"),
            "Fail",
            10,
        ),
        hook(
            "down-ignored",
            "validating",
            format!("https://127.0.0.1:{closed}/"),
            "Ignore",
            10,
        ),
        hook(
            "slow",
            "validating",
            format!("https://127.0.0.1:{port}/slow"),
            "Fail",
            1,
        ),
        hook(
            "slow-ignored",
            "validating",
            format!("https://127.0.0.1:{port}/slow"),
            "Ignore",
            1,
        ),
        hook(
            "garbage",
            "validating",
            format!("https://127.0.0.1:{port}/garbage"),
            "Fail",
            10,
        ),
        hook(
            "untrusted",
            "validating",
            format!("https://localhost:{port}/"),
            "Fail",
            10,
        ),
    ]
    .concat();
    let mutating = [
        hook(
            "bad-patch",
            "mutating",
            format!("https://127.0.0.1:{port}/bad-patch"),
            "Ignore",
            10,
        ),
        hook(
            "garbage-ignored",
            "mutating",
            format!("https://127.0.0.1:{port}/garbage"),
            "Ignore",
            10,
        ),
    ]
    .concat();
    let manifest = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: cases}}\nwebhooks:\n{validating}---\napiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: cases}}\nwebhooks:\n{mutating}"
    );
    apply(&b, dir.path(), "webhooks.yaml", &manifest);

    let created = |case: &str| {
        let file = dir.path().join(format!("{case}.yaml"));
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {case}, labels: {{case: {case}}}}}\n"
            ),
        )
        .expect("manifest");
        let started = Instant::now();
        let (ok, _, err) = kubectl(&b, &["create", "-f", &file.display().to_string()]);
        let err = err
            .replace(&dir.path().display().to_string(), "[dir]")
            .replace(&port.to_string(), "[port]")
            .replace(&closed.to_string(), "[closed]");
        (ok, err, started.elapsed())
    };
    for case in ["down-ignored", "slow-ignored", "bad-patch", "garbage-ignored"] {
        let (ok, err, _) = created(case);
        if case == "bad-patch" {
            // A patch that does not apply fails the request whatever the failure policy (upstream).
            assert!(!ok, "{case}");
            insta::assert_snapshot!("bad_patch", err);
        } else {
            assert!(ok, "{case}: {err}");
        }
    }
    let (ok, err, elapsed) = created("slow");
    assert!(!ok);
    // The webhook answers after 10 s: well before that, the 1 s timeout has failed the request.
    assert!(
        elapsed < Duration::from_secs(8),
        "timeoutSeconds: 1 bounds the call: {elapsed:?}"
    );
    insta::assert_snapshot!("slow", err);
    for case in ["down", "garbage", "untrusted"] {
        let (ok, err, _) = created(case);
        assert!(!ok, "{case}");
        insta::assert_snapshot!(case, err);
    }
}

/// `matchConditions` (CEL over `object`, `oldObject`, `request`): a webhook whose condition is false is
/// not called; one whose condition cannot be evaluated refuses the request under `failurePolicy: Fail`
/// (upstream's 403, the webhook not called) and is skipped under `Ignore`.
#[test]
fn match_conditions_decide_whether_a_webhook_is_called() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        b,
        ..
    } = cluster;
    let (port, ca) = (server.port, &server.ca_bundle);
    let hook = |name: &str, condition: &str, policy: &str| {
        format!(
            "- name: {name}.example.com
  clientConfig: {{url: \"https://127.0.0.1:{port}/refuse\", caBundle: {ca}}}
  rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}}]
  objectSelector: {{matchLabels: {{case: {name}}}}}
  matchConditions:
  - {{name: {name}-condition, expression: \"{condition}\"}}
  failurePolicy: {policy}
  sideEffects: None
  admissionReviewVersions: [v1]
"
        )
    };
    let webhooks = [
        hook(
            "conditional",
            "has(object.metadata.annotations) && 'refuse' in object.metadata.annotations && object.metadata.annotations['refuse'] == 'yes' && request.operation == 'CREATE'",
            "Fail",
        ),
        hook("broken", "object.spec.replicas > 1", "Fail"),
        hook("broken-ignored", "object.spec.replicas > 1", "Ignore"),
    ]
    .concat();
    apply(
        &b,
        dir.path(),
        "webhooks.yaml",
        &format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: conditions}}\nwebhooks:\n{webhooks}"
        ),
    );
    let config_map = |name: &str, case: &str, annotations: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {{case: {case}}}, annotations: {{{annotations}}}}}\n"
        )
    };

    // The condition is false: the webhook (which refuses everything) is not called.
    let (ok, _, err) = create(
        &b,
        dir.path(),
        "plain.yaml",
        &config_map("plain", "conditional", ""),
    );
    assert!(ok, "{err}");
    assert_eq!(server.calls_for("/refuse", "plain"), 0);
    // It holds: the webhook is called and refuses.
    let (ok, _, err) = create(
        &b,
        dir.path(),
        "marked.yaml",
        &config_map("marked", "conditional", "refuse: \"yes\""),
    );
    assert!(!ok);
    assert_eq!(server.calls_for("/refuse", "marked"), 1);
    insta::assert_snapshot!("match_condition_holds", err);
    // It cannot be evaluated (a ConfigMap has no spec): Fail refuses without calling, Ignore skips.
    let (ok, _, err) = create(&b, dir.path(), "broken.yaml", &config_map("broken", "broken", ""));
    assert!(!ok);
    assert_eq!(server.calls_for("/refuse", "broken"), 0);
    insta::assert_snapshot!("match_condition_error", err);
    let (ok, _, err) = create(
        &b,
        dir.path(),
        "ignored.yaml",
        &config_map("ignored", "broken-ignored", ""),
    );
    assert!(ok, "{err}");
    assert_eq!(server.calls_for("/refuse", "ignored"), 0);
}

/// The action subresources are creates that admission sees (upstream's create handler): a validating
/// webhook on `pods/eviction` refuses to evict a protected pod with its own code and message, and its
/// warning reaches the client of an eviction it allows; a mutating webhook on `pods/binding` annotates
/// the `Binding`, whose annotations the registry copies onto the pod. The webhooks are sent the
/// subresource's own kind (`policy/v1` `Eviction`, `v1` `Binding`) under the pod's resource.
#[test]
fn evictions_and_bindings_are_admitted_as_creates_of_the_pods_subresources() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        b,
        ..
    } = cluster;
    apply(
        &b,
        dir.path(),
        "webhooks.yaml",
        &[
            server.one_webhook(
                "ValidatingWebhookConfiguration",
                "eviction",
                "/eviction",
                "[{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods/eviction]}]",
            ),
            server.one_webhook(
                "MutatingWebhookConfiguration",
                "binding",
                "/annotate",
                "[{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods/binding]}]",
            ),
        ]
        .join("---\n"),
    );
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{containers: [{{name: c, image: busybox}}]}}\n"
        )
    };
    for name in ["protected-db", "web", "unscheduled"] {
        let (ok, _, err) = create(&b, dir.path(), &format!("{name}.yaml"), &pod(name));
        assert!(ok, "{err}");
    }
    let post = |path: &str, file: &str, body: &str| {
        let file = dir.path().join(file);
        std::fs::write(&file, body).expect("body");
        kubectl(&b, &["create", "--raw", path, "-f", &file.display().to_string()])
    };
    let eviction = |name: &str| {
        format!(
            "{{\"apiVersion\": \"policy/v1\", \"kind\": \"Eviction\", \"metadata\": {{\"name\": \"{name}\"}}}}"
        )
    };

    let (ok, _, err) = post(
        "/api/v1/namespaces/default/pods/protected-db/eviction",
        "evict-db.json",
        &eviction("protected-db"),
    );
    assert!(!ok, "the webhook refuses the eviction");
    assert_eq!(
        err.trim(),
        "Error from server (TooManyRequests): admission webhook \"eviction.example.com\" denied the request: protected pods are not evicted"
    );
    let (ok, out, err) = kubectl(&b, &["get", "pod", "protected-db", "-o", "name"]);
    assert!(
        ok && out.trim() == "pod/protected-db",
        "the refused eviction left the pod: {out}{err}"
    );

    let (ok, _, err) = post(
        "/api/v1/namespaces/default/pods/web/eviction",
        "evict-web.json",
        &eviction("web"),
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: eviction checked by the webhook"),
        "the webhook's warning reaches kubectl: {err}"
    );
    let (_, out, _) = kubectl(&b, &["get", "pod", "web", "--ignore-not-found", "-o", "name"]);
    assert_eq!(out.trim(), "", "the allowed eviction deleted the pod");

    let reviews = server
        .calls
        .lock()
        .expect("calls")
        .get("/eviction")
        .cloned()
        .unwrap_or_default();
    assert_eq!(reviews.len(), 2, "one call per eviction");
    let review = &reviews[1];
    assert_eq!(
        (
            &review["operation"],
            &review["resource"],
            &review["subResource"],
            &review["kind"],
            &review["object"]["kind"]
        ),
        (
            &json!("CREATE"),
            &json!({"group": "", "version": "v1", "resource": "pods"}),
            &json!("eviction"),
            &json!({"group": "policy", "version": "v1", "kind": "Eviction"}),
            &json!("Eviction"),
        ),
        "{review}"
    );

    let (ok, _, err) = post(
        "/api/v1/namespaces/default/pods/unscheduled/binding",
        "bind.json",
        r#"{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "unscheduled"}, "target": {"kind": "Node", "name": "node-1"}}"#,
    );
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(
        &b,
        &[
            "get",
            "pod",
            "unscheduled",
            "-o",
            "jsonpath={.spec.nodeName} {.metadata.annotations.annotated-by}",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        "node-1 annotate-webhook",
        "bound, with the annotation the webhook added to the Binding"
    );
    let bindings = server
        .calls
        .lock()
        .expect("calls")
        .get("/annotate")
        .cloned()
        .unwrap_or_default();
    let binding = bindings
        .iter()
        .find(|r| r["subResource"] == "binding")
        .expect("the binding webhook was called");
    assert_eq!(
        binding["kind"],
        json!({"group": "", "version": "v1", "kind": "Binding"}),
        "{binding}"
    );
}

/// Upstream's runtime cost limits (issue 19) for `matchConditions`: over a ConfigMap of 1,000 keys, a
/// condition comparing every key with every other is over the per-call limit (`operation cancelled:
/// actual cost limit exceeded`), three of them spend the conditions' budget of 2,500,000 (`validation
/// failed due to running out of cost budget, …`): `failurePolicy: Fail` refuses without calling the
/// webhook, `Ignore` skips it.
#[test]
fn match_conditions_over_the_cost_limits_follow_the_failure_policy() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        b,
        ..
    } = cluster;
    let (port, ca) = (server.port, &server.ca_bundle);
    let nested = "object.data.all(k, object.data.all(j, k == j || object.data[k] != object.data[j]))";
    let hook = |name: &str, conditions: usize, policy: &str| {
        let conditions: Vec<String> = (0..conditions)
            .map(|i| format!("  - {{name: pairs-{i}, expression: \"{nested}\"}}\n"))
            .collect();
        format!(
            "- name: {name}.example.com
  clientConfig: {{url: \"https://127.0.0.1:{port}/refuse\", caBundle: {ca}}}
  rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}}]
  objectSelector: {{matchLabels: {{case: {name}}}}}
  matchConditions:
{}  failurePolicy: {policy}
  sideEffects: None
  admissionReviewVersions: [v1]
",
            conditions.concat()
        )
    };
    let webhooks = [
        hook("call-limit", 1, "Fail"),
        hook("call-limit-ignored", 1, "Ignore"),
        hook("budget", 3, "Fail"),
        hook("budget-ignored", 3, "Ignore"),
    ]
    .concat();
    apply(
        &b,
        dir.path(),
        "webhooks.yaml",
        &format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: costly-conditions}}\nwebhooks:\n{webhooks}"
        ),
    );
    let mut refusals = Vec::new();
    for (name, admitted) in [
        ("call-limit", false),
        ("call-limit-ignored", true),
        ("budget", false),
        ("budget-ignored", true),
    ] {
        let data: Vec<String> = (0..1_000).map(|i| format!("k{i}: v{i}")).collect();
        let manifest = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {{case: {name}}}}}\ndata: {{{}}}\n",
            data.join(", ")
        );
        let (ok, _, err) = create(&b, dir.path(), &format!("{name}.yaml"), &manifest);
        assert_eq!(ok, admitted, "{name}: {err}");
        assert_eq!(server.calls_for("/refuse", name), 0, "{name}: not called");
        if !admitted {
            refusals.push(err);
        }
    }
    insta::assert_snapshot!("match_condition_cost_limits", refusals.join("\n"));
}

/// A delete's webhook warnings reach the client as a create's do: `kubectl delete` prints the warning
/// of the validating webhook it passed (sent the stored object as `oldObject`), and a collection delete
/// carries each distinct warning once.
#[test]
fn a_deletes_webhook_warnings_reach_the_client() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        b,
        ..
    } = cluster;
    apply(
        &b,
        dir.path(),
        "webhooks.yaml",
        &server.one_webhook(
            "ValidatingWebhookConfiguration",
            "delete-warning",
            "/delete-warning",
            "[{operations: [DELETE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}]",
        ),
    );
    for name in ["one", "two", "three"] {
        let (ok, _, err) = kubectl(&b, &["create", "configmap", name, "--from-literal=k=v"]);
        assert!(ok, "{err}");
        let (ok, _, err) = kubectl(&b, &["label", "configmap", name, "batch=yes"]);
        assert!(ok, "{err}");
    }
    let (ok, out, err) = kubectl(&b, &["delete", "configmap", "one"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "configmap \"one\" deleted");
    assert_eq!(
        err.trim(),
        "Warning: one is being deleted\nWarning: deletes are audited"
    );
    assert_eq!(server.calls_for("/delete-warning", "one"), 1);

    // A collection delete: the webhook is called per object, its (distinct) warnings come once each.
    let (ok, _, err) = kubectl(
        &b,
        &[
            "delete",
            "--raw",
            "/api/v1/namespaces/default/configmaps?labelSelector=batch%3Dyes",
        ],
    );
    assert!(ok, "{err}");
    let mut warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("Warning: ")).collect();
    warnings.sort_unstable();
    assert_eq!(
        warnings,
        [
            "Warning: deletes are audited",
            "Warning: three is being deleted",
            "Warning: two is being deleted"
        ],
        "{err}"
    );
}

/// A TokenRequest (`serviceaccounts/token`, what `kubectl create token` sends) is admitted as a create
/// of the service account's subresource: a validating webhook refuses a token for an audience it does
/// not trust with its own message, and its warning reaches the client of a token it allows.
#[test]
fn token_requests_are_admitted_as_creates_of_the_service_accounts_subresource() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        b,
        ..
    } = cluster;
    apply(
        &b,
        dir.path(),
        "webhooks.yaml",
        &server.one_webhook(
            "ValidatingWebhookConfiguration",
            "token",
            "/token",
            "[{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [serviceaccounts/token]}]",
        ),
    );
    // The cluster runs without the controller manager, so no `default` service account: one of its own.
    let (ok, _, err) = kubectl(&b, &["create", "serviceaccount", "robot"]);
    assert!(ok, "{err}");
    let (ok, _, err) = kubectl(&b, &["create", "token", "robot", "--audience", "untrusted"]);
    assert!(!ok, "the webhook refuses the token");
    assert_eq!(
        err.trim(),
        "error: failed to create token: admission webhook \"token.example.com\" denied the request: no tokens for untrusted audiences"
    );
    let (ok, out, err) = kubectl(&b, &["create", "token", "robot"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim().split('.').count(), 3, "a JWT: {out}");
    assert_eq!(err.trim(), "Warning: token request checked by the webhook");
    let reviews = server
        .calls
        .lock()
        .expect("calls")
        .get("/token")
        .cloned()
        .unwrap_or_default();
    assert_eq!(reviews.len(), 2, "one call per token request");
    assert_eq!(
        (
            &reviews[1]["subResource"],
            &reviews[1]["kind"],
            &reviews[1]["name"]
        ),
        (
            &json!("token"),
            &json!({"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}),
            &json!("robot")
        ),
        "{}",
        reviews[1]
    );
}

/// `kubectl exec` is admitted as upstream's connect handler admits it, before it connects: a validating
/// webhook registered for `CONNECT` on `pods/exec` is called with the `PodExecOptions` kubectl asked
/// for, its denial reaches kubectl with its code and message (for the websocket request kubectl sends
/// first and the SPDY one it falls back to, as with kube-apiserver), and an exec it allows gets the
/// answer of a cluster without kubelets, with the webhook's warning (which kubectl's streaming clients
/// do not print, its REST client does). Port-forward and the proxies are connections too; the webhook
/// is not called for them.
#[test]
fn kubectl_exec_is_admitted_as_a_connect_of_the_pods_exec_subresource() {
    let Some(cluster) = WebhookCluster::start() else {
        return;
    };
    let WebhookCluster {
        server,
        dir,
        _demo,
        b,
        ..
    } = cluster;
    apply(
        &b,
        dir.path(),
        "webhooks.yaml",
        &server.one_webhook(
            "ValidatingWebhookConfiguration",
            "exec",
            "/exec",
            "[{operations: [CONNECT], apiGroups: [\"\"], apiVersions: [v1], resources: [pods/exec]}]",
        ),
    );
    for name in ["prod-db", "web"] {
        let (ok, _, err) = kubectl(&b, &["run", name, "--image=busybox"]);
        assert!(ok, "{err}");
    }
    let mut transcript = Vec::new();
    let (ok, _, denied) = kubectl(&b, &["exec", "prod-db", "--", "cat", "/etc/secret"]);
    assert!(!ok, "the webhook refuses the exec");
    transcript.push(format!("$ kubectl exec prod-db -- cat /etc/secret\n{denied}"));
    assert_eq!(
        server.calls_for("/exec", "prod-db"),
        2,
        "called for the websocket request and for the SPDY one kubectl falls back to"
    );
    let (ok, _, allowed) = kubectl(&b, &["exec", "web", "-c", "web", "--", "ls"]);
    assert!(!ok, "there is no kubelet to exec in");
    transcript.push(format!("$ kubectl exec web -c web -- ls\n{allowed}"));
    // kubectl's streaming clients do not print warnings; its REST client does, for a plain GET.
    let raw = "/api/v1/namespaces/default/pods/web/exec?command=ls&stdin=true";
    let (ok, _, warned) = kubectl(&b, &["get", "--raw", raw]);
    assert!(!ok, "there is no kubelet to exec in");
    transcript.push(format!("$ kubectl get --raw '{raw}'\n{warned}"));
    insta::assert_snapshot!("exec_connect", transcript.join("\n"));

    let reviews = server
        .calls
        .lock()
        .expect("calls")
        .get("/exec")
        .cloned()
        .unwrap_or_default();
    let review = reviews
        .iter()
        .find(|r| r["name"] == "web" && r["object"]["container"] == "web")
        .expect("the webhook was called for kubectl exec web");
    insta::assert_json_snapshot!("exec_review_request", review, {
        ".uid" => "[uid]",
    });

    // The other connections are admitted too, but this webhook names only `pods/exec`.
    let calls = reviews.len();
    let (ok, _, err) = kubectl(
        &b,
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods/web/portforward?ports=80",
        ],
    );
    assert!(!ok);
    assert!(err.contains("pod web does not have a host assigned"), "{err}");
    let (ok, _, err) = kubectl(
        &b,
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods/web/proxy/healthz",
        ],
    );
    assert!(!ok);
    assert!(err.contains("address not allowed"), "{err}");
    assert_eq!(
        server.calls("/exec", "pods"),
        calls,
        "no call for port-forward or proxy"
    );
}
