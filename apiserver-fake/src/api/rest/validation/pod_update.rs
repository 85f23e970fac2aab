//! `ValidatePodUpdate`'s spec rules (`pkg/apis/core/validation/validation.go`): a Pod's spec is
//! immutable but for its containers' and init containers' images, `activeDeadlineSeconds` (set, or
//! lowered), added tolerations (or a changed `tolerationSeconds`), removed scheduling gates, and
//! `terminationGracePeriodSeconds` set to 1 when it was negative. Anything else is one
//! `spec: Forbidden: pod updates may not change fields other than …` followed by the diff of the old
//! spec and the new one with the allowed changes undone ([`super::spec_diff`]). Metadata-only updates
//! (labels, annotations) leave the spec alone and pass.

use serde_json::Value;

use super::spec_diff::json_diff;
use super::workloads::semantic_eq;
use super::{BadValue, FieldError, FieldErrors, Path, list_at, str_at};

/// `updatablePodSpecFields`, joined with `,` as upstream joins them (the same at every minor the fake
/// serves: `spec.containers[*].resources` was listed only with `InPlacePodVerticalScaling` on, which
/// is off by default before 1.33, and from 1.33 resizes go through the `resize` subresource).
const UPDATABLE_POD_SPEC_FIELDS: &[&str] = &[
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
];

/// The spec part of `ValidatePodUpdate` of `spec` over `old` (both a Pod's `spec`), after the spec
/// itself was validated as on create.
pub(crate) fn validate_pod_update(spec: &Value, old: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let path = Path::new("spec");
    for list in ["containers", "initContainers"] {
        if container_updates(spec, old, list, &path, &mut errors) {
            return errors;
        }
    }
    if active_deadline_update(spec, old, &path, &mut errors) {
        return errors;
    }
    only_added_tolerations(spec, old, &path, &mut errors);
    only_deleted_scheduling_gates(spec, old, &path, &mut errors);
    if semantic_eq(spec, old) {
        return errors;
    }
    let munged = munged_spec(spec, old);
    if !semantic_eq(&munged, old) {
        errors.push(FieldError::forbidden(
            &path,
            &format!(
                "pod updates may not change fields other than {}\n{}",
                UPDATABLE_POD_SPEC_FIELDS.join(","),
                json_diff(old, &munged)
            ),
        ));
    }
    errors
}

/// `ValidateContainerUpdates` of `spec.<list>`: the same number of containers, each with an image
/// without surrounding whitespace. `true` when validation stops here.
fn container_updates(spec: &Value, old: &Value, list: &str, path: &Path, errors: &mut FieldErrors) -> bool {
    let (containers, old_containers) = (
        list_at(spec, &format!("/{list}")),
        list_at(old, &format!("/{list}")),
    );
    let at = path.child(list);
    if containers.len() != old_containers.len() {
        errors.push(FieldError::forbidden(
            &at,
            "pod updates may not add or remove containers",
        ));
        return true;
    }
    for (i, container) in containers.iter().enumerate() {
        let image = str_at(container, "/image");
        if image.is_empty() {
            errors.push(FieldError::required(&at.index(i).child("image"), ""));
        }
        if image.trim() != image {
            errors.push(FieldError::invalid_str(
                &at.index(i).child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
    }
    false
}

/// `activeDeadlineSeconds` may be set or lowered, not raised nor unset. `true` when validation stops.
fn active_deadline_update(spec: &Value, old: &Value, path: &Path, errors: &mut FieldErrors) -> bool {
    let at = path.child("activeDeadlineSeconds");
    let old_deadline = old.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match spec.get("activeDeadlineSeconds").and_then(Value::as_i64) {
        Some(deadline) if !(0..=i64::from(i32::MAX)).contains(&deadline) => {
            errors.push(FieldError::invalid(
                &at,
                BadValue::Int(deadline),
                "must be between 0 and 2147483647, inclusive",
            ));
            true
        }
        Some(deadline) if old_deadline.is_some_and(|o| o < deadline) => {
            errors.push(FieldError::invalid(
                &at,
                BadValue::Int(deadline),
                "must be less than or equal to previous value",
            ));
            true
        }
        Some(_) => false,
        None => {
            if old_deadline.is_some() {
                errors.push(FieldError::invalid(
                    &at,
                    BadValue::Rendered {
                        go: "null".to_owned(),
                        json: "null".to_owned(),
                    },
                    "must not update from a positive integer to nil value",
                ));
            }
            false
        }
    }
}

/// `validateOnlyAddedTolerations`: every old toleration is still there (its `tolerationSeconds` may
/// change).
fn only_added_tolerations(spec: &Value, old: &Value, path: &Path, errors: &mut FieldErrors) {
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(map) = t.as_object_mut() {
            map.remove("tolerationSeconds");
        }
        t
    };
    let tolerations: Vec<Value> = list_at(spec, "/tolerations")
        .iter()
        .map(without_seconds)
        .collect();
    let kept = list_at(old, "/tolerations")
        .iter()
        .all(|o| tolerations.iter().any(|t| semantic_eq(&without_seconds(o), t)));
    if !kept {
        errors.push(FieldError::forbidden(
            &path.child("tolerations"),
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
}

/// `validateOnlyDeletedSchedulingGates`: no gate the old spec did not have.
fn only_deleted_scheduling_gates(spec: &Value, old: &Value, path: &Path, errors: &mut FieldErrors) {
    let old_names: Vec<&str> = list_at(old, "/schedulingGates")
        .iter()
        .map(|g| str_at(g, "/name"))
        .collect();
    for (i, gate) in list_at(spec, "/schedulingGates").iter().enumerate() {
        let name = str_at(gate, "/name");
        if !old_names.contains(&name) {
            errors.push(FieldError::forbidden(
                &path.child("schedulingGates").index(i).child("name"),
                &format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
}

/// `spec` with its allowed changes undone: the old images, deadline, scheduling gates and
/// tolerations, the old grace period when it goes from negative to 1, and for a gated pod the old
/// node selector when the new one only adds to it.
fn munged_spec(spec: &Value, old: &Value) -> Value {
    let mut munged = spec.clone();
    let Some(map) = munged.as_object_mut() else {
        return munged;
    };
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = map.get_mut(list) {
            for (container, old_container) in containers.iter_mut().zip(list_at(old, &format!("/{list}"))) {
                if let Some(container) = container.as_object_mut() {
                    match old_container.get("image") {
                        Some(image) => container.insert("image".to_owned(), image.clone()),
                        None => container.remove("image"),
                    };
                }
            }
        }
    }
    for field in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        match old.get(field) {
            Some(value) => map.insert(field.to_owned(), value.clone()),
            None => map.remove(field),
        };
    }
    let grace = |v: &Value| v.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    if grace(old).is_some_and(|g| g < 0) && grace(spec) == Some(1) {
        map.insert(
            "terminationGracePeriodSeconds".to_owned(),
            old["terminationGracePeriodSeconds"].clone(),
        );
    }
    let gated = !list_at(old, "/schedulingGates").is_empty();
    let only_added = |new: &Value, old: &Value| {
        old.as_object()
            .is_none_or(|o| o.iter().all(|(k, v)| new.get(k) == Some(v)))
    };
    if gated
        && only_added(
            spec.get("nodeSelector").unwrap_or(&Value::Null),
            old.get("nodeSelector").unwrap_or(&Value::Null),
        )
    {
        match old.get("nodeSelector") {
            Some(value) => map.insert("nodeSelector".to_owned(), value.clone()),
            None => map.remove("nodeSelector"),
        };
    }
    munged
}
