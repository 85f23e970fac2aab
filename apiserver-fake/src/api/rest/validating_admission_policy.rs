//! `ValidatingAdmissionPolicy` admission (upstream `k8s.io/apiserver/pkg/admission/plugin/policy/validating`,
//! whose texts this copies): before a create or update is written, a delete is done (`object` null,
//! the stored object as `oldObject`, [`admit_delete`]) or a connection is made (`object` the options,
//! `PodExecOptions`, ..., [`admit_connect`]), every
//! `ValidatingAdmissionPolicyBinding` whose policy's `matchConstraints` and whose own `matchResources`
//! (when it has them) match the request ([`matching`]: rules, `excludeResourceRules`, namespace and
//! object selectors, `matchPolicy`) has its policy's `validations` evaluated with [`crate::cel`]
//! (`object`, `oldObject`, `request` with `userInfo`, `params`, `namespaceObject`, and `authorizer`:
//! the server's authorizer asked for the requesting user, [`crate::cel::authorizer`]).
//!
//! A validation that is not `true` is acted on as the binding's `validationActions` say: `Deny` refuses
//! the request with `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b'
//! denied request: <message>` (the validation's `reason`, `Invalid` by default, sets the code: 422),
//! `Warn` adds the warning `Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b':
//! <message>`, `Audit` adds upstream's `validation.policy.admission.k8s.io/validation_failure` audit
//! annotation (a JSON list of the failure: message, policy, binding, expression index, actions). The message is the
//! `messageExpression`'s string, the `message`, or `failed expression: <expression>`. An expression that
//! does not compile or fails to evaluate is an error handled by the policy's `failurePolicy` (`Fail`,
//! the default, denies with `expression '<expression>' resulted in error: <error>`; `Ignore` skips it).
//!
//! The plugin runs where the server serves the `validatingadmissionpolicies` resource: upstream's plugin
//! follows the `ValidatingAdmissionPolicy` feature gate, whose API the server then serves (GA and on from
//! 1.30; beta, off by default, in 1.28 and 1.29 unless the gate and `--runtime-config` turn it on). So a
//! 1.29 member of a mixed cluster admits what a 1.30 member's policies deny, as upstream's would.
//!
//! A policy's `matchConditions` (CEL, all must hold) are evaluated before its validations: a false one
//! skips the policy; when none is false but one fails, `failurePolicy: Fail` makes the error a failed
//! validation (its text the message, acted on by the binding's actions) and `Ignore` skips the policy, as
//! upstream's validator. Its `variables` are evaluated in
//! order, each seeing those before it, and are `variables.<name>` in conditions, validations and message
//! expressions; a variable that fails to evaluate is absent, so what names it fails (`no such key`).
//!
//! Each evaluation of a binding (per parameter) has upstream's runtime cost budgets
//! ([`match_conditions::FilterRun`], docs/decisions.md §17): its conditions 2,500,000, its validations
//! 10,000,000 (their message expressions what is left), its audit annotations 10,000,000. A call over the
//! per-call limit is its expression's error; a spent budget is `validation failed due to running out of
//! cost budget, no further validation rules will be run`, the only decision under `Fail`.
//!
//! A binding's `paramRef` gives the `params` of one evaluation per parameter ([`super::policy_params`]);
//! `auditAnnotations` are added to the request's audit event as `<policy>/<key>`.
//!
//! The status (`observedGeneration`, `typeChecking: {}`) is written by the controller manager's
//! `validatingadmissionpolicy-status-controller` (`controller_manager::controllers`), through the API.
//!
//! Not done: the status's type checking (no `expressionWarnings` are ever reported).

use serde_json::{Value, json};

use super::RestRequest;
use super::admission::match_conditions::{
    self, FilterError, FilterRun, MatchCondition, MatchResult, VariableCosts,
};
use super::policy_params::ParamError;
use crate::api::status::{Status, StatusCause, StatusReason};
use crate::cel;
use crate::cel::cost;
use crate::store::StorageResource;

pub(crate) mod matching;

/// The variables of a policy's expressions.
pub(super) const VARIABLES: &[&str] = &[
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

pub(super) fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
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

/// A denying decision: its message, its reason (empty: `Invalid`) and the index of its validation.
type Failure = (String, String, usize);

/// The decision of a filter run that ran out of budget (upstream's validator: one decision, with the
/// error as its message, under the policy's `failurePolicy`).
fn out_of_budget(fail: bool) -> Vec<Failure> {
    if fail {
        vec![(cost::OUT_OF_BUDGET.to_owned(), String::new(), 0)]
    } else {
        Vec::new()
    }
}

/// Upstream's validator (`plugin/policy/validating/validator.go`) past the match conditions: the
/// validations in one filter run of `RuntimeCELCostBudget`, their `messageExpression`s (every one, as
/// upstream's) on what it left, the audit annotations in a run of their own. The failures to act on
/// and the audit annotations to publish; a run out of budget is the only failure (none under
/// `Ignore`), and publishes nothing.
fn validate(
    policy: &Value,
    variables: &[(&str, ::cel::Value)],
    costs: &VariableCosts,
    fail: bool,
) -> (Vec<Failure>, Vec<(String, String)>) {
    let spec = |field: &str| {
        policy
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
    };
    let validations = spec("validations");
    let mut run = FilterRun::new(variables, costs, cost::RUNTIME_CEL_COST_BUDGET);
    let mut results = Vec::with_capacity(validations.len());
    for validation in validations {
        let expression = validation["expression"].as_str().unwrap_or_default();
        match match_conditions::evaluate_condition(expression, VARIABLES, &mut run) {
            Err(FilterError::OutOfBudget) => return (out_of_budget(fail), Vec::new()),
            Err(FilterError::Expression(error)) => results.push(Err(error)),
            Ok(value) => results.push(Ok(value)),
        }
    }
    let messages = message_expressions(validations, &mut run);
    let mut failures = Vec::new();
    for (index, (validation, result)) in validations.iter().zip(results).enumerate() {
        let failure = match (result, &messages) {
            (Err(error), _) => Some((error, String::new())).filter(|_| fail),
            (Ok(_), Err(FilterError::OutOfBudget)) => {
                let message = format!("failed messageExpression: {}", cost::OUT_OF_BUDGET);
                Some((message, String::new())).filter(|_| fail)
            }
            (Ok(::cel::Value::Bool(true)), _) => None,
            (Ok(::cel::Value::Bool(false)), messages) => {
                let from_expression = messages
                    .as_ref()
                    .ok()
                    .and_then(|messages| messages[index].clone());
                Some((
                    failure_message(validation, from_expression),
                    validation["reason"].as_str().unwrap_or_default().to_owned(),
                ))
            }
            // As for a match condition: cel-go's checker would have refused a non-`bool` expression.
            (Ok(_), _) => Some((
                match_conditions::compilation_error("must evaluate to bool"),
                String::new(),
            ))
            .filter(|_| fail),
        };
        if let Some((message, reason)) = failure {
            failures.push((message, reason, index));
        }
    }
    let mut run = FilterRun::new(variables, costs, cost::RUNTIME_CEL_COST_BUDGET);
    let mut annotations = Vec::new();
    for annotation in spec("auditAnnotations") {
        match audit_annotation(annotation, &mut run) {
            Ok(Some(annotation)) => annotations.push(annotation),
            Ok(None) => {}
            Err(FilterError::OutOfBudget) => return (out_of_budget(fail), Vec::new()),
            Err(FilterError::Expression(error)) if fail => failures.push((error, String::new(), 0)),
            Err(FilterError::Expression(_)) => {}
        }
    }
    (failures, annotations)
}

/// The `messageExpression` of each validation, evaluated in `run` as upstream's message filter: a
/// usable message (a non-blank single-line string, trimmed) or `None`; `Err` when the run is out of
/// budget.
fn message_expressions(
    validations: &[Value],
    run: &mut FilterRun<'_>,
) -> Result<Vec<Option<String>>, FilterError> {
    let mut messages = Vec::with_capacity(validations.len());
    for validation in validations {
        let Some(source) = validation["messageExpression"].as_str() else {
            messages.push(None);
            continue;
        };
        let message = match cel::compile(source, VARIABLES) {
            Err(_) => None,
            Ok(compiled) => match run.evaluate(source, &compiled) {
                Err(FilterError::OutOfBudget) => return Err(FilterError::OutOfBudget),
                Ok(::cel::Value::String(s)) if !s.trim().is_empty() && !s.contains('\n') => {
                    Some(s.trim().to_owned())
                }
                _ => None,
            },
        };
        messages.push(message);
    }
    Ok(messages)
}

/// The message of a failed validation: its `messageExpression`'s, its `message`, or `failed
/// expression: <expression>`.
fn failure_message(validation: &Value, from_expression: Option<String>) -> String {
    from_expression.unwrap_or_else(|| match validation["message"].as_str() {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ => format!(
            "failed expression: {}",
            validation["expression"].as_str().unwrap_or_default().trim()
        ),
    })
}

/// The refusal of a `Deny` binding: `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy 'p'
/// with binding 'b' denied request: <message>`, with the code of `reason`.
fn denial(
    req: &RestRequest<'_>,
    name: &str,
    policy_name: &str,
    binding_name: &str,
    message: &str,
    reason: &str,
) -> Status {
    let message = format!(
        "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"
    );
    let mut status = Status::forbidden(&req.resource.group_resource(), name, &message);
    let (code, reason) = reason_code(reason);
    status.code = code;
    status.reason = reason;
    if let Some(details) = status.details.as_mut() {
        details.causes.push(StatusCause {
            message,
            ..StatusCause::default()
        });
    }
    status
}

/// A policy's composited `variables`: the CEL map, and what each costs.
pub(super) struct Composited {
    pub value: ::cel::Value,
    pub costs: VariableCosts,
}

/// A policy's `variables`, evaluated in order (each sees the ones before it), as the CEL map
/// `variables`; one that does not compile or evaluate is left out, as is one whose estimated cost is
/// over the per-call limit (upstream's would be cancelled), which is not evaluated at all.
pub(super) fn composited_variables(policy: &Value, bound: &[(&str, ::cel::Value)]) -> Composited {
    let mut values: std::collections::HashMap<String, ::cel::Value> = std::collections::HashMap::new();
    let mut costs = VariableCosts::default();
    let declared = policy
        .pointer("/spec/variables")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for variable in declared {
        let (Some(name), Some(expression)) = (variable["name"].as_str(), variable["expression"].as_str())
        else {
            continue;
        };
        let mut scope = bound.to_vec();
        scope.push(("variables", ::cel::Value::from(values.clone())));
        let Ok(compiled) = cel::compile(expression, VARIABLES) else {
            continue;
        };
        let estimate = compiled.cost(match_conditions::data_size(&scope));
        costs.insert(name, estimate, compiled.variables_named.clone());
        if estimate > cost::PER_CALL_LIMIT {
            continue;
        }
        if let Ok(value) = cel::evaluate(&compiled, &scope) {
            values.insert(name.to_owned(), value);
        }
    }
    Composited {
        value: ::cel::Value::from(values),
        costs,
    }
}

/// One evaluation of a policy for a binding and one of its params.
struct Evaluation<'p> {
    policy: &'p Value,
    policy_name: &'p str,
    binding_name: &'p str,
    actions: Vec<&'p str>,
    fail: bool,
}

/// What the evaluations found that does not end the request at once.
#[derive(Default)]
struct Findings {
    warnings: Vec<String>,
    /// Audit annotation values by key (`<policy>/<key>`), distinct values in the order found, joined as upstream's collector joins them.
    annotations: std::collections::BTreeMap<String, Vec<String>>,
}

/// Evaluates one binding of a policy with `variables` (`params` bound): `Err` with the denial of a
/// `Deny` binding; warnings and audit annotations are added to `findings`.
fn evaluate_binding(
    req: &RestRequest<'_>,
    name: &str,
    evaluation: &Evaluation<'_>,
    variables: &[(&str, ::cel::Value)],
    findings: &mut Findings,
) -> Result<(), Status> {
    let Evaluation {
        policy,
        policy_name,
        binding_name,
        fail,
        ..
    } = *evaluation;
    let actions = &evaluation.actions;
    let mut variables = variables.to_vec();
    let composited = composited_variables(policy, &variables);
    variables.push(("variables", composited.value));
    let conditions: Vec<MatchCondition> = policy
        .pointer("/spec/matchConditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default();
    let mut run = FilterRun::new(
        &variables,
        &composited.costs,
        cost::RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS,
    );
    let failures = match match_conditions::evaluate_with(&conditions, VARIABLES, &mut run, fail) {
        MatchResult::Matches => {
            let (failures, annotations) = validate(policy, &variables, &composited.costs, fail);
            for (key, value) in annotations {
                let values = findings
                    .annotations
                    .entry(format!("{policy_name}/{key}"))
                    .or_default();
                if !values.contains(&value) {
                    values.push(value);
                }
            }
            failures
        }
        MatchResult::Skipped => return Ok(()),
        // Upstream's validator: an error under `Fail` is a denying decision with the error as its
        // message, acted on as the binding's `validationActions` say (under `Ignore` it is skipped).
        MatchResult::Error(error) => vec![(error, String::new(), 0)],
    };
    let mut denied = None;
    for (message, reason, index) in failures {
        if actions.contains(&"Deny") && denied.is_none() {
            denied = Some(denial(req, name, policy_name, binding_name, &message, &reason));
        }
        if actions.contains(&"Warn") {
            findings.warnings.push(format!(
                "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {message}"
            ));
        }
        if actions.contains(&"Audit") {
            publish_validation_failure(req, evaluation, index, &message);
        }
    }
    denied.map_or(Ok(()), Err)
}

/// The `Audit` action: upstream's `validation.policy.admission.k8s.io/validation_failure` audit
/// annotation, a JSON list of one failure (the first one published stays, as upstream's `AddAnnotation`
/// refuses to overwrite).
fn publish_validation_failure(
    req: &RestRequest<'_>,
    evaluation: &Evaluation<'_>,
    index: usize,
    message: &str,
) {
    let value = json!([{
        "message": message,
        "policy": evaluation.policy_name,
        "binding": evaluation.binding_name,
        "expressionIndex": index,
        "validationActions": evaluation.actions,
    }]);
    req.audit_annotations
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .0
        .entry("validation.policy.admission.k8s.io/validation_failure".to_owned())
        .or_insert_with(|| value.to_string());
}

/// One of a policy's `auditAnnotations`: its key and the `valueExpression`'s string (`None` when it is
/// `null`: no annotation), or upstream's error.
fn audit_annotation(
    annotation: &Value,
    run: &mut FilterRun<'_>,
) -> Result<Option<(String, String)>, FilterError> {
    let key = annotation["key"].as_str().unwrap_or_default();
    let expression = annotation["valueExpression"].as_str().unwrap_or_default();
    // Upstream's filter words the errors of a `valueExpression` as those of any expression.
    match match_conditions::evaluate_condition(expression, VARIABLES, run)? {
        ::cel::Value::Null => Ok(None),
        ::cel::Value::String(value) => Ok(Some((key.to_owned(), value.to_string()))),
        other => Err(FilterError::Expression(format!(
            "valueExpression '{expression}' resulted in unsupported return type: {}. Return type must be either string or null.",
            other.type_of()
        ))),
    }
}

/// The refusal for parameters that could not be collected under `failurePolicy: Fail` (upstream's
/// generic dispatcher: `admission.NewForbidden`'s details, the first error as the message).
fn configuration_refusal(req: &RestRequest<'_>, name: &str, messages: &[String]) -> Option<Status> {
    let first = messages.first()?;
    let mut status = Status::forbidden(&req.resource.group_resource(), name, "");
    status.message = first.clone();
    if let Some(details) = status.details.as_mut() {
        details.causes.extend(messages.iter().map(|message| StatusCause {
            message: message.clone(),
            ..StatusCause::default()
        }));
    }
    Some(status)
}

/// Admits a create (`old` is `None`) or update of `object`: `Ok` with the warnings of `Warn` bindings,
/// or the denial of the first `Deny` binding whose policy's validation failed. Audit annotations are
/// recorded on the request on success and denial alike.
pub(crate) async fn admit(
    req: &RestRequest<'_>,
    object: &Value,
    old: Option<&Value>,
) -> Result<Vec<String>, Status> {
    let attributes = matching::attributes_of(req, object, old);
    admit_with(req, &attributes, Some(object), old).await
}

/// Admits a delete of `current` (upstream's dispatcher runs the policies with `object` null and the
/// stored object as `oldObject`), with the delete's `attributes` (its name, `dryRun` and options).
pub(crate) async fn admit_delete(
    req: &RestRequest<'_>,
    attributes: &super::admission::Attributes,
    current: &Value,
) -> Result<Vec<String>, Status> {
    admit_with(req, attributes, None, Some(current)).await
}

/// Admits a `CONNECT` (upstream's plugin handles it as any operation): `object` is the request's
/// options (`PodExecOptions`, ...) in `attributes`, `oldObject` null, `request.operation` `CONNECT`.
pub(crate) async fn admit_connect(
    req: &RestRequest<'_>,
    attributes: &super::admission::Attributes,
) -> Result<Vec<String>, Status> {
    admit_with(req, attributes, attributes.object.as_ref(), None).await
}

/// The name a refusal names (`admission.NewForbidden`'s `extractResourceName`): the request's, else the
/// new object's name or `generateName`, else `Unknown` (a collection delete's items).
fn refused_name(attributes: &super::admission::Attributes, object: Option<&Value>) -> String {
    if !attributes.name.is_empty() {
        return attributes.name.clone();
    }
    let meta = |field: &str| {
        object
            .and_then(|o| o.pointer(&format!("/metadata/{field}")))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    meta("name")
        .or_else(|| meta("generateName"))
        .unwrap_or("Unknown")
        .to_owned()
}

/// Admits the request of `attributes`, whose new object is `object` (none on a delete) and old one `old`.
async fn admit_with(
    req: &RestRequest<'_>,
    attributes: &super::admission::Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, Status> {
    if req
        .ctx
        .catalog
        .versions_of("admissionregistration.k8s.io", "validatingadmissionpolicies")
        .is_empty()
    {
        return Ok(Vec::new());
    }
    let Ok((all_bindings, _)) = req.ctx.store.list(&bindings(), None).await else {
        return Ok(Vec::new());
    };
    if all_bindings.is_empty() {
        return Ok(Vec::new());
    }
    let name = refused_name(attributes, object);
    let namespace = matching::namespace_of(req, attributes).await;
    let equivalents = req
        .ctx
        .catalog
        .versions_of(&req.resource.group, &req.resource.resource);
    let namespace_object = cel::value::to_cel(&matching::namespace_object(namespace.as_ref()));
    let mut findings = Findings::default();
    let mut configuration_errors: Vec<String> = Vec::new();
    let mut objects = super::admission::versioned::PolicyObjects::new(req, attributes, object, old);
    let mut outcome = Ok(());
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
        // Upstream's validating dispatcher skips a policy whose constraints cannot be matched.
        let Ok(Some(version)) = matching::policy_constraints(&policy)
            .and_then(|constraints| constraints.matches(attributes, namespace.as_ref(), &equivalents))
        else {
            continue;
        };
        let evaluation = Evaluation {
            policy: &policy,
            policy_name,
            binding_name,
            actions: strings(binding.pointer("/spec/validationActions").unwrap_or(&Value::Null)),
            fail: policy.pointer("/spec/failurePolicy").and_then(Value::as_str) != Some("Ignore"),
        };
        match binding_applies(binding, attributes, namespace.as_ref(), &equivalents) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => {
                let message = ParamError::Binding(error).message(policy_name, binding_name);
                note_configuration_error(&mut configuration_errors, &evaluation, message);
                continue;
            }
        }
        let params = match super::policy_params::collect(req, &policy, binding).await {
            Ok(params) => params,
            Err(error) => {
                let message = error.message(policy_name, binding_name);
                note_configuration_error(&mut configuration_errors, &evaluation, message);
                continue;
            }
        };
        // Upstream converts the objects to the matched version once the params are known.
        let [object, old] = match objects.at(attributes, &version).await {
            Ok(objects) => objects,
            Err(error) => {
                let error = ParamError::Binding(format!("failed to convert object version: {error}"));
                let message = error.message(policy_name, binding_name);
                note_configuration_error(&mut configuration_errors, &evaluation, message);
                continue;
            }
        };
        let objects_at_version = [object.as_ref(), old.as_ref()];
        let variables = policy_variables(req, attributes, objects_at_version, &namespace_object, &version);
        for param in &params {
            let mut bound = variables.to_vec();
            bound.push(("params", cel::value::to_cel(param)));
            outcome = evaluate_binding(req, &name, &evaluation, &bound, &mut findings);
            if outcome.is_err() {
                break;
            }
        }
        if outcome.is_err() {
            break;
        }
    }
    record_audit_annotations(req, &findings);
    outcome?;
    if let Some(status) = configuration_refusal(req, &name, &configuration_errors) {
        return Err(status);
    }
    Ok(findings.warnings)
}

/// Whether `binding` applies to the request: its own `matchResources`, when it has them, match too
/// (upstream's `PolicyMatcher.BindingMatches`); `Err` when they cannot be used.
fn binding_applies(
    binding: &Value,
    attributes: &super::admission::Attributes,
    namespace: Option<&Value>,
    equivalents: &[String],
) -> Result<bool, String> {
    match matching::binding_resources(binding)? {
        None => Ok(true),
        Some(resources) => resources
            .matches(attributes, namespace, equivalents)
            .map(|matched| matched.is_some()),
    }
}

/// Keeps a binding's configuration error for the refusal, once, when its policy fails closed.
fn note_configuration_error(errors: &mut Vec<String>, evaluation: &Evaluation<'_>, message: String) {
    if evaluation.fail && !errors.contains(&message) {
        errors.push(message);
    }
}

/// The CEL variables of a policy matched in `version`, with `[object, oldObject]` already converted
/// to it ([`super::admission::versioned::PolicyObjects`]), and `authorizer`.
fn policy_variables(
    req: &RestRequest<'_>,
    attributes: &super::admission::Attributes,
    [object, old]: [Option<&Value>; 2],
    namespace_object: &::cel::Value,
    version: &str,
) -> Vec<(&'static str, ::cel::Value)> {
    let mut variables = vec![
        ("object", object.map_or(::cel::Value::Null, cel::value::to_cel)),
        ("oldObject", old.map_or(::cel::Value::Null, cel::value::to_cel)),
        (
            "request",
            cel::value::to_cel(&matching::request_variable(attributes, version)),
        ),
        ("namespaceObject", namespace_object.clone()),
    ];
    variables.extend(match_conditions::authorizer_variables(
        &req.ctx.authorizer,
        attributes,
    ));
    variables
}

/// Adds the policies' audit annotations to the request's audit event (several values of one key
/// joined with `, `, as upstream's collector publishes them).
fn record_audit_annotations(req: &RestRequest<'_>, findings: &Findings) {
    if findings.annotations.is_empty() {
        return;
    }
    let mut annotations = req
        .audit_annotations
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (key, values) in &findings.annotations {
        annotations
            .0
            .entry(key.clone())
            .or_insert_with(|| values.join(", "));
    }
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
        let policy = json!({"spec": {"validations": [validation]}});
        let (mut failures, _) = validate(&policy, &variables, &VariableCosts::default(), fail);
        failures.pop().map(|(message, reason, _)| (message, reason))
    }

    #[test]
    fn variables_see_the_ones_before_them_and_failing_ones_are_absent() {
        let policy = json!({"spec": {"variables": [
            {"name": "name", "expression": "object.metadata.name"},
            {"name": "long", "expression": "size(variables.name) > 3"},
            {"name": "broken", "expression": "object.nothing"},
        ]}});
        let bound = [(
            "object",
            cel::value::to_cel(&json!({"metadata": {"name": "settings"}})),
        )];
        let variables = [("variables", composited_variables(&policy, &bound).value)];
        let check = |expression: &str| {
            let compiled = cel::compile(expression, VARIABLES).expect("compiles");
            cel::evaluate(&compiled, &variables).map_err(|e| e.to_string())
        };
        assert_eq!(
            check("variables.name == 'settings' && variables.long"),
            Ok(::cel::Value::Bool(true))
        );
        assert!(check("variables.broken").is_err());
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
        assert_eq!(
            message,
            "expression 'object.missing == 1' resulted in error: no such key: missing"
        );
        let uncompilable = json!({"expression": "object.missing =="});
        let (message, _) = decide(uncompilable, true).expect("Fail denies on a compilation error");
        assert!(
            message.starts_with("compilation error: compilation failed: ERROR: <input>:1:"),
            "{message}"
        );
        assert_eq!(decide(broken, false), None, "Ignore admits on an error");
        assert_eq!(reason_code("Forbidden"), (403, StatusReason::Forbidden));
        assert_eq!(reason_code(""), (422, StatusReason::Invalid));
    }

    #[test]
    fn costs_are_charged_as_upstreams_validator_charges_them() {
        let items: Vec<u64> = (0..1_000).collect();
        let variables = [("object", cel::value::to_cel(&json!({"items": items})))];
        let nested = "object.items.all(x, object.items.all(y, x + y >= 0))";
        let costly = json!({"expression": nested});
        let run = |validations: Vec<Value>, fail: bool| {
            let policy = json!({"spec": {"validations": validations}});
            validate(&policy, &variables, &VariableCosts::default(), fail).0
        };
        let failure = |message: &str, index: usize| (message.to_owned(), String::new(), index);
        let cancelled = format!(
            "expression '{nested}' resulted in error: operation cancelled: actual cost limit exceeded"
        );
        assert_eq!(
            run(vec![costly.clone(), json!({"expression": "false"})], true),
            vec![failure(&cancelled, 0), failure("failed expression: false", 1)],
            "a call over the limit is its validation's error, the others still run"
        );
        assert_eq!(
            run(vec![costly.clone(), json!({"expression": "false"})], false),
            vec![failure("failed expression: false", 1)]
        );
        assert_eq!(
            run(vec![costly.clone(); 11], true),
            vec![failure(cost::OUT_OF_BUDGET, 0)],
            "ten cancelled calls spend the budget, the eleventh ends the run"
        );
        assert_eq!(run(vec![costly.clone(); 11], false), Vec::new());
        let mut validations = vec![costly; 9];
        validations.extend([
            json!({"expression": "true", "messageExpression": nested}),
            json!({"expression": "false", "message": "no"}),
        ]);
        let mut expected: Vec<_> = (0..9).map(|i| failure(&cancelled, i)).collect();
        let message = format!("failed messageExpression: {}", cost::OUT_OF_BUDGET);
        expected.extend([failure(&message, 9), failure(&message, 10)]);
        assert_eq!(
            run(validations, true),
            expected,
            "message expressions run on what the validations left, and when it is not enough every \
             validation that did not fail to evaluate is that error"
        );
        let annotations = json!({"spec": {
            "validations": [{"expression": "false"}],
            "auditAnnotations": vec![json!({"key": "k", "valueExpression": format!("{nested} ? 'a' : 'b'")}); 11],
        }});
        assert_eq!(
            validate(&annotations, &variables, &VariableCosts::default(), true).0,
            vec![failure(cost::OUT_OF_BUDGET, 0)],
            "audit annotations have a budget of their own, and spending it replaces every decision"
        );
    }
}
