//! The Common Expression Language as kube-apiserver offers it to `x-kubernetes-validations` rules
//! (`k8s.io/apiserver/pkg/cel`), on the maintained [`cel`] crate.
//!
//! - [`compile`] parses an expression with the standard macros (`has`, `all`, `exists`, `exists_one`,
//!   `map`, `filter`) and checks that it only names the variables it is given (cel-go's checker reports
//!   `undeclared reference to 'x' (in container '')`); errors print as cel-go's issues do
//!   (`ERROR: <input>:1:9: Syntax error: …` with the source line and a caret).
//! - [`evaluate`] runs a compiled expression with its variables bound to JSON values ([`value`]), in
//!   the environment of the standard library, cel-go's `strings`, `lists` and `math` extensions, and
//!   Kubernetes' own libraries as far as they are implemented (`library`).
//! - `cost` estimates what an evaluation costs, for upstream's per-call and per-object limits.
//!
//! What the crate cannot do is type checking: cel-go rejects `self.replicas == 'x'` or a field the
//! schema does not declare when the rule is compiled, here they fail (or are `false`) when evaluated.

pub(crate) mod authorizer;
pub(crate) mod cost;
pub(crate) mod environment;
pub(crate) mod estimate;
pub(crate) mod format;
pub(crate) mod library;
pub(crate) mod network;
pub(crate) mod objects;
pub(crate) mod quantity;
pub(crate) mod url;
pub mod value;

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use cel::common::ast::Expr;
use cel::{Context, Env, Program};
pub use environment::EnvironmentType;

/// CEL's reserved words (the spec's, as cel-go reserves them): never an identifier, escaped as
/// `__word__` when a schema property has such a name (apiserver's `cel.Escape`).
pub(crate) const RESERVED_WORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];
/// The environment every expression runs in, built once.
static ENVIRONMENT: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(library::environment()));

/// The longest expression upstream compiles (`celconfig.MaxRequestSizeBytes` bounds whole CRDs; the
/// parser bounds nesting): longer sources are refused before parsing, which keeps the parser's
/// recursion bounded too.
pub const MAX_EXPRESSION_LENGTH: usize = 100_000;

/// Why an expression did not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{issues}")]
pub struct CompileError {
    /// cel-go's `Issues.String()`: one `ERROR: <input>:<line>:<column>: <message>` per problem, each
    /// followed by the source line and a caret under the column.
    pub issues: String,
}

/// A compiled expression.
pub struct Expression {
    program: Program,
    /// The environment it runs in when it constructs `Object…` types ([`objects`]), else the shared one.
    environment: Option<Arc<Env>>,
    /// Whether the expression names `oldSelf` (a transition rule).
    pub uses_old_self: bool,
    /// How deeply its comprehensions nest (see `cost`).
    pub comprehension_depth: u32,
    /// How many nodes its syntax tree has (macros expanded).
    pub nodes: u64,
    /// The composited variables it names (`variables.<name>`), in the order named.
    pub variables_named: Vec<String>,
    /// How many authorization `check` calls it makes (`authorizer::CHECK_COST` each).
    pub authorization_checks: u64,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression")
            .field("program", &self.program)
            .field("own_environment", &self.environment.is_some())
            .field("uses_old_self", &self.uses_old_self)
            .finish_non_exhaustive()
    }
}

impl Expression {
    /// upstream's `CheckTypeNamesMatchFieldPathNames` of the `Object…` literals it writes
    /// (`objects::type_name_mismatches`).
    pub fn object_type_mismatches(&self) -> Vec<String> {
        objects::type_name_mismatches(self.program.expression())
    }

    /// The estimated cost of evaluating it over data of `data_size` JSON values (`cost::estimate`).
    /// Each authorization `check` written adds upstream's fixed cost.
    pub fn cost(&self, data_size: u64) -> u64 {
        self.cost_before_checks(data_size)
            .saturating_add(self.authorization_checks.saturating_mul(authorizer::CHECK_COST))
    }

    /// [`Self::cost`] without the authorization checks, which an evaluation is charged for as it makes
    /// them (`authorizer::checks_made`).
    pub fn cost_before_checks(&self, data_size: u64) -> u64 {
        cost::estimate(self.nodes, self.comprehension_depth, data_size)
    }
}

/// Formats one issue as cel-go does: the message, then ` | <line>` and ` | ...^` under the column.
fn issue(source: &str, line: usize, column: usize, message: &str) -> String {
    let mut text = format!("ERROR: <input>:{line}:{column}: {message}");
    if let Some(snippet) = source.lines().nth(line.saturating_sub(1)) {
        text.push_str(&format!(
            "\n | {snippet}\n | {}^",
            ".".repeat(column.saturating_sub(1))
        ));
    }
    text
}

/// The 1-based line and column of byte `offset` of `source`, as cel-go counts (in characters).
fn position(source: &str, offset: usize) -> (usize, usize) {
    let before = source.get(..offset.min(source.len())).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// cel-go's parser limit on nesting (`parser.MaxRecursionDepth`, 250 by default): deeper expressions
/// are compile errors, which also bounds the recursion of everything that walks a compiled expression.
pub const MAX_RECURSION_DEPTH: usize = 250;

/// The parser and the walks over its tree recurse as deep as the expression nests: they run on a
/// stack of their own this large (reserved, used as needed), so a deep expression is an error, never
/// a crashed server.
const COMPILE_STACK: usize = 256 * 1024 * 1024;

/// Compiles `source` for an environment declaring `variables` (e.g. `self`, `oldSelf`), with every
/// library (upstream's `StoredExpressions`: what is stored, and runs, compiles).
pub fn compile(source: &str, variables: &[&str]) -> Result<Expression, CompileError> {
    compile_in(source, variables, EnvironmentType::StoredExpressions)
}

/// Compiles `source` in `environment` (the `environment` module): a new expression written to a server may
/// only call the functions of its compatibility minor.
pub fn compile_in(
    source: &str,
    variables: &[&str],
    environment: EnvironmentType,
) -> Result<Expression, CompileError> {
    stacker::grow(COMPILE_STACK, || compile_on_stack(source, variables, environment))
}

/// The most operator characters (`+`, `&`, `.`, …) outside string literals an expression may have:
/// the parser nests a chain of binary operators as deep as it is long, so a longer chain is refused
/// as too deep before parsing (the limit leaves far more than any rule needs).
const MAX_OPERATORS: usize = 2_000;

/// The offset of the first bracket nested deeper than [`MAX_RECURSION_DEPTH`], or of the operator past
/// [`MAX_OPERATORS`], outside string literals: found before parsing (the parser would recurse that
/// deep first).
fn too_deeply_nested(source: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut operators = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (offset, c) in source.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_RECURSION_DEPTH {
                    return Some(offset);
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '&' | '|' | '?' | ':' | '.' | ',' => {
                operators += 1;
                if operators > MAX_OPERATORS {
                    return Some(offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// The depth of a parsed expression, counted without recursion (its tree may be deeper than a stack).
fn depth(root: &cel::IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(root, 1usize)];
    while let Some((expr, level)) = pending.pop() {
        deepest = deepest.max(level);
        let mut children: Vec<&cel::IdedExpr> = Vec::new();
        match &expr.expr {
            Expr::Call(call) => {
                children.extend(call.target.as_deref());
                children.extend(&call.args);
            }
            Expr::Comprehension(c) => {
                children.extend([&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]);
            }
            Expr::List(list) => children.extend(&list.elements),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                        children.extend([&entry.key, &entry.value]);
                    }
                }
            }
            Expr::Select(select) => children.push(&select.operand),
            Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
        pending.extend(children.into_iter().map(|child| (child, level + 1)));
    }
    deepest
}

/// Compiles `source` in `environment`, declaring `variables` (e.g. `self`, `oldSelf`).
fn compile_on_stack(
    source: &str,
    variables: &[&str],
    environment_type: EnvironmentType,
) -> Result<Expression, CompileError> {
    if source.len() > MAX_EXPRESSION_LENGTH {
        return Err(CompileError {
            issues: format!(
                "ERROR: <input>:1:1: expression of {} bytes exceeds the limit of {MAX_EXPRESSION_LENGTH}",
                source.len()
            ),
        });
    }
    if let Some(offset) = too_deeply_nested(source) {
        let (line, column) = position(source, offset);
        return Err(CompileError {
            issues: issue(
                source,
                line,
                column,
                &format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"),
            ),
        });
    }
    let parsed = environment::parsing_environment(environment_type)
        .unwrap_or_else(|| ENVIRONMENT.clone())
        .compile(source);
    let program = parsed.map_err(|errors| CompileError {
        issues: errors
            .errors
            .iter()
            .map(|e| {
                let line = usize::try_from(e.pos.0).unwrap_or(1).max(1);
                let column = usize::try_from(e.pos.1).unwrap_or(1).max(1);
                issue(source, line, column, &e.msg)
            })
            .collect::<Vec<_>>()
            .join("\n"),
    })?;
    if depth(program.expression()) > MAX_RECURSION_DEPTH {
        return Err(CompileError {
            issues: issue(
                source,
                1,
                1,
                &format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"),
            ),
        });
    }
    let mut walk = Walk {
        declared: variables.iter().copied().collect(),
        scope: Vec::new(),
        depth: 0,
        nodes: 0,
        undeclared: Vec::new(),
        variables_named: Vec::new(),
        authorization_checks: 0,
    };
    walk.expr(program.expression(), 0);
    let mut undeclared = std::mem::take(&mut walk.undeclared);
    if let Some(minor) = environment_type.compatibility_minor() {
        undeclared.extend(environment::undeclared_functions(
            program.expression(),
            variables,
            NAMESPACES,
            minor,
        ));
    }
    if !undeclared.is_empty() {
        return Err(undeclared_references(source, &program, &undeclared));
    }
    if let Some(error) = authorizer_misused(source, &program, variables) {
        return Err(error);
    }
    let uses_old_self = program.references().has_variable("oldSelf");
    let object_types = objects::object_types(program.expression());
    let environment = (!object_types.is_empty())
        .then(|| objects::cached_environment_for(&object_types, library::environment));
    Ok(Expression {
        program,
        environment,
        uses_old_self,
        comprehension_depth: walk.depth,
        nodes: walk.nodes,
        variables_named: walk.variables_named,
        authorization_checks: walk.authorization_checks,
    })
}

/// cel-go's issues for undeclared references `(node id, name)`: one error each, sorted by position
/// as `Errors.ToDisplayString` sorts them.
fn undeclared_references(source: &str, program: &Program, undeclared: &[(u64, String)]) -> CompileError {
    let mut located: Vec<(usize, usize, &str)> = undeclared
        .iter()
        .map(|(id, name)| {
            let offset = program
                .source_info()
                .offset_for(*id)
                .map_or(0, |(start, _)| start as usize);
            let (line, column) = position(source, offset);
            (line, column, name.as_str())
        })
        .collect();
    located.sort_by_key(|(line, column, _)| (*line, *column));
    CompileError {
        issues: located
            .iter()
            .map(|(line, column, name)| {
                issue(
                    source,
                    *line,
                    *column,
                    &format!("undeclared reference to '{name}' (in container '')"),
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// cel-go's checker errors for the authorization library's methods misused
/// ([`authorizer::type_errors`]), where `authorizer` is declared.
fn authorizer_misused(source: &str, program: &Program, variables: &[&str]) -> Option<CompileError> {
    if !variables.contains(&"authorizer") {
        return None;
    }
    let errors = authorizer::type_errors(program.expression());
    let issues: Vec<String> = errors
        .iter()
        .map(|(id, message)| {
            let offset = program
                .source_info()
                .offset_for(*id)
                .map_or(0, |(start, _)| start as usize);
            let (line, column) = position(source, offset);
            issue(source, line, column, message)
        })
        .collect();
    (!issues.is_empty()).then(|| CompileError {
        issues: issues.join("\n"),
    })
}

/// Names an expression may use without declaring them: the namespaces of library functions.
const NAMESPACES: &[&str] = &[
    "math",
    "strings",
    "lists",
    "optional",
    "cel",
    "jsonpatch",
    "ip",
    "format",
];

/// A walk over a parsed expression: the identifiers that are neither declared, bound by an enclosing
/// comprehension nor a library namespace; the deepest comprehension nesting; the number of nodes; the
/// composited variables named; the authorization checks made.
struct Walk<'a> {
    declared: HashSet<&'a str>,
    scope: Vec<String>,
    depth: u32,
    nodes: u64,
    undeclared: Vec<(u64, String)>,
    variables_named: Vec<String>,
    authorization_checks: u64,
}

impl Walk<'_> {
    fn known(&self, name: &str) -> bool {
        self.declared.contains(name)
            || self.scope.iter().any(|s| s == name)
            || NAMESPACES.contains(&name)
            || name.starts_with('@')
            || matches!(
                name,
                "int"
                    | "uint"
                    | "double"
                    | "bool"
                    | "string"
                    | "bytes"
                    | "list"
                    | "map"
                    | "type"
                    | "null_type"
                    | "dyn"
            )
    }

    fn expr(&mut self, expr: &cel::IdedExpr, nesting: u32) {
        self.nodes += 1;
        match &expr.expr {
            Expr::Ident(name) => {
                if !self.known(name) {
                    self.undeclared.push((expr.id, name.clone()));
                }
            }
            Expr::Call(call) => {
                if authorizer::is_check(call) {
                    self.authorization_checks += 1;
                }
                if let Some(target) = &call.target {
                    self.expr(target, nesting);
                }
                for arg in &call.args {
                    self.expr(arg, nesting);
                }
            }
            Expr::Comprehension(comprehension) => {
                self.depth = self.depth.max(nesting + 1);
                self.expr(&comprehension.iter_range, nesting);
                self.expr(&comprehension.accu_init, nesting);
                let bound = self.scope.len();
                self.scope.push(comprehension.iter_var.clone());
                self.scope.push(comprehension.accu_var.clone());
                self.scope.extend(comprehension.iter_var2.clone());
                for part in [
                    &comprehension.loop_cond,
                    &comprehension.loop_step,
                    &comprehension.result,
                ] {
                    self.expr(part, nesting + 1);
                }
                self.scope.truncate(bound);
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.expr(element, nesting);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                        self.expr(&entry.key, nesting);
                        self.expr(&entry.value, nesting);
                    }
                }
            }
            Expr::Select(select) => {
                if matches!(&select.operand.expr, Expr::Ident(name) if name == "variables")
                    && !self.scope.iter().any(|s| s == "variables")
                    && !self.variables_named.contains(&select.field)
                {
                    self.variables_named.push(select.field.clone());
                }
                self.expr(&select.operand, nesting);
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let cel::common::ast::EntryExpr::StructField(field) = &entry.expr {
                        self.expr(&field.value, nesting);
                    }
                }
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

/// Evaluates `expression` with `variables` bound (JSON values converted by [`value::to_cel`]).
pub fn evaluate(
    expression: &Expression,
    variables: &[(&str, cel::Value)],
) -> Result<cel::Value, cel::ExecutionError> {
    let environment = expression
        .environment
        .clone()
        .unwrap_or_else(|| ENVIRONMENT.clone());
    let mut context = Context::with_env(environment);
    for (name, value) in variables {
        context.add_variable_from_value(*name, value.clone());
    }
    stacker::maybe_grow(256 * 1024, 16 * 1024 * 1024, || {
        expression.program.execute(&context)
    })
}

/// An evaluation error as cel-go prints it, which is what users of kube-apiserver see inside its
/// messages: `no such key: spec` (the crate says `No such key: spec`), `division by zero`, `modulus by
/// zero`, `integer overflow` and `unsigned integer overflow` (cel-go's `common/types` errors), and a
/// library function's own message without the crate's `Error executing function 'f': ` (cel-go's
/// functions return `types.NewErr(message)`). Anything else keeps the crate's text.
pub fn error_text(error: &cel::ExecutionError) -> String {
    match error {
        cel::ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        cel::ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        cel::ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        cel::ExecutionError::Overflow(_, cel::Value::UInt(_), _) => "unsigned integer overflow".to_owned(),
        cel::ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        cel::ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn eval(source: &str, this: serde_json::Value) -> Result<cel::Value, String> {
        let expression = compile(source, &["self"]).map_err(|e| e.issues)?;
        evaluate(&expression, &[("self", value::to_cel(&this))]).map_err(|e| e.to_string())
    }

    fn holds(source: &str, this: serde_json::Value) -> bool {
        eval(source, this.clone()) == Ok(cel::Value::Bool(true))
    }

    #[test]
    fn evaluation_errors_print_as_cel_go_prints_them() {
        let text = |source: &str| {
            let expression = compile(source, &["self"]).expect("compiles");
            let error =
                evaluate(&expression, &[("self", value::to_cel(&json!({"a": 1})))]).expect_err("fails");
            error_text(&error)
        };
        assert_eq!(text("self.spec == 1"), "no such key: spec");
        assert_eq!(text("self.a / 0 == 1"), "division by zero");
        assert_eq!(text("self.a % 0 == 1"), "modulus by zero");
        assert_eq!(text("self.a + 9223372036854775807 == 1"), "integer overflow");
        assert_eq!(
            text("quantity('x').isInteger()"),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn syntax_errors_print_as_cel_go_issues() {
        let error = compile("self.x <", &["self"]).unwrap_err();
        assert!(
            error.issues.starts_with("ERROR: <input>:1:9: Syntax error:"),
            "{}",
            error.issues
        );
        assert!(
            error.issues.contains("\n | self.x <\n | ........^"),
            "{}",
            error.issues
        );
    }

    #[test]
    fn undeclared_references_are_compile_errors() {
        let error = compile("self.a == other", &["self"]).unwrap_err();
        assert_eq!(
            error.issues,
            "ERROR: <input>:1:11: undeclared reference to 'other' (in container '')\n | self.a == other\n | ..........^"
        );
        assert!(compile("self.all(x, x > 0) && self.exists(y, y == 1)", &["self"]).is_ok());
        let transition = compile("self == oldSelf", &["self", "oldSelf"]).unwrap();
        assert!(transition.uses_old_self);
        assert!(compile("self == oldSelf", &["self"]).is_err());
    }

    #[test]
    fn standard_macros_and_string_functions() {
        let spec = json!({"name": "web-1", "ports": [80, 443], "labels": {"app": "web"}});
        for rule in [
            "size(self.ports) == 2",
            "has(self.labels) && !has(self.missing)",
            "self.name.startsWith('web') && self.name.endsWith('-1') && self.name.contains('b-')",
            "self.name.matches('^[a-z]+-[0-9]$')",
            "self.ports.all(p, p > 0) && self.ports.exists(p, p == 443) && self.ports.exists_one(p, p == 80)",
            "self.ports.map(p, p * 2) == [160, 886]",
            "self.ports.filter(p, p > 100) == [443]",
            "'app' in self.labels && self.labels['app'] == 'web'",
            "self.name.upperAscii() == 'WEB-1' && 'ABC'.lowerAscii() == 'abc'",
            "self.name.split('-') == ['web', '1'] && ['a', 'b'].join('-') == 'a-b'",
            "self.name.indexOf('-') == 3",
        ] {
            assert!(
                holds(rule, spec.clone()),
                "{rule}: {:?}",
                eval(rule, spec.clone())
            );
        }
    }

    #[test]
    fn runtime_errors_are_errors_not_panics() {
        for rule in [
            "1 / 0 == 1",
            "9223372036854775807 + 1 > 0",
            "self.ports[5] == 1",
            "self.missing == 1",
            "'abc'.substring(5) == ''",
            "self.name.matches('(') ",
            "'x'.find('[') == ''",
            "int('nope') == 1",
            "self.ports.map(p, p / 0) == []",
        ] {
            assert!(eval(rule, json!({"name": "a", "ports": [1]})).is_err(), "{rule}");
        }
        let deep = format!("{}1{}", "(".repeat(5_000), ")".repeat(5_000));
        let error = compile(&deep, &["self"]).unwrap_err();
        assert!(
            error
                .issues
                .starts_with("ERROR: <input>:1:251: expression recursion limit exceeded: 250"),
            "{}",
            error.issues
        );
        let sum = format!("1{}", " + 1".repeat(20_000));
        assert!(compile(&sum, &["self"]).is_err(), "a chain longer than the limit");
        let sum = format!("1{}", " + 1".repeat(MAX_OPERATORS));
        assert!(
            compile(&sum, &["self"])
                .unwrap_err()
                .issues
                .contains("recursion limit"),
            "parsed, too deep"
        );
        assert!(
            compile(&"1 + ".repeat(MAX_EXPRESSION_LENGTH), &["self"]).is_err(),
            "too long"
        );
        assert!(
            compile("'((((' == self", &["self"]).is_ok(),
            "brackets in strings do not nest"
        );
    }
}
