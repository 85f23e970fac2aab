//! A minimal informer: list-then-watch over one resource of the shared store.
//!
//! Controllers of the fake (CRDs, the proxy's StorageVersion and identity lease caches) react to the full
//! current list rather than to single events, which keeps each of them obviously correct; the lists
//! involved are small.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::store::{StorageResource, Store};

/// The objects of an informer's list that decode as `T`; the others are skipped (a store holds
/// only objects the API validated, so none should be).
pub(crate) fn decoded<T: serde::de::DeserializeOwned>(objects: &[Value]) -> Vec<T> {
    objects
        .iter()
        .filter_map(|object| match T::deserialize(object) {
            Ok(decoded) => Some(decoded),
            Err(err) => {
                tracing::warn!(error = %err, "skipping an object an informer cannot read");
                None
            }
        })
        .collect()
}

/// Calls `on_change` with the full list of `resource` (in `namespace`, when given) after the initial
/// list and after every change, until `cancel`. A watch that ends (e.g. it fell behind the store's
/// history) is replaced by a fresh list and watch, so no change is missed.
pub(crate) async fn run_informer<F>(
    store: Arc<dyn Store>,
    resource: StorageResource,
    namespace: Option<&'static str>,
    cancel: CancellationToken,
    mut on_change: F,
) where
    F: FnMut(&[Value]) + Send,
{
    loop {
        let Ok((objects, revision)) = store.list(&resource, namespace).await else {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(100)) => continue,
            }
        };
        on_change(&objects);
        let Ok(mut events) = store.watch(&resource, namespace, Some(revision)).await else {
            continue;
        };
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                event = events.next() => match event {
                    Some(Ok(_)) => {
                        if let Ok((objects, _)) = store.list(&resource, namespace).await {
                            on_change(&objects);
                        }
                    }
                    _ => break,
                },
            }
        }
    }
}
