//! A `resourceVersion` that is not a number, sent from outside to the built binary, gets what
//! kube-apiserver 1.36 answers: a 400 `BadRequest` on lists and deletecollection (measured on 1.36.2),
//! the watch cache's 500 on gets and watches; and kubectl shows the 400 as upstream's.

mod support;

use http::Method;
use support::demo::{Demo, admin, server};
use support::{kubectl, kubectl_available};

const PARSE_UINT: &str =
    r#"resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_version_that_is_not_a_number_gets_upstreams_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let b = admin(dir.path(), server(&manifest, "b"));
    const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
    let invalid = format!("invalid resource version: {PARSE_UINT}");
    let cases = [
        (
            Method::GET,
            format!("{CONFIGMAPS}?resourceVersion=abc"),
            400,
            "BadRequest",
            invalid.as_str(),
        ),
        (
            Method::GET,
            "/api/v1/configmaps?resourceVersion=abc&limit=2".to_owned(),
            400,
            "BadRequest",
            invalid.as_str(),
        ),
        (
            Method::DELETE,
            format!("{CONFIGMAPS}?resourceVersion=abc"),
            400,
            "BadRequest",
            invalid.as_str(),
        ),
        (
            Method::GET,
            format!("{CONFIGMAPS}/x?resourceVersion=abc"),
            500,
            "",
            PARSE_UINT,
        ),
        (
            Method::GET,
            format!("{CONFIGMAPS}?watch=1&resourceVersion=abc"),
            500,
            "",
            PARSE_UINT,
        ),
    ];
    for (method, path, code, reason, message) in cases {
        let reply = b.send(method.clone(), &path, &[], None).await;
        assert_eq!(reply.status.as_u16(), code, "{method} {path}: {}", reply.text());
        let status = reply.json();
        assert_eq!(status["kind"], "Status", "{path}");
        assert_eq!(status["message"], message, "{method} {path}");
        assert_eq!(
            status["reason"].as_str().unwrap_or_default(),
            reason,
            "{method} {path}"
        );
    }
    if kubectl_available() {
        let kubeconfig =
            std::path::PathBuf::from(server(&manifest, "b")["kubeconfig"].as_str().expect("kubeconfig"));
        let (ok, _, err) = tokio::task::spawn_blocking(move || {
            kubectl(
                &kubeconfig,
                &[
                    "get",
                    "--raw",
                    "/api/v1/namespaces/default/configmaps?resourceVersion=abc",
                ],
            )
        })
        .await
        .expect("kubectl ran");
        assert!(!ok);
        assert!(err.contains("Error from server (BadRequest)"), "{err}");
    }
    drop(demo);
}
