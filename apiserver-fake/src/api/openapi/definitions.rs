//! The OpenAPI definitions of each Kubernetes minor, read from the generated table
//! `catalog/openapi.json` (see `catalog/generate_openapi.py`: kube-apiserver's own definitions as the
//! `kubernetes-validate` package carries them, without prose).
//!
//! A definition is an OpenAPI v2 schema object with `#/definitions/<name>` references; kinds carry
//! `x-kubernetes-group-version-kind`, which is how a group/version/kind finds its schema.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::Value;

use crate::api::catalog::KubeVersion;

use super::custom::CustomDefinitions;

/// The generated table (all minors, definitions deduplicated into version spans).
const TABLE: &str = include_str!("../../../catalog/openapi.json");

/// Prefix of an OpenAPI v2 reference.
pub const V2_REF_PREFIX: &str = "#/definitions/";

/// Definitions every group-version document carries besides its kinds' closure, as kube-apiserver's
/// do: the types of its common responses and request bodies.
const COMMON: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
];

#[derive(Deserialize)]
struct Table {
    definitions: BTreeMap<String, Vec<Span>>,
}

#[derive(Deserialize)]
struct Span {
    from: u32,
    to: u32,
    schema: Value,
}

/// The definitions of one Kubernetes minor, with the kind index.
#[derive(Debug, Default)]
pub struct Definitions {
    /// Shared with the other minors that have the same definition (one copy per distinct schema).
    schemas: BTreeMap<String, Arc<Value>>,
    by_kind: Option<HashMap<(String, String, String), String>>,
}

impl Definitions {
    /// The definitions of `version` (parsed once per process and minor).
    pub fn of(version: KubeVersion) -> &'static Definitions {
        const MINORS: usize = 64;
        static EACH: [OnceLock<Definitions>; MINORS] = [const { OnceLock::new() }; MINORS];
        static EMPTY: Definitions = Definitions {
            schemas: BTreeMap::new(),
            by_kind: None,
        };
        match EACH.get(version.minor as usize) {
            Some(slot) => slot.get_or_init(|| load(version.minor)),
            None => &EMPTY,
        }
    }

    /// The schema named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name).map(|schema| &**schema)
    }

    /// The name of the definition of a group/version/kind (`""` group for core).
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_kind
            .as_ref()?
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
            .map(String::as_str)
    }

    /// `roots`, the common definitions and every definition they reference, transitively.
    pub fn closure<'a>(&self, roots: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut pending: Vec<String> = roots
            .into_iter()
            .chain(COMMON.iter().copied())
            .map(str::to_owned)
            .collect();
        while let Some(name) = pending.pop() {
            let Some(schema) = self.schemas.get(&name) else {
                continue;
            };
            if !seen.insert(name) {
                continue;
            }
            references(schema, &mut |target| {
                if !seen.contains(target) {
                    pending.push(target.to_owned());
                }
            });
        }
        seen
    }
}

/// A minor's built-in definitions with the served custom resources' definitions laid over them:
/// what documents and paths look kinds up in.
#[derive(Debug, Clone, Copy)]
pub struct Layered<'a> {
    /// The built-in definitions of the server's minor.
    pub builtin: &'static Definitions,
    /// The custom resources' definitions.
    pub custom: &'a CustomDefinitions,
}

impl Layered<'_> {
    /// The schema named `name` (custom definitions first).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.custom.get(name).or_else(|| self.builtin.get(name))
    }

    /// The name of the definition of a group/version/kind (custom definitions first).
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.custom
            .kind(group, version, kind)
            .or_else(|| self.builtin.kind(group, version, kind))
    }

    /// [`Definitions::closure`] of `roots`, custom definitions included with the built-in ones they
    /// reference (`ObjectMeta`, `ListMeta`).
    pub fn closure<'r>(&self, roots: impl IntoIterator<Item = &'r str>) -> BTreeSet<String> {
        let mut custom = BTreeSet::new();
        let mut builtin = Vec::new();
        let mut pending: Vec<String> = roots.into_iter().map(str::to_owned).collect();
        while let Some(name) = pending.pop() {
            match self.custom.get(&name) {
                Some(schema) => {
                    if custom.insert(name) {
                        references(schema, &mut |target| pending.push(target.to_owned()));
                    }
                }
                None => builtin.push(name),
            }
        }
        let mut all = self.builtin.closure(builtin.iter().map(String::as_str));
        all.extend(custom);
        all
    }
}

/// Calls `found` with the definition name of every `$ref` in `schema`.
pub fn references(schema: &Value, found: &mut impl FnMut(&str)) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(r)) => {
                        if let Some(target) = r.strip_prefix(V2_REF_PREFIX) {
                            found(target);
                        }
                    }
                    // Property names are data (`JSONSchemaProps` has `x-kubernetes-validations`).
                    ("properties", Value::Object(properties)) => {
                        properties.values().for_each(|p| references(p, found));
                    }
                    (k, _) if k.starts_with("x-kubernetes-") || k == "enum" || k == "default" => {}
                    _ => references(value, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, found)),
        _ => {}
    }
}

/// Each definition's versions: (first minor, last minor, schema).
type SharedSpans = BTreeMap<String, Vec<(u32, u32, Arc<Value>)>>;

/// Every span of the table, parsed once per process; schemas are shared by the minors that use them.
fn table() -> &'static SharedSpans {
    static TABLE_SPANS: OnceLock<SharedSpans> = OnceLock::new();
    TABLE_SPANS.get_or_init(|| {
        // The table is generated and compiled in; a malformed one fails every OpenAPI test.
        let table: Table = match serde_json::from_str(TABLE) {
            Ok(table) => table,
            Err(err) => {
                tracing::error!("catalog/openapi.json is malformed: {err}");
                return BTreeMap::new();
            }
        };
        table
            .definitions
            .into_iter()
            .map(|(name, spans)| {
                let spans = spans
                    .into_iter()
                    .map(|s| (s.from, s.to, Arc::new(s.schema)))
                    .collect();
                (name, spans)
            })
            .collect()
    })
}

/// The definitions of one minor (only the minors a process serves are ever built).
fn load(minor: u32) -> Definitions {
    let mut definitions = Definitions {
        schemas: BTreeMap::new(),
        by_kind: Some(HashMap::new()),
    };
    for (name, spans) in table() {
        let Some((_, _, schema)) = spans.iter().find(|(from, to, _)| (*from..=*to).contains(&minor)) else {
            continue;
        };
        for gvk in schema["x-kubernetes-group-version-kind"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let field = |f: &str| gvk[f].as_str().unwrap_or_default().to_owned();
            if let Some(by_kind) = definitions.by_kind.as_mut() {
                by_kind
                    .entry((field("group"), field("version"), field("kind")))
                    .or_insert_with(|| name.clone());
            }
        }
        definitions.schemas.insert(name.clone(), schema.clone());
    }
    definitions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> KubeVersion {
        KubeVersion { major: 1, minor }
    }

    #[test]
    fn every_minor_has_its_kinds() {
        for minor in 28..=36 {
            let definitions = Definitions::of(v(minor));
            assert_eq!(
                definitions.kind("batch", "v1", "Job"),
                Some("io.k8s.api.batch.v1.Job"),
                "1.{minor}"
            );
            assert_eq!(definitions.kind("", "v1", "Pod"), Some("io.k8s.api.core.v1.Pod"));
        }
    }

    #[test]
    fn definitions_follow_the_minor() {
        // JobSpec.podReplacementPolicy appeared in 1.28 (alpha) and managedBy in 1.30.
        let spec = |minor| {
            Definitions::of(v(minor))
                .get("io.k8s.api.batch.v1.JobSpec")
                .and_then(|s| s["properties"].as_object())
                .map(|p| p.contains_key("managedBy"))
        };
        assert_eq!(spec(29), Some(false));
        assert_eq!(spec(30), Some(true));
        // ValidatingAdmissionPolicy went GA (admissionregistration.k8s.io/v1) in 1.30.
        assert!(
            Definitions::of(v(29))
                .kind("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")
                .is_none()
        );
        assert!(
            Definitions::of(v(30))
                .kind("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")
                .is_some()
        );
    }

    #[test]
    fn closure_follows_references_and_adds_common_types() {
        let definitions = Definitions::of(v(36));
        let closure = definitions.closure(["io.k8s.api.batch.v1.Job"]);
        for name in [
            "io.k8s.api.batch.v1.JobSpec",
            "io.k8s.api.core.v1.PodTemplateSpec",
            "io.k8s.api.core.v1.Container",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        ] {
            assert!(closure.contains(name), "{name}");
        }
        assert!(!closure.contains("io.k8s.api.apps.v1.Deployment"));
        // Every reference in the closure resolves.
        for name in &closure {
            references(definitions.get(name).unwrap(), &mut |target| {
                assert!(closure.contains(target), "{name} -> {target}");
            });
        }
    }
}
