//! `Mvp<S>`: the Mixed Version Proxy filter as a tower [`Service`].
//!
//! Per request (docs/mvp-behaviour.md §1.3): take the [`RequestInfo`] from the extensions or derive it (a
//! failure is upstream's 500), decide ([`crate::decision::decide`]), then either call the
//! inner service, answer the 503 Status, or proxy to the chosen peer. The service's error
//! type is the inner service's: proxy failures become responses, never transport errors.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use crate::body::{BoxError, MvpBody};
use crate::decision::{Decision, DecisionInputs, decide};
use crate::future::ResponseFuture;
use crate::layer::{MvpLayer, Shared};
use crate::metrics::{PROXY_ERROR_ENDPOINT_RESOLUTION, PROXY_ERROR_TRANSPORT};
use crate::proxy::proxy_to_peer;
use crate::request_info::RequestInfo;
use crate::status::{endpoint_resolution_failed, internal_error};
use crate::user::UserInfo;

/// The Mixed Version Proxy filter wrapped around `S` (see [`MvpLayer`]).
pub struct Mvp<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: Clone> Clone for Mvp<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Mvp<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mvp")
            .field("inner", &self.inner)
            .field("mode", &self.shared.mode)
            .finish()
    }
}

impl<S> Mvp<S> {
    /// Wraps `inner` with the filter configured by `layer`.
    pub fn new(inner: S, layer: &MvpLayer) -> Self {
        Self {
            inner,
            shared: layer.shared().clone(),
        }
    }

    /// The wrapped (local) service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped (local) service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the local service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Mvp<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ReqBody: Body<Data = Bytes> + Send + 'static,
    ReqBody::Error: Into<BoxError>,
{
    type Response = Response<MvpBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let inputs = DecisionInputs {
            mode: shared.mode,
            local: &*shared.local,
            peers: &*shared.peers,
            endpoints: &*shared.endpoints,
            chooser: &*shared.chooser,
        };
        let mut computed = None;
        let decision = match req.extensions().get::<RequestInfo>() {
            Some(info) => decide(info, req.headers(), inputs),
            None => match RequestInfo::from_request(&req) {
                Ok(info) => {
                    let decision = decide(&info, req.headers(), inputs);
                    computed = Some(info);
                    decision
                }
                Err(err) => {
                    // What upstream's WithRequestInfo filter answers.
                    let uri = req.uri().path_and_query().map_or("", |pq| pq.as_str());
                    let resp = internal_error(uri, &format!("failed to create RequestInfo: {err}"));
                    return ResponseFuture::ready(resp.map(MvpBody::full));
                }
            },
        };
        if let Some(info) = computed {
            // Later handlers (routing, authorization) can reuse it.
            req.extensions_mut().insert(info);
        }
        match decision {
            Decision::Local(_) => ResponseFuture::inner(self.inner.call(req)),
            Decision::EndpointResolutionFailed { unresolved } => {
                let gvr = req
                    .extensions()
                    .get::<RequestInfo>()
                    .and_then(RequestInfo::group_version_resource);
                tracing::error!(
                    ?unresolved,
                    ?gvr,
                    "error finding serviceable-by apiservers for the requested resource"
                );
                if let Some(m) = &shared.metrics {
                    m.inc_proxy_error(PROXY_ERROR_ENDPOINT_RESOLUTION, gvr.as_ref());
                }
                ResponseFuture::ready(endpoint_resolution_failed().map(MvpBody::full))
            }
            Decision::Proxy { peer_id, endpoint } => {
                let gvr = req
                    .extensions()
                    .get::<RequestInfo>()
                    .and_then(RequestInfo::group_version_resource);
                let Some(user) = req.extensions().get::<UserInfo>().cloned() else {
                    // Upstream cannot build the auth round tripper without a user, logs, and
                    // writes nothing: Go then sends an empty 200 (docs/mvp-behaviour.md §4).
                    tracing::error!(
                        "failed to build proxy round tripper: no user details present in request"
                    );
                    if let Some(m) = &shared.metrics {
                        m.inc_proxy_error(PROXY_ERROR_TRANSPORT, gvr.as_ref());
                    }
                    return ResponseFuture::ready(Response::new(MvpBody::full(Default::default())));
                };
                tracing::debug!(peer_id, endpoint, ?gvr, "proxying request to peer apiserver");
                let transport = shared.transport.clone();
                let metrics = shared.metrics.clone();
                ResponseFuture::proxy(Box::pin(async move {
                    proxy_to_peer(&transport, metrics.as_ref(), req, &endpoint, &user, gvr.as_ref()).await
                }))
            }
        }
    }
}

#[cfg(all(test, feature = "prometheus"))]
mod tests {
    //! Mirrors upstream `peerproxy_handler_test.go`: RequestInfo → user → MVP filter → "OK".
    use super::*;
    use crate::decision::PeerResolutionMode;
    use crate::gvr::GroupVersionResource;
    use crate::metrics::tests::counter;
    use crate::metrics::{MetricsGeneration, MvpMetrics};
    use crate::peer_tls::PeerTlsConfig;
    use crate::resolve::{LocalServedResources, PeerEndpoints, PeerResolver};
    use crate::test_pki::TestPki;
    use crate::transport::PeerTransport;
    use http_body_util::{BodyExt, Full};
    use std::collections::HashMap;
    use std::convert::Infallible;
    use tower::ServiceExt;

    #[derive(Default)]
    struct Cluster {
        local: Vec<GroupVersionResource>,
        peers: HashMap<GroupVersionResource, Vec<String>>,
        endpoints: HashMap<String, String>,
        unsynced: bool,
    }

    impl LocalServedResources for Cluster {
        fn serves_locally(&self, gvr: &GroupVersionResource) -> bool {
            self.local.contains(gvr)
        }
    }
    impl PeerResolver for Cluster {
        fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String> {
            self.peers.get(gvr).cloned().unwrap_or_default()
        }
        fn has_synced(&self) -> bool {
            !self.unsynced
        }
    }
    impl PeerEndpoints for Cluster {
        fn endpoint(&self, id: &str) -> Option<String> {
            self.endpoints.get(id).cloned()
        }
    }

    fn transport() -> PeerTransport {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let pki = TestPki::new();
        let (client_cert_chain, client_key) = pki.front_proxy_client("misty");
        let tls = PeerTlsConfig {
            peer_ca: vec![pki.cluster_ca.cert_der()],
            client_cert_chain,
            client_key,
        };
        PeerTransport::new(&tls).unwrap()
    }

    fn closed_port() -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    }

    fn jobs() -> GroupVersionResource {
        GroupVersionResource::new("batch", "v1", "jobs")
    }

    struct Harness {
        registry: prometheus::Registry,
        layer: MvpLayer,
    }

    fn harness(cluster: Cluster, mode: PeerResolutionMode) -> Harness {
        let registry = prometheus::Registry::new();
        let metrics = MvpMetrics::register(&registry, MetricsGeneration::V1_36).unwrap();
        let cluster = Arc::new(cluster);
        let layer = MvpLayer::builder("a", cluster.clone(), transport())
            .metrics(metrics)
            .chooser(|_: usize| 0)
            .resolver(mode, cluster);
        Harness { registry, layer }
    }

    /// Sends a request through `layer` in front of an inner service answering "OK" (and the
    /// verb of the RequestInfo it saw).
    async fn send(layer: &MvpLayer, req: Request<Full<Bytes>>) -> (u16, HeaderMapSnapshot, String) {
        let inner = tower::service_fn(|req: Request<Full<Bytes>>| async move {
            let verb = req
                .extensions()
                .get::<RequestInfo>()
                .map(|i| i.verb.clone())
                .unwrap_or_default();
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!("OK {verb}")))))
        });
        let svc = tower::Layer::layer(layer, inner);
        let resp = svc.oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8(body.to_vec()).unwrap())
    }

    type HeaderMapSnapshot = Vec<(String, String)>;

    fn request(path: &str) -> Request<Full<Bytes>> {
        let mut req = Request::get(path).body(Full::default()).unwrap();
        req.extensions_mut().insert(UserInfo::new("alice"));
        req
    }

    fn rerouted(h: &Harness, code: &str) -> u64 {
        let labels = [
            ("code", code),
            ("group", "batch"),
            ("version", "v1"),
            ("resource", "jobs"),
        ];
        counter(&h.registry, "apiserver_rerouted_request_total", &labels)
    }

    fn endpoint_errors(h: &Harness) -> u64 {
        let labels = [
            ("type", "endpoint_resolution"),
            ("group", "batch"),
            ("version", "v1"),
            ("resource", "jobs"),
        ];
        counter(&h.registry, "apiserver_peer_proxy_errors_total", &labels)
    }

    fn peer_b_unreachable() -> Cluster {
        Cluster {
            peers: HashMap::from([(jobs(), vec!["b".to_owned()])]),
            endpoints: HashMap::from([("b".to_owned(), closed_port())]),
            ..Cluster::default()
        }
    }

    #[tokio::test]
    async fn non_resource_request_is_served_locally() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        assert_eq!(send(&h.layer, request("/foo/bar/baz")).await.2, "OK get");
    }

    #[tokio::test]
    async fn already_proxied_request_is_served_locally() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        let mut req = request("/apis/batch/v1/jobs");
        req.headers_mut()
            .insert(PEER_PROXIED, http::HeaderValue::from_static("true"));
        assert_eq!(send(&h.layer, req).await.2, "OK list");
        assert_eq!(rerouted(&h, "503"), 0);
    }
    const PEER_PROXIED: &str = crate::decision::PEER_PROXIED_HEADER;

    #[tokio::test]
    async fn unsynced_caches_serve_locally() {
        let mut cluster = peer_b_unreachable();
        cluster.unsynced = true;
        let h = harness(cluster, PeerResolutionMode::Discovery);
        assert_eq!(send(&h.layer, request("/apis/batch/v1/jobs")).await.0, 200);
    }

    #[tokio::test]
    async fn locally_served_gvr_is_served_locally() {
        let mut cluster = peer_b_unreachable();
        cluster.local.push(jobs());
        let h = harness(cluster, PeerResolutionMode::Discovery);
        assert_eq!(
            send(&h.layer, request("/apis/batch/v1/namespaces/default/jobs/j"))
                .await
                .2,
            "OK get"
        );
    }

    #[tokio::test]
    async fn gvr_served_by_no_peer_falls_through_locally() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        assert_eq!(
            send(&h.layer, request("/apis/apps/v1/deployments")).await.2,
            "OK list"
        );
    }

    #[tokio::test]
    async fn peer_without_endpoint_is_503_status_without_rerouted_count() {
        let mut cluster = peer_b_unreachable();
        cluster.endpoints.clear();
        let h = harness(cluster, PeerResolutionMode::Discovery);
        let (status, headers, body) = send(&h.layer, request("/apis/batch/v1/jobs")).await;
        assert_eq!(status, 503);
        assert!(headers.contains(&("content-type".into(), "application/json".into())));
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["message"], crate::status::ENDPOINT_RESOLUTION_MESSAGE);
        assert_eq!(status["reason"], "ServiceUnavailable");
        assert!(status.get("details").is_none());
        assert_eq!(rerouted(&h, "503"), 0);
        assert_eq!(endpoint_errors(&h), 1);
    }

    #[tokio::test]
    async fn unreachable_peer_is_503_text_and_counted() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        let (status, headers, body) = send(&h.layer, request("/apis/batch/v1/jobs")).await;
        assert_eq!(status, 503);
        assert!(headers.contains(&("content-type".into(), "text/plain; charset=utf-8".into())));
        assert!(headers.contains(&("x-content-type-options".into(), "nosniff".into())));
        assert!(body.ends_with('\n') && !body.starts_with('{'), "{body}");
        assert_eq!(rerouted(&h, "503"), 1);
    }

    #[tokio::test]
    async fn one_peer_without_endpoint_and_one_unreachable() {
        let two_peers = || {
            let mut cluster = peer_b_unreachable();
            cluster.peers.insert(jobs(), vec!["a".to_owned(), "b".to_owned()]);
            cluster
        };
        // Beta: the resolvable peer is tried (and fails at transport level).
        let h = harness(two_peers(), PeerResolutionMode::Discovery);
        let (status, _, body) = send(&h.layer, request("/apis/batch/v1/jobs")).await;
        assert_eq!(status, 503);
        assert!(!body.starts_with('{'));
        assert_eq!(rerouted(&h, "503"), 1);
        // Alpha: the unresolvable peer alone fails the request with the JSON Status.
        let h = harness(two_peers(), PeerResolutionMode::StorageVersion);
        let (status, _, body) = send(&h.layer, request("/apis/batch/v1/jobs")).await;
        assert_eq!(status, 503);
        assert!(body.starts_with('{'));
        assert_eq!(rerouted(&h, "503"), 0);
    }

    #[tokio::test]
    async fn underivable_request_info_is_upstream_500() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        let (status, _, body) = send(&h.layer, request("/api/v1/watch")).await;
        assert_eq!(status, 500);
        assert_eq!(
            body,
            "Internal Server Error: &#34;/api/v1/watch&#34;: failed to create RequestInfo: \
             unable to determine kind and namespace from url, /api/v1/watch\n"
        );
    }

    #[tokio::test]
    async fn request_info_from_extensions_wins() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        let mut req = request("/apis/batch/v1/jobs");
        let mut info = RequestInfo::from_request(&req).unwrap();
        info.resource = "cronjobs".into();
        info.verb = "custom".into();
        req.extensions_mut().insert(info);
        assert_eq!(send(&h.layer, req).await.2, "OK custom");
    }

    #[tokio::test]
    async fn missing_user_writes_empty_200_like_upstream() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        let req = Request::get("/apis/batch/v1/jobs").body(Full::default()).unwrap();
        assert_eq!(send(&h.layer, req).await, (200, vec![], String::new()));
        let labels = [
            ("type", "proxy_transport"),
            ("group", "batch"),
            ("version", "v1"),
            ("resource", "jobs"),
        ];
        assert_eq!(
            counter(&h.registry, "apiserver_peer_proxy_errors_total", &labels),
            1
        );
    }

    #[tokio::test]
    async fn readiness_and_errors_of_the_inner_service_pass_through() {
        let h = harness(peer_b_unreachable(), PeerResolutionMode::Discovery);
        let (mut svc, mut handle) =
            tower_test::mock::spawn_layer::<Request<Full<Bytes>>, Response<Full<Bytes>>, _>(h.layer);
        handle.allow(0);
        assert!(
            svc.poll_ready().is_pending(),
            "not ready while the inner service is not"
        );
        handle.allow(1);
        assert!(svc.poll_ready().is_ready());
        let fut = svc.call(request("/api/v1/pods"));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.extensions().get::<RequestInfo>().unwrap().verb, "list");
        send.send_error("inner failed");
        let err = fut.await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "inner failed",
            "the inner error is returned as is"
        );
    }
}
