//! Forwarding over real mTLS on 127.0.0.1: a tiny hyper server plays the peer apiserver.

mod support;

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use mvp_core::{
    DiscoveryConfig, GroupVersionResource, Lease, LocalServedResources, MetricsGeneration, MvpLayer,
    MvpMetrics, PeerEndpoints, PeerResolutionMode, PeerResolver, PeerTransport, RequestHeaderAuthenticator,
    UserInfo,
};
use serde_json::{Value, json};
use support::{Peer, PeerBody, PeerRequest, Pki, full, start_peer};
use tower::{Layer, ServiceExt};

struct Endpoints(HashMap<String, String>);

impl PeerEndpoints for Endpoints {
    fn endpoint(&self, id: &str) -> Option<String> {
        self.0.get(id).cloned()
    }
}

fn jobs_list_discovery() -> Value {
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
           "items": [{"metadata": {"name": "batch"},
                      "versions": [{"version": "v1", "resources": [{"resource": "jobs"}]}]}]})
}

/// Who serves what: "a" serves `v1 pods`, its only peer "b" serves `batch/v1 jobs`.
struct JobsOnB;

impl LocalServedResources for JobsOnB {
    fn serves_locally(&self, gvr: &GroupVersionResource) -> bool {
        *gvr == GroupVersionResource::new("", "v1", "pods")
    }
}

impl PeerResolver for JobsOnB {
    fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String> {
        if *gvr == GroupVersionResource::new("batch", "v1", "jobs") {
            vec!["b".to_owned()]
        } else {
            Vec::new()
        }
    }
}

/// A source server "a" whose only peer "b" (at `peer`) serves batch/v1 jobs.
fn layer(pki: &Pki, peer: &Peer, registry: &prometheus::Registry) -> MvpLayer {
    let endpoints = Arc::new(Endpoints(HashMap::from([(
        "b".to_owned(),
        peer.addr.to_string(),
    )])));
    let transport = PeerTransport::new(&pki.peer_tls("misty")).unwrap();
    let metrics = MvpMetrics::register(registry, MetricsGeneration::V1_36).unwrap();
    MvpLayer::builder("a", endpoints, transport)
        .metrics(metrics)
        .resolver(PeerResolutionMode::Discovery, Arc::new(JobsOnB))
}

fn local_inner() -> impl tower::Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send,
> + Clone {
    tower::service_fn(|_req: Request<Full<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"local"))))
    })
}

fn alice() -> UserInfo {
    let mut u = UserInfo::new("alice");
    u.uid = "uid-1".into();
    u.groups = vec!["devs".into(), "system:authenticated".into()];
    u.extra.insert("scopes".into(), vec!["a".into(), "b".into()]);
    u
}

/// The peer echoes what it saw, including the requestheader authentication result.
async fn echo(p: PeerRequest, auth: Option<RequestHeaderAuthenticator>) -> Response<PeerBody> {
    let auth = auth.map(|a| a.authenticate(&p.client_chain, p.req.headers()));
    let headers: Vec<(String, String)> = p
        .req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let user = match auth {
        Some(Ok(Some(u))) => json!({"name": u.name, "uid": u.uid, "groups": u.groups, "extra": u.extra}),
        Some(Ok(None)) => json!(null),
        Some(Err(e)) => json!(e.to_string()),
        None => json!(null),
    };
    let body = json!({
        "method": p.req.method().as_str(),
        "uri": p.req.uri().to_string(),
        "version": format!("{:?}", p.req.version()),
        "headers": headers,
        "user": user,
        "body": String::from_utf8(p.req.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap(),
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(full(body.to_string()))
        .unwrap()
}

async fn call(layer: &MvpLayer, req: Request<Full<Bytes>>) -> (StatusCode, http::HeaderMap, Bytes) {
    let resp = layer.layer(local_inner()).oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes(),
    )
}

fn header_values<'a>(echo: &'a Value, name: &str) -> Vec<&'a str> {
    echo["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h[0] == name)
        .map(|h| h[1].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_to_peer_over_mtls_h2_with_forwarded_identity() {
    let pki = Pki::new();
    let auth = pki.requestheader(&["ash", "misty", "brock"]);
    let peer = start_peer(&pki, pki.serving(), &[b"h2", b"http/1.1"], move |p| {
        echo(p, Some(auth.clone()))
    })
    .await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let mut req = Request::get("/apis/batch/v1/namespaces/default/jobs?watch=false&b=2&a=1")
        .header("authorization", "Bearer secret")
        .header("impersonate-user", "bob")
        .header("x-remote-user", "mallory")
        .header("audit-id", "audit-123")
        .header("accept", "application/json")
        .body(Full::default())
        .unwrap();
    req.extensions_mut().insert(alice());
    let (status, _, body) = call(&layer, req).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let echo: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(echo["version"], "HTTP/2.0", "h2 negotiated via ALPN");
    assert_eq!(
        echo["uri"],
        format!(
            "https://{}/apis/batch/v1/namespaces/default/jobs?a=1&b=2&watch=false",
            peer.addr
        )
    );
    assert_eq!(
        echo["user"],
        json!({"name": "alice", "uid": "uid-1", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["a", "b"]}})
    );
    assert!(header_values(&echo, "authorization").is_empty());
    assert!(header_values(&echo, "impersonate-user").is_empty());
    assert_eq!(header_values(&echo, "x-remote-user"), ["alice"]);
    assert_eq!(header_values(&echo, "audit-id"), ["audit-123"]);
    assert_eq!(header_values(&echo, "accept"), ["application/json"]);
    assert_eq!(header_values(&echo, "x-kubernetes-peer-proxied"), ["true"]);
    let labels = [
        ("code", "200"),
        ("group", "batch"),
        ("version", "v1"),
        ("resource", "jobs"),
    ];
    assert_eq!(counter(&registry, "apiserver_rerouted_request_total", &labels), 1);
}

/// An embedder that knows the client's address (from its accept loop) puts `RemoteAddr` into the
/// request's extensions; the peer then gets `X-Forwarded-For` as from Go's `httputil.ReverseProxy`:
/// the prior hops, then the client. Without it the header passes through as the client sent it.
#[tokio::test]
async fn the_client_address_an_embedder_provides_is_forwarded_as_x_forwarded_for() {
    let pki = Pki::new();
    let peer = start_peer(&pki, pki.serving(), &[b"http/1.1"], |p| echo(p, None)).await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let request = |forwarded: Option<&str>, remote: Option<&str>| {
        let mut builder = Request::get("/apis/batch/v1/namespaces/default/jobs");
        if let Some(forwarded) = forwarded {
            builder = builder.header("x-forwarded-for", forwarded);
        }
        let mut req = builder.body(Full::default()).unwrap();
        req.extensions_mut().insert(alice());
        if let Some(remote) = remote {
            req.extensions_mut()
                .insert(mvp_core::RemoteAddr(remote.parse().unwrap()));
        }
        req
    };
    for (forwarded, remote, expected) in [
        (None, Some("192.0.2.7:50123"), vec!["192.0.2.7"]),
        (
            Some("10.0.0.1"),
            Some("[2001:db8::5]:443"),
            vec!["10.0.0.1, 2001:db8::5"],
        ),
        (Some("10.0.0.1"), None, vec!["10.0.0.1"]),
        (None, None, vec![]),
    ] {
        let (status, _, body) = call(&layer, request(forwarded, remote)).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let echo: Value = serde_json::from_slice(&body).unwrap();
        // The request reached the peer (what it saw is echoed), with exactly this header.
        assert_eq!(header_values(&echo, "x-kubernetes-peer-proxied"), ["true"]);
        assert_eq!(
            header_values(&echo, "x-forwarded-for"),
            expected,
            "client {remote:?} behind {forwarded:?}"
        );
    }
}

/// `serve_tls` is such an embedder: a request proxied through a server it runs reaches the peer with
/// the client's address (that of the client's own socket) in `X-Forwarded-For`, and with the user of
/// the client's certificate.
#[cfg(feature = "server")]
#[tokio::test]
async fn a_server_started_with_serve_tls_forwards_the_client_address() {
    let pki = Pki::new();
    let peer = start_peer(&pki, pki.serving(), &[b"http/1.1"], |p| echo(p, None)).await;
    let registry = prometheus::Registry::new();
    let local = tower::service_fn(|_req: Request<hyper::body::Incoming>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"local"))))
    });
    let app = layer(&pki, &peer, &registry).layer(local);
    // The server: the cluster CA's serving certificate; client certificates of the cluster CA.
    let cluster_roots = || {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.cluster_ca.cert_der()).unwrap();
        Arc::new(roots)
    };
    let verifier = rustls::server::WebPkiClientVerifier::builder(cluster_roots())
        .build()
        .unwrap();
    let (chain, key) = pki.serving();
    let mut config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_addr = listener.local_addr().unwrap();
    let server = tokio::spawn(mvp_core::serve_tls(listener, config, app));

    // The client: alice's certificate, over HTTP/1.1; the address the server sees is its socket's.
    let (client_chain, client_key) = pki.cluster_ca.client("alice", &["devs"]);
    let client_config = rustls::ClientConfig::builder()
        .with_root_certificates(cluster_roots())
        .with_client_auth_cert(client_chain, client_key)
        .unwrap();
    let tcp = tokio::net::TcpStream::connect(server_addr).await.unwrap();
    let client_addr = tcp.local_addr().unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(client_config))
        .connect("kubernetes.default.svc".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::get("/apis/batch/v1/namespaces/default/jobs")
        .header("host", "kubernetes.default.svc")
        .body(Full::<Bytes>::default())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let echo: Value = serde_json::from_slice(&body).unwrap();
    // The request reached the peer through the proxy (what the peer saw is echoed).
    assert_eq!(header_values(&echo, "x-kubernetes-peer-proxied"), ["true"]);
    assert_eq!(
        header_values(&echo, "x-forwarded-for"),
        [client_addr.ip().to_string()]
    );
    assert_eq!(header_values(&echo, "x-remote-user"), ["alice"]);
    server.abort();
}

#[tokio::test]
async fn h1_only_peer_gets_http11_even_when_caller_spoke_h2() {
    let pki = Pki::new();
    let peer = start_peer(&pki, pki.serving(), &[b"http/1.1"], |p| echo(p, None)).await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let mut req = Request::post("https://source:6443/apis/batch/v1/namespaces/default/jobs")
        .version(http::Version::HTTP_2)
        .body(Full::new(Bytes::from_static(b"{\"kind\":\"Job\"}")))
        .unwrap();
    req.extensions_mut().insert(alice());
    let (status, _, body) = call(&layer, req).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let echo: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(echo["version"], "HTTP/1.1");
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["body"], "{\"kind\":\"Job\"}");
    assert_eq!(header_values(&echo, "host"), [peer.addr.to_string().as_str()]);
}

#[tokio::test]
async fn peer_error_status_is_relayed_unchanged() {
    let pki = Pki::new();
    let status_body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"jobs.batch \"x\" not found","reason":"NotFound","details":{"name":"x","group":"batch","kind":"jobs"},"code":404}"#;
    let peer = start_peer(&pki, pki.serving(), &[b"h2"], move |_p| async move {
        Response::builder()
            .status(404)
            .header("content-type", "application/json")
            .header("x-peer", "b")
            .body(full(status_body))
            .unwrap()
    })
    .await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let mut req = Request::get("/apis/batch/v1/namespaces/default/jobs/x")
        .body(Full::default())
        .unwrap();
    req.extensions_mut().insert(alice());
    let (status, headers, body) = call(&layer, req).await;
    assert_eq!(status, 404);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-peer"], "b");
    assert_eq!(body, status_body.as_bytes());
    let labels = [
        ("code", "404"),
        ("group", "batch"),
        ("version", "v1"),
        ("resource", "jobs"),
    ];
    assert_eq!(counter(&registry, "apiserver_rerouted_request_total", &labels), 1);
}

#[tokio::test]
async fn watch_events_stream_through_while_the_peer_keeps_the_stream_open() {
    let pki = Pki::new();
    let (event_tx, mut event_rx) = tokio::sync::mpsc::channel::<tokio::sync::mpsc::Sender<Bytes>>(1);
    let peer = start_peer(&pki, pki.serving(), &[b"h2", b"http/1.1"], move |_p| {
        let event_tx = event_tx.clone();
        async move {
            let (tx, body) = support::channel_body();
            event_tx.send(tx).await.unwrap();
            Response::builder()
                .header("content-type", "application/json")
                .body(body)
                .unwrap()
        }
    })
    .await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let mut req = Request::get("/apis/batch/v1/namespaces/default/jobs?watch=1")
        .body(Full::default())
        .unwrap();
    req.extensions_mut().insert(alice());
    let resp = layer.layer(local_inner()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let events = event_rx.recv().await.unwrap();
    let mut body = resp.into_body();
    for i in 0..3 {
        let event = format!("{{\"type\":\"ADDED\",\"object\":{{\"n\":{i}}}}}\n");
        events.send(Bytes::from(event.clone())).await.unwrap();
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("event in time");
        let data = frame.unwrap().unwrap().into_data().unwrap();
        assert_eq!(
            data,
            event.as_bytes(),
            "event {i} arrives while the stream is open"
        );
    }
    drop(events);
    let rest = tokio::time::timeout(Duration::from_secs(5), body.collect())
        .await
        .unwrap()
        .unwrap();
    assert!(rest.to_bytes().is_empty(), "stream ends when the peer ends it");
}

#[tokio::test]
async fn peer_signed_by_unknown_ca_is_503_text() {
    let pki = Pki::new();
    let other = Pki::new();
    let peer = start_peer(&pki, other.serving(), &[b"h2"], |p| echo(p, None)).await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let mut req = Request::get("/apis/batch/v1/jobs").body(Full::default()).unwrap();
    req.extensions_mut().insert(alice());
    let (status, headers, body) = call(&layer, req).await;
    assert_eq!(status, 503);
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    // Both test CAs are named "kubernetes", so webpki reports a bad signature rather than
    // an unknown issuer; Go calls both an unknown authority. The handshake fails before any
    // request is sent.
    assert_eq!(
        text,
        "tls: failed to verify certificate: x509: certificate signed by unknown authority\n"
    );
    let labels = [
        ("code", "503"),
        ("group", "batch"),
        ("version", "v1"),
        ("resource", "jobs"),
    ];
    assert_eq!(counter(&registry, "apiserver_rerouted_request_total", &labels), 1);
}

#[tokio::test]
async fn peer_cert_without_kubernetes_default_svc_is_rejected() {
    let pki = Pki::new();
    let peer = start_peer(
        &pki,
        pki.serving_with_sans(&["127.0.0.1", "localhost"]),
        &[b"h2"],
        |p| echo(p, None),
    )
    .await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let mut req = Request::get("/apis/batch/v1/jobs").body(Full::default()).unwrap();
    req.extensions_mut().insert(alice());
    let (status, _, body) = call(&layer, req).await;
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    let text = String::from_utf8_lossy(&body);
    assert_eq!(
        text,
        "tls: failed to verify certificate: x509: certificate is valid for localhost, \
         not kubernetes.default.svc\n"
    );
}

#[tokio::test]
async fn locally_served_requests_never_reach_the_peer() {
    let pki = Pki::new();
    let peer = start_peer(&pki, pki.serving(), &[b"h2"], |_p| async {
        panic!("must not be called")
    })
    .await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    for path in [
        "/api/v1/pods",
        "/apis/apps/v1/deployments",
        "/apis/batch/v1",
        "/healthz",
    ] {
        let mut req = Request::get(path).body(Full::default()).unwrap();
        req.extensions_mut().insert(alice());
        assert_eq!(call(&layer, req).await.2, "local", "{path}");
    }
}

#[tokio::test]
async fn discovery_sync_fetches_peer_api_and_apis_as_system_apiserver() {
    let pki = Pki::new();
    let auth = pki.requestheader(&[]);
    let peer = start_peer(&pki, pki.serving(), &[b"h2", b"http/1.1"], move |p| {
        let auth = auth.clone();
        async move {
            let user = auth
                .authenticate(&p.client_chain, p.req.headers())
                .unwrap()
                .unwrap();
            assert_eq!(user.name, "system:apiserver");
            assert_eq!(user.groups, ["system:authenticated"]);
            assert_eq!(
                p.req.headers()["accept"],
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer,\
                 application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
                "nopeer, then v2, then v1"
            );
            let doc = match p.req.uri().path() {
                "/api" => json!({"kind": "APIGroupDiscoveryList", "items": [{"metadata": {"name": ""},
                        "versions": [{"version": "v1", "resources": [{"resource": "pods"}]}]}]}),
                "/apis" => jobs_list_discovery(),
                _ => {
                    return Response::builder()
                        .status(404)
                        .body(full("404 page not found\n"))
                        .unwrap();
                }
            };
            Response::new(full(doc.to_string()))
        }
    })
    .await;
    let endpoints = Arc::new(Endpoints(HashMap::from([
        ("b".to_owned(), peer.addr.to_string()),
        ("c".to_owned(), "127.0.0.3".to_owned()),
    ])));
    let registry = prometheus::Registry::new();
    let metrics = MvpMetrics::register(&registry, MetricsGeneration::V1_36).unwrap();
    let transport = PeerTransport::new(&pki.peer_tls("front-proxy-client")).unwrap();
    let (_layer, peers) = MvpLayer::builder("a", endpoints, transport)
        .metrics(metrics)
        .discovery(DiscoveryConfig::new(HashSet::new));
    let driver = tokio::spawn(peers.run());
    let lease = |name: &str| -> Lease {
        serde_json::from_value(json!({"metadata": {"name": name,
            "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
            "spec": {"holderIdentity": format!("{name}_1")}}))
        .unwrap()
    };
    peers.set_identity_leases(&[lease("b"), lease("c")]);
    // c's address has no port: the sync fails for it (and is retried), b is fetched.
    kube_mvp_testing::eventually(
        "the peer discovery's first sync",
        Duration::from_secs(2),
        || async { peers.has_synced().then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    driver.abort();
    for (group, version, resource) in [("", "v1", "pods"), ("batch", "v1", "jobs")] {
        let gvr = GroupVersionResource::new(group, version, resource);
        assert_eq!(peers.peers_serving(&gvr), ["b"], "{gvr:?}");
    }
    assert!(
        peers.is_ready(),
        "b reached; c unreachable does not hold readiness"
    );
    let discovery = [("code", "200"), ("group", ""), ("version", ""), ("resource", "")];
    // The first attempt asked b for /api and /apis and failed to address c; retries (one may be
    // under way as the driver stops) add more of both.
    let fetches = counter(&registry, "apiserver_rerouted_request_total", &discovery);
    let hostport = [("type", "hostport_resolution")];
    let failures = counter(&registry, "apiserver_peer_discovery_sync_errors_total", &hostport);
    assert!(
        fetches >= 2 && failures >= 1,
        "{fetches} fetches, {failures} failures"
    );
}

fn counter(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().iter())
        .find(|m| {
            m.get_label().len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| m.get_label().iter().any(|l| l.name() == *k && l.value() == *v))
        })
        .map_or(0, |m| m.get_counter().get_value() as u64)
}

/// Go's transport sends a replayable request again when a reused connection dies before answering;
/// a request with a body is never sent twice.
#[tokio::test]
async fn request_on_a_pooled_connection_the_peer_closed_is_retried_only_when_replayable() {
    let pki = Pki::new();
    let (peer, seen) = support::start_peer_answering_once_per_connection(&pki).await;
    let registry = prometheus::Registry::new();
    let layer = layer(&pki, &peer, &registry);
    let request = |method: http::Method, body: &'static [u8]| {
        let mut req = Request::builder()
            .method(method)
            .uri("/apis/batch/v1/namespaces/default/jobs")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(body)))
            .unwrap();
        req.extensions_mut().insert(alice());
        req
    };

    let (status, _, body) = call(&layer, request(http::Method::GET, b"")).await;
    assert_eq!((status, body.as_ref()), (StatusCode::OK, b"conn0".as_ref()));
    // The pooled connection dies under the GET: it is sent again, on a fresh connection.
    let (status, _, body) = call(&layer, request(http::Method::GET, b"")).await;
    assert_eq!((status, body.as_ref()), (StatusCode::OK, b"conn1".as_ref()));
    // The same happens to a POST with a body: one attempt, then Go's plain-text 503.
    let (status, headers, body) = call(&layer, request(http::Method::POST, b"{\"kind\":\"Job\"}")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:?}");
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(
        *seen.lock().unwrap(),
        ["conn0 GET", "conn0 GET", "conn1 GET", "conn1 POST"]
    );
}
