//! Admission webhook responses: any body parses as an `AdmissionReview` response of either version, for
//! a mutating or a validating webhook, or is upstream's error; a patch it carries applies to an object or
//! is upstream's error. Never a panic.
#![no_main]

use apiserver_fake::api::rest::admission::apply_json_patch;
use apiserver_fake::api::rest::admission::review::{ReviewVersion, parse_response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let object = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "labels": {"app": "web"}},
        "data": {"k": "v"},
    });
    for version in [ReviewVersion::V1, ReviewVersion::V1beta1] {
        for mutating in [true, false] {
            if let Ok(response) = parse_response(body, version, "uid", mutating)
                && let Some(patch) = &response.patch
            {
                let _ = apply_json_patch(&object, patch);
            }
        }
    }
    // The body taken as a patch itself.
    let _ = apply_json_patch(&object, body);
});
