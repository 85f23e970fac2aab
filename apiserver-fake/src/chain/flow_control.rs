//! The API Priority and Fairness response headers (`X-Kubernetes-PF-FlowSchema-UID`,
//! `X-Kubernetes-PF-PriorityLevel-UID`) kube-apiserver puts on every authenticated request it
//! classifies, from its mandatory and suggested bootstrap configuration.
//!
//! The fake does no fair queuing (`--max-requests-inflight` limits apply, see [`crate::chain::inflight`]); it
//! only classifies as the bootstrap FlowSchemas would, so clients and tests see the headers a real
//! server sends. UIDs are derived from the objects' names, so every server of a cluster names the same
//! FlowSchema with the same UID, as servers sharing one etcd do.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use http::{HeaderMap, HeaderValue};
use mvp_core::UserInfo;
use sha2::{Digest, Sha256};

/// Header naming the FlowSchema that matched.
pub const FLOW_SCHEMA_UID_HEADER: &str = "x-kubernetes-pf-flowschema-uid";
/// Header naming the priority level the request was queued at.
pub const PRIORITY_LEVEL_UID_HEADER: &str = "x-kubernetes-pf-prioritylevel-uid";

/// The bootstrap (FlowSchema, PriorityLevelConfiguration) that matches `user` asking for `path`,
/// in matching precedence: `exempt` (system:masters), `probes` (health checks, exempt level),
/// `service-accounts` (workload-low), then `global-default`.
pub fn classify(user: &UserInfo, path: &str) -> (&'static str, &'static str) {
    let in_group = |g: &str| user.groups.iter().any(|x| x == g);
    if in_group("system:masters") {
        ("exempt", "exempt")
    } else if matches!(path, "/healthz" | "/readyz" | "/livez") {
        ("probes", "exempt")
    } else if user.name.starts_with("system:serviceaccount:kube-system:") {
        ("kube-system-service-accounts", "workload-high")
    } else if in_group("system:serviceaccounts") {
        ("service-accounts", "workload-low")
    } else {
        ("global-default", "global-default")
    }
}

/// A stable UID for a bootstrap object of `kind` named `name`.
fn uid(kind: &str, name: &str) -> String {
    let digest = Sha256::digest(format!("{kind}/{name}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid().to_string()
}

/// The header value of `kind`/`name`'s UID, computed once per process.
fn uid_header(kind: &'static str, name: &'static str) -> Option<HeaderValue> {
    static UIDS: OnceLock<Mutex<HashMap<(&'static str, &'static str), HeaderValue>>> = OnceLock::new();
    let mut uids = UIDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(value) = uids.get(&(kind, name)) {
        return Some(value.clone());
    }
    let value = HeaderValue::from_str(&uid(kind, name)).ok()?;
    uids.insert((kind, name), value.clone());
    Some(value)
}

/// The two headers for a request of `user` to `path`, computed before the request moves on (so the user
/// need not be kept).
pub fn headers_for(user: &UserInfo, path: &str) -> [(&'static str, Option<HeaderValue>); 2] {
    let (flow_schema, priority_level) = classify(user, path);
    [
        (FLOW_SCHEMA_UID_HEADER, uid_header("FlowSchema", flow_schema)),
        (
            PRIORITY_LEVEL_UID_HEADER,
            uid_header("PriorityLevelConfiguration", priority_level),
        ),
    ]
}

/// Adds the two headers for a request of `user` to `path`.
pub fn add_headers(headers: &mut HeaderMap, user: &UserInfo, path: &str) {
    for (header, value) in headers_for(user, path) {
        if let Some(value) = value {
            headers.insert(header, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn classification_follows_bootstrap_precedence() {
        assert_eq!(
            classify(&user("admin", &["system:masters"]), "/api"),
            ("exempt", "exempt")
        );
        assert_eq!(
            classify(&user("bob", &["system:authenticated"]), "/readyz"),
            ("probes", "exempt")
        );
        assert_eq!(
            classify(
                &user("system:serviceaccount:ns:sa", &["system:serviceaccounts"]),
                "/api"
            ),
            ("service-accounts", "workload-low")
        );
        assert_eq!(
            classify(&user("bob", &["system:authenticated"]), "/api"),
            ("global-default", "global-default")
        );
    }

    #[test]
    fn uids_are_stable_and_distinct() {
        let mut a = HeaderMap::new();
        let mut b = HeaderMap::new();
        add_headers(&mut a, &user("admin", &["system:masters"]), "/api");
        add_headers(&mut b, &user("admin", &["system:masters"]), "/apis");
        assert_eq!(a, b);
        assert_ne!(a[FLOW_SCHEMA_UID_HEADER], a[PRIORITY_LEVEL_UID_HEADER]);
        assert!(uuid::Uuid::parse_str(a[FLOW_SCHEMA_UID_HEADER].to_str().unwrap()).is_ok());
    }
}
