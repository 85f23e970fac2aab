//! The receiving side of the front-proxy handshake: kube-apiserver's requestheader authenticator.
//!
//! A peer (or kube-aggregator, or any front proxy) authenticates with a client certificate
//! signed by the requestheader CA (`--requestheader-client-ca-file`) whose CN is in
//! `--requestheader-allowed-names` (empty list = any CN), and names the user it acts for in
//! headers (`--requestheader-username-headers`, `-uid-headers`, `-group-headers`,
//! `-extra-headers-prefix`). Upstream: `authentication/request/headerrequest/requestheader.go`
//! wrapped in `authentication/request/x509`'s CA verifier.
//!
//! Identity headers are trusted *only* through this authenticator: a server must remove them
//! from every request ([`RequestHeaderAuthenticator::strip_identity_headers`], or
//! [`strip_standard_identity_headers`] when no requestheader CA is configured) so that no
//! other client can claim an identity by sending `X-Remote-User` (rust-stack pitfall 6).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use http::header::{HeaderMap, HeaderName};
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::user::UserInfo;

/// The standard username header (client-go's auth-proxy round tripper always sends it).
pub(crate) const REMOTE_USER_HEADER: &str = "X-Remote-User";
/// The standard UID header.
pub(crate) const REMOTE_UID_HEADER: &str = "X-Remote-Uid";
/// The standard group header (repeated, one value per group).
pub(crate) const REMOTE_GROUP_HEADER: &str = "X-Remote-Group";
/// The standard prefix of extra headers (`X-Remote-Extra-<escaped key>`).
pub(crate) const REMOTE_EXTRA_HEADER_PREFIX: &str = "X-Remote-Extra-";

/// Errors of the requestheader authenticator.
#[derive(Debug, thiserror::Error)]
pub enum RequestHeaderError {
    /// A configured header name is empty after trimming (upstream `trimHeaders`).
    #[error("empty header {0:?}")]
    EmptyHeader(String),
    /// A configured header name is not a valid HTTP header name.
    #[error("invalid header name {0:?}")]
    InvalidHeaderName(String),
    /// No requestheader client CA certificate was configured.
    #[error("missing clientCA file")]
    MissingClientCa,
    /// A requestheader CA certificate could not be added to the trust store.
    #[error("error loading requestheader client CA")]
    InvalidClientCa(#[source] rustls::Error),
    /// The client-certificate verifier could not be built from the CA.
    #[error("error building requestheader verifier")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
    /// The connection's client certificate does not chain to the requestheader CA (or is not
    /// valid for client authentication).
    #[error("x509: {0}")]
    Unverified(#[source] rustls::Error),
    /// The client certificate could not be parsed to read its subject.
    #[error("x509: failed to parse client certificate: {0}")]
    ParseCertificate(String),
    /// The certificate's CN is not in `--requestheader-allowed-names`.
    #[error("x509: subject with cn={0} is not in the allowed list")]
    CommonNameNotAllowed(String),
    /// No rustls crypto provider: the `ring` feature is off and the process installed no
    /// default (`CryptoProvider::install_default`).
    #[error("no rustls crypto provider: enable mvp-core's `ring` feature or install a process-wide default")]
    NoCryptoProvider,
}

/// Configuration of the requestheader authenticator, mirroring the `--requestheader-*` flags.
#[derive(Clone, Debug, Default)]
pub struct RequestHeaderConfig {
    /// CA certificates (DER) that front-proxy client certificates must chain to
    /// (`--requestheader-client-ca-file`).
    pub client_ca: Vec<CertificateDer<'static>>,
    /// Allowed client certificate CNs (`--requestheader-allowed-names`); empty = any CN.
    pub allowed_names: Vec<String>,
    /// Headers checked in order for the user name; the first non-empty one wins
    /// (`--requestheader-username-headers`).
    pub username_headers: Vec<String>,
    /// Headers checked in order for the UID (`--requestheader-uid-headers`).
    pub uid_headers: Vec<String>,
    /// Headers whose values (all of them) are the groups (`--requestheader-group-headers`).
    pub group_headers: Vec<String>,
    /// Header prefixes carrying extras (`--requestheader-extra-headers-prefix`).
    pub extra_headers_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// A configuration trusting `client_ca` with the standard `X-Remote-*` header names, as
    /// kubeadm configures kube-apiserver and as `NewDelegatingAuthenticationOptions` defaults.
    pub fn with_standard_headers(client_ca: Vec<CertificateDer<'static>>) -> Self {
        Self {
            client_ca,
            allowed_names: Vec::new(),
            username_headers: vec![REMOTE_USER_HEADER.to_owned()],
            uid_headers: vec![REMOTE_UID_HEADER.to_owned()],
            group_headers: vec![REMOTE_GROUP_HEADER.to_owned()],
            extra_headers_prefixes: vec![REMOTE_EXTRA_HEADER_PREFIX.to_owned()],
        }
    }
}

/// The requestheader authenticator built from a [`RequestHeaderConfig`].
///
/// Cheap to share (`Clone` copies an `Arc`'d verifier and small header lists).
#[derive(Clone)]
pub struct RequestHeaderAuthenticator {
    verifier: Arc<dyn ClientCertVerifier>,
    allowed_names: Vec<String>,
    username_headers: Vec<HeaderName>,
    uid_headers: Vec<HeaderName>,
    group_headers: Vec<HeaderName>,
    /// Lowercased, as `HeaderMap` names are.
    extra_prefixes: Vec<String>,
}

impl fmt::Debug for RequestHeaderAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestHeaderAuthenticator")
            .field("allowed_names", &self.allowed_names)
            .field("username_headers", &self.username_headers)
            .field("uid_headers", &self.uid_headers)
            .field("group_headers", &self.group_headers)
            .field("extra_prefixes", &self.extra_prefixes)
            .finish_non_exhaustive()
    }
}

impl RequestHeaderAuthenticator {
    /// Validates the configuration (non-empty CA, non-empty header names after trimming) and
    /// builds a client-certificate verifier that trusts only the requestheader CA.
    pub fn new(config: &RequestHeaderConfig) -> Result<Self, RequestHeaderError> {
        if config.client_ca.is_empty() {
            return Err(RequestHeaderError::MissingClientCa);
        }
        let mut roots = RootCertStore::empty();
        for ca in &config.client_ca {
            roots
                .add(ca.clone())
                .map_err(RequestHeaderError::InvalidClientCa)?;
        }
        let provider = crate::peer_tls::crypto_provider().ok_or(RequestHeaderError::NoCryptoProvider)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(RequestHeaderError::Verifier)?;
        let prefixes = trim_headers(&config.extra_headers_prefixes)?;
        for p in &prefixes {
            // A prefix must itself be a valid header-name fragment.
            HeaderName::from_bytes(p.as_bytes())
                .map_err(|_| RequestHeaderError::InvalidHeaderName(p.clone()))?;
        }
        Ok(Self {
            verifier,
            allowed_names: config.allowed_names.clone(),
            username_headers: header_names(&config.username_headers)?,
            uid_headers: header_names(&config.uid_headers)?,
            group_headers: header_names(&config.group_headers)?,
            extra_prefixes: prefixes.into_iter().map(|p| p.to_ascii_lowercase()).collect(),
        })
    }

    /// Authenticates a request from its connection's client certificate chain (leaf first, as
    /// `rustls::ServerConnection::peer_certificates` returns it) and its headers.
    ///
    /// - `Ok(None)`: not authenticated by this authenticator (no client certificate, or no
    ///   username header), upstream's `nil, false, nil`; other authenticators decide.
    /// - `Err(_)`: a client certificate was presented but does not verify against the
    ///   requestheader CA, or its CN is not allowed; upstream's union authenticator then
    ///   carries on with the other authenticators too.
    /// - `Ok(Some(user))`: the identity from the headers.
    ///
    /// Call [`Self::strip_identity_headers`] afterwards in every case.
    pub fn authenticate(
        &self,
        peer_certificates: &[CertificateDer<'_>],
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, RequestHeaderError> {
        if !self.verify_chain(peer_certificates)? {
            return Ok(None);
        }
        Ok(self.user_from_headers(headers))
    }

    /// The certificate half of [`Self::authenticate`]: whether `peer_certificates` (leaf first) come
    /// from a front proxy this server trusts — they verify against the requestheader CA and, when
    /// allowed names are configured, the leaf's CN is one of them. `Ok(false)` when no certificate
    /// was presented.
    ///
    /// The verdict depends only on the chain and on the time through the certificates' validity
    /// windows, so a server may keep it for all requests of a connection while no certificate of the
    /// chain has expired, instead of verifying a signature on every request.
    pub fn verify_chain(&self, peer_certificates: &[CertificateDer<'_>]) -> Result<bool, RequestHeaderError> {
        let Some((leaf, intermediates)) = peer_certificates.split_first() else {
            return Ok(false);
        };
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map_err(RequestHeaderError::Unverified)?;
        if !self.allowed_names.is_empty() {
            let cn = common_name(leaf)?;
            if !self.allowed_names.contains(&cn) {
                return Err(RequestHeaderError::CommonNameNotAllowed(cn));
            }
        }
        Ok(true)
    }

    /// The identity named by the headers alone (upstream `requestHeaderAuthRequestHandler`),
    /// without any certificate check. `None` when no username header has a value.
    pub fn user_from_headers(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let name = first_header_value(headers, &self.username_headers)?;
        let uid = first_header_value(headers, &self.uid_headers).unwrap_or_default();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h))
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .filter(|v| !v.is_empty())
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for prefix in &self.extra_prefixes {
            for (name, value) in headers {
                if let Some(raw_key) = name.as_str().strip_prefix(prefix.as_str()) {
                    extra
                        .entry(unescape_extra_key(raw_key))
                        .or_default()
                        .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
                }
            }
        }
        Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        })
    }

    /// Removes the configured identity headers and the standard `X-Remote-*` ones.
    pub fn strip_identity_headers(&self, headers: &mut HeaderMap) {
        for name in self
            .username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
        {
            headers.remove(name);
        }
        for prefix in &self.extra_prefixes {
            remove_prefixed(headers, prefix);
        }
        strip_standard_identity_headers(headers);
    }
}

/// Removes the standard identity headers (`X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group`,
/// `X-Remote-Extra-*`): what a server without a requestheader authenticator must do with
/// every request, and what the proxy does before it sets its own.
pub fn strip_standard_identity_headers(headers: &mut HeaderMap) {
    for name in [REMOTE_USER_HEADER, REMOTE_UID_HEADER, REMOTE_GROUP_HEADER] {
        headers.remove(name);
    }
    remove_prefixed(headers, "x-remote-extra-");
}

/// Removes every header whose (lowercase) name starts with `prefix` (lowercase).
fn remove_prefixed(headers: &mut HeaderMap, prefix: &str) {
    let doomed: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(prefix))
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(&name);
    }
}

/// `h.Get(name)` for each name in order; the first non-empty value wins.
fn first_header_value(headers: &HeaderMap, names: &[HeaderName]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| headers.get(n))
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .find(|v| !v.is_empty())
}

/// Upstream `unescapeExtraKey` applied to the lowercased remainder of the header name:
/// `url.PathUnescape`, or the raw key when that fails (malformed `%` escapes).
fn unescape_extra_key(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let valid =
                bytes.len() > i + 2 && bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit();
            if !valid {
                return raw.to_owned();
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    percent_encoding::percent_decode_str(raw)
        .decode_utf8_lossy()
        .into_owned()
}

fn trim_headers(names: &[String]) -> Result<Vec<String>, RequestHeaderError> {
    names
        .iter()
        .map(|n| {
            let t = n.trim();
            if t.is_empty() {
                Err(RequestHeaderError::EmptyHeader(n.clone()))
            } else {
                Ok(t.to_owned())
            }
        })
        .collect()
}

fn header_names(names: &[String]) -> Result<Vec<HeaderName>, RequestHeaderError> {
    trim_headers(names)?
        .into_iter()
        .map(|n| HeaderName::from_bytes(n.as_bytes()).map_err(|_| RequestHeaderError::InvalidHeaderName(n)))
        .collect()
}

/// The subject CN of a certificate; like Go's `pkix.Name`, the last CN attribute wins (and one whose value
/// is not a string is skipped).
pub(crate) fn common_name(cert: &CertificateDer<'_>) -> Result<String, RequestHeaderError> {
    use x509_cert::der::Decode as _;
    use x509_cert::der::oid::db::rfc4519::COMMON_NAME;
    use x509_cert::ext::pkix::name::DirectoryString;
    let parsed = x509_cert::Certificate::from_der(cert.as_ref())
        .map_err(|e| RequestHeaderError::ParseCertificate(e.to_string()))?;
    Ok(parsed
        .tbs_certificate()
        .subject()
        .iter()
        .filter(|attribute| attribute.oid == COMMON_NAME)
        .filter_map(|attribute| DirectoryString::try_from(&attribute.value).ok())
        .last()
        .map(|cn| cn.value().into_owned())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::TestPki;
    use http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn authenticator(pki: &TestPki, allowed: &[&str]) -> RequestHeaderAuthenticator {
        let mut cfg = RequestHeaderConfig::with_standard_headers(vec![pki.front_proxy_ca.cert_der()]);
        cfg.allowed_names = allowed.iter().map(|s| (*s).to_owned()).collect();
        RequestHeaderAuthenticator::new(&cfg).unwrap()
    }

    #[test]
    fn trusted_front_proxy_cert_yields_user_from_headers() {
        let pki = TestPki::new();
        let auth = authenticator(&pki, &["ash", "misty", "brock"]);
        let h = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Uid", "u-1"),
            ("X-Remote-Group", "devs"),
            ("X-Remote-Group", ""),
            ("X-Remote-Group", "ops"),
            ("X-Remote-Extra-Scopes", "a"),
            ("X-Remote-Extra-Scopes", "b"),
            ("X-Remote-Extra-Foo%2Fbar", "c"),
            ("X-Remote-Extra-Bad%zz", "d"),
        ]);
        let user = auth
            .authenticate(&pki.front_proxy_client_chain("misty"), &h)
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.uid, "u-1");
        assert_eq!(user.groups, vec!["devs", "ops"]);
        let extra: Vec<(&str, Vec<&str>)> = user
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            extra,
            vec![
                ("bad%zz", vec!["d"]),
                ("foo/bar", vec!["c"]),
                ("scopes", vec!["a", "b"])
            ]
        );
    }

    #[test]
    fn empty_allowed_names_accepts_any_cn() {
        let pki = TestPki::new();
        let auth = authenticator(&pki, &[]);
        let user = auth
            .authenticate(
                &pki.front_proxy_client_chain("anyone"),
                &headers(&[("X-Remote-User", "bob")]),
            )
            .unwrap();
        assert_eq!(user.map(|u| u.name), Some("bob".to_owned()));
    }

    #[test]
    fn disallowed_cn_is_rejected_with_upstream_message() {
        let pki = TestPki::new();
        let auth = authenticator(&pki, &["ash", "brock"]);
        let err = auth
            .authenticate(
                &pki.front_proxy_client_chain("misty"),
                &headers(&[("X-Remote-User", "bob")]),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "x509: subject with cn=misty is not in the allowed list"
        );
    }

    #[test]
    fn common_name_reads_real_certificates_and_rejects_garbage() {
        let pki = TestPki::new();
        let chain = pki.cluster_client_chain("kubernetes-admin");
        assert_eq!(common_name(&chain[0]).unwrap(), "kubernetes-admin");
        let err = common_name(&CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01])).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("x509: failed to parse client certificate: "),
            "{err}"
        );
    }

    #[test]
    fn cert_from_another_ca_is_rejected() {
        let pki = TestPki::new();
        let auth = authenticator(&pki, &[]);
        let err = auth
            .authenticate(
                &pki.cluster_client_chain("misty"),
                &headers(&[("X-Remote-User", "bob")]),
            )
            .unwrap_err();
        assert!(matches!(err, RequestHeaderError::Unverified(_)), "{err}");
    }

    #[test]
    fn no_cert_or_no_username_is_not_authenticated() {
        let pki = TestPki::new();
        let auth = authenticator(&pki, &[]);
        assert!(
            auth.authenticate(&[], &headers(&[("X-Remote-User", "bob")]))
                .unwrap()
                .is_none()
        );
        let chain = pki.front_proxy_client_chain("misty");
        assert!(
            auth.authenticate(&chain, &headers(&[("X-Remote-Group", "g")]))
                .unwrap()
                .is_none()
        );
        assert!(
            auth.authenticate(&chain, &headers(&[("X-Remote-User", "")]))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn username_headers_are_tried_in_order_first_value_only() {
        let pki = TestPki::new();
        let cfg = RequestHeaderConfig {
            client_ca: vec![pki.front_proxy_ca.cert_der()],
            username_headers: vec![" X-First ".into(), "X-Second".into()],
            group_headers: vec!["X-G1".into(), "X-G2".into()],
            extra_headers_prefixes: vec!["X-E1-".into(), "X-E2-".into()],
            ..RequestHeaderConfig::default()
        };
        let auth = RequestHeaderAuthenticator::new(&cfg).unwrap();
        let h = headers(&[
            ("X-First", ""),
            ("X-First", "ignored"),
            ("X-Second", "carol"),
            ("X-G2", "b"),
            ("X-G1", "a"),
            ("X-E1-K", "1"),
            ("X-E2-K", "2"),
        ]);
        let user = auth.user_from_headers(&h).unwrap();
        assert_eq!(user.name, "carol");
        assert_eq!(user.uid, "");
        assert_eq!(user.groups, vec!["a", "b"]);
        assert_eq!(
            user.extra.get("k").unwrap(),
            &vec!["1".to_owned(), "2".to_owned()]
        );
    }

    #[test]
    fn invalid_configuration_is_rejected() {
        let pki = TestPki::new();
        assert!(matches!(
            RequestHeaderAuthenticator::new(&RequestHeaderConfig::default()),
            Err(RequestHeaderError::MissingClientCa)
        ));
        let mut cfg = RequestHeaderConfig::with_standard_headers(vec![pki.front_proxy_ca.cert_der()]);
        cfg.group_headers.push("  ".into());
        let err = RequestHeaderAuthenticator::new(&cfg).unwrap_err();
        assert_eq!(err.to_string(), "empty header \"  \"");
    }

    #[test]
    fn strip_removes_configured_and_standard_identity_headers() {
        let pki = TestPki::new();
        let cfg = RequestHeaderConfig {
            client_ca: vec![pki.front_proxy_ca.cert_der()],
            username_headers: vec!["X-Custom-User".into()],
            uid_headers: vec!["X-Custom-Uid".into()],
            group_headers: vec!["X-Custom-Group".into()],
            extra_headers_prefixes: vec!["X-Custom-Extra-".into()],
            ..RequestHeaderConfig::default()
        };
        let auth = RequestHeaderAuthenticator::new(&cfg).unwrap();
        let mut h = headers(&[
            ("X-Custom-User", "a"),
            ("X-Custom-Uid", "a"),
            ("X-Custom-Group", "a"),
            ("X-Custom-Extra-k", "a"),
            ("X-Remote-User", "a"),
            ("X-Remote-Uid", "a"),
            ("X-Remote-Group", "a"),
            ("X-Remote-Extra-k", "a"),
            ("Accept", "application/json"),
        ]);
        auth.strip_identity_headers(&mut h);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), vec!["accept"]);
    }
}
