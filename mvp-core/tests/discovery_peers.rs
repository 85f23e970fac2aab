//! Discovery mode driven as an embedding server drives it: identity leases, address changes and
//! extension group versions fed into `DiscoveryPeers`, real peers over mTLS on 127.0.0.1.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use mvp_core::{
    DiscoveryConfig, DiscoveryPeers, GroupVersionResource, Lease, MvpLayer, PeerEndpoints, PeerRun,
    PeerTransport, UserInfo,
};
use serde_json::json;
use support::{Peer, Pki, full, start_peer};
use tower::{Layer, ServiceExt};

/// Addresses a test can change, as a server's peer endpoint records change.
#[derive(Default)]
struct Endpoints(RwLock<HashMap<String, String>>);

impl Endpoints {
    fn set(&self, id: &str, address: &str) {
        self.0.write().unwrap().insert(id.to_owned(), address.to_owned());
    }

    fn remove(&self, id: &str) {
        self.0.write().unwrap().remove(id);
    }
}

impl PeerEndpoints for Endpoints {
    fn endpoint(&self, id: &str) -> Option<String> {
        self.0.read().unwrap().get(id).cloned()
    }
}

/// A peer serving `group`/v1 `widgets` in its discovery and answering every other request with
/// its name; it counts discovery fetches.
async fn peer(pki: &Pki, name: &'static str, group: &'static str) -> (Peer, Arc<AtomicUsize>) {
    let fetches = Arc::new(AtomicUsize::new(0));
    let counted = fetches.clone();
    let peer = start_peer(pki, pki.serving(), &[b"h2", b"http/1.1"], move |p| {
        let counted = counted.clone();
        async move {
            let doc = match p.req.uri().path() {
                "/api" => json!({"kind": "APIGroupDiscoveryList", "items": []}),
                "/apis" => json!({"kind": "APIGroupDiscoveryList", "items": [{"metadata": {"name": group},
                    "versions": [{"version": "v1", "resources": [{"resource": "widgets", "verbs": ["get"]}]}]}]}),
                _ => return Response::new(full(format!("served by {name}"))),
            };
            counted.fetch_add(1, Ordering::SeqCst);
            Response::new(full(doc.to_string()))
        }
    })
    .await;
    (peer, fetches)
}

fn lease(name: &str, holder: &str) -> Lease {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "kube-system",
        "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600}}))
    .unwrap()
}

/// Who answers `GET /apis/<group>/v1/widgets` through the layer: a peer's name, or "local".
async fn answer(layer: &MvpLayer, group: &str) -> String {
    let inner = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("local"))))
    });
    let mut req = Request::get(format!("/apis/{group}/v1/widgets"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    req.extensions_mut().insert(UserInfo::new("alice"));
    let response = layer.layer(inner).oneshot(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

/// The shared harness's [`kube_mvp_testing::eventually`] over a yes/no check, for at most 5 s.
async fn eventually(what: &str, check: impl AsyncFn() -> bool) {
    let check = &check;
    kube_mvp_testing::eventually(what, Duration::from_secs(5), move || async move {
        check().await.then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

fn known(peers: &DiscoveryPeers) -> Vec<PeerRun> {
    peers
        .known_peers()
        .borrow()
        .as_deref()
        .cloned()
        .unwrap_or_default()
}

fn run(id: &str, holder: &str) -> PeerRun {
    PeerRun {
        server_id: id.to_owned(),
        holder_identity: holder.to_owned(),
    }
}

#[tokio::test]
async fn lease_events_address_changes_and_exclusion_drive_what_is_proxied() {
    /// How long a group version stays excluded after this server stops serving it.
    const GRACE: Duration = Duration::from_millis(1500);
    let pki = Pki::new();
    let (b, b_fetches) = peer(&pki, "b", "b.example.com").await;
    let (c, c_fetches) = peer(&pki, "c", "c.example.com").await;
    let endpoints = Arc::new(Endpoints::default());
    endpoints.set("b", &b.addr.to_string());
    let transport = PeerTransport::new(&pki.peer_tls("front-proxy-client")).unwrap();
    let config = DiscoveryConfig::new(|| HashSet::from([GroupVersionResource::new("", "v1", "pods")]))
        .exclusion_grace(GRACE)
        .departed_peer_grace(Duration::from_millis(300));
    let (layer, peers) = MvpLayer::builder("a", endpoints.clone(), transport)
        .chooser(|_: usize| 0)
        .discovery(config);
    let driver = tokio::spawn(peers.run());

    // No lease list yet: nothing synced, every request local. (The test runtime is single-threaded;
    // `yield_now` runs every other task that is ready first, so the driver has run: it took its local
    // snapshot and, with no list, has nothing to sync.)
    tokio::task::yield_now().await;
    assert!(!peers.has_synced() && !peers.is_ready());
    assert_eq!(answer(&layer, "b.example.com").await, "local");

    // The informer lists a's own lease and b's: b is asked, once per path.
    peers.set_identity_leases(&[lease("a", "a_1"), lease("b", "b_1")]);
    eventually("b's discovery is known", async || peers.is_ready()).await;
    assert_eq!(answer(&layer, "b.example.com").await, "served by b");
    assert_eq!(b_fetches.load(Ordering::SeqCst), 2, "/api and /apis");
    assert_eq!(known(&peers), [run("b", "b_1")]);

    // A renewal changes neither names nor holders: no sync. A sync it started would be under way once
    // the driver has run (`yield_now` runs it first when it is woken), and would finish before the
    // restart's below: the fetch count after that one shows it never started.
    peers.set_identity_leases(&[lease("a", "a_1"), lease("b", "b_1")]);
    tokio::task::yield_now().await;
    assert_eq!(b_fetches.load(Ordering::SeqCst), 2);

    // b restarted (new holder): synced again, and only for it (no sync of the renewal before it).
    peers.set_identity_leases(&[lease("a", "a_1"), lease("b", "b_2")]);
    // (The test runtime is single-threaded: the sync has not run yet.) The new run is not
    // reached until it is asked, though its server ID was.
    assert!(!peers.is_ready(), "b's new run not asked yet");
    eventually("b's new run is known", async || {
        known(&peers) == [run("b", "b_2")]
    })
    .await;
    assert_eq!(
        b_fetches.load(Ordering::SeqCst),
        4,
        "one sync since b_1's: the restart's"
    );

    // c has a lease but no address yet: unreachable, so it holds neither readiness nor requests.
    peers.set_identity_leases(&[lease("a", "a_1"), lease("b", "b_2"), lease("c", "c_1")]);
    // (A sync that could not address c failed: it is retried with backoff, b asked each time.)
    eventually("the lease list is synced", async || {
        b_fetches.load(Ordering::SeqCst) >= 6
    })
    .await;
    assert!(peers.is_ready());
    assert_eq!(answer(&layer, "c.example.com").await, "local");
    // Its address is published: asked at once, not after a backoff.
    endpoints.set("c", &c.addr.to_string());
    peers.peer_endpoints_changed();
    eventually("c is known", async || {
        answer(&layer, "c.example.com").await == "served by c"
    })
    .await;
    assert!(c_fetches.load(Ordering::SeqCst) >= 2);
    assert_eq!(known(&peers), [run("b", "b_2"), run("c", "c_1")]);

    // A CRD of this server now serves b.example.com/v1: that group version stays local ...
    peers.set_extension_group_versions([("b.example.com".to_owned(), "v1".to_owned())]);
    eventually("b.example.com is excluded", async || {
        answer(&layer, "b.example.com").await == "local"
    })
    .await;
    assert_eq!(answer(&layer, "c.example.com").await, "served by c");
    // ... and for the grace period after the CRD is deleted, then is proxied again: polled all along,
    // it is first proxied once the grace has passed, so it stayed local for the whole grace.
    let deleted = tokio::time::Instant::now();
    peers.set_extension_group_versions([]);
    assert_eq!(answer(&layer, "b.example.com").await, "local");
    eventually("the grace period ends", async || {
        answer(&layer, "b.example.com").await == "served by b"
    })
    .await;
    assert!(
        deleted.elapsed() >= GRACE,
        "proxied {:?} after the deletion, within the grace",
        deleted.elapsed()
    );

    // c's lease is deleted: after the departed-peer grace its group is no longer proxied.
    peers.set_identity_leases(&[lease("a", "a_1"), lease("b", "b_2")]);
    eventually("c is forgotten", async || {
        answer(&layer, "c.example.com").await == "local"
    })
    .await;
    driver.abort();
}

/// A lease change and an address change that wake the sync together: the lease change is never
/// lost (before the fix, the address branch won half the races and a deleted peer stayed proxied).
#[tokio::test]
async fn a_lease_deleted_while_addresses_change_is_not_lost() {
    let pki = Pki::new();
    let (b, _) = peer(&pki, "b", "b.example.com").await;
    let endpoints = Arc::new(Endpoints::default());
    endpoints.set("b", &b.addr.to_string());
    let transport = PeerTransport::new(&pki.peer_tls("front-proxy-client")).unwrap();
    // Forgotten at once, as upstream: the deletion must be seen by the very next attempt.
    let config = DiscoveryConfig::new(HashSet::new).departed_peer_grace(Duration::ZERO);
    let (layer, peers) = MvpLayer::builder("a", endpoints.clone(), transport).discovery(config);
    let driver = tokio::spawn(peers.run());
    for run in 1..=8 {
        peers.set_identity_leases(&[lease("b", &format!("b_{run}"))]);
        eventually("b is proxied to", async || {
            answer(&layer, "b.example.com").await == "served by b"
        })
        .await;
        // Both in one go, as an informer and an address refresh can land together.
        peers.set_identity_leases(&[]);
        peers.peer_endpoints_changed();
        eventually("b's deletion is seen", async || {
            answer(&layer, "b.example.com").await == "local"
        })
        .await;
    }
    driver.abort();
}

/// The status and body of `GET /apis/<group>/v1/widgets` through the layer.
async fn outcome(layer: &MvpLayer, group: &str) -> (u16, String) {
    let inner = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        let mut response = Response::new(Full::new(Bytes::from("404 page not found\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        Ok::<_, std::convert::Infallible>(response)
    });
    let mut req = Request::get(format!("/apis/{group}/v1/widgets"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    req.extensions_mut().insert(UserInfo::new("alice"));
    let response = layer.layer(inner).oneshot(req).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A peer that crashes and comes back as kube-apiserver 1.35+ does (its new run deletes the
/// stale lease, then creates its own, before its address is published): what it served stays
/// known throughout, so its group is a 503 while it cannot be reached and never the local 404;
/// its new run replaces the entry once fetched, and is known only then. Deleted for good, it is
/// forgotten after the grace.
#[tokio::test]
async fn a_restarting_peer_stays_known_until_its_new_run_is_fetched() {
    let pki = Pki::new();
    let (b1, _) = peer(&pki, "b", "b.example.com").await;
    let endpoints = Arc::new(Endpoints::default());
    endpoints.set("b", &b1.addr.to_string());
    let transport = PeerTransport::new(&pki.peer_tls("front-proxy-client")).unwrap();
    let config = DiscoveryConfig::new(HashSet::new).departed_peer_grace(Duration::from_millis(800));
    let (layer, peers) = MvpLayer::builder("a", endpoints.clone(), transport).discovery(config);
    let driver = tokio::spawn(peers.run());
    peers.set_identity_leases(&[lease("b", "b_1")]);
    eventually("b's first run is known", async || {
        known(&peers) == [run("b", "b_1")]
    })
    .await;
    assert_eq!(outcome(&layer, "b.example.com").await.0, 200);

    // b crashes: its address refuses connections.
    drop(b1);
    eventually("the dead b is a 503", async || {
        outcome(&layer, "b.example.com").await.0 == 503
    })
    .await;

    // Its new run deletes the stale lease: the attempt that follows keeps b for the grace.
    peers.set_identity_leases(&[]);
    eventually("the deletion is synced", async || known(&peers).is_empty()).await;
    assert_eq!(outcome(&layer, "b.example.com").await.0, 503, "not a false 404");

    // ... and creates its own, its address not yet moved: asked, unreachable, kept.
    peers.set_identity_leases(&[lease("b", "b_2")]);
    eventually("b's new run is asked", async || peers.is_ready()).await;
    assert!(
        known(&peers).is_empty(),
        "the new run is not known before it is fetched"
    );
    assert_eq!(outcome(&layer, "b.example.com").await.0, 503, "not a false 404");
    // Its old address record lapses: the 503 Status of an unresolvable peer, still no 404, and
    // for longer than the grace (b's lease exists).
    endpoints.remove("b");
    peers.peer_endpoints_changed();
    let lapsed = tokio::time::Instant::now();
    while lapsed.elapsed() < Duration::from_millis(1200) {
        let (status, body) = outcome(&layer, "b.example.com").await;
        assert_eq!(status, 503, "{body}");
        tokio::task::yield_now().await;
    }

    // The new run publishes its address: fetched at once, known, served.
    let (b2, _) = peer(&pki, "b", "b.example.com").await;
    endpoints.set("b", &b2.addr.to_string());
    peers.peer_endpoints_changed();
    eventually("b's new run is known", async || {
        known(&peers) == [run("b", "b_2")]
    })
    .await;
    assert_eq!(
        outcome(&layer, "b.example.com").await,
        (200, "served by b".to_owned())
    );

    // Stopped for good: its lease is deleted and stays deleted. Kept for the grace, then the
    // local 404.
    peers.set_identity_leases(&[]);
    eventually("the deletion is synced", async || known(&peers).is_empty()).await;
    eventually("b is forgotten after the grace", async || {
        outcome(&layer, "b.example.com").await.0 == 404
    })
    .await;
    driver.abort();
}
