//! `cluster --config FILE`: a cluster described in YAML, in the spirit of kind's config file.
//!
//! ```yaml
//! servers:
//! - {name: old, version: "1.34"}
//! - {name: new, version: "1.36", runtime-config: "batch/v1=false", feature-gates: "SomeGate=true"}
//! store: memory        # memory (default) | etcd | {etcd-servers: "http://..."}
//! run: in-process      # in-process (default) | processes | containers
//! lb: embedded         # embedded (default) | haproxy | none
//! controllers: true    # the controller manager (default: true)
//! ```
//!
//! A server may also have `flags` (any other kube-apiserver flag the fake has, `{authorization-mode:
//! RBAC}` for `--authorization-mode=RBAC`) and `note` (the table's SERVES column); the file may have
//! `try` (the kubectl arguments the table suggests). Server `i` listens on `127.0.0.(i+1)`.
//!
//! A server with `binary: PATH` (instead of `version`) is a real kube-apiserver, started with the
//! cluster's PKI, etcd and peer flags ([`super::real_member`]); it needs `run: processes` on etcd.
//!
//! Every mistake is one line naming the file, the line and column, and the key: unknown keys, a
//! version outside the fake's catalog, a duplicate or malformed name, flags a server refuses, and a
//! mix the Mixed Version Proxy cannot serve (servers with the proxy on that resolve peers differently:
//! before 1.33 by StorageVersion, from 1.33 by discovery, so neither finds what the other serves).
//! The presets of `cluster --preset` are such files ([`PRESETS`]), shipped in `examples/clusters/`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_saphyr::Spanned;

use crate::api::catalog::KubeVersion;
use crate::cluster::MemberSpec;
use crate::cluster::load_balancer::LoadBalancerKind;
use crate::cluster::real_member::{self, KubeApiserverBinary};
use crate::server::config::ServerFlags;

/// The presets `cluster --preset NAME` starts: the example files, compiled in.
pub(crate) const PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../examples/clusters/default.yaml")),
    ("upgrade", include_str!("../../examples/clusters/upgrade.yaml")),
];

/// At most this many servers (each takes one `127.0.0.x` address; the load balancer has its own).
pub(crate) const MAX_SERVERS: usize = 200;

/// Where the cluster keeps its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// One in-memory store shared by in-process servers.
    Memory,
    /// A private etcd the cluster starts (its data in `DIR/etcd`).
    PrivateEtcd,
    /// An existing etcd at these client URLs.
    ExistingEtcd(Vec<String>),
}

/// How the servers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// Every server in the `cluster` process.
    InProcess,
    /// Every server its own OS process of this binary.
    Processes,
    /// Every server its own Docker container of this binary, etcd in a container too
    /// ([`crate::cluster::containers`]).
    Containers,
}

/// A checked cluster description.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The servers, in file order.
    pub members: Vec<MemberSpec>,
    /// The store.
    pub store: StoreChoice,
    /// How the servers run.
    pub run: RunMode,
    /// The load balancer in front.
    pub lb: LoadBalancerKind,
    /// Whether the controller manager runs (`controllers:`).
    pub controller_manager: bool,
}

/// A mistake in a config file: where it is and what it is.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{column}: {key}: {message}")]
pub struct ConfigError {
    /// The file (or `preset NAME`).
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: u64,
    /// 1-based column (0 when unknown).
    pub column: u64,
    /// The key, as a path (`servers[1].version`).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// `store:` as written: a name or `{etcd-servers: "URL,URL"}`.
#[derive(Debug)]
enum RawStore {
    Name(String),
    Existing(String),
}

impl<'de> Deserialize<'de> for RawStore {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StoreVisitor;
        impl<'de> Visitor<'de> for StoreVisitor {
            type Value = RawStore;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("memory, etcd or {etcd-servers: \"http://...\"}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawStore, E> {
                Ok(RawStore::Name(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawStore, A::Error> {
                let mut servers = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "etcd-servers" {
                        return Err(de::Error::unknown_field(&key, &["etcd-servers"]));
                    }
                    servers = Some(map.next_value::<String>()?);
                }
                servers
                    .map(RawStore::Existing)
                    .ok_or_else(|| de::Error::missing_field("etcd-servers"))
            }
        }
        deserializer.deserialize_any(StoreVisitor)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawServer {
    name: Spanned<String>,
    version: Option<Spanned<String>>,
    binary: Option<Spanned<String>>,
    runtime_config: Option<String>,
    feature_gates: Option<String>,
    #[serde(default)]
    flags: BTreeMap<String, Spanned<String>>,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    servers: Spanned<Vec<RawServer>>,
    store: Option<Spanned<RawStore>>,
    run: Option<Spanned<String>>,
    lb: Option<Spanned<String>>,
    controllers: Option<bool>,
    #[serde(rename = "try")]
    try_command: Option<String>,
}

impl ClusterConfig {
    /// Reads and checks `path`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: 0,
            column: 0,
            key: "(file)".to_owned(),
            message: e.to_string(),
        })?;
        Self::parse(&file, &text)
    }

    /// The preset `name` ([`PRESETS`]).
    pub fn preset(name: &str) -> Result<Self, String> {
        let (_, text) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            let known: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
            format!("unknown preset {name:?} (known: {})", known.join(", "))
        })?;
        Self::parse(&format!("preset {name}"), text).map_err(|e| e.to_string())
    }

    /// Checks the YAML `text` read from `file` (named in errors).
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            let (key, message) = parser_message(&e.to_string());
            ConfigError {
                file: file.to_owned(),
                line,
                column,
                key,
                message,
            }
        })?;
        let err = FileErrors(file);
        let run = run_mode(raw.run.as_ref(), err)?;
        let store = store_choice(raw.store.as_ref(), err)?;
        let lb = match raw.lb.as_ref() {
            None => LoadBalancerKind::Embedded,
            Some(lb) => lb.value.parse().map_err(|e| err.at(&lb.referenced, "lb", e))?,
        };
        check_run_and_store(run, &store, &raw, err)?;
        check_server_count(&raw.servers, err)?;
        let try_command = raw
            .try_command
            .clone()
            .unwrap_or_else(|| "get namespaces".to_owned());
        let mut members = Vec::with_capacity(raw.servers.value.len());
        // (version, peer resolution mode) of the first server with the proxy on.
        let mut first_proxy: Option<(String, mvp_core::PeerResolutionMode)> = None;
        for index in 0..raw.servers.value.len() {
            let member = member_spec(&raw.servers.value, index, run, err, &mut first_proxy)?;
            members.push(MemberSpec {
                try_command: try_command.clone(),
                ..member
            });
        }
        Ok(Self {
            members,
            store,
            run,
            lb,
            controller_manager: raw.controllers.unwrap_or(true),
        })
    }
}

/// Makes the errors of one file: each names the file, the place in it and the key.
#[derive(Debug, Clone, Copy)]
struct FileErrors<'a>(&'a str);

impl FileErrors<'_> {
    fn at(self, at: &serde_saphyr::Location, key: &str, message: String) -> ConfigError {
        ConfigError {
            file: self.0.to_owned(),
            line: at.line(),
            column: at.column(),
            key: key.to_owned(),
            message,
        }
    }
}

/// The `run:` key (in-process when left out).
fn run_mode(run: Option<&Spanned<String>>, err: FileErrors) -> Result<RunMode, ConfigError> {
    let Some(run) = run else {
        return Ok(RunMode::InProcess);
    };
    match run.value.as_str() {
        "in-process" => Ok(RunMode::InProcess),
        "processes" => Ok(RunMode::Processes),
        "containers" => Ok(RunMode::Containers),
        other => Err(err.at(
            &run.referenced,
            "run",
            format!("unknown value {other:?} (known: in-process, processes, containers)"),
        )),
    }
}

/// The `store:` key (memory when left out).
fn store_choice(store: Option<&Spanned<RawStore>>, err: FileErrors) -> Result<StoreChoice, ConfigError> {
    let Some(store) = store else {
        return Ok(StoreChoice::Memory);
    };
    match &store.value {
        RawStore::Name(name) if name == "memory" => Ok(StoreChoice::Memory),
        RawStore::Name(name) if name == "etcd" => Ok(StoreChoice::PrivateEtcd),
        RawStore::Name(other) => Err(err.at(
            &store.referenced,
            "store",
            format!("unknown value {other:?} (known: memory, etcd, {{etcd-servers: \"http://...\"}})"),
        )),
        RawStore::Existing(urls) => {
            let urls: Vec<String> = urls
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_owned)
                .collect();
            if urls.is_empty() {
                return Err(err.at(
                    &store.referenced,
                    "store.etcd-servers",
                    "names no etcd client URL".to_owned(),
                ));
            }
            Ok(StoreChoice::ExistingEtcd(urls))
        }
    }
}

/// What the command can run, checked here so that the mistake points at the file.
fn check_run_and_store(
    run: RunMode,
    store: &StoreChoice,
    raw: &RawConfig,
    err: FileErrors,
) -> Result<(), ConfigError> {
    match (run, store, raw.run.as_ref(), raw.store.as_ref()) {
        (RunMode::Containers, StoreChoice::Memory, Some(at), _) => Err(err.at(
            &at.referenced,
            "run",
            "containers share their objects through etcd: add `store: etcd` (it runs in a container too)"
                .to_owned(),
        )),
        (RunMode::Containers, StoreChoice::ExistingEtcd(_), _, Some(at)) => Err(err.at(
            &at.referenced,
            "store",
            "containers run their own etcd in a container on their network: use `store: etcd`".to_owned(),
        )),
        (RunMode::Processes, StoreChoice::Memory, Some(at), _) => Err(err.at(
            &at.referenced,
            "run",
            "separate processes share their objects through etcd: add `store: etcd` (or {etcd-servers: ...})"
                .to_owned(),
        )),
        (RunMode::InProcess, StoreChoice::PrivateEtcd | StoreChoice::ExistingEtcd(_), _, Some(at)) => {
            Err(err.at(
                &at.referenced,
                "store",
                "in-process servers share one in-memory store: etcd needs `run: processes`".to_owned(),
            ))
        }
        _ => Ok(()),
    }
}

/// At least one server, at most [`MAX_SERVERS`].
fn check_server_count(servers: &Spanned<Vec<RawServer>>, err: FileErrors) -> Result<(), ConfigError> {
    if servers.value.is_empty() {
        return Err(err.at(&servers.referenced, "servers", "lists no server".to_owned()));
    }
    if servers.value.len() > MAX_SERVERS {
        return Err(err.at(
            &servers.referenced,
            "servers",
            format!("{} servers; at most {MAX_SERVERS}", servers.value.len()),
        ));
    }
    Ok(())
}

/// `servers[index].field`, the key errors about a server's field name.
fn server_key(index: usize, field: &str) -> String {
    format!("servers[{index}].{field}")
}

/// The member `servers[index]` describes (its `try_command` left empty for the caller), checked on its
/// own and against the servers before it (names unique, one peer resolution mode among those with the
/// proxy on, recorded in `first_proxy`).
fn member_spec(
    servers: &[RawServer],
    index: usize,
    run: RunMode,
    err: FileErrors,
    first_proxy: &mut Option<(String, mvp_core::PeerResolutionMode)>,
) -> Result<MemberSpec, ConfigError> {
    let server = &servers[index];
    check_member_name(servers, index, err)?;
    let binary = member_binary(server, index, run, err)?;
    let version = member_version(server, index, binary.as_ref(), err)?;
    let extra_flags = member_flags(server, index, version, err)?;
    let proxy = member_proxy_mode(server, index, version, &extra_flags, err)?;
    let version_text = version.to_string();
    if let Some(peer_resolution_mode) = proxy {
        check_proxy_agreement(
            server,
            index,
            &version_text,
            peer_resolution_mode,
            first_proxy,
            err,
        )?;
    }
    let octet = u8::try_from(index + 1).unwrap_or(u8::MAX);
    let note = server
        .note
        .clone()
        .unwrap_or_else(|| match (&server.runtime_config, &server.feature_gates) {
            (Some(rc), _) => format!("runtime-config {rc}"),
            (None, Some(gates)) => format!("feature-gates {gates}"),
            (None, None) => "all default APIs".to_owned(),
        });
    Ok(MemberSpec {
        name: server.name.value.clone(),
        ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, octet)),
        kubernetes_version: version_text,
        extra_flags,
        note,
        try_command: String::new(),
        binary: binary.map(|b| b.path),
    })
}

/// A server's name: a DNS label, not `cluster`, not taken by an earlier server.
fn check_member_name(servers: &[RawServer], index: usize, err: FileErrors) -> Result<(), ConfigError> {
    let server = &servers[index];
    let name = &server.name.value;
    let key = server_key(index, "name");
    if !is_dns_label(name) {
        return Err(err.at(
            &server.name.referenced,
            &key,
            format!("{name:?} is not a DNS label (lowercase letters, digits and '-', at most 63)"),
        ));
    }
    if name == "cluster" {
        return Err(err.at(
            &server.name.referenced,
            &key,
            "\"cluster\" is the load balancer's kubeconfig (cluster.kubeconfig); pick another name"
                .to_owned(),
        ));
    }
    if let Some(first) = servers[..index].iter().position(|s| s.name.value == *name) {
        return Err(err.at(
            &server.name.referenced,
            &key,
            format!("duplicate name {name:?} (also servers[{first}])"),
        ));
    }
    Ok(())
}

/// The real kube-apiserver binary a server runs, if it names one (only as its own process).
fn member_binary(
    server: &RawServer,
    index: usize,
    run: RunMode,
    err: FileErrors,
) -> Result<Option<KubeApiserverBinary>, ConfigError> {
    let Some(binary) = &server.binary else {
        return Ok(None);
    };
    if run != RunMode::Processes {
        return Err(err.at(
            &binary.referenced,
            &server_key(index, "binary"),
            "a kube-apiserver binary runs as its own process on etcd: set `run: processes` and `store: etcd`"
                .to_owned(),
        ));
    }
    let base = Path::new(err.0).parent().unwrap_or(Path::new(""));
    let resolved = KubeApiserverBinary::resolve(&binary.value, base)
        .map_err(|e| err.at(&binary.referenced, &server_key(index, "binary"), e.to_string()))?;
    Ok(Some(resolved))
}

/// A server's version: a real kube-apiserver reports its own (a `version` given too must agree); a fake
/// is told it (the catalog's message names the range it serves).
fn member_version<'a>(
    server: &RawServer,
    index: usize,
    binary: Option<&'a KubeApiserverBinary>,
    err: FileErrors,
) -> Result<MemberVersion<'a>, ConfigError> {
    let key = server_key(index, "version");
    match (&server.version, binary) {
        (Some(version), Some(binary)) => {
            if real_member::parse_version(&format!("v{}", version.value)).map(|(v, _)| v)
                != Some(binary.version.clone())
            {
                return Err(err.at(
                    &version.referenced,
                    &key,
                    format!(
                        "{:?}, but {} is {} (leave `version` out for a binary)",
                        version.value,
                        binary.path.display(),
                        binary.version
                    ),
                ));
            }
            Ok(MemberVersion::Binary(&binary.version, binary.minor))
        }
        (None, Some(binary)) => Ok(MemberVersion::Binary(&binary.version, binary.minor)),
        (Some(version), None) => Ok(MemberVersion::Fake(version.value.parse().map_err(
            |e: crate::api::catalog::CatalogError| err.at(&version.referenced, &key, e.to_string()),
        )?)),
        (None, None) => Err(err.at(
            &server.name.referenced,
            &key,
            "missing (a Kubernetes minor such as \"1.36\", or `binary` for a real kube-apiserver)".to_owned(),
        )),
    }
}

/// The command-line flags a server's `runtime-config`, `feature-gates` and `flags` add, each flag checked
/// the way the fake's command line would (a real binary's flags are its own to judge); the cluster's own
/// flags cannot be set.
fn member_flags(
    server: &RawServer,
    index: usize,
    version: MemberVersion,
    err: FileErrors,
) -> Result<Vec<String>, ConfigError> {
    let mut extra_flags = Vec::new();
    if let Some(runtime_config) = &server.runtime_config {
        extra_flags.push(format!("--runtime-config={runtime_config}"));
    }
    if let Some(gates) = &server.feature_gates {
        extra_flags.push(format!("--feature-gates={gates}"));
    }
    for (flag, value) in &server.flags {
        let flag_key = server_key(index, &format!("flags.{flag}"));
        if matches!(
            flag.as_str(),
            "kubernetes-version" | "hostname" | "bind-address" | "secure-port"
        ) {
            return Err(err.at(
                &value.referenced,
                &flag_key,
                "set by the cluster (use `name`, `version`; addresses and ports are the cluster's)"
                    .to_owned(),
            ));
        }
        extra_flags.push(format!("--{flag}={}", value.value));
        let MemberVersion::Fake(version) = version else {
            continue;
        };
        let probe = [
            format!("--kubernetes-version={version}"),
            "--tls-cert-file=unused.crt".to_owned(),
            "--tls-private-key-file=unused.key".to_owned(),
            format!("--{flag}={}", value.value),
        ];
        if let Err(e) = ServerFlags::from_args(&probe) {
            return Err(err.at(&value.referenced, &flag_key, first_line(&e.to_string())));
        }
    }
    Ok(extra_flags)
}

/// The first line of a command-line error, without clap's `error: ` prefix.
fn first_line(message: &str) -> String {
    message
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_owned()
}

/// How a server resolves peers when its Mixed Version Proxy is on (`None`: off). A fake's flags are
/// validated whole here; kube-apiserver resolves peers by StorageVersion before 1.33 (alpha) and by
/// discovery from 1.33.
fn member_proxy_mode(
    server: &RawServer,
    index: usize,
    version: MemberVersion,
    extra_flags: &[String],
    err: FileErrors,
) -> Result<Option<mvp_core::PeerResolutionMode>, ConfigError> {
    match version {
        MemberVersion::Fake(version) => {
            let mut args = vec![
                format!("--kubernetes-version={version}"),
                format!("--hostname={}", server.name.value),
                "--tls-cert-file=unused.crt".to_owned(),
                "--tls-private-key-file=unused.key".to_owned(),
            ];
            args.extend(extra_flags.iter().cloned());
            let options = ServerFlags::from_args(&args)
                .map_err(|e| e.to_string())
                .and_then(|flags| flags.validate().map_err(|e| e.to_string()))
                .map_err(|message| {
                    err.at(
                        &server.name.referenced,
                        &format!("servers[{index}]"),
                        first_line(&message),
                    )
                })?;
            Ok(options.mvp_gate_enabled().then_some(options.peer_resolution_mode))
        }
        MemberVersion::Binary(_, minor) => {
            let gate_on = server.feature_gates.as_deref().is_some_and(|gates| {
                gates
                    .split(',')
                    .any(|g| g.trim() == "UnknownVersionInteroperabilityProxy=true")
            });
            Ok(gate_on.then_some(if minor >= 33 {
                mvp_core::PeerResolutionMode::Discovery
            } else {
                mvp_core::PeerResolutionMode::StorageVersion
            }))
        }
    }
}

/// Every server with the proxy on resolves peers alike: the first one's mode (recorded in
/// `first_proxy`) is the one the others must have.
fn check_proxy_agreement(
    server: &RawServer,
    index: usize,
    version_text: &str,
    peer_resolution_mode: mvp_core::PeerResolutionMode,
    first_proxy: &mut Option<(String, mvp_core::PeerResolutionMode)>,
    err: FileErrors,
) -> Result<(), ConfigError> {
    match first_proxy {
        None => *first_proxy = Some((version_text.to_owned(), peer_resolution_mode)),
        Some((other, mode)) if *mode != peer_resolution_mode => {
            let at = server
                .version
                .as_ref()
                .map_or(&server.name.referenced, |v| &v.referenced);
            return Err(err.at(
                at,
                &server_key(index, "version"),
                format!(
                    "with the Mixed Version Proxy on, {version_text} resolves peers by {} and {other} by {}: neither finds what the other serves (set flags.peer-resolution-mode alike on every server)",
                    mode_name(peer_resolution_mode),
                    mode_name(*mode)
                ),
            ));
        }
        Some(_) => {}
    }
    Ok(())
}

/// A member's Kubernetes version: told to a fake, or reported by a real binary (which may be a minor
/// the fakes do not emulate).
#[derive(Debug, Clone, Copy)]
enum MemberVersion<'a> {
    Fake(KubeVersion),
    Binary(&'a str, u32),
}

impl fmt::Display for MemberVersion<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fake(version) => version.fmt(f),
            Self::Binary(version, _) => f.write_str(version),
        }
    }
}

/// The key and message of a parser error, without the position the parser writes into its text
/// (`error: line 3 column 1: unknown field `lbb`, expected …`): an unknown key is named as the key.
fn parser_message(text: &str) -> (String, String) {
    let first = text.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let message = match first.strip_prefix("line ").and_then(|rest| rest.split_once(": ")) {
        Some((position, message)) if position.contains(" column ") => message,
        _ => first,
    };
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((key, expected)) = rest.split_once('`')
    {
        let expected = expected.trim_start_matches(',').trim();
        return (key.to_owned(), format!("unknown key; {expected}"));
    }
    ("(file)".to_owned(), message.to_owned())
}

fn mode_name(mode: mvp_core::PeerResolutionMode) -> &'static str {
    match mode {
        mvp_core::PeerResolutionMode::Discovery => "discovery",
        mvp_core::PeerResolutionMode::StorageVersion => "StorageVersion",
    }
}

/// A DNS label as the PKI's server names must be: `[a-z0-9-]`, 1 to 63, not starting or ending with `-`.
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The example files' directory in this source tree (tests read them; the binary embeds them).
#[cfg(test)]
pub(crate) fn examples_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/clusters")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        ClusterConfig::parse("c.yaml", text)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn a_binary_member_is_checked_before_anything_starts() {
        assert_eq!(
            error(
                "servers:\n- {name: a, binary: /nonexistent/kube-apiserver}\nstore: etcd\nrun: processes\n"
            ),
            "c.yaml:2:21: servers[0].binary: /nonexistent/kube-apiserver is not an executable file"
        );
        assert_eq!(
            error("servers:\n- {name: a, binary: /bin/true}\n"),
            "c.yaml:2:21: servers[0].binary: a kube-apiserver binary runs as its own process on etcd: set `run: processes` and `store: etcd`"
        );
        // `true --version` prints its own name and version (GNU) or nothing: not a kube-apiserver.
        let not_kube = error("servers:\n- {name: a, binary: /bin/true}\nstore: etcd\nrun: processes\n");
        assert!(
            not_kube.starts_with("c.yaml:2:21: servers[0].binary: /bin/true --version printed ")
                && not_kube.ends_with(", not `Kubernetes vMAJOR.MINOR.PATCH`"),
            "{not_kube}"
        );
        assert_eq!(
            error("servers:\n- {name: a}\n"),
            "c.yaml:2:10: servers[0].version: missing (a Kubernetes minor such as \"1.36\", or `binary` for a real kube-apiserver)"
        );
    }

    #[test]
    fn the_issue_example_is_accepted() {
        let config = ClusterConfig::parse(
            "c.yaml",
            r#"
servers:
- {name: old, version: "1.34"}
- {name: new, version: "1.36", runtime-config: "batch/v1=false", feature-gates: "UnknownVersionInteroperabilityProxy=true"}
store: memory
run: in-process
lb: embedded
controllers: false
"#,
        )
        .expect("valid");
        assert_eq!(config.members.len(), 2);
        assert_eq!(config.members[1].ip, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
        assert_eq!(
            config.members[1].extra_flags,
            vec![
                "--runtime-config=batch/v1=false".to_owned(),
                "--feature-gates=UnknownVersionInteroperabilityProxy=true".to_owned()
            ]
        );
        assert!(!config.controller_manager);
        assert_eq!(config.lb, LoadBalancerKind::Embedded);
    }

    #[test]
    fn every_mistake_is_one_line_with_its_position_and_key() {
        assert_eq!(
            error("servers:\n- {name: a, version: \"1.36\"}\nlbb: none\n"),
            "c.yaml:3:1: lbb: unknown key; expected one of servers, store, run, lb, controllers, try"
        );
        assert_eq!(
            error("servers:\n- name: a\n  version: \"1.27\"\n"),
            "c.yaml:3:12: servers[0].version: unsupported Kubernetes version 1.27: this fake serves 1.28 to 1.36"
        );
        assert_eq!(
            error("servers:\n- {name: a, version: \"1.36\"}\n- {name: a, version: \"1.35\"}\n"),
            "c.yaml:3:10: servers[1].name: duplicate name \"a\" (also servers[0])"
        );
        assert_eq!(
            error(
                "servers:\n- {name: a, version: \"1.32\", feature-gates: UnknownVersionInteroperabilityProxy=true}\n- {name: b, version: \"1.36\"}\n"
            ),
            "c.yaml:3:22: servers[1].version: with the Mixed Version Proxy on, 1.36 resolves peers by discovery and 1.32 by StorageVersion: neither finds what the other serves (set flags.peer-resolution-mode alike on every server)"
        );
        assert_eq!(
            error("servers:\n- {name: a, version: \"1.36\"}\nrun: processes\n"),
            "c.yaml:3:6: run: separate processes share their objects through etcd: add `store: etcd` (or {etcd-servers: ...})"
        );
        assert_eq!(
            error("servers:\n- {name: a, version: \"1.36\"}\nrun: containers\n"),
            "c.yaml:3:6: run: containers share their objects through etcd: add `store: etcd` (it runs in a container too)"
        );
        assert_eq!(
            error(
                "servers:\n- {name: a, version: \"1.36\"}\nrun: containers\nstore: {etcd-servers: \"http://x:2379\"}\n"
            ),
            "c.yaml:4:8: store: containers run their own etcd in a container on their network: use `store: etcd`"
        );
        assert_eq!(
            error("servers:\n- {name: a, version: \"1.36\"}\nlb: nginx\n"),
            "c.yaml:3:5: lb: unknown value \"nginx\" (known: embedded, haproxy, none)"
        );
        assert_eq!(
            error("servers:\n- {name: a, version: \"1.36\"}\nstore: {etcd-server: x}\n"),
            "c.yaml:3:9: etcd-server: unknown key; expected one of etcd-servers"
        );
        let bad_flag = error("servers:\n- name: a\n  version: \"1.36\"\n  flags: {no-such-flag: x}\n");
        assert!(
            bad_flag.starts_with("c.yaml:4:25: servers[0].flags.no-such-flag: unexpected argument"),
            "{bad_flag}"
        );
        assert!(!bad_flag.contains('\n'), "{bad_flag}");
    }

    #[test]
    fn the_presets_are_the_example_files() {
        for (name, text) in PRESETS {
            let on_disk =
                std::fs::read_to_string(examples_dir().join(format!("{name}.yaml"))).expect("example");
            assert_eq!(&on_disk, text);
            ClusterConfig::preset(name).expect("a valid preset");
        }
        let default = ClusterConfig::preset("default").expect("default");
        assert_eq!(
            default.members[0].extra_flags,
            vec!["--runtime-config=batch/v1=false".to_owned()]
        );
        let upgrade = ClusterConfig::preset("upgrade").expect("upgrade");
        assert_eq!(upgrade.members.len(), 3);
    }

    #[test]
    fn every_example_file_is_a_valid_cluster() {
        for entry in std::fs::read_dir(examples_dir()).expect("examples") {
            let path = entry.expect("entry").path();
            let config = ClusterConfig::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!config.members.is_empty(), "{}", path.display());
        }
        let containers =
            ClusterConfig::read(&examples_dir().join("containers.yaml")).expect("containers.yaml");
        assert_eq!(
            (containers.run, containers.store),
            (RunMode::Containers, StoreChoice::PrivateEtcd)
        );
    }
}
