//! Protobuf bodies captured from kubectl 1.32 (`kubectl create ...` against a recording HTTPS listener)
//! decode to exactly the JSON object `kubectl create ... --dry-run=client -o json` prints for the same
//! command, i.e. what kube-apiserver would have decoded.

use std::path::PathBuf;

use apiserver_fake::protobuf::{decode_object, is_protobuf};
use serde_json::Value;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/protobuf")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_decodes_like_dry_run(command: &str) {
    let decoded = decode_object(&fixture(&format!("{command}.pb"))).unwrap();
    let mut expected: Value = serde_json::from_slice(&fixture(&format!("{command}.json"))).unwrap();
    // kubectl 1.32 printed a zero `creationTimestamp` as `null`; kube-apiserver 1.35+ tags it `omitzero`,
    // and the decoder follows the newest server.
    drop_null_creation_timestamps(&mut expected);
    assert_eq!(decoded, expected, "{command}:\n{decoded:#}");
    let keys: Vec<&String> = decoded.as_object().unwrap().keys().take(2).collect();
    assert_eq!(keys, ["apiVersion", "kind"]);
}

fn drop_null_creation_timestamps(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("creationTimestamp").is_some_and(Value::is_null) {
                map.remove("creationTimestamp");
            }
            map.values_mut().for_each(drop_null_creation_timestamps);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_creation_timestamps),
        _ => {}
    }
}

#[test]
fn kubectl_create_job() {
    assert_decodes_like_dry_run("create-job-hello");
}

#[test]
fn kubectl_create_deployment_with_replicas() {
    assert_decodes_like_dry_run("create-deployment-web");
}

#[test]
fn kubectl_create_deployment_keeps_zero_replicas_and_container_port() {
    assert_decodes_like_dry_run("create-deployment-zero");
    let decoded = decode_object(&fixture("create-deployment-zero.pb")).unwrap();
    assert_eq!(decoded["spec"]["replicas"], 0);
}

#[test]
fn kubectl_create_configmap() {
    assert_decodes_like_dry_run("create-configmap-cm");
}

#[test]
fn kubectl_create_namespace() {
    assert_decodes_like_dry_run("create-namespace-ns1");
}

#[test]
fn kubectl_create_secret_has_base64_data() {
    assert_decodes_like_dry_run("create-secret-s1");
}

#[test]
fn kubectl_create_service_with_int_target_port() {
    assert_decodes_like_dry_run("create-service-svc1");
}

#[test]
fn kubectl_create_cronjob() {
    assert_decodes_like_dry_run("create-cronjob-cj");
}

#[test]
fn kubectl_create_serviceaccount() {
    assert_decodes_like_dry_run("create-serviceaccount-sa1");
}

#[test]
fn kubectl_content_type_is_recognised() {
    assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
    assert!(!is_protobuf("application/json"));
}
