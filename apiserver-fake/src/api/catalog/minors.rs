//! The embedded built-in API tables (`catalog/v1.NN.json`, made by `catalog/generate.py`).
//!
//! One table per Kubernetes minor: every group-version a kube-apiserver of that minor can serve, in
//! server order, with what a default server turns on. Parsed once, on first use.

use std::sync::LazyLock;

use serde::Deserialize;

use super::KubeVersion;

/// One minor's table as stored on disk.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Table {
    /// `1.NN`, checked against the file name by the tests.
    pub kubernetes_version: String,
    /// Groups in server order (core first).
    pub groups: Vec<TableGroup>,
}

/// A group of a table.
#[derive(Debug, Deserialize)]
pub(crate) struct TableGroup {
    /// Group name; `""` is the core group.
    pub name: String,
    /// Versions in preference order.
    pub versions: Vec<TableVersion>,
}

/// A group-version of a table.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TableVersion {
    /// `v1`, `v1beta1`, ...
    pub version: String,
    /// Whether `DefaultAPIResourceConfigSource` turns the version on.
    pub enabled_by_default: bool,
    /// Resources sorted by name.
    pub resources: Vec<TableResource>,
}

/// A resource of a table.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TableResource {
    pub name: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
    #[serde(default)]
    pub short_names: Vec<String>,
    #[serde(default)]
    pub categories: Vec<String>,
    #[serde(default)]
    pub subresources: Vec<TableSubresource>,
    /// Storage registered only when this feature gate is on.
    #[serde(default)]
    pub feature_gate: Option<String>,
    /// The gate's default in this minor, as the reference data records it. Only the tests read it:
    /// they check that `FeatureGates` defaults agree with the data.
    #[serde(default)]
    #[cfg_attr(not(test), allow(dead_code))]
    pub feature_gate_enabled_by_default: Option<bool>,
    /// `group/version` (or `v1`) the resource is stored as; absent for resources without storage.
    #[serde(default)]
    pub storage_version: Option<String>,
}

/// A subresource of a table.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TableSubresource {
    pub name: String,
    pub kind: String,
    pub verbs: Vec<String>,
    #[serde(default)]
    pub response_group: Option<String>,
    #[serde(default)]
    pub response_version: Option<String>,
    /// Registered only when this feature gate is on.
    #[serde(default)]
    pub feature_gate: Option<String>,
    /// `false` when a default server does not serve it (the gate is off by default).
    #[serde(default)]
    pub enabled_by_default: Option<bool>,
}

macro_rules! tables {
    ($($minor:literal),*) => {
        /// Raw JSON of every table, indexed by `minor - 28`.
        const RAW: &[(u32, &str)] = &[$(($minor, include_str!(concat!("../../../catalog/v1.", $minor, ".json")))),*];
    };
}
tables!(28, 29, 30, 31, 32, 33, 34, 35, 36);

/// Parsed tables; `None` for a table that failed to parse (a build defect the tests catch).
static TABLES: LazyLock<Vec<(u32, Option<Table>)>> = LazyLock::new(|| {
    RAW.iter()
        .map(|(minor, raw)| (*minor, serde_json::from_str::<Table>(raw).ok()))
        .collect()
});

/// The table of `version`, or `None` when the version has no table.
pub(crate) fn table(version: KubeVersion) -> Option<&'static Table> {
    if version.major != 1 {
        return None;
    }
    let wanted = version.to_string();
    TABLES
        .iter()
        .find(|(minor, _)| *minor == version.minor)
        .and_then(|(_, table)| table.as_ref())
        .filter(|table| table.kubernetes_version == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_parses_and_names_its_version() {
        for (minor, raw) in RAW {
            let parsed: Table = serde_json::from_str(raw).unwrap();
            assert_eq!(parsed.kubernetes_version, format!("1.{minor}"));
            assert_eq!(parsed.groups[0].name, "", "core group first in 1.{minor}");
            let version = KubeVersion::new(1, *minor).unwrap();
            assert!(table(version).is_some());
        }
    }

    #[test]
    fn resources_and_verbs_are_sorted_as_in_discovery() {
        for (_, raw) in RAW {
            let parsed: Table = serde_json::from_str(raw).unwrap();
            for group in &parsed.groups {
                for version in &group.versions {
                    let names: Vec<&str> = version.resources.iter().map(|r| r.name.as_str()).collect();
                    let mut sorted = names.clone();
                    sorted.sort_unstable();
                    assert_eq!(names, sorted, "{}/{}", group.name, version.version);
                    for resource in &version.resources {
                        let mut verbs = resource.verbs.clone();
                        verbs.sort_unstable();
                        assert_eq!(verbs, resource.verbs, "{}", resource.name);
                    }
                }
            }
        }
    }
}
