//! Printers of workloads: Pods and what runs them (printers.go's `printPod`, `printPodTemplate`,
//! `printReplicationController`, `printReplicaSet`, `printDeployment`, `printStatefulSet`,
//! `printDaemonSet`, `printJob`, `printCronJob`, `printHorizontalPodAutoscaler`,
//! `printPodDisruptionBudget`).

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::age::{human_duration, parse_timestamp};
use super::format::{
    at, boolean, condition_true, container_cells, count, deleting, format_label_selector, format_labels,
    integer, label_selector, list, name, non_empty, quantity, scalar, text,
};
use super::printers::{Column, PrintContext, Printer};

/// Go's `int64(...)` cells are JSON integers.
fn int(value: i64) -> Value {
    Value::from(value)
}

/// `replicas` as upstream prints it after defaulting (`spec.replicas` defaults to 1).
fn desired_replicas(object: &Value) -> i64 {
    integer(object, &["spec", "replicas"]).unwrap_or(1)
}

/// Pod columns.
pub(super) fn pod() -> Printer {
    Printer {
        columns: vec![
            Column::NAME,
            Column::string(
                "Ready",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            Column::string("Status", "The aggregate status of the containers in this pod."),
            Column::string(
                "Restarts",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            Column::AGE,
            Column::string(
                "IP",
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            )
            .wide(),
            Column::string(
                "Node",
                "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName.",
            )
            .wide(),
            Column::string(
                "Nominated Node",
                "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.",
            )
            .wide(),
            Column::string(
                "Readiness Gates",
                "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\"",
            )
            .wide(),
        ],
        cells: pod_cells,
        conditions: Some(pod_conditions),
    }
}

/// `podSuccessConditions` / `podFailedConditions`: a finished Pod's row is marked `Completed`, which
/// kubectl uses to hide it unless `--show-all`-like output is asked for.
fn pod_conditions(pod: &Value) -> Vec<Value> {
    let (reason, message) = match text(pod, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return Vec::new(),
    };
    vec![json!({"type": "Completed", "status": "True", "reason": reason, "message": message})]
}

/// The later of `latest` and a container status's last termination.
fn later_termination(latest: Option<OffsetDateTime>, status: &Value) -> Option<OffsetDateTime> {
    let finished = at(status, &["lastState", "terminated", "finishedAt"])
        .and_then(Value::as_str)
        .and_then(parse_timestamp);
    match (latest, finished) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// `Signal:N` / `ExitCode:N` of a terminated state without a reason.
fn exit_reason(terminated: &Value) -> String {
    match count(terminated, &["signal"]) {
        0 => format!("ExitCode:{}", count(terminated, &["exitCode"])),
        signal => format!("Signal:{signal}"),
    }
}

/// `printPod`: ready/total containers (restartable init containers, i.e. sidecars, count), the
/// aggregate status (init progress, waiting/terminated reasons, `Terminating`), restarts with the
/// age of the last one, and (wide) IP, node, nominated node, readiness gates.
fn pod_cells(pod: &Value, ctx: &PrintContext) -> Vec<Value> {
    let init_specs = list(pod, &["spec", "initContainers"]);
    let sidecars = init_specs
        .iter()
        .filter(|c| text(c, &["restartPolicy"]) == "Always")
        .count();
    let total = list(pod, &["spec", "containers"]).len() + sidecars;
    // A new Pod's phase is Pending (the registry sets it on create).
    let phase = non_empty(pod, &["status", "phase"]).unwrap_or("Pending");
    let mut tally = ContainerTally {
        reason: non_empty(pod, &["status", "reason"]).unwrap_or(phase).to_owned(),
        ..ContainerTally::default()
    };
    if list(pod, &["status", "conditions"])
        .iter()
        .any(|c| text(c, &["type"]) == "PodScheduled" && text(c, &["reason"]) == "SchedulingGated")
    {
        tally.reason = "SchedulingGated".to_owned();
    }
    let initializing = tally.init_containers(pod);
    if !initializing || condition_true(pod, "Initialized") {
        tally.containers(pod);
    }
    let ContainerTally {
        mut reason,
        restarts,
        ready,
        last_restart,
        ..
    } = tally;
    if deleting(pod) && text(pod, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if deleting(pod) && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".to_owned();
    }

    let restarts_cell = match last_restart {
        Some(last) if restarts != 0 => {
            format!("{restarts} ({} ago)", human_duration(ctx.now - last))
        }
        _ => restarts.to_string(),
    };

    // `status.podIPs[0]`; objects written with only `podIP` get `podIPs` from it upstream.
    let pod_ip = list(pod, &["status", "podIPs"])
        .first()
        .and_then(|ip| non_empty(ip, &["ip"]))
        .or_else(|| non_empty(pod, &["status", "podIP"]))
        .unwrap_or("<none>");
    vec![
        name(pod).into(),
        format!("{ready}/{total}").into(),
        reason.into(),
        restarts_cell.into(),
        ctx.age(pod),
        pod_ip.into(),
        non_empty(pod, &["spec", "nodeName"]).unwrap_or("<none>").into(),
        non_empty(pod, &["status", "nominatedNodeName"])
            .unwrap_or("<none>")
            .into(),
        readiness_gates_cell(pod).into(),
    ]
}

/// What `printPod` adds up over a Pod's container statuses: the status shown, restarts (and the last
/// one's time), ready containers; sidecars' restarts apart, as they count once the Pod is initialized.
#[derive(Debug, Default)]
struct ContainerTally {
    reason: String,
    restarts: i64,
    sidecar_restarts: i64,
    ready: usize,
    last_restart: Option<OffsetDateTime>,
    last_sidecar_restart: Option<OffsetDateTime>,
}

impl ContainerTally {
    /// The init containers' statuses, in order until the first one not done (whose state becomes the
    /// reason, `Init:…`): whether the Pod is still initializing.
    fn init_containers(&mut self, pod: &Value) -> bool {
        let init_specs = list(pod, &["spec", "initContainers"]);
        let restartable = |container: &str| {
            init_specs
                .iter()
                .any(|c| text(c, &["name"]) == container && text(c, &["restartPolicy"]) == "Always")
        };
        for (index, status) in list(pod, &["status", "initContainerStatuses"]).iter().enumerate() {
            let container = text(status, &["name"]);
            self.restarts += count(status, &["restartCount"]);
            self.last_restart = later_termination(self.last_restart, status);
            if restartable(container) {
                self.sidecar_restarts += count(status, &["restartCount"]);
                self.last_sidecar_restart = later_termination(self.last_sidecar_restart, status);
            }
            let terminated = at(status, &["state", "terminated"]).filter(|t| t.is_object());
            let waiting_reason = text(status, &["state", "waiting", "reason"]);
            if terminated.is_some_and(|t| count(t, &["exitCode"]) == 0) {
                continue;
            }
            if restartable(container) && boolean(status, &["started"]) == Some(true) {
                if boolean(status, &["ready"]) == Some(true) {
                    self.ready += 1;
                }
                continue;
            }
            self.reason = match terminated {
                Some(t) => match non_empty(t, &["reason"]) {
                    Some(r) => format!("Init:{r}"),
                    None => format!("Init:{}", exit_reason(t)),
                },
                None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                    format!("Init:{waiting_reason}")
                }
                None => format!("Init:{index}/{}", init_specs.len()),
            };
            return true;
        }
        false
    }

    /// The regular containers' statuses (last first, so the first container's state wins): restarts
    /// start over from the sidecars'; a completed Pod with a container still running is `Running` or
    /// `NotReady`.
    fn containers(&mut self, pod: &Value) {
        self.restarts = self.sidecar_restarts;
        self.last_restart = self.last_sidecar_restart;
        let mut has_running = false;
        for status in list(pod, &["status", "containerStatuses"]).iter().rev() {
            self.restarts += count(status, &["restartCount"]);
            self.last_restart = later_termination(self.last_restart, status);
            let terminated = at(status, &["state", "terminated"]).filter(|t| t.is_object());
            if let Some(waiting) = non_empty(status, &["state", "waiting", "reason"]) {
                self.reason = waiting.to_owned();
            } else if let Some(t) = terminated {
                self.reason = match non_empty(t, &["reason"]) {
                    Some(r) => r.to_owned(),
                    None => exit_reason(t),
                };
            } else if boolean(status, &["ready"]) == Some(true) && at(status, &["state", "running"]).is_some()
            {
                has_running = true;
                self.ready += 1;
            }
        }
        if self.reason == "Completed" && has_running {
            self.reason = if condition_true(pod, "Ready") {
                "Running".to_owned()
            } else {
                "NotReady".to_owned()
            };
        }
    }
}

/// `met/total` of the Pod's readiness gates, or `<none>`.
fn readiness_gates_cell(pod: &Value) -> String {
    let gates = list(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_owned();
    }
    let met = gates
        .iter()
        .filter(|gate| condition_true(pod, text(gate, &["conditionType"])))
        .count();
    format!("{met}/{}", gates.len())
}

/// PodTemplate columns.
pub(super) fn pod_template() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Containers", "Names of each container in the template."),
            Column::string("Images", "Images referenced by each container in the template."),
            Column::string("Pod Labels", "The labels for the pod template."),
        ],
        |template, _| {
            let (names, images) = container_cells(at(template, &["template", "spec"]));
            vec![
                name(template).into(),
                names.into(),
                images.into(),
                format_labels(at(template, &["template", "metadata", "labels"])).into(),
            ]
        },
    )
}

/// ReplicationController columns.
pub(super) fn replication_controller() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::typed(
                "Desired",
                "integer",
                "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1.",
            ),
            Column::typed(
                "Current",
                "integer",
                "Replicas is the most recently observed number of replicas.",
            ),
            Column::typed(
                "Ready",
                "integer",
                "The number of ready replicas for this replication controller.",
            ),
            Column::AGE,
            Column::CONTAINERS,
            Column::IMAGES,
            Column::string(
                "Selector",
                "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template.",
            )
            .wide(),
        ],
        |rc, ctx| {
            let (names, images) = container_cells(at(rc, &["spec", "template", "spec"]));
            vec![
                name(rc).into(),
                int(desired_replicas(rc)),
                int(count(rc, &["status", "replicas"])),
                int(count(rc, &["status", "readyReplicas"])),
                ctx.age(rc),
                names.into(),
                images.into(),
                format_labels(at(rc, &["spec", "selector"])).into(),
            ]
        },
    )
}

/// ReplicaSet columns.
pub(super) fn replica_set() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::typed(
                "Desired",
                "integer",
                "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1.",
            ),
            Column::typed(
                "Current",
                "integer",
                "Replicas is the most recently observed number of non-terminating pods.",
            ),
            Column::typed(
                "Ready",
                "integer",
                "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
            ),
            Column::AGE,
            Column::CONTAINERS,
            Column::IMAGES,
            Column::string(
                "Selector",
                "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set.",
            )
            .wide(),
        ],
        |rs, ctx| {
            let (names, images) = container_cells(at(rs, &["spec", "template", "spec"]));
            vec![
                name(rs).into(),
                int(desired_replicas(rs)),
                int(count(rs, &["status", "replicas"])),
                int(count(rs, &["status", "readyReplicas"])),
                ctx.age(rs),
                names.into(),
                images.into(),
                format_label_selector(at(rs, &["spec", "selector"])).into(),
            ]
        },
    )
}

/// Deployment columns.
pub(super) fn deployment() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Ready", "Number of the pod with ready state"),
            // Upstream declares these two `string` and fills them with integers.
            Column::string(
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            Column::string(
                "Available",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            Column::AGE,
            Column::CONTAINERS,
            Column::IMAGES,
            Column::string(
                "Selector",
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            )
            .wide(),
        ],
        |deployment, ctx| {
            let (names, images) = container_cells(at(deployment, &["spec", "template", "spec"]));
            // `selector.String()`, not `FormatLabelSelector`: empty stays empty.
            let selector = label_selector(at(deployment, &["spec", "selector"]))
                .unwrap_or_else(|| "<invalid>".to_owned());
            vec![
                name(deployment).into(),
                format!(
                    "{}/{}",
                    count(deployment, &["status", "readyReplicas"]),
                    desired_replicas(deployment)
                )
                .into(),
                int(count(deployment, &["status", "updatedReplicas"])),
                int(count(deployment, &["status", "availableReplicas"])),
                ctx.age(deployment),
                names.into(),
                images.into(),
                selector.into(),
            ]
        },
    )
}

/// StatefulSet columns.
pub(super) fn stateful_set() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Ready", "Number of the pod with ready state"),
            Column::AGE,
            Column::CONTAINERS,
            Column::IMAGES,
        ],
        |set, ctx| {
            let (names, images) = container_cells(at(set, &["spec", "template", "spec"]));
            vec![
                name(set).into(),
                format!(
                    "{}/{}",
                    count(set, &["status", "readyReplicas"]),
                    desired_replicas(set)
                )
                .into(),
                ctx.age(set),
                names.into(),
                images.into(),
            ]
        },
    )
}

/// DaemonSet columns.
pub(super) fn daemon_set() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::typed(
                "Desired",
                "integer",
                "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
            ),
            Column::typed(
                "Current",
                "integer",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            Column::typed(
                "Ready",
                "integer",
                "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
            ),
            Column::typed(
                "Up-to-date",
                "integer",
                "The total number of nodes that are running updated daemon pod",
            ),
            Column::typed(
                "Available",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
            ),
            Column::string(
                "Node Selector",
                "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node.",
            ),
            Column::AGE,
            Column::CONTAINERS,
            Column::IMAGES,
            Column::string(
                "Selector",
                "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels.",
            )
            .wide(),
        ],
        |set, ctx| {
            let (names, images) = container_cells(at(set, &["spec", "template", "spec"]));
            let status = |field: &str| int(count(set, &["status", field]));
            vec![
                name(set).into(),
                status("desiredNumberScheduled"),
                status("currentNumberScheduled"),
                status("numberReady"),
                status("updatedNumberScheduled"),
                status("numberAvailable"),
                format_labels(at(set, &["spec", "template", "spec", "nodeSelector"])).into(),
                ctx.age(set),
                names.into(),
                images.into(),
                format_label_selector(at(set, &["spec", "selector"])).into(),
            ]
        },
    )
}

/// Job columns; `with_status`: the `Status` column (1.30 and later).
pub(super) fn job(with_status: bool) -> Printer {
    let mut columns = vec![Column::NAME];
    if with_status {
        columns.push(Column::string("Status", "Status of the job."));
    }
    columns.extend([
        Column::string(
            "Completions",
            "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
        ),
        Column::string("Duration", "Time required to complete the job."),
        Column::AGE,
        Column::CONTAINERS,
        Column::IMAGES,
        Column::string(
            "Selector",
            "A label query over pods that should match the pod count. Normally, the system sets this field for you.",
        )
        .wide(),
    ]);
    Printer::new(columns, job_cells)
}

/// `printJob`'s status: the first of Complete, Failed, Terminating (being deleted), Suspended,
/// FailureTarget, SuccessCriteriaMet (1.34 and later) that holds, else Running.
fn job_status(job: &Value, ctx: &PrintContext) -> &'static str {
    if condition_true(job, "Complete") {
        "Complete"
    } else if condition_true(job, "Failed") {
        "Failed"
    } else if deleting(job) {
        "Terminating"
    } else if condition_true(job, "Suspended") {
        "Suspended"
    } else if condition_true(job, "FailureTarget") {
        "FailureTarget"
    } else if ctx.at_least(34) && condition_true(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

fn job_cells(job: &Value, ctx: &PrintContext) -> Vec<Value> {
    let succeeded = count(job, &["status", "succeeded"]);
    let completions = match integer(job, &["spec", "completions"]) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match count(job, &["spec", "parallelism"]) {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let timestamp = |field: &str| {
        at(job, &["status", field])
            .and_then(Value::as_str)
            .and_then(parse_timestamp)
    };
    let duration = match (timestamp("startTime"), timestamp("completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(ctx.now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    let (names, images) = container_cells(at(job, &["spec", "template", "spec"]));
    let mut cells = vec![name(job).into()];
    if ctx.at_least(30) {
        cells.push(job_status(job, ctx).into());
    }
    cells.extend([
        completions.into(),
        duration.into(),
        ctx.age(job),
        names.into(),
        images.into(),
        format_label_selector(at(job, &["spec", "selector"])).into(),
    ]);
    cells
}

/// CronJob columns.
pub(super) fn cron_job() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Schedule",
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
            ),
            Column::string(
                "Timezone",
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process.",
            ),
            Column::typed(
                "Suspend",
                "boolean",
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions. Defaults to false.",
            ),
            Column::typed(
                "Active",
                "integer",
                "A list of pointers to currently running jobs.",
            ),
            Column::string(
                "Last Schedule",
                "Information when was the last time the job was successfully scheduled.",
            ),
            Column::AGE,
            Column::CONTAINERS,
            Column::IMAGES,
            Column::string(
                "Selector",
                "A label query over pods that should match the pod count. Normally, the system sets this field for you.",
            )
            .wide(),
        ],
        |cron, ctx| {
            let job_spec = at(cron, &["spec", "jobTemplate", "spec"]);
            let (names, images) =
                container_cells(job_spec.and_then(|s| at(s, &["template", "spec"])));
            let last_schedule = match at(cron, &["status", "lastScheduleTime"]) {
                Some(Value::String(t)) => ctx.since(Some(t)),
                _ => "<none>".to_owned(),
            };
            vec![
                name(cron).into(),
                text(cron, &["spec", "schedule"]).into(),
                at(cron, &["spec", "timeZone"])
                    .and_then(Value::as_str)
                    .unwrap_or("<none>")
                    .into(),
                // `spec.suspend` defaults to false.
                super::format::bool_ptr(Some(
                    boolean(cron, &["spec", "suspend"]).unwrap_or(false),
                ))
                .into(),
                int(i64::try_from(list(cron, &["status", "active"]).len()).unwrap_or(i64::MAX)),
                last_schedule.into(),
                ctx.age(cron),
                names.into(),
                images.into(),
                format_label_selector(job_spec.and_then(|s| s.get("selector"))).into(),
            ]
        },
    )
}

/// HorizontalPodAutoscaler columns.
pub(super) fn horizontal_pod_autoscaler() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Reference",
                "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
            ),
            Column::string(
                "Targets",
                "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).",
            ),
            Column::string(
                "MinPods",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
            ),
            // `string` columns holding integers, as upstream declares them.
            Column::string(
                "MaxPods",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
            ),
            Column::string(
                "Replicas",
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
            ),
            Column::AGE,
        ],
        |hpa, ctx| {
            let min = integer(hpa, &["spec", "minReplicas"])
                .map_or_else(|| "<unset>".to_owned(), |m| m.to_string());
            vec![
                name(hpa).into(),
                format!(
                    "{}/{}",
                    text(hpa, &["spec", "scaleTargetRef", "kind"]),
                    text(hpa, &["spec", "scaleTargetRef", "name"])
                )
                .into(),
                hpa_targets(hpa).into(),
                min.into(),
                int(count(hpa, &["spec", "maxReplicas"])),
                int(count(hpa, &["status", "currentReplicas"])),
                ctx.age(hpa),
            ]
        },
    )
}

/// `formatHPAMetrics`: each metric as `current/target` (resource metrics prefixed with their name),
/// the first two and `+ N more...`. A current value is `<unknown>` without a status of the metric's
/// kind at the same index; quantities absent from a status that has one print as Go's zero
/// `Quantity`, `0`. autoscaling/v1 objects (`targetCPUUtilizationPercentage`) are read as the CPU
/// utilisation metric they convert to; no metric at all is v2's default, 80% CPU.
fn hpa_targets(hpa: &Value) -> String {
    let mut specs: Vec<Value> = list(hpa, &["spec", "metrics"]).to_vec();
    let mut statuses: Vec<Value> = list(hpa, &["status", "currentMetrics"]).to_vec();
    if specs.is_empty() {
        let target = integer(hpa, &["spec", "targetCPUUtilizationPercentage"]).unwrap_or(80);
        specs.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": target}}}));
        if let Some(current) = integer(hpa, &["status", "currentCPUUtilizationPercentage"]) {
            statuses = vec![json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": current}}})];
        }
    }
    let shown: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let kind = text(spec, &["type"]);
            let source = match kind {
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                "Pods" => "pods",
                "Object" => "object",
                "External" => "external",
                _ => return "<unknown type>".to_owned(),
            };
            // The status of this metric's kind at the same index.
            let status = statuses
                .get(i)
                .and_then(|s| s.get(source))
                .filter(|s| s.is_object());
            let current = |field: &str| status.and_then(|s| at(s, &["current", field]));
            let target = |field: &str| at(spec, &[source, "target", field]);
            let unknown = || "<unknown>".to_owned();
            match kind {
                "Resource" | "ContainerResource" => {
                    let metric = text(spec, &[source, "name"]);
                    if let Some(average) = target("averageValue") {
                        let now = status.map_or_else(unknown, |_| quantity(current("averageValue")));
                        format!("{metric}: {now}/{}", quantity(Some(average)))
                    } else {
                        let percent = |v: Option<&Value>| v.and_then(Value::as_i64).map(|p| format!("{p}%"));
                        format!(
                            "{metric}: {}/{}",
                            percent(current("averageUtilization")).unwrap_or_else(unknown),
                            percent(target("averageUtilization")).unwrap_or_else(|| "<auto>".to_owned())
                        )
                    }
                }
                "Pods" => format!(
                    "{}/{}",
                    status.map_or_else(unknown, |_| quantity(current("averageValue"))),
                    quantity(target("averageValue"))
                ),
                _ => match target("averageValue") {
                    Some(average) => format!(
                        "{}/{} (avg)",
                        scalar(current("averageValue")).unwrap_or_else(unknown),
                        quantity(Some(average))
                    ),
                    None => format!(
                        "{}/{}",
                        status.map_or_else(unknown, |_| quantity(current("value"))),
                        quantity(target("value"))
                    ),
                },
            }
        })
        .collect();
    let total = shown.len();
    let joined = shown[..total.min(2)].join(", ");
    if total > 2 {
        format!("{joined} + {} more...", total - 2)
    } else {
        joined
    }
}

/// PodDisruptionBudget columns.
pub(super) fn pod_disruption_budget() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Min Available",
                "The minimum number of pods that must be available.",
            ),
            Column::string(
                "Max Unavailable",
                "The maximum number of pods that may be unavailable.",
            ),
            Column::typed(
                "Allowed Disruptions",
                "integer",
                "Calculated number of pods that may be disrupted at this time.",
            ),
            Column::AGE,
        ],
        |pdb, ctx| {
            let bound = |field: &str| scalar(at(pdb, &["spec", field])).unwrap_or_else(|| "N/A".to_owned());
            vec![
                name(pdb).into(),
                bound("minAvailable").into(),
                bound("maxUnavailable").into(),
                int(count(pdb, &["status", "disruptionsAllowed"])),
                ctx.age(pdb),
            ]
        },
    )
}

/// ControllerRevision columns.
pub(super) fn controller_revision() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Controller", "Controller of the object"),
            Column::string(
                "Revision",
                "Revision indicates the revision of the state represented by Data.",
            ),
            Column::AGE,
        ],
        |revision, ctx| {
            // `kind.group/name` of the controlling owner (`kind/name` in the core group).
            let controller = list(revision, &["metadata", "ownerReferences"])
                .iter()
                .find(|owner| boolean(owner, &["controller"]) == Some(true))
                .map_or_else(
                    || "<none>".to_owned(),
                    |owner| {
                        let kind = text(owner, &["kind"]);
                        let group = text(owner, &["apiVersion"])
                            .rsplit_once('/')
                            .map_or("", |(group, _)| group);
                        let group_kind = if group.is_empty() {
                            kind.to_owned()
                        } else {
                            format!("{kind}.{group}")
                        };
                        if group_kind.is_empty() {
                            text(owner, &["name"]).to_owned()
                        } else {
                            format!("{}/{}", group_kind.to_lowercase(), text(owner, &["name"]))
                        }
                    },
                );
            vec![
                name(revision).into(),
                controller.into(),
                int(count(revision, &["revision"])),
                ctx.age(revision),
            ]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;
    use crate::api::rest::table::age::parse_timestamp;

    fn ctx(minor: u32) -> PrintContext {
        PrintContext {
            now: parse_timestamp("2024-06-01T12:00:00Z").unwrap(),
            version: KubeVersion { major: 1, minor },
        }
    }

    fn headers(printer: &Printer) -> Vec<(&'static str, i64)> {
        printer.columns.iter().map(|c| (c.name, c.priority)).collect()
    }

    #[test]
    fn job_columns_and_cells_follow_the_version() {
        assert_eq!(
            headers(&job(true)),
            [
                ("Name", 0),
                ("Status", 0),
                ("Completions", 0),
                ("Duration", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1)
            ]
        );
        let running = json!({
            "metadata": {"name": "pi", "creationTimestamp": "2024-06-01T11:56:40Z"},
            "spec": {"completions": 3, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
                     "template": {"spec": {"containers": [{"name": "pi", "image": "perl:5"}]}}},
            "status": {"succeeded": 1, "startTime": "2024-06-01T11:57:00Z"}});
        assert_eq!(
            job_cells(&running, &ctx(36)),
            json!([
                "pi",
                "Running",
                "1/3",
                "3m",
                "3m20s",
                "pi",
                "perl:5",
                "batch.kubernetes.io/controller-uid=u1"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        assert_eq!(
            job_cells(&running, &ctx(29))[1..4],
            [json!("1/3"), json!("3m"), json!("3m20s")]
        );
        let done = json!({
            "metadata": {"name": "d", "creationTimestamp": "2024-05-30T12:00:00Z"},
            "spec": {"parallelism": 2},
            "status": {"succeeded": 2, "startTime": "2024-05-30T12:00:05Z", "completionTime": "2024-05-30T12:01:00Z",
                       "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}});
        assert_eq!(
            job_cells(&done, &ctx(36))[..5],
            [
                json!("d"),
                json!("Complete"),
                json!("2/1 of 2"),
                json!("55s"),
                json!("2d")
            ]
        );
        let criteria = json!({"metadata": {"name": "c"}, "status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}});
        assert_eq!(job_cells(&criteria, &ctx(36))[1], "SuccessCriteriaMet");
        assert_eq!(job_cells(&criteria, &ctx(33))[1], "Running");
        let suspended = json!({"metadata": {"name": "s", "deletionTimestamp": "2024-06-01T12:00:00Z"},
            "status": {"conditions": [{"type": "Suspended", "status": "True"}, {"type": "Failed", "status": "False"}]}});
        assert_eq!(job_cells(&suspended, &ctx(36))[1], "Terminating");
        assert_eq!(
            job_cells(&suspended, &ctx(36))[2..5],
            [json!("0/1"), json!(""), json!("<unknown>")]
        );
    }

    #[test]
    fn pod_status_ready_and_restarts() {
        let running = json!({
            "metadata": {"name": "web", "creationTimestamp": "2024-06-01T10:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}],
                     "readinessGates": [{"conditionType": "example.com/gate"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.1.0.5"}],
                "conditions": [{"type": "Ready", "status": "False"}, {"type": "example.com/gate", "status": "True"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-06-01T11:55:00Z"}}},
                    {"name": "b", "ready": false, "restartCount": 1,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(
            pod_cells(&running, &ctx(36)),
            json!([
                "web",
                "1/2",
                "CrashLoopBackOff",
                "3 (5m ago)",
                "120m",
                "10.1.0.5",
                "n1",
                "<none>",
                "1/1"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        assert!(pod_conditions(&running).is_empty());

        let pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}});
        assert_eq!(
            pod_cells(&pending, &ctx(36)),
            json!([
                "p",
                "0/1",
                "Pending",
                "0",
                "<unknown>",
                "<none>",
                "<none>",
                "<none>",
                "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );

        let initializing = json!({"metadata": {"name": "i"},
            "spec": {"initContainers": [{"name": "setup"}, {"name": "proxy", "restartPolicy": "Always"}],
                     "containers": [{"name": "app"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "setup", "state": {"terminated": {"exitCode": 0}}},
                {"name": "proxy", "started": false, "state": {"waiting": {"reason": "PodInitializing"}}}]}});
        assert_eq!(
            pod_cells(&initializing, &ctx(36))[1..3],
            [json!("0/2"), json!("Init:1/2")]
        );

        let failed_init = json!({"metadata": {"name": "f"}, "spec": {"initContainers": [{"name": "setup"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [{"name": "setup", "state": {"terminated": {"exitCode": 3}}}]}});
        assert_eq!(pod_cells(&failed_init, &ctx(36))[2], "Init:ExitCode:3");

        let succeeded = json!({"metadata": {"name": "s"}, "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Succeeded", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
        assert_eq!(
            pod_cells(&succeeded, &ctx(36))[1..3],
            [json!("0/1"), json!("Completed")]
        );
        assert_eq!(
            pod_conditions(&succeeded),
            [
                json!({"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."})
            ]
        );

        let deleting = json!({"metadata": {"name": "d", "deletionTimestamp": "2024-06-01T12:00:00Z"},
            "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running"}});
        assert_eq!(pod_cells(&deleting, &ctx(36))[2], "Terminating");
    }

    #[test]
    fn controllers_print_replicas_and_selectors() {
        let template = json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}});
        let deployment_object = json!({
            "metadata": {"name": "web", "creationTimestamp": "2024-06-01T11:59:55Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            (deployment().cells)(&deployment_object, &ctx(36)),
            json!([
                "web",
                "2/3",
                3,
                2,
                "5s",
                "nginx,log",
                "nginx:1.27,busybox",
                "app=web"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let bare = json!({"metadata": {"name": "b"}});
        assert_eq!((deployment().cells)(&bare, &ctx(36))[1], "0/1");
        assert_eq!((deployment().cells)(&bare, &ctx(36))[7], "");
        assert_eq!((replica_set().cells)(&bare, &ctx(36))[7], "<none>");
        assert_eq!((stateful_set().cells)(&deployment_object, &ctx(36))[1], "2/3");
        let rc = json!({"metadata": {"name": "rc"}, "spec": {"replicas": 2, "selector": {"app": "web"}, "template": template},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            (replication_controller().cells)(&rc, &ctx(36))[1..4],
            [json!(2), json!(2), json!(1)]
        );
        assert_eq!((replication_controller().cells)(&rc, &ctx(36))[7], "app=web");
        let ds = json!({"metadata": {"name": "ds"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": []}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                       "updatedNumberScheduled": 3, "numberAvailable": 2}});
        assert_eq!(
            (daemon_set().cells)(&ds, &ctx(36)),
            json!([
                "ds",
                3,
                3,
                2,
                3,
                2,
                "kubernetes.io/os=linux",
                "<unknown>",
                "",
                "",
                "app=agent"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let pt = json!({"metadata": {"name": "pt"}, "template": template});
        assert_eq!(
            (pod_template().cells)(&pt, &ctx(36)),
            json!(["pt", "nginx,log", "nginx:1.27,busybox", "app=web"])
                .as_array()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn controller_revisions_name_their_controller() {
        let revision = json!({"metadata": {"name": "web-7d4b9", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]}, "revision": 3});
        assert_eq!(
            (controller_revision().cells)(&revision, &ctx(36))[..3],
            [json!("web-7d4b9"), json!("statefulset.apps/web"), json!(3)]
        );
        let orphan = json!({"metadata": {"name": "o", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]}});
        assert_eq!((controller_revision().cells)(&orphan, &ctx(36))[1], "<none>");
    }

    #[test]
    fn cron_jobs_hpas_and_pdbs() {
        let cron = json!({"metadata": {"name": "nightly", "creationTimestamp": "2024-05-01T12:00:00Z"},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": "2024-06-01T03:00:00Z"}});
        assert_eq!(
            (cron_job().cells)(&cron, &ctx(36)),
            json!([
                "nightly",
                "0 3 * * *",
                "<none>",
                "False",
                1,
                "9h",
                "31d",
                "c",
                "busybox",
                "<none>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let hpa = json!({"metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}]},
            "status": {"currentReplicas": 2, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42}}}]}});
        assert_eq!(
            (horizontal_pod_autoscaler().cells)(&hpa, &ctx(36))[1..6],
            [
                json!("Deployment/web"),
                json!("cpu: 42%/60%, memory: <unknown>/500Mi + 1 more..."),
                json!("<unset>"),
                json!(5),
                json!(2)
            ]
        );
        let v1 = json!({"metadata": {"name": "v1"}, "spec": {"minReplicas": 1, "targetCPUUtilizationPercentage": 50}});
        assert_eq!(
            (horizontal_pod_autoscaler().cells)(&v1, &ctx(36))[2..4],
            [json!("cpu: <unknown>/50%"), json!("1")]
        );
        let pdb = json!({"metadata": {"name": "pdb"}, "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            (pod_disruption_budget().cells)(&pdb, &ctx(36))[..4],
            [json!("pdb"), json!("50%"), json!("N/A"), json!(1)]
        );
    }
}
