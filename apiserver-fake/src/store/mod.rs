//! The cluster's "etcd": one store of API objects shared by every fake server of a process, as real
//! kube-apiservers share etcd (docs/decisions.md §4).
//!
//! The [`Store`] trait is object-safe and async (every method returns a boxed future), so a real etcd
//! backend can replace [`MemoryStore`] without touching the REST handlers. Its semantics are etcd3's as
//! kube-apiserver's storage layer exposes them:
//!
//! * one cluster-wide, monotonic revision (`u64`), written into `metadata.resourceVersion` as a string;
//! * objects are keyed by [`StorageResource`] (group + resource, version-agnostic, like
//!   `/registry/<group>/<resource>/<namespace>/<name>`) and [`ObjectKey`];
//! * on create the store sets `resourceVersion`, `uid` (UUID v4) and `creationTimestamp` (RFC 3339,
//!   second precision); on update it keeps `uid` and `creationTimestamp` from the stored object;
//! * `metadata.generation` is plain data to the store, written as the caller gives it and never invented
//!   or bumped: as in kube-apiserver, only some resources' registry strategies maintain it, which the
//!   REST layer decides (`rest::generation`);
//! * watches deliver every change after a revision exactly once and in commit order; a revision older
//!   than the retained history fails with [`StoreError::Expired`] (HTTP 410): for etcd, older than its
//!   compaction; for the in-memory store, when a change of the watched resource after it has left the
//!   bounded history (`watch_history`, docs/decisions.md §16).
//!
//! Beside the API objects there is an *internal keyspace* with TTLs, used for peer endpoint records
//! (docs/mvp-behaviour.md §2.4). It is not reachable through the HTTP API.

mod cacher;
mod memory;
mod watch_history;

use std::fmt;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "etcd")]
mod etcd;
#[cfg(feature = "etcd")]
mod etcd_progress;

pub use cacher::{CachedStore, WatchCacheSizes};
#[cfg(feature = "etcd")]
pub use etcd::{EtcdConfig, EtcdStore};
pub use memory::MemoryStore;
pub(crate) use memory::{fill_create_metadata, now_timestamp};
use memory::{metadata_mut, set_resource_version};
pub use watch_history::{DEFAULT_HISTORY, DEFAULT_HISTORY_BYTES, HistoryLimits};

/// A Kubernetes group and resource (`schema.GroupResource`), e.g. `jobs.batch`; printed as upstream's
/// `GroupResource.String()` (`resource.group`, or `resource` for the core group).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct GroupResource {
    /// API group; empty for the core group.
    pub group: String,
    /// Plural lower-case resource name (`jobs`).
    pub resource: String,
}

impl GroupResource {
    /// A group/resource pair.
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// How a store writes objects: kube-apiserver's `--storage-media-type`. Only the etcd store encodes;
/// whatever it is set to, values in either encoding are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StorageMediaType {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf` (upstream's default): built-in kinds in protobuf, custom
    /// resources in JSON.
    #[default]
    Protobuf,
}

impl std::str::FromStr for StorageMediaType {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "application/json" => Ok(Self::Json),
            "application/vnd.kubernetes.protobuf" => Ok(Self::Protobuf),
            other => Err(format!(
                "{other:?} is not a supported media type (application/json, application/vnd.kubernetes.protobuf)"
            )),
        }
    }
}

/// A stored API object: always a JSON object with `metadata`.
pub type Object = Value;

/// The storage unit of objects: a group and a resource, independent of the version they are served in
/// (etcd's `/registry/<group>/<resource>` prefix).
pub type StorageResource = GroupResource;

/// The key of one object within a [`StorageResource`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Namespace of namespaced objects; `None` for cluster-scoped ones.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectKey {
    /// The key of a cluster-scoped object.
    pub fn cluster(name: &str) -> Self {
        Self {
            namespace: None,
            name: name.to_owned(),
        }
    }

    /// The key of a namespaced object.
    pub fn namespaced(namespace: &str, name: &str) -> Self {
        Self {
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The kind of a watch event, serialised as kube's `watch.EventType` (`ADDED`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WatchEventType {
    /// The object was created (or, in an initial list of a watch, exists).
    Added,
    /// The object was updated.
    Modified,
    /// The object was deleted; the event carries its last state at the deletion revision.
    Deleted,
    /// Only the revision moved on: a progress notification (etcd's, through
    /// [`Store::watch_progress`]; the watch cache's, in order with its changes), or the REST level's
    /// BOOKMARK. Its object carries nothing a client may rely on.
    Bookmark,
    /// An error (a `Status` object) terminates the watch (REST level; never produced by the store).
    Error,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// What happened.
    pub event_type: WatchEventType,
    /// The object after the change (for `Deleted`, before it, with the deletion's resourceVersion).
    pub object: Object,
    /// The revision of the change (equals the object's `metadata.resourceVersion`).
    pub revision: u64,
    /// The object before the change (`None` for `Added`), as etcd's `prevKV`: lets a filtered watch
    /// turn a change into `ADDED`/`DELETED` when the object enters or leaves its selector.
    pub prev_object: Option<Object>,
}

impl WatchEvent {
    /// A progress notification: every change up to `revision` has been delivered before it.
    pub fn progress(revision: u64) -> Self {
        Self {
            event_type: WatchEventType::Bookmark,
            object: Value::Null,
            revision,
            prev_object: None,
        }
    }
}

/// A stream of watch events in commit order. It yields one `Err` and ends when the watcher fell
/// behind the store's buffer (as an etcd watch closes after compaction).
pub type WatchStream = BoxStream<'static, Result<WatchEvent, StoreError>>;

/// Preconditions of a delete (`DeleteOptions.preconditions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object's `metadata.uid` must equal this.
    pub uid: Option<String>,
    /// The object's `metadata.resourceVersion` must equal this.
    pub resource_version: Option<u64>,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No object under that key.
    #[error("{resource} {:?} not found", key.name)]
    NotFound {
        /// The resource looked in.
        resource: StorageResource,
        /// The missing key.
        key: ObjectKey,
    },
    /// Create of a key that exists.
    #[error("{resource} {:?} already exists", key.name)]
    AlreadyExists {
        /// The resource written to.
        resource: StorageResource,
        /// The existing key.
        key: ObjectKey,
    },
    /// A precondition (resourceVersion or uid) did not hold.
    #[error("Operation cannot be fulfilled on {resource} {:?}: {message}", key.name)]
    Conflict {
        /// The resource written to.
        resource: StorageResource,
        /// The key.
        key: ObjectKey,
        /// Upstream's reason text (e.g. "the object has been modified; ...").
        message: String,
    },
    /// A watch asked for history the store no longer has.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The requested revision.
        requested: u64,
        /// The newest revision no longer retained (history covers revisions after it).
        oldest: u64,
    },
    /// The value written is not a JSON object.
    #[error("invalid object: {0}")]
    InvalidObject(String),
    /// The backend could not be reached or failed (remote backends such as etcd); the text is the
    /// backend's own, as kube-apiserver passes etcd's errors through.
    #[error("{0}")]
    Unavailable(String),
    /// A custom resource could not be converted between the storage version and a served version
    /// (`rest::conversion`); `write` when converting what is written to the storage version.
    #[error("{message}")]
    Conversion {
        /// Upstream's text (`conversion webhook for ... failed: ...`).
        message: String,
        /// Whether the conversion was of an object being written.
        write: bool,
    },
    /// The watch cache did not reach the requested revision in time (upstream's
    /// `NewTooLargeResourceVersionError`: 504 with Retry-After).
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The revision the request needs.
        requested: u64,
        /// The revision the cache is at.
        current: u64,
    },
    /// The watch cache is (re)initializing (upstream's 429 `storage is (re)initializing`).
    #[error("storage is (re)initializing")]
    Initializing,
}

/// A watch of a whole resource that also reports etcd's progress: [`WatchEventType::Bookmark`] events
/// (object `null`) whose revision says every change up to it has been delivered. What the watch cache
/// reads from (upstream's reflector with `RequestWatchProgress`).
pub struct ProgressWatch {
    /// Changes and progress notifications, in revision order.
    pub events: WatchStream,
    /// Asks the backend for a progress notification as soon as possible (`None`: the backend sends
    /// none it can vouch for — etcd before 3.4.31 / 3.5.13 may send one ahead of events still queued
    /// — and a cache must not take its revision as caught up; dropping it does not end the watch).
    pub request_progress: Option<tokio::sync::mpsc::UnboundedSender<()>>,
}

/// The answer of [`Store::list_range`], with what etcd's `RangeResponse` tells a chunked list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RangePage {
    /// The objects read, in key order, each with its key relative to the list's prefix.
    pub items: Vec<(String, Object)>,
    /// The revision the read is consistent with.
    pub revision: u64,
    /// Whether keys after the last returned one are in range (etcd's `more`).
    pub more: bool,
    /// How many keys the whole range holds from `start` on, returned or not (etcd's `count`): what
    /// upstream's `remainingItemCount` is computed from.
    pub count: u64,
}

/// The result type of store operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// The cluster's shared object store (see the module docs for its semantics).
///
/// Every method returns a boxed future so the trait is object-safe (`Arc<dyn Store>`) and a remote
/// backend can be asynchronous.
pub trait Store: Send + Sync + 'static {
    /// Creates `object` under `key`, setting `metadata.name`/`namespace` from the key, and
    /// `resourceVersion`, `uid` and `creationTimestamp`; `generation` is stored as given (absent stays
    /// absent). Returns the stored object.
    fn create<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
    ) -> BoxFuture<'a, StoreResult<Object>>;

    /// The current object under `key`.
    fn get<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, StoreResult<Object>>;

    /// Replaces the object under `key`. The precondition is `expected_revision` when given, else the
    /// object's own `metadata.resourceVersion` when set and non-empty (as kube's update is conditional
    /// on the resourceVersion the client sent), else none; a failed precondition is
    /// [`StoreError::Conflict`]. `uid` and `creationTimestamp` are kept from the stored object;
    /// `generation` is written as given, so read-modify-write callers keep it by starting from the
    /// stored object. Returns the stored object.
    fn update<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
        expected_revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<Object>>;

    /// Deletes the object under `key` if `preconditions` hold; returns its last state carrying the
    /// deletion's revision as `resourceVersion`.
    fn delete<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        preconditions: Option<Preconditions>,
    ) -> BoxFuture<'a, StoreResult<Object>>;

    /// All objects of `resource` (in `namespace` only, when given), ordered by key, with the revision the
    /// list is consistent with.
    fn list<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>>;

    /// [`Store::list`] as of `revision` (a continued list reads the snapshot its first page was read
    /// at); [`StoreError::Expired`] once that revision is compacted. A store that keeps no old
    /// revisions (the in-memory one) answers with the current objects and `revision` itself.
    fn list_at<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        revision: u64,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        Box::pin(async move {
            let (items, _) = self.list(resource, namespace).await?;
            Ok((items, revision))
        })
    }

    /// One key-ordered range read, as kube-apiserver's etcd3 storage issues for a chunked list (a
    /// `Range` with `WithRange` to the end of the prefix and `WithLimit`): at most `limit` objects
    /// (0 = all) of `resource` (in `namespace` only, when given) whose key (relative to the list's
    /// prefix as upstream's continue tokens are: `<namespace>/<name>` for a list of all namespaces or a
    /// cluster-scoped resource's `<name>`, `<name>` within a namespace; compared bytewise as etcd
    /// orders keys) is at or after `start`, read at
    /// `revision` (`None`: the current one; a store that keeps no old revisions, the in-memory one,
    /// reads the current objects and reports `revision`). [`StoreError::Expired`] once `revision` is
    /// compacted. Only the returned objects are copied out of the store.
    fn list_range<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        start: Option<&'a str>,
        limit: usize,
        revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<RangePage>>;

    /// [`Store::list_range`] where a state at *any* revision will do (a list with `resourceVersion="0"`):
    /// a watch cache answers from memory at the revision it holds, without first catching up with the
    /// store (upstream's cacher), so such a list is answered even while etcd is slow or down. Later
    /// pages go through [`Store::list_range`] at the page's revision. Default: the current revision.
    fn list_range_any<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        start: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, StoreResult<RangePage>> {
        self.list_range(resource, namespace, start, limit, None)
    }

    /// Whether [`Store::list_range`] reads at the `revision` it is given (a store that keeps old
    /// revisions, etcd), so that a large list can be read in several ranges that are one snapshot.
    fn reads_at_revision(&self) -> bool {
        false
    }

    /// Changes to `resource` (in `namespace` only, when given) with a revision greater than `from`
    /// (`None`: the current revision, i.e. only future changes). Fails with [`StoreError::Expired`] when
    /// `from` is older than the retained history.
    fn watch<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        from: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<WatchStream>>;

    /// [`Store::watch`] of all of `resource` from `from`, with progress notifications (see
    /// [`ProgressWatch`]). The default has none: a cache over such a store learns the current revision
    /// from changes only.
    fn watch_progress<'a>(
        &'a self,
        resource: &'a StorageResource,
        from: u64,
    ) -> BoxFuture<'a, StoreResult<ProgressWatch>> {
        Box::pin(async move {
            Ok(ProgressWatch {
                events: self.watch(resource, None, Some(from)).await?,
                request_progress: None,
            })
        })
    }

    /// The store's current revision.
    fn current_revision(&self) -> BoxFuture<'_, StoreResult<u64>>;

    /// The revision a watch BOOKMARK of `resource` may carry: every change of `resource` at or below it
    /// is already queued on each watch of it this store opened before the call, so a watcher that then
    /// drains its stream without waiting has delivered them all and a client resuming from the bookmark
    /// misses nothing. `None` when the store cannot vouch for such a revision (a watch fed over the
    /// network, as etcd's, may still have changes in flight): the bookmark then carries the last revision
    /// the watch delivered.
    fn bookmark_revision<'a>(&'a self, resource: &'a StorageResource) -> BoxFuture<'a, Option<u64>> {
        let _ = resource;
        Box::pin(std::future::ready(None))
    }

    /// Internal keyspace: writes `value` under `key`, visible for `ttl` (refresh by writing again).
    fn put_internal<'a>(
        &'a self,
        key: &'a str,
        value: Value,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>>;

    /// Internal keyspace: the live value under `key` (`None` when absent or expired).
    fn get_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>>;

    /// Internal keyspace: live entries whose key starts with `prefix`, ordered by key.
    fn list_internal<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<(String, Value)>>>;

    /// Internal keyspace: removes `key`; `true` when a live entry was removed.
    fn delete_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>>;

    /// Whether the backend answers (kube-apiserver's `etcd` health and readiness check); an
    /// in-process store always does.
    fn check_health(&self) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Upstream's conflict text for an update whose resourceVersion is not the stored one.
const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// What an update of `current` (the stored object, with its `resourceVersion`) to `object` writes, as
/// kube-apiserver's `GuaranteedUpdate` does: the precondition is `expected` when given, else the
/// `resourceVersion` in `object` when non-empty, else none ([`StoreError::Conflict`] when it does not
/// hold); name and namespace come from `key`, `uid` and `creationTimestamp` from `current`. `None`
/// when the result equals `current`: an update that changes nothing is not written.
pub(crate) fn prepare_update(
    resource: &StorageResource,
    key: &ObjectKey,
    mut object: Object,
    current: &Object,
    expected: Option<u64>,
) -> StoreResult<Option<Object>> {
    let metadata = metadata_mut(&mut object)?;
    let requested = metadata
        .get("resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty());
    let current_rv = resource_version(current).unwrap_or(0);
    let conflict = match (expected, requested) {
        (Some(expected), _) => expected != current_rv,
        (None, Some(rv)) => rv.parse::<u64>().ok() != Some(current_rv),
        (None, None) => false,
    };
    if conflict {
        return Err(StoreError::Conflict {
            resource: resource.clone(),
            key: key.clone(),
            message: MODIFIED.to_owned(),
        });
    }
    metadata.insert("name".to_owned(), Value::String(key.name.clone()));
    match &key.namespace {
        Some(ns) => metadata.insert("namespace".to_owned(), Value::String(ns.clone())),
        None => metadata.remove("namespace"),
    };
    for field in ["uid", "creationTimestamp"] {
        match current.pointer(&format!("/metadata/{field}")) {
            Some(value) => metadata.insert(field.to_owned(), value.clone()),
            None => metadata.remove(field),
        };
    }
    set_resource_version(&mut object, current_rv);
    Ok((&object != current).then_some(object))
}

/// Checks a delete's `preconditions` against `current`, with upstream's conflict texts.
pub(crate) fn check_preconditions(
    resource: &StorageResource,
    key: &ObjectKey,
    current: &Object,
    preconditions: Option<Preconditions>,
) -> StoreResult<()> {
    let Some(pre) = preconditions else {
        return Ok(());
    };
    let conflict = |message: String| StoreError::Conflict {
        resource: resource.clone(),
        key: key.clone(),
        message,
    };
    let uid = current
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(expected) = pre.uid.filter(|u| u != uid) {
        return Err(conflict(format!(
            "Precondition failed: UID in precondition: {expected}, UID in object meta: {uid}"
        )));
    }
    let rv = resource_version(current).unwrap_or(0);
    if let Some(expected) = pre.resource_version.filter(|r| *r != rv) {
        return Err(conflict(format!(
            "Precondition failed: ResourceVersion in precondition: {expected}, ResourceVersion in object \
             meta: {rv}"
        )));
    }
    Ok(())
}

/// `metadata.resourceVersion` of an object as a revision (`None` when absent, empty or malformed).
pub fn resource_version(object: &Value) -> Option<u64> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse().ok())
}
