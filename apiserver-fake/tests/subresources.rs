//! What the subresources a kubelet or a controller would serve answer on a cluster of fakes, code and
//! body, as kube-apiserver answers them for a pod without a node (`pkg/registry/core/pod/strategy.go`),
//! plus the writes that change one part of an object only.

mod support;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use support::{TestClient, cluster, member};

const PODS: &str = "/api/v1/namespaces/default/pods";

/// Status line and body (JSON where it is JSON), with the uid redacted.
async fn answer(client: &TestClient, method: Method, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string());
    let reply = client.send(method.clone(), path, &[], body.as_deref()).await;
    let mut shown = serde_json::from_slice::<Value>(&reply.body).unwrap_or_else(|_| json!(reply.text()));
    if let Some(uid) = shown.pointer_mut("/details/uid") {
        *uid = json!("[uid]");
    }
    json!({"request": format!("{method} {path}"), "code": reply.status.as_u16(), "body": shown})
}

#[tokio::test]
async fn pod_subresources_without_a_node_answer_as_kube_apiserver() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}, {"name": "sidecar", "image": "busybox"}]}});
    assert_eq!(
        client.post(PODS, &pod.to_string()).await.status,
        StatusCode::CREATED
    );
    let web = format!("{PODS}/web");
    let mut answers = Vec::new();
    for (method, path) in [
        (Method::GET, format!("{web}/log?container=web")),
        (Method::GET, format!("{web}/log")),
        (Method::GET, format!("{web}/log?container=nope")),
        (
            Method::POST,
            format!("{web}/exec?container=web&command=ls&stdout=true"),
        ),
        (Method::GET, format!("{web}/attach?container=sidecar&stdout=true")),
        (Method::POST, format!("{web}/portforward?ports=80")),
        (Method::GET, format!("{web}/proxy/")),
        (Method::GET, format!("{PODS}/missing/log")),
    ] {
        answers.push(answer(&client, method, &path, None).await);
    }
    // Binding assigns the node once; then the kubelet is what is missing.
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"},
        "target": {"kind": "Node", "name": "node-1"}});
    answers.push(
        answer(
            &client,
            Method::POST,
            &format!("{web}/binding"),
            Some(binding.clone()),
        )
        .await,
    );
    answers.push(answer(&client, Method::POST, &format!("{web}/binding"), Some(binding)).await);
    // The node must exist (404 until it does), then its kubelet is not there.
    answers.push(answer(&client, Method::GET, &format!("{web}/log?container=web"), None).await);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}});
    assert_eq!(
        client.post("/api/v1/nodes", &node.to_string()).await.status,
        StatusCode::CREATED
    );
    answers.push(answer(&client, Method::GET, &format!("{web}/log?container=web"), None).await);
    let bound = client.get(&web).await.json();
    assert_eq!(bound["spec"]["nodeName"], "node-1");
    assert_eq!(bound["status"]["conditions"][0]["type"], "PodScheduled");
    // Eviction deletes the pod.
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web"}});
    answers.push(answer(&client, Method::POST, &format!("{web}/eviction"), Some(eviction)).await);
    assert_eq!(client.get(&web).await.status, StatusCode::NOT_FOUND);
    insta::assert_yaml_snapshot!("pod_subresources_without_a_node", answers);
    cluster.shutdown().await;
}

#[tokio::test]
async fn approval_and_ephemeral_container_writes_change_only_their_part() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "c"}, "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
        "signerName": "example.com/signer", "usages": ["client auth"]}});
    assert_eq!(
        client.post(csrs, &csr.to_string()).await.status,
        StatusCode::CREATED
    );
    // `kubectl certificate approve` PUTs the whole CSR with an Approved condition.
    let mut approved = client.get(&format!("{csrs}/c")).await.json();
    approved["spec"]["signerName"] = json!("ignored");
    approved["metadata"]["labels"] = json!({"ignored": "too"});
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
        "reason": "KubectlApprove", "message": "This CSR was approved by kubectl certificate approve."}]});
    let reply = client
        .send(
            Method::PUT,
            &format!("{csrs}/c/approval"),
            &[],
            Some(&approved.to_string()),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let stored = client.get(&format!("{csrs}/c")).await.json();
    assert_eq!(stored["spec"]["signerName"], "example.com/signer");
    assert!(stored["metadata"].get("labels").is_none());
    let condition = &stored["status"]["conditions"][0];
    assert_eq!(condition["reason"], "KubectlApprove");
    assert!(condition["lastUpdateTime"].is_string() && condition["lastTransitionTime"].is_string());
    // Denying as well, or dropping the approval, is refused.
    let mut both = stored.clone();
    both["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Denied", "status": "True"}));
    let mut dropped = stored.clone();
    dropped["status"]["conditions"] = json!([]);
    let mut refusals = Vec::new();
    for body in [both, dropped] {
        refusals.push(answer(&client, Method::PUT, &format!("{csrs}/c/approval"), Some(body)).await);
    }

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}});
    assert_eq!(
        client.post(PODS, &pod.to_string()).await.status,
        StatusCode::CREATED
    );
    let debug = json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox"}],
        "containers": [{"name": "web", "image": "changed"}]}});
    let reply = client
        .send(
            Method::PATCH,
            &format!("{PODS}/web/ephemeralcontainers"),
            &[("content-type", "application/strategic-merge-patch+json")],
            Some(&debug.to_string()),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let pod = reply.json();
    assert_eq!(
        pod["spec"]["containers"][0]["image"], "nginx",
        "only ephemeral containers change"
    );
    assert_eq!(
        pod["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    for body in [
        json!({"spec": {"ephemeralContainers": [{"name": "web", "image": "busybox"},
            {"name": "debugger", "image": "busybox"}]}}),
        json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "alpine"}]}}),
    ] {
        let reply = client
            .send(
                Method::PATCH,
                &format!("{PODS}/web/ephemeralcontainers"),
                &[("content-type", "application/merge-patch+json")],
                Some(&body.to_string()),
            )
            .await;
        refusals.push(json!({"code": reply.status.as_u16(), "body": reply.json()}));
    }
    insta::assert_yaml_snapshot!("approval_and_ephemeral_container_refusals", refusals);
    cluster.shutdown().await;
}

/// The claims of a JWT, with what varies between runs redacted.
fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = data_encoding::BASE64URL_NOPAD
        .decode(payload.as_bytes())
        .expect("base64url");
    let mut claims: Value = serde_json::from_slice(&bytes).expect("JSON");
    for field in ["exp", "iat", "nbf", "jti"] {
        claims[field] = json!(format!("[{field}]"));
    }
    for object in ["pod", "serviceaccount", "node"] {
        if let Some(uid) = claims.pointer_mut(&format!("/kubernetes.io/{object}/uid")) {
            *uid = json!("[uid]");
        }
    }
    claims
}

#[tokio::test]
async fn a_token_bound_to_a_pod_names_it_and_its_node_and_dies_with_it() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let client = TestClient::admin(&cluster, 0);
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}});
    let accounts = "/api/v1/namespaces/default/serviceaccounts";
    assert_eq!(
        client.post(accounts, &account.to_string()).await.status,
        StatusCode::CREATED
    );
    let other = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "other"}});
    assert_eq!(
        client.post(accounts, &other.to_string()).await.status,
        StatusCode::CREATED
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}});
    assert_eq!(
        client.post("/api/v1/nodes", &node.to_string()).await.status,
        StatusCode::CREATED
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"serviceAccountName": "robot", "nodeName": "node-1",
            "containers": [{"name": "web", "image": "nginx"}]}});
    let created = client.post(PODS, &pod.to_string()).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let pod_uid = created.json()["metadata"]["uid"].as_str().unwrap().to_owned();
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["vault"], "expirationSeconds": 600,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": pod_uid}}});
    let reply = client
        .post(&format!("{accounts}/robot/token"), &request.to_string())
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let mut response = reply.json();
    let token = response["status"]["token"].as_str().unwrap().to_owned();
    response["status"]["token"] = json!("[token]");
    response["status"]["expirationTimestamp"] = json!("[timestamp]");
    response["spec"]["boundObjectRef"]["uid"] = json!("[uid]");
    // Another account's pod, or a stale uid, cannot be bound.
    let mut wrong_account = request.clone();
    wrong_account["spec"]["boundObjectRef"]["uid"] = json!(null);
    let mut refusals = Vec::new();
    for (path, body) in [
        (format!("{accounts}/other/token"), wrong_account),
        (format!("{accounts}/robot/token"), {
            let mut stale = request.clone();
            stale["spec"]["boundObjectRef"]["uid"] = json!("0000");
            stale
        }),
        (
            format!("{accounts}/robot/token"),
            json!({"spec": {"expirationSeconds": 60}}),
        ),
    ] {
        refusals.push(answer(&client, Method::POST, &path, Some(body)).await);
    }
    // Reviewed for its audience, the token names the pod and its node; for another audience it fails.
    let review = |audiences: Value| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token, "audiences": audiences}})
        .to_string()
    };
    let reviews = "/apis/authentication.k8s.io/v1/tokenreviews";
    let mut reviewed = client.post(reviews, &review(json!(["vault"]))).await.json();
    reviewed["spec"]["token"] = json!("[token]");
    for key in ["credential-id", "pod-uid", "node-uid"] {
        reviewed["status"]["user"]["extra"][format!("authentication.kubernetes.io/{key}")] = json!(["[id]"]);
    }
    reviewed["status"]["user"]["uid"] = json!("[uid]");
    let other_audience = client.post(reviews, &review(json!(["api"]))).await.json();
    assert_eq!(
        other_audience["status"]["error"],
        "[invalid bearer token, token audiences is invalid]"
    );
    // Once the pod is gone, the token is.
    let deleted = client
        .send(Method::DELETE, &format!("{PODS}/web"), &[], None)
        .await;
    assert_eq!(deleted.status, StatusCode::OK);
    let after = client.post(reviews, &review(json!(["vault"]))).await.json();
    assert_eq!(
        after["status"]["error"],
        "[invalid bearer token, pod default/web not found]"
    );
    insta::assert_yaml_snapshot!(
        "pod_bound_token",
        json!({"response": response, "claims": claims_of(&token), "review": reviewed, "refusals": refusals})
    );
    cluster.shutdown().await;
}
