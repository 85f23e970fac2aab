//! `admission.k8s.io` `AdmissionReview`: the request the server sends a webhook and the checks of the
//! response it gets back, as upstream's `CreateV1AdmissionReview`/`CreateV1beta1AdmissionReview` and
//! `VerifyAdmissionResponse` (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/
//! admissionreview.go`). Pure: no I/O, so the response parser is fuzzed (`fuzz/fuzz_targets/
//! admission_review.rs`).

use serde_json::{Map, Value, json};

use super::Attributes;
use super::matching::Invocation;

/// An `AdmissionReview` version the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    /// `admission.k8s.io/v1`.
    V1,
    /// `admission.k8s.io/v1beta1`.
    V1beta1,
}

impl ReviewVersion {
    /// The first version of `accepted` (the webhook's preference order) the server speaks
    /// (`CreateAdmissionObjects`); `None` is upstream's "does not accept known versions" error.
    pub fn choose(accepted: &[String]) -> Option<Self> {
        accepted.iter().find_map(|version| match version.as_str() {
            "v1" => Some(Self::V1),
            "v1beta1" => Some(Self::V1beta1),
            _ => None,
        })
    }

    /// The `apiVersion` of the review.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::V1 => "admission.k8s.io/v1",
            Self::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// Why a webhook's answer is not a usable `AdmissionReview`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// The body does not decode as an AdmissionReview (client-go's decoding error: upstream reports
    /// it as a failure to call the webhook).
    #[error("{0}")]
    Undecodable(String),
    /// It decodes but breaks `VerifyAdmissionResponse`'s rules (upstream's `received invalid webhook
    /// response: ...`).
    #[error("{0}")]
    Invalid(String),
}

/// The `status` of a denial (`response.result`, a `metav1.Status`), as the webhook wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebhookStatus {
    /// `code` (0 when absent).
    pub code: i64,
    /// `message`.
    pub message: String,
    /// `reason`.
    pub reason: String,
    /// `details`, when given.
    pub details: Option<Value>,
}

/// What a verified response says (`webhookrequest.AdmissionResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AdmissionResponse {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// A JSONPatch (decoded from base64) when the webhook mutates; `patchType` was `JSONPatch`.
    pub patch: Option<Vec<u8>>,
    /// The patch type when it was not `JSONPatch` (upstream then reports `unsupported patch type`).
    pub unsupported_patch_type: Option<String>,
    /// The denial's Status.
    pub result: Option<WebhookStatus>,
    /// `warnings`, for `Warning` headers.
    pub warnings: Vec<String>,
    /// `auditAnnotations`, in the order given.
    pub audit_annotations: Vec<(String, String)>,
}

fn group_version_kind(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn group_version_resource(group: &str, version: &str, resource: &str) -> Value {
    json!({"group": group, "version": version, "resource": resource})
}

/// `object` labelled with the version the webhook is invoked with. The webhook dispatchers convert the
/// objects to that version first ([`super::versioned`]: a custom resource through its CRD's
/// conversion), so this only sets `apiVersion`/`kind` and upstream's key order; for the callers that
/// do not convert (admission policies) it relabels, which is the fake's conversion of built-ins.
fn versioned(object: Option<&Value>, attributes: &Attributes, version: &str) -> Value {
    match object {
        Some(Value::Object(map)) => crate::api::rest::object::present(
            Value::Object(map.clone()),
            &attributes.kind_api_version(version),
            &attributes.kind,
        ),
        _ => Value::Null,
    }
}

/// The `AdmissionReview` request for `attributes` invoked as `invocation`, with field names, order and
/// `omitempty` as upstream's types.
pub fn request(version: ReviewVersion, uid: &str, attributes: &Attributes, invocation: &Invocation) -> Value {
    let mut request = Map::new();
    let a = attributes;
    request.insert("uid".to_owned(), json!(uid));
    let (kind_group, kind_version) = a.kind_group_version(&invocation.version);
    request.insert(
        "kind".to_owned(),
        group_version_kind(&kind_group, &kind_version, &a.kind),
    );
    request.insert(
        "resource".to_owned(),
        group_version_resource(&a.group, &invocation.version, &a.resource),
    );
    if !a.subresource.is_empty() {
        request.insert("subResource".to_owned(), json!(a.subresource));
    }
    let (kind_group, kind_version) = a.kind_group_version(&a.version);
    request.insert(
        "requestKind".to_owned(),
        group_version_kind(&kind_group, &kind_version, &a.kind),
    );
    request.insert(
        "requestResource".to_owned(),
        group_version_resource(&a.group, &a.version, &a.resource),
    );
    if !a.subresource.is_empty() {
        request.insert("requestSubResource".to_owned(), json!(a.subresource));
    }
    if !a.name.is_empty() {
        request.insert("name".to_owned(), json!(a.name));
    }
    if !a.namespace.is_empty() {
        request.insert("namespace".to_owned(), json!(a.namespace));
    }
    request.insert("operation".to_owned(), json!(a.operation.as_str()));
    let mut user = Map::new();
    if !a.user.name.is_empty() {
        user.insert("username".to_owned(), json!(a.user.name));
    }
    if !a.user.uid.is_empty() {
        user.insert("uid".to_owned(), json!(a.user.uid));
    }
    if !a.user.groups.is_empty() {
        user.insert("groups".to_owned(), json!(a.user.groups));
    }
    if !a.user.extra.is_empty() {
        user.insert("extra".to_owned(), json!(a.user.extra));
    }
    request.insert("userInfo".to_owned(), Value::Object(user));
    request.insert(
        "object".to_owned(),
        versioned(a.object.as_ref(), a, &invocation.version),
    );
    request.insert(
        "oldObject".to_owned(),
        versioned(a.old_object.as_ref(), a, &invocation.version),
    );
    request.insert("dryRun".to_owned(), json!(a.dry_run));
    request.insert("options".to_owned(), a.options.clone());
    json!({
        "kind": "AdmissionReview",
        "apiVersion": version.api_version(),
        "request": request,
    })
}

/// Go's `encoding/json` wording for the common ways a body is not JSON at all (what client-go's
/// decoder reports); other syntax errors keep serde's wording.
fn json_syntax_error(body: &[u8], error: &serde_json::Error) -> String {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let detail = match first {
        None => "unexpected end of JSON input".to_owned(),
        Some(b) if !matches!(b, b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
            format!(
                "invalid character {:?} looking for beginning of value",
                char::from(*b)
            )
        }
        Some(_) => error.to_string(),
    };
    format!("couldn't get version/kind; json parse error: {detail}")
}

fn string_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Parses and verifies a webhook's response body (`VerifyAdmissionResponse`) to a request of
/// `version` with `uid`; a validating webhook may not patch. Never panics, whatever the body.
pub fn parse_response(
    body: &[u8],
    version: ReviewVersion,
    uid: &str,
    mutating: bool,
) -> Result<AdmissionResponse, ResponseError> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| ResponseError::Undecodable(json_syntax_error(body, &e)))?;
    let response = response_of(&review, version)?;
    let allowed = match response.get("allowed") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(allowed)) => *allowed,
        Some(other) => {
            return Err(ResponseError::Undecodable(format!(
                "json: cannot unmarshal {} into Go struct field AdmissionResponse.response.allowed of type bool",
                go_type_name(other)
            )));
        }
    };
    let patch = patch_of(response)?;
    let unsupported_patch_type = match version {
        ReviewVersion::V1 => {
            verify_v1_identity(&review, response, uid)?;
            verify_patch_fields(response, patch.is_some(), mutating)?
        }
        // v1beta1: neither uid nor kind were verified, and a patch is always a JSONPatch.
        ReviewVersion::V1beta1 => None,
    };
    let result = response
        .get("status")
        .filter(|s| s.is_object())
        .map(|status| WebhookStatus {
            code: status.get("code").and_then(Value::as_i64).unwrap_or_default(),
            message: string_of(status, "message"),
            reason: string_of(status, "reason"),
            details: status.get("details").filter(|d| d.is_object()).cloned(),
        });
    let warnings = response
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    let audit_annotations = response
        .get("auditAnnotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
        .collect();
    Ok(AdmissionResponse {
        allowed,
        patch: if mutating { patch } else { None },
        unsupported_patch_type,
        result,
        warnings,
        audit_annotations,
    })
}

/// The review's `response` object, with Go's unmarshal errors for a review or response of the wrong
/// JSON type.
fn response_of(review: &Value, version: ReviewVersion) -> Result<&Value, ResponseError> {
    let Some(object) = review.as_object() else {
        return Err(ResponseError::Undecodable(format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
            go_type_name(review)
        )));
    };
    match object.get("response") {
        None | Some(Value::Null) => Err(ResponseError::Invalid("webhook response was absent".to_owned())),
        Some(response @ Value::Object(_)) => Ok(response),
        Some(other) => Err(ResponseError::Undecodable(format!(
            "json: cannot unmarshal {} into Go struct field AdmissionReview.response of type {}.AdmissionResponse",
            go_type_name(other),
            if version == ReviewVersion::V1 {
                "v1"
            } else {
                "v1beta1"
            }
        ))),
    }
}

/// `response.patch`, base64-decoded (`None` when absent or empty).
fn patch_of(response: &Value) -> Result<Option<Vec<u8>>, ResponseError> {
    let patch = match response.get("patch") {
        None | Some(Value::Null) => None,
        Some(Value::String(encoded)) => {
            Some(data_encoding::BASE64.decode(encoded.as_bytes()).map_err(|e| {
                ResponseError::Undecodable(format!("illegal base64 data at input byte {}", e.position))
            })?)
        }
        Some(other) => {
            return Err(ResponseError::Undecodable(format!(
                "json: cannot unmarshal {} into Go struct field AdmissionResponse.response.patch of type []uint8",
                go_type_name(other)
            )));
        }
    };
    Ok(patch.filter(|p| !p.is_empty()))
}

/// A v1 response answers this request (`response.uid`) and is an `admission.k8s.io/v1`
/// `AdmissionReview`.
fn verify_v1_identity(review: &Value, response: &Value, uid: &str) -> Result<(), ResponseError> {
    let got_uid = string_of(response, "uid");
    if got_uid != uid {
        return Err(ResponseError::Invalid(format!(
            "expected response.uid={uid:?}, got {got_uid:?}"
        )));
    }
    let (api_version, kind) = (string_of(review, "apiVersion"), string_of(review, "kind"));
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        let (group, gv_version) = match api_version.split_once('/') {
            Some((group, v)) => (group.to_owned(), v.to_owned()),
            None => (String::new(), api_version.clone()),
        };
        return Err(ResponseError::Invalid(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{gv_version}, Kind={kind}"
        )));
    }
    Ok(())
}

/// A v1 response's patch and patch type: both or neither from a mutating webhook (the patch type, if
/// not `JSONPatch`, is returned as unsupported), neither from a validating one.
fn verify_patch_fields(
    response: &Value,
    has_patch: bool,
    mutating: bool,
) -> Result<Option<String>, ResponseError> {
    let patch_type = response.get("patchType").and_then(Value::as_str);
    let has_patch_type = response.get("patchType").is_some_and(|t| !t.is_null());
    let invalid = |message: &str| Err(ResponseError::Invalid(message.to_owned()));
    if !mutating {
        if has_patch {
            return invalid("validating webhook may not return response.patch");
        }
        if has_patch_type {
            return invalid("validating webhook may not return response.patchType");
        }
        return Ok(None);
    }
    if has_patch && !has_patch_type {
        return invalid("webhook returned response.patch but not response.patchType");
    }
    if !has_patch && has_patch_type {
        return invalid("webhook returned response.patchType but not response.patch");
    }
    match patch_type {
        Some("") => invalid("webhook returned invalid response.patchType of \"\""),
        Some("JSONPatch") | None => Ok(None),
        Some(other) => Ok(Some(other.to_owned())),
    }
}

/// How Go's `encoding/json` names a JSON value's type in its unmarshal errors.
fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::rest::admission::Operation;

    fn attributes() -> Attributes {
        Attributes {
            operation: Operation::Create,
            group: "apps".to_owned(),
            version: "v1".to_owned(),
            resource: "deployments".to_owned(),
            subresource: String::new(),
            kind: "Deployment".to_owned(),
            kind_api_version: None,
            namespace: "default".to_owned(),
            name: "web".to_owned(),
            object: Some(json!({"metadata": {"name": "web"}})),
            old_object: None,
            dry_run: true,
            options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}),
            user: mvp_core::UserInfo {
                name: "alice".to_owned(),
                groups: vec!["system:authenticated".to_owned()],
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_request_names_the_invoked_and_the_requested_version() {
        let invocation = Invocation {
            version: "v1beta1".to_owned(),
        };
        let review = request(ReviewVersion::V1, "u-1", &attributes(), &invocation);
        insta::assert_json_snapshot!(review);
    }

    #[test]
    fn versions_are_chosen_in_the_webhooks_order() {
        let list = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            ReviewVersion::choose(&list(&["v2", "v1beta1", "v1"])),
            Some(ReviewVersion::V1beta1)
        );
        assert_eq!(
            ReviewVersion::choose(&list(&["v1", "v1beta1"])),
            Some(ReviewVersion::V1)
        );
        assert_eq!(ReviewVersion::choose(&list(&["v2"])), None);
    }

    fn v1(response: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
        )
        .expect("json")
    }

    #[test]
    fn a_mutating_response_carries_its_decoded_patch_warnings_and_annotations() {
        let body = v1(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch",
            "patch": data_encoding::BASE64.encode(br#"[{"op":"add","path":"/x","value":1}]"#),
            "warnings": ["careful"], "auditAnnotations": {"k": "v"}}));
        let parsed = parse_response(&body, ReviewVersion::V1, "u", true).expect("valid");
        assert!(parsed.allowed);
        assert_eq!(
            parsed.patch.as_deref(),
            Some(&br#"[{"op":"add","path":"/x","value":1}]"#[..])
        );
        assert_eq!(parsed.warnings, vec!["careful"]);
        assert_eq!(parsed.audit_annotations, vec![("k".to_owned(), "v".to_owned())]);
    }

    #[test]
    fn invalid_responses_get_upstreams_errors() {
        let cases: Vec<(Vec<u8>, bool, ResponseError)> = vec![
            (b"garbage".to_vec(), true, ResponseError::Undecodable(
                "couldn't get version/kind; json parse error: invalid character 'g' looking for beginning of value".to_owned())),
            (b"".to_vec(), true, ResponseError::Undecodable(
                "couldn't get version/kind; json parse error: unexpected end of JSON input".to_owned())),
            (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(), true,
                ResponseError::Invalid("webhook response was absent".to_owned())),
            (v1(json!({"uid": "other", "allowed": true})), true,
                ResponseError::Invalid("expected response.uid=\"u\", got \"other\"".to_owned())),
            (br#"{"response":{"uid":"u","allowed":true}}"#.to_vec(), true, ResponseError::Invalid(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind=".to_owned())),
            (v1(json!({"uid": "u", "allowed": true, "patch": "W10="})), true, ResponseError::Invalid(
                "webhook returned response.patch but not response.patchType".to_owned())),
            (v1(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch"})), true, ResponseError::Invalid(
                "webhook returned response.patchType but not response.patch".to_owned())),
            (v1(json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "JSONPatch"})), false,
                ResponseError::Invalid("validating webhook may not return response.patch".to_owned())),
            (v1(json!({"uid": "u", "allowed": "yes"})), true, ResponseError::Undecodable(
                "json: cannot unmarshal string into Go struct field AdmissionResponse.response.allowed of type bool".to_owned())),
            (v1(json!({"uid": "u", "allowed": true, "patch": "!!", "patchType": "JSONPatch"})), true,
                ResponseError::Undecodable("illegal base64 data at input byte 0".to_owned())),
        ];
        for (body, mutating, expected) in cases {
            let got = parse_response(&body, ReviewVersion::V1, "u", mutating);
            assert_eq!(got, Err(expected), "{}", String::from_utf8_lossy(&body));
        }
    }

    #[test]
    fn v1beta1_responses_are_not_checked_for_uid_or_kind() {
        let body = br#"{"response":{"allowed":false,"status":{"message":"no","code":418}}}"#;
        let parsed = parse_response(body, ReviewVersion::V1beta1, "u", false).expect("valid");
        assert!(!parsed.allowed);
        let status = parsed.result.expect("status");
        assert_eq!((status.code, status.message.as_str()), (418, "no"));
    }
}
