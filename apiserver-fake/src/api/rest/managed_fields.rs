//! `metadata.managedFields`: which field manager owns which fields, as kube-apiserver's field manager
//! (sigs.k8s.io/structured-merge-diff) records them, and server-side apply's conflicts and pruning.
//!
//! - A field set is a tree in the `FieldsV1` form: `f:<field>` for struct and map fields,
//!   `k:{"name":"pi"}` for elements of associative lists (`x-kubernetes-list-type: map`), `v:<json>`
//!   for elements of sets; `.` marks a node that is itself a member. Which lists are associative, which
//!   maps atomic, comes from the kind's OpenAPI definition.
//! - An `Update` (create, update, patch) gives its manager the fields it added or changed; other
//!   managers lose those, and everyone loses removed fields.
//! - An `Apply` gives its manager exactly the applied fields. Changing a field another manager owns is
//!   a 409 conflict unless `force=true`; fields the manager applied before and no longer applies are
//!   removed from the object when no other manager owns them.
//! - Entries are keyed by (manager, operation, apiVersion, subresource); an empty entry disappears;
//!   entries are sorted as upstream sorts them (operation, time, manager, apiVersion, subresource).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::api::openapi::definitions::{Definitions, V2_REF_PREFIX};

/// A set of field paths in `FieldsV1` form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Reads a `fieldsV1` value.
    pub fn from_fields_v1(value: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        if let Some(map) = value.as_object() {
            for (key, child) in map {
                if key == "." {
                    set.member = true;
                } else {
                    let mut child = FieldSet::from_fields_v1(child);
                    if child.children.is_empty() {
                        child.member = true;
                    }
                    set.children.insert(key.clone(), child);
                }
            }
        }
        set
    }

    /// The `fieldsV1` value.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".to_owned(), json!({}));
        }
        for (key, child) in &self.children {
            if !child.is_empty() {
                map.insert(key.clone(), child.to_fields_v1());
            }
        }
        Value::Object(map)
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (key, child) in &other.children {
            let merged = match out.children.get(key) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(key.clone(), merged);
        }
        out
    }

    /// `self − other` (members of `other` removed).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (key, child) in &self.children {
            let rest = match other.children.get(key) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(key.clone(), rest);
            }
        }
        out
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (key, child) in &self.children {
            if let Some(theirs) = other.children.get(key) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(key.clone(), both);
                }
            }
        }
        out
    }

    /// `self` with every node on the way to a member made a member too: the paths a set implies. A
    /// manager that applies `data.k1` also applies `data` (structured-merge-diff's prune adds back what
    /// leads to a field still applied), so `data`, applied empty before, is not "no longer applied".
    pub fn with_prefixes(&self) -> FieldSet {
        let children: BTreeMap<String, FieldSet> = self
            .children
            .iter()
            .filter(|(_, child)| !child.is_empty())
            .map(|(key, child)| (key.clone(), child.with_prefixes()))
            .collect();
        FieldSet {
            member: self.member || !children.is_empty(),
            children,
        }
    }

    /// Every member path, as element lists.
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (key, child) in &self.children {
            prefix.push(key.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    fn child(&mut self, key: String) -> &mut FieldSet {
        self.children.entry(key).or_default()
    }

    /// Removes the paths the field manager never records (`apiVersion`, `kind`, the server-set parts of
    /// `metadata`), and, per subresource, the reset fields: `status` for main-resource writes of a resource
    /// with a status subresource, everything but `status` for status writes.
    pub fn strip(mut self, subresource: &str, has_status: bool) -> FieldSet {
        self.children.remove("f:apiVersion");
        self.children.remove("f:kind");
        if let Some(metadata) = self.children.get_mut("f:metadata") {
            metadata.member = false;
            for field in [
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "generation",
                "managedFields",
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                metadata.children.remove(&format!("f:{field}"));
            }
        }
        if subresource == "status" {
            self.children.retain(|key, _| key == "f:status");
        } else if has_status {
            self.children.remove("f:status");
        }
        self.children.retain(|_, child| !child.is_empty());
        self
    }
}

/// Upstream's path notation for conflicts: `.spec.template.spec.containers[name="pi"].image`.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(field) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(keys) = element.strip_prefix("k:") {
            let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(keys)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_default();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(value) = element.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        } else if let Some(index) = element.strip_prefix("i:") {
            out.push_str(&format!("[{index}]"));
        }
    }
    out
}

/// The schema-aware walk over objects of one kind.
#[derive(Clone, Copy)]
pub struct Schema {
    definitions: &'static Definitions,
    root: &'static Value,
}

/// A schema that knows nothing (custom resources): maps are granular, lists atomic.
static FREE_FORM: Value = Value::Null;

impl Schema {
    /// The schema of a built-in kind, or a schema-less walk when the kind has no definition.
    pub fn new(definitions: &'static Definitions, group: &str, version: &str, kind: &str) -> Schema {
        let root = definitions
            .kind(group, version, kind)
            .and_then(|name| definitions.get(name))
            .unwrap_or(&FREE_FORM);
        Schema { definitions, root }
    }

    fn resolve(&self, mut schema: &'static Value) -> &'static Value {
        for _ in 0..8 {
            match schema
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(V2_REF_PREFIX))
                .and_then(|name| self.definitions.get(name))
            {
                Some(next) => schema = next,
                None => break,
            }
        }
        schema
    }

    /// The fields `object` sets (structured-merge-diff's `ToFieldSet`).
    pub fn fields_of(&self, object: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        self.walk(self.root, object, &mut set);
        set
    }

    fn walk(&self, schema: &'static Value, value: &Value, set: &mut FieldSet) {
        let schema = self.resolve(schema);
        match value {
            Value::Object(map) => {
                if schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") {
                    set.member = true;
                    return;
                }
                let properties = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                if properties.is_none() && additional.is_none() && !schema.is_null() {
                    // A free-form object (RawExtension, JSON): atomic.
                    set.member = true;
                    return;
                }
                for (key, child) in map {
                    let declared = properties.and_then(|p| p.get(key));
                    let child_schema: &'static Value = match (declared, additional) {
                        (Some(s), _) => s,
                        (None, Some(a)) => a,
                        (None, None) if schema.is_null() => &FREE_FORM,
                        (None, None) => continue,
                    };
                    let node = set.child(format!("f:{key}"));
                    self.walk(child_schema, child, node);
                    let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                    if empty || declared.is_none() {
                        node.member = true;
                    }
                }
            }
            Value::Array(items) => match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => {
                    let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                        .as_array()
                        .map(|k| k.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    for item in items {
                        let node = set.child(list_key(&keys, item));
                        self.walk(&schema["items"], item, node);
                        node.member = true;
                    }
                }
                Some("set") => {
                    for item in items {
                        set.child(format!("v:{item}")).member = true;
                    }
                }
                _ => set.member = true,
            },
            _ => set.member = true,
        }
    }

    /// The schema of the child a path element names, under `node` (already resolved).
    fn child_schema(&self, node: &'static Value, key: &str) -> &'static Value {
        match key.strip_prefix("f:") {
            Some(field) => node
                .get("properties")
                .and_then(|p| p.get(field))
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
                .unwrap_or(&FREE_FORM),
            None => node.get("items").unwrap_or(&FREE_FORM),
        }
    }

    /// The children of `value` by the path element that names each (`f:name`, `k:{…}`, `v:…`), built in
    /// one pass so that lookups in large lists stay linear.
    fn children<'v>(&self, node: &'static Value, value: &'v Value) -> HashMap<String, &'v Value> {
        match value {
            Value::Object(map) => map.iter().map(|(k, v)| (format!("f:{k}"), v)).collect(),
            Value::Array(items) => match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => {
                    let keys = list_map_keys(node);
                    items.iter().map(|item| (list_key(&keys, item), item)).collect()
                }
                Some("set") => items.iter().map(|item| (format!("v:{item}"), item)).collect(),
                _ => HashMap::new(),
            },
            _ => HashMap::new(),
        }
    }

    /// The fields an `Update` from `old` to `new` added or changed, and those it removed
    /// (structured-merge-diff's `Compare`: containers count when they appear, leaves when they change).
    pub fn compare(&self, old: &Value, new: &Value) -> (FieldSet, FieldSet) {
        let old_set = self.fields_of(old);
        let new_set = self.fields_of(new);
        let mut changed = FieldSet::default();
        self.changed_fields(&new_set, Some(old), new, self.root, &mut changed);
        (changed, old_set.difference(&new_set))
    }

    fn changed_fields(
        &self,
        new_set: &FieldSet,
        old: Option<&Value>,
        new: &Value,
        schema: &'static Value,
        out: &mut FieldSet,
    ) {
        let node = self.resolve(schema);
        let new_children = self.children(node, new);
        let old_children = old.map(|o| self.children(node, o)).unwrap_or_default();
        for (key, child_set) in &new_set.children {
            let Some(&new_child) = new_children.get(key) else {
                continue;
            };
            let old_child = old_children.get(key).copied();
            // Anything that appears counts (a map or struct node too, as `.`); a leaf counts when it
            // changes. A list node itself is not marked (Go's zero object holds required lists as null).
            let is_container = !child_set.children.is_empty();
            let member = match old_child {
                None => !is_container || !new_child.is_array(),
                Some(old_value) => !is_container && child_set.member && old_value != new_child,
            };
            let mut child = FieldSet {
                member,
                children: BTreeMap::new(),
            };
            self.changed_fields(
                child_set,
                old_child,
                new_child,
                self.child_schema(node, key),
                &mut child,
            );
            if !child.is_empty() {
                out.children.insert(key.clone(), child);
            }
        }
    }

    /// Removes the member paths of `remove` from `object` (server-side apply's prune).
    pub fn remove_paths(&self, object: &mut Value, remove: &FieldSet) {
        self.remove_under(object, remove, self.root);
    }

    fn remove_under(&self, value: &mut Value, remove: &FieldSet, schema: &'static Value) {
        let node = self.resolve(schema);
        let gone: HashSet<&str> = remove
            .children
            .iter()
            .filter(|(_, child)| child.member)
            .map(|(key, _)| key.as_str())
            .collect();
        match value {
            Value::Object(map) => {
                for (field, child) in map.iter_mut() {
                    let key = format!("f:{field}");
                    if let Some(below) = remove.children.get(&key).filter(|c| !c.member) {
                        self.remove_under(child, below, self.child_schema(node, &key));
                    }
                }
                map.retain(|field, _| !gone.contains(format!("f:{field}").as_str()));
            }
            Value::Array(items) => {
                let keys = list_map_keys(node);
                let set = node.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("set");
                let key_of = |item: &Value| {
                    if set {
                        format!("v:{item}")
                    } else {
                        list_key(&keys, item)
                    }
                };
                let item_schema = node.get("items").unwrap_or(&FREE_FORM);
                for item in items.iter_mut() {
                    if let Some(below) = remove.children.get(&key_of(item)).filter(|c| !c.member) {
                        self.remove_under(item, below, item_schema);
                    }
                }
                items.retain(|item| !gone.contains(key_of(item).as_str()));
            }
            _ => {}
        }
    }
}

/// `x-kubernetes-list-map-keys` of a list schema.
fn list_map_keys(node: &'static Value) -> Vec<&'static str> {
    node.get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `k:{"name":"pi"}` for an element of an associative list (keys sorted, as Go marshals maps).
fn list_key(keys: &[&str], item: &Value) -> String {
    let mut sorted: Vec<&&str> = keys.iter().collect();
    sorted.sort();
    let parts: Vec<String> = sorted
        .iter()
        .filter_map(|k| {
            item.get(**k)
                .map(|v| format!("{}:{v}", Value::String((**k).to_owned())))
        })
        .collect();
    format!("k:{{{}}}", parts.join(","))
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// The group-version the fields were written in.
    pub api_version: String,
    /// RFC 3339 seconds.
    pub time: String,
    /// `""` or `status`.
    pub subresource: String,
    /// The owned fields.
    pub fields: FieldSet,
}

impl Entry {
    fn key(&self) -> (&str, &str, &str, &str) {
        (
            &self.manager,
            &self.operation,
            &self.api_version,
            &self.subresource,
        )
    }

    /// The manager as upstream's conflict messages print it
    /// (`"kubectl-client-side-apply" using batch/v1 at 2026-01-02T03:04:05Z`).
    pub fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            out.push_str(&format!(" using {}", self.api_version));
            if !self.time.is_empty() {
                out.push_str(&format!(" at {}", self.time));
            }
        }
        out
    }
}

/// Reads `metadata.managedFields` (entries that do not parse are dropped).
pub fn read(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| Entry {
            manager: e["manager"].as_str().unwrap_or_default().to_owned(),
            operation: e["operation"].as_str().unwrap_or_default().to_owned(),
            api_version: e["apiVersion"].as_str().unwrap_or_default().to_owned(),
            time: e["time"].as_str().unwrap_or_default().to_owned(),
            subresource: e["subresource"].as_str().unwrap_or_default().to_owned(),
            fields: FieldSet::from_fields_v1(&e["fieldsV1"]),
        })
        .collect()
}

/// Writes `entries` (sorted, empty ones dropped) into `object`'s `metadata.managedFields`.
pub fn write(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    let values: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": e.fields.to_fields_v1(),
            });
            if !e.subresource.is_empty() {
                entry["subresource"] = json!(e.subresource);
            }
            entry
        })
        .collect();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if values.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".to_owned(), Value::Array(values));
        }
    }
}

/// Who is writing: the manager and where.
#[derive(Debug, Clone)]
pub struct Writer {
    /// `fieldManager`, or the User-Agent's product token.
    pub manager: String,
    /// The group-version of the request.
    pub api_version: String,
    /// `""` or `status`.
    pub subresource: String,
    /// Now, RFC 3339 seconds.
    pub time: String,
    /// Whether the resource has a status subresource (its main-resource writes do not own status).
    pub has_status: bool,
}

impl Writer {
    fn entry(&self, operation: &str, fields: FieldSet) -> Entry {
        Entry {
            manager: self.manager.clone(),
            operation: operation.to_owned(),
            api_version: self.api_version.clone(),
            time: self.time.clone(),
            subresource: self.subresource.clone(),
            fields,
        }
    }
}

/// The manager of a request: `fieldManager`, else the User-Agent up to its first `/` (upstream's
/// `prefixFromUserAgent`), at most 128 characters.
pub fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    let name = match field_manager.filter(|m| !m.is_empty()) {
        Some(manager) => manager.to_owned(),
        None => user_agent
            .unwrap_or_default()
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    name.chars().take(128).collect()
}

/// Struct fields Go holds by value, so that a zero object already has them (as `{}`): what a create
/// compares against. Pointer structs (`rollingUpdate`, `securityContext`) and maps (`labels`) are
/// absent from a zero object, so a create's entry marks them (`.`) as added.
const VALUE_STRUCTS: &[&str] = &[
    "metadata",
    "spec",
    "status",
    "template",
    "strategy",
    "updateStrategy",
    "jobTemplate",
];

/// The zero value of `object`'s Go type, as far as the field manager can see it.
fn zero_object(object: &Value) -> Value {
    let mut zero = Map::new();
    if let Some(map) = object.as_object() {
        for (key, value) in map {
            if VALUE_STRUCTS.contains(&key.as_str()) && value.is_object() {
                zero.insert(key.clone(), zero_object(value));
            }
        }
    }
    Value::Object(zero)
}

/// Records an `Update` (create, update or non-apply patch) from `old` (`None` for a create) to `new`,
/// writing the new entries into `new`. `entries` are the current ones (the client's, when it sent some).
pub fn record_update(
    schema: &Schema,
    writer: &Writer,
    entries: Vec<Entry>,
    old: Option<&Value>,
    new: &mut Value,
) {
    let zero = zero_object(new);
    let (changed, removed) = schema.compare(old.unwrap_or(&zero), new);
    let changed = changed.strip(&writer.subresource, writer.has_status);
    let removed = removed.strip(&writer.subresource, writer.has_status);
    let mine = writer.entry("Update", FieldSet::default());
    let mut owned = FieldSet::default();
    let mut out = Vec::new();
    for mut entry in entries {
        if entry.key() == mine.key() {
            owned = entry.fields.clone();
            continue;
        }
        entry.fields = entry.fields.difference(&changed).difference(&removed);
        out.push(entry);
    }
    out.push(writer.entry("Update", owned.union(&changed).difference(&removed)));
    write(new, out);
}

/// A server-side apply conflict: the manager that owns the field and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The owner, as [`Entry::describe`] prints it.
    pub manager: String,
    /// The field, as [`display_path`] prints it.
    pub field: String,
}

/// Records an `Apply` of `applied` that turned `live` into `merged`: conflicts unless `force`, the
/// manager's previous fields no longer applied (and owned by nobody else) pruned from `merged`, and the
/// entries written into it.
pub fn record_apply(
    schema: &Schema,
    writer: &Writer,
    live: Option<&Value>,
    applied: &Value,
    merged: &mut Value,
    force: bool,
) -> Result<(), Vec<Conflict>> {
    let entries = live.map(read).unwrap_or_default();
    let zero = zero_object(merged);
    let applied_set = schema
        .fields_of(applied)
        .strip(&writer.subresource, writer.has_status);
    let (changed, removed) = schema.compare(live.unwrap_or(&zero), merged);
    let changed = changed.strip(&writer.subresource, writer.has_status);
    let mine = writer.entry("Apply", FieldSet::default());
    let mut conflicts = Vec::new();
    let mut previous = FieldSet::default();
    let mut others = Vec::new();
    for entry in entries {
        if entry.key() == mine.key() {
            previous = entry.fields;
            continue;
        }
        let clash = entry.fields.intersection(&changed).intersection(&applied_set);
        for path in clash.paths() {
            conflicts.push(Conflict {
                manager: entry.describe(),
                field: display_path(&path),
            });
        }
        others.push(entry);
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for entry in &mut others {
        entry.fields = entry
            .fields
            .difference(&applied_set.intersection(&changed))
            .difference(&removed);
    }
    // Fields this manager applied before and no longer does, that nobody else owns, go away.
    let owned_by_others = others
        .iter()
        .fold(FieldSet::default(), |all, e| all.union(&e.fields));
    // A path that leads to a field still applied or owned stays (`data: {}` then `data: {k1: v}`).
    let dropped = previous
        .difference(&applied_set.with_prefixes())
        .difference(&owned_by_others.with_prefixes());
    schema.remove_paths(merged, &dropped);
    others.push(writer.entry("Apply", applied_set));
    write(merged, others);
    Ok(())
}

/// Upstream's 409 message for apply conflicts.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager, only.field
        );
    }
    let mut by_manager: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in conflicts {
        by_manager.entry(&c.manager).or_default().push(&c.field);
    }
    let mut lines = Vec::new();
    for (manager, fields) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(fields.iter().map(|f| format!("- {f}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;

    fn job_schema() -> Schema {
        Schema::new(
            Definitions::of(KubeVersion { major: 1, minor: 36 }),
            "batch",
            "v1",
            "Job",
        )
    }

    fn writer(manager: &str) -> Writer {
        Writer {
            manager: manager.into(),
            api_version: "batch/v1".into(),
            subresource: String::new(),
            time: "2026-01-02T03:04:05Z".into(),
            has_status: true,
        }
    }

    fn job(image: &str) -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "namespace": "default", "labels": {"app": "pi"}},
            "spec": {"backoffLimit": 6, "template": {"spec": {
                "containers": [{"name": "pi", "image": image, "command": ["perl"]}],
                "restartPolicy": "Never"
            }}},
            "status": {"active": 1},
        })
    }

    #[test]
    fn create_owns_every_field_in_upstreams_form() {
        let mut created = job("perl:5.34");
        record_update(
            &job_schema(),
            &writer("kubectl-create"),
            Vec::new(),
            None,
            &mut created,
        );
        let entries = created["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["manager"], "kubectl-create");
        assert_eq!(entries[0]["operation"], "Update");
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:backoffLimit": {}, "f:template": {"f:spec": {
                    "f:containers": {"k:{\"name\":\"pi\"}": {".": {}, "f:command": {}, "f:image": {}, "f:name": {}}},
                    "f:restartPolicy": {}
                }}}
            })
        );
    }

    #[test]
    fn an_update_takes_changed_fields_from_their_owner() {
        let schema = job_schema();
        let mut created = job("perl:5.34");
        record_update(&schema, &writer("creator"), Vec::new(), None, &mut created);
        let mut updated = created.clone();
        updated["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5.36");
        record_update(
            &schema,
            &writer("editor"),
            read(&created),
            Some(&created),
            &mut updated,
        );
        let entries = read(&updated);
        let editor = entries.iter().find(|e| e.manager == "editor").unwrap();
        assert_eq!(
            editor
                .fields
                .paths()
                .iter()
                .map(|p| display_path(p))
                .collect::<Vec<_>>(),
            [r#".spec.template.spec.containers[name="pi"].image"#]
        );
        let creator = entries.iter().find(|e| e.manager == "creator").unwrap();
        assert!(
            !creator
                .fields
                .paths()
                .iter()
                .any(|p| display_path(p).ends_with(".image"))
        );
    }

    #[test]
    fn apply_conflicts_forces_and_prunes() {
        let schema = job_schema();
        let mut created = job("perl:5.34");
        record_update(
            &schema,
            &writer("kubectl-client-side-apply"),
            Vec::new(),
            None,
            &mut created,
        );

        // Changing a field another manager owns conflicts.
        let applied = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
            "spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.36"}]}}}});
        let mut merged = created.clone();
        merged["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5.36");
        let conflicts = record_apply(
            &schema,
            &writer("mine"),
            Some(&created),
            &applied,
            &mut merged.clone(),
            false,
        )
        .unwrap_err();
        assert_eq!(
            conflict_message(&conflicts),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using batch/v1 at \
             2026-01-02T03:04:05Z: .spec.template.spec.containers[name=\"pi\"].image"
        );
        // Forced, the applier takes the field over.
        record_apply(
            &schema,
            &writer("mine"),
            Some(&created),
            &applied,
            &mut merged,
            true,
        )
        .unwrap();
        let entries = read(&merged);
        let mine = entries.iter().find(|e| e.manager == "mine").unwrap();
        assert_eq!(mine.operation, "Apply");
        assert!(
            mine.fields
                .paths()
                .iter()
                .any(|p| display_path(p).ends_with("].image"))
        );

        // Applying the same values again is no conflict, and fields dropped from the applied config
        // that nobody else owns are removed.
        let with_label = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "labels": {"extra": "x"}}});
        let mut next = merged.clone();
        next["metadata"]["labels"]["extra"] = json!("x");
        record_apply(
            &schema,
            &writer("mine"),
            Some(&merged),
            &with_label,
            &mut next,
            false,
        )
        .unwrap();
        let without = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"}});
        let mut last = next.clone();
        record_apply(&schema, &writer("mine"), Some(&next), &without, &mut last, false).unwrap();
        assert!(last["metadata"]["labels"].get("extra").is_none(), "{last}");
        assert_eq!(
            last["metadata"]["labels"]["app"], "pi",
            "owned by the first manager"
        );
        // The image the applier no longer applies is owned by nobody else (it was taken over), so it goes.
        assert!(
            last["spec"]["template"]["spec"]["containers"][0]
                .get("image")
                .is_none()
        );
    }

    #[test]
    fn applying_into_a_map_applied_empty_before_keeps_it() {
        let schema = Schema::new(
            Definitions::of(KubeVersion { major: 1, minor: 36 }),
            "",
            "v1",
            "ConfigMap",
        );
        let writer = Writer {
            api_version: "v1".into(),
            has_status: false,
            ..writer("mine")
        };
        let config_map = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
        let mut first = config_map(json!({}));
        record_apply(&schema, &writer, None, &config_map(json!({})), &mut first, false).unwrap();
        let applied = config_map(json!({"k1": "new"}));
        let mut second = config_map(json!({"k1": "new"}));
        second["metadata"]["managedFields"] = first["metadata"]["managedFields"].clone();
        record_apply(&schema, &writer, Some(&first), &applied, &mut second, false).unwrap();
        assert_eq!(second["data"], json!({"k1": "new"}), "{second}");
        assert_eq!(
            read(&second)[0].fields.to_fields_v1(),
            json!({"f:data": {"f:k1": {}}})
        );
        // Applying without `data` afterwards does drop the key: nobody applies it any more.
        let mut third = second.clone();
        let without = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        record_apply(&schema, &writer, Some(&second), &without, &mut third, false).unwrap();
        assert!(third.pointer("/data/k1").is_none(), "{third}");
    }

    #[test]
    fn fields_v1_round_trips() {
        let value = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:x": {}}});
        assert_eq!(FieldSet::from_fields_v1(&value).to_fields_v1(), value);
    }

    #[test]
    fn manager_names() {
        assert_eq!(manager_name(Some("kubectl"), Some("curl/8")), "kubectl");
        assert_eq!(manager_name(None, Some("curl/8.1.2")), "curl");
        assert_eq!(manager_name(Some(""), Some("kubectl/v1.32 (linux)")), "kubectl");
    }
}
