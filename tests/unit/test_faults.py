"""The operator under faults, on a canned apiserver: 429s, re-lists after 410, RBAC and the CRD changing at
runtime, watches that stop, floods of Events. The same faults on the real control plane: tests/e2e/test_faults.py."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kueue_doctor.live import discovery, orphans, rest
from kueue_doctor.live.runtime import Options, Runtime
from kueue_doctor.live.snapshot import LiveError
from kueue_doctor.state import MAX_EVENTS_PER_OBJECT, ClusterState
from tests.builders import Event, Pod

from .apiserver import (
    CRD_PATH,
    FakeApiServer,
    Response,
    cluster,
    collection_path,
    forbidden_list,
    installed_crd,
    status,
)
from .scenario import DIAGNOSES, objects, started

RUNNING, WAITING = ("team-a", "job-run-00001"), ("team-a", "job-wait-00002")


class Throttling(FakeApiServer):
    """Answers the first `times` requests to `path` with 429 and a Retry-After, as priority and fairness does."""

    def __init__(self, path: str, times: int, retry_after: str = "2") -> None:
        super().__init__()
        self.path, self.times, self.retry_after = path, times, retry_after

    def call_api(self, method: str, url: str, header_params: dict[str, str] | None = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> Response:
        if url.split("?")[0] == self.path and self.times > 0:
            self.times -= 1
            rsp = Response(429, status(429, "TooManyRequests", "Too many requests, please try again later."))
            rsp.headers = {"Retry-After": self.retry_after}  # type: ignore[attr-defined]
            return rsp
        return super().call_api(method, url, header_params, body, post_params, _request_timeout)


def test_a_429_is_retried_after_its_retry_after_and_the_write_lands(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(rest.time, "sleep", waits.append)
    before = rest.throttled_total
    api = Throttling("/apis/x/v1/namespaces/a/things/t", times=2, retry_after="3")
    out = rest.apply(api, "/apis/x/v1/namespaces/a/things/t", {"metadata": {"name": "t"}})
    assert out["metadata"]["name"] == "t"
    assert waits == [3.0, 3.0] and rest.throttled_total - before == 2
    api = Throttling("/apis/x/v1/namespaces/a/things/u", times=99, retry_after="600")
    with pytest.raises(rest.ApiError) as err:  # a server that never lets us in: an error, after bounded waits
        rest.apply(api, "/apis/x/v1/namespaces/a/things/u", {"metadata": {"name": "u"}})
    assert err.value.status == 429
    assert waits[2:] == [rest.MAX_RETRY_AFTER] * rest.THROTTLE_RETRIES


def waiting_deleted_in_a_gap() -> tuple[Runtime, FakeApiServer, list[dict[str, Any]]]:
    """Both Workloads diagnosed; then a watch gap (410 Gone) in which the waiting one was deleted: the cluster
    lists only the running one, and Kopf re-lists it."""
    objs = objects()
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    api.serve_list(collection_path("Workload"), "kueue.x-k8s.io/v1beta2", "Workload", [objs[4]])
    rt.inbox.observe(None, copy.deepcopy(objs[4]))
    return rt, api, objs


def test_after_a_re_list_what_vanished_is_dropped_with_its_diagnosis_and_metrics_at_once() -> None:
    rt, api, objs = waiting_deleted_in_a_gap()
    assert set(rt.verdicts) == {RUNNING, WAITING}
    assert rt.inbox.relisted_at is not None
    late = copy.deepcopy(objs[5])  # created after the re-list: the watch brings it, it is alive, never asked about
    late["metadata"].update(name="job-late-00003", uid="wl-00003", resourceVersion="500")
    rt.inbox.observe("ADDED", copy.deepcopy(late))
    before = len(api.requests)
    gone = asyncio.run(rt.orphans.after_relist())
    assert gone == 1
    asked = [(r.path, r.query.get("fieldSelector")) for r in api.requests[before:] if r.method == "GET"]
    assert asked == [(collection_path("Workload", "team-a"), "metadata.name=job-wait-00002")]
    assert [r.path for r in api.writes if r.method == "DELETE"] == [f"{DIAGNOSES}/job-wait-00002"]
    asyncio.run(rt.loop.run_once())
    late_key = ("team-a", "job-late-00003")
    assert set(rt.state.workloads) == {RUNNING, late_key} and set(rt.verdicts) == {RUNNING, late_key}
    assert len(api.applies()) == 3  # nothing rewritten: the re-listed one has the resourceVersion we had


def test_kopfs_own_listing_after_start_up_brings_what_the_state_holds_and_costs_no_request() -> None:
    """Kopf lists every kind once more right after the operator's start-up list; repairing that as a watch gap
    was a metadata LIST of every kind (10-20 s of CPU at 10,000 Workloads and 50,000 Pods)."""
    objs = objects()
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    for obj in objs:
        rt.inbox.observe(None, copy.deepcopy(obj))
    assert rt.inbox.relisted_at is not None
    before = len(api.requests)
    assert asyncio.run(rt.orphans.after_relist()) == 0
    assert api.requests[before:] == []
    assert set(rt.state.workloads) == {RUNNING, WAITING}


def test_after_a_cut_short_re_list_the_kind_is_listed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """More unlisted objects of a kind than RELIST_CHECKS (the re-list was interrupted): one metadata LIST of
    that kind, not a request per object; kinds Kopf did not re-list are not listed at all."""
    monkeypatch.setattr(orphans, "RELIST_CHECKS", 0)
    rt, api, _ = waiting_deleted_in_a_gap()
    before = len(api.requests)
    assert asyncio.run(rt.orphans.after_relist()) == 1
    listed = [r for r in api.requests[before:] if r.method == "GET"]
    assert [(r.path, "fieldSelector" in r.query) for r in listed] == [(collection_path("Workload"), False)]
    asyncio.run(rt.loop.run_once())
    assert set(rt.state.workloads) == {RUNNING}


def test_a_re_list_repair_that_fails_is_tried_again_with_what_was_re_listed() -> None:
    rt, api, _ = waiting_deleted_in_a_gap()
    in_team_a = collection_path("Workload", "team-a")  # asked in its namespace: the apiserver reads one key
    api.answer("GET", in_team_a, status(503, "ServiceUnavailable", "etcd is restarting"), 503)
    with pytest.raises(LiveError):  # runtime.py logs it and tries again in RELIST_RETRY seconds
        asyncio.run(rt.orphans.after_relist())
    assert WAITING in rt.state.workloads  # nothing dropped on a failed check
    api.forget("GET", in_team_a)
    assert asyncio.run(rt.orphans.after_relist()) == 1  # what was re-listed before the failure still counts
    asyncio.run(rt.loop.run_once())
    assert set(rt.state.workloads) == {RUNNING}


def test_an_object_the_watch_delivers_while_the_repair_lists_is_not_taken_as_gone() -> None:
    objs = objects()
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    late = copy.deepcopy(objs[5])
    late["metadata"].update(name="job-late-00003", uid="wl-00003", resourceVersion="500")
    rt.inbox.observe("ADDED", copy.deepcopy(late))
    rt.inbox.drain()
    original = api.call_api

    def listing_while_it_arrives(method: str, url: str, *args: Any, **kwargs: Any) -> Response:
        if url.startswith(collection_path("Workload")):
            rt.inbox.observe("MODIFIED", copy.deepcopy(late))  # the watch, while the LIST is in flight
        return original(method, url, *args, **kwargs)

    api.call_api = listing_while_it_arrives  # type: ignore[method-assign]
    assert asyncio.run(rt.orphans.repair()) == set()  # the resync's LIST (without it) is older than the event
    rt.inbox.drain()
    assert ("team-a", "job-late-00003") in rt.state.workloads


def test_rbac_taken_away_at_runtime_is_confirmed_then_degrades_verdicts_and_given_back_restores_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pod = (Pod("job-run-00001-abcde", "team-a").workload("job-run-00001").node("n1").phase("Running")
           .resource_version("5").obj())
    objs = [*objects(), pod]
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    assert "Pod" in rt.state.complete_kinds and rt.state.pods
    api.answer("GET", collection_path("Pod"), forbidden_list("pods", ""), 403)
    clock = [1000.0]
    monkeypatch.setattr(discovery.time, "monotonic", lambda: clock[0])
    assert asyncio.run(rt.discovery.recheck_access()) == {}  # one 403 right after a restart proves nothing
    assert rt.discovery.confirm_due() == 1000.0 + discovery.CONFIRM_AFTER
    clock[0] += discovery.CONFIRM_AFTER
    restarts: list[bool] = []
    rt.restart_watches = lambda: restarts.append(True)  # type: ignore[method-assign]
    asyncio.run(rt.recheck())
    assert not rt.discovery.allowed("Pod") and "Pod" in rt.discovery.forbidden
    assert "Pod" not in rt.state.complete_kinds and not rt.state.pods  # what we may not see decides nothing
    assert restarts == [True]  # the watches restart without the Pod watch (Kopf would stop on its 403)
    rt.inbox.observe("MODIFIED", {**pod, "metadata": {**pod["metadata"], "resourceVersion": "6"}})
    rt.inbox.drain()
    assert not rt.state.pods  # a still-open watch's event is not used either

    api.forget("GET", collection_path("Pod"))
    asyncio.run(rt.recheck())
    assert rt.discovery.allowed("Pod") and "Pod" in rt.state.complete_kinds and set(rt.state.pods)
    assert restarts == [True, True] and rt.discovery.forbidden == set()


def test_the_crd_deleted_pauses_writing_at_once_and_its_return_rewrites_every_diagnosis_keeping_since() -> None:
    rt, api = started(objects())
    asyncio.run(rt.loop.run_once())
    written = [r.body for r in api.applies()]
    for record in rt.publisher.records.values():  # a `since` kept from long ago (the engine would not say it)
        record.since = "2026-11-29T12:00:00Z"
    crd = installed_crd()
    deleting = copy.deepcopy(crd)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    crd_event = {**deleting, "kind": "CustomResourceDefinition"}
    rt.inbox.observe("MODIFIED", crd_event)
    assert rt.publisher.paused and not rt.stats.crd_installed
    for body in written:  # the CRD takes every diagnosis along: no restore is attempted
        rt.inbox.observe("DELETED", copy.deepcopy(body))
    assert asyncio.run(rt.loop.run_once()) == 0 and len(api.applies()) == 2
    rt.inbox.observe("DELETED", crd_event)
    fresh = {**copy.deepcopy(crd), "kind": "CustomResourceDefinition"}
    rt.inbox.observe("ADDED", fresh)  # created, not yet Established: not served yet
    assert rt.publisher.paused
    fresh["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
    rt.inbox.observe("MODIFIED", fresh)
    assert not rt.publisher.paused and rt.stats.crd_installed
    assert asyncio.run(rt.loop.run_once()) == 2
    again = api.applies()[2:]
    assert len(again) == 2
    assert [r.body["status"]["since"] for r in again] == ["2026-11-29T12:00:00Z"] * 2


def test_watches_that_fail_are_restarted_in_process_and_a_signal_ends_them(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Runtime(cluster(objects()), Options(recheck_interval=3600))
    calls: list[str] = []

    async def kopf(stop: asyncio.Event) -> None:
        calls.append("start")
        if len(calls) == 1:
            raise RuntimeError("watch for pods: 403 Forbidden")  # what Kopf raises when a watch is refused
        if len(calls) == 2:
            rt.restart_watches()  # the kinds to watch changed
            await stop.wait()
            return
        return  # Kopf stopped on SIGTERM: the flag is not ours

    monkeypatch.setattr("kueue_doctor.live.runtime.WATCH_BACKOFF", (0.0,))
    asyncio.run(rt.run_watches(kopf))
    assert calls == ["start", "start", "start"] and rt.watch_restarts == 2
    assert rt.stats.errors == {"watch": 1}


def test_a_flood_of_events_about_one_object_keeps_only_the_newest() -> None:
    pod = Pod("p", "team-a").obj()
    state = ClusterState()
    floods = [Event(pod, "FailedMount", f"mount {n} failed", at=f"2026-11-30T09:{n // 60:02d}:{n % 60:02d}Z").obj()
              for n in range(MAX_EVENTS_PER_OBJECT + 30)]
    for ev in reversed(floods):  # the newest first: the older ones are not kept when they arrive late
        state.upsert(ev)
    kept = state.events_about("Pod", "team-a", "p")
    assert len(kept) == MAX_EVENTS_PER_OBJECT == len(state.events)
    assert {e["message"] for e in kept} == {f"mount {n} failed" for n in range(30, MAX_EVENTS_PER_OBJECT + 30)}


def test_access_checks_are_metadata_only_reads() -> None:
    api = cluster([])
    rt = Runtime(api, Options())
    asyncio.run(rt.discovery.check_access())
    asyncio.run(rt.discovery.recheck_access())
    assert api.writes == [] and all("PartialObjectMetadataList" in r.accept for r in api.requests)
    assert CRD_PATH.startswith(discovery.CRDS_PATH)


def test_kueue_is_served_only_once_its_workloads_are() -> None:
    api = cluster([])
    api.answer("GET", "/apis/kueue.x-k8s.io/v1beta2", {"kind": "APIResourceList", "apiVersion": "v1",
                                                       "groupVersion": "kueue.x-k8s.io/v1beta2",
                                                       "resources": [{"name": "localqueues", "kind": "LocalQueue"}]})
    api.answer("GET", "/apis/kueue.x-k8s.io/v1beta1", status(404, "NotFound", "not found"), 404)
    assert not asyncio.run(Runtime(api, Options()).discovery.kueue_served())  # CRDs still being installed


def test_kopf_stopping_leaves_the_operators_own_tasks_alone() -> None:
    from kopf._cogs.aiokits import aiotasks

    from kueue_doctor.live.service import OutsideKopf

    async def main() -> tuple[bool, bool, bool]:
        before = asyncio.create_task(asyncio.sleep(1))
        outside = OutsideKopf({before})
        ours = asyncio.create_task(asyncio.Event().wait())  # what wait_for and gather create while Kopf runs
        kopfs = asyncio.create_task(aiotasks.wait({before}))  # a coroutine of Kopf's own
        result = (before in outside, ours in outside, kopfs in outside)
        for task in (before, ours, kopfs):
            task.cancel()
        return result

    assert asyncio.run(main()) == (True, True, False)
