"""An admitted AppWrapper's own fault tolerance (project-codeflare/appwrapper, appwrapper_controller.go): on failed
Pods it waits a grace period, then resets (deletes every component, pauses, redeploys) until its retry limit; Pods
not all running within a grace period after deployment reset it too. Kueue's Workload stays admitted throughout and
its conditions say none of it, so these verdicts read the AppWrapper. Neighbours: `owner_status.py` (its facts),
`workload_pods.py` (asked after; its messages end with `reset_note`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ...kube.objects import conditions, format_duration, is_true, m, name, parse_time, s, when_text
from ...vocabulary import ActionBy, Cause, Reason
from ..context import Context
from ..owner_status import (
    aw_components,
    aw_duration,
    aw_grace,
    aw_retries,
    aw_unhealthy_text,
    is_appwrapper,
)
from ..pods import failed_pods, failed_pods_text
from ..rules import Finding, Phase, rule
from .owners import assigned_flavors, base_evidence, expected_pods

# past its redeploy time by this much, a Resetting AppWrapper is stuck (its controller redeploys within seconds)
RESET_OVERDUE = timedelta(minutes=2)


def _phase(owner: Mapping[str, Any]) -> str:
    return s(m(owner.get("status")).get("phase")) or ""


def _resets(owner: Mapping[str, Any], next_one: bool = True) -> str:
    """"reset 2 of 3 (the AppWrapper controller's default)", or that none is left and it fails instead."""
    done, limit, source = aw_retries(owner)
    if next_one and done >= limit:
        return f"no reset left ({done} of {limit} used, {source}): it fails the AppWrapper instead"
    return f"reset {done + 1 if next_one else done} of {limit} ({source})"


def _failed_pods(ctx: Context) -> str:
    failed = failed_pods_text(failed_pods(ctx.pods))
    return f" {failed}." if failed else ""


@rule(Phase.ADMITTED, [(Reason.PODS_NOT_CREATED, Cause.PODS_PENDING),
                       (Reason.CONTAINERS_NOT_STARTING, Cause.PODS_FAILED)])
def appwrapper_recovering(ctx: Context) -> Finding | None:
    """An AppWrapper resetting, or waiting its failure grace period after failed Pods: its controller's recovery
    under way, nobody's to act on until the retry limit is reached (the Pod rules would blame the owner's Pods)."""
    owner = ctx.owner
    if owner is None or not is_appwrapper(owner):
        return None
    unhealthy = conditions(owner).get("Unhealthy") or {}
    detected = parse_time(unhealthy.get("lastTransitionTime"))
    where = f"AppWrapper {ctx.ns}/{name(owner)}"
    evidence = [*base_evidence(ctx), ctx.object_evidence(
        "AppWrapper", name(owner), "status.phase", _phase(owner), s(unhealthy.get("reason")), ns=ctx.ns)]
    if _phase(owner) == "Resetting" and detected is not None:
        pause, source = aw_grace(owner, "retryPausePeriodDuration")
        redeploy = detected + timedelta(seconds=pause)
        reason = s(unhealthy.get("reason")) or ""
        head = (f"Admitted by {ctx.cq_text}; {where} is resetting, {_resets(owner, next_one=False)}: "
                f"{aw_unhealthy_text(reason)} (Unhealthy {reason} at {when_text(detected)}), so its controller "
                f"deleted its components ({aw_components(owner) or 'none recorded'}) and their Pods and redeploys them "
                f"{aw_duration(pause)} after the failure (retryPausePeriodDuration, {source})")
        if ctx.after(detected, timedelta(seconds=pause) + RESET_OVERDUE):
            text = (f"{head}, at {when_text(redeploy)}; {format_duration(ctx.now - redeploy, precise=True)} later it "
                    "has not. The AppWrapper controller's admin checks that it runs and reads its logs "
                    f"(kubectl -n {ctx.ns} describe appwrapper {name(owner)}).")
            return Finding(Reason.PODS_NOT_CREATED, Cause.PODS_PENDING, text, ActionBy.CLUSTER_ADMIN,
                           since=detected, evidence=evidence, flavors=assigned_flavors(ctx))
        text = (f"{head}, at about {when_text(redeploy)}. The Workload keeps its quota meanwhile; nothing to do "
                "unless it fails again. Read the failed Pods' logs now if they are left: each reset deletes them.")
        return Finding(Reason.PODS_NOT_CREATED, Cause.PODS_PENDING, text, ActionBy.NOBODY, since=detected,
                       evidence=evidence, flavors=assigned_flavors(ctx))
    if _phase(owner) != "Running" or not is_true(unhealthy) or s(unhealthy.get("reason")) != "FoundFailedPods" \
            or detected is None:
        return None
    grace, source = aw_grace(owner, "failureGracePeriodDuration")
    if ctx.after(detected, timedelta(seconds=grace)):
        return None  # the controller should have reset it by now: the Pod rules say what the Pods show
    done, limit, _ = aw_retries(owner)
    last = done >= limit
    text = (f"Admitted by {ctx.cq_text}; {where} found failed Pods at {when_text(detected)} (Unhealthy "
            f"FoundFailedPods).{_failed_pods(ctx)} Its controller waits its failure grace period "
            f"({aw_duration(grace)}, {source}), then at about {when_text(detected + timedelta(seconds=grace))} "
            "resets it if a Failed Pod is still there (a Job keeps its failed Pods: its own retries do not prevent "
            f"the reset): {_resets(owner)}"
            + ("; the AppWrapper's owner reads the failed Pods' logs and fixes the cause before then." if last else
               ", deleting and redeploying every component. Nothing to do yet; read the failed Pods' logs before the "
               "reset deletes them."))
    return Finding(Reason.CONTAINERS_NOT_STARTING, Cause.PODS_FAILED, text,
                   ActionBy.WORKLOAD_OWNER if last else ActionBy.NOBODY, since=detected, evidence=evidence,
                   flavors=assigned_flavors(ctx))


# how often the AppWrapper controller looks at a Running AppWrapper's Pods (appwrapper_controller.go: requeueAfter 1m
# once PodsReady, 5s before); its Pod watch wakes it only for Succeeded Pods, so a failure waits for that check
CHECK_READY, CHECK_WARMING = timedelta(minutes=1), timedelta(seconds=5)


def _first_failure(ctx: Context) -> datetime | None:
    """When the first of the AppWrapper's Failed Pods ended (its containers' finishedAt), or None."""
    ends = [parse_time(m(m(m(c).get("state")).get("terminated")).get("finishedAt"))
            for p in ctx.pods if m(p.get("status")).get("phase") == "Failed"
            for c in m(p.get("status")).get("containerStatuses") or []]
    return min((e for e in ends if e is not None), default=None)


@rule(Phase.ADMITTED, [(Reason.CONTAINERS_NOT_STARTING, Cause.PODS_FAILED)])
def appwrapper_failure_not_seen_yet(ctx: Context) -> Finding | None:
    """A Running AppWrapper whose Pod failed before its controller looked (Unhealthy not set yet): the reset is
    coming all the same, since a Job keeps its failed Pods; the Running verdict would hide it."""
    owner = ctx.owner
    if owner is None or not is_appwrapper(owner) or _phase(owner) != "Running" \
            or is_true(conditions(owner).get("Unhealthy")):
        return None
    failed = _first_failure(ctx)
    check = CHECK_READY if is_true(conditions(owner).get("PodsReady")) else CHECK_WARMING
    grace, source = aw_grace(owner, "failureGracePeriodDuration")
    if failed is None or ctx.after(failed, check + RESET_OVERDUE):
        return None  # long unseen: not the controller's periodic check; the Pod rules say what the Pods show
    done, limit, _ = aw_retries(owner)
    last = done >= limit
    where = f"AppWrapper {ctx.ns}/{name(owner)}"
    every = "every 1m while its Pods are ready" if check == CHECK_READY else "every 5s while its Pods start"
    text = (f"Admitted by {ctx.cq_text}; a Pod of {where} failed at {when_text(failed)}.{_failed_pods(ctx)} Its "
            f"controller is not told of failed Pods: it sees them at its next check ({every}), marks it Unhealthy "
            f"FoundFailedPods, waits its failure grace period ({aw_duration(grace)}, {source}) and then resets it if a "
            "Failed Pod is still there (a Job keeps its failed Pods: its own retries do not prevent the reset), at the "
            "latest about "
            f"{when_text(failed + check + timedelta(seconds=grace))}: {_resets(owner)}"
            + ("; the AppWrapper's owner reads the failed Pods' logs and fixes the cause before then." if last else
               ", deleting and redeploying every component. Nothing to do yet; read the failed Pods' logs before the "
               "reset deletes them."))
    evidence = [*base_evidence(ctx), ctx.object_evidence(
        "AppWrapper", name(owner), "status.phase", _phase(owner), "Unhealthy not set", ns=ctx.ns)]
    return Finding(Reason.CONTAINERS_NOT_STARTING, Cause.PODS_FAILED, text,
                   ActionBy.WORKLOAD_OWNER if last else ActionBy.NOBODY, since=failed, evidence=evidence,
                   flavors=assigned_flavors(ctx))


def reset_note(ctx: Context) -> str:
    """" AppWrapper x's controller resets it at about T ...": a deployed AppWrapper whose Pods are not all running
    is reset once its admission grace period (Pods missing) or warmup grace period (Pods created, not running)
    has passed since ResourcesDeployed; usually long before Kueue's waitForPodsReady timeout."""
    owner = ctx.owner
    if owner is None or not is_appwrapper(owner) or _phase(owner) != "Running" \
            or is_true(conditions(owner).get("PodsReady")):
        return ""
    deployed = parse_time((conditions(owner).get("ResourcesDeployed") or {}).get("lastTransitionTime"))
    if deployed is None:
        return ""
    live = sum(1 for p in ctx.pods if m(p.get("status")).get("phase") in ("Pending", "Running", "Succeeded")
               and not m(p.get("metadata")).get("deletionTimestamp"))
    key = "warmupGracePeriodDuration" if live >= expected_pods(ctx) else "admissionGracePeriodDuration"
    grace, source = aw_grace(owner, key)
    due = deployed + timedelta(seconds=grace)
    when = (f"was due to reset itself at {when_text(due)}" if ctx.after(deployed, timedelta(seconds=grace))
            else f"resets itself at about {when_text(due)}")
    return (f" AppWrapper {ctx.ns}/{name(owner)} {when} ({key} {aw_duration(grace)}, "
            f"{source}, from its deployment at {when_text(deployed)}) unless all its Pods run: {_resets(owner)}"
            + (", deleting and redeploying every component." if aw_retries(owner)[0] < aw_retries(owner)[1] else "."))
