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
use crate::api::catalog::KubeVersion;
use crate::api::rest::admission::match_conditions;
use crate::api::rest::validating_admission_policy::VARIABLES as POLICY_VARIABLES;
use crate::cel::{self, EnvironmentType};

/// Which CEL environment each expression of a written object compiles in (upstream's
/// `validationOptions.preexistingExpressions` over `environment.DefaultCompatibilityVersion()`): a new
/// or changed expression in the `NewExpressions` environment of the server's emulated minor, one the
/// old object already had (the same text, anywhere among the old object's expressions of that kind)
/// in the `StoredExpressions` one, so an object a newer server wrote stays writable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Compilation<'a> {
    /// The minor the server emulates; `None`: every expression compiles as a stored one.
    emulated: Option<KubeVersion>,
    /// The object before the update (`None` on create).
    old: Option<&'a Value>,
}

impl<'a> Compilation<'a> {
    /// Writing to a server emulating `emulated`, over `old` on update.
    pub(crate) fn at_write(emulated: KubeVersion, old: Option<&'a Value>) -> Self {
        Self {
            emulated: Some(emulated),
            old,
        }
    }

    /// Every expression in the stored environment (what runs).
    #[cfg(test)]
    pub(crate) fn stored() -> Self {
        Self {
            emulated: None,
            old: None,
        }
    }

    /// The environment of `source`, preexisting when the old object has it at one of `pointers`
    /// (JSON pointers, `*` standing for every item of a list).
    fn environment(&self, source: &str, pointers: &[&str]) -> EnvironmentType {
        let Some(emulated) = self.emulated else {
            return EnvironmentType::StoredExpressions;
        };
        let mut preexisting = Vec::new();
        if let Some(old) = self.old {
            for pointer in pointers {
                strings_at(old, pointer.trim_start_matches('/'), &mut preexisting);
            }
        }
        EnvironmentType::at_write(emulated, source, &preexisting)
    }
}

/// The strings at `pointer` (`a/*/b`, `*` for every list item) under `value`.
fn strings_at<'v>(value: &'v Value, pointer: &str, found: &mut Vec<&'v str>) {
    let (head, rest) = pointer.split_once('/').unwrap_or((pointer, ""));
    let children: Vec<&Value> = match (head, value) {
        ("*", Value::Array(items)) => items.iter().collect(),
        (key, Value::Object(map)) => map.get(key).into_iter().collect(),
        _ => Vec::new(),
    };
    for child in children {
        match (rest.is_empty(), child) {
            (true, Value::String(text)) => found.push(text),
            (true, _) => {}
            (false, child) => strings_at(child, rest, found),
        }
    }
}

/// `supportedValidationPolicyReason`, sorted as `sets.String.List()`.
const VALIDATION_REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"];

/// `validValidationActions`, sorted.
const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];

/// An expression that must be given and compile (`validateCELCondition` with
/// `convertCELErrorToValidationError`); `required` is the detail of the missing case.
fn expression(
    errors: &mut FieldErrors,
    path: &Path,
    source: &str,
    names: &[&str],
    required: &str,
    environment: EnvironmentType,
) {
    if source.trim().is_empty() {
        errors.push(FieldError::required(path, required));
    } else if let Err(e) = cel::compile_in(source, names, environment) {
        errors.push(FieldError::invalid_str(
            path,
            source,
            &format!("compilation failed: {}", e.issues),
        ));
    }
}

/// `validateMatchConditions`: each condition named once, with an expression that compiles.
/// `preexisting` points at the old object's match conditions' expressions.
fn match_conditions_of(
    errors: &mut FieldErrors,
    conditions: &[Value],
    path: &Path,
    names: &[&str],
    (compilation, preexisting): (Compilation<'_>, &str),
) {
    let mut seen = std::collections::HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = path.index(i);
        let source = str_at(condition, "/expression");
        expression(
            errors,
            &at.child("expression"),
            source,
            names,
            "",
            compilation.environment(source, &[preexisting]),
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

/// `validateVariable`: a CEL identifier and an expression that compiles (preexisting when the old
/// object has it at `preexisting`: for validating policies upstream looks among the old
/// validations' expressions).
fn variables_of(
    errors: &mut FieldErrors,
    spec: &Value,
    path: &Path,
    (compilation, preexisting): (Compilation<'_>, &str),
) {
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
        let source = str_at(variable, "/expression");
        expression(
            errors,
            &at.child("expression"),
            source,
            POLICY_VARIABLES,
            "expression is not specified",
            compilation.environment(source, &[preexisting]),
        );
    }
}

/// `isCELIdentifier`: `[_a-zA-Z][_a-zA-Z0-9]*`, not a CEL reserved word.
fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !crate::cel::RESERVED_WORDS.contains(&name)
}

/// [`validate_validating_admission_policy_at`] with every expression compiled as a stored one.
#[cfg(test)]
pub(crate) fn validate_validating_admission_policy(object: &Value) -> FieldErrors {
    validate_validating_admission_policy_at(object, Compilation::stored())
}

/// `ValidateValidatingAdmissionPolicy` (`ValidateValidatingAdmissionPolicyUpdate` with the old object
/// in `compilation`): the spec checks of its expressions, reasons and messages.
pub(crate) fn validate_validating_admission_policy_at(
    object: &Value,
    compilation: Compilation<'_>,
) -> FieldErrors {
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
        (compilation, "/spec/matchConditions/*/expression"),
    );
    variables_of(
        &mut errors,
        spec,
        &path.child("variables"),
        (compilation, "/spec/validations/*/expression"),
    );
    for (i, validation) in validations.iter().enumerate() {
        let at = path.child("validations").index(i);
        let source = str_at(validation, "/expression");
        expression(
            &mut errors,
            &at.child("expression"),
            source,
            POLICY_VARIABLES,
            "expression is not specified",
            compilation.environment(source, &["/spec/validations/*/expression"]),
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
                compilation.environment(message_expression, &["/spec/validations/*/messageExpression"]),
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
        let source = str_at(annotation, "/valueExpression");
        expression(
            &mut errors,
            &path.child("auditAnnotations").index(i).child("valueExpression"),
            source,
            POLICY_VARIABLES,
            "valueExpression is not specified",
            compilation.environment(source, &["/spec/auditAnnotations/*/valueExpression"]),
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
/// mutation's `applyConfiguration` or `jsonPatch` expression (preexisting when the old policy had it
/// in the same kind of place).
pub(crate) fn validate_mutating_admission_policy_at(
    object: &Value,
    compilation: Compilation<'_>,
) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    match_conditions_of(
        &mut errors,
        list_at(spec, "/matchConditions"),
        &path.child("matchConditions"),
        POLICY_VARIABLES,
        (compilation, "/spec/matchConditions/*/expression"),
    );
    variables_of(
        &mut errors,
        spec,
        &path.child("variables"),
        (compilation, "/spec/variables/*/expression"),
    );
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
                    compilation.environment(source, &[&format!("/spec/mutations/*/{field}/expression")]),
                );
            }
        }
    }
    errors
}

/// `supportedFailurePolicies`, sorted.
const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];

/// `supportedMatchPolicies`, sorted.
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];

/// `noSideEffectClasses`: what a create must choose (`requireNoSideEffects`), sorted.
const NO_SIDE_EFFECT_CLASSES: &[&str] = &["None", "NoneOnDryRun"];

/// `supportedOperations`, sorted.
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];

/// `supportedReinvocationPolicies`, sorted.
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];

/// `validScopes`, sorted.
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];

/// `AcceptedAdmissionReviewVersions`.
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// `ValidateValidatingWebhookConfiguration` / `ValidateMutatingWebhookConfiguration`, as at create: each
/// webhook's name, rules, policies, side effects, timeout, label selectors, client config and
/// `matchConditions`, its `admissionReviewVersions`, and names unique in the configuration. (Upstream
/// relaxes some of these on update when the stored object already broke them, e.g. invalid label values
/// in selectors; the fake checks updates as creates.)
#[cfg(test)]
pub(crate) fn validate_webhook_configuration(object: &Value, mutating: bool) -> FieldErrors {
    validate_webhook_configuration_at(object, mutating, Compilation::stored())
}

/// `validate_webhook_configuration` in a server: `matchConditions` compile in the environment of
/// `compilation` (stored when the old configuration had the same expression).
pub(crate) fn validate_webhook_configuration_at(
    object: &Value,
    mutating: bool,
    compilation: Compilation<'_>,
) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let mut names = std::collections::HashSet::new();
    for (i, webhook) in list_at(object, "/webhooks").iter().enumerate() {
        let at = Path::new("webhooks").index(i);
        webhook_of(&mut errors, webhook, &at, (mutating, compilation));
        admission_review_versions(
            &mut errors,
            list_at(webhook, "/admissionReviewVersions"),
            &at.child("admissionReviewVersions"),
        );
        let name = str_at(webhook, "/name");
        if !name.is_empty() && !names.insert(name) {
            errors.push(FieldError::duplicate(
                &at.child("name"),
                BadValue::Str(name.to_owned()),
            ));
        }
    }
    errors
}

/// `validateValidatingWebhook` / `validateMutatingWebhook`.
fn webhook_of(
    errors: &mut FieldErrors,
    webhook: &Value,
    at: &Path,
    (mutating, compilation): (bool, Compilation<'_>),
) {
    fully_qualified_name(errors, str_at(webhook, "/name"), &at.child("name"));
    for (i, rule) in list_at(webhook, "/rules").iter().enumerate() {
        rule_with_operations(errors, rule, &at.child("rules").index(i));
    }
    let one_of = |errors: &mut FieldErrors, key: &str, supported: &[&str]| {
        if let Some(value) = webhook.get(key).and_then(Value::as_str)
            && !supported.contains(&value)
        {
            errors.push(FieldError::not_supported(&at.child(key), value, supported));
        }
    };
    one_of(errors, "failurePolicy", FAILURE_POLICIES);
    one_of(errors, "matchPolicy", MATCH_POLICIES);
    match webhook.get("sideEffects").and_then(Value::as_str) {
        None => errors.push(FieldError::required(
            &at.child("sideEffects"),
            &format!("must specify one of {}", NO_SIDE_EFFECT_CLASSES.join(", ")),
        )),
        Some(_) => one_of(errors, "sideEffects", NO_SIDE_EFFECT_CLASSES),
    }
    if let Some(timeout) = webhook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&timeout)
    {
        errors.push(FieldError::invalid(
            &at.child("timeoutSeconds"),
            BadValue::Int(timeout),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    for key in ["namespaceSelector", "objectSelector"] {
        if let Some(selector) = webhook.get(key).filter(|s| !s.is_null()) {
            label_selector(errors, selector, &at.child(key));
        }
    }
    if mutating {
        one_of(errors, "reinvocationPolicy", REINVOCATION_POLICIES);
    }
    let config = at.child("clientConfig");
    let url = webhook.pointer("/clientConfig/url").and_then(Value::as_str);
    let service = webhook.pointer("/clientConfig/service").filter(|s| !s.is_null());
    match (url, service) {
        (Some(url), None) => webhook_url(errors, url, &config.child("url")),
        (None, Some(service)) => webhook_service(errors, service, &config.child("service")),
        _ => errors.push(FieldError::required(
            &config,
            "exactly one of url or service is required",
        )),
    }
    match_conditions_of(
        errors,
        list_at(webhook, "/matchConditions"),
        &at.child("matchConditions"),
        match_conditions::VARIABLES,
        (compilation, "/webhooks/*/matchConditions/*/expression"),
    );
}

/// `metav1validation.ValidateLabelSelector` as at create (`AllowInvalidLabelValueInSelector` false):
/// `matchLabels` keys and values, then each of `matchExpressions`: its operator and the values it needs
/// or forbids, its key, its values as label values.
fn label_selector(errors: &mut FieldErrors, selector: &Value, at: &Path) {
    use crate::cel::format::{label_value_violations, qualified_name_violations};
    let labels = at.child("matchLabels");
    for (key, value) in super::string_map_at(selector, "/matchLabels") {
        for message in qualified_name_violations(&key) {
            errors.push(FieldError::invalid_str(&labels, &key, &message));
        }
        for message in label_value_violations(&value) {
            errors.push(FieldError::invalid_str(&labels, &value, &message));
        }
    }
    for (i, requirement) in list_at(selector, "/matchExpressions").iter().enumerate() {
        let at = at.child("matchExpressions").index(i);
        let values = strings_of(list_at(requirement, "/values"));
        match str_at(requirement, "/operator") {
            "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(
                &at.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
                &at.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            operator => errors.push(FieldError::invalid_str(
                &at.child("operator"),
                operator,
                "not a valid selector operator",
            )),
        }
        let key = str_at(requirement, "/key");
        for message in qualified_name_violations(key) {
            errors.push(FieldError::invalid_str(&at.child("key"), key, &message));
        }
        for (j, value) in values.iter().enumerate() {
            for message in label_value_violations(value) {
                errors.push(FieldError::invalid_str(
                    &at.child("values").index(j),
                    value,
                    &message,
                ));
            }
        }
    }
}

/// `IsFullyQualifiedName`: a DNS subdomain of at least three labels.
fn fully_qualified_name(errors: &mut FieldErrors, name: &str, at: &Path) {
    if name.is_empty() {
        errors.push(FieldError::required(at, ""));
        return;
    }
    let violations = crate::api::rest::names::NameRule::Dns1123Subdomain.violations(name);
    if !violations.is_empty() {
        errors.push(FieldError::invalid_str(at, name, &violations.join(",")));
    } else if name.split('.').count() < 3 {
        errors.push(FieldError::invalid_str(
            at,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// The strings of a list field (non-strings as `""`).
fn strings_of(list: &[Value]) -> Vec<String> {
    list.iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `validateRuleWithOperations` with `validateRule` (subresources allowed).
fn rule_with_operations(errors: &mut FieldErrors, rule: &Value, at: &Path) {
    let operations = strings_of(list_at(rule, "/operations"));
    let field = at.child("operations");
    if operations.is_empty() {
        errors.push(FieldError::required(&field, ""));
    }
    if operations.len() > 1 && operations.iter().any(|o| o == "*") {
        errors.push(FieldError::invalid(
            &field,
            BadValue::StringList(operations.clone()),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, operation) in operations.iter().enumerate() {
        if !OPERATIONS.contains(&operation.as_str()) {
            errors.push(FieldError::not_supported(&field.index(i), operation, OPERATIONS));
        }
    }
    for (key, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let values = strings_of(list_at(rule, &format!("/{key}")));
        let field = at.child(key);
        if values.is_empty() {
            errors.push(FieldError::required(&field, ""));
        }
        if values.len() > 1 && values.iter().any(|v| v == "*") {
            errors.push(FieldError::invalid(
                &field,
                BadValue::StringList(values.clone()),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
        if key == "apiVersions" {
            for (i, _) in values.iter().enumerate().filter(|(_, v)| v.is_empty()) {
                errors.push(FieldError::required(&field.index(i), ""));
            }
        }
    }
    resources(
        errors,
        &strings_of(list_at(rule, "/resources")),
        &at.child("resources"),
    );
    if let Some(scope) = rule.get("scope").and_then(Value::as_str)
        && !SCOPES.contains(&scope)
    {
        errors.push(FieldError::not_supported(&at.child("scope"), scope, SCOPES));
    }
}

/// `validateResources`: `resource[/subresource]` entries and their wildcards.
fn resources(errors: &mut FieldErrors, resources: &[String], at: &Path) {
    if resources.is_empty() {
        errors.push(FieldError::required(at, ""));
    }
    let mut with_wildcard_subresource = std::collections::HashSet::new();
    let mut with_wildcard_resource = std::collections::HashSet::new();
    let (mut double_wildcard, mut single_wildcard, mut without_subresource) = (false, false, false);
    for (i, entry) in resources.iter().enumerate() {
        if entry.is_empty() {
            errors.push(FieldError::required(&at.index(i), ""));
            continue;
        }
        double_wildcard |= entry == "*/*";
        single_wildcard |= entry == "*";
        let Some((resource, subresource)) = entry.split_once('/') else {
            without_subresource = entry != "*";
            continue;
        };
        if with_wildcard_subresource.contains(resource) {
            errors.push(FieldError::invalid_str(
                &at.index(i),
                entry,
                &format!("if '{resource}/*' is present, must not specify {entry}"),
            ));
        }
        if with_wildcard_resource.contains(subresource) {
            errors.push(FieldError::invalid_str(
                &at.index(i),
                entry,
                &format!("if '*/{subresource}' is present, must not specify {entry}"),
            ));
        }
        if subresource == "*" {
            with_wildcard_subresource.insert(resource);
        }
        if resource == "*" {
            with_wildcard_resource.insert(subresource);
        }
    }
    if resources.len() > 1 && double_wildcard {
        errors.push(FieldError::invalid(
            at,
            BadValue::StringList(resources.to_vec()),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single_wildcard && without_subresource {
        errors.push(FieldError::invalid(
            at,
            BadValue::StringList(resources.to_vec()),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

/// `ValidateWebhookURL` with `forceHttps`: Go's `url.Parse` split into scheme, user, host, query and
/// fragment.
pub(crate) fn webhook_url(errors: &mut FieldErrors, url: &str, at: &Path) {
    const FORM: &str = "; desired format: https://host[/path]";
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (scheme, rest) = match rest.split_once(':') {
        Some((scheme, rest))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (scheme.to_ascii_lowercase(), rest)
        }
        _ => (String::new(), rest),
    };
    let authority = rest
        .strip_prefix("//")
        .map(|after| after.split('/').next().unwrap_or_default())
        .unwrap_or_default();
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    if scheme != "https" {
        errors.push(FieldError::invalid_str(
            at,
            &scheme,
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        errors.push(FieldError::invalid_str(
            at,
            host,
            &format!("host must be provided{FORM}"),
        ));
    }
    if let Some(user) = user {
        errors.push(FieldError::invalid_str(
            at,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errors.push(FieldError::invalid_str(
            at,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errors.push(FieldError::invalid_str(
            at,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// `ValidateWebhookService`: name, namespace, port and a path of DNS-subdomain segments.
pub(crate) fn webhook_service(errors: &mut FieldErrors, service: &Value, at: &Path) {
    if str_at(service, "/name").is_empty() {
        errors.push(FieldError::required(
            &at.child("name"),
            "service name is required",
        ));
    }
    if str_at(service, "/namespace").is_empty() {
        errors.push(FieldError::required(
            &at.child("namespace"),
            "service namespace is required",
        ));
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errors.push(FieldError::invalid(
            &at.child("port"),
            BadValue::Int(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let path = str_at(service, "/path");
    let field = at.child("path");
    if path.is_empty() || path == "/" {
        return;
    }
    if path == "//" {
        errors.push(FieldError::invalid_str(
            &field,
            path,
            "segment[0] may not be empty",
        ));
        return;
    }
    if !path.starts_with('/') {
        errors.push(FieldError::invalid_str(&field, path, "must start with a '/'"));
    }
    let inner = path.get(1..).unwrap_or_default();
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    for (i, step) in inner.split('/').enumerate() {
        if step.is_empty() {
            errors.push(FieldError::invalid_str(
                &field,
                path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in crate::api::rest::names::NameRule::Dns1123Subdomain.violations(step) {
            errors.push(FieldError::invalid_str(
                &field,
                path,
                &format!("segment[{i}]: {failure}"),
            ));
        }
    }
}

/// `validateAdmissionReviewVersions` with `requireRecognizedAdmissionReviewVersion` (as at create).
fn admission_review_versions(errors: &mut FieldErrors, versions: &[Value], at: &Path) {
    let versions = strings_of(versions);
    if versions.is_empty() {
        errors.push(FieldError::required(
            at,
            &format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        ));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for (i, version) in versions.iter().enumerate() {
        if !seen.insert(version.as_str()) {
            errors.push(FieldError::invalid_str(
                &at.index(i),
                version,
                "duplicate version",
            ));
            continue;
        }
        for message in crate::api::rest::names::NameRule::Dns1035Label.violations(version) {
            errors.push(FieldError::invalid_str(&at.index(i), version, &message));
        }
    }
    if !versions.iter().any(|v| REVIEW_VERSIONS.contains(&v.as_str())) {
        errors.push(FieldError::invalid(
            at,
            BadValue::StringList(versions),
            &format!("must include at least one of {}", REVIEW_VERSIONS.join(", ")),
        ));
    }
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

    /// A new expression compiles in the environment of the minor before the emulated one; one the
    /// old object already had compiles in the stored environment, whatever the minor.
    #[test]
    fn new_expressions_compile_at_the_servers_compatibility_minor() {
        let v = |minor| KubeVersion::new(1, minor).expect("a version");
        let policy = |validation: &str, condition: &str| {
            json!({"spec": {
                "matchConditions": [{"name": "c", "expression": condition}],
                "validations": [{"expression": validation}],
            }})
        };
        let ip = policy("isIP(object.metadata.name)", "true");
        let at_30 = validate_validating_admission_policy_at(&ip, Compilation::at_write(v(30), None));
        assert_eq!(
            bodies(&at_30),
            [
                "Invalid value: \"isIP(object.metadata.name)\": compilation failed: ERROR: <input>:1:5: \
              undeclared reference to 'isIP' (in container '')\n | isIP(object.metadata.name)\n | ....^"
            ]
        );
        assert!(validate_validating_admission_policy_at(&ip, Compilation::at_write(v(31), None)).is_empty());
        // Unchanged on update: stored; a changed expression: new.
        let updated = policy("isIP(object.metadata.name)", "isCIDR('10.0.0.0/8')");
        let errors =
            validate_validating_admission_policy_at(&updated, Compilation::at_write(v(30), Some(&ip)));
        let fields: Vec<String> = errors.iter().map(|e| e.field.to_string()).collect();
        assert_eq!(fields, ["spec.matchConditions[0].expression"]);
        let webhooks = json!({"webhooks": [{"name": "w.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://example.com"},
            "matchConditions": [{"name": "f", "expression": "format.named('uuid').hasValue()"}]}]});
        let refused = validate_webhook_configuration_at(&webhooks, false, Compilation::at_write(v(31), None));
        assert!(
            bodies(&refused)[0].contains("undeclared reference to 'format'"),
            "{refused:?}"
        );
        assert!(
            validate_webhook_configuration_at(&webhooks, false, Compilation::at_write(v(32), None))
                .is_empty()
        );
        assert!(
            validate_webhook_configuration_at(
                &webhooks,
                false,
                Compilation::at_write(v(31), Some(&webhooks))
            )
            .is_empty(),
            "stored by a newer server, unchanged"
        );
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
        let configuration = json!({"webhooks": [webhook(json!({"matchConditions": [{"name": "a", "expression": "request.operation == 'CREATE'"}]}))]});
        for mutating in [false, true] {
            assert_eq!(
                bodies(&validate_webhook_configuration(&configuration, mutating)),
                Vec::<String>::new()
            );
        }
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
        let configuration = json!({"webhooks": [webhook(json!({"matchConditions": [{"name": "a", "expression": "params.x"}]}))]});
        let errors = validate_webhook_configuration(&configuration, false);
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].field.to_string(),
            "webhooks[0].matchConditions[0].expression"
        );
    }

    /// A webhook upstream admits at create, with `extra` merged in.
    fn webhook(extra: Value) -> Value {
        let mut webhook = json!({
            "name": "check.example.com",
            "clientConfig": {"service": {"namespace": "default", "name": "hook", "port": 443, "path": "/validate/pods"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "pods/status"], "scope": "*"}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": 10,
        });
        if let (Some(base), Some(extra)) = (webhook.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        webhook
    }

    /// `field: body` of each error, as a client reads them.
    fn fields_and_bodies(configuration: &Value, mutating: bool) -> Vec<String> {
        validate_webhook_configuration(configuration, mutating)
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.field,
                    e.body(crate::api::catalog::KubeVersion::NEWEST)
                )
            })
            .collect()
    }

    #[test]
    fn webhook_selectors_are_label_selectors() {
        let configuration = json!({"webhooks": [webhook(json!({
            "namespaceSelector": {"matchLabels": {"-bad": "ok", "team": "a b"}, "matchExpressions": [
                {"key": "env", "operator": "In"},
                {"key": "env", "operator": "Exists", "values": ["prod"]},
                {"key": "a/b/c", "operator": "Bogus", "values": ["-x"]},
            ]},
            "objectSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
        }))]});
        let name_part = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
                         alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                         validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let value = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', \
                     and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
                     '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        for mutating in [false, true] {
            assert_eq!(
                fields_and_bodies(&configuration, mutating),
                [
                    format!("webhooks[0].namespaceSelector.matchLabels: Invalid value: \"-bad\": name part {name_part}"),
                    format!("webhooks[0].namespaceSelector.matchLabels: Invalid value: \"a b\": {value}"),
                    "webhooks[0].namespaceSelector.matchExpressions[0].values: Required value: must be specified when \
                     `operator` is 'In' or 'NotIn'"
                        .to_owned(),
                    "webhooks[0].namespaceSelector.matchExpressions[1].values: Forbidden: may not be specified when \
                     `operator` is 'Exists' or 'DoesNotExist'"
                        .to_owned(),
                    "webhooks[0].namespaceSelector.matchExpressions[2].operator: Invalid value: \"Bogus\": not a \
                     valid selector operator"
                        .to_owned(),
                    format!(
                        "webhooks[0].namespaceSelector.matchExpressions[2].key: Invalid value: \"a/b/c\": a qualified \
                         name {name_part} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    ),
                    format!("webhooks[0].namespaceSelector.matchExpressions[2].values[0]: Invalid value: \"-x\": {value}"),
                ]
            );
        }
    }

    #[test]
    fn webhook_configurations_are_checked_as_upstream_at_create() {
        let configuration = json!({"webhooks": [
            webhook(json!({
                "name": "short",
                "timeoutSeconds": 99,
                "sideEffects": "Some",
                "failurePolicy": "Sometimes",
                "reinvocationPolicy": "Always",
                "rules": [{"operations": ["CREATE", "*", "PATCH"], "apiGroups": [], "apiVersions": ["v1", ""],
                           "resources": ["*", "pods", "*/*"], "scope": "Everywhere"}],
                "clientConfig": {"url": "http://user@hook.example.com/x?a=b#frag"},
                "admissionReviewVersions": ["v2", "v2"],
            })),
            webhook(json!({"name": "check.example.com", "clientConfig": {}, "admissionReviewVersions": []})),
            webhook(json!({"name": "check.example.com",
                           "clientConfig": {"service": {"namespace": "", "name": "", "port": 0, "path": "no//slash"}}})),
        ]});
        let mut sidefree = configuration.clone();
        sidefree["webhooks"][0]
            .as_object_mut()
            .map(|w| w.remove("sideEffects"));
        assert_eq!(
            fields_and_bodies(&configuration, true),
            [
                "webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
                "webhooks[0].rules[0].operations: Invalid value: [\"CREATE\",\"*\",\"PATCH\"]: if '*' is present, must not specify other operations",
                "webhooks[0].rules[0].operations[2]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
                "webhooks[0].rules[0].apiGroups: Required value",
                "webhooks[0].rules[0].apiVersions[1]: Required value",
                "webhooks[0].rules[0].resources: Invalid value: [\"*\",\"pods\",\"*/*\"]: if '*/*' is present, must not specify other resources",
                "webhooks[0].rules[0].resources: Invalid value: [\"*\",\"pods\",\"*/*\"]: if '*' is present, must not specify other resources without subresources",
                "webhooks[0].rules[0].scope: Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
                "webhooks[0].failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                "webhooks[0].timeoutSeconds: Invalid value: 99: the timeout value must be between 1 and 30 seconds",
                "webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "webhooks[0].clientConfig.url: Invalid value: \"user\": user information is not permitted in the URL",
                "webhooks[0].clientConfig.url: Invalid value: \"frag\": fragments are not permitted in the URL",
                "webhooks[0].clientConfig.url: Invalid value: \"a=b\": query parameters are not permitted in the URL",
                "webhooks[0].admissionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
                "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\",\"v2\"]: must include at least one of v1, v1beta1",
                "webhooks[1].clientConfig: Required value: exactly one of url or service is required",
                "webhooks[1].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
                "webhooks[2].clientConfig.service.name: Required value: service name is required",
                "webhooks[2].clientConfig.service.namespace: Required value: service namespace is required",
                "webhooks[2].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "webhooks[2].clientConfig.service.path: Invalid value: \"no//slash\": must start with a '/'",
                "webhooks[2].clientConfig.service.path: Invalid value: \"no//slash\": segment[1] may not be empty",
                "webhooks[2].name: Duplicate value: \"check.example.com\"",
            ]
        );
        assert!(fields_and_bodies(&sidefree, false).contains(
            &"webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun".to_owned()
        ));
        // A validating webhook has no reinvocation policy to check.
        assert!(
            !fields_and_bodies(&configuration, false)
                .iter()
                .any(|e| e.contains("reinvocationPolicy"))
        );
    }
}
