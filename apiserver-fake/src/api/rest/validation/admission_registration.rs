//! Admission policies, their bindings and webhook configurations (`pkg/apis/admissionregistration/validation`):
//! every CEL expression must compile, so a policy whose expression cannot run is refused at create with
//! upstream's 422 (`spec.validations[0].expression: Invalid value: "object.": compilation failed: ERROR:
//! <input>:1:8: …`) instead of failing every request it matches.
//!
//! Expressions are compiled with the names the admission plugins compile them with at run time (so what
//! is admitted here runs there, and nothing that runs is refused). The crate has no type checker, so
//! what cel-go refuses only by type (`object.spec.replicas == 'x'`) is admitted, as for CRD rules.

use serde_json::Value;

use super::{BadValue, FieldError, FieldErrors, Path, list_at, str_at};
use crate::api::rest::admission::match_conditions;
use crate::api::rest::validating_admission_policy::VARIABLES as POLICY_VARIABLES;
use crate::cel;

/// `supportedValidationPolicyReason`, sorted as `sets.String.List()`.
const VALIDATION_REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"];

/// `validValidationActions`, sorted.
const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];

/// An expression that must be given and compile (`validateCELCondition` with
/// `convertCELErrorToValidationError`); `required` is the detail of the missing case.
fn expression(errors: &mut FieldErrors, path: &Path, source: &str, names: &[&str], required: &str) {
    if source.trim().is_empty() {
        errors.push(FieldError::required(path, required));
    } else if let Err(e) = cel::compile(source, names) {
        errors.push(FieldError::invalid_str(
            path,
            source,
            &format!("compilation failed: {}", e.issues),
        ));
    }
}

/// `validateMatchConditions`: each condition named once, with an expression that compiles.
fn match_conditions_of(errors: &mut FieldErrors, conditions: &[Value], path: &Path, names: &[&str]) {
    let mut seen = std::collections::HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = path.index(i);
        expression(
            errors,
            &at.child("expression"),
            str_at(condition, "/expression"),
            names,
            "",
        );
        let name = str_at(condition, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&at.child("name"), ""));
        } else if !seen.insert(name) {
            errors.push(FieldError::duplicate(
                &at.child("name"),
                BadValue::Str(name.to_owned()),
            ));
        }
    }
}

/// `validateVariable`: a CEL identifier and an expression that compiles.
fn variables_of(errors: &mut FieldErrors, spec: &Value, path: &Path) {
    for (i, variable) in list_at(spec, "/variables").iter().enumerate() {
        let at = path.index(i);
        let name = str_at(variable, "/name");
        if name.trim().is_empty() {
            errors.push(FieldError::required(&at.child("name"), "name is not specified"));
        } else if !is_cel_identifier(name) {
            errors.push(FieldError::invalid_str(
                &at.child("name"),
                name,
                "name is not a valid CEL identifier",
            ));
        }
        expression(
            errors,
            &at.child("expression"),
            str_at(variable, "/expression"),
            POLICY_VARIABLES,
            "expression is not specified",
        );
    }
}

/// `isCELIdentifier`: `[_a-zA-Z][_a-zA-Z0-9]*`, not a CEL reserved word.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}

/// `ValidateValidatingAdmissionPolicy`'s spec checks of its expressions, reasons and messages.
pub(crate) fn validate_validating_admission_policy(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let validations = list_at(spec, "/validations");
    let audit_annotations = list_at(spec, "/auditAnnotations");
    if validations.is_empty() && audit_annotations.is_empty() {
        errors.push(FieldError::required(
            &path.child("validations"),
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    match_conditions_of(
        &mut errors,
        list_at(spec, "/matchConditions"),
        &path.child("matchConditions"),
        POLICY_VARIABLES,
    );
    variables_of(&mut errors, spec, &path.child("variables"));
    for (i, validation) in validations.iter().enumerate() {
        let at = path.child("validations").index(i);
        expression(
            &mut errors,
            &at.child("expression"),
            str_at(validation, "/expression"),
            POLICY_VARIABLES,
            "expression is not specified",
        );
        let message_expression = str_at(validation, "/messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errors.push(FieldError::invalid_str(
                &at.child("messageExpression"),
                message_expression,
                "must be non-empty if specified",
            ));
        } else if !message_expression.is_empty() {
            expression(
                &mut errors,
                &at.child("messageExpression"),
                message_expression,
                POLICY_VARIABLES,
                "",
            );
        }
        let message = str_at(validation, "/message");
        if !message.is_empty() && message.trim().is_empty() {
            errors.push(FieldError::invalid_str(
                &at.child("message"),
                message,
                "message must be non-empty if specified",
            ));
        } else if message.trim().contains(['\n', '\r']) {
            errors.push(FieldError::invalid_str(
                &at.child("message"),
                message,
                "message must not contain line breaks",
            ));
        }
        if let Some(reason) = validation.get("reason").and_then(Value::as_str)
            && !VALIDATION_REASONS.contains(&reason)
        {
            errors.push(FieldError::not_supported(
                &at.child("reason"),
                reason,
                VALIDATION_REASONS,
            ));
        }
    }
    for (i, annotation) in audit_annotations.iter().enumerate() {
        expression(
            &mut errors,
            &path.child("auditAnnotations").index(i).child("valueExpression"),
            str_at(annotation, "/valueExpression"),
            POLICY_VARIABLES,
            "valueExpression is not specified",
        );
    }
    errors
}

/// `validateValidatingAdmissionPolicyBindingSpec`: a policy name and valid validation actions.
pub(crate) fn validate_validating_admission_policy_binding(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let path = Path::new("spec");
    if str_at(object, "/spec/policyName").is_empty() {
        errors.push(FieldError::required(&path.child("policyName"), ""));
    }
    let actions_path = path.child("validationActions");
    let actions = list_at(object, "/spec/validationActions");
    let mut seen: Vec<&str> = Vec::new();
    for (i, action) in actions.iter().enumerate() {
        let action = action.as_str().unwrap_or_default();
        if !VALIDATION_ACTIONS.contains(&action) {
            errors.push(FieldError::not_supported(
                &actions_path.index(i),
                action,
                VALIDATION_ACTIONS,
            ));
        }
        if seen.contains(&action) {
            errors.push(FieldError::duplicate(
                &actions_path.index(i),
                BadValue::Str(action.to_owned()),
            ));
        }
        seen.push(action);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        errors.push(FieldError::invalid(
            &actions_path,
            BadValue::StringList(seen.iter().map(|a| (*a).to_owned()).collect()),
            "must not contain both Deny and Warn (repeating the same validation failure information in the \
             API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errors.push(FieldError::required(
            &actions_path,
            "at least one validation action is required",
        ));
    }
    errors
}

/// `ValidateMutatingAdmissionPolicy`'s expression checks: match conditions, variables and each
/// mutation's `applyConfiguration` or `jsonPatch` expression.
pub(crate) fn validate_mutating_admission_policy(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    match_conditions_of(
        &mut errors,
        list_at(spec, "/matchConditions"),
        &path.child("matchConditions"),
        POLICY_VARIABLES,
    );
    variables_of(&mut errors, spec, &path.child("variables"));
    for (i, mutation) in list_at(spec, "/mutations").iter().enumerate() {
        let at = path.child("mutations").index(i);
        for field in ["applyConfiguration", "jsonPatch"] {
            if let Some(source) = mutation
                .pointer(&format!("/{field}/expression"))
                .and_then(Value::as_str)
            {
                expression(
                    &mut errors,
                    &at.child(field).child("expression"),
                    source,
                    POLICY_VARIABLES,
                    "expression is not specified",
                );
            }
        }
    }
    errors
}

/// `ValidateValidatingWebhookConfiguration` / `ValidateMutatingWebhookConfiguration`: each webhook's
/// `matchConditions`.
pub(crate) fn validate_webhook_configuration(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    for (i, webhook) in list_at(object, "/webhooks").iter().enumerate() {
        match_conditions_of(
            &mut errors,
            list_at(webhook, "/matchConditions"),
            &Path::new("webhooks").index(i).child("matchConditions"),
            match_conditions::VARIABLES,
        );
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bodies(errors: &FieldErrors) -> Vec<String> {
        errors
            .iter()
            .map(|e| e.body(crate::api::catalog::KubeVersion::new(1, 36).expect("a version")))
            .collect()
    }

    #[test]
    fn a_policy_expression_that_does_not_compile_is_refused_with_upstreams_text() {
        let policy = json!({"spec": {
            "matchConditions": [{"name": "c", "expression": "object.metadata.name == "}, {"name": "c", "expression": "true"}],
            "variables": [{"name": "1x", "expression": "nothing.at.all"}],
            "validations": [{"expression": "object.", "messageExpression": "'ok'", "reason": "Teapot"}],
            "auditAnnotations": [{"key": "k", "valueExpression": " "}],
        }});
        let errors = validate_validating_admission_policy(&policy);
        let bodies = bodies(&errors);
        let paths: Vec<String> = errors.iter().map(|e| e.field.to_string()).collect();
        assert_eq!(
            paths,
            [
                "spec.matchConditions[0].expression",
                "spec.matchConditions[1].name",
                "spec.variables[0].name",
                "spec.variables[0].expression",
                "spec.validations[0].expression",
                "spec.validations[0].reason",
                "spec.auditAnnotations[0].valueExpression",
            ],
            "{bodies:#?}"
        );
        assert!(
            bodies[4].starts_with("Invalid value: \"object.\": compilation failed: ERROR: <input>:1:"),
            "{}",
            bodies[4]
        );
        assert!(
            bodies[3].contains("undeclared reference to 'nothing'"),
            "{}",
            bodies[3]
        );
        assert_eq!(bodies[1], "Duplicate value: \"c\"");
        assert_eq!(
            bodies[5],
            "Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\""
        );
        assert_eq!(bodies[6], "Required value: valueExpression is not specified");
    }

    #[test]
    fn what_runs_at_admission_is_admitted() {
        let policy = json!({"spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConditions": [{"name": "labelled", "expression": "has(object.metadata.labels)"}],
            "variables": [{"name": "keys", "expression": "size(object.data)"}],
            "validations": [{"expression": "variables.keys < int(params.data.max)", "messageExpression": "'too many: ' + string(variables.keys)"}],
        }});
        assert_eq!(
            bodies(&validate_validating_admission_policy(&policy)),
            Vec::<String>::new()
        );
        let configuration = json!({"webhooks": [{"name": "w", "matchConditions": [{"name": "a", "expression": "request.operation == 'CREATE'"}]}]});
        assert_eq!(
            bodies(&validate_webhook_configuration(&configuration)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn binding_actions_are_upstreams() {
        let errors = validate_validating_admission_policy_binding(
            &json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn", "Deny", "Shout"]}}),
        );
        assert_eq!(
            bodies(&errors),
            [
                "Duplicate value: \"Deny\"",
                "Unsupported value: \"Shout\": supported values: \"Audit\", \"Deny\", \"Warn\"",
                "Invalid value: [\"Deny\",\"Warn\",\"Deny\",\"Shout\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
        let errors = validate_validating_admission_policy_binding(&json!({"spec": {}}));
        assert_eq!(
            bodies(&errors),
            [
                "Required value",
                "Required value: at least one validation action is required"
            ]
        );
    }

    #[test]
    fn a_webhook_match_condition_that_does_not_compile_is_refused() {
        let configuration = json!({"webhooks": [{"name": "w", "matchConditions": [{"name": "a", "expression": "params.x"}]}]});
        let errors = validate_webhook_configuration(&configuration);
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].field.to_string(),
            "webhooks[0].matchConditions[0].expression"
        );
    }
}
