//! The harm a false 404 does, counted: a kube-controller-manager (namespace controller and garbage
//! collector, the `controller-manager` crate) runs through the load balancer, as in an HA control
//! plane, while a workload gives it something to get wrong.
//!
//! - **Owners and dependents**: objects of the resources only the new version serves (found in the
//!   catalog; 1.35 → 1.36: mutating admission policies and their bindings), each owning
//!   [`DEPENDENTS_PER_OWNER`] ConfigMaps in namespace [`HARM_NAMESPACE`] through `ownerReferences`.
//!   Owners are never deleted, so a dependent that disappears was deleted by the garbage collector
//!   while its owner existed: its live GET of the owner was answered 404 by a server lacking the
//!   owner's resource (upstream's `isDangling`). Resources only the old version serves are used when
//!   the new one adds none (owners are then created while old servers serve them, and, as no server
//!   reads them at the end, taken to exist: the workload never deletes one).
//! - **Namespaces** created, filled (ConfigMaps, a dependent of the latest cluster-scoped owner, an
//!   object of each namespaced resource only some versions serve) and deleted, one after another,
//!   during the whole rollout; the namespace controller has to empty each through the API.
//!
//! Judged at the end (all servers at the new version): `dependents_wrongly_deleted` (dependents gone
//! whose owner is still there, same UID), `namespaces_stuck` (a deleted namespace not gone within
//! [`STUCK_AFTER`]), `namespace_objects_leaked` (objects still readable after their namespace is
//! gone). The garbage collector's discovery is refreshed every [`DISCOVERY_PERIOD`] (client-go: 30 s)
//! so that a rollout of seconds goes through as many re-discoveries as a real one of minutes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use http::Method;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ledger::{Answer, RequestKind};
use super::load::{Load, is_route_404};
use super::plan::{Plan, TargetResource};
use crate::cluster::AdminClient;
use crate::cluster::controller_manager::InProcessControllerManager;

/// Where the owners' dependents live (never deleted during a run).
pub(crate) const HARM_NAMESPACE: &str = "upgrade-harm";

/// ConfigMaps each owner owns.
pub(crate) const DEPENDENTS_PER_OWNER: usize = 2;

/// A deleted namespace not gone after this long is stuck (the threshold).
pub(crate) const STUCK_AFTER: Duration = Duration::from_secs(30);

/// How often the simulator's controller manager re-reads discovery.
pub(crate) const DISCOVERY_PERIOD: Duration = Duration::from_secs(2);

/// Pause between two owners.
const OWNER_EVERY: Duration = Duration::from_millis(150);

/// Pause between two namespaces.
const NAMESPACE_EVERY: Duration = Duration::from_millis(700);

/// How often deleted namespaces and dependents are looked at.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Attempts at one create before the workload moves on (a 404 through a server lacking the
/// resource, a 503 while a server restarts).
const ATTEMPTS: usize = 5;

/// The label every object of the workload carries (`owner`, `dependent`, `filler`).
const ROLE_LABEL: &str = "upgrade-sim/harm";

/// The three counts of a run, in `report.json` beside the clients' counts.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct HarmCounts {
    /// Dependents the garbage collector deleted while their owner existed.
    pub dependents_wrongly_deleted: usize,
    /// Deleted namespaces not gone within 30 s.
    pub namespaces_stuck: usize,
    /// Objects left after their namespace was gone.
    pub namespace_objects_leaked: usize,
}

/// What the workload did in a run (`report.json`'s `harm_workload`).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct HarmWorkload {
    /// The owners' resources (`resource.group/version`).
    pub owner_resources: Vec<String>,
    /// Owners created.
    pub owners: usize,
    /// Dependents created.
    pub dependents: usize,
    /// Namespaces deleted.
    pub namespaces_deleted: usize,
    /// Objects created in them.
    pub namespace_objects: usize,
}

/// A moment on the timeline where harm happened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HarmMark {
    /// Seconds since the run started.
    pub at: f64,
    /// What happened.
    pub kind: HarmKind,
}

/// The three harms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HarmKind {
    /// A dependent seen gone while its owner existed.
    WronglyDeleted,
    /// A namespace still there 30 s after its deletion (marked then).
    Stuck,
    /// A namespace gone with objects left (marked when it went).
    Leaked,
}

/// What a run's harm amounted to.
#[derive(Debug, Clone, Default)]
pub(crate) struct HarmOutcome {
    /// The counts.
    pub counts: HarmCounts,
    /// The workload.
    pub workload: HarmWorkload,
    /// When.
    pub marks: Vec<HarmMark>,
}

#[derive(Debug, Clone)]
struct Owner {
    target: TargetResource,
    name: String,
    uid: String,
}

#[derive(Debug, Clone)]
struct Dependent {
    owner: usize,
    created: f64,
    gone: Option<f64>,
}

#[derive(Debug, Clone, Default)]
struct NamespaceLife {
    deleted: Option<f64>,
    gone: Option<f64>,
    /// (collection path, name) of every object created in it.
    objects: Vec<(TargetResource, String)>,
}

#[derive(Debug, Default)]
struct State {
    owners: Vec<Owner>,
    dependents: BTreeMap<String, Dependent>,
    namespaces: BTreeMap<String, NamespaceLife>,
}

/// The workload of one run, and what it saw.
pub(crate) struct Harm {
    load: Arc<Load>,
    owner_targets: Vec<TargetResource>,
    /// Owner resources the new version does not serve: not read back at the end.
    unreadable_at_end: Vec<TargetResource>,
    fillers: Vec<TargetResource>,
    state: Mutex<State>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn configmaps() -> TargetResource {
    TargetResource {
        group: String::new(),
        version: "v1".to_owned(),
        resource: "configmaps".to_owned(),
        kind: "ConfigMap".to_owned(),
        namespaced: true,
    }
}

fn namespaces() -> TargetResource {
    TargetResource {
        group: String::new(),
        version: "v1".to_owned(),
        resource: "namespaces".to_owned(),
        kind: "Namespace".to_owned(),
        namespaced: false,
    }
}

/// The collection of `target` in `namespace` (ignored for cluster-scoped resources).
fn collection(target: &TargetResource, namespace: &str) -> String {
    target
        .collection_path()
        .replace("/namespaces/default/", &format!("/namespaces/{namespace}/"))
}

/// The owner resources of `plan`: those only the new version serves, else those only the old one does.
pub(crate) fn owner_targets(plan: &Plan) -> Vec<TargetResource> {
    let Ok(new) = plan.served(plan.to, true) else {
        return Vec::new();
    };
    let served_by_new = |t: &TargetResource| {
        new.gvrs()
            .any(|(g, v, r)| g == t.group && v == t.version && r.name == t.resource)
    };
    let only_some: Vec<&TargetResource> = plan
        .targets
        .iter()
        .filter(|t| t.resource != "configmaps")
        .collect();
    let new_only: Vec<TargetResource> = only_some
        .iter()
        .filter(|t| served_by_new(t))
        .map(|t| (*t).clone())
        .collect();
    if new_only.is_empty() {
        only_some.into_iter().cloned().collect()
    } else {
        new_only
    }
}

/// Writes `DIR/cluster.kubeconfig` for the balancer at `url` and starts the controller manager
/// through it (every controller, upstream's settings but [`DISCOVERY_PERIOD`]).
pub(crate) async fn start_controller_manager(
    dir: &Path,
    pki: &certs::Pki,
    url: &str,
) -> anyhow::Result<InProcessControllerManager> {
    let kubeconfig = balancer_kubeconfig(dir, pki, url)?;
    InProcessControllerManager::start(
        &kubeconfig,
        ::controller_manager::ControllerManagerOptions {
            discovery_period: DISCOVERY_PERIOD,
            ..::controller_manager::ControllerManagerOptions::default()
        },
    )
    .await
    .context("failed to start the controller manager")
}

/// `DIR/cluster.kubeconfig`, pointing at the balancer's `url`.
pub(crate) fn balancer_kubeconfig(dir: &Path, pki: &certs::Pki, url: &str) -> anyhow::Result<PathBuf> {
    let kubeconfig = dir.join("cluster.kubeconfig");
    pki.write_kubeconfig(&kubeconfig, url, "cluster")
        .context("failed to write the load balancer's kubeconfig")?;
    Ok(kubeconfig)
}

impl Harm {
    /// The workload of `plan`, sending through `load`.
    pub(crate) fn new(plan: &Plan, load: Arc<Load>) -> Self {
        let fillers = plan
            .targets
            .iter()
            .filter(|t| t.namespaced && t.resource != "configmaps")
            .cloned()
            .collect();
        let owner_targets = owner_targets(plan);
        let unreadable_at_end = match plan.served(plan.to, true) {
            Ok(new) => owner_targets
                .iter()
                .filter(|t| {
                    !new.gvrs()
                        .any(|(g, v, r)| g == t.group && v == t.version && r.name == t.resource)
                })
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        };
        Self {
            load,
            owner_targets,
            unreadable_at_end,
            fillers,
            state: Mutex::default(),
        }
    }

    fn now(&self) -> f64 {
        self.load.now()
    }

    /// POSTs `object` to `path` until it is created, at most [`ATTEMPTS`] times; the created object.
    /// Only what may pass on another try is retried (no answer, a 404 from a server lacking the
    /// resource, 429, 5xx); a 409 (it exists) or a 422 (the catalog's kind wants a real spec) is
    /// `None` at once.
    async fn create(
        &self,
        client: &AdminClient,
        cancel: &CancellationToken,
        path: &str,
        target: &TargetResource,
        object: &Value,
    ) -> Option<Value> {
        self.create_with(client, cancel, path, target, object, ATTEMPTS)
            .await
    }

    /// [`Self::create`] with at most `attempts` attempts.
    async fn create_with(
        &self,
        client: &AdminClient,
        cancel: &CancellationToken,
        path: &str,
        target: &TargetResource,
        object: &Value,
        attempts: usize,
    ) -> Option<Value> {
        for _ in 0..attempts {
            let reply = self
                .load
                .send(
                    client,
                    cancel,
                    Method::POST,
                    path,
                    RequestKind::Resource,
                    Some(target),
                    Some(object),
                )
                .await?;
            if reply.ok() {
                return reply.json();
            }
            if !matches!(
                reply.answer,
                Answer::Transport | Answer::Status(404 | 429 | 500..)
            ) {
                return None;
            }
            tokio::select! {
                () = cancel.cancelled() => return None,
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        None
    }

    /// Creates owners and their dependents until `cancel` fires.
    pub(crate) async fn run_owners(self: Arc<Self>, cancel: CancellationToken) {
        let mut client = self.load.client();
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HARM_NAMESPACE}});
        // The namespace first (409 if a previous attempt made it).
        while !cancel.is_cancelled() {
            let Some(reply) = self
                .load
                .send(
                    &client,
                    &cancel,
                    Method::POST,
                    "/api/v1/namespaces",
                    RequestKind::Resource,
                    Some(&namespaces()),
                    Some(&ns),
                )
                .await
            else {
                return;
            };
            if reply.ok() || reply.answer == Answer::Status(409) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut n = 0usize;
        while !cancel.is_cancelled() && !self.owner_targets.is_empty() {
            n += 1;
            // A new connection per owner, so the balancer spreads them as it spreads many users'.
            client = self.load.client();
            let target = &self.owner_targets[n % self.owner_targets.len()];
            let name = format!("harm-owner-{n}");
            // Namespaced owners live beside their dependents: an owner reference names an owner in the
            // dependent's own namespace (or a cluster-scoped one).
            let object = workload_object(target, &name, "owner", Some(HARM_NAMESPACE), &[]);
            // One attempt: a user whose create failed tries again later, on a new connection.
            if let Some(created) = self
                .create_with(
                    &client,
                    &cancel,
                    &collection(target, HARM_NAMESPACE),
                    target,
                    &object,
                    1,
                )
                .await
                && let Some(uid) = created.pointer("/metadata/uid").and_then(Value::as_str)
            {
                let owner = Owner {
                    target: target.clone(),
                    name: name.clone(),
                    uid: uid.to_owned(),
                };
                tracing::debug!(owner = %name, at = self.now(), "harm workload: owner created");
                let index = {
                    let mut state = lock(&self.state);
                    state.owners.push(owner.clone());
                    state.owners.len() - 1
                };
                for k in 0..DEPENDENTS_PER_OWNER {
                    let dependent = format!("harm-dependent-{n}-{k}");
                    let object = workload_object(
                        &configmaps(),
                        &dependent,
                        "dependent",
                        Some(HARM_NAMESPACE),
                        &[&owner],
                    );
                    let path = collection(&configmaps(), HARM_NAMESPACE);
                    if self
                        .create(&client, &cancel, &path, &configmaps(), &object)
                        .await
                        .is_some()
                    {
                        let created = self.now();
                        lock(&self.state).dependents.insert(
                            dependent,
                            Dependent {
                                owner: index,
                                created,
                                gone: None,
                            },
                        );
                    }
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(OWNER_EVERY) => {}
            }
        }
    }

    /// Creates, fills and deletes namespaces until `cancel` fires.
    pub(crate) async fn run_namespaces(self: Arc<Self>, cancel: CancellationToken) {
        let mut n = 0usize;
        while !cancel.is_cancelled() {
            n += 1;
            // A new connection per namespace, as each were another user's.
            let client = self.load.client();
            let name = format!("harm-ns-{n}");
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {ROLE_LABEL: "namespace"}}});
            if self
                .create(&client, &cancel, "/api/v1/namespaces", &namespaces(), &ns)
                .await
                .is_some()
            {
                lock(&self.state)
                    .namespaces
                    .insert(name.clone(), NamespaceLife::default());
                self.fill(&client, &cancel, &name).await;
                self.delete_namespace(&client, &cancel, &name).await;
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(NAMESPACE_EVERY) => {}
            }
        }
    }

    /// Two ConfigMaps, a dependent of the latest cluster-scoped owner, an object of each namespaced
    /// filler.
    async fn fill(&self, client: &AdminClient, cancel: &CancellationToken, namespace: &str) {
        // Only a cluster-scoped owner can own an object of another namespace.
        let latest = lock(&self.state)
            .owners
            .iter()
            .rev()
            .find(|o| !o.target.namespaced)
            .cloned();
        let mut objects: Vec<(TargetResource, Value)> = (0..2)
            .map(|i| {
                let name = format!("filler-{i}");
                (
                    configmaps(),
                    workload_object(&configmaps(), &name, "filler", Some(namespace), &[]),
                )
            })
            .collect();
        if let Some(owner) = &latest {
            objects.push((
                configmaps(),
                workload_object(&configmaps(), "dependent", "filler", Some(namespace), &[owner]),
            ));
        }
        for target in &self.fillers {
            let name = format!("filler-{}", target.resource);
            objects.push((
                target.clone(),
                workload_object(target, &name, "filler", Some(namespace), &[]),
            ));
        }
        for (target, object) in objects {
            let path = collection(&target, namespace);
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if self
                .create(client, cancel, &path, &target, &object)
                .await
                .is_some()
                && let Some(life) = lock(&self.state).namespaces.get_mut(namespace)
            {
                life.objects.push((target, name));
            }
        }
    }

    async fn delete_namespace(&self, client: &AdminClient, cancel: &CancellationToken, name: &str) {
        let path = format!("/api/v1/namespaces/{name}");
        for _ in 0..ATTEMPTS {
            let Some(reply) = self
                .load
                .send(
                    client,
                    cancel,
                    Method::DELETE,
                    &path,
                    RequestKind::Resource,
                    Some(&namespaces()),
                    None,
                )
                .await
            else {
                return;
            };
            if reply.ok() || reply.answer == Answer::Status(409) {
                let at = self.now();
                if let Some(life) = lock(&self.state).namespaces.get_mut(name) {
                    life.deleted = Some(at);
                }
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Watches (by polling, through the balancer) for dependents that disappear and deleted
    /// namespaces that go, until `cancel` fires.
    pub(crate) async fn run_checks(self: Arc<Self>, cancel: CancellationToken) {
        let client = self.load.client();
        while !cancel.is_cancelled() {
            self.check_once(&client, &cancel).await;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(CHECK_EVERY) => {}
            }
        }
    }

    /// One look at the dependents (a list) and at each deleted namespace not yet gone (a GET).
    async fn check_once(&self, client: &AdminClient, cancel: &CancellationToken) {
        let path = format!(
            "{}?labelSelector={}%3Ddependent",
            collection(&configmaps(), HARM_NAMESPACE),
            ROLE_LABEL.replace('/', "%2F")
        );
        let start = self.now();
        if let Some(reply) = self.load.get(client, cancel, &path, &configmaps()).await
            && let Some(list) = reply.ok().then(|| reply.json()).flatten()
        {
            let present: std::collections::HashSet<&str> = list
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
                .collect();
            let at = self.now();
            let mut state = lock(&self.state);
            for (name, dependent) in &mut state.dependents {
                if dependent.gone.is_none() && dependent.created < start && !present.contains(name.as_str()) {
                    tracing::debug!(dependent = %name, at, "harm workload: dependent gone");
                    dependent.gone = Some(at);
                }
            }
        }
        let waiting: Vec<String> = lock(&self.state)
            .namespaces
            .iter()
            .filter(|(_, life)| life.deleted.is_some() && life.gone.is_none())
            .map(|(name, _)| name.clone())
            .collect();
        for name in waiting {
            let path = format!("/api/v1/namespaces/{name}");
            let Some(reply) = self.load.get(client, cancel, &path, &namespaces()).await else {
                return;
            };
            if reply.answer == Answer::Status(404) && !is_route_404(&reply.body) {
                let at = self.now();
                if let Some(life) = lock(&self.state).namespaces.get_mut(&name) {
                    life.gone = Some(at);
                }
            }
        }
    }

    /// After the rollout (every server at the new version): waits until each deleted namespace is
    /// gone or [`STUCK_AFTER`] has passed since its deletion, looks at the dependents once more, and
    /// judges. `cancel` stops it early (what is known then is judged).
    pub(crate) async fn finish(&self, cancel: &CancellationToken) -> HarmOutcome {
        let client = self.load.client();
        loop {
            self.check_once(&client, cancel).await;
            let now = self.now();
            let pending = lock(&self.state).namespaces.values().any(|life| {
                life.deleted
                    .is_some_and(|d| life.gone.is_none() && now - d < STUCK_AFTER.as_secs_f64())
            });
            if !pending || cancel.is_cancelled() {
                break;
            }
            tokio::time::sleep(CHECK_EVERY).await;
        }
        // Owners still there (same UID) and objects left in gone namespaces, read back.
        let (owners, namespaces) = {
            let state = lock(&self.state);
            (state.owners.clone(), state.namespaces.clone())
        };
        let mut alive = Vec::with_capacity(owners.len());
        for owner in &owners {
            if self.unreadable_at_end.contains(&owner.target) {
                alive.push(true);
                continue;
            }
            let path = format!("{}/{}", collection(&owner.target, HARM_NAMESPACE), owner.name);
            let uid = match self.load.get(&client, cancel, &path, &owner.target).await {
                Some(reply) if reply.ok() => reply.json().and_then(|o| {
                    o.pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                }),
                _ => None,
            };
            alive.push(uid.as_deref() == Some(owner.uid.as_str()));
        }
        let dependents: Vec<Dependent> = lock(&self.state).dependents.values().cloned().collect();
        let mut outcome = HarmOutcome::default();
        for dependent in &dependents {
            if let Some(at) = dependent.gone
                && alive.get(dependent.owner).copied().unwrap_or(false)
            {
                outcome.counts.dependents_wrongly_deleted += 1;
                outcome.marks.push(HarmMark {
                    at,
                    kind: HarmKind::WronglyDeleted,
                });
            }
        }
        for (name, life) in &namespaces {
            if let Some(deleted) = life.deleted
                && life.gone.is_none_or(|g| g - deleted > STUCK_AFTER.as_secs_f64())
            {
                outcome.counts.namespaces_stuck += 1;
                outcome.marks.push(HarmMark {
                    at: deleted + STUCK_AFTER.as_secs_f64(),
                    kind: HarmKind::Stuck,
                });
            }
            let Some(gone) = life.gone else { continue };
            let mut leaked = 0;
            for (target, object) in &life.objects {
                let path = format!("{}/{object}", collection(target, name));
                if let Some(reply) = self.load.get(&client, cancel, &path, target).await
                    && reply.ok()
                {
                    leaked += 1;
                }
            }
            if leaked > 0 {
                outcome.counts.namespace_objects_leaked += leaked;
                outcome.marks.push(HarmMark {
                    at: gone,
                    kind: HarmKind::Leaked,
                });
            }
        }
        outcome.workload = HarmWorkload {
            owner_resources: self.owner_targets.iter().map(TargetResource::label).collect(),
            owners: owners.len(),
            dependents: dependents.len(),
            namespaces_deleted: namespaces.values().filter(|l| l.deleted.is_some()).count(),
            namespace_objects: namespaces.values().map(|l| l.objects.len()).sum(),
        };
        outcome.marks.sort_by(|a, b| a.at.total_cmp(&b.at));
        outcome
    }
}

/// An object of the workload: `role`-labelled, in `namespace` when namespaced, owned by `owners`.
fn workload_object(
    target: &TargetResource,
    name: &str,
    role: &str,
    namespace: Option<&str>,
    owners: &[&Owner],
) -> Value {
    let mut metadata = json!({"name": name, "labels": {ROLE_LABEL: role}});
    if target.namespaced
        && let Some(namespace) = namespace
    {
        metadata["namespace"] = json!(namespace);
    }
    if !owners.is_empty() {
        metadata["ownerReferences"] = owners
            .iter()
            .map(|o| {
                json!({
                    "apiVersion": o.target.api_version(), "kind": o.target.kind,
                    "name": o.name, "uid": o.uid,
                })
            })
            .collect();
    }
    let mut object = json!({"apiVersion": target.api_version(), "kind": target.kind, "metadata": metadata});
    if target.resource == "configmaps" {
        object["data"] = json!({"role": role});
    } else {
        object["spec"] = target.minimal_spec();
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(from: &str, to: &str) -> Plan {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: super::super::UpgradeArgs,
        }
        let cli = Cli::parse_from(["upgrade", "--from", from, "--to", to]);
        Plan::new(cli.args).expect("a plan")
    }

    #[test]
    fn owners_are_of_the_resources_only_the_new_version_serves() {
        let labels: Vec<String> = owner_targets(&plan("1.35", "1.36"))
            .iter()
            .map(TargetResource::label)
            .collect();
        assert_eq!(
            labels,
            [
                "mutatingadmissionpolicies.admissionregistration.k8s.io/v1",
                "mutatingadmissionpolicybindings.admissionregistration.k8s.io/v1"
            ]
        );
    }

    #[test]
    fn a_dependent_names_its_owner_by_api_version_kind_name_and_uid() {
        let owner = Owner {
            target: owner_targets(&plan("1.35", "1.36"))[0].clone(),
            name: "harm-owner-1".into(),
            uid: "u-1".into(),
        };
        let dependent = workload_object(&configmaps(), "d", "dependent", Some(HARM_NAMESPACE), &[&owner]);
        assert_eq!(
            dependent["metadata"],
            json!({
                "name": "d", "namespace": HARM_NAMESPACE, "labels": {ROLE_LABEL: "dependent"},
                "ownerReferences": [{
                    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                    "name": "harm-owner-1", "uid": "u-1",
                }],
            })
        );
        assert_eq!(
            collection(&configmaps(), "harm-ns-1"),
            "/api/v1/namespaces/harm-ns-1/configmaps"
        );
        let owner_object = workload_object(&owner.target, "o", "owner", Some("ignored"), &[]);
        assert_eq!(owner_object["metadata"].get("namespace"), None, "cluster-scoped");
    }
}
