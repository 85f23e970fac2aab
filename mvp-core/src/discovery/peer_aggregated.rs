//! Peer-aggregated discovery (KEP-4020 beta, docs/mvp-behaviour.md §1.5, §7.1): what a 1.35+ server with
//! the Mixed Version Proxy answers to aggregated `apidiscovery.k8s.io/v2` discovery requests — for
//! `/apis` its own groups merged with every peer's (upstream `aggregated/peer_aggregated_handler.go`
//! and `aggregated/wrapper.go`), with upstream's ETag, `304 Not Modified` and metrics.
//!
//! The embedding server negotiates the media type itself (it also serves unaggregated discovery and
//! `v2beta1`, which are never peer-aggregated) and encodes the [`DiscoveryAnswer`]; the handler
//! decides which document answers and caches the merge.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

#[cfg(feature = "prometheus")]
use prometheus::{IntCounter, Opts, Registry};

use crate::apidiscovery::APIGroupDiscoveryList;
use crate::discovery::caches::PeerDiscoveryCache;
use crate::discovery::merge::merge_peer_discovery;

/// Upstream's help texts, with the `[ALPHA] ` prefix component-base adds.
#[cfg(feature = "prometheus")]
const HITS_HELP: &str = "[ALPHA] Counter of number of times discovery was served from peer-aggregated cache";
#[cfg(feature = "prometheus")]
const MISSES_HELP: &str =
    "[ALPHA] Counter of number of times discovery was aggregated across all API servers";
#[cfg(feature = "prometheus")]
const NOPEER_HELP: &str =
    "[ALPHA] Counter of number of times no-peer (non peer-aggregated) discovery was requested";

/// The `profile` parameter of a negotiated aggregated `v2` media type
/// (`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiscoveryProfile {
    /// No profile, or any profile other than `nopeer` (upstream treats an unknown profile as the
    /// default): `/apis` is peer-aggregated.
    #[default]
    PeerAggregated,
    /// `profile=nopeer`: only this server's own APIs. Peers ask each other with it, so that
    /// their discovery sync never feeds merged documents back into merges.
    NoPeer,
}

impl DiscoveryProfile {
    /// The profile a request asked for, from the value of the media type's `profile` parameter
    /// (`None` when it has none).
    pub fn from_parameter(profile: Option<&str>) -> Self {
        match profile {
            Some("nopeer") => DiscoveryProfile::NoPeer,
            _ => DiscoveryProfile::PeerAggregated,
        }
    }
}

/// What to answer an aggregated discovery request (upstream `ServeHTTPWithETag`): the `ETag`, and
/// the document for a `200`, or none for a `304 Not Modified` because `If-None-Match` matched.
///
/// The caller writes the `ETag` header in both cases and, for a `200`, encodes the document in the
/// negotiated media type; upstream also sets `Vary: Accept` and `Cache-Control: public`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryAnswer {
    /// The `ETag` header value ([`APIGroupDiscoveryList::etag`] of the document).
    pub etag: String,
    /// The document to send with `200 OK`; `None` for `304 Not Modified` with an empty body.
    pub document: Option<Arc<APIGroupDiscoveryList>>,
}

impl DiscoveryAnswer {
    /// The answer for serving `document`: `304` when `if_none_match` is exactly its ETag (upstream
    /// compares the header value as a whole, without parsing lists or weak tags), else `200`.
    pub fn new(document: APIGroupDiscoveryList, if_none_match: Option<&str>) -> Self {
        let etag = document.etag();
        Self::with_etag(Arc::new(document), etag, if_none_match)
    }

    fn with_etag(document: Arc<APIGroupDiscoveryList>, etag: String, if_none_match: Option<&str>) -> Self {
        let not_modified = if_none_match == Some(etag.as_str());
        Self {
            document: (!not_modified).then_some(document),
            etag,
        }
    }
}

/// The three `aggregator_discovery_*` counters of peer-aggregated discovery (upstream
/// `aggregated/metrics.go`, ALPHA, since 1.35).
#[derive(Debug, Clone)]
pub struct PeerAggregatedMetrics {
    counters: AggregatedCounters,
}

#[cfg(not(feature = "prometheus"))]
type AggregatedCounters = std::convert::Infallible;

#[cfg(feature = "prometheus")]
#[derive(Debug, Clone)]
struct AggregatedCounters {
    /// `aggregator_discovery_peer_aggregated_cache_hits_total`: a peer-aggregated `/apis` request
    /// served from the cached merge.
    cache_hits: IntCounter,
    /// `aggregator_discovery_peer_aggregated_cache_misses_total`: the merged document
    /// (re)computed, also when there are no peers to merge.
    cache_misses: IntCounter,
    /// `aggregator_discovery_nopeer_requests_total`: aggregated `v2` requests of `/api` or `/apis`
    /// with `profile=nopeer`, counted with or without a connected peer cache.
    nopeer_requests: IntCounter,
}

#[cfg(feature = "prometheus")]
impl PeerAggregatedMetrics {
    /// Creates the counters and registers them in `registry`; fails if `registry` already holds
    /// counters of these names.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let counter = |name: &str, help: &str| -> Result<IntCounter, prometheus::Error> {
            let counter = IntCounter::with_opts(Opts::new(name, help))?;
            registry.register(Box::new(counter.clone()))?;
            Ok(counter)
        };
        Ok(Self {
            counters: AggregatedCounters {
                cache_hits: counter("aggregator_discovery_peer_aggregated_cache_hits_total", HITS_HELP)?,
                cache_misses: counter(
                    "aggregator_discovery_peer_aggregated_cache_misses_total",
                    MISSES_HELP,
                )?,
                nopeer_requests: counter("aggregator_discovery_nopeer_requests_total", NOPEER_HELP)?,
            },
        })
    }
}

#[cfg(feature = "prometheus")]
impl PeerAggregatedMetrics {
    /// `aggregator_discovery_peer_aggregated_cache_hits_total`: peer-aggregated `/apis` requests
    /// served from the cached merge.
    pub fn cache_hits(&self) -> u64 {
        self.counters.cache_hits.get()
    }

    /// `aggregator_discovery_peer_aggregated_cache_misses_total`: times the merged document was
    /// (re)computed, also when there were no peers to merge.
    pub fn cache_misses(&self) -> u64 {
        self.counters.cache_misses.get()
    }

    /// `aggregator_discovery_nopeer_requests_total`: aggregated `v2` requests of `/api` or `/apis`
    /// with `profile=nopeer`.
    pub fn nopeer_requests(&self) -> u64 {
        self.counters.nopeer_requests.get()
    }
}

/// Which counter of [`PeerAggregatedMetrics`] an answer counts in.
#[derive(Clone, Copy, Debug)]
enum Counted {
    Hit,
    Miss,
    NoPeer,
}

impl PeerAggregatedMetrics {
    fn count(&self, counted: Counted) {
        #[cfg(feature = "prometheus")]
        match counted {
            Counted::Hit => self.counters.cache_hits.inc(),
            Counted::Miss => self.counters.cache_misses.inc(),
            Counted::NoPeer => self.counters.nopeer_requests.inc(),
        }
        #[cfg(not(feature = "prometheus"))]
        match (self.counters, counted) {}
    }
}

/// The merged document and what it was computed from.
#[derive(Debug)]
struct CachedMerge {
    /// The local document the merge used.
    local: APIGroupDiscoveryList,
    /// [`PeerDiscoveryCache::generation`] when the peers' groups were read.
    peer_generation: u64,
    merged: Arc<APIGroupDiscoveryList>,
    etag: String,
}

/// Answers aggregated `v2` discovery of `/api` and `/apis` for one server, peer-aggregating `/apis`
/// as upstream's wrapper and peer-aggregated handler do:
///
/// - `profile=nopeer` (either path): the local document, counted in
///   `aggregator_discovery_nopeer_requests_total`;
/// - `/api`: always the local document (the core group is never peer-aggregated);
/// - `/apis` before [`Self::set_peer_cache`] (no peer proxy, or one resolving peers by
///   StorageVersion): the local document, no counter touched — upstream installs no
///   peer-aggregated handler then;
/// - `/apis` otherwise: the local groups merged with the peers' ([`merge_peer_discovery`]), from a
///   cache keyed by the local document and the peer cache's generation
///   (a hit or a miss counted).
///
/// Peers' groups are read as upstream decodes them (decoded once, when fetched),
/// and every group's metadata is written the way the local document writes its own (Go re-encodes
/// its zero `creationTimestamp` with its own rules).
///
/// Unlike upstream 1.36, which keeps serving a departed peer's groups when the last peer leaves, an
/// emptied peer cache is a change like any other here: the merge drops them.
#[derive(Debug)]
pub struct PeerAggregatedDiscoveryHandler {
    server_id: String,
    peers: OnceLock<Arc<PeerDiscoveryCache>>,
    cache: Mutex<Option<CachedMerge>>,
    metrics: Option<PeerAggregatedMetrics>,
}

impl PeerAggregatedDiscoveryHandler {
    /// A handler for server `server_id` (its identity-lease name, which decides where its groups
    /// sort among the peers'); it counts nothing until [`Self::with_metrics`].
    pub fn new(server_id: impl Into<String>) -> Self {
        Self {
            server_id: server_id.into(),
            peers: OnceLock::new(),
            cache: Mutex::new(None),
            metrics: None,
        }
    }

    /// Counts its answers in `metrics` (upstream's `aggregator_discovery_*` counters).
    #[must_use]
    pub fn with_metrics(mut self, metrics: PeerAggregatedMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn count(&self, counted: Counted) {
        if let Some(metrics) = &self.metrics {
            metrics.count(counted);
        }
    }

    /// Connects the peer discovery cache the Mixed Version Proxy fills (see
    /// [`DiscoveryPeers`](crate::DiscoveryPeers)); from then on `/apis` is peer-aggregated.
    /// Returns `false` (and changes nothing) if a cache was already connected.
    pub fn set_peer_cache(&self, peers: Arc<PeerDiscoveryCache>) -> bool {
        self.peers.set(peers).is_ok()
    }

    /// Connects the peer discovery of a Discovery-mode layer (see [`Self::set_peer_cache`]).
    pub fn connect(&self, peers: &crate::DiscoveryPeers) -> bool {
        self.set_peer_cache(peers.peer_cache().clone())
    }

    /// The counters given to [`Self::with_metrics`], if any.
    pub fn metrics(&self) -> Option<&PeerAggregatedMetrics> {
        self.metrics.as_ref()
    }

    /// Drops the cached merge (upstream `InvalidateCache`); the next `/apis` request recomputes it.
    /// Changes of the local document or of the peer cache already do, without this.
    pub fn invalidate(&self) {
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Answers an aggregated `v2` request of `/apis`, given this server's own document `local`,
    /// the request's profile and its `If-None-Match` header value.
    pub fn serve_apis(
        &self,
        local: APIGroupDiscoveryList,
        profile: DiscoveryProfile,
        if_none_match: Option<&str>,
    ) -> DiscoveryAnswer {
        if profile == DiscoveryProfile::NoPeer {
            self.count(Counted::NoPeer);
            return DiscoveryAnswer::new(local, if_none_match);
        }
        let Some(peers) = self.peers.get() else {
            return DiscoveryAnswer::new(local, if_none_match);
        };
        // Read the generation before the groups: a replacement in between leaves a newer merge under
        // an older generation, which the next request merely recomputes.
        let peer_generation = peers.generation();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = cache.as_ref()
            && cached.peer_generation == peer_generation
            && cached.local == local
        {
            self.count(Counted::Hit);
            return DiscoveryAnswer::with_etag(cached.merged.clone(), cached.etag.clone(), if_none_match);
        }
        self.count(Counted::Miss);
        let merged = Arc::new(merge_with_peers(&self.server_id, &local, peers));
        let etag = merged.etag();
        *cache = Some(CachedMerge {
            local,
            peer_generation,
            merged: merged.clone(),
            etag: etag.clone(),
        });
        DiscoveryAnswer::with_etag(merged, etag, if_none_match)
    }

    /// Answers an aggregated `v2` request of `/api`: always the local document `local`, but a
    /// `nopeer` request is counted (upstream wraps `/api` with the same handler).
    pub fn serve_api(
        &self,
        local: APIGroupDiscoveryList,
        profile: DiscoveryProfile,
        if_none_match: Option<&str>,
    ) -> DiscoveryAnswer {
        if profile == DiscoveryProfile::NoPeer {
            self.count(Counted::NoPeer);
        }
        DiscoveryAnswer::new(local, if_none_match)
    }
}

/// The local document with its groups merged with the peers' (other than `server_id`, after
/// exclusion filtering); the local document itself when no peer lists a group.
fn merge_with_peers(
    server_id: &str,
    local: &APIGroupDiscoveryList,
    peers: &PeerDiscoveryCache,
) -> APIGroupDiscoveryList {
    let peer_groups = peers.peer_groups(server_id);
    if peer_groups.is_empty() {
        return local.clone();
    }
    let mut items = merge_peer_discovery(server_id, &local.items, &peer_groups);
    let creation_timestamp = local.items.first().and_then(|g| g.metadata.creation_timestamp);
    for group in &mut items {
        group.metadata.creation_timestamp = creation_timestamp;
    }
    APIGroupDiscoveryList {
        items,
        ..local.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    #[cfg(feature = "prometheus")]
    use std::collections::HashSet;

    use serde_json::{Value, json};

    use super::*;
    use crate::discovery::caches::PeerDiscoveryEntry;

    /// A `v2` `/apis` list of `groups` (each with `v1` and one resource), metadata as a 1.33 server
    /// writes it when `null_timestamp`.
    fn list(groups: &[&str], null_timestamp: bool) -> APIGroupDiscoveryList {
        let items: Vec<Value> = groups
            .iter()
            .map(|name| {
                let mut metadata = json!({"name": name});
                if null_timestamp {
                    metadata["creationTimestamp"] = Value::Null;
                }
                json!({"metadata": metadata, "versions": [{"version": "v1", "freshness": "Current",
                    "resources": [{"resource": "things", "scope": "Cluster", "verbs": ["get"]}]}]})
            })
            .collect();
        serde_json::from_value(json!({"kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}))
        .unwrap()
    }

    fn peer_entry(list: &APIGroupDiscoveryList) -> PeerDiscoveryEntry {
        PeerDiscoveryEntry::from_discovery_lists([&serde_json::to_value(list).unwrap()])
    }

    #[cfg(feature = "prometheus")]
    fn names(answer: &DiscoveryAnswer) -> Vec<String> {
        let document = answer.document.as_ref().expect("a 200 answer");
        document.items.iter().map(|g| g.name().to_owned()).collect()
    }

    #[cfg(feature = "prometheus")]
    fn counts(handler: &PeerAggregatedDiscoveryHandler) -> (u64, u64, u64) {
        let m = handler.metrics().expect("counters");
        (m.cache_hits(), m.cache_misses(), m.nopeer_requests())
    }

    const DEFAULT: DiscoveryProfile = DiscoveryProfile::PeerAggregated;

    #[test]
    fn profiles_other_than_nopeer_are_peer_aggregated() {
        assert_eq!(
            DiscoveryProfile::from_parameter(Some("nopeer")),
            DiscoveryProfile::NoPeer
        );
        assert_eq!(DiscoveryProfile::from_parameter(Some("foo")), DEFAULT);
        assert_eq!(DiscoveryProfile::from_parameter(None), DEFAULT);
    }

    /// Upstream `TestPeerAggregatedDiscoveryMetrics`: three peer-aggregated requests (one with an
    /// unknown profile) → 2 hits, 1 miss; two `nopeer` requests, invalidating in between → nopeer 2,
    /// hits and misses unchanged.
    #[cfg(feature = "prometheus")]
    #[test]
    fn metrics_match_upstreams_unit_test() {
        let registry = Registry::new();
        let handler = PeerAggregatedDiscoveryHandler::new("test-server")
            .with_metrics(PeerAggregatedMetrics::register(&registry).unwrap());
        let peers = Arc::new(PeerDiscoveryCache::new());
        peers.replace(HashMap::from([(
            "peer-server-1".to_owned(),
            peer_entry(&list(&["apps", "batch"], false)),
        )]));
        handler.set_peer_cache(peers);
        let local = list(&["apps"], false);
        let merged = handler.serve_apis(local.clone(), DEFAULT, None);
        assert_eq!(names(&merged), ["apps", "batch"]);
        handler.serve_apis(local.clone(), DiscoveryProfile::from_parameter(Some("foo")), None);
        handler.serve_apis(local.clone(), DEFAULT, None);
        let nopeer = handler.serve_apis(local.clone(), DiscoveryProfile::NoPeer, None);
        assert_eq!(names(&nopeer), ["apps"]);
        handler.invalidate();
        handler.serve_apis(local.clone(), DiscoveryProfile::NoPeer, None);
        handler.invalidate();
        assert_eq!(counts(&handler), (2, 1, 2));
        // `/api` is never merged, but a nopeer request there counts too.
        let core = handler.serve_api(list(&[""], false), DiscoveryProfile::NoPeer, None);
        assert_eq!(names(&core), [""]);
        handler.serve_api(list(&[""], false), DEFAULT, None);
        assert_eq!(counts(&handler), (2, 1, 3));

        let text = {
            let mut buffer = Vec::new();
            prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut buffer)
                .unwrap();
            String::from_utf8(buffer).unwrap()
        };
        for (name, help, value) in [
            (
                "aggregator_discovery_peer_aggregated_cache_hits_total",
                HITS_HELP,
                2,
            ),
            (
                "aggregator_discovery_peer_aggregated_cache_misses_total",
                MISSES_HELP,
                1,
            ),
            ("aggregator_discovery_nopeer_requests_total", NOPEER_HELP, 3),
        ] {
            assert!(text.contains(&format!("# HELP {name} {help}\n")), "{text}");
            assert!(text.contains(&format!("\n{name} {value}\n")), "{text}");
        }
    }

    #[cfg(feature = "prometheus")]
    #[test]
    fn cache_hits_misses_and_invalidation_follow_local_and_peer_changes() {
        let handler = PeerAggregatedDiscoveryHandler::new("a")
            .with_metrics(PeerAggregatedMetrics::register(&Registry::new()).unwrap());
        let local = list(&["apps"], false);
        let answer = handler.serve_apis(local.clone(), DEFAULT, None);
        assert_eq!(
            answer,
            DiscoveryAnswer::new(local.clone(), None),
            "no peer cache: local"
        );
        assert_eq!(
            counts(&handler),
            (0, 0, 0),
            "nothing counted without a peer cache"
        );

        let peers = Arc::new(PeerDiscoveryCache::new());
        assert!(handler.set_peer_cache(peers.clone()));
        assert!(!handler.set_peer_cache(Arc::new(PeerDiscoveryCache::new())));
        let alone = DiscoveryAnswer::new(local.clone(), None);
        assert_eq!(handler.serve_apis(local.clone(), DEFAULT, None), alone);
        assert_eq!(handler.serve_apis(local.clone(), DEFAULT, None), alone);
        assert_eq!(counts(&handler), (1, 1, 0), "no peer: a miss, then a hit");

        peers.replace(HashMap::from([(
            "b".to_owned(),
            peer_entry(&list(&["apps", "batch"], false)),
        )]));
        let merged = handler.serve_apis(local.clone(), DEFAULT, None);
        assert_eq!(names(&merged), ["apps", "batch"]);
        assert_ne!(merged.etag, alone.etag);
        assert_eq!(counts(&handler).1, 2, "a peer change recomputes");

        // A local change recomputes too.
        let other = list(&["rbac"], false);
        assert_eq!(
            names(&handler.serve_apis(other.clone(), DEFAULT, None)),
            ["apps", "batch", "rbac"]
        );
        assert_eq!(counts(&handler).1, 3);
        handler.serve_apis(other.clone(), DEFAULT, None);
        assert_eq!(counts(&handler).0, 2);

        // An exclusion update changes the generation as well.
        peers.set_excluded_group_versions(HashSet::from([("batch".to_owned(), "v1".to_owned())]));
        assert_eq!(
            names(&handler.serve_apis(other.clone(), DEFAULT, None)),
            ["apps", "rbac"]
        );

        // The last peer leaving: back to the local document (upstream 1.36 keeps the old merge).
        peers.replace(HashMap::<String, PeerDiscoveryEntry>::new());
        assert_eq!(handler.serve_apis(local.clone(), DEFAULT, None), alone);
        assert_eq!(counts(&handler).1, 5);

        handler.invalidate();
        handler.serve_apis(local, DEFAULT, None);
        assert_eq!(counts(&handler), (2, 6, 0));
    }

    #[test]
    fn if_none_match_with_the_etag_is_not_modified() {
        let handler = PeerAggregatedDiscoveryHandler::new("a");
        let peers = Arc::new(PeerDiscoveryCache::new());
        peers.replace(HashMap::from([(
            "b".to_owned(),
            peer_entry(&list(&["batch"], false)),
        )]));
        handler.set_peer_cache(peers);
        let local = list(&["apps"], false);
        let first = handler.serve_apis(local.clone(), DEFAULT, None);
        let document = first.document.clone().unwrap();
        assert_eq!(first.etag, document.etag());
        assert!(
            first.etag.starts_with('"') && first.etag.len() == 130,
            "{}",
            first.etag
        );

        let cached = handler.serve_apis(local.clone(), DEFAULT, Some(&first.etag));
        assert_eq!(cached.document, None);
        assert_eq!(cached.etag, first.etag);
        let stale = handler.serve_apis(local.clone(), DEFAULT, Some("\"other\""));
        assert_eq!(stale, first);
        // nopeer answers the local document, with its own ETag.
        let nopeer = handler.serve_apis(local.clone(), DiscoveryProfile::NoPeer, Some(&first.etag));
        assert_eq!(nopeer, DiscoveryAnswer::new(local.clone(), None));
        let local_etag = local.etag();
        assert_eq!(
            handler
                .serve_apis(local, DiscoveryProfile::NoPeer, Some(&local_etag))
                .document,
            None
        );
    }

    /// Group metadata is written as this server writes its own, whatever the peer wrote; peers'
    /// unknown fields are gone; kind, apiVersion and list metadata are the local document's.
    #[test]
    fn merged_groups_are_written_the_local_way() {
        let mut peer = serde_json::to_value(list(&["batch"], false)).unwrap();
        peer["items"][0]["versions"][0]["resources"][0]["futureField"] = json!(1);
        let peers = PeerDiscoveryCache::new();
        peers.replace(HashMap::from([(
            "b".to_owned(),
            PeerDiscoveryEntry::from_discovery_lists([&peer]),
        )]));
        let local = list(&["apps"], true);
        let merged = merge_with_peers("a", &local, &peers);
        assert_eq!(merged.kind, "APIGroupDiscoveryList");
        assert_eq!(merged.api_version, "apidiscovery.k8s.io/v2");
        assert_eq!(merged, list(&["apps", "batch"], true));
        let local = list(&["apps"], false);
        assert_eq!(
            merge_with_peers("a", &local, &peers),
            list(&["apps", "batch"], false)
        );
    }
}
