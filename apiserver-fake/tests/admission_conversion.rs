//! Admission webhooks registered for another version than the request's, as an operator meets them: a
//! CRD whose v1 (`spec.cronSpec`) and v2 (`spec.schedule`) differ, converted by a webhook in this
//! test, and a mutating and a validating webhook registered for v1 only (`matchPolicy: Equivalent`).
//! A create or update through v2 reaches them as a proper v1 object (`request.kind` v1, `requestKind`
//! v2), the mutating webhook's patch, written against v1, lands in the stored object, and a conversion
//! that fails during admission is upstream's internal error. A ValidatingAdmissionPolicy matching v1
//! only judges the v1 object too. The mutating dispatcher's audit
//! annotations (`mutation.webhook…`, and `patch.webhook…` at level `Request`) are in the audit log.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};
use support::demo::KubectlDemo;
use support::https::HttpsServer;
use support::{kubectl, kubectl_eventually, kubectl_ok};

/// The requests each path received (path → `request` of the review).
type Calls = Arc<Mutex<BTreeMap<String, Vec<Value>>>>;

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: [\"/readyz*\", \"/healthz*\", \"/livez*\"]
- level: Metadata
  namespaces: [quiet]
- level: Request
";

/// A policy for CronTabs at v1 only, for the objects labelled `policy=yes`.
const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: cronspec}
spec:
  failurePolicy: Fail
  matchConstraints:
    objectSelector: {matchLabels: {policy: \"yes\"}}
    resourceRules: [{operations: [CREATE, UPDATE], apiGroups: [stable.example.com], apiVersions: [v1], resources: [crontabs]}]
  validations:
  - expression: \"has(object.spec.cronSpec) && object.spec.cronSpec != '@never' && request.kind.version == 'v1'\"
    message: a v1 cronSpec other than @never is required
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: cronspec}
spec:
  policyName: cronspec
  validationActions: [Deny]
";

/// v1 ↔ v2 of a CronTab: `spec.cronSpec` ↔ `spec.schedule`.
fn convert_object(mut object: Value, desired: &str) -> Value {
    let spec = object["spec"].as_object().cloned().unwrap_or_default();
    let renamed = spec
        .into_iter()
        .map(|(key, value)| match (desired, key.as_str()) {
            ("stable.example.com/v2", "cronSpec") => ("schedule".to_owned(), value),
            ("stable.example.com/v1", "schedule") => ("cronSpec".to_owned(), value),
            _ => (key, value),
        })
        .collect();
    object["spec"] = Value::Object(renamed);
    object["apiVersion"] = json!(desired);
    object
}

/// The webhooks by path: `/convert` converts (but refuses objects labelled `convert=refuse`),
/// `/mutate` patches a v1 object, `/validate` allows with a warning naming what it saw, `/allow`
/// allows.
fn answer(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    let uid = request["uid"].clone();
    if path == "/convert" {
        let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
        let objects = request["objects"].as_array().cloned().unwrap_or_default();
        if objects
            .iter()
            .any(|o| o["metadata"]["labels"]["convert"] == "refuse")
        {
            return json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": uid, "result": {"status": "Failure", "message": "this object does not convert"}}});
        }
        let converted: Vec<Value> = objects.into_iter().map(|o| convert_object(o, desired)).collect();
        return json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": converted}});
    }
    let response = match path {
        "/mutate" => {
            let ops = json!([
                {"op": "replace", "path": "/spec/cronSpec", "value": "*/5 * * * *"},
                {"op": "add", "path": "/metadata/labels/mutated-at", "value": "v1"},
            ]);
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
                "patch": data_encoding::BASE64.encode(ops.to_string().as_bytes())})
        }
        "/validate" => {
            let object = &request["object"];
            let warning = format!(
                "validated {} {} with cronSpec {}",
                object["apiVersion"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default(),
                object["spec"]["cronSpec"]
            );
            json!({"uid": uid, "allowed": true, "warnings": [warning]})
        }
        _ => json!({"uid": uid, "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

fn start_webhooks() -> (HttpsServer, Calls) {
    let calls = Calls::default();
    let recorded = calls.clone();
    let server = HttpsServer::start("webhooks.example.svc", move |path, body| {
        let calls = recorded.clone();
        async move {
            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            calls
                .lock()
                .expect("calls")
                .entry(path.clone())
                .or_default()
                .push(review["request"].clone());
            Bytes::from(answer(&path, &review).to_string())
        }
    });
    (server, calls)
}

fn crd(server: &HttpsServer) -> String {
    let (port, ca) = (server.port, &server.ca_bundle);
    let version = |name: &str, storage: bool, field: &str| {
        format!(
            "  - name: {name}
    served: true
    storage: {storage}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              {field}: {{type: string}}
"
        )
    };
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
      clientConfig: {{url: \"https://127.0.0.1:{port}/convert\", caBundle: {ca}}}
  versions:
{}{}",
        version("v1", true, "cronSpec"),
        version("v2", false, "schedule")
    )
}

/// A configuration of `kind` named `name` with one webhook calling `path` for CronTabs at v1 only,
/// matched through equivalent versions; `selector` is its `objectSelector`.
fn configuration(server: &HttpsServer, kind: &str, name: &str, path: &str, selector: &str) -> String {
    let (port, ca) = (server.port, &server.ca_bundle);
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata: {{name: {name}}}
webhooks:
- name: {name}.example.com
  clientConfig: {{url: \"https://127.0.0.1:{port}{path}\", caBundle: {ca}}}
  rules: [{{operations: [CREATE, UPDATE], apiGroups: [stable.example.com], apiVersions: [v1], resources: [crontabs]}}]
  matchPolicy: Equivalent
  objectSelector: {selector}
  sideEffects: None
  admissionReviewVersions: [v1]
---
"
    )
}

fn tab(name: &str, namespace: &str, labels: &str) -> String {
    format!(
        "apiVersion: stable.example.com/v2\nkind: CronTab\nmetadata: {{name: {name}, namespace: {namespace}, labels: {{{labels}}}}}\nspec: {{schedule: \"* * * * *\"}}\n"
    )
}

/// `kubectl create -f` of `yaml`, written to `DIR/file`, through server `a`.
fn kubectl_file(demo: &KubectlDemo, file: &str, yaml: &str) -> (bool, String, String) {
    let path = demo.dir.path().join(file);
    std::fs::write(&path, yaml).expect("manifest");
    kubectl(
        &demo.kubeconfig("a"),
        &["create", "-f", &path.display().to_string()],
    )
}

/// The first request `path` received about the object `name` with `operation`.
fn request_for(calls: &Calls, path: &str, name: &str, operation: &str) -> Value {
    calls.lock().expect("calls")[path]
        .iter()
        .find(|r| r["name"] == name && r["operation"] == operation)
        .cloned()
        .unwrap_or_else(|| panic!("{path} saw no {operation} of {name}"))
}

#[test]
fn webhooks_registered_for_v1_see_and_patch_a_v2_request_as_v1() {
    let (server, calls) = start_webhooks();
    let Some(demo) = KubectlDemo::with_config(|dir| {
        std::fs::write(dir.join("policy.yaml"), AUDIT_POLICY).expect("policy");
        format!(
            "servers:\n- name: a\n  version: \"1.36\"\n  flags: {{audit-policy-file: {}, audit-log-path: {}}}\nlb: none\n",
            dir.join("policy.yaml").display(),
            dir.join("audit.log").display()
        )
    }) else {
        return;
    };
    let a = demo.kubeconfig("a");
    demo.apply(&a, "crd.yaml", &crd(&server));
    kubectl_eventually(&a, &["get", "crontabs.v2.stable.example.com"]);
    let mutate = "{matchExpressions: [{key: skip-mutation, operator: DoesNotExist}]}";
    let configurations = [
        configuration(
            &server,
            "MutatingWebhookConfiguration",
            "a-noop",
            "/allow",
            mutate,
        ),
        configuration(
            &server,
            "MutatingWebhookConfiguration",
            "crontab-defaults",
            "/mutate",
            mutate,
        ),
        configuration(
            &server,
            "ValidatingWebhookConfiguration",
            "crontab-check",
            "/validate",
            "{}",
        ),
    ];
    demo.apply(&a, "webhooks.yaml", &configurations.concat());
    kubectl_ok(&a, &["create", "namespace", "quiet"]);

    // Created at v2: the webhooks see v1; the v1 patch lands, read back at v2.
    let tab_file = demo.dir.path().join("tab.yaml");
    std::fs::write(&tab_file, tab("tab", "default", "app: cron")).expect("tab");
    let tab_file = tab_file.display().to_string();
    let (ok, out, warnings) = kubectl(&a, &["create", "-f", &tab_file, "-o", "json"]);
    assert!(ok, "{warnings}");
    insta::assert_snapshot!("create_at_v2_warnings", warnings);
    let created: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(created["apiVersion"], "stable.example.com/v2");
    assert_eq!(created["spec"], json!({"schedule": "*/5 * * * *"}));
    assert_eq!(
        created["metadata"]["labels"],
        json!({"app": "cron", "mutated-at": "v1"})
    );
    let mutating = request_for(&calls, "/mutate", "tab", "CREATE");
    assert_eq!(mutating["object"]["apiVersion"], "stable.example.com/v1");
    assert_eq!(mutating["object"]["spec"], json!({"cronSpec": "* * * * *"}));
    let validating = request_for(&calls, "/validate", "tab", "CREATE");
    insta::assert_json_snapshot!("validating_request_of_a_v2_create", validating, {
        ".uid" => "[uid]",
        ".object.metadata.uid" => "[uid]",
        ".object.metadata.creationTimestamp" => "[timestamp]",
        ".object.metadata.managedFields[].time" => "[timestamp]",
    });

    // Updated at v2: the old object is converted too.
    let (ok, _, err) = kubectl(
        &a,
        &["label", "crontabs.v2.stable.example.com", "tab", "tier=web"],
    );
    assert!(ok, "{err}");
    let update = request_for(&calls, "/validate", "tab", "UPDATE");
    assert_eq!(
        update["kind"],
        json!({"group": "stable.example.com", "version": "v1", "kind": "CronTab"})
    );
    assert_eq!(update["requestKind"]["version"], "v2");
    assert_eq!(update["oldObject"]["apiVersion"], "stable.example.com/v1");
    assert_eq!(update["oldObject"]["spec"], json!({"cronSpec": "*/5 * * * *"}));
    assert_eq!(update["object"]["metadata"]["labels"]["tier"], "web");

    // A ValidatingAdmissionPolicy matching v1 only judges a v2 create by its v1 object.
    demo.apply(&a, "policy.yaml", POLICY);
    let judged = "skip-mutation: \"yes\", policy: \"yes\"";
    let (ok, _, err) = kubectl_file(&demo, "daily.yaml", &tab("daily", "default", judged));
    assert!(ok, "the policy sees v1's cronSpec: {err}");
    let never = tab("never", "default", judged).replace("* * * * *", "@never");
    let (ok, _, refused_by_policy) = kubectl_file(&demo, "never.yaml", &never);
    assert!(!ok);
    let refused = tab("refused", "default", &format!("convert: refuse, {judged}"));
    let (ok, _, unconvertible_for_policy) = kubectl_file(&demo, "refused-policy.yaml", &refused);
    assert!(!ok);

    // A conversion that fails during admission: the mutating dispatcher's internal error (wrapped
    // twice, as upstream's accessor and dispatcher each wrap it), the validating one's (once).
    let (ok, _, refused_by_mutating) = kubectl_file(
        &demo,
        "refused.yaml",
        &tab("refused", "default", "convert: refuse"),
    );
    assert!(!ok);
    let (ok, _, refused_by_validating) = kubectl_file(
        &demo,
        "refused-validating.yaml",
        &tab("refused", "default", "convert: refuse, skip-mutation: \"yes\""),
    );
    assert!(!ok);
    let dir = demo.dir.path().display().to_string();
    insta::assert_snapshot!(
        "conversion_refused_during_admission",
        format!(
            "mutating:\n{refused_by_mutating}\nvalidating:\n{refused_by_validating}\npolicy:\n{unconvertible_for_policy}"
        )
        .replace(&dir, "[dir]")
    );

    insta::assert_snapshot!(
        "policy_refusal_of_a_v2_create",
        refused_by_policy.replace(&dir, "[dir]")
    );

    // At level Metadata the patch is not in the audit log; the mutation is.
    let (ok, _, err) = kubectl_file(&demo, "quiet.yaml", &tab("tab", "quiet", "app: cron"));
    assert!(ok, "{err}");
    let KubectlDemo {
        demo: cluster, dir, ..
    } = demo;
    drop(cluster);
    let log = dir.path().join("audit.log");
    let events: Vec<Value> = std::fs::read_to_string(&log)
        .expect("the audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect();
    let annotations = |namespace: &str| {
        events
            .iter()
            .find(|e| {
                e["verb"] == "create"
                    && e["objectRef"]["resource"] == "crontabs"
                    && e["objectRef"]["namespace"] == namespace
                    && e["responseStatus"]["code"] == 201
            })
            .map(|e| e["annotations"].clone())
            .unwrap_or_else(|| panic!("the create in {namespace}: {events:#?}"))
    };
    insta::assert_json_snapshot!("audit_annotations_at_level_request", annotations("default"));
    insta::assert_json_snapshot!("audit_annotations_at_level_metadata", annotations("quiet"));
}
