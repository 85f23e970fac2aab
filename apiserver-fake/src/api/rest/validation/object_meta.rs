//! `ValidateObjectMeta` and `ValidateObjectMetaUpdate`'s checks of what every object carries in
//! `metadata`, whatever its kind (`staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`
//! and `pkg/apis/meta/v1/validation`'s `ValidateLabels`): label keys and values, annotation keys and
//! their 256 KiB total, owner references, finalizers, and on update the finalizers of an object being
//! deleted and its `uid`. Names and namespaces are checked before this ([`super::super::names`]).
//!
//! Upstream runs them first in each kind's `Validate`/`ValidateUpdate` (the metadata's errors come
//! before the spec's in the 422) and again, for every kind, in the registry's `BeforeCreate` /
//! `BeforeUpdate`; the fake runs them once, first. Go ranges over a label map in random order; the
//! fake reports keys in order.

use serde_json::Value;

use super::{BadValue, FieldError, FieldErrors, Path, list_at, str_at, string_map_at};
use crate::cel::format::{label_value_violations, qualified_name_violations};

/// `TotalAnnotationSizeLimitB`: the keys and values of all annotations together.
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// `metav1.FinalizerOrphanDependents`.
const ORPHAN: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
const FOREGROUND_DELETION: &str = "foregroundDeletion";

/// The errors of `object`'s metadata on create (`old` `None`) or update.
pub(crate) fn validate(object: &Value, old: Option<&Value>) -> FieldErrors {
    let metadata = Path::new("metadata");
    let mut errors = FieldErrors::new();
    labels(&mut errors, object, &metadata.child("labels"));
    annotations(&mut errors, object, &metadata.child("annotations"));
    owner_references(&mut errors, object, &metadata.child("ownerReferences"));
    finalizers(&mut errors, object, &metadata.child("finalizers"));
    if let Some(old) = old {
        update(&mut errors, object, old, &metadata);
    }
    errors
}

/// `ValidateLabels`: each key a qualified name, each value a label value; both reported at `at`.
pub(crate) fn labels(errors: &mut FieldErrors, object: &Value, at: &Path) {
    let mut labels = string_map_at(object, "/metadata/labels");
    labels.sort();
    for (key, value) in labels {
        for message in qualified_name_violations(&key) {
            errors.push(FieldError::invalid_str(at, &key, &message));
        }
        for message in label_value_violations(&value) {
            errors.push(FieldError::invalid_str(at, &value, &message));
        }
    }
}

/// `ValidateAnnotations`: each key a qualified name once lowercased (reported as written), and all of
/// them within [`TOTAL_ANNOTATION_SIZE_LIMIT`].
fn annotations(errors: &mut FieldErrors, object: &Value, at: &Path) {
    let mut annotations = string_map_at(object, "/metadata/annotations");
    annotations.sort();
    for (key, _) in &annotations {
        for message in qualified_name_violations(&key.to_lowercase()) {
            errors.push(FieldError::invalid_str(at, key, &message));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(FieldError::too_long(at, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

/// `ValidateOwnerReferences`: each reference names a version, kind, name and uid and is not an
/// `Event`; at most one is the controller.
fn owner_references(errors: &mut FieldErrors, object: &Value, at: &Path) {
    let references = list_at(object, "/metadata/ownerReferences");
    let mut first_controller: Option<String> = None;
    for reference in references {
        let api_version = str_at(reference, "/apiVersion");
        let kind = str_at(reference, "/kind");
        // `schema.FromAPIVersionAndKind`: an apiVersion that does not parse has no version.
        let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [version] => ("", *version),
            [group, version] => (*group, *version),
            _ => ("", ""),
        };
        if version.is_empty() {
            errors.push(FieldError::invalid_str(
                &at.child("apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        if kind.is_empty() {
            errors.push(FieldError::invalid_str(
                &at.child("kind"),
                kind,
                "must not be empty",
            ));
        }
        for field in ["name", "uid"] {
            let value = str_at(reference, &format!("/{field}"));
            if value.is_empty() {
                errors.push(FieldError::invalid_str(
                    &at.child(field),
                    value,
                    "must not be empty",
                ));
            }
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errors.push(FieldError::invalid(
                at,
                BadValue::Rendered {
                    go: go_owner_reference(reference),
                    json: json_owner_reference(reference),
                },
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if reference.get("controller").and_then(Value::as_bool) == Some(true) {
            let name = format!("{kind}/{}", str_at(reference, "/name"));
            match &first_controller {
                Some(first) => errors.push(FieldError::invalid(
                    at,
                    BadValue::Rendered {
                        go: format!(
                            "[]v1.OwnerReference{{{}}}",
                            references.iter().map(go_owner_reference).collect::<Vec<_>>().join(", ")
                        ),
                        json: format!(
                            "[{}]",
                            references.iter().map(json_owner_reference).collect::<Vec<_>>().join(",")
                        ),
                    },
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {name}"
                    ),
                )),
                None => first_controller = Some(name),
            }
        }
    }
}

/// `ValidateFinalizers`: each a qualified name, and not both `orphan` and `foregroundDeletion`.
fn finalizers(errors: &mut FieldErrors, object: &Value, at: &Path) {
    let finalizers = strings(object, "/metadata/finalizers");
    for finalizer in &finalizers {
        for message in qualified_name_violations(finalizer) {
            errors.push(FieldError::invalid_str(at, finalizer, &message));
        }
    }
    if finalizers.iter().any(|f| f == ORPHAN) && finalizers.iter().any(|f| f == FOREGROUND_DELETION) {
        errors.push(FieldError::invalid(
            at,
            BadValue::StringList(finalizers),
            &format!("finalizer {ORPHAN} and {FOREGROUND_DELETION} cannot be both set"),
        ));
    }
}

/// `ValidateObjectMetaAccessorUpdate`'s checks that can fail after the registry carried the stored
/// object's system fields over: no finalizer added to an object being deleted, and the `uid` a client
/// sent must be the stored one (`BeforeUpdate` fills only a missing one).
fn update(errors: &mut FieldErrors, object: &Value, old: &Value, metadata: &Path) {
    if old
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        let before = strings(old, "/metadata/finalizers");
        let mut added: Vec<String> = strings(object, "/metadata/finalizers")
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        added.sort();
        added.dedup();
        if !added.is_empty() {
            // `%#v` of a `[]string`, in every version: it is part of the detail, not the bad value.
            let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            errors.push(FieldError::forbidden(
                &metadata.child("finalizers"),
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    quoted.join(", ")
                ),
            ));
        }
    }
    let uid = str_at(object, "/metadata/uid");
    let old_uid = str_at(old, "/metadata/uid");
    if !uid.is_empty() && !old_uid.is_empty() && uid != old_uid {
        errors.push(FieldError::invalid_str(
            &metadata.child("uid"),
            uid,
            "field is immutable",
        ));
    }
}

/// `%#v` of a `metav1.OwnerReference` (how upstream prints one before 1.34), its pointers shown as
/// `(*bool)(0xc000000000)` where Go prints an address.
fn go_owner_reference(reference: &Value) -> String {
    let text = |name: &str| reference.get(name).and_then(Value::as_str).unwrap_or_default();
    let pointer = |name: &str| match reference.get(name).and_then(Value::as_bool) {
        Some(_) => "(*bool)(0xc000000000)",
        None => "(*bool)(nil)",
    };
    format!(
        "v1.OwnerReference{{APIVersion:{:?}, Kind:{:?}, Name:{:?}, UID:{:?}, Controller:{}, BlockOwnerDeletion:{}}}",
        text("apiVersion"),
        text("kind"),
        text("name"),
        text("uid"),
        pointer("controller"),
        pointer("blockOwnerDeletion"),
    )
}

/// `json.Marshal` of a `metav1.OwnerReference` (how upstream prints one from 1.34): its fields in
/// struct order, the two pointers only when set.
fn json_owner_reference(reference: &Value) -> String {
    let mut fields: Vec<String> = ["apiVersion", "kind", "name", "uid"]
        .iter()
        .map(|name| {
            format!(
                "{name:?}:{}",
                Value::String(str_at(reference, &format!("/{name}")).to_owned())
            )
        })
        .collect();
    for name in ["controller", "blockOwnerDeletion"] {
        if let Some(set) = reference.get(name).and_then(Value::as_bool) {
            fields.push(format!("{name:?}:{set}"));
        }
    }
    format!("{{{}}}", fields.join(","))
}

fn strings(object: &Value, pointer: &str) -> Vec<String> {
    list_at(object, pointer)
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::catalog::KubeVersion;

    fn messages(object: &Value, old: Option<&Value>, minor: u32) -> Vec<String> {
        validate(object, old)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body(KubeVersion { major: 1, minor })))
            .collect()
    }

    #[test]
    fn labels_keys_and_values() {
        let object =
            json!({"metadata": {"labels": {"app": "my app", "-bad": "ok", "example.com/tier": "web"}}});
        assert_eq!(
            messages(&object, None, 36),
            [
                "metadata.labels: Invalid value: \"-bad\": name part must consist of alphanumeric characters, '-', '_' or '.', \
                 and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex \
                 used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "metadata.labels: Invalid value: \"my app\": a valid label must be an empty string or consist of alphanumeric \
                 characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or \
                 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ]
        );
        let long = "v".repeat(64);
        let object = json!({"metadata": {"labels": {"a": long}}});
        assert_eq!(
            messages(&object, None, 36),
            [format!(
                "metadata.labels: Invalid value: \"{long}\": must be no more than 63 characters"
            )]
        );
    }

    #[test]
    fn annotation_keys_ignore_case_and_the_total_is_bounded() {
        let object = json!({"metadata": {"annotations": {"Example.COM/Owner": "x", "a b": "y"}}});
        let found = messages(&object, None, 36);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("metadata.annotations: Invalid value: \"a b\": name part must consist"));
        let object = json!({"metadata": {"annotations": {"big": "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT)}}});
        assert_eq!(
            messages(&object, None, 36),
            ["metadata.annotations: Too long: must have at most 262144 bytes"]
        );
        let object = json!({"metadata": {"annotations": {"b": "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1)}}});
        assert!(messages(&object, None, 36).is_empty());
    }

    #[test]
    fn owner_references_and_one_controller() {
        let object = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "", "kind": "", "name": "", "uid": ""},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "b", "uid": "2", "controller": true},
        ]}});
        let found = messages(&object, None, 36);
        assert_eq!(
            &found[..4],
            [
                "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
            ]
        );
        assert!(found[4].ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/a and Deployment/b"
        ));
        assert!(found[4].contains(
            "Invalid value: [{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"a\",\"uid\":\"1\",\"controller\":true},"
        ));
        let before = messages(&object, None, 33);
        assert!(before[4].starts_with(
            "metadata.ownerReferences: Invalid value: []v1.OwnerReference{v1.OwnerReference{APIVersion:\"apps/v1\", \
             Kind:\"ReplicaSet\", Name:\"a\", UID:\"1\", Controller:(*bool)(0xc000000000), BlockOwnerDeletion:(*bool)(nil)}, "
        ));
        let event = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "3"}]}});
        assert_eq!(
            messages(&event, None, 33),
            [
                "metadata.ownerReferences: Invalid value: v1.OwnerReference{APIVersion:\"v1\", Kind:\"Event\", Name:\"e\", \
              UID:\"3\", Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}: /v1, Kind=Event is disallowed from being an owner"
            ]
        );
    }

    #[test]
    fn finalizers_are_qualified_names_and_not_both_orphan_and_foreground() {
        let object = json!({"metadata": {"finalizers": ["orphan", "foregroundDeletion", "a/b/c"]}});
        let found = messages(&object, None, 33);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0]
                .starts_with("metadata.finalizers: Invalid value: \"a/b/c\": a qualified name must consist")
        );
        assert_eq!(
            found[1],
            "metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\", \"a/b/c\"}: finalizer orphan \
             and foregroundDeletion cannot be both set"
        );
    }

    #[test]
    fn an_object_being_deleted_takes_no_new_finalizer_and_keeps_its_uid() {
        let old = json!({"metadata": {"uid": "u1", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a.io/x"]}});
        let new = json!({"metadata": {"uid": "u1", "finalizers": ["a.io/x", "b.io/y"]}});
        assert_eq!(
            messages(&new, Some(&old), 36),
            [
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new \
              finalizers []string{\"b.io/y\"}"
            ]
        );
        let removed = json!({"metadata": {"uid": "u1", "finalizers": []}});
        assert!(messages(&removed, Some(&old), 36).is_empty());
        let other_uid = json!({"metadata": {"uid": "u2"}});
        let live = json!({"metadata": {"uid": "u1"}});
        assert_eq!(
            messages(&other_uid, Some(&live), 36),
            ["metadata.uid: Invalid value: \"u2\": field is immutable"]
        );
    }
}
