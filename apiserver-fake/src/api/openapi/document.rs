//! kube-apiserver's OpenAPI documents for one server: the v2 document (`/openapi/v2`, every served
//! group-version) and one v3 document per group-version (`/openapi/v3/apis/<group>/<version>`).
//!
//! Both are built from the same parts: the definitions of the server's Kubernetes minor that the served
//! kinds reach ([`Definitions::closure`]) and the operations of the served resources ([`paths`]).

use serde_json::{Map, Value, json};

use crate::api::catalog::{ApiResource, KubeVersion, ServedApis};

use super::custom::{CustomDefinitions, Flavor};
use super::definitions::{Definitions, Layered, V2_REF_PREFIX};
use super::paths::{self, Operation, PathItem};

/// Prefix of an OpenAPI v3 component reference.
const V3_REF_PREFIX: &str = "#/components/schemas/";

/// The types of a request parameter, as upstream's OpenAPI declares them.
fn parameter_type(name: &str) -> &'static str {
    match name {
        "allowWatchBookmarks"
        | "force"
        | "ignoreStoreReadErrorWithClusterBreakingPotential"
        | "orphanDependents"
        | "sendInitialEvents"
        | "watch" => "boolean",
        "gracePeriodSeconds" | "limit" | "timeoutSeconds" => "integer",
        _ => "string",
    }
}

/// Definition names of every kind a group-version's resources use (objects, lists, subresources).
fn roots<'a>(
    definitions: &'a Layered<'a>,
    group: &'a str,
    version: &'a str,
    resources: &'a [ApiResource],
) -> impl Iterator<Item = &'a str> + 'a {
    resources.iter().flat_map(move |r| {
        let mut names = vec![
            definitions.kind(group, version, &r.kind),
            definitions.kind(group, version, &format!("{}List", r.kind)),
        ];
        for sub in &r.subresources {
            names.push(definitions.kind(
                sub.response_group.as_deref().unwrap_or(group),
                sub.response_version.as_deref().unwrap_or(version),
                &sub.kind,
            ));
        }
        names.into_iter().flatten()
    })
}

/// The `info` object (`title: Kubernetes`, `version: v1.<minor>.0`).
fn info(version: KubeVersion) -> Value {
    json!({"title": "Kubernetes", "version": format!("v{}.{}.0", version.major, version.minor)})
}

/// Builds the v2 document: every served group-version's paths and the definitions they reach.
pub(crate) fn v2(version: KubeVersion, served: &ServedApis) -> Value {
    let custom = CustomDefinitions::of_served(served, Flavor::V2);
    let definitions = &Layered {
        builtin: Definitions::of(version),
        custom: &custom,
    };
    let mut all_paths = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for group in &served.groups {
        for v in &group.versions {
            names.extend(definitions.closure(roots(definitions, &group.name, &v.version, &v.resources)));
            all_paths.extend(paths::group_version_paths(
                definitions,
                &group.name,
                &v.version,
                &v.resources,
            ));
        }
    }
    let mut path_map = Map::new();
    for item in &all_paths {
        let (_, tag) = tag_of(item);
        path_map.insert(item.path.clone(), v2_path_item(item, &tag));
    }
    let definitions_map: Map<String, Value> = names
        .iter()
        .filter_map(|name| Some((name.clone(), definitions.get(name)?.clone())))
        .collect();
    json!({
        "swagger": "2.0",
        "info": info(version),
        "paths": path_map,
        "definitions": definitions_map,
        "security": [{"BearerToken": []}],
        "securityDefinitions": {
            "BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}
        },
    })
}

/// Builds the v3 document of one served group-version.
pub(crate) fn v3(version: KubeVersion, group: &str, group_version: &str, resources: &[ApiResource]) -> Value {
    let custom = CustomDefinitions::of_group_version(group, group_version, resources, Flavor::V3);
    let definitions = &Layered {
        builtin: Definitions::of(version),
        custom: &custom,
    };
    let names = definitions.closure(roots(definitions, group, group_version, resources));
    let mut schemas = Map::new();
    for name in &names {
        if let Some(schema) = definitions.get(name) {
            schemas.insert(name.clone(), to_v3_refs(schema.clone()));
        }
    }
    let (_, tag) = paths::group_version_names(group, group_version);
    let mut path_map = Map::new();
    for item in paths::group_version_paths(definitions, group, group_version, resources) {
        path_map.insert(item.path.clone(), v3_path_item(&item, &tag));
    }
    json!({
        "openapi": "3.0.0",
        "info": info(version),
        "paths": path_map,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}
            },
        },
    })
}

/// The tag of the group-version a path belongs to.
fn tag_of(item: &PathItem) -> (String, String) {
    let gvk = item.operations.first().map(|o| o.gvk.clone()).unwrap_or_default();
    // The path's own group-version (subresources may answer with another group's kind: take the path).
    let mut segments = item.path.trim_start_matches('/').split('/');
    let (group, version) = match (segments.next(), segments.next(), segments.next()) {
        (Some("api"), Some(version), _) => (String::new(), version.to_owned()),
        (Some("apis"), Some(group), Some(version)) => (group.to_owned(), version.to_owned()),
        _ => (gvk.0, gvk.1),
    };
    paths::group_version_names(&group, &version)
}

fn gvk_extension(op: &Operation) -> Value {
    json!({"group": op.gvk.0, "version": op.gvk.1, "kind": op.gvk.2})
}

fn v2_path_item(item: &PathItem, tag: &str) -> Value {
    let mut out = Map::new();
    for op in &item.operations {
        let mut parameters: Vec<Value> = Vec::new();
        if let Some(body) = &op.body {
            parameters.push(json!({
                "name": "body", "in": "body", "required": true,
                "schema": {"$ref": format!("{V2_REF_PREFIX}{body}")},
            }));
        }
        parameters.extend(op.query.iter().map(
            |name| json!({"name": name, "in": "query", "type": parameter_type(name), "uniqueItems": true}),
        ));
        let mut ok = json!({"description": "OK"});
        if let Some(response) = &op.response {
            ok["schema"] = json!({"$ref": format!("{V2_REF_PREFIX}{response}")});
        }
        let mut operation = json!({
            "operationId": op.id,
            "tags": [tag],
            "consumes": consumes(op),
            "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
            "schemes": ["https"],
            "parameters": parameters,
            "responses": {"200": ok, "401": {"description": "Unauthorized"}},
            "x-kubernetes-action": op.action,
            "x-kubernetes-group-version-kind": gvk_extension(op),
        });
        if op.deprecated {
            operation["deprecated"] = json!(true);
        }
        out.insert(op.method.to_owned(), operation);
    }
    out.insert(
        "parameters".to_owned(),
        Value::Array(
            item.path_params
                .iter()
                .map(|name| path_parameter(name, false))
                .collect(),
        ),
    );
    Value::Object(out)
}

fn v3_path_item(item: &PathItem, tag: &str) -> Value {
    let mut out = Map::new();
    for op in &item.operations {
        let parameters: Vec<Value> = op
            .query
            .iter()
            .map(|name| json!({"name": name, "in": "query", "schema": {"type": parameter_type(name), "uniqueItems": true}}))
            .collect();
        let mut ok = json!({"description": "OK"});
        if let Some(response) = &op.response {
            let schema = json!({"$ref": format!("{V3_REF_PREFIX}{response}")});
            ok["content"] = json!({
                "application/json": {"schema": schema},
                "application/yaml": {"schema": schema},
                "application/vnd.kubernetes.protobuf": {"schema": schema},
            });
        }
        let mut operation = json!({
            "operationId": op.id,
            "tags": [tag],
            "parameters": parameters,
            "responses": {"200": ok, "401": {"description": "Unauthorized"}},
            "x-kubernetes-action": op.action,
            "x-kubernetes-group-version-kind": gvk_extension(op),
        });
        if let Some(body) = &op.body {
            let schema = json!({"$ref": format!("{V3_REF_PREFIX}{body}")});
            let content: Map<String, Value> = consumes(op)
                .into_iter()
                .map(|media| (media.to_owned(), json!({"schema": schema})))
                .collect();
            operation["requestBody"] = json!({"content": content, "required": op.action != "delete" && op.action != "deletecollection"});
        }
        if op.deprecated {
            operation["deprecated"] = json!(true);
        }
        out.insert(op.method.to_owned(), operation);
    }
    out.insert(
        "parameters".to_owned(),
        Value::Array(
            item.path_params
                .iter()
                .map(|name| path_parameter(name, true))
                .collect(),
        ),
    );
    Value::Object(out)
}

fn path_parameter(name: &str, v3: bool) -> Value {
    let in_path = name != "pretty";
    let location = if in_path { "path" } else { "query" };
    let mut parameter = if v3 {
        json!({"name": name, "in": location, "schema": {"type": "string", "uniqueItems": true}})
    } else {
        json!({"name": name, "in": location, "type": "string", "uniqueItems": true})
    };
    if in_path {
        parameter["required"] = json!(true);
    }
    parameter
}

fn consumes(op: &Operation) -> Vec<&'static str> {
    match op.method {
        "patch" => vec![
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
            "application/apply-patch+cbor",
        ],
        _ => vec!["*/*"],
    }
}

/// `schema` with its `#/definitions/` references pointing at `#/components/schemas/`.
fn to_v3_refs(schema: Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("$ref", Value::String(r)) => {
                            Value::String(r.replacen(V2_REF_PREFIX, V3_REF_PREFIX, 1))
                        }
                        // Property names are data (`JSONSchemaProps` has `x-kubernetes-validations`).
                        ("properties", Value::Object(properties)) => Value::Object(
                            properties
                                .into_iter()
                                .map(|(name, p)| (name, to_v3_refs(p)))
                                .collect(),
                        ),
                        (k, v) if k.starts_with("x-kubernetes-") || k == "enum" || k == "default" => v,
                        (_, v) => to_v3_refs(v),
                    };
                    (key, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(to_v3_refs).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(minor: u32) -> (KubeVersion, ServedApis) {
        let version = KubeVersion { major: 1, minor };
        let served = ServedApis::builtin(version, &Default::default(), &Default::default()).unwrap();
        (version, served)
    }

    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    // `JSONSchemaProps` has a property named `$ref`: its value is a schema, not a reference.
                    if let ("$ref", Value::String(target)) = (k.as_str(), v) {
                        out.push(target.clone());
                    } else {
                        refs(v, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn v2_references_resolve_and_cover_served_kinds_only() {
        let (version, served) = served(36);
        let doc = v2(version, &served);
        let definitions = doc["definitions"].as_object().unwrap();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let name = r
                .strip_prefix(V2_REF_PREFIX)
                .unwrap_or_else(|| panic!("not a v2 ref: {r}"));
            assert!(definitions.contains_key(name), "dangling {r}");
        }
        assert!(definitions.contains_key("io.k8s.api.batch.v1.Job"));
        // Beta APIs are off by default, and so are their definitions.
        assert!(!definitions.contains_key("io.k8s.api.resource.v1beta1.ResourceClaim"));
        assert!(doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"].is_object());
    }

    #[test]
    fn v3_group_version_document_is_self_contained() {
        let (version, served) = served(36);
        let apps = served.group_version("apps", "v1").unwrap();
        let doc = v3(version, "apps", "v1", &apps.resources);
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        for r in found {
            let name = r
                .strip_prefix(V3_REF_PREFIX)
                .unwrap_or_else(|| panic!("v2 ref left: {r}"));
            assert!(schemas.contains_key(name), "dangling {r}");
        }
        assert!(schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
        assert!(
            schemas.contains_key("io.k8s.api.autoscaling.v1.Scale"),
            "scale subresource kind"
        );
        assert!(!schemas.contains_key("io.k8s.api.batch.v1.Job"));
        let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
    }

    fn with_crontabs(served: &ServedApis, schema: Value) -> ServedApis {
        let crd = json!({"spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas"}},
                          "schema": {"openAPIV3Schema": schema}}]}});
        served.with_custom(&crate::api::catalog::custom_groups_from_crds(&[crd]))
    }

    fn crontab_schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "cronSpec": {"type": "string"}, "replicas": {"type": "integer"}}}}})
    }

    #[test]
    fn custom_resources_have_their_schemas_in_both_documents() {
        let (version, builtin) = served(36);
        let served = with_crontabs(&builtin, crontab_schema());
        let resources = &served
            .group_version("stable.example.com", "v1")
            .unwrap()
            .resources;
        let doc = v3(version, "stable.example.com", "v1", resources);
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let crontab = &schemas["com.example.stable.v1.CronTab"];
        assert_eq!(
            crontab["properties"]["spec"]["properties"]["replicas"]["type"],
            "integer"
        );
        assert_eq!(
            crontab["properties"]["metadata"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(schemas.contains_key("com.example.stable.v1.CronTabList"));
        assert!(schemas.contains_key("io.k8s.api.autoscaling.v1.Scale"));
        let mut found = Vec::new();
        refs(&doc, &mut found);
        for r in found {
            let name = r
                .strip_prefix(V3_REF_PREFIX)
                .unwrap_or_else(|| panic!("v2 ref left: {r}"));
            assert!(schemas.contains_key(name), "dangling {r}");
        }
        let collection = &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs"];
        assert_eq!(
            collection["post"]["requestBody"]["content"]["*/*"]["schema"]["$ref"],
            "#/components/schemas/com.example.stable.v1.CronTab"
        );
        assert_eq!(
            collection["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/com.example.stable.v1.CronTabList"
        );
        let status =
            &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/status"];
        assert_eq!(
            status["put"]["requestBody"]["content"]["*/*"]["schema"]["$ref"],
            "#/components/schemas/com.example.stable.v1.CronTab"
        );

        let doc = v2(version, &served);
        let definitions = doc["definitions"].as_object().unwrap();
        assert_eq!(
            definitions["com.example.stable.v1.CronTab"]["x-kubernetes-group-version-kind"],
            json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
        );
        let mut found = Vec::new();
        refs(&doc, &mut found);
        for r in found {
            let name = r.strip_prefix(V2_REF_PREFIX).unwrap();
            assert!(definitions.contains_key(name), "dangling {r}");
        }
    }

    #[test]
    fn a_schema_change_makes_another_served_set() {
        let (_, builtin) = served(36);
        let before = with_crontabs(&builtin, crontab_schema());
        let mut changed = crontab_schema();
        changed["properties"]["spec"]["properties"]["image"] = json!({"type": "string"});
        assert_ne!(before, with_crontabs(&builtin, changed));
        assert_eq!(before, with_crontabs(&builtin, crontab_schema()));
    }
}
