//! Server-side printing: `meta.k8s.io/v1` `Table` and `PartialObjectMetadata[List]`.
//!
//! A Table's columns and cells come from one of three convertors, as in kube-apiserver:
//! * built-in resources with a printer (`printers`) get upstream's per-type columns (kubectl's
//!   `STATUS`, `AGE`, ...), cells computed from the object as `pkg/printers/internalversion` computes
//!   them, wide (priority 1) cells always included as the server includes them, and row
//!   `conditions` where upstream sets them (a finished Pod's `Completed`);
//! * custom resources are printed as the apiextensions table convertor prints them: `Name` plus the
//!   CRD version's `additionalPrinterColumns`, or `Age` when it has none;
//! * everything else (built-in types without a printer, CustomResourceDefinitions up to 1.36) gets
//!   `rest.NewDefaultTableConvertor`'s `Name` and `Created At`.
//!
//! Ages are computed against a `now` the caller passes (`age`).

pub(crate) mod age;
mod apiserver;
mod cluster;
pub(crate) mod format;
pub(crate) mod printers;
mod services;
mod storage;
mod workloads;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::ResourceInfo;
use crate::api::catalog::KubeVersion;
use printers::{PrintContext, Printer};

/// `?includeObject=` of a Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// No object in rows.
    None,
    /// `PartialObjectMetadata` of each object (upstream's default).
    #[default]
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter (unknown values fall back to the default, `Metadata`).
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// `ObjectMeta.name`'s swagger doc, which upstream puts in the `Name` column description.
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although \
some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily \
intended for creation idempotence and configuration definition. Cannot be updated. More info: \
https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `ObjectMeta.creationTimestamp`'s swagger doc (`Created At` and `Age` columns).
pub const CREATED_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was \
created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this \
value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More \
info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// `PartialObjectMetadata` of `object`.
pub fn partial_object_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
    })
}

/// `PartialObjectMetadataList` of `items` with the list's `metadata`.
pub fn partial_object_metadata_list(list_metadata: Value, items: &[Value]) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "items": items.iter().map(partial_object_metadata).collect::<Vec<_>>(),
    })
}

/// A CRD's `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `date`, ...).
    pub column_type: String,
    /// OpenAPI format.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 = shown by default, >0 only with `-o wide`.
    pub priority: i64,
    /// Simple JSONPath (`.spec.replicas`, `.status.items[0].name`).
    pub json_path: String,
}

impl PrinterColumn {
    /// The column from a CRD's `additionalPrinterColumns` item (`None` without name or jsonPath).
    pub fn from_crd(column: &Value) -> Option<Self> {
        let text = |key: &str| {
            column
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (name, json_path) = (text("name"), text("jsonPath"));
        if name.is_empty() || json_path.is_empty() {
            return None;
        }
        Some(Self {
            name,
            column_type: text("type"),
            format: text("format"),
            description: text("description"),
            priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
            json_path,
        })
    }

    /// The `Age` column apiextensions uses when a CRD defines none.
    pub fn age() -> Self {
        Self {
            name: "Age".to_owned(),
            column_type: "date".to_owned(),
            format: String::new(),
            description: CREATED_DESCRIPTION.to_owned(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".to_owned(),
        }
    }

    /// The columns of a CRD's `version` (top-level columns of old CRDs as fallback, `Age` by default).
    pub fn for_crd_version(crd: &Value, version: &str) -> Vec<Self> {
        let columns = crate::api::catalog::crd_version_field(crd, version, "additionalPrinterColumns");
        let columns: Vec<Self> = columns
            .and_then(Value::as_array)
            .map(|c| c.iter().filter_map(Self::from_crd).collect())
            .unwrap_or_default();
        if columns.is_empty() {
            vec![Self::age()]
        } else {
            columns
        }
    }

    fn definition(&self) -> Value {
        json!({"name": self.name, "type": self.column_type, "format": self.format,
               "description": self.description, "priority": self.priority})
    }

    /// The cell of `object`: the value at the path (scalars as is, others as JSON text), `null` when
    /// absent or the path is not a simple one.
    fn cell(&self, object: &Value) -> Value {
        let mut current = object;
        for segment in self.json_path.trim_start_matches('.').split('.') {
            let (field, index) = match segment.split_once('[') {
                Some((field, rest)) => (
                    field,
                    rest.strip_suffix(']').and_then(|i| i.parse::<usize>().ok()),
                ),
                None => (segment, None),
            };
            if segment.contains('[') && index.is_none() {
                return Value::Null;
            }
            let Some(next) = (if field.is_empty() {
                Some(current)
            } else {
                current.get(field)
            }) else {
                return Value::Null;
            };
            current = match index {
                Some(i) => match next.get(i) {
                    Some(item) => item,
                    None => return Value::Null,
                },
                None => next,
            };
        }
        match current {
            Value::Object(_) | Value::Array(_) => Value::String(current.to_string()),
            other => other.clone(),
        }
    }
}

/// How a resource's objects become Table rows.
#[derive(Debug, Clone)]
pub enum TableConvertor {
    /// `rest.NewDefaultTableConvertor`: `Name`, `Created At`.
    Default,
    /// A custom resource: `Name`, then the CRD's columns.
    CustomResource(Vec<PrinterColumn>),
    /// A built-in printer, with the server version its columns were chosen for.
    Printer {
        /// The printer.
        printer: Printer,
        /// The server's Kubernetes version.
        version: KubeVersion,
    },
}

impl TableConvertor {
    /// The convertor of `resource` on a server of `version`: the CRD's columns for custom resources
    /// that carry them, the built-in printer of the group/resource if it has one, else the default.
    pub fn for_resource(resource: &ResourceInfo, version: KubeVersion) -> Self {
        if !resource.printer_columns.is_empty() {
            return Self::CustomResource(resource.printer_columns.clone());
        }
        if resource.custom {
            return Self::Default;
        }
        match printers::printer(&resource.group, &resource.resource, version) {
            Some(printer) => Self::Printer { printer, version },
            None => Self::Default,
        }
    }

    fn definitions(&self) -> Vec<Value> {
        let name = printers::Column::NAME.definition();
        match self {
            Self::Default => vec![
                name,
                json!({"name": "Created At", "type": "date", "format": "", "description": CREATED_DESCRIPTION, "priority": 0}),
            ],
            Self::CustomResource(columns) => std::iter::once(name)
                .chain(columns.iter().map(PrinterColumn::definition))
                .collect(),
            Self::Printer { printer, .. } => {
                printer.columns.iter().map(printers::Column::definition).collect()
            }
        }
    }

    /// The row's cells and conditions.
    fn cells(&self, object: &Value, now: OffsetDateTime) -> (Vec<Value>, Vec<Value>) {
        match self {
            Self::Default => {
                let name = object
                    .pointer("/metadata/name")
                    .cloned()
                    .unwrap_or(Value::String(String::new()));
                let created = object
                    .pointer("/metadata/creationTimestamp")
                    .cloned()
                    .unwrap_or(Value::Null);
                (vec![name, created], Vec::new())
            }
            Self::CustomResource(columns) => {
                let name = object
                    .pointer("/metadata/name")
                    .cloned()
                    .unwrap_or(Value::String(String::new()));
                let cells = std::iter::once(name)
                    .chain(columns.iter().map(|c| c.cell(object)))
                    .collect();
                (cells, Vec::new())
            }
            Self::Printer { printer, version } => {
                let ctx = PrintContext {
                    now,
                    version: *version,
                };
                let conditions = printer.conditions.map(|f| f(object)).unwrap_or_default();
                ((printer.cells)(object, &ctx), conditions)
            }
        }
    }
}

fn row(object: &Value, include: IncludeObject, convertor: &TableConvertor, now: OffsetDateTime) -> Value {
    let (cells, conditions) = convertor.cells(object, now);
    let mut row = Map::new();
    row.insert("cells".to_owned(), Value::Array(cells));
    if !conditions.is_empty() {
        row.insert("conditions".to_owned(), Value::Array(conditions));
    }
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row.insert("object".to_owned(), partial_object_metadata(object));
        }
        IncludeObject::Object => {
            row.insert("object".to_owned(), object.clone());
        }
    }
    Value::Object(row)
}

/// A `Table` of `objects` with `list_metadata` (`resourceVersion`, and `continue`/`remainingItemCount`
/// for chunked lists), its columns and rows from `convertor`, ages against `now`.
pub fn table(
    list_metadata: Value,
    objects: &[Value],
    include: IncludeObject,
    convertor: &TableConvertor,
    now: OffsetDateTime,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": convertor.definitions(),
        "rows": objects.iter().map(|o| row(o, include, convertor, now)).collect::<Vec<_>>(),
    })
}

/// A one-row `Table` for a single object (its `resourceVersion` becomes the table's).
pub fn table_for_object(
    object: &Value,
    include: IncludeObject,
    convertor: &TableConvertor,
    now: OffsetDateTime,
) -> Value {
    let mut metadata = Map::new();
    if let Some(rv) = object.pointer("/metadata/resourceVersion") {
        metadata.insert("resourceVersion".to_owned(), rv.clone());
    }
    table(
        Value::Object(metadata),
        std::slice::from_ref(object),
        include,
        convertor,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> OffsetDateTime {
        age::parse_timestamp("2024-01-01T00:05:00Z").unwrap()
    }

    #[test]
    fn default_table_has_name_and_created_at_columns() {
        let job = json!({"kind": "Job", "metadata": {"name": "j", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        let t = table_for_object(&job, IncludeObject::default(), &TableConvertor::Default, now());
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        assert_eq!(t["columnDefinitions"][1]["type"], "date");
        assert_eq!(t["rows"][0]["cells"], json!(["j", "2024-01-01T00:00:00Z"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "j");
        let none = table(
            json!({}),
            std::slice::from_ref(&job),
            IncludeObject::parse(Some("None")),
            &TableConvertor::Default,
            now(),
        );
        assert!(none["rows"][0].get("object").is_none());
        let full = table(
            json!({}),
            &[job],
            IncludeObject::parse(Some("Object")),
            &TableConvertor::Default,
            now(),
        );
        assert_eq!(full["rows"][0]["object"]["kind"], "Job");
    }

    #[test]
    fn custom_resource_tables_use_printer_columns_or_age() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "additionalPrinterColumns": [
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "First", "type": "string", "jsonPath": ".spec.items[0].name", "priority": 1},
                {"name": "Spec", "type": "string", "jsonPath": ".spec.nested"}]},
            {"name": "v2"}]}});
        let v1 = PrinterColumn::for_crd_version(&crd, "v1");
        assert_eq!(v1.len(), 3);
        let widget = json!({"metadata": {"name": "w"}, "spec": {"replicas": 3, "items": [{"name": "i"}], "nested": {"a": 1}}});
        let custom = TableConvertor::CustomResource(v1);
        let t = table(json!({}), &[widget], IncludeObject::None, &custom, now());
        let headers: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(headers, ["Name", "Replicas", "First", "Spec"]);
        assert_eq!(t["rows"][0]["cells"], json!(["w", 3, "i", "{\"a\":1}"]));
        assert_eq!(t["columnDefinitions"][2]["priority"], 1);
        let v2 = PrinterColumn::for_crd_version(&crd, "v2");
        assert_eq!(v2, vec![PrinterColumn::age()]);
        let missing = table(
            json!({}),
            &[json!({"metadata": {"name": "x"}})],
            IncludeObject::None,
            &custom,
            now(),
        );
        assert_eq!(missing["rows"][0]["cells"], json!(["x", null, null, null]));
    }

    fn resource(group: &str, resource: &str, custom: bool) -> ResourceInfo {
        ResourceInfo {
            group: group.to_owned(),
            version: "v1".to_owned(),
            resource: resource.to_owned(),
            kind: String::new(),
            namespaced: true,
            verbs: Vec::new(),
            subresources: Vec::new(),
            custom,
            printer_columns: Vec::new(),
            schema: None,
            storage_schema: None,
        }
    }

    #[test]
    fn built_in_resources_use_their_printer_and_others_the_default() {
        let v = |minor| KubeVersion { major: 1, minor };
        let jobs = TableConvertor::for_resource(&resource("batch", "jobs", false), v(36));
        let job = json!({"metadata": {"name": "j", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        let t = table_for_object(&job, IncludeObject::default(), &jobs, now());
        let headers: Vec<(&str, i64)> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_i64().unwrap()))
            .collect();
        assert_eq!(
            headers,
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
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(t["columnDefinitions"][0]["description"], NAME_DESCRIPTION);
        assert_eq!(t["columnDefinitions"][4]["description"], CREATED_DESCRIPTION);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["j", "Running", "0/1", "", "5m", "c", "busybox", "<none>"])
        );
        assert!(t["rows"][0].get("conditions").is_none());
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        let old_jobs = TableConvertor::for_resource(&resource("batch", "jobs", false), v(29));
        let t = table_for_object(&job, IncludeObject::None, &old_jobs, now());
        assert_eq!(t["columnDefinitions"][1]["name"], "Completions");
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["j", "0/1", "", "5m", "c", "busybox", "<none>"])
        );
        assert!(t["rows"][0].get("object").is_none());

        let pods = TableConvertor::for_resource(&resource("", "pods", false), v(36));
        let done = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Failed"}});
        let t = table(json!({}), &[done], IncludeObject::None, &pods, now());
        assert_eq!(
            t["rows"][0]["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}])
        );

        for default in [
            resource("apiextensions.k8s.io", "customresourcedefinitions", false),
            resource("batch", "jobs", true),
            resource("", "bindings", false),
        ] {
            assert!(matches!(
                TableConvertor::for_resource(&default, v(36)),
                TableConvertor::Default
            ));
        }
        let mut widgets = resource("example.com", "widgets", true);
        widgets.printer_columns = vec![PrinterColumn::age()];
        assert!(matches!(
            TableConvertor::for_resource(&widgets, v(36)),
            TableConvertor::CustomResource(_)
        ));
    }

    #[test]
    fn partial_metadata_list_keeps_only_metadata() {
        let list = partial_object_metadata_list(
            json!({"resourceVersion": "3"}),
            &[json!({"metadata": {"name": "a"}, "spec": {}})],
        );
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(
            list["items"][0],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}})
        );
    }
}
