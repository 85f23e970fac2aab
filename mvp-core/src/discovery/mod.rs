//! Discovery mode (upstream beta, 1.33+; docs/mvp-behaviour.md §1.4, §2.3, §7.1): how a server learns
//! what its peers serve from their aggregated discovery, and peer-aggregated discovery built on that.
//!
//! - [`caches`]: the local and peer discovery caches and the resolver that reads both.
//! - [`sync`]: fetching peers' `/api` and `/apis` and rebuilding the peer cache (I/O).
//! - [`controllers`]: the controllers that keep the caches current (what this server serves, what
//!   each peer serves, which group versions stay local).
//! - [`merge`]: merging this server's aggregated groups with its peers'.
//! - [`peer_aggregated`]: the handler a 1.35+ server answers aggregated discovery requests with.

pub(crate) mod caches;
pub(crate) mod controllers;
pub(crate) mod merge;
pub(crate) mod peer_aggregated;
pub(crate) mod sync;
