"""The operator's parts together, on a canned apiserver: what is listed at start-up and what is written.

One server-side apply per new or changed verdict; nothing while nothing changes, nor after a restart.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from prometheus_client import generate_latest

from kueue_doctor.live import loop as loop_module
from kueue_doctor.live.metrics import registry_for
from tests.builders import Namespace, condition

from .apiserver import cluster, status
from .scenario import DIAGNOSES, MAX_CAPACITY, PENDING, objects, running, started, waiting


def test_start_up_diagnoses_every_workload_with_one_apply_each_then_writes_nothing_while_idle() -> None:
    rt, api = started(objects())
    assert api.writes == []  # listing and the access check only read
    assert asyncio.run(rt.loop.run_once()) == 2
    applies = api.applies()
    assert sorted(r.path for r in applies) == [f"{DIAGNOSES}/job-run-00001", f"{DIAGNOSES}/job-wait-00002"]
    assert all(r.query == {"fieldManager": "kueue-doctor", "force": "true"} for r in applies)
    assert asyncio.run(rt.loop.run_once()) == 0
    assert len(api.writes) == 2
    metrics = generate_latest(registry_for(rt)).decode()
    assert 'kueue_doctor_writes_total{result="applied"} 2.0' in metrics
    assert "kueue_doctor_diagnosis_passes_total 2.0" in metrics
    assert "kueue_doctor_diagnosis_workloads_total 2.0" in metrics  # two in the first pass, none in the second


def test_the_first_pass_runs_at_once_after_the_start_up_list_whatever_kopf_lists_next() -> None:
    # Kopf then lists every kind again: those objects are dropped as already known (no event wakes the loop),
    # so the start-up itself must: no waiting for the resync timer (300 s) before the first diagnoses
    objs = objects()
    rt, api = started(objs)

    async def first_pass() -> None:
        for obj in objs:
            rt.inbox.observe(None, copy.deepcopy(obj))
        task = asyncio.create_task(rt.loop.run())
        for _ in range(500):  # a pass hands its writes to the writers and goes on: wait for the writes too
            if rt.stats.passes and len(api.applies()) >= 2:
                break
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(first_pass())
    assert rt.stats.passes == 1 and len(api.applies()) == 2


def test_a_change_is_diagnosed_while_the_periodic_resync_is_still_listing() -> None:
    # at 50,000 Pods the resync's LISTs take tens of seconds: a change meanwhile must not wait for them
    rt, api = started(objects())
    asyncio.run(rt.loop.run_once())
    listing = asyncio.Event()
    resyncs: list[str] = []

    async def slow_resync() -> None:
        resyncs.append("started")
        await listing.wait()
        resyncs.append("done")

    rt.orphans.resync = slow_resync  # type: ignore[method-assign]
    rt.loop.synced()
    rt.loop._next_resync = 0.0  # due now

    async def scenario() -> None:
        task = asyncio.create_task(rt.loop.run())
        rt.inbox.observe("MODIFIED", waiting(MAX_CAPACITY).resource_version("201").obj())
        for _ in range(500):
            if len(api.applies()) == 3:
                break
            await asyncio.sleep(0.01)
        assert resyncs == ["started"] and len(api.applies()) == 3  # written while the resync still lists
        listing.set()
        for _ in range(100):
            if resyncs == ["started", "done"]:
                break
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(scenario())
    assert resyncs == ["started", "done"]
    assert api.applies()[2].body["status"]["reason"] == "ExceedsMaxQuota"


def test_a_resync_beside_a_pass_changes_the_state_only_after_the_pass_has_read_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a pass yields between chunks; every Workload of a pass is diagnosed against one state, so what the
    # resync (a task beside the loop) drains waits until the pass has diagnosed its last chunk
    monkeypatch.setattr(loop_module, "CHUNK", 1)
    rt, _api = started(objects())
    queued_at_chunk: list[int] = []
    real = loop_module.diagnose

    def diagnose(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        queued_at_chunk.append(len(rt.inbox))
        return real(*args, **kwargs)

    monkeypatch.setattr(loop_module, "diagnose", diagnose)

    async def scenario() -> None:
        rt.inbox.mark(rt.state.workloads)
        pass_ = asyncio.create_task(rt.loop.run_once())
        await asyncio.sleep(0)  # the pass diagnosed its first chunk and yields
        rt.inbox.observe("MODIFIED", waiting(MAX_CAPACITY).resource_version("201").obj())
        drained = asyncio.create_task(rt.inbox.drain_between_passes())
        await asyncio.sleep(0)
        assert not drained.done()  # held back while the pass reads the state
        await pass_
        await drained

    asyncio.run(scenario())
    assert len(queued_at_chunk) == 2 and queued_at_chunk[1] == 1  # the change was still queued, not applied
    assert len(rt.inbox) == 0 and rt.inbox.take()  # applied after the pass, and its Workload marked


def test_a_restart_over_the_diagnoses_it_wrote_rewrites_none() -> None:
    objs = objects()
    before, first = started(objs)
    asyncio.run(before.loop.run_once())
    written = [copy.deepcopy(r.body) for r in first.applies()]
    for i, d in enumerate(written):
        d["metadata"].update(uid=f"ad-{i:04d}", resourceVersion=str(200 + i), creationTimestamp="2026-11-30T09:01:00Z")
    api = cluster(objs)
    api.serve_list("/apis/kueue-doctor.dev/v1alpha1/admissiondiagnoses", "kueue-doctor.dev/v1alpha1",
                   "AdmissionDiagnosis", written)
    rt, api = started(objs, api)
    assert asyncio.run(rt.loop.run_once()) == 2
    assert api.writes == []


def test_only_a_changed_verdict_is_written_again() -> None:
    objs = objects()
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    ns = Namespace("team-a").label("team", "a").resource_version("101").obj()
    rt.inbox.observe("MODIFIED", ns)  # marks every Workload of the namespace; no verdict changes
    assert asyncio.run(rt.loop.run_once()) == 2
    assert len(api.writes) == 2
    finished = running().condition(condition("Finished", "True", "Succeeded", "Job finished successfully",
                                             "2026-11-30T09:40:00Z")).resource_version("102")
    rt.inbox.observe("MODIFIED", finished.obj())
    assert asyncio.run(rt.loop.run_once()) == 1
    assert [r.path for r in api.writes[2:]] == [f"{DIAGNOSES}/job-run-00001"]
    assert api.writes[2].body["status"]["stage"] == "Finished"


def test_a_failed_write_is_retried_on_a_later_pass_and_nothing_else_is_rewritten() -> None:
    api = cluster(objects())
    api.answer("PATCH", f"{DIAGNOSES}/job-wait-00002", status(500, "InternalError", "Internal error occurred: "
                                                                 "etcdserver: request timed out"), 500)
    rt, api = started(objects(), api)
    asyncio.run(rt.loop.run_once())
    assert len(api.applies()) == 2
    api.forget("PATCH", f"{DIAGNOSES}/job-wait-00002")  # etcd is back
    assert asyncio.run(rt.loop.run_once()) == 1
    assert [r.path for r in api.applies()[2:]] == [f"{DIAGNOSES}/job-wait-00002"]
    assert rt.stats.writes == {"applied": 2, "error": 1}


def test_a_burst_of_watch_events_is_diagnosed_once_in_its_final_state() -> None:
    objs = objects()
    rt, api = started(objs, debounce=5.0)  # a burst ends when it pauses (20 ms): 5 s only spares a slow machine
    asyncio.run(rt.loop.run_once())
    rt.loop._last_pass = 2.0  # a costly last pass: the next burst may be collected for up to 4 x 2 s (debounce: 5 s)
    messages = [PENDING, MAX_CAPACITY]  # WaitingForQuota, ExceedsMaxQuota: each flip a verdict change; last: Max

    async def burst() -> None:
        task = asyncio.create_task(rt.loop.run())
        for i in range(51):  # one change a millisecond: each would be written if each were a pass
            wl = waiting(messages[(i + 1) % 2]).resource_version(str(101 + i))
            rt.inbox.observe("MODIFIED", wl.obj())
            await asyncio.sleep(0.001)
        while rt.stats.passes < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        task.cancel()

    asyncio.run(burst())
    later = api.applies()[2:]
    assert [r.path for r in later] == [f"{DIAGNOSES}/job-wait-00002"]
    assert later[0].body["status"]["reason"] == "ExceedsMaxQuota"


def test_a_steady_stream_of_events_holds_a_change_only_a_few_times_as_long_as_a_pass_takes() -> None:
    """Under Kueue's pace the events never pause (Workloads, Pods, Events, our own writes' echoes). Passes that cost
    milliseconds must not wait out the whole debounce for a pause that never comes: a change is diagnosed within
    a few times the last pass's duration. A costly pass still lets the next burst be collected up to `debounce`."""
    rt, _api = started(objects(), debounce=0.5)
    asyncio.run(rt.loop.run_once())

    async def collect(last_pass: float) -> float:
        rt.loop._last_pass = last_pass
        stop = asyncio.Event()

        async def stream() -> None:  # an event every 5 ms, never a 20 ms pause
            for i in range(10_000):
                if stop.is_set():
                    return
                rt.inbox.observe("MODIFIED", waiting().resource_version(str(200 + i)).obj())
                await asyncio.sleep(0.005)

        feeder = asyncio.create_task(stream())
        await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await rt.loop._collect_burst()
        took = loop.time() - began
        stop.set()
        await feeder
        rt.inbox.drain()
        return took

    assert asyncio.run(collect(last_pass=0.005)) < 0.3  # BURST_MIN (0.1 s) over 4 x 5 ms, not the 0.5 s debounce
    assert asyncio.run(collect(last_pass=1.0)) >= 0.45  # a costly pass: the burst is collected up to the debounce


def test_metrics_show_every_verdict_of_a_pass_before_its_writes_are_done() -> None:
    """The first pass at 10,000 Workloads writes for a while (paced): metrics must not wait for it."""
    from kueue_doctor.live.runtime import Options, Runtime

    from .scenario import start

    api = cluster(objects())
    rt = Runtime(api, Options(writes_per_second=2, debounce=0.5))

    async def scenario() -> tuple[int, int]:
        await start(rt)
        task = asyncio.create_task(rt.loop.run_once())
        await asyncio.sleep(0.2)  # the first write is out; the second waits for its slot (0.5 s)
        seen = (len(rt.loop.verdicts), len(api.applies()))
        await task
        return seen

    verdicts, written = asyncio.run(scenario())
    assert verdicts == 2 and written < 2
    assert len(api.applies()) == 2
