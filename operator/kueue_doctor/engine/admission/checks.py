"""Quota reserved, not admitted: admission checks, a delayed topology request, or Kueue about to admit.

Neighbours: `eviction.py` (a reserved Workload being evicted is asked there first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...kube.objects import conditions, format_time, is_true, lst, m, parse_time, s, spec
from ...vocabulary import ActionBy, Cause, Reason
from ..context import Context
from ..rules import Finding, Phase, pairs, rule

_CHECK_CAUSES = {"Retry": Cause.ADMISSION_CHECK_RETRY, "Rejected": Cause.ADMISSION_CHECK_REJECTED}
_RANK = {"Rejected": 0, "Retry": 1}  # the state that decides what happens next comes first


def _evidence(ctx: Context) -> list[dict[str, Any]]:
    evidence = [ctx.condition_evidence("QuotaReserved")]
    if ctx.cond("Admitted"):
        evidence.append(ctx.condition_evidence("Admitted"))
    return evidence


@rule(Phase.RESERVED, pairs(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_PENDING,
                            Cause.ADMISSION_CHECK_RETRY, Cause.ADMISSION_CHECK_REJECTED))
def admission_checks_not_ready(ctx: Context) -> Finding | None:
    checks = [m(c) for c in lst(ctx.status.get("admissionChecks"))]
    pending: list[Mapping[str, Any]] = sorted((c for c in checks if c.get("state") != "Ready"),
                                              key=lambda c: _RANK.get(s(c.get("state")) or "", 2))
    if not pending:
        return None
    since = ctx.cond_time("QuotaReserved")
    evidence = _evidence(ctx)
    first = pending[0]
    state = s(first.get("state")) or "Pending"
    cause = _CHECK_CAUSES.get(state, Cause.ADMISSION_CHECK_PENDING)
    cname = s(first.get("name")) or "?"
    ac = ctx.state.admission_checks.get(cname)
    controller = s(spec(ac).get("controllerName")) if ac else None
    detail = s(first.get("message"))
    text = (f"Quota reserved in {ctx.cq_text} since {format_time(since)}, waiting for "
            f"{len(pending)}/{len(checks)} admission check(s): {cname} is {state}"
            + (f" ({detail})" if detail else "")
            + (f"; its controller is {controller}" if controller else "") + ".")
    # Pending and Retry resolve themselves (Kueue retries after the back-off); Rejected needs the owner
    action = ActionBy.WORKLOAD_OWNER if state == "Rejected" else ActionBy.NOBODY
    if ac is not None and not is_true(conditions(ac).get("Active")):
        action = ActionBy.CLUSTER_ADMIN
        text += f" AdmissionCheck {cname} is not Active: the platform admin must fix its controller."
    for c in pending[:4]:
        evidence.append(ctx.object_evidence("Workload", ctx.name, f"status.admissionChecks[{c.get('name')}]",
                                            s(c.get("state")), s(c.get("message")),
                                            parse_time(c.get("lastTransitionTime")), ctx.ns))
    return Finding(Reason.WAITING_FOR_ADMISSION_CHECKS, cause, text, action, since=since, evidence=evidence,
                   hints=[f"kubectl get workload {ctx.name} -n {ctx.ns} -o jsonpath='{{.status.admissionChecks}}'"])


@rule(Phase.RESERVED, pairs(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.DELAYED_TOPOLOGY_REQUEST))
def delayed_topology_request(ctx: Context) -> Finding | None:
    delayed = [m(p) for p in lst(m(ctx.status.get("admission")).get("podSetAssignments"))
               if m(p).get("delayedTopologyRequest") == "Pending"]
    if not delayed:
        return None
    text = (f"Quota reserved in {ctx.cq_text}; the topology assignment of pod set "
            f"{s(delayed[0].get('name'))} is delayed until a second scheduling pass (ProvisioningRequest + TAS).")
    return Finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.DELAYED_TOPOLOGY_REQUEST, text,
                   since=ctx.cond_time("QuotaReserved"), evidence=_evidence(ctx))


@rule(Phase.RESERVED, pairs(Reason.NOT_YET_EVALUATED, Cause.QUOTA_RESERVED_AWAITING_ADMISSION))
def reserved_awaiting_admission(ctx: Context) -> Finding | None:
    since = ctx.cond_time("QuotaReserved")
    text = (f"Quota reserved in {ctx.cq_text} since {format_time(since)}; Kueue has not marked it "
            "Admitted yet (normally seconds). If it stays, check the Kueue controller logs.")
    return Finding(Reason.NOT_YET_EVALUATED, Cause.QUOTA_RESERVED_AWAITING_ADMISSION, text, since=since,
                   evidence=_evidence(ctx))
