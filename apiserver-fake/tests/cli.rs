//! The binary's flag validation: one-line errors with kube-apiserver's wording and a non-zero exit.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .args(args)
        .output()
        .expect("runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    )
}

const TLS: [&str; 2] = [
    "--tls-cert-file=/nonexistent.crt",
    "--tls-private-key-file=/nonexistent.key",
];

#[test]
fn peer_flags_without_the_gate_are_rejected_like_kube_apiserver() {
    for (flag, name) in [
        ("--peer-ca-file=/ca.crt", "peer-ca-file"),
        ("--peer-advertise-ip=10.0.0.1", "peer-advertise-ip"),
        ("--peer-advertise-port=6443", "peer-advertise-port"),
    ] {
        let (ok, stderr) = run(&[TLS[0], TLS[1], "--kubernetes-version=1.35", flag]);
        assert!(!ok);
        assert_eq!(
            stderr,
            format!("error: --{name} requires UnknownVersionInteroperabilityProxy feature to be turned on")
        );
    }
}

#[test]
fn proxy_without_client_cert_fails_to_build() {
    let (ok, stderr) = run(&[TLS[0], TLS[1], "--peer-ca-file=/ca.crt"]);
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: error building peer proxy handler, proxy-cert-file not specified"
    );
    let (ok, stderr) = run(&[
        TLS[0],
        TLS[1],
        "--peer-ca-file=/ca.crt",
        "--proxy-client-cert-file=/c.crt",
    ]);
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: error building peer proxy handler, proxy-key-file not specified"
    );
}

#[test]
fn bad_values_give_one_line_errors() {
    for args in [
        vec![TLS[0], TLS[1], "--kubernetes-version=1.99"],
        vec![TLS[0], TLS[1], "--feature-gates=NoSuchGate=true"],
        vec![TLS[0], TLS[1], "--runtime-config=nosuch/v1=maybe"],
        vec![TLS[0], TLS[1], "--emulated-version=1.20"],
        vec!["--secure-port=6443"],
        vec![TLS[0], TLS[1], "--secure-port=0", "--bind-address=127.0.0.1"],
    ] {
        let (ok, stderr) = run(&args);
        assert!(!ok, "{args:?} should fail");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
