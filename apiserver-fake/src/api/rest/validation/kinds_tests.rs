//! Each covered kind: a valid object (defaulted as the decoder defaults it) passes, and invalid ones
//! get upstream's causes, rendered as kube-apiserver renders them.

use serde_json::{Value, json};

use super::super::defaults::test_support::{builtin, defaulted, v};
use super::{into_causes, validate};
use crate::api::status::{GroupKind, Status};

/// The 422 message of `object` of `group`/`resource` created at 1.`minor` (empty when valid).
fn message(group: &str, resource: &str, kind: &str, minor: u32, object: Value) -> String {
    message_update(group, resource, kind, minor, object, None)
}

fn message_update(
    group: &str,
    resource: &str,
    kind: &str,
    minor: u32,
    object: Value,
    old: Option<Value>,
) -> String {
    let info = builtin(group, resource, kind);
    let object = defaulted(&info, v(minor), object);
    let old = old.map(|o| defaulted(&info, v(minor), o));
    let causes = into_causes(&validate(&info, v(minor), &object, old.as_ref()), v(minor));
    if causes.is_empty() {
        return String::new();
    }
    Status::invalid(&GroupKind::new(group, kind), "x", causes).message
}

fn pod_spec(containers: Value) -> Value {
    json!({"containers": containers})
}

#[test]
fn valid_objects_pass() {
    let c = json!([{"name": "c", "image": "nginx", "ports": [{"containerPort": 80, "name": "http"}],
        "livenessProbe": {"httpGet": {"port": 80}}, "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]);
    let spec = json!({"containers": c, "volumes": [{"name": "data", "emptyDir": {}}]});
    assert_eq!(message("", "pods", "Pod", 32, json!({"spec": spec})), "");
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": spec});
    let selector = json!({"matchLabels": {"app": "web"}});
    for (group, resource, kind) in [
        ("apps", "deployments", "Deployment"),
        ("apps", "replicasets", "ReplicaSet"),
        ("apps", "statefulsets", "StatefulSet"),
        ("apps", "daemonsets", "DaemonSet"),
    ] {
        let object = json!({"spec": {"selector": selector, "template": template}});
        assert_eq!(message(group, resource, kind, 32, object), "", "{kind}");
    }
    let mut job_template = template.clone();
    job_template["spec"]["restartPolicy"] = json!("Never");
    let job = json!({"spec": {"selector": selector, "template": job_template}});
    assert_eq!(message("batch", "jobs", "Job", 32, job), "");
    let cron =
        json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": job_template}}}});
    assert_eq!(message("batch", "cronjobs", "CronJob", 32, cron), "");
    let service = json!({"spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
    assert_eq!(message("", "services", "Service", 32, service), "");
    assert_eq!(
        message("", "configmaps", "ConfigMap", 32, json!({"data": {"a.b": "c"}})),
        ""
    );
    let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
    assert_eq!(
        message("rbac.authorization.k8s.io", "roles", "Role", 32, role),
        ""
    );
    let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "default"}]});
    assert_eq!(
        message(
            "rbac.authorization.k8s.io",
            "rolebindings",
            "RoleBinding",
            32,
            binding
        ),
        ""
    );
    let pvc =
        json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    assert_eq!(
        message("", "persistentvolumeclaims", "PersistentVolumeClaim", 32, pvc),
        ""
    );
    let ingress = json!({"spec": {"rules": [{"host": "example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
    assert_eq!(
        message("networking.k8s.io", "ingresses", "Ingress", 32, ingress),
        ""
    );
}

#[test]
fn a_job_without_containers_is_refused_as_upstream_refuses_it() {
    let job = json!({"spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}});
    assert_eq!(
        message("batch", "jobs", "Job", 32, job),
        "Job.batch \"x\" is invalid: [spec.template.spec.containers: Required value, \
         spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"]"
    );
}

#[test]
fn containers_names_images_and_ports() {
    let containers = json!([
        {"name": "Web", "image": "", "ports": [{"containerPort": 70000, "name": "http"}, {"containerPort": 81, "name": "http", "protocol": "ICMP"}]},
        {"name": "web", "image": "nginx"}, {"name": "web", "image": "nginx"}
    ]);
    let got = message("", "pods", "Pod", 32, json!({"spec": pod_spec(containers)}));
    assert_eq!(
        got,
        "Pod \"x\" is invalid: [spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label must \
         consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character \
         (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), \
         spec.containers[0].image: Required value, \
         spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive, \
         spec.containers[0].ports[1].name: Duplicate value: \"http\", \
         spec.containers[0].ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\", \
         spec.containers[2].name: Duplicate value: \"web\"]"
    );
}

#[test]
fn volumes_mounts_resources_and_probes() {
    let spec = json!({
        "volumes": [{"name": "a", "emptyDir": {}, "configMap": {"name": "c"}}, {"name": "b", "secret": {"secretName": "s"}}],
        "containers": [{"name": "c", "image": "i",
            "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "b", "mountPath": "/a"}],
            "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}},
            "readinessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}},
            "livenessProbe": {"periodSeconds": 5}}]
    });
    assert_eq!(
        message("", "pods", "Pod", 32, json!({"spec": spec})),
        "Pod \"x\" is invalid: [spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type, \
         spec.containers[0].volumeMounts[0].name: Not found: \"a\", \
         spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/a\": must be unique, \
         spec.containers[0].resources.requests[memory]: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi, \
         spec.containers[0].livenessProbe: Required value: must specify a handler type, \
         spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type]"
    );
}

#[test]
fn selectors_must_match_template_labels_printed_per_version() {
    let deployment = json!({"spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "api"}}, "spec": pod_spec(json!([{"name": "c", "image": "i"}]))}}});
    assert_eq!(
        message("apps", "deployments", "Deployment", 33, deployment.clone()),
        "Deployment.apps \"x\" is invalid: spec.template.metadata.labels: Invalid value: \
         map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`"
    );
    assert_eq!(
        message("apps", "deployments", "Deployment", 34, deployment),
        "Deployment.apps \"x\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"api\"}: \
         `selector` does not match template `labels`"
    );
    let negative = json!({"spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec(json!([{"name": "c", "image": "i"}]))}}});
    assert_eq!(
        message("apps", "replicasets", "ReplicaSet", 32, negative),
        "ReplicaSet.apps \"x\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
}

#[test]
fn a_jobs_template_is_immutable() {
    let job = |image: &str| {
        json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": image}]}}}})
    };
    let got = message_update(
        "batch",
        "jobs",
        "Job",
        32,
        job("perl:5.36"),
        Some(job("perl:5.34")),
    );
    assert!(
        got.starts_with("Job.batch \"x\" is invalid: spec.template: Invalid value: "),
        "{got}"
    );
    assert!(got.ends_with(": field is immutable"), "{got}");
    assert_eq!(
        message_update("batch", "jobs", "Job", 32, job("a"), Some(job("a"))),
        ""
    );
}

#[test]
fn cron_job_schedules() {
    let cron = json!({"spec": {"schedule": "61 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}}}}}});
    assert_eq!(
        message("batch", "cronjobs", "CronJob", 32, cron),
        "CronJob.batch \"x\" is invalid: spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"
    );
}

#[test]
fn services_ports_types_and_cluster_ips() {
    let service = json!({"spec": {"type": "Bogus", "ports": [{"port": 0}, {"port": 0}]}});
    assert_eq!(
        message("", "services", "Service", 32, service),
        "Service \"x\" is invalid: [spec.ports[0].name: Required value, \
         spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, \
         spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive, \
         spec.ports[1].name: Required value, \
         spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive, \
         spec.ports[1].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive, \
         spec.type: Unsupported value: \"Bogus\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\", \
         spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:0, \
         TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}]"
    );
    let with_ip = |ip: &str| json!({"spec": {"ports": [{"port": 80}], "clusterIP": ip, "clusterIPs": [ip]}});
    assert_eq!(
        message_update(
            "",
            "services",
            "Service",
            32,
            with_ip("10.96.0.9"),
            Some(with_ip("10.96.0.10"))
        ),
        "Service \"x\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.9\"}: may not change once set"
    );
    assert_eq!(
        message_update(
            "",
            "services",
            "Service",
            34,
            with_ip("10.96.0.9"),
            Some(with_ip("10.96.0.10"))
        ),
        "Service \"x\" is invalid: spec.clusterIPs[0]: Invalid value: [\"10.96.0.9\"]: may not change once set"
    );
}

#[test]
fn rbac_leases_ingresses_network_policies_and_claims() {
    assert_eq!(
        message(
            "rbac.authorization.k8s.io",
            "roles",
            "Role",
            32,
            json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}]})
        ),
        "Role.rbac.authorization.k8s.io \"x\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
    );
    let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "Robot", "name": "r2"}]});
    assert_eq!(
        message(
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "ClusterRoleBinding",
            32,
            binding
        ),
        "ClusterRoleBinding.rbac.authorization.k8s.io \"x\" is invalid: [roleRef.kind: Unsupported value: \"Role\": \
         supported values: \"ClusterRole\", subjects[0].kind: Unsupported value: \"Robot\": supported values: \
         \"ServiceAccount\", \"User\", \"Group\"]"
    );
    assert_eq!(
        message(
            "coordination.k8s.io",
            "leases",
            "Lease",
            32,
            json!({"spec": {"leaseDurationSeconds": 0}})
        ),
        "Lease.coordination.k8s.io \"x\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
    );
    assert_eq!(
        message(
            "networking.k8s.io",
            "ingresses",
            "Ingress",
            33,
            json!({"spec": {}})
        ),
        "Ingress.networking.k8s.io \"x\" is invalid: spec: Invalid value: []networking.IngressRule(nil): \
         either `defaultBackend` or `rules` must be specified"
    );
    let policy = json!({"spec": {"podSelector": {}, "ingress": [{"from": [{}], "ports": [{"port": "http", "endPort": 90}]}]}});
    assert_eq!(
        message(
            "networking.k8s.io",
            "networkpolicies",
            "NetworkPolicy",
            32,
            policy
        ),
        "NetworkPolicy.networking.k8s.io \"x\" is invalid: [spec.ingress[0].ports[0].endPort: Invalid value: 90: \
         may not be specified when `port` is non-numeric, spec.ingress[0].from[0]: Required value: must specify a peer]"
    );
    assert_eq!(
        message(
            "",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            32,
            json!({"spec": {}})
        ),
        "PersistentVolumeClaim \"x\" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, \
         spec.resources[storage]: Required value]"
    );
}

/// The 422 message of `object` written at 1.`minor` over `old` as the write path runs it: defaulted,
/// stripped of the fields whose gate is off there (`dropDisabledFields`), then validated.
fn written_message(resource: &str, kind: &str, minor: u32, object: Value, old: Option<Value>) -> String {
    let info = builtin("", resource, kind);
    let mut object = defaulted(&info, v(minor), object);
    let old = old.map(|o| defaulted(&info, v(minor), o));
    super::super::defaults::drop_disabled_fields(&info, v(minor), &mut object, old.as_ref());
    let causes = into_causes(&validate(&info, v(minor), &object, old.as_ref()), v(minor));
    if causes.is_empty() {
        return String::new();
    }
    Status::invalid(&GroupKind::new("", kind), "x", causes).message
}

fn pod_with_env(name: &str) -> Value {
    json!({"spec": pod_spec(json!([{"name": "c", "image": "nginx", "env": [{"name": name, "value": "1"}]}]))})
}

#[test]
fn env_names_are_c_like_before_1_32_and_printable_ascii_from_1_32() {
    let strict = "Pod \"x\" is invalid: spec.containers[0].env[0].name: Invalid value: \"MY VAR\": a valid environment \
         variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a \
         digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is \
         '[-._a-zA-Z][-._a-zA-Z0-9]*')";
    assert_eq!(
        written_message("pods", "Pod", 31, pod_with_env("MY VAR"), None),
        strict
    );
    assert_eq!(
        written_message("pods", "Pod", 32, pod_with_env("MY VAR"), None),
        ""
    );
    assert_eq!(
        written_message("pods", "Pod", 28, pod_with_env("my.env-name"), None),
        ""
    );
    assert_eq!(
        written_message("pods", "Pod", 30, pod_with_env(".."), None),
        "Pod \"x\" is invalid: spec.containers[0].env[0].name: Invalid value: \"..\": must not be '..'"
    );
    assert_eq!(
        written_message("pods", "Pod", 36, pod_with_env("A=B"), None),
        "Pod \"x\" is invalid: spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable \
         name must consist only of printable ASCII characters other than '='"
    );
}

#[test]
fn a_relaxed_env_name_the_stored_object_has_stays_writable_before_1_32() {
    let old = pod_with_env("MY VAR");
    assert_eq!(
        written_message("pods", "Pod", 31, pod_with_env("MY VAR"), Some(old.clone())),
        ""
    );
    // A new relaxed name is still refused.
    assert!(written_message("pods", "Pod", 31, pod_with_env("NEW VAR"), Some(old)).contains("\"NEW VAR\""));
    // Templates too: a Deployment's pod template.
    let deployment = |name: &str| {
        json!({"spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_with_env(name)["spec"]}}})
    };
    let info = builtin("apps", "deployments", "Deployment");
    let object = defaulted(&info, v(31), deployment("MY VAR"));
    assert_eq!(validate(&info, v(31), &object, None).len(), 1);
    let old = defaulted(&info, v(31), deployment("MY VAR"));
    assert!(validate(&info, v(31), &object, Some(&old)).is_empty());
}

#[test]
fn a_sidecar_with_a_probe_is_an_init_container_with_a_probe_at_1_28() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
            "readinessProbe": {"tcpSocket": {"port": 15001}}}],
        "containers": [{"name": "app", "image": "nginx"}]
    }});
    assert_eq!(
        written_message("pods", "Pod", 28, pod.clone(), None),
        "Pod \"x\" is invalid: spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers \
         without restartPolicy=Always"
    );
    assert_eq!(written_message("pods", "Pod", 29, pod.clone(), None), "");
    // A 1.28 server updating a Pod a newer member stored with its sidecar keeps it (in use).
    assert_eq!(written_message("pods", "Pod", 28, pod.clone(), Some(pod)), "");
}

fn deployment(strategy: Value, selector: Value) -> Value {
    json!({"spec": {"selector": {"matchLabels": selector}, "strategy": strategy,
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec(json!([{"name": "c", "image": "nginx"}]))}}})
}

#[test]
fn deployment_strategies_as_validate_deployment_strategy_checks_them() {
    let d = |strategy: Value| deployment(strategy, json!({"app": "web"}));
    let message = |minor, strategy| message("apps", "deployments", "Deployment", minor, d(strategy));
    // The famous one: `type` patched to Recreate, `rollingUpdate` left over.
    let recreate = json!({"type": "Recreate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
    let expected = "Deployment.apps \"x\" is invalid: spec.strategy.rollingUpdate: Forbidden: may not be specified \
                    when strategy `type` is 'Recreate'";
    assert_eq!(message(32, recreate.clone()), expected);
    let old = d(json!({"type": "RollingUpdate"}));
    assert_eq!(
        message_update("apps", "deployments", "Deployment", 36, d(recreate), Some(old)),
        expected
    );
    assert_eq!(message(32, json!({"type": "Recreate"})), "");
    let zero = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}});
    assert_eq!(
        message(32, zero.clone()),
        "Deployment.apps \"x\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \
         intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0"
    );
    assert_eq!(
        message(34, zero),
        "Deployment.apps \"x\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not \
         be 0 when `maxSurge` is 0"
    );
    let over =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "110%"}});
    assert_eq!(
        message(33, over.clone()),
        "Deployment.apps \"x\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \
         intstr.IntOrString{Type:1, IntVal:0, StrVal:\"110%\"}: must not be greater than 100%"
    );
    assert_eq!(
        message(34, over),
        "Deployment.apps \"x\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"110%\": \
         must not be greater than 100%"
    );
    let bad = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "half", "maxUnavailable": -1}});
    assert_eq!(
        message(34, bad),
        "Deployment.apps \"x\" is invalid: [spec.strategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be \
         greater than or equal to 0, spec.strategy.rollingUpdate.maxSurge: Invalid value: \"half\": a valid percent \
         string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation \
         is '[0-9]+%')]"
    );
}

#[test]
fn selectors_of_deployments_replica_sets_and_daemon_sets_are_immutable() {
    let web = deployment(json!({"type": "Recreate"}), json!({"app": "web"}));
    let mut changed = deployment(
        json!({"type": "Recreate"}),
        json!({"app": "web", "tier": "front"}),
    );
    changed["spec"]["template"]["metadata"]["labels"]["tier"] = json!("front");
    assert_eq!(
        message_update(
            "apps",
            "deployments",
            "Deployment",
            32,
            changed.clone(),
            Some(web.clone())
        ),
        "Deployment.apps \"x\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:\
         map[string]string{\"app\":\"web\", \"tier\":\"front\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: \
         field is immutable"
    );
    assert_eq!(
        message_update(
            "apps",
            "deployments",
            "Deployment",
            34,
            changed.clone(),
            Some(web.clone())
        ),
        "Deployment.apps \"x\" is invalid: spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\
         \"tier\":\"front\"}}: field is immutable"
    );
    // A metadata-only update passes.
    let mut labelled = web.clone();
    labelled["metadata"] = json!({"labels": {"team": "a"}});
    assert_eq!(
        message_update(
            "apps",
            "deployments",
            "Deployment",
            32,
            labelled,
            Some(web.clone())
        ),
        ""
    );
    for (resource, kind) in [("replicasets", "ReplicaSet"), ("daemonsets", "DaemonSet")] {
        let strip = |mut d: Value| {
            if let Some(spec) = d["spec"].as_object_mut() {
                spec.remove("strategy");
            }
            d
        };
        let got = message_update(
            "apps",
            resource,
            kind,
            30,
            strip(changed.clone()),
            Some(strip(web.clone())),
        );
        assert!(got.ends_with("spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\
             \"web\", \"tier\":\"front\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"), "{got}");
    }
    let expressions = json!({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec(json!([{"name": "c", "image": "nginx"}]))}}});
    let got = message_update("apps", "replicasets", "ReplicaSet", 28, expressions, Some(web));
    assert!(got.contains("Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:\
         []v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"app\", Operator:\"In\", Values:[]string{\"web\"}}}}: \
         field is immutable"), "{got}");
}

#[test]
fn stateful_set_updates_name_the_mutable_fields_of_the_minor() {
    let set = |selector: Value, history: i64| {
        json!({"spec": {"serviceName": "db", "revisionHistoryLimit": history, "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": {"app": "db", "tier": "data"}}, "spec": pod_spec(json!([{"name": "c", "image": "pg"}]))}}})
    };
    let old = set(json!({"app": "db"}), 10);
    let message = |minor, new: Value| {
        message_update(
            "apps",
            "statefulsets",
            "StatefulSet",
            minor,
            new,
            Some(old.clone()),
        )
    };
    let before = "StatefulSet.apps \"x\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than \
                  'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and \
                  'minReadySeconds' are forbidden";
    assert_eq!(message(32, set(json!({"app": "db"}), 2)), before);
    assert_eq!(message(33, set(json!({"app": "db"}), 2)), "");
    assert_eq!(
        message(33, set(json!({"app": "db", "tier": "data"}), 10)),
        "StatefulSet.apps \"x\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than \
         'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', \
         'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
    );
    assert_eq!(message(28, set(json!({"app": "db", "tier": "data"}), 10)), before);
}

#[test]
fn immutable_config_maps_and_secrets_keep_their_data() {
    let old = json!({"immutable": true, "data": {"a": "1"}});
    let message = |new: Value| message_update("", "configmaps", "ConfigMap", 32, new, Some(old.clone()));
    assert_eq!(message(old.clone()), "");
    assert_eq!(
        message(json!({"immutable": true, "data": {"a": "2"}})),
        "ConfigMap \"x\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    assert_eq!(
        message(json!({"data": {"a": "1"}, "binaryData": {"b": "eA=="}})),
        "ConfigMap \"x\" is invalid: [immutable: Forbidden: field is immutable when `immutable` is set, binaryData: \
         Forbidden: field is immutable when `immutable` is set]"
    );
    // A mutable one changes freely, and may become immutable.
    let mutable = json!({"data": {"a": "1"}});
    assert_eq!(
        message_update("", "configmaps", "ConfigMap", 32, old.clone(), Some(mutable)),
        ""
    );
    let secret = json!({"immutable": true, "data": {"a": "eA=="}});
    assert_eq!(
        message_update(
            "",
            "secrets",
            "Secret",
            32,
            json!({"data": {"a": "eQ=="}}),
            Some(secret)
        ),
        "Secret \"x\" is invalid: [immutable: Forbidden: field is immutable when `immutable` is set, data: \
         Forbidden: field is immutable when `immutable` is set]"
    );
}

fn pod_with(port: i64, image: &str) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec(json!([{"name": "c", "image": image,
        "ports": [{"containerPort": port}]}]))})
}

#[test]
fn pod_updates_change_images_deadlines_and_tolerations_only() {
    let old = pod_with(80, "nginx:1.27");
    let message = |new: Value| message_update("", "pods", "Pod", 32, new, Some(old.clone()));
    assert_eq!(message(pod_with(80, "nginx:1.28")), "");
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"]["tier"] = json!("front");
    assert_eq!(message(relabelled), "");
    let refused = message(pod_with(8080, "nginx:1.28"));
    let first = refused.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "Pod \"x\" is invalid: spec: Forbidden: pod updates may not change fields other than \
         `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` \
         (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it \
         was previously negative)"
    );
    // The diff: the old port against the new one, the image change undone.
    assert!(
        refused.contains("-     \"containerPort\": 80,\n+     \"containerPort\": 8080,\n"),
        "{refused}"
    );
    assert!(!refused.contains("nginx:1.28"), "{refused}");
    let mut two = old.clone();
    if let Some(containers) = two["spec"]["containers"].as_array_mut() {
        containers.push(json!({"name": "d", "image": "busybox"}));
    }
    assert_eq!(
        message(two),
        "Pod \"x\" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers"
    );
    let mut deadline = old.clone();
    deadline["spec"]["activeDeadlineSeconds"] = json!(30);
    let mut raised = old.clone();
    raised["spec"]["activeDeadlineSeconds"] = json!(60);
    assert_eq!(message(deadline.clone()), "");
    assert_eq!(
        message_update("", "pods", "Pod", 32, raised, Some(deadline)),
        "Pod \"x\" is invalid: spec.activeDeadlineSeconds: Invalid value: 60: must be less than or equal to previous \
         value"
    );
    let mut tolerated = old.clone();
    tolerated["spec"]["tolerations"] = json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    assert_eq!(message(tolerated.clone()), "");
    assert_eq!(
        message_update("", "pods", "Pod", 32, old.clone(), Some(tolerated)),
        "Pod \"x\" is invalid: spec.tolerations: Forbidden: existing toleration can not be modified except its \
         tolerationSeconds"
    );
}

fn claim(mode: &str, storage: &str) -> Value {
    json!({"spec": {"accessModes": [mode], "resources": {"requests": {"storage": storage}}}})
}

#[test]
fn claim_specs_are_immutable_but_for_a_bound_claims_requests() {
    let old = claim("ReadWriteOnce", "1Gi");
    let message = |minor, new: Value, old: Value| {
        message_update(
            "",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            minor,
            new,
            Some(old),
        )
    };
    assert_eq!(
        message(32, claim("ReadWriteMany", "1Gi"), old.clone()),
        "PersistentVolumeClaim \"x\" is invalid: spec: Forbidden: spec is immutable after creation except \
         resources.requests and volumeAttributesClassName for bound claims\n@@ -1,6 +1,6 @@\n {\n  \"accessModes\": [\n\
         -  \"ReadWriteOnce\"\n+  \"ReadWriteMany\"\n  ],\n  \"resources\": {\n   \"requests\": {\n"
    );
    assert!(
        message(28, claim("ReadWriteMany", "1Gi"), old.clone()).starts_with(
            "PersistentVolumeClaim \"x\" is invalid: spec: Forbidden: spec is immutable after creation \
                          except resources.requests for bound claims\n"
        )
    );
    let bound = |mut c: Value| {
        c["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
        c
    };
    assert_eq!(
        message(32, bound(claim("ReadWriteOnce", "2Gi")), bound(old.clone())),
        ""
    );
    assert_eq!(
        message(31, bound(claim("ReadWriteOnce", "512Mi")), bound(old.clone())),
        "PersistentVolumeClaim \"x\" is invalid: spec.resources.requests.storage: Forbidden: field can not be less \
         than previous value"
    );
    assert_eq!(
        message(32, bound(claim("ReadWriteOnce", "512Mi")), bound(old)),
        "PersistentVolumeClaim \"x\" is invalid: spec.resources.requests.storage: Forbidden: field can not be less \
         than status.capacity"
    );
}
