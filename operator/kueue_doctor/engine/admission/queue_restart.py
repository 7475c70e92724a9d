"""A queue that runs again while Kueue's QuotaReserved=False message still says it is stopped or inactive.

Three readers ask for it per Workload (the queue handlers of `kueue_message.py` step aside for it, and
`order.not_yet_evaluated` says it): a `ctx.lazy` fact, computed once. Kept apart from `queues.py`, whose imports
lead back to `order.py`.
"""

from __future__ import annotations

from datetime import datetime

from ...kube.objects import conditions, is_true, m, parse_time, s, spec, when_text
from ..context import Context
from ..messages import Template

_QUEUE_BLOCKED = frozenset({Template.LOCAL_QUEUE_INACTIVE, Template.LOCAL_QUEUE_STOPPED,
                            Template.CLUSTER_QUEUE_INACTIVE, Template.CLUSTER_QUEUE_STOPPED})


StaleQueue = tuple[str, datetime | None]  # (what shows the queue runs again, since when)


def stale_queue_message(ctx: Context) -> StaleQueue | None:
    """`_stale_queue_message`, once per Workload."""
    return ctx.lazy(_stale_queue_message)


def _stale_queue_message(ctx: Context) -> StaleQueue | None:
    """Kueue's "LocalQueue x is inactive/stopped" or "ClusterQueue x is stopped/inactive" while the queue in the
    input runs again: (what shows it, since when it runs), else None. Kueue rewrites QuotaReserved=False only at its
    next attempt to admit the Workload; once no queue blocks it, its workload controller keeps the old text
    (workload_controller.go resolveLegacyUnadmittedQuotaReservedCondition returns nothing, Kueue 0.19.2), so after a
    restart it lags until the scheduler reaches the Workload. A LocalQueue or a stopped ClusterQueue is
    inactive only by its stopPolicy (getQueueBlocker); an inactive ClusterQueue is stale only once its Active
    condition turned True after the message (a cohort cycle or TAS usage not synced keep it True and inactive)."""
    p = ctx.qr_parsed
    if p.template not in _QUEUE_BLOCKED:
        return None
    written = ctx.cond_time("QuotaReserved")
    since: datetime | None = None
    if p.template in (Template.LOCAL_QUEUE_INACTIVE, Template.LOCAL_QUEUE_STOPPED):
        if ctx.lq is None or (s(spec(ctx.lq).get("stopPolicy")) or "None") != "None":
            return None
        shown, restart = f"LocalQueue {ctx.ns}/{ctx.lq_name} has stopPolicy None now", "LocalQueueRestarted"
    else:
        cq_name = p.names.get("clusterQueue") or ctx.cq_name
        cq = ctx.state.cluster_queues.get(cq_name or "")
        active = conditions(cq).get("Active") if cq else None
        if cq is None or (s(spec(cq).get("stopPolicy")) or "None") != "None" or active is None or \
                not is_true(active) or m(cq.get("metadata")).get("deletionTimestamp"):
            return None
        became = parse_time(m(active).get("lastTransitionTime"))
        since = became if became is not None and written is not None and became >= written else None
        requeued = ctx.cond_time("Requeued") if ctx.cond_reason("Requeued") == "ClusterQueueRestarted" else None
        if p.template == Template.CLUSTER_QUEUE_INACTIVE and since is None and (
                requeued is None or written is None or requeued < written):
            return None  # Active all along: Kueue's cache holds it inactive for another reason
        shown, restart = f"ClusterQueue {cq_name} has stopPolicy None and is Active now", "ClusterQueueRestarted"
    if ctx.true("Requeued") and ctx.cond_reason("Requeued") == restart:
        since = ctx.cond_time("Requeued")
        shown += f"; Kueue marked it restarted at {when_text(since)} (Requeued=True {restart})"
    elif since is not None:
        shown += f" (since {when_text(since)})"
    text = (f"Kueue's message from {when_text(written)} (\"{ctx.cond_message('QuotaReserved')[:200]}\") is older "
            f"than the queue's restart: {shown}. Kueue queued it again and rewrites that message at its next attempt "
            "to admit it.")
    return text, since
