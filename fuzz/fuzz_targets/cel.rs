//! CEL: any text compiles or is a compile error, and a compiled expression evaluates to a value or an
//! error against a small custom resource, directly and as an `x-kubernetes-validations` rule (with
//! `oldSelf`, its message expression and its cost limit): never a panic.
#![no_main]

use apiserver_fake::api::catalog::KubeVersion;
use apiserver_fake::api::rest::structural::validation_rules;
use apiserver_fake::cel::{compile, evaluate, value::to_cel};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"replicas": 3, "name": "web-1", "ports": [80, 443], "labels": {"app": "web"}, "ratio": 0.5}});
    if let Ok(expression) = compile(source, &["self", "oldSelf"]) {
        let _ = evaluate(&expression, &[("self", to_cel(&object)), ("oldSelf", to_cel(&object))]);
    }
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [{"rule": source, "messageExpression": source}]}}});
    for ratcheting in [false, true] {
        let _ = validation_rules::validate(&schema, &object, Some(&object), ratcheting);
    }
    let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}});
    // As a new expression at the oldest minor (its environment lacks libraries) and the newest.
    for minor in [28, 36] {
        let _ = validation_rules::check_definition(&crd, None, KubeVersion { major: 1, minor });
    }
});
