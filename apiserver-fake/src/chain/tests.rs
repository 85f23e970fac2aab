//! In-memory tests of the handler chain, as axum's own tests exercise a router: the real chain of
//! [`super::handler_chain`] over a test [`ServerState`], one request at a time with
//! [`tower::ServiceExt::oneshot`], no TLS, socket or background task. They check what a client sees:
//! status codes, `Status` bodies and headers.

use std::sync::Arc;

use axum::body::Body;
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::audit::{AuditLog, AuditPolicy};
use super::authentication::Authenticator;
use super::flow_control::{FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER};
use super::{HandlerChain, ServerContext, handler_chain};
use crate::server::ServerState;

/// The bearer token of `admin` (group `system:masters`) in the test token file.
const ADMIN: &str = "admin-token";
/// The bearer token of `bob`, in no group.
const BOB: &str = "bob-token";

/// The chain of one test server, started with `flags` and a token file naming `admin` and `bob`.
async fn chain(flags: &[&str]) -> (HandlerChain, Arc<ServerState>) {
    let (state, authenticator) = server(flags).await;
    (handler_chain(state.clone(), authenticator, None), state)
}

/// One test server, started with `flags` and a token file naming `admin` and `bob`, and its
/// authenticator, before a chain holds the server.
async fn server(flags: &[&str]) -> (Arc<ServerState>, Arc<Authenticator>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ADMIN},admin,1,\"system:masters\"\n{BOB},bob,2\n"),
    )
    .expect("token file");
    let token_flag = format!("--token-auth-file={}", tokens.display());
    let mut args = vec![token_flag.as_str()];
    args.extend_from_slice(flags);
    // The authenticator reads the token file when it is built, so the directory may go afterwards.
    ServerState::for_test(&args).await
}

/// A request to `path` with `token` as bearer token, if any.
fn request(method: &str, path: &str, token: Option<&str>) -> http::request::Builder {
    let builder = Request::builder().method(method).uri(path);
    match token {
        Some(token) => builder.header(header::AUTHORIZATION, format!("Bearer {token}")),
        None => builder,
    }
}

/// Sends `req` through `chain`: the status, headers and body of the answer.
async fn send(chain: HandlerChain, req: Request<Body>) -> (StatusCode, http::HeaderMap, Vec<u8>) {
    let response = chain.oneshot(req).await.expect("the chain is infallible");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("body").to_bytes().to_vec();
    (parts.status, parts.headers, body)
}

/// `body` as a kube `Status` of `code`: its `reason` and `message`.
fn status(body: &[u8], code: u16) -> (String, String) {
    let status: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)));
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["code"], code, "{status}");
    (
        status["reason"].as_str().unwrap_or_default().to_owned(),
        status["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn a_request_without_credentials_gets_the_401_status() {
    let (chain, _) = chain(&[]).await;
    let req = request("GET", "/api/v1/namespaces", None)
        .body(Body::empty())
        .unwrap();
    let (code, _, body) = send(chain.clone(), req).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(status(&body, 401).0, "Unauthorized");

    let req = request("GET", "/api/v1/namespaces", Some("not-a-token"))
        .body(Body::empty())
        .unwrap();
    let (code, _, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(status(&body, 401).0, "Unauthorized");
}

#[tokio::test]
async fn health_paths_answer_without_credentials_and_readyz_names_the_unfinished_hook() {
    let (chain, _) = chain(&[]).await;
    for path in ["/livez", "/healthz"] {
        let req = request("GET", path, None).body(Body::empty()).unwrap();
        let (code, _, body) = send(chain.clone(), req).await;
        assert_eq!(code, StatusCode::OK, "{path}");
        assert_eq!(body, b"ok", "{path}");
    }
    // Nothing bootstrapped RBAC nor published an identity lease: not ready, and it says why.
    let req = request("GET", "/readyz", None).body(Body::empty()).unwrap();
    let (code, _, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains("[-]poststarthook/rbac/bootstrap-roles failed"),
        "{body}"
    );
    assert!(body.ends_with("readyz check failed\n"), "{body}");
}

#[tokio::test]
async fn a_served_resource_lists_with_200() {
    let (chain, _) = chain(&[]).await;
    let req = request("GET", "/api/v1/namespaces", Some(ADMIN))
        .body(Body::empty())
        .unwrap();
    let (code, headers, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{headers:?}"
    );
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "NamespaceList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|ns| ns["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"default"), "{names:?}");
}

#[tokio::test]
async fn what_this_server_does_not_serve_gets_404_as_upstream_answers_it() {
    let (chain, _) = chain(&["--runtime-config=batch/v1=false"]).await;
    let req = request("GET", "/apis/batch/v1/namespaces/default/jobs", Some(ADMIN))
        .body(Body::empty())
        .unwrap();
    let (code, _, body) = send(chain.clone(), req).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{}", String::from_utf8_lossy(&body));
    // A group version the server does not serve: Go's plain 404, as upstream's mux answers.
    assert_eq!(String::from_utf8_lossy(&body), "404 page not found\n");

    let req = request("GET", "/api/v1/namespaces/default/widgets", Some(ADMIN))
        .body(Body::empty())
        .unwrap();
    let (code, _, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{}", String::from_utf8_lossy(&body));
    // An unknown resource of a served group version: upstream's NotFound Status.
    let (reason, message) = status(&body, 404);
    assert_eq!(reason, "NotFound");
    assert_eq!(message, "the server could not find the requested resource");
}

#[tokio::test]
async fn a_create_with_an_unsupported_content_type_gets_415_and_without_one_is_json() {
    let (chain, _) = chain(&[]).await;
    let req = request("POST", "/api/v1/namespaces/default/configmaps", Some(ADMIN))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("name: x"))
        .unwrap();
    let (code, _, body) = send(chain.clone(), req).await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(status(&body, 415).0, "UnsupportedMediaType");

    // Without a Content-Type the body is read as JSON.
    let req = request("POST", "/api/v1/namespaces/default/configmaps", Some(ADMIN))
        .body(Body::from(r#"{"metadata":{"name":"x"},"data":{"k":"v"}}"#))
        .unwrap();
    let (code, _, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
    let created: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(created["kind"], "ConfigMap");
    assert_eq!(created["data"]["k"], "v");
}

#[tokio::test]
async fn rbac_denies_with_the_403_status_before_routing() {
    let (chain, _) = chain(&["--authorization-mode=RBAC"]).await;
    let req = request("GET", "/api/v1/namespaces/default/secrets", Some(BOB))
        .body(Body::empty())
        .unwrap();
    let (code, _, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let (reason, message) = status(&body, 403);
    assert_eq!(reason, "Forbidden");
    assert!(
        message.contains("User \"bob\" cannot list resource \"secrets\""),
        "{message}"
    );
}

/// Authorization is the innermost of the request's stages: a denied request is still answered with its
/// audit ID and priority and fairness headers, counted, audited with its status, and recorded in the
/// request log.
#[tokio::test]
async fn a_denied_request_is_audited_classified_counted_and_recorded_like_any_answer() {
    let (mut state, authenticator) = server(&["--authorization-mode=RBAC"]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.log");
    let policy = AuditPolicy::parse(
        &dir.path().join("policy.yaml"),
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .expect("policy");
    Arc::get_mut(&mut state)
        .expect("no chain holds the server yet")
        .audit = Some(AuditLog::open(&log, policy).expect("audit log"));
    let chain = handler_chain(state.clone(), authenticator, None);

    let req = request("GET", "/api/v1/namespaces/default/secrets", Some(BOB))
        .header("audit-id", "denied-audit-id")
        .body(Body::empty())
        .unwrap();
    let (code, headers, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(status(&body, 403).0, "Forbidden");
    assert_eq!(headers["audit-id"], "denied-audit-id");
    assert!(headers.contains_key(FLOW_SCHEMA_UID_HEADER), "{headers:?}");
    assert!(headers.contains_key(PRIORITY_LEVEL_UID_HEADER), "{headers:?}");

    let served = state.requests().snapshot();
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(served[0].user.name, "bob");
    assert_eq!(served[0].uri, "/api/v1/namespaces/default/secrets");
    assert_eq!(served[0].audit_id, "denied-audit-id");

    let metrics = state.metrics().render();
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("apiserver_request_total{")
                && line.contains(r#"code="403""#)
                && line.contains(r#"resource="secrets""#)
                && line.contains(r#"verb="list""#)
                && line.ends_with(" 1")),
        "{metrics}"
    );

    let events: Vec<Value> = std::fs::read_to_string(&log)
        .expect("audit log")
        .lines()
        .map(|line| serde_json::from_str(line).expect("an audit event is JSON"))
        .collect();
    let stages: Vec<&str> = events.iter().filter_map(|e| e["stage"].as_str()).collect();
    assert_eq!(stages, ["RequestReceived", "ResponseComplete"], "{events:?}");
    let complete = &events[1];
    assert_eq!(complete["auditID"], "denied-audit-id");
    assert_eq!(complete["user"]["username"], "bob");
    assert_eq!(complete["responseStatus"]["code"], 403, "{complete}");
    assert_eq!(complete["responseStatus"]["reason"], "Forbidden", "{complete}");
}

/// A URL that cannot be classified is answered before the audit ID, the request log and the metrics.
#[tokio::test]
async fn a_request_that_cannot_be_classified_gets_the_500_status_and_no_audit_id() {
    let (chain, state) = chain(&[]).await;
    let req = request("GET", "/api/v1/watch", Some(ADMIN))
        .header("audit-id", "unclassified")
        .body(Body::empty())
        .unwrap();
    let (code, headers, body) = send(chain, req).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    let (reason, message) = status(&body, 500);
    assert_eq!(reason, "InternalError");
    assert_eq!(
        message,
        "Internal error occurred: failed to create RequestInfo: unable to determine kind and namespace \
         from url, /api/v1/watch"
    );
    assert!(!headers.contains_key("audit-id"), "{headers:?}");
    assert!(state.requests().snapshot().is_empty());
    assert!(
        !state.metrics().render().contains("apiserver_request_total{"),
        "{}",
        state.metrics().render()
    );
}

#[tokio::test]
async fn answers_carry_the_default_cache_control_and_echo_the_audit_id() {
    let (chain, _) = chain(&[]).await;
    let req = request("GET", "/api/v1/namespaces/default", Some(ADMIN))
        .header("audit-id", "test-audit-id")
        .body(Body::empty())
        .unwrap();
    let (code, headers, _) = send(chain.clone(), req).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache, private");
    assert_eq!(headers["audit-id"], "test-audit-id");

    // Without one the server mints an audit ID; a 401 gets the Cache-Control default too.
    let req = request("GET", "/api/v1/namespaces", None)
        .body(Body::empty())
        .unwrap();
    let (code, headers, _) = send(chain, req).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache, private");
}

#[tokio::test]
async fn a_request_a_peer_proxied_is_served_here_and_recorded_as_proxied() {
    let (chain, state) = chain(&[]).await;
    let req = request("GET", "/api/v1/namespaces", Some(ADMIN))
        .header(mvp_core::PEER_PROXIED_HEADER, "true")
        .body(Body::empty())
        .unwrap();
    let (code, _, _) = send(chain.clone(), req).await;
    assert_eq!(code, StatusCode::OK);
    let req = request("GET", "/api/v1/namespaces", Some(ADMIN))
        .body(Body::empty())
        .unwrap();
    let (code, _, _) = send(chain, req).await;
    assert_eq!(code, StatusCode::OK);

    let served = state.requests().snapshot();
    let proxied: Vec<bool> = served.iter().map(|r| r.peer_proxied).collect();
    assert_eq!(proxied, [true, false], "{served:?}");
    assert!(served.iter().all(|r| r.user.name == "admin"), "{served:?}");
}
