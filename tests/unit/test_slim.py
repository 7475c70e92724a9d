"""The operator keeps slimmed objects: verdicts on them must equal verdicts on the full objects."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kueue_doctor import diagnose_objects
from kueue_doctor.kube.slim import slim

from . import test_engine
from .factory import admission, cluster_queue, cond, job, local_queue, node, pod, workload

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def scenario() -> list[dict[str, Any]]:
    j = job("trainer", "team-a", parallelism=2, suspend=False)
    wl = workload("job-trainer-5d4c3", owner=j, count=2, admission=admission("team-a-cq", count=2),
                  conditions=[*[cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-cq"),
                                cond("Admitted", "True", "Admitted", "The workload is admitted")],
                              cond("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded")])
    wl["metadata"]["managedFields"] = [{"manager": "kueue-admission", "fieldsV1": {"f:status": {}}}]
    wl["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = "x" * 5000
    p1 = pod("trainer-a", j, wl["metadata"]["name"], node="n1", container_statuses=[{
        "name": "main", "ready": False, "restartCount": 3, "image": "img", "imageID": "",
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}}}])
    p2 = pod("trainer-b", j, wl["metadata"]["name"], gates=["example.com/gate"])
    pending = workload("job-b-00002", conditions=[cond("QuotaReserved", "False", "Pending",
                       "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                       "default-flavor, 1 more needed")])
    return [*test_engine.queue_setup(), cluster_queue("other", {"default-flavor": {"cpu": "1"}}),
            local_queue("lq2", "team-b", "other"), node("n1"), j, wl, p1, p2, pending]


def test_verdicts_on_slimmed_objects_equal_verdicts_on_full_objects() -> None:
    full = scenario()
    assert diagnose_objects([slim(o) for o in full], NOW) == diagnose_objects(full, NOW)


def test_slim_drops_managed_fields_and_foreign_annotations_but_keeps_kueue_ones() -> None:
    wl = next(o for o in scenario() if o["kind"] == "Workload")
    wl["metadata"]["annotations"]["kueue.x-k8s.io/admission-gated-by"] = "example.com/ctl"
    out = slim(wl)
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"kueue.x-k8s.io/admission-gated-by": "example.com/ctl"}
