//! Server-side field validation of built-in objects (`?fieldValidation=Ignore|Warn|Strict`), as
//! kube-apiserver's decoder does it against the Go types, here against the same types' OpenAPI
//! definitions ([`crate::api::openapi::definitions`]).
//!
//! - Fields a kind does not declare are dropped from what is stored, whatever the directive (decoding
//!   into Go structs loses them). `Strict` turns them, and duplicate JSON fields, into 400
//!   `strict decoding error: unknown field "spec.foo"`; `Warn` (the default) into `Warning: 299`
//!   headers; `Ignore` says nothing.
//! - A value of the wrong JSON type is 400 whatever the directive, with the message Go's decoder
//!   gives (`json: cannot unmarshal string into Go struct field JobSpec.spec.parallelism of type
//!   int32`).
//!
//! Paths are written as upstream's strict decoder writes them: `spec.template.spec.containers[0].foo`.

use serde_json::Value;

use crate::api::openapi::definitions::{Definitions, V2_REF_PREFIX};
use crate::api::status::{GroupKind, Status, StatusCause};

/// The `fieldValidation` directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (upstream's default).
    #[default]
    Warn,
    /// Refuse the request.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter; other values get upstream's 422 from `ValidateCreateOptions`
    /// (`options_kind`: `CreateOptions`, `UpdateOptions` or `PatchOptions`).
    pub fn from_query(value: Option<&str>, options_kind: &str) -> Result<Self, Status> {
        match value.unwrap_or_default() {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => Err(Status::invalid(
                &GroupKind::new("meta.k8s.io", options_kind),
                "",
                vec![StatusCause::field_not_supported(
                    "fieldValidation",
                    other,
                    &["", "Ignore", "Strict", "Warn"],
                )],
            )),
        }
    }
}

/// What decoding an object against its kind found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// `unknown field "…"` / `duplicate field "…"` messages, in document order.
    pub problems: Vec<String>,
}

impl Findings {
    /// Applies `directive`: the `Warning` header values to send, or the strict decoding error.
    /// `kind_prefix` is `Job in version "v1" cannot be handled as a Job: ` for create and update
    /// bodies (upstream's decoder wraps them so) and empty for patches.
    pub fn enforce(self, directive: FieldValidation, kind_prefix: &str) -> Result<Vec<String>, Status> {
        if self.problems.is_empty() {
            return Ok(Vec::new());
        }
        match directive {
            FieldValidation::Ignore => Ok(Vec::new()),
            FieldValidation::Warn => Ok(self.problems),
            FieldValidation::Strict => Err(Status::bad_request(format!(
                "{kind_prefix}strict decoding error: {}",
                self.problems.join(", ")
            ))),
        }
    }
}

/// `Job in version "v1" cannot be handled as a Job: `.
pub fn kind_prefix(kind: &str, version: &str) -> String {
    format!("{kind} in version {version:?} cannot be handled as a {kind}: ")
}

/// Checks `object` (of `definition`) against the definitions of the server's minor: drops undeclared
/// fields (reported in the findings), and fails on a value of the wrong type with Go's message
/// (without the kind prefix, which the caller adds).
pub fn decode(
    definitions: &'static Definitions,
    definition: &str,
    object: &mut Value,
) -> Result<Findings, String> {
    let mut findings = Findings::default();
    let mut walk = Walk {
        definitions,
        findings: &mut findings,
    };
    walk.value(
        definition_schema(definitions, definition),
        definition,
        object,
        &mut Vec::new(),
    )?;
    Ok(findings)
}

/// The definition of `metadata`.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The `metadata` of a custom resource (or of a resource embedded in one) as apiextensions-apiserver
/// reads it (upstream `objectmeta.GetObjectMetaWithOptions` with `DropMalformedFields` and
/// `ReturnUnknownFieldPaths`, then `SetObjectMeta`): fields `ObjectMeta` does not declare are dropped
/// and returned as paths (`metadata.colour`, `spec.template.metadata.colour` with `parent`
/// `spec.template`), and a field of the wrong type is dropped silently (upstream decodes field by
/// field and keeps those that decode). Metadata that is not an object is dropped.
pub fn coerce_object_meta(
    definitions: &'static Definitions,
    object: &mut serde_json::Map<String, Value>,
    parent: &str,
) -> Vec<String> {
    let Some(metadata) = object.get_mut("metadata") else {
        return Vec::new();
    };
    let Some(fields) = metadata.as_object_mut() else {
        object.remove("metadata");
        return Vec::new();
    };
    let schema = definition_schema(definitions, OBJECT_META);
    let mut findings = Findings::default();
    let mut walk = Walk {
        definitions,
        findings: &mut findings,
    };
    let prefix = if parent.is_empty() {
        "metadata".to_owned()
    } else {
        format!("{parent}.metadata")
    };
    let mut malformed = Vec::new();
    for (name, value) in fields.iter_mut() {
        let mut path = vec![Step::Field(prefix.clone()), Step::Field(name.clone())];
        match schema.pointer(&format!(
            "/properties/{}",
            name.replace('~', "~0").replace('/', "~1")
        )) {
            Some(property) => {
                let mut candidate = value.clone();
                let before = walk.findings.problems.len();
                match walk.value(property, OBJECT_META, &mut candidate, &mut path) {
                    Ok(()) => *value = candidate,
                    Err(_) => {
                        walk.findings.problems.truncate(before);
                        malformed.push(name.clone());
                    }
                }
            }
            None => {
                walk.findings
                    .problems
                    .push(format!("unknown field {:?}", display(&path)));
                malformed.push(name.clone());
            }
        }
    }
    for name in malformed {
        fields.remove(&name);
    }
    findings
        .problems
        .into_iter()
        .filter_map(|p| {
            p.strip_prefix("unknown field \"")
                .and_then(|p| p.strip_suffix('"'))
                .map(str::to_owned)
        })
        .collect()
}

/// Duplicate keys of a JSON document, as `duplicate field "spec.paused"` messages.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

    struct Node<'a> {
        path: String,
        out: &'a mut Vec<String>,
    }

    impl<'de> DeserializeSeed<'de> for Node<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Node<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut index = 0;
            while seq
                .next_element_seed(Node {
                    path: format!("{}[{index}]", self.path),
                    out: &mut *self.out,
                })?
                .is_some()
            {
                index += 1;
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = if self.path.is_empty() {
                    key.clone()
                } else {
                    format!("{}.{key}", self.path)
                };
                if !seen.insert(key) {
                    self.out.push(format!("duplicate field {path:?}"));
                }
                map.next_value_seed(Node {
                    path,
                    out: &mut *self.out,
                })?;
            }
            Ok(())
        }
    }

    let mut out = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    // As deep as the body itself parsed (`negotiation::parse_json` checked its depth against the stack).
    deserializer.disable_recursion_limit();
    // A body that does not parse was refused before; nothing to add then.
    let _ = Node {
        path: String::new(),
        out: &mut out,
    }
    .deserialize(&mut deserializer);
    out
}

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// `resource.ErrFormatWrong`.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Why `resource.ParseQuantity` (which a Quantity's `UnmarshalJSON` calls on the trimmed string) refuses
/// `text`: its `ErrFormatWrong` or `ErrSuffix` text; `None` when it parses. Follows
/// `parseQuantityString` (sign, digits, an optional fraction, then suffix letters, an optional sign and
/// digits) and the suffixes `quantitySuffixer` interprets.
pub fn quantity_error(text: &str) -> Option<&'static str> {
    let text = text.trim();
    if text.is_empty() {
        return Some(QUANTITY_FORMAT);
    }
    let bytes = text.as_bytes();
    let mut pos = usize::from(matches!(bytes[0], b'+' | b'-'));
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < bytes.len() && bytes[pos] == b'.' {
        pos += 1;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
    }
    let suffix = &text[pos..];
    while pos < bytes.len() && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < bytes.len() && matches!(bytes[pos], b'+' | b'-') {
        pos += 1;
    }
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < bytes.len() {
        return Some(QUANTITY_FORMAT);
    }
    let known = matches!(
        suffix,
        "" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"
    ) || (suffix.len() > 1
        && suffix.starts_with(['e', 'E'])
        && suffix[1..].parse::<i64>().is_ok());
    (!known).then_some("unable to parse quantity's suffix")
}

/// The checks of a built-in kind's validation that its OpenAPI definition states: required fields
/// (`spec.template.spec.containers: Required value`), as causes of upstream's 422 `Invalid`. `status` is
/// not checked (main-resource writes do not validate it), nor is anything else upstream's hand-written
/// validation adds. (The definitions carry no enumerations: kubernetes-validate's schemas have none for
/// built-in fields, so `Unsupported value` is not produced here.)
pub fn schema_violations(
    definitions: &'static Definitions,
    definition: &str,
    object: &Value,
) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let walk = Walk {
        definitions,
        findings: &mut Findings::default(),
    };
    check_schema(
        &walk,
        definition_schema(definitions, definition),
        definition,
        object,
        &mut Vec::new(),
        &mut causes,
    );
    causes
}

fn check_schema(
    walk: &Walk<'_>,
    declared: &Value,
    parent: &str,
    value: &Value,
    path: &mut Vec<Step>,
    causes: &mut Vec<StatusCause>,
) {
    let (schema, owner) = walk.resolve(declared, parent);
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                    for (name, field) in map {
                        path.push(Step::Field(name.clone()));
                        check_schema(walk, additional, owner, field, path, causes);
                        path.pop();
                    }
                }
                return;
            };
            for required in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(name) = required.as_str() else { continue };
                if path.is_empty() && name == "status" {
                    continue;
                }
                if map.get(name).is_none_or(Value::is_null) {
                    path.push(Step::Field(name.to_owned()));
                    causes.push(StatusCause::field_required(&display(path), ""));
                    path.pop();
                }
            }
            for (name, field) in map {
                if path.is_empty() && name == "status" {
                    continue;
                }
                if let Some(property) = properties.get(name) {
                    path.push(Step::Field(name.clone()));
                    check_schema(walk, property, owner, field, path, causes);
                    path.pop();
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(Step::Index(index));
                check_schema(walk, &schema["items"], owner, item, path, causes);
                path.pop();
            }
        }
        _ => {}
    }
}

fn definition_schema(definitions: &'static Definitions, name: &str) -> &'static Value {
    static ANY: Value = Value::Null;
    definitions.get(name).unwrap_or(&ANY)
}

struct Walk<'a> {
    definitions: &'static Definitions,
    findings: &'a mut Findings,
}

/// A path element: a field name or a list index.
enum Step {
    Field(String),
    Index(usize),
}

fn display(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Go's path of a decoding error: field names only (`spec.template.spec.containers.name`).
fn go_path(path: &[Step]) -> String {
    path.iter()
        .filter_map(|s| match s {
            Step::Field(name) => Some(name.as_str()),
            Step::Index(_) => None,
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn short_name(definition: &str) -> &str {
    definition.rsplit('.').next().unwrap_or(definition)
}

impl Walk<'_> {
    /// Resolves `$ref`s: the schema and the definition whose type it is (for Go type names).
    fn resolve<'s>(&self, schema: &'s Value, owner: &'s str) -> (&'s Value, &'s str) {
        let mut schema = schema;
        let mut owner = owner;
        for _ in 0..8 {
            match schema
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(V2_REF_PREFIX))
            {
                Some(target) => match self.definitions.get(target) {
                    Some(next) => {
                        schema = next;
                        owner = target;
                    }
                    None => return (&Value::Null, owner),
                },
                None => break,
            }
        }
        (schema, owner)
    }

    fn go_type(&self, schema: &Value, owner: &str) -> String {
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(V2_REF_PREFIX))
        {
            let (resolved, _) = self.resolve(schema, owner);
            if resolved.get("properties").is_some() {
                let version = target.rsplit('.').nth(1).unwrap_or_default();
                return format!("{version}.{}", short_name(target));
            }
            return self.go_type(resolved, target);
        }
        match (schema["type"].as_str(), schema["format"].as_str()) {
            (Some("integer"), Some(format)) => format.to_owned(),
            (Some("integer"), None) => "int".to_owned(),
            (Some("number"), _) => "float64".to_owned(),
            (Some("boolean"), _) => "bool".to_owned(),
            (Some("string"), Some("byte")) => "[]uint8".to_owned(),
            (Some("string"), _) => "string".to_owned(),
            (Some("array"), _) => format!("[]{}", self.go_type(&schema["items"], owner)),
            (Some("object"), _) if schema.get("additionalProperties").is_some() => {
                format!(
                    "map[string]{}",
                    self.go_type(&schema["additionalProperties"], owner)
                )
            }
            _ => "interface {}".to_owned(),
        }
    }

    /// Checks `value` against `declared` (a property's schema, maybe a `$ref`) of a field of the Go
    /// type `parent` (a definition name).
    fn value(
        &mut self,
        declared: &Value,
        parent: &str,
        value: &mut Value,
        path: &mut Vec<Step>,
    ) -> Result<(), String> {
        let (schema, owner) = self.resolve(declared, parent);
        if value.is_null() || schema.is_null() {
            return Ok(());
        }
        let json_type = match value {
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Null => return Ok(()),
        };
        let expected = schema["type"].as_str();
        let format = schema["format"].as_str();
        let fits = match (expected, &*value) {
            (None, _) => true,
            (Some("string"), Value::String(_)) => true,
            (Some("string"), Value::Number(n)) if format == Some("int-or-string") => n.is_i64() || n.is_u64(),
            // resource.Quantity decodes JSON numbers too.
            (Some("string"), Value::Number(_)) => owner == QUANTITY,
            (Some("integer"), Value::Number(n)) => match (format, n.as_i64()) {
                (Some("int32"), Some(v)) => i32::try_from(v).is_ok(),
                (_, Some(_)) => true,
                (_, None) => n.is_u64() && format != Some("int32"),
            },
            (Some("number"), Value::Number(_)) => true,
            (Some("boolean"), Value::Bool(_)) => true,
            (Some("array"), Value::Array(_)) => true,
            (Some("object"), Value::Object(_)) => true,
            _ => false,
        };
        if owner == QUANTITY
            && let Value::String(text) = &*value
            && let Some(error) = quantity_error(text)
        {
            return Err(error.to_owned());
        }
        if !fits {
            let number = match &*value {
                Value::Number(n) if expected == Some("integer") => format!("number {n}"),
                _ => json_type.to_owned(),
            };
            let field = go_path(path);
            let go_type = self.go_type(declared, parent);
            return Err(if field.is_empty() {
                format!("json: cannot unmarshal {number} into Go value of type {go_type}")
            } else {
                format!(
                    "json: cannot unmarshal {number} into Go struct field {}.{field} of type {go_type}",
                    short_name(parent)
                )
            });
        }
        match value {
            Value::Array(items) => {
                let item_schema = &schema["items"];
                for (index, item) in items.iter_mut().enumerate() {
                    path.push(Step::Index(index));
                    self.value(item_schema, owner, item, path)?;
                    path.pop();
                }
            }
            Value::Object(map) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    let mut unknown = Vec::new();
                    for (name, field) in map.iter_mut() {
                        path.push(Step::Field(name.clone()));
                        match properties.get(name) {
                            Some(property) => self.value(property, owner, field, path)?,
                            None => {
                                self.findings
                                    .problems
                                    .push(format!("unknown field {:?}", display(path)));
                                unknown.push(name.clone());
                            }
                        }
                        path.pop();
                    }
                    for name in unknown {
                        map.remove(&name);
                    }
                } else if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object())
                {
                    for (name, field) in map.iter_mut() {
                        path.push(Step::Field(name.clone()));
                        self.value(additional, owner, field, path)?;
                        path.pop();
                    }
                }
                // An object with neither (RawExtension, JSON, FieldsV1) holds anything.
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::catalog::KubeVersion;

    #[test]
    fn quantities_parse_as_parse_quantity_does() {
        for good in ["1", "500m", "1.5Gi", "2e3", "+1", "0.5", "1E-3", " 2Gi "] {
            assert_eq!(quantity_error(good), None, "{good}");
        }
        for wrong in ["", "abc", "2GB", "2 Gi", "1.2.3"] {
            assert_eq!(quantity_error(wrong), Some(QUANTITY_FORMAT), "{wrong}");
        }
        assert_eq!(quantity_error("2Gii"), Some("unable to parse quantity's suffix"));
        assert_eq!(quantity_error("1e"), Some("unable to parse quantity's suffix"));
    }

    const JOB: &str = "io.k8s.api.batch.v1.Job";

    fn defs() -> &'static Definitions {
        Definitions::of(KubeVersion { major: 1, minor: 36 })
    }

    #[test]
    fn unknown_fields_are_found_with_their_paths_and_dropped() {
        let mut job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "colour": "red"},
            "spec": {"foo": 1, "template": {"spec": {"containers": [
                {"name": "a", "image": "x"}, {"name": "b", "image": "y", "imagePullPolcy": "Always"}
            ]}}},
        });
        let findings = decode(defs(), JOB, &mut job).unwrap();
        assert_eq!(
            findings.problems,
            [
                r#"unknown field "metadata.colour""#,
                r#"unknown field "spec.foo""#,
                r#"unknown field "spec.template.spec.containers[1].imagePullPolcy""#,
            ]
        );
        assert!(job["spec"].get("foo").is_none());
        assert!(job["metadata"].get("colour").is_none());
        assert_eq!(
            job["spec"]["template"]["spec"]["containers"][1],
            json!({"name": "b", "image": "y"})
        );
    }

    #[test]
    fn maps_and_free_form_objects_keep_their_keys() {
        let mut job = json!({
            "metadata": {"labels": {"any": "thing"}, "annotations": {"a/b": "c"}},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": 5}}}]}}},
        });
        assert_eq!(decode(defs(), JOB, &mut job).unwrap(), Findings::default());
        let mut crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"spec": {"type": "object"}}
        }}}]}});
        let findings = decode(
            defs(),
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            &mut crd,
        )
        .unwrap();
        assert_eq!(findings, Findings::default());
    }

    #[test]
    fn wrong_types_get_gos_decoding_message() {
        let mut job = json!({"spec": {"parallelism": "two"}});
        assert_eq!(
            decode(defs(), JOB, &mut job).unwrap_err(),
            "json: cannot unmarshal string into Go struct field JobSpec.spec.parallelism of type int32"
        );
        let mut job = json!({"spec": {"template": {"spec": {"containers": [{"name": 5}]}}}});
        assert_eq!(
            decode(defs(), JOB, &mut job).unwrap_err(),
            "json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.name of type string"
        );
        let mut job = json!({"spec": "x"});
        assert_eq!(
            decode(defs(), JOB, &mut job).unwrap_err(),
            "json: cannot unmarshal string into Go struct field Job.spec of type v1.JobSpec"
        );
        // int-or-string takes both; null is always accepted.
        let mut deployment = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}, "replicas": null}});
        assert!(decode(defs(), "io.k8s.api.apps.v1.Deployment", &mut deployment).is_ok());
    }

    #[test]
    fn directives() {
        let findings = || Findings {
            problems: vec![
                r#"unknown field "spec.foo""#.into(),
                r#"duplicate field "spec.paused""#.into(),
            ],
        };
        assert_eq!(
            findings().enforce(FieldValidation::Ignore, "").unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(findings().enforce(FieldValidation::Warn, "").unwrap().len(), 2);
        let strict = findings()
            .enforce(FieldValidation::Strict, &kind_prefix("Job", "v1"))
            .unwrap_err();
        assert_eq!(
            strict.message,
            r#"Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field "spec.foo", duplicate field "spec.paused""#
        );
        assert_eq!(strict.code, 400);
        assert_eq!(
            FieldValidation::from_query(None, "CreateOptions").unwrap(),
            FieldValidation::Warn
        );
        let bad = FieldValidation::from_query(Some("Loud"), "CreateOptions").unwrap_err();
        assert_eq!(bad.code, 422);
        assert!(
            bad.message
                .contains(r#"fieldValidation: Unsupported value: "Loud""#),
            "{}",
            bad.message
        );
    }

    #[test]
    fn required_fields_are_upstreams_causes() {
        let job = json!({
            "metadata": {"name": "pi"},
            "spec": {"template": {"spec": {"containers": [{"image": "x"}, {"name": "b", "ports": [{"name": "p"}]}]}}},
            "status": {"conditions": [{"status": "True"}]},
        });
        let causes = schema_violations(defs(), JOB, &job);
        let messages: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "spec.template.spec.containers[0].name: Required value",
                "spec.template.spec.containers[1].ports[0].containerPort: Required value",
            ]
        );
        let no_template = json!({"metadata": {"name": "pi"}, "spec": {}});
        let causes = schema_violations(defs(), JOB, &no_template);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template");
        assert_eq!(causes[0].reason, "FieldValueRequired");
    }

    #[test]
    fn duplicate_json_fields_are_found() {
        let body = br#"{"metadata": {"name": "a", "name": "b"}, "spec": {"containers": [{"x": 1, "x": 2}]}}"#;
        assert_eq!(
            duplicate_fields(body),
            [
                r#"duplicate field "metadata.name""#,
                r#"duplicate field "spec.containers[0].x""#
            ]
        );
        assert!(duplicate_fields(br#"{"a": {"b": 1}, "b": 2}"#).is_empty());
    }
}
