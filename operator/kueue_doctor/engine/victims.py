"""Who is being preempted for whom: the Workloads evicted by preemption now, by their preemptor's UID, read once
per index from the victims' Evicted conditions (`_Index.preempted` keeps the few there are).

Read by the preemptor's own verdict (`admission/flavors.py`: its victims, and whether one is stuck) and by the
queue order (`queue_position.py`: since when a BestEffortFIFO queue's head waits for its preemptions).
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from ..kube.objects import conditions, is_true, m, parse_time, s, uid
from ..state import ClusterState, Derived
from .context import Context
from .messages import parse_workload_message


class Victim(NamedTuple):
    namespace: str
    name: str
    uid: str | None
    evicted_at: datetime | None  # its Evicted condition's lastTransitionTime: when it was preempted


def _victims(state: ClusterState) -> dict[str, list[Victim]]:
    """Workloads evicted by preemption, by their preemptor's UID (from the victims' Evicted messages)."""
    victims: dict[str, list[Victim]] = {}
    for ns, nm in sorted(state.index.preempted):  # the index keeps who is evicted by preemption now
        wl = state.workloads[ns, nm]
        cond = conditions(wl).get("Evicted")
        if not is_true(cond) or m(cond).get("reason") != "Preempted":
            continue
        parsed = parse_workload_message(s(m(cond).get("message")) or "")
        if parsed.preemption and parsed.preemption.preemptor_uid:
            victims.setdefault(parsed.preemption.preemptor_uid, []).append(
                Victim(ns, nm, uid(wl), parse_time(m(cond).get("lastTransitionTime"))))
    return victims


VICTIMS: Derived[dict[str, list[Victim]]] = Derived("victims by preemptor", _victims)


def victims_of(ctx: Context) -> list[Victim]:
    return ctx.state.derived(VICTIMS).get(ctx.uid, [])
