//! The static worst-case cost of a CRD rule, as upstream estimates it when a CustomResourceDefinition
//! is written: cel-go's `checker/cost.go` (`Cost`, `coster`) over the rule's syntax tree, with the sizes
//! of the data it reads taken from the schema as apiextensions-apiserver's `sizeEstimator` and
//! `model.SchemaDeclType` take them (`maxItems`, `maxProperties`, `maxLength` × 4, and where those are
//! missing the most that fits in a 3 MiB request: [`DeclType::from_schema`]), and the Kubernetes
//! library's own estimates (`k8s.io/apiserver/pkg/cel/library/cost.go`) for the functions it adds.
//!
//! The model, as cel-go's: a literal costs 0, an identifier 1, a field selection 1 on a map or an
//! object, a function 1 plus its arguments unless it is one of the sized ones (string comparisons and
//! equality: a tenth of the shorter operand; `contains`, `matches`, `startsWith`, `in` over a list, `+`
//! of strings …), `&&`/`||` the sum of their sides, a comprehension its range and result plus the
//! number of elements times the cost of one step, so nested comprehensions multiply.
//!
//! cel-go picks functions by the types its checker inferred; the `cel` crate has no checker, so types
//! are inferred here as far as the schema and the functions' result types tell. Where a type stays
//! unknown (a value of a function this walk does not type), the cheapest overload is taken where
//! cel-go would take the most expensive of all that match: unknown values never make a rule refused.

use std::collections::BTreeMap;
use std::rc::Rc;

use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use serde_json::Value;

/// `celconfig.MaxRequestSizeBytes`: the most a request may carry, which bounds unbounded lists,
/// maps and strings.
const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;
/// cel-go's `common.StringTraversalCostFactor`.
const STRING_TRAVERSAL: f64 = 0.1;
/// cel-go's `common.RegexStringLengthCostFactor`.
const REGEX_STRING_LENGTH: f64 = 0.25;
/// cel-go's `ListCreateBaseCost`, `MapCreateBaseCost`, `StructCreateBaseCost`.
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;
/// apiserver `cel.MaxDurationSizeJSON`, `MaxDatetimeSizeJSON`, `MinDurationSizeJSON`, `JSONDateSize`,
/// `MinDatetimeSizeJSON`, `MinStringSize`, `MinBoolSize`, `MinNumberSize`.
const MAX_DURATION_SIZE_JSON: i64 = 32;
const MAX_DATETIME_SIZE_JSON: i64 = 32;
const MIN_DURATION_SIZE_JSON: i64 = 3;
const JSON_DATE_SIZE: i64 = 12;
const MIN_DATETIME_SIZE_JSON: i64 = 21;
const MIN_STRING_SIZE: i64 = 2;
const MIN_BOOL_SIZE: i64 = 4;
const MIN_NUMBER_SIZE: i64 = 1;

/// What a CEL value is, as far as the estimate needs to know.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Null,
    /// `x-kubernetes-int-or-string`: cel-go's `dyn`.
    Dyn,
    /// A type this walk could not infer (cel-go's checker would know it).
    Unknown,
    List(Rc<DeclType>),
    /// A map with string keys (`additionalProperties`), of these values.
    Map(Rc<DeclType>),
    Object(BTreeMap<String, Rc<DeclType>>),
}

/// apiserver's `cel.DeclType` as far as the estimate reads it: the kind, `MaxElements` (the most
/// characters, bytes, items or entries a value may have) and `MinSerializedSize` (the fewest bytes
/// its JSON takes, which bounds how many fit in a request).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeclType {
    pub(crate) kind: Kind,
    pub(crate) max_elements: i64,
    pub(crate) min_serialized_size: i64,
}

fn simple(kind: Kind, min_serialized_size: i64) -> Rc<DeclType> {
    Rc::new(DeclType {
        kind,
        max_elements: 0,
        min_serialized_size,
    })
}

fn unknown() -> Rc<DeclType> {
    simple(Kind::Unknown, 0)
}

fn int_bound(schema: &Value, field: &str) -> Option<i64> {
    schema.get(field).and_then(Value::as_i64).map(|v| v.max(0))
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

/// `estimateMaxStringLengthPerRequest`.
fn max_string_length(format: Option<&str>) -> i64 {
    match format {
        Some("duration") => MAX_DURATION_SIZE_JSON,
        Some("date") => JSON_DATE_SIZE,
        Some("date-time") => MAX_DATETIME_SIZE_JSON,
        _ => MAX_REQUEST_SIZE_BYTES - 2,
    }
}

/// apiserver `cel.Escape`: a property name as CEL names it, or `None` when it cannot be named.
fn escape(name: &str) -> Option<String> {
    if super::RESERVED_WORDS.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok {
        return None;
    }
    let mut escaped = String::new();
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            escaped.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => escaped.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(escaped)
}

impl DeclType {
    /// `model.SchemaDeclType`: the type of the values `schema` admits, or `None` where CEL cannot see
    /// them (no type, an array without items). `resource_root` adds what every resource has
    /// (`WithTypeAndObjectMeta`: `apiVersion`, `kind`, `metadata.name`, `metadata.generateName`).
    pub(crate) fn from_schema(schema: &Value, resource_root: bool) -> Option<Rc<DeclType>> {
        if flag(schema, "x-kubernetes-int-or-string") {
            return Some(Rc::new(DeclType {
                kind: Kind::Dyn,
                max_elements: MAX_REQUEST_SIZE_BYTES - 2,
                min_serialized_size: 1,
            }));
        }
        match schema.get("type").and_then(Value::as_str)? {
            "array" => {
                let items = schema.get("items").filter(|i| i.is_object())?;
                let item = Self::from_schema(items, flag(items, "x-kubernetes-embedded-resource"))?;
                let max = int_bound(schema, "maxItems")
                    .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (item.min_serialized_size + 1));
                Some(Rc::new(DeclType {
                    kind: Kind::List(item),
                    max_elements: max,
                    min_serialized_size: 2,
                }))
            }
            "object" => Self::object(schema, resource_root),
            "string" => Some(Self::string(schema)),
            "boolean" => Some(simple(Kind::Bool, MIN_BOOL_SIZE)),
            "number" => Some(simple(Kind::Double, MIN_NUMBER_SIZE)),
            "integer" => Some(simple(Kind::Int, MIN_NUMBER_SIZE)),
            _ => None,
        }
    }

    fn string(schema: &Value) -> Rc<DeclType> {
        let format = schema.get("format").and_then(Value::as_str);
        let max_length = int_bound(schema, "maxLength");
        let (kind, min, max) = match format {
            Some("byte") => (
                Kind::Bytes,
                MIN_STRING_SIZE,
                max_length.unwrap_or(max_string_length(format)),
            ),
            Some("duration") => (Kind::Duration, MIN_DURATION_SIZE_JSON, max_string_length(format)),
            Some("date") => (Kind::Timestamp, JSON_DATE_SIZE, max_string_length(format)),
            Some("date-time") => (Kind::Timestamp, MIN_DATETIME_SIZE_JSON, max_string_length(format)),
            // maxLength counts characters, of up to 4 bytes each.
            _ => (
                Kind::String,
                MIN_STRING_SIZE,
                max_length.map_or(max_string_length(format), |l| l.saturating_mul(4)),
            ),
        };
        Rc::new(DeclType {
            kind,
            max_elements: max,
            min_serialized_size: min,
        })
    }

    fn object(schema: &Value, resource_root: bool) -> Option<Rc<DeclType>> {
        if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            let values = Self::from_schema(additional, flag(additional, "x-kubernetes-embedded-resource"))?;
            let max = int_bound(schema, "maxProperties")
                .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (values.min_serialized_size + 6));
            return Some(Rc::new(DeclType {
                kind: Kind::Map(values),
                max_elements: max,
                min_serialized_size: 2,
            }));
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = BTreeMap::new();
        let mut min_serialized_size = 2;
        let empty = serde_json::Map::new();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (name, property) in properties {
            let Some(field) = Self::from_schema(property, flag(property, "x-kubernetes-embedded-resource"))
            else {
                continue;
            };
            if required.contains(&name.as_str()) && property.get("default").is_none() {
                min_serialized_size += name.len() as i64 + field.min_serialized_size + 4;
            }
            if let Some(escaped) = escape(name) {
                fields.insert(escaped, field);
            }
        }
        if resource_root {
            with_type_and_object_meta(&mut fields);
        }
        Some(Rc::new(DeclType {
            kind: Kind::Object(fields),
            max_elements: 0,
            min_serialized_size,
        }))
    }

    fn is_scalar(&self) -> bool {
        matches!(
            self.kind,
            Kind::Bool | Kind::Double | Kind::Duration | Kind::Int | Kind::Timestamp | Kind::Uint
        )
    }

    fn is_string_like(&self) -> bool {
        matches!(self.kind, Kind::String | Kind::Bytes)
    }

    fn element(&self) -> Option<Rc<DeclType>> {
        match &self.kind {
            Kind::List(item) | Kind::Map(item) => Some(item.clone()),
            _ => None,
        }
    }
}

/// `WithTypeAndObjectMeta`: unless the schema declares them all as strings, `apiVersion` and `kind`
/// are unbounded strings and `metadata` an object of `name` and `generateName`.
fn with_type_and_object_meta(fields: &mut BTreeMap<String, Rc<DeclType>>) {
    let is_string = |t: Option<&Rc<DeclType>>| t.is_some_and(|t| t.kind == Kind::String);
    let declared = is_string(fields.get("kind"))
        && is_string(fields.get("apiVersion"))
        && fields.get("metadata").is_some_and(|m| match &m.kind {
            Kind::Object(meta) => is_string(meta.get("name")) && is_string(meta.get("generateName")),
            _ => false,
        });
    if declared {
        return;
    }
    let string = || {
        Rc::new(DeclType {
            kind: Kind::String,
            max_elements: MAX_REQUEST_SIZE_BYTES - 2,
            min_serialized_size: MIN_STRING_SIZE,
        })
    };
    fields.insert("kind".to_owned(), string());
    fields.insert("apiVersion".to_owned(), string());
    let meta = BTreeMap::from([
        ("name".to_owned(), string()),
        ("generateName".to_owned(), string()),
    ]);
    fields.insert(
        "metadata".to_owned(),
        Rc::new(DeclType {
            kind: Kind::Object(meta),
            max_elements: 0,
            min_serialized_size: 2,
        }),
    );
}

/// `model.MaxCardinality`: how often data of this minimum size can repeat in one request, the number
/// of times a rule under unbounded lists or maps may run.
pub(crate) fn max_cardinality(min_serialized_size: i64) -> u64 {
    u64::try_from(MAX_REQUEST_SIZE_BYTES / (min_serialized_size + 1)).unwrap_or(0)
}

/// cel-go's `SizeEstimate` (only what the cost needs).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Size {
    min: u64,
    max: u64,
}

const UNKNOWN_SIZE: Size = Size {
    min: 0,
    max: u64::MAX,
};

impl Size {
    fn fixed(n: u64) -> Size {
        Size { min: n, max: n }
    }

    fn add(self, other: Size) -> Size {
        Size {
            min: self.min.saturating_add(other.min),
            max: self.max.saturating_add(other.max),
        }
    }

    fn multiply(self, other: Size) -> Size {
        Size {
            min: self.min.saturating_mul(other.min),
            max: self.max.saturating_mul(other.max),
        }
    }

    fn union(self, other: Size) -> Size {
        Size {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }

    /// `MultiplyByCostFactor` of the maximum (the estimate is only ever compared by its maximum).
    fn cost(self, factor: f64) -> u64 {
        by_factor(self.max, factor)
    }
}

/// cel-go's `multiplyByCostFactor`: rounded up, saturating.
fn by_factor(x: u64, factor: f64) -> u64 {
    let value = (x as f64) * factor;
    if value >= 18_446_744_073_709_551_616.0 {
        return u64::MAX;
    }
    value.ceil() as u64
}

/// cel-go's `entrySizeEstimate`: the sizes of the keys (indices) and values of a list or map built
/// in the expression.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    list: bool,
    key: Size,
    value: Size,
}

impl Entry {
    fn union(a: Option<Entry>, b: Option<Entry>) -> Option<Entry> {
        let (a, b) = (a?, b?);
        Some(Entry {
            list: a.list,
            key: a.key.union(b.key),
            value: a.value.union(b.value),
        })
    }
}

/// What the walk knows of an expression once costed.
#[derive(Debug, Clone)]
struct Node {
    cost: u64,
    ty: Rc<DeclType>,
    /// The field path from a variable (`self`, `spec`, `@items` …), cel-go's `exprPaths`.
    path: Option<Vec<String>>,
    /// cel-go's `computeSize`.
    size: Option<Size>,
    entry: Option<Entry>,
}

impl Node {
    fn size_or_unknown(&self) -> Size {
        self.size.unwrap_or(UNKNOWN_SIZE)
    }
}

/// A comprehension's or bind's variable in scope.
#[derive(Debug, Clone)]
struct Local {
    path: Option<Vec<String>>,
    size: Option<Size>,
    entry: Option<Entry>,
    ty: Rc<DeclType>,
}

/// The estimate of one expression over the type of `self` (and `oldSelf`).
struct Coster<'a> {
    root: &'a Rc<DeclType>,
    locals: BTreeMap<String, Vec<Local>>,
}

/// The worst-case cost of `expr` with `self` and `oldSelf` of type `root`: cel-go's `CostEstimate.Max`.
pub(crate) fn cost(expr: &cel::IdedExpr, root: &Rc<DeclType>) -> u64 {
    let mut coster = Coster {
        root,
        locals: BTreeMap::new(),
    };
    coster.node(expr).cost
}

impl Coster<'_> {
    /// The apiextensions `sizeEstimator`: the `MaxElements` at `path` below the root (its first
    /// element, the variable, is skipped whatever it is, as upstream does).
    fn estimate_size(&self, path: Option<&[String]>) -> Option<Size> {
        let path = path.filter(|p| !p.is_empty())?;
        let mut current = self.root.clone();
        for name in &path[1..] {
            current = match (name.as_str(), &current.kind) {
                ("@items" | "@values", Kind::List(item) | Kind::Map(item)) => item.clone(),
                ("@keys", Kind::Map(_)) => simple(Kind::String, MIN_STRING_SIZE),
                (field, Kind::Object(fields)) => fields.get(field)?.clone(),
                _ => return None,
            };
        }
        Some(Size {
            min: 0,
            max: u64::try_from(current.max_elements).unwrap_or(0),
        })
    }

    /// cel-go's `computeSize` for an expression that has no computed or literal size.
    fn size_of(&self, path: Option<&[String]>, ty: &DeclType, local: Option<Size>) -> Option<Size> {
        self.estimate_size(path)
            .or_else(|| ty.is_scalar().then_some(Size::fixed(1)))
            .or(local)
    }

    fn node(&mut self, expr: &cel::IdedExpr) -> Node {
        match &expr.expr {
            Expr::Literal(literal) => literal_node(literal),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.node(&select.operand);
                if select.test {
                    // Kubernetes keeps `has()` free (`checker.PresenceTestHasCost(false)`).
                    return Node {
                        cost: operand.cost,
                        ty: simple(Kind::Bool, MIN_BOOL_SIZE),
                        path: None,
                        size: Some(Size::fixed(1)),
                        entry: None,
                    };
                }
                let (ty, selectable) = match &operand.ty.kind {
                    Kind::Object(fields) => {
                        (fields.get(&select.field).cloned().unwrap_or_else(unknown), true)
                    }
                    Kind::Map(values) => (values.clone(), true),
                    // cel-go's checker knows what this is; selecting makes it a map or an object.
                    Kind::Unknown => (unknown(), true),
                    _ => (unknown(), false),
                };
                let mut path = operand.path.clone().unwrap_or_default();
                path.push(select.field.clone());
                let size = self.size_of(Some(&path), &ty, None);
                Node {
                    cost: operand.cost.saturating_add(u64::from(selectable)),
                    ty,
                    path: Some(path),
                    size,
                    entry: None,
                }
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => self.list(list),
            Expr::Map(map) => self.map(map),
            Expr::Struct(s) => {
                let mut cost = STRUCT_CREATE;
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        cost = cost.saturating_add(self.node(&field.value).cost);
                    }
                }
                opaque(cost, unknown())
            }
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            Expr::Unspecified => opaque(0, unknown()),
        }
    }

    /// A list literal: its elements, cel-go's `ListCreateBaseCost`, and their sizes as entries.
    fn list(&mut self, list: &cel::common::ast::ListExpr) -> Node {
        let mut cost = LIST_CREATE;
        let mut value = if list.elements.is_empty() {
            Size::fixed(0)
        } else {
            Size {
                min: u64::MAX,
                max: 0,
            }
        };
        let mut item_ty = unknown();
        for element in &list.elements {
            let node = self.node(element);
            cost = cost.saturating_add(node.cost);
            value = value.union(node.size_or_unknown());
            if item_ty.kind == Kind::Unknown {
                item_ty = node.ty.clone();
            }
        }
        Node {
            cost,
            ty: Rc::new(DeclType {
                kind: Kind::List(item_ty),
                max_elements: 0,
                min_serialized_size: 2,
            }),
            path: None,
            size: Some(Size::fixed(list.elements.len() as u64)),
            entry: Some(Entry {
                list: true,
                key: Size::fixed(1),
                value,
            }),
        }
    }

    /// A map literal: its entries, cel-go's `MapCreateBaseCost`, and their sizes as entries.
    fn map(&mut self, map: &cel::common::ast::MapExpr) -> Node {
        let mut cost = MAP_CREATE;
        let start = if map.entries.is_empty() {
            Size::fixed(0)
        } else {
            Size {
                min: u64::MAX,
                max: 0,
            }
        };
        let (mut key, mut value) = (start, start);
        let mut value_ty = unknown();
        for entry in &map.entries {
            if let EntryExpr::MapEntry(entry) = &entry.expr {
                let k = self.node(&entry.key);
                let v = self.node(&entry.value);
                cost = cost.saturating_add(k.cost).saturating_add(v.cost);
                key = key.union(k.size_or_unknown());
                value = value.union(v.size_or_unknown());
                value_ty = v.ty;
            }
        }
        Node {
            cost,
            ty: Rc::new(DeclType {
                kind: Kind::Map(value_ty),
                max_elements: 0,
                min_serialized_size: 2,
            }),
            path: None,
            size: Some(Size::fixed(map.entries.len() as u64)),
            entry: Some(Entry {
                list: false,
                key,
                value,
            }),
        }
    }

    fn ident(&self, name: &str) -> Node {
        if let Some(local) = self.locals.get(name).and_then(|stack| stack.last()) {
            let size = local
                .path
                .as_deref()
                .and_then(|p| self.estimate_size(Some(p)))
                .or_else(|| local.ty.is_scalar().then_some(Size::fixed(1)))
                .or(local.size);
            return Node {
                cost: 1,
                ty: local.ty.clone(),
                path: local.path.clone(),
                size,
                entry: local.entry,
            };
        }
        let ty = if name == "self" || name == "oldSelf" {
            self.root.clone()
        } else {
            unknown()
        };
        let path = vec![name.to_owned()];
        let size = self.size_of(Some(&path), &ty, None);
        Node {
            cost: 1,
            ty,
            path: Some(path),
            size,
            entry: None,
        }
    }

    fn push(&mut self, name: &str, local: Local) {
        self.locals.entry(name.to_owned()).or_default().push(local);
    }

    fn pop(&mut self, name: &str) {
        if let Some(stack) = self.locals.get_mut(name) {
            stack.pop();
        }
    }

    fn comprehension(&mut self, c: &cel::common::ast::ComprehensionExpr) -> Node {
        let range = self.node(&c.iter_range);
        let init = self.node(&c.accu_init);
        let mut cost = range.cost.saturating_add(init.cost);
        let is_bind = matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
            && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !**b)
            && c.accu_var != "@result"
            && c.accu_var != "__result__";
        self.push(
            &c.accu_var,
            Local {
                path: init.path.clone(),
                size: init.size,
                entry: init.entry,
                ty: init.ty.clone(),
            },
        );
        if is_bind {
            let result = self.node(&c.result);
            self.pop(&c.accu_var);
            return Node {
                cost: cost.saturating_add(result.cost),
                ..result
            };
        }
        let list = range
            .entry
            .map_or(matches!(range.ty.kind, Kind::List(_)), |e| e.list);
        let (subpath, size, ty) = if list {
            let ty = range.ty.element().unwrap_or_else(unknown);
            ("@items", range.entry.map(|e| e.value), ty)
        } else {
            let ty = match range.ty.kind {
                Kind::Map(_) => simple(Kind::String, MIN_STRING_SIZE),
                _ => unknown(),
            };
            ("@keys", range.entry.map(|e| e.key), ty)
        };
        let mut path = range.path.clone().unwrap_or_default();
        path.push(subpath.to_owned());
        let iter = Local {
            path: Some(path),
            size,
            entry: None,
            ty,
        };
        self.push(&c.iter_var, iter.clone());
        if let Some(second) = &c.iter_var2 {
            self.push(second, iter);
        }
        let loop_cost = self.node(&c.loop_cond).cost;
        let step = self.node(&c.loop_step);
        self.pop(&c.iter_var);
        if let Some(second) = &c.iter_var2 {
            self.pop(second);
        }
        let result = self.node(&c.result);
        self.pop(&c.accu_var);
        cost = cost.saturating_add(result.cost);
        let count = range.size_or_unknown();
        cost = cost.saturating_add(count.max.saturating_mul(step.cost.saturating_add(loop_cost)));
        let (size, entry) = match &c.accu_init.expr {
            Expr::Literal(_) => (init.size, None),
            Expr::List(_) | Expr::Map(_) => (Some(count), step.entry),
            _ => (None, None),
        };
        let ty = if matches!(step.ty.kind, Kind::Unknown) {
            init.ty
        } else {
            step.ty
        };
        Node {
            cost,
            ty,
            path: None,
            size,
            entry,
        }
    }

    fn call(&mut self, call: &cel::common::ast::CallExpr) -> Node {
        let args: Vec<Node> = call.args.iter().map(|a| self.node(a)).collect();
        if call.func_name == "dyn" && call.target.is_none() && args.len() == 1 {
            let arg = &args[0];
            return Node {
                cost: arg.cost.saturating_add(1),
                ..arg.clone()
            };
        }
        let target = call.target.as_deref().map(|t| self.node(t));
        let arg_costs = args.iter().fold(0u64, |sum, a| sum.saturating_add(a.cost));
        let target_cost = target.as_ref().map_or(0, |t| t.cost);
        let mut out = self.function(&call.func_name, target.as_ref(), &args);
        out.cost = out.cost.saturating_add(target_cost);
        if !out.sums_args_itself {
            out.cost = out.cost.saturating_add(arg_costs);
        }
        // A call result's size: what the function says, else what its path or type tell.
        let size = out
            .size
            .or_else(|| self.size_of(out.path.as_deref(), &out.ty, None));
        Node {
            cost: out.cost,
            ty: out.ty,
            path: out.path,
            size,
            entry: out.entry,
        }
    }

    fn function(&self, name: &str, target: Option<&Node>, args: &[Node]) -> Called {
        let arg = |i: usize| args.get(i);
        let first_ty = arg(0).map(|a| a.ty.clone()).unwrap_or_else(unknown);
        let bool_ty = || simple(Kind::Bool, MIN_BOOL_SIZE);
        match (name, target, args.len()) {
            ("_&&_" | "_||_", None, 2) => {
                Called::new(args[0].cost.saturating_add(args[1].cost), bool_ty()).summed()
            }
            ("_?_:_", None, 3) => {
                let mut out = Called::new(
                    args[0].cost.saturating_add(args[1].cost.max(args[2].cost)),
                    if args[1].ty.kind == Kind::Unknown {
                        args[2].ty.clone()
                    } else {
                        args[1].ty.clone()
                    },
                )
                .summed();
                out.size = Some(args[1].size_or_unknown().union(args[2].size_or_unknown()));
                out.entry = Entry::union(args[1].entry, args[2].entry);
                out
            }
            ("_==_" | "_!=_", None, 2) => Called::new(compare(&args[0], &args[1]), bool_ty()),
            ("_<_" | "_<=_" | "_>_" | "_>=_", None, 2) => {
                let cost = if first_ty.is_string_like() || args[1].ty.is_string_like() {
                    compare(&args[0], &args[1])
                } else {
                    1
                };
                Called::new(cost, bool_ty())
            }
            ("_+_", None, 2) => add(&args[0], &args[1]),
            ("@in", None, 2) => {
                let cost = match args[1].ty.kind {
                    Kind::List(_) => args[1].size_or_unknown().cost(1.0),
                    _ => 1,
                };
                Called::new(cost, bool_ty())
            }
            ("_[_]", None, 2) => {
                let container = &args[0];
                let (subpath, entry_size) = match (&container.ty.kind, container.entry) {
                    (Kind::Map(_), _) => ("@values", container.entry.map(|e| e.value)),
                    (_, Some(entry)) if !entry.list => ("@values", Some(entry.value)),
                    _ => ("@items", container.entry.map(|e| e.value)),
                };
                let mut path = container.path.clone().unwrap_or_default();
                path.push(subpath.to_owned());
                let mut out = Called::new(1, container.ty.element().unwrap_or_else(unknown));
                out.size = entry_size;
                out.path = Some(path);
                out
            }
            ("matches", Some(t), 1) => {
                let string = t.size_or_unknown().add(Size::fixed(1)).cost(STRING_TRAVERSAL);
                let regex = args[0].size_or_unknown().cost(REGEX_STRING_LENGTH);
                Called::new(string.saturating_mul(regex), bool_ty())
            }
            ("contains", Some(t), 1) if !matches!(t.ty.kind, Kind::List(_) | Kind::Map(_)) => {
                let string = t.size_or_unknown().cost(STRING_TRAVERSAL);
                let substring = args[0].size_or_unknown().cost(STRING_TRAVERSAL);
                Called::new(string.saturating_mul(substring), bool_ty())
            }
            ("startsWith" | "endsWith", Some(_), 1) => {
                Called::new(args[0].size_or_unknown().cost(STRING_TRAVERSAL), bool_ty())
            }
            _ => self.library_function(name, target, args),
        }
    }

    /// The Kubernetes library's estimates (`library.CostEstimator.EstimateCallCost`), cel-go's string
    /// conversions and `format`, and every other function at cel-go's flat cost of 1.
    fn library_function(&self, name: &str, target: Option<&Node>, args: &[Node]) -> Called {
        let string_ty = || simple(Kind::String, MIN_STRING_SIZE);
        let int_ty = || simple(Kind::Int, MIN_NUMBER_SIZE);
        let string_list = || {
            Rc::new(DeclType {
                kind: Kind::List(string_ty()),
                max_elements: 0,
                min_serialized_size: 2,
            })
        };
        match (name, target) {
            ("isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf", Some(t)) => {
                let result = match name {
                    "isSorted" => simple(Kind::Bool, MIN_BOOL_SIZE),
                    "indexOf" | "lastIndexOf" => int_ty(),
                    _ => t.ty.element().unwrap_or_else(unknown),
                };
                let cost = match &t.ty.kind {
                    Kind::List(element) => {
                        let mut per_element = 1u64;
                        if element.is_string_like() {
                            let size = self.element_size(t);
                            per_element = per_element.saturating_add(size.cost(STRING_TRAVERSAL));
                        }
                        t.size_or_unknown().max.saturating_mul(per_element)
                    }
                    _ => t.size_or_unknown().cost(STRING_TRAVERSAL),
                };
                Called::new(cost, result)
            }
            ("url", None) if args.len() == 1 => {
                Called::new(args[0].size_or_unknown().cost(STRING_TRAVERSAL), unknown())
            }
            ("lowerAscii" | "upperAscii" | "substring" | "trim", Some(t)) => {
                let size = t.size_or_unknown();
                Called::new(size.cost(STRING_TRAVERSAL), string_ty()).sized(size)
            }
            ("replace", Some(t)) if args.len() >= 2 => {
                let size = replaced_size(
                    t.size_or_unknown(),
                    args[0].size_or_unknown(),
                    args[1].size_or_unknown(),
                );
                Called::new(t.size_or_unknown().cost(2.0 * STRING_TRAVERSAL), string_ty()).sized(size)
            }
            ("split", Some(t)) => {
                // The worst case: a part for every character (a literal limit is not read).
                let size = t.size_or_unknown();
                Called::new(size.cost(2.0 * STRING_TRAVERSAL), string_list()).sized(Size {
                    min: 0,
                    max: size.max,
                })
            }
            ("join", Some(t)) => {
                let list = t.size_or_unknown();
                let mut size = list.multiply(self.element_size(t));
                if let Some(separator) = args.first() {
                    let separators = Size {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    size = size.add(separator.size_or_unknown().multiply(separators));
                }
                Called::new(size.cost(STRING_TRAVERSAL), string_ty()).sized(size)
            }
            ("find" | "findAll", Some(t)) if !args.is_empty() => {
                let size = t.size_or_unknown();
                let string = size.add(Size::fixed(1)).cost(STRING_TRAVERSAL);
                let regex = args[0].size_or_unknown().cost(REGEX_STRING_LENGTH);
                let ty = if name == "find" {
                    string_ty()
                } else {
                    string_list()
                };
                Called::new(string.saturating_mul(regex), ty).sized(Size {
                    min: 0,
                    max: size.max,
                })
            }
            ("format", Some(t)) if args.len() == 1 => {
                let size = t.size_or_unknown();
                Called::new(size.cost(STRING_TRAVERSAL), string_ty())
                    .sized(size.add(args[0].size_or_unknown()))
            }
            ("bytes", None) if args.len() == 1 && args[0].ty.kind == Kind::String => {
                let size = args[0].size_or_unknown();
                Called::new(size.cost(STRING_TRAVERSAL), simple(Kind::Bytes, MIN_STRING_SIZE)).sized(Size {
                    min: size.min,
                    max: size.max.saturating_mul(4),
                })
            }
            ("string", None) if args.len() == 1 && args[0].ty.kind == Kind::Bytes => {
                let size = args[0].size_or_unknown();
                Called::new(size.cost(STRING_TRAVERSAL), string_ty()).sized(Size {
                    min: size.min / 4,
                    max: size.max,
                })
            }
            _ => Called::new(1, result_type(name, target, args)),
        }
    }

    /// The size of a list's elements (`listElementNode`): looked up by the list's path, else unknown.
    fn element_size(&self, list: &Node) -> Size {
        let path = list.path.as_ref().map(|p| {
            let mut p = p.clone();
            p.push("@items".to_owned());
            p
        });
        self.estimate_size(path.as_deref()).unwrap_or(UNKNOWN_SIZE)
    }
}

/// The size of `replace`'s result (`library.CostEstimator`, `case "replace"`).
fn replaced_size(size: Size, to_replace: Size, replace_with: Size) -> Size {
    let (count_max, retained_max) = if to_replace.min == 0 {
        (size.max.saturating_add(u64::from(size.max < u64::MAX)), size.max)
    } else if replace_with.max <= to_replace.min {
        (0, size.max)
    } else {
        ((size.max as f64 / to_replace.min as f64).ceil() as u64, 0)
    };
    let (count_min, retained_min) = if to_replace.max == 0 {
        (size.min.saturating_add(u64::from(size.min < u64::MAX)), size.min)
    } else if to_replace.max <= replace_with.min {
        (0, size.min)
    } else {
        ((size.min as f64 / to_replace.max as f64).ceil() as u64, 0)
    };
    Size {
        min: count_min,
        max: count_max,
    }
    .multiply(replace_with)
    .add(Size {
        min: retained_min,
        max: retained_max,
    })
}

/// The types of the results of functions whose cost is flat, as far as later steps need them.
fn result_type(name: &str, target: Option<&Node>, args: &[Node]) -> Rc<DeclType> {
    let first = target.or(args.first());
    match name {
        "size" | "int" | "indexOf" | "lastIndexOf" => simple(Kind::Int, MIN_NUMBER_SIZE),
        "uint" => simple(Kind::Uint, MIN_NUMBER_SIZE),
        "double" => simple(Kind::Double, MIN_NUMBER_SIZE),
        "string" | "charAt" | "quote" => simple(Kind::String, MIN_STRING_SIZE),
        "bytes" => simple(Kind::Bytes, MIN_STRING_SIZE),
        "duration" => simple(Kind::Duration, MIN_DURATION_SIZE_JSON),
        "timestamp" => simple(Kind::Timestamp, MIN_DATETIME_SIZE_JSON),
        "bool"
        | "!_"
        | "@not_strictly_false"
        | "has"
        | "isSorted"
        | "hasValue"
        | "isInteger"
        | "isGreaterThan"
        | "isLessThan"
        | "isQuantity"
        | "isURL"
        | "isIP"
        | "isCIDR" => simple(Kind::Bool, MIN_BOOL_SIZE),
        "-_" | "_-_" | "_*_" | "_/_" | "_%_" => first.map_or_else(unknown, |n| n.ty.clone()),
        _ => unknown(),
    }
}

/// cel-go's cost of `==`, `!=` and the string comparisons: a tenth of the shorter operand's size.
fn compare(lhs: &Node, rhs: &Node) -> u64 {
    let smallest = lhs.size_or_unknown().max.min(rhs.size_or_unknown().max);
    by_factor(smallest, STRING_TRAVERSAL)
}

/// `+` of strings (a tenth of the result's size), lists (1, sizes added) and anything else (1).
fn add(lhs: &Node, rhs: &Node) -> Called {
    let string = lhs.ty.is_string_like() || rhs.ty.is_string_like();
    let list = matches!(lhs.ty.kind, Kind::List(_)) || matches!(rhs.ty.kind, Kind::List(_));
    if !string && !list {
        let ty = if lhs.ty.kind == Kind::Unknown {
            rhs.ty.clone()
        } else {
            lhs.ty.clone()
        };
        return Called::new(1, ty);
    }
    let size = lhs.size_or_unknown().add(rhs.size_or_unknown());
    let mut out = if string {
        let ty = if lhs.ty.is_string_like() { &lhs.ty } else { &rhs.ty };
        Called::new(size.cost(STRING_TRAVERSAL), ty.clone())
    } else {
        let pick = |n: &Node| match &n.ty.kind {
            Kind::List(item) if item.kind != Kind::Unknown => Some(n.ty.clone()),
            _ => None,
        };
        let ty = pick(lhs).or_else(|| pick(rhs)).unwrap_or_else(|| lhs.ty.clone());
        Called::new(1, ty)
    };
    out.size = Some(size);
    out.entry = Entry::union(lhs.entry, rhs.entry);
    out
}

/// A function's own cost, result type and sizes, before its arguments are added.
struct Called {
    cost: u64,
    ty: Rc<DeclType>,
    size: Option<Size>,
    path: Option<Vec<String>>,
    entry: Option<Entry>,
    /// `&&`, `||` and `?:` account for their arguments themselves.
    sums_args_itself: bool,
}

impl Called {
    fn new(cost: u64, ty: Rc<DeclType>) -> Called {
        Called {
            cost,
            ty,
            size: None,
            path: None,
            entry: None,
            sums_args_itself: false,
        }
    }

    fn summed(mut self) -> Called {
        self.sums_args_itself = true;
        self
    }

    fn sized(mut self, size: Size) -> Called {
        self.size = Some(size);
        self
    }
}

fn opaque(cost: u64, ty: Rc<DeclType>) -> Node {
    Node {
        cost,
        ty,
        path: None,
        size: None,
        entry: None,
    }
}

fn literal_node(literal: &LiteralValue) -> Node {
    let (kind, min, size) = match literal {
        LiteralValue::String(s) => (Kind::String, MIN_STRING_SIZE, s.inner().chars().count() as u64),
        LiteralValue::Bytes(b) => (Kind::Bytes, MIN_STRING_SIZE, b.inner().len() as u64),
        LiteralValue::Boolean(_) => (Kind::Bool, MIN_BOOL_SIZE, 1),
        LiteralValue::Double(_) => (Kind::Double, MIN_NUMBER_SIZE, 1),
        LiteralValue::Int(_) => (Kind::Int, MIN_NUMBER_SIZE, 1),
        LiteralValue::UInt(_) => (Kind::Uint, MIN_NUMBER_SIZE, 1),
        LiteralValue::Null => (Kind::Null, 4, 1),
    };
    Node {
        cost: 0,
        ty: simple(kind, min),
        path: None,
        size: Some(Size::fixed(size)),
        entry: None,
    }
}

impl super::Expression {
    /// Upstream's static worst-case cost of this expression with `self` (and `oldSelf`) of type
    /// `root` ([`cost`]); the walk recurses as deep as the expression nests, so it runs on the
    /// compiler's stack.
    pub(crate) fn static_cost(&self, root: &Rc<DeclType>) -> u64 {
        stacker::grow(super::COMPILE_STACK, || cost(self.program.expression(), root))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The estimated cost of `rule` on a node of `schema` (not a resource root).
    fn estimated(rule: &str, schema: Value) -> u64 {
        let root = DeclType::from_schema(&schema, false).expect("a CEL type");
        crate::cel::compile(rule, &["self", "oldSelf"])
            .expect("compiles")
            .static_cost(&root)
    }

    fn strings(max_items: Option<u64>, max_length: Option<u64>) -> Value {
        let mut items = json!({"type": "string"});
        if let Some(max) = max_length {
            items["maxLength"] = json!(max);
        }
        let mut list = json!({"type": "array", "items": items});
        if let Some(max) = max_items {
            list["maxItems"] = json!(max);
        }
        list
    }

    #[test]
    fn unbounded_lists_and_strings_are_bounded_by_the_request_size() {
        let list = DeclType::from_schema(&strings(None, None), false).expect("type");
        assert_eq!(list.max_elements, 1_048_575, "(3 MiB - 2) / (2 + 1) strings");
        let Kind::List(item) = &list.kind else {
            panic!("a list")
        };
        assert_eq!(item.max_elements, 3_145_726, "3 MiB less the quotes");
        let ints = DeclType::from_schema(&json!({"type": "array", "items": {"type": "integer"}}), false)
            .expect("type");
        assert_eq!(ints.max_elements, 1_572_863);
        let map = DeclType::from_schema(
            &json!({"type": "object", "additionalProperties": {"type": "boolean"}}),
            false,
        )
        .expect("type");
        assert_eq!(
            map.max_elements,
            3_145_726 / 10,
            "key, quotes, colon, comma and `true`"
        );
        let bounded = DeclType::from_schema(&strings(Some(7), Some(10)), false).expect("type");
        assert_eq!(bounded.max_elements, 7);
        assert_eq!(
            bounded.element().expect("items").max_elements,
            40,
            "maxLength × 4 bytes"
        );
        assert_eq!(max_cardinality(2), 1_048_576);
    }

    /// Worked by hand from cel-go's model: an identifier costs 1, `x != y` a tenth of the shorter
    /// string plus its operands, `all` its range, its result and per element its step (`@result &&
    /// …`, 1 + the predicate) and its condition (`@not_strictly_false(@result)`, 2).
    #[test]
    fn nested_comprehensions_multiply_as_cel_go_estimates_them() {
        let rule = "self.all(x, self.all(y, x != y))";
        // x != y: ceil(256 × 0.1) + 2 = 28; inner: 2 + 100 × (1 + 28 + 2); outer: 2 + 100 × (3 + inner).
        assert_eq!(estimated(rule, strings(Some(100), Some(64))), 310_502);
        // x != y: ceil(3145726 × 0.1) + 2 = 314575, over 1048575 elements, twice.
        assert_eq!(estimated(rule, strings(None, None)), 345_881_509_130_194_127);
        // One level: 2 + 1048575 × (1 + 314575 + 2).
        assert_eq!(
            estimated("self.all(x, x != 'a')", strings(None, None)),
            2 + 1_048_575 * (1 + (1 + 1) + 2)
        );
    }

    #[test]
    fn string_functions_cost_by_the_sizes_of_their_operands() {
        // matches: (1 + ceil((3145726 + 1) × 0.1) × ceil(12 × 0.25)), per element 1 + that + 2.
        assert_eq!(
            estimated("self.all(x, x.matches('^[a-z0-9]+$'))", strings(Some(1000), None)),
            943_723_002
        );
        let spec = json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 10},
            "replicas": {"type": "integer"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 5},
        }});
        assert_eq!(
            estimated("self.replicas == 3", spec.clone()),
            2,
            "a field and a literal"
        );
        assert_eq!(estimated("size(self.name) <= 3", spec.clone()), 4);
        assert_eq!(
            estimated("self.name.startsWith('ab')", spec.clone()),
            3,
            "the name (2) and a tenth of the prefix"
        );
        assert_eq!(
            estimated("self.name.contains('abc')", spec.clone()),
            2 + 4,
            "ceil(40 × 0.1) × ceil(3 × 0.1)"
        );
        assert_eq!(
            estimated("has(self.name) && self.replicas > 1", spec.clone()),
            1 + 3,
            "has() costs its operand only"
        );
        assert_eq!(
            estimated("self.labels.all(k, self.labels[k] != '')", spec.clone()),
            // Range (2) and result (1); per key: `&&` (1), the index (1 + 2 + 1), the condition (2).
            3 + 5 * (1 + 4 + 2),
            "'' has no characters: comparing with it is free"
        );
        assert_eq!(
            estimated("'x' + self.name == 'y'", spec),
            // `+`: ceil((1 + 40) × 0.1) = 5 plus the name (2); `==`: ceil(1 × 0.1) = 1.
            8
        );
    }

    #[test]
    fn every_kind_of_expression_is_estimated_without_overflowing() {
        let schema = json!({"type": "object", "properties": {
            "names": {"type": "array", "items": {"type": "string"}},
            "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
            "when": {"type": "string", "format": "date-time"},
            "port": {"x-kubernetes-int-or-string": true},
        }});
        for rule in [
            "self.names.map(n, n.upperAscii()).filter(n, n.size() > 2).all(n, n in self.names)",
            "self.names.exists_one(n, n.split('-').join('.') == n.replace('-', '.', 2))",
            "{'a': 1, 'b': [1, 2]}.all(k, k in self.limits) && [self.names, ['x']].size() > 0",
            "self.limits.exists(k, self.limits[k] > 0 ? k.startsWith('a') : k.endsWith('z'))",
            "self.names.all(a, self.names.all(b, self.names.all(c, a + b + c != '')))",
            "self.names.sum() == '' || self.names.isSorted() || self.names.indexOf('x') >= 0",
            "self.names[0].find('[a-z]+') != '' && self.names[0].findAll('a').size() == 0",
            "dyn(self.port) == 1 && string(bytes(self.names[0])) == '' && -self.limits['a'] < 0",
        ] {
            let cost = estimated(rule, schema.clone());
            assert!(cost > 0, "{rule}");
        }
        assert_eq!(
            estimated(
                "self.names.all(a, self.names.all(b, self.names.all(c, a + b + c != '')))",
                schema
            ),
            u64::MAX,
            "saturates"
        );
    }

    #[test]
    fn message_expressions_with_strings_of_unknown_size_are_unbounded() {
        let spec = json!({"type": "object", "properties": {"attempts": {"type": "integer"}}});
        assert!(
            estimated("'invalid attempts: ' + string(self.attempts)", spec) > 1_000_000_000,
            "string(int) has no size estimate (kubernetes/kubernetes#124234)"
        );
    }
}
