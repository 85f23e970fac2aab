//! Upstream's static cost limits on a CRD's `x-kubernetes-validations`, checked when the
//! CustomResourceDefinition is created or updated (`apis/apiextensions/validation/validation.go`,
//! `cel_validation.go`): every rule's worst-case cost ([`crate::cel::estimate`]) times the most times
//! it can run (the product of the `maxItems`/`maxProperties` of the lists and maps above it, or, under
//! an unbounded one, how many of its values fit in a request) must stay within
//! [`STATIC_ESTIMATED_COST_LIMIT`], each `messageExpression`'s cost too, and all of them together
//! within [`STATIC_ESTIMATED_CRD_COST_LIMIT`] per schema. A rule over the limit is refused with
//! upstream's `Forbidden: estimated rule cost exceeds budget by factor of …`; a total over it names the
//! (up to four) rules that contributed most, then the schema.
//!
//! On an update, a version whose schema did not change is not held to the per-expression limit
//! (upstream's `suppressPerExpressionCost`), so a CRD stored before a rule became too expensive stays
//! writable; the total still applies.

use serde_json::Value;

use crate::api::status::StatusCause;
use crate::cel;
use crate::cel::estimate::{self, DeclType};

/// `StaticEstimatedCostLimit`: the most one rule or `messageExpression` may be estimated to cost.
pub(crate) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// `StaticEstimatedCRDCostLimit`: the most all rules of one schema may be estimated to cost together.
pub(crate) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

const VALIDATIONS: &str = "x-kubernetes-validations";
const VARIABLES: &[&str] = &["self", "oldSelf"];

/// Upstream's `getCostErrorMessage`.
pub(crate) fn cost_error_message(cost_name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        // Go's %f, so that a factor just over 1 is not printed as 1.0x.
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{cost_name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, \
         maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// `TotalCost`: the sum of a schema's estimated costs and its four most expensive contributions of at
/// least 1% of the limit, most expensive first.
#[derive(Debug, Default)]
struct TotalCost {
    total: u64,
    most_expensive: Vec<(String, u64)>,
}

impl TotalCost {
    fn observe(&mut self, path: &str, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path.to_owned(), cost));
        self.most_expensive.sort_by_key(|rule| std::cmp::Reverse(rule.1));
        self.most_expensive.truncate(4);
    }
}

/// One walk of a schema: its causes, its total and whether per-expression limits apply.
struct Walk {
    causes: Vec<StatusCause>,
    total: TotalCost,
    suppress_per_expression: bool,
}

/// The cost causes of a CRD being written, `old` being the CRD before an update. The schemas and their
/// paths are those of the internal version, as for compilation errors (`validation_rules`).
pub(crate) fn check_definition(crd: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let versions = versions(crd);
    let schemas: Vec<Option<&Value>> = versions.iter().map(|v| version_schema(crd, v)).collect();
    let unchanged = |index: usize| -> bool {
        let (Some(old), Some(version)) = (old, versions.get(index)) else {
            return false;
        };
        let name = version.get("name");
        let old_version = versions_of(old).iter().find(|v| v.get("name") == name);
        old_version.map(|v| version_schema(old, v)) == Some(schemas[index])
    };
    let mut causes = Vec::new();
    let shared = crd.pointer("/spec/validation/openAPIV3Schema").is_some()
        || schemas.windows(2).all(|pair| pair[0] == pair[1]);
    if shared {
        let schema = crd
            .pointer("/spec/validation/openAPIV3Schema")
            .or_else(|| schemas.first().copied().flatten());
        if let Some(schema) = schema {
            let suppress = !versions.is_empty() && (0..versions.len()).all(unchanged);
            check_schema(schema, "spec.validation.openAPIV3Schema", suppress, &mut causes);
        }
    } else {
        for (index, schema) in schemas.iter().enumerate() {
            if let Some(schema) = schema {
                let path = format!("spec.versions[{index}].schema.openAPIV3Schema");
                check_schema(schema, &path, unchanged(index), &mut causes);
            }
        }
    }
    causes
}

fn versions_of(crd: &Value) -> &[Value] {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

fn versions(crd: &Value) -> Vec<&Value> {
    versions_of(crd).iter().collect()
}

/// A version's schema: its own, else the CRD's top-level one.
fn version_schema<'a>(crd: &'a Value, version: &'a Value) -> Option<&'a Value> {
    version
        .pointer("/schema/openAPIV3Schema")
        .or_else(|| crd.pointer("/spec/validation/openAPIV3Schema"))
}

/// `validateCustomResourceDefinitionValidation`'s cost part for one schema at `path`.
fn check_schema(schema: &Value, path: &str, suppress: bool, causes: &mut Vec<StatusCause>) {
    let mut walk = Walk {
        causes: Vec::new(),
        total: TotalCost::default(),
        suppress_per_expression: suppress,
    };
    walk.node(schema, path, Some(1), true);
    causes.append(&mut walk.causes);
    if walk.total.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (rule, _) in &walk.total.most_expensive {
            causes.push(StatusCause::field_forbidden(
                rule,
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        causes.push(StatusCause::field_forbidden(
            path,
            &cost_error_message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                walk.total.total,
                STATIC_ESTIMATED_CRD_COST_LIMIT,
            ),
        ));
    }
}

/// `extractMaxElements`: by how much a schema multiplies how often its children occur (`None`:
/// without bound).
fn max_elements(schema: &Value) -> Option<u64> {
    let bound = |field: &str| {
        schema
            .get(field)
            .and_then(Value::as_i64)
            .map(|v| u64::try_from(v).unwrap_or(0))
    };
    match schema.get("type").and_then(Value::as_str) {
        Some("object") if schema.get("additionalProperties").is_some() => bound("maxProperties"),
        Some("array") => bound("maxItems"),
        _ => Some(1),
    }
}

impl Walk {
    /// Children first, then the node's own rules, as upstream appends its CEL errors.
    fn node(&mut self, schema: &Value, path: &str, cardinality: Option<u64>, root: bool) {
        let child_cardinality = cardinality
            .zip(max_elements(schema))
            .map(|(c, m)| multiply_with_overflow_guard(c, m));
        if let Some(additional) = schema.get("additionalProperties").filter(|s| s.is_object()) {
            self.node(
                additional,
                &format!("{path}.additionalProperties"),
                child_cardinality,
                false,
            );
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let at = format!("{path}.properties[{name}]");
                self.node(property, &at, child_cardinality, false);
            }
        }
        if let Some(items) = schema.get("items").filter(|s| s.is_object()) {
            self.node(items, &format!("{path}.items"), child_cardinality, false);
        }
        let rules = schema
            .get(VALIDATIONS)
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        if rules.is_empty() {
            return;
        }
        let embedded = schema
            .get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool);
        let Some(decl) = DeclType::from_schema(schema, root || embedded == Some(true)) else {
            return;
        };
        let cardinality = cardinality.unwrap_or_else(|| estimate::max_cardinality(decl.min_serialized_size));
        for (index, rule) in rules.iter().enumerate() {
            let at = format!("{path}.{VALIDATIONS}[{index}]");
            self.rule(rule, &at, &decl, cardinality);
        }
    }

    fn rule(&mut self, rule: &Value, at: &str, decl: &std::rc::Rc<DeclType>, cardinality: u64) {
        let text = |field: &str| rule.get(field).and_then(Value::as_str).unwrap_or_default();
        if text("rule").trim().is_empty() {
            return;
        }
        // A rule that does not compile is refused for that (`validation_rules`), at no cost.
        let Ok(expression) = cel::compile(text("rule"), VARIABLES) else {
            return;
        };
        let cost = multiply_with_overflow_guard(expression.static_cost(decl), cardinality);
        let rule_path = format!("{at}.rule");
        if !self.suppress_per_expression && cost > STATIC_ESTIMATED_COST_LIMIT {
            self.causes.push(StatusCause::field_forbidden(
                &rule_path,
                &cost_error_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT),
            ));
        }
        self.total.observe(&rule_path, cost);
        let source = text("messageExpression");
        if source.trim().is_empty() {
            return;
        }
        let Ok(message) = cel::compile(source, VARIABLES) else {
            return;
        };
        // Upstream does not multiply a message expression's cost by the cardinality.
        let cost = message.static_cost(decl);
        let message_path = format!("{at}.messageExpression");
        if !self.suppress_per_expression && cost > STATIC_ESTIMATED_COST_LIMIT {
            self.causes.push(StatusCause::field_forbidden(
                &message_path,
                &cost_error_message(
                    "estimated messageExpression cost",
                    cost,
                    STATIC_ESTIMATED_COST_LIMIT,
                ),
            ));
        }
        self.total.observe(&message_path, cost);
    }
}

/// Upstream's `multiplyWithOverflowGuard` (a free rule stays free).
fn multiply_with_overflow_guard(base: u64, cardinality: u64) -> u64 {
    if base == 0 {
        return 0;
    }
    base.saturating_mul(cardinality)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd(items: Value, rules: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object",
            "properties": {"spec": {"type": "object", "properties": {"names": {
                "type": "array", "items": items, "maxItems": 1000, "x-kubernetes-validations": rules}}}}}}}]}})
    }

    fn messages(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn factors_print_as_upstream_prints_them() {
        let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
        let limit = STATIC_ESTIMATED_COST_LIMIT;
        assert_eq!(
            cost_error_message("estimated rule cost", 943_723_002, limit),
            format!("estimated rule cost exceeds budget by factor of 94.4x {hint}")
        );
        assert_eq!(
            cost_error_message("estimated rule cost", 11_324_678, limit),
            format!("estimated rule cost exceeds budget by factor of 1.132468x {hint}")
        );
        assert_eq!(
            cost_error_message("estimated rule cost", u64::MAX, limit),
            format!("estimated rule cost exceeds budget by factor of more than 100x {hint}")
        );
    }

    #[test]
    fn rules_over_the_limits_are_forbidden_with_the_most_expensive_named() {
        let rules = json!([{"rule": "self.all(x, x.matches('^[a-z0-9]+$'))"}, {"rule": "size(self) > 0"}]);
        let causes = check_definition(&crd(json!({"type": "string"}), rules), None);
        let at =
            "spec.validation.openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations";
        assert_eq!(
            messages(&causes),
            [
                format!(
                    "{at}[0].rule: Forbidden: {}",
                    cost_error_message("estimated rule cost", 943_723_002, STATIC_ESTIMATED_COST_LIMIT)
                ),
                format!(
                    "{at}[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
                ),
                format!(
                    "spec.validation.openAPIV3Schema: Forbidden: {}",
                    cost_error_message(
                        "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                        943_723_002 + 3,
                        STATIC_ESTIMATED_CRD_COST_LIMIT
                    )
                ),
            ]
        );
        let bounded = crd(
            json!({"type": "string", "maxLength": 63}),
            json!([{"rule": "self.all(x, x.matches('^[a-z0-9]+$'))"}]),
        );
        assert!(check_definition(&bounded, None).is_empty());
    }

    #[test]
    fn rules_under_unbounded_lists_run_once_for_every_value_a_request_can_hold() {
        let items = json!({"type": "object", "properties": {"name": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.name.startsWith('a') && self.name.endsWith('z')"}]});
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object",
            "properties": {"list": {"type": "array", "items": items}}}}}]}});
        // (2 + 1) + (2 + 1) per object of at least `{}`: 3 MiB / 3 of them.
        let causes = check_definition(&crd, None);
        assert!(causes.is_empty(), "{:?}", messages(&causes));
        let mut costly = crd.clone();
        costly["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["list"]["items"]["x-kubernetes-validations"]
            [0]["rule"] = json!("self.name.contains('abc')");
        assert_eq!(
            messages(&check_definition(&costly, None))[0],
            format!(
                "spec.validation.openAPIV3Schema.properties[list].items.x-kubernetes-validations[0].rule: Forbidden: {}",
                cost_error_message(
                    "estimated rule cost",
                    (2 + 314_573) * 1_048_576,
                    STATIC_ESTIMATED_COST_LIMIT
                )
            )
        );
    }

    #[test]
    fn an_unchanged_schema_is_not_held_to_the_per_expression_limit_on_update() {
        let rules = json!([{"rule": "self.all(x, x.matches('^[a-z0-9]+$'))"}]);
        let stored = crd(json!({"type": "string"}), rules);
        let causes = check_definition(&stored, Some(&stored));
        assert_eq!(
            causes.len(),
            2,
            "the total still applies: {:?}",
            messages(&causes)
        );
        assert!(causes.iter().all(|c| c.message.contains("total")));
        let mut changed = stored.clone();
        changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["names"]
            ["maxItems"] = json!(999);
        assert_eq!(check_definition(&changed, Some(&stored)).len(), 3);
    }
}
