//! Aggregated discovery (`apidiscovery.k8s.io/v2`, and `v2beta1` where the minor still serves it):
//! one `APIGroupDiscoveryList` for `/apis` and one for `/api` (the core group).
//!
//! Field order follows the Go structs of `k8s.io/api/apidiscovery/v2`, so the JSON equals what
//! kube-apiserver writes, and the ETag is computed over the same bytes upstream hashes.

use serde::Serialize;
use sha2::Digest as _;

use crate::api::catalog::{ApiGroup, FeatureGates, KubeVersion, ServedApis};

/// Version of the aggregated discovery type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AggregatedVersion {
    /// `apidiscovery.k8s.io/v2` (every supported minor).
    V2,
    /// `apidiscovery.k8s.io/v2beta1`: served up to 1.32; 1.33 and 1.34 only with
    /// `AggregatedDiscoveryRemoveBetaType=false`; gone (gate locked) from 1.35.
    V2beta1,
}

impl AggregatedVersion {
    /// `v2` or `v2beta1`.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "v2",
            AggregatedVersion::V2beta1 => "v2beta1",
        }
    }

    /// `apiVersion` of the document.
    pub fn api_version(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "apidiscovery.k8s.io/v2",
            AggregatedVersion::V2beta1 => "apidiscovery.k8s.io/v2beta1",
        }
    }

    /// Content-Type of a JSON response.
    pub fn content_type(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            AggregatedVersion::V2beta1 => {
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            }
        }
    }

    /// Whether a `version` server with these gates serves this type.
    pub fn served(self, version: KubeVersion, gates: &FeatureGates) -> bool {
        match self {
            AggregatedVersion::V2 => true,
            AggregatedVersion::V2beta1 => !gates.enabled("AggregatedDiscoveryRemoveBetaType", version),
        }
    }
}

/// `metadata` of the list (always empty).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ListMeta {}

/// `metadata` of a group entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupMeta {
    /// Group name; absent for the core group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Up to 1.33 Go serialized the zero `creationTimestamp` as `null` (upstream PR #130989, 1.34,
    /// omits it). `Some(())` writes `"creationTimestamp": null`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "null")]
    pub creation_timestamp: Option<()>,
}

fn null<S: serde::Serializer>(_: &Option<()>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_none()
}

/// `responseKind`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupVersionKind {
    /// Empty for a kind of the resource's own group.
    pub group: String,
    /// Empty for a kind of the resource's own group.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// `APISubresourceDiscovery`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiSubresourceDiscovery {
    /// Subresource name.
    pub subresource: String,
    /// Returned kind.
    pub response_kind: GroupVersionKind,
    /// Verbs.
    pub verbs: Vec<String>,
}

/// `APIResourceDiscovery`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceDiscovery {
    /// Plural name.
    pub resource: String,
    /// Kind (group/version empty).
    pub response_kind: GroupVersionKind,
    /// `Namespaced` or `Cluster`.
    pub scope: &'static str,
    /// Singular name.
    pub singular_resource: String,
    /// Verbs.
    pub verbs: Vec<String>,
    /// Short names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Subresources.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subresources: Vec<ApiSubresourceDiscovery>,
}

/// `APIVersionDiscovery`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApiVersionDiscovery {
    /// Version name.
    pub version: String,
    /// Resources.
    pub resources: Vec<ApiResourceDiscovery>,
    /// `Current` for local APIs (`Stale` is for aggregated servers that could not be reached).
    pub freshness: String,
}

/// `APIGroupDiscovery`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApiGroupDiscovery {
    /// Group metadata.
    pub metadata: GroupMeta,
    /// Versions in preference order.
    pub versions: Vec<ApiVersionDiscovery>,
}

/// `APIGroupDiscoveryList` as served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiGroupDiscoveryList {
    /// `APIGroupDiscoveryList`.
    pub kind: &'static str,
    /// `apidiscovery.k8s.io/v2` or `.../v2beta1`.
    pub api_version: &'static str,
    /// Always empty.
    pub metadata: ListMeta,
    /// Groups in server order.
    pub items: Vec<ApiGroupDiscovery>,
}

/// What upstream hashes for the ETag: the list without `kind`/`apiVersion` (its TypeMeta is unset).
#[derive(Serialize)]
struct EtagInput<'a> {
    metadata: &'a ListMeta,
    items: &'a [ApiGroupDiscovery],
}

impl ApiGroupDiscoveryList {
    /// The `ETag` header value: `"` + uppercase hex SHA-512 of the JSON of the list + `"`
    /// (upstream `calculateETag` + `strconv.Quote`). The same for v2 and v2beta1 responses.
    pub fn etag(&self) -> String {
        let bytes = serde_json::to_vec(&EtagInput {
            metadata: &self.metadata,
            items: &self.items,
        })
        .unwrap_or_default();
        let hex = data_encoding::HEXUPPER.encode(&sha2::Sha512::digest(&bytes));
        format!("\"{hex}\"")
    }
}

fn group_discovery(group: &ApiGroup, null_timestamp: bool) -> ApiGroupDiscovery {
    let versions = group
        .versions
        .iter()
        .map(|v| ApiVersionDiscovery {
            version: v.version.clone(),
            resources: v
                .resources
                .iter()
                .map(|r| ApiResourceDiscovery {
                    resource: r.name.clone(),
                    response_kind: GroupVersionKind {
                        group: String::new(),
                        version: String::new(),
                        kind: r.kind.clone(),
                    },
                    scope: if r.namespaced { "Namespaced" } else { "Cluster" },
                    singular_resource: r.singular.clone(),
                    verbs: r.verbs.clone(),
                    short_names: r.short_names.clone(),
                    categories: r.categories.clone(),
                    subresources: r
                        .subresources
                        .iter()
                        .map(|s| ApiSubresourceDiscovery {
                            subresource: s.name.clone(),
                            response_kind: GroupVersionKind {
                                group: s.response_group.clone().unwrap_or_default(),
                                version: s.response_version.clone().unwrap_or_default(),
                                kind: s.kind.clone(),
                            },
                            verbs: s.verbs.clone(),
                        })
                        .collect(),
                })
                .collect(),
            freshness: "Current".to_string(),
        })
        .collect();
    ApiGroupDiscovery {
        metadata: GroupMeta {
            name: (!group.name.is_empty()).then(|| group.name.clone()),
            creation_timestamp: null_timestamp.then_some(()),
        },
        versions,
    }
}

fn list(groups: Vec<ApiGroupDiscovery>, version: AggregatedVersion) -> ApiGroupDiscoveryList {
    ApiGroupDiscoveryList {
        kind: "APIGroupDiscoveryList",
        api_version: version.api_version(),
        metadata: ListMeta {},
        items: groups,
    }
}

/// Whether `version` still writes `"creationTimestamp": null` into group metadata.
fn writes_null_timestamp(version: KubeVersion) -> bool {
    version.minor <= 33
}

/// Aggregated `/apis`: every served group except core.
pub fn apis_document(
    apis: &ServedApis,
    kube_version: KubeVersion,
    version: AggregatedVersion,
) -> ApiGroupDiscoveryList {
    let null_timestamp = writes_null_timestamp(kube_version);
    list(
        apis.groups
            .iter()
            .filter(|g| !g.name.is_empty())
            .map(|g| group_discovery(g, null_timestamp))
            .collect(),
        version,
    )
}

/// Aggregated `/api`: the core group alone (an empty list when core is not served).
pub fn api_document(
    apis: &ServedApis,
    kube_version: KubeVersion,
    version: AggregatedVersion,
) -> ApiGroupDiscoveryList {
    let null_timestamp = writes_null_timestamp(kube_version);
    list(
        apis.group("")
            .map(|g| vec![group_discovery(g, null_timestamp)])
            .unwrap_or_default(),
        version,
    )
}
