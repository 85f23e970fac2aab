//! The Mixed Version Proxy inside the fake, over real TLS between servers on 127.0.0.1 and 127.0.0.2:
//! the seed scenario, errors, loop prevention, identity and streaming.

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use http::{Method, StatusCode};
use http_body_util::BodyStream;
use support::{JOBS, TestClient, cluster, eventually, job, seed_members, wait_for_proxy};

#[tokio::test]
async fn jobs_are_served_through_the_server_that_lacks_batch_v1() {
    let cluster = cluster(seed_members(&[], &[])).await;
    let (a, b) = (TestClient::admin(&cluster, 0), TestClient::admin(&cluster, 1));
    // The demo's start-up wait: afterwards the very first request is proxied, no polling needed.
    cluster
        .wait_until_peers_know_each_other(Duration::from_secs(10))
        .await
        .unwrap();

    let created = a.post(JOBS, &job("seed")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(
        b.get(&format!("{JOBS}/seed")).await.json()["metadata"]["name"],
        "seed"
    );

    let list = a.get(JOBS).await.json();
    assert_eq!(list["kind"], "JobList");
    assert_eq!(list["items"][0]["metadata"]["name"], "seed");
    assert_eq!(a.get(&format!("{JOBS}/seed")).await.status, StatusCode::OK);

    let patched = a
        .send(
            Method::PATCH,
            &format!("{JOBS}/seed"),
            &[("content-type", "application/merge-patch+json")],
            Some(r#"{"metadata":{"labels":{"patched":"yes"}}}"#),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    assert_eq!(
        b.get(&format!("{JOBS}/seed")).await.json()["metadata"]["labels"]["patched"],
        "yes"
    );

    let deleted = a
        .send(
            Method::DELETE,
            &format!("{JOBS}/seed?propagationPolicy=Background"),
            &[],
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text());
    assert_eq!(b.get(&format!("{JOBS}/seed")).await.status, StatusCode::NOT_FOUND);

    // The peer's answer is relayed unchanged, errors included.
    let missing = a.get(&format!("{JOBS}/seed")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["message"], r#"jobs.batch "seed" not found"#);

    let metrics = a.get("/metrics").await.text();
    assert!(
        metrics.contains(
            r#"apiserver_rerouted_request_total{code="201",group="batch",resource="jobs",version="v1"} 1"#
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_peer_sees_the_original_user_and_never_a_spoofed_one() {
    let cluster = cluster(seed_members(&[], &[])).await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;
    let reply = a
        .send(
            Method::GET,
            JOBS,
            &[
                ("x-remote-user", "mallory"),
                ("x-remote-group", "system:masters"),
                ("audit-id", "audit-1"),
            ],
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["audit-id"], "audit-1");
    let proxied: Vec<_> = cluster.servers[1]
        .1
        .served_requests()
        .into_iter()
        .filter(|r| r.peer_proxied && r.uri.starts_with(JOBS))
        .collect();
    assert_eq!(
        proxied.last().map(|r| r.audit_id.as_str()),
        Some("audit-1"),
        "the source's Audit-ID reaches the peer"
    );
    for request in proxied {
        assert_eq!(request.user.name, "admin", "{request:?}");
        assert!(request.user.groups.contains(&"system:masters".to_owned()));
    }
}

#[tokio::test]
async fn no_server_serving_the_resource_gives_the_local_404() {
    let cluster = cluster(seed_members(&[], &[])).await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;
    let reply = a
        .get("/apis/nosuch.example.com/v1/namespaces/default/widgets")
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.text(), "404 page not found\n");
    assert_eq!(reply.headers["content-type"], "text/plain; charset=utf-8");
}

#[tokio::test]
async fn the_loop_prevention_header_keeps_a_request_local() {
    let cluster = cluster(seed_members(&[], &[])).await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;
    let reply = a
        .send(Method::GET, JOBS, &[("x-kubernetes-peer-proxied", "true")], None)
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.text(), "404 page not found\n");
    let rerouted = a
        .send(
            Method::GET,
            JOBS,
            &[("x-kubernetes-apiserver-rerouted", "true")],
            None,
        )
        .await;
    assert_eq!(rerouted.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_watch_streams_through_the_proxy_event_by_event() {
    let cluster = cluster(seed_members(&[], &[])).await;
    let (a, b) = (TestClient::admin(&cluster, 0), TestClient::admin(&cluster, 1));
    wait_for_proxy(&a).await;
    let response = a
        .open(
            Method::GET,
            &format!("{JOBS}?watch=1&labelSelector=w%3D1"),
            &[],
            None,
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut events = BodyStream::new(response.into_body());
    for name in ["first", "second"] {
        let body = job(name).replace(r#""name":"#, r#""labels":{"w":"1"},"name":"#);
        assert_eq!(b.post(JOBS, &body).await.status, StatusCode::CREATED);
        // The event arrives while the stream is still open: nothing is buffered to the end.
        let mut seen = Vec::new();
        while !seen.contains(&b'\n') {
            let frame = tokio::time::timeout(Duration::from_secs(5), events.next())
                .await
                .expect("event within 5s")
                .expect("stream open")
                .expect("frame");
            if let Ok(data) = frame.into_data() {
                seen.extend_from_slice(&data);
            }
        }
        let event: serde_json::Value = serde_json::from_slice(&seen[..seen.len() - 1]).unwrap();
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["metadata"]["name"], name);
    }
}

#[tokio::test]
async fn an_unreachable_peer_gives_503_text_and_a_missing_address_503_status() {
    let mut cluster = cluster(seed_members(&[], &[])).await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;
    let b_id = cluster.servers[1].1.server_id().to_owned();
    // A crash: the peer's endpoint record stays until its TTL, its port is closed.
    let (_, b) = cluster.servers.remove(1);
    b.kill().await;
    let reply = a.get(JOBS).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");
    assert!(reply.text().ends_with('\n'), "{}", reply.text());

    // Once the address is gone (TTL lapsed), the peer is still known but cannot be resolved.
    cluster
        .store
        .delete_internal(&format!(
            "{}{b_id}",
            apiserver_fake::controllers::peer_endpoint::PREFIX
        ))
        .await
        .unwrap();
    let status = support::eventually("the address to be forgotten", Duration::from_secs(5), || async {
        let reply = a.get(JOBS).await;
        reply
            .headers
            .get("content-type")
            .is_some_and(|c| c == "application/json")
            .then_some(reply)
    })
    .await;
    assert_eq!(status.status, StatusCode::SERVICE_UNAVAILABLE);
    let body = status.json();
    assert_eq!(
        body["message"],
        "Error getting ip and port info of the remote server while proxying"
    );
    assert_eq!(body["reason"], "ServiceUnavailable");
    assert!(body.get("details").is_none());
}

#[tokio::test]
async fn a_wrong_peer_ca_gives_503() {
    let dir = tempfile::tempdir().unwrap();
    let wrong_ca = format!(
        "--peer-ca-file={}",
        dir.path().join("front-proxy-ca.crt").display()
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = apiserver_fake::cluster::launch_cluster(
        Some(dir.path().to_owned()),
        seed_members(&[&wrong_ca], &[]),
        0,
    )
    .await
    .unwrap();
    let a = TestClient::admin(&cluster, 0);
    // Discovery of the peer fails too (same TLS check): the peers never get to know each other, and
    // requests are not served: either no peer is known (404) or the handshake fails (503).
    let converged = cluster
        .wait_until_peers_know_each_other(Duration::from_millis(500))
        .await;
    assert!(converged.is_err(), "{converged:?}");
    let reply = a.get(JOBS).await;
    assert_ne!(reply.status, StatusCode::OK, "{}", reply.text());
    let metrics = a.get("/metrics").await.text();
    assert!(
        metrics.contains("apiserver_peer_discovery_sync_errors_total{type=\"fetch_discovery\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_proxy_certificate_with_a_disallowed_cn_is_rejected_by_the_peer() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = apiserver_fake::cluster::launch_cluster(
        None,
        seed_members(&[], &["--requestheader-allowed-names=someone-else"]),
        0,
    )
    .await
    .unwrap();
    let a = TestClient::admin(&cluster, 0);
    // b rejects a's front-proxy identity, so a cannot even fetch b's discovery as system:apiserver:
    // b answers 401 and a learns nothing about batch/v1. First the proof that a tried: its fetch of
    // b's discovery failed.
    eventually(
        "a's attempt to fetch b's discovery to fail",
        Duration::from_secs(10),
        || async {
            a.get("/metrics")
                .await
                .text()
                .contains("apiserver_peer_discovery_sync_errors_total{type=\"fetch_discovery\"}")
                .then_some(())
        },
    )
    .await;
    let reply = a.get(JOBS).await;
    assert_ne!(reply.status, StatusCode::OK);
    let log = cluster.servers[1].1.served_requests();
    assert!(log.iter().all(|r| r.user.name != "system:apiserver"), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_request_to_a_hung_peer_times_out_with_504() {
    let cluster = cluster(seed_members(&["--request-timeout=3s"], &[])).await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;
    let hole = hang_peer(&cluster).await;
    for (path, within) in [
        (format!("{JOBS}?timeout=500ms"), Duration::from_millis(2500)),
        // Go's micro sign (U+00B5) as a unit: 500 ms.
        (
            format!("{JOBS}?timeout=500000%C2%B5s"),
            Duration::from_millis(2500),
        ),
        (JOBS.to_owned(), Duration::from_secs(5)),
    ] {
        let started = std::time::Instant::now();
        let reply = a.get(&path).await;
        let took = started.elapsed();
        assert_eq!(
            reply.status,
            StatusCode::GATEWAY_TIMEOUT,
            "{path}: {}",
            reply.text()
        );
        let status = reply.json();
        assert_eq!(
            status["message"],
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
        );
        assert_eq!(status["reason"], "Timeout");
        assert!(took < within, "{path} answered after {took:?}");
    }
    let bad = a.get(&format!("{JOBS}?timeout=soon")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        bad.json()["message"],
        "invalid timeout specified in the request URL - time: invalid duration \"soon\""
    );
    // A unit Go does not know, quoted as Go quotes non-ASCII text.
    let bad = a.get(&format!("{JOBS}?timeout=1%C3%A9")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        bad.json()["message"],
        "invalid timeout specified in the request URL - time: unknown unit \"\\xc3\\xa9\" in duration \"1\\xc3\\xa9\""
    );
    drop(hole);
}

/// Points `a`'s view of `b` at a socket that accepts connections and never answers: a hung peer.
/// Keep the listener alive as long as the peer should hang.
async fn hang_peer(cluster: &apiserver_fake::cluster::Cluster) -> tokio::net::TcpListener {
    let hole = tokio::net::TcpListener::bind("127.0.0.3:0").await.unwrap();
    let b_id = cluster.servers[1].1.server_id().to_owned();
    cluster
        .store
        .put_internal(
            &format!("{}{b_id}", apiserver_fake::controllers::peer_endpoint::PREFIX),
            apiserver_fake::controllers::peer_endpoint::endpoint_record(&b_id, hole.local_addr().unwrap()),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let a_endpoints = cluster.servers[0].1.proxy_endpoints().unwrap();
    let hole_addr = hole.local_addr().unwrap().to_string();
    eventually(
        "a's endpoint cache to take the new address",
        Duration::from_secs(5),
        || async { (a_endpoints.endpoint(&b_id).as_deref() == Some(hole_addr.as_str())).then_some(()) },
    )
    .await;

    hole
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_max_requests_inflight_gets_429_except_for_system_masters() {
    let cluster = cluster(seed_members(
        &[
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=1",
            "--request-timeout=3s",
        ],
        &[],
    ))
    .await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;
    let jane_cert = cluster
        .pki()
        .issue_client_cert(certs::Issuer::ClusterCa, "jane", &[])
        .unwrap();
    let (cert, key) = (cluster.dir.join("jane.crt"), cluster.dir.join("jane.key"));
    jane_cert.write_to(&cert, &key).unwrap();
    let jane = TestClient::new(
        &cluster.servers[0].1.url(),
        &cluster.dir.join("ca.crt"),
        Some((&cert, &key)),
    );
    let _hole = hang_peer(&cluster).await;
    // Jane's proxied list hangs on the peer and holds a's only read-only slot until it times out
    // (seen from outside: her next request is refused).
    let hung = tokio::spawn({
        let jane = jane.clone();
        async move {
            // Her probes below can hold the slot at the moment this list arrives, which then is the
            // one refused: it is sent again until it is let in (and hangs).
            loop {
                let status = jane.get(JOBS).await.status;
                if status != StatusCode::TOO_MANY_REQUESTS {
                    return status;
                }
            }
        }
    });
    let refused = eventually("jane's list to hold the slot", Duration::from_secs(2), || {
        let jane = jane.clone();
        async move {
            let reply = jane.get("/api/v1/namespaces").await;
            (reply.status == StatusCode::TOO_MANY_REQUESTS).then_some(reply)
        }
    })
    .await;
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.text(), "Too many requests, please try again later.\n");
    assert_eq!(
        a.get("/api/v1/namespaces").await.status,
        StatusCode::OK,
        "system:masters is never limited"
    );
    assert_eq!(hung.await.unwrap(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        jane.get("/api/v1/namespaces").await.status,
        StatusCode::OK,
        "the slot is free again"
    );
}

/// API Priority and Fairness (the default): with one seat for `global-default` (1 + 0 in flight), a
/// request of Jane's waits in her queue while her hung proxied list holds the seat, and gets 429 once it
/// has waited a quarter of its deadline; `system:masters` and `/readyz` (the `exempt` level) are served
/// meanwhile; the seat is free again once the hung request times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fairness_queues_then_answers_429_and_exempts_masters_and_probes() {
    let cluster = cluster(seed_members(
        &[
            "--max-requests-inflight=1",
            "--max-mutating-requests-inflight=0",
            "--request-timeout=2s",
        ],
        &[],
    ))
    .await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;
    let jane_cert = cluster
        .pki()
        .issue_client_cert(certs::Issuer::ClusterCa, "jane", &[])
        .unwrap();
    let (cert, key) = (cluster.dir.join("jane.crt"), cluster.dir.join("jane.key"));
    jane_cert.write_to(&cert, &key).unwrap();
    let jane = TestClient::new(
        &cluster.servers[0].1.url(),
        &cluster.dir.join("ca.crt"),
        Some((&cert, &key)),
    );
    let _hole = hang_peer(&cluster).await;
    let hung = tokio::spawn({
        let jane = jane.clone();
        async move { jane.get(JOBS).await.status }
    });
    // Jane's hung list holds the level's one seat (seen from outside: her next request is refused).
    let refused = eventually("jane's list to hold the seat", Duration::from_secs(2), || {
        let jane = jane.clone();
        async move {
            let started = std::time::Instant::now();
            let reply = jane.get("/api/v1/namespaces").await;
            (reply.status == StatusCode::TOO_MANY_REQUESTS).then_some((reply, started.elapsed()))
        }
    })
    .await;
    let (refused, waited) = refused;
    assert!(
        waited >= Duration::from_millis(500),
        "waited a quarter of the 2 s deadline in its queue first: {waited:?}"
    );
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.text(), "Too many requests, please try again later.\n");
    assert_eq!(
        jane.get("/readyz").await.status,
        StatusCode::OK,
        "probes are exempt"
    );
    assert_eq!(
        a.get("/api/v1/namespaces").await.status,
        StatusCode::OK,
        "system:masters is exempt"
    );
    assert_eq!(hung.await.unwrap(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        jane.get("/api/v1/namespaces").await.status,
        StatusCode::OK,
        "the seat is free again"
    );
}
