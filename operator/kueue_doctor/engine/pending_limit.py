"""Pending limits: how long is too long, declared where the people who care can write it.

A team declares `kueue-doctor.dev/max-pending: 2h` on its Job (or JobSet, ...), its LocalQueue, or the platform
on a ClusterQueue; the nearest declaration wins. kueue-doctor only reads the annotation. The wait is the current
one: since the Workload (or, without one, its owner) was created, or since its latest eviction when it ran
before. A value that is not a duration is reported (`problem`), never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..kube.objects import format_duration, format_time, m, meta, name, namespace, parse_duration, parse_time, s
from .context import Context

ANNOTATION = "kueue-doctor.dev/max-pending"
def _declared(ctx: Context) -> tuple[str, Mapping[str, Any], str] | None:
    """(kind, object, value) of the nearest declaration: the owner, then the LocalQueue, then the ClusterQueue."""
    # asked for every waiting Workload of every pass: one plain call per object, the owner's kind only when needed
    owner, lq, cq = ctx.owner, ctx.lq, ctx.cq
    if owner is not None and isinstance(value := _annotation(owner), str):
        return s(owner.get("kind")) or "", owner, value
    if lq is not None and isinstance(value := _annotation(lq), str):
        return "LocalQueue", lq, value
    if cq is not None and isinstance(value := _annotation(cq), str):
        return "ClusterQueue", cq, value
    return None


def _annotation(obj: Mapping[str, Any]) -> Any:
    return m(meta(obj).get("annotations")).get(ANNOTATION)


def waiting_since(ctx: Context, last_eviction: Mapping[str, Any] | None) -> datetime | None:
    evicted = parse_time((last_eviction or {}).get("time"))
    created = ctx.created
    if evicted is not None and (created is None or evicted > created):
        return evicted
    return created


def pending_limit(ctx: Context, last_eviction: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """status.pendingLimit of a Workload that waits (not Running or Finished); None when no limit is declared."""
    found = _declared(ctx)
    if found is None:
        return None
    kind, obj, value = found
    out: dict[str, Any] = {"limit": value, "sourceKind": kind, "sourceName": name(obj) or ""}
    if namespace(obj):
        out["sourceNamespace"] = namespace(obj)
    seconds = parse_duration(value)
    if seconds is None:
        out["problem"] = (f"{ANNOTATION}={value!r} on {kind} {name(obj)} is not a duration such as 90m, 2h or "
                          "1h30m; no limit is applied.")
        return out
    out["seconds"] = seconds
    since = waiting_since(ctx, last_eviction)
    if since is not None:
        out["waitingSince"] = format_time(since)
        if ctx.after(since, timedelta(seconds=seconds)):
            out["exceeded"] = True
            out["exceededSince"] = format_time(since + timedelta(seconds=seconds))
    return out


def limit_hint(limit: Mapping[str, Any], now: datetime) -> str | None:
    """One line for status.hints when the limit is passed: how long, over what, declared where."""
    if not limit.get("exceeded"):
        return None
    since = parse_time(limit.get("waitingSince"))
    waited = f"waiting {format_duration(now - since)}" if since else "waiting"
    where = "/".join(x for x in (s(limit.get("sourceNamespace")), s(limit.get("sourceName"))) if x)
    return (f"Pending limit passed: {waited}, over the {limit['limit']} declared by {ANNOTATION} on "
            f"{limit['sourceKind']} {where}.")
