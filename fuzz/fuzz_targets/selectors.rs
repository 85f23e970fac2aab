//! Label and field selectors (`labelSelector=`, `fieldSelector=`): any text parses or is a 400; a parsed
//! selector evaluates against an object without panicking.
#![no_main]

use apiserver_fake::api::rest::selector::{FieldSelector, LabelSelector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let object = serde_json::json!({
        "metadata": {"name": "pi", "namespace": "default", "labels": {"app": "pi", "tier": "5"}},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"},
    });
    if let Ok(selector) = LabelSelector::parse(text) {
        let _ = selector.matches(&object);
    }
    for (group, resource) in [("", "pods"), ("batch", "jobs"), ("", "events")] {
        if let Ok(selector) = FieldSelector::parse(text, group, resource) {
            let _ = selector.matches(&object);
        }
    }
});
