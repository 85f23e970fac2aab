//! The `dropDisabledFields` steps of the registries' `PrepareForCreate` / `PrepareForUpdate`: a field
//! whose feature gate is off in the server's (emulated) minor is silently removed from what is
//! written, unless, on update, the stored object already uses it (upstream's `...InUse` checks, so
//! that turning a gate off never makes a stored object unwritable).
//!
//! Upstream: `pkg/api/pod/util.go` (`dropDisabledFields`, `dropPodLifecycleSleepAction`, for a Pod
//! and, through `DropDisabledTemplateFields`, every pod template), `pkg/registry/batch/job/strategy.go`
//! and `pkg/registry/core/service/strategy.go` (`dropServiceDisabledFields`). The gates are
//! [`Gate`]s read at the emulated version.
//!
//! Fields a minor's Go types do not have at all (a 1.28 Job's `successPolicy`) never get here: the
//! decoder drops them as unknown fields ([`crate::api::rest::field_validation`]).

use serde_json::{Map, Value};

use super::super::ResourceInfo;
use super::super::feature_gates::Gate;
use crate::api::catalog::KubeVersion;

/// Removes from `object` of `resource` the fields whose gate is off at `version` (the emulated
/// version), keeping those `old` (the stored object, on update) already uses. Kinds without gated
/// fields and custom resources are left alone.
pub(crate) fn drop_disabled_fields(
    resource: &ResourceInfo,
    version: KubeVersion,
    object: &mut Value,
    old: Option<&Value>,
) {
    if resource.custom {
        return;
    }
    let Some(template) = pod_spec_pointer(&resource.group, &resource.resource) else {
        if (resource.group.as_str(), resource.resource.as_str()) == ("", "services") {
            drop_service_fields(version, object, old);
        }
        return;
    };
    if (resource.group.as_str(), resource.resource.as_str()) == ("batch", "jobs") {
        drop_job_fields(version, object, old);
    }
    let old_spec = old.and_then(|old| old.pointer(template));
    if let Some(spec) = object.pointer_mut(template).and_then(Value::as_object_mut) {
        drop_pod_spec_fields(version, spec, old_spec);
    }
}

/// Where the pod spec of an object of `group`/`resource` is: the Pod's own, or its template's.
pub(crate) fn pod_spec_pointer(group: &str, resource: &str) -> Option<&'static str> {
    match (group, resource) {
        ("", "pods") => Some("/spec"),
        ("", "podtemplates") => Some("/template/spec"),
        ("", "replicationcontrollers")
        | ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some("/spec/template/spec"),
        ("batch", "cronjobs") => Some("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    }
}

/// The containers of every type of a pod spec, as upstream's `VisitContainers(AllContainers)`.
const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// Whether `field` is set (not missing, not null) in `map`.
fn is_set(map: &Value, field: &str) -> bool {
    map.get(field).is_some_and(|v| !v.is_null())
}

/// The objects of the list `key` of `spec`.
fn items<'a>(spec: Option<&'a Value>, key: &str) -> impl Iterator<Item = &'a Value> {
    spec.and_then(|s| s.get(key))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `dropDisabledFields`' pod spec part for the gates of [`Gate`].
fn drop_pod_spec_fields(version: KubeVersion, spec: &mut Map<String, Value>, old: Option<&Value>) {
    // inPlacePodVerticalScalingInUse: a regular container of the old spec has a resize policy.
    let resize_in_use = items(old, "containers").any(|c| {
        c.get("resizePolicy")
            .and_then(Value::as_array)
            .is_some_and(|p| !p.is_empty())
    });
    if !Gate::InPlacePodVerticalScaling.enabled(version) && !resize_in_use {
        for list in CONTAINER_LISTS {
            each_container(spec, list, |c| {
                c.remove("resizePolicy");
            });
        }
    }
    // restartableInitContainersInUse: an init container of the old spec restarts Always.
    let sidecars_in_use =
        items(old, "initContainers").any(|c| c.get("restartPolicy") == Some(&Value::from("Always")));
    if !Gate::SidecarContainers.enabled(version) && !sidecars_in_use {
        each_container(spec, "initContainers", |c| {
            c.remove("restartPolicy");
        });
    }
    let sleep_in_use = CONTAINER_LISTS.iter().any(|list| {
        items(old, list).any(|c| {
            ["preStop", "postStart"].iter().any(|hook| {
                c.get("lifecycle")
                    .and_then(|l| l.get(hook))
                    .is_some_and(|h| is_set(h, "sleep"))
            })
        })
    });
    if !Gate::PodLifecycleSleepAction.enabled(version) && !sleep_in_use {
        for list in CONTAINER_LISTS {
            each_container(spec, list, drop_sleep_action);
        }
    }
}

/// `dropPodLifecycleSleepAction` of one container: a hook left without a handler goes, and so does a
/// `lifecycle` left without hooks.
fn drop_sleep_action(container: &mut Map<String, Value>) {
    let Some(lifecycle) = container.get_mut("lifecycle").and_then(Value::as_object_mut) else {
        return;
    };
    for hook in ["preStop", "postStart"] {
        let Some(handler) = lifecycle.get_mut(hook).and_then(Value::as_object_mut) else {
            continue;
        };
        if handler.remove("sleep").is_some_and(|s| !s.is_null())
            && !["exec", "httpGet", "tcpSocket"]
                .iter()
                .any(|other| handler.get(*other).is_some_and(|v| !v.is_null()))
        {
            lifecycle.remove(hook);
        }
    }
    if !["preStop", "postStart"]
        .iter()
        .any(|hook| lifecycle.get(*hook).is_some_and(|v| !v.is_null()))
    {
        container.remove("lifecycle");
    }
}

/// Calls `f` on every container object of the list `key` of `spec`.
fn each_container(spec: &mut Map<String, Value>, key: &str, f: impl FnMut(&mut Map<String, Value>)) {
    super::each_object(spec, key, f);
}

/// The Job strategy's drops: on create, every field of a gate that is off; on update, only those the
/// stored Job does not have (`managedBy` is immutable, so only create drops it).
fn drop_job_fields(version: KubeVersion, object: &mut Value, old: Option<&Value>) {
    let old_spec = old.and_then(|o| o.get("spec"));
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let in_old = |field: &str| old_spec.is_some_and(|s| is_set(s, field));
    let creating = old.is_none();
    if creating && !Gate::JobManagedBy.enabled(version) {
        spec.remove("managedBy");
    }
    if !Gate::JobSuccessPolicy.enabled(version) && !in_old("successPolicy") {
        spec.remove("successPolicy");
    }
    if !Gate::JobBackoffLimitPerIndex.enabled(version) {
        for field in ["backoffLimitPerIndex", "maxFailedIndexes"] {
            if !in_old(field) {
                spec.remove(field);
            }
        }
        // On create the FailIndex rules go too; on update they stay (the pod failure policy is
        // immutable, and a Job that had them keeps its backoffLimitPerIndex).
        if creating
            && let Some(rules) = spec
                .get_mut("podFailurePolicy")
                .and_then(|p| p.get_mut("rules"))
                .and_then(Value::as_array_mut)
        {
            rules.retain(|rule| rule.get("action") != Some(&Value::from("FailIndex")));
        }
    }
    if !Gate::JobPodReplacementPolicy.enabled(version) && !in_old("podReplacementPolicy") {
        spec.remove("podReplacementPolicy");
    }
}

/// `dropServiceDisabledFields`: `trafficDistribution` without its gate, unless the stored Service
/// has one.
fn drop_service_fields(version: KubeVersion, object: &mut Value, old: Option<&Value>) {
    let in_use = old
        .and_then(|o| o.get("spec"))
        .is_some_and(|s| is_set(s, "trafficDistribution"));
    if !Gate::ServiceTrafficDistribution.enabled(version)
        && !in_use
        && let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("trafficDistribution");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{builtin, v};
    use super::*;

    fn dropped(group: &str, resource: &str, minor: u32, mut object: Value, old: Option<Value>) -> Value {
        drop_disabled_fields(
            &builtin(group, resource, "K"),
            v(minor),
            &mut object,
            old.as_ref(),
        );
        object
    }

    fn sidecar_pod() -> Value {
        json!({"spec": {
            "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
            "containers": [{"name": "app", "image": "nginx",
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}]
        }})
    }

    #[test]
    fn a_1_28_server_drops_sidecars_sleep_hooks_and_resize_policies() {
        let pod = dropped("", "pods", 28, sidecar_pod(), None);
        assert_eq!(
            pod,
            json!({"spec": {
                "initContainers": [{"name": "proxy", "image": "envoy"}],
                "containers": [{"name": "app", "image": "nginx"}]
            }})
        );
        // 1.30: sidecars and sleep are on, resize policies wait for 1.33.
        let pod = dropped("", "pods", 30, sidecar_pod(), None);
        assert_eq!(pod["spec"]["initContainers"][0]["restartPolicy"], "Always");
        assert_eq!(
            pod["spec"]["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"],
            5
        );
        assert!(pod["spec"]["containers"][0].get("resizePolicy").is_none());
        assert_eq!(dropped("", "pods", 33, sidecar_pod(), None), sidecar_pod());
    }

    #[test]
    fn fields_in_use_by_the_stored_object_are_kept_on_update() {
        let pod = dropped("", "pods", 28, sidecar_pod(), Some(sidecar_pod()));
        assert_eq!(pod, sidecar_pod());
    }

    #[test]
    fn a_sleep_hook_with_another_handler_keeps_the_hook() {
        let mut c = Map::new();
        c.insert(
            "lifecycle".into(),
            json!({"preStop": {"sleep": {"seconds": 1}, "exec": {"command": ["x"]}}, "postStart": {"sleep": {"seconds": 1}}}),
        );
        drop_sleep_action(&mut c);
        assert_eq!(
            Value::Object(c),
            json!({"lifecycle": {"preStop": {"exec": {"command": ["x"]}}}})
        );
    }

    #[test]
    fn templates_of_every_workload_are_dropped_from() {
        let deployment = json!({"spec": {"template": sidecar_pod()}});
        let out = dropped("apps", "deployments", 28, deployment, None);
        assert!(
            out.pointer("/spec/template/spec/initContainers/0/restartPolicy")
                .is_none()
        );
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": sidecar_pod()}}}});
        let out = dropped("batch", "cronjobs", 28, cron, None);
        assert!(
            out.pointer("/spec/jobTemplate/spec/template/spec/initContainers/0/restartPolicy")
                .is_none()
        );
    }

    fn job() -> Value {
        json!({"spec": {
            "managedBy": "example.com/queue", "successPolicy": {"rules": [{"succeededCount": 1}]},
            "backoffLimitPerIndex": 1, "maxFailedIndexes": 2, "podReplacementPolicy": "Failed",
            "podFailurePolicy": {"rules": [{"action": "FailIndex"}, {"action": "Ignore"}]},
            "template": {"spec": {"containers": []}}
        }})
    }

    #[test]
    fn job_fields_follow_their_gates() {
        let at_28 = dropped("batch", "jobs", 28, job(), None);
        assert_eq!(
            at_28["spec"],
            json!({"podFailurePolicy": {"rules": [{"action": "Ignore"}]}, "template": {"spec": {"containers": []}}})
        );
        let at_31 = dropped("batch", "jobs", 31, job(), None);
        assert!(at_31["spec"].get("managedBy").is_none());
        assert_eq!(at_31["spec"]["successPolicy"], job()["spec"]["successPolicy"]);
        assert_eq!(dropped("batch", "jobs", 32, job(), None), job());
        // Update: managedBy stays (immutable, validation's business), what the old Job used stays.
        let old = json!({"spec": {"successPolicy": {"rules": []}}});
        let updated = dropped("batch", "jobs", 30, job(), Some(old));
        assert_eq!(updated["spec"]["managedBy"], "example.com/queue");
        assert_eq!(updated["spec"]["successPolicy"], job()["spec"]["successPolicy"]);
        assert_eq!(
            updated["spec"]["podFailurePolicy"]["rules"][0]["action"],
            "FailIndex"
        );
    }

    #[test]
    fn traffic_distribution_needs_1_31_or_a_stored_one() {
        let svc = json!({"spec": {"trafficDistribution": "PreferClose"}});
        assert_eq!(
            dropped("", "services", 30, svc.clone(), None),
            json!({"spec": {}})
        );
        assert_eq!(dropped("", "services", 30, svc.clone(), Some(svc.clone())), svc);
        assert_eq!(dropped("", "services", 31, svc.clone(), None), svc);
        let mut custom = builtin("", "services", "Service");
        custom.custom = true;
        let mut object = svc.clone();
        drop_disabled_fields(&custom, v(28), &mut object, None);
        assert_eq!(object, svc);
    }
}
