//! The in-memory store's bounded watch history as a client meets it, against the built binary's
//! `cluster` command (docs/decisions.md §16): once more than the history's byte budget (4 MiB) of
//! ConfigMaps has been written, a watch resumed from before them gets upstream's 410 as an `ERROR`
//! event (`too old resource version: N (M)`, through kubectl too), a watch from the `M` it names is
//! served, and a watch of another resource from a revision as old is not sent back to a relist.

mod support;

use std::time::Duration;

use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::demo::{Demo, admin, server};
use support::{TestClient, kubectl, kubectl_available};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("a resourceVersion in {object}"))
}

async fn create(client: &TestClient, collection: &str, body: Value) -> u64 {
    let reply = client.post(collection, &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    resource_version(&reply.json())
}

/// The first watch event of `collection` from `resource_version`, read within 30 s.
async fn first_event(client: &TestClient, collection: &str, resource_version: u64) -> Value {
    let response = client
        .open(
            Method::GET,
            &format!("{collection}?watch=true&resourceVersion={resource_version}"),
            &[],
            None,
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut line = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !line.contains(&b'\n') {
            match body.frame().await {
                Some(Ok(frame)) => line.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..])),
                other => panic!("the watch ended before its first event: {other:?}"),
            }
        }
    })
    .await
    .expect("a watch event within 30 s");
    let end = line.iter().position(|b| *b == b'\n').unwrap_or(line.len());
    serde_json::from_slice(&line[..end]).expect("a JSON watch event")
}

/// `too old resource version: N (M)`: `M`, after checking `N`.
fn oldest_in(event: &Value, requested: u64) -> u64 {
    assert_eq!(event["type"], "ERROR", "{event}");
    let status = &event["object"];
    assert_eq!(
        (&status["kind"], &status["code"], &status["reason"]),
        (&json!("Status"), &json!(410), &json!("Expired")),
        "{event}"
    );
    let message = status["message"].as_str().expect("message");
    message
        .strip_prefix(&format!("too old resource version: {requested} ("))
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("upstream's message: {message}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumed_past_the_history_gets_410_and_other_resources_keep_theirs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let client = admin(dir.path(), server(&manifest, "b"));

    let before = create(
        &client,
        CONFIGMAPS,
        json!({"metadata": {"name": "before"}, "data": {"k": "v"}}),
    )
    .await;
    let secret = create(
        &client,
        SECRETS,
        json!({"metadata": {"name": "s1"}, "stringData": {"k": "v"}}),
    )
    .await;
    // 14 ConfigMaps of 800 kB: more than the 4 MiB the history keeps.
    let mut last = 0;
    for i in 0..14 {
        let data = "x".repeat(800 * 1024);
        last = create(
            &client,
            CONFIGMAPS,
            json!({"metadata": {"name": format!("big-{i}")}, "data": {"k": data}}),
        )
        .await;
    }

    // From before the burst: 410 as an ERROR event, naming the oldest revision that can be resumed.
    let expired = first_event(&client, CONFIGMAPS, before).await;
    let oldest = oldest_in(&expired, before);
    assert!(
        before < oldest && oldest < last,
        "the history dropped some of the burst, not all: {before} < {oldest} < {last}"
    );
    // One before it is as expired; from it, the rest of the burst is replayed.
    let one_before = first_event(&client, CONFIGMAPS, oldest - 1).await;
    assert_eq!(oldest_in(&one_before, oldest - 1), oldest);
    let replayed = first_event(&client, CONFIGMAPS, oldest).await;
    assert_eq!(replayed["type"], "ADDED", "{}", replayed["type"]);
    assert!(resource_version(&replayed["object"]) > oldest);

    // Secrets were not written meanwhile: a watch from the Secret's revision, older than anything the
    // history still holds, is served and sees the next Secret.
    let watch = {
        let client = client.clone();
        tokio::spawn(async move { first_event(&client, SECRETS, secret).await })
    };
    let s2 = create(
        &client,
        SECRETS,
        json!({"metadata": {"name": "s2"}, "stringData": {"k": "v"}}),
    )
    .await;
    let added = watch.await.expect("the Secret watch");
    assert_eq!(
        (added["type"].as_str(), resource_version(&added["object"])),
        (Some("ADDED"), s2),
        "{added}"
    );

    // kubectl sees the same Status.
    if kubectl_available() {
        let kubeconfig =
            std::path::PathBuf::from(server(&manifest, "b")["kubeconfig"].as_str().expect("kubeconfig"));
        let raw = format!("{CONFIGMAPS}?watch=true&resourceVersion={before}");
        let (_, out, err) =
            tokio::task::spawn_blocking(move || kubectl(&kubeconfig, &["get", "--raw", &raw]))
                .await
                .expect("kubectl ran");
        let event: Value = serde_json::from_str(out.lines().next().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        assert_eq!(oldest_in(&event, before), oldest);
    }
    drop(demo);
}
