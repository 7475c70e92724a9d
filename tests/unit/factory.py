"""Realistic objects, shaped as the apiserver returns them for Kueue v0.19 / Kubernetes 1.36.

Only the builders live here; every message text a test uses is written out in the test itself,
verbatim as Kueue, kube-scheduler or the kubelet write it.
"""

from __future__ import annotations

import itertools
from typing import Any

NOW = "2026-11-30T10:00:00Z"
_uid = itertools.count(1)


def uid(prefix: str = "u") -> str:
    return f"{prefix}-{next(_uid):08d}-0000-4000-8000-000000000000"


def cond(ctype: str, status: str, reason: str, message: str = "", time: str = "2026-11-30T09:00:00Z") -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": time,
            "observedGeneration": 1}


def flavor(name: str, node_labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
           ) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": name, "uid": uid("rf"), "creationTimestamp": "2026-11-30T08:00:00Z"}, "spec": spec}


def cluster_queue(name: str, quotas: dict[str, dict[str, Any]], cohort: str | None = None,
                  used: dict[str, dict[str, str]] | None = None, strategy: str = "BestEffortFIFO",
                  stop_policy: str = "None", active: tuple[str, str, str] | None = ("True", "Ready",
                                                                                    "Can admit new workloads"),
                  namespace_selector: Any = None, covered: list[str] | None = None, reserving: int = 0,
                  admission_checks: list[str] | None = None) -> dict[str, Any]:
    """quotas: flavor -> resource -> nominal (str) or dict(nominalQuota=..., borrowingLimit=...)."""
    resources = covered or sorted({r for res in quotas.values() for r in res})
    flavors = []
    for fname, res in quotas.items():
        flavors.append({"name": fname, "resources": [
            {"name": r, **(v if isinstance(v, dict) else {"nominalQuota": v})} for r, v in res.items()]})
    spec: dict[str, Any] = {
        "namespaceSelector": {} if namespace_selector is None else namespace_selector,
        "queueingStrategy": strategy, "stopPolicy": stop_policy,
        "resourceGroups": [{"coveredResources": resources, "flavors": flavors}],
        "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                       "borrowWithinCohort": {"policy": "Never"}},
    }
    if namespace_selector == "null":
        spec["namespaceSelector"] = None
    if cohort:
        spec["cohortName"] = cohort
    if admission_checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in admission_checks]}
    status: dict[str, Any] = {"pendingWorkloads": 0, "reservingWorkloads": reserving, "admittedWorkloads": reserving}
    if active:
        status["conditions"] = [cond("Active", active[0], active[1], active[2], "2026-11-30T08:00:00Z")]
    status["flavorsReservation"] = [
        {"name": f, "resources": [{"name": r, "total": (used or {}).get(f, {}).get(r, "0"), "borrowed": "0"}
                                  for r in res]} for f, res in quotas.items()]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name, "uid": uid("cq"), "creationTimestamp": "2026-11-30T08:00:00Z"},
            "spec": spec, "status": status}


def local_queue(name: str, namespace: str, cq: str, stop_policy: str = "None") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace, "uid": uid("lq"),
                         "creationTimestamp": "2026-11-30T08:00:00Z"},
            "spec": {"clusterQueue": cq, "stopPolicy": stop_policy},
            "status": {"conditions": [cond("Active", "True", "Ready", "Can submit new workloads to localQueue")]}}


def job(name: str, namespace: str = "team-a", queue: str = "user-queue", parallelism: int = 1, suspend: bool = True,
        cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "uid": uid("job"),
                         "creationTimestamp": "2026-11-30T09:00:00Z", "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"parallelism": parallelism, "completions": parallelism, "suspend": suspend,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "main", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                          "resources": {"requests": {"cpu": cpu}}}]}}},
            "status": {}}


def workload(name: str, namespace: str = "team-a", queue: str = "user-queue", count: int = 1, cpu: str = "1",
             conditions: list[dict[str, Any]] | None = None, owner: dict[str, Any] | None = None,
             admission: dict[str, Any] | None = None, priority: int = 0, created: str = "2026-11-30T09:00:00Z",
             api_version: str = "kueue.x-k8s.io/v1beta2", **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid("wl"), "creationTimestamp": created,
                            "finalizers": ["kueue.x-k8s.io/resource-in-use"]}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True, "blockOwnerDeletion": True}]
        meta["labels"] = {"kueue.x-k8s.io/job-uid": owner["metadata"]["uid"]}
    st: dict[str, Any] = {"conditions": conditions or []}
    if admission is not None:
        st["admission"] = admission
    st.update(status)
    return {"apiVersion": api_version, "kind": "Workload", "metadata": meta,
            "spec": {"active": True, "queueName": queue, "priority": priority, "podSets": [
                {"name": "main", "count": count, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                     "resources": {"requests": {"cpu": cpu}}}]}}}]},
            "status": st}


def admission(cq: str, flavor_name: str = "default-flavor", count: int = 1, cpu: str = "1") -> dict[str, Any]:
    return {"clusterQueue": cq, "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": flavor_name}, "resourceUsage": {"cpu": cpu}, "count": count}]}


def admitted_conditions(cq: str, time: str = "2026-11-30T09:00:05Z") -> list[dict[str, Any]]:
    return [cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", time),
            cond("Admitted", "True", "Admitted", "The workload is admitted", time)]


def pod(name: str, owner: dict[str, Any], workload_name: str, phase: str = "Pending", node: str | None = None,
        conditions: list[dict[str, Any]] | None = None, container_statuses: list[dict[str, Any]] | None = None,
        gates: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53"}]}
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or [], "qosClass": "Burstable"}
    if container_statuses is not None:
        status["containerStatuses"] = container_statuses
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": owner["metadata"]["namespace"], "uid": uid("pod"),
                         "creationTimestamp": "2026-11-30T09:00:06Z",
                         "labels": {"kueue.x-k8s.io/podset": "main", "batch.kubernetes.io/job-name":
                                    owner["metadata"]["name"]},
                         "annotations": {"kueue.x-k8s.io/workload": workload_name},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                              "uid": owner["metadata"]["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": spec, "status": status}


def node(name: str, labels: dict[str, str] | None = None, cpu: str = "4") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": uid("node"), "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {},
            "status": {"capacity": {"cpu": cpu, "pods": "110"}, "allocatable": {"cpu": cpu, "pods": "110"},
                       "conditions": [cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")]}}


def event(involved: dict[str, Any], reason: str, message: str, type_: str = "Warning",
          time: str = "2026-11-30T09:30:00Z", count: int = 1) -> dict[str, Any]:
    """A core/v1 Event as `kubectl get events -o yaml` shows an events.k8s.io/v1 recorder's event."""
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{involved['metadata']['name']}.{uid('e')[:12]}",
                         "namespace": involved["metadata"].get("namespace", "default"), "uid": uid("ev"),
                         "creationTimestamp": time},
            "involvedObject": {"apiVersion": involved["apiVersion"], "kind": involved["kind"],
                               "name": involved["metadata"]["name"], "namespace": involved["metadata"].get("namespace"),
                               "uid": involved["metadata"]["uid"]},
            "reason": reason, "message": message, "type": type_, "count": count,
            "firstTimestamp": time, "lastTimestamp": time, "source": {"component": "job-controller"}}
