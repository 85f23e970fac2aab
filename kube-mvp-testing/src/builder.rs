//! [`ClusterBuilder`]: a cluster of fakes described in code, started as `apiserver-fake cluster
//! --config FILE` (the file rendered from the builder), so every mode the binary has is an option here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::cluster::Cluster;
use crate::error::{Error, Result};

/// Where the cluster keeps its objects (the config file's `store`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Store {
    /// One in-memory store shared by in-process servers (the default).
    #[default]
    Memory,
    /// A private etcd the cluster starts (the `etcd` binary on `PATH`; the fake built with `etcd`).
    Etcd,
    /// An existing etcd at these comma-separated client URLs.
    EtcdServers(String),
}

/// How the servers run (the config file's `run`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Run {
    /// Every server a task of the one `cluster` process (the default; fastest).
    #[default]
    InProcess,
    /// Every server its own OS process, so [`Cluster::kill`], [`Cluster::pause`] and
    /// [`Cluster::resume`] reach it. Needs an etcd store.
    Processes,
    /// Every server its own Docker container (and etcd one too). Needs an etcd store and Docker.
    Containers,
}

/// The load balancer in front of the servers (the config file's `lb`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadBalancer {
    /// The balancer built into the `cluster` process (the default).
    #[default]
    Embedded,
    /// `haproxy` from the `PATH`, configured as kubeadm's HA guide does.
    Haproxy,
    /// No balancer.
    None,
}

/// One server of a [`ClusterBuilder`]: its version and kube-apiserver flags.
#[derive(Debug, Clone, Default)]
pub struct ServerBuilder {
    version: Option<String>,
    runtime_config: Vec<String>,
    feature_gates: Vec<String>,
    flags: BTreeMap<String, String>,
}

impl ServerBuilder {
    /// The Kubernetes minor version it emulates (`"1.28"` to `"1.36"`; default: the newest).
    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.to_owned());
        self
    }

    /// Adds to `--runtime-config` (e.g. `"batch/v1=false"`).
    pub fn runtime_config(mut self, entry: &str) -> Self {
        self.runtime_config.push(entry.to_owned());
        self
    }

    /// Adds `gate=enabled` to `--feature-gates`.
    pub fn feature_gate(mut self, gate: &str, enabled: bool) -> Self {
        self.feature_gates.push(format!("{gate}={enabled}"));
        self
    }

    /// Sets any other kube-apiserver flag the fake has, named without its `--`
    /// (`flag("authorization-mode", "Node,RBAC")`).
    pub fn flag(mut self, name: &str, value: &str) -> Self {
        self.flags.insert(name.to_owned(), value.to_owned());
        self
    }

    fn render(&self, name: &str) -> Value {
        let mut server = Map::new();
        server.insert("name".to_owned(), json!(name));
        if let Some(version) = &self.version {
            server.insert("version".to_owned(), json!(version));
        }
        if !self.runtime_config.is_empty() {
            server.insert("runtime-config".to_owned(), json!(self.runtime_config.join(",")));
        }
        if !self.feature_gates.is_empty() {
            server.insert("feature-gates".to_owned(), json!(self.feature_gates.join(",")));
        }
        if !self.flags.is_empty() {
            server.insert("flags".to_owned(), json!(self.flags));
        }
        Value::Object(server)
    }
}

/// A cluster of fake kube-apiservers to start: servers (each with its version and flags), the store,
/// how the servers run, the load balancer and the controller manager.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    servers: Vec<(String, ServerBuilder)>,
    store: Store,
    run: Run,
    load_balancer: LoadBalancer,
    controller_manager: bool,
    binary: Option<PathBuf>,
    dir: Option<PathBuf>,
    startup_timeout: Duration,
}

impl Default for ClusterBuilder {
    /// See [`ClusterBuilder::new`].
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            store: Store::default(),
            run: Run::default(),
            load_balancer: LoadBalancer::default(),
            controller_manager: true,
            binary: None,
            dir: None,
            startup_timeout: Duration::from_secs(120),
        }
    }
}

impl ClusterBuilder {
    /// An empty cluster: in-process servers on the in-memory store, the embedded load balancer and the
    /// controller manager; add servers with [`Self::server`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds server `name` (a DNS label), configured by `configure`. Server `i` listens on
    /// `127.0.0.(i+1)`, on a free port.
    pub fn server(mut self, name: &str, configure: impl FnOnce(ServerBuilder) -> ServerBuilder) -> Self {
        self.servers
            .push((name.to_owned(), configure(ServerBuilder::default())));
        self
    }

    /// Where the servers keep their objects.
    pub fn store(mut self, store: Store) -> Self {
        self.store = store;
        self
    }

    /// How the servers run.
    pub fn run(mut self, run: Run) -> Self {
        self.run = run;
        self
    }

    /// The load balancer in front of the servers.
    pub fn load_balancer(mut self, load_balancer: LoadBalancer) -> Self {
        self.load_balancer = load_balancer;
        self
    }

    /// Whether the controller manager (namespace controller, garbage collector) runs (default: yes).
    pub fn controller_manager(mut self, on: bool) -> Self {
        self.controller_manager = on;
        self
    }

    /// The `apiserver-fake` binary to run (default: [`crate::binary::find`]).
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// Keeps the cluster's files (PKI, kubeconfigs, `cluster.json`, the log) in `dir`, which is left
    /// behind; by default they go to a temporary directory removed with the [`Cluster`].
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// How long [`Self::start`] waits for the cluster to be up (default: 120 s, for etcd and
    /// containers).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// The `cluster --config` file this builder describes (YAML; rendered as JSON, which is YAML too).
    pub fn config_file(&self) -> String {
        let servers: Vec<Value> = self
            .servers
            .iter()
            .map(|(name, server)| server.render(name))
            .collect();
        let store = match &self.store {
            Store::Memory => json!("memory"),
            Store::Etcd => json!("etcd"),
            Store::EtcdServers(urls) => json!({"etcd-servers": urls}),
        };
        let run = match self.run {
            Run::InProcess => "in-process",
            Run::Processes => "processes",
            Run::Containers => "containers",
        };
        let lb = match self.load_balancer {
            LoadBalancer::Embedded => "embedded",
            LoadBalancer::Haproxy => "haproxy",
            LoadBalancer::None => "none",
        };
        let file = json!({
            "servers": servers,
            "store": store,
            "run": run,
            "lb": lb,
            "controllers": self.controller_manager,
        });
        serde_json::to_string_pretty(&file).unwrap_or_default() + "\n"
    }

    /// Starts the cluster and returns once every server is ready and every proxy knows its peers (the
    /// binary writes `cluster.json` only then). A configuration the binary refuses fails with
    /// [`Error::ClusterExited`] carrying its one-line explanation.
    pub async fn start(self) -> Result<Cluster> {
        if self.servers.is_empty() {
            return Err(Error::InvalidCluster(
                "no servers: add one with ClusterBuilder::server".to_owned(),
            ));
        }
        let binary = match &self.binary {
            Some(binary) => binary.clone(),
            None => crate::binary::find()?,
        };
        Cluster::start(binary, self.dir.clone(), self.config_file(), self.startup_timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_says_what_the_builder_says() {
        let builder = ClusterBuilder::new()
            .server("a", |s| s.version("1.36").runtime_config("batch/v1=false"))
            .server("b", |s| {
                s.version("1.34")
                    .feature_gate("UnknownVersionInteroperabilityProxy", true)
                    .flag("authorization-mode", "Node,RBAC")
            })
            .store(Store::EtcdServers("http://127.0.0.1:2379".to_owned()))
            .run(Run::Processes)
            .load_balancer(LoadBalancer::Haproxy)
            .controller_manager(false);
        let file: Value = serde_json::from_str(&builder.config_file()).unwrap();
        assert_eq!(
            file,
            json!({
                "servers": [
                    {"name": "a", "version": "1.36", "runtime-config": "batch/v1=false"},
                    {"name": "b", "version": "1.34",
                     "feature-gates": "UnknownVersionInteroperabilityProxy=true",
                     "flags": {"authorization-mode": "Node,RBAC"}},
                ],
                "store": {"etcd-servers": "http://127.0.0.1:2379"},
                "run": "processes",
                "lb": "haproxy",
                "controllers": false,
            })
        );
    }
}
