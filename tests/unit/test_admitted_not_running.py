""""Admitted but not running" and requeue-loop verdicts: the edges the catalog scenarios do not show.

The catalog (tests/cases/verdicts.yaml) holds one scenario per verdict; these tests pin the details: the
Kubeflow suspend path, what slim keeps of managedFields, and the negative cases that must keep the old verdict.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from kueue_doctor import diagnose_objects
from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.kube.slim import slim
from kueue_doctor.state import ClusterState
from tests.unit.test_catalog import SCENARIOS

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
ADMITTED = "2026-11-30T09:00:05Z"


def _cond(ctype: str, status: str, reason: str, message: str, time: str = ADMITTED) -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": time}


def _queues() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"},
         "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a-cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]},
         "status": {"conditions": [_cond("Active", "True", "Ready", "Can admit new workloads")],
                    "flavorsReservation": [{"name": "default-flavor", "resources": [{"name": "cpu", "total": "1"}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "user-queue", "namespace": "team-a"}, "spec": {"clusterQueue": "team-a-cq"},
         "status": {"conditions": [_cond("Active", "True", "Ready", "Can submit new workloads to localQueue")]}},
    ]


def _pytorchjob(writer: str, time: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "team-a", "uid": "owner-uid-1",
                     "creationTimestamp": "2026-11-30T09:00:00Z",
                     "managedFields": [
                         {"apiVersion": "kubeflow.org/v1", "fieldsType": "FieldsV1", "manager": "kubectl-create",
                          "operation": "Update", "time": "2026-11-30T09:00:00Z",
                          "fieldsV1": {"f:spec": {"f:pytorchReplicaSpecs": {}}}},
                         {"apiVersion": "kubeflow.org/v1", "fieldsType": "FieldsV1", "manager": writer,
                          "operation": "Apply", "time": time,
                          "fieldsV1": {"f:spec": {"f:runPolicy": {"f:suspend": {}}}}},
                         {"apiVersion": "kubeflow.org/v1", "fieldsType": "FieldsV1", "manager": "training-operator",
                          "operation": "Update", "subresource": "status", "time": "2026-11-30T09:40:00Z",
                          "fieldsV1": {"f:status": {"f:conditions": {}}}}]},
        "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {}},
    }


def _workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "pytorchjob-bert-1a2b3", "namespace": "team-a", "uid": "wl-uid-1",
                     "creationTimestamp": "2026-11-30T09:00:00Z",
                     "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bert",
                                          "uid": "owner-uid-1", "controller": True}]},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "master", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {"admission": {"clusterQueue": "team-a-cq", "podSetAssignments": [
            {"name": "master", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
            "conditions": [_cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-cq"),
                           _cond("Admitted", "True", "Admitted", "The workload is admitted")]},
    }


def _verdict(objects: list[dict[str, Any]]) -> dict[str, Any]:
    out = diagnose_objects(objects, NOW)
    status: dict[str, Any] = next(d for d in out if d["metadata"]["name"] == "pytorchjob-bert-1a2b3")["status"]
    return status


def test_kubeflow_run_policy_suspend_written_after_admission_by_another_manager() -> None:
    st = _verdict([*_queues(), _pytorchjob("gitops-sync", "2026-11-30T09:30:00Z"), _workload()])
    assert (st["reason"], st.get("cause"), st["actionBy"]) == ("JobSuspended", "SuspendedByOtherManager",
                                                               "ClusterAdmin")
    assert "'gitops-sync' (Apply) wrote spec.runPolicy.suspend" in st["message"]
    ev = next(e for e in st["evidence"] if e["kind"] == "PyTorchJob")
    assert ev == {"kind": "PyTorchJob", "name": "bert", "namespace": "team-a",
                  "field": "metadata.managedFields[spec.runPolicy.suspend]", "reason": "gitops-sync",
                  "message": "operation Apply", "time": "2026-11-30T09:30:00Z"}


def test_kueue_as_the_last_writer_is_not_foreign() -> None:
    st = _verdict([*_queues(), _pytorchjob("kueue-pytorchjob-controller", "2026-11-30T09:30:00Z"), _workload()])
    assert st.get("cause") == "OwnerSuspended"


def test_a_write_before_the_admission_is_the_creation_path() -> None:
    st = _verdict([*_queues(), _pytorchjob("gitops-sync", "2026-11-30T09:00:01Z"), _workload()])
    assert st.get("cause") == "OwnerSuspended"


def test_slim_keeps_only_the_suspend_writers_and_the_verdict() -> None:
    objects = [*_queues(), _pytorchjob("gitops-sync", "2026-11-30T09:30:00Z"), _workload()]
    owner = slim(copy.deepcopy(objects[3]))
    assert owner["metadata"]["managedFields"] == [
        {"manager": "gitops-sync", "operation": "Apply", "time": "2026-11-30T09:30:00Z",
         "fieldsV1": {"f:spec": {"f:runPolicy": {"f:suspend": {}}}}}]
    slimmed = [slim(copy.deepcopy(o)) for o in objects]
    assert _verdict(slimmed)["cause"] == _verdict(objects)["cause"] == "SuspendedByOtherManager"


def _trainer_job(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "trainer", "namespace": "team-a", "uid": "job-uid-1",
                         "creationTimestamp": "2026-11-30T09:00:00Z", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"suspend": False, "parallelism": 1}, "status": status}


def _job_workload(*extra: dict[str, Any]) -> dict[str, Any]:
    wl = _workload()
    wl["metadata"] = {"name": "job-trainer-1a2b3", "namespace": "team-a", "uid": "wl-uid-2",
                      "creationTimestamp": "2026-11-30T09:00:00Z",
                      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "trainer",
                                           "uid": "job-uid-1", "controller": True}]}
    wl["status"]["conditions"] += list(extra)
    return wl


def _job_verdict(objects: list[dict[str, Any]]) -> dict[str, Any]:
    out = diagnose_objects(objects, NOW)
    status: dict[str, Any] = next(d for d in out if d["metadata"]["name"] == "job-trainer-1a2b3")["status"]
    return status


def test_an_owner_deleted_minutes_ago_holds_a_ghost_reservation_and_a_fresh_deletion_does_not() -> None:
    job = _trainer_job(active=1)
    job["metadata"]["deletionTimestamp"] = "2026-11-30T09:50:00Z"
    job["metadata"]["finalizers"] = ["example.com/audit"]
    st = _job_verdict([*_queues(), job, _job_workload()])
    assert (st["reason"], st.get("cause")) == ("PodsNotCreated", "GhostReservation")
    assert "being deleted since 2026-11-30T09:50:00Z" in st["message"]
    assert st["quota"] == [{"flavor": "default-flavor", "resource": "cpu", "requested": "1", "nominal": "4",
                            "used": "1", "source": "Kueue"}]
    job["metadata"]["deletionTimestamp"] = "2026-11-30T09:58:00Z"
    assert _job_verdict([*_queues(), job, _job_workload()]).get("cause") != "GhostReservation"
    full = _job_verdict([*_queues(), job, _job_workload()])
    assert _job_verdict([slim(copy.deepcopy(o)) for o in [*_queues(), job, _job_workload()]]) == full


def test_a_missing_owner_is_a_ghost_only_when_jobs_and_pods_are_listed_completely() -> None:
    other = _trainer_job()
    other["metadata"] = {**other["metadata"], "name": "other", "uid": "job-uid-9"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "team-b", "uid": "p1"},
           "status": {"phase": "Running"}}
    orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "trainer-abcde", "namespace": "team-a", "uid": "p2",
        "annotations": {"kueue.x-k8s.io/workload": "job-trainer-1a2b3"}}, "status": {"phase": "Running"}}
    assert _job_verdict([*_queues(), other, pod, _job_workload()]).get("cause") == "GhostReservation"
    assert _job_verdict([*_queues(), pod, _job_workload()]).get("cause") != "GhostReservation"  # no Job listed
    assert _job_verdict([*_queues(), other, _job_workload()]).get("cause") != "GhostReservation"  # no Pod listed
    # Pods left running after `kubectl delete job --cascade=orphan` do use the quota
    assert _job_verdict([*_queues(), other, orphan, _job_workload()]).get("cause") != "GhostReservation"


def test_pods_ready_with_pods_gone_needs_the_pod_list_and_an_idle_job() -> None:
    ready = _cond("PodsReady", "True", "Started", "All pods reached readiness and the workload is running")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "team-b", "uid": "p1"},
           "status": {"phase": "Running"}}
    assert _job_verdict([*_queues(), _trainer_job(active=0), _job_workload(ready), pod]).get(
        "cause") == "GhostReservation"
    assert _job_verdict([*_queues(), _trainer_job(active=0), _job_workload(ready)]).get(
        "cause") != "GhostReservation"  # Pods not in the input: nothing is known about them
    assert _job_verdict([*_queues(), _trainer_job(active=1), _job_workload(ready), pod]).get(
        "cause") != "GhostReservation"  # the Job controller still counts an active Pod


def _pending(name: str, message: str | None, request: str = "2", **podset: Any) -> dict[str, Any]:
    conds = [] if message is None else [_cond("QuotaReserved", "False", "Pending", message, "2026-11-30T09:00:01Z")]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-11-30T09:00:00Z"},
            "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1, **podset, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": request}}}]}}}]},
            "status": {"conditions": conds}}


WAITING = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 1 more needed"


def _stalled_cause(objects: list[dict[str, Any]], name: str = "job-wait-00001") -> str | None:
    out = diagnose_objects(objects, NOW)
    cause: str | None = next(d for d in out if d["metadata"]["name"] == name)["status"].get("cause")
    return cause


def test_a_fitting_workload_quiet_for_an_hour_is_kueue_stalled() -> None:
    assert _stalled_cause([*_queues(), _pending("job-wait-00001", WAITING)]) == "KueueStalled"


def test_no_stall_when_the_request_does_not_fit_the_unused_quota() -> None:
    assert _stalled_cause([*_queues(), _pending("job-wait-00001", WAITING, request="4")]) == \
        "InsufficientUnusedQuota"  # 1 of 4 reserved: 3 free


def test_no_stall_when_the_numbers_are_unknown() -> None:
    queues = _queues()
    del queues[1]["status"]["flavorsReservation"]  # reservations not reported
    assert _stalled_cause([*queues, _pending("job-wait-00001", WAITING)]) != "KueueStalled"
    tainted = _queues()
    tainted[0]["spec"] = {"nodeTaints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}
    assert _stalled_cause([*tainted, _pending("job-wait-00001", WAITING)]) != "KueueStalled"
    tas = _pending("job-wait-00001", WAITING, topologyRequest={"required": "cloud.example.com/rack"})
    assert _stalled_cause([*_queues(), tas]) != "KueueStalled"


def test_no_stall_while_someone_in_the_cohort_borrows() -> None:
    queues = _queues()
    queues[1]["spec"]["cohortName"] = "research"
    other = copy.deepcopy(queues[1])
    other["metadata"] = {"name": "team-b-cq"}
    other["status"]["flavorsReservation"] = [{"name": "default-flavor", "resources": [{"name": "cpu", "total": "6"}]}]
    assert _stalled_cause([*queues, other, _pending("job-wait-00001", WAITING)]) != "KueueStalled"
    other["status"]["flavorsReservation"] = [{"name": "default-flavor", "resources": [{"name": "cpu", "total": "2"}]}]
    assert _stalled_cause([*queues, other, _pending("job-wait-00001", WAITING)]) == "KueueStalled"


def test_no_stall_when_kueue_wrote_an_event_about_it_recently() -> None:
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1", "namespace": "team-a", "uid": "e1"},
             "involvedObject": {"kind": "Workload", "name": "job-wait-00001", "namespace": "team-a"},
             "reason": "Pending", "message": WAITING, "type": "Warning", "lastTimestamp": "2026-11-30T09:58:00Z"}
    assert _stalled_cause([*_queues(), _pending("job-wait-00001", WAITING), event]) != "KueueStalled"


def test_no_stall_while_another_workload_of_the_queue_moved_lately_even_one_deleted_since() -> None:
    """Kueue admitted (or a Job finished) in the queue minutes ago: it is not stuck. The operator keeps, per
    ClusterQueue, the newest condition change of its Workloads as they come (no Workload decoded), deleted ones
    included: a Workload that finished and went frees quota too, which Kueue is about to use."""
    moved = _pending("job-done-00002", None)
    moved["status"]["conditions"] = [
        _cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-cq",
              "2026-11-30T09:40:00Z"),
        _cond("Finished", "True", "Succeeded", "Job finished successfully", "2026-11-30T09:57:00Z")]
    waiting = _pending("job-wait-00001", WAITING)
    assert _stalled_cause([*_queues(), waiting, moved]) != "KueueStalled"
    state = ClusterState.from_objects([*_queues(), waiting, moved])
    assert state.index.changed_by_cq["team-a-cq"] == datetime(2026, 11, 30, 9, 57, tzinfo=UTC)  # the index, built
    state.remove(moved)  # then kept up to date as the operator's is
    assert state.index.changed_by_cq["team-a-cq"] == datetime(2026, 11, 30, 9, 57, tzinfo=UTC)
    assert [d["status"].get("cause") for d in diagnose(state, NOW)] == ["InsufficientUnusedQuota"]
    quiet = ClusterState.from_objects([*_queues(), waiting])
    assert [d["status"].get("cause") for d in diagnose(quiet, NOW)] == ["KueueStalled"]


def test_pods_unschedulable_for_a_moment_under_pods_ready_is_still_running() -> None:
    """kueue#11595's verdict (PodsUnschedulable under PodsReady=True) waits until the Pods have been unschedulable
    for UNSCHEDULABLE_WHILE_READY_AFTER: a replaced Pod is pending for a moment while the Workload runs."""
    scenario = next(s for s in SCENARIOS if s["name"] == "fast-admission-pod-group-ready-while-executors-unschedulable")
    unschedulable_since = datetime(2026, 11, 30, 9, 0, 46, tzinfo=UTC)

    def verdict(seconds: int) -> tuple[str, str]:
        out = diagnose_objects(copy.deepcopy(scenario["objects"]), unschedulable_since + timedelta(seconds=seconds))
        status = next(d["status"] for d in out if d["metadata"]["name"] == "spark-pi")
        return status["reason"], status["cause"]

    assert verdict(60) == ("Running", "PodsReady")
    assert verdict(121) == ("PodsUnschedulable", "NodeSelectorMismatch")
