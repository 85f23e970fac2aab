//! Peer-aggregated `/apis` discovery (KEP-4020 beta, docs/mvp-behaviour.md §1.5, §7.1): what a 1.35+ server
//! with the Mixed Version Proxy answers to the default aggregated `v2` Accept — its own groups merged with
//! every peer's (upstream `aggregated/peer_aggregated_handler.go`).
//!
//! [`PeerAggregatedDiscoveryHandler`] implements the discovery module's
//! [`PeerAggregatedDiscovery`] hook. The merge itself is `mvp-core`'s
//! [`merge_peer_discovery`]; peers' groups come from the proxy's [`PeerDiscoveryCache`] (which
//! the peer proxy hands over with [`PeerAggregatedDiscoveryHandler::set_peer_cache`] once built).
//!
//! The merged document is cached and recomputed only when the local document or the peer cache
//! changed (the cache's generation moves on every replacement and exclusion update). Unlike
//! upstream 1.36, which keeps serving a departed peer's groups when the last peer leaves, the
//! emptied peer cache is a change like any other here, so the merged document drops them.
//!
//! Metrics, with upstream's semantics (`aggregated/metrics.go`):
//! - `aggregator_discovery_peer_aggregated_cache_hits_total`: merged document served from cache;
//! - `aggregator_discovery_peer_aggregated_cache_misses_total`: merged document (re)computed, also
//!   when there are no peers;
//! - `aggregator_discovery_nopeer_requests_total`: aggregated `v2` requests with `profile=nopeer`
//!   (counted whenever the gate is on, with or without a peer proxy).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use mvp_core::{PeerDiscoveryCache, merge_peer_discovery};
use prometheus::{IntCounter, Opts, Registry};
use serde_json::Value;

use crate::api::discovery::PeerAggregatedDiscovery;
use crate::api::discovery::aggregated::{
    ApiGroupDiscovery, ApiGroupDiscoveryList, ApiResourceDiscovery, ApiSubresourceDiscovery,
    ApiVersionDiscovery, GroupMeta, GroupVersionKind,
};

/// Upstream's help texts, with the `[ALPHA] ` prefix component-base adds.
const HITS_HELP: &str = "[ALPHA] Counter of number of times discovery was served from peer-aggregated cache";
const MISSES_HELP: &str =
    "[ALPHA] Counter of number of times discovery was aggregated across all API servers";
const NOPEER_HELP: &str =
    "[ALPHA] Counter of number of times no-peer (non peer-aggregated) discovery was requested";

/// The three `aggregator_discovery_*` counters of peer-aggregated discovery.
#[derive(Debug, Clone)]
pub struct PeerAggregatedMetrics {
    /// `aggregator_discovery_peer_aggregated_cache_hits_total`.
    pub cache_hits: IntCounter,
    /// `aggregator_discovery_peer_aggregated_cache_misses_total`.
    pub cache_misses: IntCounter,
    /// `aggregator_discovery_nopeer_requests_total`.
    pub nopeer_requests: IntCounter,
}

impl PeerAggregatedMetrics {
    /// Creates the counters and registers them in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let counter = |name: &str, help: &str| -> Result<IntCounter, prometheus::Error> {
            let counter = IntCounter::with_opts(Opts::new(name, help))?;
            registry.register(Box::new(counter.clone()))?;
            Ok(counter)
        };
        Ok(Self {
            cache_hits: counter("aggregator_discovery_peer_aggregated_cache_hits_total", HITS_HELP)?,
            cache_misses: counter(
                "aggregator_discovery_peer_aggregated_cache_misses_total",
                MISSES_HELP,
            )?,
            nopeer_requests: counter("aggregator_discovery_nopeer_requests_total", NOPEER_HELP)?,
        })
    }
}

/// The merged document and what it was computed from.
#[derive(Debug)]
struct CachedMerge {
    /// The local document the merge used.
    local: ApiGroupDiscoveryList,
    /// [`PeerDiscoveryCache::generation`] when the peers' groups were read.
    peer_generation: u64,
    merged: ApiGroupDiscoveryList,
}

/// Serves peer-aggregated `/apis` for one server (see the module docs).
///
/// Until [`Self::set_peer_cache`] is called (no peer proxy, or a StorageVersion-mode proxy) the hook
/// declines and the local document is served, without touching the hit/miss counters — upstream
/// installs no peer-aggregated handler without a peer proxy.
#[derive(Debug)]
pub struct PeerAggregatedDiscoveryHandler {
    server_id: String,
    peers: OnceLock<Arc<PeerDiscoveryCache>>,
    cache: Mutex<Option<CachedMerge>>,
    metrics: PeerAggregatedMetrics,
}

impl PeerAggregatedDiscoveryHandler {
    /// A handler for server `server_id` whose counters live in `registry`.
    pub fn new(server_id: impl Into<String>, registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            server_id: server_id.into(),
            peers: OnceLock::new(),
            cache: Mutex::new(None),
            metrics: PeerAggregatedMetrics::register(registry)?,
        })
    }

    /// Connects the peer discovery cache the Mixed Version Proxy fills; from then on `/apis` is
    /// peer-aggregated. Returns `false` (and changes nothing) if a cache was already connected.
    pub fn set_peer_cache(&self, peers: Arc<PeerDiscoveryCache>) -> bool {
        self.peers.set(peers).is_ok()
    }

    /// The counters.
    pub fn metrics(&self) -> &PeerAggregatedMetrics {
        &self.metrics
    }

    /// Drops the cached merge (upstream `InvalidateCache`); the next request recomputes it.
    pub fn invalidate(&self) {
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl PeerAggregatedDiscovery for PeerAggregatedDiscoveryHandler {
    fn merged_apis(&self, local: &ApiGroupDiscoveryList) -> Option<ApiGroupDiscoveryList> {
        let peers = self.peers.get()?;
        // Read the generation before the groups: a replacement in between leaves a newer merge under
        // an older generation, which the next request merely recomputes.
        let peer_generation = peers.generation();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = cache.as_ref()
            && cached.peer_generation == peer_generation
            && cached.local == *local
        {
            self.metrics.cache_hits.inc();
            return Some(cached.merged.clone());
        }
        self.metrics.cache_misses.inc();
        let merged = merge_with_peers(&self.server_id, local, &peers.peer_groups(&self.server_id));
        *cache = Some(CachedMerge {
            local: local.clone(),
            peer_generation,
            merged: merged.clone(),
        });
        Some(merged)
    }

    fn nopeer_requested(&self) {
        self.metrics.nopeer_requests.inc();
    }
}

/// The local document merged with the peers' groups (peer ID → `APIGroupDiscovery` JSON objects).
///
/// Peers' groups are read into this server's types, as upstream decodes them into its Go structs
/// and re-encodes them with its own serializer: fields this server does not know are dropped and
/// group metadata is written the way this server writes its own.
pub fn merge_with_peers(
    server_id: &str,
    local: &ApiGroupDiscoveryList,
    peers: &[(String, Vec<Value>)],
) -> ApiGroupDiscoveryList {
    if peers.is_empty() {
        return local.clone();
    }
    let local_items: Vec<Value> = local
        .items
        .iter()
        .filter_map(|group| serde_json::to_value(group).ok())
        .collect();
    let creation_timestamp = local.items.first().and_then(|g| g.metadata.creation_timestamp);
    let items = merge_peer_discovery(server_id, &local_items, peers)
        .iter()
        .map(|group| group_from_json(group, creation_timestamp))
        .collect();
    ApiGroupDiscoveryList {
        items,
        ..local.clone()
    }
}

fn text(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn texts(value: &Value, field: &str) -> Vec<String> {
    value
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn items<'a>(value: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    value.get(field).and_then(Value::as_array).into_iter().flatten()
}

fn kind(value: &Value) -> GroupVersionKind {
    let gvk = value.get("responseKind").unwrap_or(&Value::Null);
    GroupVersionKind {
        group: text(gvk, "group"),
        version: text(gvk, "version"),
        kind: text(gvk, "kind"),
    }
}

/// An `APIGroupDiscovery` JSON object as this server's type.
fn group_from_json(group: &Value, creation_timestamp: Option<()>) -> ApiGroupDiscovery {
    let name = group
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ApiGroupDiscovery {
        metadata: GroupMeta {
            name: (!name.is_empty()).then(|| name.to_owned()),
            creation_timestamp,
        },
        versions: items(group, "versions")
            .map(|version| ApiVersionDiscovery {
                version: text(version, "version"),
                resources: items(version, "resources").map(resource_from_json).collect(),
                freshness: text(version, "freshness"),
            })
            .collect(),
    }
}

fn resource_from_json(resource: &Value) -> ApiResourceDiscovery {
    ApiResourceDiscovery {
        resource: text(resource, "resource"),
        response_kind: kind(resource),
        scope: match resource.get("scope").and_then(Value::as_str) {
            Some("Namespaced") => "Namespaced",
            _ => "Cluster",
        },
        singular_resource: text(resource, "singularResource"),
        verbs: texts(resource, "verbs"),
        short_names: texts(resource, "shortNames"),
        categories: texts(resource, "categories"),
        subresources: items(resource, "subresources")
            .map(|sub| ApiSubresourceDiscovery {
                subresource: text(sub, "subresource"),
                response_kind: kind(sub),
                verbs: texts(sub, "verbs"),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use mvp_core::PeerDiscoveryEntry;

    use super::*;
    use crate::api::catalog::{FeatureGates, KubeVersion, RuntimeConfig, ServedApis};
    use crate::api::discovery::aggregated::{AggregatedVersion, apis_document};

    fn document(minor: u32, runtime_config: &str) -> ApiGroupDiscoveryList {
        let version = KubeVersion::new(1, minor).unwrap();
        let apis = ServedApis::builtin(
            version,
            &runtime_config.parse::<RuntimeConfig>().unwrap(),
            &FeatureGates::default(),
        )
        .unwrap();
        apis_document(&apis, version, AggregatedVersion::V2)
    }

    fn names(list: &ApiGroupDiscoveryList) -> Vec<String> {
        list.items
            .iter()
            .map(|g| g.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn peer_entry(list: &ApiGroupDiscoveryList) -> PeerDiscoveryEntry {
        PeerDiscoveryEntry::from_discovery_lists([&serde_json::to_value(list).unwrap()])
    }

    #[test]
    fn json_round_trip_is_lossless_so_local_alone_is_unchanged() {
        for minor in [28, 33, 35, 36] {
            let local = document(minor, "");
            let value = serde_json::to_value(&local).unwrap();
            let timestamp = local.items[0].metadata.creation_timestamp;
            let back: Vec<ApiGroupDiscovery> = value["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| group_from_json(g, timestamp))
                .collect();
            assert_eq!(back, local.items, "1.{minor}");
        }
        let local = document(36, "batch/v1=false");
        // A peer serving exactly the same adds nothing: the local document as is.
        let same = vec![(
            "peer".to_owned(),
            serde_json::to_value(&local).unwrap()["items"]
                .as_array()
                .unwrap()
                .clone(),
        )];
        assert_eq!(merge_with_peers("a", &local, &same), local);
    }

    #[test]
    fn a_peer_group_is_added_and_the_etag_changes() {
        let local = document(36, "batch/v1=false");
        let peer = document(36, "");
        let entry = peer_entry(&peer);
        let merged = merge_with_peers("a", &local, &[("b".to_owned(), entry.groups)]);
        assert!(!names(&local).contains(&"batch".to_owned()));
        // The peer's list contains every group: its order wins (MergePreservingRelativeOrder shortcut).
        assert_eq!(names(&merged), names(&peer));
        assert_eq!(merged, peer);
        assert_ne!(merged.etag(), local.etag());
    }

    /// Upstream `TestPeerAggregatedDiscoveryMetrics`, through the discovery module's request path.
    #[test]
    fn metrics_match_upstreams_unit_test() {
        use crate::api::discovery::{DiscoveryContext, serve};

        let registry = Registry::new();
        let handler = Arc::new(PeerAggregatedDiscoveryHandler::new("test-server", &registry).unwrap());
        let peers = Arc::new(PeerDiscoveryCache::new());
        peers.replace(HashMap::from([(
            "peer-server-1".to_owned(),
            peer_entry(&document(36, "")),
        )]));
        handler.set_peer_cache(peers);
        let version = KubeVersion::new(1, 36).unwrap();
        let apis = ServedApis::builtin(
            version,
            &"batch/v1=false".parse().unwrap(),
            &FeatureGates::default(),
        )
        .unwrap();
        let mut ctx = DiscoveryContext::new(version, FeatureGates::default(), "127.0.0.1:6443");
        ctx.peer_aggregated = Some(handler.clone());
        let get = |accept: &str| {
            let (parts, ()) = http::Request::get("/apis")
                .header("accept", accept)
                .body(())
                .unwrap()
                .into_parts();
            serve(&parts, &apis, &ctx).unwrap()
        };
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let body = |response: http::Response<bytes::Bytes>| -> Value {
            serde_json::from_slice(response.body()).unwrap()
        };
        // Three peer-aggregated requests, one with an unknown profile.
        assert!(body(get(v2)).to_string().contains("\"batch\""));
        get(&format!("{v2};profile=foo"));
        get(v2);
        // Two no-peer requests, invalidating in between: never a hit or a miss.
        let local = body(get(&format!("{v2};profile=nopeer")));
        assert!(!local.to_string().contains("\"batch\""));
        handler.invalidate();
        get(&format!("{v2};profile=nopeer"));
        handler.invalidate();
        let m = handler.metrics();
        assert_eq!(
            (m.cache_hits.get(), m.cache_misses.get(), m.nopeer_requests.get()),
            (2, 1, 2)
        );
        // `/api` goes through the same wrapper upstream: a nopeer request there counts too.
        let (parts, ()) = http::Request::get("/api")
            .header("accept", format!("{v2};profile=nopeer"))
            .body(())
            .unwrap()
            .into_parts();
        assert_eq!(serve(&parts, &apis, &ctx).unwrap().status(), 200);
        assert_eq!(m.nopeer_requests.get(), 3);
    }

    #[test]
    fn cache_hits_misses_and_invalidation_follow_local_and_peer_changes() {
        let registry = Registry::new();
        let handler = PeerAggregatedDiscoveryHandler::new("a", &registry).unwrap();
        let local = document(36, "batch/v1=false");
        assert_eq!(
            handler.merged_apis(&local),
            None,
            "no peer proxy: local, nothing counted"
        );
        assert_eq!(handler.metrics().cache_misses.get(), 0);

        let peers = Arc::new(PeerDiscoveryCache::new());
        assert!(handler.set_peer_cache(peers.clone()));
        assert!(!handler.set_peer_cache(Arc::new(PeerDiscoveryCache::new())));
        assert_eq!(handler.merged_apis(&local).as_ref(), Some(&local));
        assert_eq!(handler.merged_apis(&local).as_ref(), Some(&local));
        assert_eq!(
            (
                handler.metrics().cache_hits.get(),
                handler.metrics().cache_misses.get()
            ),
            (1, 1)
        );

        peers.replace(HashMap::from([("b".to_owned(), peer_entry(&document(36, "")))]));
        let merged = handler.merged_apis(&local).unwrap();
        assert!(names(&merged).contains(&"batch".to_owned()));
        assert_eq!(handler.metrics().cache_misses.get(), 2, "peer change recomputes");

        // A local change (another served set) recomputes too.
        let fewer = document(36, "batch/v1=false,apps/v1=false");
        let merged = handler.merged_apis(&fewer).unwrap();
        assert!(
            names(&merged).contains(&"apps".to_owned()),
            "apps still from the peer"
        );
        assert_eq!(handler.metrics().cache_misses.get(), 3);
        handler.merged_apis(&fewer);
        assert_eq!(handler.metrics().cache_hits.get(), 2);

        // An exclusion update changes the generation as well.
        peers.set_excluded_group_versions(HashSet::from([("batch".to_owned(), "v1".to_owned())]));
        let merged = handler.merged_apis(&fewer).unwrap();
        assert!(!names(&merged).contains(&"batch".to_owned()));

        // The last peer leaving: back to the local document (upstream 1.36 keeps the old merge).
        peers.replace(HashMap::new());
        assert_eq!(handler.merged_apis(&local).as_ref(), Some(&local));
        assert_eq!(handler.metrics().cache_misses.get(), 5);

        handler.invalidate();
        handler.merged_apis(&local);
        assert_eq!(handler.metrics().cache_misses.get(), 6);
        handler.nopeer_requested();
        assert_eq!(handler.metrics().nopeer_requests.get(), 1);
        let text = {
            let mut buffer = Vec::new();
            prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut buffer)
                .unwrap();
            String::from_utf8(buffer).unwrap()
        };
        assert!(
            text.contains(&format!(
                "# HELP aggregator_discovery_nopeer_requests_total {NOPEER_HELP}\n"
            )),
            "{text}"
        );
        assert!(
            text.contains("aggregator_discovery_peer_aggregated_cache_misses_total 6\n"),
            "{text}"
        );
    }
}
