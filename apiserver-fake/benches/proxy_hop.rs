//! What the Mixed Version Proxy hop costs, next to what nginx costs for the same hop: the same Jobs list
//! (~10 kB) fetched directly from the server that serves `batch/v1` (`b`), through the server that lacks
//! it (`a`, whose filter proxies over mutual TLS to `b`), and through nginx as a TLS→TLS reverse proxy to
//! `b` (when `nginx` is on the PATH), on loopback over real TLS.
//!
//! Run with: `cargo bench -p apiserver-fake --bench proxy_hop` (add `-- --quick` for a short run, `--http1`
//! to make the client speak HTTP/1.1, one connection per concurrent request, as wrk does; `--only=hop`
//! to measure one path, e.g. under a profiler, `--requests=N` for another number of sequential requests).
//!
//! The paths are measured interleaved: every round measures each path in turn (the order rotates from
//! round to round), and the figures are the medians across rounds, so a neighbour's build slowing the
//! machine for a while hits every path alike. Per path:
//! - p50/p99 latency of sequential requests (concurrency 1) and the p50 added to the direct path;
//! - CPU time per request at concurrency 1 and 32: this process's (it holds the client and both servers)
//!   plus nginx's master and workers' (from `/proc/<pid>/task/<tid>/schedstat`), and what the path adds to the direct one;
//! - throughput at concurrency 32 and its ratio to the direct path's;
//! - watches: the delay from creating a Job on `b` to its ADDED event on one watch opened through the
//!   path, and until all of 32 watches opened through it have the event, with the CPU per event.
//!
//! The client is in-process (hyper, as the rest of the project's clients) rather than wrk: the watch
//! figures need a client that creates objects and reads event streams, the CPU of one process (plus
//! nginx's) is then the whole cost of a request on every path, and the client speaks HTTP/2 like
//! client-go (kubectl's library) unless `--http1` is given.
//!
//! nginx is configured as a production reverse proxy in front of an apiserver would be: a TLS listener
//! (HTTP/2 unless `--http1`) with a serving certificate of the cluster's CA, `proxy_pass` over TLS to
//! `b` verifying `b`'s certificate, presenting the admin client certificate (so `b` serves the same user
//! as on the direct path), HTTP/1.1 upstream connections kept alive, and no response buffering (watches
//! stream).

mod nginx;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use apiserver_fake::cluster::{Preset, start_cluster};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{Method, Request};
use http_body_util::{BodyExt, BodyStream, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;

type HttpsClient =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
/// Watched Jobs are created in a namespace of their own, so the listed Jobs stay the same all run.
const WATCH_NAMESPACE: &str = "bench-watch";
/// The concurrency of the throughput and watch fan-out measurements.
const CONCURRENCY: usize = 32;

/// The bench's knobs (`--quick` shrinks every count).
struct Settings {
    rounds: usize,
    requests: usize,
    window: Duration,
    watch_events: usize,
    fanout_events: usize,
    http1: bool,
    /// `--only=<path>`: measure just that path (`direct`, `hop`, `nginx`), e.g. under a profiler.
    only: Option<String>,
}

impl Settings {
    fn from_args() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let quick = args.iter().any(|a| a == "--quick");
        let http1 = args.iter().any(|a| a == "--http1");
        let only = args
            .iter()
            .find_map(|a| a.strip_prefix("--only="))
            .map(str::to_owned);
        let requests = args
            .iter()
            .find_map(|a| a.strip_prefix("--requests="))
            .and_then(|n| n.parse().ok());
        let mut settings = if quick {
            Self {
                rounds: 3,
                requests: 300,
                window: Duration::from_millis(1500),
                watch_events: 40,
                fanout_events: 20,
                http1,
                only,
            }
        } else {
            Self {
                rounds: 5,
                requests: 1000,
                window: Duration::from_secs(3),
                watch_events: 100,
                fanout_events: 50,
                http1,
                only,
            }
        };
        settings.requests = requests.unwrap_or(settings.requests);
        settings
    }
}

/// An HTTPS client presenting the admin certificate (`system:masters`) and trusting the cluster CA, with
/// no Nagle delay; HTTP/2 when the server offers it unless `http1`.
fn client(pki: &certs::Pki, http1: bool) -> HttpsClient {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca().cert_der()).expect("cluster CA");
    let admin = pki.admin();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![admin.cert_der()], admin.key_der())
        .expect("client TLS config");
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1();
    let https = if http1 {
        builder.wrap_connector(http)
    } else {
        builder.enable_http2().wrap_connector(http)
    };
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(CONCURRENCY * 2)
        .build(https)
}

async fn send(
    client: &HttpsClient,
    method: Method,
    url: &str,
    body: Option<String>,
) -> http::Response<Incoming> {
    let mut request = Request::builder().method(method).uri(url);
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(Full::new(body.map(Bytes::from).unwrap_or_default()))
        .expect("request");
    client.request(request).await.expect("response")
}

async fn get(client: &HttpsClient, url: &str) -> usize {
    let response = send(client, Method::GET, url, None).await;
    assert!(response.status().is_success(), "{url}: {}", response.status());
    response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .len()
}

async fn create(client: &HttpsClient, url: &str, body: String) {
    let response = send(client, Method::POST, url, Some(body)).await;
    let status = response.status();
    response.into_body().collect().await.expect("body");
    assert!(status.is_success() || status == 409, "create {url}: {status}");
}

/// On-CPU time of every thread of this process and of the nginx processes (`pids`), in nanoseconds
/// by `(pid, thread id)`, from `/proc/<pid>/task/<tid>/schedstat` (the scheduler's own clock; the
/// 10 ms ticks of `/proc/<pid>/stat` are too coarse for a few hundred requests).
struct CpuSnapshot(HashMap<(u32, u32), u64>);

impl CpuSnapshot {
    fn take(pids: &[u32]) -> Self {
        let mut threads = HashMap::new();
        for pid in std::iter::once(std::process::id()).chain(pids.iter().copied()) {
            for task in std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
                    continue;
                };
                let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
                if let Some(ns) = schedstat.split_whitespace().next().and_then(|f| f.parse().ok()) {
                    threads.insert((pid, tid), ns);
                }
            }
        }
        Self(threads)
    }

    /// The CPU time spent since `earlier` by the threads alive now (a thread that exited in between,
    /// such as an idle blocking-pool thread, takes its share with it; those do next to no work here).
    fn since(&self, earlier: &Self) -> Duration {
        let ns = self
            .0
            .iter()
            .map(|(thread, ns)| ns.saturating_sub(earlier.0.get(thread).copied().unwrap_or(0)))
            .sum();
        Duration::from_nanos(ns)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn per(total: Duration, count: usize) -> Duration {
    total / u32::try_from(count.max(1)).unwrap_or(u32::MAX)
}

/// One path's figures in one round.
#[derive(Clone, Copy, Default)]
struct Figures {
    p50: Duration,
    p99: Duration,
    cpu_c1: Duration,
    rps: f64,
    cpu_c32: Duration,
    watch_p50: Duration,
    fanout_p50: Duration,
    fanout_cpu: Duration,
}

async fn latency(client: &HttpsClient, url: &str, requests: usize, pids: &[u32], figures: &mut Figures) {
    for _ in 0..20 {
        get(client, url).await;
    }
    let cpu_before = CpuSnapshot::take(pids);
    let mut samples = Vec::with_capacity(requests);
    for _ in 0..requests {
        let start = Instant::now();
        get(client, url).await;
        samples.push(start.elapsed());
    }
    figures.cpu_c1 = per(CpuSnapshot::take(pids).since(&cpu_before), requests);
    samples.sort();
    figures.p50 = percentile(&samples, 0.50);
    figures.p99 = percentile(&samples, 0.99);
}

async fn throughput(client: &HttpsClient, url: &str, window: Duration, pids: &[u32], figures: &mut Figures) {
    let cpu_before = CpuSnapshot::take(pids);
    let start = Instant::now();
    let deadline = start + window;
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, url) = (client.clone(), url.to_owned());
        workers.push(tokio::spawn(async move {
            let mut done = 0usize;
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
    figures.rps = total as f64 / start.elapsed().as_secs_f64();
    figures.cpu_c32 = per(CpuSnapshot::take(pids).since(&cpu_before), total);
}

fn watch_job(name: &str, tag: &str) -> String {
    format!(
        r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{name}","labels":{{"watch":"{tag}"}}}},"spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"c","image":"busybox"}}]}}}}}}}}"#
    )
}

/// A watch on the Jobs labelled `watch=<tag>` opened through `base`, and the bytes read past the last
/// complete event.
struct Watch {
    stream: BodyStream<Incoming>,
    pending: Vec<u8>,
}

impl Watch {
    async fn open(client: &HttpsClient, base: &str, tag: &str) -> Self {
        let url = format!(
            "{base}/apis/batch/v1/namespaces/{WATCH_NAMESPACE}/jobs?watch=1&labelSelector=watch%3D{tag}"
        );
        let response = send(client, Method::GET, &url, None).await;
        assert!(response.status().is_success(), "watch: {}", response.status());
        Self {
            stream: BodyStream::new(response.into_body()),
            pending: Vec::new(),
        }
    }

    /// Waits for the next event (one JSON line).
    async fn next_event(&mut self) {
        while !self.pending.contains(&b'\n') {
            let frame = self.stream.next().await.expect("event").expect("frame");
            if let Ok(data) = frame.into_data() {
                self.pending.extend_from_slice(&data);
            }
        }
        let end = self.pending.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.pending.drain(..end);
    }
}

/// Delays from creating a Job on `b` until `watchers` watches opened through `base` all have its ADDED
/// event; the p50 delay and the CPU per event.
async fn watch_delay(
    client: &HttpsClient,
    base: &str,
    b: &str,
    tag: &str,
    watchers: usize,
    events: usize,
    pids: &[u32],
) -> (Duration, Duration) {
    // A Job that exists before the watches open: each starts with its synthetic ADDED event, which also
    // makes nginx send the response headers (over HTTP/2 it holds them until the first body bytes).
    let create_url = format!("{b}/apis/batch/v1/namespaces/{WATCH_NAMESPACE}/jobs");
    create(client, &create_url, watch_job(&format!("{tag}-prime"), tag)).await;
    let opening = (0..watchers).map(|_| Watch::open(client, base, tag));
    let mut watches: Vec<Watch> = futures_util::future::join_all(opening).await;
    for watch in &mut watches {
        watch.next_event().await;
    }
    let mut delays = Vec::with_capacity(events);
    let cpu_before = CpuSnapshot::take(pids);
    for i in 0..events {
        let start = Instant::now();
        create(client, &create_url, watch_job(&format!("{tag}-{i}"), tag)).await;
        futures_util::future::join_all(watches.iter_mut().map(Watch::next_event)).await;
        delays.push(start.elapsed());
    }
    let cpu = per(CpuSnapshot::take(pids).since(&cpu_before), events);
    delays.sort();
    (percentile(&delays, 0.5), cpu)
}

fn median<T: Copy + PartialOrd>(values: impl Iterator<Item = T>) -> T {
    let mut values: Vec<T> = values.collect();
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values[values.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

fn added(path: Duration, direct: Duration) -> String {
    let delta = path.as_secs_f64() - direct.as_secs_f64();
    format!("{:+.0}", delta * 1e6)
}

fn main() {
    let settings = Settings::from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(settings));
}

async fn run(settings: Settings) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = start_cluster(None, Preset::Default.members(), 0)
        .await
        .expect("cluster");
    let client = client(cluster.pki(), settings.http1);
    let (a, b) = (cluster.servers[0].1.url(), cluster.servers[1].1.url());
    // Jobs until the list is about 10 kB, the size the hop was first measured with.
    let mut size = 0;
    let mut count = 0;
    while size < 10_000 {
        let body = format!(
            r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"bench-{count:02}","labels":{{"app":"bench"}}}},
            "spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"main","image":"busybox:1.36","command":["sh","-c","echo hello from the mixed version proxy bench"]}}]}}}}}}}}"#
        );
        create(&client, &format!("{b}{JOBS}"), body).await;
        count += 1;
        size = get(&client, &format!("{b}{JOBS}")).await;
    }
    create(
        &client,
        &format!("{b}/api/v1/namespaces"),
        format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{WATCH_NAMESPACE}"}}}}"#),
    )
    .await;

    let b_addr = cluster.servers[1].1.local_addr();
    let pki_paths = certs::PkiPaths::new(&cluster.dir);
    let upstream = nginx::Upstream {
        address: b_addr.to_string(),
        client_cert: &pki_paths.admin_cert,
        client_key: &pki_paths.admin_key,
        ca: &pki_paths.ca_cert,
    };
    let serving_ca = cluster.pki().authority(certs::Issuer::ClusterCa);
    let nginx = match nginx::start(&upstream, serving_ca, !settings.http1) {
        Ok(nginx) => Some(nginx),
        Err(why) => {
            println!("nginx path skipped: {why}");
            None
        }
    };
    let pids = nginx.as_ref().map(|n| n.pids.clone()).unwrap_or_default();
    let mut paths = vec![("direct", b.clone()), ("hop", a.clone())];
    if let Some(nginx) = &nginx {
        paths.push(("nginx", nginx.url.clone()));
    }
    if let Some(only) = &settings.only {
        paths.retain(|(name, _)| name == only);
    }
    println!(
        "Jobs list: {count} Jobs, {size} bytes; client over {}; {} rounds, each path in turn: {} sequential requests, {:.1} s at \
         concurrency {CONCURRENCY}, {} watch events on 1 watch and {} on {CONCURRENCY}",
        if settings.http1 { "HTTP/1.1" } else { "HTTP/2" },
        settings.rounds,
        settings.requests,
        settings.window.as_secs_f64(),
        settings.watch_events,
        settings.fanout_events,
    );
    // Warm every path: connections (all 32 of them at concurrency 32), TLS sessions, caches.
    for (_, base) in &paths {
        let url = format!("{base}{JOBS}");
        let mut scratch = Figures::default();
        latency(&client, &url, 50, &pids, &mut scratch).await;
        throughput(&client, &url, Duration::from_millis(300), &pids, &mut scratch).await;
    }

    let mut rounds: BTreeMap<&str, Vec<Figures>> = BTreeMap::new();
    for round in 0..settings.rounds {
        for k in 0..paths.len() {
            let (name, base) = &paths[(round + k) % paths.len()];
            let url = format!("{base}{JOBS}");
            let mut figures = Figures::default();
            latency(&client, &url, settings.requests, &pids, &mut figures).await;
            throughput(&client, &url, settings.window, &pids, &mut figures).await;
            let tag = format!("{name}-{round}");
            let (watch_p50, _) = watch_delay(
                &client,
                base,
                &b,
                &format!("{tag}-1"),
                1,
                settings.watch_events,
                &pids,
            )
            .await;
            let (fanout_p50, fanout_cpu) = watch_delay(
                &client,
                base,
                &b,
                &format!("{tag}-{CONCURRENCY}"),
                CONCURRENCY,
                settings.fanout_events,
                &pids,
            )
            .await;
            figures.watch_p50 = watch_p50;
            figures.fanout_p50 = fanout_p50;
            figures.fanout_cpu = fanout_cpu;
            eprintln!(
                "round {round} {name:<8} p50 {} µs, CPU/req {} µs (c=1) {} µs (c={CONCURRENCY}), {:.0} req/s, watch {} µs, \
                 fan-out {} µs",
                us(figures.p50),
                us(figures.cpu_c1),
                us(figures.cpu_c32),
                figures.rps,
                us(figures.watch_p50),
                us(figures.fanout_p50),
            );
            rounds.entry(name).or_default().push(figures);
        }
    }

    if rounds.contains_key("direct") {
        report(&paths, &rounds, settings.rounds);
    }
    drop(nginx);
    cluster.shutdown().await;
}

/// Prints the medians across rounds of every path, and what each adds to the direct path.
fn report(paths: &[(&str, String)], rounds: &BTreeMap<&str, Vec<Figures>>, count: usize) {
    let med = |name: &str| {
        let runs = &rounds[name];
        Figures {
            p50: median(runs.iter().map(|f| f.p50)),
            p99: median(runs.iter().map(|f| f.p99)),
            cpu_c1: median(runs.iter().map(|f| f.cpu_c1)),
            rps: median(runs.iter().map(|f| f.rps)),
            cpu_c32: median(runs.iter().map(|f| f.cpu_c32)),
            watch_p50: median(runs.iter().map(|f| f.watch_p50)),
            fanout_p50: median(runs.iter().map(|f| f.fanout_p50)),
            fanout_cpu: median(runs.iter().map(|f| f.fanout_cpu)),
        }
    };
    let direct = med("direct");
    println!(
        "\nmedians of {} rounds, times in µs (+: added to the direct path)",
        count
    );
    println!(
        "{:<8} | {:>6} {:>6} {:>6} | {:>7} {:>5} | {:>7} {:>5} {:>5} {:>7} {:>5} | {:>6} {:>5} | {:>6} {:>5} {:>7} {:>5}",
        "c=1:",
        "p50",
        "+p50",
        "p99",
        "CPU/req",
        "+CPU",
        "c=32:rps",
        "ratio",
        "",
        "CPU/req",
        "+CPU",
        "watch",
        "+",
        "fanout",
        "+",
        "CPU/ev",
        "+CPU"
    );
    for (name, _) in paths {
        let f = med(name);
        println!(
            "{:<8} | {:>6} {:>6} {:>6} | {:>7} {:>5} | {:>7.0} {:>5.2} {:>5} {:>7} {:>5} | {:>6} {:>5} | {:>6} {:>5} {:>7} {:>5}",
            name,
            us(f.p50),
            added(f.p50, direct.p50),
            us(f.p99),
            us(f.cpu_c1),
            added(f.cpu_c1, direct.cpu_c1),
            f.rps,
            f.rps / direct.rps,
            "",
            us(f.cpu_c32),
            added(f.cpu_c32, direct.cpu_c32),
            us(f.watch_p50),
            added(f.watch_p50, direct.watch_p50),
            us(f.fanout_p50),
            added(f.fanout_p50, direct.fanout_p50),
            us(f.fanout_cpu),
            added(f.fanout_cpu, direct.fanout_cpu),
        );
    }
}
