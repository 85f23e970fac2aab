//! `RequestInfo`: what kube-apiserver's `RequestInfoFactory` derives from a request line.
//!
//! A faithful port of `staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`
//! with the API prefixes `api` and `apis` (groupless prefix `api`), including the newer
//! upstream behaviour of lifting an exact `metadata.name` field selector into
//! [`RequestInfo::name`] for list and watch. The MVP filter only needs
//! [`RequestInfo::is_resource_request`] and the GVR, but the whole structure is reproduced so
//! that the fake apiserver can use it for authorization and routing too.
//!
//! Known simplification: upstream decodes the complete `ListOptions`, and *any* decoding
//! error (a malformed `labelSelector`, a non-integer `limit`/`timeoutSeconds`, a malformed
//! `fieldSelector`) makes it skip the name lifting. Here `fieldSelector`, `limit` and
//! `timeoutSeconds` are checked; label selectors are not parsed.

use std::borrow::Cow;

use crate::gvr::GroupVersionResource;

/// Path prefixes that mark an API request (upstream `APIPrefixes`).
const API_PREFIXES: [&str; 2] = ["api", "apis"];
/// The prefix whose paths carry no group segment (upstream `GrouplessAPIPrefixes`).
const GROUPLESS_API_PREFIX: &str = "api";
/// Verbs that may appear as a path segment right after the version.
const SPECIAL_VERBS: [&str; 2] = ["proxy", "watch"];
/// Special verbs whose paths have no subresource.
const SPECIAL_VERBS_NO_SUBRESOURCES: [&str; 1] = ["proxy"];
/// Subresources of a namespace, which are not namespaced resources in their own right.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// Errors from [`RequestInfo::from_parts`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestInfoError {
    /// A special-verb path (`/api/v1/watch`, `/apis/g/v/proxy`) with nothing after the verb.
    /// The message is upstream's, with the request URL (path and query) appended.
    #[error("unable to determine kind and namespace from url, {url}")]
    UnableToDetermineKindAndNamespace {
        /// The request URL as upstream prints it (`url.URL.String()` of a server request).
        url: String,
    },
}

/// Information parsed from an HTTP request, as upstream's `request.RequestInfo`.
///
/// A non-resource request has `is_resource_request == false`, `path` and the lowercased
/// HTTP method as `verb`; every other field is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the request is for an API resource or subresource.
    pub is_resource_request: bool,
    /// The (percent-decoded) URL path of the request.
    pub path: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `proxy`, or `""` for unknown methods); for non-resource requests
    /// the lowercased HTTP method.
    pub verb: String,
    /// `api` or `apis` for resource requests.
    pub api_prefix: String,
    /// The API group, `""` for the core group.
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The namespace, `""` for cluster-scoped or all-namespaces requests.
    pub namespace: String,
    /// The resource (plural name, e.g. `pods`).
    pub resource: String,
    /// The subresource (e.g. `status`), `""` if none.
    pub subresource: String,
    /// The object name, `""` for collection requests (unless lifted from a
    /// `metadata.name=` field selector on list/watch).
    pub name: String,
    /// Path parts from the resource on: `resource/name/subresource/...`.
    pub parts: Vec<String>,
}

impl RequestInfo {
    /// Whether the request is long-running (kube-apiserver's `BasicLongRunningRequestCheck` with
    /// its verbs `watch`, `proxy` and subresources `attach`, `exec`, `proxy`, `log`,
    /// `portforward`): such requests are exempt from the request timeout and may stay open for
    /// hours.
    pub fn is_long_running(&self) -> bool {
        matches!(self.verb.as_str(), "watch" | "proxy")
            || (self.is_resource_request
                && matches!(
                    self.subresource.as_str(),
                    "attach" | "exec" | "proxy" | "log" | "portforward"
                ))
    }

    /// Derives the RequestInfo of a request from its method and URI.
    ///
    /// Mirrors `RequestInfoFactory.NewRequestInfo`; the only error is upstream's
    /// "unable to determine kind and namespace from url" for a bare special verb.
    pub fn from_parts(method: &http::Method, uri: &http::Uri) -> Result<RequestInfo, RequestInfoError> {
        let path = percent_encoding::percent_decode_str(uri.path())
            .decode_utf8_lossy()
            .into_owned();
        let mut info = RequestInfo {
            path,
            verb: method.as_str().to_ascii_lowercase(),
            ..RequestInfo::default()
        };

        let trimmed = info.path.trim_matches('/');
        if trimmed.is_empty() {
            return Ok(info);
        }
        let all_parts: Vec<&str> = trimmed.split('/').collect();
        if all_parts.len() < 3 || !API_PREFIXES.contains(&all_parts[0]) {
            return Ok(info);
        }
        let prefix = all_parts[0];
        let mut current: &[&str] = &all_parts[1..];
        let mut group = "";
        if prefix != GROUPLESS_API_PREFIX {
            // One part (the prefix) is consumed already: "do we have four parts?"
            if current.len() < 3 {
                return Ok(info);
            }
            group = current[0];
            current = &current[1..];
        }
        let version = current[0];
        current = &current[1..];

        let mut verb: Cow<'static, str>;
        if SPECIAL_VERBS.contains(&current[0]) {
            if current.len() < 2 {
                // Upstream returns the partially filled info with the error; callers here only
                // get the error, which is all the filters use.
                return Err(RequestInfoError::UnableToDetermineKindAndNamespace {
                    url: request_url(uri),
                });
            }
            verb = Cow::Owned(current[0].to_owned());
            current = &current[1..];
        } else {
            verb = Cow::Borrowed(match *method {
                http::Method::POST => "create",
                http::Method::GET | http::Method::HEAD => "get",
                http::Method::PUT => "update",
                http::Method::PATCH => "patch",
                http::Method::DELETE => "delete",
                _ => "",
            });
        }

        let mut namespace = "";
        if current[0] == "namespaces" && current.len() > 1 {
            namespace = current[1];
            // A step after the namespace name that is not a namespace subresource is a
            // namespaced resource in its own right: re-base the parts on it.
            if current.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&current[2]) {
                current = &current[2..];
            }
        }

        let mut name = String::new();
        let mut subresource = "";
        let mut resource = "";
        if current.len() >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.contains(&verb.as_ref()) {
            subresource = current[2];
        }
        if current.len() >= 2 {
            name = current[1].to_owned();
        }
        if !current.is_empty() {
            resource = current[0];
        }

        if name.is_empty() && verb == "get" {
            let list = ListOptionsQuery::parse(uri.query());
            verb = Cow::Borrowed(if list.watch { "watch" } else { "list" });
            if let Some(lifted) = list.exact_name {
                name = lifted;
            }
        }
        if name.is_empty() && verb == "delete" {
            verb = Cow::Borrowed("deletecollection");
        }

        info.is_resource_request = true;
        info.verb = verb.into_owned();
        info.api_prefix = prefix.to_owned();
        info.api_group = group.to_owned();
        info.api_version = version.to_owned();
        info.namespace = namespace.to_owned();
        info.resource = resource.to_owned();
        info.subresource = subresource.to_owned();
        info.name = name;
        info.parts = current.iter().map(|p| (*p).to_owned()).collect();
        Ok(info)
    }

    /// Derives the RequestInfo of a request (see [`RequestInfo::from_parts`]).
    pub fn from_request<B>(req: &http::Request<B>) -> Result<RequestInfo, RequestInfoError> {
        Self::from_parts(req.method(), req.uri())
    }

    /// The routing key of a resource request: (group, version, resource). `None` for
    /// non-resource requests.
    pub fn group_version_resource(&self) -> Option<GroupVersionResource> {
        self.is_resource_request.then(|| GroupVersionResource {
            group: self.api_group.clone(),
            version: self.api_version.clone(),
            resource: self.resource.clone(),
        })
    }
}

/// The request URL as Go prints a server request's `*url.URL` (path, then `?query`).
fn request_url(uri: &http::Uri) -> String {
    match uri.query() {
        Some(q) => format!("{}?{}", uri.path(), q),
        None => uri.path().to_owned(),
    }
}

/// The parts of `ListOptions` decoding that influence the RequestInfo of a list/watch.
struct ListOptionsQuery {
    watch: bool,
    exact_name: Option<String>,
}

impl ListOptionsQuery {
    fn parse(query: Option<&str>) -> Self {
        let mut watch: Option<Cow<'_, str>> = None;
        let mut field_selector: Option<Cow<'_, str>> = None;
        let mut limit: Option<Cow<'_, str>> = None;
        let mut timeout_seconds: Option<Cow<'_, str>> = None;
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            // Go's url.Values keeps every value; the converters read only the first one.
            let slot = match key.as_ref() {
                "watch" => &mut watch,
                "fieldSelector" => &mut field_selector,
                "limit" => &mut limit,
                "timeoutSeconds" => &mut timeout_seconds,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(value);
            }
        }
        let decode_failed = [&limit, &timeout_seconds]
            .into_iter()
            .flatten()
            .any(|v| !is_go_int64(v));
        // Convert_Slice_string_To_bool: absent, "0" or "false" (any case) is false; anything
        // else, including the empty string, is true. The fallback path after a decoding error
        // treats watch the same way.
        let watch = watch.is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")));
        let mut exact_name = None;
        if let Some(selector) = field_selector {
            match parse_field_selector(&selector) {
                Ok(terms) if !decode_failed => {
                    exact_name = terms
                        .into_iter()
                        .find(|t| t.equals && t.field == "metadata.name")
                        .map(|t| t.value)
                        .filter(|name| is_valid_path_segment_name(name));
                }
                _ => {}
            }
        }
        Self { watch, exact_name }
    }
}

/// `strconv.ParseInt(s, 10, 64)` succeeds.
fn is_go_int64(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && s.parse::<i64>().is_ok()
}

/// `path.IsValidPathSegmentName`: not `.`/`..`, no `/` or `%`.
fn is_valid_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains(['/', '%'])
}

/// One term of a field selector (`field=value`, `field==value` or `field!=value`).
struct FieldTerm {
    field: String,
    equals: bool,
    value: String,
}

/// apimachinery `fields.ParseSelector`: terms split on unescaped commas and sorted, each
/// split at the first operator; values unescaped (`\\`, `\,`, `\=`).
fn parse_field_selector(selector: &str) -> Result<Vec<FieldTerm>, ()> {
    let mut parts = split_terms(selector);
    parts.sort();
    let mut terms = Vec::with_capacity(parts.len());
    for part in parts.iter().filter(|p| !p.is_empty()) {
        let (field, equals, rhs) = split_term(part).ok_or(())?;
        terms.push(FieldTerm {
            field: field.to_owned(),
            equals,
            value: unescape_value(rhs)?,
        });
    }
    Ok(terms)
}

fn split_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in selector.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits at the first of `!=`, `==`, `=` (checked in that order at each position).
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, equals) in [("!=", false), ("==", true), ("=", true)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], equals, rhs));
            }
        }
    }
    None
}

fn unescape_value(value: &str) -> Result<String, ()> {
    if !value.contains('\\') {
        return Ok(value.to_owned());
    }
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                _ => return Err(()),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, url: &str) -> RequestInfo {
        let method = http::Method::from_bytes(method.as_bytes()).unwrap();
        let uri: http::Uri = url.parse().unwrap();
        RequestInfo::from_parts(&method, &uri).unwrap()
    }

    #[test]
    fn long_running_requests_are_kube_apiservers() {
        for (method, url) in [
            ("GET", "/api/v1/namespaces/default/pods?watch=true"),
            ("GET", "/apis/batch/v1/watch/jobs"),
            ("GET", "/api/v1/namespaces/default/pods/p/log?follow=true"),
            ("POST", "/api/v1/namespaces/default/pods/p/exec"),
            ("GET", "/api/v1/namespaces/default/pods/p/portforward"),
            ("GET", "/api/v1/namespaces/default/services/s/proxy/x"),
            ("GET", "/api/v1/proxy/namespaces/default/pods/p"),
        ] {
            assert!(info(method, url).is_long_running(), "{method} {url}");
        }
        for (method, url) in [
            ("GET", "/api/v1/namespaces/default/pods"),
            ("GET", "/apis/batch/v1/namespaces/default/jobs/j/status"),
            ("POST", "/apis/batch/v1/namespaces/default/jobs"),
            ("GET", "/api/v1/namespaces/default/pods?watch=false"),
            ("GET", "/apis"),
        ] {
            assert!(!info(method, url).is_long_running(), "{method} {url}");
        }
    }

    /// Upstream `TestGetAPIRequestInfo` success cases (the prefix column corrected: upstream
    /// does not assert it, and `/apis/...` paths have prefix `apis`).
    #[test]
    fn resource_requests_match_upstream_table() {
        type Case<'a> = (
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            &'a [&'a str],
        );
        #[rustfmt::skip]
        let cases: &[Case<'_>] = &[
            // resource paths
            ("GET", "/api/v1/namespaces", "list", "api", "", "v1", "", "namespaces", "", "", &["namespaces"]),
            ("GET", "/api/v1/namespaces/other", "get", "api", "", "v1", "other", "namespaces", "", "other", &["namespaces", "other"]),
            ("GET", "/api/v1/namespaces/other/pods", "list", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("HEAD", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("GET", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("HEAD", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("PATCH", "/api/v1/namespaces/new-namespace", "patch", "api", "", "v1", "new-namespace", "namespaces", "", "new-namespace", &["namespaces", "new-namespace"]),
            // special verbs
            ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "proxy", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", "proxy", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo", "subpath", "not", "a", "subresource"]),
            ("GET", "/api/v1/watch/pods", "watch", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/pods?watch=true", "watch", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/pods?watch=false", "list", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/watch/namespaces/other/pods", "watch", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/namespaces/other/pods?watch=1", "watch", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/namespaces/other/pods?watch=0", "list", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            // subresource identification
            ("GET", "/api/v1/namespaces/other/pods/foo/status", "get", "api", "", "v1", "other", "pods", "status", "foo", &["pods", "foo", "status"]),
            ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "get", "api", "", "v1", "other", "pods", "proxy", "foo", &["pods", "foo", "proxy", "subpath"]),
            ("PUT", "/api/v1/namespaces/other/finalize", "update", "api", "", "v1", "other", "namespaces", "finalize", "other", &["namespaces", "other", "finalize"]),
            ("PUT", "/api/v1/namespaces/other/status", "update", "api", "", "v1", "other", "namespaces", "status", "other", &["namespaces", "other", "status"]),
            // verb identification
            ("PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("POST", "/api/v1/namespaces/other/pods", "create", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("OPTIONS", "/api/v1/namespaces/other/pods", "", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            // deletecollection verb identification
            ("DELETE", "/api/v1/nodes", "deletecollection", "api", "", "v1", "", "nodes", "", "", &["nodes"]),
            ("DELETE", "/api/v1/namespaces", "deletecollection", "api", "", "v1", "", "namespaces", "", "", &["namespaces"]),
            ("DELETE", "/api/v1/namespaces/other/pods", "deletecollection", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "deletecollection", "apis", "extensions", "v1", "other", "pods", "", "", &["pods"]),
            // api group identification
            ("POST", "/apis/extensions/v1/namespaces/other/pods", "create", "apis", "extensions", "v1", "other", "pods", "", "", &["pods"]),
            // api version identification
            ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "create", "apis", "extensions", "v1beta3", "other", "pods", "", "", &["pods"]),
            // group special verbs and subresources
            ("GET", "/apis/batch/v1/watch/namespaces/default/jobs/j1", "watch", "apis", "batch", "v1", "default", "jobs", "", "j1", &["jobs", "j1"]),
            ("GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", "get", "apis", "apps", "v1", "default", "deployments", "scale", "d", &["deployments", "d", "scale"]),
        ];
        for (method, url, verb, prefix, group, version, ns, resource, sub, name, parts) in cases {
            let got = info(method, url);
            let want = RequestInfo {
                is_resource_request: true,
                path: url.split('?').next().unwrap().to_owned(),
                verb: (*verb).to_owned(),
                api_prefix: (*prefix).to_owned(),
                api_group: (*group).to_owned(),
                api_version: (*version).to_owned(),
                namespace: (*ns).to_owned(),
                resource: (*resource).to_owned(),
                subresource: (*sub).to_owned(),
                name: (*name).to_owned(),
                parts: parts.iter().map(|p| (*p).to_owned()).collect(),
            };
            assert_eq!(got, want, "{method} {url}");
        }
    }

    /// Upstream `TestGetAPIRequestInfo` error cases and `TestGetNonAPIRequestInfo`.
    #[test]
    fn classifies_resource_and_non_resource_paths_as_upstream() {
        let cases = [
            ("/", false),
            ("/api/version/", false),
            ("/apis/group/version/", false),
            ("/badprefix/version/resource", false),
            ("/apis/version/resource", false),
            ("/api/version/resource", true),
            ("/apis/group/version/resource/name/subresource", true),
            ("/api/version/resource/name/subresource", true),
            ("/apis/batch/v1/job", true),
            ("/apis/batch/v1/job/foo", true),
            ("/apis/batch/v1/job/foo/scale", true),
            ("/not-api/version/resource", false),
            ("/apis/extensions/v1beta1", false),
            ("/apis/extensions/v1beta1/", false),
            ("/api/version", false),
            ("/api", false),
            ("/apis", false),
            ("/healthz", false),
            ("/version", false),
        ];
        for (url, resource) in cases {
            let got = info("GET", url);
            assert_eq!(got.is_resource_request, resource, "{url}");
            if !resource {
                assert_eq!(got.verb, "get", "{url}");
                assert_eq!(got.path, url);
                assert!(got.parts.is_empty() && got.resource.is_empty() && got.api_prefix.is_empty());
            }
        }
    }

    #[test]
    fn non_resource_verb_is_lowercased_method() {
        assert_eq!(info("POST", "/healthz").verb, "post");
        assert_eq!(info("DELETE", "/apis/g/v").verb, "delete");
    }

    /// Upstream `TestFieldSelectorParsing` plus the watch value conversions.
    #[test]
    fn list_watch_and_field_selector_name_match_upstream() {
        let cases = [
            ("/apis/group/version/resource", "", "list"),
            (
                "/apis/group/version/resource?fieldSelector=metadata.name=name1",
                "name1",
                "list",
            ),
            (
                "/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1",
                "name1",
                "watch",
            ),
            ("/apis/group/version/resource?fieldSelector=foo=bar", "", "list"),
            (
                "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo",
                "",
                "list",
            ),
            (
                "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true",
                "",
                "watch",
            ),
            (
                "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=false",
                "",
                "list",
            ),
            (
                "/apis/group/version/resource?fieldSelector=metadata.name%3D%3Dn2",
                "n2",
                "list",
            ),
            (
                "/apis/group/version/resource?fieldSelector=metadata.name!%3Dn2",
                "",
                "list",
            ),
            (
                "/apis/g/v/r?fieldSelector=metadata.name%3Db,metadata.name%3Da",
                "a",
                "list",
            ),
            (
                "/apis/g/v/r?fieldSelector=spec.x%3D1,metadata.name%3Dn",
                "n",
                "list",
            ),
            (
                "/apis/g/v/r?fieldSelector=metadata.name%3Da%5C%2Cb",
                "a,b",
                "list",
            ),
            ("/apis/g/v/r?fieldSelector=metadata.name%3Da%5Cb", "", "list"),
            ("/apis/g/v/r?fieldSelector=metadata.name%3D..", "", "list"),
            ("/apis/g/v/r?fieldSelector=metadata.name%3Da%2Fb", "", "list"),
            (
                "/apis/g/v/r?fieldSelector=metadata.name%3Dn&limit=abc",
                "",
                "list",
            ),
            (
                "/apis/g/v/r?fieldSelector=metadata.name%3Dn&limit=500&timeoutSeconds=-3",
                "n",
                "list",
            ),
            ("/apis/g/v/r?watch=", "", "watch"),
            ("/apis/g/v/r?watch", "", "watch"),
            ("/apis/g/v/r?watch=FALSE", "", "list"),
            ("/apis/g/v/r?watch=no", "", "watch"),
            ("/apis/g/v/r?watch=0&watch=1", "", "list"),
            (
                "/apis/g/v/r?fieldSelector=metadata.name%3Dn&limit=1&limit=x",
                "n",
                "list",
            ),
            (
                "/apis/g/v/r?fieldSelector=metadata.name%3Dn&watch=abc&limit=x",
                "",
                "watch",
            ),
        ];
        for (url, name, verb) in cases {
            let got = info("GET", url);
            assert_eq!((got.name.as_str(), got.verb.as_str()), (name, verb), "{url}");
        }
        // Only GET collection requests lift the name; DELETE stays deletecollection.
        let del = info("DELETE", "/apis/g/v/r?fieldSelector=metadata.name%3Dn");
        assert_eq!((del.name.as_str(), del.verb.as_str()), ("", "deletecollection"));
    }

    #[test]
    fn bare_special_verb_is_an_error_with_upstream_message() {
        for url in ["/api/v1/watch", "/apis/batch/v1/proxy?x=1"] {
            let uri: http::Uri = url.parse().unwrap();
            let err = RequestInfo::from_parts(&http::Method::GET, &uri).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("unable to determine kind and namespace from url, {url}")
            );
        }
    }

    #[test]
    fn path_is_percent_decoded_like_go_url_path() {
        let got = info("GET", "/api/v1/namespaces/a%2Fb/pods");
        assert_eq!(got.path, "/api/v1/namespaces/a/b/pods");
        assert_eq!(got.namespace, "a");
        assert_eq!(got.resource, "b");
    }

    #[test]
    fn absolute_form_uri_uses_its_path() {
        let got = info("GET", "https://example.com:6443/apis/batch/v1/jobs?watch=1");
        assert_eq!(
            got.group_version_resource(),
            Some(GroupVersionResource::new("batch", "v1", "jobs"))
        );
        assert_eq!(got.verb, "watch");
    }

    #[test]
    fn gvr_ignores_subresource_and_is_none_for_non_resource() {
        let got = info("PUT", "/api/v1/namespaces/ns/pods/p/status");
        assert_eq!(
            got.group_version_resource(),
            Some(GroupVersionResource::new("", "v1", "pods"))
        );
        assert_eq!(info("GET", "/apis/batch/v1").group_version_resource(), None);
    }

    #[test]
    fn from_request_matches_from_parts() {
        let req = http::Request::builder()
            .method("DELETE")
            .uri("/apis/batch/v1/jobs")
            .body(())
            .unwrap();
        assert_eq!(RequestInfo::from_request(&req).unwrap().verb, "deletecollection");
    }
}
