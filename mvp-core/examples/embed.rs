//! Run with: `cargo build -p apiserver-fake && cargo run -p mvp-core --example embed`
//! (add `-- --once` to check the answers and exit), or against a peer of your own:
//! `cargo run -p mvp-core --example embed -- <peer-ca.crt> <proxy-client.crt> <proxy-client.key> <peer host:port>`.
//!
//! StorageVersion mode (upstream alpha) in a minimal "apiserver" of one's own: it serves
//! `core/v1` itself (answering "served locally") and knows, as StorageVersion objects would say,
//! that peer `b` serves `batch/v1 jobs`. Without arguments, `b` is the `b` of the workspace's
//! fake demo cluster, which the example starts. It listens on 127.0.0.1 over plain HTTP and
//! treats every caller as the cluster admin (a real server authenticates first).
//! Try `curl http://127.0.0.1:<port>/apis/batch/v1/namespaces/default/jobs`.

#[path = "support/demo.rs"]
mod demo;

use std::convert::Infallible;
use std::error::Error;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use mvp_core::{MvpLayer, PeerEndpoints, PeerTlsConfig, PeerTransport, StorageVersion, StorageVersionIndex};
use tower::ServiceBuilder;

/// The single peer `b`.
struct Endpoints(String);

impl PeerEndpoints for Endpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        (server_id == "b").then(|| self.0.clone())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let once = args.iter().any(|arg| arg == "--once");
    let (_demo, [ca, cert, key, peer]) = match args.as_slice() {
        [ca, cert, key, peer] => (None, [ca.clone(), cert.clone(), key.clone(), peer.clone()]),
        [] | [_] if args.iter().all(|arg| arg == "--once") => {
            let demo = demo::Demo::start().await?;
            let files = [
                demo.path("ca.crt"),
                demo.path("front-proxy-client.crt"),
                demo.path("front-proxy-client.key"),
                demo.server("b")?.host_port().to_owned(),
            ];
            (Some(demo), files)
        }
        _ => {
            eprintln!(
                "usage: embed [--once] | embed <peer-ca.crt> <proxy-client.crt> <proxy-client.key> <peer host:port>"
            );
            std::process::exit(2);
        }
    };

    let transport = PeerTransport::new(&PeerTlsConfig::from_files(&ca, &cert, &key)?)?;
    let (mvp, storage_versions) =
        MvpLayer::builder("a", Arc::new(Endpoints(peer)), transport).storage_version();
    // What a StorageVersion informer would hand over: "a" (us) stores pods, "b" stores jobs.
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
            req.extensions_mut().insert(demo::admin());
            req
        })
        .layer(mvp)
        .service(local);

    let addr = demo::serve(app).await?;
    println!("listening on http://{addr}");
    if once {
        return demo::check_answers(addr, "served locally").await;
    }
    println!("serving until Ctrl-C");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
