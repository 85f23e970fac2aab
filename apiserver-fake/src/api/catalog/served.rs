//! [`ServedApis`]: building a server's API set from a table and its flags, and looking things up.

use std::collections::{BTreeMap, BTreeSet};

use super::custom::compare_kube_aware_versions;
use super::minors::{self, TableResource, TableSubresource};
use super::runtime_config::{VERSION_MATCHERS, matcher_matches};
use super::{
    ApiGroup, ApiResource, ApiSubresource, ApiVersion, CatalogError, FeatureGates, KubeVersion,
    RuntimeConfig, ServedApis,
};

impl ServedApis {
    /// The built-in APIs a kube-apiserver of `version` serves with these flags.
    ///
    /// Starts from the minor's default enablement (stable group-versions on, alpha/beta off, except the
    /// legacy flowcontrol betas), applies `api/all`, `api/ga`, `api/beta`, `api/alpha`, then every
    /// `group/version`, then every `group/version/resource` key (upstream `MergeAPIResourceConfigs`).
    /// Resources whose storage is feature-gated are served only with their gate on, even under
    /// `api/all=true`. Errors carry kube-apiserver's messages (unknown groups, unregistered versions,
    /// bad values, unknown or locked feature gates).
    pub fn builtin(
        version: KubeVersion,
        runtime_config: &RuntimeConfig,
        feature_gates: &FeatureGates,
    ) -> Result<Self, CatalogError> {
        let table = minors::table(version).ok_or_else(|| {
            if KubeVersion::new(version.major, version.minor).is_ok() {
                CatalogError::CorruptTable {
                    version: version.to_string(),
                }
            } else {
                CatalogError::UnsupportedVersion {
                    version: version.to_string(),
                }
            }
        })?;
        feature_gates.validate(version)?;

        // APIEnablementOptions.Validate: every group named must exist.
        let known: BTreeSet<&str> = table.groups.iter().map(|g| g.name.as_str()).collect();
        check_groups_known(runtime_config, &known)?;

        // Version enablement: defaults, then matchers in upstream order.
        let mut versions: BTreeMap<(&str, &str), bool> = BTreeMap::new();
        for group in &table.groups {
            for v in &group.versions {
                versions.insert((group.name.as_str(), v.version.as_str()), v.enabled_by_default);
            }
        }
        apply_version_matchers(runtime_config, &mut versions)?;

        // group/version keys, then group/version/resource keys (highest priority).
        let mut resource_overrides: BTreeMap<(String, String, String), bool> = BTreeMap::new();
        let mut version_overrides: Vec<((String, String), bool)> = Vec::new();
        for (key, value) in runtime_config.keys() {
            let raw_key = RuntimeConfig::raw_key(&key);
            if !versions.contains_key(&(key.group.as_str(), key.version.as_str())) {
                let group_version = if key.group.is_empty() {
                    key.version.clone()
                } else {
                    format!("{}/{}", key.group, key.version)
                };
                return Err(CatalogError::UnregisteredGroupVersion { group_version });
            }
            let enabled = RuntimeConfig::parse_value(&raw_key, value)?;
            match key.resource {
                None => version_overrides.push(((key.group, key.version), enabled)),
                Some(resource) => {
                    if resource.to_lowercase() != resource {
                        return Err(CatalogError::ResourceNotLowercase {
                            key: raw_key,
                            resource,
                        });
                    }
                    resource_overrides.insert((key.group, key.version, resource), enabled);
                }
            }
        }
        for ((group, v), enabled) in &version_overrides {
            versions.insert((group.as_str(), v.as_str()), *enabled);
        }

        let mut groups = Vec::new();
        for group in &table.groups {
            let mut served_versions = Vec::new();
            for v in &group.versions {
                let version_enabled = versions.get(&(group.name.as_str(), v.version.as_str())).copied();
                let resources: Vec<ApiResource> = v
                    .resources
                    .iter()
                    .filter(|r| {
                        let key = (group.name.clone(), v.version.clone(), r.name.clone());
                        resource_overrides
                            .get(&key)
                            .copied()
                            .or(version_enabled)
                            .unwrap_or(false)
                    })
                    .filter(|r| {
                        r.feature_gate
                            .as_deref()
                            .is_none_or(|gate| feature_gates.enabled(gate, version))
                    })
                    .map(|r| served_resource(r, feature_gates, version))
                    .collect();
                if !resources.is_empty() {
                    served_versions.push(ApiVersion {
                        version: v.version.clone(),
                        resources,
                    });
                }
            }
            if !served_versions.is_empty() {
                groups.push(ApiGroup {
                    name: group.name.clone(),
                    versions: served_versions,
                });
            }
        }
        Ok(ServedApis { groups })
    }

    /// The served group named `group` (`""`: core).
    pub fn group(&self, group: &str) -> Option<&ApiGroup> {
        self.groups.iter().find(|g| g.name == group)
    }

    /// The served group-version.
    pub fn group_version(&self, group: &str, version: &str) -> Option<&ApiVersion> {
        self.group(group)?.version(version)
    }

    /// The served resource (plural name) of a group-version.
    pub fn resource(&self, group: &str, version: &str, resource: &str) -> Option<&ApiResource> {
        self.group_version(group, version)?
            .resources
            .iter()
            .find(|r| r.name == resource)
    }

    /// Every served (group, version, resource), in server order.
    pub fn gvrs(&self) -> impl Iterator<Item = (&str, &str, &ApiResource)> {
        self.groups.iter().flat_map(|g| {
            g.versions.iter().flat_map(move |v| {
                v.resources
                    .iter()
                    .map(move |r| (g.name.as_str(), v.version.as_str(), r))
            })
        })
    }

    /// Number of served group-versions.
    pub fn group_version_count(&self) -> usize {
        self.groups.iter().map(|g| g.versions.len()).sum()
    }

    /// This set plus CRD-provided groups, ordered as kube-apiserver's aggregator orders them.
    ///
    /// CRD groups get APIServices with group priority 1000 and version priority 100, below every
    /// built-in group, so they follow the built-ins sorted by group name, each group's versions by
    /// kube-aware version priority (`v2` > `v1` > `v1beta1` > `v1alpha1` > other names). Several
    /// entries for one group are merged (versions unioned, resources unioned by name and sorted). A
    /// custom group that shares a built-in group's name is merged into it (new versions appended).
    pub fn with_custom(&self, custom: &[ApiGroup]) -> ServedApis {
        let mut merged: BTreeMap<&str, ApiGroup> = BTreeMap::new();
        for group in custom {
            let entry = merged.entry(group.name.as_str()).or_insert_with(|| ApiGroup {
                name: group.name.clone(),
                versions: vec![],
            });
            for version in &group.versions {
                merge_version(&mut entry.versions, version);
            }
        }
        let mut result = self.clone();
        let mut appended = Vec::new();
        for (name, mut group) in merged {
            group.versions.retain(|v| !v.resources.is_empty());
            if group.versions.is_empty() {
                continue;
            }
            if let Some(existing) = result.groups.iter_mut().find(|g| g.name == name) {
                for version in &group.versions {
                    merge_version(&mut existing.versions, version);
                }
            } else {
                group
                    .versions
                    .sort_by(|a, b| compare_kube_aware_versions(&b.version, &a.version));
                appended.push(group);
            }
        }
        result.groups.extend(appended);
        result
    }
}

/// Adds `version`'s resources to the same-named version in `versions`, or appends the version.
fn merge_version(versions: &mut Vec<ApiVersion>, version: &ApiVersion) {
    let Some(existing) = versions.iter_mut().find(|v| v.version == version.version) else {
        let mut added = version.clone();
        added.resources.sort_by(|a, b| a.name.cmp(&b.name));
        versions.push(added);
        return;
    };
    for resource in &version.resources {
        match existing.resources.iter_mut().find(|r| r.name == resource.name) {
            Some(slot) => *slot = resource.clone(),
            None => existing.resources.push(resource.clone()),
        }
    }
    existing.resources.sort_by(|a, b| a.name.cmp(&b.name));
}

fn served_resource(r: &TableResource, gates: &FeatureGates, version: KubeVersion) -> ApiResource {
    ApiResource {
        name: r.name.clone(),
        singular: r.singular.clone(),
        kind: r.kind.clone(),
        namespaced: r.namespaced,
        verbs: r.verbs.clone(),
        short_names: r.short_names.clone(),
        categories: r.categories.clone(),
        subresources: r
            .subresources
            .iter()
            .filter(|s| subresource_served(s, gates, version))
            .map(|s| ApiSubresource {
                name: s.name.clone(),
                kind: s.kind.clone(),
                verbs: s.verbs.clone(),
                response_group: s.response_group.clone(),
                response_version: s.response_version.clone(),
            })
            .collect(),
        storage_version: r.storage_version.clone(),
        crd_schema: None,
    }
}

fn subresource_served(s: &TableSubresource, gates: &FeatureGates, version: KubeVersion) -> bool {
    match &s.feature_gate {
        Some(gate) => gates.enabled(gate, version),
        None => s.enabled_by_default != Some(false),
    }
}

/// Every group `--runtime-config` names is one of `known` (upstream's unknown-groups error otherwise).
fn check_groups_known(runtime_config: &RuntimeConfig, known: &BTreeSet<&str>) -> Result<(), CatalogError> {
    let unknown: BTreeSet<String> = runtime_config
        .keys()
        .filter(|(key, _)| !known.contains(key.group.as_str()))
        .map(|(key, _)| key.group)
        .collect();
    if !unknown.is_empty() {
        return Err(CatalogError::UnknownApiGroups {
            groups: unknown.into_iter().collect(),
        });
    }
    Ok(())
}

/// `api/all`, `api/ga`, `api/beta`, `api/alpha` (in that order) applied to every version they match.
fn apply_version_matchers(
    runtime_config: &RuntimeConfig,
    versions: &mut BTreeMap<(&str, &str), bool>,
) -> Result<(), CatalogError> {
    for matcher in VERSION_MATCHERS {
        let Some(value) = runtime_config.matcher(matcher) else {
            continue;
        };
        let enable = match value {
            "true" => true,
            "false" => false,
            _ => {
                return Err(CatalogError::InvalidVersionMatcherValue {
                    key: matcher.to_string(),
                    value: value.to_string(),
                });
            }
        };
        for ((_, v), enabled) in versions.iter_mut() {
            if matcher_matches(matcher, v) {
                *enabled = enable;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> KubeVersion {
        KubeVersion::new(1, minor).unwrap()
    }

    fn served(minor: u32, runtime_config: &str, gates: &str) -> Result<ServedApis, CatalogError> {
        ServedApis::builtin(v(minor), &runtime_config.parse()?, &gates.parse()?)
    }

    fn counts(apis: &ServedApis) -> (usize, usize, usize) {
        let resources = apis.gvrs().count();
        let subresources = apis.gvrs().map(|(_, _, r)| r.subresources.len()).sum();
        (apis.group_version_count(), resources, subresources)
    }

    fn all_group_versions(minor: u32) -> usize {
        minors::table(v(minor))
            .unwrap()
            .groups
            .iter()
            .map(|g| g.versions.len())
            .sum()
    }

    /// The data README's "Differences between consecutive versions" table.
    #[test]
    fn default_servers_match_the_reference_counts() {
        let expected = [
            (28, 30, 22, 59, 43),
            (29, 31, 22, 59, 43),
            (30, 32, 22, 61, 44),
            (31, 34, 22, 61, 44),
            (32, 33, 21, 59, 42),
            (33, 35, 21, 61, 44),
            (34, 36, 22, 66, 45),
            (35, 36, 22, 66, 45),
            (36, 36, 22, 68, 45),
        ];
        for (minor, all, gvs, resources, subresources) in expected {
            let apis = served(minor, "", "").unwrap();
            assert_eq!(
                all_group_versions(minor),
                all,
                "1.{minor} group-versions in the table"
            );
            assert_eq!(
                counts(&apis),
                (gvs, resources, subresources),
                "1.{minor} default server"
            );
        }
    }

    #[test]
    fn v135_and_v136_defaults_differ_only_by_mutating_admission_policies() {
        let old = served(35, "", "").unwrap();
        let new = served(36, "", "").unwrap();
        let names = |apis: &ServedApis| -> BTreeSet<String> {
            apis.gvrs()
                .map(|(g, v, r)| format!("{g}/{v}/{}", r.name))
                .collect()
        };
        let added: Vec<String> = names(&new).difference(&names(&old)).cloned().collect();
        let removed: Vec<String> = names(&old).difference(&names(&new)).cloned().collect();
        assert_eq!(
            added,
            vec![
                "admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
                "admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings"
            ]
        );
        assert!(removed.is_empty(), "{removed:?}");
        let group_order = |apis: &ServedApis| apis.groups.iter().map(|g| g.name.clone()).collect::<Vec<_>>();
        assert_eq!(group_order(&old), group_order(&new));
    }

    #[test]
    fn runtime_config_disables_a_group_version() {
        let apis = served(36, "batch/v1=false", "").unwrap();
        assert!(apis.group("batch").is_none());
        assert!(apis.resource("batch", "v1", "jobs").is_none());
        assert!(apis.resource("apps", "v1", "deployments").is_some());
        let core_off = served(36, "api/v1=false", "").unwrap();
        assert!(core_off.group("").is_none());
    }

    #[test]
    fn runtime_config_resource_keys_beat_version_keys() {
        let apis = served(36, "batch/v1/cronjobs=false", "").unwrap();
        let batch: Vec<&str> = apis
            .group_version("batch", "v1")
            .unwrap()
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(batch, vec!["jobs"]);
        let only_one = served(36, "api/all=false,apps/v1/deployments=true", "").unwrap();
        assert_eq!(
            only_one
                .gvrs()
                .map(|(_, _, r)| r.name.as_str())
                .collect::<Vec<_>>(),
            vec!["deployments"]
        );
    }

    #[test]
    fn api_all_enables_alpha_groups_but_not_gated_storage() {
        let apis = served(36, "api/all=true", "").unwrap();
        // 36 group-versions exist; 4 hold only gated storage whose gates are off by default:
        // certificates v1alpha1 and v1beta1, scheduling v1alpha2, storagemigration v1beta1.
        assert_eq!(apis.group_version_count(), 32);
        assert!(apis.group_version("storagemigration.k8s.io", "v1beta1").is_none());
        assert!(
            apis.group_version("internal.apiserver.k8s.io", "v1alpha1")
                .is_some()
        );
        assert!(
            apis.resource("certificates.k8s.io", "v1beta1", "clustertrustbundles")
                .is_none()
        );
        assert!(
            apis.resource("scheduling.k8s.io", "v1alpha2", "workloads")
                .is_none()
        );
        let gated = served(36, "api/all=true", "ClusterTrustBundle=true").unwrap();
        assert!(
            gated
                .resource("certificates.k8s.io", "v1beta1", "clustertrustbundles")
                .is_some()
        );
        let everything = served(36, "api/all=true", "AllAlpha=true,AllBeta=true").unwrap();
        assert_eq!(
            everything.gvrs().count(),
            95,
            "README: 95 resources in all group-versions of 1.36"
        );
        let alpha = served(36, "api/alpha=true", "").unwrap();
        assert!(alpha.group_version("resource.k8s.io", "v1alpha3").is_some());
        assert!(alpha.group_version("resource.k8s.io", "v1beta1").is_none());
    }

    #[test]
    fn pods_resize_follows_its_gate() {
        let has_resize = |apis: &ServedApis| {
            apis.resource("", "v1", "pods")
                .unwrap()
                .subresources
                .iter()
                .any(|s| s.name == "resize")
        };
        assert!(!has_resize(&served(32, "", "").unwrap()));
        assert!(has_resize(
            &served(32, "", "InPlacePodVerticalScaling=true").unwrap()
        ));
        assert!(has_resize(&served(33, "", "").unwrap()));
        assert!(!has_resize(
            &served(34, "", "InPlacePodVerticalScaling=false").unwrap()
        ));
    }

    #[test]
    fn flag_errors_use_upstream_messages() {
        let message = |result: Result<ServedApis, CatalogError>| result.unwrap_err().to_string();
        assert_eq!(
            message(served(36, "foo.io/v1=true,bar.io/v1=false", "")),
            "unknown api groups bar.io,foo.io"
        );
        assert_eq!(
            message(served(36, "batch/v2=true", "")),
            "group version batch/v2 that has not been registered"
        );
        assert_eq!(
            message(served(36, "v2=true", "")),
            "runtime-config invalid key v2"
        );
        assert_eq!(message(served(36, "api/all", "")), "invalid value api/all=");
        assert_eq!(
            message(served(36, "batch/v1=maybe", "")),
            r#"invalid value of batch/v1: maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax"#
        );
        assert_eq!(
            message(served(36, "apps/v1/Deployments=false", "")),
            r#"invalid key apps/v1/Deployments: group/version/resource and resource is always lowercase plural, not "Deployments""#
        );
        assert_eq!(
            message(served(34, "", "GenericWorkload=true")),
            "unrecognized feature gate: GenericWorkload"
        );
    }

    #[test]
    fn feature_gate_defaults_agree_with_the_tables() {
        for version in KubeVersion::all() {
            for group in &minors::table(version).unwrap().groups {
                for tv in &group.versions {
                    for r in &tv.resources {
                        if let Some(gate) = &r.feature_gate {
                            assert_eq!(
                                FeatureGates::default_value(gate, version),
                                Some(r.feature_gate_enabled_by_default.unwrap_or(true)),
                                "{version} {gate} ({})",
                                r.name
                            );
                        }
                        for s in &r.subresources {
                            if let Some(gate) = &s.feature_gate {
                                assert_eq!(
                                    FeatureGates::default_value(gate, version),
                                    Some(s.enabled_by_default.unwrap_or(true)),
                                    "{version} {gate} ({}/{})",
                                    r.name,
                                    s.name
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn storage_versions_and_hashes() {
        let apis = served(36, "api/all=true", "AllAlpha=true,AllBeta=true").unwrap();
        let deployments = apis.resource("apps", "v1", "deployments").unwrap();
        assert_eq!(deployments.storage_version.as_deref(), Some("apps/v1"));
        assert_eq!(
            deployments.storage_version_hash().as_deref(),
            Some("8aSe+NMegvE=")
        );
        let map = apis
            .resource("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies")
            .unwrap();
        assert_eq!(
            map.storage_version.as_deref(),
            Some("admissionregistration.k8s.io/v1beta1")
        );
        let events = apis.resource("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(events.storage_version.as_deref(), Some("v1"));
        assert!(
            apis.resource("", "v1", "bindings")
                .unwrap()
                .storage_version_hash()
                .is_none()
        );
    }

    #[test]
    fn custom_groups_follow_builtins_sorted_and_merge() {
        let base = served(36, "", "").unwrap();
        let resource = |name: &str| ApiResource {
            name: name.to_string(),
            kind: "K".to_string(),
            ..Default::default()
        };
        let custom = vec![
            ApiGroup {
                name: "z.example.com".into(),
                versions: vec![ApiVersion {
                    version: "v1beta1".into(),
                    resources: vec![resource("bs")],
                }],
            },
            ApiGroup {
                name: "a.example.com".into(),
                versions: vec![ApiVersion {
                    version: "v1".into(),
                    resources: vec![resource("as")],
                }],
            },
            ApiGroup {
                name: "z.example.com".into(),
                versions: vec![ApiVersion {
                    version: "v1".into(),
                    resources: vec![resource("cs")],
                }],
            },
        ];
        let merged = base.with_custom(&custom);
        assert_eq!(&merged.groups[..base.groups.len()], &base.groups[..]);
        let tail: Vec<(&str, Vec<&str>)> = merged.groups[base.groups.len()..]
            .iter()
            .map(|g| {
                (
                    g.name.as_str(),
                    g.versions.iter().map(|v| v.version.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            tail,
            vec![
                ("a.example.com", vec!["v1"]),
                ("z.example.com", vec!["v1", "v1beta1"])
            ]
        );
    }
}
