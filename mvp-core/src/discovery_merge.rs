//! Peer-aggregated discovery (KEP-4020 beta, docs/mvp-behaviour.md §7.1): merging this server's aggregated
//! `/apis` groups with its peers' into the one list a client sees by default.
//!
//! A faithful port of upstream's `peerAggregatedDiscoveryHandler.mergeResources`
//! (`apiserver/pkg/endpoints/discovery/aggregated/peer_aggregated_handler.go`, 1.36) and of
//! `MergePreservingRelativeOrder` (`apimachinery/pkg/util/sort`). Pure functions over the JSON
//! `APIGroupDiscovery` objects servers serve (`serde_json::Value`), no I/O:
//!
//! - servers (this one included) are processed in lexicographic server-ID order; the first copy
//!   of a group, version or resource seen is kept and later copies are merged into it;
//! - a resource present on several servers with different content gets the union of the verbs
//!   (sorted) and of the subresources (later copy wins per name, sorted by name); its other
//!   fields, the version's `freshness` and the group's metadata come from the first copy;
//! - groups, versions and resources are ordered by the local order when no server changed it,
//!   else by [`merge_preserving_relative_order`].
//!
//! ```
//! use serde_json::json;
//! use mvp_core::discovery_merge::merge_peer_discovery;
//!
//! let group = |name: &str| json!({"metadata": {"name": name}, "versions": [
//!     {"version": "v1", "resources": [], "freshness": "Current"}]});
//! let local = vec![group("apps"), group("rbac.authorization.k8s.io")];
//! let peers = vec![("peer-b".to_owned(), vec![group("apps"), group("batch")])];
//! let merged = merge_peer_discovery("server-a", &local, &peers);
//! let names: Vec<&str> = merged.iter().map(|g| g["metadata"]["name"].as_str().unwrap()).collect();
//! // apps precedes both others somewhere; batch and rbac are unordered: lexicographic tie-break.
//! assert_eq!(names, ["apps", "batch", "rbac.authorization.k8s.io"]);
//! ```

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use serde_json::Value;

/// Merges several orderings of names into one that keeps every "a before b" relation of every
/// input list (upstream `MergePreservingRelativeOrder`).
///
/// - If an input list already holds every distinct name exactly once, the first such list is
///   returned as is.
/// - Otherwise a topological sort (Kahn's algorithm) of the precedence edges runs, taking the
///   lexicographically smallest available name at each step.
/// - If the relations contradict each other (a cycle), all names sorted lexicographically.
pub fn merge_preserving_relative_order<S: AsRef<str>>(lists: &[Vec<S>]) -> Vec<String> {
    let mut names = Interner::default();
    let ids: Vec<Vec<usize>> = lists
        .iter()
        .map(|list| list.iter().map(|item| names.intern(item.as_ref()).0).collect())
        .collect();
    let names = names.into_names();
    relative_order(&ids, &names)
        .into_iter()
        .filter_map(|id| names.get(id).map(|name| (*name).to_owned()))
        .collect()
}

/// [`merge_preserving_relative_order`] over interned names: every list holds ids below
/// `names.len()`, and every id occurs in some list; `names[id]` (all distinct) only breaks ties.
/// Returns the ids in merged order.
fn relative_order<L: AsRef<[usize]>>(lists: &[L], names: &[&str]) -> Vec<usize> {
    let n = names.len();
    // Shortcut: a list that already contains every item once.
    let mut seen = vec![false; n];
    for list in lists {
        let list = list.as_ref();
        if list.len() == n && is_unique(list, &mut seen) {
            return list.to_vec();
        }
    }

    // The distinct "a directly before b" edges (a self-edge from a repeated name is a cycle),
    // grouped by their source: the successors of `id` are `edges[first[id]..first[id + 1]]`.
    let mut edges: Vec<(usize, usize)> = lists
        .iter()
        .flat_map(|list| list.as_ref().windows(2).map(|pair| (pair[0], pair[1])))
        .collect();
    edges.sort_unstable();
    edges.dedup();
    let mut in_degree = vec![0_usize; n];
    let mut first = vec![0_usize; n + 1];
    for &(from, to) in &edges {
        in_degree[to] += 1;
        first[from + 1] += 1;
    }
    for id in 0..n {
        first[id + 1] += first[id];
    }

    // Lexicographic rank of each id, so the heap compares integers rather than strings.
    let mut by_name: Vec<usize> = (0..n).collect();
    by_name.sort_unstable_by_key(|&id| names[id]);
    let mut rank = vec![0_usize; n];
    for (r, &id) in by_name.iter().enumerate() {
        rank[id] = r;
    }

    let mut ready: BinaryHeap<Reverse<usize>> = (0..n)
        .filter(|&id| in_degree[id] == 0)
        .map(|id| Reverse(rank[id]))
        .collect();
    let mut sorted = Vec::with_capacity(n);
    while let Some(Reverse(r)) = ready.pop() {
        let current = by_name[r];
        sorted.push(current);
        for &(_, next) in &edges[first[current]..first[current + 1]] {
            in_degree[next] -= 1;
            if in_degree[next] == 0 {
                ready.push(Reverse(rank[next]));
            }
        }
    }
    if sorted.len() != n {
        // A cycle: upstream falls back to plain lexicographic order.
        return by_name;
    }
    sorted
}

/// Whether `list` holds no id twice; `seen` (one flag per id, all false) is left all false.
fn is_unique(list: &[usize], seen: &mut [bool]) -> bool {
    let mut unique = true;
    for &id in list {
        if std::mem::replace(&mut seen[id], true) {
            unique = false;
            break;
        }
    }
    for &id in list {
        seen[id] = false;
    }
    unique
}

/// Up to this many names (or object keys), comparing strings one by one beats hashing them
/// (serde_json's map and `HashMap` use SipHash); beyond it, lookups hash so long lists stay linear.
const SCAN_LIMIT: usize = 16;

/// Gives each distinct name a dense id (0, 1, … in order of first sight). Lists here are short
/// (a group's versions, a version's resources), so up to [`SCAN_LIMIT`] names are found by a
/// scan; beyond that a hash index takes over.
#[derive(Default)]
struct Interner<'a> {
    names: Vec<&'a str>,
    index: Option<HashMap<&'a str, usize>>,
}

impl<'a> Interner<'a> {
    /// The id of `name`, and whether it was new.
    fn intern(&mut self, name: &'a str) -> (usize, bool) {
        let found = match &self.index {
            Some(index) => index.get(name).copied(),
            None => self.names.iter().position(|known| *known == name),
        };
        if let Some(id) = found {
            return (id, false);
        }
        let id = self.names.len();
        self.names.push(name);
        if let Some(index) = &mut self.index {
            index.insert(name, id);
        } else if self.names.len() > SCAN_LIMIT {
            self.index = Some(
                self.names
                    .iter()
                    .enumerate()
                    .map(|(id, name)| (*name, id))
                    .collect(),
            );
        }
        (id, true)
    }

    fn len(&self) -> usize {
        self.names.len()
    }

    fn into_names(self) -> Vec<&'a str> {
        self.names
    }
}

/// Merges this server's aggregated `/apis` groups (`local`, the `items` of its
/// `APIGroupDiscoveryList`) with each peer's groups (`peers`: peer server ID → its groups, core
/// group excluded), as upstream's peer-aggregated handler does.
///
/// `local_id` is this server's ID: it decides where the local list sorts among the servers. A
/// peer entry with the same ID replaces the local list (as upstream's map insertion does). With no
/// peer, or when the peers add nothing and order everything as the local list does, the result
/// equals `local`.
///
/// Cost: each group is copied at most once, when a later server first changes it, and then merged
/// in place; servers that change nothing in a group are only compared with it.
pub fn merge_peer_discovery(local_id: &str, local: &[Value], peers: &[(String, Vec<Value>)]) -> Vec<Value> {
    let mut by_server: BTreeMap<&str, &[Value]> = BTreeMap::new();
    by_server.insert(local_id, local);
    for (id, groups) in peers {
        by_server.insert(id.as_str(), groups.as_slice());
    }
    if by_server.len() <= 1 {
        return local.to_vec();
    }

    let local_names: Vec<&str> = local.iter().map(group_name).collect();
    let mut names: Interner<'_> = Interner {
        names: Vec::new(),
        index: Some(HashMap::new()),
    };
    // By group id: the first copy seen, owned once a later copy changed it.
    let mut merged: Vec<Cow<'_, Value>> = Vec::new();
    let mut lists: Vec<Vec<usize>> = Vec::with_capacity(by_server.len());
    let mut content_changed = false;
    let mut names_identical = true;
    for groups in by_server.values() {
        let mut ids = Vec::with_capacity(groups.len());
        for group in *groups {
            let (id, new) = names.intern(group_name(group));
            if new {
                merged.push(Cow::Borrowed(group));
            } else if let Some(existing) = merged.get_mut(id) {
                let changed = match existing {
                    // Copy the first copy only when this one changes it.
                    Cow::Borrowed(first) => {
                        group_changes(first, group) && merge_group(existing.to_mut(), group)
                    }
                    Cow::Owned(value) => merge_group(value, group),
                };
                content_changed |= changed;
            }
            ids.push(id);
        }
        names_identical &= groups.len() == local_names.len()
            && groups
                .iter()
                .zip(&local_names)
                .all(|(group, name)| group_name(group) == *name);
        lists.push(ids);
    }

    if !content_changed && names_identical {
        return local.to_vec();
    }
    let order: Vec<usize> = if names_identical {
        // Every list is the local one, which therefore introduced the ids in its own order.
        (0..names.len()).collect()
    } else {
        relative_order(&lists, &names.into_names())
    };
    let mut merged: Vec<Option<Cow<'_, Value>>> = merged.into_iter().map(Some).collect();
    order
        .iter()
        .filter_map(|&id| merged.get_mut(id).and_then(Option::take))
        .map(Cow::into_owned)
        .collect()
}

fn group_name(group: &Value) -> &str {
    field(group, "metadata")
        .and_then(|metadata| field(metadata, "name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `value.get(name)` for an object. Discovery objects have a handful of keys, for which a scan
/// is cheaper than hashing the name (serde_json's map hashes with SipHash).
fn field<'a>(value: &'a Value, name: &str) -> Option<&'a Value> {
    let object = value.as_object()?;
    if object.len() <= SCAN_LIMIT {
        object.iter().find_map(|(key, v)| (key == name).then_some(v))
    } else {
        object.get(name)
    }
}

fn str_field<'a>(value: &'a Value, name: &str) -> &'a str {
    field(value, name).and_then(Value::as_str).unwrap_or_default()
}

fn array<'a>(value: &'a Value, name: &str) -> &'a [Value] {
    field(value, name)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn array_mut<'a>(value: &'a mut Value, name: &str) -> &'a mut [Value] {
    value
        .as_object_mut()
        .and_then(|object| object.get_mut(name))
        .and_then(Value::as_array_mut)
        .map(Vec::as_mut_slice)
        .unwrap_or_default()
}

/// `a == b` as serde_json defines it (objects compare as maps, key order ignored), faster when
/// both objects list their keys in the same order, as copies of one discovery document do.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            if a.len() != b.len() {
                return false;
            }
            for ((ka, va), (kb, vb)) in a.iter().zip(b) {
                if ka != kb {
                    // Same length, other order: compare as maps.
                    return a.iter().all(|(k, v)| b.get(k).is_some_and(|w| json_eq(v, w)));
                }
                if !json_eq(va, vb) {
                    return false;
                }
            }
            true
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| json_eq(x, y))
        }
        (Value::String(a), Value::String(b)) => a == b,
        _ => a == b,
    }
}

/// Whether `a` and `b` serialize to the same bytes: equal, with object keys in the same order.
fn json_identical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && json_identical(va, vb))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| json_identical(x, y))
        }
        (Value::String(a), Value::String(b)) => a == b,
        _ => a == b,
    }
}

/// Merging one level — the versions of a group, the resources of a version — `b` into `a`, as
/// upstream does: `a`'s entries keyed by name (a name listed twice: the last entry), each of `b`'s
/// entries merged into the entry of its name or added. The level changes when an entry changed or
/// the name lists differ; its order is then `a`'s (same names) or the relative-order merge of both.
///
/// Everything that depends on names only (ids, targets, order) is worked out here, before any
/// entry is modified.
struct LevelPlan {
    /// How many distinct names `a` has: ids below are `a`'s, the rest are new in `b`.
    a_distinct: usize,
    /// For each id of `a`, the index of its last entry in `a`.
    a_entry: Vec<usize>,
    /// The id of each of `b`'s entries.
    b_ids: Vec<usize>,
    /// `a` and `b` list the same names in the same order.
    identical: bool,
    /// Some name occurs twice in `a`.
    a_repeats: bool,
    /// The merged order, when the name lists differ.
    order: Option<Vec<usize>>,
}

impl LevelPlan {
    fn new(a_items: &[Value], b_items: &[Value], key: &str) -> Self {
        let mut names = Interner::default();
        let mut a_ids = Vec::with_capacity(a_items.len());
        let mut a_entry = Vec::with_capacity(a_items.len());
        for (index, item) in a_items.iter().enumerate() {
            let (id, new) = names.intern(str_field(item, key));
            if new {
                a_entry.push(index);
            } else {
                a_entry[id] = index;
            }
            a_ids.push(id);
        }
        let a_distinct = names.len();
        let b_ids: Vec<usize> = b_items
            .iter()
            .map(|item| names.intern(str_field(item, key)).0)
            .collect();
        let identical = a_ids == b_ids;
        let order = (!identical).then(|| relative_order(&[&a_ids, &b_ids], &names.into_names()));
        Self {
            a_distinct,
            a_entry,
            b_ids,
            identical,
            a_repeats: a_distinct != a_ids.len(),
            order,
        }
    }
}

/// Merges the level `list` (entries named by their `key` field) of `b` into `a` in place, merging
/// entries with `merge`. Returns whether `a` changed, i.e. whether upstream's merge returns a new
/// object; `false` means `a` was not touched. `a` keeps its other fields; a non-object `a` keeps
/// everything (but still counts as changed when `b` lists entries, as upstream's copy does).
fn merge_level(
    a: &mut Value,
    b: &Value,
    list: &str,
    key: &str,
    merge: fn(&mut Value, &Value) -> bool,
) -> bool {
    let b_items = array(b, list);
    if !a.is_object() {
        return !b_items.is_empty();
    }
    if same_unique_names(array(a, list), b_items, key) {
        // The common case: each entry of `b` merges into `a`'s entry at the same position.
        let mut content_changed = false;
        for (existing, item) in array_mut(a, list).iter_mut().zip(b_items) {
            content_changed |= merge(existing, item);
        }
        return content_changed;
    }
    let plan = LevelPlan::new(array(a, list), b_items, key);

    // Entries new in `b`, by id - a_distinct: borrowed until a later entry of `b` changes them.
    let mut added: Vec<Option<Cow<'_, Value>>> = Vec::new();
    let mut content_changed = false;
    {
        let a_items = array_mut(a, list);
        for (item, &id) in b_items.iter().zip(&plan.b_ids) {
            let target = match id.checked_sub(plan.a_distinct) {
                None => plan.a_entry.get(id).and_then(|&index| a_items.get_mut(index)),
                Some(new) if new == added.len() => {
                    added.push(Some(Cow::Borrowed(item)));
                    None
                }
                Some(new) => added.get_mut(new).and_then(Option::as_mut).map(Cow::to_mut),
            };
            if let Some(existing) = target {
                content_changed |= merge(existing, item);
            }
        }
    }
    if plan.identical && (!content_changed || !plan.a_repeats) {
        // Unchanged, or changed in place with the entries already in their final order.
        return content_changed;
    }

    let order = plan.order.unwrap_or_else(|| (0..plan.a_distinct).collect());
    let Some(object) = a.as_object_mut() else {
        return true;
    };
    let mut old: Vec<Option<Value>> = match object.get_mut(list) {
        Some(Value::Array(items)) => std::mem::take(items).into_iter().map(Some).collect(),
        _ => Vec::new(),
    };
    let entries: Vec<Value> = order
        .iter()
        .filter_map(|&id| match id.checked_sub(plan.a_distinct) {
            None => plan.a_entry.get(id).and_then(|&index| old.get_mut(index)?.take()),
            Some(new) => added.get_mut(new)?.take().map(Cow::into_owned),
        })
        .collect();
    match object.get_mut(list) {
        // In place: the field keeps its position among the object's keys.
        Some(slot) => *slot = Value::Array(entries),
        None => {
            object.insert(list.to_owned(), Value::Array(entries));
        }
    }
    true
}

/// Whether `a` and `b` name their entries alike, position by position, no name twice: then each
/// entry of `b` meets the entry of `a` at its position. Answers `false` (not known) above
/// [`SCAN_LIMIT`] entries, to keep the check allocation-free and the scan short.
fn same_unique_names(a_items: &[Value], b_items: &[Value], key: &str) -> bool {
    if a_items.len() != b_items.len() || a_items.len() > SCAN_LIMIT {
        return false;
    }
    let mut names = [""; SCAN_LIMIT];
    for ((slot, x), y) in names.iter_mut().zip(a_items).zip(b_items) {
        *slot = str_field(x, key);
        if *slot != str_field(y, key) {
            return false;
        }
    }
    let names = &names[..a_items.len()];
    names
        .iter()
        .enumerate()
        .all(|(i, name)| !names[i + 1..].contains(name))
}

/// Whether [`merge_level`] would change `a`, without touching it: the name lists differ, or
/// some entry of `b` changes the (last) entry of `a` with its name.
fn level_changes(a: &Value, b: &Value, list: &str, key: &str, changes: fn(&Value, &Value) -> bool) -> bool {
    let (a_items, b_items) = (array(a, list), array(b, list));
    if same_unique_names(a_items, b_items, key) {
        return a_items.iter().zip(b_items).any(|(x, y)| changes(x, y));
    }
    if a_items.len() != b_items.len()
        || a_items
            .iter()
            .zip(b_items)
            .any(|(x, y)| str_field(x, key) != str_field(y, key))
    {
        return true;
    }
    let plan = LevelPlan::new(a_items, b_items, key);
    if !plan.a_repeats {
        return a_items.iter().zip(b_items).any(|(x, y)| changes(x, y));
    }
    b_items.iter().zip(&plan.b_ids).any(|(item, &id)| {
        plan.a_entry
            .get(id)
            .and_then(|&index| a_items.get(index))
            .is_some_and(|existing| changes(existing, item))
    })
}

/// Upstream `mergeVersionsAcrossGroup`, in place: whether `b` changed `a`. Only a version whose
/// resources changed is a content change; a new version shows as a different name list.
fn merge_group(a: &mut Value, b: &Value) -> bool {
    merge_level(a, b, "versions", "version", merge_version)
}

fn group_changes(a: &Value, b: &Value) -> bool {
    level_changes(a, b, "versions", "version", version_changes)
}

/// Upstream `mergeResourcesAcrossVersion`, in place: whether `b` changed `a`. A resource that
/// differs in any way from the existing copy is a content change.
fn merge_version(a: &mut Value, b: &Value) -> bool {
    merge_level(a, b, "resources", "resource", |existing, resource| {
        let changed = !json_eq(existing, resource);
        if changed {
            merge_capabilities_into(existing, resource);
        }
        changed
    })
}

fn version_changes(a: &Value, b: &Value) -> bool {
    level_changes(a, b, "resources", "resource", |existing, resource| {
        !json_eq(existing, resource)
    })
}

/// Upstream `mergeResourceCapabilities`, as a copy (what the unit tests check).
#[cfg(test)]
fn merge_resource_capabilities(a: &Value, b: &Value) -> Value {
    let mut merged = a.clone();
    merge_capabilities_into(&mut merged, b);
    merged
}

/// Upstream `mergeResourceCapabilities`, in place: `a` (or a copy of `b` when `a` has no name) with
/// the sorted union of both verb lists and the union of both subresource lists (`b` wins per
/// name), sorted by name. A field that already holds exactly its new value is left alone.
fn merge_capabilities_into(a: &mut Value, b: &Value) {
    if holds_capabilities_of(a, b) {
        return;
    }
    let keep_a = !str_field(a, "resource").is_empty();

    let mut verbs: Vec<&str> = array(a, "verbs")
        .iter()
        .chain(array(b, "verbs"))
        .filter_map(Value::as_str)
        .collect();
    verbs.sort_unstable();
    verbs.dedup();
    // Go leaves an empty union nil: `verbs` is written as null, `subresources` (omitempty) dropped.
    let verbs_unchanged = keep_a
        && match field(a, "verbs") {
            Some(Value::Null) => verbs.is_empty(),
            Some(Value::Array(current)) => {
                !verbs.is_empty()
                    && current.len() == verbs.len()
                    && current
                        .iter()
                        .zip(&verbs)
                        .all(|(v, new)| v.as_str() == Some(*new))
            }
            _ => false,
        };
    let new_verbs = (!verbs_unchanged).then(|| {
        if verbs.is_empty() {
            Value::Null
        } else {
            Value::Array(verbs.into_iter().map(Value::from).collect())
        }
    });

    // Sorted by name; among entries of one name (a's first, then b's) the last one wins.
    let mut subresources: Vec<(&str, &Value)> = array(a, "subresources")
        .iter()
        .chain(array(b, "subresources"))
        .map(|subresource| (str_field(subresource, "subresource"), subresource))
        .collect();
    subresources.sort_by_key(|(name, _)| *name);
    subresources.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            *kept = *later;
        }
        same
    });
    let subresources_unchanged = keep_a
        && !subresources.is_empty()
        && matches!(field(a, "subresources"), Some(Value::Array(current))
            if current.len() == subresources.len()
                && current.iter().zip(&subresources).all(|(v, (_, new))| json_identical(v, new)));
    let new_subresources = (!subresources.is_empty() && !subresources_unchanged)
        .then(|| Value::Array(subresources.iter().map(|(_, s)| (*s).clone()).collect()));
    let drop_subresources = subresources.is_empty();

    if !keep_a {
        *a = b.clone();
    }
    let Some(object) = a.as_object_mut() else {
        return;
    };
    if let Some(verbs) = new_verbs {
        set(object, "verbs", verbs);
    }
    if drop_subresources {
        // serde_json's `remove` is `swap_remove` with `preserve_order`, as upstream's port used.
        object.remove("subresources");
    } else if let Some(list) = new_subresources {
        set(object, "subresources", list);
    }
}

/// Whether `a` (a named resource) already holds the merge of `b`'s capabilities, so that
/// [`merge_capabilities_into`] would leave it exactly as is: its verbs are strings, sorted and
/// distinct, and include `b`'s; its subresources have sorted, distinct names, and each of `b`'s is
/// byte-identical to `a`'s of that name. The usual case once a resource has been merged; checked
/// without allocating.
fn holds_capabilities_of(a: &Value, b: &Value) -> bool {
    if str_field(a, "resource").is_empty() {
        return false;
    }
    let mut b_verbs = array(b, "verbs").iter().filter_map(Value::as_str);
    let verbs_held = match field(a, "verbs") {
        // An empty union is written as null.
        Some(Value::Null) => b_verbs.next().is_none(),
        Some(Value::Array(verbs)) => {
            !verbs.is_empty()
                && verbs.iter().all(Value::is_string)
                && verbs.windows(2).all(|pair| pair[0].as_str() < pair[1].as_str())
                && b_verbs.all(|verb| verbs.iter().any(|held| held.as_str() == Some(verb)))
        }
        _ => false,
    };
    if !verbs_held {
        return false;
    }
    let (held, added) = (array(a, "subresources"), array(b, "subresources"));
    if held.is_empty() {
        // An empty union drops the field.
        return added.is_empty() && field(a, "subresources").is_none();
    }
    held.windows(2)
        .all(|pair| str_field(&pair[0], "subresource") < str_field(&pair[1], "subresource"))
        && added.iter().all(|subresource| {
            let name = str_field(subresource, "subresource");
            held.binary_search_by(|h| str_field(h, "subresource").cmp(name))
                .ok()
                .and_then(|index| held.get(index))
                .is_some_and(|h| json_identical(h, subresource))
        })
}

/// `object.insert(name, value)` (an existing key keeps its position) without allocating the key
/// when it exists.
fn set(object: &mut serde_json::Map<String, Value>, name: &str, value: Value) {
    match object.get_mut(name) {
        Some(slot) => *slot = value,
        None => {
            object.insert(name.to_owned(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn order(lists: &[&[&str]]) -> Vec<String> {
        let lists: Vec<Vec<&str>> = lists.iter().map(|l| l.to_vec()).collect();
        merge_preserving_relative_order(&lists)
    }

    /// Upstream's `TestSortDiscoveryGroupsTopo` table.
    #[test]
    fn relative_order_merge_matches_upstream_table() {
        let cases: &[(&[&[&str]], &[&str])] = &[
            (
                &[
                    &["A", "B", "C", "D"],
                    &["A", "B", "C", "D"],
                    &["A", "X", "Z", "D"],
                    &["Z", "Y"],
                    &["Q"],
                ],
                &["A", "B", "C", "Q", "X", "Z", "D", "Y"],
            ),
            (&[], &[]),
            (&[&["foo", "bar", "baz"]], &["foo", "bar", "baz"]),
            (&[&["A", "B"], &["B", "A"]], &["A", "B"]),
            (&[&[], &["A", "B", "C"]], &["A", "B", "C"]),
            (&[&[], &[], &[]], &[]),
            (
                &[&["C", "D", "E"], &["B", "D", "E"], &["A", "D", "E"]],
                &["A", "B", "C", "D", "E"],
            ),
            (
                &[&["A", "D", "E"], &["A", "C", "E"], &["A", "B", "E"]],
                &["A", "B", "C", "D", "E"],
            ),
            (
                &[&["A", "B", "C"], &["B", "C", "A"], &["C", "A", "B"]],
                &["A", "B", "C"],
            ),
            (
                &[&["A", "B", "C", "D"], &["B", "A"], &["C", "D"]],
                &["A", "B", "C", "D"],
            ),
            (&[&["A", "B"], &["C", "D"], &["B", "A"]], &["A", "B", "C", "D"]),
            (&[&["A", "B"], &["B", "C"], &["C", "A"]], &["A", "B", "C"]),
        ];
        for (input, want) in cases {
            assert_eq!(order(input), want.to_vec(), "input {input:?}");
        }
    }

    #[test]
    fn shortcut_returns_the_first_complete_list_even_against_lexicographic_order() {
        assert_eq!(order(&[&["z", "a"], &["a"]]), ["z", "a"]);
        // A list with a duplicate does not qualify for the shortcut.
        assert_eq!(order(&[&["b", "b"], &["a", "b"]]), ["a", "b"]);
    }

    fn resource(name: &str, verbs: &[&str]) -> Value {
        json!({"resource": name, "responseKind": {"group": "", "version": "", "kind": name},
               "scope": "Namespaced", "singularResource": name, "verbs": verbs})
    }

    fn version(name: &str, resources: Vec<Value>) -> Value {
        json!({"version": name, "resources": resources, "freshness": "Current"})
    }

    fn group(name: &str, versions: Vec<Value>) -> Value {
        json!({"metadata": {"name": name}, "versions": versions})
    }

    fn names(groups: &[Value]) -> Vec<&str> {
        groups.iter().map(group_name).collect()
    }

    fn peers(list: &[(&str, Vec<Value>)]) -> Vec<(String, Vec<Value>)> {
        list.iter().map(|(id, g)| ((*id).to_owned(), g.clone())).collect()
    }

    #[test]
    fn without_peers_or_with_nothing_new_the_local_list_is_returned() {
        let local = vec![
            group(
                "z.example.com",
                vec![version("v1", vec![resource("zs", &["get"])])],
            ),
            group(
                "apps",
                vec![version("v1", vec![resource("deployments", &["get"])])],
            ),
        ];
        assert_eq!(merge_peer_discovery("a", &local, &[]), local);
        // Same groups in the same order, also when the peer sorts first: local unchanged.
        let same = peers(&[("0-peer", local.clone()), ("z-peer", vec![])]);
        assert_eq!(merge_peer_discovery("a", &local, &same), local);
        // A peer serving a subset in the same relative order: local order (shortcut), local content.
        let subset = peers(&[("b", vec![local[1].clone()])]);
        assert_eq!(merge_peer_discovery("a", &local, &subset), local);
    }

    #[test]
    fn groups_versions_and_resources_are_unioned_in_relative_order() {
        let local = vec![
            group(
                "apps",
                vec![version("v1", vec![resource("deployments", &["get"])])],
            ),
            group("rbac", vec![version("v1", vec![resource("roles", &["get"])])]),
        ];
        let peer = vec![
            group(
                "apps",
                vec![
                    version("v2", vec![resource("things", &["get"])]),
                    version(
                        "v1",
                        vec![
                            resource("deployments", &["get"]),
                            resource("statefulsets", &["get"]),
                        ],
                    ),
                ],
            ),
            group("batch", vec![version("v1", vec![resource("jobs", &["get"])])]),
        ];
        let merged = merge_peer_discovery("a", &local, &peers(&[("b", peer)]));
        assert_eq!(names(&merged), ["apps", "batch", "rbac"]);
        let apps = &merged[0];
        let versions: Vec<&str> = array(apps, "versions")
            .iter()
            .map(|v| str_field(v, "version"))
            .collect();
        assert_eq!(versions, ["v2", "v1"], "b's v2 before v1 is the only relation");
        let v1: Vec<&str> = array(&array(apps, "versions")[1], "resources")
            .iter()
            .map(|r| str_field(r, "resource"))
            .collect();
        assert_eq!(v1, ["deployments", "statefulsets"]);
    }

    #[test]
    fn differing_resources_get_sorted_verb_and_subresource_unions_first_copy_wins_otherwise() {
        let mut a_pods = resource("pods", &["list", "get"]);
        a_pods["subresources"] = json!([{"subresource": "status", "verbs": ["get"]}]);
        a_pods["shortNames"] = json!(["po"]);
        let mut b_pods = resource("pods", &["watch", "create", "get"]);
        b_pods["subresources"] = json!([
            {"subresource": "status", "verbs": ["get", "patch"]},
            {"subresource": "log", "verbs": ["get"]}
        ]);
        b_pods["shortNames"] = json!(["p"]);
        let local = vec![group("g", vec![version("v1", vec![a_pods])])];
        let peer = vec![group("g", vec![version("v1", vec![b_pods.clone()])])];
        // Local "a" sorts before peer "b": a's copy is first.
        let merged = merge_peer_discovery("a", &local, &peers(&[("b", peer.clone())]));
        let pods = &merged[0]["versions"][0]["resources"][0];
        assert_eq!(pods["verbs"], json!(["create", "get", "list", "watch"]));
        assert_eq!(
            pods["subresources"],
            json!([{"subresource": "log", "verbs": ["get"]},
                   {"subresource": "status", "verbs": ["get", "patch"]}])
        );
        assert_eq!(pods["shortNames"], json!(["po"]));
        // Local "c" sorts after peer "b": b's copy is first, so its other fields win.
        let merged = merge_peer_discovery("c", &local, &peers(&[("b", peer)]));
        let pods = &merged[0]["versions"][0]["resources"][0];
        assert_eq!(pods["shortNames"], json!(["p"]));
        assert_eq!(pods["verbs"], json!(["create", "get", "list", "watch"]));
    }

    #[test]
    fn content_change_with_identical_names_keeps_local_order() {
        let local = vec![
            group("z", vec![version("v1", vec![resource("zs", &["get"])])]),
            group("a", vec![version("v1", vec![resource("as", &["get"])])]),
        ];
        let peer = vec![
            group("z", vec![version("v1", vec![resource("zs", &["get", "list"])])]),
            group("a", vec![version("v1", vec![resource("as", &["get"])])]),
        ];
        let merged = merge_peer_discovery("a-server", &local, &peers(&[("b", peer)]));
        assert_eq!(names(&merged), ["z", "a"]);
        assert_eq!(
            merged[0]["versions"][0]["resources"][0]["verbs"],
            json!(["get", "list"])
        );
    }

    #[test]
    fn conflicting_group_orders_fall_back_to_lexicographic() {
        let g = |n: &str| group(n, vec![version("v1", vec![])]);
        let local = vec![g("b"), g("a"), g("c")];
        let peer = vec![g("a"), g("b"), g("d")];
        let merged = merge_peer_discovery("x", &local, &peers(&[("y", peer)]));
        assert_eq!(names(&merged), ["a", "b", "c", "d"]);
    }

    #[test]
    fn servers_are_processed_in_id_order_independent_of_input_order() {
        let g = |n: &str, verbs: &[&str]| group(n, vec![version("v1", vec![resource("r", verbs)])]);
        let local = vec![g("shared", &["get"])];
        let p1 = ("p1".to_owned(), vec![g("one", &["get"]), g("shared", &["list"])]);
        let p2 = ("p2".to_owned(), vec![g("two", &["get"]), g("shared", &["watch"])]);
        let forward = merge_peer_discovery("a", &local, &[p1.clone(), p2.clone()]);
        let backward = merge_peer_discovery("a", &local, &[p2, p1]);
        assert_eq!(forward, backward);
        assert_eq!(names(&forward), ["one", "two", "shared"]);
        assert_eq!(
            forward[2]["versions"][0]["resources"][0]["verbs"],
            json!(["get", "list", "watch"])
        );
    }

    #[test]
    fn empty_verb_union_is_null_and_empty_subresources_are_dropped() {
        let mut a = resource("r", &[]);
        a["subresources"] = json!([]);
        let mut b = resource("r", &[]);
        b["singularResource"] = json!("other");
        let merged = merge_resource_capabilities(&a, &b);
        assert_eq!(merged["verbs"], Value::Null);
        assert!(merged.get("subresources").is_none());
        assert_eq!(merged["singularResource"], "r");
    }

    /// Upstream copies a non-object entry when the other copy lists entries, which counts as a
    /// change even though nothing differs: here that makes the local list's repeated group collapse.
    #[test]
    fn a_non_object_entry_counts_as_changed_by_a_copy_with_entries() {
        let junk = json!({"metadata": {"name": "g"}, "versions": ["junk"]});
        let full = json!({"metadata": {"name": "g"}, "versions": [{"version": "", "resources": [{"resource": "r"}]}]});
        let local = vec![junk.clone(), full];
        let peer = peers(&[("b", local.clone())]);
        let merged = merge_peer_discovery("a", &local, &peer);
        assert_eq!(merged, [junk]);
        assert_eq!(merged, reference::merge_peer_discovery("a", &local, &peer));
    }

    /// The implementation this module replaced (clone-per-merge, string-keyed), kept verbatim as the
    /// oracle for the property tests below: the output must stay byte for byte the same.
    mod reference {
        use std::borrow::Cow;
        use std::cmp::Reverse;
        use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};

        use serde_json::Value;

        /// Merges several orderings of names into one that keeps every "a before b" relation of every
        /// input list (upstream `MergePreservingRelativeOrder`).
        ///
        /// - If an input list already holds every distinct name exactly once, the first such list is
        ///   returned as is.
        /// - Otherwise a topological sort (Kahn's algorithm) of the precedence edges runs, taking the
        ///   lexicographically smallest available name at each step.
        /// - If the relations contradict each other (a cycle), all names sorted lexicographically.
        pub fn merge_preserving_relative_order<S: AsRef<str>>(lists: &[Vec<S>]) -> Vec<String> {
            struct Node<'a> {
                next: HashSet<&'a str>,
                in_degree: usize,
            }
            let mut graph: HashMap<&str, Node<'_>> = HashMap::new();
            for list in lists {
                for (i, item) in list.iter().enumerate() {
                    let item = item.as_ref();
                    graph.entry(item).or_insert_with(|| Node {
                        next: HashSet::new(),
                        in_degree: 0,
                    });
                    if let Some(next) = list.get(i + 1).map(AsRef::as_ref) {
                        let added = graph.get_mut(item).is_some_and(|node| node.next.insert(next));
                        if added {
                            graph
                                .entry(next)
                                .or_insert_with(|| Node {
                                    next: HashSet::new(),
                                    in_degree: 0,
                                })
                                .in_degree += 1;
                        }
                    }
                }
            }

            // Shortcut: a list that already contains every item once.
            for list in lists {
                if list.len() == graph.len() && is_unique(list) {
                    return list.iter().map(|s| s.as_ref().to_owned()).collect();
                }
            }

            let mut ready: BinaryHeap<Reverse<&str>> = graph
                .iter()
                .filter(|(_, node)| node.in_degree == 0)
                .map(|(name, _)| Reverse(*name))
                .collect();
            let mut in_degree: HashMap<&str, usize> = graph.iter().map(|(k, n)| (*k, n.in_degree)).collect();
            let mut sorted = Vec::with_capacity(graph.len());
            while let Some(Reverse(current)) = ready.pop() {
                sorted.push(current.to_owned());
                if let Some(node) = graph.get(current) {
                    for next in &node.next {
                        if let Some(degree) = in_degree.get_mut(next) {
                            *degree = degree.saturating_sub(1);
                            if *degree == 0 {
                                ready.push(Reverse(*next));
                            }
                        }
                    }
                }
            }
            if sorted.len() != graph.len() {
                // A cycle: upstream falls back to plain lexicographic order.
                let mut all: Vec<String> = graph.keys().map(|k| (*k).to_owned()).collect();
                all.sort();
                return all;
            }
            sorted
        }

        fn is_unique<S: AsRef<str>>(list: &[S]) -> bool {
            let mut seen = HashSet::with_capacity(list.len());
            list.iter().all(|item| seen.insert(item.as_ref()))
        }

        /// Merges this server's aggregated `/apis` groups (`local`, the `items` of its
        /// `APIGroupDiscoveryList`) with each peer's groups (`peers`: peer server ID → its groups, core
        /// group excluded), as upstream's peer-aggregated handler does.
        ///
        /// `local_id` is this server's ID: it decides where the local list sorts among the servers. A
        /// peer entry with the same ID replaces the local list (as upstream's map insertion does). With no
        /// peer, or when the peers add nothing and order everything as the local list does, the result
        /// equals `local`.
        pub fn merge_peer_discovery(
            local_id: &str,
            local: &[Value],
            peers: &[(String, Vec<Value>)],
        ) -> Vec<Value> {
            let mut by_server: BTreeMap<&str, &[Value]> = BTreeMap::new();
            by_server.insert(local_id, local);
            for (id, groups) in peers {
                by_server.insert(id.as_str(), groups.as_slice());
            }
            if by_server.len() <= 1 {
                return local.to_vec();
            }

            let local_names: Vec<&str> = local.iter().map(group_name).collect();
            let mut merged: HashMap<&str, Cow<'_, Value>> = HashMap::new();
            let mut all_names: Vec<Vec<&str>> = Vec::with_capacity(by_server.len());
            let mut content_changed = false;
            let mut names_identical = true;
            for groups in by_server.values() {
                let mut names = Vec::with_capacity(groups.len());
                for group in *groups {
                    let name = group_name(group);
                    match merged.get(name) {
                        Some(existing) => {
                            if let Some(group) = merge_group(existing, group) {
                                merged.insert(name, Cow::Owned(group));
                                content_changed = true;
                            }
                        }
                        None => {
                            merged.insert(name, Cow::Borrowed(group));
                        }
                    }
                    names.push(name);
                }
                if names != local_names {
                    names_identical = false;
                }
                all_names.push(names);
            }

            if !content_changed && names_identical {
                return local.to_vec();
            }
            let order: Vec<String> = if names_identical {
                local_names.iter().map(|s| (*s).to_owned()).collect()
            } else {
                merge_preserving_relative_order(&all_names)
            };
            ordered(merged, &order)
        }

        fn group_name(group: &Value) -> &str {
            group
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
        }

        fn str_field<'a>(value: &'a Value, field: &str) -> &'a str {
            value.get(field).and_then(Value::as_str).unwrap_or_default()
        }

        fn array<'a>(value: &'a Value, field: &str) -> &'a [Value] {
            value
                .get(field)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
        }

        /// Puts the entries named in `order` in that order, each once.
        fn ordered(mut by_name: HashMap<&str, Cow<'_, Value>>, order: &[String]) -> Vec<Value> {
            order
                .iter()
                .filter_map(|name| by_name.remove(name.as_str()))
                .map(Cow::into_owned)
                .collect()
        }

        /// A copy of the object `base` with `field` set to `value` (in place, keeping the key order),
        /// without copying the old `field`.
        fn with_field(base: &Value, field: &str, value: Value) -> Value {
            let Some(object) = base.as_object() else {
                return base.clone();
            };
            let mut value = Some(value);
            let mut out = serde_json::Map::with_capacity(object.len() + 1);
            for (k, v) in object {
                let v = match value.take_if(|_| k == field) {
                    Some(new) => new,
                    None => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            if let Some(value) = value {
                out.insert(field.to_owned(), value);
            }
            Value::Object(out)
        }

        /// The merge of one level (the versions of a group, the resources of a version): `a` with `b`'s
        /// new entries added and the entries `merge` changed; `None` when `b` changes nothing in `a`
        /// (upstream's short-circuit). Entries are named by `key`; `merge(existing, other)` returns
        /// `None` for "no change".
        fn merge_level(
            a: &Value,
            b: &Value,
            list: &str,
            key: &str,
            merge: impl Fn(&Value, &Value) -> Option<Value>,
        ) -> Option<Value> {
            let (a_items, b_items) = (array(a, list), array(b, list));
            let a_names: Vec<&str> = a_items.iter().map(|v| str_field(v, key)).collect();
            let b_names: Vec<&str> = b_items.iter().map(|v| str_field(v, key)).collect();
            let mut by_name: HashMap<&str, Cow<'_, Value>> = a_items
                .iter()
                .map(|v| (str_field(v, key), Cow::Borrowed(v)))
                .collect();
            let mut content_changed = false;
            for item in b_items {
                let name = str_field(item, key);
                match by_name.get(name) {
                    None => {
                        by_name.insert(name, Cow::Borrowed(item));
                    }
                    Some(existing) => {
                        if let Some(merged) = merge(existing, item) {
                            by_name.insert(name, Cow::Owned(merged));
                            content_changed = true;
                        }
                    }
                }
            }
            let identical = a_names == b_names;
            if !content_changed && identical {
                return None;
            }
            let order: Vec<String> = if identical {
                a_names.iter().map(|s| (*s).to_owned()).collect()
            } else {
                merge_preserving_relative_order(&[a_names, b_names])
            };
            Some(with_field(a, list, Value::Array(ordered(by_name, &order))))
        }

        /// Upstream `mergeVersionsAcrossGroup`: `None` when `b` changes nothing in `a`. Only a version
        /// whose resources changed is a content change; a new version shows as a different name list.
        fn merge_group(a: &Value, b: &Value) -> Option<Value> {
            merge_level(a, b, "versions", "version", merge_version)
        }

        /// Upstream `mergeResourcesAcrossVersion`: `None` when `b` changes nothing in `a`. A resource
        /// that differs in any way from the existing copy is a content change.
        fn merge_version(a: &Value, b: &Value) -> Option<Value> {
            merge_level(a, b, "resources", "resource", |existing, resource| {
                (existing != resource).then(|| merge_resource_capabilities(existing, resource))
            })
        }

        /// Upstream `mergeResourceCapabilities`: `a` (or `b` when `a` has no name) with the sorted union
        /// of both verb lists and the union of both subresource lists (`b` wins per name), sorted by name.
        fn merge_resource_capabilities(a: &Value, b: &Value) -> Value {
            let verbs: BTreeSet<&str> = array(a, "verbs")
                .iter()
                .chain(array(b, "verbs"))
                .filter_map(Value::as_str)
                .collect();
            let mut subresources: BTreeMap<&str, &Value> = BTreeMap::new();
            for subresource in array(a, "subresources").iter().chain(array(b, "subresources")) {
                subresources.insert(str_field(subresource, "subresource"), subresource);
            }
            let mut merged = if str_field(a, "resource").is_empty() {
                b.clone()
            } else {
                a.clone()
            };
            // Go leaves an empty union nil: `verbs` is written as null, `subresources` (omitempty) dropped.
            let verbs = if verbs.is_empty() {
                Value::Null
            } else {
                Value::Array(verbs.into_iter().map(Value::from).collect())
            };
            set(&mut merged, "verbs", verbs);
            if subresources.is_empty() {
                if let Some(object) = merged.as_object_mut() {
                    object.remove("subresources");
                }
            } else {
                let list = subresources.into_values().cloned().collect();
                set(&mut merged, "subresources", Value::Array(list));
            }
            merged
        }

        fn set(target: &mut Value, field: &str, value: Value) {
            if let Some(object) = target.as_object_mut() {
                object.insert(field.to_owned(), value);
            }
        }
    }

    /// A small deterministic generator (SplitMix64), so every run checks the same inputs.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            if n == 0 {
                0
            } else {
                (self.next() % n as u64) as usize
            }
        }

        /// True with probability `percent` / 100.
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }

        /// `count` picks from `pool`, repeats possible.
        fn picks<'a>(&mut self, pool: &[&'a str], count: usize) -> Vec<&'a str> {
            (0..count).map(|_| self.pick(pool)).collect()
        }

        fn shuffle<T>(&mut self, items: &mut [T]) {
            for i in (1..items.len()).rev() {
                items.swap(i, self.below(i + 1));
            }
        }
    }

    const VERBS: &[&str] = &["get", "list", "watch", "create", "delete", "patch"];
    const SUBRESOURCES: &[&str] = &["status", "scale", "log", ""];

    /// An object from `fields`, in their order or (sometimes) shuffled: key order shows in the output.
    fn object(rng: &mut Rng, mut fields: Vec<(&str, Value)>) -> Value {
        if rng.chance(15) {
            rng.shuffle(&mut fields);
        }
        Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    fn gen_verbs(rng: &mut Rng) -> Value {
        match rng.below(13) {
            0 => Value::Null,
            1 => json!([]),
            2 => json!(["get", 7, "list"]),
            3 => json!([7, "get", "list"]),
            _ => {
                let count = 1 + rng.below(4);
                json!(rng.picks(VERBS, count))
            }
        }
    }

    fn gen_subresource(rng: &mut Rng) -> Value {
        if rng.chance(3) {
            return json!("not-an-object");
        }
        let name = rng.pick(SUBRESOURCES);
        let verbs = gen_verbs(rng);
        let kind = json!({"group": "", "version": "", "kind": rng.pick(&["Scale", "Status"])});
        object(
            rng,
            vec![
                ("subresource", json!(name)),
                ("responseKind", kind),
                ("verbs", verbs),
            ],
        )
    }

    fn gen_resource(rng: &mut Rng, name: &str) -> Value {
        if rng.chance(2) {
            return json!(name);
        }
        let mut fields = vec![];
        match rng.below(20) {
            0 => {}
            1 => fields.push(("resource", json!(3))),
            _ => fields.push(("resource", json!(name))),
        }
        fields.push(("responseKind", json!({"group": "", "version": "", "kind": name})));
        fields.push(("scope", json!(rng.pick(&["Namespaced", "Cluster"]))));
        fields.push(("singularResource", json!(name)));
        if !rng.chance(8) {
            fields.push(("verbs", gen_verbs(rng)));
        }
        if rng.chance(40) {
            fields.push(("shortNames", json!([rng.pick(&["a", "b"])])));
        }
        match rng.below(6) {
            0 => {}
            1 => fields.push(("subresources", json!([]))),
            _ => {
                let count = rng.below(4);
                let list: Vec<Value> = (0..count).map(|_| gen_subresource(rng)).collect();
                fields.push(("subresources", Value::Array(list)));
            }
        }
        if rng.chance(20) {
            fields.push(("categories", json!(["all"])));
        }
        object(rng, fields)
    }

    fn gen_version(rng: &mut Rng, name: &str, resource_pool: &[&str]) -> Value {
        if rng.chance(2) {
            return json!(null);
        }
        let resources = match rng.below(15) {
            0 => None,
            1 => Some(json!(null)),
            _ => {
                let count = rng.below(resource_pool.len() + 2);
                let names = rng.picks(resource_pool, count);
                Some(Value::Array(
                    names.into_iter().map(|r| gen_resource(rng, r)).collect(),
                ))
            }
        };
        let mut fields = vec![("version", json!(name))];
        if let Some(resources) = resources {
            fields.push(("resources", resources));
        }
        fields.push(("freshness", json!(rng.pick(&["Current", "Stale"]))));
        object(rng, fields)
    }

    fn gen_group(rng: &mut Rng, name: &str, resource_pool: &[&str]) -> Value {
        if rng.chance(2) {
            return json!(["not", "a", "group"]);
        }
        let versions = match rng.below(15) {
            0 => None,
            1 => Some(json!("v1")),
            _ => {
                let count = rng.below(4);
                let names = rng.picks(&["v1", "v2", "v1beta1"], count);
                Some(Value::Array(
                    names
                        .into_iter()
                        .map(|v| gen_version(rng, v, resource_pool))
                        .collect(),
                ))
            }
        };
        let mut fields = vec![("metadata", json!({"name": name}))];
        if let Some(versions) = versions {
            fields.push(("versions", versions));
        }
        object(rng, fields)
    }

    /// One server's groups: of `canonical`'s, a fifth left out, two fifths shared copies (often in the
    /// canonical order), the rest freshly generated variants; with repeats and shuffles.
    fn gen_server(rng: &mut Rng, canonical: &[(&str, Value)], resource_pool: &[&str]) -> Vec<Value> {
        let mut groups: Vec<Value> = canonical
            .iter()
            .filter_map(|(name, group)| match rng.below(5) {
                0 => None,
                1 | 2 => Some(group.clone()),
                _ => Some(gen_group(rng, name, resource_pool)),
            })
            .collect();
        if rng.chance(30) {
            rng.shuffle(&mut groups);
        }
        if rng.chance(10) && !groups.is_empty() {
            let i = rng.below(groups.len());
            let copy = groups[i].clone();
            groups.insert(rng.below(groups.len() + 1), copy);
        }
        if rng.chance(5) {
            groups.push(json!({"versions": []}));
        }
        groups
    }

    fn to_json(groups: &[Value]) -> String {
        serde_json::to_string(groups).unwrap_or_default()
    }

    /// The new merge against the reference on generated inputs: divergent and equal group orders,
    /// cycles, repeated names at every level, verb and subresource unions, groups shared by many
    /// servers, key orders that differ between copies, missing and malformed fields, and peer IDs
    /// sorting before, after or equal to the local one.
    #[test]
    fn merge_matches_reference_on_generated_inputs() {
        let small_pool: &[&str] = &["pods", "jobs", "roles", "leases"];
        let large_pool: Vec<String> = (0..24).map(|i| format!("things{i}")).collect();
        let large_pool: Vec<&str> = large_pool.iter().map(String::as_str).collect();
        let (mut unchanged, mut reordered) = (0, 0);
        for seed in 0..3000 {
            let rng = &mut Rng(seed);
            let resource_pool = if rng.chance(10) {
                &large_pool[..]
            } else {
                small_pool
            };
            let group_names = rng.picks(&["apps", "batch", "rbac", "z.example", "a.example", ""], 4);
            let canonical: Vec<(&str, Value)> = group_names
                .iter()
                .map(|n| (*n, gen_group(rng, n, resource_pool)))
                .collect();
            let local_id = rng.pick(&["m", "a", "z"]);
            let local = gen_server(rng, &canonical, resource_pool);
            let peers: Vec<(String, Vec<Value>)> = (0..rng.below(5))
                .map(|_| {
                    let id = rng.pick(&["a", "b", "m", "n", "y", "z"]).to_owned();
                    (id, gen_server(rng, &canonical, resource_pool))
                })
                .collect();

            let got = merge_peer_discovery(local_id, &local, &peers);
            let want = reference::merge_peer_discovery(local_id, &local, &peers);
            assert_eq!(to_json(&got), to_json(&want), "seed {seed}");
            if got == local {
                unchanged += 1;
            } else if names(&got) != names(&local) {
                reordered += 1;
            }
        }
        // The generator reaches the short-circuit and the merging paths alike.
        assert!(
            unchanged > 300 && reordered > 300,
            "unchanged {unchanged}, reordered {reordered}"
        );
    }

    /// The bench's shapes, small: many servers sharing most groups and resources, verbs and
    /// subresources differing per server.
    #[test]
    fn merge_matches_reference_on_many_similar_servers() {
        for seed in 0..200 {
            let rng = &mut Rng(seed);
            let group = |rng: &mut Rng, name: &str| {
                let count = 1 + rng.below(2);
                let versions: Vec<Value> = rng
                    .picks(&["v1", "v2"], count)
                    .into_iter()
                    .map(|v| {
                        let resources: Vec<Value> = ["as", "bs", "cs"]
                            .iter()
                            .map(|r| {
                                let count = 1 + rng.below(3);
                                let verbs = rng.picks(VERBS, count);
                                let count = rng.below(3);
                                let subresources: Vec<Value> = rng
                                    .picks(&["status", "scale"], count)
                                    .into_iter()
                                    .map(|s| {
                                        object(
                                            rng,
                                            vec![("subresource", json!(s)), ("verbs", json!(["get"]))],
                                        )
                                    })
                                    .collect();
                                json!({"resource": r, "verbs": verbs, "subresources": subresources})
                            })
                            .collect();
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": name}, "versions": versions})
            };
            let server = |rng: &mut Rng| -> Vec<Value> {
                let start = rng.below(3);
                let mut groups: Vec<Value> =
                    (start..start + 4).map(|g| group(rng, &format!("g{g}"))).collect();
                if rng.chance(20) {
                    groups.rotate_left(1 + rng.below(3));
                }
                groups
            };
            let local = server(rng);
            let peers: Vec<(String, Vec<Value>)> =
                (0..20).map(|p| (format!("peer-{p:02}"), server(rng))).collect();
            let got = merge_peer_discovery("server-a", &local, &peers);
            let want = reference::merge_peer_discovery("server-a", &local, &peers);
            assert_eq!(to_json(&got), to_json(&want), "seed {seed}");
        }
    }

    #[test]
    fn relative_order_matches_reference_on_generated_lists() {
        let alphabet: Vec<String> = (0..40).map(|i| format!("n{:02}", (i * 7) % 40)).collect();
        let alphabet: Vec<&str> = alphabet.iter().map(String::as_str).collect();
        for seed in 0..5000 {
            let rng = &mut Rng(seed);
            // Few names: cycles and complete lists are common; many: the hashed interner.
            let pool = &alphabet[..if rng.chance(20) { 40 } else { 2 + rng.below(6) }];
            let lists: Vec<Vec<&str>> = (0..rng.below(6))
                .map(|_| {
                    let count = rng.below(pool.len() + 3);
                    let mut list = rng.picks(pool, count);
                    if rng.chance(50) {
                        // Mostly without repeats, so the orders are often consistent.
                        let mut seen = std::collections::HashSet::new();
                        list.retain(|name| seen.insert(*name));
                    }
                    list
                })
                .collect();
            assert_eq!(
                merge_preserving_relative_order(&lists),
                reference::merge_preserving_relative_order(&lists),
                "seed {seed}: {lists:?}"
            );
        }
    }

    #[test]
    fn json_eq_is_serde_equality() {
        let rng = &mut Rng(7);
        for _ in 0..2000 {
            let a = gen_resource(rng, "r");
            let b = if rng.chance(30) {
                a.clone()
            } else {
                gen_resource(rng, "r")
            };
            assert_eq!(json_eq(&a, &b), a == b, "{a} vs {b}");
            let reordered = object(
                rng,
                a.as_object().map_or(vec![], |o| {
                    o.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
                }),
            );
            if a.is_object() {
                assert!(json_eq(&a, &reordered));
                assert_eq!(
                    json_identical(&a, &reordered),
                    serde_json::to_string(&a).ok() == serde_json::to_string(&reordered).ok()
                );
            }
        }
    }
}
