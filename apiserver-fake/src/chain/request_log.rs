//! The request log: the last requests a server served and the user it believed it served them for, so
//! tests can see, for example, the original user behind a proxied request.

use std::collections::VecDeque;
use std::sync::Mutex;

use mvp_core::UserInfo;

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
