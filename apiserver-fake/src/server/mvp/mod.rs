//! The fake's wiring of the `mvp-core` library: the Mixed Version Proxy filter and what feeds it.

pub mod gv_exclusion;
pub mod peer_proxy;
