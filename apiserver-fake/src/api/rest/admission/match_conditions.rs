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
        match evaluate_condition(&condition.expression, names, variables) {
            Ok(::cel::Value::Bool(false)) => return MatchResult::Skipped,
            Ok(::cel::Value::Bool(true)) => {}
            // cel-go's checker refuses an expression whose type is not `bool` at compile time
            // (`must evaluate to bool`), which upstream's filter reports as a compilation error; the
            // crate has no checker, so the same text comes when the value is not a boolean.
            Ok(_) => errors.push(compilation_error("must evaluate to bool")),
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

/// Compiles and evaluates one expression of an admission filter (a match condition, or a
/// policy's validation or audit annotation): its value, or the error as upstream's filter
/// (`plugin/cel/filter.go`, `ForInput`) words it: `compilation error: compilation failed: <cel-go's
/// issues>` when it does not compile, `expression '<expression>' resulted in error: <cel-go's error>`
/// (e.g. `no such key: spec`) when it fails to evaluate.
pub(crate) fn evaluate_condition(
    expression: &str,
    names: &[&str],
    variables: &[(&str, ::cel::Value)],
) -> Result<::cel::Value, String> {
    let compiled = cel::compile(expression, names)
        .map_err(|e| compilation_error(&format!("compilation failed: {}", e.issues)))?;
    cel::evaluate(&compiled, variables).map_err(|e| {
        format!(
            "expression '{expression}' resulted in error: {}",
            cel::error_text(&e)
        )
    })
}

/// Upstream's filter's text for an expression whose compilation failed with `detail` (the
/// compiler's `compilation failed: …` or `must evaluate to …`).
pub(crate) fn compilation_error(detail: &str) -> String {
    format!("compilation error: {detail}")
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
            MatchResult::Error("compilation error: must evaluate to bool".to_owned())
        );
        let missing = conditions(&["object.spec.replicas > 1"]);
        assert_eq!(
            evaluate(&missing, &v, true),
            MatchResult::Error(
                "expression 'object.spec.replicas > 1' resulted in error: no such key: spec".to_owned()
            )
        );
        let two = conditions(&["object.metadata.name", "object.spec == 1"]);
        assert_eq!(
            evaluate(&two, &v, true),
            MatchResult::Error(
                "[compilation error: must evaluate to bool, expression 'object.spec == 1' resulted in error: no such key: spec]"
                    .to_owned()
            )
        );
        let uncompilable = conditions(&["object.metadata.name =="]);
        let MatchResult::Error(message) = evaluate(&uncompilable, &v, true) else {
            panic!("a condition that does not compile fails the request");
        };
        assert!(
            message.starts_with("compilation error: compilation failed: ERROR: <input>:1:"),
            "{message}"
        );
    }
}
