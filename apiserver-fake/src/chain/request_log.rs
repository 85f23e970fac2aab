//! The request log: the last requests a server served and the user it believed it served them for, so
//! tests can see, for example, the original user behind a proxied request.
//!
//! Its filter, [`record_request`], runs inside the audit filter (it records the audit ID) and outside
//! authorization, so a denied request is recorded too.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use mvp_core::{PEER_PROXIED_HEADER, UserInfo};

use super::ServerContext;
use super::audit::AUDIT_ID_HEADER;

/// One request as the server understood it, kept so tests can see which user a server believed it
/// served (for example the original user behind a proxied request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRequest {
    /// The authenticated user.
    pub user: UserInfo,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// Whether the request carried the peer-proxied header.
    pub peer_proxied: bool,
    /// The request's audit ID (the caller's, or one this server minted).
    pub audit_id: String,
}

/// The last requests a server served, newest last (bounded).
#[derive(Debug, Default)]
pub(crate) struct RequestLog {
    entries: Mutex<VecDeque<ServedRequest>>,
}

impl RequestLog {
    const CAPACITY: usize = 1024;

    /// Records one request, forgetting the oldest when full.
    pub(crate) fn record(&self, entry: ServedRequest) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() == Self::CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// A copy of the recorded requests, oldest first.
    pub(crate) fn snapshot(&self) -> Vec<ServedRequest> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// The filter: records the request of an authenticated user before anything inside answers it (a
/// request still being served is already in the log). Unauthenticated requests (the public health
/// paths) are not recorded.
pub(super) async fn record_request<S: ServerContext>(
    State(state): State<Arc<S>>,
    req: Request,
    next: Next,
) -> Response {
    if let Some(user) = req.extensions().get::<UserInfo>() {
        state.requests().record(ServedRequest {
            user: user.clone(),
            method: req.method().to_string(),
            uri: req
                .uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default(),
            peer_proxied: req
                .headers()
                .get(PEER_PROXIED_HEADER)
                .is_some_and(|v| v.as_bytes() == b"true"),
            audit_id: req
                .headers()
                .get(AUDIT_ID_HEADER)
                .map(|id| String::from_utf8_lossy(id.as_bytes()).into_owned())
                .unwrap_or_default(),
        });
    }
    next.run(req).await
}
