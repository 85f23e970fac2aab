//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-*`):
//! the request continues as the impersonated user, as kube-apiserver's impersonation filter does after
//! authentication, provided the caller may `impersonate` that user (checked with `--authorization-mode`
//! by [`effective_user`], which the authentication filter calls). The headers are removed either way,
//! so they are never forwarded to a peer.

use std::collections::BTreeMap;

use http::HeaderMap;
use mvp_core::UserInfo;

use super::authorization::{self, Authorize, Authorizer, Decision};
use crate::api::AUTHENTICATED_GROUP;
use crate::api::status::Status;

const USER: &str = "impersonate-user";
const UID: &str = "impersonate-uid";
const GROUP: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// The user the request of the authenticated `user` continues as: the one its impersonation headers
/// name, when `authorizer` lets `user` impersonate them, else `user`. The error is the answer: 400 for
/// malformed headers, upstream's 403 when the impersonation is not allowed.
pub(crate) fn effective_user(
    authorizer: &Authorizer,
    user: UserInfo,
    headers: &mut HeaderMap,
) -> Result<UserInfo, Status> {
    let Some(impersonated) = impersonated_user(headers)? else {
        return Ok(user);
    };
    let attributes = authorization::impersonation_request(&impersonated.name);
    if let Decision::Deny(reason) = authorizer.authorize(&user, &attributes) {
        return Err(authorization::forbidden(&user, &attributes, &reason));
    }
    Ok(impersonated)
}

/// The user named by the impersonation headers (`None` when there are none), after removing them.
/// Groups or extras without a user are a 400, with upstream's message.
pub(crate) fn impersonated_user(headers: &mut HeaderMap) -> Result<Option<UserInfo>, Status> {
    let value = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let name = headers.get(USER).map(value);
    let uid = headers.get(UID).map(value).unwrap_or_default();
    let mut groups: Vec<String> = headers.get_all(GROUP).iter().map(value).collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let extra_names: Vec<http::HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(EXTRA_PREFIX))
        .cloned()
        .collect();
    for header in &extra_names {
        let key = header.as_str().trim_start_matches(EXTRA_PREFIX);
        let key = percent_encoding::percent_decode_str(key)
            .decode_utf8_lossy()
            .into_owned();
        extra
            .entry(key)
            .or_default()
            .extend(headers.get_all(header).iter().map(value));
    }
    let present = name.is_some() || !groups.is_empty() || !extra.is_empty() || !uid.is_empty();
    for header in [USER, UID, GROUP]
        .into_iter()
        .map(http::HeaderName::from_static)
        .chain(extra_names)
    {
        headers.remove(header);
    }
    if !present {
        return Ok(None);
    }
    let Some(name) = name else {
        return Err(Status::bad_request(
            "requested impersonation is missing a user name: Impersonate-User header is required".to_owned(),
        ));
    };
    if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) && !name.starts_with("system:serviceaccount:") {
        groups.push(AUTHENTICATED_GROUP.to_owned());
    }
    Ok(Some(UserInfo {
        name,
        uid,
        groups,
        extra,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impersonation_headers_replace_the_user_and_are_removed() {
        let mut headers = HeaderMap::new();
        headers.insert(USER, "jane".parse().unwrap());
        headers.append(GROUP, "devs".parse().unwrap());
        headers.insert("impersonate-extra-scopes%2Fa", "x".parse().unwrap());
        let user = impersonated_user(&mut headers).unwrap().unwrap();
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, vec!["devs", "system:authenticated"]);
        assert_eq!(user.extra["scopes/a"], vec!["x"]);
        assert!(headers.is_empty());
    }

    #[test]
    fn groups_without_a_user_are_rejected_and_no_headers_mean_no_impersonation() {
        let mut headers = HeaderMap::new();
        assert!(impersonated_user(&mut headers).unwrap().is_none());
        headers.insert(GROUP, "devs".parse().unwrap());
        assert_eq!(impersonated_user(&mut headers).unwrap_err().code, 400);
    }
}
