"""Issue 11: queue positions cross-checked with Kueue's visibility API, served by the real Kueue through the real
kube-apiserver aggregator (Kueue restarted with ``KueueSettings.visibility``; see docs/local-cluster.md).

One ClusterQueue, a LocalQueue named ``main`` in two namespaces, four pending Workloads of two priorities. The
snapshot (objects + Kueue's PendingWorkloadsSummary) is recorded as ``scenario-visibility-positions.yaml`` and
replayed by tests/unit/test_regressions.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kueue_doctor.api import AdmissionDiagnosis
from kueue_doctor.live import visibility
from tests.builders import Job, LocalQueue, Namespace

from . import kube
from .conftest import ClusterHandle
from .kube import Resources, wait_for, wait_for_workload
from .test_scenarios import _hog_and_priorities, _of, _pool, _queue, _snapshot

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
PENDING = f"{visibility.BASE}/clusterqueues/{{cq}}/pendingworkloads"


def _explain(kubeconfig: Path, *args: str) -> tuple[list[dict[str, Any]], str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(ROOT / "operator")}
    out = subprocess.run([sys.executable, "-m", "kueue_doctor", "explain", *args, "-o", "json"], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    diagnoses = json.loads(out.stdout)
    for d in diagnoses:
        AdmissionDiagnosis.model_validate(d)
    return diagnoses, out.stderr


def _positions(diagnoses: list[dict[str, Any]], where: dict[str, str]) -> dict[str, tuple[int, int, int | None]]:
    out = {}
    for job, ns in where.items():
        pos = _of(diagnoses, ns, job)["status"].get("queuePosition") or {}
        out[job] = (pos.get("position"), pos.get("pending"), pos.get("visibility"))
    return out


def test_kueues_visibility_api_confirms_the_computed_queue_positions(
        cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    api = cluster.api_client
    t0 = time.monotonic()
    with cluster.kueue_settings(visibility=True):
        restart = time.monotonic() - t0
        other = kube.unique_name("t-visibility-b")
        resources.create(Namespace(other).manifest())
        pool = _pool(resources, cpu="4")
        _, cq, lq = _queue(resources, namespace, {"cpu": "100m"}, pool)
        resources.create(LocalQueue(lq, other, cq).manifest())  # the same name in the other namespace
        low, high = _hog_and_priorities(resources, namespace, lq)
        where = {"old-low": namespace, "theirs-low": other, "new-low": namespace, "urgent": namespace}
        for job, prio in (("old-low", low), ("theirs-low", low), ("new-low", low), ("urgent", high)):
            resources.create(Job(job, where[job]).queue(lq).request("cpu", "100m").workload_priority_class(prio)
                             .manifest())
            wait_for_workload(api, where[job], job)
            time.sleep(1.1)  # creationTimestamp has whole seconds: a tie would be broken by UID
        path = PENDING.format(cq=cq)
        summary = wait_for(lambda: (s := kube.get_path(api, path)) and len(s.get("items") or []) == 4 and s,
                           timeout=30, message=f"Kueue's visibility API to list the 4 pending Workloads of {cq}")
        # What Kueue v0.19.2 returned: its order, and positionInLocalQueue counted per namespace (kueue#14435 fixed):
        # new-low is second in its own LocalQueue main although theirs-low (LocalQueue main of the other namespace)
        # is ahead of it in the ClusterQueue.
        got = [((it["metadata"]["namespace"], it["metadata"]["ownerReferences"][0]["name"]), it["priority"],
                it["localQueueName"], it["positionInClusterQueue"], it["positionInLocalQueue"])
               for it in summary["items"]]
        assert got == [((namespace, "urgent"), 1000, lq, 0, 0), ((namespace, "old-low"), 10, lq, 1, 1),
                       ((other, "theirs-low"), 10, lq, 2, 0), ((namespace, "new-low"), 10, lq, 3, 2)], got

        # every namespace: Kueue's position and the computed one agree, and the messages say nothing of it
        diagnoses, stderr = _explain(cluster.kubeconfig, "-A")
        assert _positions(diagnoses, where) == {"urgent": (1, 4, 1), "old-low": (2, 4, 2), "theirs-low": (3, 4, 3),
                                                "new-low": (4, 4, 4)}
        assert not any("visibility API" in _of(diagnoses, ns, job)["status"]["message"] for job, ns in where.items())
        assert "visibility" not in stderr, stderr
        objects = _snapshot(api, [namespace, other])
        objects += visibility.pending_workloads(api, [cq])
        kube.record_fixture("scenario-visibility-positions", objects,
                            note="4 pending in one ClusterQueue, LocalQueue main in two namespaces, Kueue's "
                                 "visibility API read")

        # one namespace: the computed position misses the other namespace's Workload; Kueue's says where it is
        diagnoses, _ = _explain(cluster.kubeconfig, "-n", namespace)
        mine = {job: ns for job, ns in where.items() if ns == namespace}
        assert _positions(diagnoses, mine) == {"urgent": (1, 3, 1), "old-low": (2, 3, 2), "new-low": (3, 3, 4)}
        message = _of(diagnoses, namespace, "new-low")["status"]["message"]
        assert (f"Kueue's visibility API puts it at 4 of 4 pending in ClusterQueue {cq}, kueue-doctor computed 3 of 3: "
                f"Kueue has 1 pending Workload ahead of it that the computation does not (from namespaces {other}, "
                "not in the input: `explain -A` reads every namespace).") in message, message
        assert "visibility API" not in _of(diagnoses, namespace, "old-low")["status"]["message"]

        # a reader RBAC lets list everything explain reads but not the visibility API: one line, positions computed
        reader_name, reader = _reader_without_visibility(cluster, resources)
        diagnoses, stderr = _explain(reader, "-A")
        assert _positions(diagnoses, where)["new-low"] == (4, 4, None)
        lines = [line for line in stderr.splitlines() if "visibility API" in line]
        assert len(lines) == 1 and "RBAC forbids" in lines[0] and "HTTP 403" in lines[0], stderr

        # the same reader with Kueue's LocalQueue view in its namespace (what `view` aggregates): Kueue's positions
        # through the LocalQueue, the other namespace's Workload counted, not named
        _bind(resources, reader_name, namespace, "localqueues/pendingworkloads")
        diagnoses, stderr = _explain(reader, "-n", namespace)
        assert _positions(diagnoses, mine) == {"urgent": (1, 3, 1), "old-low": (2, 3, 2), "new-low": (3, 3, 4)}
        assert "visibility" not in stderr, stderr
        assert (f"Kueue's visibility API puts it at 4 in ClusterQueue {cq}, kueue-doctor computed 3 of 3: Kueue counts "
                "1 more Workload ahead of it than the input has") in _of(diagnoses, namespace, "new-low")["status"][
                    "message"]

        # Kueue down behind its APIService: the aggregator answers 503; one line, positions computed
        assert cluster.local is not None
        cluster.local.stop_component("kueue")
        diagnoses, stderr = _explain(cluster.kubeconfig, "-A")
        assert _positions(diagnoses, where)["new-low"] == (4, 4, None)
        lines = [line for line in stderr.splitlines() if "visibility API" in line]
        assert len(lines) == 1 and "did not answer" in lines[0] and "HTTP 503" in lines[0], stderr
    on = time.monotonic() - t0
    # Kueue restarted (it was stopped above) without it: the APIService is gone, explain says nothing about it
    diagnoses, stderr = _explain(cluster.kubeconfig, "-A")
    assert _positions(diagnoses, where)["new-low"] == (4, 4, None)
    assert "visibility" not in stderr, stderr
    print(f"visibility e2e: restart with it {restart:.1f}s, block {on:.1f}s, total {time.monotonic() - t0:.1f}s")


def _reader_without_visibility(cluster: ClusterHandle, resources: Resources) -> tuple[str, Path]:
    """A user who may get/list every group explain reads, but not visibility.kueue.x-k8s.io."""
    user = kube.unique_name("reader")
    groups = ["", "batch", "apps", "kueue.x-k8s.io", "jobset.x-k8s.io", "ray.io", "kubeflow.org",
              "trainer.kubeflow.org"]
    _bind(resources, user, None, "*", groups)
    return user, cluster.make_user_kubeconfig(user)


def _bind(resources: Resources, user: str, namespace: str | None, resource: str,
          groups: tuple[str, ...] | list[str] = (visibility.VISIBILITY_GROUP,)) -> None:
    """A ClusterRole (get, list on `resource` of `groups`) bound to `user`, cluster-wide or in `namespace`."""
    role = kube.unique_name(user)
    rbac = "rbac.authorization.k8s.io"
    resources.create({"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": role},
                      "rules": [{"apiGroups": list(groups), "resources": [resource], "verbs": ["get", "list"]}]})
    binding = {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
               "metadata": {"name": role, **({"namespace": namespace} if namespace else {})},
               "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": role},
               "subjects": [{"apiGroup": rbac, "kind": "User", "name": user}]}
    resources.create(binding)
