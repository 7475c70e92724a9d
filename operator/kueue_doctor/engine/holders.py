"""Who holds quota in a ClusterQueue: read by the admission rules (who is ahead, who can be preempted, whose Pods
do not run) and by the scheduling rules (whose admissions the nodes cannot hold), once per ClusterQueue and pass."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from ..kube.objects import conditions, parse_time
from ..state import Derived
from . import quota
from .context import Context


@dataclass(frozen=True)
class Holder:
    """A Workload holding quota in a ClusterQueue, with what the waiting Workloads' verdicts read of it."""

    key: tuple[str, str]
    priority: int
    not_ready_since: datetime | None  # PodsReady=False since then
    usage: dict[tuple[str, str], Decimal]  # (flavor, resource) -> held


@dataclass(frozen=True)
class Holders:
    holders: list[Holder]
    priorities: list[int]  # sorted


def quota_holders(ctx: Context, cq: str) -> Holders:
    """The ClusterQueue's Workloads holding quota; per ClusterQueue and pass (only the queues asked about are
    read: each holder is decoded once, whatever reads it)."""
    per_cq = ctx.state.derived(HOLDERS)
    found = per_cq.get(cq)
    if found is None:
        idx, workloads = ctx.state.index, ctx.state.workloads
        holders = []
        for key in sorted(idx.workloads_by_cq.get(cq, ())):
            if idx.holds_quota(key) and key in workloads:
                wl = workloads[key]
                ready = conditions(wl).get("PodsReady")
                since = parse_time(ready.get("lastTransitionTime")) if ready and ready.get("status") == "False" \
                    else None
                holders.append(Holder(key, ctx.state.priority_of(wl), since, quota.admitted_usage(wl)))
        found = per_cq[cq] = Holders(holders, sorted(h.priority for h in holders))
    return found


HOLDERS: Derived[dict[str, Holders]] = Derived("the quota holders per ClusterQueue", lambda _: {})
