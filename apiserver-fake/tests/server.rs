//! The server over real TLS: authentication, health, version, identity leases.

mod support;

use http::{Method, StatusCode};
use support::{TestClient, cluster, member};

#[tokio::test]
async fn unauthenticated_requests_get_401_status_but_health_is_public() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let anonymous = TestClient::anonymous(&cluster, 0);
    let reply = anonymous.get("/api/v1/namespaces/default/pods").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let status = reply.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Unauthorized");
    assert_eq!(status["code"], 401);
    for path in ["/healthz", "/livez", "/readyz"] {
        let reply = anonymous.get(path).await;
        assert_eq!(
            (reply.status, reply.text().as_str()),
            (StatusCode::OK, "ok"),
            "{path}"
        );
    }
    assert_eq!(anonymous.get("/version").await.json()["minor"], "36");
}

/// As kube-apiserver (`tls.RequestClientCert`): a certificate from a CA the server does not trust
/// passes the handshake and gets a 401 `Status` from the authenticator, not a TLS alert; with a
/// valid bearer token beside it the request is authenticated by the token.
#[tokio::test]
async fn a_client_certificate_from_an_unknown_ca_is_a_401_status_not_a_failed_handshake() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    let stranger = certs::Pki::generate(&certs::PkiSpec::new([certs::ServerSpec::new("x", [ip])])).unwrap();
    let (_dir, paths) = stranger.write_to_tempdir().unwrap();
    let client = TestClient::new(
        &cluster.servers[0].1.url(),
        &cluster.dir.join("ca.crt"),
        Some((&paths.admin_cert, &paths.admin_key)),
    );
    let reply = client.get("/api/v1/namespaces").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let status = reply.json();
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("Unauthorized"))
    );

    let token = std::fs::read_to_string(cluster.dir.join("token")).unwrap();
    let bearer = format!("Bearer {token}");
    let with_token = client
        .send(
            Method::GET,
            "/api/v1/namespaces",
            &[("authorization", &bearer)],
            None,
        )
        .await;
    assert_eq!(with_token.status, StatusCode::OK);
}

/// kube-apiserver's `MaxHeaderBytes` (1 MiB) over both protocols: large tokens pass, and so do 5,000 fields
/// over HTTP/2 (which counts bytes only, as Go does) and 4,096 over HTTP/1.1 (the fake's field limit; one
/// more gets 431); beyond the byte limit HTTP/1.1 answers 431, whether the head is one large field or many
/// small ones.
#[tokio::test]
async fn request_headers_up_to_a_mebibyte_are_read_over_both_protocols() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let url = cluster.servers[0].1.url();
    let ca = cluster.dir.join("ca.crt");
    let big = "x".repeat(600 * 1024);
    let many = |count: usize| -> Vec<(String, String)> {
        (0..count)
            .map(|i| (format!("x-field-{i}"), "v".to_owned()))
            .collect()
    };
    // The client adds `Host` to these.
    for (client, fields, status) in [
        (TestClient::new(&url, &ca, None), 5000, StatusCode::OK),
        (TestClient::http1(&url, &ca, None), 4000, StatusCode::OK),
        (
            TestClient::http1(&url, &ca, None),
            4097,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        ),
    ] {
        let reply = client
            .send(Method::GET, "/version", &[("x-big", big.as_str())], None)
            .await;
        assert_eq!(reply.status, StatusCode::OK);
        let many = many(fields);
        let headers: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            client.send(Method::GET, "/version", &headers, None).await.status,
            status,
            "{fields} fields"
        );
    }
    let too_big = "x".repeat(2 * 1024 * 1024);
    let reply = TestClient::http1(&url, &ca, None)
        .send(Method::GET, "/version", &[("x-big", too_big.as_str())], None)
        .await;
    assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    // 2 MB in 2,000 fields of 1 KiB: over the limit too, however the head arrives (hyper refuses a head
    // that overflows its buffer; one that fits it whole is measured after parsing, with Go's answer).
    let kib = "y".repeat(1024);
    let fields: Vec<(String, &str)> = (0..2000).map(|i| (format!("x-kib-{i}"), kib.as_str())).collect();
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let reply = TestClient::http1(&url, &ca, None)
        .send(Method::GET, "/version", &fields, None)
        .await;
    assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(
        ["", "431 Request Header Fields Too Large"].contains(&reply.text().as_str()),
        "{}",
        reply.text()
    );
}

#[tokio::test]
async fn x509_token_and_whoami_identify_the_caller() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let whoami = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let admin = TestClient::admin(&cluster, 0);
    let reply = admin
        .post("/apis/authentication.k8s.io/v1/selfsubjectreviews", whoami)
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let user = reply.json()["status"]["userInfo"].clone();
    assert_eq!(user["username"], "admin");
    assert_eq!(
        user["groups"],
        serde_json::json!(["system:masters", "system:authenticated"])
    );

    let token = std::fs::read_to_string(cluster.dir.join("token")).unwrap();
    let anonymous = TestClient::anonymous(&cluster, 0);
    let bearer = format!("Bearer {token}");
    let reply = anonymous
        .send(
            Method::POST,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &[("authorization", &bearer)],
            Some(whoami),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.json()["status"]["userInfo"]["username"], "admin");
    let wrong = anonymous
        .send(
            Method::GET,
            "/api/v1/pods",
            &[("authorization", "Bearer nope")],
            None,
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn spoofed_identity_headers_from_an_ordinary_client_are_ignored() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let admin = TestClient::admin(&cluster, 0);
    let reply = admin
        .send(
            Method::POST,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &[("x-remote-user", "mallory"), ("x-remote-group", "system:masters")],
            Some(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#),
        )
        .await;
    assert_eq!(reply.json()["status"]["userInfo"]["username"], "admin");
    let log = cluster.servers[0].1.served_requests();
    assert!(log.iter().all(|r| r.user.name == "admin"), "{log:?}");
}

#[tokio::test]
async fn front_proxy_client_is_believed_only_with_an_allowed_cn() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let dir = &cluster.dir;
    let front_proxy = TestClient::new(
        &cluster.servers[0].1.url(),
        &dir.join("ca.crt"),
        Some((
            &dir.join("front-proxy-client.crt"),
            &dir.join("front-proxy-client.key"),
        )),
    );
    let reply = front_proxy
        .send(
            Method::POST,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &[
                ("x-remote-user", "alice"),
                ("x-remote-group", "devs"),
                ("x-remote-extra-scopes", "a"),
            ],
            Some(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let user = reply.json()["status"]["userInfo"].clone();
    assert_eq!(user["username"], "alice");
    assert_eq!(
        user["groups"],
        serde_json::json!(["devs", "system:authenticated"])
    );
    assert_eq!(user["extra"]["scopes"], serde_json::json!(["a"]));
}

#[tokio::test]
async fn identity_lease_is_published_and_removed_on_graceful_shutdown() {
    let mut cluster = cluster(vec![member("a", 1, "1.36", &[]), member("b", 2, "1.36", &[])]).await;
    let admin = TestClient::admin(&cluster, 1);
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver";
    let leases = admin.get(path).await.json();
    let mut names: Vec<String> = leases["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    let mut expected = vec![
        apiserver_fake::controllers::identity::server_id("a"),
        apiserver_fake::controllers::identity::server_id("b"),
    ];
    expected.sort();
    assert_eq!(names, expected);
    let a_id = cluster.servers[0].1.server_id().to_owned();
    let lease = admin
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{a_id}"
        ))
        .await
        .json();
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{a_id}_"))
    );
    assert_eq!(lease["metadata"]["labels"]["kubernetes.io/hostname"], "a");

    let (_, a) = cluster.servers.remove(0);
    a.shutdown().await;
    let gone = admin
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{a_id}"
        ))
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let admin = TestClient::admin(&cluster, 0);
    admin.get("/api/v1/namespaces/default/configmaps").await;
    let reply = admin.get("/metrics").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    assert!(reply.text().contains("apiserver_request_total{code=\"200\",group=\"\",resource=\"configmaps\",verb=\"list\",version=\"v1\"} 1"), "{}", reply.text());
}

/// A request with a body that the server answers without reading it (a 405 for a verb the route does
/// not take, a 401 before authentication passes) gets its answer, over HTTP/2 and HTTP/1.1: the server
/// reads the rest of the body first, as Go's server does, instead of resetting the stream (closing the
/// connection) while the client is still sending. curl (nghttp2) is the client that shows it: before,
/// about half of these requests ended in `Stream error in the HTTP/2 framing layer`. The body is larger
/// than HTTP/2's initial flow-control window. Skipped without curl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_answers_to_requests_with_bodies_reach_curl_over_http2_and_http1() {
    if !support::curl_available() {
        return;
    }
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let dir = cluster.dir.clone();
    let url = cluster.servers[0].1.url();
    let body = dir.join("big.json");
    std::fs::write(
        &body,
        format!(r#"{{"data":{{"big":"{}"}}}}"#, "x".repeat(300 * 1024)),
    )
    .unwrap();
    let curl = move |protocol: &'static str, authenticated: bool, path: &'static str| {
        let (dir, url, body) = (dir.clone(), url.clone(), body.clone());
        tokio::task::spawn_blocking(move || {
            let mut command = support::curl_status(&dir, protocol);
            command
                .args(["-X", "POST", "--data-binary"])
                .arg(format!("@{}", body.display()))
                .arg(format!("{url}{path}"));
            if authenticated {
                support::curl_as_admin(&mut command, &dir);
            }
            let output = command.output().expect("curl runs");
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })
    };
    for attempt in 0..50 {
        let answer = curl("--http2", true, "/api/v1/namespaces/default/configmaps/x")
            .await
            .unwrap();
        assert_eq!(answer, "405 2", "attempt {attempt}");
    }
    for attempt in 0..20 {
        let answer = curl("--http1.1", true, "/api/v1/namespaces/default/configmaps/x")
            .await
            .unwrap();
        assert_eq!(answer, "405 1.1", "attempt {attempt}");
        let answer = curl("--http2", false, "/api/v1/namespaces/default/configmaps")
            .await
            .unwrap();
        assert_eq!(answer, "401 2", "attempt {attempt}");
    }
}
