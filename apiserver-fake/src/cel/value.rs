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

/// How many JSON values `value` holds, itself included (what [`super::cost`] sizes data by).
pub fn size(value: &Value) -> u64 {
    match value {
        Value::Array(items) => 1 + items.iter().map(size).sum::<u64>(),
        Value::Object(map) => 1 + map.values().map(size).sum::<u64>(),
        _ => 1,
    }
}

/// The name of `value`'s type in field errors (the schema's `type`, as upstream's `sts.Type`).
pub fn schema_type(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or_default()
}
