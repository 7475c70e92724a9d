"""RayJobs, RayClusters and RayServices through Kueue's ray integrations, with KubeRay's real ray-operator, live.

The module fixture ``owner_kinds`` starts KubeRay's operator (no webhook, as its default install) after installing
its CRDs, and restarts Kueue with frameworks batch/job + ray.io/rayjob + ray.io/raycluster + ray.io/rayservice, for
this module only.
No Ray runs: the fake kubelet runs the head and worker Pods (pause semantics) and fails to pull images of a
``.invalid`` registry; a RayService therefore never becomes Ready (KubeRay reaches no dashboard to deploy its Serve
applications). The RayService test also starts the operator (module fixture ``operator``) and reads its
AdmissionDiagnoses. Snapshots are recorded as ``scenario-family-ray-*.yaml`` (replayed offline).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.builders import Job

from . import families, kube
from .kube import Resources, condition, condition_is, wait_for, wait_for_workload
from .test_operator import Operator, adiag, run_operator
from .test_scenarios import _pool, _queue

pytestmark = pytest.mark.e2e

CONTROLLERS = ("kuberay",)
FRAMEWORKS = ["batch/job", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice"]
RAY_IMAGE = "rayproject/ray:2.52.0"
ACCELERATOR = {"example.test/accelerator": "tpu"}  # a node label no fake node has
KUBERAY_MANAGER = "kuberay-operator"  # KubeRay's field manager in managedFields
#: a Serve application as KubeRay's samples write it; no Ray runs here, so KubeRay never reaches a dashboard to
#: submit it
SERVE_CONFIG = """applications:
- name: echo
  import_path: echo:app
  route_prefix: /
  deployments:
  - name: Echo
    num_replicas: 1
"""


def _container(name: str, cpu: str, image: str = RAY_IMAGE) -> dict[str, Any]:
    return {"name": name, "image": image, "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}


def _cluster_spec(head_cpu: str, workers: int, worker_cpu: str, *, head_image: str = RAY_IMAGE,
                  worker_selector: dict[str, str] | None = None) -> dict[str, Any]:
    worker_pod: dict[str, Any] = {"containers": [_container("ray-worker", worker_cpu)]}
    if worker_selector:
        worker_pod["nodeSelector"] = worker_selector
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
            "containers": [_container("ray-head", head_cpu, head_image)]}}},
        "workerGroupSpecs": [{"groupName": "workers", "replicas": workers, "minReplicas": workers,
                              "maxReplicas": workers, "rayStartParams": {}, "template": {"spec": worker_pod}}],
    }


def _rayjob(name: str, namespace: str, queue: str, cluster_spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": namespace, "labels": {families.QUEUE_LABEL: queue}},
            "spec": {"entrypoint": "python -c 'print(1)'", "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": cluster_spec,
                     "submitterPodTemplate": {"spec": {"restartPolicy": "Never",
                                                       "containers": [_container("submitter", "100m")]}}}}


def _raycluster(name: str, namespace: str, queue: str, cluster_spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": namespace, "labels": {families.QUEUE_LABEL: queue}},
            "spec": cluster_spec}


def _rayservice(name: str, namespace: str, queue: str, cluster_spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": name, "namespace": namespace, "labels": {families.QUEUE_LABEL: queue}},
            "spec": {"serveConfigV2": SERVE_CONFIG, "rayClusterConfig": cluster_spec}}


def _wl(api: Any, ns: str, kind: str, name: str, ok: Any, what: str, timeout: float = 60) -> dict[str, Any]:
    return kube.wait_for_workload(api, ns, name, ok, timeout=timeout, what=what, kind=kind)


def _qr_message(w: dict[str, Any]) -> str:
    return str((condition(w, "QuotaReserved") or {}).get("message", ""))


def _ray_pods(api: Any, ns: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for p in kube.list_objects(api, "Pod", ns):
        out.setdefault(p["metadata"].get("labels", {}).get("ray.io/node-type", "other"), []).append(p)
    return out


def test_rayjob_pending_for_quota(cluster: Any, resources: Resources, namespace: str, owner_kinds: Any) -> None:
    """A Job holds 2 of 4 cpu; the RayJob needs head 1 + 2 workers x 1 + submitter 100m: 1100m more."""
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="8"))
    resources.create(Job("hog", namespace).queue(lq).request("cpu", "2").manifest())
    wait_for_workload(api, namespace, "hog", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    created = resources.create(_rayjob("train", namespace, lq, _cluster_spec("1", 2, "1")))
    assert created["spec"].get("suspend") is True, "Kueue's RayJob webhook suspends it at creation"
    wl = _wl(api, namespace, "RayJob", "train", lambda w: "insufficient unused quota" in _qr_message(w),
             "pending: insufficient unused quota")
    assert [p["name"] for p in wl["spec"]["podSets"]] == ["head", "workers", "submitter"], wl["spec"]["podSets"]
    wait_for(lambda: (kube.get(api, "ClusterQueue", cq) or {}).get("status", {}).get("reservingWorkloads") == 1,
             timeout=30, message=f"ClusterQueue {cq} to count the running Job")
    assert not kube.list_objects(api, "ray.io/RayCluster", namespace), "no RayCluster while suspended"
    objects = families.snapshot(api, [namespace])
    families.record("ray-rayjob-pending-quota", objects, "RayJob train (3.1 cpu) waits: Job hog holds 2 of 4 cpu")
    st = families.verdict(objects, namespace, owner=("RayJob", "train"), reason="WaitingForQuota",
                          cause="InsufficientUnusedQuota")
    # Kueue names a shortfall per pod set: "workers ... 1 more needed; ... submitter ... 1100m more needed" (the
    # last one counts the earlier pod sets too: 1100m is the whole shortfall)
    msg = _qr_message(wl)
    assert "pod set workers" in msg and "1100m more needed" in msg, msg
    assert st["clusterQueue"] == cq and "more cpu" in st["message"], st["message"]


def test_rayjob_admitted_worker_pods_unschedulable(cluster: Any, resources: Resources, namespace: str,
                                                   owner_kinds: Any) -> None:
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "8"}, _pool(resources, cpu="8"))
    resources.create(_rayjob("tpu", namespace, lq, _cluster_spec("1", 2, "1", worker_selector=ACCELERATOR)))

    def stuck() -> dict[str, list[dict[str, Any]]] | None:
        pods = _ray_pods(api, namespace)
        workers = [p for p in pods.get("worker", []) if (condition(p, "PodScheduled") or {}).get("reason")
                   == "Unschedulable"]
        heads = [p for p in pods.get("head", []) if p["status"].get("phase") == "Running"]
        return pods if len(workers) == 2 and len(heads) == 1 else None

    wait_for(stuck, timeout=90, message="the head Running and 2 worker Pods Unschedulable")
    wl = kube.workload_for(api, namespace, "tpu", "RayJob")
    assert wl is not None and condition_is(wl, "Admitted") and not condition_is(wl, "PodsReady"), wl
    rc = kube.list_objects(api, "ray.io/RayCluster", namespace)
    assert len(rc) == 1 and rc[0]["metadata"]["ownerReferences"][0]["kind"] == "RayJob", rc
    objects = families.snapshot(api, [namespace])
    families.record("ray-rayjob-workers-unschedulable", objects,
                    "RayJob tpu admitted; its workers' nodeSelector matches no node")
    st = families.verdict(objects, namespace, owner=("RayJob", "tpu"), reason="PodsUnschedulable",
                          cause="NodeSelectorMismatch")
    assert st["pods"]["running"] >= 1 and st["pods"]["expected"] == 4, st["pods"]  # head, 2 workers, submitter


def test_raycluster_head_image_pull_failure(cluster: Any, resources: Resources, namespace: str,
                                            owner_kinds: Any) -> None:
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    created = resources.create(_raycluster("broken", namespace, lq,
                                           _cluster_spec("1", 1, "1", head_image=families.UNPULLABLE_IMAGE)))
    assert created["spec"].get("suspend") is True, "Kueue's RayCluster webhook suspends it at creation"

    def backing_off() -> dict[str, Any] | None:
        for p in _ray_pods(api, namespace).get("head", []):
            for c in p["status"].get("containerStatuses") or []:
                if (c.get("state") or {}).get("waiting", {}).get("reason") == "ImagePullBackOff":
                    return p
        return None

    head = wait_for(backing_off, timeout=90, message="the head Pod in ImagePullBackOff")
    events = [e["reason"] for e in kube.events_for(api, namespace, head["metadata"]["name"], kind="Pod")]
    assert "Failed" in events and "BackOff" in events, events
    wl = kube.workload_for(api, namespace, "broken", "RayCluster")
    assert wl is not None and condition_is(wl, "Admitted") and not condition_is(wl, "PodsReady"), wl
    objects = families.snapshot(api, [namespace])
    families.record("ray-raycluster-head-image-pull", objects,
                    f"RayCluster broken admitted; head image {families.UNPULLABLE_IMAGE} cannot be pulled")
    st = families.verdict(objects, namespace, owner=("RayCluster", "broken"), reason="ContainersNotStarting",
                          cause=("ImagePullBackOff"))
    assert families.UNPULLABLE_IMAGE in st["message"] and st["actionBy"] == "WorkloadOwner", st


def test_raycluster_exceeds_quota(cluster: Any, resources: Resources, namespace: str, owner_kinds: Any) -> None:
    api = cluster.api_client
    rf, cq, lq = _queue(resources, namespace, {"cpu": "2"})
    resources.create(_raycluster("huge", namespace, lq, _cluster_spec("1", 3, "1")))
    wl = _wl(api, namespace, "RayCluster", "huge", lambda w: "maximum capacity" in _qr_message(w),
             "pending: maximum capacity")
    assert f"flavor {rf}" in _qr_message(wl), _qr_message(wl)
    objects = families.snapshot(api, [namespace])
    families.record("ray-raycluster-exceeds-quota", objects, f"RayCluster huge: head 1 + 3 workers x 1 cpu > {cq} 2")
    families.verdict(objects, namespace, owner=("RayCluster", "huge"), reason="ExceedsMaxQuota",
                     cause="ExceedsNominalQuota")


@pytest.fixture(scope="module")
def operator(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    yield from run_operator(cluster, tmp_path_factory, "operator-ray")


class _Timeline:
    """What the RayService, its RayClusters, its Workload, its Pods and the operator's diagnosis were, each change
    with the seconds since ``t0``: polled while a test waits."""

    def __init__(self, api: Any, namespace: str, service: str) -> None:
        self.api, self.ns, self.service = api, namespace, service
        self.t0 = time.monotonic()
        self.seen: dict[str, Any] = {}
        self.changes: list[tuple[float, str, Any]] = []

    def note(self, key: str, value: Any) -> None:
        if self.seen.get(key, ...) != value:
            self.seen[key] = value
            self.changes.append((round(time.monotonic() - self.t0, 2), key, value))

    def poll(self, wl_name: str | None = None) -> None:
        rs = kube.get(self.api, "ray.io/RayService", self.service, self.ns) or {}
        self.note("RayService spec.rayClusterConfig.suspend",
                  (rs.get("spec") or {}).get("rayClusterConfig", {}).get("suspend"))
        st = rs.get("status") or {}
        self.note("RayService status.pendingServiceStatus.rayClusterName",
                  (st.get("pendingServiceStatus") or {}).get("rayClusterName"))
        self.note("RayService status.activeServiceStatus.rayClusterName",
                  (st.get("activeServiceStatus") or {}).get("rayClusterName"))
        self.note("RayService Ready", ((condition(rs, "Ready") or {}).get("status"),
                                       (condition(rs, "Ready") or {}).get("reason")))
        for rc in kube.list_objects(self.api, "ray.io/RayCluster", self.ns):
            name = rc["metadata"]["name"]
            self.note(f"RayCluster {name} spec.suspend", rc["spec"].get("suspend"))
            self.note(f"RayCluster {name} status.state", (rc.get("status") or {}).get("state"))
        wl = kube.workload_for(self.api, self.ns, self.service, "RayService")
        if wl is not None:
            for cond in ("QuotaReserved", "Admitted", "PodsReady"):
                c = condition(wl, cond) or {}
                self.note(f"Workload {cond}", (c.get("status"), c.get("reason")))
        pods = kube.list_objects(self.api, "Pod", self.ns)
        self.note("Pods", sorted((p["metadata"].get("labels", {}).get("ray.io/node-type", "?"),
                                  p["status"].get("phase")) for p in pods))
        if wl_name is not None:
            d = adiag(self.api, self.ns, wl_name) or {}
            dst = d.get("status") or {}
            self.note("diagnosis", (dst.get("stage"), dst.get("reason"), dst.get("cause"),
                                    (dst.get("pods") or {}).get("running"), (dst.get("pods") or {}).get("expected")))

    def when(self, key: str, value: Any) -> float | None:
        return next((t for t, k, v in self.changes if k == key and v == value), None)

    def __str__(self) -> str:
        return "\n".join(f"{t:7.2f}s {k}: {v}" for t, k, v in self.changes)


def _suspend_writer(rc: dict[str, Any]) -> str | None:
    """The manager that last wrote the RayCluster's spec.suspend (its managedFields)."""
    for entry in reversed(rc["metadata"].get("managedFields") or []):
        if "f:suspend" in (entry.get("fieldsV1") or {}).get("f:spec", {}):
            return str(entry.get("manager"))
    return None


def test_rayservice_waits_for_quota_then_kuberay_unsuspends_its_raycluster(
        cluster: Any, resources: Resources, namespace: str, owner_kinds: Any, operator: Operator) -> None:
    """A RayService (head 500m + 1 worker 500m) in a ClusterQueue of 500m: Kueue keeps it suspended
    (spec.rayClusterConfig.suspend) and KubeRay makes its pending RayCluster suspended too. The quota raised, Kueue
    admits it and unsuspends the RayService, and KubeRay v1.6.2 carries that onto the same RayCluster in place
    (kuberay#4686), which creates the Pods: the verdict moves to the Scheduling stage with the Pods counted through the
    RayCluster (the worker held by the fake kubelet, a container still being created), then to Running once it runs.
    KubeRay never calls the RayService Ready (no Ray runs here: nothing serves), so Kueue's PodsReady stays False, and
    waitForPodsReady (Kueue restarted with a 10s timeout) evicts it with both Pods ready: KubeRay suspends the same
    RayCluster again. The timeline of these objects is printed (``-s``)."""
    api = cluster.api_client
    rf, cq, lq = _queue(resources, namespace, {"cpu": "500m"}, _pool(resources, cpu="4"))
    tl = _Timeline(api, namespace, "serve")
    spec = _cluster_spec("500m", 1, "500m")
    spec["workerGroupSpecs"][0]["template"]["metadata"] = {"annotations": {kube.FAKE_HOLD_ANNOTATION: "true"}}
    created = resources.create(_rayservice("serve", namespace, lq, spec))
    assert created["spec"]["rayClusterConfig"].get("suspend") is True, "Kueue's RayService webhook suspends it"

    def pending() -> dict[str, Any] | None:
        tl.poll()
        w = kube.workload_for(api, namespace, "serve", "RayService")
        made = kube.list_objects(api, "ray.io/RayCluster", namespace)
        return w if w and "maximum capacity" in _qr_message(w) and made else None

    wl = wait_for(pending, timeout=60, message=lambda: f"the Workload pending and a RayCluster made:\n{tl}")
    wl_name = wl["metadata"]["name"]
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("workers", 1)], wl["spec"]
    (rc,) = kube.list_objects(api, "ray.io/RayCluster", namespace)
    rc_name = rc["metadata"]["name"]
    owner = rc["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("RayService", "serve", True), owner
    assert rc["spec"].get("suspend") is True and rc["metadata"]["annotations"]["ray.io/kuberay-version"] == "v1.6.2"
    assert not kube.list_objects(api, "Pod", namespace), "no Pod while the RayCluster is suspended"

    def diagnosis() -> dict[str, Any]:
        tl.poll(wl_name)
        return adiag(api, namespace, wl_name) or {}

    d = wait_for(lambda: (d := diagnosis()).get("status", {}).get("reason") == "ExceedsMaxQuota" and d, timeout=60,
                 message=lambda: f"the operator's ExceedsMaxQuota:\n{tl}\n{operator.tail()}")
    assert (d["spec"]["ownerRef"]["kind"], d["spec"]["ownerRef"]["name"]) == ("RayService", "serve"), d["spec"]
    assert d["metadata"]["labels"]["kueue-doctor.dev/owner-kind"] == "RayService", d["metadata"]["labels"]
    assert d["status"]["clusterQueue"] == cq and "500m" in d["status"]["message"], d["status"]
    objects = families.snapshot(api, [namespace])
    families.record("ray-rayservice-exceeds-quota", objects,
                    f"RayService serve (head 500m + 1 worker 500m) > {cq} 500m; its RayCluster made suspended")
    families.verdict(objects, namespace, owner=("RayService", "serve"), reason="ExceedsMaxQuota",
                     cause="ExceedsNominalQuota")

    # the queue admin raises the quota: Kueue admits and unsuspends the RayService; KubeRay updates its RayCluster
    kube.patch(api, "ClusterQueue", cq, {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": rf, "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}})
    raised = time.monotonic() - tl.t0

    def worker_held() -> dict[str, Any] | None:
        d = diagnosis()
        pods = _ray_pods(api, namespace)
        head_up = [p for p in pods.get("head", []) if p["status"].get("phase") == "Running"]
        return d if head_up and len(pods.get("worker", [])) == 1 and (d.get("status") or {}).get(
            "stage") == "Scheduling" and (d["status"].get("pods") or {}).get("running") == 1 else None

    d = wait_for(worker_held, timeout=60, message=lambda: f"Scheduling with the head Running:\n{tl}\n{operator.tail()}")
    assert (d["status"]["reason"], d["status"]["cause"]) == ("ContainersNotStarting", "ContainerCreating"), d["status"]
    assert {k: d["status"]["pods"][k] for k in ("expected", "created", "scheduled", "running")} == {
        "expected": 2, "created": 2, "scheduled": 2, "running": 1}, d["status"]["pods"]
    rc = kube.get(api, "ray.io/RayCluster", rc_name, namespace)
    assert rc is not None and rc["spec"].get("suspend") is False, "KubeRay v1.6.2 unsuspends the same RayCluster"
    assert _suspend_writer(rc) == KUBERAY_MANAGER, rc["metadata"].get("managedFields")
    assert [r["metadata"]["name"] for r in kube.list_objects(api, "ray.io/RayCluster", namespace)] == [rc_name]
    pods = [p for g in _ray_pods(api, namespace).values() for p in g]
    assert {p["metadata"]["labels"]["ray.io/cluster"] for p in pods} == {rc_name}, pods
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"RayCluster"}, pods
    objects = families.snapshot(api, [namespace])
    families.record("ray-rayservice-worker-starting", objects,
                    f"RayService serve admitted; KubeRay unsuspended RayCluster {rc_name}; head Running, worker "
                    "container not started (held by the fake kubelet)")
    st = families.verdict(objects, namespace, owner=("RayService", "serve"), reason="ContainersNotStarting",
                          cause="ContainerCreating")
    assert st["pods"]["running"] == 1 and st["pods"]["expected"] == 2, st["pods"]

    (worker,) = _ray_pods(api, namespace)["worker"]
    kube.patch(api, "Pod", worker["metadata"]["name"],
               {"metadata": {"annotations": {kube.FAKE_HOLD_ANNOTATION: "false"}}}, namespace)
    d = wait_for(lambda: (d := diagnosis()).get("status", {}).get("reason") == "Running" and d, timeout=60,
                 message=lambda: f"the operator's Running:\n{tl}\n{operator.tail()}")
    assert d["status"]["cause"] == "PodsRunning" and d["status"]["pods"]["running"] == 2, d["status"]
    wl = kube.workload_for(api, namespace, "serve", "RayService")
    rs = kube.get(api, "ray.io/RayService", "serve", namespace)
    assert wl is not None and condition(wl, "PodsReady") is not None and not condition_is(wl, "PodsReady"), wl
    assert rs is not None and not condition_is(rs, "Ready"), rs.get("status")
    assert "Kueue's PodsReady is False (WaitForStart)" in d["status"]["message"], d["status"]["message"]
    rc = kube.get(api, "ray.io/RayCluster", rc_name, namespace)
    assert rc is not None and rc["spec"].get("suspend") is False and rc["status"].get("state") == "ready", rc
    objects = families.snapshot(api, [namespace])
    families.record("ray-rayservice-running-serve-not-ready", objects,
                    f"RayService serve admitted, RayCluster {rc_name} ready (head and worker Running); KubeRay "
                    "never calls the RayService Ready (no Ray runs), so Kueue's PodsReady stays False")
    st = families.verdict(objects, namespace, owner=("RayService", "serve"), reason="Running", cause="PodsRunning")
    assert "Initializing" in st["message"] and st["pods"]["running"] == 2, st

    suspended = [v for _, k, v in tl.changes if k == f"RayCluster {rc_name} spec.suspend"]
    assert suspended == [True, False], f"the RayCluster's spec.suspend went {suspended}:\n{tl}"
    unsuspended = tl.when(f"RayCluster {rc_name} spec.suspend", False)

    # waitForPodsReady evicts it all the same, every Pod ready: Kueue restarted with a 10s timeout (already passed)
    with cluster.kueue_settings(wait_for_pods_ready_timeout="10s"):
        restarted = time.monotonic() - tl.t0

        def evicted() -> dict[str, Any] | None:
            tl.poll(wl_name)
            w = kube.workload_for(api, namespace, "serve", "RayService")
            return w if w and condition_is(w, "Evicted") and not condition_is(w, "QuotaReserved") \
                and not kube.list_objects(api, "Pod", namespace) else None

        wl = wait_for(evicted, timeout=60, message=lambda: f"evicted, its Pods gone:\n{tl}")
        assert (condition(wl, "Evicted") or {}).get("reason") == "PodsReadyTimeout", wl["status"]
        rc = kube.get(api, "ray.io/RayCluster", rc_name, namespace)
        assert rc is not None and rc["spec"].get("suspend") is True, "KubeRay suspends the same RayCluster again"
        assert _suspend_writer(rc) == KUBERAY_MANAGER, rc["metadata"].get("managedFields")
        objects = families.snapshot(api, [namespace])
        families.record("ray-rayservice-evicted-serve-not-ready", objects,
                        f"RayService serve evicted by waitForPodsReady (10s) with both Pods ready: KubeRay never "
                        f"called it Ready; RayCluster {rc_name} suspended again")
        st = families.verdict(objects, namespace, owner=("RayService", "serve"), reason="Evicted",
                              cause="RequeueBackoff")
        assert "Serve applications" in st["message"] and f"RayCluster {rc_name} had all its Pods ready" \
            in st["message"] and "check images" not in st["message"], st["message"]
    suspended = [v for _, k, v in tl.changes if k == f"RayCluster {rc_name} spec.suspend"]
    assert suspended[:3] == [True, False, True], f"the RayCluster's spec.suspend went {suspended}:\n{tl}"
    print(f"RayService timeline (quota raised at {raised:.2f}s; RayCluster unsuspended at {unsuspended}s; Kueue "
          f"restarted with a 10s PodsReady timeout at {restarted:.2f}s):\n{tl}")
