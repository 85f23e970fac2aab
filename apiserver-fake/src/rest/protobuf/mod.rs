//! Decoding `application/vnd.kubernetes.protobuf` request bodies into JSON objects.
//!
//! kubectl's typed clients (`kubectl create job|configmap|namespace|secret|deployment ...`) send built-in
//! objects as protobuf, so the fake must read them as kube-apiserver does. A body is the `k8s\0` magic
//! followed by a `runtime.Unknown` envelope (`typeMeta{apiVersion, kind}`, `raw`); `raw` is the typed
//! message, decoded here by field tag with a schema of every built-in type (`schema.txt`, generated from
//! k8s-pb's prost sources with JSON field names from k8s-openapi by `gen_schema.py`). The well-known
//! wrappers become their JSON forms: `Time`/`MicroTime` → RFC 3339 (the zero time → `null`), `Quantity`
//! → string, `IntOrString` → number or string, `RawExtension`/`FieldsV1`/`JSON` → embedded JSON,
//! `bytes` → base64.
//!
//! Responses are never protobuf (clients that send protobuf also accept JSON).

use std::collections::HashMap;
use std::sync::OnceLock;

use data_encoding::BASE64;
use serde_json::{Map, Value};

use crate::status::Status;

/// The magic prefix of Kubernetes protobuf documents.
pub const MAGIC: &[u8] = b"k8s\0";

const SCHEMA: &str = include_str!("schema.txt");

/// Nesting deeper than this is rejected (no legitimate object comes close; protects the stack).
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Bool,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Double,
    Float,
    Bytes,
    Message(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Card {
    Single,
    Repeated,
    /// `map<string, kind>`.
    Map,
}

#[derive(Debug, Clone, Copy)]
struct Field {
    tag: u64,
    json: &'static str,
    kind: Kind,
    card: Card,
}

fn parse_kind(kind: &'static str) -> Option<Kind> {
    Some(match kind {
        "string" => Kind::String,
        "bool" => Kind::Bool,
        "int32" | "sint32" | "sfixed32" => Kind::Int32,
        "int64" | "sint64" | "sfixed64" => Kind::Int64,
        "uint32" | "fixed32" => Kind::Uint32,
        "uint64" | "fixed64" => Kind::Uint64,
        "double" => Kind::Double,
        "float" => Kind::Float,
        "bytes" => Kind::Bytes,
        other => Kind::Message(other.strip_prefix("message:")?),
    })
}

fn schema() -> &'static HashMap<&'static str, Vec<Field>> {
    static SCHEMA_MAP: OnceLock<HashMap<&'static str, Vec<Field>>> = OnceLock::new();
    SCHEMA_MAP.get_or_init(|| {
        let mut map = HashMap::new();
        for line in SCHEMA.lines() {
            let (name, fields) = line.split_once(' ').unwrap_or((line, ""));
            let fields = fields
                .split(';')
                .filter_map(|f| {
                    let mut parts = f.split(',');
                    let tag = parts.next()?.parse().ok()?;
                    let json = parts.next()?;
                    let kind = parts.next()?;
                    let card = match parts.next()? {
                        "repeated" => Card::Repeated,
                        "map" => Card::Map,
                        _ => Card::Single,
                    };
                    let kind = match card {
                        Card::Map => parse_kind(kind.strip_prefix("map:")?)?,
                        _ => parse_kind(kind)?,
                    };
                    Some(Field {
                        tag,
                        json,
                        kind,
                        card,
                    })
                })
                .collect();
            map.insert(name, fields);
        }
        map
    })
}

/// A cursor over protobuf wire data.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".to_owned())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated field")?;
        let slice = &self.buf[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// One raw field value.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

fn next_field<'a>(reader: &mut Reader<'a>) -> Result<(u64, Wire<'a>), String> {
    let key = reader.varint()?;
    let (tag, wire_type) = (key >> 3, key & 7);
    let value = match wire_type {
        0 => Wire::Varint(reader.varint()?),
        1 => {
            let bytes = reader.take(8)?;
            Wire::Fixed64(u64::from_le_bytes(bytes.try_into().map_err(|_| "bad fixed64")?))
        }
        2 => {
            let len = usize::try_from(reader.varint()?).map_err(|_| "length overflow")?;
            Wire::Bytes(reader.take(len)?)
        }
        5 => {
            let bytes = reader.take(4)?;
            Wire::Fixed32(u32::from_le_bytes(bytes.try_into().map_err(|_| "bad fixed32")?))
        }
        other => return Err(format!("unsupported wire type {other}")),
    };
    Ok((tag, value))
}

fn scalar(kind: Kind, wire: &Wire<'_>, depth: usize) -> Result<Value, String> {
    Ok(match (kind, wire) {
        (Kind::Bool, Wire::Varint(v)) => Value::Bool(*v != 0),
        // Negative int32s are sign-extended to 64 bits on the wire.
        (Kind::Int32, Wire::Varint(v)) => Value::from(*v as i64 as i32),
        (Kind::Int64, Wire::Varint(v)) => Value::from(*v as i64),
        (Kind::Uint32 | Kind::Uint64, Wire::Varint(v)) => Value::from(*v),
        (Kind::Int64 | Kind::Uint64, Wire::Fixed64(v)) => Value::from(*v),
        (Kind::Int32 | Kind::Uint32, Wire::Fixed32(v)) => Value::from(*v),
        (Kind::Double, Wire::Fixed64(v)) => Value::from(f64::from_bits(*v)),
        (Kind::Float, Wire::Fixed32(v)) => Value::from(f64::from(f32::from_bits(*v))),
        (Kind::String, Wire::Bytes(b)) => Value::String(String::from_utf8_lossy(b).into_owned()),
        (Kind::Bytes, Wire::Bytes(b)) => Value::String(BASE64.encode(b)),
        (Kind::Message(name), Wire::Bytes(b)) => decode_message(name, b, depth + 1)?,
        _ => return Err("field has an unexpected wire type".to_owned()),
    })
}

/// Numeric repeated fields may be packed into one length-delimited field.
fn packed(kind: Kind, bytes: &[u8]) -> Result<Vec<Value>, String> {
    let mut reader = Reader { buf: bytes, pos: 0 };
    let mut values = Vec::new();
    while !reader.done() {
        let wire = match kind {
            Kind::Double => Wire::Fixed64(u64::from_le_bytes(reader.take(8)?.try_into().map_err(|_| "bad")?)),
            Kind::Float => Wire::Fixed32(u32::from_le_bytes(reader.take(4)?.try_into().map_err(|_| "bad")?)),
            _ => Wire::Varint(reader.varint()?),
        };
        values.push(scalar(kind, &wire, 0)?);
    }
    Ok(values)
}

fn decode_fields(name: &str, bytes: &[u8], depth: usize) -> Result<Map<String, Value>, String> {
    if depth > MAX_DEPTH {
        return Err("message nested too deeply".to_owned());
    }
    let fields = schema()
        .get(name)
        .ok_or_else(|| format!("unknown message {name}"))?;
    let mut out = Map::new();
    let mut reader = Reader { buf: bytes, pos: 0 };
    while !reader.done() {
        let (tag, wire) = next_field(&mut reader)?;
        let Some(field) = fields.iter().find(|f| f.tag == tag) else {
            continue;
        };
        match field.card {
            Card::Single => {
                let value = scalar(field.kind, &wire, depth)?;
                // Go's generated marshaller writes non-pointer strings even when empty; JSON's
                // `omitempty` would not, so empty strings are dropped (as is ObjectMeta's zero
                // generation, which the server sets anyway).
                let empty = value.as_str() == Some("") && field.kind == Kind::String
                    || (field.json == "generation" && value.as_i64() == Some(0));
                if !empty {
                    out.insert(field.json.to_owned(), value);
                }
            }
            Card::Repeated => {
                let values = match (&wire, field.kind) {
                    (Wire::Bytes(b), kind)
                        if !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_)) =>
                    {
                        packed(kind, b)?
                    }
                    _ => vec![scalar(field.kind, &wire, depth)?],
                };
                let entry = out
                    .entry(field.json.to_owned())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = entry {
                    items.extend(values);
                }
            }
            Card::Map => {
                let Wire::Bytes(entry_bytes) = wire else {
                    return Err("map entry is not a message".to_owned());
                };
                let mut entry = Reader {
                    buf: entry_bytes,
                    pos: 0,
                };
                let (mut key, mut value) = (String::new(), None);
                while !entry.done() {
                    match next_field(&mut entry)? {
                        (1, Wire::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
                        (2, v) => value = Some(scalar(field.kind, &v, depth)?),
                        _ => {}
                    }
                }
                let value = value.unwrap_or_else(|| match field.kind {
                    Kind::String | Kind::Bytes => Value::String(String::new()),
                    Kind::Message(_) => Value::Object(Map::new()),
                    _ => Value::from(0),
                });
                let map = out
                    .entry(field.json.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(out)
}

/// Go's zero `time.Time` as `Timestamp` seconds (`0001-01-01T00:00:00Z`), which JSON shows as `null`.
const ZERO_TIME_SECONDS: i64 = -62_135_596_800;

fn time_value(fields: &Map<String, Value>, micro: bool) -> Value {
    let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
    if seconds == ZERO_TIME_SECONDS || (seconds == 0 && nanos == 0 && fields.is_empty()) {
        return Value::Null;
    }
    let Ok(at) = time::OffsetDateTime::from_unix_timestamp(seconds) else {
        return Value::Null;
    };
    let date = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    );
    if micro {
        Value::String(format!("{date}.{:06}Z", nanos / 1000))
    } else {
        Value::String(format!("{date}Z"))
    }
}

fn embedded_json(fields: &Map<String, Value>, key: &str) -> Value {
    let raw = fields
        .get(key)
        .and_then(Value::as_str)
        .and_then(|b64| BASE64.decode(b64.as_bytes()).ok());
    raw.and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null)
}

fn decode_message(name: &str, bytes: &[u8], depth: usize) -> Result<Value, String> {
    let fields = decode_fields(name, bytes, depth)?;
    Ok(match name.rsplit('.').next().unwrap_or_default() {
        "Time" if name.starts_with("apimachinery.pkg.apis.meta.") => time_value(&fields, false),
        "MicroTime" if name.starts_with("apimachinery.pkg.apis.meta.") => time_value(&fields, true),
        "Quantity" if name.starts_with("apimachinery.pkg.api.resource.") => fields
            .get("string")
            .cloned()
            .unwrap_or(Value::String("0".to_owned())),
        "IntOrString" => match fields.get("type").and_then(Value::as_i64) {
            Some(1) => fields
                .get("strVal")
                .cloned()
                .unwrap_or(Value::String(String::new())),
            _ => fields.get("intVal").cloned().unwrap_or(Value::from(0)),
        },
        "RawExtension" | "FieldsV1" => embedded_json(&fields, "raw"),
        "JSON" if name.starts_with("apiextensions") => embedded_json(&fields, "raw"),
        "Duration" if name.starts_with("apimachinery.pkg.apis.meta.") => {
            let nanos = fields.get("duration").and_then(Value::as_i64).unwrap_or(0);
            Value::String(format!("{}s", nanos as f64 / 1e9))
        }
        _ => Value::Object(fields),
    })
}

/// The schema package of a group (`batch` → `api.batch`, core → `api.core`).
fn package(group: &str) -> String {
    match group {
        "" => "api.core".to_owned(),
        "apiextensions.k8s.io" => "apiextensions_apiserver.pkg.apis.apiextensions".to_owned(),
        "apiregistration.k8s.io" => "kube_aggregator.pkg.apis.apiregistration".to_owned(),
        "internal.apiserver.k8s.io" => "api.apiserverinternal".to_owned(),
        "meta.k8s.io" => "apimachinery.pkg.apis.meta".to_owned(),
        other => format!("api.{}", other.split('.').next().unwrap_or(other)),
    }
}

/// Decodes a protobuf body (`k8s\0` + `runtime.Unknown`) into the JSON object it carries, with its
/// `apiVersion` and `kind`. Anything malformed is upstream-shaped 400.
pub fn decode(body: &[u8]) -> Result<Value, Status> {
    let bad = |why: String| Status::bad_request(format!("unable to decode protobuf body: {why}"));
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        Status::bad_request(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
        )
    })?;
    let unknown = decode_fields("apimachinery.pkg.runtime.Unknown", envelope, 0).map_err(bad)?;
    let api_version = unknown
        .get("typeMeta")
        .and_then(|t| t.get("apiVersion"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = unknown
        .get("typeMeta")
        .and_then(|t| t.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let message = format!("{}.{version}.{kind}", package(group));
    if !schema().contains_key(message.as_str()) {
        return Err(Status::bad_request(format!(
            "no kind {kind:?} is registered for version {api_version:?}"
        )));
    }
    let raw = unknown
        .get("raw")
        .and_then(Value::as_str)
        .and_then(|b| BASE64.decode(b.as_bytes()).ok());
    let decoded = decode_message(&message, &raw.unwrap_or_default(), 0).map_err(bad)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version.to_owned()));
    object.insert("kind".to_owned(), Value::String(kind.to_owned()));
    if let Value::Object(fields) = decoded {
        object.extend(fields);
    }
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes_field(tag: u64, data: &[u8], out: &mut Vec<u8>) {
        varint(tag << 3 | 2, out);
        varint(data.len() as u64, out);
        out.extend_from_slice(data);
    }

    fn varint_field(tag: u64, v: u64, out: &mut Vec<u8>) {
        varint(tag << 3, out);
        varint(v, out);
    }

    /// What `kubectl create job hello --image=busybox` sends (same fields, hand-encoded).
    fn job_body() -> Vec<u8> {
        let mut time = Vec::new();
        varint_field(1, ZERO_TIME_SECONDS as u64, &mut time);
        let mut meta = Vec::new();
        bytes_field(1, b"hello", &mut meta);
        bytes_field(8, &time, &mut meta);
        let mut label = Vec::new();
        bytes_field(1, b"app", &mut label);
        bytes_field(2, b"web", &mut label);
        bytes_field(11, &label, &mut meta);
        let mut quantity = Vec::new();
        bytes_field(1, b"100m", &mut quantity);
        let mut limit = Vec::new();
        bytes_field(1, b"cpu", &mut limit);
        bytes_field(2, &quantity, &mut limit);
        let mut resources = Vec::new();
        bytes_field(1, &limit, &mut resources);
        let mut container = Vec::new();
        bytes_field(1, b"hello", &mut container);
        bytes_field(2, b"busybox", &mut container);
        bytes_field(8, &resources, &mut container);
        let mut pod_spec = Vec::new();
        bytes_field(2, &container, &mut pod_spec);
        bytes_field(3, b"Never", &mut pod_spec);
        let mut template = Vec::new();
        bytes_field(2, &pod_spec, &mut template);
        let mut spec = Vec::new();
        bytes_field(6, &template, &mut spec);
        varint_field(7, u64::MAX, &mut spec); // backoffLimit: -1 as int32 sign-extended
        let mut job = Vec::new();
        bytes_field(1, &meta, &mut job);
        bytes_field(2, &spec, &mut job);
        let mut type_meta = Vec::new();
        bytes_field(1, b"batch/v1", &mut type_meta);
        bytes_field(2, b"Job", &mut type_meta);
        let mut unknown = Vec::new();
        bytes_field(1, &type_meta, &mut unknown);
        bytes_field(2, &job, &mut unknown);
        let mut body = MAGIC.to_vec();
        body.extend(unknown);
        body
    }

    #[test]
    fn decodes_a_kubectl_job() {
        let job = decode(&job_body()).unwrap();
        assert_eq!(
            job,
            serde_json::json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "hello", "creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {
                    "template": {"spec": {
                        "containers": [{"name": "hello", "image": "busybox", "resources": {"limits": {"cpu": "100m"}}}],
                        "restartPolicy": "Never",
                    }},
                    "backoffLimit": -1,
                },
            })
        );
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        let mut body = job_body();
        body.truncate(body.len() - 3);
        assert_eq!(decode(&body).unwrap_err().code, 400);
        for len in 0..job_body().len() {
            let _ = decode(&job_body()[..len]);
        }
        let mut unknown_kind = MAGIC.to_vec();
        let mut type_meta = Vec::new();
        bytes_field(1, b"batch/v1", &mut type_meta);
        bytes_field(2, b"Nope", &mut type_meta);
        bytes_field(1, &type_meta, &mut unknown_kind);
        assert!(
            decode(&unknown_kind)
                .unwrap_err()
                .message
                .contains("no kind \"Nope\"")
        );
    }

    #[test]
    fn schema_covers_common_built_ins() {
        for name in [
            "api.core.v1.ConfigMap",
            "api.core.v1.Namespace",
            "api.apps.v1.Deployment",
            "api.core.v1.Secret",
        ] {
            assert!(schema().contains_key(name), "{name}");
        }
        let meta = &schema()["apimachinery.pkg.apis.meta.v1.ObjectMeta"];
        assert!(meta.iter().any(|f| f.json == "creationTimestamp" && f.tag == 8));
        let pod_status = &schema()["api.core.v1.PodStatus"];
        assert!(pod_status.iter().any(|f| f.json == "podIP"));
    }
}
