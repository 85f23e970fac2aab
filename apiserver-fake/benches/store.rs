//! What the etcd backend costs beside the in-memory store, measured in one run on the same machine:
//! create, get and update latency (p50/p99 at concurrency 1) and throughput (concurrency 16), a list of
//! every object, and a watch fan-out (how long until every one of 100 watches has seen 1,000 writes).
//!
//! Run with: `cargo bench -p apiserver-fake --features etcd --bench store` (needs `etcd` on `PATH`; add
//! `-- --quick` for a short run). Without the feature or etcd it measures the in-memory store only and
//! says why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver_fake::store::{MemoryStore, ObjectKey, StorageResource, Store};
use futures_util::StreamExt;
use serde_json::{Value, json};

fn configmaps() -> StorageResource {
    StorageResource::new("", "configmaps")
}

/// A ConfigMap of about 1 kB.
fn object(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"payload": "x".repeat(1000)},
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

struct Figures {
    create: (Duration, Duration),
    get: (Duration, Duration),
    update: (Duration, Duration),
    creates_per_second: f64,
    list: Duration,
    fan_out: Duration,
}

async fn sample<F, Fut>(count: usize, mut op: F) -> (Duration, Duration)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(count);
    for i in 0..count {
        let start = Instant::now();
        op(i).await;
        times.push(start.elapsed());
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

async fn measure(store: Arc<dyn Store>, n: usize, watchers: usize, writes: usize) -> Figures {
    let resource = configmaps();
    let key = |prefix: &str, i: usize| ObjectKey::namespaced("bench", &format!("{prefix}-{i}"));
    let create = sample(n, |i| {
        let store = store.clone();
        let (resource, key) = (resource.clone(), key("seq", i));
        async move {
            store
                .create(&resource, &key, object(&key.name))
                .await
                .expect("create");
        }
    })
    .await;
    let get = sample(n, |i| {
        let store = store.clone();
        let (resource, key) = (resource.clone(), key("seq", i));
        async move {
            store.get(&resource, &key).await.expect("get");
        }
    })
    .await;
    let update = sample(n, |i| {
        let store = store.clone();
        let (resource, key) = (resource.clone(), key("seq", i));
        async move {
            let mut current = store.get(&resource, &key).await.expect("get");
            current["data"]["round"] = json!(i.to_string());
            store
                .update(&resource, &key, current, None)
                .await
                .expect("update");
        }
    })
    .await;

    let start = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..16 {
        let store = store.clone();
        let resource = resource.clone();
        tasks.push(tokio::spawn(async move {
            for i in (worker..n).step_by(16) {
                let key = ObjectKey::namespaced("bench", &format!("par-{i}"));
                store
                    .create(&resource, &key, object(&key.name))
                    .await
                    .expect("create");
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer");
    }
    let creates_per_second = n as f64 / start.elapsed().as_secs_f64();

    let start = Instant::now();
    let (items, _) = store.list(&resource, Some("bench")).await.expect("list");
    let list = start.elapsed();
    assert_eq!(items.len(), 2 * n);

    let from = store.current_revision().await.expect("revision");
    let mut streams = Vec::new();
    for _ in 0..watchers {
        streams.push(
            store
                .watch(&resource, Some("fan"), Some(from))
                .await
                .expect("watch"),
        );
    }
    let start = Instant::now();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|stream| tokio::spawn(async move { stream.take(writes).count().await }))
        .collect();
    for i in 0..writes {
        let key = ObjectKey::namespaced("fan", &format!("w-{i}"));
        store
            .create(&resource, &key, object(&key.name))
            .await
            .expect("create");
    }
    for reader in readers {
        assert_eq!(reader.await.expect("reader"), writes);
    }
    let fan_out = start.elapsed();
    Figures {
        create,
        get,
        update,
        creates_per_second,
        list,
        fan_out,
    }
}

fn print(name: &str, f: &Figures, n: usize, watchers: usize, writes: usize) {
    println!(
        "{name:<8} create p50/p99 {} / {} ms | get {} / {} ms | update {} / {} ms | {:.0} creates/s at c=16 | list of {} in {} ms | {watchers} watches × {writes} writes delivered in {} ms",
        ms(f.create.0),
        ms(f.create.1),
        ms(f.get.0),
        ms(f.get.1),
        ms(f.update.0),
        ms(f.update.1),
        f.creates_per_second,
        2 * n,
        ms(f.list),
        ms(f.fan_out),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (n, watchers, writes) = if quick { (200, 20, 200) } else { (2000, 100, 1000) };
    let memory = measure(Arc::new(MemoryStore::new()), n, watchers, writes).await;
    print("memory", &memory, n, watchers, writes);
    #[cfg(feature = "etcd")]
    {
        use apiserver_fake::cluster::etcd_process::EtcdProcess;
        match EtcdProcess::shared() {
            Ok(etcd) => {
                let config = apiserver_fake::store::EtcdConfig {
                    servers: vec![etcd.client_url().to_owned()],
                    prefix: "/bench/registry".to_owned(),
                };
                let store = apiserver_fake::store::EtcdStore::connect(&config, Duration::from_secs(5))
                    .await
                    .expect("etcd answers");
                let figures = measure(Arc::new(store), n, watchers, writes).await;
                print("etcd", &figures, n, watchers, writes);
            }
            Err(why) => println!("etcd     skipped: {why}"),
        }
    }
    #[cfg(not(feature = "etcd"))]
    println!(
        "etcd     skipped: built without the `etcd` feature (cargo bench -p apiserver-fake --features etcd --bench store)"
    );
}
