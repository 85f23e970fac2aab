//! RBAC (`pkg/apis/rbac/validation`): policy rules (verbs, API groups and resources, or non-resource
//! URLs only in cluster roles), role references and subjects of bindings, and `roleRef`'s
//! immutability.

use serde_json::Value;

use super::{BadValue, FieldError, FieldErrors, Path, list_at, str_at};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `ValidateRole` / `ValidateClusterRole`: each rule by `ValidatePolicyRule` (`namespaced` for Roles).
pub(crate) fn validate_role(object: &Value, namespaced: bool) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let path = Path::new("rules");
    for (i, rule) in list_at(object, "/rules").iter().enumerate() {
        let at = path.index(i);
        if list_at(rule, "/verbs").is_empty() {
            errors.push(FieldError::required(
                &at.child("verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = strings(rule, "/nonResourceURLs");
        if !urls.is_empty() {
            if namespaced {
                errors.push(FieldError::invalid(
                    &at.child("nonResourceURLs"),
                    BadValue::StringList(urls.clone()),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            let resourceful = ["/apiGroups", "/resources", "/resourceNames"]
                .iter()
                .any(|f| !list_at(rule, f).is_empty());
            if resourceful {
                errors.push(FieldError::invalid(
                    &at.child("nonResourceURLs"),
                    BadValue::StringList(urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if list_at(rule, "/apiGroups").is_empty() {
            errors.push(FieldError::required(
                &at.child("apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if list_at(rule, "/resources").is_empty() {
            errors.push(FieldError::required(
                &at.child("resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
    errors
}

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding` (`namespaced` for RoleBindings), and on
/// update `roleRef`, which may not change.
pub(crate) fn validate_role_binding(object: &Value, namespaced: bool, old: Option<&Value>) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let role_ref = Path::new("roleRef");
    let group = str_at(object, "/roleRef/apiGroup");
    if group != RBAC_GROUP {
        errors.push(FieldError::not_supported(
            &role_ref.child("apiGroup"),
            group,
            &[RBAC_GROUP],
        ));
    }
    let kind = str_at(object, "/roleRef/kind");
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        errors.push(FieldError::not_supported(&role_ref.child("kind"), kind, kinds));
    }
    if str_at(object, "/roleRef/name").is_empty() {
        errors.push(FieldError::required(&role_ref.child("name"), ""));
    }
    let subjects = Path::new("subjects");
    for (i, subject) in list_at(object, "/subjects").iter().enumerate() {
        let at = subjects.index(i);
        let name = str_at(subject, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&at.child("name"), ""));
        }
        let api_group = str_at(subject, "/apiGroup");
        match str_at(subject, "/kind") {
            "ServiceAccount" => {
                if !name.is_empty() {
                    super::dns1123_subdomain(&mut errors, name, &at.child("name"));
                }
                if !api_group.is_empty() {
                    errors.push(FieldError::not_supported(&at.child("apiGroup"), api_group, &[""]));
                }
                if !namespaced && str_at(subject, "/namespace").is_empty() {
                    errors.push(FieldError::required(&at.child("namespace"), ""));
                }
            }
            // `SetDefaults_Subject` fills an empty apiGroup of users and groups with RBAC's.
            "User" | "Group" => {
                if !api_group.is_empty() && api_group != RBAC_GROUP {
                    errors.push(FieldError::not_supported(
                        &at.child("apiGroup"),
                        api_group,
                        &[RBAC_GROUP],
                    ));
                }
            }
            other => errors.push(FieldError::not_supported(
                &at.child("kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    if let Some(old) = old
        && old.get("roleRef") != object.get("roleRef")
    {
        let name = str_at(object, "/roleRef/name");
        errors.push(FieldError::invalid(
            &role_ref,
            BadValue::Rendered {
                go: format!("rbac.RoleRef{{APIGroup:{group:?}, Kind:{kind:?}, Name:{name:?}}}"),
                json: format!("{{\"APIGroup\":{group:?},\"Kind\":{kind:?},\"Name\":{name:?}}}"),
            },
            "cannot change roleRef",
        ));
    }
    errors
}

fn strings(value: &Value, pointer: &str) -> Vec<String> {
    list_at(value, pointer)
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}
