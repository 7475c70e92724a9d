"""Kueue stalled: a pending Workload fits the ClusterQueue's unused quota by the numbers, yet nothing moves.

A Workload that fits is admitted in Kueue's next scheduling cycle (seconds); one parked as inadmissible goes
back to the queue as soon as quota is released in its ClusterQueue or cohort. When the numbers in the input
say it fits and Kueue has not written anything new for `STALL_AFTER`, Kueue's scheduler (or its requeueing)
is the likely culprit. This pages people, so every unknown says nothing: the arithmetic runs only on a flat
queue setup it can read completely (quota, reservations, flavors, no TAS, no affinity, nobody in the cohort
borrowing), only when nothing changed in the ClusterQueue (or cohort) for as long, and only for what the rules
after it would have called NotYetEvaluated or WaitingForQuota.
Neighbours: `flavors.py` (Kueue's own flavor-assignment failures), `order.py` (queue order, StrictFIFO heads),
`engine/quota.py` (the quota tables this reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from ...kube.objects import (
    format_duration,
    is_true,
    lst,
    m,
    parse_time,
    s,
    spec,
    status,
    when_text,
)
from ...kube.selectors import label_selector_matches
from ...state import Derived
from ...vocabulary import Cause, Reason
from .. import quota
from ..context import Context
from ..messages import FailureKind, Template
from ..rules import Finding, Phase, rule
from .order import queue_head, queue_order, sticky_ahead

# a scheduling cycle takes seconds; ten minutes of silence is not lag. Every "stuck" verdict of admission/ uses it
STALL_AFTER = timedelta(minutes=10)
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Fit:
    """One requested resource and the flavor whose unused quota holds it."""

    flavor: str
    resource: str
    requested: Decimal
    nominal: Decimal
    used: Decimal


def _stalled_reason(ctx: Context) -> Reason | None:
    """The reason the rules after this one would give, when it is one a stalled Kueue explains: never
    evaluated (no condition, or Kueue's "pending evaluation"), or waiting for unused quota only."""
    if ctx.cond("QuotaReserved") is None or ctx.qr_parsed.template == Template.PENDING_EVALUATION:
        return Reason.NOT_YET_EVALUATED
    p = ctx.qr_parsed
    if p.template == Template.NO_LONGER_FITS:
        return Reason.WAITING_FOR_QUOTA
    if p.template != Template.FLAVOR_ASSIGNMENT or p.pending_preemptions or p.failed_preemptions or not p.failures:
        return None
    if ctx.cond_reason("QuotaReserved") not in ("Pending", "WaitingForQuota"):
        return None
    if all(f.kind == FailureKind.INSUFFICIENT_UNUSED_QUOTA for f in p.failures):
        return Reason.WAITING_FOR_QUOTA
    return None


def _tolerated(tolerations: list[Any], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        tol = m(tol)
        if s(tol.get("effect")) not in (None, s(taint.get("effect"))):
            continue
        if tol.get("operator") == "Exists":
            if s(tol.get("key")) in (None, s(taint.get("key"))):
                return True
        elif s(tol.get("key")) == s(taint.get("key")) and (s(tol.get("value")) or "") == (
                s(taint.get("value")) or ""):
            return True
    return False


def _flavor_fits_pods(ctx: Context, flavor: Mapping[str, Any]) -> bool:
    """The pod templates can use this flavor: no TAS, a node selector and required node affinity that do not
    contradict its nodeLabels, and its blocking taints tolerated."""
    fspec = spec(flavor)
    if s(fspec.get("topologyName")):
        return False
    labels = m(fspec.get("nodeLabels"))
    own = lst(fspec.get("tolerations"))
    for ps in lst(ctx.spec.get("podSets")):
        ps = m(ps)
        pod = m(m(ps.get("template")).get("spec"))
        if ps.get("topologyRequest") or pod.get("resourceClaims") or not _affinity_allows(pod, labels):
            return False
        if any(k in labels and labels[k] != v for k, v in m(pod.get("nodeSelector")).items()):
            return False
        tolerations = [*lst(pod.get("tolerations")), *own]
        for taint in lst(fspec.get("nodeTaints")):
            if s(m(taint).get("effect")) in _BLOCKING_EFFECTS and not _tolerated(tolerations, m(taint)):
                return False
    return True


def _affinity_allows(pod: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """Kueue's flavor assigner reads a required node affinity only for the keys the flavor's nodeLabels set
    (flavorassigner.go `flavorSelector`): a term left with no such key allows every flavor (the terms are ORed), a
    hostname rule on a flavor without labels changes nothing (kueue#2391). Gt/Lt on such a key: not evaluated."""
    required = m(m(m(pod.get("affinity")).get("nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = []
    for term in lst(required.get("nodeSelectorTerms")):
        exprs = [m(e) for e in lst(m(term).get("matchExpressions")) if s(m(e).get("key")) in labels]
        if not exprs:
            return True
        terms.append(exprs)
    if any(s(e.get("operator")) in ("Gt", "Lt") for exprs in terms for e in exprs):
        return False
    return not terms or any(label_selector_matches({"matchExpressions": exprs}, labels) for exprs in terms)


def _nobody_borrows(ctx: Context, flavor: str, resource: str) -> bool:
    """In a cohort, the CQ's own unused nominal quota may be lent out; only a flat cohort whose members are all
    within their nominal quota (and all in the input) is read as "free means free". Kept per cohort."""
    if not ctx.cohort:
        return True
    memo = ctx.state.derived(NOBODY_BORROWS)
    key = (ctx.cohort, flavor, resource)
    if key not in memo:
        memo[key] = _cohort_within_nominal(ctx, ctx.cohort, flavor, resource)
    return memo[key]


def _cohort_within_nominal(ctx: Context, cohort: str, flavor: str, resource: str) -> bool:
    if not ctx.state.knows("ClusterQueue") or s(spec(ctx.state.cohorts.get(cohort, {})).get("parentName")) or any(
            s(spec(c).get("parentName")) == cohort for c in ctx.state.cohorts.values()):
        return False
    for member in ctx.state.index.cqs_by_cohort.get(cohort, []):
        fq = quota.flavor_quota(ctx.state, "ClusterQueue", member, flavor, resource)
        used = quota.reserved_in(ctx.state, member, flavor, resource)
        if fq is None:  # not covered: what its Workloads still hold of it is all borrowed (quota.uncovered_usage)
            if used:
                return False
            continue
        if used is None or used > (fq.nominal or Decimal(0)):
            return False
    return True


NOBODY_BORROWS: Derived[dict[tuple[str, str, str], bool]] = Derived("cohort within nominal quota", lambda _: {},
                                                                     numbers=True)


def _request_totals(ctx: Context) -> dict[str, Decimal]:
    """What all pod sets request together, per resource; `pods` only where the ClusterQueue counts it. Asked
    through `ctx.lazy` (`might_fit`, then `fits_unused_quota`); read-only."""
    totals: dict[str, Decimal] = {}
    for per_podset in ctx.requests.values():
        for res, amount in per_podset.items():
            totals[res] = totals.get(res, Decimal(0)) + amount
    covered = _covered(ctx)
    return {r: v for r, v in totals.items() if v > 0 and (r in covered or r != "pods")}


def _covered(ctx: Context) -> frozenset[str]:
    """The resources the ClusterQueue covers, read once per index (every waiting Workload of it asks)."""
    memo = ctx.state.derived(COVERED)
    cq_name = ctx.cq_name or ""
    found = memo.get(cq_name)
    if found is None:
        found = memo[cq_name] = frozenset(quota.covered_resources(ctx.cq or {}))
    return found


COVERED: Derived[dict[str, frozenset[str]]] = Derived("resources covered per ClusterQueue", lambda _: {})


def _most_free(ctx: Context, resource: str) -> Decimal | None:
    """The most unused nominal quota any flavor of the ClusterQueue has for the resource, kept per index: a
    request above it fits nowhere, without looking at flavors or pods (most waiting Workloads stop here)."""
    memo = ctx.state.derived(MOST_FREE)
    key = (ctx.cq_name or "", resource)
    if key not in memo:
        best: Decimal | None = None
        for group in lst(spec(ctx.cq or {}).get("resourceGroups")):
            if resource not in lst(m(group).get("coveredResources")):
                continue
            for fl in lst(m(group).get("flavors")):
                fname = s(m(fl).get("name")) or ""
                fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, fname, resource)
                used = quota.reserved_in(ctx.state, ctx.cq_name or "", fname, resource)
                if fq is not None and fq.nominal is not None and used is not None:
                    free = fq.nominal - used
                    best = free if best is None or free > best else best
        memo[key] = best
    return memo[key]


MOST_FREE: Derived[dict[tuple[str, str], Decimal | None]] = Derived("most unused nominal quota per resource",
                                                                    lambda _: {}, numbers=True)


def might_fit(ctx: Context) -> bool:
    """False when some request is above what any flavor has free: the cheap test before `fits_unused_quota`."""
    for res, want in ctx.lazy(_request_totals).items():
        free = _most_free(ctx, res)
        if free is None or free < want:
            return False
    return True


def fits_unused_quota(ctx: Context) -> list[Fit] | None:
    """Every requested resource fits nominal - reserved of one flavor of its resource group (all pod sets in the
    same flavor, the strictest reading); None when it does not fit or anything needed is not known."""
    cq = ctx.cq
    if cq is None or not lst(ctx.state.read_numbers(cq).get("flavorsReservation")):
        return None
    totals = ctx.lazy(_request_totals)
    covered = _covered(ctx)
    if not totals or any(r not in covered for r in totals):
        return None
    fits: list[Fit] = []
    for group in lst(spec(cq).get("resourceGroups")):
        needed = {r: v for r, v in totals.items() if r in lst(m(group).get("coveredResources"))}
        if not needed:
            continue
        found = None
        for fl in lst(m(group).get("flavors")):
            fname = s(m(fl).get("name")) or ""
            flavor = ctx.state.flavors.get(fname)
            if flavor is None or not _flavor_fits_pods(ctx, flavor):
                continue
            lines = []
            for res, want in needed.items():
                fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, fname, res)
                used = quota.reserved_in(ctx.state, ctx.cq_name or "", fname, res)
                if fq is None or fq.nominal is None or used is None or fq.nominal - used < want \
                        or not _nobody_borrows(ctx, fname, res):
                    break
                lines.append(Fit(fname, res, want, fq.nominal, used))
            else:
                found = lines
                break
        if found is None:
            return None
        fits.extend(found)
    return fits


def _changed_around(ctx: Context, after: datetime) -> datetime | None:
    """The newest condition change of a Workload of the ClusterQueue or its cohort, when after `after` (None: no
    such change): when Kueue (or a finishing Job) last moved something there. Read from the index, which keeps it
    per ClusterQueue as Workloads come and change: no Workload is decoded (a waiting Workload of a cohort of a
    hundred queues asked every pass, at 50,000 Workloads, was 12% of the operator's CPU walking them)."""
    newest = ctx.state.index.changed_by_cq
    cqs = ctx.state.index.cqs_by_cohort.get(ctx.cohort, ()) if ctx.cohort else ()
    found = max((t for t in (newest.get(cq) for cq in (ctx.cq_name or "", *cqs)) if t is not None), default=None)
    return found if found is not None and found > after else None


def _quiet(ctx: Context) -> bool:
    """Nothing changed in the ClusterQueue (and its cohort) and Kueue wrote no event about this Workload for
    `STALL_AFTER`: a stall means nothing moved, so quota freed seconds ago by a finishing Workload (which Kueue
    is about to use) never counts."""
    after = ctx.now - STALL_AFTER
    changed = _changed_around(ctx, after)
    if changed is not None:
        ctx.after(changed, STALL_AFTER)  # quiet, as far as that change goes, once it is old enough
        return False
    for ev in ctx.state.events_about("Workload", ctx.ns, ctx.name):
        series = m(ev.get("series"))
        when = parse_time(series.get("lastObservedTime") or ev.get("lastTimestamp") or ev.get("eventTime")
                          or ev.get("deprecatedLastTimestamp"))
        if when is not None and when > after:
            ctx.after(when, STALL_AFTER)  # quiet, as far as this event goes, once it is old enough
            return False
    return True


def _cq_active(ctx: Context) -> bool:
    """Some Active condition of the ClusterQueue is True; kept per index (every waiting Workload of it asks)."""
    memo = ctx.state.derived(CQ_ACTIVE)
    cq_name = ctx.cq_name or ""
    found = memo.get(cq_name)
    if found is None:
        found = memo[cq_name] = any(m(c).get("type") == "Active" and is_true(m(c))
                                    for c in lst(status(ctx.cq or {}).get("conditions")))
    return found


CQ_ACTIVE: Derived[dict[str, bool]] = Derived("ClusterQueue active", lambda _: {})


# the QuotaReserved=False texts Kueue writes when it evicts (the eviction's own message, evict.go): still there, it
# has not tried to admit the Workload since
_EVICTION_TEMPLATES = frozenset({Template.PREEMPTED, Template.PODS_READY_TIMEOUT, Template.ADMISSION_CHECK_EVICTION,
                                 Template.CLUSTER_QUEUE_STOPPED_EVICTION, Template.LOCAL_QUEUE_STOPPED_EVICTION,
                                 Template.NODE_FAILURES, Template.DEACTIVATED})


def requeued_since(ctx: Context) -> datetime | None:
    """When an evicted Workload was queued again (Requeued=True: its back-off over, BackoffFinished; its Job stopped;
    reactivated; its queue restarted) while Kueue's QuotaReserved message is still the eviction's or "pending
    evaluation": its scheduler has not tried to admit it since (a try that does not fit writes why,
    scheduler.go requeueAndUpdate). None otherwise, or while its Pod group waits for replacement Pods."""
    if not ctx.true("Evicted") or not ctx.true("Requeued") or ctx.true("WaitingForReplacementPods"):
        return None
    if ctx.cond("QuotaReserved") is not None and ctx.cond_message("QuotaReserved") != ctx.cond_message("Evicted") \
            and ctx.qr_parsed.template not in _EVICTION_TEMPLATES \
            and ctx.qr_parsed.template != Template.PENDING_EVALUATION:
        return None
    return ctx.cond_time("Requeued")


def stall(ctx: Context) -> Finding | None:
    """`_stall`, once per Workload: `eviction.recent_eviction` asks it to step aside for it."""
    return ctx.lazy(_stall)


@rule(Phase.PENDING, [(Reason.NOT_YET_EVALUATED, Cause.KUEUE_STALLED), (Reason.WAITING_FOR_QUOTA, Cause.KUEUE_STALLED)])
def kueue_stalled(ctx: Context) -> Finding | None:
    """Asked after the queue and eviction rules (the queues exist and run, the eviction is not the latest
    news, or it is and the Workload was queued again long ago) and before Kueue's message is read."""
    return stall(ctx)


def _stall(ctx: Context) -> Finding | None:
    requeued = requeued_since(ctx)
    reason = Reason.NOT_YET_EVALUATED if requeued is not None else _stalled_reason(ctx)
    if reason is None:
        return None
    since = requeued or ctx.cond_time("QuotaReserved") or ctx.created
    if since is None or not ctx.after(since, STALL_AFTER) or ctx.cq is None or not _cq_active(ctx):
        return None
    if not _quiet(ctx):  # the cheapest test, kept per ClusterQueue: a busy queue is no stall
        return None
    if not might_fit(ctx) or queue_order(ctx.wl, ctx.state, ctx.now) is None:
        return None  # does not fit anywhere; or held, gated, in back-off: Kueue waits on purpose
    fits = fits_unused_quota(ctx)
    if not fits or queue_head(ctx) is not None or sticky_ahead(ctx) is not None:
        return None  # does not fit, or waits behind a StrictFIFO head or a preempting one on purpose
    numbers = "; ".join(f"{quota.fmt(f.resource, f.requested)} {f.resource} requested, "
                        f"{quota.fmt(f.resource, f.nominal - f.used)} free in flavor {f.flavor} (nominal "
                        f"{quota.fmt(f.resource, f.nominal)}, {quota.fmt(f.resource, f.used)} reserved)" for f in fits)
    silent = format_duration(ctx.now - since, precise=True)
    if requeued is not None:
        said = (f"Evicted at {when_text(ctx.cond_time('Evicted'))} ({ctx.cond_reason('Evicted')}) and queued again "
                f"at {when_text(requeued)} (Requeued=True {ctx.cond_reason('Requeued')}), yet Kueue has not tried to "
                "admit it since (its QuotaReserved message is still the eviction's), although it fits")
    elif reason == Reason.WAITING_FOR_QUOTA:
        said = (f"Kueue last wrote at {when_text(since)} that it does not fit "
                f"({ctx.cond_message('QuotaReserved')[:300]}), but by the numbers in the input it fits now")
    else:
        said = f"Queued since {when_text(since)} and never evaluated by Kueue, although it fits"
    cq = ctx.cq_name or ""
    text = (f"{said}: {numbers} in {ctx.cq_text}, which is active. Kueue has not admitted or re-evaluated "
            f"it for {silent}: its scheduler (or the requeueing of inadmissible Workloads) looks stuck. Cluster "
            "admin: collect the Kueue controller logs (`kubectl -n kueue-system logs deploy/kueue-controller-manager`"
            "), `kubectl -n kueue-system get pods`, whether the metric kueue_admission_attempts_total still grows, "
            "and the pending-workloads view (`kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/"
            f"clusterqueues/{cq}/pendingworkloads`); restarting the Kueue controller makes it evaluate every queue "
            "again.")
    source = "Estimate" if ctx.requests_source == "Estimate" else "Objects"
    lines = [{"flavor": f.flavor, "resource": f.resource, "requested": quota.exact(f.resource, f.requested),
              "nominal": quota.exact(f.resource, f.nominal), "used": quota.exact(f.resource, f.used), "source": source}
             for f in fits]
    evidence = [ctx.condition_evidence("QuotaReserved")] if ctx.cond("QuotaReserved") else []
    if requeued is not None:
        evidence += [ctx.condition_evidence("Evicted"), ctx.condition_evidence("Requeued")]
    evidence.append(ctx.object_evidence("ClusterQueue", cq, "status.flavorsReservation", "Fits",
                                        numbers[:512]))
    return Finding(reason, Cause.KUEUE_STALLED, text, since=since, quota=lines,
                   flavors=list(dict.fromkeys(f.flavor for f in fits)), evidence=evidence,
                   hints=["kubectl -n kueue-system get pods",
                          "kubectl -n kueue-system logs deploy/kueue-controller-manager",
                          f"kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{cq}"
                          "/pendingworkloads"])
