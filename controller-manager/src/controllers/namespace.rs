//! The namespace controller (`pkg/controller/namespace`): empties a terminating namespace through the
//! API and then removes its `kubernetes` finalizer, which lets the API server delete it.
//!
//! For each namespace with a `deletionTimestamp` (seen by a list+watch informer, handled
//! [`NAMESPACE_DELETION_GRACE_PERIOD`] later as upstream) a worker, as upstream's
//! `namespacedResourcesDeleter.Delete`:
//!
//! 1. reads the namespace live (gone, or no longer deleting: done) and sets `status.phase:
//!    Terminating` if it is not yet;
//! 2. stops if `spec.finalizers` is already empty;
//! 3. discovers afresh and, for every namespaced resource of a preferred version that supports
//!    `delete`, deletes the collection in the namespace (`propagationPolicy: Background`), or, without
//!    `deletecollection`, lists and deletes each object; then lists again to see what remains;
//! 4. writes the status conditions upstream's `namespaceConditionUpdater` writes
//!    (`NamespaceDeletionDiscoveryFailure`, `NamespaceDeletionGroupVersionParsingFailure`,
//!    `NamespaceDeletionContentFailure`, `NamespaceContentRemaining`, `NamespaceFinalizersRemaining`,
//!    with upstream's reasons and messages);
//! 5. only if nothing failed and nothing remains, PUTs `namespaces/NAME/finalize` without
//!    `kubernetes`.
//!
//! A failure anywhere (a group whose discovery failed, a list or delete answered 503 by a proxy that
//! could not reach the peer serving it) leaves the finalizer in place and retries with backoff (5 ms
//! doubling to 60 s); objects left with finalizers of their own wait `estimate / 2 + 1` s (the
//! estimate is 15 s per upstream's `finalizerEstimateSeconds`). Finalizing a namespace whose content
//! could not all be seen is the harm this avoids: its objects would stay in the store and come back
//! when the namespace is re-created.
//!
//! Not modelled: the graceful-termination estimate of pods (the fake deletes pods at once), the
//! `deleteNamespaceWhenDone` mode, and the operation cache beyond what discovery's verbs say.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::discovery::{DiscoveredResource, error_message};
use crate::queue::{Backoff, WorkQueue};
use crate::{ControllerContext, ControllerDescriptor, ControllerFuture};

/// Upstream's canonical name.
pub const NAME: &str = "namespace-controller";
/// The finalizer this controller owns (`FinalizerKubernetes`).
pub const FINALIZER: &str = "kubernetes";
/// Upstream's default wait between seeing a namespace's deletion and emptying it; the manager's
/// `namespace_deletion_grace_period` option sets it.
pub const NAMESPACE_DELETION_GRACE_PERIOD: Duration = Duration::from_secs(5);
/// Upstream's `finalizerEstimateSeconds`: how long objects with finalizers are expected to take.
const FINALIZER_ESTIMATE_SECONDS: u64 = 15;

/// The condition types the controller maintains, in upstream's order, with their reason and message
/// when all is well.
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// The controller's descriptor (alias `namespace`, on by default).
pub fn descriptor() -> ControllerDescriptor {
    ControllerDescriptor {
        name: NAME,
        aliases: &["namespace"],
        disabled_by_default: false,
        run,
    }
}

fn run(context: ControllerContext, cancel: CancellationToken) -> ControllerFuture {
    Box::pin(async move {
        let queue = WorkQueue::new(
            "namespace",
            Backoff {
                base: Duration::from_millis(5),
                max: Duration::from_secs(60),
            },
            Some(context.queue_metrics.clone()),
        );
        let deleter = Arc::new(NamespaceDeleter {
            namespaces: Api::all(context.client.clone()),
            context: context.clone(),
        });
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..context.options.concurrent_namespace_syncs.max(1) {
            let queue = queue.clone();
            let deleter = deleter.clone();
            workers.spawn(async move {
                while let Some(name) = queue.get().await {
                    deleter.work(&queue, &name).await;
                    queue.done(&name);
                }
            });
        }
        let grace = context.options.namespace_deletion_grace_period;
        let informer = watcher(
            Api::<Namespace>::all(context.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff();
        tokio::pin!(informer);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                event = informer.next() => match event {
                    Some(Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns))) => {
                        if ns.metadata.deletion_timestamp.is_some()
                            && let Some(name) = ns.metadata.name
                        {
                            queue.add_after(name, grace);
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => tracing::info!(controller = NAME, error = %err, "namespace watch failed; retrying"),
                    None => break,
                },
            }
        }
        queue.shut_down();
        while workers.join_next().await.is_some() {}
        Ok(())
    })
}

/// Why a sync did not finish the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SyncError {
    /// Content with finalizers remains: check again in `estimate / 2 + 1` seconds.
    ResourcesRemaining { estimate: u64 },
    /// Something failed: retry with backoff.
    Failed(String),
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ResourcesRemaining { estimate } => write!(
                f,
                "some content remains in the namespace, estimate {estimate} seconds before it is removed"
            ),
            Self::Failed(message) => f.write_str(message),
        }
    }
}

/// What remains of one resource's objects after its deletion (upstream's `gvrDeletionMetadata`).
#[derive(Debug, Default)]
struct Remaining {
    estimate: u64,
    count: usize,
    by_finalizer: BTreeMap<String, usize>,
}

/// The namespace writes retried on conflict.
#[derive(Debug, Clone, Copy)]
enum Write {
    MarkTerminating,
    Finalize,
}

/// The namespace controller's deleter (upstream's `namespacedResourcesDeleter`).
struct NamespaceDeleter {
    context: ControllerContext,
    namespaces: Api<Namespace>,
}

impl NamespaceDeleter {
    async fn work(&self, queue: &WorkQueue<String>, name: &str) {
        match self.sync(name).await {
            Ok(()) => queue.forget(&name.to_owned()),
            Err(SyncError::ResourcesRemaining { estimate }) => {
                let wait = estimate / 2 + 1;
                tracing::info!(
                    controller = NAME,
                    namespace = name,
                    wait_seconds = wait,
                    "content remaining in namespace"
                );
                queue.add_after(name.to_owned(), Duration::from_secs(wait));
            }
            Err(SyncError::Failed(message)) => {
                tracing::warn!(controller = NAME, namespace = name, error = %message, "deletion of namespace failed; retrying");
                queue.add_rate_limited(name.to_owned());
            }
        }
    }

    /// Upstream's `namespacedResourcesDeleter.Delete`.
    async fn sync(&self, name: &str) -> Result<(), SyncError> {
        let failed = |err: kube::Error| SyncError::Failed(error_message(&err));
        let Some(namespace) = self.namespaces.get_opt(name).await.map_err(failed)? else {
            return Ok(());
        };
        if namespace.metadata.deletion_timestamp.is_none() {
            return Ok(());
        }
        let Some(namespace) = self.retry_on_conflict(namespace, Write::MarkTerminating).await? else {
            return Ok(());
        };
        if namespace.metadata.deletion_timestamp.is_none() || finalized(&namespace) {
            return Ok(());
        }
        let estimate = self.delete_all_content(namespace.clone()).await?;
        if estimate > 0 {
            return Err(SyncError::ResourcesRemaining { estimate });
        }
        if self
            .retry_on_conflict(namespace, Write::Finalize)
            .await?
            .is_some()
        {
            tracing::info!(
                controller = NAME,
                namespace = name,
                "namespace emptied; finalizer {FINALIZER:?} removed"
            );
        }
        Ok(())
    }

    /// Applies `write` to `namespace`, re-reading it after each conflict; `None` when it is gone.
    async fn retry_on_conflict(
        &self,
        mut namespace: Namespace,
        write: Write,
    ) -> Result<Option<Namespace>, SyncError> {
        loop {
            let name = namespace.metadata.name.clone().unwrap_or_default();
            let uid = namespace.metadata.uid.clone();
            let written = match write {
                Write::MarkTerminating => self.mark_terminating(namespace).await,
                Write::Finalize => self.finalize(namespace).await,
            };
            match written {
                Ok(written) => return Ok(Some(written)),
                Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(None),
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(err) => return Err(SyncError::Failed(error_message(&err))),
            }
            let latest = self
                .namespaces
                .get_opt(&name)
                .await
                .map_err(|err| SyncError::Failed(error_message(&err)))?;
            let Some(latest) = latest else { return Ok(None) };
            if latest.metadata.uid != uid {
                return Err(SyncError::Failed(
                    "namespace uid has changed across retries".to_owned(),
                ));
            }
            namespace = latest;
        }
    }

    /// `updateNamespaceStatusFunc`: the phase becomes `Terminating`.
    async fn mark_terminating(&self, mut namespace: Namespace) -> Result<Namespace, kube::Error> {
        let terminating = namespace.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
        if terminating {
            return Ok(namespace);
        }
        namespace.status.get_or_insert_with(Default::default).phase = Some("Terminating".to_owned());
        let name = namespace.metadata.name.clone().unwrap_or_default();
        self.namespaces
            .replace_status(&name, &PostParams::default(), &namespace)
            .await
    }

    /// `finalizeNamespace`: PUT `finalize` with the other finalizers, sorted.
    async fn finalize(&self, mut namespace: Namespace) -> Result<Namespace, kube::Error> {
        let spec = namespace.spec.get_or_insert_with(Default::default);
        let mut finalizers: Vec<String> = spec
            .finalizers
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != FINALIZER)
            .collect();
        finalizers.sort();
        finalizers.dedup();
        spec.finalizers = Some(finalizers);
        let name = namespace.metadata.name.clone().unwrap_or_default();
        self.namespaces
            .replace_subresource("finalize", &name, &PostParams::default(), &namespace)
            .await
    }

    /// Upstream's `deleteAllContent`: deletes every discoverable namespaced resource's objects in the
    /// namespace, writes the conditions, and returns the estimate of seconds until what remains goes.
    async fn delete_all_content(&self, mut namespace: Namespace) -> Result<u64, SyncError> {
        let name = namespace.metadata.name.clone().unwrap_or_default();
        let mut errors: Vec<String> = Vec::new();
        let mut failures = BTreeMap::new();
        let resources: Vec<DiscoveredResource> = match self.context.discovery.refresh().await {
            Ok(snapshot) => {
                if let Some(err) = snapshot.failure() {
                    failures.insert(
                        "NamespaceDeletionDiscoveryFailure",
                        (
                            "DiscoveryFailed",
                            format!(
                                "Discovery failed for some groups, {} failing: {err}",
                                err.failed_groups()
                            ),
                        ),
                    );
                    errors.push(err.to_string());
                }
                snapshot
                    .preferred_with_verbs(&["delete"])
                    .filter(|r| r.namespaced)
                    .cloned()
                    .collect()
            }
            Err(err) => {
                failures.insert(
                    "NamespaceDeletionDiscoveryFailure",
                    ("DiscoveryFailed", err.to_string()),
                );
                errors.push(err.to_string());
                Vec::new()
            }
        };
        let mut estimate = 0;
        let mut content_errors = Vec::new();
        let mut remaining_by_resource = Vec::new();
        let mut remaining_by_finalizer: BTreeMap<String, usize> = BTreeMap::new();
        for resource in &resources {
            let (remaining, result) = self.delete_all_content_of(resource, &name).await;
            if let Err(err) = result {
                content_errors.push(err.clone());
                errors.push(err);
            }
            estimate = estimate.max(remaining.estimate);
            if remaining.count > 0 {
                remaining_by_resource.push(format!(
                    "{}.{} has {} resource instances",
                    resource.api_resource.plural, resource.api_resource.group, remaining.count
                ));
                for (finalizer, count) in remaining.by_finalizer {
                    *remaining_by_finalizer.entry(finalizer).or_default() += count;
                }
            }
        }
        if !content_errors.is_empty() {
            content_errors.sort();
            failures.insert(
                "NamespaceDeletionContentFailure",
                (
                    "ContentDeletionFailed",
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        content_errors.len(),
                        content_errors.join(", ")
                    ),
                ),
            );
        }
        if !remaining_by_resource.is_empty() {
            remaining_by_resource.sort();
            failures.insert(
                "NamespaceContentRemaining",
                (
                    "SomeResourcesRemain",
                    format!(
                        "Some resources are remaining: {}",
                        remaining_by_resource.join(", ")
                    ),
                ),
            );
        }
        if !remaining_by_finalizer.is_empty() {
            let mut by_finalizer: Vec<String> = remaining_by_finalizer
                .iter()
                .map(|(finalizer, count)| format!("{finalizer} in {count} resource instances"))
                .collect();
            by_finalizer.sort();
            failures.insert(
                "NamespaceFinalizersRemaining",
                (
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        by_finalizer.join(", ")
                    ),
                ),
            );
        }
        if update_conditions(&mut namespace, &failures)
            && let Err(err) = self
                .namespaces
                .replace_status(&name, &PostParams::default(), &namespace)
                .await
        {
            tracing::info!(controller = NAME, namespace = %name, error = %error_message(&err), "couldn't update status condition for namespace");
        }
        tracing::info!(controller = NAME, namespace = %name, resources = resources.len(), estimate, errors = errors.len(), "deleted namespace content");
        if errors.is_empty() {
            Ok(estimate)
        } else {
            Err(SyncError::Failed(aggregate(&errors)))
        }
    }

    /// Upstream's `deleteAllContentForGroupVersionResource`.
    async fn delete_all_content_of(
        &self,
        resource: &DiscoveredResource,
        namespace: &str,
    ) -> (Remaining, Result<(), String>) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.context.client.clone(), namespace, &resource.api_resource);
        let gvr = resource.gvr_string();
        let deleted = if resource.supports_all(&["deletecollection"]) {
            match api
                .delete_collection(&DeleteParams::background(), &ListParams::default())
                .await
            {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 405 => Ok(false),
                Err(err) => Err(error_message(&err)),
            }
        } else {
            Ok(false)
        };
        let deleted = match deleted {
            Ok(true) => Ok(()),
            Ok(false) => self.delete_each(&api).await,
            Err(err) => Err(err),
        };
        if let Err(err) = deleted {
            return (Remaining::default(), Err(err));
        }
        if !resource.supports_all(&["list"]) {
            return (Remaining::default(), Ok(()));
        }
        let list = match api.list_metadata(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 405 => {
                return (Remaining::default(), Ok(()));
            }
            Err(err) => return (Remaining::default(), Err(error_message(&err))),
        };
        if list.items.is_empty() {
            return (Remaining::default(), Ok(()));
        }
        let mut by_finalizer = BTreeMap::new();
        for item in &list.items {
            for finalizer in item.metadata.finalizers.iter().flatten() {
                *by_finalizer.entry(finalizer.clone()).or_default() += 1;
            }
        }
        let count = list.items.len();
        if by_finalizer.is_empty() {
            // Nothing explains them: something unexpected kept them.
            return (
                Remaining {
                    estimate: 0,
                    count,
                    by_finalizer,
                },
                Err(format!(
                    "unexpected items still remain in namespace: {namespace} for gvr: {gvr}"
                )),
            );
        }
        (
            Remaining {
                estimate: FINALIZER_ESTIMATE_SECONDS,
                count,
                by_finalizer,
            },
            Ok(()),
        )
    }

    /// Upstream's `deleteEachItem`: list, then delete each object (already gone is fine).
    async fn delete_each(&self, api: &Api<DynamicObject>) -> Result<(), String> {
        let list = match api.list_metadata(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 405 => return Ok(()),
            Err(err) => return Err(error_message(&err)),
        };
        for item in list.items {
            let Some(name) = item.metadata.name else { continue };
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 405 => {}
                Err(err) => return Err(error_message(&err)),
            }
        }
        Ok(())
    }
}

/// Whether `spec.finalizers` is empty.
fn finalized(namespace: &Namespace) -> bool {
    namespace
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_none_or(Vec::is_empty)
}

/// Upstream's `updateConditions`: every maintained type gets its failure from `failures` or its "ok"
/// variant; returns whether anything changed (a transition also stamps `lastTransitionTime`).
fn update_conditions(namespace: &mut Namespace, failures: &BTreeMap<&str, (&str, String)>) -> bool {
    let conditions = namespace
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let mut changed = false;
    for (kind, ok_reason, ok_message) in CONDITIONS {
        let (status, reason, message) = match failures.get(kind) {
            Some((reason, message)) => ("True", *reason, message.clone()),
            None => ("False", ok_reason, ok_message.to_owned()),
        };
        let now = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        match conditions.iter_mut().find(|c| c.type_ == kind) {
            None => {
                conditions.push(NamespaceCondition {
                    type_: kind.to_owned(),
                    status: status.to_owned(),
                    reason: Some(reason.to_owned()),
                    message: Some(message),
                    last_transition_time: now,
                });
                changed = true;
            }
            Some(old) => {
                if old.status != status
                    || old.reason.as_deref() != Some(reason)
                    || old.message.as_deref() != Some(message.as_str())
                {
                    if old.status != status {
                        old.last_transition_time = now;
                    }
                    old.status = status.to_owned();
                    old.reason = Some(reason.to_owned());
                    old.message = Some(message);
                    changed = true;
                }
            }
        }
    }
    changed
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as is, several as `[a, b]`.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_upstreams_and_change_only_when_their_text_does() {
        let mut namespace = Namespace::default();
        let mut failures = BTreeMap::new();
        failures.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain",
                "Some resources are remaining: jobs.batch has 1 resource instances".to_owned(),
            ),
        );
        assert!(update_conditions(&mut namespace, &failures));
        assert!(!update_conditions(&mut namespace, &failures));
        let conditions = namespace.status.unwrap().conditions.unwrap();
        let summary: Vec<(String, String, String)> = conditions
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason.unwrap_or_default()))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "NamespaceDeletionDiscoveryFailure",
                    "False",
                    "ResourcesDiscovered"
                ),
                (
                    "NamespaceDeletionGroupVersionParsingFailure",
                    "False",
                    "ParsedGroupVersions"
                ),
                ("NamespaceDeletionContentFailure", "False", "ContentDeleted"),
                ("NamespaceContentRemaining", "True", "SomeResourcesRemain"),
                ("NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers"),
            ]
            .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
        );
    }

    #[test]
    fn errors_aggregate_as_upstreams() {
        assert_eq!(aggregate(&["a".to_owned()]), "a");
        assert_eq!(aggregate(&["a".to_owned(), "b".to_owned()]), "[a, b]");
    }
}
