//! A webhook's `matchConditions`: CEL expressions over the request that must all hold for it to be
//! called (upstream `plugin/webhook/matchconditions/matcher.go`, GA since 1.30).
//!
//! Each is evaluated with `object`, `oldObject` and `request` (the `AdmissionRequest` the webhook
//! would get) bound; `authorizer` is not available here, so an expression naming it is an error. In
//! order: a condition that is `false` skips the webhook at once, whatever errors came before; when
//! none is false but some failed (not compiling, failing to evaluate, not a boolean), the webhook's
//! `failurePolicy` decides: `Fail` refuses the request with upstream's 403, `Ignore` skips the webhook.

use serde::Deserialize;

use crate::cel;

/// One of a webhook's `matchConditions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct MatchCondition {
    /// Its name (what upstream's metrics and logs name a condition by).
    pub name: String,
    /// The CEL expression.
    pub expression: String,
}

/// The variables a match condition may name.
pub(crate) const VARIABLES: &[&str] = &["object", "oldObject", "request"];

/// What a webhook's conditions decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MatchResult {
    /// Every condition holds (or there are none): the webhook is called.
    Matches,
    /// A condition is false, or one failed under `failurePolicy: Ignore`: the webhook is skipped.
    Skipped,
    /// Some failed under `failurePolicy: Fail` (upstream's aggregate message of the errors).
    Error(String),
}

/// Evaluates `conditions` with `variables` bound (see the module docs); `fail` is
/// `failurePolicy: Fail`.
pub(crate) fn evaluate(
    conditions: &[MatchCondition],
    variables: &[(&str, ::cel::Value)],
    fail: bool,
) -> MatchResult {
    evaluate_with(conditions, VARIABLES, variables, fail)
}

/// [`evaluate`] where the expressions may name `names` (a `ValidatingAdmissionPolicy`'s conditions
/// also see `params`, `namespaceObject` and `variables`).
pub(crate) fn evaluate_with(
    conditions: &[MatchCondition],
    names: &[&str],
    variables: &[(&str, ::cel::Value)],
    fail: bool,
) -> MatchResult {
    let mut errors = Vec::new();
    for condition in conditions {
        let outcome = cel::compile(&condition.expression, names)
            .map_err(|e| format!("compilation failed: {}", e.issues))
            .and_then(|compiled| cel::evaluate(&compiled, variables).map_err(|e| e.to_string()));
        match outcome {
            Ok(::cel::Value::Bool(false)) => return MatchResult::Skipped,
            Ok(::cel::Value::Bool(true)) => {}
            Ok(other) => errors.push(format!(
                "matchCondition {:?} must evaluate to bool, got {}",
                condition.name,
                cel_type(&other)
            )),
            Err(error) => errors.push(error),
        }
    }
    match (errors.len(), fail) {
        (0, _) => MatchResult::Matches,
        (_, false) => MatchResult::Skipped,
        // `utilerrors.NewAggregate`: one error as itself, several in brackets.
        (1, true) => MatchResult::Error(errors.remove(0)),
        (_, true) => MatchResult::Error(format!("[{}]", errors.join(", "))),
    }
}

/// The CEL type name of `value`, as cel-go prints it in type errors.
fn cel_type(value: &::cel::Value) -> &'static str {
    match value {
        ::cel::Value::Int(_) => "int",
        ::cel::Value::UInt(_) => "uint",
        ::cel::Value::Float(_) => "double",
        ::cel::Value::String(_) => "string",
        ::cel::Value::Bytes(_) => "bytes",
        ::cel::Value::List(_) => "list",
        ::cel::Value::Map(_) => "map",
        ::cel::Value::Null => "null_type",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn conditions(expressions: &[&str]) -> Vec<MatchCondition> {
        expressions
            .iter()
            .enumerate()
            .map(|(i, e)| MatchCondition {
                name: format!("c{i}"),
                expression: (*e).to_owned(),
            })
            .collect()
    }

    fn variables() -> Vec<(&'static str, ::cel::Value)> {
        vec![
            (
                "object",
                cel::value::to_cel(&json!({"metadata": {"name": "x", "labels": {"team": "a"}}})),
            ),
            ("oldObject", ::cel::Value::Null),
            (
                "request",
                cel::value::to_cel(&json!({"operation": "CREATE", "userInfo": {"username": "alice"}})),
            ),
        ]
    }

    #[test]
    fn every_condition_must_hold() {
        let v = variables();
        let all = conditions(&["object.metadata.name == 'x'", "request.operation == 'CREATE'"]);
        assert_eq!(evaluate(&all, &v, true), MatchResult::Matches);
        let one_false = conditions(&[
            "object.metadata.name == 'x'",
            "request.userInfo.username == 'bob'",
        ]);
        assert_eq!(evaluate(&one_false, &v, true), MatchResult::Skipped);
        assert_eq!(evaluate(&[], &v, true), MatchResult::Matches);
    }

    #[test]
    fn a_false_condition_skips_even_after_an_error() {
        let v = variables();
        let c = conditions(&["object.spec.replicas > 1", "oldObject != null"]);
        assert_eq!(evaluate(&c, &v, true), MatchResult::Skipped);
    }

    #[test]
    fn errors_follow_the_failure_policy() {
        let v = variables();
        let c = conditions(&["object.spec.replicas > 1", "true"]);
        assert!(matches!(evaluate(&c, &v, true), MatchResult::Error(_)));
        assert_eq!(evaluate(&c, &v, false), MatchResult::Skipped);
        let not_bool = conditions(&["object.metadata.name"]);
        assert_eq!(
            evaluate(&not_bool, &v, true),
            MatchResult::Error("matchCondition \"c0\" must evaluate to bool, got string".to_owned())
        );
        let two = conditions(&["object.metadata.name", "'a' + 1 == 'a'"]);
        let MatchResult::Error(message) = evaluate(&two, &v, true) else {
            panic!("two errors fail the request");
        };
        assert!(message.starts_with("[matchCondition \"c0\""), "{message}");
        let uncompilable = conditions(&["object.metadata.name =="]);
        let MatchResult::Error(message) = evaluate(&uncompilable, &v, true) else {
            panic!("a condition that does not compile fails the request");
        };
        assert!(
            message.starts_with("compilation failed: ERROR: <input>:1:"),
            "{message}"
        );
    }
}
