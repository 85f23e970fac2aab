//! kube-apiserver's audit log as an operator uses it: a cluster file gives a server
//! `--audit-policy-file` and `--audit-log-path` (`flags:`), kubectl talks to it, and the log holds one
//! `audit.k8s.io/v1` Event per request with kubectl's user agent, the object reference and the answer
//! (a missing object's 404 with its `NotFound` reason and name). A bad policy is one line and a non-zero
//! exit before anything starts.

mod support;

use serde_json::Value;
use support::demo::Demo;
use support::{kubectl, kubectl_available};

const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: [\"/readyz*\", \"/healthz*\", \"/livez*\"]
- level: Metadata
";

#[test]
fn kubectls_requests_are_in_the_audit_log_with_its_user_agent_and_their_answers() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (policy, log) = (dir.path().join("policy.yaml"), dir.path().join("audit/a.log"));
    std::fs::write(&policy, POLICY).expect("policy");
    let config = dir.path().join("cluster.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n- name: a\n  version: \"1.36\"\n  flags: {{audit-policy-file: {}, audit-log-path: {}}}\nlb: none\n",
            policy.display(),
            log.display()
        ),
    )
    .expect("config");
    let config = config.display().to_string();
    let mut demo = Demo::start(dir.path(), &["--config", &config, "--no-controller-manager"]);
    demo.wait_for_manifest(dir.path());
    let kubeconfig = dir.path().join("a.kubeconfig");
    let (ok, out, err) = kubectl(&kubeconfig, &["get", "configmap", "no-such-map", "-n", "default"]);
    assert!(!ok, "{out}{err}");
    let (ok, out, err) = kubectl(&kubeconfig, &["get", "configmaps", "-n", "default"]);
    assert!(ok, "{out}{err}");
    drop(demo);

    let events: Vec<Value> = std::fs::read_to_string(&log)
        .expect("the audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect();
    assert!(
        events.iter().all(|e| e["kind"] == "Event"
            && e["apiVersion"] == "audit.k8s.io/v1"
            && e["stage"] == "ResponseComplete"
            && !e["requestURI"]
                .as_str()
                .unwrap_or_default()
                .starts_with("/readyz")),
        "RequestReceived and health checks are left out: {events:#?}"
    );
    let by_kubectl = |verb: &str| {
        events
            .iter()
            .find(|e| {
                e["verb"] == verb
                    && e["objectRef"]["resource"] == "configmaps"
                    && e["userAgent"].as_str().is_some_and(|a| a.starts_with("kubectl/"))
            })
            .unwrap_or_else(|| panic!("kubectl's {verb} of configmaps: {events:#?}"))
    };
    let get = by_kubectl("get");
    assert_eq!(get["objectRef"]["name"], "no-such-map");
    assert_eq!(get["objectRef"]["namespace"], "default");
    assert_eq!(get["responseStatus"]["code"], 404);
    assert_eq!(get["responseStatus"]["reason"], "NotFound");
    assert_eq!(get["responseStatus"]["details"]["name"], "no-such-map");
    assert_eq!(get["user"]["username"], "admin");
    assert_eq!(get["level"], "Metadata");
    let list = by_kubectl("list");
    assert_eq!(
        list["responseStatus"],
        serde_json::json!({"metadata": {}, "code": 200})
    );
    assert_ne!(get["auditID"], list["auditID"]);
}

#[test]
fn a_policy_without_rules_is_one_line_and_nothing_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\n").expect("policy");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .arg("--tls-cert-file=/nonexistent.crt")
        .arg("--tls-private-key-file=/nonexistent.key")
        .arg(format!("--audit-policy-file={}", policy.display()))
        .arg("--audit-log-path=-")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        format!(
            "error: loaded illegal policy with 0 rules: from file {}",
            policy.display()
        )
    );
}
