//! Run with: `cargo run -p mvp-core --example embed -- <peer-ca.crt> <proxy-client.crt> <proxy-client.key> <peer host:port>`
//!
//! A minimal "apiserver" of one's own with the Mixed Version Proxy in front: it serves
//! `core/v1` itself (answering "served locally") and knows, as StorageVersion data would
//! say, that peer `b` at `<peer host:port>` serves `batch/v1 jobs`. It listens on
//! 127.0.0.1 over plain HTTP and treats every caller as `demo-user` (a real server
//! authenticates first). Try `curl http://127.0.0.1:<port>/apis/batch/v1/jobs`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use mvp_core::{
    MvpLayer, PeerEndpoints, PeerTlsConfig, PeerTransport, StorageVersion, StorageVersionIndex, UserInfo,
};
use tower::ServiceBuilder;

/// The single peer `b`.
struct Endpoints(String);

impl PeerEndpoints for Endpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        (server_id == "b").then(|| self.0.clone())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ca, cert, key, peer] = args.as_slice() else {
        eprintln!("usage: embed <peer-ca.crt> <proxy-client.crt> <proxy-client.key> <peer host:port>");
        std::process::exit(2);
    };

    // What StorageVersion objects would say: "a" (us) stores pods, "b" stores jobs.
    let transport = PeerTransport::new(&PeerTlsConfig::from_files(ca, cert, key)?)?;
    let (mvp, storage_versions) =
        MvpLayer::builder("a", Arc::new(Endpoints(peer.clone())), transport).storage_version();
    let objects: Vec<StorageVersion> = serde_json::from_value(serde_json::json!([
        {"metadata": {"name": "core.pods"},
            "status": {"storageVersions": [{"apiServerID": "a", "servedVersions": ["v1"]}]}},
        {"metadata": {"name": "batch.jobs"},
            "status": {"storageVersions": [{"apiServerID": "b", "servedVersions": ["batch/v1"]}]}},
    ]))?;
    storage_versions.replace(StorageVersionIndex::from_objects(&objects));
    storage_versions.mark_synced();
    let local = tower::service_fn(|req: Request<Incoming>| async move {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!(
            "served locally: {}\n",
            req.uri()
        )))))
    });
    let app = ServiceBuilder::new()
        // Stand-in for authentication: the filter forwards this identity to the peer.
        .map_request(|mut req: Request<Incoming>| {
            req.extensions_mut().insert(UserInfo::new("demo-user"));
            req
        })
        .layer(mvp)
        .service(local);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on http://{}", listener.local_addr()?);
    loop {
        let (tcp, _) = listener.accept().await?;
        let svc = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}
