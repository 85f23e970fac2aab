//! Judging a run from its [`Ledger`](super::ledger::Ledger) and writing `report.json` and
//! `report.md`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;

use super::harm::{HarmCounts, HarmWorkload};
use super::ledger::{
    Answer, DeliveredEvents, RequestKind, RequestRecord, ServedByVersion, UpInterval, WriteRecord,
};

/// `report.json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// `--from`.
    pub from: String,
    /// `--to`.
    pub to: String,
    /// `--servers`.
    pub servers: usize,
    /// `--seed`.
    pub seed: u64,
    /// `--crash`.
    pub crash: bool,
    /// What the writers and watchers use: the resources only one of the two versions serves, plus
    /// ConfigMaps (the inventory client lists everything discovery advertises).
    pub resources_under_test: Vec<String>,
    /// One entry per run, proxy on first.
    pub runs: Vec<RunReport>,
}

/// What clients saw in one run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunReport {
    /// Whether the proxy's gate was on.
    pub mvp: bool,
    /// `discovery` or `storage-version` (what the proxy would use).
    pub peer_resolution_mode: String,
    /// Requests sent (watches counted once, by their first answer).
    pub requests: usize,
    /// Answers by HTTP code; `transport` for no answer.
    pub by_code: BTreeMap<String, usize>,
    /// 404s for a resource some server that was up throughout the request served.
    pub false_404: usize,
    /// `false_404` by `resource.group/version`.
    pub false_404_by_resource: BTreeMap<String, usize>,
    /// `false_404` by the server that answered.
    pub false_404_by_server: BTreeMap<String, usize>,
    /// 503 answers.
    pub unavailable_503: usize,
    /// Writes answered 2xx.
    pub acknowledged_writes: usize,
    /// Acknowledged writes not visible at the end (an object missing, or still there after its delete).
    pub lost_writes: usize,
    /// Acknowledged writes of a watched resource that no watch delivered.
    pub missed_watch_events: usize,
    /// Latency of proxied and local requests.
    pub latency_ms: Latency,
    /// Per phase of the schedule.
    pub phases: Vec<PhaseReport>,
    /// `--exec`: how the user's program ended (`exit status: 0`, or killed at the end of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_status: Option<String>,
    /// `--exec`: what the program's own requests got, by user agent, from the servers' audit logs
    /// (see [`super::exec_audit`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_requests: Option<BTreeMap<String, super::exec_audit::AgentRequests>>,
    /// What the controller manager destroyed or left behind (see [`super::harm`]).
    #[serde(flatten)]
    pub harm: HarmCounts,
    /// What the harm workload gave it to act on.
    pub harm_workload: HarmWorkload,
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Latency {
    /// Requests a server answered through a peer.
    pub proxied_p50: f64,
    /// See `proxied_p50`.
    pub proxied_p99: f64,
    /// Requests a server answered itself.
    pub local_p50: f64,
    /// See `local_p50`.
    pub local_p99: f64,
}

/// One phase of the schedule.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PhaseReport {
    /// `steady at 1.35`, `upgrade a`, …, `final at 1.36`.
    pub name: String,
    /// Seconds since the run started.
    pub start_s: f64,
    /// See `start_s`.
    pub end_s: f64,
    /// Requests that started in it.
    pub requests: usize,
    /// False 404s among them.
    pub false_404: usize,
    /// 503s among them.
    pub unavailable_503: usize,
}

/// A phase's name and time span.
#[derive(Debug, Clone)]
pub(crate) struct Phase {
    /// Name.
    pub name: String,
    /// Seconds since the run started.
    pub start: f64,
    /// See `start`.
    pub end: f64,
}

/// Everything a run left to judge.
pub(crate) struct RunRecord<'a> {
    /// Proxy on.
    pub mvp: bool,
    /// Resolution mode name.
    pub mode: &'a str,
    /// Requests.
    pub requests: &'a [RequestRecord],
    /// Acknowledged writes.
    pub writes: &'a [WriteRecord],
    /// Delivered watch events.
    pub events: &'a DeliveredEvents,
    /// When each server was up.
    pub up: &'a [UpInterval],
    /// Per resource label, the resourceVersion ranges no watch was open for.
    pub unwatched: &'a HashMap<String, Vec<(u64, u64)>>,
    /// What each version serves.
    pub served: &'a ServedByVersion,
    /// The schedule.
    pub phases: &'a [Phase],
    /// The end-of-run read of each written object: `Some(label)` present, `None` gone, missing key:
    /// could not be read.
    pub final_state: &'a HashMap<(String, String), Option<u64>>,
    /// Server names by index.
    pub names: &'a [String],
}

/// Whether `record` is a false 404: a router 404 for a resource that a server up throughout the
/// request served.
pub(crate) fn is_false_404(record: &RequestRecord, up: &[UpInterval], served: &ServedByVersion) -> bool {
    let Some(gvr) = &record.gvr else {
        return false;
    };
    record.route_404
        && up.iter().any(|i| {
            i.from <= record.start
                && i.until.is_none_or(|until| until >= record.end)
                && served.serves(i.version, gvr)
        })
}

/// Whether the server that answered `record` does not serve its resource itself (so answered it
/// through a peer).
fn is_proxied(record: &RequestRecord, up: &[UpInterval], served: &ServedByVersion) -> bool {
    let Some(gvr) = &record.gvr else {
        return false;
    };
    up.iter()
        .rfind(|i| i.server == record.server && i.from <= record.start)
        .is_some_and(|i| !served.serves(i.version, gvr))
}

/// Objects whose end state matches neither their last acknowledged write nor any write sent after
/// it that may have been applied (sent without an answer); objects with no acknowledged write, or
/// that could not be read back, are not judged.
fn lost_writes(writes: &[WriteRecord], final_state: &HashMap<(String, String), Option<u64>>) -> usize {
    let mut by_object: HashMap<(String, String), Vec<&WriteRecord>> = HashMap::new();
    for write in writes {
        by_object
            .entry((write.target.label(), write.name.clone()))
            .or_default()
            .push(write);
    }
    let state = |w: &WriteRecord| (!w.deleted).then_some(w.generation);
    by_object
        .iter()
        .filter(|(key, writes)| {
            let Some(last_acked) = writes.iter().rposition(|w| w.acknowledged) else {
                return false;
            };
            let Some(end) = final_state.get(*key) else {
                return false;
            };
            !writes[last_acked..].iter().any(|w| state(w) == *end)
        })
        .count()
}

/// Acknowledged writes no watch delivered, leaving out those made while no watch was open (a write
/// before the watcher's first list, or between a 410 Gone and the relist, shows in a list, not as an
/// event). A delete answered without a resourceVersion is placed just after the object's previous
/// write.
pub(crate) fn missed_watch_events(
    writes: &[WriteRecord],
    events: &DeliveredEvents,
    unwatched: &HashMap<String, Vec<(u64, u64)>>,
) -> usize {
    let mut previous: HashMap<(String, &str), u64> = HashMap::new();
    let mut missed = 0;
    for write in writes.iter().filter(|w| w.acknowledged) {
        let label = write.target.label();
        let position = match write.resource_version.parse::<u64>() {
            Ok(rv) => rv,
            Err(_) => previous
                .get(&(label.clone(), write.name.as_str()))
                .map_or(0, |rv| rv + 1),
        };
        previous.insert((label.clone(), &write.name), position);
        let gaps = unwatched.get(&label).map(Vec::as_slice).unwrap_or_default();
        let excused = gaps
            .iter()
            .any(|(after, upto)| position > *after && position <= *upto);
        if !excused && !events.contains(&(label, write.name.clone(), write.resource_version.clone())) {
            missed += 1;
        }
    }
    missed
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let ms = sorted[rank.clamp(1, sorted.len()) - 1] * 1000.0;
    (ms * 1000.0).round() / 1000.0
}

impl RunReport {
    /// Judges one run.
    pub(crate) fn judge(run: &RunRecord<'_>) -> Self {
        let mut by_code = BTreeMap::new();
        let mut false_404_by_resource = BTreeMap::new();
        let mut false_404_by_server = BTreeMap::new();
        let (mut proxied, mut local) = (Vec::new(), Vec::new());
        let mut false_flags = Vec::with_capacity(run.requests.len());
        for record in run.requests {
            let code = match record.answer {
                Answer::Status(code) => code.to_string(),
                Answer::Transport => "transport".to_owned(),
            };
            *by_code.entry(code).or_insert(0) += 1;
            let false_404 = is_false_404(record, run.up, run.served);
            false_flags.push(false_404);
            if false_404 {
                if let Some((g, v, r)) = &record.gvr {
                    let label = if g.is_empty() {
                        format!("{r}/{v}")
                    } else {
                        format!("{r}.{g}/{v}")
                    };
                    *false_404_by_resource.entry(label).or_insert(0) += 1;
                }
                let server = run.names.get(record.server).cloned().unwrap_or_default();
                *false_404_by_server.entry(server).or_insert(0) += 1;
            }
            let answered = matches!(record.answer, Answer::Status(code) if code < 500 && code != 404);
            if record.kind == RequestKind::Resource && answered {
                let seconds = record.end - record.start;
                // Without the proxy nothing is proxied (a request that started against a server's
                // old run and was answered by its new one would look proxied by the version rule).
                if run.mvp && is_proxied(record, run.up, run.served) {
                    proxied.push(seconds);
                } else {
                    local.push(seconds);
                }
            }
        }
        proxied.sort_by(f64::total_cmp);
        local.sort_by(f64::total_cmp);

        let lost_writes = lost_writes(run.writes, run.final_state);
        let missed_watch_events = missed_watch_events(run.writes, run.events, run.unwatched);
        let phases = run
            .phases
            .iter()
            .map(|phase| {
                let inside: Vec<usize> = (0..run.requests.len())
                    .filter(|&i| run.requests[i].start >= phase.start && run.requests[i].start < phase.end)
                    .collect();
                PhaseReport {
                    name: phase.name.clone(),
                    start_s: (phase.start * 1000.0).round() / 1000.0,
                    end_s: (phase.end * 1000.0).round() / 1000.0,
                    requests: inside.len(),
                    false_404: inside.iter().filter(|&&i| false_flags[i]).count(),
                    unavailable_503: inside
                        .iter()
                        .filter(|&&i| run.requests[i].answer == Answer::Status(503))
                        .count(),
                }
            })
            .collect();
        Self {
            mvp: run.mvp,
            peer_resolution_mode: run.mode.to_owned(),
            requests: run.requests.len(),
            false_404: false_flags.iter().filter(|f| **f).count(),
            unavailable_503: by_code.get("503").copied().unwrap_or(0),
            by_code,
            false_404_by_resource,
            false_404_by_server,
            acknowledged_writes: run.writes.iter().filter(|w| w.acknowledged).count(),
            lost_writes,
            missed_watch_events,
            latency_ms: Latency {
                proxied_p50: percentile(&proxied, 50.0),
                proxied_p99: percentile(&proxied, 99.0),
                local_p50: percentile(&local, 50.0),
                local_p99: percentile(&local, 99.0),
            },
            phases,
            exec_status: None,
            exec_requests: None,
            harm: HarmCounts::default(),
            harm_workload: HarmWorkload::default(),
        }
    }
}

impl Report {
    /// `report.md`: the runs side by side, then one line per phase.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Rolling upgrade {} → {}, {} servers{}, seed {}\n",
            self.from,
            self.to,
            self.servers,
            if self.crash { ", crashing each server" } else { "" },
            self.seed
        );
        let _ = writeln!(
            out,
            "Written and watched: {}.\n",
            self.resources_under_test.join(", ")
        );
        if let Some(run) = self.runs.first()
            && !run.harm_workload.owner_resources.is_empty()
        {
            let _ = writeln!(
                out,
                "Owners of the garbage collector's dependents: {}; a controller manager runs through the load balancer.\n",
                run.harm_workload.owner_resources.join(", ")
            );
        }
        self.comparison_table(&mut out);
        for run in &self.runs {
            run_section(&mut out, run);
        }
        out
    }

    /// The table of the runs side by side: requests, errors, harm, latency.
    fn comparison_table(&self, out: &mut String) {
        let header: Vec<String> = self
            .runs
            .iter()
            .map(|r| {
                format!(
                    "MVP {} ({})",
                    if r.mvp { "on" } else { "off" },
                    r.peer_resolution_mode
                )
            })
            .collect();
        let _ = writeln!(out, "| | {} |", header.join(" | "));
        let _ = writeln!(out, "|---|{}", "---:|".repeat(self.runs.len()));
        let row = |out: &mut String, name: &str, f: &dyn Fn(&RunReport) -> String| {
            let cells: Vec<String> = self.runs.iter().map(f).collect();
            let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
        };
        row(out, "requests", &|r| r.requests.to_string());
        row(out, "**false 404s**", &|r| format!("**{}**", r.false_404));
        row(out, "503s", &|r| r.unavailable_503.to_string());
        row(out, "other errors", &|r| {
            let other: Vec<String> = r
                .by_code
                .iter()
                .filter(|(code, _)| {
                    code.as_str() != "404" && code.as_str() != "503" && !code.starts_with('2')
                })
                .map(|(code, n)| format!("{code}: {n}"))
                .collect::<Vec<_>>();
            if other.is_empty() {
                "none".to_owned()
            } else {
                other.join(", ")
            }
        });
        row(out, "acknowledged writes", &|r| r.acknowledged_writes.to_string());
        row(out, "lost writes", &|r| r.lost_writes.to_string());
        row(out, "missed watch events", &|r| r.missed_watch_events.to_string());
        row(out, "**dependents wrongly deleted**", &|r| {
            format!("**{}**", r.harm.dependents_wrongly_deleted)
        });
        row(out, "namespaces stuck (> 30 s)", &|r| {
            r.harm.namespaces_stuck.to_string()
        });
        row(out, "namespace objects leaked", &|r| {
            r.harm.namespace_objects_leaked.to_string()
        });
        row(out, "harm workload: owners / dependents / namespaces", &|r| {
            let w = &r.harm_workload;
            format!("{} / {} / {}", w.owners, w.dependents, w.namespaces_deleted)
        });
        if self.runs.iter().any(|r| r.exec_status.is_some()) {
            row(out, "`--exec` program", &|r| {
                r.exec_status.clone().unwrap_or_default()
            });
        }
        row(out, "proxied p50 / p99 (ms)", &|r| {
            format!(
                "{:.2} / {:.2}",
                r.latency_ms.proxied_p50, r.latency_ms.proxied_p99
            )
        });
        row(out, "local p50 / p99 (ms)", &|r| {
            format!("{:.2} / {:.2}", r.latency_ms.local_p50, r.latency_ms.local_p99)
        });
    }
}

/// One run's section of `report.md`: its phases, where its false 404s went, what `--exec`'s program got.
fn run_section(out: &mut String, run: &RunReport) {
    let _ = writeln!(out, "\n## MVP {}\n", if run.mvp { "on" } else { "off" });
    for phase in &run.phases {
        let _ = writeln!(
            out,
            "- {} ({:.1}–{:.1} s): {} requests, {} false 404s, {} 503s",
            phase.name, phase.start_s, phase.end_s, phase.requests, phase.false_404, phase.unavailable_503
        );
    }
    if !run.false_404_by_resource.is_empty() {
        let list: Vec<String> = run
            .false_404_by_resource
            .iter()
            .map(|(r, n)| format!("{r}: {n}"))
            .collect();
        let _ = writeln!(out, "- false 404s by resource: {}", list.join(", "));
        let list: Vec<String> = run
            .false_404_by_server
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        let _ = writeln!(out, "- false 404s by server: {}", list.join(", "));
    }
    if let Some(agents) = &run.exec_requests {
        out.push_str(&super::exec_audit::markdown(agents));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;

    fn record(start: f64, end: f64, server: usize, route_404: bool) -> RequestRecord {
        RequestRecord {
            start,
            end,
            server,
            kind: RequestKind::Resource,
            gvr: Some(("g".into(), "v1".into(), "things".into())),
            answer: Answer::Status(if route_404 { 404 } else { 200 }),
            route_404,
        }
    }

    #[test]
    fn a_404_is_false_only_while_a_server_serving_the_resource_is_up_throughout() {
        let (old, new) = (KubeVersion::new(1, 35).unwrap(), KubeVersion::new(1, 36).unwrap());
        let mut served = ServedByVersion::default();
        served.add(new, ("g", "v1", "things"));
        let up = [
            UpInterval {
                server: 0,
                version: old,
                from: 0.0,
                until: None,
            },
            UpInterval {
                server: 1,
                version: new,
                from: 2.0,
                until: Some(5.0),
            },
        ];
        assert!(
            !is_false_404(&record(1.0, 1.1, 0, true), &up, &served),
            "nobody served it yet"
        );
        assert!(is_false_404(&record(3.0, 3.1, 0, true), &up, &served));
        assert!(
            !is_false_404(&record(4.95, 5.05, 0, true), &up, &served),
            "its server went away meanwhile"
        );
        assert!(!is_false_404(&record(3.0, 3.1, 0, false), &up, &served), "a 200");
        assert!(is_proxied(&record(3.0, 3.1, 0, false), &up, &served));
        assert!(!is_proxied(&record(3.0, 3.1, 1, false), &up, &served));
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<f64> = (1..=100).map(|i| f64::from(i) / 1000.0).collect();
        assert_eq!(percentile(&sorted, 50.0), 50.0);
        assert_eq!(percentile(&sorted, 99.0), 99.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
    }

    fn write(name: &str, rv: &str, deleted: bool, generation: u64, acknowledged: bool) -> WriteRecord {
        WriteRecord {
            target: crate::cluster::upgrade::plan::TargetResource {
                group: String::new(),
                version: "v1".into(),
                resource: "configmaps".into(),
                kind: "ConfigMap".into(),
                namespaced: true,
            },
            name: name.into(),
            resource_version: rv.into(),
            deleted,
            generation,
            acknowledged,
        }
    }

    #[test]
    fn a_write_is_lost_only_if_the_end_state_matches_no_write_that_may_have_been_applied() {
        let key = |n: &str| ("configmaps/v1".to_owned(), n.to_owned());
        let writes = [
            write("kept", "5", false, 1, true),
            write("kept", "", false, 2, false), // no answer: may or may not have been applied
            write("gone", "7", false, 1, true),
            write("gone", "DELETED", true, 0, true),
            write("never", "", false, 1, false),
        ];
        let mut end = HashMap::from([(key("kept"), Some(1)), (key("gone"), None), (key("never"), None)]);
        assert_eq!(lost_writes(&writes, &end), 0);
        end.insert(key("kept"), Some(2));
        assert_eq!(
            lost_writes(&writes, &end),
            0,
            "the unanswered update went through"
        );
        end.insert(key("kept"), None);
        end.insert(key("gone"), Some(1));
        assert_eq!(lost_writes(&writes, &end), 2);
    }

    #[test]
    fn writes_made_while_no_watch_was_open_are_not_missed_events() {
        let writes = [
            write("a", "3", false, 1, true),
            write("a", "8", false, 2, true),
            write("a", "DELETED", true, 0, true),
            write("b", "12", false, 1, true),
        ];
        let unwatched = HashMap::from([("configmaps/v1".to_owned(), vec![(0, 4), (10, 12)])]);
        let label = |n: &str, rv: &str| ("configmaps/v1".to_owned(), n.to_owned(), rv.to_owned());
        let mut events = DeliveredEvents::from([label("a", "8")]);
        assert_eq!(
            missed_watch_events(&writes, &events, &unwatched),
            1,
            "the delete of a"
        );
        events.insert(label("a", "DELETED"));
        assert_eq!(missed_watch_events(&writes, &events, &unwatched), 0);
        events.remove(&label("a", "8"));
        assert_eq!(missed_watch_events(&writes, &events, &unwatched), 1);
    }
}
