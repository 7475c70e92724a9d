"""Quota arithmetic: what a Workload requests, what its ClusterQueue and cohort can give.

Amounts Kueue states in its messages are authoritative; these numbers come from the queue objects
(`source: Objects`) or are estimates (`source: Estimate`) and are labelled so. What a cohort can lend is
computed for flat cohorts and for trees (`cohort_tree`, Kueue's resource-node arithmetic); the message says
when that estimate differs from the maximum Kueue wrote, and Kueue's number is the one shown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from ..kube.objects import lst, m, s, spec, status
from ..kube.quantity import format_quantity, parse, readable
from ..state import ClusterState, Derived

Requests = dict[str, dict[str, Decimal]]  # podset -> resource -> total


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    res = m(container.get("resources"))
    requests, limits = m(res.get("requests")), m(res.get("limits"))
    out: dict[str, Decimal] = {}
    for rname in dict.fromkeys([*requests, *limits]):  # in the spec's order: a set's would vary run to run
        value = parse(requests.get(rname)) if rname in requests else parse(limits.get(rname))
        if value is not None and isinstance(rname, str):
            out[rname] = value
    return out


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of one Pod: containers + sidecars, or the largest init container if bigger."""
    total: dict[str, Decimal] = {}
    for c in lst(pod_spec.get("containers")):
        for rname, v in _container_requests(m(c)).items():
            total[rname] = total.get(rname, Decimal(0)) + v
    init_peak: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    for c in lst(pod_spec.get("initContainers")):
        req = _container_requests(m(c))
        if m(c).get("restartPolicy") == "Always":
            for rname, v in req.items():
                sidecars[rname] = sidecars.get(rname, Decimal(0)) + v
        else:
            for rname, v in req.items():
                init_peak[rname] = max(init_peak.get(rname, Decimal(0)), v + sidecars.get(rname, Decimal(0)))
    for rname, v in sidecars.items():
        total[rname] = total.get(rname, Decimal(0)) + v
    for rname, v in init_peak.items():
        total[rname] = max(total.get(rname, Decimal(0)), v)
    for rname, value in m(pod_spec.get("overhead")).items():
        extra = parse(value)
        if extra is not None and isinstance(rname, str):
            total[rname] = total.get(rname, Decimal(0)) + extra
    return total


def in_pod_templates(workload: Mapping[str, Any], resource: str) -> bool:
    """Does any container (or init container) of the Workload's pod sets request or limit `resource`, or the
    pod sets state no template? (Otherwise Kueue counted it from elsewhere: LimitRange defaults, pod overhead.)"""
    pod_sets = lst(spec(workload).get("podSets"))
    templates = [m(m(m(ps).get("template")).get("spec")) for ps in pod_sets]
    if not any(templates):
        return True  # nothing to compare with: assume the owner asked for it
    for pod_spec in templates:
        for key in ("containers", "initContainers"):
            for container in lst(pod_spec.get(key)):
                res = m(m(container).get("resources"))
                if resource in m(res.get("requests")) or resource in m(res.get("limits")):
                    return True
    return False


def podset_counts(workload: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for ps in lst(spec(workload).get("podSets")):
        ps = m(ps)
        count = ps.get("count", 1)
        out[s(ps.get("name")) or "main"] = count if isinstance(count, int) and not isinstance(count, bool) else 1
    return out


def partial_floor(workload: Mapping[str, Any], requests: Requests, res: str) -> Decimal | None:
    """What the Workload asks of `res` at its smallest partial admission (each pod set with a minCount at it,
    the others whole); None when no pod set can be reduced. Kueue tries smaller counts down to minCount only
    when the whole Workload does not fit, and when none fits either it writes the whole Workload's message."""
    podsets = lst(spec(workload).get("podSets"))
    if not any(type(m(ps).get("minCount")) is int for ps in podsets):  # most Workloads: asked per quota line
        return None
    counts = podset_counts(workload)
    reducible, total = False, Decimal(0)
    for ps in podsets:
        ps = m(ps)
        psname = s(ps.get("name")) or "main"
        want = requests.get(psname, {}).get(res)
        if want is None:
            continue
        count, least = counts.get(psname, 1), ps.get("minCount")
        if type(least) is int and 0 < least < count:
            reducible, want = True, want * least / count
        total += want
    return total if reducible else None


def _quantities(resources: Mapping[str, Any]) -> dict[str, Decimal]:
    """resource -> quantity, the unreadable ones left out (a loop: a third cheaper than the comprehension
    over a generator it replaced, per pod set of every Workload waiting for quota)."""
    out: dict[str, Decimal] = {}
    for k, q in resources.items():
        v = parse(q)
        if v is not None:
            out[k] = v
    return out


def admitted_usage(workload: Mapping[str, Any]) -> dict[tuple[str, str], Decimal]:
    """(flavor, resource) -> what the Workload's admission holds (status.admission, Kueue's own numbers)."""
    held: dict[tuple[str, str], Decimal] = {}
    for psa in lst(m(status(workload).get("admission")).get("podSetAssignments")):
        psa = m(psa)
        flavors = m(psa.get("flavors"))
        for res, amount in m(psa.get("resourceUsage")).items():
            value, flavor = parse(amount), s(flavors.get(res))
            if value is None or flavor is None or not isinstance(res, str):
                continue
            held[flavor, res] = held.get((flavor, res), Decimal(0)) + value
    return held


def workload_requests(workload: Mapping[str, Any]) -> tuple[Requests, str]:
    """Total requests per PodSet, and where they come from (Kueue's status or the Pod templates)."""
    st = status(workload)
    usage: Requests = {}
    for psa in lst(m(st.get("admission")).get("podSetAssignments")):
        psa = m(psa)
        usage[s(psa.get("name")) or "main"] = _quantities(m(psa.get("resourceUsage")))
    if usage:
        return usage, "Kueue"
    for rr in lst(st.get("resourceRequests")):
        rr = m(rr)
        usage[s(rr.get("name")) or "main"] = _quantities(m(rr.get("resources")))
    if usage:
        return usage, "Kueue"
    counts = podset_counts(workload)
    for ps in lst(spec(workload).get("podSets")):
        ps = m(ps)
        psname = s(ps.get("name")) or "main"
        per_pod = pod_requests(m(m(ps.get("template")).get("spec")))
        count = Decimal(counts.get(psname, 1))
        usage[psname] = {k: v * count for k, v in per_pod.items()}
        usage[psname]["pods"] = count
    return usage, "Estimate"


@dataclass(frozen=True)
class FlavorQuota:
    nominal: Decimal | None
    borrowing_limit: Decimal | None
    lending_limit: Decimal | None


QuotaTable = dict[tuple[str, str], FlavorQuota]  # (flavor, resource) -> quota


def _quota_table(owner: Mapping[str, Any]) -> QuotaTable:
    table: QuotaTable = {}
    for group in lst(spec(owner).get("resourceGroups")):
        for fq in lst(m(group).get("flavors")):
            fname = s(m(fq).get("name")) or ""
            for rq in lst(m(fq).get("resources")):
                rq = m(rq)
                rname = s(rq.get("name")) or ""
                table.setdefault((fname, rname), FlavorQuota(parse(rq.get("nominalQuota")) or Decimal(0),
                                                             parse(rq.get("borrowingLimit")),
                                                             parse(rq.get("lendingLimit"))))
    return table


# Queue arithmetic asked per failure line, the same for every Workload of a queue: kept per index.
QUOTA_TABLES: Derived[dict[tuple[str, str | None], QuotaTable]] = Derived("quota tables", lambda _: {})
RESERVED: Derived[dict[tuple[str, str, str], Decimal | None]] = Derived("reserved quota", lambda _: {}, numbers=True)
BORROWABLE: Derived[dict[tuple[str, str, str], Decimal | None]] = Derived("cohort borrowable", lambda _: {},
                                                                          numbers=True)


def flavor_quota(state: ClusterState, kind: str, owner_name: str | None, flavor: str, resource: str
                 ) -> FlavorQuota | None:
    """The quota a ClusterQueue or Cohort declares for (flavor, resource); None if not covered."""
    found: FlavorQuota | None = quota_table(state, kind, owner_name).get((flavor, resource))
    return found


def quota_table(state: ClusterState, kind: str, owner_name: str | None) -> QuotaTable:
    """Every (flavor, resource) a ClusterQueue or Cohort declares, with its quota; kept per index."""
    memo = state.derived(QUOTA_TABLES)
    table = memo.get((kind, owner_name))
    if table is None:
        coll = state.cluster_queues if kind == "ClusterQueue" else state.cohorts
        owner = coll.get(owner_name or "")
        table = memo[kind, owner_name] = _quota_table(owner) if owner is not None else {}
    return table


def covered_resources(cq: Mapping[str, Any]) -> set[str]:
    return {r for g in lst(spec(cq).get("resourceGroups")) for r in lst(m(g).get("coveredResources"))
            if isinstance(r, str)}


def flavors_of(cq: Mapping[str, Any]) -> list[str]:
    """The ClusterQueue's flavor names, in resource-group order."""
    return [n for g in lst(spec(cq).get("resourceGroups")) for f in lst(m(g).get("flavors"))
            if isinstance(n := m(f).get("name"), str)]


def flavor_group_of(cq: Mapping[str, Any] | None, flavor: str) -> int:
    for n, g in enumerate(lst(spec(cq or {}).get("resourceGroups"))):
        if any(m(f).get("name") == flavor for f in lst(m(g).get("flavors"))):
            return n
    return -1


def resource_group_of(cq: Mapping[str, Any] | None, resource: str) -> int:
    for n, g in enumerate(lst(spec(cq or {}).get("resourceGroups"))):
        if resource in lst(m(g).get("coveredResources")):
            return n
    return -1


def reserved_in(state: ClusterState, cq_name: str, flavor: str, resource: str) -> Decimal | None:
    """Quota of the ClusterQueue reserved now (status.flavorsReservation), cached for the pass; for a (flavor,
    resource) it no longer covers, what its Workloads' admissions still hold of it (`uncovered_usage`)."""
    memo = state.derived(RESERVED)
    key = (cq_name, flavor, resource)
    if key not in memo:
        cq = state.cluster_queues.get(cq_name)
        found = reserved(cq, flavor, resource) if cq is not None else None
        if cq is not None and (flavor, resource) not in quota_table(state, "ClusterQueue", cq_name):
            held = uncovered_usage(state, cq_name).get((flavor, resource))
            if held is not None:
                found = held.amount
        memo[key] = found
    value: Decimal | None = memo[key]
    return value


@dataclass(frozen=True)
class Uncovered:
    """What Workloads admitted in a ClusterQueue hold of a (flavor, resource) its spec no longer covers."""

    amount: Decimal
    holders: tuple[tuple[tuple[str, str], Decimal], ...]  # ((namespace, name), held), the most first


def uncovered_usage(state: ClusterState, cq_name: str) -> dict[tuple[str, str], Uncovered]:
    """(flavor, resource) -> what the ClusterQueue's admitted Workloads hold of it while its spec no longer covers
    it (a resource or flavor removed after they were admitted). Kueue keeps counting it: the cache adds every pair
    of an admission to the queue's usage (clusterqueue.go updateWorkloadUsage), and with no quota of its own for
    it all of it is usage in the cohort (resource_node.go accumulateFromChild), so it holds other members' quota;
    but status.flavorsReservation lists only the pairs the queue covers (cache.go getUsage), so no status shows it.
    Per ClusterQueue, kept per index (a Workload change drops it)."""
    memo = state.derived(UNCOVERED)
    found = memo.get(cq_name)
    if found is None:
        table = quota_table(state, "ClusterQueue", cq_name)
        held: dict[tuple[str, str], list[tuple[tuple[str, str], Decimal]]] = {}
        idx = state.index
        for key in sorted(idx.workloads_by_cq.get(cq_name, ())):
            wl = state.workloads.get(key) if idx.holds_quota(key) else None
            if wl is None or s(m(status(wl).get("admission")).get("clusterQueue")) != cq_name:
                continue
            for pair, value in admitted_usage(wl).items():
                if value > 0 and pair not in table:
                    held.setdefault(pair, []).append((key, value))
        found = memo[cq_name] = {
            pair: Uncovered(sum((v for _, v in hs), Decimal(0)), tuple(sorted(hs, key=lambda h: (-h[1], h[0]))))
            for pair, hs in held.items()}
    return found


UNCOVERED: Derived[dict[str, dict[tuple[str, str], Uncovered]]] = Derived(
    "what admitted Workloads hold of pairs their ClusterQueue no longer covers", lambda _: {})


def reserved(cq: Mapping[str, Any], flavor: str, resource: str, field: str = "flavorsReservation") -> Decimal | None:
    for fr in lst(status(cq).get(field)):
        if m(fr).get("name") != flavor:
            continue
        for r in lst(m(fr).get("resources")):
            if m(r).get("name") == resource:
                return parse(m(r).get("total")) or Decimal(0)
        return Decimal(0)
    return None


def cohort_borrowable(state: ClusterState, cq_name: str, flavor: str, resource: str) -> Decimal | None:
    """What the ClusterQueue could borrow from its cohort right now: an estimate (API-NOTES section 7).

    A cohort tree (parents or child cohorts) is computed by `cohort_tree` (None for a cycle, so no number is
    shown rather than a wrong one). A flat cohort, per member M: lendable(M) = min(lendingLimit, nominal) or
    nominal, local(M) = nominal - lendable(M); usage beyond local counts against the cohort's pool.
    """
    return _per_queue(state, BORROWABLE, _cohort_borrowable, cq_name, flavor, resource)


T = TypeVar("T")


def _per_queue(state: ClusterState, table: Derived[dict[tuple[str, str, str], T]],
               compute: Callable[[ClusterState, str, str, str], T], cq_name: str, flavor: str, resource: str) -> T:
    """`compute` once per (ClusterQueue, flavor, resource) and pass: every Workload of the queue asks the same."""
    memo = state.derived(table)
    key = (cq_name, flavor, resource)
    if key not in memo:
        memo[key] = compute(state, cq_name, flavor, resource)
    return memo[key]


def _cohort_borrowable(state: ClusterState, cq_name: str, flavor: str, resource: str) -> Decimal | None:
    cohort_name = s(spec(state.cluster_queues.get(cq_name) or {}).get("cohortName"))
    if not cohort_name:
        return None
    if in_cohort_tree(state, cohort_name):
        tree = cohort_tree(state, cq_name, flavor, resource)
        if tree is None:
            return None
        me = tree.path[0]
        return max(Decimal(0), tree.available() - max(Decimal(0), me.subtree - me.usage))
    mine = flavor_quota(state, "ClusterQueue", cq_name, flavor, resource)
    if mine is None:
        return None
    pool, in_pool = _cohort_pool(state, cohort_name, flavor, resource)
    nominal = mine.nominal or Decimal(0)
    lendable, local = _split(mine)
    used = reserved_in(state, cq_name, flavor, resource) or Decimal(0)
    pool_free = max(Decimal(0), pool - in_pool)
    if mine.borrowing_limit is not None:  # what it stored in the pool, less what it took, plus its limit
        pool_free = min(pool_free, max(Decimal(0), lendable - max(Decimal(0), used - local) + mine.borrowing_limit))
    available = max(Decimal(0), local - used) + pool_free
    return max(Decimal(0), available - max(Decimal(0), nominal - used))  # beyond its own unused nominal


def overdrawn(state: ClusterState, cq_name: str, flavor: str, resource: str) -> Decimal:
    """How far below zero Kueue's `available` is for the ClusterQueue: more is held than the quota it may use (a
    nominalQuota lowered, a resource removed or a queue moved after admissions; resource_node.go `available` "may
    return a negative number in the case of overadmission"). Kueue floors it at 0 (clusterqueue_snapshot.go
    Available) and counts its "N more needed" from there, so this much more must be freed, or added, than it
    states. 0 when not over, unknown, or with a cohort cycle; kept per pass."""
    return _per_queue(state, OVERDRAWN, _overdrawn, cq_name, flavor, resource)


def _overdrawn(state: ClusterState, cq_name: str, flavor: str, resource: str) -> Decimal:
    cq = state.cluster_queues.get(cq_name)
    if cq is None:
        return Decimal(0)
    if s(spec(cq).get("cohortName")):
        tree = cohort_tree(state, cq_name, flavor, resource)
        return max(Decimal(0), -tree.available()) if tree is not None else Decimal(0)
    fq = flavor_quota(state, "ClusterQueue", cq_name, flavor, resource)
    used = reserved_in(state, cq_name, flavor, resource)
    if fq is None or used is None:
        return Decimal(0)
    return max(Decimal(0), used - (fq.nominal or Decimal(0)))


OVERDRAWN: Derived[dict[tuple[str, str, str], Decimal]] = Derived("over-admission per queue/flavor/resource",
                                                                  lambda _: {}, numbers=True)


def in_cohort_tree(state: ClusterState, cohort_name: str) -> bool:
    """The cohort has a parent or child cohorts (a tree, not a flat cohort); per cohort, kept per index."""
    memo = state.derived(COHORT_IN_TREE)
    found = memo.get(cohort_name)
    if found is None:
        cohort = state.cohorts.get(cohort_name)
        found = memo[cohort_name] = bool((cohort is not None and s(spec(cohort).get("parentName"))) or any(
            s(spec(c).get("parentName")) == cohort_name for c in state.cohorts.values()))
    return found


def fair_sharing_on(state: ClusterState, cq: Mapping[str, Any] | None) -> bool:
    """Kueue runs with fair sharing: it writes status.fairSharing on every ClusterQueue then, and only then."""
    return cq is not None and state.read_numbers(cq).get("fairSharing") is not None


def tries_preemption(state: ClusterState, cq_name: str, asked: Decimal | None, nominal: Decimal | None) -> bool:
    """Does Kueue look for Workloads to preempt when a request is short of unused quota (flavorassigner
    fitsResourceQuota)? Yes when the request fits the queue's nominal quota, when the queue may preempt while
    borrowing (borrowWithinCohort not Never; or fair sharing on, which Kueue shows as status.fairSharing, and
    reclaimWithinCohort not Never), or when its cohort is part of a tree (Kueue asks whether the lowest subtree
    that fits is below the top; assumed so for every tree). Otherwise it only waits for running Workloads to
    finish. Unknown amounts: assumed yes."""
    if asked is None or nominal is None or asked <= nominal:
        return True
    cq = state.cluster_queues.get(cq_name)
    if cq is None:
        return True
    preemption = m(spec(cq).get("preemption"))
    if (s(m(preemption.get("borrowWithinCohort")).get("policy")) or "Never") != "Never":
        return True
    if fair_sharing_on(state, cq) and (s(preemption.get("reclaimWithinCohort")) or "Never") != "Never":
        return True
    cohort = s(spec(cq).get("cohortName"))
    return bool(cohort) and in_cohort_tree(state, cohort or "")


def borrowing(state: ClusterState, cq_name: str, flavor: str, resource: str) -> bool:
    """The ClusterQueue reserves more of (flavor, resource) than its nominal quota. Only such a queue's Workloads
    are preemption candidates for another queue of its cohort (classical: collectCandidatesInSubtree and
    candidateIsValid skip a queue IsWithinNominalInResources; fair sharing: cqIsBorrowing)."""
    fq = flavor_quota(state, "ClusterQueue", cq_name, flavor, resource)
    used = reserved_in(state, cq_name, flavor, resource)
    nominal = (fq.nominal or Decimal(0)) if fq is not None else Decimal(0)
    return used is not None and used > nominal


def cohort_queues(state: ClusterState, cq_name: str) -> tuple[str, ...]:
    """Every ClusterQueue of the ClusterQueue's cohort, or of its whole cohort tree (where Kueue looks for
    preemption candidates: the root's SubtreeClusterQueues), itself included; () without a cohort or with a
    cycle. The same for every member: kept per root and index."""
    name = s(spec(state.cluster_queues.get(cq_name) or {}).get("cohortName"))
    seen: list[str] = []
    while name:
        if name in seen:
            return ()
        seen.append(name)
        name = s(spec(state.cohorts.get(name) or {}).get("parentName"))
    if not seen:
        return ()
    memo = state.derived(COHORT_QUEUES)
    root = seen[-1]
    found = memo.get(root)
    if found is None:
        children: dict[str, list[str]] = {}
        for cname, c in state.cohorts.items():
            parent = s(spec(c).get("parentName"))
            if parent:
                children.setdefault(parent, []).append(cname)
        queues: list[str] = []
        todo, visited = [root], set()
        while todo:
            cohort = todo.pop()
            if cohort in visited:
                continue
            visited.add(cohort)
            queues += state.index.cqs_by_cohort.get(cohort, [])
            todo += children.get(cohort, [])
        found = memo[root] = tuple(sorted(queues))
    return found


COHORT_QUEUES: Derived[dict[str, tuple[str, ...]]] = Derived("the ClusterQueues of a cohort tree", lambda _: {})


def _cohort_pool(state: ClusterState, cohort_name: str, flavor: str, resource: str) -> tuple[Decimal, Decimal]:
    """(pool, in pool) of a flat cohort for (flavor, resource): what its members and the Cohort itself lend,
    and how much of that the members use beyond their local quota. The same for every member queue, so kept
    per (cohort, flavor, resource) for the index: each member's Workloads ask for it."""
    memo = state.derived(COHORT_POOLS)
    key = (cohort_name, flavor, resource)
    found = memo.get(key)
    if found is not None:
        return found
    pool = Decimal(0)
    in_pool = Decimal(0)
    for member in state.index.cqs_by_cohort.get(cohort_name, []):
        # a member without quota for it lends nothing, and all it still holds of it is usage in the pool
        lendable, local = _split(_quota_of(state, "ClusterQueue", member, flavor, resource))
        used = reserved_in(state, member, flavor, resource) or Decimal(0)
        pool += lendable
        in_pool += max(Decimal(0), used - local)
    own = flavor_quota(state, "Cohort", cohort_name, flavor, resource)
    if own is not None:
        pool += own.nominal or Decimal(0)
    found = memo[key] = (pool, in_pool)
    return found


COHORT_IN_TREE: Derived[dict[str, bool]] = Derived("cohort is part of a tree", lambda _: {})
COHORT_POOLS: Derived[dict[tuple[str, str, str], tuple[Decimal, Decimal]]] = Derived(
    "flat cohort pool per flavor/resource", lambda _: {}, numbers=True)


def _split(fq: FlavorQuota) -> tuple[Decimal, Decimal]:
    """(lendable to the cohort, kept local) of a member's nominal quota."""
    nominal = fq.nominal or Decimal(0)
    lendable = nominal if fq.lending_limit is None else min(fq.lending_limit, nominal)
    return lendable, nominal - lendable


@dataclass(frozen=True)
class Lent:
    """A ClusterQueue's unused nominal quota that other members of its cohort hold now, borrowing."""

    amount: Decimal  # of its unused (lendable) nominal quota, the part its cohort has no room for: the borrowers
    borrowers: tuple[tuple[str, Decimal], ...]  # (ClusterQueue, what it borrows), the most first
    reclaim: str  # its spec.preemption.reclaimWithinCohort: Never (Kueue's default), LowerPriority or Any


def lent_quota(state: ClusterState, cq_name: str, flavor: str, resource: str) -> Lent | None:
    """Who in the ClusterQueue's cohort borrows the part of its nominal quota it does not use, and whether Kueue
    would take it back for it; None when nobody does. The same for every Workload of the queue: kept per pass."""
    return _per_queue(state, LENT, _lent_quota, cq_name, flavor, resource)


def _lent_quota(state: ClusterState, cq_name: str, flavor: str, resource: str) -> Lent | None:
    """Its unused lendable quota sits in its cohort's pool (resource_node.go SubtreeQuota): others hold it only
    where the pool has less free than that, other members' idle quota covering the rest of their borrowing. What
    it may take back is its own nominal quota, so its borrowingLimit never caps it."""
    cq = state.cluster_queues.get(cq_name)
    cohort_name = s(spec(cq or {}).get("cohortName"))
    mine = flavor_quota(state, "ClusterQueue", cq_name, flavor, resource)
    if cq is None or not cohort_name or mine is None:
        return None
    lendable, local = _split(mine)
    used = reserved_in(state, cq_name, flavor, resource) or Decimal(0)
    unused = max(Decimal(0), lendable - max(Decimal(0), used - local))  # what of its lendable part it leaves
    tree = cohort_tree(state, cq_name, flavor, resource) if unused > 0 else None
    if tree is None:
        return None
    held = unused - max(Decimal(0), tree.available(1))  # what its cohort can give now: the pool's free part
    if held <= 0:
        return None
    borrowers = []
    for member in cohort_queues(state, cq_name):
        if member == cq_name:
            continue
        fq = _quota_of(state, "ClusterQueue", member, flavor, resource)  # none: what it holds is all borrowed
        over = (reserved_in(state, member, flavor, resource) or Decimal(0)) - (fq.nominal or Decimal(0))
        if over > 0:
            borrowers.append((member, over))
    if not borrowers:
        return None
    borrowers.sort(key=lambda b: (-b[1], b[0]))
    reclaim = s(m(spec(cq).get("preemption")).get("reclaimWithinCohort")) or "Never"
    return Lent(min(held, sum((b for _, b in borrowers), Decimal(0))), tuple(borrowers), reclaim)


LENT: Derived[dict[tuple[str, str, str], Lent | None]] = Derived("nominal quota lent per queue/flavor/resource",
                                                                 lambda _: {}, numbers=True)


# Quantities, memoized and bound directly (asked thousands of times per pass; a wrapper cost a call each): `exact`
# for what is read back or typed (status.quota and status.blocker figures, remedies' commands), `fmt` for a sentence
# (bytes in the largest binary unit they reach, "8.63Gi"; counts whole, "1000", where Kueue prints "1k")
exact = format_quantity
fmt = readable


def said(resource: str, text: str | None) -> str | None:
    """A figure Kueue or a status field wrote ("1k", "9262144k"), as `fmt` puts it in a sentence; the text itself
    when it is no quantity ("<unlimited>")."""
    value = parse(text)
    return readable(resource, value) if value is not None else text


# ---- hierarchical cohorts (Kueue's resource nodes, pkg/cache/scheduler/resource_node.go) ------------------


@dataclass
class TreeNode:
    """One ClusterQueue or Cohort of a tree, for one (flavor, resource): Kueue's SubtreeQuota and Usage."""

    kind: str
    name: str
    quota: FlavorQuota
    subtree: Decimal = Decimal(0)  # own nominal + what the children lend up
    usage: Decimal = Decimal(0)  # a ClusterQueue's reservations; a Cohort's: children's usage past their local quota

    @property
    def local(self) -> Decimal:
        """Capacity kept for the subtree (lendingLimit): never lent to the parent."""
        lend = self.quota.lending_limit
        return max(Decimal(0), self.subtree - lend) if lend is not None else Decimal(0)

    @property
    def lends(self) -> Decimal:
        """What this node puts in its parent's pool (SubtreeQuota - localQuota)."""
        return self.subtree - self.local


@dataclass
class CohortTree:
    """The path from a ClusterQueue up to the root Cohort, each node computed over its whole subtree."""

    path: list[TreeNode]  # [ClusterQueue, its Cohort, ..., root]
    nodes: dict[str, TreeNode] = field(default_factory=dict)  # "Kind/name" -> every node of the tree

    def available(self, start: int = 0, skip: int | None = None) -> Decimal:
        """Kueue's `available`: what the node at `start` can use now (local unused + what the parents give,
        each capped by the node's borrowingLimit less what it already stores/uses in the parent); `skip` ignores
        one node's borrowingLimit (to find the limit that holds it back now)."""
        node = self.path[start]
        if start == len(self.path) - 1:
            return node.subtree - node.usage
        parent = self.available(start + 1, skip)
        if node.quota.borrowing_limit is not None and start != skip:
            stored = node.subtree - node.local
            used = max(Decimal(0), node.usage - node.local)
            parent = min(stored - used + node.quota.borrowing_limit, parent)
        return max(Decimal(0), node.local - node.usage) + parent

    def available_without(self, freed: Decimal) -> Decimal:
        """`available` once the ClusterQueue's own Workloads holding `freed` are gone (Kueue's removeUsage: what
        each node stored in its parent goes down with it). The memoized nodes are left as they are."""
        nodes, drop = [], freed
        for node in self.path:
            after = max(Decimal(0), node.usage - drop)
            nodes.append(TreeNode(node.kind, node.name, node.quota, node.subtree, after))
            drop = max(Decimal(0), node.usage - node.local) - max(Decimal(0), after - node.local)
        return CohortTree(nodes).available()

    def potential(self, start: int = 0, skip: int | None = None) -> Decimal:
        """Kueue's `potentialAvailable`: the most the node could get with nothing in use (its maximum
        capacity); `skip` ignores one node's borrowingLimit (to find the limit that binds)."""
        node = self.path[start]
        if start == len(self.path) - 1:
            return node.subtree
        avail = node.local + self.potential(start + 1, skip)
        if node.quota.borrowing_limit is not None and start != skip:
            avail = min(node.subtree + node.quota.borrowing_limit, avail)
        return avail

    def limit_raises(self, requested: Decimal) -> list[tuple[TreeNode, Decimal]] | None:
        """The borrowingLimits on the way up to raise, and to what, for the ClusterQueue's maximum (`potential`) to
        reach `requested`: each node must give what its child cannot keep locally (need - local); [] when none
        holds it back; None when even without limits the tree has too little."""
        need, out = requested, []
        for node in self.path[:-1]:
            limit = node.quota.borrowing_limit
            if limit is not None and node.subtree + limit < need:
                out.append((node, need - node.subtree))
            need -= node.local
        return out if self.path[-1].subtree >= need else None

    def limit_holding_back(self) -> TreeNode | None:
        """The node whose borrowingLimit keeps the ClusterQueue from using more now (the highest one that does)."""
        return self._highest_limit(lambda skip: self.available(skip=skip))

    def binding_limit(self) -> TreeNode | None:
        """The node whose borrowingLimit caps the ClusterQueue's maximum (the highest one that does)."""
        return self._highest_limit(lambda skip: self.potential(skip=skip))

    def _highest_limit(self, measure: Callable[[int | None], Decimal]) -> TreeNode | None:
        """The highest node whose borrowingLimit, lifted, gives the ClusterQueue more by `measure`."""
        base = measure(None)
        found = None
        for n, node in enumerate(self.path):
            if node.quota.borrowing_limit is not None and measure(n) > base:
                found = node
        return found

    def levels(self, resource: str) -> str:
        """'cohort inner lends 1 up, uses 0 of the parent, borrowingLimit 1; root holds 3, 1 in use' (estimate)."""
        parts = []
        for node in self.path[1:]:
            text = f"{node.kind.lower()} {node.name}: subtree {fmt(resource, node.subtree)}, "
            text += f"{fmt(resource, node.usage)} used by its children beyond their own"
            if node is not self.path[-1]:
                text += f", lends {fmt(resource, node.lends)} up"
            if node.quota.borrowing_limit is not None:
                text += f", borrowingLimit {fmt(resource, node.quota.borrowing_limit)}"
            if node.quota.lending_limit is not None:
                text += f", lendingLimit {fmt(resource, node.quota.lending_limit)}"
            parts.append(text)
        return "; ".join(parts)


def own_room_gain(state: ClusterState, cq_name: str, flavor: str, resource: str, freed: Decimal) -> Decimal | None:
    """How much more of (flavor, resource) the ClusterQueue could use now if its own Workloads holding `freed` were
    preempted (withinClusterQueue): all of it without a cohort; in a cohort what Kueue's `available` gains, its
    borrowingLimit and the cohort's free quota counted. None with a cohort cycle."""
    cohort_name = s(spec(state.cluster_queues.get(cq_name) or {}).get("cohortName"))
    if not cohort_name:
        return freed
    tree = cohort_tree(state, cq_name, flavor, resource)
    if tree is None:
        return None
    return max(Decimal(0), tree.available_without(freed)) - max(Decimal(0), tree.available())


_NO_QUOTA = FlavorQuota(Decimal(0), None, None)


def cohort_tree(state: ClusterState, cq_name: str, flavor: str, resource: str) -> CohortTree | None:
    """The ClusterQueue's path to the root of its cohort tree for (flavor, resource); None without a cohort or
    with a cycle. A Cohort named but not in the input counts as one without quota (Kueue's implicit cohort).
    Kept per index: every Workload of the queue short of (flavor, resource) asks for the same tree."""
    memo = state.derived(COHORT_TREES)
    key = (cq_name, flavor, resource)
    if key not in memo:
        memo[key] = _cohort_tree(state, cq_name, flavor, resource)
    return memo[key]


def _cohort_chain(state: ClusterState, cq_name: str) -> list[str] | None:
    """The ClusterQueue's Cohort, its parent, ... up to the root; None without a cohort or with a cycle."""
    name: str | None = s(spec(state.cluster_queues.get(cq_name) or {}).get("cohortName"))
    chain: list[str] = []
    while name:
        if name in chain:
            return None
        chain.append(name)
        name = s(spec(state.cohorts.get(name) or {}).get("parentName"))
    return chain or None


def _cohort_tree(state: ClusterState, cq_name: str, flavor: str, resource: str) -> CohortTree | None:
    """The nodes of a tree are built once per root, flavor and resource and shared by the paths of all its queues
    (a tree of a hundred queues was built a hundred times, each copy kept for the pass)."""
    chain = _cohort_chain(state, cq_name)
    if chain is None:
        return None
    memo = state.derived(TREE_NODES)
    key = (chain[-1], flavor, resource)
    nodes = memo.get(key) or memo.setdefault(key, _tree_nodes(state, chain[-1], flavor, resource))
    path = [nodes.get(f"ClusterQueue/{cq_name}")] + [nodes.get(f"Cohort/{c}") for c in chain]
    if any(p is None for p in path):
        return None
    return CohortTree([p for p in path if p is not None], nodes)


def _tree_nodes(state: ClusterState, root: str, flavor: str, resource: str) -> dict[str, TreeNode]:
    """Every node of the tree under Cohort `root`, "Kind/name" -> node, each computed over its subtree. Plain
    functions, not closures: a recursive closure is a reference cycle, which only the cyclic collector frees, and
    it is paused during a pass (kube/allocation.cycle_collection_paused)."""
    nodes: dict[str, TreeNode] = {}
    nodes[f"Cohort/{root}"] = _cohort_node(state, root, flavor, resource, nodes, 0)
    return nodes


def _children(state: ClusterState) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for cname, c in state.cohorts.items():
        parent = s(spec(c).get("parentName"))
        if parent:
            children.setdefault(parent, []).append(cname)
    return children


def _quota_of(state: ClusterState, kind: str, name: str, flavor: str, resource: str) -> FlavorQuota:
    return flavor_quota(state, kind, name, flavor, resource) or _NO_QUOTA


def _cohort_node(state: ClusterState, name: str, flavor: str, resource: str, nodes: dict[str, TreeNode],
                 depth: int) -> TreeNode:
    fq = _quota_of(state, "Cohort", name, flavor, resource)
    node = TreeNode("Cohort", name, fq, fq.nominal or Decimal(0))
    kids = []
    for q in state.index.cqs_by_cohort.get(name, []):
        cq_quota = _quota_of(state, "ClusterQueue", q, flavor, resource)
        kid = TreeNode("ClusterQueue", q, cq_quota, cq_quota.nominal or Decimal(0))
        kid.usage = reserved_in(state, q, flavor, resource) or Decimal(0)
        kids.append(kid)
    if depth < 32:
        kids += [_cohort_node(state, c, flavor, resource, nodes, depth + 1)
                 for c in state.derived(COHORT_CHILDREN).get(name, [])]
    for kid in kids:
        nodes[f"{kid.kind}/{kid.name}"] = kid
        node.subtree += kid.lends
        node.usage += max(Decimal(0), kid.usage - kid.local)
    return node


@dataclass(frozen=True)
class Withheld:
    """Idle quota another node of the tree keeps for its own subtree (its lendingLimit), and the lendingLimit
    that would let the ClusterQueue have what it misses (None: raising it alone is not enough)."""

    kind: str
    name: str
    limit: Decimal
    idle: Decimal  # its local quota its subtree does not use
    enough: Decimal | None


def withheld_by_lending_limits(state: ClusterState, cq_name: str, flavor: str, resource: str,
                               missing: Decimal) -> list[Withheld]:
    """The nodes of the ClusterQueue's cohort tree (not itself, not its ancestors: their local quota is its own
    subtree's) whose lendingLimit keeps idle quota out of the pool it borrows from (resource_node.go: localQuota =
    SubtreeQuota - LendingLimit, usage first consumes it). `enough`: their lendingLimit raised by `missing`, when
    Kueue's `available` then grows by that much (a raise gives at most what it adds, so it is the least one);
    a ClusterQueue's lendingLimit may not exceed its nominalQuota (webhook). Kept per queue, flavor, resource,
    amount: every Workload of the queue short of the same asks the same."""
    memo = state.derived(WITHHELD)
    key = (cq_name, flavor, resource, missing)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _withheld(state, cq_name, flavor, resource, missing)
    return found


def _withheld(state: ClusterState, cq_name: str, flavor: str, resource: str, missing: Decimal) -> list[Withheld]:
    tree = cohort_tree(state, cq_name, flavor, resource)
    if tree is None or missing <= 0:
        return []
    mine = {f"{n.kind}/{n.name}" for n in tree.path}
    base = tree.available()
    out = []
    for ref, node in sorted(tree.nodes.items()):
        limit = node.quota.lending_limit
        idle = max(Decimal(0), node.local - node.usage)
        if ref in mine or limit is None or idle <= 0:
            continue
        raised = limit + missing
        enough: Decimal | None = None
        # a raise lends at most the idle quota: less idle than missing is never enough (no what-if tree needed)
        if raised <= node.subtree and idle >= missing:
            what_if = _with_lending_limit(state, tree, node, raised)
            if what_if is not None and what_if.available() - base >= missing:
                enough = raised
        out.append(Withheld(node.kind, node.name, limit, idle, enough))
    return out


def _with_lending_limit(state: ClusterState, tree: CohortTree, node: TreeNode, limit: Decimal) -> CohortTree | None:
    """The tree's path as it would be with `node`'s lendingLimit set to `limit`: only the node and its ancestors
    change (what it lends, what its usage spills into its parent), recomputed upwards as `_cohort_node` computes
    them; the other nodes are shared, none is modified. None when a parent is not in the tree."""
    q = node.quota
    old, new = node, TreeNode(node.kind, node.name, FlavorQuota(q.nominal, q.borrowing_limit, limit), node.subtree,
                              node.usage)
    changed = {f"{node.kind}/{node.name}": new}
    while True:
        parent_name = s(spec(state.cluster_queues.get(old.name) or {}).get("cohortName")) \
            if old.kind == "ClusterQueue" else s(spec(state.cohorts.get(old.name) or {}).get("parentName"))
        parent = tree.nodes.get(f"Cohort/{parent_name}") if parent_name else None
        if parent is None:
            break
        lifted = TreeNode(parent.kind, parent.name, parent.quota, parent.subtree - old.lends + new.lends,
                          parent.usage - max(Decimal(0), old.usage - old.local)
                          + max(Decimal(0), new.usage - new.local))
        changed[f"Cohort/{parent.name}"] = lifted
        old, new = parent, lifted
    if f"Cohort/{tree.path[-1].name}" not in changed:
        return None  # its chain did not reach the root: not of this tree
    return CohortTree([changed.get(f"{n.kind}/{n.name}", n) for n in tree.path], tree.nodes)


WITHHELD: Derived[dict[tuple[str, str, str, Decimal], list[Withheld]]] = Derived(
    "idle quota kept by lendingLimits per queue/flavor/resource/amount", lambda _: {}, numbers=True)


@dataclass(frozen=True, order=True)
class Share:
    """Kueue's DominantResourceShare of a ClusterQueue (pkg/cache/scheduler/fair_sharing.go), ordered as CompareDRS
    orders them: a queue of weight 0 that borrows above all others (they compare unweighted among themselves)."""

    zero_weight_borrows: bool
    value: float  # the weighted share, 1000 = all its cohort can lend; the unweighted one when zero_weight_borrows

    def shown(self) -> str:
        """As Kueue writes status.fairSharing.weightedShare: rounded up, infinite for a zero weight."""
        return "infinite" if self.zero_weight_borrows else str(math.ceil(self.value))


def fair_weight(state: ClusterState, cq_name: str) -> Decimal:
    """spec.fairSharing.weight, 1 when unset (Kueue's defaultWeight)."""
    found = parse(m(spec(state.cluster_queues.get(cq_name) or {}).get("fairSharing")).get("weight"))
    return Decimal(1) if found is None else found


def dominant_share(state: ClusterState, cq_name: str, delta: Mapping[tuple[str, str], Decimal]) -> Share | None:
    """The ClusterQueue's share with `delta` added to its usage (a Workload admitted: +, preempted: -): per
    resource, what it uses beyond its nominal quota summed over flavors, x1000 over what its cohort could lend of
    that resource (calculateLendable: potentialAvailable of its Cohort, every flavor of the tree), the largest, over
    its fairSharing.weight. None without a cohort or with a cycle."""
    borrowed: dict[str, Decimal] = {}
    for (flavor, resource), fq in quota_table(state, "ClusterQueue", cq_name).items():
        used = (reserved_in(state, cq_name, flavor, resource) or Decimal(0)) + delta.get((flavor, resource), 0)
        over = used - (fq.nominal or Decimal(0))
        if over > 0:
            borrowed[resource] = borrowed.get(resource, Decimal(0)) + over
    if not borrowed:
        return Share(False, 0.0)
    ratio = 0.0
    for resource, amount in sorted(borrowed.items()):
        lendable = cohort_lendable(state, cq_name, resource)
        if lendable is None:
            return None
        if lendable > 0:
            ratio = max(ratio, float(amount) * 1000.0 / float(lendable))
    weight = fair_weight(state, cq_name)
    if weight == 0:
        return Share(ratio > 0, ratio)
    return Share(False, ratio / float(weight))


def cohort_lendable(state: ClusterState, cq_name: str, resource: str) -> Decimal | None:
    """What the ClusterQueue's Cohort could lend of `resource` over all flavors (calculateLendable: its
    potentialAvailable per flavor of the tree), the denominator of its share; None with a cycle. Kept per pass."""
    return _per_queue(state, LENDABLE, _cohort_lendable, cq_name, "", resource)


def _cohort_lendable(state: ClusterState, cq_name: str, _: str, resource: str) -> Decimal | None:
    total = Decimal(0)
    for flavor in _tree_flavors(state, cq_name, resource):
        tree = cohort_tree(state, cq_name, flavor, resource)
        if tree is None:
            return None
        total += tree.potential(1)
    return total


LENDABLE: Derived[dict[tuple[str, str, str], Decimal | None]] = Derived("cohort lendable per queue/resource",
                                                                        lambda _: {}, numbers=True)


def _tree_flavors(state: ClusterState, cq_name: str, resource: str) -> list[str]:
    """The flavors of `resource` anywhere in the ClusterQueue's cohort tree (the root's SubtreeQuota keys)."""
    found: set[str] = set()
    for member in cohort_queues(state, cq_name):
        found.update(fl for fl, r in quota_table(state, "ClusterQueue", member) if r == resource)
    root = _root_of(state, s(spec(state.cluster_queues.get(cq_name) or {}).get("cohortName")) or "")
    for cohort in state.cohorts:
        if _root_of(state, cohort) == root:
            found.update(fl for fl, r in quota_table(state, "Cohort", cohort) if r == resource)
    return sorted(found)


def _root_of(state: ClusterState, cohort: str) -> str | None:
    """The root of a Cohort's tree (the last one before a cycle repeats)."""
    name: str | None = cohort
    seen: set[str] = set()
    root = None
    while name and name not in seen:
        seen.add(name)
        root = name
        name = s(spec(state.cohorts.get(name) or {}).get("parentName"))
    return root


TREE_NODES: Derived[dict[tuple[str, str, str], dict[str, TreeNode]]] = Derived(
    "the nodes of a cohort tree per root/flavor/resource", lambda _: {}, numbers=True)
COHORT_CHILDREN: Derived[dict[str, list[str]]] = Derived("the child Cohorts of each Cohort", _children)
COHORT_TREES: Derived[dict[tuple[str, str, str], CohortTree | None]] = Derived("cohort tree per queue/flavor/resource",
                                                                             lambda _: {}, numbers=True)
