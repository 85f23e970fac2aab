//! CRD validation ratcheting (`CRDValidationRatcheting`, KEP-4008: on by default from 1.30), driven
//! from outside with kubectl against a cluster of a 1.33 server (a), a 1.29 server (b) and a 1.29 server
//! with the alpha gate on (c) sharing one store: a CRD is tightened (a `maxLength`, an `enum`, a CEL rule) after an object was stored; an
//! update of an unrelated field (`kubectl label`) goes through a (the CEL rule's failure on the
//! unchanged `spec` as a warning) and is refused by b with the schema's errors; changing the offending
//! field itself, or creating such an object, is refused by both.

mod support;

use support::demo::KubectlDemo;
use support::{kubectl, kubectl_eventually};

const LOOSE: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
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
              owner: {type: string}
              mode: {type: string}
              replicas: {type: integer}
"#;

const TIGHT: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
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
            x-kubernetes-validations:
            - {rule: "self.replicas <= 5", message: "at most 5 replicas"}
            properties:
              owner: {type: string, maxLength: 8}
              mode: {type: string, enum: [fast, slow]}
              replicas: {type: integer}
"#;

#[test]
fn tightened_crd_ratchets_unchanged_fields_from_1_30_on() {
    let Some(cluster) = KubectlDemo::with_config(|_| {
        "servers:\n- name: a\n  version: \"1.33\"\n- name: b\n  version: \"1.29\"\n\
         - name: c\n  version: \"1.29\"\n  flags: {feature-gates: CRDValidationRatcheting=true}\nlb: none\n"
            .to_owned()
    }) else {
        return;
    };
    let (a, b, c) = (
        cluster.kubeconfig("a"),
        cluster.kubeconfig("b"),
        cluster.kubeconfig("c"),
    );
    cluster.apply(&a, "loose.yaml", LOOSE);
    kubectl_eventually(&a, &["get", "widgets.v1.example.com"]);
    kubectl_eventually(&b, &["get", "widgets.v1.example.com"]);
    kubectl_eventually(&c, &["get", "widgets.v1.example.com"]);
    let stored = cluster.apply(
        &a,
        "legacy.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: legacy}\n\
         spec: {owner: platform-team, mode: turbo, replicas: 9}\n",
    );
    assert_eq!(stored, "widget.example.com/legacy created\n");
    cluster.apply(&a, "tight.yaml", TIGHT);

    let mut transcript = Vec::new();
    let dir = cluster.dir.path().display().to_string();
    let mut run = |server: &str, kubeconfig: &std::path::Path, args: &[&str]| {
        let (ok, out, err) = kubectl(kubeconfig, args);
        let shown = args.join(" ").replace(&format!("{dir}/"), "");
        transcript.push(format!("$ kubectl {shown}  # server {server}\n{out}{err}"));
        ok
    };
    // An unrelated change: 1.29 validates the update as a create, the schema errors blocking the rule.
    assert!(!run(
        "b (1.29)",
        &b,
        &["label", "widget", "legacy", "team=payments"]
    ));
    // 1.33 ratchets what the update left unchanged; the CEL rule's failure is a warning.
    assert!(run(
        "a (1.33)",
        &a,
        &["label", "widget", "legacy", "team=payments"]
    ));
    // 1.29 with the alpha gate switched on (`--feature-gates=CRDValidationRatcheting=true`) ratchets too.
    assert!(run(
        "c (1.29, gate on)",
        &c,
        &["label", "widget", "legacy", "tier=gold"]
    ));
    // Changing the offending field itself is refused on every minor.
    let longer = r#"{"spec":{"owner":"platform-teams"}}"#;
    assert!(!run(
        "a (1.33)",
        &a,
        &["patch", "widget", "legacy", "--type=merge", "-p", longer]
    ));
    assert!(!run(
        "b (1.29)",
        &b,
        &["patch", "widget", "legacy", "--type=merge", "-p", longer]
    ));
    // Fixing `mode` changes `spec`, so the rule on `spec` is judged again and refuses alone (`owner`,
    // unchanged, still ratchets).
    let fixed = r#"{"spec":{"mode":"fast"}}"#;
    assert!(!run(
        "a (1.33)",
        &a,
        &["patch", "widget", "legacy", "--type=merge", "-p", fixed]
    ));
    // A create has nothing to ratchet against.
    let path = cluster.dir.path().join("new.yaml");
    std::fs::write(
        &path,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: fresh}\n\
         spec: {owner: platform-team, mode: fast, replicas: 1}\n",
    )
    .expect("write");
    assert!(!run("a (1.33)", &a, &["apply", "-f", &path.to_string_lossy()]));

    let labels = support::kubectl_ok(
        &a,
        &["get", "widget", "legacy", "-o", "jsonpath={.metadata.labels}"],
    );
    assert_eq!(labels, r#"{"team":"payments","tier":"gold"}"#);
    insta::assert_snapshot!("crd_ratcheting_kubectl", transcript.join("\n"));
}
