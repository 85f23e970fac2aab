//! Who the peer believes it serves (checklist items 19–22).

mod support;

use e2e::{ClientIdentity, JANE_TOKEN, PeerResolutionMode};
use http::Method;
use serde_json::json;
use support::*;

const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

fn review() -> serde_json::Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_identity_is_forwarded_as_remote_headers_replacing_spoofed_ones() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let jane = cluster
            .client_as("b", ClientIdentity::BearerToken(JANE_TOKEN.to_owned()))
            .unwrap();
        let reply = jane
            .request(Method::GET, JOBS)
            .header("X-Remote-User", "mallory")
            .header("X-Remote-Group", "system:masters")
            .send()
            .await
            .unwrap();
        assert_eq!(reply.code(), 200, "{mode:?}");
        let seen = cluster.server("a").unwrap().served_requests();
        let user = &seen
            .iter()
            .rev()
            .find(|r| r.uri == JOBS && r.peer_proxied)
            .expect("a served it")
            .user;
        assert_eq!(user.name, "jane", "{mode:?}");
        assert_eq!(user.uid, "jane-uid", "{mode:?}");
        assert_eq!(
            user.groups,
            ["developers", "qa", "system:authenticated"],
            "{mode:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_answers_whoami_with_the_forwarded_identity() {
    // b does not serve authentication.k8s.io/v1, so its SelfSubjectReview goes to a, which answers
    // with the user it believes it serves. (StorageVersion mode keeps it local: reviews have no
    // storage, hence no StorageVersion; see storage_version.rs.)
    let cluster = a_and_b_with(
        PeerResolutionMode::Discovery,
        |a| a,
        |b| b.runtime_config("authentication.k8s.io/v1=false"),
    )
    .await;
    wait_until_b_proxies_jobs(&cluster).await;
    let jane = cluster
        .client_as("b", ClientIdentity::BearerToken(JANE_TOKEN.to_owned()))
        .unwrap();
    let mark = log_mark(&cluster, "a");
    let reply = wait_for(&jane, Method::POST, WHOAMI, Some(review()), 201).await;
    assert_eq!(reply.json()["status"]["userInfo"]["username"], "jane");
    assert_eq!(
        proxied_requests_seen_by(&cluster, "a", mark),
        [format!("POST {WHOAMI} as jane")],
        "a answered it"
    );
    insta::assert_yaml_snapshot!("whoami_via_b_answered_by_a_as_jane", reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_authorization_header_is_not_forwarded() {
    // a believes no front proxy (allowed names exclude b's proxy certificate), so a request b proxies
    // arrives at a without an identity a accepts. If b forwarded the client's bearer token, a would
    // authenticate jane from it; it answers 401 instead.
    let cluster = a_and_b_with(
        PeerResolutionMode::StorageVersion,
        |a| a.flag("--requestheader-allowed-names=someone-else"),
        |b| b,
    )
    .await;
    let jane = cluster
        .client_as("b", ClientIdentity::BearerToken(JANE_TOKEN.to_owned()))
        .unwrap();
    let reply = wait_for(&jane, Method::GET, JOBS, None, 401).await;
    assert_eq!(reply.json()["reason"], "Unauthorized");
    insta::assert_yaml_snapshot!("jobs_via_b_with_bearer_token_reaches_a_without_it", reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonated_user_is_the_identity_forwarded() {
    // kube-apiserver's impersonation filter runs before the proxy: the peer sees the impersonated user.
    let cluster = a_and_b_with(
        PeerResolutionMode::Discovery,
        |a| a,
        |b| b.runtime_config("authentication.k8s.io/v1=false"),
    )
    .await;
    wait_until_b_proxies_jobs(&cluster).await;
    let admin = cluster.client("b").unwrap();
    let reply = admin
        .request(Method::POST, WHOAMI)
        .header("Impersonate-User", "jane")
        .header("Impersonate-Group", "developers")
        .json(&review())
        .send()
        .await
        .unwrap();
    assert_eq!(
        reply.json()["status"]["userInfo"]["username"],
        "jane",
        "{reply:?}"
    );
    insta::assert_yaml_snapshot!("whoami_via_b_impersonating_jane", reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_id_of_the_source_request_reaches_the_peer() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let reply = cluster
            .client("b")
            .unwrap()
            .request(Method::GET, JOBS)
            .header("Audit-ID", "e2e-audit-0001")
            .send()
            .await
            .unwrap();
        assert_eq!(reply.code(), 200);
        // kube-apiserver answers with the Audit-Id it used; through the proxy that is a's, which must be
        // the one b propagated.
        let ids = reply.raw_header("audit-id");
        assert!(!ids.is_empty(), "{mode:?}: no Audit-Id in the response");
        assert!(ids.iter().all(|id| id == "e2e-audit-0001"), "{mode:?}: {ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_request_is_rejected_by_the_source_and_never_proxied() {
    let mut answers = Vec::new();
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let anonymous = cluster.client_as("b", ClientIdentity::Anonymous).unwrap();
        let reply = anonymous.get(JOBS).await.unwrap();
        assert_eq!(reply.code(), 401, "{mode:?}");
        let bad_token = cluster
            .client_as("b", ClientIdentity::BearerToken("not-a-token".into()))
            .unwrap();
        assert_eq!(bad_token.get(JOBS).await.unwrap().response(), reply.response());
        assert_eq!(
            requests_seen_by(&cluster, "a", mark, JOBS),
            0,
            "{mode:?}: nothing reached a"
        );
        answers.push(reply);
    }
    assert_eq!(answers[0], answers[1]);
    insta::assert_yaml_snapshot!("jobs_via_b_without_credentials_is_401_from_b", answers[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_request_is_rejected_by_the_source_and_never_proxied() {
    let mut answers = Vec::new();
    for mode in MODES {
        // b denies everyone but system:masters; a (which serves jobs) allows all.
        let cluster = a_and_b_with(mode, |a| a, |b| b.flag("--authorization-mode=AlwaysDeny")).await;
        // The admin is in system:masters: still allowed by b, hence proxied.
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let jane = cluster
            .client_as("b", ClientIdentity::BearerToken(JANE_TOKEN.to_owned()))
            .unwrap();
        let reply = jane.get(JOBS).await.unwrap();
        assert_eq!(reply.code(), 403, "{mode:?}: {reply:?}");
        assert_eq!(reply.json()["reason"], "Forbidden");
        // Impersonating a member of system:masters needs permission to impersonate, which jane lacks.
        let impersonating = jane
            .request(Method::GET, JOBS)
            .header("Impersonate-User", "admin")
            .header("Impersonate-Group", "system:masters")
            .send()
            .await
            .unwrap();
        assert_eq!(impersonating.code(), 403, "{mode:?}: {impersonating:?}");
        assert_eq!(
            impersonating.json()["message"],
            "users \"admin\" is forbidden: User \"jane\" cannot impersonate resource \"users\" in API group \"\" \
             at the cluster scope: Everything is forbidden."
        );
        assert_eq!(
            requests_seen_by(&cluster, "a", mark, JOBS),
            0,
            "{mode:?}: nothing reached a"
        );
        answers.push(reply);
    }
    assert_eq!(answers[0], answers[1]);
    insta::assert_yaml_snapshot!("jobs_via_b_as_jane_when_b_denies_is_403_from_b", answers[1]);
}

/// `--authorization-mode=Node,RBAC` (as kubeadm sets it) on both servers, with kube-apiserver's bootstrap
/// policy: a user without a binding gets RBAC's 403 from the server it called (no reason after the
/// message, as upstream's RBAC has no opinion rather than a denial), and nothing reaches the peer; once an
/// admin binds the bootstrap `edit` ClusterRole (aggregated from `system:aggregate-to-edit`) to the user
/// in `default`, its request is proxied and the serving peer's RBAC allows it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_forbids_unbound_users_at_the_source_and_bound_users_are_proxied() {
    let mut denials = Vec::new();
    let mut grants = Vec::new();
    for mode in MODES {
        let rbac = |s: e2e::ServerBuilder| s.flag("--authorization-mode=Node,RBAC");
        let cluster = a_and_b_with(mode, rbac, rbac).await;
        // The admin is in system:masters, bound to cluster-admin.
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let jane = cluster
            .client_as("b", ClientIdentity::BearerToken(JANE_TOKEN.to_owned()))
            .unwrap();
        let denied = jane.get(JOBS).await.unwrap();
        assert_eq!(denied.code(), 403, "{mode:?}: {denied:?}");
        assert_eq!(
            denied.json()["message"],
            "jobs.batch is forbidden: User \"jane\" cannot list resource \"jobs\" in API group \"batch\" in \
             the namespace \"default\""
        );
        assert_eq!(
            requests_seen_by(&cluster, "a", mark, JOBS),
            0,
            "{mode:?}: nothing reached a"
        );
        // Discovery is open to every authenticated user (system:discovery).
        assert_eq!(jane.get("/apis").await.unwrap().code(), 200);

        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "jane-edit", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}],
        });
        let created = cluster
            .client("b")
            .unwrap()
            .post_json(
                "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                &binding,
            )
            .await
            .unwrap();
        assert_eq!(created.code(), 201, "{created:?}");
        let granted = wait_for(&jane, Method::GET, JOBS, None, 200).await;
        assert!(
            requests_seen_by(&cluster, "a", mark, JOBS) >= 1,
            "{mode:?}: proxied to a, which allowed jane too"
        );
        let secrets_elsewhere = jane.get("/api/v1/namespaces/kube-system/secrets").await.unwrap();
        assert_eq!(secrets_elsewhere.code(), 403, "the binding is for default only");
        denials.push(denied);
        grants.push(granted);
    }
    assert_eq!(denials[0], denials[1]);
    insta::assert_yaml_snapshot!(
        "jobs_via_b_as_jane_without_an_rbac_binding_is_403_from_b",
        denials[1]
    );
    insta::assert_yaml_snapshot!("jobs_via_b_as_jane_bound_to_edit_is_proxied_to_a", grants[1]);
}

async fn wait_for(
    client: &e2e::HttpsClient,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
    code: u16,
) -> e2e::Exchange {
    let last = std::sync::Mutex::new(None);
    e2e::eventually(&format!("{method} {path} answers {code}"), SETTLE, || async {
        let mut request = client.request(method.clone(), path);
        if let Some(body) = &body {
            request = request.json(body);
        }
        let reply = request.send().await.ok()?;
        if reply.code() == code {
            return Some(reply);
        }
        *last.lock().unwrap() = Some(reply);
        None
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: last {:?}", last.lock().unwrap()))
}
