//! The aggregated discovery wire types (`apidiscovery.k8s.io/v2`, `k8s.io/api/apidiscovery/v2`): the
//! `APIGroupDiscoveryList` a kube-apiserver serves for `/api` and `/apis`, which peer-aggregated
//! discovery merges.
//!
//! A namespace of plain data types, named as upstream names them. Fields serialize in the order of
//! the Go structs, with their `omitempty` rules, so that the JSON of a list equals what
//! kube-apiserver writes and [`APIGroupDiscoveryList::etag`] hashes the same bytes upstream hashes.
//!
//! Encoding follows Go's `encoding/json` field by field: an `omitempty` field is left out when it
//! is an empty string, an empty list or an absent (`nil` pointer) value, every other field is
//! always written. The one difference: Go writes a `nil` list without `omitempty` (`items`,
//! `verbs`) as `null`, these types (which cannot tell `nil` from empty) as `[]`.
//!
//! Decoding follows Go's `encoding/json` into these structs: unknown fields are dropped, a missing
//! field or a `null` gives the zero value (empty string, empty list, `None`). Upstream decodes a
//! peer's documents the same way before merging them, so whatever a newer peer adds that this
//! server does not know never reaches the merged document.
//!
//! ```
//! use mvp_core::apidiscovery::APIGroupDiscovery;
//!
//! let group: APIGroupDiscovery = serde_json::from_str(
//!     r#"{"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": null, "x": 1}]}"#,
//! )?;
//! assert_eq!(group.metadata.name, "apps");
//! assert!(group.versions[0].resources.is_empty());
//! // `resources` and `freshness` are `omitempty` upstream: left out when empty.
//! assert_eq!(
//!     serde_json::to_string(&group)?,
//!     r#"{"metadata":{"name":"apps"},"versions":[{"version":"v1"}]}"#
//! );
//! # Ok::<(), serde_json::Error>(())
//! ```

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Digest as _;

/// `APIGroupDiscoveryList`: every group a server serves at `/apis` (or the core group at `/api`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIGroupDiscoveryList {
    /// `APIGroupDiscoveryList` (omitted when empty, `metav1.TypeMeta`'s `omitempty`).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub kind: String,
    /// `apidiscovery.k8s.io/v2` (or `…/v2beta1`, same shape); omitted when empty.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_version: String,
    /// Always empty in discovery; written (as `{}`) even so: Go's `omitempty` never omits a struct.
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: ListMeta,
    /// The groups, in the server's preference order (always written).
    #[serde(default, deserialize_with = "nullable")]
    pub items: Vec<APIGroupDiscovery>,
}

/// What upstream hashes for the ETag: the list without `kind`/`apiVersion` (its TypeMeta is unset).
#[derive(Serialize)]
struct EtagInput<'a> {
    metadata: &'a ListMeta,
    items: &'a [APIGroupDiscovery],
}

impl APIGroupDiscoveryList {
    /// The `ETag` header value of this document: `"` + uppercase hex SHA-512 of the JSON of the list
    /// without `kind`/`apiVersion` + `"` (upstream `calculateETag` + `strconv.Quote`), so the same
    /// for the `v2` and `v2beta1` renderings of one document.
    ///
    /// Hashes the whole document: callers serving it repeatedly keep the value (as
    /// [`PeerAggregatedDiscoveryHandler`](crate::PeerAggregatedDiscoveryHandler) does).
    pub fn etag(&self) -> String {
        use std::fmt::Write as _;
        let input = EtagInput {
            metadata: &self.metadata,
            items: &self.items,
        };
        // Serializing these types cannot fail (string keys, no maps, no floats).
        let bytes = serde_json::to_vec(&input).unwrap_or_default();
        let digest = sha2::Sha512::digest(&bytes);
        let mut etag = String::with_capacity(2 + 2 * digest.len());
        etag.push('"');
        for byte in digest {
            let _ = write!(etag, "{byte:02X}");
        }
        etag.push('"');
        etag
    }
}

/// `metadata` of the list (`metav1.ListMeta`): always empty in discovery, written as `{}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListMeta {}

/// `APIGroupDiscovery`: one group, with its versions in preference order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct APIGroupDiscovery {
    /// The group's name (empty for the core group).
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: GroupMetadata,
    /// The versions, preferred first (omitted when empty).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<APIVersionDiscovery>,
}

impl APIGroupDiscovery {
    /// The group's name (`metadata.name`; empty for the core group).
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
}

/// `metadata` of a group: the parts of `metav1.ObjectMeta` discovery fills.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupMetadata {
    /// The group's name; empty (and then omitted) for the core group.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// Go's zero `creationTimestamp`, which kube-apiserver up to 1.33 writes as `null` and 1.34+
    /// omits (upstream PR #130989): `Some(())` writes `"creationTimestamp": null`, `None` nothing.
    /// Decoding gives `Some(())` whenever the key is present.
    #[serde(
        default,
        deserialize_with = "present",
        serialize_with = "null",
        skip_serializing_if = "Option::is_none"
    )]
    pub creation_timestamp: Option<()>,
}

/// `APIVersionDiscovery`: one version of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct APIVersionDiscovery {
    /// The version's name (`v1`, `v1beta1`, …); always written.
    #[serde(default, deserialize_with = "nullable")]
    pub version: String,
    /// The resources of this group version (omitted when empty, as for a `Stale` version).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<APIResourceDiscovery>,
    /// `Current`, or `Stale` for an aggregated server that could not be reached (omitted when
    /// empty).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub freshness: String,
}

/// `APIResourceDiscovery`: one resource of a group version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APIResourceDiscovery {
    /// The plural resource name (always written, as are `scope`, `singularResource`, `verbs`).
    #[serde(default, deserialize_with = "nullable")]
    pub resource: String,
    /// The kind of the objects (group and version empty for the resource's own group version);
    /// `None` (omitted) for a resource that only has subresources (upstream `*GroupVersionKind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_kind: Option<GroupVersionKind>,
    /// `Namespaced` or `Cluster`.
    #[serde(default, deserialize_with = "nullable")]
    pub scope: String,
    /// The singular resource name.
    #[serde(default, deserialize_with = "nullable")]
    pub singular_resource: String,
    /// The verbs the resource supports (no `omitempty`: `[]` when empty).
    #[serde(default, deserialize_with = "nullable")]
    pub verbs: Vec<String>,
    /// Short names (omitted when empty).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories such as `all` (omitted when empty).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Subresources (omitted when empty).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub subresources: Vec<APISubresourceDiscovery>,
}

/// `APISubresourceDiscovery`: one subresource of a resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct APISubresourceDiscovery {
    /// The subresource's name (`status`, `scale`, …); always written.
    #[serde(default, deserialize_with = "nullable")]
    pub subresource: String,
    /// The kind the subresource returns; `None` (omitted) for one that returns no object
    /// (upstream `*GroupVersionKind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_kind: Option<GroupVersionKind>,
    /// The kinds the subresource accepts (omitted when empty).
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub accepted_types: Vec<GroupVersionKind>,
    /// The verbs the subresource supports (no `omitempty`: `[]` when empty).
    #[serde(default, deserialize_with = "nullable")]
    pub verbs: Vec<String>,
}

/// `responseKind` and `acceptedTypes` entries (`metav1.GroupVersionKind`: no `omitempty`, all three
/// fields always written).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// The group; empty for a kind of the resource's own group.
    #[serde(default, deserialize_with = "nullable")]
    pub group: String,
    /// The version; empty for a kind of the resource's own group version.
    #[serde(default, deserialize_with = "nullable")]
    pub version: String,
    /// The kind.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
}

/// Go's decoding of `null`: the zero value.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `Some(())` for a key that is present, whatever its value.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<()>, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| Some(()))
}

fn null<S: Serializer>(_: &Option<()>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_and_null_is_the_zero_value() {
        let group: APIGroupDiscovery = serde_json::from_value(json!({
            "metadata": {"name": "g", "creationTimestamp": null, "uid": "x"},
            "versions": [{"version": "v1", "freshness": "Current", "resources": [{
                "resource": "things", "responseKind": null, "scope": "Cluster", "verbs": null,
                "subresources": [{"subresource": "status", "acceptedTypes": [], "verbs": ["get"]}],
                "newField": true
            }]}]
        }))
        .unwrap();
        let resource = &group.versions[0].resources[0];
        assert_eq!(resource.response_kind, None);
        assert!(resource.verbs.is_empty());
        assert_eq!(group.metadata.creation_timestamp, Some(()));
        assert_eq!(
            serde_json::to_value(&group).unwrap(),
            json!({"metadata": {"name": "g", "creationTimestamp": null}, "versions": [{
                "version": "v1", "resources": [{
                    "resource": "things", "scope": "Cluster", "singularResource": "", "verbs": [],
                    "subresources": [{"subresource": "status", "verbs": ["get"]}]
                }], "freshness": "Current"}]})
        );
    }

    /// Decodes `input` as a list and checks that encoding it again gives `input` byte for byte once
    /// its whitespace is removed (`input` is written in upstream's field order and holds no string
    /// with whitespace), so the omitted fields and the key order are both checked.
    fn round_trip(input: &str) -> APIGroupDiscoveryList {
        let list: APIGroupDiscoveryList = serde_json::from_str(input).unwrap();
        let compact: String = input.chars().filter(|c| !c.is_whitespace()).collect();
        assert_eq!(serde_json::to_string(&list).unwrap(), compact);
        list
    }

    #[test]
    fn a_peer_resource_without_response_kind_round_trips() {
        let list = round_trip(
            r#"{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {}, "items": [{"metadata": {"name": "metrics.example.io"},
                "versions": [{"version": "v1", "resources": [
                    {"resource": "nodes", "scope": "Cluster", "singularResource": "", "verbs": [],
                     "subresources": [{"subresource": "metrics",
                        "responseKind": {"group": "", "version": "", "kind": "NodeMetrics"},
                        "verbs": ["get"]}]},
                    {"resource": "pods", "responseKind": {"group": "", "version": "", "kind": "PodMetrics"},
                     "scope": "Namespaced", "singularResource": "pod", "verbs": ["get", "list"]}
                ], "freshness": "Current"}]}]}"#,
        );
        let resources = &list.items[0].versions[0].resources;
        assert_eq!(resources[0].response_kind, None);
        assert_eq!(resources[1].response_kind.as_ref().unwrap().kind, "PodMetrics");
    }

    #[test]
    fn a_subresource_with_accepted_types_round_trips() {
        let list = round_trip(
            r#"{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {}, "items": [{"metadata": {"name": "apps"},
                "versions": [{"version": "v1", "resources": [
                    {"resource": "deployments",
                     "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                     "scope": "Namespaced", "singularResource": "deployment",
                     "verbs": ["create", "get"], "shortNames": ["deploy"], "categories": ["all"],
                     "subresources": [
                        {"subresource": "scale",
                         "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                         "acceptedTypes": [{"group": "autoscaling", "version": "v1", "kind": "Scale"},
                                           {"group": "autoscaling", "version": "v2", "kind": "Scale"}],
                         "verbs": ["get", "patch", "update"]},
                        {"subresource": "exec",
                         "acceptedTypes": [{"group": "", "version": "v1", "kind": "PodExecOptions"}],
                         "verbs": []}
                     ]}
                ], "freshness": "Current"}]}]}"#,
        );
        let subresources = &list.items[0].versions[0].resources[0].subresources;
        assert_eq!(subresources[0].accepted_types.len(), 2);
        assert_eq!(subresources[1].response_kind, None);
    }

    #[test]
    fn a_stale_version_without_resources_round_trips() {
        let list = round_trip(
            r#"{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {}, "items": [
                    {"metadata": {"name": "unreachable.example.io"},
                     "versions": [{"version": "v1beta1", "freshness": "Stale"}]},
                    {"metadata": {"name": "empty.example.io"}},
                    {"metadata": {"name": "unknown.example.io"}, "versions": [{"version": "v1"}]}
                ]}"#,
        );
        assert!(list.items[0].versions[0].resources.is_empty());
        assert_eq!(list.items[0].versions[0].freshness, "Stale");
        // The same from explicit empties and nulls: omitempty drops all of them.
        let from_nulls: APIGroupDiscoveryList = serde_json::from_str(
            r#"{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": null, "items": [
                    {"metadata": {"name": "unreachable.example.io"},
                     "versions": [{"version": "v1beta1", "resources": [], "freshness": "Stale"}]},
                    {"metadata": {"name": "empty.example.io"}, "versions": []},
                    {"metadata": {"name": "unknown.example.io"},
                     "versions": [{"version": "v1", "resources": null, "freshness": ""}]}
                ]}"#,
        )
        .unwrap();
        assert_eq!(from_nulls, list);
        assert_eq!(
            serde_json::to_string(&from_nulls).unwrap(),
            serde_json::to_string(&list).unwrap()
        );
    }

    #[test]
    fn etag_is_the_quoted_uppercase_sha512_of_the_list_without_type_meta() {
        let mut list = APIGroupDiscoveryList {
            kind: "APIGroupDiscoveryList".to_owned(),
            api_version: "apidiscovery.k8s.io/v2".to_owned(),
            ..Default::default()
        };
        let etag = list.etag();
        // SHA-512 of `{"metadata":{},"items":[]}`.
        let want: String = sha2::Sha512::digest(br#"{"metadata":{},"items":[]}"#)
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        assert_eq!(etag, format!("\"{want}\""));
        list.api_version = "apidiscovery.k8s.io/v2beta1".to_owned();
        assert_eq!(list.etag(), etag, "apiVersion is not hashed");
        list.items.push(APIGroupDiscovery::default());
        assert_ne!(list.etag(), etag);
    }
}
