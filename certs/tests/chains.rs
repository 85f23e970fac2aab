//! The generated chains and SANs, checked by rustls/webpki verifiers (not by re-reading files).

use std::sync::Arc;

use certs::{KeyedCert, Pki, PkiSpec, ServerSpec, Signer};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::{ServerName, UnixTime};

fn pki() -> Pki {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Pki::generate(&PkiSpec {
        servers: vec![
            ServerSpec {
                name: "a".into(),
                ips: vec!["127.0.0.1".parse().unwrap()],
                dns: vec![],
            },
            ServerSpec {
                name: "b".into(),
                ips: vec!["127.0.0.2".parse().unwrap(), "::1".parse().unwrap()],
                dns: vec!["b.example".into()],
            },
        ],
        ..PkiSpec::default()
    })
    .unwrap()
}

fn roots(ca: &KeyedCert) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert_der()).unwrap();
    Arc::new(roots)
}

fn server_accepts(pki: &Pki, server: &str, name: &str) -> bool {
    let verifier = WebPkiServerVerifier::builder(roots(pki.ca())).build().unwrap();
    let cert = pki.server(server).unwrap().cert_der();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    verifier
        .verify_server_cert(&cert, &[], &name, &[], UnixTime::now())
        .is_ok()
}

fn client_accepts(ca: &KeyedCert, client: &KeyedCert) -> bool {
    let verifier = WebPkiClientVerifier::builder(roots(ca)).build().unwrap();
    verifier
        .verify_client_cert(&client.cert_der(), &[], UnixTime::now())
        .is_ok()
}

#[test]
fn serving_certs_verify_for_their_ips_and_the_kubernetes_names_only() {
    let pki = pki();
    for name in [
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
    ] {
        assert!(server_accepts(&pki, "a", name), "a should verify for {name}");
    }
    assert!(server_accepts(&pki, "a", "kubernetes.default.svc.cluster.local"));
    assert!(server_accepts(&pki, "b", "127.0.0.2"));
    assert!(server_accepts(&pki, "b", "::1"));
    assert!(server_accepts(&pki, "b", "b.example"));
    assert!(
        !server_accepts(&pki, "a", "127.0.0.2"),
        "a must not verify for b's IP"
    );
    assert!(!server_accepts(&pki, "a", "example.com"));
}

#[test]
fn serving_cert_does_not_verify_against_another_ca() {
    let pki = pki();
    let other = pki.front_proxy_ca();
    let verifier = WebPkiServerVerifier::builder(roots(other)).build().unwrap();
    let name = ServerName::try_from("kubernetes.default.svc").unwrap();
    assert!(
        verifier
            .verify_server_cert(
                &pki.server("a").unwrap().cert_der(),
                &[],
                &name,
                &[],
                UnixTime::now()
            )
            .is_err()
    );
}

#[test]
fn client_certs_chain_to_their_own_ca_only() {
    let pki = pki();
    assert!(client_accepts(pki.ca(), pki.admin()));
    assert!(!client_accepts(pki.front_proxy_ca(), pki.admin()));
    assert!(client_accepts(pki.front_proxy_ca(), pki.front_proxy_client()));
    assert!(!client_accepts(pki.ca(), pki.front_proxy_client()));
    let extra = pki
        .issue_client_cert(Signer::FrontProxyCa, "not-allowed", None)
        .unwrap();
    assert!(client_accepts(pki.front_proxy_ca(), &extra));
    // A serving certificate is not a client certificate (EKU serverAuth only).
    assert!(!client_accepts(pki.ca(), pki.server("a").unwrap()));
}

#[test]
fn subjects_carry_kubernetes_users_and_groups() {
    let pki = pki();
    let subject = |cert: &KeyedCert| {
        let der = cert.cert_der();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let cn = parsed
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        let orgs: Vec<String> = parsed
            .subject()
            .iter_organization()
            .map(|o| o.as_str().unwrap().to_owned())
            .collect();
        (cn, orgs)
    };
    assert_eq!(
        subject(pki.admin()),
        ("admin".to_owned(), vec!["system:masters".to_owned()])
    );
    assert_eq!(
        subject(pki.front_proxy_client()),
        ("front-proxy-client".to_owned(), vec![])
    );
    let custom = Pki::generate(&PkiSpec {
        servers: vec![ServerSpec {
            name: "a".into(),
            ips: vec![],
            dns: vec![],
        }],
        front_proxy_client_cn: "misty".into(),
    })
    .unwrap();
    assert_eq!(subject(custom.front_proxy_client()).0, "misty");
}

#[test]
fn writes_kubeadm_file_names_and_kubeconfigs() {
    let pki = pki();
    let (dir, paths) = pki.write_to_tempdir().unwrap();
    for name in [
        "ca.crt",
        "ca.key",
        "front-proxy-ca.crt",
        "front-proxy-ca.key",
        "front-proxy-client.crt",
        "front-proxy-client.key",
        "admin.crt",
        "admin.key",
        "apiserver-a.crt",
        "apiserver-a.key",
        "apiserver-b.crt",
        "apiserver-b.key",
    ] {
        assert!(dir.path().join(name).is_file(), "{name} missing");
    }
    pki.write_kubeconfig(&paths.kubeconfig("a"), "https://127.0.0.1:6443", "a")
        .unwrap();
    let text = std::fs::read_to_string(dir.path().join("a.kubeconfig")).unwrap();
    assert!(text.contains("server: https://127.0.0.1:6443"));
    let ca_data = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .unwrap();
    let decoded = data_encoding::BASE64.decode(ca_data.as_bytes()).unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), pki.ca().cert_pem);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&paths.admin_key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn invalid_specs_are_rejected() {
    let spec = |names: &[&str]| PkiSpec {
        servers: names
            .iter()
            .map(|n| ServerSpec {
                name: (*n).into(),
                ips: vec![],
                dns: vec![],
            })
            .collect(),
        ..PkiSpec::default()
    };
    assert!(Pki::generate(&spec(&[])).is_err());
    assert!(
        Pki::generate(&spec(&["a", "a"]))
            .unwrap_err()
            .to_string()
            .contains("duplicate")
    );
    assert!(Pki::generate(&spec(&["Bad_Name"])).is_err());
}
