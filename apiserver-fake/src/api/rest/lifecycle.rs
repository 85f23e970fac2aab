//! What kube-apiserver's registries and admission do around an object's life that the generic handlers
//! need: per-resource defaults on create (`PrepareForCreate`), the `NamespaceLifecycle` admission check,
//! the system namespaces, and the status the apiextensions controllers give a new CRD.

use serde_json::{Value, json};

use super::ResourceInfo;
use super::object::set_in;
use crate::api::status::{Status, StatusCause};
use crate::store::GroupResource;
use crate::store::{ObjectKey, StorageResource, Store, StoreError};

/// Namespaces kube-apiserver's bootstrap controller creates and keeps; creates into them never wait
/// for the namespace object (so a fresh fake works before anything created them).
pub(crate) const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Storage unit of namespaces.
pub(crate) fn namespaces() -> StorageResource {
    StorageResource::new("", "namespaces")
}

/// Storage unit of CRDs.
pub(crate) fn custom_resource_definitions() -> StorageResource {
    StorageResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}

/// A `Namespace` object as the namespace registry stores it.
pub(crate) fn namespace_object(name: &str) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    prepare_namespace(&mut object, name);
    object
}

fn prepare_namespace(object: &mut Value, name: &str) {
    // Upstream (1.21+) labels every namespace with its name, finalizes with `kubernetes`, and starts it
    // Active.
    set_in(
        object,
        &["metadata", "labels", "kubernetes.io/metadata.name"],
        json!(name),
    );
    // `namespaceStrategy.PrepareForCreate`: the `kubernetes` finalizer is added to those sent.
    let mut finalizers = object
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == "kubernetes") {
        finalizers.push(json!("kubernetes"));
    }
    set_in(object, &["spec", "finalizers"], Value::Array(finalizers));
    set_in(object, &["status"], json!({"phase": "Active"}));
}

/// Creates the system namespaces that do not exist yet (the bootstrap controller's job; call once per
/// cluster at startup). Errors other than "already exists" are returned.
pub(crate) async fn ensure_system_namespaces(store: &dyn Store) -> Result<(), StoreError> {
    for name in SYSTEM_NAMESPACES {
        match store
            .create(&namespaces(), &ObjectKey::cluster(name), namespace_object(name))
            .await
        {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `PrepareForCreate` of the registries: clients cannot set status through the main resource, and a
/// few resources start with a status of their own.
pub(crate) fn prepare_for_create(resource: &ResourceInfo, object: &mut Value, now: &str) {
    let Some(map) = object.as_object_mut() else { return };
    if resource.has_status() {
        if resource.custom {
            map.remove("status");
        } else {
            map.insert("status".to_owned(), json!({}));
        }
    }
    match (resource.group.as_str(), resource.resource.as_str()) {
        ("", "namespaces") => {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            prepare_namespace(object, &name);
        }
        ("", "secrets")
            if object
                .get("type")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            set_in(object, &["type"], json!("Opaque"));
        }
        ("", "pods") => {
            set_in(
                object,
                &["status"],
                json!({"phase": "Pending", "qosClass": "BestEffort"}),
            );
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => establish_crd(object, now),
        _ => {}
    }
}

/// What the CRD naming and establishing controllers write once a CRD is created: defaulted names,
/// `acceptedNames`, `NamesAccepted` and `Established` conditions and `storedVersions`, so that
/// `kubectl wait --for=condition=Established` and `kubectl get crd` behave at once.
pub(crate) fn establish_crd(crd: &mut Value, now: &str) {
    let Some(names) = crd.pointer_mut("/spec/names").and_then(Value::as_object_mut) else {
        return;
    };
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !names.contains_key("singular") {
        names.insert("singular".to_owned(), json!(kind.to_lowercase()));
    }
    if !names.contains_key("listKind") {
        names.insert("listKind".to_owned(), json!(format!("{kind}List")));
    }
    let accepted = Value::Object(names.clone());
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|versions| {
            versions
                .iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let status = json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    });
    set_in(crd, &["status"], status);
}

/// What the CRD strategy's `PrepareForUpdate` does to `status.storedVersions`: a storage version not
/// yet listed is appended (objects may now be stored at it); earlier ones stay until a client (a
/// storage migration) removes them through `/status`.
pub(crate) fn record_stored_version(crd: &mut Value) {
    let Some(storage) = crate::api::rest::conversion::storage_version(crd).map(str::to_owned) else {
        return;
    };
    let Some(map) = crd.as_object_mut() else {
        return;
    };
    let status = map.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
    if let Some(stored) = stored.as_array_mut()
        && !stored.iter().any(|v| v.as_str() == Some(storage.as_str()))
    {
        stored.push(Value::String(storage));
    }
}

/// `NamespaceLifecycle` admission for creates: the namespace must exist (system namespaces always do)
/// and must not be terminating (403 with upstream's text and its `NamespaceTerminating` cause).
pub(crate) async fn admit_create(
    store: &dyn Store,
    resource: &ResourceInfo,
    namespace: &str,
    name: &str,
) -> Result<(), Status> {
    if SYSTEM_NAMESPACES.contains(&namespace) {
        return Ok(());
    }
    match store.get(&namespaces(), &ObjectKey::cluster(namespace)).await {
        Ok(ns) if ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating") => {
            let mut status = Status::forbidden(
                &resource.group_resource(),
                name,
                &format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            );
            if let Some(details) = status.details.as_mut() {
                details.causes.push(StatusCause {
                    reason: "NamespaceTerminating".to_owned(),
                    message: format!("namespace {namespace} is being terminated"),
                    field: "metadata.namespace".to_owned(),
                });
            }
            Err(status)
        }
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => Err(Status::not_found(
            &GroupResource::new("", "namespaces"),
            namespace,
        )),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn crd_gets_accepted_names_and_conditions() {
        let mut crd = json!({"spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v2", "served": true, "storage": false}]}});
        establish_crd(&mut crd, "2024-01-01T00:00:00Z");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(crd["status"]["acceptedNames"]["singular"], "widget");
        assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
        assert_eq!(crd["status"]["conditions"][1]["status"], "True");
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
        // A new storage version is added to what is stored, the old one stays.
        crd["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": false},
            {"name": "v2", "served": true, "storage": true}]);
        record_stored_version(&mut crd);
        record_stored_version(&mut crd);
        assert_eq!(crd["status"]["storedVersions"], json!(["v1", "v2"]));
    }

    #[tokio::test]
    async fn system_namespaces_are_created_once() {
        let store = MemoryStore::new();
        ensure_system_namespaces(&store).await.unwrap();
        ensure_system_namespaces(&store).await.unwrap();
        let (items, _) = store.list(&namespaces(), None).await.unwrap();
        assert_eq!(items.len(), SYSTEM_NAMESPACES.len());
        let default = store
            .get(&namespaces(), &ObjectKey::cluster("default"))
            .await
            .unwrap();
        assert_eq!(default["status"]["phase"], "Active");
        assert_eq!(
            default["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "default"
        );
    }
}
