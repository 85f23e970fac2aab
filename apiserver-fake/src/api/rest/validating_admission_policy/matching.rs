//! Which requests an admission policy and its bindings apply to, for validating and mutating policies
//! alike: upstream's `PolicyMatcher` (`staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/
//! policy_matcher.go`) over `matching.Matcher.Matches` (`.../plugin/policy/matching/matching.go`).
//!
//! A request must match the policy's `matchConstraints` and, when the binding has one, the binding's
//! `matchResources`. Each is matched alike: the namespace selector, the object selector (the webhooks'
//! predicates, [`crate::api::rest::admission::matching`]), then `excludeResourceRules` (a match
//! excludes), then `resourceRules` (none given matches every resource), each rule also naming
//! `resourceNames` when it lists them; with `matchPolicy: Equivalent` (the API's default) a rule also
//! matches the same resource in another version the server serves, which is then the version the
//! policy sees the request in. A selector that does not parse is an error only for a request the
//! rules match, as upstream's.
//!
//! Also the variables that depend on the match: `request` (upstream's `CreateAdmissionRequest`: the
//! webhooks' `AdmissionRequest` without its objects, `kind` and `resource` in the matched version,
//! `userInfo` the requester's) and `namespaceObject` (`CreateNamespaceObject`).

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api::rest::RestRequest;
use crate::api::rest::admission::matching::{
    self, Invocation, MatchPolicy, Rule, namespace_selected, object_selected, rule_matches,
};
use crate::api::rest::admission::review::{self, ReviewVersion};
use crate::api::rest::admission::{Attributes, Operation};
use crate::api::rest::selector::LabelSelector;

/// A `NamedRuleWithOperations`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NamedRule {
    #[serde(flatten)]
    rule: Rule,
    /// The names it is limited to (none: every name).
    #[serde(default)]
    resource_names: Vec<String>,
}

impl NamedRule {
    fn names(&self, name: &str) -> bool {
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name)
    }
}

/// The wire form of `MatchResources`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMatchResources {
    #[serde(default)]
    resource_rules: Vec<NamedRule>,
    #[serde(default)]
    exclude_resource_rules: Vec<NamedRule>,
    #[serde(default)]
    namespace_selector: Option<Value>,
    #[serde(default)]
    object_selector: Option<Value>,
    #[serde(default)]
    match_policy: Option<MatchPolicy>,
}

/// A policy's `matchConstraints` or a binding's `matchResources`.
#[derive(Debug, Clone)]
pub(crate) struct MatchResources {
    resource_rules: Vec<NamedRule>,
    exclude_resource_rules: Vec<NamedRule>,
    /// The selectors, or why they do not parse.
    namespace_selector: Result<LabelSelector, String>,
    object_selector: Result<LabelSelector, String>,
    match_policy: MatchPolicy,
}

impl MatchResources {
    /// Reads a `MatchResources` (absent selectors select everything, an absent `matchPolicy` is the
    /// API's default, `Equivalent`).
    pub(crate) fn parse(value: &Value) -> Result<Self, String> {
        let wire: WireMatchResources = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        Ok(Self {
            resource_rules: wire.resource_rules,
            exclude_resource_rules: wire.exclude_resource_rules,
            namespace_selector: matching::selector(wire.namespace_selector.as_ref()),
            object_selector: matching::selector(wire.object_selector.as_ref()),
            match_policy: wire.match_policy.unwrap_or_default(),
        })
    }

    /// `Matcher.Matches`: `Ok(Some(version))` when the request matches, in the version the rules
    /// matched (the request's own unless an equivalent one did), with `equivalents` the versions the
    /// server serves the resource in and `namespace` the request namespace's object.
    pub(crate) fn matches(
        &self,
        attributes: &Attributes,
        namespace: Option<&Value>,
        equivalents: &[String],
    ) -> Result<Option<String>, String> {
        let namespace_error = match &self.namespace_selector {
            Ok(selector) if !namespace_selected(selector, attributes, namespace) => return Ok(None),
            Ok(_) => None,
            Err(error) => Some(error.clone()),
        };
        let object_error = match &self.object_selector {
            Ok(selector) if !object_selected(selector, attributes) => return Ok(None),
            Ok(_) => None,
            Err(error) => Some(error.clone()),
        };
        if self
            .rules_match(&self.exclude_resource_rules, attributes, equivalents)
            .is_some()
        {
            return Ok(None);
        }
        let version = if self.resource_rules.is_empty() {
            attributes.version.clone()
        } else {
            match self.rules_match(&self.resource_rules, attributes, equivalents) {
                Some(version) => version,
                None => return Ok(None),
            }
        };
        match namespace_error.or(object_error) {
            Some(error) => Err(error),
            None => Ok(Some(version)),
        }
    }

    /// `matchesResourceRules`: the version a rule matched, the request's first, then (under
    /// `Equivalent`) rule by rule the other served versions in order.
    fn rules_match(
        &self,
        rules: &[NamedRule],
        attributes: &Attributes,
        equivalents: &[String],
    ) -> Option<String> {
        if rules
            .iter()
            .any(|r| rule_matches(&r.rule, attributes, &attributes.version) && r.names(&attributes.name))
        {
            return Some(attributes.version.clone());
        }
        if self.match_policy != MatchPolicy::Equivalent {
            return None;
        }
        rules.iter().find_map(|r| {
            equivalents
                .iter()
                .filter(|version| **version != attributes.version)
                .find(|version| rule_matches(&r.rule, attributes, version) && r.names(&attributes.name))
                .cloned()
        })
    }
}

/// A policy's `matchConstraints` (upstream's error when it has none).
pub(crate) fn policy_constraints(policy: &Value) -> Result<MatchResources, String> {
    match policy.pointer("/spec/matchConstraints") {
        None | Some(Value::Null) => Err("policy contained no match constraints, a required field".to_owned()),
        Some(constraints) => MatchResources::parse(constraints),
    }
}

/// A binding's `matchResources`: `None` when it has none (it then applies wherever its policy does).
pub(crate) fn binding_resources(binding: &Value) -> Result<Option<MatchResources>, String> {
    match binding.pointer("/spec/matchResources") {
        None | Some(Value::Null) => Ok(None),
        Some(resources) => MatchResources::parse(resources).map(Some),
    }
}

/// The admission attributes of a policy-admitted create (`old` none) or update of `object`.
pub(crate) fn attributes_of(req: &RestRequest<'_>, object: &Value, old: Option<&Value>) -> Attributes {
    let (operation, options) = match (old, req.info.verb.as_str()) {
        (None, "patch") => (Operation::Create, "PatchOptions"),
        (None, _) => (Operation::Create, "CreateOptions"),
        (Some(_), "patch") => (Operation::Update, "PatchOptions"),
        (Some(_), _) => (Operation::Update, "UpdateOptions"),
    };
    Attributes::of(req, operation, Some(object), old, options)
}

/// The request namespace's object, when the request is in a namespace (a Namespace's own request is
/// not: upstream unsets its namespace).
pub(crate) async fn namespace_of(req: &RestRequest<'_>, attributes: &Attributes) -> Option<Value> {
    let is_namespace = attributes.group.is_empty() && attributes.resource == "namespaces";
    if attributes.namespace.is_empty() || is_namespace {
        return None;
    }
    req.ctx
        .store
        .get(
            &crate::api::rest::lifecycle::namespaces(),
            &crate::store::ObjectKey::cluster(&attributes.namespace),
        )
        .await
        .ok()
}

/// The `request` variable for a policy matched in `version` (`CreateAdmissionRequest`).
pub(crate) fn request_variable(attributes: &Attributes, version: &str) -> Value {
    let invocation = Invocation {
        version: version.to_owned(),
    };
    let mut review = review::request(ReviewVersion::V1, "", attributes, &invocation);
    let mut request = review["request"].take();
    if let Some(map) = request.as_object_mut() {
        map.remove("object");
        map.remove("oldObject");
    }
    request
}

/// The `namespaceObject` variable (`CreateNamespaceObject`): the namespace's spec, status and the
/// metadata fields upstream copies; `null` outside a namespace.
pub(crate) fn namespace_object(namespace: Option<&Value>) -> Value {
    let Some(namespace) = namespace else {
        return Value::Null;
    };
    let mut metadata = Map::new();
    for field in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ] {
        if let Some(value) = namespace.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.to_owned(), value.clone());
        }
    }
    let mut object = Map::new();
    object.insert("metadata".to_owned(), Value::Object(metadata));
    for field in ["spec", "status"] {
        if let Some(value) = namespace.get(field) {
            object.insert(field.to_owned(), value.clone());
        }
    }
    Value::Object(object)
}

/// `object` as a policy matched in `version` sees it: defaulted as stored, labelled with that version
/// (the fake serves a resource alike in every version, so converting is relabelling). A `CONNECT`'s
/// options are no stored object: they are seen as decoded.
pub(crate) fn presented(
    req: &RestRequest<'_>,
    attributes: &Attributes,
    object: &Value,
    version: &str,
) -> Value {
    let mut object = object.clone();
    if attributes.operation != Operation::Connect {
        req.resource.default_stored(&mut object);
    }
    crate::api::rest::object::present(object, &attributes.kind_api_version(version), &attributes.kind)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn attributes(namespace: &str, name: &str, labels: Value) -> Attributes {
        Attributes {
            operation: Operation::Create,
            group: String::new(),
            version: "v1".to_owned(),
            resource: "configmaps".to_owned(),
            subresource: String::new(),
            kind: "ConfigMap".to_owned(),
            kind_api_version: None,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            object: Some(json!({"metadata": {"name": name, "labels": labels}})),
            old_object: None,
            dry_run: false,
            options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
            user: mvp_core::UserInfo {
                name: "alice".to_owned(),
                uid: String::new(),
                groups: vec!["devs".to_owned(), "system:authenticated".to_owned()],
                extra: Default::default(),
            },
        }
    }

    fn configmaps() -> Value {
        json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]})
    }

    fn parse(value: Value) -> MatchResources {
        MatchResources::parse(&value).expect("parses")
    }

    fn matched(resources: &MatchResources, attributes: &Attributes, namespace: Option<&Value>) -> bool {
        resources
            .matches(attributes, namespace, &[])
            .expect("no error")
            .is_some()
    }

    #[test]
    fn namespace_selector_reads_the_namespace_labels() {
        let prod = json!({"metadata": {"name": "prod", "labels": {"env": "prod"}}});
        let dev = json!({"metadata": {"name": "dev", "labels": {"env": "dev"}}});
        let binding = parse(json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}));
        let a = attributes("prod", "x", json!({}));
        assert!(matched(&binding, &a, Some(&prod)));
        assert!(!matched(&binding, &a, Some(&dev)));
        assert!(
            !matched(&binding, &a, None),
            "a namespace not found has no labels"
        );
        let mut cluster = attributes("", "x", json!({}));
        cluster.resource = "nodes".to_owned();
        assert!(
            matched(&binding, &cluster, None),
            "cluster-scoped requests are not exempted"
        );
    }

    #[test]
    fn object_selector_matches_the_new_or_old_labels() {
        let binding = parse(json!({"objectSelector": {"matchLabels": {"team": "web"}}}));
        assert!(matched(
            &binding,
            &attributes("default", "x", json!({"team": "web"})),
            None
        ));
        let mut other = attributes("default", "x", json!({"team": "db"}));
        assert!(!matched(&binding, &other, None));
        other.old_object = Some(json!({"metadata": {"labels": {"team": "web"}}}));
        assert!(matched(&binding, &other, None));
    }

    #[test]
    fn exclude_rules_win_and_resource_names_narrow_rules() {
        let mut excluded = configmaps();
        excluded["resourceNames"] = json!(["kube-root-ca.crt"]);
        let policy = parse(json!({"resourceRules": [configmaps()], "excludeResourceRules": [excluded]}));
        assert!(matched(
            &policy,
            &attributes("default", "settings", json!({})),
            None
        ));
        assert!(!matched(
            &policy,
            &attributes("default", "kube-root-ca.crt", json!({})),
            None
        ));
        let mut named = configmaps();
        named["resourceNames"] = json!(["settings"]);
        let only = parse(json!({"resourceRules": [named]}));
        assert!(matched(
            &only,
            &attributes("default", "settings", json!({})),
            None
        ));
        assert!(!matched(&only, &attributes("default", "other", json!({})), None));
        let secrets = parse(
            json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["*"], "resources": ["secrets"]}]}),
        );
        assert!(!matched(&secrets, &attributes("default", "x", json!({})), None));
        assert!(
            matched(&parse(json!({})), &attributes("default", "x", json!({})), None),
            "no rules: every resource"
        );
    }

    #[test]
    fn equivalent_match_policy_matches_another_served_version() {
        let mut a = attributes("default", "x", json!({}));
        a.group = "stable.example.com".to_owned();
        a.resource = "crontabs".to_owned();
        a.version = "v2".to_owned();
        let rules = json!([{"apiGroups": ["stable.example.com"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["crontabs"]}]);
        let served = ["v2".to_owned(), "v1".to_owned()];
        let equivalent = parse(json!({"resourceRules": rules}));
        assert_eq!(equivalent.matches(&a, None, &served), Ok(Some("v1".to_owned())));
        let exact = parse(json!({"resourceRules": rules, "matchPolicy": "Exact"}));
        assert_eq!(exact.matches(&a, None, &served), Ok(None));
        let excluded = parse(json!({"excludeResourceRules": rules}));
        assert_eq!(
            excluded.matches(&a, None, &served),
            Ok(None),
            "exclusions are equivalent too"
        );
    }

    #[test]
    fn a_bad_selector_is_an_error_only_where_the_rules_match() {
        let bad = json!({"matchExpressions": [{"key": "env", "operator": "Near"}]});
        let resources = parse(json!({"namespaceSelector": bad, "resourceRules": [configmaps()]}));
        let a = attributes("default", "x", json!({}));
        assert!(resources.matches(&a, None, &[]).is_err());
        let mut secret = a.clone();
        secret.resource = "secrets".to_owned();
        assert_eq!(resources.matches(&secret, None, &[]), Ok(None));
    }

    #[test]
    fn policies_need_constraints_and_bindings_may_omit_resources() {
        assert_eq!(
            policy_constraints(&json!({"spec": {}})).err(),
            Some("policy contained no match constraints, a required field".to_owned())
        );
        assert!(binding_resources(&json!({"spec": {"policyName": "p"}})).is_ok_and(|r| r.is_none()));
    }

    #[test]
    fn request_has_the_matched_version_and_the_user() {
        let request = request_variable(&attributes("prod", "x", json!({})), "v1");
        assert_eq!(
            request["userInfo"],
            json!({"username": "alice", "groups": ["devs", "system:authenticated"]})
        );
        assert_eq!(
            request["kind"],
            json!({"group": "", "version": "v1", "kind": "ConfigMap"})
        );
        assert_eq!(request["requestResource"]["resource"], "configmaps");
        assert_eq!(request["namespace"], "prod");
        assert_eq!(request["operation"], "CREATE");
        assert_eq!(request["options"]["kind"], "CreateOptions");
        assert!(request.get("object").is_none() && request.get("oldObject").is_none());
        assert!(request.get("subResource").is_none(), "omitted when empty");
    }

    #[test]
    fn namespace_object_keeps_upstreams_fields() {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "prod", "labels": {"env": "prod"}, "managedFields": [{}], "uid": "u"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        assert_eq!(
            namespace_object(Some(&namespace)),
            json!({"metadata": {"name": "prod", "labels": {"env": "prod"}, "uid": "u"},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        );
        assert_eq!(namespace_object(None), Value::Null);
    }
}
