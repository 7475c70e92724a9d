"""The relay: Kopf's watch streams into the inbox, kept in step with Kopf's own Insights (live/relay.py).

The streams here are fakes of `infinite_watch`'s shape (listed objects with type None, Bookmark.LISTED, the watch's
events, BOOKMARK events); the insights are Kopf's own, revised as its observers revise them. The e2e suite runs the
relay on the real apiserver.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import watching
from kopf._cogs.structs import references

from kueue_doctor.live.relay import YIELD_EVERY, relay

WORKLOADS = references.Resource("kueue.x-k8s.io", "v1beta2", "workloads", kind="Workload", namespaced=True)
CQS = references.Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", kind="ClusterQueue", namespaced=False)
PODS = references.Resource("", "v1", "pods", kind="Pod", namespaced=True)


def obj(name: str, ns: str | None = "team-a") -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "resourceVersion": "1"}
    if ns:
        md["namespace"] = ns
    return {"metadata": md}


class Streams:
    """Fake `infinite_watch`: per (plural, namespace), the events to yield, then an error to raise or a wait forever."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str | None], list[Any]] = {}
        self.errors: dict[tuple[str, str | None], Exception] = {}
        self.open: set[tuple[str, str | None]] = set()
        self.opened: list[tuple[str, str | None]] = []

    async def __call__(self, *, settings: kopf.OperatorSettings, resource: references.Resource,
                       namespace: str | None) -> AsyncIterator[Any]:
        key = (resource.plural, namespace)
        self.open.add(key)
        self.opened.append(key)
        try:
            for event in self.events.get(key, []):
                yield event
            if key in self.errors:
                raise self.errors[key]
            await asyncio.Event().wait()
        finally:
            self.open.discard(key)


async def revise(insights: references.Insights, resources: set[references.Resource] | None = None,
                 namespaces: set[str | None] | None = None) -> None:
    """What Kopf's resource and namespace observers do when a CRD or a namespace comes or goes."""
    async with insights.revised:
        if resources is not None:
            insights.watched_resources.clear()
            insights.watched_resources.update(resources)
        if namespaces is not None:
            insights.namespaces.clear()
            insights.namespaces.update(namespaces)
        insights.revised.notify_all()


async def settle(until: Any, timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not until():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.001)


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def test_listed_and_watched_objects_reach_the_inbox_with_their_kind_and_bookmarks_do_not() -> None:
    async def main() -> list[tuple[str | None, str, str]]:
        seen: list[tuple[str | None, str, str]] = []
        streams = Streams()
        streams.events[("workloads", None)] = [
            {"type": None, "object": obj("listed")}, watching.Bookmark.LISTED,
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
            {"type": "MODIFIED", "object": {**obj("changed"), "kind": "Workload"}},
            {"type": "DELETED", "object": obj("gone")}]
        insights = references.Insights()
        task = asyncio.create_task(relay(kopf.OperatorSettings(), insights,
                                         lambda t, o: seen.append((t, o["kind"], o["metadata"]["name"])), streams))
        await revise(insights, {WORKLOADS}, {None})
        await settle(lambda: len(seen) == 3)
        await stop(task)
        return seen

    assert asyncio.run(main()) == [(None, "Workload", "listed"), ("MODIFIED", "Workload", "changed"),
                                   ("DELETED", "Workload", "gone")]


def test_streams_follow_kopfs_insights_per_namespace_and_stop_with_the_relay() -> None:
    """A namespaced operator: one stream per namespace of a namespaced kind, one for a cluster-scoped kind; a CRD
    deleted (its resource gone from the insights) stops its stream, one installed starts it."""
    async def main() -> list[set[tuple[str, str | None]]]:
        streams = Streams()
        insights = references.Insights()
        task = asyncio.create_task(relay(kopf.OperatorSettings(), insights, lambda t, o: None, streams))
        states = []
        await revise(insights, {WORKLOADS, CQS}, {"team-a", "team-b"})
        await settle(lambda: len(streams.open) == 3)
        states.append(set(streams.open))
        await revise(insights, {WORKLOADS, CQS, PODS})
        await settle(lambda: len(streams.open) == 5)
        states.append(set(streams.open))
        await revise(insights, {WORKLOADS, PODS}, {"team-b"})
        await settle(lambda: len(streams.open) == 2)
        states.append(set(streams.open))
        await stop(task)
        states.append(set(streams.open))
        return states

    assert asyncio.run(main()) == [
        {("workloads", "team-a"), ("workloads", "team-b"), ("clusterqueues", None)},
        {("workloads", "team-a"), ("workloads", "team-b"), ("clusterqueues", None), ("pods", "team-a"),
         ("pods", "team-b")},
        {("workloads", "team-b"), ("pods", "team-b")},
        set()]


def test_a_failing_stream_ends_the_relay_with_its_error_and_stops_the_others() -> None:
    """A watch forbidden (RBAC taken away) must end the watches, so the runtime re-checks RBAC and restarts them
    without the kind, as it did when Kopf's orchestrator ended on the same error."""
    async def main() -> set[tuple[str, str | None]]:
        streams = Streams()
        streams.events[("pods", None)] = [{"type": None, "object": obj("p")}]
        streams.errors[("pods", None)] = PermissionError("403 pods forbidden")
        insights = references.Insights()
        await revise(insights, {WORKLOADS, CQS}, {None})
        task = asyncio.create_task(relay(kopf.OperatorSettings(), insights, lambda t, o: None, streams))
        await settle(lambda: len(streams.open) == 2)
        await revise(insights, {WORKLOADS, CQS, PODS})
        with pytest.raises(PermissionError, match="403 pods forbidden"):
            await asyncio.wait_for(task, 2)
        return streams.open

    assert asyncio.run(main()) == set()


def test_an_object_the_inbox_chokes_on_is_skipped_and_the_stream_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[str]:
        seen: list[str] = []

        def observe(event_type: str | None, o: dict[str, Any]) -> None:
            if o["metadata"]["name"] == "bad":
                raise ValueError("unexpected shape")
            seen.append(o["metadata"]["name"])

        streams = Streams()
        streams.events[("workloads", None)] = [{"type": "ADDED", "object": obj(n)} for n in ("a", "bad", "c")]
        insights = references.Insights()
        await revise(insights, {WORKLOADS}, {None})
        task = asyncio.create_task(relay(kopf.OperatorSettings(), insights, observe, streams))
        await settle(lambda: len(seen) == 2)
        await stop(task)
        return seen

    assert asyncio.run(main()) == ["a", "c"]
    assert "Workload team-a/bad (unexpected shape)" in caplog.text


def test_a_long_page_of_events_lets_the_diagnosis_loop_run_in_between() -> None:
    """A LIST page or a burst arrives buffered: without yielding, the stream would hold the event loop (the passes,
    the writers, the probes) until the whole burst was queued."""
    async def main() -> int:
        seen: list[int] = []
        ticks_at: list[int] = []
        streams = Streams()
        streams.events[("pods", None)] = [{"type": None, "object": obj(f"p{n}")} for n in range(10 * YIELD_EVERY)]

        async def loop_work() -> None:
            while True:
                ticks_at.append(len(seen))
                await asyncio.sleep(0)

        insights = references.Insights()
        await revise(insights, {PODS}, {None})
        other = asyncio.create_task(loop_work())
        task = asyncio.create_task(relay(kopf.OperatorSettings(), insights, lambda t, o: seen.append(1), streams))
        await settle(lambda: len(seen) == 10 * YIELD_EVERY)
        await stop(task)
        await stop(other)
        return len({n for n in ticks_at if 0 < n < 10 * YIELD_EVERY})

    assert asyncio.run(main()) >= 5  # the other task ran at least at five points inside the burst
