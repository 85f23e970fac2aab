//! What an upgrade run does: the checked flags, the servers' flags at each version, and the resources
//! under test (those only some of the two versions serve, found in the API catalog).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use crate::api::catalog::{KubeVersion, ServedApis};
use crate::cluster::MemberSpec;
use crate::cluster::real_member::KubeApiserverBinary;
use crate::server::config::{PeerResolutionModeFlag, ServerFlags};

/// Which runs to make: with the Mixed Version Proxy, without, or both (same seed, same schedule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MvpRuns {
    /// Only with the proxy's feature gate on.
    On,
    /// Only with the gate off.
    Off,
    /// Both, on first.
    Both,
}

/// Where the servers of an upgrade run keep their objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UpgradeStore {
    /// One in-memory store shared by in-process servers.
    Memory,
    /// etcd: a private one per run (the `etcd` binary on PATH), or `--etcd-servers`.
    Etcd,
}

/// How the servers of an upgrade run run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UpgradeRun {
    /// In the `upgrade` process.
    InProcess,
    /// Each its own OS process of this binary (needs `--store etcd`).
    Processes,
    /// Each its own Docker container of this binary, etcd in a container too (needs `--store etcd`
    /// and a Docker engine; see `cluster::containers`).
    Containers,
}

/// `apiserver-fake upgrade` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct UpgradeArgs {
    /// The Kubernetes minor every server starts at (e.g. 1.35).
    #[arg(long)]
    pub from: String,
    /// The minor every server is upgraded to, one server at a time (e.g. 1.36).
    #[arg(long)]
    pub to: String,
    /// How many servers the control plane has.
    #[arg(long, default_value_t = 3)]
    pub servers: usize,
    /// Run with the Mixed Version Proxy on, off, or both.
    #[arg(long, value_enum, default_value_t = MvpRuns::Both)]
    pub mvp: MvpRuns,
    /// How the proxy finds which peer serves a resource.
    #[arg(long, value_enum, default_value_t = PeerResolutionModeFlag::Discovery)]
    pub peer_resolution_mode: PeerResolutionModeFlag,
    /// Kill each server (SIGKILL semantics: no lease or endpoint clean-up) instead of stopping it
    /// gracefully; the load balancer notices only after its health-check interval.
    #[arg(long)]
    pub crash: bool,
    /// Where the servers keep their objects: `memory` (in-process servers only) or `etcd` (needs a
    /// binary built with the etcd feature).
    #[arg(long, value_enum, default_value_t = UpgradeStore::Memory)]
    pub store: UpgradeStore,
    /// How the servers run: `in-process`, `processes` (each its own OS process, stopped with
    /// SIGTERM or, with `--crash`, SIGKILL, and started again at `--to` as a new process; needs
    /// `--store etcd`) or `containers` (each its own Docker container, `docker stop`ped or, with
    /// `--crash`, `docker kill`ed, and started again at `--to` as a new container; etcd in a
    /// container; needs `--store etcd`).
    #[arg(long, value_enum, default_value_t = UpgradeRun::InProcess)]
    pub run: UpgradeRun,
    /// With `--store etcd`: this existing etcd (comma-separated client URLs) instead of a private one
    /// per run; each run uses a key prefix of its own.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The user's own program (`'CMD ARGS'`, run by `sh -c`), run once per run for the whole rollout
    /// with `KUBECONFIG` set to the load balancer's kubeconfig; its output goes to
    /// `OUT/exec-mvp-on.log` (`-off`), its exit status into the report (killed if still running when
    /// the run ends).
    #[arg(long)]
    pub exec: Option<String>,
    /// A real kube-apiserver binary every server runs once upgraded (a path, or a name looked up in
    /// `$KUBEBUILDER_ASSETS` and on `PATH`, as `cluster --config`'s `binary:`); it must report the
    /// `--to` minor. Servers start as fakes at `--from` and are replaced one at a time by the real
    /// server, given only kube-apiserver's own flags. Needs `--run processes --store etcd`.
    #[arg(long, value_name = "PATH")]
    pub kube_apiserver: Option<String>,
    /// Seed of every client's choices (what to request, in which order).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write report.json, report.md and timeline.svg.
    #[arg(long, default_value = "./upgrade-report")]
    pub out: PathBuf,
    /// Seconds of load before the first server is upgraded and after each server is back.
    #[arg(long, default_value_t = 3.0)]
    pub dwell_seconds: f64,
    /// Seconds of load once every server runs the new version.
    #[arg(long, default_value_t = 3.0)]
    pub final_dwell_seconds: f64,
    /// Seconds a server stays out of the load balancer before it is stopped (in-flight requests end).
    #[arg(long, default_value_t = 0.3)]
    pub drain_seconds: f64,
    /// Seconds the load balancer takes to notice a crashed server (`--crash`).
    #[arg(long, default_value_t = 1.0)]
    pub health_check_seconds: f64,
    /// Concurrent writers (each creates, updates and deletes objects).
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Passed to every server (kube-apiserver's default: 15).
    #[arg(long, default_value_t = 15)]
    pub peer_endpoint_ttl_seconds: u64,
    /// Passed to every server (kube-apiserver's default: 10).
    #[arg(long, default_value_t = 10)]
    pub peer_endpoint_refresh_seconds: u64,
    /// Passed to every server (kube-apiserver's default: 3600).
    #[arg(long, default_value_t = 3600)]
    pub identity_lease_duration_seconds: u64,
    /// Passed to every server (kube-apiserver's default: 10).
    #[arg(long, default_value_t = 10)]
    pub identity_lease_renew_interval_seconds: u64,
    /// Passed to every server (kube-apiserver's default: 3600).
    #[arg(long, default_value_t = 3600)]
    pub identity_lease_gc_period_seconds: u64,
}

/// Why the flags describe no run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    /// A version the catalog does not have.
    #[error("--{flag}: {reason}")]
    Version {
        /// `from` or `to`.
        flag: &'static str,
        /// The catalog's message.
        reason: String,
    },
    /// `--from` is not below `--to`.
    #[error("--from {from} must be below --to {to}")]
    NotAnUpgrade {
        /// `--from`.
        from: KubeVersion,
        /// `--to`.
        to: KubeVersion,
    },
    /// `--servers` out of range.
    #[error("--servers must be between 1 and {MAX_SERVERS}, got {0}")]
    Servers(usize),
    /// A duration flag that is negative or not a number.
    #[error("--{0} must be a non-negative number of seconds")]
    Duration(&'static str),
    /// `--writers 0`.
    #[error("--writers must be at least 1")]
    Writers,
    /// `--exec` names a program that is not there.
    #[error("--exec: {0}: command not found")]
    ExecNotFound(String),
    /// `--store` and `--run` that do not go together, or a store this binary lacks.
    #[error("{0}")]
    Runtime(&'static str),
    /// The servers' own flags were refused (the message is the server's).
    #[error("{0}")]
    ServerFlags(String),
    /// `--kube-apiserver` names no usable binary, or one of another minor than `--to`.
    #[error("--kube-apiserver: {0}")]
    KubeApiserver(String),
}

/// At most this many servers (each takes one 127.0.0.x address).
pub(crate) const MAX_SERVERS: usize = 200;

/// A group/version/resource under test, with what a client needs to address it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TargetResource {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
    /// Kind of its objects.
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

impl TargetResource {
    /// `group/version` or `version` for core: the objects' `apiVersion`.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The smallest `spec` the server admits for an object of this resource: empty, except where
    /// validation requires fields (an admission policy needs a validation, a binding a policy name and
    /// an action; neither does anything, since nothing matches or exists by that name).
    pub(crate) fn minimal_spec(&self) -> serde_json::Value {
        match (self.group.as_str(), self.resource.as_str()) {
            ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
                serde_json::json!({"validations": [{"expression": "true"}]})
            }
            ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
                serde_json::json!({"policyName": "upgrade-sim-none", "validationActions": ["Audit"]})
            }
            _ => serde_json::json!({}),
        }
    }

    /// The collection path (in namespace `default` when namespaced).
    pub(crate) fn collection_path(&self) -> String {
        let prefix = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{prefix}/namespaces/default/{}", self.resource)
        } else {
            format!("{prefix}/{}", self.resource)
        }
    }

    /// `resource.group/version` as reports name it.
    pub(crate) fn label(&self) -> String {
        if self.group.is_empty() {
            format!("{}/{}", self.resource, self.version)
        } else {
            format!("{}.{}/{}", self.resource, self.group, self.version)
        }
    }
}

/// The checked plan of one `upgrade` invocation.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The flags as given.
    pub args: UpgradeArgs,
    /// Start version.
    pub from: KubeVersion,
    /// Target version.
    pub to: KubeVersion,
    /// The runs, in order (`true`: proxy on).
    pub runs: Vec<bool>,
    /// Resources only some of the two versions serve (create, list and watch), plus ConfigMaps.
    pub targets: Vec<TargetResource>,
    /// Load before the first upgrade and after each server is back.
    pub dwell: Duration,
    /// Load once all servers are upgraded.
    pub final_dwell: Duration,
    /// Out of the load balancer before a stop.
    pub drain: Duration,
    /// How long the load balancer takes to notice a crash.
    pub health_check: Duration,
    /// `--kube-apiserver`, resolved: what the servers run once upgraded.
    pub upgraded_binary: Option<KubeApiserverBinary>,
}

/// What `--run`, `--store`, `--etcd-servers` and `--exec` ask for is something this binary can run.
fn check_run_and_store(args: &UpgradeArgs) -> Result<(), PlanError> {
    match (args.run, args.store) {
        (UpgradeRun::Processes, UpgradeStore::Memory) => {
            return Err(PlanError::Runtime(
                "--run processes: separate processes share their objects through etcd; add --store etcd",
            ));
        }
        (UpgradeRun::Containers, UpgradeStore::Memory) => {
            return Err(PlanError::Runtime(
                "--run containers: containers share their objects through etcd; add --store etcd",
            ));
        }
        (UpgradeRun::Containers, _) if !args.etcd_servers.is_empty() => {
            return Err(PlanError::Runtime(
                "--run containers runs its own etcd in a container: drop --etcd-servers",
            ));
        }
        (UpgradeRun::InProcess, UpgradeStore::Etcd) => {
            return Err(PlanError::Runtime(
                "--store etcd: in-process servers share one in-memory store; add --run processes",
            ));
        }
        (_, UpgradeStore::Etcd) if !cfg!(feature = "etcd") => {
            return Err(PlanError::Runtime(
                "--store etcd needs a binary built with the etcd feature (cargo build --features etcd)",
            ));
        }
        _ => {}
    }
    if let Some(command) = &args.exec {
        let program = command.split_whitespace().next().unwrap_or_default();
        if !program_exists(program) {
            return Err(PlanError::ExecNotFound(program.to_owned()));
        }
    }
    if !args.etcd_servers.is_empty() && args.store != UpgradeStore::Etcd {
        return Err(PlanError::Runtime("--etcd-servers needs --store etcd"));
    }
    Ok(())
}

/// The resources of `apis` a writer can create, update, delete, list and watch.
fn writable(apis: &ServedApis) -> BTreeSet<TargetResource> {
    apis.gvrs()
        .filter(|(_, _, r)| {
            ["create", "update", "delete", "list", "watch"]
                .iter()
                .all(|v| r.verbs.iter().any(|x| x == v))
        })
        .map(|(group, version, r)| TargetResource {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: r.name.clone(),
            kind: r.kind.clone(),
            namespaced: r.namespaced,
        })
        .collect()
}

fn seconds(value: f64, flag: &'static str) -> Result<Duration, PlanError> {
    Duration::try_from_secs_f64(value).map_err(|_| PlanError::Duration(flag))
}

impl Plan {
    /// Checks the flags and works out the resources under test.
    pub(crate) fn new(args: UpgradeArgs) -> Result<Self, PlanError> {
        let version = |flag: &'static str, raw: &str| {
            raw.parse::<KubeVersion>().map_err(|e| PlanError::Version {
                flag,
                reason: e.to_string(),
            })
        };
        let from = version("from", &args.from)?;
        let to = version("to", &args.to)?;
        if from >= to {
            return Err(PlanError::NotAnUpgrade { from, to });
        }
        if args.servers == 0 || args.servers > MAX_SERVERS {
            return Err(PlanError::Servers(args.servers));
        }
        if args.writers == 0 {
            return Err(PlanError::Writers);
        }
        check_run_and_store(&args)?;
        let upgraded_binary = match &args.kube_apiserver {
            None => None,
            Some(_) if args.run != UpgradeRun::Processes => {
                return Err(PlanError::Runtime(
                    "--kube-apiserver: a real kube-apiserver runs as a process of its own on etcd; use --run processes --store etcd",
                ));
            }
            Some(name) => {
                let binary = KubeApiserverBinary::resolve(name, std::path::Path::new("."))
                    .map_err(|e| PlanError::KubeApiserver(e.to_string()))?;
                if binary.minor != to.minor {
                    return Err(PlanError::KubeApiserver(format!(
                        "{} is Kubernetes {}, not the --to minor {to}",
                        binary.path.display(),
                        binary.version
                    )));
                }
                Some(binary)
            }
        };
        let runs = match args.mvp {
            MvpRuns::On => vec![true],
            MvpRuns::Off => vec![false],
            MvpRuns::Both => vec![true, false],
        };
        let mut plan = Self {
            dwell: seconds(args.dwell_seconds, "dwell-seconds")?,
            final_dwell: seconds(args.final_dwell_seconds, "final-dwell-seconds")?,
            drain: seconds(args.drain_seconds, "drain-seconds")?,
            health_check: seconds(args.health_check_seconds, "health-check-seconds")?,
            upgraded_binary,
            args,
            from,
            to,
            runs,
            targets: Vec::new(),
        };
        // Every server configuration of the run must be one the servers accept.
        for &mvp in &plan.runs {
            for version in [from, to] {
                plan.served(version, mvp)?;
            }
        }
        let (old, new) = (plan.served(from, true)?, plan.served(to, true)?);
        let (old, new) = (writable(&old), writable(&new));
        plan.targets = old.symmetric_difference(&new).cloned().collect();
        plan.targets.push(TargetResource {
            group: String::new(),
            version: "v1".to_owned(),
            resource: "configmaps".to_owned(),
            kind: "ConfigMap".to_owned(),
            namespaced: true,
        });
        Ok(plan)
    }

    /// The flags of server `index` at `version`, with the proxy's gate `mvp`.
    pub(crate) fn member(&self, index: usize, version: KubeVersion, mvp: bool) -> MemberSpec {
        let a = self.args.clone();
        let mut gates = vec![format!("UnknownVersionInteroperabilityProxy={mvp}")];
        let mut flags = vec![
            format!("--peer-endpoint-ttl-seconds={}", a.peer_endpoint_ttl_seconds),
            format!(
                "--peer-endpoint-refresh-seconds={}",
                a.peer_endpoint_refresh_seconds
            ),
            format!(
                "--identity-lease-duration-seconds={}",
                a.identity_lease_duration_seconds
            ),
            format!(
                "--identity-lease-renew-interval-seconds={}",
                a.identity_lease_renew_interval_seconds
            ),
            format!(
                "--identity-lease-gc-period-seconds={}",
                a.identity_lease_gc_period_seconds
            ),
        ];
        if mvp {
            let mode = match a.peer_resolution_mode {
                PeerResolutionModeFlag::Discovery => "discovery",
                PeerResolutionModeFlag::StorageVersion => "storage-version",
            };
            flags.push(format!("--peer-resolution-mode={mode}"));
            if a.peer_resolution_mode == PeerResolutionModeFlag::StorageVersion {
                gates.push("StorageVersionAPI=true".to_owned());
                flags.push("--runtime-config=internal.apiserver.k8s.io/v1alpha1=true".to_owned());
            }
        }
        flags.push(format!("--feature-gates={}", gates.join(",")));
        let octet = u8::try_from(index + 1).unwrap_or(u8::MAX);
        MemberSpec {
            name: server_name(index),
            ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, octet)),
            kubernetes_version: version.to_string(),
            extra_flags: flags,
            note: String::new(),
            try_command: String::new(),
            // The real server, once upgraded: it gets kube-apiserver's flags only
            // (`real_member::kube_apiserver_args` drops the fakes' timings and mode).
            binary: self
                .upgraded_binary
                .as_ref()
                .filter(|_| version == self.to)
                .map(|binary| binary.path.clone()),
        }
    }

    /// What server `0` serves at `version` with these flags (every server is configured alike).
    pub(crate) fn served(&self, version: KubeVersion, mvp: bool) -> Result<ServedApis, PlanError> {
        let member = self.member(0, version, mvp);
        let mut args = vec![
            format!("--kubernetes-version={version}"),
            "--tls-cert-file=unused.crt".to_owned(),
            "--tls-private-key-file=unused.key".to_owned(),
        ];
        args.extend(member.extra_flags);
        let flags = ServerFlags::from_args(&args).map_err(|e| PlanError::ServerFlags(e.to_string()))?;
        let options = flags
            .validate()
            .map_err(|e| PlanError::ServerFlags(e.to_string()))?;
        ServedApis::builtin(
            options.emulated_version,
            &options.runtime_config,
            &options.feature_gates,
        )
        .map_err(|e| PlanError::ServerFlags(e.to_string()))
    }
}

/// Whether `sh` finds `program` (a file, a builtin or a reserved word such as `for`), as `command -v`
/// answers.
fn program_exists(program: &str) -> bool {
    !program.is_empty()
        && std::process::Command::new("sh")
            .args(["-c", "command -v \"$1\"", "sh", program])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// `a`, `b`, … `z`, then `s26`, `s27`, …
pub(crate) fn server_name(index: usize) -> String {
    match u8::try_from(index) {
        Ok(i) if i < 26 => char::from(b'a' + i).to_string(),
        _ => format!("s{index}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::TargetResource;
    use crate::api::rest::validation::admission_registration as admission;

    fn target(resource: &str, kind: &str) -> TargetResource {
        TargetResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            resource: resource.into(),
            kind: kind.into(),
            namespaced: false,
        }
    }

    /// 1.29 → 1.30 writes admission policies and bindings: an empty spec is refused, the minimal one is not.
    #[test]
    fn the_minimal_spec_of_a_validated_kind_is_admitted() {
        let policy = target("validatingadmissionpolicies", "ValidatingAdmissionPolicy");
        assert!(!admission::validate_validating_admission_policy(&json!({"spec": {}})).is_empty());
        assert!(
            admission::validate_validating_admission_policy(&json!({"spec": policy.minimal_spec()}))
                .is_empty()
        );
        let binding = target(
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
        );
        assert!(!admission::validate_validating_admission_policy_binding(&json!({"spec": {}})).is_empty());
        assert!(
            admission::validate_validating_admission_policy_binding(&json!({"spec": binding.minimal_spec()}))
                .is_empty()
        );
        assert_eq!(target("leases", "Lease").minimal_spec(), json!({}));
    }
}
