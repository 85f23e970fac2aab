//! Peer-aggregated discovery (KEP-4020 beta, spec §7.1): merging this server's aggregated
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
}
