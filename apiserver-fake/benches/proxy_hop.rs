//! What the Mixed Version Proxy hop costs: the same Jobs list (~10 kB) fetched directly from the server
//! that serves `batch/v1` and through the server that lacks it, on loopback over real TLS.
//!
//! Run with: `cargo bench -p apiserver-fake --bench proxy_hop` (add `-- --quick` for a short run).
//!
//! Reports p50/p99 latency at concurrency 1, throughput at concurrency 32, the extra CPU time one proxied
//! request costs the process (both servers and the client live in it, so the difference between the
//! proxied and the direct run is the hop), and the extra latency of a watch event through the proxy.

use std::time::{Duration, Instant};

use apiserver_fake::cluster::{Preset, start_cluster};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{Method, Request};
use http_body_util::{BodyExt, BodyStream, Full};

type HttpsClient = apiserver_fake::cluster::AdminClient;

async fn get(client: &HttpsClient, url: &str) -> usize {
    let request = Request::builder()
        .method(Method::GET)
        .uri(url)
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = client.request(request).await.expect("response");
    assert!(response.status().is_success(), "{url}: {}", response.status());
    response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .len()
}

/// Process CPU time (user + system) from /proc/self/stat, in clock ticks of 10 ms.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // After the ")" the state is field 0; utime and stime are fields 11 and 12.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

struct Latency {
    p50: Duration,
    p99: Duration,
    cpu_per_request: Duration,
}

async fn latency(client: &HttpsClient, url: &str, requests: usize) -> Latency {
    for _ in 0..50 {
        get(client, url).await;
    }
    let cpu_before = cpu_time();
    let mut samples = Vec::with_capacity(requests);
    for _ in 0..requests {
        let start = Instant::now();
        get(client, url).await;
        samples.push(start.elapsed());
    }
    let cpu = cpu_time().saturating_sub(cpu_before);
    samples.sort();
    Latency {
        p50: percentile(&samples, 0.50),
        p99: percentile(&samples, 0.99),
        cpu_per_request: cpu / u32::try_from(requests).unwrap_or(u32::MAX),
    }
}

async fn throughput(client: &HttpsClient, url: &str, concurrency: usize, duration: Duration) -> f64 {
    let deadline = Instant::now() + duration;
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (client, url) = (client.clone(), url.to_owned());
        workers.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                get(&client, &url).await;
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for worker in workers {
        total += worker.await.expect("worker");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cluster = start_cluster(None, Preset::Default.members(), 0).await.expect("cluster");
        cluster
            .wait_until_peers_know_each_other(Duration::from_secs(10))
            .await
            .expect("peers discover each other");
        let client = cluster.admin_client().expect("admin client");
        let (a, b) = (cluster.servers[0].1.url(), cluster.servers[1].1.url());
        let jobs = "/apis/batch/v1/namespaces/default/jobs";
        for i in 0..26 {
            let body = format!(
                r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"bench-{i:02}","labels":{{"app":"bench"}}}},
                "spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"main","image":"busybox:1.36","command":["sh","-c","echo hello from the mixed version proxy bench"]}}]}}}}}}}}"#
            );
            let request = Request::builder()
                .method(Method::POST)
                .uri(format!("{b}{jobs}"))
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))
                .expect("request");
            let response = client.request(request).await.expect("create");
            assert!(response.status().is_success(), "create job: {}", response.status());
        }
        let size = get(&client, &format!("{b}{jobs}")).await;
        let requests = if quick { 300 } else { 2000 };
        let window = Duration::from_secs(if quick { 2 } else { 5 });
        println!("Jobs list: {size} bytes; {requests} sequential requests; {}s at concurrency 32", window.as_secs());

        let direct = latency(&client, &format!("{b}{jobs}"), requests).await;
        let proxied = latency(&client, &format!("{a}{jobs}"), requests).await;
        println!("{:<10} {:>10} {:>10} {:>14}", "", "p50", "p99", "CPU/request");
        for (name, l) in [("direct", &direct), ("proxied", &proxied)] {
            println!("{name:<10} {:>10.3?} {:>10.3?} {:>14.3?}", l.p50, l.p99, l.cpu_per_request);
        }
        let hop_cpu = proxied.cpu_per_request.saturating_sub(direct.cpu_per_request);
        println!(
            "hop: +{:.3?} at p50 ({:.2}x), +{hop_cpu:.3?} CPU per request",
            proxied.p50.saturating_sub(direct.p50),
            proxied.p50.as_secs_f64() / direct.p50.as_secs_f64()
        );

        let direct_rps = throughput(&client, &format!("{b}{jobs}"), 32, window).await;
        let proxied_rps = throughput(&client, &format!("{a}{jobs}"), 32, window).await;
        println!(
            "throughput at concurrency 32: direct {direct_rps:.0} req/s, proxied {proxied_rps:.0} req/s (ratio {:.2})",
            proxied_rps / direct_rps
        );

        let events = if quick { 50 } else { 200 };
        let direct_watch = watch_event_delay(&client, &b, &b, events, "direct").await;
        let proxied_watch = watch_event_delay(&client, &a, &b, events, "proxied").await;
        println!(
            "watch event: direct {direct_watch:.3?}, proxied {proxied_watch:.3?} (+{:.3?})",
            proxied_watch.saturating_sub(direct_watch)
        );
        cluster.shutdown().await;
    });
}

/// Median delay from creating a Job on `create_base` to its ADDED event on a watch opened on
/// `watch_base` (through the proxy when that server lacks `batch/v1`).
async fn watch_event_delay(
    client: &HttpsClient,
    watch_base: &str,
    create_base: &str,
    events: usize,
    tag: &str,
) -> Duration {
    let request = Request::builder()
        .method(Method::GET)
        .uri(format!(
            "{watch_base}/apis/batch/v1/namespaces/default/jobs?watch=1&labelSelector=watch%3D{tag}"
        ))
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = client.request(request).await.expect("watch");
    assert!(response.status().is_success(), "watch: {}", response.status());
    let mut stream = BodyStream::new(response.into_body());
    let mut delays = Vec::with_capacity(events);
    for i in 0..events {
        let body = format!(
            r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{tag}-{i}","labels":{{"watch":"{tag}"}}}},"spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"c","image":"busybox"}}]}}}}}}}}"#
        );
        let start = Instant::now();
        let create = Request::builder()
            .method(Method::POST)
            .uri(format!("{create_base}/apis/batch/v1/namespaces/default/jobs"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let created = client.request(create).await.expect("create");
        assert!(created.status().is_success(), "create: {}", created.status());
        created.into_body().collect().await.expect("body");
        let mut seen = Vec::new();
        while !seen.contains(&b'\n') {
            let frame = stream.next().await.expect("event").expect("frame");
            if let Ok(data) = frame.into_data() {
                seen.extend_from_slice(&data);
            }
        }
        delays.push(start.elapsed());
    }
    delays.sort();
    percentile(&delays, 0.5)
}
