"""Admitted, and the Pods are elsewhere or not started yet: MultiKueue dispatch, a suspended owner."""

from __future__ import annotations

from datetime import timedelta

from ...kube.objects import format_time, lst, m, name, s, spec
from ...vocabulary import ActionBy, Cause, Reason
from ..context import Context
from ..rules import Finding, Phase, pairs, rule
from .owners import admitted_since, assigned_flavors, base_evidence, owner_suspended

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"


@rule(Phase.ADMITTED, pairs(Reason.RUNNING, Cause.DISPATCHED_TO_WORKER_CLUSTER))
def multikueue(ctx: Context) -> Finding | None:
    cluster = s(ctx.status.get("clusterName"))
    via_check = None
    for c in lst(ctx.status.get("admissionChecks")):
        ac = ctx.state.admission_checks.get(s(m(c).get("name")) or "")
        if ac is not None and s(spec(ac).get("controllerName")) == MULTIKUEUE_CONTROLLER:
            via_check = s(m(c).get("name"))
    if not cluster and not via_check:
        return None
    where = f"worker cluster {cluster}" if cluster else "a MultiKueue worker cluster"
    text = (f"Admitted and dispatched by MultiKueue to {where}: its Pods run there, not here. Look at the Workload "
            f"{ctx.ns}/{ctx.name} on {where} (run kueue-doctor there) for scheduling problems.")
    return Finding(Reason.RUNNING, Cause.DISPATCHED_TO_WORKER_CLUSTER, text, ActionBy.NOBODY,
                   since=admitted_since(ctx), evidence=base_evidence(ctx), flavors=assigned_flavors(ctx))


@rule(Phase.ADMITTED, pairs(Reason.JOB_SUSPENDED, Cause.OWNER_SUSPENDED))
def suspended_owner(ctx: Context) -> Finding | None:
    owner = ctx.owner
    if owner is None or owner_suspended(owner) is not True:
        return None
    since = admitted_since(ctx)
    kind = s(owner.get("kind")) or "owner"
    late = since is not None and ctx.now - since > timedelta(minutes=2)
    text = (f"Admitted by {ctx.cq_text} at {format_time(since)}, but {kind} {name(owner)} is still "
            "suspended: Kueue's job controller unsuspends it after admission"
            + (" and should have by now; check the Kueue controller logs and the Job's events." if late else "."))
    return Finding(Reason.JOB_SUSPENDED, Cause.OWNER_SUSPENDED, text, ActionBy.NOBODY, since=since,
                   evidence=base_evidence(ctx), flavors=assigned_flavors(ctx))
