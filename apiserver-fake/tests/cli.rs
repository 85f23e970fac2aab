//! The binary's flag validation: one-line errors with kube-apiserver's wording and a non-zero exit.

mod support;

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
    kube_mvp_testing::eventually_blocking(
        "cluster.json to be written",
        std::time::Duration::from_secs(20),
        std::time::Duration::from_millis(20),
        || manifest.exists().then_some(()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
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
    let mut demo = support::demo::Demo::start(dir.path(), &[]);
    let cluster = demo.wait_for_manifest(dir.path());
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
    // SIGTERM, and SIGKILL only if it has not exited after its grace period.
    let exit = demo.stop().unwrap_or_else(|e| panic!("{e}"));
    assert!(exit.success(), "graceful exit on SIGTERM: {exit}");
    assert!(
        !dir.path().join("cluster.json").exists(),
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

/// `--help` output of the server command.
fn help() -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .arg("--help")
        .output()
        .expect("runs");
    assert!(output.status.success());
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The comma-separated list following `marker` in `text`, up to the next `.`.
fn listed_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in --help"))
        + marker.len();
    let rest = &text[start..];
    rest[..rest.find('.').expect("a full stop")]
        .split(',')
        .map(|item| item.trim().trim_matches('"'))
        .collect()
}

/// Whether the server command gets past flag validation with `flag` (it then fails reading the
/// serving certificate, which does not exist).
fn flag_accepted(flag: &str) -> bool {
    let (ok, stderr) = run(&[TLS[0], TLS[1], "--secure-port=0", flag]);
    assert!(!ok, "{flag}: cannot start without a certificate");
    stderr.starts_with("error: failed to start: failed to read /nonexistent")
}

#[test]
fn help_lists_exactly_the_authorization_modes_and_log_formats_the_binary_accepts() {
    use apiserver_fake::chain::authorization::AuthorizationMode;
    let help = help();
    let modes = listed_after(&help, "Comma-delimited list of: ");
    let implemented: Vec<&str> = AuthorizationMode::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(modes, implemented);
    for mode in &modes {
        assert!(flag_accepted(&format!("--authorization-mode={mode}")), "{mode}");
    }
    for mode in AuthorizationMode::UNSUPPORTED {
        assert!(!flag_accepted(&format!("--authorization-mode={mode}")), "{mode}");
        assert!(!modes.contains(&mode), "{mode}");
    }
    let formats = listed_after(&help, "Permitted formats: ");
    assert_eq!(formats, apiserver_fake::server::logging::LOGGING_FORMATS);
    for format in &formats {
        assert!(flag_accepted(&format!("--logging-format={format}")), "{format}");
    }
    assert!(!flag_accepted("--logging-format=xml"));
}

#[test]
fn kube_apiserver_logging_flags_are_accepted_and_klogs_removed_ones_refused() {
    for flag in [
        "--v=2",
        "-v=4",
        "--vmodule=httplog=3,peerproxy*=4",
        "--log-flush-frequency=10s",
        "--allow-privileged=true",
        "--enable-admission-plugins=NodeRestriction",
        "--enable-bootstrap-token-auth=true",
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
        "--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt",
    ] {
        assert!(flag_accepted(flag), "{flag}");
    }
    for (flag, name) in [
        ("--logtostderr=false", "logtostderr"),
        ("--alsologtostderr", "alsologtostderr"),
        ("--log-dir=/var/log", "log-dir"),
        ("--log-file=/var/log/kube-apiserver.log", "log-file"),
        ("--skip-headers", "skip-headers"),
    ] {
        let (ok, stderr) = run(&[TLS[0], TLS[1], flag]);
        assert!(!ok, "{flag}");
        assert_eq!(
            stderr,
            format!(
                "error: unknown flag: --{name} (klog's flags were removed from kube-apiserver in 1.26, \
                 kubernetes/kubernetes#112120)"
            )
        );
    }
    let (ok, stderr) = run(&[TLS[0], TLS[1], "--v=high"]);
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: invalid argument \"high\" for \"-v, --v\" flag: strconv.ParseUint: parsing \"high\": invalid syntax"
    );
}

#[test]
fn version_starts_like_kube_apiservers_and_names_the_emulated_range() {
    use apiserver_fake::api::catalog::KubeVersion;
    let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .arg("--version")
        .output()
        .expect("runs");
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let mut lines = stdout.lines();
    // What `cluster` reads from a real kube-apiserver binary (`Kubernetes vMAJOR.MINOR.PATCH`), for the
    // default `--kubernetes-version`, as `/version` reports it.
    assert_eq!(
        lines.next(),
        Some(format!("Kubernetes v{}.0", KubeVersion::NEWEST).as_str())
    );
    let second = lines.next().expect("a second line");
    assert!(
        second.starts_with(&format!("apiserver-fake {}", env!("CARGO_PKG_VERSION"))),
        "{second}"
    );
    assert!(
        second.contains(&format!(
            "serves Kubernetes v{}\u{2013}v{}",
            KubeVersion::OLDEST,
            KubeVersion::NEWEST
        )),
        "{second}"
    );
    assert_eq!(
        second.contains("features: etcd"),
        cfg!(feature = "etcd"),
        "{second}"
    );
}

/// Waits (60 s at most, polling every 20 ms) until the file at `path` has a line for which `wanted`
/// holds; returns it.
fn wait_for_line(path: &std::path::Path, wanted: impl Fn(&str) -> bool) -> String {
    let what = format!("the line in {}", path.display());
    kube_mvp_testing::eventually_blocking(
        &what,
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(20),
        || {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            text.lines().find(|l| wanted(l)).map(str::to_owned)
        },
    )
    .unwrap_or_else(|e| panic!("{e}:\n{}", std::fs::read_to_string(path).unwrap_or_default()))
}

/// Kills a child process when the test ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server on a fresh PKI with `flags`, its standard error in a file: (the process, an admin
/// kubeconfig, the log's path, the tempdir holding them).
fn logged_server(flags: &[&str]) -> (Running, std::path::PathBuf, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = certs::PkiSpec {
        servers: vec![certs::ServerSpec::new(
            "a",
            [std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)],
        )],
        ..certs::PkiSpec::default()
    };
    let pki = certs::Pki::generate(&spec).expect("PKI");
    let paths = pki.write_to(dir.path()).expect("written");
    let log_path = dir.path().join("server.log");
    let mut command = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"));
    command
        .arg(format!("--tls-cert-file={}", paths.server_cert("a").display()))
        .arg(format!(
            "--tls-private-key-file={}",
            paths.server_key("a").display()
        ))
        .arg(format!("--client-ca-file={}", paths.ca_cert.display()))
        .args(["--bind-address=127.0.0.1", "--secure-port=0"])
        .args(flags)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log"));
    let server = Running(command.spawn().expect("starts"));
    let listening = wait_for_line(&log_path, |l| l.contains(" listening on https://"));
    let url = listening
        .split_whitespace()
        .find(|w| w.starts_with("https://"))
        .expect("a URL");
    let kubeconfig = dir.path().join("admin.kubeconfig");
    pki.write_kubeconfig(&kubeconfig, url, "a").expect("kubeconfig");
    (server, kubeconfig, log_path, dir)
}

#[test]
fn at_v3_every_request_gets_kube_apiservers_http_log_line() {
    if !support::kubectl_available() {
        return;
    }
    let (_server, kubeconfig, log_path, _dir) = logged_server(&["--v=3"]);
    let (ok, _, stderr) = support::kubectl(&kubeconfig, &["get", "configmaps", "-n", "default"]);
    assert!(ok, "{stderr}");
    let line = wait_for_line(&log_path, |l| {
        l.contains("URI=\"/api/v1/namespaces/default/configmaps?limit=500\"")
    });
    // Upstream's keys in upstream's order, then the fake's user; the piped log has no colour codes.
    let keys: Vec<&str> = line
        .split_whitespace()
        .filter_map(|field| field.split_once('=').map(|(key, _)| key))
        .collect();
    assert_eq!(
        keys,
        [
            "verb",
            "URI",
            "latency",
            "userAgent",
            "audit-ID",
            "srcIP",
            "user",
            "resp"
        ],
        "{line}"
    );
    assert!(line.contains(" HTTP "), "{line}");
    assert!(line.contains("verb=\"LIST\""), "{line}");
    assert!(line.contains("userAgent=\"kubectl/"), "{line}");
    assert!(line.contains("srcIP=\"127.0.0.1:"), "{line}");
    assert!(line.contains("user=\"admin\""), "{line}");
    assert!(line.ends_with("resp=200"), "{line}");
    assert!(!line.contains('\u{1b}'), "{line}");
}

#[test]
fn a_proxied_request_is_logged_with_the_peer_it_went_to() {
    if !support::kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log_path = dir.path().join("cluster.log");
    let child = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .args(["cluster", "--port", "0", "--dir"])
        .arg(dir.path())
        // The demo's servers are in-process: the httplog target, as `--v=3` turns it on.
        .env("RUST_LOG", "httplog=info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log"))
        .spawn()
        .expect("spawns");
    let _cluster = Running(child);
    let manifest = wait_for_manifest(dir.path());
    let cluster: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).expect("cluster.json")).expect("JSON");
    let server = |name: &str| {
        cluster["servers"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == name))
            .unwrap_or_else(|| panic!("server {name}"))
            .clone()
    };
    let a_kubeconfig = std::path::PathBuf::from(server("a")["kubeconfig"].as_str().expect("kubeconfig"));
    // `a` lacks batch/v1: the Mixed Version Proxy sends the list to `b`.
    let (ok, _, stderr) = support::kubectl(&a_kubeconfig, &["get", "jobs", "-n", "default"]);
    assert!(ok, "{stderr}");
    let b_port = server("b")["url"]
        .as_str()
        .and_then(|u| u.rsplit(':').next())
        .expect("b's port")
        .to_owned();
    let line = wait_for_line(&log_path, |l| {
        l.contains("URI=\"/apis/batch/v1/namespaces/default/jobs?limit=500\"") && l.contains("proxiedTo=")
    });
    assert!(
        line.contains(&format!(":{b_port}\"")),
        "proxied to b ({b_port}): {line}"
    );
    assert!(line.contains("user=\"admin\""), "{line}");
    assert!(line.ends_with("resp=200"), "{line}");
}

/// The server's log on a terminal (a pseudo-terminal `script` gives it): the `tracing` line that says
/// it listens, or `None` without util-linux's `script`.
fn log_line_on_a_terminal(no_color: Option<&str>) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: util-linux's script is not installed; this test needs it for a terminal");
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = certs::PkiSpec {
        servers: vec![certs::ServerSpec::new(
            "a",
            [std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)],
        )],
        ..certs::PkiSpec::default()
    };
    let paths = certs::Pki::generate(&spec)
        .expect("PKI")
        .write_to(dir.path())
        .expect("written");
    let server = format!(
        "'{}' --tls-cert-file='{}' --tls-private-key-file='{}' --bind-address=127.0.0.1 --secure-port=0",
        env!("CARGO_BIN_EXE_apiserver-fake"),
        paths.server_cert("a").display(),
        paths.server_key("a").display(),
    );
    let typescript = dir.path().join("typescript");
    let mut command = Command::new("script");
    command
        .args(["-qfec", &server])
        .arg(&typescript)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    match no_color {
        Some(value) => command.env("NO_COLOR", value),
        None => command.env_remove("NO_COLOR"),
    };
    // Killing `script` closes the terminal, which hangs the server up.
    let _terminal = Running(command.spawn().expect("script runs"));
    Some(wait_for_line(&typescript, |l| {
        l.contains("fake kube-apiserver listening")
    }))
}

#[test]
fn log_lines_are_coloured_on_a_terminal_unless_no_color_is_set() {
    let Some(coloured) = log_line_on_a_terminal(None) else {
        return;
    };
    assert!(coloured.contains("\u{1b}["), "{coloured:?}");
    let plain = log_line_on_a_terminal(Some("1")).expect("script is there");
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    // An empty NO_COLOR does not count (no-color.org).
    let empty = log_line_on_a_terminal(Some("")).expect("script is there");
    assert!(empty.contains("\u{1b}["), "{empty:?}");
}

#[test]
fn the_json_logging_format_writes_the_http_line_as_one_json_object() {
    if !support::kubectl_available() {
        return;
    }
    let (_server, kubeconfig, log_path, _dir) = logged_server(&["--v=3", "--logging-format=json"]);
    let (ok, _, stderr) = support::kubectl(&kubeconfig, &["get", "namespaces"]);
    assert!(ok, "{stderr}");
    let line = wait_for_line(&log_path, |l| {
        l.starts_with('{') && l.contains("\"httplog\"") && l.contains("/api/v1/namespaces?limit=500")
    });
    let entry: serde_json::Value = serde_json::from_str(&line).expect("a JSON object");
    assert_eq!(entry["target"], "httplog", "{line}");
    let fields = &entry["fields"];
    assert_eq!(fields["message"], "HTTP", "{line}");
    assert_eq!(fields["verb"], "LIST", "{line}");
    assert_eq!(fields["URI"], "/api/v1/namespaces?limit=500", "{line}");
    assert_eq!(fields["user"], "admin", "{line}");
    assert_eq!(fields["resp"], 200, "{line}");
}
