//! JSON objects to Kubernetes protobuf, as Go's generated marshallers write them: fields in field-number
//! order, non-pointer scalars always (a zero included), pointers and messages only when set, map entries
//! sorted by key, and the well-known types in their message forms.
//!
//! The encoder is the decoder's inverse over the same schema table: decoding what it writes gives back
//! the JSON it was given (up to Go's normalisations: `omitempty` zeros dropped, whole-second times).
//! A key the table does not know is an error rather than lost data: the caller stores such an object in
//! another form (see [`crate::store`]).

use data_encoding::BASE64;
use prost::encoding::{WireType, encode_key, encode_varint};
use serde_json::{Map, Value};

use super::ProtobufError;
use super::message::MAX_DEPTH;
use super::schema::{self, Field, Label, Message, Type, Zero};
use super::wellknown;

/// Encodes `value` as the message named `name` (a proto name from the schema table).
pub(super) fn encode(name: &str, value: &Value, depth: usize) -> Result<Vec<u8>, ProtobufError> {
    let message = schema::message(name).ok_or_else(|| ProtobufError::UnknownMessage(name.to_owned()))?;
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    let mut out = Vec::new();
    match message.special {
        Some(special) => {
            let fields = wellknown::from_json(message.name, special, value)?;
            encode_fields(message, &fields, depth, &mut out)?;
        }
        None => {
            let object = value
                .as_object()
                .ok_or_else(|| invalid(message, "expected an object"))?;
            check_keys(message, object)?;
            encode_fields(message, object, depth, &mut out)?;
        }
    }
    Ok(out)
}

/// Encodes a top-level object (a kind with `metadata`) as its typed message: `apiVersion` and `kind`
/// are the envelope's, not the message's, so they are the only keys the message may lack.
pub(super) fn encode_top_level(name: &str, object: &Map<String, Value>) -> Result<Vec<u8>, ProtobufError> {
    let message = schema::message(name).ok_or_else(|| ProtobufError::UnknownMessage(name.to_owned()))?;
    for key in object.keys() {
        if key != "apiVersion" && key != "kind" && !has_key(message, key) {
            return Err(invalid(message, &format!("unknown field {key:?}")));
        }
    }
    let mut out = Vec::new();
    encode_fields(message, object, 0, &mut out)?;
    Ok(out)
}

/// Writes the `runtime.Unknown` envelope around `raw` as Go's generated marshaller does: the embedded
/// `TypeMeta` (1), `raw` (2), and the empty `contentEncoding` (3) and `contentType` (4), every field a
/// non-pointer and so always written.
pub(super) fn write_unknown(api_version: &str, kind: &str, raw: &[u8], out: &mut Vec<u8>) {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    write_bytes(1, api_version.as_bytes(), &mut type_meta);
    write_bytes(2, kind.as_bytes(), &mut type_meta);
    write_bytes(1, &type_meta, out);
    write_bytes(2, raw, out);
    write_bytes(3, &[], out);
    write_bytes(4, &[], out);
}

/// Encodes the fields of `message` found in `object` (keys of inline fields included) into `out`.
pub(super) fn encode_fields(
    message: &'static Message,
    object: &Map<String, Value>,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let mut fields: Vec<&'static Field> = message.fields.iter().collect();
    fields.sort_by_key(|f| f.number);
    for field in fields {
        encode_field(message, field, object, depth, out)?;
    }
    Ok(())
}

fn encode_field(
    message: &'static Message,
    field: &'static Field,
    object: &Map<String, Value>,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let value = object.get(field.json);
    match (field.label, field.ty) {
        // A Go embedded struct: never a pointer, so always written; its keys are the parent's.
        (Label::Inline, Type::Message(inner)) => {
            let inner_message =
                schema::message(inner).ok_or_else(|| ProtobufError::UnknownMessage(inner.to_owned()))?;
            let mut bytes = Vec::new();
            encode_fields(inner_message, object, depth + 1, &mut bytes)?;
            write_bytes(field.number, &bytes, out);
        }
        (Label::Inline, _) => return Err(invalid(message, "an inline field must be a message")),
        (Label::Single, Type::Message(inner)) => match value {
            // An `omitzero` struct left out of the JSON is still written, empty.
            None if schema::omits_zero(message, field) => write_bytes(field.number, &[], out),
            None => {}
            // A null non-special message is a nil pointer; the time types are null when zero, and
            // non-pointer ones are written (empty) even then.
            Some(Value::Null) if !is_special(inner) => {}
            Some(value) => write_bytes(field.number, &encode(inner, value, depth + 1)?, out),
        },
        (Label::Single, ty) => match value {
            Some(value) if !value.is_null() => write_scalar(message, field, ty, value, out)?,
            // `omitempty` on a non-pointer: the JSON left out a zero that Go still writes.
            _ if field.zero == Zero::Omit => write_zero(field.number, ty, out),
            _ => {}
        },
        (Label::Repeated, ty) => match value {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    match ty {
                        Type::Message(inner) => {
                            write_bytes(field.number, &encode(inner, item, depth + 1)?, out)
                        }
                        ty => write_scalar(message, field, ty, item, out)?,
                    }
                }
            }
            Some(_) => return Err(invalid(message, &format!("{}: expected an array", field.json))),
        },
        (Label::Map, ty) => match value {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                let mut keys: Vec<&String> = entries.keys().collect();
                keys.sort();
                for key in keys {
                    let mut entry = Vec::new();
                    write_bytes(1, key.as_bytes(), &mut entry);
                    match (ty, &entries[key.as_str()]) {
                        (Type::Message(inner), item) => {
                            write_bytes(2, &encode(inner, item, depth + 1)?, &mut entry)
                        }
                        (ty, Value::Null) => write_zero(2, ty, &mut entry),
                        (ty, item) => write_scalar_numbered(message, field, 2, ty, item, &mut entry)?,
                    }
                    write_bytes(field.number, &entry, out);
                }
            }
            Some(_) => return Err(invalid(message, &format!("{}: expected an object", field.json))),
        },
    }
    Ok(())
}

/// Refuses keys that no field of `message` (or of its inline fields) has.
fn check_keys(message: &'static Message, object: &Map<String, Value>) -> Result<(), ProtobufError> {
    for key in object.keys() {
        if !has_key(message, key) {
            return Err(invalid(message, &format!("unknown field {key:?}")));
        }
    }
    Ok(())
}

fn has_key(message: &'static Message, key: &str) -> bool {
    message.fields.iter().any(|f| match (f.label, f.ty) {
        (Label::Inline, Type::Message(inner)) => schema::message(inner).is_some_and(|m| has_key(m, key)),
        _ => f.json == key,
    })
}

fn is_special(name: &str) -> bool {
    schema::message(name).is_some_and(|m| m.special.is_some())
}

fn write_bytes(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn write_zero(number: u32, ty: Type, out: &mut Vec<u8>) {
    match ty {
        Type::String | Type::Bytes | Type::Message(_) => write_bytes(number, &[], out),
        Type::Bool | Type::Int32 | Type::Int64 => {
            encode_key(number, WireType::Varint, out);
            encode_varint(0, out);
        }
        Type::Double => {
            encode_key(number, WireType::SixtyFourBit, out);
            out.extend_from_slice(&0f64.to_bits().to_le_bytes());
        }
    }
}

fn write_scalar(
    message: &'static Message,
    field: &'static Field,
    ty: Type,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    write_scalar_numbered(message, field, field.number, ty, value, out)
}

fn write_scalar_numbered(
    message: &'static Message,
    field: &'static Field,
    number: u32,
    ty: Type,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let wrong = || invalid(message, &format!("{}: unexpected value {value}", field.json));
    match ty {
        Type::String => write_bytes(number, value.as_str().ok_or_else(wrong)?.as_bytes(), out),
        Type::Bytes => {
            let text = value.as_str().ok_or_else(wrong)?;
            let bytes = BASE64.decode(text.as_bytes()).map_err(|_| wrong())?;
            write_bytes(number, &bytes, out);
        }
        Type::Bool => {
            encode_key(number, WireType::Varint, out);
            encode_varint(u64::from(value.as_bool().ok_or_else(wrong)?), out);
        }
        Type::Int32 => {
            let n = value
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(wrong)?;
            encode_key(number, WireType::Varint, out);
            // Go sign-extends negative int32s to ten bytes.
            encode_varint(i64::from(n) as u64, out);
        }
        Type::Int64 => {
            let n = value.as_i64().ok_or_else(wrong)?;
            encode_key(number, WireType::Varint, out);
            encode_varint(n as u64, out);
        }
        Type::Double => {
            let n = value.as_f64().ok_or_else(wrong)?;
            encode_key(number, WireType::SixtyFourBit, out);
            out.extend_from_slice(&n.to_bits().to_le_bytes());
        }
        Type::Message(_) => return Err(wrong()),
    }
    Ok(())
}

fn invalid(message: &'static Message, reason: &str) -> ProtobufError {
    ProtobufError::InvalidValue {
        message: message.name,
        reason: reason.to_owned(),
    }
}
