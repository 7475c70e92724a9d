"""Kopf's watch streams, straight into the inbox.

Kopf logs in, finds the resources and namespaces to watch (its observers fill `Insights`), lists, watches,
reconnects and lists again after a 410; all of that stays Kopf's. What it does per event after that, the
per-object machinery (a worker task and queue per object, three loggers, memories, cause detection and a
handler call with a dozen keyword arguments), was for handlers we do not have: our one handler queued the
event. It was about a fifth of the operator's CPU under Kueue's own load, where 41% of the events are the
echoes of our own writes. `relay` takes Kopf's place as the consumer of the streams (Kopf runs it as its
command, `kopf.spawn_tasks(_command=...)`), one task per stream, kept in step with the insights as Kopf's own
orchestrator keeps its watchers.

The Kopf version is pinned (pyproject.toml): `infinite_watch`, `Bookmark`, `Insights` and `_command` have no
public names; `tests/unit/test_relay.py` runs the relay on Kopf's own `Insights`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import kopf
from kopf._cogs.clients import watching
from kopf._cogs.structs import references

from ..kube.objects import m

log = logging.getLogger("kueue_doctor.relay")

YIELD_EVERY = 64  # events handed over between two yields to the loop: a page of 500 or a burst must not hog it

Observe = Callable[[str | None, dict[str, Any]], None]
Key = tuple[references.Resource, references.Namespace]


class Stream(Protocol):
    """`kopf._cogs.clients.watching.infinite_watch`'s shape: listed objects (type None), `Bookmark.LISTED`, then
    the watch's events, forever; it ends only by raising (a 403, a 404)."""

    def __call__(self, *, settings: kopf.OperatorSettings, resource: references.Resource,
                 namespace: references.Namespace) -> AsyncIterator[Any]: ...


def wanted(insights: references.Insights) -> set[Key]:
    """One stream per watched resource, per namespace when the operator is namespaced (cluster-scoped kinds and a
    cluster-wide operator: one, namespace None), as Kopf's orchestrator spawns its watchers."""
    return {(r, ns if r.namespaced else None) for r in insights.watched_resources for ns in insights.namespaces}


async def pump(stream: Stream, settings: kopf.OperatorSettings, resource: references.Resource,
               namespace: references.Namespace, observe: Observe) -> None:
    """One stream into `observe`, forever. An object `observe` chokes on is logged and skipped: one bad object
    must not stop every watch (Kopf's processing caught a handler's error the same way)."""
    kind = resource.kind or ""
    count = 0
    async for event in stream(settings=settings, resource=resource, namespace=namespace):
        if isinstance(event, watching.Bookmark) or not isinstance(event, Mapping) or event.get("type") == "BOOKMARK":
            continue
        obj = event.get("object")
        if isinstance(obj, dict):
            obj.setdefault("kind", kind)  # a LIST's items carry none
            try:
                observe(event.get("type"), obj)
            except Exception as exc:
                md = m(obj.get("metadata"))
                log.exception("Could not take in a watch event for %s %s/%s (%s); it is skipped, the next event or "
                              "the periodic resync brings the object back. Please report this with the object.",
                              kind, md.get("namespace", ""), md.get("name", ""), exc)
        count += 1
        if count % YIELD_EVERY == 0:
            await asyncio.sleep(0)


async def relay(settings: kopf.OperatorSettings, insights: references.Insights, observe: Observe,
                stream: Stream = watching.infinite_watch) -> None:
    """Forever: the streams `wanted` runs, started and stopped as Kopf's observers revise the insights (a CRD
    installed or deleted, a namespace). The first stream to fail ends the relay with its error, as Kopf's own
    orchestrator ends the operator: the runtime then re-checks RBAC and restarts the watches."""
    running: dict[Key, asyncio.Task[None]] = {}
    try:
        async with insights.revised:
            while True:
                want = wanted(insights)
                for key in [k for k in running if k not in want]:
                    task = running.pop(key)
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                for key in want - running.keys():
                    resource, namespace = key
                    running[key] = asyncio.create_task(pump(stream, settings, resource, namespace, observe),
                                                       name=f"stream of {resource.plural} in {namespace or 'all'}")
                revised = asyncio.create_task(insights.revised.wait(), name="insights revised")
                try:
                    done, _ = await asyncio.wait({revised, *running.values()}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    revised.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await revised
                for key, task in list(running.items()):
                    if task in done:
                        del running[key]
                        task.result()  # its error ends the relay
                        raise RuntimeError(f"the watch stream of {key[0].plural} ended, which it never does")
    finally:
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
