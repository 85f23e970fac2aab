//! The server's Prometheus registry and `/metrics` exposition (text format 0.0.4, as kube-apiserver).

use prometheus::{Encoder, IntCounterVec, Opts, Registry, TextEncoder};

/// Metrics of one server. The registry is per server so that several fakes in one process do not mix
/// their counters; `mvp-core` registers its metrics into the same registry.
#[derive(Debug, Clone)]
pub(crate) struct ServerMetrics {
    registry: Registry,
    requests: IntCounterVec,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerMetrics {
    /// A fresh registry with the fake's own request counter.
    pub(crate) fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "apiserver_request_total",
                "Counter of apiserver requests broken out for each verb, dry run value, group, version, \
                 resource, scope, component, and HTTP response code.",
            ),
            &["verb", "group", "version", "resource", "code"],
        )
        .unwrap_or_else(|e| unreachable!("static metric definition is valid: {e}"));
        // Registering a fresh collector in a fresh registry cannot collide.
        let _ = registry.register(Box::new(requests.clone()));
        Self { registry, requests }
    }

    /// The registry, for other components (the MVP filter) to register into.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts one served request.
    pub(crate) fn observe_request(&self, verb: &str, group: &str, version: &str, resource: &str, code: u16) {
        self.requests
            .with_label_values(&[verb, group, version, resource, &code.to_string()])
            .inc();
    }

    /// The registry in Prometheus text format.
    pub(crate) fn render(&self) -> String {
        let mut buffer = Vec::new();
        // Encoding gathered families into a Vec cannot fail for well-formed metrics.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut buffer)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_in_text_format() {
        let metrics = ServerMetrics::new();
        metrics.observe_request("list", "batch", "v1", "jobs", 200);
        metrics.observe_request("list", "batch", "v1", "jobs", 200);
        let text = metrics.render();
        assert!(text.contains("# TYPE apiserver_request_total counter"), "{text}");
        assert!(
            text.contains(
                "apiserver_request_total{code=\"200\",group=\"batch\",resource=\"jobs\",verb=\"list\",version=\"v1\"} 2"
            ),
            "{text}"
        );
    }
}
