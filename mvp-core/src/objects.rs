//! The Kubernetes objects the proxy reads, as small typed structs holding only the fields
//! upstream's peer proxy looks at.
//!
//! Decode them from the API's JSON with serde (`serde_json::from_value`, `from_slice`): fields
//! they do not name are ignored, missing or `null` ones take their empty value, so any object
//! the API serves decodes. Serializing writes the same fields back in the API's spelling.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// The label every kube-apiserver identity lease carries (`key`, `value`).
pub const IDENTITY_LEASE_LABEL: (&str, &str) = ("apiserver.kubernetes.io/identity", "kube-apiserver");

/// A `(group, version)` pair; the core group is `""`.
pub type GroupVersion = (String, String);

/// `null` decodes as the type's empty value, as Go's decoder leaves a zero value.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The part of `metadata` the proxy reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    /// `metadata.labels`.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
}

/// A `coordination.k8s.io/v1` Lease: each apiserver holds an identity lease in `kube-system`
/// named after its server ID (docs/mvp-behaviour.md §2.3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Lease {
    /// Name (the server ID for identity leases) and labels.
    #[serde(deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// Who holds it.
    #[serde(deserialize_with = "null_as_default")]
    pub spec: LeaseSpec,
}

/// The part of a Lease's `spec` the proxy reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LeaseSpec {
    /// `spec.holderIdentity`: for an identity lease, which run of the server holds it (it
    /// changes when the server restarts, and only then).
    pub holder_identity: Option<String>,
}

impl Lease {
    /// Whether this is a valid identity lease of a *peer* of the server `own_id`, as upstream's
    /// lease informer filter: it carries [`IDENTITY_LEASE_LABEL`], is not `own_id`'s own lease,
    /// and has a holder. Expiry is deliberately not checked (docs/mvp-behaviour.md §2.3,
    /// checklist 35): a lapsed lease is garbage-collected, and its deletion is the event.
    pub fn is_peer_identity_lease_of(&self, own_id: &str) -> bool {
        let (key, value) = IDENTITY_LEASE_LABEL;
        self.metadata.labels.get(key).map(String::as_str) == Some(value)
            && self.metadata.name != own_id
            && self.spec.holder_identity.is_some()
    }
}

/// An `internal.apiserver.k8s.io/v1alpha1` StorageVersion: which servers serve which versions
/// of one resource (docs/mvp-behaviour.md §2.1). Its name is `<group>.<resource>`, the core
/// group spelled `core`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct StorageVersion {
    /// The name, `<group>.<resource>`.
    #[serde(deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// Each server's entry.
    #[serde(deserialize_with = "null_as_default")]
    pub status: StorageVersionStatus,
}

/// The part of a StorageVersion's `status` the proxy reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StorageVersionStatus {
    /// One entry per apiserver that wrote one.
    #[serde(deserialize_with = "null_as_default")]
    pub storage_versions: Vec<ServerStorageVersion>,
}

/// One apiserver's entry in a StorageVersion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerStorageVersion {
    /// The server's ID.
    #[serde(rename = "apiServerID", deserialize_with = "null_as_default")]
    pub api_server_id: String,
    /// The versions it serves, `group/version` or `version`.
    #[serde(deserialize_with = "null_as_default")]
    pub served_versions: Vec<String>,
}

/// An `apiextensions.k8s.io/v1` CustomResourceDefinition, as far as group-version exclusion
/// reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct CustomResourceDefinition {
    /// The name.
    #[serde(deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// Group and versions.
    #[serde(deserialize_with = "null_as_default")]
    pub spec: CustomResourceDefinitionSpec,
}

/// The part of a CRD's `spec` exclusion reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct CustomResourceDefinitionSpec {
    /// `spec.group`.
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    /// `spec.versions`.
    #[serde(deserialize_with = "null_as_default")]
    pub versions: Vec<CustomResourceDefinitionVersion>,
}

/// One of a CRD's `spec.versions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct CustomResourceDefinitionVersion {
    /// The version's name.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
}

impl CustomResourceDefinition {
    /// The group versions the CRD defines: every listed version, served or not, because a CRD's
    /// group versions belong to the cluster, never to one peer.
    pub fn group_versions(&self) -> Vec<GroupVersion> {
        if self.spec.group.is_empty() {
            return Vec::new();
        }
        self.spec
            .versions
            .iter()
            .map(|v| (self.spec.group.clone(), v.name.clone()))
            .collect()
    }
}

/// An `apiregistration.k8s.io/v1` APIService, as far as group-version exclusion reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct ApiService {
    /// The name (`<version>.<group>`).
    #[serde(deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// Group, version and the backing service.
    #[serde(deserialize_with = "null_as_default")]
    pub spec: ApiServiceSpec,
}

/// The part of an APIService's `spec` exclusion reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct ApiServiceSpec {
    /// `spec.group` (`""` for the core group).
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    /// `spec.version`.
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    /// `spec.service`: set for an *aggregated* API, `None` for the local APIService
    /// kube-apiserver registers for each built-in group version.
    pub service: Option<ServiceReference>,
}

/// Where an aggregated APIService's backend runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct ServiceReference {
    /// The Service's namespace.
    #[serde(deserialize_with = "null_as_default")]
    pub namespace: String,
    /// The Service's name.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
}

impl ApiService {
    /// The group version of an *aggregated* APIService; nothing for a local one (excluding the
    /// local APIServices of built-in group versions would stop all proxying).
    pub fn group_versions(&self) -> Vec<GroupVersion> {
        if self.spec.service.is_some() && !self.spec.version.is_empty() {
            vec![(self.spec.group.clone(), self.spec.version.clone())]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gv(g: &str, v: &str) -> GroupVersion {
        (g.to_owned(), v.to_owned())
    }

    #[test]
    fn identity_lease_validity_follows_upstreams_filter() {
        let lease = |name: &str, label: Option<&str>, holder: serde_json::Value| -> Lease {
            let mut labels = serde_json::Map::new();
            if let Some(value) = label {
                labels.insert(IDENTITY_LEASE_LABEL.0.to_owned(), json!(value));
            }
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
                "spec": {"holderIdentity": holder, "renewTime": "2026-01-01T00:00:00.000000Z"}}))
            .unwrap()
        };
        assert!(lease("b", Some("kube-apiserver"), json!("b_1")).is_peer_identity_lease_of("a"));
        assert!(!lease("a", Some("kube-apiserver"), json!("a_1")).is_peer_identity_lease_of("a"));
        assert!(!lease("b", Some("other"), json!("b_1")).is_peer_identity_lease_of("a"));
        assert!(!lease("b", None, json!("b_1")).is_peer_identity_lease_of("a"));
        assert!(!lease("b", Some("kube-apiserver"), json!(null)).is_peer_identity_lease_of("a"));
        let bare: Lease = serde_json::from_value(json!({"metadata": null, "spec": null})).unwrap();
        assert!(!bare.is_peer_identity_lease_of("a"));
    }

    #[test]
    fn extracts_crd_versions_and_only_aggregated_apiservices() {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({"spec": {
            "group": "example.com", "names": {"plural": "foos"},
            "versions": [{"name": "v1", "served": true}, {"name": "v2alpha1", "served": false}]}}))
        .unwrap();
        assert_eq!(
            crd.group_versions(),
            vec![gv("example.com", "v1"), gv("example.com", "v2alpha1")]
        );
        let empty: CustomResourceDefinition = serde_json::from_value(json!({"spec": {}})).unwrap();
        assert!(empty.group_versions().is_empty());
        let aggregated: ApiService = serde_json::from_value(json!({"spec": {"group": "metrics.k8s.io",
            "version": "v1beta1", "service": {"namespace": "kube-system", "name": "metrics-server"}}}))
        .unwrap();
        assert_eq!(aggregated.group_versions(), vec![gv("metrics.k8s.io", "v1beta1")]);
        let local: ApiService =
            serde_json::from_value(json!({"spec": {"group": "batch", "version": "v1", "service": null}}))
                .unwrap();
        assert!(local.group_versions().is_empty());
        let local_core: ApiService = serde_json::from_value(json!({"spec": {"version": "v1"}})).unwrap();
        assert!(local_core.group_versions().is_empty());
    }

    #[test]
    fn storage_versions_decode_from_the_apis_json() {
        let sv: StorageVersion = serde_json::from_value(json!({
            "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion",
            "metadata": {"name": "batch.jobs", "uid": "x"},
            "status": {"storageVersions": [{"apiServerID": "a", "encodingVersion": "batch/v1",
                "servedVersions": ["batch/v1"]}], "conditions": []}}))
        .unwrap();
        assert_eq!(sv.metadata.name, "batch.jobs");
        assert_eq!(sv.status.storage_versions[0].api_server_id, "a");
        assert_eq!(sv.status.storage_versions[0].served_versions, ["batch/v1"]);
    }
}
