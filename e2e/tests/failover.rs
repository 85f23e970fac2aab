//! Readiness and fail-over (checklist items 15 and 49; upstream TestPeerProxiedRequestToThirdServerAfterFirstDies).

mod support;

use std::time::Duration;

use e2e::{ClusterBuilder, eventually};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_request_after_readiness_is_already_proxied() {
    let mut failures = Vec::new();
    for mode in MODES {
        let mut cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        // a is up and published; b starts again and reports ready only once its caches synced.
        for _ in 0..3 {
            cluster.restart("b").await.unwrap();
            let reply = cluster.client("b").unwrap().get(JOBS).await.unwrap();
            if reply.code() != 200 {
                failures.push(format!("{mode:?}: first request after b became ready: {reply:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_reach_a_third_capable_server_after_the_first_dies() {
    let mut failures = Vec::new();
    for mode in MODES {
        // Every server collects expired identity leases (and, in alpha mode, StorageVersion entries of
        // servers without a lease) every second, as upstream's test runs the collectors fast.
        let collecting = move |s: e2e::ServerBuilder| {
            in_mode(mode)(s)
                .flag("--identity-lease-gc-period-seconds=1")
                .flag("--storage-version-gc-period-seconds=1")
        };
        let fast = move |s: e2e::ServerBuilder| {
            collecting(s)
                .identity_lease_duration(Duration::from_secs(3))
                .identity_lease_renew_interval(Duration::from_secs(1))
                .peer_endpoint_ttl(Duration::from_secs(3))
                .peer_endpoint_refresh(Duration::from_secs(1))
        };
        let mut cluster = ClusterBuilder::new()
            .server("a", fast)
            .server("b", move |s| collecting(s).runtime_config("batch/v1=false"))
            .server("c", collecting)
            .start()
            .await
            .unwrap();
        wait_until_b_reaches(&cluster, &["a", "c"]).await;
        assert_eq!(
            cluster
                .client("a")
                .unwrap()
                .post_json(JOBS, &job("test-job"))
                .await
                .unwrap()
                .code(),
            201
        );
        let a_id = cluster.server_id("a").unwrap();
        cluster.kill("a").await.unwrap();
        // Until a's address lapses (2 s TTL) b may still pick a (503), or c by chance; only afterwards
        // must every request reach c.
        let key = format!("{}{a_id}", apiserver_fake::controllers::peer_endpoint::PREFIX);
        let store = cluster.store().clone();
        eventually("a's peer address lapses", Duration::from_secs(10), || async {
            store.get_internal(&key).await.ok()?.is_none().then_some(())
        })
        .await
        .unwrap();
        let b = cluster.client("b").unwrap();
        let streak = std::sync::atomic::AtomicUsize::new(0);
        let outcome = eventually(
            &format!("{mode:?}: ten proxied lists in a row"),
            Duration::from_secs(15),
            || async {
                let reply = b.get(JOBS).await.ok()?;
                let ok = reply.code() == 200 && reply.json()["items"][0]["metadata"]["name"] == "test-job";
                let n = if ok {
                    streak.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
                } else {
                    streak.store(0, std::sync::atomic::Ordering::SeqCst);
                    0
                };
                (n >= 10).then_some(())
            },
        )
        .await;
        if let Err(e) = outcome {
            failures.push(e.to_string());
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
