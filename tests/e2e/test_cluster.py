"""Smoke tests of the local control plane: real apiserver, KCM, scheduler and Kueue.

They check the harness itself (admission, unsuspend, scheduling, fake kubelet, audit log) and
record the real texts Kueue and kube-scheduler write, as fixtures for the diagnosis engine
(``KUEUE_DOCTOR_RECORD_FIXTURES=1`` rewrites tests/e2e/fixtures/*.yaml).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.builders import ClusterQueue, Job, LocalQueue, ResourceFlavor, WorkloadPriorityClass

from . import kube
from .conftest import ClusterHandle
from .kube import Resources, condition, condition_is, wait_for, wait_for_workload

pytestmark = pytest.mark.e2e

POOL_LABEL = "kueue-doctor.local/pool"


def _queues(
    resources: Resources,
    namespace: str,
    quota: dict[str, str],
    *,
    node_labels: dict[str, str] | None = None,
) -> tuple[str, str, str]:
    """ResourceFlavor + ClusterQueue (only this namespace) + LocalQueue 'main'."""
    rf = resources.create(ResourceFlavor(kube.unique_name("rf")).node_labels(node_labels or {}).manifest())
    rf_name = rf["metadata"]["name"]
    cq = resources.create(
        ClusterQueue(kube.unique_name("cq"))
        .quotas({rf_name: quota})
        .namespace_selector({"matchLabels": {"kubernetes.io/metadata.name": namespace}})
        .manifest()
    )
    cq_name = cq["metadata"]["name"]
    resources.create(LocalQueue("main", namespace, cq_name).manifest())
    return rf_name, cq_name, "main"


def _pool_node(resources: Resources, cpu: str = "2") -> tuple[str, str]:
    pool = kube.unique_name("pool")
    node = resources.node(kube.unique_name("node"), labels={POOL_LABEL: pool}, cpu=cpu, memory="8Gi")
    return node["metadata"]["name"], pool


def _running_ready(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and condition_is(pod, "Ready")


def test_control_plane_serves_pinned_versions(cluster: ClusterHandle) -> None:
    version = kube.request_json(cluster.api_client, "GET", "/version")
    assert version["major"] == "1"
    if cluster.local is not None:
        assert version["gitVersion"] == kube.lc.read_versions()["K8S_VERSION"]
    group = kube.request_json(cluster.api_client, "GET", "/apis/kueue.x-k8s.io")
    assert group["preferredVersion"]["version"] == "v1beta2"
    assert {v["version"] for v in group["versions"]} >= {"v1beta2", "v1beta1"}


def test_job_is_admitted_unsuspended_and_running(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    api = cluster.api_client
    node, pool = _pool_node(resources, cpu="2")
    rf, cq, lq = _queues(resources, namespace, {"cpu": "2", "memory": "4Gi"}, node_labels={POOL_LABEL: pool})
    job = resources.create(
        Job("sample", namespace).queue(lq).parallelism(2).request("cpu", "500m").request("memory", "256Mi").manifest()
    )
    assert job["spec"]["suspend"] is True, "Kueue's mutating webhook must suspend a queued Job at creation"

    wl = wait_for_workload(
        api, namespace, "sample", lambda w: condition_is(w, "Admitted"), what="Admitted=True"
    )
    qr = condition(wl, "QuotaReserved")
    assert qr is not None and qr["status"] == "True"
    assert qr["reason"] == "QuotaReserved"
    assert qr["message"] == f"Quota reserved in ClusterQueue {cq}"
    admitted = condition(wl, "Admitted")
    assert admitted is not None and admitted["reason"] == "Admitted"
    assert wl["spec"]["queueName"] == lq
    assert wl["status"]["admission"]["clusterQueue"] == cq
    psa = wl["status"]["admission"]["podSetAssignments"][0]
    assert psa["flavors"] == {"cpu": rf, "memory": rf}
    assert psa["count"] == 2

    wait_for(
        lambda: kube.get(api, "Job", "sample", namespace)["spec"].get("suspend") is False,
        message="Kueue to unsuspend the Job",
    )
    pods = wait_for(
        lambda: (
            (p := kube.pods_of_job(api, namespace, "sample"))
            and len(p) == 2
            and all(map(_running_ready, p))
            and p
        ),
        timeout=60,
        message=lambda: f"2 Running+Ready pods; have {kube.pods_of_job(api, namespace, 'sample')}",
    )
    for pod in pods:
        assert pod["spec"]["nodeName"] == node
        assert pod["spec"]["nodeSelector"][POOL_LABEL] == pool  # injected from the flavor's nodeLabels
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"
    wl = wait_for_workload(
        api, namespace, "sample", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True"
    )
    job = kube.get(api, "Job", "sample", namespace)
    assert job is not None and job["status"].get("ready") == 2
    kube.record_fixture(
        "admitted-running",
        [wl, job, *pods],
        note="Job admitted by Kueue, pods bound and Running on a fake node",
    )


def test_job_runs_to_completion(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    api = cluster.api_client
    _, pool = _pool_node(resources)
    _queues(resources, namespace, {"cpu": "1"}, node_labels={POOL_LABEL: pool})
    resources.create(
        Job("short", namespace).queue("main").request("cpu", "200m")
        .pod_annotation(kube.FAKE_RUN_SECONDS_ANNOTATION, "1").manifest()
    )
    wl = wait_for_workload(
        api, namespace, "short", lambda w: condition_is(w, "Finished"), what="Finished=True"
    )
    finished = condition(wl, "Finished")
    assert finished is not None and finished["reason"] == "Succeeded"
    job = kube.get(api, "Job", "short", namespace)
    assert job is not None and condition_is(job, "Complete")


def test_job_exceeding_the_quota_stays_pending(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    api = cluster.api_client
    rf, _, lq = _queues(resources, namespace, {"cpu": "1"})
    resources.create(Job("too-big", namespace).queue(lq).request("cpu", "2").manifest())
    wl = wait_for_workload(
        api,
        namespace,
        "too-big",
        lambda w: (
            (c := condition(w, "QuotaReserved")) is not None and c["status"] == "False" and c.get("message")
        ),
        what="QuotaReserved=False with a message",
    )
    qr = condition(wl, "QuotaReserved")
    assert qr is not None
    assert qr["reason"] in ("Pending", "ExceedsMaxQuota")  # legacy vs. granular vocabulary (API-NOTES 2.5)
    assert f"insufficient quota for cpu in flavor {rf}" in qr["message"]
    assert re.search(r"current podset request \(2\) > maximum capacity \(1\)", qr["message"]), qr["message"]
    assert "admission" not in wl.get("status", {})
    job = kube.get(api, "Job", "too-big", namespace)
    assert job is not None and job["spec"]["suspend"] is True
    assert kube.pods_of_job(api, namespace, "too-big") == []
    events = wait_for(
        lambda: [
            e for e in kube.events_for(api, namespace, wl["metadata"]["name"]) if e["type"] == "Warning"
        ],
        message="a Warning event on the Workload",
    )
    assert any(e["message"] == qr["message"] for e in events)
    kube.record_fixture(
        "exceeds-max-quota", [wl, job, *events], note="Job larger than the ClusterQueue's quota"
    )


def test_second_job_waits_for_quota(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    api = cluster.api_client
    _, pool = _pool_node(resources, cpu="4")
    rf, cq, lq = _queues(resources, namespace, {"cpu": "1"}, node_labels={POOL_LABEL: pool})
    resources.create(Job("first", namespace).queue(lq).request("cpu", "1").manifest())
    wait_for_workload(api, namespace, "first", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    resources.create(Job("second", namespace).queue(lq).request("cpu", "1").manifest())
    wl = wait_for_workload(
        api,
        namespace,
        "second",
        lambda w: (
            (c := condition(w, "QuotaReserved")) is not None and c["status"] == "False" and c.get("message")
        ),
        what="QuotaReserved=False with a message",
    )
    qr = condition(wl, "QuotaReserved")
    assert qr is not None and qr["reason"] in ("Pending", "WaitingForQuota")
    assert f"insufficient unused quota for cpu in flavor {rf}, 1 more needed" in qr["message"], qr["message"]
    cq_obj = wait_for(
        lambda: (
            (o := kube.get(api, "ClusterQueue", cq))
            and o.get("status", {}).get("pendingWorkloads") == 1
            and o["status"].get("admittedWorkloads") == 1
            and o
        ),
        message="ClusterQueue status: 1 pending, 1 admitted",
    )
    lq_obj = wait_for(
        lambda: (
            (o := kube.get(api, "LocalQueue", lq, namespace))
            and o.get("status", {}).get("pendingWorkloads") == 1
            and o
        ),
        message="LocalQueue status: 1 pending",
    )
    kube.record_fixture(
        "waiting-for-quota",
        [wl, kube.workload_for(api, namespace, "first"), cq_obj, lq_obj],
        note="second Job waits while the first one uses the whole quota",
    )


def test_admitted_job_with_unschedulable_pods(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """Kueue admits (quota is fine) but no node has the flavor's label: kube-scheduler's turn."""
    api = cluster.api_client
    _pool_node(resources)  # a node exists, but in another pool
    missing_pool = kube.unique_name("nowhere")
    _queues(resources, namespace, {"cpu": "4"}, node_labels={POOL_LABEL: missing_pool})
    resources.create(Job("stuck", namespace).queue("main").request("cpu", "1").manifest())
    wl = wait_for_workload(
        api, namespace, "stuck", lambda w: condition_is(w, "Admitted"), what="Admitted=True"
    )

    def unschedulable_pod() -> dict[str, Any] | None:
        for pod in kube.pods_of_job(api, namespace, "stuck"):
            cond = condition(pod, "PodScheduled")
            if cond and cond["status"] == "False" and cond.get("reason") == "Unschedulable":
                return pod
        return None

    pod = wait_for(unschedulable_pod, message="a pod with PodScheduled=False/Unschedulable")
    assert not pod["spec"].get("nodeName")
    assert pod["spec"]["nodeSelector"][POOL_LABEL] == missing_pool
    assert not pod["spec"].get("schedulingGates")
    name = pod["metadata"]["name"]
    events = wait_for(
        lambda: [
            e for e in kube.events_for(api, namespace, name, kind="Pod") if e["reason"] == "FailedScheduling"
        ],
        message="a FailedScheduling event",
    )
    msg = events[0]["message"]
    assert re.match(r"0/\d+ nodes are available: ", msg), msg
    assert "node(s) didn't match Pod's node affinity/selector" in msg, msg
    new_events = [
        e
        for e in kube.list_objects(api, "events.k8s.io/Event", namespace)
        if e.get("regarding", {}).get("name") == name
    ]
    assert any(e["reason"] == "FailedScheduling" for e in new_events)
    wl = kube.workload_for(api, namespace, "stuck")
    assert wl is not None
    kube.record_fixture(
        "admitted-unschedulable",
        [wl, pod, *events, *new_events],
        note="admitted by Kueue; no node carries the flavor's nodeLabels",
    )


def test_deactivated_workload_pods_terminate(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """Eviction deletes bound pods; the fake kubelet must finish that deletion (no kubelet here)."""
    api = cluster.api_client
    _, pool = _pool_node(resources)
    _queues(resources, namespace, {"cpu": "2"}, node_labels={POOL_LABEL: pool})
    resources.create(Job("evictee", namespace).queue("main").parallelism(2).request("cpu", "500m").manifest())
    wl = wait_for_workload(
        api, namespace, "evictee", lambda w: condition_is(w, "PodsReady"), what="PodsReady"
    )
    kube.patch(api, "Workload", wl["metadata"]["name"], {"spec": {"active": False}}, namespace)
    wl = wait_for_workload(
        api,
        namespace,
        "evictee",
        lambda w: condition_is(w, "Evicted") and condition_is(w, "QuotaReserved", "False"),
        what="Evicted=True and QuotaReserved=False",
    )
    evicted = condition(wl, "Evicted")
    assert evicted is not None and evicted["reason"] == "Deactivated"
    assert evicted["message"] == "The workload is deactivated"
    wait_for(
        lambda: kube.pods_of_job(api, namespace, "evictee") == [],
        timeout=60,
        message="the evicted Job's pods to be gone",
    )
    job = kube.get(api, "Job", "evictee", namespace)
    assert job is not None and job["spec"]["suspend"] is True
    kube.record_fixture("deactivated", [wl, job], note="Workload set spec.active=false while running")


def test_audit_log_records_writes(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    api = cluster.api_client
    _queues(resources, namespace, {"cpu": "1"})
    resources.create(Job("audited", namespace).queue("main").request("cpu", "100m").manifest())
    wl = wait_for_workload(
        api, namespace, "audited", lambda w: condition_is(w, "QuotaReserved"), what="reserved"
    )
    admin = cluster.admin_user or ""
    creates = [
        e
        for e in cluster.writes_by_user(admin)
        if e["verb"] == "create" and e["objectRef"].get("resource") == "namespaces"
    ]
    assert any(e["objectRef"].get("name") == namespace for e in creates)
    kueue_writes = wait_for(
        lambda: [
            e
            for e in cluster.writes_by_user(kube.lc.KUEUE_USER)
            if e["objectRef"].get("namespace") == namespace and e["objectRef"].get("resource") == "workloads"
        ],
        message="Kueue's writes of the Workload in the audit log",
    )
    assert any(
        e["verb"] == "create" and e["objectRef"].get("name") == wl["metadata"]["name"] for e in kueue_writes
    )
    assert any(e["objectRef"].get("subresource") == "status" for e in kueue_writes)
    assert all(e["stage"] in ("ResponseComplete", "Panic") for e in kueue_writes)
    # nothing is logged for reads
    assert all(e["verb"] in ("create", "update", "patch", "delete", "deletecollection") for e in kueue_writes)


def test_cluster_snapshot_has_every_kind(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    api = cluster.api_client
    _, pool = _pool_node(resources)
    _queues(resources, namespace, {"cpu": "1"}, node_labels={POOL_LABEL: pool})
    resources.create(Job("snap", namespace).queue("main").request("cpu", "100m").manifest())
    wait_for_workload(api, namespace, "snap", lambda w: condition_is(w, "PodsReady"), what="PodsReady")
    wait_for(
        lambda: any(
            e["apiVersion"] == "events.k8s.io/v1"
            for e in kube.cluster_snapshot(
                api, [namespace], cluster_kinds=(), namespaced_kinds=("events.k8s.io/Event",)
            )
        ),
        message="events.k8s.io/v1 events",
    )
    objects = kube.cluster_snapshot(api, namespaces=[namespace])
    assert all("apiVersion" in o and "kind" in o and "metadata" in o for o in objects)
    kinds = {(o["apiVersion"], o["kind"]) for o in objects}
    for expected in (
        ("kueue.x-k8s.io/v1beta2", "Workload"),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
        ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
        ("v1", "Event"),
        ("events.k8s.io/v1", "Event"),
        ("v1", "Node"),
    ):
        assert expected in kinds, f"{expected} missing from the snapshot ({sorted(kinds)})"


def test_lower_priority_workload_is_preempted(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """Preemption within a ClusterQueue: the victim's pods must really terminate (fake kubelet)."""
    api = cluster.api_client
    _, pool = _pool_node(resources, cpu="4")
    rf = resources.create(ResourceFlavor(kube.unique_name("rf")).node_labels({POOL_LABEL: pool}).manifest())
    rf_name = rf["metadata"]["name"]
    cq = resources.create(
        ClusterQueue(kube.unique_name("cq"))
        .quotas({rf_name: {"cpu": "1"}})
        .namespace_selector({"matchLabels": {"kubernetes.io/metadata.name": namespace}})
        .preemption(within_cluster_queue="LowerPriority")
        .manifest()
    )
    cq_name = cq["metadata"]["name"]
    resources.create(LocalQueue("main", namespace, cq_name).manifest())
    low, high = kube.unique_name("low"), kube.unique_name("high")
    for name, value in ((low, 10), (high, 1000)):
        resources.create(WorkloadPriorityClass(name, value).manifest())
    resources.create(Job("victim", namespace).queue("main").request("cpu", "1").workload_priority_class(low).manifest())
    wait_for_workload(api, namespace, "victim", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    resources.create(
        Job("preemptor", namespace).queue("main").request("cpu", "1").workload_priority_class(high).manifest()
    )
    victim = wait_for_workload(
        api, namespace, "victim", lambda w: condition_is(w, "Preempted"), what="Preempted=True"
    )
    preemptor = wait_for_workload(
        api, namespace, "preemptor", lambda w: condition_is(w, "Admitted"), timeout=60, what="Admitted=True"
    )
    victim = wait_for_workload(
        api,
        namespace,
        "victim",
        lambda w: condition_is(w, "QuotaReserved", "False") and condition(w, "QuotaReserved").get("message"),
        what="QuotaReserved=False again",
    )
    evicted = condition(victim, "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted"
    assert evicted["message"].startswith("Preempted to accommodate a workload (UID: ")
    assert "due to prioritization in the ClusterQueue" in evicted["message"]
    preempted = condition(victim, "Preempted")
    assert preempted is not None and preempted["reason"] == "InClusterQueue"
    # The Job controller deletes the victim's Pods once Kueue suspends it; the fake kubelet ends them.
    kube.wait_for(
        lambda: not any(p["metadata"].get("deletionTimestamp") for p in kube.pods_of_job(api, namespace, "victim"))
        or None,
        timeout=30,
        message="the victim's Pods to finish terminating",
    )
    events = kube.events_for(api, namespace, victim["metadata"]["name"]) + kube.events_for(
        api, namespace, preemptor["metadata"]["name"]
    )
    kube.record_fixture(
        "preempted",
        [victim, preemptor, *events],
        note="low-priority Workload preempted within its ClusterQueue by a high-priority one",
    )
