//! `delete` and `deletecollection`, with `DeleteOptions` (body or query): preconditions, `dryRun`,
//! `propagationPolicy` and `orphanDependents` (the `orphan` and `foregroundDeletion` finalizers they
//! leave, decided in [`super::garbage_collection`]), and finalizers (an object with finalizers only gets
//! `deletionTimestamp` and `deletionGracePeriodSeconds: 0`; it goes once a write removes the last one).
//! Every resource deletes as upstream's non-graceful strategies do (the fake has no kubelet, so Pods,
//! which are never bound, go at once as upstream's unscheduled Pods do).
//!
//! Responses follow the registries: resources whose upstream store sets `ReturnDeletedObject` (pods,
//! services, namespaces, custom resources, ...) answer with the object, the others with a `Success`
//! Status naming the object. Deleting a namespace marks it `Terminating` and leaves its content to the
//! namespace controller ([`super::namespace_deletion`]); deleting a CRD removes its custom resources.

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::admission::{self, Attributes, Operation};
use super::garbage_collection::{self, Propagation};
use super::lifecycle::{custom_resource_definitions, namespaces};
use super::object::{meta_str, set_in};
use super::read::{Selection, list_metadata, render_object, respond_list};
use super::write::with_warnings;
use super::{RestRequest, read_body};
use crate::api::status::{Status, StatusDetails};
use crate::store::{ObjectKey, Preconditions, StorageResource, resource_version};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PreconditionsBody {
    uid: Option<String>,
    resource_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteOptionsBody {
    preconditions: Option<PreconditionsBody>,
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    dry_run: Option<Vec<String>>,
}

/// The effective delete options of a request.
#[derive(Debug, Default)]
struct DeleteOptions {
    preconditions: Option<Preconditions>,
    dry_run: bool,
    propagation: Propagation,
}

async fn delete_options(req: &RestRequest<'_>, body: Body) -> Result<DeleteOptions, Status> {
    let body = read_body(body).await?;
    let parsed: DeleteOptionsBody = if body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptionsBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| Status::bad_request(e.to_string()))?
    };
    let propagation = propagation_options(req, &parsed)?;
    let dry_run = match parsed.dry_run {
        Some(values) if values.iter().any(|v| v != "All") => {
            return Err(Status::bad_request(format!(
                "dryRun: Unsupported value: {values:?}: supported values: \"All\""
            )));
        }
        Some(values) => !values.is_empty() || req.query.dry_run()?,
        None => req.query.dry_run()?,
    };
    let preconditions = match parsed.preconditions {
        None => None,
        Some(p) => {
            let resource_version = match p.resource_version.filter(|rv| !rv.is_empty()) {
                None => None,
                Some(rv) => Some(
                    rv.parse::<u64>()
                        .map_err(|_| Status::bad_request(format!("invalid resource version: {rv:?}")))?,
                ),
            };
            Some(Preconditions {
                uid: p.uid.filter(|u| !u.is_empty()),
                resource_version,
            })
        }
    };
    Ok(DeleteOptions {
        preconditions,
        dry_run,
        propagation,
    })
}

/// `orphanDependents` and `propagationPolicy` from the body, else the query, validated as upstream's
/// handler does before anything is read.
fn propagation_options(req: &RestRequest<'_>, parsed: &DeleteOptionsBody) -> Result<Propagation, Status> {
    let policy = parsed
        .propagation_policy
        .as_deref()
        .or(req.query.get("propagationPolicy"));
    let orphan = match parsed.orphan_dependents {
        Some(orphan) => Some(orphan),
        None if req.query.get("orphanDependents").is_some() => Some(req.query.flag("orphanDependents")?),
        None => None,
    };
    Propagation::parse(orphan, policy)
}

/// Whether the registry of `group`/`resource` answers deletes with the object (`ReturnDeletedObject`).
fn returns_deleted_object(group: &str, resource: &str, custom: bool) -> bool {
    custom
        || matches!(
            (group, resource),
            (
                "",
                "pods"
                    | "services"
                    | "serviceaccounts"
                    | "namespaces"
                    | "persistentvolumes"
                    | "persistentvolumeclaims"
            ) | ("storage.k8s.io", "storageclasses")
                | ("apiextensions.k8s.io", "customresourcedefinitions")
        )
}

fn check_preconditions(req: &RestRequest<'_>, current: &Value, pre: &Preconditions) -> Result<(), Status> {
    let uid = meta_str(current, "uid");
    let conflict = |message: String| {
        Status::conflict_with(
            &req.resource.group_resource(),
            meta_str(current, "name"),
            &message,
        )
    };
    if let Some(expected) = pre.uid.as_deref().filter(|u| *u != uid) {
        return Err(conflict(format!(
            "Precondition failed: UID in precondition: {expected}, UID in object meta: {uid}"
        )));
    }
    let rv = resource_version(current).unwrap_or(0);
    if let Some(expected) = pre.resource_version.filter(|r| *r != rv) {
        return Err(conflict(format!(
            "Precondition failed: ResourceVersion in precondition: {expected}, ResourceVersion in object meta: {rv}"
        )));
    }
    Ok(())
}

/// Deletes one object; returns what the response shows, and adds admission's warnings to `warnings`.
async fn delete_one(
    req: &RestRequest<'_>,
    key: &ObjectKey,
    options: &DeleteOptions,
    warnings: &mut Vec<String>,
) -> Result<Value, Status> {
    let storage = req.resource.storage();
    let store = req.ctx.store.as_ref();
    let current = store.get(&storage, key).await?;
    if let Some(pre) = &options.preconditions {
        check_preconditions(req, &current, pre)?;
    }
    warnings.extend(admit_delete(req, &current, options).await?);
    if storage == namespaces() {
        return super::namespace_deletion::delete(req, key, current, options.dry_run).await;
    }
    if let Some(pending) = mark_deleting(req, key, current.clone(), options).await? {
        return Ok(pending);
    }
    if options.dry_run {
        return Ok(current);
    }
    let deleted = store.delete(&storage, key, options.preconditions.clone()).await?;
    if storage == custom_resource_definitions() {
        delete_custom_resources(req, &deleted).await;
    }
    Ok(deleted)
}

/// Admission of a delete: mutating webhooks are called without an object (upstream's handler admits
/// the delete before the registry reads it), validating ones and the ValidatingAdmissionPolicies with
/// the stored object as `oldObject`. Returns their warnings, which upstream's response carries as for
/// any write.
async fn admit_delete(
    req: &RestRequest<'_>,
    current: &Value,
    options: &DeleteOptions,
) -> Result<Vec<String>, Status> {
    let with_options = |mut attributes: Attributes| {
        // The handler's attributes name what the URL names: the object, or nothing for a collection
        // delete, whose items are admitted with an empty name (`AdmissionToValidateObjectDeleteFunc`).
        attributes.name = req.info.name.clone();
        attributes.dry_run = options.dry_run;
        if options.dry_run {
            attributes.options["dryRun"] = json!(["All"]);
        }
        attributes
    };
    let mut attributes = with_options(Attributes::of(
        req,
        Operation::Delete,
        None,
        None,
        "DeleteOptions",
    ));
    let mut warnings = admission::mutate(req, &mut attributes).await?.warnings;
    let attributes = with_options(Attributes::of(
        req,
        Operation::Delete,
        None,
        Some(current),
        "DeleteOptions",
    ));
    warnings.extend(super::validating_admission_policy::admit_delete(req, &attributes, current).await?);
    warnings.extend(admission::validate(req, &attributes).await?.warnings);
    Ok(warnings)
}

/// `updateForGracefulDeletionAndFinalizers` for a non-graceful strategy: when the object has finalizers
/// once this delete's GC finalizers are applied ([`Propagation::deletion_finalizers`]), it is written with
/// them, `deletionTimestamp` (kept when already set) and `deletionGracePeriodSeconds: 0` (a first
/// marking bumps a non-zero `generation`), and returned: it stays until its finalizers are removed.
/// `None`: no finalizers are left, the caller deletes it now. Retried on a write conflict as
/// `GuaranteedUpdate` does; under dry run nothing is written.
async fn mark_deleting(
    req: &RestRequest<'_>,
    key: &ObjectKey,
    mut current: Value,
    options: &DeleteOptions,
) -> Result<Option<Value>, Status> {
    let storage = req.resource.storage();
    let policy = garbage_collection::default_policy(&req.resource);
    for _ in 0..MARK_ATTEMPTS {
        let existing = garbage_collection::finalizers(&current);
        let update = options.propagation.deletion_finalizers(policy, &existing);
        let finalizers = update.clone().unwrap_or(existing);
        if finalizers.is_empty() {
            tracing::debug!(resource = ?storage, name = %key.name, "no finalizers: deleting now");
            return Ok(None);
        }
        let already_deleting = current.pointer("/metadata/deletionTimestamp").is_some();
        let grace_zero = current.pointer("/metadata/deletionGracePeriodSeconds") == Some(&json!(0));
        if already_deleting && grace_zero && update.is_none() {
            // GuaranteedUpdate of an unchanged object writes nothing.
            return Ok(Some(current));
        }
        let mut marked = current.clone();
        set_in(&mut marked, &["metadata", "finalizers"], json!(finalizers));
        if !already_deleting {
            if let Some(generation) = marked.pointer("/metadata/generation").and_then(Value::as_i64)
                && generation > 0
            {
                set_in(&mut marked, &["metadata", "generation"], json!(generation + 1));
            }
            set_in(
                &mut marked,
                &["metadata", "deletionTimestamp"],
                json!(crate::store::now_timestamp()),
            );
        }
        set_in(&mut marked, &["metadata", "deletionGracePeriodSeconds"], json!(0));
        tracing::debug!(resource = ?storage, name = %key.name, ?finalizers, "marked for deletion: waiting for finalizers");
        if options.dry_run {
            return Ok(Some(marked));
        }
        match req
            .ctx
            .store
            .update(&storage, key, marked, resource_version(&current))
            .await
        {
            Ok(written) => return Ok(Some(written)),
            Err(crate::store::StoreError::Conflict { .. }) => {
                current = req.ctx.store.get(&storage, key).await?;
                if let Some(pre) = &options.preconditions {
                    check_preconditions(req, &current, pre)?;
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Status::conflict(&req.resource.group_resource(), &key.name))
}

/// Attempts of [`mark_deleting`] against concurrent writers.
const MARK_ATTEMPTS: usize = 5;

/// The CRD finalizer's work: delete the custom resources of a deleted CRD.
async fn delete_custom_resources(req: &RestRequest<'_>, crd: &Value) {
    let group = crd.pointer("/spec/group").and_then(Value::as_str);
    let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str);
    if let (Some(group), Some(plural)) = (group, plural) {
        delete_all(req.ctx.store.as_ref(), &StorageResource::new(group, plural), None).await;
    }
}

async fn delete_all(store: &dyn crate::store::Store, resource: &StorageResource, namespace: Option<&str>) {
    let Ok((items, _)) = store.list(resource, namespace).await else {
        return;
    };
    for item in items {
        let ns = meta_str(&item, "namespace");
        let key = ObjectKey {
            namespace: (!ns.is_empty()).then(|| ns.to_owned()),
            name: meta_str(&item, "name").to_owned(),
        };
        let _ = store.delete(resource, &key, None).await;
    }
}

/// DELETE on an object.
pub(crate) async fn delete(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let options = delete_options(req, body).await?;
    let mut warnings = Vec::new();
    let deleted = delete_one(req, &req.key(), &options, &mut warnings).await?;
    let still_there = deleted.pointer("/metadata/deletionTimestamp").is_some()
        && deleted
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
    if still_there || returns_deleted_object(&req.resource.group, &req.resource.resource, req.resource.custom)
    {
        // Upstream answers 202 only when the object stays and the client asked for cascading with the
        // legacy `orphanDependents: false`.
        let code = if still_there && options.propagation.orphan_dependents == Some(false) {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        return Ok(with_warnings(
            req.respond(code, &render_object(req, deleted)),
            &warnings,
        ));
    }
    let status = Status::success(StatusDetails {
        name: req.info.name.clone(),
        group: req.resource.group.clone(),
        kind: req.resource.resource.clone(),
        uid: meta_str(&deleted, "uid").to_owned(),
        ..StatusDetails::default()
    });
    Ok(with_warnings(req.format.error(status), &warnings))
}

/// DELETE on a collection: deletes the selected objects and answers with the list of them.
pub(crate) async fn delete_collection(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let options = delete_options(req, body).await?;
    let selection = Selection::from_request(req)?;
    // The registry lists what it deletes, with the request's list options (400 for a bad
    // `resourceVersion`, as a list).
    super::list_options::resource_version(&req.query, super::list_options::ReadPath::List)?;
    let (items, _) = req
        .ctx
        .store
        .list(&req.resource.storage(), req.namespace.as_deref())
        .await?;
    let mut deleted = Vec::new();
    let mut warnings = Vec::new();
    for (i, item) in items.into_iter().filter(|o| selection.matches(o)).enumerate() {
        if i % YIELD_EVERY == YIELD_EVERY - 1 {
            // Let the request deadline fire, and other requests run, in a long collection delete.
            tokio::task::yield_now().await;
        }
        let key = ObjectKey {
            namespace: req.namespace.clone(),
            name: meta_str(&item, "name").to_owned(),
        };
        match delete_one(req, &key, &options, &mut warnings).await {
            Ok(object) => deleted.push(object),
            Err(status) if status.code == 404 => {}
            Err(status) => return Err(status),
        }
    }
    let revision = req.ctx.store.current_revision().await?;
    // Upstream's warning recorder keeps each text once per response.
    let mut seen = std::collections::HashSet::new();
    warnings.retain(|warning| seen.insert(warning.clone()));
    let response = respond_list(req, list_metadata(revision, None, None), deleted).await?;
    Ok(with_warnings(response, &warnings))
}

/// Deletes between yields of a collection delete.
const YIELD_EVERY: usize = 100;
