//! The RBAC objects an authorizer evaluates, and kube-apiserver's evaluation of them
//! (`plugin/pkg/auth/authorizer/rbac`: `RBACAuthorizer.Authorize`, `RuleAllows`, `ResourceMatches`).

use std::collections::HashMap;

use mvp_core::{RequestInfo, UserInfo};
use serde::Deserialize;
use serde_json::Value;

/// One `PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyRule {
    /// Verbs, or `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<String>,
    /// API groups (`""` is core), or `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource`, `*/subresource` or `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names; empty means every object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource paths; a trailing `*` matches a prefix.
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

fn has(values: &[String], wanted: &str) -> bool {
    values.iter().any(|v| v == "*" || v == wanted)
}

impl PolicyRule {
    /// Whether the rule allows the request (`RuleAllows`).
    pub(crate) fn allows(&self, info: &RequestInfo) -> bool {
        if !has(&self.verbs, &info.verb) {
            return false;
        }
        if !info.is_resource_request {
            return self.non_resource_urls.iter().any(|url| {
                url == "*"
                    || url == &info.path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| info.path.starts_with(prefix))
            });
        }
        if !has(&self.api_groups, &info.api_group) || !self.resource_matches(info) {
            return false;
        }
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == &info.name)
    }

    fn resource_matches(&self, info: &RequestInfo) -> bool {
        let combined = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        self.resources.iter().any(|rule| {
            rule == "*"
                || *rule == combined
                || (!info.subresource.is_empty()
                    && rule.strip_prefix("*/") == Some(info.subresource.as_str()))
        })
    }
}

/// A `subjects` entry of a binding.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// The user, group or service account name.
    pub name: String,
    /// The service account's namespace.
    #[serde(default)]
    pub namespace: String,
}

impl Subject {
    /// The subject as upstream's RBAC names it in reasons (`describeSubject`).
    fn describe(&self, binding_namespace: &str) -> String {
        if self.kind == "ServiceAccount" {
            let namespace = if self.namespace.is_empty() {
                binding_namespace
            } else {
                &self.namespace
            };
            return format!("{} {:?}", self.kind, format!("{}/{namespace}", self.name));
        }
        format!("{} {:?}", self.kind, self.name)
    }

    /// Whether `user` is this subject (`appliesTo`).
    fn applies_to(&self, user: &UserInfo, binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => user.name == self.name,
            "Group" => user.groups.iter().any(|g| g == &self.name),
            "ServiceAccount" => {
                let namespace = if self.namespace.is_empty() {
                    binding_namespace
                } else {
                    &self.namespace
                };
                user.name == format!("system:serviceaccount:{namespace}:{}", self.name)
            }
            _ => false,
        }
    }
}

/// A binding's `roleRef`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct RoleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The role's name.
    pub name: String,
}

/// A RoleBinding (with its namespace) or a ClusterRoleBinding (namespace empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The binding's name (named in the reason an allowed review gives).
    pub name: String,
    /// The binding's namespace; empty for a ClusterRoleBinding.
    pub namespace: String,
    /// The role it grants.
    pub role_ref: RoleRef,
    /// Whom it grants it to.
    pub subjects: Vec<Subject>,
}

/// A ClusterRole's `aggregationRule` (its `matchLabels` selectors).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Aggregation {
    /// One map of required labels per selector; a role matching any selector is aggregated.
    pub selectors: Vec<HashMap<String, String>>,
}

/// A ClusterRole as the policy needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ClusterRole {
    /// Its labels (what aggregation selects on).
    pub labels: HashMap<String, String>,
    /// Its own rules.
    pub rules: Vec<PolicyRule>,
    /// Its aggregation rule, if any.
    pub aggregation: Option<Aggregation>,
}

/// Everything RBAC decides with: roles, cluster roles and bindings as the store holds them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    /// Roles by `(namespace, name)`.
    pub roles: HashMap<(String, String), Vec<PolicyRule>>,
    /// Cluster roles by name, their aggregated rules already merged in.
    pub cluster_roles: HashMap<String, ClusterRole>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<Binding>,
    /// RoleBindings by namespace.
    pub role_bindings: HashMap<String, Vec<Binding>>,
}

fn rules_of(object: &Value) -> Vec<PolicyRule> {
    object
        .get("rules")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default()
}

fn string_map(value: Option<&Value>) -> HashMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A ClusterRole object as the policy sees it.
pub(crate) fn cluster_role(object: &Value) -> ClusterRole {
    let aggregation = object.get("aggregationRule").map(|rule| Aggregation {
        selectors: rule
            .get("clusterRoleSelectors")
            .and_then(Value::as_array)
            .map(|selectors| {
                selectors
                    .iter()
                    .map(|s| string_map(s.get("matchLabels")))
                    .collect()
            })
            .unwrap_or_default(),
    });
    ClusterRole {
        labels: string_map(object.pointer("/metadata/labels")),
        rules: rules_of(object),
        aggregation,
    }
}

/// A binding object (`namespace` empty for ClusterRoleBindings); `None` when it has no usable roleRef.
pub(crate) fn binding(object: &Value) -> Option<Binding> {
    Some(Binding {
        name: name_of(object),
        namespace: object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        role_ref: serde_json::from_value(object.get("roleRef")?.clone()).ok()?,
        subjects: object
            .get("subjects")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default(),
    })
}

fn name_of(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The rules `role`'s aggregation rule selects from `roles` (its own excluded), in name order, each
/// once: what kube-controller-manager's clusterrole-aggregation controller writes into it.
pub(crate) fn aggregated_rules(
    name: &str,
    aggregation: &Aggregation,
    roles: &HashMap<String, ClusterRole>,
) -> Vec<PolicyRule> {
    let mut names: Vec<&String> = roles
        .iter()
        .filter(|(other, role)| {
            other.as_str() != name
                && aggregation
                    .selectors
                    .iter()
                    .any(|selector| selector.iter().all(|(k, v)| role.labels.get(k) == Some(v)))
        })
        .map(|(other, _)| other)
        .collect();
    names.sort();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for other in names {
        for rule in &roles[other].rules {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    rules
}

impl Policy {
    /// The policy of these objects (each list as the store returns it).
    pub(crate) fn from_objects(
        roles: &[Value],
        cluster_roles: &[Value],
        role_bindings: &[Value],
        cluster_role_bindings: &[Value],
    ) -> Self {
        let mut policy = Self::default();
        for role in roles {
            let namespace = role
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            policy
                .roles
                .insert((namespace.to_owned(), name_of(role)), rules_of(role));
        }
        for role in cluster_roles {
            policy.cluster_roles.insert(name_of(role), cluster_role(role));
        }
        // Aggregated roles select aggregated roles (`edit` carries `aggregate-to-admin`, `view`
        // `aggregate-to-edit`): repeat until nothing changes, at most once per role.
        for _ in 0..policy.cluster_roles.len() {
            let aggregated: Vec<(String, Vec<PolicyRule>)> = policy
                .cluster_roles
                .iter()
                .filter_map(|(name, role)| {
                    let aggregation = role.aggregation.as_ref()?;
                    let rules = aggregated_rules(name, aggregation, &policy.cluster_roles);
                    (rules != role.rules).then(|| (name.clone(), rules))
                })
                .collect();
            if aggregated.is_empty() {
                break;
            }
            for (name, rules) in aggregated {
                if let Some(role) = policy.cluster_roles.get_mut(&name) {
                    role.rules = rules;
                }
            }
        }
        policy.cluster_role_bindings = cluster_role_bindings.iter().filter_map(binding).collect();
        for b in role_bindings.iter().filter_map(binding) {
            policy
                .role_bindings
                .entry(b.namespace.clone())
                .or_default()
                .push(b);
        }
        policy
    }

    /// The bindings that apply to `user` for a request in `namespace`, in upstream's visiting order
    /// (ClusterRoleBindings, then the namespace's RoleBindings), each with the first subject that
    /// matched and the rules of its role (`Err` with upstream's error when the role does not exist).
    fn bound_rules<'p>(
        &'p self,
        user: &UserInfo,
        namespace: &str,
    ) -> impl Iterator<Item = (&'p Binding, &'p Subject, Result<&'p [PolicyRule], String>)> {
        let namespaced = (!namespace.is_empty())
            .then(|| self.role_bindings.get(namespace))
            .flatten()
            .into_iter()
            .flatten();
        self.cluster_role_bindings
            .iter()
            .chain(namespaced)
            .filter_map(move |binding| {
                let subject = binding
                    .subjects
                    .iter()
                    .find(|s| s.applies_to(user, &binding.namespace))?;
                let rules = match binding.role_ref.kind.as_str() {
                    "ClusterRole" => self.cluster_roles.get(&binding.role_ref.name).map(|r| &r.rules),
                    _ => self
                        .roles
                        .get(&(binding.namespace.clone(), binding.role_ref.name.clone())),
                };
                let rules = rules.map(Vec::as_slice).ok_or_else(|| {
                    let kind = if binding.role_ref.kind == "ClusterRole" {
                        "clusterrole"
                    } else {
                        "role"
                    };
                    format!(
                        "{kind}.rbac.authorization.k8s.io {:?} not found",
                        binding.role_ref.name
                    )
                });
                Some((binding, subject, rules))
            })
    }

    /// RBAC's decision: `Ok` with upstream's reason (`RBAC: allowed by ClusterRoleBinding "x" of
    /// ClusterRole "y" to Group "z"`) when a rule bound to `user` allows the request; otherwise the
    /// reason (`RBAC: <errors>` when a binding names a role that does not exist, else empty).
    pub(crate) fn authorize(&self, user: &UserInfo, info: &RequestInfo) -> Result<String, String> {
        let mut errors = Vec::new();
        for (binding, subject, rules) in self.bound_rules(user, &info.namespace) {
            match rules {
                Ok(rules) if rules.iter().any(|rule| rule.allows(info)) => {
                    return Ok(format!("RBAC: allowed by {}", describe(binding, subject)));
                }
                Ok(_) => {}
                Err(error) => errors.push(error),
            }
        }
        Err(aggregate(&errors)
            .map(|e| format!("RBAC: {e}"))
            .unwrap_or_default())
    }

    /// Every rule bound to `user` in `namespace` (cluster-wide bindings' too), in visiting order, and
    /// the aggregated error of bindings whose role does not exist (`DefaultRuleResolver.RulesFor`, what
    /// a `SelfSubjectRulesReview` lists).
    pub(crate) fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Option<String>) {
        let mut found = Vec::new();
        let mut errors = Vec::new();
        for (_, _, rules) in self.bound_rules(user, namespace) {
            match rules {
                Ok(rules) => found.extend(rules.iter().cloned()),
                Err(error) => errors.push(error),
            }
        }
        (found, aggregate(&errors))
    }
}

/// Where an allowing rule came from, as upstream's describers say it.
fn describe(binding: &Binding, subject: &Subject) -> String {
    if binding.namespace.is_empty() {
        format!(
            "ClusterRoleBinding {:?} of {} {:?} to {}",
            binding.name,
            binding.role_ref.kind,
            binding.role_ref.name,
            subject.describe("")
        )
    } else {
        format!(
            "RoleBinding {:?} of {} {:?} to {}",
            format!("{}/{}", binding.name, binding.namespace),
            binding.role_ref.kind,
            binding.role_ref.name,
            subject.describe(&binding.namespace)
        )
    }
}

/// Go's `utilerrors.NewAggregate(errs).Error()`: nothing, the one error, or `[a, b]`.
fn aggregate(errors: &[String]) -> Option<String> {
    match errors {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn info(method: &str, uri: &str) -> RequestInfo {
        RequestInfo::from_parts(&method.parse().unwrap(), &uri.parse().unwrap()).unwrap()
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        let mut user = UserInfo::new(name);
        user.groups = groups.iter().map(|g| (*g).to_owned()).collect();
        user
    }

    fn rule(value: Value) -> PolicyRule {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_names_and_paths() {
        let jobs = info("GET", "/apis/batch/v1/namespaces/default/jobs");
        let job_status = info("PUT", "/apis/batch/v1/namespaces/default/jobs/j/status");
        let get_j = info("GET", "/apis/batch/v1/namespaces/default/jobs/j");
        assert!(
            rule(json!({"verbs": ["list"], "apiGroups": ["batch"], "resources": ["jobs"]})).allows(&jobs)
        );
        assert!(
            !rule(json!({"verbs": ["get"], "apiGroups": ["batch"], "resources": ["jobs"]})).allows(&jobs)
        );
        assert!(!rule(json!({"verbs": ["list"], "apiGroups": [""], "resources": ["jobs"]})).allows(&jobs));
        assert!(rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})).allows(&job_status));
        assert!(
            !rule(json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["jobs"]}))
                .allows(&job_status)
        );
        assert!(
            rule(json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["jobs/status"]}))
                .allows(&job_status)
        );
        assert!(
            rule(json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["*/status"]}))
                .allows(&job_status)
        );
        let named = rule(
            json!({"verbs": ["get", "list"], "apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": ["j"]}),
        );
        assert!(named.allows(&get_j));
        assert!(!named.allows(&jobs), "a list names no object");
        let paths = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
        assert!(paths.allows(&info("GET", "/healthz")));
        assert!(paths.allows(&info("GET", "/apis/batch")));
        assert!(!paths.allows(&info("GET", "/version")));
        assert!(!paths.allows(&jobs), "path rules never allow resource requests");
    }

    #[test]
    fn bindings_grant_to_users_groups_and_service_accounts_in_their_scope() {
        let policy = Policy::from_objects(
            &[
                json!({"metadata": {"name": "jobs-reader", "namespace": "default"},
                     "rules": [{"verbs": ["list"], "apiGroups": ["batch"], "resources": ["jobs"]}]}),
            ],
            &[
                json!({"metadata": {"name": "agg", "labels": {"x": "y"}}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}]}),
                json!({"metadata": {"name": "top"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}),
            ],
            &[
                json!({"metadata": {"name": "b", "namespace": "default"}, "roleRef": {"kind": "Role", "name": "jobs-reader"},
                     "subjects": [{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "bot"}]}),
            ],
            &[
                json!({"metadata": {"name": "v"}, "roleRef": {"kind": "ClusterRole", "name": "top"}, "subjects": [{"kind": "Group", "name": "qa"}]}),
                json!({"metadata": {"name": "gone"}, "roleRef": {"kind": "ClusterRole", "name": "missing"}, "subjects": [{"kind": "User", "name": "bob"}]}),
            ],
        );
        let jobs = info("GET", "/apis/batch/v1/namespaces/default/jobs");
        assert_eq!(
            policy.authorize(&user("jane", &[]), &jobs),
            Ok(r#"RBAC: allowed by RoleBinding "b/default" of Role "jobs-reader" to User "jane""#.to_owned())
        );
        assert_eq!(
            policy.authorize(&user("system:serviceaccount:default:bot", &[]), &jobs),
            Ok(
                r#"RBAC: allowed by RoleBinding "b/default" of Role "jobs-reader" to ServiceAccount "bot/default""#
                    .to_owned()
            )
        );
        let elsewhere = info("GET", "/apis/batch/v1/namespaces/other/jobs");
        assert_eq!(
            policy.authorize(&user("jane", &[]), &elsewhere),
            Err(String::new())
        );
        assert_eq!(
            policy.authorize(&user("kim", &["qa"]), &info("GET", "/version")),
            Ok(r#"RBAC: allowed by ClusterRoleBinding "v" of ClusterRole "top" to Group "qa""#.to_owned()),
            "aggregated rule"
        );
        let (rules, error) = policy.rules_for(&user("jane", &["qa"]), "default");
        assert_eq!(
            rules.len(),
            2,
            "the aggregated cluster rule, then the namespace's: {rules:?}"
        );
        assert_eq!(rules[0].non_resource_urls, ["/version"]);
        assert_eq!(rules[1].resources, ["jobs"]);
        assert_eq!(error, None);
        let (rules, error) = policy.rules_for(&user("bob", &[]), "default");
        assert!(rules.is_empty());
        assert_eq!(
            error.as_deref(),
            Some(r#"clusterrole.rbac.authorization.k8s.io "missing" not found"#)
        );
        assert_eq!(
            policy.authorize(&user("bob", &[]), &jobs),
            Err("RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found".to_owned())
        );
    }
}
