"""Nothing decided yet: new, admission-gated, or waiting behind the head of a StrictFIFO ClusterQueue (or behind
the Workload Kueue keeps at the head of a BestEffortFIFO one while its preemptions complete).

`queue_order` is Kueue's order of a ClusterQueue's heap (priority with boost, then the queue timestamp,
then UID); the pending Workloads of every StrictFIFO ClusterQueue are sorted once per index and clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ...kube.objects import (
    PRIORITY_BOOST,
    conditions,
    is_true,
    m,
    parse_time,
    priority,
    priority_boost,
    s,
    spec,
    time_text,
    when_text,
)
from ...state import ClusterState, Derived
from ...vocabulary import Cause, Reason
from .. import quota
from ..context import Context
from ..messages import FailureKind, Template
from ..queue_position import fair_sharing_ordered, requeued_at_back, sticky_head
from ..rules import Finding, Phase, pairs, rule
from .queue_restart import stale_queue_message

Order = tuple[int, str, str]  # (-priority, queue timestamp, uid): smallest first
# how long a BestEffortFIFO queue's head may wait for its victims before the Workloads behind it are told so: a
# preemption normally completes within the victims' termination grace period (30 s by default)
STICKY_AFTER = timedelta(minutes=2)


def queue_order(wl: Mapping[str, Any], state: ClusterState, now: datetime) -> Order | None:
    """Kueue's queue order for a pending Workload, or None when Kueue does not hold it in the queue's heap
    at all (back-off, gated, held, parked)."""
    cond = conditions(wl)
    if is_true(cond.get("QuotaReserved")) or is_true(cond.get("Finished")) or spec(wl).get("active", True) is False:
        return None
    md = m(wl.get("metadata"))
    if s(m(md.get("annotations")).get("kueue.x-k8s.io/admission-gated-by")):
        return None
    requeue_at = parse_time(m(m(wl.get("status")).get("requeueState")).get("requeueAt"))
    if requeue_at is not None and requeue_at > now:
        return None
    if cond.get("Requeued") is not None and not is_true(cond.get("Requeued")):
        return None
    qr_message = s(m(cond.get("QuotaReserved")).get("message")) or ""
    if qr_message.lower().startswith("workload namespace doesn't match"):
        return None  # Kueue parks namespace mismatches as inadmissible even under StrictFIFO
    lq = state.local_queues.get((s(md.get("namespace")) or "", s(spec(wl).get("queueName")) or ""))
    if lq is not None and (s(spec(lq).get("stopPolicy")) or "None") != "None":
        return None
    p = state.priority_of(wl)
    stamp = s(md.get("creationTimestamp")) or ""
    evicted = cond.get("Evicted")
    if is_true(evicted):  # GetQueueOrderTimestamp: some evictions requeue at the eviction time
        # (a Workload preempted InCohortReclaimWhileBorrowing keeps its creation time: the preemption-time
        # ordering applies only with the PrioritySortingWithinCohort gate off, on by default since Kueue 0.6)
        when = time_text(m(evicted).get("lastTransitionTime"))
        if when and requeued_at_back(state, evicted):
            stamp = when
    return -p, stamp, s(md.get("uid")) or ""


@dataclass
class _Heads:
    """The sorted pending Workloads of each StrictFIFO ClusterQueue asked about, for one clock value."""

    now: datetime | None = None
    by_cq: dict[str, list[tuple[Order, str, str]]] = field(default_factory=dict)
    keys: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # the Workloads of each list


STRICT_FIFO_HEADS: Derived[_Heads] = Derived("StrictFIFO queue heads", lambda _: _Heads())


def pending_in(ctx: Context, cq_name: str) -> list[tuple[Order, str, str]]:
    """The ClusterQueue's pending Workloads in Kueue's order; sorted once per ClusterQueue, index and clock."""
    heads = ctx.state.derived(STRICT_FIFO_HEADS)
    if heads.now != ctx.now:  # back-off ends with time: the order is per clock, not only per index
        heads.now, heads.by_cq, heads.keys = ctx.now, {}, {}
    entries = heads.by_cq.get(cq_name)
    if entries is None:
        entries = []
        for key in ctx.state.index.workloads_by_cq.get(cq_name, ()):
            order = queue_order(ctx.state.workloads[key], ctx.state, ctx.now)
            if order is not None:
                entries.append((order, *key))
        entries.sort()
        heads.by_cq[cq_name] = entries
        heads.keys[cq_name] = {(ns, nm) for _, ns, nm in entries}
    return entries


def _in_queue(ctx: Context, cq_name: str) -> bool:
    """`queue_order(ctx.wl) is not None`, read from the sorted list when the Workload is the state's own (it
    was ordered there already)."""
    key = (ctx.ns, ctx.name)
    if ctx.state.workloads.get(key) is ctx.wl and key in ctx.state.derived(STRICT_FIFO_HEADS).keys[cq_name]:
        return True
    return queue_order(ctx.wl, ctx.state, ctx.now) is not None


def sticky_ahead(ctx: Context) -> tuple[str, str, str | None, datetime] | None:
    """The Workload Kueue keeps at the head of this BestEffortFIFO ClusterQueue while its preemptions complete,
    when it is another one, this one waits in the queue, and the preemption has lasted `STICKY_AFTER`: Kueue
    evaluates nothing else there meanwhile. A head's coming and going marks no other Workload in the operator
    (Kueue's own baseline scenario preempts many times a minute): one diagnosed meanwhile is woken when the
    threshold passes (`ctx.after`), the others at the next resync (5 minutes); once the head is admitted, Kueue's
    writes to the Workloads behind it are their own events."""
    sticky = sticky_head(ctx.state, ctx.cq_name) if ctx.cq is not None else None
    if sticky is None or sticky[0] == (ctx.ns, ctx.name) or queue_order(ctx.wl, ctx.state, ctx.now) is None:
        return None
    key, since = sticky
    if since is None or not ctx.after(since, STICKY_AFTER):
        return None  # a preemption takes the victims' Pods' grace period: Kueue's usual seconds, not a blocker
    head = ctx.state.workloads.get(key)
    return key[0], key[1], s(m(m(head).get("metadata")).get("uid")) if head is not None else None, since


def _sticky_text(ctx: Context, hns: str, hname: str, since: datetime) -> str:
    head = ctx.state.workloads.get((hns, hname))
    theirs = ctx.state.priority_of(head) if head is not None else None
    above = (f", although this Workload's priority {ctx.priority} is above its {theirs}"
             if theirs is not None and ctx.priority > theirs else "")
    return (f"Waits behind {hns}/{hname}, which Kueue keeps at the head of BestEffortFIFO {ctx.cq_text} while the "
            f"Workloads it preempted at {when_text(since)} release their quota{above}: until {hns}/{hname} is "
            "admitted (or found not to fit, or deleted) Kueue evaluates no other Workload of this ClusterQueue "
            "(kueue#7301). If its preemption is stuck, its diagnosis names the victim holding it up: "
            f"kubectl get admissiondiagnosis {hname} -n {hns}.")


def queue_head(ctx: Context) -> tuple[str, str, str | None] | None:
    """The pending Workload ahead of this one in a StrictFIFO ClusterQueue, if it is stuck there."""
    if ctx.cq is None or s(spec(ctx.cq).get("queueingStrategy")) != "StrictFIFO":
        return None
    entries = pending_in(ctx, ctx.cq_name or "")
    if entries and fair_sharing_ordered(ctx.cq):  # only a head of its own LocalQueue is known to be ahead
        queue = s(ctx.spec.get("queueName"))
        entries = [e for e in entries if e[1] == ctx.ns and s(m(ctx.state.workloads.get((e[1], e[2])) or {}).get(
            "spec", {}).get("queueName")) == queue]
    if not entries:
        return None
    order, hns, hname = entries[0]
    if (hns, hname) == (ctx.ns, ctx.name) or not _in_queue(ctx, ctx.cq_name or ""):
        return None
    return hns, hname, order[2] or None


@rule(Phase.PENDING, pairs(Reason.NOT_YET_EVALUATED, Cause.ADMISSION_GATED, Cause.BLOCKED_BY_QUEUE_HEAD,
                           Cause.PENDING_EVALUATION))
def not_yet_evaluated(ctx: Context) -> Finding | None:
    """Also a Workload whose message still says its queue is stopped or inactive, the queue running again
    (`queue_restart.stale_queue_message`; its handler leaves it to this rule)."""
    cond = ctx.cond("QuotaReserved")
    stale = stale_queue_message(ctx) if cond is not None else None
    if cond is not None and stale is None and ctx.qr_parsed.template not in (Template.PENDING_EVALUATION,
                                                                             Template.ADMISSION_GATE_CLEARED):
        return None
    since = ctx.cond_time("QuotaReserved") or ctx.created
    if stale is not None:
        return _stale_queue(ctx, *stale, since)
    gated = s(m(m(ctx.wl.get("metadata")).get("annotations")).get("kueue.x-k8s.io/admission-gated-by"))
    if gated:
        return Finding(Reason.NOT_YET_EVALUATED, Cause.ADMISSION_GATED,
                       f"Admission is gated by {gated}; Kueue evaluates it once they remove their gate.", since=since)
    head = queue_head(ctx)
    if head is not None:
        hns, hname, huid = head
        text = (f"Waits behind {hns}/{hname} at the head of StrictFIFO {ctx.cq_text}: Kueue admits "
                "nothing after the head until the head is admitted (see its diagnosis)."
                + _head_boosted(ctx, hns, hname) + _boost_ignored(ctx) + _fits_now(ctx))
        return Finding(Reason.NOT_YET_EVALUATED, Cause.BLOCKED_BY_QUEUE_HEAD, text, since=since,
                       blocked_by=[ctx.workload_ref("QueueHead", hns, hname, huid)],
                       hints=[f"kubectl get admissiondiagnosis {hname} -n {hns}"])
    sticky = sticky_ahead(ctx)
    if sticky is not None:
        hns, hname, huid, began = sticky
        return _behind_head(ctx, _sticky_text(ctx, hns, hname, began) + _boost_ignored(ctx), since, hns, hname,
                            huid, evidence=[])
    text = (f"Queued in LocalQueue {ctx.ns}/{ctx.lq_name} since {when_text(since)}; Kueue has not evaluated it "
            "yet. Normally seconds: if it lasts, check that the Kueue controller is running.")
    return Finding(Reason.NOT_YET_EVALUATED, Cause.PENDING_EVALUATION, text, since=since,
                   evidence=[ctx.condition_evidence("QuotaReserved")] if cond else [])


def _stale_queue(ctx: Context, said: str, restarted: datetime | None, since: datetime | None) -> Finding:
    """Queued again after its queue's restart, Kueue's message still from the stop: behind a StrictFIFO head,
    or not reached yet."""
    since = restarted or since
    evidence = [ctx.condition_evidence("QuotaReserved")]
    if ctx.cond("Requeued"):
        evidence.append(ctx.condition_evidence("Requeued"))
    head = queue_head(ctx)
    if head is not None:
        hns, hname, huid = head
        text = (f"{said} It waits behind {hns}/{hname} at the head of StrictFIFO {ctx.cq_text}: Kueue evaluates "
                "nothing after the head until the head is admitted (see its diagnosis)." + _fits_now(ctx))
        return _behind_head(ctx, text, since, hns, hname, huid, evidence=evidence)
    text = (f"{said} Normally seconds after the restart; if it lasts, check that the Kueue controller is running "
            f"and that {ctx.cq_text} is not busy with Workloads ahead of it.")
    return Finding(Reason.NOT_YET_EVALUATED, Cause.PENDING_EVALUATION, text, since=since, evidence=evidence)


# Kueue's verdicts from an earlier attempt that only say "not now": under StrictFIFO they are stale once another
# Workload heads the queue, since Kueue evaluates nothing behind the head. A "never" (ExceedsMaxQuota, a flavor
# that does not match) stays true whoever heads the queue, and keeps its own verdict.
_STALE_BEHIND_HEAD = frozenset({Reason.WAITING_FOR_QUOTA, Reason.WAITING_FOR_PREEMPTION})
_NOT_NOW = frozenset({Template.NO_LONGER_FITS, Template.OVERLAPPING_PREEMPTION_TARGETS,
                      Template.OVERLAPPING_PREEMPTION_WILL_FIT})


@rule(Phase.PENDING, pairs(Reason.NOT_YET_EVALUATED, Cause.BLOCKED_BY_QUEUE_HEAD))
def behind_queue_head(ctx: Context) -> Finding | None:
    """StrictFIFO: a Workload's own "N more needed" (or pending preemption) from an earlier attempt, while
    another Workload now heads the queue. Asked just before Kueue's message is read."""
    if ctx.cond("QuotaReserved") is None or ctx.cq is None:
        return None
    p = ctx.qr_parsed
    not_now = p.template in _NOT_NOW or (p.template == Template.FLAVOR_ASSIGNMENT and (
        p.pending_preemptions or all(f.kind == FailureKind.INSUFFICIENT_UNUSED_QUOTA for f in p.failures)))
    if s(spec(ctx.cq).get("queueingStrategy")) != "StrictFIFO":
        return _behind_sticky_head(ctx) if not_now else None
    if not not_now and p.template != Template.FLAVOR_ASSIGNMENT:
        return None  # a queue, a check, an error: its own verdict stays
    head = queue_head(ctx)
    if head is None:
        return None
    if not not_now:  # mixed flavor reasons: the message's own verdict tells "not now" from "never"
        from .kueue_message import from_kueue_message

        own = from_kueue_message.check(ctx)
        if own is None or own.reason not in _STALE_BEHIND_HEAD:
            return None
    hns, hname, huid = head
    since = ctx.cond_time("QuotaReserved")
    head_wl = ctx.state.workloads.get((hns, hname))
    ahead = f" (priority {ctx.state.priority_of(head_wl)} against {ctx.priority})" if head_wl is not None else ""
    text = (f"Waits behind {hns}/{hname}, the head of StrictFIFO {ctx.cq_text}{ahead}: Kueue evaluates nothing "
            f"behind the head until it is admitted (see its diagnosis). This Workload's own message from "
            f"{when_text(since)} ({ctx.cond_message('QuotaReserved')[:200]}) is from an earlier attempt and "
            "no longer what blocks it; it is kept in the evidence." + _boost_ignored(ctx) + _fits_now(ctx))
    return _behind_head(ctx, text, since, hns, hname, huid, evidence=[ctx.condition_evidence("QuotaReserved")])


def _behind_sticky_head(ctx: Context) -> Finding | None:
    """BestEffortFIFO: an earlier attempt's "not now" of a Workload that fits the unused quota now, while another
    Workload is kept at the head for its preemptions: that head, not the quota, holds it."""
    from .stalled import fits_unused_quota  # stalled reads the queue order from here

    sticky = sticky_ahead(ctx)
    if sticky is None or not fits_unused_quota(ctx):
        return None
    hns, hname, huid, began = sticky
    since = ctx.cond_time("QuotaReserved")
    text = (_sticky_text(ctx, hns, hname, began) + f" It would fit the unused quota now; its own message from "
            f"{when_text(since)} ({ctx.cond_message('QuotaReserved')[:200]}) is from an earlier attempt and is kept "
            "in the evidence.")
    return _behind_head(ctx, text, since, hns, hname, huid, evidence=[ctx.condition_evidence("QuotaReserved")])


def _behind_head(ctx: Context, text: str, since: datetime | None, hns: str, hname: str, huid: str | None,
                 evidence: list[dict[str, Any]]) -> Finding:
    """Waiting behind the queue's head (StrictFIFO's, or a BestEffortFIFO queue's preempting one), named as the
    blocker."""
    return Finding(Reason.NOT_YET_EVALUATED, Cause.BLOCKED_BY_QUEUE_HEAD, text, since=since,
                   blocked_by=[ctx.workload_ref("QueueHead", hns, hname, huid)], evidence=evidence,
                   blocker={"kind": "QueueHead", "name": f"{hns}/{hname}", "source": "Objects"},
                   hints=[f"kubectl get admissiondiagnosis {hname} -n {hns}"])


def _head_boosted(ctx: Context, hns: str, hname: str) -> str:
    """A head that is ahead by its priority-boost annotation (the PriorityBoost gate on): a user reading both
    spec.priority values would not see why."""
    head = ctx.state.workloads.get((hns, hname))
    if head is None or not ctx.state.kueue_config.gate("PriorityBoost"):
        return ""
    boost = priority_boost(head)
    if not boost or not priority(head) <= ctx.priority < priority(head) + boost:
        return ""  # no boost, or ahead without it
    return (f" It heads the queue by its {PRIORITY_BOOST}={boost}: Kueue's PriorityBoost feature gate is "
            f"{ctx.state.kueue_config.gate_text('PriorityBoost')}, so it counts as priority "
            f"{ctx.state.priority_of(head)} against this Workload's {ctx.priority}.")


def _boost_ignored(ctx: Context) -> str:
    """A priority-boost annotation that does not count: Kueue reads it only with its alpha PriorityBoost gate on
    (utilpriority.PriorityBoost), so a boosted Workload still waits behind an older one of the same priority."""
    boost = priority_boost(ctx.wl)
    cfg = ctx.state.kueue_config
    if not boost or cfg.gate("PriorityBoost"):
        return ""
    return (f" Its {PRIORITY_BOOST}={boost} does not count: Kueue's PriorityBoost feature gate is "
            f"{cfg.gate_text('PriorityBoost')}, so Kueue orders it by spec.priority {ctx.priority} alone; the boost "
            "takes effect only once a cluster admin turns that alpha gate on (featureGates: {PriorityBoost: true} "
            "in Kueue's Configuration).")


def _fits_now(ctx: Context) -> str:
    """Behind a StrictFIFO head, a Workload that unused quota would take now (often in another flavor than the
    head waits for: kueue#8309): the policy, not the quota, holds it, and only the queue admin can change that."""
    from .stalled import fits_unused_quota  # stalled reads the queue order from here

    fits = fits_unused_quota(ctx)
    if not fits:
        return ""
    room = "; ".join(f"{quota.fmt(f.resource, f.requested)} {f.resource} requested, "
                     f"{quota.fmt(f.resource, f.nominal - f.used)} unused in flavor {f.flavor}" for f in fits)
    return (f" It would fit now ({room}): StrictFIFO holds every Workload behind the head, whatever flavor it "
            f"needs (kueue#8309). If that idle quota matters, the queue admin can set ClusterQueue {ctx.cq_name} to "
            "queueingStrategy BestEffortFIFO, or give each flavor its own ClusterQueue in one cohort.")
