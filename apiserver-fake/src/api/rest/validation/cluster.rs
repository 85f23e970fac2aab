//! Leases (`pkg/apis/coordination/validation`), Ingresses and NetworkPolicies
//! (`pkg/apis/networking/validation`) and PersistentVolumeClaims (`pkg/apis/core/validation`).

use serde_json::Value;

use super::pod::{PORT_PROTOCOLS, parse_quantity, port_name_violations, port_number};
use super::{BadValue, FieldError, FieldErrors, Path, int_at, list_at, str_at};
use crate::api::catalog::KubeVersion;

/// `ValidateLeaseSpec`.
pub(crate) fn validate_lease(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let path = Path::new("spec");
    if let Some(duration) = int_at(object, "/spec/leaseDurationSeconds")
        && duration <= 0
    {
        errors.push(FieldError::invalid(
            &path.child("leaseDurationSeconds"),
            BadValue::Int(duration),
            "must be greater than 0",
        ));
    }
    if let Some(transitions) = int_at(object, "/spec/leaseTransitions")
        && transitions < 0
    {
        errors.push(FieldError::invalid(
            &path.child("leaseTransitions"),
            BadValue::Int(transitions),
            "must be greater than or equal to 0",
        ));
    }
    errors
}

/// `supportedPathTypes`, sorted.
const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];

/// `ValidateIngressSpec`: a default backend or rules; hosts; paths and their backends.
pub(crate) fn validate_ingress(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let rules = list_at(spec, "/rules");
    let backend = spec.get("defaultBackend").filter(|b| !b.is_null());
    if rules.is_empty() && backend.is_none() {
        errors.push(FieldError::invalid(
            &path,
            BadValue::Rendered {
                go: "[]networking.IngressRule(nil)".to_owned(),
                json: "null".to_owned(),
            },
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(backend) = backend {
        ingress_backend(backend, &path.child("defaultBackend"), &mut errors);
    }
    let rules_path = path.child("rules");
    for (i, rule) in rules.iter().enumerate() {
        let at = rules_path.index(i);
        let host = str_at(rule, "/host");
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                errors.push(FieldError::invalid_str(
                    &at.child("host"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            if !host.contains('*') {
                super::dns1123_subdomain(&mut errors, host, &at.child("host"));
            }
        }
        let Some(http) = rule.get("http").filter(|h| !h.is_null()) else {
            continue;
        };
        let http_path = at.child("http");
        let paths = list_at(http, "/paths");
        if paths.is_empty() {
            errors.push(FieldError::required(&http_path.child("paths"), ""));
        }
        for (j, entry) in paths.iter().enumerate() {
            http_ingress_path(entry, &http_path.child("paths").index(j), &mut errors);
        }
    }
    errors
}

/// `validateHTTPIngressPath`.
fn http_ingress_path(entry: &Value, path: &Path, errors: &mut FieldErrors) {
    let path_type = str_at(entry, "/pathType");
    if entry.get("pathType").is_none_or(Value::is_null) {
        errors.push(FieldError::required(
            &path.child("pathType"),
            "pathType must be specified",
        ));
        return;
    }
    let value = str_at(entry, "/path");
    let at = path.child("path");
    match path_type {
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errors.push(FieldError::invalid_str(&at, value, "must be an absolute path"));
            }
            if !value.is_empty() {
                for sequence in ["//", "/./", "/../", "%2f", "%2F"] {
                    if value.contains(sequence) {
                        errors.push(FieldError::invalid_str(
                            &at,
                            value,
                            &format!("must not contain '{sequence}'"),
                        ));
                    }
                }
                for suffix in ["/..", "/."] {
                    if value.ends_with(suffix) {
                        errors.push(FieldError::invalid_str(
                            &at,
                            value,
                            &format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errors.push(FieldError::invalid_str(&at, value, "must be an absolute path"));
            }
        }
        other => errors.push(FieldError::not_supported(
            &path.child("pathType"),
            other,
            PATH_TYPES,
        )),
    }
    ingress_backend(
        entry.get("backend").unwrap_or(&Value::Null),
        &path.child("backend"),
        errors,
    );
}

/// `validateIngressBackend`: a resource or a service (with a name and a port name or number).
fn ingress_backend(backend: &Value, path: &Path, errors: &mut FieldErrors) {
    let resource = backend.get("resource").filter(|r| !r.is_null());
    let service = backend.get("service").filter(|s| !s.is_null());
    match (resource, service) {
        (Some(_), Some(_)) => errors.push(FieldError::invalid_str(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (Some(_), None) => {}
        (None, Some(service)) => {
            let name = str_at(service, "/name");
            let name_path = path.child("service").child("name");
            if name.is_empty() {
                errors.push(FieldError::required(&name_path, ""));
            } else {
                for message in super::super::names::NameRule::Dns1035Label.violations(name) {
                    errors.push(FieldError::invalid_str(&name_path, name, &message));
                }
            }
            let port_name = str_at(service, "/port/name");
            let number = int_at(service, "/port/number").unwrap_or(0);
            let port_path = path.child("service").child("port");
            match (port_name.is_empty(), number == 0) {
                (false, false) => errors.push(FieldError::invalid_str(
                    path,
                    "",
                    "cannot set both port name & port number",
                )),
                (false, true) => {
                    for message in port_name_violations(port_name) {
                        errors.push(FieldError::invalid_str(
                            &port_path.child("name"),
                            port_name,
                            message,
                        ));
                    }
                }
                (true, false) => port_number(errors, number, &port_path.child("number")),
                (true, true) => errors.push(FieldError::required(path, "port name or number is required")),
            }
        }
        (None, None) => errors.push(FieldError::invalid_str(
            path,
            "",
            "resource or service backend is required",
        )),
    }
}

/// `ValidateNetworkPolicySpec`: ports, peers, policy types.
pub(crate) fn validate_network_policy(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in list_at(spec, &format!("/{direction}")).iter().enumerate() {
            let at = path.child(direction).index(i);
            for (j, port) in list_at(rule, "/ports").iter().enumerate() {
                network_policy_port(port, &at.child("ports").index(j), &mut errors);
            }
            for (j, peer) in list_at(rule, &format!("/{peers}")).iter().enumerate() {
                network_policy_peer(peer, &at.child(peers).index(j), &mut errors);
            }
        }
    }
    let types = list_at(spec, "/policyTypes");
    let types_path = path.child("policyTypes");
    if types.len() > 2 {
        errors.push(FieldError::invalid(
            &types_path,
            BadValue::Json(Value::Array(types.to_vec())),
            "may not specify more than two policyTypes",
        ));
        return errors;
    }
    for (i, kind) in types.iter().enumerate() {
        let kind = kind.as_str().unwrap_or_default();
        if kind != "Ingress" && kind != "Egress" {
            errors.push(FieldError::not_supported(
                &types_path.index(i),
                kind,
                &["Ingress", "Egress"],
            ));
        }
    }
    errors
}

/// `ValidateNetworkPolicyPort`.
fn network_policy_port(port: &Value, path: &Path, errors: &mut FieldErrors) {
    if let Some(protocol) = port.get("protocol").and_then(Value::as_str)
        && !PORT_PROTOCOLS.contains(&protocol)
    {
        errors.push(FieldError::not_supported(
            &path.child("protocol"),
            protocol,
            &["TCP", "UDP", "SCTP"],
        ));
    }
    let end = int_at(port, "/endPort");
    match port.get("port") {
        Some(Value::Number(n)) => {
            let number = n.as_i64().unwrap_or(0);
            port_number(errors, number, &path.child("port"));
            if let Some(end) = end {
                if end < number {
                    errors.push(FieldError::invalid(
                        &path.child("endPort"),
                        BadValue::Int(number),
                        "must be greater than or equal to `port`",
                    ));
                }
                port_number(errors, end, &path.child("endPort"));
            }
        }
        Some(Value::String(name)) => {
            if let Some(end) = end {
                errors.push(FieldError::invalid(
                    &path.child("endPort"),
                    BadValue::Int(end),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for message in port_name_violations(name) {
                errors.push(FieldError::invalid_str(&path.child("port"), name, message));
            }
        }
        _ => {
            if let Some(end) = end {
                errors.push(FieldError::invalid(
                    &path.child("endPort"),
                    BadValue::Int(end),
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

/// `ValidateNetworkPolicyPeer`: at least one peer, and an IP block alone.
fn network_policy_peer(peer: &Value, path: &Path, errors: &mut FieldErrors) {
    let set = |f: &str| peer.get(f).is_some_and(|v| !v.is_null());
    let ip_block = set("ipBlock");
    let count = ["podSelector", "namespaceSelector", "ipBlock"]
        .iter()
        .filter(|f| set(f))
        .count();
    if ip_block && str_at(peer, "/ipBlock/cidr").is_empty() {
        errors.push(FieldError::required(&path.child("ipBlock").child("cidr"), ""));
    }
    if count == 0 {
        errors.push(FieldError::required(path, "must specify a peer"));
    } else if count > 1 && ip_block {
        errors.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

/// `supportedAccessModes`, sorted.
const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// `ValidatePersistentVolumeClaimSpec`: access modes, the storage request.
pub(crate) fn validate_persistent_volume_claim(object: &Value) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let modes = list_at(spec, "/accessModes");
    if modes.is_empty() {
        errors.push(FieldError::required(
            &path.child("accessModes"),
            "at least 1 access mode is required",
        ));
    }
    for mode in modes {
        let mode = mode.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&mode) {
            errors.push(FieldError::not_supported(
                &path.child("accessModes"),
                mode,
                ACCESS_MODES,
            ));
        }
    }
    let storage_path = path.child("resources").key("storage");
    match spec.pointer("/resources/requests/storage") {
        None | Some(Value::Null) => errors.push(FieldError::required(&storage_path, "")),
        Some(value) => {
            let text = match value {
                Value::String(s) => s.trim().to_owned(),
                other => other.to_string(),
            };
            if parse_quantity(&text).is_some_and(|q| q <= 0.0) {
                errors.push(FieldError::invalid_str(
                    &storage_path,
                    &text,
                    "must be greater than zero",
                ));
            }
        }
    }
    errors
}

/// `ValidatePersistentVolumeClaimUpdate` (`old` `Some`) after the claim's own checks: the spec is
/// immutable but for a bound claim's `resources.requests.storage` (and from 1.34, when
/// `VolumeAttributesClass` is on by default, its `volumeAttributesClassName`) and a `volumeName`
/// the old claim did not have; the requested storage may not shrink (below the previous request
/// before 1.32, down to `status.capacity` from 1.32, when `RecoverVolumeExpansionFailure` is on by
/// default). The spec error's text names `volumeAttributesClassName` from 1.29, when the field came.
/// (Upstream also lets a claim move its class from the beta annotation to `storageClassName`; the
/// fake does not.)
pub(crate) fn validate_persistent_volume_claim_update(
    object: &Value,
    old: Option<&Value>,
    version: KubeVersion,
) -> FieldErrors {
    let mut errors = validate_persistent_volume_claim(object);
    let Some(old) = old else {
        return errors;
    };
    let (spec, old_spec) = (
        object.get("spec").cloned().unwrap_or(Value::Null),
        old.get("spec").cloned().unwrap_or(Value::Null),
    );
    let (mut new_clone, mut old_clone) = (spec.clone(), old_spec.clone());
    if str_at(&old_spec, "/volumeName").is_empty()
        && let (Some(o), Some(v)) = (old_clone.as_object_mut(), spec.get("volumeName"))
    {
        o.insert("volumeName".to_owned(), v.clone());
    }
    let bound = str_at(object, "/status/phase") == "Bound";
    if bound
        && let Some(requests) = new_clone
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
    {
        match old_spec.pointer("/resources/requests/storage") {
            Some(storage) => requests.insert("storage".to_owned(), storage.clone()),
            None => requests.remove("storage"),
        };
    }
    if bound
        && version.minor >= 34
        && let Some(map) = new_clone.as_object_mut()
        && map.get("volumeAttributesClassName").is_some_and(|v| !v.is_null())
    {
        match old_spec.get("volumeAttributesClassName") {
            Some(class) => map.insert("volumeAttributesClassName".to_owned(), class.clone()),
            None => map.remove("volumeAttributesClassName"),
        };
    }
    if !super::workloads::semantic_eq(&new_clone, &old_clone) {
        let message = if version.minor >= 29 {
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
        } else {
            "spec is immutable after creation except resources.requests for bound claims"
        };
        errors.push(FieldError::forbidden(
            &Path::new("spec"),
            &format!(
                "{message}\n{}",
                super::spec_diff::json_diff(&old_clone, &new_clone)
            ),
        ));
    }
    let quantity = |v: &Value, pointer: &str| -> f64 {
        match v.pointer(pointer) {
            Some(Value::String(text)) => parse_quantity(text),
            Some(other) => parse_quantity(&other.to_string()),
            None => None,
        }
        .unwrap_or(0.0)
    };
    let storage = "/spec/resources/requests/storage";
    let (new_size, old_size) = (quantity(object, storage), quantity(old, storage));
    let at = Path::new("spec")
        .child("resources")
        .child("requests")
        .child("storage");
    if new_size < old_size {
        if version.minor < 32 {
            errors.push(FieldError::forbidden(
                &at,
                "field can not be less than previous value",
            ));
        } else if new_size <= quantity(old, "/status/capacity/storage") {
            errors.push(FieldError::forbidden(
                &at,
                "field can not be less than status.capacity",
            ));
        }
    }
    errors
}
