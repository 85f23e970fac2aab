//! Discovery: rendering and serving `/api`, `/api/v1`, `/apis`, `/apis/G` and `/apis/G/V` exactly as
//! kube-apiserver does, from a [`ServedApis`].
//!
//! Rendering ([`legacy`], [`aggregated`]) is pure. [`serve`] adds the HTTP layer: Accept negotiation
//! (unaggregated JSON/YAML, aggregated `apidiscovery.k8s.io/v2` and, where the minor serves it,
//! `v2beta1`), `ETag`/`If-None-Match` on aggregated documents, upstream's plain-text 404 for
//! unserved groups and versions, and the 406 `Status` when nothing acceptable is asked for.
//!
//! ```
//! use apiserver_fake::api::catalog::{FeatureGates, RuntimeConfig, ServedApis};
//! use apiserver_fake::api::discovery::{serve, DiscoveryContext};
//!
//! let version = "1.36".parse()?;
//! let apis = ServedApis::builtin(version, &RuntimeConfig::default(), &FeatureGates::default())?;
//! let ctx = DiscoveryContext::new(version, FeatureGates::default(), "127.0.0.1:6443");
//! let (parts, ()) = http::Request::get("/apis")
//!     .header("accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
//!     .body(())?
//!     .into_parts();
//! let response = serve(&parts, &apis, &ctx).expect("a discovery path");
//! assert_eq!(response.status(), 200);
//! assert!(response.headers().contains_key("etag"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod accept;
pub mod aggregated;
pub mod legacy;

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use serde::Serialize;

use mvp_core::{DiscoveryAnswer, DiscoveryProfile, PeerAggregatedDiscoveryHandler};

use crate::api::catalog::{FeatureGates, KubeVersion, ServedApis};
use crate::api::status::Status;
use accept::{ACCEPTED_MEDIA_TYPES, MediaKind, Negotiated, negotiate};
use aggregated::AggregatedVersion;

/// What [`serve`] needs besides the API set.
#[derive(Clone)]
pub struct DiscoveryContext {
    /// The minor this server impersonates (document details such as `creationTimestamp: null`).
    pub version: KubeVersion,
    /// The server's feature gates (whether aggregated `v2beta1` is still served).
    pub feature_gates: FeatureGates,
    /// `host:port` published in `/api`'s `serverAddressByClientCIDRs`.
    pub server_address: String,
    /// Peer-aggregated discovery (KEP-4020 beta, docs/mvp-behaviour.md §1.5, §7.1): installed when the
    /// Mixed Version Proxy gate is on (1.35+). It answers aggregated `v2` requests of `/api` and
    /// `/apis` (merging `/apis` once the peer proxy connected its peer cache, counting `nopeer`
    /// requests); `v2beta1` and every unaggregated document stay local. `None` serves only local APIs.
    pub peer_aggregated: Option<Arc<PeerAggregatedDiscoveryHandler>>,
}

impl fmt::Debug for DiscoveryContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscoveryContext")
            .field("version", &self.version)
            .field("feature_gates", &self.feature_gates)
            .field("server_address", &self.server_address)
            .field("peer_aggregated", &self.peer_aggregated.is_some())
            .finish()
    }
}

impl DiscoveryContext {
    /// A context without peer aggregation.
    pub fn new(version: KubeVersion, feature_gates: FeatureGates, server_address: impl Into<String>) -> Self {
        DiscoveryContext {
            version,
            feature_gates,
            server_address: server_address.into(),
            peer_aggregated: None,
        }
    }

    /// Whether this server offers aggregated discovery of `version`.
    pub fn serves_aggregated(&self, version: AggregatedVersion) -> bool {
        version.served(self.version, &self.feature_gates)
    }
}

/// A discovery path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiscoveryPath<'a> {
    /// `/api`.
    Api,
    /// `/api/{version}`.
    ApiVersion(&'a str),
    /// `/apis` (and `/apis/`).
    Apis,
    /// `/apis/{group}`.
    Group(&'a str),
    /// `/apis/{group}/{version}`.
    GroupVersion(&'a str, &'a str),
}

impl<'a> DiscoveryPath<'a> {
    /// Classifies a request path; `None` for anything that is not a discovery document.
    pub fn parse(path: &'a str) -> Option<Self> {
        if path == "/api" {
            return Some(DiscoveryPath::Api);
        }
        if path == "/apis" || path == "/apis/" {
            return Some(DiscoveryPath::Apis);
        }
        if let Some(rest) = path.strip_prefix("/api/") {
            let version = rest.strip_suffix('/').unwrap_or(rest);
            return (!version.is_empty() && !version.contains('/'))
                .then_some(DiscoveryPath::ApiVersion(version));
        }
        let rest = path.strip_prefix("/apis/")?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let mut segments = rest.split('/');
        match (segments.next(), segments.next(), segments.next()) {
            (Some(group), None, None) if !group.is_empty() => Some(DiscoveryPath::Group(group)),
            (Some(group), Some(version), None) if !group.is_empty() && !version.is_empty() => {
                Some(DiscoveryPath::GroupVersion(group, version))
            }
            _ => None,
        }
    }
}

/// Serves a discovery request, or returns `None` when the request is not one (another method, or a
/// path that is not a discovery document) so the caller routes it elsewhere.
///
/// Unserved groups and group-versions answer upstream's `404 page not found` (text/plain). HEAD gets
/// the GET headers and no body.
pub fn serve(
    parts: &http::request::Parts,
    apis: &ServedApis,
    ctx: &DiscoveryContext,
) -> Option<Response<Bytes>> {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return None;
    }
    let path = DiscoveryPath::parse(parts.uri.path())?;
    let accept = parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let if_none_match = parts
        .headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    let response = respond(&path, accept, if_none_match, apis, ctx);
    Some(if parts.method == Method::HEAD {
        response.map(|_| Bytes::new())
    } else {
        response
    })
}

fn respond(
    path: &DiscoveryPath<'_>,
    accept: Option<&str>,
    if_none_match: Option<&str>,
    apis: &ServedApis,
    ctx: &DiscoveryContext,
) -> Response<Bytes> {
    // The root documents are wrapped with the aggregated handler; /apis/G and /apis/G/V are not.
    let root = matches!(path, DiscoveryPath::Api | DiscoveryPath::Apis);
    match path {
        DiscoveryPath::Api if apis.group("").is_none() => return not_found(),
        DiscoveryPath::ApiVersion(version) if apis.group_version("", version).is_none() => {
            return not_found();
        }
        DiscoveryPath::Group(group) if apis.group(group).is_none() => return not_found(),
        DiscoveryPath::GroupVersion(group, version) if apis.group_version(group, version).is_none() => {
            return not_found();
        }
        _ => {}
    }
    let negotiated = match negotiate(accept, |v| root && ctx.serves_aggregated(v)) {
        Some(negotiated) => negotiated,
        None => return not_acceptable(),
    };
    match negotiated {
        Negotiated::Aggregated {
            version,
            media,
            profile,
        } => {
            let local = match path {
                DiscoveryPath::Api => aggregated::api_document(apis, ctx.version, version),
                _ => aggregated::apis_document(apis, ctx.version, version),
            };
            let profile = DiscoveryProfile::from_parameter(profile.as_deref());
            let answer = match (&ctx.peer_aggregated, version, path) {
                (Some(handler), AggregatedVersion::V2, DiscoveryPath::Apis) => {
                    handler.serve_apis(local, profile, if_none_match)
                }
                (Some(handler), AggregatedVersion::V2, _) => handler.serve_api(local, profile, if_none_match),
                _ => DiscoveryAnswer::new(local, if_none_match),
            };
            aggregated_response(answer, version, media)
        }
        Negotiated::Legacy(media) => {
            let body = match path {
                DiscoveryPath::Api => {
                    legacy::api_versions(apis, &ctx.server_address).map(|d| encode(&d, media))
                }
                DiscoveryPath::ApiVersion(version) => {
                    legacy::api_resource_list(apis, "", version).map(|d| encode(&d, media))
                }
                DiscoveryPath::Apis => Some(encode(&legacy::api_group_list(apis), media)),
                DiscoveryPath::Group(group) => legacy::api_group(apis, group).map(|d| encode(&d, media)),
                DiscoveryPath::GroupVersion(group, version) => {
                    legacy::api_resource_list(apis, group, version).map(|d| encode(&d, media))
                }
            };
            match body {
                Some(body) => with_body(StatusCode::OK, media.media_type(), body),
                None => not_found(),
            }
        }
    }
}

/// JSON as kube-apiserver's encoder writes it (compact, newline-terminated), or YAML with sorted keys
/// (sigs.k8s.io/yaml goes through a map).
fn encode<T: Serialize>(document: &T, media: MediaKind) -> Bytes {
    match media {
        MediaKind::Json => {
            let mut body = serde_json::to_vec(document).unwrap_or_default();
            body.push(b'\n');
            Bytes::from(body)
        }
        MediaKind::Yaml => {
            let value = serde_json::to_value(document).map(sort_keys).unwrap_or_default();
            Bytes::from(crate::api::yaml::encode(&value))
        }
    }
}

fn sort_keys(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sort_keys(v))).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sort_keys).collect())
        }
        other => other,
    }
}

/// The response for `answer` (upstream `ServeHTTPWithETag`): the `ETag`, `Vary: Accept` and
/// `Cache-Control: public` in both cases, the document encoded as negotiated or a bodiless 304.
fn aggregated_response(
    answer: DiscoveryAnswer,
    version: AggregatedVersion,
    media: MediaKind,
) -> Response<Bytes> {
    let DiscoveryAnswer { etag, document } = answer;
    let mut response = if let Some(document) = document {
        let content_type = match media {
            MediaKind::Json => version.content_type().to_string(),
            MediaKind::Yaml => {
                format!(
                    "application/yaml;g=apidiscovery.k8s.io;v={};as=APIGroupDiscoveryList",
                    version.as_str()
                )
            }
        };
        with_body(StatusCode::OK, &content_type, encode(&*document, media))
    } else {
        let mut response = Response::new(Bytes::new());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public"));
    response
}

fn with_body(status: StatusCode, content_type: &str, body: Bytes) -> Response<Bytes> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

/// Go's `http.NotFound`, which kube-apiserver's mux answers for unknown discovery paths.
pub fn not_found() -> Response<Bytes> {
    let mut response = with_body(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        Bytes::from_static(b"404 page not found\n"),
    );
    response
        .headers_mut()
        .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

fn not_acceptable() -> Response<Bytes> {
    let status = Status::not_acceptable(&ACCEPTED_MEDIA_TYPES);
    with_body(
        StatusCode::NOT_ACCEPTABLE,
        "application/json",
        encode(&status, MediaKind::Json),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::{ApiGroup, ApiResource, ApiVersion, RuntimeConfig};

    const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    const V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

    fn setup(minor: u32, runtime_config: &str, gates: &str) -> (ServedApis, DiscoveryContext) {
        let version = KubeVersion::new(1, minor).unwrap();
        let gates: FeatureGates = gates.parse().unwrap();
        let apis =
            ServedApis::builtin(version, &runtime_config.parse::<RuntimeConfig>().unwrap(), &gates).unwrap();
        (apis, DiscoveryContext::new(version, gates, "127.0.0.1:6443"))
    }

    fn get(
        path: &str,
        headers: &[(&str, &str)],
        apis: &ServedApis,
        ctx: &DiscoveryContext,
    ) -> Option<Response<Bytes>> {
        let mut builder = http::Request::get(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let (parts, ()) = builder.body(()).unwrap().into_parts();
        serve(&parts, apis, ctx)
    }

    fn json(response: &Response<Bytes>) -> serde_json::Value {
        serde_json::from_slice(response.body()).unwrap()
    }

    fn content_type(response: &Response<Bytes>) -> &str {
        response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    #[test]
    fn default_136_aggregated_counts_match_the_reference_table() {
        let (apis, ctx) = setup(36, "", "");
        let apis_doc = json(&get("/apis", &[("accept", V2)], &apis, &ctx).unwrap());
        let core_doc = json(&get("/api", &[("accept", V2)], &apis, &ctx).unwrap());
        let mut group_versions = 0;
        let mut resources = 0;
        let mut subresources = 0;
        for document in [&apis_doc, &core_doc] {
            for item in document["items"].as_array().unwrap() {
                for version in item["versions"].as_array().unwrap() {
                    group_versions += 1;
                    for resource in version["resources"].as_array().unwrap() {
                        resources += 1;
                        subresources += resource["subresources"].as_array().map_or(0, Vec::len);
                    }
                }
            }
        }
        assert_eq!((group_versions, resources, subresources), (22, 68, 45));
    }

    #[test]
    fn aggregated_v2_has_etag_and_if_none_match_gives_304() {
        let (apis, ctx) = setup(36, "", "");
        let first = get("/apis", &[("accept", V2)], &apis, &ctx).unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        assert_eq!(content_type(&first), V2);
        let etag = first.headers()[header::ETAG].to_str().unwrap().to_string();
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() == 130,
            "{etag}"
        );
        assert_eq!(first.headers()[header::VARY], "Accept");
        let cached = get("/apis", &[("accept", V2), ("if-none-match", &etag)], &apis, &ctx).unwrap();
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        assert!(cached.body().is_empty());
        assert_eq!(cached.headers()[header::ETAG].to_str().unwrap(), etag);
        let stale = get(
            "/apis",
            &[("accept", V2), ("if-none-match", "\"other\"")],
            &apis,
            &ctx,
        )
        .unwrap();
        assert_eq!(stale.status(), StatusCode::OK);
        // Another API set, another ETag.
        let (fewer, ctx) = setup(36, "batch/v1=false", "");
        let other = get("/apis", &[("accept", V2)], &fewer, &ctx).unwrap();
        assert_ne!(other.headers()[header::ETAG].to_str().unwrap(), etag);
    }

    #[test]
    fn legacy_documents_without_aggregated_accept() {
        let (apis, ctx) = setup(36, "", "");
        let list = get("/apis", &[], &apis, &ctx).unwrap();
        assert_eq!(content_type(&list), "application/json");
        assert!(list.headers().get(header::ETAG).is_none());
        assert_eq!(json(&list)["kind"], "APIGroupList");
        let core = json(&get("/api", &[("accept", "application/json")], &apis, &ctx).unwrap());
        assert_eq!(core["versions"], serde_json::json!(["v1"]));
        assert_eq!(
            core["serverAddressByClientCIDRs"][0]["serverAddress"],
            "127.0.0.1:6443"
        );
        // /apis/G/V is never aggregated: the aggregated clause is not acceptable there.
        let with_fallback = format!("{V2},application/json");
        let batch = json(&get("/apis/batch/v1", &[("accept", &with_fallback)], &apis, &ctx).unwrap());
        assert_eq!(batch["kind"], "APIResourceList");
        let only_aggregated = get("/apis/batch/v1", &[("accept", V2)], &apis, &ctx).unwrap();
        assert_eq!(only_aggregated.status(), StatusCode::NOT_ACCEPTABLE);
        let group = json(&get("/apis/apps/", &[], &apis, &ctx).unwrap());
        assert_eq!(group["preferredVersion"]["groupVersion"], "apps/v1");
        let yaml = get("/api/v1", &[("accept", "application/yaml")], &apis, &ctx).unwrap();
        assert_eq!(content_type(&yaml), "application/yaml");
        let text = std::str::from_utf8(yaml.body()).unwrap();
        assert!(
            text.starts_with("groupVersion: v1\nkind: APIResourceList\nresources:\n"),
            "{text}"
        );
    }

    #[test]
    fn unserved_groups_and_versions_are_plain_404s() {
        let (apis, ctx) = setup(36, "batch/v1=false", "");
        for path in [
            "/apis/batch",
            "/apis/batch/v1",
            "/apis/apps/v2",
            "/api/v2",
            "/apis/nope.example.com",
        ] {
            let response = get(path, &[("accept", V2)], &apis, &ctx).unwrap();
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
            assert_eq!(response.body().as_ref(), b"404 page not found\n");
            assert_eq!(content_type(&response), "text/plain; charset=utf-8");
            assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        }
        assert!(
            get("/apis/batch/v1/jobs", &[], &apis, &ctx).is_none(),
            "resource paths are not discovery"
        );
        assert!(get("/healthz", &[], &apis, &ctx).is_none());
    }

    #[test]
    fn protobuf_only_accept_is_406_status() {
        let (apis, ctx) = setup(36, "", "");
        let response = get(
            "/apis",
            &[("accept", "application/vnd.kubernetes.protobuf")],
            &apis,
            &ctx,
        )
        .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE);
        let status = json(&response);
        assert_eq!(status["reason"], "NotAcceptable");
        assert_eq!(
            status["message"],
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
    }

    #[test]
    fn v2beta1_is_served_only_where_the_minor_serves_it() {
        let (apis, ctx) = setup(32, "", "");
        let response = get("/apis", &[("accept", V2BETA1)], &apis, &ctx).unwrap();
        assert_eq!(content_type(&response), V2BETA1);
        assert_eq!(json(&response)["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        assert_eq!(
            json(&response)["items"][0]["metadata"]["creationTimestamp"],
            serde_json::Value::Null
        );
        assert!(
            json(&response)["items"][0]["metadata"]
                .as_object()
                .unwrap()
                .contains_key("creationTimestamp")
        );
        for (minor, gates) in [(33, ""), (36, "")] {
            let (apis, ctx) = setup(minor, "", gates);
            let response = get("/apis", &[("accept", V2BETA1)], &apis, &ctx).unwrap();
            assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE, "1.{minor}");
        }
        let (apis, ctx) = setup(34, "", "AggregatedDiscoveryRemoveBetaType=false");
        let response = get("/api", &[("accept", V2BETA1)], &apis, &ctx).unwrap();
        assert_eq!(content_type(&response), V2BETA1);
        assert!(
            !json(&response)["items"][0]["metadata"]
                .as_object()
                .unwrap()
                .contains_key("creationTimestamp")
        );
    }

    /// A 1.36 context whose peer-aggregated handler sees one peer, `peer-server-1`, serving `peer`.
    fn with_peer(ctx: &mut DiscoveryContext, peer: &ServedApis) -> Arc<PeerAggregatedDiscoveryHandler> {
        let counters = mvp_core::PeerAggregatedMetrics::register(&prometheus::Registry::new()).unwrap();
        let handler = Arc::new(PeerAggregatedDiscoveryHandler::new("test-server").with_metrics(counters));
        let document = aggregated::apis_document(peer, ctx.version, AggregatedVersion::V2);
        let documents = [serde_json::to_value(&document).unwrap()];
        handler.set_peer_cache(mvp_core::PeerDiscoveryCache::from_documents([(
            "peer-server-1",
            &documents[..],
        )]));
        ctx.peer_aggregated = Some(handler.clone());
        handler
    }

    fn names(response: Response<Bytes>) -> Vec<String> {
        json(&response)["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn peer_aggregation_applies_to_apis_v2_unless_nopeer() {
        let (apis, mut ctx) = setup(36, "", "");
        let peer = ServedApis {
            groups: vec![ApiGroup {
                name: "peer.example.com".into(),
                versions: vec![ApiVersion {
                    version: "v1".into(),
                    resources: vec![ApiResource {
                        name: "things".into(),
                        kind: "Thing".into(),
                        ..Default::default()
                    }],
                }],
            }],
        };
        with_peer(&mut ctx, &peer);
        let merged = names(get("/apis", &[("accept", V2)], &apis, &ctx).unwrap());
        assert!(merged.contains(&"peer.example.com".to_owned()));
        let nopeer = format!("{V2};profile=nopeer");
        let local = names(get("/apis", &[("accept", &nopeer)], &apis, &ctx).unwrap());
        assert_eq!(local.len() + 1, merged.len());
        let core = names(get("/api", &[("accept", V2)], &apis, &ctx).unwrap());
        assert_eq!(core, vec![String::new()], "/api is never peer-aggregated");
    }

    /// A peer serving every group, in the same order as this server minus batch: the merged
    /// document is the peer's own (its list holds every group: MergePreservingRelativeOrder's
    /// shortcut), with its own ETag; and If-None-Match with that ETag is a 304.
    #[test]
    fn a_peer_group_is_added_the_etag_changes_and_if_none_match_still_applies() {
        let (apis, mut ctx) = setup(36, "batch/v1=false", "");
        let (full, _) = setup(36, "", "");
        with_peer(&mut ctx, &full);
        let merged = get("/apis", &[("accept", V2)], &apis, &ctx).unwrap();
        let etag = merged.headers()[header::ETAG].to_str().unwrap().to_owned();
        let peer_document = aggregated::apis_document(&full, ctx.version, AggregatedVersion::V2);
        assert_eq!(
            merged.body().as_ref(),
            [serde_json::to_vec(&peer_document).unwrap(), b"\n".to_vec()].concat()
        );
        assert_eq!(etag, peer_document.etag());
        let local = aggregated::apis_document(&apis, ctx.version, AggregatedVersion::V2);
        assert_ne!(etag, local.etag());
        let cached = get("/apis", &[("accept", V2), ("if-none-match", &etag)], &apis, &ctx).unwrap();
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        assert!(cached.body().is_empty());
        assert_eq!(cached.headers()[header::ETAG].to_str().unwrap(), etag);
        assert_eq!(cached.headers()[header::VARY], "Accept");
    }

    /// The typed documents decode back to themselves at every minor (with or without
    /// `creationTimestamp: null`), so a peer serving exactly this server's groups adds nothing.
    #[test]
    fn json_round_trip_is_lossless_so_an_identical_peer_changes_nothing() {
        for minor in [28, 33, 35, 36] {
            let (apis, ctx) = setup(minor, "", "");
            let local = aggregated::apis_document(&apis, ctx.version, AggregatedVersion::V2);
            let back: aggregated::APIGroupDiscoveryList =
                serde_json::from_value(serde_json::to_value(&local).unwrap()).unwrap();
            assert_eq!(back, local, "1.{minor}");
        }
        let (apis, mut ctx) = setup(36, "batch/v1=false", "");
        with_peer(&mut ctx, &apis);
        let merged = get("/apis", &[("accept", V2)], &apis, &ctx).unwrap();
        let local = aggregated::apis_document(&apis, ctx.version, AggregatedVersion::V2);
        assert_eq!(merged.headers()[header::ETAG].to_str().unwrap(), local.etag());
    }

    /// Upstream `TestPeerAggregatedDiscoveryMetrics`, through the request path: three
    /// peer-aggregated requests (one with an unknown profile) → 2 hits, 1 miss; two `nopeer`
    /// requests, invalidating in between → nopeer 2, hits and misses unchanged.
    #[test]
    fn metrics_match_upstreams_unit_test() {
        let (apis, mut ctx) = setup(36, "batch/v1=false", "");
        let (full, _) = setup(36, "", "");
        let handler = with_peer(&mut ctx, &full);
        assert!(names(get("/apis", &[("accept", V2)], &apis, &ctx).unwrap()).contains(&"batch".to_owned()));
        get("/apis", &[("accept", &format!("{V2};profile=foo"))], &apis, &ctx);
        get("/apis", &[("accept", V2)], &apis, &ctx);
        let nopeer = format!("{V2};profile=nopeer");
        let local = names(get("/apis", &[("accept", &nopeer)], &apis, &ctx).unwrap());
        assert!(!local.contains(&"batch".to_owned()));
        handler.invalidate();
        get("/apis", &[("accept", &nopeer)], &apis, &ctx);
        handler.invalidate();
        let m = handler.metrics().expect("counters");
        assert_eq!((m.cache_hits(), m.cache_misses(), m.nopeer_requests()), (2, 1, 2));
        // `/api` goes through the same wrapper upstream: a nopeer request there counts too.
        assert_eq!(
            get("/api", &[("accept", &nopeer)], &apis, &ctx).unwrap().status(),
            200
        );
        assert_eq!(m.nopeer_requests(), 3);
    }

    #[test]
    fn head_gets_headers_without_body_and_other_methods_are_not_discovery() {
        let (apis, ctx) = setup(36, "", "");
        let (parts, ()) = http::Request::head("/apis")
            .header("accept", V2)
            .body(())
            .unwrap()
            .into_parts();
        let response = serve(&parts, &apis, &ctx).unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.body().is_empty());
        assert!(response.headers().contains_key(header::ETAG));
        let (parts, ()) = http::Request::post("/apis").body(()).unwrap().into_parts();
        assert!(serve(&parts, &apis, &ctx).is_none());
    }

    #[test]
    fn paths_classify_like_the_upstream_mux() {
        assert_eq!(DiscoveryPath::parse("/api"), Some(DiscoveryPath::Api));
        assert_eq!(
            DiscoveryPath::parse("/api/v1"),
            Some(DiscoveryPath::ApiVersion("v1"))
        );
        assert_eq!(DiscoveryPath::parse("/apis/"), Some(DiscoveryPath::Apis));
        assert_eq!(
            DiscoveryPath::parse("/apis/apps"),
            Some(DiscoveryPath::Group("apps"))
        );
        assert_eq!(
            DiscoveryPath::parse("/apis/apps/v1/"),
            Some(DiscoveryPath::GroupVersion("apps", "v1"))
        );
        assert_eq!(DiscoveryPath::parse("/api/v1/pods"), None);
        assert_eq!(DiscoveryPath::parse("/apis//v1"), None);
        assert_eq!(DiscoveryPath::parse("/apiss"), None);
    }
}
