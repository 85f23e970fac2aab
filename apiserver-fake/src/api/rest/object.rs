//! How objects look on the way in and out of the REST layer: `apiVersion`/`kind` of the request's
//! group/version, upstream's key order (`kind`, `apiVersion`, `metadata`, ... and `ObjectMeta`'s field
//! order), generated names, and the name/namespace checks of the create and update handlers.

use rand::Rng;
use serde_json::{Map, Value};

use crate::api::status::Status;

/// `ObjectMeta` fields in Go struct order, which is the order upstream's JSON has.
const METADATA_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The alphabet of `names.SimpleNameGenerator` (no vowels, no confusable characters).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `generateName` + 5 random characters, as upstream's `SimpleNameGenerator` (the prefix is cut so the
/// result stays within 63 characters).
pub(crate) fn generate_name(prefix: &str) -> String {
    let mut rng = rand::rng();
    let mut prefix: String = prefix.to_owned();
    let max_prefix = 63 - 5;
    if prefix.len() > max_prefix {
        let mut cut = max_prefix;
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        prefix.truncate(cut);
    }
    let suffix: String = (0..5)
        .map(|_| char::from(NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())]))
        .collect();
    prefix + &suffix
}

fn reorder(map: &mut Map<String, Value>, first: &[&str]) {
    let mut ordered = Map::with_capacity(map.len());
    for key in first {
        if let Some(value) = map.remove(*key) {
            ordered.insert((*key).to_owned(), value);
        }
    }
    ordered.append(map);
    *map = ordered;
}

/// Sets `apiVersion` and `kind` and orders keys as upstream serialises them.
pub(crate) fn present(mut object: Value, api_version: &str, kind: &str) -> Value {
    if let Value::Object(map) = &mut object {
        map.insert("kind".to_owned(), Value::String(kind.to_owned()));
        map.insert("apiVersion".to_owned(), Value::String(api_version.to_owned()));
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            reorder(metadata, METADATA_ORDER);
        }
        reorder(map, &["kind", "apiVersion", "metadata", "spec", "status"]);
    }
    object
}

/// An item of a typed list: built-in lists carry no `apiVersion`/`kind` on items (Go's empty TypeMeta
/// is omitted), custom resource lists do (unstructured items keep theirs).
pub(crate) fn present_list_item(object: Value, api_version: &str, kind: &str, custom: bool) -> Value {
    let mut object = present(object, api_version, kind);
    if !custom && let Value::Object(map) = &mut object {
        map.remove("kind");
        map.remove("apiVersion");
    }
    object
}

/// `metadata.<field>` as a string (empty when absent).
pub(crate) fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Drops the `omitempty` metadata fields a patch left empty (`labels: {}`, `finalizers: []`): Go decodes
/// them into empty values that its JSON encoder then leaves out, so a real server never returns them.
pub(crate) fn drop_empty_metadata(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.retain(|key, value| {
            let omitempty = matches!(
                key.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences" | "managedFields"
            );
            let empty = match value {
                Value::Object(map) => map.is_empty(),
                Value::Array(items) => items.is_empty(),
                Value::Null => true,
                _ => false,
            };
            !(omitempty && empty)
        });
    }
}

/// The `metadata` map of an object (created when missing). Callers pass objects already checked to be
/// JSON objects; anything else is left untouched and yields a detached map.
pub(crate) fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = object.as_object_mut()?;
    let metadata = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata.as_object_mut()
}

/// Sets `value` at `path`, turning anything in the way that is not a JSON object into one (never
/// panics, unlike `IndexMut` on non-objects).
pub(crate) fn set_in(object: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        *object = value;
        return;
    };
    let mut current = object;
    for key in parents {
        if !current.is_object() {
            *current = Value::Object(Map::new());
        }
        let Value::Object(map) = current else { return };
        current = map.entry((*key).to_owned()).or_insert(Value::Null);
    }
    if !current.is_object() {
        *current = Value::Object(Map::new());
    }
    if let Value::Object(map) = current {
        map.insert((*last).to_owned(), value);
    }
}

/// The create handler's namespace rule (`EnsureObjectNamespaceMatchesRequestNamespace` then
/// `ExpectedNamespaceForScope`): an empty object namespace takes the request's, a different one is 400;
/// cluster-scoped objects lose any namespace.
pub(crate) fn reconcile_create_namespace(
    object: &mut Value,
    request_namespace: Option<&str>,
) -> Result<(), Status> {
    let object_namespace = meta_str(object, "namespace").to_owned();
    let Some(metadata) = metadata_mut(object) else {
        return Ok(());
    };
    match request_namespace {
        Some(ns) if object_namespace.is_empty() || object_namespace == ns => {
            metadata.insert("namespace".to_owned(), Value::String(ns.to_owned()));
            Ok(())
        }
        Some(_) => Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        None => {
            metadata.remove("namespace");
            Ok(())
        }
    }
}

/// The update/patch handler's `checkName`: the object's name must equal the URL's, and a set namespace
/// must equal the request's.
pub(crate) fn check_update_name(
    object: &mut Value,
    name: &str,
    request_namespace: Option<&str>,
) -> Result<(), Status> {
    let object_name = meta_str(object, "name");
    if object_name != name {
        return Err(Status::bad_request(format!(
            "the name of the object ({object_name}) does not match the name on the URL ({name})"
        )));
    }
    let object_namespace = meta_str(object, "namespace").to_owned();
    if let Some(ns) = request_namespace
        && !object_namespace.is_empty()
        && object_namespace != ns
    {
        return Err(Status::bad_request(format!(
            "the namespace of the object ({object_namespace}) does not match the namespace on the request ({ns})"
        )));
    }
    reconcile_create_namespace(object, request_namespace)
}

/// The create/update handlers' check of the body's `apiVersion` against the URL's group/version
/// (a missing one defaults to the URL's, as the decoder does).
pub(crate) fn check_type_meta(object: &Value, api_version: &str, kind: &str) -> Result<(), Status> {
    if let Some(found) = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        && found != api_version
    {
        return Err(Status::bad_request(format!(
            "the API version in the data ({found}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(found) = object
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        && found != kind
    {
        return Err(Status::bad_request(format!(
            "the kind in the data ({found}) does not match the expected kind ({kind})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn generated_names_use_upstream_alphabet() {
        let name = generate_name("job-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("job-"));
        assert!(name[4..].bytes().all(|b| NAME_ALPHABET.contains(&b)), "{name}");
        assert_eq!(generate_name(&"x".repeat(100)).len(), 63);
    }

    #[test]
    fn present_orders_keys_like_upstream() {
        let object =
            json!({"spec": {}, "metadata": {"labels": {}, "uid": "u", "name": "n"}, "apiVersion": "old"});
        let shown = present(object, "batch/v1", "Job");
        let keys: Vec<&String> = shown.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["kind", "apiVersion", "metadata", "spec"]);
        let meta: Vec<&String> = shown["metadata"].as_object().unwrap().keys().collect();
        assert_eq!(meta, ["name", "uid", "labels"]);
        assert_eq!(shown["apiVersion"], "batch/v1");
        let item = present_list_item(json!({"metadata": {}}), "batch/v1", "Job", false);
        assert!(item.get("kind").is_none());
        let custom = present_list_item(json!({"metadata": {}}), "example.com/v1", "Widget", true);
        assert_eq!(custom["kind"], "Widget");
    }

    #[test]
    fn set_in_replaces_non_objects() {
        let mut o = json!({"metadata": {"labels": 5}});
        set_in(&mut o, &["metadata", "labels", "a"], json!("b"));
        assert_eq!(o, json!({"metadata": {"labels": {"a": "b"}}}));
        let mut s = json!("x");
        set_in(&mut s, &["spec"], json!(1));
        assert_eq!(s, json!({"spec": 1}));
    }

    #[test]
    fn namespace_rules() {
        let mut o = json!({"metadata": {"name": "a"}});
        reconcile_create_namespace(&mut o, Some("ns")).unwrap();
        assert_eq!(o["metadata"]["namespace"], "ns");
        let mut other = json!({"metadata": {"namespace": "x"}});
        assert_eq!(
            reconcile_create_namespace(&mut other, Some("ns"))
                .unwrap_err()
                .message,
            "the namespace of the provided object does not match the namespace sent on the request"
        );
        reconcile_create_namespace(&mut other, None).unwrap();
        assert!(other["metadata"].get("namespace").is_none());
        let mut renamed = json!({"metadata": {"name": "b"}});
        assert_eq!(
            check_update_name(&mut renamed, "a", Some("ns"))
                .unwrap_err()
                .message,
            "the name of the object (b) does not match the name on the URL (a)"
        );
        assert_eq!(
            check_type_meta(&json!({"apiVersion": "batch/v2"}), "batch/v1", "Job")
                .unwrap_err()
                .message,
            "the API version in the data (batch/v2) does not match the expected API version (batch/v1)"
        );
        assert!(check_type_meta(&json!({}), "batch/v1", "Job").is_ok());
    }
}
