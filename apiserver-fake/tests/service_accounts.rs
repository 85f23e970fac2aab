//! ServiceAccount tokens and the pod subresources a kubelet would serve, driven from outside: the
//! built binary's `cluster` command (servers `a`, lacking batch/v1, and `b`) and kubectl.

mod support;

use std::path::Path;

use http::StatusCode;
use serde_json::{Value, json};
use support::demo::{Demo, admin, server};
use support::{kubectl, kubectl_available};

/// A kubeconfig for `url` that authenticates with `token` only (no client certificate).
fn token_kubeconfig(dir: &Path, name: &str, url: &str, token: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.token.kubeconfig"));
    let ca = dir.join("ca.crt");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n    certificate-authority: {}\n\
         users:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n\
         current-context: ctx\n",
        ca.display()
    );
    std::fs::write(&path, text).expect("kubeconfig written");
    path
}

fn ok(result: (bool, String, String)) -> String {
    let (success, stdout, stderr) = result;
    assert!(success, "kubectl failed: {stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_issues_a_jwt_both_servers_accept_until_the_account_is_deleted() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let (a, b) = (server(&manifest, "a"), server(&manifest, "b"));
    let b_config = dir.path().join("b.kubeconfig");
    ok(kubectl(&b_config, &["create", "serviceaccount", "robot"]));
    let token = ok(kubectl(&b_config, &["create", "token", "robot", "--duration=1h"]));
    let token = token.trim().to_owned();

    // A JWT with upstream's claims, ES256-signed with the cluster's sa.key.
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "{token}");
    let decode = |part: &str| -> Value {
        let bytes = data_encoding::BASE64URL_NOPAD
            .decode(part.as_bytes())
            .expect("base64url");
        serde_json::from_slice(&bytes).expect("JSON")
    };
    let header = decode(parts[0]);
    assert_eq!(header["alg"], "ES256");
    assert!(header["kid"].as_str().is_some_and(|kid| !kid.is_empty()));
    let claims = decode(parts[1]);
    assert_eq!(claims["iss"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(
        claims["aud"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(claims["sub"], "system:serviceaccount:default:robot");
    assert_eq!(claims["kubernetes.io"]["namespace"], "default");
    assert_eq!(claims["kubernetes.io"]["serviceaccount"]["name"], "robot");
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );
    assert!(claims["jti"].as_str().is_some());

    // The token authenticates on both servers; through `a` a Job request is proxied to `b` as the
    // service account.
    for s in [a, b] {
        let name = s["name"].as_str().unwrap();
        let config = token_kubeconfig(dir.path(), name, s["url"].as_str().unwrap(), &token);
        let whoami = ok(kubectl(
            &config,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
            ],
        ));
        assert_eq!(
            whoami,
            "system:serviceaccount:default:robot [\"system:serviceaccounts\",\"system:serviceaccounts:default\",\"system:authenticated\"]",
            "via {name}"
        );
        ok(kubectl(&config, &["get", "jobs", "-o", "name"]));
    }

    // TokenReview (no name needed) says the same.
    let client = admin(dir.path(), a);
    let review = client
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
                .to_string(),
        )
        .await;
    assert_eq!(review.status, StatusCode::CREATED, "{}", review.text());
    let status = &review.json()["status"];
    assert_eq!(status["authenticated"], true);
    assert_eq!(status["user"]["username"], "system:serviceaccount:default:robot");
    assert_eq!(
        status["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );

    // A token shorter than ten minutes is refused as upstream refuses it.
    let (success, _, stderr) = kubectl(&b_config, &["create", "token", "robot", "--duration=5m"]);
    assert!(!success);
    assert!(
        stderr.contains("may not specify a duration less than 10 minutes"),
        "{stderr}"
    );

    // Once the account is gone, its token is not accepted any more.
    ok(kubectl(&b_config, &["delete", "serviceaccount", "robot"]));
    let config = token_kubeconfig(dir.path(), "b", b["url"].as_str().unwrap(), &token);
    let (success, _, stderr) = kubectl(&config, &["get", "configmaps"]);
    assert!(!success);
    assert!(stderr.contains("Unauthorized"), "{stderr}");
    let review = client
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            &json!({"spec": {"token": token}}).to_string(),
        )
        .await;
    assert_eq!(review.status, StatusCode::CREATED, "{}", review.text());
    assert!(review.json()["status"].get("authenticated").is_none());
    assert!(
        review.json()["status"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("not found")),
        "{}",
        review.text()
    );
    drop(demo);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_and_exec_answer_as_for_a_pod_without_a_node() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    demo.wait_for_manifest(dir.path());
    for name in ["a", "b"] {
        let config = dir.path().join(format!("{name}.kubeconfig"));
        let pod = format!("web-{name}");
        ok(kubectl(&config, &["run", &pod, "--image=nginx"]));
        // 204, empty body: kubectl prints nothing and succeeds.
        assert_eq!(ok(kubectl(&config, &["logs", &pod])), "");
        let (success, _, stderr) = kubectl(&config, &["exec", &pod, "--", "ls"]);
        assert!(!success);
        assert!(
            stderr.contains(&format!("pod {pod} does not have a host assigned")),
            "{stderr}"
        );
        let (success, _, stderr) = kubectl(&config, &["logs", &pod, "-c", "nope"]);
        assert!(!success);
        assert!(
            stderr.contains(&format!("container nope is not valid for pod {pod}")),
            "{stderr}"
        );
    }
    drop(demo);
}
