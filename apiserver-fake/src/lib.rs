//! A fake multi-version kube-apiserver for testing the Mixed Version Proxy (KEP-4020).
//!
//! Each fake serves the built-in APIs of one Kubernetes minor (1.28–1.36, with `--runtime-config` and
//! `--feature-gates` as kube-apiserver), discovery, resources backed by a store shared by every fake of a
//! process (the cluster's "etcd"), CRDs, and what real servers publish for the proxy: identity leases,
//! StorageVersion objects and peer endpoint records. Start one in-process:
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use apiserver_fake::{server::{self, config::ServerFlags}, store::MemoryStore};
//!
//! let flags = ServerFlags::from_args([
//!     "--tls-cert-file=pki/apiserver-a.crt", "--tls-private-key-file=pki/apiserver-a.key",
//!     "--client-ca-file=pki/ca.crt", "--bind-address=127.0.0.1", "--secure-port=0",
//!     "--runtime-config=batch/v1=false",
//! ])?;
//! let running = server::start(flags.validate()?, Arc::new(MemoryStore::new())).await?;
//! println!("serving on {}", running.url());
//! running.shutdown().await;
//! # Ok(()) }
//! ```

//! # Layout
//!
//! The crate is laid out by the role of its code in serving a request; the top-level modules depend on
//! each other in one direction only (a module may use the ones listed before it, never a later one):
//!
//! 1. [`go_duration`]: Go's duration syntax, as kube-apiserver reads its flags and parameters, and
//!    [`protobuf`]: Kubernetes' protobuf encoding of built-in objects (request bodies, etcd values),
//!    which uses `go_duration` for `metav1.Duration`; neither uses anything else here.
//! 2. [`store`]: the cluster's shared storage (the fake's "etcd").
//! 3. [`api`]: what a server answers (API tables, discovery, OpenAPI, REST handlers, Status errors,
//!    `system:authenticated`), with [`cel`] (CRD validation rules, admission policies) beside it: each
//!    uses the other.
//! 4. [`controllers`]: background controllers and what they publish (identity lease, StorageVersion,
//!    CRDs, peer endpoint records).
//! 5. [`chain`]: the handler chain, whose module documentation states the order of its stages once.
//! 6. [`server`]: configuration, state, listener and TLS of one server, and its wiring of `mvp-core`
//!    (`server::mvp`); it builds everything above into a running server.
//! 7. [`cluster`]: several servers together (in-process, as processes, with etcd) and the upgrade
//!    simulator.
//!
//! # Public surface
//!
//! What is public is what the binary (`main.rs`), the integration tests, benches, fuzz targets
//! (`fuzz/`) and the `e2e` crate use, and nothing else:
//!
//! - [`server`]: `start`, `RunningServer`, [`server::config`] (flags) and [`server::logging`]. A
//!   server's shared state is internal: tests observe a running server only through
//!   `RunningServer`'s documented accessors (`served_requests`, whose entries are
//!   [`server::ServedRequest`], `holder_identity`, `proxy_endpoints`, `server_id`, `url`);
//! - [`store`]: the `Store` trait, `MemoryStore`, `EtcdStore` (feature `etcd`) and their keys;
//! - [`cluster`]: in-process and process clusters, etcd, load balancers, the controller manager, real
//!   members and the upgrade simulator's entry point (`upgrade::{UpgradeArgs, run_upgrade}`);
//! - a test-support surface the property tests, fuzzers and e2e fixtures drive: [`api`]'s `catalog`,
//!   `discovery::{aggregated, legacy}`, `openapi::definitions`, `serviceaccount`, `status`, `yaml` and
//!   the REST pieces (`rest::{admission::review, defaults, field_validation, managed_fields,
//!   negotiation, patch, selector, structural::validation_rules, table}`), [`cel`] (`compile`,
//!   `evaluate`, `value`), [`chain::authorization`]'s `AuthorizationMode` (and its parse error),
//!   [`controllers`]' `identity` and `peer_endpoint` (the records tests inspect), [`protobuf`] and
//!   [`go_duration`].
//!
//! Every other module and item is `pub(crate)`, except the types a public item names, which must be
//! public too (reachable, if not always by a path): the errors [`server::ServerError`] and
//! [`server::config::ConfigError`] carry, the option sets inside [`server::config::ServerFlags`], the
//! catalog and store types re-exported from [`api::catalog`] and [`store`], and the types in the
//! signatures of the items above (the cluster file and upgrade arguments, the test-support modules'
//! functions). `#![warn(unreachable_pub)]` (an error in CI's
//! `clippy -D warnings`) keeps it so: any other item of a crate-private module cannot be `pub`, so
//! the compiler reports code nothing uses as dead. The workspace's `missing_docs` lint covers what
//! stays public. Making a module or item public again is a decision to record here.

#![warn(unreachable_pub)]

pub mod api;
pub mod cel;
pub mod chain;
pub mod cluster;
pub mod controllers;
pub mod go_duration;
pub mod protobuf;
pub mod server;
pub mod store;

/// Resolves on SIGINT or SIGTERM (graceful shutdown of the binary and the demo cluster).
///
/// The handlers are installed when this is called, not when the future is first awaited, so a
/// signal that arrives while start-up is still in progress is not lost (nor kills the process).
/// Must be called inside a Tokio runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        async fn received(signal: Option<Signal>) {
            match signal {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        async move {
            tokio::select! {
                () = received(interrupt) => {}
                () = received(terminate) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
