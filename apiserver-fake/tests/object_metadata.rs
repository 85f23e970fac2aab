//! `ValidateObjectMeta` from outside: the built binary's demo cluster refuses, with upstream's 422
//! texts, what kubectl users put in `metadata` by mistake — a label value with a space, an annotation
//! key that is no qualified name, annotations over 256 KiB, two controllers among the owner
//! references, both `orphan` and `foregroundDeletion`, a finalizer added to an object being deleted —
//! on built-in kinds and on custom resources alike; and nothing it refused was stored.

mod support;

use support::demo::KubectlDemo;
use support::{kubectl, kubectl_eventually, kubectl_ok};

/// Runs kubectl, which must fail: its stderr, with the demo's directory redacted.
fn refused(demo: &KubectlDemo, args: &[&str]) -> String {
    let (succeeded, stdout, stderr) = kubectl(&demo.kubeconfig("b"), args);
    assert!(!succeeded, "kubectl {args:?} succeeded: {stdout}");
    stderr.replace(&*demo.dir.path().to_string_lossy(), "[dir]")
}

/// Writes `yaml` to `DIR/file` and runs `kubectl create -f` on it, which must fail: its stderr.
fn create_refused(demo: &KubectlDemo, file: &str, yaml: &str) -> String {
    let path = demo.dir.path().join(file);
    std::fs::write(&path, yaml).expect("write the manifest");
    refused(demo, &["create", "-f", &path.to_string_lossy()])
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
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
        x-kubernetes-preserve-unknown-fields: true
";

#[test]
fn invalid_metadata_is_refused_with_upstreams_messages() {
    let Some(demo) = KubectlDemo::start(&[]) else {
        return;
    };
    let b = demo.kubeconfig("b");
    let mut transcript = String::new();
    let mut record = |what: &str, stderr: String| transcript.push_str(&format!("# {what}\n{stderr}\n"));

    kubectl_ok(&b, &["create", "configmap", "settings", "--from-literal=k=v"]);
    record(
        "kubectl label with a space in the value",
        refused(&demo, &["label", "configmap", "settings", "app=my app"]),
    );
    record(
        "kubectl annotate with a key that is no qualified name",
        refused(&demo, &["annotate", "configmap", "settings", "a b=c"]),
    );
    record(
        "annotations over 256 KiB",
        create_refused(
            &demo,
            "big.yaml",
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  annotations:\n    note: {}\n",
                "x".repeat(256 * 1024)
            ),
        ),
    );
    record(
        "two controllers among the owner references",
        create_refused(
            &demo,
            "owners.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\n  ownerReferences:\n  \
             - {apiVersion: apps/v1, kind: ReplicaSet, name: a, uid: 11111111-1111-1111-1111-111111111111, controller: true}\n  \
             - {apiVersion: apps/v1, kind: Deployment, name: b, uid: 22222222-2222-2222-2222-222222222222, controller: true}\n",
        ),
    );
    record(
        "orphan and foregroundDeletion together",
        create_refused(
            &demo,
            "finalizers.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: both\n  finalizers: [orphan, foregroundDeletion]\n",
        ),
    );

    // A finalizer added while the object is being deleted.
    kubectl_ok(
        &b,
        &[
            "patch",
            "configmap",
            "settings",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
        ],
    );
    kubectl_ok(&b, &["delete", "configmap", "settings", "--wait=false"]);
    record(
        "a finalizer added to an object being deleted",
        refused(
            &demo,
            &[
                "patch",
                "configmap",
                "settings",
                "--type=json",
                "-p",
                r#"[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/more"}]"#,
            ],
        ),
    );
    // Removing the finalizer is allowed, and lets the delete finish.
    kubectl_ok(
        &b,
        &[
            "patch",
            "configmap",
            "settings",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );

    // A custom resource's metadata is checked as a built-in's.
    demo.apply(&b, "crd.yaml", CRD);
    kubectl_eventually(&b, &["get", "widgets"]);
    record(
        "a custom resource with a label value that is too long",
        create_refused(
            &demo,
            "widget.yaml",
            &format!(
                "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  labels: {{tier: {}}}\n",
                "t".repeat(64)
            ),
        ),
    );

    let (listed, out, err) = kubectl(&b, &["get", "configmaps,widgets", "-o", "name"]);
    assert!(listed, "{err}");
    assert_eq!(
        out, "",
        "nothing refused was stored, and the finalized ConfigMap is gone"
    );
    insta::assert_snapshot!("kubectl_invalid_metadata", transcript);
}
