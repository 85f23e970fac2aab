//! `/openapi/v2` and `/openapi/v3`: kube-apiserver's OpenAPI documents, which kubectl needs before
//! `apply`, `create -f`, `diff` and `explain` do anything.
//!
//! As kube-openapi serves them:
//! - `/openapi/v2` in JSON or, when asked for
//!   `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` (what kubectl asks for), as gnostic
//!   protobuf labelled `application/com.github.proto-openapi.spec.v2.v1.0+protobuf`; an `ETag` (quoted upper-case hex SHA-512 of the body), `If-None-Match` → 304, and 406
//!   for a media type it cannot produce;
//! - `/openapi/v3`: `{"paths": {"apis/batch/v1": {"serverRelativeURL": "/openapi/v3/apis/batch/v1?hash=…"}}}`
//!   listing every served group-version;
//! - `/openapi/v3/apis/<group>/<version>` (`/openapi/v3/api/v1`): that group-version's document; with
//!   the current `hash` it is immutable (`Cache-Control: public, immutable`, a year's `Expires`), with
//!   a stale one a 301 to the current URL.
//!
//! Documents are built from what the server serves (its Kubernetes minor, `--runtime-config`,
//! `--feature-gates`), once per served API set.

pub(crate) mod custom;
pub mod definitions;
pub(crate) mod document;
pub(crate) mod paths;
pub(crate) mod protobuf;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use sha2::{Digest, Sha512};

use crate::api::catalog::{KubeVersion, ServedApis};

/// The media type kubectl asks for the v2 document in (kube-openapi calls it deprecated; `@` is not a
/// token character, so no response carries it).
pub const V2_PROTOBUF_REQUESTED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The protobuf media type kube-openapi accepts and answers with (Go's `mime.ParseMediaType`, which
/// client-go runs on the response, rejects the `@` form).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// One rendered document and its ETag (unquoted).
#[derive(Debug)]
struct Rendered {
    body: Bytes,
    etag: String,
}

impl Rendered {
    fn new(body: Vec<u8>) -> Self {
        let etag = data_encoding::HEXUPPER.encode(&Sha512::digest(&body));
        Rendered {
            body: Bytes::from(body),
            etag,
        }
    }
}

/// The documents of one served API set, each rendered on first use.
#[derive(Debug)]
struct Documents {
    version: KubeVersion,
    served: Arc<ServedApis>,
    v2: OnceLock<serde_json::Value>,
    v2_json: OnceLock<Rendered>,
    v2_protobuf: OnceLock<Rendered>,
    /// Keyed by the v3 discovery path (`api/v1`, `apis/batch/v1`).
    v3: OnceLock<BTreeMap<String, Rendered>>,
}

impl Documents {
    fn v2(&self) -> &serde_json::Value {
        self.v2.get_or_init(|| document::v2(self.version, &self.served))
    }

    fn v2_json(&self) -> &Rendered {
        self.v2_json
            .get_or_init(|| Rendered::new(serde_json::to_vec(self.v2()).unwrap_or_default()))
    }

    fn v2_protobuf(&self) -> &Rendered {
        self.v2_protobuf
            .get_or_init(|| Rendered::new(protobuf::encode_document(self.v2())))
    }

    fn v3(&self) -> &BTreeMap<String, Rendered> {
        self.v3.get_or_init(|| {
            let mut out = BTreeMap::new();
            for group in &self.served.groups {
                for version in &group.versions {
                    let key = paths::prefix(&group.name, &version.version)
                        .trim_start_matches('/')
                        .to_owned();
                    let doc = document::v3(self.version, &group.name, &version.version, &version.resources);
                    out.insert(key, Rendered::new(serde_json::to_vec(&doc).unwrap_or_default()));
                }
            }
            out
        })
    }
}

/// A server's OpenAPI endpoints, with the documents of its current API set cached.
#[derive(Debug, Default)]
pub struct OpenApiService {
    current: Mutex<Option<Arc<Documents>>>,
}

impl OpenApiService {
    /// The documents of `served` (rebuilt when the API set changes, e.g. a CRD is added).
    fn documents(&self, version: KubeVersion, served: &Arc<ServedApis>) -> Arc<Documents> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(docs) = current.as_ref()
            && docs.version == version
            && (Arc::ptr_eq(&docs.served, served) || docs.served == *served)
        {
            return docs.clone();
        }
        let docs = Arc::new(Documents {
            version,
            served: served.clone(),
            v2: OnceLock::new(),
            v2_json: OnceLock::new(),
            v2_protobuf: OnceLock::new(),
            v3: OnceLock::new(),
        });
        *current = Some(docs.clone());
        docs
    }

    /// Answers an OpenAPI request; `None` when `parts` is not one (the caller's router goes on).
    pub fn serve(
        &self,
        parts: &http::request::Parts,
        version: KubeVersion,
        served: &Arc<ServedApis>,
    ) -> Option<Response<Bytes>> {
        let path = parts.uri.path();
        let path = path.strip_prefix("/openapi/")?;
        if parts.method != Method::GET && parts.method != Method::HEAD {
            return None;
        }
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let if_none_match = parts
            .headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok());
        let response = match path.trim_end_matches('/') {
            "v2" => {
                let docs = self.documents(version, served);
                match negotiate_v2(accept) {
                    Some(V2Media::Json) => {
                        document_response(docs.v2_json(), "application/json", if_none_match)
                    }
                    Some(V2Media::Protobuf) => {
                        document_response(docs.v2_protobuf(), V2_PROTOBUF, if_none_match)
                    }
                    None => not_acceptable(),
                }
            }
            "v3" => {
                let docs = self.documents(version, served);
                let paths: serde_json::Map<String, serde_json::Value> = docs
                    .v3()
                    .iter()
                    .map(|(key, doc)| {
                        (
                            key.clone(),
                            serde_json::json!({"serverRelativeURL": relative_url(key, &doc.etag)}),
                        )
                    })
                    .collect();
                let body = serde_json::to_vec(&serde_json::json!({"paths": paths})).unwrap_or_default();
                plain(StatusCode::OK, "application/json", Bytes::from(body))
            }
            other => {
                let key = other.strip_prefix("v3/")?;
                let docs = self.documents(version, served);
                let Some(doc) = docs.v3().get(key) else {
                    return Some(crate::api::not_found::not_found_bytes());
                };
                if !accepts_json(accept) {
                    not_acceptable()
                } else {
                    let hash = form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
                        .find(|(k, _)| k == "hash")
                        .map(|(_, v)| v.into_owned())
                        .filter(|h| !h.is_empty());
                    match hash {
                        Some(hash) if hash != doc.etag => {
                            let mut response = plain(
                                StatusCode::MOVED_PERMANENTLY,
                                "text/html; charset=utf-8",
                                Bytes::new(),
                            );
                            if let Ok(location) = HeaderValue::from_str(&relative_url(key, &doc.etag)) {
                                response.headers_mut().insert(header::LOCATION, location);
                            }
                            response
                        }
                        Some(_) => {
                            let mut response = document_response(doc, "application/json", if_none_match);
                            let headers = response.headers_mut();
                            headers.insert(
                                header::CACHE_CONTROL,
                                HeaderValue::from_static("public, immutable"),
                            );
                            let expires = time::OffsetDateTime::now_utc() + time::Duration::days(365);
                            if let Ok(value) = HeaderValue::from_str(&http_date(expires)) {
                                headers.insert(header::EXPIRES, value);
                            }
                            response
                        }
                        None => document_response(doc, "application/json", if_none_match),
                    }
                }
            }
        };
        Some(if parts.method == Method::HEAD {
            response.map(|_| Bytes::new())
        } else {
            response
        })
    }
}

fn relative_url(key: &str, etag: &str) -> String {
    format!("/openapi/v3/{key}?hash={etag}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V2Media {
    Json,
    Protobuf,
}

/// The first acceptable clause of `accept` (kube-openapi honours the client's order).
fn negotiate_v2(accept: &str) -> Option<V2Media> {
    if accept.trim().is_empty() {
        return Some(V2Media::Json);
    }
    accept.split(',').find_map(|clause| {
        let media = clause.split(';').next().unwrap_or_default().trim();
        match media {
            V2_PROTOBUF | V2_PROTOBUF_REQUESTED => Some(V2Media::Protobuf),
            "application/json" | "application/*" | "*/*" => Some(V2Media::Json),
            _ => None,
        }
    })
}

fn accepts_json(accept: &str) -> bool {
    negotiate_v2(accept) == Some(V2Media::Json) || accept.trim().is_empty()
}

/// A document with its quoted ETag, or 304 when the client holds it.
fn document_response(
    doc: &Rendered,
    content_type: &'static str,
    if_none_match: Option<&str>,
) -> Response<Bytes> {
    let quoted = format!("\"{}\"", doc.etag);
    let fresh =
        if_none_match.is_some_and(|tags| tags.split(',').any(|t| t.trim() == quoted || t.trim() == "*"));
    let mut response = if fresh {
        let mut response = Response::new(Bytes::new());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        plain(StatusCode::OK, content_type, doc.body.clone())
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&quoted) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}

fn plain(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Bytes> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn not_acceptable() -> Response<Bytes> {
    plain(
        StatusCode::NOT_ACCEPTABLE,
        "text/plain; charset=utf-8",
        Bytes::new(),
    )
}

/// RFC 1123 date as Go's `time.RFC1123` writes it (`Mon, 02 Jan 2006 15:04:05 UTC`).
fn http_date(at: time::OffsetDateTime) -> String {
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] UTC"
    );
    at.format(&format).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, accept: Option<&str>) -> http::request::Parts {
        let mut builder = http::Request::get(uri);
        if let Some(accept) = accept {
            builder = builder.header(header::ACCEPT, accept);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn served() -> (KubeVersion, Arc<ServedApis>) {
        let version = KubeVersion { major: 1, minor: 36 };
        let served = ServedApis::builtin(version, &Default::default(), &Default::default()).unwrap();
        (version, Arc::new(served))
    }

    #[test]
    fn v2_negotiates_protobuf_json_and_406() {
        let (version, served) = served();
        let service = OpenApiService::default();
        let proto = service
            .serve(
                &request("/openapi/v2", Some(V2_PROTOBUF_REQUESTED)),
                version,
                &served,
            )
            .unwrap();
        assert_eq!(proto.status(), StatusCode::OK);
        assert_eq!(proto.headers()[header::CONTENT_TYPE], V2_PROTOBUF);
        let json = service
            .serve(
                &request("/openapi/v2", Some("application/json")),
                version,
                &served,
            )
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(json.body()).unwrap();
        assert_eq!(doc["swagger"], "2.0");
        assert_ne!(proto.headers()[header::ETAG], json.headers()[header::ETAG]);
        let refused = service
            .serve(&request("/openapi/v2", Some("text/html")), version, &served)
            .unwrap();
        assert_eq!(refused.status(), StatusCode::NOT_ACCEPTABLE);
        let mut cached = request("/openapi/v2", Some("application/json"));
        cached
            .headers
            .insert(header::IF_NONE_MATCH, json.headers()[header::ETAG].clone());
        assert_eq!(
            service.serve(&cached, version, &served).unwrap().status(),
            StatusCode::NOT_MODIFIED
        );
    }

    #[test]
    fn v3_root_lists_group_versions_with_hashes_that_resolve() {
        let (version, served) = served();
        let service = OpenApiService::default();
        let root = service
            .serve(&request("/openapi/v3", None), version, &served)
            .unwrap();
        let root: serde_json::Value = serde_json::from_slice(root.body()).unwrap();
        let url = root["paths"]["apis/batch/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(url.starts_with("/openapi/v3/apis/batch/v1?hash="), "{url}");
        assert!(root["paths"]["api/v1"].is_object());
        assert_eq!(
            root["paths"].as_object().unwrap().len(),
            served.group_version_count()
        );

        let current = service
            .serve(&request(&url, Some("application/json")), version, &served)
            .unwrap();
        assert_eq!(current.status(), StatusCode::OK);
        assert_eq!(current.headers()[header::CACHE_CONTROL], "public, immutable");
        let doc: serde_json::Value = serde_json::from_slice(current.body()).unwrap();
        assert_eq!(doc["openapi"], "3.0.0");

        let stale = service
            .serve(
                &request("/openapi/v3/apis/batch/v1?hash=0123", None),
                version,
                &served,
            )
            .unwrap();
        assert_eq!(stale.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(stale.headers()[header::LOCATION], url.as_str());

        let missing = service
            .serve(&request("/openapi/v3/apis/nope/v1", None), version, &served)
            .unwrap();
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert!(
            service
                .serve(&request("/apis/batch/v1", None), version, &served)
                .is_none()
        );
    }

    #[test]
    fn http_date_is_rfc1123() {
        let at = time::macros::datetime!(2026-01-02 03:04:05 UTC);
        assert_eq!(http_date(at), "Fri, 02 Jan 2026 03:04:05 UTC");
    }
}
