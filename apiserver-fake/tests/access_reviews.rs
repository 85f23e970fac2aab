//! Access reviews as a user meets them: `kubectl auth can-i` (SelfSubjectAccessReview), `can-i --as`,
//! `can-i --list` (SelfSubjectRulesReview), and the reviews' own validation, against the built binary's
//! `cluster` command, in RBAC mode and in the default AlwaysAllow mode.

mod support;

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use support::demo::{Demo, admin, server};
use support::{kubectl, kubectl_available};

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SSRR: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// Runs kubectl against `kubeconfig` off the async runtime.
async fn run(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let kubeconfig = kubeconfig.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&kubeconfig, &args)
    })
    .await
    .expect("kubectl ran")
}

/// `cluster --authorization-mode Node,RBAC`: `can-i` answers from RBAC, for the caller and, with
/// `--as`, for an impersonated user, before and after a RoleBinding; `can-i --list` lists the rules
/// RBAC binds to the user in the namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_answers_from_rbac_in_all_three_forms() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--authorization-mode", "Node,RBAC"]);
    let manifest = demo.wait_for_manifest(dir.path());
    let kubeconfig =
        std::path::PathBuf::from(server(&manifest, "a")["kubeconfig"].as_str().expect("kubeconfig"));

    // The admin (system:masters) may do anything.
    let (ok, out, err) = run(&kubeconfig, &["auth", "can-i", "create", "jobs.batch"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), "yes");

    // jane has no binding: no (kubectl exits 1), as upstream's RBAC with no opinion and no reason.
    let (ok, out, err) = run(
        &kubeconfig,
        &["auth", "can-i", "create", "jobs.batch", "--as", "jane"],
    )
    .await;
    assert!(!ok, "{out}{err}");
    assert_eq!(out.trim(), "no");
    let (ok, out, err) = run(
        &kubeconfig,
        &[
            "create",
            "rolebinding",
            "jane-edit",
            "--clusterrole=edit",
            "--user=jane",
            "-n",
            "default",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    // The policy follows the store through an informer: the binding counts once the server has seen it.
    let out = support::eventually("jane's binding to take effect", Duration::from_secs(10), || {
        let kubeconfig = kubeconfig.clone();
        async move {
            let (ok, out, _) = run(
                &kubeconfig,
                &["auth", "can-i", "create", "jobs.batch", "--as", "jane"],
            )
            .await;
            ok.then_some(out)
        }
    })
    .await;
    assert_eq!(out.trim(), "yes");
    let (ok, out, _) = run(
        &kubeconfig,
        &[
            "auth",
            "can-i",
            "create",
            "jobs.batch",
            "--as",
            "jane",
            "-n",
            "other",
        ],
    )
    .await;
    assert!(!ok);
    assert_eq!(out.trim(), "no", "the binding is in default only");

    // --list: the rules bound to jane in default (edit's, through the aggregation of
    // system:aggregate-to-edit) and those every authenticated user has (system:basic-user, discovery).
    let (ok, out, err) = run(
        &kubeconfig,
        &["auth", "can-i", "--list", "--as", "jane", "-n", "default"],
    )
    .await;
    assert!(ok, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("Resources"), "{out}");
    let row = |resource: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(resource))
            .unwrap_or_else(|| panic!("no row for {resource}:\n{out}"))
            .to_string()
    };
    assert!(row("selfsubjectaccessreviews.authorization.k8s.io").ends_with("[create]"));
    assert!(row("jobs.batch").contains("create"), "{}", row("jobs.batch"));
    assert!(
        out.contains("/healthz"),
        "non-resource rules of system:public-info-viewer:\n{out}"
    );
    let (ok, out, _) = run(
        &kubeconfig,
        &["auth", "can-i", "--list", "--as", "jane", "-n", "other"],
    )
    .await;
    assert!(ok);
    assert!(!out.lines().any(|l| l.starts_with("jobs.batch")), "{out}");
    drop(demo);
}

/// The default authorizer (AlwaysAllow): every verb on everything, and `--list` says so with `*`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_under_always_allow_says_yes_to_everything() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let kubeconfig =
        std::path::PathBuf::from(server(&manifest, "b")["kubeconfig"].as_str().expect("kubeconfig"));
    let (ok, out, err) = run(
        &kubeconfig,
        &["auth", "can-i", "delete", "nodes", "--as", "nobody"],
    )
    .await;
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), "yes");
    let (ok, out, err) = run(&kubeconfig, &["auth", "can-i", "--list", "--as", "nobody"]).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.lines().any(|l| l.starts_with("*.*") && l.ends_with("[*]")),
        "{out}"
    );
    drop(demo);
}

/// The reviews' bodies as upstream answers them, over the wire to the built binary: no name needed,
/// reasons from RBAC, upstream's 422s and 400s, and SelfSubjectReview decoding its body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_bodies_get_upstreams_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &["--authorization-mode", "Node,RBAC"]);
    let manifest = demo.wait_for_manifest(dir.path());
    let client = admin(dir.path(), server(&manifest, "a"));
    let post = |path: &'static str, body: Value| {
        let client = client.clone();
        async move { client.post(path, &body.to_string()).await }
    };

    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "group": "batch", "resource": "jobs"}}});
    let reply = post(SSAR, ssar).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["kind"], "SelfSubjectAccessReview");
    assert_eq!(
        body["status"],
        json!({"allowed": true}),
        "system:masters: allowed, no reason"
    );
    assert_eq!(body["spec"]["resourceAttributes"]["resource"], "jobs");

    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "jane", "groups": ["system:authenticated"], "nonResourceAttributes": {"path": "/apis", "verb": "get"}}});
    let reply = post(SAR, sar).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    assert_eq!(
        reply.json()["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""})
    );
    let nobody = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "secrets"}}});
    let reply = post(SAR, nobody).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        reply.json()["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );

    let empty =
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}});
    let reply = post(SSAR, empty).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let status = reply.json();
    assert_eq!(
        status["message"],
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    assert_eq!(status["reason"], "Invalid");

    let rules =
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {}});
    let reply = post(SSRR, rules).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["message"], "no namespace on request");
    let rules = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}});
    let reply = post(SSRR, rules).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["spec"], json!({}));
    assert_eq!(body["status"]["incomplete"], false);
    assert!(
        body["status"]["resourceRules"].as_array().is_some_and(
            |rules| rules.contains(&json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}))
        ),
        "cluster-admin's rule: {body}"
    );

    // SelfSubjectReview decodes its body as any create does.
    for (body, code, message) in [
        ("not json", 400, "couldn't get version/kind; json parse error"),
        (
            r#"{"apiVersion":"v1","kind":"Pod"}"#,
            400,
            "the API version in the data (v1) does not match",
        ),
        ("[1]", 400, "json: cannot unmarshal array"),
    ] {
        let reply = client.send(Method::POST, WHOAMI, &[], Some(body)).await;
        assert_eq!(reply.status.as_u16(), code, "{body}: {}", reply.text());
        let status = reply.json();
        assert_eq!(status["kind"], "Status");
        assert!(
            status["message"].as_str().unwrap_or_default().contains(message),
            "{body}: {status}"
        );
    }
    let reply = client
        .send(
            Method::POST,
            WHOAMI,
            &[],
            Some(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.json()["status"]["userInfo"]["username"], "admin");
    drop(demo);
}
