//! A CustomResourceDefinition is validated as upstream's `ValidateCustomResourceDefinition` validates it:
//! the broken CRDs users write are refused with kube-apiserver's 422 texts, driven from outside with
//! `kubectl apply` against the built binary.

mod support;

use support::demo::KubectlDemo;
use support::kubectl;

/// A v1 CRD of `widgets.example.com` whose `spec` is `spec_yaml` (indented for `spec:`).
fn crd(name: &str, spec_yaml: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\nspec:\n{spec_yaml}"
    )
}

const NAMES: &str = "  group: example.com\n  scope: Namespaced\n  names:\n    plural: widgets\n    singular: widget\n    kind: Widget\n";

const SCHEMA: &str = "    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              replicas:\n                type: integer\n";

#[test]
fn broken_definitions_users_write_are_refused_with_upstreams_texts() {
    let Some(demo) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = demo.kubeconfig("a");
    let v1 = format!("  versions:\n  - name: v1\n    served: true\n    storage: true\n{SCHEMA}");
    let cases = [
        (
            "wrong-name.yaml",
            crd("widget.example.com", &format!("{NAMES}{v1}")),
        ),
        (
            "group-without-dot.yaml",
            crd(
                "widgets.example",
                &format!("{}{v1}", NAMES.replace("example.com", "example")),
            ),
        ),
        (
            "two-storage-versions.yaml",
            crd(
                "widgets.example.com",
                &format!("{NAMES}{v1}  - name: v2\n    served: true\n    storage: true\n{SCHEMA}"),
            ),
        ),
        (
            "no-schema.yaml",
            crd(
                "widgets.example.com",
                &format!("{NAMES}  versions:\n  - name: v1\n    served: true\n    storage: true\n"),
            ),
        ),
        (
            "property-without-type.yaml",
            crd(
                "widgets.example.com",
                &format!(
                    "{NAMES}  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            properties:\n              replicas:\n                type: integer\n"
                ),
            ),
        ),
        (
            "webhook-without-webhook.yaml",
            crd(
                "widgets.example.com",
                &format!("{NAMES}{v1}  conversion:\n    strategy: Webhook\n"),
            ),
        ),
        (
            "bad-scope-and-list-kind.yaml",
            crd(
                "widgets.example.com",
                &format!(
                    "{}    listKind: Widget\n{v1}",
                    NAMES.replace("Namespaced", "Namespace")
                ),
            ),
        ),
    ];
    let mut transcript = Vec::new();
    for (file, yaml) in cases {
        let path = demo.dir.path().join(file);
        std::fs::write(&path, &yaml).expect("write manifest");
        let (applied, _, err) = kubectl(&a, &["apply", "-f", &path.to_string_lossy()]);
        assert!(!applied, "{file} is refused");
        transcript.push(format!(
            "$ kubectl apply -f {file}\n{}",
            err.replace(&*demo.dir.path().to_string_lossy(), "DIR")
        ));
    }

    // A valid CRD is created; an update may not change its scope or drop its stored version.
    let created = demo.apply(
        &a,
        "widgets.yaml",
        &crd("widgets.example.com", &format!("{NAMES}{v1}")),
    );
    assert_eq!(
        created,
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created\n"
    );
    for (file, yaml) in [
        (
            "cluster-scoped.yaml",
            crd(
                "widgets.example.com",
                &format!("{}{v1}", NAMES.replace("Namespaced", "Cluster")),
            ),
        ),
        (
            "v1-renamed.yaml",
            crd(
                "widgets.example.com",
                &format!("{NAMES}{}", v1.replace("name: v1", "name: v2")),
            ),
        ),
    ] {
        let path = demo.dir.path().join(file);
        std::fs::write(&path, &yaml).expect("write manifest");
        let (applied, _, err) = kubectl(&a, &["apply", "-f", &path.to_string_lossy()]);
        assert!(!applied, "{file} is refused");
        transcript.push(format!(
            "$ kubectl apply -f {file}\n{}",
            err.replace(&*demo.dir.path().to_string_lossy(), "DIR")
        ));
    }
    insta::assert_snapshot!("broken_definitions_kubectl", transcript.join("\n"));
}
