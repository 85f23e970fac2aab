//! mvp-core's [`ClusterApi`] over this server's [`Store`], so that the server runs mvp-core's feeders
//! (identity lease, peer endpoint record, discovery receipts) instead of copies of its own: the objects
//! are the store's, and the storage-internal records are its internal keyspace, as upstream's are etcd
//! keys beside the API.

use std::sync::Arc;
use std::time::Duration;

use mvp_core::cluster::{
    ClusterApi, ClusterError, ClusterFuture, ObjectRef, Preconditions as MvpPreconditions,
};
use serde_json::Value;

use crate::store::{ObjectKey, Preconditions, StorageResource, Store, StoreError};

/// A [`Store`] as mvp-core's [`ClusterApi`].
#[derive(Clone)]
pub(crate) struct StoreCluster(pub Arc<dyn Store>);

impl std::fmt::Debug for StoreCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreCluster").finish_non_exhaustive()
    }
}

fn resource(object: &ObjectRef) -> StorageResource {
    StorageResource::new(object.group.clone(), object.resource.clone())
}

fn key(object: &ObjectRef) -> ObjectKey {
    match &object.namespace {
        Some(namespace) => ObjectKey::namespaced(namespace, &object.name),
        None => ObjectKey::cluster(&object.name),
    }
}

fn error(err: StoreError) -> ClusterError {
    match err {
        StoreError::NotFound { .. } => ClusterError::NotFound,
        StoreError::AlreadyExists { .. } | StoreError::Conflict { .. } => {
            ClusterError::Conflict(err.to_string())
        }
        other => ClusterError::Other(other.into()),
    }
}

/// Whether `object`'s labels match `selector` (`key=value` terms joined by commas: all the feeders use).
fn matches(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|term| !term.is_empty()).all(|term| {
        let (key, value) = term.split_once('=').unwrap_or((term, ""));
        object
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
            == Some(value)
    })
}

impl ClusterApi for StoreCluster {
    fn get<'a>(&'a self, object: &'a ObjectRef) -> ClusterFuture<'a, Option<Value>> {
        Box::pin(async move {
            match self.0.get(&resource(object), &key(object)).await {
                Ok(found) => Ok(Some(found)),
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(err) => Err(error(err)),
            }
        })
    }

    fn list<'a>(&'a self, object: &'a ObjectRef, label_selector: &'a str) -> ClusterFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (items, _) = self
                .0
                .list(&resource(object), object.namespace.as_deref())
                .await
                .map_err(error)?;
            Ok(items
                .into_iter()
                .filter(|item| matches(item, label_selector))
                .collect())
        })
    }

    fn create<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value> {
        Box::pin(async move {
            self.0
                .create(&resource(object), &key(object), body)
                .await
                .map_err(error)
        })
    }

    fn replace<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value> {
        Box::pin(async move {
            // The read's resourceVersion guards the write, as the API's optimistic concurrency does.
            let revision = crate::store::resource_version(&body);
            self.0
                .update(&resource(object), &key(object), body, revision)
                .await
                .map_err(error)
        })
    }

    fn replace_status<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value> {
        self.replace(object, body)
    }

    fn delete<'a>(
        &'a self,
        object: &'a ObjectRef,
        preconditions: MvpPreconditions,
    ) -> ClusterFuture<'a, bool> {
        Box::pin(async move {
            let preconditions = Preconditions {
                uid: preconditions.uid,
                resource_version: preconditions.resource_version.and_then(|rv| rv.parse().ok()),
            };
            match self
                .0
                .delete(&resource(object), &key(object), Some(preconditions))
                .await
            {
                Ok(_) => Ok(true),
                Err(StoreError::NotFound { .. }) => Ok(false),
                Err(err) => Err(error(err)),
            }
        })
    }

    fn put_record<'a>(&'a self, key: &'a str, record: Value, ttl: Duration) -> ClusterFuture<'a, ()> {
        Box::pin(async move { self.0.put_internal(key, record, ttl).await.map_err(error) })
    }

    fn delete_record<'a>(&'a self, key: &'a str) -> ClusterFuture<'a, ()> {
        Box::pin(async move { self.0.delete_internal(key).await.map(drop).map_err(error) })
    }
}
