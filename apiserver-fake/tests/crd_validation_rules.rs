//! CRDs with structural `default`s and `x-kubernetes-validations` CEL rules, driven from outside: the
//! built binary's `cluster` demo and `kubectl` applying `tests/fixtures/crd_rules/*.yaml`.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::demo::{Demo, KubectlDemo, server};
use support::{kubectl, kubectl_available};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/crd_rules")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Polls `kubectl get <resource>` until the API serves it (discovery follows the CRD).
fn wait_until_served(kubeconfig: &Path, resource: &str) {
    let mut last = String::new();
    let what = format!("{resource} to be served");
    kube_mvp_testing::eventually_blocking(&what, Duration::from_secs(30), Duration::from_millis(50), || {
        let (served, _, err) = kubectl(kubeconfig, &["get", resource]);
        last = err;
        served.then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}: {last}"));
}

#[test]
fn crd_defaults_and_validation_rules_with_kubectl() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--no-controller-manager"]);
    let manifest = demo.wait_for_manifest(dir.path());
    let a = PathBuf::from(server(&manifest, "a")["kubeconfig"].as_str().expect("kubeconfig"));
    let mut transcript = Vec::new();

    // A rule that does not compile: the CRD is refused.
    let (created, _, refused) = kubectl(&a, &["apply", "-f", &fixture("broken.yaml")]);
    assert!(!created, "a CRD whose rule does not compile is refused");
    transcript.push(format!("$ kubectl apply -f broken.yaml\n{refused}"));

    let (created, out, err) = kubectl(&a, &["apply", "-f", &fixture("widgets.yaml")]);
    assert!(created, "{err}");
    assert_eq!(
        out,
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created\n"
    );
    wait_until_served(&a, "widgets.v1.example.com");

    // Passing, and defaulted on create (nested `default`s, list items included).
    let (created, out, err) = kubectl(&a, &["apply", "-f", &fixture("good.yaml")]);
    assert!(created, "{err}");
    assert_eq!(out, "widget.example.com/good created\n");
    let (_, spec, _) = kubectl(&a, &["get", "widget", "good", "-o", "jsonpath={.spec}"]);
    let spec: serde_json::Value = serde_json::from_str(&spec).expect("spec JSON");
    assert_eq!(
        spec,
        serde_json::json!({"replicas": 3, "minReplicas": 0, "mode": "fast",
                           "ports": [{"port": 80, "protocol": "TCP"}]})
    );

    // Every failing rule, at its node, with its message, messageExpression, reason and fieldPath.
    let (created, _, invalid) = kubectl(&a, &["apply", "-f", &fixture("bad.yaml")]);
    assert!(!created, "an object breaking the rules is refused");
    transcript.push(format!("$ kubectl apply -f bad.yaml\n{invalid}"));

    // A transition rule holds on update: `mode` cannot change; other changes can.
    let (patched, _, immutable) = kubectl(
        &a,
        &[
            "patch",
            "widget",
            "good",
            "--type=merge",
            "-p",
            r#"{"spec":{"mode":"slow"}}"#,
        ],
    );
    assert!(!patched, "a transition rule refuses the change");
    transcript.push(format!(
        "$ kubectl patch widget good --type=merge -p '{{\"spec\":{{\"mode\":\"slow\"}}}}'\n{immutable}"
    ));
    let (patched, out, err) = kubectl(
        &a,
        &[
            "patch",
            "widget",
            "good",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":5}}"#,
        ],
    );
    assert!(patched, "{err}");
    assert_eq!(out, "widget.example.com/good patched\n");

    // Written through v1beta1 (whose schema has no defaults), read back with the defaults of the
    // storage version v1, as upstream's storage decoder applies them.
    let beta = dir.path().join("beta.yaml");
    std::fs::write(
        &beta,
        "apiVersion: example.com/v1beta1\nkind: Widget\nmetadata: {name: beta}\n",
    )
    .expect("write");
    let (created, _, warned) = kubectl(&a, &["create", "-f", &beta.to_string_lossy()]);
    assert!(created, "{warned}");
    // v1beta1 is deprecated: every request to it carries the warning.
    transcript.push(format!(
        "$ kubectl create -f beta.yaml  # apiVersion: example.com/v1beta1\n{warned}"
    ));
    let (_, spec, _) = kubectl(
        &a,
        &[
            "get",
            "widgets.v1beta1.example.com",
            "beta",
            "-o",
            "jsonpath={.spec}",
        ],
    );
    assert_eq!(spec, r#"{"minReplicas":0,"mode":"fast","replicas":1}"#);

    insta::assert_snapshot!("crd_rules_kubectl", transcript.join("\n"));
}

/// A rule over Kubernetes' named formats (`format.dns1123Label().validate(…)`, an optional list of
/// upstream's messages), its `messageExpression` the first of them: an invalid name is refused with it.
/// (Joining the list, or adding to it, would be refused with the CRD: the list has no size bound, so
/// upstream's estimate of such a `messageExpression` is more than 100 times its limit.)
#[test]
fn crd_rule_with_named_formats_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(
        &a,
        "gizmos.yaml",
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
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
              name: {type: string}
              id: {type: string}
            x-kubernetes-validations:
            - rule: "!format.dns1123Label().validate(self.name).hasValue()"
              messageExpression: "format.dns1123Label().validate(self.name).value()[0]"
            - rule: "!has(self.id) || !format.named('uuid').value().validate(self.id).hasValue()"
              messageExpression: "format.uuid().validate(self.id).value()[0]"
"#,
    );
    wait_until_served(&a, "gizmos.v1.example.com");

    let out = cluster.apply(
        &a,
        "good.yaml",
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: good}\n\
         spec: {name: my-name, id: 123e4567-e89b-12d3-a456-426614174000}\n",
    );
    assert_eq!(out, "gizmo.example.com/good created\n");

    let bad = cluster.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: bad}\nspec: {name: My_Name, id: nope}\n",
    )
    .expect("write");
    let (created, _, invalid) = kubectl(&a, &["apply", "-f", &bad.to_string_lossy()]);
    assert!(!created, "an invalid name is refused");
    insta::assert_snapshot!(
        "crd_rules_format_kubectl",
        format!("$ kubectl apply -f bad.yaml  # spec: {{name: My_Name, id: nope}}\n{invalid}")
    );
}

/// A CRD whose `items` list declares no `maxItems` and whose strings no `maxLength`.
fn pairwise_crd(bounds: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: pairs.example.com}}
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: pairs, singular: pair, kind: Pair}}
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
              items:
                type: array{bounds}
                x-kubernetes-validations:
                - rule: "self.all(x, self.all(y, x != y))"
"#
    )
}

/// Upstream's static cost estimate when a CRD is written: a rule comparing every item of an unbounded
/// list of unbounded strings with every other is refused (the rule over the per-expression limit, and
/// over the limit of the whole schema), and accepted once `maxItems` and `maxLength` bound it; a
/// `messageExpression` of unknown size and a rule 94.4 times over the limit are refused with the
/// factors upstream prints.
#[test]
fn crd_rule_costs_are_estimated_when_the_definition_is_written_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    let refused = |file: &str, yaml: &str| {
        let path = cluster.dir.path().join(file);
        std::fs::write(&path, yaml).expect("write");
        let (ok, _, err) = kubectl(&a, &["apply", "-f", &path.to_string_lossy()]);
        assert!(!ok, "{file} is refused");
        format!("$ kubectl apply -f {file}\n{err}")
    };
    let unbounded = refused(
        "unbounded.yaml",
        &pairwise_crd("\n                items: {type: string}"),
    );
    let out = cluster.apply(
        &a,
        "bounded.yaml",
        &pairwise_crd(
            "\n                maxItems: 100\n                items: {type: string, maxLength: 64}",
        ),
    );
    assert_eq!(
        out,
        "customresourcedefinition.apiextensions.k8s.io/pairs.example.com created\n"
    );
    wait_until_served(&a, "pairs.v1.example.com");

    let factors = refused(
        "factors.yaml",
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: attempts.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: attempts, singular: attempt, kind: Attempt}
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
              config:
                type: object
                properties:
                  attempts: {type: integer}
                x-kubernetes-validations:
                - rule: "self.attempts >= 0"
                  messageExpression: "'invalid attempts: ' + string(self.attempts)"
              names:
                type: array
                maxItems: 1000
                items: {type: string}
                x-kubernetes-validations:
                - rule: "self.all(x, x.matches('^[a-z0-9]+$'))"
"#,
    );
    insta::assert_snapshot!("crd_rule_costs_kubectl", format!("{unbounded}\n{factors}"));
}
