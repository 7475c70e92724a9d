"""AppWrapper as an owner kind: its Pods are found by the label its controller writes when the wrapped Job is not in
the input (the operator lists Jobs by the queue-name label, which an AppWrapper's Job has not), and `explain` of the
wrapped Job answers with the AppWrapper's Workload. The objects are the catalog's (tests/cases/verdicts.yaml)."""

from __future__ import annotations

import copy
import io
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from kueue_doctor import diagnose_objects
from kueue_doctor.cli import main
from kueue_doctor.state import ClusterState

CATALOG = Path(__file__).parents[1] / "cases" / "verdicts.yaml"
NOW = datetime.fromisoformat("2026-11-30T10:03:00+00:00")
WORKLOAD = "appwrapper-train-llm-7a0e9"


def _objects() -> list[dict[str, Any]]:
    scenarios = yaml.safe_load(CATALOG.read_text())["scenarios"]
    case = next(c for c in scenarios if c["name"] == "appwrapper-pods-unschedulable-before-its-warmup-reset")
    return copy.deepcopy(case["objects"])


def test_pods_without_kueues_annotation_are_found_by_the_appwrapper_label() -> None:
    """Kueue writes its workload annotation only with TopologyAwareScheduling on: without it, and without the Job,
    the AppWrapper controller's label is the link left."""
    objects = _objects()
    for obj in objects:
        if obj["kind"] == "Pod":
            obj["metadata"].pop("annotations")
    state = ClusterState.from_objects(objects)
    assert sorted(p["metadata"]["name"] for p in state.pods_of(state.workloads[("team-a", WORKLOAD)])) == [
        "train-llm-0-x7k2q", "train-llm-1-p9m4d"]
    pod = next(o for o in objects if o["kind"] == "Pod")
    assert state.affected_workloads(pod) == {("team-a", WORKLOAD)}
    status = next(d for d in diagnose_objects(objects, NOW) if d["metadata"]["name"] == WORKLOAD)["status"]
    assert status["reason"] == "PodsUnschedulable" and "cannot place 2/2 Pods" in status["message"]


def test_explain_of_the_wrapped_job_answers_with_the_appwrappers_workload(tmp_path: Path) -> None:
    objects = _objects()
    objects.append({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train-llm", "namespace": "team-a", "uid": "6b2c3d4e-5f60-4172-9b8c-0000000a0003",
                     "creationTimestamp": "2026-11-30T10:00:02Z", "labels": {"workload.codeflare.dev/appwrapper": "train-llm"},
                     "ownerReferences": [{"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
                                          "name": "train-llm", "uid": "5a1b2c3d-4e5f-4061-8a7b-0000000a0002",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"parallelism": 2, "completions": 2, "suspend": False},
        "status": {"active": 2}})
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(objects))
    out, err = io.StringIO(), io.StringIO()
    code = main(["explain", "-f", str(dump), "--now", "2026-11-30T10:03:00Z", "job/train-llm", "-o", "yaml"],
                stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert "belongs to AppWrapper train-llm" in err.getvalue()
    docs = [d for d in yaml.safe_load_all(out.getvalue()) if d]
    assert docs[0]["metadata"]["name"] == WORKLOAD and docs[0]["status"]["reason"] == "PodsUnschedulable"
    out = io.StringIO()
    code = main(["explain", "-f", str(dump), "--now", "2026-11-30T10:03:00Z", "aw/train-llm", "-o", "yaml"],
                stdout=out, stderr=io.StringIO())
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out.getvalue()) if d]  # the AppWrapper's own name finds the same Workload
    assert [d["metadata"]["name"] for d in docs] == [WORKLOAD], docs


def test_failed_pods_within_the_failure_grace_period_are_the_appwrappers_to_retry() -> None:
    """Running, Unhealthy FoundFailedPods for 30s of its 1m grace period: the controller resets it next (Nobody); with
    its resets used up, the next failure is final and the owner must act now."""
    objects = _objects()
    aw = next(o for o in objects if o["kind"] == "AppWrapper")
    unhealthy = next(c for c in aw["status"]["conditions"] if c["type"] == "Unhealthy")
    unhealthy.update(status="True", reason="FoundFailedPods", message="", lastTransitionTime="2026-11-30T10:02:30Z")
    pod = next(o for o in objects if o["kind"] == "Pod")
    pod["spec"]["nodeName"] = "node-1"
    pod["status"] = {"phase": "Failed", "containerStatuses": [{"name": "trainer", "ready": False, "restartCount": 0,
                                                                "state": {"terminated": {"reason": "Error", "exitCode": 3}}}]}
    status = next(d for d in diagnose_objects(objects, NOW) if d["metadata"]["name"] == WORKLOAD)["status"]
    assert (status["reason"], status["cause"], status["actionBy"]) == ("ContainersNotStarting", "PodsFailed", "Nobody")
    assert "train-llm-0-x7k2q (Error, exit code 3)" in status["message"]
    assert "at about 2026-11-30T10:03:30Z resets it" in status["message"] and "reset 1 of 3" in status["message"]
    aw["status"]["resettingCount"] = 3
    status = next(d for d in diagnose_objects(objects, NOW) if d["metadata"]["name"] == WORKLOAD)["status"]
    assert status["actionBy"] == "WorkloadOwner" and "no reset left (3 of 3 used" in status["message"]


def test_a_reset_long_past_its_redeploy_time_is_the_controllers_admins() -> None:
    scenarios = yaml.safe_load(CATALOG.read_text())["scenarios"]
    case = next(c for c in scenarios if c["name"] == "appwrapper-resetting-after-a-pod-failure")
    status = next(d for d in diagnose_objects(case["objects"], datetime.fromisoformat("2026-11-30T10:20:00+00:00"))
                  if d["metadata"]["name"] == WORKLOAD)["status"]
    assert status["actionBy"] == "ClusterAdmin" and "13m later it has not" in status["message"]
