//! `SelfSubjectReview` (`kubectl auth whoami`): the server tells a client who it thinks the client is.
//!
//! This is how a user (and the e2e tests) can see which identity a server believed it served, including
//! the original user behind a request a peer proxied.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use mvp_core::{RequestInfo, UserInfo};
use serde_json::{Map, Value, json};

/// Whether the request is `create selfsubjectreviews` in `authentication.k8s.io` (any version).
pub fn is_self_subject_review(info: &RequestInfo) -> bool {
    info.api_group == "authentication.k8s.io"
        && info.resource == "selfsubjectreviews"
        && info.verb == "create"
}

/// The `SelfSubjectReview` answer for `user`, with upstream's 201 Created.
pub fn self_subject_review(info: &RequestInfo, user: &UserInfo) -> Response {
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
        "apiVersion": format!("authentication.k8s.io/{}", info.api_version),
        "metadata": { "creationTimestamp": Value::Null },
        "status": { "userInfo": Value::Object(user_info) },
    });
    (StatusCode::CREATED, axum::Json(body)).into_response()
}
