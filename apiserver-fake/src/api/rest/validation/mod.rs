//! Built-in validation (`ValidateCreate` / `ValidateUpdate` of the registries' strategies) of the kinds
//! users create most, with upstream's rules and wording: `pkg/apis/<group>/validation/validation.go`.
//!
//! Validators build a [`FieldErrors`] list of [`FieldError`]s (upstream's `field.ErrorList`), which
//! [`into_causes`] renders as kube-apiserver renders each `field.Error` into a
//! `StatusCause` (`staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go`, `ErrorBody`),
//! for [`Status::invalid`](crate::api::status::Status::invalid) to aggregate into the 422 message.
//!
//! One module per area: [`pod`] (the pod spec of Pods and every pod template), [`workloads`]
//! (Deployment, ReplicaSet, StatefulSet, DaemonSet, ReplicationController, PodTemplate, Job, CronJob),
//! [`service`], [`config`] (ConfigMap, Secret, Namespace, ServiceAccount), [`rbac`], [`cluster`]
//! (Lease, Ingress, NetworkPolicy, PersistentVolumeClaim), [`admission_registration`] (admission policies,
//! their bindings, webhook configurations: every CEL expression compiles). Object names are checked before this, by
//! [`super::names`]; required fields and enumerations the OpenAPI schema declares by
//! [`super::field_validation::schema_violations`].

pub(crate) mod admission_registration;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod custom_resource_definition;
pub(crate) mod object_meta;
pub(crate) mod pod;
mod pod_update;
pub(crate) mod rbac;
pub(crate) mod service;
mod spec_diff;
pub(crate) mod workloads;

use std::fmt;

use serde_json::Value;

use super::ResourceInfo;
use super::feature_gates::Gate;
use crate::api::catalog::KubeVersion;
use crate::api::status::StatusCause;

/// `field.Path`: where in the object an error is, printed as upstream prints it
/// (`spec.containers[0].resources.limits[cpu]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(String);

impl Path {
    /// A path of one field (`spec`).
    pub(crate) fn new(root: &str) -> Self {
        Self(root.to_owned())
    }

    /// `fldPath.Child("name")`: a field of this one.
    pub(crate) fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// `fldPath.Index(i)`: an item of a list.
    pub(crate) fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// `fldPath.Key(k)`: an entry of a map.
    pub(crate) fn key(&self, key: &str) -> Self {
        Self(format!("{}[{key}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `field.ErrorType`: the cause type (`FieldValueRequired`) and how the body starts (`Required value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorType {
    /// `FieldValueNotFound`, `Not found`.
    NotFound,
    /// `FieldValueRequired`, `Required value` (the value is never shown).
    Required,
    /// `FieldValueDuplicate`, `Duplicate value`.
    Duplicate,
    /// `FieldValueInvalid`, `Invalid value`.
    Invalid,
    /// `FieldValueNotSupported`, `Unsupported value`.
    NotSupported,
    /// `FieldValueForbidden`, `Forbidden` (the value is never shown).
    Forbidden,
    /// `FieldValueTooLong`, `Too long` (the value is never shown).
    TooLong,
}

impl ErrorType {
    /// The `StatusCause` type.
    pub(crate) fn cause_type(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
        }
    }

    /// `ErrorType.String()`.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
        }
    }

    /// Whether the body leaves the bad value out whatever it is.
    fn omits_value(self) -> bool {
        matches!(self, Self::Required | Self::Forbidden | Self::TooLong)
    }
}

/// The bad value of a [`FieldError`], typed as Go's `%v`/`%q` printing needs it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BadValue {
    /// No value (`omitValue`, or a type whose body never shows it).
    Omit,
    /// A string, printed quoted (`"x"`).
    Str(String),
    /// An integer, printed bare (`70000`).
    Int(i64),
    /// A string map (labels), printed as Go's `%#v` before 1.34 and as JSON from 1.34
    /// (`map[string]string{"app":"web"}`, then `{"app":"web"}`).
    StringMap(Vec<(String, String)>),
    /// A string list, printed `[]string{"a", "b"}` before 1.34 and `["a","b"]` from 1.34.
    StringList(Vec<String>),
    /// A value whose Go rendering the caller knows: `go` before 1.34, `json` from 1.34.
    Rendered {
        /// Go's `%#v` of the value.
        go: String,
        /// The value as JSON.
        json: String,
    },
    /// A composite value printed as JSON in every version (before 1.34 upstream prints Go's `%#v` of
    /// the internal struct, which the fake does not reproduce).
    Json(Value),
}

/// One `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    /// What is wrong.
    pub kind: ErrorType,
    /// Where.
    pub field: Path,
    /// The offending value.
    pub value: BadValue,
    /// The detail after the value.
    pub detail: String,
}

impl FieldError {
    /// `field.Required`.
    pub(crate) fn required(field: &Path, detail: &str) -> Self {
        Self::new(ErrorType::Required, field, BadValue::Omit, detail)
    }

    /// `field.Invalid`.
    pub(crate) fn invalid(field: &Path, value: BadValue, detail: &str) -> Self {
        Self::new(ErrorType::Invalid, field, value, detail)
    }

    /// `field.Invalid` of a string value.
    pub(crate) fn invalid_str(field: &Path, value: &str, detail: &str) -> Self {
        Self::invalid(field, BadValue::Str(value.to_owned()), detail)
    }

    /// `field.NotSupported`: the detail lists the supported values, quoted.
    pub(crate) fn not_supported(field: &Path, value: &str, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(
            ErrorType::NotSupported,
            field,
            BadValue::Str(value.to_owned()),
            &detail,
        )
    }

    /// `field.Duplicate`.
    pub(crate) fn duplicate(field: &Path, value: BadValue) -> Self {
        Self::new(ErrorType::Duplicate, field, value, "")
    }

    /// `field.NotFound`.
    pub(crate) fn not_found(field: &Path, value: &str) -> Self {
        Self::new(ErrorType::NotFound, field, BadValue::Str(value.to_owned()), "")
    }

    /// `field.Forbidden`.
    pub(crate) fn forbidden(field: &Path, detail: &str) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::Omit, detail)
    }

    /// `field.TooLong`: `must have at most <max> bytes`.
    pub(crate) fn too_long(field: &Path, max: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field,
            BadValue::Omit,
            &format!("must have at most {max} bytes"),
        )
    }

    fn new(kind: ErrorType, field: &Path, value: BadValue, detail: &str) -> Self {
        Self {
            kind,
            field: field.clone(),
            value,
            detail: detail.to_owned(),
        }
    }

    /// `ErrorBody()` as a kube-apiserver of `version` prints it: the type's text, the value unless the
    /// type omits it, and `: <detail>`.
    pub(crate) fn body(&self, version: KubeVersion) -> String {
        let mut body = self.kind.text().to_owned();
        if !self.kind.omits_value() {
            match &self.value {
                BadValue::Omit => {}
                BadValue::Str(s) => body.push_str(&format!(": {}", go_quote(s))),
                BadValue::Int(i) => body.push_str(&format!(": {i}")),
                BadValue::StringList(items) => {
                    let quoted: Vec<String> = items.iter().map(|i| go_quote(i)).collect();
                    if version.minor >= 34 {
                        body.push_str(&format!(": [{}]", quoted.join(",")));
                    } else {
                        body.push_str(&format!(": []string{{{}}}", quoted.join(", ")));
                    }
                }
                BadValue::Rendered { go, json } => {
                    body.push_str(": ");
                    body.push_str(if version.minor >= 34 { json } else { go });
                }
                BadValue::Json(value) => {
                    body.push_str(": ");
                    body.push_str(&serde_json::to_string(value).unwrap_or_default());
                }
                BadValue::StringMap(entries) => {
                    let mut entries = entries.clone();
                    entries.sort();
                    let inner: Vec<String> = entries
                        .iter()
                        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v)))
                        .collect();
                    // From 1.34 (kubernetes/kubernetes#132314, "Nicer value rendering in API
                    // errors") composite values print as JSON, before as Go's `%#v`.
                    if version.minor >= 34 {
                        body.push_str(&format!(": {{{}}}", inner.join(",")));
                    } else {
                        body.push_str(&format!(": map[string]string{{{}}}", inner.join(", ")));
                    }
                }
            }
        }
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }

    /// The `StatusCause` `NewInvalid` makes of this error.
    pub(crate) fn to_cause(&self, version: KubeVersion) -> StatusCause {
        StatusCause {
            reason: self.kind.cause_type().to_owned(),
            message: self.body(version),
            field: self.field.to_string(),
        }
    }
}

/// Go's `%q` of a string (`strconv.Quote`): Rust's `{:?}` differs only on a few escapes.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `field.ErrorList`.
pub(crate) type FieldErrors = Vec<FieldError>;

/// Renders `errors` as `StatusCause`s, in order.
pub(crate) fn into_causes(errors: &[FieldError], version: KubeVersion) -> Vec<StatusCause> {
    errors.iter().map(|e| e.to_cause(version)).collect()
}

/// The `ValidateCreate` (`old` `None`) or `ValidateUpdate` errors of a built-in object of `resource`
/// in a server emulating `version` (empty for kinds not covered and for custom resources): the rules
/// a feature gate decides follow that gate's default at `version` ([`Context`]). Errors render at the
/// binary's version ([`into_causes`]), which the caller passes there.
pub(crate) fn validate(
    resource: &ResourceInfo,
    version: KubeVersion,
    object: &Value,
    old: Option<&Value>,
) -> FieldErrors {
    if resource.custom {
        return Vec::new();
    }
    let ctx = Context::new(resource, version, object, old);
    let compilation = admission_registration::Compilation::at_write(version, old);
    match (resource.group.as_str(), resource.resource.as_str()) {
        ("", "pods") => pod::validate_pod(&ctx, object, old),
        ("", "podtemplates") => workloads::validate_pod_template(&ctx, object),
        ("", "replicationcontrollers") => workloads::validate_replication_controller(&ctx, object),
        ("apps", "deployments") => {
            workloads::validate_selector_immutable(object, old, workloads::validate_deployment(&ctx, object))
        }
        ("apps", "replicasets") => {
            workloads::validate_selector_immutable(object, old, workloads::validate_replica_set(&ctx, object))
        }
        ("apps", "statefulsets") => workloads::validate_stateful_set(&ctx, object, old, version),
        ("apps", "daemonsets") => {
            workloads::validate_selector_immutable(object, old, workloads::validate_daemon_set(&ctx, object))
        }
        ("batch", "jobs") => workloads::validate_job(&ctx, object, old),
        ("batch", "cronjobs") => workloads::validate_cron_job(&ctx, object),
        ("", "services") => service::validate_service(&ctx, object, old),
        ("", "configmaps") => config::validate_config_map_update(object, old),
        ("", "secrets") => config::validate_secret(object, old),
        ("", "namespaces") => config::validate_namespace(object),
        ("", "serviceaccounts") => config::validate_service_account(object),
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => {
            rbac::validate_role(object, resource.resource == "roles")
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            rbac::validate_role_binding(object, resource.resource == "rolebindings", old)
        }
        ("coordination.k8s.io", "leases") => cluster::validate_lease(object),
        ("networking.k8s.io", "ingresses") => cluster::validate_ingress(object),
        ("networking.k8s.io", "networkpolicies") => cluster::validate_network_policy(object),
        ("", "persistentvolumeclaims") => {
            cluster::validate_persistent_volume_claim_update(object, old, version)
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            admission_registration::validate_validating_admission_policy_at(object, compilation)
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            admission_registration::validate_validating_admission_policy_binding(object)
        }
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies") => {
            admission_registration::validate_mutating_admission_policy_at(object, compilation)
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            admission_registration::validate_webhook_configuration_at(object, false, compilation)
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            admission_registration::validate_webhook_configuration_at(object, true, compilation)
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            custom_resource_definition::validate_custom_resource_definition(object, old)
        }
        _ => Vec::new(),
    }
}

/// What validators may depend on besides the object: upstream's validation options
/// (`PodValidationOptions`, `GetValidationOptionsFromPodSpecAndMeta` in `pkg/api/pod/util.go`), each
/// on when its feature gate is on at the emulated version or when the stored object (on update)
/// already needs it, so that an object a newer minor stored stays writable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    /// `AllowRelaxedEnvironmentVariableValidation`: environment variable names of any printable ASCII
    /// but `=` (`RelaxedEnvironmentVariableValidation`, on from 1.32), else C-like names only.
    pub relaxed_env_names: bool,
}

impl Context {
    /// The options of writing `object` of `resource` at `version` over `old` (`None` on create).
    pub(crate) fn new(
        resource: &ResourceInfo,
        version: KubeVersion,
        object: &Value,
        old: Option<&Value>,
    ) -> Self {
        let pod_specs =
            super::defaults::disabled_fields::pod_spec_pointer(&resource.group, &resource.resource)
                .and_then(|pointer| Some((object.pointer(pointer)?, old?.pointer(pointer)?)));
        Self {
            relaxed_env_names: Gate::RelaxedEnvironmentVariableValidation.enabled(version)
                || pod_specs.is_some_and(|(spec, old)| pod::relaxed_env_names_in_use(spec, old)),
        }
    }
}

// Reading the JSON object as Go reads its struct: a missing or null field is the zero value.

/// The string at `pointer`, `""` when missing or not a string.
pub(crate) fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The list at `pointer`, empty when missing.
pub(crate) fn list_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The string map at `pointer` (labels, selectors, data), in key order.
pub(crate) fn string_map_at(value: &Value, pointer: &str) -> Vec<(String, String)> {
    value
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The integer at `pointer`, when set.
pub(crate) fn int_at(value: &Value, pointer: &str) -> Option<i64> {
    value.pointer(pointer).and_then(Value::as_i64)
}

/// `ValidateNonnegativeField`: `must be greater than or equal to 0`.
pub(crate) fn nonnegative(errors: &mut FieldErrors, value: Option<i64>, field: &Path) {
    if let Some(v) = value.filter(|v| *v < 0) {
        errors.push(FieldError::invalid(
            field,
            BadValue::Int(v),
            "must be greater than or equal to 0",
        ));
    }
}

/// `ValidateDNS1123Label`: one `Invalid` per message of `IsDNS1123Label`.
pub(crate) fn dns1123_label(errors: &mut FieldErrors, value: &str, field: &Path) {
    for message in super::names::NameRule::Dns1123Label.violations(value) {
        errors.push(FieldError::invalid_str(field, value, &message));
    }
}

/// `ValidateDNS1123Subdomain`.
pub(crate) fn dns1123_subdomain(errors: &mut FieldErrors, value: &str, field: &Path) {
    for message in super::names::NameRule::Dns1123Subdomain.violations(value) {
        errors.push(FieldError::invalid_str(field, value, &message));
    }
}

#[cfg(test)]
mod kinds_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> KubeVersion {
        KubeVersion { major: 1, minor }
    }

    #[test]
    fn bodies_render_as_error_body_does() {
        let path = Path::new("spec").child("ports").index(0).child("port");
        assert_eq!(path.to_string(), "spec.ports[0].port");
        assert_eq!(FieldError::required(&path, "").body(v(32)), "Required value");
        assert_eq!(
            FieldError::invalid(
                &path,
                BadValue::Int(70000),
                "must be between 1 and 65535, inclusive"
            )
            .body(v(32)),
            "Invalid value: 70000: must be between 1 and 65535, inclusive"
        );
        assert_eq!(
            FieldError::not_supported(&path, "X", &["A", "B"]).body(v(32)),
            "Unsupported value: \"X\": supported values: \"A\", \"B\""
        );
        assert_eq!(FieldError::forbidden(&path, "no").body(v(32)), "Forbidden: no");
        assert_eq!(
            FieldError::too_long(&Path::new(""), 1048576).body(v(32)),
            "Too long: must have at most 1048576 bytes"
        );
        assert_eq!(
            FieldError::duplicate(&path, BadValue::Str("c".into())).body(v(32)),
            "Duplicate value: \"c\""
        );
        assert_eq!(FieldError::not_found(&path, "v").body(v(32)), "Not found: \"v\"");
        assert_eq!(
            Path::new("r").child("limits").key("cpu").to_string(),
            "r.limits[cpu]"
        );
    }

    #[test]
    fn maps_print_as_go_values_before_1_34_and_json_after() {
        let labels = BadValue::StringMap(vec![("b".into(), "2".into()), ("a".into(), "1".into())]);
        let e = FieldError::invalid(&Path::new("l"), labels, "d");
        assert_eq!(
            e.body(v(32)),
            "Invalid value: map[string]string{\"a\":\"1\", \"b\":\"2\"}: d"
        );
        assert_eq!(e.body(v(33)), e.body(v(28)));
        assert_eq!(e.body(v(34)), "Invalid value: {\"a\":\"1\",\"b\":\"2\"}: d");
    }

    #[test]
    fn causes_carry_type_field_and_body() {
        let cause = FieldError::required(&Path::new("spec").child("containers"), "").to_cause(v(30));
        assert_eq!(cause.reason, "FieldValueRequired");
        assert_eq!(cause.field, "spec.containers");
        assert_eq!(cause.message, "Required value");
    }
}
