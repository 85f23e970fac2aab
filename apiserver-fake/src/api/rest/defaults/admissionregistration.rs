//! Defaults of `admissionregistration.k8s.io/v1` webhook configurations:
//! `pkg/apis/admissionregistration/v1/defaults.go` (`SetDefaults_ValidatingWebhook`,
//! `SetDefaults_MutatingWebhook`, `SetDefaults_Rule`, `SetDefaults_ServiceReference`). What a client
//! reads back is what the admission chain runs with: `timeoutSeconds: 10`, `failurePolicy: Fail`,
//! `matchPolicy: Equivalent`, empty selectors, each rule's `scope: "*"`, a service's `port: 443` (and
//! `reinvocationPolicy: Never` for mutating webhooks).

use serde_json::{Map, Value, json};

use super::{default_missing, each_object, object_at};

/// Every webhook of a Validating- (`mutating` false) or MutatingWebhookConfiguration.
pub(crate) fn set_defaults_webhook_configuration(configuration: &mut Map<String, Value>, mutating: bool) {
    each_object(configuration, "webhooks", |webhook| {
        default_missing(webhook, "failurePolicy", json!("Fail"));
        default_missing(webhook, "matchPolicy", json!("Equivalent"));
        default_missing(webhook, "namespaceSelector", json!({}));
        default_missing(webhook, "objectSelector", json!({}));
        default_missing(webhook, "timeoutSeconds", json!(10));
        if mutating {
            default_missing(webhook, "reinvocationPolicy", json!("Never"));
        }
        each_object(webhook, "rules", |rule| {
            default_missing(rule, "scope", json!("*"))
        });
        if let Some(service) =
            object_at(webhook, "clientConfig").and_then(|config| object_at(config, "service"))
        {
            default_missing(service, "port", json!(443));
        }
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{builtin, defaulted, v};

    #[test]
    fn webhooks_get_upstreams_defaults_and_keep_what_is_set() {
        let resource = builtin(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
        );
        let object = defaulted(
            &resource,
            v(36),
            json!({"webhooks": [
                {"name": "a.example.com", "clientConfig": {"service": {"namespace": "n", "name": "s"}},
                 "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
                {"name": "b.example.com", "clientConfig": {"url": "https://x"}, "timeoutSeconds": 3,
                 "failurePolicy": "Ignore", "reinvocationPolicy": "IfNeeded"}
            ]}),
        );
        let first = &object["webhooks"][0];
        assert_eq!(first["failurePolicy"], "Fail");
        assert_eq!(first["matchPolicy"], "Equivalent");
        assert_eq!(first["namespaceSelector"], json!({}));
        assert_eq!(first["objectSelector"], json!({}));
        assert_eq!(first["timeoutSeconds"], 10);
        assert_eq!(first["reinvocationPolicy"], "Never");
        assert_eq!(first["rules"][0]["scope"], "*");
        assert_eq!(first["clientConfig"]["service"]["port"], 443);
        let second = &object["webhooks"][1];
        assert_eq!(second["timeoutSeconds"], 3);
        assert_eq!(second["failurePolicy"], "Ignore");
        assert_eq!(second["reinvocationPolicy"], "IfNeeded");
        assert!(second["clientConfig"].get("service").is_none());

        let validating = builtin(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        );
        let object = defaulted(
            &validating,
            v(36),
            json!({"webhooks": [{"name": "a.example.com"}]}),
        );
        assert!(object["webhooks"][0].get("reinvocationPolicy").is_none());
        assert_eq!(object["webhooks"][0]["timeoutSeconds"], 10);
    }
}
