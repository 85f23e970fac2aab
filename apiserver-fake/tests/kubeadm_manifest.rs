//! A kubeadm control plane's kube-apiserver command line, replayed against the fake: the command of
//! kubeadm's static-pod manifest (`tests/fixtures/kubeadm/kube-apiserver.yaml`) runs unchanged but for
//! its paths (a PKI the `certs` crate writes with kubeadm's file names), the etcd URL (a private,
//! plain-HTTP etcd), the advertise address and the port; `/readyz` answers `ok` and kubectl works with
//! the admin certificate under `Node,RBAC`.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{kubectl, kubectl_available};

/// The manifest's PKI folder, which the replay points elsewhere.
const KUBEADM_PKI: &str = "/etc/kubernetes/pki";

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The container command of a static-pod manifest (without the program name).
fn manifest_command(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("the manifest fixture");
    let pod: serde_json::Value = serde_saphyr::from_str(&text).expect("the manifest is YAML");
    let command = pod["spec"]["containers"][0]["command"]
        .as_array()
        .expect("a container command");
    assert_eq!(command[0], "kube-apiserver");
    command[1..]
        .iter()
        .map(|word| word.as_str().expect("a string").to_owned())
        .collect()
}

/// Writes a cluster PKI into `dir` under every file name kubeadm's manifest reads: the `certs`
/// crate's layout (`ca.crt`, `front-proxy-*`, `sa.key`, `sa.pub`), plus `apiserver.crt/.key` (its
/// serving certificate for `apiserver`), the kubelet and etcd client certificates, and `etcd/ca.crt`.
/// Returns the admin kubeconfig's PKI.
fn write_kubeadm_pki(dir: &Path) -> certs::Pki {
    let spec = certs::PkiSpec {
        servers: vec![certs::ServerSpec::new(
            "apiserver",
            [std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)],
        )],
        ..certs::PkiSpec::default()
    };
    let pki = certs::Pki::generate(&spec).expect("a PKI");
    let paths = pki.write_to(dir).expect("written");
    std::fs::rename(paths.server_cert("apiserver"), dir.join("apiserver.crt")).expect("rename");
    std::fs::rename(paths.server_key("apiserver"), dir.join("apiserver.key")).expect("rename");
    let kubelet_client = pki
        .issue_client_cert(
            certs::Issuer::ClusterCa,
            "kube-apiserver-kubelet-client",
            &["kubeadm:cluster-admins"],
        )
        .expect("kubelet client");
    kubelet_client
        .write_to(
            &dir.join("apiserver-kubelet-client.crt"),
            &dir.join("apiserver-kubelet-client.key"),
        )
        .expect("written");
    let etcd_client = pki
        .issue_client_cert(certs::Issuer::ClusterCa, "kube-apiserver-etcd-client", &[])
        .expect("etcd client");
    etcd_client
        .write_to(
            &dir.join("apiserver-etcd-client.crt"),
            &dir.join("apiserver-etcd-client.key"),
        )
        .expect("written");
    std::fs::create_dir_all(dir.join("etcd")).expect("etcd dir");
    std::fs::copy(&paths.ca_cert, dir.join("etcd/ca.crt")).expect("etcd CA");
    pki
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn kubeadms_kube_apiserver_manifest_runs_unchanged_but_for_paths() {
    if !kubectl_available() {
        return;
    }
    if !cfg!(feature = "etcd") {
        support::etcd::skip(
            "the fake was built without the etcd feature (kubeadm's command line names etcd)",
        );
        return;
    }
    let Some(etcd) = support::etcd::private_etcd() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let pki_dir = dir.path().join("pki");
    let pki = write_kubeadm_pki(&pki_dir);
    let port = free_port();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubeadm/kube-apiserver.yaml");
    let args: Vec<String> = manifest_command(&manifest)
        .into_iter()
        .map(|arg| match arg.split_once('=') {
            Some(("--etcd-servers", _)) => format!("--etcd-servers={}", etcd.url),
            Some(("--advertise-address", _)) => "--advertise-address=127.0.0.1".to_owned(),
            Some(("--secure-port", _)) => format!("--secure-port={port}"),
            _ => arg.replace(KUBEADM_PKI, &pki_dir.display().to_string()),
        })
        // The shared etcd keeps test suites apart by prefix.
        .chain([format!("--etcd-prefix=/kubeadm-{}/registry", std::process::id())])
        .collect();
    assert!(args.iter().any(|a| a == "--v=2"), "{args:?}");
    assert!(
        args.iter().any(|a| a == "--authorization-mode=Node,RBAC"),
        "{args:?}"
    );
    let log_path = dir.path().join("kube-apiserver.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the binary starts"),
    );
    let kubeconfig = dir.path().join("admin.conf");
    pki.write_kubeconfig(&kubeconfig, &format!("https://127.0.0.1:{port}"), "kubeadm")
        .expect("kubeconfig");

    // What kubeadm's readiness probe asks, polled as the kubelet would (every 100 ms here).
    kube_mvp_testing::eventually_blocking(
        "/readyz to answer ok",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            let (ok, stdout, _) = kubectl(&kubeconfig, &["get", "--raw", "/readyz"]);
            (ok && stdout.trim() == "ok").then_some(())
        },
    )
    .unwrap_or_else(|e| {
        panic!(
            "{e}; the server's log:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        )
    });

    // The admin (system:masters) reads the RBAC bootstrap policy and writes an object.
    let (ok, stdout, stderr) = kubectl(
        &kubeconfig,
        &["get", "clusterrole", "cluster-admin", "-o", "name"],
    );
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout.trim(),
        "clusterrole.rbac.authorization.k8s.io/cluster-admin"
    );
    let (ok, _, stderr) = kubectl(
        &kubeconfig,
        &[
            "create",
            "configmap",
            "kubeadm-replay",
            "--from-literal=replayed=yes",
        ],
    );
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = kubectl(
        &kubeconfig,
        &[
            "get",
            "configmap",
            "kubeadm-replay",
            "-o",
            "jsonpath={.data.replayed}",
        ],
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "yes");

    // `--v=2` is below the per-request log's level: no `HTTP` lines.
    let log = std::fs::read_to_string(&log_path).expect("log");
    assert!(!log.contains("httplog"), "{log}");
    assert!(!log.contains('\u{1b}'), "no colour codes in a log file: {log}");
}
