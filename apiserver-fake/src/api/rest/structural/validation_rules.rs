//! `x-kubernetes-validations`: CEL rules on the nodes of a CRD version's structural schema
//! (upstream `apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go`, whose texts this
//! copies), evaluated with [`crate::cel`].
//!
//! - [`validate`] runs the rules on a custom resource being written: each rule sees the value of the
//!   node it is on as `self` (at the root: `apiVersion`, `kind` and `metadata.name`/`generateName`
//!   with the object's fields); a transition rule (one naming `oldSelf`) runs on updates only, where
//!   the old object has a value at the same place (through object properties and map values, and the
//!   items of `x-kubernetes-list-type: map` lists matched by their keys). A rule that is not `true`
//!   becomes a cause at the node's path (plus the rule's `fieldPath`) with the rule's `reason`
//!   (`FieldValueInvalid` by default), and the `messageExpression`'s result, the `message`, or
//!   `failed rule: <rule>` as its detail. Rules share upstream's cost budget (`cel::cost`).
//! - [`check_definition`] compiles every rule of a CRD being written: a rule that does not compile
//!   refuses the CRD with upstream's `…x-kubernetes-validations[0].rule: Invalid value:
//!   apiextensions.ValidationRule{…}: compilation failed: ERROR: <input>:…`.

use serde_json::{Map, Value};

use crate::api::catalog::KubeVersion;
use crate::api::status::StatusCause;
use crate::cel::{self, EnvironmentType, cost, value};

const VALIDATIONS: &str = "x-kubernetes-validations";

/// The variables of a rule and its `messageExpression`.
const VARIABLES: &[&str] = &["self", "oldSelf"];

/// Upstream's `field.Path` in the three ways it grows: `a.b`, `a[0]`, `a[key]`. The root prints as
/// a nil path does, `<nil>` (upstream validates custom resources from a nil path).
fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() { "<nil>" } else { path }
}

fn rules(schema: &Value) -> &[Value] {
    schema
        .get(VALIDATIONS)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn text<'a>(rule: &'a Value, field: &str) -> &'a str {
    rule.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// Upstream `ruleErrorString`: the message when there is one, else the rule.
fn rule_error_string(rule: &Value) -> &str {
    match text(rule, "message").trim() {
        "" => text(rule, "rule").trim(),
        message => message,
    }
}

/// What one object's validation has left: upstream's remaining budget (`cel::cost::Budget`, the
/// account admission's filter runs keep too), and whether the run ended (a call was cancelled or the
/// budget could not pay: upstream's budget of -1).
struct Run {
    budget: cost::Budget,
    exhausted: bool,
    causes: Vec<StatusCause>,
    /// Ratcheted failures, as `Warning` texts.
    warnings: Vec<String>,
    /// Whether `CRDValidationRatcheting` is on (failures of unchanged values become warnings).
    ratcheting: bool,
}

impl Run {
    fn exhausted(&self) -> bool {
        self.exhausted
    }
}

/// What the rules said of an object.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The causes of the rules that failed, in schema walk order.
    pub causes: Vec<StatusCause>,
    /// Failures ratcheted on update (upstream's `CRDValidationRatcheting`, on by default since 1.30):
    /// a rule not naming `oldSelf` that fails on a value the update left unchanged is a warning
    /// (`spec.x: Invalid value: …`), not an error, so objects stored before a rule existed stay writable.
    pub warnings: Vec<String>,
}

/// Runs the `x-kubernetes-validations` of `schema` on `object` (with `old`, the stored object, on
/// updates); `ratcheting`: whether `CRDValidationRatcheting` is on (off, every failure is a cause).
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>, ratcheting: bool) -> Outcome {
    let mut run = Run {
        budget: cost::Budget::new(cost::RUNTIME_CEL_COST_BUDGET),
        exhausted: false,
        causes: Vec::new(),
        warnings: Vec::new(),
        ratcheting,
    };
    let at = Node {
        path: String::new(),
        root: true,
        parent_unchanged: false,
    };
    node(schema, object, old, &at, &mut run);
    Outcome {
        causes: run.causes,
        warnings: run.warnings,
    }
}

/// Where a value is: its path, whether it is the resource root, and whether the nearest value with an
/// old counterpart is unchanged (upstream's ratcheting falls back to it where a value has none of its
/// own, e.g. items of a non-map list).
struct Node {
    path: String,
    root: bool,
    parent_unchanged: bool,
}

/// `self` of a resource root: its fields, with `metadata` reduced to what CEL sees of it
/// (upstream `WithTypeAndObjectMeta`: `name` and `generateName`).
fn resource_root(object: &Value) -> Value {
    let mut root = object.clone();
    if let Some(metadata) = root.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.retain(|k, _| k == "name" || k == "generateName");
    }
    root
}

fn node(schema: &Value, object: &Value, old: Option<&Value>, at: &Node, run: &mut Run) {
    if object.is_null() || run.exhausted() {
        return;
    }
    let unchanged = old.map_or(at.parent_unchanged, |old| old == object);
    let resource = at.root
        || schema
            .get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            == Some(true);
    if !rules(schema).is_empty() {
        let (this, previous) = if resource {
            (resource_root(object), old.map(resource_root))
        } else {
            (object.clone(), old.cloned())
        };
        expressions(schema, &this, previous.as_ref(), &at.path, unchanged, run);
        if run.exhausted() {
            return;
        }
    }
    match object {
        Value::Object(map) => {
            let old_map = correlatable_map(schema)
                .then(|| old.and_then(Value::as_object))
                .flatten();
            properties(schema, map, old_map, &at.path, unchanged, run);
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            let old_items = old.and_then(Value::as_array);
            for (index, item) in items.iter().enumerate() {
                let old_item = old_items.and_then(|old| correlated_item(schema, item, old));
                let item_at = Node {
                    path: format!("{}[{index}]", at.path),
                    root: false,
                    parent_unchanged: unchanged,
                };
                node(item_schema, item, old_item, &item_at, run);
                if run.exhausted() {
                    return;
                }
            }
        }
        _ => {}
    }
}

/// Upstream `MapIsCorrelatable`: only `x-kubernetes-map-type: atomic` maps have no old values per key.
fn correlatable_map(schema: &Value) -> bool {
    schema.get("x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic")
}

/// The item of `old` a `x-kubernetes-list-type: map` list correlates with `item` (same values of the
/// `x-kubernetes-list-map-keys`); other lists correlate nothing.
fn correlated_item<'a>(schema: &Value, item: &Value, old: &'a [Value]) -> Option<&'a Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    old.iter()
        .find(|candidate| keys.iter().all(|k| candidate.get(*k) == item.get(*k)))
}

fn properties(
    schema: &Value,
    map: &Map<String, Value>,
    old: Option<&Map<String, Value>>,
    path: &str,
    unchanged: bool,
    run: &mut Run,
) {
    let declared = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|s| s.is_object());
    // A field the old object lacks is new: its parent changed, so nothing below it ratchets.
    let at = |path: String, old_field: Option<&Value>| Node {
        path,
        root: false,
        parent_unchanged: unchanged && old_field.is_some(),
    };
    if let Some(additional) = additional {
        for (key, field) in map {
            let old_field = old.and_then(|o| o.get(key));
            node(
                additional,
                field,
                old_field,
                &at(format!("{path}[{key}]"), old_field),
                run,
            );
            if run.exhausted() {
                return;
            }
        }
    }
    if let Some(declared) = declared {
        for (key, field) in map {
            if let Some(property) = declared.get(key) {
                let old_field = old.and_then(|o| o.get(key));
                node(property, field, old_field, &at(child(path, key), old_field), run);
                if run.exhausted() {
                    return;
                }
            }
        }
    }
}

/// Upstream `validateExpressions`: the rules of one node.
fn expressions(
    schema: &Value,
    this: &Value,
    old: Option<&Value>,
    path: &str,
    unchanged: bool,
    run: &mut Run,
) {
    let kind = value::schema_type(schema).to_owned();
    let invalid = |detail: &str| StatusCause::field_invalid(shown(path), &kind, detail);
    if run.budget.is_spent() {
        run.causes.push(invalid(cost::OUT_OF_BUDGET));
        run.exhausted = true;
        return;
    }
    let data_size = value::size(this) + old.map_or(0, value::size);
    let self_value = cel::value::to_cel(this);
    let old_value = old.map(cel::value::to_cel);
    for rule in rules(schema) {
        let source = text(rule, "rule");
        if source.trim().is_empty() {
            continue;
        }
        let expression = match cel::compile(source, VARIABLES) {
            Ok(expression) => expression,
            Err(error) => {
                run.causes.push(invalid(&format!(
                    "rule compile error: compilation failed: {}",
                    error.issues
                )));
                continue;
            }
        };
        // Transition rules run only where there is an old value to compare with.
        if expression.uses_old_self && old_value.is_none() {
            continue;
        }
        // Upstream charges what the call cost (at most the per-call limit, where cel-go cancels it)
        // before it looks at how the call ended.
        match run.budget.charge(expression.cost(data_size)) {
            Ok(cost::Call::Runs) => {}
            Ok(cost::Call::Cancelled) => {
                run.causes.push(invalid(&format!(
                    "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                    cost::CALL_LIMIT_EXCEEDED,
                    rule_error_string(rule)
                )));
                run.exhausted = true;
                return;
            }
            Err(cost::OutOfBudget) => {
                run.causes.push(invalid(cost::OUT_OF_BUDGET));
                run.exhausted = true;
                return;
            }
        }
        let mut variables = vec![("self", self_value.clone())];
        if let Some(old_value) = &old_value {
            variables.push(("oldSelf", old_value.clone()));
        }
        match cel::evaluate(&expression, &variables) {
            Ok(::cel::Value::Bool(true)) => continue,
            Ok(_) => {}
            Err(error) => {
                let error = cel::error_text(&error);
                let detail = if error.contains("found no matching overload")
                    || error.starts_with("no such overload")
                {
                    format!(
                        "'no such overload: {error}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                        rule_error_string(rule)
                    )
                } else {
                    format!("{error} evaluating rule: {}", rule_error_string(rule))
                };
                run.causes.push(invalid(&detail));
                continue;
            }
        }
        let at = match text(rule, "fieldPath") {
            "" => path.to_owned(),
            field_path => normalized_field_path(schema, path, field_path),
        };
        let detail = message_expression(rule, &variables, data_size, (shown(&at), &kind), run)
            .unwrap_or_else(|| match text(rule, "message").trim() {
                "" => format!("failed rule: {}", rule_error_string(rule)),
                message => message.to_owned(),
            });
        if run.exhausted() {
            return;
        }
        let cause = cause_for_reason(text(rule, "reason"), shown(&at), &kind, &detail);
        if run.ratcheting && !expression.uses_old_self && unchanged {
            run.warnings.push(format!("{}: {}", cause.field, cause.message));
        } else {
            run.causes.push(cause);
        }
    }
}

/// Upstream `fieldErrorForReason`.
fn cause_for_reason(reason: &str, path: &str, kind: &str, detail: &str) -> StatusCause {
    match reason {
        "FieldValueForbidden" => StatusCause::field_forbidden(path, detail),
        "FieldValueRequired" => StatusCause::field_required(path, detail),
        "FieldValueDuplicate" => StatusCause {
            reason: "FieldValueDuplicate".to_owned(),
            message: format!("Duplicate value: {kind:?}"),
            field: path.to_owned(),
        },
        _ => StatusCause::field_invalid(path, kind, detail),
    }
}

/// Upstream `evalMessageExpression`: the trimmed string the rule's `messageExpression` gives, or
/// `None` (then the message is used) when it has none, fails, or gives no usable string. Running out
/// of budget adds upstream's cause and exhausts the run.
fn message_expression(
    rule: &Value,
    variables: &[(&str, ::cel::Value)],
    data_size: u64,
    (path, kind): (&str, &str),
    run: &mut Run,
) -> Option<String> {
    let source = text(rule, "messageExpression");
    if source.is_empty() {
        return None;
    }
    let expression = cel::compile(source, VARIABLES).ok()?;
    if run.budget.spend(expression.cost(data_size)).is_err() {
        run.causes.push(StatusCause::field_invalid(
            path,
            kind,
            "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run",
        ));
        run.exhausted = true;
        return None;
    }
    match cel::evaluate(&expression, variables) {
        Ok(::cel::Value::String(message)) => {
            let message = message.trim();
            let usable = !message.is_empty() && !message.contains('\n') && message.len() <= 5 * 1024;
            usable.then(|| message.to_owned())
        }
        _ => None,
    }
}

/// A rule's `fieldPath` (`.spec.x`, `['a.b']`) appended to `path`, each step a child where the schema
/// declares properties and a key where it has `additionalProperties` (upstream `ValidFieldPath`,
/// which refused invalid paths when the CRD was written).
fn normalized_field_path(schema: &Value, path: &str, field_path: &str) -> String {
    let mut at = path.to_owned();
    let mut current = schema;
    let mut rest = field_path;
    while !rest.is_empty() {
        let (name, next) = if let Some(quoted) = rest.strip_prefix("['") {
            match quoted.find("']") {
                Some(end) => (&quoted[..end], &quoted[end + 2..]),
                None => (quoted, ""),
            }
        } else if let Some(dotted) = rest.strip_prefix('.') {
            let end = dotted.find(['.', '[']).unwrap_or(dotted.len());
            (&dotted[..end], &dotted[end..])
        } else {
            break;
        };
        if let Some(property) = current.get("properties").and_then(|p| p.get(name)) {
            at = child(&at, name);
            current = property;
        } else if let Some(additional) = current.get("additionalProperties").filter(|s| s.is_object()) {
            at = format!("{at}[{name}]");
            current = additional;
        } else {
            at = child(&at, name);
        }
        rest = next;
    }
    at
}

/// Go's `%#v` of the internal `apiextensions.ValidationRule`, the value upstream's CRD validation
/// prints for a rule that does not compile. A set `reason`/`optionalOldSelf` is a pointer Go prints
/// as an address; a fixed one stands for it here.
fn go_validation_rule(rule: &Value) -> String {
    let reason = if rule.get("reason").is_some() {
        "(*apiextensions.FieldValueErrorReason)(0xc000000000)"
    } else {
        "(*apiextensions.FieldValueErrorReason)(nil)"
    };
    let optional = if rule.get("optionalOldSelf").is_some() {
        "(*bool)(0xc000000000)"
    } else {
        "(*bool)(nil)"
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{:?}, Message:{:?}, MessageExpression:{:?}, Reason:{reason}, FieldPath:{:?}, OptionalOldSelf:{optional}}}",
        text(rule, "rule"),
        text(rule, "message"),
        text(rule, "messageExpression"),
        text(rule, "fieldPath"),
    )
}

/// The rules of a CRD that do not compile, as upstream's CRD validation reports them. The schema path
/// is that of the internal version: `spec.validation.openAPIV3Schema` when every version has the same
/// schema (conversion moves it there), else `spec.versions[i].schema.openAPIV3Schema`.
///
/// A rule or `messageExpression` compiles in the `NewExpressions` environment of `emulated`, the
/// server's emulated minor (so a library of a later minor is an `undeclared reference`), unless `old`,
/// the definition before an update, already had the same text somewhere (upstream's
/// `preexistingExpressions`): that one compiles in the `StoredExpressions` environment.
pub fn check_definition(crd: &Value, old: Option<&Value>, emulated: KubeVersion) -> Vec<StatusCause> {
    let mut preexisting = Preexisting {
        emulated,
        rules: Vec::new(),
        message_expressions: Vec::new(),
    };
    if let Some(old) = old {
        let schemas = old
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
            .chain(old.pointer("/spec/validation/openAPIV3Schema"));
        for schema in schemas {
            preexisting.collect(schema);
        }
    }
    let check_schema = |schema: &Value, path: &str, causes: &mut Vec<StatusCause>| {
        check_schema(schema, path, causes, &preexisting);
    };
    let mut causes = Vec::new();
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let schemas: Vec<Option<&Value>> = versions
        .iter()
        .map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect();
    let shared = schemas.windows(2).all(|pair| pair[0] == pair[1]);
    if let Some(top) = crd.pointer("/spec/validation/openAPIV3Schema") {
        check_schema(top, "spec.validation.openAPIV3Schema", &mut causes);
    } else if shared {
        if let Some(Some(schema)) = schemas.first() {
            check_schema(schema, "spec.validation.openAPIV3Schema", &mut causes);
        }
    } else {
        for (index, schema) in schemas.iter().enumerate() {
            if let Some(schema) = schema {
                check_schema(
                    schema,
                    &format!("spec.versions[{index}].schema.openAPIV3Schema"),
                    &mut causes,
                );
            }
        }
    }
    causes
}

/// The expressions of the definition before an update (`findPreexistingExpressions`), and the
/// emulated minor new ones compile at.
struct Preexisting {
    emulated: KubeVersion,
    rules: Vec<String>,
    message_expressions: Vec<String>,
}

impl Preexisting {
    /// Collects the rules and message expressions of `schema` and the schemas under it.
    fn collect(&mut self, schema: &Value) {
        for rule in rules(schema) {
            self.rules.push(text(rule, "rule").to_owned());
            let message_expression = text(rule, "messageExpression");
            if !message_expression.is_empty() {
                self.message_expressions.push(message_expression.to_owned());
            }
        }
        for child in children(schema) {
            self.collect(child);
        }
    }

    fn environment(&self, source: &str, preexisting: &[String]) -> EnvironmentType {
        if preexisting.iter().any(|p| p == source) {
            EnvironmentType::StoredExpressions
        } else {
            EnvironmentType::new_expressions(self.emulated)
        }
    }
}

/// The schemas directly under `schema` that may have rules: its properties, items and additional
/// properties.
fn children(schema: &Value) -> impl Iterator<Item = &Value> {
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values());
    properties
        .chain(schema.get("items").filter(|s| s.is_object()))
        .chain(schema.get("additionalProperties").filter(|s| s.is_object()))
}

fn check_schema(schema: &Value, path: &str, causes: &mut Vec<StatusCause>, preexisting: &Preexisting) {
    for (index, rule) in rules(schema).iter().enumerate() {
        let at = format!("{path}.{VALIDATIONS}[{index}]");
        let source = text(rule, "rule");
        if source.trim().is_empty() {
            causes.push(StatusCause::field_required(&format!("{at}.rule"), ""));
            continue;
        }
        let environment = preexisting.environment(source, &preexisting.rules);
        if let Err(error) = cel::compile_in(source, VARIABLES, environment) {
            causes.push(StatusCause {
                reason: "FieldValueInvalid".to_owned(),
                message: format!(
                    "Invalid value: {}: compilation failed: {}",
                    go_validation_rule(rule),
                    error.issues
                ),
                field: format!("{at}.rule"),
            });
        }
        let message_expression = text(rule, "messageExpression");
        if !message_expression.is_empty()
            && let Err(error) = cel::compile_in(
                message_expression,
                VARIABLES,
                preexisting.environment(message_expression, &preexisting.message_expressions),
            )
        {
            causes.push(StatusCause::field_invalid(
                &format!("{at}.messageExpression"),
                message_expression,
                &format!("messageExpression compilation failed: {}", error.issues),
            ));
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            check_schema(
                property,
                &format!("{path}.properties[{name}]"),
                causes,
                preexisting,
            );
        }
    }
    if let Some(items) = schema.get("items").filter(|s| s.is_object()) {
        check_schema(items, &format!("{path}.items"), causes, preexisting);
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        check_schema(
            additional,
            &format!("{path}.additionalProperties"),
            causes,
            preexisting,
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object",
            "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')", "message": "name must start with w"}],
            "properties": {
            "spec": {"type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' exceeds max ' + string(self.max)"},
                    {"rule": "!has(self.forbidden)", "reason": "FieldValueForbidden", "fieldPath": ".forbidden", "message": "may not be set"},
                    {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"},
                ],
                "properties": {
                    "min": {"type": "integer"}, "max": {"type": "integer"},
                    "mode": {"type": "string"}, "forbidden": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string",
                        "x-kubernetes-validations": [{"rule": "size(self) <= 3"}]}},
                    "limits": {"type": "object", "additionalProperties": {"type": "integer",
                        "x-kubernetes-validations": [{"rule": "self >= 0", "reason": "FieldValueRequired", "message": "non-negative"}]}},
                }},
        }})
    }

    fn messages(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect()
    }

    #[test]
    fn passing_objects_have_no_causes() {
        let object = json!({"metadata": {"name": "web"}, "spec": {"min": 1, "max": 2, "mode": "a",
            "tags": ["abc"], "limits": {"cpu": 1}}});
        assert!(validate(&schema(), &object, None, true).causes.is_empty());
    }

    #[test]
    fn failing_rules_become_causes_at_their_nodes() {
        let object = json!({"metadata": {"name": "x"}, "spec": {"min": 3, "max": 2, "mode": "a",
            "forbidden": "y", "tags": ["ok", "toolong"], "limits": {"cpu": -1}}});
        assert_eq!(
            messages(&validate(&schema(), &object, None, true).causes),
            [
                r#"FieldValueInvalid <nil>: Invalid value: "object": name must start with w"#,
                r#"FieldValueInvalid spec: Invalid value: "object": min 3 exceeds max 2"#,
                "FieldValueForbidden spec.forbidden: Forbidden: may not be set",
                r#"FieldValueInvalid spec.tags[1]: Invalid value: "string": failed rule: size(self) <= 3"#,
                "FieldValueRequired spec.limits[cpu]: Required value: non-negative",
            ]
        );
    }

    #[test]
    fn transition_rules_run_on_updates_only() {
        let old = json!({"metadata": {"name": "web"}, "spec": {"min": 1, "max": 2, "mode": "a"}});
        let new = json!({"metadata": {"name": "web"}, "spec": {"min": 1, "max": 2, "mode": "b"}});
        assert!(
            validate(&schema(), &new, None, true).causes.is_empty(),
            "a create has no oldSelf"
        );
        assert_eq!(
            messages(&validate(&schema(), &new, Some(&old), true).causes),
            [r#"FieldValueInvalid spec: Invalid value: "object": mode is immutable"#]
        );
    }

    #[test]
    fn runtime_errors_and_the_cost_limit() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.items.all(x, self.items.all(y, x != y || x == y))"},
                {"rule": "self.never == 1"},
            ],
            "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}}});
        let small = json!({"spec": {"items": [1, 2]}});
        let causes = messages(&validate(&schema, &small, None, true).causes);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].contains("evaluating rule: self.never == 1"),
            "{causes:?}"
        );
        let large = json!({"spec": {"items": (0..2_000).collect::<Vec<_>>()}});
        assert_eq!(
            messages(&validate(&schema, &large, None, true).causes),
            [concat!(
                r#"FieldValueInvalid spec: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': "#,
                "no further validation rules will be run due to call cost exceeds limit for rule: ",
                "self.items.all(x, self.items.all(y, x != y || x == y))"
            )]
        );
    }

    /// A new rule may only call what the compatibility minor (the emulated one minus one) has; a
    /// rule the definition already had compiles with everything.
    #[test]
    fn new_rules_compile_at_the_servers_compatibility_minor() {
        let crd = |rule: &str| {
            json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-validations": [
                    {"rule": rule, "messageExpression": "'bad: ' + self.q"}]}}}}}]}})
        };
        let v = |minor| KubeVersion { major: 1, minor };
        let quantity = crd("quantity(self.q).isInteger()");
        let causes = check_definition(&quantity, None, v(28));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].message.ends_with(concat!(
                "compilation failed: ERROR: <input>:1:9: undeclared reference to 'quantity' (in container '')\n",
                " | quantity(self.q).isInteger()\n | ........^\n",
                "ERROR: <input>:1:27: undeclared reference to 'isInteger' (in container '')\n",
                " | quantity(self.q).isInteger()\n | ..........................^"
            )),
            "{}",
            causes[0].message
        );
        assert!(check_definition(&quantity, None, v(29)).is_empty());
        assert!(
            check_definition(&quantity, Some(&quantity), v(28)).is_empty(),
            "unchanged"
        );
        let changed = crd("quantity(self.q).isInteger() && true");
        assert_eq!(check_definition(&changed, Some(&quantity), v(28)).len(), 1);
    }

    #[test]
    fn rules_that_do_not_compile_refuse_the_definition() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object",
            "properties": {"spec": {"type": "object", "x-kubernetes-validations": [{"rule": "self.x <"}]}}}}}]}});
        let causes = check_definition(&crd, None, KubeVersion { major: 1, minor: 36 });
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].field,
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
        );
        assert!(
            causes[0].message.starts_with(concat!(
                r#"Invalid value: apiextensions.ValidationRule{Rule:"self.x <", Message:"", MessageExpression:"", "#,
                r#"Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: "#,
                "compilation failed: ERROR: <input>:1:9: Syntax error: mismatched input '<EOF>'"
            )),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn failures_of_unchanged_values_are_ratcheted_to_warnings_on_update() {
        // Stored before the rule `size(self) <= 3` on tags existed: `toolong` breaks it.
        let old = json!({"metadata": {"name": "web"}, "spec": {"min": 1, "max": 2, "mode": "a", "tags": ["toolong"]}});
        let unchanged_tags = json!({"metadata": {"name": "web"}, "spec": {"min": 1, "max": 3, "mode": "a", "tags": ["toolong"]}});
        let outcome = validate(&schema(), &unchanged_tags, Some(&old), true);
        assert!(outcome.causes.is_empty(), "{:?}", outcome.causes);
        assert_eq!(
            outcome.warnings,
            [r#"spec.tags[0]: Invalid value: "string": failed rule: size(self) <= 3"#]
        );
        let without_gate = validate(&schema(), &unchanged_tags, Some(&old), false);
        assert_eq!(
            messages(&without_gate.causes),
            [r#"FieldValueInvalid spec.tags[0]: Invalid value: "string": failed rule: size(self) <= 3"#],
            "without CRDValidationRatcheting (1.28, 1.29) the failure refuses the update"
        );
        assert!(without_gate.warnings.is_empty());
        let changed_tags = json!({"metadata": {"name": "web"}, "spec": {"min": 1, "max": 2, "mode": "a", "tags": ["toolong", "x"]}});
        assert_eq!(
            validate(&schema(), &changed_tags, Some(&old), true).causes.len(),
            1,
            "a changed list is judged"
        );
    }
}
