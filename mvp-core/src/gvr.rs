//! `GroupVersionResource`: the key the Mixed Version Proxy routes on.
//!
//! Upstream (docs/mvp-behaviour.md §1.3 step 5) routes a resource request by its parent resource only: the
//! verb and the subresource are ignored, so `pods/status` and `pods` share one key.

use std::fmt;

/// A (group, version, resource) triple, as `schema.GroupVersionResource` in apimachinery.
///
/// The core ("legacy") group is the empty string, as it is in RequestInfo and in beta
/// discovery data. StorageVersion objects spell it `core`; that spelling is translated where
/// those objects are read (see [`StorageVersionResolver`](crate::StorageVersionResolver)), never stored here.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    /// API group, `""` for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name, e.g. `jobs` (never `jobs/status`).
    pub resource: String,
}

impl GroupVersionResource {
    /// Builds a GVR from its three parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupVersionResource {
    /// Formats like apimachinery's `GroupVersionResource.String()`: `group/version, Resource=resource`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Resource={}", self.group, self.version, self.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_apimachinery() {
        assert_eq!(
            GroupVersionResource::new("batch", "v1", "jobs").to_string(),
            "batch/v1, Resource=jobs"
        );
        assert_eq!(
            GroupVersionResource::new("", "v1", "pods").to_string(),
            "/v1, Resource=pods"
        );
    }
}
