//! Server-side printing as a kubectl user sees it: the built binary's `cluster` command, and `kubectl
//! get` printing the columns of upstream's printers (Jobs through the peer proxy, since the server
//! kubectl talks to has `batch/v1` off; Deployments, Pods and Services served locally).

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use support::demo::{Demo, server};
use support::{kubectl_available, kubectl_ok as kubectl};

/// kubectl's table split into cells: each column starts where its header does (kubectl pads cells
/// to the header's offsets), so empty cells survive. The first row is the header.
fn cells(table: &str) -> Vec<Vec<String>> {
    let mut lines = table.lines();
    let header = lines.next().expect("a header line");
    let bytes = header.as_bytes();
    let starts: Vec<usize> = (0..bytes.len())
        .filter(|&i| i == 0 || (i >= 2 && bytes[i] != b' ' && bytes[i - 1] == b' ' && bytes[i - 2] == b' '))
        .collect();
    std::iter::once(header)
        .chain(lines)
        .map(|line| {
            starts
                .iter()
                .enumerate()
                .map(|(n, &start)| {
                    let end = starts.get(n + 1).copied().unwrap_or(line.len()).min(line.len());
                    line.get(start.min(end)..end)
                        .unwrap_or_default()
                        .trim()
                        .to_owned()
                })
                .collect()
        })
        .collect()
}

/// The header of a kubectl table.
fn header(table: &str) -> Vec<String> {
    cells(table).swap_remove(0)
}

/// `cell` with every UUID (the Job's uid in its generated selector) replaced by `[uid]`.
fn redact_uids(cell: &str) -> String {
    let is_uuid = |s: &str| {
        s.len() == 36
            && s.char_indices().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit(),
            })
    };
    let mut out = String::new();
    let mut i = 0;
    while i < cell.len() {
        match cell.get(i..i + 36) {
            Some(candidate) if is_uuid(candidate) => {
                out.push_str("[uid]");
                i += 36;
            }
            _ => {
                let ch = cell[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

/// A snapshot rendering of tables: each command, then its rows as `cell | cell`, ages and uids redacted.
fn render(tables: &[(&str, String)]) -> String {
    let mut out = String::new();
    for (command, table) in tables {
        out.push_str(&format!("$ kubectl {command}\n"));
        let rows = cells(table);
        let ages: Vec<bool> = rows[0].iter().map(|h| h == "AGE").collect();
        for (n, row) in rows.iter().enumerate() {
            let shown: Vec<String> = row
                .iter()
                .zip(&ages)
                .map(|(cell, &age)| {
                    if age && n > 0 {
                        "[age]".to_owned()
                    } else {
                        redact_uids(cell)
                    }
                })
                .collect();
            out.push_str(&shown.join(" | "));
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

#[test]
fn kubectl_get_prints_upstreams_columns() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let kubeconfig = PathBuf::from(
        server(&manifest, "a")["kubeconfig"]
            .as_str()
            .expect("kubeconfig path"),
    );
    let run = |args: &[&str]| kubectl(&kubeconfig, args);

    run(&["create", "job", "hello", "--image=busybox"]);
    run(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
    ]);
    run(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    run(&["run", "shell", "--image=busybox", "--restart=Never"]);

    let jobs = run(&["get", "jobs"]);
    assert_eq!(
        header(&jobs),
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        "{jobs}"
    );
    let wide_jobs = run(&["get", "jobs", "-o", "wide"]);
    assert_eq!(
        header(&wide_jobs),
        [
            "NAME",
            "STATUS",
            "COMPLETIONS",
            "DURATION",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{wide_jobs}"
    );
    let hello = &cells(&wide_jobs)[1];
    assert_eq!(hello[..4], ["hello", "Running", "0/1", ""], "{wide_jobs}");
    assert_eq!(hello[5..7], ["hello", "busybox"], "{wide_jobs}");
    assert!(
        hello[4].ends_with('s') && hello[4] != "<unknown>",
        "an age in seconds: {wide_jobs}"
    );

    let deployments = run(&["get", "deployments"]);
    assert_eq!(
        header(&deployments),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{deployments}"
    );
    assert_eq!(cells(&deployments)[1][..4], ["web", "0/2", "0", "0"]);
    let pods = run(&["get", "pods", "-o", "wide"]);
    assert_eq!(
        header(&pods),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ],
        "{pods}"
    );
    let services = run(&["get", "services"]);
    assert_eq!(
        header(&services),
        ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
        "{services}"
    );

    // `get --watch` lists, then watches with `as=Table`: the new Job arrives as a row of the same
    // columns, through the proxy's watch stream.
    // Under `timeout`, so a watch that never prints cannot hang the test.
    let mut watch = Command::new("timeout")
        .args(["60", "kubectl", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["get", "jobs", "--watch", "--output-watch-events"])
        .env("KUBECACHEDIR", kubeconfig.with_extension("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl watch starts");
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    let mut next_line = || lines.next().expect("a line").expect("utf-8");
    let watch_header = next_line();
    assert_eq!(
        header(&watch_header),
        ["EVENT", "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    );
    assert!(next_line().contains("hello"));
    run(&["create", "job", "second", "--image=busybox"]);
    let added = next_line();
    let _ = watch.kill();
    let _ = watch.wait();
    let added = cells(&format!("{watch_header}\n{added}")).swap_remove(1);
    assert_eq!(added[..5], ["ADDED", "second", "Running", "0/1", ""], "{added:?}");

    insta::assert_snapshot!(
        "kubectl_get_tables",
        render(&[
            ("get jobs", jobs),
            ("get jobs -o wide", wide_jobs),
            (
                "get deployments -o wide",
                run(&["get", "deployments", "-o", "wide"])
            ),
            ("get pods -o wide", pods),
            ("get services -o wide", run(&["get", "services", "-o", "wide"])),
        ])
    );
    drop(demo);
}

/// `kubectl explain` of a custom resource reads its schema from the CR group-version's OpenAPI v3
/// document, as it does on a real server.
#[test]
fn kubectl_explains_custom_resources() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let kubeconfig = PathBuf::from(
        server(&manifest, "a")["kubeconfig"]
            .as_str()
            .expect("kubeconfig path"),
    );
    let crd = dir.path().join("crontabs.yaml");
    std::fs::write(
        &crd,
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A CronTab runs an image on a schedule.
        properties:
          spec:
            type: object
            description: What the CronTab runs.
            properties:
              cronSpec: {type: string, description: The schedule in cron format.}
              image: {type: string, description: The image to run.}
              replicas: {type: integer}
"#,
    )
    .expect("CRD file");
    kubectl(&kubeconfig, &["apply", "-f", crd.to_str().expect("utf-8 path")]);
    // Discovery and the OpenAPI documents follow the CRD shortly; poll until kubectl sees both.
    let explained = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
        .block_on(support::eventually(
            "kubectl explain crontabs.spec to describe the CRD",
            std::time::Duration::from_secs(20),
            || async {
                let (ok, stdout, _) = support::kubectl(&kubeconfig, &["explain", "crontabs.spec"]);
                ok.then_some(stdout)
            },
        ));
    for expected in [
        "GROUP:      stable.example.com",
        "KIND:       CronTab",
        "VERSION:    v1",
        "FIELD: spec <Object>",
        "What the CronTab runs.",
        "cronSpec\t<string>",
        "The schedule in cron format.",
        "replicas\t<integer>",
    ] {
        assert!(explained.contains(expected), "{expected:?} in:\n{explained}");
    }
    let root = kubectl(&kubeconfig, &["explain", "crontabs"]);
    assert!(root.contains("A CronTab runs an image on a schedule."), "{root}");
    assert!(root.contains("metadata\t<ObjectMeta>"), "{root}");
    drop(demo);
}
