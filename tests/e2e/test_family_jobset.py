"""JobSets through Kueue's jobset integration, with the real JobSet controller (sigs.k8s.io/jobset), live.

The module fixture ``owner_kinds`` starts the JobSet controller (its webhooks registered) and restarts Kueue with
frameworks batch/job + jobset.x-k8s.io/jobset, for this module only. Each test makes the situation happen, asserts
what Kueue and the JobSet controller really wrote, records the snapshot (``scenario-family-jobset-*.yaml``,
replayed by tests/unit/test_regressions.py) and asserts the engine's verdict on it.
"""

from __future__ import annotations

from typing import Any

import pytest

from . import families, kube
from .kube import Resources, condition, condition_is, wait_for
from .test_scenarios import _pool, _queue

pytestmark = pytest.mark.e2e

CONTROLLERS = ("jobset",)
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset"]


def _rjob(name: str, replicas: int, parallelism: int, cpu: str,
          node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": families.IMAGE, "resources": {"requests": {"cpu": cpu}}}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {"name": name, "replicas": replicas, "template": {"spec": {
        "parallelism": parallelism, "completions": parallelism, "backoffLimit": 0, "template": {"spec": pod}}}}


def _jobset(name: str, namespace: str, queue: str, *rjobs: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {families.QUEUE_LABEL: queue}},
            "spec": {"replicatedJobs": list(rjobs)}}


def _children_suspended(api: Any, namespace: str, jobset: str, count: int) -> None:
    """JobSet v0.12 creates its child Jobs at once, suspended like the JobSet; no Pod exists."""
    jobs = [j for j in kube.list_objects(api, "Job", namespace)
            if j["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == jobset]
    assert len(jobs) == count and all(j["spec"]["suspend"] is True for j in jobs), jobs
    assert not [p for p in kube.list_objects(api, "Pod", namespace)
                if p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == jobset]


def _wl(api: Any, ns: str, name: str, ok: Any, what: str, timeout: float = 60) -> dict[str, Any]:
    return kube.wait_for_workload(api, ns, name, ok, timeout=timeout, what=what, kind="JobSet")


def _qr_message(w: dict[str, Any]) -> str:
    return str((condition(w, "QuotaReserved") or {}).get("message", ""))


def test_jobset_admitted_and_running(cluster: Any, resources: Resources, namespace: str, owner_kinds: Any) -> None:
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    created = resources.create(_jobset("trainer", namespace, lq, _rjob("leader", 1, 1, "500m"),
                                       _rjob("workers", 1, 2, "1")))
    assert created["spec"].get("suspend") is True, "Kueue's JobSet webhook suspends it at creation"
    wl = _wl(api, namespace, "trainer", lambda w: condition_is(w, "PodsReady"), "PodsReady=True")
    assert wl["status"]["admission"]["clusterQueue"] == cq
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("leader", 1), ("workers", 2)]
    js = kube.get(api, "jobset.x-k8s.io/JobSet", "trainer", namespace)
    assert js is not None and js["spec"]["suspend"] is False
    jobs = kube.list_objects(api, "Job", namespace)
    assert sorted(j["metadata"]["name"] for j in jobs) == ["trainer-leader-0", "trainer-workers-0"], jobs
    pods = kube.list_objects(api, "Pod", namespace)
    assert len(pods) == 3 and all(p["status"]["phase"] == "Running" for p in pods), pods
    objects = families.snapshot(api, [namespace])
    families.record("jobset-running", objects, "JobSet trainer (leader 1 x 500m, workers 2 x 1 cpu), admitted, Running")
    st = families.verdict(objects, namespace, owner=("JobSet", "trainer"), reason="Running", cause="PodsReady")
    assert st["pods"]["running"] == 3 and st["pods"]["expected"] == 3, st["pods"]


def test_jobset_replicated_job_exceeds_quota(cluster: Any, resources: Resources, namespace: str,
                                             owner_kinds: Any) -> None:
    """workers: 3 x 1 cpu, leader 1 x 500m, in a 2 cpu ClusterQueue: the workers pod set can never fit."""
    api = cluster.api_client
    rf, cq, lq = _queue(resources, namespace, {"cpu": "2"})
    resources.create(_jobset("greedy", namespace, lq, _rjob("leader", 1, 1, "500m"), _rjob("workers", 1, 3, "1")))
    wl = _wl(api, namespace, "greedy", lambda w: "maximum capacity" in _qr_message(w), "pending: maximum capacity")
    msg = _qr_message(wl)
    assert "pod set workers" in msg and f"flavor {rf}" in msg, msg
    js = kube.get(api, "jobset.x-k8s.io/JobSet", "greedy", namespace)
    assert js is not None and js["spec"]["suspend"] is True
    _children_suspended(api, namespace, "greedy", 2)
    objects = families.snapshot(api, [namespace])
    families.record("jobset-exceeds-quota", objects, f"JobSet greedy: workers 3 x 1 cpu + leader 500m > {cq} 2 cpu")
    st = families.verdict(objects, namespace, owner=("JobSet", "greedy"), reason="ExceedsMaxQuota",
                          cause="ExceedsNominalQuota")
    # the numbers of Kueue's "previously considered podsets requests (500m) + current podset request (3)" text
    assert st["clusterQueue"] == cq and "Needs 3 cpu" in st["message"] and "500m" in st["message"], st["message"]


def test_jobset_pods_unschedulable_in_one_replicated_job(cluster: Any, resources: Resources, namespace: str,
                                                         owner_kinds: Any) -> None:
    """Quota fits; the workers ask for a node label no node has: the leader runs, the workers stay Pending."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    resources.create(_jobset("split", namespace, lq, _rjob("leader", 1, 1, "500m"),
                             _rjob("workers", 1, 2, "1", node_selector={"example.test/accelerator": "tpu"})))

    def unschedulable() -> list[dict[str, Any]] | None:
        pods = kube.list_objects(api, "Pod", namespace)
        stuck = [p for p in pods if (c := condition(p, "PodScheduled")) and c.get("reason") == "Unschedulable"]
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return pods if len(stuck) == 2 and len(running) == 1 else None

    pods = wait_for(unschedulable, timeout=60, message="2 worker Pods Unschedulable and the leader Running")
    assert {p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in pods
            if p["status"].get("phase") != "Running"} == {"workers"}
    wl = kube.workload_for(api, namespace, "split", "JobSet")
    assert wl is not None and condition_is(wl, "Admitted") and not condition_is(wl, "PodsReady")
    wait_for(lambda: any(e.get("reason") == "FailedScheduling" for p in pods
                         for e in kube.events_for(api, namespace, p["metadata"]["name"], kind="Pod")
                         if p["status"].get("phase") != "Running"),
             timeout=30, message="the scheduler's FailedScheduling events")
    objects = families.snapshot(api, [namespace])
    families.record("jobset-workers-unschedulable", objects,
                    f"JobSet split admitted; workers' nodeSelector matches no node of pool {pool}")
    st = families.verdict(objects, namespace, owner=("JobSet", "split"), reason="PodsUnschedulable",
                          cause="NodeSelectorMismatch")
    assert st["pods"]["running"] == 1 and st["pods"]["expected"] == 3, st["pods"]
    assert "node affinity/selector" in st["message"] or "didn't match" in st["message"], st["message"]
    assert st["actionBy"] == "WorkloadOwner" and st["blocker"]["podSet"] == "workers", st  # the Job's own selector


def test_jobset_suspended_by_kueue_while_waiting_for_quota(cluster: Any, resources: Resources, namespace: str,
                                                           owner_kinds: Any) -> None:
    """A running JobSet holds 3 of 4 cpu; the second stays suspended by Kueue (its webhook, then its Workload)."""
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="8"))
    resources.create(_jobset("first", namespace, lq, _rjob("workers", 1, 3, "1")))
    _wl(api, namespace, "first", lambda w: condition_is(w, "PodsReady"), "PodsReady=True")
    resources.create(_jobset("second", namespace, lq, _rjob("workers", 1, 2, "1")))
    wl = _wl(api, namespace, "second", lambda w: "insufficient unused quota" in _qr_message(w),
             "pending: insufficient unused quota")
    wait_for(lambda: (kube.get(api, "ClusterQueue", cq) or {}).get("status", {}).get("reservingWorkloads") == 1,
             timeout=30, message=f"ClusterQueue {cq} to count the running JobSet")
    js = kube.get(api, "jobset.x-k8s.io/JobSet", "second", namespace)
    assert js is not None and js["spec"]["suspend"] is True
    _children_suspended(api, namespace, "second", 1)
    objects = families.snapshot(api, [namespace])
    families.record("jobset-suspended-waiting", objects,
                    "JobSet second (2 x 1 cpu) suspended by Kueue while first holds 3 of 4 cpu")
    st = families.verdict(objects, namespace, owner=("JobSet", "second"), reason="WaitingForQuota",
                          cause="InsufficientUnusedQuota")
    assert "Needs 1 more cpu" in st["message"], st["message"]
    assert _qr_message(wl).endswith("1 more needed"), _qr_message(wl)


def test_running_jobset_suspended_by_kueue_when_deactivated(cluster: Any, resources: Resources, namespace: str,
                                                            owner_kinds: Any) -> None:
    """Its Workload set spec.active=false: Kueue evicts it and suspends the running JobSet; the JobSet controller
    suspends its Jobs and their Pods go."""
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    resources.create(_jobset("paused", namespace, lq, _rjob("workers", 1, 2, "1")))
    wl = _wl(api, namespace, "paused", lambda w: condition_is(w, "PodsReady"), "PodsReady=True")
    kube.patch(api, "Workload", wl["metadata"]["name"], {"spec": {"active": False}}, namespace)
    _wl(api, namespace, "paused", lambda w: (condition(w, "Evicted") or {}).get("reason") == "Deactivated"
        and condition_is(w, "QuotaReserved", "False"), "Evicted/Deactivated and its quota released")
    wait_for(lambda: (kube.get(api, "jobset.x-k8s.io/JobSet", "paused", namespace) or {}).get("spec", {}).get(
        "suspend") is True and not kube.list_objects(api, "Pod", namespace), timeout=60,
        message="Kueue to suspend the JobSet and its Pods to go")
    _children_suspended(api, namespace, "paused", 1)
    objects = families.snapshot(api, [namespace])
    families.record("jobset-deactivated", objects, "running JobSet paused: Workload spec.active=false, Kueue suspended it")
    st = families.verdict(objects, namespace, owner=("JobSet", "paused"), reason="Deactivated",
                          cause="DeactivatedByUser")
    assert st["actionBy"] == "WorkloadOwner", st
