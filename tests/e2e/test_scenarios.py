"""Scenarios end to end: real objects, real Kueue/Job controller/kube-scheduler, then the diagnosis.

Each test creates the queues and a Job, waits for Kueue (and the scheduler) to reach the state the
scenario is about, reads the objects back with ``cluster_snapshot`` and runs
``kueue_doctor.diagnose_objects`` on exactly what the API server returned. It asserts the verdict
(stage, reason, cause, actionBy) and the facts behind it (quota numbers, pods, blockedBy,
lastEviction). Every diagnosis must validate against the AdmissionDiagnosis model.

``KUEUE_DOCTOR_RECORD_FIXTURES=1`` writes each snapshot to ``tests/e2e/fixtures/scenario-*.yaml``;
``tests/unit/test_regressions.py`` replays them offline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from tests.builders import ClusterQueue, Job, LocalQueue, Quota, ResourceFlavor, WorkloadPriorityClass

from . import kube
from .conftest import ClusterHandle
from .kube import Resources, condition, condition_is, wait_for, wait_for_workload
from .kueue_reasons import KueueReasons

pytestmark = pytest.mark.e2e

POOL_LABEL = "kueue-doctor.local/pool"
ROOT = Path(__file__).resolve().parents[2]


# ---- set-up helpers --------------------------------------------------------------------------


def _pool(resources: Resources, cpu: str = "4", taints: Iterable[Mapping[str, str]] = ()) -> str:
    """A fake node in its own pool; returns the pool label value a flavor can select."""
    pool = kube.unique_name("pool")
    resources.node(kube.unique_name("node"), labels={POOL_LABEL: pool}, cpu=cpu, memory="8Gi", taints=taints)
    return pool


def _flavor(resources: Resources, pool: str | None = None, taints: Iterable[Mapping[str, str]] = ()) -> str:
    rf = ResourceFlavor(kube.unique_name("rf")).node_labels({POOL_LABEL: pool} if pool else {})
    for t in taints:
        rf.node_taint(t["key"], t.get("value"), t["effect"])
    return str(resources.create(rf.manifest())["metadata"]["name"])


Configure = Callable[[ClusterQueue], ClusterQueue]


def _cluster_queue(resources: Resources, flavors: Mapping[str, Mapping[str, Quota]],
                   configure: Configure = lambda cq: cq) -> str:
    cq = configure(ClusterQueue(kube.unique_name("cq")).quotas(flavors))
    return str(resources.create(cq.manifest())["metadata"]["name"])


def _local_queue(resources: Resources, namespace: str, cq: str, name: str = "main") -> str:
    resources.create(LocalQueue(name, namespace, cq).manifest())
    return name


def _queue(resources: Resources, namespace: str, quota: Mapping[str, Quota], pool: str | None = None,
           configure: Configure = lambda cq: cq) -> tuple[str, str, str]:
    """ResourceFlavor (on ``pool``) + ClusterQueue (``configure``d) + LocalQueue 'main'."""
    rf = _flavor(resources, pool)
    cq = _cluster_queue(resources, {rf: quota}, configure)
    return rf, cq, _local_queue(resources, namespace, cq)


def _qr_false(wl: Mapping[str, Any]) -> bool:
    c = condition(wl, "QuotaReserved")
    return c is not None and c["status"] == "False" and bool(c.get("message"))


def _wait_pending(api: Any, namespace: str, job: str, contains: str = "", timeout: float = 30) -> dict[str, Any]:
    """The Workload once Kueue wrote QuotaReserved=False with a message (containing ``contains``)."""
    return wait_for_workload(
        api, namespace, job,
        lambda w: _qr_false(w) and contains in (condition(w, "QuotaReserved") or {}).get("message", ""),
        timeout=timeout, what=f"QuotaReserved=False with a message containing {contains!r}",
    )


# ---- snapshot and diagnosis ------------------------------------------------------------------


def _snapshot(api: Any, namespaces: Iterable[str]) -> list[dict[str, Any]]:
    namespaces = list(namespaces)
    objects = kube.cluster_snapshot(api, namespaces)
    for ns in namespaces:  # the Namespace objects too (labels decide the ClusterQueue's namespaceSelector)
        obj = kube.get(api, "Namespace", ns)
        if obj is not None:
            objects.append(obj)
    return objects


def _diagnose(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = diagnose_objects(objects)
    for d in out:
        AdmissionDiagnosis.model_validate(d)  # exactly what the operator would write
    return out


def _of(diagnoses: list[dict[str, Any]], namespace: str, job: str) -> dict[str, Any]:
    for d in diagnoses:
        if d["metadata"]["namespace"] == namespace and d["spec"].get("ownerRef", {}).get("name") == job:
            return d
    raise AssertionError(f"no diagnosis for Job {namespace}/{job} among {[d['metadata']['name'] for d in diagnoses]}")


def _diagnosis(api: Any, namespace: str, job: str, *, record: str | None = None, note: str = "",
               extra_namespaces: Iterable[str] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """(status, whole diagnosis) of the Job's Workload, from a fresh snapshot (recorded if asked)."""
    objects = _snapshot(api, [namespace, *extra_namespaces])
    if record:
        kube.record_fixture(f"scenario-{record}", objects, note=note or record)
    d = _of(_diagnose(objects), namespace, job)
    return d["status"], d


def _verdict(st: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return st["stage"], st["reason"], st["cause"], st["actionBy"]


def _line(st: Mapping[str, Any], resource: str, flavor: str | None = None) -> dict[str, Any]:
    for line in st.get("quota", []):
        if line["resource"] == resource and (flavor is None or line["flavor"] == flavor):
            return dict(line)
    raise AssertionError(f"no status.quota line for {resource} in {flavor}: {st.get('quota')}")


def _wait_diagnosis(api: Any, namespace: str, job: str, ok: Callable[[Mapping[str, Any]], object],
                    timeout: float = 30, what: str = "diagnosis") -> dict[str, Any]:
    """Poll the diagnosis until ``ok(status)``: for facts that arrive a little later (events, pods)."""
    last: dict[str, Any] = {}

    def check() -> dict[str, Any] | None:
        st, _ = _diagnosis(api, namespace, job)
        last["st"] = st
        return st if ok(st) else None

    return wait_for(check, timeout=timeout, message=lambda: f"{what}; last diagnosis {last.get('st')}")


# ---- 1. quota: the Headlamp blog case --------------------------------------------------------


def test_job_larger_than_nominal_quota_exceeds_max_quota(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    """parallelism 3 x 1 cpu against a ClusterQueue of 2 cpu / 2 pods, no cohort: never fits."""
    api = cluster.api_client
    rf, cq, lq = _queue(resources, namespace, {"cpu": "2", "pods": "2"})
    resources.create(Job("blog", namespace).queue(lq).request("cpu", "1").parallelism(3).completions(3).manifest())
    wl = _wait_pending(api, namespace, "blog", "maximum capacity")
    st, _ = _diagnosis(api, namespace, "blog", record=kueue_reasons.fixture("exceeds-nominal-quota"),
                       note="Headlamp blog case, 3 x 1 cpu > 2")
    assert _verdict(st) == ("Admission", "ExceedsMaxQuota", "ExceedsNominalQuota", "QueueAdmin"), st
    kueue_reasons.check(api, namespace, "blog", st, "ExceedsMaxQuota")
    assert st["clusterQueue"] == cq and st["localQueue"] == lq
    cpu = _line(st, "cpu", rf)
    assert (cpu["requested"], cpu["nominal"], cpu["maximum"]) == ("3", "2", "2"), cpu
    assert cpu["source"] == "Kueue"
    if "pods" in condition(wl, "QuotaReserved")["message"]:  # type: ignore[index]
        pods = _line(st, "pods", rf)
        assert (pods["requested"], pods["nominal"], pods["maximum"]) == ("3", "2", "2"), pods
    assert "Needs 3 cpu" in st["message"] and "no cohort" in st["message"], st["message"]
    assert "pods" not in st or st["pods"]["created"] == 0
    assert "blockedBy" not in st and "lastEviction" not in st
    # the way out, exactly: nominalQuota 2 -> 3 (cpu, and pods where Kueue counts them), or parallelism 3 -> 2
    ways = [(r["actionBy"], r["kind"], r["field"].rsplit(".", 1)[-1], r["now"], r["enough"], r["exact"])
            for r in st["remedies"]]
    short = 2 if "pods" in condition(wl, "QuotaReserved")["message"] else 1  # type: ignore[index]
    assert ways == [("QueueAdmin", "ClusterQueue", "nominalQuota", "2", "3", True)] * short + [
        ("WorkloadOwner", "Job", "parallelism", "3", "2", True)], st["remedies"]


def test_job_waits_for_quota_used_by_a_running_job(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    """Enough nominal quota (4 cpu), but a running Job holds 2: 1 cpu more is needed right now."""
    api = cluster.api_client
    pool = _pool(resources, cpu="8")
    rf, cq, lq = _queue(resources, namespace, {"cpu": "4", "pods": "4"}, pool)
    resources.create(Job("hog", namespace).queue(lq).request("cpu", "2").manifest())
    wait_for_workload(api, namespace, "hog", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    resources.create(Job("blog", namespace).queue(lq).request("cpu", "1").parallelism(3).manifest())
    _wait_pending(api, namespace, "blog", "insufficient unused quota")
    st, _d = _diagnosis(api, namespace, "blog", record=kueue_reasons.fixture("waiting-for-unused-quota"),
                       note="running Job holds 2 of 4 cpu")
    assert _verdict(st) == ("Admission", "WaitingForQuota", "InsufficientUnusedQuota", "Nobody"), st
    kueue_reasons.check(api, namespace, "blog", st, "WaitingForQuota")
    assert st["clusterQueue"] == cq
    cpu = _line(st, "cpu", rf)
    assert cpu["missing"] == "1" and cpu["nominal"] == "4" and cpu["used"] == "2", cpu
    assert cpu["requested"] == "3", cpu
    assert "Needs 1 more cpu" in st["message"], st["message"]
    hog, _ = _diagnosis(api, namespace, "hog")
    assert _verdict(hog) == ("Running", "Running", "PodsReady", "Nobody"), hog


# ---- 2. queues that do not exist -------------------------------------------------------------


def test_job_pointing_at_a_missing_local_queue(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    resources.create(Job("lost", namespace).queue("no-such-queue").request("cpu", "100m").manifest())
    wl = _wait_pending(api, namespace, "lost")
    assert condition(wl, "QuotaReserved")["message"] == "LocalQueue no-such-queue doesn't exist"  # type: ignore[index]
    st, _ = _diagnosis(api, namespace, "lost", record=kueue_reasons.fixture("local-queue-not-found"),
                       note="queue-name names no LocalQueue")
    assert _verdict(st) == ("Admission", "QueueMisconfigured", "LocalQueueNotFound", "WorkloadOwner"), st
    kueue_reasons.check(api, namespace, "lost", st, "Misconfigured")
    assert st["localQueue"] == "no-such-queue"
    assert "no-such-queue" in st["message"]


def test_local_queue_pointing_at_a_missing_cluster_queue(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    missing = kube.unique_name("cq-missing")
    lq = _local_queue(resources, namespace, missing)
    resources.create(Job("orphan", namespace).queue(lq).request("cpu", "100m").manifest())
    wl = _wait_pending(api, namespace, "orphan")
    st, _ = _diagnosis(api, namespace, "orphan", record=kueue_reasons.fixture("cluster-queue-not-found"),
                       note="LocalQueue -> missing CQ")
    assert _verdict(st) == ("Admission", "QueueMisconfigured", "ClusterQueueNotFound", "ClusterAdmin"), (
        st, condition(wl, "QuotaReserved"))
    kueue_reasons.check(api, namespace, "orphan", st, "Misconfigured")
    assert st["clusterQueue"] == missing
    assert missing in st["message"]


# ---- 3. stopped and broken ClusterQueues -----------------------------------------------------


def test_cluster_queue_on_hold_stops_admission(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, configure=lambda q: q.stop_policy("Hold"))
    resources.create(Job("held", namespace).queue(lq).request("cpu", "100m").manifest())
    wl = _wait_pending(api, namespace, "held")
    st, _ = _diagnosis(api, namespace, "held", record=kueue_reasons.fixture("cluster-queue-stopped"),
                       note="stopPolicy Hold")
    assert _verdict(st) == ("Admission", "QueueStopped", "ClusterQueueStopped", "ClusterAdmin"), (
        st, condition(wl, "QuotaReserved"))
    kueue_reasons.check(api, namespace, "held", st, "Suspended")
    assert st["clusterQueue"] == cq and "Hold" in st["message"]


def test_cluster_queue_with_a_missing_flavor(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    missing = kube.unique_name("rf-missing")
    cq = _cluster_queue(resources, {missing: {"cpu": "4"}})
    lq = _local_queue(resources, namespace, cq)
    wait_for(
        lambda: condition_is(kube.get(api, "ClusterQueue", cq), "Active", "False"),
        message="the ClusterQueue to be inactive",
    )
    resources.create(Job("flavorless", namespace).queue(lq).request("cpu", "100m").manifest())
    wl = _wait_pending(api, namespace, "flavorless")
    st, _ = _diagnosis(api, namespace, "flavorless", record=kueue_reasons.fixture("flavor-not-found"),
                       note="CQ names a missing flavor")
    assert _verdict(st) == ("Admission", "QueueMisconfigured", "FlavorNotFound", "ClusterAdmin"), (
        st, condition(wl, "QuotaReserved"))
    kueue_reasons.check(api, namespace, "flavorless", st, "Suspended")
    assert missing in st["message"], st["message"]
    active = condition(kube.get(api, "ClusterQueue", cq), "Active")
    assert active is not None and missing in active["message"], active


def _misconfigured(api: Any, namespace: str, job: str, kueue_reasons: KueueReasons, *, kueue_says: str,
                   fixture: str, note: str, verdict: tuple[str, str, str, str], granular: str) -> dict[str, Any]:
    """The Job's Workload pending with Kueue's message containing `kueue_says`; its diagnosis (recorded as
    `fixture`) has `verdict` and names the reason of the wording Kueue runs with. The diagnosis' status."""
    wl = _wait_pending(api, namespace, job)
    assert kueue_says in condition(wl, "QuotaReserved")["message"]  # type: ignore[index]
    st, _ = _diagnosis(api, namespace, job, record=kueue_reasons.fixture(fixture), note=note)
    assert _verdict(st) == verdict, st
    kueue_reasons.check(api, namespace, job, st, granular)
    return st

# ---- 4. namespace and resources the ClusterQueue does not take -------------------------------


def test_namespace_not_selected_by_the_cluster_queue(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, configure=lambda q: q.namespace_selector(
        {"matchLabels": {"kueue-doctor.local/team": "nobody"}}))
    resources.create(Job("outsider", namespace).queue(lq).request("cpu", "100m").manifest())
    st = _misconfigured(api, namespace, "outsider", kueue_reasons,
                        kueue_says="namespace doesn't match ClusterQueue selector", fixture="namespace-not-selected",
                        note="namespaceSelector", granular="Misconfigured",
                        verdict=("Admission", "QueueMisconfigured", "NamespaceNotSelected", "ClusterAdmin"))
    assert namespace in st["message"] and "kueue-doctor.local/team" in st["message"], st["message"]


def test_a_limitrange_default_the_queue_does_not_cover_is_for_the_cluster_admin(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    """kueue#4848: the Job asks only for cpu; the namespace's LimitRange gives its container an ephemeral-storage
    default, which Kueue counts and the ClusterQueue does not cover. The owner cannot remove a request it never
    made: the cluster admin acts."""
    api = cluster.api_client
    resources.create({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": namespace},
                      "spec": {"limits": [{"type": "Container", "default": {"ephemeral-storage": "1Gi"},
                                           "defaultRequest": {"ephemeral-storage": "512Mi"}}]}})
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"})
    resources.create(Job("scratch", namespace).queue(lq).request("cpu", "100m").manifest())
    st = _misconfigured(api, namespace, "scratch", kueue_reasons,
                        kueue_says="resource ephemeral-storage unavailable in ClusterQueue",
                        fixture="limitrange-resource-not-covered", granular="NoMatchingFlavor",
                        note="ephemeral-storage from a LimitRange default, not covered",
                        verdict=("Admission", "QueueMisconfigured", "ResourceNotCovered", "ClusterAdmin"))
    assert "No container of the Job asks for ephemeral-storage" in st["message"], st["message"]


def test_resource_not_covered_by_the_cluster_queue(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"})
    gpu = Job("gpu", namespace).queue(lq).request("cpu", "100m").request("example.com/gpu", "1")
    resources.create(gpu.limit("example.com/gpu", "1").manifest())
    st = _misconfigured(api, namespace, "gpu", kueue_reasons,
                        kueue_says="resource example.com/gpu unavailable in ClusterQueue",
                        fixture="resource-not-covered", note="example.com/gpu not covered", granular="NoMatchingFlavor",
                        verdict=("Admission", "QueueMisconfigured", "ResourceNotCovered", "WorkloadOwner"))
    assert "example.com/gpu" in st["message"] and "covers cpu" in st["message"], st["message"]


# ---- 5. cohorts ------------------------------------------------------------------------------


def _cohort_pair(resources: Resources, namespace: str, own: Quota, lender: str, pool: str | None = None
                 ) -> tuple[str, str, str, str]:
    """Flavor shared by two ClusterQueues in one cohort; only the first has a LocalQueue here."""
    rf = _flavor(resources, pool)
    cohort = kube.unique_name("co")
    cq = _cluster_queue(resources, {rf: {"cpu": own}}, lambda q: q.cohort(cohort))
    _cluster_queue(resources, {rf: {"cpu": lender}}, lambda q: q.cohort(cohort))
    return rf, cohort, cq, _local_queue(resources, namespace, cq)


def test_job_borrows_from_the_cohort_and_runs(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    rf, cohort, cq, lq = _cohort_pair(resources, namespace, "1", "2", pool)
    resources.create(Job("borrower", namespace).queue(lq).request("cpu", "2").manifest())
    wait_for_workload(api, namespace, "borrower", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    st, _ = _diagnosis(api, namespace, "borrower", record="borrowing-running", note="borrows 1 cpu from the cohort")
    assert _verdict(st) == ("Running", "Running", "PodsReady", "Nobody"), st
    assert st["clusterQueue"] == cq and st["cohort"] == cohort
    assert st["flavors"] == [rf]
    assert st["pods"]["running"] == 1 and st["pods"]["ready"] == 1


def test_borrowing_limit_stops_the_job(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    rf, cohort, _cq, lq = _cohort_pair(resources, namespace, {"nominalQuota": "1", "borrowingLimit": "1"}, "4")
    resources.create(Job("greedy", namespace).queue(lq).request("cpu", "3").manifest())
    _wait_pending(api, namespace, "greedy", "maximum capacity")
    st, _ = _diagnosis(api, namespace, "greedy", record=kueue_reasons.fixture("borrowing-limit"),
                       note="3 cpu > nominal 1 + borrowingLimit 1")
    assert _verdict(st) == ("Admission", "ExceedsMaxQuota", "BorrowingLimitReached", "ClusterAdmin"), st
    kueue_reasons.check(api, namespace, "greedy", st, "ExceedsMaxQuota")
    assert st["cohort"] == cohort
    cpu = _line(st, "cpu", rf)
    assert (cpu["requested"], cpu["nominal"], cpu["borrowingLimit"], cpu["maximum"]) == ("3", "1", "1", "2"), cpu
    assert "borrowingLimit 1" in st["message"], st["message"]


# ---- 6. admitted, but the Pods cannot be placed ----------------------------------------------


def _unschedulable_pod(api: Any, namespace: str, job: str) -> dict[str, Any] | None:
    for pod in kube.pods_of_job(api, namespace, job):
        c = condition(pod, "PodScheduled")
        if c and c["status"] == "False" and c.get("reason") == "Unschedulable":
            return pod
    return None


def _assert_unschedulable(api: Any, namespace: str, job: str, rf: str, text: str, record: str,
                          cause: str) -> dict[str, Any]:
    wait_for_workload(api, namespace, job, lambda w: condition_is(w, "Admitted"), what="Admitted=True")
    wait_for(lambda: _unschedulable_pod(api, namespace, job), message="PodScheduled=False/Unschedulable")
    st = _wait_diagnosis(
        api, namespace, job,
        lambda s: s["reason"] == "PodsUnschedulable" and any(text in w.get("message", "") for w in
                                                            s.get("pods", {}).get("waiting", [])),
        what=f"PodsUnschedulable with {text!r} in status.pods.waiting",
    )
    _diagnosis(api, namespace, job, record=record, note=f"admitted, kube-scheduler: {text}")
    assert _verdict(st) == ("Scheduling", "PodsUnschedulable", cause, "ClusterAdmin"), st
    assert st["flavors"] == [rf]
    waiting = st["pods"]["waiting"][0]
    assert re.match(r"0/\d+ nodes are available: ", waiting["message"]), waiting
    assert st["pods"]["expected"] == 1 and st["pods"]["created"] == 1 and st["pods"]["scheduled"] == 0, st["pods"]
    return st


def test_admitted_but_no_node_has_the_flavor_labels(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    api = cluster.api_client
    _pool(resources, cpu="4")  # a node exists, in another pool
    rf, _, lq = _queue(resources, namespace, {"cpu": "4"}, kube.unique_name("nowhere"))
    resources.create(Job("stranded", namespace).queue(lq).request("cpu", "1").manifest())
    st = _assert_unschedulable(api, namespace, "stranded", rf, "didn't match Pod's node affinity/selector",
                               "unschedulable-node-labels", "NodeSelectorMismatch")
    nodes = kube.list_objects(api, "Node")
    labels = kube.get(api, "ResourceFlavor", rf)["spec"]["nodeLabels"]  # type: ignore[index]
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    # the flavor's nodeLabels match no node: the admin's to fix; kube-scheduler rejected every node for it
    assert st["blocker"] == {"kind": "NodeSelector", "name": selector, "flavor": rf, "podSet": "main",
                             "nodes": len(nodes), "totalNodes": len(nodes), "source": "Nodes"}, st["blocker"]
    assert [(s["constraint"], s["nodes"]) for s in st["nodeMatches"]] == [("Nodes", len(nodes)),
                                                                          ("NodeSelector", 0)], st["nodeMatches"]
    assert f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}; 0 carry {selector}" in st["message"], st["message"]
    assert [(r["actionBy"], r["kind"], r["name"]) for r in st["remedies"]] == [
        ("ClusterAdmin", "ResourceFlavor", rf)], st["remedies"]


def test_admitted_but_the_flavor_nodes_are_tainted(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    api = cluster.api_client
    taint_key = "kueue-doctor.local/dedicated"
    pool = _pool(resources, cpu="4", taints=[{"key": taint_key, "value": "gpu", "effect": "NoSchedule"}])
    rf, _, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    resources.create(Job("untolerated", namespace).queue(lq).request("cpu", "1").manifest())
    st = _assert_unschedulable(api, namespace, "untolerated", rf, "untolerated taint", "unschedulable-node-taint",
                               "UntoleratedTaint")
    # kube-scheduler 1.36 no longer names the taint: "1 node(s) had untolerated taint(s)"; the Nodes do
    assert "node(s) had untolerated taint" in st["pods"]["waiting"][0]["message"], st["pods"]
    taint = f"{taint_key}=gpu:NoSchedule"
    nodes = kube.list_objects(api, "Node")
    in_pool = [n for n in nodes if (n["metadata"].get("labels") or {}).get(POOL_LABEL) == pool]
    assert len(in_pool) == 1 and in_pool[0]["spec"]["taints"][0]["key"] == taint_key, in_pool
    assert st["blocker"] == {"kind": "Taint", "name": taint, "flavor": rf, "podSet": "main", "nodes": 1,
                             "totalNodes": len(nodes), "source": "Nodes"}, st["blocker"]
    assert [(s["constraint"], s["nodes"]) for s in st["nodeMatches"]] == [
        ("Nodes", len(nodes)), ("NodeSelector", 1), ("Taints", 0)], st["nodeMatches"]
    funnel = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}; 1 carry {POOL_LABEL}={pool}; 0 of those tolerate"
    assert f"{funnel} {taint}" in st["message"], st["message"]
    # the flavor steers the Pods there: its toleration first (the admin), then the Job's (the owner)
    assert [(r["actionBy"], r["kind"], r["field"], r["enough"], r["exact"]) for r in st["remedies"]] == [
        ("ClusterAdmin", "ResourceFlavor", "spec.tolerations", f"+ {taint}", False),
        ("WorkloadOwner", "Job", "spec.template.spec.tolerations", f"+ {taint}", False)], st["remedies"]


def test_flavor_taint_not_tolerated_is_refused_by_kueue(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    """The same taint declared on the ResourceFlavor: Kueue itself refuses, before any Pod exists."""
    api = cluster.api_client
    taint = {"key": "kueue-doctor.local/dedicated", "value": "gpu", "effect": "NoSchedule"}
    rf = _flavor(resources, taints=[taint])
    cq = _cluster_queue(resources, {rf: {"cpu": "4"}})
    lq = _local_queue(resources, namespace, cq)
    resources.create(Job("picky", namespace).queue(lq).request("cpu", "1").manifest())
    wl = _wait_pending(api, namespace, "picky", "untolerated taint")
    msg = condition(wl, "QuotaReserved")["message"]  # type: ignore[index]
    assert f"untolerated taint {{kueue-doctor.local/dedicated gpu NoSchedule <nil>}} in flavor {rf}" in msg, msg
    st, _ = _diagnosis(api, namespace, "picky", record=kueue_reasons.fixture("flavor-taint"),
                       note="flavor nodeTaints not tolerated")
    assert _verdict(st) == ("Admission", "QueueMisconfigured", "NoMatchingFlavor", "WorkloadOwner"), st
    kueue_reasons.check(api, namespace, "picky", st, "NoMatchingFlavor")
    assert st["flavors"] == [rf]


def test_admitted_pods_bound_but_not_started_by_the_kubelet(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """Bound, but the kubelet has not reported any container yet: a normal moment, nobody acts.

    Every admitted Job passes through it; the fake kubelet's hold annotation makes it last.
    """
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    rf, _, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    slow = Job("slow", namespace).queue(lq).request("cpu", "1").pod_annotation(kube.FAKE_HOLD_ANNOTATION, "true")
    resources.create(slow.manifest())
    wait_for(
        lambda: any(p["spec"].get("nodeName") for p in kube.pods_of_job(api, namespace, "slow")),
        message="the pod to be bound",
    )
    st, _ = _diagnosis(api, namespace, "slow", record="bound-not-started", note="bound, kubelet silent")
    assert _verdict(st) == ("Scheduling", "ContainersNotStarting", "ContainerCreating", "Nobody"), st
    assert st["flavors"] == [rf]
    assert (st["pods"]["scheduled"], st["pods"]["running"]) == (1, 0), st["pods"]
    assert st["pods"]["waiting"][0]["reason"] == "NoContainerStatus", st["pods"]


# ---- 7. preemption ---------------------------------------------------------------------------


def test_higher_priority_job_preempts_a_lower_one(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    rf, _cq, lq = _queue(resources, namespace, {"cpu": "1"}, pool,
                         configure=lambda q: q.preemption(within_cluster_queue="LowerPriority"))
    low, high = kube.unique_name("low"), kube.unique_name("high")
    for name, value in ((low, 10), (high, 1000)):
        resources.create(WorkloadPriorityClass(name, value).manifest())
    resources.create(Job("victim", namespace).queue(lq).request("cpu", "1").workload_priority_class(low).manifest())
    victim_wl = wait_for_workload(api, namespace, "victim", lambda w: condition_is(w, "PodsReady"), what="PodsReady")
    # Kueue releases the victim's quota as soon as its Job reports no active Pod (well under a second);
    # freeze the Job's status so the moment "preemptor waits for the victim" lasts while we look at it.
    unfreeze = kube.freeze_job_status(resources, namespace, "victim")
    resources.create(Job("preemptor", namespace).queue(lq).request("cpu", "1").workload_priority_class(high).manifest())
    preemptor_wl = _wait_pending(api, namespace, "preemptor", ". Pending the preemption of 1 workload(s)")
    wait_for_workload(api, namespace, "victim", lambda w: condition_is(w, "Evicted"), what="Evicted=True")

    objects = _snapshot(api, [namespace])
    kube.record_fixture(f"scenario-{kueue_reasons.fixture('preemption-in-progress')}", objects,
                        note="preemptor waits for the victim")
    diagnoses = _diagnose(objects)
    p, v = _of(diagnoses, namespace, "preemptor")["status"], _of(diagnoses, namespace, "victim")["status"]
    assert condition(preemptor_wl, "QuotaReserved")["message"].endswith(  # type: ignore[index]
        ". Pending the preemption of 1 workload(s)")
    assert _verdict(p) == ("Admission", "WaitingForPreemption", "PreemptionInProgress", "Nobody"), p
    kueue_reasons.check(api, namespace, "preemptor", p, "WaitingForPreemptedWorkloads")
    assert [(b["role"], b["name"]) for b in p["blockedBy"]] == [("Victim", victim_wl["metadata"]["name"])], p
    assert v["reason"] == "Preempted" and v["cause"] == "InClusterQueue", v
    assert v["lastEviction"]["reason"] == "Preempted" and v["lastEviction"]["underlyingCause"] == "InClusterQueue", v
    assert [(b["role"], b["name"]) for b in v["blockedBy"]] == [("Preemptor", preemptor_wl["metadata"]["name"])], v
    assert preemptor_wl["metadata"]["name"] in v["lastEviction"]["by"], v

    unfreeze()
    wait_for_workload(api, namespace, "preemptor", lambda w: condition_is(w, "Admitted"), what="Admitted=True")
    _wait_pending(api, namespace, "victim", "insufficient unused quota")
    st, _ = _diagnosis(api, namespace, "victim", record=kueue_reasons.fixture("preempted-requeued"),
                       note="victim requeued after preemption")
    assert _verdict(st) == ("Admission", "WaitingForQuota", "InsufficientUnusedQuota", "Nobody"), st
    kueue_reasons.check(api, namespace, "victim", st, "WaitingForQuota")
    assert st["lastEviction"]["reason"] == "Preempted", st
    assert st["lastEviction"]["underlyingCause"] == "InClusterQueue", st
    assert preemptor_wl["metadata"]["name"] in st["lastEviction"]["by"], st
    assert _line(st, "cpu", rf)["missing"] == "1"
    wait_for_workload(api, namespace, "preemptor", lambda w: condition_is(w, "PodsReady"), what="PodsReady")
    p, _ = _diagnosis(api, namespace, "preemptor")
    assert _verdict(p) == ("Running", "Running", "PodsReady", "Nobody"), p


def test_a_head_waiting_for_its_preemption_blocks_a_higher_priority_job_that_fits(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """kueue#7301 on the real Kueue: a BestEffortFIFO ClusterQueue keeps the Workload waiting for its victims at
    its head and evaluates nothing behind it, even a higher-priority Job that fits the unused quota. After
    STICKY_AFTER (2 minutes, waited for real: the replay's clock is the dump's newest timestamp) the Job behind
    is told what holds it, not that Kueue stalled."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, _cq, lq = _queue(resources, namespace, {"cpu": "2"}, pool,
                        configure=lambda q: q.preemption(within_cluster_queue="LowerPriority"))
    low, mid, high = kube.unique_name("low"), kube.unique_name("mid"), kube.unique_name("high")
    for name, value in ((low, 10), (mid, 100), (high, 1000)):
        resources.create(WorkloadPriorityClass(name, value).manifest())
    resources.create(Job("victim", namespace).queue(lq).request("cpu", "1").workload_priority_class(low).manifest())
    wait_for_workload(api, namespace, "victim", lambda w: condition_is(w, "PodsReady"), what="PodsReady")
    unfreeze = kube.freeze_job_status(resources, namespace, "victim")  # its preemption never completes
    resources.create(Job("preemptor", namespace).queue(lq).request("cpu", "2").workload_priority_class(mid).manifest())
    preemptor_wl = _wait_pending(api, namespace, "preemptor", ". Pending the preemption of 1 workload(s)")
    wait_for_workload(api, namespace, "victim", lambda w: condition_is(w, "Evicted"), what="Evicted=True")
    time.sleep(125)  # past STICKY_AFTER; the Job behind is created now, so the dump's newest timestamp says so
    resources.create(Job("hotfix", namespace).queue(lq).request("cpu", "1").workload_priority_class(high).manifest())
    wait_for_workload(api, namespace, "hotfix")
    time.sleep(5)  # many scheduling cycles: Kueue pops the head again each time and never this one
    hotfix_wl = wait_for_workload(api, namespace, "hotfix")
    assert not condition_is(hotfix_wl, "QuotaReserved"), hotfix_wl["status"]
    assert "preemption" not in (condition(hotfix_wl, "QuotaReserved") or {}).get("message", ""), hotfix_wl["status"]
    st, _ = _diagnosis(api, namespace, "hotfix", record="sticky-head-blocks-the-queue",
                       note="preemptor kept at the head while its victim cannot stop; hotfix never evaluated")
    assert _verdict(st) == ("Admission", "NotYetEvaluated", "BlockedByQueueHead", "Nobody"), st
    assert [(b["role"], b["name"]) for b in st["blockedBy"]] == [("QueueHead", preemptor_wl["metadata"]["name"])], st
    assert "priority 1000 is above its 100" in st["message"], st["message"]
    # the hotfix goes first: once the head is admitted, Kueue evaluates it and it preempts the head (priority 1000
    # over 100) before a poll may see the head admitted (CI saw it)
    kube.delete(api, "Job", "hotfix", namespace)
    unfreeze()
    wait_for_workload(api, namespace, "preemptor", lambda w: condition_is(w, "Admitted"), what="Admitted=True")


# ---- 8. the good cases -----------------------------------------------------------------------


def test_admitted_job_is_running(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    rf, cq, lq = _queue(resources, namespace, {"cpu": "2"}, pool)
    resources.create(Job("fine", namespace).queue(lq).request("cpu", "500m").parallelism(2).manifest())
    wait_for_workload(api, namespace, "fine", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    st, _ = _diagnosis(api, namespace, "fine", record="running", note="admitted, 2 pods Running/Ready")
    assert _verdict(st) == ("Running", "Running", "PodsReady", "Nobody"), st
    assert st["clusterQueue"] == cq and st["flavors"] == [rf]
    pods = st["pods"]
    assert (pods["expected"], pods["created"], pods["running"], pods["ready"]) == (2, 2, 2, 2), pods
    assert not pods["waiting"]
    assert "blockedBy" not in st and "lastEviction" not in st and "quota" not in st


def test_finished_job_is_finished(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, cq, lq = _queue(resources, namespace, {"cpu": "2"}, pool)
    done = Job("done", namespace).queue(lq).request("cpu", "500m").pod_annotation(kube.FAKE_RUN_SECONDS_ANNOTATION, "1")
    resources.create(done.pod_annotation(kube.FAKE_EXIT_CODE_ANNOTATION, "0").manifest())
    wait_for_workload(api, namespace, "done", lambda w: condition_is(w, "Finished"), what="Finished=True")
    st, _ = _diagnosis(api, namespace, "done", record="finished", note="pod exited 0")
    assert _verdict(st) == ("Finished", "Finished", "Succeeded", "Nobody"), st
    assert st["clusterQueue"] == cq


def test_failed_job_names_its_failed_pod_and_its_exit_code(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """The most common end under Kueue: the Job failed. The verdict names the Pod, how its container ended and what
    the owner does next, from the Pod the kubelet left behind."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, _cq, lq = _queue(resources, namespace, {"cpu": "2"}, pool)
    crash = (Job("crash", namespace).queue(lq).request("cpu", "500m").backoff_limit(0)
             .pod_annotation(kube.FAKE_RUN_SECONDS_ANNOTATION, "1").pod_annotation(kube.FAKE_EXIT_CODE_ANNOTATION, "3"))
    resources.create(crash.manifest())
    wl = wait_for_workload(api, namespace, "crash", lambda w: condition_is(w, "Finished"), what="Finished=True",
                           timeout=60)
    assert (condition(wl, "Finished") or {}).get("reason") == "Failed", wl["status"]
    st, _ = _diagnosis(api, namespace, "crash", record="finished-failed", note="backoffLimit 0, the Pod exited 3")
    assert _verdict(st) == ("Finished", "Finished", "Failed", "WorkloadOwner"), st
    assert "1 Pod failed: crash-" in st["message"] and "(Error, exit code 3)" in st["message"], st["message"]
    assert "the program exited with an error" in st["message"], st["message"]


def _hog_and_priorities(resources: Resources, namespace: str, lq: str) -> tuple[str, str]:
    """A held Job that takes the LocalQueue's whole quota (100m cpu), admitted; WorkloadPriorityClasses (low 10,
    high 1000): the queue-position tests line Workloads up behind it."""
    resources.create(Job("hog", namespace).queue(lq).request("cpu", "100m")
                     .pod_annotation(kube.FAKE_HOLD_ANNOTATION, "true").manifest())
    wait_for_workload(resources.api, namespace, "hog", lambda w: condition_is(w, "Admitted"), what="Admitted=True")
    low, high = kube.unique_name("low"), kube.unique_name("high")
    for name, value in ((low, 10), (high, 1000)):
        resources.create(WorkloadPriorityClass(name, value).manifest())
    return low, high


def test_queue_positions_follow_kueues_own_order(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    """Issue 11: the computed position is the order in which the real Kueue then admits (priority, then age)."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, cq, lq = _queue(resources, namespace, {"cpu": "100m"}, pool)
    low, high = _hog_and_priorities(resources, namespace, lq)
    for job, prio in (("old-low", low), ("new-low", low), ("urgent", high)):  # created in this order
        resources.create(Job(job, namespace).queue(lq).request("cpu", "100m").workload_priority_class(prio).manifest())
        wait_for_workload(api, namespace, job)  # Kueue need not have tried it yet: its place is known already
        time.sleep(1.1)  # creationTimestamp has whole seconds; a tie is broken by UID, as Kueue does
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": str(ROOT / "operator")}
    out = subprocess.run([sys.executable, "-m", "kueue_doctor", "explain", "-n", namespace, "-o", "json"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    diagnoses = json.loads(out.stdout)
    positions = {job: _of(diagnoses, namespace, job)["status"].get("queuePosition")
                 for job in ("urgent", "old-low", "new-low")}
    assert all(positions.values()), [(d["metadata"]["name"], d["status"]["reason"]) for d in diagnoses]
    assert {job: (p["position"], p["pending"], p["higherPriority"], p["samePriorityEarlier"])
            for job, p in positions.items()} == {"urgent": (1, 3, 0, 0), "old-low": (2, 3, 1, 0),
                                                 "new-low": (3, 3, 1, 1)}
    for d in diagnoses:
        AdmissionDiagnosis.model_validate(d)
        assert d["status"]["clusterQueue"] == cq
    # the hog goes: Kueue admits the Workload computed first, and only it (the quota fits one)
    kube.delete(api, "Job", "hog", namespace)
    wait_for_workload(api, namespace, "urgent", lambda w: condition_is(w, "QuotaReserved"), timeout=60,
                      what="the first in line to be admitted")
    assert not condition_is(kube.workload_for(api, namespace, "old-low"), "QuotaReserved")
    assert not condition_is(kube.workload_for(api, namespace, "new-low"), "QuotaReserved")
