//! `ValidatingAdmissionPolicy` admission (upstream `k8s.io/apiserver/pkg/admission/plugin/policy/validating`,
//! whose texts this copies): before a create or update is written, every
//! `ValidatingAdmissionPolicyBinding` whose policy's `matchConstraints.resourceRules` match the request
//! has its policy's `validations` evaluated with [`crate::cel`] (`object`, `oldObject`, `request`;
//! `params` and `namespaceObject` are `null`).
//!
//! A validation that is not `true` is acted on as the binding's `validationActions` say: `Deny` refuses
//! the request with `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b'
//! denied request: <message>` (the validation's `reason`, `Invalid` by default, sets the code: 422),
//! `Warn` adds the warning `Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b':
//! <message>`, `Audit` records nothing (the fake writes no audit annotations for it). The message is the
//! `messageExpression`'s string, the `message`, or `failed expression: <expression>`. An expression that
//! does not compile or fails to evaluate is an error handled by the policy's `failurePolicy` (`Fail`,
//! the default, denies with `expression '<expression>' resulted in error: <error>`; `Ignore` skips it).
//!
//! Not done: `paramKind`/`paramRef`, `matchConditions`, `variables`, `auditAnnotations`, namespace and
//! object selectors, `excludeResourceRules`, the binding's own `matchResources` (a binding applies
//! wherever its policy matches), `request.userInfo`, and the status's type checking.

use serde_json::{Value, json};

use super::RestRequest;
use crate::api::status::{Status, StatusCause, StatusReason};
use crate::cel;
use crate::store::StorageResource;

/// The variables of a policy's expressions.
const VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    "authorizer",
];

fn policies() -> StorageResource {
    StorageResource::new("admissionregistration.k8s.io", "validatingadmissionpolicies")
}

fn bindings() -> StorageResource {
    StorageResource::new(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    )
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn listed(list: &[&str], wanted: &str) -> bool {
    list.iter().any(|item| *item == "*" || *item == wanted)
}

/// Whether a `resourceRules` entry matches the request (`*` everywhere; `resources` may name
/// `resource/subresource`, `*/*` and `resource/*`).
fn rule_matches(rule: &Value, req: &RestRequest<'_>, operation: &str) -> bool {
    let resource = &req.resource;
    let full = if req.info.subresource.is_empty() {
        resource.resource.clone()
    } else {
        format!("{}/{}", resource.resource, req.info.subresource)
    };
    let resources = strings(&rule["resources"]);
    let resource_matches = resources.iter().any(|r| {
        *r == "*/*"
            || *r == full
            || (*r == "*" && req.info.subresource.is_empty())
            || r.strip_suffix("/*") == Some(resource.resource.as_str()) && !req.info.subresource.is_empty()
    });
    let scope_matches = match rule["scope"].as_str() {
        Some("Namespaced") => resource.namespaced,
        Some("Cluster") => !resource.namespaced,
        _ => true,
    };
    listed(&strings(&rule["apiGroups"]), &resource.group)
        && listed(&strings(&rule["apiVersions"]), &resource.version)
        && listed(&strings(&rule["operations"]), operation)
        && resource_matches
        && scope_matches
}

/// Upstream `reasonToCode`.
fn reason_code(reason: &str) -> (u16, StatusReason) {
    match reason {
        "Forbidden" => (403, StatusReason::Forbidden),
        "Unauthorized" => (401, StatusReason::Unauthorized),
        "RequestEntityTooLarge" => (413, StatusReason::RequestEntityTooLarge),
        _ => (422, StatusReason::Invalid),
    }
}

/// What one validation decided.
enum Decision {
    Admit,
    /// Not true: its message and reason.
    Deny(String, String),
}

fn evaluate_validation(validation: &Value, variables: &[(&str, ::cel::Value)], fail: bool) -> Decision {
    let expression = validation["expression"].as_str().unwrap_or_default();
    let error = |detail: String| {
        if fail {
            Decision::Deny(
                format!("expression '{expression}' resulted in error: {detail}"),
                String::new(),
            )
        } else {
            Decision::Admit
        }
    };
    let compiled = match cel::compile(expression, VARIABLES) {
        Ok(compiled) => compiled,
        Err(e) => return error(format!("compilation error: {}", e.issues)),
    };
    match cel::evaluate(&compiled, variables) {
        Ok(::cel::Value::Bool(true)) => Decision::Admit,
        Ok(::cel::Value::Bool(false)) => {
            let from_expression = validation["messageExpression"]
                .as_str()
                .and_then(|source| cel::compile(source, VARIABLES).ok())
                .and_then(|m| match cel::evaluate(&m, variables) {
                    Ok(::cel::Value::String(s)) if !s.trim().is_empty() && !s.contains('\n') => {
                        Some(s.trim().to_owned())
                    }
                    _ => None,
                });
            let message = from_expression.unwrap_or_else(|| match validation["message"].as_str() {
                Some(message) if !message.is_empty() => message.to_owned(),
                _ => format!("failed expression: {}", expression.trim()),
            });
            let reason = validation["reason"].as_str().unwrap_or_default().to_owned();
            Decision::Deny(message, reason)
        }
        Ok(other) => error(format!("expected boolean, got {other:?}")),
        Err(e) => error(e.to_string()),
    }
}

/// Admits a create (`old` is `None`) or update of `object`: `Ok` with the warnings of `Warn` bindings,
/// or the denial of the first `Deny` binding whose policy's validation failed.
pub async fn admit(
    req: &RestRequest<'_>,
    object: &Value,
    old: Option<&Value>,
) -> Result<Vec<String>, Status> {
    let Ok((all_bindings, _)) = req.ctx.store.list(&bindings(), None).await else {
        return Ok(Vec::new());
    };
    if all_bindings.is_empty() {
        return Ok(Vec::new());
    }
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&req.info.name)
        .to_owned();
    let request = json!({
        "kind": {"group": req.resource.group, "version": req.resource.version, "kind": req.resource.kind},
        "resource": {"group": req.resource.group, "version": req.resource.version, "resource": req.resource.resource},
        "subResource": req.info.subresource,
        "name": name,
        "namespace": req.namespace.clone().unwrap_or_default(),
        "operation": operation,
        "dryRun": req.query.dry_run().unwrap_or(false),
    });
    let presented = req.present(object.clone());
    let variables = [
        ("object", cel::value::to_cel(&presented)),
        (
            "oldObject",
            old.map_or(::cel::Value::Null, |o| {
                cel::value::to_cel(&req.present(o.clone()))
            }),
        ),
        ("request", cel::value::to_cel(&request)),
        ("params", ::cel::Value::Null),
        ("namespaceObject", ::cel::Value::Null),
    ];
    let mut warnings = Vec::new();
    for binding in &all_bindings {
        let binding_name = binding
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(policy_name) = binding.pointer("/spec/policyName").and_then(Value::as_str) else {
            continue;
        };
        let Ok(policy) = req
            .ctx
            .store
            .get(&policies(), &crate::store::ObjectKey::cluster(policy_name))
            .await
        else {
            continue;
        };
        let rules = policy
            .pointer("/spec/matchConstraints/resourceRules")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        if !rules.iter().any(|rule| rule_matches(rule, req, operation)) {
            continue;
        }
        let fail = policy.pointer("/spec/failurePolicy").and_then(Value::as_str) != Some("Ignore");
        let actions = strings(binding.pointer("/spec/validationActions").unwrap_or(&Value::Null));
        let validations = policy
            .pointer("/spec/validations")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for validation in validations {
            let Decision::Deny(message, reason) = evaluate_validation(validation, &variables, fail) else {
                continue;
            };
            if actions.contains(&"Deny") {
                let message = format!(
                    "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"
                );
                let mut status = Status::forbidden(&req.resource.group_resource(), &name, &message);
                let (code, reason) = reason_code(&reason);
                status.code = code;
                status.reason = reason;
                if let Some(details) = status.details.as_mut() {
                    details.causes.push(StatusCause {
                        message,
                        ..StatusCause::default()
                    });
                }
                return Err(status);
            }
            if actions.contains(&"Warn") {
                warnings.push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {message}"
                ));
            }
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(validation: Value, fail: bool) -> Option<(String, String)> {
        let variables = [
            (
                "object",
                cel::value::to_cel(&json!({"metadata": {"name": "settings"}})),
            ),
            ("oldObject", ::cel::Value::Null),
        ];
        match evaluate_validation(&validation, &variables, fail) {
            Decision::Admit => None,
            Decision::Deny(message, reason) => Some((message, reason)),
        }
    }

    #[test]
    fn messages_reasons_and_failure_policy() {
        assert_eq!(
            decide(json!({"expression": "object.metadata.name == 'settings'"}), true),
            None
        );
        assert_eq!(
            decide(json!({"expression": "object.metadata.name == 'x'"}), true),
            Some((
                "failed expression: object.metadata.name == 'x'".to_owned(),
                String::new()
            ))
        );
        assert_eq!(
            decide(
                json!({"expression": "false", "message": "no", "reason": "Forbidden",
                       "messageExpression": "'no ' + object.metadata.name"}),
                true
            ),
            Some(("no settings".to_owned(), "Forbidden".to_owned()))
        );
        let broken = json!({"expression": "object.missing == 1"});
        let (message, _) = decide(broken.clone(), true).expect("Fail denies on an error");
        assert!(
            message.starts_with("expression 'object.missing == 1' resulted in error: "),
            "{message}"
        );
        assert_eq!(decide(broken, false), None, "Ignore admits on an error");
        assert_eq!(reason_code("Forbidden"), (403, StatusReason::Forbidden));
        assert_eq!(reason_code(""), (422, StatusReason::Invalid));
    }
}
