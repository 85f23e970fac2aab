//! The registry of built-in printers: which group/resource is printed with which columns and row
//! function, as kube-apiserver's `pkg/printers/internalversion` `AddHandlers` registers them (and
//! kube-aggregator's printer for APIServices). Resources not listed keep the default convertor
//! (`Name`, `Created At`), as upstream does for types without a printer: Roles, ClusterRoles,
//! LimitRanges and, up to 1.36, CustomResourceDefinitions among them.
//!
//! Column descriptions: upstream takes most of them from the API's swagger docs
//! (`ObjectMeta{}.SwaggerDoc()["name"]`, `JobStatus{}.SwaggerDoc()["succeeded"]`, ...). Literal
//! descriptions in printers.go are reproduced as written; for swagger-derived ones the fake carries
//! the swagger text where it was at hand and otherwise a short accurate paraphrase of the field's doc
//! (kubectl does not print descriptions; `kubectl explain`-like tooling should not rely on them).

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::{CREATED_DESCRIPTION, NAME_DESCRIPTION, apiserver, cluster, services, storage, workloads};
use crate::api::catalog::KubeVersion;

/// One column of a built-in printer (`metav1.TableColumnDefinition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Header (kubectl upper-cases it).
    pub name: &'static str,
    /// OpenAPI type (`string`, `integer`, `boolean`, `date`).
    pub column_type: &'static str,
    /// OpenAPI format (`name` for the object's name column).
    pub format: &'static str,
    /// What the column holds.
    pub description: &'static str,
    /// 0: shown by default; 1: only with `-o wide`.
    pub priority: i64,
}

impl Column {
    /// A `string` column shown by default.
    pub const fn string(name: &'static str, description: &'static str) -> Self {
        Self::typed(name, "string", description)
    }

    /// A column of `column_type` shown by default.
    pub const fn typed(name: &'static str, column_type: &'static str, description: &'static str) -> Self {
        Self {
            name,
            column_type,
            format: "",
            description,
            priority: 0,
        }
    }

    /// The same column, shown only with `-o wide` (priority 1).
    pub const fn wide(self) -> Self {
        Self { priority: 1, ..self }
    }

    /// The `Name` column (`ObjectMeta.name`, format `name`).
    pub const NAME: Column = Column {
        name: "Name",
        column_type: "string",
        format: "name",
        description: NAME_DESCRIPTION,
        priority: 0,
    };

    /// The `Age` column (a `string` computed by `translateTimestampSince`).
    pub const AGE: Column = Column::string("Age", CREATED_DESCRIPTION);

    /// `Containers` (wide): `layoutContainerCells`' names.
    pub const CONTAINERS: Column =
        Column::string("Containers", "Names of each container in the template.").wide();

    /// `Images` (wide): `layoutContainerCells`' images.
    pub const IMAGES: Column =
        Column::string("Images", "Images referenced by each container in the template.").wide();

    /// The column's `TableColumnDefinition` JSON.
    pub fn definition(&self) -> Value {
        json!({"name": self.name, "type": self.column_type, "format": self.format,
               "description": self.description, "priority": self.priority})
    }
}

/// What a row function may depend on besides the object.
#[derive(Debug, Clone, Copy)]
pub struct PrintContext {
    /// The time ages are computed against.
    pub now: OffsetDateTime,
    /// The server's Kubernetes version (some printers changed between minors).
    pub version: KubeVersion,
}

impl PrintContext {
    /// Whether the server is at least 1.`minor`.
    pub fn at_least(&self, minor: u32) -> bool {
        self.version >= KubeVersion { major: 1, minor }
    }

    /// `translateTimestampSince(obj.CreationTimestamp)`.
    pub fn age(&self, object: &Value) -> Value {
        Value::String(super::age::since(super::format::created(object), self.now))
    }

    /// `translateTimestampSince` of any timestamp.
    pub fn since(&self, timestamp: Option<&str>) -> String {
        super::age::since(timestamp, self.now)
    }
}

/// The cells of one object's row, in column order.
pub(crate) type CellsFn = fn(&Value, &PrintContext) -> Vec<Value>;

/// The row conditions of one object (`metav1.TableRowCondition`s; only Pods have them).
pub(crate) type ConditionsFn = fn(&Value) -> Vec<Value>;

/// A built-in printer: its columns (for the server's version) and how a row is computed.
#[derive(Debug, Clone)]
pub struct Printer {
    /// The columns, `Name` included where upstream has it (Events put it last).
    pub columns: Vec<Column>,
    /// The row's cells; as many as `columns`.
    pub cells: CellsFn,
    /// The row's conditions, if the kind has any.
    pub conditions: Option<ConditionsFn>,
}

impl Printer {
    /// A printer without row conditions.
    pub fn new(columns: Vec<Column>, cells: CellsFn) -> Self {
        Self {
            columns,
            cells,
            conditions: None,
        }
    }
}

/// The printer of `group`/`resource` on a server of `version`; `None` for the default convertor.
///
/// Where printers.go changed between 1.28 and 1.36 the printer follows the server's version: Job
/// `Status` from 1.30 (kubernetes#123226) and its `SuccessCriteriaMet` value from 1.34
/// (kubernetes#132832); PV/PVC `VolumeAttributesClass` from 1.29 (KEP-3751); PriorityClass
/// `PreemptionPolicy` from 1.32 (kubernetes#126529); ResourceQuota `Age` last from 1.33
/// (kubernetes#129419); the default IngressClass marked `(default)` from 1.36 (not checked against
/// upstream's source, which was not at hand for 1.36).
pub(crate) fn printer(group: &str, resource: &str, version: KubeVersion) -> Option<Printer> {
    let minor = |m: u32| version >= KubeVersion { major: 1, minor: m };
    Some(match (group, resource) {
        ("", "pods") => workloads::pod(),
        ("", "podtemplates") => workloads::pod_template(),
        ("", "replicationcontrollers") => workloads::replication_controller(),
        ("apps", "replicasets") => workloads::replica_set(),
        ("apps", "deployments") => workloads::deployment(),
        ("apps", "statefulsets") => workloads::stateful_set(),
        ("apps", "daemonsets") => workloads::daemon_set(),
        ("apps", "controllerrevisions") => workloads::controller_revision(),
        ("batch", "jobs") => workloads::job(minor(30)),
        ("batch", "cronjobs") => workloads::cron_job(),
        ("autoscaling", "horizontalpodautoscalers") => workloads::horizontal_pod_autoscaler(),
        ("policy", "poddisruptionbudgets") => workloads::pod_disruption_budget(),
        ("", "services") => services::service(),
        ("", "endpoints") => services::endpoints(),
        ("discovery.k8s.io", "endpointslices") => services::endpoint_slice(),
        ("networking.k8s.io", "ingresses") => services::ingress(),
        ("networking.k8s.io", "ingressclasses") => services::ingress_class(minor(36)),
        ("networking.k8s.io", "networkpolicies") => services::network_policy(),
        ("networking.k8s.io", "servicecidrs") => services::service_cidr(),
        ("", "namespaces") => cluster::namespace(),
        ("", "nodes") => cluster::node(),
        ("", "events") => cluster::event(cluster::core_event_cells),
        ("events.k8s.io", "events") => cluster::event(cluster::events_v1_event_cells),
        ("", "configmaps") => cluster::config_map(),
        ("", "secrets") => cluster::secret(),
        ("", "serviceaccounts") => cluster::service_account(),
        ("", "resourcequotas") => cluster::resource_quota(minor(33)),
        ("coordination.k8s.io", "leases") => cluster::lease(),
        ("", "componentstatuses") => cluster::component_status(),
        ("coordination.k8s.io", "leasecandidates") => cluster::lease_candidate(),
        ("scheduling.k8s.io", "priorityclasses") => cluster::priority_class(minor(32)),
        ("node.k8s.io", "runtimeclasses") => cluster::runtime_class(),
        ("rbac.authorization.k8s.io", "rolebindings") => cluster::role_binding(),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => cluster::cluster_role_binding(),
        ("certificates.k8s.io", "certificatesigningrequests") => cluster::certificate_signing_request(),
        ("certificates.k8s.io", "clustertrustbundles") => cluster::cluster_trust_bundle(),
        // DeviceClass exists from 1.31 (resource.k8s.io v1alpha3), printed with its age.
        ("resource.k8s.io", "deviceclasses") if minor(31) => cluster::device_class(),
        ("", "persistentvolumeclaims") => storage::persistent_volume_claim(minor(29)),
        ("", "persistentvolumes") => storage::persistent_volume(minor(29)),
        ("storage.k8s.io", "storageclasses") => storage::storage_class(),
        ("storage.k8s.io", "csidrivers") => storage::csi_driver(),
        ("storage.k8s.io", "csinodes") => storage::csi_node(),
        ("storage.k8s.io", "csistoragecapacities") => storage::csi_storage_capacity(),
        ("storage.k8s.io", "volumeattachments") => storage::volume_attachment(),
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations",
        ) => apiserver::webhook_configuration(),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => apiserver::admission_policy(false),
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies") => apiserver::admission_policy(true),
        (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings" | "mutatingadmissionpolicybindings",
        ) => apiserver::admission_policy_binding(),
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => apiserver::flow_schema(),
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            apiserver::priority_level_configuration()
        }
        ("internal.apiserver.k8s.io", "storageversions") => apiserver::storage_version(),
        ("apiregistration.k8s.io", "apiservices") => apiserver::api_service(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every registered resource, for checks that must hold for all printers.
    pub(crate) const REGISTERED: &[(&str, &str)] = &[
        ("", "pods"),
        ("", "podtemplates"),
        ("", "replicationcontrollers"),
        ("apps", "replicasets"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("autoscaling", "horizontalpodautoscalers"),
        ("policy", "poddisruptionbudgets"),
        ("", "services"),
        ("", "endpoints"),
        ("discovery.k8s.io", "endpointslices"),
        ("networking.k8s.io", "ingresses"),
        ("networking.k8s.io", "ingressclasses"),
        ("networking.k8s.io", "networkpolicies"),
        ("", "namespaces"),
        ("", "nodes"),
        ("", "events"),
        ("events.k8s.io", "events"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("", "resourcequotas"),
        ("coordination.k8s.io", "leases"),
        ("scheduling.k8s.io", "priorityclasses"),
        ("storage.k8s.io", "storageclasses"),
        ("node.k8s.io", "runtimeclasses"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("apiregistration.k8s.io", "apiservices"),
        ("apps", "controllerrevisions"),
        ("networking.k8s.io", "servicecidrs"),
        ("coordination.k8s.io", "leasecandidates"),
        ("certificates.k8s.io", "certificatesigningrequests"),
        ("certificates.k8s.io", "clustertrustbundles"),
        ("storage.k8s.io", "csidrivers"),
        ("storage.k8s.io", "csinodes"),
        ("storage.k8s.io", "csistoragecapacities"),
        ("storage.k8s.io", "volumeattachments"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
        (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings",
        ),
        ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"),
        ("flowcontrol.apiserver.k8s.io", "flowschemas"),
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"),
        ("internal.apiserver.k8s.io", "storageversions"),
    ];

    #[test]
    fn every_printer_has_one_cell_per_column_on_every_version() {
        let bare = json!({"metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        for version in KubeVersion::all() {
            let ctx = PrintContext {
                now: OffsetDateTime::UNIX_EPOCH,
                version,
            };
            for (group, resource) in REGISTERED {
                let printer = printer(group, resource, version).unwrap();
                let cells = (printer.cells)(&bare, &ctx);
                assert_eq!(
                    cells.len(),
                    printer.columns.len(),
                    "{group}/{resource} on {version}"
                );
                assert_eq!(
                    printer.columns.iter().filter(|c| c.name == "Name").count(),
                    1,
                    "{group}/{resource}"
                );
            }
        }
    }

    #[test]
    fn unknown_resources_and_crds_keep_the_default_convertor() {
        for (group, resource) in [
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("stable.example.com", "widgets"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "clusterroles"),
            ("", "limitranges"),
        ] {
            assert!(printer(group, resource, KubeVersion::NEWEST).is_none());
        }
    }
}
