//! ValidatingAdmissionPolicies and their bindings, driven from outside: the built binary's `cluster`
//! demo and `kubectl` applying `tests/fixtures/admission_policy/policy.yaml`, then ConfigMaps a `Deny`
//! binding refuses and a `Warn` binding warns about.

mod support;

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use support::admission_policy::{EVERY_PAIR, case_config_map, every_pair_conditions, policy_on_case};
use support::demo::KubectlDemo;
use support::{kubectl, kubectl_ok};

/// `tests/fixtures/admission_policy/policy.yaml`: a policy refusing ConfigMaps by name, its `Deny`
/// binding and a `Warn` one.
static POLICY_FILE: LazyLock<PathBuf> = LazyLock::new(|| {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission_policy/policy.yaml")
});

#[test]
fn admission_policies_deny_and_warn_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    let out = kubectl_ok(&a, &["apply", "-f", &POLICY_FILE.to_string_lossy()]);
    assert_eq!(out.lines().count(), 4, "{out}");
    let mut transcript = Vec::new();

    // Denied by the Deny binding, with the message expression's text.
    let (created, _, denied) = kubectl(&a, &["create", "configmap", "settings", "--from-literal=a=b"]);
    assert!(!created, "the policy denies the name");
    transcript.push(format!(
        "$ kubectl create configmap settings --from-literal=a=b\n{denied}"
    ));
    let (found, _, _) = kubectl(&a, &["get", "configmap", "settings"]);
    assert!(!found, "nothing was written");

    // Admitted, with the Warn binding's warning.
    let (created, out, warned) = kubectl(&a, &["create", "configmap", "app-settings", "--from-literal=a=b"]);
    assert!(created, "{warned}");
    assert_eq!(out, "configmap/app-settings created\n");
    transcript.push(format!(
        "$ kubectl create configmap app-settings --from-literal=a=b\n{warned}"
    ));

    // Updates are admitted too: a labelled ConfigMap draws no warning.
    let (labelled, _, quiet) = kubectl(&a, &["label", "configmap", "app-settings", "team=web"]);
    assert!(labelled, "{quiet}");
    assert_eq!(quiet, "", "no warning once the label is there");

    insta::assert_snapshot!("admission_policy_kubectl", transcript.join("\n"));
}

/// A policy with `matchConditions` (only labelled ConfigMaps) and `variables` (each seeing the ones
/// before it, used by a validation and its message expression); and one whose condition fails, under
/// `failurePolicy: Fail`.
const CONDITIONS_AND_VARIABLES: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: few-keys}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  matchConditions:
  - {name: checked, expression: \"has(object.metadata.labels) && 'checked' in object.metadata.labels\"}
  variables:
  - {name: keys, expression: \"has(object.data) ? size(object.data) : 0\"}
  - {name: tooMany, expression: \"variables.keys > 1\"}
  validations:
  - {expression: \"!variables.tooMany\", messageExpression: \"'has ' + string(variables.keys) + ' keys, at most 1 allowed'\"}
  - {expression: \"!has(object.data.address) || isIP(object.data.address) || isCIDR(object.data.address)\", message: 'address is no IP or CIDR'}
  - {expression: \"!has(object.data.memory) || isQuantity(object.data.memory)\", message: 'memory is no quantity'}
  - {expression: \"!has(object.data.address) || !isCIDR(object.data.address) || cidr('10.0.0.0/8').containsCIDR(object.data.address)\", message: 'network outside 10.0.0.0/8'}
  - {expression: \"!has(object.data.address) || !isIP(object.data.address) || !ip(object.data.address).isLoopback()\", message: 'loopback address'}
  - {expression: \"!has(object.data.memory) || !isQuantity(object.data.memory) || quantity(object.data.memory).isLessThan(quantity('2Gi'))\", message: 'memory is 2Gi or more'}
  - {expression: \"!has(object.data.endpoint) || (isURL(object.data.endpoint) && url(object.data.endpoint).getScheme() == 'https')\", message: 'endpoint is no https URL'}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: few-keys}
spec: {policyName: few-keys, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  matchConditions:
  - {name: broken, expression: \"object.nothing == 1\"}
  validations:
  - {expression: \"true\"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: broken}
spec: {policyName: broken, validationActions: [Deny]}
";

#[test]
fn match_conditions_and_variables_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let (a, dir) = (cluster.kubeconfig("a"), &cluster.dir);
    cluster.apply(&a, "policies.yaml", CONDITIONS_AND_VARIABLES);
    let create = |name: &str, labels: &str| {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {{{labels}}}}}\ndata: {{a: '1', b: '2'}}\n"),
        )
        .expect("configmap");
        kubectl(&a, &["create", "-f", &file.to_string_lossy()])
    };
    let mut transcript = Vec::new();

    // The condition does not hold: the policy is not applied, two keys are fine.
    let (created, _, err) = create("unchecked", "team: web");
    assert!(created, "{err}");
    // It holds: the variables count the keys, the validation refuses, with the message expression's text.
    let (created, _, denied) = create("checked", "checked: 'yes'");
    assert!(!created, "two keys in a checked ConfigMap");
    transcript.push(format!(
        "$ kubectl create -f checked.yaml\n{}",
        denied.replace(&dir.path().display().to_string(), "[dir]")
    ));
    // Kubernetes' CEL checks: `isIP`, `isCIDR`, `isQuantity`, and the `cidr()`, `ip()`, `quantity()` and
    // `url()` values.
    for (name, data, admitted) in [
        ("cidr", "address: 10.0.0.0/8", true),
        ("ip", "address: fd00::1", true),
        ("bad-ip", "address: 10.0.0.300", false),
        ("outside", "address: 192.168.0.0/16", false),
        ("loopback", "address: 127.0.0.1", false),
        ("memory", "memory: 1Gi", true),
        ("bad-memory", "memory: 1 GB", false),
        ("much-memory", "memory: 2048Mi", false),
        ("https", "endpoint: 'https://example.com/x'", true),
        ("http", "endpoint: 'http://example.com/x'", false),
    ] {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {{checked: 'yes'}}}}\ndata: {{{data}}}\n"),
        )
        .expect("configmap");
        let (created, _, err) = support::kubectl(&a, &["create", "-f", &file.to_string_lossy()]);
        assert_eq!(created, admitted, "{name}: {err}");
        if !admitted {
            transcript.push(format!(
                "$ kubectl create -f {name}.yaml\n{}",
                err.replace(&dir.path().display().to_string(), "[dir]")
            ));
        }
    }
    // A condition that fails to evaluate, under failurePolicy Fail: the request is refused.
    let (created, _, failed) = kubectl(&a, &["create", "secret", "generic", "s", "--from-literal=a=b"]);
    assert!(!created, "the broken policy's condition fails closed");
    transcript.push(format!(
        "$ kubectl create secret generic s --from-literal=a=b\n{failed}"
    ));
    insta::assert_snapshot!("admission_policy_conditions_variables", transcript.join("\n"));
}

/// Policies with parameters: `secret-keys` takes the ConfigMap `limits` by name (`Deny` when it is
/// missing) and publishes an audit annotation from it, its binding also auditing failures; `service-account-labels` takes every ConfigMap
/// labelled `role: sa-limit` (`Allow` when there is none), one evaluation each.
const PARAMS: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: secret-keys}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  validations:
  - expression: \"!has(object.data) || size(object.data) <= int(params.data.max)\"
    messageExpression: \"'at most ' + params.data.max + ' keys'\"
  auditAnnotations:
  - {key: limit, valueExpression: \"params.data.max\"}
  - {key: nothing, valueExpression: \"null\"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: secret-keys}
spec:
  policyName: secret-keys
  validationActions: [Deny, Audit]
  paramRef: {name: limits, namespace: default, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: service-account-labels}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [serviceaccounts]}
  validations:
  - expression: \"has(object.metadata.labels) && params.data.label in object.metadata.labels\"
    messageExpression: \"'missing label ' + params.data.label\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: service-account-labels}
spec:
  policyName: service-account-labels
  validationActions: [Deny]
  paramRef:
    selector: {matchLabels: {role: sa-limit}}
    parameterNotFoundAction: Allow
";

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: \"\", resources: [secrets]}]
- level: None
";

#[test]
fn params_and_audit_annotations_with_kubectl() {
    let Some(cluster) = KubectlDemo::with_config(|dir| {
        let audit_policy = dir.join("audit.yaml");
        std::fs::write(&audit_policy, AUDIT_POLICY).expect("audit policy");
        format!(
            "servers:\n- name: a\n  version: \"1.36\"\n  flags: {{audit-policy-file: {}, audit-log-path: {}}}\nlb: none\n",
            audit_policy.display(),
            dir.join("audit/a.log").display()
        )
    }) else {
        return;
    };
    let (dir, log) = (&cluster.dir, cluster.dir.path().join("audit/a.log"));
    let a = dir.path().join("a.kubeconfig");
    cluster.apply(&a, "policies.yaml", PARAMS);
    let mut transcript = Vec::new();
    let mut run = |args: &[&str], admitted: bool| {
        let (ok, _, err) = kubectl(&a, args);
        assert_eq!(ok, admitted, "{args:?}: {err}");
        if !admitted {
            transcript.push(format!("$ kubectl {}\n{err}", args.join(" ")));
        }
    };

    // No `limits` yet: `Deny` refuses; then its limit applies.
    run(
        &["create", "secret", "generic", "s0", "--from-literal=a=1"],
        false,
    );
    run(&["create", "configmap", "limits", "--from-literal=max=1"], true);
    run(&["create", "secret", "generic", "s1", "--from-literal=a=1"], true);
    run(
        &[
            "create",
            "secret",
            "generic",
            "s2",
            "--from-literal=a=1",
            "--from-literal=b=2",
        ],
        false,
    );

    // No labelled ConfigMap: `Allow`, nothing evaluated; then one evaluation per parameter.
    run(&["create", "serviceaccount", "first"], true);
    run(
        &["create", "configmap", "team", "--from-literal=label=team"],
        true,
    );
    run(&["label", "configmap", "team", "role=sa-limit"], true);
    run(&["create", "configmap", "env", "--from-literal=label=env"], true);
    run(&["label", "configmap", "env", "role=sa-limit"], true);
    let sa = dir.path().join("sa.yaml");
    std::fs::write(
        &sa,
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: second, labels: {team: web}}\n",
    )
    .expect("sa");
    run(&["create", "-f", &sa.to_string_lossy()], false);
    let sa_text = std::fs::read_to_string(&sa)
        .expect("sa")
        .replace("team: web", "team: web, env: prod");
    std::fs::write(&sa, sa_text).expect("sa");
    run(&["create", "-f", &sa.to_string_lossy()], true);
    drop(cluster.demo);

    let transcript = transcript
        .join("\n")
        .replace(&dir.path().display().to_string(), "[dir]");
    insta::assert_snapshot!("admission_policy_params", transcript);

    // The admitted Secret's audit event carries `secret-keys/limit`, and no `secret-keys/nothing`.
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("the audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect();
    let created = events
        .iter()
        .find(|e| e["verb"] == "create" && e["responseStatus"]["code"] == 201)
        .unwrap_or_else(|| panic!("the create of s1 in {events:?}"));
    assert_eq!(created["annotations"]["secret-keys/limit"], "1", "{created}");
    assert!(
        created["annotations"].get("secret-keys/nothing").is_none(),
        "{created}"
    );
    // The refused one also carries the `Audit` action's failure.
    let refused = events
        .iter()
        .find(|e| e["verb"] == "create" && e["responseStatus"]["code"] == 422)
        .unwrap_or_else(|| panic!("the create of s2 in {events:?}"));
    assert_eq!(
        refused["annotations"]["validation.policy.admission.k8s.io/validation_failure"],
        r#"[{"message":"at most 1 keys","policy":"secret-keys","binding":"secret-keys","expressionIndex":0,"validationActions":["Deny","Audit"]}]"#,
        "{refused}"
    );
}

/// A 1.29 member of a mixed cluster does not serve the policies' API (beta, off by default), so, as
/// upstream's plugin behind its feature gate, it admits what the 1.30 member's policies deny: the
/// policies are in the shared store all along, the servers differ only in whether they run them.
#[test]
fn only_servers_that_serve_the_api_run_validating_policies() {
    let Some(cluster) = KubectlDemo::with_config(|_| {
        "servers:\n- name: a\n  version: \"1.30\"\n- name: b\n  version: \"1.29\"\nlb: none\n".to_owned()
    }) else {
        return;
    };
    let (a, b, dir) = (cluster.kubeconfig("a"), cluster.kubeconfig("b"), &cluster.dir);
    // The premise, as b's own discovery says: its admissionregistration.k8s.io/v1 has the webhook
    // configurations and not the policies (a's has both).
    let served = |kubeconfig: &Path| {
        kubectl_ok(
            kubeconfig,
            &["get", "--raw", "/apis/admissionregistration.k8s.io/v1"],
        )
    };
    let (on_a, on_b) = (served(&a), served(&b));
    assert!(on_b.contains("validatingwebhookconfigurations"), "{on_b}");
    assert!(!on_b.contains("validatingadmissionpolicies"), "{on_b}");
    assert!(on_a.contains("validatingadmissionpolicies"), "{on_a}");
    kubectl_ok(&a, &["apply", "-f", &POLICY_FILE.to_string_lossy()]);

    let (created, _, denied) = kubectl(&a, &["create", "configmap", "settings"]);
    assert!(!created, "a runs the Deny binding");
    assert!(
        denied.contains("ValidatingAdmissionPolicy 'configmap-names'"),
        "{denied}"
    );
    let (created, _, err) = kubectl(&b, &["create", "configmap", "settings"]);
    assert!(created, "b runs no validating policies: {err}");
    kubectl_ok(&a, &["get", "configmap", "settings"]);

    // A policy whose expression does not compile is refused at create, with upstream's field error
    // (through a: b's own discovery, 1.29's, has no such kind for kubectl to map).
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: broken}\n\
         spec:\n  matchConstraints:\n    resourceRules:\n    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}\n  \
         validations:\n  - {expression: \"object.\"}\n",
    )
    .expect("policy");
    let (created, _, err) = kubectl(&a, &["create", "-f", &broken.to_string_lossy()]);
    assert!(!created, "a policy that cannot compile is refused");
    assert!(
        err.contains(
            "The ValidatingAdmissionPolicy \"broken\" is invalid: spec.validations[0].expression: \
             Invalid value: \"object.\": compilation failed: ERROR: <input>:1:"
        ),
        "{err}"
    );
}

/// A policy refusing ConfigMaps (but `kube-root-ca.crt`, excluded by name, and those excluded by the
/// binding's own `excludeResourceRules`) whose binding's `matchResources` selects only namespaces
/// labelled `env: prod`; its message names the namespace (`namespaceObject`) and the user
/// (`request.userInfo`).
const SCOPED: &str = "apiVersion: v1
kind: Namespace
metadata: {name: prod, labels: {env: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: dev, labels: {env: dev}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: frozen-configmaps}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    excludeResourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps], resourceNames: [kube-root-ca.crt]}
  validations:
  - expression: \"false\"
    messageExpression: \"'no new ConfigMaps in ' + namespaceObject.metadata.name + ' (asked by ' + request.userInfo.username + ')'\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: frozen-configmaps-prod}
spec:
  policyName: frozen-configmaps
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
    excludeResourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps], resourceNames: [hotfix]}
";

#[test]
fn binding_match_resources_scope_a_policy_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "policies.yaml", SCOPED);
    let mut transcript = Vec::new();
    let mut create = |namespace: &str, name: &str, admitted: bool| {
        let args = ["create", "configmap", name, "-n", namespace, "--from-literal=a=b"];
        let (created, out, err) = kubectl(&a, &args);
        assert_eq!(created, admitted, "{args:?}: {err}");
        transcript.push(format!("$ kubectl {}\n{out}{err}", args.join(" ")));
    };

    // The binding selects prod: refused there, with the message's namespace and user.
    create("prod", "settings", false);
    // dev is not selected: the same create is admitted (its policy alone would match it).
    create("dev", "settings", true);
    // Excluded by the binding's excludeResourceRules, and by the policy's.
    create("prod", "hotfix", true);
    create("prod", "kube-root-ca.crt", true);
    // The namespace's labels are read at each request: dev, once labelled prod, is selected.
    kubectl_ok(&a, &["label", "namespace", "dev", "env=prod", "--overwrite"]);
    create("dev", "other", false);
    insta::assert_snapshot!("admission_policy_binding_match_resources", transcript.join("\n"));

    // What was admitted was stored, and nothing else.
    let get = |namespace: &str, name: &str| {
        kubectl(
            &a,
            &[
                "get",
                "configmap",
                name,
                "-n",
                namespace,
                "-o",
                "jsonpath={.data.a}",
            ],
        )
    };
    assert_eq!(get("dev", "settings"), (true, "b".to_owned(), String::new()));
    assert_eq!(get("prod", "hotfix"), (true, "b".to_owned(), String::new()));
    assert!(!get("prod", "settings").0, "the refused create wrote nothing");
    assert!(!get("dev", "other").0, "the refused create wrote nothing");
}

/// A `ValidatingAdmissionPolicy` [on the ConfigMaps labelled `case: <name>`](policy_on_case), with
/// `validations` given as a YAML flow list, and its `Deny` binding.
fn costly_policy(name: &str, failure_policy: &str, conditions: &str, validations: &str) -> String {
    let spec = format!("  validations: {validations}\n");
    policy_on_case(
        "ValidatingAdmissionPolicy",
        name,
        failure_policy,
        conditions,
        &spec,
        ", validationActions: [Deny]",
    )
}

/// Upstream's runtime cost limits (issue 19): over a ConfigMap of 1,000 keys, a validation comparing
/// every key with every other is over the per-call limit (its error: `operation cancelled: actual cost
/// limit exceeded`), eleven of them spend the binding's budget (`validation failed due to running out of
/// cost budget, …`), three such match conditions spend theirs; `failurePolicy: Fail` denies with those
/// texts, `Ignore` admits.
#[test]
fn cost_limits_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let (a, dir) = (cluster.kubeconfig("a"), &cluster.dir);
    let nested = EVERY_PAIR;
    let validation = format!("{{expression: \"{nested}\"}}");
    let eleven = format!("[{}]", [validation.as_str(); 11].join(", "));
    let conditions = every_pair_conditions();
    let policies = [
        costly_policy("call-limit", "Fail", "[]", &format!("[{validation}]")),
        costly_policy("call-limit-ignored", "Ignore", "[]", &format!("[{validation}]")),
        costly_policy("budget", "Fail", "[]", &eleven),
        costly_policy("budget-ignored", "Ignore", "[]", &eleven),
        costly_policy("conditions", "Fail", &conditions, "[{expression: 'false'}]"),
        costly_policy(
            "conditions-ignored",
            "Ignore",
            &conditions,
            "[{expression: 'false'}]",
        ),
    ]
    .concat();
    cluster.apply(&a, "policies.yaml", &policies);
    let mut transcript = Vec::new();
    for (name, admitted) in [
        ("call-limit", false),
        ("call-limit-ignored", true),
        ("budget", false),
        ("budget-ignored", true),
        ("conditions", false),
        ("conditions-ignored", true),
    ] {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, case_config_map(name, 1_000)).expect("configmap");
        let (created, _, err) = support::kubectl(&a, &["create", "-f", &file.to_string_lossy()]);
        assert_eq!(created, admitted, "{name}: {err}");
        if !admitted {
            transcript.push(format!(
                "$ kubectl create -f {name}.yaml\n{}",
                err.replace(&dir.path().display().to_string(), "[dir]")
            ));
        }
    }
    // Little data costs little: the same policies admit a ConfigMap of ten keys.
    let file = dir.path().join("small.yaml");
    std::fs::write(
        &file,
        case_config_map("budget", 10).replace("name: budget", "name: small"),
    )
    .expect("configmap");
    let (created, _, err) = support::kubectl(&a, &["create", "-f", &file.to_string_lossy()]);
    assert!(created, "{err}");
    insta::assert_snapshot!("admission_policy_cost_limits", transcript.join("\n"));
}

/// A policy on `CONNECT` (`kubectl exec` and `attach`): the options are `object` (`PodExecOptions`,
/// with the command kubectl sends), `oldObject` is null, `request.operation` `CONNECT`.
const ON_CONNECT: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-shell}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec, pods/attach]}
  validations:
  - {expression: \"request.operation == 'CONNECT' && oldObject == null && object.apiVersion == 'v1'\", message: 'not a connect'}
  - expression: \"object.kind != 'PodExecOptions' || !object.command.exists(c, c == 'sh')\"
    messageExpression: \"'may not run ' + object.command.join(' ') + ' in ' + request.name\"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-shell}
spec: {policyName: no-shell, validationActions: [Deny]}
";

/// `kubectl exec` is admitted by ValidatingAdmissionPolicies as a `CONNECT` of `pods/exec`: a shell is
/// refused with the policy's message, before the pod is even looked up; another command gets what a
/// cluster without kubelets answers.
#[test]
fn policies_admit_connections_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "policies.yaml", ON_CONNECT);
    kubectl_ok(&a, &["run", "web", "--image=busybox"]);
    let mut transcript = Vec::new();
    for (args, admitted) in [
        (&["exec", "web", "--", "sh", "-c", "ls"][..], false),
        // kubectl looks the pod up first; a request of its own shows admission comes before that.
        (
            &[
                "get",
                "--raw",
                "/api/v1/namespaces/default/pods/nothing-here/exec?command=sh",
            ][..],
            false,
        ),
        (&["exec", "web", "--", "ls"][..], true),
    ] {
        let (connected, out, err) = kubectl(&a, args);
        assert!(!connected, "there is no kubelet to exec in");
        assert_eq!(err.contains("may not run"), !admitted, "{args:?}: {err}");
        transcript.push(format!("$ kubectl {}\n{out}{err}", args.join(" ")));
    }
    insta::assert_snapshot!("admission_policy_connect", transcript.join("\n"));
}

/// A collection delete is admitted per object, as upstream's `DeleteCollection` deletes: each object
/// in name order, the policies judging each (`oldObject` the object); the first refusal ends the
/// request with that refusal, the objects before it deleted, those after it kept. `kubectl delete
/// --all` deletes one object at a time instead: the refused one is reported, the others are deleted.
#[test]
fn policies_admit_each_object_of_a_collection_delete_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "policies.yaml", ON_DELETE);
    kubectl_ok(&a, &["create", "namespace", "batch"]);
    let create = |names: &[&str]| {
        for name in names {
            kubectl_ok(
                &a,
                &["create", "configmap", name, "-n", "batch", "--from-literal=a=b"],
            );
        }
    };
    let remaining = || {
        let (_, out, _) = kubectl(&a, &["get", "configmaps", "-n", "batch", "-o", "name"]);
        out.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let mut transcript = Vec::new();

    create(&["a-first", "keep-me", "other", "warn-me"]);
    let raw = "/api/v1/namespaces/batch/configmaps";
    let (deleted, out, err) = kubectl(&a, &["delete", "--raw", raw]);
    assert!(!deleted, "keep-me's refusal fails the collection delete");
    transcript.push(format!("$ kubectl delete --raw {raw}\n{out}{err}"));
    assert_eq!(
        remaining(),
        ["configmap/keep-me", "configmap/other", "configmap/warn-me"],
        "a-first was deleted before keep-me was refused, the rest was not reached"
    );

    create(&["a-first"]);
    let args = ["delete", "configmaps", "--all", "-n", "batch"];
    let (deleted, out, err) = kubectl(&a, &args);
    assert!(!deleted, "kubectl reports keep-me's refusal");
    transcript.push(format!("$ kubectl {}\n{out}{err}", args.join(" ")));
    assert_eq!(remaining(), ["configmap/keep-me"]);
    insta::assert_snapshot!("admission_policy_collection_delete", transcript.join("\n"));
}

/// Policies on the DELETE of ConfigMaps: a `Deny` one keeping `keep-me` (judged on `oldObject`, with
/// `object` null and the request's operation `DELETE`) and a `Warn` one about `warn-me`.
const ON_DELETE: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: keep-me}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [DELETE], resources: [configmaps]}
  validations:
  - {expression: \"object == null && request.operation == 'DELETE'\", message: 'not a delete'}
  - {expression: \"oldObject.metadata.name != 'keep-me'\", messageExpression: \"'cannot delete ' + oldObject.metadata.name\"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: keep-me}
spec: {policyName: keep-me, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: warn-me}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [DELETE], resources: [configmaps]}
  validations:
  - {expression: \"oldObject.metadata.name != 'warn-me'\", message: 'warn-me was deleted'}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: warn-me}
spec: {policyName: warn-me, validationActions: [Warn]}
";

#[test]
fn policies_admit_deletes_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&[]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "policies.yaml", ON_DELETE);
    for name in ["keep-me", "other", "warn-me"] {
        kubectl_ok(&a, &["create", "configmap", name, "--from-literal=a=b"]);
    }
    let mut transcript = Vec::new();
    let mut delete = |name: &str, admitted: bool| {
        let args = ["delete", "configmap", name];
        let (deleted, out, err) = kubectl(&a, &args);
        assert_eq!(deleted, admitted, "{args:?}: {err}");
        transcript.push(format!("$ kubectl {}\n{out}{err}", args.join(" ")));
    };
    delete("keep-me", false);
    delete("other", true);
    delete("warn-me", true);
    insta::assert_snapshot!("admission_policy_delete", transcript.join("\n"));
    let exists = |name: &str| kubectl(&a, &["get", "configmap", name]).0;
    assert!(exists("keep-me"), "the refused delete deleted nothing");
    assert!(!exists("other") && !exists("warn-me"));
}

/// Who may do what (`default` namespace): alice and bob may create ConfigMaps; only alice may update
/// Deployments and delete ConfigMaps.
const AUTHORIZER_RBAC: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: configmap-writer, namespace: default}
rules:
- {apiGroups: [\"\"], resources: [configmaps], verbs: [create, get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: configmap-writers, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmap-writer}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: deployer, namespace: default}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: [update]}
- {apiGroups: [\"\"], resources: [configmaps], verbs: [delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deployer, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
";

/// Policies asking the authorizer: only who may update Deployments in the namespace creates
/// ConfigMaps there (`Deny`); a creator who may also delete the ConfigMap is warned, with the
/// authorizer's reason (`Warn`, through `authorizer.requestResource`); a mutating policy labels each
/// ConfigMap with whether its creator, and the service account `builder`, may update Deployments
/// (through a variable holding a `ResourceCheck`, and `authorizer.serviceAccount`).
const AUTHORIZER_POLICIES: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: deployers-only}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: \"authorizer.group('apps').resource('deployments').namespace(request.namespace).check('update').allowed()\"
    messageExpression: \"request.userInfo.username + ' may not update deployments in ' + request.namespace\"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: deployers-only}
spec: {policyName: deployers-only, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: may-delete}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: \"!authorizer.requestResource.check('delete').allowed()\"
    messageExpression: \"'the creator may delete it: ' + authorizer.requestResource.check('delete').reason()\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: may-delete}
spec: {policyName: may-delete, validationActions: [Warn]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label-deployers}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - {name: deployments, expression: \"authorizer.group('apps').resource('deployments').namespace(request.namespace)\"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {
          \"creator-deploys\": variables.deployments.check('update').allowed() ? 'yes' : 'no',
          \"builder-deploys\": authorizer.serviceAccount(request.namespace, 'builder').group('apps').resource('deployments').namespace(request.namespace).check('update').allowed() ? 'yes' : 'no'
        }}}
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label-deployers}
spec: {policyName: label-deployers}
";

/// `authorizer` in a policy, on a `--authorization-mode RBAC` cluster: the checks are made by the
/// server's RBAC for the requesting user (impersonated with `kubectl --as`), so alice, who may update
/// Deployments, creates a ConfigMap (warned that she may delete it, with RBAC's reason), bob, who may
/// not, is refused; the admin (`system:masters`) is allowed everything. A mutating policy's labels say
/// the same, and that the service account `builder` (bound to nothing) may not.
#[test]
fn the_authorizer_in_policies_with_kubectl() {
    let Some(cluster) = KubectlDemo::start(&["--authorization-mode", "Node,RBAC"]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "rbac.yaml", AUTHORIZER_RBAC);
    // RBAC decides on a snapshot its informers keep: wait until it has the bindings.
    support::kubectl_eventually(
        &a,
        &["auth", "can-i", "update", "deployments.apps", "--as", "alice"],
    );
    support::kubectl_eventually(&a, &["auth", "can-i", "create", "configmaps", "--as", "bob"]);
    cluster.apply(&a, "policies.yaml", AUTHORIZER_POLICIES);
    let mut transcript = Vec::new();
    let mut create = |name: &str, user: Option<&str>, admitted: bool| {
        let mut args = vec!["create", "configmap", name, "--from-literal=a=b"];
        args.extend(user.map(|user| ["--as", user]).into_iter().flatten());
        let (created, out, err) = kubectl(&a, &args);
        assert_eq!(created, admitted, "{args:?}: {err}");
        transcript.push(format!("$ kubectl {}\n{out}{err}", args.join(" ")));
    };
    create("from-alice", Some("alice"), true);
    create("from-bob", Some("bob"), false);
    create("from-admin", None, true);
    let columns = "custom-columns=NAME:.metadata.name,CREATOR:.metadata.labels.creator-deploys,BUILDER:.metadata.labels.builder-deploys";
    let labels = support::kubectl_ok(&a, &["get", "configmaps", "-o", columns]);
    transcript.push(format!("$ kubectl get configmaps -o {columns}\n{labels}"));
    // A method the library's type does not have is refused when the policy is written, as cel-go's
    // checker refuses it.
    let misused = cluster.dir.path().join("misused.yaml");
    let policy = AUTHORIZER_POLICIES
        .split("---\n")
        .next()
        .unwrap_or_default()
        .replace("deployers-only", "misused")
        .replace(
            "authorizer.group('apps').resource('deployments')",
            "authorizer.group('apps')",
        );
    std::fs::write(&misused, policy).expect("misused.yaml");
    let (applied, _, refused) = kubectl(&a, &["apply", "-f", &misused.to_string_lossy()]);
    assert!(!applied, "{refused}");
    transcript.push(format!("$ kubectl apply -f misused.yaml\n{refused}"));
    insta::assert_snapshot!("admission_policy_authorizer", transcript.join("\n"));
    assert!(
        !kubectl(&a, &["get", "configmap", "from-bob"]).0,
        "bob's was not written"
    );
}
