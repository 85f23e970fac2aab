//! The fake's wiring of the `mvp-core` library: the Mixed Version Proxy filter and what feeds it.

pub(crate) mod gv_exclusion;
pub(crate) mod peer_proxy;
