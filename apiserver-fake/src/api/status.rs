//! The Kubernetes `Status` object (`meta.k8s.io/v1` `Status`, served as `v1` `Status`): the body of every
//! error kube-apiserver returns, and of a few successful deletes.
//!
//! Constructors mirror `k8s.io/apimachinery/pkg/api/errors` (`NewNotFound`, `NewConflict`, ...) and the
//! negotiation errors of `k8s.io/apiserver/pkg/endpoints/handlers/negotiation`, with upstream's exact
//! messages, codes, reasons and details, so clients (`kubectl`, client-go, kube-rs) classify them as they
//! classify a real server's errors. Serialisation follows upstream's field order and `omitempty` rules:
//! `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":..,"reason":..,
//! "details":{..},"code":..}`.

use std::fmt;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use crate::store::GroupResource;
use crate::store::StoreError;

/// A group and kind (`schema.GroupKind`), printed `Kind.group` (or `Kind` for core) as in `Invalid`
/// messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupKind {
    /// API group; empty for the core group.
    pub group: String,
    /// Kind (`Job`).
    pub kind: String,
}

impl GroupKind {
    /// A group/kind pair.
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
        }
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// `metav1.StatusReason`: the machine-readable reason clients switch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum StatusReason {
    /// No reason given (upstream `StatusReasonUnknown`, the empty string; omitted on the wire).
    #[default]
    #[serde(rename = "")]
    Unknown,
    /// 401: credentials missing or invalid.
    Unauthorized,
    /// 403: the user may not do this.
    Forbidden,
    /// 404: the object does not exist.
    NotFound,
    /// 409 on create: an object of that name exists.
    AlreadyExists,
    /// 409 on update: the resourceVersion precondition failed.
    Conflict,
    /// 410 (deprecated in favour of `Expired`).
    Gone,
    /// 422: validation failed.
    Invalid,
    /// 500: a transient server timeout.
    ServerTimeout,
    /// 500: reading storage failed.
    #[serde(rename = "StorageReadError")]
    StoreReadError,
    /// 504: the request timed out.
    Timeout,
    /// 429: too many requests.
    TooManyRequests,
    /// 400: the request is malformed.
    BadRequest,
    /// 405: the verb is not supported on the resource.
    MethodNotAllowed,
    /// 406: no acceptable response media type.
    NotAcceptable,
    /// 413: body too large.
    RequestEntityTooLarge,
    /// 415: the request body's media type is not understood.
    UnsupportedMediaType,
    /// 500: an internal error.
    InternalError,
    /// 410: the requested resourceVersion is too old (compacted).
    Expired,
    /// 503: the server cannot serve the request now.
    ServiceUnavailable,
}

impl StatusReason {
    /// The wire string (`"NotFound"`, empty for `Unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "NotFound",
            Self::AlreadyExists => "AlreadyExists",
            Self::Conflict => "Conflict",
            Self::Gone => "Gone",
            Self::Invalid => "Invalid",
            Self::ServerTimeout => "ServerTimeout",
            Self::StoreReadError => "StorageReadError",
            Self::Timeout => "Timeout",
            Self::TooManyRequests => "TooManyRequests",
            Self::BadRequest => "BadRequest",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::NotAcceptable => "NotAcceptable",
            Self::RequestEntityTooLarge => "RequestEntityTooLarge",
            Self::UnsupportedMediaType => "UnsupportedMediaType",
            Self::InternalError => "InternalError",
            Self::Expired => "Expired",
            Self::ServiceUnavailable => "ServiceUnavailable",
        }
    }
}

/// `metav1.StatusCause`: one reason behind an error, e.g. one invalid field.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StatusCause {
    /// Machine-readable cause type (`FieldValueRequired`); JSON `reason` as upstream.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field path the cause concerns (`metadata.name`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl StatusCause {
    /// A `field.Required` error: type `FieldValueRequired`, body `Required value: <detail>`.
    pub fn field_required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_owned()
        } else {
            format!("Required value: {detail}")
        };
        Self {
            reason: "FieldValueRequired".to_owned(),
            message,
            field: field.to_owned(),
        }
    }

    /// A `field.Invalid` error for a string value: body `Invalid value: "<value>": <detail>`.
    pub fn field_invalid(field: &str, value: &str, detail: &str) -> Self {
        let mut message = format!("Invalid value: {value:?}");
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        Self {
            reason: "FieldValueInvalid".to_owned(),
            message,
            field: field.to_owned(),
        }
    }

    /// A `field.Forbidden` error: body `Forbidden: <detail>`.
    pub fn field_forbidden(field: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueForbidden".to_owned(),
            message: format!("Forbidden: {detail}"),
            field: field.to_owned(),
        }
    }

    /// A `field.TypeInvalid` error: type `FieldValueTypeInvalid`, body `Invalid value: "<value>": <detail>`.
    pub fn field_type_invalid(field: &str, value: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueTypeInvalid".to_owned(),
            ..Self::field_invalid(field, value, detail)
        }
    }

    /// A `field.NotSupported` error: body `Unsupported value: "<value>": supported values: "a", "b"`.
    pub fn field_not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Self {
            reason: "FieldValueNotSupported".to_owned(),
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                supported.join(", ")
            ),
            field: field.to_owned(),
        }
    }

    /// The cause as `field.Error.Error()` prints it: `<field>: <body>`.
    fn field_error_string(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// `metav1.StatusDetails`: what the error is about.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Object name, when the error concerns one object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group of the resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The resource (plural) for most errors, the kind for `Invalid` (as upstream).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// UID of the object (successful deletes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Individual causes (invalid fields, internal error text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds a client should wait before retrying; 0 = not set.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_after_seconds: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// Whether the operation succeeded (`"Success"`) or failed (`"Failure"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum StatusOutcome {
    /// `"Success"`: e.g. the body of a delete that does not return the object.
    Success,
    /// `"Failure"`: every error.
    #[default]
    Failure,
}

/// A Kubernetes `Status`: the error type of the REST layer and the JSON body of its error responses.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Status {
    /// `Success` or `Failure`.
    #[serde(default)]
    pub status: StatusOutcome,
    /// HTTP status code; 0 is omitted on the wire (and answered as 200).
    #[serde(default)]
    pub code: u16,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: StatusReason,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// Details (omitted when `None`); boxed to keep `Result<_, Status>` small.
    #[serde(default)]
    pub details: Option<Box<StatusDetails>>,
    /// `metadata.continue`: upstream's 410 for a continue token whose revision was compacted carries
    /// a token that continues the list at the current revision.
    #[serde(skip)]
    pub list_continue: Option<String>,
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Status", 8)?;
        s.serialize_field("kind", "Status")?;
        s.serialize_field("apiVersion", "v1")?;
        let mut metadata = serde_json::Map::new();
        if let Some(token) = &self.list_continue {
            metadata.insert("continue".to_owned(), serde_json::Value::String(token.clone()));
        }
        s.serialize_field("metadata", &metadata)?;
        s.serialize_field("status", &self.status)?;
        if !self.message.is_empty() {
            s.serialize_field("message", &self.message)?;
        }
        if self.reason != StatusReason::Unknown {
            s.serialize_field("reason", &self.reason)?;
        }
        if let Some(details) = &self.details {
            s.serialize_field("details", details)?;
        }
        if self.code != 0 {
            s.serialize_field("code", &self.code)?;
        }
        s.end()
    }
}

fn resource_details(gr: &GroupResource, name: &str) -> Option<Box<StatusDetails>> {
    Some(Box::new(StatusDetails {
        name: name.to_owned(),
        group: gr.group.clone(),
        kind: gr.resource.clone(),
        ..StatusDetails::default()
    }))
}

impl Status {
    /// A failure with `code`, `reason`, `message` and no details.
    pub fn failure(code: u16, reason: StatusReason, message: impl Into<String>) -> Self {
        Self {
            status: StatusOutcome::Failure,
            code,
            reason,
            message: message.into(),
            details: None,
            list_continue: None,
        }
    }

    /// A `Success` Status with `details` and no code (upstream's body for deletes of resources that do
    /// not return the deleted object).
    pub fn success(details: StatusDetails) -> Self {
        Self {
            status: StatusOutcome::Success,
            details: Some(Box::new(details)),
            ..Self::default()
        }
    }

    /// `NewNotFound`: 404, `jobs.batch "x" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self {
            details: resource_details(gr, name),
            ..Self::failure(404, StatusReason::NotFound, format!("{gr} {name:?} not found"))
        }
    }

    /// `NewAlreadyExists`: 409, `jobs.batch "x" already exists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self {
            details: resource_details(gr, name),
            ..Self::failure(
                409,
                StatusReason::AlreadyExists,
                format!("{gr} {name:?} already exists"),
            )
        }
    }

    /// `NewConflict` with the storage layer's optimistic-concurrency message (`the object has been
    /// modified; please apply your changes to the latest version and try again`).
    pub fn conflict(gr: &GroupResource, name: &str) -> Self {
        Self::conflict_with(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `NewConflict`: 409, `Operation cannot be fulfilled on jobs.batch "x": <reason>`.
    pub fn conflict_with(gr: &GroupResource, name: &str, reason: &str) -> Self {
        Self {
            details: resource_details(gr, name),
            ..Self::failure(
                409,
                StatusReason::Conflict,
                format!("Operation cannot be fulfilled on {gr} {name:?}: {reason}"),
            )
        }
    }

    /// `NewInvalid`: 422, `Job.batch "x" is invalid: <field errors>`; details carry the kind (not the
    /// resource) and one cause per field error. The message is upstream's aggregate
    /// (`ErrorList.ToAggregate`): repeated texts once, several errors as `[a, b]`, one without brackets.
    pub fn invalid(gk: &GroupKind, name: &str, causes: Vec<StatusCause>) -> Self {
        let mut all: Vec<String> = Vec::with_capacity(causes.len());
        for text in causes.iter().map(StatusCause::field_error_string) {
            if !all.contains(&text) {
                all.push(text);
            }
        }
        let message = match all.as_slice() {
            [] => format!("{gk} {name:?} is invalid"),
            [one] => format!("{gk} {name:?} is invalid: {one}"),
            many => format!("{gk} {name:?} is invalid: [{}]", many.join(", ")),
        };
        Self {
            details: Some(Box::new(StatusDetails {
                name: name.to_owned(),
                group: gk.group.clone(),
                kind: gk.kind.clone(),
                causes,
                ..StatusDetails::default()
            })),
            ..Self::failure(422, StatusReason::Invalid, message)
        }
    }

    /// `NewBadRequest`: 400 with `message` as is.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, StatusReason::BadRequest, message)
    }

    /// `NewMethodNotSupported`: 405, `<action> is not supported on resources of kind "jobs.batch"`.
    pub fn method_not_supported(gr: &GroupResource, action: &str) -> Self {
        Self {
            details: resource_details(gr, ""),
            ..Self::failure(
                405,
                StatusReason::MethodNotAllowed,
                format!(
                    "{action} is not supported on resources of kind {:?}",
                    gr.to_string()
                ),
            )
        }
    }

    /// The negotiation layer's 406: `only the following media types are accepted: a, b`.
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::failure(
            406,
            StatusReason::NotAcceptable,
            format!(
                "only the following media types are accepted: {}",
                accepted.join(", ")
            ),
        )
    }

    /// The negotiation layer's 415: `the body of the request was in an unknown format - accepted media
    /// types include: a, b`.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::failure(
            415,
            StatusReason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// The authentication filter's 401 (`NewUnauthorized("Unauthorized")`).
    pub fn unauthorized() -> Self {
        Self::failure(401, StatusReason::Unauthorized, "Unauthorized")
    }

    /// `NewForbidden`: 403, `jobs.batch "x" is forbidden: <reason>` (without the name when empty, and
    /// `forbidden: <reason>` without a resource).
    pub fn forbidden(gr: &GroupResource, name: &str, reason: &str) -> Self {
        let message = if gr.group.is_empty() && gr.resource.is_empty() {
            format!("forbidden: {reason}")
        } else if name.is_empty() {
            format!("{gr} is forbidden: {reason}")
        } else {
            format!("{gr} {name:?} is forbidden: {reason}")
        };
        Self {
            details: resource_details(gr, name),
            ..Self::failure(403, StatusReason::Forbidden, message)
        }
    }

    /// `NewGone` (deprecated upstream, still used in places): 410, reason `Gone`.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::failure(410, StatusReason::Gone, message)
    }

    /// `NewResourceExpired`: 410, reason `Expired`, `message` as is.
    pub fn resource_expired(message: impl Into<String>) -> Self {
        Self::failure(410, StatusReason::Expired, message)
    }

    /// The watch cache's 410 for a watch starting before retained history:
    /// `too old resource version: <requested> (<oldest retained - 1>)`.
    pub fn too_old_resource_version(requested: u64, oldest: u64) -> Self {
        Self::resource_expired(format!("too old resource version: {requested} ({oldest})"))
    }

    /// `NewInternalError`: 500, `Internal error occurred: <err>`, with the error as the only cause.
    pub fn internal_error(err: &str) -> Self {
        Self {
            details: Some(Box::new(StatusDetails {
                causes: vec![StatusCause {
                    message: err.to_owned(),
                    ..StatusCause::default()
                }],
                ..StatusDetails::default()
            })),
            ..Self::failure(
                500,
                StatusReason::InternalError,
                format!("Internal error occurred: {err}"),
            )
        }
    }

    /// `NewTimeoutError`: 504, `Timeout: <message>`, with `retryAfterSeconds`.
    pub fn timeout(message: &str, retry_after_seconds: i32) -> Self {
        Self {
            details: Some(Box::new(StatusDetails {
                retry_after_seconds,
                ..StatusDetails::default()
            })),
            ..Self::failure(504, StatusReason::Timeout, format!("Timeout: {message}"))
        }
    }

    /// go-restful's 404 for a path inside a served group/version that matches no route (e.g. an unknown
    /// resource), as kube-apiserver's service error handler renders it (`NewGenericServerResponse`):
    /// `the server could not find the requested resource`, empty details.
    pub fn route_not_found() -> Self {
        Self {
            details: Some(Box::default()),
            ..Self::failure(
                404,
                StatusReason::NotFound,
                "the server could not find the requested resource",
            )
        }
    }

    /// go-restful's 405 for a route that exists with another method, as kube-apiserver renders it:
    /// `the server does not allow this method on the requested resource`, empty details.
    pub fn route_method_not_allowed() -> Self {
        Self {
            details: Some(Box::default()),
            ..Self::failure(
                405,
                StatusReason::MethodNotAllowed,
                "the server does not allow this method on the requested resource",
            )
        }
    }

    /// `NewGenericServerResponse(422, ...)` as the patch handler returns it when a JSON patch cannot be
    /// applied: `the server rejected our request due to an error in our request`.
    pub fn unprocessable_patch() -> Self {
        Self {
            details: Some(Box::default()),
            ..Self::failure(
                422,
                StatusReason::Invalid,
                "the server rejected our request due to an error in our request",
            )
        }
    }

    /// `NewRequestEntityTooLargeError`: 413, `Request entity too large: <message>`.
    pub fn request_entity_too_large(message: &str) -> Self {
        Self::failure(
            413,
            StatusReason::RequestEntityTooLarge,
            format!("Request entity too large: {message}"),
        )
    }

    /// The HTTP status to answer with (200 for a code-less Success).
    pub fn http_status(&self) -> StatusCode {
        if self.code == 0 {
            return StatusCode::OK;
        }
        StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The Status as a JSON value (e.g. the `object` of a watch `ERROR` event).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl IntoResponse for Status {
    fn into_response(self) -> Response {
        // kube's JSON serializer uses a Go json.Encoder, which ends every document with a newline.
        let mut body = serde_json::to_vec(&self).unwrap_or_default();
        body.push(b'\n');
        let mut response = (self.http_status(), body).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // For the audit log's `responseStatus` (reason, message, details of an error).
        response.extensions_mut().insert(self);
        response
    }
}

impl From<StoreError> for Status {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { resource, key } => Status::not_found(&resource, &key.name),
            StoreError::AlreadyExists { resource, key } => Status::already_exists(&resource, &key.name),
            StoreError::Conflict {
                resource,
                key,
                message,
            } => Status::conflict_with(&resource, &key.name, &message),
            StoreError::Expired { requested, oldest } => Status::too_old_resource_version(requested, oldest),
            StoreError::InvalidObject(message) => Status::bad_request(message),
            // kube-apiserver passes a storage error that is not an API status through
            // `ErrorToAPIStatus`: 500, no reason, the error's text.
            StoreError::Unavailable(message) => Status::failure(500, StatusReason::Unknown, message),
            // Reading: the storage decoder's error, passed through `ErrorToAPIStatus` as above. Writing:
            // the encoder's, which the registry wraps as an internal error.
            StoreError::Conversion {
                message,
                write: false,
            } => Status::failure(500, StatusReason::Unknown, message),
            StoreError::Conversion { message, write: true } => Status::internal_error(&message),
            StoreError::TooLargeResourceVersion { .. } => {
                // storage.NewTooLargeResourceVersionError: retry after 1 s, one cause.
                let mut status = Status::timeout(&err.to_string(), 1);
                if let Some(details) = status.details.as_mut() {
                    details.causes.push(StatusCause {
                        reason: "ResourceVersionTooLarge".to_owned(),
                        message: "Too large resource version".to_owned(),
                        ..StatusCause::default()
                    });
                }
                status
            }
            StoreError::Initializing => Status {
                details: Some(Box::new(StatusDetails {
                    retry_after_seconds: 1,
                    ..StatusDetails::default()
                })),
                ..Status::failure(429, StatusReason::TooManyRequests, err.to_string())
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs() -> GroupResource {
        GroupResource::new("batch", "jobs")
    }

    #[test]
    fn not_found_serialises_like_kube_apiserver() {
        let body = serde_json::to_string(&Status::not_found(&jobs(), "x")).unwrap();
        assert_eq!(
            body,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"jobs.batch \"x\" not found","reason":"NotFound","details":{"name":"x","group":"batch","kind":"jobs"},"code":404}"#
        );
    }

    #[test]
    fn core_group_resource_prints_without_group() {
        let s = Status::already_exists(&GroupResource::new("", "pods"), "p");
        assert_eq!(s.message, "pods \"p\" already exists");
        let v = s.to_value();
        assert!(v["details"].get("group").is_none());
        assert_eq!(v["code"], 409);
    }

    #[test]
    fn conflict_message_matches_upstream() {
        assert_eq!(
            Status::conflict(&jobs(), "x").message,
            "Operation cannot be fulfilled on jobs.batch \"x\": the object has been modified; please apply \
             your changes to the latest version and try again"
        );
    }

    #[test]
    fn invalid_uses_kind_and_aggregates_causes() {
        let gk = GroupKind::new("batch", "Job");
        let one = Status::invalid(
            &gk,
            "",
            vec![StatusCause::field_required(
                "metadata.name",
                "name or generateName is required",
            )],
        );
        assert_eq!(
            one.message,
            "Job.batch \"\" is invalid: metadata.name: Required value: name or generateName is required"
        );
        let v = one.to_value();
        assert_eq!(v["details"]["kind"], "Job");
        assert_eq!(v["details"]["causes"][0]["reason"], "FieldValueRequired");
        assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
        assert_eq!(v["code"], 422);
        let two = Status::invalid(
            &gk,
            "j",
            vec![
                StatusCause::field_required("a", ""),
                StatusCause::field_invalid("b", "v", "bad"),
            ],
        );
        assert_eq!(
            two.message,
            "Job.batch \"j\" is invalid: [a: Required value, b: Invalid value: \"v\": bad]"
        );
    }

    #[test]
    fn method_not_supported_and_negotiation_messages() {
        assert_eq!(
            Status::method_not_supported(&jobs(), "create").message,
            "create is not supported on resources of kind \"jobs.batch\""
        );
        assert_eq!(
            Status::not_acceptable(&["application/json", "application/yaml"]).message,
            "only the following media types are accepted: application/json, application/yaml"
        );
        assert_eq!(Status::unsupported_media_type(&["application/json"]).code, 415);
        assert_eq!(
            Status::too_old_resource_version(5, 9).message,
            "too old resource version: 5 (9)"
        );
        assert_eq!(
            Status::too_old_resource_version(5, 9).reason,
            StatusReason::Expired
        );
    }

    #[test]
    fn internal_error_and_timeout_details() {
        let v = Status::internal_error("boom").to_value();
        assert_eq!(v["message"], "Internal error occurred: boom");
        assert_eq!(v["details"]["causes"][0]["message"], "boom");
        let t = Status::timeout("request did not complete within 60s", 2).to_value();
        assert_eq!(t["details"]["retryAfterSeconds"], 2);
        assert_eq!(t["code"], 504);
    }

    #[test]
    fn success_has_no_code_and_answers_200() {
        let s = Status::success(StatusDetails {
            name: "c".into(),
            kind: "configmaps".into(),
            uid: "u".into(),
            ..StatusDetails::default()
        });
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"c","kind":"configmaps","uid":"u"}}"#
        );
        assert_eq!(s.http_status(), StatusCode::OK);
    }

    #[test]
    fn round_trips_through_deserialize() {
        let s = Status::forbidden(&jobs(), "", "no");
        let back: Status = serde_json::from_value(s.to_value()).unwrap();
        assert_eq!(back, s);
        assert_eq!(s.message, "jobs.batch is forbidden: no");
    }

    #[tokio::test]
    async fn into_response_sets_code_and_json_content_type() {
        let response = Status::unauthorized().into_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["message"], "Unauthorized");
        assert_eq!(v["reason"], "Unauthorized");
    }
}
