//! [`MemoryStore`]: the in-memory [`Store`] every fake of a process shares.
//!
//! All state sits behind one mutex that is never held across an `.await`. Each commit bumps the
//! revision, appends the event to the bounded history (`watch_history`: a count and a byte budget,
//! objects shared with the store) and broadcasts it *under the same lock*, and a
//! watch reads the history and subscribes under that lock too: so a watcher sees every event after its
//! start revision exactly once, in commit order, whatever writers do concurrently. Sending on the
//! broadcast channel never waits, so a slow watcher cannot block writers; one that falls more than the
//! channel's capacity behind gets [`StoreError::Expired`] and its stream ends.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::watch_history::{Change, Committed, History, HistoryLimits};
use super::{
    Object, ObjectKey, Preconditions, ProgressWatch, RangePage, StorageResource, Store, StoreError,
    StoreResult, WatchEvent, WatchStream, check_preconditions, prepare_update,
};

#[derive(Debug)]
struct State {
    revision: u64,
    /// Objects by etcd's key relative to the resource prefix (`<namespace>/<name>` or `<name>`), so
    /// that iteration is etcd's bytewise key order and a chunked list is a range.
    objects: HashMap<StorageResource, Objects>,
    history: History,
    internal: BTreeMap<String, (Value, Instant)>,
}

/// The objects of one resource: by etcd's key relative to the resource prefix, plus those keys in a
/// sorted vector, so that how many keys a range holds (etcd's `count`, which `remainingItemCount` is
/// computed from) is two binary searches rather than a walk of the range.
#[derive(Debug, Default)]
struct Objects {
    /// Shared with the history's changes (`Arc`), which hold what they need beyond the store.
    by_key: BTreeMap<String, Arc<Object>>,
    keys: Vec<String>,
}

impl Objects {
    fn get(&self, key: &str) -> Option<&Arc<Object>> {
        self.by_key.get(key)
    }

    fn contains_key(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    fn insert(&mut self, key: String, object: Arc<Object>) {
        if self.by_key.insert(key.clone(), object).is_none() {
            let at = self.keys.partition_point(|k| k.as_str() < key.as_str());
            self.keys.insert(at, key);
        }
    }

    fn remove(&mut self, key: &str) -> Option<Arc<Object>> {
        let removed = self.by_key.remove(key)?;
        if let Ok(at) = self.keys.binary_search_by(|k| k.as_str().cmp(key)) {
            self.keys.remove(at);
        }
        Some(removed)
    }

    /// How many keys are at or after `from` and start with `prefix` (`from` starts with `prefix`).
    fn count(&self, from: &str, prefix: &str) -> usize {
        let start = self.keys.partition_point(|k| k.as_str() < from);
        let end = match prefix.strip_suffix('/') {
            // The end of the prefix's range, as etcd's: the prefix with its last byte ('/') incremented.
            Some(stem) => {
                let end = format!("{stem}0");
                self.keys.partition_point(|k| k.as_str() < end.as_str())
            }
            None => self.keys.len(),
        };
        end.saturating_sub(start)
    }
}

/// The in-memory store: share one `Arc<MemoryStore>` (as `Arc<dyn Store>`) between all fakes of a
/// cluster.
#[derive(Debug)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
    events: broadcast::Sender<Arc<Committed>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock cannot leave the maps half-written in a way later readers
    // mis-handle (every mutation is a single insert/remove), so keep serving.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `creationTimestamp` format: RFC 3339 in UTC with second precision (`2024-05-01T10:00:00Z`).
pub(crate) fn now_timestamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(0).unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Sets what kube's `BeforeCreate` and the store set on a new object: name/namespace from the key, a
/// fresh `uid` (unless one is already assigned), `creationTimestamp`, and no deletion fields. `generation` is left as the caller wrote
/// it: only the resource's registry strategy sets it (`rest::generation`).
pub(crate) fn fill_create_metadata(object: &mut Object, key: &ObjectKey) -> StoreResult<()> {
    let metadata = metadata_mut(object)?;
    metadata.insert("name".to_owned(), Value::String(key.name.clone()));
    match &key.namespace {
        Some(ns) => {
            metadata.insert("namespace".to_owned(), Value::String(ns.clone()));
        }
        None => {
            metadata.remove("namespace");
        }
    }
    // A uid the REST layer already assigned (it needs it before storing, e.g. for a Job's selector) is
    // kept; anything else gets a fresh one.
    let assigned = metadata
        .get("uid")
        .and_then(Value::as_str)
        .is_some_and(|uid| !uid.is_empty());
    if !assigned {
        metadata.insert("uid".to_owned(), Value::String(uuid::Uuid::new_v4().to_string()));
    }
    metadata.insert("creationTimestamp".to_owned(), Value::String(now_timestamp()));
    metadata.remove("deletionTimestamp");
    metadata.remove("deletionGracePeriodSeconds");
    metadata.remove("resourceVersion");
    Ok(())
}

pub(crate) fn metadata_mut(object: &mut Object) -> StoreResult<&mut Map<String, Value>> {
    let Value::Object(map) = object else {
        return Err(StoreError::InvalidObject(
            "the object is not a JSON object".to_owned(),
        ));
    };
    let metadata = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        return Err(StoreError::InvalidObject(
            "metadata is not a JSON object".to_owned(),
        ));
    }
    match metadata {
        Value::Object(m) => Ok(m),
        _ => Err(StoreError::InvalidObject(
            "metadata is not a JSON object".to_owned(),
        )),
    }
}

pub(crate) fn set_resource_version(object: &mut Object, revision: u64) {
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.insert("resourceVersion".to_owned(), Value::String(revision.to_string()));
    }
}

impl MemoryStore {
    /// An empty store with the default history (`DEFAULT_HISTORY` changes, `DEFAULT_HISTORY_BYTES`).
    pub fn new() -> Self {
        Self::with_limits(HistoryLimits::default())
    }

    /// An empty store keeping at most `history` changes (at least 1) and the default byte budget.
    pub fn with_history(history: usize) -> Self {
        Self::with_limits(HistoryLimits {
            events: history,
            ..HistoryLimits::default()
        })
    }

    /// An empty store keeping the history `limits` allow for watches that start in the past, and
    /// buffering at most `limits.events` changes per watcher before a slow watcher is cut off.
    pub fn with_limits(limits: HistoryLimits) -> Self {
        let (events, _) = broadcast::channel(limits.events.max(1));
        Self {
            state: Arc::new(Mutex::new(State {
                revision: 0,
                objects: HashMap::new(),
                history: History::new(limits),
                internal: BTreeMap::new(),
            })),
            events,
        }
    }

    /// Stores `object` under `key` at the next revision and commits the change (create, or update
    /// from `previous`); returns a copy of what is stored.
    fn write(
        &self,
        state: &mut State,
        resource: &StorageResource,
        key: &ObjectKey,
        mut object: Object,
        previous: Option<Arc<Object>>,
    ) -> Object {
        state.revision += 1;
        set_resource_version(&mut object, state.revision);
        let object = Arc::new(object);
        state
            .objects
            .entry(resource.clone())
            .or_default()
            .insert(key.to_string(), object.clone());
        let stored = Object::clone(&object);
        let change = match previous {
            Some(previous) => Change::Modified { object, previous },
            None => Change::Added(object),
        };
        self.commit(state, resource, key, change);
        stored
    }

    /// Records a committed change at the current revision: history (which drops what its limits no
    /// longer allow) and broadcast. Called with the state locked, right after bumping the revision.
    fn commit(&self, state: &mut State, resource: &StorageResource, key: &ObjectKey, change: Change) {
        let committed = Arc::new(Committed::new(
            resource,
            key.namespace.as_deref(),
            state.revision,
            change,
        ));
        state.history.push(committed.clone());
        // No receivers is not an error for us.
        let _ = self.events.send(committed);
    }

    fn create_sync(
        &self,
        resource: &StorageResource,
        key: &ObjectKey,
        mut object: Object,
    ) -> StoreResult<Object> {
        fill_create_metadata(&mut object, key)?;
        let mut state = lock(&self.state);
        if state
            .objects
            .get(resource)
            .is_some_and(|objects| objects.contains_key(&key.to_string()))
        {
            return Err(StoreError::AlreadyExists {
                resource: resource.clone(),
                key: key.clone(),
            });
        }
        Ok(self.write(&mut state, resource, key, object, None))
    }

    fn update_sync(
        &self,
        resource: &StorageResource,
        key: &ObjectKey,
        object: Object,
        expected: Option<u64>,
    ) -> StoreResult<Object> {
        let mut state = lock(&self.state);
        let current = state
            .objects
            .get(resource)
            .and_then(|objects| objects.get(&key.to_string()))
            .ok_or_else(|| StoreError::NotFound {
                resource: resource.clone(),
                key: key.clone(),
            })?;
        let Some(object) = prepare_update(resource, key, object, current, expected)? else {
            return Ok(Object::clone(current));
        };
        let previous = current.clone();
        Ok(self.write(&mut state, resource, key, object, Some(previous)))
    }

    fn delete_sync(
        &self,
        resource: &StorageResource,
        key: &ObjectKey,
        preconditions: Option<Preconditions>,
    ) -> StoreResult<Object> {
        let mut state = lock(&self.state);
        let not_found = || StoreError::NotFound {
            resource: resource.clone(),
            key: key.clone(),
        };
        let current = state
            .objects
            .get(resource)
            .and_then(|objects| objects.get(&key.to_string()))
            .ok_or_else(not_found)?;
        check_preconditions(resource, key, current, preconditions)?;
        let Some(previous) = state
            .objects
            .get_mut(resource)
            .and_then(|objects| objects.remove(&key.to_string()))
        else {
            return Err(not_found());
        };
        let mut object = Object::clone(&previous);
        state.revision += 1;
        set_resource_version(&mut object, state.revision);
        self.commit(&mut state, resource, key, Change::Deleted(previous));
        Ok(object)
    }

    fn list_sync(&self, resource: &StorageResource, namespace: Option<&str>) -> (Vec<Object>, u64) {
        let page = self.range_sync(resource, namespace, None, 0, None);
        (page.items.into_iter().map(|(_, o)| o).collect(), page.revision)
    }

    /// [`Store::list_range`]: walks the ordered map from the scope's prefix plus the start key, copying
    /// only the `limit` objects returned; the range's count comes from the sorted keys.
    fn range_sync(
        &self,
        resource: &StorageResource,
        namespace: Option<&str>,
        start: Option<&str>,
        limit: usize,
        revision: Option<u64>,
    ) -> RangePage {
        let state = lock(&self.state);
        let prefix = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
        let from = format!("{prefix}{}", start.unwrap_or_default());
        let mut page = RangePage {
            revision: revision.unwrap_or(state.revision),
            ..RangePage::default()
        };
        let Some(objects) = state.objects.get(resource) else {
            return page;
        };
        let range = objects
            .by_key
            .range::<str, _>((Bound::Included(from.as_str()), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(&prefix));
        let limit = if limit == 0 { usize::MAX } else { limit };
        for (key, object) in range.take(limit) {
            let relative = key.strip_prefix(&prefix).unwrap_or(key);
            page.items.push((relative.to_owned(), Object::clone(object)));
        }
        let count = objects.count(&from, &prefix);
        page.more = count > page.items.len();
        page.count = count as u64;
        page
    }

    fn watch_sync(
        &self,
        resource: &StorageResource,
        namespace: Option<&str>,
        from: Option<u64>,
    ) -> StoreResult<WatchStream> {
        let state = lock(&self.state);
        let from = from.unwrap_or(state.revision);
        let oldest = state.history.oldest(resource);
        if from < oldest {
            return Err(StoreError::Expired {
                requested: from,
                oldest,
            });
        }
        let replay: Vec<StoreResult<WatchEvent>> = state
            .history
            .since(resource, namespace, from)
            .map(|c| Ok(c.event()))
            .collect();
        // Subscribed under the lock: the receiver sees exactly the commits after the replayed history.
        let receiver = self.events.subscribe();
        drop(state);
        let filter = Arc::new((resource.clone(), namespace.map(str::to_owned)));
        let shared_state = self.state.clone();
        let live = futures_util::stream::unfold(Some((receiver, from)), move |next| {
            let filter = filter.clone();
            let shared_state = shared_state.clone();
            async move {
                let (mut receiver, mut last) = next?;
                loop {
                    match receiver.recv().await {
                        Ok(committed) => {
                            if committed.revision > last && committed.matches(&filter.0, filter.1.as_deref())
                            {
                                last = committed.revision;
                                return Some((Ok(committed.event()), Some((receiver, last))));
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            let oldest = lock(&shared_state).history.oldest(&filter.0);
                            return Some((
                                Err(StoreError::Expired {
                                    requested: last,
                                    oldest,
                                }),
                                None,
                            ));
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        });
        Ok(futures_util::stream::iter(replay).chain(live).boxed())
    }

    fn put_internal_sync(&self, key: &str, value: Value, ttl: Duration) {
        let deadline = Instant::now() + ttl;
        lock(&self.state)
            .internal
            .insert(key.to_owned(), (value, deadline));
    }

    fn get_internal_sync(&self, key: &str) -> Option<Value> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        match state.internal.get(key) {
            Some((value, deadline)) if *deadline > now => Some(value.clone()),
            Some(_) => {
                // Lazy expiry: an expired entry is invisible and removed when touched.
                state.internal.remove(key);
                None
            }
            None => None,
        }
    }

    fn list_internal_sync(&self, prefix: &str) -> Vec<(String, Value)> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        state.internal.retain(|_, (_, deadline)| *deadline > now);
        state
            .internal
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, (value, _))| (key.clone(), value.clone()))
            .collect()
    }

    fn delete_internal_sync(&self, key: &str) -> bool {
        let now = Instant::now();
        lock(&self.state)
            .internal
            .remove(key)
            .is_some_and(|(_, deadline)| deadline > now)
    }
}

impl Store for MemoryStore {
    fn create<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        Box::pin(std::future::ready(self.create_sync(resource, key, object)))
    }

    fn get<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        let state = lock(&self.state);
        let result = state
            .objects
            .get(resource)
            .and_then(|objects| objects.get(&key.to_string()))
            .map(|object| Object::clone(object))
            .ok_or_else(|| StoreError::NotFound {
                resource: resource.clone(),
                key: key.clone(),
            });
        drop(state);
        Box::pin(std::future::ready(result))
    }

    fn update<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
        expected_revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        Box::pin(std::future::ready(self.update_sync(
            resource,
            key,
            object,
            expected_revision,
        )))
    }

    fn delete<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        preconditions: Option<Preconditions>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        Box::pin(std::future::ready(self.delete_sync(resource, key, preconditions)))
    }

    fn list<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        Box::pin(std::future::ready(Ok(self.list_sync(resource, namespace))))
    }

    fn list_range<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        start: Option<&'a str>,
        limit: usize,
        revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<RangePage>> {
        Box::pin(std::future::ready(Ok(
            self.range_sync(resource, namespace, start, limit, revision)
        )))
    }

    fn watch<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        from: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<WatchStream>> {
        Box::pin(std::future::ready(self.watch_sync(resource, namespace, from)))
    }

    /// A whole-resource watch whose requested progress notifications are trusted: a request is
    /// answered with the current revision after every change up to it has been queued (changes are
    /// broadcast under the lock as the revision moves), so the watch cache can serve consistent
    /// reads in front of this store as in front of an etcd that orders them (tests use it so).
    fn watch_progress<'a>(
        &'a self,
        resource: &'a StorageResource,
        from: u64,
    ) -> BoxFuture<'a, StoreResult<ProgressWatch>> {
        let events = self.watch_sync(resource, None, Some(from));
        let state = self.state.clone();
        Box::pin(async move {
            let (request_progress, requests) = tokio::sync::mpsc::unbounded_channel();
            let stream = futures_util::stream::unfold(
                (events?, requests, std::collections::VecDeque::new()),
                move |(mut events, mut requests, mut pending)| {
                    let state = state.clone();
                    async move {
                        loop {
                            if let Some(item) = pending.pop_front() {
                                return Some((item, (events, requests, pending)));
                            }
                            tokio::select! {
                                biased;
                                event = events.next() => {
                                    return event.map(|e| (e, (events, requests, pending)));
                                }
                                Some(()) = requests.recv() => {
                                    let mut revision = lock(&state).revision;
                                    while let Some(Some(item)) = events.next().now_or_never() {
                                        if let Ok(event) = &item {
                                            revision = revision.max(event.revision);
                                        }
                                        pending.push_back(item);
                                    }
                                    pending.push_back(Ok(WatchEvent::progress(revision)));
                                }
                            }
                        }
                    }
                },
            );
            Ok(ProgressWatch {
                events: stream.boxed(),
                request_progress: Some(request_progress),
            })
        })
    }

    fn current_revision(&self) -> BoxFuture<'_, StoreResult<u64>> {
        Box::pin(std::future::ready(Ok(lock(&self.state).revision)))
    }

    /// Changes are broadcast under the state's lock as the revision moves, so the current revision is
    /// one every open watch has been handed.
    fn bookmark_revision<'a>(&'a self, _resource: &'a StorageResource) -> BoxFuture<'a, Option<u64>> {
        Box::pin(std::future::ready(Some(lock(&self.state).revision)))
    }

    fn put_internal<'a>(
        &'a self,
        key: &'a str,
        value: Value,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.put_internal_sync(key, value, ttl);
        Box::pin(std::future::ready(Ok(())))
    }

    fn get_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        Box::pin(std::future::ready(Ok(self.get_internal_sync(key))))
    }

    fn list_internal<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<(String, Value)>>> {
        Box::pin(std::future::ready(Ok(self.list_internal_sync(prefix))))
    }

    fn delete_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(std::future::ready(Ok(self.delete_internal_sync(key))))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::WatchEventType;

    fn jobs() -> StorageResource {
        StorageResource::new("batch", "jobs")
    }

    fn job(name: &str) -> Object {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"parallelism": 1}})
    }

    #[tokio::test]
    async fn create_sets_system_fields_and_rejects_duplicates() {
        let store = MemoryStore::new();
        let key = ObjectKey::namespaced("default", "a");
        let created = store.create(&jobs(), &key, job("a")).await.unwrap();
        assert_eq!(created["metadata"]["resourceVersion"], "1");
        assert_eq!(created["metadata"]["namespace"], "default");
        assert!(
            created["metadata"].get("generation").is_none(),
            "the store never invents a generation"
        );
        assert_eq!(created["metadata"]["uid"].as_str().unwrap().len(), 36);
        let ts = created["metadata"]["creationTimestamp"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 20, "{ts}");
        let err = store.create(&jobs(), &key, job("a")).await.unwrap_err();
        assert!(matches!(err, StoreError::AlreadyExists { .. }));
        assert_eq!(store.current_revision().await.unwrap(), 1);
    }

    #[tokio::test]
    async fn update_checks_resource_version_and_keeps_system_fields() {
        let store = MemoryStore::new();
        let key = ObjectKey::namespaced("default", "a");
        let mut with_generation = job("a");
        with_generation["metadata"]["generation"] = json!(1);
        let created = store.create(&jobs(), &key, with_generation).await.unwrap();
        assert_eq!(created["metadata"]["generation"], 1, "stored as given");
        let mut changed = created.clone();
        changed["spec"]["parallelism"] = json!(2);
        changed["metadata"]["uid"] = json!("forged");
        changed["metadata"]["generation"] = json!(2);
        let updated = store.update(&jobs(), &key, changed.clone(), None).await.unwrap();
        assert_eq!(updated["metadata"]["resourceVersion"], "2");
        assert_eq!(
            updated["metadata"]["generation"], 2,
            "written as given, not bumped"
        );
        assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
        // Stale resourceVersion in the object → Conflict.
        let err = store
            .update(&jobs(), &key, changed.clone(), None)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
        // Explicit expected revision wins; a caller starting from the stored object keeps generation.
        let mut relabel = updated.clone();
        relabel["metadata"]["labels"] = json!({"a": "b"});
        let err = store
            .update(&jobs(), &key, relabel.clone(), Some(1))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }));
        let relabeled = store.update(&jobs(), &key, relabel, Some(2)).await.unwrap();
        assert_eq!(relabeled["metadata"]["generation"], 2);
        assert_eq!(relabeled["metadata"]["resourceVersion"], "3");
        // Without any resourceVersion the update is unconditional.
        let mut unconditional = relabeled.clone();
        unconditional["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        unconditional["status"] = json!({"active": 1});
        assert_eq!(
            store.update(&jobs(), &key, unconditional, None).await.unwrap()["metadata"]["resourceVersion"],
            "4"
        );
    }

    #[tokio::test]
    async fn no_op_update_writes_nothing() {
        let store = MemoryStore::new();
        let key = ObjectKey::cluster("n");
        let created = store
            .create(
                &StorageResource::new("", "namespaces"),
                &key,
                json!({"metadata": {}}),
            )
            .await;
        let created = created.unwrap();
        let same = store
            .update(
                &StorageResource::new("", "namespaces"),
                &key,
                created.clone(),
                None,
            )
            .await;
        assert_eq!(same.unwrap(), created);
        assert_eq!(store.current_revision().await.unwrap(), 1);
    }

    #[tokio::test]
    async fn update_and_delete_of_missing_object_are_not_found() {
        let store = MemoryStore::new();
        let key = ObjectKey::namespaced("default", "missing");
        assert!(matches!(
            store.update(&jobs(), &key, job("x"), None).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.delete(&jobs(), &key, None).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.get(&jobs(), &key).await,
            Err(StoreError::NotFound { .. })
        ));
    }

    #[tokio::test]
    async fn delete_honours_preconditions_and_returns_deletion_revision() {
        let store = MemoryStore::new();
        let key = ObjectKey::namespaced("default", "a");
        let created = store.create(&jobs(), &key, job("a")).await.unwrap();
        let err = store
            .delete(
                &jobs(),
                &key,
                Some(Preconditions {
                    uid: Some("other".into()),
                    resource_version: None,
                }),
            )
            .await
            .unwrap_err();
        let uid = created["metadata"]["uid"].as_str().unwrap();
        assert_eq!(
            err.to_string(),
            format!(
                "Operation cannot be fulfilled on jobs.batch \"a\": Precondition failed: UID in precondition: \
                 other, UID in object meta: {uid}"
            )
        );
        let deleted = store
            .delete(
                &jobs(),
                &key,
                Some(Preconditions {
                    uid: Some(uid.to_owned()),
                    resource_version: Some(1),
                }),
            )
            .await
            .unwrap();
        assert_eq!(deleted["metadata"]["resourceVersion"], "2");
        assert!(store.list(&jobs(), None).await.unwrap().0.is_empty());
    }

    #[tokio::test]
    async fn list_filters_by_namespace_in_key_order() {
        let store = MemoryStore::new();
        for (ns, name) in [("b", "x"), ("a", "z"), ("a", "y")] {
            store
                .create(&jobs(), &ObjectKey::namespaced(ns, name), job(name))
                .await
                .unwrap();
        }
        let (all, rv) = store.list(&jobs(), None).await.unwrap();
        let names: Vec<&str> = all
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["y", "z", "x"]);
        assert_eq!(rv, 3);
        let (in_a, _) = store.list(&jobs(), Some("a")).await.unwrap();
        assert_eq!(in_a.len(), 2);
        let (other, _) = store.list(&StorageResource::new("", "pods"), None).await.unwrap();
        assert!(other.is_empty());
    }

    #[tokio::test]
    async fn range_reads_pages_in_etcd_key_order_and_counts_the_rest() {
        let store = MemoryStore::new();
        for (ns, name) in [("a", "x"), ("a-b", "x"), ("a", "y"), ("b", "z"), ("a", "w")] {
            store
                .create(&jobs(), &ObjectKey::namespaced(ns, name), job(name))
                .await
                .unwrap();
        }
        let keys = |page: &RangePage| page.items.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        // Bytewise order: "a-b/x" < "a/w" because '-' < '/'.
        let first = store.list_range(&jobs(), None, None, 2, None).await.unwrap();
        assert_eq!(keys(&first), ["a-b/x", "a/w"]);
        assert!(first.more);
        assert_eq!((first.count, first.revision), (5, 5));
        let second = store
            .list_range(&jobs(), None, Some("a/w\u{0}"), 2, Some(3))
            .await
            .unwrap();
        assert_eq!(keys(&second), ["a/x", "a/y"]);
        assert_eq!((second.count, second.revision, second.more), (3, 3, true));
        // A namespace is a prefix: "a-b/" is not in "a/".
        let in_a = store.list_range(&jobs(), Some("a"), None, 0, None).await.unwrap();
        assert!(!in_a.more);
        assert_eq!(keys(&in_a), ["w", "x", "y"], "keys are relative to the namespace");
        let after = store
            .list_range(&jobs(), Some("a"), Some("x\u{0}"), 5, None)
            .await
            .unwrap();
        assert_eq!(keys(&after), ["y"]);
        assert_eq!(after.count, 1);
        // The count follows deletes and re-creates.
        store
            .delete(&jobs(), &ObjectKey::namespaced("a", "x"), None)
            .await
            .unwrap();
        let left = store.list_range(&jobs(), Some("a"), None, 1, None).await.unwrap();
        assert_eq!(
            (keys(&left), left.count, left.more),
            (vec!["w".to_owned()], 2, true)
        );
        store
            .create(&jobs(), &ObjectKey::namespaced("a", "x"), job("x"))
            .await
            .unwrap();
        let all = store.list_range(&jobs(), None, None, 0, None).await.unwrap();
        assert_eq!((all.items.len(), all.count, all.more), (5, 5, false));
    }

    #[tokio::test]
    async fn watch_replays_history_then_follows_and_filters() {
        let store = MemoryStore::new();
        let a = ObjectKey::namespaced("a", "j");
        store.create(&jobs(), &a, job("j")).await.unwrap();
        store
            .create(&jobs(), &ObjectKey::namespaced("b", "j"), job("j"))
            .await
            .unwrap();
        store
            .create(&StorageResource::new("", "pods"), &a, json!({}))
            .await
            .unwrap();
        let mut from_start = store.watch(&jobs(), Some("a"), Some(0)).await.unwrap();
        let mut from_now = store.watch(&jobs(), None, None).await.unwrap();
        store.delete(&jobs(), &a, None).await.unwrap();
        let first = from_start.next().await.unwrap().unwrap();
        assert_eq!((first.event_type, first.revision), (WatchEventType::Added, 1));
        let second = from_start.next().await.unwrap().unwrap();
        assert_eq!((second.event_type, second.revision), (WatchEventType::Deleted, 4));
        assert_eq!(second.object["metadata"]["resourceVersion"], "4");
        let live = from_now.next().await.unwrap().unwrap();
        assert_eq!((live.event_type, live.revision), (WatchEventType::Deleted, 4));
    }

    #[tokio::test]
    async fn watch_from_compacted_revision_is_expired() {
        let store = MemoryStore::with_history(2);
        for name in ["a", "b", "c", "d"] {
            store
                .create(&jobs(), &ObjectKey::namespaced("x", name), job(name))
                .await
                .unwrap();
        }
        let err = store.watch(&jobs(), None, Some(1)).await.err().unwrap();
        assert_eq!(
            err,
            StoreError::Expired {
                requested: 1,
                oldest: 2
            }
        );
        assert_eq!(err.to_string(), "too old resource version: 1 (2)");
        let mut ok = store.watch(&jobs(), None, Some(2)).await.unwrap();
        assert_eq!(ok.next().await.unwrap().unwrap().revision, 3);
    }

    #[tokio::test]
    async fn lagging_watcher_gets_error_and_ends_without_blocking_writers() {
        let store = MemoryStore::with_history(4);
        let mut slow = store.watch(&jobs(), None, None).await.unwrap();
        for i in 0..20 {
            store
                .create(&jobs(), &ObjectKey::namespaced("x", &i.to_string()), job("j"))
                .await
                .unwrap();
        }
        let mut seen_error = false;
        while let Some(item) = slow.next().await {
            if item.is_err() {
                seen_error = true;
            }
        }
        assert!(seen_error);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_and_watchers_see_every_event_once_in_order() {
        let store = Arc::new(MemoryStore::new());
        const WRITERS: usize = 4;
        const PER_WRITER: usize = 200;
        let total = WRITERS * PER_WRITER;
        let mut watchers = Vec::new();
        for _ in 0..3 {
            let stream = store.watch(&jobs(), None, Some(0)).await.unwrap();
            watchers.push(tokio::spawn(async move {
                stream
                    .take(total)
                    .map(|e| e.unwrap().revision)
                    .collect::<Vec<u64>>()
                    .await
            }));
        }
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let store = store.clone();
            writers.push(tokio::spawn(async move {
                for i in 0..PER_WRITER {
                    let key = ObjectKey::namespaced("ns", &format!("w{w}-{}", i % 10));
                    if store.create(&jobs(), &key, job("j")).await.is_err() {
                        let current = store.get(&jobs(), &key).await.unwrap();
                        let mut next = current.clone();
                        next["spec"]["parallelism"] = json!(i);
                        store.update(&jobs(), &key, next, None).await.unwrap();
                    }
                    if i % 7 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        // A late watcher starting mid-way also sees a gap-free suffix.
        tokio::task::yield_now().await;
        let late_from = store.current_revision().await.unwrap();
        let late = store.watch(&jobs(), None, Some(late_from)).await.unwrap();
        for w in writers {
            w.await.unwrap();
        }
        let expected: Vec<u64> = (1..=total as u64).collect();
        for watcher in watchers {
            assert_eq!(watcher.await.unwrap(), expected);
        }
        let late: Vec<u64> = late
            .take(total - late_from as usize)
            .map(|e| e.unwrap().revision)
            .collect()
            .await;
        assert_eq!(late, ((late_from + 1)..=total as u64).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn internal_keyspace_expires_lazily_and_is_separate() {
        let store = MemoryStore::new();
        store
            .put_internal("/peerserverleases/a", json!({"ip": "1"}), Duration::from_secs(15))
            .await
            .unwrap();
        store
            .put_internal("/peerserverleases/b", json!({"ip": "2"}), Duration::from_secs(30))
            .await
            .unwrap();
        store
            .put_internal("/other/c", json!(3), Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(
            store.get_internal("/peerserverleases/a").await.unwrap(),
            Some(json!({"ip": "1"}))
        );
        assert_eq!(store.list_internal("/peerserverleases/").await.unwrap().len(), 2);
        tokio::time::advance(Duration::from_secs(16)).await;
        assert_eq!(store.get_internal("/peerserverleases/a").await.unwrap(), None);
        let live = store.list_internal("/peerserverleases/").await.unwrap();
        assert_eq!(live, vec![("/peerserverleases/b".to_owned(), json!({"ip": "2"}))]);
        assert!(store.delete_internal("/peerserverleases/b").await.unwrap());
        assert!(!store.delete_internal("/peerserverleases/b").await.unwrap());
        // Not part of the API keyspace.
        assert_eq!(store.current_revision().await.unwrap(), 0);
    }
}
