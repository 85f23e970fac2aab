//! The zero values a kind's status always has on the wire.
//!
//! kube-apiserver encodes objects with Go's `encoding/json`, which writes every field of a non-pointer
//! struct that has no `omitempty`, zero or not, and never drops a non-pointer struct (`status`) even with
//! `omitempty`. So a new DaemonSet reads back with `status: {currentNumberScheduled: 0,
//! numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0}` and a ReplicaSet with
//! `status: {replicas: 0}`; clients generated from the OpenAPI (the official Python client) refuse
//! objects without them.
//!
//! Which fields those are is read from the kind's OpenAPI definition, whose `required` lists are
//! generated from the same Go tags (a field without `omitempty` and without `+optional` is required):
//! the required integer and boolean fields of the `status` definition. Fields that have no `omitempty`
//! but are marked `+optional` are not in `required`; the Go types have few of those in statuses, listed
//! in [`OPTIONAL_BUT_ALWAYS_ENCODED`] (read from `k8s.io/api`).

use serde_json::{Map, Value};

use super::{default_missing, ensure_object};
use crate::api::catalog::KubeVersion;
use crate::api::openapi::definitions::Definitions;
use crate::api::rest::ResourceInfo;

/// `(group, kind, field)` of status fields that Go always encodes (no `omitempty`) but that are tagged
/// `+optional`, so the OpenAPI does not list them as required.
const OPTIONAL_BUT_ALWAYS_ENCODED: &[(&str, &str, &str)] = &[
    // apps/v1 StatefulSetStatus.AvailableReplicas `json:"availableReplicas"`.
    ("apps", "StatefulSet", "availableReplicas"),
    // policy/v1 PodDisruptionBudgetStatus: 1.36 marked the four counters `+optional`, still without
    // `omitempty` (earlier minors list them as required).
    ("policy", "PodDisruptionBudget", "disruptionsAllowed"),
    ("policy", "PodDisruptionBudget", "currentHealthy"),
    ("policy", "PodDisruptionBudget", "desiredHealthy"),
    ("policy", "PodDisruptionBudget", "expectedPods"),
];

/// The status fields of `resource`'s kind at `version` that are always encoded, with their zero values.
pub(crate) fn always_encoded_status_fields(
    resource: &ResourceInfo,
    version: KubeVersion,
) -> Vec<(String, Value)> {
    let definitions = Definitions::of(version);
    let Some(status) = definitions
        .kind(&resource.group, &resource.version, &resource.kind)
        .and_then(|name| definitions.get(name))
        .and_then(|kind| kind.pointer("/properties/status/$ref"))
        .and_then(Value::as_str)
        .and_then(|reference| definitions.get(reference.trim_start_matches("#/definitions/")))
    else {
        return Vec::new();
    };
    let required = status
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    let extra = OPTIONAL_BUT_ALWAYS_ENCODED
        .iter()
        .filter(|(group, kind, _)| *group == resource.group && *kind == resource.kind)
        .map(|(_, _, field)| *field);
    let mut fields: Vec<(String, Value)> = Vec::new();
    for field in required.chain(extra) {
        let zero = match status
            .pointer(&format!("/properties/{field}/type"))
            .and_then(Value::as_str)
        {
            Some("integer") => Value::from(0),
            Some("boolean") => Value::Bool(false),
            _ => continue,
        };
        if !fields.iter().any(|(name, _)| name == field) {
            fields.push((field.to_owned(), zero));
        }
    }
    fields
}

/// Sets the always-encoded status fields (see the module docs) that `object` lacks to their zero
/// values, creating `status` when the kind has such fields. Idempotent.
pub(crate) fn set_zero_status_fields(
    resource: &ResourceInfo,
    version: KubeVersion,
    object: &mut Map<String, Value>,
) {
    let fields = always_encoded_status_fields(resource, version);
    if fields.is_empty() {
        return;
    }
    let Some(status) = ensure_object(object, "status") else {
        return;
    };
    for (field, zero) in fields {
        default_missing(status, &field, zero);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn resource(group: &str, version: &str, kind: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: String::new(),
            kind: kind.to_owned(),
            namespaced: true,
            verbs: Vec::new(),
            subresources: Vec::new(),
            custom: false,
            printer_columns: Vec::new(),
            schema: None,
            storage_schema: None,
        }
    }

    fn zeroed(group: &str, version: &str, kind: &str, minor: u32, object: Value) -> Value {
        let mut object = object;
        let map = object.as_object_mut().unwrap();
        set_zero_status_fields(
            &resource(group, version, kind),
            KubeVersion { major: 1, minor },
            map,
        );
        object
    }

    #[test]
    fn workloads_get_the_counters_go_always_encodes() {
        assert_eq!(
            zeroed("apps", "v1", "DaemonSet", 36, json!({"status": {}}))["status"],
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                   "numberReady": 0})
        );
        for (group, kind) in [("", "ReplicationController"), ("apps", "ReplicaSet")] {
            assert_eq!(
                zeroed(group, "v1", kind, 36, json!({}))["status"],
                json!({"replicas": 0}),
                "{kind}"
            );
        }
        assert_eq!(
            zeroed("apps", "v1", "StatefulSet", 28, json!({}))["status"],
            json!({"replicas": 0, "availableReplicas": 0})
        );
        assert_eq!(
            zeroed("autoscaling", "v1", "HorizontalPodAutoscaler", 36, json!({}))["status"],
            json!({"currentReplicas": 0, "desiredReplicas": 0})
        );
        assert_eq!(
            zeroed("storage.k8s.io", "v1", "VolumeAttachment", 36, json!({}))["status"],
            json!({"attached": false})
        );
        for minor in [28, 36] {
            assert_eq!(
                zeroed("policy", "v1", "PodDisruptionBudget", minor, json!({}))["status"],
                json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
                "1.{minor}"
            );
        }
    }

    #[test]
    fn set_values_stay_and_kinds_without_such_fields_are_untouched() {
        assert_eq!(
            zeroed(
                "apps",
                "v1",
                "ReplicaSet",
                36,
                json!({"status": {"replicas": 3, "readyReplicas": 2}})
            )["status"],
            json!({"replicas": 3, "readyReplicas": 2})
        );
        // DeploymentStatus and JobStatus fields are all `omitempty`.
        assert_eq!(
            zeroed("apps", "v1", "Deployment", 36, json!({"status": {}}))["status"],
            json!({})
        );
        assert_eq!(zeroed("batch", "v1", "Job", 36, json!({})), json!({}));
        assert_eq!(
            zeroed("", "v1", "ConfigMap", 36, json!({"data": {}})),
            json!({"data": {}})
        );
    }
}
