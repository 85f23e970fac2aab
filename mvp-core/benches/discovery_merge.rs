//! What peer-aggregated discovery costs: merging this server's `/apis` groups with those of 100 peers
//! serving 60 groups each (`merge_peer_discovery`, what a server recomputes on a cache miss).
//!
//! Run with: `cargo bench -p mvp-core --bench discovery_merge` (optimized), or
//! `cargo bench -p mvp-core --bench discovery_merge --profile dev` to reuse the debug build.
//! Add `-- --quick` for fewer iterations.
//!
//! Three inputs:
//! - `divergent`: every peer serves a shifted window of 60 out of 80 groups, in its own order, with one
//!   extra version on even peers and verbs/subresources that differ per peer, so every merge step runs
//!   (unions, capability merges, the topological sort);
//! - `identical`: every peer serves exactly the local groups (the short-circuit path);
//! - `realistic`: a control plane of three servers in a version skew: 25 groups each, the peers'
//!   windows shifted by one and two groups, verbs and subresources differing as in `divergent`.
//!
//! Reports the mean and minimum time per merge and the memory: the peak resident-set growth during
//! one merge (Linux `VmHWM` after resetting it through `/proc/self/clear_refs`; page-granular and
//! approximate) and the size of the inputs and the result as compact JSON.

use std::hint::black_box;
use std::time::{Duration, Instant};

use mvp_core::apidiscovery::APIGroupDiscovery;
use mvp_core::merge_peer_discovery;
use serde_json::{Value, json};

const PEERS: usize = 100;
const GROUPS_PER_SERVER: usize = 60;
const DISTINCT_GROUPS: usize = 80;
const RESOURCES_PER_VERSION: usize = 5;

fn resource(name: &str, peer: usize) -> Value {
    let mut verbs = vec!["get", "list", "watch"];
    if peer.is_multiple_of(3) {
        verbs.push("create");
    }
    if peer.is_multiple_of(5) {
        verbs.push("delete");
    }
    let mut subresources = vec![json!({"subresource": "status",
        "responseKind": {"group": "", "version": "", "kind": "Thing"}, "verbs": ["get", "patch", "update"]})];
    if peer.is_multiple_of(4) {
        subresources.push(json!({"subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get"]}));
    }
    json!({
        "resource": name,
        "responseKind": {"group": "", "version": "", "kind": "Thing"},
        "scope": "Namespaced",
        "singularResource": name.trim_end_matches('s'),
        "verbs": verbs,
        "shortNames": [format!("{}x", &name[..1])],
        "categories": ["all"],
        "subresources": subresources,
    })
}

fn group(index: usize, peer: usize) -> APIGroupDiscovery {
    let mut versions = vec!["v1"];
    if peer.is_multiple_of(2) {
        versions.insert(0, "v2");
    }
    let versions: Vec<Value> = versions
        .into_iter()
        .map(|v| {
            let resources: Vec<Value> = (0..RESOURCES_PER_VERSION)
                .map(|r| resource(&format!("things{r}s"), peer))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let group = json!({"metadata": {"name": format!("group{index:02}.example.com")}, "versions": versions});
    serde_json::from_value(group).expect("an APIGroupDiscovery")
}

type Input = (Vec<APIGroupDiscovery>, Vec<(String, Vec<APIGroupDiscovery>)>);

/// Local: groups 0..60 in order. Peer p: a window of 60 groups starting at p mod 20, rotated by p.
fn divergent() -> Input {
    let local = (0..GROUPS_PER_SERVER).map(|g| group(g, 1)).collect();
    let peers = (0..PEERS)
        .map(|p| {
            let start = p % (DISTINCT_GROUPS - GROUPS_PER_SERVER);
            let mut groups: Vec<APIGroupDiscovery> =
                (start..start + GROUPS_PER_SERVER).map(|g| group(g, p)).collect();
            if p.is_multiple_of(7) {
                groups.rotate_left(p % GROUPS_PER_SERVER);
            }
            (format!("peer-{p:03}"), groups)
        })
        .collect();
    (local, peers)
}

fn identical() -> Input {
    let local: Vec<APIGroupDiscovery> = (0..GROUPS_PER_SERVER).map(|g| group(g, 1)).collect();
    let peers = (0..PEERS)
        .map(|p| (format!("peer-{p:03}"), local.clone()))
        .collect();
    (local, peers)
}

/// Three servers, 25 groups each: this one groups 0..25, peer p groups p+1..p+26.
fn realistic() -> Input {
    const GROUPS: usize = 25;
    let local = (0..GROUPS).map(|g| group(g, 1)).collect();
    let peers = (0..2)
        .map(|p| {
            let groups = (p + 1..p + 1 + GROUPS).map(|g| group(g, p + 2)).collect();
            (format!("peer-{p}"), groups)
        })
        .collect();
    (local, peers)
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Peak RSS growth (KiB) while `f` runs, if the kernel lets us reset the high-water mark.
fn peak_rss_growth<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kib("VmRSS:");
    let out = f();
    let peak = status_kib("VmHWM:");
    let growth = match (reset, before, peak) {
        (true, Some(before), Some(peak)) => Some(peak.saturating_sub(before)),
        _ => None,
    };
    (out, growth)
}

fn json_kib(value: &impl serde::Serialize) -> f64 {
    serde_json::to_vec(value).map_or(0.0, |v| v.len() as f64 / 1024.0)
}

fn run(name: &str, input: Input, iterations: u32) {
    let (local, peers) = input;
    let (merged, growth) = peak_rss_growth(|| merge_peer_discovery("server-a", &local, &peers));
    let mut times = Vec::with_capacity(iterations as usize);
    for _ in 0..iterations {
        let start = Instant::now();
        black_box(merge_peer_discovery(
            black_box("server-a"),
            black_box(&local),
            black_box(&peers),
        ));
        times.push(start.elapsed());
    }
    let mean = times.iter().sum::<Duration>() / iterations.max(1);
    let min = times.iter().min().copied().unwrap_or_default();
    let input_kib = json_kib(&local) + peers.iter().map(|(_, g)| json_kib(g)).sum::<f64>();
    println!(
        "{name:<10} {} peers x {} groups: mean {mean:>10.3?}  min {min:>10.3?}  \
         ({iterations} runs); result {} groups, {:.0} KiB JSON; input {:.0} KiB JSON; peak RSS growth {}",
        peers.len(),
        local.len(),
        merged.len(),
        json_kib(&merged),
        input_kib,
        growth.map_or_else(|| "n/a".to_owned(), |kib| format!("{kib} KiB")),
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iterations = if quick { 3 } else { 20 };
    println!(
        "profile: {}",
        if cfg!(debug_assertions) {
            "debug (unoptimized)"
        } else {
            "optimized"
        }
    );
    run("divergent", divergent(), iterations);
    run("identical", identical(), iterations);
    run("realistic", realistic(), iterations * 50);
}
