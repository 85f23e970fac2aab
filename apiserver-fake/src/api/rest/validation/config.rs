//! ConfigMaps and Secrets (keys, the 1 MiB total, the Secret types' required keys, immutability),
//! Namespaces (finalizer names) and ServiceAccounts (nothing beyond metadata), as
//! `pkg/apis/core/validation` validates them.

use data_encoding::BASE64;
use serde_json::Value;

use super::workloads::FIELD_IMMUTABLE;
use super::{FieldError, FieldErrors, Path, str_at};

/// `core.MaxSecretSize`: the most a ConfigMap or Secret may carry, in bytes.
pub(crate) const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// `IsConfigMapKey`'s messages for `key`, in upstream's order.
pub(crate) fn config_map_key_violations(key: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if key.len() > 253 {
        out.push("must be no more than 253 characters");
    }
    let valid = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !valid {
        out.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  \
             or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        );
    }
    if key == "." {
        out.push("must not be '.'");
    } else if key == ".." {
        out.push("must not be '..'");
    } else if key.starts_with("..") {
        out.push("must not start with '..'");
    }
    out
}

/// The keys of the object at `field` with their values.
fn entries<'a>(object: &'a Value, field: &str) -> Vec<(&'a String, &'a Value)> {
    object
        .get(field)
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default()
}

/// The decoded size of a `[]byte` field (base64 in JSON).
fn byte_len(value: &Value) -> usize {
    let text = value.as_str().unwrap_or_default();
    BASE64.decode(text.as_bytes()).map_or(text.len(), |b| b.len())
}

/// `ValidateConfigMap`.
pub(crate) fn validate_config_map(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let mut total = 0;
    let binary = entries(object, "binaryData");
    for (key, value) in entries(object, "data") {
        let at = Path::new("data").key(key);
        for message in config_map_key_violations(key) {
            errors.push(FieldError::invalid_str(&at, key, message));
        }
        if binary.iter().any(|(k, _)| *k == key) {
            errors.push(FieldError::invalid_str(
                &at,
                key,
                "duplicate of key present in binaryData",
            ));
        }
        total += value.as_str().map_or(0, str::len);
    }
    for (key, value) in &binary {
        for message in config_map_key_violations(key) {
            errors.push(FieldError::invalid_str(
                &Path::new("binaryData").key(key),
                key,
                message,
            ));
        }
        total += byte_len(value);
    }
    if total > MAX_SECRET_SIZE {
        // Upstream's path is `field.NewPath("")`, which prints `[]`.
        errors.push(FieldError::too_long(&Path::new("[]"), MAX_SECRET_SIZE));
    }
    errors
}

/// What `ValidateConfigMapUpdate` and `ValidateSecretUpdate` check of an object whose stored version
/// has `immutable: true`: `immutable` may not be unset, nor any of `fields` (`data`, `binaryData`)
/// change (`reflect.DeepEqual`: a missing map and an empty one differ).
fn immutable_update(object: &Value, old: &Value, fields: &[&str], errors: &mut FieldErrors) {
    const DETAIL: &str = "field is immutable when `immutable` is set";
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if object.get("immutable").and_then(Value::as_bool) != Some(true) {
        errors.push(FieldError::forbidden(&Path::new("immutable"), DETAIL));
    }
    let present = |v: &Value, f: &str| v.get(f).filter(|v| !v.is_null()).cloned();
    for field in fields {
        if present(object, field) != present(old, field) {
            errors.push(FieldError::forbidden(&Path::new(field), DETAIL));
        }
    }
}

/// `ValidateConfigMap`, and on update `ValidateConfigMapUpdate`: the immutability of an immutable
/// ConfigMap first, then the object as on create.
pub(crate) fn validate_config_map_update(object: &Value, old: Option<&Value>) -> FieldErrors {
    let mut errors = FieldErrors::new();
    if let Some(old) = old {
        immutable_update(object, old, &["data", "binaryData"], &mut errors);
    }
    errors.extend(validate_config_map(object));
    errors
}

/// `ValidateSecret`, and on update `ValidateSecretUpdate`: first the type (immutable) and the
/// immutability of an immutable Secret, then the object as on create.
pub(crate) fn validate_secret(object: &Value, old: Option<&Value>) -> FieldErrors {
    let mut errors = FieldErrors::new();
    if let Some(old) = old {
        let (kind, old_kind) = (str_at(object, "/type"), str_at(old, "/type"));
        if kind != old_kind {
            errors.push(FieldError::invalid_str(&Path::new("type"), kind, FIELD_IMMUTABLE));
        }
        immutable_update(object, old, &["data"], &mut errors);
    }
    let data_path = Path::new("data");
    let data = entries(object, "data");
    let mut total = 0;
    for (key, value) in &data {
        for message in config_map_key_violations(key) {
            errors.push(FieldError::invalid_str(&data_path.key(key), key, message));
        }
        total += byte_len(value);
    }
    if total > MAX_SECRET_SIZE {
        errors.push(FieldError::too_long(&data_path, MAX_SECRET_SIZE));
    }
    let has = |key: &str| data.iter().any(|(k, _)| k.as_str() == key);
    match str_at(object, "/type") {
        "kubernetes.io/service-account-token"
            if str_at(
                object,
                "/metadata/annotations/kubernetes.io~1service-account.name",
            )
            .is_empty() =>
        {
            errors.push(FieldError::required(
                &Path::new("metadata")
                    .child("annotations")
                    .key("kubernetes.io/service-account.name"),
                "",
            ));
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => {
            errors.push(FieldError::required(&data_path.key(".dockercfg"), ""));
        }
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            errors.push(FieldError::required(&data_path.key(".dockerconfigjson"), ""));
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errors.push(FieldError::required(&data_path.key("username"), ""));
            errors.push(FieldError::required(&data_path.key("password"), ""));
        }
        "kubernetes.io/ssh-auth" => {
            let empty = data
                .iter()
                .find(|(k, _)| k.as_str() == "ssh-privatekey")
                .is_none_or(|(_, v)| byte_len(v) == 0);
            if empty {
                errors.push(FieldError::required(&data_path.key("ssh-privatekey"), ""));
            }
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    errors.push(FieldError::required(&data_path.key(key), ""));
                }
            }
        }
        _ => {}
    }
    errors
}

/// `ValidateNamespace`: each of `spec.finalizers` is a standard finalizer or a qualified name.
pub(crate) fn validate_namespace(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let path = Path::new("spec").child("finalizers");
    for finalizer in super::list_at(object, "/spec/finalizers") {
        let name = finalizer.as_str().unwrap_or_default();
        let standard = matches!(name, "kubernetes" | "orphan" | "foregroundDeletion");
        if !name.contains('/') && !standard {
            errors.push(FieldError::invalid_str(
                &path,
                name,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errors
}

/// `ValidateServiceAccount`: metadata only, which [`super::super::names`] checks.
pub(crate) fn validate_service_account(_object: &Value) -> FieldErrors {
    FieldErrors::new()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::catalog::KubeVersion;

    #[test]
    fn config_map_keys_and_size() {
        let big = "x".repeat(MAX_SECRET_SIZE + 1);
        let errors = validate_config_map(&json!({"data": {"a b": "v", "ok": big}}));
        let version = KubeVersion { major: 1, minor: 32 };
        let causes = super::super::into_causes(&errors, version);
        assert_eq!(causes[0].field, "data[a b]");
        assert!(
            causes[0]
                .message
                .starts_with("Invalid value: \"a b\": a valid config key")
        );
        assert_eq!(causes[1].field, "[]");
        assert_eq!(causes[1].message, "Too long: must have at most 1048576 bytes");
    }

    #[test]
    fn tls_secrets_need_both_keys() {
        let errors = validate_secret(
            &json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}),
            None,
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field.to_string(), "data[tls.key]");
    }
}
