//! `metadata.generation`: which resources carry it and when it moves.
//!
//! In kube-apiserver the storage layer knows nothing about `generation`; each resource's registry
//! strategy decides. Strategies that track it set `Generation = 1` in `PrepareForCreate` and add one in
//! `PrepareForUpdate` when the desired state changed; all others leave it alone. Common to every
//! resource (`rest.BeforeUpdate`): an update cannot change `generation`, it always starts from the
//! stored value. So for an untracked resource a value a client sets on create is kept for ever, and an
//! object created without one never gets one (upstream KEP-5067 describes exactly this for pods before
//! 1.33). Writes through the `status` subresource never bump (every status strategy resets the spec
//! side to the stored object).
//!
//! [`builtin`] is the table of tracked built-in resources, taken from the `PrepareForCreate`/
//! `PrepareForUpdate` methods of `kubernetes/kubernetes` `pkg/registry/<group>/<resource>/strategy.go`
//! (cited per entry). A resource missing from it has no generation: that includes the ones whose
//! strategies were checked and do not set it (leases, servicecidrs, horizontalpodautoscalers,
//! resourceclaims, resourceclaimtemplates, workloads, podgroups, storageversionmigrations, ...) and any
//! that could not be checked. Custom resources always track it ([`for_resource`]).
//!
//! Strategies are compiled into the binary and not gated by `--emulated-version`, so the table is keyed
//! by the binary's version.

use serde_json::Value;

use super::ResourceInfo;
use super::object::metadata_mut;
use crate::api::catalog::KubeVersion;

/// What makes the generation of a tracked resource move on update (the comparison its
/// `PrepareForUpdate` makes between the stored and the new object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bump {
    /// `spec` changed (most built-in resources).
    Spec,
    /// `spec` or `metadata.annotations` changed (Deployments: annotations are copied to ReplicaSets).
    SpecOrAnnotations,
    /// `webhooks` changed (webhook configurations have no spec).
    Webhooks,
    /// Anything but `metadata` changed, or `metadata.labels` did (EndpointSlices have no spec).
    NonMetadataOrLabels,
    /// Anything but `metadata` changed (custom resources). With a `status` subresource, main-resource
    /// writes cannot change `status`, so in practice that is "anything but metadata and status".
    NonMetadata,
}

/// One tracked built-in resource.
struct Tracked {
    group: &'static str,
    resource: &'static str,
    /// First binary minor whose strategy sets the generation (1.28 stands for "every supported one").
    since: u32,
    bump: Bump,
}

const fn tracked(group: &'static str, resource: &'static str, since: u32, bump: Bump) -> Tracked {
    Tracked {
        group,
        resource,
        since,
        bump,
    }
}

/// Built-in resources whose strategy maintains `metadata.generation`, with the upstream file each
/// entry comes from (`pkg/registry/...` of kubernetes/kubernetes unless noted).
const TRACKED: &[Tracked] = &[
    // core/pod/strategy.go: `pod.Generation = 1`, `updatePodGeneration` (spec). KEP-5067 (pod
    // generation) is alpha in 1.33 and sets metadata.generation unconditionally; only
    // status.observedGeneration is behind the PodObservedGenerationTracking gate.
    tracked("", "pods", 33, Bump::Spec),
    // core/replicationcontroller/strategy.go
    tracked("", "replicationcontrollers", 28, Bump::Spec),
    // admissionregistration/{mutating,validating}webhookconfiguration/strategy.go: compares Webhooks.
    tracked(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        28,
        Bump::Webhooks,
    ),
    tracked(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        28,
        Bump::Webhooks,
    ),
    // admissionregistration/{validating,mutating}admissionpolicy{,binding}/strategy.go
    tracked(
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicies",
        28,
        Bump::Spec,
    ),
    tracked(
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
        28,
        Bump::Spec,
    ),
    tracked(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        28,
        Bump::Spec,
    ),
    tracked(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        28,
        Bump::Spec,
    ),
    // staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/strategy.go
    tracked(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        28,
        Bump::Spec,
    ),
    // apps/{daemonset,deployment,replicaset,statefulset}/strategy.go
    tracked("apps", "daemonsets", 28, Bump::Spec),
    tracked("apps", "deployments", 28, Bump::SpecOrAnnotations),
    tracked("apps", "replicasets", 28, Bump::Spec),
    tracked("apps", "statefulsets", 28, Bump::Spec),
    // batch/{cronjob,job}/strategy.go
    tracked("batch", "cronjobs", 28, Bump::Spec),
    tracked("batch", "jobs", 28, Bump::Spec),
    // discovery/endpointslice/strategy.go: "Increment generation if anything other than meta changed"
    // or the labels changed.
    tracked(
        "discovery.k8s.io",
        "endpointslices",
        28,
        Bump::NonMetadataOrLabels,
    ),
    // flowcontrol/{flowschema,prioritylevelconfiguration}/strategy.go
    tracked("flowcontrol.apiserver.k8s.io", "flowschemas", 28, Bump::Spec),
    tracked(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        28,
        Bump::Spec,
    ),
    // networking/{ingress,ingressclass,networkpolicy}/strategy.go
    tracked("networking.k8s.io", "ingressclasses", 28, Bump::Spec),
    tracked("networking.k8s.io", "ingresses", 28, Bump::Spec),
    tracked("networking.k8s.io", "networkpolicies", 28, Bump::Spec),
    // policy/poddisruptionbudget/strategy.go
    tracked("policy", "poddisruptionbudgets", 28, Bump::Spec),
    // resource/{deviceclass,devicetaintrule}/strategy.go: every stored version sets it since the
    // resources exist (1.31, 1.33).
    tracked("resource.k8s.io", "deviceclasses", 28, Bump::Spec),
    tracked("resource.k8s.io", "devicetaintrules", 28, Bump::Spec),
    // resource/resourceslice/strategy.go: the 1.30 strategy (v1alpha2, no spec) does not set it, the
    // 1.33 one does; 1.31 and 1.32 could not be checked and are left without.
    tracked("resource.k8s.io", "resourceslices", 33, Bump::Spec),
];

/// How the built-in `group`/`resource` of a `binary` kube-apiserver maintains its generation; `None`
/// when its strategy does not.
pub(crate) fn builtin(group: &str, resource: &str, binary: KubeVersion) -> Option<Bump> {
    TRACKED
        .iter()
        .find(|t| t.group == group && t.resource == resource)
        .filter(|t| {
            binary
                >= KubeVersion {
                    major: 1,
                    minor: t.since,
                }
        })
        .map(|t| t.bump)
}

/// How a served resource maintains its generation: custom resources always do, built-ins per
/// [`builtin`].
pub(crate) fn for_resource(resource: &ResourceInfo, binary: KubeVersion) -> Option<Bump> {
    if resource.custom {
        Some(Bump::NonMetadata)
    } else {
        builtin(&resource.group, &resource.resource, binary)
    }
}

/// `metadata.generation` when it is a positive integer (Go omits the zero value).
fn generation(object: &Value) -> Option<i64> {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .filter(|g| *g > 0)
}

fn set_generation(object: &mut Value, value: Option<i64>) {
    match value {
        Some(g) => {
            if let Some(metadata) = metadata_mut(object) {
                metadata.insert("generation".to_owned(), Value::from(g));
            }
        }
        None => {
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("generation");
            }
        }
    }
}

/// `PrepareForCreate`'s part: a tracked resource starts at 1 whatever the client sent; an untracked one
/// keeps a positive value the client set (upstream stores it as given) and otherwise has none.
pub(crate) fn prepare_for_create(bump: Option<Bump>, object: &mut Value) {
    let value = match bump {
        Some(_) => Some(1),
        None => generation(object),
    };
    set_generation(object, value);
}

/// `BeforeUpdate` + `PrepareForUpdate`'s part for a main-resource write of `next` over `current`: the
/// stored generation (clients cannot change it), plus one when `bump` says the desired state changed.
/// Status subresource writes must not call this with a bump (they keep the stored generation).
pub(crate) fn prepare_for_update(bump: Option<Bump>, current: &Value, next: &mut Value) {
    let stored = generation(current);
    let value = match bump {
        Some(bump) if changed(bump, current, next) => Some(stored.unwrap_or(0).saturating_add(1)),
        _ => stored,
    };
    set_generation(next, value);
}

/// Whether `bump`'s comparison sees a change from `current` to `next`.
pub(crate) fn changed(bump: Bump, current: &Value, next: &Value) -> bool {
    let field = |name: &str| !same(current.get(name), next.get(name));
    let meta = |name: &str| {
        !same(
            current.get("metadata").and_then(|m| m.get(name)),
            next.get("metadata").and_then(|m| m.get(name)),
        )
    };
    match bump {
        Bump::Spec => field("spec"),
        Bump::SpecOrAnnotations => field("spec") || meta("annotations"),
        Bump::Webhooks => field("webhooks"),
        Bump::NonMetadataOrLabels => non_metadata_changed(current, next) || meta("labels"),
        Bump::NonMetadata => non_metadata_changed(current, next),
    }
}

/// Compares every top-level field but `metadata`. `apiVersion`/`kind` are left out too: upstream
/// compares both objects in one version, while the fake stores whatever version wrote last.
fn non_metadata_changed(current: &Value, next: &Value) -> bool {
    const SKIPPED: [&str; 3] = ["metadata", "apiVersion", "kind"];
    let keys = |o: &Value| -> Vec<String> {
        o.as_object()
            .map(|m| {
                m.keys()
                    .filter(|k| !SKIPPED.contains(&k.as_str()))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut all = keys(current);
    all.extend(keys(next));
    all.iter().any(|k| !same(current.get(k), next.get(k)))
}

/// Equality as `apiequality.Semantic.DeepEqual` sees the compared field: an absent field, `null` and an
/// empty object or list all decode to Go's zero value.
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    fn empty(v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) => true,
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(_) => false,
        }
    }
    (empty(a) && empty(b)) || a == b
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn v(minor: u32) -> KubeVersion {
        KubeVersion { major: 1, minor }
    }

    #[test]
    fn table_tracks_workloads_and_policies_but_not_leases_or_config() {
        for (group, resource) in [
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
            ("", "replicationcontrollers"),
            ("policy", "poddisruptionbudgets"),
            ("networking.k8s.io", "ingresses"),
            ("networking.k8s.io", "networkpolicies"),
            ("discovery.k8s.io", "endpointslices"),
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
            ("flowcontrol.apiserver.k8s.io", "flowschemas"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
        ] {
            assert!(builtin(group, resource, v(28)).is_some(), "{group}/{resource}");
        }
        for (group, resource) in [
            ("coordination.k8s.io", "leases"),
            ("", "configmaps"),
            ("", "secrets"),
            ("", "namespaces"),
            ("", "events"),
            ("", "nodes"),
            ("", "services"),
            ("", "serviceaccounts"),
            ("rbac.authorization.k8s.io", "roles"),
            ("internal.apiserver.k8s.io", "storageversions"),
            ("autoscaling", "horizontalpodautoscalers"),
        ] {
            assert_eq!(builtin(group, resource, v(36)), None, "{group}/{resource}");
        }
        assert_eq!(
            builtin("apps", "deployments", v(36)),
            Some(Bump::SpecOrAnnotations)
        );
        assert_eq!(
            builtin(
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
                v(30)
            ),
            Some(Bump::Webhooks)
        );
    }

    #[test]
    fn table_follows_the_binary_version() {
        assert_eq!(builtin("", "pods", v(32)), None);
        assert_eq!(builtin("", "pods", v(33)), Some(Bump::Spec));
        assert_eq!(builtin("resource.k8s.io", "resourceslices", v(30)), None);
        assert_eq!(
            builtin("resource.k8s.io", "resourceslices", v(33)),
            Some(Bump::Spec)
        );
    }

    #[test]
    fn table_entries_are_unique() {
        for (i, a) in TRACKED.iter().enumerate() {
            for b in &TRACKED[i + 1..] {
                assert!(
                    (a.group, a.resource) != (b.group, b.resource),
                    "{}/{}",
                    a.group,
                    a.resource
                );
            }
        }
    }

    #[test]
    fn custom_resources_always_track() {
        let resource = ResourceInfo {
            group: "example.com".into(),
            version: "v1".into(),
            resource: "widgets".into(),
            kind: "Widget".into(),
            namespaced: true,
            verbs: vec![],
            subresources: vec![],
            custom: true,
            printer_columns: vec![],
            schema: None,
            storage_schema: None,
        };
        assert_eq!(for_resource(&resource, v(28)), Some(Bump::NonMetadata));
        let builtin_lease = ResourceInfo {
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            custom: false,
            ..resource
        };
        assert_eq!(for_resource(&builtin_lease, v(36)), None);
    }

    #[test]
    fn create_sets_one_when_tracked_and_keeps_a_client_value_otherwise() {
        let mut job = json!({"metadata": {"name": "j", "generation": 7}});
        prepare_for_create(Some(Bump::Spec), &mut job);
        assert_eq!(job["metadata"]["generation"], 1);
        let mut fresh = json!({"metadata": {"name": "j"}});
        prepare_for_create(Some(Bump::Spec), &mut fresh);
        assert_eq!(fresh["metadata"]["generation"], 1);

        let mut lease = json!({"metadata": {"name": "l"}});
        prepare_for_create(None, &mut lease);
        assert!(lease["metadata"].get("generation").is_none());
        let mut custom_set = json!({"metadata": {"name": "c", "generation": 3}});
        prepare_for_create(None, &mut custom_set);
        assert_eq!(custom_set["metadata"]["generation"], 3);
        for junk in [json!(0), json!(-1), json!("2")] {
            let mut object = json!({"metadata": {"name": "c", "generation": junk}});
            prepare_for_create(None, &mut object);
            assert!(object["metadata"].get("generation").is_none(), "{object}");
        }
    }

    #[test]
    fn update_keeps_the_stored_generation_and_bumps_on_spec_change() {
        let current =
            json!({"metadata": {"generation": 2, "labels": {"a": "1"}}, "spec": {"x": 1}, "status": {}});
        let mut relabeled = current.clone();
        relabeled["metadata"]["labels"] = json!({"a": "2"});
        relabeled["metadata"]["generation"] = json!(40);
        prepare_for_update(Some(Bump::Spec), &current, &mut relabeled);
        assert_eq!(relabeled["metadata"]["generation"], 2, "clients cannot set it");

        let mut respec = current.clone();
        respec["spec"]["x"] = json!(2);
        prepare_for_update(Some(Bump::Spec), &current, &mut respec);
        assert_eq!(respec["metadata"]["generation"], 3);

        let mut status_only = current.clone();
        status_only["status"] = json!({"ready": true});
        prepare_for_update(Some(Bump::Spec), &current, &mut status_only);
        assert_eq!(status_only["metadata"]["generation"], 2);
    }

    #[test]
    fn untracked_update_never_invents_or_moves_a_generation() {
        let lease = json!({"metadata": {"name": "l"}, "spec": {"renewTime": "a"}});
        let mut renewed = lease.clone();
        renewed["spec"]["renewTime"] = json!("b");
        renewed["metadata"]["generation"] = json!(5);
        prepare_for_update(None, &lease, &mut renewed);
        assert!(renewed["metadata"].get("generation").is_none());

        let client_set = json!({"metadata": {"generation": 4}, "data": {"k": "v"}});
        let mut changed_data = client_set.clone();
        changed_data["data"]["k"] = json!("w");
        prepare_for_update(None, &client_set, &mut changed_data);
        assert_eq!(changed_data["metadata"]["generation"], 4);
    }

    #[test]
    fn a_tracked_object_without_generation_starts_counting_at_one() {
        // E.g. a pod created by a 1.32 server and updated by a 1.33 one (`Generation++` from 0).
        let current = json!({"metadata": {}, "spec": {"x": 1}});
        let mut next = json!({"metadata": {}, "spec": {"x": 2}});
        prepare_for_update(Some(Bump::Spec), &current, &mut next);
        assert_eq!(next["metadata"]["generation"], 1);
    }

    #[test]
    fn bump_rules_compare_what_their_strategy_compares() {
        let base = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"generation": 1, "labels": {"l": "1"}, "annotations": {"a": "1"}},
            "spec": {"x": 1}, "webhooks": [{"name": "w"}], "endpoints": [], "status": {"s": 1}
        });
        let with = |path: &[&str], value: Value| {
            let mut object = base.clone();
            crate::api::rest::object::set_in(&mut object, path, value);
            object
        };
        let annotations = with(&["metadata", "annotations"], json!({"a": "2"}));
        let labels = with(&["metadata", "labels"], json!({"l": "2"}));
        let spec = with(&["spec", "x"], json!(2));
        let webhooks = with(&["webhooks"], json!([]));
        let endpoints = with(&["endpoints"], json!([{"addresses": ["10.0.0.1"]}]));
        let status = with(&["status", "s"], json!(2));
        let version = with(&["apiVersion"], json!("example.com/v2"));

        assert!(changed(Bump::Spec, &base, &spec));
        assert!(!changed(Bump::Spec, &base, &annotations));
        assert!(changed(Bump::SpecOrAnnotations, &base, &annotations));
        assert!(!changed(Bump::SpecOrAnnotations, &base, &labels));
        assert!(changed(Bump::Webhooks, &base, &webhooks));
        assert!(!changed(Bump::Webhooks, &base, &spec));
        assert!(changed(Bump::NonMetadataOrLabels, &base, &endpoints));
        assert!(changed(Bump::NonMetadataOrLabels, &base, &labels));
        assert!(!changed(Bump::NonMetadataOrLabels, &base, &annotations));
        assert!(changed(Bump::NonMetadata, &base, &spec));
        assert!(
            changed(Bump::NonMetadata, &base, &status),
            "without a status subresource"
        );
        assert!(!changed(Bump::NonMetadata, &base, &labels));
        assert!(!changed(Bump::NonMetadata, &base, &annotations));
        assert!(!changed(Bump::NonMetadata, &base, &version));
    }

    #[test]
    fn absent_null_and_empty_fields_are_the_same() {
        let absent = json!({"metadata": {}});
        let empty = json!({"metadata": {"annotations": {}}, "spec": {}});
        let null = json!({"metadata": {"annotations": null}, "spec": null});
        for bump in [Bump::Spec, Bump::SpecOrAnnotations, Bump::NonMetadata] {
            assert!(!changed(bump, &absent, &empty), "{bump:?}");
            assert!(!changed(bump, &empty, &null), "{bump:?}");
        }
        assert!(changed(Bump::Spec, &absent, &json!({"spec": {"x": 0}})));
    }
}
