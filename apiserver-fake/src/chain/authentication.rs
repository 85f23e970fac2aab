//! Authentication: who is calling.
//!
//! Mirrors kube-apiserver's authenticator union, in its order: requestheader (front-proxy certificate plus
//! `X-Remote-*` headers, via [`mvp_core::RequestHeaderAuthenticator`]), x509 client certificates (CN = user, O = groups),
//! static bearer tokens (`--token-auth-file`) and ServiceAccount tokens
//! ([`crate::api::serviceaccount`], checked against the store in [`Authenticator::authenticate_request`]). Identity headers are believed only from a client the
//! requestheader authenticator accepted; from anyone else they are removed before the request goes on.
//! Every authenticated user gets `system:authenticated`, as upstream's group adder does.
//!
//! Its filter, [`authenticate`], is kube-apiserver's `WithAuthentication` and, in the same step,
//! `WithImpersonation` ([`super::impersonation`]): the user every later stage reads from the request's
//! extensions is the impersonated one. (Upstream audits between the two, recording the caller and the
//! user it impersonates; the fake's audit events name the impersonated user.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use http::header::AUTHORIZATION;
use mvp_core::UserInfo;
use mvp_core::{RequestHeaderAuthenticator, RequestHeaderConfig};
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::{ServerContext, http_log, impersonation};
use crate::api::AUTHENTICATED_GROUP;
use crate::api::catalog::KubeVersion;
use crate::api::serviceaccount::{ServiceAccountKeyError, ServiceAccountOptions, ServiceAccountTokens};
use crate::api::status::Status;
use crate::store::Store;

/// Paths answered without credentials, as a default RBAC setup lets `system:anonymous` read them
/// (`system:public-info-viewer`), so health probes work without a client certificate.
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// The filter: authentication, then impersonation (the caller must be allowed to impersonate the user
/// it names). The user goes into the request's extensions, and its name into the response's for the
/// `--v=3` request log line ([`http_log`]). Unauthenticated requests get kube-apiserver's 401 Status,
/// except on [`PUBLIC_PATHS`], which continue without a user.
pub(super) async fn authenticate<S: ServerContext>(
    State((authenticator, state)): State<(Arc<Authenticator>, Arc<S>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let conn = req
        .extensions()
        .get::<ConnectionInfo>()
        .cloned()
        .unwrap_or_default();
    let user = authenticator
        .authenticate_request(&conn, req.headers_mut(), state.store().as_ref())
        .await;
    let user = match user {
        Some(user) => match impersonation::effective_user(state.authorizer(), user, req.headers_mut()) {
            Ok(user) => user,
            Err(status) => return status.into_response(),
        },
        None if PUBLIC_PATHS.contains(&req.uri().path()) => return next.run(req).await,
        None => return Status::unauthorized().into_response(),
    };
    let logged = http_log::logged_user(&user);
    req.extensions_mut().insert(user);
    let mut response = next.run(req).await;
    http_log::attach_user(&mut response, logged);
    response
}

/// What the TLS layer learned about a connection; inserted into every request's extensions.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectionInfo {
    /// The remote socket address.
    pub remote_addr: Option<std::net::SocketAddr>,
    /// The client's certificate chain, leaf first, if it presented one (it verified against the union of
    /// trusted client CAs during the handshake).
    pub client_chain: Option<Arc<Vec<CertificateDer<'static>>>>,
    /// What the authenticators concluded about `client_chain`, shared by all requests of the connection.
    pub chain_verdicts: Arc<ChainVerdicts>,
}

/// The authenticators' verdicts about one connection's client certificate chain, computed on its first
/// request and reused by the next ones.
///
/// kube-apiserver verifies the chain (a signature check) on every request; the outcome can only change
/// when a certificate of the chain expires, so a verdict is reused only before the chain's earliest
/// `notAfter` and recomputed afterwards. The answers are the same, the per-request cost of a connection
/// that carries many requests (a peer's proxy connection above all) is not.
#[derive(Debug, Default)]
pub(crate) struct ChainVerdicts {
    /// Whether the chain is a trusted front proxy's (requestheader).
    front_proxy: OnceLock<bool>,
    /// The x509 user of the chain, if it verifies against the client CA.
    x509_user: OnceLock<Option<UserInfo>>,
    /// Unix seconds from which no verdict is reused (`i64::MIN` when the chain does not parse).
    expires_at: OnceLock<i64>,
}

impl ChainVerdicts {
    fn reuse<T: Clone>(
        &self,
        cell: &OnceLock<T>,
        chain: &[CertificateDer<'static>],
        compute: impl FnOnce() -> T,
    ) -> T {
        let expires_at = *self
            .expires_at
            .get_or_init(|| earliest_not_after(chain).unwrap_or(i64::MIN));
        if UnixTime::now().as_secs() as i64 >= expires_at {
            return compute();
        }
        cell.get_or_init(compute).clone()
    }
}

/// The earliest `notAfter` of `chain`, in Unix seconds.
fn earliest_not_after(chain: &[CertificateDer<'static>]) -> Option<i64> {
    chain
        .iter()
        .map(|cert| {
            x509_parser::parse_x509_certificate(cert)
                .ok()
                .map(|(_, parsed)| parsed.validity().not_after.timestamp())
        })
        .try_fold(i64::MAX, |earliest, not_after| Some(earliest.min(not_after?)))
}

/// Why authentication could not even be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// A CA or token file could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A CA file holds no usable certificate.
    #[error("{path}: {reason}")]
    BadCa {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The token file is malformed (kube-apiserver's wording).
    #[error("{0}")]
    TokenFile(String),
    /// The requestheader authenticator rejected its configuration.
    #[error("requestheader")]
    RequestHeader(#[source] mvp_core::RequestHeaderError),
    /// The service-account keys are unusable.
    #[error(transparent)]
    ServiceAccount(#[from] ServiceAccountKeyError),
}

/// The union of authenticators a server runs.
pub(crate) struct Authenticator {
    request_header: Option<RequestHeaderAuthenticator>,
    client_ca: Option<ClientCa>,
    tokens: HashMap<String, UserInfo>,
    service_accounts: Arc<ServiceAccountTokens>,
    anonymous: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("request_header", &self.request_header.is_some())
            .field("client_ca", &self.client_ca.is_some())
            .field("tokens", &self.tokens.len())
            .field("anonymous", &self.anonymous)
            .finish()
    }
}

/// Reads every certificate of a PEM bundle.
pub(crate) fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, AuthSetupError> {
    let pem = std::fs::read(path).map_err(|source| AuthSetupError::Read {
        path: path.to_owned(),
        source,
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| AuthSetupError::BadCa {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(AuthSetupError::BadCa {
            path: path.to_owned(),
            reason: "no certificate found in file".to_owned(),
        });
    }
    Ok(certs)
}

/// A root store from a PEM CA bundle.
pub(crate) fn read_root_store(path: &Path) -> Result<RootCertStore, AuthSetupError> {
    let mut roots = RootCertStore::empty();
    for cert in read_pem_certs(path)? {
        roots.add(cert).map_err(|e| AuthSetupError::BadCa {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// Parses kube-apiserver's static token file: CSV lines `token,user,uid[,"group1,group2"]`.
pub(crate) fn parse_token_file(contents: &str) -> Result<HashMap<String, UserInfo>, AuthSetupError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(contents.as_bytes());
    let mut tokens = HashMap::new();
    for (index, record) in reader.records().enumerate() {
        let record = record.map_err(|e| AuthSetupError::TokenFile(format!("token file: {e}")))?;
        if record.len() < 3 {
            return Err(AuthSetupError::TokenFile(format!(
                "token file must have at least 3 columns (token, user name, user uid), found {} (line {})",
                record.len(),
                index + 1
            )));
        }
        let token = record[0].trim().to_owned();
        if token.is_empty() {
            continue;
        }
        let groups = record
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let user = UserInfo {
            name: record[1].to_owned(),
            uid: record[2].to_owned(),
            groups,
            ..Default::default()
        };
        tokens.insert(token, user);
    }
    Ok(tokens)
}

/// The authentication flags of kube-apiserver the fake reads (`ServerFlags::authentication` in
/// [`crate::server::config`] collects them).
#[derive(Debug, Clone, Default)]
pub struct AuthenticationOptions {
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// `--token-auth-file`.
    pub token_auth_file: Option<PathBuf>,
    /// `--anonymous-auth`.
    pub anonymous_auth: bool,
    /// `--requestheader-client-ca-file`.
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`.
    pub requestheader_allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub requestheader_username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub requestheader_uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub requestheader_group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// `--service-account-*` and `--api-audiences`.
    pub service_account: ServiceAccountOptions,
}

impl Authenticator {
    /// Builds the union from kube-apiserver's authentication flags (`binary_version` decides which
    /// claims ServiceAccount tokens carry).
    pub(crate) fn new(
        flags: &AuthenticationOptions,
        binary_version: KubeVersion,
    ) -> Result<Self, AuthSetupError> {
        let client_ca = match &flags.client_ca_file {
            Some(path) => Some(ClientCa {
                verifier: WebPkiClientVerifier::builder(Arc::new(read_root_store(path)?))
                    .build()
                    .map_err(|e| AuthSetupError::BadCa {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?,
                certs: read_pem_certs(path)?,
            }),
            None => None,
        };
        let request_header = match &flags.requestheader_client_ca_file {
            Some(path) => {
                let config = RequestHeaderConfig {
                    client_ca: read_pem_certs(path)?,
                    allowed_names: flags.requestheader_allowed_names.clone(),
                    username_headers: flags.requestheader_username_headers.clone(),
                    uid_headers: flags.requestheader_uid_headers.clone(),
                    group_headers: flags.requestheader_group_headers.clone(),
                    extra_headers_prefixes: flags.requestheader_extra_headers_prefix.clone(),
                };
                Some(RequestHeaderAuthenticator::new(&config).map_err(AuthSetupError::RequestHeader)?)
            }
            None => None,
        };
        let tokens = match &flags.token_auth_file {
            Some(path) => {
                let contents = std::fs::read_to_string(path).map_err(|source| AuthSetupError::Read {
                    path: path.clone(),
                    source,
                })?;
                parse_token_file(&contents)?
            }
            None => HashMap::new(),
        };
        Ok(Self {
            request_header,
            client_ca,
            tokens,
            service_accounts: Arc::new(ServiceAccountTokens::new(&flags.service_account, binary_version)?),
            anonymous: flags.anonymous_auth,
        })
    }

    /// The keys ServiceAccount tokens are signed and verified with.
    pub(crate) fn service_account_tokens(&self) -> &Arc<ServiceAccountTokens> {
        &self.service_accounts
    }

    /// The user of a static token (`--token-auth-file`), with `system:authenticated`.
    pub(crate) fn static_token_user(&self, token: &str) -> Option<UserInfo> {
        self.tokens.get(token).cloned().map(with_authenticated_group)
    }

    /// Authenticates a request with the whole union, ServiceAccount tokens included (their
    /// ServiceAccount must still be in `store`), a bearer JWT tried before anonymous. Identity
    /// headers are removed unless the requestheader authenticator vouched for the connection;
    /// `Authorization` is removed after a successful token login (as upstream). `None` means nobody
    /// could be authenticated (the caller answers 401): a bearer token no authenticator accepts is a
    /// 401 even with anonymous requests enabled, as upstream.
    pub(crate) async fn authenticate_request(
        &self,
        conn: &ConnectionInfo,
        headers: &mut HeaderMap,
        store: &dyn Store,
    ) -> Option<UserInfo> {
        if let Some(user) = self.authenticate_credentials(conn, headers) {
            return Some(user);
        }
        if let Some(token) = bearer_token(headers) {
            let audiences = self.service_accounts.api_audiences().to_vec();
            match self
                .service_accounts
                .authenticate(store, &token, &audiences)
                .await
            {
                Ok(Some((user, _))) => {
                    headers.remove(AUTHORIZATION);
                    return Some(with_authenticated_group(user));
                }
                Ok(None) => return None,
                Err(reason) => {
                    tracing::debug!(%reason, "service account token rejected");
                    return None;
                }
            }
        }
        self.anonymous()
    }

    fn anonymous(&self) -> Option<UserInfo> {
        self.anonymous.then(|| UserInfo {
            name: "system:anonymous".to_owned(),
            groups: vec!["system:unauthenticated".to_owned()],
            ..Default::default()
        })
    }

    /// The synchronous authenticators of the union, without anonymous.
    fn authenticate_credentials(&self, conn: &ConnectionInfo, headers: &mut HeaderMap) -> Option<UserInfo> {
        let chain = conn.client_chain.as_deref().map(Vec::as_slice);
        let verdicts = &conn.chain_verdicts;
        if let (Some(rh), Some(chain)) = (&self.request_header, chain)
            && verdicts.reuse(&verdicts.front_proxy, chain, || {
                rh.verify_chain(chain).unwrap_or(false)
            })
            && let Some(user) = rh.user_from_headers(headers)
        {
            rh.strip_identity_headers(headers);
            return Some(with_authenticated_group(user));
        }
        self.strip_identity_headers(headers);
        if let (Some(client_ca), Some(chain)) = (&self.client_ca, chain)
            && let Some(user) = verdicts.reuse(&verdicts.x509_user, chain, || x509_user(client_ca, chain))
        {
            return Some(with_authenticated_group(user));
        }
        if let Some(user) = self.token_user(headers) {
            headers.remove(AUTHORIZATION);
            return Some(with_authenticated_group(user));
        }
        None
    }

    fn strip_identity_headers(&self, headers: &mut HeaderMap) {
        match &self.request_header {
            Some(rh) => rh.strip_identity_headers(headers),
            None => mvp_core::strip_standard_identity_headers(headers),
        }
    }

    fn token_user(&self, headers: &HeaderMap) -> Option<UserInfo> {
        self.tokens.get(&bearer_token(headers)?).cloned()
    }
}

/// The bearer token of an `Authorization` header.
fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(token.trim().to_owned())
}

fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    if !user.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
        user.groups.push(AUTHENTICATED_GROUP.to_owned());
    }
    user
}

/// `--client-ca-file`: the verifier of client certificate chains, and the CA certificates themselves
/// (for v1 leaves, which the verifier cannot parse: [`crate::chain::x509_v1`]).
struct ClientCa {
    verifier: Arc<dyn ClientCertVerifier>,
    certs: Vec<CertificateDer<'static>>,
}

/// The user of a client certificate that chains to the client CA: CN is the name, each O a group.
fn x509_user(client_ca: &ClientCa, chain: &[CertificateDer<'static>]) -> Option<UserInfo> {
    let (leaf, intermediates) = chain.split_first()?;
    let now = UnixTime::now();
    let verified = if crate::chain::x509_v1::is_v1(leaf) {
        crate::chain::x509_v1::issued_by_trusted_ca(leaf, &client_ca.certs, now)
    } else {
        client_ca
            .verifier
            .verify_client_cert(leaf, intermediates, now)
            .is_ok()
    };
    if !verified {
        return None;
    }
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some(UserInfo {
        name,
        groups,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_verdict_is_computed_once_per_connection_until_the_chain_expires() {
        let ca = certs::CertificateAuthority::new_self_signed("kubernetes").unwrap();
        let chain = vec![
            ca.issue_client_cert("admin", &["system:masters"])
                .unwrap()
                .cert_der(),
        ];
        let expires_at = earliest_not_after(&chain).unwrap();
        assert!(expires_at > UnixTime::now().as_secs() as i64);

        let verdicts = ChainVerdicts::default();
        let computed = std::cell::Cell::new(0);
        for _ in 0..3 {
            let trusted = verdicts.reuse(&verdicts.front_proxy, &chain, || {
                computed.set(computed.get() + 1);
                true
            });
            assert!(trusted);
        }
        assert_eq!(computed.get(), 1, "valid chain: verified once");

        // A chain whose expiry cannot be read (or has passed) is verified on every request.
        let unreadable = vec![CertificateDer::from(vec![0u8; 8])];
        let verdicts = ChainVerdicts::default();
        computed.set(0);
        for _ in 0..3 {
            verdicts.reuse(&verdicts.front_proxy, &unreadable, || {
                computed.set(computed.get() + 1);
                false
            });
        }
        assert_eq!(computed.get(), 3);
    }

    #[test]
    fn token_file_parses_kube_apiserver_csv() {
        let tokens = parse_token_file("abc,alice,1001,\"devs,ops\"\n# comment\nxyz,bob,1002\n").unwrap();
        assert_eq!(tokens["abc"].name, "alice");
        assert_eq!(tokens["abc"].uid, "1001");
        assert_eq!(tokens["abc"].groups, vec!["devs", "ops"]);
        assert!(tokens["xyz"].groups.is_empty());
    }

    #[test]
    fn token_file_with_two_columns_is_rejected_with_upstreams_message() {
        let err = parse_token_file("abc,alice\n").unwrap_err().to_string();
        assert!(err.contains("must have at least 3 columns"), "{err}");
    }
}
