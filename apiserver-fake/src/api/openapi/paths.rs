//! The operations of a served group-version, as kube-apiserver's OpenAPI builder lists them: one path per
//! collection, object, subresource and (deprecated) watch endpoint, each operation with its
//! `operationId`, `x-kubernetes-action`, `x-kubernetes-group-version-kind` and query parameters.
//!
//! Clients read these: kubectl checks that a kind's PATCH operation lists `fieldValidation` before it
//! leaves validation to the server (`QueryParamVerifierV3`).

use crate::api::catalog::{ApiResource, ApiSubresource};

use super::definitions::Layered;

/// One HTTP operation on a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operation {
    /// `get`, `post`, `put`, `patch` or `delete`.
    pub method: &'static str,
    /// `operationId` (`listBatchV1NamespacedJob`).
    pub id: String,
    /// `x-kubernetes-action` (`list`, `post`, `get`, `put`, `patch`, `delete`, `deletecollection`,
    /// `watch`, `watchlist`).
    pub action: &'static str,
    /// `(group, version, kind)` of the object the operation is about.
    pub gvk: (String, String, String),
    /// Query parameter names, in upstream's (alphabetical) order.
    pub query: Vec<&'static str>,
    /// Definition name of the request body, if it takes one.
    pub body: Option<String>,
    /// Definition name of the success response (`None`: no schema, as for `connect`).
    pub response: Option<String>,
    /// Whether the operation is deprecated (the `/watch/` paths).
    pub deprecated: bool,
}

/// A path and its operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathItem {
    /// The path template (`/apis/batch/v1/namespaces/{namespace}/jobs/{name}`).
    pub path: String,
    /// Path parameters (`namespace`, `name`), then `pretty`, as upstream puts them on the path.
    pub path_params: Vec<&'static str>,
    /// Operations.
    pub operations: Vec<Operation>,
}

const LIST_QUERY: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_QUERY: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

/// The `/api/v1` or `/apis/<group>/<version>` prefix.
pub(crate) fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The operationId infix of a group-version (`BatchV1`, `RbacAuthorizationV1`, `CoreV1`), and its tag
/// (`batch_v1`, `rbacAuthorization_v1`, `core_v1`).
pub(crate) fn group_version_names(group: &str, version: &str) -> (String, String) {
    let group = if group.is_empty() {
        "core"
    } else {
        group.trim_end_matches(".k8s.io")
    };
    let words: Vec<String> = group.split(['.', '-']).map(capitalize).collect();
    let camel = words.concat();
    let mut tag = camel.clone();
    if let Some(first) = tag.get(..1) {
        tag.replace_range(..1, &first.to_ascii_lowercase());
    }
    (
        format!("{camel}{}", capitalize(version)),
        format!("{tag}_{version}"),
    )
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// Every path of the resources of one group-version, sorted by path.
pub(crate) fn group_version_paths(
    definitions: &Layered<'_>,
    group: &str,
    version: &str,
    resources: &[ApiResource],
) -> Vec<PathItem> {
    let (infix, _) = group_version_names(group, version);
    let base = prefix(group, version);
    let mut items = Vec::new();
    for resource in resources {
        let paths = ResourcePaths::new(definitions, group, version, resource, &infix, &base);
        items.extend(paths.collection());
        items.extend(paths.object());
        items.extend(paths.all_namespaces());
        items.extend(paths.watches());
        for sub in &resource.subresources {
            if let Some(item) = subresource_path(
                definitions,
                group,
                version,
                resource,
                sub,
                &paths.object,
                &paths.object_params,
            ) {
                items.push(item);
            }
        }
    }
    items.sort_by(|a, b| a.path.cmp(&b.path));
    items
}

/// What the paths of one resource are made of: its names in operation ids, its definitions and the
/// templates of its collection and object paths.
struct ResourcePaths<'a> {
    resource: &'a ApiResource,
    /// The group-version's operationId infix (`BatchV1`).
    infix: &'a str,
    /// `/api/v1` or `/apis/<group>/<version>`.
    base: &'a str,
    /// `Namespaced` for a namespaced resource, else empty (as in `listBatchV1NamespacedJob`).
    scope: &'static str,
    gvk: (String, String, String),
    kind_name: Option<String>,
    list_name: Option<String>,
    collection: String,
    object: String,
    collection_params: Vec<&'static str>,
    object_params: Vec<&'static str>,
}

impl<'a> ResourcePaths<'a> {
    fn new(
        definitions: &Layered<'_>,
        group: &str,
        version: &str,
        resource: &'a ApiResource,
        infix: &'a str,
        base: &'a str,
    ) -> Self {
        let kind_name = definitions
            .kind(group, version, &resource.kind)
            .map(str::to_owned);
        let list_name = definitions
            .kind(group, version, &format!("{}List", resource.kind))
            .map(str::to_owned);
        let (collection, object, collection_params, object_params) = if resource.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", resource.name),
                format!("{base}/namespaces/{{namespace}}/{}/{{name}}", resource.name),
                vec!["namespace", "pretty"],
                vec!["name", "namespace", "pretty"],
            )
        } else {
            (
                format!("{base}/{}", resource.name),
                format!("{base}/{}/{{name}}", resource.name),
                vec!["pretty"],
                vec!["name", "pretty"],
            )
        };
        Self {
            resource,
            infix,
            base,
            scope: if resource.namespaced { "Namespaced" } else { "" },
            gvk: (group.to_owned(), version.to_owned(), resource.kind.clone()),
            kind_name,
            list_name,
            collection,
            object,
            collection_params,
            object_params,
        }
    }

    fn verb(&self, verb: &str) -> bool {
        self.resource.verbs.iter().any(|x| x == verb)
    }

    /// Upstream's operationId, `{verb}{infix}{scope}{kind}{suffix}` (`listBatchV1NamespacedJob`).
    fn id(&self, verb: &str, scope: &str, suffix: &str) -> String {
        format!("{verb}{}{scope}{}{suffix}", self.infix, self.resource.kind)
    }

    fn op(
        &self,
        method: &'static str,
        id: String,
        action: &'static str,
        query: &[&'static str],
        body: Option<&str>,
        response: Option<&str>,
    ) -> Operation {
        Operation {
            method,
            id,
            action,
            gvk: self.gvk.clone(),
            query: query.to_vec(),
            body: body.map(str::to_owned),
            response: response.map(str::to_owned),
            deprecated: false,
        }
    }

    /// The collection's path: list, create, deletecollection (if any of them is a verb).
    fn collection(&self) -> Option<PathItem> {
        let (scope, kind_name) = (self.scope, self.kind_name.as_deref());
        let mut operations = Vec::new();
        if self.verb("list") {
            let id = self.id("list", scope, "");
            operations.push(self.op("get", id, "list", LIST_QUERY, None, self.list_name.as_deref()));
        }
        if self.verb("create") {
            let id = self.id("create", scope, "");
            operations.push(self.op("post", id, "post", WRITE_QUERY, kind_name, kind_name));
        }
        if self.verb("deletecollection") {
            let mut query: Vec<&'static str> = DELETE_QUERY.iter().chain(LIST_QUERY).copied().collect();
            query.sort_unstable();
            query.dedup();
            let id = self.id("delete", &format!("Collection{scope}"), "");
            operations.push(self.op(
                "delete",
                id,
                "deletecollection",
                &query,
                Some(DELETE_OPTIONS),
                Some(STATUS),
            ));
        }
        (!operations.is_empty()).then(|| PathItem {
            path: self.collection.clone(),
            path_params: self.collection_params.clone(),
            operations,
        })
    }

    /// The object's path: get, update, patch, delete (if any of them is a verb).
    fn object(&self) -> Option<PathItem> {
        let (scope, kind_name) = (self.scope, self.kind_name.as_deref());
        let mut operations = Vec::new();
        if self.verb("get") {
            operations.push(self.op("get", self.id("read", scope, ""), "get", &[], None, kind_name));
        }
        if self.verb("update") {
            let id = self.id("replace", scope, "");
            operations.push(self.op("put", id, "put", WRITE_QUERY, kind_name, kind_name));
        }
        if self.verb("patch") {
            let id = self.id("patch", scope, "");
            operations.push(self.op("patch", id, "patch", PATCH_QUERY, Some(PATCH), kind_name));
        }
        if self.verb("delete") {
            let id = self.id("delete", scope, "");
            operations.push(self.op(
                "delete",
                id,
                "delete",
                DELETE_QUERY,
                Some(DELETE_OPTIONS),
                Some(STATUS),
            ));
        }
        (!operations.is_empty()).then(|| PathItem {
            path: self.object.clone(),
            path_params: self.object_params.clone(),
            operations,
        })
    }

    /// A namespaced resource's list across namespaces.
    fn all_namespaces(&self) -> Option<PathItem> {
        (self.verb("list") && self.resource.namespaced).then(|| PathItem {
            path: format!("{}/{}", self.base, self.resource.name),
            path_params: vec!["pretty"],
            operations: vec![self.op(
                "get",
                self.id("list", "", "ForAllNamespaces"),
                "list",
                LIST_QUERY,
                None,
                self.list_name.as_deref(),
            )],
        })
    }

    /// The deprecated `/watch/` paths, if watch is a verb.
    fn watches(&self) -> Vec<PathItem> {
        if !self.verb("watch") {
            return Vec::new();
        }
        let watch = |path: String, params: Vec<&'static str>, id: String, action| PathItem {
            path,
            path_params: params,
            operations: vec![Operation {
                deprecated: true,
                ..self.op("get", id, action, LIST_QUERY, None, Some(WATCH_EVENT))
            }],
        };
        let watch_base = format!("{}/watch", self.base);
        let name = &self.resource.name;
        if self.resource.namespaced {
            vec![
                watch(
                    format!("{watch_base}/namespaces/{{namespace}}/{name}"),
                    vec!["namespace", "pretty"],
                    self.id("watch", "Namespaced", "List"),
                    "watchlist",
                ),
                watch(
                    format!("{watch_base}/namespaces/{{namespace}}/{name}/{{name}}"),
                    vec!["name", "namespace", "pretty"],
                    self.id("watch", "Namespaced", ""),
                    "watch",
                ),
                watch(
                    format!("{watch_base}/{name}"),
                    vec!["pretty"],
                    self.id("watch", "", "ListForAllNamespaces"),
                    "watchlist",
                ),
            ]
        } else {
            vec![
                watch(
                    format!("{watch_base}/{name}"),
                    vec!["pretty"],
                    self.id("watch", "", "List"),
                    "watchlist",
                ),
                watch(
                    format!("{watch_base}/{name}/{{name}}"),
                    vec!["name", "pretty"],
                    self.id("watch", "", ""),
                    "watch",
                ),
            ]
        }
    }
}

fn subresource_path(
    definitions: &Layered<'_>,
    group: &str,
    version: &str,
    resource: &ApiResource,
    sub: &ApiSubresource,
    object: &str,
    object_params: &[&'static str],
) -> Option<PathItem> {
    let (infix, _) = group_version_names(group, version);
    let scope = if resource.namespaced { "Namespaced" } else { "" };
    let response_group = sub.response_group.as_deref().unwrap_or(group);
    let response_version = sub.response_version.as_deref().unwrap_or(version);
    let schema = definitions
        .kind(response_group, response_version, &sub.kind)
        .map(str::to_owned);
    let suffix = capitalize(&sub.name);
    let gvk = (
        response_group.to_owned(),
        response_version.to_owned(),
        sub.kind.clone(),
    );
    let kind = &resource.kind;
    let verb = |v: &str| sub.verbs.iter().any(|x| x == v);
    let op = |method, id: String, action, query: &[&'static str], body: Option<String>| Operation {
        method,
        id,
        action,
        gvk: gvk.clone(),
        query: query.to_vec(),
        body,
        response: schema.clone(),
        deprecated: false,
    };
    let mut operations = Vec::new();
    if verb("get") {
        operations.push(op(
            "get",
            format!("read{infix}{scope}{kind}{suffix}"),
            "get",
            &[],
            None,
        ));
    }
    if verb("create") {
        operations.push(op(
            "post",
            format!("create{infix}{scope}{kind}{suffix}"),
            "post",
            WRITE_QUERY,
            schema.clone(),
        ));
    }
    if verb("update") {
        operations.push(op(
            "put",
            format!("replace{infix}{scope}{kind}{suffix}"),
            "put",
            WRITE_QUERY,
            schema.clone(),
        ));
    }
    if verb("patch") {
        operations.push(op(
            "patch",
            format!("patch{infix}{scope}{kind}{suffix}"),
            "patch",
            PATCH_QUERY,
            Some(PATCH.to_owned()),
        ));
    }
    (!operations.is_empty()).then(|| PathItem {
        path: format!("{object}/{}", sub.name),
        path_params: object_params.to_vec(),
        operations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;

    #[test]
    fn names_follow_upstream_operation_ids() {
        assert_eq!(group_version_names("", "v1"), ("CoreV1".into(), "core_v1".into()));
        assert_eq!(
            group_version_names("batch", "v1"),
            ("BatchV1".into(), "batch_v1".into())
        );
        assert_eq!(
            group_version_names("rbac.authorization.k8s.io", "v1"),
            ("RbacAuthorizationV1".into(), "rbacAuthorization_v1".into())
        );
        assert_eq!(
            group_version_names("flowcontrol.apiserver.k8s.io", "v1beta3"),
            (
                "FlowcontrolApiserverV1beta3".into(),
                "flowcontrolApiserver_v1beta3".into()
            )
        );
    }

    #[test]
    fn jobs_have_upstreams_paths_and_patch_lists_field_validation() {
        let version = KubeVersion { major: 1, minor: 36 };
        let served =
            crate::api::catalog::ServedApis::builtin(version, &Default::default(), &Default::default())
                .unwrap();
        let batch = served.group_version("batch", "v1").unwrap();
        let custom = crate::api::openapi::custom::CustomDefinitions::default();
        let definitions = Layered {
            builtin: crate::api::openapi::definitions::Definitions::of(version),
            custom: &custom,
        };
        let paths = group_version_paths(&definitions, "batch", "v1", &batch.resources);
        let names: Vec<&str> = paths
            .iter()
            .map(|p| p.path.as_str())
            .filter(|p| p.contains("/jobs"))
            .collect();
        assert_eq!(
            names,
            [
                "/apis/batch/v1/jobs",
                "/apis/batch/v1/namespaces/{namespace}/jobs",
                "/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
                "/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status",
                "/apis/batch/v1/watch/jobs",
                "/apis/batch/v1/watch/namespaces/{namespace}/jobs",
                "/apis/batch/v1/watch/namespaces/{namespace}/jobs/{name}",
            ]
        );
        let object = paths.iter().find(|p| p.path.ends_with("/jobs/{name}")).unwrap();
        let patch = object.operations.iter().find(|o| o.method == "patch").unwrap();
        assert_eq!(patch.id, "patchBatchV1NamespacedJob");
        assert!(patch.query.contains(&"fieldValidation"));
        assert_eq!(patch.gvk, ("batch".into(), "v1".into(), "Job".into()));
        assert_eq!(patch.response.as_deref(), Some("io.k8s.api.batch.v1.Job"));
        let list = paths
            .iter()
            .find(|p| p.path.ends_with("/namespaces/{namespace}/jobs"))
            .unwrap();
        assert_eq!(
            list.operations[0].response.as_deref(),
            Some("io.k8s.api.batch.v1.JobList")
        );
    }
}
