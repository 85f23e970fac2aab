//! `create` (POST), `update` (PUT) and `patch` (PATCH), including the `status` subresource.
//!
//! As upstream's registries: creates default the object (`PrepareForCreate`), generate names, and are
//! admitted by `NamespaceLifecycle`; updates are conditional on the `resourceVersion` the client sent
//! (none → unconditional); a resource with a `status` subresource ignores `status` in main-resource
//! writes and only takes `status` through the subresource; `metadata.generation` follows the resource's
//! strategy ([`super::generation`]); `dryRun=All` runs everything but the write.
//! An update or patch that removes the last finalizer of an object being deleted completes the delete.

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::Value;

use super::admission::{self, Attributes, Operation};
use super::defaults::{self, service_ip};
use super::field_validation::{self, FieldValidation};
use super::generation;
use super::lifecycle::{admit_create, prepare_for_create};
use super::managed_fields;
use super::negotiation::{content_type, decode_body, input_media_type};
use super::object::{
    check_type_meta, check_update_name, generate_name, meta_str, metadata_mut, reconcile_create_namespace,
};
use super::patch::{self, PatchType};
use super::read::render_object;
use super::structural;
use super::validation;
use super::{RestRequest, read_body};
use crate::api::status::{Status, StatusCause};
use crate::store::{ObjectKey, StoreError, resource_version};

/// How often a generated name is retried when it collides (upstream retries too).
const GENERATE_NAME_ATTEMPTS: usize = 8;
/// How often a patch is re-applied after losing an optimistic-concurrency race (GuaranteedUpdate).
const PATCH_ATTEMPTS: usize = 5;

fn now() -> String {
    crate::store::now_timestamp()
}

/// Where a body being checked came from (upstream words its errors differently for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodySource<'b> {
    /// A create or update body, with its raw bytes when it was JSON (duplicate fields are found there).
    Object(Option<&'b [u8]>),
    /// The result of a JSON, merge or strategic merge patch.
    Patched,
}

/// Field validation of a built-in object about to be written ([`field_validation`]): unknown fields
/// dropped, wrong types refused, and what the directive says about the unknown and duplicate ones
/// (the `Warning` header values it returns, or the strict decoding error).
fn validate_fields(
    req: &RestRequest<'_>,
    object: &mut Value,
    source: BodySource<'_>,
    options_kind: &str,
) -> Result<Vec<String>, Status> {
    let directive = FieldValidation::from_query(req.query.get("fieldValidation"), options_kind)?;
    if req.resource.custom {
        return validate_custom_fields(req, object, source, directive);
    }
    let definitions = crate::api::openapi::definitions::Definitions::of(req.ctx.binary_version);
    let Some(definition) = definitions.kind(&req.resource.group, &req.resource.version, &req.resource.kind)
    else {
        return Ok(Vec::new());
    };
    let prefix = field_validation::kind_prefix(&req.resource.kind, &req.resource.version);
    let mut findings = field_validation::decode(definitions, definition, object)
        .map_err(|e| Status::bad_request(format!("{prefix}{e}")))?;
    match source {
        BodySource::Object(raw) => {
            if let Some(raw) = raw {
                findings.problems.extend(field_validation::duplicate_fields(raw));
            }
            findings.enforce(directive, &prefix)
        }
        BodySource::Patched => findings.enforce(directive, ""),
    }
}

/// [`validate_fields`] of a custom resource, by its CRD version's structural schema ([`structural`]):
/// duplicate JSON fields, then the unknown fields pruning and metadata coercion dropped, make the strict
/// decoding error or warnings (upstream's `schemaCoercingDecoder`), and the schema's defaults are
/// applied. Without a schema nothing is pruned.
fn validate_custom_fields(
    req: &RestRequest<'_>,
    object: &mut Value,
    source: BodySource<'_>,
    directive: FieldValidation,
) -> Result<Vec<String>, Status> {
    let Some(schema) = req.resource.schema.clone() else {
        return Ok(Vec::new());
    };
    let definitions = crate::api::openapi::definitions::Definitions::of(req.ctx.binary_version);
    let mut findings = field_validation::Findings::default();
    let prefix = match source {
        BodySource::Object(raw) => {
            if let Some(raw) = raw {
                findings.problems.extend(field_validation::duplicate_fields(raw));
            }
            field_validation::kind_prefix(&req.resource.kind, &req.resource.version)
        }
        BodySource::Patched => String::new(),
    };
    findings.problems.extend(
        structural::coerce(definitions, &schema, object)
            .into_iter()
            .map(|path| format!("unknown field \"{path}\"")),
    );
    let warnings = findings.enforce(directive, &prefix)?;
    // The decoder defaults what it decoded; the strategy validates it later ([`validate_rules`]).
    structural::defaulting::apply(&schema, object);
    Ok(warnings)
}

/// Server-side apply converts the applied configuration to the kind's schema before anything else, and
/// a field the kind does not declare fails that conversion whatever `fieldValidation` says (upstream's
/// `failed to create typed patch object (<ns>/<name>; <group>/<version>, Kind=<kind>): .spec.foo: field
/// not declared in schema`, a 500 without reason).
///
/// A custom resource's applied configuration is checked against its CRD version's structural schema
/// (the type converter upstream builds from it): what pruning would drop is not declared.
fn check_applied_fields(req: &RestRequest<'_>, body: &[u8]) -> Result<(), Status> {
    let definitions = crate::api::openapi::definitions::Definitions::of(req.ctx.binary_version);
    let definition = if req.resource.custom {
        None
    } else {
        match definitions.kind(&req.resource.group, &req.resource.version, &req.resource.kind) {
            Some(definition) => Some(definition),
            None => return Ok(()),
        }
    };
    if req.resource.custom && req.resource.schema.is_none() {
        return Ok(());
    }
    // An unparsable body gets the patch's own error later.
    let Ok(mut applied) = super::negotiation::decode_yaml(body) else {
        return Ok(());
    };
    let gvk = format!(
        "{}, Kind={}",
        req.resource.api_version_with_core_slash(),
        req.resource.kind
    );
    let object = format!(
        "{}/{}; {gvk}",
        applied
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        applied
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    let failure = |detail: String| {
        Status::failure(
            500,
            crate::api::status::StatusReason::Unknown,
            format!("failed to create typed patch object ({object}): {detail}"),
        )
    };
    let findings = match (definition, &req.resource.schema) {
        (Some(definition), _) => {
            field_validation::decode(definitions, definition, &mut applied).map_err(failure)?
        }
        (None, Some(schema)) => field_validation::Findings {
            problems: structural::coerce(definitions, schema, &mut applied)
                .into_iter()
                .map(|path| format!("unknown field \"{path}\""))
                .collect(),
        },
        (None, None) => return Ok(()),
    };
    match findings.problems.first() {
        Some(problem) => {
            let path = problem
                .strip_prefix("unknown field \"")
                .and_then(|p| p.strip_suffix('"'))
                .unwrap_or(problem);
            Err(failure(format!(".{path}: field not declared in schema")))
        }
        None => Ok(()),
    }
}

/// Who owns the fields a create sets: the writer (an `Update`), or the applier of a server-side apply that
/// creates the object (an `Apply` of the applied configuration).
#[derive(Debug, Clone, Copy)]
enum Ownership<'a> {
    Update,
    Apply(&'a Value),
}

/// The field manager of this request ([`managed_fields::manager_name`]) and where it writes.
fn field_writer(req: &RestRequest<'_>) -> managed_fields::Writer {
    managed_fields::Writer {
        manager: managed_fields::manager_name(
            req.query.get("fieldManager"),
            req.headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok()),
        ),
        api_version: req.resource.api_version(),
        subresource: req.info.subresource.clone(),
        time: now(),
        has_status: req.resource.has_status(),
    }
}

/// The kind's schema for field sets (schema-less for custom resources).
fn field_schema(req: &RestRequest<'_>) -> managed_fields::Schema {
    managed_fields::Schema::new(
        crate::api::openapi::definitions::Definitions::of(req.ctx.binary_version),
        &req.resource.group,
        &req.resource.version,
        &req.resource.kind,
    )
}

/// The kind's schema for patches (one that knows nothing for custom resources).
pub(super) fn patch_schema(req: &RestRequest<'_>) -> patch::PatchSchema {
    patch::PatchSchema::of_kind(
        crate::api::openapi::definitions::Definitions::of(req.ctx.binary_version),
        &req.resource.group,
        &req.resource.version,
        &req.resource.kind,
    )
}

/// Records an `Update` from `current` (`None`: a create) to `next` in `next`'s managedFields. The entries
/// start from those the client sent, or the stored ones when it sent none (upstream keeps them then).
pub(super) fn record_update(req: &RestRequest<'_>, current: Option<&Value>, next: &mut Value) {
    let entries = if next.pointer("/metadata/managedFields").is_some() {
        managed_fields::read(next)
    } else {
        current.map(managed_fields::read).unwrap_or_default()
    };
    managed_fields::record_update(&field_schema(req), &field_writer(req), entries, current, next);
}

/// Records a server-side apply of the request body that turned `current` (`None`: it creates) into
/// `next`; a change to fields another manager owns is upstream's 409 unless `force=true`.
fn record_apply(
    req: &RestRequest<'_>,
    current: Option<&Value>,
    applied: &Value,
    next: &mut Value,
) -> Result<(), Status> {
    let force = req.query.get("force") == Some("true");
    managed_fields::record_apply(
        &field_schema(req),
        &field_writer(req),
        current,
        applied,
        next,
        force,
    )
    .map_err(|conflicts| {
        let mut status = Status::failure(
            409,
            crate::api::status::StatusReason::Conflict,
            managed_fields::conflict_message(&conflicts),
        );
        status.details = Some(Box::new(crate::api::status::StatusDetails {
            causes: conflicts
                .iter()
                .map(|c| StatusCause {
                    reason: "FieldManagerConflict".to_owned(),
                    message: format!("conflict with {}", c.manager),
                    field: c.field.clone(),
                })
                .collect(),
            ..Default::default()
        }));
        status
    })
}

/// The applied configuration of a server-side apply body (`metadata.managedFields` must be unset).
fn applied_configuration(body: &[u8]) -> Result<Value, Status> {
    let applied = super::negotiation::require_object(super::negotiation::decode_yaml(body)?)?;
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(Status::bad_request("metadata.managedFields must be nil"));
    }
    Ok(applied)
}

/// Built-in validation of an object about to be written: the kind's `ValidateCreate` (`old` `None`)
/// or `ValidateUpdate` rules ([`validation`]), then the required fields and enumerations of its
/// schema ([`field_validation::schema_violations`]) at paths the kind's rules did not already report;
/// upstream's 422 `Invalid` when any fails. Status writes are not checked.
fn validate_schema(req: &RestRequest<'_>, object: &Value, old: Option<&Value>) -> Result<(), Status> {
    if req.resource.custom || !req.info.subresource.is_empty() {
        return Ok(());
    }
    let version = req.ctx.binary_version;
    let mut errors = validation::object_meta::validate(object, old);
    errors.extend(validation::validate(
        &req.resource,
        req.ctx.emulated_version,
        object,
        old,
    ));
    let mut causes = validation::into_causes(&errors, version);
    let definitions = crate::api::openapi::definitions::Definitions::of(version);
    if let Some(definition) = definitions.kind(&req.resource.group, &req.resource.version, &req.resource.kind)
    {
        for cause in field_validation::schema_violations(definitions, definition, object) {
            // Owner references are `ValidateOwnerReferences`'s, at paths without an index.
            let owner_reference = cause.field.starts_with("metadata.ownerReferences");
            if !owner_reference && !causes.iter().any(|c| c.field == cause.field) {
                causes.push(cause);
            }
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = match meta_str(object, "name") {
        "" => meta_str(object, "generateName"),
        name => name,
    };
    Err(Status::invalid(&req.resource.group_kind(), name, causes))
}

/// The strategy's validation of what is written: a custom resource's OpenAPI schema
/// ([`structural::validate`]), then its `x-kubernetes-validations` ([`structural::validation_rules`],
/// with `current`, the stored object, for transition rules) unless the schema errors block them
/// (upstream's `hasBlockingErr`: one more cause says the rules were not checked), both ratcheting what
/// an update left unchanged where `CRDValidationRatcheting` is on ([`RestContext`]'s
/// `crd_validation_ratcheting`); and the rules of a CRD, which must compile. Upstream's 422 `Invalid`
/// when they do not hold; the warnings of ratcheted rules otherwise.
///
/// [`RestContext`]: super::RestContext
pub(super) fn validate_rules(
    req: &RestRequest<'_>,
    current: Option<&Value>,
    object: &Value,
) -> Result<Vec<String>, Status> {
    let is_definition = !req.resource.custom
        && req.resource.group == "apiextensions.k8s.io"
        && req.resource.resource == "customresourcedefinitions"
        && req.info.subresource.is_empty();
    let (causes, warnings) = if is_definition {
        let emulated = req.ctx.emulated_version;
        let causes = structural::validation_rules::check_definition(object, current, emulated);
        (causes, Vec::new())
    } else if let (true, Some(schema)) = (req.resource.custom, &req.resource.schema) {
        // The stored object as upstream reads it: defaulted.
        let mut old = current.cloned();
        if let Some(old) = old.as_mut() {
            req.resource.default_stored(old);
        }
        custom_resource_causes(req, schema, old.as_ref(), object)
    } else {
        return Ok(Vec::new());
    };
    let mut causes = causes;
    if is_definition {
        // Upstream's static cost limits, after the compilation errors.
        causes.extend(structural::rule_cost::check_definition(object, current));
    }
    if causes.is_empty() {
        return Ok(warnings);
    }
    let name = match meta_str(object, "name") {
        "" => meta_str(object, "generateName"),
        name => name,
    };
    Err(Status::invalid(&req.resource.group_kind(), name, causes))
}

/// [`validate_rules`] of a custom resource against its version's `schema`: the causes and the warnings
/// of ratcheted rules.
fn custom_resource_causes(
    req: &RestRequest<'_>,
    schema: &Value,
    old: Option<&Value>,
    object: &Value,
) -> (Vec<StatusCause>, Vec<String>) {
    let version = req.ctx.binary_version;
    let ratcheting = req.ctx.crd_validation_ratcheting;
    let options = structural::schema_validation::Options { version, ratcheting };
    // `ValidateObjectMetaAccessor` first, as the custom resource strategy's `Validate`.
    let mut causes = validation::into_causes(&validation::object_meta::validate(object, old), version);
    causes.extend(structural::validate(schema, object, old, options));
    if !structural::schema_validation::has_validation_rules(schema) {
        return (causes, Vec::new());
    }
    if structural::schema_validation::has_blocking_error(&causes) {
        causes.push(structural::schema_validation::rules_not_checked(version));
        return (causes, Vec::new());
    }
    let outcome = structural::validation_rules::validate(schema, object, old, ratcheting);
    causes.extend(outcome.causes);
    (causes, outcome.warnings)
}

/// The raw body when it is JSON (where duplicate fields can be seen).
fn json_body<'b>(req: &RestRequest<'_>, body: &'b [u8]) -> Option<&'b [u8]> {
    (input_media_type(&req.headers).as_deref() == Some("application/json")).then_some(body)
}

/// Adds upstream's `Warning: 299 - "<text>"` headers.
pub(crate) fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        if let Ok(value) = http::HeaderValue::from_str(&format!("299 - {warning:?}")) {
            response.headers_mut().append(http::header::WARNING, value);
        }
    }
    response
}

/// POST on a collection.
pub(crate) async fn create(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let body = read_body(body).await?;
    let mut object = decode_body(&req.headers, &body, req.resource.custom)?;
    check_type_meta(&object, &req.resource.api_version(), &req.resource.kind)?;
    let warnings = validate_fields(
        req,
        &mut object,
        BodySource::Object(json_body(req, &body)),
        "CreateOptions",
    )?;
    let (created, code, admission_warnings) = create_object(req, object, Ownership::Update).await?;
    Ok(with_warnings(
        with_warnings(req.respond(code, &render_object(req, created)), &warnings),
        &admission_warnings,
    ))
}

/// Creates `object` (already decoded) as POST does; shared with server-side apply of a missing object.
/// The created object, the status code, and the warnings of admission (policies and webhooks).
async fn create_object(
    req: &RestRequest<'_>,
    mut object: Value,
    ownership: Ownership<'_>,
) -> Result<(Value, StatusCode, Vec<String>), Status> {
    let dry_run = req.query.dry_run()?;
    reconcile_create_namespace(&mut object, req.namespace.as_deref())?;
    let name = meta_str(&object, "name").to_owned();
    let generate = meta_str(&object, "generateName").to_owned();
    check_create_name(req, &name, &generate)?;
    if let Some(namespace) = &req.namespace {
        admit_create(req.ctx.store.as_ref(), &req.resource, namespace, &name).await?;
    }
    let version = req.ctx.binary_version;
    // Decoding defaults the body (`SetDefaults_*`); the strategy then resets status, which reading the
    // stored object back defaults again, hence defaults on both sides of `PrepareForCreate`.
    defaults::set_defaults(&req.resource, version, &mut object);
    // The field manager sees the decoded, defaulted object, before the strategy adds its fields.
    match ownership {
        Ownership::Update => record_update(req, None, &mut object),
        Ownership::Apply(applied) => record_apply(req, None, applied, &mut object)?,
    }
    // Mutating admission sees the decoded, defaulted object with its managed fields (what webhooks set
    // is owned by nobody, as upstream); what they change is defaulted again, as upstream decodes their
    // patched object.
    let options_kind = match ownership {
        Ownership::Update => "CreateOptions",
        Ownership::Apply(_) => "PatchOptions",
    };
    let mut attributes = Attributes::of(req, Operation::Create, Some(&object), None, options_kind);
    let mut admission_warnings = super::mutating_admission_policy::mutate(req, &mut attributes)
        .await?
        .warnings;
    if let Some(mutated) = attributes.object.take()
        && mutated != object
    {
        object = mutated;
        reconcile_create_namespace(&mut object, req.namespace.as_deref())?;
        defaults::set_defaults(&req.resource, version, &mut object);
    }
    prepare_for_create(&req.resource, &mut object, &now());
    defaults::set_defaults(&req.resource, version, &mut object);
    defaults::drop_disabled_fields(&req.resource, req.ctx.emulated_version, &mut object, None);
    validate_schema(req, &object, None)?;
    validate_rules(req, None, &object)?;
    admission_warnings.extend(super::validating_admission_policy::admit(req, &object, None).await?);
    generation::prepare_for_create(req.generation_bump(), &mut object);
    // A Service's allocation and its write are one step for other creates (see `service_ip`).
    let _allocation = if is_service(req) {
        let guard = service_ip::lock().await;
        if let Some(map) = object.as_object_mut() {
            let shown = if name.is_empty() { &generate } else { &name };
            service_ip::allocate(req.ctx.store.as_ref(), &req.ctx.service_cidr, map, shown).await?;
        }
        Some(guard)
    } else {
        None
    };
    let object = crate::api::rest::object::present(object, &req.resource.api_version(), &req.resource.kind);
    let storage = req.resource.storage();
    let attempts = if name.is_empty() {
        GENERATE_NAME_ATTEMPTS
    } else {
        1
    };
    let mut last_error = None;
    for _ in 0..attempts {
        let final_name = if name.is_empty() {
            generate_name(&generate)
        } else {
            name.clone()
        };
        let key = ObjectKey {
            namespace: req.namespace.clone(),
            name: final_name.clone(),
        };
        let mut candidate = object.clone();
        if let Some(metadata) = metadata_mut(&mut candidate) {
            metadata.insert("name".to_owned(), Value::String(final_name));
            // `FillObjectMetaSystemFields`: the server's uid, known before the strategy runs (the Job
            // selector is generated from it); the store keeps it.
            metadata.insert("uid".to_owned(), Value::String(uuid::Uuid::new_v4().to_string()));
        }
        defaults::prepare_for_create(&req.resource, &mut candidate);
        defaults::set_defaults(&req.resource, version, &mut candidate);
        let attributes = Attributes::of(req, Operation::Create, Some(&candidate), None, options_kind);
        admission_warnings.extend(admission::validate(req, &attributes).await?.warnings);
        let result = if dry_run {
            dry_run_create(req, &key, candidate).await
        } else {
            req.ctx.store.create(&storage, &key, candidate).await
        };
        match result {
            Ok(created) => return Ok((created, StatusCode::CREATED, admission_warnings)),
            Err(err @ StoreError::AlreadyExists { .. }) if name.is_empty() => last_error = Some(err),
            Err(err) => return Err(err.into()),
        }
    }
    Err(name_generation_failed(last_error))
}

/// A created object's name: given or to be generated, a valid path segment, and (for built-in
/// resources) what the resource's name rule allows.
fn check_create_name(req: &RestRequest<'_>, name: &str, generate: &str) -> Result<(), Status> {
    if name.is_empty() && generate.is_empty() {
        return Err(Status::invalid(
            &req.resource.group_kind(),
            "",
            vec![StatusCause::field_required(
                "metadata.name",
                "name or generateName is required",
            )],
        ));
    }
    if let Some(reason) = invalid_path_segment(name) {
        return Err(Status::invalid(
            &req.resource.group_kind(),
            name,
            vec![StatusCause::field_invalid("metadata.name", name, reason)],
        ));
    }
    if !req.resource.custom {
        let causes =
            super::names::NameRule::of(&req.resource.group, &req.resource.resource).causes(name, generate);
        if !causes.is_empty() {
            let shown = if name.is_empty() { generate } else { name };
            return Err(Status::invalid(&req.resource.group_kind(), shown, causes));
        }
    }
    Ok(())
}

/// The error of a create whose every attempt failed: with a generated name, upstream's "not able to
/// generate a unique name" conflict, to be retried after a second.
fn name_generation_failed(last_error: Option<StoreError>) -> Status {
    match last_error {
        Some(StoreError::AlreadyExists { resource, key }) => {
            let mut status = Status::already_exists(&resource, &key.name);
            status.message = format!(
                "{resource} {:?} already exists, the server was not able to generate a unique name for the object",
                key.name
            );
            if let Some(details) = status.details.as_mut() {
                details.retry_after_seconds = 1;
            }
            status
        }
        Some(other) => other.into(),
        None => Status::internal_error("name generation made no attempt"),
    }
}

/// Whether `req` addresses core Services (whose creates allocate cluster IPs and node ports).
fn is_service(req: &RestRequest<'_>) -> bool {
    !req.resource.custom && req.resource.group.is_empty() && req.resource.resource == "services"
}

/// What a create would store, without storing it (no resourceVersion, as upstream's dry run).
async fn dry_run_create(
    req: &RestRequest<'_>,
    key: &ObjectKey,
    mut object: Value,
) -> Result<Value, StoreError> {
    let storage = req.resource.storage();
    match req.ctx.store.get(&storage, key).await {
        Ok(_) => {
            return Err(StoreError::AlreadyExists {
                resource: storage,
                key: key.clone(),
            });
        }
        Err(StoreError::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    crate::store::fill_create_metadata(&mut object, key)?;
    Ok(object)
}

/// `ValidatePathSegmentName`: names that cannot be a URL path segment.
fn invalid_path_segment(name: &str) -> Option<&'static str> {
    match name {
        "." => Some("may not be '.'"),
        ".." => Some("may not be '..'"),
        _ if name.contains('/') => Some("may not contain '/'"),
        _ if name.contains('%') => Some("may not contain '%'"),
        _ => None,
    }
}

/// Carries what clients may not change from the stored object into the one being written (including
/// `metadata.generation`, which moves only as the resource's strategy says, and what the registry
/// allocated or generated on create), applies the status subresource split, and defaults the result
/// as upstream defaults every decoded body ([`defaults`]).
fn merge_for_write(req: &RestRequest<'_>, current: &Value, mut incoming: Value) -> Result<Value, Status> {
    if super::subresource::is_object_view(&req.resource, &req.info.subresource) {
        return super::subresource::merge_write(req, current, &incoming);
    }
    let version = req.ctx.binary_version;
    let status_subresource = req.info.subresource == "status";
    if status_subresource {
        // Only status changes; everything else stays, except the client's resourceVersion precondition.
        // A copy of the stored object: generation included, status writes never bump it.
        let mut next = current.clone();
        match incoming.get("status") {
            Some(status) => next["status"] = status.clone(),
            None => {
                if let Some(map) = next.as_object_mut() {
                    map.remove("status");
                }
            }
        }
        let rv = incoming.pointer("/metadata/resourceVersion").cloned();
        if let Some(metadata) = metadata_mut(&mut next) {
            match rv {
                Some(rv) => metadata.insert("resourceVersion".to_owned(), rv),
                None => metadata.remove("resourceVersion"),
            };
        }
        defaults::set_defaults(&req.resource, version, &mut next);
        return Ok(next);
    }
    if req.resource.has_status()
        && let Some(map) = incoming.as_object_mut()
    {
        match current.get("status") {
            Some(status) => map.insert("status".to_owned(), status.clone()),
            None => map.remove("status"),
        };
    }
    let deletion: Vec<(String, Value)> = ["deletionTimestamp", "deletionGracePeriodSeconds"]
        .iter()
        .filter_map(|f| {
            current
                .pointer(&format!("/metadata/{f}"))
                .map(|v| ((*f).to_owned(), v.clone()))
        })
        .collect();
    if let Some(metadata) = metadata_mut(&mut incoming) {
        metadata.remove("deletionTimestamp");
        metadata.remove("deletionGracePeriodSeconds");
        metadata.extend(deletion);
    }
    defaults::prepare_for_update(&req.resource, current, &mut incoming);
    if req.resource.group == "apiextensions.k8s.io" && req.resource.resource == "customresourcedefinitions" {
        super::lifecycle::record_stored_version(&mut incoming);
    }
    defaults::set_defaults(&req.resource, version, &mut incoming);
    defaults::drop_disabled_fields(
        &req.resource,
        req.ctx.emulated_version,
        &mut incoming,
        Some(current),
    );
    generation::prepare_for_update(req.generation_bump(), current, &mut incoming);
    Ok(incoming)
}

/// After a write: an object being deleted whose last finalizer is gone is removed (what the generic
/// registry's update does when `deletionTimestamp` is set and `finalizers` is empty; for a namespace,
/// `spec.finalizers` too: upstream's `ShouldDeleteNamespaceDuringUpdate`).
async fn finish_deletion(req: &RestRequest<'_>, written: Value) -> Result<Value, Status> {
    let deleting = written.pointer("/metadata/deletionTimestamp").is_some();
    let finalizers_left = written
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    // A namespace also waits for its `spec.finalizers` (the namespace controller's `finalize`).
    let is_namespace = req.resource.group.is_empty() && req.resource.resource == "namespaces";
    let goes = if is_namespace {
        super::namespace_deletion::should_delete_during_update(&written)
    } else {
        deleting && !finalizers_left
    };
    if goes {
        return match req
            .ctx
            .store
            .delete(&req.resource.storage(), &req.key(), None)
            .await
        {
            Ok(deleted) => Ok(deleted),
            Err(StoreError::NotFound { .. }) => Ok(written),
            Err(e) => Err(e.into()),
        };
    }
    Ok(written)
}

/// For a Service's main resource: allocates what the updated Service needs and lacks (a type change),
/// returning the allocation lock to hold until the write is done (see `service_ip`).
async fn allocate_for_update(
    req: &RestRequest<'_>,
    next: &mut Value,
) -> Result<Option<tokio::sync::MutexGuard<'static, ()>>, Status> {
    if !is_service(req) || !req.info.subresource.is_empty() {
        return Ok(None);
    }
    let guard = service_ip::lock().await;
    if let Some(map) = next.as_object_mut() {
        service_ip::allocate_missing(req.ctx.store.as_ref(), &req.ctx.service_cidr, map, &req.key()).await?;
    }
    Ok(Some(guard))
}

/// Writes `next` over `current` (or returns it unwritten under dry run).
async fn write(req: &RestRequest<'_>, next: Value, expected: Option<u64>) -> Result<Value, StoreError> {
    if req.query.dry_run().unwrap_or(false) {
        return Ok(next);
    }
    req.ctx
        .store
        .update(&req.resource.storage(), &req.key(), next, expected)
        .await
}

/// PUT on an object (or its status).
pub(crate) async fn update(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    req.query.dry_run()?;
    let body = read_body(body).await?;
    let mut object = decode_body(&req.headers, &body, req.resource.custom)?;
    check_type_meta(&object, &req.resource.api_version(), &req.resource.kind)?;
    let mut warnings = validate_fields(
        req,
        &mut object,
        BodySource::Object(json_body(req, &body)),
        "UpdateOptions",
    )?;
    check_update_name(&mut object, &req.info.name, req.namespace.as_deref())?;
    if let Some(rv) = object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        && !rv.is_empty()
        && rv.parse::<u64>().is_err()
    {
        return Err(Status::bad_request(format!("invalid resource version: {rv:?}")));
    }
    let current = req.ctx.store.get(&req.resource.storage(), &req.key()).await?;
    let mut next = merge_for_write(req, &current, object)?;
    // As upstream's update transformers: the field manager, then mutating admission.
    record_update(req, Some(&current), &mut next);
    let (mut next, mut admission_warnings) = admit_update(req, &current, next, "UpdateOptions").await?;
    validate_schema(req, &next, Some(&current))?;
    warnings.extend(validate_rules(req, Some(&current), &next)?);
    admission_warnings.extend(super::validating_admission_policy::admit(req, &next, Some(&current)).await?);
    let attributes = Attributes::of(
        req,
        Operation::Update,
        Some(&next),
        Some(&current),
        "UpdateOptions",
    );
    admission_warnings.extend(admission::validate(req, &attributes).await?.warnings);
    let _allocation = allocate_for_update(req, &mut next).await?;
    let written = write(req, next, None).await?;
    let written = finish_deletion(req, written).await?;
    Ok(with_warnings(
        with_warnings(
            req.respond(StatusCode::OK, &render_object(req, written)),
            &warnings,
        ),
        &admission_warnings,
    ))
}

/// Mutating admission of an update from `current` to `next` (merged for the write): what webhooks
/// change is merged and defaulted again (so a main-resource write still cannot change `status`).
/// Returns the object to validate and the webhooks' warnings.
async fn admit_update(
    req: &RestRequest<'_>,
    current: &Value,
    next: Value,
    options_kind: &str,
) -> Result<(Value, Vec<String>), Status> {
    let mut attributes = Attributes::of(req, Operation::Update, Some(&next), Some(current), options_kind);
    let warnings = super::mutating_admission_policy::mutate(req, &mut attributes)
        .await?
        .warnings;
    match attributes.object.take() {
        Some(mutated) if mutated != next => Ok((merge_for_write(req, current, mutated)?, warnings)),
        _ => Ok((next, warnings)),
    }
}

/// PATCH on an object (or its status).
pub(crate) async fn patch(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    req.query.dry_run()?;
    let patch_type =
        PatchType::from_content_type(content_type(&req.headers).as_deref(), req.resource.custom)?;
    if patch_type == PatchType::Apply {
        patch::require_field_manager(req.query.get("fieldManager"))?;
    }
    // PatchOptions are validated for every patch type (apply does not decode through `validate_fields`).
    FieldValidation::from_query(req.query.get("fieldValidation"), "PatchOptions")?;
    let body = read_body(body).await?;
    let applied = if patch_type == PatchType::Apply {
        check_applied_fields(req, &body)?;
        Some(applied_configuration(&body)?)
    } else {
        None
    };
    for _ in 0..PATCH_ATTEMPTS {
        let current = match req.ctx.store.get(&req.resource.storage(), &req.key()).await {
            Ok(current) => current,
            Err(StoreError::NotFound { .. })
                if patch_type == PatchType::Apply && req.info.subresource.is_empty() =>
            {
                // Server-side apply creates what does not exist.
                let mut applied_object = patch::apply(
                    patch_type,
                    &Value::Object(Default::default()),
                    &body,
                    patch_schema(req),
                )?;
                check_type_meta(&applied_object, &req.resource.api_version(), &req.resource.kind)?;
                check_update_name(&mut applied_object, &req.info.name, req.namespace.as_deref())?;
                let configuration = applied.as_ref().unwrap_or(&Value::Null);
                let (created, code, admission_warnings) =
                    create_object(req, applied_object, Ownership::Apply(configuration)).await?;
                return Ok(with_warnings(
                    req.respond(code, &render_object(req, created)),
                    &admission_warnings,
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let current_rv = resource_version(&current);
        let presented = req.present(current.clone());
        let mut patched = patch::apply(patch_type, &presented, &body, patch_schema(req))?;
        if !patched.is_object() {
            return Err(Status::bad_request("the patch result is not a JSON object"));
        }
        check_type_meta(&patched, &req.resource.api_version(), &req.resource.kind)?;
        let warnings = if patch_type == PatchType::Apply {
            Vec::new()
        } else {
            validate_fields(req, &mut patched, BodySource::Patched, "PatchOptions")?
        };
        check_update_name(&mut patched, &req.info.name, req.namespace.as_deref())?;
        let patched_rv = patched
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let conditional = !patched_rv.is_empty() && patched_rv.parse::<u64>().ok() != current_rv;
        if conditional {
            // The patch itself carried a (different) resourceVersion: a precondition that failed.
            return Err(Status::conflict(&req.resource.group_resource(), &req.info.name));
        }
        let mut next = merge_for_write(req, &current, patched)?;
        super::object::drop_empty_metadata(&mut next);
        match &applied {
            Some(applied) => {
                record_apply(req, Some(&current), applied, &mut next)?;
                // What apply pruned that has a default comes back, as upstream decodes (and so
                // defaults) the applied result.
                defaults::set_defaults(&req.resource, req.ctx.binary_version, &mut next);
            }
            None => record_update(req, Some(&current), &mut next),
        }
        let (next, admission_warnings) = admit_update(req, &current, next, "PatchOptions").await?;
        let (mut next, mut warnings) = (next, warnings);
        warnings.extend(admission_warnings);
        validate_schema(req, &next, Some(&current))?;
        warnings.extend(validate_rules(req, Some(&current), &next)?);
        warnings.extend(super::validating_admission_policy::admit(req, &next, Some(&current)).await?);
        let attributes = Attributes::of(
            req,
            Operation::Update,
            Some(&next),
            Some(&current),
            "PatchOptions",
        );
        warnings.extend(admission::validate(req, &attributes).await?.warnings);
        let _allocation = allocate_for_update(req, &mut next).await?;
        match write(req, next, current_rv).await {
            Ok(written) => {
                let written = finish_deletion(req, written).await?;
                return Ok(with_warnings(
                    req.respond(StatusCode::OK, &render_object(req, written)),
                    &warnings,
                ));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Status::conflict(&req.resource.group_resource(), &req.info.name))
}
