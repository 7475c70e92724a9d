"""LeaderWorkerSets through Kueue's leaderworkerset integration, with the real LWS controller manager
(sigs.k8s.io/lws v0.9.0, the version Kueue v0.19.2 requires), live.

The module fixture ``owner_kinds`` starts the LWS controller manager (its webhooks registered: its Pod defaulter
labels each leader and worker Pod with its group index) and restarts Kueue with frameworks batch/job, pod and
leaderworkerset.x-k8s.io/leaderworkerset, for this module only. Kueue's pod webhook acts only in namespaces
labelled ``kueue-doctor.test/pod-integration``. What happens: Kueue's LWS webhook stamps the queue name and the
pod-suspending-parent annotation on both Pod templates; the LWS controller makes one leader StatefulSet (a leader
Pod per group), its Pod controller one worker StatefulSet per leader Pod; Kueue's pod webhook gates every Pod and its
LWS reconciler makes one Workload per group (``leaderworkerset-<lws>-<group>-<hash>``, pod sets leader and worker)
and names it on the group's Pods (pod-group name and prebuilt Workload). Each test records its snapshot
(``scenario-family-lws-*.yaml``, replayed by tests/unit/test_regressions.py) and asserts the engine's verdict on
each group's Workload; the last one starts the operator (module fixture ``lws_operator``) and reads its
AdmissionDiagnoses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kueue_doctor.kube.kueue_names import POD_GROUP_KEY, PREBUILT_LABEL, identifier, workload_name

from . import families, kube
from .kube import Resources, condition, condition_is, wait_for
from .test_operator import ADIAG, SA_USER, Operator, adiag, run_operator
from .test_scenarios import _pool, _queue

pytestmark = pytest.mark.e2e

CONTROLLERS = ("lws",)
FRAMEWORKS = ["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]
LWS = "leaderworkerset.x-k8s.io/LeaderWorkerSet"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
ADMISSION_GATE = "kueue.x-k8s.io/admission"


def _template(cpu: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "image": families.IMAGE,
                                     "resources": {"requests": {"cpu": cpu}}}]}}


def _lws(name: str, namespace: str, queue: str, *, replicas: int, size: int, leader_cpu: str,
         worker_cpu: str) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {families.QUEUE_LABEL: queue}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size, "leaderTemplate": _template(leader_cpu), "workerTemplate": _template(worker_cpu)}}}


def _group_workload(lws: dict[str, Any], group: int) -> str:
    """Kueue's name for the group's Workload (GetWorkloadName: the owner name ``<lws>-<group>``)."""
    return workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io", f"{lws['metadata']['name']}-{group}",
                         lws["metadata"]["uid"])


def _qr_message(w: dict[str, Any]) -> str:
    return str((condition(w, "QuotaReserved") or {}).get("message", ""))


def _wl(api: Any, ns: str, name: str, ok: Any, what: str, timeout: float = 90) -> dict[str, Any]:
    return wait_for(lambda: (w := kube.get(api, "Workload", name, ns)) and ok(w) and w, timeout=timeout,
                    message=lambda: f"Workload {ns}/{name}: {what}; Workloads now: "
                                    f"{[(w['metadata']['name'], w.get('status', {}).get('conditions')) for w in kube.list_objects(api, 'Workload', ns)]}")


def _group_pods(api: Any, ns: str, group: int) -> list[dict[str, Any]]:
    return [p for p in kube.list_objects(api, "Pod", ns) if p["metadata"].get("labels", {}).get(GROUP_INDEX) == str(group)]


def _gated_group(api: Any, ns: str, group: int, size: int) -> list[dict[str, Any]]:
    """The group's leader and size - 1 worker Pods once they all exist, each held by Kueue's admission gate."""
    pods = wait_for(lambda: (ps := _group_pods(api, ns, group)) and len(ps) == size and ps, timeout=60,
                    message=f"group {group}'s leader and {size - 1} worker Pod(s)")
    assert all(ADMISSION_GATE in [g["name"] for g in p["spec"].get("schedulingGates", [])] for p in pods), pods
    return pods


def test_lws_second_group_waits_for_quota(cluster: Any, resources: Resources, pod_namespace: str) -> None:
    """Groups of a leader (1 cpu) and a worker (1 cpu) in a 2 cpu ClusterQueue: group 0 is admitted and runs;
    scaled to 2 replicas, group 1's Workload waits for quota, its two Pods gated."""
    api = cluster.api_client
    ns = pod_namespace
    _, cq, lq = _queue(resources, ns, {"cpu": "2"}, _pool(resources, cpu="8"))
    lws = resources.create(_lws("serve", ns, lq, replicas=1, size=2, leader_cpu="1", worker_cpu="1"))
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    for t in (tmpl["leaderTemplate"], tmpl["workerTemplate"]):  # Kueue's LWS webhook
        assert t["metadata"]["labels"][families.QUEUE_LABEL] == lq, t["metadata"]
        assert t["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == \
            "leaderworkerset.x-k8s.io/leaderworkerset", t["metadata"]
    first = _group_workload(lws, 0)
    wl0 = _wl(api, ns, first, lambda w: condition_is(w, "PodsReady"), "PodsReady=True")
    assert wl0["status"]["admission"]["clusterQueue"] == cq
    assert [(p["name"], p["count"]) for p in wl0["spec"]["podSets"]] == [("leader", 1), ("worker", 1)]
    pods0 = _group_pods(api, ns, 0)
    assert sorted(p["metadata"]["name"] for p in pods0) == ["serve-0", "serve-0-1"], pods0
    assert all(p["status"]["phase"] == "Running" for p in pods0), pods0
    # Kueue's LWS reconciler names the group's Workload on its Pods (annotations: WorkloadIdentifierAnnotations)
    assert all(identifier(p, POD_GROUP_KEY) == first and identifier(p, PREBUILT_LABEL) == first for p in pods0), pods0

    kube.patch(api, LWS, "serve", {"spec": {"replicas": 2}}, ns)
    second = _group_workload(lws, 1)
    wl1 = _wl(api, ns, second, lambda w: "insufficient unused quota" in _qr_message(w),
              "pending: insufficient unused quota")
    assert [(p["name"], p["count"]) for p in wl1["spec"]["podSets"]] == [("leader", 1), ("worker", 1)]
    _gated_group(api, ns, 1, 2)
    wait_for(lambda: (kube.get(api, "ClusterQueue", cq) or {}).get("status", {}).get("reservingWorkloads") == 1,
             timeout=30, message=f"ClusterQueue {cq} to count group 0")
    wait_for(lambda: all(identifier(p, POD_GROUP_KEY) == second for p in _group_pods(api, ns, 1)), timeout=30,
             message="Kueue to name group 1's Workload on its Pods")
    objects = families.snapshot(api, [ns])
    families.record("lws-second-group-waits", objects,
                    f"LeaderWorkerSet serve, groups of leader 1 cpu + worker 1 cpu, scaled to 2 groups; {cq} 2 cpu")
    print("group 1 pending:", _qr_message(wl1))
    st0 = families.verdict(objects, ns, workload=first, reason="Running", cause="PodsReady")
    assert st0["pods"]["running"] == 2 and st0["pods"]["expected"] == 2, st0["pods"]
    st1 = families.verdict(objects, ns, workload=second, reason="WaitingForQuota", cause="InsufficientUnusedQuota")
    print("group 1 verdict:", st1["message"])
    # Kueue: leader 1 more needed, worker 2 more needed (counting the leader): the group needs 2 cpu, 0 are free
    assert st1["clusterQueue"] == cq and "Needs 2 more cpu" in st1["message"], st1
    # `explain` live, as a user runs it: the LeaderWorkerSet, group 1's worker StatefulSet (its leader Pod's) and
    # its gated worker Pod (no podset label yet, the group's name an annotation)
    for target, want in (("lws/serve", [("leaderworkerset-serve-0", "Running"),
                                        ("leaderworkerset-serve-1", "WaitingForQuota")]),
                         ("sts/serve-1", [("leaderworkerset-serve-1", "WaitingForQuota")]),
                         ("pod/serve-1-1", [("leaderworkerset-serve-1", "WaitingForQuota")])):
        out = families.explain(cluster, "-n", ns, target, "-o", "json")
        assert out.returncode == 0, (target, out.stderr)
        got = sorted((d["metadata"]["name"].rsplit("-", 1)[0], d["status"]["reason"]) for d in json.loads(out.stdout))
        assert got == want, (target, got, out.stderr)
        print(f"explain {target}: {got} {out.stderr.strip()}")


def _one_group_pending(api: Any, ns: str, lws: dict[str, Any], size: int, text: str, *, record: str, note: str,
                       reason: str, cause: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Group 0's Workload once its QuotaReserved message holds ``text`` and the group's Pods are gated; the snapshot
    recorded as scenario-family-<record>; the engine's verdict on that Workload (asserted reason and cause)."""
    name = _group_workload(lws, 0)
    wl = _wl(api, ns, name, lambda w: text in _qr_message(w), f"pending: {text}")
    _gated_group(api, ns, 0, size)
    objects = families.snapshot(api, [ns])
    families.record(record, objects, note)
    st = families.verdict(objects, ns, workload=name, reason=reason, cause=cause)
    print(f"{record}: Kueue: {_qr_message(wl)}\nverdict: {st['message']}")
    return wl, st


def test_lws_group_exceeds_quota(cluster: Any, resources: Resources, pod_namespace: str) -> None:
    """A group of a leader and 2 workers at 1 cpu each in a 2 cpu ClusterQueue: its Workload can never fit."""
    ns = pod_namespace
    rf, cq, lq = _queue(resources, ns, {"cpu": "2"})
    lws = resources.create(_lws("huge", ns, lq, replicas=1, size=3, leader_cpu="1", worker_cpu="1"))
    wl, st = _one_group_pending(cluster.api_client, ns, lws, 3, "maximum capacity", record="lws-exceeds-quota",
                                note=f"LeaderWorkerSet huge: a group of 3 x 1 cpu > {cq} 2 cpu",
                                reason="ExceedsMaxQuota", cause="ExceedsNominalQuota")
    assert f"flavor {rf}" in _qr_message(wl), _qr_message(wl)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 2)]
    assert st["clusterQueue"] == cq, st


def test_lws_local_queue_missing(cluster: Any, resources: Resources, pod_namespace: str) -> None:
    """Labelled with a LocalQueue that does not exist: Kueue still makes the group's Workload, which waits."""
    ns = pod_namespace
    lws = resources.create(_lws("lost", ns, "absent", replicas=1, size=2, leader_cpu="500m", worker_cpu="500m"))
    wl, st = _one_group_pending(cluster.api_client, ns, lws, 2, "doesn't exist", record="lws-local-queue-missing",
                                note="LeaderWorkerSet lost labelled with LocalQueue absent, which does not exist",
                                reason="QueueMisconfigured", cause="LocalQueueNotFound")
    assert wl["spec"]["queueName"] == "absent", wl["spec"]
    # the owner's label, not "the Job's" (the engine's text before this scenario was recorded)
    assert "fix the label kueue.x-k8s.io/queue-name of LeaderWorkerSet lost" in st["message"], st["message"]
    assert st["actionBy"] == "WorkloadOwner", st


@pytest.fixture(scope="module")
def lws_operator(cluster: Any, owner_kinds: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """The operator (the manifests' ServiceAccount), started after Kueue runs with the LWS integration."""
    yield from run_operator(cluster, tmp_path_factory, "operator-lws")


def test_the_operator_diagnoses_each_group_of_a_leaderworkerset(cluster: Any, resources: Resources,
                                                                 pod_namespace: str, lws_operator: Operator) -> None:
    """Two groups created at once, quota for one: the operator writes one AdmissionDiagnosis per group's Workload
    (ownerRef the LeaderWorkerSet), one Running with its 2 Pods, the other WaitingForQuota, and none for the
    StatefulSets or Pods; it wrote nothing but AdmissionDiagnoses."""
    api = cluster.api_client
    ns = pod_namespace
    _, cq, lq = _queue(resources, ns, {"cpu": "2"}, _pool(resources, cpu="8"))
    lws = resources.create(_lws("serve", ns, lq, replicas=2, size=2, leader_cpu="1", worker_cpu="1"))
    names = [_group_workload(lws, group) for group in (0, 1)]

    def verdicts() -> list[str | None]:
        return [(d := adiag(api, ns, wl)) and d["status"].get("reason") for wl in names]

    # both groups come at once: which one Kueue admits first is its choice
    wait_for(lambda: sorted(map(str, verdicts())) == ["Running", "WaitingForQuota"], timeout=120,
             message=lambda: f"the operator's verdicts on {names}: {verdicts()}:\n{lws_operator.tail()}")
    for wl in names:
        d = adiag(api, ns, wl)
        assert d is not None and (d["spec"]["ownerRef"]["kind"], d["spec"]["ownerRef"]["name"]) == (
            "LeaderWorkerSet", "serve"), d["spec"]
    running = names[verdicts().index("Running")]
    wait_for(lambda: ((adiag(api, ns, running) or {}).get("status", {}).get("pods") or {}).get("running") == 2,
             timeout=60, message=lambda: f"the operator to count the group's 2 running Pods: "
                                         f"{(adiag(api, ns, running) or {}).get('status')}")
    waiting = adiag(api, ns, names[1 - names.index(running)])
    assert waiting is not None and waiting["status"]["clusterQueue"] == cq, waiting
    assert "Needs 2 more cpu" in waiting["status"]["message"], waiting["status"]["message"]
    listed = kube.request_json(api, "GET", f"{ADIAG}/namespaces/{ns}/admissiondiagnoses")["items"]
    assert sorted(d["metadata"]["name"] for d in listed) == sorted(names), [d["metadata"]["name"] for d in listed]
    touched = {(w["objectRef"].get("apiGroup", ""), w["objectRef"]["resource"])
               for w in cluster.writes_by_user(SA_USER)}
    assert touched == {("kueue-doctor.dev", "admissiondiagnoses")}, touched
