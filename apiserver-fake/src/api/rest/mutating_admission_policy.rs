//! `MutatingAdmissionPolicy` admission (upstream `k8s.io/apiserver/pkg/admission/plugin/policy/mutating`,
//! whose order, texts and codes this copies), and the mutating phase of admission it opens: policies,
//! then the mutating webhooks ([`super::admission::mutate`]), then the reinvocation of the policies with
//! `reinvocationPolicy: IfNeeded` when something changed the object after them.
//!
//! The plugin runs where the server serves the `mutatingadmissionpolicies` resource (upstream's plugin
//! follows the `MutatingAdmissionPolicy` feature gate, whose API the server then serves: GA and on by
//! default from 1.36, beta from 1.34 and alpha from 1.32 when the gate and `--runtime-config` turn it on),
//! on creates and updates (upstream's handler skips `DELETE`, there is no object to mutate). Every
//! `MutatingAdmissionPolicyBinding` whose policy's `matchConstraints` and whose own `matchResources` (when
//! it has them) match the request ([`super::validating_admission_policy::matching`]) is invoked, in policy then binding name order: its `matchConditions` (a false one skips it), then its
//! `mutations` in order, each seeing the object the ones before it produced, with `variables` (each seeing
//! those before it):
//!
//! - `ApplyConfiguration`: an expression building `Object{…}`, merged over the object as server-side apply
//!   merges with the kind's schema ([`super::patch::merge_apply_configuration`]: maps and structs merge,
//!   associative lists by their keys, and setting an atomic list, map or struct is an error);
//! - `JSONPatch`: an expression building a list of `JSONPatch{op, path, from, value}`, applied as RFC 6902;
//!   a failing `test` operation leaves the object as it was, as upstream.
//!
//! An error (a condition or expression that does not compile or fails, a patch that does not apply) is
//! the policy's: under `failurePolicy: Ignore` it is dropped, under `Fail` (the default) the request is
//! refused once every policy ran, with upstream's 403 whose reason is `Invalid` and whose message is the
//! first error's, `policy 'p' with binding 'b' denied request: <error>` (every error a cause).
//!
//! Parameters are the bindings' `paramRef`s, as for validating policies ([`super::policy_params`]).
//!
//! Costs: an invocation's `matchConditions` share upstream's 2,500,000, each mutation has 10,000,000
//! ([`match_conditions::FilterRun`]); a call over the per-call limit or a spent budget is the mutation's
//! (or the conditions') error, in upstream's words.
//!
//! Not done: the
//! `Object…` types are not type-checked against the kind's schema (a misspelt field is merged as is,
//! where upstream's checker refuses it when the policy is created); scale subresource writes.

use std::collections::BTreeSet;

use serde_json::Value;

use super::RestRequest;
use super::admission::match_conditions::{
    self, FilterError, FilterRun, MatchCondition, MatchResult, VariableCosts,
};
use super::admission::{self, Admitted, Attributes, Operation};
use super::policy_params::ParamError;
use super::validating_admission_policy::matching;
use super::validating_admission_policy::{VARIABLES, composited_variables};
use crate::api::status::{Status, StatusCause, StatusReason};
use crate::cel;
use crate::cel::cost;
use crate::store::{ObjectKey, StorageResource};

const GROUP: &str = "admissionregistration.k8s.io";

fn policies() -> StorageResource {
    StorageResource::new(GROUP, "mutatingadmissionpolicies")
}

fn bindings() -> StorageResource {
    StorageResource::new(GROUP, "mutatingadmissionpolicybindings")
}

/// One binding of one policy that matches the request.
struct Invocation {
    policy: Value,
    policy_name: String,
    binding_name: String,
    /// `reinvocationPolicy: IfNeeded`.
    reinvocable: bool,
    /// `failurePolicy: Ignore`.
    ignore_errors: bool,
    /// The binding's parameter (`null` without `paramKind`/`paramRef`).
    param: Value,
    /// The version the policy's rules matched the request in.
    version: String,
}

/// An error of one invocation under `failurePolicy: Fail` (upstream's `PolicyError`, as its text).
struct PolicyError {
    message: String,
    /// Evaluation errors carry the reason `Invalid`; configuration errors none (`Forbidden` stays).
    invalid: bool,
}

/// The invocations of the policies that match `req`'s `operation`, in policy then binding name order,
/// one per parameter of a binding ([`super::policy_params`]); none when the server does not serve the
/// policies' API. Parameters that cannot be collected are errors under `failurePolicy: Fail`.
async fn invocations(
    req: &RestRequest<'_>,
    attributes: &Attributes,
    errors: &mut Vec<PolicyError>,
) -> (Vec<Invocation>, Value) {
    if req
        .ctx
        .catalog
        .versions_of(GROUP, "mutatingadmissionpolicies")
        .is_empty()
    {
        return (Vec::new(), Value::Null);
    }
    let Ok((mut all_bindings, _)) = req.ctx.store.list(&bindings(), None).await else {
        return (Vec::new(), Value::Null);
    };
    if all_bindings.is_empty() {
        return (Vec::new(), Value::Null);
    }
    let namespace = matching::namespace_of(req, attributes).await;
    let namespace = namespace.as_ref();
    let equivalents = req
        .ctx
        .catalog
        .versions_of(&req.resource.group, &req.resource.resource);
    let text = |value: &Value, pointer: &str| {
        value
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    all_bindings.sort_by_key(|b| (text(b, "/spec/policyName"), text(b, "/metadata/name")));
    let mut found = Vec::new();
    for binding in &all_bindings {
        let policy_name = text(binding, "/spec/policyName");
        let Ok(policy) = req
            .ctx
            .store
            .get(&policies(), &ObjectKey::cluster(&policy_name))
            .await
        else {
            continue;
        };
        let ignore_errors = text(&policy, "/spec/failurePolicy") == "Ignore";
        let binding_name = text(binding, "/metadata/name");
        let mut configuration_error = |error: ParamError| {
            let message = error.message(&policy_name, &binding_name);
            if !ignore_errors && !errors.iter().any(|e| e.message == message) {
                errors.push(PolicyError {
                    message,
                    invalid: false,
                });
            }
        };
        let version = match matching::policy_constraints(&policy)
            .and_then(|constraints| constraints.matches(attributes, namespace, &equivalents))
        {
            Ok(Some(version)) => version,
            Ok(None) => continue,
            Err(error) => {
                configuration_error(ParamError::Policy(error));
                continue;
            }
        };
        match matching::binding_resources(binding).and_then(|resources| {
            resources.map_or(Ok(true), |resources| {
                resources
                    .matches(attributes, namespace, &equivalents)
                    .map(|matched| matched.is_some())
            })
        }) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => {
                configuration_error(ParamError::Binding(error));
                continue;
            }
        }
        let params = match super::policy_params::collect(req, &policy, binding).await {
            Ok(params) => params,
            Err(error) => {
                configuration_error(error);
                continue;
            }
        };
        for param in params {
            found.push(Invocation {
                reinvocable: text(&policy, "/spec/reinvocationPolicy") == "IfNeeded",
                ignore_errors,
                binding_name: binding_name.clone(),
                policy_name: policy_name.clone(),
                policy: policy.clone(),
                param,
                version: version.clone(),
            });
        }
    }
    (found, matching::namespace_object(namespace))
}

/// What the policies' phase remembers between the first pass and the reinvocation (upstream's
/// `policyReinvokeContext`).
#[derive(Default)]
struct Reinvocation {
    /// The reinvocable invocations that ran, by index.
    previously_invoked: BTreeSet<usize>,
    /// The ones to run again.
    reinvoke: BTreeSet<usize>,
    /// The object as the policies last left it.
    last_output: Option<Value>,
}

impl Reinvocation {
    fn require_reinvoking_previously_invoked(&mut self) {
        self.reinvoke.extend(self.previously_invoked.iter().copied());
    }
}

/// The mutating phase of admission for a create or update (see the module docs): the object in
/// `attributes` is mutated by the policies and webhooks; the webhooks' warnings are returned.
pub(crate) async fn mutate(req: &RestRequest<'_>, attributes: &mut Attributes) -> Result<Admitted, Status> {
    if attributes.operation == Operation::Delete {
        return admission::mutate(req, attributes).await;
    }
    let mut errors = Vec::new();
    let (found, namespace_object) = invocations(req, attributes, &mut errors).await;
    let namespace_object = cel::value::to_cel(&namespace_object);
    if found.is_empty() && errors.is_empty() {
        return admission::mutate(req, attributes).await;
    }
    let mut state = Reinvocation::default();
    let policies = Policies {
        found: &found,
        namespace_object: &namespace_object,
    };
    run_policies(req, attributes, &policies, &mut state, None, &mut errors);
    let admitted = admission::mutate(req, attributes).await?;
    if attributes.object.as_ref() != state.last_output.as_ref() {
        state.require_reinvoking_previously_invoked();
    }
    if !state.reinvoke.is_empty() {
        let reinvoke = std::mem::take(&mut state.reinvoke);
        run_policies(
            req,
            attributes,
            &policies,
            &mut state,
            Some(&reinvoke),
            &mut errors,
        );
    }
    match refusal(req, attributes, &errors) {
        Some(status) => Err(status),
        None => Ok(admitted),
    }
}

/// The invocations of a request's mutating phase and what they share.
struct Policies<'a> {
    found: &'a [Invocation],
    /// The `namespaceObject` variable.
    namespace_object: &'a ::cel::Value,
}

/// One pass over the invocations (`only`: the reinvocation's subset), mutating `attributes.object`.
fn run_policies(
    req: &RestRequest<'_>,
    attributes: &mut Attributes,
    policies: &Policies<'_>,
    state: &mut Reinvocation,
    only: Option<&BTreeSet<usize>>,
    errors: &mut Vec<PolicyError>,
) {
    for (index, invocation) in policies.found.iter().enumerate() {
        if only.is_some_and(|only| !only.contains(&index)) {
            continue;
        }
        let Some(object) = attributes.object.clone() else {
            continue;
        };
        let mut error = |message: String| {
            if !invocation.ignore_errors {
                errors.push(PolicyError {
                    message: format!(
                        "policy '{}' with binding '{}' denied request: {message}",
                        invocation.policy_name, invocation.binding_name
                    ),
                    invalid: true,
                });
            }
        };
        let before = object.clone();
        let mut current = object;
        let version = &invocation.version;
        let bound = |current: &Value| {
            let mut variables = vec![
                (
                    "object",
                    cel::value::to_cel(&matching::presented(req, attributes, current, version)),
                ),
                (
                    "oldObject",
                    attributes.old_object.as_ref().map_or(::cel::Value::Null, |o| {
                        cel::value::to_cel(&matching::presented(req, attributes, o, version))
                    }),
                ),
                (
                    "request",
                    cel::value::to_cel(&matching::request_variable(attributes, version)),
                ),
                ("params", cel::value::to_cel(&invocation.param)),
                ("namespaceObject", policies.namespace_object.clone()),
            ];
            variables.extend(match_conditions::authorizer_variables(
                &req.ctx.authorizer,
                attributes,
            ));
            let composited = composited_variables(&invocation.policy, &variables);
            variables.push(("variables", composited.value));
            (variables, composited.costs)
        };
        let conditions: Vec<MatchCondition> = invocation
            .policy
            .pointer("/spec/matchConditions")
            .cloned()
            .and_then(|c| serde_json::from_value(c).ok())
            .unwrap_or_default();
        let (variables, costs) = bound(&current);
        let mut run = FilterRun::new(&variables, &costs, cost::RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS);
        match match_conditions::evaluate_with(&conditions, VARIABLES, &mut run, true) {
            MatchResult::Matches => {}
            MatchResult::Skipped => continue,
            MatchResult::Error(message) => {
                error(message);
                continue;
            }
        }
        let mutations = invocation
            .policy
            .pointer("/spec/mutations")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for mutation in mutations {
            let (variables, costs) = bound(&current);
            match apply_mutation(req, mutation, &current, &variables, &costs) {
                Ok(mutated) => current = mutated,
                Err(message) => error(message),
            }
        }
        if current != before {
            state.require_reinvoking_previously_invoked();
        }
        if invocation.reinvocable {
            state.previously_invoked.insert(index);
        }
        attributes.object = Some(current);
    }
    state.last_output = attributes.object.clone();
}

/// Evaluates `expression` for a mutation, in a filter run of its own (upstream's patchers get
/// `RuntimeCELCostBudget` each): its value, or upstream's error text.
fn evaluate(
    expression: &str,
    variables: &[(&str, ::cel::Value)],
    costs: &VariableCosts,
) -> Result<(::cel::Value, cel::Expression), String> {
    let compiled =
        cel::compile(expression, VARIABLES).map_err(|e| format!("compilation failed: {}", e.issues))?;
    let mut run = FilterRun::new(variables, costs, cost::RUNTIME_CEL_COST_BUDGET);
    let value = run.evaluate(expression, &compiled).map_err(|e| match e {
        FilterError::Expression(error) => error,
        FilterError::OutOfBudget => cost::OUT_OF_BUDGET.to_owned(),
    })?;
    Ok((value, compiled))
}

/// One mutation of `object` (in the request's version): the mutated object, or the error.
fn apply_mutation(
    req: &RestRequest<'_>,
    mutation: &Value,
    object: &Value,
    variables: &[(&str, ::cel::Value)],
    costs: &VariableCosts,
) -> Result<Value, String> {
    let object = req.present(object.clone());
    match mutation["patchType"].as_str().unwrap_or_default() {
        "ApplyConfiguration" => {
            let expression = mutation
                .pointer("/applyConfiguration/expression")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (value, compiled) = evaluate(expression, variables, costs)?;
            let mismatches = compiled.object_type_mismatches();
            if !mismatches.is_empty() {
                return Err(format!("type mismatch: {}", mismatches.join("\n")));
            }
            let mut applied = match &value {
                ::cel::Value::Map(_) => {
                    cel::value::to_json(&value).map_err(|e| format!("fail to convert: {e}"))?
                }
                other => {
                    return Err(format!(
                        "unsupported return type from ApplyConfiguration expression: {}",
                        other.type_of()
                    ));
                }
            };
            applied["apiVersion"] = object["apiVersion"].clone();
            applied["kind"] = object["kind"].clone();
            let schema = super::write::patch_schema(req);
            super::patch::merge_apply_configuration(&object, &applied, schema)
                .map_err(|e| format!("error applying patch: {e}"))
        }
        "JSONPatch" => {
            let expression = mutation
                .pointer("/jsonPatch/expression")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (value, _) = evaluate(expression, variables, costs)?;
            apply_json_patch(&object, &value)
        }
        other => Err(format!("unsupported patch type {other:?}")),
    }
}

/// Applies the operations a `JSONPatch` expression produced (upstream's `jsonPatcher.Patch`).
fn apply_json_patch(object: &Value, value: &::cel::Value) -> Result<Value, String> {
    let ::cel::Value::List(items) = value else {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".to_owned());
    };
    let mut operations = Vec::with_capacity(items.len());
    for item in items.iter() {
        let ::cel::Value::Map(_) = item else {
            return Err(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                item.type_of()
            ));
        };
        let fields = cel::value::to_json(item).map_err(|e| {
            format!("JSONPath valueExpression evaluated to a type that could not marshal to JSON: {e}")
        })?;
        let mut operation = serde_json::Map::new();
        for key in ["op", "path"] {
            operation.insert(
                key.to_owned(),
                fields.get(key).cloned().unwrap_or(Value::String(String::new())),
            );
        }
        if let Some(from) = fields
            .get("from")
            .filter(|f| f.as_str().is_some_and(|f| !f.is_empty()))
        {
            operation.insert("from".to_owned(), from.clone());
        }
        if let Some(value) = fields.get("value") {
            operation.insert("value".to_owned(), value.clone());
        }
        operations.push(Value::Object(operation));
    }
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(operations)).map_err(|e| format!("JSONPath: {e}"))?;
    let mut patched = object.clone();
    match json_patch::patch(&mut patched, &patch) {
        Ok(()) if patched.is_object() => Ok(patched),
        Ok(()) => Err("JSONPath: the patched object is not a JSON object".to_owned()),
        // A failed `test` leaves the object unpatched.
        Err(error) if matches!(error.kind, json_patch::PatchErrorKind::TestFailed) => Ok(object.clone()),
        Err(error) => Err(format!(
            "JSONPath: {}",
            admission::patch_error_text(&patch, &error)
        )),
    }
}

/// Upstream's refusal when errors remain under `failurePolicy: Fail`: `admission.NewForbidden`'s details,
/// the first error's message and reason (`Invalid` for an evaluation's), every error a cause.
fn refusal(req: &RestRequest<'_>, attributes: &Attributes, errors: &[PolicyError]) -> Option<Status> {
    let first = errors.first()?;
    let mut status = Status::forbidden(&req.resource.group_resource(), &attributes.name, "");
    status.message = first.message.clone();
    if first.invalid {
        status.reason = StatusReason::Invalid;
    }
    if let Some(details) = status.details.as_mut() {
        details.causes.extend(errors.iter().map(|e| StatusCause {
            message: e.message.clone(),
            ..StatusCause::default()
        }));
    }
    Some(status)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patch(expression: &str, object: Value) -> Result<Value, String> {
        let variables = [("object", cel::value::to_cel(&object))];
        let (value, _) = evaluate(expression, &variables, &VariableCosts::default())?;
        apply_json_patch(&object, &value)
    }

    #[test]
    fn json_patches_apply_and_a_failed_test_changes_nothing() {
        let object = json!({"metadata": {"name": "c", "labels": {"a": "b"}}});
        assert_eq!(
            patch(
                "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('x/y'), value: object.metadata.name}]",
                object.clone()
            ),
            Ok(json!({"metadata": {"name": "c", "labels": {"a": "b", "x/y": "c"}}}))
        );
        assert_eq!(
            patch(
                "[JSONPatch{op: 'test', path: '/metadata/name', value: 'd'}, JSONPatch{op: 'remove', path: '/metadata/labels'}]",
                object.clone()
            ),
            Ok(object.clone()),
            "a failed test leaves the object as it was"
        );
        assert_eq!(
            patch("[JSONPatch{op: 'remove', path: '/spec/x'}]", object.clone()),
            Err(
                "JSONPath: remove operation does not apply: doc is missing path: \"/spec/x\": missing value"
                    .to_owned()
            )
        );
        assert_eq!(
            patch("'x'", object),
            Err("type mismatch: JSONPatchType.expression should evaluate to array".to_owned())
        );
    }
}
