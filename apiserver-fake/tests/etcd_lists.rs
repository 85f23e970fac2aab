//! Full lists on etcd, read in ranges at one revision and encoded as they are read
//! (`api::rest::chunked_list`), seen from outside: a server process of the built binary on a private
//! etcd lists 1,234 ConfigMaps (more than two ranges) with and without a selector, and answers what
//! the one-read path answers (the same items in key order, a `Content-Length` equal to the body, one
//! resourceVersion that a watch can start from); and a list at a `resourceVersion` reads what it asks
//! for (`Exact`: the state at that revision).
//!
//! Needs the `etcd` feature and `etcd` on `PATH`; otherwise it says it is skipped (and fails when
//! `KUBE_MVP_REQUIRE_ETCD=1`, as CI sets it).

mod support;

#[cfg(not(feature = "etcd"))]
#[test]
fn etcd_lists_are_skipped_without_the_feature() {
    support::etcd::skip("apiserver-fake was built without the `etcd` feature");
}

#[cfg(feature = "etcd")]
mod with_etcd {
    use std::path::Path;
    use std::sync::Arc;

    use apiserver_fake::cluster::process::{EtcdBackend, ProcessCluster};
    use http::StatusCode;
    use serde_json::{Value, json};

    use crate::support::TestClient;

    const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

    fn names(list: &Value) -> Vec<String> {
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| item["metadata"]["name"].as_str().expect("name").to_owned())
            .collect()
    }

    /// One server process of the built binary on a private etcd, and an admin client of it; `None`
    /// (said skipped) without etcd on `PATH`.
    async fn one_server_on_etcd(dir: &Path) -> Option<(ProcessCluster, Arc<TestClient>)> {
        if !crate::support::etcd::etcd_on_path() {
            return None;
        }
        Some(crate::support::etcd::one_server_process(dir, &[], EtcdBackend::Private).await)
    }

    /// `resourceVersion` on a list, as kube-apiserver answers it on etcd: `Exact` reads the state at
    /// that revision (an object created later is not in it), `NotOlderThan` the current state, and a
    /// revision etcd has not reached is the cacher's 504 after its 3 s wait.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_at_a_resource_version_reads_what_it_asks_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some((cluster, client)) = one_server_on_etcd(dir.path()).await else {
            return;
        };
        let first = client
            .post(CONFIGMAPS, &json!({"metadata": {"name": "first"}}).to_string())
            .await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text());
        let at = first.json()["metadata"]["resourceVersion"]
            .as_str()
            .expect("resourceVersion")
            .to_owned();
        let second = client
            .post(CONFIGMAPS, &json!({"metadata": {"name": "second"}}).to_string())
            .await;
        assert_eq!(second.status, StatusCode::CREATED, "{}", second.text());

        let exact = client
            .get(&format!(
                "{CONFIGMAPS}?resourceVersion={at}&resourceVersionMatch=Exact"
            ))
            .await;
        assert_eq!(exact.status, StatusCode::OK, "{}", exact.text());
        let exact = exact.json();
        assert_eq!(names(&exact), ["first"]);
        assert_eq!(exact["metadata"]["resourceVersion"], json!(at));

        let newer = client
            .get(&format!(
                "{CONFIGMAPS}?resourceVersion={at}&resourceVersionMatch=NotOlderThan"
            ))
            .await
            .json();
        assert_eq!(names(&newer), ["first", "second"]);

        let future = client
            .get(&format!(
                "{CONFIGMAPS}?resourceVersion=999999999&resourceVersionMatch=NotOlderThan"
            ))
            .await;
        assert_eq!(future.status, StatusCode::GATEWAY_TIMEOUT, "{}", future.text());
        assert!(
            future.json()["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Timeout: Too large resource version: 999999999, current: ")),
            "{}",
            future.text()
        );
        cluster.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_list_read_in_ranges_answers_what_one_read_did() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some((cluster, client)) = one_server_on_etcd(dir.path()).await else {
            return;
        };
        const COUNT: usize = 1_234;
        let mut writers = Vec::new();
        for w in 0..8 {
            let client = client.clone();
            writers.push(tokio::spawn(async move {
                for i in (w..COUNT).step_by(8) {
                    let parity = if i % 2 == 0 { "even" } else { "odd" };
                    let body = json!({"metadata": {"name": format!("cm-{i:04}"), "labels": {"parity": parity}}, "data": {"i": i.to_string()}});
                    let reply = client.post(CONFIGMAPS, &body.to_string()).await;
                    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
                }
            }));
        }
        for writer in writers {
            writer.await.expect("writer");
        }
        let expected: Vec<String> = (0..COUNT).map(|i| format!("cm-{i:04}")).collect();

        let full = client.get(CONFIGMAPS).await;
        assert_eq!(full.status, StatusCode::OK, "{}", full.text());
        assert_eq!(
            full.headers.get("content-length").and_then(|v| v.to_str().ok()),
            Some(full.body.len().to_string().as_str()),
            "the length is announced"
        );
        assert_eq!(full.headers["content-type"], "application/json");
        assert!(full.body.ends_with(b"]}\n"), "compact JSON, newline-terminated");
        let list = full.json();
        assert_eq!(
            (&list["kind"], &list["apiVersion"]),
            (&json!("ConfigMapList"), &json!("v1"))
        );
        assert_eq!(names(&list), expected);
        assert!(
            list["items"][0].get("kind").is_none(),
            "items of built-in lists carry no TypeMeta"
        );
        let revision = list["metadata"]["resourceVersion"]
            .as_str()
            .expect("resourceVersion")
            .to_owned();
        assert_eq!(
            list["metadata"].as_object().map(|m| m.len()),
            Some(1),
            "{}",
            list["metadata"]
        );

        // The one-read path (a limit larger than the collection) answers the same items, byte for byte.
        let one_read = client.get(&format!("{CONFIGMAPS}?limit=5000")).await.json();
        assert_eq!(one_read["items"], list["items"]);

        // A selector thins every range; the list keeps key order.
        let even = client
            .get(&format!("{CONFIGMAPS}?labelSelector=parity%3Deven"))
            .await
            .json();
        let expected_even: Vec<String> = expected.iter().step_by(2).cloned().collect();
        assert_eq!(names(&even), expected_even);

        // The list's revision is one a watch can start from: the next change is the first event.
        let watch = client
            .open(
                http::Method::GET,
                &format!("{CONFIGMAPS}?watch=true&resourceVersion={revision}"),
                &[],
                None,
            )
            .await;
        assert_eq!(watch.status(), StatusCode::OK);
        let reply = client
            .post(CONFIGMAPS, &json!({"metadata": {"name": "after"}}).to_string())
            .await;
        assert_eq!(reply.status, StatusCode::CREATED);
        let mut body = http_body_util::BodyStream::new(watch.into_body());
        let mut line = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            use futures_util::StreamExt;
            while !line.contains(&b'\n') {
                let frame = body.next().await.expect("an event").expect("a frame");
                if let Ok(data) = frame.into_data() {
                    line.extend_from_slice(&data);
                }
            }
        })
        .await
        .expect("the event within 30 s");
        let event: Value =
            serde_json::from_slice(&line[..line.iter().position(|b| *b == b'\n').unwrap_or(0)])
                .expect("a JSON event");
        assert_eq!(
            (
                event["type"].as_str(),
                event["object"]["metadata"]["name"].as_str()
            ),
            (Some("ADDED"), Some("after"))
        );
        cluster.shutdown().await;
    }
}
