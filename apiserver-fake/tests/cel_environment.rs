//! The CEL environment follows the server's minor (upstream's versioned base environment,
//! `k8s.io/apiserver/pkg/cel/environment/base.go`): a new expression compiles in the environment of
//! the compatibility version, one minor before the emulated one, so a 1.30 server refuses a CRD rule
//! calling `format.named` (1.31) or `isIP` (1.30) with cel-go's `undeclared reference`, while a 1.32
//! server accepts it; what is stored then runs everywhere, and stays writable where it is unchanged.

mod support;

use std::path::Path;
use std::time::Duration;

use support::demo::KubectlDemo;
use support::kubectl;

/// A CRD whose rules call the named formats (1.31) and `isIP` (1.30).
const GIZMOS: &str = r#"apiVersion: apiextensions.k8s.io/v1
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
              address: {type: string}
            x-kubernetes-validations:
            - rule: "!format.named('dns1123Label').value().validate(self.name).hasValue()"
              message: name must be a DNS label
            - rule: "!has(self.address) || isIP(self.address)"
              message: address must be an IP address
"#;

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
fn a_crd_rule_compiles_in_the_environment_of_the_servers_minor_with_kubectl() {
    let Some(cluster) = KubectlDemo::with_config(|_| {
        "servers:\n- {name: old, version: \"1.30\"}\n- {name: new, version: \"1.32\"}\nlb: none\n".to_owned()
    }) else {
        return;
    };
    let (old, new) = (cluster.kubeconfig("old"), cluster.kubeconfig("new"));
    let crd = cluster.dir.path().join("gizmos.yaml");
    std::fs::write(&crd, GIZMOS).expect("write");
    let crd = crd.to_string_lossy().into_owned();
    let mut transcript = Vec::new();

    // 1.30's compatibility version is 1.29: neither library is declared there.
    let (created, _, refused) = kubectl(&old, &["apply", "-f", &crd]);
    assert!(!created, "the old server refuses the rules");
    transcript.push(format!(
        "$ kubectl --kubeconfig old.kubeconfig apply -f gizmos.yaml  # 1.30\n{refused}"
    ));

    // 1.32's is 1.31: both are.
    let out = cluster.apply(&new, "gizmos.yaml", GIZMOS);
    transcript.push(format!(
        "$ kubectl --kubeconfig new.kubeconfig apply -f gizmos.yaml  # 1.32\n{out}"
    ));
    wait_until_served(&old, "gizmos.v1.example.com");

    // Stored, the rules run on the old server too (the stored environment has everything)…
    let bad = cluster.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: bad, namespace: default}\n\
         spec: {name: Not_A_Label, address: 10.0.0.300}\n",
    )
    .expect("write");
    let (created, _, invalid) = kubectl(&old, &["apply", "-f", &bad.to_string_lossy()]);
    assert!(!created, "the rules hold on the old server");
    transcript.push(format!(
        "$ kubectl --kubeconfig old.kubeconfig apply -f bad.yaml  # 1.30\n{invalid}"
    ));

    // …and an update that leaves them as they are compiles them there as stored ones.
    let labelled = GIZMOS.replace(
        "metadata: {name: gizmos.example.com}",
        "metadata: {name: gizmos.example.com, labels: {team: a}}",
    );
    let out = cluster.apply(&old, "labelled.yaml", &labelled);
    transcript.push(format!(
        "$ kubectl --kubeconfig old.kubeconfig apply -f labelled.yaml  # 1.30, rules unchanged\n{out}"
    ));
    insta::assert_snapshot!("crd_rules_by_minor_kubectl", transcript.join("\n"));
}
