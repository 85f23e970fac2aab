//! The filter's Prometheus metrics (docs/mvp-behaviour.md §6), registered in a caller-provided registry
//! with the `prometheus` feature. Without it the layer records nothing and no `prometheus` type is in
//! the crate's API: [`MvpMetrics`] then has no value at all.
//!
//! Help texts are upstream's, with the `[ALPHA] ` prefix component-base adds to alpha metrics.

#[cfg(feature = "prometheus")]
use prometheus::{IntCounterVec, Opts, Registry};

use crate::gvr::GroupVersionResource;

/// Which upstream generation of the metrics to expose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsGeneration {
    /// v1.28–v1.35: only `apiserver_rerouted_request_total{code}`.
    Alpha,
    /// v1.36: `apiserver_rerouted_request_total{code,group,version,resource}`,
    /// `apiserver_peer_proxy_errors_total{type,group,version,resource}` and
    /// `apiserver_peer_discovery_sync_errors_total{type}`.
    V1_36,
}

/// `apiserver_peer_proxy_errors_total` type: a peer's address could not be resolved.
pub(crate) const PROXY_ERROR_ENDPOINT_RESOLUTION: &str = "endpoint_resolution";
/// `apiserver_peer_proxy_errors_total` type: the proxy transport could not be built.
pub(crate) const PROXY_ERROR_TRANSPORT: &str = "proxy_transport";
/// `apiserver_peer_discovery_sync_errors_total` type: a peer's host:port was unresolvable.
pub(crate) const DISCOVERY_ERROR_HOSTPORT_RESOLUTION: &str = "hostport_resolution";
/// `apiserver_peer_discovery_sync_errors_total` type: fetching a peer's discovery failed.
pub(crate) const DISCOVERY_ERROR_FETCH: &str = "fetch_discovery";

#[cfg(feature = "prometheus")]
const REROUTED_HELP_ALPHA: &str = "[ALPHA] Total number of requests that were proxied to a peer kube apiserver \
because the local apiserver was not capable of serving it";
#[cfg(feature = "prometheus")]
const REROUTED_HELP_V1_36: &str = "[ALPHA] Total number of requests that were proxied to a peer kube-apiserver \
because the local apiserver was not capable of serving it, broken down by 'group', 'version', and 'resource' \
indicating the GVR of the request. If all three are empty (\"\"), the request is a discovery request.";
#[cfg(feature = "prometheus")]
const PROXY_ERRORS_HELP: &str =
    "[ALPHA] Total number of errors encountered while proxying requests to a peer kube apiserver";
#[cfg(feature = "prometheus")]
const DISCOVERY_SYNC_ERRORS_HELP: &str = "[ALPHA] Total number of errors encountered while syncing discovery information from a peer kube-apiserver";

/// Handles to the MVP counters. Cheap to clone (counters are reference-counted). Made by
/// `MvpMetrics::register` (feature `prometheus`); without the feature the type has no value, so a
/// layer never records.
#[derive(Clone, Debug)]
pub struct MvpMetrics {
    counters: Counters,
}

#[cfg(not(feature = "prometheus"))]
type Counters = std::convert::Infallible;

#[cfg(feature = "prometheus")]
#[derive(Clone, Debug)]
struct Counters {
    generation: MetricsGeneration,
    rerouted: IntCounterVec,
    proxy_errors: Option<IntCounterVec>,
    discovery_sync_errors: Option<IntCounterVec>,
}

#[cfg(feature = "prometheus")]
impl MvpMetrics {
    /// Creates the counters of `generation` and registers them in `registry`.
    pub fn register(registry: &Registry, generation: MetricsGeneration) -> Result<Self, prometheus::Error> {
        let counters = Counters::new(generation)?;
        registry.register(Box::new(counters.rerouted.clone()))?;
        if let Some(c) = &counters.proxy_errors {
            registry.register(Box::new(c.clone()))?;
        }
        if let Some(c) = &counters.discovery_sync_errors {
            registry.register(Box::new(c.clone()))?;
        }
        Ok(Self { counters })
    }
}

#[cfg(feature = "prometheus")]
impl Counters {
    fn new(generation: MetricsGeneration) -> Result<Self, prometheus::Error> {
        let opts = |name: &str, help: &str| Opts::new(name, help).subsystem("apiserver");
        Ok(match generation {
            MetricsGeneration::Alpha => Self {
                generation,
                rerouted: IntCounterVec::new(opts("rerouted_request_total", REROUTED_HELP_ALPHA), &["code"])?,
                proxy_errors: None,
                discovery_sync_errors: None,
            },
            MetricsGeneration::V1_36 => Self {
                generation,
                rerouted: IntCounterVec::new(
                    opts("rerouted_request_total", REROUTED_HELP_V1_36),
                    &["code", "group", "version", "resource"],
                )?,
                proxy_errors: Some(IntCounterVec::new(
                    opts("peer_proxy_errors_total", PROXY_ERRORS_HELP),
                    &["type", "group", "version", "resource"],
                )?),
                discovery_sync_errors: Some(IntCounterVec::new(
                    opts("peer_discovery_sync_errors_total", DISCOVERY_SYNC_ERRORS_HELP),
                    &["type"],
                )?),
            },
        })
    }
}

impl MvpMetrics {
    /// Counts one proxied request answered with `code` (the peer's status, or 503 on a
    /// transport error). `gvr` is `None` for discovery fetches (empty labels).
    pub(crate) fn inc_rerouted(&self, code: u16, gvr: Option<&GroupVersionResource>) {
        #[cfg(feature = "prometheus")]
        {
            let c = &self.counters;
            let code = code.to_string();
            match c.generation {
                MetricsGeneration::Alpha => c.rerouted.with_label_values(&[code.as_str()]).inc(),
                MetricsGeneration::V1_36 => {
                    let (g, v, r) = labels(gvr);
                    c.rerouted.with_label_values(&[code.as_str(), g, v, r]).inc();
                }
            }
        }
        #[cfg(not(feature = "prometheus"))]
        match (self.counters, code, gvr) {}
    }

    /// Counts a proxy error of type `kind` ([`PROXY_ERROR_ENDPOINT_RESOLUTION`],
    /// [`PROXY_ERROR_TRANSPORT`]); a no-op for [`MetricsGeneration::Alpha`].
    pub(crate) fn inc_proxy_error(&self, kind: &str, gvr: Option<&GroupVersionResource>) {
        #[cfg(feature = "prometheus")]
        if let Some(c) = &self.counters.proxy_errors {
            let (g, v, r) = labels(gvr);
            c.with_label_values(&[kind, g, v, r]).inc();
        }
        #[cfg(not(feature = "prometheus"))]
        match (self.counters, kind, gvr) {}
    }

    /// Counts a peer discovery sync error of type `kind` (`DISCOVERY_ERROR_*`); a no-op for
    /// [`MetricsGeneration::Alpha`].
    pub(crate) fn inc_discovery_sync_error(&self, kind: &str) {
        #[cfg(feature = "prometheus")]
        if let Some(c) = &self.counters.discovery_sync_errors {
            c.with_label_values(&[kind]).inc();
        }
        #[cfg(not(feature = "prometheus"))]
        match (self.counters, kind) {}
    }
}

#[cfg(feature = "prometheus")]
fn labels(gvr: Option<&GroupVersionResource>) -> (&str, &str, &str) {
    gvr.map_or(("", "", ""), |g| {
        (g.group.as_str(), g.version.as_str(), g.resource.as_str())
    })
}

#[cfg(all(test, feature = "prometheus"))]
pub(crate) mod tests {
    use super::*;
    use prometheus::Encoder;

    /// The value of a counter with exactly these labels, 0 if absent.
    pub(crate) fn counter(registry: &Registry, name: &str, labels: &[(&str, &str)]) -> u64 {
        registry
            .gather()
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric().iter())
            .find(|m| {
                m.get_label().len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| m.get_label().iter().any(|l| l.name() == *k && l.value() == *v))
            })
            .map_or(0, |m| m.get_counter().get_value() as u64)
    }

    #[test]
    fn v1_36_metrics_have_upstream_names_labels_and_help() {
        let registry = Registry::new();
        let m = MvpMetrics::register(&registry, MetricsGeneration::V1_36).unwrap();
        let jobs = GroupVersionResource::new("batch", "v1", "jobs");
        m.inc_rerouted(503, Some(&jobs));
        m.inc_rerouted(200, None);
        m.inc_proxy_error(PROXY_ERROR_ENDPOINT_RESOLUTION, Some(&jobs));
        m.inc_discovery_sync_error(DISCOVERY_ERROR_FETCH);
        let labels = [
            ("code", "503"),
            ("group", "batch"),
            ("version", "v1"),
            ("resource", "jobs"),
        ];
        assert_eq!(counter(&registry, "apiserver_rerouted_request_total", &labels), 1);
        let discovery = [("code", "200"), ("group", ""), ("version", ""), ("resource", "")];
        assert_eq!(
            counter(&registry, "apiserver_rerouted_request_total", &discovery),
            1
        );
        let err = [
            ("type", "endpoint_resolution"),
            ("group", "batch"),
            ("version", "v1"),
            ("resource", "jobs"),
        ];
        assert_eq!(counter(&registry, "apiserver_peer_proxy_errors_total", &err), 1);
        assert_eq!(
            counter(
                &registry,
                "apiserver_peer_discovery_sync_errors_total",
                &[("type", "fetch_discovery")]
            ),
            1
        );
        let mut text = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut text)
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains(
            "# HELP apiserver_peer_proxy_errors_total [ALPHA] Total number of errors encountered while \
             proxying requests to a peer kube apiserver\n# TYPE apiserver_peer_proxy_errors_total counter"
        ));
    }

    #[test]
    fn alpha_metrics_have_code_label_only() {
        let registry = Registry::new();
        let m = MvpMetrics::register(&registry, MetricsGeneration::Alpha).unwrap();
        m.inc_rerouted(503, Some(&GroupVersionResource::new("batch", "v1", "jobs")));
        m.inc_proxy_error(PROXY_ERROR_TRANSPORT, None);
        assert_eq!(
            counter(&registry, "apiserver_rerouted_request_total", &[("code", "503")]),
            1
        );
        let names: Vec<String> = registry.gather().iter().map(|f| f.name().to_owned()).collect();
        assert_eq!(names, vec!["apiserver_rerouted_request_total"]);
    }

    #[test]
    fn registering_twice_in_one_registry_fails() {
        let registry = Registry::new();
        MvpMetrics::register(&registry, MetricsGeneration::V1_36).unwrap();
        assert!(MvpMetrics::register(&registry, MetricsGeneration::V1_36).is_err());
    }
}
