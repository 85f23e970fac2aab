//! Services (`ValidateService`, `ValidateServiceUpdate` of `pkg/apis/core/validation`): ports
//! (required unless headless or `ExternalName`, names, numbers, protocols, target ports, duplicates),
//! `type` and `sessionAffinity` values, `ExternalName`'s name, node ports on `ClusterIP` Services, and
//! on update the cluster IPs, which may not change once set.

use std::collections::HashSet;

use serde_json::Value;

use super::pod::{PORT_PROTOCOLS, port_number, port_number_or_name};
use super::{
    BadValue, Context, FieldError, FieldErrors, Path, dns1123_label, dns1123_subdomain, int_at, list_at,
    str_at,
};

/// `supportedServiceType`, sorted.
const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
/// `supportedSessionAffinityType`, sorted.
const SESSION_AFFINITIES: &[&str] = &["ClientIP", "None"];

/// `ValidateService`, and on update `validateUpgradeDowngradeClusterIPs`.
pub(crate) fn validate_service(_ctx: &Context, object: &Value, old: Option<&Value>) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let mut errors = FieldErrors::new();
    let kind = str_at(spec, "/type");
    let headless = str_at(spec, "/clusterIP") == "None";
    let ports = list_at(spec, "/ports");
    if ports.is_empty() && !headless && kind != "ExternalName" {
        errors.push(FieldError::required(&path.child("ports"), ""));
    }
    if kind == "ExternalName" {
        let cname = str_at(spec, "/externalName");
        let cname = cname.strip_suffix('.').unwrap_or(cname);
        if cname.is_empty() {
            errors.push(FieldError::required(&path.child("externalName"), ""));
        } else {
            dns1123_subdomain(&mut errors, cname, &path.child("externalName"));
        }
    }
    let ports_path = path.child("ports");
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = ports_path.index(i);
        let name = str_at(port, "/name");
        if ports.len() > 1 && name.is_empty() {
            errors.push(FieldError::required(&at.child("name"), ""));
        } else if !name.is_empty() {
            dns1123_label(&mut errors, name, &at.child("name"));
            if !names.insert(name) {
                errors.push(FieldError::duplicate(
                    &at.child("name"),
                    BadValue::Str(name.to_owned()),
                ));
            }
        }
        port_number(&mut errors, int_at(port, "/port").unwrap_or(0), &at.child("port"));
        match str_at(port, "/protocol") {
            "" => errors.push(FieldError::required(&at.child("protocol"), "")),
            p if PORT_PROTOCOLS.contains(&p) => {}
            p => errors.push(FieldError::not_supported(
                &at.child("protocol"),
                p,
                PORT_PROTOCOLS,
            )),
        }
        port_number_or_name(&mut errors, port.get("targetPort"), &at.child("targetPort"));
    }
    let affinity_path = path.child("sessionAffinity");
    match str_at(spec, "/sessionAffinity") {
        "" => errors.push(FieldError::required(&affinity_path, "")),
        a if SESSION_AFFINITIES.contains(&a) => {}
        a => errors.push(FieldError::not_supported(&affinity_path, a, SESSION_AFFINITIES)),
    }
    match kind {
        "" => errors.push(FieldError::required(&path.child("type"), "")),
        t if SERVICE_TYPES.contains(&t) => {}
        t => errors.push(FieldError::not_supported(&path.child("type"), t, SERVICE_TYPES)),
    }
    if kind == "ClusterIP" {
        for (i, port) in ports.iter().enumerate() {
            if int_at(port, "/nodePort").unwrap_or(0) != 0 {
                errors.push(FieldError::forbidden(
                    &ports_path.index(i).child("nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut seen = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let protocol = str_at(port, "/protocol");
        let number = int_at(port, "/port").unwrap_or(0);
        if !seen.insert((protocol, number)) {
            errors.push(FieldError::duplicate(
                &ports_path.index(i),
                BadValue::Rendered {
                    go: format!(
                        "core.ServicePort{{Name:\"\", Protocol:{protocol:?}, AppProtocol:(*string)(nil), \
                         Port:{number}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}"
                    ),
                    json: format!(
                        "{{\"Name\":\"\",\"Protocol\":{protocol:?},\"AppProtocol\":null,\"Port\":{number},\
                         \"TargetPort\":0,\"NodePort\":0}}"
                    ),
                },
            ));
        }
    }
    if let Some(old) = old.and_then(|o| o.get("spec")) {
        cluster_ips_unchanged(spec, old, &mut errors);
    }
    errors
}

/// `validateUpgradeDowngradeClusterIPs`: the primary cluster IP (and a kept secondary) may not change
/// once set, except to or from `ExternalName` and between headless Services. The strategy's
/// `NormalizeClusterIPs` runs first: a changed `clusterIP` with unchanged `clusterIPs` is the new list.
fn cluster_ips_unchanged(spec: &Value, old: &Value, errors: &mut FieldErrors) {
    if str_at(spec, "/type") == "ExternalName" || str_at(old, "/type") == "ExternalName" {
        return;
    }
    let headless = |s: &Value| str_at(s, "/clusterIP") == "None";
    if headless(spec) && headless(old) {
        return;
    }
    let ips = |s: &Value| -> Vec<String> {
        list_at(s, "/clusterIPs")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let old_ips = ips(old);
    let mut new_ips = ips(spec);
    let cluster_ip = str_at(spec, "/clusterIP");
    if cluster_ip != str_at(old, "/clusterIP") && new_ips == old_ips {
        new_ips = if cluster_ip.is_empty() {
            Vec::new()
        } else {
            vec![cluster_ip.to_owned()]
        };
    }
    let path = Path::new("spec").child("clusterIPs");
    let value = || BadValue::StringList(new_ips.clone());
    if old_ips.len() == new_ips.len() {
        for (i, ip) in old_ips.iter().enumerate() {
            if *ip != new_ips[i] {
                errors.push(FieldError::invalid(
                    &path.index(i),
                    value(),
                    "may not change once set",
                ));
            }
        }
    } else if old_ips.len() > new_ips.len() {
        if new_ips.is_empty() {
            errors.push(FieldError::invalid(
                &path.index(0),
                value(),
                "primary clusterIP can not be unset",
            ));
        } else if new_ips[0] != old_ips[0] {
            errors.push(FieldError::invalid(
                &path.index(0),
                value(),
                "may not change once set",
            ));
        }
    } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
        errors.push(FieldError::invalid(
            &path.index(0),
            value(),
            "may not change once set",
        ));
    }
}
