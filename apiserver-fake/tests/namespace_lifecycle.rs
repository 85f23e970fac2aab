//! The API server's side of namespace deletion, on a cluster of fakes without a controller manager
//! (so every step is the server's own): `DELETE` marks the namespace `Terminating` and keeps its
//! content, a second `DELETE` is a conflict, creates in it are forbidden, and `PUT .../finalize`
//! removing the last finalizer deletes it (`pkg/registry/core/namespace/storage`,
//! `plugin/pkg/admission/namespace/lifecycle`).

mod support;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use support::{TestClient, cluster, member};

/// Replaces what differs between runs: uids, timestamps, resourceVersions.
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                match key.as_str() {
                    "uid" | "creationTimestamp" | "deletionTimestamp" | "resourceVersion" | "time" => {
                        *field = json!(format!("[{key}]"));
                    }
                    _ => redact(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// Request, status code and redacted body.
async fn answer(client: &TestClient, method: Method, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string());
    let reply = client.send(method.clone(), path, &[], body.as_deref()).await;
    let mut shown = serde_json::from_slice::<Value>(&reply.body).unwrap_or_else(|_| json!(reply.text()));
    if let Some(metadata) = shown.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    redact(&mut shown);
    json!({"request": format!("{method} {path}"), "code": reply.status.as_u16(), "body": shown})
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

#[tokio::test]
async fn delete_marks_the_namespace_terminating_and_finalize_completes_it() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    let created = client
        .post("/api/v1/namespaces", &namespace("team").to_string())
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let created = client
        .post(
            "/api/v1/namespaces/team/configmaps",
            &config_map("kept").to_string(),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());

    let mut answers = vec![answer(&client, Method::DELETE, "/api/v1/namespaces/team", None).await];
    // Nothing deleted the content: that is the namespace controller's job.
    answers.push(
        answer(
            &client,
            Method::GET,
            "/api/v1/namespaces/team/configmaps/kept",
            None,
        )
        .await,
    );
    answers.push(answer(&client, Method::DELETE, "/api/v1/namespaces/team", None).await);
    answers.push(
        answer(
            &client,
            Method::POST,
            "/api/v1/namespaces/team/configmaps",
            Some(config_map("new")),
        )
        .await,
    );
    // A status write (the controller's conditions) leaves it there; so does a main-resource update
    // trying to drop the finalizer (only `finalize` changes spec.finalizers).
    let mut current = client.get("/api/v1/namespaces/team").await.json();
    current["status"]["conditions"] = json!([{"type": "NamespaceContentRemaining", "status": "True",
        "reason": "SomeResourcesRemain", "message": "Some resources are remaining: configmaps. has 1 resource instances"}]);
    answers.push(
        answer(
            &client,
            Method::PUT,
            "/api/v1/namespaces/team/status",
            Some(current.clone()),
        )
        .await,
    );
    let mut current = client.get("/api/v1/namespaces/team").await.json();
    current["spec"]["finalizers"] = json!([]);
    answers.push(answer(&client, Method::PUT, "/api/v1/namespaces/team", Some(current)).await);
    let mut current = client.get("/api/v1/namespaces/team").await.json();
    current["spec"]["finalizers"] = json!([]);
    answers.push(
        answer(
            &client,
            Method::PUT,
            "/api/v1/namespaces/team/finalize",
            Some(current),
        )
        .await,
    );
    answers.push(answer(&client, Method::GET, "/api/v1/namespaces/team", None).await);
    insta::assert_yaml_snapshot!("namespace_delete_then_finalize", answers);
}

#[tokio::test]
async fn a_namespace_without_finalizers_is_deleted_at_once() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    let created = client
        .post("/api/v1/namespaces", &namespace("bare").to_string())
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let mut bare = created.json();
    bare["spec"]["finalizers"] = json!([]);
    let finalized = client
        .send(
            Method::PUT,
            "/api/v1/namespaces/bare/finalize",
            &[],
            Some(&bare.to_string()),
        )
        .await;
    assert_eq!(finalized.status, StatusCode::OK, "{}", finalized.text());
    assert_eq!(
        finalized.json()["status"]["phase"],
        "Active",
        "finalize on a live namespace only changes its spec"
    );
    let deleted = client
        .send(Method::DELETE, "/api/v1/namespaces/bare", &[], None)
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text());
    assert_eq!(deleted.json()["status"]["phase"], "Terminating");
    assert_eq!(
        client.get("/api/v1/namespaces/bare").await.status,
        StatusCode::NOT_FOUND
    );
}
