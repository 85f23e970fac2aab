//! `apiserver-fake upgrade`: the rolling-upgrade simulator. It rolls a cluster of fakes from one
//! Kubernetes minor to the next, one server at a time, under a client load sent through the
//! cluster's load balancer (the embedded one: TCP, round robin per connection, `/readyz` health
//! checks), and reports what the clients suffered, once with the Mixed Version Proxy and once
//! without (same seed, same schedule).
//!
//! The schedule: start every server at `--from`, wait until ready, dwell; then for each server in
//! turn take it out of the load balancer (maintenance), stop it, or kill it with `--crash` (left in
//! the balancer, whose health checks notice), start it at `--to`, wait until ready, put it back,
//! dwell; a final dwell with every server at `--to`.
//!
//! As a CI gate the command fails (after writing its report) when a run with the proxy on shows a
//! false 404, a lost write or a missed watch event. Its progress is a line redrawn on a terminal, and
//! plain lines (one per phase) otherwise.
//!
//! What is counted (see `report::RunReport`): false 404s (a 404 from the router for a resource that
//! a server up throughout the request served), 503s and other errors, acknowledged writes not visible
//! at the end, acknowledged writes no watch delivered, and latency of proxied and local requests.

pub(crate) mod exec_audit;
pub(crate) mod fleet;
pub(crate) mod harm;
pub(crate) mod ledger;
pub(crate) mod load;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod timeline;

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::fleet::Fleet;
use self::ledger::{Ledger, Recorded, ServedByVersion};
use self::load::Load;
pub(crate) use self::plan::Plan;
pub use self::plan::UpgradeArgs;
use self::plan::{UpgradeRun, UpgradeStore};
use self::report::{Phase, Report, RunRecord, RunReport};
use crate::api::catalog::KubeVersion;
use crate::cluster::MemberSpec;
use crate::cluster::load_balancer::embedded::EmbeddedBalancer;
use crate::cluster::load_balancer::{HealthCheck, LB_IP};
use crate::cluster::process::EtcdBackend;
use crate::server::config::PeerResolutionModeFlag;

/// How long watches get, after the writers stop, to deliver the events of the last writes.
const WATCH_SETTLE: Duration = Duration::from_secs(3);

/// Everything one run left behind.
struct RunOutcome {
    mvp: bool,
    recorded: Recorded,
    phases: Vec<Phase>,
    final_state: HashMap<(String, String), Option<u64>>,
    names: Vec<String>,
    length: f64,
    served: ServedByVersion,
    exec_status: Option<String>,
    exec_requests: Option<std::collections::BTreeMap<String, exec_audit::AgentRequests>>,
    harm: harm::HarmOutcome,
}

/// The `upgrade` subcommand: both runs, then `report.json`, `report.md` and `timeline.svg` in `--out`.
pub async fn run_upgrade(args: UpgradeArgs) -> anyhow::Result<()> {
    let plan = Plan::new(args)?;
    let out = plan.args.out.clone();
    std::fs::create_dir_all(&out).with_context(|| format!("failed to create {}", out.display()))?;
    // A redrawn line on a terminal; plain lines in a CI log (an indicatif bar draws nothing there).
    let plain = !std::io::stderr().is_terminal();
    let progress = if plain {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr())
    };
    progress.enable_steady_tick(Duration::from_millis(200));
    let mut outcomes = Vec::new();
    for &mvp in &plan.runs {
        outcomes.push(run_once(&plan, mvp, &progress, plain).await?);
    }
    progress.finish_and_clear();

    let mode = match plan.args.peer_resolution_mode {
        PeerResolutionModeFlag::Discovery => "discovery",
        PeerResolutionModeFlag::StorageVersion => "storage-version",
    };
    let runs: Vec<RunReport> = outcomes
        .iter()
        .map(|o| {
            let mut report = RunReport::judge(&RunRecord {
                mvp: o.mvp,
                mode,
                requests: &o.recorded.requests,
                writes: &o.recorded.writes,
                events: &o.recorded.events,
                up: &o.recorded.up,
                unwatched: &o.recorded.unwatched,
                served: &o.served,
                phases: &o.phases,
                final_state: &o.final_state,
                names: &o.names,
            });
            report.exec_status = o.exec_status.clone();
            report.exec_requests = o.exec_requests.clone();
            report.harm = o.harm.counts.clone();
            report.harm_workload = o.harm.workload.clone();
            report
        })
        .collect();
    let report = Report {
        from: plan.from.to_string(),
        to: plan.to.to_string(),
        servers: plan.args.servers,
        seed: plan.args.seed,
        crash: plan.args.crash,
        resources_under_test: plan.targets.iter().map(|t| t.label()).collect(),
        runs,
    };
    let json = serde_json::to_string_pretty(&report).context("failed to render report.json")?;
    std::fs::write(out.join("report.json"), json + "\n").context("failed to write report.json")?;
    let markdown = report.markdown();
    std::fs::write(out.join("report.md"), &markdown).context("failed to write report.md")?;
    let timelines: Vec<timeline::RunTimeline<'_>> = outcomes
        .iter()
        .map(|o| timeline::RunTimeline {
            title: format!(
                "MVP {}: {} → {}",
                if o.mvp { "on" } else { "off" },
                plan.from,
                plan.to
            ),
            requests: &o.recorded.requests,
            up: &o.recorded.up,
            served: &o.served,
            names: &o.names,
            length: o.length,
            marks: &o.harm.marks,
        })
        .collect();
    timeline::draw(&out.join("timeline.svg"), &timelines, plan.from, plan.to)
        .context("failed to draw timeline.svg")?;
    println!("{markdown}");
    println!("files: {} (report.json, report.md, timeline.svg)", out.display());
    gate(&report.runs)
}

/// The CI gate: an error naming what a run with the proxy on got wrong, if anything.
fn gate(runs: &[RunReport]) -> anyhow::Result<()> {
    let mut harms = Vec::new();
    for run in runs.iter().filter(|r| r.mvp) {
        for (count, what) in [
            (run.false_404, "false 404s"),
            (run.lost_writes, "lost writes"),
            (run.missed_watch_events, "missed watch events"),
            (
                run.harm.dependents_wrongly_deleted,
                "dependents wrongly deleted by the garbage collector",
            ),
            (run.harm.namespaces_stuck, "namespaces stuck"),
            (run.harm.namespace_objects_leaked, "namespace objects leaked"),
        ] {
            if count > 0 {
                harms.push(format!("{count} {what}"));
            }
        }
        let exec_404: usize = run.exec_requests.iter().flatten().map(|(_, r)| r.false_404).sum();
        if exec_404 > 0 {
            harms.push(format!("{exec_404} false 404s of the --exec program"));
        }
    }
    anyhow::ensure!(
        harms.is_empty(),
        "with the Mixed Version Proxy on, clients saw {}",
        harms.join(", ")
    );
    Ok(())
}

/// The phase the progress line shows.
struct Progress<'a> {
    bar: &'a indicatif::ProgressBar,
    label: String,
    phase: Arc<Mutex<String>>,
    /// Not a terminal: a plain line per phase, with the counts so far.
    plain: bool,
    ledger: Arc<Ledger>,
}

impl Progress<'_> {
    fn enter(&self, phase: &str) {
        *self
            .phase
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = phase.to_owned();
        if self.plain {
            eprintln!("{}: {phase} · {}", self.label, counts(&self.ledger));
        } else {
            self.bar.set_message(format!("{}: {phase}", self.label));
        }
    }
}

/// `N requests · N 404s · N 503s` so far.
fn counts(ledger: &Ledger) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    format!(
        "{} requests · {} 404s · {} 503s",
        ledger.count.load(Relaxed),
        ledger.not_found.load(Relaxed),
        ledger.unavailable.load(Relaxed),
    )
}

/// One run of the upgrade, with the proxy on or off: start the fleet behind a balancer, put it under
/// load, upgrade each server in turn, then judge what the clients saw.
async fn run_once(
    plan: &Plan,
    mvp: bool,
    bar: &indicatif::ProgressBar,
    plain: bool,
) -> anyhow::Result<RunOutcome> {
    // With --exec, every server keeps an audit log: what the program's requests got.
    let audit = match plan.args.exec {
        Some(_) => Some(exec_audit::AuditFiles::prepare(&plan.args.out, mvp)?),
        None => None,
    };
    let member = |index: usize, version| {
        let mut member = plan.member(index, version, mvp);
        if let Some(audit) = &audit {
            member.extra_flags.extend(audit.flags(&member.name));
        }
        member
    };
    let members: Vec<_> = (0..plan.args.servers).map(|i| member(i, plan.from)).collect();
    let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    let mut served = ServedByVersion::default();
    served.insert(plan.from, &plan.served(plan.from, mvp)?);
    served.insert(plan.to, &plan.served(plan.to, mvp)?);
    let ledger = Arc::new(Ledger::default());
    let progress = Progress {
        bar,
        label: format!("MVP {}", if mvp { "on" } else { "off" }),
        phase: Arc::default(),
        plain,
        ledger: ledger.clone(),
    };
    progress.enter("starting");
    let mut cluster = start_fleet(plan, mvp, members).await?;
    let balancer = start_balancer(plan, &cluster).await?;
    let mut exec = match &plan.args.exec {
        Some(command) => Some(start_exec(
            plan,
            mvp,
            command,
            cluster.dir(),
            cluster.pki(),
            &balancer,
        )?),
        None => None,
    };

    let clock = Instant::now();
    let started = time::OffsetDateTime::now_utc();
    let since = move || clock.elapsed().as_secs_f64();
    for i in 0..names.len() {
        ledger.up(i, plan.from, 0.0);
    }
    let load = Arc::new(Load::new(
        cluster.pki(),
        balancer.clone(),
        ledger.clone(),
        clock,
        plan.targets.clone(),
    )?);
    // kube-controller-manager, through the balancer as in an HA control plane, and the workload
    // whose harm it counts.
    let controllers = harm::start_controller_manager(
        cluster.dir(),
        cluster.pki(),
        &format!("https://{}", balancer.local_addr()),
    )
    .await?;
    let harm = Arc::new(harm::Harm::new(plan, load.clone()));
    let mut traffic = Traffic::start(plan, &load, &harm);
    if !plain {
        traffic.show_counts(&progress);
    }

    let upgrade = Upgrade {
        plan,
        names: &names,
        ledger: &ledger,
        balancer: &balancer,
        progress: &progress,
    };
    let phases = upgrade.roll(&mut cluster, &member, since).await?;
    let length = since();
    let exec_status = match exec.as_mut() {
        Some(child) => Some(finish_exec(child).await),
        None => None,
    };

    traffic.stop(&ledger).await;
    let recorded = ledger.take();
    progress.enter("waiting for deleted namespaces to go");
    let harm = harm.finish(&CancellationToken::new()).await;
    controllers.stop().await;

    progress.enter("reading every written object back");
    let final_state = read_back(plan, &load, &recorded, &served).await;
    cluster.shutdown().await;
    let exec_requests = audit.map(|audit| audit.judge(&names, started, &recorded.up, &served));
    Ok(RunOutcome {
        mvp,
        recorded,
        phases,
        final_state,
        names,
        length,
        served,
        exec_status,
        exec_requests,
        harm,
    })
}

/// The servers of a run as `--run` and `--store` ask: in this process, as processes on etcd (a shared
/// etcd under a prefix of the run's own) or as containers.
async fn start_fleet(plan: &Plan, mvp: bool, members: Vec<MemberSpec>) -> anyhow::Result<Fleet> {
    let on_off = if mvp { "on" } else { "off" };
    match (plan.args.run, plan.args.store) {
        (UpgradeRun::Processes, UpgradeStore::Etcd) => {
            let backend = if plan.args.etcd_servers.is_empty() {
                EtcdBackend::Private
            } else {
                EtcdBackend::Existing(plan.args.etcd_servers.clone())
            };
            // A run of its own on a shared etcd: under a prefix no other run uses.
            let prefix = format!("/upgrade-{}-mvp-{on_off}", std::process::id());
            Fleet::processes(members, backend, &prefix).await
        }
        (UpgradeRun::Containers, _) => {
            let prefix = format!("/upgrade-mvp-{on_off}");
            // The audit logs of --exec are under --out: mounted at the same path.
            let out = std::path::absolute(&plan.args.out).context("no absolute path for --out")?;
            Fleet::containers(members, &prefix, vec![out]).await
        }
        _ => Fleet::in_process(members).await,
    }
}

/// The load balancer in front of the fleet, checking its servers often enough to notice a crashed
/// one within `--health-check-seconds`: two failed checks, half that apart.
async fn start_balancer(plan: &Plan, cluster: &Fleet) -> anyhow::Result<Arc<EmbeddedBalancer>> {
    let interval = (plan.health_check / 2).max(Duration::from_millis(10));
    let check = HealthCheck {
        interval,
        timeout: interval.min(Duration::from_secs(1)),
        fall: 2,
        rise: 1,
    };
    let backends: Vec<(String, SocketAddr)> = cluster.backends()?;
    let balancer = EmbeddedBalancer::start(SocketAddr::new(LB_IP, 0), backends, check)
        .await
        .context("failed to start the load balancer")?;
    Ok(Arc::new(balancer))
}

/// The clients of a run: writers (which stop first) and watchers (which get time to see the last
/// writes).
struct Traffic {
    clients: JoinSet<()>,
    watchers: JoinSet<()>,
    writes_stop: CancellationToken,
    watches_stop: CancellationToken,
}

impl Traffic {
    /// The workload's writers, inventory and watchers, and the harm workload's owners, namespaces and
    /// checks.
    fn start(plan: &Plan, load: &Arc<Load>, harm: &Arc<harm::Harm>) -> Self {
        let (writes_stop, watches_stop) = (CancellationToken::new(), CancellationToken::new());
        let mut clients = JoinSet::new();
        let mut watchers = JoinSet::new();
        clients.spawn(harm.clone().run_owners(writes_stop.clone()));
        clients.spawn(harm.clone().run_namespaces(writes_stop.clone()));
        watchers.spawn(harm.clone().run_checks(watches_stop.clone()));
        clients.spawn(load.clone().run_inventory(writes_stop.clone()));
        for id in 0..plan.args.writers {
            clients.spawn(load.clone().run_writer(id, plan.args.seed, writes_stop.clone()));
        }
        for target in &plan.targets {
            watchers.spawn(load.clone().run_watcher(target.clone(), watches_stop.clone()));
        }
        Self {
            clients,
            watchers,
            writes_stop,
            watches_stop,
        }
    }

    /// Keeps the progress bar's counts current. In the watchers' set: dropped (and so stopped) with
    /// it, also when the run fails.
    fn show_counts(&mut self, progress: &Progress) {
        let (bar, ledger, label, phase) = (
            progress.bar.clone(),
            progress.ledger.clone(),
            progress.label.clone(),
            progress.phase.clone(),
        );
        let stop = self.watches_stop.clone();
        self.watchers.spawn(async move {
            while !stop.is_cancelled() {
                let phase = phase
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                bar.set_message(format!("{label}: {phase} · {}", counts(&ledger)));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
    }

    /// Writers stop first; watches get up to WATCH_SETTLE to deliver the last events (a loaded machine
    /// can be slow), then everything can be judged.
    async fn stop(mut self, ledger: &Ledger) {
        self.writes_stop.cancel();
        while self.clients.join_next().await.is_some() {}
        let settled = tokio::time::Instant::now() + WATCH_SETTLE;
        while ledger.judge_watches(report::missed_watch_events) > 0 && tokio::time::Instant::now() < settled {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.watches_stop.cancel();
        while self.watchers.join_next().await.is_some() {}
    }
}

/// The rolling upgrade itself, one server after another, with what the ledger and balancer learn.
struct Upgrade<'a> {
    plan: &'a Plan,
    names: &'a [String],
    ledger: &'a Ledger,
    balancer: &'a EmbeddedBalancer,
    progress: &'a Progress<'a>,
}

impl Upgrade<'_> {
    /// Steady at the old version, each server upgraded (`member` says what it becomes), steady at the
    /// new version: the phases, timed by `since`.
    async fn roll(
        &self,
        cluster: &mut Fleet,
        member: &impl Fn(usize, KubeVersion) -> MemberSpec,
        since: impl Fn() -> f64,
    ) -> anyhow::Result<Vec<Phase>> {
        let plan = self.plan;
        let mut phases = Vec::new();
        let steady = format!("steady at {}", plan.from);
        self.progress.enter(&steady);
        tokio::time::sleep(plan.dwell).await;
        phases.push(Phase {
            name: steady,
            start: 0.0,
            end: since(),
        });
        for (index, name) in self.names.iter().enumerate() {
            let name_of_phase = format!("upgrade {name}");
            self.progress.enter(&name_of_phase);
            let start = since();
            self.upgrade_one(cluster, index, name, member(index, plan.to), &since)
                .await?;
            tokio::time::sleep(plan.dwell).await;
            phases.push(Phase {
                name: name_of_phase,
                start,
                end: since(),
            });
        }
        let last = format!("final at {}", plan.to);
        self.progress.enter(&last);
        let start = since();
        tokio::time::sleep(plan.final_dwell).await;
        phases.push(Phase {
            name: last,
            start,
            end: since(),
        });
        Ok(phases)
    }

    /// Server `index` stopped (crashed with `--crash`, else drained) and started again as `member`.
    async fn upgrade_one(
        &self,
        cluster: &mut Fleet,
        index: usize,
        name: &str,
        member: MemberSpec,
        since: &impl Fn() -> f64,
    ) -> anyhow::Result<()> {
        let (plan, ledger, balancer) = (self.plan, self.ledger, self.balancer);
        let port = if plan.args.crash {
            // A crash: the balancer keeps it until its health checks fail (new connections to it are
            // refused meanwhile and go to the next server, as HAProxy's `option redispatch`).
            ledger.down(index, since());
            cluster.stop(index, name, true).await?
        } else {
            // An orchestrated stop: out of the load balancer first, in-flight requests finish.
            balancer.set_enabled(index, false);
            ledger.down(index, since());
            tokio::time::sleep(plan.drain).await;
            cluster.stop(index, name, false).await?
        };
        let addr = cluster
            .start_again(index, member, port)
            .await
            .with_context(|| format!("server {name} did not come back at {}", plan.to))?;
        ledger.up(index, plan.to, since());
        // Back in the balancer, at once (the orchestrator has seen its `/readyz` pass).
        balancer.set_backend(index, addr);
        balancer.set_up(index, true);
        balancer.set_enabled(index, true);
        Ok(())
    }
}

/// Every written object read back once the run is over (what a lost write is judged by), except
/// those no server at the new version serves any more.
async fn read_back(
    plan: &Plan,
    load: &Load,
    recorded: &Recorded,
    served: &ServedByVersion,
) -> HashMap<(String, String), Option<u64>> {
    let mut final_state = HashMap::new();
    let verify = CancellationToken::new();
    let mut keys: Vec<_> = recorded
        .writes
        .iter()
        .map(|w| (w.target.clone(), w.name.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    for (target, name) in keys {
        let gvr = (
            target.group.clone(),
            target.version.clone(),
            target.resource.clone(),
        );
        if !served.serves(plan.to, &gvr) {
            continue; // no server serves it any more: nothing can read it back
        }
        if let Ok(state) = load.read_back(&verify, &target, &name).await {
            final_state.insert((target.label(), name), state);
        }
    }
    final_state
}

/// Starts `--exec`'s command under `sh -c` with `KUBECONFIG` set to a kubeconfig of the balancer
/// (written to `DIR/cluster.kubeconfig`), its output in `OUT/exec-mvp-on.log` (or `-off`).
fn start_exec(
    plan: &Plan,
    mvp: bool,
    command: &str,
    dir: &std::path::Path,
    pki: &certs::Pki,
    balancer: &EmbeddedBalancer,
) -> anyhow::Result<tokio::process::Child> {
    let kubeconfig = dir.join("cluster.kubeconfig");
    pki.write_kubeconfig(
        &kubeconfig,
        &format!("https://{}", balancer.local_addr()),
        "cluster",
    )
    .context("failed to write the load balancer's kubeconfig")?;
    let log_path = plan
        .args
        .out
        .join(format!("exec-mvp-{}.log", if mvp { "on" } else { "off" }));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("failed to create {}", log_path.display()))?;
    tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("KUBECONFIG", &kubeconfig)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("failed to start --exec {command:?}"))
}

/// How the `--exec` program ended; killed (SIGKILL) if it is still running when the run ends.
async fn finish_exec(child: &mut tokio::process::Child) -> String {
    match child.try_wait() {
        Ok(Some(status)) => status.to_string(),
        _ => {
            let _ = child.kill().await;
            "killed at the end of the run".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mvp: bool, false_404: usize, lost_writes: usize, missed_watch_events: usize) -> RunReport {
        let mut report = RunReport::judge(&RunRecord {
            mvp,
            mode: "discovery",
            requests: &[],
            writes: &[],
            events: &Default::default(),
            up: &[],
            unwatched: &HashMap::new(),
            served: &ServedByVersion::default(),
            phases: &[],
            final_state: &HashMap::new(),
            names: &[],
        });
        report.false_404 = false_404;
        report.lost_writes = lost_writes;
        report.missed_watch_events = missed_watch_events;
        report
    }

    #[test]
    fn the_gate_fails_on_harm_seen_with_the_proxy_on_only() {
        assert!(gate(&[run(true, 0, 0, 0), run(false, 552, 0, 3)]).is_ok());
        let err = gate(&[run(true, 2, 1, 0), run(false, 552, 0, 0)]).expect_err("harm");
        assert_eq!(
            err.to_string(),
            "with the Mixed Version Proxy on, clients saw 2 false 404s, 1 lost writes"
        );
        assert!(gate(&[run(true, 0, 0, 4)]).is_err());
    }

    #[test]
    fn the_gate_fails_on_harm_done_with_the_proxy_on_only() {
        let mut off = run(false, 0, 0, 0);
        off.harm.dependents_wrongly_deleted = 9;
        off.harm.namespace_objects_leaked = 3;
        assert!(gate(&[run(true, 0, 0, 0), off]).is_ok());
        let mut on = run(true, 0, 0, 0);
        on.harm.dependents_wrongly_deleted = 2;
        on.harm.namespaces_stuck = 1;
        let err = gate(&[on]).expect_err("harm");
        assert_eq!(
            err.to_string(),
            "with the Mixed Version Proxy on, clients saw 2 dependents wrongly deleted by the garbage collector, 1 namespaces stuck"
        );
        let mut on = run(true, 0, 0, 0);
        on.harm.namespace_objects_leaked = 1;
        assert!(gate(&[on]).is_err());
    }
}
