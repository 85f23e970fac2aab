//! Who may connect to a pod, driven from outside with kubectl on a `Node,RBAC` cluster: from 1.35 an
//! exec asked with another verb than `create` (kubectl's websocket `GET`, a plain `GET`) must also be
//! allowed `create` on `pods/exec` (upstream's `AuthorizePodWebsocketUpgradeCreatePermission`), which
//! the connection checks after admission, as kube-apiserver's.

mod support;

use support::demo::KubectlDemo;
use support::{kubectl, kubectl_eventually, kubectl_ok};

/// bob may `get` `pods/exec` but not `create` it; carol may both.
const RBAC: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: exec-get, namespace: default}
rules:
- {apiGroups: [\"\"], resources: [pods], verbs: [get, list]}
- {apiGroups: [\"\"], resources: [pods/exec], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: exec-create, namespace: default}
rules:
- {apiGroups: [\"\"], resources: [pods], verbs: [get, list]}
- {apiGroups: [\"\"], resources: [pods/exec], verbs: [get, create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: exec-get}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: exec-create}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
";

#[test]
fn exec_needs_create_whatever_the_verb_it_is_asked_with() {
    let Some(cluster) = KubectlDemo::start(&["--authorization-mode", "Node,RBAC"]) else {
        return;
    };
    let a = cluster.kubeconfig("a");
    cluster.apply(&a, "rbac.yaml", RBAC);
    // RBAC decides on a snapshot its informers keep: wait until it has the bindings.
    kubectl_eventually(
        &a,
        &[
            "auth",
            "can-i",
            "get",
            "pods",
            "--subresource=exec",
            "--as",
            "bob",
        ],
    );
    kubectl_eventually(
        &a,
        &[
            "auth",
            "can-i",
            "create",
            "pods",
            "--subresource=exec",
            "--as",
            "carol",
        ],
    );
    kubectl_ok(&a, &["run", "web", "--image=busybox"]);
    let raw = "/api/v1/namespaces/default/pods/web/exec?command=ls";
    let mut transcript = Vec::new();
    for args in [
        &["get", "--raw", raw, "--as", "bob"][..],
        &["exec", "web", "--as", "bob", "--", "ls"][..],
        &["get", "--raw", raw, "--as", "carol"][..],
        &["exec", "web", "--as", "carol", "--", "ls"][..],
    ] {
        let (connected, out, err) = kubectl(&a, args);
        assert!(!connected, "there is no kubelet to exec in");
        let allowed = args.contains(&"carol");
        assert_eq!(
            err.contains("does not have a host assigned"),
            allowed,
            "{args:?}: {err}"
        );
        transcript.push(format!("$ kubectl {}\n{out}{err}", args.join(" ")));
    }
    insta::assert_snapshot!("exec_needs_create", transcript.join("\n"));
}
