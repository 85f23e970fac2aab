//! The rolling-upgrade simulator as a user runs it: the built binary's `upgrade` command, judged by
//! the `report.json` it writes. With the Mixed Version Proxy a graceful 1.35 → 1.36 rollout shows
//! clients no false 404, loses no write and misses no watch event; without it, the false 404s the
//! proxy exists to prevent show up, all for the resources only 1.36 serves.

use std::process::Command;

use serde_json::Value;

/// Upgrade runs are heavy (servers, a controller manager, a balancer and clients in one process) and
/// several outcomes are judged on timing (a window of mixed versions, a namespace gone within 30 s): one
/// run at a time, so that no run is judged on a machine also running the others.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn upgrade(args: &[&str]) -> (bool, String, String) {
    let _one_at_a_time = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
        .arg("upgrade")
        .args(args)
        .output()
        .expect("the binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    )
}

#[test]
fn a_small_upgrade_shows_false_404s_only_without_the_proxy() {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8 path");
    let (ok, stdout, stderr) = upgrade(&[
        "--from=1.35",
        "--to=1.36",
        "--servers=2",
        "--dwell-seconds=1",
        "--final-dwell-seconds=1",
        "--out",
        dir,
    ]);
    assert!(ok, "upgrade failed: {stderr}");
    // Not a terminal: a plain progress line per phase, none redrawn.
    for line in [
        "MVP on: starting · ",
        "MVP on: upgrade a · ",
        "MVP off: final at 1.36 · ",
    ] {
        assert!(stderr.contains(line), "{line:?} in {stderr}");
    }
    assert!(!stderr.contains('\r'), "{stderr}");
    assert!(
        stdout.contains("| **false 404s** |"),
        "prints the table: {stdout}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).expect("report.json"))
            .expect("report.json is JSON");
    assert_eq!(
        (report["from"].as_str(), report["to"].as_str()),
        (Some("1.35"), Some("1.36"))
    );
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "--mvp both: {report}");
    let (on, off) = (&runs[0], &runs[1]);
    assert_eq!(
        (on["mvp"].as_bool(), off["mvp"].as_bool()),
        (Some(true), Some(false))
    );

    for run in [on, off] {
        assert!(run["requests"].as_u64() > Some(100), "{run}");
        assert!(run["acknowledged_writes"].as_u64() > Some(10), "{run}");
        assert_eq!(run["lost_writes"], 0, "{run}");
        assert_eq!(
            run["phases"].as_array().map(Vec::len),
            Some(4),
            "steady, a, b, final: {run}"
        );
    }
    assert_eq!(on["false_404"], 0, "{on}");
    assert_eq!(on["missed_watch_events"], 0, "{on}");
    assert!(
        on["latency_ms"]["proxied_p50"].as_f64() > Some(0.0),
        "requests were proxied: {on}"
    );

    assert!(
        off["false_404"].as_u64() > Some(0),
        "the problem, reproduced: {off}"
    );
    let resources: Vec<&String> = off["false_404_by_resource"]
        .as_object()
        .expect("by resource")
        .keys()
        .collect();
    assert!(
        resources.iter().all(|r| r.starts_with("mutatingadmissionpolic")),
        "only what 1.35 lacks: {resources:?}"
    );
    assert_eq!(off["latency_ms"]["proxied_p50"], 0.0, "nothing is proxied: {off}");

    let markdown = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(
        markdown.contains("| | MVP on (discovery) | MVP off (discovery) |"),
        "{markdown}"
    );
    let svg = std::fs::read_to_string(out.path().join("timeline.svg")).expect("timeline.svg");
    assert!(
        svg.starts_with("<svg") && svg.contains("false 404"),
        "an SVG with its legend"
    );
}

/// `--crash`: each server is killed (no clean-up: its lease and address record stay behind) and
/// started again at the new version, whose run deletes its predecessor's lease before creating its
/// own. With the proxy, clients still see no false 404 (docs/decisions.md §8).
#[test]
fn a_crashing_upgrade_shows_no_false_404_with_the_proxy() {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8 path");
    let (ok, _, stderr) = upgrade(&[
        "--from=1.35",
        "--to=1.36",
        "--servers=3",
        "--crash",
        "--mvp=on",
        "--dwell-seconds=1",
        "--final-dwell-seconds=1",
        "--out",
        dir,
    ]);
    assert!(ok, "upgrade failed: {stderr}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).expect("report.json"))
            .expect("report.json is JSON");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "--mvp on: {report}");
    let on = &runs[0];
    assert_eq!(on["mvp"], true, "{on}");
    assert!(on["requests"].as_u64() > Some(100), "{on}");
    assert_eq!(on["false_404"], 0, "{on}");
    assert_eq!(on["lost_writes"], 0, "{on}");
    assert!(
        on["latency_ms"]["proxied_p50"].as_f64() > Some(0.0),
        "requests were proxied: {on}"
    );
}

#[test]
fn bad_flags_get_one_line_errors() {
    for (args, expected) in [
        (
            vec!["--from=1.36", "--to=1.35"],
            "error: --from 1.36 must be below --to 1.35",
        ),
        (
            vec!["--from=1.35", "--to=1.35"],
            "error: --from 1.35 must be below --to 1.35",
        ),
        (
            vec!["--from=1.35", "--to=1.36", "--servers=0"],
            "error: --servers must be between 1 and 200, got 0",
        ),
        (
            vec!["--from=1.35", "--to=1.36", "--dwell-seconds=-1"],
            "error: --dwell-seconds must be a non-negative number of seconds",
        ),
        (
            vec!["--from=1.35", "--to=1.36", "--run=processes"],
            "error: --run processes: separate processes share their objects through etcd; add --store etcd",
        ),
    ] {
        let (ok, _, stderr) = upgrade(&args);
        assert!(!ok, "{args:?} should fail");
        assert_eq!(stderr, expected, "{args:?}");
    }
    let (ok, _, stderr) = upgrade(&["--from=1.99", "--to=2.0"]);
    assert!(!ok);
    assert!(
        stderr.starts_with("error: --from: ") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

/// `upgrade --store etcd --run processes`: every server its own process on a private etcd, stopped
/// with SIGTERM and started again at 1.36 as a new process. The same expectations as in-process: with
/// the proxy no false 404, no lost write, no missed watch event (the command's own gate); without it
/// the false 404s. Needs the `etcd` feature and etcd on PATH (skipped otherwise, failing when
/// `KUBE_MVP_REQUIRE_ETCD=1`).
#[test]
fn an_upgrade_of_processes_on_etcd_shows_false_404s_only_without_the_proxy() {
    const REQUIRE_ETCD: &str = "KUBE_MVP_REQUIRE_ETCD";
    let skip = |why: &str| {
        assert!(
            std::env::var(REQUIRE_ETCD).as_deref() != Ok("1"),
            "{REQUIRE_ETCD}=1 but this test cannot run: {why}"
        );
        eprintln!("skipped: {why} (set {REQUIRE_ETCD}=1 to make this a failure)");
    };
    if !cfg!(feature = "etcd") {
        return skip("apiserver-fake was built without the `etcd` feature");
    }
    if !apiserver_fake::cluster::etcd_process::etcd_installed() {
        return skip("no etcd binary on PATH (Debian: apt-get install -y etcd-server)");
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8 path");
    let (ok, stdout, stderr) = upgrade(&[
        "--from=1.35",
        "--to=1.36",
        "--servers=2",
        "--store=etcd",
        "--run=processes",
        "--dwell-seconds=1",
        "--final-dwell-seconds=1",
        "--out",
        dir,
    ]);
    assert!(
        ok,
        "upgrade failed (the gate: harm with the proxy on?): {stderr}\n{stdout}"
    );
    kube_mvp_testing::UpgradeReport::read(out.path())
        .expect("report.json")
        .assert_false_404s_only_without_the_proxy();
}

/// `--exec` runs the user's program once per run with `KUBECONFIG` set to the load balancer's
/// kubeconfig: here a small kubectl script, whose output lands in `OUT/exec-mvp-on.log` (`-off`) and
/// whose exit status is in the report.
#[test]
fn exec_runs_the_users_program_through_the_load_balancer_in_each_run() {
    // The shared harness's check: kubectl 1.28 or newer, or it says why the test is skipped.
    if kube_mvp_testing::Kubectl::find().is_none() {
        return;
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8 path");
    let script = "for i in 1 2 3; do kubectl get namespaces -o name || exit 7; done";
    let (ok, stdout, stderr) = upgrade(&[
        "--from=1.35",
        "--to=1.36",
        "--servers=2",
        "--dwell-seconds=1",
        "--final-dwell-seconds=1",
        "--exec",
        script,
        "--out",
        dir,
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("| `--exec` program | exit status: 0 | exit status: 0 |"),
        "{stdout}"
    );
    for run in ["on", "off"] {
        let log = std::fs::read_to_string(out.path().join(format!("exec-mvp-{run}.log"))).expect("log");
        assert_eq!(log.matches("namespace/default").count(), 3, "{log}");
    }
}

#[test]
fn exec_of_a_missing_program_is_a_one_line_error_before_anything_starts() {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("report");
    let (ok, _, stderr) = upgrade(&[
        "--from=1.35",
        "--to=1.36",
        "--exec",
        "no-such-program-kube-mvp --flag",
        "--out",
        dir.to_str().expect("utf-8"),
    ]);
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: --exec: no-such-program-kube-mvp: command not found"
    );
    assert!(!dir.exists(), "nothing started, nothing written");
}

/// What the `--exec` program's own requests got, from the servers' audit logs by user agent: a kubectl
/// script that asks for v1 MutatingAdmissionPolicies (only 1.36 serves them) and prints `404` for
/// each NotFound it gets. The report counts as many 404s for kubectl's user agent as the script saw
/// (one more at most: a request answered just as the script was stopped), false 404s only without
/// the proxy, and none of the simulator's own requests.
#[test]
fn exec_reports_what_the_programs_own_requests_got_by_user_agent() {
    // The shared harness's check: kubectl 1.28 or newer, or it says why the test is skipped.
    if kube_mvp_testing::Kubectl::find().is_none() {
        return;
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8 path");
    let script = r#"while :; do
      if answer=$(kubectl get --raw /apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies 2>&1); then echo ok
      else case "$answer" in *NotFound*) echo 404 ;; *) echo "other: $answer" ;; esac; fi
      sleep 0.05
    done"#;
    let (ok, stdout, stderr) = upgrade(&[
        "--from=1.35",
        "--to=1.36",
        "--servers=2",
        // Long enough a window of mixed versions for the script's requests (a kubectl call can take a
        // second on a loaded machine) to meet the old server without the proxy.
        "--dwell-seconds=4",
        "--final-dwell-seconds=1",
        "--exec",
        script,
        "--out",
        dir,
    ]);
    assert!(ok, "{stderr}\n{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).expect("report.json"))
            .expect("report.json is JSON");
    for run in report["runs"].as_array().expect("runs") {
        let name = if run["mvp"] == true { "on" } else { "off" };
        let log = std::fs::read_to_string(out.path().join(format!("exec-mvp-{name}.log"))).expect("log");
        let seen_404 = log.lines().filter(|l| *l == "404").count();
        let agents = run["exec_requests"].as_object().expect("exec_requests");
        // kubectl's own (`kubectl/v1.x …`) and, from 1.32 on, its dispatcher's version check
        // (`kubectl-dispatcher/…`); none of the simulator's (`upgrade-sim`).
        assert!(
            agents.keys().all(|agent| agent.starts_with("kubectl")),
            "only kubectl's requests: {agents:?}"
        );
        let counts = agents
            .iter()
            .find_map(|(agent, counts)| agent.starts_with("kubectl/").then_some(counts))
            .unwrap_or_else(|| panic!("kubectl's user agent: {agents:?}"));
        let reported_404 = counts["by_code"]["404"].as_u64().unwrap_or(0);
        let reported_404 = usize::try_from(reported_404).expect("count");
        assert!(
            (seen_404..=seen_404 + 1).contains(&reported_404),
            "MVP {name}: the script saw {seen_404} 404s, the audit logs {reported_404}: {counts}\n{log}"
        );
        assert!(
            seen_404 > 0,
            "before the first upgrade no server serves them: {log}"
        );
        if name == "on" {
            assert_eq!(counts["false_404"], 0, "{counts}");
        } else {
            assert!(counts["false_404"].as_u64() > Some(0), "{counts}");
        }
    }
    let markdown = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(
        markdown.contains("- `--exec` requests of `kubectl/"),
        "{markdown}"
    );
}

/// The harm itself (issue 18): a controller manager runs through the load balancer while owners of
/// the resources only 1.36 serves (mutating admission policies and bindings) own ConfigMaps, and
/// namespaces are created, filled and deleted. With the proxy nothing is destroyed, stuck or leaked;
/// without it the garbage collector's live GET of an owner lands on a 1.35 server, is answered 404,
/// and the owner's dependents are deleted while it exists.
#[test]
fn the_garbage_collector_deletes_live_dependents_only_without_the_proxy() {
    // Whether the collector acts within a run's window of mixed versions depends on timing (a loaded
    // machine may let the window pass before it looks): the harm must show in one of three runs, and
    // every run with the proxy must be harmless.
    let mut attempts = 0;
    let (out, report) = loop {
        attempts += 1;
        let out = tempfile::tempdir().expect("tempdir");
        let dir = out.path().to_str().expect("utf-8 path");
        let (ok, _, stderr) = upgrade(&[
            "--from=1.35",
            "--to=1.36",
            "--dwell-seconds=3",
            "--final-dwell-seconds=1",
            "--out",
            dir,
        ]);
        assert!(ok, "upgrade failed (the gate counts harm too): {stderr}");
        let report: Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("report.json")).expect("report.json"),
        )
        .expect("report.json is JSON");
        let runs = report["runs"].as_array().expect("runs");
        let (on, off) = (&runs[0], &runs[1]);
        for run in [on, off] {
            let workload = &run["harm_workload"];
            assert!(workload["owners"].as_u64() > Some(0), "{workload}");
            let (owners, dependents) = (
                workload["owners"].as_u64().unwrap_or(0),
                workload["dependents"].as_u64().unwrap_or(0),
            );
            assert!(
                dependents > owners && dependents <= 2 * owners,
                "up to two ConfigMaps per owner (the last may be cut short): {workload}"
            );
            assert!(workload["namespaces_deleted"].as_u64() > Some(0), "{workload}");
            assert!(
                workload["namespace_objects"].as_u64() >= workload["namespaces_deleted"].as_u64(),
                "{workload}"
            );
        }
        for field in [
            "dependents_wrongly_deleted",
            "namespaces_stuck",
            "namespace_objects_leaked",
        ] {
            assert_eq!(on[field], 0, "{field} with the proxy: {on}");
            assert!(off[field].is_u64(), "{field}: {off}");
        }
        if off["dependents_wrongly_deleted"].as_u64() > Some(0) || attempts == 3 {
            break (out, report);
        }
    };
    let runs = report["runs"].as_array().expect("runs");
    let off = &runs[1];
    assert!(
        off["dependents_wrongly_deleted"].as_u64() > Some(0),
        "the harm, reproduced in one of {attempts} runs: {off}"
    );

    // The rows as report.md shows them; the proxy-on column (all 0) is deterministic, the other
    // varies run to run and is judged above.
    let markdown = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    let mut rows: Vec<String> = markdown
        .lines()
        .filter(|l| l.starts_with("Owners of") || l.starts_with("| | "))
        .map(str::to_owned)
        .collect();
    for name in [
        "**dependents wrongly deleted**",
        "namespaces stuck (> 30 s)",
        "namespace objects leaked",
    ] {
        let line = markdown
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("{name} in {markdown}"));
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        rows.push(format!(
            "| {} | {} | (MVP off: judged above) |",
            cells[0], cells[1]
        ));
    }
    insta::assert_snapshot!("harm_rows", rows.join("\n"));
    let svg = std::fs::read_to_string(out.path().join("timeline.svg")).expect("timeline.svg");
    assert!(
        svg.contains("dependent wrongly deleted"),
        "the timeline marks the harm"
    );
}
