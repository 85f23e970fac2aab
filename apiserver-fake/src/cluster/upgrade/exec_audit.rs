//! What the `--exec` program's own requests got, read from the servers' audit logs as an operator
//! would on a real cluster (kube-apiserver's `--audit-log-path`, `--audit-policy-file`; the fake's in
//! [`crate::chain::audit`]).
//!
//! With `--exec`, every server of a run logs to `OUT/audit-mvp-on/NAME.log` (`-off`) under
//! [`POLICY`] (`OUT/audit-policy.yaml`). After the run the events are grouped by audit ID (a proxied
//! request is logged by both servers under the caller's audit ID: it is counted once, with the code
//! the client got, and is a 404 for a missing object when either server named the object), placed on
//! the run's timeline, and judged with the simulator's own rule ([`is_false_404`]): a router 404 for
//! a resource that a server up throughout the request served. Requests of the simulator's own
//! clients (user agent [`LOAD_USER_AGENT`]) and its controller manager (`kube-controller-manager/…`) are
//! left out; everything else is counted by user agent.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use super::ledger::{Answer, RequestKind, RequestRecord, ServedByVersion, UpInterval};
use super::report::is_false_404;

/// The user agent of the simulator's own clients (writers, watchers, inventory).
pub(crate) const LOAD_USER_AGENT: &str = "upgrade-sim";

/// The audit policy of an `--exec` run: every request at `Metadata` once it is answered, except the
/// servers' own calls to each other and health checks (the load balancer's `/readyz`).
pub(crate) const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [\"system:apiserver\"]
- level: None
  nonResourceURLs: [\"/readyz*\", \"/healthz*\", \"/livez*\"]
- level: Metadata
";

/// What one user agent's requests got in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct AgentRequests {
    /// Requests (a watch counted once, by its first answer).
    pub requests: usize,
    /// By HTTP code.
    pub by_code: BTreeMap<String, usize>,
    /// Router 404s for a resource some server up throughout the request served.
    pub false_404: usize,
}

/// Where a run's servers write their audit logs.
#[derive(Debug, Clone)]
pub(crate) struct AuditFiles {
    policy: PathBuf,
    dir: PathBuf,
}

impl AuditFiles {
    /// Writes the policy into `out` and makes an empty log directory for the run with the proxy
    /// `mvp` (a previous invocation's logs are removed). Paths are absolute, so they mean the same
    /// inside a container that mounts `out` at its own path.
    pub(crate) fn prepare(out: &Path, mvp: bool) -> anyhow::Result<Self> {
        let out = std::path::absolute(out).with_context(|| format!("{}", out.display()))?;
        let policy = out.join("audit-policy.yaml");
        std::fs::write(&policy, POLICY).with_context(|| format!("failed to write {}", policy.display()))?;
        let dir = out.join(format!("audit-mvp-{}", if mvp { "on" } else { "off" }));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("failed to clear {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("failed to create {}", dir.display()))?;
        Ok(Self { policy, dir })
    }

    /// The audit flags of server `name`.
    pub(crate) fn flags(&self, name: &str) -> [String; 2] {
        [
            format!("--audit-policy-file={}", self.policy.display()),
            format!("--audit-log-path={}", self.log(name).display()),
        ]
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Reads every server's log and counts the requests of every user agent but the simulator's.
    /// `started` is the wall-clock time of the run's clock zero.
    pub(crate) fn judge(
        &self,
        names: &[String],
        started: time::OffsetDateTime,
        up: &[UpInterval],
        served: &ServedByVersion,
    ) -> BTreeMap<String, AgentRequests> {
        let mut calls: HashMap<String, Vec<(usize, Value)>> = HashMap::new();
        for (server, name) in names.iter().enumerate() {
            // A server that never started has no log.
            let text = std::fs::read_to_string(self.log(name)).unwrap_or_default();
            for event in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
                let stage = event["stage"].as_str().unwrap_or_default();
                if stage != "ResponseComplete" && stage != "ResponseStarted" {
                    continue;
                }
                let id = event["auditID"].as_str().unwrap_or_default().to_owned();
                calls.entry(id).or_default().push((server, event));
            }
        }
        let mut agents: BTreeMap<String, AgentRequests> = BTreeMap::new();
        for events in calls.values() {
            let Some(record) = record_of(events, started) else {
                continue;
            };
            let agent = events
                .iter()
                .find_map(|(_, e)| e["userAgent"].as_str())
                .unwrap_or("(none)");
            // The simulator's own clients: its load and its controller manager.
            if agent == LOAD_USER_AGENT
                || agent.starts_with(&format!("{}/", controller_manager::USER_AGENT_PRODUCT))
            {
                continue;
            }
            let counts = agents.entry(agent.to_owned()).or_default();
            counts.requests += 1;
            if let Answer::Status(code) = record.answer {
                *counts.by_code.entry(code.to_string()).or_insert(0) += 1;
            }
            if is_false_404(&record, up, served) {
                counts.false_404 += 1;
            }
        }
        agents
    }
}

/// Seconds from `started` to an audit timestamp.
fn seconds_since(started: time::OffsetDateTime, timestamp: &str) -> Option<f64> {
    let at = time::OffsetDateTime::parse(timestamp, &time::format_description::well_known::Rfc3339).ok()?;
    Some((at - started).as_seconds_f64())
}

/// One request from the events its servers logged under one audit ID: the answer the client got is
/// the one logged last (the server it talked to finishes after any peer it proxied to).
fn record_of(events: &[(usize, Value)], started: time::OffsetDateTime) -> Option<RequestRecord> {
    let (server, front) = events
        .iter()
        .max_by(|(_, a), (_, b)| a["stageTimestamp"].as_str().cmp(&b["stageTimestamp"].as_str()))?;
    let code = u16::try_from(front["responseStatus"]["code"].as_u64()?).ok()?;
    let names_object = events.iter().any(|(_, e)| {
        e["responseStatus"]["details"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
    });
    let object = &front["objectRef"];
    let gvr = object["resource"].as_str().map(|resource| {
        (
            object["apiGroup"].as_str().unwrap_or_default().to_owned(),
            object["apiVersion"].as_str().unwrap_or_default().to_owned(),
            resource.to_owned(),
        )
    });
    let kind = match (&gvr, front["verb"].as_str()) {
        (None, _) => RequestKind::Discovery,
        (Some(_), Some("watch")) => RequestKind::Watch,
        (Some(_), _) => RequestKind::Resource,
    };
    Some(RequestRecord {
        start: seconds_since(started, front["requestReceivedTimestamp"].as_str()?)?,
        end: seconds_since(started, front["stageTimestamp"].as_str()?)?,
        server: *server,
        kind,
        gvr,
        answer: Answer::Status(code),
        route_404: code == 404 && !names_object,
    })
}

/// `report.md`'s lines for one run: a line per user agent.
pub(crate) fn markdown(agents: &BTreeMap<String, AgentRequests>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if agents.is_empty() {
        let _ = writeln!(out, "- `--exec` requests: none in the servers' audit logs");
    }
    for (agent, counts) in agents {
        let codes: Vec<String> = counts.by_code.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        let _ = writeln!(
            out,
            "- `--exec` requests of `{agent}`: {} ({}), **{} false 404s**",
            counts.requests,
            codes.join(", "),
            counts.false_404
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;

    fn event(id: &str, agent: &str, at: &str, code: u16, object_name: Option<&str>) -> Value {
        let mut status = serde_json::json!({"metadata": {}, "code": code});
        if let Some(name) = object_name {
            status["details"] = serde_json::json!({"name": name, "kind": "jobs"});
        }
        serde_json::json!({
            "stage": "ResponseComplete", "auditID": id, "userAgent": agent, "verb": "get",
            "objectRef": {"resource": "jobs", "apiGroup": "batch", "apiVersion": "v1"},
            "requestReceivedTimestamp": format!("2026-01-01T00:00:{at}Z"),
            "stageTimestamp": format!("2026-01-01T00:00:{at}Z"),
            "responseStatus": status,
        })
    }

    #[test]
    fn requests_are_counted_once_per_audit_id_and_judged_on_the_run_timeline() {
        let dir = tempfile::tempdir().unwrap();
        let files = AuditFiles::prepare(dir.path(), true).unwrap();
        let v36: KubeVersion = "1.36".parse().unwrap();
        let v35: KubeVersion = "1.35".parse().unwrap();
        let mut served = ServedByVersion::default();
        served.insert(
            v36,
            &crate::api::catalog::ServedApis::builtin(v36, &Default::default(), &Default::default()).unwrap(),
        );
        let lines = |events: &[Value]| events.iter().map(|e| e.to_string() + "\n").collect::<String>();
        // a: a router 404 (false: b served jobs then), an object 404 proxied to b (named there), the
        // simulator's own request; b: the proxied half.
        std::fs::write(
            files.log("a"),
            lines(&[
                event("1", "kubectl/v1.32", "10.000000", 404, None),
                event("2", "kubectl/v1.32", "11.000000", 404, None),
                event("3", LOAD_USER_AGENT, "12.000000", 404, None),
            ]),
        )
        .unwrap();
        std::fs::write(
            files.log("b"),
            lines(&[event("2", "kubectl/v1.32", "10.900000", 404, Some("x"))]),
        )
        .unwrap();
        let started = time::OffsetDateTime::parse(
            "2026-01-01T00:00:00Z",
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        let up = [
            UpInterval {
                server: 0,
                version: v35,
                from: 0.0,
                until: None,
            },
            UpInterval {
                server: 1,
                version: v36,
                from: 0.0,
                until: None,
            },
        ];
        let agents = files.judge(&["a".to_owned(), "b".to_owned()], started, &up, &served);
        let kubectl = &agents["kubectl/v1.32"];
        assert_eq!(agents.len(), 1, "{agents:?}");
        assert_eq!(kubectl.requests, 2);
        assert_eq!(kubectl.by_code["404"], 2);
        assert_eq!(kubectl.false_404, 1);
    }
}
