//! The OpenAPI schema validation of a custom resource (the registry strategy's
//! `validation.ValidateCustomResource` / `ValidateCustomResourceUpdate`: kube-openapi's
//! `SchemaValidator`, its errors turned into `field.Error`s by `kubeOpenAPIResultToFieldErrors`), with
//! upstream's **validation ratcheting** on updates (KEP-4008, `CRDValidationRatcheting`: alpha 1.28,
//! on by default from 1.30, GA 1.33; `pkg/apiserver/validation/ratcheting.go`).
//!
//! Paths are kube-openapi's: `spec.ports[0].port` (its slice validator names items `path[i]`).
//!
//! Checks, in kube-openapi's order for one value: its `type` (a wrong type stops there), `maxLength`,
//! `minLength`, `pattern`, `format` of strings; `multipleOf`, `maximum`, `minimum` of numbers; the items, then
//! `minItems`, `maxItems`, `uniqueItems` of arrays; `enum`; `minProperties`/`maxProperties` of objects
//! (which stop there), then `required`, then the properties. Of the formats, `uri`, `uuid`, `byte`,
//! `date`, `date-time`, `ipv4`, `ipv6` and `cidr` are checked.
//!
//! Ratcheting: on an update each value is paired with its old counterpart — an object's field with the
//! old object's field of the same name, a list item with the old item of the same keys in an
//! `x-kubernetes-list-type: map` list, or of the same index in a list of no list type; items of `set`
//! and `atomic` lists have none. A value that has an old counterpart and equals it (upstream's
//! `CachedDeepEqual`: an object or list equals its old value only when every old field or item was
//! paired and is equal) has all its errors, and those of everything below it, dropped. Values without
//! a counterpart are validated as on a create. The root `metadata`, `apiVersion` and `kind` are the
//! server's to validate, and never ratchet (nor do embedded resources' metadata: upstream checks those
//! as on a create).

use serde_json::{Map, Value};

use super::{INT_OR_STRING, additional_properties, child, flag, is_meta_field, json_type, properties};
use crate::api::catalog::KubeVersion;
use crate::api::status::StatusCause;

/// How one validation runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The server's Kubernetes minor, whose `field.Error` wording the causes use.
    pub version: KubeVersion,
    /// Whether `CRDValidationRatcheting` is on: errors of unchanged values are dropped on updates.
    pub ratcheting: bool,
}

/// Validates `object` (coerced and defaulted) against `schema` (its CRD version's `openAPIV3Schema`);
/// `old`, the stored object on updates, ratchets the errors of what the update left unchanged when
/// `options.ratcheting` is on. The causes in document order.
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>, options: Options) -> Vec<StatusCause> {
    let Some(map) = object.as_object() else {
        return Vec::new();
    };
    let validator = Validator { options };
    let old = old.filter(|_| options.ratcheting);
    let mut causes = Vec::new();
    required(schema, map, "", &mut causes);
    let old_map = old.and_then(Value::as_object);
    let mut paired = 0;
    let mut all_equal = true;
    for (key, field) in map {
        let Some(field_schema) = field_schema(schema, key) else {
            continue;
        };
        let old_field = old_map.and_then(|o| o.get(key));
        if is_meta_field(key) {
            // Not validated here, but declared: upstream pairs it like any property.
            if let Some(old_field) = old_field {
                paired += 1;
                all_equal &= old_field == field;
            }
            continue;
        }
        let checked = validator.node(field_schema, field, old_field, key);
        if old_field.is_some() {
            paired += 1;
            all_equal &= checked.unchanged;
        }
        causes.extend(checked.causes);
    }
    let unchanged = old_map.is_some_and(|o| o.len() == map.len() && paired == o.len() && all_equal);
    if unchanged { Vec::new() } else { causes }
}

/// What validating one value found.
struct Checked {
    /// Its errors and those below it, ratcheting applied.
    causes: Vec<StatusCause>,
    /// Whether it has an old counterpart it equals (upstream `CachedDeepEqual`).
    unchanged: bool,
}

struct Validator {
    options: Options,
}

/// The schema of field `key` of an object of `schema`: its property, else `additionalProperties`.
fn field_schema<'s>(schema: &'s Value, key: &str) -> Option<&'s Value> {
    properties(schema)
        .and_then(|p| p.get(key))
        .or_else(|| additional_properties(schema).flatten())
}

impl Validator {
    /// Validates `value` of `schema` at `path`, paired with `old` (`None`: no old counterpart).
    fn node(&self, schema: &Value, value: &Value, old: Option<&Value>, path: &str) -> Checked {
        let mut causes = Vec::new();
        let unchanged = self.checks(schema, value, old, path, &mut causes);
        if unchanged {
            causes.clear();
        }
        Checked { causes, unchanged }
    }

    /// The checks of one value, in kube-openapi's order; whether it equals its old counterpart.
    fn checks(
        &self,
        schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        causes: &mut Vec<StatusCause>,
    ) -> bool {
        if value.is_null() && flag(schema, "nullable") {
            return old.is_some_and(Value::is_null);
        }
        if let Some(cause) = type_error(schema, value, path) {
            causes.push(cause);
            // kube-openapi visits nothing below a value of the wrong type.
            return old.is_some_and(|old| unexplored_equal(old, value));
        }
        match value {
            Value::String(text) => {
                self.string_checks(schema, text, path, causes);
                format_check(schema, text, path, causes);
            }
            Value::Number(number) => number_checks(schema, number, path, causes),
            _ => {}
        }
        let unchanged = match value {
            Value::Array(items) => self.array(schema, items, old, path, causes),
            Value::Object(_) => false,
            scalar => old == Some(scalar),
        };
        enum_check(schema, value, path, causes);
        match value {
            Value::Object(map) => self.object(schema, map, old, path, causes),
            _ => unchanged,
        }
    }

    /// `maxLength`, `minLength` (in characters, as kube-openapi counts runes) and `pattern`.
    fn string_checks(&self, schema: &Value, text: &str, path: &str, causes: &mut Vec<StatusCause>) {
        let length = text.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            causes.push(self.too_long(path, max));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            causes.push(invalid(
                path,
                &Value::String(text.to_owned()),
                &format!("{path} in body should be at least {min} chars long"),
            ));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && let Ok(regex) = regex::Regex::new(pattern)
            && !regex.is_match(text)
        {
            causes.push(invalid(
                path,
                &Value::String(text.to_owned()),
                &format!("{path} in body should match '{pattern}'"),
            ));
        }
    }

    /// `field.TooLong`: `may not be longer than 5` through 1.31; from 1.32 (the reworked `field.TooLong`
    /// that `TooLongMaxLength` became) `may not be more than 5 bytes`.
    fn too_long(&self, path: &str, max: u64) -> StatusCause {
        let detail = if self.options.version.minor >= 32 {
            format!(
                "may not be more than {max} {}",
                if max == 1 { "byte" } else { "bytes" }
            )
        } else {
            format!("may not be longer than {max}")
        };
        StatusCause {
            reason: "FieldValueTooLong".to_owned(),
            message: format!("Too long: {detail}"),
            field: path.to_owned(),
        }
    }

    /// The items (each paired with its old counterpart), then `minItems`, `maxItems`, `uniqueItems`;
    /// whether the list equals its old value.
    fn array(
        &self,
        schema: &Value,
        items: &[Value],
        old: Option<&Value>,
        path: &str,
        causes: &mut Vec<StatusCause>,
    ) -> bool {
        let old_items = old.and_then(Value::as_array);
        let mut unchanged = old_items.is_some_and(|o| o.len() == items.len());
        match schema.get("items").filter(|s| s.is_object()) {
            Some(item_schema) => {
                for (index, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| correlated_item(schema, item, index, o));
                    let checked = self.node(item_schema, item, old_item, &format!("{path}[{index}]"));
                    unchanged &= old_item.is_some() && checked.unchanged;
                    causes.extend(checked.causes);
                }
            }
            // No item schema: nothing below is visited, so only two empty lists are equal.
            None => unchanged &= items.is_empty(),
        }
        let size = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && size < min
        {
            causes.push(invalid(
                path,
                &Value::from(size),
                &format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && size > max
        {
            causes.push(too_many(
                path,
                &size.to_string(),
                &format!("must have at most {max} items"),
            ));
        }
        if flag(schema, "uniqueItems")
            && items
                .iter()
                .enumerate()
                .any(|(i, item)| items[..i].iter().any(|earlier| json_equal(earlier, item)))
        {
            causes.push(invalid(
                path,
                &Value::String(String::new()),
                &format!("{path} in body shouldn't contain duplicates"),
            ));
        }
        unchanged
    }

    /// `minProperties`/`maxProperties` (which end the object's validation), `required`, then the
    /// fields the schema declares; whether the object equals its old value.
    fn object(
        &self,
        schema: &Value,
        map: &Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        causes: &mut Vec<StatusCause>,
    ) -> bool {
        let old_map = old.and_then(Value::as_object);
        let count = map.len() as u64;
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            causes.push(invalid(
                path,
                &Value::from(min),
                &format!("{path} in body should have at least {min} properties"),
            ));
            return old_map.is_some_and(|o| o.is_empty() && map.is_empty());
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            // kube-openapi reports the maximum as the value and no maximum (`has too many items`).
            causes.push(too_many(path, &max.to_string(), "has too many items"));
            return old_map.is_some_and(|o| o.is_empty() && map.is_empty());
        }
        required(schema, map, path, causes);
        let mut paired = 0;
        let mut all_equal = true;
        for (key, field) in map {
            let Some(field_schema) = field_schema(schema, key) else {
                continue;
            };
            let old_field = old_map.and_then(|o| o.get(key));
            let checked = self.node(field_schema, field, old_field, &child(path, key));
            if old_field.is_some() {
                paired += 1;
                all_equal &= checked.unchanged;
            }
            causes.extend(checked.causes);
        }
        old_map.is_some_and(|o| o.len() == map.len() && (o.is_empty() || (paired == o.len() && all_equal)))
    }
}

/// Whether a value kube-openapi did not look into equals `old`: scalars by value, objects and lists
/// only when both are empty (upstream compares the children it visited, and there are none).
fn unexplored_equal(old: &Value, value: &Value) -> bool {
    match (old, value) {
        (Value::Object(a), Value::Object(b)) => a.is_empty() && b.is_empty(),
        (Value::Array(a), Value::Array(b)) => a.is_empty() && b.is_empty(),
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        (a, b) => a == b,
    }
}

/// The old item `item` (at `index`) is paired with: by the `x-kubernetes-list-map-keys` in a `map`
/// list, by index in a list without a list type, none in `set` and `atomic` lists.
fn correlated_item<'a>(schema: &Value, item: &Value, index: usize, old: &'a [Value]) -> Option<&'a Value> {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            old.iter()
                .find(|candidate| keys.iter().all(|k| candidate.get(*k) == item.get(*k)))
        }
        Some(_) => None,
        None => old.get(index),
    }
}

/// kube-openapi's `required`: `spec.cronSpec: Required value` for each missing field (a `null` one is
/// there).
fn required(schema: &Value, map: &Map<String, Value>, path: &str, causes: &mut Vec<StatusCause>) {
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            causes.push(StatusCause::field_required(&child(path, name), ""));
        }
    }
}

/// kube-openapi's type check: `spec.replicas: Invalid value: "string": spec.replicas in body must be
/// of type integer: "string"`. `x-kubernetes-int-or-string` takes both.
fn type_error(schema: &Value, value: &Value, path: &str) -> Option<StatusCause> {
    let expected = schema.get("type").and_then(Value::as_str)?;
    if flag(schema, INT_OR_STRING) {
        return None;
    }
    let actual = json_type(value);
    let fits = expected == actual || (expected == "number" && actual == "integer");
    (!fits).then(|| {
        StatusCause::field_type_invalid(
            path,
            actual,
            &format!("{path} in body must be of type {expected}: {actual:?}"),
        )
    })
}

/// kube-openapi's format check of a string, for the formats apiextensions keeps
/// (`StripUnsupportedFormatsPostProcess`) that the fake knows: `uri`, `uuid`, `byte`, `date`,
/// `date-time` (`datetime`), `ipv4`, `ipv6`, `cidr` (strfmt's checks; other formats pass):
/// `spec.id: Invalid value: "x": spec.id in body must be of type uuid: "x"`, a wrong type.
fn format_check(schema: &Value, text: &str, path: &str, causes: &mut Vec<StatusCause>) {
    let Some(format) = schema.get("format").and_then(Value::as_str) else {
        return;
    };
    let valid = match format {
        "uri" | "uuid" | "byte" | "date" => crate::cel::format::violations(format, text).is_empty(),
        "date-time" | "datetime" => crate::cel::format::violations("datetime", text).is_empty(),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.contains(':') && text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(text),
        _ => true,
    };
    if !valid {
        causes.push(StatusCause::field_type_invalid(
            path,
            text,
            &format!("{path} in body must be of type {format}: {text:?}"),
        ));
    }
}

/// Go's `net.ParseCIDR`: an IPv4 or IPv6 address, `/`, a prefix length within its size.
fn is_cidr(text: &str) -> bool {
    let Some((address, prefix)) = text.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => prefix <= 32,
        Ok(std::net::IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

/// `multipleOf`, `maximum` (`exclusiveMaximum`), `minimum` (`exclusiveMinimum`).
fn number_checks(schema: &Value, number: &serde_json::Number, path: &str, causes: &mut Vec<StatusCause>) {
    let Some(n) = number.as_f64() else {
        return;
    };
    let value = Value::Number(number.clone());
    if let Some(factor) = schema.get("multipleOf").and_then(Value::as_f64)
        && factor > 0.0
        && (n / factor).fract() != 0.0
    {
        causes.push(invalid(
            path,
            &value,
            &format!("{path} in body should be a multiple of {factor}"),
        ));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        let exclusive = flag(schema, "exclusiveMaximum");
        if n > max || (exclusive && n == max) {
            let relation = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            causes.push(invalid(
                path,
                &value,
                &format!("{path} in body should be {relation} {max}"),
            ));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        let exclusive = flag(schema, "exclusiveMinimum");
        if n < min || (exclusive && n == min) {
            let relation = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            causes.push(invalid(
                path,
                &value,
                &format!("{path} in body should be {relation} {min}"),
            ));
        }
    }
}

/// `enum`: `spec.mode: Unsupported value: "fast": supported values: "a", "b"` (values that are not
/// strings listed as JSON).
fn enum_check(schema: &Value, value: &Value, path: &str, causes: &mut Vec<StatusCause>) {
    let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
        return;
    };
    if allowed.iter().any(|a| json_equal(a, value)) {
        return;
    }
    let supported: Vec<String> = allowed
        .iter()
        .map(|a| match a {
            Value::String(s) => format!("{s:?}"),
            other => format!("{:?}", other.to_string()),
        })
        .collect();
    causes.push(StatusCause {
        reason: "FieldValueNotSupported".to_owned(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            go_value(value),
            supported.join(", ")
        ),
        field: path.to_owned(),
    });
}

/// JSON equality with numbers compared by value (`1` equals `1.0`), as kube-openapi compares enum
/// members and unique items.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        (x, y) => x == y,
    }
}

/// A bad value as `field.Error` prints it: strings quoted, numbers and booleans bare, anything else as
/// JSON.
fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// `field.Invalid(path, value, detail)`.
fn invalid(path: &str, value: &Value, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueInvalid".to_owned(),
        message: format!("Invalid value: {}: {detail}", go_value(value)),
        field: path.to_owned(),
    }
}

/// `field.TooMany`: `Too many: 4: must have at most 3 items`.
fn too_many(path: &str, actual: &str, detail: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueTooMany".to_owned(),
        message: format!("Too many: {actual}: {detail}"),
        field: path.to_owned(),
    }
}

/// Whether `causes` holds an error upstream's strategy takes as blocking the CEL rules
/// (`hasBlockingErr`: unsupported, required, too long, too many, wrong type).
pub fn has_blocking_error(causes: &[StatusCause]) -> bool {
    causes.iter().any(|c| {
        matches!(
            c.reason.as_str(),
            "FieldValueNotSupported"
                | "FieldValueRequired"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
                | "FieldValueTypeInvalid"
        )
    })
}

/// The cause upstream adds when blocking errors kept the CEL rules from running: at the nil path, its
/// value `nil` (printed `"null"` through 1.33, `null` from 1.34's JSON rendering of values).
pub fn rules_not_checked(version: KubeVersion) -> StatusCause {
    let value = if version.minor >= 34 { "null" } else { "\"null\"" };
    StatusCause {
        reason: "FieldValueInvalid".to_owned(),
        message: format!(
            "Invalid value: {value}: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
        ),
        field: "<nil>".to_owned(),
    }
}

/// Whether any node of `schema` has `x-kubernetes-validations` (upstream builds no CEL validator
/// otherwise, and then adds no "rules were not checked" cause).
pub fn has_validation_rules(schema: &Value) -> bool {
    if schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .is_some_and(|rules| !rules.is_empty())
    {
        return true;
    }
    properties(schema).is_some_and(|p| p.values().any(has_validation_rules))
        || schema.get("items").is_some_and(has_validation_rules)
        || additional_properties(schema)
            .flatten()
            .is_some_and(has_validation_rules)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn options(minor: u32, ratcheting: bool) -> Options {
        Options {
            version: KubeVersion { major: 1, minor },
            ratcheting,
        }
    }

    fn messages(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect()
    }

    /// A schema tightened after objects were stored: a `maxLength`, an `enum`, bounds and sizes.
    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["owner"], "properties": {
                "owner": {"type": "string", "maxLength": 5},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "code": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 2},
                "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1.5},
                "tags": {"type": "array", "maxItems": 2, "uniqueItems": true,
                         "items": {"type": "string", "maxLength": 3}},
                "few": {"type": "array", "minItems": 2, "items": {"type": "integer"}},
                "labels": {"type": "object", "maxProperties": 1,
                           "additionalProperties": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {
                              "name": {"type": "string"}, "port": {"type": "integer", "maximum": 100}}}},
                "hosts": {"type": "array", "x-kubernetes-list-type": "set",
                          "items": {"type": "string", "maxLength": 3}},
            }},
        }})
    }

    #[test]
    fn every_check_has_kube_openapis_message() {
        let object = json!({"metadata": {"name": "x"}, "spec": {
            "owner": "abcdefg", "mode": "medium", "code": "A", "replicas": 11, "ratio": 1.5,
            "tags": ["a", "a", "long"], "few": [1], "labels": {"a": "1", "b": "2"}}});
        assert_eq!(
            messages(&validate(&schema(), &object, None, options(31, true))),
            [
                "FieldValueTooLong spec.owner: Too long: may not be longer than 5",
                r#"FieldValueNotSupported spec.mode: Unsupported value: "medium": supported values: "fast", "slow""#,
                r#"FieldValueInvalid spec.code: Invalid value: "A": spec.code in body should be at least 2 chars long"#,
                r#"FieldValueInvalid spec.code: Invalid value: "A": spec.code in body should match '^[a-z]+$'"#,
                "FieldValueInvalid spec.replicas: Invalid value: 11: spec.replicas in body should be a multiple of 2",
                "FieldValueInvalid spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                "FieldValueInvalid spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5",
                "FieldValueTooLong spec.tags[2]: Too long: may not be longer than 3",
                "FieldValueTooMany spec.tags: Too many: 3: must have at most 2 items",
                r#"FieldValueInvalid spec.tags: Invalid value: "": spec.tags in body shouldn't contain duplicates"#,
                "FieldValueInvalid spec.few: Invalid value: 1: spec.few in body should have at least 2 items",
                "FieldValueTooMany spec.labels: Too many: 1: has too many items",
            ]
        );
        let newer = validate(
            &schema(),
            &json!({"spec": {"owner": "abcdefg"}}),
            None,
            options(32, true),
        );
        assert_eq!(
            messages(&newer),
            ["FieldValueTooLong spec.owner: Too long: may not be more than 5 bytes"]
        );
        let formats = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "id": {"type": "string", "format": "uuid"}, "at": {"type": "string", "format": "date-time"},
            "net": {"type": "string", "format": "cidr"}, "size": {"type": "string", "format": "int32"}}}}});
        let object =
            json!({"spec": {"id": "nope", "at": "2024-02-30T00:00:00Z", "net": "10.0.0.0/8", "size": "x"}});
        assert_eq!(
            messages(&validate(&formats, &object, None, options(36, true))),
            [
                r#"FieldValueTypeInvalid spec.id: Invalid value: "nope": spec.id in body must be of type uuid: "nope""#,
                r#"FieldValueTypeInvalid spec.at: Invalid value: "2024-02-30T00:00:00Z": spec.at in body must be of type date-time: "2024-02-30T00:00:00Z""#,
            ]
        );
        let missing = validate(&schema(), &json!({"spec": {}}), None, options(36, true));
        assert_eq!(
            messages(&missing),
            ["FieldValueRequired spec.owner: Required value"]
        );
    }

    #[test]
    fn unchanged_values_ratchet_changed_ones_do_not() {
        // Stored before the schema had its maxLength and enum.
        let old = json!({"metadata": {"name": "x", "labels": {}},
            "spec": {"owner": "abcdefg", "mode": "medium", "replicas": 2}});
        // `kubectl label`: only metadata changes.
        let labelled = json!({"metadata": {"name": "x", "labels": {"team": "a"}},
            "spec": {"owner": "abcdefg", "mode": "medium", "replicas": 2}});
        assert!(validate(&schema(), &labelled, Some(&old), options(30, true)).is_empty());
        // Another field of spec changes: spec is no longer equal, but owner and mode still are.
        let other = json!({"metadata": {"name": "x"},
            "spec": {"owner": "abcdefg", "mode": "medium", "replicas": 4}});
        assert!(validate(&schema(), &other, Some(&old), options(33, true)).is_empty());
        // The offending field itself changes: refused.
        let changed = json!({"metadata": {"name": "x"},
            "spec": {"owner": "abcdefgh", "mode": "medium", "replicas": 2}});
        assert_eq!(
            messages(&validate(&schema(), &changed, Some(&old), options(33, true))),
            ["FieldValueTooLong spec.owner: Too long: may not be more than 5 bytes"]
        );
        // Without the gate (1.28, 1.29) the update is validated as a create.
        assert_eq!(
            messages(&validate(&schema(), &labelled, Some(&old), options(29, false))),
            [
                "FieldValueTooLong spec.owner: Too long: may not be longer than 5",
                r#"FieldValueNotSupported spec.mode: Unsupported value: "medium": supported values: "fast", "slow""#,
            ]
        );
    }

    #[test]
    fn list_items_pair_by_map_keys_or_index_but_not_in_sets() {
        let old = json!({"spec": {"owner": "a",
            "ports": [{"name": "a", "port": 200}, {"name": "b", "port": 1}],
            "tags": ["long"], "hosts": ["long"]}});
        // Map list reordered, set unchanged but for an added item, tag unchanged at its index.
        let new = json!({"spec": {"owner": "a",
            "ports": [{"name": "b", "port": 1}, {"name": "a", "port": 200}],
            "tags": ["long", "x"], "hosts": ["long", "x"]}});
        assert_eq!(
            messages(&validate(&schema(), &new, Some(&old), options(36, true))),
            ["FieldValueTooLong spec.hosts[0]: Too long: may not be more than 3 bytes"],
            "set items have no old counterpart"
        );
        // A map-list item whose key is new is validated as on a create.
        let renamed = json!({"spec": {"owner": "a", "ports": [{"name": "c", "port": 200}]}});
        assert_eq!(
            messages(&validate(&schema(), &renamed, Some(&old), options(36, true))),
            [
                "FieldValueInvalid spec.ports[0].port: Invalid value: 200: spec.ports[0].port in body should be less than or equal to 100"
            ]
        );
    }

    #[test]
    fn blocking_errors_and_the_rules_not_checked_cause() {
        let causes = validate(
            &schema(),
            &json!({"spec": {"owner": "abcdefg"}}),
            None,
            options(36, true),
        );
        assert!(has_blocking_error(&causes));
        let pattern_only = validate(
            &schema(),
            &json!({"spec": {"owner": "a", "code": "AB"}}),
            None,
            options(36, true),
        );
        assert!(!has_blocking_error(&pattern_only), "{pattern_only:?}");
        assert_eq!(
            rules_not_checked(KubeVersion { major: 1, minor: 33 }).message,
            "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
        );
        assert!(
            rules_not_checked(KubeVersion { major: 1, minor: 34 })
                .message
                .starts_with("Invalid value: null: ")
        );
        assert!(!has_validation_rules(&schema()));
        assert!(has_validation_rules(&json!({"properties": {"spec": {"items": {
            "x-kubernetes-validations": [{"rule": "true"}]}}}})));
    }
}
