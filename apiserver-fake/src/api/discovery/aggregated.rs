//! Aggregated discovery (`apidiscovery.k8s.io/v2`, and `v2beta1` where the minor still serves it):
//! one `APIGroupDiscoveryList` for `/apis` and one for `/api` (the core group).
//!
//! The wire types (field order of the Go structs of `k8s.io/api/apidiscovery/v2`, the ETag) are
//! `mvp-core`'s [`mvp_core::apidiscovery`], which peer-aggregated discovery merges; this module
//! renders a [`ServedApis`] into them.

pub use mvp_core::apidiscovery::{
    APIGroupDiscovery, APIGroupDiscoveryList, APIResourceDiscovery, APISubresourceDiscovery,
    APIVersionDiscovery, GroupMetadata, GroupVersionKind, ListMeta,
};

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

fn group_discovery(group: &ApiGroup, null_timestamp: bool) -> APIGroupDiscovery {
    let versions = group
        .versions
        .iter()
        .map(|v| APIVersionDiscovery {
            version: v.version.clone(),
            resources: v
                .resources
                .iter()
                .map(|r| APIResourceDiscovery {
                    resource: r.name.clone(),
                    response_kind: Some(GroupVersionKind {
                        group: String::new(),
                        version: String::new(),
                        kind: r.kind.clone(),
                    }),
                    scope: if r.namespaced { "Namespaced" } else { "Cluster" }.to_owned(),
                    singular_resource: r.singular.clone(),
                    verbs: r.verbs.clone(),
                    short_names: r.short_names.clone(),
                    categories: r.categories.clone(),
                    subresources: r
                        .subresources
                        .iter()
                        .map(|s| APISubresourceDiscovery {
                            subresource: s.name.clone(),
                            response_kind: Some(GroupVersionKind {
                                group: s.response_group.clone().unwrap_or_default(),
                                version: s.response_version.clone().unwrap_or_default(),
                                kind: s.kind.clone(),
                            }),
                            accepted_types: Vec::new(),
                            verbs: s.verbs.clone(),
                        })
                        .collect(),
                })
                .collect(),
            freshness: "Current".to_string(),
        })
        .collect();
    APIGroupDiscovery {
        metadata: GroupMetadata {
            name: group.name.clone(),
            creation_timestamp: null_timestamp.then_some(()),
        },
        versions,
    }
}

fn list(groups: Vec<APIGroupDiscovery>, version: AggregatedVersion) -> APIGroupDiscoveryList {
    APIGroupDiscoveryList {
        kind: "APIGroupDiscoveryList".to_owned(),
        api_version: version.api_version().to_owned(),
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
) -> APIGroupDiscoveryList {
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
) -> APIGroupDiscoveryList {
    let null_timestamp = writes_null_timestamp(kube_version);
    list(
        apis.group("")
            .map(|g| vec![group_discovery(g, null_timestamp)])
            .unwrap_or_default(),
        version,
    )
}
