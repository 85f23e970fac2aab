//! Authorization: kube-apiserver's `--authorization-mode`: `AlwaysAllow` (the default), `AlwaysDeny`,
//! `RBAC` (on the store's Roles and bindings, `crate::chain::rbac`) and `Node` (which has an opinion only on
//! kubelets' requests; the fake has no kubelets, so it never has one), behind the `Authorizer` seam.
//!
//! As upstream, the members of `system:masters` are always allowed (the privileged-group authorizer
//! kube-apiserver puts in front of the configured modes), and the modes form a union: the first mode
//! that allows or denies decides; when every mode has no opinion the request is forbidden, with the
//! modes' reasons joined. A forbidden request gets upstream's `Forbidden` Status (`responsewriters.Forbidden`).
//! Authorization runs before the MVP filter, so a 403 is always answered by the server the client
//! talked to, never by a peer.
//!
//! Its filter, `authorize_request`, is kube-apiserver's `WithAuthorization`, the last stage before the
//! request deadline: the audit, request log, priority and fairness and metrics stages outside it see
//! a 403 as they see any answer. (Impersonation is authorized too, by the authentication filter: the
//! `impersonation` module.)

use std::str::FromStr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mvp_core::{RequestInfo, UserInfo};

use super::{ServerContext, request_info};
use crate::api::status::Status;
use crate::store::GroupResource;

/// The group whose members may do everything (`user.SystemPrivilegedGroup`).
pub(crate) const PRIVILEGED_GROUP: &str = "system:masters";

/// One `--authorization-mode` the fake implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Allows every request.
    AlwaysAllow,
    /// Has no opinion on any request, with the reason "Everything is forbidden." (upstream's wording), so
    /// only `system:masters` get through.
    AlwaysDeny,
    /// Role-based access control on the store's RBAC objects.
    Rbac,
    /// The node authorizer: an opinion only on requests of `system:node:<name>` users in
    /// `system:nodes`; the fake has no kubelets, so it has none.
    Node,
}

impl AuthorizationMode {
    /// Every mode the fake implements, in upstream's order of `authzmodes.AuthorizationModeChoices`;
    /// `--help` and the parser both read it.
    pub const ALL: [AuthorizationMode; 4] = [
        AuthorizationMode::AlwaysAllow,
        AuthorizationMode::AlwaysDeny,
        AuthorizationMode::Node,
        AuthorizationMode::Rbac,
    ];

    /// The modes kube-apiserver knows that the fake does not implement.
    pub const UNSUPPORTED: [&'static str; 2] = ["ABAC", "Webhook"];

    /// The mode's name on the command line (upstream's spelling).
    pub fn name(self) -> &'static str {
        match self {
            Self::AlwaysAllow => "AlwaysAllow",
            Self::AlwaysDeny => "AlwaysDeny",
            Self::Rbac => "RBAC",
            Self::Node => "Node",
        }
    }

    /// The names of [`AuthorizationMode::ALL`], comma-separated.
    pub fn implemented() -> String {
        Self::ALL.map(Self::name).join(",")
    }

    /// The help text of `--authorization-mode`: upstream's sentence, with the implemented modes.
    pub fn flag_help() -> String {
        format!(
            "Ordered list of plug-ins to do authorization on secure port. Comma-delimited list of: {}. \
             (The fake implements these; {} are refused. Members of system:masters are always allowed, \
             as upstream.)",
            Self::implemented(),
            Self::UNSUPPORTED.join(" and ")
        )
    }
}

/// Why `--authorization-mode` was rejected; one line, kube-apiserver's wording where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorizationModeError {
    /// Not a mode kube-apiserver knows.
    #[error("authorization-mode {0:?} is not a valid mode")]
    Invalid(String),
    /// A mode kube-apiserver knows but the fake does not implement.
    #[error(
        "authorization-mode {0:?} is not supported by apiserver-fake (supported: {modes})",
        modes = AuthorizationMode::implemented()
    )]
    Unsupported(String),
    /// The same mode twice.
    #[error("authorization-mode {0:?} has mode specified more than once")]
    Repeated(String),
    /// An empty list.
    #[error("at least one authorization-mode must be passed")]
    Empty,
}

impl FromStr for AuthorizationMode {
    type Err = AuthorizationModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(mode) = Self::ALL.into_iter().find(|mode| mode.name() == s) {
            return Ok(mode);
        }
        if Self::UNSUPPORTED.contains(&s) {
            return Err(AuthorizationModeError::Unsupported(s.to_owned()));
        }
        Err(AuthorizationModeError::Invalid(s.to_owned()))
    }
}

/// What an authorizer says about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The request may proceed.
    Allow,
    /// The request is forbidden; the reason is appended to the 403 message when not empty.
    Deny(String),
}

/// The seam for a policy engine: decides whether `user` may make the request `info` describes.
pub(crate) trait Authorize: Send + Sync + std::fmt::Debug {
    /// The decision for one request.
    fn authorize(&self, user: &UserInfo, info: &RequestInfo) -> Decision;
}

/// The union of the configured modes behind the privileged-group check.
#[derive(Debug, Clone)]
pub(crate) struct Authorizer {
    modes: Vec<AuthorizationMode>,
    /// The RBAC policy, when `RBAC` is one of the modes (fed by [`crate::chain::rbac::run_controller`]).
    rbac: Option<std::sync::Arc<crate::chain::rbac::RbacAuthorizer>>,
}

impl PartialEq for Authorizer {
    fn eq(&self, other: &Self) -> bool {
        self.modes == other.modes
    }
}

impl Eq for Authorizer {}

impl Authorizer {
    /// Parses `--authorization-mode` (comma-separated, in order).
    pub(crate) fn from_flag(value: &str) -> Result<Self, AuthorizationModeError> {
        let mut modes = Vec::new();
        for raw in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let mode: AuthorizationMode = raw.parse()?;
            if modes.contains(&mode) {
                return Err(AuthorizationModeError::Repeated(raw.to_owned()));
            }
            modes.push(mode);
        }
        if modes.is_empty() {
            return Err(AuthorizationModeError::Empty);
        }
        let rbac = modes
            .contains(&AuthorizationMode::Rbac)
            .then(std::sync::Arc::default);
        Ok(Self { modes, rbac })
    }

    /// The RBAC authorizer, when `RBAC` is configured.
    pub(crate) fn rbac(&self) -> Option<&std::sync::Arc<crate::chain::rbac::RbacAuthorizer>> {
        self.rbac.as_ref()
    }

    /// Whether every request is allowed (no check needed on the hot path).
    pub(crate) fn allows_everything(&self) -> bool {
        self.modes.first() == Some(&AuthorizationMode::AlwaysAllow)
    }
}

impl Default for Authorizer {
    /// kube-apiserver's default, `AlwaysAllow`.
    fn default() -> Self {
        Self {
            modes: vec![AuthorizationMode::AlwaysAllow],
            rbac: None,
        }
    }
}

/// What the authorizer chain says about one request, as a `SubjectAccessReviewStatus` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Review {
    /// Some mode allowed the request.
    pub allowed: bool,
    /// Upstream's reason: the allowing mode's (`RBAC: allowed by …`, or empty), else every mode's
    /// non-empty reason joined by newlines.
    pub reason: String,
}

/// The rules a user has in a namespace, as a `SelfSubjectRulesReview` reports them (upstream's union
/// of the modes' `RulesFor`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Rules {
    /// Rules on resources (`verbs`, `apiGroups`, `resources`, `resourceNames`).
    pub resource_rules: Vec<crate::chain::rbac::policy::PolicyRule>,
    /// Rules on non-resource URLs (`verbs`, `nonResourceURLs`).
    pub non_resource_rules: Vec<crate::chain::rbac::policy::PolicyRule>,
    /// Whether some mode could not enumerate what it allows (upstream: the node authorizer for a
    /// node's user, webhooks).
    pub incomplete: bool,
    /// The modes' errors (missing roles, a node's user), joined as Go's aggregate.
    pub evaluation_error: String,
}

impl Authorizer {
    /// The union's decision with its reason (a `SubjectAccessReview`'s status).
    pub(crate) fn review(&self, user: &UserInfo, info: &RequestInfo) -> Review {
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Review {
                allowed: true,
                reason: String::new(),
            };
        }
        let mut reasons = Vec::new();
        for mode in &self.modes {
            match mode {
                AuthorizationMode::AlwaysAllow => {
                    return Review {
                        allowed: true,
                        reason: String::new(),
                    };
                }
                AuthorizationMode::AlwaysDeny => reasons.push("Everything is forbidden.".to_owned()),
                AuthorizationMode::Node => {}
                AuthorizationMode::Rbac => match self.rbac.as_ref().map(|rbac| rbac.authorize(user, info)) {
                    Some(Ok(reason)) => {
                        return Review {
                            allowed: true,
                            reason,
                        };
                    }
                    Some(Err(reason)) if !reason.is_empty() => reasons.push(reason),
                    _ => {}
                },
            }
        }
        Review {
            allowed: false,
            reason: reasons.join("\n"),
        }
    }

    /// The rules `user` has in `namespace`: the union of the modes' `RulesFor` (`AlwaysAllow`: every
    /// verb on everything; `AlwaysDeny`: none; `RBAC`: the bound rules, split into resource and
    /// non-resource rules as upstream's `RBACAuthorizer.RulesFor`; `Node`: nothing, and incomplete
    /// with upstream's error for a node's user). The privileged group has no rule resolver upstream,
    /// so `system:masters` sees what the other modes give it.
    pub(crate) fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        use crate::chain::rbac::policy::PolicyRule;
        let mut rules = Rules::default();
        let mut errors = Vec::new();
        let all = |values: &[&str]| values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>();
        for mode in &self.modes {
            match mode {
                AuthorizationMode::AlwaysAllow => {
                    rules.resource_rules.push(PolicyRule {
                        verbs: all(&["*"]),
                        api_groups: all(&["*"]),
                        resources: all(&["*"]),
                        ..PolicyRule::default()
                    });
                    rules.non_resource_rules.push(PolicyRule {
                        verbs: all(&["*"]),
                        non_resource_urls: all(&["*"]),
                        ..PolicyRule::default()
                    });
                }
                AuthorizationMode::AlwaysDeny => {}
                AuthorizationMode::Node => {
                    let is_node = user.name.starts_with("system:node:")
                        && user.groups.iter().any(|g| g == "system:nodes");
                    if is_node {
                        rules.incomplete = true;
                        errors.push("node authorizer does not support user rule resolution".to_owned());
                    }
                }
                AuthorizationMode::Rbac => {
                    let Some(rbac) = &self.rbac else { continue };
                    let (bound, error) = rbac.rules_for(user, namespace);
                    for rule in bound {
                        if !rule.resources.is_empty() {
                            rules.resource_rules.push(PolicyRule {
                                non_resource_urls: Vec::new(),
                                ..rule.clone()
                            });
                        }
                        if !rule.non_resource_urls.is_empty() {
                            rules.non_resource_rules.push(PolicyRule {
                                verbs: rule.verbs.clone(),
                                non_resource_urls: rule.non_resource_urls.clone(),
                                ..PolicyRule::default()
                            });
                        }
                    }
                    errors.extend(error);
                }
            }
        }
        rules.evaluation_error = match errors.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        rules
    }
}

impl Authorize for Authorizer {
    fn authorize(&self, user: &UserInfo, info: &RequestInfo) -> Decision {
        let review = self.review(user, info);
        if review.allowed {
            Decision::Allow
        } else {
            Decision::Deny(review.reason)
        }
    }
}

/// The filter: upstream's 403 for an authenticated request the authorizer denies, before the MVP
/// filter could proxy it. Unauthenticated requests (the public health paths) are not authorized, as a
/// default RBAC setup lets `system:anonymous` make them.
pub(super) async fn authorize_request<S: ServerContext>(
    State(state): State<Arc<S>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(info) = req.extensions().get::<RequestInfo>() else {
        return request_info::missing();
    };
    let authorizer = state.authorizer();
    if let Some(user) = req.extensions().get::<UserInfo>()
        && !authorizer.allows_everything()
        && let Decision::Deny(reason) = authorizer.authorize(user, info)
    {
        return forbidden(user, info, &reason).into_response();
    }
    next.run(req).await
}

/// Upstream's 403 for a denied request (`responsewriters.Forbidden` with `forbiddenMessage`).
pub(crate) fn forbidden(user: &UserInfo, info: &RequestInfo, reason: &str) -> Status {
    let who = &user.name;
    let what = if !info.is_resource_request {
        format!("User {who:?} cannot {} path {:?}", info.verb, info.path)
    } else {
        let resource = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        let scope = if info.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace {:?}", info.namespace)
        };
        format!(
            "User {who:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            info.verb, info.api_group
        )
    };
    let message = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let gr = if info.is_resource_request {
        GroupResource::new(info.api_group.clone(), info.resource.clone())
    } else {
        GroupResource::new("", "")
    };
    Status::forbidden(&gr, &info.name, &message)
}

/// The attributes of impersonating `name` as a user (upstream's impersonation filter checks verb
/// `impersonate` on `users` in the core group, cluster-scoped).
pub(crate) fn impersonation_request(name: &str) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: "impersonate".to_owned(),
        api_version: "v1".to_owned(),
        resource: "users".to_owned(),
        name: name.to_owned(),
        ..RequestInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        let mut user = UserInfo::new(name);
        user.groups = groups.iter().map(|g| (*g).to_owned()).collect();
        user
    }

    fn info(method: &str, uri: &str) -> RequestInfo {
        RequestInfo::from_parts(&method.parse().unwrap(), &uri.parse().unwrap()).unwrap()
    }

    #[test]
    fn the_flag_parses_like_kube_apiserver() {
        assert_eq!(Authorizer::from_flag("AlwaysAllow"), Ok(Authorizer::default()));
        assert!(Authorizer::from_flag("AlwaysDeny,AlwaysAllow").is_ok());
        assert_eq!(
            Authorizer::from_flag("Bogus").unwrap_err().to_string(),
            r#"authorization-mode "Bogus" is not a valid mode"#
        );
        assert_eq!(
            Authorizer::from_flag("AlwaysDeny,AlwaysDeny")
                .unwrap_err()
                .to_string(),
            r#"authorization-mode "AlwaysDeny" has mode specified more than once"#
        );
        assert!(matches!(
            Authorizer::from_flag("Webhook"),
            Err(AuthorizationModeError::Unsupported(_))
        ));
        let kubeadm = Authorizer::from_flag("Node,RBAC").unwrap();
        assert!(kubeadm.rbac().is_some() && !kubeadm.allows_everything());
        assert_eq!(Authorizer::from_flag(""), Err(AuthorizationModeError::Empty));
    }

    #[test]
    fn always_deny_forbids_all_but_system_masters_and_modes_form_a_union() {
        let deny = Authorizer::from_flag("AlwaysDeny").unwrap();
        let jobs = info("GET", "/apis/batch/v1/namespaces/default/jobs");
        assert_eq!(
            deny.authorize(&user("admin", &[PRIVILEGED_GROUP]), &jobs),
            Decision::Allow
        );
        assert_eq!(
            deny.authorize(&user("bob", &["system:authenticated"]), &jobs),
            Decision::Deny("Everything is forbidden.".to_owned())
        );
        let deny_then_allow = Authorizer::from_flag("AlwaysDeny,AlwaysAllow").unwrap();
        assert_eq!(
            deny_then_allow.authorize(&user("bob", &[]), &jobs),
            Decision::Allow
        );
        assert!(!deny_then_allow.allows_everything());
        assert!(Authorizer::default().allows_everything());
    }

    #[test]
    fn forbidden_messages_are_upstreams() {
        let bob = user("bob", &[]);
        let reason = "Everything is forbidden.";
        let list = forbidden(
            &bob,
            &info("GET", "/apis/batch/v1/namespaces/default/jobs"),
            reason,
        );
        assert_eq!(list.code, 403);
        assert_eq!(
            list.message,
            r#"jobs.batch is forbidden: User "bob" cannot list resource "jobs" in API group "batch" in the namespace "default": Everything is forbidden."#
        );
        let status = forbidden(&bob, &info("PUT", "/api/v1/nodes/n1/status"), "");
        assert_eq!(
            status.message,
            r#"nodes "n1" is forbidden: User "bob" cannot update resource "nodes/status" in API group "" at the cluster scope"#
        );
        let path = forbidden(&bob, &info("GET", "/apis"), reason);
        assert_eq!(
            path.message,
            r#"forbidden: User "bob" cannot get path "/apis": Everything is forbidden."#
        );
        let body = serde_json::to_value(&path).unwrap();
        assert_eq!(body["details"], serde_json::json!({}));
        let impersonate = forbidden(&bob, &impersonation_request("alice"), reason);
        assert_eq!(
            impersonate.message,
            r#"users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope: Everything is forbidden."#
        );
    }
}
