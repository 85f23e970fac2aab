//! Client-certificate authentication for the server the layer is embedded in: the verified
//! peer certificate of a TLS connection becomes the [`UserInfo`] the filter forwards.
//!
//! As kube-apiserver's x509 authenticator (`CommonNameUserConversion`): the subject's common
//! name is the user name, its organizations are the groups, and every authenticated user is
//! also in `system:authenticated`. With the cargo feature `server`, [`serve_tls`] runs the
//! whole accept loop (TLS, the user of each connection, HTTP/1.1 and HTTP/2) for any tower
//! service, an axum `Router` included.

use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::peer_tls::{PeerTlsError, certificates_from_pem, private_key_from_pem};
use crate::user::{ALL_AUTHENTICATED, UserInfo};

/// The user a client certificate names: CN → name, O → groups, plus `system:authenticated`.
/// `None` when the certificate does not parse or has no common name (upstream rejects it).
pub fn user_from_certificate(cert: &CertificateDer<'_>) -> Option<UserInfo> {
    use x509_cert::der::Decode as _;
    use x509_cert::der::oid::db::rfc4519::{COMMON_NAME, ORGANIZATION_NAME};
    use x509_cert::ext::pkix::name::DirectoryString;
    let parsed = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    let subject = parsed.tbs_certificate().subject();
    let values = |oid| {
        subject
            .iter()
            .filter(move |attribute| attribute.oid == oid)
            .filter_map(|attribute| DirectoryString::try_from(&attribute.value).ok())
            .map(|value| value.value().into_owned())
    };
    let name = values(COMMON_NAME).last().filter(|name| !name.is_empty())?;
    let mut user = UserInfo::new(name);
    user.groups = values(ORGANIZATION_NAME).collect();
    user.groups.push(ALL_AUTHENTICATED.to_owned());
    Some(user)
}

/// The user of a TLS connection: that of its verified client certificate, if it sent one.
pub fn connection_user(connection: &rustls::ServerConnection) -> Option<UserInfo> {
    user_from_certificate(connection.peer_certificates()?.first()?)
}

/// A rustls server configuration serving `cert_file`/`key_file` (PEM), asking for a client
/// certificate signed by `client_ca_file` (kube-apiserver's `--client-ca-file`) without
/// requiring one (other authenticators may follow), with ALPN `h2` and `http/1.1`. Uses the
/// process's default crypto provider, else *ring* (feature `ring`).
pub fn server_tls_config(
    cert_file: &str,
    key_file: &str,
    client_ca_file: &str,
) -> Result<ServerConfig, PeerTlsError> {
    let read = |path: &str| {
        std::fs::read(path).map_err(|source| PeerTlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let chain = certificates_from_pem(&read(cert_file)?, cert_file)?;
    let key = private_key_from_pem(&read(key_file)?, key_file)?;
    let mut roots = RootCertStore::empty();
    for ca in certificates_from_pem(&read(client_ca_file)?, client_ca_file)? {
        roots.add(ca)?;
    }
    let provider = crate::peer_tls::crypto_provider().ok_or(PeerTlsError::NoCryptoProvider)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|err| PeerTlsError::Rustls(rustls::Error::General(err.to_string())))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Puts one connection's [`UserInfo`] (when it has one) into every request's extensions, where
/// the filter reads it.
#[derive(Clone, Debug)]
pub struct UserInfoLayer {
    user: Option<UserInfo>,
}

impl UserInfoLayer {
    /// A layer giving requests `user` (usually [`connection_user`]).
    pub fn new(user: Option<UserInfo>) -> Self {
        Self { user }
    }
}

impl<S> tower_layer::Layer<S> for UserInfoLayer {
    type Service = WithUserInfo<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WithUserInfo {
            inner,
            user: self.user.clone(),
        }
    }
}

/// The service of [`UserInfoLayer`].
#[derive(Clone, Debug)]
pub struct WithUserInfo<S> {
    inner: S,
    user: Option<UserInfo>,
}

impl<S, B> tower_service::Service<http::Request<B>> for WithUserInfo<S>
where
    S: tower_service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Some(user) = &self.user {
            request.extensions_mut().insert(user.clone());
        }
        self.inner.call(request)
    }
}

/// Serves `app` over TLS on `listener` until the listener fails: per connection, the TLS
/// handshake with `config` (see [`server_tls_config`]), the client certificate's user put into
/// each request ([`UserInfoLayer`]) and so is the client's address ([`RemoteAddr`](crate::RemoteAddr),
/// which a proxied request carries to the peer as `X-Forwarded-For`), then HTTP/1.1 or HTTP/2. A
/// failed handshake closes that connection only. Spawn it; requires the cargo feature `server`.
#[cfg(feature = "server")]
pub async fn serve_tls<S, B>(
    listener: tokio::net::TcpListener,
    config: ServerConfig,
    app: S,
) -> std::io::Result<()>
where
    S: tower_service::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<B>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use tower_layer::Layer as _;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    loop {
        let (tcp, remote) = listener.accept().await?;
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let user = connection_user(tls.get_ref().1);
            let app = WithRemoteAddr {
                inner: UserInfoLayer::new(user).layer(app),
                remote: crate::RemoteAddr(remote),
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let _ = builder
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
        });
    }
}

/// [`serve_tls`]'s service of one connection: puts the client's address into every request.
#[cfg(feature = "server")]
#[derive(Clone)]
struct WithRemoteAddr<S> {
    inner: S,
    remote: crate::RemoteAddr,
}

#[cfg(feature = "server")]
impl<S, B> tower_service::Service<http::Request<B>> for WithRemoteAddr<S>
where
    S: tower_service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.remote);
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::TestCa;

    #[test]
    fn common_name_is_the_user_and_organizations_the_groups() {
        // (rcgen writes one attribute per type, so one organization.)
        let (chain, _) = TestCa::new("ca").client("jane", &["dev"]);
        let user = user_from_certificate(&chain[0]).unwrap();
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, ["dev", "system:authenticated"]);
    }

    #[test]
    fn no_common_name_or_no_certificate_is_no_user() {
        let (chain, _) = TestCa::new("ca").client("", &["dev"]);
        assert_eq!(user_from_certificate(&chain[0]), None);
        assert_eq!(
            user_from_certificate(&CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01])),
            None
        );
    }

    #[tokio::test]
    async fn the_layer_puts_the_connection_user_into_each_request() {
        use tower_layer::Layer as _;
        use tower_service::Service as _;
        let seen = |req: http::Request<()>| async move {
            Ok::<_, std::convert::Infallible>(req.extensions().get::<UserInfo>().map(|u| u.name.clone()))
        };
        let mut with = UserInfoLayer::new(Some(UserInfo::new("jane"))).layer(tower::service_fn(seen));
        assert_eq!(
            with.call(http::Request::new(())).await.unwrap().as_deref(),
            Some("jane")
        );
        let mut without = UserInfoLayer::new(None).layer(tower::service_fn(seen));
        assert_eq!(without.call(http::Request::new(())).await.unwrap(), None);
    }
}
