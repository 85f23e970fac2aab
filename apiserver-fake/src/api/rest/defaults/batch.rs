//! Defaults and strategy of `batch/v1`: `pkg/apis/batch/v1/defaults.go` (`SetDefaults_Job`,
//! `SetDefaults_CronJob`, `SetDefaults_PodFailurePolicyOnPodConditionsPattern`) and
//! `pkg/registry/batch/job/strategy.go` (`generateSelectorIfNeeded` / `generateSelector`).
//!
//! Version-dependent defaults, by the binary's version:
//! - `podReplacementPolicy` (`TerminatingOrFailed`, or `Failed` with a pod failure policy) while
//!   `JobPodReplacementPolicy` is on: 1.29+ (alpha, off, in 1.28).
//! - `backoffLimit` is `MaxInt32` instead of 6 when `backoffLimitPerIndex` is set and
//!   `JobBackoffLimitPerIndex` is on (1.29+).
//! - `manualSelector: false`: defaulted since the strategy moved selector generation into
//!   `PrepareForCreate` (`generateSelectorIfNeeded` dereferences it), taken here as 1.30+.
//! - the selector and template labels use the prefixed `batch.kubernetes.io/` keys next to the legacy
//!   `controller-uid` / `job-name` ones since 1.27, i.e. in every version this fake serves.

use serde_json::{Map, Value, json};

use super::super::feature_gates::Gate;
use super::pod::set_defaults_template_at;
use super::{at, default_empty_str, default_missing, each_object, ensure_object, object_at};
use crate::api::catalog::KubeVersion;

/// `batch.LegacyJobNameLabel`.
pub(crate) const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// `batch.JobNameLabel`.
pub(crate) const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// `batch.LegacyControllerUidLabel`.
pub(crate) const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// `batch.ControllerUidLabel`: the one the generated selector matches.
pub(crate) const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// The first minor that defaults `manualSelector` to `false`.
const MANUAL_SELECTOR_DEFAULT_SINCE: u32 = 30;

/// `SetDefaults_Job` (see the module docs for what depends on the version) and the pod template's
/// defaults.
pub(crate) fn set_defaults_job(job: &mut Map<String, Value>, version: KubeVersion) {
    let template_labels = at(job, "/spec/template/metadata/labels")
        .filter(|labels| labels.is_object())
        .cloned();
    let Some(spec) = ensure_object(job, "spec") else {
        return;
    };
    set_defaults_job_spec(spec, version);
    // A Job without labels takes its template's.
    if let Some(labels) = template_labels
        && let Some(metadata) = ensure_object(job, "metadata")
        && metadata
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        metadata.insert("labels".to_owned(), labels);
    }
}

/// The spec part of `SetDefaults_Job`.
fn set_defaults_job_spec(spec: &mut Map<String, Value>, version: KubeVersion) {
    let unset = |spec: &Map<String, Value>, key: &str| spec.get(key).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".to_owned(), json!(1));
    }
    default_missing(spec, "parallelism", json!(1));
    if unset(spec, "backoffLimit") {
        let per_index =
            Gate::JobBackoffLimitPerIndex.enabled(version) && !unset(spec, "backoffLimitPerIndex");
        let limit = if per_index { i64::from(i32::MAX) } else { 6 };
        spec.insert("backoffLimit".to_owned(), json!(limit));
    }
    default_missing(spec, "completionMode", json!("NonIndexed"));
    default_missing(spec, "suspend", json!(false));
    let has_failure_policy = !unset(spec, "podFailurePolicy");
    set_defaults_pod_failure_policy(spec);
    if Gate::JobPodReplacementPolicy.enabled(version) {
        let policy = if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        };
        default_missing(spec, "podReplacementPolicy", json!(policy));
    }
    if version.minor >= MANUAL_SELECTOR_DEFAULT_SINCE {
        default_missing(spec, "manualSelector", json!(false));
    }
    set_defaults_template_at(spec, "template");
}

/// `SetDefaults_CronJob`: `concurrencyPolicy: Allow`, `suspend: false`, history limits 3 and 1.
///
/// `SetDefaults_Job` is registered for `Job`, not `JobSpec`, so the job template gets only what is
/// defaulted per type: its pod template and its pod failure policy's condition patterns (the Job
/// controller's create defaults the rest).
pub(crate) fn set_defaults_cron_job(cron_job: &mut Map<String, Value>) {
    let Some(spec) = ensure_object(cron_job, "spec") else {
        return;
    };
    default_empty_str(spec, "concurrencyPolicy", "Allow");
    default_missing(spec, "suspend", json!(false));
    default_missing(spec, "successfulJobsHistoryLimit", json!(3));
    default_missing(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_spec) = object_at(spec, "jobTemplate").and_then(|template| object_at(template, "spec")) {
        set_defaults_pod_failure_policy(job_spec);
        set_defaults_template_at(job_spec, "template");
    }
}

/// `SetDefaults_PodFailurePolicyOnPodConditionsPattern`: `status: "True"`.
fn set_defaults_pod_failure_policy(spec: &mut Map<String, Value>) {
    if let Some(policy) = object_at(spec, "podFailurePolicy") {
        each_object(policy, "rules", |rule| {
            each_object(rule, "onPodConditions", |pattern| {
                default_empty_str(pattern, "status", "True");
            });
        });
    }
}

/// `generateSelectorIfNeeded` (Job `PrepareForCreate`): unless `manualSelector` is true, adds the
/// job-name and controller-uid labels (legacy and prefixed) to the pod template, keeping labels the
/// client set, and `batch.kubernetes.io/controller-uid: <uid>` to `selector.matchLabels`. Needs the
/// final `metadata.name` and `metadata.uid`.
pub(crate) fn generate_selector_if_needed(job: &mut Map<String, Value>) {
    let manual = at(job, "/spec/manualSelector").and_then(Value::as_bool) == Some(true);
    if manual {
        return;
    }
    let meta = |key: &str| {
        job.get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (name, uid) = (meta("name"), meta("uid"));
    let Some(spec) = ensure_object(job, "spec") else {
        return;
    };
    if let Some(labels) = ensure_object(spec, "template")
        .and_then(|template| ensure_object(template, "metadata"))
        .and_then(|metadata| ensure_object(metadata, "labels"))
    {
        for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
    }
    if let Some(match_labels) =
        ensure_object(spec, "selector").and_then(|selector| ensure_object(selector, "matchLabels"))
    {
        match_labels
            .entry(CONTROLLER_UID_LABEL)
            .or_insert_with(|| json!(uid));
    }
}

/// On update, a body without `spec.selector` keeps the stored (generated) one instead of getting none:
/// the selector is generated only on create. (An update that changes the selector is refused by
/// `rest::validation`: it is immutable.)
pub(crate) fn keep_selector(current: &Map<String, Value>, next: &mut Map<String, Value>) {
    let Some(selector) = current.get("spec").and_then(|s| s.get("selector")).cloned() else {
        return;
    };
    if let Some(spec) = ensure_object(next, "spec") {
        default_missing(spec, "selector", selector);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{builtin, defaulted, v};
    use super::*;

    fn minimal_job() -> Value {
        json!({"metadata": {"name": "pi", "uid": "0b6a2e6c-6c5e-4a8e-9d4e-3f6f1c2b7a10"},
               "spec": {"template": {"spec": {"restartPolicy": "Never",
                   "containers": [{"name": "pi", "image": "perl:5.34.0"}]}}}})
    }

    fn created_job(minor: u32) -> Value {
        let resource = builtin("batch", "jobs", "Job");
        let mut job = defaulted(&resource, v(minor), minimal_job());
        super::super::prepare_for_create(&resource, &mut job);
        // Stored objects are defaulted again when read (the labels default sees the generated ones).
        defaulted(&resource, v(minor), job)
    }

    #[test]
    fn job_on_1_36() {
        let uid = "0b6a2e6c-6c5e-4a8e-9d4e-3f6f1c2b7a10";
        let labels = json!({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi",
                            "controller-uid": uid, "job-name": "pi"});
        assert_eq!(
            created_job(36),
            json!({"metadata": {"name": "pi", "uid": uid, "labels": labels},
                "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
                    "suspend": false, "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": false,
                    "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                    "template": {"metadata": {"labels": labels}, "spec": {
                        "restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                        "securityContext": {}, "terminationGracePeriodSeconds": 30,
                        "containers": [{"name": "pi", "image": "perl:5.34.0", "imagePullPolicy": "IfNotPresent",
                            "resources": {}, "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"}]}}}})
        );
    }

    #[test]
    fn job_defaults_by_version() {
        let old = created_job(28);
        assert!(old["spec"].get("podReplacementPolicy").is_none());
        assert!(old["spec"].get("manualSelector").is_none());
        assert_eq!(
            old["spec"]["selector"]["matchLabels"].as_object().map(Map::len),
            Some(1)
        );
        let v29 = created_job(29);
        assert_eq!(v29["spec"]["podReplacementPolicy"], json!("TerminatingOrFailed"));
        assert!(v29["spec"].get("manualSelector").is_none());
    }

    #[test]
    fn parallel_and_failure_policy_jobs() {
        let resource = builtin("batch", "jobs", "Job");
        let job = defaulted(
            &resource,
            v(36),
            json!({"spec": {"parallelism": 3, "backoffLimitPerIndex": 1, "completionMode": "Indexed",
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}}),
        );
        assert_eq!(
            job,
            json!({"spec": {"parallelism": 3, "backoffLimitPerIndex": 1, "completionMode": "Indexed",
                "backoffLimit": 2147483647, "suspend": false, "manualSelector": false,
                "podReplacementPolicy": "Failed",
                "podFailurePolicy": {"rules": [{"action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}}})
        );
    }

    #[test]
    fn manual_selector_and_client_labels_are_respected() {
        let resource = builtin("batch", "jobs", "Job");
        let mut manual = json!({"metadata": {"name": "m", "uid": "u"},
            "spec": {"manualSelector": true, "selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}}}}});
        let before = manual.clone();
        super::super::prepare_for_create(&resource, &mut manual);
        assert_eq!(manual, before);
        let mut named = json!({"metadata": {"name": "n", "uid": "u"},
            "spec": {"template": {"metadata": {"labels": {"job-name": "custom"}}}}});
        super::super::prepare_for_create(&resource, &mut named);
        assert_eq!(
            named["spec"]["template"]["metadata"]["labels"],
            json!({"job-name": "custom", "batch.kubernetes.io/job-name": "n",
                   "controller-uid": "u", "batch.kubernetes.io/controller-uid": "u"})
        );
    }

    #[test]
    fn cron_job() {
        let got = defaulted(
            &builtin("batch", "cronjobs", "CronJob"),
            v(36),
            json!({"spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}}}),
        );
        assert_eq!(
            got,
            json!({"spec": {"schedule": "*/1 * * * *", "concurrencyPolicy": "Allow", "suspend": false,
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"spec": {
                    "template": {"spec": {"restartPolicy": "OnFailure", "dnsPolicy": "ClusterFirst",
                        "schedulerName": "default-scheduler", "securityContext": {},
                        "terminationGracePeriodSeconds": 30,
                        "containers": [{"name": "c", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                            "resources": {}, "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"}]}}}}}})
        );
    }

    #[test]
    fn update_keeps_the_generated_selector() {
        let current =
            json!({"spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}}}});
        let mut next = json!({"spec": {"parallelism": 2}});
        super::super::prepare_for_update(&builtin("batch", "jobs", "Job"), &current, &mut next);
        assert_eq!(next["spec"]["selector"], current["spec"]["selector"]);
    }
}
