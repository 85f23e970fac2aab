//! Unaggregated ("legacy") discovery documents: `/api` (`APIVersions`), `/api/v1` and `/apis/G/V`
//! (`APIResourceList`), `/apis` (`APIGroupList`) and `/apis/G` (`APIGroup`).
//!
//! Field order follows the Go structs of `k8s.io/apimachinery/pkg/apis/meta/v1`, which is the order
//! kube-apiserver writes. `storageVersionHash` is computed as upstream computes it.

use serde::Serialize;

use crate::api::catalog::{ApiGroup, ApiVersion, ServedApis};

/// `serverAddressByClientCIDRs` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerAddressByClientCidr {
    /// Always `0.0.0.0/0` for this fake (one address for every client).
    #[serde(rename = "clientCIDR")]
    pub client_cidr: String,
    /// `host:port` clients should use.
    pub server_address: String,
}

/// `GET /api`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiVersions {
    /// `APIVersions` (kube-apiserver sets no `apiVersion` here).
    pub kind: &'static str,
    /// Served core versions (`["v1"]`).
    pub versions: Vec<String>,
    /// Where clients reach this server.
    #[serde(rename = "serverAddressByClientCIDRs")]
    pub server_address_by_client_cidrs: Vec<ServerAddressByClientCidr>,
}

/// `groupVersion` + `version` pair of an `APIGroup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionForDiscovery {
    /// `group/version`.
    pub group_version: String,
    /// `version`.
    pub version: String,
}

/// `GET /apis/G`, and an item of `APIGroupList`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiGroupDocument {
    /// `APIGroup` on `/apis/G`; absent inside a list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// `v1` on `/apis/G`; absent inside a list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<&'static str>,
    /// Group name.
    pub name: String,
    /// Served versions in preference order.
    pub versions: Vec<GroupVersionForDiscovery>,
    /// The first served version.
    pub preferred_version: GroupVersionForDiscovery,
}

/// `GET /apis`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiGroupList {
    /// `APIGroupList`.
    pub kind: &'static str,
    /// `v1`.
    pub api_version: &'static str,
    /// Every served group but core, in server order.
    pub groups: Vec<ApiGroupDocument>,
}

/// An entry of `APIResourceList` (a resource, or a subresource flattened as `res/sub`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceEntry {
    /// `deployments` or `deployments/status`.
    pub name: String,
    /// Singular name; `""` for subresources.
    pub singular_name: String,
    /// Namespaced scope.
    pub namespaced: bool,
    /// Group of a kind from another group (`policy` for `pods/eviction`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Version of a kind from another group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind.
    pub kind: String,
    /// Verbs.
    pub verbs: Vec<String>,
    /// Short names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Hash of the storage version (resources with storage only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_version_hash: Option<String>,
}

/// `GET /api/v1` and `GET /apis/G/V`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceList {
    /// `APIResourceList`.
    pub kind: &'static str,
    /// `v1` for groups; kube-apiserver leaves it out on `/api/v1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<&'static str>,
    /// `group/version` (`v1` for core).
    pub group_version: String,
    /// Resources and flattened subresources, sorted by name.
    pub resources: Vec<ApiResourceEntry>,
}

fn group_version_string(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// `/api`, or `None` when the core group is not served (kube-apiserver then has no `/api`).
pub fn api_versions(apis: &ServedApis, server_address: &str) -> Option<ApiVersions> {
    let core = apis.group("")?;
    Some(ApiVersions {
        kind: "APIVersions",
        versions: core.versions.iter().map(|v| v.version.clone()).collect(),
        server_address_by_client_cidrs: vec![ServerAddressByClientCidr {
            client_cidr: "0.0.0.0/0".to_string(),
            server_address: server_address.to_string(),
        }],
    })
}

fn group_document(group: &ApiGroup, standalone: bool) -> Option<ApiGroupDocument> {
    let entry = |v: &ApiVersion| GroupVersionForDiscovery {
        group_version: group_version_string(&group.name, &v.version),
        version: v.version.clone(),
    };
    Some(ApiGroupDocument {
        kind: standalone.then_some("APIGroup"),
        api_version: standalone.then_some("v1"),
        name: group.name.clone(),
        versions: group.versions.iter().map(entry).collect(),
        preferred_version: entry(group.preferred_version()?),
    })
}

/// `/apis`: every served group except core.
pub fn api_group_list(apis: &ServedApis) -> ApiGroupList {
    ApiGroupList {
        kind: "APIGroupList",
        api_version: "v1",
        groups: apis
            .groups
            .iter()
            .filter(|g| !g.name.is_empty())
            .filter_map(|g| group_document(g, false))
            .collect(),
    }
}

/// `/apis/G`, or `None` when the group is not served.
pub fn api_group(apis: &ServedApis, group: &str) -> Option<ApiGroupDocument> {
    if group.is_empty() {
        return None;
    }
    group_document(apis.group(group)?, true)
}

/// `/api/v1` (group `""`) or `/apis/G/V`, or `None` when the group-version is not served.
pub fn api_resource_list(apis: &ServedApis, group: &str, version: &str) -> Option<ApiResourceList> {
    let served = apis.group_version(group, version)?;
    let mut resources = Vec::new();
    for resource in &served.resources {
        resources.push(ApiResourceEntry {
            name: resource.name.clone(),
            singular_name: resource.singular.clone(),
            namespaced: resource.namespaced,
            group: None,
            version: None,
            kind: resource.kind.clone(),
            verbs: resource.verbs.clone(),
            short_names: resource.short_names.clone(),
            categories: resource.categories.clone(),
            storage_version_hash: resource.storage_version_hash(),
        });
        for sub in &resource.subresources {
            resources.push(ApiResourceEntry {
                name: format!("{}/{}", resource.name, sub.name),
                singular_name: String::new(),
                namespaced: resource.namespaced,
                group: sub.response_group.clone(),
                version: sub.response_version.clone(),
                kind: sub.kind.clone(),
                verbs: sub.verbs.clone(),
                short_names: vec![],
                categories: vec![],
                storage_version_hash: None,
            });
        }
    }
    // kube-apiserver's installer registers paths in sorted order, so the list is sorted by name.
    resources.sort_by(|a, b| a.name.cmp(&b.name));
    Some(ApiResourceList {
        kind: "APIResourceList",
        api_version: (!group.is_empty()).then_some("v1"),
        group_version: group_version_string(group, version),
        resources,
    })
}
