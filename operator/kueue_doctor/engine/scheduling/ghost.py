"""Ghost reservations: a Workload holds quota (QuotaReserved=True) while nothing can run behind it.

Kueue releases a Workload's quota when its owner finishes, is deleted, or is stopped after an eviction. When
that does not happen, the quota stays reserved for nothing and the queue's other Workloads wait for it; users
see `Admitted` and file it as a Kueue bug. Each fact here is one the objects state outright (a deletion
timestamp, a finished condition, a complete Pod list with none left), and each must have lasted `GRACE`, so
that Kueue's normal seconds of lag are never called a ghost. Neighbours: `dispatch.py` and `workload_pods.py`
(asked after these for admitted Workloads), `admission/eviction.py` (an eviction in progress, asked after).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...kube.objects import (
    format_duration,
    group_of,
    i,
    is_true,
    labels,
    lst,
    m,
    meta,
    name,
    parse_time,
    s,
    spec,
    when_text,
)
from ...state import JOB_UID_LABEL
from ...vocabulary import Cause, Reason
from .. import quota
from ..context import Context
from ..owner_status import owner_counts_none_active, rayjob_finished
from ..rules import Finding, Phase, rule
from .owners import assigned_flavors, owner_suspended

GRACE = timedelta(minutes=5)  # Kueue releases quota within seconds; minutes of it are not lag
# owner conditions that say it is done (batch Job: Complete/Failed; JobSet: Completed/Failed)
FINISHED_CONDITIONS = ("Complete", "Completed", "Failed", "Succeeded")
_TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Ghost:
    """Why nothing runs behind the reservation, and since when (None: not known)."""

    why: str
    since: datetime | None
    evidence: dict[str, Any]
    running: int = 0  # Pods still running behind it without an owner (orphaned with it)


def held_quota(ctx: Context) -> list[dict[str, Any]]:
    """What the reservation holds per flavor and resource (status.admission, Kueue's own numbers), with the
    ClusterQueue's nominal quota and what it has reserved in all."""
    lines = []
    for (flavor, res), value in sorted(quota.admitted_usage(ctx.wl).items()):
        line: dict[str, Any] = {"flavor": flavor, "resource": res, "requested": quota.exact(res, value)}
        fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
        if fq is not None and fq.nominal is not None:
            line["nominal"] = quota.exact(res, fq.nominal)
        used = quota.reserved_in(ctx.state, ctx.cq_name or "", flavor, res) if ctx.cq is not None else None
        if used is not None:
            line["used"] = quota.exact(res, used)
        line["source"] = "Kueue"
        lines.append(line)
    return lines


def owner_gone(ctx: Context) -> Ghost | None:
    """The owner is being deleted (deletionTimestamp older than GRACE), or is not there although the input lists
    every batch Job (other owner kinds are never listed completely) and every Pod, none of them its own."""
    owner, ref = ctx.owner, ctx.owner_ref
    if owner is not None:
        deleting = parse_time(meta(owner).get("deletionTimestamp"))
        if not ctx.after(deleting, GRACE):
            return None
        kind = s(owner.get("kind")) or "owner"
        return Ghost(f"its {kind} {ctx.ns}/{name(owner)} is being deleted since {when_text(deleting)} (see its "
                     f"finalizers: `kubectl get {kind.lower()} {name(owner)} -n {ctx.ns} -o "
                     "jsonpath='{.metadata.finalizers}'`)", deleting,
                     ctx.object_evidence(kind, name(owner), "metadata.deletionTimestamp", "Deleting", None, deleting,
                                         ctx.ns))
    if ref is None:
        return _orphaned(ctx) or _unowned_scaled_down(ctx)
    if ref.get("kind") != "Job" or group_of(ref.get("apiVersion")) != "batch" \
            or not ctx.state.knows("Job") or not _no_live_pods(ctx):
        return None  # Pods still running after the Job was deleted (--cascade=orphan) do use the quota
    if not ctx.after(ctx.cond_time("QuotaReserved"), GRACE):
        return None
    job = s(ref.get("name"))
    return Ghost(f"its Job {ctx.ns}/{job} and its Pods no longer exist (the input lists every Job Kueue manages "
                 "and every Pod)", None, ctx.object_evidence("Job", job, "metadata", "NotFound",
                                                            f"ownerReference uid {s(ref.get('uid'))}", ns=ctx.ns))


def _orphaned(ctx: Context) -> Ghost | None:
    """No ownerReference at all, though Kueue always sets one to the Job it made the Workload for (its job-uid
    label says which): the Job was deleted with --cascade=orphan, which strips the ownerReference from the
    Workload and the Pods alike. Kueue >= 0.18 finishes such a Workload at once (FinishOrphanedWorkloads);
    one still holding quota is never finished. Definite, so no grace period."""
    job_uid = s(labels(ctx.wl).get(JOB_UID_LABEL))
    if not job_uid or job_uid in ctx.state.owners_by_uid:  # the missing reference itself is the evidence
        return None
    running = [p for p in ctx.pods if s(m(p.get("status")).get("phase")) not in _TERMINAL_PHASES]
    left = (f"; {len(running)} of its Pods, orphaned with it, still run outside any Job (delete them: kubectl -n "
            f"{ctx.ns} delete pod {' '.join(name(p) or '' for p in running[:5])})" if running else "")
    return Ghost(f"its Job (uid {job_uid}) was deleted with --cascade=orphan, which also removed the Workload's "
                 "ownerReference, and this Kueue does not finish ownerless Workloads (FinishOrphanedWorkloads off, "
                 f"or older than v0.18){left}", None,
                 ctx.object_evidence("Workload", ctx.name, "metadata.ownerReferences", "NoOwner",
                                     f"label {JOB_UID_LABEL}={job_uid}, no owner with that uid", ns=ctx.ns),
                 running=len(running))


def _unowned_scaled_down(ctx: Context) -> Ghost | None:
    """No ownerReference, but its job-uid label names an owner that is there, scaled to 0 with no Pod left: Kueue
    took the reference away (a StatefulSet evicted and scaled down, kueue#12232) and never frees the quota, and
    its webhook refuses to scale the owner up while this Workload exists."""
    owner = ctx.state.owners_by_uid.get(s(labels(ctx.wl).get(JOB_UID_LABEL)) or "")
    if owner is None or s(owner.get("kind")) not in _SCALED_OWNERS or spec(owner).get("replicas") != 0:
        return None
    # without Pods in the input, the owner's own count (status.replicas: Pods it has, of any state)
    if not (_no_live_pods(ctx) if ctx.state.knows("Pod") else not i(m(owner.get("status")).get("replicas"))):
        return None
    kind = s(owner.get("kind")) or "owner"
    return Ghost(f"its {kind} {ctx.ns}/{name(owner)} is scaled to 0 with no Pod left, and the Workload lost its "
                 f"ownerReference to it (kueue#12232): Kueue never frees this quota, and its webhook refuses to scale "
                 f"the {kind} up again while the Workload exists", None,
                 ctx.object_evidence(kind, name(owner), "spec.replicas", "ScaledToZero", "replicas: 0", ns=ctx.ns))


def owner_finished(ctx: Context) -> Ghost | None:
    """The owner says it is done (Complete/Failed condition, or a RayJob's terminal jobDeploymentStatus, older than
    GRACE), yet Kueue has not finished the Workload, which is what releases the quota."""
    owner = ctx.owner
    if owner is None:
        return None
    ray = rayjob_finished(owner)
    if ray is not None:
        deployment, job_status, when = ray
        if not ctx.after(when, GRACE):
            return None
        said = f"jobDeploymentStatus {deployment}" + (f", jobStatus {job_status}" if job_status else "")
        return Ghost(f"its RayJob {ctx.ns}/{name(owner)} finished ({said}) at {when_text(when)} and Kueue never "
                     "marked the Workload Finished (Kueue's RayJob integration finishes it on that status)", when,
                     ctx.object_evidence("RayJob", name(owner), "status.jobDeploymentStatus", deployment,
                                         s(m(owner.get("status")).get("message")), when, ctx.ns))
    for cond in lst(m(owner.get("status")).get("conditions")):
        cond = m(cond)
        when = parse_time(cond.get("lastTransitionTime"))
        if cond.get("type") in FINISHED_CONDITIONS and is_true(cond) and ctx.after(when, GRACE):
            kind = s(owner.get("kind")) or "owner"
            return Ghost(f"its {kind} {ctx.ns}/{name(owner)} finished ({cond.get('type')}) at {when_text(when)} "
                         "and Kueue never marked the Workload Finished", when,
                         ctx.object_evidence(kind, name(owner), f"condition/{cond.get('type')}",
                                             s(cond.get("reason")), s(cond.get("message")), when, ctx.ns))
    return None


def _no_live_pods(ctx: Context) -> bool:
    """The input lists every Pod, and none of this Workload's is still there and not terminated."""
    return ctx.state.knows("Pod") and all(s(m(p.get("status")).get("phase")) in _TERMINAL_PHASES
                                          for p in ctx.pods)


def pods_gone(ctx: Context) -> Ghost | None:
    """Admitted for longer than GRACE, Kueue says PodsReady=True, yet no Pod exists and the Job itself counts
    none active or ready: Kueue's view is stale and the quota is held for nothing. Only for batch Jobs, whose
    status says what its controller sees; the normal "Pods not created yet" case never has PodsReady=True."""
    owner = ctx.owner
    if owner is None or owner.get("kind") != "Job" or group_of(owner.get("apiVersion")) != "batch":
        return None
    if owner_suspended(owner) is not False or not ctx.true("PodsReady") or ctx.pods or not ctx.state.knows("Pod"):
        return None
    job_status = m(owner.get("status"))
    if i(job_status.get("active")) or i(job_status.get("ready")):
        return None
    admitted = ctx.cond_time("Admitted")
    if not ctx.after(admitted, GRACE):
        return None
    return Ghost(f"no Pod of Job {ctx.ns}/{name(owner)} exists and the Job counts none active, while Kueue's "
                 f"PodsReady condition still says ready (since {when_text(ctx.cond_time('PodsReady'))})", None,
                 ctx.object_evidence("Job", name(owner), "status.active", "NoPods", "active 0, ready 0",
                                     ns=ctx.ns))


def stopped_without_pods(ctx: Context) -> Ghost | None:
    """Evicted more than GRACE ago, the owner suspended again and no Pod left: Kueue releases the quota once the
    owner is inactive, and has not."""
    owner, evicted = ctx.owner, ctx.cond_time("Evicted")
    if owner is None or not ctx.after(evicted, GRACE):
        return None
    kind = s(owner.get("kind")) or "owner"
    # a StatefulSet, Deployment or LeaderWorkerSet stops by scaling to 0 (no spec.suspend): kueue#12232
    scaled_down = kind in _SCALED_OWNERS and spec(owner).get("replicas") == 0
    if owner_suspended(owner) is not True and not scaled_down:
        return None
    said = None if ctx.state.knows("Pod") else owner_counts_none_active(ctx.state, owner)
    if not (_no_live_pods(ctx) if ctx.state.knows("Pod") else said is not None):
        return None
    left = ("no Pod of it is left" if ctx.state.knows("Pod") else
            f"its status counts nothing active ({said}; the input has no Pods)")
    stopped = "is scaled to 0 replicas" if scaled_down else "is suspended"
    return Ghost(f"it was evicted ({ctx.cond_reason('Evicted')}) at {when_text(evicted)}, its {kind} "
                 f"{ctx.ns}/{name(owner)} {stopped} and {left}", evicted,
                 ctx.object_evidence(kind, name(owner), "spec.replicas" if scaled_down else "spec.suspend",
                                     "ScaledToZero" if scaled_down else "Suspended",
                                     "replicas: 0" if scaled_down else "suspend: true", ns=ctx.ns))


_SCALED_OWNERS = frozenset({"StatefulSet", "Deployment", "LeaderWorkerSet"})


def _finding(ctx: Context, reason: Reason, ghost: Ghost) -> Finding:
    lines = held_quota(ctx)
    holds = ", ".join(f"{x['requested']} {x['resource']}" + (f" (nominal {x['nominal']})" if x.get("nominal") else "")
                      + f" in flavor {x['flavor']}" for x in lines) or "its quota"
    reserved = ctx.cond_time("QuotaReserved")
    held_for = f" for {format_duration(ctx.now - reserved, precise=True)}" if reserved else ""
    after = ("Nothing will ever finish the Workload and release the quota" if ghost.running
             else "Nothing runs, yet Kueue has not released the quota")
    text = (f"Ghost reservation: holds {holds} in {ctx.cq_text} (reserved since {when_text(reserved)}{held_for}), "
            f"but {ghost.why}. {after}, and the queue's other Workloads wait for it. Cluster admin: check the "
            "Kueue controller logs for this Workload "
            f"(`kubectl -n kueue-system logs deploy/kueue-controller-manager | grep {ctx.name}`); if nothing should "
            f"run, delete the stale Workload: `kubectl -n {ctx.ns} delete workload {ctx.name}`"
            + (" (Kueue creates a fresh one if the owner still has to run)." if ctx.owner is not None else "."))
    return Finding(reason, Cause.GHOST_RESERVATION, text, since=ghost.since or reserved, quota=lines,
                   flavors=assigned_flavors(ctx),
                   evidence=[ctx.condition_evidence("QuotaReserved"), ghost.evidence],
                   hints=[f"kubectl -n {ctx.ns} delete workload {ctx.name}",
                          f"kubectl -n kueue-system logs deploy/kueue-controller-manager | grep {ctx.name}"])


@rule(Phase.ADMITTED, [(Reason.PODS_NOT_CREATED, Cause.GHOST_RESERVATION)])
def admitted_ghost(ctx: Context) -> Finding | None:
    """Asked right after MultiKueue (whose Pods run elsewhere) and before the owner's suspension and the Pods."""
    ghost = owner_gone(ctx) or owner_finished(ctx) or pods_gone(ctx)
    return _finding(ctx, Reason.PODS_NOT_CREATED, ghost) if ghost is not None else None


@rule(Phase.RESERVED, [(Reason.EVICTED, Cause.GHOST_RESERVATION)])
def evicted_ghost(ctx: Context) -> Finding | None:
    """Evicted but still reserving: asked before the eviction in progress, which it would otherwise be."""
    if not ctx.true("Evicted"):
        return None
    ghost = owner_gone(ctx) or owner_finished(ctx) or stopped_without_pods(ctx)
    return _finding(ctx, Reason.EVICTED, ghost) if ghost is not None else None
