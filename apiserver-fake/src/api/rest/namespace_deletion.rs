//! How the namespace registry deletes a namespace (`pkg/registry/core/namespace/storage/storage.go`):
//! in two steps, with the namespace controller in between.
//!
//! - The first `DELETE` marks the namespace: `metadata.deletionTimestamp` set and `status.phase:
//!   Terminating`, its `spec.finalizers` (`[kubernetes]`) kept, and answers 200 with it. Creates in it
//!   are refused from then on (`NamespaceLifecycle` admission, [`super::lifecycle::admit_create`]).
//! - The namespace controller (the `controller-manager` crate, through the API) deletes its content
//!   and then `PUT`s `namespaces/NAME/finalize` without `kubernetes`; the update that leaves
//!   `spec.finalizers` and `metadata.finalizers` both empty deletes the namespace
//!   ([`should_delete_during_update`], upstream's `ShouldDeleteNamespaceDuringUpdate`).
//! - A `DELETE` of a namespace already terminating answers 409 while `spec.finalizers` is not empty
//!   (upstream's "The system is ensuring all content is removed from this namespace" conflict); a
//!   namespace without spec finalizers is deleted at once, like any object, once its
//!   `metadata.finalizers` are gone.
//!
//! Nothing here deletes a namespace's content: that is the controller's job, done through discovery
//! and the API, so that a server lacking a group cannot silently leave that group's objects behind.

use serde_json::{Value, json};

use super::RestRequest;
use super::object::{meta_str, set_in};
use crate::api::status::Status;
use crate::store::{GroupResource, ObjectKey, Preconditions, StoreError, resource_version};

/// How often the marking update is retried after losing a race (upstream's `GuaranteedUpdate` loop).
const UPDATE_ATTEMPTS: usize = 5;

/// The conflict upstream answers to a `DELETE` of a namespace that is still being emptied.
pub(crate) const STILL_TERMINATING: &str = "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.";

fn non_empty(object: &Value, pointer: &str) -> bool {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// Whether the namespace still has `spec.finalizers` (the namespace controller has not finalized it).
pub(crate) fn has_spec_finalizers(namespace: &Value) -> bool {
    non_empty(namespace, "/spec/finalizers")
}

/// Upstream's `ShouldDeleteNamespaceDuringUpdate`: a namespace being deleted goes once its
/// `spec.finalizers` and `metadata.finalizers` are both empty.
pub(crate) fn should_delete_during_update(namespace: &Value) -> bool {
    namespace.pointer("/metadata/deletionTimestamp").is_some()
        && !has_spec_finalizers(namespace)
        && !non_empty(namespace, "/metadata/finalizers")
}

/// The namespace registry's `Delete` of `key`, whose stored object is `current` (the client's
/// preconditions already checked against it). Returns what the response shows.
pub(crate) async fn delete(
    req: &RestRequest<'_>,
    key: &ObjectKey,
    mut current: Value,
    dry_run: bool,
) -> Result<Value, Status> {
    let storage = req.resource.storage();
    let store = req.ctx.store.as_ref();
    let uid = meta_str(&current, "uid").to_owned();
    if current.pointer("/metadata/deletionTimestamp").is_none() {
        let mut attempt = 0;
        let marked = loop {
            let mut marked = current.clone();
            set_in(
                &mut marked,
                &["metadata", "deletionTimestamp"],
                json!(crate::store::now_timestamp()),
            );
            set_in(&mut marked, &["status", "phase"], json!("Terminating"));
            if dry_run {
                break marked;
            }
            match store
                .update(&storage, key, marked, resource_version(&current))
                .await
            {
                Ok(written) => break written,
                Err(StoreError::Conflict { .. }) if attempt + 1 < UPDATE_ATTEMPTS => {
                    attempt += 1;
                    current = store.get(&storage, key).await?;
                    if meta_str(&current, "uid") != uid {
                        return Err(Status::conflict(&GroupResource::new("", "namespaces"), &key.name));
                    }
                    if current.pointer("/metadata/deletionTimestamp").is_some() {
                        // Another DELETE marked it meanwhile: answer as to a second DELETE.
                        return finish(req, key, current, dry_run).await;
                    }
                }
                Err(e) => return Err(e.into()),
            }
        };
        // Only a namespace without spec finalizers goes on to be deleted now.
        if has_spec_finalizers(&current) {
            return Ok(marked);
        }
        return finish(req, key, marked, dry_run).await;
    }
    finish(req, key, current, dry_run).await
}

/// The second half of the registry's `Delete`, for a namespace already marked: 409 while it has spec
/// finalizers; otherwise the generic deletion (kept while `metadata.finalizers` remain), of this
/// namespace (its UID; the client's preconditions were checked before it was marked).
async fn finish(
    req: &RestRequest<'_>,
    key: &ObjectKey,
    namespace: Value,
    dry_run: bool,
) -> Result<Value, Status> {
    if has_spec_finalizers(&namespace) {
        return Err(Status::conflict_with(
            &GroupResource::new("", "namespaces"),
            &key.name,
            STILL_TERMINATING,
        ));
    }
    if non_empty(&namespace, "/metadata/finalizers") || dry_run {
        return Ok(namespace);
    }
    match req
        .ctx
        .store
        .delete(
            &req.resource.storage(),
            key,
            Some(Preconditions {
                uid: Some(meta_str(&namespace, "uid").to_owned()).filter(|u| !u.is_empty()),
                resource_version: None,
            }),
        )
        .await
    {
        Ok(deleted) => Ok(deleted),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_goes_during_an_update_only_once_both_finalizer_lists_are_empty() {
        let deleting = |spec: Value, meta: Value| {
            json!({"metadata": {"name": "n", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": meta},
                   "spec": {"finalizers": spec}})
        };
        assert!(!should_delete_during_update(&deleting(
            json!(["kubernetes"]),
            json!([])
        )));
        assert!(!should_delete_during_update(&deleting(json!([]), json!(["x"]))));
        assert!(should_delete_during_update(&deleting(json!([]), json!([]))));
        assert!(!should_delete_during_update(
            &json!({"metadata": {"name": "n"}, "spec": {}})
        ));
    }
}
