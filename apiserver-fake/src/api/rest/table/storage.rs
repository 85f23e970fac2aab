//! Printers of storage kinds: volumes, claims and classes, and the CSI objects (printers.go's
//! `printPersistentVolumeClaim`, `printPersistentVolume`, `printStorageClass`, `printCSIDriver`,
//! `printCSINode`, `printCSIStorageCapacity`, `printVolumeAttachment`).

use serde_json::Value;

use super::format::{access_modes, annotation, at, boolean, deleting, list, name, non_empty, quantity, text};
use super::printers::{Column, Printer};

/// `storageutil.GetPersistentVolume(Claim)Class`: the beta annotation, else `spec.storageClassName`.
fn storage_class_of(object: &Value) -> &str {
    annotation(object, "volume.beta.kubernetes.io/storage-class")
        .unwrap_or_else(|| text(object, &["spec", "storageClassName"]))
}

/// `status.phase`, `Terminating` while being deleted (`Pending` before any controller set one).
fn volume_phase(object: &Value) -> &str {
    if deleting(object) {
        "Terminating"
    } else {
        non_empty(object, &["status", "phase"]).unwrap_or("Pending")
    }
}

const VOLUME_MODE: &str = "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.";

/// PersistentVolumeClaim columns; `attributes_class`: the `VolumeAttributesClass` column (1.29 and
/// later).
pub(super) fn persistent_volume_claim(attributes_class: bool) -> Printer {
    let mut columns = vec![
        Column::NAME,
        Column::string(
            "Status",
            "phase represents the current phase of PersistentVolumeClaim.",
        ),
        Column::string(
            "Volume",
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        Column::string(
            "Capacity",
            "capacity represents the actual resources of the underlying volume.",
        ),
        Column::string(
            "Access Modes",
            "accessModes contains the actual access modes the volume backing the PVC has.",
        ),
        Column::string("StorageClass", "StorageClass of the pvc"),
    ];
    if attributes_class {
        columns.push(Column::string(
            "VolumeAttributesClass",
            "VolumeAttributesClass of the pvc",
        ));
    }
    columns.extend([Column::AGE, Column::string("VolumeMode", VOLUME_MODE).wide()]);
    Printer::new(columns, |claim, ctx| {
        let volume = text(claim, &["spec", "volumeName"]);
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            (
                quantity(at(claim, &["status", "capacity", "storage"])),
                access_modes(list(claim, &["status", "accessModes"])),
            )
        };
        let mut cells = vec![
            name(claim).into(),
            volume_phase(claim).into(),
            volume.into(),
            capacity.into(),
            modes.into(),
            storage_class_of(claim).into(),
        ];
        if ctx.at_least(29) {
            cells.push(
                non_empty(claim, &["spec", "volumeAttributesClassName"])
                    .unwrap_or("<unset>")
                    .into(),
            );
        }
        cells.extend([
            ctx.age(claim),
            // Defaulted to Filesystem upstream.
            non_empty(claim, &["spec", "volumeMode"])
                .unwrap_or("Filesystem")
                .into(),
        ]);
        cells
    })
}

/// PersistentVolume columns; `attributes_class`: the `VolumeAttributesClass` column (1.29 and
/// later).
pub(super) fn persistent_volume(attributes_class: bool) -> Printer {
    let mut columns = vec![
        Column::NAME,
        Column::string(
            "Capacity",
            "capacity is the description of the persistent volume's resources and capacity.",
        ),
        Column::string(
            "Access Modes",
            "accessModes contains all ways the volume can be mounted.",
        ),
        Column::string(
            "Reclaim Policy",
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
        ),
        Column::string(
            "Status",
            "phase indicates if a volume is available, bound to a claim, or released by a claim.",
        ),
        Column::string(
            "Claim",
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
        ),
        Column::string("StorageClass", "StorageClass of the pv"),
    ];
    if attributes_class {
        columns.push(Column::string(
            "VolumeAttributesClass",
            "VolumeAttributesClass of the pv",
        ));
    }
    columns.extend([
        Column::string(
            "Reason",
            "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        ),
        Column::AGE,
        Column::string(
            "VolumeMode",
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
        )
        .wide(),
    ]);
    Printer::new(columns, |volume, ctx| {
        let claim = match at(volume, &["spec", "claimRef"]).filter(|c| c.is_object()) {
            Some(reference) => format!(
                "{}/{}",
                text(reference, &["namespace"]),
                text(reference, &["name"])
            ),
            None => String::new(),
        };
        let mut cells = vec![
            name(volume).into(),
            quantity(at(volume, &["spec", "capacity", "storage"])).into(),
            access_modes(list(volume, &["spec", "accessModes"])).into(),
            // Defaulted to Retain upstream.
            non_empty(volume, &["spec", "persistentVolumeReclaimPolicy"])
                .unwrap_or("Retain")
                .into(),
            volume_phase(volume).into(),
            claim.into(),
            storage_class_of(volume).into(),
        ];
        if ctx.at_least(29) {
            cells.push(
                non_empty(volume, &["spec", "volumeAttributesClassName"])
                    .unwrap_or("<unset>")
                    .into(),
            );
        }
        cells.extend([
            text(volume, &["status", "reason"]).into(),
            ctx.age(volume),
            non_empty(volume, &["spec", "volumeMode"])
                .unwrap_or("Filesystem")
                .into(),
        ]);
        cells
    })
}

/// StorageClass columns.
pub(super) fn storage_class() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Provisioner",
                "provisioner indicates the type of the provisioner.",
            ),
            Column::string(
                "ReclaimPolicy",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
            ),
            Column::string(
                "VolumeBindingMode",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound. When unset, VolumeBindingImmediate is used.",
            ),
            Column::string(
                "AllowVolumeExpansion",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
            ),
            Column::AGE,
        ],
        |class, ctx| {
            let is_default = |key: &str| annotation(class, key) == Some("true");
            let mut class_name = name(class).to_owned();
            if is_default("storageclass.kubernetes.io/is-default-class")
                || is_default("storageclass.beta.kubernetes.io/is-default-class")
            {
                class_name.push_str(" (default)");
            }
            vec![
                class_name.into(),
                text(class, &["provisioner"]).into(),
                non_empty(class, &["reclaimPolicy"]).unwrap_or("Delete").into(),
                non_empty(class, &["volumeBindingMode"])
                    .unwrap_or("Immediate")
                    .into(),
                Value::from(boolean(class, &["allowVolumeExpansion"]).unwrap_or(false)),
                ctx.age(class),
            ]
        },
    )
}

/// CSIDriver columns.
pub(super) fn csi_driver() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::typed(
                "AttachRequired",
                "boolean",
                "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting.",
            ),
            Column::typed(
                "PodInfoOnMount",
                "boolean",
                "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true.",
            ),
            Column::typed(
                "StorageCapacity",
                "boolean",
                "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.",
            ),
            Column::string(
                "TokenRequests",
                "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication.",
            ),
            Column::typed(
                "RequiresRepublish",
                "boolean",
                "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume.",
            ),
            Column::string(
                "Modes",
                "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\".",
            ),
            Column::AGE,
        ],
        |driver, ctx| {
            let flag = |field: &str, default: bool| {
                Value::from(boolean(driver, &["spec", field]).unwrap_or(default))
            };
            let token_requests = match at(driver, &["spec", "tokenRequests"]).and_then(Value::as_array) {
                Some(requests) => requests
                    .iter()
                    .map(|r| text(r, &["audience"]))
                    .collect::<Vec<_>>()
                    .join(","),
                None => "<unset>".to_owned(),
            };
            let modes: Vec<&str> = list(driver, &["spec", "volumeLifecycleModes"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            vec![
                name(driver).into(),
                flag("attachRequired", true),
                flag("podInfoOnMount", false),
                flag("storageCapacity", false),
                token_requests.into(),
                flag("requiresRepublish", false),
                if modes.is_empty() {
                    "<none>".to_owned()
                } else {
                    modes.join(",")
                }
                .into(),
                ctx.age(driver),
            ]
        },
    )
}

/// CSINode columns.
pub(super) fn csi_node() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::typed(
                "Drivers",
                "integer",
                "Drivers indicates the number of CSI drivers registered on the node",
            ),
            Column::AGE,
        ],
        |node, ctx| {
            vec![
                name(node).into(),
                Value::from(i64::try_from(list(node, &["spec", "drivers"]).len()).unwrap_or(i64::MAX)),
                ctx.age(node),
            ]
        },
    )
}

/// CSIStorageCapacity columns (no age, as upstream).
pub(super) fn csi_storage_capacity() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "StorageClassName",
                "storageClassName represents the name of the StorageClass that the reported capacity applies to.",
            ),
            Column::string(
                "Capacity",
                "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.",
            ),
        ],
        |capacity, _| {
            let amount = match capacity.get("capacity").filter(|c| !c.is_null()) {
                Some(q) => quantity(Some(q)),
                None => "<unset>".to_owned(),
            };
            vec![
                name(capacity).into(),
                text(capacity, &["storageClassName"]).into(),
                amount.into(),
            ]
        },
    )
}

/// VolumeAttachment columns (upstream gives `Attacher` the `name` format too).
pub(super) fn volume_attachment() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column {
                format: "name",
                ..Column::string(
                    "Attacher",
                    "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().",
                )
            },
            Column::string(
                "PV",
                "persistentVolumeName represents the name of the persistent volume to attach.",
            ),
            Column::string(
                "Node",
                "nodeName represents the node that the volume should be attached to.",
            ),
            Column::typed(
                "Attached",
                "boolean",
                "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.",
            ),
            Column::AGE,
        ],
        |attachment, ctx| {
            vec![
                name(attachment).into(),
                text(attachment, &["spec", "attacher"]).into(),
                text(attachment, &["spec", "source", "persistentVolumeName"]).into(),
                text(attachment, &["spec", "nodeName"]).into(),
                Value::from(boolean(attachment, &["status", "attached"]).unwrap_or(false)),
                ctx.age(attachment),
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
    fn volumes_and_claims_follow_the_version() {
        let claim = json!({"metadata": {"name": "data"}, "spec": {"volumeName": "pv1", "storageClassName": "fast"},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]}});
        assert_eq!(
            cells(persistent_volume_claim(true), claim.clone(), 36),
            json!([
                "data",
                "Bound",
                "pv1",
                "10Gi",
                "RWO",
                "fast",
                "<unset>",
                "<unknown>",
                "Filesystem"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        assert_eq!(cells(persistent_volume_claim(false), claim, 28).len(), 8);
        let pending = json!({"metadata": {"name": "p", "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            cells(persistent_volume_claim(true), pending, 36)[1..6],
            [json!("Pending"), json!(""), json!(""), json!(""), json!("old")]
        );
        let volume = json!({"metadata": {"name": "pv1", "deletionTimestamp": "2024-06-01T12:00:00Z"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadOnlyMany"],
                     "persistentVolumeReclaimPolicy": "Delete", "claimRef": {"namespace": "default", "name": "data"},
                     "storageClassName": "fast", "volumeAttributesClassName": "gold", "volumeMode": "Block"},
            "status": {"phase": "Bound"}});
        assert_eq!(
            cells(persistent_volume(true), volume, 36),
            json!([
                "pv1",
                "10Gi",
                "ROX,RWX",
                "Delete",
                "Terminating",
                "default/data",
                "fast",
                "gold",
                "",
                "<unknown>",
                "Block"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
    }

    #[test]
    fn storage_classes_and_csi_objects() {
        let storage = json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"});
        assert_eq!(
            cells(storage_class(), storage, 36)[..5],
            [
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!(false)
            ]
        );
        let driver = json!({"metadata": {"name": "csi.example.com"},
            "spec": {"tokenRequests": [{"audience": "vault"}, {"audience": "gcp"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        assert_eq!(
            cells(csi_driver(), driver, 36)[1..7],
            [
                json!(true),
                json!(false),
                json!(false),
                json!("vault,gcp"),
                json!(false),
                json!("Persistent,Ephemeral")
            ]
        );
        let bare = json!({"metadata": {"name": "d"}});
        assert_eq!(cells(csi_driver(), bare.clone(), 36)[4], "<unset>");
        assert_eq!(cells(csi_driver(), bare.clone(), 36)[6], "<none>");
        assert_eq!(cells(csi_storage_capacity(), bare, 36)[2], "<unset>");
        let node = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(cells(csi_node(), node, 36)[1], 2);
        let attachment = json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": true}});
        assert_eq!(
            cells(volume_attachment(), attachment, 36)[..5],
            [
                json!("va"),
                json!("csi.example.com"),
                json!("pv1"),
                json!("n1"),
                json!(true)
            ]
        );
        assert_eq!(volume_attachment().columns[1].format, "name");
    }
}
