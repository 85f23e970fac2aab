//! Typed protobuf messages to JSON, field by field, as `kube-apiserver` would: decode into the Go
//! struct, then `encoding/json` it (keys in struct order, `omitempty`, sorted map keys, base64 bytes).

use std::collections::BTreeMap;

use data_encoding::BASE64;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::schema::{self, Field, Label, Message, Type, Zero};
use super::wellknown;
use super::wire::{self, WireValue};

/// Nesting deeper than this is rejected (the deepest real objects stay far below; protects the stack).
pub(super) const MAX_DEPTH: usize = 100;

/// What one field collected while its message was read.
enum Slot<'a> {
    Empty,
    /// A scalar (the last one on the wire wins).
    Scalar(Value),
    /// The encodings of a single message field; concatenating them merges them, as in protobuf.
    Chunks(Vec<&'a [u8]>),
    List(Vec<Value>),
    Entries(BTreeMap<String, Value>),
}

/// Decodes the message named `name` (a proto name from the schema table) into its JSON value.
pub(super) fn decode(name: &str, bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    let message = schema::message(name).ok_or_else(|| ProtobufError::UnknownMessage(name.to_owned()))?;
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    match message.special {
        Some(special) => {
            let fields = decode_fields(message, bytes, depth, Zero::Keep)?;
            wellknown::to_json(message.name, special, bytes.is_empty(), &fields)
        }
        None => Ok(Value::Object(decode_fields(message, bytes, depth, Zero::Omit)?)),
    }
}

/// Decodes a message's fields into a JSON object. With `zeros: Zero::Keep` every scalar on the wire is
/// kept (the well-known types read their raw fields that way); otherwise each field's own rule applies.
pub(super) fn decode_fields(
    message: &'static Message,
    bytes: &[u8],
    depth: usize,
    zeros: Zero,
) -> Result<Map<String, Value>, ProtobufError> {
    let mut slots: Vec<Slot<'_>> = message.fields.iter().map(|_| Slot::Empty).collect();
    for item in wire::fields(bytes) {
        let (number, value) = item.map_err(|reason| ProtobufError::Malformed {
            message: message.name,
            reason,
        })?;
        let (index, field) = message.field(number).ok_or(ProtobufError::UnknownField {
            message: message.name,
            number,
            wire_type: value.wire_type(),
        })?;
        let Some(slot) = slots.get_mut(index) else {
            continue;
        };
        match (field.label, field.ty) {
            (Label::Single | Label::Inline, Type::Message(_)) => {
                let bytes = length_delimited(message, field, value)?;
                match slot {
                    Slot::Chunks(chunks) => chunks.push(bytes),
                    _ => *slot = Slot::Chunks(vec![bytes]),
                }
            }
            (Label::Single | Label::Inline, ty) => *slot = Slot::Scalar(scalar(message, field, ty, value)?),
            (Label::Repeated, ty) => {
                let mut items = Vec::new();
                match (ty, value) {
                    (Type::Message(inner), _) => {
                        items.push(decode(
                            inner,
                            length_delimited(message, field, value)?,
                            depth + 1,
                        )?);
                    }
                    // Numeric lists may be packed into one length-delimited value.
                    (Type::Bool | Type::Int32 | Type::Int64 | Type::Double, WireValue::Bytes(packed)) => {
                        items = unpack(message, field, ty, packed)?;
                    }
                    _ => items.push(scalar(message, field, ty, value)?),
                }
                match slot {
                    Slot::List(list) => list.extend(items),
                    _ => *slot = Slot::List(items),
                }
            }
            (Label::Map, ty) => {
                let (key, value) = map_entry(
                    message,
                    field,
                    ty,
                    length_delimited(message, field, value)?,
                    depth,
                )?;
                match slot {
                    Slot::Entries(entries) => {
                        entries.insert(key, value);
                    }
                    _ => *slot = Slot::Entries(BTreeMap::from([(key, value)])),
                }
            }
        }
    }
    let mut out = Map::new();
    for (field, slot) in message.fields.iter().zip(slots) {
        match slot {
            Slot::Empty => {}
            Slot::Scalar(value) => {
                if zeros == Zero::Keep || field.zero == Zero::Keep || !is_zero(&value) {
                    out.insert(field.json.to_owned(), value);
                }
            }
            Slot::Chunks(chunks) => {
                let Type::Message(inner) = field.ty else { continue };
                let value = decode(inner, &chunks.concat(), depth + 1)?;
                match (field.label, value) {
                    (Label::Inline, Value::Object(fields)) => out.extend(fields),
                    (_, Value::Null) if schema::omits_zero(message, field) => {}
                    (_, value) => {
                        out.insert(field.json.to_owned(), value);
                    }
                }
            }
            Slot::List(items) => {
                out.insert(field.json.to_owned(), Value::Array(items));
            }
            Slot::Entries(entries) => {
                out.insert(
                    field.json.to_owned(),
                    Value::Object(entries.into_iter().collect()),
                );
            }
        }
    }
    Ok(out)
}

fn length_delimited<'a>(
    message: &'static Message,
    field: &'static Field,
    value: WireValue<'a>,
) -> Result<&'a [u8], ProtobufError> {
    match value {
        WireValue::Bytes(bytes) => Ok(bytes),
        other => Err(wrong_wire_type(message, field, other)),
    }
}

fn wrong_wire_type(message: &'static Message, field: &'static Field, value: WireValue<'_>) -> ProtobufError {
    ProtobufError::WrongWireType {
        message: message.name,
        field: field.json,
        wire_type: value.wire_type(),
    }
}

/// One scalar value, converted as Go's decoder and JSON encoder do.
fn scalar(
    message: &'static Message,
    field: &'static Field,
    ty: Type,
    value: WireValue<'_>,
) -> Result<Value, ProtobufError> {
    Ok(match (ty, value) {
        (Type::String, WireValue::Bytes(bytes)) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
        (Type::Bytes, WireValue::Bytes(bytes)) => Value::String(BASE64.encode(bytes)),
        (Type::Bool, WireValue::Varint(v)) => Value::Bool(v != 0),
        // Go keeps the low 32 bits (negative int32s are sign-extended to 10 bytes on the wire).
        (Type::Int32, WireValue::Varint(v)) => Value::from(v as i32),
        (Type::Int64, WireValue::Varint(v)) => Value::from(v as i64),
        (Type::Double, WireValue::Fixed64(v)) => serde_json::Number::from_f64(f64::from_bits(v))
            .map(Value::Number)
            .ok_or_else(|| ProtobufError::InvalidValue {
                message: message.name,
                reason: format!(
                    "json: unsupported value: {} in field {}",
                    f64::from_bits(v),
                    field.json
                ),
            })?,
        (_, other) => return Err(wrong_wire_type(message, field, other)),
    })
}

fn unpack(
    message: &'static Message,
    field: &'static Field,
    ty: Type,
    mut packed: &[u8],
) -> Result<Vec<Value>, ProtobufError> {
    let malformed = |reason: String| ProtobufError::Malformed {
        message: message.name,
        reason,
    };
    let mut items = Vec::new();
    while !packed.is_empty() {
        let value = if ty == Type::Double {
            let (head, rest) = packed
                .split_first_chunk::<8>()
                .ok_or_else(|| malformed("unexpected EOF".to_owned()))?;
            packed = rest;
            WireValue::Fixed64(u64::from_le_bytes(*head))
        } else {
            WireValue::Varint(
                prost::encoding::decode_varint(&mut packed).map_err(|e| malformed(e.to_string()))?,
            )
        };
        items.push(scalar(message, field, ty, value)?);
    }
    Ok(items)
}

/// A map entry message `{1: key, 2: value}`; a missing value is the value type's zero.
fn map_entry(
    message: &'static Message,
    field: &'static Field,
    ty: Type,
    entry: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = None;
    let mut chunks = Vec::new();
    for item in wire::fields(entry) {
        let (number, wire_value) = item.map_err(|reason| ProtobufError::Malformed {
            message: message.name,
            reason,
        })?;
        match (number, ty) {
            (1, _) => match scalar(message, field, Type::String, wire_value)? {
                Value::String(k) => key = k,
                _ => return Err(wrong_wire_type(message, field, wire_value)),
            },
            (2, Type::Message(_)) => chunks.push(length_delimited(message, field, wire_value)?),
            (2, _) => value = Some(scalar(message, field, ty, wire_value)?),
            _ => {
                return Err(ProtobufError::UnknownField {
                    message: message.name,
                    number,
                    wire_type: wire_value.wire_type(),
                });
            }
        }
    }
    let value = match (ty, value) {
        (Type::Message(inner), _) => decode(inner, &chunks.concat(), depth + 1)?,
        (_, Some(value)) => value,
        (Type::String | Type::Bytes, None) => Value::String(String::new()),
        (Type::Bool, None) => Value::Bool(false),
        (_, None) => Value::from(0),
    };
    Ok((key, value))
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}
