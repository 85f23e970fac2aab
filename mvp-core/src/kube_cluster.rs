//! [`ClusterApi`] on kube-rs's [`Client`](kube::Client) (cargo feature `kube`).

use serde_json::{Value, json};

use crate::cluster::{ClusterApi, ClusterError, ClusterFuture, ObjectRef, Preconditions};

/// The [`ClusterApi`] of a server that reaches its cluster through the Kubernetes API with
/// kube-rs, for instance from a kubeconfig (`kube::Client::try_default()`).
///
/// Objects go through the API; the storage-internal records (peer endpoint records, discovery
/// receipts) are not reachable there, so [`put_record`](ClusterApi::put_record) answers
/// [`ClusterError::Unsupported`]: such a server advertises its address on its identity lease
/// (see [`LeaseAddresses`](crate::LeaseAddresses)).
#[derive(Clone)]
pub struct KubeCluster {
    client: kube::Client,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster").finish_non_exhaustive()
    }
}

impl KubeCluster {
    /// The cluster `client` talks to.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    async fn send(
        &self,
        method: http::Method,
        path: String,
        body: Option<Value>,
    ) -> Result<Value, ClusterError> {
        let bytes = match &body {
            Some(body) => serde_json::to_vec(body).map_err(|err| ClusterError::Other(err.into()))?,
            None => Vec::new(),
        };
        let mut request = http::Request::builder().method(method).uri(path);
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(bytes)
            .map_err(|err| ClusterError::Other(err.into()))?;
        self.client
            .request::<Value>(request)
            .await
            .map_err(|err| match err {
                kube::Error::Api(status) if status.code == 404 => ClusterError::NotFound,
                kube::Error::Api(status) if status.code == 409 => {
                    ClusterError::Conflict(status.message.clone())
                }
                other => ClusterError::Other(other.into()),
            })
    }
}

fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

impl ClusterApi for KubeCluster {
    fn get<'a>(&'a self, object: &'a ObjectRef) -> ClusterFuture<'a, Option<Value>> {
        Box::pin(async move {
            match self.send(http::Method::GET, object.path(), None).await {
                Ok(found) => Ok(Some(found)),
                Err(ClusterError::NotFound) => Ok(None),
                Err(err) => Err(err),
            }
        })
    }

    fn list<'a>(&'a self, object: &'a ObjectRef, label_selector: &'a str) -> ClusterFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let collection = ObjectRef {
                name: String::new(),
                ..object.clone()
            };
            let mut path = collection.path();
            if !label_selector.is_empty() {
                path = format!("{path}?labelSelector={}", encode(label_selector));
            }
            let mut list = self.send(http::Method::GET, path, None).await?;
            match list.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => Ok(items),
                Some(Value::Null) | None => Ok(Vec::new()),
                Some(_) => Err(ClusterError::other("the list's items are not an array")),
            }
        })
    }

    fn create<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value> {
        Box::pin(async move {
            let collection = ObjectRef {
                name: String::new(),
                ..object.clone()
            };
            self.send(http::Method::POST, collection.path(), Some(body)).await
        })
    }

    fn replace<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value> {
        Box::pin(async move { self.send(http::Method::PUT, object.path(), Some(body)).await })
    }

    fn replace_status<'a>(&'a self, object: &'a ObjectRef, body: Value) -> ClusterFuture<'a, Value> {
        Box::pin(async move {
            let path = format!("{}/status", object.path());
            self.send(http::Method::PUT, path, Some(body)).await
        })
    }

    fn delete<'a>(&'a self, object: &'a ObjectRef, preconditions: Preconditions) -> ClusterFuture<'a, bool> {
        Box::pin(async move {
            let mut options = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
            let mut pinned = serde_json::Map::new();
            if let Some(uid) = preconditions.uid {
                pinned.insert("uid".into(), json!(uid));
            }
            if let Some(resource_version) = preconditions.resource_version {
                pinned.insert("resourceVersion".into(), json!(resource_version));
            }
            if !pinned.is_empty() {
                options["preconditions"] = Value::Object(pinned);
            }
            match self
                .send(http::Method::DELETE, object.path(), Some(options))
                .await
            {
                Ok(_) => Ok(true),
                Err(ClusterError::NotFound) => Ok(false),
                Err(err) => Err(err),
            }
        })
    }
}
