//! A webhook's `matchConditions`: CEL expressions over the request that must all hold for it to be
//! called (upstream `plugin/webhook/matchconditions/matcher.go`, GA since 1.30).
//!
//! Each is evaluated with `object`, `oldObject` and `request` (the `AdmissionRequest` the webhook
//! would get) bound, and `authorizer` ([`authorizer_variables`]: the server's authorizer, asked for
//! the requesting user, `authorizer.requestResource` the request's resource). All
//! are evaluated: a condition that is `false` skips the webhook, whatever errors the others had; when
//! none is false but some failed (not compiling, failing to evaluate, not a boolean), the webhook's
//! `failurePolicy` decides: `Fail` refuses the request with upstream's 403, `Ignore` skips the webhook.
//!
//! Costs: the expressions of one run of an admission filter (upstream's `ForInput`: a webhook's or a
//! policy binding's conditions, a binding's validations, …) share a budget ([`FilterRun`]), each call
//! estimated as [`cel::cost`] estimates a CRD rule's, over all the data bound, plus upstream's 350,000
//! for each authorization check it made ([`cel::authorizer::checks_made`]). A call over the per-call
//! limit is its expression's error (`expression '<e>' resulted in error: operation cancelled: actual
//! cost limit exceeded`); a run whose budget is spent stops with `validation failed due to running out
//! of cost budget, no further validation rules will be run`, which the conditions report as their
//! error (under `failurePolicy`, whatever they decided before). Conditions have
//! `RuntimeCELCostBudgetMatchConditions` (2,500,000) per webhook or binding evaluation.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use crate::cel;
use crate::cel::cost::{self, Budget, Call};

/// One of a webhook's `matchConditions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct MatchCondition {
    /// Its name (what upstream's metrics and logs name a condition by).
    pub name: String,
    /// The CEL expression.
    pub expression: String,
}

/// The variables a match condition may name.
pub(crate) const VARIABLES: &[&str] = &["object", "oldObject", "request", "authorizer"];

/// The `authorizer` and `authorizer.requestResource` variables of an admission expression about the
/// request of `attributes` (upstream's activation: the server's authorizer, for the request's user,
/// and a resource check of the request's group, resource, subresource, namespace and name).
pub(crate) fn authorizer_variables(
    authorizer: &std::sync::Arc<dyn cel::authorizer::AccessCheck>,
    attributes: &super::Attributes,
) -> [(&'static str, ::cel::Value); 2] {
    cel::authorizer::variables(
        authorizer,
        &attributes.user,
        &cel::authorizer::RequestResource {
            group: &attributes.group,
            resource: &attributes.resource,
            subresource: &attributes.subresource,
            namespace: &attributes.namespace,
            name: &attributes.name,
        },
    )
}

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

/// The estimated costs of a policy's composited variables. Upstream evaluates a variable lazily, once
/// per filter run, and charges what it cost to the run when an expression first names it: by name,
/// its estimate and the variables it names itself.
#[derive(Debug, Default, Clone)]
pub(crate) struct VariableCosts(HashMap<String, (u64, Vec<String>)>);

impl VariableCosts {
    pub(crate) fn insert(&mut self, name: &str, cost: u64, named: Vec<String>) {
        self.0.insert(name.to_owned(), (cost, named));
    }
}

/// Why an expression of a [`FilterRun`] gave no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FilterError {
    /// Its own error, as upstream's filter words it; the run goes on.
    Expression(String),
    /// The run's budget is spent: upstream stops the whole run ([`cost::OUT_OF_BUDGET`]).
    OutOfBudget,
}

/// One run of an admission filter over a request (upstream's `ForInput`): the variables bound, their
/// size for the cost estimate, the budget its expressions share and the composited variables charged.
pub(crate) struct FilterRun<'a> {
    variables: &'a [(&'a str, ::cel::Value)],
    variable_costs: &'a VariableCosts,
    data_size: u64,
    budget: Budget,
    charged: HashSet<String>,
}

impl<'a> FilterRun<'a> {
    /// A run with `variables` bound (`variable_costs`: those of the composited `variables`) and
    /// `budget` to spend.
    pub(crate) fn new(
        variables: &'a [(&'a str, ::cel::Value)],
        variable_costs: &'a VariableCosts,
        budget: u64,
    ) -> Self {
        FilterRun {
            variables,
            variable_costs,
            data_size: data_size(variables),
            budget: Budget::new(budget),
            charged: HashSet::new(),
        }
    }

    /// Evaluates `compiled` (whose source is `expression`) after charging the variables it names
    /// (those not charged yet in this run, and what they name) and then its own estimate.
    pub(crate) fn evaluate(
        &mut self,
        expression: &str,
        compiled: &cel::Expression,
    ) -> Result<::cel::Value, FilterError> {
        let composition = compiled
            .variables_named
            .iter()
            .fold(0u64, |sum, name| sum.saturating_add(self.variable_cost(name)));
        self.budget
            .spend(composition)
            .map_err(|_| FilterError::OutOfBudget)?;
        let resulted_in = |error: &str| format!("expression '{expression}' resulted in error: {error}");
        let cancelled = || FilterError::Expression(resulted_in(cost::CALL_LIMIT_EXCEEDED));
        let before_checks = compiled.cost_before_checks(self.data_size);
        match self.budget.charge(before_checks) {
            Err(_) => Err(FilterError::OutOfBudget),
            Ok(Call::Cancelled) => Err(cancelled()),
            Ok(Call::Runs) => {
                let (result, checks) =
                    cel::authorizer::checks_made(|| cel::evaluate(compiled, self.variables));
                // cel-go charges each authorization check as it is made, and cancels the call once
                // it is over the per-call limit; the run pays for what the call spent first.
                let checked = checks.saturating_mul(cel::authorizer::CHECK_COST);
                let over_limit = before_checks.saturating_add(checked) > cost::PER_CALL_LIMIT;
                let spent = if over_limit {
                    cost::PER_CALL_LIMIT - before_checks
                } else {
                    checked
                };
                self.budget.spend(spent).map_err(|_| FilterError::OutOfBudget)?;
                if over_limit {
                    return Err(cancelled());
                }
                result.map_err(|e| FilterError::Expression(resulted_in(&cel::error_text(&e))))
            }
        }
    }

    #[cfg(test)]
    fn remaining(&self) -> u64 {
        self.budget.remaining()
    }

    /// What evaluating variable `name` (and the variables it names) adds to the run, once: each
    /// evaluation costs its estimate, at most the per-call limit.
    fn variable_cost(&mut self, name: &str) -> u64 {
        let costs = self.variable_costs;
        let Some((own, named)) = costs.0.get(name) else {
            return 0;
        };
        if !self.charged.insert(name.to_owned()) {
            return 0;
        }
        named.iter().fold((*own).min(cost::PER_CALL_LIMIT), |sum, inner| {
            sum.saturating_add(self.variable_cost(inner))
        })
    }
}

/// The size of the data bound to an expression, which its cost is estimated over.
pub(crate) fn data_size(variables: &[(&str, ::cel::Value)]) -> u64 {
    variables.iter().fold(0u64, |sum, (_, value)| {
        sum.saturating_add(cel::value::cel_size(value))
    })
}

/// Evaluates `conditions` with `variables` bound (see the module docs); `fail` is
/// `failurePolicy: Fail`.
pub(crate) fn evaluate(
    conditions: &[MatchCondition],
    variables: &[(&str, ::cel::Value)],
    fail: bool,
) -> MatchResult {
    let costs = VariableCosts::default();
    let mut run = FilterRun::new(variables, &costs, cost::RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS);
    evaluate_with(conditions, VARIABLES, &mut run, fail)
}

/// [`evaluate`] in `run` (whose budget is the conditions'), where the expressions may name `names` (a
/// policy's conditions also see `params`, `namespaceObject` and `variables`).
pub(crate) fn evaluate_with(
    conditions: &[MatchCondition],
    names: &[&str],
    run: &mut FilterRun<'_>,
    fail: bool,
) -> MatchResult {
    let mut errors = Vec::new();
    let mut skipped = false;
    for condition in conditions {
        match evaluate_condition(&condition.expression, names, run) {
            // Upstream's filter runs them all, then its matcher looks at the results: a false one
            // skips, unless the run itself failed.
            Ok(::cel::Value::Bool(false)) => skipped = true,
            Ok(::cel::Value::Bool(true)) => {}
            // cel-go's checker refuses an expression whose type is not `bool` at compile time
            // (`must evaluate to bool`), which upstream's filter reports as a compilation error; the
            // crate has no checker, so the same text comes when the value is not a boolean.
            Ok(_) => errors.push(compilation_error("must evaluate to bool")),
            Err(FilterError::Expression(error)) => errors.push(error),
            // The run failed: its error, whatever the conditions before it said.
            Err(FilterError::OutOfBudget) if fail => {
                return MatchResult::Error(cost::OUT_OF_BUDGET.to_owned());
            }
            Err(FilterError::OutOfBudget) => return MatchResult::Skipped,
        }
    }
    if skipped {
        return MatchResult::Skipped;
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
    run: &mut FilterRun<'_>,
) -> Result<::cel::Value, FilterError> {
    let compiled = cel::compile(expression, names).map_err(|e| {
        FilterError::Expression(compilation_error(&format!("compilation failed: {}", e.issues)))
    })?;
    run.evaluate(expression, &compiled)
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

    /// An object with a list of `n` numbers, and a condition visiting it once per element: cel-go's
    /// cost grows as n², as the estimate does.
    fn large(n: usize) -> Vec<(&'static str, ::cel::Value)> {
        let items: Vec<u64> = (0..n as u64).collect();
        vec![
            ("object", cel::value::to_cel(&json!({"items": items}))),
            ("oldObject", ::cel::Value::Null),
            ("request", cel::value::to_cel(&json!({"operation": "CREATE"}))),
        ]
    }

    const NESTED: &str = "object.items.all(x, object.items.all(y, x + y >= 0))";

    #[test]
    fn a_condition_over_the_per_call_limit_is_cancelled_and_the_budget_stops_the_run() {
        let v = large(1_000);
        let cancelled = format!(
            "expression '{NESTED}' resulted in error: operation cancelled: actual cost limit exceeded"
        );
        assert_eq!(
            evaluate(&conditions(&[NESTED]), &v, true),
            MatchResult::Error(cancelled.clone())
        );
        assert_eq!(evaluate(&conditions(&[NESTED]), &v, false), MatchResult::Skipped);
        assert_eq!(
            evaluate(&conditions(&[NESTED, NESTED]), &v, true),
            MatchResult::Error(format!("[{cancelled}, {cancelled}]")),
            "two cancelled calls spend 2,000,000 of the conditions' 2,500,000"
        );
        let out = MatchResult::Error(
            "validation failed due to running out of cost budget, no further validation rules will be run"
                .to_owned(),
        );
        assert_eq!(evaluate(&conditions(&[NESTED, NESTED, NESTED]), &v, true), out);
        assert_eq!(
            evaluate(&conditions(&["false", NESTED, NESTED, NESTED]), &v, true),
            out,
            "the run failed, whatever a condition decided before"
        );
        assert_eq!(
            evaluate(&conditions(&[NESTED, NESTED, NESTED]), &v, false),
            MatchResult::Skipped
        );
        let small = large(10);
        assert_eq!(
            evaluate(&conditions(&[NESTED, NESTED, NESTED]), &small, true),
            MatchResult::Matches,
            "cheap on little data"
        );
    }

    #[test]
    fn variables_are_charged_once_per_run_with_what_they_name() {
        let v = variables();
        let mut costs = VariableCosts::default();
        costs.insert("a", 300_000, Vec::new());
        costs.insert("b", 2_000_000, vec!["a".to_owned()]);
        let mut run = FilterRun::new(&v, &costs, 10_000_000);
        let compile = |source: &str| cel::compile(source, &["object", "variables"]).expect("compiles");
        let expression = compile("true || variables.b");
        assert_eq!(
            run.evaluate("true || variables.b", &expression),
            Ok(::cel::Value::Bool(true))
        );
        let own = expression.cost(data_size(&v));
        assert_eq!(
            run.remaining(),
            10_000_000 - 300_000 - 1_000_000 - own,
            "b at most the per-call limit, a once though b names it"
        );
        let again = compile("true || variables.a == 1");
        run.evaluate("true || variables.a == 1", &again)
            .expect("evaluates");
        assert_eq!(
            run.remaining(),
            10_000_000 - 300_000 - 1_000_000 - own - again.cost(data_size(&v)),
            "a is not charged again"
        );
        let mut poor = FilterRun::new(&v, &costs, 1_000_000);
        assert_eq!(
            poor.evaluate("true || variables.b", &expression),
            Err(FilterError::OutOfBudget)
        );
    }

    #[test]
    fn conditions_ask_the_authorizer_for_the_requesting_user() {
        let deny_all: std::sync::Arc<dyn cel::authorizer::AccessCheck> = std::sync::Arc::new(
            crate::chain::authorization::Authorizer::from_flag("AlwaysDeny").expect("a mode"),
        );
        let request = cel::authorizer::RequestResource {
            resource: "configmaps",
            namespace: "default",
            ..Default::default()
        };
        let with = |user: mvp_core::UserInfo| {
            let mut v = variables();
            v.extend(cel::authorizer::variables(&deny_all, &user, &request));
            v
        };
        let mut admin = mvp_core::UserInfo::new("admin");
        admin.groups = vec!["system:masters".to_owned()];
        let c = conditions(&[
            "authorizer.requestResource.check('update').allowed()",
            "authorizer.group('').resource('secrets').namespace('default').check('get').allowed()",
        ]);
        assert_eq!(evaluate(&c, &with(admin), true), MatchResult::Matches);
        let jane = with(mvp_core::UserInfo::new("jane"));
        assert_eq!(
            evaluate(&c, &jane, true),
            MatchResult::Skipped,
            "no opinion is not allowed"
        );
        let three = "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()";
        let mut root = mvp_core::UserInfo::new("root");
        root.groups = vec!["system:masters".to_owned()];
        assert_eq!(
            evaluate(&conditions(&[three]), &with(root), true),
            MatchResult::Matches,
            "one check made: cel-go charges the checks it evaluates"
        );
        assert_eq!(
            evaluate(&conditions(&[three]), &jane, true),
            MatchResult::Error(format!(
                "expression '{three}' resulted in error: operation cancelled: actual cost limit exceeded"
            )),
            "three checks made are over the per-call limit"
        );
        let reason =
            conditions(&["authorizer.path('/healthz').check('get').reason() == 'Everything is forbidden.'"]);
        assert_eq!(evaluate(&reason, &jane, true), MatchResult::Matches);
    }
}
