//! The background controllers a server runs next to its handlers, and what they publish in the store.

pub mod crd;
pub mod identity;
pub mod informer;
pub mod kubernetes_service;
pub mod lease;
pub mod lease_gc;
pub mod peer_endpoint;
pub mod peer_receipts;
pub mod storage_version;
pub mod storage_version_gc;
