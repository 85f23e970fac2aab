//! The background controllers a server runs next to its handlers, and what they publish in the store.

pub(crate) mod cluster_api;
pub(crate) mod crd;
pub mod identity;
pub(crate) mod informer;
pub(crate) mod kubernetes_service;
pub(crate) mod lease;
pub(crate) mod lease_gc;
pub mod peer_endpoint;
pub(crate) mod peer_receipts;
pub(crate) mod storage_version;
pub(crate) mod storage_version_gc;
