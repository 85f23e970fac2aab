//! Defaults of `networking.k8s.io/v1`: `pkg/apis/networking/v1/defaults.go`
//! (`SetDefaults_NetworkPolicy`, `SetDefaults_NetworkPolicyPort`). Ingress has no defaults in `v1`;
//! its status always serializes `loadBalancer: {}` (a struct), which is added here.

use serde_json::{Map, Value, json};

use super::{default_missing, each_object, ensure_object, object_at};

/// `SetDefaults_NetworkPolicy`: `policyTypes` `[Ingress]`, plus `Egress` when egress rules are given;
/// `SetDefaults_NetworkPolicyPort`: `protocol: TCP`.
pub(crate) fn set_defaults_network_policy(policy: &mut Map<String, Value>) {
    let Some(spec) = ensure_object(policy, "spec") else {
        return;
    };
    for direction in ["ingress", "egress"] {
        each_object(spec, direction, |rule| {
            each_object(rule, "ports", |port| {
                default_missing(port, "protocol", json!("TCP"))
            });
        });
    }
    let empty = |key: &str| spec.get(key).and_then(Value::as_array).is_none_or(Vec::is_empty);
    if empty("policyTypes") {
        let mut types = vec![json!("Ingress")];
        if !empty("egress") {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".to_owned(), Value::Array(types));
    }
}

/// Ingress: `status.loadBalancer: {}` when a status is present.
pub(crate) fn set_defaults_ingress(ingress: &mut Map<String, Value>) {
    if let Some(status) = object_at(ingress, "status") {
        default_missing(status, "loadBalancer", json!({}));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{builtin, defaulted, v};

    #[test]
    fn network_policy_types_and_ports() {
        let resource = builtin("networking.k8s.io", "networkpolicies", "NetworkPolicy");
        let ingress_only = defaulted(
            &resource,
            v(36),
            json!({"spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}}),
        );
        assert_eq!(
            ingress_only,
            json!({"spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "TCP"}]}],
                   "policyTypes": ["Ingress"]}})
        );
        let both = defaulted(
            &resource,
            v(36),
            json!({"spec": {"podSelector": {}, "egress": [{}]}}),
        );
        assert_eq!(both["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        let explicit = defaulted(&resource, v(36), json!({"spec": {"policyTypes": ["Egress"]}}));
        assert_eq!(explicit["spec"]["policyTypes"], json!(["Egress"]));
    }

    #[test]
    fn ingress_status() {
        let resource = builtin("networking.k8s.io", "ingresses", "Ingress");
        let got = defaulted(&resource, v(36), json!({"spec": {}, "status": {}}));
        assert_eq!(got, json!({"spec": {}, "status": {"loadBalancer": {}}}));
    }
}
