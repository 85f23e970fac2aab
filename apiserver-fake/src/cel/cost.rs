//! What evaluating a rule costs, for upstream's limits (`k8s.io/apiserver/pkg/apis/cel/config.go`):
//! one call may cost at most [`PER_CALL_LIMIT`], all rules of one object together
//! [`RUNTIME_CEL_COST_BUDGET`].
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
}
