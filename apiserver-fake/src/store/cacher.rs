//! [`CachedStore`]: kube-apiserver's watch cache (`staging/src/k8s.io/apiserver/pkg/storage/cacher/`)
//! in front of any [`Store`], built for the etcd one (docs/decisions.md §21).
//!
//! Per resource (started on its first list or watch) one task lists the resource from the store and
//! then follows it with one watch with progress notifications (upstream's reflector): it keeps the
//! current objects (ordered by key, for lists) and a bounded window of the latest events (for watches
//! that start in the past), and fans every event out to the client watches from memory.
//!
//! * Watches are served from the window: a revision older than it is 410 `too old resource version`;
//!   a newer one waits for its events. A watcher that falls more than [`WATCHER_BUFFER`] events behind
//!   is closed, as upstream closes a blocked `cacheWatcher` (the client watches again from its last
//!   revision).
//! * A consistent list (`Store::list`, `list_range` without a revision) reads etcd's current revision,
//!   waits (asking etcd for a progress notification) until the cache has seen it, and is answered from
//!   memory (`ConsistentListFromCache`); when the cache does not catch up within [`BLOCK_TIMEOUT`] it is
//!   read from the store instead, as upstream falls back. Only where the store's progress
//!   notifications can be trusted (etcd 3.4.31+ / 3.5.13+, upstream's `RequestWatchProgress`
//!   feature): otherwise consistent lists are read from the store at once. Continued lists at an
//!   older revision, gets and writes go to the store.
//! * The window grows from 100 events while its oldest event is younger than 75 s, up to 102,400, and
//!   shrinks back when it holds older history: upstream's `resizeCacheLocked`.
//! * The follow-up watch survives etcd restarts: it is opened again from the last revision seen, so no
//!   event is lost. When that revision is compacted the resource is listed again and every client
//!   watch is closed (upstream's `terminateAllWatchers`); the window then starts at the new list.
//! * A client watch arriving while the cache (re)initializes waits up to [`BLOCK_TIMEOUT`], then gets
//!   429 `storage is (re)initializing`; a list is read from the store.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch};

use super::{
    GroupResource, Object, ObjectKey, Preconditions, RangePage, StorageResource, Store, StoreError,
    StoreResult, WatchEvent, WatchEventType, WatchStream,
};

/// How long a request waits for the cache to reach a revision or to initialize (upstream's
/// `blockTimeout`).
pub(super) const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// The window's starting and smallest capacity (upstream's `defaultLowerBoundCapacity`).
pub(super) const LOWER_BOUND_CAPACITY: usize = 100;

/// The window's largest capacity (upstream's `defaultUpperBoundCapacity`): what bounds the memory of
/// history per resource.
pub(super) const UPPER_BOUND_CAPACITY: usize = 100 * 1024;

/// How much history the window tries to keep (upstream's `DefaultEventFreshDuration`).
const EVENT_FRESH_DURATION: Duration = Duration::from_secs(75);

/// Events a client watch may be behind the cache before it is closed.
pub(super) const WATCHER_BUFFER: usize = 1024;

/// How often a waiting request asks etcd again for a progress notification.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The longest pause between attempts to list or watch a failing store.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// `--watch-cache-sizes`: per resource, whether it is cached. As upstream, a size of 0 turns the
/// cache off for the resource and every other size is equivalent (the window sizes itself).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchCacheSizes(HashMap<GroupResource, usize>);

impl WatchCacheSizes {
    /// Parses `resource[.group]#size` entries with upstream's errors (`ParseWatchCacheSizes`).
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut sizes = HashMap::new();
        for entry in entries {
            let entry = entry.as_ref();
            let tokens: Vec<&str> = entry.split('#').collect();
            let [resource, size] = tokens[..] else {
                return Err(format!("invalid value of watch cache size: {entry}"));
            };
            let size: i64 = size
                .parse()
                .map_err(|_| format!("invalid size of watch cache size: {entry}"))?;
            let size =
                usize::try_from(size).map_err(|_| format!("watch cache size cannot be negative: {entry}"))?;
            // schema.ParseGroupResource: the resource up to the first dot, the group after it.
            let gr = match resource.split_once('.') {
                Some((resource, group)) => GroupResource::new(group, resource),
                None => GroupResource::new("", resource),
            };
            sizes.insert(gr, size);
        }
        Ok(Self(sizes))
    }

    /// Whether `resource` is cached.
    pub fn enabled(&self, resource: &GroupResource) -> bool {
        self.0.get(resource) != Some(&0)
    }
}

/// A [`Store`] whose lists and watches are served by a watch cache (see the module docs).
pub struct CachedStore {
    inner: Arc<dyn Store>,
    sizes: WatchCacheSizes,
    caches: Mutex<HashMap<StorageResource, Arc<ResourceCache>>>,
}

impl std::fmt::Debug for CachedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedStore")
            .field("sizes", &self.sizes)
            .finish_non_exhaustive()
    }
}

impl CachedStore {
    /// A cache in front of `inner`, for the resources `sizes` does not turn off.
    pub fn new(inner: Arc<dyn Store>, sizes: WatchCacheSizes) -> Self {
        Self {
            inner,
            sizes,
            caches: Mutex::new(HashMap::new()),
        }
    }

    /// The cache of `resource`, started on first use (`None` when it is not cached).
    fn cache(&self, resource: &StorageResource) -> Option<Arc<ResourceCache>> {
        if !self.sizes.enabled(resource) {
            return None;
        }
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        let cache = caches
            .entry(resource.clone())
            .or_insert_with(|| ResourceCache::start(self.inner.clone(), resource.clone()));
        Some(cache.clone())
    }

    /// The ready cache of `resource`, waiting up to [`BLOCK_TIMEOUT`] for it to initialize
    /// (`Ok(None)`: not cached; [`StoreError::Initializing`]: not ready in time).
    async fn ready_cache(&self, resource: &StorageResource) -> StoreResult<Option<Arc<ResourceCache>>> {
        let Some(cache) = self.cache(resource) else {
            return Ok(None);
        };
        let mut ready = cache.ready.subscribe();
        match tokio::time::timeout(BLOCK_TIMEOUT, ready.wait_for(|r| *r)).await {
            Ok(Ok(_)) => Ok(Some(cache)),
            _ => Err(StoreError::Initializing),
        }
    }

    /// The cache of `resource` once it has seen etcd's current revision, for a consistent read
    /// (`None`: read from the store: not cached, not ready, or not caught up in time).
    async fn fresh_cache(&self, resource: &StorageResource) -> StoreResult<Option<Arc<ResourceCache>>> {
        let Ok(Some(cache)) = self.ready_cache(resource).await else {
            return Ok(None);
        };
        if !cache.progress_trusted() {
            // No progress notification to wait for that can be trusted (etcd before 3.4.31/3.5.13,
            // or no watch running): upstream's `ConsistentReadSupported` is false and the list is
            // delegated at once.
            return Ok(None);
        }
        // Upstream's consistent read from cache: the store's current revision, then wait for it.
        let current = self.inner.current_revision().await?;
        match cache.wait_for_revision(current).await {
            Ok(()) => Ok(Some(cache)),
            Err(_) => Ok(None),
        }
    }
}

/// One resource's watch cache.
struct ResourceCache {
    state: RwLock<CacheState>,
    /// Whether the cache holds a complete list (upstream's `ready`).
    ready: watch::Sender<bool>,
    /// The revision the cache is at, for requests waiting for one.
    revision: watch::Sender<u64>,
    /// Asks the store's watch for a progress notification (`None` while no watch runs).
    request_progress: Mutex<Option<mpsc::UnboundedSender<()>>>,
    /// Cancelled when the cache is dropped (its server shut down): ends the reflector, which may be
    /// waiting on a store watch that has nothing to say.
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for ResourceCache {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct CacheState {
    /// The current objects by key (`<namespace>/<name>` or `<name>`), each as the event that last
    /// changed it — the same allocation the window holds, so a recent change is kept once, not twice
    /// (a listed object is wrapped in an event of its own).
    objects: BTreeMap<String, Arc<CachedEvent>>,
    /// The revision `objects` is at.
    revision: u64,
    /// The latest events, oldest first, with when they were recorded.
    window: VecDeque<(Instant, Arc<CachedEvent>)>,
    /// The newest revision the window no longer covers: watches from before it are 410.
    oldest: u64,
    /// The revision of the list the window started from: a watch from before it asks for history the
    /// cache never had, and is served by the store.
    started: u64,
    /// The window's current capacity.
    capacity: usize,
    /// Fan-out to client watches; replaced (closing every client watch) when the cache re-lists.
    events: broadcast::Sender<Arc<WatchEvent>>,
}

impl ResourceCache {
    fn start(inner: Arc<dyn Store>, resource: StorageResource) -> Arc<Self> {
        let cache = Arc::new(Self::empty());
        let stop = cache.stop.clone();
        let reflector = reflect(inner, resource, Arc::downgrade(&cache));
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = reflector => {}
            }
        });
        cache
    }

    /// A cache that holds nothing yet and is not ready.
    fn empty() -> Self {
        Self {
            state: RwLock::new(CacheState {
                objects: BTreeMap::new(),
                revision: 0,
                window: VecDeque::new(),
                oldest: 0,
                started: 0,
                capacity: LOWER_BOUND_CAPACITY,
                events: broadcast::channel(WATCHER_BUFFER).0,
            }),
            ready: watch::channel(false).0,
            revision: watch::channel(0).0,
            request_progress: Mutex::new(None),
            stop: tokio_util::sync::CancellationToken::new(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, CacheState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CacheState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the contents with a fresh list at `revision`, closing every client watch.
    fn replace(&self, items: Vec<Object>, revision: u64) {
        let mut state = self.write();
        state.objects = items
            .into_iter()
            .map(|object| {
                let key = object_key(&object);
                let listed = WatchEvent {
                    event_type: WatchEventType::Added,
                    object,
                    revision,
                    prev_object: None,
                };
                (key, Arc::new(CachedEvent::encode(&listed)))
            })
            .collect();
        state.revision = revision;
        state.window.clear();
        state.oldest = revision;
        state.started = revision;
        state.capacity = LOWER_BOUND_CAPACITY;
        state.events = broadcast::channel(WATCHER_BUFFER).0;
        drop(state);
        self.revision.send_replace(revision);
        self.ready.send_replace(true);
    }

    /// Applies one event of the store's watch (a bookmark only moves the revision on). `false`: a change
    /// older than the cache's revision, which a progress notification vouched was delivered — the
    /// store broke its promise and the cache must list again rather than lose the change.
    fn apply(&self, event: WatchEvent) -> bool {
        let revision = event.revision;
        let bookmark = event.event_type == WatchEventType::Bookmark;
        let mut state = self.write();
        if revision < state.revision {
            return bookmark;
        }
        if bookmark && revision == state.revision {
            return true;
        }
        state.revision = revision;
        if bookmark {
            // Progress, in order with the changes: client watches' bookmarks may carry it.
            let _ = state.events.send(Arc::new(event));
        } else {
            let key = object_key(&event.object);
            let cached = Arc::new(CachedEvent::encode(&event));
            match event.event_type {
                WatchEventType::Deleted => {
                    state.objects.remove(&key);
                }
                _ => {
                    state.objects.insert(key, cached.clone());
                }
            }
            let now = Instant::now();
            state.resize(now);
            if state.window.len() >= state.capacity
                && let Some((_, dropped)) = state.window.pop_front()
            {
                state.oldest = dropped.revision;
            }
            state.window.push_back((now, cached));
            // No receiver is fine: nobody watches.
            let _ = state.events.send(Arc::new(event));
        }
        drop(state);
        self.revision.send_replace(revision);
        true
    }

    /// Whether the running store watch offers progress notifications (the store offers only ones it
    /// can vouch for: see [`super::ProgressWatch::request_progress`]).
    fn progress_trusted(&self) -> bool {
        self.request_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Waits up to [`BLOCK_TIMEOUT`] until the cache is at `revision` or later, asking the store for
    /// progress notifications meanwhile.
    async fn wait_for_revision(&self, revision: u64) -> StoreResult<()> {
        let mut current = self.revision.subscribe();
        if *current.borrow() >= revision {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + BLOCK_TIMEOUT;
        loop {
            if let Some(request) = self
                .request_progress
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                let _ = request.send(());
            }
            let until = (tokio::time::Instant::now() + PROGRESS_INTERVAL).min(deadline);
            match tokio::time::timeout_at(until, current.wait_for(|r| *r >= revision)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(_)) => break,
                Err(_) if tokio::time::Instant::now() >= deadline => break,
                Err(_) => {}
            }
        }
        Err(StoreError::TooLargeResourceVersion {
            requested: revision,
            current: *self.revision.borrow(),
        })
    }

    /// A client watch of `namespace` (all when `None`) from after `from` (`None`: the cache's
    /// revision); `Ok(None)` when `from` is older than the cache itself (the store serves it).
    fn watch(&self, namespace: Option<&str>, from: Option<u64>) -> StoreResult<Option<WatchStream>> {
        let state = self.read();
        let from = from.unwrap_or(state.revision);
        if from < state.started {
            // The cache started (on first use) after `from`: the history is the store's. Upstream's
            // caches start with the server, so a client never asks them for an earlier revision.
            return Ok(None);
        }
        if from < state.oldest {
            return Err(StoreError::Expired {
                requested: from,
                oldest: state.oldest,
            });
        }
        let start = state.window.partition_point(|(_, e)| e.revision <= from);
        let backlog: Vec<Arc<CachedEvent>> = state.window.range(start..).map(|(_, e)| e.clone()).collect();
        let receiver = state.events.subscribe();
        drop(state);
        let namespace = namespace.map(str::to_owned);
        let live = futures_util::stream::unfold(receiver, |mut receiver| async move {
            match receiver.recv().await {
                Ok(event) => Some((event, receiver)),
                // Fallen behind (upstream closes a blocked watcher) or the cache re-listed: the
                // watch ends and the client watches again from its last revision.
                Err(_) => None,
            }
        });
        let events = futures_util::stream::iter(backlog)
            .map(|cached| Arc::new(cached.decode()))
            .chain(live)
            .filter(move |event| std::future::ready(event.revision > from))
            .map(move |event| {
                let wanted = event.event_type == WatchEventType::Bookmark
                    || namespace.as_deref().is_none_or(|ns| {
                        event
                            .object
                            .pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            == Some(ns)
                    });
                // A change of another namespace still moves this watch's revision on: it passes as a
                // bookmark, so the client's bookmarks carry the cache's progress, never more.
                Ok(if wanted {
                    Arc::unwrap_or_clone(event)
                } else {
                    WatchEvent::progress(event.revision)
                })
            });
        Ok(Some(events.boxed()))
    }

    /// A key-ordered range of the current objects (see [`Store::list_range`]).
    fn range(&self, namespace: Option<&str>, start: Option<&str>, limit: usize) -> RangePage {
        let state = self.read();
        let prefix = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
        let from = format!("{prefix}{}", start.unwrap_or_default());
        let mut items = Vec::new();
        let mut count = 0u64;
        for (key, latest) in state.objects.range(from..) {
            let Some(relative) = key.strip_prefix(prefix.as_str()) else {
                break;
            };
            count += 1;
            if limit == 0 || items.len() < limit {
                items.push((relative.to_owned(), latest.object()));
            }
        }
        RangePage {
            more: (items.len() as u64) < count,
            items,
            revision: state.revision,
            count,
        }
    }
}

impl CacheState {
    /// Upstream's `resizeCacheLocked`: a full window whose oldest event is fresh doubles (up to the
    /// upper bound); one whose last quarter is already stale halves (down to the lower bound).
    fn resize(&mut self, now: Instant) {
        if self.window.len() < self.capacity {
            return;
        }
        let stale = |at: Instant| now.saturating_duration_since(at) > EVENT_FRESH_DURATION;
        if let Some((at, _)) = self.window.front()
            && !stale(*at)
        {
            self.capacity = (self.capacity * 2).min(UPPER_BOUND_CAPACITY);
            return;
        }
        if let Some((at, _)) = self.window.get(self.window.len() - self.capacity / 4)
            && stale(*at)
        {
            let capacity = (self.capacity / 2).max(LOWER_BOUND_CAPACITY);
            while self.window.len() > capacity {
                if let Some((_, dropped)) = self.window.pop_front() {
                    self.oldest = dropped.revision;
                }
            }
            self.capacity = capacity;
        }
    }
}

/// One change as the cache keeps it (in the window and as a current object): its objects encoded as
/// compact JSON and decoded for each reader. A decoded tree of a 1 kB ConfigMap takes several times its
/// encoding (every key and string its own allocation); a cache holding a resource's objects and its
/// recent history keeps the encoding. Live watchers share one decoded event (the broadcast's).
struct CachedEvent {
    event_type: WatchEventType,
    revision: u64,
    object: Box<[u8]>,
    prev_object: Option<Box<[u8]>>,
}

impl CachedEvent {
    fn encode(event: &WatchEvent) -> Self {
        // Encoding a `Value` cannot fail (its map keys are strings).
        let encode = |object: &Object| serde_json::to_vec(object).unwrap_or_default().into_boxed_slice();
        Self {
            event_type: event.event_type,
            revision: event.revision,
            object: encode(&event.object),
            prev_object: event.prev_object.as_ref().map(encode),
        }
    }

    fn object(&self) -> Object {
        decode_cached(&self.object)
    }

    fn decode(&self) -> WatchEvent {
        WatchEvent {
            event_type: self.event_type,
            object: self.object(),
            revision: self.revision,
            prev_object: self.prev_object.as_deref().map(decode_cached),
        }
    }
}

/// What [`CachedEvent::encode`] wrote, read back (it always parses).
fn decode_cached(bytes: &[u8]) -> Object {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

/// The key of `object` within its resource, as the store's range reads order them.
fn object_key(object: &Object) -> String {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

/// The reflector of one resource: list, then watch from the list's revision, watching again from
/// the last revision seen when the watch fails, and listing again when that revision is compacted.
/// Ends when the cache is dropped.
async fn reflect(inner: Arc<dyn Store>, resource: StorageResource, cache: Weak<ResourceCache>) {
    let mut backoff = Duration::from_millis(50);
    let pause = |backoff: &mut Duration| {
        let wait = *backoff;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
        tokio::time::sleep(wait)
    };
    'list: loop {
        let (items, revision) = match inner.list(&resource, None).await {
            Ok(list) => list,
            Err(err) => {
                tracing::debug!(%resource, %err, "watch cache: list failed");
                pause(&mut backoff).await;
                if cache.strong_count() == 0 {
                    return;
                }
                continue;
            }
        };
        let Some(strong) = cache.upgrade() else {
            return;
        };
        strong.replace(items, revision);
        drop(strong);
        let mut from = revision;
        loop {
            let watch = inner.watch_progress(&resource, from).await;
            let Some(strong) = cache.upgrade() else {
                return;
            };
            let mut events = match watch {
                Ok(watch) => {
                    *strong.request_progress.lock().unwrap_or_else(|e| e.into_inner()) =
                        watch.request_progress;
                    watch.events
                }
                Err(StoreError::Expired { .. }) => {
                    strong.ready.send_replace(false);
                    continue 'list;
                }
                Err(err) => {
                    tracing::debug!(%resource, %err, "watch cache: watch failed");
                    drop(strong);
                    pause(&mut backoff).await;
                    continue;
                }
            };
            drop(strong);
            while let Some(event) = events.next().await {
                let Some(strong) = cache.upgrade() else {
                    return;
                };
                match event {
                    Ok(event) => {
                        backoff = Duration::from_millis(50);
                        from = from.max(event.revision);
                        if !strong.apply(event) {
                            tracing::warn!(%resource, "watch cache: a change arrived after a progress notification past it; listing again");
                            strong.ready.send_replace(false);
                            continue 'list;
                        }
                    }
                    Err(StoreError::Expired { .. }) => {
                        strong.ready.send_replace(false);
                        continue 'list;
                    }
                    Err(err) => {
                        tracing::debug!(%resource, %err, "watch cache: watch ended");
                        break;
                    }
                }
            }
            if let Some(strong) = cache.upgrade() {
                *strong.request_progress.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
            pause(&mut backoff).await;
        }
    }
}

impl Store for CachedStore {
    fn create<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        self.inner.create(resource, key, object)
    }

    fn get<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        self.inner.get(resource, key)
    }

    fn update<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
        expected_revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        self.inner.update(resource, key, object, expected_revision)
    }

    fn delete<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        preconditions: Option<Preconditions>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        self.inner.delete(resource, key, preconditions)
    }

    fn list<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        Box::pin(async move {
            match self.fresh_cache(resource).await? {
                Some(cache) => {
                    let page = cache.range(namespace, None, 0);
                    Ok((page.items.into_iter().map(|(_, o)| o).collect(), page.revision))
                }
                None => self.inner.list(resource, namespace).await,
            }
        })
    }

    fn list_at<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        revision: u64,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        self.inner.list_at(resource, namespace, revision)
    }

    fn list_range<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        start: Option<&'a str>,
        limit: usize,
        revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<RangePage>> {
        Box::pin(async move {
            let cache = match revision {
                None => self.fresh_cache(resource).await?,
                // A later page of a list read from the cache, still at the cache's revision: the
                // same snapshot. Any other revision is read from the store (upstream delegates
                // continued lists).
                Some(revision) => self
                    .cache(resource)
                    .filter(|c| *c.ready.borrow() && c.read().revision == revision),
            };
            if let Some(cache) = cache {
                let page = cache.range(namespace, start, limit);
                if revision.is_none_or(|r| r == page.revision) {
                    return Ok(page);
                }
            }
            self.inner
                .list_range(resource, namespace, start, limit, revision)
                .await
        })
    }

    fn list_range_any<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        start: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, StoreResult<RangePage>> {
        Box::pin(async move {
            // Upstream waits for the cache to be ready (or answers 429 while it initializes), not for
            // it to be fresh.
            match self.ready_cache(resource).await? {
                Some(cache) => Ok(cache.range(namespace, start, limit)),
                None => {
                    self.inner
                        .list_range(resource, namespace, start, limit, None)
                        .await
                }
            }
        })
    }

    fn reads_at_revision(&self) -> bool {
        self.inner.reads_at_revision()
    }

    fn watch<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        from: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<WatchStream>> {
        Box::pin(async move {
            if let Some(cache) = self.ready_cache(resource).await?
                && let Some(events) = cache.watch(namespace, from)?
            {
                return Ok(events);
            }
            self.inner.watch(resource, namespace, from).await
        })
    }

    fn current_revision(&self) -> BoxFuture<'_, StoreResult<u64>> {
        self.inner.current_revision()
    }

    fn put_internal<'a>(
        &'a self,
        key: &'a str,
        value: Value,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.inner.put_internal(key, value, ttl)
    }

    fn get_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        self.inner.get_internal(key)
    }

    fn list_internal<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<(String, Value)>>> {
        self.inner.list_internal(prefix)
    }

    fn delete_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        self.inner.delete_internal(key)
    }

    fn check_health(&self) -> BoxFuture<'_, StoreResult<()>> {
        self.inner.check_health()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn added(revision: u64) -> WatchEvent {
        WatchEvent {
            event_type: WatchEventType::Added,
            object: json!({"metadata": {"name": format!("o{revision}"), "namespace": "ns",
                "resourceVersion": revision.to_string()}}),
            revision,
            prev_object: None,
        }
    }

    async fn revisions(stream: WatchStream, count: usize) -> Vec<u64> {
        stream
            .take(count)
            .map(|e| e.expect("event").revision)
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_fresh_window_grows_and_a_stale_one_expires_old_watches() {
        let cache = ResourceCache::empty();
        cache.replace(Vec::new(), 10);
        for revision in 11..=160 {
            cache.apply(added(revision));
        }
        // Events younger than 75 s: the window doubled rather than dropping any.
        assert_eq!(cache.read().capacity, 200);
        let all = cache
            .watch(Some("ns"), Some(10))
            .expect("watch")
            .expect("from the cache");
        assert_eq!(revisions(all, 150).await, (11..=160).collect::<Vec<_>>());
        assert!(
            cache.watch(None, Some(9)).expect("watch").is_none(),
            "older than the cache: the store's"
        );
        assert_eq!(cache.range(Some("ns"), None, 0).count, 150);

        // A full window whose oldest events are stale (its newest are not) drops its oldest.
        {
            let mut state = cache.write();
            let old = Instant::now() - Duration::from_secs(100);
            state.capacity = 150;
            for (at, _) in state.window.iter_mut().take(10) {
                *at = old;
            }
        }
        cache.apply(added(161));
        assert_eq!(cache.read().oldest, 11);
        assert_eq!(
            cache.watch(None, Some(10)).err(),
            Some(StoreError::Expired {
                requested: 10,
                oldest: 11
            })
        );
        let rest = cache
            .watch(None, Some(11))
            .expect("watch")
            .expect("from the cache");
        assert_eq!(revisions(rest, 150).await, (12..=161).collect::<Vec<_>>());
    }

    /// Consistent reads from the cache (`ConsistentListFromCache`) in front of a store whose progress
    /// notifications are trusted (the in-memory store's; on etcd only 3.4.31+/3.5.13+, which this
    /// machine's Debian etcd is not): each change written to the store behind the cache's back is in
    /// the next consistent list, which the cache answers once a progress notification has brought it
    /// to the store's current revision.
    #[tokio::test]
    async fn consistent_lists_are_answered_from_the_cache_once_it_has_caught_up() {
        let inner = Arc::new(crate::store::MemoryStore::new());
        let cached = CachedStore::new(inner.clone(), WatchCacheSizes::default());
        let resource = StorageResource::new("", "configmaps");
        let (items, _) = cached.list(&resource, None).await.expect("the first list");
        assert!(items.is_empty());
        let cache = cached
            .ready_cache(&resource)
            .await
            .expect("ready")
            .expect("cached");
        tokio::time::timeout(Duration::from_secs(5), async {
            while !cache.progress_trusted() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the store's watch offers trusted progress notifications");
        for i in 0..20 {
            let name = format!("cm-{i:02}");
            let written = inner
                .create(
                    &resource,
                    &ObjectKey::namespaced("ns", &name),
                    json!({"metadata": {"name": name, "namespace": "ns"}}),
                )
                .await
                .expect("written behind the cache's back");
            let fresh = cached
                .fresh_cache(&resource)
                .await
                .expect("no store error")
                .expect("answered from the cache, not the store");
            let page = fresh.range(None, None, 0);
            assert_eq!(page.items.len(), i + 1, "the write is in the cache's list");
            assert!(page.revision >= revision_of(&written));
            let (items, revision) = cached.list(&resource, None).await.expect("a consistent list");
            assert_eq!(items.len(), i + 1);
            assert!(revision >= revision_of(&written));
        }
        // A write to another resource moves the store's revision on without a change the cache
        // sees: only a progress notification brings the cache there.
        let other = inner
            .create(
                &StorageResource::new("", "secrets"),
                &ObjectKey::namespaced("ns", "s"),
                json!({"metadata": {"name": "s", "namespace": "ns"}}),
            )
            .await
            .expect("written");
        let fresh = cached
            .fresh_cache(&resource)
            .await
            .expect("no store error")
            .expect("the cache caught up through a progress notification");
        assert!(fresh.read().revision >= revision_of(&other));
        // Without trusted progress (the store's watch ended, none running) the store answers.
        *cache.request_progress.lock().unwrap_or_else(|e| e.into_inner()) = None;
        assert!(
            cached
                .fresh_cache(&resource)
                .await
                .expect("no store error")
                .is_none()
        );
    }

    fn revision_of(object: &Value) -> u64 {
        object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .expect("resourceVersion")
    }

    #[test]
    fn a_change_behind_a_progress_notification_is_refused_not_dropped() {
        let cache = ResourceCache::empty();
        cache.replace(Vec::new(), 10);
        assert!(cache.apply(added(11)));
        let bookmark = WatchEvent {
            event_type: WatchEventType::Bookmark,
            object: Value::Null,
            revision: 20,
            prev_object: None,
        };
        assert!(cache.apply(bookmark.clone()), "progress moves the revision on");
        assert!(cache.apply(bookmark), "a repeated one is harmless");
        // etcd before 3.4.25 could send the notification ahead of this change (etcd-io/etcd#15220).
        assert!(!cache.apply(added(15)), "the reflector lists again");
        assert!(
            cache.apply(added(20)),
            "a change at the notified revision is still in order"
        );
    }

    #[test]
    fn parses_watch_cache_sizes_as_upstream() {
        let sizes = WatchCacheSizes::parse(&["pods#0", "jobs.batch#1000"]).unwrap();
        assert!(!sizes.enabled(&GroupResource::new("", "pods")));
        assert!(sizes.enabled(&GroupResource::new("batch", "jobs")));
        assert!(sizes.enabled(&GroupResource::new("", "secrets")));
        assert_eq!(
            WatchCacheSizes::parse(&["pods"]).unwrap_err(),
            "invalid value of watch cache size: pods"
        );
        assert_eq!(
            WatchCacheSizes::parse(&["pods#x"]).unwrap_err(),
            "invalid size of watch cache size: pods#x"
        );
        assert_eq!(
            WatchCacheSizes::parse(&["pods#-1"]).unwrap_err(),
            "watch cache size cannot be negative: pods#-1"
        );
    }
}
