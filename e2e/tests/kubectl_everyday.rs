//! Everyday kubectl as on a real server, through `b` (which lacks `batch/v1`, so every Job request is
//! proxied to `a`) and on `a` (served locally): `apply` (created, then unchanged), `diff`,
//! `apply --server-side` with its conflict and `--force-conflicts`, `explain`, strict field validation
//! of `create -f`, `get -o wide` with upstream's printer columns, `explain` on the server that serves
//! Jobs, and a Job created with curl coming back defaulted, labelled and with its managedFields entry.

mod support;

use std::path::Path;
use std::time::Duration;

use e2e::{Kubectl, KubectlOutput, PeerResolutionMode};
use http::Method;
use serde_json::Value;
use support::*;

const KUBECTL_TIMEOUT: Duration = Duration::from_secs(30);

const MANIFEST: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: NAME
spec:
  template:
    spec:
      containers:
      - name: pi
        image: perl:5.34
        command: [perl, -e, 'print 1']
      restartPolicy: Never
  backoffLimit: 4
";

async fn run(kubectl: &Kubectl, args: &[&str]) -> KubectlOutput {
    kubectl.run(args, KUBECTL_TIMEOUT).await.unwrap()
}

/// Writes `text` to `dir/file` and returns the path.
fn manifest(dir: &Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// `output` with the temporary directory's path and RFC 3339 times made stable.
fn stable(output: KubectlOutput, dir: &Path) -> KubectlOutput {
    let dir = dir.to_string_lossy().into_owned();
    let fix = |text: String| redact_times(&text.replace(&dir, "[dir]"));
    KubectlOutput {
        command: fix(output.command),
        success: output.success,
        stdout: fix(output.stdout),
        stderr: fix(output.stderr),
    }
}

/// Replaces every `YYYY-MM-DDTHH:MM:SSZ` in `text` by `[time]`.
fn redact_times(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < text.len() {
        let candidate = bytes.get(i..i + 20);
        let is_time = candidate.is_some_and(|c| {
            c.iter().enumerate().all(|(n, b)| match n {
                4 | 7 => *b == b'-',
                10 => *b == b'T',
                13 | 16 => *b == b':',
                19 => *b == b'Z',
                _ => b.is_ascii_digit(),
            })
        });
        if is_time {
            out.push_str("[time]");
            i += 20;
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The changed lines of a `kubectl diff` (its file headers name temporary files).
fn diff_lines(output: &KubectlOutput) -> Vec<String> {
    output
        .stdout
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-')) && !l.starts_with("+++") && !l.starts_with("---")
        })
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_diff_server_side_apply_explain_and_strict_validation() {
    let cluster = a_serves_batch_b_does_not(PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let mut transcript = Vec::new();
    for (server, job) in [("b", "via-b"), ("a", "on-a")] {
        let Some(kubectl) = cluster.kubectl(server).unwrap() else {
            return;
        };
        let original = manifest(dir.path(), &format!("{job}.yaml"), &MANIFEST.replace("NAME", job));
        let changed = manifest(
            dir.path(),
            &format!("{job}-changed.yaml"),
            &MANIFEST
                .replace("NAME", job)
                .replace("backoffLimit: 4", "backoffLimit: 5"),
        );
        let unknown = manifest(
            dir.path(),
            &format!("{job}-unknown.yaml"),
            &MANIFEST
                .replace("NAME", &format!("{job}-unknown"))
                .replace("spec:\n  template", "spec:\n  foo: 1\n  template"),
        );
        let created = run(&kubectl, &["apply", "-f", &original]).await;
        assert_eq!(
            created.stdout,
            format!("job.batch/{job} created\n"),
            "{created:?}"
        );
        let again = run(&kubectl, &["apply", "-f", &original]).await;
        assert_eq!(again.stdout, format!("job.batch/{job} unchanged\n"), "{again:?}");

        let diff = run(&kubectl, &["diff", "-f", &changed]).await;
        assert!(!diff.success, "kubectl diff exits 1 when something differs");
        let changes = diff_lines(&diff);
        assert!(changes.contains(&"-  backoffLimit: 4".to_owned()), "{changes:?}");
        assert!(changes.contains(&"+  backoffLimit: 5".to_owned()), "{changes:?}");

        let conflict = run(&kubectl, &["apply", "--server-side", "-f", &changed]).await;
        assert!(!conflict.success);
        assert!(
            conflict.stderr.starts_with(
                "error: Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using batch/v1 at "
            ),
            "{conflict:?}"
        );
        let forced = run(
            &kubectl,
            &["apply", "--server-side", "--force-conflicts", "-f", &changed],
        )
        .await;
        assert_eq!(
            forced.stdout,
            format!("job.batch/{job} serverside-applied\n"),
            "{forced:?}"
        );
        let image = run(
            &kubectl,
            &["get", "job", job, "-o", "jsonpath={.spec.backoffLimit}"],
        )
        .await;
        assert_eq!(image.stdout, "5");
        let after_apply = run(&kubectl, &["diff", "-f", &changed]).await;
        assert!(after_apply.success, "nothing left to change: {after_apply:?}");

        let strict = run(&kubectl, &["create", "-f", &unknown]).await;
        assert!(!strict.success);
        assert!(
            strict.stderr.contains(
                "Job in version \"v1\" cannot be handled as a Job: strict decoding error: unknown field \"spec.foo\""
            ),
            "{strict:?}"
        );

        let wide = run(&kubectl, &["get", "jobs", job, "-o", "wide"]).await;
        let header: Vec<&str> = wide
            .stdout
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(
            header,
            [
                "NAME",
                "STATUS",
                "COMPLETIONS",
                "DURATION",
                "AGE",
                "CONTAINERS",
                "IMAGES",
                "SELECTOR"
            ]
        );

        transcript.push((
            server,
            vec![
                stable(created, dir.path()),
                stable(again, dir.path()),
                KubectlOutput {
                    stdout: changes.join("\n"),
                    ..stable(diff, dir.path())
                },
                stable(conflict, dir.path()),
                stable(forced, dir.path()),
                stable(strict, dir.path()),
                KubectlOutput {
                    stdout: wide.stdout.lines().next().unwrap_or_default().to_owned(),
                    ..stable(wide, dir.path())
                },
            ],
        ));
    }
    // `explain` reads the OpenAPI of the server kubectl talks to, which describes what that server
    // serves (upstream's MVP proxies resources, not OpenAPI): through `b`, which lacks batch/v1, it
    // finds no Job schema, as against a real mixed-version pair.
    let Some(a) = cluster.kubectl("a").unwrap() else {
        return;
    };
    let Some(b) = cluster.kubectl("b").unwrap() else {
        return;
    };
    let missing = run(&b, &["explain", "jobs.spec"]).await;
    assert_eq!(
        missing.stderr,
        "error: couldn't find resource for \"batch/v1, Resource=jobs\"\n"
    );
    let explain = run(&a, &["explain", "jobs.spec"]).await;
    assert!(explain.success, "{explain:?}");
    assert!(
        explain.stdout.contains("FIELD: spec <JobSpec>"),
        "{}",
        explain.stdout
    );
    assert!(
        explain
            .stdout
            .contains("  template\t<PodTemplateSpec> -required-"),
        "{}",
        explain.stdout
    );
    let explain_fields: Vec<&str> = explain
        .stdout
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .collect();
    insta::assert_yaml_snapshot!("kubectl_everyday_via_b_and_on_a", transcript);
    insta::assert_yaml_snapshot!("kubectl_explain_jobs_spec", explain_fields);
}

/// `value` with what varies from run to run replaced: UUIDs (the object's uid, also in the generated
/// selector and labels), timestamps and the resourceVersion.
fn redact_variable(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let value = match key.as_str() {
                        "creationTimestamp" | "time" | "resourceVersion" => Value::String(format!("[{key}]")),
                        _ => redact_variable(value),
                    };
                    (key, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(redact_variable).collect()),
        Value::String(s) if s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4 => {
            Value::String("[uid]".to_owned())
        }
        other => other,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_created_with_curl_comes_back_defaulted_labelled_and_managed() {
    let cluster = a_serves_batch_b_does_not(PeerResolutionMode::Discovery).await;
    wait_until_b_proxies_jobs(&cluster).await;
    let mut bodies = Vec::new();
    for (server, name) in [("b", "curl-via-b"), ("a", "curl-on-a")] {
        let client = cluster.client(server).unwrap();
        let created = client
            .request(Method::POST, JOBS)
            .header("user-agent", "curl/8.5.0")
            .json(&job(name))
            .send()
            .await
            .unwrap();
        assert_eq!(created.code(), 201, "{created:?}");
        let body = created.raw_json();
        let uid = body["metadata"]["uid"].as_str().unwrap().to_owned();
        assert_eq!(
            body["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            uid.as_str()
        );
        assert_eq!(body["spec"]["template"]["metadata"]["labels"]["job-name"], name);
        let managed = &body["metadata"]["managedFields"][0];
        assert_eq!(managed["manager"], "curl");
        assert_eq!(managed["operation"], "Update");
        assert!(
            managed["fieldsV1"]["f:spec"]["f:backoffLimit"].is_object(),
            "{managed}"
        );
        // The generated selector is the strategy's, not the manager's.
        assert!(
            managed["fieldsV1"]["f:spec"].get("f:selector").is_none(),
            "{managed}"
        );
        let mut body = redact_variable(body);
        body["metadata"]["name"] = Value::String("[name]".into());
        for labels in ["/metadata/labels", "/spec/template/metadata/labels"] {
            if let Some(job_name) = body.pointer_mut(&format!("{labels}/job-name")) {
                *job_name = Value::String("[name]".into());
            }
            if let Some(job_name) = body.pointer_mut(&format!("{labels}/batch.kubernetes.io~1job-name")) {
                *job_name = Value::String("[name]".into());
            }
        }
        bodies.push(body);
    }
    assert_eq!(bodies[0], bodies[1], "proxied and local creates agree");
    insta::assert_yaml_snapshot!("job_created_with_curl", bodies[0]);
}
