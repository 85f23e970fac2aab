//! What `Pki::write_to` and `Pki::write_kubeconfig` put on disk.

use certs::{Pki, PkiSpec, ServerSpec};
use data_encoding::BASE64;

fn pki() -> Pki {
    Pki::generate(&PkiSpec::new([
        ServerSpec::new("a", ["127.0.0.1".parse().unwrap()]),
        ServerSpec::new("b", ["127.0.0.2".parse().unwrap()]),
    ]))
    .unwrap()
}

#[test]
fn write_to_uses_kubeadm_file_names_with_the_generated_contents() {
    let pki = pki();
    let (dir, paths) = pki.write_to_tempdir().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "admin.crt",
            "admin.key",
            "apiserver-a.crt",
            "apiserver-a.key",
            "apiserver-b.crt",
            "apiserver-b.key",
            "ca.crt",
            "ca.key",
            "front-proxy-ca.crt",
            "front-proxy-ca.key",
            "front-proxy-client.crt",
            "front-proxy-client.key",
            "sa.key",
            "sa.pub",
        ]
    );
    let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap();
    assert_eq!(read(&paths.ca_cert), pki.ca().cert_pem());
    assert_eq!(read(&paths.ca_key), pki.ca().key_pem());
    assert_eq!(read(&paths.front_proxy_ca_cert), pki.front_proxy_ca().cert_pem());
    assert_eq!(
        read(&paths.front_proxy_client_key),
        pki.front_proxy_client().key_pem()
    );
    assert_eq!(read(&paths.admin_cert), pki.admin().cert_pem());
    assert_eq!(read(&paths.server_cert("b")), pki.server("b").unwrap().cert_pem());
    assert_eq!(read(&paths.server_key("b")), pki.server("b").unwrap().key_pem());
    assert!(
        read(&paths.ca_key).starts_with("-----BEGIN PRIVATE KEY-----"),
        "PKCS#8 PEM"
    );
    // kubeadm's service-account key pair: the private key (PKCS#8) and its PKIX public key.
    assert_eq!(
        read(&paths.service_account_key),
        pki.service_account_key().private_key_pem()
    );
    assert_eq!(
        read(&paths.service_account_pub),
        pki.service_account_key().public_key_pem()
    );
    assert!(read(&paths.service_account_pub).starts_with("-----BEGIN PUBLIC KEY-----"));
}

#[cfg(unix)]
#[test]
fn keys_and_kubeconfigs_are_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;

    let pki = pki();
    let (_dir, paths) = pki.write_to_tempdir().unwrap();
    pki.write_kubeconfig(&paths.kubeconfig("a"), "https://127.0.0.1:6443", "a")
        .unwrap();
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    for key in [
        &paths.ca_key,
        &paths.front_proxy_ca_key,
        &paths.front_proxy_client_key,
        &paths.admin_key,
        &paths.service_account_key,
    ] {
        assert_eq!(mode(key), 0o600, "{}", key.display());
    }
    assert_eq!(mode(&paths.server_key("a")), 0o600);
    assert_eq!(mode(&paths.kubeconfig("a")), 0o600);
    assert_eq!(mode(&paths.ca_cert) & 0o600, 0o600);
}

#[test]
fn kubeconfig_points_at_the_server_and_embeds_ca_and_admin() {
    let pki = pki();
    let (_dir, paths) = pki.write_to_tempdir().unwrap();
    let path = paths.kubeconfig("b");
    pki.write_kubeconfig(&path, "https://127.0.0.2:1", "b").unwrap();
    // Rewritten once the port is known.
    pki.write_kubeconfig(&path, "https://127.0.0.2:43117", "b")
        .unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    let yaml: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let cluster = &yaml["clusters"][0];
    assert_eq!(cluster["name"], "b");
    assert_eq!(cluster["cluster"]["server"], "https://127.0.0.2:43117");
    let context = &yaml["contexts"][0];
    assert_eq!(yaml["current-context"], context["name"]);
    assert_eq!(context["context"]["cluster"], "b");
    assert_eq!(context["context"]["user"], yaml["users"][0]["name"]);

    let decode = |value: &serde_json::Value| {
        String::from_utf8(BASE64.decode(value.as_str().unwrap().as_bytes()).unwrap()).unwrap()
    };
    assert_eq!(
        decode(&cluster["cluster"]["certificate-authority-data"]),
        pki.ca().cert_pem()
    );
    let user = &yaml["users"][0]["user"];
    assert_eq!(decode(&user["client-certificate-data"]), pki.admin().cert_pem());
    assert_eq!(decode(&user["client-key-data"]), pki.admin().key_pem());
}

#[test]
fn kubeconfig_stays_valid_yaml_for_odd_names() {
    let pki = pki();
    let text = pki.kubeconfig("https://[::1]:6443", "odd: \"name\" #1");
    let yaml: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(yaml["clusters"][0]["name"], "odd: \"name\" #1");
    assert_eq!(yaml["clusters"][0]["cluster"]["server"], "https://[::1]:6443");
}

#[test]
fn write_to_reports_the_path_it_could_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let err = pki().write_to(&file).unwrap_err();
    assert!(
        matches!(&err, certs::Error::Io { path, .. } if *path == file),
        "{err}"
    );
}
