"""The operator's inbox: which Workloads a batch of watch events marks for re-diagnosis (no cluster)."""

from __future__ import annotations

import copy
from typing import Any

from kueue_doctor.live.runtime import Options, Runtime
from kueue_doctor.state import ClusterState

from .factory import admission, admitted_conditions, cluster_queue, cond, event, flavor, job, local_queue, workload


def runtime() -> tuple[Runtime, dict[str, dict[str, Any]]]:
    objs = {
        "rf": flavor("default-flavor"),
        "cq": cluster_queue("cq-a", {"default-flavor": {"cpu": "2"}}, cohort="co"),
        "lq": local_queue("user-queue", "team-a", "cq-a"),
        "running": workload("job-run-00001", admission=admission("cq-a"), conditions=admitted_conditions("cq-a")),
        "waiting": workload("job-wait-00002", conditions=[cond(
            "QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused "
            "quota for cpu in flavor default-flavor, 1 more needed")]),
    }
    for o in objs.values():
        o["metadata"]["resourceVersion"] = "1"
    rt = Runtime(api=None, options=Options())
    rt.state = ClusterState.from_objects(copy.deepcopy(list(objs.values())))
    return rt, objs


def test_a_re_listed_object_with_the_same_resource_version_marks_nothing() -> None:
    rt, objs = runtime()
    rt.observe(None, copy.deepcopy(objs["cq"]))
    rt._drain()
    assert rt.dirty == set()


def test_a_cluster_queue_status_change_re_diagnoses_only_workloads_waiting_for_quota() -> None:
    rt, objs = runtime()
    cq = copy.deepcopy(objs["cq"])
    cq["metadata"]["resourceVersion"] = "2"
    cq["status"]["reservingWorkloads"] = 3
    rt.observe("MODIFIED", cq)
    rt._drain()
    assert rt.dirty == {("team-a", "job-wait-00002")}


def test_a_cluster_queue_spec_change_re_diagnoses_the_whole_cohort() -> None:
    rt, objs = runtime()
    cq = copy.deepcopy(objs["cq"])
    cq["metadata"]["resourceVersion"] = "2"
    cq["spec"]["stopPolicy"] = "Hold"
    rt.observe("MODIFIED", cq)
    rt._drain()
    assert rt.dirty == {("team-a", "job-wait-00002"), ("team-a", "job-run-00001")}


def test_a_deleted_workload_is_forgotten_and_not_marked() -> None:
    rt, objs = runtime()
    rt.verdicts[("team-a", "job-run-00001")] = None  # type: ignore[assignment]
    rt.observe("DELETED", copy.deepcopy(objs["running"]))
    rt._drain()
    assert ("team-a", "job-run-00001") not in rt.state.workloads
    assert ("team-a", "job-run-00001") not in rt.verdicts and ("team-a", "job-run-00001") not in rt.dirty


def test_warning_events_about_unrelated_kinds_are_not_kept() -> None:
    rt, _ = runtime()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n-uid"}}
    rt.observe("ADDED", event(node, "NodeNotReady", "Node n1 status is now: NodeNotReady"))
    j = job("trainer", "team-a")
    rt.observe("ADDED", event(j, "FailedCreate", 'Error creating: pods "x" is forbidden: exceeded quota: q'))
    assert len(rt.inbox) == 1
