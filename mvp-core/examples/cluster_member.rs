//! Run with: `cargo build -p apiserver-fake && cargo run -p mvp-core --features kube,server --example
//! cluster_member` (add `-- --once` to check what a client sees and exit).
//!
//! The whole Mixed Version Proxy in an axum server that joins a running cluster (the workspace's
//! fake demo cluster, which the example starts) as one more kube-apiserver, through a kube-rs
//! `Client` from the cluster's kubeconfig: it publishes its identity lease, learns its peers from
//! theirs, fetches their discovery, serves `v1 pods` itself and proxies `batch/v1` to the peer
//! that serves it, for the user of each client certificate. Everything between the two
//! `// ---` lines is what a user writes.

#[path = "support/demo.rs"]
mod demo;

use std::collections::HashSet;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use mvp_core::{
    ClusterApi, DiscoveryConfig, GroupVersionResource, IdentityLease, IdentityLeaseTask, KubeCluster,
    LeaseAddresses, MvpLayer, PeerLeaseFeed, PeerTlsConfig, PeerTransport, serve_tls, server_tls_config,
};
use tower::ServiceBuilder;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let once = std::env::args().any(|arg| arg == "--once");
    let demo = demo::Demo::start().await?;
    let file = |name: &str| demo.path(name);
    // ---
    let kubeconfig = kube::config::Kubeconfig::read_from(file("cluster.kubeconfig"))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let cluster: Arc<dyn ClusterApi> = Arc::new(KubeCluster::new(kube::Client::try_from(config)?));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    let lease = IdentityLeaseTask::new(
        cluster.clone(),
        IdentityLease::new("member").peer_advertise_address(&address),
    );
    lease.initialize().await?;
    let server_id = lease.lease().server_id.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let lease_task = tokio::spawn(lease.run(async { stopped.await.unwrap_or_default() }));

    let addresses = Arc::new(LeaseAddresses::default());
    let peer_tls = PeerTlsConfig::from_files(
        &file("ca.crt"),
        &file("front-proxy-client.crt"),
        &file("front-proxy-client.key"),
    )?;
    let served = || HashSet::from([GroupVersionResource::new("", "v1", "pods")]);
    let (mvp, peers) = MvpLayer::builder(&server_id, addresses.clone(), PeerTransport::new(&peer_tls)?)
        .discovery(DiscoveryConfig::new(served));
    tokio::spawn(peers.run());
    tokio::spawn(PeerLeaseFeed::new(cluster.clone(), peers.clone(), addresses).run(std::future::pending()));

    let pods = || async { Json(serde_json::json!({"kind": "PodList", "apiVersion": "v1", "items": []})) };
    let router = Router::new().route("/api/v1/namespaces/{namespace}/pods", get(pods));
    let app = ServiceBuilder::new()
        .map_response(IntoResponse::into_response)
        .layer(mvp)
        .service(router);
    let tls = server_tls_config(
        &file("apiserver-a.crt"),
        &file("apiserver-a.key"),
        &file("ca.crt"),
    )?;
    tokio::spawn(serve_tls(listener, tls, app));
    // ---
    println!("{server_id} listening on https://{address}");
    if !once {
        tokio::signal::ctrl_c().await?;
        let _ = stop.send(());
        return Ok(lease_task.await?);
    }
    check(&demo, &address, &server_id).await?;
    // A graceful stop deletes the identity lease, so peers forget this server at once.
    let _ = stop.send(());
    lease_task.await?;
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{server_id}");
    match demo.get("a", &lease_path).await?.0 {
        http::StatusCode::NOT_FOUND => Ok(()),
        status => Err(format!("the identity lease is still there after the stop ({status})").into()),
    }
}

/// `--once`: the peers see the lease; jobs come from the peer, pods from here, both for the
/// client certificate's user.
async fn check(demo: &demo::Demo, address: &str, server_id: &str) -> Result<(), Box<dyn Error>> {
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{server_id}");
    let (status, lease) = demo.get("b", &lease_path).await?;
    if status != http::StatusCode::OK
        || !std::str::from_utf8(&lease)?.contains("\"kubernetes.io/hostname\":\"member\"")
    {
        return Err(format!("peer b does not see the identity lease ({status})").into());
    }
    // Until the peers' discovery is fetched a jobs request is served here (404): poll.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs_url = format!("https://{address}/apis/batch/v1/namespaces/default/jobs");
        let (status, body) = demo::get_with_admin_certificate(demo, &jobs_url).await?;
        if status == http::StatusCode::OK && body.contains("\"kind\":\"JobList\"") {
            println!("GET /apis/batch/v1/namespaces/default/jobs → {status} (from the peer)");
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("jobs were not proxied within 30 s: {status} {body}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await; // poll interval
    }
    let pods_url = format!("https://{address}/api/v1/namespaces/default/pods");
    let (status, body) = demo::get_with_admin_certificate(demo, &pods_url).await?;
    println!("GET /api/v1/namespaces/default/pods → {status}");
    if status != http::StatusCode::OK || !body.contains("\"kind\":\"PodList\"") {
        return Err(format!("pods were not served locally: {status} {body}").into());
    }
    Ok(())
}
