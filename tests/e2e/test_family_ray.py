"""RayJobs and RayClusters through Kueue's ray integrations, with KubeRay's real ray-operator, live.

The module fixture ``owner_kinds`` starts KubeRay's operator (no webhook, as its default install) after installing
its CRDs, and restarts Kueue with frameworks batch/job + ray.io/rayjob + ray.io/raycluster, for this module only.
No Ray runs: the fake kubelet runs the head and worker Pods (pause semantics) and fails to pull images of a
``.invalid`` registry. Snapshots are recorded as ``scenario-family-ray-*.yaml`` (replayed offline).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Job

from . import families, kube
from .kube import Resources, condition, condition_is, wait_for, wait_for_workload
from .test_scenarios import _pool, _queue

pytestmark = pytest.mark.e2e

CONTROLLERS = ("kuberay",)
FRAMEWORKS = ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]
RAY_IMAGE = "rayproject/ray:2.52.0"
ACCELERATOR = {"example.test/accelerator": "tpu"}  # a node label no fake node has


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
