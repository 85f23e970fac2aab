//! The filter's decision procedure (docs/mvp-behaviour.md §1.3), as a pure function of the request and the
//! seams of [`crate::resolve`]. No I/O: the outcome is then carried out by the service.

use http::HeaderMap;

use crate::gvr::GroupVersionResource;
use crate::request_info::RequestInfo;
use crate::resolve::{LocalServedResources, PeerChooser, PeerEndpoints, PeerResolver, is_valid_host_port};

/// The loop-prevention header real servers send and check (docs/mvp-behaviour.md §3.1).
pub const PEER_PROXIED_HEADER: &str = "x-kubernetes-peer-proxied";
/// The header name used by the KEP text; honoured on receipt so that no pairing of
/// implementations can loop (docs/decisions.md §3). Never sent.
pub(crate) const REROUTED_HEADER: &str = "x-kubernetes-apiserver-rerouted";

/// Which upstream generation's peer-resolution semantics to apply (docs/decisions.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerResolutionMode {
    /// Upstream alpha (v1.28–v1.32), capability from StorageVersion objects. Quirk kept on
    /// purpose (docs/mvp-behaviour.md §2.1): if *any* capable peer's address cannot be resolved, the request
    /// fails with 503 even when another peer resolved fine.
    StorageVersion,
    /// Upstream v1.33+ (beta in v1.36), capability from discovery. Peers whose address cannot
    /// be resolved are skipped as long as one resolves.
    Discovery,
}

/// Why a request is handled by the local handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocalReason {
    /// Not a resource request (discovery, `/healthz`, ...).
    NonResourceRequest,
    /// Carries the loop-prevention header: it was proxied once already.
    AlreadyProxied,
    /// The peer caches have not finished their initial sync.
    NotSynced,
    /// This server serves the GVR.
    ServedLocally,
    /// No peer serves the GVR either (the local handler usually answers 404).
    NoPeerServes,
}

/// The outcome of the decision procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Hand the request to the local (inner) handler.
    Local(LocalReason),
    /// Proxy the request to `endpoint` (`host:port`) of server `peer_id`.
    Proxy {
        /// The chosen peer's server ID.
        peer_id: String,
        /// The chosen peer's `host:port`.
        endpoint: String,
    },
    /// Peers serve the GVR but their address could not be resolved: 503 JSON Status
    /// "Error getting ip and port info of the remote server while proxying".
    EndpointResolutionFailed {
        /// IDs of the peers that could not be resolved.
        unresolved: Vec<String>,
    },
}

/// Whether a request was already proxied by a peer: the *first* `x-kubernetes-peer-proxied`
/// value is exactly `true` (Go's `Header.Get(..) == "true"`), or the KEP's
/// `X-Kubernetes-APIServer-Rerouted` header's first value is `true`.
pub(crate) fn already_proxied(headers: &HeaderMap) -> bool {
    [PEER_PROXIED_HEADER, REROUTED_HEADER]
        .into_iter()
        .any(|name| headers.get(name).is_some_and(|v| v.as_bytes() == b"true"))
}

/// The seams the decision reads, bundled.
#[derive(Clone, Copy)]
pub(crate) struct DecisionInputs<'a> {
    /// Resolution semantics.
    pub mode: PeerResolutionMode,
    /// What this server serves.
    pub local: &'a dyn LocalServedResources,
    /// Who else serves what.
    pub peers: &'a dyn PeerResolver,
    /// Peer addresses.
    pub endpoints: &'a dyn PeerEndpoints,
    /// Random choice among resolvable peers.
    pub chooser: &'a dyn PeerChooser,
}

/// Runs docs/mvp-behaviour.md §1.3 steps 2–9 for a request whose RequestInfo is known.
pub(crate) fn decide(info: &RequestInfo, headers: &HeaderMap, inputs: DecisionInputs<'_>) -> Decision {
    if !info.is_resource_request {
        return Decision::Local(LocalReason::NonResourceRequest);
    }
    if already_proxied(headers) {
        return Decision::Local(LocalReason::AlreadyProxied);
    }
    if !inputs.peers.has_synced() {
        return Decision::Local(LocalReason::NotSynced);
    }
    let gvr = GroupVersionResource {
        group: info.api_group.clone(),
        version: info.api_version.clone(),
        resource: info.resource.clone(),
    };
    decide_for_gvr(&gvr, inputs)
}

/// Steps 6–9: local capability, capable peers, address resolution, random choice.
pub(crate) fn decide_for_gvr(gvr: &GroupVersionResource, inputs: DecisionInputs<'_>) -> Decision {
    if inputs.local.serves_locally(gvr) {
        return Decision::Local(LocalReason::ServedLocally);
    }
    let peer_ids = inputs.peers.peers_serving(gvr);
    if peer_ids.is_empty() {
        return Decision::Local(LocalReason::NoPeerServes);
    }
    let mut resolved: Vec<(String, String)> = Vec::with_capacity(peer_ids.len());
    let mut unresolved = Vec::new();
    for id in peer_ids {
        match inputs.endpoints.endpoint(&id).filter(|hp| is_valid_host_port(hp)) {
            Some(endpoint) => resolved.push((id, endpoint)),
            None => unresolved.push(id),
        }
    }
    let fail = match inputs.mode {
        // Alpha: any unresolvable peer fails the request (docs/mvp-behaviour.md §2.1, checklist 11).
        PeerResolutionMode::StorageVersion => !unresolved.is_empty(),
        // Beta: only when none resolves (docs/mvp-behaviour.md checklist 12).
        PeerResolutionMode::Discovery => resolved.is_empty(),
    };
    if fail {
        return Decision::EndpointResolutionFailed { unresolved };
    }
    if resolved.is_empty() {
        return Decision::Local(LocalReason::NoPeerServes);
    }
    let index = inputs.chooser.choose(resolved.len()).min(resolved.len() - 1);
    let (peer_id, endpoint) = resolved.swap_remove(index);
    Decision::Proxy { peer_id, endpoint }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Fixture {
        local: Vec<GroupVersionResource>,
        peers: HashMap<GroupVersionResource, Vec<String>>,
        endpoints: HashMap<String, String>,
        synced: bool,
    }

    impl LocalServedResources for Fixture {
        fn serves_locally(&self, gvr: &GroupVersionResource) -> bool {
            self.local.contains(gvr)
        }
    }
    impl PeerResolver for Fixture {
        fn peers_serving(&self, gvr: &GroupVersionResource) -> Vec<String> {
            self.peers.get(gvr).cloned().unwrap_or_default()
        }
        fn has_synced(&self) -> bool {
            self.synced
        }
    }
    impl PeerEndpoints for Fixture {
        fn endpoint(&self, id: &str) -> Option<String> {
            self.endpoints.get(id).cloned()
        }
    }

    fn jobs() -> GroupVersionResource {
        GroupVersionResource::new("batch", "v1", "jobs")
    }

    fn fixture() -> Fixture {
        Fixture {
            local: vec![GroupVersionResource::new("", "v1", "pods")],
            peers: HashMap::from([(jobs(), vec!["b".to_owned()])]),
            endpoints: HashMap::from([("b".to_owned(), "127.0.0.2:6443".to_owned())]),
            synced: true,
        }
    }

    fn run(
        f: &Fixture,
        mode: PeerResolutionMode,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
    ) -> Decision {
        let info = RequestInfo::from_parts(&method.parse().unwrap(), &url.parse().unwrap()).unwrap();
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let first = |_: usize| 0usize;
        decide(
            &info,
            &h,
            DecisionInputs {
                mode,
                local: f,
                peers: f,
                endpoints: f,
                chooser: &first,
            },
        )
    }

    fn proxy_to_b() -> Decision {
        Decision::Proxy {
            peer_id: "b".into(),
            endpoint: "127.0.0.2:6443".into(),
        }
    }

    const BOTH: [PeerResolutionMode; 2] = [PeerResolutionMode::StorageVersion, PeerResolutionMode::Discovery];

    #[test]
    fn non_resource_requests_are_local() {
        let f = fixture();
        for url in [
            "/foo/bar/baz",
            "/healthz",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/batch",
            "/apis/batch/v1",
        ] {
            assert_eq!(
                run(&f, PeerResolutionMode::Discovery, "GET", url, &[]),
                Decision::Local(LocalReason::NonResourceRequest),
                "{url}"
            );
        }
    }

    #[test]
    fn every_verb_and_subresource_routes_by_parent_gvr() {
        let f = fixture();
        for (method, url) in [
            ("GET", "/apis/batch/v1/namespaces/default/jobs"),
            ("GET", "/apis/batch/v1/namespaces/default/jobs?watch=1"),
            ("GET", "/apis/batch/v1/watch/namespaces/default/jobs"),
            ("GET", "/apis/batch/v1/proxy/namespaces/default/jobs/j"),
            ("POST", "/apis/batch/v1/namespaces/default/jobs"),
            ("PUT", "/apis/batch/v1/namespaces/default/jobs/j/status"),
            ("PATCH", "/apis/batch/v1/namespaces/default/jobs/j"),
            ("DELETE", "/apis/batch/v1/namespaces/default/jobs/j"),
            ("DELETE", "/apis/batch/v1/namespaces/default/jobs"),
        ] {
            for mode in BOTH {
                assert_eq!(
                    run(&f, mode, method, url, &[]),
                    proxy_to_b(),
                    "{mode:?} {method} {url}"
                );
            }
        }
    }

    #[test]
    fn loop_prevention_headers_keep_request_local() {
        let f = fixture();
        let url = "/apis/batch/v1/jobs";
        let local = Decision::Local(LocalReason::AlreadyProxied);
        assert_eq!(
            run(
                &f,
                PeerResolutionMode::Discovery,
                "GET",
                url,
                &[("x-kubernetes-peer-proxied", "true")]
            ),
            local
        );
        assert_eq!(
            run(
                &f,
                PeerResolutionMode::Discovery,
                "GET",
                url,
                &[("X-Kubernetes-APIServer-Rerouted", "true")]
            ),
            local
        );
        // Only the first value counts, and it must be exactly "true" (docs/mvp-behaviour.md §3.1).
        for headers in [
            &[
                ("x-kubernetes-peer-proxied", "TRUE"),
                ("x-kubernetes-peer-proxied", "true"),
            ][..],
            &[("x-kubernetes-peer-proxied", "1")][..],
            &[("x-kubernetes-peer-proxied", "")][..],
        ] {
            assert_eq!(
                run(&f, PeerResolutionMode::Discovery, "GET", url, headers),
                proxy_to_b(),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn unsynced_caches_keep_request_local() {
        let mut f = fixture();
        f.synced = false;
        assert_eq!(
            run(
                &f,
                PeerResolutionMode::Discovery,
                "GET",
                "/apis/batch/v1/jobs",
                &[]
            ),
            Decision::Local(LocalReason::NotSynced)
        );
    }

    #[test]
    fn locally_served_and_unserved_gvrs_are_local() {
        let f = fixture();
        for mode in BOTH {
            assert_eq!(
                run(&f, mode, "GET", "/api/v1/pods", &[]),
                Decision::Local(LocalReason::ServedLocally)
            );
            assert_eq!(
                run(&f, mode, "GET", "/apis/foo/v1/bars", &[]),
                Decision::Local(LocalReason::NoPeerServes)
            );
        }
    }

    #[test]
    fn peer_without_endpoint_is_503_in_both_modes() {
        let mut f = fixture();
        f.endpoints.clear();
        for mode in BOTH {
            assert_eq!(
                run(&f, mode, "GET", "/apis/batch/v1/jobs", &[]),
                Decision::EndpointResolutionFailed {
                    unresolved: vec!["b".into()]
                }
            );
        }
        // An address without a port is unresolvable too ("missing port in address").
        f.endpoints.insert("b".into(), "127.0.0.2".into());
        assert!(matches!(
            run(
                &f,
                PeerResolutionMode::Discovery,
                "GET",
                "/apis/batch/v1/jobs",
                &[]
            ),
            Decision::EndpointResolutionFailed { .. }
        ));
    }

    #[test]
    fn one_unresolvable_peer_fails_alpha_but_not_beta() {
        let mut f = fixture();
        f.peers.insert(jobs(), vec!["a".into(), "b".into()]);
        assert_eq!(
            run(
                &f,
                PeerResolutionMode::StorageVersion,
                "GET",
                "/apis/batch/v1/jobs",
                &[]
            ),
            Decision::EndpointResolutionFailed {
                unresolved: vec!["a".into()]
            }
        );
        assert_eq!(
            run(
                &f,
                PeerResolutionMode::Discovery,
                "GET",
                "/apis/batch/v1/jobs",
                &[]
            ),
            proxy_to_b()
        );
    }

    #[test]
    fn chooser_picks_among_resolvable_peers() {
        let mut f = fixture();
        f.peers.insert(jobs(), vec!["b".into(), "c".into()]);
        f.endpoints.insert("c".into(), "127.0.0.3:6443".into());
        let info =
            RequestInfo::from_parts(&http::Method::GET, &"/apis/batch/v1/jobs".parse().unwrap()).unwrap();
        for (pick, want) in [(0usize, "c"), (1, "b"), (7, "b")] {
            let chooser = move |n: usize| {
                assert_eq!(n, 2);
                pick
            };
            // Order the candidates deterministically for the assertion: "c" first.
            f.peers.insert(jobs(), vec!["c".into(), "b".into()]);
            let inputs = DecisionInputs {
                mode: PeerResolutionMode::Discovery,
                local: &f,
                peers: &f,
                endpoints: &f,
                chooser: &chooser,
            };
            match decide(&info, &HeaderMap::new(), inputs) {
                Decision::Proxy { peer_id, .. } => assert_eq!(peer_id, want, "pick {pick}"),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}
