//! kube-apiserver's max-in-flight filter (`WithMaxInFlightLimit`, the limit it applies when API
//! Priority and Fairness is off): at most `--max-requests-inflight` non-mutating and
//! `--max-mutating-requests-inflight` mutating requests at once; one more gets 429 with
//! `Retry-After: 1`. Long-running requests and `system:masters` are exempt, as upstream.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use mvp_core::{RequestInfo, UserInfo};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::chain::authorization::PRIVILEGED_GROUP;

/// The two limits of one server.
#[derive(Debug)]
pub(crate) struct InFlightLimits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

/// Why a request may not start now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooManyRequests;

impl InFlightLimits {
    /// Limits of `read_only` and `mutating` requests; 0 means no limit.
    pub(crate) fn new(read_only: usize, mutating: usize) -> Self {
        let limit = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Self {
            read_only: limit(read_only),
            mutating: limit(mutating),
        }
    }

    /// A slot for the request described by `info`, made by `user`: `Ok(None)` when it is exempt or
    /// unlimited, `Ok(Some(permit))` to hold until it is answered, `Err` when its limit is reached.
    pub(crate) fn admit(
        &self,
        info: Option<&RequestInfo>,
        user: Option<&UserInfo>,
    ) -> Result<Option<OwnedSemaphorePermit>, TooManyRequests> {
        if info.is_some_and(RequestInfo::is_long_running)
            || user.is_some_and(|u| u.groups.iter().any(|g| g == PRIVILEGED_GROUP))
        {
            return Ok(None);
        }
        // Upstream's nonMutatingRequestVerbs; a non-resource request's verb is its lowercased method.
        let read_only = info.is_some_and(|i| matches!(i.verb.as_str(), "get" | "list" | "watch"));
        let limit = if read_only {
            &self.read_only
        } else {
            &self.mutating
        };
        match limit {
            None => Ok(None),
            Some(semaphore) => semaphore
                .clone()
                .try_acquire_owned()
                .map(Some)
                .map_err(|_| TooManyRequests),
        }
    }
}

impl IntoResponse for TooManyRequests {
    /// Upstream's `tooManyRequests`: plain text from Go's `http.Error`, and `Retry-After: 1`.
    fn into_response(self) -> Response {
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests, please try again later.\n",
        )
            .into_response();
        let headers = response.headers_mut();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, url: &str) -> RequestInfo {
        RequestInfo::from_parts(&method.parse().unwrap(), &url.parse().unwrap()).unwrap()
    }

    #[test]
    fn each_kind_of_request_has_its_own_limit_and_exemptions_pass() {
        let limits = InFlightLimits::new(1, 1);
        let jane = UserInfo::new("jane");
        let list = info("GET", "/api/v1/pods");
        let create = info("POST", "/api/v1/namespaces/default/pods");
        let held = limits.admit(Some(&list), Some(&jane)).unwrap();
        assert!(held.is_some());
        assert_eq!(
            limits.admit(Some(&list), Some(&jane)).unwrap_err(),
            TooManyRequests
        );
        assert!(
            limits.admit(Some(&create), Some(&jane)).unwrap().is_some(),
            "mutating has its own"
        );
        let watch = info("GET", "/api/v1/pods?watch=1");
        assert!(
            limits.admit(Some(&watch), Some(&jane)).unwrap().is_none(),
            "long-running"
        );
        let mut admin = UserInfo::new("admin");
        admin.groups.push(PRIVILEGED_GROUP.to_owned());
        assert!(
            limits.admit(Some(&list), Some(&admin)).unwrap().is_none(),
            "system:masters"
        );
        drop(held);
        assert!(limits.admit(Some(&list), Some(&jane)).is_ok());
        assert!(
            InFlightLimits::new(0, 0)
                .admit(Some(&list), Some(&jane))
                .unwrap()
                .is_none()
        );
    }
}
