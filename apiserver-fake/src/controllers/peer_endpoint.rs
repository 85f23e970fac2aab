//! Peer endpoint records (docs/mvp-behaviour.md §2.4, docs/decisions.md §4): where peers reach this server.
//!
//! Like kube-apiserver's peer endpoint lease reconciler, each server writes a core/v1 `Endpoints`-shaped
//! record under `/peerserverleases/<serverID>` in the store's *internal* keyspace, with a 15 s TTL
//! refreshed every 10 s once the server is ready, and removes it on graceful shutdown. The internal
//! keyspace is not reachable through the HTTP API, so no API client can point a server's proxy at an
//! arbitrary address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// Key prefix of peer endpoint records.
pub const PREFIX: &str = "/peerserverleases/";
/// Upstream's TTL of a record.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);
/// Upstream's refresh interval.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(10);

/// How often the reconciler looks again while the server is not ready or a write failed.
const RETRY_POLL: Duration = Duration::from_millis(10);

/// The record for `server_id` reachable at `address`.
pub fn endpoint_record(server_id: &str, address: SocketAddr) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": server_id,
            "labels": { "apiserverIdentity": server_id },
        },
        "subsets": [{
            "addresses": [{ "ip": address.ip().to_string() }],
            "ports": [{ "name": "https", "port": address.port(), "protocol": "TCP" }],
        }],
    })
}

/// `host:port` of a record (IPv6 in brackets), as upstream's `GetEndpoint` joins IP and first port.
pub fn record_address(record: &Value) -> Option<String> {
    let subset = record.get("subsets")?.get(0)?;
    let ip = subset.get("addresses")?.get(0)?.get("ip")?.as_str()?;
    let port = subset.get("ports")?.get(0)?.get("port")?.as_u64()?;
    let ip: std::net::IpAddr = ip.parse().ok()?;
    Some(SocketAddr::new(ip, u16::try_from(port).ok()?).to_string())
}

/// Looks up the address of `server_id` among the live records. Unknown IDs resolve to `None`.
pub async fn lookup(store: &dyn Store, server_id: &str) -> Option<String> {
    let record = store
        .get_internal(&format!("{PREFIX}{server_id}"))
        .await
        .ok()
        .flatten()?;
    record_address(&record)
}

/// Whether the server has started (identity lease written, proxy caches synced once): the reconciler
/// writes the record only then.
pub type StartedCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Keeps this server's record alive while it runs.
pub struct PeerEndpointReconciler {
    store: Arc<dyn Store>,
    server_id: String,
    address: SocketAddr,
    started: StartedCheck,
    published: Arc<AtomicBool>,
    ttl: Duration,
    refresh: Duration,
}

impl std::fmt::Debug for PeerEndpointReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerEndpointReconciler")
            .field("server_id", &self.server_id)
            .field("address", &self.address)
            .field("ttl", &self.ttl)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl PeerEndpointReconciler {
    /// A reconciler with upstream's TTL (15 s) and refresh (10 s) for the server `server_id`, reachable
    /// at `address` once `started` says so; it sets `published` after the first write.
    pub fn new(
        store: Arc<dyn Store>,
        server_id: String,
        address: SocketAddr,
        started: StartedCheck,
        published: Arc<AtomicBool>,
    ) -> Self {
        Self {
            store,
            server_id,
            address,
            started,
            published,
            ttl: DEFAULT_TTL,
            refresh: DEFAULT_REFRESH,
        }
    }

    /// Overrides the TTL and refresh interval (tests, fail-over knobs).
    pub fn with_timing(mut self, ttl: Duration, refresh: Duration) -> Self {
        self.ttl = ttl;
        self.refresh = refresh;
        self
    }

    fn key(&self) -> String {
        format!("{PREFIX}{}", self.server_id)
    }

    /// Refreshes the record until `cancel`; writes it first once the server has started (identity lease
    /// and proxy caches), as upstream waits for `/readyz`, and at once: peers cannot reach this server
    /// before the record exists, so `/readyz` also waits for that first write.
    pub async fn run(self, cancel: CancellationToken) {
        let record = endpoint_record(&self.server_id, self.address);
        // Start-up is a cheap flag: a short poll keeps the gap between started and reachable small.
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            wait = RETRY_POLL;
            if !(self.started)() {
                continue;
            }
            match self
                .store
                .put_internal(&self.key(), record.clone(), self.ttl)
                .await
            {
                Ok(()) => {
                    self.published.store(true, Ordering::Release);
                    wait = self.refresh;
                }
                Err(err) => tracing::warn!(error = %err, "failed to write the peer endpoint record"),
            }
        }
    }

    /// Removes the record of the server `server_id` (graceful shutdown).
    pub async fn remove(store: &dyn Store, server_id: &str) {
        let _ = store.delete_internal(&format!("{PREFIX}{server_id}")).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_address_with_ipv6_brackets() {
        let v4 = endpoint_record("apiserver-a", "127.0.0.2:6443".parse().unwrap());
        assert_eq!(record_address(&v4).as_deref(), Some("127.0.0.2:6443"));
        assert_eq!(v4["metadata"]["labels"]["apiserverIdentity"], "apiserver-a");
        let v6 = endpoint_record("apiserver-b", "[::1]:443".parse().unwrap());
        assert_eq!(record_address(&v6).as_deref(), Some("[::1]:443"));
        assert_eq!(record_address(&json!({})), None);
    }
}
