"""kube-scheduler's failures split into causes, on the real control plane: the blocker and the node counts.

Each test admits a Job through Kueue onto fake nodes built for it, waits for kube-scheduler to mark a Pod
``PodScheduled=False/Unschedulable``, reads everything back and diagnoses it. It asserts the cause and who acts,
``status.blocker`` (what blocks, with the numbers) and ``status.nodeMatches``, recounted here from the Node
objects the API server returned, so the funnel has to agree with the nodes and with kube-scheduler's own count.
The snapshots are recorded as fixtures (``KUEUE_DOCTOR_RECORD_FIXTURES=1``) and replayed offline by
``tests/unit/test_regressions.py``. The untolerated taint and the flavor's node labels are
``test_scenarios.py``'s ``test_admitted_but_*`` tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.builders import Job

from . import kube
from .conftest import ClusterHandle
from .kube import Resources, condition_is, wait_for, wait_for_workload
from .test_scenarios import POOL_LABEL, _diagnosis, _pool, _queue, _unschedulable_pod, _verdict, _wait_diagnosis

pytestmark = pytest.mark.e2e


def _nodes(api: Any) -> list[dict[str, Any]]:
    return kube.list_objects(api, "Node")


def _in_pool(nodes: list[dict[str, Any]], pool: str) -> list[dict[str, Any]]:
    return [n for n in nodes if (n["metadata"].get("labels") or {}).get(POOL_LABEL) == pool]


def _steps(st: Mapping[str, Any]) -> dict[str, int]:
    return {s["constraint"]: s["nodes"] for s in st["nodeMatches"]}


def _fits_nodes(api: Any, namespace: str, job: str, cause: str, record: str, note: str, pool: str, **blocker: Any,
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`_unschedulable` on the flavor's one-node pool, with the blocker every node-capacity cause shares checked:
    one node counted by kube-scheduler out of all the cluster's, the pool's node its only candidate."""
    st = _unschedulable(api, namespace, job, cause, record, note)
    nodes = _nodes(api)
    assert st["blocker"] == {"name": "cpu", "podSet": "main", "nodes": 1, "totalNodes": len(nodes), **blocker}, st
    assert len(_in_pool(nodes, pool)) == 1, nodes
    return st, nodes


def _unschedulable(api: Any, namespace: str, job: str, cause: str, record: str, note: str) -> dict[str, Any]:
    """The diagnosis once the Workload is admitted and a Pod is Unschedulable with this cause; recorded."""
    wait_for_workload(api, namespace, job, lambda w: condition_is(w, "Admitted"), what="Admitted=True")
    wait_for(lambda: _unschedulable_pod(api, namespace, job), message="PodScheduled=False/Unschedulable")
    _wait_diagnosis(api, namespace, job, lambda s: s.get("cause") == cause,
                    what=f"PodsUnschedulable/{cause}")
    st, _ = _diagnosis(api, namespace, job, record=record, note=note)
    return st


def test_pod_larger_than_any_node_of_the_flavor(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    """The flavor's only node allocates 2 cpu; each Pod asks 3. Kueue's quota (8) admits it; nothing ever fits."""
    api = cluster.api_client
    pool = _pool(resources, cpu="2")
    rf, _cq, lq = _queue(resources, namespace, {"cpu": "8"}, pool)
    resources.create(Job("whale", namespace).queue(lq).request("cpu", "3").manifest())
    st, nodes = _fits_nodes(api, namespace, "whale", "PodTooLarge", "unschedulable-pod-too-large",
                            "3 cpu per Pod, the flavor's node allocates 2", pool, kind="PodTooLarge", flavor=rf,
                            requested="3", available="2", source="Nodes")
    assert _verdict(st) == ("Scheduling", "PodsUnschedulable", "PodTooLarge", "WorkloadOwner"), st
    assert _in_pool(nodes, pool)[0]["status"]["allocatable"]["cpu"] == "2"
    assert _steps(st) == {"Nodes": len(nodes), "NodeSelector": 1, "Allocatable": 0}, st["nodeMatches"]
    assert "waiting never helps" in st["message"] and "at most 2" in st["message"], st["message"]
    owner = [r for r in st["remedies"] if r["actionBy"] == "WorkloadOwner"]
    assert [(r["kind"], r["name"], r["now"], r["enough"], r["exact"]) for r in owner] == [
        ("Job", "whale", "3", "<= 2", False)], st["remedies"]


def test_insufficient_cpu_on_the_flavor_node(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    """The flavor's node (2 cpu) runs a 2-cpu Job; the next 1-cpu Job is admitted by Kueue (quota 8) and waits."""
    api = cluster.api_client
    pool = _pool(resources, cpu="2")
    rf, _cq, lq = _queue(resources, namespace, {"cpu": "8"}, pool)
    resources.create(Job("hog", namespace).queue(lq).request("cpu", "2").manifest())
    wait_for_workload(api, namespace, "hog", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    resources.create(Job("late", namespace).queue(lq).request("cpu", "1").manifest())
    st, nodes = _fits_nodes(api, namespace, "late", "InsufficientResources", "unschedulable-insufficient-cpu",
                            "the flavor's 2-cpu node is full", pool, kind="Resource", flavor=rf, requested="1",
                            available="0", source="Estimate")
    assert _verdict(st) == ("Scheduling", "PodsUnschedulable", "InsufficientResources", "ClusterAdmin"), st
    assert _steps(st) == {"Nodes": len(nodes), "NodeSelector": 1, "Allocatable": 1, "Free": 0}, st["nodeMatches"]
    free = next(s for s in st["nodeMatches"] if s["constraint"] == "Free")
    assert free["exact"] is False  # Pods kueue-doctor does not see use the nodes too
    waiting = st["pods"]["waiting"][0]
    assert waiting["message"].startswith(f"0/{len(nodes)} nodes are available: 1 Insufficient cpu"), waiting


def test_job_node_selector_matches_no_node(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    """The Job itself selects a label no node carries (the flavor has none): its owner must fix it."""
    api = cluster.api_client
    _pool(resources, cpu="4")
    _rf, _cq, lq = _queue(resources, namespace, {"cpu": "4"})
    selector = {"kueue-doctor.local/disk": kube.unique_name("nvme")}
    resources.create(Job("picky", namespace).queue(lq).request("cpu", "1").node_selector(selector).manifest())
    st = _unschedulable(api, namespace, "picky", "NodeSelectorMismatch", "unschedulable-job-node-selector",
                        "the Job's own nodeSelector matches no node")
    nodes = _nodes(api)
    key, value = next(iter(selector.items()))
    assert _verdict(st) == ("Scheduling", "PodsUnschedulable", "NodeSelectorMismatch", "WorkloadOwner"), st
    assert st["blocker"]["kind"] == "NodeSelector" and st["blocker"]["name"] == f"{key}={value}", st["blocker"]
    assert st["blocker"]["nodes"] == len(nodes), st["blocker"]  # every node: kube-scheduler's count
    assert _steps(st) == {"Nodes": len(nodes), "NodeSelector": 0}, st["nodeMatches"]
    assert [(r["actionBy"], r["field"]) for r in st["remedies"]] == [
        ("WorkloadOwner", f"spec.template.spec.nodeSelector[{key}]")], st["remedies"]


def test_claim_asks_for_a_storage_class_that_does_not_exist(cluster: ClusterHandle, resources: Resources,
                                                            namespace: str) -> None:
    """The Pods mount a claim whose StorageClass does not exist. kube-scheduler says only "unbound immediate
    PersistentVolumeClaims"; the PersistentVolume controller's Warning on the claim names the class, and the
    diagnosis quotes it with who fixes what."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _rf, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    storage_class = kube.unique_name("fast-ssd")
    resources.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                      "metadata": {"name": "data", "namespace": namespace},
                      "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                               "resources": {"requests": {"storage": "1Gi"}}}})
    job = Job("stateful", namespace).queue(lq).request("cpu", "1").manifest()
    job["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    resources.create(job)
    wait_for_workload(api, namespace, "stateful", lambda w: condition_is(w, "Admitted"), what="Admitted=True")
    wait_for(lambda: _unschedulable_pod(api, namespace, "stateful"), message="PodScheduled=False/Unschedulable")
    _wait_diagnosis(api, namespace, "stateful", lambda s: "says ProvisioningFailed" in s["message"], timeout=60,
                    what="the claim's ProvisioningFailed Warning quoted")
    st, _ = _diagnosis(api, namespace, "stateful", record="unschedulable-claim-storage-class-missing",
                       note="the Pods' claim asks for a StorageClass that does not exist")
    assert _verdict(st) == ("Scheduling", "PodsUnschedulable", "VolumeNotBound", "ClusterAdmin"), st
    assert "pod has unbound immediate PersistentVolumeClaims" in st["message"], st["message"]
    assert f'storageclass.storage.k8s.io "{storage_class}" not found' in st["message"], st["message"]
    assert f"StorageClass {storage_class} does not exist: the owner fixes the claim's storageClassName" in \
        st["message"], st["message"]
    assert st["blocker"]["kind"] == "Volume" and st["blocker"]["name"] == "data", st["blocker"]


HOLD_FINALIZER = "kueue-doctor.test/hold"  # keeps the drained Pod readable: the Job controller drops its own at once


def _release(api: Any, namespace: str, pod: str) -> None:
    current = kube.get(api, "Pod", pod, namespace)
    if current is not None:
        kept = [f for f in current["metadata"].get("finalizers") or [] if f != HOLD_FINALIZER]
        kube.patch(api, "Pod", pod, {"metadata": {"finalizers": kept}}, namespace)


def test_drained_pod_is_history_while_its_replacement_is_unschedulable(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """kubectl drain: the node is cordoned and the running Pod evicted (DisruptionTarget, killed: Error 137); the
    Job's replacement finds no node. The verdict is about the replacement; the old Error is history."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    node = _in_pool(_nodes(api), pool)[0]["metadata"]["name"]
    _rf, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    resources.create(Job("drained", namespace).queue(lq).request("cpu", "1").manifest())
    wait_for_workload(api, namespace, "drained", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    (old,) = kube.pods_of_job(api, namespace, "drained")
    name = old["metadata"]["name"]
    finalizers = [*(old["metadata"].get("finalizers") or []), HOLD_FINALIZER]
    kube.patch(api, "Pod", name, {"metadata": {"finalizers": finalizers}}, namespace)
    try:
        kube.patch(api, "Node", node, {"spec": {"unschedulable": True}})  # the drain: cordon, then evict
        kube.request_json(api, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                             {"apiVersion": "policy/v1", "kind": "Eviction",
                              "metadata": {"name": name, "namespace": namespace}})
        wait_for(lambda: _unschedulable_pod(api, namespace, "drained"), message="the replacement Unschedulable")
        st = _wait_diagnosis(api, namespace, "drained", lambda s: s["reason"] == "PodsUnschedulable" and
                             s.get("pods", {}).get("history"), what="PodsUnschedulable with the drained Pod as history")
        drained = kube.get(api, "Pod", name, namespace)
        assert drained is not None and drained["status"]["phase"] == "Failed", drained
        assert any(c["type"] == "DisruptionTarget" and c["status"] == "True"
                   for c in drained["status"]["conditions"]), drained["status"]
        st, _ = _diagnosis(api, namespace, "drained", record="drained-pod-replaced",
                           note="drain: old Pod Failed (DisruptionTarget), replacement on a cordoned pool")
    finally:
        _release(api, namespace, name)
    assert _verdict(st)[:2] == ("Scheduling", "PodsUnschedulable"), st  # not ContainersNotStarting/PodsFailed
    pods = st["pods"]
    assert (pods["created"], pods["failed"]) == (1, 0), pods
    assert pods["waiting"][0]["pod"] != name and pods["waiting"][0]["category"] == "Unschedulable", pods
    (history,) = pods["history"]
    assert (history["pod"], history["category"], history["reason"]) == (name, "Replaced", "Error"), history
    assert any(e["kind"] == "Pod" and e["name"] == name and e["field"] == "status (replaced)"
               for e in st["evidence"]), st["evidence"]
    assert "replaced Pod(s) failed earlier" in st["message"], st["message"]
