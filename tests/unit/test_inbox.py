"""The operator's inbox: which Workloads a batch of watch events marks for re-diagnosis (no cluster)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.live.inbox import Inbox, numbers_pace
from kueue_doctor.live.metrics import Stats, Verdict
from kueue_doctor.live.publisher import Publisher
from kueue_doctor.state import ClusterState
from tests.builders import ClusterQueue, Event, Job, LocalQueue, Node, ResourceFlavor, Workload

from .scenario import running, waiting
from .test_engine import NOW

RUNNING, WAITING = ("team-a", "job-run-00001"), ("team-a", "job-wait-00002")


def inbox() -> tuple[Inbox, dict[str, dict[str, Any]]]:
    """The scenario's queues and Workloads (2 cpu, all held by the running one), cq-a in cohort co."""
    builders = {
        "rf": ResourceFlavor("default-flavor"),
        "cq": ClusterQueue("cq-a").cohort("co").quotas({"default-flavor": {"cpu": "2"}})
        .reservation("default-flavor", "cpu", "2").usage("default-flavor", "cpu", "2").workloads(reserving=1, admitted=1),
        "lq": LocalQueue("user-queue", "team-a", "cq-a").reservation("default-flavor", "cpu", "2")
        .usage("default-flavor", "cpu", "2").workloads(reserving=1, admitted=1),
        "running": running(),
        "waiting": waiting(),
    }
    objs = {k: o.resource_version("1").obj() for k, o in builders.items()}
    state = ClusterState.from_objects(copy.deepcopy(list(objs.values())))
    box = Inbox(state, Stats(), Publisher(api=None), {})
    first_pass(box)
    return box, objs


def first_pass(box: Inbox) -> None:
    """What the loop's pass tells the inbox: every Workload diagnosed, and whose diagnosis read the numbers."""
    readers: set[tuple[str, str]] = set()
    diagnose(box.state, NOW, list(box.state.workloads), numbers=readers)
    box.diagnosed(list(box.state.workloads), readers)


def changed(obj: dict[str, Any], rv: str = "2") -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = rv
    return new


def marked_by(box: Inbox, *objs: dict[str, Any]) -> set[tuple[str, str]]:
    """What a batch of MODIFIED events marks for the next pass."""
    for obj in objs:
        box.observe("MODIFIED", obj)
    box.drain()
    return box.take()


def diagnosis_of(wl: dict[str, Any], reason: str = "WaitingForQuota") -> dict[str, Any]:
    """An AdmissionDiagnosis as the watch delivers it after our server-side apply."""
    md = wl["metadata"]
    return {"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
            "metadata": {"name": md["name"], "namespace": md["namespace"], "uid": "ad-0001", "resourceVersion": "7",
                         "labels": {"kueue-doctor.dev/reason": reason},
                         "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                              "name": md["name"], "uid": md["uid"]}]},
            "spec": {"workloadRef": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": md["name"],
                                     "uid": md["uid"]}},
            "status": {"stage": "Admission", "reason": reason, "actionBy": "Nobody", "since": "2026-11-30T09:00:00Z",
                       "message": "Waiting for quota in ClusterQueue cq-a"}}


def test_a_re_listed_object_with_the_same_resource_version_marks_nothing() -> None:
    box, objs = inbox()
    box.observe(None, copy.deepcopy(objs["cq"]))  # Kopf's initial LIST: type None
    box.observe("MODIFIED", copy.deepcopy(objs["waiting"]))  # a duplicate after a watch reconnect
    box.drain()
    assert box.take() == set()


def test_kopfs_listing_of_what_the_start_up_list_read_is_never_queued() -> None:
    # Kopf lists every kind again right after our start-up LIST, while the first pass writes: 50,000 queued Pods
    # would be the start-up's memory peak; the same versions are dropped before they are slimmed or queued
    box, objs = inbox()
    for obj in objs.values():
        box.observe(None, copy.deepcopy(obj))
    assert len(box) == 0
    box.observe(None, changed(objs["waiting"]))  # changed since: queued as any change
    assert len(box) == 1


def test_a_cluster_queue_numbers_change_re_diagnoses_the_waiting_workloads_once_per_pace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue rewrites the usage numbers on every admission: the waiting Workloads (never the running ones) are
    diagnosed once, `numbers_pace` after the first change, however many changes come meanwhile."""
    clock = [1000.0]
    monkeypatch.setattr("kueue_doctor.live.inbox.time.monotonic", lambda: clock[0])
    box, objs = inbox()
    for rv in range(2, 12):  # ten admissions' worth of status writes
        cq = changed(objs["cq"], str(rv))
        cq["status"]["reservingWorkloads"] = rv
        box.observe("MODIFIED", cq)
        box.drain()
        clock[0] += 0.5
    assert box.take() == set()
    assert box.stale_due() == 1000.0 + box.numbers_pace
    clock[0] = 1000.0 + box.numbers_pace
    assert box.take() == {WAITING}
    assert box.take() == set() and box.stale_due() is None
    assert box.state.cluster_queues["cq-a"]["status"]["reservingWorkloads"] == 11  # the state is current at once


def test_a_resyncs_every_workload_is_taken_in_batches_and_a_change_never_waits_behind_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At 50,000 Workloads one pass over all of them took ~40 s, and changes waited for it (reaction p50 6.3 s in
    bench/operator_scale.py): what no event named goes BACKGROUND_BATCH at a time, each change in the next pass."""
    monkeypatch.setattr("kueue_doctor.live.inbox.BACKGROUND_BATCH", 2)
    box, objs = inbox()
    everyone = {("team-b", f"wl-{n}") for n in range(5)}
    box.mark_background(everyone | {WAITING})
    box.observe("MODIFIED", changed(objs["running"]))
    box.drain()
    first = box.take()
    assert RUNNING in first and len(first - {RUNNING}) == 2 and first - {RUNNING} <= everyone | {WAITING}
    taken = set(first)
    while box.background():
        batch = box.take()
        assert 1 <= len(batch) <= 2 and not batch & taken  # each once
        taken |= batch
    assert taken == everyone | {WAITING, RUNNING} and box.take() == set()


def test_due_stale_workloads_join_the_background_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("kueue_doctor.live.inbox.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("kueue_doctor.live.inbox.BACKGROUND_BATCH", 1)
    box, objs = inbox()
    box.mark_background([("team-b", "wl-0")])
    cq = changed(objs["cq"])
    cq["status"]["reservingWorkloads"] = 2
    box.observe("MODIFIED", cq)
    box.drain()
    clock[0] += box.numbers_pace
    assert len(box.take()) == 1 and box.background() == 1  # one of the two now, the other in the next pass
    assert len(box.take()) == 1 and box.background() == 0


def test_a_numbers_round_leaves_the_finished_workloads_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue keeps finished Workloads (all 15,000 of its perf scenario by its end); they hold no quota, and each
    numbers round re-diagnosed every one of them: 540,000 diagnoses for 45,000 transitions."""
    clock = [1000.0]
    monkeypatch.setattr("kueue_doctor.live.inbox.time.monotonic", lambda: clock[0])
    box, objs = inbox()
    done = changed(objs["running"])
    done["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                         "message": "Job finished successfully",
                                         "lastTransitionTime": "2026-11-30T09:10:00Z"})
    assert marked_by(box, done) == {RUNNING}
    cq = changed(objs["cq"], "3")
    cq["status"]["reservingWorkloads"] = 0
    assert marked_by(box, cq) == set()
    clock[0] += box.numbers_pace
    assert box.take() == {WAITING}


def test_a_numbers_round_leaves_alone_the_workloads_whose_diagnosis_read_no_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue's perf scenarios queue thousands of Workloads it has not evaluated yet: their diagnosis says so
    whatever the usage, and re-diagnosing each of them every numbers round was most of the operator's CPU."""
    clock = [1000.0]
    monkeypatch.setattr("kueue_doctor.live.inbox.time.monotonic", lambda: clock[0])
    box, objs = inbox()
    fresh = Workload("job-new-00003", "team-a").queue("user-queue").request("cpu", "1").created(
        "2026-11-30T09:59:00Z").obj()  # queued a minute ago, never evaluated by Kueue
    assert marked_by(box, fresh) == {("team-a", "job-new-00003")}
    first_pass(box)
    cq = changed(objs["cq"], "3")
    cq["status"]["reservingWorkloads"] = 2
    assert marked_by(box, cq) == set()
    clock[0] += box.numbers_pace
    assert box.take() == {WAITING}  # short of quota: its message quotes the usage


def test_the_numbers_pace_stretches_so_numbers_rounds_take_at_most_a_quarter_of_the_loop() -> None:
    """Kueue's 50,000-Workload scenario: 28,000 waiting in cohorts of 100 queues, every cohort admitting each
    second. At 0.5 ms a diagnosis a round is 14 s of the loop: one every 10 s would never let it rest."""
    assert numbers_pace(1, 0.0005, 10.0, 60.0) == 10.0
    assert numbers_pace(28_000, 0.0005, 10.0, 60.0) == pytest.approx(56.0)  # a quarter of the loop
    assert numbers_pace(56_000, 0.0005, 10.0, 60.0) == 60.0  # never later than the refresh writes them anyway


def test_the_next_numbers_round_waits_for_what_the_last_one_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("kueue_doctor.live.inbox.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("kueue_doctor.live.inbox.NUMBERS_SHARE", 4_000)  # one Workload is a big round here
    box, objs = inbox()
    box.stats.diagnosed, box.stats.pass_seconds_sum = 2_000, 10.0  # the passes so far: 5 ms a Workload
    for rv in ("2", "3"):
        cq = changed(objs["cq"], rv)
        cq["status"]["reservingWorkloads"] = int(rv)
        assert marked_by(box, cq) == set()
        assert box.stale_due() == clock[0] + (box.numbers_pace if rv == "2" else 20.0)  # 4,000 x 1 x 5 ms
        clock[0] = box.stale_due() or 0.0
        assert box.take() == {WAITING}


def test_a_cluster_queue_condition_change_re_diagnoses_the_waiting_workloads_at_once() -> None:
    box, objs = inbox()
    cq = changed(objs["cq"])
    cq["status"]["conditions"] = [{"type": "Active", "status": "False", "reason": "FlavorNotFound",
                                   "message": "Can't admit new workloads: references missing ResourceFlavor(s)"}]
    box.observe("MODIFIED", cq)
    box.drain()
    assert box.take() == {WAITING}


def test_a_workload_change_takes_its_stale_neighbours_only_when_they_are_due(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("kueue_doctor.live.inbox.time.monotonic", lambda: clock[0])
    box, objs = inbox()
    cq = changed(objs["cq"])
    cq["status"]["reservingWorkloads"] = 3
    box.observe("MODIFIED", cq)
    box.observe("MODIFIED", changed(objs["running"]))
    box.drain()
    assert box.take() == {RUNNING}
    box.observe("MODIFIED", changed(objs["waiting"], "3"))
    box.drain()
    assert box.take() == {WAITING}  # diagnosed now: no longer stale
    clock[0] += box.numbers_pace
    assert box.take() == set()


def test_a_local_queue_status_change_marks_nothing_its_spec_change_marks_its_workloads() -> None:
    """Kueue rewrites a LocalQueue's counts on every admission and finish in it; no rule reads them, and marking
    all of its Workloads for each was most of the passes' work in Kueue's own perf scenario (500 per queue)."""
    box, objs = inbox()
    lq = changed(objs["lq"])
    lq["metadata"]["labels"] = {"team": "a"}  # a change the state keeps (a team label reads it)
    assert marked_by(box, lq) == {WAITING, RUNNING}
    counts = []
    for rv in range(3, 8):  # admissions and finishes in the queue: its status only
        counts.append(changed(lq, str(rv)))
        counts[-1]["status"]["pendingWorkloads"] = rv
    assert marked_by(box, *counts) == set()
    assert box.state.local_queues["team-a", "user-queue"]["metadata"]["resourceVersion"] == "7"
    box.observe(None, changed(counts[-1], "7"))  # a re-list of what the state holds: nothing new either
    assert len(box) == 0
    stopped = changed(counts[-1], "8")
    stopped["spec"]["stopPolicy"] = "Hold"
    assert marked_by(box, stopped) == {WAITING, RUNNING}


def test_a_pod_change_only_in_fields_no_rule_reads_marks_nothing() -> None:
    box, _ = inbox()
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "run-0", "namespace": "team-a", "uid": "pod-1", "resourceVersion": "2",
                        "annotations": {"kueue.x-k8s.io/workload": RUNNING[1]}},
           "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "busybox"}]},
           "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    assert marked_by(box, copy.deepcopy(pod)) == {RUNNING}
    moved = changed(pod, "3")
    moved["status"]["podIP"] = "10.0.0.2"  # kubelet's status write: nothing the rules read
    moved["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update"}]
    assert marked_by(box, moved) == set()
    failed = changed(moved, "4")
    failed["status"]["phase"] = "Failed"
    assert marked_by(box, failed) == {RUNNING}


def test_a_cluster_queue_spec_change_re_diagnoses_the_whole_cohort() -> None:
    box, objs = inbox()
    cq = changed(objs["cq"])
    cq["spec"]["stopPolicy"] = "Hold"
    assert marked_by(box, cq) == {WAITING, RUNNING}


def test_a_deleted_workload_is_forgotten_and_not_marked() -> None:
    box, objs = inbox()
    box.verdicts[RUNNING] = Verdict(*RUNNING, "user-queue", "cq-a", "Running", "Running", "Nobody", 0.0)
    box.observe("DELETED", copy.deepcopy(objs["running"]))
    box.drain()
    assert RUNNING not in box.state.workloads and RUNNING not in box.verdicts
    assert box.take() == set()


def test_a_deletion_is_applied_even_with_the_resource_version_last_seen() -> None:
    box, objs = inbox()
    lq = copy.deepcopy(objs["lq"])  # a DELETED event carries the last state, often the version we hold
    box.observe("DELETED", lq)
    box.drain()
    assert ("team-a", "user-queue") not in box.state.local_queues
    assert box.take() == {WAITING, RUNNING}  # their LocalQueue is gone: both verdicts change


def test_warning_events_about_unrelated_kinds_are_not_kept() -> None:
    box, _ = inbox()
    node = Event(Node("n1"), "NodeNotReady", "Node n1 status is now: NodeNotReady").source("node-controller")
    box.observe("ADDED", node.obj())
    j = Job("trainer", "team-a").queue("user-queue").request("cpu", "1")
    box.observe("ADDED", Event(j, "FailedCreate", 'Error creating: pods "x" is forbidden: exceeded quota: q').obj())
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "team-a"}}
    box.observe("ADDED", Event(claim, "ProvisioningFailed", 'storageclass.storage.k8s.io "fast" not found').obj())
    assert len(box) == 2
    box.drain()
    assert sorted(e["involvedObject"]["kind"] for e in box.state.events.values()) == ["Job", "PersistentVolumeClaim"]
    assert box.stats.events == {"Event": 3}  # all counted as watch events received


def test_objects_are_kept_slim_but_our_own_diagnoses_whole() -> None:
    box, objs = inbox()
    wl = changed(objs["waiting"])
    wl["metadata"]["managedFields"] = [{"manager": "kueue", "operation": "Update", "fieldsType": "FieldsV1"}]
    box.observe("MODIFIED", wl)
    box.drain()
    assert "managedFields" not in box.state.workloads[WAITING]["metadata"]
    assert box.take() == {WAITING}


def test_a_deleted_or_edited_diagnosis_marks_its_workload_for_restoring_our_echo_does_not() -> None:
    box, objs = inbox()
    ours = diagnosis_of(objs["waiting"])
    box.observe("ADDED", copy.deepcopy(ours))  # first seen: remembered as what the cluster holds
    box.drain()
    box.observe("MODIFIED", copy.deepcopy(ours))  # the same content again: nothing to do
    box.drain()
    assert box.take() == set()
    edited = changed(ours, "8")
    edited["status"]["reason"] = "EditedByHand"
    box.observe("MODIFIED", edited)
    box.drain()
    assert box.take() == {WAITING}
    box.observe("DELETED", copy.deepcopy(ours))
    box.drain()
    assert box.take() == {WAITING} and box.publisher.restoring(WAITING)  # to restore, with its since and history


def test_our_own_diagnoses_wait_in_the_queue_packed_and_without_the_apiservers_bookkeeping(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # during a first pass's 10,000 writes (minutes) each write comes back as a watch event: past the first few
    # they wait packed, small
    monkeypatch.setattr("kueue_doctor.live.inbox.PACK_QUEUED_AFTER", 1)
    box, objs = inbox()
    d = diagnosis_of(objs["waiting"])
    d["metadata"]["managedFields"] = [{"manager": "kueue-doctor", "operation": "Apply", "fieldsType": "FieldsV1",
                                       "fieldsV1": {"f:status": {f"f:field{i}": {} for i in range(200)}}}]
    box.observe("ADDED", copy.deepcopy(d))
    assert len(box) == 1 and box.queued_bytes() == 0  # the first ones as they came
    box.observe("MODIFIED", copy.deepcopy(d))
    assert len(box) == 2 and 0 < box.queued_bytes() < 1024
    box.drain()
    assert box.publisher.records[RUNNING[0], d["metadata"]["name"]].digest  # taken as ours, as before
