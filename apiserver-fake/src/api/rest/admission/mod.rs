//! Dynamic admission: the `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/{mutating,validating}`), over the
//! `admissionregistration.k8s.io/v1` configurations in the store.
//!
//! The write handlers call two seams, where upstream's handlers call admission:
//! [`mutate`] after decoding and defaulting, before the strategy validates (create, update, patch, and
//! delete without an object), and [`validate`] after validation, right before the store write. The
//! connect handler (`pods/exec`, `attach`, `portforward`, the `proxy` subresources) calls both with
//! the operation `CONNECT` before it connects, as upstream's `ConnectResource`. The
//! built-in admission the fake has (`NamespaceLifecycle`, `super::lifecycle`) runs first, as in
//! upstream's plugin order.
//!
//! Configurations are read from the store on every write (upstream reads an informer's cache): every
//! server of a cluster shares the store, so every server knows every configuration at once. Webhooks are
//! called in configuration-name order, then in their order in the configuration; validating webhooks in
//! parallel (the first failure in that order is reported). A webhook's `matchConditions` are evaluated
//! once its rules and selectors match (`match_conditions`).

pub(crate) mod match_conditions;
pub(crate) mod matching;
pub mod review;
pub(crate) mod versioned;
pub(crate) mod webhook;

use std::collections::BTreeSet;

use futures_util::future::join_all;
use serde_json::{Value, json};

use self::matching::{FailurePolicy, Invocation, Webhook};
use self::review::{AdmissionResponse, ResponseError, ReviewVersion, WebhookStatus};
use self::versioned::{ObjectConvertor, Versioned};
use self::webhook::CallError;
use super::RestRequest;
use crate::api::status::{Status, StatusDetails, StatusReason};
use crate::store::{ObjectKey, StorageResource};

pub(crate) use self::webhook::ServiceAddresses;

/// The audit annotations admission adds to the request's audit event (the webhooks' own, as
/// `<webhook name>/<key>`, the mutating dispatcher's, the policies'), carried to the audit log as a
/// response extension, on success and on denial alike. The second set names the keys an event carries
/// only at level `Request` or above (upstream's `AddAnnotationWithLevel`: a webhook's patch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditAnnotations(
    pub std::collections::BTreeMap<String, String>,
    pub BTreeSet<String>,
);

impl AuditAnnotations {
    /// `AddAnnotation`/`AddAnnotationWithLevel`: `key` set to `value` unless it already has one (the
    /// first value is kept); `request_level`: only in events of level `Request` or above.
    pub fn add(&mut self, key: String, value: String, request_level: bool) {
        if self.0.contains_key(&key) {
            return;
        }
        if request_level {
            self.1.insert(key.clone());
        }
        self.0.insert(key, value);
    }

    /// Adds `other`'s annotations, with their levels.
    fn merge(&mut self, other: AuditAnnotations) {
        for (key, value) in other.0 {
            let request_level = other.1.contains(&key);
            self.add(key, value, request_level);
        }
    }

    /// The annotations of an event of level `Request` or above (`request_or_more`), or of level
    /// `Metadata`.
    pub fn at_level(&self, request_or_more: bool) -> std::collections::BTreeMap<String, String> {
        self.0
            .iter()
            .filter(|(key, _)| request_or_more || !self.1.contains(*key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }
}

/// Records `response`'s audit annotations under `hook`'s name (upstream's `AddAnnotation`, first value
/// kept).
fn annotate(req: &RestRequest<'_>, hook: &Webhook, response: &AdmissionResponse) {
    if response.audit_annotations.is_empty() {
        return;
    }
    let mut annotations = req
        .audit_annotations
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (key, value) in &response.audit_annotations {
        annotations.add(format!("{}/{key}", hook.name), value.clone(), false);
    }
}

/// `failed-open.<dispatcher>.webhook.admission.k8s.io/round_0_index_<i>`: the webhook (the `i`th of
/// those invoked) whose failed call `failurePolicy: Ignore` let through.
fn record_failed_open(req: &RestRequest<'_>, dispatcher: &str, index: usize, hook: &Webhook) {
    req.audit_annotations
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .add(
            format!("failed-open.{dispatcher}.webhook.admission.k8s.io/round_0_index_{index}"),
            hook.name.clone(),
            false,
        );
}

/// The mutating dispatcher's annotations of one call (`webhookAnnotator`):
/// `mutation.webhook.admission.k8s.io/round_<r>_index_<i>` for every call (`mutated` whether the
/// patch changed the object), `patch.webhook.admission.k8s.io/round_<r>_index_<i>` (level `Request`)
/// for an applied patch, and `failed-open.mutation.webhook.admission.k8s.io/…` for a failure
/// `failurePolicy: Ignore` let through. `i` is the webhook's index among all mutating webhooks.
fn mutation_annotations(call: &MutatingCall<'_>, mutation: Option<&Mutation>) -> AuditAnnotations {
    let (configuration, webhook) = (&call.configured.configuration, &call.configured.hook.name);
    let at = format!("round_{}_index_{}", call.round, call.index);
    let mutated = matches!(mutation, Some(Mutation::Patched { changed: true, .. }));
    let mut annotations = AuditAnnotations::default();
    annotations.add(
        format!("mutation.webhook.admission.k8s.io/{at}"),
        json!({"configuration": configuration, "webhook": webhook, "mutated": mutated}).to_string(),
        false,
    );
    match mutation {
        Some(Mutation::Patched { patch, .. }) => {
            let value = json!({"configuration": configuration, "webhook": webhook,
                "patch": go_patch_order(patch), "patchType": "JSONPatch"});
            annotations.add(
                format!("patch.webhook.admission.k8s.io/{at}"),
                go_json(&value),
                true,
            );
        }
        Some(Mutation::FailedOpen) => {
            annotations.add(
                format!("failed-open.mutation.webhook.admission.k8s.io/{at}"),
                webhook.clone(),
                false,
            );
        }
        Some(Mutation::Unchanged) | None => {}
    }
    annotations
}

/// A decoded JSONPatch as Go marshals evanphx's `Patch` (operations are maps: their keys sorted; the
/// values are raw JSON, kept as the webhook wrote them).
fn go_patch_order(patch: &Value) -> Value {
    match patch {
        Value::Array(operations) => Value::Array(
            operations
                .iter()
                .map(|operation| match operation {
                    Value::Object(map) => {
                        let mut sorted: Vec<_> = map.iter().collect();
                        sorted.sort_by(|a, b| a.0.cmp(b.0));
                        Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    }
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `value` as Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped (they can only
/// occur inside strings, so replacing them in the text is exact).
fn go_json(value: &Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The admission operation of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE` (also patches, and status writes).
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT`: `pods/exec`, `attach`, `portforward` and the `proxy` subresources, whose object is
    /// the request's options (`PodExecOptions`, ...) and which have no old object nor options
    /// (`super::subresource::admit_connect`).
    Connect,
}

/// `admission.Attributes`: what a webhook is told about the request.
#[derive(Debug, Clone)]
pub struct Attributes {
    /// The operation.
    pub operation: Operation,
    /// The request's group.
    pub group: String,
    /// The request's version.
    pub version: String,
    /// The request's resource.
    pub resource: String,
    /// The subresource (`status`), empty for the main resource.
    pub subresource: String,
    /// The kind of the objects.
    pub kind: String,
    /// The `apiVersion` of that kind when it is not the resource's (`autoscaling/v1` for a `Scale`).
    pub kind_api_version: Option<String>,
    /// The namespace, empty for cluster-scoped resources.
    pub namespace: String,
    /// The object's name (empty on a create with `generateName`).
    pub name: String,
    /// The new object (none on delete).
    pub object: Option<Value>,
    /// The stored object (none on create).
    pub old_object: Option<Value>,
    /// Whether this is a dry run.
    pub dry_run: bool,
    /// `CreateOptions`/`UpdateOptions`/`PatchOptions`/`DeleteOptions`.
    pub options: Value,
    /// The requesting user.
    pub user: mvp_core::UserInfo,
}

impl Attributes {
    /// The attributes of `req` for `operation` on `object`/`old_object`, with the options kind
    /// (`CreateOptions`, ...) its query carries.
    pub fn of(
        req: &RestRequest<'_>,
        operation: Operation,
        object: Option<&Value>,
        old_object: Option<&Value>,
        options_kind: &str,
    ) -> Self {
        let dry_run = req.query.dry_run().unwrap_or(false);
        let name = match (object, old_object) {
            (_, Some(old)) => super::object::meta_str(old, "name").to_owned(),
            (Some(new), None) => super::object::meta_str(new, "name").to_owned(),
            (None, None) => req.info.name.clone(),
        };
        Self {
            operation,
            group: req.resource.group.clone(),
            version: req.resource.version.clone(),
            resource: req.resource.resource.clone(),
            subresource: req.info.subresource.clone(),
            kind: req.resource.kind.clone(),
            kind_api_version: None,
            namespace: req.namespace.clone().unwrap_or_default(),
            name,
            object: object.cloned(),
            old_object: old_object.cloned(),
            dry_run,
            options: options(req, options_kind, dry_run),
            user: req.user.clone(),
        }
    }

    /// The group and version of the objects' kind when the resource is requested in `version`.
    pub fn kind_group_version(&self, version: &str) -> (String, String) {
        match self.kind_api_version.as_deref().map(|v| v.split_once('/')) {
            Some(Some((group, version))) => (group.to_owned(), version.to_owned()),
            Some(None) => (String::new(), self.kind_api_version.clone().unwrap_or_default()),
            None => (self.group.clone(), version.to_owned()),
        }
    }

    /// The `apiVersion` of the objects when the resource is requested in `version`.
    pub fn kind_api_version(&self, version: &str) -> String {
        let (group, version) = self.kind_group_version(version);
        super::ResourceInfo::api_version_of(&group, &version)
    }
}

/// The options object of the request, as upstream sends it (`meta.k8s.io/v1`).
fn options(req: &RestRequest<'_>, kind: &str, dry_run: bool) -> Value {
    let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if kind == "DeleteOptions" {
        if let Some(policy) = req.query.get("propagationPolicy") {
            options["propagationPolicy"] = json!(policy);
        }
        return options;
    }
    if kind == "PatchOptions" && req.query.get("force") == Some("true") {
        options["force"] = json!(true);
    }
    for (field, query) in [
        ("fieldManager", "fieldManager"),
        ("fieldValidation", "fieldValidation"),
    ] {
        if let Some(value) = req.query.get(query) {
            options[field] = json!(value);
        }
    }
    options
}

/// What admission adds to a response that goes through.
#[derive(Debug, Default)]
pub struct Admitted {
    /// `Warning` header texts from the webhooks.
    pub warnings: Vec<String>,
}

/// A webhook with the name of its configuration (the mutating dispatcher's audit annotations name
/// both).
struct Configured {
    configuration: String,
    hook: Webhook,
}

/// The webhooks of the configurations of `resource`, in upstream's order.
async fn webhooks(req: &RestRequest<'_>, resource: &str) -> Vec<Configured> {
    let storage = StorageResource::new("admissionregistration.k8s.io", resource);
    let Ok((mut configurations, _)) = req.ctx.store.list(&storage, None).await else {
        return Vec::new();
    };
    configurations.sort_by(|a, b| super::object::meta_str(a, "name").cmp(super::object::meta_str(b, "name")));
    configurations
        .iter()
        .flat_map(|configuration| {
            let name = super::object::meta_str(configuration, "name").to_owned();
            matching::webhooks_of(configuration)
                .into_iter()
                .map(move |hook| Configured {
                    configuration: name.clone(),
                    hook,
                })
        })
        .collect()
}

/// The versions the server serves the request's group/resource in (for `matchPolicy: Equivalent`).
fn equivalents(req: &RestRequest<'_>) -> Vec<String> {
    req.ctx
        .catalog
        .versions_of(&req.resource.group, &req.resource.resource)
}

/// The request namespace's object when some webhook selects namespaces.
async fn namespace_object(
    req: &RestRequest<'_>,
    hooks: &[Configured],
    attributes: &Attributes,
) -> Option<Value> {
    if attributes.namespace.is_empty() || !hooks.iter().any(|c| matching::needs_namespace(&c.hook)) {
        return None;
    }
    req.ctx
        .store
        .get(
            &super::lifecycle::namespaces(),
            &ObjectKey::cluster(&attributes.namespace),
        )
        .await
        .ok()
}

/// The end of `ShouldCallHook`: whether `hook`'s `matchConditions` let it be called, evaluated on
/// `view` (the request's attributes with the objects at the invocation's version); upstream's 403
/// when they failed under `failurePolicy: Fail`.
fn conditions_match(
    req: &RestRequest<'_>,
    hook: &Webhook,
    view: &Attributes,
    invocation: &Invocation,
) -> Result<bool, Status> {
    if hook.match_conditions.is_empty() {
        return Ok(true);
    }
    // What the webhook would be sent, as the conditions' variables.
    let review = review::request(ReviewVersion::V1, "", view, invocation);
    let bound = |name: &str| crate::cel::value::to_cel(&review["request"][name]);
    let [authorizer, request_resource] = match_conditions::authorizer_variables(&req.ctx.authorizer, view);
    let variables = [
        ("object", bound("object")),
        ("oldObject", bound("oldObject")),
        ("request", crate::cel::value::to_cel(&review["request"])),
        authorizer,
        request_resource,
    ];
    let fail = hook.failure_policy == FailurePolicy::Fail;
    match match_conditions::evaluate(&hook.match_conditions, &variables, fail) {
        match_conditions::MatchResult::Matches => Ok(true),
        match_conditions::MatchResult::Skipped => Ok(false),
        match_conditions::MatchResult::Error(error) => {
            tracing::warn!(webhook = %hook.name, %error, "failed evaluating match conditions, failing closed");
            let resource = crate::store::GroupResource {
                group: view.group.clone(),
                resource: view.resource.clone(),
            };
            Err(Status::forbidden(&resource, &view.name, &error))
        }
    }
}

/// How one call ended.
enum Outcome {
    /// The webhook answered (allowed or not).
    Answered(AdmissionResponse),
    /// The call failed (`ErrCallingWebhook`): subject to `failurePolicy`.
    Failed(String),
    /// An error that fails the request whatever the policy (dry run refused).
    Refused(Status),
}

/// Calls `hook` for `view` (the attributes with the objects at the invocation's version) as
/// `invocation` (`callAttrMutatingHook`/`callHook`).
async fn call(
    req: &RestRequest<'_>,
    hook: &Webhook,
    view: &Attributes,
    invocation: &Invocation,
    mutating: bool,
) -> Outcome {
    if view.dry_run && !matching::callable_on_dry_run(hook) {
        return match hook.side_effects {
            None => Outcome::Failed("Webhook SideEffects is nil".to_owned()),
            Some(_) => Outcome::Refused(Status::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name
            ))),
        };
    }
    let Some(version) = ReviewVersion::choose(&hook.admission_review_versions) else {
        return Outcome::Failed(
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"
                .to_owned(),
        );
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let body = review::request(version, &uid, view, invocation);
    let Ok(body) = serde_json::to_vec(&body) else {
        return Outcome::Failed("could not create admission objects".to_owned());
    };
    let answer = webhook::post(
        hook,
        body,
        req.ctx.store.as_ref(),
        &req.ctx.webhook_service_addresses,
    )
    .await;
    let bytes = match answer {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::info!(webhook = %hook.name, %error, "failed calling webhook");
            return Outcome::Failed(error.to_string());
        }
    };
    match review::parse_response(&bytes, version, &uid, mutating) {
        Ok(response) => Outcome::Answered(response),
        Err(ResponseError::Undecodable(error)) => Outcome::Failed(CallError::Response(error).to_string()),
        Err(ResponseError::Invalid(error)) => {
            Outcome::Failed(format!("received invalid webhook response: {error}"))
        }
    }
}

/// `webhookerrors.ToStatusErr`: the webhook's own Status with upstream's message; a Status without a
/// code is answered 500, as upstream's response writer answers a `Failure` without one.
fn denial(hook: &Webhook, result: Option<&WebhookStatus>) -> Status {
    let denied_by = format!("admission webhook {:?} denied the request", hook.name);
    let result = result.cloned().unwrap_or_default();
    let message = if !result.message.is_empty() {
        format!("{denied_by}: {}", result.message)
    } else if !result.reason.is_empty() {
        format!("{denied_by}: {}", result.reason)
    } else {
        format!("{denied_by} without explanation")
    };
    let code = u16::try_from(result.code)
        .ok()
        .filter(|c| (100..=599).contains(c))
        .unwrap_or(500);
    let reason = serde_json::from_value::<StatusReason>(json!(result.reason)).unwrap_or_default();
    let mut status = Status::failure(code, reason, message);
    status.details = result
        .details
        .and_then(|d| serde_json::from_value::<StatusDetails>(d).ok())
        .map(Box::new);
    status
}

/// A failed call under `failurePolicy: Fail`: upstream's `Internal error occurred: failed calling
/// webhook "<name>": <reason>`.
fn calling_error(hook: &Webhook, reason: &str) -> Status {
    Status::internal_error(&format!("failed calling webhook {:?}: {reason}", hook.name))
}

/// The mutating dispatcher's objects at a webhook's version (`versionedAttributeAccessor`): converted
/// on the first webhook invoked, then from version to version; a conversion that fails is upstream's
/// internal error wrapped twice (the accessor's, then the dispatcher's).
async fn versioned_at<'v>(
    versioned: &'v mut Option<Versioned>,
    convertor: &mut ObjectConvertor,
    attributes: &mut Attributes,
    version: &str,
) -> Result<&'v mut Versioned, Status> {
    let converted = match versioned.take() {
        None => Versioned::new(convertor, attributes, version).await,
        Some(mut current) => current
            .convert_to(convertor, attributes, version)
            .await
            .map(|()| current),
    };
    let converted =
        converted.map_err(|error| Status::internal_error(&format!("Internal error occurred: {error}")))?;
    Ok(versioned.insert(converted))
}

/// The mutating phase for `attributes`: every matching mutating webhook in order, its JSONPatch applied
/// to the object at the webhook's version, then one reinvocation round of the `reinvocationPolicy:
/// IfNeeded` webhooks invoked before a later webhook changed the object. Each round ends with the
/// object converted back to the request's version. The caller re-defaults and validates the result.
pub async fn mutate(req: &RestRequest<'_>, attributes: &mut Attributes) -> Result<Admitted, Status> {
    let mut admitted = Admitted::default();
    if matching::is_exempt(attributes) {
        return Ok(admitted);
    }
    let hooks = webhooks(req, "mutatingwebhookconfigurations").await;
    if hooks.is_empty() {
        return Ok(admitted);
    }
    let namespace = namespace_object(req, &hooks, attributes).await;
    let equivalents = equivalents(req);
    let mut convertor = ObjectConvertor::new(req, attributes);
    let mut invoked_reinvocable = BTreeSet::new();
    let mut reinvoke = BTreeSet::new();
    for round in 0..2 {
        if round == 1 && reinvoke.is_empty() {
            break;
        }
        let mut versioned: Option<Versioned> = None;
        for (index, configured) in hooks.iter().enumerate() {
            let hook = &configured.hook;
            if round == 1 && !reinvoke.contains(&index) {
                continue;
            }
            // Selectors see the objects as the last webhook left them (`attrForCheck`).
            let check = versioned.as_ref().map(|v| v.view(attributes));
            let check = check.as_ref().unwrap_or(attributes);
            let Some(invocation) = matching::should_call(hook, check, namespace.as_ref(), &equivalents)
            else {
                continue;
            };
            let at = versioned_at(&mut versioned, &mut convertor, attributes, &invocation.version).await?;
            if !conditions_match(req, hook, &at.view(attributes), &invocation)? {
                continue;
            }
            let call = MutatingCall {
                configured,
                round,
                index,
                invocation: &invocation,
            };
            let changed = call_mutating(req, &call, attributes, at, &mut admitted).await?;
            if round == 0 {
                if changed {
                    reinvoke.extend(invoked_reinvocable.iter().copied());
                }
                if hook.reinvoke_if_needed {
                    invoked_reinvocable.insert(index);
                }
            }
        }
        // Back to the request's version; upstream returns the converter's error as it is (a 500
        // without a reason).
        if let Some(versioned) = versioned.as_mut() {
            versioned
                .write_back(&mut convertor, attributes)
                .await
                .map_err(|error| Status::failure(500, StatusReason::Unknown, error))?;
        }
    }
    Ok(admitted)
}

/// One invocation of a mutating webhook: which, where in the dispatch (for its audit annotations),
/// at which version.
struct MutatingCall<'c> {
    configured: &'c Configured,
    round: usize,
    index: usize,
    invocation: &'c Invocation,
}

/// What a mutating webhook's call did to the object.
enum Mutation {
    /// Nothing: no patch, an empty one, or the webhook allowed without one.
    Unchanged,
    /// The call failed and `failurePolicy: Ignore` let the request go on.
    FailedOpen,
    /// Its JSONPatch (decoded) was applied; whether the object changed.
    Patched { patch: Value, changed: bool },
}

/// One mutating webhook call on `versioned` (the objects at its version), recorded in the audit
/// annotations as upstream's `webhookAnnotator` does; whether its patch changed the object.
async fn call_mutating(
    req: &RestRequest<'_>,
    call: &MutatingCall<'_>,
    attributes: &Attributes,
    versioned: &mut Versioned,
    admitted: &mut Admitted,
) -> Result<bool, Status> {
    let mutation = mutate_with(
        req,
        &call.configured.hook,
        attributes,
        versioned,
        call.invocation,
        admitted,
    )
    .await;
    let annotations = mutation_annotations(call, mutation.as_ref().ok());
    req.audit_annotations
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .merge(annotations);
    Ok(matches!(mutation?, Mutation::Patched { changed: true, .. }))
}

/// `callAttrMutatingHook`: calls `hook` and applies its patch to `versioned.object`.
async fn mutate_with(
    req: &RestRequest<'_>,
    hook: &Webhook,
    attributes: &Attributes,
    versioned: &mut Versioned,
    invocation: &Invocation,
    admitted: &mut Admitted,
) -> Result<Mutation, Status> {
    let ignore = hook.failure_policy == FailurePolicy::Ignore;
    let response = match call(req, hook, &versioned.view(attributes), invocation, true).await {
        Outcome::Answered(response) => response,
        Outcome::Refused(status) => return Err(status),
        Outcome::Failed(_) if ignore => return Ok(Mutation::FailedOpen),
        Outcome::Failed(reason) => return Err(calling_error(hook, &reason)),
    };
    admitted.warnings.extend(response.warnings.iter().cloned());
    annotate(req, hook, &response);
    if !response.allowed {
        return Err(denial(hook, response.result.as_ref()));
    }
    let Some(patch) = &response.patch else {
        return Ok(Mutation::Unchanged);
    };
    // Upstream's order: decode the patch, skip an empty one, refuse one for a request without an
    // object, check the patch type, apply.
    let applied = apply_json_patch(versioned.object.as_ref().unwrap_or(&Value::Null), patch);
    match &applied {
        Ok(None) => return Ok(Mutation::Unchanged),
        Err(PatchFailure::Undecodable(_)) if ignore => return Ok(Mutation::FailedOpen),
        Err(PatchFailure::Undecodable(reason)) => return Err(calling_error(hook, reason)),
        _ => {}
    }
    let (api_version, kind) = (
        attributes.kind_api_version(&versioned.version),
        attributes.kind.clone(),
    );
    let Some(object) = versioned.object.as_mut() else {
        return Err(Status::internal_error(&format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    };
    if let Some(patch_type) = &response.unsupported_patch_type {
        return match ignore {
            true => Ok(Mutation::FailedOpen),
            false => Err(calling_error(
                hook,
                &format!("unsupported patch type {patch_type:?}"),
            )),
        };
    }
    let patched = match applied {
        Ok(Some(patched)) => patched,
        // A patch that does not apply is not a failure to call the webhook: it fails the request
        // whatever the policy.
        Err(PatchFailure::NotApplicable(reason)) => return Err(Status::internal_error(&reason)),
        Ok(None) | Err(PatchFailure::Undecodable(_)) => return Ok(Mutation::Unchanged),
    };
    // The patched object is of the webhook's version; the dispatcher converts it back.
    let patched = super::object::present(patched, &api_version, &kind);
    let changed = patched != *object;
    *object = patched;
    versioned.dirty = true;
    let patch = serde_json::from_slice(patch).unwrap_or(Value::Null);
    Ok(Mutation::Patched { patch, changed })
}

/// The validating phase: every matching validating webhook, in parallel, each sent the objects at its
/// version; the first denial or failure (in webhook order) fails the request.
pub async fn validate(req: &RestRequest<'_>, attributes: &Attributes) -> Result<Admitted, Status> {
    let mut admitted = Admitted::default();
    if matching::is_exempt(attributes) {
        return Ok(admitted);
    }
    let hooks = webhooks(req, "validatingwebhookconfigurations").await;
    if hooks.is_empty() {
        return Ok(admitted);
    }
    let namespace = namespace_object(req, &hooks, attributes).await;
    let equivalents = equivalents(req);
    let mut convertor = ObjectConvertor::new(req, attributes);
    // One conversion per version, for every webhook invoked with it (`versionedAttrs`).
    let mut versions: Vec<Versioned> = Vec::new();
    let mut invocations = Vec::new();
    for Configured { hook, .. } in &hooks {
        let Some(invocation) = matching::should_call(hook, attributes, namespace.as_ref(), &equivalents)
        else {
            continue;
        };
        let view = match versions.iter().find(|v| v.version == invocation.version) {
            Some(versioned) => versioned.view(attributes),
            None => {
                let versioned = Versioned::new(&mut convertor, attributes, &invocation.version)
                    .await
                    .map_err(|error| Status::internal_error(&error))?;
                let view = versioned.view(attributes);
                versions.push(versioned);
                view
            }
        };
        if conditions_match(req, hook, &view, &invocation)? {
            invocations.push((hook, invocation, view));
        }
    }
    let calls = invocations.iter().map(|(hook, invocation, view)| async move {
        (*hook, call(req, hook, view, invocation, false).await)
    });
    let mut first_error = None;
    for (index, (hook, outcome)) in join_all(calls).await.into_iter().enumerate() {
        let error = match outcome {
            Outcome::Answered(response) => {
                admitted.warnings.extend(response.warnings.iter().cloned());
                annotate(req, hook, &response);
                (!response.allowed).then(|| denial(hook, response.result.as_ref()))
            }
            Outcome::Refused(status) => Some(status),
            Outcome::Failed(_) if hook.failure_policy == FailurePolicy::Ignore => {
                record_failed_open(req, "validating", index, hook);
                None
            }
            Outcome::Failed(reason) => Some(calling_error(hook, &reason)),
        };
        if first_error.is_none() {
            first_error = error;
        }
    }
    match first_error {
        Some(status) => Err(status),
        None => Ok(admitted),
    }
}

/// Why a webhook's JSONPatch was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchFailure {
    /// It is not a JSON patch (upstream: a failure to call the webhook, under its failure policy).
    Undecodable(String),
    /// It does not apply to the object, or leaves no object (upstream: an internal error, whatever the
    /// failure policy).
    NotApplicable(String),
}

/// Applies a webhook's JSONPatch (`response.patch`, decoded) to `object`: `None` when the patch is empty.
/// Never panics, whatever the bytes (fuzzed with the response parser).
pub fn apply_json_patch(object: &Value, patch: &[u8]) -> Result<Option<Value>, PatchFailure> {
    let patch: json_patch::Patch = serde_json::from_slice(patch).map_err(|e| {
        PatchFailure::Undecodable(format!("received undecodable patch in webhook response: {e}"))
    })?;
    if patch.0.is_empty() {
        return Ok(None);
    }
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch)
        .map_err(|e| PatchFailure::NotApplicable(patch_error_text(&patch, &e)))?;
    if !patched.is_object() {
        return Err(PatchFailure::NotApplicable(
            "the patched object is not a JSON object".to_owned(),
        ));
    }
    Ok(Some(patched))
}

/// evanphx/json-patch's (v4) wording of a patch that does not apply, which upstream returns.
pub fn patch_error_text(patch: &json_patch::Patch, error: &json_patch::PatchError) -> String {
    use json_patch::{PatchErrorKind, PatchOperation};
    let path = error.path.to_string();
    let Some(operation) = patch.0.get(error.operation) else {
        return error.to_string();
    };
    match (operation, &error.kind) {
        (PatchOperation::Test(test), PatchErrorKind::TestFailed) => {
            format!("testing value {} failed: test failed", test.path)
        }
        (PatchOperation::Add(_), _) => {
            format!("add operation does not apply: doc is missing path: {path:?}: missing value")
        }
        (PatchOperation::Remove(_), _) => {
            format!("remove operation does not apply: doc is missing path: {path:?}: missing value")
        }
        (PatchOperation::Replace(_), _) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        (PatchOperation::Move(op), _) => {
            format!(
                "move operation does not apply: doc is missing from path: {:?}: missing value",
                op.from.to_string()
            )
        }
        (PatchOperation::Copy(op), _) => {
            format!(
                "copy operation does not apply: doc is missing from path: {:?}: missing value",
                op.from.to_string()
            )
        }
        (PatchOperation::Test(test), _) => {
            format!(
                "test operation does not apply: doc is missing path: {:?}: missing value",
                test.path.to_string()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn patches_apply_or_fail_with_evanphx_texts() {
        let object = json!({"metadata": {"name": "c"}, "data": {"k": "v"}});
        let add = br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#;
        assert_eq!(
            apply_json_patch(&object, add),
            Ok(Some(
                json!({"metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"k": "v"}})
            ))
        );
        assert_eq!(apply_json_patch(&object, b"[]"), Ok(None));
        let cases: [(&[u8], PatchFailure); 4] = [
            (
                br#"[{"op":"remove","path":"/spec/x"}]"#,
                PatchFailure::NotApplicable(
                    "remove operation does not apply: doc is missing path: \"/spec/x\": missing value"
                        .to_owned(),
                ),
            ),
            (
                br#"[{"op":"replace","path":"/spec","value":1}]"#,
                PatchFailure::NotApplicable(
                    "replace operation does not apply: doc is missing key: /spec: missing value".to_owned(),
                ),
            ),
            (
                br#"[{"op":"test","path":"/data/k","value":"w"}]"#,
                PatchFailure::NotApplicable("testing value /data/k failed: test failed".to_owned()),
            ),
            (
                br#"[{"op":"replace","path":"","value":1}]"#,
                PatchFailure::NotApplicable("the patched object is not a JSON object".to_owned()),
            ),
        ];
        for (patch, expected) in cases {
            assert_eq!(
                apply_json_patch(&object, patch),
                Err(expected),
                "{}",
                String::from_utf8_lossy(patch)
            );
        }
        assert!(matches!(
            apply_json_patch(&object, b"{\"op\":\"add\"}"),
            Err(PatchFailure::Undecodable(reason)) if reason.starts_with("received undecodable patch in webhook response: ")
        ));
    }

    #[test]
    fn mutating_calls_are_annotated_as_upstreams_webhook_annotator_does() {
        let configured = Configured {
            configuration: "defaults".to_owned(),
            hook: matching::webhooks_of(&json!({"webhooks": [{"name": "w.example.com"}]}))
                .pop()
                .expect("webhook"),
        };
        let invocation = Invocation {
            version: "v1".to_owned(),
        };
        let call = MutatingCall {
            configured: &configured,
            round: 1,
            index: 2,
            invocation: &invocation,
        };
        // Go marshals each operation's keys sorted, keeps the values as written, escapes `<>&`.
        let patch = json!([{"value": {"b": 1, "a": "<&>"}, "path": "/x", "op": "add"}]);
        let patched = mutation_annotations(&call, Some(&Mutation::Patched { patch, changed: true }));
        assert_eq!(
            patched.0,
            std::collections::BTreeMap::from([
                (
                    "mutation.webhook.admission.k8s.io/round_1_index_2".to_owned(),
                    r#"{"configuration":"defaults","webhook":"w.example.com","mutated":true}"#.to_owned()
                ),
                (
                    "patch.webhook.admission.k8s.io/round_1_index_2".to_owned(),
                    r#"{"configuration":"defaults","webhook":"w.example.com","patch":[{"op":"add","path":"/x","value":{"b":1,"a":"\u003c\u0026\u003e"}}],"patchType":"JSONPatch"}"#.to_owned()
                ),
            ])
        );
        assert_eq!(
            patched.at_level(false).keys().collect::<Vec<_>>(),
            ["mutation.webhook.admission.k8s.io/round_1_index_2"],
            "the patch only at level Request"
        );
        let failed = mutation_annotations(&call, Some(&Mutation::FailedOpen));
        assert_eq!(
            failed.0["failed-open.mutation.webhook.admission.k8s.io/round_1_index_2"],
            "w.example.com"
        );
        assert_eq!(
            failed.0["mutation.webhook.admission.k8s.io/round_1_index_2"],
            r#"{"configuration":"defaults","webhook":"w.example.com","mutated":false}"#
        );
        assert_eq!(mutation_annotations(&call, None).0.len(), 1, "a refused call too");
    }

    #[test]
    fn denials_carry_the_webhooks_status_behind_upstreams_message() {
        let hook = matching::webhooks_of(
            &json!({"metadata": {"name": "c"}, "webhooks": [{"name": "w.example.com"}]}),
        )
        .pop()
        .expect("webhook");
        let forbidden = denial(
            &hook,
            Some(&WebhookStatus {
                code: 403,
                message: "no".to_owned(),
                reason: "Forbidden".to_owned(),
                details: None,
            }),
        );
        assert_eq!(forbidden.code, 403);
        assert_eq!(forbidden.reason, StatusReason::Forbidden);
        assert_eq!(
            forbidden.message,
            "admission webhook \"w.example.com\" denied the request: no"
        );
        let bare = denial(&hook, None);
        assert_eq!(bare.code, 500, "a Failure without a code is answered 500");
        assert_eq!(
            bare.message,
            "admission webhook \"w.example.com\" denied the request without explanation"
        );
        let by_reason = denial(
            &hook,
            Some(&WebhookStatus {
                reason: "NotAllowed".to_owned(),
                ..Default::default()
            }),
        );
        assert_eq!(
            by_reason.message,
            "admission webhook \"w.example.com\" denied the request: NotAllowed"
        );
    }
}
