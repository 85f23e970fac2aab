//! JSON and YAML bodies nest as deep as upstream allows (Go's `encoding/json` and go-yaml: 10,000
//! levels), driven from outside against the built binary, whose worker stacks are sized for it: a
//! ConfigMap with an undeclared field 10,000 levels deep is created (the field dropped, with a warning),
//! one level more is upstream's 400 in upstream's words, and the server keeps serving.

mod support;

use http::{Method, StatusCode};
use support::demo::{Demo, admin, server};

/// A ConfigMap whose whole body nests `depth` levels: the object, then `depth - 1` arrays.
fn config_map(name: &str, depth: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"x":{}1{}}}"#,
        "[".repeat(depth - 1),
        "]".repeat(depth - 1)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_bodies_nest_as_deep_as_upstream_allows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let b = admin(dir.path(), server(&manifest, "b"));
    let json = [("content-type", "application/json")];
    const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

    let deepest = config_map("deepest", 10_000);
    let created = b.send(Method::POST, CONFIGMAPS, &json, Some(&deepest)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(created.headers["warning"], r#"299 - "unknown field \"x\"""#);
    assert!(
        created.json().get("x").is_none(),
        "the undeclared field is dropped"
    );

    let too_deep = config_map("too-deep", 10_001);
    let refused = b.send(Method::POST, CONFIGMAPS, &json, Some(&too_deep)).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        refused.json()["message"],
        "couldn't get version/kind; json parse error: exceeded max depth"
    );

    // YAML (here its flow style, which JSON text is): go-yaml's limit and words.
    let yaml = [("content-type", "application/yaml")];
    let deepest = config_map("deepest-yaml", 10_000);
    let created = b.send(Method::POST, CONFIGMAPS, &yaml, Some(&deepest)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let too_deep = config_map("too-deep-yaml", 10_001);
    let refused = b.send(Method::POST, CONFIGMAPS, &yaml, Some(&too_deep)).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        refused.json()["message"],
        "error converting YAML to JSON: yaml: exceeded max depth of 10000"
    );
    let block: String = (0..200).map(|i| format!("{}x:\n", " ".repeat(i))).collect();
    let nested = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: block-yaml\n{block}{}1\n",
        " ".repeat(200)
    );
    let created = b.send(Method::POST, CONFIGMAPS, &yaml, Some(&nested)).await;
    assert_eq!(
        created.status,
        StatusCode::CREATED,
        "200 block levels: {}",
        created.text()
    );

    assert_eq!(
        b.get("/readyz").await.status,
        StatusCode::OK,
        "the server still serves"
    );
    assert_eq!(
        b.get(&format!("{CONFIGMAPS}/deepest")).await.status,
        StatusCode::OK
    );
}
