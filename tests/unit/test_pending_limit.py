"""Pending limits (kueue-doctor.dev/max-pending): the nearest declaration wins, the wait is the current one,
a bad value is said, and the operator notices the limit pass by time alone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kueue_doctor import diagnose_objects
from kueue_doctor.engine.pending_limit import parse_duration
from tests.builders import ClusterQueue, Job, LocalQueue, Namespace, ResourceFlavor, Workload, condition

from .apiserver import cluster
from .scenario import DIAGNOSES, started

CREATED = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
PENDING = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
           "1 more needed")


@pytest.mark.parametrize(("text", "seconds"), [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45),
                                               ("1.5h", 5400), (" 2h ", 7200), ("2 hours", None), ("", None),
                                               ("0s", None), ("-1h", None), ("2d", None)])
def test_durations_are_read_as_kubernetes_users_write_them(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds


def _objects(job_limit: str | None = None, lq_limit: str | None = None, cq_limit: str | None = None,
             evicted_at: str | None = None) -> list[dict[str, Any]]:
    job = Job("trainer", "team-a").queue("main").request("cpu", "1").created(CREATED)
    lq, cq = LocalQueue("main", "team-a", "cq"), ClusterQueue("cq").quotas({"default-flavor": {"cpu": "1"}})
    for obj, value in ((job, job_limit), (lq, lq_limit), (cq, cq_limit)):
        if value is not None:
            obj.annotation("kueue-doctor.dev/max-pending", value)
    wl = (Workload("job-trainer-1a2b3", "team-a").queue("main").request("cpu", "1").owner(job).created(CREATED)
          .condition(condition("QuotaReserved", "False", "Pending", PENDING, "2026-11-30T09:00:01Z")))
    if evicted_at:
        wl.condition(condition("Evicted", "False", "QuotaReserved", "Previously: Exceeded the PodsReady timeout "
                               "team-a/job-trainer-1a2b3", evicted_at))
    return [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), cq.obj(), lq.obj(), job.obj(), wl.obj()]


def _limit(objects: list[dict[str, Any]], now: datetime) -> dict[str, Any] | None:
    (d,) = diagnose_objects(objects, now)
    return d["status"].get("pendingLimit")


def test_the_nearest_declaration_wins_and_the_limit_passes_by_time() -> None:
    objs = _objects(job_limit="30m", lq_limit="2h", cq_limit="4h")
    before = _limit(objs, CREATED + timedelta(minutes=29))
    assert before == {"limit": "30m", "seconds": 1800, "sourceKind": "Job", "sourceName": "trainer",
                      "sourceNamespace": "team-a", "waitingSince": "2026-11-30T09:00:00Z"}
    after = _limit(objs, CREATED + timedelta(minutes=31))
    assert after is not None and after["exceeded"] is True and after["exceededSince"] == "2026-11-30T09:30:00Z"
    assert _limit(_objects(lq_limit="2h", cq_limit="4h"), CREATED)["sourceKind"] == "LocalQueue"  # type: ignore[index]
    assert _limit(_objects(cq_limit="4h"), CREATED)["sourceName"] == "cq"  # type: ignore[index]
    assert _limit(_objects(), CREATED + timedelta(days=3)) is None


def test_an_exceeded_limit_leads_the_hints_with_who_declared_it() -> None:
    (d,) = diagnose_objects(_objects(lq_limit="1h"), CREATED + timedelta(hours=3))
    assert d["status"]["hints"][0] == ("Pending limit passed: waiting 3h, over the 1h declared by "
                                       "kueue-doctor.dev/max-pending on LocalQueue team-a/main.")


def test_the_wait_restarts_at_the_latest_eviction() -> None:
    limit = _limit(_objects(lq_limit="1h", evicted_at="2026-11-30T11:00:00Z"), CREATED + timedelta(hours=2, minutes=30))
    assert limit is not None and limit["waitingSince"] == "2026-11-30T11:00:00Z" and "exceeded" not in limit


def test_a_value_that_is_no_duration_is_said_and_applies_no_limit() -> None:
    limit = _limit(_objects(lq_limit="two hours"), CREATED + timedelta(days=1))
    assert limit is not None and "exceeded" not in limit and "seconds" not in limit
    assert "is not a duration such as 90m, 2h or 1h30m" in limit["problem"]


def test_a_finished_workload_has_no_pending_limit_and_an_admitted_one_still_waits() -> None:
    objs = _objects(lq_limit="1m")
    wl = objs[-1]
    wl["status"]["conditions"] = [
        condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", "2026-11-30T09:00:05Z"),
        condition("Admitted", "True", "Admitted", "The workload is admitted", "2026-11-30T09:00:05Z")]
    (d,) = diagnose_objects(objs, CREATED + timedelta(hours=1))
    assert d["status"]["stage"] == "Scheduling" and d["status"]["pendingLimit"]["exceeded"] is True  # no Pod runs
    wl["status"]["conditions"].append(condition("Finished", "True", "Succeeded", "Job finished successfully",
                                                "2026-11-30T09:30:00Z"))
    (d,) = diagnose_objects(objs, CREATED + timedelta(hours=1))
    assert d["status"]["stage"] == "Finished" and "pendingLimit" not in d["status"]


def test_the_operator_wakes_when_a_limit_passes_and_exports_it() -> None:
    now = datetime.now(UTC)
    objs = _objects(lq_limit="1h")
    for o in objs:
        o["metadata"]["creationTimestamp"] = (now - timedelta(minutes=59, seconds=58)).strftime("%Y-%m-%dT%H:%M:%SZ")
        o["metadata"]["resourceVersion"] = "100"
    rt, api = started(objs, cluster(objs))
    asyncio.run(rt.loop.run_once())
    (first,) = [r.body for r in api.applies() if r.path == f"{DIAGNOSES}/job-trainer-1a2b3"]
    assert "exceeded" not in first["status"]["pendingLimit"]
    assert rt.loop._sleep_for() <= 3.5  # woken when the hour is up, not at the next resync
    asyncio.run(asyncio.sleep(rt.loop._sleep_for()))
    asyncio.run(rt.loop.run_once())
    latest = [r.body for r in api.applies() if r.path == f"{DIAGNOSES}/job-trainer-1a2b3"][-1]
    assert latest["status"]["pendingLimit"]["exceeded"] is True
    from prometheus_client import generate_latest

    from kueue_doctor.live.metrics import registry_for
    assert ('kueue_doctor_pending_limit_exceeded_workloads{cluster_queue="cq",local_queue="main",'
            'workload_namespace="team-a"} 1.0') in generate_latest(registry_for(rt)).decode()
