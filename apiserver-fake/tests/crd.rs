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
