//! `SelfSubjectReview` (`kubectl auth whoami`): the server tells a client who it thinks the client is.
//!
//! This is how a user (and the e2e tests) can see which identity a server believed it served, including
//! the original user behind a request a peer proxied.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;
use mvp_core::{RequestInfo, UserInfo};
use serde_json::{Map, Value, json};

use crate::api::rest::negotiation::decode_body;
use crate::api::rest::object::check_type_meta;
use crate::api::rest::read_body;

/// Whether the request is `create selfsubjectreviews` in `authentication.k8s.io` (any version).
pub(crate) fn is_self_subject_review(info: &RequestInfo) -> bool {
    info.api_group == "authentication.k8s.io"
        && info.resource == "selfsubjectreviews"
        && info.verb == "create"
}

/// The `SelfSubjectReview` answer for `user`, with upstream's 201 Created, once the body decodes as a
/// `SelfSubjectReview` as any create's body must (upstream's create handler decodes it before the
/// registry answers: 400 for what is not a JSON, YAML or protobuf object, or of another kind or
/// version; 415 for another media type).
pub(crate) async fn self_subject_review(
    info: &RequestInfo,
    user: &UserInfo,
    parts: &Parts,
    body: Body,
) -> Response {
    let api_version = format!("authentication.k8s.io/{}", info.api_version);
    let decoded = match read_body(body).await {
        Ok(body) => decode_body(&parts.headers, &body, false),
        Err(status) => Err(status),
    };
    if let Err(status) =
        decoded.and_then(|object| check_type_meta(&object, &api_version, "SelfSubjectReview"))
    {
        return status.into_response();
    }
    let mut user_info = Map::new();
    user_info.insert("username".into(), json!(user.name));
    if !user.uid.is_empty() {
        user_info.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        user_info.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        user_info.insert("extra".into(), json!(user.extra));
    }
    let body = json!({
        "kind": "SelfSubjectReview",
        "apiVersion": api_version,
        "metadata": { "creationTimestamp": Value::Null },
        "status": { "userInfo": Value::Object(user_info) },
    });
    (StatusCode::CREATED, axum::Json(body)).into_response()
}
