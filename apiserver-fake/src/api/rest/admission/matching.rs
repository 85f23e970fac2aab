//! Which webhooks a request calls: the `admissionregistration.k8s.io/v1` webhook configurations read
//! into [`Webhook`]s (with the API's defaults), and upstream's `ShouldCallHook`
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`): the namespace
//! selector, the object selector, then the rules (`.../webhook/predicates/rules/rules.go`), then, with
//! `matchPolicy: Equivalent`, the rules against the same resource in the other versions the server
//! serves. Pure: the caller fetches the namespace and knows the served versions.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::match_conditions::MatchCondition;
use super::{Attributes, Operation};
use crate::api::rest::selector::LabelSelector;

/// Upstream's default and largest `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
const MAX_TIMEOUT_SECONDS: u64 = 30;

/// `failurePolicy`: what a failure to call the webhook means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub(crate) enum FailurePolicy {
    /// The request fails (the v1 default).
    #[default]
    Fail,
    /// The webhook is skipped.
    Ignore,
}

/// `matchPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub(crate) enum MatchPolicy {
    /// Rules also match the same resource in another served version (the v1 default).
    #[default]
    Equivalent,
    /// Rules match only the version requested.
    Exact,
}

/// `clientConfig.service`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct ServiceReference {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The URL path (default `/`).
    #[serde(default)]
    pub path: Option<String>,
    /// The Service port (default 443).
    #[serde(default)]
    pub port: Option<u16>,
}

/// `clientConfig`: where the webhook listens and which CA signs its certificate.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookClientConfig {
    /// An `https://` URL.
    #[serde(default)]
    pub url: Option<String>,
    /// A Service in the cluster.
    #[serde(default)]
    pub service: Option<ServiceReference>,
    /// PEM certificates (base64 in JSON) the webhook's serving certificate must chain to.
    #[serde(default)]
    pub ca_bundle: Option<String>,
}

/// One rule of `rules` (`RuleWithOperations`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Rule {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    #[serde(default)]
    pub operations: Vec<String>,
    /// API groups (`""` core, `*` all).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// API versions (`*` all).
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// Resources: `pods`, `pods/status`, `*`, `*/status`, `pods/*`, `*/*`.
    #[serde(default)]
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    #[serde(default)]
    pub scope: Option<String>,
}

/// A webhook of a configuration, as the dispatchers use it.
#[derive(Debug, Clone)]
pub(crate) struct Webhook {
    /// `name` (a fully qualified name such as `deny.example.com`).
    pub name: String,
    /// Where to call it.
    pub client_config: WebhookClientConfig,
    /// What it is called for.
    pub rules: Vec<Rule>,
    /// What a failure to call it means.
    pub failure_policy: FailurePolicy,
    /// Whether rules match equivalent versions.
    pub match_policy: MatchPolicy,
    /// Selects the namespaces (by labels) of the objects it is called for.
    pub namespace_selector: LabelSelector,
    /// Selects the objects (by labels, new or old) it is called for.
    pub object_selector: LabelSelector,
    /// `sideEffects`: `None` and `NoneOnDryRun` are called on dry runs, others refuse them.
    pub side_effects: Option<String>,
    /// `timeoutSeconds` (default 10, at most 30).
    pub timeout: Duration,
    /// AdmissionReview versions it accepts, in its order of preference.
    pub admission_review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub reinvoke_if_needed: bool,
    /// `matchConditions`, evaluated after the rules and selectors match ([`super::match_conditions`]).
    pub match_conditions: Vec<MatchCondition>,
}

/// The wire form of a webhook (`ValidatingWebhook`/`MutatingWebhook`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireWebhook {
    name: String,
    #[serde(default)]
    client_config: WebhookClientConfig,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    failure_policy: Option<FailurePolicy>,
    #[serde(default)]
    match_policy: Option<MatchPolicy>,
    #[serde(default)]
    namespace_selector: Option<Value>,
    #[serde(default)]
    object_selector: Option<Value>,
    #[serde(default)]
    side_effects: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
    #[serde(default)]
    admission_review_versions: Vec<String>,
    #[serde(default)]
    reinvocation_policy: Option<String>,
    #[serde(default)]
    match_conditions: Vec<MatchCondition>,
}

/// A label selector field: absent means every object (the API defaults it to `{}`).
pub(crate) fn selector(value: Option<&Value>) -> Result<LabelSelector, String> {
    match value {
        None | Some(Value::Null) => Ok(LabelSelector::default()),
        Some(value) => LabelSelector::from_label_selector(value),
    }
}

/// The webhooks of a stored configuration, in their order. A webhook the API server would have
/// refused to store (one that does not parse) is skipped with a log line: it can only be there if
/// written around validation.
pub(crate) fn webhooks_of(configuration: &Value) -> Vec<Webhook> {
    let config_name = configuration
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(items) = configuration.get("webhooks").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| match webhook_of(item) {
            Ok(webhook) => Some(webhook),
            Err(error) => {
                tracing::warn!(configuration = config_name, %error, "skipping a webhook that does not parse");
                None
            }
        })
        .collect()
}

fn webhook_of(item: &Value) -> Result<Webhook, String> {
    let wire: WireWebhook = serde_json::from_value(item.clone()).map_err(|e| e.to_string())?;
    Ok(Webhook {
        name: wire.name,
        client_config: wire.client_config,
        rules: wire.rules,
        failure_policy: wire.failure_policy.unwrap_or_default(),
        match_policy: wire.match_policy.unwrap_or_default(),
        namespace_selector: selector(wire.namespace_selector.as_ref())?,
        object_selector: selector(wire.object_selector.as_ref())?,
        side_effects: wire.side_effects,
        timeout: Duration::from_secs(
            wire.timeout_seconds
                .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
                .clamp(1, MAX_TIMEOUT_SECONDS),
        ),
        admission_review_versions: wire.admission_review_versions,
        reinvoke_if_needed: wire.reinvocation_policy.as_deref() == Some("IfNeeded"),
        match_conditions: wire.match_conditions,
    })
}

/// The resource (and so the version and kind) a webhook is called with: the request's own, or, under
/// `matchPolicy: Equivalent`, the equivalent its rules matched (`WebhookInvocation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The version of `resource`/`kind` sent (the group, resource and kind are the request's: the fake
    /// serves a resource under one name in every version).
    pub version: String,
}

/// `rules.Matcher.Matches` for a request on `version` (also the admission policies' rules,
/// [`crate::api::rest::validating_admission_policy::matching`]).
pub(crate) fn rule_matches(rule: &Rule, attributes: &Attributes, version: &str) -> bool {
    let any = |list: &[String], value: &str| list.iter().any(|item| item == "*" || item == value);
    let operation = attributes.operation.as_str();
    let resource = || {
        rule.resources.iter().any(|item| {
            let (res, sub) = item.split_once('/').unwrap_or((item, ""));
            (res == "*" || res == attributes.resource) && (sub == "*" || sub == attributes.subresource)
        })
    };
    let is_namespace = attributes.group.is_empty() && attributes.resource == "namespaces";
    let scope = match rule.scope.as_deref() {
        Some("Namespaced") => !is_namespace && !attributes.namespace.is_empty(),
        Some("Cluster") => is_namespace || attributes.namespace.is_empty(),
        _ => true,
    };
    any(&rule.operations, operation)
        && any(&rule.api_groups, &attributes.group)
        && any(&rule.api_versions, version)
        && resource()
        && scope
}

/// `objectMatcher.MatchObjectSelector`: the new or the old object's labels match. An empty selector
/// matches everything, even a request without objects. An object without `metadata` (a `CONNECT`'s
/// `PodExecOptions`, ...) has no labels to match (upstream's `meta.Accessor` fails on it): a selector
/// that is not empty never matches it, not even `DoesNotExist`.
pub(crate) fn object_selected(selector: &LabelSelector, attributes: &Attributes) -> bool {
    if selector.is_empty() {
        return true;
    }
    [&attributes.object, &attributes.old_object]
        .into_iter()
        .flatten()
        .filter(|object| object.get("metadata").is_some_and(Value::is_object))
        .any(|object| selector.matches(object))
}

/// `namespace.Matcher.MatchNamespaceSelector`: cluster-scoped requests (other than on namespaces) are
/// never exempted; a namespace's own labels are those of the object (old object on delete).
/// `namespace` is the request namespace's object (`None` when it is not found).
pub(crate) fn namespace_selected(
    selector: &LabelSelector,
    attributes: &Attributes,
    namespace: Option<&Value>,
) -> bool {
    if selector.is_empty() {
        return true;
    }
    let is_namespace = attributes.group.is_empty() && attributes.resource == "namespaces";
    if is_namespace {
        let own = attributes.object.as_ref().or(attributes.old_object.as_ref());
        return own.is_some_and(|object| selector.matches(object));
    }
    if attributes.namespace.is_empty() {
        return true;
    }
    selector.matches(namespace.unwrap_or(&Value::Null))
}

/// Whether `webhook` needs the request namespace's labels (so the caller fetches them once).
pub(crate) fn needs_namespace(webhook: &Webhook) -> bool {
    !webhook.namespace_selector.is_empty()
}

/// `ShouldCallHook`: the invocation when `webhook` is called for the request, with `equivalents` the
/// other versions the server serves the request's group/resource in (most preferred first).
pub(crate) fn should_call(
    webhook: &Webhook,
    attributes: &Attributes,
    namespace: Option<&Value>,
    equivalents: &[String],
) -> Option<Invocation> {
    if !namespace_selected(&webhook.namespace_selector, attributes, namespace)
        || !object_selected(&webhook.object_selector, attributes)
    {
        return None;
    }
    if webhook
        .rules
        .iter()
        .any(|rule| rule_matches(rule, attributes, &attributes.version))
    {
        return Some(Invocation {
            version: attributes.version.clone(),
        });
    }
    if webhook.match_policy != MatchPolicy::Equivalent {
        return None;
    }
    // Earlier rules first, then the equivalents in order (upstream's `OuterLoop`).
    webhook.rules.iter().find_map(|rule| {
        equivalents
            .iter()
            .filter(|version| **version != attributes.version)
            .find(|version| rule_matches(rule, attributes, version))
            .map(|version| Invocation {
                version: version.clone(),
            })
    })
}

/// `IsExemptAdmissionConfigurationResource`: webhooks are never called for the configurations that
/// could lock them out.
pub(crate) fn is_exempt(attributes: &Attributes) -> bool {
    attributes.group == "admissionregistration.k8s.io"
        && matches!(
            attributes.resource.as_str(),
            "validatingwebhookconfigurations"
                | "mutatingwebhookconfigurations"
                | "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
}

/// Whether the operation is one a dry run may call the webhook for (`sideEffects` `None` or
/// `NoneOnDryRun`).
pub(crate) fn callable_on_dry_run(webhook: &Webhook) -> bool {
    matches!(webhook.side_effects.as_deref(), Some("None" | "NoneOnDryRun"))
}

impl Operation {
    /// The wire name (`CREATE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn attributes(
        operation: Operation,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
    ) -> Attributes {
        Attributes {
            operation,
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            kind: "Thing".to_owned(),
            kind_api_version: None,
            namespace: "default".to_owned(),
            name: "x".to_owned(),
            object: Some(json!({"metadata": {"name": "x", "labels": {"app": "web"}}})),
            old_object: None,
            dry_run: false,
            options: Value::Null,
            user: mvp_core::UserInfo::default(),
        }
    }

    fn webhook(spec: Value) -> Webhook {
        let mut item =
            json!({"name": "w.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        if let (Some(item), Some(spec)) = (item.as_object_mut(), spec.as_object()) {
            item.extend(spec.clone());
        }
        webhooks_of(&json!({"metadata": {"name": "c"}, "webhooks": [item]}))
            .pop()
            .expect("the webhook parses")
    }

    fn rule(operations: &[&str], groups: &[&str], versions: &[&str], resources: &[&str]) -> Value {
        json!({"operations": operations, "apiGroups": groups, "apiVersions": versions, "resources": resources})
    }

    #[test]
    fn defaults_are_the_v1_api_defaults() {
        let w = webhook(json!({"timeoutSeconds": 99}));
        assert_eq!(w.failure_policy, FailurePolicy::Fail);
        assert_eq!(w.match_policy, MatchPolicy::Equivalent);
        assert_eq!(w.timeout, Duration::from_secs(30));
        assert_eq!(webhook(json!({})).timeout, Duration::from_secs(10));
        assert!(!w.reinvoke_if_needed);
    }

    #[test]
    fn rules_match_operations_groups_versions_and_resources_with_wildcards() {
        let a = attributes(Operation::Create, "apps", "v1", "deployments", "");
        let cases = [
            (rule(&["CREATE"], &["apps"], &["v1"], &["deployments"]), true),
            (rule(&["*"], &["*"], &["*"], &["*"]), true),
            (rule(&["UPDATE"], &["*"], &["*"], &["*"]), false),
            (rule(&["CREATE"], &[""], &["*"], &["*"]), false),
            (rule(&["CREATE"], &["apps"], &["v1beta1"], &["*"]), false),
            (
                rule(&["CREATE"], &["apps"], &["v1"], &["deployments/status"]),
                false,
            ),
            (rule(&["CREATE"], &["apps"], &["v1"], &["replicasets"]), false),
        ];
        for (r, expected) in cases {
            let w = webhook(json!({"rules": [r], "matchPolicy": "Exact"}));
            assert_eq!(should_call(&w, &a, None, &[]).is_some(), expected, "{r}");
        }
    }

    #[test]
    fn subresources_match_only_rules_naming_them() {
        let status = attributes(Operation::Update, "apps", "v1", "deployments", "status");
        let cases = [
            ("*", false),
            ("deployments", false),
            ("*/status", true),
            ("deployments/*", true),
            ("*/*", true),
            ("deployments/scale", false),
        ];
        for (resource, expected) in cases {
            let w = webhook(json!({"rules": [rule(&["*"], &["*"], &["*"], &[resource])]}));
            assert_eq!(
                should_call(&w, &status, None, &[]).is_some(),
                expected,
                "{resource}"
            );
        }
    }

    #[test]
    fn scope_separates_namespaced_from_cluster_requests_and_namespaces_are_cluster_scoped() {
        let namespaced = attributes(Operation::Create, "", "v1", "configmaps", "");
        let mut namespace = attributes(Operation::Create, "", "v1", "namespaces", "");
        namespace.namespace = "x".to_owned();
        let scoped = |scope: &str| {
            let mut r = rule(&["*"], &["*"], &["*"], &["*"]);
            r["scope"] = json!(scope);
            webhook(json!({"rules": [r]}))
        };
        assert!(should_call(&scoped("Namespaced"), &namespaced, None, &[]).is_some());
        assert!(should_call(&scoped("Cluster"), &namespaced, None, &[]).is_none());
        assert!(should_call(&scoped("Cluster"), &namespace, None, &[]).is_some());
        assert!(should_call(&scoped("Namespaced"), &namespace, None, &[]).is_none());
        assert!(should_call(&scoped("*"), &namespace, None, &[]).is_some());
    }

    #[test]
    fn equivalent_match_policy_invokes_with_the_matched_version() {
        let a = attributes(Operation::Create, "stable.example.com", "v2", "crontabs", "");
        let rules = json!([rule(&["*"], &["stable.example.com"], &["v1"], &["crontabs"])]);
        let equivalent = webhook(json!({"rules": rules}));
        let exact = webhook(json!({"rules": rules, "matchPolicy": "Exact"}));
        let served = ["v2".to_owned(), "v1".to_owned()];
        assert_eq!(
            should_call(&equivalent, &a, None, &served),
            Some(Invocation {
                version: "v1".to_owned()
            })
        );
        assert_eq!(should_call(&exact, &a, None, &served), None);
        assert_eq!(should_call(&equivalent, &a, None, &["v2".to_owned()]), None);
    }

    #[test]
    fn object_selector_matches_new_or_old_labels() {
        let all = rule(&["*"], &["*"], &["*"], &["*"]);
        let w = webhook(json!({"rules": [all], "objectSelector": {"matchLabels": {"app": "web"}}}));
        let mut a = attributes(Operation::Update, "", "v1", "configmaps", "");
        assert!(should_call(&w, &a, None, &[]).is_some());
        a.old_object = a.object.take();
        a.object = Some(json!({"metadata": {"labels": {"app": "db"}}}));
        assert!(
            should_call(&w, &a, None, &[]).is_some(),
            "the old object still matches"
        );
        a.old_object = None;
        assert!(should_call(&w, &a, None, &[]).is_none());
        let expressions = webhook(json!({"rules": [all], "objectSelector": {"matchExpressions": [
            {"key": "app", "operator": "NotIn", "values": ["web"]}]}}));
        assert!(should_call(&expressions, &a, None, &[]).is_some());
    }

    #[test]
    fn connect_options_have_no_labels_for_an_object_selector() {
        let connect = rule(&["CONNECT"], &[""], &["v1"], &["pods/exec"]);
        let mut a = attributes(Operation::Connect, "", "v1", "pods", "exec");
        a.object = Some(json!({"kind": "PodExecOptions", "apiVersion": "v1", "command": ["ls"]}));
        let any = webhook(json!({"rules": [connect]}));
        assert!(should_call(&any, &a, None, &[]).is_some());
        let absent = webhook(
            json!({"rules": [connect], "objectSelector": {"matchExpressions": [
            {"key": "exempt", "operator": "DoesNotExist"}]}}),
        );
        assert!(
            should_call(&absent, &a, None, &[]).is_none(),
            "not even DoesNotExist matches an object without metadata"
        );
        let create = webhook(json!({"rules": [rule(&["CREATE"], &[""], &["v1"], &["pods/exec"])]}));
        assert!(should_call(&create, &a, None, &[]).is_none());
    }

    #[test]
    fn namespace_selector_reads_the_namespace_labels_and_spares_cluster_scoped_requests() {
        let all = rule(&["*"], &["*"], &["*"], &["*"]);
        let w = webhook(json!({"rules": [all], "namespaceSelector": {"matchExpressions": [
            {"key": "webhooks", "operator": "Exists"}]}}));
        let a = attributes(Operation::Create, "", "v1", "configmaps", "");
        let labelled = json!({"metadata": {"name": "default", "labels": {"webhooks": "on"}}});
        assert!(should_call(&w, &a, Some(&labelled), &[]).is_some());
        assert!(should_call(&w, &a, Some(&json!({"metadata": {}})), &[]).is_none());
        assert!(should_call(&w, &a, None, &[]).is_none());
        let mut cluster = attributes(Operation::Create, "", "v1", "nodes", "");
        cluster.namespace.clear();
        assert!(should_call(&w, &cluster, None, &[]).is_some());
        let mut namespace = attributes(Operation::Create, "", "v1", "namespaces", "");
        namespace.object = Some(labelled.clone());
        assert!(should_call(&w, &namespace, None, &[]).is_some());
    }

    #[test]
    fn webhook_configurations_are_exempt() {
        let a = attributes(
            Operation::Create,
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "",
        );
        assert!(is_exempt(&a));
        assert!(!is_exempt(&attributes(
            Operation::Create,
            "",
            "v1",
            "configmaps",
            ""
        )));
    }
}
