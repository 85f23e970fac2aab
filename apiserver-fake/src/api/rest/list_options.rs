//! The read parameters of `ListOptions`/`GetOptions` (`resourceVersion`, `resourceVersionMatch`,
//! `limit`, `timeoutSeconds`) decoded and checked as kube-apiserver does, in its order and with its
//! answers:
//!
//! 1. decoding (`handlers/get.go` → `runtime.Convert_Slice_string_To_int64`): a number that does not
//!    parse is a 400 with Go's `strconv` text;
//! 2. `ValidateListOptions` (`apimachinery/pkg/apis/meta/internalversion/validation`): a 422 `Invalid`
//!    on `ListOptions.meta.k8s.io ""`;
//! 3. the storage layer (`APIObjectVersioner.ParseResourceVersion`): a `resourceVersion` that is not a
//!    number is an `Invalid` field error. Every list (and so every deletecollection, which lists first)
//!    goes through `storage.ValidateListOptions` in the cache delegator (1.36), which wraps it in a 400
//!    "invalid resource version: …" (measured on 1.36.2); a get or a watch with a `resourceVersion` is
//!    served by the watch cache, which passes the field error up unwrapped, and `ErrorToAPIStatus`
//!    turns that into a 500 without a reason.

use super::Query;
use crate::api::status::{GroupKind, Status, StatusCause, StatusReason};

/// A parameter decoded as Go's `strconv.ParseInt(raw, 10, 64)` (empty: absent).
pub(crate) fn int64(query: &Query, name: &str) -> Result<Option<i64>, Status> {
    match query.get(name) {
        None | Some("") => Ok(None),
        Some(raw) => raw.parse::<i64>().map(Some).map_err(|err| {
            let why = match err.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            Status::bad_request(format!("strconv.ParseInt: parsing {raw:?}: {why}"))
        }),
    }
}

/// Which read a `resourceVersion` belongs to, which decides how a malformed one is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadPath {
    /// A get or a watch, from the watch cache: 500, the bare field error.
    WatchCache,
    /// A list or a deletecollection (`storage.ValidateListOptions`): 400 "invalid resource version".
    List,
}

/// `resourceVersion` as a revision (`None` when absent, empty or `"0"`, which all mean "any").
pub(crate) fn resource_version(query: &Query, path: ReadPath) -> Result<Option<u64>, Status> {
    match query.get("resourceVersion") {
        None | Some("" | "0") => Ok(None),
        Some(raw) => raw.parse::<u64>().map(Some).map_err(|err| {
            let why = match err.kind() {
                std::num::IntErrorKind::PosOverflow => "value out of range",
                _ => "invalid syntax",
            };
            let field_error =
                format!("resourceVersion: Invalid value: {raw:?}: strconv.ParseUint: parsing {raw:?}: {why}");
            match path {
                ReadPath::WatchCache => Status::failure(500, StatusReason::Unknown, field_error),
                ReadPath::List => Status::bad_request(format!("invalid resource version: {field_error}")),
            }
        }),
    }
}

/// `ValidateListOptions` for a list (`watch == false`) or a watch.
pub(crate) fn validate(query: &Query, watch: bool) -> Result<(), Status> {
    let present = |name: &str| query.get(name).is_some_and(|v| !v.is_empty());
    let resource_version = query.get("resourceVersion").unwrap_or_default();
    let matching = query.get("resourceVersionMatch").unwrap_or_default();
    let send_initial_events = query.get("sendInitialEvents").is_some();
    let field = "resourceVersionMatch";
    let mut causes = Vec::new();
    if watch {
        if send_initial_events && matching != "NotOlderThan" {
            causes.push(StatusCause::field_forbidden(
                field,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !matching.is_empty() {
            if !send_initial_events {
                causes.push(StatusCause::field_forbidden(
                    field,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matching != "NotOlderThan" {
                causes.push(StatusCause::field_not_supported(
                    field,
                    matching,
                    &["NotOlderThan"],
                ));
            }
            if present("continue") {
                causes.push(StatusCause::field_forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        if !matching.is_empty() {
            if resource_version.is_empty() {
                causes.push(StatusCause::field_forbidden(
                    field,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if present("continue") {
                causes.push(StatusCause::field_forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if matching != "Exact" && matching != "NotOlderThan" {
                causes.push(StatusCause::field_not_supported(
                    field,
                    matching,
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if matching == "Exact" && resource_version == "0" {
                causes.push(StatusCause::field_forbidden(
                    field,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if send_initial_events {
            causes.push(StatusCause::field_forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid(
            &GroupKind::new("meta.k8s.io", "ListOptions"),
            "",
            causes,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(raw: &str) -> Query {
        Query::parse(Some(raw))
    }

    #[test]
    fn numbers_fail_with_gos_strconv_texts() {
        assert_eq!(int64(&query("limit=5"), "limit").unwrap(), Some(5));
        assert_eq!(
            int64(&query("limit=abc"), "limit").unwrap_err().message,
            "strconv.ParseInt: parsing \"abc\": invalid syntax"
        );
        assert_eq!(
            int64(&query("limit=99999999999999999999"), "limit")
                .unwrap_err()
                .message,
            "strconv.ParseInt: parsing \"99999999999999999999\": value out of range"
        );
    }

    #[test]
    fn a_malformed_resource_version_is_a_500_from_the_cache_and_a_400_for_lists() {
        let q = query("resourceVersion=abc");
        let cache = resource_version(&q, ReadPath::WatchCache).unwrap_err();
        assert_eq!(cache.code, 500);
        assert_eq!(
            cache.message,
            "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
        let list = resource_version(&q, ReadPath::List).unwrap_err();
        assert_eq!(list.code, 400);
        assert!(
            list.message
                .starts_with("invalid resource version: resourceVersion: Invalid value")
        );
        assert_eq!(
            resource_version(&query("resourceVersion=0"), ReadPath::List).unwrap(),
            None
        );
    }

    #[test]
    fn list_options_are_validated_as_upstream() {
        let err = validate(&query("resourceVersionMatch=Exact"), false).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is \
             forbidden unless resourceVersion is provided"
        );
        let err = validate(&query("resourceVersionMatch=bogus"), false).unwrap_err();
        assert_eq!(
            err.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is \
             forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: \"bogus\": \
             supported values: \"Exact\", \"NotOlderThan\", \"\"]"
        );
        assert!(
            validate(
                &query("resourceVersionMatch=NotOlderThan&resourceVersion=5"),
                false
            )
            .is_ok()
        );
        assert!(
            validate(
                &query("sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
                true
            )
            .is_ok()
        );
        assert_eq!(
            validate(&query("sendInitialEvents=true"), true).unwrap_err().code,
            422
        );
    }
}
