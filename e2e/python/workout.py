#!/usr/bin/env python3
"""Drives one server of a kube-mvp cluster with the official Kubernetes Python client.

Usage: workout.py KUBECONFIG SCENARIO SUFFIX

SCENARIO is `workloads` (writes, reads, a list, a watch, the four patch types and deletes of
ConfigMaps, Jobs, DaemonSets and ReplicationControllers) or `cluster` (what a real cluster has from
the start and what clients expect of it: the default/kubernetes Service, the bootstrap RBAC roles,
componentstatuses, field selectors on defaulted values, server-side apply into an empty map, a
metadata-only PATCH). SUFFIX keeps the names of one run apart from another's on the shared store.

Prints one JSON document of what the client saw, with nothing that varies between runs (no uids,
timestamps, resourceVersions or ports), for the Rust test (e2e/tests/python_client.rs) to snapshot.
An API error is recorded as {"error": CODE, "reason": REASON} in place of the step's result.
"""

import json
import sys
from urllib.parse import urlparse

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NAMESPACE = "default"


def step(fn):
    """The step's result, or the API error it raised."""
    try:
        return fn()
    except ApiException as e:
        body = {}
        try:
            body = json.loads(e.body or "{}")
        except ValueError:
            pass
        return {"error": e.status, "reason": body.get("reason", e.reason), "message": body.get("message")}


def outcome(answer):
    """`status` of a delete's answer: a Status (`Success`), or the deleted object's status."""
    if isinstance(answer, dict):
        return answer.get("status")
    return getattr(answer, "status", None)


def plain(api, obj):
    """A model as the JSON the server sent (field names as on the wire)."""
    return api.sanitize_for_serialization(obj)


def workloads(api, suffix):
    core = client.CoreV1Api(api)
    batch = client.BatchV1Api(api)
    apps = client.AppsV1Api(api)
    labels = {"client": "python", "run": suffix}
    pod = {"metadata": {"labels": {"app": f"py-{suffix}"}},
           "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    always = {"metadata": pod["metadata"], "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    selector = {"matchLabels": {"app": f"py-{suffix}"}}
    out = {}

    # Writes: the client sends these JSON bodies without a Content-Type header.
    cm = step(lambda: plain(api, core.create_namespaced_config_map(NAMESPACE, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"py-cm-{suffix}", "labels": labels}, "data": {"a": "1"}})))
    out["create_configmap"] = cm if "error" in cm else {"name": cm["metadata"]["name"], "data": cm["data"]}
    job = step(lambda: plain(api, batch.create_namespaced_job(NAMESPACE, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"py-job-{suffix}", "labels": labels}, "spec": {"template": pod}})))
    out["create_job"] = job if "error" in job else {
        "name": job["metadata"]["name"], "backoffLimit": job["spec"]["backoffLimit"],
        "status": job.get("status")}
    ds = step(lambda: plain(api, apps.create_namespaced_daemon_set(NAMESPACE, {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": f"py-ds-{suffix}", "labels": labels},
        "spec": {"selector": selector, "template": always}})))
    out["create_daemonset"] = ds if "error" in ds else {"name": ds["metadata"]["name"], "status": ds["status"]}
    rc = step(lambda: plain(api, core.create_namespaced_replication_controller(NAMESPACE, {
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": f"py-rc-{suffix}", "labels": labels},
        "spec": {"replicas": 0, "selector": {"app": f"py-{suffix}"}, "template": always}})))
    out["create_replicationcontroller"] = rc if "error" in rc else {
        "name": rc["metadata"]["name"], "status": rc["status"]}

    # Reads and a list.
    out["read_job"] = step(lambda: batch.read_namespaced_job(f"py-job-{suffix}", NAMESPACE).spec.template.spec.containers[0].image)
    out["read_daemonset_status"] = step(lambda: plain(api, apps.read_namespaced_daemon_set(f"py-ds-{suffix}", NAMESPACE).status))
    out["list_jobs"] = step(lambda: [j.metadata.name for j in batch.list_namespaced_job(
        NAMESPACE, label_selector=f"client=python,run={suffix}").items])
    out["list_configmaps"] = step(lambda: [c.metadata.name for c in core.list_namespaced_config_map(
        NAMESPACE, label_selector=f"run={suffix}").items])

    # A watch: the first event for the job (the existing object, as ADDED).
    def first_event():
        w = watch.Watch()
        for event in w.stream(batch.list_namespaced_job, NAMESPACE,
                              field_selector=f"metadata.name=py-job-{suffix}", timeout_seconds=20):
            w.stop()
            return {"type": event["type"], "name": event["object"].metadata.name}
        return None
    out["watch_job"] = step(first_event)

    # The four patch types, on a ConfigMap and (proxied where batch/v1 is a peer's) a Job.
    name = f"py-cm-{suffix}"
    patches = [
        ("json", "application/json-patch+json", [{"op": "add", "path": "/data/json", "value": "1"}]),
        ("merge", "application/merge-patch+json", {"data": {"merge": "1"}}),
        ("strategic", "application/strategic-merge-patch+json", {"data": {"strategic": "1"}}),
        ("apply", "application/apply-patch+yaml", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"apply": "1"}}),
    ]
    for kind, content_type, body in patches:
        extra = {"field_manager": "python-apply"} if kind == "apply" else {}
        out[f"patch_configmap_{kind}"] = step(lambda: core.patch_namespaced_config_map(
            name, NAMESPACE, body, _content_type=content_type, **extra).data)
    out["patch_job_strategic"] = step(lambda: batch.patch_namespaced_job(
        f"py-job-{suffix}", NAMESPACE, {"metadata": {"labels": {"patched": "yes"}}},
        _content_type="application/strategic-merge-patch+json").metadata.labels)
    out["managers"] = step(lambda: sorted(
        f"{m.manager}/{m.operation}" for m in core.read_namespaced_config_map(name, NAMESPACE).metadata.managed_fields))

    # Deletes.
    out["delete_job"] = step(lambda: outcome(batch.delete_namespaced_job(
        f"py-job-{suffix}", NAMESPACE, propagation_policy="Background")))
    out["delete_configmap"] = step(lambda: outcome(core.delete_namespaced_config_map(name, NAMESPACE)))
    out["delete_daemonset"] = step(lambda: outcome(apps.delete_namespaced_daemon_set(f"py-ds-{suffix}", NAMESPACE)))
    out["delete_replicationcontroller"] = step(lambda: outcome(core.delete_namespaced_replication_controller(
        f"py-rc-{suffix}", NAMESPACE)))
    out["read_deleted_configmap"] = step(lambda: core.read_namespaced_config_map(name, NAMESPACE).data)
    return out


def cluster(api, suffix, port):
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    out = {}

    def endpoint_ports():
        endpoints = core.read_namespaced_endpoints("kubernetes", NAMESPACE)
        return {p.port for s in endpoints.subsets for p in s.ports}

    def kubernetes_service():
        svc = core.read_namespaced_service("kubernetes", NAMESPACE)
        ports = [{"name": p.name, "port": p.port, "protocol": p.protocol,
                  "targetPort is a server's secure port": p.target_port in endpoint_ports()}
                 for p in svc.spec.ports]
        return {"clusterIP": svc.spec.cluster_ip, "type": svc.spec.type, "labels": svc.metadata.labels,
                "ports": ports}
    out["kubernetes_service"] = step(kubernetes_service)

    def kubernetes_endpoints():
        endpoints = core.read_namespaced_endpoints("kubernetes", NAMESPACE)
        return {"addresses": sum(len(s.addresses) for s in endpoints.subsets),
                "this server's port is listed": port in endpoint_ports()}
    out["kubernetes_endpoints"] = step(kubernetes_endpoints)

    def kubernetes_endpoint_slice():
        slice_ = client.DiscoveryV1Api(api).read_namespaced_endpoint_slice("kubernetes", NAMESPACE)
        return {"addressType": slice_.address_type, "endpoints": len(slice_.endpoints),
                "labels": slice_.metadata.labels}
    out["kubernetes_endpoint_slice"] = step(kubernetes_endpoint_slice)

    out["bootstrap_cluster_roles"] = step(lambda: sorted(
        r.metadata.name for r in rbac.list_cluster_role().items
        if r.metadata.name in ("cluster-admin", "admin", "edit", "view", "system:discovery")))
    out["cluster_admin_rules"] = step(lambda: plain(api, rbac.read_cluster_role("cluster-admin").rules))

    def component_statuses():
        return {cs.metadata.name: [{"type": c.type, "status": c.status, "message": c.message, "error": c.error}
                                   for c in cs.conditions]
                for cs in core.list_component_status().items}
    out["componentstatuses"] = step(component_statuses)
    out["componentstatus_scheduler"] = step(lambda: core.read_component_status("scheduler").metadata.name)

    node = f"py-node-{suffix}"
    out["create_node"] = step(lambda: core.create_node({"apiVersion": "v1", "kind": "Node",
                                                         "metadata": {"name": node}}).metadata.name)
    out["nodes_schedulable"] = step(lambda: [n.metadata.name for n in core.list_node(
        field_selector="spec.unschedulable==false").items if n.metadata.name == node])
    out["nodes_unschedulable"] = step(lambda: [n.metadata.name for n in core.list_node(
        field_selector="spec.unschedulable==true").items if n.metadata.name == node])
    out["delete_node"] = step(lambda: outcome(core.delete_node(node)))

    # Server-side apply by one manager: `data: {}`, then `data: {k1: new}`.
    cm = f"py-ssa-{suffix}"

    def apply(data):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm}, "data": data}
        applied = core.patch_namespaced_config_map(cm, NAMESPACE, body, field_manager="python-ssa",
                                                   _content_type="application/apply-patch+yaml")
        return {"data": applied.data,
                "fields": [m.fields_v1 for m in applied.metadata.managed_fields if m.manager == "python-ssa"]}
    out["apply_empty_data"] = step(lambda: apply({}))
    out["apply_k1"] = step(lambda: apply({"k1": "new"}))
    out["get_after_apply"] = step(lambda: core.read_namespaced_config_map(cm, NAMESPACE).data)

    # A metadata-only client's PATCH (as GET and LIST answer it).
    def metadata_patch():
        response = core.patch_namespaced_config_map(
            cm, NAMESPACE, {"metadata": {"labels": {"meta": "only"}}},
            _preload_content=False, _content_type="application/merge-patch+json",
            _headers={"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
        body = json.loads(response.data)
        return {"code": response.status, "content_type": response.headers.get("Content-Type"),
                "kind": body.get("kind"), "labels": body.get("metadata", {}).get("labels"),
                "has data": "data" in body}
    out["metadata_only_patch"] = step(metadata_patch)
    out["delete_ssa_configmap"] = step(lambda: outcome(core.delete_namespaced_config_map(cm, NAMESPACE)))
    return out


def main():
    kubeconfig, scenario, suffix = sys.argv[1:4]
    api = config.new_client_from_config(config_file=kubeconfig)
    port = urlparse(api.configuration.host).port
    if scenario == "workloads":
        result = workloads(api, suffix)
    elif scenario == "cluster":
        result = cluster(api, suffix, port)
    else:
        sys.exit(f"unknown scenario {scenario!r}")
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
