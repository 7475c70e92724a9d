"""Plain Pods, Pod groups, StatefulSets and Deployments through Kueue's pod-based integrations, on the real cluster.

Kueue v0.19.2 runs here with frameworks batch/job, pod, deployment, statefulset (module fixture ``owner_kinds``);
its pod webhook acts only in namespaces labelled ``kueue-doctor.test/pod-integration`` (so no other test's Pods
are gated). KCM runs the deployment, replicaset and statefulset controllers. Each test makes the situation
happen, asserts what Kueue really wrote, records the snapshot (``scenario-family-*.yaml``) and asserts the
engine's verdict on it (replayed offline by tests/unit/test_regressions.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Pod

from . import families, kube
from .kube import Resources, condition, condition_is, wait_for
from .test_scenarios import _pool, _queue

pytestmark = pytest.mark.e2e

FRAMEWORKS = ["batch/job", "pod", "deployment", "statefulset"]
ADMISSION_GATE = "kueue.x-k8s.io/admission"


def _group_pod(name: str, namespace: str, queue: str, group: str, total: int, cpu: str = "1") -> dict[str, Any]:
    pod = Pod(name, namespace).label(families.QUEUE_LABEL, queue).label(families.POD_GROUP_LABEL, group) \
        .annotation(families.POD_GROUP_TOTAL, str(total)).request("cpu", cpu).restart_policy("Never").manifest()
    return pod


def _workload(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    return kube.get(api, "Workload", name, namespace)


def test_pod_group_waits_for_all_its_pods(cluster: Any, resources: Resources, pod_namespace: str) -> None:
    """2 of a group of 3 Pods exist: Kueue makes no Workload, the Pods stay gated, an ErrWorkloadCompose Warning."""
    api = cluster.api_client
    ns = pod_namespace
    _, _cq, lq = _queue(resources, ns, {"cpu": "4"}, _pool(resources, cpu="4"))
    for i in range(2):
        created = resources.create(_group_pod(f"member-{i}", ns, lq, "trio", 3))
        gates = [g["name"] for g in created["spec"].get("schedulingGates", [])]
        assert ADMISSION_GATE in gates, created["spec"]  # Kueue's pod webhook gated it (and its topology gate)
    warned = wait_for(lambda: [e for e in kube.events_for(api, ns, "member-0", kind="Pod")
                               if e.get("reason") == "ErrWorkloadCompose"], timeout=30,
                      message="Kueue's ErrWorkloadCompose Warning on the incomplete group")
    assert "'trio' group has fewer runnable pods than expected" in warned[0]["message"], warned
    assert not kube.list_objects(api, "Workload", ns)
    pods = kube.list_objects(api, "Pod", ns)
    assert all(p["spec"].get("schedulingGates") and not p["spec"].get("nodeName") for p in pods), pods
    objects = families.snapshot(api, [ns])
    families.record("pod-group-incomplete", objects, "pod group trio: 2 of 3 Pods created, no Workload")
    st = families.verdict(objects, ns, owner=("Pod", "member-0"), reason="NoWorkload", cause="PodGroupIncomplete")
    assert "has 2 of 3 Pods" in st["message"] and "fewer runnable pods than expected" in st["message"], st["message"]
    assert st["actionBy"] == "WorkloadOwner", st


def test_pod_group_admitted_and_running(cluster: Any, resources: Resources, pod_namespace: str) -> None:
    api = cluster.api_client
    ns = pod_namespace
    _, cq, lq = _queue(resources, ns, {"cpu": "4"}, _pool(resources, cpu="4"))
    for i in range(2):
        resources.create(_group_pod(f"member-{i}", ns, lq, "duo", 2))
    wl = wait_for(lambda: (w := _workload(api, ns, "duo")) and condition_is(w, "PodsReady") and w, timeout=60,
                  message="the pod group's Workload duo to be PodsReady")
    assert wl["status"]["admission"]["clusterQueue"] == cq
    assert [ps["count"] for ps in wl["spec"]["podSets"]] in ([2], [1, 1]), wl["spec"]["podSets"]
    pods = kube.list_objects(api, "Pod", ns)
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
    assert all(not p["spec"].get("schedulingGates") for p in pods)
    objects = families.snapshot(api, [ns])
    families.record("pod-group-running", objects, "pod group duo of 2: admitted, both Pods Running")
    st = families.verdict(objects, ns, workload="duo", reason="Running", cause="PodsReady")
    assert st["pods"]["running"] == 2, st["pods"]


def test_plain_pod_pending_for_quota(cluster: Any, resources: Resources, pod_namespace: str) -> None:
    """A single queued Pod asking 2 cpu of a 1 cpu ClusterQueue: Kueue's Pending text on its Workload."""
    api = cluster.api_client
    ns = pod_namespace
    _, _cq, lq = _queue(resources, ns, {"cpu": "1"})
    resources.create(Pod("lonely", ns).label(families.QUEUE_LABEL, lq).request("cpu", "2")
                     .restart_policy("Never").manifest())

    def pending() -> dict[str, Any] | None:
        for w in kube.list_objects(api, "Workload", ns):
            c = condition(w, "QuotaReserved")
            if c and c["status"] == "False" and "maximum capacity" in c.get("message", ""):
                return w
        return None

    wl = wait_for(pending, timeout=30, message="the Pod's Workload to be pending for quota")
    objects = families.snapshot(api, [ns])
    families.record("plain-pod-exceeds-quota", objects, "plain Pod 2 cpu, ClusterQueue 1 cpu")
    st = families.verdict(objects, ns, workload=wl["metadata"]["name"], reason="ExceedsMaxQuota",
                          cause="ExceedsNominalQuota")
    assert st["clusterQueue"] == _cq


def _apps(kind: str, name: str, namespace: str, queue: str, replicas: int, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [
            {"name": "main", "image": families.IMAGE, "resources": {"requests": {"cpu": cpu}}}]}},
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": {families.QUEUE_LABEL: queue}},
            "spec": spec}


@pytest.mark.parametrize("kind", ["StatefulSet", "Deployment"])
def test_apps_owner_through_kueue(cluster: Any, resources: Resources, pod_namespace: str, kind: str) -> None:
    """2 replicas of 1 cpu in a 1 cpu ClusterQueue: one runs, one waits for quota (Deployment: a Workload per
    Pod; StatefulSet: one pod group for all replicas, which cannot fit: never admitted)."""
    api = cluster.api_client
    ns = pod_namespace
    _, cq, lq = _queue(resources, ns, {"cpu": "1"}, _pool(resources, cpu="4"))
    resources.create(_apps(kind, "web", ns, lq, 2, "1"))

    def settled() -> list[dict[str, Any]] | None:
        wls = kube.list_objects(api, "Workload", ns)
        pending = [w for w in wls if (c := condition(w, "QuotaReserved")) and c["status"] == "False"
                   and c.get("message")]
        return wls if pending else None

    wls = wait_for(settled, timeout=60, message=f"a {kind}'s Workload pending for quota")
    if kind == "Deployment":  # Kueue writes the ClusterQueue's usage a moment after it admits: read a settled state
        wait_for(lambda: (kube.get(api, "ClusterQueue", cq) or {}).get("status", {}).get("reservingWorkloads") == 1,
                 timeout=30, message=f"ClusterQueue {cq} to count the running replica")
    objects = families.snapshot(api, [ns])
    families.record(f"{kind.lower()}-quota", objects, f"{kind} web 2 x 1 cpu, ClusterQueue {cq} 1 cpu")
    print(kind, [(w["metadata"]["name"], [(c["type"], c["status"], c.get("message", "")[:90])
                                          for c in w["status"].get("conditions", [])]) for w in wls])
    pending = [w for w in wls if condition_is(w, "QuotaReserved", "False")]
    if kind == "StatefulSet":
        assert len(wls) == 1, [w["metadata"]["name"] for w in wls]
        families.verdict(objects, ns, workload=wls[0]["metadata"]["name"], reason="ExceedsMaxQuota",
                         cause="ExceedsNominalQuota")
    else:
        assert len(wls) == 2 and len(pending) == 1, [w["metadata"]["name"] for w in wls]
        st = families.verdict(objects, ns, workload=pending[0]["metadata"]["name"], reason="WaitingForQuota",
                              cause="InsufficientUnusedQuota")
        assert "Needs 1 more cpu" in st["message"] and "1 in use" in st["message"], st["message"]


@pytest.fixture(scope="module")
def pod_operator(cluster: Any, owner_kinds: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The operator, started after Kueue runs with the pod integration (module fixture ``owner_kinds``)."""
    from .test_operator import run_operator

    yield from run_operator(cluster, tmp_path_factory, "pod-operator")


def test_operator_diagnoses_an_incomplete_pod_group_then_continues_with_its_workload(
        cluster: Any, resources: Resources, pod_namespace: str, pod_operator: Any) -> None:
    """No watch brings a gated group's Pods (they carry no podset label) and Kueue makes no Workload: the operator
    reads them by the group label and writes the group's diagnosis under the name the Workload will have; the
    missing Pod created, Kueue makes that Workload and the same diagnosis follows it."""
    from .test_operator import adiag

    api = cluster.api_client
    ns = pod_namespace
    _, _cq, lq = _queue(resources, ns, {"cpu": "4"}, _pool(resources, cpu="4"))
    for i in range(2):
        resources.create(_group_pod(f"member-{i}", ns, lq, "trio", 3))
    first = wait_for(lambda: (d := adiag(api, ns, "trio")) and d, timeout=120,  # 30 s grace + the 15 s poll
                     message=lambda: f"the incomplete group's diagnosis:\n{pod_operator.tail()}")
    assert (first["status"]["reason"], first["status"]["cause"]) == ("NoWorkload", "PodGroupIncomplete"), first
    assert "has 2 of 3 Pods" in first["status"]["message"] and "workloadRef" not in first["spec"], first
    resources.create(_group_pod("member-2", ns, lq, "trio", 3))
    wait_for(lambda: _workload(api, ns, "trio"), timeout=60, message="Kueue's Workload for the complete group")
    later = wait_for(lambda: (d := adiag(api, ns, "trio")) and d["spec"].get("workloadRef") and d, timeout=90,
                     message=lambda: f"the Workload's diagnosis to follow the group's:\n{pod_operator.tail()}")
    assert later["status"]["reason"] != "NoWorkload", later["status"]
    assert later["spec"]["workloadRef"]["name"] == "trio"
