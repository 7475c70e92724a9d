"""MultiKueue on a manager and a worker local control plane, live (issue 9).

The session's cluster is the manager; the module fixture ``worker`` starts a second local control plane (the
worker: its own etcd, apiserver, KCM, scheduler, Kueue, fake kubelet). Each test builds its MultiKueue objects
(tests/e2e/multikueue.py), makes the situation happen, asserts what Kueue really wrote on the manager, records the
MANAGER's snapshot (``scenario-family-multikueue-*.yaml``, replayed by tests/unit/test_regressions.py) and asserts
the engine's verdict on it: kueue-doctor sees only the manager.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kueue_doctor import diagnose_objects
from tests.builders import Job

from . import families, kube
from . import multikueue as mk
from .conftest import ClusterHandle
from .kube import Resources, condition, condition_is, wait_for, wait_for_workload
from .test_kueue_features import _read_back_v1beta1
from .test_owner_scenarios import _diagnosis_of

pytestmark = pytest.mark.e2e

import component_faults  # noqa: E402  (hack/control-plane, on sys.path through tests/e2e/kube.py)

ROOT = Path(__file__).resolve().parents[2]
#: MultiKueue objects the engine reads next to families.snapshot's
MK_KINDS = ("MultiKueueCluster", "MultiKueueConfig")


@pytest.fixture(scope="module")
def worker(cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[mk.Worker]:
    if cluster.local is None:
        pytest.skip("the MultiKueue worker is a second local control plane next to the local manager")
    assert cluster.local.bin_dir is not None
    with mk.worker_cluster(tmp_path_factory.mktemp("multikueue-worker"), cluster.local.bin_dir) as w:
        yield w


@pytest.fixture
def worker_resources(worker: mk.Worker) -> Iterator[Resources]:
    res = Resources(worker.api)
    try:
        yield res
    finally:
        res.cleanup()


def _snapshot(api: Any, namespace: str) -> list[dict[str, Any]]:
    objects = families.snapshot(api, [namespace])
    for kind in MK_KINDS:
        objects += kube.list_objects(api, kind)
    return objects


def _same_through_v1beta1(api: Any, namespace: str, objects: list[dict[str, Any]], record: str) -> None:
    """The snapshot's Kueue objects read again through kueue.x-k8s.io/v1beta1 (MultiKueueCluster: spec.kubeConfig,
    by Kueue's conversion webhook) give the same verdict and message; recorded next to the v1beta2 one."""
    old = _read_back_v1beta1(api, objects)
    families.record(f"{record}-v1beta1", old, f"{record}, Kueue objects read through v1beta1")
    new_st, old_st = (_diagnosis_of(diagnose_objects(o, grace=timedelta(0)), namespace, owner=("Job", "trainer"))
                      for o in (objects, old))
    assert new_st is not None and old_st is not None
    keys = ("stage", "reason", "cause", "actionBy", "message")
    assert [new_st["status"][k] for k in keys] == [old_st["status"][k] for k in keys], (new_st, old_st)


def _check(wl: dict[str, Any], name: str) -> dict[str, Any]:
    return next((c for c in wl.get("status", {}).get("admissionChecks", []) if c["name"] == name), {})


def _job(namespace: str, name: str, cpu: str) -> dict[str, Any]:
    return Job(name, namespace).queue("main").request("cpu", cpu).manifest()


def _timed(what: str, t0: float) -> None:
    print(f"MultiKueue scenario {what}: {time.monotonic() - t0:.1f}s")


def test_dispatched_and_running_on_the_worker(cluster: ClusterHandle, worker: mk.Worker, resources: Resources,
                                              worker_resources: Resources, namespace: str) -> None:
    """Kueue on the manager reserves quota, MultiKueue copies the Job to the worker, the worker's Kueue admits it
    and its Pod runs there: the manager's check is Ready "The workload was admitted on ..." with
    status.clusterName; the manager has no Pod, by design."""
    api = cluster.api_client
    t0 = time.monotonic()
    s = mk.setup(resources, worker_resources, namespace, kubeconfig=worker.kubeconfig, manager_cpu="4",
                 worker_cpu="4", worker_node_cpu="4")
    mk.wait_active(api, "MultiKueueCluster", s.cluster)
    mk.wait_active(api, "AdmissionCheck", s.check)
    mk.wait_active(api, "ClusterQueue", s.cq)
    mk.submit(api, resources, namespace, s, _job(namespace, "trainer", "500m"))
    wait_for(lambda: [p for p in kube.pods_of_job(worker.api, namespace, "trainer")
                      if p["status"].get("phase") == "Running"], timeout=60,
             message="the Job's Pod Running on the worker")
    wl = wait_for_workload(api, namespace, "trainer", lambda w: condition_is(w, "Admitted")
                           and _check(w, s.check).get("state") == "Ready", timeout=30, what="Admitted, check Ready")
    assert wl["status"]["clusterName"] == s.cluster, wl["status"]
    assert _check(wl, s.check)["message"] == f'The workload was admitted on "{s.cluster}"', wl["status"]
    assert not kube.pods_of_job(api, namespace, "trainer"), "no Pod on the manager: it runs on the worker"
    objects = _snapshot(api, namespace)
    families.record("multikueue-dispatched", objects,
                    "Job trainer dispatched by MultiKueue to the worker cluster, its Pod Running there")
    st = families.verdict(objects, namespace, owner=("Job", "trainer"), reason="Running",
                          cause="DispatchedToWorkerCluster")
    assert f"worker cluster {s.cluster}" in st["message"] and "no Pod" not in st["message"], st["message"]
    assert st["actionBy"] == "Nobody", st
    _same_through_v1beta1(api, namespace, objects, "multikueue-dispatched")
    _timed("dispatched", t0)


def test_worker_apiserver_stops_after_admission(cluster: ClusterHandle, worker: mk.Worker, resources: Resources,
                                                worker_resources: Resources, namespace: str) -> None:
    """Dispatched and running, then the worker's kube-apiserver stops: the manager's MultiKueueCluster turns
    Active=False while the check stays Ready (Kueue waits workerLostTimeout, 15m, before Retry). The apiserver is
    started again afterwards and the worker's Kueue must reconcile before the next test."""
    api = cluster.api_client
    t0 = time.monotonic()
    s = mk.setup(resources, worker_resources, namespace, kubeconfig=worker.kubeconfig, manager_cpu="4",
                 worker_cpu="4", worker_node_cpu="4")
    mk.wait_active(api, "ClusterQueue", s.cq)
    mk.submit(api, resources, namespace, s, _job(namespace, "trainer", "500m"))
    wait_for_workload(api, namespace, "trainer", lambda w: condition_is(w, "Admitted")
                      and _check(w, s.check).get("state") == "Ready", timeout=60, what="Admitted, check Ready")
    with component_faults.component_down(worker.cluster, "kube-apiserver"):
        mkc = condition(mk.wait_active(api, "MultiKueueCluster", s.cluster, "False", timeout=90), "Active") or {}
        wl = kube.workload_for(api, namespace, "trainer")
        assert wl is not None and _check(wl, s.check).get("state") == "Ready", "Kueue waits workerLostTimeout"
        assert wl["status"]["clusterName"] == s.cluster and condition_is(wl, "Admitted")
        objects = _snapshot(api, namespace)
        families.record("multikueue-worker-lost", objects,
                        f"admitted on the worker, then the worker's apiserver stopped: {mkc.get('reason')}")
    component_faults.Faults(worker.cluster).kueue_reconciles()
    st = families.verdict(objects, namespace, owner=("Job", "trainer"), reason="Running",
                          cause="DispatchedToWorkerCluster")
    assert st["actionBy"] == "ClusterAdmin", st
    for part in (f"worker cluster {s.cluster}", f"But MultiKueueCluster {s.cluster} is not connected (Active=False "
                 f"{mkc['reason']}", "workerLostTimeout"):
        assert part in st["message"], (part, st["message"])
    _timed("worker lost", t0)


#: (fixture, the Secret's kubeconfig, the MultiKueueCluster's Active reason, a part of its message)
BROKEN_WORKERS = {
    "worker-unreachable": (mk.unreachable_kubeconfig, "ClientConnectionFailed", "connection refused"),
    "worker-secret-missing": (lambda _w: None, "BadKubeConfig", "kubeconfig\" not found"),
    "worker-kubeconfig-insecure": (mk.insecure_kubeconfig, "InsecureKubeConfig",
                                   "insecure TLS verification is not allowed"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN_WORKERS))
def test_worker_not_connected(cluster: ClusterHandle, worker: mk.Worker, resources: Resources,
                              worker_resources: Resources, namespace: str, broken: str) -> None:
    """The only worker cannot be used: its kubeconfig names a loopback port nobody listens on (its apiserver
    down), its Secret does not exist, or its kubeconfig skips TLS verification. The MultiKueueCluster is
    Active=False with the reason, the check NoUsableClusters, the ClusterQueue inactive (AdmissionCheckInactive),
    the Workload pending on it."""
    make_kubeconfig, mkc_reason, mkc_part = BROKEN_WORKERS[broken]
    api = cluster.api_client
    t0 = time.monotonic()
    s = mk.setup(resources, worker_resources, namespace, kubeconfig=make_kubeconfig(worker),
                 manager_cpu="4", worker_cpu="4")
    mkc = condition(mk.wait_active(api, "MultiKueueCluster", s.cluster, "False"), "Active") or {}
    assert mkc["reason"] == mkc_reason and mkc_part in mkc["message"], mkc
    ac = condition(mk.wait_active(api, "AdmissionCheck", s.check, "False"), "Active") or {}
    assert (ac["reason"], ac["message"]) == ("NoUsableClusters", f"Inactive clusters: [{s.cluster}]"), ac
    mk.wait_active(api, "ClusterQueue", s.cq, "False")
    mk.submit(api, resources, namespace, s, _job(namespace, "trainer", "500m"))
    wl = wait_for_workload(api, namespace, "trainer", lambda w: condition_is(w, "QuotaReserved", "False")
                           and "is inactive" in (condition(w, "QuotaReserved") or {}).get("message", ""),
                           timeout=30, what="pending on the inactive ClusterQueue")
    assert _check(wl, s.check).get("state") == "Pending", wl["status"]
    objects = _snapshot(api, namespace)
    families.record(f"multikueue-{broken}", objects, f"the only worker cannot be used: {broken}, {mkc_reason}")
    st = families.verdict(objects, namespace, owner=("Job", "trainer"), reason="QueueMisconfigured",
                          cause="AdmissionCheckInactive")
    for part in (s.check, "NoUsableClusters", f"MultiKueueCluster {s.cluster} is not connected", mkc_reason,
                 mkc_part, "Platform admin"):
        assert part in st["message"], (part, st["message"])
    assert st["actionBy"] == "ClusterAdmin", st
    assert any(e["kind"] == "MultiKueueCluster" and e["name"] == s.cluster for e in st["evidence"]), st["evidence"]
    _same_through_v1beta1(api, namespace, objects, f"multikueue-{broken}")
    # `explain` on the live manager lists the MultiKueue objects itself and says the same
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": str(ROOT / "operator")}
    out = subprocess.run([sys.executable, "-m", "kueue_doctor", "explain", "-n", namespace, "-o", "json"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    found = _diagnosis_of(json.loads(out.stdout), namespace, owner=("Job", "trainer"))
    assert found is not None, out.stdout
    live = found["status"]
    assert (live["cause"], live["actionBy"]) == ("AdmissionCheckInactive", "ClusterAdmin"), live
    assert f"MultiKueueCluster {s.cluster} is not connected (Active=False {mkc_reason}" in live["message"], live
    _timed(broken, t0)


def test_no_worker_has_quota(cluster: ClusterHandle, worker: mk.Worker, resources: Resources,
                             worker_resources: Resources, namespace: str) -> None:
    """The manager reserves 2 of its 4 cpu; the worker's ClusterQueue has 1: the worker's Workload stays pending
    there, the manager's check stays Pending with no message and status.nominatedClusterNames names the worker."""
    api = cluster.api_client
    t0 = time.monotonic()
    s = mk.setup(resources, worker_resources, namespace, kubeconfig=worker.kubeconfig, manager_cpu="4",
                 worker_cpu="1")
    mk.wait_active(api, "AdmissionCheck", s.check)
    mk.wait_active(api, "ClusterQueue", s.cq)
    mk.submit(api, resources, namespace, s, _job(namespace, "trainer", "2"))
    remote = wait_for(lambda: [w for w in kube.list_objects(worker.api, "Workload", namespace)
                               if "maximum capacity (1)" in (condition(w, "QuotaReserved") or {}).get("message", "")],
                      timeout=60, message="the worker's copy pending: 2 cpu > its maximum capacity (1)")
    assert len(remote) == 1
    wl = wait_for_workload(api, namespace, "trainer", lambda w: condition_is(w, "QuotaReserved")
                           and w["status"].get("nominatedClusterNames") == [s.cluster], timeout=30,
                           what=f"QuotaReserved, nominated to {s.cluster}")
    check = _check(wl, s.check)
    assert check.get("state") == "Pending" and not check.get("message"), check
    assert not condition_is(wl, "Admitted") and not wl["status"].get("clusterName"), wl["status"]
    objects = _snapshot(api, namespace)
    families.record("multikueue-no-worker-quota", objects,
                    "Job trainer (2 cpu) reserved on the manager; the worker's ClusterQueue has 1 cpu")
    st = families.verdict(objects, namespace, owner=("Job", "trainer"), reason="WaitingForAdmissionChecks",
                          cause="AdmissionCheckPending")
    for part in (s.check, f"worker cluster(s) {s.cluster}", "nominatedClusterNames", "the worker's own Kueue"):
        assert part in st["message"], (part, st["message"])
    _timed("no worker quota", t0)


def test_check_rejects_a_job_another_controller_manages(cluster: ClusterHandle, worker: mk.Worker,
                                                        resources: Resources, worker_resources: Resources,
                                                        namespace: str) -> None:
    """A Job whose spec.managedBy names another controller: Kueue's webhook leaves it, the quota is reserved, the
    MultiKueue check is Rejected ("The owner is not managed by Kueue: ...") and Kueue deactivates the Workload."""
    api = cluster.api_client
    t0 = time.monotonic()
    s = mk.setup(resources, worker_resources, namespace, kubeconfig=worker.kubeconfig, manager_cpu="4",
                 worker_cpu="4")
    mk.wait_active(api, "ClusterQueue", s.cq)
    body = _job(namespace, "trainer", "500m")
    body["spec"]["managedBy"] = "example.com/batch-runner"
    assert resources.create(body)["spec"]["managedBy"] == "example.com/batch-runner"
    wl = wait_for_workload(api, namespace, "trainer", lambda w: _check(w, s.check).get("state") == "Rejected"
                           and condition_is(w, "Evicted"), timeout=60, what="check Rejected, Evicted")
    assert wl["spec"]["active"] is False and condition(wl, "Evicted")["reason"] == "DeactivatedDueToAdmissionCheck"
    said = _check(wl, s.check)["message"]
    assert said.startswith('The owner is not managed by Kueue: Expecting spec.managedBy to be '
                           '"kueue.x-k8s.io/multikueue" not "example.com/batch-runner"'), said
    objects = _snapshot(api, namespace)
    families.record("multikueue-rejected", objects,
                    "Job trainer with spec.managedBy example.com/batch-runner: the MultiKueue check rejects it")
    st = families.verdict(objects, namespace, owner=("Job", "trainer"), reason="Deactivated",
                          cause="AdmissionCheckRejected")
    assert st["actionBy"] == "WorkloadOwner", st
    for part in (f"MultiKueue check {s.check} rejected it: The owner is not managed by Kueue", "recreate it without "
                 "spec.managedBy"):
        assert part in st["message"], (part, st["message"])
    _timed("rejected", t0)


def test_operator_follows_a_multikueue_cluster_change(cluster: ClusterHandle, worker: mk.Worker,
                                                      resources: Resources, worker_resources: Resources,
                                                      namespace: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The operator (the manifests' RBAC) watches MultiKueueClusters: the worker's Secret is missing (BadKubeConfig),
    then a Secret naming an unreachable apiserver appears (ClientConnectionFailed). Only the MultiKueueCluster
    changes (the check's condition keeps its reason and message, the Workload is not written): the published
    diagnosis follows it, well inside the resync interval (600 s here)."""
    from .test_operator import adiag, install_crd_and_rbac, start_operator, token_kubeconfig

    api = cluster.api_client
    t0 = time.monotonic()
    install_crd_and_rbac(cluster)
    workdir = tmp_path_factory.mktemp("multikueue-operator")
    op = start_operator(token_kubeconfig(cluster, workdir), workdir, "-n", namespace, "--resync-interval", "600")
    try:
        s = mk.setup(resources, worker_resources, namespace, kubeconfig=None, manager_cpu="4", worker_cpu="4")
        mk.wait_active(api, "ClusterQueue", s.cq, "False")
        mk.submit(api, resources, namespace, s, _job(namespace, "trainer", "500m"))
        wl = wait_for_workload(api, namespace, "trainer", lambda w: condition_is(w, "QuotaReserved", "False"),
                               timeout=30)
        name = wl["metadata"]["name"]

        def published(part: str) -> Any:
            def check() -> dict[str, Any] | None:
                d = adiag(api, namespace, name)
                return d if d and part in d["status"].get("message", "") else None
            return wait_for(check, timeout=30, message=lambda: f"a diagnosis saying {part!r}: "
                            f"{(adiag(api, namespace, name) or {}).get('status')}\n{op.tail()}")

        published("Active=False BadKubeConfig")
        ac_before = condition(kube.get(api, "AdmissionCheck", s.check), "Active")
        wl_version = kube.workload_for(api, namespace, "trainer")["metadata"]["resourceVersion"]  # type: ignore[index]
        resources.create({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": f"{s.cluster}-kubeconfig", "namespace": kube.lc.KUEUE_NAMESPACE},
                          "stringData": {"kubeconfig": mk.unreachable_kubeconfig(worker)}})
        t1 = time.monotonic()
        d = published("Active=False ClientConnectionFailed")
        print(f"the operator followed the MultiKueueCluster in {time.monotonic() - t1:.1f}s")
        assert d["status"]["cause"] == "AdmissionCheckInactive", d["status"]
        assert condition(kube.get(api, "AdmissionCheck", s.check), "Active") == ac_before
        assert kube.workload_for(api, namespace, "trainer")["metadata"]["resourceVersion"] == wl_version  # type: ignore[index]
    finally:
        op.stop()
    _timed("operator", t0)
