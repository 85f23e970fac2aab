//! Object bodies as the write path reads them: YAML (the budgeted YAML 1.1 reader) and JSON, then field
//! validation against the Job schema, duplicate-field detection and the managedFields field set. Nothing
//! may panic; YAML that decodes must come back the same through the JSON encoder and the YAML decoder.
#![no_main]

use apiserver_fake::api::catalog::KubeVersion;
use apiserver_fake::api::openapi::definitions::Definitions;
use apiserver_fake::api::rest::{field_validation, managed_fields};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let definitions = Definitions::of(KubeVersion { major: 1, minor: 36 });
    let _ = field_validation::duplicate_fields(data);
    let decoded = serde_json::from_slice::<serde_json::Value>(data)
        .ok()
        .or_else(|| apiserver_fake::api::yaml::decode(data).ok());
    let Some(mut object) = decoded else {
        return;
    };
    let schema = managed_fields::Schema::new(definitions, "batch", "v1", "Job");
    let _ = schema.fields_of(&object);
    let _ = field_validation::schema_violations(definitions, "io.k8s.api.batch.v1.Job", &object);
    let _ = field_validation::decode(definitions, "io.k8s.api.batch.v1.Job", &mut object);
});
