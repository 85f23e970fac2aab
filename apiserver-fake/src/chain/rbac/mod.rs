//! `--authorization-mode=RBAC`: kube-apiserver's role-based access control, on the Roles,
//! ClusterRoles and bindings in the store.
//!
//! * [`RbacAuthorizer`] decides on a snapshot of the policy ([`policy::Policy`]), kept equal to the
//!   store by informers, so a request never waits for storage.
//! * [`run_controller`] does, for each server, what kube-apiserver's
//!   `rbac/bootstrap-roles` post-start hook does (creates the bootstrap ClusterRoles and
//!   ClusterRoleBindings that are missing: `cluster-admin` for `system:masters`, `system:discovery`,
//!   `system:basic-user`, `system:public-info-viewer`, the aggregated `admin`/`edit`/`view`, …, from
//!   `catalog/rbac-bootstrap.json`), and what kube-controller-manager's clusterrole-aggregation
//!   controller does (writes the union of the selected roles' rules into each aggregated ClusterRole).
//!   `/readyz` waits for both the bootstrap and the first sync of the policy.
//!
//! Deviations: aggregation selectors use `matchLabels` only; the bootstrap roles are created when
//! missing but not reconciled when they exist (upstream adds missing rules to roles annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`). Every server bootstraps them, whatever its
//! `--authorization-mode`, as kube-apiserver does (its post-start hook comes with the RBAC API group).

pub(crate) mod policy;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use mvp_core::{RequestInfo, UserInfo};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controllers::informer::run_informer;
use crate::store::{ObjectKey, StorageResource, Store, StoreError};

/// The API group of RBAC objects.
pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";

/// The bootstrap policy kube-apiserver creates, in the project's compact form (see the module docs).
const BOOTSTRAP: &str = include_str!("../../../catalog/rbac-bootstrap.json");

/// The RBAC authorizer of one server.
#[derive(Debug, Default)]
pub(crate) struct RbacAuthorizer {
    policy: ArcSwap<policy::Policy>,
    bootstrapped: AtomicBool,
    synced: AtomicBool,
}

impl RbacAuthorizer {
    /// RBAC's decision for `user` making the request `info`: `Ok` with the allowing binding when a
    /// bound rule allows it, else the reason (usually empty, as upstream's).
    pub(crate) fn authorize(&self, user: &UserInfo, info: &RequestInfo) -> Result<String, String> {
        self.policy.load().authorize(user, info)
    }

    /// The rules bound to `user` in `namespace` and the error of bindings whose role is missing
    /// ([`policy::Policy::rules_for`]).
    pub(crate) fn rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
    ) -> (Vec<policy::PolicyRule>, Option<String>) {
        self.policy.load().rules_for(user, namespace)
    }

    /// Whether the bootstrap policy exists and the policy has been read once (`/readyz`'s
    /// `poststarthook/rbac/bootstrap-roles`).
    pub(crate) fn is_ready(&self) -> bool {
        self.bootstrapped.load(Ordering::Acquire) && self.synced.load(Ordering::Acquire)
    }
}

fn resource(plural: &str) -> StorageResource {
    StorageResource::new(GROUP, plural)
}

/// The bootstrap ClusterRoles and ClusterRoleBindings as API objects.
pub(crate) fn bootstrap_objects() -> (Vec<Value>, Vec<Value>) {
    let data: Value = serde_json::from_str(BOOTSTRAP).unwrap_or_default();
    let list = |key: &str| {
        data.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let annotations = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    let roles = list("clusterRoles")
        .into_iter()
        .map(|role| {
            let mut object = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": role["name"], "labels": role.get("labels").cloned().unwrap_or(json!({})), "annotations": annotations},
                "rules": role.get("rules").cloned().unwrap_or(json!([])),
            });
            if let Some(aggregation) = role.get("aggregationRule") {
                object["aggregationRule"] = aggregation.clone();
            }
            object
        })
        .collect();
    let bindings = list("clusterRoleBindings")
        .into_iter()
        .map(|binding| {
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": binding["name"], "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}, "annotations": annotations},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": binding["roleRef"]},
                "subjects": binding.get("subjects").cloned().unwrap_or(json!([])),
            })
        })
        .collect();
    (roles, bindings)
}

/// Creates what is missing of the bootstrap policy, retrying while the store is unavailable.
async fn bootstrap(store: &dyn Store, cancel: &CancellationToken) {
    let (roles, bindings) = bootstrap_objects();
    let objects = roles
        .into_iter()
        .map(|r| (resource("clusterroles"), r))
        .chain(bindings.into_iter().map(|b| (resource("clusterrolebindings"), b)));
    for (resource, object) in objects {
        let key = ObjectKey::cluster(object["metadata"]["name"].as_str().unwrap_or_default());
        loop {
            match store.create(&resource, &key, object.clone()).await {
                Ok(_) | Err(StoreError::AlreadyExists { .. }) => break,
                Err(err) => {
                    tracing::warn!(error = %err, name = %key, "failed to create a bootstrap RBAC object");
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_millis(200)) => {}
                    }
                }
            }
        }
    }
}

/// The lists the policy is built from: roles, cluster roles, role bindings, cluster role bindings.
type Lists = [Option<Vec<Value>>; 4];

/// Bootstraps the policy, then keeps `rbac`'s snapshot equal to the store and aggregated
/// ClusterRoles' rules written (see the module docs), until `cancel`.
pub(crate) async fn run_controller(
    store: Arc<dyn Store>,
    rbac: Arc<RbacAuthorizer>,
    cancel: CancellationToken,
) {
    bootstrap(store.as_ref(), &cancel).await;
    rbac.bootstrapped.store(true, Ordering::Release);
    let (lists_tx, mut lists) = watch::channel::<Lists>(Default::default());
    let lists_tx = Arc::new(lists_tx);
    let mut informers = tokio::task::JoinSet::new();
    for (index, plural) in ["roles", "clusterroles", "rolebindings", "clusterrolebindings"]
        .into_iter()
        .enumerate()
    {
        let lists_tx = lists_tx.clone();
        informers.spawn(run_informer(
            store.clone(),
            resource(plural),
            None,
            cancel.clone(),
            move |objects| {
                lists_tx.send_modify(|lists| lists[index] = Some(objects.to_vec()));
            },
        ));
    }
    loop {
        let current = lists.borrow_and_update().clone();
        if let [
            Some(roles),
            Some(cluster_roles),
            Some(role_bindings),
            Some(cluster_role_bindings),
        ] = &current
        {
            let policy =
                policy::Policy::from_objects(roles, cluster_roles, role_bindings, cluster_role_bindings);
            write_aggregated_rules(store.as_ref(), cluster_roles, &policy).await;
            rbac.policy.store(Arc::new(policy));
            // After the first write-back: a server that says ready shows aggregated roles whole.
            rbac.synced.store(true, Ordering::Release);
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = lists.changed() => if changed.is_err() { return },
        }
    }
}

/// The clusterrole-aggregation controller: writes into each aggregated ClusterRole the rules `policy`
/// gathered for it (aggregation resolved through aggregated roles), when they differ from what it
/// holds (a conflict with another server's write is left to the next change).
async fn write_aggregated_rules(store: &dyn Store, cluster_roles: &[Value], policy: &policy::Policy) {
    for object in cluster_roles {
        let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let Some(role) = policy.cluster_roles.get(name).filter(|r| r.aggregation.is_some()) else {
            continue;
        };
        if policy::cluster_role(object).rules == role.rules {
            continue;
        }
        let mut updated = object.clone();
        updated["rules"] = serde_json::to_value(&role.rules).unwrap_or_default();
        let _ = store
            .update(
                &resource("clusterroles"),
                &ObjectKey::cluster(name),
                updated,
                None,
            )
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_policy_grants_what_upstream_grants() {
        let (roles, bindings) = bootstrap_objects();
        let empty: [Value; 0] = [];
        let policy = policy::Policy::from_objects(&empty, &roles, &empty, &bindings);
        let user = |name: &str, groups: &[&str]| {
            let mut user = UserInfo::new(name);
            user.groups = groups.iter().map(|g| (*g).to_owned()).collect();
            user
        };
        let info = |method: &str, uri: &str| {
            RequestInfo::from_parts(&method.parse().unwrap(), &uri.parse().unwrap()).unwrap()
        };
        let jane = user("jane", &["system:authenticated"]);
        assert!(
            policy.authorize(&jane, &info("GET", "/apis")).is_ok(),
            "system:discovery"
        );
        assert!(
            policy.authorize(&jane, &info("GET", "/version")).is_ok(),
            "system:public-info-viewer"
        );
        assert!(
            policy
                .authorize(
                    &jane,
                    &info("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews")
                )
                .is_ok(),
            "system:basic-user"
        );
        assert!(
            policy
                .authorize(&jane, &info("GET", "/api/v1/namespaces/default/secrets"))
                .is_err()
        );
        let admin = user("root", &["system:masters"]);
        assert!(
            policy
                .authorize(&admin, &info("DELETE", "/api/v1/namespaces/x"))
                .is_ok(),
            "cluster-admin"
        );
        // admin/edit/view are aggregated from the system:aggregate-to-* roles.
        let view = &policy.cluster_roles["view"].rules;
        assert!(
            view.iter().any(|r| r.resources.iter().any(|res| res == "pods")),
            "{view:?}"
        );
        let edit = &policy.cluster_roles["edit"].rules;
        assert!(edit.len() > view.len());
        // Two levels: admin gathers edit, which gathers view.
        let admin_rules = &policy.cluster_roles["admin"].rules;
        assert!(
            view.iter()
                .all(|rule| edit.contains(rule) && admin_rules.contains(rule))
        );
    }
}
