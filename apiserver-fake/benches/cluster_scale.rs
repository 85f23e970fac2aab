//! Clusters of ten (issue 21): `apiserver-fake cluster --config` with ten servers on a private etcd,
//! every server its own process, measured from outside as a user sees it — the time until
//! `cluster.json` is written (every server ready and knowing its peers), each idle server's RSS, and the
//! peer discovery fetches at rest (the proxy's `apiserver_rerouted_request_total`, which counts every
//! peer discovery fetch; nothing else is proxied while the cluster rests), so that a sync storm would
//! show. Beside it, in the same run, the reference: the same measurements for a cluster of one server.
//!
//! Run with: `cargo bench -p apiserver-fake --features etcd --bench cluster_scale` (`-- --quick` rests
//! 10 s instead of 60 s).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "../tests/support/mod.rs"]
mod support;

use support::demo::{Demo, admin};

/// The binary's allocator (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `VmRSS` of process `pid` in MiB (0 when unreadable).
fn rss_mib(pid: i64) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The config of a cluster of `n` servers: minors alternating 1.35/1.36, only the last serving
/// `batch/v1`, the proxy on everywhere (as `tests/ten_servers.rs`).
fn config(n: usize) -> String {
    let mut config = String::from("servers:\n");
    for i in 0..n {
        let version = if i % 2 == 0 { "1.35" } else { "1.36" };
        let runtime = if i + 1 == n { "" } else { "batch/v1=false" };
        config.push_str(&format!(
            "- {{name: s{i}, version: \"{version}\", runtime-config: \"{runtime}\", \
             feature-gates: \"UnknownVersionInteroperabilityProxy=true\"}}\n"
        ));
    }
    config + "store: etcd\nrun: processes\nlb: none\ncontrollers: false\n"
}

/// The sum of every `apiserver_rerouted_request_total` sample of every server.
async fn rerouted(dir: &Path, manifest: &Value) -> f64 {
    let mut total = 0.0;
    for server in manifest["servers"].as_array().into_iter().flatten() {
        let text = admin(dir, server).get("/metrics").await.text();
        total += text
            .lines()
            .filter(|l| l.starts_with("apiserver_rerouted_request_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    total
}

struct Figures {
    up: Duration,
    rss: Vec<f64>,
    fetches_at_start: f64,
    fetches_per_minute: f64,
}

fn measure(runtime: &tokio::runtime::Runtime, n: usize, rest: Duration) -> Figures {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, config(n)).expect("write the config");
    let cluster_dir = dir.path().join("cluster");
    let started = Instant::now();
    let mut demo = Demo::start(&cluster_dir, &["--config", path.to_str().expect("utf-8")]);
    let manifest = demo.wait_for_manifest(&cluster_dir);
    let up = started.elapsed();
    let before = runtime.block_on(rerouted(&cluster_dir, &manifest));
    // The rest being measured: nothing but the servers' own background work runs.
    std::thread::sleep(rest);
    let after = runtime.block_on(rerouted(&cluster_dir, &manifest));
    let rss = manifest["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| rss_mib(s["pid"].as_i64().unwrap_or_default()))
        .collect();
    drop(demo);
    Figures {
        up,
        rss,
        fetches_at_start: before,
        fetches_per_minute: (after - before) * 60.0 / rest.as_secs_f64(),
    }
}

fn main() {
    if !cfg!(feature = "etcd") || !apiserver_fake::cluster::etcd_process::etcd_installed() {
        eprintln!("skipped: needs `--features etcd` and etcd on PATH");
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let rest = Duration::from_secs(if std::env::args().any(|a| a == "--quick") {
        10
    } else {
        60
    });
    println!(
        "| cluster on etcd, processes | up (cluster.json) | idle RSS per server (min / max) | discovery fetches during start-up | at rest, per minute |"
    );
    println!("|---|---:|---:|---:|---:|");
    for n in [1, 10] {
        let f = measure(&runtime, n, rest);
        let min = f.rss.iter().copied().fold(f64::INFINITY, f64::min);
        let max = f.rss.iter().copied().fold(0.0, f64::max);
        println!(
            "| {n} server{} | {:.2} s | {min:.1} / {max:.1} MiB | {} | {:.1} |",
            if n == 1 { " (reference)" } else { "s" },
            f.up.as_secs_f64(),
            f.fetches_at_start,
            f.fetches_per_minute
        );
    }
}
