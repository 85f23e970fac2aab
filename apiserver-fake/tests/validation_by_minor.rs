//! Built-in validation and the strategies' field dropping as they differ between minors, driven from
//! outside with kubectl: one cluster of a 1.28 server, a 1.32 server emulating 1.30 and a 1.36
//! server; the same manifests created through each (`kubectl create`, whose default `--validate`
//! asks the server for strict field validation), and what each server refuses or stores
//! (`kubectl get -o yaml`'s `spec`), in one snapshot.
//!
//! What a user meets: a field the minor's types do not have is an unknown field (a strict decoding
//! error); a field whose feature gate is off there (by the emulated version) is silently dropped; a
//! rule a gate relaxes (environment variable names) refuses on the older minors only.

mod support;

use std::path::Path;

use support::demo::KubectlDemo;
use support::{kubectl, kubectl_ok};

/// The cluster's servers: name and what it is.
const SERVERS: [(&str, &str); 3] = [("a", "1.28"), ("b", "1.32 emulating 1.30"), ("c", "1.36")];

/// The manifests every server is given, each a file of its own.
const MANIFESTS: &[(&str, &str)] = &[
    (
        // SidecarContainers (on from 1.29), InPlacePodVerticalScaling (resizePolicy, on from 1.33).
        "sidecar-pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  initContainers:\n  - name: proxy\n    image: envoy\n    restartPolicy: Always\n  containers:\n  - name: app\n    image: nginx\n    resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}]\n",
    ),
    (
        // Without its restartPolicy the sidecar is a plain init container, which may not have probes.
        "sidecar-with-probe-pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: mesh}\nspec:\n  initContainers:\n  - name: proxy\n    image: envoy\n    restartPolicy: Always\n    readinessProbe: {tcpSocket: {port: 15001}}\n  containers:\n  - name: app\n    image: nginx\n",
    ),
    (
        // PodLifecycleSleepAction: the field is new in 1.29's types.
        "sleep-pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: graceful}\nspec:\n  containers:\n  - name: app\n    image: nginx\n    lifecycle: {preStop: {sleep: {seconds: 5}}}\n",
    ),
    (
        // JobBackoffLimitPerIndex and JobPodReplacementPolicy (both on from 1.29; 1.28 has the fields).
        "indexed-job.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: indexed}\nspec:\n  completionMode: Indexed\n  completions: 3\n  parallelism: 3\n  backoffLimitPerIndex: 1\n  podReplacementPolicy: Failed\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n",
    ),
    (
        // JobSuccessPolicy (on from 1.31) and JobManagedBy (on from 1.32): fields new in 1.30's types.
        "leader-job.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: leader}\nspec:\n  completionMode: Indexed\n  completions: 3\n  parallelism: 3\n  managedBy: example.com/queue\n  successPolicy:\n    rules: [{succeededIndexes: '0'}]\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n",
    ),
    (
        // ServiceTrafficDistribution (on from 1.31; the field is new in 1.30's types).
        "service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n  trafficDistribution: PreferClose\n",
    ),
    (
        // RelaxedEnvironmentVariableValidation (on from 1.32).
        "env-pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: legacy}\nspec:\n  containers:\n  - name: app\n    image: nginx\n    env: [{name: 1ST_PASS, value: 'yes'}]\n",
    ),
];

/// `text` with what varies between runs replaced: object uids and allocated IPv4 addresses.
fn redact(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let candidate: String = chars[i..chars.len().min(i + 36)].iter().collect();
        let is_uuid = candidate.len() == 36
            && candidate.char_indices().all(|(n, c)| match n {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit(),
            });
        if is_uuid {
            out.push_str("[uid]");
            i += 36;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out.lines()
        .map(|line| match line.trim_start().strip_prefix("clusterIP: ") {
            Some(_) => format!("{}clusterIP: [ip]", &line[..line.len() - line.trim_start().len()]),
            None if line.trim_start().starts_with("- 10.") => {
                format!("{}- [ip]", &line[..line.len() - line.trim_start().len()])
            }
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `spec:` block of `kubectl get -o yaml`'s output (up to the next top-level field).
fn spec_block(yaml: &str) -> String {
    let mut lines = yaml.lines().skip_while(|line| *line != "spec:");
    let mut block = String::new();
    if let Some(first) = lines.next() {
        block.push_str(first);
        block.push('\n');
    }
    for line in lines.take_while(|line| line.starts_with(' ') || line.starts_with('-')) {
        block.push_str(line);
        block.push('\n');
    }
    block
}

/// Creates every manifest through server `name` in a namespace of its own: the transcript of what
/// kubectl printed, and for each object created, its stored spec.
fn create_all(cluster: &KubectlDemo, name: &str, kubeconfig: &Path) -> String {
    let namespace = format!("on-{name}");
    kubectl_ok(kubeconfig, &["create", "namespace", &namespace]);
    let dir = cluster.dir.path();
    let mut transcript = String::new();
    for (file, yaml) in MANIFESTS {
        let path = dir.join(file);
        std::fs::write(&path, yaml).expect("manifest");
        let path = path.to_string_lossy();
        let (created, out, err) = kubectl(kubeconfig, &["create", "-n", &namespace, "-f", &path]);
        transcript.push_str(&format!(
            "$ kubectl create -f {file}\n{out}{}",
            err.replace(&*dir.to_string_lossy(), ".")
        ));
        if created {
            let stored = kubectl_ok(kubeconfig, &["get", "-n", &namespace, "-f", &path, "-o", "yaml"]);
            transcript.push_str(&format!("$ kubectl get -f {file} -o yaml   # its spec\n"));
            transcript.push_str(&spec_block(&stored));
        }
        transcript.push('\n');
    }
    redact(&transcript)
}

#[test]
fn the_same_manifests_are_kept_dropped_or_refused_as_each_minor_does() {
    let Some(cluster) = KubectlDemo::with_config(|_| {
        "servers:\n- name: a\n  version: \"1.28\"\n- name: b\n  version: \"1.32\"\n  flags: {emulated-version: \"1.30\"}\n\
         - name: c\n  version: \"1.36\"\nlb: none\n"
            .to_owned()
    }) else {
        return;
    };
    let mut report = String::new();
    for (name, what) in SERVERS {
        let transcript = create_all(&cluster, name, &cluster.kubeconfig(name));
        report.push_str(&format!("## server {name}: {what}\n\n{transcript}\n"));
    }
    // The premises the snapshot shows, asserted so that a change cannot hide in it.
    let sections: Vec<&str> = report.split("## server ").skip(1).collect();
    let [at_28, at_30, at_36] = sections.as_slice() else {
        panic!("three servers: {report}");
    };
    // A container's restartPolicy is indented under its list item (the pod's is not).
    let sidecar = "\n    restartPolicy: Always";
    assert!(!at_28.contains(sidecar), "1.28 drops the sidecar's restartPolicy");
    assert!(at_30.contains(sidecar) && at_36.contains(sidecar));
    assert!(!at_30.contains("resizePolicy") && at_36.contains("resizePolicy"));
    assert!(!at_30.contains("trafficDistribution") && at_36.contains("trafficDistribution: PreferClose"));
    assert!(!at_30.contains("managedBy") && at_36.contains("managedBy: example.com/queue"));
    assert!(at_28.contains("unknown field \"spec.trafficDistribution\""));
    assert!(at_28.contains("1ST_PASS") && at_30.contains("1ST_PASS\": a valid environment variable name"));
    assert!(
        !at_36.contains("Error from server"),
        "1.36 takes every manifest:\n{at_36}"
    );
    insta::assert_snapshot!(report);
}
