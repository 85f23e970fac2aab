//! Content negotiation: what a response is encoded as (`Accept`) and how a request body is decoded
//! (`Content-Type`), as `k8s.io/apiserver/pkg/endpoints/handlers/negotiation` decides.
//!
//! Served: JSON (default), YAML, and the `meta.k8s.io/v1` transforms `as=Table` (what `kubectl get`
//! asks for) and `as=PartialObjectMetadata[List]` (metadata-only clients). Protobuf request bodies of
//! built-in kinds are decoded ([`crate::protobuf`], what kubectl's typed clients send); responses are
//! never protobuf: an `Accept` that allows only protobuf is answered 406.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::Value;

use crate::api::status::Status;

/// Media types the fake encodes and decodes.
pub const SUPPORTED_MEDIA_TYPES: &[&str] = &["application/json", "application/yaml"];

/// The serialisation of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
}

/// A server-side transformation of the response object requested through `Accept` parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// The object as stored.
    None,
    /// `as=Table;g=meta.k8s.io;v=v1`.
    Table,
    /// `as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (or `...List` for lists).
    PartialObjectMetadata,
}

/// The negotiated response format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputFormat {
    /// How to serialise.
    pub encoding: Encoding,
    /// What to serialise.
    pub transform: Transform,
}

impl OutputFormat {
    /// Plain JSON.
    pub const JSON: Self = Self {
        encoding: Encoding::Json,
        transform: Transform::None,
    };

    /// The `Content-Type` of a response in this format.
    pub fn content_type(&self) -> &'static str {
        match (self.encoding, self.transform) {
            (Encoding::Json, Transform::Table) => "application/json;as=Table;v=v1;g=meta.k8s.io",
            (Encoding::Json, Transform::PartialObjectMetadata) => {
                "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
            }
            (Encoding::Json, Transform::None) => "application/json",
            (Encoding::Yaml, Transform::Table) => "application/yaml;as=Table;v=v1;g=meta.k8s.io",
            (Encoding::Yaml, Transform::PartialObjectMetadata) => {
                "application/yaml;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
            }
            (Encoding::Yaml, Transform::None) => "application/yaml",
        }
    }

    /// Serialises `value` (JSON ends with a newline, as Go's `json.Encoder` writes).
    pub fn encode(&self, value: &Value) -> Bytes {
        match self.encoding {
            Encoding::Json => {
                let mut body = serde_json::to_vec(value).unwrap_or_default();
                body.push(b'\n');
                body.into()
            }
            Encoding::Yaml => crate::api::yaml::encode(value).into(),
        }
    }

    /// A response with `code` and `value` in this format.
    pub fn respond(&self, code: StatusCode, value: &Value) -> Response {
        let mut response = (code, self.encode(value)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type()),
        );
        response
    }

    /// An error response: the Status in this format's encoding (never transformed).
    pub fn error(&self, status: Status) -> Response {
        let plain = Self {
            encoding: self.encoding,
            transform: Transform::None,
        };
        let mut response = plain.respond(status.http_status(), &status.to_value());
        // For the audit log's `responseStatus` (as `Status`'s own `IntoResponse` does).
        response.extensions_mut().insert(status);
        response
    }
}

struct MediaRange<'a> {
    essence: String,
    params: Vec<(String, &'a str)>,
    quality: f32,
}

fn parse_accept(accept: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<MediaRange<'_>> = accept
        .split(',')
        .filter_map(|clause| {
            let mut pieces = clause.split(';');
            let essence = pieces.next()?.trim().to_ascii_lowercase();
            if essence.is_empty() {
                return None;
            }
            let mut params = Vec::new();
            let mut quality = 1.0;
            for piece in pieces {
                let Some((k, v)) = piece.split_once('=') else {
                    continue;
                };
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"'));
                if k == "q" {
                    quality = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(MediaRange {
                essence,
                params,
                quality,
            })
        })
        .collect();
    // Stable: equal qualities keep the client's order.
    ranges.sort_by(|a, b| b.quality.total_cmp(&a.quality));
    ranges
}

/// Which `as=` transforms a verb's response may take; clauses asking for others are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transforms {
    /// Reads (`get`, `list`, `watch`): `Table` and `PartialObjectMetadata[List]`.
    All,
    /// Writes that answer the written object (`create`, `update`, `patch`): `PartialObjectMetadata`, as
    /// upstream's `transformResponseObject` gives it to every verb (metadata-only clients patch too).
    PartialObjectMetadata,
    /// Responses that are never transformed (scale, deletes, ...).
    None,
}

/// Negotiates the response format from `Accept`; `transforms` says which `as=` clauses may be honoured
/// (others are skipped). No acceptable clause → 406.
pub fn negotiate_output(headers: &HeaderMap, transforms: Transforms) -> Result<OutputFormat, Status> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(OutputFormat::JSON);
    };
    if accept.trim().is_empty() {
        return Ok(OutputFormat::JSON);
    }
    for range in parse_accept(accept) {
        if range.quality <= 0.0 {
            continue;
        }
        let encoding = match range.essence.as_str() {
            "application/json" | "application/*" | "*/*" => Encoding::Json,
            "application/yaml" => Encoding::Yaml,
            _ => continue,
        };
        let param = |name: &str| range.params.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
        let transform = match param("as") {
            None => Transform::None,
            Some(as_kind) => {
                if transforms == Transforms::None
                    || param("g") != Some("meta.k8s.io")
                    || param("v") != Some("v1")
                {
                    continue;
                }
                match as_kind {
                    "Table" if transforms == Transforms::All => Transform::Table,
                    "PartialObjectMetadata" | "PartialObjectMetadataList" => Transform::PartialObjectMetadata,
                    _ => continue,
                }
            }
        };
        return Ok(OutputFormat { encoding, transform });
    }
    Err(Status::not_acceptable(SUPPORTED_MEDIA_TYPES))
}

/// The media type of a request body without parameters, lower-cased (`None` when absent).
pub fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    (!essence.is_empty()).then_some(essence)
}

/// The media type a create/update body is decoded as: its `Content-Type` essence, or JSON when the header is
/// absent or empty. Upstream's `NegotiateInputSerializerForMediaType` takes the first supported media type
/// (JSON) for an empty `Content-Type`, and the official Python client relies on it: it sends JSON bodies
/// without the header. A header that is present but has no media type (`;charset=utf-8`) stays `None` (415).
/// Not for PATCH: its type comes from `Content-Type` alone ([`super::patch::PatchType::from_content_type`]).
pub fn input_media_type(headers: &HeaderMap) -> Option<String> {
    match headers.get(header::CONTENT_TYPE) {
        None => Some("application/json".to_string()),
        Some(value) if value.as_bytes().trim_ascii().is_empty() => Some("application/json".to_string()),
        Some(_) => content_type(headers),
    }
}

/// Media types of request bodies for built-in resources (custom resources: no protobuf), as upstream
/// lists them in 415 errors.
pub const BUILTIN_BODY_MEDIA_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// Decodes a create/update body by its `Content-Type` (JSON, YAML, and protobuf for built-in
/// resources; none or an empty one is JSON, [`input_media_type`]); other types are 415, unparsable bodies
/// 400 with messages shaped like upstream's decoder errors.
pub fn decode_body(headers: &HeaderMap, body: &[u8], custom_resource: bool) -> Result<Value, Status> {
    let accepted = if custom_resource {
        SUPPORTED_MEDIA_TYPES
    } else {
        BUILTIN_BODY_MEDIA_TYPES
    };
    let value = match input_media_type(headers).as_deref() {
        Some("application/json") => parse_json(body)
            .map_err(|e| Status::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?,
        Some("application/yaml") => decode_yaml(body)?,
        Some("application/vnd.kubernetes.protobuf") if !custom_resource => {
            crate::protobuf::decode_object(body).map_err(|e| Status::bad_request(e.to_string()))?
        }
        _ => return Err(Status::unsupported_media_type(accepted)),
    };
    require_object(value)
}

/// The deepest nesting of a JSON body, as Go's `encoding/json` (and so kube-apiserver) allows it.
pub const MAX_JSON_DEPTH: usize = 10_000;

/// Stack a thread needs per level of nesting to take a body through every pass of the write path
/// (decoding, field validation, field sets, merges, encoding, dropping), with room to spare.
const STACK_BYTES_PER_LEVEL: usize = 2 * 1024;

/// The worker stack size the binary runs with, so that bodies as deep as [`MAX_JSON_DEPTH`] fit.
pub const DEEP_BODY_STACK_BYTES: usize = MAX_JSON_DEPTH * STACK_BYTES_PER_LEVEL + (8 << 20);

/// Why a JSON body was not parsed.
#[derive(Debug, thiserror::Error)]
pub enum JsonBodyError {
    /// Nested deeper than [`MAX_JSON_DEPTH`] (Go's `exceeded max depth`).
    #[error("exceeded max depth")]
    TooDeep,
    /// Nested deeper than the stack of the thread handling it can take (an in-process server on a small
    /// stack; the binary's workers are sized for [`MAX_JSON_DEPTH`]).
    #[error("exceeded max depth for this server's stack ({0} levels)")]
    TooDeepForStack(usize),
    /// Not JSON.
    #[error(transparent)]
    Syntax(#[from] serde_json::Error),
}

/// Parses a JSON body: first a linear scan of its nesting (outside strings), then a parse without
/// serde_json's fixed 128-level limit when the thread's remaining stack can take that depth. A body
/// nested deeper than upstream's 10,000 levels is refused as Go refuses it.
pub fn parse_json(body: &[u8]) -> Result<Value, JsonBodyError> {
    let depth = json_depth(body);
    if depth > MAX_JSON_DEPTH {
        return Err(JsonBodyError::TooDeep);
    }
    if depth > 64 {
        let remaining = stacker::remaining_stack().unwrap_or(0);
        if remaining < depth.saturating_mul(STACK_BYTES_PER_LEVEL) + (256 << 10) {
            return Err(JsonBodyError::TooDeepForStack(remaining / STACK_BYTES_PER_LEVEL));
        }
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    deserializer.disable_recursion_limit();
    let value = <Value as serde::Deserialize>::deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// The deepest nesting of arrays and objects in `body`, found without recursion (brackets inside
/// strings do not count; malformed input just yields some number, the parser then reports it).
pub fn json_depth(body: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in body {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses YAML into JSON (`error converting YAML to JSON` on failure, as sigs.k8s.io/yaml says), as
/// deep as go-yaml allows (10,000 levels) when this thread's stack can take the passes that follow
/// (as [`parse_json`]), else as deep as it can.
pub fn decode_yaml(body: &[u8]) -> Result<Value, Status> {
    let remaining = stacker::remaining_stack().unwrap_or(0);
    let max_depth = remaining.saturating_sub(256 << 10) / STACK_BYTES_PER_LEVEL;
    crate::api::yaml::decode_with_max_depth(body, max_depth.max(64))
        .map_err(|e| Status::bad_request(format!("error converting YAML to JSON: yaml: {e}")))
}

/// Rejects bodies that are not JSON objects with the message Go's decoder gives for them.
pub fn require_object(value: Value) -> Result<Value, Status> {
    let found = match &value {
        Value::Object(_) => return Ok(value),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    };
    Err(Status::bad_request(format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {found} into Go value of type \
         struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn json_depth_counts_brackets_outside_strings() {
        assert_eq!(json_depth(b"{}"), 1);
        assert_eq!(json_depth(br#"{"a": [[1], {"b": "[[[\"{"}]}"#), 3);
        assert_eq!(json_depth(nested(10_000).as_bytes()), 10_000);
        assert_eq!(json_depth(b"\"not json"), 0);
    }

    #[test]
    fn json_bodies_nest_to_upstreams_limit_where_the_stack_allows() {
        assert!(matches!(
            parse_json(nested(10_001).as_bytes()),
            Err(JsonBodyError::TooDeep)
        ));
        assert_eq!(
            parse_json(nested(10_001).as_bytes()).unwrap_err().to_string(),
            "exceeded max depth"
        );
        // Past serde_json's own 128 levels.
        assert!(parse_json(nested(300).as_bytes()).is_ok());
        // A test thread's small stack cannot take 10,000 levels: refused, not overflowed.
        assert!(matches!(
            parse_json(nested(10_000).as_bytes()),
            Err(JsonBodyError::TooDeepForStack(_))
        ));
        // A thread with the binary's worker stack can.
        let parsed = std::thread::Builder::new()
            .stack_size(DEEP_BODY_STACK_BYTES)
            .spawn(|| {
                parse_json(nested(10_000).as_bytes()).map(|value| json_depth(value.to_string().as_bytes()))
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(parsed.unwrap(), 10_000);
        assert!(matches!(parse_json(b"[1,]"), Err(JsonBodyError::Syntax(_))));
    }

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn defaults_to_json() {
        assert_eq!(
            negotiate_output(&HeaderMap::new(), Transforms::All).unwrap(),
            OutputFormat::JSON
        );
        assert_eq!(
            negotiate_output(&accept("*/*"), Transforms::All).unwrap(),
            OutputFormat::JSON
        );
    }

    #[test]
    fn kubectl_table_accept_header_selects_table() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        let format = negotiate_output(&accept(kubectl), Transforms::All).unwrap();
        assert_eq!(format.transform, Transform::Table);
        assert_eq!(
            format.content_type(),
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        );
        // Writes never answer tables.
        for transforms in [Transforms::PartialObjectMetadata, Transforms::None] {
            assert_eq!(
                negotiate_output(&accept(kubectl), transforms).unwrap(),
                OutputFormat::JSON
            );
        }
    }

    #[test]
    fn protobuf_first_falls_back_to_json_and_protobuf_only_is_406() {
        let client_go = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(
            negotiate_output(&accept(client_go), Transforms::All).unwrap(),
            OutputFormat::JSON
        );
        let err =
            negotiate_output(&accept("application/vnd.kubernetes.protobuf"), Transforms::All).unwrap_err();
        assert_eq!(err.code, 406);
        assert_eq!(
            err.message,
            "only the following media types are accepted: application/json, application/yaml"
        );
    }

    #[test]
    fn yaml_and_quality_ordering() {
        assert_eq!(
            negotiate_output(&accept("application/yaml"), Transforms::All)
                .unwrap()
                .encoding,
            Encoding::Yaml
        );
        let format = negotiate_output(
            &accept("application/json;q=0.5, application/yaml"),
            Transforms::All,
        )
        .unwrap();
        assert_eq!(format.encoding, Encoding::Yaml);
        let meta = negotiate_output(
            &accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            Transforms::All,
        );
        assert_eq!(meta.unwrap().transform, Transform::PartialObjectMetadata);
        // Writes answer metadata-only clients too (a PATCH from a metadata client); scale and deletes
        // do not, so the only clause is not acceptable.
        let metadata_only = accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
        assert_eq!(
            negotiate_output(&metadata_only, Transforms::PartialObjectMetadata)
                .unwrap()
                .transform,
            Transform::PartialObjectMetadata
        );
        assert_eq!(
            negotiate_output(&metadata_only, Transforms::None)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn body_decoding_by_content_type() {
        let mut headers = HeaderMap::new();
        // No Content-Type, or an empty one, is JSON (what the official Python client sends).
        assert_eq!(decode_body(&headers, br#"{"a":1}"#, false).unwrap()["a"], 1);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(""));
        assert_eq!(decode_body(&headers, br#"{"a":2}"#, true).unwrap()["a"], 2);
        assert_eq!(
            decode_body(&headers, b"a: 1\n", false).unwrap_err().code,
            400,
            "an empty Content-Type is JSON, not YAML"
        );
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert_eq!(decode_body(&headers, b"{}", false).unwrap_err().code, 415);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(";charset=utf-8"));
        assert_eq!(decode_body(&headers, b"{}", false).unwrap_err().code, 415);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert_eq!(decode_body(&headers, br#"{"a":1}"#, false).unwrap()["a"], 1);
        let err = decode_body(&headers, b"{nope", false).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("couldn't get version/kind; json parse error: "),
            "{}",
            err.message
        );
        assert!(
            decode_body(&headers, b"[1]", false)
                .unwrap_err()
                .message
                .contains("cannot unmarshal array")
        );
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/yaml"));
        assert_eq!(
            decode_body(&headers, b"metadata:\n  name: x\n", false).unwrap()["metadata"]["name"],
            "x"
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/vnd.kubernetes.protobuf"),
        );
        let err = decode_body(&headers, b"k8s\0", true).unwrap_err();
        assert_eq!(
            err.message,
            "the body of the request was in an unknown format - accepted media types include: application/json, \
             application/yaml"
        );
    }
}
