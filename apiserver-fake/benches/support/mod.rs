//! What the cluster benches share: the binary's allocator, a Tokio runtime, the demo cluster started in
//! this process (in-memory store) with an admin client, and one request helper. Each bench includes it
//! with `mod support;`.

use apiserver_fake::cluster::{AdminClient, Cluster, Preset, start_cluster};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::Value;

/// The allocator of the `apiserver-fake` binary (see its `main.rs`), so that the figures are the
/// binary's: with glibc's, hyper's per-request header table (1 MiB, for kube-apiserver's unlimited
/// header fields) costs page faults and heap consolidation the binary does not pay.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Whether the bench was asked for its short run (`cargo bench ... -- --quick`).
pub fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
}

/// A multi-threaded runtime, as the binary's.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The demo cluster (`--preset default`: `a` without batch/v1, `b`), in this process, in-memory store,
/// without a controller manager, and an admin client of it.
pub async fn demo_cluster() -> (Cluster, AdminClient) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = start_cluster(None, Preset::Default.members(), 0)
        .await
        .expect("cluster");
    let client = cluster.admin_client().expect("admin client");
    (cluster, client)
}

/// Sends `body` (JSON) to `url` as the admin; the status and the body of the answer.
pub async fn send(client: &AdminClient, method: Method, url: &str, body: Option<Value>) -> (u16, Bytes) {
    send_as(client, None, method, url, body.map(|b| b.to_string())).await
}

/// Sends `body` (JSON text) to `url` as the admin, impersonating `user` when given.
pub async fn send_as(
    client: &AdminClient,
    user: Option<&str>,
    method: Method,
    url: &str,
    body: Option<String>,
) -> (u16, Bytes) {
    let mut request = Request::builder().method(method).uri(url);
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    if let Some(user) = user {
        request = request.header("impersonate-user", user);
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("request");
    let response = client.request(request).await.expect("answered");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (status, body)
}
