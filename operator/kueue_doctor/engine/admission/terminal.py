"""Terminal states: Finished, or deactivated (spec.active=false). Asked before anything else.

Neighbours: `eviction.py` (evictions that are not final), `diagnose.phase_of` (which sends a Workload here).
"""

from __future__ import annotations

import re
from datetime import timedelta

from ...kube.objects import conditions, format_duration, i, m, name, ordinal, parse_time, s, spec, when_text
from ...vocabulary import CAUSES, ActionBy, Cause, Reason, cause_of
from .. import multikueue
from ..context import Context
from ..owner_status import aw_failure, is_appwrapper, owner_stopped, owner_text, pods_command
from ..pods import FailedPod, failed_pods, failed_pods_text, memory_limits
from ..rules import Finding, Phase, pairs, rule
from .checks import controller_of, is_provisioning, rejected_provisioning_detail
from .eviction import DEACTIVATION_CAUSES, evictions_total, max_exec_reactivation
from .stalled import STALL_AFTER

FINISHED_CAUSES = (Cause.SUCCEEDED, Cause.FAILED, Cause.OWNER_NOT_FOUND, Cause.OUT_OF_SYNC, Cause.FAILED_TO_START,
                   Cause.WORKLOAD_SLICE_REPLACED)


@rule(Phase.TERMINAL, pairs(Reason.FINISHED, *FINISHED_CAUSES, None))
def finished(ctx: Context) -> Finding | None:
    """Finished, with who acts by the cause's default: a failure (its Pods failed, or the owner's own controller
    failed it) is its owner's to fix and resubmit; the others need nobody."""
    if not ctx.true("Finished"):
        return None
    reason = ctx.cond_reason("Finished") or "Succeeded"
    cause = cause_of(reason)  # a reason newer Kueue writes stays in the message, with no cause
    msg = ctx.cond_message("Finished")
    text = f"Finished ({reason}) at {when_text(ctx.cond_time('Finished'))}"
    text += f": {msg}" if msg and msg not in ("Job finished successfully",) else "."
    group = _POD_GROUP_DONE.match(msg) if reason == "Succeeded" else None
    if group is not None and int(group[1]) < int(group[2]):
        cause = Cause.FAILED
        text += (f" Not a success: only {group[1]} of {group[2]} Pods succeeded. Kueue writes Succeeded for every "
                 "Pod group it finishes (one marked kueue.x-k8s.io/retriable-in-group=false ends at its first "
                 "failure).")
    failure = aw_failure(ctx.owner) if reason == "Failed" else ""  # Kueue's text for a failed AppWrapper is fixed
    text += ("." if failure and not text.endswith(".") else "") + failure
    why, notes, hints = _why_it_failed(ctx, told=bool(failure)) if cause == Cause.FAILED else ("", (), [])
    text += ("" if not why or text.endswith(".") else ".") + why
    retention = _finished_retention(ctx)
    if retention:
        text += ("" if text.endswith(".") else ".") + retention
    evidence = [ctx.condition_evidence("Finished")]
    if reason == "Failed" and ctx.owner is not None and is_appwrapper(ctx.owner):
        unhealthy = conditions(ctx.owner).get("Unhealthy") or {}
        evidence.append(ctx.object_evidence("AppWrapper", name(ctx.owner), "condition/Unhealthy",
                                            s(unhealthy.get("reason")), s(unhealthy.get("message")),
                                            parse_time(unhealthy.get("lastTransitionTime")), ns=ctx.ns))
    known = cause if cause in FINISHED_CAUSES else None
    return Finding(Reason.FINISHED, known, text, CAUSES[known].action if known is not None else ActionBy.NOBODY,
                   since=ctx.cond_time("Finished"), evidence=evidence, notes=notes, hints=hints)


def _why_it_failed(ctx: Context, told: bool) -> tuple[str, tuple[str, ...], list[str]]:
    """" 2 Pods failed: a (OOMKilled, exit code 137) at T, b (...). <what the first failure asks for>", the notes
    the message may drop and the hints; where to look when the input has no failed Pod (unless the owner's own
    status already `told` why, a failed AppWrapper's)."""
    failed = failed_pods(ctx.pods)
    owner = f"The owner of {owner_text(ctx)}" if ctx.owner_ref is not None else "Its owner"
    if not failed:
        if told:
            return "", (), []
        text = (f" Its Pods are not in the input: list them ({pods_command(ctx)}) and read a failed one's kubectl "
                f"describe pod and kubectl logs. {owner} fixes the cause and resubmits it.")
        return text, (), [pods_command(ctx)]
    first = failed[0]
    describe = f"kubectl describe pod {first.name} -n {ctx.ns}"
    logs = f" Its output up to the failure: {first.logs_command(ctx.ns)}." if first.container else ""
    fix = _FIX.get(first.reason, "fixes the cause")
    text = f" {failed_pods_text(failed)}. {_failure_advice(ctx, first, describe)} {owner} {fix} and resubmits it.{logs}"
    return text, (logs,), ([first.logs_command(ctx.ns)] if first.container else []) + [describe]


def _failure_advice(ctx: Context, first: FailedPod, describe: str) -> str:
    """What the earliest failure means, by how it ended."""
    if first.reason == "OOMKilled":
        limits = memory_limits(next((p for p in ctx.pods if name(p) == first.name), None))
        return f"OOMKilled: a container used more memory than its limit{limits} and was killed."
    if first.reason == "DeadlineExceeded":
        return f"DeadlineExceeded: {first.name} ran longer than its activeDeadlineSeconds."
    if first.reason == "Evicted":
        said = f" ({first.message[:200]})" if first.message else ""
        return (f"Evicted: the kubelet evicted {first.name}{said}: its node ran short, and Pods using more than they "
                "request go first.")
    if first.exit_code is not None:
        return f"{first.reason} (exit code {first.exit_code}): {_SIGNALS.get(first.exit_code, _PROGRAM_FAILED)}."
    return f"{first.reason}{f': {first.message[:200]}' if first.message else ''} ({describe} says more)."


# what the owner changes, by the earliest failure's reason
_FIX = {"OOMKilled": "gives the container more memory (its memory limit, and a request to match) or lowers the "
                     "program's memory use,",
        "DeadlineExceeded": "raises activeDeadlineSeconds or makes the work fit in it",
        "Evicted": "raises the Pods' requests to what they use"}
# exit codes of a container killed by a signal (128 + the signal), not ended by the program itself
_SIGNALS = {137: "killed by SIGKILL (a failed liveness probe, or the node), not by the program's own exit",
            143: "stopped by SIGTERM (a deletion or a failed liveness probe), not by the program's own exit"}
_PROGRAM_FAILED = "the program exited with an error"


_POD_GROUP_DONE = re.compile(r"^Pods succeeded: (\d+)/(\d+)\.")  # pod_controller.go Finished(), success always true


def _queues_stopped(ctx: Context) -> str:
    """What would hold it right after reactivation: a stopped LocalQueue or ClusterQueue (an owner who reactivates
    would otherwise be stuck again with no word why)."""
    stopped = [f"{kind} {label} is stopped (stopPolicy {policy})" for kind, label, policy in (
        ("LocalQueue", f"{ctx.ns}/{ctx.lq_name}", s(spec(ctx.lq).get("stopPolicy")) if ctx.lq else None),
        ("ClusterQueue", ctx.cq_name, s(spec(ctx.cq).get("stopPolicy")) if ctx.cq else None))
        if policy and policy != "None"]
    if not stopped or ctx.true("QuotaReserved"):
        return ""
    return (f" Reactivated, it would still wait: {' and '.join(stopped)}; nothing in it is admitted until its admin "
            "sets stopPolicy to None.")


def _max_exec_reached(ctx: Context) -> str:
    """Why Kueue deactivated it for its maximum execution time. Removing the owner's label afterwards removes
    spec.maximumExecutionTimeSeconds too (jobframework updates the Workload to match the owner)."""
    limit = i(ctx.spec.get("maximumExecutionTimeSeconds"))
    if limit <= 0:
        return ("Kueue deactivated it: its admitted time, summed over its admissions, reached its maximum execution "
                "time (the limit has since been removed from the Workload: reactivating lets it run)")
    return ("Kueue deactivated it: its admitted time, summed over its admissions, reached "
            f"spec.maximumExecutionTimeSeconds={limit}")


@rule(Phase.TERMINAL, pairs(Reason.DEACTIVATED, Cause.DEACTIVATED_BY_USER, *DEACTIVATION_CAUSES.values()))
def deactivated(ctx: Context) -> Finding | None:
    if ctx.spec.get("active", True) is not False:
        return None
    ev_reason = ctx.cond_reason("Evicted") if ctx.true("Evicted") else ""
    cause = Cause.DEACTIVATED_BY_USER
    for known, known_cause in DEACTIVATION_CAUSES.items():
        # Kueue's own deactivation evicts with DeactivatedDueTo<cause> (workload_controller.go); a Workload evicted
        # for another reason first (an AdmissionCheck in Retry, a PodsReady timeout) keeps that reason when its
        # owner sets spec.active=false: Kueue evicts it no second time
        if ev_reason == f"DeactivatedDueTo{known}" or ctx.cond_reason("DeactivationTarget") == known:
            cause = known_cause
    since = ctx.cond_time("Evicted") if ctx.true("Evicted") else ctx.cond_time("QuotaReserved")
    why = {
        Cause.DEACTIVATED_BY_USER: "spec.active is false" + _after_other_eviction(ctx, ev_reason),
        Cause.REQUEUING_LIMIT_EXCEEDED: _requeue_limit(ctx),
        Cause.MAXIMUM_EXECUTION_TIME_EXCEEDED: _max_exec_reached(ctx),
        Cause.ADMISSION_CHECK_REJECTED: "an admission check rejected it",
        Cause.EVICTED_ON_MANAGER_CLUSTER: "it was evicted on the MultiKueue manager cluster",
    }[cause]
    budget = max_exec_reactivation(ctx) if cause == Cause.MAXIMUM_EXECUTION_TIME_EXCEEDED else None
    if budget is not None and budget.futile:  # the patch alone would not do: the fix first
        text = f"Deactivated: {why}. {budget.fix}. Reactivated as it is, {budget.text}."
    else:
        text = (f"Deactivated: {why}; Kueue will not admit it until spec.active is set back to true (kubectl patch "
                f"workload {ctx.name} -n {ctx.ns} --type merge -p '{{\"spec\":{{\"active\":true}}}}') or "
                f"{owner_text(ctx)} is recreated" + (f"; {budget.text}." if budget is not None else "."))
    if cause == Cause.ADMISSION_CHECK_REJECTED:
        text += rejected_provisioning_detail(ctx) + multikueue.rejected_detail(ctx) + _other_checks_said(ctx)
    after = _after_reactivation(ctx) if cause == Cause.REQUEUING_LIMIT_EXCEEDED else ""
    text += after
    text += _queues_stopped(ctx) + _deactivated_retention(ctx)
    action = ActionBy.WORKLOAD_OWNER
    evicted_at = ctx.cond_time("Evicted") if ctx.true("Evicted") else None
    notes: tuple[str, ...] = (after,)
    stopped = owner_stopped(ctx) if ctx.true("QuotaReserved") and evicted_at is not None else None
    if stopped is not None and evicted_at is not None and ctx.after(evicted_at, STALL_AFTER):
        # the owner is stopped as Kueue reads it, so Kueue should have released the quota at once
        # (jobframework reconciler.go "handle eviction": !job.IsActive() -> UnsetQuotaReservation): Kueue did not act
        action = ActionBy.CLUSTER_ADMIN
        logs = f" (`kubectl -n kueue-system logs deploy/kueue-controller-manager | grep {ctx.name}`)"
        text += (f" It still holds its quota in {ctx.cq_text}, although {stopped}: Kueue releases it once the owner "
                 f"is inactive, and {format_duration(ctx.now - evicted_at)} after the eviction it has not "
                 f"(kueue#6035). The cluster admin reads Kueue's logs for this Workload{logs}; deleting the Workload "
                 "releases the quota.")
        notes = (after, logs)
    elif ctx.true("QuotaReserved") and evicted_at is not None:
        # Kueue releases the quota once the owner reports its Pods stopped; an owner that never does keeps it
        held = ctx.now - evicted_at
        text += (f" It still holds its quota in {ctx.cq_text}: Kueue releases it once the owner's Pods are gone and "
                 "the owner reports stopped")
        if ctx.after(evicted_at, STALL_AFTER):
            action = ActionBy.CLUSTER_ADMIN
            text += (f", and {format_duration(held)} after the eviction it has not (an owner that never reports "
                     "stopped: kueue#6035, #15380). The cluster admin looks at the owner's status and Pods; deleting "
                     "the Workload releases the quota.")
        else:
            text += "."
    ev = [ctx.condition_evidence(c) for c in ("Evicted", "DeactivationTarget", "QuotaReserved") if ctx.cond(c)]
    return Finding(Reason.DEACTIVATED, cause, text, action, since=since, evidence=ev, notes=notes)



def _after_other_eviction(ctx: Context, ev_reason: str) -> str:
    """" (set after Kueue evicted it at T for AdmissionCheck: ...)": a Workload Kueue evicted for another reason
    before someone set spec.active=false keeps that eviction (Kueue evicts an evicted Workload no second time): it
    is what made the owner give up, not Kueue's decision to deactivate it."""
    if not ev_reason or ev_reason.startswith("Deactivated"):
        return ""
    said = (ctx.cond_message("Evicted") or "")[:200]
    return (f" (set after Kueue evicted it at {when_text(ctx.cond_time('Evicted'))} for {ev_reason}"
            + (f": {said}" if said else "") + "; Kueue did not deactivate it itself)")


def _requeue_limit(ctx: Context) -> str:
    """Why Kueue gave up, with backoffLimitCount read from Kueue's Configuration when the input has it."""
    cfg = ctx.state.kueue_config
    if not cfg.known or cfg.requeue_limit is None:  # unset in a Configuration read: another Kueue config ran
        return ("Kueue deactivated it after too many requeues (waitForPodsReady.requeuingStrategy."
                f"backoffLimitCount{_timeouts(ctx)})")
    limit = cfg.requeue_limit
    return (f"Kueue deactivated it at its {ordinal(limit + 1)} PodsReady timeout, after requeuing it {limit} of "
            f"{limit} times (waitForPodsReady.requeuingStrategy.backoffLimitCount {limit}, {cfg.source}"
            f"{_timeouts(ctx)})")


def _after_reactivation(ctx: Context) -> str:
    """What reactivating brings: Kueue cleared requeueState when it deactivated it, so the count starts over."""
    cfg = ctx.state.kueue_config
    if not cfg.known or cfg.requeue_limit is None:
        return ""
    timeout = format_duration(cfg.pods_ready_timeout, precise=True) if cfg.pods_ready_timeout else "its timeout"
    return (f" Reactivated, it gets {cfg.requeue_limit} requeue(s) again (Kueue cleared requeueState), each "
            f"admission allowing {timeout} for its Pods to become ready; if they wait for capacity that comes and "
            "goes (spot), the cluster admin can raise backoffLimitCount or unset it (kueue#15255).")


def _finished_retention(ctx: Context) -> str:
    """When Kueue deletes the finished Workload (objectRetentionPolicies.workloads.afterFinished): the diagnosis and
    the Workload go then, the owner stays."""
    keep = ctx.state.kueue_config.retention("afterFinished")
    done = ctx.cond_time("Finished")
    if keep is None or done is None:
        return ""
    due = done + timedelta(seconds=keep)
    when = "was due for deletion at" if ctx.after(done, timedelta(seconds=keep)) else "is deleted at"
    return (f" Kueue's objectRetentionPolicies.workloads.afterFinished ({format_duration(keep, precise=True)}) means "
            f"this Workload {when} {when_text(due)}; its owner stays, without a Workload.")


def _deactivated_retention(ctx: Context) -> str:
    """objectRetentionPolicies.workloads.afterDeactivatedByKueue: Kueue's job reconciler deletes the owner (and so
    the Workload) that long after Kueue deactivated it (Evicted DeactivatedDueTo...; a user's spec.active=false is
    never deleted): the owner has that long to reactivate it or to save its logs (jobframework
    handleWorkloadAfterDeactivatedPolicy)."""
    keep = ctx.state.kueue_config.retention("afterDeactivatedByKueue")
    evicted = ctx.cond("Evicted")
    at = ctx.cond_time("Evicted")
    if keep is None or at is None or not ctx.true("Evicted") or \
            not (s(m(evicted).get("reason")) or "").startswith("DeactivatedDueTo"):
        return ""
    owner = f"{s(ctx.owner.get('kind'))} {ctx.ns}/{name(ctx.owner)}" if ctx.owner is not None else "its owner"
    due = at + timedelta(seconds=keep)
    rule_ = f"objectRetentionPolicies.workloads.afterDeactivatedByKueue ({format_duration(keep, precise=True)})"
    if ctx.after(at, timedelta(seconds=keep)):
        return (f" Kueue's {rule_} made {owner} due for deletion at {when_text(due)}: Kueue deletes it, and this "
                "Workload with it, on its next pass; only recreating it runs the job again.")
    return (f" Mind the clock: Kueue's {rule_} deletes {owner}, and this Workload with it, at {when_text(due)}: "
            "reactivate it before then, or save what you need from it (Pod logs, its spec) and recreate it later.")


def _timeouts(ctx: Context) -> str:
    """"; evicted 3 times for PodsReadyTimeout": Kueue clears requeueState in the patch that deactivates, so
    the count is read from status.schedulingStats (requeueState only from an older Kueue that kept it)."""
    count = evictions_total(ctx, "PodsReadyTimeout")
    if count:
        return f"; evicted {count} times for PodsReadyTimeout (status.schedulingStats)"
    kept = i(m(ctx.status.get("requeueState")).get("count"))
    return f"; requeued {kept} times" if kept else ""


def _other_checks_said(ctx: Context) -> str:
    """What a check of another controller (a budget or approval gate) wrote when it rejected the Workload: Kueue
    keeps it in the eviction message; reactivating without fixing it only gets it rejected again."""
    parsed = ctx.evicted_parsed.inner or ctx.evicted_parsed
    said = [(name, text) for name, text in parsed.checks
            if not is_provisioning(ctx, name) and not multikueue.is_multikueue(ctx, name)]
    if not said:
        return ""
    shown = "; ".join(f"Check {name} said: {text or 'no message'}" for name, text in said[:3])
    owners = {controller_of(ctx, name) for name, _ in said}
    by = ", ".join(sorted(o for o in owners if o)) or "its controller"
    return (f" {shown}. Fix what it names (ask the owners of {by}) before setting spec.active back to true: "
            "reactivated as is, it is rejected again.")
