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

/// Waits (20 s at most) for the demo's `cluster.json` in `dir`, as a script would; returns its path.
fn wait_for_manifest(dir: &std::path::Path) -> std::path::PathBuf {
    let manifest = dir.join("cluster.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !manifest.exists() {
        assert!(std::time::Instant::now() < deadline, "cluster.json not written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    manifest
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
        vec![TLS[0], TLS[1], "--authorization-mode=Bogus"],
        vec![TLS[0], TLS[1], "--authorization-mode=RBAC"],
        vec![TLS[0], TLS[1], "--authorization-mode=AlwaysDeny,AlwaysDeny"],
        vec![TLS[0], TLS[1], "--request-timeout=forever"],
        vec![TLS[0], TLS[1], "--request-timeout=0s"],
        // Non-ASCII text once panicked the duration parser.
        vec![TLS[0], TLS[1], "--request-timeout=1\u{e9}s"],
        vec![TLS[0], TLS[1], "--request-timeout=\u{b5}s"],
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

#[test]
fn the_demo_cluster_starts_writes_its_manifest_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .args(["cluster", "--port", "0", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawns");
    let manifest = wait_for_manifest(dir.path());
    let cluster: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let names: Vec<&str> = cluster["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["a", "b"]);
    assert!(
        cluster["servers"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://127.0.0.1:")
    );
    assert_eq!(cluster["servers"][1]["kubernetesVersion"], "1.36");
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            assert!(exit.success(), "graceful exit: {exit}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "did not stop on SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !manifest.exists(),
        "a stopped cluster leaves no cluster.json behind"
    );
}

#[test]
fn the_binary_raises_its_open_files_soft_limit_to_the_hard_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = env!("CARGO_BIN_EXE_apiserver-fake");
    // Started as a shell with a low soft limit would start it.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256 && exec '{binary}' cluster --port 0 --dir '{}'",
            dir.path().display()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawns");
    wait_for_manifest(dir.path());
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).expect("limits");
    let _ = child.kill();
    let _ = child.wait();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (soft, hard) = (fields[3], fields[4]);
    assert_eq!(soft, hard, "{line}");
    assert_ne!(soft, "256", "{line}");
}
