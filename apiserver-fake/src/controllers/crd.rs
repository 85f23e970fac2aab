//! CustomResourceDefinitions: what the apiextensions-apiserver half of kube-apiserver does for the fake.
//!
//! Every server watches the CRDs in the shared store; whenever one is created, changed or deleted it
//! rebuilds what it serves (built-ins plus the CRDs' served versions), so a CRD created through any server
//! becomes served and discoverable on every server sharing the store, as on real servers sharing etcd.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::api::catalog::{KubeVersion, ServedApis, custom_groups_from_crds};
use crate::controllers::informer::run_informer;
use crate::store::{ObjectKey, StorageResource, Store};

/// The storage resource of CRDs.
pub(crate) fn crd_resource() -> StorageResource {
    StorageResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}

/// Why the custom-resources file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CustomResourcesFileError {
    /// The file could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is neither a CRD, a list of CRDs nor a YAML stream of CRDs.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// Reads CRDs from a JSON or YAML file: one object, a `List`/array of objects, or a YAML stream.
pub(crate) fn read_custom_resources_file(path: &Path) -> Result<Vec<Value>, CustomResourcesFileError> {
    let display = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CustomResourcesFileError::Read {
        path: display.clone(),
        source,
    })?;
    let invalid = |reason: String| CustomResourcesFileError::Invalid {
        path: display.clone(),
        reason,
    };
    let mut documents = Vec::new();
    for value in crate::api::yaml::decode_stream(&text).map_err(|e| invalid(e.to_string()))? {
        match value {
            Value::Null => {}
            Value::Array(items) => documents.extend(items),
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                documents.extend(
                    map.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => documents.push(other),
        }
    }
    for crd in &documents {
        if crd.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            return Err(invalid(format!(
                "expected CustomResourceDefinition objects, found kind {}",
                crd.get("kind").unwrap_or(&Value::Null)
            )));
        }
        if crd.pointer("/metadata/name").and_then(Value::as_str).is_none() {
            return Err(invalid(
                "a CustomResourceDefinition has no metadata.name".to_owned(),
            ));
        }
    }
    Ok(documents)
}

/// Creates `crds` in the store unless they already exist (several servers may load the same file), as
/// a `binary_version` kube-apiserver would have created them through the API.
pub(crate) async fn create_crds(store: &dyn Store, crds: Vec<Value>, binary_version: KubeVersion) {
    let now = crate::store::now_timestamp();
    let resource = crd_resource();
    let bump = crate::api::rest::generation::builtin(&resource.group, &resource.resource, binary_version);
    for mut crd in crds {
        // As if created through the API: accepted names, the Established condition, generation 1.
        crate::api::rest::lifecycle::establish_crd(&mut crd, &now);
        crate::api::rest::generation::prepare_for_create(bump, &mut crd);
        let Some(name) = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            continue;
        };
        let _ = store
            .create(&crd_resource(), &ObjectKey::cluster(&name), crd)
            .await;
    }
}

/// Keeps a server's served APIs equal to its built-ins plus the CRDs in the store.
pub(crate) async fn run_crd_controller(
    store: Arc<dyn Store>,
    builtin: Arc<ServedApis>,
    served: Arc<watch::Sender<Arc<ServedApis>>>,
    cancel: CancellationToken,
) {
    run_informer(store, crd_resource(), None, cancel, |crds| {
        publish(&builtin, crds, &served)
    })
    .await;
}

fn publish(builtin: &ServedApis, crds: &[Value], served: &watch::Sender<Arc<ServedApis>>) {
    let next = builtin.with_custom(&custom_groups_from_crds(crds));
    served.send_if_modified(|current| {
        if **current == next {
            false
        } else {
            *current = Arc::new(next);
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn crds_from_the_file_start_at_generation_one() {
        let store = MemoryStore::new();
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]}});
        create_crds(&store, vec![crd], KubeVersion::NEWEST).await;
        let stored = store
            .get(&crd_resource(), &ObjectKey::cluster("widgets.example.com"))
            .await
            .unwrap();
        assert_eq!(stored["metadata"]["generation"], 1);
        assert_eq!(stored["status"]["acceptedNames"]["kind"], "Widget");
    }
}
