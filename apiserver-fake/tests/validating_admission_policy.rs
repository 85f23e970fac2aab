//! ValidatingAdmissionPolicies and their bindings, driven from outside: the built binary's `cluster`
//! demo and `kubectl` applying `tests/fixtures/admission_policy/policy.yaml`, then ConfigMaps a `Deny`
//! binding refuses and a `Warn` binding warns about.

mod support;

use std::path::{Path, PathBuf};

use support::demo::{Demo, server};
use support::{kubectl, kubectl_available};

#[test]
fn admission_policies_deny_and_warn_with_kubectl() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--no-controller-manager"]);
    let manifest = demo.wait_for_manifest(dir.path());
    let a = PathBuf::from(server(&manifest, "a")["kubeconfig"].as_str().expect("kubeconfig"));
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission_policy/policy.yaml");
    let (applied, out, err) = kubectl(&a, &["apply", "-f", &policy.to_string_lossy()]);
    assert!(applied, "{err}");
    assert_eq!(out.lines().count(), 4, "{out}");
    let mut transcript = Vec::new();

    // Denied by the Deny binding, with the message expression's text.
    let (created, _, denied) = kubectl(&a, &["create", "configmap", "settings", "--from-literal=a=b"]);
    assert!(!created, "the policy denies the name");
    transcript.push(format!(
        "$ kubectl create configmap settings --from-literal=a=b\n{denied}"
    ));
    let (found, _, _) = kubectl(&a, &["get", "configmap", "settings"]);
    assert!(!found, "nothing was written");

    // Admitted, with the Warn binding's warning.
    let (created, out, warned) = kubectl(&a, &["create", "configmap", "app-settings", "--from-literal=a=b"]);
    assert!(created, "{warned}");
    assert_eq!(out, "configmap/app-settings created\n");
    transcript.push(format!(
        "$ kubectl create configmap app-settings --from-literal=a=b\n{warned}"
    ));

    // Updates are admitted too: a labelled ConfigMap draws no warning.
    let (labelled, _, quiet) = kubectl(&a, &["label", "configmap", "app-settings", "team=web"]);
    assert!(labelled, "{quiet}");
    assert_eq!(quiet, "", "no warning once the label is there");

    insta::assert_snapshot!("admission_policy_kubectl", transcript.join("\n"));
}
