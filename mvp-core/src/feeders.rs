//! Ready-made tasks that keep a server visible to its peers and feed its proxy, over one
//! [`ClusterApi`]:
//!
//! - [`IdentityLeaseTask`]: this server's identity lease in `kube-system` (kube-apiserver's
//!   identity lease controller): created at start, renewed every 10 s, with upstream's labels,
//!   deleted on graceful stop (1.35+) and a stale one of a previous run deleted at start;
//! - [`PeerEndpointTask`]: the peer endpoint record `/peerserverleases/<server ID>` (upstream's
//!   peer endpoint lease reconciler): 15 s TTL, refreshed every 10 s, removed on stop;
//! - [`publish_storage_versions`]: this server's entries in the StorageVersion objects
//!   (upstream's storage version manager), for the StorageVersion mode;
//! - [`run_receipt_publisher`]: which peers' runs this server's proxy has asked for their
//!   discovery (not upstream; see the function);
//! - [`PeerLeaseFeed`]: the other way round, the peers' identity leases listed into
//!   [`DiscoveryPeers`], with the addresses they advertise as a [`PeerEndpoints`].
//!
//! Each task's `run` takes a `shutdown` future and returns when it completes, so it stops with
//! whatever the server uses (a `CancellationToken`'s `cancelled_owned()`, a signal, a oneshot).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::cluster::{ClusterApi, ClusterError, ObjectRef, Preconditions};
use crate::discovery::controllers::DiscoveryPeers;
use crate::objects::{IDENTITY_LEASE_LABEL, Lease};
use crate::resolve::PeerEndpoints;

/// Namespace of identity leases.
pub const IDENTITY_LEASE_NAMESPACE: &str = "kube-system";
/// Label carrying the server's host name on its identity lease.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Annotation with the address peers reach the server at (set with the
/// `UnknownVersionInteroperabilityProxy` gate on; upstream's proxy reads the peer endpoint
/// record instead, see [`PeerLeaseFeed`]).
pub const PEER_ADVERTISE_ADDRESS_ANNOTATION: &str = "kubernetes.io/peer-advertise-address";
/// kube-apiserver's identity lease duration (`IdentityLeaseDurationSeconds`).
pub const IDENTITY_LEASE_DURATION: Duration = Duration::from_secs(3600);
/// kube-apiserver's identity lease renew interval (`IdentityLeaseRenewIntervalPeriod`).
pub const IDENTITY_LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// Key prefix of peer endpoint records; the server ID follows.
pub const PEER_ENDPOINT_PREFIX: &str = "/peerserverleases/";
/// Upstream's TTL of a peer endpoint record.
pub const PEER_ENDPOINT_TTL: Duration = Duration::from_secs(15);
/// Upstream's refresh interval of a peer endpoint record.
pub const PEER_ENDPOINT_REFRESH: Duration = Duration::from_secs(10);
/// Key prefix of discovery receipts; the server ID follows.
pub const RECEIPT_PREFIX: &str = "/peerdiscoveryreceipts/";

/// The APIServerID of a kube-apiserver running on `hostname`, as kube-apiserver derives it:
/// `apiserver-` + lowercase unpadded base32 of the first 16 bytes of SHA-256 over the
/// uint16-length-prefixed hostname and the length-prefixed `kube-apiserver`.
pub fn server_id(hostname: &str) -> String {
    let mut data = Vec::with_capacity(hostname.len() + 18);
    for part in [hostname.as_bytes(), IDENTITY_LEASE_LABEL.1.as_bytes()] {
        // cryptobyte's AddUint16LengthPrefixed: a host name is at most 253 bytes.
        let len = u16::try_from(part.len()).unwrap_or(u16::MAX);
        data.extend_from_slice(&len.to_be_bytes());
        data.extend_from_slice(&part[..usize::from(len)]);
    }
    let hash = Sha256::digest(&data);
    format!("apiserver-{}", base32_lower(&hash[..16]))
}

/// RFC 4648 base32, lowercase, unpadded.
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let (mut bits, mut nbits, mut out) = (0u32, 0u32, String::new());
    for &byte in bytes {
        bits = (bits << 8) | u32::from(byte);
        nbits += 8;
        while nbits >= 5 {
            nbits -= 5;
            out.push(char::from(ALPHABET[((bits >> nbits) & 31) as usize]));
        }
    }
    if nbits > 0 {
        out.push(char::from(ALPHABET[((bits << (5 - nbits)) & 31) as usize]));
    }
    out
}

/// A holder identity for one run of the server `server_id`: `<server ID>_<random UUID>`, as
/// kube-apiserver's; it changes when the server restarts, which is how peers notice a restart.
pub fn holder_identity(server_id: &str) -> String {
    let mut uuid = fastrand::u128(..).to_be_bytes();
    uuid[6] = (uuid[6] & 0x0f) | 0x40; // version 4
    uuid[8] = (uuid[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{server_id}_{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A Kubernetes `MicroTime` (RFC 3339 in UTC with microseconds) for `at`.
pub fn micro_time(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// One run of a server's identity lease, as kube-apiserver's identity lease controller writes it.
#[derive(Clone, Debug)]
pub struct IdentityLease {
    /// The APIServerID, the lease's name ([`server_id`]).
    pub server_id: String,
    /// `spec.holderIdentity`, one per run ([`holder_identity`]).
    pub holder_identity: String,
    /// The `kubernetes.io/hostname` label.
    pub hostname: String,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// How often the lease is renewed.
    pub renew_interval: Duration,
    /// The address peers reach the server at, published as the
    /// [`PEER_ADVERTISE_ADDRESS_ANNOTATION`].
    pub peer_advertise_address: Option<String>,
    /// Whether a lease of the same name held by another run is deleted at start, and this
    /// run's deleted when the task stops (kube-apiserver 1.35+). Default `true`.
    pub clean_up: bool,
}

impl IdentityLease {
    /// The lease of a new run of the server on `hostname`, with upstream's duration (1 h),
    /// renew interval (10 s) and clean-up.
    pub fn new(hostname: impl Into<String>) -> Self {
        let hostname = hostname.into();
        let server_id = server_id(&hostname);
        Self {
            holder_identity: holder_identity(&server_id),
            server_id,
            hostname,
            duration: IDENTITY_LEASE_DURATION,
            renew_interval: IDENTITY_LEASE_RENEW_INTERVAL,
            peer_advertise_address: None,
            clean_up: true,
        }
    }

    /// Publishes `address` as the address peers reach this server at.
    pub fn peer_advertise_address(mut self, address: impl Into<String>) -> Self {
        self.peer_advertise_address = Some(address.into());
        self
    }

    /// The Lease object, renewed at `renew_time` (a [`micro_time`]).
    pub fn object(&self, renew_time: &str) -> Value {
        let mut metadata = json!({
            "name": self.server_id,
            "namespace": IDENTITY_LEASE_NAMESPACE,
            "labels": {
                IDENTITY_LEASE_LABEL.0: IDENTITY_LEASE_LABEL.1,
                HOSTNAME_LABEL: self.hostname,
            },
        });
        if let Some(address) = &self.peer_advertise_address {
            metadata["annotations"] = json!({ PEER_ADVERTISE_ADDRESS_ANNOTATION: address });
        }
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.holder_identity,
                "leaseDurationSeconds": self.duration.as_secs(),
                "renewTime": renew_time,
            },
        })
    }

    fn object_ref(&self) -> ObjectRef {
        ObjectRef::lease(IDENTITY_LEASE_NAMESPACE, &self.server_id)
    }
}

/// Publishes and renews a server's identity lease.
pub struct IdentityLeaseTask {
    lease: IdentityLease,
    cluster: Arc<dyn ClusterApi>,
    published: Arc<AtomicBool>,
    delete_on_stop: bool,
}

impl std::fmt::Debug for IdentityLeaseTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityLeaseTask")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl IdentityLeaseTask {
    /// A task writing `lease` through `cluster`.
    pub fn new(cluster: Arc<dyn ClusterApi>, lease: IdentityLease) -> Self {
        Self {
            delete_on_stop: lease.clean_up,
            lease,
            cluster,
            published: Arc::default(),
        }
    }

    /// Leaves the lease when [`run`](Self::run) stops, for a server that deletes it itself at a
    /// moment of its own choosing ([`delete_identity_lease`]).
    pub fn keep_on_stop(mut self) -> Self {
        self.delete_on_stop = false;
        self
    }

    /// Shares `flag`, set once the lease is written, instead of the task's own.
    pub fn with_published(mut self, flag: Arc<AtomicBool>) -> Self {
        self.published = flag;
        self
    }

    /// The lease this task writes.
    pub fn lease(&self) -> &IdentityLease {
        &self.lease
    }

    /// Set once the lease has been written (a server's readiness waits for it).
    pub fn published(&self) -> Arc<AtomicBool> {
        self.published.clone()
    }

    /// Start-up, before anything names this server's ID: with clean-up on, deletes a lease of
    /// the same name held by another (crashed) run, then writes this run's lease once.
    pub async fn initialize(&self) -> Result<(), ClusterError> {
        let object = self.lease.object_ref();
        if self.lease.clean_up
            && let Some(existing) = self.cluster.get(&object).await?
            && holder_of(&existing) != Some(self.lease.holder_identity.as_str())
        {
            match self.cluster.delete(&object, Preconditions::of(&existing)).await {
                Ok(_) | Err(ClusterError::Conflict(_) | ClusterError::NotFound) => {}
                Err(err) => return Err(err),
            }
        }
        self.renew().await
    }

    /// Creates or renews the lease now.
    pub async fn renew(&self) -> Result<(), ClusterError> {
        let object = self.lease.object_ref();
        let desired = self.lease.object(&micro_time(SystemTime::now()));
        match self.cluster.get(&object).await? {
            Some(mut current) => {
                // Keep metadata (uid, resourceVersion: a concurrent write conflicts), replace
                // spec, labels and annotation.
                current["spec"] = desired["spec"].clone();
                current["metadata"]["labels"] = desired["metadata"]["labels"].clone();
                if let Some(annotations) = desired["metadata"].get("annotations") {
                    current["metadata"]["annotations"] = annotations.clone();
                }
                self.cluster.replace(&object, current).await?;
            }
            None => {
                self.cluster.create(&object, desired).await?;
            }
        }
        self.published.store(true, Ordering::Release);
        Ok(())
    }

    /// Renews the lease every renew interval (the first time at once) until `shutdown`, then,
    /// with clean-up on (and no [`keep_on_stop`](Self::keep_on_stop)), deletes it. Errors are logged and retried on the next tick.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let mut interval = tokio::time::interval(self.lease.renew_interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                _ = interval.tick() => {}
            }
            if let Err(err) = self.renew().await {
                tracing::warn!(error = %err, "failed to renew the identity lease");
            }
        }
        if self.delete_on_stop
            && let Err(err) = delete_identity_lease(
                self.cluster.as_ref(),
                &self.lease.server_id,
                &self.lease.holder_identity,
            )
            .await
        {
            tracing::warn!(error = %err, "failed to delete the identity lease");
        }
    }
}

fn holder_of(lease: &Value) -> Option<&str> {
    lease.pointer("/spec/holderIdentity").and_then(Value::as_str)
}

/// Deletes the identity lease of `server_id` if `holder_identity` still holds it (graceful stop,
/// kube-apiserver 1.35+): a lease already taken over by a newer run is left alone.
pub async fn delete_identity_lease(
    cluster: &dyn ClusterApi,
    server_id: &str,
    holder_identity: &str,
) -> Result<(), ClusterError> {
    let object = ObjectRef::lease(IDENTITY_LEASE_NAMESPACE, server_id);
    if let Some(existing) = cluster.get(&object).await?
        && holder_of(&existing) == Some(holder_identity)
    {
        match cluster.delete(&object, Preconditions::of(&existing)).await {
            Ok(_) | Err(ClusterError::NotFound | ClusterError::Conflict(_)) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// The peer endpoint record of `server_id` reachable at `address`: a core/v1 `Endpoints`, as
/// upstream's peer endpoint lease reconciler stores it.
pub fn peer_endpoint_record(server_id: &str, address: SocketAddr) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": server_id,
            "labels": { "apiserverIdentity": server_id },
        },
        "subsets": [{
            "addresses": [{ "ip": address.ip().to_string() }],
            "ports": [{ "name": "https", "port": address.port(), "protocol": "TCP" }],
        }],
    })
}

/// `host:port` of a peer endpoint record (IPv6 in brackets), as upstream's `GetEndpoint` joins
/// the first address and port; `None` when it is not one.
pub fn peer_endpoint_address(record: &Value) -> Option<String> {
    let subset = record.get("subsets")?.get(0)?;
    let ip = subset.get("addresses")?.get(0)?.get("ip")?.as_str()?;
    let port = subset.get("ports")?.get(0)?.get("port")?.as_u64()?;
    let ip: std::net::IpAddr = ip.parse().ok()?;
    Some(SocketAddr::new(ip, u16::try_from(port).ok()?).to_string())
}

/// Whether the server has started (upstream waits for `/readyz`); the record is written only then.
pub type StartedCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// How often [`PeerEndpointTask`] looks again while the server has not started or a write failed.
const RETRY_POLL: Duration = Duration::from_millis(10);

/// Keeps a server's peer endpoint record alive while it runs.
pub struct PeerEndpointTask {
    cluster: Arc<dyn ClusterApi>,
    server_id: String,
    address: SocketAddr,
    started: StartedCheck,
    published: Arc<AtomicBool>,
    ttl: Duration,
    refresh: Duration,
    remove_on_stop: bool,
}

impl std::fmt::Debug for PeerEndpointTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerEndpointTask")
            .field("server_id", &self.server_id)
            .field("address", &self.address)
            .field("ttl", &self.ttl)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl PeerEndpointTask {
    /// A task with upstream's TTL (15 s) and refresh (10 s) for `server_id` at `address`,
    /// written once `started` says so and removed when the task stops.
    pub fn new(
        cluster: Arc<dyn ClusterApi>,
        server_id: impl Into<String>,
        address: SocketAddr,
        started: StartedCheck,
    ) -> Self {
        Self {
            cluster,
            server_id: server_id.into(),
            address,
            started,
            published: Arc::default(),
            ttl: PEER_ENDPOINT_TTL,
            refresh: PEER_ENDPOINT_REFRESH,
            remove_on_stop: true,
        }
    }

    /// Overrides the TTL and refresh interval.
    pub fn with_timing(mut self, ttl: Duration, refresh: Duration) -> Self {
        self.ttl = ttl;
        self.refresh = refresh;
        self
    }

    /// Leaves the record when the task stops, for a server that removes it itself at a moment
    /// of its own choosing ([`remove_peer_endpoint`]).
    pub fn keep_on_stop(mut self) -> Self {
        self.remove_on_stop = false;
        self
    }

    /// Shares `flag`, set after the first write, instead of the task's own.
    pub fn with_published(mut self, flag: Arc<AtomicBool>) -> Self {
        self.published = flag;
        self
    }

    /// Set after the first write: peers can reach the server from then on.
    pub fn published(&self) -> Arc<AtomicBool> {
        self.published.clone()
    }

    /// Writes the record once the server has started, then every refresh interval, until
    /// `shutdown`; then removes it (unless [`keep_on_stop`](Self::keep_on_stop)).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let key = format!("{PEER_ENDPOINT_PREFIX}{}", self.server_id);
        let record = peer_endpoint_record(&self.server_id, self.address);
        let mut shutdown = std::pin::pin!(shutdown);
        // Start-up is a cheap flag: a short poll keeps the gap between started and reachable small.
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(wait) => {}
            }
            wait = RETRY_POLL;
            if !(self.started)() {
                continue;
            }
            match self.cluster.put_record(&key, record.clone(), self.ttl).await {
                Ok(()) => {
                    self.published.store(true, Ordering::Release);
                    wait = self.refresh;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "failed to write the peer endpoint record");
                    if matches!(err, ClusterError::Unsupported(_)) {
                        wait = self.refresh;
                    }
                }
            }
        }
        if self.remove_on_stop {
            let _ = remove_peer_endpoint(self.cluster.as_ref(), &self.server_id).await;
        }
    }
}

/// Removes the peer endpoint record of `server_id` (graceful stop).
pub async fn remove_peer_endpoint(cluster: &dyn ClusterApi, server_id: &str) -> Result<(), ClusterError> {
    cluster
        .delete_record(&format!("{PEER_ENDPOINT_PREFIX}{server_id}"))
        .await
}

/// What one server stores for one group/resource: its entry in the StorageVersion object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerStorageVersion {
    /// `<group>.<resource>`, the core group written `core`.
    pub object_name: String,
    /// The version objects are written in (`group/version`, or `v1` for core).
    pub encoding_version: String,
    /// Versions this server can decode.
    pub decodable_versions: Vec<String>,
    /// Versions this server serves.
    pub served_versions: Vec<String>,
}

/// `status` of a StorageVersion after putting `entry` for `server_id` into `existing` (the
/// current status, or `Null`), replacing that server's previous entry; `commonEncodingVersion`
/// and the `AllEncodingVersionsEqual` condition as upstream's updater sets them.
pub fn merged_storage_version_status(
    existing: &Value,
    server_id: &str,
    entry: &ServerStorageVersion,
    now: &str,
) -> Value {
    let mut entries = entries_of_other_servers(existing, server_id);
    entries.push(json!({
        "apiServerID": server_id,
        "encodingVersion": entry.encoding_version,
        "decodableVersions": entry.decodable_versions,
        "servedVersions": entry.served_versions,
    }));
    entries.sort_by(|a, b| {
        a.get("apiServerID")
            .and_then(Value::as_str)
            .cmp(&b.get("apiServerID").and_then(Value::as_str))
    });
    summarise(entries, existing, now)
}

/// `status` after removing `server_id`'s entry (its server is gone).
pub fn storage_version_status_without(existing: &Value, server_id: &str, now: &str) -> Value {
    summarise(entries_of_other_servers(existing, server_id), existing, now)
}

fn entries_of_other_servers(existing: &Value, server_id: &str) -> Vec<Value> {
    existing
        .get("storageVersions")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter(|e| e.get("apiServerID").and_then(Value::as_str) != Some(server_id))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn summarise(entries: Vec<Value>, existing: &Value, now: &str) -> Value {
    let first = entries.first().and_then(|e| e.get("encodingVersion")).cloned();
    let all_equal = first.is_some() && entries.iter().all(|e| e.get("encodingVersion") == first.as_ref());
    let previous = existing
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "AllEncodingVersionsEqual"))
        .cloned();
    let status = if all_equal { "True" } else { "False" };
    let last_transition = match &previous {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let (reason, message) = if all_equal {
        ("CommonEncodingVersionSet", "Common encoding version set")
    } else {
        ("CommonEncodingVersionNotSet", "Common encoding version unset")
    };
    let mut out = json!({
        "storageVersions": entries,
        "conditions": [{
            "type": "AllEncodingVersionsEqual",
            "status": status,
            "lastTransitionTime": last_transition,
            "reason": reason,
            "message": message,
        }],
    });
    if all_equal && let Some(version) = first {
        out["commonEncodingVersion"] = version;
    }
    out
}

/// Conflicts retried per object by [`publish_storage_versions`].
const STORAGE_VERSION_ATTEMPTS: usize = 10;

/// Writes `server_id`'s entries into the StorageVersion objects, creating missing ones (the
/// storage version manager's job at start-up, before the server says ready). Other servers and
/// the garbage collector write the same objects: a conflict re-reads and merges again, up to 10
/// times per object. Returns the first error of an object that could not be written.
pub async fn publish_storage_versions(
    cluster: &dyn ClusterApi,
    server_id: &str,
    entries: &[ServerStorageVersion],
) -> Result<(), ClusterError> {
    let mut first_error = None;
    for entry in entries {
        let object = ObjectRef::storage_version(&entry.object_name);
        let mut last = Ok(());
        for _attempt in 0..STORAGE_VERSION_ATTEMPTS {
            last = publish_one(cluster, &object, server_id, entry).await;
            if !matches!(last, Err(ClusterError::Conflict(_) | ClusterError::NotFound)) {
                break;
            }
        }
        if let Err(err) = last {
            first_error.get_or_insert(err);
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn publish_one(
    cluster: &dyn ClusterApi,
    object: &ObjectRef,
    server_id: &str,
    entry: &ServerStorageVersion,
) -> Result<(), ClusterError> {
    let now = micro_time(SystemTime::now());
    let mut current = match cluster.get(object).await? {
        Some(current) => current,
        None => {
            let created = json!({
                "apiVersion": "internal.apiserver.k8s.io/v1alpha1",
                "kind": "StorageVersion",
                "metadata": { "name": entry.object_name },
                "spec": {},
                "status": {},
            });
            // The API drops the status of a create; the status write below fills it.
            cluster.create(object, created).await?
        }
    };
    current["status"] = merged_storage_version_status(&current["status"], server_id, entry, &now);
    cluster.replace_status(object, current).await?;
    Ok(())
}

/// Peer ID → `holderIdentity` of the identity lease it had when this server's proxy asked it
/// for its discovery.
pub type Receipt = HashMap<String, String>;

/// The record stored for `receipt`.
pub fn receipt_record(receipt: &Receipt) -> Value {
    json!({ "reached": receipt })
}

/// The receipt in a stored record (`None` when it is not one).
pub fn receipt_from_record(record: &Value) -> Option<Receipt> {
    serde_json::from_value(record.get("reached")?.clone()).ok()
}

/// Publishes this server's discovery receipt under `/peerdiscoveryreceipts/<server ID>` whenever
/// it changes, and every `refresh` so that it lives (`ttl`) as long as the server; removes it on
/// `shutdown`. Not upstream: kube-apiserver cannot tell that its peers know it, so right after a
/// server becomes ready at a new version its peers may still answer 404 for what only it serves;
/// a starting server's readiness can wait until every peer's receipt lists its current run.
pub async fn run_receipt_publisher(
    cluster: Arc<dyn ClusterApi>,
    server_id: String,
    mut receipts: watch::Receiver<Option<Receipt>>,
    ttl: Duration,
    refresh: Duration,
    shutdown: impl Future<Output = ()> + Send,
) {
    let key = format!("{RECEIPT_PREFIX}{server_id}");
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let current = receipts.borrow_and_update().clone();
        if let Some(receipt) = current
            && let Err(err) = cluster.put_record(&key, receipt_record(&receipt), ttl).await
        {
            tracing::warn!(error = %err, "failed to write the peer discovery receipt");
        }
        tokio::select! {
            () = &mut shutdown => break,
            changed = receipts.changed() => if changed.is_err() { break },
            () = tokio::time::sleep(refresh) => {}
        }
    }
    let _ = cluster.delete_record(&key).await;
}

/// Peers' addresses as their identity leases advertise them
/// ([`PEER_ADVERTISE_ADDRESS_ANNOTATION`]), filled by [`PeerLeaseFeed`].
///
/// Upstream's proxy reads the peer endpoint records, which live in storage beside the API: a
/// server that reaches the cluster only through the API (a `KubeCluster`)
/// reads the address the peer advertises on its lease instead.
#[derive(Debug, Default)]
pub struct LeaseAddresses {
    addresses: RwLock<BTreeMap<String, String>>,
}

impl LeaseAddresses {
    /// Replaces the addresses; whether they changed.
    fn replace(&self, fresh: BTreeMap<String, String>) -> bool {
        let mut current = self
            .addresses
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = *current != fresh;
        *current = fresh;
        changed
    }
}

impl PeerEndpoints for LeaseAddresses {
    fn endpoint(&self, server_id: &str) -> Option<String> {
        self.addresses
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(server_id)
            .cloned()
    }
}

/// Feeds [`DiscoveryPeers`] with the cluster's identity leases (and [`LeaseAddresses`] with
/// the addresses they advertise), listed every `period`: the informer of a server without one.
pub struct PeerLeaseFeed {
    cluster: Arc<dyn ClusterApi>,
    peers: DiscoveryPeers,
    addresses: Arc<LeaseAddresses>,
    period: Duration,
}

impl std::fmt::Debug for PeerLeaseFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerLeaseFeed")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

impl PeerLeaseFeed {
    /// A feed listing every second into `peers` and `addresses`.
    pub fn new(cluster: Arc<dyn ClusterApi>, peers: DiscoveryPeers, addresses: Arc<LeaseAddresses>) -> Self {
        Self {
            cluster,
            peers,
            addresses,
            period: Duration::from_secs(1),
        }
    }

    /// Lists every `period` instead.
    pub fn period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    /// Lists the identity leases once and feeds them.
    pub async fn sync(&self) -> Result<(), ClusterError> {
        let selector = format!("{}={}", IDENTITY_LEASE_LABEL.0, IDENTITY_LEASE_LABEL.1);
        let collection = ObjectRef::lease(IDENTITY_LEASE_NAMESPACE, "");
        let items = self.cluster.list(&collection, &selector).await?;
        let leases: Vec<Lease> = items
            .iter()
            .filter_map(|item| serde_json::from_value(item.clone()).ok())
            .collect();
        let addresses = items
            .iter()
            .filter_map(|item| {
                let name = item.pointer("/metadata/name")?.as_str()?;
                let address = item
                    .pointer("/metadata/annotations")?
                    .get(PEER_ADVERTISE_ADDRESS_ANNOTATION)?
                    .as_str()?;
                Some((name.to_owned(), address.to_owned()))
            })
            .collect();
        // Addresses first: a new peer's discovery is fetched as soon as its lease is seen.
        if self.addresses.replace(addresses) {
            self.peers.peer_endpoints_changed();
        }
        self.peers.set_identity_leases(&leases);
        Ok(())
    }

    /// Syncs every period until `shutdown`; errors are logged and retried.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let mut interval = tokio::time::interval(self.period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = interval.tick() => {}
            }
            if let Err(err) = self.sync().await {
                tracing::warn!(error = %err, "failed to list the identity leases");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_id_matches_kube_apiserver() {
        // The fake's identity module checks the same derivation against an independent encoder;
        // this one pins a value: kube-apiserver's ID for host `test-server-a`.
        let id = server_id("test-server-a");
        assert_eq!(id.len(), "apiserver-".len() + 26);
        assert!(id.starts_with("apiserver-"));
        assert_ne!(id, server_id("test-server-b"));
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
        // The fake kube-apiserver (whose derivation is checked against an independent encoder)
        // names its host `a` so.
        assert_eq!(server_id("a"), "apiserver-2tpgmlbwcz6wvzejdfn7mej2p4");
    }

    #[test]
    fn holder_identity_is_id_underscore_uuid_v4() {
        let holder = holder_identity("apiserver-x");
        let uuid = holder.strip_prefix("apiserver-x_").unwrap();
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4");
        assert_ne!(holder, holder_identity("apiserver-x"));
    }

    #[test]
    fn micro_time_is_rfc3339_utc_with_microseconds() {
        let at = UNIX_EPOCH + Duration::from_micros(1_795_380_918_123_456);
        assert_eq!(micro_time(at), "2026-11-22T20:55:18.123456Z");
        assert_eq!(micro_time(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
    }

    #[test]
    fn identity_lease_carries_upstream_labels_and_annotation() {
        let lease = IdentityLease::new("host-a").peer_advertise_address("1.2.3.4:6443");
        let object = lease.object("t");
        assert_eq!(object["metadata"]["name"], server_id("host-a"));
        assert_eq!(object["metadata"]["namespace"], "kube-system");
        assert_eq!(
            object["metadata"]["labels"]["apiserver.kubernetes.io/identity"],
            "kube-apiserver"
        );
        assert_eq!(object["metadata"]["labels"][HOSTNAME_LABEL], "host-a");
        assert_eq!(
            object["metadata"]["annotations"][PEER_ADVERTISE_ADDRESS_ANNOTATION],
            "1.2.3.4:6443"
        );
        assert_eq!(object["spec"]["leaseDurationSeconds"], 3600);
        assert!(lease.holder_identity.starts_with(&lease.server_id));
    }

    #[test]
    fn peer_endpoint_record_round_trips_its_address() {
        let v6 = peer_endpoint_record("apiserver-b", "[::1]:443".parse().unwrap());
        assert_eq!(peer_endpoint_address(&v6).as_deref(), Some("[::1]:443"));
        assert_eq!(v6["metadata"]["labels"]["apiserverIdentity"], "apiserver-b");
        assert_eq!(peer_endpoint_address(&json!({})), None);
    }

    #[test]
    fn storage_version_merge_replaces_own_entry_and_keeps_peers() {
        let entry = ServerStorageVersion {
            object_name: "batch.jobs".into(),
            encoding_version: "batch/v1".into(),
            decodable_versions: vec!["batch/v1".into()],
            served_versions: vec!["batch/v1".into()],
        };
        let status = merged_storage_version_status(&Value::Null, "b", &entry, "t0");
        let status = merged_storage_version_status(&status, "a", &entry, "t1");
        let status = merged_storage_version_status(&status, "a", &entry, "t2");
        let ids: Vec<&str> = status["storageVersions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["apiServerID"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(status["commonEncodingVersion"], "batch/v1");
        assert_eq!(status["conditions"][0]["lastTransitionTime"], "t0");
        let status = storage_version_status_without(&status, "a", "t3");
        assert_eq!(status["storageVersions"].as_array().unwrap().len(), 1);
    }

    /// A cluster API over a map, with the API's optimistic concurrency and a status that a create
    /// drops; `conflicts` status writes fail with a conflict first.
    #[derive(Default)]
    struct MapCluster {
        objects: std::sync::Mutex<BTreeMap<String, Value>>,
        conflicts: std::sync::atomic::AtomicUsize,
    }

    impl ClusterApi for MapCluster {
        fn get<'a>(&'a self, object: &'a ObjectRef) -> crate::cluster::ClusterFuture<'a, Option<Value>> {
            let found = self.objects.lock().unwrap().get(&object.path()).cloned();
            Box::pin(async move { Ok(found) })
        }
        fn list<'a>(&'a self, _: &'a ObjectRef, _: &'a str) -> crate::cluster::ClusterFuture<'a, Vec<Value>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn create<'a>(
            &'a self,
            object: &'a ObjectRef,
            mut body: Value,
        ) -> crate::cluster::ClusterFuture<'a, Value> {
            body["status"] = json!({});
            body["metadata"]["resourceVersion"] = json!("1");
            self.objects.lock().unwrap().insert(object.path(), body.clone());
            Box::pin(async move { Ok(body) })
        }
        fn replace<'a>(
            &'a self,
            object: &'a ObjectRef,
            body: Value,
        ) -> crate::cluster::ClusterFuture<'a, Value> {
            self.replace_status(object, body)
        }
        fn replace_status<'a>(
            &'a self,
            object: &'a ObjectRef,
            mut body: Value,
        ) -> crate::cluster::ClusterFuture<'a, Value> {
            let result = if self
                .conflicts
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok()
            {
                Err(ClusterError::Conflict("the object has been modified".into()))
            } else {
                let version: u64 = body["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                body["metadata"]["resourceVersion"] = json!((version + 1).to_string());
                self.objects.lock().unwrap().insert(object.path(), body.clone());
                Ok(body)
            };
            Box::pin(async move { result })
        }
        fn delete<'a>(
            &'a self,
            object: &'a ObjectRef,
            _: Preconditions,
        ) -> crate::cluster::ClusterFuture<'a, bool> {
            let removed = self.objects.lock().unwrap().remove(&object.path()).is_some();
            Box::pin(async move { Ok(removed) })
        }
    }

    #[tokio::test]
    async fn storage_versions_are_created_then_written_through_status_and_conflicts_retried() {
        let cluster = MapCluster::default();
        let jobs = ServerStorageVersion {
            object_name: "batch.jobs".into(),
            encoding_version: "batch/v1".into(),
            decodable_versions: vec!["batch/v1".into()],
            served_versions: vec!["batch/v1".into()],
        };
        publish_storage_versions(&cluster, "b", std::slice::from_ref(&jobs))
            .await
            .unwrap();
        cluster.conflicts.store(2, Ordering::Release);
        publish_storage_versions(&cluster, "a", &[jobs]).await.unwrap();
        let stored = cluster
            .get(&ObjectRef::storage_version("batch.jobs"))
            .await
            .unwrap()
            .unwrap();
        let ids: Vec<&str> = stored["status"]["storageVersions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["apiServerID"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(stored["status"]["commonEncodingVersion"], "batch/v1");
        assert_eq!(stored["status"]["conditions"][0]["status"], "True");
    }

    #[tokio::test]
    async fn the_identity_lease_is_renewed_in_place_and_a_stale_run_replaced() {
        let cluster: Arc<dyn ClusterApi> = Arc::new(MapCluster::default());
        let first = IdentityLeaseTask::new(cluster.clone(), IdentityLease::new("h"));
        first.initialize().await.unwrap();
        first.renew().await.unwrap();
        let object = ObjectRef::lease(IDENTITY_LEASE_NAMESPACE, &server_id("h"));
        let stored = cluster.get(&object).await.unwrap().unwrap();
        assert_eq!(stored["metadata"]["resourceVersion"], "2", "renewed in place");
        let next = IdentityLeaseTask::new(cluster.clone(), IdentityLease::new("h"));
        next.initialize().await.unwrap();
        let stored = cluster.get(&object).await.unwrap().unwrap();
        assert_eq!(stored["metadata"]["resourceVersion"], "1", "a new object");
        assert_eq!(
            stored["spec"]["holderIdentity"],
            next.lease().holder_identity.as_str()
        );
        // The old run's stop leaves the new run's lease alone.
        delete_identity_lease(cluster.as_ref(), &server_id("h"), &first.lease().holder_identity)
            .await
            .unwrap();
        assert!(cluster.get(&object).await.unwrap().is_some());
    }

    #[test]
    fn a_receipt_round_trips_through_its_record() {
        let receipt = Receipt::from([("a".to_owned(), "a_1".to_owned())]);
        assert_eq!(receipt_from_record(&receipt_record(&receipt)), Some(receipt));
    }
}
