//! PATCH bodies of every type against a Deployment (schema-driven strategic merge and apply merge, JSON
//! patch, merge patch): a patch applies or is a Status error, never a panic. Input: a selector byte, then
//! the original object and the patch separated by a NUL byte.
#![no_main]

use apiserver_fake::api::catalog::KubeVersion;
use apiserver_fake::api::openapi::definitions::Definitions;
use apiserver_fake::api::rest::patch::{self, PatchSchema, PatchType};
use libfuzzer_sys::fuzz_target;

const TYPES: [PatchType; 4] = [
    PatchType::Json,
    PatchType::Merge,
    PatchType::StrategicMerge,
    PatchType::Apply,
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Some(split) = rest.iter().position(|b| *b == 0) else {
        return;
    };
    let (original, body) = (&rest[..split], &rest[split + 1..]);
    let Ok(original) = serde_json::from_slice::<serde_json::Value>(original) else {
        return;
    };
    let definitions = Definitions::of(KubeVersion { major: 1, minor: 36 });
    let schema = PatchSchema::of_kind(definitions, "apps", "v1", "Deployment");
    let _ = patch::apply(
        TYPES[usize::from(selector) % TYPES.len()],
        &original,
        body,
        schema,
    );
});
