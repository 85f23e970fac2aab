//! The garbage collector's ownership graph (upstream's `GraphBuilder` and `node`, in
//! `pkg/controller/garbagecollector/graph.go` and `graph_builder.go`): one node per object the informers
//! have shown (observed) or that some object names as its owner without having been seen (virtual),
//! edges from owners to dependents, and the work each change makes: which nodes to check for deletion
//! (`attemptToDelete`) and which owners to orphan (`attemptToOrphan`).
//!
//! Pure: no I/O. The collector feeds it [`Change`]s in the order its informers deliver them and acts on
//! the [`Work`] it returns.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::Value;

/// `metav1.FinalizerOrphanDependents`.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// An object's coordinates (upstream's `objectReference`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// `apiVersion` as the object or the owner reference gives it.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty: cluster-scoped, or unknown for a virtual owner of a cluster-scoped dependent).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl fmt::Display for Identity {
    /// Upstream's `objectReference.String()`: `[v1/ConfigMap, namespace: ns, name: n, uid: u]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version, self.kind, self.namespace, self.name, self.uid
        )
    }
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
    /// `blockOwnerDeletion: true`.
    pub block_owner_deletion: bool,
}

impl OwnerRef {
    /// The owner references of an object (entries without a uid are skipped: the API server refuses them).
    pub fn of(object: &Value) -> Vec<Self> {
        object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| {
                        let text = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or_default().to_owned();
                        let uid = text("uid");
                        (!uid.is_empty()).then(|| Self {
                            api_version: text("apiVersion"),
                            kind: text("kind"),
                            name: text("name"),
                            uid,
                            block_owner_deletion: r.get("blockOwnerDeletion").and_then(Value::as_bool)
                                == Some(true),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The owner's identity as a dependent in `namespace` sees it.
    pub fn identity(&self, namespace: &str) -> Identity {
        Identity {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            uid: self.uid.clone(),
        }
    }
}

/// What the graph knows of one object.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its coordinates (for a virtual node: as the first dependent that named it gave them).
    pub identity: Identity,
    /// Whether an informer has shown it (false: virtual, known only from owner references).
    pub observed: bool,
    /// `deletionTimestamp` is set.
    pub being_deleted: bool,
    /// Being deleted with the `foregroundDeletion` finalizer: waits for its blocking dependents.
    pub deleting_dependents: bool,
    /// Its owner references.
    pub owners: Vec<OwnerRef>,
    /// UIDs of the nodes naming it as an owner.
    pub dependents: HashSet<String>,
}

/// A change the informers saw (or the collector inferred: a virtual delete).
#[derive(Debug, Clone)]
pub enum Change {
    /// An object was added or updated: its identity and the object.
    Upsert(Identity, Value),
    /// An informer saw the object go.
    Delete(Identity),
    /// A live GET answered 404 (or another UID) for this identity: it does not exist.
    VirtualDelete(Identity),
}

/// Work a change makes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Work {
    /// UIDs to check for deletion (`attemptToDelete`).
    pub attempt_to_delete: Vec<String>,
    /// UIDs of owners whose dependents lose their reference (`attemptToOrphan`).
    pub attempt_to_orphan: Vec<String>,
    /// Owners observed deleted: absent for good (`absentOwnerCache`).
    pub absent: Vec<Identity>,
    /// Dependents naming an owner observed in another namespace: the `OwnerRefInvalidNamespace`
    /// warning to emit (dependent, the owner reference as the dependent's namespace sees it).
    pub invalid_namespace: Vec<(Identity, Identity)>,
}

/// The ownership graph.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
}

fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|v| v.as_str() == Some(finalizer)))
}

impl Graph {
    /// The node of `uid`.
    pub fn node(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// How many nodes there are (virtual ones included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The dependents of `uid` whose reference to it has `blockOwnerDeletion` (upstream's
    /// `blockingDependents`).
    pub fn blocking_dependents(&self, uid: &str) -> Vec<&Node> {
        let Some(node) = self.nodes.get(uid) else {
            return Vec::new();
        };
        node.dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .filter(|d| d.owners.iter().any(|o| o.uid == uid && o.block_owner_deletion))
            .collect()
    }

    /// The dependents of `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<&Node> {
        self.nodes
            .get(uid)
            .map(|n| n.dependents.iter().filter_map(|d| self.nodes.get(d)).collect())
            .unwrap_or_default()
    }

    /// Applies one change (upstream's `processGraphChanges`).
    pub fn apply(&mut self, change: Change) -> Work {
        let mut work = Work::default();
        match change {
            Change::Upsert(identity, object) => self.upsert(identity, &object, &mut work),
            Change::Delete(identity) => self.delete(&identity, false, &mut work),
            Change::VirtualDelete(identity) => self.delete(&identity, true, &mut work),
        }
        work
    }

    fn upsert(&mut self, identity: Identity, object: &Value, work: &mut Work) {
        let owners = OwnerRef::of(object);
        let being_deleted = object.pointer("/metadata/deletionTimestamp").is_some();
        let uid = identity.uid.clone();
        let previous = self.nodes.get(&uid).cloned();
        match previous {
            None => {
                let node = Node {
                    identity: identity.clone(),
                    observed: true,
                    being_deleted,
                    deleting_dependents: false,
                    owners: owners.clone(),
                    dependents: HashSet::new(),
                };
                self.nodes.insert(uid.clone(), node);
                self.add_dependent_to_owners(&identity, &owners, work);
            }
            Some(existing) => {
                if !existing.observed || existing.identity != identity {
                    // A virtual node is now seen: its dependents may have named it by other coordinates.
                    work.attempt_to_delete.extend(existing.dependents.iter().cloned());
                }
                let added: Vec<OwnerRef> = owners
                    .iter()
                    .filter(|o| !existing.owners.iter().any(|e| e.uid == o.uid))
                    .cloned()
                    .collect();
                let removed: Vec<&OwnerRef> = existing
                    .owners
                    .iter()
                    .filter(|e| !owners.iter().any(|o| o.uid == e.uid))
                    .collect();
                // A reference that stopped blocking (removed, or blockOwnerDeletion turned off) may let a
                // foreground owner finish.
                let unblocked = existing.owners.iter().filter(|e| {
                    e.block_owner_deletion && !owners.iter().any(|o| o.uid == e.uid && o.block_owner_deletion)
                });
                for owner in unblocked {
                    if self.nodes.get(&owner.uid).is_some_and(|o| o.deleting_dependents) {
                        work.attempt_to_delete.push(owner.uid.clone());
                    }
                }
                for owner in &removed {
                    if let Some(owner_node) = self.nodes.get_mut(&owner.uid) {
                        owner_node.dependents.remove(&uid);
                    }
                }
                if let Some(node) = self.nodes.get_mut(&uid) {
                    node.identity = identity.clone();
                    node.observed = true;
                    node.being_deleted = being_deleted;
                    node.owners = owners.clone();
                }
                self.add_dependent_to_owners(&identity, &added, work);
            }
        }
        self.process_transitions(&uid, object, work);
    }

    /// Upstream's `processTransitions`: an object being deleted with `orphan` is orphaned; one with
    /// `foregroundDeletion` waits for its dependents, which are all checked.
    fn process_transitions(&mut self, uid: &str, object: &Value, work: &mut Work) {
        let Some(node) = self.nodes.get_mut(uid) else {
            return;
        };
        if !node.being_deleted {
            return;
        }
        if has_finalizer(object, ORPHAN_FINALIZER) {
            work.attempt_to_orphan.push(uid.to_owned());
            return;
        }
        if has_finalizer(object, FOREGROUND_FINALIZER) {
            node.deleting_dependents = true;
            work.attempt_to_delete.extend(node.dependents.iter().cloned());
            work.attempt_to_delete.push(uid.to_owned());
        }
    }

    /// Upstream's `addDependentToOwners`: owners not in the graph become virtual nodes, checked at once;
    /// a reference whose observed owner lives in another namespace is reported and its dependent checked.
    fn add_dependent_to_owners(&mut self, dependent: &Identity, owners: &[OwnerRef], work: &mut Work) {
        let mut potentially_invalid = false;
        for owner in owners {
            match self.nodes.get_mut(&owner.uid) {
                None => {
                    let mut node = Node {
                        identity: owner.identity(&dependent.namespace),
                        observed: false,
                        being_deleted: false,
                        deleting_dependents: false,
                        owners: Vec::new(),
                        dependents: HashSet::new(),
                    };
                    node.dependents.insert(dependent.uid.clone());
                    self.nodes.insert(owner.uid.clone(), node);
                    work.attempt_to_delete.push(owner.uid.clone());
                }
                Some(owner_node) => {
                    owner_node.dependents.insert(dependent.uid.clone());
                    if potentially_invalid {
                        continue;
                    }
                    let owner_namespaced = !owner_node.identity.namespace.is_empty();
                    if owner_namespaced && owner_node.identity.namespace != dependent.namespace {
                        if owner_node.observed {
                            work.invalid_namespace
                                .push((dependent.clone(), owner.identity(&dependent.namespace)));
                        }
                        potentially_invalid = true;
                    } else {
                        // Coordinates that do not match the observed owner, or a virtual cluster-scoped
                        // owner named from another namespace (maybe a namespaced kind, issue #98040).
                        let mismatch = owner_node.identity.kind != owner.kind
                            || owner_node.identity.name != owner.name
                            || group(&owner_node.identity.api_version) != group(&owner.api_version);
                        let virtual_elsewhere = !owner_namespaced
                            && owner_node.identity.namespace != dependent.namespace
                            && !owner_node.observed;
                        potentially_invalid = mismatch || virtual_elsewhere;
                    }
                }
            }
        }
        if potentially_invalid {
            work.attempt_to_delete.push(dependent.uid.clone());
        }
    }

    fn delete(&mut self, identity: &Identity, virtual_event: bool, work: &mut Work) {
        let Some(existing) = self.nodes.get(&identity.uid).cloned() else {
            return;
        };
        if virtual_event {
            let matches = |d: &Node| {
                d.owners.iter().any(|o| {
                    o.uid == identity.uid
                        && o.kind == identity.kind
                        && o.name == identity.name
                        && group(&o.api_version) == group(&identity.api_version)
                })
            };
            let (matching, other): (Vec<&Node>, Vec<&Node>) = existing
                .dependents
                .iter()
                .filter_map(|d| self.nodes.get(d))
                .partition(|d| matches(d));
            let disagree = if existing.observed {
                existing.identity != *identity
            } else {
                !other.is_empty()
            };
            if disagree {
                // Some dependents name this UID otherwise: keep the node, check those that agree.
                if !matching.is_empty() {
                    work.absent.push(identity.clone());
                    work.attempt_to_delete
                        .extend(matching.iter().map(|d| d.identity.uid.clone()));
                }
                if !existing.observed
                    && existing.identity == *identity
                    && let Some(replacement) = other.first().and_then(|d| {
                        d.owners
                            .iter()
                            .find(|o| o.uid == identity.uid)
                            .map(|o| o.identity(&d.identity.namespace))
                    })
                    && let Some(node) = self.nodes.get_mut(&identity.uid)
                {
                    node.identity = replacement;
                    work.attempt_to_delete.push(identity.uid.clone());
                }
                return;
            }
        }
        self.nodes.remove(&identity.uid);
        crate::sparse_maps::release_unused_capacity(&mut self.nodes);
        for owner in &existing.owners {
            if let Some(owner_node) = self.nodes.get_mut(&owner.uid) {
                owner_node.dependents.remove(&identity.uid);
                if owner_node.deleting_dependents {
                    // Its last blocking dependent may be this one.
                    work.attempt_to_delete.push(owner.uid.clone());
                }
            }
        }
        if !existing.dependents.is_empty() {
            work.absent.push(identity.clone());
        }
        work.attempt_to_delete.extend(existing.dependents.iter().cloned());
    }
}

/// The group of an `apiVersion` (owners are matched by group and kind, not version).
pub fn group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn id(kind: &str, ns: &str, name: &str, uid: &str) -> Identity {
        Identity {
            api_version: "v1".to_owned(),
            kind: kind.to_owned(),
            namespace: ns.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
        }
    }

    fn object(owners: Value, extra: Value) -> Value {
        let mut o = json!({"metadata": {"ownerReferences": owners}});
        if let (Some(meta), Some(extra)) = (o["metadata"].as_object_mut(), extra.as_object()) {
            meta.extend(extra.clone());
        }
        o
    }

    fn owner_ref(uid: &str, block: bool) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "blockOwnerDeletion": block})
    }

    #[test]
    fn an_unseen_owner_is_virtual_and_checked() {
        let mut graph = Graph::default();
        let work = graph.apply(Change::Upsert(
            id("Secret", "ns", "dep", "d1"),
            object(json!([owner_ref("o1", false)]), json!({})),
        ));
        assert_eq!(work.attempt_to_delete, vec!["o1".to_owned()]);
        let owner = graph.node("o1").unwrap();
        assert!(!owner.observed);
        assert_eq!(owner.identity.namespace, "ns");
        // The owner turns out absent: its dependent is checked, and the absence remembered.
        let work = graph.apply(Change::VirtualDelete(id("ConfigMap", "ns", "owner", "o1")));
        assert_eq!(work.attempt_to_delete, vec!["d1".to_owned()]);
        assert_eq!(work.absent.len(), 1);
        assert!(graph.node("o1").is_none());
    }

    #[test]
    fn a_deleted_owner_sends_its_dependents_to_be_checked() {
        let mut graph = Graph::default();
        graph.apply(Change::Upsert(
            id("ConfigMap", "ns", "owner", "o1"),
            json!({"metadata": {}}),
        ));
        let work = graph.apply(Change::Upsert(
            id("Secret", "ns", "dep", "d1"),
            object(json!([owner_ref("o1", false)]), json!({})),
        ));
        assert!(
            work.attempt_to_delete.is_empty(),
            "an observed owner in the same namespace is fine"
        );
        let work = graph.apply(Change::Delete(id("ConfigMap", "ns", "owner", "o1")));
        assert_eq!(work.attempt_to_delete, vec!["d1".to_owned()]);
    }

    #[test]
    fn foreground_deletion_waits_for_blocking_dependents() {
        let mut graph = Graph::default();
        graph.apply(Change::Upsert(
            id("ConfigMap", "ns", "owner", "o1"),
            json!({"metadata": {}}),
        ));
        graph.apply(Change::Upsert(
            id("Secret", "ns", "dep", "d1"),
            object(json!([owner_ref("o1", true)]), json!({})),
        ));
        let work = graph.apply(Change::Upsert(
            id("ConfigMap", "ns", "owner", "o1"),
            json!({"metadata": {"deletionTimestamp": "t", "finalizers": [FOREGROUND_FINALIZER]}}),
        ));
        assert_eq!(work.attempt_to_delete, vec!["d1".to_owned(), "o1".to_owned()]);
        assert!(graph.node("o1").unwrap().deleting_dependents);
        assert_eq!(graph.blocking_dependents("o1").len(), 1);
        let work = graph.apply(Change::Delete(id("Secret", "ns", "dep", "d1")));
        assert_eq!(work.attempt_to_delete, vec!["o1".to_owned()]);
        assert!(graph.blocking_dependents("o1").is_empty());
    }

    #[test]
    fn the_orphan_finalizer_queues_the_owner_for_orphaning() {
        let mut graph = Graph::default();
        let work = graph.apply(Change::Upsert(
            id("ConfigMap", "ns", "owner", "o1"),
            json!({"metadata": {"deletionTimestamp": "t", "finalizers": [ORPHAN_FINALIZER]}}),
        ));
        assert_eq!(work.attempt_to_orphan, vec!["o1".to_owned()]);
    }

    #[test]
    fn an_owner_in_another_namespace_is_reported() {
        let mut graph = Graph::default();
        graph.apply(Change::Upsert(
            id("ConfigMap", "other", "owner", "o1"),
            json!({"metadata": {}}),
        ));
        let work = graph.apply(Change::Upsert(
            id("Secret", "ns", "dep", "d1"),
            object(json!([owner_ref("o1", false)]), json!({})),
        ));
        assert_eq!(work.attempt_to_delete, vec!["d1".to_owned()]);
        assert_eq!(work.invalid_namespace.len(), 1);
        assert_eq!(
            work.invalid_namespace[0].1.to_string(),
            "[v1/ConfigMap, namespace: ns, name: owner, uid: o1]"
        );
    }
}
