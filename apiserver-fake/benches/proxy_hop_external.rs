//! The Mixed Version Proxy hop as users run it, measured from outside: the built binary's demo cluster
//! (`apiserver-fake cluster`: `a` lacks `batch/v1` and serves a Jobs list only by proxying it to `b`),
//! nginx as a TLS→TLS reverse proxy in front of `b` (the reference hop, started by the bench from a
//! config it writes in a temporary directory), and external load generators: `wrk` (HTTP/1.1) and
//! `h2load` (HTTP/2), each with one connection per worker (`-t N -c N`; h2load also `-m 1`, one stream
//! per connection). The same ~10 kB Jobs list is fetched directly from `b`, through `a` and through
//! nginx, in the same run; and, as a reference that is not a hop, `a`'s own `GET /version`: the handler
//! chain the source runs on every request before the filter may forward it (upstream's order), which a
//! plain reverse proxy such as nginx does not run.
//!
//! Per protocol, concurrency and path: the p50 latency the load generator reports, the requests it
//! completed, and the servers' CPU per request: the demo process's (it holds `a` and `b`) plus nginx's
//! master and workers', from `utime + stime` in `/proc/<pid>/stat` before and after, divided by the
//! requests. What the hop (or nginx) adds is each figure minus the direct path's.
//!
//! Neither wrk nor h2load can present a client certificate, so the clients authenticate with the
//! demo's bearer token (`DIR/token`, `system:masters`); nginx forwards the header and presents the admin
//! client certificate (`DIR/admin.crt`) to `b` itself.
//!
//! The paths are measured interleaved (every round runs each path in turn, the order rotating) and the
//! figures are medians across rounds, so a neighbour's build slowing the machine hits every path alike.
//!
//! With `-- --processes` (and `--features etcd`) the cluster is the same two servers each in its own
//! process on a private etcd (`cluster --etcd`), as kube-apiserver runs, one per machine: the figures
//! are then `a`'s and `b`'s processes' CPU (plus nginx's), not etcd's, which every path pays alike (each
//! request is one etcd read at `b`).
//!
//! Run with: `cargo bench -p apiserver-fake --bench proxy_hop_external` (`-- --quick`: one round of
//! one second per case). A missing tool skips its rows with a message (Debian: `apt-get install -y wrk
//! nghttp2-client nginx`).

mod nginx;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "../tests/support/mod.rs"]
mod support;

use support::demo::{Demo, admin, server};

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

/// The reference path that is not a hop: `GET /version` answered by `a` itself.
const SOURCE_CHAIN: &str = "a: /version";

/// The bench's knobs.
struct Settings {
    rounds: usize,
    seconds: u64,
    concurrencies: Vec<usize>,
    /// Each server its own process on etcd, instead of the demo's one process.
    processes: bool,
}

impl Settings {
    fn from_args() -> Self {
        let quick = std::env::args().any(|a| a == "--quick");
        Self {
            rounds: if quick { 1 } else { 3 },
            seconds: if quick { 1 } else { 3 },
            concurrencies: vec![1, 4],
            processes: std::env::args().any(|a| a == "--processes"),
        }
    }
}

/// Which external client speaks which protocol.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tool {
    Wrk,
    H2load,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Wrk => "wrk",
            Tool::H2load => "h2load",
        }
    }

    fn protocol(self) -> &'static str {
        match self {
            Tool::Wrk => "HTTP/1.1",
            Tool::H2load => "HTTP/2",
        }
    }
}

/// What one run of a load generator against one path showed.
#[derive(Clone, Copy, Default)]
struct Run {
    p50: Duration,
    requests: u64,
    rps: f64,
    cpu_per_request: Duration,
}

/// The kernel's clock ticks per second, the unit of `/proc/<pid>/stat`'s CPU times.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// `utime + stime` of every process in `pids`, in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`).
fn cpu_ticks(pids: &[u32]) -> u64 {
    pids.iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // After the ")" that ends the command name: field 3 (state) is the first.
            let fields: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
            field(14) + field(15)
        })
        .sum()
}

/// A wrk or h2load latency such as `312.45us`, `1.20ms` or `2.00s`.
fn parse_latency(text: &str) -> Option<Duration> {
    let (number, unit) = text
        .find(|c: char| c.is_ascii_alphabetic())
        .map(|i| text.split_at(i))?;
    let value: f64 = number.parse().ok()?;
    let seconds = match unit {
        "us" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        _ => return None,
    };
    Some(Duration::from_secs_f64(seconds))
}

/// Runs `command`, returning its standard output; panics with its standard error when it fails (the
/// figures would mean nothing).
fn output(command: &mut Command) -> String {
    let out = command.output().expect("the load generator runs");
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// wrk with `concurrency` threads of one connection each; `(p50, requests)` from its `--latency` report.
fn run_wrk(url: &str, token: &str, concurrency: usize, seconds: u64) -> (Duration, u64) {
    let text = output(
        Command::new("wrk")
            .arg(format!("-t{concurrency}"))
            .arg(format!("-c{concurrency}"))
            .arg(format!("-d{seconds}s"))
            .arg("--latency")
            .arg("-H")
            .arg(format!("Authorization: Bearer {token}"))
            .arg(url),
    );
    assert!(
        !text.contains("Non-2xx"),
        "wrk saw failed requests at {url}:\n{text}"
    );
    let p50 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("50%"))
        .and_then(|v| parse_latency(v.trim()))
        .unwrap_or_else(|| panic!("no p50 in wrk's report:\n{text}"));
    let requests = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's report:\n{text}"));
    (p50, requests)
}

/// h2load with `concurrency` threads, clients and connections, one stream each; `(p50, requests)`
/// from its per-request log (its report has no percentiles).
fn run_h2load(url: &str, token: &str, concurrency: usize, seconds: u64, log: &Path) -> (Duration, u64) {
    // h2load appends to its log.
    let _ = std::fs::remove_file(log);
    let text = output(
        Command::new("h2load")
            .arg(format!("-t{concurrency}"))
            .arg(format!("-c{concurrency}"))
            .arg("-m1")
            .arg(format!("-D{seconds}"))
            .arg("-H")
            .arg(format!("authorization: Bearer {token}"))
            .arg(format!("--log-file={}", log.display()))
            .arg(url),
    );
    // `status codes: N 2xx, ...`: every request must have succeeded.
    let failed = text
        .lines()
        .find(|l| l.starts_with("requests:"))
        .is_none_or(|l| !l.contains(" 0 failed, 0 errored"));
    assert!(!failed, "h2load saw failed requests at {url}:\n{text}");
    // Columns: start (µs since the epoch), status, µs until the end of the response.
    let log_text = std::fs::read_to_string(log).expect("h2load's log");
    let mut latencies: Vec<u64> = log_text
        .lines()
        .filter_map(|l| l.split('\t').nth(2)?.trim().parse().ok())
        .collect();
    assert!(!latencies.is_empty(), "h2load logged no request:\n{text}");
    latencies.sort_unstable();
    let p50 = Duration::from_micros(latencies[latencies.len() / 2]);
    (p50, latencies.len() as u64)
}

/// Creates Jobs on `b` until their list is about 10 kB (the size the in-process bench measures).
async fn fill(b: &support::TestClient) -> (usize, usize) {
    let (mut count, mut size) = (0, 0);
    while size < 10_000 {
        let body = format!(
            r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"bench-{count:02}","labels":{{"app":"bench"}}}},
            "spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"main","image":"busybox:1.36","command":["sh","-c","echo hello from the mixed version proxy bench"]}}]}}}}}}}}"#
        );
        let reply = b.post(JOBS, &body).await;
        assert!(reply.status.is_success(), "create a Job: {}", reply.status);
        count += 1;
        size = b.get(JOBS).await.body.len();
    }
    (count, size)
}

/// One run of `tool` against `url`, with the CPU of `pids` over it.
fn measure(
    tool: Tool,
    url: &str,
    token: &str,
    concurrency: usize,
    seconds: u64,
    pids: &[u32],
    scratch: &Path,
) -> Run {
    let ticks_before = cpu_ticks(pids);
    let started = Instant::now();
    let (p50, requests) = match tool {
        Tool::Wrk => run_wrk(url, token, concurrency, seconds),
        Tool::H2load => run_h2load(url, token, concurrency, seconds, &scratch.join("h2load.log")),
    };
    let elapsed = started.elapsed();
    let ticks = cpu_ticks(pids).saturating_sub(ticks_before);
    let cpu = Duration::from_secs_f64(ticks as f64 / clock_ticks());
    Run {
        p50,
        requests,
        rps: requests as f64 / elapsed.as_secs_f64(),
        cpu_per_request: cpu / u32::try_from(requests.max(1)).unwrap_or(u32::MAX),
    }
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The tools found on the PATH, saying which are missing and why their rows are skipped.
fn tools() -> Vec<Tool> {
    let mut found = Vec::new();
    for (tool, package) in [(Tool::Wrk, "wrk"), (Tool::H2load, "nghttp2-client")] {
        if nginx::on_path(tool.name()).is_some() {
            found.push(tool);
        } else {
            println!(
                "{} rows skipped: `{}` is not on the PATH (apt-get install -y {package})",
                tool.protocol(),
                tool.name()
            );
        }
    }
    found
}

fn main() {
    let settings = Settings::from_args();
    let tools = tools();
    if tools.is_empty() {
        println!("skipped: neither wrk nor h2load is installed");
        return;
    }
    if settings.processes && !cfg!(feature = "etcd") {
        println!(
            "skipped: --processes needs the etcd feature (cargo bench -p apiserver-fake --features etcd ...)"
        );
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("demo");
    let mut args = vec!["--lb", "none", "--no-controller-manager"];
    if settings.processes {
        args.push("--etcd");
    }
    let mut demo = Demo::start(&dir, &args);
    let manifest = demo.wait_for_manifest(&dir);
    let pid = |value: &serde_json::Value| {
        u32::try_from(value["pid"].as_u64().expect("cluster.json has the pid")).expect("pid")
    };
    let (a, b) = (server(&manifest, "a"), server(&manifest, "b"));
    // The processes whose CPU the servers cost: the demo's one, or each server's own.
    let mut pids = if settings.processes {
        vec![pid(a), pid(b)]
    } else {
        vec![pid(&manifest)]
    };
    let (count, size) = runtime.block_on(async {
        let filled = fill(&admin(&dir, b)).await;
        support::wait_for_proxy(&admin(&dir, a)).await;
        filled
    });
    let token = std::fs::read_to_string(dir.join("token")).expect("the demo's token");
    let token = token.trim();
    let b_url = b["url"].as_str().expect("url").to_owned();
    let upstream = nginx::Upstream {
        address: b_url.trim_start_matches("https://").to_owned(),
        client_cert: &dir.join("admin.crt"),
        client_key: &dir.join("admin.key"),
        ca: &dir.join("ca.crt"),
    };
    // The load generators do not verify servers: any CA will do for nginx's serving certificate.
    let serving_ca = certs::CertificateAuthority::new_self_signed("nginx-bench-ca").expect("a CA");
    let nginx = match nginx::start(&upstream, &serving_ca, true) {
        Ok(nginx) => Some(nginx),
        Err(why) => {
            println!("nginx path skipped: {why}");
            None
        }
    };
    let a_url = a["url"].as_str().expect("url").to_owned();
    let mut paths = vec![
        ("direct", format!("{b_url}{JOBS}")),
        ("hop", format!("{a_url}{JOBS}")),
    ];
    if let Some(nginx) = &nginx {
        paths.push(("nginx", format!("{}{JOBS}", nginx.url)));
        pids.extend(&nginx.pids);
    }
    // What `a` spends on a request before the filter can forward it: upstream runs the whole default
    // chain (authentication, audit, priority and fairness, authorization) on the source first, and
    // nginx runs none of it. `/version` is that chain around a handler that does next to nothing.
    paths.push((SOURCE_CHAIN, format!("{a_url}/version")));
    println!(
        "Jobs list: {count} Jobs, {size} bytes; {} rounds of {} s per case, paths interleaved; CPU: {}{}",
        settings.rounds,
        settings.seconds,
        if settings.processes {
            "a's and b's processes (etcd's not counted)"
        } else {
            "the demo process (a and b)"
        },
        if nginx.is_some() { " + nginx" } else { "" }
    );
    // Warm every path once (caches, the hop's peer connection, nginx's upstream connections).
    for (_, url) in &paths {
        for &tool in &tools {
            measure(tool, url, token, 1, 1, &pids, scratch.path());
        }
    }
    let mut runs: BTreeMap<(Tool, usize, &str), Vec<Run>> = BTreeMap::new();
    for round in 0..settings.rounds {
        for &tool in &tools {
            for &concurrency in &settings.concurrencies {
                for k in 0..paths.len() {
                    let (name, url) = &paths[(round + k) % paths.len()];
                    let run = measure(
                        tool,
                        url,
                        token,
                        concurrency,
                        settings.seconds,
                        &pids,
                        scratch.path(),
                    );
                    eprintln!(
                        "round {round} {:<6} c={concurrency} {name:<6} p50 {:.0} µs, {:.0} µs CPU/req, {} requests, {:.0} req/s",
                        tool.name(),
                        run.p50.as_secs_f64() * 1e6,
                        run.cpu_per_request.as_secs_f64() * 1e6,
                        run.requests,
                        run.rps
                    );
                    runs.entry((tool, concurrency, name)).or_default().push(run);
                }
            }
        }
    }
    report(&tools, &settings, &paths, &runs);
    drop(nginx);
    drop(demo);
}

/// Prints the medians across rounds, and what the hop and nginx add to the direct path, as a table.
fn report(
    tools: &[Tool],
    settings: &Settings,
    paths: &[(&str, String)],
    runs: &BTreeMap<(Tool, usize, &str), Vec<Run>>,
) {
    println!("\n| client (protocol) | connections | path | p50 | +p50 | server CPU/req | +CPU/req | req/s |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    for &tool in tools {
        for &concurrency in &settings.concurrencies {
            let med = |name: &str| {
                let runs = &runs[&(tool, concurrency, name)];
                (
                    median(runs.iter().map(|r| r.p50.as_secs_f64() * 1e6)),
                    median(runs.iter().map(|r| r.cpu_per_request.as_secs_f64() * 1e6)),
                    median(runs.iter().map(|r| r.rps)),
                )
            };
            let direct = med("direct");
            for (name, _) in paths {
                let (p50, cpu, rps) = med(name);
                // The reference answers another request: nothing to add to or subtract from.
                let (added_p50, added_cpu) = if *name == "direct" || *name == SOURCE_CHAIN {
                    ("".to_owned(), "".to_owned())
                } else {
                    (
                        format!("{:+.0}", p50 - direct.0),
                        format!("{:+.0}", cpu - direct.1),
                    )
                };
                println!(
                    "| {} ({}) | {concurrency} | {name} | {p50:.0} µs | {added_p50} | {cpu:.0} µs | {added_cpu} | {rps:.0} |",
                    tool.name(),
                    tool.protocol(),
                );
            }
        }
    }
    println!(
        "\n`{SOURCE_CHAIN}`: what `a` spends on a request it answers itself: its TLS, HTTP and socket work (which \
         nginx pays too) and the chain upstream runs before the filter may forward (authentication, audit, \
         priority and fairness, authorization; nginx runs none of it), around a near-empty handler."
    );
}
