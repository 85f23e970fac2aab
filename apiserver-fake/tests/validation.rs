//! Built-in validation as a kubectl user meets it, driven from outside: the built binary's `cluster`
//! demo, `kubectl create` / `apply` / `patch` of invalid objects of every covered kind, and the exact
//! 422 message kubectl prints (snapshot); the `Status` body of the issue's Job without containers as
//! a client reads it over HTTPS.

mod support;

use std::path::{Path, PathBuf};

use support::demo::{Demo, KubectlDemo, admin, server};
use support::{kubectl, kubectl_available, kubectl_eventually};

/// One invalid object per covered kind, as a user would write it (`kubectl create -f`).
const INVALID: &[(&str, &str)] = &[
    (
        "job without containers (issue 19)",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: empty}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: []\n",
    ),
    (
        "job without restart policy",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: always}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: busybox}]\n",
    ),
    (
        "pod: names, images, ports, mounts, resources, probes",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  restartPolicy: Sometimes\n  volumes: [{name: data, emptyDir: {}}]\n  containers:\n  - name: Web\n    image: ''\n    ports: [{containerPort: 70000, name: http}, {containerPort: 81, name: http}]\n    volumeMounts: [{name: cache, mountPath: /cache}]\n    resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}\n    livenessProbe: {periodSeconds: 5}\n  - name: web\n    image: nginx\n  - name: web\n    image: nginx\n",
    ),
    (
        "pod quantity that does not parse (a decoding error, 400)",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: mem}\nspec:\n  containers:\n  - name: c\n    image: nginx\n    resources: {limits: {memory: 2GB}}\n",
    ),
    (
        "deployment selector not matching template labels",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: api}}\n    spec:\n      containers: [{name: c, image: nginx}]\n",
    ),
    (
        "replicaset with negative replicas",
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\nspec:\n  replicas: -1\n  selector: {matchLabels: {app: rs}}\n  template:\n    metadata: {labels: {app: rs}}\n    spec:\n      containers: [{name: c, image: nginx}]\n",
    ),
    (
        "statefulset whose pods do not restart",
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  serviceName: db\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: postgres}]\n",
    ),
    (
        "daemonset with a volume of two types",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      volumes: [{name: v, emptyDir: {}, hostPath: {path: /var}}]\n      containers: [{name: c, image: agent}]\n",
    ),
    (
        "cronjob schedule",
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  schedule: 0 25 * * *\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers: [{name: c, image: busybox}]\n",
    ),
    (
        "service ports and type",
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc}\nspec:\n  type: Internal\n  ports: [{name: http, port: 80}, {name: http, port: 0}]\n",
    ),
    (
        "configmap key",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {'app config': x}\n",
    ),
    (
        "tls secret without its key",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: tls}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==}\n",
    ),
    (
        "namespace finalizer",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\nspec: {finalizers: [cleanup]}\n",
    ),
    (
        "role rule without verbs",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: reader}\nrules: [{apiGroups: [''], resources: [pods], verbs: []}]\n",
    ),
    (
        "clusterrolebinding to a role",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}\nsubjects: [{kind: ServiceAccount, name: default}]\n",
    ),
    (
        "lease duration",
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: l}\nspec: {leaseDurationSeconds: 0}\n",
    ),
    (
        "ingress path",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: ing}\nspec:\n  rules:\n  - host: example.com\n    http:\n      paths: [{path: api, pathType: Prefix, backend: {service: {name: api}}}]\n",
    ),
    (
        "networkpolicy peer",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: np}\nspec:\n  podSelector: {}\n  ingress: [{from: [{}], ports: [{port: 70000}]}]\n",
    ),
    (
        "persistentvolumeclaim without access modes and storage",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: claim}\nspec: {resources: {requests: {}}}\n",
    ),
    (
        "serviceaccount name",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: Build_Bot}\n",
    ),
    (
        "secret key",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {'db password': eA==}\n",
    ),
    (
        "podtemplate without containers",
        "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: tpl}\ntemplate:\n  spec:\n    containers: []\n",
    ),
    (
        "validating webhook configuration: name, timeout, side effects, plain http url, review versions",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: hooks}\nwebhooks:\n- name: check\n  timeoutSeconds: 99\n  clientConfig: {url: 'http://hook.example.com/validate'}\n  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [pods]}]\n  admissionReviewVersions: [v2]\n",
    ),
    (
        "mutating webhook configuration: namespace and object selectors",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: selectors}\nwebhooks:\n- name: check.example.com\n  sideEffects: None\n  clientConfig: {url: 'https://hook.example.com/mutate'}\n  admissionReviewVersions: [v1]\n  namespaceSelector:\n    matchLabels: {team: 'a b'}\n    matchExpressions:\n    - {key: env, operator: In}\n    - {key: env, operator: Exists, values: [prod]}\n  objectSelector:\n    matchExpressions: [{key: -app, operator: Bogus, values: [web]}]\n",
    ),
];

/// `text` with every UUID replaced by `[uid]` (a Job's generated selector carries its uid).
fn redact_uids(text: &str) -> String {
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
    out
}

/// Runs kubectl, which must fail; its stderr.
fn refused(kubeconfig: &Path, args: &[&str]) -> String {
    let (succeeded, stdout, stderr) = kubectl(kubeconfig, args);
    assert!(!succeeded, "kubectl {args:?} succeeded: {stdout}");
    stderr
}

#[test]
fn invalid_objects_of_every_covered_kind_are_refused_with_upstreams_messages() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let b = server(&manifest, "b");
    let kubeconfig = PathBuf::from(b["kubeconfig"].as_str().expect("kubeconfig"));

    let mut transcript = String::new();
    for (n, (what, yaml)) in INVALID.iter().enumerate() {
        let file = dir.path().join(format!("invalid-{n}.yaml"));
        std::fs::write(&file, yaml).expect("write the manifest");
        let stderr = refused(&kubeconfig, &["create", "-f", &file.to_string_lossy()]);
        let stderr = stderr.replace(&*dir.path().to_string_lossy(), "[dir]");
        transcript.push_str(&format!("# {what}\n{stderr}\n"));
    }

    // A ConfigMap over 1 MiB, from a file as users make them.
    let big = dir.path().join("big.txt");
    std::fs::write(&big, "x".repeat(1024 * 1024 + 1)).expect("write the big file");
    let stderr = refused(
        &kubeconfig,
        &[
            "create",
            "configmap",
            "big",
            &format!("--from-file={}", big.display()),
        ],
    );
    transcript.push_str(&format!("# configmap over 1 MiB\n{stderr}\n"));
    // A Secret over 1 MiB, from the same file.
    let stderr = refused(
        &kubeconfig,
        &[
            "create",
            "secret",
            "generic",
            "big",
            &format!("--from-file={}", big.display()),
        ],
    );
    transcript.push_str(&format!("# secret over 1 MiB\n{stderr}\n"));

    // Updates: a Job's template is immutable, a Service's cluster IP may not change once set.
    let job = dir.path().join("job.yaml");
    let job_yaml = |image: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: pi}}\nspec:\n  template:\n    spec:\n      \
             restartPolicy: Never\n      containers: [{{name: pi, image: '{image}'}}]\n"
        )
    };
    std::fs::write(&job, job_yaml("perl:5.34")).expect("write the job");
    let job_path = job.to_string_lossy().into_owned();
    let (created, _, err) = kubectl(&kubeconfig, &["apply", "-f", &job_path]);
    assert!(created, "{err}");
    std::fs::write(&job, job_yaml("perl:5.36")).expect("edit the job");
    let stderr = refused(&kubeconfig, &["apply", "-f", &job_path]);
    transcript.push_str(&format!("# job template changed\n{}\n", redact_uids(&stderr)));

    let (created, _, err) = kubectl(
        &kubeconfig,
        &["create", "service", "clusterip", "web", "--tcp=80:8080"],
    );
    assert!(created, "{err}");
    let stderr = refused(
        &kubeconfig,
        &[
            "patch",
            "service",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"clusterIP":"10.96.0.250","clusterIPs":["10.96.0.250"]}}"#,
        ],
    );
    transcript.push_str(&format!("# service cluster IP changed\n{stderr}\n"));

    // Nothing invalid was stored.
    let (listed, out, err) = kubectl(
        &kubeconfig,
        &["get", "jobs,pods,deployments,podtemplates,secrets", "-o", "name"],
    );
    assert!(listed, "{err}");
    assert_eq!(out, "job.batch/pi\n");

    insta::assert_snapshot!("kubectl_invalid_objects", transcript);
}

#[test]
fn the_status_body_of_a_job_without_containers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let client = admin(dir.path(), server(&manifest, "b"));
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let reply = runtime.block_on(client.post(
        "/apis/batch/v1/namespaces/default/jobs",
        r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},
            "spec":{"template":{"spec":{"containers":[]}}}}"#,
    ));
    assert_eq!(reply.status.as_u16(), 422);
    insta::assert_json_snapshot!("job_without_containers_status", reply.json());
}

/// `$ kubectl <args>` and what kubectl printed (stdout, then stderr), for a transcript.
fn transcript_of(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let (ok, stdout, stderr) = kubectl(kubeconfig, args);
    (ok, format!("$ kubectl {}\n{stdout}{stderr}", args.join(" ")))
}

/// The everyday update mistakes real clusters refuse (issue 19), through a 1.33 and a 1.36 server:
/// patching a Deployment's strategy to `Recreate` and leaving its `rollingUpdate` (the famous error),
/// and the patch that works; a changed selector; `kubectl set image` and `kubectl label` on a Pod
/// (allowed) and a patch of its ports (refused, with the diff); an immutable ConfigMap replaced with
/// new data as `kubectl edit` would write it. Before 1.34 the bad values print as Go values, from 1.34
/// as JSON.
#[test]
fn everyday_update_mistakes_are_refused_as_a_real_cluster_refuses_them() {
    let Some(cluster) = KubectlDemo::with_config(|_| {
        "servers:\n- {name: old, version: \"1.33\"}\n- {name: new, version: \"1.36\"}\nlb: none\n".to_owned()
    }) else {
        return;
    };
    let mut transcript = String::new();
    let mut edits = Vec::new();
    for server in ["old", "new"] {
        let config = cluster.kubeconfig(server);
        kubectl_eventually(&config, &["get", "namespace", "default"]);
        transcript.push_str(&format!("# {server}\n"));
        let mut step = |args: &[&str], expect_ok: bool| {
            let (ok, text) = transcript_of(&config, args);
            assert_eq!(ok, expect_ok, "{text}");
            transcript.push_str(&text);
        };
        let web = format!("web-{server}");
        step(&["create", "deployment", &web, "--image=nginx"], true);
        step(
            &[
                "patch",
                "deployment",
                &web,
                "-p",
                r#"{"spec":{"strategy":{"type":"Recreate"}}}"#,
            ],
            false,
        );
        step(
            &[
                "patch",
                "deployment",
                &web,
                "-p",
                r#"{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}"#,
            ],
            true,
        );
        step(
            &[
                "patch",
                "deployment",
                &web,
                "--type=merge",
                "-p",
                r#"{"spec":{"selector":{"matchLabels":{"tier":"front"}},"template":{"metadata":{"labels":{"tier":"front"}}}}}"#,
            ],
            false,
        );
        let pod = format!("pod-{server}");
        step(&["run", &pod, "--image=nginx:1.27", "--restart=Never"], true);
        step(
            &[
                "set",
                "image",
                &format!("pod/{pod}"),
                &format!("{pod}=nginx:1.28"),
            ],
            true,
        );
        step(&["label", "pod", &pod, "tier=front"], true);
        let ports =
            format!(r#"{{"spec":{{"containers":[{{"name":"{pod}","ports":[{{"containerPort":8080}}]}}]}}}}"#);
        step(&["patch", "pod", &pod, "-p", &ports], false);
        let cfg = format!("cfg-{server}");
        step(&["create", "configmap", &cfg, "--from-literal=mode=blue"], true);
        step(&["patch", "configmap", &cfg, "-p", r#"{"immutable":true}"#], true);
        // `kubectl edit`: the object as read, changed, written back.
        let (ok, stdout, stderr) = kubectl(&config, &["get", "configmap", &cfg, "-o", "json"]);
        assert!(ok, "{stderr}");
        let mut edited: serde_json::Value = serde_json::from_str(&stdout).expect("a ConfigMap");
        edited["data"]["mode"] = serde_json::json!("green");
        let file = cluster.dir.path().join(format!("{cfg}.json"));
        std::fs::write(&file, edited.to_string()).expect("write the edited ConfigMap");
        let (ok, text) = transcript_of(&config, &["replace", "-f", &file.to_string_lossy()]);
        assert!(!ok, "{text}");
        edits.push(text.replace(&*cluster.dir.path().to_string_lossy(), "[dir]"));
    }
    transcript.push_str(&format!(
        "# kubectl edit of an immutable ConfigMap\n{}",
        edits.concat()
    ));
    insta::assert_snapshot!("kubectl_update_mistakes", transcript);
}
