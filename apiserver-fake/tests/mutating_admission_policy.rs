//! MutatingAdmissionPolicies and their bindings, driven from outside: the built binary's `cluster` demo
//! (server `a` is 1.36, where `admissionregistration.k8s.io/v1` serves them by default) and `kubectl`
//! applying policies, then creating ConfigMaps, Secrets and Deployments and reading what was stored.

mod support;

use std::path::Path;

use serde_json::Value;
use support::admission_policy::{EVERY_PAIR, case_config_map, every_pair_conditions, policy_on_case};
use support::demo::{KubectlDemo, server};
use support::kubectl;

/// Policies on ConfigMaps: an `ApplyConfiguration` with a variable and a match condition, a `JSONPatch`,
/// and a pair showing `reinvocationPolicy: IfNeeded` (`a-copy-team` runs first, `b-set-team` then sets
/// the annotation it copies, so it is run again). On Secrets, a `JSONPatch` that does not apply under
/// `failurePolicy: Fail` and one under `Ignore`; on Deployments, an apply configuration setting the
/// atomic `spec.selector`. `from-params` takes an annotation's value from its binding's parameter.
const POLICIES: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: labels}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - {name: app, expression: "object.metadata.name.startsWith('app-')"}
  variables:
  - {name: owner, expression: "'team-' + object.metadata.name.substring(4)"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"owner": variables.owner}}, data: {"added": "by-policy"}}
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: labels}
spec: {policyName: labels}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: annotate}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        has(object.metadata.annotations) ?
        [JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("example.com/seen"), value: "yes"}] :
        [JSONPatch{op: "add", path: "/metadata/annotations", value: {"example.com/seen": "yes"}}]
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: annotate}
spec: {policyName: annotate}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: a-copy-team}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        has(object.metadata.annotations) && "team" in object.metadata.annotations ?
        Object{metadata: Object.metadata{labels: {"team": object.metadata.annotations["team"]}}} : Object{}
  reinvocationPolicy: IfNeeded
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: a-copy-team}
spec: {policyName: a-copy-team}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: b-set-team}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{annotations: {"team": "web"}}}'
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: b-set-team}
spec: {policyName: b-set-team}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: from-params}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - {name: web, expression: "object.metadata.name == 'app-web'"}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/metadata/annotations/tier", value: params.data.tier}]'
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: from-params}
spec:
  policyName: from-params
  paramRef: {name: defaults, namespace: default, parameterNotFoundAction: Allow}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: broken-fail}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  mutations:
  - patchType: JSONPatch
    jsonPatch: {expression: '[JSONPatch{op: "remove", path: "/spec/missing"}]'}
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: broken-fail}
spec: {policyName: broken-fail}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: broken-ignore}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [serviceaccounts]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: 'Object{metadata: Object.metadata{labels: {"n": 1 / 0}}}'}
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: broken-ignore}
spec: {policyName: broken-ignore}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: atomic-selector}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{spec: Object.spec{selector: Object.spec.selector{matchLabels: {"app": "x"}}}}'
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: atomic-selector}
spec: {policyName: atomic-selector}
"#;

fn json_of(kubeconfig: &Path, args: &[&str]) -> Value {
    let (found, out, err) = kubectl(kubeconfig, args);
    assert!(found, "{err}");
    serde_json::from_str(&out).expect("kubectl -o json prints JSON")
}

#[test]
fn mutating_admission_policies_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    let out = cluster.apply(&a, "policies.yaml", POLICIES);
    assert_eq!(out.lines().count(), 16, "{out}");
    // The parameter of `from-params` (no parameter of its own when it is created: `Allow`).
    let (created, _, err) = kubectl(
        &a,
        &["create", "configmap", "defaults", "--from-literal=tier=frontend"],
    );
    assert!(created, "{err}");

    // Matched by every ConfigMap policy: the apply configuration's label and data, the JSON patch's
    // annotation, the team label `a-copy-team` set when it was invoked again after `b-set-team`.
    let (created, _, err) = kubectl(&a, &["create", "configmap", "app-web", "--from-literal=k=v"]);
    assert!(created, "{err}");
    let stored = json_of(&a, &["get", "configmap", "app-web", "-o", "json"]);
    assert_eq!(
        stored["metadata"]["labels"],
        serde_json::json!({"owner": "team-web", "team": "web"}),
        "{stored}"
    );
    assert_eq!(
        stored["metadata"]["annotations"],
        serde_json::json!({"example.com/seen": "yes", "team": "web", "tier": "frontend"}),
        "{stored}"
    );
    assert_eq!(
        stored["data"],
        serde_json::json!({"added": "by-policy", "k": "v"})
    );

    // The match condition does not hold: no `owner` label, the other policies still apply.
    let (created, _, err) = kubectl(&a, &["create", "configmap", "other", "--from-literal=k=v"]);
    assert!(created, "{err}");
    let stored = json_of(&a, &["get", "configmap", "other", "-o", "json"]);
    assert_eq!(
        stored["metadata"]["labels"],
        serde_json::json!({"team": "web"}),
        "{stored}"
    );
    assert_eq!(stored["data"], serde_json::json!({"k": "v"}));

    let mut transcript = Vec::new();
    // A JSON patch that does not apply, under failurePolicy Fail: refused, nothing written.
    let (created, _, refused) = kubectl(&a, &["create", "secret", "generic", "s", "--from-literal=a=b"]);
    assert!(!created, "the broken policy fails closed");
    transcript.push(format!(
        "$ kubectl create secret generic s --from-literal=a=b\n{refused}"
    ));
    let (found, _, _) = kubectl(&a, &["get", "secret", "s"]);
    assert!(!found, "nothing was written");
    // The Status body, as curl gets it.
    let (url, dir) = (
        server(&cluster.manifest, "a")["url"].as_str().expect("url"),
        &cluster.dir,
    );
    let output = std::process::Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}", "--cacert"])
        .arg(dir.path().join("ca.crt"))
        .arg("--cert")
        .arg(dir.path().join("admin.crt"))
        .arg("--key")
        .arg(dir.path().join("admin.key"))
        .args(["-H", "Content-Type: application/json", "--data"])
        .arg(r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#)
        .arg(format!("{url}/api/v1/namespaces/default/secrets"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let (body, code) = text.rsplit_once('\n').expect("body and code");
    assert_eq!(code, "403", "{body}");
    let status: Value = serde_json::from_str(body).expect("a Status body");
    insta::assert_json_snapshot!("mutating_admission_policy_status", status);

    // An expression that fails under failurePolicy Ignore: admitted unchanged.
    let (created, _, err) = kubectl(&a, &["create", "serviceaccount", "robot"]);
    assert!(created, "{err}");
    let stored = json_of(&a, &["get", "serviceaccount", "robot", "-o", "json"]);
    assert!(stored["metadata"].get("labels").is_none(), "{stored}");

    // An apply configuration setting an atomic struct.
    let (created, _, refused) = kubectl(&a, &["create", "deployment", "web", "--image=nginx"]);
    assert!(!created, "an atomic struct may not be mutated");
    transcript.push(format!(
        "$ kubectl create deployment web --image=nginx\n{refused}"
    ));

    insta::assert_snapshot!("mutating_admission_policy_kubectl", transcript.join("\n"));
}

/// A policy that labels every ConfigMap it admits.
const LABEL_ALL: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label-all}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: 'Object{metadata: Object.metadata{labels: {"mutated": "true"}}}'}
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label-all}
spec: {policyName: label-all}
"#;

/// The `upgrade` preset, a 1.35 → 1.36 rollout caught in the middle: `b` (1.35, where the policies' API
/// is not served and upstream's plugin is off with its feature gate) has the policy created through the
/// Mixed Version Proxy on `a`, and admits ConfigMaps unmutated; `a` mutates them.
#[test]
fn only_servers_that_serve_the_api_run_mutating_policies() {
    let Some(cluster) = KubectlDemo::start(&["--preset", "upgrade"]) else {
        return;
    };
    let (a, b) = (cluster.kubeconfig("a"), cluster.kubeconfig("b"));
    // Through b, which does not serve the API: the proxy forwards to a.
    cluster.apply(&b, "policy.yaml", LABEL_ALL);
    let (created, _, err) = kubectl(&b, &["create", "configmap", "via-b"]);
    assert!(created, "{err}");
    let (created, _, err) = kubectl(&a, &["create", "configmap", "via-a"]);
    assert!(created, "{err}");
    let labels =
        |name: &str| json_of(&a, &["get", "configmap", name, "-o", "json"])["metadata"]["labels"].clone();
    assert_eq!(labels("via-a"), serde_json::json!({"mutated": "true"}));
    assert_eq!(labels("via-b"), Value::Null, "b runs no mutating policies");
}

/// A policy labelling ConfigMaps with the requesting user (`request.userInfo`) and their namespace's
/// `env` (`namespaceObject`), bound only to namespaces labelled `env: prod` and, by its own
/// `excludeResourceRules`, not to the one named `untouched`.
const SCOPED: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: prod, labels: {env: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: dev, labels: {env: dev}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: owner}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"created-by": request.userInfo.username,
        "env": namespaceObject.metadata.labels["env"]}}}
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: owner-prod}
spec:
  policyName: owner
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
    excludeResourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps], resourceNames: [untouched]}
"#;

#[test]
fn binding_match_resources_scope_a_mutating_policy() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "policies.yaml", SCOPED);
    let labels = |namespace: &str, name: &str| {
        let (created, _, err) = kubectl(&a, &["create", "configmap", name, "-n", namespace]);
        assert!(created, "{err}");
        json_of(&a, &["get", "configmap", name, "-n", namespace, "-o", "json"])["metadata"]["labels"].clone()
    };
    assert_eq!(
        labels("prod", "settings"),
        serde_json::json!({"created-by": "admin", "env": "prod"})
    );
    assert_eq!(labels("dev", "settings"), Value::Null, "dev is not selected");
    assert_eq!(
        labels("prod", "untouched"),
        Value::Null,
        "excluded by the binding"
    );
}

/// A `MutatingAdmissionPolicy` [on the ConfigMaps labelled `case: <name>`](policy_on_case), with a
/// `JSONPatch` mutation `expression`, and its binding.
fn costly_mutating_policy(name: &str, failure_policy: &str, conditions: &str, expression: &str) -> String {
    let spec = format!(
        "  mutations:\n  - patchType: JSONPatch\n    jsonPatch: {{expression: \"{expression}\"}}\n  reinvocationPolicy: Never\n"
    );
    policy_on_case(
        "MutatingAdmissionPolicy",
        name,
        failure_policy,
        conditions,
        &spec,
        "",
    )
}

/// Upstream's runtime cost limits (issue 19) for mutations: over a ConfigMap of 1,000 keys, a mutation
/// comparing every key with every other is over the per-call limit, three such match conditions spend
/// the conditions' budget; `failurePolicy: Fail` refuses with upstream's texts, `Ignore` admits the
/// ConfigMap unmutated; ten keys cost little, and the mutation applies.
#[test]
fn cost_limits_of_mutating_policies() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let (a, dir) = (cluster.kubeconfig("a"), &cluster.dir);
    let nested = EVERY_PAIR;
    let mutation =
        format!("{nested} ? [JSONPatch{{op: 'add', path: '/metadata/labels/checked', value: 'yes'}}] : []");
    let conditions = every_pair_conditions();
    let policies = [
        costly_mutating_policy("call-limit", "Fail", "[]", &mutation),
        costly_mutating_policy("call-limit-ignored", "Ignore", "[]", &mutation),
        costly_mutating_policy("conditions", "Fail", &conditions, &mutation),
        costly_mutating_policy("conditions-ignored", "Ignore", &conditions, &mutation),
        costly_mutating_policy("small", "Fail", "[]", &mutation),
    ]
    .concat();
    cluster.apply(&a, "policies.yaml", &policies);
    let mut transcript = Vec::new();
    for (name, keys, admitted) in [
        ("call-limit", 1_000, false),
        ("call-limit-ignored", 1_000, true),
        ("conditions", 1_000, false),
        ("conditions-ignored", 1_000, true),
        ("small", 10, true),
    ] {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, case_config_map(name, keys)).expect("configmap");
        let (created, _, err) = support::kubectl(&a, &["create", "-f", &file.to_string_lossy()]);
        assert_eq!(created, admitted, "{name}: {err}");
        if admitted {
            let checked = support::kubectl_ok(
                &a,
                &[
                    "get",
                    "configmap",
                    name,
                    "-o",
                    "jsonpath={.metadata.labels.checked}",
                ],
            );
            assert_eq!(checked, if name == "small" { "yes" } else { "" }, "{name}");
        } else {
            transcript.push(format!(
                "$ kubectl create -f {name}.yaml\n{}",
                err.replace(&dir.path().display().to_string(), "[dir]")
            ));
        }
    }
    insta::assert_snapshot!("mutating_admission_policy_cost_limits", transcript.join("\n"));
}
