//! The client load of a run, sent through the cluster's load balancer (the embedded one, as HAProxy
//! in TCP mode: round robin per connection, health checks of `/readyz`): a garbage-collector-like
//! inventory client, writers and watchers, each with its own client and so its own connection, as
//! separate programs have. Every request lands in the [`Ledger`], with the server that answered it
//! (the balancer tells which backend the request's connection was spliced to).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ledger::{Answer, Ledger, RequestKind, RequestRecord, UNKNOWN_SERVER, WriteRecord};
use super::plan::TargetResource;
use crate::cluster::AdminClient;
use crate::cluster::load_balancer::embedded::EmbeddedBalancer;
use hyper_util::client::legacy::connect::HttpInfo;
use mvp_core::apidiscovery::APIGroupDiscoveryList;

/// What kubectl and the garbage collector send for aggregated discovery.
const AGGREGATED_DISCOVERY: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// The resourceVersion recorded for a delete answered without one, and for any delete event.
const DELETED: &str = "DELETED";

/// No request of the load may take longer (a hang counts as a transport failure).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// An answer as the load sees it.
pub(super) struct Reply {
    pub(super) answer: Answer,
    pub(super) body: Bytes,
}

impl Reply {
    pub(super) fn ok(&self) -> bool {
        matches!(self.answer, Answer::Status(code) if (200..300).contains(&code))
    }

    pub(super) fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// Whether a 404 body is the router's (the resource is not served there) rather than a missing object.
pub(super) fn is_route_404(body: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(body) {
        Ok(status) => status
            .pointer("/details/name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty),
        Err(_) => true,
    }
}

/// Everything the clients of one run share.
pub(crate) struct Load {
    tls: rustls::ClientConfig,
    balancer: Arc<EmbeddedBalancer>,
    /// `https://` the balancer's address.
    url: String,
    ledger: Arc<Ledger>,
    clock: Instant,
    targets: Vec<TargetResource>,
}

impl Load {
    /// The clients of one run, each an admin of the cluster whose PKI is `pki`, sending through
    /// `balancer`.
    pub(crate) fn new(
        pki: &certs::Pki,
        balancer: Arc<EmbeddedBalancer>,
        ledger: Arc<Ledger>,
        clock: Instant,
        targets: Vec<TargetResource>,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            url: format!("https://{}", balancer.local_addr()),
            tls: crate::cluster::admin_tls_config(pki)?,
            balancer,
            ledger,
            clock,
            targets,
        })
    }

    pub(super) fn now(&self) -> f64 {
        self.clock.elapsed().as_secs_f64()
    }

    /// A client of its own (one connection, so one server at a time, as a separate program).
    pub(super) fn client(&self) -> AdminClient {
        crate::cluster::admin_client_with(self.tls.clone())
    }

    /// The server a response came from: the backend its connection was spliced to.
    fn server_of<B>(&self, response: &http::Response<B>) -> usize {
        response
            .extensions()
            .get::<HttpInfo>()
            .and_then(|info| self.balancer.backend_of(info.local_addr()))
            .unwrap_or(UNKNOWN_SERVER)
    }

    fn request(
        method: Method,
        uri: &str,
        accept: &str,
        body: Option<&Value>,
    ) -> Option<Request<Full<Bytes>>> {
        let payload = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::ACCEPT, accept)
            .header(header::USER_AGENT, "upgrade-sim");
        if body.is_some() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        builder.body(Full::new(payload)).ok()
    }

    /// Sends one request through the balancer and records it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn send(
        &self,
        client: &AdminClient,
        cancel: &CancellationToken,
        method: Method,
        path: &str,
        kind: RequestKind,
        target: Option<&TargetResource>,
        body: Option<&Value>,
    ) -> Option<Reply> {
        let accept = if kind == RequestKind::Discovery {
            AGGREGATED_DISCOVERY
        } else {
            "application/json"
        };
        if cancel.is_cancelled() {
            return None;
        }
        let req = Self::request(method, &format!("{}{path}", self.url), accept, body)?;
        let start = self.now();
        let (server, answer, body) = match tokio::time::timeout(REQUEST_TIMEOUT, async {
            let resp = client.request(req).await?;
            let server = self.server_of(&resp);
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, anyhow::Error>((server, status, body))
        })
        .await
        {
            Ok(Ok((server, status, body))) => (server, Answer::Status(status), body),
            _ => (UNKNOWN_SERVER, Answer::Transport, Bytes::new()),
        };
        self.ledger.request(RequestRecord {
            start,
            end: self.now(),
            server,
            kind,
            gvr: target.map(|t| (t.group.clone(), t.version.clone(), t.resource.clone())),
            answer,
            route_404: answer == Answer::Status(404) && is_route_404(&body),
        });
        Some(Reply { answer, body })
    }

    /// A GET of a resource path through the balancer, recorded.
    pub(super) async fn get(
        &self,
        client: &AdminClient,
        cancel: &CancellationToken,
        path: &str,
        target: &TargetResource,
    ) -> Option<Reply> {
        self.send(
            client,
            cancel,
            Method::GET,
            path,
            RequestKind::Resource,
            Some(target),
            None,
        )
        .await
    }

    /// The garbage collector's pattern: aggregated discovery, then a list of every listable resource
    /// it advertises, again and again.
    pub(crate) async fn run_inventory(self: Arc<Self>, cancel: CancellationToken) {
        let client = self.client();
        while !cancel.is_cancelled() {
            let mut resources = Vec::new();
            for path in ["/api", "/apis"] {
                let Some(reply) = self
                    .send(
                        &client,
                        &cancel,
                        Method::GET,
                        path,
                        RequestKind::Discovery,
                        None,
                        None,
                    )
                    .await
                else {
                    return;
                };
                if let Some(list) = reply.ok().then(|| reply.json()).flatten() {
                    resources.extend(listable(&list));
                }
            }
            for target in &resources {
                let path = target.collection_path().replace("/namespaces/default", "");
                if self.get(&client, &cancel, &path, target).await.is_none() {
                    return;
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    /// A writer: creates an object of a random resource under test, updates it, and deletes every
    /// third one; each acknowledged write is recorded.
    pub(crate) async fn run_writer(self: Arc<Self>, id: usize, seed: u64, cancel: CancellationToken) {
        let client = self.client();
        let mut rng = StdRng::seed_from_u64(seed ^ (0x5752_4954 + id as u64));
        let mut n = 0u64;
        while !cancel.is_cancelled() {
            n += 1;
            let target = &self.targets[rng.random_range(0..self.targets.len())];
            let name = format!("w{id}-{n}");
            let fresh = object(target, &name, 1, None);
            let Some(created) = self
                .send(
                    &client,
                    &cancel,
                    Method::POST,
                    &target.collection_path(),
                    RequestKind::Resource,
                    Some(target),
                    Some(&fresh),
                )
                .await
            else {
                return;
            };
            let rv = self.record_write(target, &name, &created, false, 1);
            if created.ok() {
                let path = format!("{}/{name}", target.collection_path());
                let updated = object(target, &name, 2, rv);
                if let Some(reply) = self
                    .send(
                        &client,
                        &cancel,
                        Method::PUT,
                        &path,
                        RequestKind::Resource,
                        Some(target),
                        Some(&updated),
                    )
                    .await
                {
                    self.record_write(target, &name, &reply, false, 2);
                }
                if n.is_multiple_of(3)
                    && let Some(reply) = self
                        .send(
                            &client,
                            &cancel,
                            Method::DELETE,
                            &path,
                            RequestKind::Resource,
                            Some(target),
                            None,
                        )
                        .await
                {
                    self.record_write(target, &name, &reply, true, 0);
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(rng.random_range(10..40))) => {}
            }
        }
    }

    /// Records a write that was acknowledged (2xx) or may have been applied without the client
    /// learning it (no answer, or a 5xx: the server, or the peer it proxied to, may have stored it and
    /// then gone away). Returns the acknowledged resourceVersion.
    fn record_write(
        &self,
        target: &TargetResource,
        name: &str,
        reply: &Reply,
        deleted: bool,
        generation: u64,
    ) -> Option<String> {
        let acknowledged = reply.ok();
        let maybe_applied = matches!(reply.answer, Answer::Transport | Answer::Status(500..));
        if !acknowledged && !maybe_applied {
            return None;
        }
        let rv = reply.json().and_then(|o| {
            o.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        // Most resources answer a delete with a `Status` (no resourceVersion): any delete event of the
        // object then counts as its delivery.
        let rv = match (rv, deleted) {
            (Some(rv), _) if acknowledged => rv,
            (None, true) if acknowledged => DELETED.to_owned(),
            _ => String::new(),
        };
        self.ledger.write(WriteRecord {
            target: target.clone(),
            name: name.to_owned(),
            resource_version: rv.clone(),
            deleted,
            generation,
            acknowledged,
        });
        (acknowledged && !rv.is_empty()).then_some(rv)
    }

    /// A watcher of `target`: lists, then watches from the list's resourceVersion, resuming from the
    /// last event it saw whenever the stream ends (its server stopped), relisting on 410 Gone.
    pub(crate) async fn run_watcher(self: Arc<Self>, target: TargetResource, cancel: CancellationToken) {
        let client = self.client();
        let path = target.collection_path();
        let mut resume: Option<String> = None;
        self.ledger.watch_gap_opened(&target, 0);
        while !cancel.is_cancelled() {
            let rv = match resume.clone() {
                Some(rv) => rv,
                None => {
                    let Some(reply) = self.get(&client, &cancel, &path, &target).await else {
                        return;
                    };
                    let listed = reply.ok().then(|| reply.json()).flatten();
                    let Some(list) = listed else {
                        tokio::select! {
                            () = cancel.cancelled() => return,
                            () = tokio::time::sleep(Duration::from_millis(50)) => {}
                        }
                        continue;
                    };
                    for item in list.get("items").and_then(Value::as_array).into_iter().flatten() {
                        self.seen(&target, item);
                    }
                    let listed = list
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("0")
                        .to_owned();
                    self.ledger
                        .watch_gap_closed(&target, listed.parse().unwrap_or(u64::MAX));
                    listed
                }
            };
            match self.watch(&client, &cancel, &target, &path, &rv).await {
                WatchEnd::Resume(last) => resume = Some(last),
                WatchEnd::Relist(last) => {
                    self.ledger.watch_gap_opened(&target, last.parse().unwrap_or(0));
                    resume = None;
                }
                WatchEnd::Cancelled => return,
            }
        }
    }

    fn seen(&self, target: &TargetResource, object: &Value) {
        let name = object.pointer("/metadata/name").and_then(Value::as_str);
        let rv = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        if let (Some(name), Some(rv)) = (name, rv) {
            self.ledger.event(target, name, rv);
        }
    }

    async fn watch(
        &self,
        client: &AdminClient,
        cancel: &CancellationToken,
        target: &TargetResource,
        path: &str,
        rv: &str,
    ) -> WatchEnd {
        if cancel.is_cancelled() {
            return WatchEnd::Cancelled;
        }
        let uri = format!(
            "{}{path}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true",
            self.url
        );
        let Some(req) = Self::request(Method::GET, &uri, "application/json", None) else {
            return WatchEnd::Cancelled;
        };
        let start = self.now();
        let gvr = Some((
            target.group.clone(),
            target.version.clone(),
            target.resource.clone(),
        ));
        let record = |server: usize, answer: Answer, route_404: bool| {
            self.ledger.request(RequestRecord {
                start,
                end: self.now(),
                server,
                kind: RequestKind::Watch,
                gvr: gvr.clone(),
                answer,
                route_404,
            });
        };
        let resp = tokio::select! {
            () = cancel.cancelled() => return WatchEnd::Cancelled,
            resp = tokio::time::timeout(REQUEST_TIMEOUT, client.request(req)) => resp,
        };
        let Ok(Ok(resp)) = resp else {
            record(UNKNOWN_SERVER, Answer::Transport, false);
            return self.retry_later(cancel, rv).await;
        };
        let server = self.server_of(&resp);
        let status = resp.status();
        let mut body = resp.into_body();
        if status != StatusCode::OK {
            let text = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            record(
                server,
                Answer::Status(status.as_u16()),
                status == StatusCode::NOT_FOUND && is_route_404(&text),
            );
            if status == StatusCode::GONE {
                return WatchEnd::Relist(rv.to_owned());
            }
            return self.retry_later(cancel, rv).await;
        }
        record(server, Answer::Status(200), false);
        let mut last = rv.to_owned();
        let mut buffer: Vec<u8> = Vec::new();
        loop {
            let frame = tokio::select! {
                () = cancel.cancelled() => return WatchEnd::Cancelled,
                frame = body.frame() => frame,
            };
            let Some(Ok(frame)) = frame else {
                return WatchEnd::Resume(last);
            };
            let Ok(data) = frame.into_data() else { continue };
            buffer.extend_from_slice(&data);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                let object = &event["object"];
                match event.get("type").and_then(Value::as_str) {
                    Some("ERROR") => {
                        if object.get("code").and_then(Value::as_u64) == Some(410) {
                            return WatchEnd::Relist(last);
                        }
                        return WatchEnd::Resume(last);
                    }
                    Some("BOOKMARK") => {}
                    Some("DELETED") => {
                        self.seen(target, object);
                        if let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) {
                            self.ledger.event(target, name, DELETED);
                        }
                    }
                    Some(_) => self.seen(target, object),
                    None => continue,
                }
                if let Some(rv) = object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                {
                    last = rv.to_owned();
                }
            }
        }
    }

    async fn retry_later(&self, cancel: &CancellationToken, rv: &str) -> WatchEnd {
        tokio::select! {
            () = cancel.cancelled() => WatchEnd::Cancelled,
            () = tokio::time::sleep(Duration::from_millis(50)) => WatchEnd::Resume(rv.to_owned()),
        }
    }

    /// Reads an object back (end-of-run check): `Some(generation label)` if present, `None` if gone,
    /// `Err` if the read itself failed.
    pub(crate) async fn read_back(
        &self,
        cancel: &CancellationToken,
        target: &TargetResource,
        name: &str,
    ) -> Result<Option<u64>, ()> {
        let path = format!("{}/{name}", target.collection_path());
        let client = self.client();
        for _ in 0..20 {
            let reply = self.get(&client, cancel, &path, target).await.ok_or(())?;
            match reply.answer {
                Answer::Status(200) => {
                    let generation = reply
                        .json()
                        .and_then(|o| {
                            o.pointer("/metadata/labels/upgrade-sim~1generation")
                                .and_then(Value::as_str)
                                .and_then(|g| g.parse().ok())
                        })
                        .unwrap_or(0);
                    return Ok(Some(generation));
                }
                Answer::Status(404) if !is_route_404(&reply.body) => return Ok(None),
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        Err(())
    }
}

enum WatchEnd {
    /// Watch again from this resourceVersion.
    Resume(String),
    /// 410 Gone after this resourceVersion: list again.
    Relist(String),
    Cancelled,
}

/// Every listable resource (no subresources) an aggregated discovery document advertises.
fn listable(list: &Value) -> Vec<TargetResource> {
    let Ok(list) = APIGroupDiscoveryList::deserialize(list) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for group in &list.items {
        for version in &group.versions {
            for resource in version
                .resources
                .iter()
                .filter(|r| r.verbs.iter().any(|v| v == "list"))
            {
                found.push(TargetResource {
                    group: group.name().to_owned(),
                    version: version.version.clone(),
                    resource: resource.resource.clone(),
                    kind: resource
                        .response_kind
                        .as_ref()
                        .map(|kind| kind.kind.clone())
                        .unwrap_or_default(),
                    namespaced: resource.scope == "Namespaced",
                });
            }
        }
    }
    found
}

/// A minimal object of `target` named `name`, labelled with its write generation.
fn object(target: &TargetResource, name: &str, generation: u64, rv: Option<String>) -> Value {
    let mut metadata = json!({"name": name, "labels": {"upgrade-sim/generation": generation.to_string()}});
    if target.namespaced {
        metadata["namespace"] = json!("default");
    }
    if let Some(rv) = rv {
        metadata["resourceVersion"] = json!(rv);
    }
    let mut object = json!({"apiVersion": target.api_version(), "kind": target.kind, "metadata": metadata});
    if target.resource == "configmaps" {
        object["data"] = json!({"generation": generation.to_string()});
    } else {
        object["spec"] = target.minimal_spec();
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_404_is_told_from_a_missing_object() {
        assert!(is_route_404(b"404 page not found\n"));
        assert!(is_route_404(
            br#"{"kind":"Status","reason":"NotFound","details":{}}"#
        ));
        assert!(!is_route_404(
            br#"{"kind":"Status","reason":"NotFound","details":{"name":"x","kind":"configmaps"}}"#
        ));
    }

    #[test]
    fn listable_takes_resources_with_the_list_verb() {
        let doc = json!({"items": [{"metadata": {"name": "batch"}, "versions": [{"version": "v1", "resources": [
            {"resource": "jobs", "scope": "Namespaced", "verbs": ["list", "create"], "responseKind": {"kind": "Job"}},
            {"resource": "tokenreviews", "scope": "Cluster", "verbs": ["create"]}
        ]}]}]});
        let found = listable(&doc);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].collection_path(),
            "/apis/batch/v1/namespaces/default/jobs"
        );
        assert_eq!(found[0].kind, "Job");
    }
}
