"""A standby replica (leader election, live/leader.py): it diagnoses like the leader, writes nothing, adopts what the
leader stores, exports no verdict series; on taking over it writes only what differs from what is stored.

The Lease protocol itself runs against the real apiserver (tests/e2e/test_failover.py); here the operator's parts
on the canned apiserver, as in test_runtime.py.
"""

from __future__ import annotations

import asyncio
import copy
import io
from typing import Any

from prometheus_client import generate_latest

from kueue_doctor.cli import build_parser, election_config
from kueue_doctor.live.leader import ElectionConfig
from kueue_doctor.live.metrics import VERDICT_FAMILIES, registry_for
from kueue_doctor.live.runtime import Options, Runtime
from kueue_doctor.live.service import follow_leadership
from tests.builders import condition

from .apiserver import cluster
from .scenario import DIAGNOSES, objects, running, start, started


def standby(objs: list[dict[str, Any]], stored: list[dict[str, Any]] | None = None) -> tuple[Runtime, Any]:
    api = cluster(objs)
    if stored is not None:
        api.serve_list("/apis/kueue-doctor.dev/v1alpha1/admissiondiagnoses", "kueue-doctor.dev/v1alpha1",
                       "AdmissionDiagnosis", stored)
    rt = Runtime(api, Options(writes_per_second=0))
    follow_leadership(rt, False)  # as service.serve does before the start-up LIST
    asyncio.run(start(rt))
    return rt, api


def leader_writes(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a leader writes for these objects, as the server would return it."""
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    out = [copy.deepcopy(r.body) for r in api.applies()]
    for i, d in enumerate(out):
        d["metadata"].update(uid=f"ad-{i}", resourceVersion=str(300 + i), creationTimestamp="2026-11-30T09:01:00Z")
    return out


def test_a_standby_diagnoses_everything_and_writes_nothing_not_even_a_delete() -> None:
    rt, api = standby(objects())
    assert asyncio.run(rt.loop.run_once()) == 2  # diagnosed in memory
    assert api.writes == []
    assert len(rt.verdicts) == 2
    asyncio.run(rt.publisher.delete(("team-a", "job-run-00001")))
    assert api.writes == []


def test_a_standby_exports_its_health_but_no_verdict_series_and_says_it_stands_by() -> None:
    rt, _ = standby(objects())
    asyncio.run(rt.loop.run_once())
    text = generate_latest(registry_for(rt)).decode()
    assert "kueue_doctor_leader 0.0" in text
    assert "kueue_doctor_diagnosis_passes_total 1.0" in text
    sampled = {ln.split("{")[0].split(" ")[0] for ln in text.splitlines() if ln and not ln.startswith("#")}
    assert not {f for f in sampled if any(f.startswith(v) for v in VERDICT_FAMILIES)}, sampled
    follow_leadership(rt, True)
    text = generate_latest(registry_for(rt)).decode()
    assert "kueue_doctor_leader 1.0" in text and "kueue_doctor_workloads{" in text


def finished_objects() -> list[dict[str, Any]]:
    finished = running().condition(condition("Finished", "True", "Succeeded", "Job finished successfully",
                                             "2026-11-30T09:40:00Z")).resource_version("102")
    return [finished.obj() if o.get("kind") == "Workload" and o["metadata"]["name"] == "job-run-00001" else o
            for o in objects()]


def test_a_standby_adopts_what_the_leader_writes_so_taking_over_rewrites_none_of_it() -> None:
    rt, api = standby(objects(), leader_writes(objects()))
    asyncio.run(rt.loop.run_once())
    # the Workload finishes; the leader writes the new verdict; the standby sees both through its watches
    after = {d["metadata"]["name"]: d for d in leader_writes(finished_objects())}
    rt.inbox.observe("MODIFIED", next(o for o in finished_objects() if o["metadata"]["name"] == "job-run-00001"))
    written = {**after["job-run-00001"], "metadata": {**after["job-run-00001"]["metadata"], "resourceVersion": "401"}}
    rt.inbox.observe("MODIFIED", written)
    asyncio.run(rt.loop.run_once())
    follow_leadership(rt, True)  # the leader dies right after its write
    asyncio.run(rt.loop.run_once())
    assert api.writes == []  # its write is what the new leader would write: nothing to do


def test_taking_over_writes_the_change_the_old_leader_did_not_write() -> None:
    rt, api = standby(objects(), leader_writes(objects()))
    asyncio.run(rt.loop.run_once())
    rt.inbox.observe("MODIFIED", next(o for o in finished_objects() if o["metadata"]["name"] == "job-run-00001"))
    asyncio.run(rt.loop.run_once())
    assert api.writes == []  # still standing by
    follow_leadership(rt, True)
    asyncio.run(rt.loop.run_once())
    assert [r.path for r in api.applies()] == [f"{DIAGNOSES}/job-run-00001"]
    assert api.applies()[0].body["status"]["reason"] == "Finished"


def test_taking_over_an_identical_store_rewrites_nothing() -> None:
    objs = objects()
    rt, api = standby(objs, leader_writes(objs))
    asyncio.run(rt.loop.run_once())
    follow_leadership(rt, True)
    assert asyncio.run(rt.loop.run_once()) == 2
    assert api.writes == []


def test_leader_election_flags_and_their_checks() -> None:
    parser = build_parser()
    err = io.StringIO()
    assert election_config(parser.parse_args(["run"]), err) is None
    args = parser.parse_args(["run", "--leader-elect", "--leader-elect-resource-namespace", "ops",
                              "--leader-elect-resource-name", "kueue-doctor-shard-a"])
    assert election_config(args, err) == ElectionConfig(namespace="ops", lease_name="kueue-doctor-shard-a")
    bad = parser.parse_args(["run", "--leader-elect", "--leader-elect-resource-namespace", "ops",
                             "--leader-elect-lease-duration", "5", "--leader-elect-renew-deadline", "7"])
    assert election_config(bad, err) == 2
    assert "the lease duration (5s) must exceed the renew deadline (7s)" in err.getvalue()
    assert ElectionConfig(namespace="").problems()[-1].startswith("no namespace for the Lease")
    assert ElectionConfig(namespace="x", retry_period=6).problems() == [
        "the renew deadline (7s) must exceed 1.2 x the retry period (6s)"]
