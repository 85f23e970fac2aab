//! The environment of expressions: the CEL standard library with its macros, cel-go's `strings`,
//! `lists` and `math` extensions (from the crate), and Kubernetes' own libraries
//! (`k8s.io/apiserver/pkg/cel/library`) as far as they are implemented here:
//!
//! - lists (`library/lists.go`): `isSorted()`, `sum()`, `min()`, `max()`, `indexOf(x)`,
//!   `lastIndexOf(x)`;
//! - regex (`library/regex.go`): `find(re)`, `findAll(re)`, `findAll(re, n)`.
//!
//! - ip, cidr and quantity checks (`library/ip.go`, `cidr.go`, `quantity.go`): `isIP(s)`, `isCIDR(s)`
//!   (Go's `netip` parsing, refusing IPv6 zones and IPv4-mapped IPv6 addresses as upstream) and
//!   `isQuantity(s)` (`resource.ParseQuantity`).
//!
//! - ip and cidr values (`library/ip.go`, `cidr.go`): `ip()`, `cidr()` and their methods ([`super::network`]);
//! - quantity values (`library/quantity.go`): `quantity()` and its methods ([`super::quantity`]);
//! - URL values (`library/urls.go`): `url()`, `isURL()` and their methods ([`super::url`]);
//! - authorization checks (`library/authz.go`): the methods of the `authorizer` variable admission
//!   expressions have ([`super::authorizer`]);
//! - named formats (`library/format.go`): `format.named()`, `format.dns1123Label()`, … and
//!   `<Format>.validate()` ([`super::format`]);
//! - JSON patches and apply configurations of mutating policies ([`super::objects`]).
//!
//! Not there: `semver`; a rule calling it fails when evaluated with `no such overload`.
//! Every library is in the environment expressions run in; which of them a new expression may use
//! depends on the server's minor ([`super::environment`], upstream's `cel/environment/base.go`).

use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{Env, ExecutionError, Value};

type Overload = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// The environment (see the module docs): everything, as stored expressions run.
pub(crate) fn environment() -> Env {
    environment_for(None)
}

/// The environment of the `NewExpressions` of compatibility minor `compatibility` (`None`: of stored
/// expressions, [`environment`]). What it changes is which macros the parser expands: cel-go's math
/// extension (`math.greatest`, `math.least`) is in no Kubernetes environment, and the lists extension
/// (its `sortBy`) arrives at 1.34, so before that they stay the calls [`super::environment`] reports
/// as undeclared; before 1.28 (`cel.OptionalTypes()`) the optional syntax (`a.?b`, `a[?b]`) is
/// cel-go's `unsupported syntax` parse error.
pub(crate) fn environment_for(compatibility: Option<u32>) -> Env {
    let mut env = Env::stdlib().with_optional_support(compatibility.is_none_or(|minor| minor >= 28));
    let member_overloads: [(
        &str,
        &str,
        cel::common::types::Type,
        Vec<cel::common::types::Type>,
        Overload,
    ); 9] = [
        ("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted),
        ("sum", "list_sum", LIST_TYPE, vec![], sum),
        ("min", "list_min", LIST_TYPE, vec![], min),
        ("max", "list_max", LIST_TYPE, vec![], max),
        ("indexOf", "list_index_of", LIST_TYPE, vec![DYN_TYPE], index_of),
        (
            "lastIndexOf",
            "list_last_index_of",
            LIST_TYPE,
            vec![DYN_TYPE],
            last_index_of,
        ),
        ("find", "string_find", STRING_TYPE, vec![STRING_TYPE], find),
        (
            "findAll",
            "string_find_all",
            STRING_TYPE,
            vec![STRING_TYPE],
            find_all,
        ),
        (
            "findAll",
            "string_find_all_n",
            STRING_TYPE,
            vec![STRING_TYPE, INT_TYPE],
            find_all_n,
        ),
    ];
    type Extension = fn(&mut Env) -> Result<(), cel::DeclarationError>;
    let extensions: [(Extension, bool); 3] = [
        (cel::extensions::strings, true),
        (
            cel::extensions::lists,
            compatibility.is_none_or(|minor| minor >= 34),
        ),
        (cel::extensions::math, compatibility.is_none()),
    ];
    for (extension, _) in extensions.into_iter().filter(|(_, added)| *added) {
        // A clash would be a bug of the crate's own libraries; the standard library still works.
        if let Err(error) = env.add_extension(extension) {
            tracing::error!(%error, "a CEL extension library could not be added");
        }
    }
    let global_overloads: [(&str, &str, Overload); 3] = [
        ("isIP", "is_ip_string", is_ip),
        ("isCIDR", "is_cidr_string", is_cidr),
        ("isQuantity", "is_quantity_string", is_quantity),
    ];
    for (name, id, op) in global_overloads {
        if let Err(error) = env.add_overload(name, id, vec![STRING_TYPE], op) {
            tracing::error!(%error, "a Kubernetes CEL library function could not be added");
        }
    }
    super::objects::add_json_patch(&mut env);
    super::network::add(&mut env);
    super::quantity::add_to(&mut env);
    super::url::add_to(&mut env);
    super::authorizer::add_to(&mut env);
    super::format::add_to(&mut env);
    for (name, id, target, args, op) in member_overloads {
        if let Err(error) = env.add_member_overload(name, id, target, args, op) {
            tracing::error!(%error, "a Kubernetes CEL library function could not be added");
        }
    }
    env
}

fn string_arg(args: &[CowVal<'_, '_>], function: &str) -> Result<String, ExecutionError> {
    match values(args)?.first() {
        Some(Value::String(s)) => Ok(s.to_string()),
        _ => Err(ExecutionError::function_error(function, "expected a string")),
    }
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, "isIP")?;
    owned(Value::Bool(super::network::parse_ip(&text).is_some()))
}

/// `netip.ParsePrefix` ([`super::network::parse_cidr`]).
fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, "isCIDR")?;
    owned(Value::Bool(super::network::parse_cidr(&text).is_some()))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, "isQuantity")?;
    // The number before the suffix is not empty (`^([+-]?[0-9.]+)...`): a bare suffix is no quantity.
    let number = text.trim().trim_start_matches(['+', '-']);
    let has_number = number.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    owned(Value::Bool(
        has_number && crate::api::rest::field_validation::quantity_error(&text).is_none(),
    ))
}

fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn cel::common::value::Val>::try_from(
        value,
    )?))
}

fn list_arg(args: &[Value], function: &str) -> Result<std::sync::Arc<Vec<Value>>, ExecutionError> {
    match args.first() {
        Some(Value::List(list)) => Ok(list.clone()),
        _ => Err(ExecutionError::function_error(function, "expected a list")),
    }
}

/// Upstream's comparison of list elements: same-typed comparable values, else an error.
fn compare(a: &Value, b: &Value, function: &str) -> Result<std::cmp::Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::function_error(function, "list elements are not comparable"))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&values(&args)?, "isSorted")?;
    for pair in list.windows(2) {
        if compare(&pair[0], &pair[1], "isSorted")? == std::cmp::Ordering::Greater {
            return owned(Value::Bool(false));
        }
    }
    owned(Value::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&values(&args)?, "sum")?;
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let total = list
        .iter()
        .try_fold(Value::Int(0), |total, item| match (&total, item) {
            (Value::Int(a), Value::Int(b)) => a.checked_add(*b).map(Value::Int).ok_or_else(overflow),
            (Value::Int(0), Value::UInt(b)) | (Value::UInt(_), Value::UInt(b))
                if matches!(total, Value::Int(0) | Value::UInt(_)) =>
            {
                let a = if let Value::UInt(a) = total { a } else { 0 };
                a.checked_add(*b).map(Value::UInt).ok_or_else(overflow)
            }
            (Value::Int(0), Value::Float(b)) => Ok(Value::Float(*b)),
            (Value::Float(a), Value::Float(b)) => Ok(Value::Float(a + b)),
            _ => Err(ExecutionError::function_error(
                "sum",
                "list elements must be of one numeric type",
            )),
        })?;
    owned(total)
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    keep: std::cmp::Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_arg(&values(&args)?, function)?;
    let mut items = list.iter();
    let Some(first) = items.next() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    let mut best = first.clone();
    for item in items {
        if compare(item, &best, function)? == keep {
            best = item.clone();
        }
    }
    owned(best)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", std::cmp::Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", std::cmp::Ordering::Greater)
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let list = list_arg(&args, "indexOf")?;
    let needle = args.get(1).unwrap_or(&Value::Null);
    let found = list.iter().position(|item| item == needle);
    owned(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let list = list_arg(&args, "lastIndexOf")?;
    let needle = args.get(1).unwrap_or(&Value::Null);
    let found = list.iter().rposition(|item| item == needle);
    owned(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn string_args(args: &[Value], function: &str) -> Result<(String, regex::Regex), ExecutionError> {
    match (args.first(), args.get(1)) {
        (Some(Value::String(text)), Some(Value::String(pattern))) => {
            let re = regex::Regex::new(pattern)
                .map_err(|e| ExecutionError::function_error(function, e.to_string()))?;
            Ok((text.to_string(), re))
        }
        _ => Err(ExecutionError::function_error(
            function,
            "expected a string and a pattern",
        )),
    }
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, re) = string_args(&values(&args)?, "find")?;
    owned(Value::from(re.find(&text).map_or("", |m| m.as_str()).to_owned()))
}

fn find_all_limited<'b, 'v>(args: &[Value], limit: i64) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, re) = string_args(args, "findAll")?;
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Value> = re
        .find_iter(&text)
        .take(take)
        .map(|m| Value::from(m.as_str().to_owned()))
        .collect();
    owned(Value::List(std::sync::Arc::new(found)))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    find_all_limited(&values(&args)?, -1)
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let limit = match args.get(2) {
        Some(Value::Int(n)) => *n,
        _ => -1,
    };
    find_all_limited(&args, limit)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{compile, evaluate, value::to_cel};

    fn eval(source: &str) -> Result<cel::Value, String> {
        let expression = compile(source, &["self"]).map_err(|e| e.issues)?;
        evaluate(&expression, &[("self", to_cel(&json!([3, 1, 2])))]).map_err(|e| e.to_string())
    }

    #[test]
    fn ip_cidr_and_quantity_checks() {
        for rule in [
            "isIP('10.0.0.1') && isIP('fd00::1') && !isIP('10.0.0.01') && !isIP('::ffff:1.2.3.4')",
            "!isIP('fe80::1%eth0') && !isIP('example.com') && !isIP('10.0.0.0/8')",
            "isCIDR('10.0.0.0/8') && isCIDR('10.0.0.1/32') && isCIDR('fd00::/64') && isCIDR('0.0.0.0/0')",
            "!isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0/08') && !isCIDR('10.0.0.0') && !isCIDR('::ffff:1.2.3.0/120')",
            "isQuantity('1Gi') && isQuantity('500m') && isQuantity('1e3') && !isQuantity('1 Gi') && !isQuantity('Gi')",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
    }

    #[test]
    fn kubernetes_list_functions() {
        for rule in [
            "[1, 2, 2].isSorted() && !self.isSorted()",
            "self.sum() == 6 && [1.5, 2.5].sum() == 4.0 && [].sum() == 0",
            "self.min() == 1 && self.max() == 3 && ['b', 'a'].min() == 'a'",
            "self.indexOf(2) == 2 && [1, 2, 1].lastIndexOf(1) == 2 && self.indexOf(9) == -1",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
        assert!(eval("[].min() == 1").is_err(), "min of an empty list is an error");
        assert!(eval("[1, 'a'].isSorted()").is_err(), "mixed types do not compare");
    }

    #[test]
    fn regex_functions() {
        for rule in [
            "'abc 123'.find('[0-9]+') == '123' && 'abc'.find('[0-9]+') == ''",
            "'1 2 3'.findAll('[0-9]') == ['1', '2', '3'] && '1 2 3'.findAll('[0-9]', 2) == ['1', '2']",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
    }
}
