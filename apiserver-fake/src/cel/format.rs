//! Kubernetes' named formats (`k8s.io/apiserver/pkg/cel/library/format.go`): `format.named(name)` (an
//! optional), the constants `format.dns1123Label()`, `format.dns1123Subdomain()`, `format.dns1035Label()`,
//! `format.qualifiedName()`, `format.dns1123LabelPrefix()`, `format.dns1123SubdomainPrefix()`,
//! `format.dns1035LabelPrefix()`, `format.labelValue()`, `format.uri()`, `format.uuid()`, `format.byte()`,
//! `format.date()`, `format.datetime()`, and `<Format>.validate(s)`: `optional.none()` when `s` is valid,
//! else an optional of the list of upstream's messages.
//!
//! The validators are upstream's: the name rules of built-in objects ([`NameRule`], the `Prefix` forms
//! masking a trailing `-` as `NameIsDNSLabel(s, true)` does), `IsQualifiedName` and `IsValidLabelValue`
//! ([`qualified_name_violations`], [`label_value_violations`], also used by label selector validation),
//! `url.ParseRequestURI` (`isURL`'s parser, [`super::url`]; every refusal reads `parse "<s>": invalid URI
//! for request`, Go's other reasons are not told apart) and kube-openapi's `strfmt` checks for `uuid`,
//! `byte` (base64), `date` (`2006-01-02`) and `datetime` (RFC 3339).

use std::sync::{Arc, LazyLock};

use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::objects::{Opaque, OptionalValue};
use cel::{Env, ExecutionError, Value};

use crate::api::rest::names::NameRule;

/// The runtime type name of formats (upstream's `apiservercel.FormatType`).
const FORMAT_TYPE: &str = "kubernetes.NamedFormat";

/// A named format: upstream's `apiservercel.Format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Format {
    /// The name `format.named` knows it by.
    name: &'static str,
}

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        FORMAT_TYPE
    }
}

/// `maskTrailingDash`: a generated name's prefix is checked as if its trailing `-` were followed by
/// the random suffix (upstream replaces the last two characters by `a`).
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(_) if name.len() > 1 => format!("{}a", &name[..name.len() - 2]),
        _ => name.to_owned(),
    }
}

/// The messages `text` violates format `name` with (empty: valid).
pub(crate) fn violations(name: &str, text: &str) -> Vec<String> {
    let masked = || mask_trailing_dash(text);
    let one = |valid: bool, message: &str| {
        if valid {
            Vec::new()
        } else {
            vec![message.to_owned()]
        }
    };
    match name {
        "dns1123Label" => NameRule::Dns1123Label.violations(text),
        "dns1123Subdomain" => NameRule::Dns1123Subdomain.violations(text),
        "dns1035Label" => NameRule::Dns1035Label.violations(text),
        "dns1123LabelPrefix" => NameRule::Dns1123Label.violations(&masked()),
        "dns1123SubdomainPrefix" => NameRule::Dns1123Subdomain.violations(&masked()),
        "dns1035LabelPrefix" => NameRule::Dns1035Label.violations(&masked()),
        "qualifiedName" => qualified_name_violations(text),
        "labelValue" => label_value_violations(text),
        "uri" => one(
            is_request_uri(text),
            &format!("parse {text:?}: invalid URI for request"),
        ),
        "uuid" => one(is_uuid(text), "does not match the UUID format"),
        "byte" => one(is_base64(text), "invalid base64"),
        "date" => one(is_date(text), "invalid date"),
        "datetime" => one(is_datetime(text), "invalid datetime"),
        _ => Vec::new(),
    }
}

const LABEL_KEY_FORMAT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of a qualified name, a label value.
fn is_label_key_text(text: &str) -> bool {
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `validation.IsQualifiedName` (a label key: an optional DNS-1123 subdomain prefix and `/`, then a
/// name of at most 63 characters).
pub(crate) fn qualified_name_violations(text: &str) -> Vec<String> {
    let regex_error = format!(
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
         alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation \
         is '{LABEL_KEY_FORMAT}')"
    );
    let parts: Vec<&str> = text.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                errors.extend(
                    NameRule::Dns1123Subdomain
                        .violations(prefix)
                        .into_iter()
                        .map(|message| format!("prefix part {message}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {regex_error} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_label_key_text(name) {
        errors.push(format!("name part {regex_error}"));
    }
    errors
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters of the label key's form.
pub(crate) fn label_value_violations(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if text.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    if !text.is_empty() && !is_label_key_text(text) {
        errors.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', \
             and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
             '12345', regex used for validation is '({LABEL_KEY_FORMAT})?')"
        ));
    }
    errors
}

/// `url.ParseRequestURI`, as `isURL` parses (the environment's own `isURL`).
fn is_request_uri(text: &str) -> bool {
    let argument = || -> Option<CowVal<'static, 'static>> {
        Box::<dyn Val>::try_from(Value::String(Arc::new(text.to_owned())))
            .ok()
            .map(CowVal::Owned)
    };
    let Some(argument) = argument() else {
        return false;
    };
    let args = vec![argument];
    super::ENVIRONMENT
        .find_overload("isURL", &args)
        .and_then(|is_url| is_url(args).ok())
        .and_then(|result| Value::try_from(result.as_ref()).ok())
        == Some(Value::Bool(true))
}

/// strfmt's `UUIDPattern`: `(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`.
fn is_uuid(text: &str) -> bool {
    static UUID: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$").ok()
    });
    UUID.as_ref().is_some_and(|re| re.is_match(text))
}

/// govalidator's `IsBase64` (standard alphabet, padded, not empty).
fn is_base64(text: &str) -> bool {
    static BASE64: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
            .ok()
    });
    BASE64.as_ref().is_some_and(|re| re.is_match(text))
}

/// strfmt's `IsDate`: Go's `time.Parse("2006-01-02", s)` (four-digit year, two-digit month and day,
/// the day within its month).
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .filter(|part| part.iter().all(u8::is_ascii_digit))
            .and_then(|part| std::str::from_utf8(part).ok()?.parse::<u32>().ok())
    };
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`: lower-cased and split at `t`, a date, then
/// `^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$` with hours to 23 and
/// minutes and seconds to 59.
fn is_datetime(text: &str) -> bool {
    static TIME: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").ok()
    });
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    let (Some(date), Some(time)) = (parts.first(), parts.get(1)) else {
        return false;
    };
    let Some(captures) = TIME.as_ref().and_then(|re| re.captures(time)) else {
        return false;
    };
    let part = |i: usize| captures.get(i).map_or("", |m| m.as_str());
    is_date(date) && part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(value)?))
}

fn format_value(name: &'static str) -> Value {
    Value::Opaque(Arc::new(Format { name }))
}

/// `format.named(name)`: an optional of the format, `optional.none()` for a name upstream does not know.
fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let name = match args.first().map(|a| Value::try_from(a.as_ref())).transpose()? {
        Some(Value::String(name)) => name,
        _ => {
            return Err(ExecutionError::function_error(
                "format.named",
                "expected a string",
            ));
        }
    };
    let found = CONSTANTS.iter().find(|(known, _)| *known == name.as_str());
    let optional = match found {
        Some((known, _)) => OptionalValue::of(format_value(known)),
        None => OptionalValue::none(),
    };
    owned(Value::Opaque(Arc::new(optional)))
}

/// `<Format>.validate(s)`.
fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let values = args
        .iter()
        .map(|a| Value::try_from(a.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let (Some(Value::Opaque(format)), Some(Value::String(text))) = (values.first(), values.get(1)) else {
        return Err(ExecutionError::function_error(
            "validate",
            "expected a format and a string",
        ));
    };
    let Some(format) = format.downcast_ref::<Format>() else {
        return Err(ExecutionError::function_error("validate", "expected a format"));
    };
    let errors = violations(format.name, text);
    let optional = if errors.is_empty() {
        OptionalValue::none()
    } else {
        let list = errors.into_iter().map(|e| Value::String(Arc::new(e))).collect();
        OptionalValue::of(Value::List(Arc::new(list)))
    };
    owned(Value::Opaque(Arc::new(optional)))
}

type Overload = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// One zero-argument `format.<name>()` function per format.
macro_rules! constants {
    ($($function:ident => $name:literal),* $(,)?) => {
        $(
            fn $function<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
                owned(format_value($name))
            }
        )*
        /// The formats by the name `format.named` takes (upstream's `ConstantFormats`), each with its
        /// `format.<name>()`.
        const CONSTANTS: &[(&str, Overload)] = &[$(($name, $function)),*];
    };
}

constants! {
    dns1123_label => "dns1123Label",
    dns1123_subdomain => "dns1123Subdomain",
    dns1035_label => "dns1035Label",
    qualified_name => "qualifiedName",
    dns1123_label_prefix => "dns1123LabelPrefix",
    dns1123_subdomain_prefix => "dns1123SubdomainPrefix",
    dns1035_label_prefix => "dns1035LabelPrefix",
    label_value => "labelValue",
    uri => "uri",
    uuid => "uuid",
    byte => "byte",
    date => "date",
    datetime => "datetime",
}

/// Adds the library to `env`.
pub(crate) fn add_to(env: &mut Env) {
    if let Err(error) = env.add_type(Type::new_opaque_type(FORMAT_TYPE)) {
        tracing::error!(%error, "the format type could not be added");
    }
    for (name, op) in CONSTANTS {
        let function = format!("format.{name}");
        let id = format!("format-{name}");
        if let Err(error) = env.add_overload(&function, &id, vec![], *op) {
            tracing::error!(%error, function, "a format function could not be added");
        }
    }
    if let Err(error) = env.add_overload("format.named", "format-named", vec![STRING_TYPE], named) {
        tracing::error!(%error, "format.named could not be added");
    }
    let target = Type::new_opaque_type(FORMAT_TYPE);
    if let Err(error) =
        env.add_member_overload("validate", "format-validate", target, vec![STRING_TYPE], validate)
    {
        tracing::error!(%error, "<Format>.validate could not be added");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{compile, evaluate, value::to_cel};
    use super::violations;

    fn eval(source: &str) -> Result<cel::Value, String> {
        let expression = compile(source, &["self"]).map_err(|e| e.issues)?;
        evaluate(&expression, &[("self", to_cel(&json!({"name": "Bad_Name"})))]).map_err(|e| e.to_string())
    }

    const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and \
                         must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex \
                         used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

    #[test]
    fn dns_names_and_their_prefixes() {
        assert!(violations("dns1123Label", "my-name").is_empty());
        assert_eq!(violations("dns1123Label", "My_Name"), [LABEL]);
        assert_eq!(
            violations("dns1123Label", &"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(violations("dns1123Subdomain", "apiextensions.k8s.io").is_empty());
        assert_eq!(
            violations("dns1123Subdomain", "a..b"),
            [
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
              and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
              validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert!(violations("dns1035Label", "my-name").is_empty());
        assert_eq!(
            violations("dns1035Label", "1abc"),
            [
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
              alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
              regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(violations("dns1123LabelPrefix", "my-label-prefix-").is_empty());
        assert_eq!(violations("dns1123Label", "my-label-prefix-"), [LABEL]);
        assert!(violations("dns1123SubdomainPrefix", "mysubdomain.prefix.-").is_empty());
        assert!(violations("dns1035LabelPrefix", "my-label-prefix-").is_empty());
        assert_eq!(violations("dns1035LabelPrefix", "-").len(), 1);
    }

    #[test]
    fn qualified_names_and_label_values() {
        let name_part = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and \
                         end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex \
                         used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        assert!(violations("qualifiedName", "apiextensions.k8s.io/v1beta1").is_empty());
        assert!(violations("qualifiedName", "MyName").is_empty());
        assert_eq!(violations("qualifiedName", "-bad"), [name_part]);
        assert_eq!(
            violations("qualifiedName", "/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(
            violations("qualifiedName", "x/"),
            ["name part must be non-empty".to_owned(), name_part.to_owned()]
        );
        assert_eq!(
            violations("qualifiedName", "a/b/c"),
            [
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and \
              end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
              validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix \
              and '/' (e.g. 'example.com/MyName')"
            ]
        );
        assert!(
            violations("qualifiedName", "Bad_Prefix/x")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(violations("labelValue", "").is_empty());
        assert!(violations("labelValue", "my_value.1").is_empty());
        assert_eq!(
            violations("labelValue", "-x"),
            [
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and \
              must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', \
              regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        assert_eq!(
            violations("labelValue", &"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
    }

    #[test]
    fn openapi_formats() {
        assert!(violations("uri", "http://example.com").is_empty());
        assert!(violations("uri", "/path?q=1").is_empty());
        assert_eq!(
            violations("uri", "example.com"),
            ["parse \"example.com\": invalid URI for request"]
        );
        assert!(violations("uuid", "123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert!(violations("uuid", "123E4567E89B12D3A456426614174000").is_empty());
        assert_eq!(violations("uuid", "123e4567"), ["does not match the UUID format"]);
        assert!(violations("byte", "aGVsbG8=").is_empty());
        assert_eq!(violations("byte", "aGVsbG8"), ["invalid base64"]);
        assert_eq!(violations("byte", ""), ["invalid base64"]);
        assert!(violations("date", "2021-01-01").is_empty());
        assert!(violations("date", "2024-02-29").is_empty());
        for bad in ["2023-02-29", "2021-13-01", "2021-1-01", "2021-01-01x", ""] {
            assert_eq!(violations("date", bad), ["invalid date"], "{bad}");
        }
        for good in ["2021-01-01T00:00:00Z", "2021-01-01t23:59:59.123+02:00"] {
            assert!(violations("datetime", good).is_empty(), "{good}");
        }
        for bad in [
            "2021-01-01T24:00:00Z",
            "2021-01-01T00:00:00",
            "2021-01-01",
            "2021-02-30T00:00:00Z",
        ] {
            assert_eq!(violations("datetime", bad), ["invalid datetime"], "{bad}");
        }
    }

    #[test]
    fn the_library_in_expressions() {
        for rule in [
            "!format.dns1123Label().validate('my-name').hasValue()",
            "format.dns1123Label().validate(self.name).hasValue()",
            "format.named('dns1123Label').hasValue() && !format.named('nope').hasValue()",
            "format.named('uuid').value().validate('x').value() == ['does not match the UUID format']",
            "format.labelValue().validate(self.name) == optional.none()",
            "format.dns1123Subdomain() == format.named('dns1123Subdomain').value()",
            "format.dns1123Label() != format.dns1035Label()",
            "format.qualifiedName().validate('a/b/c').value().size() == 1",
            "!format.uri().validate('https://example.com').hasValue()",
            "!format.byte().validate('aGVsbG8=').hasValue() && !format.date().validate('2021-01-01').hasValue()",
            "!format.datetime().validate('2021-01-01T00:00:00Z').hasValue()",
            "!format.dns1123LabelPrefix().validate('p-').hasValue()",
            "!format.dns1123SubdomainPrefix().validate('p.-').hasValue()",
            "!format.dns1035LabelPrefix().validate('p-').hasValue()",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
        assert_eq!(
            eval("format.dns1123Label().validate(self.name).value().join(', ')"),
            Ok(cel::Value::String(std::sync::Arc::new(LABEL.to_owned())))
        );
    }
}
