//! Custom resources: served groups from `apiextensions.k8s.io/v1` CustomResourceDefinitions, and
//! kube-aware version ordering.

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::Value;

use super::{ApiGroup, ApiResource, ApiSubresource, ApiVersion};

/// Verbs of a custom resource, in the order apiextensions-apiserver's discovery controller lists
/// them (upstream does not sort them, unlike built-in resources).
pub(super) const CUSTOM_RESOURCE_VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// Verbs of the `status` and `scale` subresources of a custom resource.
const SUBRESOURCE_VERBS: [&str; 3] = ["get", "patch", "update"];

/// Parsed kube-aware version: (stability rank, major, minor); `None` for other names.
fn kube_version(version: &str) -> Option<(u8, u64, u64)> {
    let rest = version.strip_prefix('v')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return None;
    }
    let major: u64 = rest[..digits].parse().ok()?;
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Some((2, major, 0));
    }
    let (rank, number) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n)
    } else {
        return None;
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) || number.starts_with('0') {
        return None;
    }
    Some((rank, major, number.parse().ok()?))
}

/// Upstream `version.CompareKubeAwareVersionStrings`: `Greater` when `a` has the higher priority.
///
/// GA versions beat betas, betas beat alphas, higher numbers win within a level, and every
/// Kubernetes-style version beats other names, which rank alphabetically (earlier name is higher).
/// Sorting descending gives `v10, v2, v1, v11beta2, v10beta3, v3beta1, v12alpha1, v11alpha2, foo1, foo10`.
pub fn compare_kube_aware_versions(a: &str, b: &str) -> Ordering {
    match (kube_version(a), kube_version(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => b.cmp(a),
    }
}

/// What one CRD version says about its objects' shape: what the OpenAPI builder
/// (`apiextensions-apiserver/pkg/controller/openapi/builder`) makes definitions from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomResourceSchema {
    /// `spec.names.listKind` (`<Kind>List` when unset, as the CRD's defaulting sets it).
    pub list_kind: String,
    /// The version's `schema.openAPIV3Schema` (the old top-level `spec.validation` as a fallback);
    /// `None` when the CRD gives none.
    pub open_api_v3_schema: Option<Value>,
}

/// A per-version field of a CRD (`subresources`, `additionalPrinterColumns`): `version`'s own, else the
/// CRD-wide one old CRDs carry in `spec`.
pub fn crd_version_field<'a>(crd: &'a Value, version: &str, field: &str) -> Option<&'a Value> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|versions| versions.iter().find(|v| v["name"].as_str() == Some(version)))
        .and_then(|v| v.get(field))
        .or_else(|| crd.get("spec").and_then(|spec| spec.get(field)))
}

/// The `openAPIV3Schema` of `version` of a CRD (upstream `apihelpers.GetSchemaForVersion`: the
/// version's own schema, else the CRD-wide `spec.validation` of old CRDs).
pub fn crd_version_schema(crd: &Value, version: &str) -> Option<Value> {
    let spec = &crd["spec"];
    spec["versions"]
        .as_array()
        .and_then(|versions| versions.iter().find(|v| v["name"].as_str() == Some(version)))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
        .or_else(|| spec.pointer("/validation/openAPIV3Schema"))
        .filter(|schema| schema.is_object())
        .cloned()
}

fn string_list(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn subresources(kind: &str, spec: &Value) -> Vec<ApiSubresource> {
    let mut result = Vec::new();
    let verbs: Vec<String> = SUBRESOURCE_VERBS.iter().map(|v| v.to_string()).collect();
    if spec.get("scale").is_some_and(Value::is_object) {
        result.push(ApiSubresource {
            name: "scale".to_string(),
            kind: "Scale".to_string(),
            verbs: verbs.clone(),
            response_group: Some("autoscaling".to_string()),
            response_version: Some("v1".to_string()),
        });
    }
    if spec.get("status").is_some_and(Value::is_object) {
        result.push(ApiSubresource {
            name: "status".to_string(),
            kind: kind.to_string(),
            verbs,
            response_group: None,
            response_version: None,
        });
    }
    result
}

/// Served groups from CustomResourceDefinition objects (`apiextensions.k8s.io/v1` JSON).
///
/// Every CRD given counts (no `Established` check). Only `served: true` versions appear; the group's
/// versions are sorted by kube-aware priority and resources by name, as kube-apiserver's discovery
/// lists them. Objects without `spec.group`, `spec.names.plural` or `spec.names.kind` are skipped.
/// `singular` defaults to the lowercased kind; the storage version is the version with
/// `storage: true`. The `status` subresource returns the CR kind; `scale` returns
/// `autoscaling/v1 Scale`.
pub fn custom_groups_from_crds(crds: &[Value]) -> Vec<ApiGroup> {
    let mut groups: Vec<ApiGroup> = Vec::new();
    for crd in crds {
        let spec = &crd["spec"];
        let (Some(group), Some(plural), Some(kind)) = (
            spec["group"].as_str(),
            spec["names"]["plural"].as_str(),
            spec["names"]["kind"].as_str(),
        ) else {
            continue;
        };
        let names = &spec["names"];
        let singular = names["singular"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let versions = spec["versions"].as_array().cloned().unwrap_or_default();
        let storage = versions
            .iter()
            .find(|v| v["storage"].as_bool() == Some(true))
            .and_then(|v| v["name"].as_str())
            .map(|v| format!("{group}/{v}"));
        for version in versions.iter().filter(|v| v["served"].as_bool() == Some(true)) {
            let Some(version_name) = version["name"].as_str() else {
                continue;
            };
            // v1 CRDs carry subresources per version; fall back to the old top-level field.
            let subresource_spec = if version.get("subresources").is_some() {
                &version["subresources"]
            } else {
                &spec["subresources"]
            };
            let resource = ApiResource {
                name: plural.to_string(),
                singular: singular.clone().unwrap_or_else(|| kind.to_lowercase()),
                kind: kind.to_string(),
                namespaced: spec["scope"].as_str() != Some("Cluster"),
                verbs: CUSTOM_RESOURCE_VERBS.iter().map(|v| v.to_string()).collect(),
                short_names: string_list(&names["shortNames"]),
                categories: string_list(&names["categories"]),
                subresources: subresources(kind, subresource_spec),
                storage_version: storage.clone(),
                crd_schema: Some(Arc::new(CustomResourceSchema {
                    list_kind: names["listKind"]
                        .as_str()
                        .filter(|s| !s.is_empty())
                        .map_or_else(|| format!("{kind}List"), str::to_owned),
                    open_api_v3_schema: crd_version_schema(crd, version_name),
                })),
            };
            let group_entry = match groups.iter_mut().position(|g| g.name == group) {
                Some(index) => &mut groups[index],
                None => {
                    groups.push(ApiGroup {
                        name: group.to_string(),
                        versions: vec![],
                    });
                    let last = groups.len() - 1;
                    &mut groups[last]
                }
            };
            match group_entry
                .versions
                .iter_mut()
                .find(|v| v.version == version_name)
            {
                Some(existing) => {
                    existing.resources.retain(|r| r.name != resource.name);
                    existing.resources.push(resource);
                }
                None => group_entry.versions.push(ApiVersion {
                    version: version_name.to_string(),
                    resources: vec![resource],
                }),
            }
        }
    }
    for group in &mut groups {
        group
            .versions
            .sort_by(|a, b| compare_kube_aware_versions(&b.version, &a.version));
        for version in &mut group.versions {
            version.resources.sort_by(|a, b| a.name.cmp(&b.name));
        }
    }
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kube_aware_order_matches_upstream_example() {
        let mut versions = vec![
            "foo10",
            "v1",
            "v3beta1",
            "v11alpha2",
            "v10",
            "foo1",
            "v2",
            "v10beta3",
            "v11beta2",
            "v12alpha1",
        ];
        versions.sort_by(|a, b| compare_kube_aware_versions(b, a));
        assert_eq!(
            versions,
            vec![
                "v10",
                "v2",
                "v1",
                "v11beta2",
                "v10beta3",
                "v3beta1",
                "v12alpha1",
                "v11alpha2",
                "foo1",
                "foo10"
            ]
        );
    }

    fn crd(group: &str, kind: &str, plural: &str, versions: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                               "shortNames": ["ct"], "categories": ["all"]},
                     "versions": versions}
        })
    }

    #[test]
    fn converts_served_versions_with_subresources() {
        let crds = vec![crd(
            "stable.example.com",
            "CronTab",
            "crontabs",
            json!([
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas"}}},
                {"name": "v2alpha1", "served": false, "storage": false}
            ]),
        )];
        let groups = custom_groups_from_crds(&crds);
        assert_eq!(groups.len(), 1);
        let versions: Vec<&str> = groups[0].versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(versions, vec!["v1", "v1beta1"]);
        let v1 = &groups[0].versions[0].resources[0];
        assert_eq!(v1.kind, "CronTab");
        assert_eq!(v1.singular, "crontab");
        assert!(v1.namespaced);
        assert_eq!(v1.short_names, vec!["ct"]);
        assert_eq!(v1.verbs, CUSTOM_RESOURCE_VERBS.map(String::from).to_vec());
        assert_eq!(v1.storage_version.as_deref(), Some("stable.example.com/v1"));
        let subs: Vec<(&str, &str, Option<&str>)> = v1
            .subresources
            .iter()
            .map(|s| (s.name.as_str(), s.kind.as_str(), s.response_group.as_deref()))
            .collect();
        assert_eq!(
            subs,
            vec![
                ("scale", "Scale", Some("autoscaling")),
                ("status", "CronTab", None)
            ]
        );
        assert!(groups[0].versions[1].resources[0].subresources.is_empty());
    }

    #[test]
    fn merges_crds_of_one_group_and_skips_broken_objects() {
        let crds = vec![
            crd(
                "b.example.com",
                "Zed",
                "zeds",
                json!([{"name": "v1", "served": true, "storage": true}]),
            ),
            crd(
                "b.example.com",
                "Apple",
                "apples",
                json!([{"name": "v1", "served": true, "storage": true}]),
            ),
            crd(
                "a.example.com",
                "Thing",
                "things",
                json!([{"name": "v1", "served": true, "storage": true}]),
            ),
            json!({"spec": {"group": "broken.example.com"}}),
        ];
        let groups = custom_groups_from_crds(&crds);
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["a.example.com", "b.example.com"]);
        let resources: Vec<&str> = groups[1].versions[0]
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(resources, vec!["apples", "zeds"]);
    }
}
