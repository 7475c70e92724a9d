"""The way out: the smallest changes that would let a Workload in, each with who can make it.

For ExceedsMaxQuota, from the finding's quota lines (Kueue's own numbers when its message gave them):
the ClusterQueue's quota that would be enough for each short resource, and the parallelism that would fit
the maximum. For WaitingForQuota, Kueue's "N more needed": what must be freed, or added. A remedy is
`exact` only when Kueue's numbers say the change is enough on its own (no cohort involved, one pod set);
otherwise it is an estimate and says so.
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
from .context import Context
from .messages import FailureKind
from .rules import Finding
from .scheduling.placement import HOSTNAME, Placement, taint_text, topology_assigned
from .scheduling.workload_pods import unschedulable_placement

_QUOTA_FIELD = {Cause.BORROWING_LIMIT_REACHED: "borrowingLimit"}


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
    # several resources or flavors short: each raise is needed and says so (`exact` is about its own number;
    # the parallelism one is enough alone)
    others = len({(q.get("flavor"), q.get("resource")) for q in short}) - 1
    out = [r for q in short if (r := _quota_remedy(ctx, f, q, exact, others)) is not None]
    parallel = _parallelism_remedy(ctx, short, exact)
    if parallel is not None:
        out.append(parallel)
    return out


def _dec(value: Any) -> Decimal | None:
    return parse(value) if isinstance(value, str) else None


def _over(requested: Decimal | None, maximum: Decimal | None) -> bool:
    return requested is not None and maximum is not None and requested > maximum


def _quota_remedy(ctx: Context, f: Finding, line: Mapping[str, Any], exact: bool, others: int = 0
                  ) -> dict[str, Any] | None:
    flavor, resource = s(line.get("flavor")) or "", s(line.get("resource")) or ""
    requested, maximum = _dec(line.get("requested")), _dec(line.get("maximum"))
    field_name = _QUOTA_FIELD.get(f.cause, "nominalQuota") if f.cause is not None else "nominalQuota"
    current = _dec(line.get("borrowingLimit" if field_name == "borrowingLimit" else "nominal"))
    path = _quota_path(ctx, flavor, resource, field_name)
    if requested is None or maximum is None or not ctx.cq_name:
        return None
    if field_name == "borrowingLimit" and ctx.cohort:
        binding = _binding_cohort(ctx, flavor, resource)
        if binding is not None:  # a parent Cohort's borrowingLimit caps it: raising the queue's changes nothing
            return _cohort_limit_remedy(ctx, binding, flavor, resource, requested - maximum, others)
    if current is None or path is None:
        return None
    enough = current + (requested - maximum)
    now_text, enough_text = quota.fmt(resource, current) or str(current), quota.fmt(resource, enough) or str(enough)
    who = ActionBy.QUEUE_ADMIN if field_name == "nominalQuota" and ctx.cohort is None else ActionBy.CLUSTER_ADMIN
    return {"actionBy": who.value, "kind": "ClusterQueue", "name": ctx.cq_name, "field": path, "now": now_text,
            "enough": enough_text, "exact": exact,
            "message": (f"Raise {field_name} of {resource} in flavor {flavor} of ClusterQueue {ctx.cq_name} from "
                        f"{now_text} to {enough_text}" + ("." if exact else _caveat(ctx)) + _together(others))}


def _together(others: int) -> str:
    return (f" Needed together with the other {others} quota change(s) listed: none is enough alone." if others
            else "")


def _caveat(ctx: Context) -> str:
    """Why a quota remedy is an estimate, the first reason that applies."""
    if ctx.cohort is not None:
        return " (an estimate: the cohort's lending may change it)."
    if len(ctx.requests) > 1:
        return " (an estimate: Kueue places pod sets one after another, so their sum may need more)."
    return " (an estimate: from the Workload's requests, not a maximum Kueue stated)."


def _binding_cohort(ctx: Context, flavor: str, resource: str) -> quota.TreeNode | None:
    """The Cohort whose borrowingLimit caps the ClusterQueue's maximum in a cohort tree, if it is a Cohort."""
    tree = quota.cohort_tree(ctx.state, ctx.cq_name or "", flavor, resource)
    if tree is None or len(tree.path) <= 2:
        return None
    binding = tree.binding_limit()
    return binding if binding is not None and binding is not tree.path[0] and binding.kind == "Cohort" else None


def _cohort_limit_remedy(ctx: Context, node: quota.TreeNode, flavor: str, resource: str,
                         short: Decimal, others: int = 0) -> dict[str, Any] | None:
    cohort = ctx.state.cohorts.get(node.name)
    found = _quota_paths(cohort).get((flavor, resource)) if cohort is not None else None
    current = node.quota.borrowing_limit
    if found is None or current is None:
        return None
    now_text = quota.fmt(resource, current) or str(current)
    enough_text = quota.fmt(resource, current + short) or str(current + short)
    return {"actionBy": ActionBy.CLUSTER_ADMIN.value, "kind": "Cohort", "name": node.name,
            "field": f"{found}.borrowingLimit", "now": now_text, "enough": enough_text, "exact": False,
            "message": f"Raise borrowingLimit of {resource} in flavor {flavor} of Cohort {node.name} from {now_text} "
                       f"to {enough_text} (an estimate: what the rest of the tree can lend may change it)."
                       + _together(others)}


def _freed_remedies(ctx: Context, lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """WaitingForQuota with Kueue's "N more needed", per whole shortfall: N must be freed by running Workloads,
    or added to the nominal quota (exact only without a cohort, where nothing else can lend or reclaim). The
    queue's facts are read once per Workload and the amounts' texts made once per pass (FREED_TEXTS): the
    Workloads waiting in a queue repeat a few of them."""
    cq_name, cohort = ctx.cq_name, ctx.cohort
    paths = _paths_of(ctx)
    memo = ctx.state.derived(FREED_TEXTS)
    who = ActionBy.QUEUE_ADMIN.value if cohort is None else ActionBy.CLUSTER_ADMIN.value
    # in a cohort, other queues may be borrowing this queue's unused nominal quota: theirs frees it too
    freed_too = f" or of cohort {cohort}" if cohort is not None else ""
    out: list[dict[str, Any]] = []
    for line in _whole_shortfalls(lines):
        flavor, resource = s(line.get("flavor")) or "", s(line.get("resource")) or ""
        found = paths.get((flavor, resource))
        if found is None or not cq_name:  # no field to name: no remedy
            continue
        missing, nominal = line.get("missing"), line.get("nominal")
        if type(missing) is str and type(nominal) is str:
            key = (resource, missing, nominal)
            texts = memo.get(key)
            if texts is None:
                texts = memo[key] = _freed_texts(resource, missing, nominal)
        else:
            texts = _freed_texts(resource, missing, nominal)
        if not texts:
            continue
        need, now_text, enough = texts
        # partial admission (minCount): fewer Pods may start with less freed, so the figures are an upper bound
        partial = quota.partial_floor(ctx.wl, ctx.requests, resource) is not None
        exact = cohort is None and line.get("source") == "Kueue" and not partial
        why = _FREED_EXACT if exact else _FREED_ESTIMATE if cohort is not None else _FREED_PARTIAL if partial \
            else _FREED_OURS
        out.append({"actionBy": who, "kind": "ClusterQueue", "name": cq_name, "field": f"{found}.nominalQuota",
                    "now": now_text, "enough": enough, "exact": exact,
                    "message": f"{need} {resource} in flavor {flavor} must be freed by Workloads of ClusterQueue "
                               f"{cq_name}{freed_too} finishing, or nominalQuota raised from {now_text} to {enough}"
                               f"{why}"})
        reclaim = _reclaim_remedy(ctx, flavor, resource, line.get("missing"))
        if reclaim is not None:
            out.append(reclaim)
    return out


def _reclaim_remedy(ctx: Context, flavor: str, resource: str, missing_text: Any) -> dict[str, Any] | None:
    """The queue's own unused nominal quota is borrowed by others and Kueue never reclaims it (Never): letting
    it reclaim frees up to what they borrow of it; enough only when that covers the shortfall and they may be
    preempted, so never exact."""
    lent = quota.lent_quota(ctx.state, ctx.cq_name or "", flavor, resource) if ctx.cohort else None
    if lent is None or lent.reclaim != "Never":
        return None
    missing = _dec(missing_text)
    covers = missing is not None and lent.amount >= missing
    amount = quota.fmt(resource, lent.amount)
    return {"actionBy": ActionBy.CLUSTER_ADMIN.value, "kind": "ClusterQueue", "name": ctx.cq_name,
            "field": "spec.preemption.reclaimWithinCohort", "now": "Never", "enough": "Any", "exact": False,
            "message": f"{amount} {resource} of its nominal quota in flavor {flavor} is borrowed by "
                       f"{', '.join(cq for cq, _ in lent.borrowers[:3])}; with reclaimWithinCohort Any (or "
                       "LowerPriority, for their lower-priority Workloads) Kueue preempts them to take it back"
                       + (f", which covers the {missing_text} {resource} missing" if covers else
                          f", though that is less than the {missing_text} {resource} missing" if missing is not None
                          else "") + " (an estimate: their priorities and the cohort's other usage decide)."}


_FREED_EXACT, _FREED_ESTIMATE = ".", " (an estimate: the cohort's lending and reclaim may change it)."
_FREED_PARTIAL = " (at most: it allows partial admission, so fewer Pods may start with less)."
_FREED_OURS = " (an estimate: from the Workload's requests, not a shortfall Kueue stated)."


def _freed_texts(resource: str, missing_text: Any, nominal_text: Any) -> tuple[str, ...]:
    """(needed, nominal now, enough) as the remedy writes them; () when the line is no shortfall."""
    missing, nominal = _dec(missing_text), _dec(nominal_text)
    if missing is None or missing <= 0 or nominal is None:
        return ()
    need, now_text = quota.fmt(resource, missing) or str(missing), quota.fmt(resource, nominal) or str(nominal)
    return need, now_text, quota.fmt(resource, nominal + missing) or str(nominal + missing)


# per pass: (resource, missing, nominal) texts -> `_freed_texts`
FREED_TEXTS: Derived[dict[tuple[str, str, str], tuple[str, ...]]] = Derived(
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


def _template(ctx: Context) -> tuple[str, str, str, str | None]:
    """(kind, name, path of the Pod spec, namespace) of the object whose Pod template the owner changes."""
    owner = ctx.owner
    if owner is not None and s(owner.get("kind")) == "Job":
        return "Job", name(owner) or "", "spec.template.spec", ctx.ns
    if owner is not None and s(owner.get("kind")) == "TrainJob":
        return "TrainJob", name(owner) or "", _TRAINJOB_POD_PATCH, ctx.ns
    ref = ctx.owner_ref
    kind = s(ref.get("kind")) if ref else None
    path = "spec.template.spec" if kind == "Job" else "the Pod template's spec"
    return kind or "Workload", (s(ref.get("name")) if ref else None) or ctx.name, path, ctx.ns


def _template_origin(ctx: Context) -> str:
    """Where the owner's Pod template really comes from, when that is not the owner itself (a TrainJob's runtime)."""
    owner = ctx.owner
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
    kind, obj, pod_path, ns = _template(ctx)
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
                               quota.fmt(r, need) or str(need), f"<= {quota.fmt(r, cap) or cap}",
                               f"Lower the per-Pod request of {r} from {quota.fmt(r, need)} to at most "
                               f"{quota.fmt(r, cap)}, the most any usable node has {what} ({node}).{funnel}"
                               + (" The node must also have it free when the Pod is scheduled." if
                                  p.cause == Cause.POD_TOO_LARGE else not_sure)))
        if need is not None:
            where = f"nodes selected by {p.constraints.selector_text()}" if p.constraints.selector_text() else "nodes"
            out.append(_remedy(ActionBy.CLUSTER_ADMIN, "Node", p.constraints.selector_text() or "*", None,
                               f"status.allocatable[{r}]",
                               (quota.fmt(r, most[0]) or "?") if most is not None else "?",
                               f">= {quota.fmt(r, need)} free on one node",
                               f"Add or free {where} with at least {quota.fmt(r, need)} {r} for one Pod"
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
