//! Object construction for mutating admission policies (upstream `k8s.io/apiserver/pkg/cel/mutation`):
//! `Object{spec: Object.spec{replicas: 3}}` builds an apply configuration, `JSONPatch{op: 'add', path:
//! '/x', value: 1}` one JSON Patch operation, and `jsonpatch.escapeKey(k)` escapes a key for a path.
//!
//! Upstream's `Object` types are dynamic: any name `Object.<field>.<field>…` is a type, whose fields are
//! all `dyn`. The `cel` crate constructs only the struct types registered with its environment, by exact
//! name; so [`super::compile`] registers, for each expression that constructs one, the `Object…` names
//! that expression uses ([`environment_for`]). Both kinds of struct evaluate to plain CEL maps, which is
//! what upstream turns them into (`ConvertToNative` to `map[string]any`) before merging or patching.
//! What upstream checks with the types (the expression's result is an `Object` / a list of `JSONPatch`,
//! a nested `Object.<path>` matches the field it is in) is checked on the parsed expression instead
//! ([`type_name_mismatches`]); a plain map where upstream's checker wants an `Object` is accepted.

use std::collections::{BTreeMap, HashMap};

use cel::common::ast::{EntryExpr, Expr};
use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError, StructType, Value};

/// The name of the root apply-configuration type.
pub(crate) const OBJECT: &str = "Object";

/// The name of the JSON Patch operation type.
pub(crate) const JSON_PATCH: &str = "JSONPatch";

/// An `Object…` type: constructs a map of its fields.
struct ObjectType {
    ty: Type,
}

impl StructType for ObjectType {
    fn get_type(&self) -> &Type {
        &self.ty
    }

    fn new_value<'b, 'v>(
        &self,
        fields: BTreeMap<String, CowVal<'b, 'v>>,
    ) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut map = HashMap::with_capacity(fields.len());
        for (name, value) in fields {
            map.insert(name, Value::try_from(value.as_ref())?);
        }
        Box::<dyn Val>::try_from(Value::from(map))
    }
}

/// `JSONPatch`: `op`, `path` and `from` are strings, `value` anything; other fields are errors with
/// upstream's texts.
struct JsonPatchType {
    ty: Type,
}

impl StructType for JsonPatchType {
    fn get_type(&self) -> &Type {
        &self.ty
    }

    fn new_value<'b, 'v>(
        &self,
        fields: BTreeMap<String, CowVal<'b, 'v>>,
    ) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut map = HashMap::with_capacity(fields.len());
        for (name, value) in fields {
            let value = Value::try_from(value.as_ref())?;
            match name.as_str() {
                "op" | "path" | "from" if !matches!(value, Value::String(_)) => {
                    return Err(ExecutionError::function_error(
                        JSON_PATCH,
                        format!(
                            "unexpected type {} for JSONPatchType '{name}' field",
                            go_type(&value)
                        ),
                    ));
                }
                "op" | "path" | "from" | "value" => {}
                _ => {
                    return Err(ExecutionError::function_error(
                        JSON_PATCH,
                        format!("unexpected JSONPatchType field: {name}"),
                    ));
                }
            }
            map.insert(name, value);
        }
        Box::<dyn Val>::try_from(Value::from(map))
    }
}

/// The Go type cel-go's `Value()` has for `value` (what upstream's `%T` prints).
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Int(_) => "int64",
        Value::UInt(_) => "uint64",
        Value::Float(_) => "float64",
        Value::Bool(_) => "bool",
        Value::Bytes(_) => "[]uint8",
        Value::List(_) => "[]ref.Val",
        Value::Map(_) => "map[ref.Val]ref.Val",
        Value::Null => "structpb.NullValue",
        _ => "unknown",
    }
}

/// Adds `JSONPatch` and `jsonpatch.escapeKey` to `env` (upstream's JSON Patch library).
pub(crate) fn add_json_patch(env: &mut Env) {
    if let Err(error) = env.add_type(JsonPatchType {
        ty: Type::new_struct(JSON_PATCH.to_owned()),
    }) {
        tracing::error!(%error, "the JSONPatch type could not be added");
    }
    if let Err(error) = env.add_overload(
        "jsonpatch.escapeKey",
        "jsonpatch_escape_key_string",
        vec![STRING_TYPE],
        escape_key,
    ) {
        tracing::error!(%error, "jsonpatch.escapeKey could not be added");
    }
}

/// RFC 6901's escaping of a path segment: `~` as `~0`, `/` as `~1`.
fn escape_key<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let key = match args.first().map(|a| Value::try_from(a.as_ref())) {
        Some(Ok(Value::String(s))) => s.replace('~', "~0").replace('/', "~1"),
        _ => {
            return Err(ExecutionError::function_error(
                "jsonpatch.escapeKey",
                "expected a string",
            ));
        }
    };
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(Value::from(key))?))
}

/// Whether `name` is one of upstream's dynamic apply-configuration types.
pub(crate) fn is_object_type(name: &str) -> bool {
    name == OBJECT
        || name
            .strip_prefix(OBJECT)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// The environment for an expression constructing the `Object…` types `names`: `base()` with them
/// registered.
pub(crate) fn environment_for(names: &[String], base: impl FnOnce() -> Env) -> Env {
    let mut env = base();
    for name in names {
        if let Err(error) = env.add_type(ObjectType {
            ty: Type::new_struct(name.clone()),
        }) {
            tracing::warn!(%error, name, "an Object type could not be added");
        }
    }
    env
}

/// How many environments [`cached_environment_for`] keeps; past it the cache starts over, so names
/// from requests cannot grow it without bound.
const CACHED_ENVIRONMENTS: usize = 256;

/// [`environment_for`], built once per set of names: building an environment registers the whole
/// library, which costs more than evaluating a mutation.
pub(crate) fn cached_environment_for(names: &[String], base: fn() -> Env) -> std::sync::Arc<Env> {
    use std::sync::{Arc, LazyLock, Mutex};
    static CACHE: LazyLock<Mutex<HashMap<Vec<String>, Arc<Env>>>> = LazyLock::new(Default::default);
    let mut key = names.to_vec();
    key.sort();
    key.dedup();
    let mut cache = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(env) = cache.get(&key) {
        return env.clone();
    }
    if cache.len() >= CACHED_ENVIRONMENTS {
        cache.clear();
    }
    let env = Arc::new(environment_for(&key, base));
    cache.insert(key, env.clone());
    env
}

/// The `Object…` struct names `root` constructs, without duplicates.
pub(crate) fn object_types(root: &cel::IdedExpr) -> Vec<String> {
    let mut names = Vec::new();
    visit(root, &mut |expr| {
        if let Expr::Struct(s) = &expr.expr
            && is_object_type(&s.type_name)
            && !names.contains(&s.type_name)
        {
            names.push(s.type_name.clone());
        }
    });
    names
}

/// Calls `f` on every node of `root`, without recursion.
pub(super) fn visit<'a>(root: &'a cel::IdedExpr, f: &mut impl FnMut(&'a cel::IdedExpr)) {
    let mut pending = vec![root];
    while let Some(expr) = pending.pop() {
        f(expr);
        match &expr.expr {
            Expr::Call(call) => {
                pending.extend(call.target.as_deref());
                pending.extend(&call.args);
            }
            Expr::Comprehension(c) => {
                pending.extend([&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]);
            }
            Expr::List(list) => pending.extend(&list.elements),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        pending.extend([&entry.key, &entry.value]);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        pending.push(&field.value);
                    }
                }
            }
            Expr::Select(select) => pending.push(&select.operand),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

/// Upstream's `CheckTypeNamesMatchFieldPathNames`, on the parsed expression: every `Object…` literal
/// written as the value of a field of another (directly, or inside list and map literals) must be named
/// by the field path from the root `Object`. The messages are upstream's.
pub(crate) fn type_name_mismatches(root: &cel::IdedExpr) -> Vec<String> {
    let mut errors = Vec::new();
    let mut roots = Vec::new();
    visit(root, &mut |expr| {
        if let Expr::Struct(s) = &expr.expr
            && s.type_name == OBJECT
        {
            roots.push(expr);
        }
    });
    for object in roots {
        check_names(object, OBJECT.to_owned(), &mut errors);
    }
    errors
}

fn check_names(expr: &cel::IdedExpr, expected: String, errors: &mut Vec<String>) {
    match &expr.expr {
        Expr::Struct(s) if is_object_type(&s.type_name) => {
            if s.type_name != expected {
                errors.push(format!(
                    "unexpected type name {:?}, expected {expected:?}, which matches field name path from root Object type",
                    s.type_name
                ));
            }
            for entry in &s.entries {
                if let EntryExpr::StructField(field) = &entry.expr {
                    check_names(&field.value, format!("{expected}.{}", field.field), errors);
                }
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                check_names(element, expected.clone(), errors);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    check_names(&entry.value, expected.clone(), errors);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{compile, evaluate, value::to_cel};

    fn eval(source: &str) -> Result<cel::Value, String> {
        let expression = compile(source, &["object"]).map_err(|e| e.issues)?;
        let object = to_cel(&json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}}));
        evaluate(&expression, &[("object", object)]).map_err(|e| e.to_string())
    }

    fn json_of(value: cel::Value) -> serde_json::Value {
        super::super::value::to_json(&value).expect("JSON")
    }

    #[test]
    fn objects_construct_maps() {
        let value = eval(
            "Object{metadata: Object.metadata{labels: {'app': object.metadata.name}}, spec: Object.spec{replicas: 3}}",
        )
        .expect("evaluates");
        assert_eq!(
            json_of(value),
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"replicas": 3}})
        );
    }

    #[test]
    fn json_patches_construct_maps_and_check_their_fields() {
        let value = eval(
            "[JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('a/b~c'), value: 'x'}]",
        )
        .expect("evaluates");
        assert_eq!(
            json_of(value),
            json!([{"op": "add", "path": "/metadata/annotations/a~1b~0c", "value": "x"}])
        );
        let wrong = eval("JSONPatch{op: 1, path: '/x'}").unwrap_err();
        assert!(
            wrong.contains("unexpected type int64 for JSONPatchType 'op' field"),
            "{wrong}"
        );
        let unknown = eval("JSONPatch{op: 'add', nope: 1}").unwrap_err();
        assert!(
            unknown.contains("unexpected JSONPatchType field: nope"),
            "{unknown}"
        );
    }

    #[test]
    fn nested_object_names_follow_the_field_path() {
        let expression = compile(
            "Object{spec: Object.spec{selector: Object.spec.wrong{}, template: Object.spec.template{}}}",
            &["object"],
        )
        .expect("compiles");
        assert_eq!(
            expression.object_type_mismatches(),
            vec![
                "unexpected type name \"Object.spec.wrong\", expected \"Object.spec.selector\", which matches field name path from root Object type"
                    .to_owned()
            ]
        );
    }
}
