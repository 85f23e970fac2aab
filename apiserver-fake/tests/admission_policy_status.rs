//! The ValidatingAdmissionPolicy status controller of the cluster's controller manager: a policy gets
//! `status.observedGeneration` (its generation) and `status.typeChecking` after each create and spec
//! update, so `kubectl wait --for=jsonpath='{.status.observedGeneration}'=N` returns as it does against
//! a real cluster.

mod support;

use support::demo::{Demo, kubeconfig};
use support::{kubectl, kubectl_available, kubectl_ok};

const POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <= MAX"
"#;

/// Created, the policy's status is written by the controller manager (waited on with `kubectl wait`);
/// a spec update moves `observedGeneration` to the new generation.
#[test]
fn policy_status_follows_its_generation_with_kubectl() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let a = kubeconfig(&manifest, "a");
    let file = dir.path().join("p.yaml");
    let mut transcript = Vec::new();
    for (max, generation) in [("5", "1"), ("7", "2")] {
        std::fs::write(&file, POLICY.replace("MAX", max)).expect("write");
        let applied = kubectl_ok(&a, &["apply", "-f", &file.to_string_lossy()]);
        transcript.push(format!(
            "$ kubectl apply -f p.yaml  # replicas <= {max}\n{applied}"
        ));
        let wait = [
            "wait",
            &format!("--for=jsonpath={{.status.observedGeneration}}={generation}"),
            "--timeout=30s",
            "validatingadmissionpolicy/p",
        ];
        let (ok, out, err) = kubectl(&a, &wait);
        assert!(ok, "{out}{err}");
        transcript.push(format!(
            "$ kubectl wait --for=jsonpath='{{.status.observedGeneration}}'={generation} validatingadmissionpolicy/p\n{out}{err}"
        ));
        let status = kubectl_ok(
            &a,
            &[
                "get",
                "validatingadmissionpolicy",
                "p",
                "-o",
                "jsonpath={.metadata.generation} {.status}",
            ],
        );
        transcript.push(format!(
            "$ kubectl get validatingadmissionpolicy p -o jsonpath='{{.metadata.generation}} {{.status}}'\n{status}"
        ));
    }
    insta::assert_snapshot!("admission_policy_status_kubectl", transcript.join("\n"));
}
