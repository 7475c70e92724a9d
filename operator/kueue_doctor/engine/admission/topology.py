"""Topology-aware scheduling: what Kueue's "topology ... allows to fit only F out of N pod(s)" means here.

Kueue names the topology and the numbers, not the level the pod set asked for, nor whether the pods could
ever fit. Both come from the objects: the pod set's `topologyRequest` (from the
`kueue.x-k8s.io/podset-required-topology` / `podset-preferred-topology` annotations), the flavor's
`topologyName` and nodeLabels, the Topology's levels and the Nodes (only when Nodes are in the input).
The capacity of a domain is counted as Kueue's TAS snapshot does for an empty cluster: the flavor's
nodes, minus cordoned ones (Kueue leaves them out of "Total nodes") and those with a NoSchedule/NoExecute
taint the pods do not tolerate; per node, how many pods its allocatable holds for each requested resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ...kube.objects import conditions, is_true, lst, m, s, spec
from ...kube.quantity import parse
from ...kube.selectors import label_selector_matches
from .. import quota
from ..context import Context
from ..messages import FlavorFailure
from .stalled import _tolerated

HOSTNAME = "kubernetes.io/hostname"


@dataclass
class TopologyFit:
    """The pod set's request against the topology, counted on the Nodes as if nothing ran."""

    flavor: str
    topology: str
    level: str | None  # the node label of the requested level; None: preferred/unconstrained (whole topology)
    required: bool
    count: int
    largest: int  # pods the largest domain at `level` holds when empty
    domains: int  # domains at `level` (1 for the whole topology)
    nodes: int  # nodes Kueue counts (flavor's, schedulable, tolerated)
    largest_with_all: int = 0  # the same, counting the cordoned and tainted nodes too
    cordoned: list[str] = field(default_factory=list)
    tainted: dict[str, list[str]] = field(default_factory=dict)  # taint -> node names

    @property
    def never_fits(self) -> bool:
        return self.largest < self.count

    @property
    def fits_without_exclusions(self) -> bool:
        """Would fit if the cordoned and tainted nodes counted: who must act is then the cluster admin."""
        return self.largest_with_all >= self.count


def _request(ps: Mapping[str, Any]) -> tuple[str | None, bool]:
    req = m(ps.get("topologyRequest"))
    if s(req.get("required")):
        return s(req.get("required")), True
    return s(req.get("preferred")), False


def _per_node(node: Mapping[str, Any], per_pod: Mapping[str, Decimal]) -> int:
    alloc = m(m(node.get("status")).get("allocatable")) or m(m(node.get("status")).get("capacity"))
    fits: list[int] = []
    for res, need in per_pod.items():
        if need <= 0:
            continue
        have = parse(alloc.get(res))
        if have is None:
            return 0
        fits.append(int(have // need))
    pods = parse(alloc.get("pods"))
    if pods is not None:
        fits.append(int(pods))
    return min(fits) if fits else 0


def _domain_capacity(nodes: list[Mapping[str, Any]], level: str | None, per_pod: Mapping[str, Decimal]
                     ) -> tuple[int, int]:
    per_domain: dict[str, int] = {}
    for n in nodes:
        key = s(m(m(n.get("metadata")).get("labels")).get(level)) if level else "*"
        if key is None:
            continue
        per_domain[key] = per_domain.get(key, 0) + _per_node(n, per_pod)
    return max(per_domain.values(), default=0), len(per_domain)


def _flavor_nodes(ctx: Context, flavor: str) -> int:
    """How many Nodes a flavor's nodeLabels select: what Kueue's "Total nodes" counts for the flavor it tried."""
    labels = dict(m(spec(ctx.state.flavors.get(flavor) or {}).get("nodeLabels")))
    return sum(1 for n in ctx.state.nodes.values()
               if label_selector_matches({"matchLabels": labels}, m(m(n.get("metadata")).get("labels"))))


def topology_fit(ctx: Context, f: FlavorFailure) -> TopologyFit | None:
    """The pod set of failure `f` against the flavor of topology `f.topology`; None without the objects."""
    if not f.topology or not ctx.state.knows("Node") or ctx.cq is None or f.unit == "slice":
        return None  # slices (podset slice size) are counted per slice domain: not modelled, Kueue's text decides
    candidates = [fl for fl in quota.flavors_of(ctx.cq)
                  if s(spec(ctx.state.flavors.get(fl) or {}).get("topologyName")) == f.topology]
    if len(candidates) > 1 and f.total_nodes is not None:  # several flavors share the Topology: Kueue's node count
        candidates = [fl for fl in candidates if _flavor_nodes(ctx, fl) == f.total_nodes] or []
        if len(candidates) != 1:
            return None  # which flavor Kueue tried is not told: no node arithmetic rather than a wrong one
    flavor = candidates[0] if candidates else None
    rf = ctx.state.flavors.get(flavor or "")
    ps = next((m(p) for p in lst(ctx.spec.get("podSets")) if (s(m(p).get("name")) or "main") == f.podset), None)
    if rf is None or ps is None or flavor is None:
        return None
    level, required = _request(ps)
    pod_spec = m(m(ps.get("template")).get("spec"))
    per_pod = quota.pod_requests(pod_spec)
    tolerations = [*lst(pod_spec.get("tolerations")), *lst(spec(rf).get("tolerations"))]
    labels = dict(m(spec(rf).get("nodeLabels")))
    fit = TopologyFit(flavor, f.topology, level if required else None, required, int(ps.get("count") or 1), 0, 0, 0)
    counted: list[Mapping[str, Any]] = []
    everything: list[Mapping[str, Any]] = []
    for n in ctx.state.nodes.values():
        meta = m(n.get("metadata"))
        if not label_selector_matches({"matchLabels": labels}, m(meta.get("labels"))):
            continue
        if not is_true(conditions(n).get("Ready")):
            continue
        everything.append(n)
        name = s(meta.get("name")) or "?"
        if spec(n).get("unschedulable"):
            fit.cordoned.append(name)
            continue
        blocking = [m(t) for t in lst(spec(n).get("taints"))
                    if m(t).get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(tolerations, m(t))]
        if blocking:
            for t in blocking:
                text = f"{s(t.get('key'))}={s(t.get('value')) or ''}:{s(t.get('effect'))}"
                fit.tainted.setdefault(text, []).append(name)
            continue
        counted.append(n)
    fit.nodes = len(counted)
    fit.largest, fit.domains = _domain_capacity(counted, fit.level, per_pod)
    fit.largest_with_all, _ = _domain_capacity(everything, fit.level, per_pod)
    return fit


def describe(fit: TopologyFit, f: FlavorFailure) -> str:
    """Kueue's numbers, the level asked for and what an empty topology could hold there."""
    unit = f.unit or "pod"
    where = (f"one {fit.level} domain" if fit.level else "the whole topology (preferred or unconstrained)")
    asked = (f"requires {where}" if fit.required else f"prefers {where}")
    now = (f"Kueue can place only {f.fit} of {f.requested_count} {unit}(s) now" if f.fit is not None
           else f"Kueue cannot place the {f.requested_count or fit.count} {unit}(s)")
    text = (f"Pod set {f.podset} ({fit.count} pods) {asked} of topology {fit.topology} in flavor {fit.flavor}: "
            f"{now}. Even with nothing running, the largest "
            + (f"of the {fit.domains} {fit.level} domains" if fit.level else "topology")
            + f" holds {fit.largest} pod(s) ({fit.nodes} usable node(s) in the flavor)")
    left_out = []
    if fit.cordoned:
        left_out.append(f"{len(fit.cordoned)} cordoned ({', '.join(sorted(fit.cordoned)[:3])})")
    for taint, nodes in sorted(fit.tainted.items()):
        left_out.append(f"{len(nodes)} tainted {taint} ({', '.join(sorted(nodes)[:3])})")
    if left_out:
        text += "; not counted: " + ", ".join(left_out)
    return text + "."
