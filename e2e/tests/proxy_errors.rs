//! What a client sees when the proxy cannot or need not reach a peer (checklist items 8–14, 17, 18 and
//! the seed scenarios "a peer that cannot respond gives 503; no peer gives 404").

mod support;

use std::collections::BTreeSet;

use e2e::{Exchange, PeerResolutionMode, eventually};
use http::Method;
use support::*;

const NOBODY_SERVES: &str = "/apis/widgets.example.com/v1/namespaces/default/widgets";

async fn wait_for_status(
    cluster: &e2e::TestCluster,
    via: &str,
    path: &str,
    code: u16,
    json: bool,
) -> Exchange {
    let client = cluster.client(via).unwrap();
    eventually(
        &format!("{path} via {via} answers {code} (json: {json})"),
        SETTLE,
        || async {
            let reply = client.get(path).await.ok()?;
            (reply.code() == code && reply.json().is_object() == json).then_some(reply)
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gvr_served_by_no_server_gets_the_local_plain_404() {
    let mut answers = Vec::new();
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let via_b = cluster.client("b").unwrap().get(NOBODY_SERVES).await.unwrap();
        let via_a = cluster.client("a").unwrap().get(NOBODY_SERVES).await.unwrap();
        assert_eq!(via_b.response(), via_a.response(), "{mode:?}");
        assert_eq!(
            proxied_requests_seen_by(&cluster, "a", mark),
            Vec::<String>::new(),
            "{mode:?}: not proxied"
        );
        answers.push(via_b);
    }
    assert_eq!(answers[0], answers[1]);
    insta::assert_yaml_snapshot!("unknown_group_via_b_is_local_404_page_not_found", answers[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_peer_gets_503_plain_text_transport_error() {
    let mut answers = Vec::new();
    for mode in MODES {
        let mut cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let a_url = cluster.url("a").unwrap();
        let a_address = a_url
            .trim_start_matches("https://")
            .rsplit_once(':')
            .map(|(ip, _port)| ip.to_owned())
            .unwrap();
        // a crashes: its identity lease, StorageVersion entries and endpoint record stay behind.
        cluster.kill("a").await.unwrap();
        let reply = cluster.client("b").unwrap().get(JOBS).await.unwrap();
        assert_eq!(reply.code(), 503, "{mode:?}: {reply:?}");
        assert_eq!(
            reply.header("content-type"),
            Some("text/plain; charset=utf-8"),
            "{mode:?}"
        );
        assert_eq!(
            reply.json(),
            &serde_json::Value::Null,
            "{mode:?}: plain text, not a Status"
        );
        assert!(
            reply.raw_text().ends_with('\n'),
            "{mode:?}: http.Error appends a newline"
        );
        answers.push(transport_error_503(
            &reply,
            &format!("dial tcp {a_address}:[port]: connect: connection refused"),
        ));
    }
    assert_eq!(answers[0], answers[1]);
    insta::assert_yaml_snapshot!("jobs_via_b_when_peer_a_is_down_is_503_text", answers[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unresolvable_peer_address_gets_503_json_status() {
    let mut answers = Vec::new();
    for mode in MODES {
        let mut cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let a_id = cluster.server_id("a").unwrap();
        cluster.kill("a").await.unwrap();
        forget_peer_address(&cluster, &a_id).await;
        let reply = wait_for_status(&cluster, "b", JOBS, 503, true).await;
        assert_eq!(
            reply.json()["message"],
            "Error getting ip and port info of the remote server while proxying"
        );
        assert_eq!(reply.json()["reason"], "ServiceUnavailable");
        assert!(reply.json().get("details").is_none(), "{mode:?}: no details");
        answers.push(reply);
    }
    assert_eq!(answers[0], answers[1]);
    insta::assert_yaml_snapshot!("jobs_via_b_when_peer_a_has_no_address_is_503_status", answers[1]);
}

/// a and c serve jobs; c crashed long enough ago that its address is gone; a is fine.
async fn one_of_two_capable_peers_unresolvable(
    mode: PeerResolutionMode,
) -> (e2e::TestCluster, Vec<Exchange>) {
    let mut cluster = a_and_c_serve_batch_b_does_not(mode).await;
    wait_until_b_reaches(&cluster, &["a", "c"]).await;
    let c_id = cluster.server_id("c").unwrap();
    cluster.kill("c").await.unwrap();
    forget_peer_address(&cluster, &c_id).await;
    // Let b's endpoint cache notice (it re-reads the keyspace every 100 ms).
    let b_endpoints = cluster
        .server("b")
        .unwrap()
        .proxy_endpoints()
        .expect("b runs the proxy");
    eventually("b's endpoint cache forgets c", SETTLE, || async {
        b_endpoints.endpoint(&c_id).is_none().then_some(())
    })
    .await
    .unwrap();
    let b = cluster.client("b").unwrap();
    let mut replies = Vec::new();
    for _ in 0..10 {
        replies.push(b.get(JOBS).await.unwrap());
    }
    (cluster, replies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_version_mode_fails_when_any_capable_peer_is_unresolvable() {
    let (_cluster, replies) = one_of_two_capable_peers_unresolvable(PeerResolutionMode::StorageVersion).await;
    let distinct: BTreeSet<String> = replies
        .iter()
        .map(|r| format!("{} {}", r.status, r.raw_text()))
        .collect();
    assert_eq!(distinct.len(), 1, "{distinct:#?}");
    assert_eq!(replies[0].code(), 503);
    insta::assert_yaml_snapshot!(
        "jobs_via_b_with_one_unresolvable_capable_peer_storage_version_mode",
        replies[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_mode_skips_unresolvable_peers_when_one_resolves() {
    let (cluster, replies) = one_of_two_capable_peers_unresolvable(PeerResolutionMode::Discovery).await;
    assert!(replies.iter().all(|r| r.code() == 200), "{replies:#?}");
    assert!(requests_seen_by(&cluster, "a", 0, JOBS) >= 10);
    insta::assert_yaml_snapshot!(
        "jobs_via_b_with_one_unresolvable_capable_peer_discovery_mode",
        replies[0].status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_responses_are_relayed_unchanged() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let (a, b) = (cluster.client("a").unwrap(), cluster.client("b").unwrap());
        let created = b.post_json(JOBS, &job("relay")).await.unwrap();
        let mut relayed = vec![created];
        // 409, 404, 422 and 405-style answers of a reach the client as a wrote them.
        for (method, path, body) in [
            (Method::POST, JOBS.to_owned(), Some(job("relay"))),
            (Method::GET, format!("{JOBS}/missing"), None),
            (
                Method::POST,
                JOBS.to_owned(),
                Some(serde_json::json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}})),
            ),
            (Method::DELETE, format!("{JOBS}/missing"), None),
        ] {
            let mut via_b = b.request(method.clone(), &path);
            let mut direct = a.request(method.clone(), &path);
            if let Some(body) = &body {
                via_b = via_b.json(body);
                direct = direct.json(body);
            }
            let via_b = via_b.send().await.unwrap();
            let direct = direct.send().await.unwrap();
            assert_eq!(via_b.response(), direct.response(), "{mode:?} {method} {path}");
            relayed.push(via_b);
        }
        // A watch stream is relayed event by event.
        let watch = b.request(Method::GET, &format!("{JOBS}?watch=true&resourceVersion=0"));
        let events = watch.watch(1, std::time::Duration::from_secs(5)).await.unwrap();
        assert_eq!(events.json()[0]["type"], "ADDED", "{mode:?}: {events:?}");
        relayed.push(events);
        // Keys sorted: the etcd store gives objects Go's field order, the in-memory store the order
        // they were written in.
        insta::with_settings!({sort_maps => true}, {
            insta::assert_yaml_snapshot!(format!("peer_answers_relayed_by_b_{}", mode_name(mode)), relayed);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_attempt_to_a_random_capable_peer_without_retry_or_local_fallback() {
    for mode in MODES {
        let mut cluster = a_and_c_serve_batch_b_does_not(mode).await;
        wait_until_b_reaches(&cluster, &["a", "c"]).await;
        // c crashes but its address is still published: choosing c fails, choosing a succeeds.
        cluster.kill("c").await.unwrap();
        let mark = log_mark(&cluster, "a");
        let b = cluster.client("b").unwrap();
        let mut outcomes = BTreeSet::new();
        let mut successes = 0;
        for i in 0..40 {
            let reply = b.get(&format!("{JOBS}?limit={i}")).await.unwrap();
            if reply.code() == 200 {
                successes += 1;
            }
            outcomes.insert(format!(
                "{} {}",
                reply.status,
                reply.header("content-type").unwrap_or("")
            ));
        }
        // Both peers were chosen (probability of missing one in 40 tries: 2^-39), a 503 was never retried
        // on a, and nothing fell back to b's local 404.
        assert_eq!(
            outcomes.into_iter().collect::<Vec<_>>(),
            [
                "200 OK application/json",
                "503 Service Unavailable text/plain; charset=utf-8"
            ],
            "{mode:?}"
        );
        assert_eq!(
            proxied_requests_seen_by(&cluster, "a", mark).len(),
            successes,
            "{mode:?}: one attempt each"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_serving_certificate_is_verified_against_the_peer_ca() {
    for mode in MODES {
        // b trusts the front-proxy CA for peers, which did not sign a's serving certificate: the TLS
        // handshake fails, which is a transport error (plain-text 503), not an endpoint error.
        let cluster = a_and_b_with(mode, |a| a, |b| b.flag("--peer-ca-file={pki}/front-proxy-ca.crt")).await;
        // StorageVersion mode learns about a without talking to it; Discovery mode cannot even fetch a's
        // discovery, so a never becomes a candidate and b answers its local 404.
        let reply = match mode {
            // (Until a's peer endpoint record is written, b answers the JSON 503 of item 10.)
            PeerResolutionMode::StorageVersion => wait_for_status(&cluster, "b", JOBS, 503, false).await,
            PeerResolutionMode::Discovery => cluster.client("b").unwrap().get(JOBS).await.unwrap(),
        };
        match mode {
            PeerResolutionMode::StorageVersion => {
                assert_eq!(reply.header("content-type"), Some("text/plain; charset=utf-8"));
            }
            PeerResolutionMode::Discovery => {
                assert_eq!(reply.code(), 404, "{reply:?}");
                wait_for_metric(
                    &cluster,
                    "b",
                    "apiserver_peer_discovery_sync_errors_total",
                    "fetch_discovery",
                )
                .await;
            }
        }
        let reply = match mode {
            PeerResolutionMode::StorageVersion => transport_error_503(
                &reply,
                "tls: failed to verify certificate: x509: certificate signed by unknown authority",
            ),
            PeerResolutionMode::Discovery => reply,
        };
        insta::assert_yaml_snapshot!(
            format!("jobs_via_b_with_wrong_peer_ca_{}", mode_name(mode)),
            reply
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destination_accepts_the_proxy_client_certificate_only_with_an_allowed_cn() {
    for mode in MODES {
        // a only believes front proxies named "someone-else": b's proxy client certificate (CN
        // front-proxy-client) is not allowed, so a treats b's requests as anonymous and says 401.
        let cluster = a_and_b_with(
            mode,
            |a| a.flag("--requestheader-allowed-names=someone-else"),
            |b| b,
        )
        .await;
        let reply = match mode {
            // StorageVersion mode knows a serves jobs without asking a: a's 401 is relayed.
            PeerResolutionMode::StorageVersion => {
                let reply = wait_for_code(&cluster, "b", JOBS, 401).await;
                assert_eq!(reply.json()["reason"], "Unauthorized");
                reply
            }
            // Discovery mode asks a with the same certificate, is refused, and so never learns that a
            // serves jobs: b answers its local 404 and counts discovery errors.
            PeerResolutionMode::Discovery => {
                wait_for_metric(
                    &cluster,
                    "b",
                    "apiserver_peer_discovery_sync_errors_total",
                    "fetch_discovery",
                )
                .await;
                let reply = cluster.client("b").unwrap().get(JOBS).await.unwrap();
                assert_eq!(reply.code(), 404);
                reply
            }
        };
        insta::assert_yaml_snapshot!(
            format!(
                "jobs_via_b_when_a_does_not_allow_the_proxy_cn_{}",
                mode_name(mode)
            ),
            reply
        );
        // With no allowed names at all, any CN signed by the requestheader CA is believed.
        let cluster = a_and_b_with(mode, |a| a.unset_flag("--requestheader-allowed-names"), |b| b).await;
        let reply = wait_for_code(&cluster, "b", JOBS, 200).await;
        assert_eq!(reply.json()["kind"], "JobList");
    }
}
