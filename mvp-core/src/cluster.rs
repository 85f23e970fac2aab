//! The one seam between the crate's [feeders](crate::feeders) and the cluster they publish to.
//!
//! Every task that keeps a server visible to its peers (identity lease, peer endpoint record,
//! StorageVersion entries, discovery receipts) and every task that feeds the proxy (the peers'
//! identity leases) goes through [`ClusterApi`]: a handful of object operations on the
//! Kubernetes API plus the storage-internal records that upstream writes to etcd directly.
//! Objects are plain JSON ([`serde_json::Value`]), so the trait costs no Kubernetes type crate.
//!
//! Implementations: `KubeCluster` on kube-rs's `Client` (cargo feature
//! `kube`), or a server's own store (the workspace's fake kube-apiserver implements it).

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

/// What a [`ClusterApi`] call returns.
pub type ClusterFuture<'a, T> = BoxFuture<'a, Result<T, ClusterError>>;

/// Why a [`ClusterApi`] call failed. The feeders retry every kind on their next tick, and tell
/// [`NotFound`](Self::NotFound) and [`Conflict`](Self::Conflict) apart to create or re-read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The object does not exist (HTTP 404).
    #[error("not found")]
    NotFound,
    /// The object changed since it was read, or already exists (HTTP 409), or a delete
    /// precondition did not hold.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The implementation cannot do this: an API client cannot write the storage-internal
    /// records that kube-apiserver writes to etcd (peer endpoint leases).
    #[error("{0} is not supported by this cluster API")]
    Unsupported(&'static str),
    /// Anything else (transport, a Status other than 404 and 409, a body that did not decode).
    #[error("{0}")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ClusterError {
    /// An [`Other`](Self::Other) error with `message`.
    pub fn other(message: impl Into<String>) -> Self {
        Self::Other(message.into().into())
    }
}

/// Which object a call is about: group, version and resource (plural), and where.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// API group; `""` for the core group.
    pub group: String,
    /// API version (`v1`, `v1alpha1`).
    pub version: String,
    /// Resource, plural (`leases`).
    pub resource: String,
    /// Namespace; `None` for cluster-scoped objects and cluster-wide lists.
    pub namespace: Option<String>,
    /// Name; empty for collections.
    pub name: String,
}

impl ObjectRef {
    /// The `coordination.k8s.io/v1` Lease `name` in `namespace`.
    pub fn lease(namespace: &str, name: &str) -> Self {
        Self {
            group: "coordination.k8s.io".to_owned(),
            version: "v1".to_owned(),
            resource: "leases".to_owned(),
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }

    /// The `internal.apiserver.k8s.io/v1alpha1` StorageVersion `name` (cluster-scoped).
    pub fn storage_version(name: &str) -> Self {
        Self {
            group: "internal.apiserver.k8s.io".to_owned(),
            version: "v1alpha1".to_owned(),
            resource: "storageversions".to_owned(),
            namespace: None,
            name: name.to_owned(),
        }
    }

    /// The API path of the object (of the collection when `name` is empty), as a client
    /// requests it: `/api/v1/...` for the core group, `/apis/<group>/<version>/...` otherwise.
    pub fn path(&self) -> String {
        let mut path = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if let Some(namespace) = &self.namespace {
            path.push_str("/namespaces/");
            path.push_str(namespace);
        }
        path.push('/');
        path.push_str(&self.resource);
        if !self.name.is_empty() {
            path.push('/');
            path.push_str(&self.name);
        }
        path
    }
}

/// Preconditions of a delete: the object is deleted only if it still has this uid and
/// resourceVersion (`DeleteOptions.preconditions`), so a concurrent rewrite survives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// `metadata.uid` must equal this.
    pub uid: Option<String>,
    /// `metadata.resourceVersion` must equal this.
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// Preconditions pinning `object` as it was read.
    pub fn of(object: &Value) -> Self {
        let field = |name: &str| {
            object
                .pointer(&format!("/metadata/{name}"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Self {
            uid: field("uid"),
            resource_version: field("resourceVersion"),
        }
    }
}

/// The cluster API the feeders need: small enough to implement over any client or store.
///
/// Updates are optimistic: an object passed to [`replace`](Self::replace) carries the
/// `metadata.resourceVersion` it was read at, and a stale one is a
/// [`ClusterError::Conflict`]. The storage-internal records (`/peerserverleases/<id>`) are not
/// part of the Kubernetes API; an implementation that cannot write them keeps the default
/// methods, which answer [`ClusterError::Unsupported`].
pub trait ClusterApi: Send + Sync + 'static {
    /// The object, or `None` when it does not exist.
    fn get<'a>(&'a self, object: &'a ObjectRef) -> ClusterFuture<'a, Option<Value>>;

    /// The items of the collection `object` (its `name` is ignored) whose labels match
    /// `label_selector` (the API's syntax, `key=value,...`; empty for all).
    fn list<'a>(&'a self, object: &'a ObjectRef, label_selector: &'a str) -> ClusterFuture<'a, Vec<Value>>;

    /// Creates `body`; returns the stored object. An existing object is a conflict.
    fn create<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value>;

    /// Replaces the object with `body` (spec and metadata; the status only where the resource
    /// has no status subresource); returns the stored object.
    fn replace<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value>;

    /// Replaces the object's status (the `/status` subresource) with `body`'s.
    fn replace_status<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value>;

    /// Deletes the object if `preconditions` hold; whether something was deleted (`false` when
    /// it did not exist).
    fn delete<'a>(&'a self, object: &'a ObjectRef, preconditions: Preconditions) -> ClusterFuture<'a, bool>;

    /// Writes the storage-internal record `key` (for instance `/peerserverleases/<server ID>`),
    /// which expires `ttl` after its last write.
    fn put_record<'a>(&'a self, key: &'a str, record: Value, ttl: Duration) -> ClusterFuture<'a, ()> {
        let _ = (key, record, ttl);
        Box::pin(async { Err(ClusterError::Unsupported("writing a storage-internal record")) })
    }

    /// Removes the storage-internal record `key` (absent is fine).
    fn delete_record<'a>(&'a self, key: &'a str) -> ClusterFuture<'a, ()> {
        let _ = key;
        Box::pin(async { Err(ClusterError::Unsupported("deleting a storage-internal record")) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_api_layout() {
        assert_eq!(
            ObjectRef::lease("kube-system", "apiserver-x").path(),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/apiserver-x"
        );
        assert_eq!(
            ObjectRef::storage_version("core.pods").path(),
            "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/core.pods"
        );
        let pods = ObjectRef {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            namespace: None,
            name: String::new(),
        };
        assert_eq!(pods.path(), "/api/v1/pods");
    }

    #[test]
    fn preconditions_pin_uid_and_resource_version() {
        let object = serde_json::json!({"metadata": {"uid": "u", "resourceVersion": "7"}});
        assert_eq!(
            Preconditions::of(&object),
            Preconditions {
                uid: Some("u".into()),
                resource_version: Some("7".into())
            }
        );
    }
}
