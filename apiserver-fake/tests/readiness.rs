//! `/readyz` means usable: once a server that was restarted (here: upgraded) says ready, its peers
//! already route to it, so the resources only it serves never get a false 404 from them.

mod support;

use http::StatusCode;
use support::{TestClient, member};

const MAPS: &str = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_is_ready_only_once_its_peers_can_route_to_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let gate = "--feature-gates=UnknownVersionInteroperabilityProxy=true";
    let mut cluster = apiserver_fake::cluster::start_cluster(
        None,
        vec![member("a", 1, "1.35", &[gate]), member("b", 2, "1.35", &[gate])],
        0,
    )
    .await
    .expect("cluster starts");
    let a = TestClient::admin(&cluster, 0);
    assert_eq!(
        a.get(MAPS).await.status,
        StatusCode::NOT_FOUND,
        "no server serves it yet"
    );
    for round in 0..5 {
        let port = cluster.stop_member(1, false).await.expect("b stops");
        cluster
            .put_member(1, member("b", 2, "1.36", &[gate]), port)
            .await
            .expect("b comes back at 1.36, ready");
        let reply = a.get(MAPS).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "round {round}: a lists b's mutating admission policies at once: {}",
            reply.text()
        );
    }
    cluster.shutdown().await;
}
