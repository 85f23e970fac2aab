//! Which CEL environment an expression is compiled in: upstream's versioned base environment
//! (`k8s.io/apiserver/pkg/cel/environment/base.go`, `baseOpts`) and its two environment types.
//!
//! Upstream adds each library to the base environment at the Kubernetes minor that introduced it
//! (`VersionedOptions.IntroducedVersion`, the table [`LIBRARIES`] below), and compiles an expression
//! in one of two environments of an `EnvSet` (`environment.Type`):
//!
//! - `NewExpressions`: the base environment of the *compatibility version*,
//!   `DefaultCompatibilityVersion()` — the effective version's `MinCompatibilityVersion()`, which is
//!   the emulated version minus one minor (`effectiveVersion.SetEmulationVersion`; before 1.31 the same
//!   `n-1` was hard-coded): a new CRD rule, policy expression or match condition may only use what
//!   the previous minor's servers also understand, so a rollback never meets an expression it cannot
//!   compile. A 1.31 server therefore refuses `format.named(…)` (introduced at 1.31) and a 1.32
//!   server accepts it;
//! - `StoredExpressions`: the newest environment, with everything, for what is already stored (an
//!   object written by a newer server still works) — at run time, and at update for an expression the
//!   old object already had (upstream's `preexistingExpressions`: the same text anywhere in the old
//!   object's expressions of that kind).
//!
//! Compiling in an environment that lacks a library fails as cel-go's checker fails on an undeclared
//! function: `undeclared reference to 'isIP' (in container '')` at the call's `(`, and for a
//! namespaced function (`format.named`, `sets.contains`) also `undeclared reference to 'format'` at the
//! namespace's identifier, since cel-go then checks the target as a variable.
//!
//! The optional syntax (`a.?b`, `a[?b]`, cel-go's `OptionalTypes`, 1.28) is a parse error before
//! 1.28 (`unsupported syntax '.?'`), as in cel-go's parser without it. Not gated (documented
//! differences): `CrossTypeNumericComparisons` (1.28, needs type checking) and 1.29's AST validators
//! of literals.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use crate::api::catalog::KubeVersion;

/// A library (or a version of one) of upstream's base environment and the functions it declares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Library {
    /// How `base.go` adds it.
    pub name: &'static str,
    /// The Kubernetes minor whose base environment first has it; `None`: no base environment has it
    /// (cel-go's extensions the fake offers that Kubernetes does not).
    pub introduced: Option<u32>,
    /// The functions (and macros) it declares, namespaced ones by their qualified name.
    pub functions: &'static [&'static str],
}

/// Upstream's `baseOpts` (`staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`), checked entry
/// by entry against that file and against the function list of
/// `pkg/cel/library/library_compatibility_test.go`. Functions of the standard library are declared
/// at every minor and are not listed; `string` (a method of `net.IP` and `net.CIDR` from 1.30) is
/// also a standard function, so it is always declared.
pub(crate) const LIBRARIES: &[Library] = &[
    Library {
        name: "library.URLs",
        introduced: Some(0),
        functions: &[
            "url",
            "isURL",
            "getScheme",
            "getHost",
            "getHostname",
            "getPort",
            "getEscapedPath",
            "getQuery",
        ],
    },
    Library {
        name: "library.Regex",
        introduced: Some(0),
        functions: &["find", "findAll"],
    },
    Library {
        name: "library.Lists",
        introduced: Some(0),
        functions: &["isSorted", "sum", "min", "max", "indexOf", "lastIndexOf"],
    },
    Library {
        name: "ext.Strings(ext.StringsVersion(0))",
        introduced: Some(0),
        functions: &[
            "charAt",
            "indexOf",
            "lastIndexOf",
            "lowerAscii",
            "replace",
            "split",
            "substring",
            "trim",
            "upperAscii",
            "join",
        ],
    },
    Library {
        name: "library.JSONPatch (the patch expressions of mutating policies, from their start)",
        introduced: Some(0),
        functions: &["jsonpatch.escapeKey"],
    },
    Library {
        name: "library.Authz",
        introduced: Some(27),
        functions: &[
            "path",
            "group",
            "serviceAccount",
            "resource",
            "subresource",
            "namespace",
            "name",
            "check",
            "allowed",
            "reason",
            "errored",
            "error",
        ],
    },
    Library {
        name: "cel.OptionalTypes",
        introduced: Some(28),
        functions: &[
            "optional.of",
            "optional.ofNonZeroValue",
            "optional.none",
            "hasValue",
            "value",
            "or",
            "orValue",
            "optMap",
            "optFlatMap",
        ],
    },
    Library {
        name: "library.Quantity",
        introduced: Some(28),
        functions: &[
            "quantity",
            "isQuantity",
            "add",
            "sub",
            "asApproximateFloat",
            "asInteger",
            "compareTo",
            "isGreaterThan",
            "isLessThan",
            "isInteger",
            "sign",
        ],
    },
    Library {
        name: "ext.Strings(ext.StringsVersion(2))",
        introduced: Some(29),
        functions: &["format", "strings.quote"],
    },
    Library {
        name: "ext.Sets",
        introduced: Some(29),
        functions: &["sets.contains", "sets.equivalent", "sets.intersects"],
    },
    Library {
        name: "library.IP",
        introduced: Some(30),
        functions: &[
            "ip",
            "isIP",
            "ip.isCanonical",
            "family",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
        ],
    },
    Library {
        name: "library.CIDR",
        introduced: Some(30),
        functions: &[
            "cidr",
            "isCIDR",
            "containsIP",
            "containsCIDR",
            "masked",
            "prefixLength",
            "ip",
        ],
    },
    Library {
        name: "library.Format",
        introduced: Some(31),
        functions: &[
            "format.named",
            "format.dns1123Label",
            "format.dns1123Subdomain",
            "format.dns1035Label",
            "format.qualifiedName",
            "format.dns1123LabelPrefix",
            "format.dns1123SubdomainPrefix",
            "format.dns1035LabelPrefix",
            "format.labelValue",
            "format.uri",
            "format.uuid",
            "format.byte",
            "format.date",
            "format.datetime",
            "validate",
        ],
    },
    Library {
        name: "library.AuthzSelectors",
        introduced: Some(31),
        functions: &["fieldSelector", "labelSelector"],
    },
    Library {
        name: "ext.TwoVarComprehensions",
        introduced: Some(32),
        functions: &["transformList", "transformMap", "transformMapEntry"],
    },
    Library {
        name: "library.SemverLib(library.SemverVersion(1))",
        introduced: Some(33),
        functions: &["semver", "isSemver", "major", "minor", "patch"],
    },
    Library {
        name: "ext.Lists(ext.ListsVersion(3))",
        introduced: Some(34),
        functions: &[
            "slice",
            "flatten",
            "distinct",
            "reverse",
            "sort",
            "sortBy",
            "lists.range",
        ],
    },
    Library {
        name: "ext.Math (not in Kubernetes' base environment)",
        introduced: None,
        functions: &[
            "math.greatest",
            "math.least",
            "math.abs",
            "math.ceil",
            "math.floor",
            "math.round",
            "math.trunc",
            "math.sign",
            "math.sqrt",
            "math.isInf",
            "math.isNaN",
            "math.isFinite",
            "math.bitAnd",
            "math.bitOr",
            "math.bitXor",
            "math.bitNot",
            "math.bitShiftLeft",
            "math.bitShiftRight",
        ],
    },
    Library {
        name: "ext.Bindings (not in Kubernetes' base environment)",
        introduced: None,
        functions: &["cel.bind"],
    },
];

/// Functions of CEL's standard library that share a name with a namespaced function's last part
/// (`sets.contains` / `'ab'.contains('a')`), or that may follow a namespace by mistake: declared in
/// every environment.
const STANDARD_FUNCTIONS: &[&str] = &[
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "size",
    "string",
    "int",
    "uint",
    "double",
    "bytes",
    "bool",
    "type",
    "dyn",
    "duration",
    "timestamp",
];

/// Which environment an expression is compiled in (upstream's `environment.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvironmentType {
    /// `NewExpressions`: the base environment of this compatibility minor.
    NewExpressions {
        /// The minor whose libraries it has (the emulated minor minus one).
        compatibility_minor: u32,
    },
    /// `StoredExpressions`: everything the fake implements.
    StoredExpressions,
}

impl EnvironmentType {
    /// The `NewExpressions` environment of a server emulating `emulated`: its compatibility version
    /// is one minor older (`MinCompatibilityVersion`).
    pub fn new_expressions(emulated: KubeVersion) -> Self {
        Self::NewExpressions {
            compatibility_minor: emulated.minor.saturating_sub(1),
        }
    }

    /// The environment upstream compiles `source` in when writing an object: `StoredExpressions` when
    /// the old object already had it (`preexisting` holds its expressions of the same kind),
    /// `NewExpressions` of `emulated` otherwise (a create, or a changed expression).
    pub fn at_write(emulated: KubeVersion, source: &str, preexisting: &[&str]) -> Self {
        if preexisting.contains(&source) {
            Self::StoredExpressions
        } else {
            Self::new_expressions(emulated)
        }
    }

    /// The compatibility minor, `None` for `StoredExpressions`.
    pub(crate) fn compatibility_minor(self) -> Option<u32> {
        match self {
            Self::NewExpressions { compatibility_minor } => Some(compatibility_minor),
            Self::StoredExpressions => None,
        }
    }
}

/// Whether function `name` (qualified when namespaced) is known to [`LIBRARIES`].
pub(crate) fn is_listed(name: &str) -> bool {
    LIBRARIES.iter().any(|l| l.functions.contains(&name))
}

/// Whether function `name` is declared in the base environment of `minor` (`None`: the stored
/// environment, where everything is). Names no library lists are the standard library's.
pub(crate) fn declared(name: &str, minor: Option<u32>) -> bool {
    let Some(minor) = minor else {
        return true;
    };
    let mut listed = false;
    for library in LIBRARIES.iter().filter(|l| l.functions.contains(&name)) {
        listed = true;
        if library.introduced.is_some_and(|at| at <= minor) {
            return true;
        }
    }
    !listed || STANDARD_FUNCTIONS.contains(&name)
}

/// The library that declares `name` first, for the server's log when an expression calls it before
/// its minor.
fn first_library(name: &str) -> Option<&'static Library> {
    LIBRARIES
        .iter()
        .filter(|l| l.functions.contains(&name))
        .min_by_key(|l| l.introduced.unwrap_or(u32::MAX))
}

/// Whether `name`, the last part of a namespaced call whose namespace is not declared, is itself a
/// declared function at `minor` (cel-go then looks it up unqualified): listed and introduced, or
/// standard.
pub(crate) fn declared_unqualified(name: &str, minor: u32) -> bool {
    STANDARD_FUNCTIONS.contains(&name) || (is_listed(name) && declared(name, Some(minor)))
}

/// The parsing environments of `NewExpressions`, one a compatibility minor: without cel-go's math
/// extension (never in Kubernetes), without the lists extension before 1.34 (its `sortBy` macro then
/// stays the call cel-go sees).
static PARSING: LazyLock<Mutex<HashMap<u32, Arc<cel::Env>>>> = LazyLock::new(Mutex::default);

/// The environment `source` is parsed in for `environment` (its macros are the ones expanded).
pub(crate) fn parsing_environment(environment: EnvironmentType) -> Option<Arc<cel::Env>> {
    let minor = environment.compatibility_minor()?;
    let mut cache = PARSING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(
        cache
            .entry(minor)
            .or_insert_with(|| Arc::new(super::library::environment_for(Some(minor))))
            .clone(),
    )
}

/// The calls of a parsed expression the base environment of `minor` does not declare, as cel-go's
/// checker reports them: `(node id, name)` of each `undeclared reference`, the call's own id for a
/// function, the identifier's for a namespace (`format` of `format.named(…)`) that is no variable.
/// `declared_variables` are the environment's variables, which may shadow a namespace.
pub(crate) fn undeclared_functions(
    root: &cel::IdedExpr,
    declared_variables: &[&str],
    namespaces: &[&str],
    minor: u32,
) -> Vec<(u64, String)> {
    use cel::common::ast::{EntryExpr, Expr};
    let mut undeclared = Vec::new();
    // (node, names bound by the comprehensions around it): a walk without recursion.
    let mut pending: Vec<(&cel::IdedExpr, Vec<&str>)> = vec![(root, Vec::new())];
    while let Some((node, scope)) = pending.pop() {
        let is_variable = |name: &str| declared_variables.contains(&name) || scope.contains(&name);
        match &node.expr {
            Expr::Call(call) => {
                let namespace = match call.target.as_deref().map(|t| (t.id, &t.expr)) {
                    Some((id, Expr::Ident(ns))) if namespaces.contains(&ns.as_str()) && !is_variable(ns) => {
                        Some((id, ns.as_str()))
                    }
                    _ => None,
                };
                match namespace {
                    Some((id, ns)) => {
                        let qualified = format!("{ns}.{}", call.func_name);
                        if !declared(&qualified, Some(minor)) || !is_listed(&qualified) {
                            undeclared.push((id, ns.to_owned()));
                            if !declared_unqualified(&call.func_name, minor) {
                                undeclared.push((node.id, call.func_name.clone()));
                            }
                        }
                    }
                    None => {
                        if !declared(&call.func_name, Some(minor)) {
                            undeclared.push((node.id, call.func_name.clone()));
                        }
                        if let Some(target) = &call.target {
                            pending.push((target, scope.clone()));
                        }
                    }
                }
                pending.extend(call.args.iter().map(|a| (a, scope.clone())));
            }
            Expr::Comprehension(c) => {
                pending.push((&c.iter_range, scope.clone()));
                pending.push((&c.accu_init, scope.clone()));
                let mut inner = scope.clone();
                inner.push(c.iter_var.as_str());
                inner.push(c.accu_var.as_str());
                inner.extend(c.iter_var2.as_deref());
                for part in [&c.loop_cond, &c.loop_step, &c.result] {
                    pending.push((part, inner.clone()));
                }
            }
            Expr::List(list) => pending.extend(list.elements.iter().map(|e| (e, scope.clone()))),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        pending.push((&entry.key, scope.clone()));
                        pending.push((&entry.value, scope.clone()));
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        pending.push((&field.value, scope.clone()));
                    }
                }
            }
            Expr::Select(select) => pending.push((&select.operand, scope.clone())),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    for (_, name) in &undeclared {
        if let Some(library) = first_library(name) {
            tracing::debug!(
                function = %name,
                library = library.name,
                introduced = ?library.introduced,
                minor,
                "a new CEL expression calls a function of a later minor's environment"
            );
        }
    }
    undeclared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_arrive_at_upstreams_minors() {
        assert!(declared("quantity", Some(28)) && !declared("quantity", Some(27)));
        assert!(declared("sets.contains", Some(29)) && !declared("sets.contains", Some(28)));
        assert!(declared("isIP", Some(30)) && !declared("isIP", Some(29)));
        assert!(declared("format.named", Some(31)) && !declared("format.named", Some(30)));
        assert!(declared("semver", Some(33)) && !declared("semver", Some(32)));
        assert!(declared("sortBy", Some(34)) && !declared("sortBy", Some(33)));
        assert!(!declared("math.greatest", Some(36)) && declared("math.greatest", None));
        // A name of two libraries is declared from the first: `compareTo` of quantities (1.28)
        // before semver's (1.33); `ip` of IP and CIDR both at 1.30.
        assert!(declared("compareTo", Some(28)));
        assert!(declared("string", Some(27)) && declared("size", Some(27)));
        assert!(declared_unqualified("contains", 28) && !declared_unqualified("named", 36));
    }

    #[test]
    fn new_expressions_compile_at_the_previous_minor_stored_ones_in_everything() {
        let v = |minor| KubeVersion { major: 1, minor };
        assert_eq!(
            EnvironmentType::new_expressions(v(31)),
            EnvironmentType::NewExpressions {
                compatibility_minor: 30
            }
        );
        assert_eq!(
            EnvironmentType::at_write(v(31), "self.a", &["self.a"]),
            EnvironmentType::StoredExpressions
        );
        assert_eq!(
            EnvironmentType::at_write(v(31), "self.b", &["self.a"]).compatibility_minor(),
            Some(30)
        );
    }

    fn at(minor: u32) -> EnvironmentType {
        EnvironmentType::NewExpressions {
            compatibility_minor: minor,
        }
    }

    fn issues(source: &str, minor: u32) -> String {
        match super::super::compile_in(source, &["self"], at(minor)) {
            Ok(_) => "compiles".to_owned(),
            Err(e) => e.issues,
        }
    }

    #[test]
    fn a_function_of_a_later_minor_is_an_undeclared_reference() {
        assert_eq!(
            issues("isIP(self.ip)", 29),
            "ERROR: <input>:1:5: undeclared reference to 'isIP' (in container '')\n | isIP(self.ip)\n | ....^"
        );
        assert_eq!(issues("isIP(self.ip)", 30), "compiles");
        assert_eq!(
            issues("format.named('uuid').hasValue()", 30),
            "ERROR: <input>:1:1: undeclared reference to 'format' (in container '')\n | format.named('uuid').hasValue()\n | ^\n\
             ERROR: <input>:1:13: undeclared reference to 'named' (in container '')\n | format.named('uuid').hasValue()\n | ............^"
        );
        assert_eq!(issues("format.named('uuid').hasValue()", 31), "compiles");
        assert_eq!(
            issues("quantity(self.q).isInteger() && self.q.startsWith('1')", 27),
            "ERROR: <input>:1:9: undeclared reference to 'quantity' (in container '')\n | quantity(self.q).isInteger() && self.q.startsWith('1')\n | ........^\n\
             ERROR: <input>:1:27: undeclared reference to 'isInteger' (in container '')\n | quantity(self.q).isInteger() && self.q.startsWith('1')\n | ..........................^"
        );
    }

    #[test]
    fn stored_expressions_have_everything_and_variables_shadow_namespaces() {
        let stored = |source: &str| {
            super::super::compile_in(source, &["self"], EnvironmentType::StoredExpressions).is_ok()
        };
        assert!(stored("format.named('uuid').hasValue() && isIP('1.2.3.4')"));
        assert!(stored("math.greatest(1, 2) == 2"));
        assert!(issues("math.greatest(1, 2) == 2", 36).contains("undeclared reference to 'math'"));
        assert_eq!(issues("[1].exists(format, format == 1)", 28), "compiles");
        assert_eq!(issues("'a'.contains('a') && size('a') == 1", 27), "compiles");
        assert_eq!(
            issues("self.?x.hasValue()", 27),
            "ERROR: <input>:1:5: unsupported syntax '.?'\n | self.?x.hasValue()\n | ....^"
        );
        assert_eq!(issues("self.?x.hasValue()", 28), "compiles");
    }
}
