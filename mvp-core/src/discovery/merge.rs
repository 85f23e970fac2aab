//! Peer-aggregated discovery (KEP-4020 beta, docs/mvp-behaviour.md §7.1): merging this server's aggregated
//! `/apis` groups with its peers' into the one list a client sees by default.
//!
//! A port of upstream's `peerAggregatedDiscoveryHandler.mergeResources`
//! (`apiserver/pkg/endpoints/discovery/aggregated/peer_aggregated_handler.go`, 1.36) and of
//! `MergePreservingRelativeOrder` (`apimachinery/pkg/util/sort`), over the typed
//! [`APIGroupDiscovery`] objects, no I/O:
//!
//! - servers (this one included) are processed in lexicographic server-ID order; the first copy
//!   of a group, version or resource seen is kept and later copies are merged into it;
//! - a resource present on several servers with different content gets the union of the verbs
//!   (sorted) and of the subresources (later copy wins per name, sorted by name); its other
//!   fields, the version's `freshness` and the group's metadata come from the first copy;
//! - groups, versions and resources are ordered by the local order when no server changed it,
//!   else by [`merge_preserving_relative_order`].
//!
//! Written for clarity rather than speed: it runs only when the local document or a peer's changes,
//! and its result is served from the handler's cache.
//!
//! ```
//! use mvp_core::apidiscovery::{APIGroupDiscovery, APIVersionDiscovery, GroupMetadata};
//! use mvp_core::merge_peer_discovery;
//!
//! let group = |name: &str| APIGroupDiscovery {
//!     metadata: GroupMetadata { name: name.to_owned(), ..Default::default() },
//!     versions: vec![APIVersionDiscovery { version: "v1".to_owned(), ..Default::default() }],
//! };
//! let local = vec![group("apps"), group("rbac.authorization.k8s.io")];
//! let peers = vec![("peer-b".to_owned(), vec![group("apps"), group("batch")])];
//! let merged = merge_peer_discovery("server-a", &local, &peers);
//! let names: Vec<&str> = merged.iter().map(APIGroupDiscovery::name).collect();
//! // apps precedes both others somewhere; batch and rbac are unordered: lexicographic tie-break.
//! assert_eq!(names, ["apps", "batch", "rbac.authorization.k8s.io"]);
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::apidiscovery::{APIGroupDiscovery, APIResourceDiscovery, APIVersionDiscovery};

/// Merges several orderings of names into one that keeps every "a before b" relation of every
/// input list (upstream `MergePreservingRelativeOrder`).
///
/// - If an input list already holds every distinct name exactly once, the first such list is
///   returned as is.
/// - Otherwise a topological sort (Kahn's algorithm) of the precedence edges runs, taking the
///   lexicographically smallest available name at each step.
/// - If the relations contradict each other (a cycle, also a name repeated next to itself), all
///   names sorted lexicographically.
#[cfg(test)]
pub(crate) fn merge_preserving_relative_order<S: AsRef<str>>(lists: &[Vec<S>]) -> Vec<String> {
    let lists: Vec<Vec<&str>> = lists
        .iter()
        .map(|list| list.iter().map(AsRef::as_ref).collect())
        .collect();
    relative_order(&lists).into_iter().map(str::to_owned).collect()
}

/// [`merge_preserving_relative_order`] over borrowed names.
fn relative_order<'a>(lists: &[Vec<&'a str>]) -> Vec<&'a str> {
    // Every name with its distinct direct successors, in lexicographic order of names.
    let mut successors: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for list in lists {
        for name in list {
            successors.entry(name).or_default();
        }
        for pair in list.windows(2) {
            successors.entry(pair[0]).or_default().insert(pair[1]);
        }
    }
    let complete = lists.iter().find(|list| {
        list.len() == successors.len() && list.iter().collect::<BTreeSet<_>>().len() == list.len()
    });
    if let Some(list) = complete {
        return list.clone();
    }

    let mut in_degree: BTreeMap<&str, usize> = successors.keys().map(|name| (*name, 0)).collect();
    for next in successors.values().flatten() {
        *in_degree.entry(next).or_default() += 1;
    }
    let mut ready: BTreeSet<&str> = in_degree
        .iter()
        .filter(|(_, degree)| **degree == 0)
        .map(|(name, _)| *name)
        .collect();
    let mut sorted = Vec::with_capacity(successors.len());
    while let Some(current) = ready.pop_first() {
        sorted.push(current);
        for next in successors.get(current).into_iter().flatten() {
            if let Some(degree) = in_degree.get_mut(next) {
                *degree -= 1;
                if *degree == 0 {
                    ready.insert(next);
                }
            }
        }
    }
    if sorted.len() != successors.len() {
        // A cycle: upstream falls back to plain lexicographic order.
        return successors.into_keys().collect();
    }
    sorted
}

/// Merges this server's aggregated `/apis` groups (`local`, the `items` of its
/// `APIGroupDiscoveryList`) with each peer's groups (`peers`: peer server ID → its groups, core
/// group excluded), as upstream's peer-aggregated handler does (see the module docs).
///
/// `local_id` is this server's ID: it decides where the local list sorts among the servers. A
/// peer entry with the same ID replaces the local list (as upstream's map insertion does). With no
/// peer, or when the peers add nothing and order everything as the local list does, the result
/// equals `local`.
pub fn merge_peer_discovery(
    local_id: &str,
    local: &[APIGroupDiscovery],
    peers: &[(String, Vec<APIGroupDiscovery>)],
) -> Vec<APIGroupDiscovery> {
    let mut by_server: BTreeMap<&str, &[APIGroupDiscovery]> = BTreeMap::new();
    by_server.insert(local_id, local);
    for (id, groups) in peers {
        by_server.insert(id, groups);
    }
    if by_server.len() <= 1 {
        return local.to_vec();
    }

    // The first copy of each group, merged with the later ones; indexed by name.
    let mut merged: Vec<APIGroupDiscovery> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut changed = false;
    for group in by_server.values().copied().flatten() {
        match index.get(group.name()) {
            Some(&i) => changed |= merge_group(&mut merged[i], group),
            None => {
                index.insert(group.name(), merged.len());
                merged.push(group.clone());
            }
        }
    }

    let lists: Vec<Vec<&str>> = by_server
        .values()
        .map(|groups| names(groups, APIGroupDiscovery::name))
        .collect();
    let local_names = names(local, APIGroupDiscovery::name);
    let identical = lists.iter().all(|list| *list == local_names);
    if identical && !changed {
        return local.to_vec();
    }
    let order = if identical {
        local_names
    } else {
        relative_order(&lists)
    };
    let mut merged: Vec<Option<APIGroupDiscovery>> = merged.into_iter().map(Some).collect();
    order
        .iter()
        .filter_map(|name| merged[*index.get(name)?].take())
        .collect()
}

fn names<T>(items: &[T], name: fn(&T) -> &str) -> Vec<&str> {
    items.iter().map(name).collect()
}

/// Upstream `mergeVersionsAcrossGroup`, in place: whether `b` changed `a` (whether upstream builds
/// a new object). Only a version whose resources changed is a content change; a new version shows
/// as a different name list.
fn merge_group(a: &mut APIGroupDiscovery, b: &APIGroupDiscovery) -> bool {
    merge_level(&mut a.versions, &b.versions, |v| &v.version, merge_version)
}

/// Upstream `mergeResourcesAcrossVersion`, in place: whether `b` changed `a`. A resource that
/// differs in any way from the existing copy is a content change.
fn merge_version(a: &mut APIVersionDiscovery, b: &APIVersionDiscovery) -> bool {
    merge_level(
        &mut a.resources,
        &b.resources,
        |r| &r.resource,
        |existing, resource| {
            let changed = existing != resource;
            if changed {
                merge_resource_capabilities(existing, resource);
            }
            changed
        },
    )
}

/// Merges one level (the versions of a group, the resources of a version) of `b` into `a`, in
/// place, as upstream does: each of `b`'s entries is merged with `merge` into `a`'s entry of its
/// name (a name listed twice in `a`: the last entry) or added. Returns whether the level changed:
/// an entry changed or the name lists differ. Its order is then `a`'s names (each once) when both
/// lists name the same entries in the same order, else the relative-order merge of both lists.
/// `false` means `a` was not touched.
fn merge_level<T: Clone>(
    a: &mut Vec<T>,
    b: &[T],
    name: fn(&T) -> &str,
    merge: impl Fn(&mut T, &T) -> bool,
) -> bool {
    let a_len = a.len();
    let mut changed = false;
    for item in b {
        match a.iter().rposition(|existing| name(existing) == name(item)) {
            Some(i) => changed |= merge(&mut a[i], item),
            None => a.push(item.clone()),
        }
    }
    let a_names = names(&a[..a_len], name);
    let b_names = names(b, name);
    let identical = a_names == b_names;
    if identical && !changed {
        return false;
    }
    // Each name once, taking the last entry of that name (the one merges went into).
    let order: Vec<usize> = if identical {
        a_names
    } else {
        relative_order(&[a_names, b_names])
    }
    .iter()
    .filter_map(|wanted| a.iter().rposition(|entry| name(entry) == *wanted))
    .collect();
    if !order.iter().copied().eq(0..a.len()) {
        let mut entries: Vec<Option<T>> = std::mem::take(a).into_iter().map(Some).collect();
        *a = order.iter().filter_map(|&i| entries[i].take()).collect();
    }
    true
}

/// Upstream `mergeResourceCapabilities`, in place: `a` (or `b` when `a` has no name) with the
/// sorted union of both verb lists and the union of both subresource lists (`b` wins per name),
/// sorted by name.
fn merge_resource_capabilities(a: &mut APIResourceDiscovery, b: &APIResourceDiscovery) {
    for verb in &b.verbs {
        if !a.verbs.contains(verb) {
            a.verbs.push(verb.clone());
        }
    }
    a.verbs.sort_unstable();
    a.verbs.dedup();

    for subresource in &b.subresources {
        match a
            .subresources
            .iter()
            .rposition(|s| s.subresource == subresource.subresource)
        {
            Some(i) if a.subresources[i] == *subresource => {}
            Some(i) => a.subresources[i] = subresource.clone(),
            None => a.subresources.push(subresource.clone()),
        }
    }
    // Stable: of several entries of one name, the last one (the latest merged) is kept.
    a.subresources.sort_by(|x, y| x.subresource.cmp(&y.subresource));
    a.subresources.dedup_by(|later, kept| {
        let same = later.subresource == kept.subresource;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });

    if a.resource.is_empty() {
        let verbs = std::mem::take(&mut a.verbs);
        let subresources = std::mem::take(&mut a.subresources);
        *a = APIResourceDiscovery {
            verbs,
            subresources,
            ..b.clone()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

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

    /// JSON into a typed struct, as peers' documents are read.
    fn decode<T: DeserializeOwned>(value: Value) -> T {
        serde_json::from_value(value).unwrap()
    }

    fn resource(name: &str, verbs: &[&str]) -> Value {
        json!({"resource": name, "responseKind": {"group": "", "version": "", "kind": name},
               "scope": "Namespaced", "singularResource": name, "verbs": verbs})
    }

    fn version(name: &str, resources: Vec<Value>) -> Value {
        json!({"version": name, "resources": resources, "freshness": "Current"})
    }

    fn group(name: &str, versions: Vec<Value>) -> APIGroupDiscovery {
        decode(json!({"metadata": {"name": name}, "versions": versions}))
    }

    fn names(groups: &[APIGroupDiscovery]) -> Vec<&str> {
        groups.iter().map(APIGroupDiscovery::name).collect()
    }

    fn peers(list: &[(&str, Vec<APIGroupDiscovery>)]) -> Vec<(String, Vec<APIGroupDiscovery>)> {
        list.iter().map(|(id, g)| ((*id).to_owned(), g.clone())).collect()
    }

    /// The first resource of the first version of `group`.
    fn first_resource(group: &APIGroupDiscovery) -> &APIResourceDiscovery {
        &group.versions[0].resources[0]
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
        let versions: Vec<&str> = apps.versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(versions, ["v2", "v1"], "b's v2 before v1 is the only relation");
        let v1: Vec<&str> = apps.versions[1]
            .resources
            .iter()
            .map(|r| r.resource.as_str())
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
        let pods = first_resource(&merged[0]);
        assert_eq!(pods.verbs, ["create", "get", "list", "watch"]);
        let subresources: Vec<(&str, &[String])> = pods
            .subresources
            .iter()
            .map(|s| (s.subresource.as_str(), s.verbs.as_slice()))
            .collect();
        assert_eq!(
            subresources,
            [
                ("log", &["get".to_owned()][..]),
                ("status", &["get".to_owned(), "patch".to_owned()][..])
            ]
        );
        assert_eq!(pods.short_names, ["po"]);
        // Local "c" sorts after peer "b": b's copy is first, so its other fields win.
        let merged = merge_peer_discovery("c", &local, &peers(&[("b", peer)]));
        let pods = first_resource(&merged[0]);
        assert_eq!(pods.short_names, ["p"]);
        assert_eq!(pods.verbs, ["create", "get", "list", "watch"]);
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
        assert_eq!(first_resource(&merged[0]).verbs, ["get", "list"]);
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
        assert_eq!(first_resource(&forward[2]).verbs, ["get", "list", "watch"]);
    }

    /// Go leaves an empty union nil; the typed structs hold it as an empty list (the verbs then
    /// written `[]`, the subresources omitted), as the fake wrote the JSON merge's `null`.
    #[test]
    fn empty_verb_union_is_empty_and_empty_subresources_are_dropped() {
        let mut a: APIResourceDiscovery = decode(resource("r", &[]));
        a.subresources = vec![];
        let mut b: APIResourceDiscovery = decode(resource("r", &[]));
        b.singular_resource = "other".to_owned();
        merge_resource_capabilities(&mut a, &b);
        assert!(a.verbs.is_empty());
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["verbs"], json!([]));
        assert!(json.get("subresources").is_none());
        assert_eq!(a.singular_resource, "r");
    }

    /// A group listed twice by every server, its two copies differing: the second copy changes the
    /// first, which counts as a change, so the repeated group collapses into one merged entry.
    #[test]
    fn a_repeated_group_whose_copies_differ_collapses_into_one() {
        let first = group("g", vec![version("", vec![resource("r", &["get"])])]);
        let second = group("g", vec![version("", vec![resource("r", &["list"])])]);
        let local = vec![first, second];
        let peer = peers(&[("b", local.clone())]);
        let merged = merge_peer_discovery("a", &local, &peer);
        assert_eq!(names(&merged), ["g"]);
        assert_eq!(first_resource(&merged[0]).verbs, ["get", "list"]);
        assert_eq!(merged, reference_merge("a", &local, &peer));
    }

    /// The JSON (`serde_json::Value`) implementation this module had before it became typed, kept
    /// verbatim as the oracle for the property tests below: the typed merge must give what it gave
    /// once its output is decoded into the typed structs (what apiserver-fake did with it).
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
        pub(super) fn merge_preserving_relative_order<S: AsRef<str>>(lists: &[Vec<S>]) -> Vec<String> {
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
        pub(super) fn merge_peer_discovery(
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
            2 => json!(["list", "get", "list"]),
            _ => {
                let count = 1 + rng.below(4);
                json!(rng.picks(VERBS, count))
            }
        }
    }

    fn gen_subresource(rng: &mut Rng) -> Value {
        let name = rng.pick(SUBRESOURCES);
        let verbs = gen_verbs(rng);
        let kind = json!({"group": "", "version": "", "kind": rng.pick(&["Scale", "Status"])});
        let mut fields = vec![("subresource", json!(name))];
        match rng.below(10) {
            0 => {}
            1 => fields.push(("responseKind", json!(null))),
            _ => fields.push(("responseKind", kind)),
        }
        match rng.below(8) {
            0 => fields.push(("acceptedTypes", json!([]))),
            1 => fields.push((
                "acceptedTypes",
                json!([{"group": "autoscaling", "version": rng.pick(&["v1", "v2"]), "kind": "Scale"}]),
            )),
            _ => {}
        }
        fields.push(("verbs", verbs));
        object(rng, fields)
    }

    fn gen_resource(rng: &mut Rng, name: &str) -> Value {
        let mut fields = vec![];
        match rng.below(20) {
            0 => {}
            1 => fields.push(("resource", json!(null))),
            _ => fields.push(("resource", json!(name))),
        }
        match rng.below(20) {
            0 => {}
            1 => fields.push(("responseKind", json!(null))),
            _ => fields.push(("responseKind", json!({"group": "", "version": "", "kind": name}))),
        }
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
        let versions = match rng.below(15) {
            0 => None,
            1 => Some(json!(null)),
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

    fn to_json(groups: &[APIGroupDiscovery]) -> String {
        serde_json::to_string(groups).unwrap_or_default()
    }

    /// The groups as the peer discovery cache holds them: decoded into the typed structs.
    fn typed(groups: &[Value]) -> Vec<APIGroupDiscovery> {
        groups.iter().map(|group| decode(group.clone())).collect()
    }

    /// The reference merge of the same (typed) input, its output decoded.
    fn reference_merge(
        local_id: &str,
        local: &[APIGroupDiscovery],
        peers: &[(String, Vec<APIGroupDiscovery>)],
    ) -> Vec<APIGroupDiscovery> {
        let json = |groups: &[APIGroupDiscovery]| -> Vec<Value> {
            groups.iter().map(|g| serde_json::to_value(g).unwrap()).collect()
        };
        let peers: Vec<(String, Vec<Value>)> = peers.iter().map(|(id, g)| (id.clone(), json(g))).collect();
        typed(&reference::merge_peer_discovery(local_id, &json(local), &peers))
    }

    /// The new merge against the reference on generated inputs: divergent and equal group orders,
    /// cycles, repeated names at every level, verb and subresource unions, groups shared by many
    /// servers, missing and null fields, and peer IDs sorting before, after or equal to the local one.
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
            let local = typed(&gen_server(rng, &canonical, resource_pool));
            let peers: Vec<(String, Vec<APIGroupDiscovery>)> = (0..rng.below(5))
                .map(|_| {
                    let id = rng.pick(&["a", "b", "m", "n", "y", "z"]).to_owned();
                    (id, typed(&gen_server(rng, &canonical, resource_pool)))
                })
                .collect();

            let got = merge_peer_discovery(local_id, &local, &peers);
            let want = reference_merge(local_id, &local, &peers);
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
            let local = typed(&server(rng));
            let peers: Vec<(String, Vec<APIGroupDiscovery>)> = (0..20)
                .map(|p| (format!("peer-{p:02}"), typed(&server(rng))))
                .collect();
            let got = merge_peer_discovery("server-a", &local, &peers);
            let want = reference_merge("server-a", &local, &peers);
            assert_eq!(to_json(&got), to_json(&want), "seed {seed}");
        }
    }

    #[test]
    fn relative_order_matches_reference_on_generated_lists() {
        let alphabet: Vec<String> = (0..40).map(|i| format!("n{:02}", (i * 7) % 40)).collect();
        let alphabet: Vec<&str> = alphabet.iter().map(String::as_str).collect();
        for seed in 0..5000 {
            let rng = &mut Rng(seed);
            // Few names: cycles and complete lists are common; many: long lists.
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

    /// The merge's "a resource differs" is equality of the typed structs: it must be equality of
    /// their JSON (what the reference compares), whatever the input's key order.
    #[test]
    fn typed_equality_is_json_equality() {
        let rng = &mut Rng(7);
        for _ in 0..2000 {
            let a = gen_resource(rng, "r");
            let b = if rng.chance(30) {
                a.clone()
            } else {
                gen_resource(rng, "r")
            };
            let (ta, tb): (APIResourceDiscovery, APIResourceDiscovery) = (decode(a.clone()), decode(b));
            let json = |r: &APIResourceDiscovery| serde_json::to_value(r).unwrap();
            assert_eq!(ta == tb, json(&ta) == json(&tb), "{a}");
            let reordered = object(
                rng,
                a.as_object().map_or(vec![], |o| {
                    o.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
                }),
            );
            let tr: APIResourceDiscovery = decode(reordered);
            assert_eq!(ta, tr);
        }
    }
}
