//! An HTTPS client of one fake server over real TLS (h2 or HTTP/1.1 by ALPN, like client-go), whose
//! answers come back as snapshot-ready [`Exchange`]s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response};
use http_body_util::{BodyExt, BodyStream, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{FixtureError, Result};
use crate::exchange::{Exchange, ExchangeBody};

/// How a client authenticates.
#[derive(Debug, Clone)]
pub enum ClientIdentity {
    /// No credentials (the fake answers 401 for everything but health and `/version`).
    Anonymous,
    /// A client certificate and key (PEM files): CN is the user, O the groups.
    Certificate {
        /// Certificate chain file.
        cert: PathBuf,
        /// Private key file.
        key: PathBuf,
    },
    /// A bearer token (see [`crate::ADMIN_TOKEN`], [`crate::JANE_TOKEN`]).
    BearerToken(String),
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// An HTTPS client of one server.
#[derive(Clone, Debug)]
pub struct HttpsClient {
    server: String,
    base: String,
    token: Option<String>,
    client: Client<Https, Full<Bytes>>,
}

fn pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| FixtureError::Tls(format!("{}: {e}", path.display())))
}

impl HttpsClient {
    /// A client of server `server` (its fixture name, shown in exchanges) at `base`
    /// (`https://ip:port`), trusting `ca`.
    pub fn new(server: &str, base: &str, ca: &Path, identity: ClientIdentity) -> Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = RootCertStore::empty();
        for cert in pem_certs(ca)? {
            roots
                .add(cert)
                .map_err(|e| FixtureError::Tls(format!("{}: {e}", ca.display())))?;
        }
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        let mut token = None;
        let config = match identity {
            ClientIdentity::Certificate { cert, key } => {
                let key = PrivateKeyDer::from_pem_file(&key)
                    .map_err(|e| FixtureError::Tls(format!("{}: {e}", key.display())))?;
                builder
                    .with_client_auth_cert(pem_certs(&cert)?, key)
                    .map_err(|e| FixtureError::Tls(format!("{}: {e}", cert.display())))?
            }
            ClientIdentity::BearerToken(t) => {
                token = Some(t);
                builder.with_no_client_auth()
            }
            ClientIdentity::Anonymous => builder.with_no_client_auth(),
        };
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1()
            .enable_http2()
            .build();
        Ok(Self {
            server: server.to_owned(),
            base: base.trim_end_matches('/').to_owned(),
            token,
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    /// The fixture name of the server this client talks to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Starts a request to `path` (path and query).
    pub fn request(&self, method: Method, path: &str) -> ExchangeRequest<'_> {
        ExchangeRequest {
            client: self,
            method,
            path: path.to_owned(),
            headers: HeaderMap::new(),
            body: None,
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Exchange> {
        self.request(Method::GET, path).send().await
    }

    /// `POST path` with a JSON body.
    pub async fn post_json(&self, path: &str, body: &serde_json::Value) -> Result<Exchange> {
        self.request(Method::POST, path).json(body).send().await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Result<Exchange> {
        self.request(Method::DELETE, path).send().await
    }
}

/// A request being built; [`ExchangeRequest::send`] collects the answer, [`ExchangeRequest::watch`]
/// reads a stream of watch events.
#[derive(Debug)]
pub struct ExchangeRequest<'a> {
    client: &'a HttpsClient,
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Option<(Bytes, &'static str)>,
}

impl ExchangeRequest<'_> {
    /// Adds a header (repeat the call for several values of one name). Invalid names or values are
    /// reported by [`ExchangeRequest::send`].
    pub fn header(mut self, name: &str, value: &str) -> Self {
        match (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            (Ok(name), Ok(value)) => {
                self.headers.append(name, value);
            }
            _ => {
                // Kept as a marker; send() rejects it.
                self.headers
                    .append("x-e2e-invalid-header", HeaderValue::from_static("1"));
            }
        }
        self
    }

    /// A JSON body (`Content-Type: application/json`).
    pub fn json(mut self, body: &serde_json::Value) -> Self {
        self.body = Some((Bytes::from(body.to_string()), "application/json"));
        self
    }

    /// A body with an explicit content type (e.g. `application/merge-patch+json`).
    pub fn body(mut self, body: &str, content_type: &'static str) -> Self {
        self.body = Some((Bytes::from(body.to_owned()), content_type));
        self
    }

    fn build(&self) -> Result<Request<Full<Bytes>>> {
        let error = |message: String| FixtureError::Http {
            method: self.method.to_string(),
            path: self.path.clone(),
            message,
        };
        if self.headers.contains_key("x-e2e-invalid-header") {
            return Err(error("invalid header name or value".to_owned()));
        }
        let mut request = Request::builder()
            .method(self.method.clone())
            .uri(format!("{}{}", self.client.base, self.path));
        if let Some(headers) = request.headers_mut() {
            headers.extend(self.headers.clone());
            if let Some(token) = &self.client.token
                && !headers.contains_key(http::header::AUTHORIZATION)
            {
                let value =
                    HeaderValue::try_from(format!("Bearer {token}")).map_err(|e| error(e.to_string()))?;
                headers.insert(http::header::AUTHORIZATION, value);
            }
            if let Some((_, content_type)) = &self.body
                && !headers.contains_key(http::header::CONTENT_TYPE)
            {
                headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            }
        }
        let body = self.body.as_ref().map(|(b, _)| b.clone()).unwrap_or_default();
        request.body(Full::new(body)).map_err(|e| error(e.to_string()))
    }

    fn request_line(&self) -> String {
        format!("{} {} (via {})", self.method, self.path, self.client.server)
    }

    /// Sends the request and returns the response head with its body still streaming.
    pub async fn open(&self) -> Result<Response<Incoming>> {
        let request = self.build()?;
        self.client
            .client
            .request(request)
            .await
            .map_err(|e| FixtureError::Http {
                method: self.method.to_string(),
                path: self.path.clone(),
                message: format!("{e:?}"),
            })
    }

    /// Sends the request and collects the whole answer (with the default redactions applied).
    pub async fn send(self) -> Result<Exchange> {
        let response = self.open().await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| FixtureError::Http {
            method: self.method.to_string(),
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        Ok(Exchange::new(
            self.request_line(),
            parts.status,
            &parts.headers,
            &body.to_bytes(),
        ))
    }

    /// Sends a watch request and reads newline-delimited JSON events until `events` were received or
    /// `timeout` passed, then closes the stream. The exchange's body is the list of events.
    pub async fn watch(self, events: usize, timeout: Duration) -> Result<Exchange> {
        let response = self.open().await?;
        let (parts, body) = response.into_parts();
        let mut stream = BodyStream::new(body);
        let mut buffer: Vec<u8> = Vec::new();
        let mut received: Vec<serde_json::Value> = Vec::new();
        let mut raw_rest = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while received.len() < events {
            let frame = match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(Ok(frame))) => frame,
                Ok(Some(Err(_)) | None) | Err(_) => break,
            };
            let Ok(data) = frame.into_data() else { continue };
            buffer.extend_from_slice(&data);
            while let Some(pos) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=pos).collect();
                let line = &line[..line.len() - 1];
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match serde_json::from_slice(line) {
                    Ok(event) => received.push(event),
                    Err(_) => raw_rest.extend_from_slice(line),
                }
            }
        }
        drop(stream);
        let mut exchange = Exchange::new(self.request_line(), parts.status, &parts.headers, &[]);
        exchange.body = if received.is_empty() && !raw_rest.is_empty() {
            ExchangeBody::Text(String::from_utf8_lossy(&raw_rest).into_owned())
        } else {
            ExchangeBody::Json(crate::exchange::redact_json(serde_json::Value::Array(received)))
        };
        Ok(exchange)
    }
}
