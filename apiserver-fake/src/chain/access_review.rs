//! The access reviews of `authorization.k8s.io/v1`: `SelfSubjectAccessReview` and
//! `SelfSubjectRulesReview` (`kubectl auth can-i`, `can-i --list`), `SubjectAccessReview` and
//! `LocalSubjectAccessReview`, answered by this server's [`Authorizer`] as kube-apiserver's registries
//! (`pkg/registry/authorization/*/rest.go`) answer them.
//!
//! They are create-only virtual resources: nothing is stored, no `metadata.name` is needed (the access
//! reviews want `metadata` empty), and the answer is 201 with the review and its `status`. The body is
//! decoded as any create's (400 for what does not decode, the kind and apiVersion checked), then
//! validated with upstream's field errors (422 `Invalid`).
//!
//! Deviation: a non-empty `metadata` is refused with upstream's message, but its value is shown as
//! JSON, not as Go's dump of an `ObjectMeta`.

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use http::request::Parts;
use mvp_core::{RequestInfo, UserInfo};
use serde_json::{Map, Value, json};

use super::authorization::Authorizer;
use crate::api::rest::negotiation::{Transforms, decode_body, negotiate_output};
use crate::api::rest::object::check_type_meta;
use crate::api::rest::read_body;
use crate::api::status::{GroupKind, Status, StatusCause};

/// The API group of the reviews.
const GROUP: &str = "authorization.k8s.io";

/// One of the review resources (named by their kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
enum Kind {
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
    LocalSubjectAccessReview,
}

impl Kind {
    fn of(resource: &str) -> Option<Self> {
        Some(match resource {
            "selfsubjectaccessreviews" => Self::SelfSubjectAccessReview,
            "selfsubjectrulesreviews" => Self::SelfSubjectRulesReview,
            "subjectaccessreviews" => Self::SubjectAccessReview,
            "localsubjectaccessreviews" => Self::LocalSubjectAccessReview,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::SelfSubjectAccessReview => "SelfSubjectAccessReview",
            Self::SelfSubjectRulesReview => "SelfSubjectRulesReview",
            Self::SubjectAccessReview => "SubjectAccessReview",
            Self::LocalSubjectAccessReview => "LocalSubjectAccessReview",
        }
    }
}

/// Whether the request is the creation of an access review (the caller checks that the server serves
/// the resource; the route's other checks are the REST layer's).
pub(crate) fn is_access_review(info: &RequestInfo) -> bool {
    info.api_group == GROUP
        && info.verb == "create"
        && info.subresource.is_empty()
        && info.name.is_empty()
        && Kind::of(&info.resource).is_some()
}

/// Answers the access review `info` names, for `user`, with `authorizer`'s verdict.
pub(crate) async fn serve(
    authorizer: &Authorizer,
    info: &RequestInfo,
    user: &UserInfo,
    parts: &Parts,
    body: Body,
) -> Response {
    let format = match negotiate_output(&parts.headers, Transforms::None) {
        Ok(format) => format,
        Err(status) => return axum::response::IntoResponse::into_response(status),
    };
    let Some(kind) = Kind::of(&info.resource) else {
        return format.error(Status::route_not_found());
    };
    // Only the local review is namespaced; the others have no namespaced route.
    let namespaced = kind == Kind::LocalSubjectAccessReview;
    if namespaced == info.namespace.is_empty() {
        return format.error(Status::route_not_found());
    }
    match review(authorizer, kind, info, user, parts, body).await {
        Ok(value) => format.respond(StatusCode::CREATED, &value),
        Err(status) => format.error(status),
    }
}

async fn review(
    authorizer: &Authorizer,
    kind: Kind,
    info: &RequestInfo,
    user: &UserInfo,
    parts: &Parts,
    body: Body,
) -> Result<Value, Status> {
    let api_version = format!("{GROUP}/{}", info.api_version);
    let body = read_body(body).await?;
    let object = decode_body(&parts.headers, &body, false)?;
    check_type_meta(&object, &api_version, kind.name())?;
    let spec = object
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut metadata = json!({"creationTimestamp": null});
    if kind == Kind::SelfSubjectRulesReview {
        let status = rules_review_status(authorizer, user, &spec)?;
        return Ok(json!({
            "kind": kind.name(),
            "apiVersion": api_version,
            "metadata": metadata,
            "spec": {},
            "status": status,
        }));
    }
    let resource_attributes = attributes_of(&spec, "resourceAttributes");
    let non_resource_attributes = attributes_of(&spec, "nonResourceAttributes");
    let mut causes = attribute_causes(resource_attributes.as_ref(), non_resource_attributes.as_ref());
    let subject = match kind {
        Kind::SubjectAccessReview | Kind::LocalSubjectAccessReview => {
            let subject = subject_of(&spec);
            if subject.name.is_empty() && subject.groups.is_empty() {
                causes.push(StatusCause::field_invalid(
                    "spec.user",
                    "",
                    "at least one of user or group must be specified",
                ));
            }
            subject
        }
        _ => user.clone(),
    };
    let expected_namespace = check_metadata(kind, &object, info, &mut metadata, &mut causes);
    if let (Some(namespace), Some(attributes)) = (&expected_namespace, &resource_attributes) {
        let requested = attributes
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if requested != namespace {
            causes.push(StatusCause::field_invalid(
                "spec.resourceAttributes.namespace",
                requested,
                "must match metadata.namespace",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(Status::invalid(&GroupKind::new(GROUP, kind.name()), "", causes));
    }
    if let Some(namespace) = &expected_namespace
        && namespace != &info.namespace
    {
        return Err(Status::bad_request(format!(
            "spec.resourceAttributes.namespace must match namespace: {}",
            info.namespace
        )));
    }
    let attributes = match (&resource_attributes, &non_resource_attributes) {
        (Some(attributes), _) => resource_request(attributes),
        (None, Some(attributes)) => non_resource_request(attributes),
        (None, None) => return Err(Status::internal_error("no attributes")),
    };
    let verdict = authorizer.review(&subject, &attributes);
    let mut status = Map::new();
    status.insert("allowed".into(), json!(verdict.allowed));
    if !verdict.reason.is_empty() {
        status.insert("reason".into(), json!(verdict.reason));
    }
    Ok(json!({
        "kind": kind.name(),
        "apiVersion": api_version,
        "metadata": metadata,
        "spec": echoed_spec(spec),
        "status": status,
    }))
}

/// A SelfSubjectRulesReview's status: the rules `user` has in `spec.namespace`. Upstream validates
/// nothing else and answers a review of its own, without the spec.
fn rules_review_status(
    authorizer: &Authorizer,
    user: &UserInfo,
    spec: &Map<String, Value>,
) -> Result<Value, Status> {
    let namespace = spec.get("namespace").and_then(Value::as_str).unwrap_or_default();
    if namespace.is_empty() {
        return Err(Status::bad_request("no namespace on request"));
    }
    let rules = authorizer.rules_for(user, namespace);
    let mut status = json!({
        "resourceRules": rules.resource_rules,
        "nonResourceRules": rules.non_resource_rules,
        "incomplete": rules.incomplete,
    });
    if !rules.evaluation_error.is_empty() {
        status["evaluationError"] = json!(rules.evaluation_error);
    }
    Ok(status)
}

/// Exactly one of `spec.resourceAttributes` and `spec.nonResourceAttributes`.
fn attribute_causes(
    resource_attributes: Option<&Map<String, Value>>,
    non_resource_attributes: Option<&Map<String, Value>>,
) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if resource_attributes.is_some()
        && let Some(non_resource) = non_resource_attributes
    {
        causes.push(StatusCause::field_invalid(
            "spec.nonResourceAttributes",
            &Value::Object(non_resource.clone()).to_string(),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if resource_attributes.is_none() && non_resource_attributes.is_none() {
        causes.push(StatusCause::field_invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    causes
}

/// The review's metadata must be empty, except for a LocalSubjectAccessReview's namespace (the
/// request's when left out, as the create handler sets it): that namespace, set on the answer's
/// `metadata` too.
fn check_metadata(
    kind: Kind,
    object: &Value,
    info: &RequestInfo,
    metadata: &mut Value,
    causes: &mut Vec<StatusCause>,
) -> Option<String> {
    let mut object_metadata = object
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    object_metadata.retain(|key, value| key != "managedFields" && !is_empty(value));
    let expected_namespace = if kind == Kind::LocalSubjectAccessReview {
        let namespace = object_metadata
            .remove("namespace")
            .and_then(|n| n.as_str().map(str::to_owned))
            .unwrap_or_else(|| info.namespace.clone());
        metadata["namespace"] = json!(namespace);
        Some(namespace)
    } else {
        None
    };
    if !object_metadata.is_empty() {
        let detail = if expected_namespace.is_some() {
            "must be empty except for namespace"
        } else {
            "must be empty"
        };
        causes.push(StatusCause::field_invalid(
            "metadata",
            &Value::Object(object_metadata).to_string(),
            detail,
        ));
    }
    expected_namespace
}

/// The spec as the answer echoes it: the attributes without their empty fields, absent ones left out.
fn echoed_spec(mut spec: Map<String, Value>) -> Map<String, Value> {
    for key in ["resourceAttributes", "nonResourceAttributes"] {
        match attributes_of(&spec, key) {
            Some(attributes) => {
                spec.insert(key.to_owned(), Value::Object(attributes));
            }
            None => {
                spec.remove(key);
            }
        }
    }
    spec
}

/// `spec.<key>` when present (an object, possibly empty; `null` is absent, as Go's nil pointer),
/// without its empty fields (Go's `omitempty` on the way out).
fn attributes_of(spec: &Map<String, Value>, key: &str) -> Option<Map<String, Value>> {
    let mut attributes = spec.get(key)?.as_object()?.clone();
    attributes.retain(|_, value| !is_empty(value));
    Some(attributes)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn text<'a>(attributes: &'a Map<String, Value>, key: &str) -> &'a str {
    attributes.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A `SubjectAccessReview`'s user (`spec.user`, `groups`, `uid`, `extra`).
fn subject_of(spec: &Map<String, Value>) -> UserInfo {
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let mut user = UserInfo::new(text(spec, "user"));
    user.uid = text(spec, "uid").to_owned();
    user.groups = strings(spec.get("groups"));
    if let Some(extra) = spec.get("extra").and_then(Value::as_object) {
        user.extra = extra.iter().map(|(k, v)| (k.clone(), strings(Some(v)))).collect();
    }
    user
}

/// The request `resourceAttributes` describe (`ResourceAttributesFrom`).
fn resource_request(attributes: &Map<String, Value>) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: text(attributes, "verb").to_owned(),
        api_group: text(attributes, "group").to_owned(),
        api_version: text(attributes, "version").to_owned(),
        namespace: text(attributes, "namespace").to_owned(),
        resource: text(attributes, "resource").to_owned(),
        subresource: text(attributes, "subresource").to_owned(),
        name: text(attributes, "name").to_owned(),
        ..RequestInfo::default()
    }
}

/// The request `nonResourceAttributes` describe (`NonResourceAttributesFrom`).
fn non_resource_request(attributes: &Map<String, Value>) -> RequestInfo {
    RequestInfo {
        is_resource_request: false,
        verb: text(attributes, "verb").to_owned(),
        path: text(attributes, "path").to_owned(),
        ..RequestInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(uri: &str) -> RequestInfo {
        RequestInfo::from_parts(&http::Method::POST, &uri.parse().unwrap()).unwrap()
    }

    #[test]
    fn only_creations_of_the_four_reviews_are_access_reviews() {
        assert!(is_access_review(&post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        )));
        assert!(is_access_review(&post(
            "/apis/authorization.k8s.io/v1/namespaces/d/localsubjectaccessreviews"
        )));
        assert!(!is_access_review(&post("/apis/batch/v1/namespaces/d/jobs")));
        assert!(!is_access_review(&post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews"
        )));
    }

    #[test]
    fn attributes_become_the_request_the_authorizer_sees() {
        let spec = json!({"verb": "create", "resource": "pods", "namespace": "default", "group": ""});
        let info = resource_request(spec.as_object().unwrap());
        assert!(info.is_resource_request);
        assert_eq!((info.verb.as_str(), info.resource.as_str()), ("create", "pods"));
        assert_eq!(info.namespace, "default");
        let spec = json!({"verb": "get", "path": "/healthz"});
        let info = non_resource_request(spec.as_object().unwrap());
        assert!(!info.is_resource_request);
        assert_eq!(info.path, "/healthz");
    }
}
