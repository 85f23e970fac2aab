//! What a client saw, in a form that snapshots well: the request line, the status line, the headers that
//! carry meaning, and the body (JSON when it is JSON, text otherwise), with only truly variable values
//! redacted.
//!
//! Redacted: object `uid`s and any other random UUID value (user UIDs such as `admin-uid` are kept), `resourceVersion`s, timestamps (`creationTimestamp`, lease `renewTime` /
//! `acquireTime`, condition `lastTransitionTime`), `managedFields`, list `continue` tokens, the random
//! suffix of a lease's `holderIdentity`, audit IDs, and ephemeral ports of loopback addresses
//! (`127.0.0.2:41234` → `127.0.0.2:[port]`). Server IDs, status codes, reasons and messages are kept:
//! they are what a test asserts.

use std::collections::BTreeMap;

use http::{HeaderMap, StatusCode};
use serde::Serialize;
use serde_json::Value;

/// Response headers kept in an [`Exchange`] (lowercase): the ones whose value means something to a
/// client. `date`, `content-length` and connection-level headers are left out.
pub const MEANINGFUL_HEADERS: &[&str] = &[
    "audit-id",
    "cache-control",
    "content-type",
    "etag",
    "location",
    "retry-after",
    "vary",
    "warning",
    "www-authenticate",
    "x-content-type-options",
    "x-kubernetes-peer-proxied",
];

/// JSON keys whose values are replaced by `[key]` wherever they appear.
const REDACTED_KEYS: &[&str] = &[
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "renewTime",
    "acquireTime",
    "lastTransitionTime",
    "continue",
];

/// A response body as snapshotted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ExchangeBody {
    /// A JSON document (redacted).
    Json(Value),
    /// Anything else, as UTF-8 text (ports redacted).
    Text(String),
}

/// One request and what the client saw. Two exchanges are equal when their snapshots are (request
/// line, status, kept headers and redacted body); unredacted values are not compared.
#[derive(Clone, Serialize)]
pub struct Exchange {
    /// `METHOD path (via server)`.
    pub request: String,
    /// The status line without the protocol version, e.g. `404 Not Found`.
    pub status: String,
    /// [`MEANINGFUL_HEADERS`] present in the response; several values of one name are joined by `, `.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: ExchangeBody,
    #[serde(skip)]
    code: u16,
    #[serde(skip)]
    raw: Vec<u8>,
    #[serde(skip)]
    raw_headers: HeaderMap,
}

impl PartialEq for Exchange {
    fn eq(&self, other: &Self) -> bool {
        (&self.request, &self.status, &self.headers, &self.body)
            == (&other.request, &other.status, &other.headers, &other.body)
    }
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("request", &self.request)
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("body", &self.body)
            .finish()
    }
}

impl Exchange {
    /// Builds an exchange from a response head and its complete body.
    pub fn new(request: String, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Self {
        let mut kept = BTreeMap::new();
        for name in MEANINGFUL_HEADERS {
            let values: Vec<String> = headers
                .get_all(*name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect();
            if values.is_empty() {
                continue;
            }
            let value = if *name == "audit-id" {
                "[audit-id]".to_owned()
            } else {
                values.join(", ")
            };
            kept.insert((*name).to_owned(), redact_text(&value));
        }
        let is_json = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/json") || ct.contains("+json"));
        let body_value = if is_json {
            serde_json::from_slice::<Value>(body).ok()
        } else {
            None
        };
        let body_out = match body_value {
            Some(value) => ExchangeBody::Json(redact_json(value)),
            None => ExchangeBody::Text(redact_text(&String::from_utf8_lossy(body))),
        };
        Self {
            request: redact_text(&request),
            status: format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""))
                .trim_end()
                .to_owned(),
            headers: kept,
            body: body_out,
            code: status.as_u16(),
            raw: body.to_vec(),
            raw_headers: headers.clone(),
        }
    }

    /// The status code.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The (redacted) JSON body, or `Null` when the body is not JSON.
    pub fn json(&self) -> &Value {
        match &self.body {
            ExchangeBody::Json(v) => v,
            ExchangeBody::Text(_) => &Value::Null,
        }
    }

    /// The unredacted body as text.
    pub fn raw_text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }

    /// The unredacted body parsed as JSON, or `Null`.
    pub fn raw_json(&self) -> Value {
        serde_json::from_slice(&self.raw).unwrap_or(Value::Null)
    }

    /// Every value of response header `name`, unredacted (any header, not only the kept ones).
    pub fn raw_header(&self, name: &str) -> Vec<String> {
        self.raw_headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    /// A kept header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }

    /// This exchange without its request line, to compare what two servers answered.
    pub fn response(&self) -> (String, BTreeMap<String, String>, ExchangeBody) {
        (self.status.clone(), self.headers.clone(), self.body.clone())
    }
}

/// Applies the JSON redactions (see the module docs) to `value`.
pub fn redact_json(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let value = if key == "uid" {
                        match value.as_str() {
                            Some(s) if looks_like_uuid(s) => Value::String("[uid]".to_owned()),
                            _ => value,
                        }
                    } else if REDACTED_KEYS.contains(&key.as_str()) && !value.is_null() {
                        if value.as_str() == Some("") {
                            value
                        } else {
                            Value::String(format!("[{key}]"))
                        }
                    } else if key == "holderIdentity" {
                        match value.as_str().and_then(|s| s.split_once('_')) {
                            Some((id, _)) => Value::String(format!("{id}_[uuid]")),
                            None => value,
                        }
                    } else {
                        redact_json(value)
                    };
                    (key, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(redact_json).collect()),
        // Random UUIDs anywhere (a Job's generated selector and labels carry its uid).
        Value::String(s) if looks_like_uuid(&s) => Value::String("[uid]".to_owned()),
        Value::String(s) => Value::String(redact_text(&s)),
        other => other,
    }
}

/// Whether `s` is a random UUID (object UIDs are; user UIDs such as `admin-uid` are not and are kept).
fn looks_like_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// Replaces the port of every `127.a.b.c:port` in `text` by `[port]`.
pub fn redact_text(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"127.") && (i == 0 || !bytes[i - 1].is_ascii_digit()) {
            // Scan an IPv4 address starting at i.
            let mut j = i;
            let mut dots = 0;
            while j < bytes.len() && (bytes[j].is_ascii_digit() || (bytes[j] == b'.' && dots < 3)) {
                if bytes[j] == b'.' {
                    dots += 1;
                }
                j += 1;
            }
            if dots == 3 && j < bytes.len() && bytes[j] == b':' {
                let mut k = j + 1;
                while k < bytes.len() && bytes[k].is_ascii_digit() {
                    k += 1;
                }
                if k > j + 1 {
                    out.push_str(&text[i..j]);
                    out.push_str(":[port]");
                    i = k;
                    continue;
                }
            }
            out.push_str(&text[i..j]);
            i = j;
            continue;
        }
        let ch = text[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_of_loopback_addresses_are_redacted_and_nothing_else() {
        assert_eq!(
            redact_text("dial tcp 127.0.0.2:41234: refused; https://127.0.0.10:6443/x 10.0.0.1:80"),
            "dial tcp 127.0.0.2:[port]: refused; https://127.0.0.10:[port]/x 10.0.0.1:80"
        );
        assert_eq!(redact_text("version 1127.0.0.1:5"), "version 1127.0.0.1:5");
        assert_eq!(redact_text("127.0.0.1 no port"), "127.0.0.1 no port");
        assert_eq!(redact_text("ünïcode 127.0.0.1:1"), "ünïcode 127.0.0.1:[port]");
    }

    #[test]
    fn variable_fields_are_redacted_but_meaning_is_kept() {
        let object = json!({
            "metadata": {"name": "x", "uid": "0b7c4d1e-2f3a-4b5c-8d9e-0123456789ab", "resourceVersion": "17", "creationTimestamp": "2024",
                         "annotations": {"kubernetes.io/peer-advertise-address": "127.0.0.1:5555"}},
            "spec": {"holderIdentity": "apiserver-abc_5f0e", "renewTime": "2024", "leaseDurationSeconds": 3600},
            "items": [{"metadata": {"uid": "9"}}],
            "user": {"uid": "admin-uid"},
            "status": {"conditions": [{"lastTransitionTime": "t", "type": "Ready"}]},
            "listMeta": {"continue": ""}
        });
        assert_eq!(
            redact_json(object),
            json!({
                "metadata": {"name": "x", "uid": "[uid]", "resourceVersion": "[resourceVersion]",
                             "creationTimestamp": "[creationTimestamp]",
                             "annotations": {"kubernetes.io/peer-advertise-address": "127.0.0.1:[port]"}},
                "spec": {"holderIdentity": "apiserver-abc_[uuid]", "renewTime": "[renewTime]",
                         "leaseDurationSeconds": 3600},
                "items": [{"metadata": {"uid": "9"}}],
                "user": {"uid": "admin-uid"},
                "status": {"conditions": [{"lastTransitionTime": "[lastTransitionTime]", "type": "Ready"}]},
                "listMeta": {"continue": ""}
            })
        );
    }

    #[test]
    fn exchange_keeps_meaningful_headers_and_parses_json_bodies() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        headers.insert("date", "Mon".parse().unwrap());
        headers.insert("audit-id", "0f3a".parse().unwrap());
        let exchange = Exchange::new(
            "GET /x (via b)".into(),
            StatusCode::SERVICE_UNAVAILABLE,
            &headers,
            br#"{"kind":"Status","code":503}"#,
        );
        assert_eq!(exchange.status, "503 Service Unavailable");
        assert_eq!(exchange.code(), 503);
        assert_eq!(exchange.header("Audit-Id"), Some("[audit-id]"));
        assert_eq!(exchange.header("date"), None);
        assert_eq!(exchange.json()["kind"], "Status");
        let text = Exchange::new(
            "GET /y (via b)".into(),
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            b"404 page not found\n",
        );
        assert_eq!(text.body, ExchangeBody::Text("404 page not found\n".into()));
        assert_eq!(text.json(), &Value::Null);
    }
}
