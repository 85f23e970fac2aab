//! Printers of cluster, configuration and access-control kinds (printers.go's `printNamespace`,
//! `printNode`, `printEvent`, `printConfigMap`, `printSecret`, `printServiceAccount`,
//! `printResourceQuota`, `printLease`, `printLeaseCandidate`, `printPriorityClass`,
//! `printRuntimeClass`, `printRoleBinding`, `printClusterRoleBinding`,
//! `printCertificateSigningRequest`, `printClusterTrustBundle`, `printDeviceClass`).

use serde_json::Value;

use super::format::{at, boolean, condition, count, list, map_len, name, non_empty, quantity, text};
use super::printers::{CellsFn, Column, PrintContext, Printer};

/// A count cell.
fn size(n: usize) -> Value {
    Value::from(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Namespace columns.
pub(super) fn namespace() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Status", "The status of the namespace"),
            Column::AGE,
        ],
        |namespace, ctx| {
            vec![
                name(namespace).into(),
                // The registry sets `Active` on create.
                non_empty(namespace, &["status", "phase"])
                    .unwrap_or("Active")
                    .into(),
                ctx.age(namespace),
            ]
        },
    )
}

/// Node columns.
pub(super) fn node() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Status", "The status of the node"),
            Column::string("Roles", "The roles of the node"),
            Column::AGE,
            Column::string("Version", "Kubelet Version reported by the node."),
            Column::string(
                "Internal-IP",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            )
            .wide(),
            Column::string(
                "External-IP",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            )
            .wide(),
            Column::string(
                "OS-Image",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            )
            .wide(),
            Column::string(
                "Kernel-Version",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            )
            .wide(),
            Column::string(
                "Container-Runtime",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            )
            .wide(),
        ],
        node_cells,
    )
}

/// `printNode`: `Ready`/`NotReady`/`Unknown` from the Ready condition, `SchedulingDisabled` when
/// cordoned; roles from `node-role.kubernetes.io/<role>` and `kubernetes.io/role` labels.
fn node_cells(node: &Value, ctx: &PrintContext) -> Vec<Value> {
    let mut status: Vec<&str> = match condition(node, "Ready") {
        Some(c) if text(c, &["status"]) == "True" => vec!["Ready"],
        Some(_) => vec!["NotReady"],
        None => vec!["Unknown"],
    };
    if boolean(node, &["spec", "unschedulable"]) == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = at(node, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(
                    |(key, value)| match key.strip_prefix("node-role.kubernetes.io/") {
                        Some(role) if !role.is_empty() => Some(role),
                        Some(_) => None,
                        None if key == "kubernetes.io/role" => value.as_str().filter(|v| !v.is_empty()),
                        None => None,
                    },
                )
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    roles.dedup();
    let address = |kind: &str| {
        list(node, &["status", "addresses"])
            .iter()
            .find(|a| text(a, &["type"]) == kind)
            .map_or("<none>", |a| text(a, &["address"]))
    };
    let info = |field: &str| non_empty(node, &["status", "nodeInfo", field]).unwrap_or("<unknown>");
    vec![
        name(node).into(),
        status.join(",").into(),
        if roles.is_empty() {
            "<none>".to_owned()
        } else {
            roles.join(",")
        }
        .into(),
        ctx.age(node),
        text(node, &["status", "nodeInfo", "kubeletVersion"]).into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

/// Event columns (core/v1 and events.k8s.io/v1 share them, as upstream shares the printer); the
/// name comes last.
pub(super) fn event(cells: CellsFn) -> Printer {
    Printer::new(
        vec![
            Column::string(
                "Last Seen",
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            Column::string(
                "Type",
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            Column::string(
                "Reason",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            Column::string("Object", "The object that this event is about."),
            Column::string(
                "Subobject",
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
            )
            .wide(),
            Column::string(
                "Source",
                "The component reporting this event. Should be a short machine understandable string.",
            )
            .wide(),
            Column::string(
                "Message",
                "A human-readable description of the status of this operation.",
            ),
            Column::string(
                "First Seen",
                "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            )
            .wide(),
            Column::string("Count", "The number of times this event has occurred.").wide(),
            Column::NAME.wide(),
        ],
        cells,
    )
}

/// Where an Event version keeps the fields `printEvent` reads (events.k8s.io/v1 renamed the
/// core fields it deprecated; upstream converts both to one internal type).
struct EventFields {
    regarding: &'static str,
    message: &'static str,
    source: &'static str,
    first: &'static str,
    last: &'static str,
    count: &'static str,
}

/// `printEvent` over a core/v1 Event.
pub(super) fn core_event_cells(event: &Value, ctx: &PrintContext) -> Vec<Value> {
    event_cells(
        event,
        ctx,
        &EventFields {
            regarding: "involvedObject",
            message: "message",
            source: "source",
            first: "firstTimestamp",
            last: "lastTimestamp",
            count: "count",
        },
    )
}

/// `printEvent` over an events.k8s.io/v1 Event.
pub(super) fn events_v1_event_cells(event: &Value, ctx: &PrintContext) -> Vec<Value> {
    event_cells(
        event,
        ctx,
        &EventFields {
            regarding: "regarding",
            message: "note",
            source: "deprecatedSource",
            first: "deprecatedFirstTimestamp",
            last: "deprecatedLastTimestamp",
            count: "deprecatedCount",
        },
    )
}

/// `printEvent`: last/first seen (falling back to `eventTime`, and to the series' last
/// observation), `kind/name` of the object, source `component, host` (or the reporting controller
/// and instance), count (1 for a singleton).
fn event_cells(event: &Value, ctx: &PrintContext, fields: &EventFields) -> Vec<Value> {
    let timestamp = |field: &str| non_empty(event, &[field]);
    let first_seen = match timestamp(fields.first) {
        Some(first) => ctx.since(Some(first)),
        None => ctx.since(timestamp("eventTime")),
    };
    let mut last_seen = match timestamp(fields.last) {
        Some(last) => ctx.since(Some(last)),
        None => first_seen.clone(),
    };
    let series = at(event, &["series"]).filter(|s| s.is_object());
    let occurrences = match series {
        Some(series) => {
            last_seen = ctx.since(non_empty(series, &["lastObservedTime"]));
            count(series, &["count"])
        }
        None => match count(event, &[fields.count]) {
            0 => 1,
            n => n,
        },
    };
    let regarding = at(event, &[fields.regarding]);
    let kind = regarding.map_or("", |r| text(r, &["kind"])).to_lowercase();
    let object = match regarding.and_then(|r| non_empty(r, &["name"])) {
        Some(object_name) => format!("{kind}/{object_name}"),
        None => kind,
    };
    let component = non_empty(event, &[fields.source, "component"])
        .or_else(|| non_empty(event, &["reportingController"]));
    let instance =
        non_empty(event, &[fields.source, "host"]).or_else(|| non_empty(event, &["reportingInstance"]));
    let source = match (component, instance) {
        (None, _) => String::new(),
        (Some(component), None) => component.to_owned(),
        (Some(component), Some(instance)) => format!("{component}, {instance}"),
    };
    vec![
        last_seen.into(),
        text(event, &["type"]).into(),
        text(event, &["reason"]).into(),
        object.into(),
        regarding.map_or("", |r| text(r, &["fieldPath"])).into(),
        source.into(),
        text(event, &[fields.message]).trim().into(),
        first_seen.into(),
        Value::from(occurrences),
        name(event).into(),
    ]
}

/// ConfigMap columns.
pub(super) fn config_map() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Data",
                "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
            ),
            Column::AGE,
        ],
        |map, ctx| {
            vec![
                name(map).into(),
                size(map_len(map, &["data"]) + map_len(map, &["binaryData"])),
                ctx.age(map),
            ]
        },
    )
}

/// Secret columns.
pub(super) fn secret() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Type", "Used to facilitate programmatic handling of secret data."),
            Column::string(
                "Data",
                "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
            ),
            Column::AGE,
        ],
        |secret, ctx| {
            // `stringData` is merged into `data` on write upstream; count the keys of both.
            let mut keys: Vec<&String> = ["data", "stringData"]
                .iter()
                .filter_map(|field| secret.get(field).and_then(Value::as_object))
                .flat_map(serde_json::Map::keys)
                .collect();
            keys.sort_unstable();
            keys.dedup();
            vec![
                name(secret).into(),
                non_empty(secret, &["type"]).unwrap_or("Opaque").into(),
                size(keys.len()),
                ctx.age(secret),
            ]
        },
    )
}

/// ServiceAccount columns.
pub(super) fn service_account() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Secrets",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            Column::AGE,
        ],
        |account, ctx| {
            vec![
                name(account).into(),
                size(list(account, &["secrets"]).len()),
                ctx.age(account),
            ]
        },
    )
}

/// ResourceQuota columns; `age_last`: `Age` after `Request`/`Limit` (1.33 and later; before, it
/// came second).
pub(super) fn resource_quota(age_last: bool) -> Printer {
    let request = Column::string(
        "Request",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    );
    let limit = Column::string(
        "Limit",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
    );
    if age_last {
        Printer::new(vec![Column::NAME, request, limit, Column::AGE], |quota, ctx| {
            let (request, limit) = quota_usage(quota);
            vec![name(quota).into(), request.into(), limit.into(), ctx.age(quota)]
        })
    } else {
        Printer::new(vec![Column::NAME, Column::AGE, request, limit], |quota, ctx| {
            let (request, limit) = quota_usage(quota);
            vec![name(quota).into(), ctx.age(quota), request.into(), limit.into()]
        })
    }
}

/// `name: used/hard` for each resource of `status.hard` (sorted), `limits.*` in the second list.
fn quota_usage(quota: &Value) -> (String, String) {
    let Some(hard) = at(quota, &["status", "hard"]).and_then(Value::as_object) else {
        return (String::new(), String::new());
    };
    let mut resources: Vec<&String> = hard.keys().collect();
    resources.sort_unstable();
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for resource in resources {
        let entry = format!(
            "{resource}: {}/{}",
            quantity(at(quota, &["status", "used", resource])),
            quantity(hard.get(resource))
        );
        if resource.starts_with("limits.") {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    (requests.join(", "), limits.join(", "))
}

/// ComponentStatus columns (`printComponentStatus`): the `Healthy` condition as `Healthy`/`Unhealthy`
/// (`Unknown` without one), with its message and error.
pub(super) fn component_status() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Status", "Status of the component conditions"),
            Column::string("Message", "Message of the component conditions"),
            Column::string("Error", "Error of the component conditions"),
        ],
        |status, _| {
            let healthy = status
                .get("conditions")
                .and_then(Value::as_array)
                .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Healthy"));
            let (state, message, error) = match healthy {
                None => ("Unknown", "", ""),
                Some(condition) => (
                    if condition["status"] == "True" {
                        "Healthy"
                    } else {
                        "Unhealthy"
                    },
                    text(condition, &["message"]),
                    text(condition, &["error"]),
                ),
            };
            vec![name(status).into(), state.into(), message.into(), error.into()]
        },
    )
}

/// Lease columns.
pub(super) fn lease() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Holder",
                "holderIdentity contains the identity of the holder of a current lease.",
            ),
            Column::AGE,
        ],
        |lease, ctx| {
            vec![
                name(lease).into(),
                text(lease, &["spec", "holderIdentity"]).into(),
                ctx.age(lease),
            ]
        },
    )
}

/// PriorityClass columns; `preemption_policy`: the `PreemptionPolicy` column (1.32 and later).
pub(super) fn priority_class(preemption_policy: bool) -> Printer {
    let mut columns = vec![
        Column::NAME,
        Column::typed(
            "Value",
            "integer",
            "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
        ),
        Column::typed(
            "Global-Default",
            "boolean",
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
        ),
        Column::AGE,
    ];
    if preemption_policy {
        // Priority 0, so kubectl shows it without `-o wide` (upstream fills it only for wide output,
        // which the server always asks for).
        columns.push(Column::string(
            "PreemptionPolicy",
            "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
        ));
    }
    Printer::new(columns, |class, ctx| {
        let mut cells = vec![
            name(class).into(),
            Value::from(count(class, &["value"])),
            Value::from(boolean(class, &["globalDefault"]).unwrap_or(false)),
            ctx.age(class),
        ];
        if ctx.at_least(32) {
            // Defaulted to PreemptLowerPriority upstream.
            cells.push(
                non_empty(class, &["preemptionPolicy"])
                    .unwrap_or("PreemptLowerPriority")
                    .into(),
            );
        }
        cells
    })
}

/// RuntimeClass columns.
pub(super) fn runtime_class() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            // Upstream looks the description up in ObjectMeta's docs, which have no `handler`: empty.
            Column::string("Handler", ""),
            Column::AGE,
        ],
        |class, ctx| {
            vec![
                name(class).into(),
                text(class, &["handler"]).into(),
                ctx.age(class),
            ]
        },
    )
}

/// RoleBinding columns.
pub(super) fn role_binding() -> Printer {
    binding_printer(
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
        [
            "Users in the roleBinding",
            "Groups in the roleBinding",
            "ServiceAccounts in the roleBinding",
        ],
    )
}

/// ClusterRoleBinding columns.
pub(super) fn cluster_role_binding() -> Printer {
    binding_printer(
        "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
        [
            "Users in the clusterRoleBinding",
            "Groups in the clusterRoleBinding",
            "ServiceAccounts in the clusterRoleBinding",
        ],
    )
}

/// `printRoleBinding` / `printClusterRoleBinding`: `Kind/name` of the role and (wide) the subjects
/// by kind (`rbac.SubjectsStrings`; service accounts as `namespace/name`).
fn binding_printer(role: &'static str, subjects: [&'static str; 3]) -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string("Role", role),
            Column::AGE,
            Column::string("Users", subjects[0]).wide(),
            Column::string("Groups", subjects[1]).wide(),
            Column::string("ServiceAccounts", subjects[2]).wide(),
        ],
        |binding, ctx| {
            let subjects = list(binding, &["subjects"]);
            let of_kind = |kind: &str| {
                subjects
                    .iter()
                    .filter(|s| text(s, &["kind"]) == kind)
                    .map(|s| match kind {
                        "ServiceAccount" => {
                            format!("{}/{}", text(s, &["namespace"]), text(s, &["name"]))
                        }
                        _ => text(s, &["name"]).to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![
                name(binding).into(),
                format!(
                    "{}/{}",
                    text(binding, &["roleRef", "kind"]),
                    text(binding, &["roleRef", "name"])
                )
                .into(),
                ctx.age(binding),
                of_kind("User").into(),
                of_kind("Group").into(),
                of_kind("ServiceAccount").into(),
            ]
        },
    )
}

/// CertificateSigningRequest columns.
pub(super) fn certificate_signing_request() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::AGE,
            Column::string(
                "SignerName",
                "signerName indicates the requested signer, and is a qualified name.",
            ),
            // Upstream describes `Requestor` with the `request` field's doc.
            Column::string(
                "Requestor",
                "request contains an x509 certificate signing request encoded in a \"CERTIFICATE REQUEST\" PEM block. When serialized as JSON or YAML, the data is additionally base64-encoded.",
            ),
            Column::string(
                "RequestedDuration",
                "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.",
            ),
            Column::string(
                "Condition",
                "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\".",
            ),
        ],
        |csr, ctx| {
            let requested = super::format::integer(csr, &["spec", "expirationSeconds"]).map_or_else(
                || "<none>".to_owned(),
                |seconds| super::age::human_duration(time::Duration::seconds(seconds)),
            );
            vec![
                name(csr).into(),
                ctx.age(csr),
                non_empty(csr, &["spec", "signerName"]).unwrap_or("<none>").into(),
                text(csr, &["spec", "username"]).into(),
                requested.into(),
                csr_condition(csr).into(),
            ]
        },
    )
}

/// `extractCSRStatus`: Denied, else Approved, else Pending (by condition type, whatever its
/// status), then `,Failed` and `,Issued` (a certificate is in the status).
fn csr_condition(csr: &Value) -> String {
    let has = |kind: &str| {
        list(csr, &["status", "conditions"])
            .iter()
            .any(|c| text(c, &["type"]) == kind)
    };
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_owned();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if non_empty(csr, &["status", "certificate"]).is_some() {
        status.push_str(",Issued");
    }
    status
}

/// ClusterTrustBundle columns (no age, as upstream).
pub(super) fn cluster_trust_bundle() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "SignerName",
                "signerName indicates the associated signer, if any.",
            ),
        ],
        |bundle, _| {
            vec![
                name(bundle).into(),
                non_empty(bundle, &["spec", "signerName"])
                    .unwrap_or("<none>")
                    .into(),
            ]
        },
    )
}

/// LeaseCandidate columns.
pub(super) fn lease_candidate() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "LeaseName",
                "LeaseName is the name of the lease for which this candidate is contending. The limits on this field are the same as on Lease.name. Multiple lease candidates may reference the same Lease.name. This field is immutable.",
            ),
            // Upstream looks these up in ObjectMeta's docs, which have neither: empty.
            Column::string("BinaryVersion", ""),
            Column::string("EmulationVersion", ""),
            Column::AGE,
        ],
        |candidate, ctx| {
            vec![
                name(candidate).into(),
                text(candidate, &["spec", "leaseName"]).into(),
                text(candidate, &["spec", "binaryVersion"]).into(),
                text(candidate, &["spec", "emulationVersion"]).into(),
                ctx.age(candidate),
            ]
        },
    )
}

/// DeviceClass columns.
pub(super) fn device_class() -> Printer {
    Printer::new(vec![Column::NAME, Column::AGE], |class, ctx| {
        vec![name(class).into(), ctx.age(class)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;
    use crate::api::rest::table::age::parse_timestamp;
    use serde_json::json;

    fn ctx(minor: u32) -> PrintContext {
        PrintContext {
            now: parse_timestamp("2024-06-01T12:00:00Z").unwrap(),
            version: KubeVersion { major: 1, minor },
        }
    }

    fn cells(printer: Printer, object: Value, minor: u32) -> Vec<Value> {
        (printer.cells)(&object, &ctx(minor))
    }

    #[test]
    fn nodes_and_namespaces() {
        let node_object = json!({"metadata": {"name": "n1", "creationTimestamp": "2024-05-31T12:00:00Z",
                "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "x", "kubernetes.io/role": "master"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.0.10"}, {"type": "Hostname", "address": "n1"}],
                "nodeInfo": {"kubeletVersion": "v1.36.0", "osImage": "Debian GNU/Linux 12 (bookworm)"}}});
        assert_eq!(
            cells(node(), node_object, 36),
            json!([
                "n1",
                "Ready,SchedulingDisabled",
                "control-plane,master",
                "24h",
                "v1.36.0",
                "192.168.0.10",
                "<none>",
                "Debian GNU/Linux 12 (bookworm)",
                "<unknown>",
                "<unknown>"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        assert_eq!(
            cells(node(), json!({"metadata": {"name": "n"}}), 36)[1..3],
            [json!("Unknown"), json!("<none>")]
        );
        let terminating = json!({"metadata": {"name": "ns"}, "status": {"phase": "Terminating"}});
        assert_eq!(cells(namespace(), terminating, 36)[1], "Terminating");
        assert_eq!(
            cells(namespace(), json!({"metadata": {"name": "ns"}}), 36)[1],
            "Active"
        );
    }

    #[test]
    fn core_and_events_v1_events_print_alike() {
        let core = json!({"metadata": {"name": "web.17c"}, "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " Back-off restarting \n",
            "firstTimestamp": "2024-06-01T11:00:00Z", "lastTimestamp": "2024-06-01T11:58:00Z", "count": 7});
        let expected = json!([
            "2m",
            "Warning",
            "BackOff",
            "pod/web",
            "spec.containers{app}",
            "kubelet, n1",
            "Back-off restarting",
            "60m",
            7,
            "web.17c"
        ]);
        assert_eq!(
            cells(event(core_event_cells), core, 36),
            expected.as_array().unwrap().clone()
        );
        let v1 = json!({"metadata": {"name": "web.17c"}, "type": "Warning", "reason": "BackOff",
            "regarding": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "deprecatedSource": {"component": "kubelet", "host": "n1"}, "note": " Back-off restarting \n",
            "deprecatedFirstTimestamp": "2024-06-01T11:00:00Z", "deprecatedLastTimestamp": "2024-06-01T11:58:00Z",
            "deprecatedCount": 7});
        assert_eq!(
            cells(event(events_v1_event_cells), v1, 36),
            expected.as_array().unwrap().clone()
        );
        let series = json!({"metadata": {"name": "s"}, "eventTime": "2024-06-01T11:59:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2024-06-01T11:59:50.000000Z"},
            "reportingController": "scheduler", "regarding": {"kind": "Node"}});
        assert_eq!(
            cells(event(events_v1_event_cells), series, 36),
            json!(["10s", "", "", "node", "", "scheduler", "", "60s", 3, "s"])
                .as_array()
                .unwrap()
                .clone()
        );
        let printer = event(core_event_cells);
        assert_eq!(printer.columns.last().unwrap().name, "Name");
        assert_eq!(printer.columns[0].name, "Last Seen");
    }

    #[test]
    fn config_secrets_and_accounts_count_entries() {
        let map =
            json!({"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(cells(config_map(), map, 36)[1], 3);
        let secret_object = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}, "stringData": {"tls.key": "x", "ca.crt": "y"}});
        assert_eq!(
            cells(secret(), secret_object, 36)[1..3],
            [json!("kubernetes.io/tls"), json!(3)]
        );
        assert_eq!(
            cells(secret(), json!({"metadata": {"name": "s"}}), 36)[1..3],
            [json!("Opaque"), json!(0)]
        );
        let account = json!({"metadata": {"name": "default"}, "secrets": [{"name": "t"}]});
        assert_eq!(cells(service_account(), account, 36)[1], 1);
    }

    #[test]
    fn quotas_leases_and_classes() {
        let quota = json!({"metadata": {"name": "q", "creationTimestamp": "2024-06-01T11:59:00Z"},
            "status": {"hard": {"pods": "10", "limits.cpu": "2", "requests.cpu": "1", "limits.memory": "2Gi"},
                       "used": {"pods": "3", "requests.cpu": "500m"}}});
        assert_eq!(
            cells(resource_quota(true), quota.clone(), 36),
            json!([
                "q",
                "pods: 3/10, requests.cpu: 500m/1",
                "limits.cpu: 0/2, limits.memory: 0/2Gi",
                "60s"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        assert_eq!(cells(resource_quota(false), quota, 32)[1], "60s");
        let lease_object = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a_1"}});
        assert_eq!(cells(lease(), lease_object, 36)[1], "a_1");
        let class = json!({"metadata": {"name": "high"}, "value": 1000, "globalDefault": true});
        assert_eq!(
            cells(priority_class(true), class.clone(), 36),
            [
                json!("high"),
                json!(1000),
                json!(true),
                json!("<unknown>"),
                json!("PreemptLowerPriority")
            ]
        );
        assert_eq!(cells(priority_class(false), class, 31).len(), 4);
        assert_eq!(priority_class(true).columns[4].priority, 0);
        let runtime = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
        assert_eq!(cells(runtime_class(), runtime, 36)[1], "runsc");
    }

    #[test]
    fn certificates_candidates_and_classes() {
        let csr = json!({"metadata": {"name": "csr-1", "creationTimestamp": "2024-06-01T11:59:30Z"},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "alice", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}});
        assert_eq!(
            cells(certificate_signing_request(), csr, 36),
            [
                json!("csr-1"),
                json!("30s"),
                json!("kubernetes.io/kube-apiserver-client"),
                json!("alice"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
        let denied = json!({"metadata": {"name": "d"}, "status": {"conditions": [
            {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}, {"type": "Failed", "status": "True"}]}});
        assert_eq!(
            cells(certificate_signing_request(), denied, 36)[2..],
            [
                json!("<none>"),
                json!(""),
                json!("<none>"),
                json!("Denied,Failed")
            ]
        );
        assert_eq!(
            cells(
                certificate_signing_request(),
                json!({"metadata": {"name": "p"}}),
                36
            )[5],
            "Pending"
        );
        let bundle = json!({"metadata": {"name": "b"}});
        assert_eq!(
            cells(cluster_trust_bundle(), bundle, 36),
            [json!("b"), json!("<none>")]
        );
        let candidate = json!({"metadata": {"name": "kcm-a"}, "spec": {"leaseName": "kube-controller-manager",
            "binaryVersion": "1.36.0", "emulationVersion": "1.35"}});
        assert_eq!(
            cells(lease_candidate(), candidate, 36)[..4],
            [
                json!("kcm-a"),
                json!("kube-controller-manager"),
                json!("1.36.0"),
                json!("1.35")
            ]
        );
        assert_eq!(
            cells(device_class(), json!({"metadata": {"name": "gpu"}}), 36),
            [json!("gpu"), json!("<unknown>")]
        );
    }

    #[test]
    fn role_bindings() {
        let binding = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "namespace": "ci", "name": "runner"}, {"kind": "User", "name": "bob"}]});
        let expected = json!([
            "b",
            "ClusterRole/view",
            "<unknown>",
            "alice, bob",
            "devs",
            "ci/runner"
        ]);
        assert_eq!(
            cells(role_binding(), binding.clone(), 36),
            expected.as_array().unwrap().clone()
        );
        assert_eq!(
            cells(cluster_role_binding(), binding, 36),
            expected.as_array().unwrap().clone()
        );
        assert_eq!(
            cluster_role_binding().columns[3].description,
            "Users in the clusterRoleBinding"
        );
        assert_eq!(role_binding().columns[3].priority, 1);
    }
}
