//! The schema cursor the merges walk with: where a patch is in a kind's OpenAPI v2 definitions, and the
//! merge metadata of each field there.
//!
//! Upstream's strategic merge patch reads the Go struct tags `patchStrategy` and `patchMergeKey`
//! (`strategicpatch.PatchMetaFromStruct`); kube-apiserver publishes the same tags as the OpenAPI
//! extensions `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`, which is what this cursor
//! reads (as upstream's `PatchMetaFromOpenAPI` does). Server-side apply reads structured-merge-diff's
//! `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and `x-kubernetes-map-type`.
//!
//! A kind without a definition (a custom resource) gets a cursor that knows nothing: every field is
//! unknown, which the merges treat as upstream treats a schema-less object (maps merge key by key, lists
//! are atomic).

use serde_json::Value;

use crate::api::openapi::definitions::{Definitions, V2_REF_PREFIX};

/// How many `$ref`s a lookup follows before giving up (definitions never chain deeper).
const MAX_REF_DEPTH: usize = 8;

/// Defaults of list-map key fields that upstream's OpenAPI declares (`+default="TCP"` on
/// `ContainerPort.protocol` and `ServicePort.protocol`) but the catalog's definitions do not carry.
/// structured-merge-diff fills a missing key field from its schema default when it keys an element.
const KEY_FIELD_DEFAULTS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

/// A position in a kind's schema: the (resolved) schema node, or nothing known.
#[derive(Clone, Copy)]
pub struct PatchSchema {
    definitions: &'static Definitions,
    /// The resolved schema node (no `$ref`); `None` when nothing is known here.
    node: Option<&'static Value>,
    /// The definition `node` is, when it was reached through a `$ref`.
    definition: Option<&'static str>,
}

/// A field of an object: the property schema as declared (where the merge extensions live, beside any
/// `$ref`) and the schema of its value.
#[derive(Clone, Copy)]
pub struct Field {
    declared: Option<&'static Value>,
    /// The schema of the field's value.
    pub schema: PatchSchema,
}

impl PatchSchema {
    /// The schema of a group/version/kind in `definitions`; one that knows nothing when the kind has no
    /// definition (custom resources).
    pub fn of_kind(definitions: &'static Definitions, group: &str, version: &str, kind: &str) -> Self {
        match definitions.kind(group, version, kind) {
            Some(name) => Self {
                definitions,
                node: definitions.get(name),
                definition: Some(name),
            }
            .resolved(),
            None => Self::unknown(definitions),
        }
    }

    /// A cursor that knows nothing (a custom resource, or a free-form value).
    pub fn unknown(definitions: &'static Definitions) -> Self {
        Self {
            definitions,
            node: None,
            definition: None,
        }
    }

    /// Whether anything is known about this position.
    pub fn is_known(&self) -> bool {
        self.node.is_some()
    }

    /// This position with its node's `$ref`s followed.
    fn resolved(mut self) -> Self {
        for _ in 0..MAX_REF_DEPTH {
            let Some(name) = self
                .node
                .and_then(|n| n.get("$ref"))
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(V2_REF_PREFIX))
            else {
                break;
            };
            match self.definitions.get(name) {
                Some(next) => {
                    self.definition = Some(name);
                    self.node = Some(next);
                }
                None => {
                    self.node = None;
                    break;
                }
            }
        }
        self
    }

    fn at(&self, node: Option<&'static Value>) -> Self {
        Self {
            definitions: self.definitions,
            node,
            definition: None,
        }
        .resolved()
    }

    /// The field `key` of the object here: a declared property, else the map's `additionalProperties`,
    /// else unknown (upstream's `LookupPatchMetadataForStruct`, lenient where upstream errors on a field
    /// its struct lacks: that only happens inside free-form values such as `RawExtension`).
    pub fn field(&self, key: &str) -> Field {
        let declared = self.node.and_then(|node| {
            node.get("properties")
                .and_then(|p| p.get(key))
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
        });
        Field {
            declared,
            schema: self.at(declared),
        }
    }

    /// The schema of the elements of the list here.
    pub fn items(&self) -> Self {
        self.at(self.node.and_then(|n| n.get("items")))
    }

    /// Whether the value here is an object (a struct or a map).
    pub fn is_object(&self) -> bool {
        self.node.is_some_and(|n| {
            n.get("properties").is_some()
                || n.get("additionalProperties").is_some()
                || n.get("type").and_then(Value::as_str) == Some("object")
        })
    }

    /// Whether the value here is a list.
    pub fn is_list(&self) -> bool {
        self.node
            .is_some_and(|n| n.get("type").and_then(Value::as_str) == Some("array"))
    }

    /// The default of the field `key` of the object here (for keying list-map elements that omit it).
    pub fn field_default(&self, key: &str) -> Option<Value> {
        let declared = self
            .node
            .and_then(|n| n.get("properties"))
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("default"));
        declared.cloned().or_else(|| {
            let definition = self.definition?;
            KEY_FIELD_DEFAULTS
                .iter()
                .find(|(d, f, _)| *d == definition && *f == key)
                .map(|(_, _, default)| Value::String((*default).to_owned()))
        })
    }

    fn extension(&self, name: &str) -> Option<&'static Value> {
        self.node.and_then(|n| n.get(name))
    }
}

impl Field {
    /// A value with no field declaration of its own (the root object, a list element): only its schema.
    pub fn element(schema: PatchSchema) -> Self {
        Self {
            declared: None,
            schema,
        }
    }

    fn extension(&self, name: &str) -> Option<&'static Value> {
        self.declared.and_then(|d| d.get(name))
    }

    /// The field's patch strategies (`x-kubernetes-patch-strategy`, comma-separated as the Go tag).
    pub fn patch_strategies(&self) -> Vec<&'static str> {
        self.extension("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .map(|s| s.split(',').collect())
            .unwrap_or_default()
    }

    /// The field's patch merge key (`x-kubernetes-patch-merge-key`), `""` when it declares none.
    pub fn patch_merge_key(&self) -> &'static str {
        self.extension("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The field's list type (`x-kubernetes-list-type`: `atomic`, `set` or `map`).
    pub fn list_type(&self) -> Option<&'static str> {
        self.extension("x-kubernetes-list-type").and_then(Value::as_str)
    }

    /// The key fields of an associative list (`x-kubernetes-list-map-keys`).
    pub fn list_map_keys(&self) -> Vec<&'static str> {
        self.extension("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// Whether the object is atomic (`x-kubernetes-map-type: atomic` on the field or on its definition).
    pub fn is_atomic_map(&self) -> bool {
        self.extension("x-kubernetes-map-type")
            .or_else(|| self.schema.extension("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }
}
