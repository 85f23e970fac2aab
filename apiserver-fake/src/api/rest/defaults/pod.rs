//! Defaults of the pod spec, shared by Pods and every pod template (Deployment, ReplicaSet,
//! StatefulSet, DaemonSet, Job, CronJob, ReplicationController, PodTemplate).
//!
//! Follows `pkg/apis/core/v1/defaults.go` (`SetDefaults_PodSpec`, `SetDefaults_Container`,
//! `SetDefaults_Probe`, `SetDefaults_HTTPGetAction`, `SetDefaults_Volume`, the volume sources'
//! `defaultMode`s, `SetDefaults_ObjectFieldSelector`, `SetDefaults_ServiceAccountTokenProjection`,
//! `SetDefaults_HostPathVolumeSource`, `SetDefaults_PersistentVolumeClaimSpec`) plus the declarative
//! defaults of `ContainerPort.protocol` and `GRPCAction.service`. What only a Pod gets (not a template)
//! is in [`super::core::set_defaults_pod`].

use serde_json::{Map, Value, json};

use super::{default_empty_str, default_missing, default_zero, each_object, object_at, str_at};

/// `v1.TerminationMessagePathDefault`.
pub(crate) const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// `v1.DefaultTerminationGracePeriodSeconds`.
pub(crate) const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// `v1.DefaultSchedulerName`.
pub(crate) const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// `SecretVolumeSourceDefaultMode` and the other volume sources' default (`0644`).
pub(crate) const VOLUME_DEFAULT_MODE: i64 = 0o644;
/// `SetDefaults_ServiceAccountTokenProjection`: one hour.
pub(crate) const TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// Defaults the pod template at `key` of `map` (`spec.template` of workloads), when it has a spec.
pub(crate) fn set_defaults_template_at(map: &mut Map<String, Value>, key: &str) {
    if let Some(spec) = object_at(map, key).and_then(|template| object_at(template, "spec")) {
        set_defaults_pod_spec(spec);
    }
}

/// `SetDefaults_PodSpec` and the defaults of everything a pod spec contains.
pub(crate) fn set_defaults_pod_spec(spec: &mut Map<String, Value>) {
    default_empty_str(spec, "dnsPolicy", "ClusterFirst");
    // Also in Job templates: upstream defaults `Always` there too and the Job's validation then rejects
    // it, so a Job must set `OnFailure` or `Never` itself.
    default_empty_str(spec, "restartPolicy", "Always");
    default_missing(spec, "securityContext", json!({}));
    default_missing(
        spec,
        "terminationGracePeriodSeconds",
        json!(TERMINATION_GRACE_PERIOD_SECONDS),
    );
    default_empty_str(spec, "schedulerName", DEFAULT_SCHEDULER_NAME);
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        each_object(spec, key, set_defaults_container);
    }
    each_object(spec, "volumes", set_defaults_volume);
}

/// `SetDefaults_Container` (also `SetDefaults_EphemeralContainer`) and its nested defaults.
pub(crate) fn set_defaults_container(container: &mut Map<String, Value>) {
    if str_at(container, "imagePullPolicy").is_empty() {
        let policy = match image_tag(str_at(container, "image")) {
            Some("latest") => "Always",
            _ => "IfNotPresent",
        };
        container.insert("imagePullPolicy".to_owned(), json!(policy));
    }
    default_empty_str(container, "terminationMessagePath", TERMINATION_MESSAGE_PATH);
    default_empty_str(container, "terminationMessagePolicy", "File");
    // `Resources` is a struct, not a pointer: it always serializes, as `{}` when empty.
    default_missing(container, "resources", json!({}));
    each_object(container, "ports", |port| {
        default_empty_str(port, "protocol", "TCP")
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = object_at(container, probe) {
            set_defaults_probe(probe);
        }
    }
    if let Some(lifecycle) = object_at(container, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(handler) = object_at(lifecycle, hook) {
                set_defaults_handler(handler);
            }
        }
    }
    each_object(container, "env", |env| {
        if let Some(from) = object_at(env, "valueFrom") {
            set_defaults_env_source(from);
        }
    });
}

/// The tag `parsers.ParseImageName` finds: `latest` when the reference has neither tag nor digest,
/// `None` when it has a digest only or is empty (an invalid reference).
pub(crate) fn image_tag(image: &str) -> Option<&str> {
    if image.is_empty() {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_none() => Some("latest"),
        None => None,
    }
}

/// `SetDefaults_Probe` and its handler's defaults.
fn set_defaults_probe(probe: &mut Map<String, Value>) {
    default_zero(probe, "timeoutSeconds", 1);
    default_zero(probe, "periodSeconds", 10);
    default_zero(probe, "successThreshold", 1);
    default_zero(probe, "failureThreshold", 3);
    set_defaults_handler(probe);
}

/// `SetDefaults_HTTPGetAction` and `GRPCAction.service`'s declarative default (`""`).
fn set_defaults_handler(handler: &mut Map<String, Value>) {
    if let Some(http) = object_at(handler, "httpGet") {
        default_empty_str(http, "path", "/");
        default_empty_str(http, "scheme", "HTTP");
    }
    if let Some(grpc) = object_at(handler, "grpc") {
        default_missing(grpc, "service", json!(""));
    }
}

/// `SetDefaults_ObjectFieldSelector` (`apiVersion: v1`) and the zero `divisor` a
/// `resourceFieldRef` serializes (`resource.Quantity` is a struct: `"0"`).
fn set_defaults_env_source(source: &mut Map<String, Value>) {
    if let Some(field) = object_at(source, "fieldRef") {
        default_empty_str(field, "apiVersion", "v1");
    }
    if let Some(resource) = object_at(source, "resourceFieldRef") {
        default_missing(resource, "divisor", json!("0"));
    }
}

/// The volume source fields of `v1.VolumeSource` (one of them set makes the volume not default to
/// `emptyDir`).
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// `SetDefaults_Volume` (no source → `emptyDir: {}`) and the defaults of its source.
pub(crate) fn set_defaults_volume(volume: &mut Map<String, Value>) {
    if !VOLUME_SOURCES
        .iter()
        .any(|source| volume.get(*source).is_some_and(|v| !v.is_null()))
    {
        volume.insert("emptyDir".to_owned(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = object_at(volume, source) {
            default_missing(source, "defaultMode", json!(VOLUME_DEFAULT_MODE));
        }
    }
    if let Some(downward) = object_at(volume, "downwardAPI") {
        each_object(downward, "items", set_defaults_env_source);
    }
    if let Some(projected) = object_at(volume, "projected") {
        each_object(projected, "sources", |source| {
            if let Some(token) = object_at(source, "serviceAccountToken") {
                default_missing(token, "expirationSeconds", json!(TOKEN_EXPIRATION_SECONDS));
            }
            if let Some(downward) = object_at(source, "downwardAPI") {
                each_object(downward, "items", set_defaults_env_source);
            }
        });
    }
    if let Some(host_path) = object_at(volume, "hostPath") {
        default_missing(host_path, "type", json!(""));
    }
    if let Some(spec) = object_at(volume, "ephemeral")
        .and_then(|ephemeral| object_at(ephemeral, "volumeClaimTemplate"))
        .and_then(|template| object_at(template, "spec"))
    {
        set_defaults_persistent_volume_claim_spec(spec);
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec`: `volumeMode: Filesystem`.
pub(crate) fn set_defaults_persistent_volume_claim_spec(spec: &mut Map<String, Value>) {
    default_missing(spec, "volumeMode", json!("Filesystem"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> Value {
        let mut value = value;
        if let Some(map) = value.as_object_mut() {
            set_defaults_pod_spec(map);
        }
        value
    }

    #[test]
    fn image_tags_as_parse_image_name_reads_them() {
        assert_eq!(image_tag("nginx"), Some("latest"));
        assert_eq!(image_tag("nginx:1.27"), Some("1.27"));
        assert_eq!(image_tag("localhost:5000/app"), Some("latest"));
        assert_eq!(image_tag("localhost:5000/app:v2"), Some("v2"));
        assert_eq!(image_tag("app@sha256:abc"), None);
        assert_eq!(image_tag("app:latest@sha256:abc"), Some("latest"));
        assert_eq!(image_tag(""), None);
    }

    #[test]
    fn a_minimal_pod_spec_gets_every_default() {
        let got = spec(json!({
            "containers": [
                {"name": "a", "image": "busybox", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "busybox:1.36",
                 "livenessProbe": {"httpGet": {"port": 8080}},
                 "readinessProbe": {"grpc": {"port": 9000}, "periodSeconds": 5},
                 "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
            ],
            "volumes": [
                {"name": "scratch"},
                {"name": "s", "secret": {"secretName": "x"}},
                {"name": "c", "configMap": {"name": "y", "defaultMode": 256}},
                {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            ],
        }));
        assert_eq!(
            got,
            json!({
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
                "securityContext": {},
                "terminationGracePeriodSeconds": 30,
                "containers": [
                    {"name": "a", "image": "busybox", "imagePullPolicy": "Always",
                     "ports": [{"containerPort": 80, "protocol": "TCP"}],
                     "resources": {},
                     "terminationMessagePath": "/dev/termination-log",
                     "terminationMessagePolicy": "File"},
                    {"name": "b", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                     "livenessProbe": {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                                       "timeoutSeconds": 1, "periodSeconds": 10,
                                       "successThreshold": 1, "failureThreshold": 3},
                     "readinessProbe": {"grpc": {"port": 9000, "service": ""},
                                        "timeoutSeconds": 1, "periodSeconds": 5,
                                        "successThreshold": 1, "failureThreshold": 3},
                     "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName", "apiVersion": "v1"}}}],
                     "resources": {},
                     "terminationMessagePath": "/dev/termination-log",
                     "terminationMessagePolicy": "File"},
                ],
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "s", "secret": {"secretName": "x", "defaultMode": 420}},
                    {"name": "c", "configMap": {"name": "y", "defaultMode": 256}},
                    {"name": "t", "projected": {"defaultMode": 420,
                        "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}},
                ],
            })
        );
    }

    #[test]
    fn set_values_are_kept() {
        let set = json!({
            "dnsPolicy": "Default", "restartPolicy": "Never", "schedulerName": "mine",
            "securityContext": {"runAsUser": 1}, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "a", "image": "x", "imagePullPolicy": "Never",
                            "terminationMessagePath": "/t", "terminationMessagePolicy": "FallbackToLogsOnError",
                            "resources": {"limits": {"cpu": "1"}}}],
        });
        assert_eq!(spec(set.clone()), set);
    }
}
