//! Printers of the API server's own configuration: admission webhooks and policies, API priority
//! and fairness, storage versions, and aggregated APIs (printers.go's
//! `printValidating/MutatingWebhook`, `printValidating/MutatingAdmissionPolicy[Binding]`,
//! `printFlowSchema`, `printPriorityLevelConfiguration`, `printStorageVersion`, and
//! kube-aggregator's `printAPIService`).

use serde_json::Value;

use super::format::{at, condition, integer, list, name, non_empty, scalar, text, with_more};
use super::printers::{Column, Printer};

/// A count cell.
fn size(n: usize) -> Value {
    Value::from(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Validating/MutatingWebhookConfiguration columns.
pub(super) fn webhook_configuration() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::typed(
                "Webhooks",
                "integer",
                "Webhooks indicates the number of webhooks registered in this configuration",
            ),
            Column::AGE,
        ],
        |configuration, ctx| {
            vec![
                name(configuration).into(),
                size(list(configuration, &["webhooks"]).len()),
                ctx.age(configuration),
            ]
        },
    )
}

/// APIService columns (kube-aggregator's printer).
pub(super) fn api_service() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Service",
                "The reference to the service that hosts this API endpoint.",
            ),
            Column::string("Available", "Whether this service is available."),
            Column::AGE,
        ],
        |service, ctx| {
            let backend = match at(service, &["spec", "service"]).filter(|s| s.is_object()) {
                Some(s) => format!("{}/{}", text(s, &["namespace"]), text(s, &["name"])),
                None => "Local".to_owned(),
            };
            let available = match condition(service, "Available") {
                Some(c) if text(c, &["status"]) == "True" => "True".to_owned(),
                Some(c) => format!("{} ({})", text(c, &["status"]), text(c, &["reason"])),
                None => "Unknown".to_owned(),
            };
            vec![
                name(service).into(),
                backend.into(),
                available.into(),
                ctx.age(service),
            ]
        },
    )
}

/// ValidatingAdmissionPolicy (`field`: `validations`) and MutatingAdmissionPolicy (`mutations`)
/// columns.
pub(super) fn admission_policy(mutating: bool) -> Printer {
    let count_column = if mutating {
        Column::typed(
            "Mutations",
            "integer",
            "Mutation indicates the number of mutations rules defined in this configuration",
        )
    } else {
        Column::typed(
            "Validations",
            "integer",
            "Validations indicates the number of validation rules defined in this configuration",
        )
    };
    Printer::new(
        vec![
            Column::NAME,
            count_column,
            Column::string(
                "ParamKind",
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
            Column::AGE,
        ],
        if mutating {
            |policy, ctx| admission_policy_cells(policy, ctx, "mutations")
        } else {
            |policy, ctx| admission_policy_cells(policy, ctx, "validations")
        },
    )
}

fn admission_policy_cells(policy: &Value, ctx: &super::printers::PrintContext, rules: &str) -> Vec<Value> {
    let param_kind = match at(policy, &["spec", "paramKind"]).filter(|p| p.is_object()) {
        Some(kind) => format!("{}/{}", text(kind, &["apiVersion"]), text(kind, &["kind"])),
        None => "<unset>".to_owned(),
    };
    vec![
        name(policy).into(),
        size(list(policy, &["spec", rules]).len()),
        param_kind.into(),
        ctx.age(policy),
    ]
}

/// Validating/MutatingAdmissionPolicyBinding columns.
pub(super) fn admission_policy_binding() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "PolicyName",
                "PolicyName indicates the policy definition which the policy binding binded to",
            ),
            Column::string(
                "ParamRef",
                "ParamRef indicates the param resource which sets the configration param",
            ),
            Column::AGE,
        ],
        |binding, ctx| {
            // `namespace/name`, `*/name` without a namespace, else the selector as Go prints the
            // struct; `<unset>` without a paramRef.
            let param = match at(binding, &["spec", "paramRef"]).filter(|p| p.is_object()) {
                Some(reference) => match non_empty(reference, &["name"]) {
                    Some(param_name) => match non_empty(reference, &["namespace"]) {
                        Some(namespace) => format!("{namespace}/{param_name}"),
                        None => format!("*/{param_name}"),
                    },
                    None => match reference.get("selector").filter(|s| s.is_object()) {
                        Some(selector) => go_label_selector(selector),
                        None => "<unset>".to_owned(),
                    },
                },
                None => "<unset>".to_owned(),
            };
            vec![
                name(binding).into(),
                text(binding, &["spec", "policyName"]).into(),
                param.into(),
                ctx.age(binding),
            ]
        },
    )
}

/// `LabelSelector.String()` (the generated struct printer): `&LabelSelector{MatchLabels:map[string]string{k: v,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[a b],},},}`.
fn go_label_selector(selector: &Value) -> String {
    let mut labels: Vec<(String, String)> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), scalar(Some(v)).unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let expressions: String = list(selector, &["matchExpressions"])
        .iter()
        .map(|e| {
            let values: Vec<String> = list(e, &["values"])
                .iter()
                .filter_map(|v| scalar(Some(v)))
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                text(e, &["key"]),
                text(e, &["operator"]),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

/// FlowSchema columns.
pub(super) fn flow_schema() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "PriorityLevel",
                "`name` is the name of the priority level configuration being referenced Required.",
            ),
            Column::string(
                "MatchingPrecedence",
                "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.",
            ),
            Column::string(
                "DistinguisherMethod",
                "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.",
            ),
            Column::AGE,
            Column::string(
                "MissingPL",
                "references a broken or non-existent PriorityLevelConfiguration",
            ),
        ],
        |schema, ctx| {
            let distinguisher = at(schema, &["spec", "distinguisherMethod"])
                .filter(|d| d.is_object())
                .map_or("<none>", |d| text(d, &["type"]));
            let dangling = condition(schema, "Dangling").map_or("?", |c| text(c, &["status"]));
            vec![
                name(schema).into(),
                text(schema, &["spec", "priorityLevelConfiguration", "name"]).into(),
                // Defaulted to 1000 upstream.
                Value::from(integer(schema, &["spec", "matchingPrecedence"]).unwrap_or(1000)),
                distinguisher.into(),
                ctx.age(schema),
                dangling.into(),
            ]
        },
    )
}

/// PriorityLevelConfiguration columns.
pub(super) fn priority_level_configuration() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Type",
                "`type` indicates whether this priority level is subject to limitation on request execution. A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.",
            ),
            Column::string(
                "NominalConcurrencyShares",
                "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level.",
            ),
            Column::string(
                "Queues",
                "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive. Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant. This field has a default value of 64.",
            ),
            Column::string(
                "HandSize",
                "`handSize` is a small positive number that configures the shuffle sharding of requests into queues. This field has a default value of 8.",
            ),
            Column::string(
                "QueueLengthLimit",
                "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected. This value must be positive. If not specified, it will be defaulted to 50.",
            ),
            Column::AGE,
        ],
        |level, ctx| {
            let none = || Value::from("<none>");
            let (mut shares, mut queues, mut hand, mut limit) = (none(), none(), none(), none());
            if let Some(limited) = at(level, &["spec", "limited"]).filter(|l| l.is_object()) {
                // Defaults as the API applies them: 30 shares; 64 queues, hand of 8, 50 long.
                shares = Value::from(integer(limited, &["nominalConcurrencyShares"]).unwrap_or(30));
                if let Some(queuing) = at(limited, &["limitResponse", "queuing"]).filter(|q| q.is_object()) {
                    queues = Value::from(integer(queuing, &["queues"]).unwrap_or(64));
                    hand = Value::from(integer(queuing, &["handSize"]).unwrap_or(8));
                    limit = Value::from(integer(queuing, &["queueLengthLimit"]).unwrap_or(50));
                }
            }
            vec![
                name(level).into(),
                text(level, &["spec", "type"]).into(),
                shares,
                queues,
                hand,
                limit,
                ctx.age(level),
            ]
        },
    )
}

/// StorageVersion columns.
pub(super) fn storage_version() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "CommonEncodingVersion",
                "If all API server instances agree on the same encoding storage version, then this field is set to that version. Otherwise this field is left empty. API servers should finish updating its storageVersionStatus entry before serving write operations, so that this field will be in sync with the reality.",
            ),
            Column::string(
                "StorageVersions",
                "The reported versions per API server instance.",
            ),
            Column::AGE,
        ],
        |version, ctx| {
            let reported: Vec<String> = list(version, &["status", "storageVersions"])
                .iter()
                .map(|s| format!("{}={}", text(s, &["apiServerID"]), text(s, &["encodingVersion"])))
                .collect();
            let versions = if reported.is_empty() {
                "<unset>".to_owned()
            } else {
                with_more(&reported[..reported.len().min(3)], reported.len())
            };
            vec![
                name(version).into(),
                non_empty(version, &["status", "commonEncodingVersion"])
                    .unwrap_or("<unset>")
                    .into(),
                versions.into(),
                ctx.age(version),
            ]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;
    use crate::api::rest::table::age::parse_timestamp;
    use crate::api::rest::table::printers::PrintContext;
    use serde_json::json;

    fn cells(printer: Printer, object: Value) -> Vec<Value> {
        let ctx = PrintContext {
            now: parse_timestamp("2024-06-01T12:00:00Z").unwrap(),
            version: KubeVersion::NEWEST,
        };
        (printer.cells)(&object, &ctx)
    }

    #[test]
    fn webhooks_and_api_services() {
        let webhooks = json!({"metadata": {"name": "w"}, "webhooks": [{}, {}]});
        assert_eq!(cells(webhook_configuration(), webhooks)[1], 2);
        let local = json!({"metadata": {"name": "v1."}, "spec": {"service": null},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        assert_eq!(cells(api_service(), local)[1..3], [json!("Local"), json!("True")]);
        let remote = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(
            cells(api_service(), remote)[1..3],
            [
                json!("kube-system/metrics-server"),
                json!("False (MissingEndpoints)")
            ]
        );
        assert_eq!(
            cells(api_service(), json!({"metadata": {"name": "x"}}))[2],
            "Unknown"
        );
    }

    #[test]
    fn admission_policies_and_bindings() {
        let policy = json!({"metadata": {"name": "p"}, "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "true"}, {"expression": "false"}]}});
        assert_eq!(
            cells(admission_policy(false), policy)[1..3],
            [json!(2), json!("v1/ConfigMap")]
        );
        let mutating = json!({"metadata": {"name": "m"}, "spec": {"mutations": [{}]}});
        assert_eq!(
            cells(admission_policy(true), mutating)[1..3],
            [json!(1), json!("<unset>")]
        );
        assert_eq!(admission_policy(true).columns[1].name, "Mutations");
        let named =
            json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": {"name": "cfg"}}});
        assert_eq!(
            cells(admission_policy_binding(), named)[1..3],
            [json!("p"), json!("*/cfg")]
        );
        let selected = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": {"selector": {
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]}}}});
        assert_eq!(
            cells(admission_policy_binding(), selected)[2],
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:env,Operator:In,Values:[prod dev],},},}"
        );
        let unset = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p"}});
        assert_eq!(cells(admission_policy_binding(), unset)[2], "<unset>");
    }

    #[test]
    fn flow_control_and_storage_versions() {
        let schema = json!({"metadata": {"name": "exempt"}, "spec": {"priorityLevelConfiguration": {"name": "exempt"},
            "matchingPrecedence": 1, "distinguisherMethod": {"type": "ByUser"}},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}});
        assert_eq!(
            cells(flow_schema(), schema),
            [
                json!("exempt"),
                json!("exempt"),
                json!(1),
                json!("ByUser"),
                json!("<unknown>"),
                json!("False")
            ]
        );
        let bare = json!({"metadata": {"name": "s"}, "spec": {"priorityLevelConfiguration": {"name": "global-default"}}});
        assert_eq!(
            cells(flow_schema(), bare)[2..],
            [json!(1000), json!("<none>"), json!("<unknown>"), json!("?")]
        );
        let limited = json!({"metadata": {"name": "workload-low"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 100, "limitResponse": {"type": "Queue", "queuing": {"queues": 128}}}}});
        assert_eq!(
            cells(priority_level_configuration(), limited)[1..6],
            [json!("Limited"), json!(100), json!(128), json!(8), json!(50)]
        );
        let exempt = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}});
        assert_eq!(
            cells(priority_level_configuration(), exempt)[1..6],
            [
                json!("Exempt"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let version = json!({"metadata": {"name": "batch.jobs"}, "status": {"commonEncodingVersion": "batch/v1",
            "storageVersions": [{"apiServerID": "a", "encodingVersion": "batch/v1"}, {"apiServerID": "b", "encodingVersion": "batch/v1"},
                                {"apiServerID": "c", "encodingVersion": "batch/v1"}, {"apiServerID": "d", "encodingVersion": "batch/v1"}]}});
        assert_eq!(
            cells(storage_version(), version)[1..3],
            [
                json!("batch/v1"),
                json!("a=batch/v1,b=batch/v1,c=batch/v1 + 1 more...")
            ]
        );
        assert_eq!(
            cells(storage_version(), json!({"metadata": {"name": "x"}}))[1..3],
            [json!("<unset>"), json!("<unset>")]
        );
    }
}
