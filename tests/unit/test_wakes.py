"""The clock alone changes some verdicts (an owner still suspended two minutes after admission, quota held five
minutes after its Job went, a check stuck for ten): the engine says when the next such change may come, and the
operator looks at that Workload again then, not at the next resync (5 minutes by default, longer on big clusters)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.state import ClusterState
from tests.builders import Admission, ClusterQueue, Job, LocalQueue, Namespace, ResourceFlavor, Workload, condition

from .apiserver import cluster
from .scenario import DIAGNOSES, started
from .test_catalog import SCENARIOS, gen

Verdicts = dict[tuple[str, str], tuple[Any, ...]]
HORIZON = timedelta(hours=3)  # beyond every threshold the engine has (the longest is an hour)


def _verdicts(objects: list[dict[str, Any]], now: datetime,
              wakes: dict[tuple[str, str], datetime] | None = None) -> Verdicts:
    out = diagnose(ClusterState.from_objects(objects), now, wakes=wakes)
    return {(d["metadata"]["namespace"], d["metadata"]["name"]):
            tuple(d["status"].get(k) for k in ("stage", "reason", "cause", "actionBy")) for d in out}


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s["name"]) for s in SCENARIOS])
def test_no_verdict_changes_with_the_clock_before_the_wake_the_engine_reported(scenario: dict[str, Any]) -> None:
    """Were a threshold not reported, the operator would show the old verdict until its next resync."""
    now = gen.parse_now(scenario["now"])
    wakes: dict[tuple[str, str], datetime] = {}
    before = _verdicts(scenario["objects"], now, wakes)
    first = min([*wakes.values(), now + HORIZON])
    assert all(w > now for w in wakes.values()), "a wake lies in the past: the operator would loop on it"
    later = _verdicts(scenario["objects"], first - timedelta(seconds=1))
    changed = {k: (v, later.get(k)) for k, v in before.items() if later.get(k) != v}
    assert not changed, f"verdicts changed by {first - now} with no wake said: {changed}"


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_operator_looks_again_when_an_admitted_owner_has_been_suspended_too_long() -> None:
    """kueue#4224: an owner Kueue never unsuspends holds its quota; after two minutes the cluster admin must act."""
    now = datetime.now(UTC)
    admitted_at = _stamp(now - timedelta(minutes=1, seconds=58))
    job = Job("trainer", "team-a").queue("main").request("cpu", "1").created(now - timedelta(minutes=3)).suspend(True)
    wl = (Workload("job-trainer-1a2b3", "team-a").queue("main").request("cpu", "1").owner(job)
          .created(now - timedelta(minutes=3))
          .conditions(condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq",
                                admitted_at),
                      condition("Admitted", "True", "Admitted", "The workload is admitted", admitted_at))
          .admission(Admission("cq").assignment(count=1, flavors={"cpu": "default-flavor"}, usage={"cpu": "1"})))
    objs = [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").quotas({"default-flavor": {"cpu": "1"}}).obj(), LocalQueue("main", "team-a", "cq").obj(),
            job.obj(), wl.obj()]
    for o in objs:
        o["metadata"]["resourceVersion"] = "100"
    rt, api = started(objs, cluster(objs))
    asyncio.run(rt.loop.run_once())
    (first,) = [r.body["status"] for r in api.applies() if r.path == f"{DIAGNOSES}/job-trainer-1a2b3"]
    assert (first["reason"], first["actionBy"]) == ("JobSuspended", "Nobody")
    assert rt.loop._sleep_for() <= 3.5  # when the two minutes are up, not at the resync
    asyncio.run(asyncio.sleep(rt.loop._sleep_for()))
    asyncio.run(rt.loop.run_once())
    latest = [r.body["status"] for r in api.applies() if r.path == f"{DIAGNOSES}/job-trainer-1a2b3"][-1]
    assert (latest["reason"], latest["actionBy"]) == ("JobSuspended", "ClusterAdmin")
    assert "kueue#4224" in latest["message"]
