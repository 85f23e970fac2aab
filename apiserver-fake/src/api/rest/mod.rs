//! The REST handlers of every served group/version/resource: kube-apiserver's generic registry and
//! endpoint handlers (`k8s.io/apiserver/pkg/endpoints/handlers`, `pkg/registry/generic/registry`) over
//! the shared [`Store`].
//!
//! The server calls [`handle`] after authentication with the request's [`RequestInfo`]. What a request
//! may do is decided like upstream's route table: a group/version that is not served answers Go's plain
//! `404 page not found`; inside a served group/version, paths and methods no route matches answer the
//! JSON Status go-restful errors become (`the server could not find the requested resource`, `the
//! server does not allow this method on the requested resource`). Then the verb runs:
//!
//! | verb | module |
//! |---|---|
//! | get, list | `read` |
//! | watch | `watch` |
//! | create, update, patch | `write` |
//! | delete, deletecollection | `delete` |
//!
//! Objects are stored version-agnostically (per group/resource); the fake does not convert between
//! versions, it relabels `apiVersion` with the version requested. Per-resource strategy behaviour the
//! store knows nothing about, such as `metadata.generation` (`generation`), happens here.

pub mod admission;
pub(crate) mod chunked_list;
pub(crate) mod componentstatus;
pub(crate) mod conversion;
pub mod defaults;
pub(crate) mod delete;
pub(crate) mod feature_gates;
pub mod field_validation;
pub(crate) mod freshness;
pub(crate) mod garbage_collection;
pub(crate) mod generation;
pub(crate) mod lifecycle;
pub(crate) mod list_options;
pub mod managed_fields;
pub(crate) mod mutating_admission_policy;
pub(crate) mod names;
pub(crate) mod namespace_deletion;
pub mod negotiation;
pub(crate) mod object;
pub(crate) mod pagination;
pub mod patch;
pub(crate) mod policy_params;
pub(crate) mod read;
pub(crate) mod scale;
pub mod selector;
pub mod structural;
pub(crate) mod subresource;
pub mod table;
pub(crate) mod validating_admission_policy;
pub(crate) mod validation;
pub(crate) mod watch;
pub(crate) mod write;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use mvp_core::RequestInfo;
use serde_json::Value;

use crate::api::catalog::KubeVersion;
use crate::api::status::{GroupKind, Status};
use crate::store::GroupResource;
use crate::store::{ObjectKey, StorageResource, Store};

use negotiation::{OutputFormat, Transforms, negotiate_output};

/// Upstream's limit on request bodies (`maxRequestBodyBytes`, 3 MiB).
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A subresource of a served resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubresourceInfo {
    /// Subresource name (`status`, `scale`, ...).
    pub name: String,
    /// Verbs it supports.
    pub verbs: Vec<String>,
}

/// What the REST layer needs to know about one served group/version/resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group (`""` for core).
    pub group: String,
    /// The requested version.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
    /// Kind of its objects.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Verbs of the resource itself.
    pub verbs: Vec<String>,
    /// Its subresources.
    pub subresources: Vec<SubresourceInfo>,
    /// Whether it is a custom resource (served from a CRD): list items keep `apiVersion`/`kind`,
    /// strategic merge patches are rejected, deletes return the object.
    pub custom: bool,
    /// Table columns after `Name` (custom resources: the CRD's `additionalPrinterColumns` or `Age`);
    /// empty for the default convertor's `Created At`.
    pub printer_columns: Vec<table::PrinterColumn>,
    /// Custom resources: the CRD version's `openAPIV3Schema`, which prunes and validates what is
    /// written ([`structural`]); `None` for built-ins and CRD versions without a schema.
    pub schema: Option<Arc<Value>>,
    /// Custom resources: the `openAPIV3Schema` of the CRD's storage version, whose `default`s every
    /// object read from storage gets (`structural::defaulting`); `None` for built-ins.
    pub storage_schema: Option<Arc<Value>>,
}

impl ResourceInfo {
    /// `group/version`, with an empty group before the slash for core (`/v1`), as Go's
    /// `GroupVersionKind.String()` writes it.
    pub fn api_version_with_core_slash(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        Self::api_version_of(&self.group, &self.version)
    }

    /// The `apiVersion` of `group` and `version` (`version` alone for the core group).
    pub fn api_version_of(group: &str, version: &str) -> String {
        if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }
    }

    /// The storage unit (group + resource).
    pub fn storage(&self) -> StorageResource {
        StorageResource::new(&self.group, &self.resource)
    }

    /// The group/resource errors name.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    /// The group/kind `Invalid` errors name.
    pub fn group_kind(&self) -> GroupKind {
        GroupKind::new(&self.group, &self.kind)
    }

    /// Whether the resource has a `status` subresource (then main-resource writes ignore `status`).
    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s.name == "status")
    }

    /// An object as read from storage: a custom resource gets its storage version's structural
    /// defaults, as upstream's storage decoder defaults every object it reads (so objects stored
    /// before a `default` was added read back with it).
    pub fn default_stored(&self, object: &mut Value) {
        if let Some(schema) = &self.storage_schema {
            structural::defaulting::apply(schema, object);
        }
    }

    fn allows(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// The answer of a [`ResourceCatalog`] for a group/version/resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The group/version is not served at all (→ Go's plain-text 404).
    GroupVersionNotServed,
    /// The group/version is served but has no such resource (→ go-restful's JSON 404).
    ResourceNotServed,
    /// Served.
    Found(ResourceInfo),
}

/// What a server serves, as the REST layer asks it. Implemented by the catalog's `ServedApis`
/// snapshot; tests can implement it directly.
pub trait ResourceCatalog: Send + Sync {
    /// Looks up `group`/`version`/`resource`.
    fn lookup(&self, group: &str, version: &str, resource: &str) -> Lookup;

    /// Every namespaced resource served (any version), for emptying a namespace being deleted.
    fn namespaced_resources(&self) -> Vec<StorageResource>;

    /// The versions `group`/`resource` is served in, for admission's `matchPolicy: Equivalent` (none
    /// unless the catalog says).
    fn versions_of(&self, _group: &str, _resource: &str) -> Vec<String> {
        Vec::new()
    }

    /// The resource serving `kind` in `group`/`version` and whether it is namespaced, for an admission
    /// policy's `paramKind` (none unless the catalog says).
    fn resource_of_kind(&self, _group: &str, _version: &str, _kind: &str) -> Option<(String, bool)> {
        None
    }
}

impl ResourceCatalog for crate::api::catalog::ServedApis {
    fn lookup(&self, group: &str, version: &str, resource: &str) -> Lookup {
        if self.group_version(group, version).is_none() {
            return Lookup::GroupVersionNotServed;
        }
        let Some(served) = self.resource(group, version, resource) else {
            return Lookup::ResourceNotServed;
        };
        Lookup::Found(ResourceInfo {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: served.name.clone(),
            kind: served.kind.clone(),
            namespaced: served.namespaced,
            verbs: served.verbs.clone(),
            subresources: served
                .subresources
                .iter()
                .map(|s| SubresourceInfo {
                    name: s.name.clone(),
                    verbs: s.verbs.clone(),
                })
                .collect(),
            // Decided in `handle` from the store: the catalog does not mark CRD-backed resources.
            custom: false,
            printer_columns: Vec::new(),
            schema: None,
            storage_schema: None,
        })
    }

    fn namespaced_resources(&self) -> Vec<StorageResource> {
        let mut resources: Vec<StorageResource> = self
            .gvrs()
            .filter(|(_, _, r)| r.namespaced)
            .map(|(group, _, r)| StorageResource::new(group, &r.name))
            .collect();
        resources.sort();
        resources.dedup();
        resources
    }

    fn versions_of(&self, group: &str, resource: &str) -> Vec<String> {
        self.gvrs()
            .filter(|(g, _, r)| *g == group && r.name == resource)
            .map(|(_, version, _)| version.to_owned())
            .collect()
    }

    fn resource_of_kind(&self, group: &str, version: &str, kind: &str) -> Option<(String, bool)> {
        self.gvrs()
            .find(|(g, v, r)| *g == group && *v == version && r.kind == kind)
            .map(|(_, _, r)| (r.name.clone(), r.namespaced))
    }
}

/// Everything the handlers share: the store, what the server serves and the version of its binary.
#[derive(Clone)]
pub struct RestContext {
    /// The cluster's store.
    pub store: Arc<dyn Store>,
    /// The served APIs (a snapshot: CRDs change it).
    pub catalog: Arc<dyn ResourceCatalog>,
    /// The Kubernetes minor of the binary, whose registry strategies run (`--kubernetes-version`, not
    /// `--emulated-version`: strategy code such as pod generation is not gated by emulation).
    pub binary_version: KubeVersion,
    /// `--emulated-version` (the binary's unless set): the minor the server emulates, whose CEL
    /// environment new expressions compile in ([`crate::cel::EnvironmentType`]) and whose feature-gate
    /// defaults decide which gated fields the strategies keep and which validation rules apply
    /// (`feature_gates`).
    pub emulated_version: KubeVersion,
    /// How often watches with `allowWatchBookmarks=true` get a BOOKMARK (upstream: about a minute).
    pub bookmark_interval: Duration,
    /// `--service-cluster-ip-range`: where Services' cluster IPs come from.
    pub service_cidr: defaults::service_ip::ServiceCidr,
    /// The keys that sign ServiceAccount tokens (`serviceaccounts/token`); `None`: TokenRequest is
    /// answered with a 500.
    pub service_account_tokens: Option<Arc<crate::api::serviceaccount::ServiceAccountTokens>>,
    /// `--webhook-service-address`: where admission webhooks behind Services are reached.
    pub webhook_service_addresses: Arc<admission::ServiceAddresses>,
    /// Whether `CRDValidationRatcheting` is on (`--feature-gates` at the emulated version; by default
    /// from 1.30): custom resource updates ratchet the schema's and the CEL rules' errors of unchanged
    /// values ([`structural::schema_validation`]).
    pub crd_validation_ratcheting: bool,
    /// The server's authorizer (`--authorization-mode`), which admission expressions ask through their
    /// `authorizer` variable ([`crate::cel::authorizer`]); `AlwaysAllow` unless set.
    pub(crate) authorizer: Arc<dyn crate::cel::authorizer::AccessCheck>,
}

impl std::fmt::Debug for RestContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestContext")
            .field("binary_version", &self.binary_version)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("service_cidr", &self.service_cidr)
            .finish_non_exhaustive()
    }
}

impl RestContext {
    /// A context over `store` serving what `catalog` lists with the strategies of a `binary_version`
    /// kube-apiserver, with upstream's one-minute bookmarks and kubeadm's service range.
    pub fn new(
        store: Arc<dyn Store>,
        catalog: Arc<dyn ResourceCatalog>,
        binary_version: KubeVersion,
    ) -> Self {
        Self {
            store,
            catalog,
            binary_version,
            emulated_version: binary_version,
            bookmark_interval: Duration::from_secs(60),
            service_cidr: defaults::service_ip::ServiceCidr::default(),
            service_account_tokens: None,
            webhook_service_addresses: Arc::default(),
            crd_validation_ratcheting: binary_version.minor >= 30,
            authorizer: Arc::new(crate::chain::authorization::Authorizer::default()),
        }
    }

    /// Sets the authorizer admission expressions ask (the server's `--authorization-mode`).
    pub(crate) fn with_authorizer(
        mut self,
        authorizer: Arc<dyn crate::cel::authorizer::AccessCheck>,
    ) -> Self {
        self.authorizer = authorizer;
        self
    }

    /// Sets the version the server emulates (`--emulated-version`), whose feature gates apply.
    pub fn with_emulated_version(mut self, version: KubeVersion) -> Self {
        self.emulated_version = version;
        self
    }

    /// Sets whether `CRDValidationRatcheting` is on (the server's feature gate at its emulated version).
    pub fn with_crd_validation_ratcheting(mut self, enabled: bool) -> Self {
        self.crd_validation_ratcheting = enabled;
        self
    }

    /// Sets the addresses of admission webhooks' Services (`--webhook-service-address`).
    pub fn with_webhook_service_addresses(mut self, addresses: Arc<admission::ServiceAddresses>) -> Self {
        self.webhook_service_addresses = addresses;
        self
    }

    /// Sets the keys TokenRequests are signed with.
    pub fn with_service_account_tokens(
        mut self,
        tokens: Arc<crate::api::serviceaccount::ServiceAccountTokens>,
    ) -> Self {
        self.service_account_tokens = Some(tokens);
        self
    }

    /// Overrides the service cluster IP range (default `10.96.0.0/12`).
    pub fn with_service_cidr(mut self, cidr: defaults::service_ip::ServiceCidr) -> Self {
        self.service_cidr = cidr;
        self
    }

    /// Overrides the bookmark interval (tests).
    pub fn with_bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }
}

/// Query parameters of a request (first value wins, as Go's `url.Values.Get`).
#[derive(Debug, Clone, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses a raw query string.
    pub fn parse(query: Option<&str>) -> Self {
        let pairs = query
            .map(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Self { pairs }
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order (Go's `url.Values[name]`).
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Whether the query has no parameters at all.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// A boolean parameter as Go's `strconv.ParseBool` reads it (absent → false).
    pub fn flag(&self, name: &str) -> Result<bool, Status> {
        match self.get(name) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(Status::bad_request(format!(
                "strconv.ParseBool: parsing {other:?}: invalid syntax"
            ))),
        }
    }

    /// `dryRun=All` (other values are upstream's 400).
    pub fn dry_run(&self) -> Result<bool, Status> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(Status::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            ))),
        }
    }
}

/// One request being served, resolved against the catalog.
pub struct RestRequest<'a> {
    /// Shared state.
    pub ctx: &'a RestContext,
    /// The request's classification.
    pub info: &'a RequestInfo,
    /// The resource addressed.
    pub resource: ResourceInfo,
    /// The namespace the request addresses (`None` for cluster-scoped resources and all-namespace
    /// requests).
    pub namespace: Option<String>,
    /// Query parameters.
    pub query: Query,
    /// Request headers.
    pub headers: HeaderMap,
    /// The negotiated response format.
    pub format: OutputFormat,
    /// The authenticated user (admission webhooks are told who asks).
    pub user: mvp_core::UserInfo,
    /// What admission webhooks asked to add to the request's audit event.
    pub audit_annotations: std::sync::Mutex<admission::AuditAnnotations>,
}

impl RestRequest<'_> {
    /// The key of the named object addressed.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace.clone(),
            name: self.info.name.clone(),
        }
    }

    /// How the addressed resource maintains `metadata.generation` (`None`: it does not).
    pub fn generation_bump(&self) -> Option<generation::Bump> {
        generation::for_resource(&self.resource, self.ctx.binary_version)
    }

    /// Present an object for a response.
    pub fn present(&self, mut object: serde_json::Value) -> serde_json::Value {
        self.resource.default_stored(&mut object);
        object::present(object, &self.resource.api_version(), &self.resource.kind)
    }

    /// A response in the negotiated format.
    pub fn respond(&self, code: StatusCode, value: &serde_json::Value) -> Response {
        self.format.respond(code, value)
    }
}

/// Go's `http.NotFound` (kube-apiserver's `notfoundhandler`): 404, `text/plain; charset=utf-8`,
/// `X-Content-Type-Options: nosniff`, body `404 page not found\n`.
pub fn not_found_page() -> Response {
    let mut response = (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// Reads a request body up to [`MAX_REQUEST_BODY_BYTES`] (413 beyond, as upstream).
pub async fn read_body(body: Body) -> Result<Bytes, Status> {
    match Limited::new(body, MAX_REQUEST_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Status::request_entity_too_large(
            &format!("limit is {MAX_REQUEST_BODY_BYTES}"),
        )),
        Err(e) => Err(Status::bad_request(format!(
            "unable to read the request body: {e}"
        ))),
    }
}

/// Serves one resource request (see the module docs). Never panics; every failure is a response.
pub async fn handle(ctx: &RestContext, info: &RequestInfo, req: Request<Body>) -> Response {
    if !info.is_resource_request {
        return not_found_page();
    }
    let resource = match ctx
        .catalog
        .lookup(&info.api_group, &info.api_version, &info.resource)
    {
        Lookup::GroupVersionNotServed => return not_found_page(),
        Lookup::ResourceNotServed => return Status::route_not_found().into_response(),
        Lookup::Found(resource) => resource,
    };
    let mut resource = resource;
    let (deprecation_warning, converting_ctx) = if !resource.custom && !resource.group.is_empty() {
        custom_resource(ctx, &mut resource).await
    } else {
        (None, None)
    };
    let ctx = converting_ctx.as_ref().unwrap_or(ctx);
    let (parts, body) = req.into_parts();
    let transforms = match info.verb.as_str() {
        "get" | "list" | "watch" => Transforms::All,
        // Only responses that render the written object ([`read::render_object`]); scale answers a Scale.
        "create" | "update" | "patch" if info.subresource != "scale" => Transforms::PartialObjectMetadata,
        _ => Transforms::None,
    };
    let format = match negotiate_output(&parts.headers, transforms) {
        Ok(format) => format,
        Err(status) => return status.into_response(),
    };
    // `/namespaces//jobs/x`: a namespace segment that is there but empty (see `check_route`).
    let empty_namespace_segment = parts.uri.path().contains("/namespaces//");
    if let Err(status) = check_route(info, &resource, empty_namespace_segment) {
        return format.error(status);
    }
    // `namespaces` are cluster-scoped; RequestInfo reports their name as the namespace too.
    let namespace = (resource.namespaced && !info.namespace.is_empty()).then(|| info.namespace.clone());
    let request = RestRequest {
        ctx,
        info,
        resource,
        namespace,
        query: Query::parse(parts.uri.query()),
        headers: parts.headers,
        format,
        user: parts
            .extensions
            .get::<mvp_core::UserInfo>()
            .cloned()
            .unwrap_or_default(),
        audit_annotations: Default::default(),
    };
    let result = dispatch(&request, body).await;
    let mut response = result.unwrap_or_else(|status| request.format.error(status));
    let annotations = std::mem::take(
        &mut *request
            .audit_annotations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    if !annotations.0.is_empty() {
        response.extensions_mut().insert(annotations);
    }
    match deprecation_warning {
        Some(warning) => write::with_warnings(response, &[warning]),
        None => response,
    }
}

/// A resource a CRD (named `<plural>.<group>`) defines, found in the store: `resource` becomes the
/// CRD version's (printer columns, schemas); the request's deprecation warning, and for a CRD of several
/// versions a context whose store converts objects between the storage version and the requested one
/// at the store boundary ([`conversion`]).
async fn custom_resource(
    ctx: &RestContext,
    resource: &mut ResourceInfo,
) -> (Option<String>, Option<RestContext>) {
    let mut deprecation_warning = None;
    let mut converting_ctx = None;
    // Custom resources are those a CRD (named `<plural>.<group>`) defines; their Tables have the
    // CRD version's printer columns.
    let crd = ObjectKey::cluster(&format!("{}.{}", resource.resource, resource.group));
    if let Ok(definition) = ctx
        .store
        .get(&lifecycle::custom_resource_definitions(), &crd)
        .await
    {
        resource.custom = true;
        resource.printer_columns = table::PrinterColumn::for_crd_version(&definition, &resource.version);
        resource.schema =
            crate::api::catalog::crd_version_schema(&definition, &resource.version).map(Arc::new);
        resource.storage_schema = definition
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|versions| versions.iter().find(|v| v["storage"].as_bool() == Some(true)))
            .and_then(|v| v["name"].as_str())
            .and_then(|storage| crate::api::catalog::crd_version_schema(&definition, storage))
            .map(Arc::new);
        deprecation_warning = crd_deprecation_warning(&definition, &resource.version);
        if let Some(storage_version) = conversion::storage_version(&definition)
            && let Some(converter) = conversion::Converter::for_crd(
                &definition,
                ctx.store.clone(),
                ctx.webhook_service_addresses.clone(),
            )
        {
            let store = conversion::ConvertingStore::new(
                ctx.store.clone(),
                resource.storage(),
                converter,
                (storage_version, &resource.version),
                resource.storage_schema.take(),
            );
            // Objects reach the handlers with the storage version's defaults (the converting store
            // applies them before converting, as upstream's storage decoder) and converted to the
            // requested version; the defaults applied on reading are then that version's.
            resource.storage_schema = resource.schema.clone();
            converting_ctx = Some(RestContext {
                store: Arc::new(store),
                ..ctx.clone()
            });
        }
    }
    (deprecation_warning, converting_ctx)
}

/// The handler of `request`'s verb and subresource.
async fn dispatch(request: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let (ctx, info) = (request.ctx, request.info);
    match info.verb.as_str() {
        _ if scale::serves(request) => scale::handle(request, body).await,
        _ if componentstatus::serves(request) => componentstatus::handle(request).await,
        _ if subresource::is_action(&request.resource, &info.subresource) => {
            subresource::handle(request, body).await
        }
        _ if is_token_request(&request.resource, &info.subresource) => match &ctx.service_account_tokens {
            Some(tokens) => crate::api::serviceaccount::token_request(tokens, request, body).await,
            None => Err(Status::internal_error(
                "no service account token signer is configured",
            )),
        },
        "get" => read::get(request).await,
        "list" => read::list(request).await,
        "watch" => watch::watch(request).await,
        "create" => write::create(request, body).await,
        "update" => write::update(request, body).await,
        "patch" => write::patch(request, body).await,
        "delete" => delete::delete(request, body).await,
        "deletecollection" => delete::delete_collection(request, body).await,
        _ => Err(Status::route_method_not_allowed()),
    }
}

/// The warning every request to a `deprecated` CRD version gets (upstream
/// `customresource_handler.go`): its `deprecationWarning`, else `<group>/<version> <Kind> is deprecated`.
fn crd_deprecation_warning(crd: &Value, version: &str) -> Option<String> {
    let served = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)?
        .iter()
        .find(|v| v["name"].as_str() == Some(version))?;
    if served["deprecated"].as_bool() != Some(true) {
        return None;
    }
    Some(match served["deprecationWarning"].as_str() {
        Some(warning) => warning.to_owned(),
        None => format!(
            "{}/{version} {} is deprecated",
            crd.pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            crd.pointer("/spec/names/kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
        ),
    })
}

/// Whether `subresource` of `resource` is `serviceaccounts/token` (TokenRequest).
fn is_token_request(resource: &ResourceInfo, subresource: &str) -> bool {
    !resource.custom
        && resource.group.is_empty()
        && resource.resource == "serviceaccounts"
        && subresource == "token"
}

/// Mirrors the routes upstream's installer registers for a resource: which paths exist (scope, name,
/// subresource) and which verbs each path takes. An empty namespace segment matches the namespaced
/// routes (go-restful takes `{namespace}` = ""): listing then spans every namespace, while anything that
/// needs an object key gets the store's 400 `Namespace parameter required.` (`NamespaceKeyFunc`).
fn check_route(
    info: &RequestInfo,
    resource: &ResourceInfo,
    empty_namespace_segment: bool,
) -> Result<(), Status> {
    let verb = info.verb.as_str();
    let is_namespaces = resource.group.is_empty() && resource.resource == "namespaces";
    if !resource.namespaced && !info.namespace.is_empty() && !is_namespaces {
        // e.g. /api/v1/namespaces/x/nodes: no such route.
        return Err(Status::route_not_found());
    }
    let named = !info.name.is_empty() && !matches!(verb, "list" | "watch" | "deletecollection");
    if resource.namespaced
        && info.namespace.is_empty()
        && empty_namespace_segment
        && (named || verb == "create")
    {
        return Err(Status::bad_request("Namespace parameter required."));
    }
    if resource.namespaced && info.namespace.is_empty() {
        // Only list and watch exist across namespaces (/apis/batch/v1/jobs).
        if named {
            return Err(Status::route_not_found());
        }
        if !matches!(verb, "list" | "watch") {
            return Err(Status::route_method_not_allowed());
        }
    }
    match verb {
        "get" | "update" | "patch" | "delete" if info.name.is_empty() => {
            return Err(Status::route_method_not_allowed());
        }
        "create" if !info.name.is_empty() && info.subresource.is_empty() => {
            return Err(Status::route_method_not_allowed());
        }
        _ => {}
    }
    if !info.subresource.is_empty() {
        let Some(sub) = resource.subresources.iter().find(|s| s.name == info.subresource) else {
            return Err(Status::route_not_found());
        };
        if !sub.verbs.iter().any(|v| v == verb) {
            return Err(Status::route_method_not_allowed());
        }
        let served = sub.name == "status"
            || (sub.name == "scale" && scale::served_for(resource))
            || subresource::is_object_view(resource, &sub.name)
            || subresource::is_action(resource, &sub.name)
            || is_token_request(resource, &sub.name);
        if !served {
            // Every subresource discovery advertises is served; this is for ones a catalog adds later.
            let gr = GroupResource::new(&resource.group, format!("{}/{}", resource.resource, sub.name));
            return Err(Status::method_not_supported(&gr, verb));
        }
        return Ok(());
    }
    if resource.allows(verb) {
        return Ok(());
    }
    if verb == "watch" && resource.allows("list") {
        return Err(Status::method_not_supported(&resource.group_resource(), "watch"));
    }
    Err(Status::route_method_not_allowed())
}
