//! The `certs` binary.

use std::process::Command;

fn certs(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_certs"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    )
}

#[test]
fn generate_writes_the_pki_and_kubeconfigs() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let (ok, out, err) = certs(&[
        "generate",
        "--dir",
        dir_arg,
        "--server",
        "a=127.0.0.1",
        "--server",
        "b=127.0.0.2,::1",
        "--port",
        "7443",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("apiserver-b.crt"));
    let kubeconfig = std::fs::read_to_string(dir.path().join("b.kubeconfig")).unwrap();
    assert!(kubeconfig.contains("server: https://127.0.0.2:7443"));
    assert!(dir.path().join("front-proxy-client.key").is_file());
}

#[test]
fn bad_input_gives_a_one_line_error_and_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    for (server, expected) in [
        ("a=notanip", "\"notanip\" is not an IP address"),
        ("a", "expected NAME=IP"),
        ("Bad_Name=127.0.0.1", "must be a DNS label"),
    ] {
        let (ok, _, err) = certs(&["generate", "--dir", dir_arg, "--server", server]);
        assert!(!ok, "{server}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: ") && err.contains(expected), "{err}");
    }
    let (ok, _, err) = certs(&[
        "generate",
        "--dir",
        dir_arg,
        "--server",
        "a=127.0.0.1",
        "--server",
        "a=127.0.0.2",
    ]);
    assert!(!ok);
    assert!(err.contains("duplicate server name"), "{err}");
}
