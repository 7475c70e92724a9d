"""The way out: the smallest changes that would let a Workload in, each with who can make it.

For ExceedsMaxQuota, from the finding's quota lines (Kueue's own numbers when its message gave them):
the ClusterQueue's quota that would be enough for each short resource, and the parallelism that would fit
the maximum; the short flavors of one resource group are alternatives (a pod set takes all the group's resources
from one flavor), the groups all needed. For WaitingForQuota, Kueue's "N more needed": what must be freed, or
added, and the preemption policy that would make room when only one would. A remedy is `exact` only when
Kueue's numbers say the change is enough on its own (no cohort involved, one pod set); otherwise it is an
estimate and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from ..kube.objects import lst, m, name, s, spec
from ..kube.quantity import parse
from ..state import Derived
from ..vocabulary import ActionBy, Cause, Reason
from . import quota
from .admission.flavors import lower_priority_room
from .context import Context
from .messages import FailureKind
from .rules import Finding
from .scheduling.placement import HOSTNAME, LabelConflict, Placement, taint_text, topology_assigned
from .scheduling.workload_pods import unschedulable_placement


def remedies(ctx: Context, f: Finding) -> list[dict[str, Any]]:
    if f.reason == Reason.PODS_UNSCHEDULABLE:
        place = ctx.lazy(unschedulable_placement)
        return placement_remedies(ctx, place) if place is not None else []
    if f.cause == Cause.NO_MATCHING_FLAVOR:
        return flavor_match_remedies(ctx, f)
    if f.reason == Reason.WAITING_FOR_QUOTA:
        return _freed_remedies(ctx, f.quota)
    if f.reason != Reason.EXCEEDS_MAX_QUOTA or not f.quota:
        return []
    short = [q for q in f.quota if _over(_dec(q.get("requested")), _dec(q.get("maximum")))]
    if not short:
        return []
    exact = ctx.cohort is None and len(ctx.requests) <= 1 and all(q.get("source") == "Kueue" for q in short)
    out = [r for q in short for r in _quota_remedies(ctx, q, exact and not _waits_too(ctx, q), _joint(ctx, q, short))]
    parallel = _parallelism_remedy(ctx, short, exact)  # enough alone: it fits every maximum
    if parallel is not None:
        out.append(parallel)
    return out


def _choice(ctx: Context, line: Mapping[str, Any]) -> tuple[Any, Any]:
    """The flavor choice a quota line belongs to: Kueue gives a pod set all the resources of one resource group from
    one flavor (flavorassigner findFlavorForPodSets), so the short flavors of one (pod set, resource group) are
    alternatives, and the choices are all needed."""
    resource = s(line.get("resource")) or ""
    n = quota.resource_group_of(ctx.cq, resource)
    return line.get("podSet"), n if n >= 0 else f"resource:{resource}"


def _joint(ctx: Context, line: Mapping[str, Any], short: Sequence[Mapping[str, Any]]) -> str:
    """How a quota raise combines with the others listed: needed together with the other short resources of its
    flavor and with the other resource groups' choices; an alternative to the other flavors of its group."""
    key, flavor, resource = _choice(ctx, line), line.get("flavor"), line.get("resource")
    mine = [q for q in short if _choice(ctx, q) == key]
    with_it = list(dict.fromkeys(str(q.get("resource")) for q in mine
                                 if q.get("flavor") == flavor and q.get("resource") != resource))
    instead = list(dict.fromkeys(str(q.get("flavor")) for q in mine if q.get("flavor") != flavor))
    elsewhere = list(dict.fromkeys(str(q.get("resource")) for q in short if _choice(ctx, q) != key))
    text = ""
    if with_it:
        text += f" Needed together with raising {', '.join(with_it)} in flavor {flavor}: none is enough alone."
    if instead:
        text += (f" Or instead the raise for flavor {', '.join(instead)}: Kueue gives a pod set all the resources of "
                 "a resource group from one flavor, so either flavor with enough is enough"
                 + (" for that group." if elsewhere else " alone."))
    if elsewhere:
        text += (f" Needed too: the raise for {', '.join(elsewhere)} (another resource group or pod set); no "
                 "group is enough alone.")
    return text


def _waits_too(ctx: Context, line: Mapping[str, Any]) -> bool:
    """Kueue's message also finds the line's flavor short of unused quota in another resource: raised, the flavor
    is no longer over its maximum, yet the Workload still waits there."""
    flavor, resource = line.get("flavor"), line.get("resource")
    return any(x.flavor == flavor and x.resource != resource and x.kind == FailureKind.INSUFFICIENT_UNUSED_QUOTA
               for x in ctx.qr_parsed.failures)


def _dec(value: Any) -> Decimal | None:
    return parse(value) if isinstance(value, str) else None


def _over(requested: Decimal | None, maximum: Decimal | None) -> bool:
    return requested is not None and maximum is not None and requested > maximum


def _quota_remedies(ctx: Context, line: Mapping[str, Any], exact: bool, joint: str = "") -> list[dict[str, Any]]:
    """The raise of one short line: in a cohort, the borrowingLimits that hold its maximum down (its own, a parent
    Cohort's) when raising them is enough, the tree having the quota to lend; else its nominalQuota, which raises
    its maximum as much as it is raised (resource_node.go potentialAvailable)."""
    flavor, resource = s(line.get("flavor")) or "", s(line.get("resource")) or ""
    requested, maximum = _dec(line.get("requested")), _dec(line.get("maximum"))
    if requested is None or maximum is None or not ctx.cq_name:
        return []
    tree = quota.cohort_tree(ctx.state, ctx.cq_name, flavor, resource) if ctx.cohort else None
    raises = tree.limit_raises(requested) if tree is not None else None
    if raises:
        out = []
        for node, enough in reversed(raises):  # the highest first: the one Kueue's maximum names
            with_it = [f"{n.kind} {n.name}'s" for n, _ in raises if n is not node]
            together = (f" Needed together with raising {' and '.join(with_it)} borrowingLimit: none is enough alone."
                        if with_it else "")
            found = _limit_remedy(ctx, node, flavor, resource, enough, together + joint)
            if found is None:
                return _nominal_remedy(ctx, line, tree, exact, joint)
            out.append(found)
        return out
    return _nominal_remedy(ctx, line, tree, exact, joint)


def _nominal_remedy(ctx: Context, line: Mapping[str, Any], tree: quota.CohortTree | None, exact: bool, joint: str
                    ) -> list[dict[str, Any]]:
    flavor, resource = s(line.get("flavor")) or "", s(line.get("resource")) or ""
    requested, maximum = _dec(line.get("requested")) or Decimal(0), _dec(line.get("maximum")) or Decimal(0)
    current, path = _dec(line.get("nominal")), _quota_path(ctx, flavor, resource, "nominalQuota")
    if current is None or path is None:
        return []
    enough = current + (requested - maximum)
    now_text, enough_text = quota.exact(resource, current) or str(current), quota.exact(resource, enough) or str(enough)
    who = ActionBy.QUEUE_ADMIN if ctx.cohort is None else ActionBy.CLUSTER_ADMIN
    return [{"actionBy": who.value, "kind": "ClusterQueue", "name": ctx.cq_name, "field": path, "now": now_text,
             "enough": enough_text, "exact": exact,
             "message": (f"Raise nominalQuota of {resource} in flavor {flavor} of ClusterQueue {ctx.cq_name} from "
                         f"{now_text} to {enough_text}" + ("." if exact else _caveat(ctx, line))
                         + _lending(ctx, tree, flavor, resource, requested - maximum) + joint)}]


def _lending(ctx: Context, tree: quota.CohortTree | None, flavor: str, resource: str, short: Decimal) -> str:
    """A raise of nominalQuota in a cohort: more lent by the cohort does as well when no borrowingLimit on the way
    up caps what the ClusterQueue borrows; with one, only its own quota counts."""
    if tree is None:
        return ""
    capped = [n for n in tree.path if n.quota.borrowing_limit is not None]
    if not capped:
        return (f" Or cohort {ctx.cohort} gets {quota.exact(resource, short)} more {resource} in flavor {flavor} to "
                "lend (another ClusterQueue's nominalQuota, up to its lendingLimit, or a Cohort's own): with no "
                "borrowingLimit in the way, it may borrow that.")
    own = tree.path[0].quota.borrowing_limit
    if capped[0] is tree.path[0] and own == 0:
        return (f" Its borrowingLimit 0 for {resource} in flavor {flavor} keeps it from borrowing: quota lent by "
                f"cohort {ctx.cohort} never helps there.")
    return ""


def _caveat(ctx: Context, line: Mapping[str, Any] | None = None) -> str:
    """Why a quota remedy is an estimate, the first reason that applies."""
    if line is not None and _waits_too(ctx, line):
        return (f" (then within its maximum, though it still waits for unused quota of flavor {line.get('flavor')} "
                "that Kueue's message finds short).")
    if ctx.cohort is not None:  # its maximum rises as much; what it can use also depends on the others' usage
        return " (an estimate: what the cohort's other queues use may still hold it back)."
    if len(ctx.requests) > 1:
        return " (an estimate: Kueue places pod sets one after another, so their sum may need more)."
    return " (an estimate: from the Workload's requests, not a maximum Kueue stated)."


def _limit_remedy(ctx: Context, node: quota.TreeNode, flavor: str, resource: str, enough: Decimal, joint: str
                  ) -> dict[str, Any] | None:
    """Raise the borrowingLimit of the ClusterQueue or of a Cohort above it; an estimate (the tree's arithmetic is
    ours, what its other members lend may change)."""
    owner = ctx.state.cluster_queues.get(node.name) if node.kind == "ClusterQueue" else ctx.state.cohorts.get(node.name)
    found = _quota_paths(owner).get((flavor, resource)) if owner is not None else None
    current = node.quota.borrowing_limit
    if found is None or current is None:
        return None
    now_text, enough_text = quota.exact(resource, current) or str(current), quota.exact(resource, enough) or str(enough)
    return {"actionBy": ActionBy.CLUSTER_ADMIN.value, "kind": node.kind, "name": node.name,
            "field": f"{found}.borrowingLimit", "now": now_text, "enough": enough_text, "exact": False,
            "message": f"Raise borrowingLimit of {resource} in flavor {flavor} of {node.kind} {node.name} from "
                       f"{now_text} to {enough_text} (an estimate: what the rest of the cohort can lend may change "
                       "it)." + joint}


def _freed_remedies(ctx: Context, lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """WaitingForQuota with Kueue's "N more needed", per whole shortfall: N must be freed by running Workloads,
    or added to the nominal quota (exact only without a cohort, where nothing else can lend or reclaim). The
    queue's facts are read once per Workload and the amounts' texts made once per pass (FREED_TEXTS): the
    Workloads waiting in a queue repeat a few of them."""
    cq_name, cohort = ctx.cq_name, ctx.cohort
    paths = _paths_of(ctx)
    memo = ctx.state.derived(FREED_TEXTS)
    who = ActionBy.QUEUE_ADMIN.value if cohort is None else ActionBy.CLUSTER_ADMIN.value
    out: list[dict[str, Any]] = []
    whole = _whole_shortfalls(lines)
    for line in whole:
        flavor, resource = s(line.get("flavor")) or "", s(line.get("resource")) or ""
        found = paths.get((flavor, resource))
        if found is None or not cq_name:  # no field to name: no remedy
            continue
        missing, nominal = line.get("missing"), line.get("nominal")
        # held beyond the quota it may use: Kueue's "N more needed" counts from none unused, this much more is needed
        over = quota.overdrawn(ctx.state, cq_name, flavor, resource) if missing is not None else Decimal(0)
        if type(missing) is str and type(nominal) is str:
            key = (resource, missing, nominal, over)
            texts = memo.get(key)
            if texts is None:
                texts = memo[key] = _freed_texts(resource, missing, nominal, over)
        else:
            texts = _freed_texts(resource, missing, nominal, over)
        if not texts:
            continue
        now_text, enough, need, now_said, enough_said = texts
        behind = (f"; {'cohort ' + cohort if cohort is not None else 'it'} holds {quota.fmt(resource, over)} more "
                  "than its quota (over-admitted: a quota lowered or removed since), which Kueue's "
                  f"\"{missing} more needed\" leaves out" if over > 0 else "")
        # partial admission (minCount): fewer Pods may start with less freed, so the figures are an upper bound
        partial = quota.partial_floor(ctx.wl, ctx.requests, resource) is not None
        exact = cohort is None and line.get("source") == "Kueue" and not partial
        why = _FREED_EXACT if exact else _FREED_ESTIMATE if cohort is not None else _FREED_PARTIAL if partial \
            else _FREED_OURS
        # in a cohort, other queues may be borrowing this queue's unused nominal quota: theirs frees it too, unless
        # its own borrowingLimit caps it (then only its own Workloads' quota makes room)
        freed_too = f" or of cohort {cohort}" if cohort is not None and not _own_limit_caps(line) else ""
        out.append({"actionBy": who, "kind": "ClusterQueue", "name": cq_name, "field": f"{found}.nominalQuota",
                    "now": now_text, "enough": enough, "exact": exact,
                    "message": f"{need} in flavor {flavor} must be freed by Workloads of ClusterQueue "
                               f"{cq_name}{freed_too} finishing, or nominalQuota raised from {now_said} to "
                               f"{enough_said}{behind}{why}"})
        extra = _within_queue_remedy(ctx, flavor, resource, line) if len(whole) == 1 else None
        extra = extra or _reclaim_remedy(ctx, flavor, resource, line.get("missing"))
        if extra is not None:
            out.append(extra)
        if cohort is not None and len(whole) == 1 and not _own_limit_caps(line):
            held = _cohort_limit_remedy(ctx, flavor, resource, line.get("missing"))
            out += [held] if held is not None else _lending_limit_remedies(ctx, flavor, resource, line.get("missing"))
    return out


def _cohort_limit_remedy(ctx: Context, flavor: str, resource: str, missing_text: Any) -> dict[str, Any] | None:
    """A parent Cohort's borrowingLimit stops the subtree from borrowing quota unused above it (the verdict names
    it): raised by what is missing, the subtree may borrow that much more; an estimate, the usage changes."""
    missing = _dec(missing_text)
    tree = quota.cohort_tree(ctx.state, ctx.cq_name or "", flavor, resource) if missing is not None else None
    node = tree.limit_holding_back() if tree is not None and len(tree.path) > 2 else None
    if missing is None or tree is None or node is None or node is tree.path[0] or node.kind != "Cohort" or \
            node.quota.borrowing_limit is None:
        return None
    return _limit_remedy(ctx, node, flavor, resource, node.quota.borrowing_limit + missing,
                         f" Quota is unused above Cohort {node.name}; its borrowingLimit keeps ClusterQueue "
                         f"{ctx.cq_name} from borrowing it.")


def _lending_limit_remedies(ctx: Context, flavor: str, resource: str, missing_text: Any) -> list[dict[str, Any]]:
    """Another node of the cohort tree keeps idle quota for itself (lendingLimit): the raise that lends the
    shortfall now (`quota.withheld_by_lending_limits`); an estimate, the cohort's usage changes."""
    missing = _dec(missing_text)
    if missing is None or not ctx.cq_name:
        return []
    out = []
    for w in quota.withheld_by_lending_limits(ctx.state, ctx.cq_name, flavor, resource, missing):
        owner = ctx.state.cluster_queues.get(w.name) if w.kind == "ClusterQueue" else ctx.state.cohorts.get(w.name)
        found = _quota_paths(owner).get((flavor, resource)) if owner is not None else None
        if w.enough is None or found is None:
            continue
        now_text, enough = quota.exact(resource, w.limit), quota.exact(resource, w.enough)
        out.append({"actionBy": ActionBy.CLUSTER_ADMIN.value, "kind": w.kind, "name": w.name,
                    "field": f"{found}.lendingLimit", "now": now_text, "enough": enough, "exact": False,
                    "message": f"Raise lendingLimit of {resource} in flavor {flavor} of {w.kind} {w.name} from "
                               f"{now_text} to {enough}: it keeps {quota.exact(resource, w.idle)} {resource} idle, and "
                               f"ClusterQueue {ctx.cq_name} may then borrow the {quota.exact(resource, missing)} "
                               "missing (an estimate: what the cohort uses may change it; the lendingLimit "
                               f"reserves that quota for {w.name}'s own Workloads)."})
    return out


def _own_limit_caps(line: Mapping[str, Any]) -> bool:
    """The queue's own borrowingLimit keeps it below its usage plus the request: Kueue's `available` is at most
    nominal + borrowingLimit - usage (resource_node.go), whatever the cohort frees."""
    limit, nominal, requested = _dec(line.get("borrowingLimit")), _dec(line.get("nominal")), _dec(line.get("requested"))
    if limit is None or nominal is None or requested is None:
        return False
    return (_dec(line.get("used")) or Decimal(0)) + requested > nominal + limit


def _within_queue_remedy(ctx: Context, flavor: str, resource: str, line: Mapping[str, Any]) -> dict[str, Any] | None:
    """withinClusterQueue Never while its own lower-priority Workloads hold what would let it in: allowing Kueue to
    preempt them ends the wait (`flavors.lower_priority_room`); an estimate, Kueue picks the victims."""
    policy = s(m(spec(ctx.cq or {}).get("preemption")).get("withinClusterQueue")) or "Never"
    victims = lower_priority_room(ctx, resource, flavor, line) if policy == "Never" else []
    if not victims:
        return None
    names = ", ".join(f"{h.key[0]}/{h.key[1]} (priority {h.priority})" for h in victims[:2])
    more = f" and {len(victims) - 2} more" if len(victims) > 2 else ""
    return {"actionBy": ActionBy.CLUSTER_ADMIN.value, "kind": "ClusterQueue", "name": ctx.cq_name,
            "field": "spec.preemption.withinClusterQueue", "now": "Never", "enough": "LowerPriority", "exact": False,
            "message": f"Set preemption.withinClusterQueue of ClusterQueue {ctx.cq_name} to LowerPriority: Kueue may "
                       f"then preempt {names}{more}, below this Workload's priority {ctx.priority}, to make room for "
                       f"it in flavor {flavor}; the preempted Workloads stop and requeue. The policy holds for every "
                       "Workload of the queue (an estimate: Kueue picks the fewest that make room)."}


def _reclaim_remedy(ctx: Context, flavor: str, resource: str, missing_text: Any) -> dict[str, Any] | None:
    """The queue's own unused nominal quota is borrowed by others and Kueue never reclaims it (Never): letting
    it reclaim frees what they hold of it (its own nominal quota: its borrowingLimit never caps that); offered
    only when that covers the shortfall (else it would still borrow after, where reclaiming alone does not let it
    in), and never exact: their priorities decide."""
    lent = quota.lent_quota(ctx.state, ctx.cq_name or "", flavor, resource) if ctx.cohort else None
    missing = _dec(missing_text)
    if lent is None or lent.reclaim != "Never" or missing is None or lent.amount < missing:
        return None  # taken back, less than what is missing: it would still borrow, where reclaim alone does not help
    amount = quota.exact(resource, lent.amount)
    return {"actionBy": ActionBy.CLUSTER_ADMIN.value, "kind": "ClusterQueue", "name": ctx.cq_name,
            "field": "spec.preemption.reclaimWithinCohort", "now": "Never", "enough": "Any", "exact": False,
            "message": f"{amount} {resource} of its nominal quota in flavor {flavor} is borrowed by "
                       f"{', '.join(cq for cq, _ in lent.borrowers[:3])}; with reclaimWithinCohort Any (or "
                       "LowerPriority, for their lower-priority Workloads) Kueue preempts them to take it back"
                       f", which covers the {missing_text} {resource} missing (an estimate: their priorities and the "
                       "cohort's other usage decide)."}


_FREED_EXACT, _FREED_ESTIMATE = ".", " (an estimate: the cohort's lending and reclaim may change it)."
_FREED_PARTIAL = " (at most: it allows partial admission, so fewer Pods may start with less)."
_FREED_OURS = " (an estimate: from the Workload's requests, not a shortfall Kueue stated)."


def _freed_texts(resource: str, missing_text: Any, nominal_text: Any, over: Decimal = Decimal(0)
                 ) -> tuple[str, ...]:
    """(nominal now, enough: exact, for the fields; the sentence, its amounts as an SRE reads them, the exact enough
    given too when it reads otherwise) as the remedy writes them, `over` (`quota.overdrawn`) added to Kueue's
    shortfall; () when the line is no shortfall."""
    missing, nominal = _dec(missing_text), _dec(nominal_text)
    if missing is None or missing <= 0 or nominal is None:
        return ()
    missing += over
    now_text = quota.exact(resource, nominal) or str(nominal)
    enough = quota.exact(resource, nominal + missing) or str(nominal + missing)
    said = quota.fmt(resource, nominal + missing) or enough
    return (now_text, enough, f"{quota.fmt(resource, missing) or missing} {resource}",
            quota.fmt(resource, nominal) or now_text, said if said == enough else f"{said} ({enough} exactly)")


# per pass: (resource, missing, nominal, overdrawn) texts -> `_freed_texts`
FREED_TEXTS: Derived[dict[tuple[str, str, str, Decimal], tuple[str, ...]]] = Derived(
    "freed-quota remedy texts", lambda _: {})


def _whole_shortfalls(lines: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One line per flavor and resource, the largest "more needed": Kueue counts the earlier pod sets in a later
    one's figure (`flavors.cumulative`), so the per-pod-set figures must not be added up."""
    best: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    for line in lines:
        key = (line.get("flavor"), line.get("resource"))
        kept = best.get(key)
        if kept is None or (_dec(line.get("missing")) or 0) > (_dec(kept.get("missing")) or 0):
            best[key] = line
    return list(best.values())


def _quota_path(ctx: Context, flavor: str, resource: str, field_name: str) -> str | None:
    found = _paths_of(ctx).get((flavor, resource))
    return f"{found}.{field_name}" if found is not None else None


def _paths_of(ctx: Context) -> dict[tuple[str, str], str]:
    """`_quota_paths` of the Workload's ClusterQueue, made once per pass."""
    per_queue = ctx.state.derived(QUOTA_PATHS)
    at = per_queue.get(ctx.cq_name or "")
    if at is None:
        at = per_queue[ctx.cq_name or ""] = _quota_paths(ctx.cq or {})
    return at


def _quota_paths(cq: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """Where each (flavor, resource) quota sits in a ClusterQueue's spec: the first entry, as Kueue reads it."""
    out: dict[tuple[str, str], str] = {}
    for g, group in enumerate(lst(spec(cq).get("resourceGroups"))):
        for fl, fq in enumerate(lst(m(group).get("flavors"))):
            for r, res in enumerate(lst(m(fq).get("resources"))):
                key = (s(m(fq).get("name")) or "", s(m(res).get("name")) or "")
                out.setdefault(key, f"spec.resourceGroups[{g}].flavors[{fl}].resources[{r}]")
    return out


# per ClusterQueue, kept per index: every waiting Workload of a queue asks for the same few paths
QUOTA_PATHS: Derived[dict[str, dict[tuple[str, str], str]]] = Derived("quota field paths per ClusterQueue",
                                                                      lambda _: {})


def _parallelism_remedy(ctx: Context, short: Sequence[Mapping[str, Any]], exact: bool) -> dict[str, Any] | None:
    """A batch Job with one pod set: the largest parallelism whose requests fit every maximum."""
    owner = ctx.owner
    if owner is None or s(owner.get("kind")) != "Job" or len(ctx.requests) != 1:
        return None
    parallelism = m(owner.get("spec")).get("parallelism")
    count = next(iter(_counts(ctx).values()), None)
    if not isinstance(parallelism, int) or not count or parallelism != count:
        return None
    fits = parallelism
    try:
        for line in short:
            requested, maximum = _dec(line.get("requested")), _dec(line.get("maximum"))
            if requested is None or maximum is None or requested <= 0:
                return None
            fits = min(fits, int(maximum // (requested / count)))
    except (InvalidOperation, TypeError, ZeroDivisionError):
        return None
    if fits < 1:
        return None
    return {"actionBy": ActionBy.WORKLOAD_OWNER.value, "kind": "Job", "name": name(owner) or "",
            "namespace": ctx.ns, "field": "spec.parallelism", "now": str(parallelism), "enough": str(fits),
            "exact": exact,
            "message": f"Lower spec.parallelism of Job {ctx.ns}/{name(owner)} from {parallelism} to {fits} (the Job "
                       "then runs fewer Pods at a time)" + ("." if exact else " (an estimate).")}


def _counts(ctx: Context) -> dict[str, int]:
    out = {}
    for ps in lst(ctx.spec.get("podSets")):
        count = m(ps).get("count")
        out[s(m(ps).get("name")) or "main"] = count if isinstance(count, int) else 1
    return out


# ---- PodsUnschedulable: the node funnel, and what would let more nodes through ------------------------------


# A TrainJob has no Pod template of its own: its runtime's (spec.runtimeRef), patched by spec.runtimePatches
_TRAINJOB_POD_PATCH = ("spec.runtimePatches[*].trainingRuntimeSpec.template.spec.replicatedJobs[*].template.spec"
                       ".template.spec")


def _appwrapper_pod_spec(owner: Mapping[str, Any], podset: str | None) -> str:
    """spec.components[c].<path>.spec of an AppWrapper's pod set: Kueue names them <name>-<i>, counting the pod sets
    of its components in order, as its controller caches them in status.componentStatus (paths start at the
    component's `template`)."""
    want = (podset or "").rpartition("-")[2] or "0"
    i = 0
    for c, comp in enumerate(lst(m(owner.get("status")).get("componentStatus"))):
        for ps in lst(m(comp).get("podSets")):
            if str(i) == want and s(m(ps).get("path")):
                return f"spec.components[{c}].{s(m(ps).get('path'))}.spec"
            i += 1
    return "spec.components[*].template's Pod template spec"


def _template(ctx: Context, podset: str | None = None) -> tuple[str, str, str, str | None]:
    """(kind, name, path of the Pod spec, namespace) of the object whose Pod template the owner changes."""
    owner = ctx.owner
    if owner is not None and s(owner.get("kind")) == "Job":
        return "Job", name(owner) or "", "spec.template.spec", ctx.ns
    if owner is not None and s(owner.get("kind")) == "TrainJob":
        return "TrainJob", name(owner) or "", _TRAINJOB_POD_PATCH, ctx.ns
    if owner is not None and s(owner.get("kind")) == "AppWrapper":
        return "AppWrapper", name(owner) or "", _appwrapper_pod_spec(owner, podset), ctx.ns
    ref = ctx.owner_ref
    kind = s(ref.get("kind")) if ref else None
    path = "spec.template.spec" if kind == "Job" else "the Pod template's spec"
    return kind or "Workload", (s(ref.get("name")) if ref else None) or ctx.name, path, ctx.ns


def _template_origin(ctx: Context) -> str:
    """Where the owner's Pod template really comes from, when that is not the owner itself (a TrainJob's runtime),
    or how it changes, when not in place (an AppWrapper's components)."""
    owner = ctx.owner
    if owner is not None and s(owner.get("kind")) == "AppWrapper":  # its webhook's validateAppWrapperUpdate
        return (" An AppWrapper's components are immutable (its webhook refuses any change to them): delete it and "
                "create it again with the change.")
    if owner is None or s(owner.get("kind")) != "TrainJob":
        return ""
    ref = m(spec(owner).get("runtimeRef"))
    runtime = f"{s(ref.get('kind')) or 'ClusterTrainingRuntime'} {s(ref.get('name')) or '?'}"
    return (f" A TrainJob's Pods come from its runtime, {runtime} (spec.runtimeRef), patched by its "
            "spec.runtimePatches: change it where it is set, or pick another runtime.")


def _remedy(who: ActionBy, kind: str, obj: str, ns: str | None, path: str, now: str, enough: str, message: str,
            exact: bool = False) -> dict[str, Any]:
    out = {"actionBy": who.value, "kind": kind, "name": obj, "field": path, "now": now, "enough": enough,
           "exact": exact, "message": message}
    if ns:
        out["namespace"] = ns
    return out


def placement_remedies(ctx: Context, p: Placement) -> list[dict[str, Any]]:
    """The changes that let more nodes pass, each with the node counts behind it. Never exact: kube-scheduler's
    own numbers stop at the first constraint a node fails, so nothing says the next ones pass."""
    pod_set = s(m(m(p.pod.get("metadata")).get("labels")).get("kueue.x-k8s.io/podset")) if p.pod else None
    kind, obj, pod_path, ns = _template(ctx, pod_set)
    funnel = f" Nodes now: {p.funnel.line()}." if p.funnel is not None else ""
    not_sure = " Not a promise that the Pods then fit: the later constraints are checked only then."
    out: list[dict[str, Any]] = []
    if p.cause == Cause.UNTOLERATED_TAINT and p.short:
        out.extend(_late_taint_remedies(ctx, p))
        for taint in [t for t in p.short if t not in p.late][:2]:  # a taint put on nodes in use: not to tolerate
            tol = _toleration(taint)
            passing = _nodes_tolerating(p, taint)
            then = f" then {passing} node(s) pass the taints" if passing is not None else ""
            if p.flavor and p.flavor_steers and not taint.startswith("node.kubernetes.io/") \
                    and not _topology_flavor(ctx, p.flavor):
                out.append(_remedy(ActionBy.CLUSTER_ADMIN, "ResourceFlavor", p.flavor, None, "spec.tolerations",
                                   _tolerations_now(ctx.state.flavors.get(p.flavor)), f"+ {tol}",
                                   f"Add the toleration {tol} to ResourceFlavor {p.flavor} (Kueue adds it to the "
                                   f"Pods it admits in that flavor):{then}.{funnel}{not_sure}"))
            if p.lost:  # the owner's template already tolerates it: adding it there changes nothing
                continue
            out.append(_remedy(ActionBy.WORKLOAD_OWNER, kind, obj, ns, f"{pod_path}.tolerations",
                               _tolerations_now(p.pod), f"+ {tol}",
                               f"Add the toleration {tol} to the Pods of {kind} {ns}/{obj}:{then}."
                               f"{_template_origin(ctx)}{funnel}{not_sure}"))
    elif p.cause == Cause.VOLUME_NODE_CONFLICT and p.pinned:
        out.extend(_tas_volume_remedies(ctx, p, kind, obj, pod_path, ns))
    elif p.cause == Cause.NODE_SELECTOR_MISMATCH and p.pinned:
        out.append(_gone_node_remedy(ctx, p))
    elif p.cause == Cause.NODE_SELECTOR_MISMATCH and p.conflict is not None:
        out.append(_conflict_remedy(ctx, p.conflict, funnel))
    elif p.cause == Cause.NODE_SELECTOR_MISMATCH and p.constraints is not None:
        out.extend(_selector_remedies(ctx, p, kind, obj, pod_path, ns, funnel, not_sure))
    elif p.cause in (Cause.POD_TOO_LARGE, Cause.INSUFFICIENT_RESOURCES) and p.resource and p.constraints is not None:
        r = p.resource
        need = p.constraints.requests.get(r)
        most = (p.funnel.largest if p.cause == Cause.POD_TOO_LARGE else p.funnel.most_free).get(r) \
            if p.funnel is not None else None
        if need is not None and most is not None and most[0] > 0 and r != "pods" and not topology_assigned(ctx):
            cap, node = most
            what = "allocatable" if p.cause == Cause.POD_TOO_LARGE else "free now (an estimate)"
            requests = ("spec.trainer.resourcesPerNode.requests" if pod_path == _TRAINJOB_POD_PATCH
                        else f"{pod_path}.containers[*].resources.requests")  # a runtime patch has no resources
            out.append(_remedy(ActionBy.WORKLOAD_OWNER, kind, obj, ns, f"{requests}[{r}]",
                               quota.exact(r, need) or str(need), f"<= {quota.exact(r, cap) or cap}",
                               f"Lower the per-Pod request of {r} from {quota.exact(r, need)} to at most "
                               f"{quota.exact(r, cap)}, the most any usable node has {what} ({node}).{funnel}"
                               + (" The node must also have it free when the Pod is scheduled." if
                                  p.cause == Cause.POD_TOO_LARGE else not_sure)))
        if need is not None:
            where = f"nodes selected by {p.constraints.selector_text()}" if p.constraints.selector_text() else "nodes"
            out.append(_remedy(ActionBy.CLUSTER_ADMIN, "Node", p.constraints.selector_text() or "*", None,
                               f"status.allocatable[{r}]",
                               (quota.exact(r, most[0]) or "?") if most is not None else "?",
                               f">= {quota.exact(r, need)} free on one node",
                               f"Add or free {where} with at least {quota.exact(r, need)} {r} for one Pod"
                               + (" (larger nodes: no node today is big enough)" if p.cause == Cause.POD_TOO_LARGE
                                  else "") + f".{funnel}{not_sure}"))
    order = {ActionBy.CLUSTER_ADMIN.value: 1, ActionBy.QUEUE_ADMIN.value: 1, ActionBy.WORKLOAD_OWNER.value: 0}
    if p.flavor_steers:
        order[ActionBy.CLUSTER_ADMIN.value] = -1
    return sorted(out, key=lambda r: order.get(r["actionBy"], 2))


def _topology_flavor(ctx: Context, flavor: str) -> bool:
    """A topology-aware ResourceFlavor (topologyName set): Kueue v0.19's CRD keeps its tolerations (and nodeLabels)
    immutable ("tolerations are immutable when topologyName is set"), so no remedy can change them."""
    return bool(s(spec(ctx.state.flavors.get(flavor) or {}).get("topologyName")))


def _late_taint_remedies(ctx: Context, p: Placement) -> list[dict[str, Any]]:
    """Taints put on nodes the Pods were already placed on (a maintenance, a drain): the way out is the taint's end,
    not a toleration; and for Pods Kueue's topology-aware scheduling pinned to such a node, an eviction that gives
    the Workload a fresh topology assignment."""
    if not p.late:
        return []
    where = p.tainted[0] if len(p.tainted) == 1 else (p.constraints.selector_text() if p.constraints else "") or "*"
    nodes = f"node {where}" if len(p.tainted) == 1 else f"the {len(p.tainted)} nodes selected by {where}"
    taints = ", ".join(p.late[:3])
    out = [_remedy(ActionBy.CLUSTER_ADMIN, "Node", where, None, "spec.taints", taints, f"- {taints}",
                   f"Remove {taints} from {nodes}, putting the maintenance off until the Workload is done: it came "
                   "after the Pods were placed, and tolerating it would defeat it."
                   + (" The pinned Pods then schedule there." if p.pinned else " Or add nodes the Pods can use."))]
    if p.pinned:
        out.append(_remedy(ActionBy.CLUSTER_ADMIN, "Workload", ctx.name, ctx.ns, "spec.active", "true",
                           "false, then true",
                           f"Or evict Workload {ctx.ns}/{ctx.name}: set spec.active to false, and back to true once "
                           "its Pods are gone. Kueue requeues it and its topology-aware scheduling assigns nodes "
                           f"afresh, leaving out {p.pinned} while the taint stays; its running Pods restart. The "
                           "waitForPodsReady timeout, if enabled, evicts it the same way."))
    return out


def _gone_node_remedy(ctx: Context, p: Placement) -> dict[str, Any]:
    """A Pod Kueue's TAS pinned to a node that is gone: its nodeSelector is immutable once ungated, so the Pod goes;
    its owner makes a new one, gated, which Kueue places in the current topologyAssignment."""
    pod = name(p.pod or {}) or "?"
    return _remedy(ActionBy.CLUSTER_ADMIN, "Pod", pod, ctx.ns, f"spec.nodeSelector[{HOSTNAME}]",
                   f"{HOSTNAME}={p.pinned}", "the Pod deleted",
                   f"Delete Pod {ctx.ns}/{pod} (kubectl -n {ctx.ns} delete pod {pod}): Kueue's TAS pinned it to node "
                   f"{p.pinned}, which is gone, and its nodeSelector cannot change; its owner recreates it with "
                   "Kueue's topology gate and Kueue places it in the Workload's current topologyAssignment.")


def _tas_volume_remedies(ctx: Context, p: Placement, kind: str, obj: str, pod_path: str, ns: str | None
                         ) -> list[dict[str, Any]]:
    """Pods Kueue's topology-aware scheduling pinned to a node their bound volume cannot be used on (kueue#14708):
    the data stays where it is; TAS must be told the volume's node (it honours a pod set's node selector and required
    node affinity), and the Workload re-placed. An eviction alone lets TAS choose blind again."""
    claim = ", ".join(p.short) or "?"
    podset = str(p.blocker.get("podSet") or "")
    template = _podset_selector(ctx, podset) if podset else {}
    now = f"{HOSTNAME}={template[HOSTNAME]}" if HOSTNAME in template else "none"
    find = (f"`kubectl get pv $(kubectl get pvc {p.short[0]} -n {ns} -o jsonpath='{{.spec.volumeName}}') -o "
            "jsonpath='{.spec.nodeAffinity}'`" if p.short and ns else "the PersistentVolume's spec.nodeAffinity")
    return [
        _remedy(ActionBy.WORKLOAD_OWNER, kind, obj, ns, f"{pod_path}.nodeSelector[{HOSTNAME}]", now,
                f"{HOSTNAME}=<the volume's node>",
                f"Pin the Pods of {kind} {ns}/{obj} to the node the volume of claim {claim} is on ({find}): Kueue's "
                "topology-aware scheduling honours the pod set's node selector and required node affinity, so its "
                f"next assignment lands there instead of {p.pinned} (the workaround for kueue#14708). Pods whose "
                "volumes are on different nodes: a required node affinity on those nodes narrows TAS's choice but "
                f"does not match each Pod to its own volume.{_template_origin(ctx)}"),
        _remedy(ActionBy.CLUSTER_ADMIN, "Workload", ctx.name, ctx.ns, "spec.active", "true", "false, then true",
                f"Evict Workload {ctx.ns}/{ctx.name} for a new assignment: set spec.active to false, and back to true "
                "once its Pods are gone. Kueue requeues it and its TAS assigns nodes afresh, still blind to the "
                f"volume (kueue#14708): it may choose {p.pinned} again unless the Pods are first pinned to the "
                "volume's node (the owner's remedy). The waitForPodsReady timeout, if enabled, evicts it the same "
                "way."),
    ]


def _toleration(taint: str) -> str:
    key_value, _, effect = taint.rpartition(":") if ":" in taint else (taint, "", "")
    return f"{key_value}:{effect}" if effect else key_value


def _tolerations_now(obj: Mapping[str, Any] | None) -> str:
    tols = [m(t) for t in lst(spec(obj or {}).get("tolerations"))]
    if not tols:
        return "none"
    return ", ".join(taint_text({"key": t.get("key") or "*", "value": t.get("value"), "effect": t.get("effect") or "*"})
                     for t in tols[:4])


def _nodes_tolerating(p: Placement, taint: str) -> int | None:
    if p.funnel is None or p.constraints is None:
        return None
    key_value, _, effect = taint.rpartition(":")
    key, _, value = key_value.partition("=")
    extra = {"key": key, "operator": "Equal" if value else "Exists", "value": value or None, "effect": effect}
    tolerations = (*p.constraints.tolerations, extra)
    from .scheduling.placement import PodConstraints
    more = PodConstraints(p.constraints.node_selector, p.constraints.terms, tolerations, p.constraints.requests)
    return sum(1 for n in p.funnel.selected if not more.untolerated(n))


def _conflict_remedy(ctx: Context, c: LabelConflict, funnel: str) -> dict[str, Any]:
    """Two flavors of one pod set disagree on a node label (kueue#14409): one flavor's label is to change; the
    Pods' selector is Kueue's, not the owner's."""
    other = next((f for f in c.values if f != c.winner), next(iter(c.values)))
    return _remedy(ActionBy.CLUSTER_ADMIN, "ResourceFlavor", other, None, f"spec.nodeLabels[{c.key}]",
                   f"{c.key}={c.values[other]}", f"a key of its own, or {c.key} equal in every flavor of pod set "
                   f"{c.pod_set}",
                   f"{c.text()}. {c.fix()}.{funnel}")


def _selector_remedies(ctx: Context, p: Placement, kind: str, obj: str, pod_path: str, ns: str | None,
                       funnel: str, not_sure: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    flavor_labels = dict(m(spec(ctx.state.flavors.get(p.flavor or "") or {}).get("nodeLabels")))
    nodes = list(ctx.state.nodes.values()) if ctx.state.knows("Node") else []
    origin = _template_origin(ctx)
    counted: list[tuple[str, str, dict[str, int]]] = []
    for key, want in (p.constraints.node_selector if p.constraints else {}).items():
        seen: dict[str, int] = {}
        for n in nodes:
            value = m(m(n.get("metadata")).get("labels")).get(key)
            if value is not None:
                seen[str(value)] = seen.get(str(value), 0) + 1
        counted.append((key, want, seen))
    if nodes and any(not seen.get(want) for _key, want, seen in counted):
        # the keys no node carries with that value are the blockers; one that nodes do carry is not to change
        counted = [(key, want, seen) for key, want, seen in counted if not seen.get(want)]
    for key, want, seen in counted[:3]:
        if nodes:
            offered = ", ".join(f"{key}={v} on {c}" for v, c in sorted(seen.items(), key=lambda x: -x[1])[:3])
            have = f" Nodes carry {offered}." if offered else f" No node carries the label {key} at all."
        else:
            have = ""
        if key in p.checks:  # a check's podSetUpdates: Kueue writes it back at every start, the owner cannot drop it
            check = p.checks[key]
            controller = s(spec(ctx.state.admission_checks.get(check) or {}).get("controllerName"))
            out.append(_remedy(ActionBy.CLUSTER_ADMIN, "AdmissionCheck", check, None,
                               f"podSetUpdates.nodeSelector[{key}]", f"{key}={want}",
                               f"a value nodes carry, or label nodes {key}={want}",
                               f"AdmissionCheck {check}" + (f" (controller {controller})" if controller else "")
                               + f" sends the Pods to {key}={want} (the Workload's status.admissionChecks"
                               f"[].podSetUpdates): label the nodes it granted {key}={want}, or fix the controller and "
                               "evict the Workload (spec.active false, then true): the eviction resets the check to "
                               f"Pending and it runs anew.{have}{funnel}{not_sure}"))
        elif key in flavor_labels and p.flavor:
            path = "spec.nodeLabels"
            out.append(_remedy(ActionBy.CLUSTER_ADMIN, "ResourceFlavor", p.flavor, None, f"{path}[{key}]",
                               f"{key}={want}", f"a value nodes carry, or label nodes {key}={want}",
                               f"ResourceFlavor {p.flavor} sends the Pods to {key}={want}: label the nodes meant for "
                               f"it, or fix the flavor's nodeLabels.{have}{funnel}{not_sure}"))
        else:
            out.append(_remedy(ActionBy.WORKLOAD_OWNER, kind, obj, ns, f"{pod_path}.nodeSelector[{key}]",
                               f"{key}={want}", "a value nodes carry",
                               f"The Pods of {kind} {ns}/{obj} select {key}={want}: fix or drop it.{origin}{have}"
                               f"{funnel}{not_sure}"))
    return out


# ---- NoMatchingFlavor: the toleration or selector that would let a flavor match -------------------------------


def flavor_match_remedies(ctx: Context, f: Finding) -> list[dict[str, Any]]:
    """From Kueue's per-flavor reasons: the toleration a flavor's nodeTaints need, or the selector values a
    flavor's nodeLabels offer. Exact only about that check: Kueue then still checks quota."""
    parsed = ctx.qr_parsed
    kind, obj, kind_path, ns = _template(ctx)
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for failure in parsed.failures:
        flavor = failure.flavor or ""
        if failure.taint and (flavor, failure.taint) not in seen:
            seen.add((flavor, failure.taint))
            tol = failure.taint
            out.append(_remedy(ActionBy.WORKLOAD_OWNER, kind, obj, ns, f"{kind_path}.tolerations", "none", f"+ {tol}",
                               f"Add the toleration {tol} to the Pods of {kind} {ns}/{obj} so that flavor {flavor} "
                               "can be used (Kueue then checks its node labels and quota)."))
            rf = ctx.state.flavors.get(flavor)
            if _topology_flavor(ctx, flavor):  # its tolerations cannot be changed
                continue
            out.append(_remedy(ActionBy.CLUSTER_ADMIN, "ResourceFlavor", flavor, None, "spec.tolerations",
                               _tolerations_now(rf), f"+ {tol}",
                               f"Or add the toleration {tol} to ResourceFlavor {flavor} (every Workload using it "
                               "then tolerates the taint)."))
        elif failure.kind == FailureKind.NODE_AFFINITY_MISMATCH and ("affinity", flavor) not in seen:
            seen.add(("affinity", flavor))
            labels = dict(m(spec(ctx.state.flavors.get(flavor) or {}).get("nodeLabels")))
            wanted = _podset_selector(ctx, failure.podset)
            clash = {k: v for k, v in wanted.items() if k in labels and str(labels[k]) != str(v)}
            if not clash:
                continue
            now = ",".join(f"{k}={v}" for k, v in clash.items())
            enough = ",".join(f"{k}={labels[k]}" for k in clash)
            out.append(_remedy(ActionBy.WORKLOAD_OWNER, kind, obj, ns, f"{kind_path}.nodeSelector", now, enough,
                               f"The Pods select {now} but flavor {flavor} offers {enough}: select {enough} (or drop "
                               "the selector) to use that flavor; Kueue then checks its taints and quota."))
    return out


def _podset_selector(ctx: Context, podset: str) -> dict[str, Any]:
    for ps in lst(ctx.spec.get("podSets")):
        if (s(m(ps).get("name")) or "main") == podset:
            return dict(m(m(m(m(ps).get("template")).get("spec")).get("nodeSelector")))
    return {}
