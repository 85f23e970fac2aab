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
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_saphyr::Spanned;

use crate::api::catalog::KubeVersion;
use crate::cluster::MemberSpec;
use crate::cluster::load_balancer::LoadBalancerKind;
use crate::cluster::real_member::{self, KubeApiserverBinary};
use crate::server::config::ServerFlags;

/// The presets `cluster --preset NAME` starts: the example files, compiled in.
pub const PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../examples/clusters/default.yaml")),
    ("upgrade", include_str!("../../examples/clusters/upgrade.yaml")),
];

/// At most this many servers (each takes one `127.0.0.x` address; the load balancer has its own).
pub const MAX_SERVERS: usize = 200;

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
    /// Every server its own container (the e2e containers suite; not `cluster` yet).
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
        let err = |at: &serde_saphyr::Location, key: &str, message: String| ConfigError {
            file: file.to_owned(),
            line: at.line(),
            column: at.column(),
            key: key.to_owned(),
            message,
        };

        let run = match raw.run.as_ref() {
            None => RunMode::InProcess,
            Some(run) => match run.value.as_str() {
                "in-process" => RunMode::InProcess,
                "processes" => RunMode::Processes,
                "containers" => RunMode::Containers,
                other => {
                    return Err(err(
                        &run.referenced,
                        "run",
                        format!("unknown value {other:?} (known: in-process, processes, containers)"),
                    ));
                }
            },
        };
        let store = match raw.store.as_ref() {
            None => StoreChoice::Memory,
            Some(store) => match &store.value {
                RawStore::Name(name) if name == "memory" => StoreChoice::Memory,
                RawStore::Name(name) if name == "etcd" => StoreChoice::PrivateEtcd,
                RawStore::Name(other) => {
                    return Err(err(
                        &store.referenced,
                        "store",
                        format!(
                            "unknown value {other:?} (known: memory, etcd, {{etcd-servers: \"http://...\"}})"
                        ),
                    ));
                }
                RawStore::Existing(urls) => {
                    let urls: Vec<String> = urls
                        .split(',')
                        .map(str::trim)
                        .filter(|u| !u.is_empty())
                        .map(str::to_owned)
                        .collect();
                    if urls.is_empty() {
                        return Err(err(
                            &store.referenced,
                            "store.etcd-servers",
                            "names no etcd client URL".to_owned(),
                        ));
                    }
                    StoreChoice::ExistingEtcd(urls)
                }
            },
        };
        let lb = match raw.lb.as_ref() {
            None => LoadBalancerKind::Embedded,
            Some(lb) => lb.value.parse().map_err(|e| err(&lb.referenced, "lb", e))?,
        };
        // What the command can run, checked here so that the mistake points at the file.
        match (run, &store, raw.run.as_ref(), raw.store.as_ref()) {
            (RunMode::Containers, _, Some(at), _) => {
                return Err(err(
                    &at.referenced,
                    "run",
                    "containers are run by the e2e containers suite (e2e::containers::ContainerCluster), not by `cluster` yet; use processes".to_owned(),
                ));
            }
            (RunMode::Processes, StoreChoice::Memory, Some(at), _) => {
                return Err(err(
                    &at.referenced,
                    "run",
                    "separate processes share their objects through etcd: add `store: etcd` (or {etcd-servers: ...})".to_owned(),
                ));
            }
            (RunMode::InProcess, StoreChoice::PrivateEtcd | StoreChoice::ExistingEtcd(_), _, Some(at)) => {
                return Err(err(
                    &at.referenced,
                    "store",
                    "in-process servers share one in-memory store: etcd needs `run: processes`".to_owned(),
                ));
            }
            _ => {}
        }

        let servers = &raw.servers;
        if servers.value.is_empty() {
            return Err(err(&servers.referenced, "servers", "lists no server".to_owned()));
        }
        if servers.value.len() > MAX_SERVERS {
            return Err(err(
                &servers.referenced,
                "servers",
                format!("{} servers; at most {MAX_SERVERS}", servers.value.len()),
            ));
        }
        let mut members = Vec::with_capacity(servers.value.len());
        // (version, peer resolution mode, where) of the first server with the proxy on.
        let mut first_proxy: Option<(String, mvp_core::PeerResolutionMode)> = None;
        for (index, server) in servers.value.iter().enumerate() {
            let key = |field: &str| format!("servers[{index}].{field}");
            let name = &server.name.value;
            if !is_dns_label(name) {
                return Err(err(
                    &server.name.referenced,
                    &key("name"),
                    format!("{name:?} is not a DNS label (lowercase letters, digits and '-', at most 63)"),
                ));
            }
            if name == "cluster" {
                return Err(err(
                    &server.name.referenced,
                    &key("name"),
                    "\"cluster\" is the load balancer's kubeconfig (cluster.kubeconfig); pick another name"
                        .to_owned(),
                ));
            }
            if let Some(first) = servers.value[..index].iter().position(|s| s.name.value == *name) {
                return Err(err(
                    &server.name.referenced,
                    &key("name"),
                    format!("duplicate name {name:?} (also servers[{first}])"),
                ));
            }
            // A real kube-apiserver reports its version; a fake is told it (the catalog's message
            // names the range it serves).
            let binary = match &server.binary {
                None => None,
                Some(binary) => {
                    if run != RunMode::Processes {
                        return Err(err(
                            &binary.referenced,
                            &key("binary"),
                            "a kube-apiserver binary runs as its own process on etcd: set `run: processes` and `store: etcd`".to_owned(),
                        ));
                    }
                    let base = Path::new(file).parent().unwrap_or(Path::new(""));
                    let resolved = KubeApiserverBinary::resolve(&binary.value, base)
                        .map_err(|e| err(&binary.referenced, &key("binary"), e.to_string()))?;
                    Some(resolved)
                }
            };
            let version = match (&server.version, &binary) {
                (Some(version), Some(binary)) => {
                    if real_member::parse_version(&format!("v{}", version.value)).map(|(v, _)| v)
                        != Some(binary.version.clone())
                    {
                        return Err(err(
                            &version.referenced,
                            &key("version"),
                            format!(
                                "{:?}, but {} is {} (leave `version` out for a binary)",
                                version.value,
                                binary.path.display(),
                                binary.version
                            ),
                        ));
                    }
                    MemberVersion::Binary(&binary.version, binary.minor)
                }
                (None, Some(binary)) => MemberVersion::Binary(&binary.version, binary.minor),
                (Some(version), None) => MemberVersion::Fake(version.value.parse().map_err(
                    |e: crate::api::catalog::CatalogError| {
                        err(&version.referenced, &key("version"), e.to_string())
                    },
                )?),
                (None, None) => {
                    return Err(err(
                        &server.name.referenced,
                        &key("version"),
                        "missing (a Kubernetes minor such as \"1.36\", or `binary` for a real kube-apiserver)"
                            .to_owned(),
                    ));
                }
            };
            let mut extra_flags = Vec::new();
            if let Some(runtime_config) = &server.runtime_config {
                extra_flags.push(format!("--runtime-config={runtime_config}"));
            }
            if let Some(gates) = &server.feature_gates {
                extra_flags.push(format!("--feature-gates={gates}"));
            }
            for (flag, value) in &server.flags {
                let flag_key = key(&format!("flags.{flag}"));
                if matches!(
                    flag.as_str(),
                    "kubernetes-version" | "hostname" | "bind-address" | "secure-port"
                ) {
                    return Err(err(
                        &value.referenced,
                        &flag_key,
                        "set by the cluster (use `name`, `version`; addresses and ports are the cluster's)"
                            .to_owned(),
                    ));
                }
                extra_flags.push(format!("--{flag}={}", value.value));
                // A real binary's flags are its own to judge (it may have flags the fake lacks).
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
                    let message = e.to_string();
                    let message = message
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches("error: ");
                    return Err(err(&value.referenced, &flag_key, message.to_owned()));
                }
            }
            let proxy = match version {
                MemberVersion::Fake(version) => {
                    let mut args = vec![
                        format!("--kubernetes-version={version}"),
                        format!("--hostname={name}"),
                        "--tls-cert-file=unused.crt".to_owned(),
                        "--tls-private-key-file=unused.key".to_owned(),
                    ];
                    args.extend(extra_flags.iter().cloned());
                    let options = ServerFlags::from_args(&args)
                        .map_err(|e| e.to_string())
                        .and_then(|flags| flags.validate().map_err(|e| e.to_string()))
                        .map_err(|message| {
                            let message = message
                                .lines()
                                .next()
                                .unwrap_or_default()
                                .trim_start_matches("error: ");
                            err(
                                &server.name.referenced,
                                &format!("servers[{index}]"),
                                message.to_owned(),
                            )
                        })?;
                    options.mvp_gate_enabled().then_some(options.peer_resolution_mode)
                }
                // kube-apiserver resolves peers by StorageVersion before 1.33 (alpha) and by
                // discovery from 1.33.
                MemberVersion::Binary(_, minor) => {
                    let gate_on = server.feature_gates.as_deref().is_some_and(|gates| {
                        gates
                            .split(',')
                            .any(|g| g.trim() == "UnknownVersionInteroperabilityProxy=true")
                    });
                    gate_on.then_some(if minor >= 33 {
                        mvp_core::PeerResolutionMode::Discovery
                    } else {
                        mvp_core::PeerResolutionMode::StorageVersion
                    })
                }
            };
            let version_text = version.to_string();
            if let Some(peer_resolution_mode) = proxy {
                match &first_proxy {
                    None => first_proxy = Some((version_text.clone(), peer_resolution_mode)),
                    Some((other, mode)) if *mode != peer_resolution_mode => {
                        let at = server
                            .version
                            .as_ref()
                            .map_or(&server.name.referenced, |v| &v.referenced);
                        return Err(err(
                            at,
                            &key("version"),
                            format!(
                                "with the Mixed Version Proxy on, {version_text} resolves peers by {} and {other} by {}: neither finds what the other serves (set flags.peer-resolution-mode alike on every server)",
                                mode_name(peer_resolution_mode),
                                mode_name(*mode)
                            ),
                        ));
                    }
                    Some(_) => {}
                }
            }
            let octet = u8::try_from(index + 1).unwrap_or(u8::MAX);
            let note = server.note.clone().unwrap_or_else(|| {
                match (&server.runtime_config, &server.feature_gates) {
                    (Some(rc), _) => format!("runtime-config {rc}"),
                    (None, Some(gates)) => format!("feature-gates {gates}"),
                    (None, None) => "all default APIs".to_owned(),
                }
            });
            members.push(MemberSpec {
                name: name.clone(),
                ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, octet)),
                kubernetes_version: version_text,
                extra_flags,
                note,
                try_command: raw
                    .try_command
                    .clone()
                    .unwrap_or_else(|| "get namespaces".to_owned()),
                binary: binary.map(|b| b.path),
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
pub fn examples_dir() -> PathBuf {
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
}
