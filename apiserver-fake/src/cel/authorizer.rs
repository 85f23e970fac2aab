//! Kubernetes' authorization library (`k8s.io/apiserver/pkg/cel/library/authz.go`, with
//! `AuthzSelectors`): the `authorizer` variable admission expressions have (validating and mutating
//! admission policies, webhooks' and policies' `matchConditions`), which asks the server's own
//! authorizer whether the requesting user (or a service account) may do something:
//!
//! - `authorizer.group(g)` → `GroupCheck`; `.resource(r)` → `ResourceCheck` (`resource must not be
//!   empty`); `.subresource(s)`, `.namespace(ns)`, `.name(n)`, `.fieldSelector(s)`, `.labelSelector(s)`
//!   set that part; `authorizer.requestResource` is the `ResourceCheck` of the request's own resource,
//!   subresource, namespace and name;
//! - `authorizer.path(p)` → `PathCheck` (`path must not be empty`), a non-resource check;
//! - `authorizer.serviceAccount(ns, name)` → an `Authorizer` for that service account's user
//!   (`system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and `system:serviceaccounts:<ns>`),
//!   refusing an invalid name or namespace (`Invalid service account name` / `namespace`);
//! - `<check>.check(verb)` → `Decision`: the authorizer's decision for the verb (the resource check with
//!   API version `*`, as upstream); `.allowed()` (a decision of "no opinion" is not allowed),
//!   `.reason()`, `.errored()`, `.error()`.
//!
//! The values are opaque CEL values of upstream's type names (`kubernetes.authorization.Authorizer`, …)
//! holding the [`AccessCheck`] they ask and the user they ask for.
//!
//! Cost: a `check` costs upstream's fixed 350,000 (`library/cost.go`: "set to allow for only two
//! authorization checks per expression"), added to the expression's estimate ([`CHECK_COST`]); the
//! builders and accessors cost 1, as any node. An admission expression is charged for the checks it
//! made ([`checks_made`]), as cel-go charges them when evaluated (`a || b || c` with `a` true costs one
//! check), so a third check made is over the per-call limit; the estimate of an expression before it
//! runs (a policy's variables, skipped when over the limit) counts every `check` written.
//!
//! Compiling: the crate has no type checker, so the chains on `authorizer` are checked here as cel-go's
//! checker checks them ([`type_errors`]): a method the receiver's type does not have, or arguments
//! that are not strings, is `found no matching overload for 'check' applied to
//! 'kubernetes.authorization.Authorizer.(string)'` at the call's parenthesis, so a policy misusing
//! them is refused when written. Arguments whose type is not known without a checker (`object.…`) are
//! `dyn`, as cel-go types `object`; `request`'s scalar fields are `string` (or `bool`).
//!
//! Field and label selectors are recorded but the fake's authorizers decide without them, as
//! upstream's RBAC does (it has no selector rules).

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use cel::IdedExpr;
use cel::common::ast::{Expr, LiteralValue};
use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{Env, ExecutionError, Value};
use mvp_core::{RequestInfo, UserInfo};

/// What one `check` costs (`library/cost.go`'s `CallCost` of `check`).
pub(crate) const CHECK_COST: u64 = 350_000;

thread_local! {
    /// The checks made on this thread by the evaluation [`checks_made`] runs (an evaluation runs on
    /// one thread, start to end).
    static CHECKS_MADE: Cell<u64> = const { Cell::new(0) };
}

/// Runs `evaluation` and counts the `check`s it made, which cel-go charges as it evaluates them.
pub(crate) fn checks_made<T>(evaluation: impl FnOnce() -> T) -> (T, u64) {
    let outer = CHECKS_MADE.replace(0);
    let result = evaluation();
    let made = CHECKS_MADE.replace(outer);
    (result, made)
}

/// Asks `principal`'s authorizer, counted for [`checks_made`].
fn decide(principal: &Principal, attributes: &RequestInfo) -> Decision {
    CHECKS_MADE.set(CHECKS_MADE.get().saturating_add(1));
    Decision(principal.authorizer.check(&principal.user, attributes))
}

/// The runtime type names (upstream's `AuthorizerType`, …).
const AUTHORIZER_TYPE: &str = "kubernetes.authorization.Authorizer";
const PATH_CHECK_TYPE: &str = "kubernetes.authorization.PathCheck";
const GROUP_CHECK_TYPE: &str = "kubernetes.authorization.GroupCheck";
const RESOURCE_CHECK_TYPE: &str = "kubernetes.authorization.ResourceCheck";
const DECISION_TYPE: &str = "kubernetes.authorization.Decision";

/// What an authorizer decided about one request: upstream's `(Decision, reason, error)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Verdict {
    /// The decision was "allow" ("deny" and "no opinion" are not).
    pub allowed: bool,
    /// The authorizer's reason (`RBAC: allowed by …`, or why it had no opinion).
    pub reason: String,
    /// The authorizer's error, when it could not decide.
    pub error: Option<String>,
}

/// The server's authorizer as the library asks it (kube-apiserver's `authorizer.Authorizer` that the
/// admission plugins are given: the whole chain, `system:masters` included).
pub(crate) trait AccessCheck: Send + Sync + fmt::Debug {
    /// The decision for `user` making the request `attributes` describes (a resource request with
    /// verb, group, version `*`, resource, subresource, namespace and name, or a non-resource request
    /// with verb and path).
    fn check(&self, user: &UserInfo, attributes: &RequestInfo) -> Verdict;
}

impl AccessCheck for crate::chain::authorization::Authorizer {
    fn check(&self, user: &UserInfo, attributes: &RequestInfo) -> Verdict {
        let review = self.review(user, attributes);
        Verdict {
            allowed: review.allowed,
            reason: review.reason,
            error: None,
        }
    }
}

/// An `Authorizer` value: the authorizer and the user its checks are for.
#[derive(Clone)]
struct Principal {
    authorizer: Arc<dyn AccessCheck>,
    user: Arc<UserInfo>,
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorizer")
            .field("user", &self.user.name)
            .finish()
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authorizer, &other.authorizer) && self.user == other.user
    }
}

impl Eq for Principal {}

impl Opaque for Principal {
    fn runtime_type_name(&self) -> &str {
        AUTHORIZER_TYPE
    }
}

/// A `PathCheck`: a non-resource check of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathCheck {
    principal: Principal,
    path: String,
}

impl Opaque for PathCheck {
    fn runtime_type_name(&self) -> &str {
        PATH_CHECK_TYPE
    }
}

/// A `GroupCheck`: the API group of a resource check to be.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupCheck {
    principal: Principal,
    group: String,
}

impl Opaque for GroupCheck {
    fn runtime_type_name(&self) -> &str {
        GROUP_CHECK_TYPE
    }
}

/// A `ResourceCheck`: what a resource request would address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourceCheck {
    principal: Principal,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    field_selector: String,
    label_selector: String,
}

impl Opaque for ResourceCheck {
    fn runtime_type_name(&self) -> &str {
        RESOURCE_CHECK_TYPE
    }
}

/// A `Decision`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decision(Verdict);

impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        DECISION_TYPE
    }
}

/// The resource a request addresses, for `authorizer.requestResource`.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestResource<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// The variables `authorizer` and `authorizer.requestResource` for a request by `user` to
/// `request` (upstream's `NewAuthorizerVal` and `NewResourceAuthorizerVal`), checked by `authorizer`.
pub(crate) fn variables(
    authorizer: &Arc<dyn AccessCheck>,
    user: &UserInfo,
    request: &RequestResource<'_>,
) -> [(&'static str, Value); 2] {
    let principal = Principal {
        authorizer: authorizer.clone(),
        user: Arc::new(user.clone()),
    };
    let request_resource = ResourceCheck {
        principal: principal.clone(),
        group: request.group.to_owned(),
        resource: request.resource.to_owned(),
        subresource: request.subresource.to_owned(),
        namespace: request.namespace.to_owned(),
        name: request.name.to_owned(),
        field_selector: String::new(),
        label_selector: String::new(),
    };
    [
        ("authorizer", Value::Opaque(Arc::new(principal))),
        (
            "authorizer.requestResource",
            Value::Opaque(Arc::new(request_resource)),
        ),
    ]
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(value)?))
}

fn opaque<'b, 'v, T: Opaque + Clone>(value: T) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Opaque(Arc::new(value)))
}

/// The `index`th argument (the target of a method is the first).
fn argument(args: &[CowVal<'_, '_>], index: usize) -> Result<Value, ExecutionError> {
    args.get(index)
        .map(|a| Value::try_from(a.as_ref()))
        .transpose()?
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

/// The target of method `function`, of type `T`.
fn target<T: Opaque + Clone>(args: &[CowVal<'_, '_>], function: &str) -> Result<T, ExecutionError> {
    match argument(args, 0)? {
        Value::Opaque(value) => value
            .downcast_ref::<T>()
            .cloned()
            .ok_or_else(|| ExecutionError::function_error(function, "no such overload")),
        _ => Err(ExecutionError::function_error(function, "no such overload")),
    }
}

/// The string argument `index` of `function`.
fn text(args: &[CowVal<'_, '_>], index: usize, function: &str) -> Result<String, ExecutionError> {
    match argument(args, index)? {
        Value::String(text) => Ok(text.to_string()),
        _ => Err(ExecutionError::function_error(function, "no such overload")),
    }
}

fn path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let principal: Principal = target(&args, "path")?;
    let path = text(&args, 1, "path")?;
    if path.trim().is_empty() {
        return Err(ExecutionError::function_error("path", "path must not be empty"));
    }
    opaque(PathCheck { principal, path })
}

fn group<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let principal: Principal = target(&args, "group")?;
    let group = text(&args, 1, "group")?;
    opaque(GroupCheck { principal, group })
}

fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    use crate::api::rest::names::NameRule;
    let principal: Principal = target(&args, "serviceAccount")?;
    let namespace = text(&args, 1, "serviceAccount")?;
    let name = text(&args, 2, "serviceAccount")?;
    // Upstream validates the name first (`ValidateServiceAccountName`, a DNS subdomain), then the
    // namespace (`ValidateNamespaceName`, a DNS label).
    if !NameRule::Dns1123Subdomain.violations(&name).is_empty() {
        return Err(ExecutionError::function_error(
            "serviceAccount",
            "Invalid service account name",
        ));
    }
    if !NameRule::Dns1123Label.violations(&namespace).is_empty() {
        return Err(ExecutionError::function_error(
            "serviceAccount",
            "Invalid service account namespace",
        ));
    }
    // `serviceaccount.ServiceAccountInfo.UserInfo()`.
    let user = UserInfo {
        name: format!("system:serviceaccount:{namespace}:{name}"),
        groups: vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
        ],
        ..UserInfo::default()
    };
    opaque(Principal {
        authorizer: principal.authorizer,
        user: Arc::new(user),
    })
}

fn resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let GroupCheck { principal, group } = target(&args, "resource")?;
    let resource = text(&args, 1, "resource")?;
    if resource.trim().is_empty() {
        return Err(ExecutionError::function_error(
            "resource",
            "resource must not be empty",
        ));
    }
    opaque(ResourceCheck {
        principal,
        group,
        resource,
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        field_selector: String::new(),
        label_selector: String::new(),
    })
}

/// A `ResourceCheck` method that sets one of its parts to its string argument.
fn set_part<'b, 'v>(
    args: &[CowVal<'b, 'v>],
    function: &str,
    part: fn(&mut ResourceCheck) -> &mut String,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut check: ResourceCheck = target(args, function)?;
    *part(&mut check) = text(args, 1, function)?;
    opaque(check)
}

fn subresource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    set_part(&args, "subresource", |c| &mut c.subresource)
}

fn namespace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    set_part(&args, "namespace", |c| &mut c.namespace)
}

fn name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    set_part(&args, "name", |c| &mut c.name)
}

fn field_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    set_part(&args, "fieldSelector", |c| &mut c.field_selector)
}

fn label_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    set_part(&args, "labelSelector", |c| &mut c.label_selector)
}

/// `<PathCheck>.check(httpVerb)`: a non-resource request for the path.
fn path_check<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let PathCheck { principal, path } = target(&args, "check")?;
    let attributes = RequestInfo {
        is_resource_request: false,
        verb: text(&args, 1, "check")?,
        path,
        ..RequestInfo::default()
    };
    opaque(decide(&principal, &attributes))
}

/// `<ResourceCheck>.check(apiVerb)`: a resource request with API version `*`.
fn resource_check<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let check: ResourceCheck = target(&args, "check")?;
    let attributes = RequestInfo {
        is_resource_request: true,
        verb: text(&args, 1, "check")?,
        api_group: check.group,
        api_version: "*".to_owned(),
        resource: check.resource,
        subresource: check.subresource,
        namespace: check.namespace,
        name: check.name,
        ..RequestInfo::default()
    };
    opaque(decide(&check.principal, &attributes))
}

fn allowed<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Decision(verdict) = target(&args, "allowed")?;
    owned(Value::Bool(verdict.allowed))
}

fn reason<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Decision(verdict) = target(&args, "reason")?;
    owned(Value::from(verdict.reason))
}

fn errored<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Decision(verdict) = target(&args, "errored")?;
    owned(Value::Bool(verdict.error.is_some()))
}

fn error<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Decision(verdict) = target(&args, "error")?;
    owned(Value::from(verdict.error.unwrap_or_default()))
}

type Overload = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Adds the types and methods to `env`.
pub(crate) fn add_to(env: &mut Env) {
    for name in [
        AUTHORIZER_TYPE,
        PATH_CHECK_TYPE,
        GROUP_CHECK_TYPE,
        RESOURCE_CHECK_TYPE,
        DECISION_TYPE,
    ] {
        if let Err(error) = env.add_type(Type::new_opaque_type(name)) {
            tracing::error!(%error, name, "an authorization type could not be added");
        }
    }
    let one = || vec![STRING_TYPE];
    let members: [(&str, &str, &str, Vec<Type>, Overload); 15] = [
        ("path", "authorizer_path", AUTHORIZER_TYPE, one(), path),
        ("group", "authorizer_group", AUTHORIZER_TYPE, one(), group),
        (
            "serviceAccount",
            "authorizer_serviceaccount",
            AUTHORIZER_TYPE,
            vec![STRING_TYPE, STRING_TYPE],
            service_account,
        ),
        (
            "resource",
            "groupcheck_resource",
            GROUP_CHECK_TYPE,
            one(),
            resource,
        ),
        (
            "subresource",
            "resourcecheck_subresource",
            RESOURCE_CHECK_TYPE,
            one(),
            subresource,
        ),
        (
            "namespace",
            "resourcecheck_namespace",
            RESOURCE_CHECK_TYPE,
            one(),
            namespace,
        ),
        ("name", "resourcecheck_name", RESOURCE_CHECK_TYPE, one(), name),
        (
            "fieldSelector",
            "authorizer_fieldselector",
            RESOURCE_CHECK_TYPE,
            one(),
            field_selector,
        ),
        (
            "labelSelector",
            "authorizer_labelselector",
            RESOURCE_CHECK_TYPE,
            one(),
            label_selector,
        ),
        ("check", "pathcheck_check", PATH_CHECK_TYPE, one(), path_check),
        (
            "check",
            "resourcecheck_check",
            RESOURCE_CHECK_TYPE,
            one(),
            resource_check,
        ),
        ("errored", "decision_errored", DECISION_TYPE, vec![], errored),
        ("error", "decision_error", DECISION_TYPE, vec![], error),
        ("allowed", "decision_allowed", DECISION_TYPE, vec![], allowed),
        ("reason", "decision_reason", DECISION_TYPE, vec![], reason),
    ];
    for (name, id, target, args, op) in members {
        if let Err(error) = env.add_member_overload(name, id, Type::new_opaque_type(target), args, op) {
            tracing::error!(%error, name, "an authorization method could not be added");
        }
    }
}

/// Whether `call` is an authorization `check` (a method call of one argument), which costs
/// [`CHECK_COST`].
pub(crate) fn is_check(call: &cel::common::ast::CallExpr) -> bool {
    call.func_name == "check" && call.target.is_some() && call.args.len() == 1
}

/// The methods of each type of the library: receiver, name, how many (string) arguments, result
/// type (`None`: a `bool` or `string`, outside the library).
const METHODS: &[(&str, &str, usize, Option<&str>)] = &[
    (AUTHORIZER_TYPE, "path", 1, Some(PATH_CHECK_TYPE)),
    (AUTHORIZER_TYPE, "group", 1, Some(GROUP_CHECK_TYPE)),
    (AUTHORIZER_TYPE, "serviceAccount", 2, Some(AUTHORIZER_TYPE)),
    (GROUP_CHECK_TYPE, "resource", 1, Some(RESOURCE_CHECK_TYPE)),
    (RESOURCE_CHECK_TYPE, "subresource", 1, Some(RESOURCE_CHECK_TYPE)),
    (RESOURCE_CHECK_TYPE, "namespace", 1, Some(RESOURCE_CHECK_TYPE)),
    (RESOURCE_CHECK_TYPE, "name", 1, Some(RESOURCE_CHECK_TYPE)),
    (RESOURCE_CHECK_TYPE, "fieldSelector", 1, Some(RESOURCE_CHECK_TYPE)),
    (RESOURCE_CHECK_TYPE, "labelSelector", 1, Some(RESOURCE_CHECK_TYPE)),
    (PATH_CHECK_TYPE, "check", 1, Some(DECISION_TYPE)),
    (RESOURCE_CHECK_TYPE, "check", 1, Some(DECISION_TYPE)),
    (DECISION_TYPE, "allowed", 0, None),
    (DECISION_TYPE, "reason", 0, None),
    (DECISION_TYPE, "errored", 0, None),
    (DECISION_TYPE, "error", 0, None),
];

/// The library type of `expr`, when it is a chain of the library's methods on `authorizer` (or
/// `authorizer.requestResource`) that type-checks.
fn library_type(expr: &IdedExpr) -> Option<&'static str> {
    match &expr.expr {
        Expr::Ident(name) if name == "authorizer" => Some(AUTHORIZER_TYPE),
        Expr::Select(select)
            if select.field == "requestResource"
                && matches!(&select.operand.expr, Expr::Ident(name) if name == "authorizer") =>
        {
            Some(RESOURCE_CHECK_TYPE)
        }
        Expr::Call(call) => {
            let receiver = library_type(call.target.as_deref()?)?;
            METHODS
                .iter()
                .find(|(on, name, arity, _)| {
                    *on == receiver && *name == call.func_name && *arity == call.args.len()
                })
                .and_then(|(_, _, _, result)| *result)
        }
        _ => None,
    }
}

/// The type of a scalar field of `request`, which admission expressions declare with upstream's
/// `AdmissionRequest` type (`plugin/cel/compile.go`'s `buildRequestType`).
fn request_field_type(expr: &IdedExpr) -> Option<&'static str> {
    let Expr::Select(select) = &expr.expr else {
        return None;
    };
    let field = select.field.as_str();
    match &select.operand.expr {
        Expr::Ident(name) if name == "request" => match field {
            "uid" | "name" | "namespace" | "operation" | "subResource" | "requestSubResource" => {
                Some("string")
            }
            "dryRun" => Some("bool"),
            _ => None,
        },
        Expr::Select(user)
            if user.field == "userInfo"
                && matches!(&user.operand.expr, Expr::Ident(name) if name == "request")
                && matches!(field, "username" | "uid") =>
        {
            Some("string")
        }
        _ => None,
    }
}

/// The type cel-go's checker gives an argument, as far as it is known without one: literals', the
/// library's, `request`'s scalar fields', and `dyn` for the rest (which matches any parameter).
fn argument_type(expr: &IdedExpr) -> &'static str {
    if let Some(library) = library_type(expr) {
        return library;
    }
    if let Some(field) = request_field_type(expr) {
        return field;
    }
    match &expr.expr {
        Expr::Literal(literal) => match literal {
            LiteralValue::Boolean(_) => "bool",
            LiteralValue::Bytes(_) => "bytes",
            LiteralValue::Double(_) => "double",
            LiteralValue::Int(_) => "int",
            LiteralValue::Null => "null_type",
            LiteralValue::String(_) => "string",
            LiteralValue::UInt(_) => "uint",
        },
        _ => "dyn",
    }
}

/// cel-go's checker errors for the library's methods misused (`authorizer.check('get')`,
/// `authorizer.group(1)`): `(node id, found no matching overload for 'f' applied to
/// '<receiver>.(<arguments>)')` for each call on a value of the library's types that no method of
/// that type takes. Calls on other values are not checked (the crate has no checker).
pub(crate) fn type_errors(root: &IdedExpr) -> Vec<(u64, String)> {
    let mut errors = Vec::new();
    super::objects::visit(root, &mut |expr| {
        let Expr::Call(call) = &expr.expr else {
            return;
        };
        let Some(receiver) = call.target.as_deref().and_then(library_type) else {
            return;
        };
        let arguments: Vec<&str> = call.args.iter().map(argument_type).collect();
        let matches = METHODS.iter().any(|(on, name, arity, _)| {
            *on == receiver
                && *name == call.func_name
                && *arity == arguments.len()
                && arguments.iter().all(|a| matches!(*a, "string" | "dyn"))
        });
        if !matches {
            errors.push((
                expr.id,
                format!(
                    "found no matching overload for '{}' applied to '{receiver}.({})'",
                    call.func_name,
                    arguments.join(", ")
                ),
            ));
        }
    });
    errors.sort_unstable();
    errors
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::super::{compile, error_text, evaluate};
    use super::*;

    /// Allows `alice` to `update` `apps` `deployments` in `team` and `get` on `/healthz`, has no
    /// opinion otherwise; remembers what it was asked.
    #[derive(Debug, Default)]
    struct Recorder {
        asked: Mutex<Vec<(String, Vec<String>, RequestInfo)>>,
    }

    impl AccessCheck for Recorder {
        fn check(&self, user: &UserInfo, attributes: &RequestInfo) -> Verdict {
            self.asked
                .lock()
                .unwrap()
                .push((user.name.clone(), user.groups.clone(), attributes.clone()));
            let allowed = user.name == "alice"
                && ((attributes.is_resource_request
                    && attributes.verb == "update"
                    && attributes.api_group == "apps"
                    && attributes.resource == "deployments"
                    && attributes.namespace == "team")
                    || (!attributes.is_resource_request
                        && attributes.path == "/healthz"
                        && attributes.verb == "get"));
            Verdict {
                allowed,
                reason: if allowed {
                    "RBAC: allowed by test".to_owned()
                } else {
                    String::new()
                },
                error: (attributes.verb == "explode").then(|| "webhook unreachable".to_owned()),
            }
        }
    }

    fn eval_as(recorder: &Arc<Recorder>, user: &str, source: &str) -> Result<Value, String> {
        let expression = compile(source, &["authorizer"]).map_err(|e| e.issues)?;
        let authorizer: Arc<dyn AccessCheck> = recorder.clone();
        let request = RequestResource {
            group: "",
            resource: "configmaps",
            subresource: "",
            namespace: "team",
            name: "settings",
        };
        let bound = variables(&authorizer, &UserInfo::new(user), &request);
        evaluate(&expression, &bound).map_err(|e| error_text(&e))
    }

    #[test]
    fn resource_checks_ask_the_authorizer_for_the_requesting_user() {
        let recorder = Arc::new(Recorder::default());
        let check = "authorizer.group('apps').resource('deployments').subresource('scale').namespace('team').name('web').check('update')";
        assert_eq!(
            eval_as(&recorder, "alice", &format!("{check}.allowed()")),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            eval_as(&recorder, "alice", &format!("{check}.reason()")),
            Ok(Value::from("RBAC: allowed by test"))
        );
        assert_eq!(
            eval_as(&recorder, "bob", &format!("{check}.allowed()")),
            Ok(Value::Bool(false)),
            "no opinion is not allowed"
        );
        let asked = recorder.asked.lock().unwrap();
        let (user, _, attributes) = &asked[0];
        assert_eq!(user, "alice");
        assert_eq!(
            *attributes,
            RequestInfo {
                is_resource_request: true,
                verb: "update".to_owned(),
                api_group: "apps".to_owned(),
                api_version: "*".to_owned(),
                resource: "deployments".to_owned(),
                subresource: "scale".to_owned(),
                namespace: "team".to_owned(),
                name: "web".to_owned(),
                ..RequestInfo::default()
            }
        );
        assert_eq!(asked[2].0, "bob");
    }

    #[test]
    fn the_request_resource_path_checks_and_decisions() {
        let recorder = Arc::new(Recorder::default());
        assert_eq!(
            eval_as(
                &recorder,
                "alice",
                "authorizer.requestResource.check('delete').allowed()"
            ),
            Ok(Value::Bool(false))
        );
        let (_, _, attributes) = recorder.asked.lock().unwrap()[0].clone();
        assert_eq!(
            (
                attributes.resource.as_str(),
                attributes.namespace.as_str(),
                attributes.name.as_str(),
                attributes.verb.as_str()
            ),
            ("configmaps", "team", "settings", "delete")
        );
        assert_eq!(
            eval_as(
                &recorder,
                "alice",
                "authorizer.path('/healthz').check('get').allowed()"
            ),
            Ok(Value::Bool(true))
        );
        let (_, _, attributes) = recorder.asked.lock().unwrap()[1].clone();
        assert!(!attributes.is_resource_request && attributes.path == "/healthz");
        for (source, expected) in [
            (
                "authorizer.path('/x').check('explode').errored()",
                Value::Bool(true),
            ),
            (
                "authorizer.path('/x').check('explode').error()",
                Value::from("webhook unreachable"),
            ),
            ("authorizer.path('/x').check('get').errored()", Value::Bool(false)),
            ("authorizer.path('/x').check('get').error()", Value::from("")),
            ("authorizer.path('/x').check('get').reason()", Value::from("")),
        ] {
            assert_eq!(eval_as(&recorder, "alice", source), Ok(expected), "{source}");
        }
    }

    #[test]
    fn service_accounts_are_checked_as_their_user() {
        let recorder = Arc::new(Recorder::default());
        assert_eq!(
            eval_as(
                &recorder,
                "alice",
                "authorizer.serviceAccount('team', 'builder').group('apps').resource('deployments').namespace('team').check('update').allowed()"
            ),
            Ok(Value::Bool(false))
        );
        let (user, groups, _) = recorder.asked.lock().unwrap()[0].clone();
        assert_eq!(user, "system:serviceaccount:team:builder");
        assert_eq!(groups, ["system:serviceaccounts", "system:serviceaccounts:team"]);
        for (source, error) in [
            (
                "authorizer.serviceAccount('team', 'Not_Valid').group('').resource('pods').check('get').allowed()",
                "Invalid service account name",
            ),
            (
                "authorizer.serviceAccount('team.x', 'builder').group('').resource('pods').check('get').allowed()",
                "Invalid service account namespace",
            ),
            (
                "authorizer.group('apps').resource(' ').check('get').allowed()",
                "resource must not be empty",
            ),
            (
                "authorizer.path('').check('get').allowed()",
                "path must not be empty",
            ),
        ] {
            assert_eq!(
                eval_as(&recorder, "alice", source),
                Err(error.to_owned()),
                "{source}"
            );
        }
        assert!(
            eval_as(&recorder, "alice", "authorizer.check('get')").is_err(),
            "an Authorizer has no check"
        );
    }

    #[test]
    fn a_check_costs_upstreams_fixed_cost() {
        let one = compile("authorizer.path('/a').check('get').allowed()", &["authorizer"]).unwrap();
        assert_eq!(one.authorization_checks, 1);
        assert!(one.cost(10) > CHECK_COST && one.cost(10) < 2 * CHECK_COST);
        let two = compile(
            "authorizer.path('/a').check('get').allowed() || authorizer.requestResource.check('get').allowed()",
            &["authorizer"],
        )
        .unwrap();
        assert!(two.cost(10) <= super::super::cost::PER_CALL_LIMIT, "two fit");
        let three = compile(
            "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()",
            &["authorizer"],
        )
        .unwrap();
        assert!(
            three.cost(10) > super::super::cost::PER_CALL_LIMIT,
            "three do not"
        );
    }

    #[test]
    fn the_servers_authorizer_decides_as_for_a_request() {
        let authorizer: Arc<dyn AccessCheck> =
            Arc::new(crate::chain::authorization::Authorizer::from_flag("AlwaysDeny").unwrap());
        let attributes = RequestInfo {
            is_resource_request: true,
            verb: "get".to_owned(),
            resource: "pods".to_owned(),
            ..RequestInfo::default()
        };
        assert_eq!(
            authorizer.check(&UserInfo::new("jane"), &attributes),
            Verdict {
                allowed: false,
                reason: "Everything is forbidden.".to_owned(),
                error: None,
            }
        );
        let mut admin = UserInfo::new("admin");
        admin.groups = vec!["system:masters".to_owned()];
        assert!(authorizer.check(&admin, &attributes).allowed);
    }

    #[test]
    fn misused_methods_are_compile_errors_as_cel_go_checks_them() {
        let error = |source: &str| compile(source, &["authorizer", "object"]).unwrap_err().issues;
        assert_eq!(
            error("authorizer.check('get').allowed()"),
            "ERROR: <input>:1:17: found no matching overload for 'check' applied to 'kubernetes.authorization.Authorizer.(string)'\n | authorizer.check('get').allowed()\n | ................^"
        );
        assert!(
            error("authorizer.group(1).resource('pods').check('get').allowed()").starts_with(
                "ERROR: <input>:1:17: found no matching overload for 'group' applied to 'kubernetes.authorization.Authorizer.(int)'"
            )
        );
        assert!(error("authorizer.group('').check('get').allowed()").contains(
            "found no matching overload for 'check' applied to 'kubernetes.authorization.GroupCheck.(string)'"
        ));
        assert!(
            error("authorizer.requestResource.check('get', 'x').allowed()").contains(
                "found no matching overload for 'check' applied to 'kubernetes.authorization.ResourceCheck.(string, string)'"
            )
        );
        for fine in [
            "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('get').allowed()",
            "authorizer.serviceAccount('ns', 'sa').path('/healthz').check('get').reason() == ''",
            "authorizer.requestResource.subresource('status').fieldSelector('a=b').labelSelector('c').check('get').errored()",
            "object.check('x')",
        ] {
            assert!(compile(fine, &["authorizer", "object"]).is_ok(), "{fine}");
        }
        assert!(
            compile("self.check('x')", &["self"]).is_ok(),
            "not checked where there is no authorizer"
        );
    }
}
