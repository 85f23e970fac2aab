//! Defaults of `apps/v1`: `pkg/apis/apps/v1/defaults.go` (`SetDefaults_Deployment`,
//! `SetDefaults_ReplicaSet`, `SetDefaults_StatefulSet`, `SetDefaults_DaemonSet`) and the pod template
//! each carries. Status reset and `generation` on create are the strategies' and happen in
//! [`crate::api::rest::lifecycle`] and [`crate::api::rest::generation`].

use serde_json::{Map, Value, json};

use super::super::feature_gates::Gate;
use super::pod::set_defaults_template_at;
use super::{default_empty_str, default_missing, ensure_object, object_at, str_at};
use crate::api::catalog::KubeVersion;

/// `SetDefaults_Deployment`: `replicas: 1`, a `RollingUpdate` strategy of 25 % / 25 %,
/// `revisionHistoryLimit: 10`, `progressDeadlineSeconds: 600`.
pub(crate) fn set_defaults_deployment(deployment: &mut Map<String, Value>) {
    let Some(spec) = ensure_object(deployment, "spec") else {
        return;
    };
    default_missing(spec, "replicas", json!(1));
    if let Some(strategy) = ensure_object(spec, "strategy") {
        default_empty_str(strategy, "type", "RollingUpdate");
        if str_at(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = ensure_object(strategy, "rollingUpdate")
        {
            default_missing(rolling, "maxUnavailable", json!("25%"));
            default_missing(rolling, "maxSurge", json!("25%"));
        }
    }
    default_missing(spec, "revisionHistoryLimit", json!(10));
    default_missing(spec, "progressDeadlineSeconds", json!(600));
    set_defaults_template_at(spec, "template");
}

/// `SetDefaults_ReplicaSet`: `replicas: 1`.
pub(crate) fn set_defaults_replica_set(replica_set: &mut Map<String, Value>) {
    let Some(spec) = ensure_object(replica_set, "spec") else {
        return;
    };
    default_missing(spec, "replicas", json!(1));
    set_defaults_template_at(spec, "template");
}

/// `SetDefaults_StatefulSet`: `podManagementPolicy: OrderedReady`, a `RollingUpdate` update strategy
/// with `partition: 0` (and `maxUnavailable: 1` were `MaxUnavailableStatefulSet` on, which it is not by default),
/// `persistentVolumeClaimRetentionPolicy` `Retain`/`Retain` (`StatefulSetAutoDeletePVC`, on since
/// 1.27), `replicas: 1`, `revisionHistoryLimit: 10`, and the volume claim templates' `volumeMode`.
pub(crate) fn set_defaults_stateful_set(stateful_set: &mut Map<String, Value>, version: KubeVersion) {
    let Some(spec) = ensure_object(stateful_set, "spec") else {
        return;
    };
    default_empty_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = ensure_object(spec, "updateStrategy") {
        if str_at(strategy, "type").is_empty() {
            strategy.insert("type".to_owned(), json!("RollingUpdate"));
            default_missing(strategy, "rollingUpdate", json!({}));
        }
        if str_at(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = object_at(strategy, "rollingUpdate")
        {
            default_missing(rolling, "partition", json!(0));
            if Gate::MaxUnavailableStatefulSet.enabled(version) {
                default_missing(rolling, "maxUnavailable", json!(1));
            }
        }
    }
    if let Some(policy) = ensure_object(spec, "persistentVolumeClaimRetentionPolicy") {
        default_empty_str(policy, "whenDeleted", "Retain");
        default_empty_str(policy, "whenScaled", "Retain");
    }
    default_missing(spec, "replicas", json!(1));
    default_missing(spec, "revisionHistoryLimit", json!(10));
    set_defaults_template_at(spec, "template");
    if let Some(claims) = spec.get_mut("volumeClaimTemplates").and_then(Value::as_array_mut) {
        for claim in claims.iter_mut().filter_map(Value::as_object_mut) {
            super::core::set_defaults_persistent_volume_claim(claim);
        }
    }
}

/// `SetDefaults_DaemonSet`: a `RollingUpdate` update strategy with `maxUnavailable: 1`,
/// `maxSurge: 0`, and `revisionHistoryLimit: 10`.
pub(crate) fn set_defaults_daemon_set(daemon_set: &mut Map<String, Value>) {
    let Some(spec) = ensure_object(daemon_set, "spec") else {
        return;
    };
    if let Some(strategy) = ensure_object(spec, "updateStrategy") {
        default_empty_str(strategy, "type", "RollingUpdate");
        if str_at(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = ensure_object(strategy, "rollingUpdate")
        {
            default_missing(rolling, "maxUnavailable", json!(1));
            default_missing(rolling, "maxSurge", json!(0));
        }
    }
    default_missing(spec, "revisionHistoryLimit", json!(10));
    set_defaults_template_at(spec, "template");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{builtin, defaulted, v};

    fn template() -> serde_json::Value {
        json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    }

    fn defaulted_template() -> serde_json::Value {
        json!({"metadata": {"labels": {"app": "a"}}, "spec": {
            "containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Always", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {}, "terminationGracePeriodSeconds": 30}})
    }

    #[test]
    fn deployment() {
        let got = defaulted(
            &builtin("apps", "deployments", "Deployment"),
            v(36),
            json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template()}}),
        );
        assert_eq!(
            got,
            json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": defaulted_template(),
                "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}}})
        );
        let recreate = defaulted(
            &builtin("apps", "deployments", "Deployment"),
            v(36),
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}}}),
        );
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(recreate["spec"]["replicas"], json!(0));
    }

    #[test]
    fn replica_set_and_daemon_set() {
        let rs = defaulted(
            &builtin("apps", "replicasets", "ReplicaSet"),
            v(36),
            json!({"spec": {}}),
        );
        // With the status counters Go always encodes (`status::set_zero_status_fields`).
        assert_eq!(rs, json!({"spec": {"replicas": 1}, "status": {"replicas": 0}}));
        let ds = defaulted(
            &builtin("apps", "daemonsets", "DaemonSet"),
            v(36),
            json!({"spec": {"template": template()}}),
        );
        assert_eq!(
            ds,
            json!({"spec": {"template": defaulted_template(), "revisionHistoryLimit": 10,
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}},
                "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                           "numberReady": 0}})
        );
    }

    #[test]
    fn stateful_set_gets_no_max_unavailable_while_its_gate_is_off() {
        let sts = json!({"spec": {"serviceName": "s", "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {}}]}});
        let old = defaulted(
            &builtin("apps", "statefulsets", "StatefulSet"),
            v(34),
            sts.clone(),
        );
        let expected = |rolling: serde_json::Value| {
            json!({"spec": {"serviceName": "s", "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "replicas": 1, "revisionHistoryLimit": 10,
                "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {"volumeMode": "Filesystem"},
                                          "status": {"phase": "Pending"}}]},
                "status": {"replicas": 0, "availableReplicas": 0}})
        };
        assert_eq!(old, expected(json!({"partition": 0})));
        // MaxUnavailableStatefulSet stays off by default through 1.36.
        let new = defaulted(&builtin("apps", "statefulsets", "StatefulSet"), v(36), sts);
        assert_eq!(new, expected(json!({"partition": 0})));
        // An explicit OnDelete strategy gets no rolling update parameters.
        let on_delete = defaulted(
            &builtin("apps", "statefulsets", "StatefulSet"),
            v(36),
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
        );
        assert_eq!(on_delete["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    }
}
