//! Proxied long-running requests never starve the others: with 1,000 proxied watches open from the
//! server without `batch/v1` to its peer (as many as the concurrent streams one HTTP/2 connection
//! allows), ordinary proxied requests are still answered at once; and one client connection carries
//! more watches than hyper's default stream limit.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use support::{JOBS, TestClient, cluster, seed_members, wait_for_proxy};

const WATCHES: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_proxied_watches_leave_other_proxied_requests_fast() {
    let cluster = cluster(seed_members(&[], &[])).await;
    let a = TestClient::admin(&cluster, 0);
    wait_for_proxy(&a).await;

    // Watches as many clients would open them: HTTP/1.1, a connection each.
    let dir = &cluster.dir;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(dir.join("ca.crt")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let certs: Vec<_> = CertificateDer::pem_file_iter(dir.join("admin.crt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("admin.key")).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .unwrap();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .build();
    let watcher: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let url = format!("{}{JOBS}?watch=1", cluster.servers[0].1.url());
    let limit = Arc::new(tokio::sync::Semaphore::new(64));
    let mut opening = tokio::task::JoinSet::new();
    for _ in 0..WATCHES {
        let (watcher, url, limit) = (watcher.clone(), url.clone(), limit.clone());
        opening.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            let req = Request::get(&url).body(Full::default()).unwrap();
            tokio::time::timeout(Duration::from_secs(60), watcher.request(req)).await
        });
    }
    let mut open = Vec::with_capacity(WATCHES);
    while let Some(watch) = opening.join_next().await {
        let response = watch
            .unwrap()
            .expect("the watch gets its headers within 60 s")
            .expect("the watch is answered");
        assert_eq!(response.status(), StatusCode::OK);
        open.push(response); // its body stays open: the watch goes on
    }

    let mut slowest = Duration::ZERO;
    for _ in 0..50 {
        let started = Instant::now();
        let reply = tokio::time::timeout(Duration::from_secs(10), a.get(JOBS))
            .await
            .expect("a proxied list is answered while the watches are open");
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        slowest = slowest.max(started.elapsed());
    }
    assert!(
        slowest < Duration::from_secs(2),
        "ordinary proxied requests wait behind watches: slowest {slowest:?}"
    );
    assert_eq!(open.len(), WATCHES);
}

/// One client connection, as client-go shares one HTTP/2 connection per server: with 300 watches open
/// on it (more than hyper's default of 200 concurrent streams, within kube-apiserver's 1,000), the
/// same connection still carries other requests at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_http2_connection_carries_three_hundred_watches_and_more_requests() {
    let cluster = cluster(seed_members(&[], &[])).await;
    let b = TestClient::admin(&cluster, 1);
    let mut watches = Vec::new();
    for _ in 0..300 {
        let reply = tokio::time::timeout(
            Duration::from_secs(10),
            b.open(http::Method::GET, &format!("{JOBS}?watch=1"), &[], None),
        )
        .await
        .expect("the watch gets its headers");
        assert_eq!(reply.status(), StatusCode::OK);
        assert_eq!(reply.version(), http::Version::HTTP_2);
        watches.push(reply);
    }
    let started = Instant::now();
    let listed = tokio::time::timeout(Duration::from_secs(5), b.get(JOBS))
        .await
        .expect("answered beside 300 open watches");
    assert_eq!(listed.status, StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
