//! Chunked lists (`?limit=` and `?continue=`), as kube-apiserver's etcd3 storage pages them.
//!
//! The continue token is upstream's format: unpadded URL-safe base64 of
//! `{"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<last key>\u0000"}`, where keys are etcd's
//! `<namespace>/<name>` (or `<name>`) relative to the resource prefix, and items are ordered by that key
//! as etcd orders them (bytewise).
//!
//! On etcd a continued list reads the snapshot at the token's revision, and answers upstream's 410
//! "The provided continue parameter is too old…" once it is compacted. The in-memory store keeps no old
//! revisions, so there a continued list reads the *current* objects after the start key and reports the
//! token's revision (documented deviation).

use data_encoding::BASE64URL_NOPAD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::status::Status;

/// The decoded `continue` parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// Always `meta.k8s.io/v1`.
    #[serde(rename = "v")]
    pub api_version: String,
    /// The revision of the first page.
    #[serde(rename = "rv")]
    pub resource_version: u64,
    /// The key to continue from (inclusive); the last returned key plus `\0`.
    #[serde(rename = "start")]
    pub start_key: String,
}

impl ContinueToken {
    /// A token continuing after `last_key` of a list at `resource_version`.
    pub fn after(last_key: &str, resource_version: u64) -> Self {
        Self {
            api_version: "meta.k8s.io/v1".to_owned(),
            resource_version,
            start_key: format!("{last_key}\u{0}"),
        }
    }

    /// The opaque string sent to clients.
    pub fn encode(&self) -> String {
        BASE64URL_NOPAD.encode(&serde_json::to_vec(self).unwrap_or_default())
    }

    /// Decodes a client's token; malformed ones are upstream's 400 `invalid continue token`.
    pub fn decode(token: &str) -> Result<Self, Status> {
        let invalid = |why: &str| Status::bad_request(format!("invalid continue token: {why}"));
        let bytes = BASE64URL_NOPAD
            .decode(token.trim_end_matches('=').as_bytes())
            .map_err(|_| invalid("continue key is not valid: illegal base64 data"))?;
        let parsed: Self =
            serde_json::from_slice(&bytes).map_err(|_| invalid("continue key is not valid"))?;
        if parsed.api_version != "meta.k8s.io/v1" {
            return Err(invalid(&format!(
                "continue key is not valid: server does not recognize this encoded key version {:?}",
                parsed.api_version
            )));
        }
        if parsed.resource_version == 0 {
            return Err(invalid(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        if parsed.start_key.is_empty() || parsed.start_key.starts_with('/') || parsed.start_key.contains("..")
        {
            return Err(invalid(
                "continue key is not valid: the provided key is not allowed",
            ));
        }
        Ok(parsed)
    }
}

/// etcd's key of an object relative to its resource prefix: `<namespace>/<name>` or `<name>`.
pub fn object_key(object: &Value) -> String {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The items of this page.
    pub items: Vec<Value>,
    /// The token for the next page, if more items follow.
    pub next: Option<String>,
    /// Items after this page (set only when more follow and no selector filtered, as upstream).
    pub remaining: Option<u64>,
}

/// Pages `items` (already filtered): sorted by key, starting at `token`'s key, at most `limit` (0 = all).
/// `unfiltered` says whether no selector removed items, which upstream requires for
/// `remainingItemCount`.
pub fn paginate(
    mut items: Vec<Value>,
    token: Option<&ContinueToken>,
    limit: u64,
    list_revision: u64,
    unfiltered: bool,
) -> Page {
    let mut keyed: Vec<(String, Value)> = items.drain(..).map(|o| (object_key(&o), o)).collect();
    keyed.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if let Some(token) = token {
        keyed.retain(|(key, _)| key.as_bytes() >= token.start_key.as_bytes());
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if limit == 0 || keyed.len() <= limit {
        return Page {
            items: keyed.into_iter().map(|(_, o)| o).collect(),
            next: None,
            remaining: None,
        };
    }
    let remaining = (keyed.len() - limit) as u64;
    keyed.truncate(limit);
    let last = keyed.last().map(|(k, _)| k.clone()).unwrap_or_default();
    let revision = token.map_or(list_revision, |t| t.resource_version);
    Page {
        items: keyed.into_iter().map(|(_, o)| o).collect(),
        next: Some(ContinueToken::after(&last, revision).encode()),
        remaining: unfiltered.then_some(remaining),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn item(ns: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}})
    }

    fn names(page: &Page) -> Vec<String> {
        page.items.iter().map(object_key).collect()
    }

    #[test]
    fn token_round_trips_in_upstream_format() {
        let token = ContinueToken::after("default/job-b", 42);
        let encoded = token.encode();
        let raw = String::from_utf8(BASE64URL_NOPAD.decode(encoded.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            raw,
            r#"{"v":"meta.k8s.io/v1","rv":42,"start":"default/job-b\u0000"}"#
        );
        assert_eq!(ContinueToken::decode(&encoded).unwrap(), token);
    }

    #[test]
    fn malformed_tokens_are_bad_requests() {
        for bad in [
            "!!!",
            &BASE64URL_NOPAD.encode(b"{}"),
            &BASE64URL_NOPAD.encode(br#"{"v":"x","rv":1,"start":"a"}"#),
        ] {
            let err = ContinueToken::decode(bad).unwrap_err();
            assert_eq!(err.code, 400);
            assert!(
                err.message.starts_with("invalid continue token"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn pages_walk_all_items_in_key_order_exactly_once() {
        // Bytewise order: "a-b/x" < "a/x" because '-' < '/'.
        let items = vec![
            item("a", "x"),
            item("a-b", "x"),
            item("a", "y"),
            item("b", "z"),
            item("a", "w"),
        ];
        let first = paginate(items.clone(), None, 2, 10, true);
        assert_eq!(names(&first), ["a-b/x", "a/w"]);
        assert_eq!(first.remaining, Some(3));
        let token = ContinueToken::decode(first.next.as_deref().unwrap()).unwrap();
        assert_eq!(token.resource_version, 10);
        let second = paginate(items.clone(), Some(&token), 2, 99, true);
        assert_eq!(names(&second), ["a/x", "a/y"]);
        assert_eq!(second.remaining, Some(1));
        // Later pages keep the first page's revision.
        let token = ContinueToken::decode(second.next.as_deref().unwrap()).unwrap();
        assert_eq!(token.resource_version, 10);
        let third = paginate(items, Some(&token), 2, 99, false);
        assert_eq!(names(&third), ["b/z"]);
        assert!(third.next.is_none() && third.remaining.is_none());
    }

    #[test]
    fn filtered_pages_have_no_remaining_count_and_zero_limit_returns_all() {
        let items = vec![item("a", "1"), item("a", "2"), item("a", "3")];
        assert_eq!(paginate(items.clone(), None, 1, 5, false).remaining, None);
        let all = paginate(items, None, 0, 5, true);
        assert_eq!(all.items.len(), 3);
        assert!(all.next.is_none());
    }
}
