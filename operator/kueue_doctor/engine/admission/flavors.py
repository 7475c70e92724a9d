"""Flavor assignment failed: which failure decides, and the quota numbers behind it.

Kueue keeps, per pod set and resource group, the least severe flavor failure, and reports the most
severe group (`resolveNoFitReason`); `Severity` names those ranks and `_BY_SEVERITY` maps each rank to
the verdict it gives. Neighbours: `kueue_message.py` (the table that sends FLAVOR_ASSIGNMENT here),
`engine/quota.py` (the arithmetic).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import IntEnum
from functools import lru_cache
from itertools import product
from typing import Any, NamedTuple

from ...kube.objects import (
    conditions,
    format_duration,
    i,
    is_true,
    lst,
    m,
    s,
    spec,
    status,
    when_text,
)
from ...kube.quantity import parse
from ...kube.selectors import label_selector_matches
from ...state import Derived
from ...vocabulary import ActionBy, Cause, Reason
from .. import quota
from ..context import Context
from ..holders import Holder, quota_holders
from ..messages import FailureKind, FlavorFailure, ParsedMessage, Template
from ..pods.events import event_count
from ..rules import Finding, pairs
from ..victims import Victim, victims_of
from . import rollout, topology
from .fair_sharing import shares_stop_preemption
from .handlers import finding, handles
from .queues import cq_hint
from .stalled import STALL_AFTER, _tolerated


class Severity(IntEnum):
    """How bad a flavor failure is, in Kueue's order: higher is worse."""

    NONE = 0
    TOPOLOGY = 1  # TAS cannot place the pods now
    UNUSED_QUOTA = 2  # fits the maximum, not what is unused now
    MAXIMUM = 3  # above what the ClusterQueue can ever give
    NO_FIT = 4  # this flavor can never be used: not covered, missing, taints, node affinity, topology


SEVERITY = {
    FailureKind.RESOURCE_NOT_COVERED: Severity.NO_FIT, FailureKind.FLAVOR_NOT_FOUND: Severity.NO_FIT,
    FailureKind.UNTOLERATED_TAINT: Severity.NO_FIT, FailureKind.NODE_AFFINITY_MISMATCH: Severity.NO_FIT,
    FailureKind.TOPOLOGY_FLAVOR: Severity.NO_FIT, FailureKind.EXCEEDS_MAXIMUM_CAPACITY: Severity.MAXIMUM,
    FailureKind.INSUFFICIENT_UNUSED_QUOTA: Severity.UNUSED_QUOTA, FailureKind.TOPOLOGY_PLACEMENT: Severity.TOPOLOGY,
    # the flavor can never take this pod set: its topology request does not fit the Topology's levels, Kueue
    # cannot evaluate it, a scaled-up slice must keep its original flavor, or the flavor is not a candidate
    FailureKind.TOPOLOGY_REQUEST: Severity.NO_FIT, FailureKind.TOPOLOGY_ERROR: Severity.NO_FIT,
    FailureKind.SLICE_FLAVOR_MISMATCH: Severity.NO_FIT, FailureKind.FLAVOR_SKIPPED: Severity.NO_FIT,
    FailureKind.NODE_REPLACEMENT: Severity.TOPOLOGY,  # a failed node of a TAS placement, no replacement now
}
# Kueue's granular QuotaReserved reasons (v0.20 default) name the decisive severity directly
GRANULAR_SEVERITY = {"NoMatchingFlavor": Severity.NO_FIT, "ExceedsMaxQuota": Severity.MAXIMUM,
                     "WaitingForQuota": Severity.UNUSED_QUOTA, "TopologyPlacementFailed": Severity.TOPOLOGY}

EXCEEDS_CAUSES = (Cause.EXCEEDS_MAXIMUM_CAPACITY, Cause.EXCEEDS_NOMINAL_QUOTA, Cause.BORROWING_LIMIT_REACHED,
                  Cause.EXCEEDS_COHORT_QUOTA)
VERDICTS = [
    *pairs(Reason.QUEUE_MISCONFIGURED, Cause.RESOURCE_NOT_COVERED, Cause.FLAVOR_NOT_FOUND, Cause.TOPOLOGY_MISMATCH,
           Cause.NO_MATCHING_FLAVOR),
    *pairs(Reason.EXCEEDS_MAX_QUOTA, *EXCEEDS_CAUSES, Cause.TOPOLOGY_PLACEMENT_FAILED),
    *pairs(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA, Cause.BORROWING_LIMIT_REACHED,
           Cause.TOPOLOGY_PLACEMENT_FAILED),
    *pairs(Reason.WAITING_FOR_PREEMPTION, Cause.PREEMPTION_FAILED, Cause.PREEMPTION_IN_PROGRESS),
    (Reason.UNKNOWN, Cause.UNRECOGNIZED_MESSAGE),
]


_q = quota.said  # a figure Kueue or a quota line wrote, as a sentence puts it


def admitted_in(cq: str | None) -> str:
    return (f"kubectl get workloads -A --field-selector status.admission.clusterQueue={cq}" if cq
            else "kubectl get workloads -A")


def _group_of(ctx: Context, f: FlavorFailure) -> Any:
    """The resource group a failure belongs to: by resource, else by flavor; one group when unknown."""
    if ctx.cq is None:
        return "*"
    groups = ctx.state.derived(RESOURCE_GROUPS)
    key = (ctx.cq_name or "", f.resource, f.flavor)
    if key in groups:
        return groups[key]
    if f.resource:
        n = quota.resource_group_of(ctx.cq, f.resource)
        found: Any = n if n >= 0 else f"resource:{f.resource}"  # not covered at all: a group of its own
    else:
        n = quota.flavor_group_of(ctx.cq, f.flavor or "")
        found = n if n >= 0 else "*"
    groups[key] = found
    return found


RESOURCE_GROUPS: Derived[dict[tuple[str, str | None, str | None], Any]] = Derived(
    "resource group of a resource or flavor in a ClusterQueue", lambda _: {})


def _severity(f: FlavorFailure, placed: frozenset[FlavorFailure]) -> Severity | None:
    """A maximum exceeded only because of another pod set's tentative placement, where the others could go
    elsewhere, is no "never": quota freeing (or the next attempt's placement) can let it in."""
    return Severity.UNUSED_QUOTA if f in placed else SEVERITY.get(f.kind)


def _placed_elsewhere(ctx: Context, failures: list[FlavorFailure]) -> frozenset[FlavorFailure]:
    """The "previously considered podsets requests (P) + current podset request (C) > maximum capacity (M)"
    failures with C <= M (so P, the pod sets placed before, made it too much) for which some placement of all
    pod sets in the resource group's flavors stays within every flavor's maximum Kueue stated."""
    soft = [f for f in failures if f.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY and f.previous and f.resource
            and (parse(f.previous) or 0) > 0 and _le(parse(f.requested), parse(f.maximum))]
    return frozenset(f for f in soft if _fitting_placement(ctx, failures, f.resource or "") is not None)


def _le(a: Decimal | None, b: Decimal | None) -> bool:
    return a is not None and b is not None and a <= b


def _fitting_placement(ctx: Context, failures: list[FlavorFailure], resource: str) -> dict[str, str] | None:
    """An assignment (pod set -> flavor) of every pod set requesting `resource` to one flavor of its resource
    group with each flavor's total within the maximum Kueue stated for it (unknown maxima: no limit); {} when
    there are too many to try (not provably never), None when there is none."""
    flavors: list[str] = []
    n = quota.resource_group_of(ctx.cq, resource)
    if ctx.cq is not None and n >= 0:
        group = m(lst(spec(ctx.cq).get("resourceGroups"))[n])
        flavors = [s(m(fl).get("name")) or "" for fl in lst(group.get("flavors"))]
    for f in failures:
        if f.resource == resource and f.flavor and f.flavor not in flavors:
            flavors.append(f.flavor)
    maxima: dict[str, Decimal] = {}
    for f in failures:
        if f.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY and f.resource == resource and f.flavor:
            top = parse(f.maximum)
            if top is not None:
                maxima[f.flavor] = top
    needs = tuple((ps, v) for ps, v in ((ps, r.get(resource)) for ps, r in ctx.requests.items())
                  if v is not None and v > 0)
    found = _placement_search(tuple(flavors), tuple(sorted(maxima.items())), needs)
    return dict(found) if found is not None else None


@lru_cache(maxsize=1024)
def _placement_search(flavors: tuple[str, ...], maxima: tuple[tuple[str, Decimal], ...],
                      needs: tuple[tuple[str, Decimal], ...]) -> tuple[tuple[str, str], ...] | None:
    """The search of `_fitting_placement`, once per shape: Workloads of a queue repeat the same few."""
    if len(flavors) < 2 or not needs:
        return None
    if len(flavors) ** len(needs) > 4096:
        return ()  # too many to try: not provably never
    limit = dict(maxima)
    for choice in product(flavors, repeat=len(needs)):
        used: dict[str, Decimal] = {}
        for flavor, (_, need) in zip(choice, needs, strict=True):
            used[flavor] = used.get(flavor, Decimal(0)) + need
        if all(total <= limit.get(fl, total) for fl, total in used.items()):
            return tuple((ps, flavor) for flavor, (ps, _) in zip(choice, needs, strict=True))
    return None


def _per_podset(ctx: Context, failures: list[FlavorFailure], placed: frozenset[FlavorFailure]) -> tuple[str, str]:
    """"Per pod set: worker: flavor a over its maximum only with 8 cpu of earlier pod sets there (...); flavor b
    lacks 4 cpu of unused quota. master: fits (tentatively placed).", and " A placement within every flavor's
    maximum ... exists" when one does (so this is not a "never")."""
    by: dict[str, list[str]] = {}
    first = next(iter(ctx.requests), None)
    for f in failures:
        where = f"flavor {f.flavor}" if f.flavor else "?"
        if f in placed:
            r = f.resource or ""
            why = (f"{where} is over its maximum {_q(r, f.maximum)} {r} only with the {_q(r, f.previous)} of the pod "
                   f"sets placed before it there ({_q(r, f.previous)} + {_q(r, f.requested)} > {_q(r, f.maximum)}); "
                   "another placement fits")
        elif f.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY:
            r = f.resource or ""
            why = f"{where} can never give {_q(r, f.requested)} {r}" + (
                f" on top of {_q(r, f.previous)}" if f.previous and (parse(f.previous) or 0) > 0 else "") + \
                f" (maximum {_q(r, f.maximum)})"
        elif f.kind == FailureKind.INSUFFICIENT_UNUSED_QUOTA:
            why = f"{where} lacks {_q(f.resource or '', f.missing)} {f.resource} of unused quota now" + (
                ", counting the pod sets placed before it" if f.podset != first else "")
        else:
            why = f"{where}: {f.text}"
        by.setdefault(f.podset, []).append(why)
    parts = [f"{ps}: {'; '.join(whys[:4])}" for ps, whys in by.items()]
    # Kueue places pod sets in order and stops at the first that no flavor can ever take (flavorassigner's
    # assignFlavors): the ones after it were not evaluated; one short of unused quota only does not stop it
    order = list(ctx.requests)
    stopped = max((order.index(f.podset) for f in failures if f.podset in order and f not in placed
                   and SEVERITY.get(f.kind, Severity.NONE) >= Severity.MAXIMUM), default=len(order))
    groups = {s(m(p).get("name")) or "main": s(m(m(p).get("topologyRequest")).get("podSetGroupName"))
              for p in lst(ctx.spec.get("podSets"))}
    grouped = {groups.get(ps): ps for ps in by if groups.get(ps)}  # a TAS group's pod sets fail together
    parts += [f"{ps}: placed by TAS with {grouped[groups[ps]]} as one group (podSetGroupName {groups[ps]})"
              if groups.get(ps) in grouped else f"{ps}: fits (placed tentatively)" if n < stopped else
              f"{ps}: not evaluated (Kueue stops at the first pod set no flavor can take)"
              for n, ps in enumerate(order) if ps not in by]
    text, placement = "Per pod set: " + ". ".join(parts) + ".", ""
    for resource in dict.fromkeys(f.resource for f in failures if f in placed and f.resource):  # message order
        found = _fitting_placement(ctx, failures, resource)
        if found:
            shown = ", ".join(f"{ps} in {fl}" for ps, fl in found.items())
            placement += (f" A placement within every flavor's maximum of {resource} exists ({shown}): Kueue places "
                          "pod sets in order, so this is not a \"never\"; it can be admitted once quota frees up or a "
                          "later attempt places them so.")
    return text, placement


def _decisive_severity(ctx: Context, failures: list[FlavorFailure],
                       placed: frozenset[FlavorFailure] = frozenset()) -> Severity:
    """Kueue's resolveNoFitReason: per pod set and resource group the least severe flavor, the worst group."""
    groups: dict[tuple[str, Any], dict[str | None, Severity]] = {}
    for f in failures:
        sev = _severity(f, placed)
        if sev is None:
            continue
        flavors = groups.setdefault((f.podset, _group_of(ctx, f)), {})
        flavors[f.flavor] = max(flavors.get(f.flavor, Severity.NONE), sev)
    return max((min(fl.values()) for fl in groups.values()), default=Severity.NONE)


@handles(Template.FLAVOR_ASSIGNMENT, emits=VERDICTS)
def classify(ctx: Context, p: ParsedMessage) -> Finding:
    failures = [_legacy_borrowing_limit(ctx, f) if f.text.startswith(LEGACY_BORROWING_LIMIT) else f
                for f in p.failures]
    granular = ctx.cond_reason("QuotaReserved")
    if p.pending_preemptions or p.failed_preemptions or granular == "WaitingForPreemptedWorkloads":
        return _waiting_for_preemption(ctx, p)
    tas_only = _tas_only_flavor(ctx, failures)
    if tas_only is not None:
        return tas_only
    placed = _placed_elsewhere(ctx, failures)
    # nothing placed elsewhere (most messages): each failure's rank is its kind's, without a call per failure
    severities = {_severity(f, placed) for f in failures} if placed else {SEVERITY.get(f.kind) for f in failures}
    if len(severities) == 1:  # one rank for all (most messages): it decides, whatever the groups are
        severity = next(iter(severities)) or Severity.NONE
        decisive = failures
    else:
        severity = _decisive_severity(ctx, failures, placed)
        stated = GRANULAR_SEVERITY.get(granular)
        if stated is not None and stated in severities and not placed:
            severity = stated
        decisive = [f for f in failures if _severity(f, placed) == severity] or failures
    # a stated shortfall ("N more needed") first; a copy either way
    decisive = sorted(decisive, key=lambda f: f in placed) if placed else list(decisive)
    verdict = _BY_SEVERITY.get(severity)
    if verdict is not None:
        found = verdict(ctx, decisive, granular)
        if len({f.podset for f in failures}) > 1 or placed or len(ctx.requests) > 1:
            per, placement = _per_podset(ctx, failures, placed)
            found.message += " " + per + placement
            found.notes = (*found.notes, " " + per)  # what Kueue said per pod set: detail, kept when it fits
        return found
    text = f"Kueue could not fit it and wrote: {ctx.cond_message('QuotaReserved')[:600]}"
    return finding(Reason.UNKNOWN, Cause.UNRECOGNIZED_MESSAGE, text, ctx)


LEGACY_BORROWING_LIMIT = "borrowing limit for "
TAS_ONLY = "supports only TopologyAwareScheduling"  # tas_flavorassigner.go: a TAS-only flavor, no TAS request


def _tas_only_flavor(ctx: Context, failures: list[FlavorFailure]) -> Finding | None:
    """A pod set without a topology request skipped a flavor that places Pods only with TAS (a Node-less flavor of a
    Topology), and every other flavor can never take it: Kueue implies TAS for a Workload without a request only
    when every flavor of its ClusterQueue is TAS (tas_flavorassigner.go), so it waits until the owner asks for a
    topology. Said before the severities, which would blame the other flavors' maximum (raising it would send
    the Pods to Nodes that lack the resource)."""
    skipped = [f for f in failures if f.kind == FailureKind.TOPOLOGY_FLAVOR and f.detail == TAS_ONLY]
    if not skipped or any(f not in skipped and (SEVERITY.get(f.kind) or Severity.NONE) < Severity.MAXIMUM
                          for f in failures):
        return None
    podsets = {s(m(p).get("name")): m(p) for p in lst(ctx.spec.get("podSets"))}
    if any(podsets.get(f.podset, {}).get("topologyRequest") for f in skipped):
        return None  # it asks for a topology: the flavor was skipped for another reason
    flavor = skipped[0].flavor or "?"
    topology = s(spec(ctx.state.flavors.get(flavor) or {}).get("topologyName"))
    levels = [s(m(lv).get("nodeLabel")) or "?" for lv in lst(spec(ctx.state.topologies.get(topology or "") or {})
                                                              .get("levels"))]
    level = f" (a level of Topology {topology}: {', '.join(levels[:4])})" if topology and levels else ""
    others = "; ".join(f.text for f in failures if f not in skipped)[:300]
    others = f", and the other flavors can never take it ({others})" if others else ""
    text = (f"Flavor {flavor} of {ctx.cq_text} places Pods only with Topology-Aware Scheduling, and pod set "
            f"{skipped[0].podset} asks for no topology{_NO_TOPOLOGY_ANNOTATION}: Kueue uses a TAS-only flavor "
            f"for a Workload without a topology request only when every flavor of the ClusterQueue is TAS{others}"
            + f". The owner adds kueue.x-k8s.io/podset-preferred-topology: <level>{level} or "
            "kueue.x-k8s.io/podset-unconstrained-topology: \"true\" to the Pod template and submits it again; or "
            f"the platform admin makes every flavor of {ctx.cq_name} a TAS flavor.")
    return finding(Reason.QUEUE_MISCONFIGURED, Cause.TOPOLOGY_MISMATCH, text, ctx, ActionBy.WORKLOAD_OWNER,
                   flavors=_flavors_of(failures), notes=(others, _NO_TOPOLOGY_ANNOTATION))


_NO_TOPOLOGY_ANNOTATION = (" (no kueue.x-k8s.io/podset-required-topology, -preferred-topology or "
                           "-unconstrained-topology annotation on its Pod template)")


def _legacy_borrowing_limit(ctx: Context, f: FlavorFailure) -> FlavorFailure:
    """Kueue <= 0.9's "borrowing limit for R in flavor F exceeded" says usage plus the request passed nominal +
    borrowingLimit (fitsResourceQuota): over the maximum only when the request alone is; else it waits for the
    queue's running Workloads, and the shortfall is computed here."""
    res, flavor = f.resource or "", f.flavor or ""
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    req = _requested(ctx, f.podset, res)
    if fq is None or fq.borrowing_limit is None or req is None:
        return f
    cap = (fq.nominal or Decimal(0)) + fq.borrowing_limit
    if req > cap:
        return f._replace(requested=quota.exact(res, req), maximum=quota.exact(res, cap))
    used = quota.reserved_in(ctx.state, ctx.cq_name or "", flavor, res)
    short = used + req - cap if used is not None else None
    return f._replace(kind=FailureKind.INSUFFICIENT_UNUSED_QUOTA,
                      missing=quota.exact(res, short) if short is not None and short > 0 else None)


def _requested(ctx: Context, podset: str, resource: str) -> Decimal | None:
    return ctx.requests.get(podset, {}).get(resource)


def _queue_numbers(ctx: Context, flavor: str, res: str) -> dict[str, Any]:
    """What the ClusterQueue and its cohort declare and hold for (flavor, resource): the same for every
    Workload of the queue, so computed once per index (the quota-heavy clusters repeat it thousands of times)."""
    numbers = ctx.state.derived(QUEUE_NUMBERS)
    key = (ctx.cq_name or "", flavor, res)
    found = numbers.get(key)
    if found is not None:
        return found
    line: dict[str, Any] = {}
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    if fq is not None:
        nominal = quota.exact(res, fq.nominal)
        if nominal is not None:
            line["nominal"] = nominal
        if fq.borrowing_limit is not None:
            line["borrowingLimit"] = quota.exact(res, fq.borrowing_limit)
        if fq.lending_limit is not None:
            line["lendingLimit"] = quota.exact(res, fq.lending_limit)
    if ctx.cq is not None:
        used = quota.reserved_in(ctx.state, ctx.cq_name or "", flavor, res)
        if used is not None:
            line["used"] = quota.exact(res, used)
    borrowable = quota.cohort_borrowable(ctx.state, ctx.cq_name or "", flavor, res) if ctx.cohort else None
    if borrowable is not None:
        line["borrowable"] = quota.exact(res, borrowable)
    numbers[key] = line
    return line


QUEUE_NUMBERS: Derived[dict[tuple[str, str, str], dict[str, Any]]] = Derived("queue numbers per flavor/resource",
                                                                             lambda _: {}, numbers=True)


def quota_line(ctx: Context, f: FlavorFailure,
               numbers: dict[tuple[str, str, str], dict[str, Any]] | None = None) -> dict[str, Any]:
    """One status.quota entry; `numbers`: the QUEUE_NUMBERS memo, when the caller has it at hand."""
    res, flavor = f.resource or "", f.flavor or ""
    requested = f.requested or quota.exact(res, ctx.requests.get(f.podset, {}).get(res))
    queue = (numbers if numbers is not None else ctx.state.derived(QUEUE_NUMBERS)).get((ctx.cq_name or "", flavor, res))
    if queue is None:
        queue = _queue_numbers(ctx, flavor, res)
    # one dict display in the field order of the object (the queue numbers never repeat these keys)
    line: dict[str, Any] = {"flavor": flavor, "resource": res, "requested": requested, **queue}
    if requested is None:
        del line["requested"]
    if f.maximum:
        line["maximum"] = f.maximum
    if f.missing:
        line["missing"] = f.missing
    if f.podset and len(ctx.requests) > 1:  # several pod sets: which one this line is about
        line["podSet"] = f.podset
    # the amounts Kueue stated win; a request read from Pod templates is our own estimate
    line["source"] = "Kueue" if (f.maximum or f.missing) else "Estimate" if ctx.requests_source == "Estimate" \
        else "Objects"
    return line


def _with_line(failures: list[FlavorFailure]) -> list[FlavorFailure]:
    """The failures that name a resource and a flavor: those `_lines` gives a quota line, in that order."""
    return [x for x in failures if x.resource and x.flavor]


def _lines(ctx: Context, failures: list[FlavorFailure]) -> list[dict[str, Any]]:
    numbers = ctx.state.derived(QUEUE_NUMBERS)
    return [quota_line(ctx, x, numbers) for x in _with_line(failures)]


def _fits_when_reduced(ctx: Context, failures: list[FlavorFailure]) -> dict[str, Decimal] | None:
    """Per resource over a maximum, the smallest partial admission's request, when every one of them is within
    its maximum: Kueue admits the Workload with fewer Pods once that much is unused (None: it never fits)."""
    floors: dict[str, Decimal] = {}
    for f in failures:
        if f.kind != FailureKind.EXCEEDS_MAXIMUM_CAPACITY:
            continue
        res, maximum = f.resource or "", parse(f.maximum)
        floor = quota.partial_floor(ctx.wl, ctx.requests, res) if res else None
        if floor is None or maximum is None or floor > maximum:
            return None
        floors[res] = floor
    return floors or None


def _with_earlier_podsets(lines: list[dict[str, Any]], failures: list[FlavorFailure]) -> list[dict[str, Any]]:
    """"previously considered podsets requests (4) + current podset request (16) > maximum capacity (16)": the
    flavor can never give the sum (no other placement fits), so the line asks for the sum, not 16 against 16."""
    out = []
    for line, f in zip(lines, _with_line(failures), strict=True):
        before, now = parse(f.previous), parse(f.requested)
        if f.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY and before and now is not None:
            line = {**line, "requested": quota.exact(f.resource or "", before + now) or line.get("requested")}
        out.append(line)
    return out


def _exceeds_max(ctx: Context, failures: list[FlavorFailure], granular: str) -> Finding:
    f = next((x for x in failures if x.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY), failures[0])
    lines = _with_earlier_podsets(_lines(ctx, failures), failures)
    res, flavor = f.resource or "?", f.flavor or "?"
    floors = _fits_when_reduced(ctx, failures)
    if floors is not None:
        return _waits_for_partial_admission(ctx, failures, f, floors, lines)
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    previous = parse(f.previous) if f.previous else None
    need = _q(res, f.requested) or quota.fmt(res, _requested(ctx, f.podset, res)) or "?"
    nominal = quota.fmt(res, fq.nominal) if fq else None
    if ctx.cq is None:
        cause = Cause.EXCEEDS_MAXIMUM_CAPACITY
        limits = ("its quota cannot be read: the ClusterQueue object is not in the input" if ctx.cq_name else
                  "Kueue's figure; add the LocalQueues to the dump for the queue's own numbers")
        fix = "raise the ClusterQueue's quota or lower the request"
    elif not ctx.cohort:
        cause = Cause.EXCEEDS_NOMINAL_QUOTA
        limits = f"nominal {nominal}, no cohort" if nominal else "no cohort"
        fix = ("raise nominalQuota, put the ClusterQueue in a cohort, or lower the request (the Pod count x per-Pod "
               "requests)")
    elif (tree := quota.cohort_tree(ctx.state, ctx.cq_name or "", flavor, res)) is not None and len(tree.path) > 2:
        cause, limits, fix = _tree_limits(tree, res, f.maximum)
    elif (fq is not None and fq.borrowing_limit is not None
          and parse(f.maximum) == (fq.nominal or 0) + fq.borrowing_limit):
        cause = Cause.BORROWING_LIMIT_REACHED
        limits = f"nominal {nominal} + borrowingLimit {quota.fmt(res, fq.borrowing_limit)} in cohort {ctx.cohort}"
        fix = "raise borrowingLimit or nominalQuota, or lower the request"
    else:
        cause = Cause.EXCEEDS_COHORT_QUOTA
        limits = f"nominal {nominal} + what cohort {ctx.cohort} can lend" if nominal else f"cohort {ctx.cohort}"
        fix = "add quota to the cohort or this ClusterQueue, or lower the request"
    earlier = f" on top of {_q(res, f.previous)} for earlier pod sets" if previous else ""
    text = (f"Needs {need} {res} in flavor {flavor}{earlier} but {ctx.cq_text} can never give more than "
            f"{_q(res, f.maximum) or '?'} ({limits}): {fix}.")
    one_flavor, told = _one_flavor(ctx, failures)
    others = [x for x in failures if x is not f and x.resource and x not in told]
    if others:
        shown = "; ".join(f"{x.resource} in {x.flavor}: needs {_q(x.resource or '', x.requested) or '?'}, max "
                          f"{_q(x.resource or '', x.maximum) or '?'}"
                          f"{_borrowing_limit_note(ctx, x)}" for x in others[:3])
        more = f" and {len(others) - 3} more in status.quota" if len(others) > 3 else ""
        text += f" Also short: {shown}{more}."
    text += one_flavor
    action = ActionBy.QUEUE_ADMIN if cause == Cause.EXCEEDS_NOMINAL_QUOTA else ActionBy.CLUSTER_ADMIN
    return finding(Reason.EXCEEDS_MAX_QUOTA, cause, text, ctx, action, quota=lines,
                    flavors=_flavors_of(failures), hints=[cq_hint(ctx.cq_name)],
                    blocker=flavor_blocker("Quota", f, res, requested=need, available=f.maximum, source="Kueue"))


def _one_flavor(ctx: Context, failures: list[FlavorFailure]) -> tuple[str, list[FlavorFailure]]:
    """(text, the failures it names) for the resource groups over their maximum in several flavors: Kueue gives a
    pod set all the resources of a resource group from one flavor (flavorassigner findFlavorForPodSets), so those
    flavors are alternatives: one with enough of each is enough, whatever the others lack."""
    groups: dict[tuple[str, Any], dict[str, list[FlavorFailure]]] = {}
    for x in failures if ctx.cq is not None else []:  # without the queue its resource groups are unknown
        if x.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY and x.flavor and x.resource:
            groups.setdefault((x.podset, _group_of(ctx, x)), {}).setdefault(x.flavor, []).append(x)
    parts, told = [], []
    for (podset, _), flavors in groups.items():
        if len(flavors) < 2:
            continue
        resources = list(dict.fromkeys(x.resource or "" for xs in flavors.values() for x in xs))
        lacks = "; ".join(f"{fl} lacks " + ", ".join(f"{x.resource} (max {_q(x.resource or '', x.maximum) or '?'} < "
                                                     f"{_q(x.resource or '', x.requested) or '?'}"
                                                     f"{_borrowing_limit_note(ctx, x)})" for x in xs)
                          for fl, xs in flavors.items())
        told += [x for xs in flavors.values() for x in xs]
        of = f" pod set {podset}'s" if len(ctx.requests) > 1 else " its"
        parts.append(f" Kueue takes all{of} {' and '.join(resources)} from one flavor of the resource group, and no "
                     f"flavor can give it: {lacks}. They are alternatives: raising one flavor's quota enough is enough"
                     + (" for that group." if len(groups) > 1 else ", not all of them."))
    return "".join(parts), told


def _borrowing_limit_note(ctx: Context, x: FlavorFailure) -> str:
    """"; nominal 5 + borrowingLimit 0: it never borrows" when the flavor's own borrowingLimit makes its maximum."""
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, x.flavor or "", x.resource or "")
    if not ctx.cohort or fq is None or fq.borrowing_limit is None or parse(x.maximum) != (
            fq.nominal or 0) + fq.borrowing_limit:
        return ""
    res = x.resource or ""
    return (f"; nominal {quota.fmt(res, fq.nominal)} + borrowingLimit {quota.fmt(res, fq.borrowing_limit)}"
            + (f": it never borrows from cohort {ctx.cohort}, only its own nominalQuota counts"
               if fq.borrowing_limit == 0 else ""))


def _waits_for_partial_admission(ctx: Context, failures: list[FlavorFailure], f: FlavorFailure,
                                 floors: dict[str, Decimal], lines: list[dict[str, Any]]) -> Finding:
    """The whole Workload is over a maximum, its smallest partial admission is not: no one needs to act."""
    res, flavor = f.resource or "?", f.flavor or "?"
    need = _q(res, f.requested) or quota.fmt(res, _requested(ctx, f.podset, res)) or "?"
    smallest = ", ".join(f"{quota.fmt(r, v)} {r}" for r, v in floors.items())
    text = (f"Needs {need} {res} in flavor {flavor} with all its Pods, more than {ctx.cq_text} can ever give "
            f"({_q(res, f.maximum) or '?'}), but it allows partial admission (minCount): at its smallest it asks "
            f"{smallest}, within the maximum. Kueue admits it with fewer Pods once that much quota is unused: nobody "
            f"needs to act. To run it whole, raise the ClusterQueue's quota to {need} {res}.")
    return finding(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA, text, ctx, ActionBy.NOBODY,
                   quota=lines, flavors=_flavors_of(failures), hints=[admitted_in(ctx.cq_name), cq_hint(ctx.cq_name)],
                   blocker=flavor_blocker("Quota", f, res, requested=quota.exact(res, floors.get(res)),
                                          available=f.maximum, source="Kueue"))


def _tree_limits(tree: quota.CohortTree, res: str, stated: str | None) -> tuple[Cause, str, str]:
    """(cause, limits, fix) of ExceedsMaxQuota in a cohort tree: the borrowingLimit that binds, or the tree's
    capacity; our tree arithmetic is an estimate, Kueue's stated maximum wins when they differ."""
    ours = tree.potential()
    estimate = f"; kueue-doctor's estimate of the tree gives {quota.fmt(res, ours)}" if (
        stated and parse(stated) != ours) else ""
    levels = tree.levels(res)
    binding = tree.binding_limit()
    if binding is not None:
        who = "its own" if binding is tree.path[0] else f"{binding.kind} {binding.name}'s"
        limits = (f"capped by {who} borrowingLimit {quota.fmt(res, binding.quota.borrowing_limit)}; {levels}"
                  f"{estimate}")
        return (Cause.BORROWING_LIMIT_REACHED, limits,
                f"raise the borrowingLimit of {binding.kind} {binding.name}, add quota below it, or lower the request")
    return (Cause.EXCEEDS_COHORT_QUOTA, f"all the cohort tree can lend: {levels}{estimate}",
            "add quota to the tree (a Cohort's or a ClusterQueue's nominalQuota, or a higher lendingLimit), "
            "or lower the request")


def cumulative(failures: list[FlavorFailure], first: FlavorFailure) -> FlavorFailure:
    """Kueue's shortfall for the whole Workload in `first`'s flavor and resource: it places pod sets in order
    and counts what the earlier ones asked of the flavor (flavorassigner's assumed usage), so the last pod set's
    "N more needed" for that pair is the sum for all of them, the earlier ones only a part."""
    if first.kind != FailureKind.INSUFFICIENT_UNUSED_QUOTA:
        return first
    same = [x for x in failures if x.kind == first.kind and (x.flavor, x.resource) == (first.flavor, first.resource)]
    return max(same, key=lambda x: parse(x.missing) or Decimal(0)) if len(same) > 1 else first


def _waiting_for_quota(ctx: Context, failures: list[FlavorFailure], granular: str) -> Finding:
    f = cumulative(failures, failures[0])
    lines = _lines(ctx, failures)
    # f's own line is among them (quota_line is pure): the one of the same position among the failures with a line
    line = lines[_with_line(failures).index(f)] if f.resource and f.flavor else {}
    together = f is not failures[0]
    res, flavor = f.resource or "?", f.flavor or "?"
    cause = Cause.INSUFFICIENT_UNUSED_QUOTA
    if f.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY:  # over a maximum only with other pod sets placed there
        text = (f"Pod set {f.podset} fits the maximum of flavor {flavor} ({_q(res, f.requested)} {res} of "
                f"{_q(res, f.maximum)}) only if the pod sets placed before it ({_q(res, f.previous)} {res}) go to "
                f"another flavor of {ctx.cq_text}.")
        return finding(Reason.WAITING_FOR_QUOTA, cause, text, ctx, ActionBy.NOBODY, quota=lines,
                       flavors=_flavors_of(failures), hints=[admitted_in(ctx.cq_name), cq_hint(ctx.cq_name)],
                       blocker=flavor_blocker("Quota", f, res, requested=f.requested, available=f.maximum,
                                              source="Kueue"))
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    replaced = replaced_slice(ctx, flavor, res) if f.resource and f.flavor else None
    if replaced is not None:
        return _scale_up(ctx, failures, f, line, fq, replaced)
    held_by = None  # a parent Cohort whose borrowingLimit holds it back while quota is unused above it
    if fq is not None and fq.borrowing_limit is not None and ctx.cohort:
        used = parse(line.get("used")) or Decimal(0)
        req = parse(line.get("requested")) or Decimal(0)
        if used + req > (fq.nominal or Decimal(0)) + fq.borrowing_limit:
            cause = Cause.BORROWING_LIMIT_REACHED
    if cause == Cause.INSUFFICIENT_UNUSED_QUOTA and ctx.cohort and f.resource and f.flavor:
        tree = quota.cohort_tree(ctx.state, ctx.cq_name or "", flavor, res)
        node = tree.limit_holding_back() if tree is not None and len(tree.path) > 2 else None
        if tree is not None and node is not None and node is not tree.path[0] and node.kind == "Cohort":
            cause, held_by = Cause.BORROWING_LIMIT_REACHED, node
    detail = _usage_detail(ctx, res, flavor, line)
    reserving = i(ctx.state.read_numbers(ctx.cq).get("reservingWorkloads"))
    own = rollout.rollout(ctx, flavor, res) if cause == Cause.INSUFFICIENT_UNUSED_QUOTA and ctx.pods else None
    deadlock = own is not None and (missing := parse(f.missing)) is not None and own.others < missing
    release = "only its own Deployment's old Pods hold what it lacks" if deadlock else \
        "it is admitted when running Workloads release quota"
    text = (f"Needs {_q(res, f.missing) or '?'} more {res} in flavor {flavor}"
            + (", all its pod sets together," if together else "")
            + f" than {ctx.cq_text} has unused now{detail}: {release}"
            + (f" ({reserving} hold quota in {ctx.cq_name})" if reserving else "")
            + _not_ready_text(ctx)
            + (f"; Cohort {held_by.name}'s borrowingLimit {quota.fmt(res, held_by.quota.borrowing_limit)} stops "
               "its subtree from borrowing more, though quota is unused above it" if held_by is not None else
               _own_limit_text(ctx, res, flavor, line, fq) if cause == Cause.BORROWING_LIMIT_REACHED else "")
            # its own quota lent out is taken back without borrowing, whatever limit holds the subtree; idle quota a
            # lendingLimit withholds is not, when a Cohort's borrowingLimit binds first
            + "." + (_lent_text(ctx, flavor, res, parse(f.missing)) + _uncovered_text(ctx, flavor, res)
                     + (_withheld_text(ctx, flavor, res, parse(f.missing)) if held_by is None else "")
                     if ctx.cohort and f.flavor and f.resource else ""))
    requested, missing = parse(line.get("requested")), parse(f.missing)
    # together: the request alone is not what was short
    room = requested - missing if requested is not None and missing is not None and requested >= missing and \
        not together else None
    lacking = _short(failures)
    why_not = _no_preemption(ctx, res, line, flavor, missing, lacking,
                             room if len(ctx.requests) == 1 and len(lacking) == 1 else None)
    text += why_not.text + (_rollout_text(ctx, own, res, missing, deadlock, fq) if own is not None else
                            "" if why_not.advice else _GO_FASTER)
    stale = _stale_priority(ctx)
    text += stale
    admin = bool(stale) or why_not.admin  # the cluster admin's either way
    unused = quota.exact(res, room) if room is not None else None
    floor = quota.partial_floor(ctx.wl, ctx.requests, res) if f.resource else None
    if floor is not None:  # Kueue also tries fewer Pods, down to minCount
        short = floor - (requested - missing) if unused is not None and requested is not None and \
            missing is not None else None
        text += (f" It allows partial admission (minCount): at its smallest it asks {quota.fmt(res, floor)} {res}"
                 + (f", so Kueue admits it with fewer Pods once {quota.fmt(res, short)} more is unused."
                    if short is not None and short > 0 else ", so Kueue may admit it sooner with fewer Pods."))
    actor = ActionBy.CLUSTER_ADMIN if admin else ActionBy.WORKLOAD_OWNER if deadlock else ActionBy.NOBODY
    blocker = flavor_blocker("Quota", f, res, requested=line.get("requested"), available=unused,
                             source="Kueue" if f.missing else "Objects")
    if together:  # the message's shortfall is all pod sets', so is the blocker's request (not the last one's own)
        blocker = _together_blocker(ctx, failures, f, blocker)
    return finding(Reason.WAITING_FOR_QUOTA, cause, text, ctx, actor,
                    quota=lines, flavors=_flavors_of(failures), hints=[admitted_in(ctx.cq_name), cq_hint(ctx.cq_name)],
                    blocker=blocker, notes=(_DEFAULT_UNAVAILABLE,) if own is not None else (_GO_FASTER,))


def _together_blocker(ctx: Context, failures: list[FlavorFailure], f: FlavorFailure,
                      blocker: dict[str, Any]) -> dict[str, Any]:
    """status.blocker of a shortfall Kueue stated for all pod sets together (`cumulative`): a LeaderWorkerSet group's
    leader 1 cpu and worker 1 cpu, "2 more needed" on the worker's part. Kueue counts the pod sets placed before
    `f`'s in the same flavor (flavorassigner's assignmentUsage), so the blocker asks what they and `f`'s ask together,
    with the unused quota that leaves, for no pod set in particular. Only where every such pod set took that flavor:
    Kueue named it for each of them, or the resource group has no other; unchanged otherwise."""
    res = f.resource or ""
    named = {x.podset for x in failures if (x.kind, x.flavor, x.resource) == (f.kind, f.flavor, f.resource)}
    group = quota.resource_group_of(ctx.cq, res) if ctx.cq is not None and res else -1
    flavors = lst(m(lst(spec(ctx.cq or {}).get("resourceGroups"))[group]).get("flavors")) if group >= 0 else []
    asks: list[Decimal] = []
    for ps in lst(ctx.spec.get("podSets")):
        podset = s(m(ps).get("name")) or "main"
        ask = _requested(ctx, podset, res)
        if ask is None or (ask > 0 and podset not in named and len(flavors) != 1):
            return blocker  # unknown, or it may have gone to another flavor
        asks.append(ask)
        if podset == f.podset:
            break
    missing = parse(f.missing)
    if f.podset not in named or missing is None:
        return blocker
    total = sum(asks, Decimal(0))
    out = {k: v for k, v in blocker.items() if k not in ("podSet", "requested", "available")}
    out["requested"] = quota.exact(res, total)
    if total >= missing:
        out["available"] = quota.exact(res, total - missing)
    return {k: out[k] for k in ("kind", "name", "flavor", "requested", "available", "source") if out.get(k) is not None}


_GO_FASTER = " To go faster, add quota or lower the request."  # the remedies say it too: an aside, Finding.notes
_DEFAULT_UNAVAILABLE = " (the default 25% of fewer than 4 replicas rounds down to 0)"  # an aside: Finding.notes


def _rollout_text(ctx: Context, own: rollout.Rollout, res: str, missing: Decimal | None, deadlock: bool,
                  fq: quota.FlavorQuota | None) -> str:
    """The Deployment's rolling update waits for quota its own old Pods hold (kueue#5118)."""
    pods = ", ".join(own.old_pods[:3]) + (f" and {len(own.old_pods) - 3} more" if len(own.old_pods) > 3 else "")
    why = (f"its maxUnavailable is 0 ({own.replicas} replica(s))" if own.max_unavailable is not None else
           f"with maxUnavailable 0{_DEFAULT_UNAVAILABLE}")
    text = (f" This Pod belongs to a rolling update of Deployment {ctx.ns}/{own.deployment}, and "
            f"{quota.fmt(res, own.held)} {res} of that quota is held by its own old Pods ({pods}, ReplicaSet "
            f"{', '.join(own.old_sets)}): {why}, "
            "the Deployment controller deletes an old Pod only once a new one is available, and the new ones wait "
            "for the quota the old ones hold")
    if not deadlock:
        return text + (f"; other Workloads of {ctx.cq_text} hold {quota.fmt(res, own.others)} {res} and may free "
                       "enough when they finish.")
    raise_to = (f" (nominalQuota {quota.fmt(res, fq.nominal)} -> {quota.fmt(res, fq.nominal + missing)})"
                if fq is not None and fq.nominal is not None and missing is not None else "")
    return text + (f", and no other Workload of {ctx.cq_text} holds enough to free the {quota.fmt(res, missing)} "
                   f"{res} it lacks: the rollout never progresses. Owner: set the Deployment's "
                   "spec.strategy.rollingUpdate.maxUnavailable to 1 or more (or spec.strategy.type Recreate), or "
                   f"delete an old Pod; or the queue admin leaves room for the surge Pods{raise_to}.")


def _own_limit_text(ctx: Context, res: str, flavor: str, line: dict[str, Any], fq: quota.FlavorQuota | None) -> str:
    """Its own borrowingLimit caps it below what it asks: Kueue's `available` is at most nominal + borrowingLimit
    less its own usage (resource_node.go), so nothing the cohort frees or reclaims makes room, only its own
    Workloads' quota."""
    if fq is None or fq.borrowing_limit is None:
        return "; the borrowingLimit stops it from borrowing more"
    cap = (fq.nominal or Decimal(0)) + fq.borrowing_limit
    return (f"; its borrowingLimit {quota.fmt(res, fq.borrowing_limit)} caps what it may hold in flavor {flavor} at "
            f"{quota.fmt(res, cap)} {res} (nominal {quota.fmt(res, fq.nominal)} + borrowingLimit), "
            f"{_q(res, line.get('used')) or '0'} of it held by its own Workloads: only they can make room, no quota "
            f"elsewhere in cohort {ctx.cohort} can")


def _short(failures: list[FlavorFailure]) -> frozenset[tuple[str, str]]:
    """The (flavor, resource)s Kueue's message says lack unused quota: a superset of those it would preempt for."""
    return frozenset((f.flavor, f.resource) for f in failures
                     if f.kind == FailureKind.INSUFFICIENT_UNUSED_QUOTA and f.flavor and f.resource)


def _stale_priority(ctx: Context) -> str:
    """The Workload's priority is not its WorkloadPriorityClass's value (in the input): the class was changed and
    the Workload kept the old value, so queue order and preemption use it (kueue#8322; Kueue v0.16+ follows a
    class's change within seconds)."""
    ref = m(ctx.spec.get("priorityClassRef"))
    wpc = s(ref.get("name")) if s(ref.get("kind")) == "WorkloadPriorityClass" else (
        s(ctx.spec.get("priorityClassName"))
        if s(ctx.spec.get("priorityClassSource")) == "kueue.x-k8s.io/workloadpriorityclass" else None)
    cls = ctx.state.priority_classes.get(wpc or "")
    value = cls.get("value") if cls is not None else None
    if not isinstance(value, int) or value == ctx.priority:
        return ""
    return (f" Its priority {ctx.priority} is not that of its WorkloadPriorityClass {wpc}, which says {value}: "
            "Kueue orders and preempts by the Workload's own value, kept from before the class changed (kueue#8322; "
            "Kueue v0.16 and later follow a class's change). Cluster admin: upgrade Kueue, or set the Workload's "
            f"spec.priority to {value}.")


def _not_ready_text(ctx: Context) -> str:
    """Holders of this ClusterQueue's quota whose Pods are not ready (PodsReady=False): quota held by Pods that
    do not run yet (starting, unschedulable, crashing), which the waiting user cannot see from here (kueue#4329:
    GPUs fragmented over nodes). No threshold on how long: the text changes with the holders, never with the
    clock alone (the operator writes only on change)."""
    stuck = sorted((h.not_ready_since, h.key) for h in quota_holders(ctx, ctx.cq_name or "").holders
                   if h.not_ready_since is not None and h.key != (ctx.ns, ctx.name))
    if not stuck:
        return ""
    names = ", ".join(f"{ns}/{nm}" for _, (ns, nm) in stuck[:3]) + (f" and {len(stuck) - 3} more"
                                                                   if len(stuck) > 3 else "")
    return (f"; of those, {names} {'has' if len(stuck) == 1 else 'have'} had Pods not ready since "
            f"{when_text(stuck[0][0])} (PodsReady=False: starting, unschedulable or failing, see "
            f"{'its' if len(stuck) == 1 else 'their'} diagnoses), quota held by Pods that do not run, which comes "
            "back when they run or when waitForPodsReady evicts them")


_PREEMPTING = {"LowerPriority": "lower", "LowerOrNewerEqualPriority": "lower (or equal and newer)"}


@dataclass(frozen=True)
class WhyNot:
    """Why Kueue preempts nothing for it, as message text; `advice`: the text says what to do (no generic advice
    follows); `admin`: only the cluster admin can end the wait."""

    text: str = ""
    advice: bool = False
    admin: bool = False


_NOTHING = WhyNot()


@dataclass(frozen=True)
class CohortHolder:
    """A Workload of another ClusterQueue of the cohort (or cohort tree) holding quota this Workload is short of."""

    cq: str
    holder: Holder
    borrowing: bool  # its ClusterQueue reserves more than its nominal quota in one of the short (flavor, resource)s


def _no_preemption(ctx: Context, res: str, line: dict[str, Any], flavor: str = "", missing: Decimal | None = None,
                   short: frozenset[tuple[str, str]] = frozenset(), fits_now: Decimal | None = None) -> WhyNot:
    """Why Kueue does not preempt for it, when its policies would (the user's first question: "preemption is on,
    why does it wait?"): it asks more than the nominal quota and may not borrow while preempting (flavorassigner
    fitsResourceQuota); none of its own queue's holders is of lower priority; every holder in the cohort is out of
    Kueue's reach (`_cohort_out_of_reach`); or, when lower-priority holders hold enough of a topology-aware flavor
    and Kueue still preempts none, Kueue's topology check stops it (kueue#10929). `short`: every (flavor, resource)
    Kueue's message says is short; `fits_now`: the most of `res` it could be admitted with now."""
    preemption = m(spec(ctx.cq or {}).get("preemption"))
    policy = s(preemption.get("withinClusterQueue")) or "Never"
    reclaim = (s(preemption.get("reclaimWithinCohort")) or "Never") if ctx.cohort else "Never"
    if not ctx.cq_name:
        return _NOTHING
    short = short or frozenset({(flavor, res)})
    within = _within_never(ctx, res, line, flavor, missing, short) if policy == "Never" else ""
    if policy not in _PREEMPTING and reclaim == "Never":
        return WhyNot(within, advice=True) if within else _NOTHING
    if not quota.tries_preemption(ctx.state, ctx.cq_name, parse(line.get("requested")), parse(line.get("nominal"))):
        return _must_borrow(ctx, res, line, flavor, missing, short, policy, reclaim)
    shares = shares_stop_preemption(ctx, res, flavor, line, missing, short, policy, reclaim,
                                    lambda cq: quota_holders(ctx, cq).holders)
    holders = quota_holders(ctx, ctx.cq_name).priorities if policy in _PREEMPTING else []
    if holders and holders[0] < ctx.priority:
        if shares:
            return WhyNot(within + shares, advice=True)
        victims = _unused_victims(ctx, policy, res, flavor, missing)
        return WhyNot(victims, advice=True, admin=True) if victims else _NOTHING
    text = ""
    if holders:
        span = str(holders[0]) if holders[0] == holders[-1] else f"{holders[0]} to {holders[-1]}"
        text = (f" Kueue does not preempt for it: withinClusterQueue {policy} takes quota only from "
                f"{_PREEMPTING[policy]} priority Workloads, and the {len(holders)} holding quota in {ctx.cq_name} have "
                f"priority {span}, against its {ctx.priority}.")
    if shares:  # the shares are what stop it across queues; the message has no room for both texts
        return WhyNot(within + shares, advice=True)
    cohort = _cohort_out_of_reach(ctx, res, line, flavor, short, reclaim, fits_now)
    return WhyNot(within + text + cohort.text, advice=cohort.advice or bool(within))


def _within_never(ctx: Context, res: str, line: dict[str, Any], flavor: str, missing: Decimal | None,
                  short: frozenset[tuple[str, str]]) -> str:
    """withinClusterQueue Never, while Workloads of its own queue of lower priority hold enough that Kueue, allowed
    to preempt them, would let it in (`lower_priority_room`)."""
    lower = lower_priority_room(ctx, res, flavor, line) if len(short) <= 1 else []
    if not lower:
        return ""
    return (f" withinClusterQueue Never keeps Kueue from preempting {_named(lower)} in {ctx.cq_name}, below its "
            f"priority {ctx.priority}, which would make room for it: the cluster admin can set "
            "preemption.withinClusterQueue to LowerPriority.")


def lower_priority_room(ctx: Context, res: str, flavor: str, line: Mapping[str, Any]) -> list[Holder]:
    """The Workloads of its own ClusterQueue of lower priority than it holding `res` in `flavor`, when preempting
    them (withinClusterQueue LowerPriority) would cover Kueue's "N more needed": its `available` with their usage
    gone, its borrowingLimit and the cohort's free quota counted; and Kueue looks for victims at all
    (fitsResourceQuota: within nominal quota, or allowed to preempt while borrowing). [] otherwise."""
    missing = parse(line.get("missing"))
    if missing is None or not ctx.cq_name or not quota.tries_preemption(
            ctx.state, ctx.cq_name, parse(line.get("requested")), parse(line.get("nominal"))):
        return []
    priorities, held = _held_by_priority(ctx, ctx.cq_name, flavor, res)
    freed = held[bisect_left(priorities, ctx.priority)]  # what those of lower priority hold
    gain = quota.own_room_gain(ctx.state, ctx.cq_name, flavor, res, freed) if freed > 0 else None
    if gain is None or gain < missing:
        return []
    return [h for h in quota_holders(ctx, ctx.cq_name).holders
            if h.priority < ctx.priority and h.usage.get((flavor, res), 0) > 0]


def _held_by_priority(ctx: Context, cq: str, flavor: str, res: str) -> tuple[list[int], list[Decimal]]:
    """(the priorities of the ClusterQueue's holders of `res` in `flavor`, sorted; what those before each index
    hold together): every waiting Workload of the queue asks what its lower-priority holders hold, kept per pass."""
    memo = ctx.state.derived(HELD_BY_PRIORITY)
    key = (cq, flavor, res)
    found = memo.get(key)
    if found is None:
        pairs_ = sorted((h.priority, h.usage[flavor, res]) for h in quota_holders(ctx, cq).holders
                        if h.usage.get((flavor, res), 0) > 0)
        held = [Decimal(0)]
        for _, amount in pairs_:
            held.append(held[-1] + amount)
        found = memo[key] = ([p for p, _ in pairs_], held)
    return found


HELD_BY_PRIORITY: Derived[dict[tuple[str, str, str], tuple[list[int], list[Decimal]]]] = Derived(
    "quota held per priority per queue/flavor/resource", lambda _: {})


def _cohort_holders(ctx: Context, short: frozenset[tuple[str, str]]) -> list[CohortHolder]:
    """The Workloads of the cohort's other ClusterQueues holding any of the short (flavor, resource)s; the same for
    every Workload of the queue short of them, so kept per pass."""
    memo = ctx.state.derived(COHORT_HOLDERS)
    key = (ctx.cq_name or "", short)
    found = memo.get(key)
    if found is None:
        found = memo[key] = []
        for cq in quota.cohort_queues(ctx.state, ctx.cq_name or ""):
            if cq == ctx.cq_name:
                continue
            held = [h for h in quota_holders(ctx, cq).holders if any(h.usage.get(p, 0) > 0 for p in short)]
            if held:
                borrowing = any(quota.borrowing(ctx.state, cq, fl, r) for fl, r in short)
                found += [CohortHolder(cq, h, borrowing) for h in held]
    return found


COHORT_HOLDERS: Derived[dict[tuple[str, frozenset[tuple[str, str]]], list[CohortHolder]]] = Derived(
    "the cohort's other holders of what a queue's Workloads are short of", lambda _: {}, numbers=True)


def _named(holders: list[Holder], limit: int = 2) -> str:
    """"ns/a (priority 100), ns/b (priority 5) and 2 more"."""
    names = ", ".join(f"{h.key[0]}/{h.key[1]} (priority {h.priority})" for h in holders[:limit])
    return names + (f" and {len(holders) - limit} more" if len(holders) > limit else "")


def _held(h: Holder, short: frozenset[tuple[str, str]]) -> str:
    """"2 cpu, 2Gi memory": what the holder holds of the short (flavor, resource)s."""
    return ", ".join(f"{quota.fmt(r, h.usage[fl, r])} {r}" for fl, r in sorted(short) if h.usage.get((fl, r), 0) > 0)


def _out_of_reach(ctx: Context, c: CohortHolder, reclaim: str, must_borrow: bool, exact: bool) -> str | None:
    """Why Kueue's preemption (classical/hierarchical_preemption.go) never takes `c` for this Workload: "nominal"
    (its queue is within its nominal quota), "reclaim" (reclaimWithinCohort does not allow its priority), "borrow"
    (this Workload would still borrow, and classifyPreemptionVariant makes `c` ReclaimWithoutBorrowing: priority
    not strictly below its own, above maxPriorityThreshold, or borrowWithinCohort Never); None when Kueue may take
    it, or when the rest is not `exact` (a tree's hierarchical advantage, fair sharing's shares decide it; with
    fair sharing the reclaimWithinCohort rule holds in trees too, preemption.go findCandidates)."""
    if not c.borrowing:
        return "nominal"
    fair = quota.fair_sharing_on(ctx.state, ctx.cq)  # findCandidates applies reclaimWithinCohort in the whole tree
    if not exact and not fair:
        return None
    p, mine = c.holder.priority, ctx.priority
    if reclaim == "Never" or (reclaim == "LowerPriority" and p >= mine) or (
            reclaim == "LowerOrNewerEqualPriority" and p > mine):
        return "reclaim"
    if fair:
        return None  # the shares decide (fair_sharing.shares_stop_preemption); borrowWithinCohort is not used
    if must_borrow:
        bwc = m(m(spec(ctx.cq or {}).get("preemption")).get("borrowWithinCohort"))
        threshold = bwc.get("maxPriorityThreshold")
        if (s(bwc.get("policy")) or "Never") == "Never" or p >= mine or (
                isinstance(threshold, int) and p > threshold):
            return "borrow"
    return None


def _by_queue(ctx: Context, found: list[CohortHolder], res: str, flavor: str, usage: bool) -> str:
    """"ClusterQueue b (4 of nominal 4 cpu in use, by ns/x (priority 100))" per queue, or without the numbers
    "ns/x (priority 100) in ClusterQueue b"."""
    queues: dict[str, list[Holder]] = {}
    for c in found:
        queues.setdefault(c.cq, []).append(c.holder)
    parts = []
    for cq, held in sorted(queues.items())[:3]:
        fq = quota.flavor_quota(ctx.state, "ClusterQueue", cq, flavor, res)
        used = quota.reserved_in(ctx.state, cq, flavor, res)
        if usage and fq is not None and used is not None:
            parts.append(f"ClusterQueue {cq} ({quota.fmt(res, used)} of nominal {quota.fmt(res, fq.nominal)} {res} "
                         f"in use, by {_named(held)})")
        else:
            parts.append(f"{_named(held)} in ClusterQueue {cq}")
    return ", ".join(parts) + (f" and {len(queues) - 3} more" if len(queues) > 3 else "")


def _cohort_out_of_reach(ctx: Context, res: str, line: dict[str, Any], flavor: str,
                         short: frozenset[tuple[str, str]], reclaim: str, fits_now: Decimal | None) -> WhyNot:
    """Every Workload of the cohort's other queues holding what it is short of is out of Kueue's reach: Kueue
    preempts in another ClusterQueue only Workloads of a queue above its nominal quota, whatever the policies and
    priorities (kueue#2681); of a priority reclaimWithinCohort allows; and, while this Workload would still borrow,
    of a priority strictly below its own (kueue#4028). Exact in a flat cohort without fair sharing; in a tree or
    with fair sharing only the first rule is the same, so only it is claimed there."""
    lent = quota.lent_quota(ctx.state, ctx.cq_name or "", flavor, res)
    missing = parse(line.get("missing"))
    if reclaim == "Never" or (lent is not None and (missing is None or lent.amount >= missing)):
        return _NOTHING  # Kueue never looks in other queues, or the lent-quota text says whom it reclaims from
    found = _cohort_holders(ctx, short)
    if not found:
        return _NOTHING
    exact = not quota.fair_sharing_on(ctx.state, ctx.cq) and not quota.in_cohort_tree(ctx.state, ctx.cohort or "")
    requested, nominal = parse(line.get("requested")), parse(line.get("nominal"))
    floor = _own_floor(ctx, res, flavor, line)
    must_borrow = requested is not None and nominal is not None and floor + requested > nominal
    why: dict[str, list[CohortHolder]] = {}
    for c in found:
        reason = _out_of_reach(ctx, c, reclaim, must_borrow, exact)
        if reason is None:
            return _NOTHING
        why.setdefault(reason, []).append(c)
    parts = []
    if "nominal" in why:
        parts.append(f"{_by_queue(ctx, why['nominal'], res, flavor, True)} uses no more than its nominal quota, and "
                     "Kueue preempts in another queue only Workloads of a queue above its nominal quota, whatever "
                     "reclaimWithinCohort, borrowWithinCohort and the priorities say (kueue#2681)")
    if "reclaim" in why:
        parts.append(f"reclaimWithinCohort {reclaim} takes only Workloads of lower priority than its {ctx.priority}, "
                     f"not {_by_queue(ctx, why['reclaim'], res, flavor, False)}")
    bwc = m(m(spec(ctx.cq or {}).get("preemption")).get("borrowWithinCohort"))
    bwc_never = (s(bwc.get("policy")) or "Never") == "Never"
    if "borrow" in why:
        threshold = bwc.get("maxPriorityThreshold")
        held = f" on top of {quota.fmt(res, floor)} in use it cannot free" if floor > 0 else ""
        borrows = (f"it would still borrow (asks {_q(res, line['requested'])} {res}{held}, "
                   f"nominal {_q(res, line['nominal'])})")
        if bwc_never:
            parts.append(f"{borrows} and borrowWithinCohort is Never, so Kueue preempts in another queue only what "
                         f"lets it in without borrowing, not {_by_queue(ctx, why['borrow'], res, flavor, False)} "
                         "(kueue#4028)")
        else:
            parts.append(f"{borrows}, and while borrowing Kueue preempts only Workloads of priority below its "
                         f"{ctx.priority}" + (f" and at most {threshold}" if isinstance(threshold, int) else "")
                         + f", not {_by_queue(ctx, why['borrow'], res, flavor, False)} (kueue#4028)")
    fits = (f", or fits now if it asks at most {quota.fmt(res, fits_now)} {res}" if fits_now is not None
            and fits_now > 0 else "")
    fixes = [f"moves nominalQuota to {ctx.cq_name}", *_while_borrowing_fix(ctx, why.get("borrow", []))]
    if "nominal" not in why and ("reclaim" in why or not bwc_never):  # a priority matters to Kueue only there
        fixes.append("they get a lower priority")
    fix = f"{', '.join(fixes[:-1])} or {fixes[-1]}" if len(fixes) > 1 else fixes[0]
    text = (f" Kueue preempts nothing in cohort {ctx.cohort} for it: {'; '.join(parts)}. It waits for them to "
            f"finish{fits}; else the cluster admin {fix}.")
    return WhyNot(text, advice=True)


def _own_floor(ctx: Context, res: str, flavor: str, line: dict[str, Any]) -> Decimal:
    """What its own ClusterQueue keeps of (flavor, resource) in use even after Kueue preempted every Workload of it
    that withinClusterQueue allows: Kueue preempts in another queue without borrowing (ReclaimWithoutBorrowing,
    classical/hierarchical_preemption.go) only when that plus the request fits the nominal quota (preemption.go
    workloadFits with allowBorrowing false); LowerOrNewerEqualPriority counts every equal priority (the least
    that can stay)."""
    used = parse(line.get("used")) or Decimal(0)
    policy = s(m(spec(ctx.cq or {}).get("preemption")).get("withinClusterQueue")) or "Never"
    if policy not in _PREEMPTING:
        return used
    mine = ctx.priority
    freed = sum((h.usage.get((flavor, res), Decimal(0)) for h in quota_holders(ctx, ctx.cq_name or "").holders
                 if h.key != (ctx.ns, ctx.name)
                 and (h.priority < mine or (policy == "LowerOrNewerEqualPriority" and h.priority == mine))),
                Decimal(0))
    return max(used - freed, Decimal(0))


def _while_borrowing_fix(ctx: Context, borrow: list[CohortHolder]) -> list[str]:
    """Holders out of reach only because this Workload would borrow while their priority, below its own, is above
    borrowWithinCohort's maxPriorityThreshold (or the policy is Never): the setting that brings them in reach."""
    below = [c.holder.priority for c in borrow]
    if not below or max(below) >= ctx.priority:
        return []
    bwc = m(m(spec(ctx.cq or {}).get("preemption")).get("borrowWithinCohort"))
    threshold = bwc.get("maxPriorityThreshold")
    if (s(bwc.get("policy")) or "Never") == "Never":
        return ["sets its preemption.borrowWithinCohort.policy to LowerPriority" + (
            f" with maxPriorityThreshold at least {max(below)}" if isinstance(threshold, int) else "")]
    return [f"raises its preemption.borrowWithinCohort.maxPriorityThreshold to at least {max(below)}"]


def _must_borrow(ctx: Context, res: str, line: dict[str, Any], flavor: str, missing: Decimal | None,
                 short: frozenset[tuple[str, str]], policy: str, reclaim: str) -> WhyNot:
    """It asks more than its nominal quota and borrowWithinCohort is Never: Kueue does not look for victims at all.
    Whether borrowWithinCohort LowerPriority would change that depends on the holders: Kueue then preempts while
    borrowing only Workloads of strictly lower priority (isAboveBorrowingThreshold), of its own queue or of a
    cohort queue above its nominal quota; the hint is given only when those hold enough (kueue#4028)."""
    text = (f" Kueue does not preempt for it: it asks {_q(res, line.get('requested'))} {res}, more than "
            f"{ctx.cq_name}'s nominal {_q(res, line.get('nominal'))}, so it would have to borrow, and "
            "preemption.borrowWithinCohort is Never (the default): it waits for running Workloads to finish.")
    mine = ctx.priority
    own = [h for h in quota_holders(ctx, ctx.cq_name or "").holders if policy in _PREEMPTING and h.priority < mine
           and h.usage.get((flavor, res), 0) > 0]
    cohort = _cohort_holders(ctx, short) if ctx.cohort else []
    reach = [c.holder for c in cohort if c.borrowing and c.holder.priority < mine]

    def enough(holders: list[Holder]) -> bool:
        held = sum((h.usage.get((flavor, res), Decimal(0)) for h in holders), Decimal(0))
        return bool(holders) and (missing is None or held >= missing)

    if enough(own) or enough(own + reach):
        victims = own if enough(own) else own + reach
        settings = "borrowWithinCohort LowerPriority" + (
            " and reclaimWithinCohort LowerPriority" if victims is not own and reclaim == "Never" else "")
        return WhyNot(text + f" With {settings} Kueue would preempt while borrowing {_named(victims)}, below its "
                      f"priority {mine}.")
    held = sum((h.usage.get((flavor, res), Decimal(0)) for h in own + reach), Decimal(0))
    above = [c for c in cohort if c.borrowing and c.holder.priority >= mine]
    within = [c for c in cohort if not c.borrowing]
    if not above and not within:
        return WhyNot(text)
    text += " borrowWithinCohort LowerPriority would not help (kueue#4028)"
    if above:
        borrowers = ", ".join(f"{c.holder.key[0]}/{c.holder.key[1]} (priority {c.holder.priority}) holds "
                              f"the {_held(c.holder, short)} ClusterQueue {c.cq} borrows" for c in above[:2])
        text += f": while borrowing Kueue preempts only Workloads of priority below its {mine}, and {borrowers}"
    if within:
        text += (f"; {_by_queue(ctx, within, res, flavor, True)} within nominal quota, where Kueue never preempts "
                 "for another queue (kueue#2681)")
    if own or reach:
        text += f"; lower priority holds only {quota.fmt(res, held)} of the {quota.fmt(res, missing)} {res} needed"
    return WhyNot(text + "." + _nominal_fix(ctx, short, reclaim, bool(above)), advice=True)


def _nominal_fix(ctx: Context, short: frozenset[tuple[str, str]], reclaim: str, borrowers: bool) -> str:
    """What it may count on is its nominal quota: move some there (the remedies give the amounts), and Kueue
    reclaims it without borrowing, by preemption when reclaimWithinCohort allows (hierarchical reclaim)."""
    raised, lenders = [], set()
    for fl, r in sorted(short):
        asked = sum((per.get(r, Decimal(0)) for per in ctx.requests.values()), Decimal(0))
        fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, fl, r)
        if fq is None or asked <= (fq.nominal or 0):
            continue
        raised.append(r)
        for cq in quota.cohort_queues(ctx.state, ctx.cq_name or ""):
            other = quota.flavor_quota(ctx.state, "ClusterQueue", cq, fl, r) if cq != ctx.cq_name else None
            if other is not None and (other.nominal or 0) > (quota.reserved_in(ctx.state, cq, fl, r) or 0):
                lenders.add(cq)
    if not raised:
        return ""
    back = {"Any": "by preemption", "Never": "once reclaimWithinCohort is Any"}.get(
        reclaim, f"from lower-priority borrowers, reclaimWithinCohort {reclaim}")
    return (f" Only nominal quota is guaranteed: the cluster admin moves {', '.join(dict.fromkeys(raised))} "
            f"nominalQuota to {ctx.cq_name}" + (f" from {', '.join(sorted(lenders)[:3])}" if lenders else "")
            + f" (Kueue then reclaims it {back})" + (", or lowers the borrowers' priority and sets "
                                                     "borrowWithinCohort LowerPriority" if borrowers else "") + ".")


_UNUSED_VICTIMS = " Kueue does not preempt for it, though"


def _unused_victims(ctx: Context, policy: str, res: str, flavor: str, missing: Decimal | None) -> str:
    """Lower-priority holders of this ClusterQueue hold at least the missing `res` in topology-aware `flavor`, yet
    Kueue's message names no preemption: its topology check fails before preemption is tried (kueue#10929)."""
    # only for a topology-aware flavor: elsewhere fair sharing and borrowing rules give Kueue reasons of its own
    # not to preempt that the input does not show (fair-sharing-preempts-while-borrowing)
    if missing is None or not flavor or not s(spec(ctx.state.flavors.get(flavor) or {}).get("topologyName")):
        return ""
    held, names = Decimal(0), []
    for h in quota_holders(ctx, ctx.cq_name or "").holders:
        mine = h.usage.get((flavor, res), Decimal(0)) if h.priority < ctx.priority else Decimal(0)
        if mine > 0:
            held += mine
            names.append(f"{h.key[0]}/{h.key[1]}")
    if held < missing:
        return ""
    return (f"{_UNUSED_VICTIMS} withinClusterQueue {policy} allows it and {len(names)} lower-priority Workload(s) "
            f"({', '.join(names[:3])}{' ...' if len(names) > 3 else ''}) hold {quota.fmt(res, held)} {res} in flavor "
            f"{flavor}, {quota.fmt(res, missing)} needed: in a topology-aware flavor Kueue's topology check fails "
            "before it tries preemption (kueue#10929). If they never finish, it waits for ever: the cluster admin "
            "frees the room (scales down or deletes one of them), or adds capacity.")


SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"  # Kueue's elastic Jobs (workload slices)


class ReplacedSlice(NamedTuple):
    """The admitted Workload slice a new one replaces, for one resource of one flavor."""
    name: str
    held: Decimal  # what it holds of the resource in the flavor
    asked: Decimal | None  # what the new slice asks of it in the same pod sets


def replaced_slice(ctx: Context, flavor: str, res: str) -> ReplacedSlice | None:
    """The admitted Workload slice this one replaces (an elastic Job scaled up: Kueue asks only for the difference, pod
    set by pod set, and the old slice keeps its quota until this one is admitted); None when this is no replacement
    slice or the old one is not in the input. Whole-slice sums: a RayCluster's head and worker groups are pod sets of
    their own, and comparing one worker group with the whole old slice gets the difference wrong."""
    ref = s(m(m(ctx.wl.get("metadata")).get("annotations")).get(SLICE_REPLACEMENT_FOR))
    if not ref:
        return None
    ns, _, old_name = ref.rpartition("/")
    old = ctx.state.workloads.get((ns or ctx.ns, old_name))
    if old is None or is_true(conditions(old).get("Finished")):
        return None  # a finished slice (WorkloadSliceReplaced) holds nothing: Kueue asks for the whole size
    held, asked = Decimal(0), None
    for psa in lst(m(status(old).get("admission")).get("podSetAssignments")):
        psa = m(psa)
        if s(m(psa.get("flavors")).get(res)) != flavor:
            continue  # Kueue keeps each pod set's flavor across slices (flavorassigner: "the original workload")
        held += parse(m(psa.get("resourceUsage")).get(res)) or Decimal(0)
        now = ctx.requests.get(s(psa.get("name")) or "main", {}).get(res)
        if now is not None:
            asked = (asked or Decimal(0)) + now
    return ReplacedSlice(old_name, held, asked)


# KubeRay creates the Ray autoscaler's new workers at once, gated until the slice is admitted; the autoscaler
# sees no refusal and gives up on them only after its allocation timeout (ray-project/kuberay#4846)
_RAY_SCALE_UP: dict[str, str] = dict.fromkeys(("RayCluster", "RayJob", "RayService"), (
    " The worker Pods KubeRay added for the Ray autoscaler stay gated by kueue.x-k8s.io/elastic-job until then, "
    "and nothing on the Ray side says why: the autoscaler tries another worker group only after "
    "RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S (1h by default) (kuberay#4846). Lower the worker group's "
    "maxReplicas to what the queue can give, or raise the quota."))


def _scale_up(ctx: Context, failures: list[FlavorFailure], f: FlavorFailure, line: dict[str, Any],
              fq: quota.FlavorQuota | None, replaced: ReplacedSlice) -> Finding:
    """A replacement slice waits: Kueue compared only the added part with the unused quota. Without a cohort the
    whole scaled-up size must fit the nominal quota; beyond it, it is never admitted while the Job runs (the old
    slice, its only way to free quota, ends with it)."""
    res, flavor = f.resource or "?", f.flavor or "?"
    old_name, held, asked = replaced
    total = asked if asked is not None else parse(line.get("requested"))
    missing = parse(f.missing) or Decimal(0)
    nominal = fq.nominal if fq is not None else None
    lines = _lines(ctx, failures)
    added = total - held if total is not None else None
    unused = added - missing if added is not None and added >= missing else None
    kind = s(ctx.owner.get("kind")) if ctx.owner is not None else None
    kind = kind or "Job"
    head = (f"An elastic {kind} scaled up: this Workload slice replaces {old_name}, which holds {quota.fmt(res, held)} "
            f"{res} in flavor {flavor} and keeps it until this one is admitted; Kueue asks only for the "
            f"{quota.fmt(res, added) if added is not None else '?'} added")
    if total is not None and nominal is not None and not ctx.cohort and total > nominal:
        text = (f"{head}, but the whole {quota.fmt(res, total)} {res} can never fit {ctx.cq_text}'s nominal "
                f"{quota.fmt(res, nominal)} (no cohort): it is never admitted while the {kind} runs. Scale the {kind} "
                f"back to at most {quota.fmt(res, nominal)} {res}, or raise the ClusterQueue's nominalQuota."
                + _RAY_SCALE_UP.get(kind, ""))
        return finding(Reason.EXCEEDS_MAX_QUOTA, Cause.EXCEEDS_NOMINAL_QUOTA, text, ctx, ActionBy.WORKLOAD_OWNER,
                       quota=lines, flavors=_flavors_of(failures), hints=[cq_hint(ctx.cq_name)],
                       blocker=flavor_blocker("Quota", f, res, requested=line.get("requested"),
                                              available=quota.exact(res, nominal), source="Objects"))
    text = (f"{head}: {_q(res, f.missing) or '?'} more {res} than {ctx.cq_text} has unused now"
            + (f" ({quota.fmt(res, unused)} unused)" if unused is not None else "")
            + ". It is admitted when other Workloads release quota; the old slice's Pods keep running meanwhile."
            + _RAY_SCALE_UP.get(kind, ""))
    return finding(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA, text, ctx, ActionBy.NOBODY,
                   quota=lines, flavors=_flavors_of(failures), hints=[admitted_in(ctx.cq_name), cq_hint(ctx.cq_name)],
                   blocker=flavor_blocker("Quota", f, res, requested=quota.exact(res, added) if added is not None
                                          else None, available=quota.exact(res, unused) if unused is not None else None,
                                          source="Kueue"))


def _usage_detail(ctx: Context, res: str, flavor: str, line: dict[str, Any]) -> str:
    """" (nominal 64, 70 in use, borrowingLimit 8, cohort c could lend about 2 now)": the same for every
    Workload short of (flavor, resource) in the ClusterQueue, so kept per index."""
    details = ctx.state.derived(USAGE_DETAILS)
    key = (ctx.cq_name or "", flavor, res, line.get("flavor"), line.get("resource"))
    found = details.get(key)
    if found is not None:
        return found
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    usage = []
    if line.get("nominal"):
        usage.append(f"nominal {_q(res, line['nominal'])}")
    if line.get("used"):
        usage.append(f"{_q(res, line['used'])} in use")
    if fq is not None and fq.borrowing_limit is not None:
        usage.append(f"borrowingLimit {quota.fmt(res, fq.borrowing_limit)}")
    if ctx.cohort and line.get("borrowable") is not None:
        usage.append(f"cohort {ctx.cohort} could lend about {_q(res, line['borrowable'])} now")
    elif not ctx.cohort and ctx.cq is not None:
        usage.append("no cohort")
    details[key] = found = f" ({', '.join(usage)})" if usage else ""
    return found


def _lent_text(ctx: Context, flavor: str, res: str, missing: Decimal | None) -> str:
    """" 2 cpu of its nominal quota is lent now: team-b-cq borrows 2 ... ": who holds the queue's own unused
    quota, and whether Kueue takes it back (reclaimWithinCohort). Taken back, it covers the shortfall or not: when
    not, this Workload would still borrow, and whom Kueue may preempt then is `_cohort_out_of_reach`'s (the
    borrowWithinCohort rules). The same for every Workload of the queue that it covers, or does not."""
    lent = quota.lent_quota(ctx.state, ctx.cq_name or "", flavor, res)
    if lent is None:
        return ""
    covers = missing is None or lent.amount >= missing  # no figure from Kueue: the policy's text alone
    texts = ctx.state.derived(LENT_TEXTS)
    key = (ctx.cq_name or "", flavor, res, covers)
    found = texts.get(key)
    if found is not None:
        return found
    who = ", ".join(f"{cq} borrows {quota.fmt(res, amount)}" for cq, amount in lent.borrowers[:3])
    if len(lent.borrowers) > 3:
        who += f" and {len(lent.borrowers) - 3} more ClusterQueues"
    text = (f" {quota.fmt(res, lent.amount)} {res} of {ctx.cq_name}'s nominal quota in flavor {flavor} is unused by "
            f"it and lent now ({who}, cohort {ctx.cohort}); ")
    if not covers:
        text += ("reclaimWithinCohort Never keeps it there, and taken back it would not cover what is missing anyway."
                 if lent.reclaim == "Never" else
                 "taken back it would not cover what is missing.")
    elif lent.reclaim == "Never":
        text += ("with preemption.reclaimWithinCohort Never (the default) Kueue does not take it back, so this "
                 "Workload also waits for their Workloads to finish: the cluster admin can set reclaimWithinCohort "
                 f"to Any (or LowerPriority) on {ctx.cq_name} to have Kueue preempt them for it.")
    elif lent.reclaim == "LowerPriority":
        text += ("with preemption.reclaimWithinCohort LowerPriority Kueue takes it back only by preempting their "
                 "Workloads of lower priority than this one; the others it waits for.")
    else:
        text += f"with preemption.reclaimWithinCohort {lent.reclaim} Kueue preempts their Workloads to take it back."
    texts[key] = text
    return text


def _uncovered_text(ctx: Context, flavor: str, res: str) -> str:
    """" b's spec no longer covers memory in flavor f, yet ns/a holds 2Gi of it ...": what other queues of the cohort
    hold of a (flavor, resource) their spec dropped after admitting it (`quota.uncovered_usage`): Kueue counts it
    against the cohort while no ClusterQueue status lists it. The same for every Workload of the queue short of
    it: kept per pass."""
    texts = ctx.state.derived(UNCOVERED_TEXTS)
    key = (ctx.cq_name or "", flavor, res)
    found = texts.get(key)
    if found is not None:
        return found
    parts = []
    for cq in quota.cohort_queues(ctx.state, ctx.cq_name or ""):
        held = quota.uncovered_usage(ctx.state, cq).get((flavor, res)) if cq != ctx.cq_name else None
        if held is None:
            continue
        names = " and ".join(f"{k[0]}/{k[1]}" for k, _ in held.holders[:2]) + (
            f" and {len(held.holders) - 2} more" if len(held.holders) > 2 else "")
        parts.append(f"{cq}'s spec no longer covers {res} in flavor {flavor}, yet {names} "
                     f"hold{'s' if len(held.holders) == 1 else ''} {quota.fmt(res, held.amount)} of it (admitted "
                     f"before): Kueue counts it in cohort {ctx.cohort}, {cq}'s status omits it; the cluster admin "
                     f"who changed {cq} can give that quota back.")
    text = texts[key] = "".join(f" {p}" for p in parts[:2])
    return text


UNCOVERED_TEXTS: Derived[dict[tuple[str, str, str], str]] = Derived(
    "uncovered quota held in the cohort, text per queue/flavor/resource", lambda _: {})


def _withheld_text(ctx: Context, flavor: str, res: str, missing: Decimal | None) -> str:
    """" ClusterQueue dev-cq keeps 5 cpu idle (lendingLimit 0) ...": idle quota elsewhere in the cohort tree that a
    lendingLimit keeps out of its reach, when raising that limit alone would let this Workload in now (its own
    borrowingLimit and the tree's counted: `quota.withheld_by_lending_limits`). Kueue says only "N more needed"."""
    if missing is None or not ctx.cq_name:
        return ""
    found = [w for w in quota.withheld_by_lending_limits(ctx.state, ctx.cq_name, flavor, res, missing)
             if w.enough is not None]
    if not found:
        return ""
    kept = "; ".join(f"{w.kind} {w.name} keeps {quota.fmt(res, w.idle)} {res} of flavor {flavor} idle for its own "
                     f"{'Workloads' if w.kind == 'ClusterQueue' else 'subtree'} (lendingLimit "
                     f"{quota.fmt(res, w.limit)}), and a lendingLimit of {quota.fmt(res, w.enough)} would lend this "
                     f"Workload the {quota.fmt(res, missing)} missing" for w in found[:2])
    return (f" Quota sits idle elsewhere in the cohort, but a lendingLimit keeps it from being borrowed: {kept}. The "
            f"lendingLimit is a deliberate reservation: the cluster admin raises it if that quota may be shared.")


LENT_TEXTS: Derived[dict[tuple[str, str, str, bool], str]] = Derived(
    "lent quota text per queue/flavor/resource, covering or not", lambda _: {}, numbers=True)


USAGE_DETAILS: Derived[dict[tuple[str, str, str, Any, Any], str]] = Derived("usage detail per flavor/resource",
                                                                            lambda _: {}, numbers=True)


NO_DOMAINS = "no topology domains at level"  # tas_flavor_snapshot.go findLevelWithFitDomains


def _also_uncovered(ctx: Context, f: FlavorFailure, covered: list[str]) -> list[str]:
    """The pod set's other requested resources the queue does not cover: Kueue's flavor assigner stops at the
    first one it meets, in map order, so its message names one per attempt (xpk#603)."""
    if ctx.cq is None:
        return []
    requests, _ = quota.workload_requests(ctx.wl)
    asked = requests.get(f.podset) or {}
    return sorted(res for res, amount in asked.items()
                  if amount and res != "pods" and res != f.resource and res not in covered)


def _ignore_undeclared(ctx: Context, alternative: str = "") -> str:
    """The platform-wide way out since Kueue v0.19 (QuotaCheckStrategy, beta, on): Kueue skips requests of resources
    a ClusterQueue does not cover (flavorassigner IgnoreUndeclaredResources); not with excludeResourcePrefixes."""
    cfg = ctx.state.kueue_config
    if cfg.ignores_undeclared or not cfg.gate("QuotaCheckStrategy"):
        return ""
    instead = f" ({alternative}: Kueue refuses both together)" if alternative else ""
    return (" For every queue at once, a cluster admin can set resources.quotaCheckStrategy: IgnoreUndeclared in "
            f"Kueue's Configuration{instead}: Kueue then admits without counting resources a ClusterQueue does not "
            "cover.")


def _no_matching_flavor(ctx: Context, failures: list[FlavorFailure], granular: str) -> Finding:
    f = failures[0]
    if f.kind == FailureKind.RESOURCE_NOT_COVERED:
        covered = sorted(quota.covered_resources(ctx.cq)) if ctx.cq is not None else []
        others = _also_uncovered(ctx, f, covered)
        it_covers = f"it covers {', '.join(covered)}" if covered else ""
        if others:
            text = (f"Requests {', '.join([f.resource or '', *others[:-1]])} and {others[-1]}, none of which "
                    f"{ctx.cq_text} covers ({it_covers + '; ' if it_covers else ''}Kueue's message names one per "
                    f"attempt, this time {f.resource}, so fixing only that one brings up the next; "
                    "AI-Hypercomputer/xpk#603)")
        else:
            text = f"Requests {f.resource}, which {ctx.cq_text} does not cover" + (f" ({it_covers})" if covered else "")
        made = [(src, how, per) for src, how, per in ctx.state.kueue_config.transformed_into(f.resource or "")
                if quota.in_pod_templates(ctx.wl, src)]
        if f.resource and made and not quota.in_pod_templates(ctx.wl, f.resource):
            src, how, per = made[0]
            text += (f". No container of the Job asks for {f.resource}: Kueue's resources.transformations turns its "
                     f"{src} into it ({how}: 1 {src} counts as {per} {f.resource}; "
                     f"{ctx.state.kueue_config.source}). A cluster admin adds {f.resource} to the queue's "
                     "resourceGroups, or changes that transformation.")
            return finding(Reason.QUEUE_MISCONFIGURED, Cause.RESOURCE_NOT_COVERED, text, ctx, ActionBy.CLUSTER_ADMIN,
                           hints=[cq_hint(ctx.cq_name)])
        if f.resource and f.resource != "pods" and not quota.in_pod_templates(ctx.wl, f.resource):
            # Kueue adds the namespace's LimitRange defaults and a RuntimeClass's pod overhead to what it counts
            text += (f". No container of the Job asks for {f.resource}: Kueue counts it from the namespace's "
                     f"LimitRange defaults (or a RuntimeClass's pod overhead; status.resourceRequests shows what it "
                     f"counts). A cluster admin adds {f.resource} to the queue's coveredResources, lists it in "
                     "resources.excludeResourcePrefixes of Kueue's Configuration, or removes the LimitRange default "
                     f"(kubectl -n {ctx.ns} get limitranges -o yaml)." + _ignore_undeclared(ctx, "instead of the "
                                                                                           "prefixes"))
            return finding(Reason.QUEUE_MISCONFIGURED, Cause.RESOURCE_NOT_COVERED, text, ctx, ActionBy.CLUSTER_ADMIN,
                           hints=[cq_hint(ctx.cq_name)])
        what = "those requests" if others else "the request"
        kind = (s(ctx.owner_ref.get("kind")) if ctx.owner_ref else None) or "Job"
        text += f": remove {what} from the {kind}, or add them to the queue's resourceGroups." + _ignore_undeclared(ctx)
        return finding(Reason.QUEUE_MISCONFIGURED, Cause.RESOURCE_NOT_COVERED, text, ctx, ActionBy.WORKLOAD_OWNER,
                        hints=[cq_hint(ctx.cq_name)])
    if f.kind == FailureKind.FLAVOR_NOT_FOUND:
        text = (f"ResourceFlavor {f.flavor} used by {ctx.cq_text} does not exist: create it or remove it "
                "from the ClusterQueue.")
        return finding(Reason.QUEUE_MISCONFIGURED, Cause.FLAVOR_NOT_FOUND, text, ctx, ActionBy.CLUSTER_ADMIN,
                        flavors=_flavors_of(failures))
    cause, actor = Cause.NO_MATCHING_FLAVOR, ActionBy.WORKLOAD_OWNER
    if f.kind == FailureKind.TOPOLOGY_FLAVOR:
        text, cause = f"No flavor fits the Pods' topology request: {f.text}.", Cause.TOPOLOGY_MISMATCH
    elif f.kind == FailureKind.TOPOLOGY_REQUEST and f.text.startswith(NO_DOMAINS):
        # Kueue builds a level's domains from the labels of the flavor's Nodes: none carries this level's label
        text, cause, actor = (f"Kueue finds no topology domain at level {f.level} ({f.text}): it builds domains only "
                              "from the flavor's Nodes that carry the label of every level of the Topology, and leaves "
                              "out a Node missing any of them. The platform admin labels the Nodes with every level "
                              "(kubectl get topologies -o yaml; kubectl get nodes -L <each level>) or drops the "
                              "missing level from the Topology."), Cause.TOPOLOGY_MISMATCH, ActionBy.CLUSTER_ADMIN
    elif f.kind in (FailureKind.TOPOLOGY_REQUEST, FailureKind.TOPOLOGY_ERROR):
        what = ("does not fit the levels the flavor's Topology defines" if f.kind == FailureKind.TOPOLOGY_REQUEST
                else "cannot be evaluated by Kueue")
        text, cause = (f"The topology request of pod set {f.podset} {what}: {f.text}. The owner fixes the Job's "
                       "topology annotations (kueue.x-k8s.io/podset-required-topology, -preferred-topology, slice "
                       "size and level) or the Pod template's node selectors/affinity; or the platform admin adds "
                       "the level to the Topology (kubectl get topologies -o yaml)."), Cause.TOPOLOGY_MISMATCH
    elif all(x.kind in (FailureKind.SLICE_FLAVOR_MISMATCH, FailureKind.FLAVOR_SKIPPED) for x in failures):
        text = (f"Kueue may not use any flavor of {ctx.cq_text} for it: {'; '.join(x.text for x in failures[:4])}. "
                "A scaled-up Workload slice must keep the flavor its original slice holds, and a flavor skipped by "
                "the Workload's allowed-flavors annotation or the nomination is no candidate: the owner changes the "
                "annotation (or the scale-up), or the cluster admin gives the original flavor room in the "
                "ClusterQueue.")
    else:
        text = ""
    if text:
        return finding(Reason.QUEUE_MISCONFIGURED, cause, text, ctx, actor, flavors=_flavors_of(failures))
    reasons = "; ".join(x.text for x in failures[:4])
    text = (f"No flavor of {ctx.cq_text} fits the Pods: {reasons}. Add tolerations or fix the node "
            "selector/affinity in the Job, or change the flavors' nodeLabels/nodeTaints.")
    what = f.taint or ("node affinity" if f.kind == FailureKind.NODE_AFFINITY_MISMATCH else f.text[:120])
    return finding(Reason.QUEUE_MISCONFIGURED, Cause.NO_MATCHING_FLAVOR, text, ctx, ActionBy.WORKLOAD_OWNER,
                    flavors=_flavors_of(failures), blocker=flavor_blocker("Flavor", f, what, source="Kueue"))


def _topology(ctx: Context, failures: list[FlavorFailure], granular: str) -> Finding:
    """TAS cannot place the pod set. It can never fit (while the nodes stay as they are) when Kueue's granular
    reason says so or, in the legacy wording, when the largest domain at the requested level holds fewer pods
    than the pod set has even with nothing running (`topology.topology_fit`): then the same verdict."""
    f = failures[0]
    if f.kind == FailureKind.NODE_REPLACEMENT:
        node = f" ({f.detail})" if f.detail else ""
        text = (f"A node of its Topology Aware Scheduling placement failed{node} and Kueue finds no replacement in "
                f"the same topology domain: {f.text}. Kueue keeps trying (with TASFailedNodeReplacementFailFast it "
                "evicts the Workload to place it anew); the platform admin restores the node or frees room in that "
                "domain (kubectl describe node).")
        return finding(Reason.WAITING_FOR_QUOTA, Cause.TOPOLOGY_PLACEMENT_FAILED, text, ctx, ActionBy.CLUSTER_ADMIN,
                        flavors=_flavors_of(failures), blocker=flavor_blocker("Topology", f, f.detail, source="Kueue"))
    blocker = flavor_blocker("Topology", f, f.topology, source="Kueue",
                             requested=str(f.requested_count) if f.requested_count is not None else None,
                             available=str(f.fit) if f.fit is not None else None)
    fit = topology.topology_fit(ctx, f)
    flavors = [fit.flavor] if fit is not None else _flavors_of(failures)
    text = (topology.describe(fit, f) if fit is not None
            else f"Topology Aware Scheduling cannot place the Pods: {f.text}.")
    held = topology.held(ctx, fit) if fit is not None else None
    if held is not None:  # Pods outside Kueue's TAS hold the room: neither the nodes' size nor a Workload's doing
        return finding(Reason.WAITING_FOR_QUOTA, Cause.TOPOLOGY_PLACEMENT_FAILED, text + held.text, ctx, held.action,
                       flavors=flavors, blocker=blocker, hints=held.hints)
    if granular == "TopologyPlacementFailed" or (fit is not None and fit.never_fits):
        if fit is not None and fit.too_large is not None:
            big = fit.too_large
            text += (f" One Pod requests {quota.fmt(big.resource, big.per_pod)} {big.resource}, more than any of the "
                     f"flavor's nodes can allocate (at most {quota.fmt(big.resource, big.most)}, on {big.node}): no "
                     "domain ever holds one, whatever the topology request or the pod count. The owner lowers the "
                     "per-Pod request, or the cluster admin adds larger nodes to the flavor.")
            action = ActionBy.WORKLOAD_OWNER
        elif fit is not None and fit.too_large_own is not None:
            big = fit.too_large_own
            text += (f" One Pod requests {quota.fmt(big.resource, big.per_pod)} {big.resource}, more than any node "
                     "the Pods' own nodeSelector/required node affinity selects can allocate (at most "
                     f"{quota.fmt(big.resource, big.most)}, on {big.node}), while the flavor has larger nodes that it "
                     "leaves out: the owner relaxes that selector or affinity, or lowers the per-Pod request.")
            action = ActionBy.WORKLOAD_OWNER
        elif fit is not None and fit.own_selector_blocks:
            text += (f" Counting the {len(fit.by_pods)} node(s) the Pods' own nodeSelector/required node affinity "
                     f"leaves out, the largest holds {fit.largest_without_own}: the owner relaxes that selector or "
                     "affinity (or the topology request, or the pod count), or the cluster admin labels more nodes "
                     "to match it.")
            action = ActionBy.WORKLOAD_OWNER
        elif fit is not None and fit.fits_without_exclusions:
            text += (" It would fit on the cordoned/tainted nodes: the platform admin must uncordon them or remove "
                     "the taints (or the owner adds tolerations); else lower the pod count or relax the topology.")
            action = ActionBy.CLUSTER_ADMIN
        else:
            text += " It cannot fit until nodes are added: lower the pod count or relax the topology request."
            action = ActionBy.WORKLOAD_OWNER
        return finding(Reason.EXCEEDS_MAX_QUOTA, Cause.TOPOLOGY_PLACEMENT_FAILED, text, ctx, action, flavors=flavors,
                       blocker=blocker)
    elsewhere = _later_flavor_fits(ctx, f, fit)
    if elsewhere is not None:
        text, action = _scan_stopped(ctx, elsewhere, text)
        return finding(Reason.WAITING_FOR_QUOTA, Cause.TOPOLOGY_PLACEMENT_FAILED, text, ctx, action,
                       flavors=[*flavors, elsewhere.flavor], blocker=blocker)
    if fit is None:  # no Nodes in the input, several flavors on one Topology, or slices: not computed
        text += (" Whether it fits once running Workloads free nodes cannot be told from the input (Nodes, the flavor "
                 "Kueue tried, or slice arithmetic missing); Kueue retries by itself. If it lasts, compare the pod "
                 "count with the topology's domains (kubectl get nodes -L <level label>).")
    else:
        text += " It fits once running Workloads free those nodes; Kueue retries by itself."
    return finding(Reason.WAITING_FOR_QUOTA, Cause.TOPOLOGY_PLACEMENT_FAILED, text, ctx, ActionBy.NOBODY,
                    flavors=flavors, blocker=blocker)


# ----- TAS failed in the flavor Kueue's scan stopped at, while a later flavor fits now (kueue#13658) -----
# Kueue's flavor assigner ends its scan at the first flavor whose quota fits (shouldTryNextFlavor is false for a fit
# without borrowing, whatever flavorFungibility says), and only then runs TAS there. When TAS fails the Workload is
# requeued with LastTriedFlavorIdx at that flavor; v0.19.1+ (FlavorFungibilityPreserveScanProgress, Beta, on by
# default) resume the scan after it in the next cycle, older ones or with the gate off start from the first flavor
# again whenever the ClusterQueue's generation moved: on a busy cohort, every cycle.


@dataclass
class _Elsewhere:
    tried: str  # the flavor TAS failed in, where the scan stopped
    flavor: str  # the later flavor of the same resource group that fits now
    quota: str  # "16 nvidia.com/gpu (64 borrowable)"
    nodes: str  # "; 8 empty node(s) hold both pods in one cloud.example.com/block domain", or ""


def _fits_quota(ctx: Context, flavor: str, needs: dict[str, Decimal]) -> list[str] | None:
    """What the ClusterQueue can give in `flavor` now for each request, own unused plus borrowable; None when a
    request does not fit (or the flavor does not cover it)."""
    said = []
    for res, need in sorted(needs.items()):
        fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
        if fq is None:
            return None
        used = quota.reserved_in(ctx.state, ctx.cq_name or "", flavor, res) or Decimal(0)
        own = max(Decimal(0), (fq.nominal or Decimal(0)) - used)
        lent = quota.cohort_borrowable(ctx.state, ctx.cq_name or "", flavor, res) if ctx.cohort else None
        lent = lent or Decimal(0)
        if own + lent < need:
            return None
        parts = [f"{quota.fmt(res, own)} unused"] if own else []
        parts += [f"{quota.fmt(res, lent)} borrowable"] if lent else []
        said.append(f"{quota.fmt(res, need)} {res} ({', '.join(parts)})")
    return said


def _matches(rf: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """Kueue's checkFlavorForPodSets in short: no nodeSelector key the flavor labels otherwise, no taint of the
    flavor the pods do not tolerate."""
    labels = m(spec(rf).get("nodeLabels"))
    if any(k in labels and labels[k] != v for k, v in m(m(pod_spec).get("nodeSelector")).items()):
        return False
    tolerations = [*lst(m(pod_spec).get("tolerations")), *lst(spec(rf).get("tolerations"))]
    return not any(m(t).get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(tolerations, m(t))
                   for t in lst(spec(rf).get("nodeTaints")))


@dataclass
class _Usage:
    now: datetime | None = None
    by_node: dict[str, dict[str, Decimal]] = field(default_factory=dict)


NODE_USAGE: Derived[_Usage] = Derived("requests of the known Pods per node, for TAS flavors", lambda _: _Usage())


def _node_usage(ctx: Context) -> dict[str, dict[str, Decimal]]:
    """Requests (and a "pods" count) of the Pods bound to each node and not finished, once per pass: Pods change
    without the index being rebuilt."""
    usage = ctx.state.derived(NODE_USAGE)
    if usage.now != ctx.now:
        usage.now, usage.by_node = ctx.now, {}
        for node, phase, bound in ctx.state.bound_pods():
            if phase not in ("Succeeded", "Failed"):
                mine = usage.by_node.setdefault(node, {"pods": Decimal(0)})
                for r, v in quota.pod_requests(bound).items():
                    mine[r] = mine.get(r, Decimal(0)) + v
                mine["pods"] += 1
    return usage.by_node


def _free_nodes(ctx: Context, rf: Mapping[str, Any], ps: Mapping[str, Any], count: int) -> str | None:
    """Whether the flavor's nodes hold the pod set now (their allocatable less the known Pods' requests), as the
    end of a sentence; None when they do not. The request's level: one domain when required, any spread when
    preferred (Kueue then packs as few domains as it can)."""
    req = m(m(ps).get("topologyRequest"))
    level, required = s(req.get("required")) or s(req.get("preferred")), bool(s(req.get("required")))
    pod_spec = m(m(m(ps).get("template")).get("spec"))
    per_pod = quota.pod_requests(pod_spec)
    tolerations = [*lst(pod_spec.get("tolerations")), *lst(spec(rf).get("tolerations"))]
    used = _node_usage(ctx)
    domains: dict[str, int] = {}
    empty = usable = 0
    for n in ctx.state.nodes.values():
        md = m(n.get("metadata"))
        if not label_selector_matches({"matchLabels": dict(m(spec(rf).get("nodeLabels")))}, m(md.get("labels"))) \
                or not is_true(conditions(n).get("Ready")) or spec(n).get("unschedulable") \
                or any(m(t).get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(tolerations, m(t))
                       for t in lst(spec(n).get("taints"))):
            continue
        usable += 1
        taken = used.get(s(md.get("name")) or "", {})
        empty += not taken.get("pods")
        alloc = m(m(n.get("status")).get("allocatable")) or m(m(n.get("status")).get("capacity"))
        fits = [int(max(Decimal(0), (parse(alloc.get(r)) or Decimal(0)) - taken.get(r, Decimal(0))) // need)
                for r, need in per_pod.items() if need > 0]
        room = parse(alloc.get("pods"))
        if room is not None:
            fits.append(int(room - taken.get("pods", Decimal(0))))
        key = s(m(md.get("labels")).get(level)) if level else "*"
        if key is not None:
            domains[key] = domains.get(key, 0) + max(0, min(fits, default=0))
    largest = max(domains.values(), default=0)
    if largest < count and (required or sum(domains.values()) < count):
        return None
    where = f"in one {level} domain" if largest >= count and level else "across its topology"
    known = "" if ctx.state.knows("Pod") else " (no Pods in the input: their usage is not counted)"
    return f"; its {usable} node(s) ({empty} empty) hold all {count} pods {where} now{known}"


def _group_needs(ctx: Context, group: Mapping[str, Any]) -> dict[str, Decimal]:
    """What all pod sets ask together of each resource the resource group covers: one flavor gives them all."""
    covered = set(lst(group.get("coveredResources")))
    needs: dict[str, Decimal] = {}
    for podset in ctx.requests.values():
        for res, v in podset.items():
            if res in covered and v > 0:
                needs[res] = needs.get(res, Decimal(0)) + v
    return needs


def _later_flavor_fits(ctx: Context, f: FlavorFailure, fit: topology.TopologyFit | None) -> _Elsewhere | None:
    """A flavor listed after the one TAS failed in (the one `topology_fit` found, else the one Kueue named), in
    the same resource group, whose quota (own unused plus borrowable) and, with Nodes in the input, free nodes
    hold the Workload now. Asked only while the Workload fits an empty topology of the flavor tried."""
    tried = fit.flavor if fit is not None else f.flavor
    ps = next((m(p) for p in lst(ctx.spec.get("podSets")) if (s(m(p).get("name")) or "main") == f.podset), None)
    if ctx.cq is None or not tried or ps is None:
        return None
    group = next((m(g) for g in lst(spec(ctx.cq).get("resourceGroups"))
                  if any(m(fl).get("name") == tried for fl in lst(m(g).get("flavors")))), None)
    if group is None:
        return None
    names = [s(m(fl).get("name")) or "" for fl in lst(group.get("flavors"))]
    needs = _group_needs(ctx, group)
    pod_spec = m(m(ps.get("template")).get("spec"))
    for flavor in names[names.index(tried) + 1:]:
        rf = ctx.state.flavors.get(flavor)
        if rf is None or not s(spec(rf).get("topologyName")) or not _matches(rf, pod_spec):
            continue
        said = _fits_quota(ctx, flavor, needs)
        if said is None:
            continue
        nodes = _free_nodes(ctx, rf, ps, i(ps.get("count")) or 1) if ctx.state.knows("Node") else ""
        if nodes is not None:
            return _Elsewhere(tried, flavor, ", ".join(said), nodes)
    return None


def _scan_stopped(ctx: Context, there: _Elsewhere, text: str) -> tuple[str, ActionBy]:
    """The verdict's text and who acts when a later flavor fits: nobody while Kueue may still move on by itself
    in its next cycles, the cluster admin once it has kept to the first flavor past STALL_AFTER."""
    text += (f" Kueue stops its flavor scan at {there.tried}, whose quota fits, but {ctx.cq_name}'s next flavor "
             f"{there.flavor} fits now: {there.quota}{there.nodes}.")
    since = ctx.cond_time("QuotaReserved")
    if not ctx.after(since, STALL_AFTER):
        return text + (f" Kueue v0.19.1+ tries {there.flavor} in its next cycle (FlavorFungibilityPreserveScanProgress"
                       "); older ones may keep to the first flavor (kueue#13658)."), ActionBy.NOBODY
    tries = [event_count(e) for e in ctx.state.events_about("Workload", ctx.ns, ctx.name)
             if s(e.get("reason")) == ctx.cond_reason("QuotaReserved")]
    attempts = f" ({max(tries)} attempts)" if tries else ""
    nodes = ",".join(f"{k}={v}" for k, v in
                     sorted(m(spec(ctx.state.flavors.get(there.flavor) or {}).get("nodeLabels")).items()))
    waited = format_duration(ctx.now - since, precise=True) if since else ""
    return text + (f" After {waited}{attempts} Kueue still tries only {there.tried} (kueue#13658): a cluster admin "
                   "checks that Kueue is v0.19.1+ with FlavorFungibilityPreserveScanProgress on, or lists "
                   f"{there.flavor} first in {ctx.cq_name} (flavorFungibility cannot skip a flavor whose quota fits); "
                   f"or the owner adds nodeSelector {nodes} to the Pod template."), ActionBy.CLUSTER_ADMIN


def flavor_blocker(kind: str, f: FlavorFailure, what: str | None, **numbers: str | None) -> dict[str, Any]:
    """status.blocker for a verdict read from Kueue's per-flavor reasons: the flavor and pod set named."""
    found = {"kind": kind, "name": what, "flavor": f.flavor, "podSet": f.podset, **numbers}
    return {k: v for k, v in found.items() if v is not None}


_BY_SEVERITY: dict[Severity, Callable[[Context, list[FlavorFailure], str], Finding]] = {
    Severity.NO_FIT: _no_matching_flavor,
    Severity.MAXIMUM: _exceeds_max,
    Severity.UNUSED_QUOTA: _waiting_for_quota,
    Severity.TOPOLOGY: _topology,
}


def _waiting_for_preemption(ctx: Context, p: ParsedMessage) -> Finding:
    victims = victims_of(ctx)
    blocked = [ctx.workload_ref("Victim", v.namespace, v.name, v.uid) for v in victims[:10]]
    n = p.pending_preemptions or p.failed_preemptions or len(victims)
    if p.failed_preemptions:
        text = (f"Kueue tried to preempt {p.failed_preemptions} Workload(s) to make room in {ctx.cq_text} but the "
                "API calls failed; it will retry.")
        cause = Cause.PREEMPTION_FAILED
    else:
        names = ", ".join(f"{b.get('namespace')}/{b.get('name')}" for b in blocked[:3])
        text = (f"Kueue is preempting {n} Workload(s) to make room in {ctx.cq_text}"
                + (f" ({names})" if names else "") + "; it is admitted once they release their quota."
                + _victims_slow(ctx, victims))
        cause = Cause.PREEMPTION_IN_PROGRESS
    text += _search_stopped(ctx, list(p.failures))
    return finding(Reason.WAITING_FOR_PREEMPTION, cause, text, ctx, ActionBy.NOBODY, blocked_by=blocked,
                    quota=_lines(ctx, list(p.failures)), flavors=_flavors_of(list(p.failures)))


_MAY_STOP = ("MayStopSearch", "Borrow", "Preempt")  # v1beta1's Borrow / Preempt convert to MayStopSearch


def _search_stopped(ctx: Context, failures: list[FlavorFailure]) -> str:
    """Kueue preempts in a flavor while a later flavor of the same resource group has room now: its flavor search
    stops at the first flavor where it found preemption targets when flavorFungibility.whenCanPreempt is
    MayStopSearch (and, if that flavor needs borrowing, whenCanBorrow too: flavorassigner.go shouldTryNextFlavor,
    Kueue 0.19.2), so it never tried the later one, which its message does not name. The setting, the flavor it
    stopped at and the idle one named; "" otherwise."""
    fungibility = m(spec(ctx.cq or {}).get("flavorFungibility"))
    if ctx.cq is None or s(fungibility.get("whenCanPreempt")) not in _MAY_STOP:
        return ""
    short = [f for f in failures if f.kind == FailureKind.INSUFFICIENT_UNUSED_QUOTA and f.flavor and f.resource]
    if not short:
        return ""
    stopped = short[-1]
    group = quota.resource_group_of(ctx.cq, stopped.resource or "")
    if group < 0:
        return ""
    rg = m(lst(spec(ctx.cq).get("resourceGroups"))[group])
    names = [s(m(fl).get("name")) or "" for fl in lst(rg.get("flavors"))]
    if stopped.flavor not in names:
        return ""
    needs = _group_needs(ctx, rg)
    named = {f.flavor for f in failures}
    pod_specs = [m(m(m(ps).get("template")).get("spec")) for ps in lst(ctx.spec.get("podSets"))]
    for flavor in names[names.index(stopped.flavor or "") + 1:]:
        rf = ctx.state.flavors.get(flavor)
        if flavor in named or rf is None or s(spec(rf).get("topologyName")) \
                or not all(_matches(rf, ps) for ps in pod_specs):
            continue
        room = _fits_quota(ctx, flavor, needs)
        if room is None:
            continue
        borrows = bool(ctx.cohort) and s(fungibility.get("whenCanBorrow")) in _MAY_STOP and any(
            (fq := quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, stopped.flavor or "", r)) is not None
            and fq.nominal is not None and v > fq.nominal for r, v in needs.items())
        setting = "whenCanPreempt: MayStopSearch" + (" (and whenCanBorrow: MayStopSearch: it borrows there too)"
                                                     if borrows else "")
        return (f" It preempts in flavor {stopped.flavor} although flavor {flavor} has room now ({', '.join(room)}): "
                f"{ctx.cq_name}'s flavorFungibility.{setting} stops Kueue's flavor search at the first flavor where "
                f"it can preempt, so it never tried {flavor}. To use idle flavors before preempting, the cluster "
                f"admin sets whenCanPreempt: TryNextFlavor (Kueue's default) on ClusterQueue {ctx.cq_name}.")
    return ""


def _victims_slow(ctx: Context, victims: list[Victim]) -> str:
    """Victims evicted `STALL_AFTER` ago that still hold their quota: the preemption is stuck on them, and their
    own diagnoses say what keeps them from stopping (a finalizer, a controller that does not stop its Pods)."""
    evicted = [(v.evicted_at, v.namespace, v.name) for v in victims if v.evicted_at is not None
               and (wl := ctx.state.workloads.get((v.namespace, v.name))) is not None
               and is_true(conditions(wl).get("QuotaReserved"))]
    if not evicted:
        return ""
    first, ns, nm = min(evicted)
    if not ctx.after(first, STALL_AFTER):
        return ""
    sticky = "" if s(spec(ctx.cq or {}).get("queueingStrategy")) == "StrictFIFO" else (
        " Meanwhile Kueue keeps this Workload at the head of its BestEffortFIFO queue and evaluates no other "
        "Workload there (kueue#7301).")
    return (f" But {ns}/{nm} was evicted at {when_text(first)}, more than {format_duration(STALL_AFTER)} ago, and "
            "still holds its quota: the preemption is stuck on it, and its diagnosis says what keeps it from stopping "
            f"and who acts (kubectl get admissiondiagnosis {nm} -n {ns}).{sticky}")


def _flavors_of(failures: list[FlavorFailure]) -> list[str]:
    out: list[str] = []
    for f in failures:
        if f.flavor and f.flavor not in out:
            out.append(f.flavor)
    return out
