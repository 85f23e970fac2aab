//! Kubernetes' `quantity()` values (`k8s.io/apiserver/pkg/cel/library/quantity.go`): an opaque CEL value
//! of the type `kubernetes.Quantity` with upstream's methods `sign()`, `isInteger()`, `asInteger()`,
//! `asApproximateFloat()`, `add(q|int)`, `sub(q|int)`, `isGreaterThan(q)`, `isLessThan(q)`,
//! `compareTo(q)`, and equality.
//!
//! A quantity is held exactly in nano-units (`i128`), which covers every suffix from `n` to `E`/`Ei`;
//! what `resource.ParseQuantity` accepts and the fake cannot hold (beyond ±1.7×10^29, or finer than `1n`,
//! which upstream rounds up) is an error or rounded up likewise. `string(quantity(…))` is not offered (the
//! crate's `string` conversion cannot be extended to opaque types).

use std::sync::Arc;

use cel::common::types::{DYN_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{Env, ExecutionError, Value};

/// The runtime type name of `quantity()` values.
const QUANTITY_TYPE: &str = "kubernetes.Quantity";

const NANOS: i128 = 1_000_000_000;

/// A `quantity()` value, in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quantity(i128);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        QUANTITY_TYPE
    }
}

/// The multiplier of `suffix` in nano-units (`None`: not a suffix `ParseQuantity` knows).
fn suffix_nanos(suffix: &str) -> Option<i128> {
    let binary = |power: u32| 1i128 << power;
    Some(match suffix {
        "" => NANOS,
        "n" => 1,
        "u" => 1_000,
        "m" => 1_000_000,
        "k" => NANOS * 1_000,
        "M" => NANOS * 1_000_000,
        "G" => NANOS * 1_000_000_000,
        "T" => NANOS * 1_000_000_000_000,
        "P" => NANOS * 1_000_000_000_000_000,
        "E" => NANOS * 1_000_000_000_000_000_000,
        "Ki" => NANOS * binary(10),
        "Mi" => NANOS * binary(20),
        "Gi" => NANOS * binary(30),
        "Ti" => NANOS * binary(40),
        "Pi" => NANOS * binary(50),
        "Ei" => NANOS * binary(60),
        _ => return None,
    })
}

/// Parses a quantity as `resource.ParseQuantity` does (`[+-]digits[.digits][suffix]`, the suffix a
/// binary or decimal SI one or an `e`/`E` exponent), into nano-units rounded up.
fn parse(text: &str) -> Option<Quantity> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    // The number as digits over a power of ten.
    let digits = format!("{whole}{fraction}");
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut scale = -i32::try_from(fraction.len()).ok()?;
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .and_then(|e| e.parse::<i32>().ok());
    let multiplier = match exponent {
        Some(exponent) => {
            scale = scale.checked_add(exponent)?;
            NANOS
        }
        None => suffix_nanos(suffix)?,
    };
    let mut value = mantissa.checked_mul(multiplier)?;
    while scale > 0 {
        value = value.checked_mul(10)?;
        scale -= 1;
    }
    // Rounded up, as upstream rounds what is finer than its precision (a nonzero value stays at least
    // one nano-unit, so the loop ends there).
    while scale < 0 && value > 1 {
        value = value / 10 + i128::from(value % 10 != 0);
        scale += 1;
    }
    Some(Quantity(if negative { -value } else { value }))
}

fn value(args: &[CowVal<'_, '_>], index: usize) -> Result<Value, ExecutionError> {
    args.get(index)
        .map(|a| Value::try_from(a.as_ref()))
        .transpose()?
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(value)?))
}

fn quantity_value(quantity: Quantity) -> Value {
    Value::Opaque(Arc::new(quantity))
}

/// The quantity (or, where upstream takes one, integer) argument `index`.
fn quantity_of(args: &[CowVal<'_, '_>], index: usize, function: &str) -> Result<Quantity, ExecutionError> {
    match value(args, index)? {
        Value::Opaque(opaque) => opaque
            .downcast_ref::<Quantity>()
            .copied()
            .ok_or_else(|| ExecutionError::function_error(function, "expected a quantity")),
        Value::Int(i) => Ok(Quantity(i128::from(i) * NANOS)),
        _ => Err(ExecutionError::function_error(function, "expected a quantity")),
    }
}

fn to_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match value(&args, 0)? {
        Value::String(text) => match parse(&text) {
            Some(quantity) => owned(quantity_value(quantity)),
            None => Err(ExecutionError::function_error(
                "quantity",
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            )),
        },
        _ => Err(ExecutionError::function_error("quantity", "expected a string")),
    }
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Int(quantity_of(&args, 0, "sign")?.0.signum() as i64))
}

fn as_integer_value(quantity: Quantity) -> Option<i64> {
    (quantity.0 % NANOS == 0)
        .then(|| i64::try_from(quantity.0 / NANOS).ok())
        .flatten()
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(
        as_integer_value(quantity_of(&args, 0, "isInteger")?).is_some(),
    ))
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match as_integer_value(quantity_of(&args, 0, "asInteger")?) {
        Some(i) => owned(Value::Int(i)),
        None => Err(ExecutionError::function_error(
            "asInteger",
            "cannot convert value to integer",
        )),
    }
}

fn as_approximate_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let quantity = quantity_of(&args, 0, "asApproximateFloat")?;
    owned(Value::Float(quantity.0 as f64 / NANOS as f64))
}

fn arithmetic<'b, 'v>(
    args: &[CowVal<'b, 'v>],
    function: &str,
    negate: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (quantity_of(args, 0, function)?, quantity_of(args, 1, function)?);
    let b = if negate { -b.0 } else { b.0 };
    let sum =
        a.0.checked_add(b)
            .ok_or_else(|| ExecutionError::function_error(function, "quantity overflow"))?;
    owned(quantity_value(Quantity(sum)))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    arithmetic(&args, "add", false)
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    arithmetic(&args, "sub", true)
}

fn compare(args: &[CowVal<'_, '_>], function: &str) -> Result<std::cmp::Ordering, ExecutionError> {
    Ok(quantity_of(args, 0, function)?
        .0
        .cmp(&quantity_of(args, 1, function)?.0))
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(compare(&args, "isGreaterThan")?.is_gt()))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Bool(compare(&args, "isLessThan")?.is_lt()))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Int(compare(&args, "compareTo")? as i64))
}

type Overload = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Adds `quantity()` and its methods to `env`.
pub(crate) fn add_to(env: &mut Env) {
    if let Err(error) = env.add_type(Type::new_opaque_type(QUANTITY_TYPE)) {
        tracing::error!(%error, "the quantity type could not be added");
    }
    if let Err(error) = env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], to_quantity) {
        tracing::error!(%error, "quantity() could not be added");
    }
    let members: [(&str, &str, Vec<Type>, Overload); 9] = [
        ("sign", "quantity_sign", vec![], sign),
        ("isInteger", "quantity_is_integer", vec![], is_integer),
        ("asInteger", "quantity_as_integer", vec![], as_integer),
        (
            "asApproximateFloat",
            "quantity_as_float",
            vec![],
            as_approximate_float,
        ),
        ("add", "quantity_add", vec![DYN_TYPE], add),
        ("sub", "quantity_sub", vec![DYN_TYPE], sub),
        (
            "isGreaterThan",
            "quantity_is_greater_than",
            vec![DYN_TYPE],
            is_greater_than,
        ),
        (
            "isLessThan",
            "quantity_is_less_than",
            vec![DYN_TYPE],
            is_less_than,
        ),
        ("compareTo", "quantity_compare_to", vec![DYN_TYPE], compare_to),
    ];
    for (name, id, args, op) in members {
        if let Err(error) = env.add_member_overload(name, id, Type::new_opaque_type(QUANTITY_TYPE), args, op)
        {
            tracing::error!(%error, name, "a quantity method could not be added");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{compile, evaluate, value::to_cel};

    fn eval(source: &str) -> Result<cel::Value, String> {
        let expression = compile(source, &["self"]).map_err(|e| e.issues)?;
        evaluate(&expression, &[("self", to_cel(&json!("1Gi")))]).map_err(|e| e.to_string())
    }

    #[test]
    fn quantities_compare_and_compute_exactly() {
        for rule in [
            "quantity(self) == quantity('1024Mi') && quantity('1k') == quantity('1000')",
            "quantity(self).isGreaterThan(quantity('1G')) && quantity('500m').isLessThan(quantity('1'))",
            "quantity('1.5').compareTo(quantity('1500m')) == 0 && quantity('1').compareTo(quantity('2')) == -1",
            "quantity('1e3').asInteger() == 1000 && quantity('1.5').isInteger() == false && quantity('2').isInteger()",
            "quantity('500m').asApproximateFloat() == 0.5 && quantity('-1Ki').sign() == -1 && quantity('0').sign() == 0",
            "quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi') && quantity('3').sub(1) == quantity('2')",
            "quantity('1.0000000001').isGreaterThan(quantity('1'))",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
        assert!(eval("quantity('1.5').asInteger() == 1").is_err());
        assert!(eval("quantity('1 Gi').sign() == 1").is_err());
        assert!(eval("quantity('Gi').sign() == 1").is_err());
        assert!(
            eval("quantity('9e40').sign() == 1").is_err(),
            "beyond what is held: an error, not a panic"
        );
        assert_eq!(
            eval("quantity('1e-2000000000').sign() == 1 && quantity('2Ei').isGreaterThan(quantity('2E'))"),
            Ok(cel::Value::Bool(true)),
            "tiny values round up at once; binary suffixes are no exponents"
        );
    }
}
