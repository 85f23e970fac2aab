//! The pod spec (`ValidatePodSpec`, `ValidatePodTemplateSpec` of upstream's
//! `pkg/apis/core/validation/validation.go`): shared by Pods and every pod template. Covered:
//! containers and init containers (required, names, unique names, image, ports, env names, volume
//! mounts, image pull policy, resources, probes), volumes (names, exactly one source, the sources'
//! required fields), `restartPolicy`, `dnsPolicy`, `activeDeadlineSeconds`, `hostname`.
//!
//! Errors are listed in upstream's order, which is what makes the aggregated message match.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::{
    BadValue, Context, FieldError, FieldErrors, Path, dns1123_label, int_at, list_at, nonnegative, str_at,
};

/// `validateVolumeSource`'s sources, in upstream's order, with the field a source requires (the
/// `Required` path under the source) when it has one.
const VOLUME_SOURCES: &[(&str, Option<&str>)] = &[
    ("emptyDir", None),
    ("hostPath", Some("path")),
    ("gitRepo", Some("repository")),
    ("gcePersistentDisk", Some("pdName")),
    ("awsElasticBlockStore", Some("volumeID")),
    ("secret", None),
    ("nfs", Some("server")),
    ("iscsi", Some("targetPortal")),
    ("glusterfs", Some("endpoints")),
    ("flocker", None),
    ("persistentVolumeClaim", Some("claimName")),
    ("rbd", None),
    ("quobyte", Some("registry")),
    ("cinder", Some("volumeID")),
    ("cephfs", None),
    ("downwardAPI", None),
    ("fc", None),
    ("azureFile", Some("secretName")),
    ("configMap", Some("name")),
    ("vsphereVolume", Some("volumePath")),
    ("photonPersistentDisk", Some("pdID")),
    ("portworxVolume", Some("volumeID")),
    ("azureDisk", Some("diskName")),
    ("storageos", Some("volumeName")),
    ("projected", None),
    ("scaleIO", None),
    ("csi", Some("driver")),
    ("ephemeral", None),
    ("image", None),
    ("flexVolume", Some("driver")),
];

/// `supportedPortProtocols`, as `sets.List` sorts them.
pub(crate) const PORT_PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
/// `supportedPullPolicies`.
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
/// `validateRestartPolicy`'s values.
const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
/// `validateDNSPolicy`'s values.
const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
/// `supportedHTTPSchemes`.
const HTTP_SCHEMES: &[&str] = &["HTTP", "HTTPS"];
/// The resource names a container may request without a domain (`standardContainerResources`).
const STANDARD_CONTAINER_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

/// `ValidatePodCreate` / `ValidatePodUpdate`'s spec part: the pod spec at `spec`.
pub(crate) fn validate_pod(ctx: &Context, object: &Value, _old: Option<&Value>) -> FieldErrors {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let mut errors = validate_pod_spec(ctx, spec, &Path::new("spec"));
    if !list_at(spec, "/ephemeralContainers").is_empty() && _old.is_none() {
        errors.push(FieldError::forbidden(
            &Path::new("spec").child("ephemeralContainers"),
            "cannot be set on create",
        ));
    }
    if let Some(old) = _old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        errors.extend(super::pod_update::validate_pod_update(spec, old_spec));
    }
    errors
}

/// `ValidatePodTemplateSpec`: the template at `path` (required: upstream's workloads report a missing
/// template themselves) and its pod spec.
pub(crate) fn validate_pod_template_spec(ctx: &Context, template: &Value, path: &Path) -> FieldErrors {
    let spec = template.get("spec").unwrap_or(&Value::Null);
    let mut errors = validate_pod_spec(ctx, spec, &path.child("spec"));
    if !list_at(spec, "/ephemeralContainers").is_empty() {
        errors.push(FieldError::forbidden(
            &path.child("spec").child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errors
}

/// `ValidatePodSpec` at `path`.
pub(crate) fn validate_pod_spec(ctx: &Context, spec: &Value, path: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let volumes = validate_volumes(list_at(spec, "/volumes"), &path.child("volumes"), &mut errors);
    let containers = list_at(spec, "/containers");
    validate_containers(ctx, containers, &volumes, &path.child("containers"), &mut errors);
    validate_init_containers(
        ctx,
        list_at(spec, "/initContainers"),
        containers,
        &volumes,
        &path.child("initContainers"),
        &mut errors,
    );
    let restart = str_at(spec, "/restartPolicy");
    let restart_path = path.child("restartPolicy");
    match restart {
        "" => errors.push(FieldError::required(&restart_path, "")),
        p if RESTART_POLICIES.contains(&p) => {}
        p => errors.push(FieldError::not_supported(&restart_path, p, RESTART_POLICIES)),
    }
    let dns = str_at(spec, "/dnsPolicy");
    let dns_path = path.child("dnsPolicy");
    match dns {
        "" => errors.push(FieldError::required(&dns_path, "")),
        p if DNS_POLICIES.contains(&p) => {}
        p => errors.push(FieldError::not_supported(&dns_path, p, DNS_POLICIES)),
    }
    if let Some(seconds) = int_at(spec, "/activeDeadlineSeconds")
        && !(1..=i64::from(i32::MAX)).contains(&seconds)
    {
        errors.push(FieldError::invalid(
            &path.child("activeDeadlineSeconds"),
            BadValue::Int(seconds),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    let hostname = str_at(spec, "/hostname");
    if !hostname.is_empty() {
        dns1123_label(&mut errors, hostname, &path.child("hostname"));
    }
    errors
}

/// `ValidateVolumes`: the valid volumes' names (mounts may only name those).
fn validate_volumes(volumes: &[Value], path: &Path, errors: &mut FieldErrors) -> HashSet<String> {
    let mut names = HashSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let at = path.index(i);
        let name_path = at.child("name");
        let name = str_at(volume, "/name");
        let mut found = validate_volume_source(volume, &at);
        if name.is_empty() {
            found.push(FieldError::required(&name_path, ""));
        } else {
            dns1123_label(&mut found, name, &name_path);
        }
        if names.contains(name) {
            found.push(FieldError::duplicate(&name_path, BadValue::Str(name.to_owned())));
        }
        if found.is_empty() {
            names.insert(name.to_owned());
        } else {
            errors.extend(found);
        }
    }
    names
}

/// `validateVolumeSource`: exactly one source, and what the source needs.
fn validate_volume_source(volume: &Value, path: &Path) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let mut count = 0;
    for (source, required) in VOLUME_SOURCES {
        let Some(value) = volume.get(*source).filter(|v| !v.is_null()) else {
            continue;
        };
        let source_path = path.child(source);
        if count > 0 {
            errors.push(FieldError::forbidden(
                &source_path,
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        if let Some(field) = required
            && str_at(value, &format!("/{field}")).is_empty()
        {
            errors.push(FieldError::required(&source_path.child(field), ""));
        }
    }
    if count == 0 {
        errors.push(FieldError::required(path, "must specify a volume type"));
    }
    errors
}

/// `validateContainers`.
fn validate_containers(
    ctx: &Context,
    containers: &[Value],
    volumes: &HashSet<String>,
    path: &Path,
    errors: &mut FieldErrors,
) {
    if containers.is_empty() {
        errors.push(FieldError::required(path, ""));
        return;
    }
    let mut names = HashSet::new();
    for (i, container) in containers.iter().enumerate() {
        let at = path.index(i);
        validate_container_common(ctx, container, volumes, &at, errors);
        let name = str_at(container, "/name");
        if !names.insert(name) {
            errors.push(FieldError::duplicate(
                &at.child("name"),
                BadValue::Str(name.to_owned()),
            ));
        }
        validate_probe(container, "livenessProbe", &at, errors);
        validate_probe(container, "readinessProbe", &at, errors);
        validate_probe(container, "startupProbe", &at, errors);
        if container.get("restartPolicy").is_some_and(|p| !p.is_null()) {
            errors.push(FieldError::forbidden(
                &at.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
}

/// `validateInitContainers`: names unique across init and regular containers; probes only on
/// restartable (sidecar) init containers.
fn validate_init_containers(
    ctx: &Context,
    containers: &[Value],
    regular: &[Value],
    volumes: &HashSet<String>,
    path: &Path,
    errors: &mut FieldErrors,
) {
    let mut names: HashSet<&str> = regular.iter().map(|c| str_at(c, "/name")).collect();
    for (i, container) in containers.iter().enumerate() {
        let at = path.index(i);
        validate_container_common(ctx, container, volumes, &at, errors);
        let restart = str_at(container, "/restartPolicy");
        if container.get("restartPolicy").is_some_and(|p| !p.is_null()) && restart != "Always" {
            errors.push(FieldError::not_supported(
                &at.child("restartPolicy"),
                restart,
                &["Always"],
            ));
        }
        let name = str_at(container, "/name");
        if names.contains(name) {
            errors.push(FieldError::duplicate(
                &at.child("name"),
                BadValue::Str(name.to_owned()),
            ));
        } else if !name.is_empty() {
            names.insert(name);
        }
        if restart == "Always" {
            validate_probe(container, "livenessProbe", &at, errors);
            validate_probe(container, "readinessProbe", &at, errors);
            validate_probe(container, "startupProbe", &at, errors);
        } else {
            for probe in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
                if container.get(probe).is_some_and(|p| !p.is_null()) {
                    errors.push(FieldError::forbidden(
                        &at.child(probe),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
    }
}

/// `validateContainerCommon`: what every kind of container needs.
fn validate_container_common(
    ctx: &Context,
    container: &Value,
    volumes: &HashSet<String>,
    path: &Path,
    errors: &mut FieldErrors,
) {
    let name_path = path.child("name");
    let name = str_at(container, "/name");
    if name.is_empty() {
        errors.push(FieldError::required(&name_path, ""));
    } else {
        dns1123_label(errors, name, &name_path);
    }
    let image = str_at(container, "/image");
    if image.is_empty() {
        errors.push(FieldError::required(&path.child("image"), ""));
    } else if image.trim() != image {
        errors.push(FieldError::invalid_str(
            &path.child("image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    validate_container_ports(list_at(container, "/ports"), &path.child("ports"), errors);
    validate_env(ctx, list_at(container, "/env"), &path.child("env"), errors);
    validate_volume_mounts(
        list_at(container, "/volumeMounts"),
        volumes,
        &path.child("volumeMounts"),
        errors,
    );
    let pull = str_at(container, "/imagePullPolicy");
    let pull_path = path.child("imagePullPolicy");
    match pull {
        "" => errors.push(FieldError::required(&pull_path, "")),
        p if PULL_POLICIES.contains(&p) => {}
        p => errors.push(FieldError::not_supported(&pull_path, p, PULL_POLICIES)),
    }
    validate_resources(
        ctx,
        container.get("resources").unwrap_or(&Value::Null),
        &path.child("resources"),
        errors,
    );
}

/// `validateContainerPorts`.
fn validate_container_ports(ports: &[Value], path: &Path, errors: &mut FieldErrors) {
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = path.index(i);
        let name = str_at(port, "/name");
        if !name.is_empty() {
            let messages = port_name_violations(name);
            if !messages.is_empty() {
                for message in messages {
                    errors.push(FieldError::invalid_str(&at.child("name"), name, message));
                }
            } else if !names.insert(name) {
                errors.push(FieldError::duplicate(
                    &at.child("name"),
                    BadValue::Str(name.to_owned()),
                ));
            }
        }
        match int_at(port, "/containerPort").unwrap_or(0) {
            0 => errors.push(FieldError::required(&at.child("containerPort"), "")),
            n => port_number(errors, n, &at.child("containerPort")),
        }
        match int_at(port, "/hostPort").unwrap_or(0) {
            0 => {}
            n => port_number(errors, n, &at.child("hostPort")),
        }
        match str_at(port, "/protocol") {
            "" => errors.push(FieldError::required(&at.child("protocol"), "")),
            p if PORT_PROTOCOLS.contains(&p) => {}
            p => errors.push(FieldError::not_supported(
                &at.child("protocol"),
                p,
                PORT_PROTOCOLS,
            )),
        }
    }
}

/// `IsValidPortNum`: `must be between 1 and 65535, inclusive`.
pub(crate) fn port_number(errors: &mut FieldErrors, port: i64, path: &Path) {
    if !(1..=65535).contains(&port) {
        errors.push(FieldError::invalid(
            path,
            BadValue::Int(port),
            "must be between 1 and 65535, inclusive",
        ));
    }
}

/// `IsValidPortName` (an IANA_SVC_NAME): its messages, in upstream's order.
pub(crate) fn port_name_violations(name: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if name.len() > 15 {
        out.push("must be no more than 15 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        out.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        out.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        out.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        out.push("must not begin or end with a hyphen");
    }
    out
}

/// `ValidatePortNumOrName`: an int-or-string port.
pub(crate) fn port_number_or_name(errors: &mut FieldErrors, port: Option<&Value>, path: &Path) {
    match port {
        Some(Value::Number(n)) => port_number(errors, n.as_i64().unwrap_or(0), path),
        Some(Value::String(name)) => {
            for message in port_name_violations(name) {
                errors.push(FieldError::invalid_str(path, name, message));
            }
        }
        _ => port_number(errors, 0, path),
    }
}

/// `ValidateEnv`: names required and valid (`IsEnvVarName`, or `IsRelaxedEnvVarName` when the
/// options allow relaxed names); a value and a source are exclusive.
fn validate_env(ctx: &Context, env: &[Value], path: &Path, errors: &mut FieldErrors) {
    for (i, var) in env.iter().enumerate() {
        let at = path.index(i);
        let name = str_at(var, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&at.child("name"), ""));
        } else {
            let messages = if ctx.relaxed_env_names {
                relaxed_env_var_name_violations(name)
            } else {
                env_var_name_violations(name)
            };
            for message in messages {
                errors.push(FieldError::invalid_str(&at.child("name"), name, message));
            }
        }
        if !str_at(var, "/value").is_empty() && var.get("valueFrom").is_some_and(|v| !v.is_null()) {
            errors.push(FieldError::invalid_str(
                &at.child("valueFrom"),
                "",
                "may not be specified when `value` is not empty",
            ));
        }
    }
}

/// `IsEnvVarName`'s message: `envVarNameFmtErrMsg` through `RegexError` with its examples.
const ENV_VAR_NAME_MESSAGE: &str = "a valid environment variable name must consist of alphabetic characters, \
    digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or \
    'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";

/// `IsEnvVarName` (apimachinery `util/validation`): `[-._a-zA-Z][-._a-zA-Z0-9]*`, and not `.`, `..`
/// or `..`-prefixed (`hasChDirPrefix`).
fn env_var_name_violations(name: &str) -> Vec<&'static str> {
    let mut messages = Vec::new();
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'));
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
        messages.push(ENV_VAR_NAME_MESSAGE);
    }
    match name {
        "." => messages.push("must not be '.'"),
        ".." => messages.push("must not be '..'"),
        n if n.starts_with("..") => messages.push("must not start with '..'"),
        _ => {}
    }
    messages
}

/// `IsRelaxedEnvVarName`: printable ASCII but `=`.
fn relaxed_env_var_name_violations(name: &str) -> Vec<&'static str> {
    if name.chars().all(|c| (' '..='~').contains(&c) && c != '=') {
        Vec::new()
    } else {
        vec![
            "a valid environment variable name must consist only of printable ASCII characters other than '='",
        ]
    }
}

/// `useRelaxedEnvironmentVariableValidation` without its gate: whether a name of `spec`'s containers
/// (env names and `envFrom` prefixes, `gatherPodEnvVarNames`) that only the relaxed rule accepts was
/// already in `old_spec` (`relaxedEnvVarUsed`).
pub(crate) fn relaxed_env_names_in_use(spec: &Value, old_spec: &Value) -> bool {
    let gather = |spec: &Value| -> HashSet<String> {
        let mut names = HashSet::new();
        for list in ["/containers", "/initContainers", "/ephemeralContainers"] {
            for container in list_at(spec, list) {
                names.extend(
                    list_at(container, "/env")
                        .iter()
                        .map(|e| str_at(e, "/name").to_owned()),
                );
                names.extend(
                    list_at(container, "/envFrom")
                        .iter()
                        .map(|e| str_at(e, "/prefix").to_owned()),
                );
            }
        }
        names
    };
    let old_names = gather(old_spec);
    !old_names.is_empty()
        && gather(spec).iter().any(|name| {
            !env_var_name_violations(name).is_empty()
                && relaxed_env_var_name_violations(name).is_empty()
                && old_names.contains(name)
        })
}

/// `ValidateVolumeMounts`: each names a valid volume, has a unique mount path.
fn validate_volume_mounts(
    mounts: &[Value],
    volumes: &HashSet<String>,
    path: &Path,
    errors: &mut FieldErrors,
) {
    let mut mount_paths = HashSet::new();
    for (i, mount) in mounts.iter().enumerate() {
        let at = path.index(i);
        let name = str_at(mount, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&at.child("name"), ""));
        }
        if !volumes.contains(name) {
            errors.push(FieldError::not_found(&at.child("name"), name));
        }
        let mount_path = str_at(mount, "/mountPath");
        if mount_path.is_empty() {
            errors.push(FieldError::required(&at.child("mountPath"), ""));
        }
        if !mount_paths.insert(mount_path) {
            errors.push(FieldError::invalid_str(
                &at.child("mountPath"),
                mount_path,
                "must be unique",
            ));
        }
    }
}

/// `ValidateContainerResources`: resource names, non-negative quantities, requests ≤ limits (in key
/// order: upstream iterates a Go map, whose order varies, so only one such error is deterministic).
fn validate_resources(_ctx: &Context, resources: &Value, path: &Path, errors: &mut FieldErrors) {
    let limits = quantities(resources.get("limits"));
    let requests = quantities(resources.get("requests"));
    let limits_path = path.child("limits");
    let requests_path = path.child("requests");
    for (name, quantity) in &limits {
        let at = limits_path.key(name);
        resource_name(errors, name, &at);
        quantity_value(errors, quantity, &at);
    }
    for (name, quantity) in &requests {
        let at = requests_path.key(name);
        resource_name(errors, name, &at);
        quantity_value(errors, quantity, &at);
        let (Some(limit), Some(request)) = (
            limits.get(name).and_then(|q| parse_quantity(q)),
            parse_quantity(quantity),
        ) else {
            continue;
        };
        let overcommit = STANDARD_CONTAINER_RESOURCES.contains(&name.as_str());
        if !overcommit && request != limit {
            errors.push(FieldError::invalid_str(
                &at,
                quantity,
                &format!("must be equal to {name} limit of {}", limits[name]),
            ));
        } else if request > limit {
            errors.push(FieldError::invalid_str(
                &at,
                quantity,
                &format!("must be less than or equal to {name} limit of {}", limits[name]),
            ));
        }
    }
}

/// A resource list's quantities as written (numbers as Go prints them).
fn quantities(list: Option<&Value>) -> BTreeMap<String, String> {
    list.and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.trim().to_owned(),
                        other => other.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `validateContainerResourceName`: a standard resource, a `hugepages-` one or a domain-qualified
/// (extended) one.
fn resource_name(errors: &mut FieldErrors, name: &str, path: &Path) {
    let standard = STANDARD_CONTAINER_RESOURCES.contains(&name) || name.starts_with("hugepages-");
    if !standard && !name.contains('/') {
        errors.push(FieldError::invalid_str(
            path,
            name,
            "must be a standard resource for containers",
        ));
    }
}

/// `ValidateResourceQuantityValue`: not negative.
fn quantity_value(errors: &mut FieldErrors, quantity: &str, path: &Path) {
    if parse_quantity(quantity).is_some_and(|q| q < 0.0) {
        errors.push(FieldError::invalid_str(
            path,
            quantity,
            "must be greater than or equal to 0",
        ));
    }
}

/// A `resource.Quantity`'s value (`^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`), close enough to
/// compare requests with limits; `None` when it does not parse (decoding refuses those first).
pub(crate) fn parse_quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '+' || *c == '-'))))
        .map_or(text.len(), |(i, _)| i);
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            10f64.powi(digits.parse().ok()?)
        }
    };
    Some(number * factor)
}

/// `validateProbe` of the container's `probe` field, when set: exactly one handler, non-negative
/// timings; liveness and startup probes succeed after one success.
fn validate_probe(container: &Value, probe: &str, container_path: &Path, errors: &mut FieldErrors) {
    let Some(value) = container.get(probe).filter(|p| !p.is_null()) else {
        return;
    };
    let path = container_path.child(probe);
    let mut handlers = 0;
    for handler in ["exec", "httpGet", "tcpSocket", "grpc"] {
        let Some(action) = value.get(handler).filter(|h| !h.is_null()) else {
            continue;
        };
        let at = path.child(handler);
        if handlers > 0 {
            errors.push(FieldError::forbidden(
                &at,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        handlers += 1;
        match handler {
            "exec" => {
                if list_at(action, "/command").is_empty() {
                    errors.push(FieldError::required(&at.child("command"), ""));
                }
            }
            "httpGet" => {
                if str_at(action, "/path").is_empty() {
                    errors.push(FieldError::required(&at.child("path"), ""));
                }
                port_number_or_name(errors, action.get("port"), &at.child("port"));
                let scheme = str_at(action, "/scheme");
                if !HTTP_SCHEMES.contains(&scheme) {
                    errors.push(FieldError::not_supported(
                        &at.child("scheme"),
                        scheme,
                        HTTP_SCHEMES,
                    ));
                }
            }
            "tcpSocket" => port_number_or_name(errors, action.get("port"), &at.child("port")),
            _ => {
                if let Some(port) = int_at(action, "/port") {
                    port_number(errors, port, &at.child("port"));
                }
            }
        }
    }
    if handlers == 0 {
        errors.push(FieldError::required(&path, "must specify a handler type"));
    }
    for field in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        nonnegative(errors, int_at(value, &format!("/{field}")), &path.child(field));
    }
    if let Some(grace) = int_at(value, "/terminationGracePeriodSeconds") {
        if probe == "readinessProbe" {
            errors.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                BadValue::Int(grace),
                "must not be set for readinessProbes",
            ));
        } else if grace <= 0 {
            errors.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                BadValue::Int(grace),
                "must be greater than 0",
            ));
        }
    }
    if probe != "readinessProbe"
        && let Some(success) = int_at(value, "/successThreshold")
        && success != 1
    {
        errors.push(FieldError::invalid(
            &path.child("successThreshold"),
            BadValue::Int(success),
            "must be 1",
        ));
    }
}
