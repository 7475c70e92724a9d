"""status.history and the post-mortem: rebuilt from Kueue's timestamps offline, continued by the operator,
bounded, and kept across restarts and failed writes."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from kueue_doctor.engine import history
from kueue_doctor.live.publisher import record_of, with_history, with_since
from tests.builders import Admission, Workload, condition

from .apiserver import cluster
from .scenario import DIAGNOSES, objects, running, started

QUEUED, RESERVED, ADMITTED, READY, DONE = ("2026-11-30T09:00:00Z", "2026-11-30T11:40:00Z", "2026-11-30T12:02:00Z",
                                           "2026-11-30T12:05:00Z", "2026-11-30T13:17:00Z")


def finished_workload() -> dict[str, Any]:
    """Queued 09:00, quota 11:40, admission check passed 12:02, Pods ready 12:05, finished 13:17."""
    return (Workload("job-train-1a2b3", "team-a").queue("user-queue").request("cpu", "2").created(QUEUED)
            .admission(Admission("cq-a").assignment(flavors={"cpu": "default-flavor"}, usage={"cpu": "2"}))
            .admission_check("capacity", "Ready", "Provisioned", at=ADMITTED)
            .conditions(condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a",
                                  RESERVED),
                        condition("Admitted", "True", "Admitted", "The workload is admitted", ADMITTED),
                        condition("PodsReady", "True", "Started", "All pods reached readiness", READY),
                        condition("Finished", "True", "Succeeded", "Job finished successfully", DONE))).obj()


def verdict(objs: list[dict[str, Any]], now: str = "2026-11-30T14:00:00Z") -> dict[str, Any]:
    out = diagnose_objects(objs, now=datetime.fromisoformat(now.replace("Z", "+00:00")))
    assert len(out) == 1
    AdmissionDiagnosis.model_validate(out[0])
    return out[0]["status"]


def test_offline_history_is_rebuilt_from_kueues_timestamps_and_the_post_mortem_adds_them_up() -> None:
    status = verdict([finished_workload()])
    steps = [(e["stage"], e.get("reason"), e.get("since"), e.get("until"), e.get("rebuilt", False))
             for e in status["history"]]
    assert steps == [
        ("Admission", None, QUEUED, RESERVED, True),
        ("Admission", "WaitingForAdmissionChecks", RESERVED, ADMITTED, True),
        ("Scheduling", None, ADMITTED, READY, True),
        ("Running", "Running", READY, DONE, True),
        ("Finished", "Finished", DONE, None, False),
    ]
    assert status["postMortem"] == (
        "Where the time went (rebuilt from Kueue's timestamps, which keep only each condition's latest change): "
        "waited 2h40m for admission in ClusterQueue cq-a, 22m for admission checks in ClusterQueue cq-a, 3m for "
        "Pods to start; ran 72m.")
    assert status["message"].endswith(". " + status["postMortem"])


def test_a_waiting_workload_has_one_open_entry_and_no_post_mortem() -> None:
    waiting = (Workload("job-wait-1", "team-a").queue("user-queue").request("cpu", "1").created(QUEUED)
               .condition(condition("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: "
                                    "insufficient unused quota for cpu in flavor default-flavor, 1 more needed",
                                    "2026-11-30T09:00:01Z"))).obj()
    status = verdict([waiting])
    assert [(e["stage"], e.get("reason"), "until" in e) for e in status["history"]] == [
        ("Admission", status["reason"], False)]
    assert "postMortem" not in status


def test_first_seen_waiting_the_history_starts_at_creation_and_keeps_that_start_while_the_reason_holds() -> None:
    """Kueue looked a second after creation and the operator first saw the Workload waiting: the wait covers the
    Workload's whole life (the first look is no entry of its own), and later passes keep that start."""
    waiting = (Workload("job-wait-1", "team-a").queue("user-queue").request("cpu", "1").created(QUEUED)
               .condition(condition("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: "
                                    "insufficient unused quota for cpu in flavor default-flavor, 2 more needed",
                                    "2026-11-30T09:00:01Z"))).obj()
    status = verdict([waiting])
    assert status["since"] == "2026-11-30T09:00:01Z"  # the verdict's own time is Kueue's
    assert [(e["reason"], e["since"], "until" in e) for e in status["history"]] == [("WaitingForQuota", QUEUED, False)]
    later = entry_of("WaitingForQuota", "Admission", "2026-11-30T09:00:01Z")  # the next pass, the same reason
    history.carry(status["history"], [], later)
    assert [(e["reason"], e["since"], "until" in e) for e in later["history"]] == [("WaitingForQuota", QUEUED, False)]
    ran = entry_of("Running", "Running", "2026-11-30T09:30:00Z")
    history.carry(later["history"], [], ran)
    assert [(e["reason"], e["since"], e.get("until")) for e in ran["history"]] == [
        ("WaitingForQuota", QUEUED, "2026-11-30T09:30:00Z"), ("Running", "2026-11-30T09:30:00Z", None)]


def entry_of(reason: str, stage: str, since: str) -> dict[str, Any]:
    return {"stage": stage, "reason": reason, "actionBy": "Nobody", "message": f"{reason}.", "since": since,
            "clusterQueue": "cq-a"}


def test_carried_history_closes_each_verdict_at_the_next_ones_since_and_reads_as_a_post_mortem() -> None:
    kept: list[dict[str, Any]] = []
    folded: list[dict[str, Any]] = []
    for reason, stage, since in (("WaitingForQuota", "Admission", "2026-11-30T09:00:00Z"),
                                 ("WaitingForQuota", "Admission", "2026-11-30T09:00:00Z"),  # same: no new entry
                                 ("WaitingForAdmissionChecks", "Admission", "2026-11-30T11:40:00Z"),
                                 ("ContainersNotStarting", "Scheduling", "2026-11-30T12:02:00Z"),
                                 ("Running", "Running", "2026-11-30T12:05:00Z"),
                                 ("Finished", "Finished", "2026-11-30T13:17:00Z")):
        status = entry_of(reason, stage, since)
        history.carry(kept, folded, status)
        history.conclude(status)
        kept, folded = status["history"], status.get("historyFolded", [])
    assert [(e["reason"], e["since"], e.get("until")) for e in kept] == [
        ("WaitingForQuota", "2026-11-30T09:00:00Z", "2026-11-30T11:40:00Z"),
        ("WaitingForAdmissionChecks", "2026-11-30T11:40:00Z", "2026-11-30T12:02:00Z"),
        ("ContainersNotStarting", "2026-11-30T12:02:00Z", "2026-11-30T12:05:00Z"),
        ("Running", "2026-11-30T12:05:00Z", "2026-11-30T13:17:00Z"),
        ("Finished", "2026-11-30T13:17:00Z", None),
    ]
    assert status["postMortem"] == ("Where the time went: waited 2h40m for quota in ClusterQueue cq-a, 22m for "
                                    "admission checks in ClusterQueue cq-a, 3m for containers to start; ran 72m.")
    again = copy.deepcopy(status)
    history.conclude(again)  # the message is the same however often it is concluded: no needless writes
    assert again["message"] == status["message"] == f"Finished. {status['postMortem']}"


def test_history_is_bounded_and_older_entries_fold_into_totals_per_reason() -> None:
    kept: list[dict[str, Any]] = []
    folded: list[dict[str, Any]] = []
    for n in range(60):  # an eviction loop: Preempted <-> WaitingForQuota every 10 minutes
        reason, stage = (("Preempted", "Admission"), ("Running", "Running"))[n % 2]
        status = entry_of(reason, stage, f"2026-11-30T{n // 6:02d}:{(n % 6) * 10:02d}:00Z")
        history.carry(kept, folded, status)
        kept, folded = status["history"], status.get("historyFolded", [])
    assert len(kept) <= history.MAX_ENTRIES and len(json.dumps(kept)) <= history.MAX_BYTES
    assert sum(t["entries"] for t in folded) + len(kept) == 60
    assert {t["reason"]: t["seconds"] for t in folded} == {r: sum(t["entries"] for t in folded if t["reason"] == r)
                                                             * 600 for r in ("Preempted", "Running")}
    assert kept[-1]["since"] == "2026-11-30T09:50:00Z" and "until" not in kept[-1]


def test_the_operator_keeps_history_across_a_restart_and_a_failed_write() -> None:
    """A Workload seen waiting, then running: the stored object carries both; a restart continues it."""
    objs = [o for o in objects() if o["metadata"]["name"] != "job-wait-00002"]
    queued = copy.deepcopy(objs)
    for o in queued:  # the same Workload before Kueue reserved quota
        if o["kind"] == "Workload":
            o["status"] = {"conditions": [condition("QuotaReserved", "False", "Pending", "couldn't assign flavors to "
                                                    "pod set main: insufficient unused quota for cpu in flavor "
                                                    "default-flavor, 1 more needed", "2026-11-30T09:00:01Z")]}
    rt, api = started(queued)
    asyncio.run(rt.loop.run_once())
    first = api.applies()[-1].body["status"]
    assert [e["reason"] for e in first["history"]] == ["WaitingForQuota"]
    rt.inbox.observe("MODIFIED", running().resource_version("101").obj())
    asyncio.run(rt.loop.run_once())
    second = api.applies()[-1].body
    assert [(e["reason"], "until" in e) for e in second["status"]["history"]] == [
        ("WaitingForQuota", True), (second["status"]["reason"], False)]
    # restart over what was written: nothing rewritten, and the next change continues the same history
    stored = copy.deepcopy(second)
    stored["metadata"].update(uid="ad-1", resourceVersion="300")
    api = cluster(objs)
    api.serve_list("/apis/kueue-doctor.dev/v1alpha1/admissiondiagnoses", "kueue-doctor.dev/v1alpha1",
                   "AdmissionDiagnosis", [stored])
    rt, api = started(objs, api)
    asyncio.run(rt.loop.run_once())
    assert api.writes == []
    api.answer("PATCH", f"{DIAGNOSES}/job-run-00001", {"kind": "Status", "code": 500}, 500)
    done = running().condition(condition("Finished", "True", "Succeeded", "Job finished successfully",
                                         "2026-11-30T09:40:00Z")).resource_version("102")
    rt.inbox.observe("MODIFIED", done.obj())
    asyncio.run(rt.loop.run_once())  # the write fails: what is stored is unknown, the history is not lost
    api.forget("PATCH", f"{DIAGNOSES}/job-run-00001")
    rt.inbox.mark([("team-a", "job-run-00001")])
    asyncio.run(rt.loop.run_once())
    final = api.applies()[-1].body["status"]
    assert [e["reason"] for e in final["history"]] == ["WaitingForQuota", second["status"]["reason"], "Finished"]
    assert not any(e.get("rebuilt") for e in final["history"])
    assert final["postMortem"].startswith("Where the time went: waited ")


def test_publisher_keeps_the_engines_rebuilt_history_for_a_first_sight() -> None:
    new = {"metadata": {"name": "w", "namespace": "ns"},
           "status": {**entry_of("Running", "Running", "2026-11-30T10:00:00Z"),
                      "history": [{"stage": "Admission", "since": "2026-11-30T09:00:00Z",
                                   "until": "2026-11-30T10:00:00Z", "rebuilt": True},
                                  {"stage": "Running", "reason": "Running", "since": "2026-11-30T10:00:00Z"}]}}
    observed = datetime(2026, 11, 30, 10, 5, tzinfo=UTC)
    out = with_history(with_since(copy.deepcopy(new), None, observed), None)
    assert out["status"]["history"] == new["status"]["history"]
    prev = record_of(out, written_at=0.0)
    later = with_history(with_since({"metadata": new["metadata"],
                                     "status": {**entry_of("Finished", "Finished", "2026-11-30T11:00:00Z"),
                                                "history": []}}, prev, observed), prev)
    assert [e.get("reason") for e in later["status"]["history"]] == [None, "Running", "Finished"]


def test_a_deleted_diagnosis_is_restored_with_its_since_and_history() -> None:
    objs = [o for o in objects() if o["metadata"]["name"] != "job-wait-00002"]
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    first = copy.deepcopy(api.applies()[-1].body)
    rt.inbox.observe("MODIFIED", running().condition(condition(
        "Finished", "True", "Succeeded", "Job finished successfully", "2026-11-30T09:40:00Z")).resource_version(
        "102").obj())
    asyncio.run(rt.loop.run_once())
    written = copy.deepcopy(api.applies()[-1].body)
    assert [e.get("reason") for e in written["status"]["history"]][-2:] == [first["status"]["reason"], "Finished"]
    rt.inbox.observe("DELETED", {**written, "metadata": {**written["metadata"], "resourceVersion": "400"}})
    asyncio.run(rt.loop.run_once())
    restored = api.applies()[-1].body
    assert len(api.applies()) == 3
    assert restored["status"]["history"] == written["status"]["history"]
    assert restored["status"]["since"] == written["status"]["since"]


def test_a_long_finished_message_stays_within_the_limit_and_the_same_when_concluded_again() -> None:
    from kueue_doctor.api import MAX_TEXT

    status = {**entry_of("Finished", "Finished", "2026-11-30T13:17:00Z"), "message": "Finished: " + "x" * 1100,
              "history": [{"stage": "Admission", "reason": "WaitingForQuota", "since": "2026-11-30T09:00:00Z",
                           "until": "2026-11-30T13:17:00Z"},
                          {"stage": "Finished", "reason": "Finished", "since": "2026-11-30T13:17:00Z"}]}
    history.conclude(status)
    once = dict(status)
    history.conclude(status)
    assert len(status["message"]) <= MAX_TEXT and status["message"] == once["message"]
    assert status["postMortem"].startswith("Where the time went: waited 4h17m for quota")


_ENTRY = st.fixed_dictionaries({"stage": st.sampled_from(["Admission", "Running"]),
                                "reason": st.text(st.sampled_from("a\x01\"é😀"), max_size=400),
                                "since": st.just("2026-12-01T00:00:00Z")}, optional={"rebuilt": st.just(True)})
_ASTRAL = {"stage": "Admission", "reason": "😀" * 300, "since": "2026-12-01T00:00:00Z"}  # 12 bytes each in JSON


@settings(max_examples=300, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=8))
@example([_ASTRAL, _ASTRAL])
def test_the_4_kib_bound_is_kept_for_any_text_a_hand_edited_history_holds(entries: list[dict[str, Any]]) -> None:
    """The cheap size bound never lets a history over MAX_BYTES of JSON through (escapes, surrogate pairs)."""
    kept, _ = history._bounded([dict(e) for e in entries], [])
    assert len(kept) == 1 or len(json.dumps(kept)) <= history.MAX_BYTES


def _finished_after(ready: dict[str, Any] | None, reason: str = "Failed") -> dict[str, Any]:
    """Queued 09:00, admitted 09:00:05, finished 09:40 (Kueue's text for a failed Job), PodsReady as given."""
    conds = [condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a",
                       "2026-11-30T09:00:05Z"),
             condition("Admitted", "True", "Admitted", "The workload is admitted", "2026-11-30T09:00:05Z")]
    conds += [ready] if ready is not None else []
    conds.append(condition("Finished", "True", reason, "Job has reached the specified backoff limit",
                           "2026-11-30T09:40:00Z"))
    return (Workload("job-train-1a2b3", "team-a").queue("user-queue").request("cpu", "2").created(QUEUED)
            .admission(Admission("cq-a").assignment(flavors={"cpu": "default-flavor"}, usage={"cpu": "2"}))
            .conditions(*conds)).obj()


def _post_mortem(ready: dict[str, Any] | None, reason: str = "Failed") -> tuple[list[tuple[Any, ...]], str]:
    status = verdict([_finished_after(ready, reason)])
    return [(e["stage"], e.get("reason"), e["since"][11:19]) for e in status["history"]], status["postMortem"]


def test_without_pods_the_time_from_admission_is_not_called_a_wait_for_pods_to_start() -> None:
    """PodsReady False WaitForRecovery is written only once PodsReady was True: the Pods ran before it, from a time
    the input does not tell. No PodsReady at all (waitForPodsReady off) tells nothing either; FailedToStart does."""
    recovery = condition("PodsReady", "False", "WaitForRecovery", "At least one pod has failed, waiting for recovery",
                         "2026-11-30T09:20:00Z")
    steps, text = _post_mortem(recovery)
    assert steps == [("Admission", None, "09:00:00"), ("Unknown", None, "09:00:05"),
                     ("Scheduling", "ContainersNotStarting", "09:20:00"), ("Finished", "Finished", "09:40:00")]
    assert text.endswith("waited 5s for admission in ClusterQueue cq-a; 19m admitted (when its Pods started is not "
                         "in the input); 20m with failed Pods.")
    recovered = condition("PodsReady", "True", "Recovered", "All pods reached readiness and the workload is running",
                          "2026-11-30T09:30:00Z")
    assert _post_mortem(recovered)[1].endswith("29m admitted (when its Pods started is not in the input); ran at "
                                               "least 10m.")
    assert _post_mortem(None)[1].endswith("; 39m admitted (when its Pods started is not in the input).")
    assert _post_mortem(None, "FailedToStart")[1].endswith(", 39m for Pods to start.")  # they never started
    started = condition("PodsReady", "True", "Started", "All pods reached readiness and the workload is running",
                        "2026-11-30T09:01:00Z")
    assert _post_mortem(started)[1].endswith(", 55s for Pods to start; ran 39m.")  # PodsReady's own time


def test_time_with_failed_pods_after_the_run_is_not_a_wait_for_containers_to_start() -> None:
    kept: list[dict[str, Any]] = []
    for reason, stage, since, cause in (("WaitingForQuota", "Admission", "2026-11-30T09:00:00Z", None),
                                        ("Running", "Running", "2026-11-30T09:05:00Z", "PodsReady"),
                                        ("ContainersNotStarting", "Scheduling", "2026-11-30T09:25:00Z", "OOMKilled"),
                                        ("Finished", "Finished", "2026-11-30T09:40:00Z", "Failed")):
        status = {**entry_of(reason, stage, since), **({"cause": cause} if cause else {})}
        history.carry(kept, [], status)
        kept = status["history"]
    history.conclude(status)
    assert status["postMortem"] == ("Where the time went: waited 5m for quota in ClusterQueue cq-a; ran 20m, then "
                                    "15m with failed Pods.")


def test_the_time_before_an_eviction_stays_admitted_or_waiting() -> None:
    """A rebuilt Unknown entry that ends at an eviction is the time before it (waiting, or admitted and running)."""
    entries = [{"stage": "Unknown", "since": "2026-11-30T09:00:00Z", "until": "2026-11-30T09:30:00Z", "rebuilt": True},
               {"stage": "Admission", "reason": "Preempted", "since": "2026-11-30T09:30:00Z",
                "until": "2026-11-30T09:40:00Z"},
               {"stage": "Finished", "reason": "Finished", "since": "2026-11-30T09:40:00Z"}]
    assert history.post_mortem(entries, [], "cq-a") == (
        "Where the time went (rebuilt from Kueue's timestamps, which keep only each condition's latest change): "
        "waited 30m admitted or waiting, 10m in Preempted in ClusterQueue cq-a.")
