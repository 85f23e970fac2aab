//! `kubectl scale` of a custom resource whose CRD declares `subresources.scale`: the new replicas are
//! validated as an update of the custom resource (its schema's `maximum`, its `x-kubernetes-validations`),
//! refused with the custom resource's 422 as upstream's `ScaleREST.Update`, and the `Scale`'s own check
//! of negative replicas.

mod support;

use std::path::Path;
use std::time::Duration;

use support::demo::KubectlDemo;
use support::kubectl;

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

const WIDGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
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
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer, maximum: 10}
              even: {type: boolean}
            x-kubernetes-validations:
            - rule: "!has(self.even) || !self.even || self.replicas % 2 == 0"
              message: replicas must be even
          status:
            type: object
            properties:
              replicas: {type: integer}
"#;

/// A scale within the schema is written; one over its `maximum`, one breaking a rule and a negative
/// one are refused with upstream's texts, and the stored replicas stay.
#[test]
fn scale_validates_the_custom_resource_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "widgets.yaml", WIDGETS);
    wait_until_served(&a, "widgets.v1.example.com");
    cluster.apply(
        &a,
        "w.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 1}\n\
         ---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: e}\nspec: {replicas: 2, even: true}\n",
    );
    let mut transcript = Vec::new();
    let mut run = |args: &[&str]| {
        let (_, out, err) = kubectl(&a, args);
        transcript.push(format!("$ kubectl {}\n{out}{err}", args.join(" ")));
    };
    run(&["scale", "widget", "w", "--replicas=5"]);
    run(&["scale", "widget", "w", "--replicas=20"]);
    run(&["scale", "widget", "e", "--replicas=3"]);
    // kubectl refuses a negative count itself; a patch of the subresource reaches the server.
    run(&["scale", "widget", "w", "--replicas=-1"]);
    run(&[
        "patch",
        "widget",
        "w",
        "--subresource=scale",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":-1}}"#,
    ]);
    run(&[
        "patch",
        "widget",
        "w",
        "--subresource=scale",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":11}}"#,
    ]);
    run(&[
        "get",
        "widgets",
        "-o",
        "custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas",
    ]);
    let transcript = transcript.join("\n");
    assert!(
        transcript.contains(
            r#"The Widget "w" is invalid: spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10"#
        ),
        "{transcript}"
    );
    assert!(transcript.contains("e      2\nw      5\n"), "{transcript}");
    insta::assert_snapshot!("custom_resource_scale_kubectl", transcript);
}
