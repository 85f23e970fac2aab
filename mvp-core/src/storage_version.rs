//! Alpha (v1.28–v1.32) peer capability from `internal.apiserver.k8s.io/v1alpha1`
//! StorageVersion objects (docs/mvp-behaviour.md §2.1).
//!
//! Object name `<group>.<resource>` (split on the last `.`; the core group is written `core`),
//! `status.storageVersions[].apiServerID` and `.servedVersions[]` (a `group/version` value
//! keeps the part after `/`). A GVR with no StorageVersion data is served locally
//! (docs/mvp-behaviour.md checklist 30).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::gvr::GroupVersionResource;
use crate::objects::StorageVersion;
use crate::resolve::{LocalServedResources, PeerResolver};
use crate::snapshot::Snapshot;

/// How StorageVersion objects spell the core group.
pub(crate) const CORE_GROUP_NAME: &str = "core";

/// GVR → IDs of the servers that serve it, as upstream's `svMap`. Groups are kept as
/// StorageVersion names spell them (`core` for the core group).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageVersionIndex {
    servers: HashMap<GroupVersionResource, BTreeSet<String>>,
}

impl StorageVersionIndex {
    /// Builds the index from StorageVersion objects.
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a StorageVersion>) -> Self {
        let mut index = Self::default();
        for obj in objects {
            index.apply(None, Some(obj));
        }
        index
    }

    /// Applies an informer event as upstream does: every GVR derived from `old`'s served
    /// versions is dropped (for all servers), then `new`'s entries are added. Add = `(None,
    /// Some)`, update = `(Some, Some)`, delete = `(Some, None)`.
    pub fn apply(&mut self, old: Option<&StorageVersion>, new: Option<&StorageVersion>) {
        if let Some(old) = old {
            for (gvr, _) in served(old) {
                self.servers.remove(&gvr);
            }
        }
        if let Some(new) = new {
            for (gvr, server) in served(new) {
                self.servers.entry(gvr).or_default().insert(server);
            }
        }
    }

    /// The servers of a request's GVR (core group `""` is looked up as `core`); `None` when
    /// no StorageVersion mentions it.
    pub fn servers(&self, gvr: &GroupVersionResource) -> Option<&BTreeSet<String>> {
        if gvr.group.is_empty() {
            let core = GroupVersionResource::new(CORE_GROUP_NAME, gvr.version.clone(), gvr.resource.clone());
            self.servers.get(&core)
        } else {
            self.servers.get(gvr)
        }
    }

    /// Number of GVR entries.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether the index has no entry.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// `(GVR, apiServerID)` pairs a StorageVersion object contributes; nothing for a name
/// without `.` (upstream logs "invalid storage version name" and skips it).
fn served(obj: &StorageVersion) -> Vec<(GroupVersionResource, String)> {
    let Some((group, resource)) = obj.metadata.name.rsplit_once('.') else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in &obj.status.storage_versions {
        for v in &entry.served_versions {
            let parts: Vec<&str> = v.split('/').collect();
            let version = if parts.len() == 2 { parts[1] } else { v.as_str() };
            out.push((
                GroupVersionResource::new(group, version, resource),
                entry.api_server_id.clone(),
            ));
        }
    }
    out
}

/// The StorageVersion-mode resolver: answers both [`LocalServedResources`] and
/// [`PeerResolver`] from one [`StorageVersionIndex`] snapshot.
#[derive(Debug)]
pub struct StorageVersionResolver {
    server_id: String,
    index: Snapshot<StorageVersionIndex>,
    synced: AtomicBool,
}

impl StorageVersionResolver {
    /// A resolver for the server `server_id`, unsynced and empty. Made by
    /// [`MvpBuilder::storage_version`](crate::MvpBuilder::storage_version), with its layer.
    pub(crate) fn new(server_id: impl Into<String>) -> Self {
        Self {
            server_id: server_id.into(),
            index: Snapshot::default(),
            synced: AtomicBool::new(false),
        }
    }

    /// This server's ID.
    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// Replaces the whole index (e.g. rebuilt from a list of StorageVersions).
    pub fn replace(&self, index: StorageVersionIndex) {
        self.index.store(index);
    }

    /// Applies one informer event (see [`StorageVersionIndex::apply`]).
    pub fn apply(&self, old: Option<&StorageVersion>, new: Option<&StorageVersion>) {
        self.index.update(|current| {
            let mut next = current.clone();
            next.apply(old, new);
            next
        });
    }

    /// The current index.
    pub fn index(&self) -> std::sync::Arc<StorageVersionIndex> {
        self.index.load()
    }

    /// Marks the informer synced and the local StorageVersions written (upstream waits for
    /// both before the readiness hook passes); until then every request is local.
    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }
}

/// StorageVersion mode as the layer reads it: both questions answered from one resolver.
pub(crate) struct StorageVersionMode(pub(crate) std::sync::Arc<StorageVersionResolver>);

impl LocalServedResources for StorageVersionMode {
    fn serves_locally(&self, gvr: &GroupVersionResource) -> bool {
        self.0.serves_locally(gvr)
    }
}

impl PeerResolver for StorageVersionMode {
    fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String> {
        self.0.peers_serving(gvr)
    }

    fn has_synced(&self) -> bool {
        self.0.has_synced()
    }
}

impl StorageVersionResolver {
    /// Local when no StorageVersion mentions the GVR, or this server is among its servers. Not
    /// the [`LocalServedResources`] trait, so that this resolver cannot be handed to
    /// [`MvpBuilder::resolver`](crate::MvpBuilder::resolver) under Discovery mode's semantics.
    pub(crate) fn serves_locally(&self, gvr: &GroupVersionResource) -> bool {
        match self.index.load().servers(gvr) {
            None => true,
            Some(ids) => ids.contains(&self.server_id),
        }
    }
}

impl PeerResolver for StorageVersionResolver {
    fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String> {
        let index = self.index.load();
        index
            .servers(gvr)
            .map(|ids| ids.iter().filter(|id| **id != self.server_id).cloned().collect())
            .unwrap_or_default()
    }

    fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn sv(name: &str, entries: &[(&str, &[&str])]) -> StorageVersion {
        let svs: Vec<Value> = entries
            .iter()
            .map(|(id, versions)| json!({"apiServerID": id, "encodingVersion": "v1", "servedVersions": versions}))
            .collect();
        serde_json::from_value(json!({"apiVersion": "internal.apiserver.k8s.io/v1alpha1",
            "kind": "StorageVersion", "metadata": {"name": name}, "status": {"storageVersions": svs}}))
        .unwrap()
    }

    #[test]
    fn index_splits_name_on_last_dot_and_strips_group_from_versions() {
        let objs = [
            sv("batch.jobs", &[("a", &["batch/v1"]), ("c", &["batch/v1"])]),
            sv("core.pods", &[("a", &["v1"]), ("b", &["v1"])]),
            sv(
                "flowcontrol.apiserver.k8s.io.flowschemas",
                &[("b", &["flowcontrol.apiserver.k8s.io/v1", "x/y/z"])],
            ),
            sv("nodot", &[("a", &["v1"])]),
        ];
        let index = StorageVersionIndex::from_objects(&objs);
        let ids = |g: &str, v: &str, r: &str| {
            index
                .servers(&GroupVersionResource::new(g, v, r))
                .map(|s| s.iter().cloned().collect::<Vec<_>>())
        };
        assert_eq!(ids("batch", "v1", "jobs"), Some(vec!["a".into(), "c".into()]));
        assert_eq!(ids("", "v1", "pods"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(
            ids("flowcontrol.apiserver.k8s.io", "v1", "flowschemas"),
            Some(vec!["b".into()])
        );
        assert_eq!(
            ids("flowcontrol.apiserver.k8s.io", "x/y/z", "flowschemas"),
            Some(vec!["b".into()])
        );
        assert_eq!(index.len(), 4);
    }

    #[test]
    fn update_drops_old_entries_for_all_servers_then_adds_new() {
        let old = sv(
            "batch.jobs",
            &[("a", &["batch/v1", "batch/v1beta1"]), ("b", &["batch/v1"])],
        );
        let new = sv("batch.jobs", &[("b", &["batch/v1"])]);
        let mut index = StorageVersionIndex::from_objects([&old]);
        index.apply(Some(&old), Some(&new));
        assert_eq!(index.len(), 1);
        assert_eq!(
            index
                .servers(&GroupVersionResource::new("batch", "v1", "jobs"))
                .unwrap()
                .iter()
                .collect::<Vec<_>>(),
            ["b"]
        );
        index.apply(Some(&new), None);
        assert!(index.is_empty());
    }

    #[test]
    fn resolver_follows_alpha_semantics() {
        let r = StorageVersionResolver::new("b");
        r.replace(StorageVersionIndex::from_objects(&[
            sv("batch.jobs", &[("a", &["batch/v1"]), ("c", &["batch/v1"])]),
            sv("core.pods", &[("a", &["v1"]), ("b", &["v1"])]),
        ]));
        let jobs = GroupVersionResource::new("batch", "v1", "jobs");
        let pods = GroupVersionResource::new("", "v1", "pods");
        let crd = GroupVersionResource::new("example.com", "v1", "foos");
        assert!(!r.serves_locally(&jobs));
        assert_eq!(r.peers_serving(&jobs), vec!["a".to_owned(), "c".to_owned()]);
        assert!(r.serves_locally(&pods), "self listed");
        assert!(r.serves_locally(&crd), "no StorageVersion data → local");
        assert!(r.peers_serving(&crd).is_empty());
        assert!(!r.has_synced());
        r.mark_synced();
        assert!(r.has_synced());
        r.apply(None, Some(&sv("apps.deployments", &[("a", &["apps/v1"])])));
        assert_eq!(
            r.peers_serving(&GroupVersionResource::new("apps", "v1", "deployments")),
            vec!["a".to_owned()]
        );
    }
}
