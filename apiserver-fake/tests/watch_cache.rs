//! The watch cache in front of etcd (docs/decisions.md §21), seen from outside: server processes of
//! the built binary on a private etcd of the test's own.
//!
//! * Many client watches share one etcd watch and each sees every write once, in order.
//! * `kill -9` of etcd and a restart under a write loop: no acknowledged write is missing from any
//!   watch or from a consistent list.
//! * `--watch-cache=false` and `--watch-cache-sizes=<resource>#0` give every client watch its own
//!   etcd watch again; a bad `--watch-cache-sizes` is a one-line error.
//!
//! Needs the `etcd` feature and `etcd` on `PATH`; otherwise it says it is skipped (and fails when
//! `KUBE_MVP_REQUIRE_ETCD=1`, as CI sets it).

mod support;

use std::process::Command;

#[test]
fn bad_watch_cache_sizes_are_one_line_errors() {
    for (value, message) in [
        ("configmaps", "invalid value of watch cache size: configmaps"),
        (
            "configmaps#many",
            "invalid size of watch cache size: configmaps#many",
        ),
        (
            "configmaps#-1",
            "watch cache size cannot be negative: configmaps#-1",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .args([
                "--tls-cert-file=/nonexistent.crt",
                "--tls-private-key-file=/nonexistent.key",
                &format!("--watch-cache-sizes=pods#100,{value}"),
            ])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        assert!(!output.status.success(), "{value}");
        assert_eq!(stderr.lines().count(), 1, "{value}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(message),
            "{value}: {stderr}"
        );
    }
}

#[cfg(not(feature = "etcd"))]
#[test]
fn watch_cache_is_skipped_without_the_feature() {
    support::etcd::skip("apiserver-fake was built without the `etcd` feature");
}

#[cfg(feature = "etcd")]
mod with_etcd {
    use std::collections::BTreeSet;
    use std::net::Ipv4Addr;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use apiserver_fake::cluster::etcd_process::EtcdProcess;
    use apiserver_fake::cluster::process::{EtcdBackend, ProcessCluster};
    use http::{Method, StatusCode};
    use http_body_util::BodyExt;
    use serde_json::{Value, json};

    use crate::support::{TestClient, eventually};

    const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

    /// A private etcd the test may kill, its data in `dir/etcd`.
    fn etcd(dir: &Path, port: u16) -> Option<EtcdProcess> {
        if !apiserver_fake::cluster::etcd_process::etcd_installed() {
            crate::support::etcd::skip("no etcd binary on PATH (Debian: apt-get install -y etcd-server)");
            return None;
        }
        Some(
            EtcdProcess::start(&dir.join("etcd"), Ipv4Addr::LOCALHOST, port, None, false)
                .expect("etcd starts"),
        )
    }

    /// A server on `etcd` with the watch cache on (the default, docs/decisions.md §21) unless `flags`
    /// say otherwise.
    async fn server(dir: &Path, etcd: &EtcdProcess, flags: &[&str]) -> (ProcessCluster, Arc<TestClient>) {
        let etcd = EtcdBackend::Existing(vec![etcd.client_url().to_owned()]);
        crate::support::etcd::one_server_process(dir, flags, etcd).await
    }

    fn revision(object: &Value) -> u64 {
        object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .expect("resourceVersion")
    }

    async fn list_revision(client: &TestClient) -> u64 {
        let list = client.get(CONFIGMAPS).await;
        assert_eq!(list.status, StatusCode::OK, "{}", list.text());
        revision(&list.json())
    }

    /// Waits until the server has noticed that etcd is gone: its /readyz fails on the etcd check.
    async fn etcd_seen_down(client: &TestClient) {
        eventually("the server to see etcd down", Duration::from_secs(10), || async {
            let ready = client.try_send(Method::GET, "/readyz", &[], None).await;
            ready.is_ok_and(|r| r.status != StatusCode::OK).then_some(())
        })
        .await;
    }

    /// What one client watch saw: names in the order of their ADDED events.
    #[derive(Default)]
    struct Seen {
        added: Vec<String>,
        revisions: Vec<u64>,
    }

    /// Watches ConfigMaps from `from` as a client does: when the watch ends it watches again from the
    /// last revision it saw. An ERROR event fails the test.
    fn watcher(client: Arc<TestClient>, from: u64, stop: Arc<AtomicBool>) -> Arc<Mutex<Seen>> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let out = seen.clone();
        tokio::spawn(async move {
            let mut last = from;
            while !stop.load(Ordering::Relaxed) {
                let path = format!("{CONFIGMAPS}?watch=true&resourceVersion={last}");
                let Ok(response) =
                    tokio::time::timeout(Duration::from_secs(5), client.open(Method::GET, &path, &[], None))
                        .await
                else {
                    continue;
                };
                if response.status() != StatusCode::OK {
                    // Poll interval: the server could not start the watch (etcd down); try again.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                let mut body = response.into_body();
                let mut buffer = Vec::new();
                while let Ok(Some(Ok(frame))) =
                    tokio::time::timeout(Duration::from_secs(5), body.frame()).await
                {
                    let Ok(data) = frame.into_data() else { continue };
                    buffer.extend_from_slice(&data);
                    while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buffer.drain(..=end).collect();
                        let event: Value = serde_json::from_slice(&line).expect("a JSON watch event");
                        assert_ne!(event["type"], "ERROR", "{event}");
                        let rv = revision(&event["object"]);
                        let mut seen = out.lock().expect("seen");
                        if event["type"] == "ADDED" {
                            seen.added.push(
                                event["object"]["metadata"]["name"]
                                    .as_str()
                                    .expect("name")
                                    .to_owned(),
                            );
                        }
                        seen.revisions.push(rv);
                        last = rv;
                    }
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                }
            }
        });
        seen
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_watches_see_every_write_once_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some(etcd) = etcd(dir.path(), 0) else { return };
        let (_cluster, client) = server(dir.path(), &etcd, &[]).await;
        let from = list_revision(&client).await;
        let stop = Arc::new(AtomicBool::new(false));
        let watchers: Vec<_> = (0..50)
            .map(|_| watcher(client.clone(), from, stop.clone()))
            .collect();
        const WRITES: usize = 300;
        let mut writers = Vec::new();
        for w in 0..4 {
            let client = client.clone();
            writers.push(tokio::spawn(async move {
                for i in (w..WRITES).step_by(4) {
                    let body = json!({"metadata": {"name": format!("cm-{i:03}")}});
                    let reply = client.post(CONFIGMAPS, &body.to_string()).await;
                    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
                }
            }));
        }
        for writer in writers {
            writer.await.expect("writer");
        }
        let expected: BTreeSet<String> = (0..WRITES).map(|i| format!("cm-{i:03}")).collect();
        for (i, seen) in watchers.iter().enumerate() {
            eventually(
                &format!("watch {i} sees every write"),
                Duration::from_secs(30),
                || async { (seen.lock().expect("seen").added.len() >= WRITES).then_some(()) },
            )
            .await;
            let seen = seen.lock().expect("seen");
            let names: BTreeSet<String> = seen.added.iter().cloned().collect();
            assert_eq!(seen.added.len(), WRITES, "watch {i}: each write once");
            assert_eq!(names, expected, "watch {i}");
            assert!(
                seen.revisions.windows(2).all(|w| w[0] < w[1]),
                "watch {i}: in revision order"
            );
        }
        stop.store(true, Ordering::Relaxed);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_acknowledged_write_is_missing_after_etcd_is_killed_and_restarted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some(etcd) = etcd(dir.path(), 0) else { return };
        let port: u16 = etcd
            .client_url()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        let (_cluster, client) = server(dir.path(), &etcd, &[]).await;
        let from = list_revision(&client).await;
        let stop = Arc::new(AtomicBool::new(false));
        let watchers: Vec<_> = (0..5)
            .map(|_| watcher(client.clone(), from, stop.clone()))
            .collect();

        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let writing = Arc::new(AtomicBool::new(true));
        let writer = {
            let (client, acknowledged, writing) = (client.clone(), acknowledged.clone(), writing.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while writing.load(Ordering::Relaxed) {
                    let name = format!("w-{i:05}");
                    i += 1;
                    let body = json!({"metadata": {"name": name}}).to_string();
                    if let Ok(reply) = client.try_send(Method::POST, CONFIGMAPS, &[], Some(&body)).await
                        && reply.status == StatusCode::CREATED
                    {
                        acknowledged.lock().expect("acknowledged").push(name);
                    }
                    // Pacing of the write loop.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        // Let writes land, kill etcd (SIGKILL), keep it down a while, start it again on its data.
        eventually("writes are acknowledged", Duration::from_secs(30), || async {
            (acknowledged.lock().expect("acknowledged").len() > 20).then_some(())
        })
        .await;
        drop(etcd);
        // Down until the server has noticed.
        etcd_seen_down(&client).await;
        let etcd = tokio::task::spawn_blocking({
            let dir = dir.path().to_owned();
            move || EtcdProcess::start(&dir.join("etcd"), Ipv4Addr::LOCALHOST, port, None, false)
        })
        .await
        .expect("join")
        .expect("etcd restarts");
        let after_restart = acknowledged.lock().expect("acknowledged").len();
        eventually(
            "writes are acknowledged again",
            Duration::from_secs(30),
            || async {
                (acknowledged.lock().expect("acknowledged").len() > after_restart + 50).then_some(())
            },
        )
        .await;
        writing.store(false, Ordering::Relaxed);
        writer.await.expect("writer");
        let acknowledged: Vec<String> = acknowledged.lock().expect("acknowledged").clone();

        for (i, seen) in watchers.iter().enumerate() {
            let missing = eventually(
                &format!("watch {i} sees every acknowledged write"),
                Duration::from_secs(30),
                || async {
                    let seen = seen.lock().expect("seen");
                    let names: BTreeSet<&String> = seen.added.iter().collect();
                    let missing: Vec<&String> = acknowledged.iter().filter(|n| !names.contains(n)).collect();
                    missing.is_empty().then_some(missing.len())
                },
            )
            .await;
            assert_eq!(missing, 0);
            let seen = seen.lock().expect("seen");
            assert!(
                seen.revisions.windows(2).all(|w| w[0] < w[1]),
                "watch {i}: in revision order"
            );
        }
        let list = client.get(CONFIGMAPS).await;
        assert_eq!(list.status, StatusCode::OK, "{}", list.text());
        let listed: BTreeSet<String> = list.json()["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| item["metadata"]["name"].as_str().expect("name").to_owned())
            .collect();
        let missing: Vec<&String> = acknowledged.iter().filter(|n| !listed.contains(*n)).collect();
        assert!(missing.is_empty(), "missing from a consistent list: {missing:?}");
        stop.store(true, Ordering::Relaxed);
        drop(etcd);
    }

    /// The first `n` events of a watch opened at `path`.
    async fn first_events(client: &TestClient, path: &str, n: usize) -> Vec<Value> {
        let response = client.open(Method::GET, path, &[], None).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let mut body = response.into_body();
        let (mut buffer, mut events) = (Vec::new(), Vec::new());
        while events.len() < n {
            let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                .await
                .unwrap_or_else(|_| panic!("{path}: {} of {n} events within 10 s", events.len()))
                .expect("the watch stays open")
                .expect("a frame");
            let Ok(data) = frame.into_data() else { continue };
            buffer.extend_from_slice(&data);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                events.push(serde_json::from_slice(&line).expect("a JSON watch event"));
            }
        }
        events
    }

    /// What a client sees of the cache's list and watch semantics on etcd, snapshotted: a watch list
    /// (initial `ADDED` events, then the bookmark annotated `k8s.io/initial-events-end`), a periodic
    /// bookmark, the 504 of a resourceVersion etcd never reaches, the 410 of a continue token whose
    /// revision etcd compacted, and the 410 `ERROR` event of a watch from a compacted revision.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_a_client_sees_of_the_cache_semantics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some(etcd) = etcd(dir.path(), 0) else { return };
        let (_cluster, client) = server(dir.path(), &etcd, &["--watch-bookmark-interval=200ms"]).await;
        let mut revisions = Vec::new();
        for name in ["a", "b"] {
            let body = json!({"metadata": {"name": name}, "data": {"k": name}}).to_string();
            let reply = client.post(CONFIGMAPS, &body).await;
            assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
            revisions.push(revision(&reply.json()));
        }
        let watch_list = first_events(
            &client,
            &format!(
                "{CONFIGMAPS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
                 &allowWatchBookmarks=true"
            ),
            3,
        )
        .await;
        let bookmark = first_events(
            &client,
            &format!(
                "{CONFIGMAPS}?watch=true&allowWatchBookmarks=true&resourceVersion={}",
                revisions[1]
            ),
            1,
        )
        .await;
        assert!(revision(&bookmark[0]["object"]) >= revisions[1], "{bookmark:?}");

        let future = revisions[1] + 1_000_000;
        let too_large = client
            .get(&format!(
                "{CONFIGMAPS}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"
            ))
            .await;

        let first_page = client.get(&format!("{CONFIGMAPS}?limit=1")).await;
        assert_eq!(first_page.status, StatusCode::OK, "{}", first_page.text());
        let token = first_page.json()["metadata"]["continue"]
            .as_str()
            .expect("a continue token")
            .to_owned();
        let reply = client
            .post(CONFIGMAPS, &json!({"metadata": {"name": "c"}}).to_string())
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
        let compacted_at = revision(&reply.json());
        let compaction = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", etcd.client_url()))
            .args(["compaction", &compacted_at.to_string()])
            .output()
            .expect("etcdctl runs");
        assert!(
            compaction.status.success(),
            "{}",
            String::from_utf8_lossy(&compaction.stderr)
        );
        let expired_continue = client
            .get(&format!("{CONFIGMAPS}?limit=1&continue={token}"))
            .await;
        // Its token continues the list at the current revision, after the same key.
        let fresh_token = expired_continue.json()["metadata"]["continue"]
            .as_str()
            .expect("the 410 carries a continue token")
            .to_owned();
        let continued = client.get(&format!("{CONFIGMAPS}?continue={fresh_token}")).await;
        assert_eq!(continued.status, StatusCode::OK, "{}", continued.text());
        let continued_names: Vec<Value> = continued.json()["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| item["metadata"]["name"].clone())
            .collect();
        assert!(revision(&continued.json()) >= compacted_at);
        let expired_watch = first_events(
            &client,
            &format!("{CONFIGMAPS}?watch=true&resourceVersion={}", revisions[0]),
            1,
        )
        .await;

        let seen = json!({
            "watch list": watch_list,
            "periodic bookmark": bookmark,
            "list at a resourceVersion etcd never reaches": {
                "code": too_large.status.as_u16(),
                "body": serde_json::from_slice::<Value>(&too_large.body).unwrap_or_else(|_| json!(too_large.text())),
            },
            "continue token of a compacted revision": {
                "code": expired_continue.status.as_u16(),
                "body": expired_continue.json(),
            },
            "the rest of the list through the 410's token": continued_names,
            "watch from a compacted revision": expired_watch,
        });
        insta::with_settings!({filters => vec![
            (r"too old resource version: \d+ \(\d+\)", "too old resource version: [rv] ([oldest])"),
            (r"Too large resource version: \d+, current: \d+", "Too large resource version: [rv], current: [current]"),
        ]}, {
            insta::assert_json_snapshot!("cache_semantics_on_etcd", seen, {
                ".**.resourceVersion" => "[resourceVersion]",
                ".**.uid" => "[uid]",
                ".**.creationTimestamp" => "[creationTimestamp]",
                ".**.managedFields" => "[managedFields]",
            });
        });
    }

    /// A list with `resourceVersion=0` ("any") is answered from the watch cache at the revision it
    /// holds, without catching up with etcd, as upstream's cacher answers it: even while etcd is down,
    /// where a consistent list fails; pages too (`limit`, then `continue` at the cache's revision).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lists_at_resource_version_0_are_answered_from_the_cache_while_etcd_is_down() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some(etcd) = etcd(dir.path(), 0) else { return };
        let (_cluster, client) = server(dir.path(), &etcd, &[]).await;
        let mut written = 0;
        for name in ["a", "b", "c"] {
            let reply = client
                .post(CONFIGMAPS, &json!({"metadata": {"name": name}}).to_string())
                .await;
            assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
            written = revision(&reply.json());
        }
        let names = |list: &Value| -> Vec<String> {
            list["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|item| item["metadata"]["name"].as_str().expect("name").to_owned())
                .collect()
        };
        // The cache starts on the first list and then holds the three.
        eventually(
            "the cache to hold the writes",
            Duration::from_secs(10),
            || async {
                let list = client.get(&format!("{CONFIGMAPS}?resourceVersion=0")).await;
                (list.status == StatusCode::OK && revision(&list.json()) >= written).then_some(())
            },
        )
        .await;

        drop(etcd);
        etcd_seen_down(&client).await;
        // The attempt is real: a consistent list needs etcd and fails now.
        let consistent = client.get(CONFIGMAPS).await;
        assert_ne!(consistent.status, StatusCode::OK, "{}", consistent.text());

        let any = client.get(&format!("{CONFIGMAPS}?resourceVersion=0")).await;
        assert_eq!(any.status, StatusCode::OK, "{}", any.text());
        let any = any.json();
        assert_eq!(names(&any), ["a", "b", "c"]);
        assert!(revision(&any) >= written, "{any}");

        let first = client
            .get(&format!("{CONFIGMAPS}?resourceVersion=0&limit=2"))
            .await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text());
        let first = first.json();
        assert_eq!(names(&first), ["a", "b"]);
        assert_eq!(first["metadata"]["remainingItemCount"], 1);
        let token = first["metadata"]["continue"].as_str().expect("a continue token");
        let rest = client
            .get(&format!("{CONFIGMAPS}?limit=2&continue={token}"))
            .await;
        assert_eq!(rest.status, StatusCode::OK, "{}", rest.text());
        assert_eq!(names(&rest.json()), ["c"]);
    }

    /// A watch's BOOKMARKs never run ahead of the changes it has delivered: a client that resumes from
    /// a bookmark (client-go's reflector does) misses nothing. Bookmarks every 10 ms while four writers
    /// write ConfigMaps in the watched namespace and in another: every change after a bookmark has a
    /// higher revision than it. With the cache, the other namespace's changes move the bookmarks on
    /// (they reach the last write's revision); without it, a bookmark carries the last change seen.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bookmarks_never_run_ahead_of_the_changes_a_watch_delivered() {
        for cache in ["true", "false"] {
            let dir = tempfile::tempdir().expect("tempdir");
            let Some(etcd) = etcd(dir.path(), 0) else { return };
            let flags = [
                "--watch-bookmark-interval=10ms",
                if cache == "true" {
                    "--watch-cache=true"
                } else {
                    "--watch-cache=false"
                },
            ];
            let (_cluster, client) = server(dir.path(), &etcd, &flags).await;
            let namespace = client
                .post(
                    "/api/v1/namespaces",
                    &json!({"metadata": {"name": "other"}}).to_string(),
                )
                .await;
            assert_eq!(namespace.status, StatusCode::CREATED, "{}", namespace.text());
            let from = list_revision(&client).await;
            let path = format!("{CONFIGMAPS}?watch=true&allowWatchBookmarks=true&resourceVersion={from}");
            let response = client.open(Method::GET, &path, &[], None).await;
            assert_eq!(response.status(), StatusCode::OK);
            let mut body = response.into_body();

            const WRITES: usize = 200;
            let mut writers = Vec::new();
            for (w, namespace) in [(0, "default"), (1, "other"), (2, "default"), (3, "other")] {
                let client = client.clone();
                writers.push(tokio::spawn(async move {
                    let mut last = 0;
                    for i in (w / 2..WRITES).step_by(2) {
                        let body = json!({"metadata": {"name": format!("cm-{i:03}")}}).to_string();
                        let reply = client
                            .post(&format!("/api/v1/namespaces/{namespace}/configmaps"), &body)
                            .await;
                        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
                        last = revision(&reply.json());
                    }
                    last
                }));
            }
            // The stream as a client reads it: (type, revision), until every write of `default` has
            // arrived and a bookmark has reached `until` (once the writers are done).
            let mut events: Vec<(String, u64)> = Vec::new();
            let mut buffer = Vec::new();
            let mut until: Option<u64> = None;
            let mut writers = Some(writers);
            let mut last_bookmark = 0;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            loop {
                let added = events.iter().filter(|(t, _)| t == "ADDED").count();
                if added == WRITES {
                    if let Some(writers) = writers.take() {
                        let mut last = 0;
                        for writer in writers {
                            last = last.max(writer.await.expect("writer"));
                        }
                        until = Some(if cache == "true" {
                            last
                        } else {
                            events.last().map_or(0, |(_, rv)| *rv)
                        });
                    }
                    if until.is_some_and(|until| last_bookmark >= until) {
                        break;
                    }
                }
                let frame = tokio::time::timeout_at(deadline, body.frame())
                    .await
                    .unwrap_or_else(|_| {
                        panic!(
                            "cache={cache}: {added} of {WRITES} changes and a bookmark at {until:?} \
                             (last {last_bookmark}) within 60 s"
                        )
                    })
                    .expect("the watch stays open")
                    .expect("a frame");
                let Ok(data) = frame.into_data() else { continue };
                buffer.extend_from_slice(&data);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let event: Value = serde_json::from_slice(&line).expect("a JSON watch event");
                    let kind = event["type"].as_str().expect("type").to_owned();
                    let rv = revision(&event["object"]);
                    if kind == "BOOKMARK" {
                        last_bookmark = rv;
                    }
                    events.push((kind, rv));
                }
            }
            // The attempt was made: bookmarks came between changes, not only after them.
            let first_change = events.iter().position(|(t, _)| t != "BOOKMARK").expect("changes");
            let last_change = events
                .iter()
                .rposition(|(t, _)| t != "BOOKMARK")
                .expect("changes");
            let interleaved = events[first_change..last_change]
                .iter()
                .filter(|(t, _)| t == "BOOKMARK")
                .count();
            assert!(
                interleaved >= 3,
                "cache={cache}: only {interleaved} bookmarks among the changes"
            );
            let mut highest = from;
            for (i, (kind, rv)) in events.iter().enumerate() {
                if kind == "BOOKMARK" {
                    assert!(
                        *rv >= highest,
                        "cache={cache}: bookmark {i} at {rv} went back from {highest}"
                    );
                } else {
                    assert!(
                        *rv > highest,
                        "cache={cache}: {kind} {i} at {rv} came after a bookmark or change at {highest}"
                    );
                }
                highest = highest.max(*rv);
            }
        }
    }

    /// Consistent lists (`resourceVersion` unset) under concurrent writes to ConfigMaps and to another
    /// resource (which moves etcd's revision without a ConfigMap event): every list holds every
    /// ConfigMap acknowledged before it was sent. On an etcd whose requested progress notifications
    /// can overtake events (etcd-io/etcd#15220, before 3.4.25/3.5.8), a cache trusting them answered
    /// lists without a write etcd had already acknowledged, and then dropped that write's event for
    /// good (docs/decisions.md §21).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn consistent_lists_hold_every_write_acknowledged_before_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some(etcd) = etcd(dir.path(), 0) else { return };
        let (_cluster, client) = server(dir.path(), &etcd, &[]).await;
        let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
        let writing = Arc::new(AtomicBool::new(true));
        let mut writers = Vec::new();
        for w in 0..6 {
            let (client, acknowledged, writing) = (client.clone(), acknowledged.clone(), writing.clone());
            writers.push(tokio::spawn(async move {
                let mut i = 0;
                while writing.load(Ordering::Relaxed) {
                    i += 1;
                    let name = format!("w{w}-{i:05}");
                    let body = json!({"metadata": {"name": name}}).to_string();
                    // Odd writers write Secrets: etcd's revision moves on without a ConfigMap event.
                    let path = if w % 2 == 0 {
                        CONFIGMAPS
                    } else {
                        "/api/v1/namespaces/default/secrets"
                    };
                    let reply = client.post(path, &body).await;
                    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
                    if w % 2 == 0 {
                        acknowledged.lock().expect("acknowledged").insert(name);
                    }
                }
            }));
        }
        let mut lists = 0;
        let mut missing_total = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while std::time::Instant::now() < deadline {
            let before: BTreeSet<String> = acknowledged.lock().expect("acknowledged").clone();
            let list = client.get(CONFIGMAPS).await;
            assert_eq!(list.status, StatusCode::OK, "{}", list.text());
            let listed: BTreeSet<String> = list.json()["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|item| item["metadata"]["name"].as_str().expect("name").to_owned())
                .collect();
            let missing: Vec<String> = before.difference(&listed).cloned().collect();
            if !missing.is_empty() {
                missing_total.push((lists, missing));
            }
            lists += 1;
        }
        writing.store(false, Ordering::Relaxed);
        for writer in writers {
            writer.await.expect("writer");
        }
        assert!(
            missing_total.is_empty(),
            "{} of {lists} consistent lists missed acknowledged writes: {missing_total:?}",
            missing_total.len()
        );
    }

    /// etcd's count of open watchers (`etcd_debugging_mvcc_watcher_total`).
    async fn etcd_watchers(etcd: &EtcdProcess) -> u64 {
        let url = format!("{}/metrics", etcd.client_url());
        let body = tokio::task::spawn_blocking(move || {
            let output = Command::new("curl")
                .args(["-s", &url])
                .output()
                .expect("curl runs");
            String::from_utf8_lossy(&output.stdout).into_owned()
        })
        .await
        .expect("join");
        body.lines()
            .find_map(|line| line.strip_prefix("etcd_debugging_mvcc_watcher_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .expect("etcd_debugging_mvcc_watcher_total") as u64
    }

    use std::process::Command;

    /// Opens `count` ConfigMap watches and answers how many etcd watchers that added.
    async fn etcd_watchers_for_watches(flags: &[&str], count: usize) -> u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let etcd = etcd(dir.path(), 0).expect("etcd");
        let (_cluster, client) = server(dir.path(), &etcd, flags).await;
        let from = list_revision(&client).await;
        // The server's own watches (controllers) settle first: the same count five polls in a row.
        let readings = Mutex::new(Vec::new());
        let before = eventually(
            "etcd's watcher count settles",
            Duration::from_secs(30),
            || async {
                let reading = etcd_watchers(&etcd).await;
                let mut readings = readings.lock().expect("readings");
                readings.push(reading);
                let last = &readings[readings.len().saturating_sub(5)..];
                (last.len() == 5 && last.iter().all(|r| *r == reading)).then_some(reading)
            },
        )
        .await;
        let stop = Arc::new(AtomicBool::new(false));
        let watchers: Vec<_> = (0..count)
            .map(|_| watcher(client.clone(), from, stop.clone()))
            .collect();
        let body = json!({"metadata": {"name": "probe"}}).to_string();
        assert_eq!(client.post(CONFIGMAPS, &body).await.status, StatusCode::CREATED);
        // Every watch is open on the server (and, without the cache, in etcd) once it saw the probe.
        eventually("every watch sees the probe", Duration::from_secs(30), || async {
            watchers
                .iter()
                .all(|seen| seen.lock().expect("seen").added.iter().any(|n| n == "probe"))
                .then_some(())
        })
        .await;
        let after = etcd_watchers(&etcd).await;
        stop.store(true, Ordering::Relaxed);
        after.saturating_sub(before)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn client_watches_share_one_etcd_watch_unless_the_cache_is_off() {
        if !apiserver_fake::cluster::etcd_process::etcd_installed() {
            crate::support::etcd::skip("no etcd binary on PATH (Debian: apt-get install -y etcd-server)");
            return;
        }
        let cached = etcd_watchers_for_watches(&[], 20).await;
        assert!(cached < 5, "20 client watches, {cached} more etcd watchers");
        let off = etcd_watchers_for_watches(&["--watch-cache=false"], 20).await;
        assert!(off >= 20, "--watch-cache=false: {off} more etcd watchers");
        let sized_off =
            etcd_watchers_for_watches(&["--watch-cache-sizes=configmaps#0,secrets#100"], 20).await;
        assert!(sized_off >= 20, "configmaps#0: {sized_off} more etcd watchers");
    }

    /// A watch-list of more objects than one store read holds (the server reads its initial state in
    /// ranges of 250 keys) while writers keep creating more: the initial `ADDED` events are one snapshot
    /// — every object at the bookmark's revision once, none newer — and every write after it arrives
    /// once, after the bookmark. With the watch cache on and off.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_watch_list_of_many_ranges_is_one_snapshot_while_writes_go_on() {
        for flags in [&[][..], &["--watch-cache=false"][..]] {
            let dir = tempfile::tempdir().expect("tempdir");
            let Some(etcd) = etcd(dir.path(), 0) else { return };
            let (_cluster, client) = server(dir.path(), &etcd, flags).await;
            const BEFORE: usize = 600;
            let create =
                |client: Arc<TestClient>, names: Vec<String>, acknowledged: Arc<Mutex<BTreeSet<String>>>| {
                    tokio::spawn(async move {
                        for name in names {
                            let body = json!({"metadata": {"name": name}}).to_string();
                            let reply = client.post(CONFIGMAPS, &body).await;
                            assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
                            acknowledged.lock().expect("acknowledged").insert(name);
                        }
                    })
                };
            let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
            let first: Vec<_> = (0..4)
                .map(|w| {
                    let names = (w..BEFORE).step_by(4).map(|i| format!("before-{i:04}")).collect();
                    create(client.clone(), names, acknowledged.clone())
                })
                .collect();
            for writer in first {
                writer.await.expect("writer");
            }
            let during: Vec<_> = (0..2)
                .map(|w| {
                    let names = (0..100).map(|i| format!("during-{w}-{i:03}")).collect();
                    create(client.clone(), names, acknowledged.clone())
                })
                .collect();
            let path = format!(
                "{CONFIGMAPS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
            );
            let response = client.open(Method::GET, &path, &[], None).await;
            assert_eq!(response.status(), StatusCode::OK, "{flags:?}");
            let mut body = response.into_body();
            let (mut buffer, mut initial, mut after) = (Vec::new(), Vec::new(), Vec::new());
            let mut snapshot = None;
            let mut writers_done = false;
            let mut during = Some(during);
            loop {
                if snapshot.is_some() && !writers_done {
                    for writer in during.take().into_iter().flatten() {
                        writer.await.expect("writer");
                    }
                    writers_done = true;
                }
                let expected = acknowledged.lock().expect("acknowledged").len();
                if writers_done && initial.len() + after.len() >= expected {
                    break;
                }
                let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                    .await
                    .unwrap_or_else(|_| {
                        panic!(
                            "{flags:?}: {} + {} of {expected} objects within 10 s",
                            initial.len(),
                            after.len()
                        )
                    })
                    .expect("the watch stays open")
                    .expect("a frame");
                let Ok(data) = frame.into_data() else { continue };
                buffer.extend_from_slice(&data);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let event: Value = serde_json::from_slice(&line).expect("a JSON watch event");
                    let object = &event["object"];
                    match event["type"].as_str() {
                        Some("BOOKMARK")
                            if object["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true" =>
                        {
                            snapshot = Some(revision(object));
                        }
                        Some("BOOKMARK") => {}
                        Some("ADDED") => {
                            let name = object["metadata"]["name"].as_str().expect("name").to_owned();
                            let seen = if snapshot.is_some() {
                                &mut after
                            } else {
                                &mut initial
                            };
                            seen.push((name, revision(object)));
                        }
                        other => panic!("{flags:?}: unexpected event {other:?}: {event}"),
                    }
                }
            }
            let snapshot = snapshot.expect("the initial-events-end bookmark");
            let names = |events: &[(String, u64)]| -> BTreeSet<String> {
                events.iter().map(|(n, _)| n.clone()).collect()
            };
            let (initial_names, after_names) = (names(&initial), names(&after));
            assert_eq!(
                initial_names.len(),
                initial.len(),
                "{flags:?}: each object once in the initial events"
            );
            assert_eq!(
                after_names.len(),
                after.len(),
                "{flags:?}: each write once after the bookmark"
            );
            assert!(
                initial_names.is_disjoint(&after_names),
                "{flags:?}: nothing both before and after the bookmark"
            );
            assert!(
                initial.iter().all(|(_, rv)| *rv <= snapshot),
                "{flags:?}: no initial event newer than the snapshot"
            );
            assert!(
                after.iter().all(|(_, rv)| *rv > snapshot),
                "{flags:?}: every later event after the snapshot"
            );
            assert!(
                (0..BEFORE).all(|i| initial_names.contains(&format!("before-{i:04}"))),
                "{flags:?}: every object written before the watch-list is in its initial events"
            );
            let every: BTreeSet<String> = initial_names.union(&after_names).cloned().collect();
            assert_eq!(
                every,
                *acknowledged.lock().expect("acknowledged"),
                "{flags:?}: every acknowledged write once"
            );
        }
    }
}
