//! The StorageVersion garbage collector: kube-controller-manager's `storageversiongc` controller, run by
//! the fake because the fake plays the whole control plane.
//!
//! A StorageVersion entry whose `apiServerID` has no kube-apiserver identity lease belongs to a server that
//! is gone; the collector removes it (and deletes the object when no entry remains). In StorageVersion mode
//! this is what lets the proxy stop choosing a crashed peer: until its entries go, the alpha filter answers
//! 503 for its resources once its address has expired (docs/mvp-behaviour.md §2.1, §8 item 2).
//!
//! Upstream reacts to identity lease deletions and to StorageVersion changes; the fake does the same (a
//! full pass on every change of either) plus a periodic pass, and re-reads a lease before acting on its
//! absence so a server that is just starting is never collected.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::controllers::identity::IDENTITY_LEASE_NAMESPACE;
use crate::controllers::informer::run_informer;
use crate::controllers::lease_gc::is_identity_lease;
use crate::controllers::storage_version::{GROUP, RESOURCE, status_without};
use crate::store::{ObjectKey, Preconditions, StorageResource, Store, resource_version};

fn lease_resource() -> StorageResource {
    StorageResource::new("coordination.k8s.io", "leases")
}

/// The `apiServerID`s of a StorageVersion object's entries.
pub(crate) fn entry_server_ids(storage_version: &Value) -> Vec<String> {
    storage_version
        .pointer("/status/storageVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("apiServerID").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

async fn has_identity_lease(store: &dyn Store, server_id: &str) -> bool {
    store
        .get(
            &lease_resource(),
            &ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, server_id),
        )
        .await
        .is_ok_and(|lease| is_identity_lease(&lease))
}

/// One pass: removes the entries of servers without an identity lease from every StorageVersion object,
/// deleting objects left without entries. Returns the IDs whose entries were removed (sorted). Writes are
/// conditional on the object's resourceVersion; a conflict is left to the next pass.
pub(crate) async fn collect_orphaned_entries(store: &dyn Store, now: &str) -> Vec<String> {
    let sv_resource = StorageResource::new(GROUP, RESOURCE);
    let Ok((objects, _)) = store.list(&sv_resource, None).await else {
        return Vec::new();
    };
    let Ok((leases, _)) = store
        .list(&lease_resource(), Some(IDENTITY_LEASE_NAMESPACE))
        .await
    else {
        return Vec::new();
    };
    let live: HashSet<&str> = leases
        .iter()
        .filter(|l| is_identity_lease(l))
        .filter_map(|l| l.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    let mut removed = HashSet::new();
    for object in &objects {
        let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let mut orphans = Vec::new();
        for id in entry_server_ids(object) {
            if live.contains(id.as_str()) {
                continue;
            }
            // Re-check the store right before acting, for every object (as upstream re-reads the
            // lease before collecting): a restarted server may have written its lease, and then its
            // entries, since the list; a verdict kept for the whole pass would remove those.
            if !has_identity_lease(store, &id).await {
                orphans.push(id);
            }
        }
        if orphans.is_empty() {
            continue;
        }
        let mut status = object.get("status").cloned().unwrap_or(Value::Null);
        for id in &orphans {
            status = status_without(&status, id, now);
        }
        let key = ObjectKey::cluster(name);
        let no_entries_left = status
            .get("storageVersions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        let written = if no_entries_left {
            let preconditions = Preconditions {
                uid: None,
                resource_version: resource_version(object),
            };
            store
                .delete(&sv_resource, &key, Some(preconditions))
                .await
                .is_ok()
        } else {
            let mut updated = object.clone();
            updated["status"] = status;
            store
                .update(&sv_resource, &key, updated, resource_version(object))
                .await
                .is_ok()
        };
        if written {
            removed.extend(orphans);
        }
    }
    let mut removed: Vec<String> = removed.into_iter().collect();
    removed.sort();
    if !removed.is_empty() {
        tracing::info!(servers = ?removed, "removed StorageVersion entries of servers without identity lease");
    }
    removed
}

/// Runs [`collect_orphaned_entries`] on every identity lease or StorageVersion change and every
/// `period`, until `cancel`.
pub(crate) async fn run_storage_version_gc(
    store: Arc<dyn Store>,
    period: Duration,
    cancel: CancellationToken,
) {
    let wake = Arc::new(Notify::new());
    let watchers = [
        (lease_resource(), Some(IDENTITY_LEASE_NAMESPACE)),
        (StorageResource::new(GROUP, RESOURCE), None),
    ];
    let mut tasks = tokio::task::JoinSet::new();
    for (resource, namespace) in watchers {
        let (store, cancel, wake) = (store.clone(), cancel.clone(), wake.clone());
        tasks.spawn(run_informer(store, resource, namespace, cancel, move |_| {
            wake.notify_one();
        }));
    }
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = interval.tick() => {}
            () = wake.notified() => {}
        }
        let now = crate::controllers::identity::micro_time(time::OffsetDateTime::now_utc());
        collect_orphaned_entries(store.as_ref(), &now).await;
    }
    tasks.abort_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::identity::identity_lease;
    use crate::controllers::storage_version::{ServerStorageVersion, merged_status};
    use crate::store::MemoryStore;
    use serde_json::json;

    fn entry(name: &str) -> ServerStorageVersion {
        ServerStorageVersion {
            object_name: name.to_owned(),
            encoding_version: "batch/v1".into(),
            decodable_versions: vec!["batch/v1".into()],
            served_versions: vec!["batch/v1".into()],
        }
    }

    async fn put_sv(store: &MemoryStore, name: &str, servers: &[&str]) {
        let mut status = Value::Null;
        for id in servers {
            status = merged_status(&status, id, &entry(name), "t0");
        }
        let object = json!({
            "apiVersion": "internal.apiserver.k8s.io/v1alpha1",
            "kind": "StorageVersion",
            "metadata": {"name": name},
            "spec": {},
            "status": status,
        });
        store
            .create(
                &StorageResource::new(GROUP, RESOURCE),
                &ObjectKey::cluster(name),
                object,
            )
            .await
            .unwrap();
    }

    async fn put_lease(store: &MemoryStore, id: &str) {
        store
            .create(
                &lease_resource(),
                &ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, id),
                identity_lease(
                    id,
                    &format!("{id}_1"),
                    "h",
                    3600,
                    "2026-01-01T00:00:00.000000Z",
                    None,
                ),
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn removes_entries_of_servers_without_lease_and_empty_objects() {
        let store = MemoryStore::new();
        put_lease(&store, "apiserver-b").await;
        put_sv(&store, "batch.jobs", &["apiserver-a", "apiserver-b"]).await;
        put_sv(&store, "core.pods", &["apiserver-b"]).await;
        put_sv(&store, "apps.deployments", &["apiserver-a"]).await;

        let removed = collect_orphaned_entries(&store, "t1").await;
        assert_eq!(removed, vec!["apiserver-a".to_owned()]);
        let sv = StorageResource::new(GROUP, RESOURCE);
        let jobs = store.get(&sv, &ObjectKey::cluster("batch.jobs")).await.unwrap();
        assert_eq!(entry_server_ids(&jobs), vec!["apiserver-b".to_owned()]);
        assert_eq!(jobs["status"]["commonEncodingVersion"], "batch/v1");
        let pods = store.get(&sv, &ObjectKey::cluster("core.pods")).await.unwrap();
        assert_eq!(entry_server_ids(&pods), vec!["apiserver-b".to_owned()]);
        assert!(
            store
                .get(&sv, &ObjectKey::cluster("apps.deployments"))
                .await
                .is_err(),
            "an object without entries is deleted"
        );
        assert!(collect_orphaned_entries(&store, "t2").await.is_empty());
    }

    #[tokio::test]
    async fn a_lease_with_another_component_label_does_not_count() {
        let store = MemoryStore::new();
        let mut lease = identity_lease("apiserver-a", "a_1", "h", 3600, "t", None);
        lease["metadata"]["labels"] = json!({"apiserver.kubernetes.io/identity": "kube-scheduler"});
        store
            .create(
                &lease_resource(),
                &ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, "apiserver-a"),
                lease,
            )
            .await
            .unwrap();
        put_sv(&store, "batch.jobs", &["apiserver-a"]).await;
        assert_eq!(
            collect_orphaned_entries(&store, "t1").await,
            vec!["apiserver-a".to_owned()]
        );
    }
}
