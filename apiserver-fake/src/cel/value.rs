//! JSON values as CEL sees them (upstream `UnstructuredToVal`): objects are maps with string keys,
//! arrays lists, whole numbers `int` (beyond `i64`: `uint`), other numbers `double`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// `value` as a CEL value.
pub fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let entries: HashMap<String, cel::Value> =
                map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(entries)
        }
    }
}

/// How many JSON values `value` holds, itself included (what `cel::cost` sizes data by).
pub fn size(value: &Value) -> u64 {
    match value {
        Value::Array(items) => 1 + items.iter().map(size).sum::<u64>(),
        Value::Object(map) => 1 + map.values().map(size).sum::<u64>(),
        _ => 1,
    }
}

/// How many values a CEL value holds, itself included: [`size`] of what the admission plugins bind.
pub fn cel_size(value: &cel::Value) -> u64 {
    match value {
        cel::Value::List(items) => 1 + items.iter().map(cel_size).sum::<u64>(),
        cel::Value::Map(map) => 1 + map.map.values().map(cel_size).sum::<u64>(),
        _ => 1,
    }
}

/// The name of `value`'s type in field errors (the schema's `type`, as upstream's `sts.Type`).
pub fn schema_type(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// A CEL value as JSON (upstream's `convertField` / `structpb` conversion of what a mutation
/// produced): maps must have string keys, numbers must be finite; anything else is an error whose
/// text says what could not be converted. Map keys are sorted, so the result is deterministic.
pub fn to_json(value: &cel::Value) -> Result<Value, String> {
    Ok(match value {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("cannot convert {f} to JSON"))?,
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::List(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        cel::Value::Map(map) => {
            let mut entries = std::collections::BTreeMap::new();
            for (key, item) in map.map.iter() {
                let cel::objects::Key::String(key) = key else {
                    return Err(format!("map key {key:?} is not a string"));
                };
                entries.insert(key.to_string(), to_json(item)?);
            }
            Value::Object(entries.into_iter().collect())
        }
        other => return Err(format!("cannot convert {other:?} to JSON")),
    })
}
