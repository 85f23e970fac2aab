//! Fetching peers' discovery and rebuilding the [`PeerDiscoveryCache`] (docs/mvp-behaviour.md §2.3). I/O.
//!
//! Each sync is a full rebuild: for every valid peer, resolve its address, `GET /api` then
//! `/apis` through the proxy path (as `system:apiserver`, Accept nopeer,v2,v1), and keep the
//! peers that listed something; a peer that could not be fetched keeps its last entry. The sync
//! returns the last per-peer error; the caller retries up to [`MAX_RETRIES`] times with the
//! controller's exponential backoff.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use serde_json::Value;

use crate::discovery::caches::{PeerDiscoveryCache, PeerDiscoveryEntry};
use crate::metrics::{DISCOVERY_ERROR_FETCH, DISCOVERY_ERROR_HOSTPORT_RESOLUTION, MvpMetrics};
use crate::proxy::proxy_to_peer;
use crate::resolve::{PeerEndpoints, is_valid_host_port};
use crate::transport::PeerTransport;
use crate::user::UserInfo;

/// client-go `AcceptV2NoPeer`, `AcceptV2`, `AcceptV1`, in that order.
pub(crate) const DISCOVERY_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer,\
application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// Requeues of a failed sync before the key is dropped (upstream v1.35+; 5 before).
pub(crate) const MAX_RETRIES: u32 = 20;

/// Paths fetched from each peer.
const DISCOVERY_PATHS: [&str; 2] = ["/api", "/apis"];

/// Errors of a peer discovery sync.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum PeerDiscoveryError {
    /// A peer's address is unknown or not `host:port`.
    #[error("failed to get host port info from identity lease for server {server_id}: {reason}")]
    HostPort {
        /// The peer.
        server_id: String,
        /// Why (e.g. "missing port in address").
        reason: String,
    },
    /// The peer answered something other than 200 (503 on transport errors).
    #[error("discovery request failed with status: {0}")]
    Status(u16),
    /// The body could not be read.
    #[error("error reading discovery response: {0}")]
    Body(String),
    /// The body is not an `APIGroupDiscoveryList`.
    #[error("error decoding discovery response: {0}")]
    Decode(String),
}

/// What one [`PeerDiscoverySync::sync`] attempt found.
#[derive(Debug)]
pub(crate) struct SyncOutcome {
    /// The peers it asked: an answer or a transport error, either way not the start-up race of a
    /// peer whose address is not yet published.
    pub reached: HashSet<String>,
    /// The peers whose entry this attempt built: a whole fetch, or whatever a failed fetch got of
    /// a peer that had no entry. The other listed peers keep the entry of an earlier attempt.
    pub fresh: HashSet<String>,
    /// The last per-peer error.
    pub result: Result<(), PeerDiscoveryError>,
}

impl Default for SyncOutcome {
    fn default() -> Self {
        Self {
            reached: HashSet::new(),
            fresh: HashSet::new(),
            result: Ok(()),
        }
    }
}

/// Keeps a [`PeerDiscoveryCache`] up to date from peers' discovery endpoints.
#[derive(Clone)]
pub(crate) struct PeerDiscoverySync {
    cache: Arc<PeerDiscoveryCache>,
    endpoints: Arc<dyn PeerEndpoints>,
    transport: PeerTransport,
    metrics: Option<MvpMetrics>,
}

impl std::fmt::Debug for PeerDiscoverySync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerDiscoverySync").finish_non_exhaustive()
    }
}

impl PeerDiscoverySync {
    /// A syncer filling `cache`, reaching peers at `endpoints` through `transport`.
    pub(crate) fn new(
        cache: Arc<PeerDiscoveryCache>,
        endpoints: Arc<dyn PeerEndpoints>,
        transport: PeerTransport,
        metrics: Option<MvpMetrics>,
    ) -> Self {
        Self {
            cache,
            endpoints,
            transport,
            metrics,
        }
    }

    /// One full rebuild from the given valid peer IDs (see
    /// [`Lease::is_peer_identity_lease_of`](crate::Lease::is_peer_identity_lease_of)) and the
    /// peers whose lease went away within the grace period (`departed`, not asked). The cache is
    /// replaced even when some peers failed.
    ///
    /// Unlike upstream, which drops a peer it cannot fetch, a peer's last entry survives a
    /// failed fetch: a peer that restarts (new run, lease replaced) stays known for what it
    /// served until its new run's discovery is fetched, so its resources get a 503 while it is
    /// unreachable instead of a false 404 (docs/decisions.md §8).
    pub(crate) async fn sync(&self, peer_ids: &[String], departed: &HashSet<String>) -> SyncOutcome {
        let previous = self.cache.entries();
        let mut outcome = SyncOutcome::default();
        let mut entries: HashMap<String, Arc<PeerDiscoveryEntry>> = HashMap::new();
        for id in peer_ids {
            let (entry, err) = self.fetch(id).await;
            let kept = match err {
                Some(err) => {
                    tracing::info!(server_id = %id, error = %err, "error fetching peer discovery");
                    if !matches!(err, PeerDiscoveryError::HostPort { .. }) {
                        outcome.reached.insert(id.clone());
                    }
                    outcome.result = Err(err);
                    previous.get(id).cloned()
                }
                None => {
                    outcome.reached.insert(id.clone());
                    None
                }
            };
            match kept {
                Some(old) => {
                    entries.insert(id.clone(), old);
                }
                None => {
                    outcome.fresh.insert(id.clone());
                    entries.insert(id.clone(), Arc::new(entry));
                }
            }
        }
        for id in departed.iter().filter(|id| !peer_ids.contains(id)) {
            if let Some(old) = previous.get(id) {
                entries.insert(id.clone(), old.clone());
            }
        }
        self.cache.replace(entries);
        outcome
    }

    /// Fetches one peer's discovery: the entry built from whatever succeeded, and the last
    /// error, as upstream's `fetchNewDiscoveryFor`.
    pub(crate) async fn fetch(&self, server_id: &str) -> (PeerDiscoveryEntry, Option<PeerDiscoveryError>) {
        let endpoint = match self.endpoints.endpoint(server_id) {
            Some(hp) if is_valid_host_port(&hp) => hp,
            other => {
                self.inc(DISCOVERY_ERROR_HOSTPORT_RESOLUTION);
                let reason = match other {
                    Some(hp) => format!("address {hp}: missing port in address"),
                    None => "address : missing port in address".to_owned(),
                };
                let err = PeerDiscoveryError::HostPort {
                    server_id: server_id.to_owned(),
                    reason,
                };
                return (PeerDiscoveryEntry::default(), Some(err));
            }
        };
        let mut lists = Vec::with_capacity(DISCOVERY_PATHS.len());
        let mut last_err = None;
        for path in DISCOVERY_PATHS {
            match self.fetch_path(&endpoint, path).await {
                Ok(list) => lists.push(list),
                Err(err) => {
                    self.inc(DISCOVERY_ERROR_FETCH);
                    last_err = Some(err);
                }
            }
        }
        (PeerDiscoveryEntry::from_discovery_lists(&lists), last_err)
    }

    async fn fetch_path(&self, endpoint: &str, path: &str) -> Result<Value, PeerDiscoveryError> {
        let mut req = Request::new(Empty::<Bytes>::new());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = http::Uri::from_static("/");
        if let Ok(uri) = path.parse() {
            *req.uri_mut() = uri;
        }
        req.headers_mut()
            .insert(header::ACCEPT, header::HeaderValue::from_static(DISCOVERY_ACCEPT));
        let user = UserInfo::apiserver();
        let resp = proxy_to_peer(&self.transport, self.metrics.as_ref(), req, endpoint, &user, None).await;
        if resp.status() != StatusCode::OK {
            return Err(PeerDiscoveryError::Status(resp.status().as_u16()));
        }
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| PeerDiscoveryError::Body(e.to_string()))?;
        let list: Value = serde_json::from_slice(&body.to_bytes())
            .map_err(|e| PeerDiscoveryError::Decode(e.to_string()))?;
        if list.get("items").is_some_and(Value::is_array) {
            Ok(list)
        } else {
            Err(PeerDiscoveryError::Decode(
                "not an APIGroupDiscoveryList".to_owned(),
            ))
        }
    }

    fn inc(&self, kind: &str) {
        if let Some(m) = &self.metrics {
            m.inc_discovery_sync_error(kind);
        }
    }
}

/// client-go's default per-item backoff: 5 ms × 2^attempt, capped at 1000 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let ms = 5u64.saturating_mul(1u64 << attempt.min(40));
    Duration::from_millis(ms).min(Duration::from_secs(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_5ms_and_caps() {
        assert_eq!(backoff(0), Duration::from_millis(5));
        assert_eq!(backoff(3), Duration::from_millis(40));
        assert_eq!(backoff(60), Duration::from_secs(1000));
    }
}
