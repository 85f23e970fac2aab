//! What a page costs: on the demo cluster (in this process, in-memory store), 10,000 Jobs, then, against
//! the server that stores them (no proxy hop), the latency of a `limit=1` list (first page and a page
//! continued from the middle), a `limit=500` page and a full list, beside a GET of one Job, each p50/p99 over sequential
//! requests; and 150 concurrent `limit=1` lists by one ordinary user with `/readyz` polled meanwhile.
//!
//! Run with: `cargo bench -p apiserver-fake --bench pages` (`-- --quick` for 1,000 Jobs).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver_fake::cluster::AdminClient;
use http::Method;
use support::{send, send_as};

fn job(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{name}","labels":{{"app":"bench"}}}},"spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"c","image":"busybox"}}]}}}}}}}}"#
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len().saturating_sub(1))]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// p50 and p99 of `count` sequential GETs of `url`, each checked to be a 200.
async fn sample(client: &AdminClient, url: &str, count: usize) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(count);
    let mut bytes = 0;
    for _ in 0..count {
        let start = Instant::now();
        let (status, body) = send(client, Method::GET, url, None).await;
        times.push(start.elapsed());
        assert_eq!(status, 200, "{url}: {}", String::from_utf8_lossy(&body));
        bytes = body.len();
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99), bytes)
}

fn main() {
    let jobs = if support::quick() { 1_000 } else { 10_000 };
    support::runtime().block_on(async move {
        let (cluster, client) = support::demo_cluster().await;
        let b = cluster.servers[1].1.url();
        let list = format!("{b}/apis/batch/v1/namespaces/default/jobs");
        let gate = Arc::new(tokio::sync::Semaphore::new(64));
        let mut creating = tokio::task::JoinSet::new();
        for i in 0..jobs {
            let (client, gate, list) = (client.clone(), gate.clone(), list.clone());
            creating.spawn(async move {
                let _permit = gate.acquire().await.expect("open");
                let (status, body) = send_as(&client, None, Method::POST, &list, Some(job(&format!("job-{i:05}")))).await;
                assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
            });
        }
        while let Some(done) = creating.join_next().await {
            done.expect("create");
        }
        println!("pages: {jobs} Jobs, on the server that stores them, sequential requests");

        let (p50, p99, _) = sample(&client, &format!("{list}/job-00000"), 200).await;
        println!("GET of one Job (baseline): p50 {} ms, p99 {} ms", ms(p50), ms(p99));
        let (p50, p99, size) = sample(&client, &format!("{list}?limit=1"), 200).await;
        println!("limit=1, first page:      p50 {} ms, p99 {} ms ({size} B)", ms(p50), ms(p99));
        let (_, middle) = send(&client, Method::GET, &format!("{list}?limit={}", jobs / 2), None).await;
        let middle: serde_json::Value = serde_json::from_slice(&middle).expect("json");
        let token = middle["metadata"]["continue"].as_str().expect("a token").to_owned();
        let (p50, p99, _) = sample(&client, &format!("{list}?limit=1&continue={token}"), 200).await;
        println!("limit=1, continued:       p50 {} ms, p99 {} ms", ms(p50), ms(p99));
        let (p50, p99, size) = sample(&client, &format!("{list}?limit=500"), 50).await;
        println!("limit=500:                p50 {} ms, p99 {} ms ({size} B)", ms(p50), ms(p99));
        let (p50, p99, size) = sample(&client, &list, 10).await;
        println!("full list:                p50 {} ms, p99 {} ms ({size} B)", ms(p50), ms(p99));

        // 150 concurrent limit=1 lists by one ordinary user, /readyz polled until they are done.
        let started = Instant::now();
        let mut load = tokio::task::JoinSet::new();
        for _ in 0..150 {
            let (client, url) = (client.clone(), format!("{list}?limit=1"));
            load.spawn(async move { send_as(&client, Some("jane"), Method::GET, &url, None).await.0 });
        }
        let mut readyz = Duration::ZERO;
        let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
        while !load.is_empty() {
            let start = Instant::now();
            let (status, _) = send_as(&client, Some("jane"), Method::GET, &format!("{b}/readyz"), None).await;
            readyz = readyz.max(start.elapsed());
            assert_eq!(status, 200);
            while let Some(done) = load.try_join_next() {
                *statuses.entry(done.expect("list")).or_default() += 1;
            }
            tokio::task::yield_now().await;
        }
        println!(
            "150 concurrent limit=1 lists by one user: all answered in {} ms ({statuses:?}), slowest /readyz meanwhile {} ms",
            ms(started.elapsed()),
            ms(readyz)
        );
    });
}
