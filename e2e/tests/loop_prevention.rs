//! The loop-prevention header `x-kubernetes-peer-proxied` (docs/mvp-behaviour.md checklist items 5 and 7,
//! docs/decisions.md §3).

mod support;

use http::Method;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_marked_as_proxied_is_served_locally_and_never_proxied_again() {
    let mut tables = Vec::new();
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        let mark = log_mark(&cluster, "a");
        let b = cluster.client("b").unwrap();
        let mut table = Vec::new();
        for (name, value) in [
            // Exactly "true": b serves it itself, and since b lacks batch/v1 that is Go's 404.
            ("x-kubernetes-peer-proxied", "true"),
            // The KEP's header name is honoured as well, so no pairing of implementations can loop.
            ("x-kubernetes-apiserver-rerouted", "true"),
            // Any other value is not the marker (upstream compares with "true"): proxied as usual.
            ("x-kubernetes-peer-proxied", "TRUE"),
        ] {
            let reply = b
                .request(Method::GET, JOBS)
                .header(name, value)
                .send()
                .await
                .unwrap();
            table.push(serde_json::json!({"header": format!("{name}: {value}"), "status": reply.status, "body": match reply.json() {
                serde_json::Value::Null => serde_json::json!(reply.raw_text()),
                json => serde_json::json!(json["kind"]),
            }}));
        }
        // Only the "TRUE" request reached a.
        assert_eq!(
            proxied_requests_seen_by(&cluster, "a", mark).len(),
            0,
            "{mode:?}: a's log marks it unproxied"
        );
        assert_eq!(requests_seen_by(&cluster, "a", mark, JOBS), 1, "{mode:?}");
        tables.push(table);
    }
    assert_eq!(tables[0], tables[1]);
    insta::assert_yaml_snapshot!("jobs_via_b_with_loop_prevention_headers", tables[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_proxied_header_is_neither_authenticated_nor_stripped() {
    for mode in MODES {
        let cluster = a_serves_batch_b_does_not(mode).await;
        wait_until_b_proxies_jobs(&cluster).await;
        // Any client may send the header (it is not tied to the front-proxy certificate): the admin's
        // request to b is served locally...
        let reply = cluster
            .client("b")
            .unwrap()
            .request(Method::GET, JOBS)
            .header("x-kubernetes-peer-proxied", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(
            (reply.code(), reply.raw_text().as_str()),
            (404, "404 page not found\n"),
            "{mode:?}"
        );
        // ...and a's handlers see the header on requests b proxied: authentication did not strip it.
        let mark = log_mark(&cluster, "a");
        assert_eq!(cluster.client("b").unwrap().get(JOBS).await.unwrap().code(), 200);
        assert_eq!(
            proxied_requests_seen_by(&cluster, "a", mark),
            [format!("GET {JOBS} as admin")],
            "{mode:?}"
        );
        // A direct client of a that sends the header is simply served by a (a serves jobs).
        let direct = cluster
            .client("a")
            .unwrap()
            .request(Method::GET, JOBS)
            .header("x-kubernetes-peer-proxied", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(direct.code(), 200);
        insta::assert_yaml_snapshot!(
            format!("jobs_via_b_claiming_to_be_proxied_{}", mode_name(mode)),
            reply
        );
    }
}
