//! Group-version exclusion (docs/mvp-behaviour.md §2.3, checklist 37; upstream's `GVExclusionManager`, 1.36).
//!
//! The local discovery cache is refreshed only every 30 minutes and peers' discovery only on
//! identity-lease events, so both can be stale about CRDs and aggregated APIServices: a CRD
//! created since the last local refresh would be proxied to a peer that lists it, and a deleted
//! one would still be proxied (and advertised) from a peer's old document. Upstream avoids both by
//! removing from every peer's discovery data the group versions this server serves through CRDs
//! or aggregated APIServices, plus those of CRDs/APIServices deleted within a grace period
//! (5 minutes), so such requests are always handled locally.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use crate::objects::GroupVersion;

/// The exclusion set's state: group versions served now by CRDs/aggregated APIServices, and those that
/// stopped being served, with when. Pure, so the grace logic is testable without clocks.
#[derive(Debug, Clone)]
pub(crate) struct GvExclusionTracker {
    grace: Duration,
    active: HashSet<GroupVersion>,
    recently_deleted: HashMap<GroupVersion, Instant>,
}

impl GvExclusionTracker {
    /// An empty tracker keeping deleted group versions excluded for `grace`.
    pub(crate) fn new(grace: Duration) -> Self {
        Self {
            grace,
            active: HashSet::new(),
            recently_deleted: HashMap::new(),
        }
    }

    /// Takes the currently served group versions at `now`: those no longer served start their grace
    /// period, expired ones are reaped. Returns whether the exclusion set changed.
    pub(crate) fn observe(&mut self, fresh: HashSet<GroupVersion>, now: Instant) -> bool {
        let before = self.exclusion_set();
        for gone in self.active.difference(&fresh) {
            self.recently_deleted.insert(gone.clone(), now);
        }
        self.active = fresh;
        self.reap(now);
        self.exclusion_set() != before
    }

    /// Drops deleted group versions whose grace ended before or at `now`. Returns whether the exclusion
    /// set changed.
    pub(crate) fn reap(&mut self, now: Instant) -> bool {
        let before = self.exclusion_set();
        let grace = self.grace;
        self.recently_deleted
            .retain(|_, deleted_at| now.saturating_duration_since(*deleted_at) < grace);
        self.exclusion_set() != before
    }

    /// When the next grace period ends, if any.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.recently_deleted.values().map(|at| *at + self.grace).min()
    }

    /// Active ∪ recently deleted.
    pub(crate) fn exclusion_set(&self) -> HashSet<GroupVersion> {
        self.active
            .iter()
            .chain(self.recently_deleted.keys())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gv(g: &str, v: &str) -> GroupVersion {
        (g.to_owned(), v.to_owned())
    }

    #[test]
    fn deleted_group_versions_stay_excluded_for_the_grace_period() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(300);
        let mut tracker = GvExclusionTracker::new(grace);
        assert!(!tracker.observe(HashSet::new(), t0));
        assert!(tracker.observe(HashSet::from([gv("a.io", "v1"), gv("b.io", "v1")]), t0));
        assert_eq!(tracker.exclusion_set().len(), 2);
        assert_eq!(tracker.next_expiry(), None);

        // b.io deleted at t1: still excluded until t1 + grace.
        let t1 = t0 + Duration::from_secs(10);
        assert!(!tracker.observe(HashSet::from([gv("a.io", "v1")]), t1));
        assert!(tracker.exclusion_set().contains(&gv("b.io", "v1")));
        assert_eq!(tracker.next_expiry(), Some(t1 + grace));
        assert!(!tracker.reap(t1 + grace - Duration::from_millis(1)));
        assert!(tracker.reap(t1 + grace));
        assert_eq!(tracker.exclusion_set(), HashSet::from([gv("a.io", "v1")]));
        assert_eq!(tracker.next_expiry(), None);

        // Re-created during its grace: excluded as active, and stays so after the old grace ends.
        let t2 = t1 + grace + Duration::from_secs(1);
        tracker.observe(HashSet::new(), t2);
        tracker.observe(HashSet::from([gv("a.io", "v1")]), t2 + Duration::from_secs(1));
        tracker.reap(t2 + grace + Duration::from_secs(1));
        assert_eq!(tracker.exclusion_set(), HashSet::from([gv("a.io", "v1")]));
    }

    #[test]
    fn zero_grace_forgets_at_once() {
        let t0 = Instant::now();
        let mut tracker = GvExclusionTracker::new(Duration::ZERO);
        tracker.observe(HashSet::from([gv("a.io", "v1")]), t0);
        assert!(tracker.observe(HashSet::new(), t0));
        assert!(tracker.exclusion_set().is_empty());
    }
}
