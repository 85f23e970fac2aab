//! Group-version exclusion (docs/mvp-behaviour.md §2.3, checklist 37; upstream's `GVExclusionManager`, 1.36).
//!
//! The proxy's local discovery cache is refreshed only every 30 minutes and peers' discovery only on
//! identity lease events, so both can be stale about CRDs and aggregated APIServices: a CRD created since
//! the last local refresh would be proxied to a peer that lists it, and a deleted one would still be
//! proxied (and advertised) from a peer's old document. Upstream avoids both by removing from every peer's
//! discovery data the group versions that this server serves through CRDs or aggregated APIServices, plus
//! those of CRDs/APIServices deleted within a grace period (5 minutes), so such requests are always handled
//! locally.
//!
//! Only *aggregated* APIServices count (those with `spec.service`): kube-apiserver registers a local
//! APIService (no service) for every built-in group version, and excluding those would stop all proxying.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use mvp_core::PeerDiscoveryCache;
use mvp_core::peer_discovery::GroupVersion;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::controllers::informer::run_informer;
use crate::store::{StorageResource, Store};

/// The storage resource of APIServices.
pub fn apiservice_resource() -> StorageResource {
    StorageResource::new("apiregistration.k8s.io", "apiservices")
}

/// The group versions a CRD defines: `spec.group` with each `spec.versions[].name`. All listed versions
/// count, served or not: a CRD's group versions belong to the cluster's CRD, never to one peer.
pub fn crd_group_versions(crd: &Value) -> Vec<GroupVersion> {
    let Some(group) = crd.pointer("/spec/group").and_then(Value::as_str) else {
        return Vec::new();
    };
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .map(|version| (group.to_owned(), version.to_owned()))
        .collect()
}

/// The group version of an aggregated APIService (`spec.service` set); nothing for a local one.
pub fn apiservice_group_versions(apiservice: &Value) -> Vec<GroupVersion> {
    let aggregated = apiservice.pointer("/spec/service").is_some_and(|s| !s.is_null());
    let group = apiservice.pointer("/spec/group").and_then(Value::as_str);
    let version = apiservice.pointer("/spec/version").and_then(Value::as_str);
    match (aggregated, group, version) {
        (true, Some(group), Some(version)) if !version.is_empty() => {
            vec![(group.to_owned(), version.to_owned())]
        }
        _ => Vec::new(),
    }
}

/// The exclusion set's state: group versions served now by CRDs/aggregated APIServices, and those that
/// stopped being served, with when. Pure, so the grace logic is testable without clocks.
#[derive(Debug, Clone)]
pub struct GvExclusionTracker {
    grace: Duration,
    active: HashSet<GroupVersion>,
    recently_deleted: HashMap<GroupVersion, Instant>,
}

impl GvExclusionTracker {
    /// An empty tracker keeping deleted group versions excluded for `grace`.
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            active: HashSet::new(),
            recently_deleted: HashMap::new(),
        }
    }

    /// Takes the currently served group versions at `now`: those no longer served start their grace
    /// period, expired ones are reaped. Returns whether the exclusion set changed.
    pub fn observe(&mut self, fresh: HashSet<GroupVersion>, now: Instant) -> bool {
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
    pub fn reap(&mut self, now: Instant) -> bool {
        let before = self.exclusion_set();
        let grace = self.grace;
        self.recently_deleted
            .retain(|_, deleted_at| now.saturating_duration_since(*deleted_at) < grace);
        self.exclusion_set() != before
    }

    /// When the next grace period ends, if any.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.recently_deleted.values().map(|at| *at + self.grace).min()
    }

    /// Active ∪ recently deleted.
    pub fn exclusion_set(&self) -> HashSet<GroupVersion> {
        self.active
            .iter()
            .chain(self.recently_deleted.keys())
            .cloned()
            .collect()
    }
}

/// Keeps `peers`' excluded group versions equal to the tracker's set, fed by informers on CRDs and
/// APIServices in `store`, until `cancel`.
pub async fn run_gv_exclusion(
    store: Arc<dyn Store>,
    peers: Arc<PeerDiscoveryCache>,
    grace: Duration,
    cancel: CancellationToken,
) {
    let (crd_tx, mut crd_rx) = watch::channel(HashSet::<GroupVersion>::new());
    let (svc_tx, mut svc_rx) = watch::channel(HashSet::<GroupVersion>::new());
    let mut informers = tokio::task::JoinSet::new();
    informers.spawn(run_informer(
        store.clone(),
        crate::controllers::crd::crd_resource(),
        None,
        cancel.clone(),
        move |crds| {
            let gvs = crds.iter().flat_map(crd_group_versions).collect();
            crd_tx.send_if_modified(|current| replace_if_changed(current, gvs));
        },
    ));
    informers.spawn(run_informer(
        store,
        apiservice_resource(),
        None,
        cancel.clone(),
        move |services| {
            let gvs = services.iter().flat_map(apiservice_group_versions).collect();
            svc_tx.send_if_modified(|current| replace_if_changed(current, gvs));
        },
    ));
    let mut tracker = GvExclusionTracker::new(grace);
    loop {
        let fresh: HashSet<GroupVersion> = crd_rx
            .borrow_and_update()
            .union(&svc_rx.borrow_and_update())
            .cloned()
            .collect();
        if tracker.observe(fresh, Instant::now()) {
            peers.set_excluded_group_versions(tracker.exclusion_set());
        }
        let reap_at = tracker.next_expiry();
        tokio::select! {
            () = cancel.cancelled() => break,
            changed = crd_rx.changed() => if changed.is_err() { break },
            changed = svc_rx.changed() => if changed.is_err() { break },
            () = sleep_until_some(reap_at) => {}
        }
    }
    informers.abort_all();
}

fn replace_if_changed(current: &mut HashSet<GroupVersion>, next: HashSet<GroupVersion>) -> bool {
    if *current == next {
        false
    } else {
        *current = next;
        true
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gv(g: &str, v: &str) -> GroupVersion {
        (g.to_owned(), v.to_owned())
    }

    #[test]
    fn extracts_crd_versions_and_only_aggregated_apiservices() {
        let crd = json!({"spec": {"group": "example.com", "versions": [
            {"name": "v1", "served": true}, {"name": "v2alpha1", "served": false}]}});
        assert_eq!(
            crd_group_versions(&crd),
            vec![gv("example.com", "v1"), gv("example.com", "v2alpha1")]
        );
        assert!(crd_group_versions(&json!({"spec": {}})).is_empty());
        let aggregated = json!({"spec": {"group": "metrics.k8s.io", "version": "v1beta1",
            "service": {"namespace": "kube-system", "name": "metrics-server"}}});
        assert_eq!(
            apiservice_group_versions(&aggregated),
            vec![gv("metrics.k8s.io", "v1beta1")]
        );
        let local = json!({"spec": {"group": "batch", "version": "v1", "service": null}});
        assert!(apiservice_group_versions(&local).is_empty());
        let local_core = json!({"spec": {"version": "v1"}});
        assert!(apiservice_group_versions(&local_core).is_empty());
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
