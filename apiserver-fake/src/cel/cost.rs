//! What evaluating a rule costs, for upstream's limits (`k8s.io/apiserver/pkg/apis/cel/config.go`):
//! one call may cost at most [`PER_CALL_LIMIT`], all rules of one object together
//! [`RUNTIME_CEL_COST_BUDGET`] (as do the expressions of one admission filter run: a policy binding's
//! validations, its audit annotations, one mutation), an admission's `matchConditions`
//! [`RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS`]; [`Budget`] keeps the account.
//!
//! cel-go counts the cost of every step its interpreter takes; the `cel` crate has no such hook, so
//! this is an estimate from what is known before evaluating: the expression's size, and the size of
//! the data it runs on raised to the depth of its nested comprehensions (each `all`/`exists`/`map`/
//! `filter` over the data may visit all of it, one nested in another all of it for each element).
//! It is exact for neither, but it grows as cel-go's does: linearly with the data for a flat rule,
//! quadratically for `self.all(x, self.all(y, …))`, so the rules upstream stops are stopped here too.

/// `celconfig.PerCallLimit`: the most one evaluation may cost.
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;

/// `celconfig.RuntimeCELCostBudget`: the most all the rules of one custom resource may cost.
pub(crate) const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;

/// `celconfig.RuntimeCELCostBudgetMatchConditions`: the most the `matchConditions` of one webhook or
/// one policy binding evaluation may cost together.
pub(crate) const RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS: u64 = 2_500_000;

/// cel-go's error for an evaluation stopped at [`PER_CALL_LIMIT`] (`interpreter.EvalCancelledError`).
pub(crate) const CALL_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Upstream's error once a budget is spent (`plugin/cel/activation.go`, and the CRD validator's).
pub(crate) const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// What is left of a budget: upstream's `remainingBudget`, which every evaluation is charged its cost
/// after it ran (`activation.Evaluate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    remaining: u64,
}

/// How a charged evaluation ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// Within the per-call limit: it runs.
    Runs,
    /// Over it: cel-go cancels it ([`CALL_LIMIT_EXCEEDED`]) after spending the limit.
    Cancelled,
}

/// The budget could not pay for an evaluation: upstream stops the whole run with [`OUT_OF_BUDGET`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfBudget;

impl Budget {
    pub(crate) fn new(total: u64) -> Self {
        Budget { remaining: total }
    }

    #[cfg(test)]
    pub(crate) fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Whether nothing is left: upstream refuses to start another rule on a spent budget.
    pub(crate) fn is_spent(&self) -> bool {
        self.remaining == 0
    }

    /// Spends `amount` (what evaluations already ran cost, e.g. a policy's variables), or runs out.
    pub(crate) fn spend(&mut self, amount: u64) -> Result<(), OutOfBudget> {
        if amount > self.remaining {
            self.remaining = 0;
            return Err(OutOfBudget);
        }
        self.remaining -= amount;
        Ok(())
    }

    /// Charges an evaluation estimated at `cost`. cel-go stops one at the per-call limit, so a
    /// cancelled call spends the limit; when what it spent is more than is left, the budget is out.
    pub(crate) fn charge(&mut self, cost: u64) -> Result<Call, OutOfBudget> {
        self.spend(cost.min(PER_CALL_LIMIT))?;
        Ok(if cost > PER_CALL_LIMIT {
            Call::Cancelled
        } else {
            Call::Runs
        })
    }
}

/// The estimated cost of evaluating an expression of `expression_nodes` AST nodes whose comprehensions
/// nest `comprehension_depth` deep, over data of `data_size` JSON values.
pub(crate) fn estimate(expression_nodes: u64, comprehension_depth: u32, data_size: u64) -> u64 {
    if comprehension_depth == 0 {
        return expression_nodes;
    }
    let iterations = data_size.saturating_pow(comprehension_depth);
    expression_nodes.saturating_add(iterations.saturating_mul(expression_nodes.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_rules_cost_little_and_nested_comprehensions_grow_quadratically() {
        assert_eq!(estimate(5, 0, 1_000_000), 5);
        assert!(estimate(5, 1, 2_000) < PER_CALL_LIMIT);
        assert!(estimate(5, 2, 2_000) > PER_CALL_LIMIT);
        assert_eq!(estimate(5, 9, u64::MAX), u64::MAX, "saturates, never overflows");
    }

    #[test]
    fn a_budget_pays_for_calls_until_it_is_spent_and_cancelled_calls_spend_the_limit() {
        let mut budget = Budget::new(RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS);
        assert_eq!(budget.charge(400_000), Ok(Call::Runs));
        assert_eq!(budget.remaining(), 2_100_000);
        assert_eq!(
            budget.charge(PER_CALL_LIMIT),
            Ok(Call::Runs),
            "the limit itself is allowed"
        );
        assert_eq!(
            budget.charge(u64::MAX),
            Ok(Call::Cancelled),
            "charged the limit, not its estimate"
        );
        assert_eq!(budget.remaining(), 100_000);
        assert_eq!(
            budget.charge(100_000),
            Ok(Call::Runs),
            "what is left can be spent"
        );
        assert!(budget.is_spent(), "nothing left for another rule");
        assert_eq!(budget.charge(1), Err(OutOfBudget));
        assert_eq!(budget.charge(0), Ok(Call::Runs), "a free call still runs");

        let mut budget = Budget::new(RUNTIME_CEL_COST_BUDGET);
        for _ in 0..10 {
            assert_eq!(budget.charge(5_000_000), Ok(Call::Cancelled));
        }
        assert_eq!(
            budget.charge(5_000_000),
            Err(OutOfBudget),
            "ten cancelled calls spend it all"
        );
    }
}
