//! Defaulting and the create/update strategies of the built-in kinds clients create most, as a
//! kube-apiserver of the binary's version applies them.
//!
//! Upstream runs two separate things on every write, and so does this module:
//!
//! 1. **Scheme defaulting** ([`set_defaults`]): the generated `SetDefaults_*` functions of
//!    `pkg/apis/<group>/<version>/defaults.go` (and the declarative `+default` tags), which the decoder
//!    applies to every decoded object: the body of a POST, the body of a PUT and the result of a PATCH.
//!    They only fill what is unset, so they are idempotent and safe to run on every update.
//! 2. **Strategies** (`PrepareForCreate` / `PrepareForUpdate` of `pkg/registry/...`): what a registry
//!    does to the object once, at create (the Job's generated selector, a Service's cluster IP) or on
//!    update (a Service keeps its allocated IPs when the body omits them).
//!
//! Custom resources get their CRD version's structural-schema defaults instead
//! (`structural::defaulting`). Where a default depends on a feature gate, the gate's default at the
//! binary's version is followed (`super::feature_gates`); the fake does not accept `--feature-gates` for
//! these gates. The strategies' `dropDisabledFields` steps are `drop_disabled_fields`, at the emulated
//! version.
//!
//! One module per API group: `core` (with `pod` for the pod spec shared by every template and
//! `service_ip` for cluster IP and node port allocation), `apps`, `batch`, `networking`,
//! `admissionregistration`; and
//! `status`, the status fields every kind's Go encoding always writes.

pub(crate) mod admissionregistration;
pub(crate) mod apps;
pub(crate) mod batch;
pub(crate) mod core;
pub(crate) mod disabled_fields;
pub(crate) mod networking;
pub(crate) mod pod;
pub(crate) mod service_ip;
pub(crate) mod status;

use serde_json::{Map, Value};

pub(crate) use disabled_fields::drop_disabled_fields;

use super::ResourceInfo;
use crate::api::catalog::KubeVersion;

/// Applies the scheme defaults of `resource`'s kind to `object` (see the module docs): for a custom
/// resource, the `default`s of the requested version's schema. Idempotent; does nothing for kinds
/// without defaults.
pub fn set_defaults(resource: &ResourceInfo, version: KubeVersion, object: &mut Value) {
    if resource.custom {
        if let Some(schema) = &resource.schema {
            super::structural::defaulting::apply(schema, object);
        }
        return;
    }
    let Some(map) = object.as_object_mut() else { return };
    status::set_zero_status_fields(resource, version, map);
    match (resource.group.as_str(), resource.resource.as_str()) {
        ("", "pods") => core::set_defaults_pod(map),
        ("", "podtemplates") => pod::set_defaults_template_at(map, "template"),
        ("", "replicationcontrollers") => core::set_defaults_replication_controller(map),
        ("", "services") => core::set_defaults_service(map),
        ("", "secrets") => core::set_defaults_secret(map),
        ("", "namespaces") => core::set_defaults_namespace(map),
        ("", "persistentvolumeclaims") => core::set_defaults_persistent_volume_claim(map),
        ("", "persistentvolumes") => core::set_defaults_persistent_volume(map),
        ("apps", "deployments") => apps::set_defaults_deployment(map),
        ("apps", "replicasets") => apps::set_defaults_replica_set(map),
        ("apps", "statefulsets") => apps::set_defaults_stateful_set(map, version),
        ("apps", "daemonsets") => apps::set_defaults_daemon_set(map),
        ("batch", "jobs") => batch::set_defaults_job(map, version),
        ("batch", "cronjobs") => batch::set_defaults_cron_job(map),
        ("networking.k8s.io", "networkpolicies") => networking::set_defaults_network_policy(map),
        ("networking.k8s.io", "ingresses") => networking::set_defaults_ingress(map),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            admissionregistration::set_defaults_webhook_configuration(map, false)
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            admissionregistration::set_defaults_webhook_configuration(map, true)
        }
        _ => {}
    }
}

/// The parts of `PrepareForCreate` that need the final name and `uid` (set by the create handler's
/// `FillObjectMetaSystemFields` and name generation before the strategy runs) or the defaulted spec:
/// the Job's generated selector and pod labels, the Pod's `status.qosClass`. Called once per create
/// attempt, after [`set_defaults`].
pub fn prepare_for_create(resource: &ResourceInfo, object: &mut Value) {
    if resource.custom {
        return;
    }
    match (resource.group.as_str(), resource.resource.as_str()) {
        ("batch", "jobs") => {
            if let Some(map) = object.as_object_mut() {
                batch::generate_selector_if_needed(map);
            }
        }
        ("", "pods") => {
            let qos = core::pod_qos_class(object);
            if let Some(status) = object
                .as_object_mut()
                .and_then(|map| ensure_object(map, "status"))
            {
                status.insert("qosClass".to_owned(), Value::from(qos));
            }
        }
        _ => {}
    }
}

/// `PrepareForUpdate` parts that carry what the registry allocated or generated on create into an
/// update whose body omits them: a Service's cluster IPs and node ports (`patchAllocatedValues`), a
/// Job's generated selector. Runs before [`set_defaults`] of the updated object.
pub fn prepare_for_update(resource: &ResourceInfo, current: &Value, next: &mut Value) {
    if resource.custom {
        return;
    }
    let (Some(current), Some(next)) = (current.as_object(), next.as_object_mut()) else {
        return;
    };
    match (resource.group.as_str(), resource.resource.as_str()) {
        ("", "services") => service_ip::patch_allocated_values(current, next),
        ("batch", "jobs") => batch::keep_selector(current, next),
        // namespaceStrategy.PrepareForUpdate: only `finalize` changes `spec.finalizers`.
        ("", "namespaces") => match current.get("spec").and_then(|s| s.get("finalizers")) {
            Some(finalizers) => {
                if let Some(spec) = next
                    .entry("spec")
                    .or_insert_with(|| serde_json::json!({}))
                    .as_object_mut()
                {
                    spec.insert("finalizers".to_owned(), finalizers.clone());
                }
            }
            None => {
                if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("finalizers");
                }
            }
        },
        _ => {}
    }
}

// JSON helpers: Go's "unset" is a missing or null field, and for non-pointer scalars also the zero
// value (`""`, `0`).

/// Sets `key` to `value` when it is missing or null (a nil pointer in Go).
pub(crate) fn default_missing(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

/// Sets `key` to `value` when it is missing, null or `""` (an empty Go string).
pub(crate) fn default_empty_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map.get(key).is_none_or(|v| v.is_null() || v.as_str() == Some("")) {
        map.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// Sets `key` to `value` when it is missing, null or `0` (a zero Go integer).
pub(crate) fn default_zero(map: &mut Map<String, Value>, key: &str, value: i64) {
    if map.get(key).is_none_or(|v| v.is_null() || v.as_i64() == Some(0)) {
        map.insert(key.to_owned(), Value::from(value));
    }
}

/// The value at a JSON pointer (`/spec/selector`) inside `map`.
pub(crate) fn at<'a>(map: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    let mut segments = pointer.trim_start_matches('/').split('/');
    let first = map.get(segments.next()?)?;
    segments.try_fold(first, |value, segment| value.get(segment))
}

/// The string at `key`, `""` when missing or not a string.
pub(crate) fn str_at<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The object at `key` when it is one.
pub(crate) fn object_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// The object at `key`, created (replacing a missing or null value) when absent.
pub(crate) fn ensure_object<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    default_missing(map, key, Value::Object(Map::new()));
    object_at(map, key)
}

/// Calls `f` on every object of the array at `key`.
pub(crate) fn each_object(
    map: &mut Map<String, Value>,
    key: &str,
    mut f: impl FnMut(&mut Map<String, Value>),
) {
    if let Some(items) = map.get_mut(key).and_then(Value::as_array_mut) {
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            f(item);
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::api::rest::ResourceInfo;

    /// A built-in resource of `group` named `resource`.
    pub(crate) fn builtin(group: &str, resource: &str, kind: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.to_owned(),
            version: "v1".to_owned(),
            resource: resource.to_owned(),
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

    /// `object` defaulted as `resource` at `version`, checked to be idempotent.
    pub(crate) fn defaulted(resource: &ResourceInfo, version: KubeVersion, mut object: Value) -> Value {
        set_defaults(resource, version, &mut object);
        let mut again = object.clone();
        set_defaults(resource, version, &mut again);
        assert_eq!(again, object, "defaulting is not idempotent");
        object
    }

    /// Kubernetes 1.`minor`.
    pub(crate) fn v(minor: u32) -> KubeVersion {
        KubeVersion { major: 1, minor }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::test_support::*;
    use super::*;

    #[test]
    fn custom_resources_are_not_defaulted() {
        let mut resource = builtin("batch", "jobs", "Job");
        resource.custom = true;
        let job = json!({"spec": {}});
        let mut object = job.clone();
        set_defaults(&resource, v(36), &mut object);
        prepare_for_create(&resource, &mut object);
        assert_eq!(object, job);
    }
}
