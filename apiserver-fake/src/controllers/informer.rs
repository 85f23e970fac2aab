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

use crate::store::{StorageResource, Store, WatchEventType};

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
                    // Progress only (the watch cache's, in order with its changes): nothing changed.
                    Some(Ok(event)) if event.event_type == WatchEventType::Bookmark => {}
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::store::{CachedStore, MemoryStore, ObjectKey, WatchCacheSizes};

    /// Behind the watch cache a namespaced watch also carries the progress other namespaces' changes
    /// make: an informer of one namespace lists again for its own changes only.
    #[tokio::test]
    async fn progress_of_other_namespaces_does_not_make_an_informer_list_again() {
        let inner = Arc::new(MemoryStore::new());
        let store: Arc<dyn Store> = Arc::new(CachedStore::new(inner, WatchCacheSizes::default()));
        let resource = StorageResource::new("", "configmaps");
        let calls = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let informer = tokio::spawn(run_informer(
            store.clone(),
            resource.clone(),
            Some("mine"),
            cancel.clone(),
            {
                let calls = calls.clone();
                move |_| {
                    calls.fetch_add(1, Ordering::SeqCst);
                }
            },
        ));
        let create = |namespace: &'static str, name: String| {
            let (store, resource) = (store.clone(), resource.clone());
            async move {
                store
                    .create(
                        &resource,
                        &ObjectKey::namespaced(namespace, &name),
                        json!({"metadata": {"name": name, "namespace": namespace}}),
                    )
                    .await
                    .expect("created");
            }
        };
        let settle = |expected: usize| {
            let calls = calls.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(5), async {
                    while calls.load(Ordering::SeqCst) < expected {
                        tokio::task::yield_now().await;
                    }
                })
                .await
                .expect("the informer saw the change");
            }
        };
        settle(1).await;
        for i in 0..20 {
            create("other", format!("o{i}")).await;
        }
        // A change of its own namespace after them: once it is seen, so were the 20 before it.
        create("mine", "m".to_owned()).await;
        settle(2).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "the initial list and the one change"
        );
        cancel.cancel();
        informer.await.expect("the informer ends");
    }
}
