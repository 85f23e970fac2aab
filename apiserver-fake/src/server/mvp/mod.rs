//! The fake's wiring of the `mvp-core` library: the Mixed Version Proxy filter and what feeds it,
//! as kube-apiserver's `BuildPeerProxy` wires it (the proxy's logic lives in the library):
//! - [`install`]: builds the filter (TLS, metrics, the mode's resolver) and starts what feeds it;
//!   upstream's `BuildPeerProxy`;
//! - [`peer_endpoints`]: peer addresses (and discovery receipts) from the store's internal keyspace,
//!   cached (docs/mvp-behaviour.md §2.4);
//! - [`feeds`]: the background loops between the store and the library: the StorageVersion and
//!   identity-lease informers, and this server's discovery receipt from what the library reports;
//! - [`gv_exclusion`]: the group versions served through CRDs and APIServices, kept out of peers'
//!   discovery;
//! - [`readiness`]: the `/readyz` checks the proxy adds (its caches synced and peers reached; peers
//!   know this server).
//!
//! The modules depend one way: `install` uses all the others; `feeds` and `readiness` read
//! `peer_endpoints`; `gv_exclusion` and `peer_endpoints` use no other module of `mvp`.

pub(crate) mod feeds;
pub(crate) mod gv_exclusion;
pub(crate) mod install;
pub(crate) mod peer_endpoints;
pub(crate) mod readiness;
