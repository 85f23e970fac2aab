//! Clusters of ten (issue 21): `apiserver-fake cluster --config` with ten servers on a private etcd,
//! every server its own process, measured from outside as a user sees it — the time until
//! `cluster.json` is written (every server ready and knowing its peers), each idle server's RSS, and the
//! peer discovery fetches at rest (the proxy's `apiserver_rerouted_request_total`, which counts every
//! peer discovery fetch; nothing else is proxied while the cluster rests), so that a sync storm would
//! show. Beside it, in the same run, the reference: the same measurements for a cluster of one server.
//!
//! Then, with 10,000 ConfigMaps of 1 kB created through the first server: every server's RSS once the
//! first has served a full list and a new **watch list** of them (`sendInitialEvents=true`, read until
//! the `k8s.io/initial-events-end` bookmark, as client-go's WatchListClient reads it), and again once
//! it has settled (the server at rest holding the objects), the watch list's time, and beside it the
//! reference of the same run, a plain list of the same objects.
//!
//! Run with: `cargo bench -p apiserver-fake --features etcd --bench cluster_scale` (`-- --quick` rests
//! 10 s instead of 60 s and creates 1,000 objects).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::Method;
use http_body_util::BodyExt;
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
/// `batch/v1`, the proxy on everywhere (as `tests/ten_servers.rs`), the watch cache on (the default;
/// named so the figures say so, docs/decisions.md §21), so that the figures with objects are those of servers that cache them.
fn config(n: usize) -> String {
    let mut config = String::from("servers:\n");
    for i in 0..n {
        let version = if i % 2 == 0 { "1.35" } else { "1.36" };
        let runtime = if i + 1 == n { "" } else { "batch/v1=false" };
        config.push_str(&format!(
            "- {{name: s{i}, version: \"{version}\", runtime-config: \"{runtime}\", \
             feature-gates: \"UnknownVersionInteroperabilityProxy=true\", flags: {{watch-cache: \"true\"}}}}\n"
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
    loaded: Option<Loaded>,
}

/// What the cluster shows once it holds the objects.
struct Loaded {
    objects: usize,
    rss: Vec<f64>,
    /// Every server's RSS once it has settled after the lists (see [`settled_rss`]).
    rss_at_rest: Vec<f64>,
    list: Duration,
    watch_list: Duration,
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// Creates `count` ConfigMaps of 1 kB through `client`, 16 at a time; panics on a failed create (the
/// figures would mean nothing).
async fn create_objects(client: &support::TestClient, count: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for _ in 0..16 {
        let (client, next) = (client.clone(), next.clone());
        writers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let body = format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"scale-{i}"}},"data":{{"k":"{}"}}}}"#,
                    "x".repeat(1000)
                );
                let reply = client.post(CONFIGMAPS, &body).await;
                assert!(reply.status.is_success(), "create {i}: {}", reply.status);
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
}

/// A new watch list of the ConfigMaps, read until the initial-events-end bookmark: its time and how
/// many objects it delivered.
async fn watch_list(client: &support::TestClient) -> (Duration, usize) {
    let started = Instant::now();
    let path = format!(
        "{CONFIGMAPS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    );
    let response = client.open(Method::GET, &path, &[], None).await;
    assert!(
        response.status().is_success(),
        "watch list: {}",
        response.status()
    );
    let mut body = response.into_body();
    let (mut pending, mut added) = (Vec::new(), 0);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.expect("watch stream").into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).expect("a watch event");
            match event["type"].as_str() {
                Some("ADDED") => added += 1,
                Some("BOOKMARK")
                    if event
                        .pointer("/object/metadata/annotations/k8s.io~1initial-events-end")
                        .and_then(Value::as_str)
                        == Some("true") =>
                {
                    return (started.elapsed(), added);
                }
                _ => {}
            }
        }
    }
    panic!("the watch list ended before its initial-events-end bookmark ({added} objects)");
}

fn measure(runtime: &tokio::runtime::Runtime, n: usize, rest: Duration, objects: usize) -> Figures {
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
    let all_rss = || -> Vec<f64> {
        manifest["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| rss_mib(s["pid"].as_i64().unwrap_or_default()))
            .collect()
    };
    let rss = all_rss();
    let loaded = (objects > 0).then(|| {
        let first = &manifest["servers"][0];
        let client = admin(&cluster_dir, first);
        runtime.block_on(async {
            create_objects(&client, objects).await;
            let started = Instant::now();
            let listed = client.get(CONFIGMAPS).await;
            let list = started.elapsed();
            let items = listed.json()["items"].as_array().map_or(0, Vec::len);
            assert_eq!(items, objects, "the list holds every object");
            let (watch_list, added) = watch_list(&client).await;
            assert_eq!(added, objects, "the watch list delivers every object");
            let rss = all_rss();
            Loaded {
                objects,
                rss,
                rss_at_rest: settled_rss(&all_rss),
                list,
                watch_list,
            }
        })
    });
    drop(demo);
    Figures {
        up,
        rss,
        fetches_at_start: before,
        fetches_per_minute: (after - before) * 60.0 / rest.as_secs_f64(),
        loaded,
    }
}

/// Every server's RSS at rest after a burst: what the lists' buffers leave behind once the allocator
/// has handed back what they freed (jemalloc returns dirty pages over ~10 s). Read each second until
/// no server's RSS has fallen for three readings in a row, or for 30 s at most.
fn settled_rss(all_rss: &dyn Fn() -> Vec<f64>) -> Vec<f64> {
    let mut last = all_rss();
    let mut steady = 0;
    for _ in 0..30 {
        std::thread::sleep(Duration::from_secs(1));
        let now = all_rss();
        let fell = now.iter().zip(&last).any(|(now, before)| *now < before - 0.5);
        steady = if fell { 0 } else { steady + 1 };
        last = now;
        if steady == 3 {
            break;
        }
    }
    last
}

/// `(min, max)` of `values`.
fn min_max(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    (min, max)
}

fn main() {
    if !cfg!(feature = "etcd") || !apiserver_fake::cluster::etcd_process::etcd_installed() {
        eprintln!("skipped: needs `--features etcd` and etcd on PATH");
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let quick = std::env::args().any(|a| a == "--quick");
    let rest = Duration::from_secs(if quick { 10 } else { 60 });
    let objects = if quick { 1_000 } else { 10_000 };
    println!(
        "| cluster on etcd, processes | up (cluster.json) | idle RSS per server (min / max) | discovery fetches during start-up | at rest, per minute |"
    );
    println!("|---|---:|---:|---:|---:|");
    let mut loaded = Vec::new();
    for n in [1, 10] {
        let f = measure(&runtime, n, rest, objects);
        let (min, max) = min_max(&f.rss);
        loaded.extend(f.loaded.map(|l| (n, l)));
        println!(
            "| {n} server{} | {:.2} s | {min:.1} / {max:.1} MiB | {} | {:.1} |",
            if n == 1 { " (reference)" } else { "s" },
            f.up.as_secs_f64(),
            f.fetches_at_start,
            f.fetches_per_minute
        );
    }
    println!();
    println!(
        "| cluster on etcd, processes | objects (ConfigMaps of 1 kB) | RSS per server just after a list and a watch list through the first (min / max) | then at rest (min / max) | new watch list until initial-events-end | reference: plain list |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (n, l) in loaded {
        let (min, max) = min_max(&l.rss);
        let (rest_min, rest_max) = min_max(&l.rss_at_rest);
        println!(
            "| {n} server{} | {} | {min:.1} / {max:.1} MiB | {rest_min:.1} / {rest_max:.1} MiB | {:.2} s | {:.2} s |",
            if n == 1 { " (reference)" } else { "s" },
            l.objects,
            l.watch_list.as_secs_f64(),
            l.list.as_secs_f64()
        );
    }
}
