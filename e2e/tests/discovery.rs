//! Discovery seen by clients of a mixed-version cluster (checklist items 32, 33, 37–41, 43, 44 and the
//! upstream integration tests TestPeerAggregatedDiscovery and ...WithCRD).

mod support;

use std::time::Duration;

use e2e::{ClusterBuilder, Exchange, HttpsClient, TestCluster, eventually};
use http::Method;
use serde_json::{Value, json};
use support::*;

const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Upstream's TestPeerAggregatedDiscovery layout: a without apps/v1, b without batch/v1, both 1.36.
async fn a_lacks_apps_b_lacks_batch() -> TestCluster {
    ClusterBuilder::new()
        .server("a", |s| s.version("1.36").runtime_config("apps/v1=false"))
        .server("b", |s| s.version("1.36").runtime_config("batch/v1=false"))
        .start()
        .await
        .unwrap()
}

async fn apis(client: &HttpsClient, accept: &str) -> Exchange {
    let reply = client
        .request(Method::GET, "/apis")
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.code(), 200, "{reply:?}");
    reply
}

/// `group/version` of every entry of an aggregated discovery document, in document order.
fn group_versions(doc: &Value) -> Vec<String> {
    doc["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| {
            let group = g["metadata"]["name"].as_str().unwrap_or("").to_owned();
            g["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |v| format!("{group}/{}", v["version"].as_str().unwrap_or("")))
        })
        .collect()
}

fn has_group(doc: &Value, group: &str) -> bool {
    group_versions(doc)
        .iter()
        .any(|gv| gv.starts_with(&format!("{group}/")))
}

/// Waits until `via`'s default `/apis` lists (or no longer lists) `group`.
async fn wait_for_group(
    cluster: &TestCluster,
    via: &str,
    group: &str,
    present: bool,
    timeout: Duration,
) -> Exchange {
    let client = cluster.client(via).unwrap();
    eventually(
        &format!(
            "{via}'s /apis {} {group}",
            if present { "lists" } else { "drops" }
        ),
        timeout,
        || async {
            let reply = apis(&client, V2).await;
            (has_group(reply.json(), group) == present).then_some(reply)
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_aggregated_discovery_is_the_union_of_local_and_peer_groups() {
    let cluster = a_lacks_apps_b_lacks_batch().await;
    let a_doc = wait_for_group(&cluster, "a", "apps", true, SETTLE).await;
    let b_doc = wait_for_group(&cluster, "b", "batch", true, SETTLE).await;
    for doc in [&a_doc, &b_doc] {
        assert!(
            has_group(doc.json(), "apps") && has_group(doc.json(), "batch"),
            "{doc:?}"
        );
        assert!(
            doc.json()["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| g["metadata"]["name"] != ""),
            "no core group"
        );
    }
    // The merge is deterministic: both servers list the same group/versions in the same order.
    assert_eq!(group_versions(a_doc.json()), group_versions(b_doc.json()));
    insta::assert_yaml_snapshot!(
        "peer_aggregated_group_versions_on_a_and_b",
        group_versions(b_doc.json())
    );
    insta::assert_yaml_snapshot!(
        "peer_aggregated_response_headers_on_b",
        (b_doc.status.clone(), b_doc.headers.clone())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nopeer_profile_returns_the_local_document_and_unknown_profiles_the_merged_one() {
    let cluster = a_lacks_apps_b_lacks_batch().await;
    wait_for_group(&cluster, "b", "batch", true, SETTLE).await;
    wait_for_group(&cluster, "a", "apps", true, SETTLE).await;
    let mut out = Vec::new();
    for via in ["a", "b"] {
        let client = cluster.client(via).unwrap();
        let nopeer = apis(&client, &format!("{V2};profile=nopeer")).await;
        let unknown = apis(&client, &format!("{V2};profile=foo")).await;
        let default = apis(&client, V2).await;
        assert_eq!(
            unknown.json(),
            default.json(),
            "{via}: an unknown profile means peer-aggregated"
        );
        out.push(json!({
            "server": via,
            "nopeer has apps": has_group(nopeer.json(), "apps"),
            "nopeer has batch": has_group(nopeer.json(), "batch"),
            "profile=foo has apps and batch": has_group(unknown.json(), "apps") && has_group(unknown.json(), "batch"),
        }));
    }
    insta::assert_yaml_snapshot!("nopeer_and_unknown_profile_on_a_and_b", out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_discovery_documents_stay_local() {
    let cluster = a_lacks_apps_b_lacks_batch().await;
    wait_for_group(&cluster, "b", "batch", true, SETTLE).await;
    let b = cluster.client("b").unwrap();
    let v2beta1 = b
        .request(Method::GET, "/apis")
        .header("accept", V2BETA1)
        .send()
        .await
        .unwrap();
    let legacy = b.get("/apis").await.unwrap();
    let legacy_groups: Vec<&str> = legacy.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    let out = json!({
        "aggregated v2beta1 /apis": {"status": v2beta1.status, "content-type": v2beta1.header("content-type"), "lists batch": has_group(v2beta1.json(), "batch")},
        "legacy /apis (APIGroupList)": {"status": legacy.status, "kind": legacy.json()["kind"], "lists batch": legacy_groups.contains(&"batch"), "lists apps": legacy_groups.contains(&"apps")},
        "GET /apis/batch": b.get("/apis/batch").await.unwrap(),
        "GET /apis/batch/v1": b.get("/apis/batch/v1").await.unwrap(),
    });
    assert!(!has_group(v2beta1.json(), "batch"));
    assert!(!legacy_groups.contains(&"batch") && legacy_groups.contains(&"apps"));
    insta::assert_yaml_snapshot!("local_only_discovery_documents_on_b", out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_aggregated_discovery_has_an_etag_and_honours_if_none_match() {
    let cluster = a_lacks_apps_b_lacks_batch().await;
    let first = wait_for_group(&cluster, "b", "batch", true, SETTLE).await;
    let etag = first.raw_header("etag").pop().expect("an ETag");
    let b = cluster.client("b").unwrap();
    let not_modified = b
        .request(Method::GET, "/apis")
        .header("accept", V2)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.code(), 304);
    assert_eq!(not_modified.raw_text(), "");
    // A local change (a CRD) changes the document and its ETag.
    let crd = crd("foos.example.com", "example.com", "Foo");
    assert_eq!(
        b.post_json("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd)
            .await
            .unwrap()
            .code(),
        201
    );
    let changed = wait_for_group(&cluster, "b", "example.com", true, SETTLE).await;
    assert_ne!(changed.raw_header("etag").pop(), Some(etag.clone()));
    let stale = b
        .request(Method::GET, "/apis")
        .header("accept", V2)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(stale.code(), 200);
    insta::assert_yaml_snapshot!("peer_aggregated_discovery_if_none_match_on_b", not_modified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_peer_proxy_discovery_shows_only_local_apis() {
    let cluster = b_without_a_peer_proxy().await;
    // a (with a proxy) learns b's groups; b (no --peer-ca-file) shows only its own and 404s jobs.
    wait_for_group(&cluster, "a", "batch", true, SETTLE).await;
    let b = cluster.client("b").unwrap();
    let doc = apis(&b, V2).await;
    assert!(!has_group(doc.json(), "batch"));
    let jobs = b.get(JOBS).await.unwrap();
    assert_eq!(
        (jobs.code(), jobs.raw_text().as_str()),
        (404, "404 page not found\n")
    );
    insta::assert_yaml_snapshot!(
        "jobs_and_discovery_on_b_without_peer_ca_file",
        json!({"lists batch": has_group(doc.json(), "batch"), "jobs": jobs})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_discovery_is_fetched_as_system_apiserver_with_nopeer_accept() {
    let cluster = a_serves_batch_b_does_not(e2e::PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;
    let fetches: Vec<String> = cluster
        .server("a")
        .unwrap()
        .served_requests()
        .iter()
        .filter(|r| r.user.name == "system:apiserver")
        .map(|r| {
            format!(
                "{} {} as {} (uid {}, groups {:?}), peer-proxied: {}",
                r.method, r.uri, r.user.name, r.user.uid, r.user.groups, r.peer_proxied
            )
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    insta::assert_yaml_snapshot!("discovery_fetches_a_served_for_b", fetches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_capability_comes_from_local_discovery_including_new_crds() {
    // A CRD is served by every server (they share the store), so requests for it are never proxied,
    // even right after it appears.
    let cluster = a_serves_batch_b_does_not(e2e::PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;
    let b = cluster.client("b").unwrap();
    assert_eq!(
        b.post_json(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd("foos.example.com", "example.com", "Foo")
        )
        .await
        .unwrap()
        .code(),
        201
    );
    wait_for_group(&cluster, "b", "example.com", true, SETTLE).await;
    let mark = log_mark(&cluster, "a");
    let foo = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "one"}});
    let created = eventually("b serves foos", SETTLE, || async {
        let reply = b
            .post_json("/apis/example.com/v1/namespaces/default/foos", &foo)
            .await
            .ok()?;
        (reply.code() == 201).then_some(reply)
    })
    .await
    .unwrap();
    assert_eq!(
        proxied_requests_seen_by(&cluster, "a", mark),
        Vec::<String>::new(),
        "served by b itself"
    );
    insta::assert_yaml_snapshot!("custom_resource_created_on_b_locally", created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_crd_groups_are_excluded_from_peer_data_and_never_proxied() {
    // Upstream's TestPeerAggregatedDiscoveryWithCRD.
    let cluster = a_lacks_apps_b_lacks_batch().await;
    wait_for_group(&cluster, "b", "batch", true, SETTLE).await;
    let a = cluster.client("a").unwrap();
    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    assert_eq!(
        a.post_json(crd_path, &crd("foos.example.com", "example.com", "Foo"))
            .await
            .unwrap()
            .code(),
        201
    );
    for via in ["a", "b"] {
        wait_for_group(&cluster, via, "example.com", true, Duration::from_secs(60)).await;
    }
    assert_eq!(
        a.delete(&format!("{crd_path}/foos.example.com"))
            .await
            .unwrap()
            .code(),
        200
    );
    let mut after = Vec::new();
    for via in ["a", "b"] {
        wait_for_group(&cluster, via, "example.com", false, Duration::from_secs(120)).await;
        let nopeer = apis(&cluster.client(via).unwrap(), &format!("{V2};profile=nopeer")).await;
        assert!(!has_group(nopeer.json(), "example.com"), "{via}");
        // Requests for the deleted group are answered locally (404), not sent to a peer whose cached
        // discovery still lists it.
        let mark = log_mark(&cluster, if via == "a" { "b" } else { "a" });
        let reply = cluster
            .client(via)
            .unwrap()
            .get("/apis/example.com/v1/namespaces/default/foos")
            .await
            .unwrap();
        assert_eq!(
            proxied_requests_seen_by(&cluster, if via == "a" { "b" } else { "a" }, mark),
            Vec::<String>::new()
        );
        after.push(reply);
    }
    insta::assert_yaml_snapshot!("foos_after_crd_deletion_on_a_and_b", after);
}

fn crd(name: &str, group: &str, kind: &str) -> Value {
    let plural = name.split('.').next().unwrap_or(name);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// A minimal peer for checklist item 42: an HTTPS server (cluster-CA certificate with SAN
/// `kubernetes.default.svc`) answering `/api` and `/apis` with fixed documents. The fakes of one
/// version all describe a resource alike, so differing verbs need a peer that says otherwise.
async fn stub_peer(
    cluster: &TestCluster,
    ip: std::net::Ipv4Addr,
    api: Value,
    apis: Value,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let cert = cluster
        .pki()
        .authority(certs::Issuer::ClusterCa)
        .issue_serving_cert(
            "kube-apiserver",
            &[ip.into()],
            &["kubernetes.default.svc".to_owned()],
        )
        .unwrap();
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert_der()], cert.key_der())
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, api, apis) = (acceptor.clone(), api.clone(), apis.clone());
            connections.spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let body = match req.uri().path() {
                        "/api" => Some(api.to_string()),
                        "/apis" => Some(apis.to_string()),
                        _ => None,
                    };
                    async move {
                        let response = match body {
                            Some(body) => http::Response::builder()
                                .header("content-type", V2)
                                .body(http_body_util::Full::new(bytes::Bytes::from(body))),
                            None => http::Response::builder()
                                .status(404)
                                .body(http_body_util::Full::new(bytes::Bytes::from(
                                    "404 page not found\n",
                                ))),
                        };
                        Ok::<_, std::convert::Infallible>(response.unwrap())
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_resource_has_the_sorted_union_of_verbs_and_subresources() {
    let cluster = a_serves_batch_b_does_not(e2e::PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;
    let a = cluster.client("a").unwrap();
    let api = a
        .request(Method::GET, "/api")
        .header("accept", &format!("{V2};profile=nopeer"))
        .send()
        .await
        .unwrap()
        .raw_json();
    // The stub serves batch/v1 jobs with other verbs and a `scale` subresource.
    let stub_apis = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": [{
        "metadata": {"name": "batch"},
        "versions": [{"version": "v1", "freshness": "Current", "resources": [{
            "resource": "jobs", "responseKind": {"group": "", "version": "", "kind": "Job"}, "scope": "Namespaced",
            "singularResource": "job", "verbs": ["watch", "get", "escalate"],
            "subresources": [{"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "update"]}]
        }]}]
    }]});
    let (addr, stub) = stub_peer(&cluster, std::net::Ipv4Addr::new(127, 0, 0, 77), api, stub_apis).await;
    // Publish the stub as a peer: address first, then its identity lease (which triggers b's sync).
    let id = "apiserver-stub";
    let record = apiserver_fake::controllers::peer_endpoint::endpoint_record(id, addr);
    cluster
        .store()
        .put_internal(
            &format!("{}{id}", apiserver_fake::controllers::peer_endpoint::PREFIX),
            record,
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": id, "namespace": "kube-system", "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
        "spec": {"holderIdentity": format!("{id}_0"), "leaseDurationSeconds": 3600}});
    assert_eq!(
        a.post_json(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            &lease
        )
        .await
        .unwrap()
        .code(),
        201
    );
    let b = cluster.client("b").unwrap();
    let jobs = eventually("b merges the stub's jobs", SETTLE, || async {
        let doc = apis(&b, V2).await.raw_json();
        let batch = doc["items"]
            .as_array()?
            .iter()
            .find(|g| g["metadata"]["name"] == "batch")?
            .clone();
        let jobs = batch["versions"][0]["resources"]
            .as_array()?
            .iter()
            .find(|r| r["resource"] == "jobs")?
            .clone();
        jobs["verbs"]
            .as_array()?
            .iter()
            .any(|v| v == "escalate")
            .then_some(jobs)
    })
    .await
    .unwrap();
    stub.abort();
    let verbs: Vec<&str> = jobs["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        verbs,
        [
            "create",
            "delete",
            "deletecollection",
            "escalate",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]
    );
    let subresources: Vec<&str> = jobs["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["subresource"].as_str())
        .collect();
    assert_eq!(subresources, ["scale", "status"]);
    insta::assert_yaml_snapshot!("merged_jobs_resource_on_b", jobs);
}
