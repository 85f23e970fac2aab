//! A soak of the demo cluster through the proxy: 10^5 proxied GETs (of one Job) at concurrency 64, while 10^4 proxied
//! writes (Job creates through `a`, which lacks `batch/v1`) run and 1,000 proxied watches stay open, each
//! expected to see every create in the namespace it watches. Reports errors (any answer that is not a
//! success, any transport error), writes acknowledged but not stored (lost), watch events not delivered
//! (missed), GET latency p50/p99 and the process's RSS before and after. The cluster, its clients and
//! the load all live in this one process, as in `proxy_hop`.
//!
//! First, two memory phases measured from outside, as the RSS of the built binary's processes
//! (`/proc/PID/status`), so that the bench's own clients do not count (issue 24's targets):
//! - the in-process demo (`apiserver-fake cluster`): 20,000 ConfigMaps of 1 kB written then deleted
//!   (through `b`, 8 writers); RSS before, after the writes, after the deletes and 12 s later, against
//!   the target of at most 2× the RSS before;
//! - with `--features etcd` and `etcd` on `PATH`, a process cluster on a private etcd: 10,000 Jobs, then
//!   one full list of them through `b`; `b`'s RSS before, its peak during the list (`VmHWM`, reset
//!   first) and 12 s later, against the target of adding at most 2× the list's size.
//!
//! Run with: `cargo bench -p apiserver-fake --features etcd --bench soak` (`-- --quick` for a tenth of
//! everything, `-- --memory` for the memory phases only). `cargo bench` builds the binary in release
//! too, so its figures are a release build's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apiserver_fake::cluster::{Preset, start_cluster};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{Method, Request};
use http_body_util::{BodyExt, BodyStream, Full};
use support::demo::{Demo, admin, server};

#[path = "../tests/support/mod.rs"]
mod support;

type HttpsClient = apiserver_fake::cluster::AdminClient;

/// The binary's allocator (see `src/main.rs`), so that the RSS figures are the binary's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Resident set size of this process, from /proc/self/status, in MiB.
fn rss_mib() -> f64 {
    status_mib("self", "VmRSS:")
}

/// A `/proc/PID/status` figure of process `pid` (`self` for this one) in MiB: `VmRSS:` (resident now)
/// or `VmHWM:` (the peak since start or since [`reset_peak`]); 0 when unreadable.
fn status_mib(pid: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Resets process `pid`'s `VmHWM` to its current RSS (`/proc/PID/clear_refs`, value 5).
#[cfg(feature = "etcd")]
fn reset_peak(pid: &str) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len().saturating_sub(1))]
}

async fn send(
    client: &HttpsClient,
    method: Method,
    url: &str,
    body: Option<String>,
) -> Result<(u16, Bytes), String> {
    let mut request = Request::builder().method(method).uri(url);
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, body))
}

/// `count` GETs of `url` from 64 workers; the latencies of the successful ones, errors counted.
async fn get_load(client: &HttpsClient, url: &str, count: u64, errors: &Arc<AtomicU64>) -> Vec<Duration> {
    let next = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..64 {
        let (client, url, next, errors) = (client.clone(), url.to_owned(), next.clone(), errors.clone());
        readers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let start = Instant::now();
                match send(&client, Method::GET, &url, None).await {
                    Ok((200, _)) => samples.push(start.elapsed()),
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for reader in readers {
        samples.extend(reader.await.expect("reader"));
    }
    samples.sort();
    samples
}

fn job(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{name}"}},"spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"c","image":"busybox"}}]}}}}}}}}"#
    )
}

/// `count` ConfigMaps of 1 kB created in `default` by 8 writers of `client`, then deleted; process
/// `pid`'s RSS (MiB) after the writes and after the deletes, and how many requests failed.
async fn write_then_delete(client: &support::TestClient, pid: &str, count: usize) -> (f64, f64, u64) {
    let errors = Arc::new(AtomicU64::new(0));
    let mut rss = Vec::new();
    for delete in [false, true] {
        let mut writers = Vec::new();
        for w in 0..8 {
            let (client, errors) = (client.clone(), errors.clone());
            writers.push(tokio::spawn(async move {
                let configmaps = "/api/v1/namespaces/default/configmaps";
                for i in (w..count).step_by(8) {
                    let sent = if delete {
                        client
                            .try_send(Method::DELETE, &format!("{configmaps}/mem-{i}"), &[], None)
                            .await
                    } else {
                        let body = format!(
                            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"mem-{i}"}},"data":{{"k":"{}"}}}}"#,
                            "x".repeat(1000)
                        );
                        client.try_send(Method::POST, configmaps, &[], Some(&body)).await
                    };
                    if !sent.is_ok_and(|reply| reply.status.is_success()) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for writer in writers {
            writer.await.expect("writer");
        }
        rss.push(status_mib(pid, "VmRSS:"));
    }
    (rss[0], rss[1], errors.load(Ordering::Relaxed))
}

/// The memory phase on the built binary's in-process demo (`apiserver-fake cluster`): `objects`
/// ConfigMaps written then deleted through `b`; prints the `cluster` process's RSS.
async fn memory_phase(objects: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let pid = demo.child.id().to_string();
    let client = admin(dir.path(), server(&manifest, "b"));
    // Settle the start-up (controllers' first lists, discovery) before the reference figure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let fresh = status_mib(&pid, "VmRSS:");
    let (written, deleted, errors) = write_then_delete(&client, &pid, objects).await;
    // jemalloc's decay (10 s by default) returns the freed pages on its background thread.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let settled = status_mib(&pid, "VmRSS:");
    tokio::time::sleep(Duration::from_secs(18)).await;
    let idle = status_mib(&pid, "VmRSS:");
    println!(
        "memory (the built binary's `cluster`, in-process demo): {objects} ConfigMaps of 1 kB written then deleted through b ({errors} errors): RSS {fresh:.0} MiB before, {written:.0} MiB after the writes, {deleted:.0} MiB after the deletes, {settled:.0} MiB 12 s later ({:.2}x before; target at most 2x), {idle:.0} MiB 30 s later",
        settled / fresh
    );
    drop(demo);
}

/// The list phase on etcd: a process cluster of the built binary on a private etcd, `objects` Jobs
/// created through `b`, then one full list of them through `b`, read as a stream and counted (so the
/// bench holds none of it); prints `b`'s RSS before, at its peak during the list and 12 s later.
#[cfg(feature = "etcd")]
async fn etcd_list_phase(objects: usize) {
    use apiserver_fake::cluster::process::{EtcdBackend, ProcessCluster};

    if !apiserver_fake::cluster::etcd_process::etcd_installed() {
        println!("list on etcd: skipped (no etcd binary on PATH)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = ProcessCluster::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_apiserver-fake")),
        Some(dir.path().join("cluster")),
        Preset::Default.members(),
        0,
        EtcdBackend::Private,
        "/registry",
    )
    .await
    .expect("the process cluster starts");
    let d = cluster.dir();
    let client = support::TestClient::new(
        &cluster.url("b").expect("b"),
        &d.join("ca.crt"),
        Some((&d.join("admin.crt"), &d.join("admin.key"))),
    );
    let pid = cluster.pid("b").ok().flatten().expect("b's pid").to_string();
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let errors = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..16 {
        let (client, errors) = (client.clone(), errors.clone());
        writers.push(tokio::spawn(async move {
            for i in (w..objects).step_by(16) {
                let sent = client
                    .try_send(Method::POST, jobs, &[], Some(&job(&format!("list-{i}"))))
                    .await;
                if !sent.is_ok_and(|reply| reply.status.is_success()) {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
    println!(
        "list on etcd (b, a process of the built binary): {objects} Jobs created ({} errors)",
        errors.load(Ordering::Relaxed)
    );
    // The full list (read in ranges, encoded as read); on a server with the watch cache (the default)
    // the first list also starts the resource's cache, which keeps every object from then on, so the
    // list itself is measured again once the cache is warm. Then as reference the same list through
    // the one-read path (a `limit` above the collection's size: one range, a JSON tree per object).
    for (what, path) in [
        ("first full list (starts the watch cache)", jobs.to_owned()),
        ("full list, warm watch cache", jobs.to_owned()),
        (
            "reference, one read (limit=100000)",
            format!("{jobs}?limit=100000"),
        ),
    ] {
        tokio::time::sleep(Duration::from_secs(12)).await;
        let before = status_mib(&pid, "VmRSS:");
        let peak_tracked = reset_peak(&pid);
        let started = Instant::now();
        let response = client.open(Method::GET, &path, &[], None).await;
        let status = response.status();
        let mut body = BodyStream::new(response.into_body());
        let mut size = 0usize;
        while let Some(frame) = body.next().await {
            if let Ok(data) = frame.expect("the list's body").into_data() {
                size += data.len();
            }
        }
        let elapsed = started.elapsed();
        let peak = status_mib(&pid, "VmHWM:");
        tokio::time::sleep(Duration::from_secs(12)).await;
        let settled = status_mib(&pid, "VmRSS:");
        let list_mib = size as f64 / (1024.0 * 1024.0);
        let peak = if peak_tracked {
            format!(
                "peak {peak:.0} MiB (+{:.1} MiB = {:.2}x the list; target at most 2x)",
                peak - before,
                (peak - before) / list_mib
            )
        } else {
            "peak unknown (clear_refs refused)".to_owned()
        };
        println!(
            "  {what}: {status} in {:.2} s, {list_mib:.1} MiB; b's RSS {before:.0} MiB before, {peak}, {settled:.0} MiB 12 s later",
            elapsed.as_secs_f64(),
        );
    }
    cluster.shutdown().await;
}

fn main() {
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    let quick = std::env::args().any(|a| a == "--quick");
    // `-- --memory`: the memory phases only.
    let memory_only = std::env::args().any(|a| a == "--memory");
    let scale = if quick { 10 } else { 1 };
    let (gets, writes, watches) = (100_000 / scale, 10_000 / scale, 1_000 / scale);
    let watched_writes = 100 / scale.min(10);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let _ = rlimit::increase_nofile_limit(u64::MAX);
        memory_phase(20_000 / scale).await;
        #[cfg(feature = "etcd")]
        etcd_list_phase(10_000 / scale).await;
        #[cfg(not(feature = "etcd"))]
        println!("list on etcd: skipped (built without the `etcd` feature; cargo bench -p apiserver-fake --features etcd --bench soak)");
        if memory_only {
            return;
        }
        let cluster = start_cluster(None, Preset::Default.members(), 0).await.expect("cluster");
        let client = cluster.admin_client().expect("admin client");
        // The watches on a connection of their own, as an informer's client would hold them: one HTTP/2
        // connection carries at most 1,000 streams (kube-apiserver's limit), all of them taken here.
        let watch_client = cluster.admin_client().expect("admin client");
        let (a, b) = (cluster.servers[0].1.url(), cluster.servers[1].1.url());
        for ns in ["soak", "watched"] {
            let body = format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#);
            let (status, _) = send(&client, Method::POST, &format!("{b}/api/v1/namespaces"), Some(body)).await.expect("namespace");
            assert!(status < 300, "namespace {ns}: {status}");
        }
        let jobs = |ns: &str| format!("{a}/apis/batch/v1/namespaces/{ns}/jobs");
        let (status, _) = send(&client, Method::POST, &jobs("soak"), Some(job("probe"))).await.expect("probe");
        assert_eq!(status, 201, "the first proxied create");
        let rss_before = rss_mib();
        println!(
            "soak: {gets} proxied GETs at concurrency 64, {writes} proxied creates ({watched_writes} of them watched), {watches} proxied watches; RSS before {rss_before:.0} MiB"
        );

        // Watches first: each must see every create in `watched`.
        let events = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let mut watchers = Vec::new();
        for _ in 0..watches {
            let (client, url, events, errors) = (watch_client.clone(), format!("{}?watch=true", jobs("watched")), events.clone(), errors.clone());
            watchers.push(tokio::spawn(async move {
                let request = Request::get(&url).body(Full::new(Bytes::new())).expect("request");
                let Ok(response) = client.request(request).await else {
                    errors.fetch_add(1, Ordering::Relaxed);
                    return 0;
                };
                let mut stream = BodyStream::new(response.into_body());
                let mut seen = 0;
                while seen < watched_writes {
                    match tokio::time::timeout(Duration::from_secs(120), stream.next()).await {
                        Ok(Some(Ok(frame))) => {
                            if let Ok(data) = frame.into_data() {
                                let added = data.windows(7).filter(|w| w == b"\"ADDED\"").count();
                                seen += added;
                                events.fetch_add(added as u64, Ordering::Relaxed);
                            }
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    }
                }
                seen
            }));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;

        // The reference, in the same run: the same GETs sent directly to b, before any other load.
        let direct_errors = Arc::new(AtomicU64::new(0));
        let direct_started = Instant::now();
        let direct = get_load(&client, &format!("{b}/apis/batch/v1/namespaces/soak/jobs/probe"), gets as u64, &direct_errors).await;
        let direct_elapsed = direct_started.elapsed();

        let started = Instant::now();
        let proxied_url = format!("{}/probe", jobs("soak"));
        let readers = {
            let (client, errors) = (client.clone(), errors.clone());
            tokio::spawn(async move { get_load(&client, &proxied_url, gets as u64, &errors).await })
        };
        let mut writers = Vec::new();
        for w in 0..8 {
            let (client, a_jobs, watched, errors) = (client.clone(), jobs("soak"), jobs("watched"), errors.clone());
            writers.push(tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for i in (w..writes).step_by(8) {
                    let (url, name) = if i < watched_writes {
                        (&watched, format!("w-{i}"))
                    } else {
                        (&a_jobs, format!("s-{i}"))
                    };
                    match send(&client, Method::POST, url, Some(job(&name))).await {
                        Ok((201, _)) => acknowledged.push(name),
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                acknowledged
            }));
        }
        let samples = readers.await.expect("readers");
        let mut acknowledged = Vec::new();
        for writer in writers {
            acknowledged.extend(writer.await.expect("writer"));
        }
        let mut missed = 0;
        for watcher in watchers {
            missed += watched_writes.saturating_sub(watcher.await.expect("watcher"));
        }
        let elapsed = started.elapsed();

        // Every acknowledged create must be stored (read back from b, which serves Jobs itself).
        let mut stored = std::collections::HashSet::new();
        for ns in ["soak", "watched"] {
            let (_, body) = send(&client, Method::GET, &format!("{b}/apis/batch/v1/namespaces/{ns}/jobs"), None)
                .await
                .expect("list");
            let list: serde_json::Value = serde_json::from_slice(&body).expect("JSON list");
            for item in list["items"].as_array().into_iter().flatten() {
                if let Some(name) = item["metadata"]["name"].as_str() {
                    stored.insert(name.to_owned());
                }
            }
        }
        let lost = acknowledged.iter().filter(|n| !stored.contains(*n)).count();
        let rss_after = rss_mib();
        println!(
            "done in {:.1} s: errors {}, lost writes {lost} of {} acknowledged, missed watch events {missed} of {} ({} delivered)",
            elapsed.as_secs_f64(),
            errors.load(Ordering::Relaxed),
            acknowledged.len(),
            watches * watched_writes,
            events.load(Ordering::Relaxed),
        );
        println!(
            "proxied GET p50 {:.3?} p99 {:.3?} ({} answered, {:.0}/s); RSS {rss_before:.0} MiB before, {rss_after:.0} MiB after",
            percentile(&samples, 0.5),
            percentile(&samples, 0.99),
            samples.len(),
            samples.len() as f64 / elapsed.as_secs_f64(),
        );
        println!(
            "reference, direct GET to b before the soak: p50 {:.3?} p99 {:.3?} ({} answered, {:.0}/s, errors {})",
            percentile(&direct, 0.5),
            percentile(&direct, 0.99),
            direct.len(),
            direct.len() as f64 / direct_elapsed.as_secs_f64(),
            direct_errors.load(Ordering::Relaxed),
        );
        cluster.shutdown().await;
    });
}
