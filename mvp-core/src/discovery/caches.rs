//! Beta (v1.33+) peer capability from discovery (docs/mvp-behaviour.md §1.4, §2.3): the local discovery
//! cache, the peer discovery cache, and the resolver that reads both.
//!
//! Pure data structures; fetching peers' discovery documents is in
//! [`crate::discovery::sync`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Deserialize as _;
use serde_json::Value;

use crate::apidiscovery::APIGroupDiscovery;
use crate::gvr::GroupVersionResource;
use crate::resolve::{LocalServedResources, PeerResolver};
use crate::snapshot::Snapshot;

use crate::objects::GroupVersion;

/// Every resource entry of an aggregated discovery document (`APIGroupDiscoveryList` JSON;
/// `metadata.name` is the group, `""` for the core group), with its group and version.
pub(crate) fn discovery_resources(list: &Value) -> impl Iterator<Item = (&str, &str, &Value)> {
    array(list.get("items")).flat_map(move |group| {
        let name = group
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        array(group.get("versions")).flat_map(move |version| {
            let v = version.get("version").and_then(Value::as_str).unwrap_or("");
            array(version.get("resources")).map(move |resource| (name, v, resource))
        })
    })
}

/// The elements of a JSON array, none if `value` is missing or not an array.
fn array(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value.and_then(Value::as_array).into_iter().flatten()
}

/// Every GVR listed in an aggregated discovery document (see [`discovery_resources`]).
pub(crate) fn gvrs_from_discovery(list: &Value) -> HashSet<GroupVersionResource> {
    discovery_resources(list)
        .filter_map(|(group, version, resource)| {
            let r = resource.get("resource").and_then(Value::as_str)?;
            Some(GroupVersionResource::new(group, version, r))
        })
        .collect()
}

/// What one peer serves, from its `/api` and `/apis` discovery.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PeerDiscoveryEntry {
    /// Every GVR the peer lists (core group `""`).
    pub(crate) gvrs: HashSet<GroupVersionResource>,
    /// The peer's `APIGroupDiscovery` objects, core group excluded, first occurrence per
    /// group name, in the peer's order (input to peer-aggregated discovery). Decoded as upstream
    /// decodes them into its Go structs: fields this server does not know are dropped.
    pub(crate) groups: Vec<APIGroupDiscovery>,
}

impl PeerDiscoveryEntry {
    /// Builds an entry from the discovery documents fetched from a peer. A group that does not
    /// decode as an `APIGroupDiscovery` (a field of the wrong type) is left out of
    /// [`Self::groups`]; its resources still count in [`Self::gvrs`].
    pub(crate) fn from_discovery_lists<'a>(lists: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut entry = Self::default();
        let mut seen = HashSet::new();
        for list in lists {
            entry.gvrs.extend(gvrs_from_discovery(list));
            for group in list.get("items").and_then(Value::as_array).into_iter().flatten() {
                let name = group
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                // The core group is proxied but never peer-aggregated (docs/mvp-behaviour.md §1.5).
                if !name.is_empty() && seen.insert(name.to_owned()) {
                    match APIGroupDiscovery::deserialize(group) {
                        Ok(group) => entry.groups.push(group),
                        Err(err) => {
                            tracing::debug!(group = name, error = %err, "undecodable peer discovery group")
                        }
                    }
                }
            }
        }
        entry
    }

    /// Whether the entry lists nothing (such peers are left out of the cache).
    pub(crate) fn is_empty(&self) -> bool {
        self.gvrs.is_empty() && self.groups.is_empty()
    }
}

/// This server's own discovery (beta "local discovery cache"): the GVRs it serves.
#[derive(Debug, Default)]
pub(crate) struct LocalDiscoveryCache {
    gvrs: Snapshot<HashSet<GroupVersionResource>>,
    populated: AtomicBool,
}

impl LocalDiscoveryCache {
    /// An empty, unpopulated cache.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Replaces the served set and marks the cache populated.
    pub(crate) fn replace(&self, gvrs: HashSet<GroupVersionResource>) {
        self.gvrs.store(gvrs);
        self.populated.store(true, Ordering::Release);
    }

    /// Whether [`Self::replace`] was called at least once.
    pub(crate) fn is_populated(&self) -> bool {
        self.populated.load(Ordering::Acquire)
    }

    /// Whether the GVR is served locally.
    pub(crate) fn contains(&self, gvr: &GroupVersionResource) -> bool {
        self.gvrs.load().contains(gvr)
    }
}

/// The peers' discovery as Discovery mode's last sync found it (peer ID → what the peer
/// serves, replaced wholesale after each sync), with the excluded group versions (local
/// CRDs/APIServices, v1.36) applied when read. Opaque outside the crate: a server hands it to
/// peer-aggregated discovery ([`PeerAggregatedDiscoveryHandler::connect`](crate::PeerAggregatedDiscoveryHandler::connect)).
#[derive(Debug, Default)]
pub struct PeerDiscoveryCache {
    entries: Snapshot<HashMap<String, Arc<PeerDiscoveryEntry>>>,
    excluded: Snapshot<HashSet<GroupVersion>>,
    synced: AtomicBool,
    generation: AtomicU64,
}

impl PeerDiscoveryCache {
    /// An empty, unsynced cache.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Replaces all entries (empty entries are dropped) and bumps [`Self::generation`].
    pub(crate) fn replace<E: Into<Arc<PeerDiscoveryEntry>>>(
        &self,
        entries: impl IntoIterator<Item = (String, E)>,
    ) {
        let entries = entries
            .into_iter()
            .map(|(k, e)| (k, e.into()))
            .filter(|(_, e)| !e.is_empty())
            .collect();
        self.entries.store(entries);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops the entries of the peers `keep` refuses (bumping [`Self::generation`] when one goes),
    /// without fetching anything.
    pub(crate) fn retain_peers(&self, keep: impl Fn(&str) -> bool) {
        let entries = self.entries.load();
        if entries.keys().all(|id| keep(id)) {
            return;
        }
        self.replace(
            entries
                .iter()
                .filter(|(id, _)| keep(id))
                .map(|(id, e)| (id.clone(), e.clone())),
        );
    }

    /// Replaces the excluded group versions and bumps [`Self::generation`].
    pub(crate) fn set_excluded_group_versions(&self, excluded: HashSet<GroupVersion>) {
        self.excluded.store(excluded);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Marks the initial sync done (the filter then starts proxying).
    pub(crate) fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// Whether [`Self::mark_synced`] was called.
    pub(crate) fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Changes on every replacement; peer-aggregated discovery caches key on it.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Peer IDs (other than `own_id`) whose entry lists `gvr`, unless its group version is
    /// excluded.
    pub(crate) fn peers_serving(&self, gvr: &GroupVersionResource, own_id: &str) -> Vec<String> {
        if self.is_excluded(&gvr.group, &gvr.version) {
            return Vec::new();
        }
        let entries = self.entries.load();
        entries
            .iter()
            .filter(|(id, e)| id.as_str() != own_id && e.gvrs.contains(gvr))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Each peer's (exclusion-filtered) groups, sorted by peer ID, skipping `own_id` and
    /// peers left with no group. Groups whose versions are all excluded are dropped.
    pub(crate) fn peer_groups(&self, own_id: &str) -> Vec<(String, Vec<APIGroupDiscovery>)> {
        let entries = self.entries.load();
        let excluded = self.excluded.load();
        let mut out: Vec<(String, Vec<APIGroupDiscovery>)> = entries
            .iter()
            .filter(|(id, _)| id.as_str() != own_id)
            .map(|(id, e)| {
                (
                    id.clone(),
                    e.groups
                        .iter()
                        .filter_map(|g| filter_group(g, &excluded))
                        .collect(),
                )
            })
            .filter(|(_, groups): &(String, Vec<APIGroupDiscovery>)| !groups.is_empty())
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The current entries (unfiltered).
    pub(crate) fn entries(&self) -> Arc<HashMap<String, Arc<PeerDiscoveryEntry>>> {
        self.entries.load()
    }

    fn is_excluded(&self, group: &str, version: &str) -> bool {
        let excluded = self.excluded.load();
        !excluded.is_empty() && excluded.contains(&(group.to_owned(), version.to_owned()))
    }
}

#[cfg(feature = "test-util")]
impl PeerDiscoveryCache {
    /// (`test-util`) A synced cache holding each peer's aggregated discovery documents as a
    /// sync would have fetched them, for testing what reads it (peer-aggregated discovery)
    /// without peers. Documents that do not decode contribute nothing.
    pub fn from_documents<'a>(
        peers: impl IntoIterator<Item = (&'a str, &'a [serde_json::Value])>,
    ) -> Arc<Self> {
        let cache = Self::new();
        cache.replace(
            peers
                .into_iter()
                .map(|(id, lists)| (id.to_owned(), PeerDiscoveryEntry::from_discovery_lists(lists))),
        );
        cache.mark_synced();
        Arc::new(cache)
    }
}

/// A group with its excluded versions removed; `None` when no version remains.
fn filter_group(group: &APIGroupDiscovery, excluded: &HashSet<GroupVersion>) -> Option<APIGroupDiscovery> {
    let mut group = group.clone();
    if excluded.is_empty() {
        return Some(group);
    }
    let name = group.name().to_owned();
    group
        .versions
        .retain(|v| !excluded.contains(&(name.clone(), v.version.clone())));
    (!group.versions.is_empty()).then_some(group)
}

/// The Discovery-mode resolver: local capability from a [`LocalDiscoveryCache`], peers from
/// a [`PeerDiscoveryCache`]. Synced when both are.
#[derive(Debug, Clone)]
pub(crate) struct DiscoveryResolver {
    server_id: String,
    local: Arc<LocalDiscoveryCache>,
    peers: Arc<PeerDiscoveryCache>,
}

impl DiscoveryResolver {
    /// A resolver for server `server_id` over the two caches.
    pub(crate) fn new(
        server_id: impl Into<String>,
        local: Arc<LocalDiscoveryCache>,
        peers: Arc<PeerDiscoveryCache>,
    ) -> Self {
        Self {
            server_id: server_id.into(),
            local,
            peers,
        }
    }

    /// This server's ID.
    pub(crate) fn server_id(&self) -> &str {
        &self.server_id
    }

    /// The local discovery cache.
    pub(crate) fn local(&self) -> &Arc<LocalDiscoveryCache> {
        &self.local
    }

    /// The peer discovery cache.
    pub(crate) fn peers(&self) -> &Arc<PeerDiscoveryCache> {
        &self.peers
    }
}

impl LocalServedResources for DiscoveryResolver {
    fn serves_locally(&self, gvr: &GroupVersionResource) -> bool {
        self.local.contains(gvr)
    }
}

impl PeerResolver for DiscoveryResolver {
    fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String> {
        self.peers.peers_serving(gvr, &self.server_id)
    }

    fn has_synced(&self) -> bool {
        self.local.is_populated() && self.peers.is_synced()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type GroupSpec<'a> = (&'a str, &'a [(&'a str, &'a [&'a str])]);

    fn discovery(groups: &[GroupSpec<'_>]) -> Value {
        let items: Vec<Value> = groups
            .iter()
            .map(|(name, versions)| {
                let versions: Vec<Value> = versions
                    .iter()
                    .map(|(v, rs)| {
                        let resources: Vec<Value> = rs
                            .iter()
                            .map(|r| json!({"resource": r, "verbs": ["get"]}))
                            .collect();
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": name}, "versions": versions})
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
    }

    #[test]
    fn entry_collects_gvrs_and_non_core_groups_once() {
        let api = discovery(&[("", &[("v1", &["pods", "services"])])]);
        let apis = discovery(&[
            ("batch", &[("v1", &["jobs", "cronjobs"])]),
            ("batch", &[("v2", &["x"])]),
        ]);
        let e = PeerDiscoveryEntry::from_discovery_lists([&api, &apis]);
        assert_eq!(e.gvrs.len(), 5);
        assert!(e.gvrs.contains(&GroupVersionResource::new("", "v1", "pods")));
        assert_eq!(e.groups.len(), 1, "core excluded, batch once");
        assert_eq!(e.groups[0].versions[0].version, "v1");
        assert!(PeerDiscoveryEntry::from_discovery_lists([]).is_empty());
    }

    #[test]
    fn resolver_reads_local_then_peers_skipping_self_and_exclusions() {
        let local = Arc::new(LocalDiscoveryCache::new());
        let peers = Arc::new(PeerDiscoveryCache::new());
        let r = DiscoveryResolver::new("a", local.clone(), peers.clone());
        assert!(!r.has_synced());
        local.replace(gvrs_from_discovery(&discovery(&[(
            "apps",
            &[("v1", &["deployments"])],
        )])));
        peers.mark_synced();
        assert!(r.has_synced());
        let jobs_doc = discovery(&[("batch", &[("v1", &["jobs"])])]);
        let gen0 = peers.generation();
        peers.replace(HashMap::from([
            (
                "a".to_owned(),
                PeerDiscoveryEntry::from_discovery_lists([&jobs_doc]),
            ),
            (
                "b".to_owned(),
                PeerDiscoveryEntry::from_discovery_lists([&jobs_doc]),
            ),
            ("c".to_owned(), PeerDiscoveryEntry::default()),
        ]));
        assert!(peers.generation() > gen0);
        assert_eq!(peers.entries().len(), 2, "empty entry dropped");
        let jobs = GroupVersionResource::new("batch", "v1", "jobs");
        assert!(r.serves_locally(&GroupVersionResource::new("apps", "v1", "deployments")));
        assert!(!r.serves_locally(&jobs));
        assert_eq!(r.peers_serving(&jobs), vec!["b".to_owned()]);
        assert_eq!(peers.peer_groups("a").len(), 1);
        peers.set_excluded_group_versions(HashSet::from([("batch".to_owned(), "v1".to_owned())]));
        assert!(r.peers_serving(&jobs).is_empty());
        assert!(
            peers.peer_groups("a").is_empty(),
            "group with no version left is dropped"
        );
    }
}
