//! What the API advertises, shared by the controllers: a [`DiscoveryCache`] refreshed every
//! [`RESYNC_PERIOD`] (client-go's `MetadataInformer` users and the garbage collector re-discover every
//! 30 s) and on demand (the namespace controller discovers afresh on every sync, as upstream's
//! `ServerPreferredNamespacedResources` does).
//!
//! Discovery is aggregated (`apidiscovery.k8s.io/v2`, two requests: `/api` and `/apis`), as client-go
//! prefers it. A group-version the server marks `Stale` is a **failed** group-version, as client-go
//! treats it (`StaleGroupVersionError`), never an absent one: a controller that took "not advertised"
//! for "does not exist" would finalize a namespace whose objects it could not see. A server that does
//! not answer aggregated discovery (before 1.26) is discovered the legacy way, group by group.
//!
//! Seen through a server running the Mixed Version Proxy, discovery is peer-aggregated: it lists what
//! any server of the cluster serves, and requests for a resource only a peer serves are proxied to it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::core::ApiResource;
use kube::core::discovery::v2::APIGroupDiscoveryList;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often [`DiscoveryCache::run`] re-discovers (client-go's and the garbage collector's 30 s).
pub const RESYNC_PERIOD: Duration = Duration::from_secs(30);

/// One resource (not a subresource) of one group-version, as discovery advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredResource {
    /// Group, version, kind and plural, ready for `Api::namespaced_with`.
    pub api_resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// The verbs it supports (`list`, `delete`, `deletecollection`, ...).
    pub verbs: Vec<String>,
    /// Whether its group-version is the group's preferred one.
    pub preferred: bool,
}

impl DiscoveredResource {
    /// Whether it supports every verb of `verbs`.
    pub fn supports_all(&self, verbs: &[&str]) -> bool {
        verbs.iter().all(|verb| self.verbs.iter().any(|v| v == verb))
    }

    /// client-go's `GroupVersionResource.String()`: `batch/v1, Resource=jobs`, `/v1, Resource=pods`.
    pub fn gvr_string(&self) -> String {
        format!(
            "{}/{}, Resource={}",
            self.api_resource.group, self.api_resource.version, self.api_resource.plural
        )
    }
}

/// Everything one discovery found, and the group-versions it could not discover.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoverySnapshot {
    /// Every resource of every group-version, preferred or not.
    pub resources: Vec<DiscoveredResource>,
    /// Group-versions (`batch/v1`, `v1`) whose discovery failed, with why.
    pub failed: BTreeMap<String, String>,
}

impl DiscoverySnapshot {
    /// The resources of their groups' preferred versions supporting every verb of `verbs`
    /// (client-go's `ServerPreferredResources` filtered by `SupportsAllVerbs`).
    pub fn preferred_with_verbs<'a>(
        &'a self,
        verbs: &'a [&'a str],
    ) -> impl Iterator<Item = &'a DiscoveredResource> {
        self.resources
            .iter()
            .filter(move |r| r.preferred && r.supports_all(verbs))
    }

    /// The group discovery failure, if any group-version failed (client-go's
    /// `ErrGroupDiscoveryFailed`).
    pub fn failure(&self) -> Option<DiscoveryError> {
        (!self.failed.is_empty()).then(|| DiscoveryError::GroupsFailed(self.failed.clone()))
    }
}

/// Why discovery is incomplete.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DiscoveryError {
    /// Discovery as a whole failed (e.g. `/apis` answered 503); the message is the server's.
    #[error("{0}")]
    Request(String),
    /// Some group-versions failed; the others were discovered. client-go's `ErrGroupDiscoveryFailed`
    /// message.
    #[error("unable to retrieve the complete list of server APIs: {}", render_failed(.0))]
    GroupsFailed(BTreeMap<String, String>),
}

impl DiscoveryError {
    /// How many group-versions failed (0 when discovery failed as a whole).
    pub fn failed_groups(&self) -> usize {
        match self {
            Self::Request(_) => 0,
            Self::GroupsFailed(groups) => groups.len(),
        }
    }
}

fn render_failed(groups: &BTreeMap<String, String>) -> String {
    groups
        .iter()
        .map(|(gv, err)| format!("{gv}: {err}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text of a client error as client-go prints the error: a Status's message, or the error.
pub fn error_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// The shared discovery of a controller manager. Cloning shares it.
#[derive(Clone)]
pub struct DiscoveryCache {
    client: kube::Client,
    current: Arc<RwLock<Arc<DiscoverySnapshot>>>,
    changes: watch::Sender<Arc<DiscoverySnapshot>>,
}

impl std::fmt::Debug for DiscoveryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveryCache")
            .field("resources", &self.current().resources.len())
            .finish_non_exhaustive()
    }
}

impl DiscoveryCache {
    /// An empty cache discovering through `client` (nothing is fetched until [`Self::refresh`]).
    pub fn new(client: kube::Client) -> Self {
        let empty = Arc::new(DiscoverySnapshot::default());
        Self {
            client,
            current: Arc::new(RwLock::new(empty.clone())),
            changes: watch::channel(empty).0,
        }
    }

    /// The last snapshot (empty before the first successful refresh).
    pub fn current(&self) -> Arc<DiscoverySnapshot> {
        self.current
            .read()
            .map_or_else(|poisoned| poisoned.into_inner().clone(), |c| c.clone())
    }

    /// Snapshots as they change (the garbage collector re-syncs its monitors on each).
    pub fn subscribe(&self) -> watch::Receiver<Arc<DiscoverySnapshot>> {
        self.changes.subscribe()
    }

    /// Discovers now; on success the snapshot (which may list failed group-versions) becomes the
    /// current one and subscribers see it if it changed.
    pub async fn refresh(&self) -> Result<Arc<DiscoverySnapshot>, DiscoveryError> {
        let snapshot = Arc::new(discover(&self.client).await?);
        match self.current.write() {
            Ok(mut current) => *current = snapshot.clone(),
            Err(poisoned) => *poisoned.into_inner() = snapshot.clone(),
        }
        self.changes.send_if_modified(|old| {
            if **old == *snapshot {
                false
            } else {
                *old = snapshot.clone();
                true
            }
        });
        Ok(snapshot)
    }

    /// Refreshes every `period` until `cancel` (failures are logged; the last snapshot stays).
    pub async fn run(self, period: Duration, cancel: CancellationToken) {
        loop {
            match self.refresh().await {
                Ok(snapshot) if !snapshot.failed.is_empty() => {
                    tracing::info!(failed = ?snapshot.failed, "discovery incomplete");
                }
                Ok(_) => {}
                Err(err) => tracing::info!(error = %err, "discovery failed"),
            }
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                () = cancel.cancelled() => return,
            }
        }
    }
}

/// One discovery through `client`: aggregated, or legacy when the server does not answer it.
async fn discover(client: &kube::Client) -> Result<DiscoverySnapshot, DiscoveryError> {
    let core = client.list_core_api_versions_aggregated().await;
    let groups = client.list_api_groups_aggregated().await;
    match (core, groups) {
        (Ok(core), Ok(groups)) => {
            let mut snapshot = DiscoverySnapshot::default();
            add_aggregated(&mut snapshot, core);
            add_aggregated(&mut snapshot, groups);
            Ok(snapshot)
        }
        // Decoding failed: a server without aggregated discovery answered the legacy document.
        (Err(kube::Error::SerdeError(_)), _) | (_, Err(kube::Error::SerdeError(_))) => {
            discover_legacy(client).await
        }
        (Err(err), _) | (_, Err(err)) => Err(DiscoveryError::Request(error_message(&err))),
    }
}

fn add_aggregated(snapshot: &mut DiscoverySnapshot, list: APIGroupDiscoveryList) {
    for group in list.items {
        let name = group
            .metadata
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default();
        // Versions come in preference order.
        for (index, version) in group.versions.into_iter().enumerate() {
            let Some(version_name) = version.version else {
                continue;
            };
            let api_version = if name.is_empty() {
                version_name.clone()
            } else {
                format!("{name}/{version_name}")
            };
            if version.freshness.as_deref() == Some("Stale") {
                snapshot.failed.insert(
                    api_version.clone(),
                    format!("stale GroupVersion discovery: {api_version}"),
                );
                continue;
            }
            for resource in version.resources {
                let (Some(plural), Some(kind)) =
                    (resource.resource, resource.response_kind.and_then(|k| k.kind))
                else {
                    continue;
                };
                snapshot.resources.push(DiscoveredResource {
                    api_resource: ApiResource {
                        group: name.clone(),
                        version: version_name.clone(),
                        api_version: api_version.clone(),
                        kind,
                        plural,
                    },
                    namespaced: resource.scope.as_deref() == Some("Namespaced"),
                    verbs: resource.verbs,
                    preferred: index == 0,
                });
            }
        }
    }
}

async fn discover_legacy(client: &kube::Client) -> Result<DiscoverySnapshot, DiscoveryError> {
    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .map_err(|err| DiscoveryError::Request(error_message(&err)))?;
    let mut snapshot = DiscoverySnapshot::default();
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest().to_owned();
        for version in group.versions() {
            for (api_resource, capabilities) in group.versioned_resources(version) {
                snapshot.resources.push(DiscoveredResource {
                    api_resource,
                    namespaced: capabilities.scope == kube::discovery::Scope::Namespaced,
                    verbs: capabilities.operations,
                    preferred: version == preferred,
                });
            }
        }
    }
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_group_versions_are_failures_with_client_gos_message() {
        let list: APIGroupDiscoveryList = serde_json::from_value(serde_json::json!({
            "apiVersion": "apidiscovery.k8s.io/v2", "kind": "APIGroupDiscoveryList",
            "items": [{"metadata": {"name": "batch"}, "versions": [
                {"version": "v1", "freshness": "Stale", "resources": []}]},
              {"metadata": {"name": "apps"}, "versions": [
                {"version": "v1", "freshness": "Current", "resources": [
                  {"resource": "deployments", "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                   "scope": "Namespaced", "verbs": ["delete", "deletecollection", "list"]}]}]}]
        }))
        .unwrap();
        let mut snapshot = DiscoverySnapshot::default();
        add_aggregated(&mut snapshot, list);
        assert_eq!(snapshot.resources.len(), 1);
        let deployments = &snapshot.resources[0];
        assert!(deployments.preferred && deployments.namespaced);
        assert_eq!(deployments.gvr_string(), "apps/v1, Resource=deployments");
        assert_eq!(
            snapshot.failure().unwrap().to_string(),
            "unable to retrieve the complete list of server APIs: batch/v1: stale GroupVersion discovery: batch/v1"
        );
    }
}
