//! What clients saw during a run, recorded as it happens and judged afterwards: every request's
//! outcome, every acknowledged write, every watch event delivered, and when each server was up at
//! which version.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::plan::TargetResource;
use crate::api::catalog::KubeVersion;

/// What a request was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// Aggregated discovery (`/api`, `/apis`): not a resource request.
    Discovery,
    /// A list, create, update, get or delete of a resource.
    Resource,
    /// The first response of a watch (its latency is not a request's).
    Watch,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// An HTTP status code.
    Status(u16),
    /// No HTTP answer: refused, reset or timed out.
    Transport,
}

/// [`RequestRecord::server`] of a request that got no answer: no connection, so no server, known.
pub(crate) const UNKNOWN_SERVER: usize = usize::MAX;

/// One request as the client saw it.
#[derive(Debug, Clone)]
pub(crate) struct RequestRecord {
    /// Seconds since the run started, when it was sent and when it was answered.
    pub start: f64,
    /// See `start`.
    pub end: f64,
    /// Index of the server the load balancer sent it to ([`UNKNOWN_SERVER`] when it got no answer).
    pub server: usize,
    /// What it was for.
    pub kind: RequestKind,
    /// The group/version/resource of a resource request (or watch).
    pub gvr: Option<(String, String, String)>,
    /// The answer.
    pub answer: Answer,
    /// A 404 that is the router's (`404 page not found`, or a `Status` naming no object): the resource
    /// itself was not found, as opposed to one object of it.
    pub route_404: bool,
}

/// One acknowledged write (a 2xx to a create, update or delete).
#[derive(Debug, Clone)]
pub(crate) struct WriteRecord {
    /// The resource.
    pub target: TargetResource,
    /// Object name.
    pub name: String,
    /// The `resourceVersion` the answer carried (for a delete: the deletion's).
    pub resource_version: String,
    /// Whether the object is gone after this write.
    pub deleted: bool,
    /// The `upgrade-sim/generation` label value the write set (creates and updates).
    pub generation: u64,
    /// Answered 2xx; otherwise it may or may not have been applied.
    pub acknowledged: bool,
}

/// A time interval during which a server was up (in the load balancer) at a version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpInterval {
    /// Server index.
    pub server: usize,
    /// Its version then.
    pub version: KubeVersion,
    /// Seconds since the run started.
    pub from: f64,
    /// `None` while still up.
    pub until: Option<f64>,
}

/// The shared record of a run.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    requests: Mutex<Vec<RequestRecord>>,
    writes: Mutex<Vec<WriteRecord>>,
    /// (resource label, object name, resourceVersion) of every watch event delivered.
    events: Mutex<DeliveredEvents>,
    up: Mutex<Vec<UpInterval>>,
    /// Per resource label, the resourceVersion ranges `(after, upto]` no watch was open for: before
    /// the watcher's first list, and between a 410 Gone and the relist after it. Writes in them were
    /// seen through a list, if at all, not as events.
    unwatched: Mutex<HashMap<String, Vec<(u64, u64)>>>,
    /// Requests so far (progress display).
    pub count: AtomicU64,
    /// 404s so far (progress display; judged later).
    pub not_found: AtomicU64,
    /// 503s so far (progress display).
    pub unavailable: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Ledger {
    /// Records a request.
    pub(crate) fn request(&self, record: RequestRecord) {
        self.count.fetch_add(1, Ordering::Relaxed);
        match record.answer {
            Answer::Status(404) => {
                self.not_found.fetch_add(1, Ordering::Relaxed);
            }
            Answer::Status(503) => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        lock(&self.requests).push(record);
    }

    /// Records an acknowledged write.
    pub(crate) fn write(&self, write: WriteRecord) {
        lock(&self.writes).push(write);
    }

    /// Records a delivered watch event.
    pub(crate) fn event(&self, target: &TargetResource, name: &str, resource_version: &str) {
        lock(&self.events).insert((target.label(), name.to_owned(), resource_version.to_owned()));
    }

    /// Records that `target`'s watcher has no watch open after resourceVersion `after` (it starts,
    /// or got 410 Gone) until [`Self::watch_gap_closed`].
    pub(crate) fn watch_gap_opened(&self, target: &TargetResource, after: u64) {
        lock(&self.unwatched)
            .entry(target.label())
            .or_default()
            .push((after, u64::MAX));
    }

    /// Records that `target`'s watcher listed at `listed` and watches from there.
    pub(crate) fn watch_gap_closed(&self, target: &TargetResource, listed: u64) {
        if let Some(gap) = lock(&self.unwatched)
            .get_mut(&target.label())
            .and_then(|gaps| gaps.last_mut())
        {
            gap.1 = listed;
        }
    }

    /// Applies `judge` to the writes, delivered events and unwatched ranges recorded so far.
    pub(crate) fn judge_watches<T>(
        &self,
        judge: impl FnOnce(&[WriteRecord], &DeliveredEvents, &HashMap<String, Vec<(u64, u64)>>) -> T,
    ) -> T {
        let writes = lock(&self.writes);
        let events = lock(&self.events);
        let unwatched = lock(&self.unwatched);
        judge(&writes, &events, &unwatched)
    }

    /// Marks server `server` up at `version` from `at`.
    pub(crate) fn up(&self, server: usize, version: KubeVersion, at: f64) {
        lock(&self.up).push(UpInterval {
            server,
            version,
            from: at,
            until: None,
        });
    }

    /// Marks server `server` down from `at`.
    pub(crate) fn down(&self, server: usize, at: f64) {
        for interval in lock(&self.up).iter_mut() {
            if interval.server == server && interval.until.is_none() {
                interval.until = Some(at);
            }
        }
    }

    /// Everything recorded so far, leaving the ledger empty (later records are not judged).
    pub(crate) fn take(&self) -> Recorded {
        Recorded {
            requests: std::mem::take(&mut *lock(&self.requests)),
            writes: std::mem::take(&mut *lock(&self.writes)),
            events: std::mem::take(&mut *lock(&self.events)),
            up: lock(&self.up).clone(),
            unwatched: std::mem::take(&mut *lock(&self.unwatched)),
        }
    }
}

/// (resource label, object name, resourceVersion) of each delivered watch event.
pub(crate) type DeliveredEvents = HashSet<(String, String, String)>;

/// What a [`Ledger`] recorded.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// Every request.
    pub requests: Vec<RequestRecord>,
    /// Every acknowledged write.
    pub writes: Vec<WriteRecord>,
    /// Every delivered watch event.
    pub events: DeliveredEvents,
    /// When each server was up.
    pub up: Vec<UpInterval>,
    /// Per resource label, the resourceVersion ranges no watch was open for.
    pub unwatched: HashMap<String, Vec<(u64, u64)>>,
}

/// Which servers serve which group/version/resources, per version (the simulator's knowledge).
#[derive(Debug, Default)]
pub(crate) struct ServedByVersion {
    served: HashMap<KubeVersion, HashSet<(String, String, String)>>,
}

impl ServedByVersion {
    /// Adds what `version` serves.
    pub(crate) fn insert(&mut self, version: KubeVersion, apis: &crate::api::catalog::ServedApis) {
        let gvrs = apis
            .gvrs()
            .map(|(g, v, r)| (g.to_owned(), v.to_owned(), r.name.clone()))
            .collect();
        self.served.insert(version, gvrs);
    }

    /// Adds one group/version/resource `version` serves (for tests).
    #[cfg(test)]
    pub(crate) fn add(&mut self, version: KubeVersion, (group, version_name, resource): (&str, &str, &str)) {
        self.served.entry(version).or_default().insert((
            group.to_owned(),
            version_name.to_owned(),
            resource.to_owned(),
        ));
    }

    /// Whether `version` serves `gvr`.
    pub(crate) fn serves(&self, version: KubeVersion, gvr: &(String, String, String)) -> bool {
        self.served.get(&version).is_some_and(|s| s.contains(gvr))
    }
}
