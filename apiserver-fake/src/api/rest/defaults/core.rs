//! Defaults of the core (`v1`) kinds: `pkg/apis/core/v1/defaults.go`, and the bits of their registry
//! strategies that shape a created object (`pkg/registry/core/pod/strategy.go`'s QoS class).
//!
//! Kinds with nothing to default (ConfigMap: `SetDefaults_ConfigMap` only makes `data` an empty map,
//! which does not serialize; ServiceAccount; ResourceQuota) are not listed. Namespaces get
//! `spec.finalizers` and `status.phase` from their strategy in [`crate::api::rest::lifecycle`].

use serde_json::{Map, Value, json};

use super::pod::{
    set_defaults_persistent_volume_claim_spec, set_defaults_pod_spec, set_defaults_template_at,
};
use super::{at, default_empty_str, default_missing, each_object, ensure_object, object_at, str_at};

/// `SetDefaults_Pod` and `SetDefaults_PodSpec`: the pod spec's defaults plus what only a Pod gets
/// (`enableServiceLinks: true`, requests defaulted from limits, host ports under `hostNetwork`).
pub(crate) fn set_defaults_pod(pod: &mut Map<String, Value>) {
    let Some(spec) = object_at(pod, "spec") else {
        return;
    };
    set_defaults_pod_spec(spec);
    for key in ["containers", "initContainers"] {
        each_object(spec, key, default_requests_from_limits);
    }
    default_missing(spec, "enableServiceLinks", json!(true));
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        for key in ["containers", "initContainers"] {
            each_object(spec, key, |container| {
                each_object(container, "ports", |port| {
                    if port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                        && let Some(container_port) = port.get("containerPort").cloned()
                    {
                        port.insert("hostPort".to_owned(), container_port);
                    }
                });
            });
        }
    }
}

/// `SetDefaults_Pod`: a container whose `limits` are set gets each missing request from its limit.
fn default_requests_from_limits(container: &mut Map<String, Value>) {
    let Some(resources) = object_at(container, "resources") else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let Some(requests) = ensure_object(resources, "requests") else {
        return;
    };
    for (name, quantity) in limits {
        requests.entry(name).or_insert(quantity);
    }
}

/// The pod's `status.qosClass` as `qos.GetPodQOS` computes it from CPU and memory: `BestEffort`
/// without any request or limit, `Guaranteed` when every container limits both and requests equal the
/// limits, else `Burstable`. Quantities are compared as written (`1` and `1000m` count as different).
pub(crate) fn pod_qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|key| pod.pointer(&format!("/spec/{key}")).and_then(Value::as_array))
        .flatten()
        .collect();
    let amount = |container: &Value, kind: &str, resource: &str| {
        container
            .pointer(&format!("/resources/{kind}/{resource}"))
            .cloned()
    };
    let mut any = false;
    let mut guaranteed = true;
    for container in &containers {
        for resource in ["cpu", "memory"] {
            let request = amount(container, "requests", resource);
            let limit = amount(container, "limits", resource);
            any |= request.is_some() || limit.is_some();
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// `SetDefaults_ReplicationController`: selector and labels from the template's labels, `replicas: 1`
/// (declarative), and the template's pod spec.
pub(crate) fn set_defaults_replication_controller(rc: &mut Map<String, Value>) {
    let Some(spec) = ensure_object(rc, "spec") else {
        return;
    };
    let labels = at(spec, "/template/metadata/labels")
        .filter(|l| l.is_object())
        .cloned();
    default_missing(spec, "replicas", json!(1));
    set_defaults_template_at(spec, "template");
    if let Some(labels) = labels {
        if spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
        {
            spec.insert("selector".to_owned(), labels.clone());
        }
        if let Some(metadata) = ensure_object(rc, "metadata")
            && metadata
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            metadata.insert("labels".to_owned(), labels);
        }
    }
}

/// `SetDefaults_Service` (allocation of cluster IPs and node ports is the registry's:
/// [`super::service_ip`]), and the `status.loadBalancer: {}` a Service status always serializes.
pub(crate) fn set_defaults_service(service: &mut Map<String, Value>) {
    if let Some(status) = object_at(service, "status") {
        default_missing(status, "loadBalancer", json!({}));
    }
    let Some(spec) = ensure_object(service, "spec") else {
        return;
    };
    default_empty_str(spec, "sessionAffinity", "None");
    match str_at(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout =
                at(spec, "/sessionAffinityConfig/clientIP/timeoutSeconds").is_some_and(|t| !t.is_null());
            if !has_timeout {
                // `v1.DefaultClientIPServiceAffinitySeconds`: three hours.
                spec.insert(
                    "sessionAffinityConfig".to_owned(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    default_empty_str(spec, "type", "ClusterIP");
    each_object(spec, "ports", |port| {
        default_empty_str(port, "protocol", "TCP");
        let unset = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        };
        if unset && let Some(number) = port.get("port").cloned() {
            port.insert("targetPort".to_owned(), number);
        }
    });
    let service_type = str_at(spec, "type").to_owned();
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| !ips.is_empty());
    // `service.ExternallyAccessible`.
    let externally_accessible = matches!(service_type.as_str(), "LoadBalancer" | "NodePort")
        || (service_type == "ClusterIP" && has_external_ips);
    if externally_accessible {
        default_empty_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(service_type.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        default_missing(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        default_missing(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// `SetDefaults_Secret`: `type: Opaque`.
pub(crate) fn set_defaults_secret(secret: &mut Map<String, Value>) {
    default_empty_str(secret, "type", "Opaque");
}

/// `SetDefaults_Namespace` (the `kubernetes.io/metadata.name` label, for named namespaces) and
/// `SetDefaults_NamespaceStatus` (`phase: Active`).
pub(crate) fn set_defaults_namespace(namespace: &mut Map<String, Value>) {
    let name = at(namespace, "/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !name.is_empty()
        && let Some(labels) =
            ensure_object(namespace, "metadata").and_then(|metadata| ensure_object(metadata, "labels"))
    {
        labels.insert("kubernetes.io/metadata.name".to_owned(), json!(name));
    }
    if let Some(status) = object_at(namespace, "status") {
        default_empty_str(status, "phase", "Active");
    }
}

/// `SetDefaults_PersistentVolumeClaim` (`status.phase: Pending`) and
/// `SetDefaults_PersistentVolumeClaimSpec` (`volumeMode: Filesystem`).
pub(crate) fn set_defaults_persistent_volume_claim(claim: &mut Map<String, Value>) {
    if let Some(spec) = ensure_object(claim, "spec") {
        set_defaults_persistent_volume_claim_spec(spec);
    }
    if let Some(status) = ensure_object(claim, "status") {
        default_empty_str(status, "phase", "Pending");
    }
}

/// `SetDefaults_PersistentVolume`: `persistentVolumeReclaimPolicy: Retain`, `volumeMode: Filesystem`,
/// `status.phase: Pending`.
pub(crate) fn set_defaults_persistent_volume(volume: &mut Map<String, Value>) {
    if let Some(spec) = ensure_object(volume, "spec") {
        default_empty_str(spec, "persistentVolumeReclaimPolicy", "Retain");
        default_missing(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = ensure_object(volume, "status") {
        default_empty_str(status, "phase", "Pending");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{builtin, defaulted, v};
    use super::*;

    #[test]
    fn pod_gets_pod_only_defaults() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"hostNetwork": true, "containers": [
            {"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 8080}],
             "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}, "requests": {"cpu": "100m"}}}]}});
        let got = defaulted(&builtin("", "pods", "Pod"), v(36), pod);
        assert_eq!(
            got["spec"],
            json!({
                "hostNetwork": true,
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "terminationGracePeriodSeconds": 30, "enableServiceLinks": true,
                "containers": [{"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 8080, "protocol": "TCP", "hostPort": 8080}],
                    "resources": {"limits": {"cpu": "500m", "memory": "64Mi"},
                                  "requests": {"cpu": "100m", "memory": "64Mi"}},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            })
        );
        assert_eq!(pod_qos_class(&got), "Burstable");
    }

    #[test]
    fn qos_classes() {
        let with = |resources: Value| json!({"spec": {"containers": [{"resources": resources}]}});
        assert_eq!(pod_qos_class(&with(json!({}))), "BestEffort");
        assert_eq!(
            pod_qos_class(&with(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                                        "requests": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            pod_qos_class(&with(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
    }

    #[test]
    fn service_defaults() {
        let service = json!({"metadata": {"name": "s"}, "spec": {"selector": {"app": "a"},
            "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}, "status": {}});
        let got = defaulted(&builtin("", "services", "Service"), v(36), service);
        assert_eq!(
            got,
            json!({"metadata": {"name": "s"}, "spec": {"selector": {"app": "a"},
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                          {"port": 53, "protocol": "UDP", "targetPort": "dns"}],
                "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster"},
                "status": {"loadBalancer": {}}})
        );
        let lb = json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
            "ports": [{"port": 443, "targetPort": 0}]}});
        let got = defaulted(&builtin("", "services", "Service"), v(36), lb);
        assert_eq!(
            got["spec"],
            json!({"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                "ports": [{"port": 443, "targetPort": 443, "protocol": "TCP"}],
                "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
                "allocateLoadBalancerNodePorts": true})
        );
    }

    #[test]
    fn secret_namespace_and_claims() {
        let secret = defaulted(&builtin("", "secrets", "Secret"), v(36), json!({"data": {}}));
        assert_eq!(secret, json!({"data": {}, "type": "Opaque"}));
        let ns = defaulted(
            &builtin("", "namespaces", "Namespace"),
            v(36),
            json!({"metadata": {"name": "team"}, "status": {}}),
        );
        assert_eq!(
            ns,
            json!({"metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}},
                   "status": {"phase": "Active"}})
        );
        let claim = defaulted(
            &builtin("", "persistentvolumeclaims", "PersistentVolumeClaim"),
            v(36),
            json!({"spec": {"accessModes": ["ReadWriteOnce"]}}),
        );
        assert_eq!(
            claim,
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
                   "status": {"phase": "Pending"}})
        );
    }

    #[test]
    fn replication_controller_takes_selector_and_labels_from_its_template() {
        let rc = json!({"spec": {"template": {"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": []}}}});
        let got = defaulted(
            &builtin("", "replicationcontrollers", "ReplicationController"),
            v(36),
            rc,
        );
        assert_eq!(got["metadata"]["labels"], json!({"app": "a"}));
        assert_eq!(got["spec"]["selector"], json!({"app": "a"}));
        assert_eq!(got["spec"]["replicas"], json!(1));
        assert_eq!(
            got["spec"]["template"]["spec"]["dnsPolicy"],
            json!("ClusterFirst")
        );
    }
}
