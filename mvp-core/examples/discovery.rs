//! Run with: `cargo build -p apiserver-fake && cargo run -p mvp-core --example discovery`
//! (add `-- --once` to check the answers and exit).
//!
//! Discovery mode (upstream beta, the default from 1.33) in a server of one's own. The example
//! starts the workspace's fake kube-apiservers (the demo cluster: `a` lacks `batch/v1`, `b`
//! serves it) as its peers, and joins them as server `x`, which serves only `v1 pods` itself.
//! It follows their identity leases the way an informer would (a list every second here) and
//! feeds them to [`DiscoveryPeers`]; the library fetches each peer's discovery, and from then on
//! `x` proxies `batch/v1` to `b` over mTLS with the demo's front-proxy client certificate.
//! Try `curl http://127.0.0.1:<port>/apis/batch/v1/namespaces/default/jobs`.

#[path = "support/demo.rs"]
mod demo;

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::error::Error;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use demo::Demo;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use mvp_core::{
    DiscoveryConfig, DiscoveryPeers, GroupVersionResource, Lease, MvpLayer, PeerEndpoints, PeerTlsConfig,
    PeerTransport,
};
use tower::ServiceBuilder;

/// Server ID → `host:port`, filled from the leases' `kubernetes.io/hostname` and the demo's
/// `cluster.json` (a real server reads its peer endpoint leases).
#[derive(Default)]
struct Endpoints(RwLock<HashMap<String, String>>);

impl PeerEndpoints for Endpoints {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        self.0.read().ok()?.get(server_id).cloned()
    }
}

/// The informer's job: lists the identity leases every second and hands them, and any change of
/// peer addresses, to `peers`.
async fn follow_leases(demo: Arc<Demo>, endpoints: Arc<Endpoints>, peers: DiscoveryPeers) {
    loop {
        let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
        match demo.get("a", path).await {
            Ok((StatusCode::OK, body)) => {
                let list: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let items = list["items"].as_array().cloned().unwrap_or_default();
                let mut addresses = HashMap::new();
                for item in &items {
                    let hostname = item["metadata"]["labels"]["kubernetes.io/hostname"].as_str();
                    let server = hostname.and_then(|name| demo.server(name).ok());
                    if let (Some(id), Some(server)) = (item["metadata"]["name"].as_str(), server) {
                        addresses.insert(id.to_owned(), server.host_port().to_owned());
                    }
                }
                let changed = endpoints
                    .0
                    .read()
                    .map(|known| *known != addresses)
                    .unwrap_or(true);
                if changed && let Ok(mut known) = endpoints.0.write() {
                    *known = addresses;
                }
                if changed {
                    peers.peer_endpoints_changed();
                }
                let leases: Vec<Lease> = items
                    .into_iter()
                    .filter_map(|item| serde_json::from_value(item).ok())
                    .collect();
                peers.set_identity_leases(&leases);
            }
            Ok((status, _)) => eprintln!("listing leases: {status}"),
            Err(err) => eprintln!("listing leases: {err}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let once = std::env::args().any(|arg| arg == "--once");
    let demo = Arc::new(Demo::start().await?);

    let tls = PeerTlsConfig::from_files(
        &demo.path("ca.crt"),                 // --peer-ca-file: the peers' serving CA
        &demo.path("front-proxy-client.crt"), // --proxy-client-cert-file
        &demo.path("front-proxy-client.key"), // --proxy-client-key-file
    )?;
    let endpoints = Arc::new(Endpoints::default());
    let served_here = || HashSet::from([GroupVersionResource::new("", "v1", "pods")]);
    let (mvp, peers) = MvpLayer::builder("x", endpoints.clone(), PeerTransport::new(&tls)?)
        .discovery(DiscoveryConfig::new(served_here));
    tokio::spawn(peers.run());
    tokio::spawn(follow_leases(demo.clone(), endpoints, peers.clone()));

    let local = tower::service_fn(|req: Request<Incoming>| async move {
        let body = format!("served by x: {}\n", req.uri().path());
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body))))
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

    // Ready once every peer with a lease and an address has been asked for its discovery.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !peers.is_ready() {
        if Instant::now() > deadline {
            return Err("x did not learn its peers' discovery within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("x at http://{addr} (peers: the demo's a and b)");
    if once {
        return demo::check_answers(addr, "served by x").await;
    }
    println!("serving until Ctrl-C");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
