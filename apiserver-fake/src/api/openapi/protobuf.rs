//! The v2 document in the protobuf form kubectl asks for
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): gnostic's `openapi.v2.Document`.
//!
//! kubectl reads only the definitions of this form (for client-side validation and strategic merge
//! patches), so it carries `swagger`, `info` and `definitions`; the paths are in the JSON form.
//! Extension values travel as YAML text (`Any.yaml`); JSON is valid YAML, so they are written as JSON.

use prost::encoding::{WireType, encode_key, encode_varint};
use serde_json::Value;

/// Encodes the `swagger`, `info` and `definitions` of a v2 JSON document as `openapi.v2.Document`.
pub(crate) fn encode_document(document: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, document["swagger"].as_str().unwrap_or("2.0"));
    message(&mut out, 2, |info| {
        string(info, 1, document["info"]["title"].as_str().unwrap_or_default());
        string(info, 2, document["info"]["version"].as_str().unwrap_or_default());
    });
    if let Some(definitions) = document["definitions"].as_object() {
        message(&mut out, 9, |defs| {
            for (name, schema) in definitions {
                named_schema(defs, 1, name, schema);
            }
        });
    }
    out
}

fn string(out: &mut Vec<u8>, tag: u32, value: &str) {
    if value.is_empty() {
        return;
    }
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(value.len() as u64, out);
    out.extend_from_slice(value.as_bytes());
}

fn boolean(out: &mut Vec<u8>, tag: u32, value: bool) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(u64::from(value), out);
}

/// A length-delimited submessage written by `body` (always present, even when empty).
fn message(out: &mut Vec<u8>, tag: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    body(&mut inner);
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(inner.len() as u64, out);
    out.extend_from_slice(&inner);
}

/// `NamedSchema { name = 1; value = 2; }`.
fn named_schema(out: &mut Vec<u8>, tag: u32, name: &str, schema: &Value) {
    message(out, tag, |named| {
        string(named, 1, name);
        message(named, 2, |s| encode_schema(s, schema));
    });
}

/// `Any { yaml = 2; }` holding `value`.
fn any(out: &mut Vec<u8>, tag: u32, value: &Value) {
    let text = serde_json::to_string(value).unwrap_or_default();
    message(out, tag, |a| string(a, 2, &text));
}

/// gnostic's `Schema` message from an OpenAPI v2 schema object.
fn encode_schema(out: &mut Vec<u8>, schema: &Value) {
    let Some(map) = schema.as_object() else {
        return;
    };
    if let Some(r) = map.get("$ref").and_then(Value::as_str) {
        string(out, 1, r);
    }
    if let Some(format) = map.get("format").and_then(Value::as_str) {
        string(out, 2, format);
    }
    if let Some(default) = map.get("default") {
        any(out, 5, default);
    }
    for required in map
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        string(out, 19, required.as_str().unwrap_or_default());
    }
    for value in map.get("enum").and_then(Value::as_array).into_iter().flatten() {
        any(out, 20, value);
    }
    match map.get("additionalProperties") {
        Some(Value::Bool(b)) => message(out, 21, |a| boolean(a, 2, *b)),
        Some(additional @ Value::Object(_)) => {
            message(out, 21, |a| message(a, 1, |s| encode_schema(s, additional)))
        }
        _ => {}
    }
    if let Some(t) = map.get("type").and_then(Value::as_str) {
        message(out, 22, |item| string(item, 1, t));
    }
    if let Some(items) = map.get("items") {
        message(out, 23, |item| message(item, 1, |s| encode_schema(s, items)));
    }
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        message(out, 25, |props| {
            for (name, property) in properties {
                named_schema(props, 1, name, property);
            }
        });
    }
    for (name, value) in map.iter().filter(|(k, _)| k.starts_with("x-")) {
        message(out, 31, |named| {
            string(named, 1, name);
            any(named, 2, value);
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Reads the `(field, bytes)` pairs of a message (length-delimited fields only).
    fn fields(mut buf: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            let (tag, wire) = prost::encoding::decode_key(&mut buf).unwrap();
            match wire {
                WireType::LengthDelimited => {
                    let len = prost::encoding::decode_varint(&mut buf).unwrap() as usize;
                    out.push((tag, buf[..len].to_vec()));
                    buf = &buf[len..];
                }
                WireType::Varint => {
                    let v = prost::encoding::decode_varint(&mut buf).unwrap();
                    out.push((tag, vec![v as u8]));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        out
    }

    #[test]
    fn encodes_gnostic_field_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.36.0"},
            "definitions": {"io.k8s.api.batch.v1.Job": {
                "type": "object",
                "properties": {"spec": {"$ref": "#/definitions/io.k8s.api.batch.v1.JobSpec"}},
                "x-kubernetes-group-version-kind": [{"group": "batch", "kind": "Job", "version": "v1"}],
            }},
        });
        let top = fields(&encode_document(&doc));
        assert_eq!(top[0], (1, b"2.0".to_vec()));
        assert_eq!(
            fields(&top[1].1),
            vec![(1, b"Kubernetes".to_vec()), (2, b"v1.36.0".to_vec())]
        );
        assert_eq!(top[2].0, 9);
        let named = fields(&fields(&top[2].1)[0].1);
        assert_eq!(named[0], (1, b"io.k8s.api.batch.v1.Job".to_vec()));
        let schema = fields(&named[1].1);
        let tags: Vec<u32> = schema.iter().map(|(t, _)| *t).collect();
        assert_eq!(tags, [22, 25, 31]);
        assert_eq!(fields(&schema[0].1), vec![(1, b"object".to_vec())]);
        let extension = fields(&schema[2].1);
        assert_eq!(extension[0], (1, b"x-kubernetes-group-version-kind".to_vec()));
        let any = fields(&extension[1].1);
        assert_eq!(any[0].0, 2);
        assert_eq!(
            String::from_utf8(any[0].1.clone()).unwrap(),
            r#"[{"group":"batch","kind":"Job","version":"v1"}]"#
        );
    }
}
