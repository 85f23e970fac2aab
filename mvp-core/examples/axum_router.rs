//! Run with: `cargo build -p apiserver-fake && cargo run -p mvp-core --example axum_router`
//! (add `-- --once` to check the answers and exit).
//!
//! The Mixed Version Proxy in front of an axum [`Router`]: the router serves `v1 pods` (an empty
//! `PodList`), and the layer, put around the *whole* router so that it runs before routing,
//! proxies `batch/v1` to peer `b`, the `b` of the workspace's fake demo cluster that the example
//! starts. StorageVersion data says who serves what, as in `embed.rs`.

#[path = "support/demo.rs"]
mod demo;

use std::error::Error;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request};
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use mvp_core::{MvpLayer, PeerEndpoints, PeerTlsConfig, PeerTransport, StorageVersion, StorageVersionIndex};
use tower::ServiceBuilder;

/// The single peer `b`.
struct Endpoints(String);

impl PeerEndpoints for Endpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        (server_id == "b").then(|| self.0.clone())
    }
}

async fn list_pods(Path(namespace): Path<String>) -> Json<serde_json::Value> {
    Json(serde_json::json!({"kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "1"}, "items": [], "namespace": namespace}))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let once = std::env::args().any(|arg| arg == "--once");
    let demo = demo::Demo::start().await?;

    let tls = PeerTlsConfig::from_files(
        &demo.path("ca.crt"),
        &demo.path("front-proxy-client.crt"),
        &demo.path("front-proxy-client.key"),
    )?;
    let endpoints = Arc::new(Endpoints(demo.server("b")?.host_port().to_owned()));
    let (mvp, storage_versions) =
        MvpLayer::builder("a", endpoints, PeerTransport::new(&tls)?).storage_version();
    let objects: Vec<StorageVersion> = serde_json::from_value(serde_json::json!([
        {"metadata": {"name": "core.pods"},
            "status": {"storageVersions": [{"apiServerID": "a", "servedVersions": ["v1"]}]}},
        {"metadata": {"name": "batch.jobs"},
            "status": {"storageVersions": [{"apiServerID": "b", "servedVersions": ["batch/v1"]}]}},
    ]))?;
    storage_versions.replace(StorageVersionIndex::from_objects(&objects));
    storage_versions.mark_synced();

    let router = Router::new().route("/api/v1/namespaces/{namespace}/pods", get(list_pods));
    let app = ServiceBuilder::new()
        // Stand-in for authentication: the filter forwards this identity to the peer.
        .map_request(|mut req: Request| {
            req.extensions_mut().insert(demo::admin());
            req
        })
        // axum::serve wants axum's response type; the layer's body converts into it.
        .map_response(IntoResponse::into_response)
        .layer(mvp)
        .service(router);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    let server = tokio::spawn(async move { axum::serve(listener, tower::make::Shared::new(app)).await });
    if once {
        return demo::check_answers(addr, "\"kind\":\"PodList\"").await;
    }
    server.await??;
    Ok(())
}
