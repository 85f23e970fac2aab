//! `ValidateCustomResourceDefinition` / `ValidateCustomResourceDefinitionUpdate` of apiextensions
//! (`staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go`) for
//! the mistakes hand-written CRDs make most: the name, the group, the scope, the versions (one storage
//! version, unique DNS-1035 names, a schema each), the names, the OpenAPI schema
//! (`ValidateCustomResourceDefinitionOpenAPISchema`) and its structural invariants (`ValidateStructural`
//! of `pkg/apiserver/schema/validation.go`), the conversion, the fields an update may not change, and
//! the stored versions. Paths are upstream's, which are the internal type's: a v1 `spec.conversion.webhook`
//! is `spec.conversion.webhookClientConfig` and its review versions `spec.conversion.conversionReviewVersions`.
//!
//! The CEL rules of the schemas and their cost are checked after these by
//! [`crate::api::rest::structural::validation_rules::check_definition`].

use serde_json::{Map, Value};

use super::{BadValue, FieldError, FieldErrors, Path, list_at, str_at};
use crate::api::catalog::KubeVersion;
use crate::api::rest::names::NameRule;

/// `openapiV3Types`: the types a property may have, sorted as `sets.List` lists them.
const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// The ConversionReview versions the previous minor understands (`acceptedConversionReviewVersions`).
const ACCEPTED_CONVERSION_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The `ValidateCreate` (`old` `None`) or `ValidateUpdate` errors of a CustomResourceDefinition, in
/// upstream's order: the name, the spec, what an update may not change, the stored versions.
pub(crate) fn validate_custom_resource_definition(object: &Value, old: Option<&Value>) -> FieldErrors {
    let mut errors = FieldErrors::new();
    if old.is_none() {
        let name = str_at(object, "/metadata/name");
        let required = format!(
            "{}.{}",
            str_at(object, "/spec/names/plural"),
            str_at(object, "/spec/group")
        );
        if !name.is_empty() && name != required {
            errors.push(FieldError::invalid_str(
                &Path::new("metadata").child("name"),
                name,
                "must be spec.names.plural+\".\"+spec.group",
            ));
        }
    }
    let spec = defaulted_spec(object);
    let spec = &spec;
    let options = Options::of(old);
    errors.extend(validate_spec(spec, options, &Path::new("spec")));
    if let Some(old) = old {
        errors.extend(validate_spec_update(
            spec,
            old.get("spec").unwrap_or(&Value::Null),
        ));
    }
    errors.extend(validate_stored_versions(object));
    errors
}

/// The spec as upstream validates it, after v1's defaults (`SetDefaults_CustomResourceDefinitionSpec`,
/// `SetDefaults_CustomResourceConversion`): `singular` the lower-case kind, `listKind` the kind and
/// `List`, a conversion's `strategy` `None`. The fake writes the names only when it creates a CRD.
fn defaulted_spec(object: &Value) -> Value {
    let mut spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let kind = str_at(&spec, "/names/kind").to_owned();
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let empty = |names: &Map<String, Value>, field: &str| {
            names
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .is_empty()
        };
        if empty(names, "singular") {
            names.insert("singular".to_owned(), Value::String(kind.to_lowercase()));
        }
        if empty(names, "listKind") && !kind.is_empty() {
            names.insert("listKind".to_owned(), Value::String(format!("{kind}List")));
        }
    }
    if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut)
        && conversion
            .get("strategy")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
    {
        conversion.insert("strategy".to_owned(), Value::String("None".to_owned()));
    }
    spec
}

/// Upstream's `validationOptions` that depend on what is stored: an update keeps accepting what the
/// stored CRD already did (`requireOpenAPISchema` only when every stored version has a schema,
/// `requireRecognizedConversionReviewVersion` only when the stored list had one or was empty).
#[derive(Debug, Clone, Copy)]
struct Options {
    require_openapi_schema: bool,
    require_recognized_conversion_review_version: bool,
}

impl Options {
    fn of(old: Option<&Value>) -> Self {
        let Some(old) = old else {
            return Self {
                require_openapi_schema: true,
                require_recognized_conversion_review_version: true,
            };
        };
        let versions = list_at(old, "/spec/versions");
        let review_versions = list_at(old, "/spec/conversion/webhook/conversionReviewVersions");
        Self {
            require_openapi_schema: versions
                .iter()
                .all(|v| v.pointer("/schema/openAPIV3Schema").is_some_and(|s| !s.is_null())),
            require_recognized_conversion_review_version: review_versions.is_empty()
                || review_versions
                    .iter()
                    .any(|v| ACCEPTED_CONVERSION_REVIEW_VERSIONS.contains(&v.as_str().unwrap_or_default())),
        }
    }
}

fn bool_value(value: bool) -> BadValue {
    BadValue::Rendered {
        go: value.to_string(),
        json: value.to_string(),
    }
}

fn preserve_unknown_fields(spec: &Value) -> bool {
    spec.get("preserveUnknownFields").and_then(Value::as_bool) == Some(true)
}

/// `validateCustomResourceDefinitionSpec`.
fn validate_spec(spec: &Value, options: Options, at: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let group = str_at(spec, "/group");
    let group_path = at.child("group");
    let group_violations = NameRule::Dns1123Subdomain.violations(group);
    if group.is_empty() {
        errors.push(FieldError::required(&group_path, ""));
    } else if !group_violations.is_empty() {
        errors.push(FieldError::invalid_str(
            &group_path,
            group,
            &group_violations.join(","),
        ));
    } else if !group.contains('.') {
        errors.push(FieldError::invalid_str(
            &group_path,
            group,
            "should be a domain with at least one dot",
        ));
    }
    enum_string(
        &mut errors,
        &at.child("scope"),
        str_at(spec, "/scope"),
        &["Cluster", "Namespaced"],
    );
    let versions = list_at(spec, "/versions");
    let versions_path = at.child("versions");
    if options.require_openapi_schema {
        for (i, version) in versions.iter().enumerate() {
            if version
                .pointer("/schema/openAPIV3Schema")
                .is_none_or(Value::is_null)
            {
                errors.push(FieldError::required(
                    &versions_path.index(i).child("schema").child("openAPIV3Schema"),
                    "schemas are required",
                ));
            }
        }
    } else if !preserve_unknown_fields(spec) {
        for (i, version) in versions.iter().enumerate() {
            let served = version.get("served").and_then(Value::as_bool) == Some(true);
            if served
                && version
                    .pointer("/schema/openAPIV3Schema")
                    .is_none_or(Value::is_null)
            {
                errors.push(FieldError::required(
                    &versions_path.index(i).child("schema").child("openAPIV3Schema"),
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, version) in versions.iter().enumerate() {
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        let name = str_at(version, "/name");
        if seen.contains(&name) {
            unique = false;
        } else {
            seen.push(name);
        }
        dns1035(&mut errors, name, &versions_path.index(i).child("name"));
        let schema_path = versions_path.index(i).child("schema");
        if let Some(schema) = version
            .pointer("/schema/openAPIV3Schema")
            .filter(|s| s.is_object())
        {
            errors.extend(validate_validation(schema, &schema_path));
        }
    }
    let all_versions = BadValue::Json(Value::Array(versions.to_vec()));
    if !unique {
        errors.push(FieldError::invalid(
            &versions_path,
            all_versions.clone(),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errors.push(FieldError::invalid(
            &versions_path,
            all_versions,
            "must have exactly one version marked as storage version",
        ));
    }
    let names_path = at.child("names");
    for field in ["plural", "singular", "kind", "listKind"] {
        if str_at(spec, &format!("/names/{field}")).is_empty() {
            errors.push(FieldError::required(&names_path.child(field), ""));
        }
    }
    errors.extend(validate_names(
        spec.get("names").unwrap_or(&Value::Null),
        &names_path,
    ));
    errors.extend(validate_conversion(spec, options, &at.child("conversion")));
    errors
}

/// `validateEnumStrings` of a required enumeration.
fn enum_string(errors: &mut FieldErrors, at: &Path, value: &str, accepted: &[&str]) {
    if value.is_empty() {
        errors.push(FieldError::required(at, ""));
    } else if !accepted.contains(&value) {
        errors.push(FieldError::not_supported(at, value, accepted));
    }
}

/// `IsDNS1035Label`'s messages joined with `,`, as one `Invalid`.
fn dns1035(errors: &mut FieldErrors, value: &str, at: &Path) {
    let violations = NameRule::Dns1035Label.violations(value);
    if !violations.is_empty() {
        errors.push(FieldError::invalid_str(at, value, &violations.join(",")));
    }
}

/// `ValidateCustomResourceDefinitionNames`.
fn validate_names(names: &Value, at: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    for field in ["plural", "singular"] {
        let value = str_at(names, &format!("/{field}"));
        if !value.is_empty() {
            dns1035(&mut errors, value, &at.child(field));
        }
    }
    for field in ["kind", "listKind"] {
        let value = str_at(names, &format!("/{field}"));
        let violations = NameRule::Dns1035Label.violations(&value.to_lowercase());
        if !value.is_empty() && !violations.is_empty() {
            errors.push(FieldError::invalid_str(
                &at.child(field),
                value,
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    violations.join(",")
                ),
            ));
        }
    }
    for (i, short_name) in list_at(names, "/shortNames").iter().enumerate() {
        dns1035(
            &mut errors,
            short_name.as_str().unwrap_or_default(),
            &at.child("shortNames").index(i),
        );
    }
    let kind = str_at(names, "/kind");
    let list_kind = str_at(names, "/listKind");
    if !kind.is_empty() && kind == list_kind {
        errors.push(FieldError::invalid_str(
            &at.child("listKind"),
            list_kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in list_at(names, "/categories").iter().enumerate() {
        dns1035(
            &mut errors,
            category.as_str().unwrap_or_default(),
            &at.child("categories").index(i),
        );
    }
    errors
}

/// `validateCustomResourceDefinitionValidation` of one version's `schema` (at `…schema`): the root
/// may not be nullable, the schema must be one apiextensions accepts
/// ([`validate_openapi_schema`]) and, as v1 prunes, structural ([`validate_structural`]).
fn validate_validation(schema: &Value, at: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let schema_path = at.child("openAPIV3Schema");
    if schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        errors.push(FieldError::forbidden(
            &at.child("openAPIV3Schema.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    validate_openapi_schema(&mut errors, schema, &schema_path);
    errors.extend(validate_structural(schema, &schema_path));
    errors
}

/// The sub-schemas of `schema` under `field` (`allOf`, `anyOf`, `oneOf`), with their paths.
fn schema_list<'a>(schema: &'a Value, field: &str, at: &Path) -> Vec<(&'a Value, Path)> {
    list_at(schema, &format!("/{field}"))
        .iter()
        .enumerate()
        .map(|(i, s)| (s, at.child(field).index(i)))
        .collect()
}

/// The properties of `schema` in the order written (upstream walks a Go map: any order).
fn properties(schema: &Value) -> Vec<(&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().collect())
        .unwrap_or_default()
}

/// `ValidateCustomResourceDefinitionOpenAPISchema` with `specStandardValidatorV3`: what apiextensions
/// does not support (`$ref`, `definitions`, …), `uniqueItems`, `additionalProperties` beside
/// `properties`, `x-kubernetes-preserve-unknown-fields: false` and the list/map type extensions on the
/// wrong types, recursively.
fn validate_openapi_schema(errors: &mut FieldErrors, schema: &Value, at: &Path) {
    let Some(map) = schema.as_object() else {
        return;
    };
    standard_v3(errors, map, at);
    if map.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        errors.push(FieldError::forbidden(
            &at.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let has_properties = map
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if let Some(additional) = map.get("additionalProperties") {
        if has_properties && (additional.is_object() || additional.as_bool() == Some(false)) {
            errors.push(FieldError::forbidden(
                &at.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        validate_openapi_schema(errors, additional, &at.child("additionalProperties"));
    }
    for (name, property) in properties(schema) {
        validate_openapi_schema(errors, property, &at.child("properties").key(name));
    }
    if let Some(not) = map.get("not") {
        validate_openapi_schema(errors, not, &at.child("not"));
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        for (sub, path) in schema_list(schema, junctor, at) {
            validate_openapi_schema(errors, sub, &path);
        }
    }
    if let Some(items) = map.get("items").filter(|i| i.is_object()) {
        validate_openapi_schema(errors, items, &at.child("items"));
    }
    if map
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(false)
    {
        errors.push(FieldError::invalid(
            &at.child("x-kubernetes-preserve-unknown-fields"),
            bool_value(false),
            "must be true or undefined",
        ));
    }
    let ty = map.get("type").and_then(Value::as_str).unwrap_or_default();
    for (extension, expected) in [
        ("x-kubernetes-map-type", "object"),
        ("x-kubernetes-list-type", "array"),
    ] {
        if map.contains_key(extension) && ty != expected {
            let detail = format!("must be {expected} if {extension} is specified");
            errors.push(if ty.is_empty() {
                FieldError::required(&at.child("type"), &detail)
            } else {
                FieldError::invalid_str(&at.child("type"), ty, &detail)
            });
        }
    }
    if let Some(map_type) = map.get("x-kubernetes-map-type").and_then(Value::as_str)
        && map_type != "atomic"
        && map_type != "granular"
    {
        errors.push(FieldError::not_supported(
            &at.child("x-kubernetes-map-type"),
            map_type,
            &["atomic", "granular"],
        ));
    }
}

/// `specStandardValidatorV3.validate`: the OpenAPI v3 constructs apiextensions refuses.
fn standard_v3(errors: &mut FieldErrors, map: &Map<String, Value>, at: &Path) {
    let ty = map.get("type").and_then(Value::as_str).unwrap_or_default();
    if !ty.is_empty() && !OPENAPI_V3_TYPES.contains(&ty) {
        errors.push(FieldError::not_supported(
            &at.child("type"),
            ty,
            &OPENAPI_V3_TYPES,
        ));
    }
    let unsupported = [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ];
    for (field, detail) in unsupported {
        if map.get(field).is_some_and(|v| !v.is_null()) {
            errors.push(FieldError::forbidden(&at.child(field), detail));
        }
    }
    if ty == "null" {
        errors.push(FieldError::forbidden(
            &at.child("type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if map.get("items").is_some_and(Value::is_array) {
        errors.push(FieldError::forbidden(
            &at.child("items"),
            "items must be a schema object and not an array",
        ));
    }
}

/// Where a schema sits, for the wording of a missing `type` (`level` in `ValidateStructural`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// `ValidateStructural`: the invariants of a structural schema, sorted by their text as upstream
/// sorts them.
fn validate_structural(schema: &Value, at: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    structural_invariants(&mut errors, schema, Level::Root, at);
    let sort_version = KubeVersion { major: 1, minor: 34 };
    errors.sort_by_key(|e| format!("{}: {}", e.field, e.body(sort_version)));
    errors
}

fn flag(map: &Map<String, Value>, extension: &str) -> bool {
    map.get(extension).and_then(Value::as_bool) == Some(true)
}

/// `validateStructuralInvariants` on the schema as written (its structural part is everything but
/// the junctors `allOf`, `anyOf`, `oneOf`, `not`, which [`nested_value_validation`] checks).
fn structural_invariants(errors: &mut FieldErrors, schema: &Value, level: Level, at: &Path) {
    let Some(map) = schema.as_object() else {
        return;
    };
    let ty = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let items = map.get("items").filter(|i| i.is_object());
    if ty == "array" && items.is_none() {
        errors.push(FieldError::required(&at.child("items"), "must be specified"));
    }
    if let Some(items) = items {
        structural_invariants(errors, items, Level::Item, &at.child("items"));
    }
    for (name, property) in properties(schema) {
        structural_invariants(errors, property, Level::Field, &at.child("properties").key(name));
    }
    if let Some(additional) = map.get("additionalProperties") {
        if level == Level::Root {
            errors.push(FieldError::forbidden(
                &at.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if additional.is_object() {
            structural_invariants(
                errors,
                additional,
                Level::Field,
                &at.child("additionalProperties"),
            );
        }
    }
    let int_or_string = flag(map, "x-kubernetes-int-or-string");
    let preserve = flag(map, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(map, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        errors.push(FieldError::invalid(
            &at.child("x-kubernetes-preserve-unknown-fields"),
            bool_value(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errors.push(FieldError::invalid(
            &at.child("x-kubernetes-embedded-resource"),
            bool_value(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    value_validation(errors, schema, level, at);
    type_invariants(errors, map, level, at);
    if level == Level::Root || embedded {
        meta_invariants(errors, map, level, at);
    }
    if embedded && !preserve && properties(schema).is_empty() {
        errors.push(FieldError::required(
            &at.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The `type` a structural schema must have where it sits.
fn type_invariants(errors: &mut FieldErrors, map: &Map<String, Value>, level: Level, at: &Path) {
    let ty = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let embedded = flag(map, "x-kubernetes-embedded-resource");
    if embedded && ty != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errors.push(if ty.is_empty() {
            FieldError::required(&at.child("type"), detail)
        } else {
            FieldError::invalid_str(&at.child("type"), ty, detail)
        });
    } else if ty.is_empty()
        && !flag(map, "x-kubernetes-int-or-string")
        && !flag(map, "x-kubernetes-preserve-unknown-fields")
    {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(FieldError::required(&at.child("type"), detail));
    }
    if embedded && map.contains_key("additionalProperties") {
        errors.push(FieldError::forbidden(
            &at.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        errors.push(FieldError::invalid_str(
            &at.child("type"),
            ty,
            "must be object at the root",
        ));
    }
}

/// `kind`, `apiVersion` and `metadata` of a resource (the root or an embedded one); at the root,
/// `metadata` may only restrict `name` and `generateName`.
fn meta_invariants(errors: &mut FieldErrors, map: &Map<String, Value>, level: Level, at: &Path) {
    let Some(props) = map.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (field, expected, detail) in [
        ("kind", "string", "must be string"),
        ("apiVersion", "string", "must be string"),
        ("metadata", "object", "must be object"),
    ] {
        if let Some(property) = props.get(field) {
            let ty = str_at(property, "/type");
            if ty != expected {
                errors.push(FieldError::invalid_str(
                    &at.child("properties").key(field).child("type"),
                    ty,
                    detail,
                ));
            }
        }
    }
    let Some(metadata) = props.get("metadata").and_then(Value::as_object) else {
        return;
    };
    if level != Level::Root {
        return;
    }
    let only_names = |p: &Value| {
        p.as_object()
            .is_some_and(|p| p.keys().all(|k| k == "name" || k == "generateName"))
    };
    let restricted = metadata.iter().any(|(key, value)| match key.as_str() {
        "type" | "default" => false,
        "properties" => !only_names(value),
        _ => true,
    });
    if restricted {
        errors.push(FieldError::forbidden(
            &at.child("properties").key("metadata"),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// Whether `list` is `[{type: integer}, {type: string}]`, the `IntOrString` pattern that may name types
/// under `anyOf`.
fn is_int_or_string_any_of(list: &[Value]) -> bool {
    let only_type = |v: &Value, ty: &str| {
        v.as_object()
            .is_some_and(|m| m.len() == 1 && m.get("type").and_then(Value::as_str) == Some(ty))
    };
    list.len() == 2 && only_type(&list[0], "integer") && only_type(&list[1], "string")
}

/// `validateValueValidation`: the junctors of a schema, whose sub-schemas only validate values.
fn value_validation(errors: &mut FieldErrors, schema: &Value, level: Level, at: &Path) {
    let any_of = list_at(schema, "/anyOf");
    let all_of = list_at(schema, "/allOf");
    let skip_any_of = is_int_or_string_any_of(any_of);
    let skip_first_all_of_any_of = all_of
        .first()
        .is_some_and(|first| is_int_or_string_any_of(list_at(first, "/anyOf")));
    if !skip_any_of {
        for (sub, path) in schema_list(schema, "anyOf", at) {
            nested_value_validation(errors, sub, false, level, &path);
        }
    }
    for (i, (sub, path)) in schema_list(schema, "allOf", at).into_iter().enumerate() {
        nested_value_validation(errors, sub, skip_first_all_of_any_of && i == 0, level, &path);
    }
    for (sub, path) in schema_list(schema, "oneOf", at) {
        nested_value_validation(errors, sub, false, level, &path);
    }
    if let Some(not) = schema.get("not") {
        nested_value_validation(errors, not, false, level, &at.child("not"));
    }
}

/// `validateNestedValueValidation`: under a junctor, no structure (`type`, `additionalProperties`,
/// `default`, `title`, `description`, `nullable`) and no `x-kubernetes-*` extension may be given.
fn nested_value_validation(
    errors: &mut FieldErrors,
    schema: &Value,
    skip_any_of: bool,
    level: Level,
    at: &Path,
) {
    let Some(map) = schema.as_object() else {
        return;
    };
    if skip_any_of {
        let mut without = map.clone();
        without.remove("anyOf");
        value_validation(errors, &Value::Object(without), level, at);
    } else {
        value_validation(errors, schema, level, at);
    }
    if let Some(items) = map.get("items").filter(|i| i.is_object()) {
        nested_value_validation(errors, items, false, level, &at.child("items"));
    }
    for (name, property) in properties(schema) {
        nested_value_validation(
            errors,
            property,
            false,
            Level::Field,
            &at.child("properties").key(name),
        );
    }
    let non_empty_string = |field: &str| {
        map.get(field)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    let present = |field: &str| map.get(field).is_some_and(|v| !v.is_null());
    let forbidden: [(&str, bool, &str); 11] = [
        ("type", non_empty_string("type"), "must be empty to be structural"),
        (
            "additionalProperties",
            present("additionalProperties"),
            "must be undefined to be structural",
        ),
        (
            "default",
            present("default"),
            "must be undefined to be structural",
        ),
        (
            "title",
            non_empty_string("title"),
            "must be empty to be structural",
        ),
        (
            "description",
            non_empty_string("description"),
            "must be empty to be structural",
        ),
        (
            "nullable",
            flag(map, "nullable"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-preserve-unknown-fields",
            flag(map, "x-kubernetes-preserve-unknown-fields"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            flag(map, "x-kubernetes-embedded-resource"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            flag(map, "x-kubernetes-int-or-string"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            !list_at(schema, "/x-kubernetes-list-map-keys").is_empty(),
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            present("x-kubernetes-list-type"),
            "must be undefined to be structural",
        ),
    ];
    for (field, set, detail) in forbidden {
        if set {
            errors.push(FieldError::forbidden(&at.child(field), detail));
        }
    }
    if schema.pointer("/properties/metadata").is_some() {
        errors.push(FieldError::forbidden(
            &at.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateCustomResourceConversion` of the v1 `spec.conversion` (its `webhook.clientConfig` is the
/// internal `webhookClientConfig`, its `webhook.conversionReviewVersions` `conversionReviewVersions`).
fn validate_conversion(spec: &Value, options: Options, at: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let Some(conversion) = spec.get("conversion").filter(|c| c.is_object()) else {
        return errors;
    };
    let strategy = str_at(conversion, "/strategy");
    if !strategy.is_empty() && strategy != "None" && preserve_unknown_fields(spec) {
        errors.push(FieldError::invalid_str(
            &at.child("strategy"),
            strategy,
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    enum_string(&mut errors, &at.child("strategy"), strategy, &["None", "Webhook"]);
    let client_config = conversion
        .pointer("/webhook/clientConfig")
        .filter(|c| !c.is_null());
    let review_versions = list_at(conversion, "/webhook/conversionReviewVersions");
    let client_config_path = at.child("webhookClientConfig");
    let review_versions_path = at.child("conversionReviewVersions");
    if strategy != "Webhook" {
        if client_config.is_some() {
            errors.push(FieldError::forbidden(
                &client_config_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review_versions.is_empty() {
            errors.push(FieldError::forbidden(
                &review_versions_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        return errors;
    }
    match client_config {
        None => errors.push(FieldError::required(
            &client_config_path,
            "required when strategy is set to Webhook",
        )),
        Some(config) => {
            let url = config.get("url").and_then(Value::as_str);
            let service = config.get("service").filter(|s| !s.is_null());
            match (url, service) {
                (Some(url), None) => super::admission_registration::webhook_url(
                    &mut errors,
                    url,
                    &client_config_path.child("url"),
                ),
                (None, Some(service)) => super::admission_registration::webhook_service(
                    &mut errors,
                    service,
                    &client_config_path.child("service"),
                ),
                _ => errors.push(FieldError::required(
                    &client_config_path,
                    "exactly one of url or service is required",
                )),
            }
        }
    }
    conversion_review_versions(&mut errors, review_versions, options, &review_versions_path);
    errors
}

/// `validateConversionReviewVersions`.
fn conversion_review_versions(errors: &mut FieldErrors, versions: &[Value], options: Options, at: &Path) {
    if versions.is_empty() {
        errors.push(FieldError::required(at, ""));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut accepted = false;
    for (i, version) in versions.iter().enumerate() {
        let version = version.as_str().unwrap_or_default();
        if seen.contains(&version) {
            errors.push(FieldError::invalid_str(
                &at.index(i),
                version,
                "duplicate version",
            ));
            continue;
        }
        seen.push(version);
        for message in NameRule::Dns1035Label.violations(version) {
            errors.push(FieldError::invalid_str(&at.index(i), version, &message));
        }
        accepted |= ACCEPTED_CONVERSION_REVIEW_VERSIONS.contains(&version);
    }
    if options.require_recognized_conversion_review_version && !accepted {
        let listed = seen.iter().map(|s| (*s).to_owned()).collect();
        errors.push(FieldError::invalid(
            at,
            BadValue::StringList(listed),
            &format!(
                "must include at least one of {}",
                ACCEPTED_CONVERSION_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// `validateCustomResourceDefinitionSpecUpdate`'s immutable fields: the scope and the kind (of an
/// established CRD, which every stored CRD of the fake is), the group and the plural.
fn validate_spec_update(spec: &Value, old: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let at = Path::new("spec");
    for (pointer, path) in [
        ("/scope", at.child("scope")),
        ("/names/kind", at.child("names").child("kind")),
        ("/group", at.child("group")),
        ("/names/plural", at.child("names").child("plural")),
    ] {
        let value = str_at(spec, pointer);
        if value != str_at(old, pointer) {
            errors.push(FieldError::invalid_str(&path, value, "field is immutable"));
        }
    }
    errors
}

/// `ValidateCustomResourceDefinitionStoredVersions`: at least one, the storage version among them, and
/// each still in `spec.versions`.
fn validate_stored_versions(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let at = Path::new("status").child("storedVersions");
    let stored: Vec<&str> = list_at(object, "/status/storedVersions")
        .iter()
        .map(|v| v.as_str().unwrap_or_default())
        .collect();
    if stored.is_empty() {
        errors.push(FieldError::invalid(
            &at,
            BadValue::Rendered {
                go: "[]string(nil)".to_owned(),
                json: "null".to_owned(),
            },
            "must have at least one stored version",
        ));
        return errors;
    }
    let versions = list_at(object, "/spec/versions");
    for version in versions {
        let name = str_at(version, "/name");
        if version.get("storage").and_then(Value::as_bool) == Some(true) && !stored.contains(&name) {
            errors.push(FieldError::invalid(
                &at,
                BadValue::Json(version.clone()),
                &format!("must have the storage version {name}"),
            ));
        }
    }
    for (i, name) in stored.iter().enumerate() {
        if !versions.iter().any(|v| str_at(v, "/name") == *name) {
            errors.push(FieldError::invalid_str(
                &at.index(i),
                name,
                "must appear in spec.versions",
            ));
        }
    }
    errors
}

#[cfg(test)]
#[path = "custom_resource_definition_tests.rs"]
mod tests;
