//! The Go types whose JSON form is not an object of their proto fields: times, durations, quantities,
//! int-or-strings, embedded raw JSON, string-list wrappers and the apiextensions schema unions.

use data_encoding::BASE64;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::ProtobufError;
use super::schema::Special;

/// Go's zero `time.Time` in Unix seconds (`0001-01-01T00:00:00Z`); JSON shows it as `null`.
const ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Converts a well-known message, already decoded into its raw fields (every scalar kept), into the
/// JSON its Go type marshals to. `empty` says the message had no bytes at all.
pub(super) fn to_json(
    message: &'static str,
    special: Special,
    empty: bool,
    fields: &Map<String, Value>,
) -> Result<Value, ProtobufError> {
    let invalid = |reason: String| ProtobufError::InvalidValue { message, reason };
    let int = |key: &str| fields.get(key).and_then(Value::as_i64).unwrap_or(0);
    let raw = |key: &str| -> Result<Option<Vec<u8>>, ProtobufError> {
        match fields.get(key).and_then(Value::as_str) {
            Some(b64) => BASE64
                .decode(b64.as_bytes())
                .map(Some)
                .map_err(|e| invalid(e.to_string())),
            None => Ok(None),
        }
    };
    let embedded = |bytes: Vec<u8>| -> Result<Value, ProtobufError> {
        serde_json::from_slice(&bytes).map_err(|e| invalid(format!("embedded data is not JSON: {e}")))
    };
    Ok(match special {
        // metav1.Time keeps whole seconds only (its Unmarshal drops nanos).
        Special::Time if empty || int("seconds") == ZERO_TIME_SECONDS => Value::Null,
        Special::Time => {
            Value::String(rfc3339(i128::from(int("seconds")) * 1_000_000_000, false).map_err(invalid)?)
        }
        Special::MicroTime => {
            let nanos = i128::from(int("seconds")) * 1_000_000_000 + i128::from(int("nanos"));
            if empty || nanos == i128::from(ZERO_TIME_SECONDS) * 1_000_000_000 {
                Value::Null
            } else {
                Value::String(rfc3339(nanos, true).map_err(invalid)?)
            }
        }
        Special::Duration => Value::String(go_duration(int("duration"))),
        Special::Quantity => match fields.get("string").and_then(Value::as_str) {
            // The zero Quantity; Go always writes at least "0".
            None => Value::String("0".to_owned()),
            Some("") => {
                return Err(invalid(
                    "quantities must match the regular expression \
                     '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                        .to_owned(),
                ));
            }
            Some(quantity) => Value::String(quantity.to_owned()),
        },
        Special::IntOrString => match int("type") {
            0 => Value::from(int("intVal")),
            1 => fields
                .get("strVal")
                .cloned()
                .unwrap_or_else(|| Value::String(String::new())),
            _ => return Err(invalid("impossible IntOrString.Type".to_owned())),
        },
        // RawExtension and FieldsV1 marshal a nil Raw as null and any other Raw verbatim.
        Special::RawExtension | Special::FieldsV1 => match raw("raw")? {
            None => Value::Null,
            Some(bytes) => embedded(bytes)?,
        },
        // apiextensions JSON marshals an empty Raw as null.
        Special::Json => match raw("raw")? {
            Some(bytes) if !bytes.is_empty() => embedded(bytes)?,
            _ => Value::Null,
        },
        Special::StringList => fields.get("items").cloned().unwrap_or(Value::Null),
        Special::SchemaOrBool => match fields.get("schema") {
            Some(schema) => schema.clone(),
            None => Value::Bool(fields.get("allows").and_then(Value::as_bool).unwrap_or(false)),
        },
        Special::SchemaOrArray => match fields.get("JSONSchemas") {
            Some(Value::Array(items)) if !items.is_empty() => Value::Array(items.clone()),
            _ => fields.get("schema").cloned().unwrap_or(Value::Null),
        },
        Special::SchemaOrStringArray => match fields.get("property") {
            Some(Value::Array(items)) if !items.is_empty() => Value::Array(items.clone()),
            _ => fields.get("schema").cloned().unwrap_or(Value::Null),
        },
    })
}

/// The inverse of [`to_json`]: the raw fields of a well-known message for the JSON its Go type
/// unmarshals from (what [`super::encode`] then writes).
pub(super) fn from_json(
    message: &'static str,
    special: Special,
    value: &Value,
) -> Result<Map<String, Value>, ProtobufError> {
    let invalid = |reason: String| ProtobufError::InvalidValue { message, reason };
    let unexpected = || invalid(format!("unexpected value {value}"));
    let mut fields = Map::new();
    let mut set = |key: &str, value: Value| {
        fields.insert(key.to_owned(), value);
    };
    match (special, value) {
        // The zero time: an empty message (Go's Time marshals nothing for it).
        (Special::Time | Special::MicroTime, Value::Null) => {}
        (Special::Time | Special::MicroTime, Value::String(text)) => {
            let at = OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .map_err(|e| invalid(format!("parsing time {text:?}: {e}")))?;
            set("seconds", Value::from(at.unix_timestamp()));
            set("nanos", Value::from(at.nanosecond()));
        }
        (Special::Duration, Value::String(text)) => {
            let nanos = crate::go_duration::parse(text).map_err(|e| invalid(e.to_string()))?;
            set("duration", Value::from(nanos));
        }
        (Special::Quantity, Value::String(text)) => set("string", Value::String(text.clone())),
        (Special::Quantity, Value::Number(n)) => set("string", Value::String(n.to_string())),
        (Special::IntOrString, Value::Number(n)) => {
            set("type", Value::from(0));
            set("intVal", Value::from(n.as_i64().ok_or_else(unexpected)?));
            set("strVal", Value::String(String::new()));
        }
        (Special::IntOrString, Value::String(text)) => {
            set("type", Value::from(1));
            set("intVal", Value::from(0));
            set("strVal", Value::String(text.clone()));
        }
        // A nil Raw is not written; anything else is its JSON, verbatim.
        (Special::RawExtension | Special::FieldsV1 | Special::Json, Value::Null) => {}
        (Special::RawExtension | Special::FieldsV1 | Special::Json, value) => {
            let raw = serde_json::to_vec(value).map_err(|e| invalid(e.to_string()))?;
            set("raw", Value::String(BASE64.encode(&raw)));
        }
        (Special::StringList, Value::Null) => {}
        (Special::StringList, Value::Array(_)) => set("items", value.clone()),
        (Special::SchemaOrBool, Value::Bool(allows)) => set("allows", Value::Bool(*allows)),
        (Special::SchemaOrBool, Value::Object(_)) => {
            set("allows", Value::Bool(true));
            set("schema", value.clone());
        }
        (Special::SchemaOrArray, Value::Array(_)) => set("JSONSchemas", value.clone()),
        (Special::SchemaOrStringArray, Value::Array(_)) => set("property", value.clone()),
        (Special::SchemaOrArray | Special::SchemaOrStringArray, Value::Object(_)) => {
            set("schema", value.clone())
        }
        _ => return Err(unexpected()),
    }
    Ok(fields)
}

/// RFC 3339 in UTC as Go's `time.RFC3339` (seconds) or `RFC3339Micro` (six fraction digits).
fn rfc3339(unix_nanos: i128, micro: bool) -> Result<String, String> {
    let at = OffsetDateTime::from_unix_timestamp_nanos(unix_nanos)
        .map_err(|_| "Time.MarshalJSON: year outside of range [0,9999]".to_owned())?;
    if !(0..=9999).contains(&at.year()) {
        return Err("Time.MarshalJSON: year outside of range [0,9999]".to_owned());
    }
    let date = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    );
    Ok(if micro {
        format!("{date}.{:06}Z", at.microsecond())
    } else {
        format!("{date}Z")
    })
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub(super) fn go_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let mut u = nanos.unsigned_abs();
    if u == 0 {
        return "0s".to_owned();
    }
    if u < 1_000_000_000 {
        let (unit, prec) = match u {
            0..1_000 => ("ns", 0),
            1_000..1_000_000 => ("µs", 3),
            _ => ("ms", 6),
        };
        let (frac, whole) = fraction(u, prec);
        return format!("{sign}{whole}{frac}{unit}");
    }
    let (frac, seconds) = fraction(u, 9);
    let mut out = format!("{}{frac}s", seconds % 60);
    u = seconds / 60;
    if u > 0 {
        out = format!("{}m{out}", u % 60);
        u /= 60;
        if u > 0 {
            out = format!("{u}h{out}");
        }
    }
    format!("{sign}{out}")
}

/// Splits `v` into `v / 10^prec` and its fraction as `.ddd` without trailing zeros (empty if zero).
fn fraction(v: u64, prec: u32) -> (String, u64) {
    let scale = 10u64.pow(prec);
    let digits = format!("{:0width$}", v % scale, width = prec as usize);
    let digits = digits.trim_end_matches('0');
    let frac = if digits.is_empty() {
        String::new()
    } else {
        format!(".{digits}")
    };
    (frac, v / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_does() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1), "1ns");
        assert_eq!(go_duration(1_500), "1.5µs");
        assert_eq!(go_duration(1_500_000), "1.5ms");
        assert_eq!(go_duration(1_000_000_000), "1s");
        assert_eq!(go_duration(90 * 1_000_000_000), "1m30s");
        assert_eq!(go_duration(3_600 * 1_000_000_000), "1h0m0s");
        assert_eq!(go_duration(-(3_723_500_000_000)), "-1h2m3.5s");
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(
            rfc3339(1_767_323_045 * 1_000_000_000, false).unwrap(),
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(
            rfc3339(1_767_323_045 * 1_000_000_000 + 123_456_789, true).unwrap(),
            "2026-01-02T03:04:05.123456Z"
        );
        assert!(rfc3339(i128::from(i64::MAX) * 1_000_000_000, false).is_err());
    }
}
