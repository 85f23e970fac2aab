//! The in-memory store's watch history: the window of recent changes a watch may start from, as
//! kube-apiserver's watch cache keeps one (docs/decisions.md §16).
//!
//! The window is bounded twice: at most [`HistoryLimits::events`] changes and at most
//! [`HistoryLimits::bytes`] of objects (an estimate of their heap size), whichever bites first, the
//! oldest change dropped first. Its changes share their objects with the store (`Arc`), as the watch
//! cache's events point at the objects its store holds: a create or an update costs the history
//! nothing while its object is current, and a delete keeps only the object's last state (the deletion's
//! `resourceVersion` is written in when the event is delivered).
//!
//! Whether a watch can start is decided per resource, as upstream's watch caches are one per resource:
//! a watch of a resource from revision `r` is [`StoreError::Expired`](super::StoreError::Expired) only
//! when a change of that resource after `r` was dropped, so a burst of ConfigMap writes does not send
//! every Job watcher back to a relist.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use super::memory::set_resource_version;
use super::{Object, StorageResource, WatchEvent, WatchEventType};

/// Changes kept for watches that start in the past, at most.
pub const DEFAULT_HISTORY: usize = 10_000;

/// Bytes of objects (estimated heap size) kept for watches that start in the past, at most: bounds
/// the history's memory whatever the objects' size (10,000 changes of 1 kB ConfigMaps take ~35 MB
/// as JSON trees; 4 MiB holds the last ~1,300 of their deletes, or ~2,500 changes of a small Lease).
pub const DEFAULT_HISTORY_BYTES: usize = 4 << 20;

/// How much history a [`MemoryStore`](super::MemoryStore) keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryLimits {
    /// Changes kept, at most (at least one is always kept).
    pub events: usize,
    /// Estimated bytes of the changes' objects kept, at most (the newest change is kept whatever
    /// its size).
    pub bytes: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        Self {
            events: DEFAULT_HISTORY,
            bytes: DEFAULT_HISTORY_BYTES,
        }
    }
}

/// What a committed change holds: the objects it shares with the store.
#[derive(Debug)]
pub(super) enum Change {
    /// A create: the object as stored.
    Added(Arc<Object>),
    /// An update: the object as stored, and as it was before.
    Modified {
        /// After the update.
        object: Arc<Object>,
        /// Before it.
        previous: Arc<Object>,
    },
    /// A delete: the object's last state (its `resourceVersion` the one it had before the delete).
    Deleted(Arc<Object>),
}

/// One committed change, with what watchers filter on.
#[derive(Debug)]
pub(super) struct Committed {
    pub(super) resource: StorageResource,
    pub(super) namespace: Option<String>,
    pub(super) revision: u64,
    pub(super) change: Change,
    /// What the change counts against [`HistoryLimits::bytes`].
    bytes: usize,
}

impl Committed {
    pub(super) fn new(
        resource: &StorageResource,
        namespace: Option<&str>,
        revision: u64,
        change: Change,
    ) -> Self {
        let bytes = match &change {
            Change::Added(object) | Change::Deleted(object) => heap_size(object),
            Change::Modified { object, previous } => heap_size(object) + heap_size(previous),
        };
        Self {
            resource: resource.clone(),
            namespace: namespace.map(str::to_owned),
            revision,
            change,
            bytes,
        }
    }

    pub(super) fn matches(&self, resource: &StorageResource, namespace: Option<&str>) -> bool {
        &self.resource == resource && namespace.is_none_or(|ns| self.namespace.as_deref() == Some(ns))
    }

    /// The watch event of this change (objects copied out of the shared ones).
    pub(super) fn event(&self) -> WatchEvent {
        let (event_type, object, prev_object) = match &self.change {
            Change::Added(object) => (WatchEventType::Added, Object::clone(object), None),
            Change::Modified { object, previous } => (
                WatchEventType::Modified,
                Object::clone(object),
                Some(Object::clone(previous)),
            ),
            Change::Deleted(previous) => {
                let mut object = Object::clone(previous);
                set_resource_version(&mut object, self.revision);
                (WatchEventType::Deleted, object, Some(Object::clone(previous)))
            }
        };
        WatchEvent {
            event_type,
            object,
            revision: self.revision,
            prev_object,
        }
    }
}

/// The window of recent changes, in commit order.
#[derive(Debug, Default)]
pub(super) struct History {
    events: VecDeque<Arc<Committed>>,
    bytes: usize,
    limits: HistoryLimits,
    /// Per resource, the revision of its newest change dropped from the window: a watch of it must
    /// start at or after it.
    compacted: HashMap<StorageResource, u64>,
}

impl History {
    pub(super) fn new(limits: HistoryLimits) -> Self {
        Self {
            limits: HistoryLimits {
                events: limits.events.max(1),
                bytes: limits.bytes,
            },
            ..Self::default()
        }
    }

    /// Appends `committed`, then drops the oldest changes beyond the limits.
    pub(super) fn push(&mut self, committed: Arc<Committed>) {
        self.bytes += committed.bytes;
        self.events.push_back(committed);
        while self.events.len() > self.limits.events
            || (self.bytes > self.limits.bytes && self.events.len() > 1)
        {
            let Some(dropped) = self.events.pop_front() else {
                break;
            };
            self.bytes -= dropped.bytes;
            match self.compacted.get_mut(&dropped.resource) {
                Some(revision) => *revision = dropped.revision,
                None => {
                    self.compacted.insert(dropped.resource.clone(), dropped.revision);
                }
            }
        }
    }

    /// The oldest revision a watch of `resource` can start from: the revision of its newest dropped
    /// change (0 while none was dropped). Upstream's `too old resource version: N (M)` names it as `M`.
    pub(super) fn oldest(&self, resource: &StorageResource) -> u64 {
        self.compacted.get(resource).copied().unwrap_or(0)
    }

    /// The retained changes of `resource` (in `namespace`, when given) after revision `from`.
    pub(super) fn since(
        &self,
        resource: &StorageResource,
        namespace: Option<&str>,
        from: u64,
    ) -> impl Iterator<Item = &Arc<Committed>> {
        // Revisions rise along the window: skip the older part by binary search.
        let start = self.events.partition_point(|c| c.revision <= from);
        self.events
            .range(start..)
            .filter(move |c| c.matches(resource, namespace))
    }

    /// How many changes the window holds and their estimated bytes.
    #[cfg(test)]
    pub(super) fn size(&self) -> (usize, usize) {
        (self.events.len(), self.bytes)
    }
}

/// The estimated heap size of a JSON tree (serde_json with `preserve_order`): a node per value, plus
/// string and key bytes and a map entry's overhead. Iterative, as objects may nest deeply.
pub(super) fn heap_size(value: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    /// A map entry: its hash and the index table's slot.
    const ENTRY: usize = 16;
    let mut total = 0;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total += NODE;
        match value {
            Value::String(s) => total += s.capacity(),
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    total += key.capacity() + ENTRY;
                    pending.push(item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn added(resource: &StorageResource, revision: u64, object: Object) -> Arc<Committed> {
        Arc::new(Committed::new(
            resource,
            Some("ns"),
            revision,
            Change::Added(Arc::new(object)),
        ))
    }

    #[test]
    fn the_byte_budget_drops_the_oldest_changes_and_keeps_the_newest() {
        let configmaps = StorageResource::new("", "configmaps");
        let big = json!({"data": {"k": "x".repeat(1000)}});
        let one = heap_size(&big);
        assert!(one > 1000, "{one}");
        let mut history = History::new(HistoryLimits {
            events: 100,
            bytes: 3 * one,
        });
        for revision in 1..=5 {
            history.push(added(&configmaps, revision, big.clone()));
        }
        assert_eq!(history.size(), (3, 3 * one));
        assert_eq!(history.oldest(&configmaps), 2);
        let kept: Vec<u64> = history.since(&configmaps, None, 0).map(|c| c.revision).collect();
        assert_eq!(kept, [3, 4, 5]);
        // One change over the budget on its own is still kept.
        let mut tiny = History::new(HistoryLimits {
            events: 100,
            bytes: 1,
        });
        tiny.push(added(&configmaps, 1, big.clone()));
        tiny.push(added(&configmaps, 2, big));
        assert_eq!(tiny.size().0, 1);
        assert_eq!(tiny.oldest(&configmaps), 1);
    }

    #[test]
    fn a_resource_expires_only_when_its_own_changes_were_dropped() {
        let (jobs, configmaps) = (
            StorageResource::new("batch", "jobs"),
            StorageResource::new("", "configmaps"),
        );
        let mut history = History::new(HistoryLimits {
            events: 3,
            bytes: usize::MAX,
        });
        history.push(added(&jobs, 1, json!({})));
        history.push(added(&configmaps, 2, json!({})));
        for revision in 3..=6 {
            history.push(added(&configmaps, revision, json!({})));
        }
        assert_eq!(history.oldest(&jobs), 1, "the Job's change at 1 was dropped");
        assert_eq!(history.oldest(&configmaps), 3);
        assert_eq!(history.oldest(&StorageResource::new("", "pods")), 0);
        let since: Vec<u64> = history
            .since(&configmaps, Some("ns"), 4)
            .map(|c| c.revision)
            .collect();
        assert_eq!(since, [5, 6]);
    }

    #[test]
    fn a_deleted_event_carries_the_deletion_revision_and_the_previous_state() {
        let previous = json!({"metadata": {"name": "a", "resourceVersion": "3"}});
        let committed = Committed::new(
            &StorageResource::new("", "configmaps"),
            None,
            7,
            Change::Deleted(Arc::new(previous.clone())),
        );
        let event = committed.event();
        assert_eq!(event.event_type, WatchEventType::Deleted);
        assert_eq!(event.object["metadata"]["resourceVersion"], "7");
        assert_eq!(event.prev_object, Some(previous));
        assert_eq!(event.revision, 7);
    }

    #[test]
    fn heap_size_walks_deep_trees_without_recursion() {
        let mut deep = json!("leaf");
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert!(heap_size(&deep) > 100_000 * std::mem::size_of::<Value>());
        // Dropping the tree recurses (serde_json's own drop): unwind it by hand.
        while let Value::Array(mut items) = deep {
            deep = items.pop().unwrap_or(Value::Null);
        }
    }
}
