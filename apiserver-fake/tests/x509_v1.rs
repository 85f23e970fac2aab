//! X.509 v1 client certificates, made as many RBAC tutorials make them (`openssl x509 -req` without
//! extensions), against the built binary: Go accepts them, so such a user is authenticated (CN = user,
//! O = groups) and gets RBAC's 403 when unbound, over TLS 1.3 and TLS 1.2; a v1 certificate of another
//! CA is no user, and a bearer token on its connection still is. The clients are curl (OpenSSL) and,
//! when there is one, kubectl (Go): rustls' client refuses to present a v1 certificate.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::demo::{Demo, server};

fn openssl(args: &[&str]) {
    let output = Command::new("openssl").args(args).output().expect("openssl runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A v1 certificate for `subject`, issued by `ca` (`.crt`/`.key` paths), as `openssl x509 -req`
/// makes it; returns the certificate's and the key's paths.
fn v1_certificate(dir: &Path, name: &str, subject: &str, ca: (&Path, &Path)) -> (PathBuf, PathBuf) {
    let (key, csr, crt) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.csr")),
        dir.join(format!("{name}.crt")),
    );
    let path = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        &path(&key),
        "-subj",
        subject,
        "-out",
        &path(&csr),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &path(&csr),
        "-CA",
        &path(ca.0),
        "-CAkey",
        &path(ca.1),
        "-set_serial",
        "4242",
        "-days",
        "1",
        "-out",
        &path(&crt),
    ]);
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in", &path(&crt)])
        .output()
        .expect("openssl runs");
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("Version: 1 (0x0)"),
        "openssl made a v1 certificate"
    );
    (crt, key)
}

/// A request with curl (OpenSSL; rustls' own client refuses to load a v1 certificate) presenting
/// `identity`, trusting `ca`: the status code and the body; `extra` are more curl arguments.
async fn curl(url: String, ca: &Path, identity: (&Path, &Path), extra: &[&str]) -> (u16, String) {
    let mut args: Vec<String> = vec![
        "-sS".into(),
        "--cacert".into(),
        ca.display().to_string(),
        "--cert".into(),
        identity.0.display().to_string(),
        "--key".into(),
        identity.1.display().to_string(),
        "-w".into(),
        "\n%{http_code}".into(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args.push(url);
    let output = tokio::task::spawn_blocking(move || Command::new("curl").args(&args).output())
        .await
        .expect("curl ran")
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.trim()
            .parse()
            .unwrap_or_else(|_| panic!("curl: {text}{}", String::from_utf8_lossy(&output.stderr))),
        body.to_owned(),
    )
}

/// Whether `tool --version`-style `args` run: the test's clients come from the machine (CI installs them).
fn available(tool: &str, args: &[&str]) -> bool {
    Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_client_certificate_is_a_user_that_rbac_forbids() {
    if !available("openssl", &["version"]) || !available("curl", &["--version"]) {
        eprintln!("skipped: this test needs openssl (to make v1 certificates) and curl (to present them)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--authorization-mode", "Node,RBAC"]);
    let manifest = demo.wait_for_manifest(dir.path());
    let d = dir.path();
    let url = server(&manifest, "a")["url"].as_str().expect("url").to_owned();
    let ca = d.join("ca.crt");
    let (jane_crt, jane_key) = v1_certificate(d, "jane", "/CN=jane/O=devs", (&ca, &d.join("ca.key")));

    let jane = (jane_crt.as_path(), jane_key.as_path());
    let pods = format!("{url}/api/v1/namespaces/default/pods");
    for tls in ["--tlsv1.3", "--tls-max"] {
        let extra: &[&str] = if tls == "--tls-max" {
            &["--tls-max", "1.2"]
        } else {
            &[tls]
        };
        let (code, body) = curl(pods.clone(), &ca, jane, extra).await;
        assert_eq!(code, 403, "{tls}: {body}");
        let status: serde_json::Value = serde_json::from_str(&body).expect("Status");
        assert_eq!(
            status["message"],
            "pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
    }
    let (code, body) = curl(
        format!("{url}/apis/authentication.k8s.io/v1/selfsubjectreviews"),
        &ca,
        jane,
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
        ],
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let user =
        serde_json::from_str::<serde_json::Value>(&body).expect("review")["status"]["userInfo"].clone();
    assert_eq!(user["username"], "jane");
    assert_eq!(
        user["groups"],
        serde_json::json!(["devs", "system:authenticated"])
    );

    // A v1 certificate of a CA the server does not trust is nobody (401), but the connection stands:
    // a bearer token on it is believed.
    let (other_ca_crt, other_ca_key) = (d.join("other-ca.crt"), d.join("other-ca.key"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        other_ca_key.to_str().unwrap(),
        "-subj",
        "/CN=other-ca",
        "-days",
        "1",
        "-out",
        other_ca_crt.to_str().unwrap(),
    ]);
    let (mallory_crt, mallory_key) = v1_certificate(
        d,
        "mallory",
        "/CN=mallory/O=system:masters",
        (&other_ca_crt, &other_ca_key),
    );
    let mallory = (mallory_crt.as_path(), mallory_key.as_path());
    let namespaces = format!("{url}/api/v1/namespaces");
    assert_eq!(curl(namespaces.clone(), &ca, mallory, &[]).await.0, 401);
    let token = std::fs::read_to_string(d.join("token")).expect("token");
    let bearer = format!("Authorization: Bearer {}", token.trim());
    let (code, body) = curl(namespaces, &ca, mallory, &["-H", &bearer]).await;
    assert_eq!(code, 200, "{body}");

    // kubectl (Go's TLS client) with the same certificate, from a kubeconfig of jane's own.
    if support::kubectl_available() {
        let kubeconfig = d.join("jane.kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: {url}\n    certificate-authority: {}\n\
             users:\n- name: jane\n  user:\n    client-certificate: {}\n    client-key: {}\n\
             contexts:\n- name: jane\n  context:\n    cluster: a\n    user: jane\ncurrent-context: jane\n",
            ca.display(),
            jane_crt.display(),
            jane_key.display()
        );
        std::fs::write(&kubeconfig, text).expect("kubeconfig");
        let (ok, _, err) =
            tokio::task::spawn_blocking(move || support::kubectl(&kubeconfig, &["get", "pods"]))
                .await
                .expect("kubectl ran");
        assert!(!ok);
        assert!(
            err.contains("User \"jane\" cannot list resource \"pods\""),
            "kubectl sees RBAC's 403: {err}"
        );
    }
    drop(demo);
}
