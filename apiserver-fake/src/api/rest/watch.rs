//! `watch` (`?watch=1` and the `/watch/` path form): a chunked stream of newline-delimited JSON events
//! `{"type":"ADDED","object":{...}}`, each flushed as it happens.
//!
//! As kube-apiserver's watch cache:
//! * `resourceVersion` absent or `"0"`: synthetic `ADDED` events for the current objects first, then
//!   changes; `"N"`: changes after N; N older than the store's history → one `ERROR` event carrying the
//!   410 `Expired` Status (`too old resource version: N (M)`), then the stream ends.
//! * `sendInitialEvents=true` (watch-list): initial `ADDED` events, then a `BOOKMARK` annotated
//!   `k8s.io/initial-events-end: "true"`; with `resourceVersion=N` the initial state is at N or later
//!   (504 `Too large resource version` when the store does not reach N within 3 s), never a bare
//!   stream of changes a reflector would wait on for ever.
//! * Selectors filter events; an object that starts or stops matching arrives as `ADDED`/`DELETED`.
//! * `allowWatchBookmarks=true`: periodic `BOOKMARK` events whose object has only
//!   `metadata.resourceVersion` (plus `apiVersion`/`kind`), every `--watch-bookmark-interval`. Their
//!   revision never runs ahead of what the stream has delivered: a client resuming from a bookmark
//!   misses no change (on etcd, the watch cache's progress; without the cache, the last change seen).
//! * `timeoutSeconds`: the stream ends after it (default: a random 30–60 minutes, as upstream's
//!   `MinRequestTimeout` jitter).
//! * A watcher too slow for the store's buffer has its stream closed, as the cacher closes
//!   unresponsive watchers; clients re-watch from their last resourceVersion.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use http::{HeaderValue, StatusCode, header};
use rand::Rng;
use serde_json::{Value, json};
use tokio::time::{Instant, Interval, Sleep};

use super::RestRequest;
use super::chunked_list::RANGE;
use super::negotiation::{Encoding, OutputFormat, Transform};
use super::read::Selection;
use super::table::{IncludeObject, TableConvertor, partial_object_metadata, table_for_object};
use crate::api::status::Status;
use crate::store::{StoreError, WatchEvent, WatchEventType, WatchStream};

/// Everything needed to turn store events into wire events for one watcher.
struct Watcher {
    selection: Selection,
    api_version: String,
    kind: String,
    /// Custom resources: the storage version's schema whose defaults events get.
    storage_schema: Option<std::sync::Arc<Value>>,
    format: OutputFormat,
    include: IncludeObject,
    convertor: TableConvertor,
}

impl Watcher {
    fn encode(&self, event_type: WatchEventType, object: Value) -> Bytes {
        let object = match event_type {
            WatchEventType::Bookmark | WatchEventType::Error => object,
            _ => {
                let mut object = object;
                if let Some(schema) = &self.storage_schema {
                    super::structural::defaulting::apply(schema, &mut object);
                }
                let object = super::object::present(object, &self.api_version, &self.kind);
                match self.format.transform {
                    Transform::Table => table_for_object(
                        &object,
                        self.include,
                        &self.convertor,
                        time::OffsetDateTime::now_utc(),
                    ),
                    Transform::PartialObjectMetadata => partial_object_metadata(&object),
                    Transform::None => object,
                }
            }
        };
        let mut line = serde_json::to_vec(&json!({"type": event_type, "object": object})).unwrap_or_default();
        line.push(b'\n');
        line.into()
    }

    fn bookmark(&self, revision: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": metadata});
        self.encode(WatchEventType::Bookmark, object)
    }

    /// The wire event for a store event, after selector filtering (`None`: not for this watcher).
    fn translate(&self, event: WatchEvent) -> Option<Bytes> {
        let now = self.selection.matches(&event.object);
        let before = event
            .prev_object
            .as_ref()
            .is_some_and(|prev| self.selection.matches(prev));
        let event_type = match event.event_type {
            WatchEventType::Added if now => WatchEventType::Added,
            WatchEventType::Modified if now && before => WatchEventType::Modified,
            WatchEventType::Modified if now => WatchEventType::Added,
            WatchEventType::Modified if before => WatchEventType::Deleted,
            WatchEventType::Deleted if before || now => WatchEventType::Deleted,
            _ => return None,
        };
        Some(self.encode(event_type, event.object))
    }
}

struct State {
    watcher: Watcher,
    pending: VecDeque<Bytes>,
    events: Option<WatchStream>,
    bookmarks: Option<Interval>,
    deadline: Pin<Box<Sleep>>,
    store: std::sync::Arc<dyn crate::store::Store>,
    storage: crate::store::StorageResource,
    /// The newest revision the store's watch has delivered (changes and progress alike): a bookmark
    /// never carries more, or a client resuming from it would miss the changes still in flight.
    last_revision: u64,
}

impl State {
    /// Moves every event already delivered by the store into `pending`, without waiting.
    fn drain_ready(&mut self) {
        while let Some(events) = self.events.as_mut() {
            match events.next().now_or_never() {
                Some(Some(Ok(event))) => self.deliver(event),
                Some(Some(Err(_)) | None) => self.events = None,
                None => break,
            }
        }
    }

    /// Queues what a store event means to the client (nothing for progress, or for an object outside
    /// its selection) and notes how far the store's watch has come.
    fn deliver(&mut self, event: WatchEvent) {
        self.last_revision = self.last_revision.max(event.revision);
        if event.event_type == WatchEventType::Bookmark {
            return;
        }
        if let Some(line) = self.watcher.translate(event) {
            self.pending.push_back(line);
        }
    }

    /// The periodic BOOKMARK, after every change the store's watch has ready is queued. Its revision
    /// is one the store vouches every watch has been handed, else the last one this watch delivered.
    /// None when the watch ended meanwhile (fallen behind): resuming from a bookmark would skip what
    /// it lost.
    async fn periodic_bookmark(&mut self) {
        let vouched = self.store.bookmark_revision(&self.storage).await;
        self.drain_ready();
        if self.events.is_none() {
            return;
        }
        if let Some(revision) = vouched {
            self.last_revision = self.last_revision.max(revision);
        }
        let bookmark = self.watcher.bookmark(self.last_revision, false);
        self.pending.push_back(bookmark);
    }
}

fn watch_timeout(req: &RestRequest<'_>) -> Result<Duration, Status> {
    match super::list_options::int64(&req.query, "timeoutSeconds")? {
        Some(seconds) => Ok(Duration::from_secs(u64::try_from(seconds).unwrap_or(0))),
        None => Ok(Duration::from_secs(rand::rng().random_range(1800..3600))),
    }
}

/// Queues the encoded `ADDED` events a watch-list starts with and returns the revision they are the
/// state at: the current state, which for `resourceVersion=N` (`resourceVersionMatch=NotOlderThan`,
/// client-go's reflector re-listing from its last version) must be at N or later. The state is read
/// again until it is, for [`super::freshness::FRESHNESS_WAIT`].
///
/// A store that reads at a revision (etcd, behind the watch cache or not) is read in ranges of
/// [`RANGE`] keys at the first range's revision, as a full list is (`chunked_list`): only one range is
/// held as JSON trees at a time, so a watch-list of 10,000 objects costs about its encoded events, not
/// a tree per object until the last is encoded.
async fn initial_events(
    store: &dyn crate::store::Store,
    storage: &crate::store::StorageResource,
    namespace: Option<&str>,
    not_older_than: Option<u64>,
    watcher: &Watcher,
    pending: &mut VecDeque<Bytes>,
) -> Result<u64, StoreError> {
    let mut queue = |object: Value| {
        if watcher.selection.matches(&object) {
            pending.push_back(watcher.encode(WatchEventType::Added, object));
        }
    };
    let deadline = Instant::now() + super::freshness::FRESHNESS_WAIT;
    if !store.reads_at_revision() {
        let (items, revision) = loop {
            let (items, revision) = store.list(storage, namespace).await?;
            if fresh_enough(revision, not_older_than, deadline).await? {
                break (items, revision);
            }
        };
        items.into_iter().for_each(queue);
        return Ok(revision);
    }
    let mut page = loop {
        let page = store.list_range(storage, namespace, None, RANGE, None).await?;
        if fresh_enough(page.revision, not_older_than, deadline).await? {
            break page;
        }
    };
    let revision = page.revision;
    loop {
        let more = page.more && !page.items.is_empty();
        let next = page.items.last().map(|(key, _)| format!("{key}\u{0}"));
        page.items.into_iter().for_each(|(_, object)| queue(object));
        match (more, next) {
            (true, Some(start)) => {
                // Let other requests run between reads.
                tokio::task::yield_now().await;
                page = store
                    .list_range(storage, namespace, Some(&start), RANGE, Some(revision))
                    .await?;
            }
            _ => return Ok(revision),
        }
    }
}

/// Whether a state read at `revision` will do for a watch-list that must start at `not_older_than` or
/// later; when it will not, waits a little before the caller reads again, or fails with upstream's
/// `Too large resource version` once `deadline` has passed.
async fn fresh_enough(
    revision: u64,
    not_older_than: Option<u64>,
    deadline: Instant,
) -> Result<bool, StoreError> {
    match not_older_than {
        Some(requested) if revision < requested => {
            if Instant::now() >= deadline {
                return Err(StoreError::TooLargeResourceVersion {
                    requested,
                    current: revision,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(false)
        }
        _ => Ok(true),
    }
}

/// Serves a watch.
pub(crate) async fn watch(req: &RestRequest<'_>) -> Result<Response, Status> {
    if req.format.encoding != Encoding::Json {
        return Err(Status::not_acceptable(&["application/json"]));
    }
    let selection = Selection::from_request(req)?;
    let allow_bookmarks = req.query.flag("allowWatchBookmarks")?;
    let timeout = watch_timeout(req)?;
    super::list_options::validate(&req.query, true)?;
    let from = super::list_options::resource_version(&req.query, super::list_options::ReadPath::WatchCache)?;
    let send_initial = match req.query.get("sendInitialEvents") {
        Some(_) => req.query.flag("sendInitialEvents")?,
        None => from.is_none(),
    };
    let watcher = Watcher {
        selection,
        api_version: req.resource.api_version(),
        kind: req.resource.kind.clone(),
        storage_schema: req.resource.storage_schema.clone(),
        format: req.format,
        include: IncludeObject::parse(req.query.get("includeObject")),
        convertor: TableConvertor::for_resource(&req.resource, req.ctx.binary_version),
    };
    let store = req.ctx.store.clone();
    let storage = req.resource.storage();
    let namespace = req.namespace.as_deref();
    let mut pending = VecDeque::new();
    let (events, last_revision) = if send_initial {
        let revision =
            initial_events(store.as_ref(), &storage, namespace, from, &watcher, &mut pending).await?;
        if req.query.get("sendInitialEvents").is_some() && allow_bookmarks {
            pending.push_back(watcher.bookmark(revision, true));
        }
        (store.watch(&storage, namespace, Some(revision)).await, revision)
    } else {
        let start = match from {
            Some(rv) => rv,
            None => store.current_revision().await?,
        };
        (store.watch(&storage, namespace, Some(start)).await, start)
    };
    let events = match events {
        Ok(events) => Some(events),
        Err(err @ StoreError::Expired { .. }) => {
            // Upstream's cacher answers 200 and sends the 410 as an ERROR event.
            pending.push_back(watcher.encode(WatchEventType::Error, Status::from(err).to_value()));
            None
        }
        Err(err) => return Err(err.into()),
    };
    let ended = events.is_none();
    let bookmarks = allow_bookmarks.then(|| {
        let period = req.ctx.bookmark_interval.max(Duration::from_millis(1));
        tokio::time::interval_at(Instant::now() + period, period)
    });
    let state = State {
        watcher,
        pending,
        events,
        bookmarks: if ended { None } else { bookmarks },
        deadline: Box::pin(tokio::time::sleep(timeout)),
        store: store.clone(),
        storage: storage.clone(),
        last_revision,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(line) = state.pending.pop_front() {
                return Some((Ok::<Bytes, Infallible>(line), state));
            }
            let events = state.events.as_mut()?;
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(event)) => state.deliver(event),
                    // Lagged (Expired) or store gone: close like the cacher closes slow watchers.
                    Some(Err(_)) | None => return None,
                },
                _ = async {
                    match state.bookmarks.as_mut() {
                        Some(interval) => { interval.tick().await; }
                        None => std::future::pending::<()>().await,
                    }
                } => state.periodic_bookmark().await,
                () = state.deadline.as_mut() => return None,
            }
        }
    });
    let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(req.format.content_type()),
    );
    Ok(response)
}
