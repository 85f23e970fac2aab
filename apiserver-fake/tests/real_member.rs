//! A real kube-apiserver in a cluster of fakes (`binary:` in `cluster --config`), as a user runs it:
//! `apiserver-fake cluster --config FILE` on a private etcd, one fake without `batch/v1` and one
//! kube-apiserver binary without `apps/v1`, each proxying what it lacks to the other, each reading what
//! the other wrote, each publishing its own identity lease.
//!
//! With `KUBE_APISERVER` naming a kube-apiserver binary (or `KUBEBUILDER_ASSETS` an envtest folder
//! holding one), `a_real_kube_apiserver_and_a_fake_proxy_to_each_other` runs against it, and says it is
//! skipped otherwise. The same scenario always runs with a stand-in for the binary: a script that
//! answers `--version` as kube-apiserver 1.36.2 does and otherwise starts this crate's fake with the
//! command line the cluster gives a real kube-apiserver (so every flag of it must be one kube-apiserver
//! has), its host name taken from the UTS namespace the cluster made for it.
//!
//! Needs the `etcd` feature, etcd on PATH and kubectl >= 1.28.
#![cfg(feature = "etcd")]

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::demo::{Demo, server};
use support::{kubectl_available, kubectl_ok as ok};

/// The real binary the suite runs against, if the environment names one.
fn real_kube_apiserver() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KUBE_APISERVER") {
        return Some(PathBuf::from(path));
    }
    let assets = PathBuf::from(std::env::var_os("KUBEBUILDER_ASSETS")?).join("kube-apiserver");
    assets.exists().then_some(assets)
}

/// The stand-in described in the module docs, written into `dir`. It refuses, as kube-apiserver would,
/// every flag only the fake has (`ServerFlags::fake_only_flags`), and appends each server command line
/// it is given to `dir/invocations`.
fn stand_in(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("kube-apiserver");
    let refused: Vec<String> = apiserver_fake::server::config::ServerFlags::fake_only_flags()
        .into_iter()
        .map(|flag| format!("{flag}|{flag}=*"))
        .collect();
    let script = format!(
        "#!/bin/sh\n\
         # A stand-in for kube-apiserver 1.36.2: the fake, given the real server's command line.\n\
         if [ \"$1\" = \"--version\" ]; then echo 'Kubernetes v1.36.2'; exit 0; fi\n\
         for arg in \"$@\"; do\n\
           case \"$arg\" in {}) echo \"Error: unknown flag: $arg\" >&2; exit 1;; esac\n\
         done\n\
         echo \"$@\" >> '{}'\n\
         exec '{}' --kubernetes-version=1.36 --hostname=\"$(cat /proc/sys/kernel/hostname)\" \"$@\"\n",
        refused.join("|"),
        dir.join("invocations").display(),
        env!("CARGO_BIN_EXE_apiserver-fake")
    );
    std::fs::write(&path, script).expect("write the stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// The server command lines the stand-in in `dir` was given.
fn invocations(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("invocations"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn ready() -> bool {
    support::etcd::etcd_on_path() && kubectl_available()
}

/// The scenario of the module docs with `binary` as the real member.
fn proxy_both_ways(binary: &Path) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("cluster.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n\
             - {{name: fake, version: \"1.36\", runtime-config: \"batch/v1=false\", feature-gates: \"UnknownVersionInteroperabilityProxy=true\"}}\n\
             - {{name: real, binary: \"{}\", runtime-config: \"apps/v1=false\", feature-gates: \"UnknownVersionInteroperabilityProxy=true\"}}\n\
             store: etcd\n\
             run: processes\n\
             lb: none\n\
             controllers: false\n",
            binary.display()
        ),
    )
    .expect("write the config");
    let cluster_dir = dir.path().join("cluster");
    let mut demo = Demo::start(&cluster_dir, &["--config", config.to_str().expect("utf-8 path")]);
    let manifest = demo.wait_for_manifest(&cluster_dir);
    let real = server(&manifest, "real");
    assert_eq!(real["binary"], binary.display().to_string(), "{manifest}");
    assert!(server(&manifest, "fake").get("binary").is_none(), "{manifest}");
    let (fake_kc, real_kc) = (
        cluster_dir.join("fake.kubeconfig"),
        cluster_dir.join("real.kubeconfig"),
    );

    // The fake lacks batch/v1: its Job is served by the real server, and read back from both.
    ok(&fake_kc, &["create", "job", "from-fake", "--image=busybox"]);
    ok(&real_kc, &["get", "job", "from-fake"]);
    ok(&fake_kc, &["get", "job", "from-fake"]);
    // The real server lacks apps/v1: its Deployment is served by the fake.
    ok(&real_kc, &["create", "deployment", "from-real", "--image=nginx"]);
    ok(&fake_kc, &["get", "deployment", "from-real"]);
    // What either writes itself, the other reads.
    ok(
        &fake_kc,
        &["create", "configmap", "written-by-fake", "--from-literal=k=v"],
    );
    ok(
        &real_kc,
        &["create", "configmap", "written-by-real", "--from-literal=k=v"],
    );
    for kubeconfig in [&fake_kc, &real_kc] {
        let out = ok(kubeconfig, &["get", "configmaps", "-o", "json"]);
        let list: Value = serde_json::from_str(&out).expect("a JSON list");
        let names: Vec<&str> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert!(
            names.contains(&"written-by-fake") && names.contains(&"written-by-real"),
            "{names:?}"
        );
    }
    // Two identity leases: the real member runs under a host name of its own.
    let out = ok(
        &fake_kc,
        &[
            "get",
            "leases",
            "-n",
            "kube-system",
            "-l",
            "apiserver.kubernetes.io/identity=kube-apiserver",
            "-o",
            "json",
        ],
    );
    let leases: Value = serde_json::from_str(&out).expect("a JSON list");
    assert_eq!(leases["items"].as_array().map(Vec::len), Some(2), "{leases}");
    // Its host name, seen from its own UTS namespace (nsenter needs root; without it, not checked).
    let pid = real["pid"].as_i64().expect("pid").to_string();
    let nsenter = std::process::Command::new("nsenter")
        .args(["--target", &pid, "--uts", "cat", "/proc/sys/kernel/hostname"])
        .output();
    if let Ok(output) = nsenter
        && output.status.success()
    {
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "real");
    }
    drop(demo);
}

#[test]
fn a_binary_member_and_a_fake_proxy_to_each_other() {
    if !ready() {
        return;
    }
    let bin = tempfile::tempdir().expect("tempdir");
    proxy_both_ways(&stand_in(bin.path()));
}

#[test]
fn a_real_kube_apiserver_and_a_fake_proxy_to_each_other() {
    let Some(binary) = real_kube_apiserver() else {
        eprintln!(
            "skipped: set KUBE_APISERVER to a kube-apiserver binary (or KUBEBUILDER_ASSETS to envtest's folder) to run this"
        );
        return;
    };
    if !ready() {
        return;
    }
    proxy_both_ways(&binary);
}

/// `upgrade --kube-apiserver PATH` with `binary` as PATH: two fakes at 1.35 on a private etcd, each
/// replaced in turn by the real server at 1.36, with the proxy on; the simulator's gate (no false 404,
/// no lost write, no missed watch event) holds through the mixed phase of a fake and a real server.
fn upgrade_into(binary: &Path) {
    let out = tempfile::tempdir().expect("tempdir");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .args([
            "upgrade",
            "--from=1.35",
            "--to=1.36",
            "--servers=2",
            "--mvp=on",
            "--store=etcd",
            "--run=processes",
            "--dwell-seconds=1",
            "--final-dwell-seconds=1",
            "--kube-apiserver",
        ])
        .arg(binary)
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("the binary runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "upgrade failed: {stderr}\n{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).expect("report.json"))
            .expect("report.json is JSON");
    let on = &report["runs"][0];
    assert_eq!(on["mvp"], true, "{on}");
    assert!(on["acknowledged_writes"].as_u64() > Some(10), "{on}");
    assert_eq!(on["false_404"], 0, "{on}");
    assert_eq!(on["lost_writes"], 0, "{on}");
    assert_eq!(on["missed_watch_events"], 0, "{on}");
}

#[test]
fn the_upgrade_simulator_rolls_fakes_into_a_binary() {
    if !ready() {
        return;
    }
    let bin = tempfile::tempdir().expect("tempdir");
    let binary = stand_in(bin.path());
    upgrade_into(&binary);
    // Both servers came back as the binary, given kube-apiserver's flags only (the stand-in refuses
    // the fake's), the proxy's gate among them.
    let lines = invocations(bin.path());
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for line in &lines {
        assert!(
            line.contains("--feature-gates=UnknownVersionInteroperabilityProxy=true"),
            "{line}"
        );
        assert!(line.contains("--etcd-servers="), "{line}");
    }
}

#[test]
fn the_upgrade_simulator_rolls_fakes_into_a_real_kube_apiserver() {
    let Some(binary) = real_kube_apiserver() else {
        eprintln!(
            "skipped: set KUBE_APISERVER to a kube-apiserver binary (or KUBEBUILDER_ASSETS to envtest's folder) to run this"
        );
        return;
    };
    if !ready() {
        return;
    }
    upgrade_into(&binary);
}

#[test]
fn an_upgrade_into_a_binary_of_another_minor_is_refused_before_anything_starts() {
    let bin = tempfile::tempdir().expect("tempdir");
    let binary = stand_in(bin.path());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .args([
            "upgrade",
            "--from=1.34",
            "--to=1.35",
            "--store=etcd",
            "--run=processes",
            "--kube-apiserver",
        ])
        .arg(&binary)
        .output()
        .expect("the binary runs");
    assert!(!output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        format!(
            "error: --kube-apiserver: {} is Kubernetes 1.36, not the --to minor 1.35",
            binary.display()
        )
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .args(["upgrade", "--from=1.35", "--to=1.36", "--kube-apiserver"])
        .arg(&binary)
        .output()
        .expect("the binary runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "error: --kube-apiserver: a real kube-apiserver runs as a process of its own on etcd; use --run processes --store etcd"
    );
}
