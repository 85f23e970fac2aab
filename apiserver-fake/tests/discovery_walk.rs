//! The discovery walk: for every minor 1.28–1.36, a server's aggregated discovery is walked and every
//! advertised resource and subresource is sent every verb discovery lists for it (writes with a
//! plausible body, named requests against an object that exists). Nothing may answer 404 or 405: a
//! verb discovery advertises is served. Other errors (400, 422, 500 for a kubelet that is not there,
//! 503 for a service without endpoints) are what kube-apiserver answers too on a cluster without nodes.

mod support;

use std::time::Duration;

use apiserver_fake::store::{ObjectKey, StorageResource, Store, StoreError};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use support::{TestClient, cluster, eventually, member};

const MINORS: std::ops::RangeInclusive<u8> = 28..=36;
const NAMESPACE: &str = "walk";
const NAME: &str = "walk-obj";
const DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
    application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// A CRD with `status` and `scale`, so custom resources' subresources are walked too.
const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.walk.example.com"},
  "spec": {"group": "walk.example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
}"#;

/// One resource as aggregated discovery lists it.
#[derive(Debug, Clone)]
struct Advertised {
    group: String,
    version: String,
    resource: String,
    kind: String,
    namespaced: bool,
    verbs: Vec<String>,
    subresources: Vec<(String, Vec<String>)>,
}

impl Advertised {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn collection(&self) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{root}/namespaces/{NAMESPACE}/{}", self.resource)
        } else {
            format!("{root}/{}", self.resource)
        }
    }

    /// The object the walk keeps in the store for named requests: the least a kind needs to be
    /// plausible (a pod has one container, so exec and logs reach their no-node answers).
    fn object(&self) -> Value {
        let mut object = json!({
            "apiVersion": self.api_version(),
            "kind": self.kind,
            "metadata": {"name": NAME},
        });
        if self.namespaced {
            object["metadata"]["namespace"] = json!(NAMESPACE);
        }
        match (self.group.as_str(), self.resource.as_str()) {
            ("", "pods") => {
                object["spec"] = json!({"containers": [{"name": "c", "image": "busybox"}]});
            }
            ("", "services") => object["spec"] = json!({"ports": [{"port": 80}]}),
            _ => {}
        }
        object
    }
}

fn advertised(document: &Value) -> Vec<Advertised> {
    let mut found = Vec::new();
    for group in document["items"].as_array().into_iter().flatten() {
        let group_name = group
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for version in group["versions"].as_array().into_iter().flatten() {
            for resource in version["resources"].as_array().into_iter().flatten() {
                let strings = |value: &Value| -> Vec<String> {
                    value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                };
                found.push(Advertised {
                    group: group_name.to_owned(),
                    version: version["version"].as_str().unwrap_or_default().to_owned(),
                    resource: resource["resource"].as_str().unwrap_or_default().to_owned(),
                    kind: resource
                        .pointer("/responseKind/kind")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    namespaced: resource["scope"] == "Namespaced",
                    verbs: strings(&resource["verbs"]),
                    subresources: resource["subresources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|s| {
                            (
                                s["subresource"].as_str().unwrap_or_default().to_owned(),
                                strings(&s["verbs"]),
                            )
                        })
                        .collect(),
                });
            }
        }
    }
    found
}

/// Puts the walk's object of `resource` back if a request removed it.
async fn ensure_object(store: &dyn Store, resource: &Advertised) {
    let key = if resource.namespaced {
        ObjectKey::namespaced(NAMESPACE, NAME)
    } else {
        ObjectKey::cluster(NAME)
    };
    let storage = StorageResource::new(&resource.group, &resource.resource);
    match store.create(&storage, &key, resource.object()).await {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => panic!("seeding {}: {e}", resource.resource),
    }
}

/// A body for `verb` on `subresource` ("" for the resource itself) that the fake can decode.
async fn body_for(
    client: &TestClient,
    resource: &Advertised,
    subresource: &str,
    verb: &str,
) -> Option<String> {
    let named = format!("{}/{NAME}", resource.collection());
    let body = match (subresource, verb) {
        ("", "create") => {
            let mut object = resource.object();
            object["metadata"]["name"] = json!("walk-new");
            object
        }
        ("binding", "create") => json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": NAME}, "target": {"name": "walk-node"}}),
        ("eviction", "create") => json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": NAME}}),
        ("token", "create") => json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {}}),
        (_, "update") => {
            let path = if subresource.is_empty() {
                named
            } else {
                format!("{named}/{subresource}")
            };
            let current = client.get(&path).await;
            if current.status != StatusCode::OK {
                return Some(resource.object().to_string());
            }
            current.json()
        }
        (_, "patch") => json!({}),
        _ => return None,
    };
    Some(body.to_string())
}

fn method_of(verb: &str) -> Option<Method> {
    Some(match verb {
        "get" | "list" | "watch" => Method::GET,
        "create" => Method::POST,
        "update" => Method::PUT,
        "patch" => Method::PATCH,
        "delete" | "deletecollection" => Method::DELETE,
        _ => return None,
    })
}

/// Walks one server; returns every request answered 404 or 405.
async fn walk(client: &TestClient, store: &dyn Store) -> (usize, Vec<String>) {
    let mut resources = Vec::new();
    for root in ["/api", "/apis"] {
        let reply = client
            .send(Method::GET, root, &[("accept", DISCOVERY)], None)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{root}: {}", reply.text());
        resources.extend(advertised(&reply.json()));
    }
    assert!(
        resources.iter().any(|r| r.resource == "widgets"),
        "the CRD is advertised"
    );
    let mut sent = 0;
    let mut failures = Vec::new();
    for resource in &resources {
        // Subresources first (the eviction last of them), then the resource's own verbs, deletes last.
        let mut requests: Vec<(String, String)> = Vec::new();
        let mut subresources = resource.subresources.clone();
        subresources.sort_by_key(|(name, _)| name == "eviction");
        for (sub, verbs) in &subresources {
            for verb in verbs {
                requests.push((sub.clone(), verb.clone()));
            }
        }
        let mut verbs = resource.verbs.clone();
        verbs.sort_by_key(|v| matches!(v.as_str(), "delete" | "deletecollection"));
        for verb in verbs {
            requests.push((String::new(), verb));
        }
        for (sub, verb) in requests {
            let Some(method) = method_of(&verb) else {
                continue;
            };
            ensure_object(store, resource).await;
            let path = match (sub.as_str(), verb.as_str()) {
                ("", "list" | "create") => resource.collection(),
                // Only what the walk made: a deletecollection of CRDs would take the walk's CRD along.
                ("", "deletecollection") => format!("{}?labelSelector=walk%3Ddeleted", resource.collection()),
                ("", "watch") => format!("{}?watch=true&timeoutSeconds=1", resource.collection()),
                ("", _) => format!("{}/{NAME}", resource.collection()),
                (sub, _) => format!("{}/{NAME}/{sub}", resource.collection()),
            };
            let body = body_for(client, resource, &sub, &verb).await;
            let content_type = if verb == "patch" {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            let response = client
                .open(
                    method.clone(),
                    &path,
                    &[("content-type", content_type)],
                    body.as_deref(),
                )
                .await;
            sent += 1;
            let status = response.status();
            if matches!(status, StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED) {
                let body = http_body_util::BodyExt::collect(response.into_body())
                    .await
                    .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                    .unwrap_or_default();
                failures.push(format!("{verb} ({method} {path}): {status} {body}"));
            }
        }
    }
    (sent, failures)
}

async fn walk_minor(minor: u8) -> Result<usize, String> {
    let version = format!("1.{minor}");
    let cluster = cluster(vec![member("walk", minor, &version, &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    let namespace = client
        .post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}).to_string(),
        )
        .await;
    assert_eq!(namespace.status, StatusCode::CREATED, "{}", namespace.text());
    // The node `pods/binding` assigns the walk's pod to: its kubelet is then what is missing.
    let node = client
        .post(
            "/api/v1/nodes",
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "walk-node"}}).to_string(),
        )
        .await;
    assert_eq!(node.status, StatusCode::CREATED, "{}", node.text());
    let crd = client
        .post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        .await;
    assert_eq!(crd.status, StatusCode::CREATED, "{}", crd.text());
    eventually("the CRD to be served", Duration::from_secs(10), || async {
        (client.get("/apis/walk.example.com/v1").await.status == StatusCode::OK).then_some(())
    })
    .await;
    let (sent, failures) = walk(&client, cluster.store.as_ref()).await;
    cluster.shutdown().await;
    if failures.is_empty() {
        Ok(sent)
    } else {
        Err(format!("{version}:\n  {}", failures.join("\n  ")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_discovery_advertises_is_served_on_every_minor() {
    let walks: Vec<_> = MINORS.map(|minor| tokio::spawn(walk_minor(minor))).collect();
    let mut failures = Vec::new();
    for (minor, walk) in MINORS.zip(walks) {
        match walk.await.expect("the walk does not panic") {
            Ok(sent) => assert!(
                sent > 300,
                "1.{minor}: only {sent} requests: discovery was not walked"
            ),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(
        failures.is_empty(),
        "answered 404 or 405:\n{}",
        failures.join("\n")
    );
}
