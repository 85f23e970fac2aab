//! Calling a webhook: where it is (`clientConfig.url`, or `clientConfig.service` resolved to an
//! address), HTTPS trusting only its `caBundle` and verifying the server name (`<name>.<namespace>.svc`
//! for a Service), `POST` with `?timeout=<timeoutSeconds>s` under that deadline, and the failure texts
//! of upstream's dispatchers (`failed to call webhook: Post "<url>": <Go's error>`).
//!
//! A Service's cluster IP is not routable from the fake, so a Service reference resolves, in order,
//! through `--webhook-service-address NAMESPACE/NAME=HOST:PORT` (as envtest users point the API
//! server at a webhook on their machine), the Service's `spec.externalName`, then the addresses of
//! its EndpointSlices (the endpoint routing kube-apiserver does with `--enable-aggregator-routing`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use super::matching::{ServiceReference, Webhook, WebhookClientConfig};
use crate::store::{ObjectKey, StorageResource, Store};

/// The largest webhook response read (a response is an AdmissionReview with a patch).
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// `--webhook-service-address`: Services whose webhooks are reached at a fixed address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceAddresses {
    addresses: BTreeMap<(String, String), String>,
}

impl ServiceAddresses {
    /// Parses `NAMESPACE/NAME=HOST:PORT` entries.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut addresses = BTreeMap::new();
        for entry in entries {
            let entry = entry.as_ref();
            let invalid = || format!("{entry:?}: expected NAMESPACE/NAME=HOST:PORT");
            let (service, address) = entry.split_once('=').ok_or_else(invalid)?;
            let (namespace, name) = service.split_once('/').ok_or_else(invalid)?;
            let port_ok = address
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if namespace.is_empty() || name.is_empty() || !port_ok {
                return Err(invalid());
            }
            addresses.insert((namespace.to_owned(), name.to_owned()), address.to_owned());
        }
        Ok(Self { addresses })
    }

    /// The address given for Service `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&str> {
        self.addresses
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(String::as_str)
    }
}

/// Why a webhook could not be called; `Display` is what follows `failed calling webhook "<name>": `
/// upstream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// The client could not be built (a bad URL or `caBundle`).
    #[error("could not get REST client: {0}")]
    Client(String),
    /// The request failed or timed out (Go's `*url.Error`).
    #[error("failed to call webhook: Post \"{url}\": {detail}")]
    Post {
        /// The URL posted to, with its `?timeout=`.
        url: String,
        /// Go's text of the failure.
        detail: String,
    },
    /// The webhook answered with an error or a body that is not an AdmissionReview.
    #[error("failed to call webhook: {0}")]
    Response(String),
}

/// Where to send the review.
struct Endpoint {
    /// The URL as errors show it (`https://svc.ns.svc:443/path?timeout=10s`).
    shown: String,
    /// The URI dialed (the resolved address).
    uri: Uri,
    /// The name the serving certificate must carry.
    server_name: ServerName<'static>,
}

/// Go's `time.Duration` string of whole seconds (`10s`).
fn timeout_text(timeout: Duration) -> String {
    format!("{}s", timeout.as_secs())
}

/// The webhook's URL and the address to dial, resolving a Service reference.
async fn endpoint(
    client_config: &WebhookClientConfig,
    timeout: Duration,
    store: &dyn Store,
    addresses: &ServiceAddresses,
) -> Result<Endpoint, CallError> {
    let timeout = timeout_text(timeout);
    if let Some(url) = &client_config.url {
        let uri: Uri = url
            .parse()
            .map_err(|e| CallError::Client(format!("parse {url:?}: {e}")))?;
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_owned();
        let server_name = ServerName::try_from(host.clone())
            .map_err(|_| CallError::Client(format!("invalid host {host:?} in {url:?}")))?;
        let separator = if uri.query().is_some() { '&' } else { '?' };
        let authority = uri.authority().map(|a| a.as_str().to_owned()).unwrap_or_default();
        let dial_authority = if uri.port().is_some() {
            authority
        } else {
            format!("{authority}:443")
        };
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let shown = format!("{url}{separator}timeout={timeout}");
        let uri = format!("https://{dial_authority}{path}{separator}timeout={timeout}")
            .parse()
            .map_err(|e| CallError::Client(format!("parse {url:?}: {e}")))?;
        return Ok(Endpoint {
            shown,
            uri,
            server_name,
        });
    }
    let Some(service) = &client_config.service else {
        return Err(CallError::Client(
            "webhook clientConfig has neither url nor service".to_owned(),
        ));
    };
    let port = service.port.unwrap_or(443);
    let host = format!("{}.{}.svc", service.name, service.namespace);
    let path = match service.path.as_deref() {
        None | Some("") => "/",
        Some(path) => path,
    };
    let shown = format!("https://{host}:{port}{path}?timeout={timeout}");
    let server_name = ServerName::try_from(host.clone())
        .map_err(|_| CallError::Client(format!("invalid service host {host:?}")))?;
    let address = resolve_service(service, port, store, addresses)
        .await
        .map_err(|detail| CallError::Post {
            url: shown.clone(),
            detail,
        })?;
    let uri = format!("https://{address}{path}?timeout={timeout}")
        .parse()
        .map_err(|e| CallError::Client(format!("parse address {address:?}: {e}")))?;
    Ok(Endpoint {
        shown,
        uri,
        server_name,
    })
}

/// `host:port` of a Service reference (see the module docs); errors as upstream's resolver words them.
async fn resolve_service(
    service: &ServiceReference,
    port: u16,
    store: &dyn Store,
    addresses: &ServiceAddresses,
) -> Result<String, String> {
    if let Some(address) = addresses.get(&service.namespace, &service.name) {
        return Ok(address.to_owned());
    }
    let key = ObjectKey {
        namespace: Some(service.namespace.clone()),
        name: service.name.clone(),
    };
    let found = store
        .get(&StorageResource::new("", "services"), &key)
        .await
        .map_err(|_| format!("services {:?} not found", service.name))?;
    let spec = found.get("spec").cloned().unwrap_or(Value::Null);
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP");
    if kind == "ExternalName" {
        let external = spec
            .get("externalName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Ok(format!("{external}:{port}"));
    }
    if spec.get("clusterIP").and_then(Value::as_str) == Some("None") {
        return Err("cannot route to service with ClusterIP \"None\"".to_owned());
    }
    let service_port = spec
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .ok_or_else(|| format!("no service port {port} found for service {:?}", service.name))?;
    let port_name = service_port
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (slices, _) = store
        .list(
            &StorageResource::new("discovery.k8s.io", "endpointslices"),
            Some(&service.namespace),
        )
        .await
        .map_err(|e| e.to_string())?;
    slices
        .iter()
        .filter(|slice| {
            slice
                .pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(service.name.as_str())
        })
        .find_map(|slice| {
            let endpoint_port = slice
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == port_name)
                .and_then(|p| p.get("port").and_then(Value::as_u64))?;
            let address = slice
                .get("endpoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|e| e.pointer("/conditions/ready") != Some(&Value::Bool(false)))
                .find_map(|e| e.pointer("/addresses/0").and_then(Value::as_str))?;
            Some(if address.contains(':') {
                format!("[{address}]:{endpoint_port}")
            } else {
                format!("{address}:{endpoint_port}")
            })
        })
        .ok_or_else(|| format!("no endpoints available for service {:?}", service.name))
}

/// The TLS client of a webhook: its `caBundle` as the only trust root (with none, nothing is trusted:
/// the fake has no system roots), ring as the explicit provider, h2 or HTTP/1.1.
fn tls_config(client_config: &WebhookClientConfig) -> Result<rustls::ClientConfig, CallError> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(bundle) = client_config.ca_bundle.as_deref().filter(|b| !b.is_empty()) {
        let unparsable = || {
            CallError::Client(
                "unable to load root certificates: unable to parse bytes as PEM block".to_owned(),
            )
        };
        let pem = data_encoding::BASE64
            .decode(bundle.as_bytes())
            .map_err(|_| unparsable())?;
        let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|_| unparsable())?;
        if certificates.is_empty() {
            return Err(unparsable());
        }
        for certificate in certificates {
            roots.add(certificate).map_err(|_| unparsable())?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CallError::Client(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols.clear();
    Ok(config)
}

/// Posts `review` (JSON) to `webhook` within its `timeoutSeconds` and returns the response body of a
/// 2xx answer.
pub(crate) async fn post(
    webhook: &Webhook,
    review: Vec<u8>,
    store: &dyn Store,
    addresses: &ServiceAddresses,
) -> Result<Bytes, CallError> {
    post_to(&webhook.client_config, webhook.timeout, review, store, addresses).await
}

/// Posts `review` (JSON) to the webhook at `client_config` within `timeout` (also sent as
/// `?timeout=`, as client-go does for a client with a timeout) and returns the response body of a 2xx
/// answer. Shared by admission and CRD conversion webhooks.
pub(crate) async fn post_to(
    client_config: &WebhookClientConfig,
    timeout: Duration,
    review: Vec<u8>,
    store: &dyn Store,
    addresses: &ServiceAddresses,
) -> Result<Bytes, CallError> {
    let config = tls_config(client_config)?;
    let deadline = tokio::time::Instant::now() + timeout;
    let endpoint =
        match tokio::time::timeout_at(deadline, endpoint(client_config, timeout, store, addresses)).await {
            Ok(endpoint) => endpoint?,
            Err(_) => return Err(CallError::Response("context deadline exceeded".to_owned())),
        };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(
            endpoint.server_name.clone(),
        ))
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let request = Request::builder()
        .method(Method::POST)
        .uri(endpoint.uri.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, */*")
        .body(Full::new(Bytes::from(review)))
        .map_err(|e| CallError::Client(e.to_string()))?;
    let dialed = endpoint
        .uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_default();
    let exchange = async {
        let response = client.request(request).await.map_err(|e| CallError::Post {
            url: endpoint.shown.clone(),
            detail: mvp_core::TransportError::new(e, &dialed).to_string(),
        })?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| CallError::Post {
                url: endpoint.shown.clone(),
                detail: e.to_string(),
            })?
            .to_bytes();
        if !status.is_success() {
            return Err(CallError::Response(error_response_text(status, &body)));
        }
        Ok(body)
    };
    match tokio::time::timeout_at(deadline, exchange).await {
        Ok(result) => result,
        Err(_) => Err(CallError::Post {
            url: endpoint.shown,
            detail: "context deadline exceeded".to_owned(),
        }),
    }
}

/// client-go's error for a non-2xx answer: the message of a `Status` body, else its generic texts
/// (`transformResponse`/`newUnstructuredResponseError`).
fn error_response_text(status: http::StatusCode, body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && value.get("kind").and_then(Value::as_str) == Some("Status")
        && let Some(message) = value.get("message").and_then(Value::as_str)
    {
        return message.to_owned();
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        format!(
            "the server responded with the status code {} but did not return more information",
            status.as_u16()
        )
    } else {
        format!("an error on the server ({text:?}) has prevented the request from succeeding")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_addresses_parse_namespace_name_and_address() {
        let parsed = ServiceAddresses::parse(&["webhooks/deny=127.0.0.1:9443"]).expect("valid");
        assert_eq!(parsed.get("webhooks", "deny"), Some("127.0.0.1:9443"));
        assert_eq!(parsed.get("webhooks", "other"), None);
        for bad in ["deny=127.0.0.1:9443", "a/b=127.0.0.1", "a/b", "/b=h:1", "a/b=:1"] {
            assert!(ServiceAddresses::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn services_resolve_by_flag_external_name_or_endpoint_slices() {
        use serde_json::json;
        let store = crate::store::MemoryStore::new();
        let put = |resource: StorageResource, name: &str, object: Value| {
            let key = ObjectKey {
                namespace: Some("webhooks".to_owned()),
                name: name.to_owned(),
            };
            let store = &store;
            async move { store.create(&resource, &key, object).await.expect("stored") }
        };
        let services = StorageResource::new("", "services");
        put(
            services.clone(),
            "external",
            json!({"metadata": {"name": "external", "namespace": "webhooks"},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}),
        )
        .await;
        put(services.clone(), "cluster", json!({"metadata": {"name": "cluster", "namespace": "webhooks"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.9", "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}))
        .await;
        put(StorageResource::new("discovery.k8s.io", "endpointslices"), "cluster-abc", json!({
            "metadata": {"name": "cluster-abc", "namespace": "webhooks", "labels": {"kubernetes.io/service-name": "cluster"}},
            "ports": [{"name": "https", "port": 9443}],
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": false}}, {"addresses": ["127.0.0.1"]}]}))
        .await;
        let reference = |name: &str| ServiceReference {
            namespace: "webhooks".to_owned(),
            name: name.to_owned(),
            path: None,
            port: None,
        };
        let none = ServiceAddresses::default();
        let resolve = |name: &'static str, port: u16, addresses: ServiceAddresses| {
            let store = &store;
            async move { resolve_service(&reference(name), port, store, &addresses).await }
        };
        assert_eq!(
            resolve("external", 8443, none.clone()).await,
            Ok("localhost:8443".to_owned())
        );
        assert_eq!(
            resolve("cluster", 443, none.clone()).await,
            Ok("127.0.0.1:9443".to_owned())
        );
        assert_eq!(
            resolve("cluster", 444, none.clone()).await,
            Err("no service port 444 found for service \"cluster\"".to_owned())
        );
        assert_eq!(
            resolve("missing", 443, none).await,
            Err("services \"missing\" not found".to_owned())
        );
        let flagged = ServiceAddresses::parse(&["webhooks/missing=127.0.0.2:1"]).expect("valid");
        assert_eq!(
            resolve("missing", 443, flagged).await,
            Ok("127.0.0.2:1".to_owned())
        );
    }

    #[test]
    fn error_answers_read_as_client_go_reports_them() {
        let status = br#"{"kind":"Status","message":"boom"}"#;
        assert_eq!(
            error_response_text(http::StatusCode::INTERNAL_SERVER_ERROR, status),
            "boom"
        );
        assert_eq!(
            error_response_text(http::StatusCode::BAD_GATEWAY, b""),
            "the server responded with the status code 502 but did not return more information"
        );
    }
}
