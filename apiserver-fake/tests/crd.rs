//! CustomResourceDefinitions and StorageVersion objects, shared by every fake on one store.

mod support;

use std::time::Duration;

use http::StatusCode;
use support::{TestClient, cluster, eventually, member};

const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "foos.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "shortNames": ["fo"]},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
}"#;

#[tokio::test]
async fn a_crd_created_through_one_server_is_served_and_discovered_by_all() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[]), member("b", 2, "1.35", &[])]).await;
    let (a, b) = (TestClient::admin(&cluster, 0), TestClient::admin(&cluster, 1));
    let created = a
        .post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    for client in [&a, &b] {
        let resources = eventually("the CRD to be served", Duration::from_secs(5), || async {
            let reply = client.get("/apis/example.com/v1").await;
            (reply.status == StatusCode::OK).then(|| reply.json())
        })
        .await;
        assert_eq!(resources["resources"][0]["name"], "foos");
        assert_eq!(resources["resources"][0]["kind"], "Foo");
        let foo = r#"{"apiVersion":"example.com/v1","kind":"Foo","metadata":{"name":"x"},"spec":{"size":1}}"#;
        let path = "/apis/example.com/v1/namespaces/default/foos";
        let reply = client.post(path, foo).await;
        assert!(
            reply.status == StatusCode::CREATED || reply.status == StatusCode::CONFLICT,
            "{}",
            reply.text()
        );
        assert_eq!(client.get(&format!("{path}/x")).await.json()["spec"]["size"], 1);
    }
    // Tables of custom resources: `Name`, then the CRD version's printer columns.
    let table = a
        .send(
            http::Method::GET,
            "/apis/example.com/v1/namespaces/default/foos",
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            None,
        )
        .await
        .json();
    let headers: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(headers, ["Name", "Size"], "{table}");
    assert_eq!(table["rows"][0]["cells"], serde_json::json!(["x", 1]), "{table}");
    let deleted = b
        .send(
            http::Method::DELETE,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.example.com",
            &[],
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text());
    eventually("the CRD to be gone on a", Duration::from_secs(5), || async {
        (a.get("/apis/example.com/v1").await.status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
}

#[tokio::test]
async fn storage_versions_record_what_each_server_serves() {
    let flags = [
        "--feature-gates=StorageVersionAPI=true",
        "--runtime-config=internal.apiserver.k8s.io/v1alpha1=true",
    ];
    let cluster = cluster(vec![
        member(
            "a",
            1,
            "1.36",
            &[
                "--feature-gates=StorageVersionAPI=true",
                "--runtime-config=internal.apiserver.k8s.io/v1alpha1=true,batch/v1=false",
            ],
        ),
        member("b", 2, "1.36", &flags),
    ])
    .await;
    let a = TestClient::admin(&cluster, 0);
    let (a_id, b_id) = (cluster.servers[0].1.server_id(), cluster.servers[1].1.server_id());
    let jobs = a
        .get("/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/batch.jobs")
        .await;
    assert_eq!(jobs.status, StatusCode::OK, "{}", jobs.text());
    let entries = jobs.json()["status"]["storageVersions"].clone();
    let ids: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["apiServerID"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![b_id], "only b serves batch/v1");
    assert_eq!(entries[0]["servedVersions"], serde_json::json!(["batch/v1"]));
    assert_eq!(jobs.json()["status"]["commonEncodingVersion"], "batch/v1");
    let pods = a
        .get("/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/core.pods")
        .await
        .json();
    let mut ids: Vec<String> = pods["status"]["storageVersions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["apiServerID"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut expected = vec![a_id.to_owned(), b_id.to_owned()];
    expected.sort();
    assert_eq!(ids, expected);
}

const CRONTAB_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "crontabs.stable.example.com"},
  "spec": {"group": "stable.example.com", "scope": "Namespaced",
    "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "description": "What the CronTab runs.", "properties": {
          "cronSpec": {"type": "string", "description": "The schedule."},
          "image": {"type": "string"},
          "replicas": {"type": "integer"},
          "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}}]}
}"#;

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// Creates the CronTab CRD through `client` and waits until its OpenAPI v3 document has the schema.
async fn create_crontab_crd(client: &TestClient) -> serde_json::Value {
    let created = client
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            CRONTAB_CRD,
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    eventually(
        "the CronTab schema in OpenAPI v3",
        Duration::from_secs(5),
        || async {
            let reply = client.get("/openapi/v3/apis/stable.example.com/v1").await;
            let doc = reply.json();
            (reply.status == StatusCode::OK
                && doc["components"]["schemas"]["com.example.stable.v1.CronTab"].is_object())
            .then_some(doc)
        },
    )
    .await
}

#[tokio::test]
async fn crd_schemas_are_in_the_openapi_documents() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    let v3 = create_crontab_crd(&client).await;
    let schemas = &v3["components"]["schemas"];
    let crontab = &schemas["com.example.stable.v1.CronTab"];
    assert_eq!(
        crontab["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
    );
    assert_eq!(
        crontab["properties"]["spec"]["properties"]["cronSpec"]["description"],
        "The schedule."
    );
    assert_eq!(
        crontab["properties"]["metadata"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    assert!(schemas["com.example.stable.v1.CronTabList"].is_object());
    let root = client.get("/openapi/v3").await.json();
    assert!(root["paths"]["apis/stable.example.com/v1"].is_object(), "{root}");

    let v2 = client.get("/openapi/v2").await.json();
    let definition = &v2["definitions"]["com.example.stable.v1.CronTab"];
    assert_eq!(
        definition["properties"]["spec"]["properties"]["replicas"]["type"],
        "integer"
    );
    assert_eq!(
        v2["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs"]["post"]["parameters"][0]["schema"]
            ["$ref"],
        "#/definitions/com.example.stable.v1.CronTab"
    );

    // A schema change of the existing CRD changes the documents.
    let patched = client
        .send(
            http::Method::PATCH,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com",
            &[("content-type", "application/json-patch+json")],
            Some(
                r#"[{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/paused", "value": {"type": "boolean"}}]"#,
            ),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text());
    eventually("the new field in OpenAPI v2", Duration::from_secs(5), || async {
        let v2 = client.get("/openapi/v2").await.json();
        v2["definitions"]["com.example.stable.v1.CronTab"]["properties"]["spec"]["properties"]["paused"]
            .is_object()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn custom_resources_are_pruned_and_validated_by_their_schema() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    create_crontab_crd(&client).await;
    let body = r#"{"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "warned", "colour": "red"},
        "spec": {"cronSpec": "* * * * */5", "foo": 1, "extra": {"anything": true}}}"#;

    // Default (Warn): pruned, and said in Warning headers.
    let created = client.post(CRONTABS, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let warnings: Vec<&str> = created
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"metadata.colour\"""#,
            r#"299 - "unknown field \"spec.foo\"""#
        ]
    );
    let stored = client.get(&format!("{CRONTABS}/warned")).await.json();
    assert!(stored["spec"].get("foo").is_none(), "{stored}");
    assert!(stored["metadata"].get("colour").is_none(), "{stored}");
    assert_eq!(stored["spec"]["extra"]["anything"], true, "preserved");

    // Strict: refused with upstream's strict decoding error.
    let strict = client
        .send(
            http::Method::POST,
            &format!("{CRONTABS}?fieldValidation=Strict"),
            &[],
            Some(&body.replace("warned", "strict")),
        )
        .await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST, "{}", strict.text());
    assert_eq!(
        strict.json()["message"],
        r#"CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "metadata.colour", unknown field "spec.foo""#
    );

    // A wrong type: schema validation's 422.
    let wrong = client
        .post(
            CRONTABS,
            r#"{"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "typed"},
                "spec": {"replicas": "three"}}"#,
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", wrong.text());
    let status = wrong.json();
    assert_eq!(
        status["message"],
        r#"CronTab.stable.example.com "typed" is invalid: spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
    );
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueTypeInvalid");

    // A merge patch adding an undeclared field, under Strict: the strict error without the kind prefix.
    let patch = client
        .send(
            http::Method::PATCH,
            &format!("{CRONTABS}/warned?fieldValidation=Strict"),
            &[("content-type", "application/merge-patch+json")],
            Some(r#"{"spec": {"bar": 1}}"#),
        )
        .await;
    assert_eq!(patch.status, StatusCode::BAD_REQUEST, "{}", patch.text());
    assert_eq!(
        patch.json()["message"],
        r#"strict decoding error: unknown field "spec.bar""#
    );

    // Server-side apply of an undeclared field fails the typed conversion (the applied configuration
    // names no namespace).
    let applied = client
        .send(
            http::Method::PATCH,
            &format!("{CRONTABS}/applied?fieldManager=test"),
            &[("content-type", "application/apply-patch+yaml")],
            Some(
                r#"{"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "applied"},
                    "spec": {"cronSpec": "x", "baz": 1}}"#,
            ),
        )
        .await;
    assert_eq!(
        applied.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        applied.text()
    );
    assert_eq!(
        applied.json()["message"],
        "failed to create typed patch object (/applied; stable.example.com/v1, Kind=CronTab): .spec.baz: field not declared in schema"
    );
}
