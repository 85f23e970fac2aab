//! [`EtcdStore`]: the [`Store`] on a real etcd v3, with kube-apiserver's key layout and semantics
//! (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go` upstream; `docs/storage.md`).
//!
//! * Keys: `<prefix>/<resource>/<namespace>/<name>` (cluster-scoped: `<prefix>/<resource>/<name>`)
//!   for built-in groups, `<prefix>/<group>/<resource>/…` for API groups served from CRDs and for
//!   `apiextensions.k8s.io` and `apiregistration.k8s.io`, as upstream's storage factory lays them out.
//! * Values are written as upstream's storage codec writes them (`--storage-media-type`): Kubernetes
//!   protobuf for built-in kinds by default, JSON for the rest; both are read whatever wrote them. No
//!   value holds `metadata.resourceVersion`: the resourceVersion of an object is its key's
//!   `mod_revision`, of a list the read's revision, as upstream's `APIObjectVersioner`.
//! * Creates are transactions on `create_revision == 0`; updates and deletes compare the
//!   `mod_revision` they read (`GuaranteedUpdate`: an unconditional update that lost a race is read
//!   and tried again; a conditional one is a 409).
//! * Lists are linearizable range reads; watches are etcd watches with `prev_kv` from the requested
//!   revision (410 Gone when it is compacted).
//! * The internal keyspace (peer endpoint records) lives under `<prefix>/peerserverleases/…` etc., each
//!   entry attached to an etcd lease of its TTL, as upstream's peer endpoint lease reconciler writes it.

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, KeyValue, PutOptions,
    Txn, TxnOp, WatchOptions,
};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::protobuf;

use super::{
    Object, ObjectKey, Preconditions, ProgressWatch, RangePage, StorageMediaType, StorageResource, Store,
    StoreError, StoreResult, WatchEvent, WatchEventType, WatchStream, check_preconditions,
    fill_create_metadata, prepare_update, set_resource_version,
};

/// How long one etcd call may take before it fails (upstream bounds calls by the request's context;
/// the fake's store calls have no context, so each gets this).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest range response a list accepts: kube-apiserver lets its etcd client receive up to
/// `math.MaxInt32` bytes; gRPC's default (4 MiB) would fail a list of a few thousand objects.
const MAX_LIST_RESPONSE: usize = i32::MAX as usize;

/// The timeout of the `/readyz` and `/healthz` etcd check (kube-apiserver's
/// `--etcd-healthcheck-timeout` default).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// Where and how to reach etcd: kube-apiserver's `--etcd-servers` and `--etcd-prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs (`http://127.0.0.1:2379`).
    pub servers: Vec<String>,
    /// The prefix of every key (`/registry`); no key outside it is ever read or written.
    pub prefix: String,
}

/// A [`Store`] on etcd (see the module docs). Cheap to clone; every server process opens its own.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    /// The prefix without a trailing slash (`/registry`).
    prefix: String,
    /// How objects are written (any encoding is read).
    media_type: StorageMediaType,
    /// The client URLs, each asked for its version by [`Self::request_progress_supported`].
    servers: Vec<String>,
    /// Whether every endpoint answers requested progress notifications in order with events, once
    /// known (upstream's `RequestWatchProgress` feature; see [`super::etcd_progress`]).
    progress_supported: std::sync::Arc<tokio::sync::OnceCell<bool>>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn unavailable(err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

/// An etcd client error in one line: gRPC's message and, for transport failures, the innermost
/// cause (`tcp connect error: Connection refused (os error 111)`).
fn describe(err: &etcd_client::Error) -> StoreError {
    let etcd_client::Error::GRpcStatus(status) = err else {
        return unavailable(err);
    };
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(status);
    let mut innermost = None;
    while let Some(err) = cause {
        innermost = Some(err);
        cause = err.source();
    }
    match innermost {
        Some(inner) if inner.to_string() != status.message() => {
            unavailable(format!("{}: {inner}", status.message()))
        }
        _ => unavailable(status.message()),
    }
}

/// Runs one etcd call with [`CALL_TIMEOUT`].
async fn call<T>(future: impl std::future::Future<Output = Result<T, etcd_client::Error>>) -> StoreResult<T> {
    match tokio::time::timeout(CALL_TIMEOUT, future).await {
        Ok(result) => result.map_err(|err| describe(&err)),
        Err(_) => Err(unavailable("context deadline exceeded")),
    }
}

/// Whether `group` is one whose built-in resources upstream stores under `<prefix>/<resource>`.
/// Groups served from CRDs (and the aggregator's and apiextensions' own groups) are stored under
/// `<prefix>/<group>/<resource>`.
fn stored_without_group(group: &str) -> bool {
    // The groups of Kubernetes' built-in APIs (1.28–1.36), whose resources upstream keys by resource
    // alone. Any other group, `*.k8s.io` ones served from CRDs included (Gateway API, snapshots), is a
    // custom resource group and keyed with the group. Not here: apiextensions.k8s.io and
    // apiregistration.k8s.io (upstream keys them with the group), and events.k8s.io, whose Events
    // upstream shares with the core group's through conversion, which the fake does not do.
    const BUILT_IN: &[&str] = &[
        "",
        "admissionregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "extensions",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    ];
    BUILT_IN.contains(&group)
}

/// The path segment of a built-in resource's keys: its name, except where upstream's registries chose
/// another (`/registry/services/specs/…`, `/registry/services/endpoints/…`, `/registry/minions/…`,
/// `/registry/ingress/…`).
fn key_resource(resource: &StorageResource) -> &str {
    match (resource.group.as_str(), resource.resource.as_str()) {
        ("", "services") => "services/specs",
        ("", "endpoints") => "services/endpoints",
        ("", "nodes") => "minions",
        ("networking.k8s.io" | "extensions", "ingresses") => "ingress",
        (_, name) => name,
    }
}

fn revision(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl EtcdStore {
    /// Connects to `config.servers` and checks that etcd answers, waiting at most `timeout`: a server
    /// that cannot reach its storage does not start (kube-apiserver exits too).
    pub async fn connect(config: &EtcdConfig, timeout: Duration) -> StoreResult<Self> {
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        let client = tokio::time::timeout(timeout, Client::connect(&config.servers, Some(options)))
            .await
            .map_err(|_| unavailable("context deadline exceeded"))?
            .map_err(|err| describe(&err))?;
        let store = Self {
            client,
            prefix: config.prefix.trim_end_matches('/').to_owned(),
            media_type: StorageMediaType::default(),
            servers: config.servers.clone(),
            progress_supported: std::sync::Arc::default(),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match store.ping(HEALTH_TIMEOUT.min(timeout)).await {
                Ok(()) => return Ok(store),
                Err(err) if tokio::time::Instant::now() >= deadline => return Err(err),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// The store writing objects in `media_type` (kube-apiserver's `--storage-media-type`; protobuf
    /// unless told otherwise).
    pub fn with_media_type(mut self, media_type: StorageMediaType) -> Self {
        self.media_type = media_type;
        self
    }

    /// A KV client for range reads of whole resources ([`MAX_LIST_RESPONSE`]).
    fn list_client(&self) -> etcd_client::KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(MAX_LIST_RESPONSE)
    }

    /// The key prefix of `resource`, with a trailing slash.
    fn resource_prefix(&self, resource: &StorageResource) -> String {
        if stored_without_group(&resource.group) {
            format!("{}/{}/", self.prefix, key_resource(resource))
        } else {
            format!("{}/{}/{}/", self.prefix, resource.group, resource.resource)
        }
    }

    fn scope_prefix(&self, resource: &StorageResource, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) => format!("{}{ns}/", self.resource_prefix(resource)),
            None => self.resource_prefix(resource),
        }
    }

    fn object_key(&self, resource: &StorageResource, key: &ObjectKey) -> String {
        format!("{}{key}", self.resource_prefix(resource))
    }

    fn internal_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Whether etcd's requested progress notifications can be trusted (every endpoint at 3.4.31+ or
    /// 3.5.13+, upstream's `RequestWatchProgress` check). Not known yet (an endpoint did not answer):
    /// false, and asked again next time.
    pub async fn request_progress_supported(&self) -> bool {
        let check = self
            .progress_supported
            .get_or_try_init(|| super::etcd_progress::servers_support_request_progress(&self.servers));
        match check.await {
            Ok(supported) => *supported,
            Err(err) => {
                tracing::debug!(%err, "could not check whether etcd supports RequestWatchProgress");
                false
            }
        }
    }

    /// A linearizable read of one key, as kube-apiserver's health check does.
    async fn ping(&self, timeout: Duration) -> StoreResult<()> {
        let mut client = self.client.clone();
        let key = format!("{}/health", self.prefix);
        match tokio::time::timeout(
            timeout,
            client.get(key, Some(GetOptions::new().with_count_only())),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => Err(describe(&err)),
            Err(_) => Err(unavailable("context deadline exceeded")),
        }
    }

    /// An etcd watch of `prefix` from after `from` (`None`: from now), with `prev_kv`. With
    /// `progress`, etcd's progress notifications come out as [`WatchEventType::Bookmark`] events and
    /// [`ProgressWatch::request_progress`] asks for one (etcd's `RequestProgress`).
    async fn open_watch(
        &self,
        prefix: String,
        from: Option<u64>,
        progress: bool,
    ) -> StoreResult<ProgressWatch> {
        let mut client = self.client.clone();
        let mut options = WatchOptions::new().with_prefix().with_prev_key();
        if let Some(from) = from {
            let from = i64::try_from(from).map_err(|_| unavailable("revision out of range"))?;
            // etcd only says a start revision is compacted once the watch runs; a read at that
            // revision says so now, so the caller gets 410 before any event, as from the
            // in-memory store.
            if from > 0 {
                let probe = call(
                    client.get(
                        prefix.clone(),
                        Some(
                            GetOptions::new()
                                .with_prefix()
                                .with_count_only()
                                .with_revision(from),
                        ),
                    ),
                )
                .await;
                if let Err(StoreError::Unavailable(message)) = &probe
                    && message.contains("compacted")
                {
                    return Err(StoreError::Expired {
                        requested: from as u64,
                        oldest: from as u64 + 1,
                    });
                }
                probe?;
            }
            options = options.with_start_revision(from + 1);
        }
        let stream = call(client.watch(prefix, Some(options))).await?;
        let (mut sender, stream) = stream.split();
        // The request half lives as long as the stream (the events closure holds a sender), as the
        // unsplit stream held it.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        tokio::spawn(async move {
            while rx.recv().await.is_some() {
                if sender.request_progress().await.is_err() {
                    break;
                }
            }
        });
        let request_progress = progress.then(|| tx.clone());
        let requested = from.unwrap_or(0);
        let events = stream
            .map(move |response| -> Vec<StoreResult<WatchEvent>> {
                let _request_half = &tx;
                let response = match response {
                    Ok(response) => response,
                    Err(err) => return vec![Err(describe(&err))],
                };
                if response.compact_revision() > 0 {
                    return vec![Err(StoreError::Expired {
                        requested,
                        oldest: revision(response.compact_revision()),
                    })];
                }
                if response.canceled() {
                    return vec![Err(unavailable(format!(
                        "watch canceled: {}",
                        response.cancel_reason()
                    )))];
                }
                if progress && response.events().is_empty() && !response.created() {
                    // A progress notification: every change up to the header's revision was sent.
                    return vec![Ok(WatchEvent {
                        event_type: WatchEventType::Bookmark,
                        object: Value::Null,
                        revision: header_revision(response.header()),
                        prev_object: None,
                    })];
                }
                response.events().iter().filter_map(watch_event).collect()
            })
            .flat_map(futures_util::stream::iter)
            // The first error ends the stream, as the contract says.
            .scan(false, |failed, item| {
                if *failed {
                    return std::future::ready(None);
                }
                *failed = item.is_err();
                std::future::ready(Some(item))
            });
        Ok(ProgressWatch {
            events: events.boxed(),
            request_progress,
        })
    }

    async fn read(&self, resource: &StorageResource, key: &ObjectKey) -> StoreResult<(Object, i64)> {
        let mut client = self.client.clone();
        let response = call(client.get(self.object_key(resource, key), None)).await?;
        match response.kvs().first() {
            Some(kv) => Ok((decode(kv)?, kv.mod_revision())),
            None => Err(StoreError::NotFound {
                resource: resource.clone(),
                key: key.clone(),
            }),
        }
    }
}

/// The object stored in `kv`, with its `mod_revision` as `resourceVersion`.
fn decode(kv: &KeyValue) -> StoreResult<Object> {
    decode_at(kv.value(), kv.mod_revision())
}

/// Reads a value in either encoding, whatever wrote it: Kubernetes protobuf (its `k8s\0` prefix) or JSON.
fn decode_at(value: &[u8], revision: i64) -> StoreResult<Object> {
    let mut object = decode_value(value)?;
    set_resource_version(&mut object, self::revision(revision));
    Ok(object)
}

fn decode_value(value: &[u8]) -> StoreResult<Value> {
    if value.starts_with(protobuf::MAGIC) {
        protobuf::decode_object(value)
            .map_err(|err| StoreError::InvalidObject(format!("stored value does not decode: {err}")))
    } else {
        serde_json::from_slice(value)
            .map_err(|err| StoreError::InvalidObject(format!("stored value does not decode: {err}")))
    }
}

/// The value written for `object` in `media_type`: without `resourceVersion` (etcd's revision is the
/// version). Protobuf is for built-in kinds only, as upstream (custom resources, CRDs and APIServices are
/// JSON); an object the protobuf table cannot hold whole (a field newer than the table) is written as
/// JSON rather than without it.
fn encode(media_type: StorageMediaType, group: &str, object: &Object) -> StoreResult<Vec<u8>> {
    let mut stored = object.clone();
    if let Some(Value::Object(metadata)) = stored.get_mut("metadata") {
        metadata.remove("resourceVersion");
    }
    if media_type == StorageMediaType::Protobuf && stored_without_group(group) {
        match protobuf::encode_object(&stored) {
            Ok(bytes) => return Ok(bytes),
            Err(err) => tracing::debug!(%err, "stored as JSON: the protobuf table cannot hold the object"),
        }
    }
    serde_json::to_vec(&stored).map_err(|err| StoreError::InvalidObject(err.to_string()))
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> u64 {
    header.map_or(0, |h| revision(h.revision()))
}

impl Store for EtcdStore {
    fn create<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        mut object: Object,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        Box::pin(async move {
            fill_create_metadata(&mut object, key)?;
            let path = self.object_key(resource, key);
            let txn = Txn::new()
                .when([Compare::create_revision(path.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    path,
                    encode(self.media_type, &resource.group, &object)?,
                    None,
                )]);
            let mut client = self.client.clone();
            let response = call(client.txn(txn)).await?;
            if !response.succeeded() {
                return Err(StoreError::AlreadyExists {
                    resource: resource.clone(),
                    key: key.clone(),
                });
            }
            set_resource_version(&mut object, header_revision(response.header()));
            Ok(object)
        })
    }

    fn get<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        Box::pin(async move { Ok(self.read(resource, key).await?.0) })
    }

    fn update<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        object: Object,
        expected_revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        Box::pin(async move {
            let path = self.object_key(resource, key);
            loop {
                let (current, read_revision) = self.read(resource, key).await?;
                let Some(mut next) =
                    prepare_update(resource, key, object.clone(), &current, expected_revision)?
                else {
                    return Ok(current);
                };
                let txn = Txn::new()
                    .when([Compare::mod_revision(
                        path.clone(),
                        CompareOp::Equal,
                        read_revision,
                    )])
                    .and_then([TxnOp::put(
                        path.clone(),
                        encode(self.media_type, &resource.group, &next)?,
                        None,
                    )]);
                let mut client = self.client.clone();
                let response = call(client.txn(txn)).await?;
                if response.succeeded() {
                    set_resource_version(&mut next, header_revision(response.header()));
                    return Ok(next);
                }
                // Changed since the read: read again, as GuaranteedUpdate does. A precondition the
                // caller gave then fails on the new revision (409); an unconditional update retries.
            }
        })
    }

    fn delete<'a>(
        &'a self,
        resource: &'a StorageResource,
        key: &'a ObjectKey,
        preconditions: Option<Preconditions>,
    ) -> BoxFuture<'a, StoreResult<Object>> {
        Box::pin(async move {
            let path = self.object_key(resource, key);
            loop {
                let (current, read_revision) = self.read(resource, key).await?;
                check_preconditions(resource, key, &current, preconditions.clone())?;
                let txn = Txn::new()
                    .when([Compare::mod_revision(
                        path.clone(),
                        CompareOp::Equal,
                        read_revision,
                    )])
                    .and_then([TxnOp::delete(path.clone(), None)]);
                let mut client = self.client.clone();
                let response = call(client.txn(txn)).await?;
                if response.succeeded() {
                    let mut deleted = current;
                    set_resource_version(&mut deleted, header_revision(response.header()));
                    return Ok(deleted);
                }
            }
        })
    }

    fn list<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        Box::pin(async move {
            let mut kv = self.list_client();
            let response = call(kv.get(
                self.scope_prefix(resource, namespace),
                Some(GetOptions::new().with_prefix()),
            ))
            .await?;
            let items = response
                .kvs()
                .iter()
                .map(decode)
                .collect::<StoreResult<Vec<_>>>()?;
            Ok((items, header_revision(response.header())))
        })
    }

    fn list_at<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        revision: u64,
    ) -> BoxFuture<'a, StoreResult<(Vec<Object>, u64)>> {
        Box::pin(async move {
            let mut kv = self.list_client();
            let at = i64::try_from(revision).map_err(|_| unavailable("revision out of range"))?;
            let response = call(kv.get(
                self.scope_prefix(resource, namespace),
                Some(GetOptions::new().with_prefix().with_revision(at)),
            ))
            .await
            .map_err(|err| match err {
                StoreError::Unavailable(message) if message.contains("compacted") => StoreError::Expired {
                    requested: revision,
                    oldest: revision + 1,
                },
                other => other,
            })?;
            let items = response
                .kvs()
                .iter()
                .map(decode)
                .collect::<StoreResult<Vec<_>>>()?;
            Ok((items, revision))
        })
    }

    fn list_range<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        start: Option<&'a str>,
        limit: usize,
        revision: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<RangePage>> {
        Box::pin(async move {
            let mut kv = self.list_client();
            let prefix = self.scope_prefix(resource, namespace);
            // The prefix ends with '/', so the end of its range (clientv3.GetPrefixRangeEnd) is the
            // prefix with that byte incremented.
            let range_end = format!("{}0", &prefix[..prefix.len() - 1]);
            let mut options = GetOptions::new().with_range(range_end);
            if limit > 0 {
                options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
            }
            if let Some(revision) = revision {
                let at = i64::try_from(revision).map_err(|_| unavailable("revision out of range"))?;
                options = options.with_revision(at);
            }
            let key = format!("{prefix}{}", start.unwrap_or_default());
            let response = call(kv.get(key, Some(options)))
                .await
                .map_err(|err| match (err, revision) {
                    (StoreError::Unavailable(message), Some(revision)) if message.contains("compacted") => {
                        StoreError::Expired {
                            requested: revision,
                            oldest: revision + 1,
                        }
                    }
                    (other, _) => other,
                })?;
            let items = response
                .kvs()
                .iter()
                .map(|kv| {
                    let key = String::from_utf8_lossy(kv.key());
                    let relative = key.strip_prefix(prefix.as_str()).unwrap_or(&key).to_owned();
                    Ok((relative, decode(kv)?))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            Ok(RangePage {
                items,
                revision: revision.unwrap_or_else(|| header_revision(response.header())),
                more: response.more(),
                count: u64::try_from(response.count()).unwrap_or(0),
            })
        })
    }

    fn reads_at_revision(&self) -> bool {
        true
    }

    fn watch<'a>(
        &'a self,
        resource: &'a StorageResource,
        namespace: Option<&'a str>,
        from: Option<u64>,
    ) -> BoxFuture<'a, StoreResult<WatchStream>> {
        Box::pin(async move {
            let prefix = self.scope_prefix(resource, namespace);
            Ok(self.open_watch(prefix, from, false).await?.events)
        })
    }

    fn watch_progress<'a>(
        &'a self,
        resource: &'a StorageResource,
        from: u64,
    ) -> BoxFuture<'a, StoreResult<ProgressWatch>> {
        Box::pin(async move {
            // Progress notifications an etcd sends out of order with events would make a watch
            // cache skip writes: only asked for where they are in order.
            let progress = self.request_progress_supported().await;
            self.open_watch(self.resource_prefix(resource), Some(from), progress)
                .await
        })
    }

    fn current_revision(&self) -> BoxFuture<'_, StoreResult<u64>> {
        Box::pin(async move {
            let mut client = self.client.clone();
            let response = call(client.get(
                format!("{}/", self.prefix),
                Some(GetOptions::new().with_count_only()),
            ))
            .await?;
            Ok(header_revision(response.header()))
        })
    }

    fn put_internal<'a>(
        &'a self,
        key: &'a str,
        value: Value,
        ttl: Duration,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let mut client = self.client.clone();
            let seconds = i64::try_from(ttl.as_secs_f64().ceil() as u64)
                .unwrap_or(i64::MAX)
                .max(1);
            let lease = call(client.lease_grant(seconds, None)).await?;
            // Upstream's peer endpoint records are v1 Endpoints in the store's encoding.
            let bytes = encode(self.media_type, "", &value)?;
            call(client.put(
                self.internal_key(key),
                bytes,
                Some(PutOptions::new().with_lease(lease.id())),
            ))
            .await?;
            Ok(())
        })
    }

    fn get_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        Box::pin(async move {
            let mut client = self.client.clone();
            let response = call(client.get(self.internal_key(key), None)).await?;
            response
                .kvs()
                .first()
                .map(|kv| decode_value(kv.value()))
                .transpose()
        })
    }

    fn list_internal<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<(String, Value)>>> {
        Box::pin(async move {
            let mut client = self.client.clone();
            let response =
                call(client.get(self.internal_key(prefix), Some(GetOptions::new().with_prefix()))).await?;
            let mut entries = Vec::with_capacity(response.kvs().len());
            for kv in response.kvs() {
                let Some(key) = kv.key_str().ok().and_then(|k| k.strip_prefix(&self.prefix)) else {
                    continue;
                };
                let value = decode_value(kv.value())?;
                entries.push((key.to_owned(), value));
            }
            Ok(entries)
        })
    }

    fn delete_internal<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut client = self.client.clone();
            let response = call(client.delete(self.internal_key(key), Some(DeleteOptions::new()))).await?;
            Ok(response.deleted() > 0)
        })
    }

    fn check_health(&self) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(self.ping(HEALTH_TIMEOUT))
    }
}

/// The store's event for one etcd event (`None` for a value that does not decode: a foreign key
/// under the prefix is skipped, as upstream logs and skips it).
fn watch_event(event: &etcd_client::Event) -> Option<StoreResult<WatchEvent>> {
    let kv = event.kv()?;
    let at = kv.mod_revision();
    let prev_object = event.prev_kv().and_then(|prev| decode(prev).ok());
    let (event_type, object) = match event.event_type() {
        EventType::Put => {
            let event_type = if kv.create_revision() == kv.mod_revision() {
                WatchEventType::Added
            } else {
                WatchEventType::Modified
            };
            (event_type, decode(kv).ok()?)
        }
        EventType::Delete => {
            // The deleted object's last state, carrying the deletion's revision.
            let previous = event.prev_kv()?;
            (WatchEventType::Deleted, decode_at(previous.value(), at).ok()?)
        }
    };
    Some(Ok(WatchEvent {
        event_type,
        object,
        revision: revision(at),
        prev_object,
    }))
}

#[cfg(test)]
mod tests {
    use super::{StorageResource, key_resource, stored_without_group};

    #[test]
    fn resources_upstream_keys_by_another_name() {
        let key =
            |group: &str, resource: &str| key_resource(&StorageResource::new(group, resource)).to_owned();
        assert_eq!(key("", "services"), "services/specs");
        assert_eq!(key("", "endpoints"), "services/endpoints");
        assert_eq!(key("", "nodes"), "minions");
        assert_eq!(key("networking.k8s.io", "ingresses"), "ingress");
        assert_eq!(key("", "pods"), "pods");
        assert_eq!(key("apps", "deployments"), "deployments");
    }

    #[test]
    fn key_layout_follows_upstream_storage_factory() {
        for group in [
            "",
            "apps",
            "batch",
            "coordination.k8s.io",
            "admissionregistration.k8s.io",
        ] {
            assert!(stored_without_group(group), "{group}");
        }
        for group in [
            "apiextensions.k8s.io",
            "apiregistration.k8s.io",
            "stable.example.com",
            "events.k8s.io",
            "gateway.networking.k8s.io",
            "snapshot.storage.k8s.io",
        ] {
            assert!(!stored_without_group(group), "{group}");
        }
    }
}
