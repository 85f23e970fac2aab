//! Workloads: what `pkg/apis/apps/validation`, `pkg/apis/batch/validation` and the core validation of
//! ReplicationControllers and PodTemplates check beyond the pod spec ([`super::pod`]): selectors
//! (required, not empty, matching the template's labels), replica counts and other non-negative
//! fields, the restart policies each controller allows, and what an update may not change (a Job's
//! selector and template, a StatefulSet's spec outside `replicas`, `template`, `updateStrategy`, ...).
//! A CronJob's schedule is parsed as `robfig/cron`'s standard parser does.

use serde_json::Value;

use super::pod::validate_pod_template_spec;
use super::{
    BadValue, Context, FieldError, FieldErrors, Path, int_at, list_at, nonnegative, str_at, string_map_at,
};
use crate::api::catalog::KubeVersion;

/// `apivalidation.FieldImmutableErrorMsg`.
pub(crate) const FIELD_IMMUTABLE: &str = "field is immutable";

/// `ValidatePodTemplate`.
pub(crate) fn validate_pod_template(ctx: &Context, object: &Value) -> FieldErrors {
    let template = object.get("template").unwrap_or(&Value::Null);
    validate_pod_template_spec(ctx, template, &Path::new("template"))
}

/// `ValidateReplicationControllerSpec`.
pub(crate) fn validate_replication_controller(ctx: &Context, object: &Value) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = FieldErrors::new();
    nonnegative(
        &mut errors,
        int_at(spec, "/minReadySeconds"),
        &path.child("minReadySeconds"),
    );
    let selector = string_map_at(spec, "/selector");
    if selector.is_empty() {
        errors.push(FieldError::required(&path.child("selector"), ""));
    }
    nonnegative(&mut errors, int_at(spec, "/replicas"), &path.child("replicas"));
    let template_path = path.child("template");
    match spec.get("template").filter(|t| !t.is_null()) {
        None => errors.push(FieldError::required(&template_path, "")),
        Some(template) => {
            let labels = string_map_at(template, "/metadata/labels");
            let matches = selector
                .iter()
                .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v));
            if !selector.is_empty() && !matches {
                errors.push(selector_mismatch(&template_path, labels));
            }
            errors.extend(validate_pod_template_spec(ctx, template, &template_path));
            restart_always(&mut errors, template, &template_path);
        }
    }
    errors
}

/// The strategy's `ValidateUpdate` of a Deployment, ReplicaSet or DaemonSet written through apps/v1:
/// the kind's spec validation, then the selector may not change (`ValidateImmutableField`, appended
/// last as `deploymentStrategy.ValidateUpdate` and its siblings append it).
pub(crate) fn validate_selector_immutable(
    object: &Value,
    old: Option<&Value>,
    mut errors: FieldErrors,
) -> FieldErrors {
    if let Some(old) = old {
        let selector = object.pointer("/spec/selector").unwrap_or(&Value::Null);
        let old_selector = old.pointer("/spec/selector").unwrap_or(&Value::Null);
        if !semantic_eq(selector, old_selector) {
            errors.push(FieldError::invalid(
                &Path::new("spec").child("selector"),
                selector_value(selector),
                FIELD_IMMUTABLE,
            ));
        }
    }
    errors
}

/// `apiequality.Semantic.DeepEqual` of two JSON values as the fake stores them: a missing field, a
/// `null`, an empty list and an empty map are the same Go zero value.
pub(crate) fn semantic_eq(a: &Value, b: &Value) -> bool {
    fn empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Array(items) => items.is_empty(),
            Value::Object(map) => map.is_empty(),
            _ => false,
        }
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().all(|k| {
                let (l, r) = (x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null));
                semantic_eq(l, r)
            })
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(l, r)| semantic_eq(l, r))
        }
        _ => (empty(a) && empty(b)) || a == b,
    }
}

/// `ValidateDeploymentStrategy`: `rollingUpdate` only with the `RollingUpdate` type, and then valid.
fn deployment_strategy(spec: &Value, path: &Path, errors: &mut FieldErrors) {
    let strategy = spec.get("strategy").unwrap_or(&Value::Null);
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match str_at(strategy, "/type") {
        "Recreate" => {
            if rolling.is_some() {
                errors.push(FieldError::forbidden(
                    &path.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match rolling {
            None => errors.push(FieldError::required(
                &path.child("rollingUpdate"),
                "this should be defaulted and never be nil",
            )),
            Some(rolling) => rolling_update_deployment(rolling, &path.child("rollingUpdate"), errors),
        },
        kind => {
            // `field.NotSupported(fldPath, strategy, ...)`: the whole internal struct is the value.
            let rolling_go = if rolling.is_some() {
                "(*apps.RollingUpdateDeployment)(...)"
            } else {
                "(*apps.RollingUpdateDeployment)(nil)"
            };
            errors.push(FieldError {
                kind: super::ErrorType::NotSupported,
                field: path.clone(),
                value: BadValue::Rendered {
                    go: format!(
                        "apps.DeploymentStrategy{{Type:{}, RollingUpdate:{rolling_go}}}",
                        go_string(kind)
                    ),
                    json: serde_json::to_string(&serde_json::json!({"Type": kind, "RollingUpdate": rolling}))
                        .unwrap_or_default(),
                },
                detail: "supported values: \"Recreate\", \"RollingUpdate\"".to_owned(),
            });
        }
    }
}

/// `ValidateRollingUpdateDeployment`: both bounds non-negative ints or valid percentages, not both
/// zero, `maxUnavailable` at most 100%.
fn rolling_update_deployment(rolling: &Value, path: &Path, errors: &mut FieldErrors) {
    let unavailable = IntOrString::of(rolling.get("maxUnavailable"));
    let surge = IntOrString::of(rolling.get("maxSurge"));
    let unavailable_path = path.child("maxUnavailable");
    unavailable.validate_positive(&unavailable_path, errors);
    surge.validate_positive(&path.child("maxSurge"), errors);
    if unavailable.value() == 0 && surge.value() == 0 {
        errors.push(FieldError::invalid(
            &unavailable_path,
            unavailable.bad_value(),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    if unavailable.percent().is_some_and(|p| p > 100) {
        errors.push(FieldError::invalid(
            &unavailable_path,
            unavailable.bad_value(),
            "must not be greater than 100%",
        ));
    }
}

/// `IsValidPercent`'s message (`RegexError` with its examples).
const PERCENT_MESSAGE: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. \
    '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// An `intstr.IntOrString` as decoded (a missing one is the zero value, the int 0).
#[derive(Debug, Clone, Copy)]
enum IntOrString<'a> {
    /// `intstr.Int`.
    Int(i64),
    /// `intstr.String`.
    Str(&'a str),
}

impl<'a> IntOrString<'a> {
    fn of(value: Option<&'a Value>) -> Self {
        match value {
            Some(Value::String(s)) => Self::Str(s),
            Some(other) => Self::Int(other.as_i64().unwrap_or_default()),
            None => Self::Int(0),
        }
    }

    /// `getPercentValue`: the number of a valid percentage (`^[0-9]+%$`).
    fn percent(self) -> Option<i64> {
        let Self::Str(s) = self else { return None };
        let digits = s.strip_suffix('%')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(digits.parse().unwrap_or(i64::MAX))
    }

    /// `getIntOrPercentValue`: the percentage, else `IntValue()` (a string that is no integer is 0).
    fn value(self) -> i64 {
        match (self.percent(), self) {
            (Some(p), _) => p,
            (None, Self::Int(i)) => i,
            (None, Self::Str(s)) => s.parse().unwrap_or_default(),
        }
    }

    /// `ValidatePositiveIntOrPercent`.
    fn validate_positive(self, path: &Path, errors: &mut FieldErrors) {
        match self {
            Self::Str(_) if self.percent().is_none() => {
                errors.push(FieldError::invalid(path, self.bad_value(), PERCENT_MESSAGE));
            }
            Self::Str(_) => {}
            Self::Int(i) => nonnegative(errors, Some(i), path),
        }
    }

    /// The value as a bad value: Go's `%#v` of the struct before 1.34, its JSON from 1.34.
    fn bad_value(self) -> BadValue {
        match self {
            Self::Int(i) => BadValue::Rendered {
                go: format!("intstr.IntOrString{{Type:0, IntVal:{i}, StrVal:\"\"}}"),
                json: i.to_string(),
            },
            Self::Str(s) => BadValue::Rendered {
                go: format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}", go_string(s)),
                json: serde_json::to_string(s).unwrap_or_default(),
            },
        }
    }
}

/// Go's `%q` (`%#v`) of a string.
fn go_string(s: &str) -> String {
    super::go_quote(s)
}

/// `ValidateDeploymentSpec`.
pub(crate) fn validate_deployment(ctx: &Context, object: &Value) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = FieldErrors::new();
    nonnegative(&mut errors, int_at(spec, "/replicas"), &path.child("replicas"));
    let selector = required_selector(ctx, spec, &path, "deployment", &mut errors);
    template_for_replica_set(ctx, spec, selector.as_ref(), &path, &mut errors);
    deployment_strategy(spec, &path.child("strategy"), &mut errors);
    let min_ready = int_at(spec, "/minReadySeconds");
    nonnegative(&mut errors, min_ready, &path.child("minReadySeconds"));
    nonnegative(
        &mut errors,
        int_at(spec, "/revisionHistoryLimit"),
        &path.child("revisionHistoryLimit"),
    );
    if let Some(deadline) = int_at(spec, "/progressDeadlineSeconds") {
        let at = path.child("progressDeadlineSeconds");
        nonnegative(&mut errors, Some(deadline), &at);
        if deadline <= min_ready.unwrap_or(0) {
            errors.push(FieldError::invalid(
                &at,
                BadValue::Int(deadline),
                "must be greater than minReadySeconds",
            ));
        }
    }
    errors
}

/// `ValidateReplicaSetSpec`.
pub(crate) fn validate_replica_set(ctx: &Context, object: &Value) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = FieldErrors::new();
    nonnegative(&mut errors, int_at(spec, "/replicas"), &path.child("replicas"));
    nonnegative(
        &mut errors,
        int_at(spec, "/minReadySeconds"),
        &path.child("minReadySeconds"),
    );
    // Upstream's message says "deployment" for ReplicaSets too.
    let selector = required_selector(ctx, spec, &path, "deployment", &mut errors);
    template_for_replica_set(ctx, spec, selector.as_ref(), &path, &mut errors);
    errors
}

/// `ValidateStatefulSetSpec` (which, as upstream, does not validate the template's pod spec), and on
/// update the fields that may change at `version`.
pub(crate) fn validate_stateful_set(
    ctx: &Context,
    object: &Value,
    old: Option<&Value>,
    version: KubeVersion,
) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = FieldErrors::new();
    match str_at(spec, "/podManagementPolicy") {
        "" => errors.push(FieldError::required(&path.child("podManagementPolicy"), "")),
        "OrderedReady" | "Parallel" => {}
        other => errors.push(FieldError::invalid_str(
            &path.child("podManagementPolicy"),
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    nonnegative(&mut errors, int_at(spec, "/replicas"), &path.child("replicas"));
    nonnegative(
        &mut errors,
        int_at(spec, "/minReadySeconds"),
        &path.child("minReadySeconds"),
    );
    let selector = required_selector(ctx, spec, &path, "statefulset", &mut errors);
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_path = path.child("template");
    if let Some(selector) = &selector
        && !selector.is_empty()
        && !selector.matches(template)
    {
        errors.push(selector_mismatch(
            &template_path,
            string_map_at(template, "/metadata/labels"),
        ));
    }
    restart_always(&mut errors, template, &template_path);
    no_active_deadline(&mut errors, template, &template_path, "StatefulSet");
    if let Some(old) = old.and_then(|o| o.get("spec")) {
        stateful_set_update(spec, old, version, &mut errors);
    }
    errors
}

/// `ValidateStatefulSetUpdate`'s rule: only `replicas`, `ordinals`, `template`, `updateStrategy`,
/// `persistentVolumeClaimRetentionPolicy`, `minReadySeconds` and (from 1.33, kubernetes/kubernetes
/// issue 130263) `revisionHistoryLimit` may change; anything else (the selector,
/// `volumeClaimTemplates`, `serviceName`, ...) is one `spec: Forbidden` whose list names them.
fn stateful_set_update(spec: &Value, old: &Value, version: KubeVersion, errors: &mut FieldErrors) {
    let history_mutable = version.minor >= 33;
    let mut mutable = vec![
        "replicas",
        "template",
        "updateStrategy",
        "minReadySeconds",
        "ordinals",
        "persistentVolumeClaimRetentionPolicy",
    ];
    if history_mutable {
        mutable.push("revisionHistoryLimit");
    }
    let strip = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(map) = spec.as_object_mut() {
            for field in &mutable {
                map.remove(*field);
            }
        }
        spec
    };
    if !semantic_eq(&strip(spec), &strip(old)) {
        let detail = if history_mutable {
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', \
             'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and \
             'minReadySeconds' are forbidden"
        } else {
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', \
             'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
        };
        errors.push(FieldError::forbidden(&Path::new("spec"), detail));
    }
}

/// `ValidateDaemonSetSpec`.
pub(crate) fn validate_daemon_set(ctx: &Context, object: &Value) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = FieldErrors::new();
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let parsed = selector.map(LabelSelector::of);
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_path = path.child("template");
    let matches = parsed.as_ref().is_none_or(|s| s.matches(template));
    if !matches {
        errors.push(selector_mismatch(
            &template_path,
            string_map_at(template, "/metadata/labels"),
        ));
    }
    if let Some(selector) = selector
        && parsed.as_ref().is_some_and(LabelSelector::is_empty)
    {
        errors.push(empty_selector(ctx, &path, selector, "daemonset"));
    }
    errors.extend(validate_pod_template_spec(ctx, template, &template_path));
    restart_always(&mut errors, template, &template_path);
    no_active_deadline(&mut errors, template, &template_path, "DaemonSet");
    nonnegative(
        &mut errors,
        int_at(spec, "/minReadySeconds"),
        &path.child("minReadySeconds"),
    );
    nonnegative(
        &mut errors,
        int_at(spec, "/revisionHistoryLimit"),
        &path.child("revisionHistoryLimit"),
    );
    errors
}

/// `ValidateJob` (`ValidateJobSpec`: `validateJobSpec`, the selector and its match), and on update
/// `ValidateJobSpecUpdate`'s immutable fields.
pub(crate) fn validate_job(ctx: &Context, object: &Value, old: Option<&Value>) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = job_spec(ctx, spec, &path);
    let template = spec.get("template").unwrap_or(&Value::Null);
    // The fake generates a Job's selector and pod labels after validation (they need the final name
    // and uid); upstream generates them before. A create without `manualSelector: true` is judged as
    // its generated selector would be: present and matching.
    let generated = old.is_none() && spec.get("manualSelector").and_then(Value::as_bool) != Some(true);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None if generated => {}
        None => errors.push(FieldError::required(&path.child("selector"), "")),
        Some(_) if generated => {}
        Some(selector) => {
            if !LabelSelector::of(selector).matches(template) {
                errors.push(selector_mismatch(
                    &path.child("template"),
                    string_map_at(template, "/metadata/labels"),
                ));
            }
        }
    }
    if let Some(old) = old.and_then(|o| o.get("spec")) {
        if spec.get("selector") != old.get("selector") {
            errors.push(FieldError::invalid(
                &path.child("selector"),
                selector_value(spec.get("selector").unwrap_or(&Value::Null)),
                FIELD_IMMUTABLE,
            ));
        }
        if spec.get("template") != old.get("template") {
            errors.push(FieldError::invalid(
                &path.child("template"),
                BadValue::Json(template.clone()),
                FIELD_IMMUTABLE,
            ));
        }
        for field in ["completionMode", "podFailurePolicy", "backoffLimitPerIndex"] {
            if spec.get(field) != old.get(field) {
                errors.push(FieldError::invalid(
                    &path.child(field),
                    spec.get(field).map_or(BadValue::Json(Value::Null), |v| match v {
                        Value::String(s) => BadValue::Str(s.clone()),
                        Value::Number(n) => BadValue::Int(n.as_i64().unwrap_or_default()),
                        other => BadValue::Json(other.clone()),
                    }),
                    FIELD_IMMUTABLE,
                ));
            }
        }
    }
    errors
}

/// `validateJobSpec`: counts, the template, and the restart policies a Job's pods may have.
fn job_spec(ctx: &Context, spec: &Value, path: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        nonnegative(
            &mut errors,
            int_at(spec, &format!("/{field}")),
            &path.child(field),
        );
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_path = path.child("template");
    errors.extend(validate_pod_template_spec(ctx, template, &template_path));
    let restart_path = template_path.child("spec").child("restartPolicy");
    // The pod spec's default is `Always`, so a Job without a policy is refused as one with `Always`.
    match str_at(template, "/spec/restartPolicy") {
        "" | "Always" => errors.push(FieldError::required(
            &restart_path,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        "OnFailure" | "Never" => {}
        other => errors.push(FieldError::not_supported(
            &restart_path,
            other,
            &["OnFailure", "Never"],
        )),
    }
    errors
}

/// `ValidateCronJobCreate`: the name's length, `validateCronJobSpec`.
pub(crate) fn validate_cron_job(ctx: &Context, object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let name = str_at(object, "/metadata/name");
    // DNS1035LabelMaxLength - 11: room for the Jobs' suffix.
    if name.len() > 52 {
        errors.push(FieldError::invalid_str(
            &Path::new("metadata").child("name"),
            name,
            "must be no more than 52 characters",
        ));
    }
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let schedule = str_at(spec, "/schedule");
    if schedule.is_empty() {
        errors.push(FieldError::required(&path.child("schedule"), ""));
    } else if let Err(message) = parse_schedule(schedule) {
        errors.push(FieldError::invalid_str(
            &path.child("schedule"),
            schedule,
            &message,
        ));
    }
    nonnegative(
        &mut errors,
        int_at(spec, "/startingDeadlineSeconds"),
        &path.child("startingDeadlineSeconds"),
    );
    let policy_path = path.child("concurrencyPolicy");
    match str_at(spec, "/concurrencyPolicy") {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errors.push(FieldError::required(&policy_path, "")),
        other => errors.push(FieldError::not_supported(
            &policy_path,
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    let job_path = path.child("jobTemplate");
    let job_spec_value = spec.pointer("/jobTemplate/spec").unwrap_or(&Value::Null);
    errors.extend(job_spec(ctx, job_spec_value, &job_path.child("spec")));
    if let Some(selector) = job_spec_value.get("selector").filter(|s| !s.is_null()) {
        errors.push(FieldError::invalid(
            &job_path.child("spec").child("selector"),
            selector_value(selector),
            "`selector` will be auto-generated",
        ));
    }
    for field in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        nonnegative(
            &mut errors,
            int_at(spec, &format!("/{field}")),
            &path.child(field),
        );
    }
    errors
}

/// `cron.ParseStandard` of `robfig/cron/v3`: five fields (or a `@` descriptor), each a list of
/// `*`, `?`, numbers or names, ranges and steps within the field's bounds; its error texts.
pub(crate) fn parse_schedule(schedule: &str) -> Result<(), String> {
    if schedule.starts_with("TZ=") || schedule.starts_with("CRON_TZ=") {
        return Ok(());
    }
    if let Some(descriptor) = schedule.strip_prefix('@') {
        return match descriptor {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => Ok(()),
            _ if descriptor.starts_with("every ") => Ok(()),
            _ => Err(format!("unrecognized descriptor: {schedule}")),
        };
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    const MONTHS: &[&str] = &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let bounds: [(i64, i64, &[&str], i64); 5] = [
        (0, 59, &[], 0),
        (0, 23, &[], 0),
        (1, 31, &[], 0),
        (1, 12, MONTHS, 1),
        (0, 6, DAYS, 0),
    ];
    for (field, (min, max, names, first)) in fields.iter().zip(bounds) {
        for expr in field.split(',') {
            parse_range(expr, min, max, names, first)?;
        }
    }
    Ok(())
}

/// One `getRange` of `robfig/cron`.
fn parse_range(expr: &str, min: i64, max: i64, names: &[&str], first: i64) -> Result<(), String> {
    let (range, step) = match expr.split_once('/') {
        Some((range, step)) => (range, Some(step)),
        None => (expr, None),
    };
    let value = |text: &str| -> Result<i64, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
            return Ok(i as i64 + first);
        }
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "failed to parse int from {text}: strconv.Atoi: parsing {text:?}: invalid syntax"
            ));
        }
        text.parse::<i64>().map_err(|_| {
            format!("failed to parse int from {text}: strconv.Atoi: parsing {text:?}: value out of range")
        })
    };
    let (start, end) = if range == "*" || range == "?" {
        (min, max)
    } else {
        match range.split_once('-') {
            Some((a, b)) => (value(a)?, value(b)?),
            None => {
                let v = value(range)?;
                (v, if step.is_some() { max } else { v })
            }
        }
    };
    if let Some(step) = step {
        let step = value(step)?;
        if step <= 0 {
            return Err(format!("step of range should be a positive number: {expr}"));
        }
    }
    if start < min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({min}): {expr}"
        ));
    }
    if end > max {
        return Err(format!("end of range ({end}) above maximum ({max}): {expr}"));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    Ok(())
}

/// The selector of a Deployment, ReplicaSet or StatefulSet: required and not empty.
fn required_selector(
    ctx: &Context,
    spec: &Value,
    path: &Path,
    kind: &str,
    errors: &mut FieldErrors,
) -> Option<LabelSelector> {
    let Some(selector) = spec.get("selector").filter(|s| !s.is_null()) else {
        errors.push(FieldError::required(&path.child("selector"), ""));
        return Some(LabelSelector::default());
    };
    let parsed = LabelSelector::of(selector);
    if parsed.is_empty() {
        errors.push(empty_selector(ctx, path, selector, kind));
    }
    Some(parsed)
}

/// `empty selector is invalid for <kind>`.
fn empty_selector(_ctx: &Context, path: &Path, selector: &Value, kind: &str) -> FieldError {
    FieldError::invalid(
        &path.child("selector"),
        selector_value(selector),
        &format!("empty selector is invalid for {kind}"),
    )
}

/// `ValidatePodTemplateSpecForReplicaSet`.
fn template_for_replica_set(
    ctx: &Context,
    spec: &Value,
    selector: Option<&LabelSelector>,
    path: &Path,
    errors: &mut FieldErrors,
) {
    let template_path = path.child("template");
    let template = spec.get("template").unwrap_or(&Value::Null);
    if let Some(selector) = selector
        && !selector.is_empty()
        && !selector.matches(template)
    {
        errors.push(selector_mismatch(
            &template_path,
            string_map_at(template, "/metadata/labels"),
        ));
    }
    errors.extend(validate_pod_template_spec(ctx, template, &template_path));
    restart_always(errors, template, &template_path);
    no_active_deadline(errors, template, &template_path, "ReplicaSet");
}

/// The template's pods must restart `Always` (controllers that keep pods running).
fn restart_always(errors: &mut FieldErrors, template: &Value, template_path: &Path) {
    let policy = str_at(template, "/spec/restartPolicy");
    if policy != "Always" {
        errors.push(FieldError::not_supported(
            &template_path.child("spec").child("restartPolicy"),
            policy,
            &["Always"],
        ));
    }
}

/// `activeDeadlineSeconds in <Kind> is not Supported`.
fn no_active_deadline(errors: &mut FieldErrors, template: &Value, template_path: &Path, kind: &str) {
    if template
        .pointer("/spec/activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        errors.push(FieldError::forbidden(
            &template_path.child("spec").child("activeDeadlineSeconds"),
            &format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

/// `` spec.template.metadata.labels: Invalid value: <labels>: `selector` does not match template `labels` ``.
fn selector_mismatch(template_path: &Path, labels: Vec<(String, String)>) -> FieldError {
    FieldError::invalid(
        &template_path.child("metadata").child("labels"),
        BadValue::StringMap(labels),
        "`selector` does not match template `labels`",
    )
}

/// A `*metav1.LabelSelector` as a bad value. Before 1.34 `ErrorBody` dereferences the pointer and prints
/// Go's `%#v` of the struct (`v1.LabelSelector{MatchLabels:map[string]string{"app":"web"},
/// MatchExpressions:[]v1.LabelSelectorRequirement(nil)}`, as clusters print the famous selector error);
/// from 1.34 its JSON.
fn selector_value(selector: &Value) -> BadValue {
    if selector.is_null() {
        return BadValue::Rendered {
            go: "null".to_owned(),
            json: "null".to_owned(),
        };
    }
    let labels = match selector.get("matchLabels") {
        Some(Value::Object(map)) => {
            let mut entries: Vec<(String, String)> = map
                .iter()
                .map(|(k, v)| (go_string(k), go_string(v.as_str().unwrap_or_default())))
                .collect();
            entries.sort();
            let entries: Vec<String> = entries.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("map[string]string{{{}}}", entries.join(", "))
        }
        _ => "map[string]string(nil)".to_owned(),
    };
    let expressions = match selector.get("matchExpressions") {
        Some(Value::Array(items)) => {
            let items: Vec<String> = items
                .iter()
                .map(|e| {
                    let values = match e.get("values") {
                        Some(Value::Array(values)) => {
                            let quoted: Vec<String> = values
                                .iter()
                                .map(|v| go_string(v.as_str().unwrap_or_default()))
                                .collect();
                            format!("[]string{{{}}}", quoted.join(", "))
                        }
                        _ => "[]string(nil)".to_owned(),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        go_string(str_at(e, "/key")),
                        go_string(str_at(e, "/operator"))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        _ => "[]v1.LabelSelectorRequirement(nil)".to_owned(),
    };
    BadValue::Rendered {
        go: format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}"),
        json: serde_json::to_string(selector).unwrap_or_default(),
    }
}

/// A `metav1.LabelSelector` (`matchLabels` and `matchExpressions`), as `LabelSelectorAsSelector`
/// matches it against a template's labels.
#[derive(Debug, Default)]
struct LabelSelector {
    labels: Vec<(String, String)>,
    expressions: Vec<(String, String, Vec<String>)>,
}

impl LabelSelector {
    fn of(selector: &Value) -> Self {
        Self {
            labels: string_map_at(selector, "/matchLabels"),
            expressions: list_at(selector, "/matchExpressions")
                .iter()
                .map(|e| {
                    (
                        str_at(e, "/key").to_owned(),
                        str_at(e, "/operator").to_owned(),
                        list_at(e, "/values")
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect(),
                    )
                })
                .collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.expressions.is_empty()
    }

    /// Whether the labels of `template` match.
    fn matches(&self, template: &Value) -> bool {
        let labels = template.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.labels.iter().all(|(k, v)| label(k) == Some(v.as_str()))
            && self
                .expressions
                .iter()
                .all(|(key, op, values)| match op.as_str() {
                    "In" => label(key).is_some_and(|l| values.iter().any(|v| v == l)),
                    "NotIn" => label(key).is_none_or(|l| values.iter().all(|v| v != l)),
                    "Exists" => label(key).is_some(),
                    "DoesNotExist" => label(key).is_none(),
                    _ => false,
                })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_parse_as_robfig_cron_does() {
        assert_eq!(parse_schedule("*/5 * * * *"), Ok(()));
        assert_eq!(parse_schedule("0 0 1 jan mon-fri"), Ok(()));
        assert_eq!(parse_schedule("@hourly"), Ok(()));
        assert_eq!(
            parse_schedule("every minute"),
            Err("expected exactly 5 fields, found 2: [every minute]".to_owned())
        );
        assert_eq!(
            parse_schedule("70 * * * *"),
            Err("end of range (70) above maximum (59): 70".to_owned())
        );
        assert_eq!(
            parse_schedule("x * * * *"),
            Err("failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax".to_owned())
        );
    }
}
