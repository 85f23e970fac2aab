//! The garbage collector (`garbage-collector-controller`, alias `garbagecollector`), as upstream's
//! `pkg/controller/garbagecollector`: an ownership [`graph`] built from `ownerReferences` by an informer
//! on every resource discovery advertises with `list`, `watch` and `delete` (Events excepted, as
//! upstream's default ignored resources), and two work queues:
//!
//! - `garbage_collector_attempt_to_delete`: a node whose owners may be gone. Its live state is read
//!   (a 404 or another UID: it is gone itself), then each owner reference is classified by a **live GET
//!   of the owner by name**: 404 or another UID is *dangling*, an owner being deleted with
//!   `foregroundDeletion` is *waiting*, anything else *solid* (upstream's `isDangling` and
//!   `classifyReferences`). An owner whose kind discovery does not resolve is neither: the node is
//!   retried with backoff, never judged. With a solid owner left, dangling and waiting references are
//!   removed (merge patch); with waiting owners and dependents of its own, it is deleted in the
//!   foreground; otherwise it is deleted with the policy its finalizers ask (`Background` by default),
//!   its UID as precondition. A node deleting its dependents (`foregroundDeletion`) loses that finalizer
//!   once no dependent blocks it (`blockOwnerDeletion: true`).
//! - `garbage_collector_attempt_to_orphan`: an owner being deleted with `orphan`: its dependents lose
//!   their reference to it, then it loses the finalizer.
//!
//! Owners confirmed absent are remembered (upstream's `absentOwnerCache`, an LRU of 500 entries): the
//! dependents of one deleted owner cost one live GET of it, not one each. A namespaced
//! dependent naming an owner observed in another namespace gets upstream's `OwnerRefInvalidNamespace`
//! warning Event, and, the owner being absent from its own namespace, is collected.
//!
//! Each decision is logged (target `controller_manager::controllers::garbage_collector`, `info` for
//! deletes, patches and finalizer removals, `debug` for the rest). Metrics: the work queues'
//! `workqueue_*` and upstream's `garbagecollector_controller_resources_sync_error_total`.

mod absent_owners;
pub mod graph;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kube::core::{ApiResource, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::absent_owners::AbsentOwnerCache;
use self::graph::{Change, FOREGROUND_FINALIZER, Graph, Identity, Node, ORPHAN_FINALIZER, OwnerRef};
use crate::discovery::{DiscoveredResource, DiscoverySnapshot};
use crate::queue::{Backoff, WorkQueue};
use crate::{ControllerContext, ControllerDescriptor, ControllerFuture};

/// Upstream's controller name (the Event source component too).
pub const NAME: &str = "garbage-collector-controller";

/// `--concurrent-gc-syncs`' default (upstream's 20): workers of each queue.
pub const CONCURRENT_GC_SYNCS: usize = 20;

/// Upstream's `absentOwnerCache` size.
const ABSENT_OWNER_CACHE_SIZE: usize = 500;

/// Resources the collector never watches (upstream's `DefaultIgnoredResources`).
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// The controller's descriptor for the manager.
pub fn descriptor() -> ControllerDescriptor {
    ControllerDescriptor {
        name: NAME,
        aliases: &["garbagecollector"],
        disabled_by_default: false,
        run,
    }
}

fn run(context: ControllerContext, cancel: CancellationToken) -> ControllerFuture {
    Box::pin(async move {
        let collector = GarbageCollector::new(context).map_err(|e| e.to_string())?;
        collector.run(cancel).await;
        Ok(())
    })
}

/// Why one attempt failed (the item is retried with backoff).
#[derive(Debug, thiserror::Error)]
enum SyncError {
    /// Discovery does not resolve the kind (yet): never taken for absence.
    #[error("unable to get REST mapping for {0}")]
    RestMapping(String),
    /// A cluster-scoped object names a namespaced owner: not retried.
    #[error("cluster-scoped objects cannot refer to namespaced owners")]
    NamespacedOwnerOfClusterScopedObject,
    /// A request failed.
    #[error("{0}")]
    Api(String),
}

impl From<kube::Error> for SyncError {
    fn from(err: kube::Error) -> Self {
        Self::Api(crate::discovery::error_message(&err))
    }
}

/// What an attempt did.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Nothing (more) to do for now.
    Done,
    /// The item is gone: a virtual delete event went to the graph.
    VirtualDelete,
}

/// The garbage collector: graph, queues, informers.
#[derive(Clone)]
pub struct GarbageCollector {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    discovery: crate::DiscoveryCache,
    graph: Mutex<Graph>,
    absent: Mutex<AbsentOwnerCache>,
    attempt_to_delete: WorkQueue<String>,
    attempt_to_orphan: WorkQueue<String>,
    changes: mpsc::UnboundedSender<Change>,
    changes_rx: Mutex<Option<mpsc::UnboundedReceiver<Change>>>,
    resources_sync_error: prometheus::IntCounter,
    workers: usize,
}

impl std::fmt::Debug for GarbageCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GarbageCollector").finish_non_exhaustive()
    }
}

/// The coordinates an absent-owner entry is kept by: the namespace only for namespaced owners.
fn absent_key(reference: &OwnerRef, namespace: &str) -> Identity {
    reference.identity(namespace)
}

impl GarbageCollector {
    /// A collector using the manager's client, discovery and metrics.
    pub fn new(context: ControllerContext) -> Result<Self, prometheus::Error> {
        let resources_sync_error = prometheus::IntCounter::new(
            "garbagecollector_controller_resources_sync_error_total",
            "Number of garbage collector resources sync errors",
        )?;
        context
            .options
            .metrics
            .register(Box::new(resources_sync_error.clone()))?;
        let metrics = Some(context.queue_metrics.clone());
        let (changes, changes_rx) = mpsc::unbounded_channel();
        Ok(Self {
            inner: Arc::new(Inner {
                client: context.client,
                discovery: context.discovery,
                graph: Mutex::new(Graph::default()),
                absent: Mutex::new(AbsentOwnerCache::new(ABSENT_OWNER_CACHE_SIZE)),
                attempt_to_delete: WorkQueue::new(
                    "garbage_collector_attempt_to_delete",
                    Backoff::default(),
                    metrics.clone(),
                ),
                attempt_to_orphan: WorkQueue::new(
                    "garbage_collector_attempt_to_orphan",
                    Backoff::default(),
                    metrics,
                ),
                changes,
                changes_rx: Mutex::new(Some(changes_rx)),
                resources_sync_error,
                workers: context.options.concurrent_gc_syncs,
            }),
        })
    }

    /// Runs informers, the graph builder and the workers until `cancel` fires.
    pub async fn run(self, cancel: CancellationToken) {
        let Some(changes) = self.inner.changes_rx.lock().ok().and_then(|mut rx| rx.take()) else {
            return;
        };
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(self.clone().build_graph(changes, cancel.clone()));
        tasks.spawn(self.clone().keep_informers(cancel.clone()));
        for _ in 0..self.inner.workers {
            tasks.spawn(self.clone().delete_worker());
            tasks.spawn(self.clone().orphan_worker());
        }
        cancel.cancelled().await;
        self.inner.attempt_to_delete.shut_down();
        self.inner.attempt_to_orphan.shut_down();
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }

    /// Upstream's `processGraphChanges`: applies each change, queues the work it makes.
    async fn build_graph(self, mut changes: mpsc::UnboundedReceiver<Change>, cancel: CancellationToken) {
        loop {
            let change = tokio::select! {
                () = cancel.cancelled() => return,
                change = changes.recv() => match change {
                    Some(change) => change,
                    None => return,
                },
            };
            let work = match self.inner.graph.lock() {
                Ok(mut graph) => graph.apply(change),
                Err(_) => return,
            };
            if let Ok(mut absent) = self.inner.absent.lock() {
                for identity in work.absent {
                    absent.add(identity);
                }
            }
            for uid in work.attempt_to_delete {
                self.inner.attempt_to_delete.add(uid);
            }
            for uid in work.attempt_to_orphan {
                self.inner.attempt_to_orphan.add(uid);
            }
            for (dependent, owner) in work.invalid_namespace {
                tracing::info!(item = %dependent, owner = %owner, "item references an owner but does not match namespaces");
                let this = self.clone();
                tokio::spawn(async move { this.report_invalid_namespace(&dependent, &owner).await });
            }
        }
    }

    /// Keeps one informer per deletable resource, following discovery (upstream's `resyncMonitors`).
    async fn keep_informers(self, cancel: CancellationToken) {
        let mut snapshots = self.inner.discovery.subscribe();
        let mut running: HashMap<(String, String, String), CancellationToken> = HashMap::new();
        loop {
            let snapshot = snapshots.borrow_and_update().clone();
            if let Some(failure) = snapshot.failure() {
                tracing::info!(error = %failure, "failed to discover some groups");
            }
            let wanted = deletable(&snapshot);
            if wanted.is_empty() {
                self.inner.resources_sync_error.inc();
            }
            let keys: HashSet<(String, String, String)> = wanted.iter().map(resource_key).collect();
            running.retain(|key, token| {
                // Partial discovery keeps the informers of the groups that failed (upstream does too).
                let failed = snapshot.failed.contains_key(&group_version(&key.0, &key.1));
                let keep = keys.contains(key) || failed;
                if !keep {
                    tracing::info!(resource = ?key, "stopping informer: no longer advertised");
                    token.cancel();
                }
                keep
            });
            for resource in wanted {
                let key = resource_key(&resource);
                if running.contains_key(&key) {
                    continue;
                }
                tracing::debug!(resource = %resource.gvr_string(), "starting informer");
                let token = cancel.child_token();
                running.insert(key, token.clone());
                tokio::spawn(self.clone().inform(resource, token));
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = snapshots.changed() => if changed.is_err() { return },
            }
        }
    }

    /// A list+watch of one resource feeding the graph; a relist that no longer shows an object is its
    /// delete (client-go's `DeltaFIFO.Replace`).
    async fn inform(self, resource: DiscoveredResource, cancel: CancellationToken) {
        // Metadata only, as upstream's metadata informers: the graph needs nothing else, and neither the
        // server nor this process encodes or decodes the objects' bodies.
        let api: Api<PartialObjectMeta<DynamicObject>> =
            Api::all_with(self.inner.client.clone(), &resource.api_resource);
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut known: HashMap<String, Identity> = HashMap::new();
        let mut relisted: Option<HashSet<String>> = None;
        loop {
            let event = tokio::select! {
                () = cancel.cancelled() => return,
                event = stream.next() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            let change = match event {
                Ok(watcher::Event::Init) => {
                    relisted = Some(HashSet::new());
                    None
                }
                Ok(watcher::Event::InitApply(object)) | Ok(watcher::Event::Apply(object)) => {
                    let value = serde_json::to_value(&object).unwrap_or(Value::Null);
                    let identity = identity_of(&resource.api_resource, &value);
                    if let Some(seen) = relisted.as_mut() {
                        seen.insert(identity.uid.clone());
                    }
                    known.insert(identity.uid.clone(), identity.clone());
                    Some(Change::Upsert(identity, value))
                }
                Ok(watcher::Event::Delete(object)) => {
                    let value = serde_json::to_value(&object).unwrap_or(Value::Null);
                    let identity = identity_of(&resource.api_resource, &value);
                    known.remove(&identity.uid);
                    crate::sparse_maps::release_unused_capacity(&mut known);
                    Some(Change::Delete(identity))
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(seen) = relisted.take() {
                        let gone: Vec<String> =
                            known.keys().filter(|uid| !seen.contains(*uid)).cloned().collect();
                        for uid in gone {
                            if let Some(identity) = known.remove(&uid) {
                                let _ = self.inner.changes.send(Change::Delete(identity));
                            }
                        }
                        crate::sparse_maps::release_unused_capacity(&mut known);
                    }
                    None
                }
                Err(err) => {
                    tracing::debug!(resource = %resource.gvr_string(), error = %err, "watch failed; retrying");
                    None
                }
            };
            if let Some(change) = change
                && self.inner.changes.send(change).is_err()
            {
                return;
            }
        }
    }

    async fn delete_worker(self) {
        let queue = &self.inner.attempt_to_delete;
        while let Some(uid) = queue.get().await {
            let node = self.node(&uid);
            match node {
                None => queue.forget(&uid),
                Some(node) => match self.attempt_to_delete_item(&node).await {
                    Ok(Outcome::VirtualDelete) => queue.forget(&uid),
                    Ok(Outcome::Done) if node.observed => queue.forget(&uid),
                    Ok(Outcome::Done) => {
                        // A virtual node that exists: wait until an informer shows it.
                        tracing::debug!(item = %node.identity, "item hasn't been observed via informer yet");
                        queue.add_rate_limited(uid.clone());
                    }
                    Err(SyncError::NamespacedOwnerOfClusterScopedObject) => queue.forget(&uid),
                    Err(err) => {
                        tracing::debug!(item = %node.identity, error = %err, "error syncing item");
                        queue.add_rate_limited(uid.clone());
                    }
                },
            }
            queue.done(&uid);
        }
    }

    async fn orphan_worker(self) {
        let queue = &self.inner.attempt_to_orphan;
        while let Some(uid) = queue.get().await {
            match self.node(&uid) {
                None => queue.forget(&uid),
                Some(owner) => match self.orphan(&owner).await {
                    Ok(()) => queue.forget(&uid),
                    Err(err) => {
                        tracing::info!(owner = %owner.identity, error = %err, "orphaning dependents failed");
                        queue.add_rate_limited(uid.clone());
                    }
                },
            }
            queue.done(&uid);
        }
    }

    fn node(&self, uid: &str) -> Option<Node> {
        self.inner.graph.lock().ok()?.node(uid).cloned()
    }

    /// The resource of `api_version`/`kind` in current discovery (upstream's RESTMapper: that exact
    /// version).
    fn resolve(&self, api_version: &str, kind: &str) -> Result<DiscoveredResource, SyncError> {
        let snapshot = self.inner.discovery.current();
        resolve_in(&snapshot, api_version, kind)
            .cloned()
            .ok_or_else(|| SyncError::RestMapping(format!("{api_version}, Kind={kind}")))
    }

    /// The metadata-only client of `resource` (upstream's `metadataClient`: GETs, patches and deletes
    /// read and answer `PartialObjectMetadata`).
    fn api(&self, resource: &DiscoveredResource, namespace: &str) -> Api<PartialObjectMeta<DynamicObject>> {
        let client = self.inner.client.clone();
        if resource.namespaced {
            Api::namespaced_with(client, namespace, &resource.api_resource)
        } else {
            Api::all_with(client, &resource.api_resource)
        }
    }

    /// A live GET of `identity` by name: `None` for a 404.
    async fn get(&self, identity: &Identity) -> Result<Option<Value>, SyncError> {
        let resource = self.resolve(&identity.api_version, &identity.kind)?;
        match self
            .api(&resource, &identity.namespace)
            .get_opt(&identity.name)
            .await?
        {
            Some(object) => Ok(Some(serde_json::to_value(&object).unwrap_or(Value::Null))),
            None => Ok(None),
        }
    }

    /// Upstream's `attemptToDeleteItem`.
    async fn attempt_to_delete_item(&self, item: &Node) -> Result<Outcome, SyncError> {
        if item.being_deleted && !item.deleting_dependents {
            tracing::debug!(item = %item.identity, "processing item returned at once, because its DeletionTimestamp is non-nil");
            return Ok(Outcome::Done);
        }
        let latest = match self.get(&item.identity).await? {
            Some(latest) if uid_of(&latest) == item.identity.uid => latest,
            _ => {
                tracing::debug!(item = %item.identity, "item not found (or another UID), generating a virtual delete event");
                let _ = self
                    .inner
                    .changes
                    .send(Change::VirtualDelete(item.identity.clone()));
                return Ok(Outcome::VirtualDelete);
            }
        };
        if item.deleting_dependents {
            return self.process_deleting_dependents(item).await;
        }
        let references = OwnerRef::of(&latest);
        if references.is_empty() {
            tracing::debug!(item = %item.identity, "item doesn't have an owner, continue on next item");
            return Ok(Outcome::Done);
        }
        let (solid, dangling, waiting) = self.classify(item, &references).await?;
        tracing::debug!(item = %item.identity, solid = solid.len(), dangling = dangling.len(), waiting = waiting.len(), "classify item's references");
        if !solid.is_empty() {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(Outcome::Done);
            }
            let remove: Vec<&str> = dangling.iter().chain(&waiting).map(|r| r.uid.as_str()).collect();
            tracing::info!(item = %item.identity, removed = ?remove, "item has at least one existing owner: removing its dangling and waiting references");
            self.remove_owner_references(&item.identity, &remove).await?;
            return Ok(Outcome::Done);
        }
        let has_dependents = self
            .inner
            .graph
            .lock()
            .map(|g| !g.dependents(&item.identity.uid).is_empty())
            .unwrap_or(false);
        if !waiting.is_empty() && has_dependents {
            let dependent_deleting = self
                .inner
                .graph
                .lock()
                .map(|g| {
                    g.dependents(&item.identity.uid)
                        .iter()
                        .any(|d| d.deleting_dependents)
                })
                .unwrap_or(false);
            if dependent_deleting {
                tracing::info!(item = %item.identity, "some of its owners and its dependent have foregroundDeletion: unblocking its owner references to prevent a cycle");
                self.unblock_owner_references(&item.identity, &latest).await?;
            }
            tracing::info!(item = %item.identity, "at least one owner of item has foregroundDeletion, and the item itself has dependents: deleting it in the foreground");
            self.delete(&item.identity, PropagationPolicy::Foreground).await?;
            return Ok(Outcome::Done);
        }
        let finalizers = finalizers_of(&latest);
        let policy = if finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
            PropagationPolicy::Orphan
        } else if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        tracing::info!(item = %item.identity, propagation_policy = ?policy, dangling = ?dangling.iter().map(|r| &r.uid).collect::<Vec<_>>(), "deleting item: none of its owners exists");
        self.delete(&item.identity, policy).await?;
        Ok(Outcome::Done)
    }

    /// Upstream's `classifyReferences`: (solid, dangling, waiting for dependents' deletion).
    async fn classify(
        &self,
        item: &Node,
        references: &[OwnerRef],
    ) -> Result<(Vec<OwnerRef>, Vec<OwnerRef>, Vec<OwnerRef>), SyncError> {
        let (mut solid, mut dangling, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
        for reference in references {
            match self.is_dangling(reference, item).await? {
                None => dangling.push(reference.clone()),
                Some(owner) => {
                    let deleting = owner.pointer("/metadata/deletionTimestamp").is_some();
                    if deleting && finalizers_of(&owner).iter().any(|f| f == FOREGROUND_FINALIZER) {
                        waiting.push(reference.clone());
                    } else {
                        solid.push(reference.clone());
                    }
                }
            }
        }
        Ok((solid, dangling, waiting))
    }

    /// Upstream's `isDangling`: `None` when the owner is absent (the absent-owner cache, or a live GET
    /// by name answering 404 or another UID), else its live state. An unresolvable kind is an error.
    async fn is_dangling(&self, reference: &OwnerRef, item: &Node) -> Result<Option<Value>, SyncError> {
        let cluster_key = absent_key(reference, "");
        let namespaced_key = absent_key(reference, &item.identity.namespace);
        if let Ok(mut absent) = self.inner.absent.lock()
            && (absent.has(&cluster_key) || absent.has(&namespaced_key))
        {
            tracing::debug!(item = %item.identity, owner = %reference.uid, "according to the absentOwnerCache, item's owner does not exist");
            return Ok(None);
        }
        let resource = self.resolve(&reference.api_version, &reference.kind)?;
        if item.identity.namespace.is_empty() && resource.namespaced {
            tracing::info!(item = %item.identity, owner = %reference.uid, "item is cluster-scoped, but refers to a namespaced owner");
            return Err(SyncError::NamespacedOwnerOfClusterScopedObject);
        }
        let key = if resource.namespaced {
            namespaced_key
        } else {
            cluster_key
        };
        let namespace = if resource.namespaced {
            item.identity.namespace.as_str()
        } else {
            ""
        };
        match self.api(&resource, namespace).get_opt(&reference.name).await? {
            None => {
                tracing::info!(item = %item.identity, owner = %key, "item's owner is not found (live GET answered 404)");
                if let Ok(mut absent) = self.inner.absent.lock() {
                    absent.add(key);
                }
                Ok(None)
            }
            Some(owner) => {
                let owner = serde_json::to_value(&owner).unwrap_or(Value::Null);
                if uid_of(&owner) != reference.uid {
                    tracing::info!(item = %item.identity, owner = %key, "item's owner is not found, UID mismatch");
                    if let Ok(mut absent) = self.inner.absent.lock() {
                        absent.add(key);
                    }
                    return Ok(None);
                }
                Ok(Some(owner))
            }
        }
    }

    /// Upstream's `processDeletingDependentsItem`: without blocking dependents, the owner loses
    /// `foregroundDeletion`; otherwise those are checked.
    async fn process_deleting_dependents(&self, item: &Node) -> Result<Outcome, SyncError> {
        let blocking: Vec<(String, bool)> = self
            .inner
            .graph
            .lock()
            .map(|g| {
                g.blocking_dependents(&item.identity.uid)
                    .iter()
                    .map(|d| (d.identity.uid.clone(), d.deleting_dependents))
                    .collect()
            })
            .unwrap_or_default();
        if blocking.is_empty() {
            tracing::info!(item = %item.identity, "no dependent blocks it: removing the foregroundDeletion finalizer");
            self.remove_finalizer(&item.identity, FOREGROUND_FINALIZER)
                .await?;
            return Ok(Outcome::Done);
        }
        tracing::debug!(item = %item.identity, blocking = blocking.len(), "waiting for blocking dependents");
        for (uid, deleting) in blocking {
            if !deleting {
                self.inner.attempt_to_delete.add(uid);
            }
        }
        Ok(Outcome::Done)
    }

    /// Upstream's `attemptToOrphanWorker`: every dependent loses its reference to `owner`, then the
    /// owner loses `orphan`.
    async fn orphan(&self, owner: &Node) -> Result<(), SyncError> {
        let dependents: Vec<Identity> = self
            .inner
            .graph
            .lock()
            .map(|g| {
                g.dependents(&owner.identity.uid)
                    .iter()
                    .map(|d| d.identity.clone())
                    .collect()
            })
            .unwrap_or_default();
        let uid = owner.identity.uid.as_str();
        let results = futures_util::future::join_all(
            dependents
                .iter()
                .map(|dependent| self.remove_owner_references(dependent, std::slice::from_ref(&uid))),
        )
        .await;
        let failures: Vec<String> = results
            .into_iter()
            .filter_map(|r| r.err())
            .map(|e| e.to_string())
            .collect();
        if !failures.is_empty() {
            return Err(SyncError::Api(format!(
                "failed to orphan dependents of owner {}, got errors: [{}]",
                owner.identity,
                failures.join(", ")
            )));
        }
        tracing::info!(owner = %owner.identity, dependents = dependents.len(), "orphaned dependents: removing the orphan finalizer");
        self.remove_finalizer(&owner.identity, ORPHAN_FINALIZER).await
    }

    /// DELETE with `policy` and the item's UID as precondition. Already gone (404) or replaced (409 on
    /// the precondition) is done: the informers will show it.
    async fn delete(&self, identity: &Identity, policy: PropagationPolicy) -> Result<(), SyncError> {
        let resource = self.resolve(&identity.api_version, &identity.kind)?;
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(Preconditions {
                uid: Some(identity.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .api(&resource, &identity.namespace)
            .delete(&identity.name, &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() || status.is_conflict() => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Removes the owner references of `uids` from `identity` (upstream's JSON merge patch with the
    /// read `resourceVersion`, retried on conflict). A dependent already gone is done.
    async fn remove_owner_references(&self, identity: &Identity, uids: &[&str]) -> Result<(), SyncError> {
        self.patch_latest(identity, |latest| {
            let references = latest
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)?;
            let kept: Vec<Value> = references
                .iter()
                .filter(|r| !uids.contains(&r.get("uid").and_then(Value::as_str).unwrap_or_default()))
                .cloned()
                .collect();
            (kept.len() != references.len()).then(|| {
                let kept = if kept.is_empty() {
                    Value::Null
                } else {
                    Value::Array(kept)
                };
                json!({"metadata": {"ownerReferences": kept}})
            })
        })
        .await
    }

    /// Sets `blockOwnerDeletion: false` on every owner reference of `identity`.
    async fn unblock_owner_references(&self, identity: &Identity, _latest: &Value) -> Result<(), SyncError> {
        self.patch_latest(identity, |latest| {
            let references = latest
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)?;
            if !references
                .iter()
                .any(|r| r.get("blockOwnerDeletion") == Some(&json!(true)))
            {
                return None;
            }
            let unblocked: Vec<Value> = references
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    if r.get("blockOwnerDeletion") == Some(&json!(true)) {
                        r["blockOwnerDeletion"] = json!(false);
                    }
                    r
                })
                .collect();
            Some(json!({"metadata": {"ownerReferences": unblocked}}))
        })
        .await
    }

    /// Upstream's `removeFinalizer`.
    async fn remove_finalizer(&self, identity: &Identity, finalizer: &str) -> Result<(), SyncError> {
        self.patch_latest(identity, |latest| {
            let finalizers = finalizers_of(latest);
            if !finalizers.iter().any(|f| f == finalizer) {
                return None;
            }
            let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
            let kept = if kept.is_empty() { Value::Null } else { json!(kept) };
            Some(json!({"metadata": {"finalizers": kept}}))
        })
        .await
    }

    /// GETs `identity`, builds a merge patch from it (`None`: nothing to change), sends it with the read
    /// `resourceVersion` as precondition; retried on conflict (client-go's `RetryOnConflict`, 5 steps).
    async fn patch_latest(
        &self,
        identity: &Identity,
        build: impl Fn(&Value) -> Option<Value>,
    ) -> Result<(), SyncError> {
        let resource = self.resolve(&identity.api_version, &identity.kind)?;
        let api = self.api(&resource, &identity.namespace);
        for attempt in 0..PATCH_ATTEMPTS {
            let Some(latest) = api.get_opt(&identity.name).await? else {
                return Ok(());
            };
            let latest = serde_json::to_value(&latest).unwrap_or(Value::Null);
            if uid_of(&latest) != identity.uid {
                return Ok(());
            }
            let Some(mut patch) = build(&latest) else {
                return Ok(());
            };
            patch["metadata"]["resourceVersion"] = latest
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            match api
                .patch(&identity.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(item = %identity, patch = %patch, "patched");
                    return Ok(());
                }
                Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(()),
                Err(kube::Error::Api(status)) if status.is_conflict() && attempt + 1 < PATCH_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(SyncError::Api(format!(
            "updateMaxRetries({PATCH_ATTEMPTS}) has reached. The update will be retried at a later time"
        )))
    }

    /// Upstream's `reportInvalidNamespaceOwnerRef`: a v1 Warning Event on the dependent.
    async fn report_invalid_namespace(&self, dependent: &Identity, owner: &Identity) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let stamp = now
            .round(k8s_openapi::jiff::Unit::Second)
            .unwrap_or(now)
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let namespace = if dependent.namespace.is_empty() {
            "default"
        } else {
            dependent.namespace.as_str()
        };
        let nanos = now.as_nanosecond();
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{}.{:x}", dependent.name, nanos), "namespace": namespace},
            "involvedObject": {
                "kind": dependent.kind, "apiVersion": dependent.api_version, "namespace": dependent.namespace,
                "name": dependent.name, "uid": dependent.uid,
            },
            "reason": "OwnerRefInvalidNamespace",
            "message": format!("ownerRef {owner} does not exist in namespace {:?}", dependent.namespace),
            "source": {"component": NAME},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": "Warning",
            "reportingComponent": "", "reportingInstance": "",
        });
        let events = ApiResource {
            group: String::new(),
            version: "v1".to_owned(),
            api_version: "v1".to_owned(),
            kind: "Event".to_owned(),
            plural: "events".to_owned(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.inner.client.clone(), namespace, &events);
        let Ok(event) = serde_json::from_value::<DynamicObject>(event) else {
            return;
        };
        if let Err(err) = api.create(&PostParams::default(), &event).await {
            tracing::info!(error = %err, "could not record the OwnerRefInvalidNamespace event");
        }
    }
}

/// client-go's `RetryOnConflict` steps.
const PATCH_ATTEMPTS: u32 = 5;

/// What the collector watches: the preferred version of every resource with `list`, `watch` and
/// `delete`, Events excepted (upstream's `GetDeletableResources` minus ignored resources).
fn deletable(snapshot: &DiscoverySnapshot) -> Vec<DiscoveredResource> {
    snapshot
        .preferred_with_verbs(&["delete", "list", "watch"])
        .filter(|r| {
            !IGNORED
                .iter()
                .any(|(g, p)| r.api_resource.group == *g && r.api_resource.plural == *p)
        })
        .cloned()
        .collect()
}

/// The resource of `api_version`/`kind` in `snapshot`, that exact version.
fn resolve_in<'a>(
    snapshot: &'a DiscoverySnapshot,
    api_version: &str,
    kind: &str,
) -> Option<&'a DiscoveredResource> {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    snapshot.resources.iter().find(|r| {
        r.api_resource.group == group && r.api_resource.version == version && r.api_resource.kind == kind
    })
}

fn resource_key(resource: &DiscoveredResource) -> (String, String, String) {
    (
        resource.api_resource.group.clone(),
        resource.api_resource.version.clone(),
        resource.api_resource.plural.clone(),
    )
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// The identity of an object an informer of `resource` delivered (list items carry no type).
fn identity_of(resource: &ApiResource, object: &Value) -> Identity {
    let meta = |f: &str| {
        object
            .pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Identity {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        namespace: meta("namespace"),
        name: meta("name"),
        uid: meta("uid"),
    }
}

fn uid_of(object: &Value) -> &str {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn finalizers_of(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}
