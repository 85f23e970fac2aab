//! The API server's half of garbage collection, as upstream's generic registry does it
//! (`k8s.io/apiserver/pkg/registry/generic/registry/store.go`): which of the `orphan` and
//! `foregroundDeletion` finalizers a delete leaves on an object (`deletionFinalizersForGarbageCollection`,
//! `shouldOrphanDependents`, `shouldDeleteDependents`), each resource's default policy
//! (`rest.GarbageCollectionDeleteStrategy.DefaultGarbageCollectionPolicy`), and the validation of what a
//! client asks for (`ValidateDeleteOptions`, `ValidateOwnerReferences`, `ValidateFinalizers`, in
//! `k8s.io/apimachinery/pkg/api/validation`).
//!
//! The other half, acting on those finalizers and on owner references, is the garbage collector in the
//! controller manager; this module only decides what is stored.

use serde_json::Value;

use super::ResourceInfo;
use crate::api::status::{GroupKind, Status, StatusCause};

/// `metav1.FinalizerOrphanDependents`.
pub(crate) const ORPHAN_FINALIZER: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
pub(crate) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// `rest.GarbageCollectionPolicy`: what a resource's registry does with dependents when a delete does
/// not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GcPolicy {
    /// `DeleteDependents` (also what a strategy without an opinion, such as custom resources', gets).
    DeleteDependents,
    /// `OrphanDependents`: legacy versions keep their historical default.
    OrphanDependents,
    /// `Unsupported`: the registry never adds GC finalizers (Events).
    Unsupported,
}

/// The default policy of `resource` in the version the request addresses, as each upstream strategy
/// answers (`pkg/registry/<group>/<resource>/strategy.go`): ReplicationControllers in core `v1`, Jobs in
/// `batch/v1` (kept for back compatibility: kubectl sends `Background` itself), CronJobs in
/// `batch/v1beta1`, and the apps workloads in `extensions/v1beta1`, `apps/v1beta1` and `apps/v1beta2`
/// orphan; Events are unsupported; everything else deletes dependents.
pub(crate) fn default_policy(resource: &ResourceInfo) -> GcPolicy {
    if resource.custom {
        return GcPolicy::DeleteDependents;
    }
    let (group, version) = (resource.group.as_str(), resource.version.as_str());
    match resource.resource.as_str() {
        "events" if matches!(group, "" | "events.k8s.io") => GcPolicy::Unsupported,
        "replicationcontrollers" if group.is_empty() && version == "v1" => GcPolicy::OrphanDependents,
        "jobs" if group == "batch" && version == "v1" => GcPolicy::OrphanDependents,
        "cronjobs" if group == "batch" && matches!(version, "v1beta1" | "v2alpha1") => {
            GcPolicy::OrphanDependents
        }
        "deployments" | "replicasets" | "daemonsets"
            if matches!(
                (group, version),
                ("extensions", "v1beta1") | ("apps", "v1beta1") | ("apps", "v1beta2")
            ) =>
        {
            GcPolicy::OrphanDependents
        }
        "statefulsets" if group == "apps" && matches!(version, "v1beta1" | "v1beta2") => {
            GcPolicy::OrphanDependents
        }
        _ => GcPolicy::DeleteDependents,
    }
}

/// `metav1.DeletionPropagation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PropagationPolicy {
    /// Dependents lose the owner reference; the owner waits for that (`orphan` finalizer).
    Orphan,
    /// The owner goes at once; the garbage collector deletes dependents afterwards.
    Background,
    /// The owner waits, with `foregroundDeletion`, until its blocking dependents are gone.
    Foreground,
}

/// What a delete says about dependents: the legacy `orphanDependents` and `propagationPolicy` (validated:
/// at most one of them is set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Propagation {
    /// `orphanDependents` (deprecated).
    pub orphan_dependents: Option<bool>,
    /// `propagationPolicy`.
    pub policy: Option<PropagationPolicy>,
}

impl Propagation {
    /// Reads and validates the two fields as `ValidateDeleteOptions` does; errors are its 422
    /// `DeleteOptions.meta.k8s.io "" is invalid` with every cause.
    pub(crate) fn parse(orphan_dependents: Option<bool>, policy: Option<&str>) -> Result<Self, Status> {
        let mut causes = Vec::new();
        if let (Some(_), Some(policy)) = (orphan_dependents, policy) {
            causes.push(StatusCause::field_invalid(
                "propagationPolicy",
                policy,
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        let parsed = match policy {
            None => None,
            Some("Orphan") => Some(PropagationPolicy::Orphan),
            Some("Background") => Some(PropagationPolicy::Background),
            Some("Foreground") => Some(PropagationPolicy::Foreground),
            Some(other) => {
                causes.push(StatusCause::field_not_supported(
                    "propagationPolicy",
                    other,
                    &["Foreground", "Background", "Orphan", "nil"],
                ));
                None
            }
        };
        if !causes.is_empty() {
            return Err(Status::invalid(
                &GroupKind::new("meta.k8s.io", "DeleteOptions"),
                "",
                causes,
            ));
        }
        Ok(Self {
            orphan_dependents,
            policy: parsed,
        })
    }

    /// `shouldOrphanDependents`: an explicit option wins, then a GC finalizer already on the object,
    /// then the resource's default.
    fn should_orphan(self, default: GcPolicy, finalizers: &[String]) -> bool {
        if default == GcPolicy::Unsupported {
            return false;
        }
        if let Some(orphan) = self.orphan_dependents {
            return orphan;
        }
        if let Some(policy) = self.policy {
            return policy == PropagationPolicy::Orphan;
        }
        for finalizer in finalizers {
            match finalizer.as_str() {
                ORPHAN_FINALIZER => return true,
                FOREGROUND_FINALIZER => return false,
                _ => {}
            }
        }
        default == GcPolicy::OrphanDependents
    }

    /// `shouldDeleteDependents`: foreground only when asked for, or already asked for by a finalizer.
    fn should_delete_in_foreground(self, default: GcPolicy, finalizers: &[String]) -> bool {
        if default == GcPolicy::Unsupported || self.orphan_dependents.is_some() {
            return false;
        }
        if let Some(policy) = self.policy {
            return policy == PropagationPolicy::Foreground;
        }
        for finalizer in finalizers {
            match finalizer.as_str() {
                FOREGROUND_FINALIZER => return true,
                ORPHAN_FINALIZER => return false,
                _ => {}
            }
        }
        false
    }

    /// `deletionFinalizersForGarbageCollection`: the finalizers the object should have once this delete
    /// is applied, or `None` when they are the ones it has (as sets).
    pub(crate) fn deletion_finalizers(self, default: GcPolicy, finalizers: &[String]) -> Option<Vec<String>> {
        let mut next: Vec<String> = finalizers
            .iter()
            .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
            .cloned()
            .collect();
        if self.should_orphan(default, finalizers) {
            next.push(ORPHAN_FINALIZER.to_owned());
        }
        if self.should_delete_in_foreground(default, finalizers) {
            next.push(FOREGROUND_FINALIZER.to_owned());
        }
        let same =
            |a: &[String], b: &[String]| a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x));
        if same(&next, finalizers) { None } else { Some(next) }
    }
}

/// The object's `metadata.finalizers`.
pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, plural: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: plural.to_owned(),
            kind: String::new(),
            namespaced: true,
            verbs: Vec::new(),
            subresources: Vec::new(),
            custom: false,
            printer_columns: Vec::new(),
            schema: None,
            storage_schema: None,
        }
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn defaults_follow_each_strategy() {
        assert_eq!(
            default_policy(&resource("", "v1", "configmaps")),
            GcPolicy::DeleteDependents
        );
        assert_eq!(
            default_policy(&resource("", "v1", "replicationcontrollers")),
            GcPolicy::OrphanDependents
        );
        assert_eq!(
            default_policy(&resource("batch", "v1", "jobs")),
            GcPolicy::OrphanDependents
        );
        assert_eq!(
            default_policy(&resource("batch", "v1", "cronjobs")),
            GcPolicy::DeleteDependents
        );
        assert_eq!(
            default_policy(&resource("apps", "v1", "deployments")),
            GcPolicy::DeleteDependents
        );
        assert_eq!(
            default_policy(&resource("apps", "v1beta2", "replicasets")),
            GcPolicy::OrphanDependents
        );
        assert_eq!(
            default_policy(&resource("", "v1", "events")),
            GcPolicy::Unsupported
        );
    }

    #[test]
    fn explicit_policy_sets_the_finalizers() {
        let none = Propagation::default();
        let policy = |p| Propagation {
            orphan_dependents: None,
            policy: Some(p),
        };
        let dd = GcPolicy::DeleteDependents;
        // Background on an object without finalizers: nothing to write, it goes at once.
        assert_eq!(
            policy(PropagationPolicy::Background).deletion_finalizers(dd, &[]),
            None
        );
        assert_eq!(none.deletion_finalizers(dd, &[]), None);
        assert_eq!(
            policy(PropagationPolicy::Foreground).deletion_finalizers(dd, &strings(&["x"])),
            Some(strings(&["x", FOREGROUND_FINALIZER]))
        );
        assert_eq!(
            policy(PropagationPolicy::Orphan).deletion_finalizers(dd, &[]),
            Some(strings(&[ORPHAN_FINALIZER]))
        );
        // Switching an object already waiting in the foreground to orphaning.
        assert_eq!(
            policy(PropagationPolicy::Orphan).deletion_finalizers(dd, &strings(&[FOREGROUND_FINALIZER])),
            Some(strings(&[ORPHAN_FINALIZER]))
        );
        // Background removes a GC finalizer left by an earlier delete.
        assert_eq!(
            policy(PropagationPolicy::Background).deletion_finalizers(dd, &strings(&[ORPHAN_FINALIZER])),
            Some(Vec::new())
        );
    }

    #[test]
    fn defaults_and_existing_finalizers_decide_without_options() {
        let none = Propagation::default();
        assert_eq!(
            none.deletion_finalizers(GcPolicy::OrphanDependents, &[]),
            Some(strings(&[ORPHAN_FINALIZER]))
        );
        assert_eq!(
            none.deletion_finalizers(GcPolicy::DeleteDependents, &strings(&[FOREGROUND_FINALIZER])),
            None
        );
        // An existing foreground finalizer overrides an orphaning default.
        assert_eq!(
            none.deletion_finalizers(GcPolicy::OrphanDependents, &strings(&[FOREGROUND_FINALIZER])),
            None
        );
        // Events never get GC finalizers, whatever is asked.
        let orphan = Propagation {
            orphan_dependents: Some(true),
            policy: None,
        };
        assert_eq!(orphan.deletion_finalizers(GcPolicy::Unsupported, &[]), None);
        assert_eq!(
            orphan.deletion_finalizers(GcPolicy::DeleteDependents, &[]),
            Some(strings(&[ORPHAN_FINALIZER]))
        );
    }

    #[test]
    fn delete_options_are_validated_as_upstream() {
        let both = Propagation::parse(Some(true), Some("Background")).unwrap_err();
        assert_eq!(both.code, 422);
        assert_eq!(
            both.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Background\": orphanDependents and deletionPropagation cannot be both set"
        );
        let unknown = Propagation::parse(None, Some("Sideways")).unwrap_err();
        assert_eq!(
            unknown.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        );
        assert_eq!(
            Propagation::parse(None, Some("Foreground")).unwrap().policy,
            Some(PropagationPolicy::Foreground)
        );
    }
}
