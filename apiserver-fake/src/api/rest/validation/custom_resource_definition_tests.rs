use serde_json::{Value, json};

use super::*;

fn lines(errors: &FieldErrors) -> Vec<String> {
    let version = KubeVersion { major: 1, minor: 34 };
    errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body(version)))
        .collect()
}

/// A CRD as upstream accepts it, status as the fake's `PrepareForCreate` writes it.
fn widgets() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                }}}
            }],
            "conversion": {"strategy": "None"}
        },
        "status": {"storedVersions": ["v1"]}
    })
}

fn with(pointer: &str, value: Value) -> Value {
    let mut crd = widgets();
    if let Some(slot) = crd.pointer_mut(pointer) {
        *slot = value;
    }
    crd
}

fn create(crd: &Value) -> Vec<String> {
    lines(&validate_custom_resource_definition(crd, None))
}

#[test]
fn a_valid_definition_has_no_errors() {
    assert_eq!(create(&widgets()), Vec::<String>::new());
}

#[test]
fn the_name_must_be_plural_dot_group() {
    assert_eq!(
        create(&with("/metadata/name", json!("widget.example.com"))),
        ["metadata.name: Invalid value: \"widget.example.com\": must be spec.names.plural+\".\"+spec.group"]
    );
}

#[test]
fn the_group_is_a_domain_with_a_dot() {
    let mut crd = with("/spec/group", json!("example"));
    crd["metadata"]["name"] = json!("widgets.example");
    assert_eq!(
        create(&crd),
        ["spec.group: Invalid value: \"example\": should be a domain with at least one dot"]
    );
}

#[test]
fn the_scope_is_cluster_or_namespaced() {
    assert_eq!(
        create(&with("/spec/scope", json!("Namespace"))),
        ["spec.scope: Unsupported value: \"Namespace\": supported values: \"Cluster\", \"Namespaced\""]
    );
}

#[test]
fn names_are_dns_labels_and_list_kind_differs_from_kind() {
    let mut crd = widgets();
    crd["spec"]["names"] = json!({
        "plural": "widgets", "singular": "Widget", "kind": "Widget", "listKind": "Widget",
        "shortNames": ["w_1"], "categories": ["all"]
    });
    assert_eq!(
        create(&crd),
        [
            "spec.names.singular: Invalid value: \"Widget\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.names.shortNames[0]: Invalid value: \"w_1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same",
        ]
    );
}

#[test]
fn singular_and_list_kind_default_from_the_kind() {
    let crd = with("/spec/names", json!({"plural": "widgets", "kind": "Widget"}));
    assert_eq!(create(&crd), Vec::<String>::new());
}

#[test]
fn missing_names_are_required() {
    let mut crd = with("/spec/names", json!({"plural": "widgets"}));
    crd["status"] = json!({"storedVersions": ["v1"]});
    assert_eq!(
        create(&crd),
        [
            "spec.names.singular: Required value",
            "spec.names.kind: Required value",
            "spec.names.listKind: Required value",
        ]
    );
}

#[test]
fn exactly_one_storage_version_and_unique_dns1035_names() {
    let mut crd = widgets();
    let version = crd["spec"]["versions"][0].clone();
    crd["spec"]["versions"] = json!([version.clone(), version]);
    let errors = create(&crd);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.versions: Invalid value: [{"),
        "{errors:?}"
    );
    assert!(
        errors[0].ends_with("}]: must contain unique version names"),
        "{errors:?}"
    );
    assert!(errors[1].ends_with(": must have exactly one version marked as storage version"));

    let errors = create(&with("/spec/versions/0/name", json!("V1")));
    assert!(
        errors[0].starts_with("spec.versions[0].name: Invalid value: \"V1\": a DNS-1035 label"),
        "{errors:?}"
    );
    assert!(errors[1].starts_with("status.storedVersions: Invalid value: {\"name\":\"V1\""));
    assert!(
        errors[1].ends_with(": must have the storage version V1"),
        "{errors:?}"
    );
    assert_eq!(
        errors[2],
        "status.storedVersions[0]: Invalid value: \"v1\": must appear in spec.versions"
    );
}

#[test]
fn no_storage_version_leaves_no_stored_version() {
    let mut crd = with("/spec/versions/0/storage", json!(false));
    crd["status"]["storedVersions"] = json!([]);
    let errors = create(&crd);
    assert!(errors[0].ends_with("must have exactly one version marked as storage version"));
    assert_eq!(
        errors[1],
        "status.storedVersions: Invalid value: null: must have at least one stored version"
    );
}

#[test]
fn every_version_needs_a_schema() {
    let mut crd = widgets();
    crd["spec"]["versions"][0]
        .as_object_mut()
        .map(|v| v.remove("schema"));
    assert_eq!(
        create(&crd),
        ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
    );
    // An update of a CRD stored without one only needs schemas of served versions, unless it prunes.
    assert_eq!(
        lines(&validate_custom_resource_definition(&crd, Some(&crd))),
        ["spec.versions[0].schema.openAPIV3Schema: Required value: because otherwise all fields are pruned"]
    );
}

#[test]
fn structural_schema_errors_are_upstreams_sorted_by_text() {
    let schema = json!({
        "properties": {
            "spec": {"properties": {"size": {"type": "string"}}},
            "tags": {"type": "array"},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": false},
            "extra": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "choice": {"type": "object", "anyOf": [{"type": "object", "required": ["a"]}]},
            "ref": {"$ref": "#/definitions/x"}
        }
    });
    let crd = with("/spec/versions/0/schema/openAPIV3Schema", schema);
    let p = "spec.versions[0].schema.openAPIV3Schema";
    assert_eq!(
        create(&crd),
        [
            format!(
                "{p}.properties[status].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
            ),
            format!(
                "{p}.properties[extra].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
            ),
            format!("{p}.properties[ref].$ref: Forbidden: $ref is not supported"),
            format!("{p}.properties[choice].anyOf[0].type: Forbidden: must be empty to be structural"),
            format!(
                "{p}.properties[ref].type: Required value: must not be empty for specified object fields"
            ),
            format!(
                "{p}.properties[spec].type: Required value: must not be empty for specified object fields"
            ),
            format!("{p}.properties[tags].items: Required value: must be specified"),
            format!("{p}.type: Required value: must not be empty at the root"),
        ]
    );
}

#[test]
fn the_root_is_an_object_whose_metadata_names_only() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "labels": {"type": "object"}}},
        "kind": {"type": "integer"}
    }});
    let crd = with("/spec/versions/0/schema/openAPIV3Schema", schema);
    let p = "spec.versions[0].schema.openAPIV3Schema";
    assert_eq!(
        create(&crd),
        [
            format!("{p}.properties[kind].type: Invalid value: \"integer\": must be string"),
            format!(
                "{p}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            ),
        ]
    );
    let crd = with(
        "/spec/versions/0/schema/openAPIV3Schema",
        json!({"type": "string"}),
    );
    assert_eq!(
        create(&crd),
        [format!(
            "{p}.type: Invalid value: \"string\": must be object at the root"
        )]
    );
}

#[test]
fn int_or_string_patterns_are_structural() {
    let schema = json!({"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    }});
    assert_eq!(
        create(&with("/spec/versions/0/schema/openAPIV3Schema", schema)),
        Vec::<String>::new()
    );
}

#[test]
fn webhook_conversion_needs_its_webhook() {
    let crd = with("/spec/conversion", json!({"strategy": "Webhook"}));
    assert_eq!(
        create(&crd),
        [
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
            "spec.conversion.conversionReviewVersions: Required value",
        ]
    );
    let crd = with(
        "/spec/conversion",
        json!({"strategy": "Webhook", "webhook": {"clientConfig": {}, "conversionReviewVersions": ["v2"]}}),
    );
    assert_eq!(
        create(&crd),
        [
            "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required",
            "spec.conversion.conversionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
        ]
    );
    let crd = with(
        "/spec/conversion",
        json!({"strategy": "None", "webhook": {"clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}}),
    );
    assert_eq!(
        create(&crd),
        [
            "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
            "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
        ]
    );
}

#[test]
fn an_update_keeps_scope_kind_group_and_plural() {
    let old = widgets();
    let mut new = with("/spec/scope", json!("Cluster"));
    new["spec"]["names"]["kind"] = json!("Gadget");
    new["spec"]["names"]["listKind"] = json!("GadgetList");
    assert_eq!(
        lines(&validate_custom_resource_definition(&new, Some(&old))),
        [
            "spec.scope: Invalid value: \"Cluster\": field is immutable",
            "spec.names.kind: Invalid value: \"Gadget\": field is immutable",
        ]
    );
}

#[test]
fn an_update_may_not_drop_a_stored_version() {
    let old = widgets();
    let mut new = with("/spec/versions/0/name", json!("v2"));
    new["status"]["storedVersions"] = json!(["v1", "v2"]);
    assert_eq!(
        lines(&validate_custom_resource_definition(&new, Some(&old))),
        ["status.storedVersions[0]: Invalid value: \"v1\": must appear in spec.versions"]
    );
}
