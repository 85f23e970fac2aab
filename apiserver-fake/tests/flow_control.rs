//! Cheap pages, deadlines and API Priority and Fairness, driven from outside against the built binary
//! (`apiserver-fake cluster`): a `timeout=1ms` list of thousands of Jobs is upstream's 504, not a late
//! 200; and 150 concurrent `limit=1` lists over 10,000 Jobs by one ordinary user leave `/readyz` fast
//! and another user's requests answered.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use support::demo::{Demo, admin, server};
use support::{JOBS, TestClient, job};

/// Creates `count` Jobs through `client`, 32 at a time.
async fn create_jobs(client: &TestClient, count: usize) {
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let mut creating = tokio::task::JoinSet::new();
    for i in 0..count {
        let (client, gate) = (client.clone(), gate.clone());
        creating.spawn(async move {
            let _permit = gate.acquire().await.expect("open");
            let created = client.post(JOBS, &job(&format!("job-{i:05}"))).await;
            assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
        });
    }
    while let Some(done) = creating.join_next().await {
        done.expect("create task");
    }
}

/// `user`'s request, made by the admin client impersonating them (as `kubectl --as` does).
async fn get_as(client: &TestClient, user: &str, path: &str) -> support::Reply {
    client
        .send(Method::GET, path, &[("impersonate-user", user)], None)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_list_past_its_deadline_is_upstreams_504() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let b = admin(dir.path(), server(&manifest, "b"));
    create_jobs(&b, 3_000).await;

    let late = b.get(&format!("{JOBS}?timeout=1ms")).await;
    assert_eq!(late.status, StatusCode::GATEWAY_TIMEOUT, "{}", late.text());
    let status = late.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(status["code"], 504);
    assert_eq!(
        status["message"],
        "Timeout: request did not complete within requested timeout - context deadline exceeded"
    );
    // The same list with time enough is whole, and the server serves on.
    let whole = b.get(&format!("{JOBS}?timeout=60s")).await;
    assert_eq!(whole.status, StatusCode::OK);
    assert_eq!(whole.json()["items"].as_array().map(Vec::len), Some(3_000));
}

/// The "done when": one ordinary user's 150 concurrent `limit=1` lists over 10,000 Jobs
/// neither stall `/readyz` (the `exempt` level) nor another ordinary user (a flow of their own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_many_lists_leave_readyz_and_other_users_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let b = admin(dir.path(), server(&manifest, "b"));
    create_jobs(&b, 10_000).await;

    let page = get_as(&b, "jane", &format!("{JOBS}?limit=1")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    let page = page.json();
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(page["metadata"]["remainingItemCount"], 9_999);

    let mut load = tokio::task::JoinSet::new();
    for _ in 0..150 {
        let b = b.clone();
        load.spawn(async move { get_as(&b, "jane", &format!("{JOBS}?limit=1")).await.status });
    }
    let mut slowest_readyz = Duration::ZERO;
    let mut bobs = Vec::new();
    while !load.is_empty() && bobs.len() < 50 {
        let started = Instant::now();
        let ready = get_as(&b, "jane", "/readyz").await;
        slowest_readyz = slowest_readyz.max(started.elapsed());
        assert_eq!(ready.status, StatusCode::OK, "{}", ready.text());
        bobs.push(get_as(&b, "bob", &format!("{JOBS}?limit=1")).await.status);
        while let Some(done) = load.try_join_next() {
            let status = done.expect("jane's list");
            assert!(
                status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS,
                "jane's list: {status}"
            );
        }
    }
    while let Some(done) = load.join_next().await {
        let status = done.expect("jane's list");
        assert!(
            status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS,
            "jane's list: {status}"
        );
    }
    assert!(
        slowest_readyz < Duration::from_secs(1),
        "/readyz took {slowest_readyz:?}"
    );
    assert!(!bobs.is_empty());
    assert!(bobs.iter().all(|s| *s == StatusCode::OK), "bob's lists: {bobs:?}");
}
