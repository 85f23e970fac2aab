//! The parameters of an admission policy binding (upstream `plugin/policy/generic`'s `CollectParams` and
//! the policy source's resolution of `paramKind`): which objects a binding's `paramRef` names, each one
//! evaluation of the policy with it as `params`.
//!
//! Upstream watches the parameter kind with an informer; the fake reads the store at each request, so a
//! parameter is known to every server of a cluster as soon as it is written (upstream falls back to a
//! direct read when its informer has not seen a parameter yet, which ends the same way).

use serde_json::Value;

use super::RestRequest;
use super::selector::LabelSelector;
use crate::store::{ObjectKey, StorageResource, StoreError};

/// Why a binding's parameters could not be collected (upstream's configuration errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParamError {
    /// The policy's `paramKind` names no served kind: `failed to configure policy: …`.
    Policy(String),
    /// The binding's `paramRef` cannot be used: `failed to configure binding: …`.
    Binding(String),
}

/// The resource serving `paramKind` and whether it is namespaced: a built-in the server serves, else a
/// custom resource whose CRD names that kind.
async fn resource_of(
    req: &RestRequest<'_>,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<(StorageResource, bool)> {
    if let Some((resource, namespaced)) = req.ctx.catalog.resource_of_kind(group, version, kind) {
        return Some((StorageResource::new(group, &resource), namespaced));
    }
    let crds = StorageResource::new("apiextensions.k8s.io", "customresourcedefinitions");
    let (crds, _) = req.ctx.store.list(&crds, None).await.ok()?;
    crds.into_iter().find_map(|crd| {
        let spec = &crd["spec"];
        let serves = spec["versions"].as_array().is_some_and(|versions| {
            versions
                .iter()
                .any(|v| v["name"] == version && v["served"] != false)
        });
        (spec["group"] == group && spec["names"]["kind"] == kind && serves).then(|| {
            let plural = spec["names"]["plural"].as_str().unwrap_or_default();
            (StorageResource::new(group, plural), spec["scope"] != "Cluster")
        })
    })
}

/// The parameters to evaluate `policy` with for `binding`: `[null]` without `paramKind` or `paramRef`,
/// else the objects `paramRef` names (by `name`, or by `selector`, in `namespace` or the request's for a
/// namespaced kind); none found is an error under `parameterNotFoundAction: Deny`, no evaluation under
/// `Allow`.
pub(crate) async fn collect(
    req: &RestRequest<'_>,
    policy: &Value,
    binding: &Value,
) -> Result<Vec<Value>, ParamError> {
    let Some(param_kind) = policy.pointer("/spec/paramKind").filter(|k| k.is_object()) else {
        return Ok(vec![Value::Null]);
    };
    let api_version = param_kind["apiVersion"].as_str().unwrap_or_default();
    let kind = param_kind["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let Some((resource, namespaced)) = resource_of(req, group, version, kind).await else {
        return Err(ParamError::Policy(format!(
            "failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'"
        )));
    };
    let Some(param_ref) = binding.pointer("/spec/paramRef").filter(|r| r.is_object()) else {
        return Ok(vec![Value::Null]);
    };
    let text = |field: &str| param_ref[field].as_str().unwrap_or_default();
    let namespace = if !namespaced {
        if !text("namespace").is_empty() {
            return Err(ParamError::Binding(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".to_owned(),
            ));
        }
        None
    } else if !text("namespace").is_empty() {
        Some(text("namespace").to_owned())
    } else if let Some(namespace) = req.namespace.clone().filter(|n| !n.is_empty()) {
        Some(namespace)
    } else {
        return Err(ParamError::Binding(
            "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                .to_owned(),
        ));
    };
    let params = if !text("name").is_empty() {
        if param_ref.get("selector").is_some_and(|s| !s.is_null()) {
            return Err(ParamError::Binding(
                "paramRef.name and paramRef.selector are mutually exclusive".to_owned(),
            ));
        }
        let key = ObjectKey {
            namespace,
            name: text("name").to_owned(),
        };
        match req.ctx.store.get(&resource, &key).await {
            Ok(param) => vec![param],
            Err(StoreError::NotFound { .. }) => Vec::new(),
            Err(error) => return Err(ParamError::Binding(error.to_string())),
        }
    } else if let Some(selector) = param_ref.get("selector").filter(|s| s.is_object()) {
        let selector = LabelSelector::from_label_selector(selector).map_err(ParamError::Binding)?;
        let (all, _) = req
            .ctx
            .store
            .list(&resource, namespace.as_deref())
            .await
            .map_err(|e| ParamError::Binding(e.to_string()))?;
        all.into_iter().filter(|param| selector.matches(param)).collect()
    } else {
        return Err(ParamError::Binding(
            "one of name or selector must be provided".to_owned(),
        ));
    };
    if params.is_empty() && text("parameterNotFoundAction") == "Deny" {
        return Err(ParamError::Binding(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_owned(),
        ));
    }
    Ok(params)
}

impl ParamError {
    /// Upstream's `PolicyError` text for this error of `policy` (and `binding`, for a binding's error).
    pub(crate) fn message(&self, policy: &str, binding: &str) -> String {
        match self {
            Self::Policy(error) => {
                format!("policy {policy:?} denied request: failed to configure policy: {error}")
            }
            Self::Binding(error) => {
                format!(
                    "policy '{policy}' with binding '{binding}' denied request: failed to configure binding: {error}"
                )
            }
        }
    }
}
