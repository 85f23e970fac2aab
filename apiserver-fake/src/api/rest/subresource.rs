//! The subresources beyond `status` and `scale` that discovery advertises, answered as kube-apiserver's
//! registries answer them on a cluster without kubelets:
//!
//! | subresource | verbs | answer |
//! |---|---|---|
//! | `pods/ephemeralcontainers`, `pods/resize` | get, update, patch | the Pod; writes change only `spec.ephemeralContainers` (existing ones may not change) or the containers' `resources`/`resizePolicy` |
//! | `certificatesigningrequests/approval` | get, update, patch | the CSR; writes change only `status.conditions` (timestamps filled in) |
//! | `namespaces/finalize` | update | the Namespace; only `spec.finalizers` changes |
//! | `pods/binding` | create | assigns the pod to the Binding's node (`spec.nodeName`, `PodScheduled`); 201 `Success` |
//! | `pods/eviction` | create | deletes the pod (no PodDisruptionBudgets to check); 201 `Success` |
//! | `pods/log` | get | 204 with an empty body while the pod has no node (`LogLocation`'s empty location) |
//! | `pods/exec`, `attach`, `portforward` | get, create (connect) | 400 `pod NAME does not have a host assigned` (`streamLocation`) |
//! | `pods/proxy` | all (connect) | 400 `address not allowed` without a pod IP (`ResourceLocation`) |
//! | `services/proxy` | all (connect) | 503 `no endpoints available for service "NAME"` |
//! | `nodes/proxy` | all (connect) | 500 `no preferred addresses found; known addresses: []` without addresses |
//!
//! A pod that has a node (bound through `pods/binding`) would be served by its kubelet; the fake has
//! none, so its log, exec, attach and port-forward answer what kube-apiserver answers when it cannot
//! reach the kubelet: 404 while the Node object does not exist, then 500 with the dial error.
//!
//! Binding and eviction are creates, admitted as upstream's create handler admits them: mutating
//! webhooks may change the `Binding`/`Eviction` (`v1`, `policy/v1`), validating ones judge it, and
//! their warnings reach the client.
//!
//! Exec, attach, port-forward and the proxies are connections, admitted as upstream's
//! `ConnectResource` admits them before it connects ([`admit_connect`]): the operation `CONNECT`, the
//! request's options as the object (`v1` `PodExecOptions`, `PodAttachOptions`, `PodPortForwardOptions`,
//! `PodProxyOptions`, `ServiceProxyOptions`, `NodeProxyOptions`, decoded from the query). A webhook or
//! ValidatingAdmissionPolicy that denies `kubectl exec` is answered with its denial, before the pod is
//! even looked up; an allowed one gets the answers above, with the webhooks' warnings. A mutating
//! webhook may change the options (the container then validated is the one it leaves).
//! From 1.35 an exec, attach or port-forward asked with another verb than `create` (a websocket's
//! `GET`) must also be allowed `create` (`AuthorizePodWebsocketUpgradeCreatePermission`), checked
//! after admission as upstream's connections check it.
//! MutatingAdmissionPolicies are not invoked on connections: upstream's plugin lists `CONNECT` among
//! its operations, but its patchers work on objects of the resource's schema, which options are not
//! (the fake does not try to reproduce what upstream's type converter makes of them).
//!
//! The upstream sources: `pkg/registry/core/pod/strategy.go` (`LogLocation`, `streamLocation`,
//! `ResourceLocation`, the ephemeral containers and resize strategies), `pkg/registry/core/pod/storage`
//! (binding, eviction), `pkg/registry/certificates/certificates/strategy.go` (`csrApprovalStrategy`),
//! `pkg/registry/core/namespace/storage` (finalize).

use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::RestRequest;
use super::admission::{self, Attributes, Operation};
use super::negotiation::decode_body;
use super::object::meta_str;
use super::write::with_warnings;
use super::{ResourceInfo, read_body};
use crate::api::status::{GroupKind, Status, StatusCause, StatusOutcome, StatusReason};
use crate::store::{GroupResource, ObjectKey, StorageResource, StoreError};

/// The subresources whose reads return the parent object and whose writes go through the generic
/// update and patch handlers, changing only what [`merge_write`] takes from the request.
pub(crate) fn is_object_view(resource: &ResourceInfo, subresource: &str) -> bool {
    !resource.custom
        && matches!(
            (resource.group.as_str(), resource.resource.as_str(), subresource),
            ("", "pods", "ephemeralcontainers" | "resize")
                | ("certificates.k8s.io", "certificatesigningrequests", "approval")
                | ("", "namespaces", "finalize")
        )
}

/// Whether the fake answers `subresource` of `resource` in [`handle`] (the actions and the
/// connections to kubelets and endpoints).
pub(crate) fn is_action(resource: &ResourceInfo, subresource: &str) -> bool {
    !resource.custom
        && resource.group.is_empty()
        && matches!(
            (resource.resource.as_str(), subresource),
            (
                "pods",
                "binding" | "eviction" | "log" | "exec" | "attach" | "portforward" | "proxy"
            ) | ("services" | "nodes", "proxy")
        )
}

/// Serves an [`is_action`] subresource. A connection ([`connect_options_kind`]) is admitted first
/// ([`admit_connect`]); the admission's warnings reach the client whatever the connection answers.
pub(crate) async fn handle(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let (resource, subresource) = (req.resource.resource.as_str(), req.info.subresource.as_str());
    if let Some(kind) = connect_options_kind(resource, subresource) {
        let (options, warnings) = admit_connect(req, kind).await?;
        let response = connect(req, &options)
            .await
            .unwrap_or_else(|status| req.format.error(status));
        return Ok(with_warnings(response, &warnings));
    }
    match (resource, subresource) {
        ("pods", "binding") => bind(req, body).await,
        ("pods", "eviction") => evict(req, body).await,
        ("pods", "log") => {
            let pod = parent(req).await?;
            validate_container(&pod, req.query.get("container").unwrap_or_default())?;
            match node_name(&pod) {
                "" => Ok(no_content()),
                node => Err(kubelet_of(req, node).await),
            }
        }
        _ => Err(Status::route_method_not_allowed()),
    }
}

/// The connection of an admitted connect request with its `options` (as admission left them): what
/// kube-apiserver answers when there is nothing to connect to (see the module docs).
async fn connect(req: &RestRequest<'_>, options: &Value) -> Result<Response, Status> {
    match (req.resource.resource.as_str(), req.info.subresource.as_str()) {
        ("pods", "exec" | "attach") => {
            authorized_to_create(req)?;
            let pod = parent(req).await?;
            let container = options
                .get("container")
                .and_then(Value::as_str)
                .unwrap_or_default();
            validate_container(&pod, container)?;
            no_host(req, &pod).await
        }
        ("pods", "portforward") => {
            authorized_to_create(req)?;
            let pod = parent(req).await?;
            no_host(req, &pod).await
        }
        ("pods", "proxy") => {
            let name = proxied_name(req)?;
            let pod = get(req, &req.resource.storage(), &name).await?;
            let ip = pod
                .pointer("/status/podIPs/0/ip")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match ip.parse::<std::net::IpAddr>() {
                Ok(ip) if !ip.is_loopback() && !ip.is_unspecified() && !ip.is_multicast() => {
                    Err(Status::failure(
                        503,
                        StatusReason::ServiceUnavailable,
                        format!("error trying to reach service: dial tcp {ip}: connect: connection refused"),
                    ))
                }
                _ => Err(Status::bad_request("address not allowed")),
            }
        }
        ("services", "proxy") => {
            let name = proxied_name(req)?;
            get(req, &req.resource.storage(), &name).await?;
            Err(Status::failure(
                503,
                StatusReason::ServiceUnavailable,
                format!("no endpoints available for service {name:?}"),
            ))
        }
        ("nodes", "proxy") => {
            let name = proxied_name(req)?;
            let node = get(req, &req.resource.storage(), &name).await?;
            let addresses: Vec<String> = node
                .pointer("/status/addresses")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|a| a.get("address").and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            match addresses.first() {
                None => Err(Status::internal_error(
                    "no preferred addresses found; known addresses: []",
                )),
                Some(address) => Err(kubelet_unreachable(address)),
            }
        }
        _ => Err(Status::route_method_not_allowed()),
    }
}

/// The object an [`is_object_view`] write produces: the stored object with only the fields the
/// subresource's strategy takes from `incoming` (and the client's resourceVersion precondition).
pub(crate) fn merge_write(req: &RestRequest<'_>, current: &Value, incoming: &Value) -> Result<Value, Status> {
    let mut next = current.clone();
    match (req.resource.resource.as_str(), req.info.subresource.as_str()) {
        ("pods", "ephemeralcontainers") => {
            let wanted = incoming
                .pointer("/spec/ephemeralContainers")
                .cloned()
                .unwrap_or(Value::Null);
            check_ephemeral_containers(req, current, &wanted)?;
            set_or_remove(&mut next, &["spec", "ephemeralContainers"], wanted);
        }
        ("pods", "resize") => {
            let containers = incoming.pointer("/spec/containers").and_then(Value::as_array);
            if let (Some(wanted), Some(stored)) = (
                containers,
                next.pointer_mut("/spec/containers").and_then(Value::as_array_mut),
            ) {
                for container in stored.iter_mut() {
                    let name = container.get("name").cloned();
                    let Some(update) = wanted.iter().find(|c| c.get("name") == name.as_ref()) else {
                        continue;
                    };
                    for field in ["resources", "resizePolicy"] {
                        if let (Some(value), Some(map)) = (update.get(field), container.as_object_mut()) {
                            map.insert(field.to_owned(), value.clone());
                        }
                    }
                }
            }
        }
        ("certificatesigningrequests", "approval") => {
            let mut conditions = incoming
                .pointer("/status/conditions")
                .cloned()
                .unwrap_or(Value::Null);
            check_approval_conditions(req, current, &conditions)?;
            stamp_conditions(current, &mut conditions);
            set_or_remove(&mut next, &["status", "conditions"], conditions);
        }
        ("namespaces", "finalize") => {
            // `omitempty`: an empty list is no field.
            let finalizers = incoming
                .pointer("/spec/finalizers")
                .filter(|f| f.as_array().is_none_or(|f| !f.is_empty()))
                .cloned()
                .unwrap_or(Value::Null);
            set_or_remove(&mut next, &["spec", "finalizers"], finalizers);
        }
        _ => {}
    }
    if let Some(metadata) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        match incoming.pointer("/metadata/resourceVersion") {
            Some(rv) => metadata.insert("resourceVersion".to_owned(), rv.clone()),
            None => metadata.remove("resourceVersion"),
        };
    }
    super::defaults::set_defaults(&req.resource, req.ctx.binary_version, &mut next);
    Ok(next)
}

/// Sets `path` in `object` to `value`, or removes the field when `value` is null.
fn set_or_remove(object: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = object;
    for key in parents {
        if !at.get(*key).is_some_and(Value::is_object) {
            if value.is_null() {
                return;
            }
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    if let Some(map) = at.as_object_mut() {
        if value.is_null() {
            map.remove(*last);
        } else {
            map.insert((*last).to_owned(), value);
        }
    }
}

/// `ValidatePodEphemeralContainersUpdate`: ephemeral containers are added, never removed or changed,
/// and their names are unique among all the pod's containers.
fn check_ephemeral_containers(req: &RestRequest<'_>, current: &Value, wanted: &Value) -> Result<(), Status> {
    let empty = Vec::new();
    let old = current
        .pointer("/spec/ephemeralContainers")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let new = wanted.as_array().unwrap_or(&empty);
    let mut causes = Vec::new();
    for existing in old {
        let name = meta_name(existing);
        match new.iter().position(|c| meta_name(c) == name) {
            None => causes.push(StatusCause::field_forbidden(
                "spec.ephemeralContainers",
                &format!("existing ephemeral containers {name:?} may not be removed"),
            )),
            Some(index) => {
                let mut stored = existing.clone();
                let mut sent = new[index].clone();
                // Compare what the client controls, defaulted alike.
                if let (Some(a), Some(b)) = (stored.as_object_mut(), sent.as_object_mut()) {
                    super::defaults::pod::set_defaults_container(a);
                    super::defaults::pod::set_defaults_container(b);
                }
                if stored != sent {
                    causes.push(StatusCause::field_forbidden(
                        &format!("spec.ephemeralContainers[{index}]"),
                        &format!("existing ephemeral containers {name:?} may not be changed"),
                    ));
                }
            }
        }
    }
    let mut names: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .filter_map(|list| {
            current
                .pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array)
        })
        .flatten()
        .map(meta_name)
        .collect();
    for (index, container) in new.iter().enumerate() {
        let name = meta_name(container);
        let path = format!("spec.ephemeralContainers[{index}]");
        if name.is_empty() {
            causes.push(StatusCause::field_required(&format!("{path}.name"), ""));
        } else if names.contains(&name) {
            causes.push(StatusCause {
                reason: "FieldValueDuplicate".to_owned(),
                message: format!("Duplicate value: {name:?}"),
                field: format!("{path}.name"),
            });
        }
        names.push(name);
        if container
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            causes.push(StatusCause::field_required(&format!("{path}.image"), ""));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid(
            &GroupKind::new("", "Pod"),
            &req.info.name,
            causes,
        ))
    }
}

fn meta_name(container: &Value) -> &str {
    container.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// `ValidateCertificateSigningRequestApprovalUpdate`'s condition rules: known statuses, no
/// duplicate types, Approved and Denied exclusive, and neither removed once set.
fn check_approval_conditions(
    req: &RestRequest<'_>,
    current: &Value,
    conditions: &Value,
) -> Result<(), Status> {
    let empty = Vec::new();
    let new = conditions.as_array().unwrap_or(&empty);
    let kind = |c: &Value| {
        c.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut causes = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (index, condition) in new.iter().enumerate() {
        let path = format!("status.conditions[{index}]");
        let condition_type = kind(condition);
        if condition_type.is_empty() {
            causes.push(StatusCause::field_required(&format!("{path}.type"), ""));
        }
        let status = condition
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !matches!(status, "True" | "False" | "Unknown") {
            if status.is_empty() {
                causes.push(StatusCause::field_required(&format!("{path}.status"), ""));
            } else {
                causes.push(StatusCause::field_not_supported(
                    &format!("{path}.status"),
                    status,
                    &["False", "True", "Unknown"],
                ));
            }
        } else if matches!(condition_type.as_str(), "Approved" | "Denied") && status != "True" {
            causes.push(StatusCause::field_not_supported(
                &format!("{path}.status"),
                status,
                &["True"],
            ));
        }
        if seen.contains(&condition_type)
            && matches!(condition_type.as_str(), "Approved" | "Denied" | "Failed")
        {
            causes.push(StatusCause {
                reason: "FieldValueDuplicate".to_owned(),
                message: format!("Duplicate value: {condition_type:?}"),
                field: format!("{path}.type"),
            });
        }
        seen.push(condition_type);
    }
    if seen.iter().any(|t| t == "Approved") && seen.iter().any(|t| t == "Denied") {
        causes.push(StatusCause {
            reason: "FieldValueInvalid".to_owned(),
            message: "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
                .to_owned(),
            field: "status.conditions".to_owned(),
        });
    }
    let old = current
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    for kept in ["Approved", "Denied"] {
        if old.iter().any(|c| kind(c) == kept) && !seen.iter().any(|t| t == kept) {
            causes.push(StatusCause::field_forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {kept:?}"),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid(
            &GroupKind::new("certificates.k8s.io", "CertificateSigningRequest"),
            &req.info.name,
            causes,
        ))
    }
}

/// `csrApprovalStrategy.PrepareForUpdate`: conditions without `lastUpdateTime` get now, and without
/// `lastTransitionTime` get the stored condition's when the status did not change, else now.
fn stamp_conditions(current: &Value, conditions: &mut Value) {
    let now = crate::store::now_timestamp();
    let old = current
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for condition in conditions.as_array_mut().into_iter().flatten() {
        let Some(map) = condition.as_object_mut() else {
            continue;
        };
        let missing = |map: &serde_json::Map<String, Value>, field: &str| {
            map.get(field)
                .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
        };
        if missing(map, "lastUpdateTime") {
            map.insert("lastUpdateTime".to_owned(), json!(now));
        }
        if missing(map, "lastTransitionTime") {
            let previous = old.iter().find(|c| c.get("type") == map.get("type"));
            let transition = match previous {
                Some(previous) if previous.get("status") == map.get("status") => previous
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or_else(|| json!(now)),
                _ => json!(now),
            };
            map.insert("lastTransitionTime".to_owned(), transition);
        }
    }
}

/// The pod (or other parent) the request names.
async fn parent(req: &RestRequest<'_>) -> Result<Value, Status> {
    get(req, &req.resource.storage(), &req.info.name).await
}

async fn get(req: &RestRequest<'_>, storage: &StorageResource, name: &str) -> Result<Value, Status> {
    let key = ObjectKey {
        namespace: req.namespace.clone(),
        name: name.to_owned(),
    };
    Ok(req.ctx.store.get(storage, &key).await?)
}

/// The object name of a proxy request: `name`, `name:port` or `scheme:name:port`
/// (`utilnet.SplitSchemeNamePort`).
fn proxied_name(req: &RestRequest<'_>) -> Result<String, Status> {
    let id = req.info.name.as_str();
    let parts: Vec<&str> = id.split(':').collect();
    let name = match parts.as_slice() {
        [name] | [name, _] => *name,
        [scheme, name, _] if matches!(*scheme, "http" | "https") => *name,
        _ => "",
    };
    if name.is_empty() {
        let kind = req.resource.resource.trim_end_matches('s');
        return Err(Status::bad_request(format!("invalid {kind} request {id:?}")));
    }
    Ok(name.to_owned())
}

fn node_name(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `validateContainer`: a named container must exist; without a name the pod must have exactly one.
fn validate_container(pod: &Value, container: &str) -> Result<(), Status> {
    let name = meta_str(pod, "name");
    let names: Vec<&str> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|list| pod.pointer(&format!("/spec/{list}")).and_then(Value::as_array))
        .flatten()
        .map(meta_name)
        .collect();
    if !container.is_empty() {
        if names.contains(&container) {
            return Ok(());
        }
        return Err(Status::bad_request(format!(
            "container {container} is not valid for pod {name}"
        )));
    }
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    match containers {
        1 => Ok(()),
        0 => Err(Status::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        _ => Err(Status::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            names.join(" ")
        ))),
    }
}

/// `streamLocation` / `PortForwardLocation`: a pod not yet scheduled has nowhere to connect to.
async fn no_host(req: &RestRequest<'_>, pod: &Value) -> Result<Response, Status> {
    match node_name(pod) {
        "" => Err(Status::bad_request(format!(
            "pod {} does not have a host assigned",
            req.info.name
        ))),
        node => Err(kubelet_of(req, node).await),
    }
}

/// The connection to `node`'s kubelet (`GetConnectionInfo`): the node must exist (404 otherwise, as
/// upstream), and then the kubelet that the fake does not have is unreachable.
async fn kubelet_of(req: &RestRequest<'_>, node: &str) -> Status {
    let nodes = StorageResource::new("", "nodes");
    match req.ctx.store.get(&nodes, &ObjectKey::cluster(node)).await {
        Ok(_) => kubelet_unreachable(node),
        Err(e) => e.into(),
    }
}

/// What kube-apiserver answers when the kubelet it dials is not there (the fake has no kubelets).
fn kubelet_unreachable(host: &str) -> Status {
    Status::internal_error(&format!(
        "error dialing backend: dial tcp {host}:10250: connect: connection refused"
    ))
}

/// 204 with no body: a log stream that has no location (upstream's `StreamObject` of nothing).
fn no_content() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
}

/// The `Success` Status of a create that returns no object (binding, eviction), code 201.
fn created_success(req: &RestRequest<'_>) -> Response {
    let status = Status {
        status: StatusOutcome::Success,
        code: 201,
        ..Status::default()
    };
    req.respond(StatusCode::CREATED, &status.to_value())
}

/// Decodes a create body of `kind` in one of `api_versions` (or untyped), whose name must be the URL's.
async fn action_body(
    req: &RestRequest<'_>,
    body: Body,
    api_versions: &[&str],
    kind: &str,
) -> Result<Value, Status> {
    let body = read_body(body).await?;
    let object = decode_body(&req.headers, &body, false)?;
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let object_kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    // Without apiVersion and kind the body decodes into the type the endpoint expects (kube-rs
    // sends evictions so); with them, they must name it.
    let untyped = api_version.is_empty() && object_kind.is_empty();
    if !untyped && (object_kind != kind || !api_versions.contains(&api_version)) {
        return Err(Status::bad_request(format!(
            "no kind {object_kind:?} is registered for version {api_version:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    }
    let name = meta_str(&object, "name");
    if name != req.info.name {
        return Err(Status::bad_request(format!(
            "name in URL does not match name in {kind} object"
        )));
    }
    Ok(object)
}

/// `ensureAuthorizedForVerb(ctx, authorizer, "create")`, the first thing the exec, attach and
/// port-forward connections do from 1.35 (`AuthorizePodWebsocketUpgradeCreatePermission`, beta and
/// on): a request authorized with another verb (a websocket's `GET` is `get`) must be allowed `create`
/// too, or it is refused with upstream's `pods "NAME" is forbidden: <the authorizer's reason>`.
fn authorized_to_create(req: &RestRequest<'_>) -> Result<(), Status> {
    if req.info.verb == "create" || req.ctx.binary_version.minor < 35 {
        return Ok(());
    }
    let mut attributes = req.info.clone();
    attributes.verb = "create".to_owned();
    let verdict = req.ctx.authorizer.check(&req.user, &attributes);
    if verdict.allowed {
        return Ok(());
    }
    let resource = GroupResource::new(&req.info.api_group, &req.info.resource);
    Err(Status::forbidden(&resource, &req.info.name, &verdict.reason))
}

/// The kind of the options of a `CONNECT` subresource (upstream's `NewConnectOptions`), `None` for
/// the subresources that are not connections.
pub(crate) fn connect_options_kind(resource: &str, subresource: &str) -> Option<&'static str> {
    match (resource, subresource) {
        ("pods", "exec") => Some("PodExecOptions"),
        ("pods", "attach") => Some("PodAttachOptions"),
        ("pods", "portforward") => Some("PodPortForwardOptions"),
        ("pods", "proxy") => Some("PodProxyOptions"),
        ("services", "proxy") => Some("ServiceProxyOptions"),
        ("nodes", "proxy") => Some("NodeProxyOptions"),
        _ => None,
    }
}

/// `getRequestOptions`: the `v1` options of a connect request of `kind`, decoded from its query as
/// upstream's parameter codec decodes them (a query with parameters is then defaulted: exec and attach
/// always ask for stdout and stderr, `SetDefaults_PodExecOptions`), the proxies' `path` from the URL
/// after the subresource. Fields are omitted when empty as the `v1` types' JSON omits them, but for
/// exec's `command`, which is `null`.
pub(crate) fn connect_options(req: &RestRequest<'_>, kind: &str) -> Result<Value, Status> {
    let query = &req.query;
    let mut options = serde_json::Map::new();
    options.insert("kind".to_owned(), json!(kind));
    options.insert("apiVersion".to_owned(), json!("v1"));
    match kind {
        "PodExecOptions" | "PodAttachOptions" => {
            let defaulted = !query.is_empty();
            for stream in ["stdin", "stdout", "stderr", "tty"] {
                let default = defaulted && matches!(stream, "stdout" | "stderr");
                if default || query_bool(&query.values(stream)) {
                    options.insert(stream.to_owned(), json!(true));
                }
            }
            if let Some(container) = query.get("container").filter(|c| !c.is_empty()) {
                options.insert("container".to_owned(), json!(container));
            }
            if kind == "PodExecOptions" {
                let command = query.values("command");
                let command = if command.is_empty() {
                    Value::Null
                } else {
                    json!(command)
                };
                options.insert("command".to_owned(), command);
            }
        }
        "PodPortForwardOptions" => {
            let ports = query
                .values("ports")
                .into_iter()
                .flat_map(|value| value.split(','))
                .map(parse_port)
                .collect::<Result<Vec<u16>, Status>>()?;
            if !ports.is_empty() {
                options.insert("ports".to_owned(), json!(ports));
            }
        }
        _ => {
            let path = proxy_path(req.info);
            if !path.is_empty() {
                options.insert("path".to_owned(), json!(path));
            }
        }
    }
    Ok(Value::Object(options))
}

/// `Convert_Slice_string_To_bool`: the first value, false only when it is `0`, `false` or `no` (any
/// case); absent is false.
fn query_bool(values: &[&str]) -> bool {
    values.first().is_some_and(|value| {
        !(*value == "0" || value.eq_ignore_ascii_case("false") || value.eq_ignore_ascii_case("no"))
    })
}

/// `Convert_Slice_string_To_Slice_int32`'s `strconv.ParseUint(v, 10, 16)`, with its error as the 400.
fn parse_port(value: &str) -> Result<u16, Status> {
    value.parse::<u16>().map_err(|_| {
        let why = match !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
            true => "value out of range",
            false => "invalid syntax",
        };
        Status::bad_request(format!(
            "cannot convert to []int32: strconv.ParseUint: parsing {value:?}: {why}"
        ))
    })
}

/// The proxied path: the URL's parts after the subresource, with a leading slash, and a trailing one
/// when the URL has one (`getRequestOptions` with its subpath).
fn proxy_path(info: &mvp_core::RequestInfo) -> String {
    let mut path = info.parts.get(3..).unwrap_or_default().join("/");
    if !path.is_empty() && !path.starts_with('/') {
        path.insert(0, '/');
    }
    if info.path.ends_with('/') && !path.ends_with('/') {
        path.push('/');
    }
    path
}

/// Admission of a connection, as upstream's `ConnectResource` admits it before connecting: a `dryRun`
/// parameter is refused (400 `dryRun is not supported`), then the mutating webhooks and the validating
/// policies and webhooks see the operation `CONNECT` on the subresource with the options of `kind`
/// ([`connect_options`]) as the object, no old object, no options and the name of the URL (a proxy's
/// `name:port` as it is). MutatingAdmissionPolicies are not invoked (see the module docs).
/// Returns the options as the mutating webhooks left them and the webhooks' and policies' warnings.
pub(crate) async fn admit_connect(req: &RestRequest<'_>, kind: &str) -> Result<(Value, Vec<String>), Status> {
    if !req.query.values("dryRun").is_empty() {
        return Err(Status::bad_request("dryRun is not supported"));
    }
    let options = connect_options(req, kind)?;
    let mut attributes = Attributes::of(req, Operation::Connect, Some(&options), None, "");
    attributes.name = req.info.name.clone();
    attributes.kind = kind.to_owned();
    attributes.kind_api_version = Some("v1".to_owned());
    attributes.dry_run = false;
    attributes.options = Value::Null;
    let mut warnings = admission::mutate(req, &mut attributes).await?.warnings;
    warnings.extend(super::validating_admission_policy::admit_connect(req, &attributes).await?);
    warnings.extend(admission::validate(req, &attributes).await?.warnings);
    Ok((attributes.object.unwrap_or(options), warnings))
}

/// Admission of an action's create (`pods/binding`, `pods/eviction`, `serviceaccounts/token`), as upstream's create handler
/// admits a subresource: webhooks see the operation `CREATE` on the pod's subresource with `object` as
/// `kind` of `api_version` (the version the registry works in, whatever version the client sent).
/// Returns the object as mutating admission left it and the webhooks' warnings.
pub(crate) async fn admit_action(
    req: &RestRequest<'_>,
    mut object: Value,
    api_version: &str,
    kind: &str,
) -> Result<(Value, Vec<String>), Status> {
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    let mut attributes = Attributes::of(req, Operation::Create, Some(&object), None, "CreateOptions");
    attributes.name = req.info.name.clone();
    attributes.kind = kind.to_owned();
    attributes.kind_api_version = Some(api_version.to_owned());
    let mut warnings = admission::mutate(req, &mut attributes).await?.warnings;
    let object = attributes.object.clone().unwrap_or(object);
    warnings.extend(admission::validate(req, &attributes).await?.warnings);
    Ok((object, warnings))
}

/// `pods/binding`: assigns the pod to `target.name`, once.
async fn bind(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let dry_run = req.query.dry_run()?;
    let binding = action_body(req, body, &["v1"], "Binding").await?;
    let (binding, warnings) = admit_action(req, binding, "v1", "Binding").await?;
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if node.is_empty() {
        return Err(Status::invalid(
            &GroupKind::new("", "Binding"),
            &req.info.name,
            vec![StatusCause::field_required("target.name", "")],
        ));
    }
    let storage = req.resource.storage();
    for _ in 0..5 {
        let pod = parent(req).await?;
        let assigned = node_name(&pod);
        if !assigned.is_empty() {
            return Err(Status::conflict_with(
                &GroupResource::new("", "pods/binding"),
                &req.info.name,
                &format!("pod {} is already assigned to node {assigned:?}", req.info.name),
            ));
        }
        let mut next = pod.clone();
        next["spec"]["nodeName"] = json!(node);
        if let Some(annotations) = binding
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        {
            for (key, value) in annotations {
                next["metadata"]["annotations"][key] = value.clone();
            }
        }
        let mut conditions: Vec<Value> = next
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
        conditions.push(json!({
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": null,
            "lastTransitionTime": crate::store::now_timestamp(),
        }));
        if !next.get("status").is_some_and(Value::is_object) {
            next["status"] = json!({});
        }
        next["status"]["conditions"] = Value::Array(conditions);
        if dry_run {
            return Ok(with_warnings(created_success(req), &warnings));
        }
        let expected = crate::store::resource_version(&pod);
        match req.ctx.store.update(&storage, &req.key(), next, expected).await {
            Ok(_) => return Ok(with_warnings(created_success(req), &warnings)),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Status::conflict(&req.resource.group_resource(), &req.info.name))
}

/// `pods/eviction`: deletes the pod (the fake has no PodDisruptionBudget controller, so nothing
/// can refuse it).
async fn evict(req: &RestRequest<'_>, body: Body) -> Result<Response, Status> {
    let dry_run = req.query.dry_run()?;
    let eviction = action_body(req, body, &["policy/v1", "policy/v1beta1"], "Eviction").await?;
    parent(req).await?;
    let (eviction, warnings) = admit_action(req, eviction, "policy/v1", "Eviction").await?;
    let expected_uid = eviction
        .pointer("/deleteOptions/preconditions/uid")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if dry_run {
        return Ok(with_warnings(created_success(req), &warnings));
    }
    let current = parent(req).await?;
    if let Some(uid) = expected_uid
        && uid != meta_str(&current, "uid")
    {
        return Err(Status::conflict_with(
            &req.resource.group_resource(),
            &req.info.name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(&current, "uid")
            ),
        ));
    }
    match req
        .ctx
        .store
        .delete(&req.resource.storage(), &req.key(), None)
        .await
    {
        Ok(_) | Err(StoreError::NotFound { .. }) => Ok(with_warnings(created_success(req), &warnings)),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_booleans_are_false_only_for_upstreams_false_words() {
        assert!(!query_bool(&[]));
        for value in ["0", "false", "FALSE", "No", "no"] {
            assert!(!query_bool(&[value]), "{value}");
        }
        for value in ["1", "true", "yes", "", "anything"] {
            assert!(query_bool(&[value]), "{value:?}");
        }
        assert!(query_bool(&["true", "false"]), "the first value decides");
    }

    #[test]
    fn ports_are_parsed_as_upstreams_uint16s() {
        assert_eq!(parse_port("8080").ok(), Some(8080));
        let message = |value: &str| parse_port(value).err().map(|s| s.message);
        assert_eq!(
            message("70000").as_deref(),
            Some("cannot convert to []int32: strconv.ParseUint: parsing \"70000\": value out of range")
        );
        assert_eq!(
            message("http").as_deref(),
            Some("cannot convert to []int32: strconv.ParseUint: parsing \"http\": invalid syntax")
        );
        assert_eq!(
            message("").as_deref(),
            Some("cannot convert to []int32: strconv.ParseUint: parsing \"\": invalid syntax")
        );
    }

    #[test]
    fn proxy_paths_are_the_parts_after_the_subresource() {
        let info = |uri: &str| {
            mvp_core::RequestInfo::from_parts(&http::Method::GET, &uri.parse().expect("uri")).expect("info")
        };
        let path = |uri: &str| proxy_path(&info(uri));
        assert_eq!(path("/api/v1/namespaces/default/pods/web/proxy"), "");
        assert_eq!(path("/api/v1/namespaces/default/pods/web/proxy/"), "/");
        assert_eq!(
            path("/api/v1/namespaces/default/services/web:80/proxy/healthz/live"),
            "/healthz/live"
        );
        assert_eq!(path("/api/v1/nodes/node-1/proxy/metrics/"), "/metrics/");
    }

    #[test]
    fn connections_have_their_options_kinds() {
        assert_eq!(connect_options_kind("pods", "exec"), Some("PodExecOptions"));
        assert_eq!(
            connect_options_kind("services", "proxy"),
            Some("ServiceProxyOptions")
        );
        assert_eq!(connect_options_kind("nodes", "proxy"), Some("NodeProxyOptions"));
        assert_eq!(connect_options_kind("pods", "eviction"), None);
        assert_eq!(connect_options_kind("pods", "log"), None);
    }
}
