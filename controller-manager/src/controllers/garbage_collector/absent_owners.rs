//! Upstream's `absentOwnerCache` (`ReferenceCache` in `pkg/controller/garbagecollector/uid_cache.go`):
//! the owners the collector has confirmed absent, so that the many dependents of one deleted owner
//! cost one live GET of it. An LRU (groupcache's `lru.Cache`, as upstream): a lookup that finds an
//! entry makes it the most recently used, and a full cache evicts the least recently used.

use std::collections::{BTreeMap, HashMap};

use super::graph::Identity;

/// A bounded LRU set of owner identities known absent.
#[derive(Debug)]
pub(super) struct AbsentOwnerCache {
    capacity: usize,
    /// Each entry's last use.
    used: HashMap<Identity, u64>,
    /// Entries by last use, oldest first.
    by_use: BTreeMap<u64, Identity>,
    clock: u64,
}

impl AbsentOwnerCache {
    /// An empty cache of at most `capacity` entries (at least one).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            used: HashMap::new(),
            by_use: BTreeMap::new(),
            clock: 0,
        }
    }

    fn touch(&mut self, identity: &Identity) -> bool {
        let Some(last) = self.used.get_mut(identity) else {
            return false;
        };
        self.clock += 1;
        self.by_use.remove(last);
        *last = self.clock;
        self.by_use.insert(self.clock, identity.clone());
        true
    }

    /// Remembers `identity` as absent (most recently used), evicting the least recently used entry
    /// when full.
    pub(super) fn add(&mut self, identity: Identity) {
        if self.touch(&identity) {
            return;
        }
        if self.used.len() >= self.capacity
            && let Some((_, oldest)) = self.by_use.pop_first()
        {
            self.used.remove(&oldest);
        }
        self.clock += 1;
        self.used.insert(identity.clone(), self.clock);
        self.by_use.insert(self.clock, identity);
    }

    /// Whether `identity` is known absent (a hit makes it the most recently used).
    pub(super) fn has(&mut self, identity: &Identity) -> bool {
        self.touch(identity)
    }

    /// How many entries it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.used.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(uid: &str) -> Identity {
        Identity {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespace: "ns".to_owned(),
            name: format!("owner-{uid}"),
            uid: uid.to_owned(),
        }
    }

    #[test]
    fn a_full_cache_evicts_the_least_recently_used() {
        let mut cache = AbsentOwnerCache::new(2);
        cache.add(owner("a"));
        cache.add(owner("b"));
        // Looking `a` up makes `b` the least recently used: `c` evicts `b`, not `a`.
        assert!(cache.has(&owner("a")));
        cache.add(owner("c"));
        assert_eq!(cache.len(), 2);
        assert!(cache.has(&owner("a")));
        assert!(!cache.has(&owner("b")));
        assert!(cache.has(&owner("c")));
    }

    #[test]
    fn adding_twice_keeps_one_entry_and_refreshes_it() {
        let mut cache = AbsentOwnerCache::new(2);
        cache.add(owner("a"));
        cache.add(owner("b"));
        cache.add(owner("a"));
        cache.add(owner("c"));
        assert!(cache.has(&owner("a")), "re-adding made it recent");
        assert!(!cache.has(&owner("b")));
        assert!(!cache.has(&owner("other")));
    }
}
