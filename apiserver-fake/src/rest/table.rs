//! Server-side printing: `meta.k8s.io/v1` `Table` as `rest.NewDefaultTableConvertor` builds it (columns
//! `Name` and `Created At`), and `PartialObjectMetadata[List]`.
//!
//! Upstream prints built-in resources with per-type columns (kubectl's `STATUS`, `AGE`, ...); the fake
//! uses the default convertor for every built-in resource, which is what upstream uses for resources
//! without a printer. Custom resources are printed as the apiextensions table convertor prints them:
//! `Name` plus the CRD version's `additionalPrinterColumns`, or `Age` when it has none.

use serde_json::{Map, Value, json};

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
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although \
some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily \
intended for creation idempotence and configuration definition. Cannot be updated. More info: \
https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `ObjectMeta.creationTimestamp`'s swagger doc (`Created At` column).
const CREATED_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was \
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
        let per_version = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|versions| {
                versions
                    .iter()
                    .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
            })
            .and_then(|v| v.get("additionalPrinterColumns"));
        let columns = per_version.or_else(|| crd.pointer("/spec/additionalPrinterColumns"));
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

fn row(object: &Value, include: IncludeObject, columns: &[PrinterColumn]) -> Value {
    let name = object
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::String(String::new()));
    let mut cells = vec![name];
    if columns.is_empty() {
        cells.push(
            object
                .pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
        );
    } else {
        cells.extend(columns.iter().map(|c| c.cell(object)));
    }
    let mut row = Map::new();
    row.insert("cells".to_owned(), Value::Array(cells));
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
/// for chunked lists). `columns` empty: the default convertor's `Name`, `Created At`; otherwise `Name`
/// followed by those columns.
pub fn table(
    list_metadata: Value,
    objects: &[Value],
    include: IncludeObject,
    columns: &[PrinterColumn],
) -> Value {
    let mut definitions = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0}),
    ];
    if columns.is_empty() {
        definitions.push(
            json!({"name": "Created At", "type": "date", "format": "", "description": CREATED_DESCRIPTION, "priority": 0}),
        );
    } else {
        definitions.extend(columns.iter().map(PrinterColumn::definition));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": definitions,
        "rows": objects.iter().map(|o| row(o, include, columns)).collect::<Vec<_>>(),
    })
}

/// A one-row `Table` for a single object (its `resourceVersion` becomes the table's).
pub fn table_for_object(object: &Value, include: IncludeObject, columns: &[PrinterColumn]) -> Value {
    let mut metadata = Map::new();
    if let Some(rv) = object.pointer("/metadata/resourceVersion") {
        metadata.insert("resourceVersion".to_owned(), rv.clone());
    }
    table(
        Value::Object(metadata),
        std::slice::from_ref(object),
        include,
        columns,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_table_has_name_and_created_at_columns() {
        let job = json!({"kind": "Job", "metadata": {"name": "j", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        let t = table_for_object(&job, IncludeObject::default(), &[]);
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
            &[],
        );
        assert!(none["rows"][0].get("object").is_none());
        let full = table(json!({}), &[job], IncludeObject::parse(Some("Object")), &[]);
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
        let t = table(json!({}), &[widget], IncludeObject::None, &v1);
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
            &v1,
        );
        assert_eq!(missing["rows"][0]["cells"], json!(["x", null, null, null]));
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
