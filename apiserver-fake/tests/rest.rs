//! The REST layer driven through `rest::handle` with in-memory requests (no sockets), one test per
//! behaviour a client sees.

use std::sync::Arc;
use std::time::Duration;

use apiserver_fake::api::catalog::KubeVersion;
use apiserver_fake::api::rest::{self, Lookup, ResourceCatalog, ResourceInfo, RestContext, SubresourceInfo};
use apiserver_fake::store::{MemoryStore, StorageResource, Store};
use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use mvp_core::RequestInfo;
use serde_json::{Value, json};

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn info(
    group: &str,
    kind: &str,
    resource: &str,
    namespaced: bool,
    status: bool,
    custom: bool,
) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: String::new(),
        resource: resource.into(),
        kind: kind.into(),
        namespaced,
        verbs: ALL_VERBS.iter().map(|v| (*v).to_owned()).collect(),
        subresources: if status {
            vec![SubresourceInfo {
                name: "status".into(),
                verbs: vec!["get".into(), "patch".into(), "update".into()],
            }]
        } else {
            vec![]
        },
        printer_columns: if custom {
            vec![rest::table::PrinterColumn::age()]
        } else {
            vec![]
        },
        custom,
        schema: None,
        storage_schema: None,
    }
}

/// batch/v1 jobs, apps/v1 deployments (with scale), v1 configmaps/namespaces/pods, coordination.k8s.io/v1
/// leases, example.com/v1 widgets
/// (custom), CRDs, and a create-only
/// authentication.k8s.io/v1 tokenreviews.
struct Catalog;

impl ResourceCatalog for Catalog {
    fn lookup(&self, group: &str, version: &str, resource: &str) -> Lookup {
        let found = match (group, version) {
            ("batch", "v1") => match resource {
                "jobs" => Some(info("batch", "Job", "jobs", true, true, false)),
                _ => None,
            },
            ("", "v1") => match resource {
                "configmaps" => Some(info("", "ConfigMap", "configmaps", true, false, false)),
                "pods" => Some(info("", "Pod", "pods", true, true, false)),
                "namespaces" => Some(info("", "Namespace", "namespaces", false, true, false)),
                _ => None,
            },
            ("apps", "v1") => match resource {
                "deployments" => {
                    let mut r = info("apps", "Deployment", "deployments", true, true, false);
                    r.subresources.push(SubresourceInfo {
                        name: "scale".into(),
                        verbs: vec!["get".into(), "patch".into(), "update".into()],
                    });
                    Some(r)
                }
                _ => None,
            },
            ("coordination.k8s.io", "v1") => match resource {
                "leases" => Some(info("coordination.k8s.io", "Lease", "leases", true, false, false)),
                _ => None,
            },
            ("example.com", "v1") => match resource {
                "widgets" => Some(info("example.com", "Widget", "widgets", true, true, true)),
                _ => None,
            },
            ("apiextensions.k8s.io", "v1") => match resource {
                "customresourcedefinitions" => Some(info(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    "customresourcedefinitions",
                    false,
                    true,
                    false,
                )),
                _ => None,
            },
            ("authentication.k8s.io", "v1") => match resource {
                "tokenreviews" => {
                    let mut r = info(
                        "authentication.k8s.io",
                        "TokenReview",
                        "tokenreviews",
                        false,
                        false,
                        false,
                    );
                    r.verbs = vec!["create".into()];
                    Some(r)
                }
                _ => None,
            },
            _ => return Lookup::GroupVersionNotServed,
        };
        match found {
            Some(mut r) => {
                r.version = version.to_owned();
                Lookup::Found(r)
            }
            None => Lookup::ResourceNotServed,
        }
    }

    fn namespaced_resources(&self) -> Vec<StorageResource> {
        vec![
            StorageResource::new("batch", "jobs"),
            StorageResource::new("", "configmaps"),
            StorageResource::new("", "pods"),
            StorageResource::new("coordination.k8s.io", "leases"),
            StorageResource::new("apps", "deployments"),
            StorageResource::new("example.com", "widgets"),
        ]
    }
}

struct Api {
    ctx: RestContext,
    store: Arc<MemoryStore>,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

impl Api {
    fn new() -> Self {
        Self::with_store(MemoryStore::new())
    }

    fn with_store(store: MemoryStore) -> Self {
        Self::with_store_and_version(store, KubeVersion::NEWEST)
    }

    /// An API whose strategies are those of a `binary` kube-apiserver.
    fn with_version(binary: KubeVersion) -> Self {
        Self::with_store_and_version(MemoryStore::new(), binary)
    }

    fn with_store_and_version(store: MemoryStore, binary: KubeVersion) -> Self {
        let store = Arc::new(store);
        let ctx = RestContext::new(store.clone(), Arc::new(Catalog), binary)
            .with_bookmark_interval(Duration::from_millis(50));
        Self { ctx, store }
    }

    fn request(
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> (RequestInfo, Request<Body>) {
        let mut builder = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let req = builder.body(Body::from(body)).unwrap();
        let info = RequestInfo::from_parts(req.method(), req.uri()).unwrap();
        (info, req)
    }

    async fn send(&self, method: Method, uri: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Reply {
        let (info, req) = Self::request(method, uri, headers, body);
        let response = rest::handle(&self.ctx, &info, req).await;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    async fn get(&self, uri: &str) -> Reply {
        self.send(Method::GET, uri, &[], vec![]).await
    }

    async fn post(&self, uri: &str, body: Value) -> Reply {
        self.send(
            Method::POST,
            uri,
            &[("content-type", "application/json")],
            body.to_string().into_bytes(),
        )
        .await
    }

    async fn put(&self, uri: &str, body: Value) -> Reply {
        self.send(
            Method::PUT,
            uri,
            &[("content-type", "application/json")],
            body.to_string().into_bytes(),
        )
        .await
    }

    async fn patch(&self, uri: &str, content_type: &str, body: &str) -> Reply {
        self.send(
            Method::PATCH,
            uri,
            &[("content-type", content_type)],
            body.as_bytes().to_vec(),
        )
        .await
    }

    async fn delete(&self, uri: &str) -> Reply {
        self.send(Method::DELETE, uri, &[], vec![]).await
    }
}

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

/// The pod template every Job needs (`spec.template` is required, as upstream).
fn template() -> Value {
    json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}})
}

fn job(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {"app": name}},
           "spec": {"parallelism": 1, "template": template()}, "status": {"active": 5}})
}

#[tokio::test]
async fn create_get_and_list_a_job() {
    let api = Api::new();
    let created = api.post(JOBS, job("a")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.headers["content-type"], "application/json");
    assert!(created.text.ends_with('\n'));
    let created = created.json();
    assert_eq!(created["kind"], "Job");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(created["status"], json!({}), "status is dropped on create");

    let got = api.get(&format!("{JOBS}/a")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json()["metadata"]["uid"], created["metadata"]["uid"]);

    api.post(JOBS, job("b")).await;
    let list = api.get(JOBS).await.json();
    assert_eq!(list["kind"], "JobList");
    assert_eq!(list["apiVersion"], "batch/v1");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert!(
        list["items"][0].get("kind").is_none(),
        "built-in list items carry no TypeMeta"
    );
    assert_eq!(list["metadata"]["resourceVersion"], "2");
    let all_namespaces = api.get("/apis/batch/v1/jobs").await.json();
    assert_eq!(all_namespaces["items"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn missing_objects_and_unknown_paths_answer_like_upstream() {
    let api = Api::new();
    let missing = api.get(&format!("{JOBS}/nope")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        missing.text,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"jobs.batch \
         \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"group\":\"batch\",\"kind\":\
         \"jobs\"},\"code\":404}\n"
    );
    let unserved = api.get("/apis/batch/v2/namespaces/default/jobs").await;
    assert_eq!(unserved.status, StatusCode::NOT_FOUND);
    assert_eq!(unserved.text, "404 page not found\n");
    assert_eq!(unserved.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(unserved.headers["x-content-type-options"], "nosniff");
    let unknown = api.get("/apis/batch/v1/namespaces/default/cronjobz").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(
        unknown.json()["message"],
        "the server could not find the requested resource"
    );
    // A namespaced object addressed without its namespace has no route.
    assert_eq!(
        api.get("/apis/batch/v1/jobs/a").await.status,
        StatusCode::NOT_FOUND
    );
    let create_across = api.post("/apis/batch/v1/jobs", job("x")).await;
    assert_eq!(create_across.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        create_across.json()["message"],
        "the server does not allow this method on the requested resource"
    );
    let list_reviews = api.get("/apis/authentication.k8s.io/v1/tokenreviews").await;
    assert_eq!(list_reviews.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(list_reviews.json()["reason"], "MethodNotAllowed");
}

#[tokio::test]
async fn create_validates_names_namespaces_and_bodies() {
    let api = Api::new();
    let unnamed = api.post(JOBS, json!({"metadata": {}})).await;
    assert_eq!(unnamed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        unnamed.json()["message"],
        "Job.batch \"\" is invalid: metadata.name: Required value: name or generateName is required"
    );
    let generated = api
        .post(
            JOBS,
            json!({"metadata": {"generateName": "job-"}, "spec": {"template": template()}}),
        )
        .await
        .json();
    let name = generated["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");
    let wrong_ns = api
        .post(JOBS, json!({"metadata": {"name": "x", "namespace": "other"}}))
        .await;
    assert_eq!(wrong_ns.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        wrong_ns.json()["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let duplicate = api
        .post(
            JOBS,
            json!({"metadata": {"name": generated["metadata"]["name"]}, "spec": {"template": template()}}),
        )
        .await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert_eq!(duplicate.json()["reason"], "AlreadyExists");
    let malformed = api
        .send(
            Method::POST,
            JOBS,
            &[("content-type", "application/json")],
            b"{nope".to_vec(),
        )
        .await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    // Without a Content-Type the body is JSON (as upstream): `{}` then lacks a name.
    let no_type = api.send(Method::POST, JOBS, &[], b"{}".to_vec()).await;
    assert_eq!(no_type.status, StatusCode::UNPROCESSABLE_ENTITY);
    let other_type = api
        .send(
            Method::POST,
            JOBS,
            &[("content-type", "text/plain")],
            b"{}".to_vec(),
        )
        .await;
    assert_eq!(other_type.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let missing_ns = api.post("/apis/batch/v1/namespaces/ghost/jobs", job("a")).await;
    assert_eq!(missing_ns.status, StatusCode::NOT_FOUND);
    assert_eq!(missing_ns.json()["message"], "namespaces \"ghost\" not found");
    let dry_uri = format!("{JOBS}?dryRun=All");
    let dry = api
        .send(
            Method::POST,
            &dry_uri,
            &[("content-type", "application/json")],
            job("dry").to_string().into_bytes(),
        )
        .await;
    assert_eq!(dry.status, StatusCode::CREATED);
    assert!(dry.json()["metadata"].get("resourceVersion").is_none());
    assert_eq!(
        api.get(&format!("{JOBS}/dry")).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn update_uses_optimistic_concurrency_and_ignores_status() {
    let api = Api::new();
    let created = api.post(JOBS, job("a")).await.json();
    let mut next = created.clone();
    next["spec"]["parallelism"] = json!(3);
    next["status"] = json!({"active": 9});
    let updated = api.put(&format!("{JOBS}/a"), next.clone()).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    let updated = updated.json();
    assert_eq!(updated["metadata"]["generation"], 2);
    assert_eq!(updated["status"], json!({}), "main resource writes ignore status");
    let stale = api.put(&format!("{JOBS}/a"), next.clone()).await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_eq!(
        stale.json()["message"],
        "Operation cannot be fulfilled on jobs.batch \"a\": the object has been modified; please apply your changes \
         to the latest version and try again"
    );
    next["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    next["spec"]["parallelism"] = json!(4);
    assert_eq!(
        api.put(&format!("{JOBS}/a"), next.clone()).await.status,
        StatusCode::OK
    );
    let renamed = api.put(&format!("{JOBS}/b"), next).await;
    assert_eq!(renamed.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        renamed.json()["message"],
        "the name of the object (a) does not match the name on the URL (b)"
    );

    // The status subresource changes only status, and not the generation.
    let current = api.get(&format!("{JOBS}/a")).await.json();
    let mut with_status = current.clone();
    with_status["status"] = json!({"succeeded": 1});
    with_status["spec"]["parallelism"] = json!(100);
    let status = api.put(&format!("{JOBS}/a/status"), with_status).await.json();
    assert_eq!(status["status"], json!({"succeeded": 1}));
    assert_eq!(status["spec"]["parallelism"], 4);
    assert_eq!(
        status["metadata"]["generation"],
        current["metadata"]["generation"]
    );
    let patched = api
        .patch(
            &format!("{JOBS}/a/status"),
            "application/merge-patch+json",
            r#"{"status":{"failed":2}}"#,
        )
        .await;
    assert_eq!(patched.json()["status"], json!({"succeeded": 1, "failed": 2}));
}

#[tokio::test]
async fn patch_types() {
    let api = Api::new();
    api.post(JOBS, job("a")).await;
    let merge = api
        .patch(
            &format!("{JOBS}/a"),
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"x":"1"}}}"#,
        )
        .await;
    assert_eq!(merge.status, StatusCode::OK, "{}", merge.text);
    assert_eq!(merge.json()["metadata"]["labels"], json!({"app": "a", "x": "1"}));
    let json_patch = api
        .patch(
            &format!("{JOBS}/a"),
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/spec/parallelism","value":7}]"#,
        )
        .await
        .json();
    assert_eq!(json_patch["spec"]["parallelism"], 7);
    assert_eq!(json_patch["metadata"]["generation"], 2);
    let smp = api
        .patch(
            &format!("{JOBS}/a"),
            "application/strategic-merge-patch+json",
            r#"{"metadata":{"labels":{"x":null}}}"#,
        )
        .await
        .json();
    assert_eq!(smp["metadata"]["labels"], json!({"app": "a"}));
    let bad = api
        .patch(
            &format!("{JOBS}/a"),
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/nope"}]"#,
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let stale = api
        .patch(
            &format!("{JOBS}/a"),
            "application/merge-patch+json",
            r#"{"metadata":{"resourceVersion":"1"}}"#,
        )
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    let unknown = api.patch(&format!("{JOBS}/a"), "text/plain", "x").await;
    assert_eq!(unknown.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        unknown.json()["message"],
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, \
         application/apply-patch+yaml"
    );
    let missing = api
        .patch(&format!("{JOBS}/none"), "application/merge-patch+json", "{}")
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    // Server-side apply creates, then merges.
    let apply_uri = format!("{JOBS}/applied?fieldManager=test");
    let applied = api
        .patch(
            &apply_uri,
            "application/apply-patch+yaml",
            "metadata:\n  name: applied\nspec:\n  parallelism: 2\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox}]\n",
        )
        .await;
    assert_eq!(applied.status, StatusCode::CREATED, "{}", applied.text);
    let reapplied = api
        .patch(
            &apply_uri,
            "application/apply-patch+yaml",
            "metadata:\n  name: applied\n  labels:\n    a: b\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox}]\n",
        )
        .await;
    assert_eq!(reapplied.status, StatusCode::OK);
    // The manager no longer applies `parallelism` and nobody else owns it: apply removes it, and
    // defaulting brings back the default (upstream's prune, then decode).
    assert_eq!(reapplied.json()["spec"]["parallelism"], 1);
    assert_eq!(reapplied.json()["metadata"]["labels"]["a"], "b");
    let no_manager = api
        .patch(
            &format!("{JOBS}/applied"),
            "application/apply-patch+yaml",
            "metadata:\n  name: applied\n",
        )
        .await;
    assert_eq!(no_manager.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn strategic_merge_and_apply_follow_the_schema() {
    // A Deployment's pod template merges as a Pod's spec, and unlike a Pod's it may change freely.
    const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
    const PODS: &str = "/api/v1/namespaces/default/pods";
    let api = Api::new();
    let spec = json!({"containers": [
                       {"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]},
                       {"name": "side", "image": "side:1"}
                   ], "tolerations": [{"key": "a", "operator": "Exists"}]});
    let created = api
        .post(
            DEPLOYMENTS,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let patch = r#"{"spec":{
                "containers":[{"name":"app","image":"app:2"},{"name":"new","image":"new:1"}],
                "tolerations":[{"key":"b","operator":"Exists"}]}}"#;
    let uri = format!("{DEPLOYMENTS}/web");
    let smp = api
        .patch(
            &uri,
            "application/strategic-merge-patch+json",
            &format!(r#"{{"spec":{{"template":{patch}}}}}"#),
        )
        .await;
    assert_eq!(smp.status, StatusCode::OK, "{}", smp.text);
    let merged = &smp.json()["spec"]["template"]["spec"];
    let names: Vec<&str> = merged["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    // Merged by name, the new container before the server's remaining one (upstream's order).
    assert_eq!(names, ["app", "new", "side"]);
    assert_eq!(merged["containers"][0]["ports"][0]["containerPort"], 80);
    // tolerations have no patch strategy: replaced.
    assert_eq!(merged["tolerations"], json!([{"key": "b", "operator": "Exists"}]));
    // The same patch of a Pod merges the same way, and then a Pod's update rules refuse it.
    let pod = api
        .post(
            PODS,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": spec}),
        )
        .await;
    assert_eq!(pod.status, StatusCode::CREATED, "{}", pod.text);
    let refused = api
        .patch(
            &format!("{PODS}/web"),
            "application/strategic-merge-patch+json",
            patch,
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert!(
        refused
            .text
            .contains("pod updates may not add or remove containers"),
        "{}",
        refused.text
    );
    let keyless = api
        .patch(
            &uri,
            "application/strategic-merge-patch+json",
            r#"{"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}"#,
        )
        .await;
    assert_eq!(keyless.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        keyless.json()["message"],
        "map: map[image:x] does not contain declared merge key: name"
    );
    // Server-side apply: containers keyed by name, ports by containerPort and (defaulted) protocol.
    let applied = api
        .patch(
            &format!("{uri}?fieldManager=test&force=true"),
            "application/apply-patch+yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels:\n      app: web\n  \
             template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: app\n        \
             ports:\n        - containerPort: 80\n          name: http\n",
        )
        .await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    let containers = &applied.json()["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(3));
    assert_eq!(containers[0]["image"], "app:2");
    assert_eq!(
        containers[0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}])
    );
}

#[tokio::test]
async fn custom_resources_reject_strategic_merge_and_return_deleted_objects() {
    let api = Api::new();
    let uri = "/apis/example.com/v1/namespaces/default/widgets";
    let created = api.post(uri, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": {"x": 1}})).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert!(
        created.json().get("status").is_none(),
        "custom resource status is dropped on create"
    );
    let list = api.get(uri).await.json();
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(
        list["items"][0]["kind"], "Widget",
        "custom resource list items keep TypeMeta"
    );
    let smp = api
        .patch(
            &format!("{uri}/w"),
            "application/strategic-merge-patch+json",
            "{}",
        )
        .await;
    assert_eq!(smp.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let deleted = api.delete(&format!("{uri}/w")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.json()["kind"], "Widget");
}

#[tokio::test]
async fn delete_returns_status_for_jobs_and_honours_finalizers() {
    let api = Api::new();
    let created = api.post(JOBS, job("a")).await.json();
    // batch/v1 Jobs orphan by default (upstream's back compatibility): a delete without a policy leaves
    // the `orphan` finalizer for the garbage collector; kubectl sends `Background`.
    let deleted = api
        .delete(&format!("{JOBS}/a?propagationPolicy=Background"))
        .await;
    assert_eq!(deleted.status, StatusCode::OK);
    let deleted = deleted.json();
    assert_eq!(deleted["kind"], "Status");
    assert_eq!(deleted["status"], "Success");
    assert_eq!(
        deleted["details"],
        json!({"name": "a", "group": "batch", "kind": "jobs", "uid": created["metadata"]["uid"]})
    );
    assert_eq!(
        api.delete(&format!("{JOBS}/a")).await.status,
        StatusCode::NOT_FOUND
    );
    api.post(JOBS, job("o")).await;
    let orphaning = api.delete(&format!("{JOBS}/o")).await.json();
    assert_eq!(
        orphaning["metadata"]["finalizers"],
        json!(["orphan"]),
        "{orphaning}"
    );
    assert_eq!(orphaning["metadata"]["deletionGracePeriodSeconds"], 0);

    let mut guarded = job("g");
    guarded["metadata"]["finalizers"] = json!(["example.com/keep"]);
    api.post(JOBS, guarded).await;
    let marked = api.delete(&format!("{JOBS}/g")).await.json();
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    assert_eq!(api.get(&format!("{JOBS}/g")).await.status, StatusCode::OK);
    let released = api
        .patch(
            &format!("{JOBS}/g"),
            "application/merge-patch+json",
            r#"{"metadata":{"finalizers":null}}"#,
        )
        .await;
    assert_eq!(released.status, StatusCode::OK);
    assert_eq!(api.get(&format!("{JOBS}/g")).await.status, StatusCode::NOT_FOUND);

    let bad_policy = api.delete(&format!("{JOBS}/x?propagationPolicy=Sideways")).await;
    assert_eq!(bad_policy.status, StatusCode::UNPROCESSABLE_ENTITY);
    api.post(JOBS, job("p")).await;
    let precondition = api
        .send(
            Method::DELETE,
            &format!("{JOBS}/p"),
            &[("content-type", "application/json")],
            br#"{"preconditions":{"uid":"other"}}"#.to_vec(),
        )
        .await;
    assert_eq!(precondition.status, StatusCode::CONFLICT);
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

async fn delete_with(api: &Api, uri: &str, options: Value) -> Reply {
    api.send(
        Method::DELETE,
        uri,
        &[("content-type", "application/json")],
        options.to_string().into_bytes(),
    )
    .await
}

/// `propagationPolicy` and `orphanDependents` leave the garbage collector's finalizers as upstream's
/// registry does: Foreground and Orphan keep the object (deletionTimestamp, grace 0) until the finalizer
/// goes; Background deletes at once; a later delete may switch the finalizer; the legacy
/// `orphanDependents: false` on an object that stays answers 202.
#[tokio::test]
async fn propagation_policies_leave_upstreams_finalizers() {
    let api = Api::new();
    for name in ["fg", "orphan", "bg", "legacy", "dry"] {
        assert_eq!(
            api.post(CONFIGMAPS, configmap(name)).await.status,
            StatusCode::CREATED
        );
    }
    let fg = delete_with(
        &api,
        &format!("{CONFIGMAPS}/fg"),
        json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(fg.status, StatusCode::OK);
    let fg = fg.json();
    assert_eq!(fg["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert_eq!(fg["metadata"]["deletionGracePeriodSeconds"], 0);
    let marked_at = fg["metadata"]["deletionTimestamp"].clone();
    assert!(marked_at.is_string(), "{fg}");
    // Switched to orphaning by a second delete; the deletion timestamp stays.
    let switched = api
        .delete(&format!("{CONFIGMAPS}/fg?propagationPolicy=Orphan"))
        .await
        .json();
    assert_eq!(switched["metadata"]["finalizers"], json!(["orphan"]));
    assert_eq!(switched["metadata"]["deletionTimestamp"], marked_at);
    // Background removes the GC finalizer, and with no finalizer left the object goes.
    let gone = api
        .delete(&format!("{CONFIGMAPS}/fg?propagationPolicy=Background"))
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.text);
    assert_eq!(
        api.get(&format!("{CONFIGMAPS}/fg")).await.status,
        StatusCode::NOT_FOUND
    );

    let orphan = delete_with(
        &api,
        &format!("{CONFIGMAPS}/orphan"),
        json!({"orphanDependents": true}),
    )
    .await;
    assert_eq!(orphan.json()["metadata"]["finalizers"], json!(["orphan"]));
    let bg = api
        .delete(&format!("{CONFIGMAPS}/bg?propagationPolicy=Background"))
        .await;
    assert_eq!(bg.json()["status"], "Success");
    assert_eq!(
        api.get(&format!("{CONFIGMAPS}/bg")).await.status,
        StatusCode::NOT_FOUND
    );

    let mut held = configmap("legacy");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.put(&format!("{CONFIGMAPS}/legacy"), held).await;
    let accepted = delete_with(
        &api,
        &format!("{CONFIGMAPS}/legacy"),
        json!({"orphanDependents": false}),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    assert_eq!(
        accepted.json()["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );

    let dry = api
        .delete(&format!(
            "{CONFIGMAPS}/dry?propagationPolicy=Foreground&dryRun=All"
        ))
        .await
        .json();
    assert_eq!(dry["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    let stored = api.get(&format!("{CONFIGMAPS}/dry")).await.json();
    assert!(stored["metadata"].get("finalizers").is_none(), "{stored}");
    assert!(stored["metadata"].get("deletionTimestamp").is_none(), "{stored}");
}

/// Bad delete options and owner references get upstream's 422 and change nothing.
#[tokio::test]
async fn bad_delete_options_and_owner_references_are_refused_with_nothing_half_done() {
    let api = Api::new();
    api.post(CONFIGMAPS, configmap("kept")).await;
    let both = delete_with(
        &api,
        &format!("{CONFIGMAPS}/kept"),
        json!({"orphanDependents": true, "propagationPolicy": "Background"}),
    )
    .await;
    assert_eq!(both.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        both.json()["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Background\": orphanDependents and deletionPropagation cannot be both set"
    );
    let unknown = api
        .delete(&format!("{CONFIGMAPS}/kept?propagationPolicy=Sideways"))
        .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        unknown.json()["details"]["causes"][0],
        json!({"reason": "FieldValueNotSupported", "field": "propagationPolicy",
               "message": "Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""})
    );
    let kept = api.get(&format!("{CONFIGMAPS}/kept")).await.json();
    assert!(kept["metadata"].get("deletionTimestamp").is_none(), "{kept}");

    let mut no_uid = configmap("dependent");
    no_uid["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "kept"}]);
    let refused = api.post(CONFIGMAPS, no_uid).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        refused.json()["message"],
        "ConfigMap \"dependent\" is invalid: metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"
    );
    assert_eq!(
        api.get(&format!("{CONFIGMAPS}/dependent")).await.status,
        StatusCode::NOT_FOUND
    );
    let both_finalizers = api
        .patch(
            &format!("{CONFIGMAPS}/kept"),
            "application/merge-patch+json",
            r#"{"metadata":{"finalizers":["orphan","foregroundDeletion"]}}"#,
        )
        .await;
    assert_eq!(both_finalizers.status, StatusCode::UNPROCESSABLE_ENTITY);
    let kept = api.get(&format!("{CONFIGMAPS}/kept")).await.json();
    assert!(kept["metadata"].get("finalizers").is_none(), "{kept}");
}

#[tokio::test]
async fn deletecollection_and_selectors() {
    let api = Api::new();
    for name in ["a", "b", "c"] {
        api.post(JOBS, job(name)).await;
    }
    let selected = api
        .get(&format!("{JOBS}?labelSelector=app%20in%20(a,b)"))
        .await
        .json();
    assert_eq!(selected["items"].as_array().unwrap().len(), 2);
    let by_field = api
        .get(&format!("{JOBS}?fieldSelector=metadata.name!=a"))
        .await
        .json();
    assert_eq!(by_field["items"].as_array().unwrap().len(), 2);
    let bad = api.get(&format!("{JOBS}?fieldSelector=spec.x=1")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let deleted = api
        .delete(&format!(
            "{JOBS}?labelSelector=app!=c&propagationPolicy=Background"
        ))
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert_eq!(deleted.json()["items"].as_array().unwrap().len(), 2);
    let left = api.get(JOBS).await.json();
    assert_eq!(left["items"][0]["metadata"]["name"], "c");
    assert_eq!(left["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn chunked_lists_walk_every_item_once() {
    let api = Api::new();
    for i in 0..5 {
        api.post(JOBS, job(&format!("j{i}"))).await;
    }
    let mut seen = Vec::new();
    let mut uri = format!("{JOBS}?limit=2");
    let mut first_rv = None;
    loop {
        let page = api.get(&uri).await.json();
        let rv = page["metadata"]["resourceVersion"].clone();
        assert_eq!(*first_rv.get_or_insert(rv.clone()), rv);
        for item in page["items"].as_array().unwrap() {
            seen.push(item["metadata"]["name"].as_str().unwrap().to_owned());
        }
        match page["metadata"]["continue"].as_str() {
            Some(token) => {
                assert!(page["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                uri = format!("{JOBS}?limit=2&continue={token}");
            }
            None => break,
        }
    }
    assert_eq!(seen, ["j0", "j1", "j2", "j3", "j4"]);
    assert_eq!(
        api.get(&format!("{JOBS}?continue=garbage")).await.status,
        StatusCode::BAD_REQUEST
    );
}

/// A page is read as upstream's etcd3 storage reads it: `remainingItemCount` is what follows the page;
/// the token's start key is relative to the list's prefix (the name within a namespace); and with a
/// selector the server keeps reading until the page holds `limit` matches, the token continuing after
/// the last key it evaluated, and no count (it would count unselected objects).
#[tokio::test]
async fn chunked_lists_read_pages_as_upstream() {
    let api = Api::new();
    for i in 0..10 {
        let mut job = job(&format!("j{i}"));
        job["metadata"]["labels"]["even"] = json!((i % 2 == 0).to_string());
        api.post(JOBS, job).await;
    }
    let page = api.get(&format!("{JOBS}?limit=3")).await.json();
    assert_eq!(page["metadata"]["remainingItemCount"], 7);
    let token = page["metadata"]["continue"].as_str().unwrap();
    let raw = data_encoding::BASE64URL_NOPAD.decode(token.as_bytes()).unwrap();
    let raw: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(raw["start"], "j2\u{0}", "{raw}");
    let all = api.get("/apis/batch/v1/jobs?limit=3").await.json();
    let raw = data_encoding::BASE64URL_NOPAD
        .decode(all["metadata"]["continue"].as_str().unwrap().as_bytes())
        .unwrap();
    let raw: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(raw["start"], "default/j2\u{0}", "{raw}");

    let mut uri = format!("{JOBS}?limit=2&labelSelector=even%3Dfalse");
    let mut pages = Vec::new();
    loop {
        let page = api.get(&uri).await.json();
        assert!(page["metadata"]["remainingItemCount"].is_null(), "{page}");
        let names: Vec<String> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["metadata"]["name"].as_str().unwrap().to_owned())
            .collect();
        pages.push(names);
        match page["metadata"]["continue"].as_str() {
            Some(token) => uri = format!("{JOBS}?limit=2&labelSelector=even%3Dfalse&continue={token}"),
            None => break,
        }
    }
    // Full pages of matches; the last page ends the range, so it has no token.
    assert_eq!(pages, [vec!["j1", "j3"], vec!["j5", "j7"], vec!["j9"]]);
}

#[tokio::test]
async fn content_negotiation() {
    let api = Api::new();
    api.post(JOBS, job("a")).await;
    let table = api
        .send(
            Method::GET,
            JOBS,
            &[(
                "accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )],
            vec![],
        )
        .await;
    assert_eq!(
        table.headers["content-type"],
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    let table = table.json();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["columnDefinitions"][0]["name"], "Name");
    assert_eq!(table["rows"][0]["cells"][0], "a");
    let yaml = api
        .send(
            Method::GET,
            &format!("{JOBS}/a"),
            &[("accept", "application/yaml")],
            vec![],
        )
        .await;
    assert_eq!(yaml.headers["content-type"], "application/yaml");
    assert!(
        yaml.text.starts_with("kind: Job\napiVersion: batch/v1\n"),
        "{}",
        yaml.text
    );
    let protobuf = api
        .send(
            Method::GET,
            JOBS,
            &[("accept", "application/vnd.kubernetes.protobuf")],
            vec![],
        )
        .await;
    assert_eq!(protobuf.status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(protobuf.json()["reason"], "NotAcceptable");
    let yaml_body = api
        .send(
            Method::POST,
            JOBS,
            &[("content-type", "application/yaml")],
            b"metadata:\n  name: from-yaml\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox}]\n".to_vec(),
        )
        .await;
    assert_eq!(yaml_body.status, StatusCode::CREATED, "{}", yaml_body.text);
    // Deeply nested YAML (the 200 kB body that once took 33 s) is a fast 400, four at once too.
    let started = std::time::Instant::now();
    let deep = format!(
        "metadata:\n  name: deep\nspec: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let sends = (0..4).map(|_| {
        api.send(
            Method::POST,
            JOBS,
            &[("content-type", "application/yaml")],
            deep.clone().into_bytes(),
        )
    });
    for reply in futures_util::future::join_all(sends).await {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
        assert!(
            reply.text.contains("error converting YAML to JSON: yaml: "),
            "{}",
            reply.text
        );
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn namespaces_and_crds() {
    let api = Api::new();
    let ns = api
        .post("/api/v1/namespaces", json!({"metadata": {"name": "team"}}))
        .await;
    assert_eq!(ns.status, StatusCode::CREATED, "{}", ns.text);
    let ns = ns.json();
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(
        api.get("/api/v1/namespaces/team").await.json()["metadata"]["name"],
        "team"
    );
    assert_eq!(
        api.post(
            "/api/v1/namespaces/team/configmaps",
            json!({"metadata": {"name": "c"}})
        )
        .await
        .status,
        StatusCode::CREATED
    );
    let deleted = api.delete("/api/v1/namespaces/team").await.json();
    assert_eq!(deleted["status"]["phase"], "Terminating");
    // The namespace controller empties it (through the API); the server only marks it.
    assert_eq!(
        api.get("/api/v1/namespaces/team/configmaps/c").await.status,
        StatusCode::OK
    );

    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let created = api
        .post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        .await
        .json();
    let conditions = created["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    assert_eq!(created["status"]["acceptedNames"]["kind"], "Widget");
    api.post(
        "/apis/example.com/v1/namespaces/default/widgets",
        json!({"metadata": {"name": "w"}}),
    )
    .await;
    api.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
        .await;
    let (widgets, _) = api
        .store
        .list(&StorageResource::new("example.com", "widgets"), None)
        .await
        .unwrap();
    assert!(widgets.is_empty(), "deleting a CRD deletes its custom resources");
}

/// Reads watch events until `n` arrived (each must arrive within a second).
async fn next_events(body: &mut Body, n: usize) -> Vec<Value> {
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < n {
        let frame = tokio::time::timeout(Duration::from_secs(1), body.frame())
            .await
            .expect("watch event within 1s")
            .expect("stream still open")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buffer.push_str(std::str::from_utf8(&data).unwrap());
        }
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            events.push(serde_json::from_str(&line).unwrap());
        }
    }
    events
}

async fn open_watch(api: &Api, uri: &str) -> Body {
    let (info, req) = Api::request(Method::GET, uri, &[], vec![]);
    assert_eq!(info.verb, "watch");
    let response = rest::handle(&api.ctx, &info, req).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    response.into_body()
}

#[tokio::test]
async fn watch_sends_current_state_then_changes_as_they_happen() {
    let api = Api::new();
    api.post(JOBS, job("a")).await;
    let mut body = open_watch(&api, &format!("{JOBS}?watch=1")).await;
    let initial = next_events(&mut body, 1).await;
    assert_eq!(initial[0]["type"], "ADDED");
    assert_eq!(initial[0]["object"]["kind"], "Job");
    assert_eq!(initial[0]["object"]["metadata"]["name"], "a");
    api.post(JOBS, job("b")).await;
    api.patch(
        &format!("{JOBS}/a"),
        "application/merge-patch+json",
        r#"{"spec":{"parallelism":2}}"#,
    )
    .await;
    api.delete(&format!("{JOBS}/b?propagationPolicy=Background"))
        .await;
    let changes = next_events(&mut body, 3).await;
    let summary: Vec<(String, String)> = changes
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["object"]["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("ADDED".into(), "b".into()),
            ("MODIFIED".into(), "a".into()),
            ("DELETED".into(), "b".into())
        ]
    );
}

#[tokio::test]
async fn watch_from_resource_version_path_form_selectors_and_bookmarks() {
    let api = Api::new();
    let a = api.post(JOBS, job("a")).await.json();
    let rv = a["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    api.post(JOBS, job("b")).await;
    // Path form, from a resourceVersion, for one label, with bookmarks.
    let uri = format!(
        "/apis/batch/v1/watch/namespaces/default/jobs?resourceVersion={rv}&labelSelector=app%3Db&allowWatchBookmarks=true"
    );
    let mut body = open_watch(&api, &uri).await;
    let events = next_events(&mut body, 2).await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], "b");
    assert_eq!(events[1]["type"], "BOOKMARK");
    assert_eq!(events[1]["object"]["kind"], "Job");
    assert_eq!(events[1]["object"]["apiVersion"], "batch/v1");
    assert_eq!(events[1]["object"]["metadata"]["resourceVersion"], "2");
    // An object leaving the selector is DELETED for this watcher.
    api.patch(
        &format!("{JOBS}/b"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"app":"z"}}}"#,
    )
    .await;
    let events = next_events(&mut body, 1).await;
    assert_eq!(events[0]["type"], "DELETED");
}

#[tokio::test]
async fn watch_from_compacted_revision_sends_410_error_event() {
    let api = Api::with_store(MemoryStore::with_history(2));
    for name in ["a", "b", "c", "d"] {
        api.post(JOBS, job(name)).await;
    }
    let mut body = open_watch(&api, &format!("{JOBS}?watch=true&resourceVersion=1")).await;
    let events = next_events(&mut body, 1).await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
    assert_eq!(events[0]["object"]["message"], "too old resource version: 1 (2)");
    assert!(body.frame().await.is_none(), "stream ends after the error");
}

#[tokio::test]
async fn watch_ends_at_timeout_and_send_initial_events_ends_with_annotated_bookmark() {
    let api = Api::new();
    api.post(JOBS, job("a")).await;
    let uri = format!(
        "{JOBS}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    );
    let mut body = open_watch(&api, &uri).await;
    let events = next_events(&mut body, 2).await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "BOOKMARK");
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let rest = tokio::time::timeout(Duration::from_secs(3), body.collect()).await;
    assert!(rest.is_ok(), "the watch closes after timeoutSeconds");
}

/// client-go's reflector re-lists with its last `resourceVersion` and `sendInitialEvents=true`: it gets
/// the state at that version or later (every object, then the annotated bookmark it waits for), not a
/// bare stream of changes; a version the store never reaches is upstream's 504 after its 3 s wait.
#[tokio::test]
async fn a_watch_list_from_a_resource_version_starts_with_the_current_state() {
    let api = Api::new();
    let first = api.post(JOBS, job("a")).await.json();
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_owned();
    api.post(JOBS, job("b")).await;
    let watch_list =
        "watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
    let mut body = open_watch(
        &api,
        &format!("{JOBS}?{watch_list}&resourceVersion={rv}&timeoutSeconds=1"),
    )
    .await;
    let events = next_events(&mut body, 3).await;
    let added: Vec<_> = events[..2]
        .iter()
        .map(|e| (e["type"].clone(), e["object"]["metadata"]["name"].clone()))
        .collect();
    assert_eq!(
        added,
        [(json!("ADDED"), json!("a")), (json!("ADDED"), json!("b"))]
    );
    assert_eq!(events[2]["type"], "BOOKMARK");
    assert_eq!(
        events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let at: u64 = events[2]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion");
    assert!(
        at > rv.parse::<u64>().expect("numeric"),
        "the state includes b: {at} after {rv}"
    );

    let future = api
        .get(&format!("{JOBS}?{watch_list}&resourceVersion=999999999"))
        .await;
    assert_eq!(future.status, StatusCode::GATEWAY_TIMEOUT, "{}", future.text);
    let status = future.json();
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Timeout: Too large resource version: 999999999, current: ")),
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{status}"
    );
}

/// `resourceVersion` on a list and a get of the in-memory store, which keeps no old revisions: a
/// version it has not reached is the cacher's 504 after 3 s; `NotOlderThan` an older one reads the
/// current state; `Exact` reads the current state only at its revision, and an older one is the 410
/// of a compacted revision (on etcd it reads the old state: `tests/etcd_lists.rs`).
#[tokio::test]
async fn reads_at_a_resource_version_are_answered_as_upstream() {
    let api = Api::new();
    let first = api.post(JOBS, job("a")).await.json();
    let at = first["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_owned();
    let latest = api.post(JOBS, job("b")).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_owned();

    let newer = api
        .get(&format!(
            "{JOBS}?resourceVersion={at}&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(newer.status, StatusCode::OK, "{}", newer.text);
    assert_eq!(newer.json()["items"].as_array().map(Vec::len), Some(2));
    let current = api
        .get(&format!(
            "{JOBS}?resourceVersion={latest}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(current.status, StatusCode::OK, "{}", current.text);
    let old = api
        .get(&format!("{JOBS}?resourceVersion={at}&resourceVersionMatch=Exact"))
        .await;
    assert_eq!(old.status, StatusCode::GONE, "{}", old.text);
    assert_eq!(
        old.json()["message"],
        "The resourceVersion for the provided list is too old."
    );

    for uri in [
        format!("{JOBS}?resourceVersion=999999999"),
        format!("{JOBS}/a?resourceVersion=999999999"),
    ] {
        let future = api.get(&uri).await;
        assert_eq!(
            future.status,
            StatusCode::GATEWAY_TIMEOUT,
            "{uri}: {}",
            future.text
        );
    }
    let found = api.get(&format!("{JOBS}/a?resourceVersion={at}")).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.text);
}

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn generation(object: &Value) -> Option<i64> {
    object["metadata"].get("generation").and_then(Value::as_i64)
}

#[tokio::test]
async fn leases_and_configmaps_have_no_generation_through_create_and_updates() {
    let api = Api::new();
    let lease = api
        .post(
            LEASES,
            json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "renewTime": "2024-01-01T00:00:00.000000Z"}}),
        )
        .await;
    assert_eq!(lease.status, StatusCode::CREATED, "{}", lease.text);
    let lease = lease.json();
    assert_eq!(generation(&lease), None);
    // Renewals change spec: a real server still shows no generation.
    let mut renewed = lease.clone();
    renewed["spec"]["renewTime"] = json!("2024-01-01T00:00:10.000000Z");
    let renewed = api.put(&format!("{LEASES}/l"), renewed).await.json();
    assert_eq!(renewed["spec"]["renewTime"], "2024-01-01T00:00:10.000000Z");
    assert_eq!(generation(&renewed), None);
    let patched = api
        .patch(
            &format!("{LEASES}/l"),
            "application/merge-patch+json",
            r#"{"spec":{"holderIdentity":"b"}}"#,
        )
        .await
        .json();
    assert_eq!(generation(&patched), None);
    let stored = api.get(&format!("{LEASES}/l")).await.json();
    assert_eq!(generation(&stored), None);

    let cm = api
        .post(CONFIGMAPS, json!({"metadata": {"name": "c"}, "data": {"k": "v"}}))
        .await
        .json();
    assert_eq!(generation(&cm), None);
    let mut changed = cm.clone();
    changed["data"]["k"] = json!("w");
    changed["metadata"]["generation"] = json!(9);
    let changed = api.put(&format!("{CONFIGMAPS}/c"), changed).await.json();
    assert_eq!(changed["data"]["k"], "w");
    assert_eq!(generation(&changed), None, "an update cannot set it either");

    // Upstream keeps a value a client sets on create for resources that do not track generation, and
    // never moves it.
    let client_set = api
        .post(
            CONFIGMAPS,
            json!({"metadata": {"name": "d", "generation": 3}, "data": {"k": "v"}}),
        )
        .await
        .json();
    assert_eq!(generation(&client_set), Some(3));
    let mut next = client_set.clone();
    next["data"]["k"] = json!("w");
    next["metadata"]["generation"] = json!(4);
    assert_eq!(
        generation(&api.put(&format!("{CONFIGMAPS}/d"), next).await.json()),
        Some(3)
    );
}

#[tokio::test]
async fn job_generation_starts_at_one_and_moves_with_spec_only() {
    let api = Api::new();
    let mut body = job("g");
    body["metadata"]["generation"] = json!(42);
    let created = api.post(JOBS, body).await.json();
    assert_eq!(
        generation(&created),
        Some(1),
        "set by the strategy, not the client"
    );
    let mut next = created.clone();
    next["spec"]["parallelism"] = json!(2);
    let updated = api.put(&format!("{JOBS}/g"), next).await.json();
    assert_eq!(generation(&updated), Some(2));
    let relabeled = api
        .patch(
            &format!("{JOBS}/g"),
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"x":"1"},"generation":10}}"#,
        )
        .await
        .json();
    assert_eq!(generation(&relabeled), Some(2));
    let status = api
        .patch(
            &format!("{JOBS}/g/status"),
            "application/merge-patch+json",
            r#"{"status":{"active":1}}"#,
        )
        .await
        .json();
    assert_eq!(status["status"]["active"], 1);
    assert_eq!(generation(&status), Some(2));
    let respec = api
        .patch(
            &format!("{JOBS}/g"),
            "application/merge-patch+json",
            r#"{"spec":{"parallelism":3}}"#,
        )
        .await
        .json();
    assert_eq!(generation(&respec), Some(3));
    // A dry-run create shows what a create would store.
    let dry = api
        .send(
            Method::POST,
            &format!("{JOBS}?dryRun=All"),
            &[("content-type", "application/json")],
            job("dry").to_string().into_bytes(),
        )
        .await
        .json();
    assert_eq!(generation(&dry), Some(1));
}

#[tokio::test]
async fn custom_resources_bump_on_anything_but_metadata_and_status() {
    let api = Api::new();
    let created = api
        .post(
            WIDGETS,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                   "spec": {"size": 1}, "data": "a"}),
        )
        .await
        .json();
    assert_eq!(generation(&created), Some(1));
    let merge = |body: &'static str| {
        let api = &api;
        async move {
            api.patch(&format!("{WIDGETS}/w"), "application/merge-patch+json", body)
                .await
                .json()
        }
    };
    assert_eq!(
        generation(&merge(r#"{"metadata":{"labels":{"a":"1"},"annotations":{"b":"2"}}}"#).await),
        Some(1)
    );
    assert_eq!(generation(&merge(r#"{"spec":{"size":2}}"#).await), Some(2));
    assert_eq!(
        generation(&merge(r#"{"data":"b"}"#).await),
        Some(3),
        "not only spec"
    );
    assert_eq!(
        generation(&merge(r#"{"status":{"ready":true}}"#).await),
        Some(3),
        "main-resource writes cannot change status"
    );
    let status = api
        .patch(
            &format!("{WIDGETS}/w/status"),
            "application/merge-patch+json",
            r#"{"status":{"ready":true}}"#,
        )
        .await
        .json();
    assert_eq!(status["status"]["ready"], true);
    assert_eq!(generation(&status), Some(3));
}

#[tokio::test]
async fn crds_track_generation_on_spec_changes() {
    let api = Api::new();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let uri = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let created = api.post(uri, crd).await.json();
    assert_eq!(generation(&created), Some(1));
    let updated = api
        .patch(
            &format!("{uri}/gadgets.example.com"),
            "application/merge-patch+json",
            r#"{"spec":{"names":{"shortNames":["gd"]}}}"#,
        )
        .await
        .json();
    assert_eq!(generation(&updated), Some(2));
}

#[tokio::test]
async fn pods_get_a_generation_from_1_33() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let pods = "/api/v1/namespaces/default/pods";
    let old = Api::with_version(KubeVersion::new(1, 32).unwrap());
    assert_eq!(generation(&old.post(pods, pod.clone()).await.json()), None);
    let new = Api::with_version(KubeVersion::new(1, 33).unwrap());
    let created = new.post(pods, pod).await.json();
    assert_eq!(generation(&created), Some(1));
    let updated = new
        .patch(
            &format!("{pods}/p"),
            "application/merge-patch+json",
            r#"{"spec":{"activeDeadlineSeconds":30}}"#,
        )
        .await
        .json();
    assert_eq!(generation(&updated), Some(2));
}

/// Malformed read parameters get kube-apiserver's answers (code, reason, message), in its order:
/// decoding (400), `ValidateListOptions` (422), the storage layer (a malformed resourceVersion: 400 on
/// lists and deletecollection, 500 from the watch cache on gets and watches).
#[tokio::test]
async fn malformed_read_parameters_get_upstreams_answers() {
    let api = Api::new();
    api.post(JOBS, job("a")).await;
    let parse_uint =
        r#"resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax"#;
    let invalid_rv_etcd = format!("invalid resource version: {parse_uint}");
    let cases: Vec<(String, u16, String)> = vec![
        (format!("{JOBS}?resourceVersion=abc"), 400, invalid_rv_etcd.clone()),
        (format!("{JOBS}?resourceVersion=abc&limit=5"), 400, invalid_rv_etcd.clone()),
        (format!("{JOBS}/a?resourceVersion=abc"), 500, parse_uint.to_owned()),
        (format!("{JOBS}?watch=true&resourceVersion=abc"), 500, parse_uint.to_owned()),
        (
            format!("{JOBS}?limit=abc"),
            400,
            r#"strconv.ParseInt: parsing "abc": invalid syntax"#.to_owned(),
        ),
        (
            format!("{JOBS}?limit=99999999999999999999"),
            400,
            r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#.to_owned(),
        ),
        (
            format!("{JOBS}?timeoutSeconds=abc"),
            400,
            r#"strconv.ParseInt: parsing "abc": invalid syntax"#.to_owned(),
        ),
        (
            format!("{JOBS}?resourceVersionMatch=Exact"),
            422,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is \
             forbidden unless resourceVersion is provided"
                .to_owned(),
        ),
        (
            format!("{JOBS}?watch=true&resourceVersionMatch=NotOlderThan"),
            422,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is \
             forbidden for watch unless sendInitialEvents is provided"
                .to_owned(),
        ),
    ];
    let cases = cases
        .into_iter()
        .map(|(path, code, message)| (Method::GET, path, code, message));
    let delete_collection = (
        Method::DELETE,
        format!("{JOBS}?resourceVersion=abc"),
        400,
        invalid_rv_etcd.clone(),
    );
    for (method, path, code, message) in cases.chain([delete_collection]) {
        let reply = api.send(method, &path, &[], vec![]).await;
        assert_eq!(reply.status.as_u16(), code, "{path}: {}", reply.text);
        let status = reply.json();
        assert_eq!(status["kind"], "Status", "{path}");
        assert_eq!(status["message"], message, "{path}");
    }
    // A negative limit is no limit, and the list with a valid resourceVersion is served.
    for path in [
        format!("{JOBS}?limit=-1"),
        format!("{JOBS}?resourceVersion=1&resourceVersionMatch=NotOlderThan"),
    ] {
        assert_eq!(
            api.send(Method::GET, &path, &[], vec![]).await.status,
            StatusCode::OK,
            "{path}"
        );
    }
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_the_parents_replicas() {
    const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
    let api = Api::new();
    let deployment = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    assert_eq!(
        api.post(DEPLOYMENTS, deployment).await.status,
        StatusCode::CREATED
    );
    let scale = api.get(&format!("{DEPLOYMENTS}/web/scale")).await.json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web");

    let patched = api
        .patch(
            &format!("{DEPLOYMENTS}/web/scale?fieldManager=scaler"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":5}}"#,
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(patched.json()["spec"]["replicas"], 5);
    let parent = api.get(&format!("{DEPLOYMENTS}/web")).await.json();
    assert_eq!(parent["spec"]["replicas"], 5);
    assert_eq!(
        parent["metadata"]["generation"], 2,
        "a spec change bumps the generation"
    );
    let scaler = parent["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "scaler")
        .cloned()
        .unwrap();
    assert_eq!(scaler["subresource"], "scale");
    assert_eq!(scaler["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));

    let mut stale = scale.clone();
    stale["spec"]["replicas"] = json!(1);
    assert_eq!(
        api.put(&format!("{DEPLOYMENTS}/web/scale"), stale).await.status,
        StatusCode::CONFLICT
    );
    let mut negative = patched.json();
    negative["spec"]["replicas"] = json!(-1);
    let refused = api.put(&format!("{DEPLOYMENTS}/web/scale"), negative).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        refused.json()["message"],
        "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    // Decoded as upstream decodes a Scale: Go's type errors, undeclared fields under fieldValidation.
    let wrong_type = api
        .patch(
            &format!("{DEPLOYMENTS}/web/scale"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":"many"}}"#,
        )
        .await;
    assert_eq!(wrong_type.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        wrong_type.json()["message"],
        "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"
    );
    let strict = api
        .patch(
            &format!("{DEPLOYMENTS}/web/scale?fieldValidation=Strict"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":4,"surge":1}}"#,
        )
        .await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        strict.json()["message"],
        "strict decoding error: unknown field \"spec.surge\""
    );
    let warned = api
        .patch(
            &format!("{DEPLOYMENTS}/web/scale"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":4,"surge":1}}"#,
        )
        .await;
    assert_eq!(warned.status, StatusCode::OK, "{}", warned.text);
    assert_eq!(
        warned.headers["warning"],
        r#"299 - "unknown field \"spec.surge\"""#
    );
    assert_eq!(warned.json()["spec"]["replicas"], 4);
}

#[tokio::test]
async fn an_empty_namespace_segment_lists_everywhere_but_names_nothing() {
    let api = Api::new();
    assert_eq!(api.post(JOBS, job("a")).await.status, StatusCode::CREATED);
    // go-restful matches `{namespace}` = "": a list spans every namespace.
    let list = api.get("/apis/batch/v1/namespaces//jobs").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    assert_eq!(list.json()["items"][0]["metadata"]["name"], "a");
    // Anything that needs an object key gets the store's 400.
    for reply in [
        api.get("/apis/batch/v1/namespaces//jobs/a").await,
        api.delete("/apis/batch/v1/namespaces//jobs/a").await,
        api.post("/apis/batch/v1/namespaces//jobs", job("b")).await,
    ] {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
        assert_eq!(reply.json()["message"], "Namespace parameter required.");
    }
}

/// The official Python client sends its JSON bodies without `Content-Type`: kube-apiserver takes a
/// missing or empty one as JSON for create and update (`NegotiateInputSerializer`), while a patch's type
/// comes from `Content-Type` alone, so a patch without one stays upstream's 415.
#[tokio::test]
async fn bodies_without_a_content_type_are_json_except_patches() {
    let api = Api::new();
    let created = api
        .send(Method::POST, JOBS, &[], job("bare").to_string().into_bytes())
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let mut updated = created.json();
    updated["metadata"]["labels"]["x"] = json!("1");
    let updated = api
        .send(
            Method::PUT,
            &format!("{JOBS}/bare"),
            &[("content-type", "")],
            updated.to_string().into_bytes(),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    assert_eq!(updated.json()["metadata"]["labels"]["x"], "1");
    for headers in [&[][..], &[("content-type", "")][..]] {
        let patched = api
            .send(
                Method::PATCH,
                &format!("{JOBS}/bare"),
                headers,
                br#"{"metadata":{"labels":{"y":"1"}}}"#.to_vec(),
            )
            .await;
        assert_eq!(
            patched.status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{}",
            patched.text
        );
        assert_eq!(patched.json()["reason"], "UnsupportedMediaType");
    }
    // Not JSON without a Content-Type is the JSON decoder's 400, not a guess at YAML.
    let yaml = api
        .send(Method::POST, JOBS, &[], b"metadata:\n  name: y\n".to_vec())
        .await;
    assert_eq!(yaml.status, StatusCode::BAD_REQUEST, "{}", yaml.text);
}

/// Metadata-only clients get `PartialObjectMetadata` from a PATCH as from GET and LIST (upstream's
/// `transformResponseObject` serves every verb).
#[tokio::test]
async fn patch_answers_partial_object_metadata_to_metadata_only_clients() {
    let api = Api::new();
    api.post(JOBS, job("meta")).await;
    let metadata_only = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let patched = api
        .send(
            Method::PATCH,
            &format!("{JOBS}/meta"),
            &[
                ("content-type", "application/merge-patch+json"),
                ("accept", metadata_only),
            ],
            br#"{"metadata":{"labels":{"m":"1"}}}"#.to_vec(),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(
        patched.headers["content-type"],
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    );
    let body = patched.json();
    assert_eq!(body["kind"], "PartialObjectMetadata");
    assert_eq!(body["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(body["metadata"]["labels"]["m"], "1");
    assert!(body.get("spec").is_none(), "{body}");
    let got = api
        .send(
            Method::GET,
            &format!("{JOBS}/meta"),
            &[("accept", metadata_only)],
            vec![],
        )
        .await
        .json();
    assert_eq!(got["kind"], "PartialObjectMetadata");
}
