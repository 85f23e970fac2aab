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

/// `ValidateDeploymentSpec`.
pub(crate) fn validate_deployment(ctx: &Context, object: &Value) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = FieldErrors::new();
    nonnegative(&mut errors, int_at(spec, "/replicas"), &path.child("replicas"));
    let selector = required_selector(ctx, spec, &path, "deployment", &mut errors);
    template_for_replica_set(ctx, spec, selector.as_ref(), &path, &mut errors);
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
/// update the fields that may change.
pub(crate) fn validate_stateful_set(ctx: &Context, object: &Value, old: Option<&Value>) -> FieldErrors {
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
        let mutable = [
            "replicas",
            "template",
            "updateStrategy",
            "minReadySeconds",
            "ordinals",
            "persistentVolumeClaimRetentionPolicy",
        ];
        let strip = |spec: &Value| {
            let mut spec = spec.clone();
            if let Some(map) = spec.as_object_mut() {
                for field in mutable {
                    map.remove(field);
                }
            }
            spec
        };
        if strip(spec) != strip(old) {
            errors.push(FieldError::forbidden(
                &path,
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', \
                 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
    }
    errors
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

/// A `*metav1.LabelSelector` as a bad value: Go's `%#v` of the pointer before 1.34, JSON after.
fn selector_value(selector: &Value) -> BadValue {
    let labels = match selector.get("matchLabels") {
        Some(Value::Object(map)) => {
            let mut entries: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
                .collect();
            entries.sort();
            format!("map[string]string{{{}}}", entries.join(", "))
        }
        _ => "map[string]string(nil)".to_owned(),
    };
    let expressions = if list_at(selector, "/matchExpressions").is_empty() {
        "[]v1.LabelSelectorRequirement(nil)".to_owned()
    } else {
        "[]v1.LabelSelectorRequirement{...}".to_owned()
    };
    BadValue::Rendered {
        go: format!("&v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}"),
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
