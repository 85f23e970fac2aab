//! StorageVersion objects (`internal.apiserver.k8s.io/v1alpha1`), which the alpha proxy reads to learn
//! which server serves which group/version/resource (docs/mvp-behaviour.md §2.1).
//!
//! With the `StorageVersionAPI` gate on, every server records, for each resource it stores, one entry
//! `{apiServerID, encodingVersion, decodableVersions, servedVersions}` in the object named
//! `<group>.<resource>` (the core group written `core`), and the object's `commonEncodingVersion` and
//! `AllEncodingVersionsEqual` condition summarise the entries, as kube-apiserver's storage version manager
//! and updater do.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::catalog::ServedApis;
use crate::store::{ObjectKey, StorageResource, Store};

/// API group of StorageVersion objects.
pub(crate) const GROUP: &str = "internal.apiserver.k8s.io";
/// Resource name of StorageVersion objects.
pub(crate) const RESOURCE: &str = "storageversions";

/// What one server stores for one group/resource: mvp-core's record, which its StorageVersion feeder
/// writes for embedders the same way.
pub(crate) use mvp_core::feeders::ServerStorageVersion;

fn qualified(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// The entries a server with `apis` publishes, one per stored group/resource, sorted by object name.
/// The encoding version is the catalog's storage version of the resource (kube-apiserver's storage
/// factory choice); resources without storage (reviews, `bindings`, `componentstatuses`) have none.
pub(crate) fn server_storage_versions(apis: &ServedApis) -> Vec<ServerStorageVersion> {
    let mut by_name: BTreeMap<String, ServerStorageVersion> = BTreeMap::new();
    for group in &apis.groups {
        for version in &group.versions {
            for resource in &version.resources {
                let Some(storage_version) = &resource.storage_version else {
                    continue;
                };
                let group_name = if group.name.is_empty() {
                    "core"
                } else {
                    group.name.as_str()
                };
                let object_name = format!("{group_name}.{}", resource.name);
                let gv = qualified(&group.name, &version.version);
                let entry = by_name
                    .entry(object_name.clone())
                    .or_insert_with(|| ServerStorageVersion {
                        object_name,
                        encoding_version: storage_version.clone(),
                        decodable_versions: Vec::new(),
                        served_versions: Vec::new(),
                    });
                entry.decodable_versions.push(gv.clone());
                entry.served_versions.push(gv);
            }
        }
    }
    by_name.into_values().collect()
}

/// `status` of a StorageVersion object after putting `entry` for `server_id` into `existing` (the
/// current object's status, or `Null`), replacing that server's previous entry: mvp-core's merge, so an
/// embedder's feeder and the fake summarise entries (`commonEncodingVersion`, `AllEncodingVersionsEqual`)
/// identically.
pub(crate) use mvp_core::feeders::merged_storage_version_status as merged_status;
/// `status` after removing `server_id`'s entry (its server is gone).
pub(crate) use mvp_core::feeders::storage_version_status_without as status_without;

/// Writes this server's entries into the StorageVersion objects (the storage version manager's job at
/// startup). Conflicts with other servers writing the same object are retried.
pub(crate) async fn publish(store: &dyn Store, apis: &ServedApis, server_id: &str, now: &str) {
    let resource = StorageResource::new(GROUP, RESOURCE);
    for entry in server_storage_versions(apis) {
        let key = ObjectKey::cluster(&entry.object_name);
        for _attempt in 0..10 {
            let written = match store.get(&resource, &key).await {
                Ok(mut current) => {
                    // Optimistic concurrency: other servers publish and the garbage collector prunes
                    // the same objects; a conflict re-reads and merges again.
                    let revision = crate::store::resource_version(&current);
                    current["status"] = merged_status(&current["status"], server_id, &entry, now);
                    store.update(&resource, &key, current, revision).await.is_ok()
                }
                Err(_) => {
                    let object = json!({
                        "apiVersion": "internal.apiserver.k8s.io/v1alpha1",
                        "kind": "StorageVersion",
                        "metadata": { "name": entry.object_name },
                        "spec": {},
                        "status": merged_status(&Value::Null, server_id, &entry, now),
                    });
                    store.create(&resource, &key, object).await.is_ok()
                }
            };
            if written {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::{FeatureGates, KubeVersion, RuntimeConfig};

    fn apis(runtime_config: &str) -> ServedApis {
        ServedApis::builtin(
            KubeVersion { major: 1, minor: 36 },
            &runtime_config.parse::<RuntimeConfig>().unwrap(),
            &FeatureGates::default(),
        )
        .unwrap()
    }

    #[test]
    fn core_group_is_written_core_and_virtual_resources_have_none() {
        let entries = server_storage_versions(&apis(""));
        let names: Vec<&str> = entries.iter().map(|e| e.object_name.as_str()).collect();
        assert!(names.contains(&"core.pods"), "{names:?}");
        assert!(names.contains(&"batch.jobs"));
        assert!(!names.contains(&"authentication.k8s.io.selfsubjectreviews"));
        assert!(!names.contains(&"core.componentstatuses"));
        let pods = entries.iter().find(|e| e.object_name == "core.pods").unwrap();
        assert_eq!(pods.encoding_version, "v1");
        assert_eq!(pods.served_versions, vec!["v1"]);
    }

    #[test]
    fn disabled_group_publishes_no_entry() {
        let entries = server_storage_versions(&apis("batch/v1=false"));
        assert!(!entries.iter().any(|e| e.object_name == "batch.jobs"));
    }

    #[test]
    fn merge_replaces_own_entry_and_keeps_peers() {
        let entry = ServerStorageVersion {
            object_name: "batch.jobs".into(),
            encoding_version: "batch/v1".into(),
            decodable_versions: vec!["batch/v1".into()],
            served_versions: vec!["batch/v1".into()],
        };
        let status = merged_status(&Value::Null, "apiserver-b", &entry, "t0");
        let status = merged_status(&status, "apiserver-a", &entry, "t1");
        let status = merged_status(&status, "apiserver-a", &entry, "t2");
        let ids: Vec<&str> = status["storageVersions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["apiServerID"].as_str().unwrap())
            .collect();
        assert_eq!(ids, vec!["apiserver-a", "apiserver-b"]);
        assert_eq!(status["commonEncodingVersion"], "batch/v1");
        assert_eq!(status["conditions"][0]["lastTransitionTime"], "t0");
        let status = status_without(&status, "apiserver-a", "t3");
        assert_eq!(status["storageVersions"].as_array().unwrap().len(), 1);
    }
}
