//! Chunked lists (`?limit=` and `?continue=`), as kube-apiserver's etcd3 storage pages them.
//!
//! The continue token is upstream's format: unpadded URL-safe base64 of
//! `{"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<last key>\u0000"}`, where keys are etcd's,
//! relative to the list's prefix as upstream's `EncodeContinue` makes them (`<namespace>/<name>` in a
//! list of all namespaces, `<name>` in a namespace's or of a cluster-scoped resource), and items are
//! ordered by that key as etcd orders them (bytewise). The REST layer reads a page with
//! [`crate::store::Store::list_range`] (only the objects it returns), as upstream's etcd3 `GetList`
//! does; with a selector it keeps reading until the page is full or the range ends, and the token
//! continues after the last key it *evaluated*.
//!
//! On etcd a continued list reads the snapshot at the token's revision, and answers upstream's 410
//! "The provided continue parameter is too old…" once it is compacted. The in-memory store keeps no old
//! revisions, so there a continued list reads the *current* objects after the start key and reports the
//! token's revision (documented deviation).

use data_encoding::BASE64URL_NOPAD;
use serde::{Deserialize, Serialize};

use crate::api::status::Status;

/// The decoded `continue` parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ContinueToken {
    /// Always `meta.k8s.io/v1`.
    #[serde(rename = "v")]
    pub api_version: String,
    /// The revision of the first page; negative (upstream writes -1): the current revision, in the
    /// token of a 410 whose revision was compacted.
    #[serde(rename = "rv")]
    pub resource_version: i64,
    /// The key to continue from (inclusive); the last returned key plus `\0`.
    #[serde(rename = "start")]
    pub start_key: String,
}

impl ContinueToken {
    /// A token continuing after `last_key` of a list at `resource_version`.
    pub(crate) fn after(last_key: &str, resource_version: u64) -> Self {
        Self {
            api_version: "meta.k8s.io/v1".to_owned(),
            resource_version: i64::try_from(resource_version).unwrap_or(i64::MAX),
            start_key: format!("{last_key}\u{0}"),
        }
    }

    /// The token upstream's 410 for a compacted continue token carries: the same start key at the
    /// current revision (`handleCompactedErrorForPaging`).
    pub(crate) fn at_current_revision(&self) -> Self {
        Self {
            resource_version: -1,
            ..self.clone()
        }
    }

    /// The revision to read the next page at (`None`: the current one).
    pub(crate) fn revision(&self) -> Option<u64> {
        u64::try_from(self.resource_version).ok()
    }

    /// The opaque string sent to clients.
    pub(crate) fn encode(&self) -> String {
        BASE64URL_NOPAD.encode(&serde_json::to_vec(self).unwrap_or_default())
    }

    /// Decodes a client's token; malformed ones are upstream's 400 `invalid continue token`.
    pub(crate) fn decode(token: &str) -> Result<Self, Status> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_token_of_a_compacted_revision_continues_at_the_current_one() {
        let token = ContinueToken::after("default/job-b", 42).at_current_revision();
        let encoded = token.encode();
        let raw = String::from_utf8(BASE64URL_NOPAD.decode(encoded.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            raw,
            r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"default/job-b\u0000"}"#
        );
        let decoded = ContinueToken::decode(&encoded).unwrap();
        assert_eq!(decoded.revision(), None);
        assert_eq!(decoded.start_key, "default/job-b\u{0}");
        assert_eq!(ContinueToken::after("a", 42).revision(), Some(42));
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
}
