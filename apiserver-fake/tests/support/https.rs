//! A small HTTPS JSON server on 127.0.0.1 for webhook tests (admission and CRD conversion): its
//! serving certificate comes from the `certs` crate, for `127.0.0.1` and a Service name, and its CA is
//! given as the base64 `caBundle` a webhook configuration or CRD carries.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

/// A running server; dropping it stops it (with its runtime).
pub struct HttpsServer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// Its CA certificate, PEM then base64, as `clientConfig.caBundle` wants it.
    pub ca_bundle: String,
    _runtime: tokio::runtime::Runtime,
}

impl HttpsServer {
    /// Serves `handler(path, body) -> JSON body` over h2 and HTTP/1.1 with a certificate for
    /// `127.0.0.1` and `service_dns` (such as `admission.webhooks.svc`).
    pub fn start<F, Fut>(service_dns: &str, handler: F) -> Self
    where
        F: Fn(String, Bytes) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Bytes> + Send + 'static,
    {
        let ca = certs::CertificateAuthority::new_self_signed("webhook-ca").expect("CA");
        let serving = ca
            .issue_serving_cert(
                "webhook",
                &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
                &[service_dns.to_owned()],
            )
            .expect("serving cert");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_no_client_auth()
            .with_single_cert(vec![serving.cert_der()], serving.key_der())
            .expect("server config");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, handler) = (acceptor.clone(), handler.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| serve(req, handler.clone()));
                    let _ =
                        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                            .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                            .await;
                });
            }
        });
        Self {
            port,
            ca_bundle: data_encoding::BASE64.encode(ca.cert().cert_pem().as_bytes()),
            _runtime: runtime,
        }
    }
}

async fn serve<F, Fut>(
    req: Request<Incoming>,
    handler: F,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible>
where
    F: Fn(String, Bytes) -> Fut,
    Fut: Future<Output = Bytes>,
{
    let path = req.uri().path().to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let reply = handler(path, body).await;
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(reply))
        .expect("response"))
}
