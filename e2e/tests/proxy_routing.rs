//! Which requests the Mixed Version Proxy routes to a peer, and how (checklist items 1–4, 6, 16 and the
//! seed scenario "a server without batch/v1 serves jobs through a peer").

mod support;

use e2e::Exchange;
use http::Method;
use serde_json::{Value, json};
use support::*;

/// A compact row of a table of exchanges: request, status, content type and body kind.
fn row(exchange: &Exchange) -> Value {
    let body = match exchange.json() {
        Value::Null => json!(exchange.raw_text()),
        json => match json["kind"].as_str() {
            Some(kind) => json!(
                format!("{kind} {}", json["reason"].as_str().unwrap_or(""))
                    .trim()
                    .to_owned()
            ),
            None => json!("JSON document without kind"),
        },
    };
    json!({
        "request": exchange.request,
        "status": exchange.status,
        "content-type": exchange.header("content-type"),
        "body": body,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_list_on_server_without_batch_is_served_by_a_peer() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        let a = cluster.client("a").unwrap();
        let created = a.post_json(JOBS, &job("test-job")).await.unwrap();
        assert_eq!(created.code(), 201, "{created:?}");
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let listed = cluster.client("b").unwrap().get(JOBS).await.unwrap();
        let names: Vec<&str> = listed.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|j| j["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["test-job"], "{mode:?}");
        assert_eq!(
            proxied_requests_seen_by(&cluster, "a", mark),
            [format!("GET {JOBS} as admin")],
            "{mode:?}"
        );
        // Keys sorted: the etcd store gives objects Go's field order, the in-memory store the order
        // they were written in.
        insta::with_settings!({sort_maps => true}, {
            insta::assert_yaml_snapshot!(format!("jobs_list_via_b_served_by_a_{}", mode_name(mode)), listed);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_resource_paths_are_never_proxied() {
    let paths = [
        "/healthz",
        "/livez",
        "/readyz",
        "/version",
        "/api",
        "/apis",
        "/apis/batch",
        "/apis/batch/v1",
    ];
    let mut tables = Vec::new();
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let b = cluster.client("b").unwrap();
        let mut table = Vec::new();
        for path in paths {
            table.push(row(&b.get(path).await.unwrap()));
        }
        assert_eq!(
            proxied_requests_seen_by(&cluster, "a", mark),
            Vec::<String>::new(),
            "{mode:?}"
        );
        tables.push((mode, table));
    }
    // /version differs between the modes' versions (1.32 vs 1.36), nothing else does.
    insta::assert_yaml_snapshot!("non_resource_paths_via_b_answered_locally", tables[1].1);
    let strip_version = |t: &Vec<Value>| {
        t.iter()
            .filter(|r| r["request"] != "GET /version (via b)")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(strip_version(&tables[0].1), strip_version(&tables[1].1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locally_served_gvr_is_handled_locally_whatever_peers_exist() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        // b serves apps/v1 and core/v1 itself; a serves them too.
        let b = cluster.client("b").unwrap();
        let before = proxied_requests_seen_by(&cluster, "a", mark);
        let b_mark = log_mark(&cluster, "b");
        let deployments = b
            .get("/apis/apps/v1/namespaces/default/deployments")
            .await
            .unwrap();
        let configmaps = b.get("/api/v1/namespaces/default/configmaps").await.unwrap();
        assert_eq!((deployments.code(), configmaps.code()), (200, 200));
        assert_eq!(
            proxied_requests_seen_by(&cluster, "a", mark),
            before,
            "{mode:?}: nothing reached a"
        );
        assert_eq!(
            requests_seen_by(
                &cluster,
                "b",
                b_mark,
                "/apis/apps/v1/namespaces/default/deployments"
            ),
            1
        );
        // And a, which serves jobs, never proxies them even though b is a peer.
        let jobs = cluster.client("a").unwrap().get(JOBS).await.unwrap();
        assert_eq!(jobs.code(), 200);
        assert_eq!(proxied_requests_seen_by(&cluster, "b", 0), Vec::<String>::new());
        insta::assert_yaml_snapshot!(
            format!("deployments_list_on_b_served_by_b_{}", mode_name(mode)),
            deployments
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_key_is_group_version_resource_ignoring_subresource_and_verb() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let b = cluster.client("b").unwrap();
        // A subresource of a missing job: a answers with its NotFound Status (JSON), not b's plain 404.
        let status = b.get(&format!("{JOBS}/missing/status")).await.unwrap();
        assert_eq!(status.code(), 404);
        assert_eq!(
            status.json()["reason"],
            "NotFound",
            "{mode:?}: answered by a peer"
        );
        // Another resource of the same group/version is routed the same way.
        let cronjobs = b.get("/apis/batch/v1/namespaces/default/cronjobs").await.unwrap();
        assert_eq!(cronjobs.code(), 200);
        // A version of the group nobody serves stays local: Go's plain 404.
        let v2 = b.get("/apis/batch/v2/namespaces/default/jobs").await.unwrap();
        assert_eq!(v2.code(), 404);
        assert_eq!(v2.raw_text(), "404 page not found\n");
        let seen = proxied_requests_seen_by(&cluster, "a", mark);
        assert!(
            seen.contains(&format!("GET {JOBS}/missing/status as admin")),
            "{seen:?}"
        );
        assert!(
            seen.contains(&"GET /apis/batch/v1/namespaces/default/cronjobs as admin".to_owned()),
            "{seen:?}"
        );
        insta::assert_yaml_snapshot!(
            format!("job_status_subresource_via_b_answered_by_a_{}", mode_name(mode)),
            vec![status, v2]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_is_proxied_including_watch_and_subresources() {
    let mut tables = Vec::new();
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let b = cluster.client("b").unwrap();
        let mut table = Vec::new();
        let mut send = async |method: Method, path: String, body: Option<(String, &'static str)>| {
            let mut request = b.request(method, &path);
            if let Some((body, content_type)) = &body {
                request = request.body(body, content_type);
            }
            let reply = request.send().await.unwrap();
            table.push(row(&reply));
            reply
        };
        let job_path = format!("{JOBS}/verbs");
        send(
            Method::POST,
            JOBS.to_owned(),
            Some((job("verbs").to_string(), "application/json")),
        )
        .await;
        send(Method::GET, job_path.clone(), None).await;
        send(Method::GET, JOBS.to_owned(), None).await;
        let current = b.get(&job_path).await.unwrap().raw_json();
        let mut updated = current.clone();
        updated["metadata"]["labels"] = json!({"verb": "update"});
        send(
            Method::PUT,
            job_path.clone(),
            Some((updated.to_string(), "application/json")),
        )
        .await;
        send(
            Method::PATCH,
            job_path.clone(),
            Some((
                r#"{"metadata":{"labels":{"verb":"patch"}}}"#.to_owned(),
                "application/merge-patch+json",
            )),
        )
        .await;
        send(Method::GET, format!("{job_path}/status"), None).await;
        send(
            Method::PATCH,
            format!("{job_path}/status"),
            Some((
                r#"{"status":{"active":1}}"#.to_owned(),
                "application/merge-patch+json",
            )),
        )
        .await;
        send(Method::DELETE, job_path.clone(), None).await;
        send(Method::DELETE, JOBS.to_owned(), None).await;
        // Both watch forms stream through the proxy.
        let watch = b
            .request(Method::GET, &format!("{JOBS}?watch=1"))
            .watch(0, std::time::Duration::from_millis(200))
            .await
            .unwrap();
        table.push(json!({"request": watch.request, "status": watch.status, "content-type": watch.header("content-type")}));
        let watch_path = b
            .request(Method::GET, "/apis/batch/v1/watch/namespaces/default/jobs")
            .watch(0, std::time::Duration::from_millis(200))
            .await
            .unwrap();
        table.push(json!({"request": watch_path.request, "status": watch_path.status, "content-type": watch_path.header("content-type")}));
        // Every one of them reached a, marked as proxied; none was served by b.
        let seen = proxied_requests_seen_by(&cluster, "a", mark);
        let expected: Vec<String> = table
            .iter()
            .filter_map(|r| r["request"].as_str())
            .map(|r| format!("{} as admin", r.trim_end_matches(" (via b)")))
            .collect();
        let missing: Vec<&String> = expected.iter().filter(|e| !seen.contains(e)).collect();
        assert!(missing.is_empty(), "{mode:?}: not proxied to a: {missing:#?}");
        assert_eq!(proxied_requests_seen_by(&cluster, "b", 0), Vec::<String>::new());
        tables.push(table);
    }
    assert_eq!(tables[0], tables[1], "both modes route every verb the same way");
    insta::assert_yaml_snapshot!("every_verb_via_b_answered_by_a", tables[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxied_request_carries_the_peer_proxied_header_appended() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let b = cluster.client("b").unwrap();
        // Plain request: a sees x-kubernetes-peer-proxied: true.
        let plain = b.get(&format!("{JOBS}?limit=1")).await.unwrap();
        assert_eq!(plain.code(), 200);
        // The client already sent "false": the proxy appends its "true" (Header.Add), so the first value
        // a reads stays "false" (a proxy that *set* the header would have replaced it).
        let appended = b
            .request(Method::GET, &format!("{JOBS}?limit=2"))
            .header("x-kubernetes-peer-proxied", "false")
            .send()
            .await
            .unwrap();
        assert_eq!(
            appended.code(),
            200,
            "{mode:?}: still proxied, since the first value is not \"true\""
        );
        let log = cluster.server("a").unwrap().served_requests();
        let entry = |uri: &str| log.iter().find(|r| r.uri == uri).map(|r| r.peer_proxied);
        assert_eq!(entry(&format!("{JOBS}?limit=1")), Some(true), "{mode:?}");
        assert_eq!(entry(&format!("{JOBS}?limit=2")), Some(false), "{mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_target_keeps_path_and_sorts_query_keys() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let b = cluster.client("b").unwrap();
        let reply = b
            .get(&format!(
                "{JOBS}?timeoutSeconds=5&limit=10&labelSelector=app%3Dweb"
            ))
            .await
            .unwrap();
        assert_eq!(reply.code(), 200);
        let seen = proxied_requests_seen_by(&cluster, "a", mark);
        let last = seen.last().cloned().unwrap_or_default();
        assert_eq!(
            last,
            format!("GET {JOBS}?labelSelector=app%3Dweb&limit=10&timeoutSeconds=5 as admin"),
            "{mode:?}"
        );
        insta::assert_yaml_snapshot!(
            format!("query_keys_sorted_when_proxied_{}", mode_name(mode)),
            seen
        );
    }
}
