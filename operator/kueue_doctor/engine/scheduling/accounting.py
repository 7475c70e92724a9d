"""Kueue's books against the Pods and the nodes: when Kueue itself admitted what the nodes cannot hold.

Kueue admits by quota, never by node capacity, so Pods of an admitted Workload that find no node are usually a
node question. Two cases the input shows where Kueue's own numbers are the cause, and "add nodes" is the wrong
answer: a pod set charged less per Pod than its Pods request (kueue#15020: a LimitRange default counted for a
container that sets only limits), and flavor quota larger than the flavor's nodes can allocate (kueue#4782: Kueue
admits up to the quota and sees nothing to preempt within it).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ...kube.objects import lst, m, name, s, spec, status
from ...kube.quantity import parse
from .. import quota
from ..context import Context


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
             if all(m(m(n.get("metadata")).get("labels")).get(k) == v for k, v in labels.items())]
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
    out = []
    for key in ctx.state.index.workloads_by_cq.get(ctx.cq_name or "", ()):
        if key == (ctx.ns, ctx.name) or not ctx.state.index.holds_quota(key):
            continue
        wl = ctx.state.workloads.get(key)
        held = quota.admitted_usage(wl).get((flavor, resource)) if wl is not None else None
        if wl is not None and held:
            prio = spec(wl).get("priority")
            out.append((prio if isinstance(prio, int) else 0, f"{key[0]}/{name(wl)}", held))
    if not out:
        return ""
    out.sort()
    lower = [(p, k, h) for p, k, h in out if p < ctx.priority]
    shown = lower or out
    words = "; ".join(f"{k} (priority {p}) holds {quota.fmt(resource, h)}" for p, k, h in shown[:3])
    return f"; {'lower-priority ' if lower else ''}Workloads of this ClusterQueue holding it: {words}"
