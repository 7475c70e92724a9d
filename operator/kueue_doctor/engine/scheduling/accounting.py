"""Kueue's books against the Pods and the nodes: when Kueue itself admitted what the nodes cannot hold.

Kueue admits by quota, never by node capacity, so Pods of an admitted Workload that find no node are usually a
node question. Three cases the input shows where Kueue's own numbers are the cause, and "add nodes" is the wrong
answer: a pod set charged less per Pod than its Pods request (kueue#15020: a LimitRange default counted for a
container that sets only limits), flavor quota larger than the flavor's nodes can allocate (kueue#4782: Kueue
admits up to the quota and sees nothing to preempt within it), and another holder whose status.reclaimablePods counts
as finished Pods that run again (kueue#14609: Kueue charges count - reclaimable Pods, and its webhook refuses to lower
the count while quota is reserved, so after a JobSet failurePolicy restart, or an eviction that never completed,
the Pods that run again are charged to no quota). The last is also said on that Workload's own verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ...kube.kueue_names import PODSET_LABEL
from ...kube.objects import i, labels, lst, m, meta, name, s, spec, status
from ...kube.quantity import parse
from ...kube.selectors import label_selector_matches
from ...state import WORKLOAD_ANNOTATION
from .. import quota
from ..context import Context
from ..holders import quota_holders
from .owners import pod_set_counts, reclaimable_by_pod_set


def _template(ctx: Context, pod_set: str) -> Mapping[str, Any]:
    for ps in lst(ctx.spec.get("podSets")):
        if s(m(ps).get("name")) == pod_set:
            return m(m(m(ps).get("template")).get("spec"))
    return {}


def _limits_only(pod: Mapping[str, Any], resource: str) -> bool:
    """A container that sets a limit and no request for `resource` (the apiserver then requests the limit)."""
    for c in [*lst(pod.get("containers")), *lst(pod.get("initContainers"))]:
        res = m(m(c).get("resources"))
        if resource in m(res.get("limits")) and resource not in m(res.get("requests")):
            return True
    return False


def undercharged(ctx: Context) -> str:
    """Pod sets whose admission charged less per Pod than the Pods request: the ClusterQueue's usage is short by
    the difference, so Kueue admitted Workloads the nodes cannot hold."""
    parts, limits_only = [], False
    for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")):
        psa = m(psa)
        count, pod_set = psa.get("count"), s(psa.get("name")) or "main"
        if not isinstance(count, int) or count <= 0:
            continue
        template = _template(ctx, pod_set)
        asked = quota.pod_requests(template)
        short = []  # (resource, charged in all, charged per Pod, asked per Pod)
        for res, amount in m(psa.get("resourceUsage")).items():
            total, want = parse(amount), asked.get(str(res))
            if total is not None and want is not None and want > total / count:
                short.append((str(res), total, total / count, want))
                limits_only = limits_only or _limits_only(template, str(res))
        if short:
            def each(values: list[tuple[str, Decimal]]) -> str:
                return ", ".join(f"{quota.fmt(r, v)} {r}" for r, v in values)
            parts.append(f"pod set {pod_set}: Kueue charged {each([(r, c) for r, c, _, _ in short])} for {count} "
                         f"Pods ({each([(r, p) for r, _, p, _ in short])} each) while each Pod requests "
                         f"{each([(r, w) for r, _, _, w in short])}: "
                         f"{each([(r, (w - p) * count) for r, _, p, w in short])} that no quota counts")
    if not parts:
        return ""
    why = (" Its containers set only limits for that resource: Kueue <= 0.19.2 charged the namespace's LimitRange "
           "defaultRequest instead of the limit (kueue#15020, fixed in 0.19.3). The cluster admin upgrades Kueue; "
           "until then the owner sets requests equal to limits (the Workload may then no longer fit the queue)."
           if limits_only else
           " The Workload's pod template asks for more than Kueue counted (a webhook or a LimitRange changed the "
           "requests after Kueue computed them). The cluster admin compares status.admission with the Pods' requests.")
    return (f" Kueue's own numbers are short, so it admitted more than the nodes hold: {'; '.join(parts)}." + why)


def _allocatable(node: Mapping[str, Any], resource: str) -> Decimal:
    return parse(m(status(node).get("allocatable")).get(resource)) or Decimal(0)


def above_capacity(ctx: Context, flavor: str, resource: str) -> str:
    """The nominal quota of every ClusterQueue for `flavor`/`resource` against what the flavor's nodes in the
    input can allocate: above it, Kueue admits Workloads no node can hold, and preempts nothing to make room."""
    if not ctx.state.knows("Node") or not ctx.state.knows("ClusterQueue"):
        return ""
    fl = ctx.state.flavors.get(flavor)
    if fl is None:
        return ""
    labels = m(spec(fl).get("nodeLabels"))
    nodes = [n for n in ctx.state.nodes.values()
             if label_selector_matches({"matchLabels": labels}, m(m(n.get("metadata")).get("labels")))]
    capacity = sum((_allocatable(n, resource) for n in nodes), Decimal(0))
    if not nodes:
        return ""
    queues = []
    for cq_name in sorted(ctx.state.cluster_queues):
        fq = quota.flavor_quota(ctx.state, "ClusterQueue", cq_name, flavor, resource)
        if fq is not None and fq.nominal:
            queues.append((cq_name, fq.nominal))
    nominal = sum((q for _, q in queues), Decimal(0))
    if nominal <= capacity:
        return ""
    who = ", ".join(f"{cq} {quota.fmt(resource, q)}" for cq, q in queues[:5])
    held = _holders_on(ctx, flavor, resource)
    return (f" The quota is larger than the nodes: nominalQuota for {resource} in flavor {flavor} adds up to "
            f"{quota.fmt(resource, nominal)} ({who}) while the flavor's {len(nodes)} node(s) can allocate "
            f"{quota.fmt(resource, capacity)}, so Kueue admits Workloads that no node can hold and sees no reason "
            f"to preempt within the quota (kueue#4782){held}. The cluster admin sets nominalQuota to what the nodes "
            "hold; then Kueue's own preemption (withinClusterQueue) decides who runs.")


def _holders_on(ctx: Context, flavor: str, resource: str) -> str:
    """Other admitted Workloads of this ClusterQueue holding the resource in the flavor, by priority."""
    out = [(h.priority, f"{h.key[0]}/{h.key[1]}", held) for h in quota_holders(ctx, ctx.cq_name or "").holders
           if h.key != (ctx.ns, ctx.name) and (held := h.usage.get((flavor, resource)))]
    if not out:
        return ""
    out.sort()
    lower = [(p, k, h) for p, k, h in out if p < ctx.priority]
    shown = lower or out
    words = "; ".join(f"{k} (priority {p}) holds {quota.fmt(resource, h)}" for p, k, h in shown[:3])
    return f"; {'lower-priority ' if lower else ''}Workloads of this ClusterQueue holding it: {words}"


STALE_RECLAIMABLE = "kueue#14609"


@dataclass(frozen=True)
class Overrun:
    """A pod set with more Pods on nodes than Kueue charges for it: its reclaimablePods counts Pods as finished that
    run again."""

    pod_set: str
    count: int  # spec.podSets[].count
    reclaimable: int  # status.reclaimablePods
    running: int  # bound to a node, not finished, not being deleted (at most the admitted count)
    counted: int  # what Kueue charges: min(admitted, count - reclaimable) Pods
    per_pod: dict[tuple[str, str], Decimal]  # (flavor, resource) -> Kueue's charge for one Pod

    @property
    def extra(self) -> int:
        return self.running - self.counted

    def uncounted(self) -> dict[tuple[str, str], Decimal]:
        return {k: v * self.extra for k, v in self.per_pod.items()}


def _on_a_node(pod: Mapping[str, Any]) -> bool:
    """Bound, not finished and not being deleted: it holds its requests on the node."""
    return (bool(s(m(pod.get("spec")).get("nodeName"))) and not meta(pod).get("deletionTimestamp")
            and s(m(pod.get("status")).get("phase")) in ("Running", "Pending"))


def overruns(workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Overrun]:
    """The pod sets of an admitted Workload whose Pods on nodes outnumber what Kueue charges because of its
    reclaimablePods (workload.totalRequestsFromAdmission scales resourceUsage to count - reclaimable). Only the
    Pods that name the Workload by Kueue's kueue.x-k8s.io/workload annotation (set on the Pods of every Job-based
    owner while TopologyAwareScheduling is on, the default since v0.14): what a namespace shard keeps of another
    shard's Pods too (kube/slim.foreign_pod)."""
    reclaimable = reclaimable_by_pod_set(workload)
    if not any(reclaimable.values()):
        return []
    wl_name, counts = name(workload), pod_set_counts(workload)
    only = next(iter(counts)) if len(counts) == 1 else None
    running: dict[str, int] = {}
    for pod in pods:
        if s(m(meta(pod).get("annotations")).get(WORKLOAD_ANNOTATION)) != wl_name or not _on_a_node(pod):
            continue
        ps = s(labels(pod).get(PODSET_LABEL)) or only
        if ps is not None:
            running[ps] = running.get(ps, 0) + 1
    out = []
    for psa in lst(m(status(workload).get("admission")).get("podSetAssignments")):
        psa = m(psa)
        ps = s(psa.get("name")) or "main"
        admitted = i(psa.get("count"), counts.get(ps, 1))
        gone, count = reclaimable.get(ps, 0), counts.get(ps, admitted)
        counted = max(min(admitted, count - gone), 0)
        on_nodes = min(running.get(ps, 0), admitted)
        # more reclaimable than the pod set holds: an elastic Job scaled down, recounted by its next reconcile
        # (kueue#12670), not this
        if not gone or gone > count or admitted <= 0 or on_nodes <= counted:
            continue
        flavors = m(psa.get("flavors"))
        per_pod = {}
        for res, amount in m(psa.get("resourceUsage")).items():
            value, flavor = parse(amount), s(flavors.get(res))
            if value is not None and flavor is not None and isinstance(res, str):
                per_pod[flavor, res] = value / admitted
        out.append(Overrun(ps, count, gone, on_nodes, counted, per_pod))
    return out


def _amounts(values: Mapping[tuple[str, str], Decimal], resources: Iterable[tuple[str, str]] | None = None) -> str:
    keys = [k for k in values if resources is None or k in resources]
    return ", ".join(f"{quota.fmt(r, values[f, r])} {r}" for f, r in keys[:4])


def _fix(workload_text: str) -> str:
    return (f"the cluster admin deactivates {workload_text} (spec.active: false) and reactivates it once its Pods "
            "are gone (Kueue recounts reclaimablePods while it holds no quota), or lets it finish; upgrade Kueue once "
            f"{STALE_RECLAIMABLE} is fixed.")


def _total(found: Iterable[Overrun], keep: Iterable[tuple[str, str]] | None = None) -> dict[tuple[str, str], Decimal]:
    kept = set(keep) if keep is not None else None
    out: dict[tuple[str, str], Decimal] = {}
    for o in found:
        for k, v in o.uncounted().items():
            if kept is None or k in kept:
                out[k] = out.get(k, Decimal(0)) + v
    return out


def own_overrun(ctx: Context) -> str:
    """The Workload's own stale reclaimablePods, said on its verdict: how many of its Pods run uncounted, and what
    ClusterQueue usage that leaves out ("" when none)."""
    found = overruns(ctx.wl, ctx.pods)
    if not found:
        return ""
    owner = ctx.owner
    restarts = i(m(owner.get("status")).get("restarts")) if owner is not None and s(owner.get("kind")) == "JobSet" \
        else 0
    why = (f"JobSet {name(owner)} restarted its Jobs (status.restarts {restarts})" if owner is not None and restarts
           else "those Pods started again")
    parts = [f"{o.running} Pods of pod set {o.pod_set} run while status.reclaimablePods marks {o.reclaimable} of "
             f"{o.count} finished, so Kueue charges {o.counted} "
             f"({_amounts({k: v * o.counted for k, v in o.per_pod.items()}) or 'nothing'}) instead of {o.running} "
             f"({_amounts({k: v * o.running for k, v in o.per_pod.items()})})" for o in found]
    return (f" Kueue under-counts it: {'; '.join(parts)}. {why}, and Kueue's webhook refuses to lower "
            f"reclaimablePods while quota is reserved ({STALE_RECLAIMABLE}): {ctx.cq_text} is short by "
            f"{_amounts(_total(found))} and admits other Workloads into room these Pods hold. To fix it, "
            + _fix("this Workload"))


def uncounted_holders(ctx: Context, flavor: str | None, resource: str | None) -> str:
    """Other holders of the ClusterQueue whose Pods run beyond what their stale reclaimablePods lets Kueue charge
    in this flavor and resource: the ClusterQueue's usage is short by their extra Pods, so Kueue admitted Workloads
    the nodes cannot hold. Read only with the Nodes (explain): the operator reads none and, as a namespace shard,
    not the Pods of other shards' holders, so its verdict would depend on the shard; there the holder's own
    verdict says it (`own_overrun`)."""
    if not ctx.state.knows("Node"):
        return ""

    def wanted(key: tuple[str, str]) -> bool:
        return (flavor is None or key[0] == flavor) and (resource is None or key[1] == resource)

    rows, found = [], []
    for key in ctx.state.index.workloads_by_cq.get(ctx.cq_name or "", ()):
        if key == (ctx.ns, ctx.name) or not ctx.state.index.holds_quota(key):
            continue
        wl = ctx.state.workloads.get(key)
        if wl is None or not reclaimable_by_pod_set(wl):  # the common case: no Pod is read
            continue
        for o in overruns(wl, ctx.state.pods_of(wl)):
            if any(wanted(k) for k in o.per_pod):
                found.append(o)
                rows.append(f"Workload {key[0]}/{key[1]} runs {o.running} Pods of pod set {o.pod_set} but its "
                            f"status.reclaimablePods marks {o.reclaimable} of {o.count} finished, so Kueue charges "
                            f"{o.counted}")
    if not rows:
        return ""
    keep = {k for o in found for k in o.per_pod if wanted(k)}
    return (f" Kueue's usage of {ctx.cq_text} is short, so it admitted more than the nodes hold: "
            f"{'; '.join(rows[:3])}: {_amounts(_total(found, keep))} run uncounted ({STALE_RECLAIMABLE}, stale since "
            "those Pods started again). Not a node shortage: " + _fix("that Workload" if len(rows) == 1
                                                                      else "those Workloads"))
