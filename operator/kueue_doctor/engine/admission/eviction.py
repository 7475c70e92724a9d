"""Evictions and preemptions: a Workload being stopped, or stopped and not yet admitted again.

`last_eviction` is also rendered into every diagnosis (status.lastEviction). Neighbours: `terminal.py`
(deactivation, which is final), `kueue_message.py` (what Kueue says once it tried again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from ...kube.kueue_config import CONFIG_MAP
from ...kube.objects import (
    format_duration,
    i,
    is_true,
    lst,
    m,
    name,
    ordinal,
    parse_time,
    pod_owner_refs,
    s,
    spec,
    status,
    time_text,
    when_text,
)
from ...state import Key
from ...vocabulary import ActionBy, Cause, Reason, cause_of
from .. import messages, multikueue
from ..context import Context
from ..messages import Template
from ..owner_status import (
    SERVE_READY,
    owner_suspended,
    owner_text,
    rayservice_describe,
    rayservice_ready,
    still_stopping,
    suspend_path,
)
from ..rules import Finding, Phase, pairs, rule
from .check_states import failed_checks
from .order import queue_head, sticky_ahead
from .stalled import STALL_AFTER, requeued_since, stall

PREEMPTION_CAUSES = (Cause.IN_CLUSTER_QUEUE, Cause.IN_COHORT_RECLAMATION, Cause.IN_COHORT_FAIR_SHARING,
                     Cause.IN_COHORT_RECLAIM_WHILE_BORROWING)
# Kueue's "Deactivated" / "DeactivatedDueTo<cause>" Evicted reasons (and DeactivationTarget reasons)
DEACTIVATION_CAUSES = {
    "RequeuingLimitExceeded": Cause.REQUEUING_LIMIT_EXCEEDED,
    "MaximumExecutionTimeExceeded": Cause.MAXIMUM_EXECUTION_TIME_EXCEEDED,
    "AdmissionCheck": Cause.ADMISSION_CHECK_REJECTED,
    "EvictedOnManagerCluster": Cause.EVICTED_ON_MANAGER_CLUSTER,
}
EVICTION_CAUSES = (Cause.PODS_READY_TIMEOUT, Cause.ADMISSION_CHECK, Cause.CLUSTER_QUEUE_STOPPED,
                   Cause.LOCAL_QUEUE_STOPPED, Cause.NODE_FAILURES, Cause.FLAVOR_MIGRATION, Cause.VARIANT_EVICTED,
                   Cause.DEACTIVATED_BY_USER, Cause.REQUEUING_LIMIT_EXCEEDED, Cause.MAXIMUM_EXECUTION_TIME_EXCEEDED,
                   Cause.EVICTED_ON_MANAGER_CLUSTER)
_EVICTION_REASON = {
    Template.PREEMPTED: "Preempted", Template.PODS_READY_TIMEOUT: "PodsReadyTimeout",
    Template.ADMISSION_CHECK_EVICTION: "AdmissionCheck", Template.CLUSTER_QUEUE_STOPPED_EVICTION:
    "ClusterQueueStopped", Template.LOCAL_QUEUE_STOPPED_EVICTION: "LocalQueueStopped",
    Template.NODE_FAILURES: "NodeFailures", Template.DEACTIVATED: "Deactivated",
}


def workload_by_uid(ctx: Context, wl_uid: str | None) -> Key | None:
    found = ctx.state.index.workloads_by_uid(ctx.state).get(wl_uid or "") if wl_uid else None
    return found[-1] if found else None  # UIDs are unique; a dump with a copy names the last, as before


def _evicted_parsed(ctx: Context) -> messages.ParsedMessage:
    """The eviction message, unwrapped from Kueue's 'Previously: ...' once it re-admitted the Workload."""
    parsed = ctx.evicted_parsed
    if parsed.template == Template.PREVIOUSLY and parsed.inner is not None:
        return parsed.inner
    return parsed


def last_eviction(ctx: Context) -> dict[str, Any] | None:
    """The latest eviction, from the Evicted condition (True now, or False 'Previously: ...'). Once per
    Workload: the eviction rules read it, then the renderer writes it (status.lastEviction); nobody changes it."""
    if not ctx.conds.get("Evicted"):  # most Workloads: no memo needed
        return None
    return ctx.lazy(_last_eviction)


def _last_eviction(ctx: Context) -> dict[str, Any] | None:
    cond = ctx.cond("Evicted")
    if not cond:
        return None
    parsed = _evicted_parsed(ctx)
    reason = ctx.cond_reason("Evicted")
    if not is_true(cond):
        if reason == "QuotaReserved":  # Kueue rewrote it on re-admission: recover the old eviction
            reason = _EVICTION_REASON.get(parsed.template) or "Unknown"
        else:
            return None
    # a False Preempted is an earlier preemption's, reset when quota was reserved again ("QuotaReserved")
    underlying = ctx.cond_reason("Preempted") if ctx.true("Preempted") else None
    by = None
    if parsed.preemption is not None:
        underlying = parsed.preemption.reason or underlying
        preemptor = workload_by_uid(ctx, parsed.preemption.preemptor_uid)
        by = (f"Workload {preemptor[0]}/{preemptor[1]}" if preemptor
              else f"Workload UID {parsed.preemption.preemptor_uid}")
    if underlying is None:  # Kueue's own record (schedulingStats), when it names one cause for this reason
        recorded = evictions_for(ctx, reason)[1]
        underlying = recorded if recorded and " " not in recorded else None
    count = 0
    for ev in lst(m(ctx.status.get("schedulingStats")).get("evictions")):
        count += i(m(ev).get("count"))
    if not count:  # older Kueue, or the stats were not written: the requeues Kueue counted
        count = i(m(ctx.status.get("requeueState")).get("count"))
    out = {"reason": reason, "underlyingCause": underlying, "by": by,
           "message": (s(cond.get("message")) or "")[:1024] or None,
           "time": time_text(cond.get("lastTransitionTime")), "count": count or None}
    return {k: v for k, v in out.items() if v is not None}


def _preemptor_ref(ctx: Context) -> list[dict[str, Any]]:
    parsed = _evicted_parsed(ctx)
    if parsed.preemption is None:
        return []
    key = workload_by_uid(ctx, parsed.preemption.preemptor_uid)
    return [ctx.workload_ref("Preemptor", key[0] if key else None, key[1] if key else None,
                             parsed.preemption.preemptor_uid)]


def _reason_and_cause(ctx: Context, ev: Mapping[str, Any]) -> tuple[Reason, Cause | None]:
    """Preempted with Kueue's preemption reason as the cause; any other eviction with its Evicted reason."""
    if ctx.cond_reason("Evicted") == "Preempted":
        cause = cause_of(ev.get("underlyingCause"))
        return Reason.PREEMPTED, cause if cause in PREEMPTION_CAUSES else None
    evicted = ctx.cond_reason("Evicted")
    if evicted.startswith("Deactivated"):  # deactivated, then reactivated before Kueue requeued it
        found = DEACTIVATION_CAUSES.get(evicted.removeprefix("DeactivatedDueTo"))
        if evicted == "Deactivated" or found is not None:
            return Reason.EVICTED, Cause.ADMISSION_CHECK if found == Cause.ADMISSION_CHECK_REJECTED else (
                found or Cause.DEACTIVATED_BY_USER)
    cause = cause_of(evicted)
    return Reason.EVICTED, cause if cause in EVICTION_CAUSES else None


MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


class Reactivation(NamedTuple):
    """What reactivating a Workload deactivated for its maximum execution time gets it."""
    text: str  # what the next admission gets
    futile: bool  # the whole budget is used: Kueue deactivates it again right after admitting it
    fix: str = ""  # when futile: what the owner changes first


def max_exec_reactivation(ctx: Context) -> Reactivation | None:
    """What reactivating a Workload deactivated for its maximum execution time gets it: Kueue keeps
    status.accumulatedPastExecutionTimeSeconds across the reactivation and deactivates it again once that plus the
    new admission reaches spec.maximumExecutionTimeSeconds (workload_controller.go reconcileMaxExecutionTime), so
    with the whole budget used it is deactivated right after its next admission. None while it is
    still admitted (its last run is added when Admitted turns False) or without a limit."""
    limit = i(ctx.spec.get("maximumExecutionTimeSeconds"))
    if limit <= 0 or ctx.true("Admitted"):
        return None
    used = i(ctx.status.get("accumulatedPastExecutionTimeSeconds"))
    owner = owner_text(ctx)
    if used < limit:
        return Reactivation(
            f"once admitted it runs at most {format_duration(limit - used, precise=True)} more before Kueue "
            f"deactivates it again (spec.maximumExecutionTimeSeconds {limit} less the {used}s already counted in "
            "status.accumulatedPastExecutionTimeSeconds)", False)
    return Reactivation(
        f"it would not run: status.accumulatedPastExecutionTimeSeconds ({used}) already reaches "
        f"spec.maximumExecutionTimeSeconds ({limit}), which Kueue keeps across a reactivation, so it deactivates "
        "the Workload again right after admitting it", True,
        f"To run it again, the owner raises the label {MAX_EXEC_LABEL} on {owner} to more than {used} plus the time "
        "the run needs, or removes it (allowed while it is suspended; Kueue then updates the Workload), and makes sure "
        f"spec.active is true; or recreates {owner} (a new Workload starts from 0)")


# what follows an eviction once the quota is released (jobframework sets Requeued=True only after a preemption or
# node failures; the workload controller requeues the timeouts after a back-off; a stopped queue holds it)
_AFTER_EVICTION: dict[str, tuple[str, ActionBy]] = {
    "ClusterQueueStopped": ("it stays out of the queue until the ClusterQueue's stopPolicy is None again",
                            ActionBy.CLUSTER_ADMIN),
    "LocalQueueStopped": ("it stays out of the queue until the LocalQueue's stopPolicy is None again",
                          ActionBy.QUEUE_ADMIN),
    "PodsReadyTimeout": ("Kueue requeues it after a back-off (requeueState)", ActionBy.NOBODY),
    "AdmissionCheck": ("Kueue requeues it after the check's back-off", ActionBy.NOBODY),
}


@rule(Phase.RESERVED, [*pairs(Reason.PREEMPTED, *PREEMPTION_CAUSES, None),
                       *pairs(Reason.EVICTED, *EVICTION_CAUSES, None)])
def eviction_in_progress(ctx: Context) -> Finding | None:
    """Evicted=True while quota is still held: Kueue is stopping the Pods."""
    if not ctx.true("Evicted"):
        return None
    ev = last_eviction(ctx) or {}
    reason, cause = _reason_and_cause(ctx, ev)
    who = f" by {ev['by']}" if ev.get("by") else ""
    evicted = ctx.cond_reason("Evicted")
    after, action = _AFTER_EVICTION.get(evicted, ("it is queued again", ActionBy.NOBODY))
    if evicted.startswith("Deactivated"):
        after = "it stays out of the queue until spec.active is set back to true"
    worker = s(ctx.status.get("clusterName"))
    if worker:  # MultiKueue: the Job and its Pods run on the worker; the manager waits for the worker's copy to go
        evicted_at = ctx.cond_time("Evicted")
        text = (f"{reason}{who} at {when_text(evicted_at)} ({evicted}): its Job runs on worker cluster {worker} "
                f"(MultiKueue, status.clusterName), so Kueue must remove the worker's copy before quota in "
                f"{ctx.cq_text} is released, then {after}.")
        if evicted_at is not None and ctx.after(evicted_at, STALL_AFTER):
            action = ActionBy.CLUSTER_ADMIN
            text += (f" It has been {format_duration(ctx.now - evicted_at)}: the eviction has not reached {worker} "
                     f"(kueue#7350). The platform admin checks that {worker} is connected (kubectl get "
                     f"multikueuecluster {worker}) and what the worker shows for this Workload.")
    else:
        evicted_at = ctx.cond_time("Evicted")
        late = ctx.after(evicted_at, STALL_AFTER)
        stuck = _not_stopped(ctx) if late else None
        stopping = still_stopping(ctx, "releases the quota") if late and stuck is None else None
        if stopping is not None and evicted_at is not None:
            text = (f"{reason}{who} at {when_text(evicted_at)} ({evicted}), and "
                    f"{format_duration(ctx.now - evicted_at)} later quota in {ctx.cq_text} is still held: "
                    f"{stopping.text} Then {after}.")
            return Finding(reason, cause, text, ActionBy.CLUSTER_ADMIN, since=evicted_at,
                           evidence=[ctx.condition_evidence("Evicted"), ctx.condition_evidence("QuotaReserved"),
                                     *stopping.evidence], blocked_by=_preemptor_ref(ctx))
        if stuck is not None and evicted_at is not None:
            action = ActionBy.CLUSTER_ADMIN
            text = (f"{reason}{who} at {when_text(evicted_at)} ({evicted}), but "
                    f"{format_duration(ctx.now - evicted_at)} later Kueue has not stopped it: {stuck[0]}, so quota in "
                    f"{ctx.cq_text} stays held and it is not queued again. Kueue suspends the owner as soon as "
                    "Evicted is True and releases the quota once no Pod is active: the cluster admin reads "
                    "kueue-controller-manager's logs for this Workload and its owner (an update of the owner refused "
                    "by a webhook, the job reconciler failing) and the owner's events.")
            return Finding(reason, cause, text, action, since=evicted_at,
                           evidence=[ctx.condition_evidence("Evicted"), ctx.condition_evidence("QuotaReserved"),
                                     *stuck[1]], blocked_by=_preemptor_ref(ctx))
        text = (f"{reason}{who} at {when_text(evicted_at)} ({evicted}): Kueue is "
                f"stopping its Pods; quota in {ctx.cq_text} is released once they are gone, then {after}."
                + (" If this lasts, look for Pods stuck Terminating." if ctx.cond("Admitted") else ""))
    text, notes, hints = _out_of_sync_once(ctx, text)
    return Finding(reason, cause, text, action, since=ctx.cond_time("Evicted"),
                   evidence=[ctx.condition_evidence("Evicted"), ctx.condition_evidence("QuotaReserved")],
                   blocked_by=_preemptor_ref(ctx), notes=notes, hints=hints)


def _not_stopped(ctx: Context) -> tuple[str, list[dict[str, Any]]] | None:
    """What shows that Kueue never stopped an evicted Workload (its job reconciler suspends the owner at once,
    jobframework stopJob): the owner still unsuspended, or its Pods still running with none being deleted. None
    when the Pods are going (terminating: a slow shutdown, not Kueue's) or nothing says otherwise."""
    running = [p for p in ctx.pods if s(m(p.get("spec")).get("nodeName"))
               and s(m(p.get("status")).get("phase")) in ("Running", "Pending")
               and not m(p.get("metadata")).get("deletionTimestamp")]
    pods = f"{len(running)} of its Pods run, none being deleted" if running else ""
    owner = ctx.owner
    suspended = owner_suspended(owner) if owner is not None else None
    if owner is not None and suspended is False:
        kind, field_ = s(owner.get("kind")) or "owner", ".".join(suspend_path(owner) or ("spec", "suspend"))
        said = f"{kind} {ctx.ns}/{name(owner)} still has {field_}: false" + (f" and {pods}" if pods else "")
        return said, [ctx.object_evidence(kind, name(owner), field_, "NotSuspended", "false", ns=ctx.ns)]
    if not running:
        return None
    if suspended:
        return (f"{pods} although {s(owner.get('kind')) if owner else 'the owner'} is suspended (its controller must "
                "delete them)"), []
    return pods, []


def ignored_rejection(ctx: Context) -> Mapping[str, Any] | None:
    """The Rejected check Kueue will not act on, or None. Kueue deactivates a Workload for a rejected check only
    while it holds quota and is not being evicted (workload_controller.go: reconcileCheckBasedEviction is called
    under HasQuotaReservation and returns at once on Evicted=True, Kueue 0.19.2); a rejection that comes during an
    eviction, or while it holds no quota, stays, and the scheduler skips the Workload for good (kueue#10807).
    None also once Kueue did decide to deactivate it (DeactivationTarget)."""
    if ctx.true("DeactivationTarget") or (ctx.true("QuotaReserved") and not ctx.true("Evicted")):
        return None
    return next((c for c in failed_checks(ctx) if s(c.get("state")) == "Rejected"), None)


def ignored_rejection_text(ctx: Context, check: Mapping[str, Any]) -> str:
    """What the rejected check said, why Kueue will never act on it, and what the owner does."""
    cname = s(check.get("name")) or "?"
    ac = ctx.state.admission_checks.get(cname)
    controller = s(spec(ac).get("controllerName")) if ac else None
    at = parse_time(check.get("lastTransitionTime"))
    evicted_at = ctx.cond_time("Evicted")
    during = (f"while Kueue was evicting it (Evicted=True {ctx.cond_reason('Evicted')} since "
              f"{when_text(evicted_at)})" if ctx.true("Evicted") else "while it held no quota")
    text = (f"Check {cname}" + (f" ({controller})" if controller else "") + " rejected it"
            + (f" at {when_text(at)}" if at else "") + f" (\"{(s(check.get('message')) or 'no message')[:200]}\") "
            f"{during}. Kueue deactivates a Workload for a rejected check only while it holds quota and (up to "
            "0.19.2) is not being evicted, so it never acts on this one: it stays, skipped by Kueue's scheduler, until "
            "the owner acts (kueue#10807).")
    if ctx.true("Evicted") and ctx.true("QuotaReserved") and evicted_at is not None:
        text += (f" The eviction began {format_duration(ctx.now - evicted_at)} ago; quota in {ctx.cq_text} is held "
                 f"until {owner_text(ctx)} reports its Pods stopped" + _still_active(ctx) + ".")
    owner = owner_text(ctx)
    text += (f" Owner: fix what the check names, then recreate {owner} (or delete the Workload: its new one starts "
             f"the checks afresh); to give up, set spec.active=false or delete {owner}.")
    if ctx.true("Evicted"):
        text += " Cluster admin: Kueue with kueue#14309 (after 0.19.2) deactivates on a rejection during an eviction."
    return text


def ignored_rejection_hints(ctx: Context) -> list[str]:
    return [f"kubectl get workload {ctx.name} -n {ctx.ns} -o jsonpath='{{.status.admissionChecks}}'",
            f"kubectl patch workload {ctx.name} -n {ctx.ns} --type merge -p '{{\"spec\":{{\"active\":false}}}}'"]


def _still_active(ctx: Context) -> str:
    """" (status.active 2)": the owner's active Pods where it counts them (batch/v1 Job)."""
    active = status(ctx.owner).get("active") if ctx.owner is not None else None
    return f" (it shows status.active {active})" if isinstance(active, int) and active > 0 else ""


def _rejected_during_eviction(ctx: Context, check: Mapping[str, Any]) -> Finding:
    cname = s(check.get("name")) or "?"
    evidence = [ctx.condition_evidence("Evicted"), ctx.condition_evidence("QuotaReserved"),
                ctx.object_evidence("Workload", ctx.name, f"status.admissionChecks[{cname}]", "Rejected",
                                    s(check.get("message")), parse_time(check.get("lastTransitionTime")), ctx.ns)]
    return Finding(Reason.EVICTED, Cause.ADMISSION_CHECK, ignored_rejection_text(ctx, check),
                   ActionBy.WORKLOAD_OWNER, since=parse_time(check.get("lastTransitionTime")) or ctx.cond_time(
                       "Evicted"), evidence=evidence, hints=ignored_rejection_hints(ctx),
                   blocker={"kind": "AdmissionCheck", "name": cname, "source": "Kueue"})


@rule(Phase.RESERVED, pairs(Reason.EVICTED, Cause.ADMISSION_CHECK))
def rejected_while_evicting(ctx: Context) -> Finding | None:
    """A check Rejected while Kueue stops the Pods of an eviction: Kueue 0.19.2 ignores it, so the requeue the
    eviction rules describe never comes (asked before `requeue_loop_while_evicting`)."""
    if not ctx.true("Evicted"):
        return None
    check = ignored_rejection(ctx)
    return _rejected_during_eviction(ctx, check) if check is not None else None


@rule(Phase.PENDING, pairs(Reason.EVICTED, Cause.ADMISSION_CHECK))
def rejected_after_eviction(ctx: Context) -> Finding | None:
    """The same, once the quota is released, while the eviction is still the latest event (back-off, held, not
    tried again); once Kueue tried again its message says so (`kueue_message._failed_checks`). Asked before
    `requeue_loop`."""
    if _still_latest(ctx) is None:
        return None
    check = ignored_rejection(ctx)
    return _rejected_during_eviction(ctx, check) if check is not None else None


@dataclass(frozen=True)
class Requeue:
    """Where an evicted Workload stands in Kueue's requeue: back-off until `at`, held, or requeued."""

    at: datetime | None
    in_backoff: bool
    held: bool


def _requeue_at(ctx: Context) -> datetime | None:
    return parse_time(m(ctx.status.get("requeueState")).get("requeueAt"))


def _still_latest(ctx: Context) -> Requeue | None:
    """The eviction is still the latest event (back-off, held, or not retried yet), or None when Kueue has
    tried to admit the Workload again since (its QuotaReserved message then says why it waits)."""
    if not ctx.true("Evicted"):
        return None
    requeue_at = _requeue_at(ctx)
    in_backoff = requeue_at is not None and not ctx.after(requeue_at, timedelta(0))
    held = ctx.cond("Requeued") is not None and not ctx.true("Requeued") and not _reactivated(ctx)
    qr_msg = ctx.cond_message("QuotaReserved")
    not_retried = (not ctx.cond("QuotaReserved") or qr_msg == ctx.cond_message("Evicted")
                   or ctx.qr_parsed.template in _EVICTION_REASON
                   or ctx.qr_parsed.template == Template.PENDING_EVALUATION)
    if not (in_backoff or held or not_retried):
        return None
    return Requeue(requeue_at, in_backoff, held)


def _reactivated(ctx: Context) -> bool:
    """Requeued=False from a deactivation while spec.active is true again: no hold. Kueue queues a reactivated
    Workload at once, but its workload controller turns Requeued back to True (Reactivated) only for reason
    Deactivated, so a DeactivatedDueTo<cause> stays False for good (workload_controller.go, Kueue 0.19.2)."""
    return ctx.cond_reason("Requeued").startswith("Deactivated") and ctx.spec.get("active", True) is not False


@rule(Phase.PENDING, [*pairs(Reason.PREEMPTED, *PREEMPTION_CAUSES, Cause.REQUEUE_BACKOFF, None),
                      *pairs(Reason.EVICTED, *EVICTION_CAUSES, Cause.REQUEUE_BACKOFF, None)])
def recent_eviction(ctx: Context) -> Finding | None:
    """Preempted/Evicted while the eviction is the latest event: back-off, held, or not retried yet."""
    requeue = _still_latest(ctx)
    if requeue is None:
        return None
    requeue_at, in_backoff, held = requeue.at, requeue.in_backoff, requeue.held
    if not in_backoff and not held and requeued_since(ctx) is not None and stall(ctx) is not None:
        return None  # queued again long ago, it fits, and Kueue has not tried it since: `stalled.kueue_stalled`
    ev = last_eviction(ctx) or {}
    evicted_reason = ctx.cond_reason("Evicted")
    reason, cause = _reason_and_cause(ctx, ev)
    who = f" by {ev['by']}" if ev.get("by") else ""
    text = f"{reason}{who} at {when_text(ctx.cond_time('Evicted'))} ({evicted_reason})"
    action = ActionBy.NOBODY
    if in_backoff:
        cause = Cause.REQUEUE_BACKOFF
        # requeueState.count counts PodsReadyTimeout requeues only (an admission check's retry sets the time
        # without counting it): the evictions of this reason are read from schedulingStats
        count = evictions_for(ctx, evicted_reason)[0] or i(m(ctx.status.get('requeueState')).get('count'))
        text += (f"; {requeue_budget(ctx, requeue_at)}" if evicted_reason == "PodsReadyTimeout" else
                 f"; Kueue requeues it at {when_text(requeue_at)} (back-off after {count} eviction(s) for this "
                 "reason)")
    elif ctx.true("WaitingForReplacementPods"):  # a Pod group: not admissible until all its Pods exist again
        text += (f"; Kueue does not requeue it until every Pod of the group exists again (WaitingForReplacementPods "
                 f"since {when_text(ctx.cond_time('WaitingForReplacementPods'))}): whoever created the Pods must "
                 "create the missing ones, or delete the group's Pods to give it up")
        action = ActionBy.WORKLOAD_OWNER
    elif held and len(pod_owner_refs(ctx.wl) or ()) == 1 and (  # one plain Pod's own Workload
            ctx.cond_reason("Requeued") in ("Preempted", "NodeFailures")):
        # SkipReassignmentForPodOwnedWorkloads (on by default in Kueue 0.19): a single Pod's Workload dies with it
        text += ("; Kueue deleted its Pod and does not requeue this Workload (a Pod's Workload ends with the Pod): "
                 "the controller that made the Pod creates a new one, which gets a new Workload")
    elif held and evicted_reason == "AdmissionCheck":
        more, stuck = _held_for_checks(ctx)
        text += more
        action = ActionBy.CLUSTER_ADMIN if stuck else action
    elif held and evicted_reason == "PodsReadyTimeout" and not _backoff_ended_long_ago(ctx, requeue_at):
        text += (f"; its back-off ended at {when_text(requeue_at or ctx.cond_time('Requeued'))}: Kueue turns Requeued "
                 "to True (BackoffFinished) and queues it again within seconds")
    elif held and evicted_reason == "PodsReadyTimeout" and (ended := _backoff_ended_long_ago(ctx, requeue_at)):
        text += (f"; its back-off ended at {when_text(ended)}"
                 + (" (requeueState.requeueAt)" if requeue_at is not None else "")
                 + f", {format_duration(ctx.now - ended)} ago, yet Requeued is still False (PodsReadyTimeout): "
                 "Kueue's workload controller turns it True (BackoffFinished) and queues the Workload again within "
                 "seconds of the back-off's end, so it has not reconciled this Workload since. The cluster admin "
                 "checks that kueue-controller-manager runs and holds its leader lease, and reads its logs for this "
                 f"Workload (`kubectl -n kueue-system logs deploy/kueue-controller-manager | grep {ctx.name}`)")
        action = ActionBy.CLUSTER_ADMIN
    elif held:
        text += f"; held out of the queue ({ctx.cond_reason('Requeued')}) until that is resolved"
        if evicted_reason in ("ClusterQueueStopped", "LocalQueueStopped"):
            action = ActionBy.CLUSTER_ADMIN if evicted_reason == "ClusterQueueStopped" else ActionBy.QUEUE_ADMIN
    elif cause == Cause.MAXIMUM_EXECUTION_TIME_EXCEEDED and (budget := max_exec_reactivation(ctx)) is not None:
        when = (f" at {when_text(ctx.cond_time('Requeued'))}" if ctx.cond_reason("Requeued") == "Reactivated"
                else " (spec.active is true again)")
        text += (f"; reactivated{when}, but {budget.text}. {budget.fix}" if budget.futile else
                 f"; reactivated, Kueue has not tried to admit it again yet, and {budget.text}")
        action = ActionBy.WORKLOAD_OWNER if budget.futile else action
    elif ctx.true("Requeued") and ctx.cond_reason("Requeued") == "Reactivated":  # a user's spec.active=false undone
        text += (f"; reactivated at {when_text(ctx.cond_time('Requeued'))} (spec.active is true again, Requeued=True "
                 "Reactivated), Kueue has not tried to admit it again yet")
    elif (head := _requeued_behind(ctx)) is not None:
        text += head
    else:
        text += "; requeued, Kueue has not tried to admit it again yet"
    if evicted_reason == "PodsReadyTimeout" and (serve := rayservice_ready(ctx)) is not None:
        text += (f". Not ready in time: {SERVE_READY}; {serve}{_ray_cluster_was_ready(ctx)}. Before it runs "
                 f"again, find why its Serve applications do not serve ({rayservice_describe(ctx)}), or raise "
                 "waitForPodsReady.timeout if they need longer to deploy")
        action = ActionBy.WORKLOAD_OWNER if action is ActionBy.NOBODY and not in_backoff else action
    elif evicted_reason == "PodsReadyTimeout":
        text += ". Its Pods did not all become ready in time: check images, node capacity and the flavor's " \
                "nodeLabels before it runs again"
        action = ActionBy.WORKLOAD_OWNER if action is ActionBy.NOBODY and not in_backoff else action
    text += "."
    text, notes, hints = _out_of_sync_once(ctx, text)
    ev_list = [ctx.condition_evidence("Evicted")]
    if ctx.cond("Requeued"):
        ev_list.append(ctx.condition_evidence("Requeued"))
    return Finding(reason, cause, text, action, since=ctx.cond_time("Evicted"), evidence=ev_list,
                   blocked_by=_preemptor_ref(ctx), notes=notes, hints=hints)


def _requeued_behind(ctx: Context) -> str | None:
    """Queued again behind the head of its StrictFIFO ClusterQueue (or the Workload Kueue keeps at the head of a
    BestEffortFIFO one for its preemptions): why Kueue has not tried it yet, the head named; None otherwise."""
    head = queue_head(ctx)
    queued = ctx.cond_time("Requeued") if ctx.true("Requeued") else None
    at = f" at {when_text(queued)} (Requeued=True {ctx.cond_reason('Requeued')})" if queued is not None else ""
    if head is not None:
        return (f"; queued again{at}, it waits behind {head[0]}/{head[1]} at the head of StrictFIFO {ctx.cq_text}: "
                "Kueue evaluates nothing behind the head until the head is admitted (see its diagnosis: kubectl get "
                f"admissiondiagnosis {head[1]} -n {head[0]})")
    sticky = sticky_ahead(ctx)
    if sticky is not None:
        return (f"; queued again{at}, it waits behind {sticky[0]}/{sticky[1]}, which Kueue keeps at the head of "
                f"BestEffortFIFO {ctx.cq_text} while the Workloads it preempted at {when_text(sticky[3])} release "
                "their quota (kueue#7301)")
    return None


def _backoff_ended_long_ago(ctx: Context, requeue_at: datetime | None) -> datetime | None:
    """When the back-off of a PodsReadyTimeout eviction ended, if that was more than STALL_AFTER ago while Requeued
    is still False: Kueue's workload controller clears requeueAt, queues the Workload and sets Requeued=True
    (BackoffFinished) within seconds of requeueAt, at once without one (workload_controller.go Reconcile, Kueue
    0.19.2), so a hold that outlasts it is a controller that no longer reconciles the Workload. None otherwise."""
    ended = requeue_at or ctx.cond_time("Requeued")
    return ended if ended is not None and ctx.after(ended, STALL_AFTER) else None


def _ray_cluster_was_ready(ctx: Context) -> str:
    """", though its RayCluster x had all its Pods ready at T" (KubeRay's status.stateTransitionTimes.ready, which
    stays after the eviction suspended the cluster and its Pods are gone), or ""."""
    owner = ctx.owner
    if owner is None:
        return ""
    for cluster in ctx.state.descendants(owner, depth=1):
        ready = parse_time(m(status(cluster).get("stateTransitionTimes")).get("ready"))
        if s(cluster.get("kind")) == "RayCluster" and ready is not None:
            return f", though RayCluster {name(cluster)} had all its Pods ready at {when_text(ready)}"
    return ""


def _out_of_sync_once(ctx: Context, text: str) -> tuple[str, tuple[str, ...], list[str]]:
    """An AdmissionCheck eviction because a MultiKueue worker found the Job out of sync (the first; from the second
    on it is `out_of_sync_loop`): what that means, after `text`, with its notes and hints."""
    if ctx.cond_reason("Evicted") != "AdmissionCheck":
        return text, (), []
    found = multikueue.out_of_sync(ctx)
    if found is None:
        return text, (), []
    return (f"{text} {multikueue.out_of_sync_once(ctx, found)}", multikueue.OUT_OF_SYNC_NOTES,
            multikueue.out_of_sync_hints(ctx, found))


def _held_for_checks(ctx: Context) -> tuple[str, bool]:
    """Evicted for an admission check and held out of the queue: until its controller resets the check in Retry.
    Held with every check Pending again, for longer than Kueue takes, it is stuck (kueue#3543). (text, stuck)"""
    failing = [f"{s(c.get('name')) or '?'} ({s(c.get('state'))}: \"{(s(c.get('message')) or 'no message')[:200]}\")"
               for c in failed_checks(ctx)]
    if failing or not lst(ctx.status.get("admissionChecks")):
        return (f"; held out of the queue until the controller of check {', '.join(failing) or '?'} resets it to "
                "Pending (Kueue then requeues it)", False)
    held_since = ctx.cond_time("Requeued") or ctx.cond_time("Evicted")
    if held_since is None or not ctx.after(held_since, STALL_AFTER):
        return "; held out of the queue while Kueue resets its admission checks", False
    held_for = ctx.now - held_since
    return (f"; held out of the queue for {format_duration(held_for)} although its admission checks are Pending "
            "again: Kueue no longer requeues it (kueue#3543, seen when a check's controller sets Retry while the "
            "Workload is evicted). The cluster admin fixes that controller; deleting the Workload (Kueue makes a new "
            "one for its owner) gets it queued again", True)


REQUEUE_LOOP_AFTER = 3  # evictions for the same reason: no longer bad luck
REQUEUE_STATE_REASONS = ("PodsReadyTimeout", "AdmissionCheck")  # the evictions requeueState.count counts
# what each repeated eviction says, and what to fix; the platform's when the nodes are at fault
_LOOPS: dict[str, tuple[str, str]] = {
    "PodsReadyTimeout": ("its Pods never all became Ready within waitForPodsReady.timeout (Kueue's default 30m)",
                         "find why the Pods do not start: the Job's events and, once it is admitted again, its Pods "
                         "(`kubectl describe pod`: image pull errors, Unschedulable for lack of node capacity, "
                         "crash loops), and the flavor's nodeLabels against real nodes"),
    "Preempted": ("other Workloads (higher priority, or reclaiming lent quota) took its quota each time",
                  "raise its priority (label kueue.x-k8s.io/priority-class), keep it within its ClusterQueue's "
                  "nominal quota instead of borrowed quota, or ask the queue admin for more quota"),
    "AdmissionCheck": ("an admission check went to Retry each time its quota was reserved (for a ProvisioningRequest: "
                       "the capacity was not provisioned, or the booking expired before it was admitted; for "
                       "MultiKueue: the Workload was evicted on its worker cluster)",
                       "read each check's message in the eviction message and status.admissionChecks. A "
                       "ProvisioningRequest check retries up to its ProvisioningRequestConfig's "
                       "retryStrategy.backoffLimitCount and then deactivates the Workload; Kueue deletes each "
                       "attempt's ProvisioningRequest on eviction, so what remains is the autoscaler's events "
                       "(`kubectl get events -n {ns} --field-selector involvedObject.kind=ProvisioningRequest`). "
                       "A MultiKueue check: look at the Workload on the worker cluster its message names"),
    "NodeFailures": ("nodes of its topology assignment failed each time and no replacement was found",
                     "find the failing nodes (`kubectl get nodes`, their conditions and the TAS Topology) and "
                     "repair or cordon them"),
}


def evictions_for(ctx: Context, reason: str) -> tuple[int, str | None]:
    """How often Kueue evicted the Workload for `reason`: its schedulingStats entries summed (one per
    underlyingCause: Kueue's requeueState and backoffLimitCount count every one of them), and the underlyingCause,
    or "WaitForStart 2, WaitForRecovery 2" when there were several. Without scheduling stats (older Kueue),
    requeueState.count where Kueue counts this reason."""
    found = [(i(m(ev).get("count")), s(m(ev).get("underlyingCause")))
             for ev in lst(m(ctx.status.get("schedulingStats")).get("evictions")) if m(ev).get("reason") == reason]
    found = [(count, cause) for count, cause in found if count > 0]
    if not found:
        stats = lst(m(ctx.status.get("schedulingStats")).get("evictions"))
        return (i(m(ctx.status.get("requeueState")).get("count")) if not stats and reason in REQUEUE_STATE_REASONS
                else 0), None
    total = sum(count for count, _ in found)
    if len(found) == 1:
        return total, found[0][1]
    found.sort(key=lambda f: (-f[0], f[1] or ""))
    return total, ", ".join(f"{cause or 'no underlying cause'} {count}" for count, cause in found)


def evictions_total(ctx: Context, reason: str) -> int:
    """Every eviction for `reason` in status.schedulingStats, all underlying causes summed (what survives a
    deactivation or an eviction's reset of requeueState and the checks' retryCount)."""
    return sum(i(m(e).get("count")) for e in lst(m(ctx.status.get("schedulingStats")).get("evictions"))
               if m(e).get("reason") == reason)


def requeue_budget(ctx: Context, requeue_at: datetime | None) -> str:
    """Where a Workload evicted for PodsReadyTimeout stands against waitForPodsReady.requeuingStrategy, read from
    Kueue's Configuration in the input: "requeued 3 of 5 times, next try at T (back-off 240s); ...". Kueue
    compares requeueState.count + 1 with backoffLimitCount at each timeout (workload_controller.go
    triggerDeactivation): at count == limit the next timeout deactivates it (kueue#15255)."""
    cfg = ctx.state.kueue_config
    count = i(m(ctx.status.get("requeueState")).get("count")) or evictions_for(ctx, "PodsReadyTimeout")[0]
    ahead = requeue_at is not None and not ctx.after(requeue_at, timedelta(0))
    at = f", next try at {when_text(requeue_at)}" if ahead else ""
    if not cfg.known:  # short: it follows the fix, which must stay within the clip
        lacks = cfg.problem or f"ConfigMap {cfg.namespace}/{CONFIG_MAP} not in the input"
        return f"requeued {count} time(s){at}; backoffLimitCount unknown ({lacks})"
    backoff = f" (back-off {cfg.requeue_backoff_seconds(count)}s)" if ahead else ""
    cap = f"{cfg.backoff_max_seconds}s" if cfg.backoff_max_seconds > 0 else "0s, no cap"
    knobs = (f"base {cfg.backoff_base_seconds}s, max {cap}: waitForPodsReady.requeuingStrategy "
             f"in {cfg.source}")
    limit = cfg.requeue_limit
    if limit is None:
        return f"requeued {count} time(s){at}{backoff}; backoffLimitCount unset ({knobs}): it requeues forever"
    nth = limit - count + 1
    then = "the next PodsReady timeout" if nth <= 1 else f"the {ordinal(nth)} PodsReady timeout from now"
    return f"requeued {count} of {limit} times{at}{backoff}; {then} deactivates it (backoffLimitCount {limit}, {knobs})"


def pods_ready_timeout_text(ctx: Context) -> str:
    """waitForPodsReady.timeout as Kueue's Configuration in the input sets it, else Kueue's default."""
    cfg = ctx.state.kueue_config
    if cfg.known and cfg.pods_ready_timeout:
        return f"waitForPodsReady.timeout ({format_duration(cfg.pods_ready_timeout, precise=True)})"
    return "waitForPodsReady.timeout (Kueue's default 30m)"


@rule(Phase.RESERVED, [(Reason.EVICTED, Cause.REQUEUE_LOOP)])
def out_of_sync_loop_reserved(ctx: Context) -> Finding | None:
    """A MultiKueue worker found the Job out of sync again (`multikueue.out_of_sync_loop`), seen while Kueue evicts
    the Workload or once it holds quota again and MultiKueue re-dispatches it (asked before the eviction and the
    admission check rules)."""
    return multikueue.out_of_sync_loop(ctx)


@rule(Phase.PENDING, [(Reason.EVICTED, Cause.REQUEUE_LOOP)])
def out_of_sync_loop(ctx: Context) -> Finding | None:
    """The same loop while the eviction is still the latest event (back-off, or queued again); asked before
    `requeue_loop`, which waits for three evictions."""
    return multikueue.out_of_sync_loop(ctx) if _still_latest(ctx) is not None else None


@rule(Phase.PENDING, [(Reason.EVICTED, Cause.REQUEUE_LOOP), (Reason.PREEMPTED, Cause.REQUEUE_LOOP)])
def requeue_loop(ctx: Context) -> Finding | None:
    """Evicted again and again for the same reason, the eviction still the latest event (asked before
    `recent_eviction`). A deactivation is final (or undone by the user), never a loop."""
    requeue = _still_latest(ctx)
    return _loop(ctx, requeue) if requeue is not None else None


@rule(Phase.RESERVED, [(Reason.EVICTED, Cause.REQUEUE_LOOP), (Reason.PREEMPTED, Cause.REQUEUE_LOOP)])
def requeue_loop_while_evicting(ctx: Context) -> Finding | None:
    """The same loop caught while Kueue stops the Pods of the latest eviction (asked before
    `eviction_in_progress`): the real cluster shows count 3 at exactly that moment."""
    if not ctx.true("Evicted"):
        return None
    return _loop(ctx, None)


def _loop(ctx: Context, requeue: Requeue | None) -> Finding | None:
    """`requeue` None: the eviction is still in progress (the quota not yet released)."""
    evicted = ctx.cond_reason("Evicted")
    if not evicted or evicted.startswith("Deactivated"):
        return None
    count, underlying = evictions_for(ctx, evicted)
    if count < REQUEUE_LOOP_AFTER:
        return None
    what, fix = _LOOPS.get(evicted, (f"Kueue's eviction reason each time was {evicted}",
                                     "read the eviction message and fix what it names"))
    serve = rayservice_ready(ctx, short=True) if evicted == "PodsReadyTimeout" else None
    if serve is not None:
        what = (f"KubeRay never called the RayService Ready (its PodsReady) within waitForPodsReady.timeout (Kueue's "
                f"default 30m): {serve}{_ray_cluster_was_ready(ctx)}")
        fix = (f"find why its Serve applications do not serve ({rayservice_describe(ctx)}), or raise "
               "waitForPodsReady.timeout if they need longer to deploy")
    fix = fix.replace("{ns}", ctx.ns)
    if evicted == "PodsReadyTimeout":
        what = what.replace("waitForPodsReady.timeout (Kueue's default 30m)", pods_ready_timeout_text(ctx))
    if evicted == "PodsReadyTimeout" and underlying == "WaitForRecovery":
        what = "a Pod failed and was not replaced and Ready within waitForPodsReady.recoveryTimeout"
    elif evicted == "PodsReadyTimeout" and underlying and "WaitForRecovery" in underlying:
        what += ", or a Pod failed and was not replaced and Ready within waitForPodsReady.recoveryTimeout"
    last = (ctx.cond_message("Evicted") or "")[:300]
    text = (f"Evicted {count} times for {evicted}" + (f" ({underlying})" if underlying else "") + f": {what}. "
            f"Last eviction at {when_text(ctx.cond_time('Evicted'))}" + (f" ({last})" if last else "") + ". ")
    if requeue is None:
        text += "Kueue is stopping its Pods to requeue it"
    elif requeue.in_backoff and evicted == "PodsReadyTimeout":
        text += "It is in back-off"
    elif requeue.in_backoff:
        text += f"Kueue requeues it at {when_text(requeue.at)} (requeueState.requeueAt)"
    elif requeue.held:
        text += f"It is held out of the queue ({ctx.cond_reason('Requeued')})"
    else:
        text += "It is queued again"
    text += f", and it will most likely be evicted the same way again: requeuing alone does not help. To fix: {fix}."
    if evicted == "PodsReadyTimeout":  # after the fix: the message is clipped at 1024 characters
        budget = requeue_budget(ctx, requeue.at if requeue is not None else _requeue_at(ctx))
        text += f" {budget[0].upper()}{budget[1:]}."
    action = ActionBy.CLUSTER_ADMIN if evicted == "NodeFailures" else None
    evidence = [ctx.condition_evidence("Evicted"),
                ctx.object_evidence("Workload", ctx.name, "status.schedulingStats.evictions", evicted,
                                    f"count {count}" + (f", underlyingCause {underlying}" if underlying else ""),
                                    ns=ctx.ns)]
    if ctx.cond("Requeued"):
        evidence.append(ctx.condition_evidence("Requeued"))
    reason = Reason.PREEMPTED if evicted == "Preempted" else Reason.EVICTED
    return Finding(reason, Cause.REQUEUE_LOOP, text, action, since=ctx.cond_time("Evicted"), evidence=evidence,
                   blocked_by=_preemptor_ref(ctx))
