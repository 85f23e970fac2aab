//! `UserInfo`: the authenticated caller of a request.
//!
//! The server's authenticators put a [`UserInfo`] into the request extensions; the MVP layer
//! reads it from there and forwards it to the peer as `X-Remote-*` headers (docs/mvp-behaviour.md §3.2),
//! exactly as kube-apiserver's `user.Info` travels in the request context.

use std::collections::BTreeMap;

/// The group every authenticated user belongs to.
pub(crate) const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The user name kube-apiserver uses for its own (loopback and peer discovery) requests.
pub(crate) const APISERVER_USER: &str = "system:apiserver";

/// An authenticated user, as apiserver's `user.DefaultInfo`.
///
/// `extra` is a sorted map so that forwarded headers come out in a stable order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`X-Remote-User`, a client certificate's CN, ...).
    pub name: String,
    /// A unique ID for the user, `""` if the authenticator provides none.
    pub uid: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// Additional authenticator-specific information (`X-Remote-Extra-<key>`).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with only a name.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// The identity kube-apiserver uses when it fetches discovery from its peers
    /// (docs/mvp-behaviour.md §2.3): user and UID `system:apiserver`, group `system:authenticated`.
    pub fn apiserver() -> Self {
        Self {
            name: APISERVER_USER.to_owned(),
            uid: APISERVER_USER.to_owned(),
            groups: vec![ALL_AUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiserver_identity_matches_upstream_peer_discovery_user() {
        let u = UserInfo::apiserver();
        assert_eq!(
            (u.name.as_str(), u.uid.as_str()),
            ("system:apiserver", "system:apiserver")
        );
        assert_eq!(u.groups, vec!["system:authenticated".to_owned()]);
        assert_eq!(UserInfo::new("bob").name, "bob");
    }
}
