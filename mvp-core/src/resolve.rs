//! The seams between the filter and the server it is embedded in.
//!
//! The filter asks three questions, each behind a small trait so that a server can answer
//! them from whatever it has (StorageVersion objects, discovery caches, an endpoint store):
//!
//! - [`LocalServedResources`]: does *this* server serve the GVR?
//! - [`PeerResolver`]: which *other* servers serve it (by server ID)? Are the caches synced?
//! - [`PeerEndpoints`]: at which `host:port` is a peer reachable?
//!
//! [`PeerChooser`] injects the random choice among eligible peers so tests are deterministic.
//!
//! Implementations are read on every request, so they should answer from a cheap snapshot
//! (an `Arc` behind a `RwLock`, swapped by background updates) and never block on I/O.

use crate::gvr::GroupVersionResource;

/// Whether this server serves a GVR itself (docs/mvp-behaviour.md §1.4).
pub trait LocalServedResources: Send + Sync + 'static {
    /// `true` when the request for `gvr` must be handled by the local handler.
    fn serves_locally(&self, gvr: &GroupVersionResource) -> bool;
}

/// Which peers serve a GVR (docs/mvp-behaviour.md §2).
pub trait PeerResolver: Send + Sync + 'static {
    /// IDs of the *other* servers able to serve `gvr` (never this server's own ID), in any
    /// order. Empty when no peer serves it; the request then falls through to the local
    /// handler.
    fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String>;

    /// Whether the caches behind this resolver have finished their initial sync. Until they
    /// have, every request is served locally (docs/mvp-behaviour.md §1.3 step 4).
    fn has_synced(&self) -> bool {
        true
    }
}

/// Where peers can be reached (upstream's peer endpoint leases, docs/mvp-behaviour.md §2.4).
pub trait PeerEndpoints: Send + Sync + 'static {
    /// The `host:port` of the server `server_id`, or `None` when it is unknown. A value that
    /// is not a valid `host:port` is treated as unresolvable, as upstream's
    /// `net.SplitHostPort` check does ("missing port in address").
    fn endpoint(&self, server_id: &str) -> Option<String>;

    /// Whether `server_id` has an address a request could be sent to: one that passes
    /// upstream's `net.SplitHostPort` check.
    fn is_reachable(&self, server_id: &str) -> bool {
        self.endpoint(server_id).is_some_and(|hp| is_valid_host_port(&hp))
    }
}

/// Picks one of `n` eligible peer endpoints (upstream `rand.Intn(n)`).
pub trait PeerChooser: Send + Sync + 'static {
    /// Returns an index in `0..n`; `n` is at least 1. Out-of-range answers are clamped.
    fn choose(&self, n: usize) -> usize;
}

/// The default [`PeerChooser`]: uniformly random, as upstream.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RandomPeerChooser;

impl PeerChooser for RandomPeerChooser {
    fn choose(&self, n: usize) -> usize {
        fastrand::usize(0..n.max(1))
    }
}

/// Any `Fn(usize) -> usize` is a chooser (handy in tests: `|_| 0`).
impl<F> PeerChooser for F
where
    F: Fn(usize) -> usize + Send + Sync + 'static,
{
    fn choose(&self, n: usize) -> usize {
        self(n)
    }
}

/// Go's `net.SplitHostPort` succeeds on `host_port` (`host:port`, `[v6]:port`; the port may
/// be any string without a colon, the host may be empty).
pub(crate) fn is_valid_host_port(host_port: &str) -> bool {
    if let Some(rest) = host_port.strip_prefix('[') {
        // "[host]:port": the closing bracket must be followed by ':' and no more brackets.
        match rest.find(']') {
            Some(end) => {
                let after = &rest[end + 1..];
                after.starts_with(':') && !after[1..].contains([':', '[', ']']) && !rest[..end].contains('[')
            }
            None => false,
        }
    } else {
        // Exactly one colon, no brackets.
        host_port.matches(':').count() == 1 && !host_port.contains(['[', ']'])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_validation_matches_go_split_host_port() {
        for ok in [
            "1.2.3.4:8080",
            "127.0.0.1:0",
            "[::1]:443",
            "localhost:https",
            ":80",
            "host:",
        ] {
            assert!(is_valid_host_port(ok), "{ok}");
        }
        for bad in ["", "1.2.3.4", "::1:443", "[::1]", "[::1]443", "a:b:c", "[a]:b:c"] {
            assert!(!is_valid_host_port(bad), "{bad}");
        }
    }

    #[test]
    fn random_chooser_stays_in_range() {
        for n in 1..20 {
            assert!(RandomPeerChooser.choose(n) < n);
        }
        assert_eq!((|_| 0usize).choose(3), 0);
    }
}
