//! Peer endpoint records (docs/mvp-behaviour.md §2.4, docs/decisions.md §4): where peers reach this server.
//!
//! Like kube-apiserver's peer endpoint lease reconciler, each server writes a core/v1 `Endpoints`-shaped
//! record under `/peerserverleases/<serverID>` in the store's *internal* keyspace, with a 15 s TTL
//! refreshed every 10 s once the server is ready, and removes it on graceful shutdown. The internal
//! keyspace is not reachable through the HTTP API, so no API client can point a server's proxy at an
//! arbitrary address.

use std::net::SocketAddr;

use serde_json::Value;

use crate::store::Store;

/// Key prefix of peer endpoint records.
pub const PREFIX: &str = mvp_core::feeders::PEER_ENDPOINT_PREFIX;

/// The record for `server_id` reachable at `address`.
pub fn endpoint_record(server_id: &str, address: SocketAddr) -> Value {
    mvp_core::feeders::peer_endpoint_record(server_id, address)
}

/// `host:port` of a record (IPv6 in brackets), as upstream's `GetEndpoint` joins IP and first port.
pub fn record_address(record: &Value) -> Option<String> {
    mvp_core::feeders::peer_endpoint_address(record)
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

/// Removes the record of the server `server_id` (graceful shutdown; the server runs mvp-core's
/// [`mvp_core::PeerEndpointTask`] with `keep_on_stop`, so that its shutdown sequence orders the removal).
pub async fn remove(store: &dyn Store, server_id: &str) {
    let _ = store.delete_internal(&format!("{PREFIX}{server_id}")).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
