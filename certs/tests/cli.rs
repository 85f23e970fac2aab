//! The `certs` binary: what it writes, and how it refuses bad input.

use std::process::Command;

/// Runs `certs` and returns (success, exit code, stdout, stderr).
fn certs(args: &[&str]) -> (bool, Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_certs"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn generate_writes_the_pki_and_kubeconfigs() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let pki_arg = pki.to_str().unwrap();
    let (ok, _, out, err) = certs(&[
        "generate",
        "--dir",
        pki_arg,
        "--server",
        "a=127.0.0.1",
        "--server",
        "b=::1,127.0.0.2",
        "--port",
        "7443",
        "--front-proxy-client-cn",
        "aggregator",
    ]);
    assert!(ok, "{err}");
    assert!(err.is_empty(), "{err}");
    for name in [
        "ca.crt",
        "ca.key",
        "front-proxy-ca.crt",
        "front-proxy-client.key",
        "admin.crt",
        "apiserver-a.crt",
        "apiserver-b.key",
        "a.kubeconfig",
        "b.kubeconfig",
    ] {
        let path = pki.join(name);
        assert!(path.is_file(), "{name} missing");
        assert!(
            out.contains(&format!("wrote {}", path.display())),
            "{name} not reported in:\n{out}"
        );
    }
    let kubeconfig = std::fs::read_to_string(pki.join("b.kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains("server: \"https://[::1]:7443\""),
        "{kubeconfig}"
    );
    let kubeconfig = std::fs::read_to_string(pki.join("a.kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains("server: \"https://127.0.0.1:7443\""),
        "{kubeconfig}"
    );
    let proxy = std::fs::read(pki.join("front-proxy-client.crt")).unwrap();
    assert!(
        String::from_utf8(proxy)
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
}

#[test]
fn bad_input_gives_a_one_line_error_and_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--server", "a=notanip"], "\"notanip\" is not an IP address"),
        (&["--server", "a=127.0.0.1,"], "\"\" is not an IP address"),
        (&["--server", "a"], "expected NAME=IP"),
        (&["--server", "Bad_Name=127.0.0.1"], "must be a DNS label"),
        (
            &["--server", "a=127.0.0.1", "--server", "a=127.0.0.2"],
            "duplicate server name \"a\"",
        ),
        (&[], "at least one server"),
        (&["--server", "a=127.0.0.1", "--port", "http"], "--port"),
        (&["--server", "a=127.0.0.1", "--port", "70000"], "--port"),
        (&["--server", "a=127.0.0.1", "--bogus"], "--bogus"),
        (&["--server"], "--server"),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["generate", "--dir", dir_arg];
        args.extend_from_slice(extra);
        let (ok, code, out, err) = certs(&args);
        assert!(!ok, "{extra:?} succeeded");
        assert!(matches!(code, Some(1 | 2)), "{extra:?}: exit code {code:?}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{extra:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.is_empty(), "{extra:?} printed {out}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing is written on bad input"
    );
}

#[test]
fn missing_command_or_dir_is_a_one_line_error() {
    for (args, expected) in [(&[][..], "a command is required"), (&["generate"][..], "--dir")] {
        let (ok, code, _, err) = certs(args);
        assert!(!ok && code == Some(2), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn unwritable_dir_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let (ok, _, _, err) = certs(&[
        "generate",
        "--dir",
        file.to_str().unwrap(),
        "--server",
        "a=127.0.0.1",
    ]);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("failed to write") && err.contains("file"), "{err}");
}
