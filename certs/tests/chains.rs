//! The generated chains, SANs and subjects, checked the way servers and clients will check them: with
//! rustls/webpki verifiers, a real (in-memory) TLS handshake, and x509-parser for CN/O.

use std::sync::Arc;

use certs::{CertificateAuthority, Issuer, KeyedCert, Pki, PkiSpec, ServerSpec};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use rustls_pki_types::{ServerName, UnixTime};
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::{X509Certificate, parse_x509_certificate};

fn pki() -> Pki {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let spec = PkiSpec::new([
        ServerSpec::new("a", ["127.0.0.1".parse().unwrap()]),
        ServerSpec::new("b", ["127.0.0.2".parse().unwrap(), "::1".parse().unwrap()]).with_dns("b.example"),
    ]);
    Pki::generate(&spec).unwrap()
}

fn roots(ca: &KeyedCert) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert_der()).unwrap();
    Arc::new(roots)
}

fn server_verifies(ca: &KeyedCert, server: &KeyedCert, name: &str) -> bool {
    let verifier = WebPkiServerVerifier::builder(roots(ca)).build().unwrap();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    verifier
        .verify_server_cert(&server.cert_der(), &[], &name, &[], UnixTime::now())
        .is_ok()
}

fn client_verifies(ca: &KeyedCert, client: &KeyedCert) -> bool {
    let verifier = WebPkiClientVerifier::builder(roots(ca)).build().unwrap();
    verifier
        .verify_client_cert(&client.cert_der(), &[], UnixTime::now())
        .is_ok()
}

/// `(CN, [O...])` of a certificate's subject.
fn subject(cert: &KeyedCert) -> (String, Vec<String>) {
    let der = cert.cert_der();
    let (_, parsed) = parse_x509_certificate(&der).unwrap();
    let cn = parsed
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    assert_eq!(cn.len(), 1, "exactly one CN in {}", parsed.subject());
    let orgs = parsed
        .subject()
        .iter_organization()
        .map(|o| o.as_str().unwrap().to_owned())
        .collect();
    (cn[0].clone(), orgs)
}

fn with_parsed<T>(cert: &KeyedCert, f: impl FnOnce(&X509Certificate<'_>) -> T) -> T {
    let der = cert.cert_der();
    let (_, parsed) = parse_x509_certificate(&der).unwrap();
    f(&parsed)
}

#[test]
fn serving_certs_verify_for_their_ips_and_the_kubernetes_names() {
    let pki = pki();
    let (a, b) = (pki.server("a").unwrap(), pki.server("b").unwrap());
    for name in [
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ] {
        assert!(server_verifies(pki.ca(), a, name), "a should verify for {name}");
    }
    for name in ["127.0.0.2", "::1", "b.example", "kubernetes.default.svc"] {
        assert!(server_verifies(pki.ca(), b, name), "b should verify for {name}");
    }
}

#[test]
fn serving_certs_do_not_verify_for_unlisted_names_or_other_cas() {
    let pki = pki();
    let a = pki.server("a").unwrap();
    for name in [
        "127.0.0.2",
        "::1",
        "b.example",
        "example.com",
        "kube-apiserver",
        "kubernetes.default.svc.x",
    ] {
        assert!(
            !server_verifies(pki.ca(), a, name),
            "a must not verify for {name}"
        );
    }
    // 127.0.0.1 is only there when asked for.
    assert!(!server_verifies(pki.ca(), pki.server("b").unwrap(), "127.0.0.1"));
    assert!(!server_verifies(
        pki.front_proxy_ca(),
        a,
        "kubernetes.default.svc"
    ));
    let unrelated = CertificateAuthority::new_self_signed("kubernetes").unwrap();
    assert!(!server_verifies(unrelated.cert(), a, "kubernetes.default.svc"));
}

#[test]
fn client_certs_chain_to_their_own_ca_only() {
    let pki = pki();
    assert!(client_verifies(pki.ca(), pki.admin()));
    assert!(!client_verifies(pki.front_proxy_ca(), pki.admin()));
    assert!(client_verifies(pki.front_proxy_ca(), pki.front_proxy_client()));
    assert!(!client_verifies(pki.ca(), pki.front_proxy_client()));

    let proxy = pki
        .issue_client_cert(Issuer::FrontProxyCa, "not-allowed", &[])
        .unwrap();
    assert!(client_verifies(pki.front_proxy_ca(), &proxy));
    assert!(!client_verifies(pki.ca(), &proxy));
    let user = pki
        .issue_client_cert(Issuer::ClusterCa, "alice", &["devs"])
        .unwrap();
    assert!(client_verifies(pki.ca(), &user));
    assert!(!client_verifies(pki.front_proxy_ca(), &user));

    let unknown = CertificateAuthority::new_self_signed("kubernetes").unwrap();
    let stranger = unknown.issue_client_cert("admin", &["system:masters"]).unwrap();
    assert!(client_verifies(unknown.cert(), &stranger));
    assert!(!client_verifies(pki.ca(), &stranger));
    assert!(!client_verifies(pki.front_proxy_ca(), &stranger));
}

#[test]
fn extended_key_usages_keep_serving_and_client_certs_apart() {
    let pki = pki();
    // A serving certificate is not a client certificate (EKU serverAuth only) ...
    assert!(!client_verifies(pki.ca(), pki.server("a").unwrap()));
    // The same holds for serving certificates issued later, e.g. for a server added to the cluster.
    let ip = "127.0.0.9".parse().unwrap();
    let late = pki
        .authority(Issuer::ClusterCa)
        .issue_serving_cert("kube-apiserver", &[ip], &[])
        .unwrap();
    assert!(server_verifies(pki.ca(), &late, "127.0.0.9"));
    assert!(!client_verifies(pki.ca(), &late));
    let eku = |cert: &KeyedCert| {
        with_parsed(cert, |c| {
            let eku = c.extended_key_usage().unwrap().unwrap().value;
            (eku.server_auth, eku.client_auth)
        })
    };
    assert_eq!(eku(pki.server("a").unwrap()), (true, false));
    assert_eq!(eku(pki.admin()), (false, true));
    assert_eq!(eku(pki.front_proxy_client()), (false, true));
}

#[test]
fn subjects_carry_kubernetes_users_and_groups() {
    let pki = pki();
    assert_eq!(
        subject(pki.admin()),
        ("admin".to_owned(), vec!["system:masters".to_owned()])
    );
    assert_eq!(
        subject(pki.front_proxy_client()),
        ("front-proxy-client".to_owned(), vec![])
    );
    assert_eq!(
        subject(pki.server("a").unwrap()),
        ("kube-apiserver".to_owned(), vec![])
    );
    assert_eq!(subject(pki.ca()).0, "kubernetes");
    assert_eq!(subject(pki.front_proxy_ca()).0, "front-proxy-ca");

    let two = pki
        .issue_client_cert(Issuer::ClusterCa, "alice", &["devs", "ops"])
        .unwrap();
    assert_eq!(
        subject(&two),
        ("alice".to_owned(), vec!["devs".to_owned(), "ops".to_owned()])
    );
    assert!(matches!(
        pki.issue_client_cert(Issuer::ClusterCa, "alice", &["a", "b", "c"]),
        Err(certs::Error::TooManyGroups {
            count: 3,
            max: certs::MAX_GROUPS
        })
    ));

    let custom =
        Pki::generate(&PkiSpec::new([ServerSpec::new("a", [])]).with_front_proxy_client_cn("aggregator"))
            .unwrap();
    assert_eq!(subject(custom.front_proxy_client()).0, "aggregator");
}

#[test]
fn cas_and_leaves_have_kubeadm_like_extensions_and_validity() {
    let pki = pki();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let day = 24 * 3600;
    for (ca, years) in [(pki.ca(), 10), (pki.front_proxy_ca(), 10)] {
        with_parsed(ca, |c| {
            assert!(c.is_ca());
            let usage = c.key_usage().unwrap().unwrap().value;
            assert!(usage.key_cert_sign() && usage.crl_sign() && usage.digital_signature());
            let not_after = c.validity().not_after.timestamp();
            assert!(
                (not_after - now - years * 365 * day).abs() < day,
                "{}",
                c.subject()
            );
        });
    }
    for leaf in [pki.server("a").unwrap(), pki.admin(), pki.front_proxy_client()] {
        with_parsed(leaf, |c| {
            assert!(!c.is_ca());
            assert!(c.validity().not_before.timestamp() < now - 1800, "backdated");
            assert!((c.validity().not_after.timestamp() - now - 365 * day).abs() < day);
            let has_aki = c
                .extensions()
                .iter()
                .any(|e| matches!(e.parsed_extension(), ParsedExtension::AuthorityKeyIdentifier(_)));
            assert!(has_aki, "{} lacks an authority key identifier", c.subject());
        });
    }
}

/// A full TLS 1.3 handshake with mutual authentication, in memory: proves each key matches its
/// certificate, which verifier calls alone do not.
#[test]
fn admin_and_server_complete_a_mutual_tls_handshake() {
    let pki = pki();
    let server = pki.server("b").unwrap();
    let client_verifier = WebPkiClientVerifier::builder(roots(pki.ca())).build().unwrap();
    let server_config = ServerConfig::builder()
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(vec![server.cert_der()], server.key_der())
        .unwrap();
    let client_config = ClientConfig::builder()
        .with_root_certificates(roots(pki.ca()))
        .with_client_auth_cert(vec![pki.admin().cert_der()], pki.admin().key_der())
        .unwrap();
    let name = ServerName::try_from("127.0.0.2").unwrap();
    let mut client = ClientConnection::new(Arc::new(client_config), name).unwrap();
    let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
    for _ in 0..10 {
        if !client.is_handshaking() && !server.is_handshaking() {
            break;
        }
        let mut buf = Vec::new();
        client.write_tls(&mut buf).unwrap();
        server.read_tls(&mut buf.as_slice()).unwrap();
        server.process_new_packets().unwrap();
        let mut buf = Vec::new();
        server.write_tls(&mut buf).unwrap();
        client.read_tls(&mut buf.as_slice()).unwrap();
        client.process_new_packets().unwrap();
    }
    assert!(!client.is_handshaking() && !server.is_handshaking());
    let presented = server.peer_certificates().unwrap();
    assert_eq!(presented[0], pki.admin().cert_der());
}

#[test]
fn every_generation_uses_fresh_keys() {
    let (one, two) = (pki(), pki());
    assert_ne!(one.ca().key_pem(), two.ca().key_pem());
    assert!(!client_verifies(one.ca(), two.admin()));
}
