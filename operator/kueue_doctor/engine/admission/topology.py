"""Topology-aware scheduling: what Kueue's "topology ... allows to fit only F out of N pod(s)" means here.

Kueue names the topology and the numbers, not the level the pod set asked for, nor whether the pods could
ever fit. Both come from the objects: the pod set's `topologyRequest` (from the
`kueue.x-k8s.io/podset-required-topology` / `podset-preferred-topology` annotations), the flavor's
`topologyName` and nodeLabels, the Topology's levels and the Nodes (only when Nodes are in the input).
The capacity of a domain is counted as Kueue's TAS snapshot does for an empty cluster: the flavor's
nodes, minus cordoned ones (Kueue leaves them out of "Total nodes") and those with a NoSchedule/NoExecute
taint the pods do not tolerate; per node, how many pods its allocatable holds for each requested resource,
less what the Pods outside Kueue's TAS bound there request: Kueue counts those until their phase is terminal
(pkg/controller/tas/non_tas_usage_controller.go) and its "as if empty" pass does not take them away. Only the
Pods in the input are seen (the operator and a live `explain` list Kueue's own): no node is called free for
want of Pods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from ...kube.kueue_names import TAS_POD_ANNOTATIONS
from ...kube.objects import (
    as_time,
    conditions,
    format_duration,
    i,
    is_true,
    lst,
    m,
    name,
    namespace,
    owner_refs,
    s,
    spec,
    status,
    when_text,
)
from ...kube.quantity import parse
from ...kube.selectors import label_selector_matches, node_term_matches
from ...state import Derived
from ...vocabulary import ActionBy
from .. import quota
from ..context import Context
from ..messages import FlavorFailure
from .stalled import STALL_AFTER, _tolerated

HOSTNAME = "kubernetes.io/hostname"
_RESIDENT_OWNERS = ("DaemonSet", "Node")  # one per node, never leaving it (a Node owns a static Pod's mirror)


@dataclass(frozen=True)
class OutsidePod:
    """A Pod bound to a node that Kueue's TAS does not place and whose phase is not terminal: Kueue subtracts its
    requests from the node's capacity (non-TAS usage), and cannot preempt it."""

    namespace: str
    name: str
    node: str
    requests: Mapping[str, Decimal]
    resident: bool  # a DaemonSet's or a static Pod: it never leaves the node
    phase: str
    deleted: datetime | None  # when its deletion was asked (deletionTimestamp less the grace period)
    grace_ends: datetime | None  # its deletionTimestamp
    finalizers: tuple[str, ...]

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class _Outside:
    """The Pods outside Kueue's TAS per node, for one clock value (one pass: Pods change without an index rebuild)."""

    now: Any = None
    by_node: dict[str, list[OutsidePod]] = field(default_factory=dict)


OUTSIDE: Derived[_Outside] = Derived("Pods outside Kueue's TAS per node", lambda _: _Outside())


def _outside_pod(pod: Mapping[str, Any]) -> OutsidePod | None:
    meta = m(pod.get("metadata"))
    node, phase = s(spec(pod).get("nodeName")), s(status(pod).get("phase")) or ""
    annotations = m(meta.get("annotations"))
    if not node or phase in ("Succeeded", "Failed") or any(a in annotations for a in TAS_POD_ANNOTATIONS):
        return None
    grace_ends = as_time(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    deleted = grace_ends - timedelta(seconds=grace) if grace_ends is not None and isinstance(grace, int) else grace_ends
    return OutsidePod(namespace(pod) or "", name(pod) or "", node, quota.pod_requests(spec(pod)),
                      any(s(r.get("kind")) in _RESIDENT_OWNERS for r in owner_refs(pod)), phase, deleted,
                      grace_ends, tuple(str(f) for f in lst(meta.get("finalizers"))))


def outside_pods(ctx: Context) -> dict[str, list[OutsidePod]]:
    """The Pods in the input outside Kueue's TAS, by node; read once per pass."""
    memo = ctx.state.derived(OUTSIDE)
    if memo.now != ctx.now:
        memo.now, memo.by_node = ctx.now, {}
        for pod in ctx.state.pods.values():
            found = _outside_pod(pod)
            if found is not None:
                memo.by_node.setdefault(found.node, []).append(found)
    return memo.by_node


class TooLarge(NamedTuple):
    """One Pod requests more of a resource than any of some nodes allocates."""
    resource: str
    per_pod: Decimal
    most: Decimal  # the most any of those nodes allocates
    node: str  # where


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
    largest_without_own: int = 0  # the same, counting the nodes the Pods' own selector/affinity leaves out too
    by_pods: list[str] = field(default_factory=list)  # nodes the Pods' own nodeSelector/required affinity leaves out
    cordoned: list[str] = field(default_factory=list)
    tainted: dict[str, list[str]] = field(default_factory=dict)  # taint -> node names
    # `largest` leaves out only the Pods outside Kueue's TAS that never leave their node (DaemonSets, static Pods);
    # `largest_now` all of them, as Kueue counts (its "as if empty" pass keeps them)
    largest_now: int = 0
    largest_unless_terminating: int = 0  # the terminating ones (deleted, not yet terminal) gone too
    outside: int = 0  # the Pods outside Kueue's TAS seen on the usable nodes
    held: list[OutsidePod] = field(default_factory=list)  # those that may leave, on the largest domain's nodes
    held_nodes: list[Mapping[str, Any]] = field(default_factory=list)  # that domain's nodes
    per_pod: Mapping[str, Decimal] = field(default_factory=dict)
    podset: str = ""  # the pod set counted (a group's workers, whichever pod set Kueue named)
    leader: str | None = None  # the pod set group's leader, placed in the same domain
    group: str | None = None  # their podSetGroupName
    largest_alone: int = 0  # what the largest domain holds of the workers without the leader
    implied: bool = False  # no topologyRequest: a TAS-only ClusterQueue places it unconstrained
    too_large: TooLarge | None = None  # over the flavor's Ready nodes, whatever the Pods' own selector
    too_large_own: TooLarge | None = None  # over those the Pods' own nodeSelector/affinity selects, when only they are
    resident_slots: int = 0  # Pod slots (allocatable pods) DaemonSet/static Pods take, when those slots bind `largest`

    @property
    def held_back(self) -> bool:
        """It would fit as if empty but for Pods outside Kueue's TAS that may leave: Kueue counts them."""
        return self.largest_now < self.count <= self.largest and bool(self.held)

    @property
    def never_fits(self) -> bool:
        return self.largest < self.count

    @property
    def fits_without_exclusions(self) -> bool:
        """Would fit if the cordoned and tainted nodes counted: who must act is then the cluster admin."""
        return self.largest_with_all >= self.count

    @property
    def own_selector_blocks(self) -> bool:
        """Would fit but for the Pods' own nodeSelector or required node affinity: the owner's to relax."""
        return bool(self.by_pods) and self.largest_without_own >= self.count


def _request(ps: Mapping[str, Any]) -> tuple[str | None, bool]:
    req = m(ps.get("topologyRequest"))
    if s(req.get("required")):
        return s(req.get("required")), True
    return s(req.get("preferred")), False


def _allocatable(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return m(m(node.get("status")).get("allocatable")) or m(m(node.get("status")).get("capacity"))


def _per_node(node: Mapping[str, Any], per_pod: Mapping[str, Decimal], used: Mapping[str, Decimal]) -> int:
    alloc = _allocatable(node)
    fits: list[int] = []
    for res, need in per_pod.items():
        if need <= 0:
            continue
        have = parse(alloc.get(res))
        if have is None:
            return 0
        fits.append(max(int((have - used.get(res, Decimal(0))) // need), 0))
    pods = parse(alloc.get("pods"))
    if pods is not None:  # each Pod takes a slot of allocatable pods, those outside Kueue's TAS too
        fits.append(max(int(pods - used.get("pods", Decimal(0))), 0))
    return min(fits) if fits else 0


def _stays(p: OutsidePod) -> bool:
    return p.resident


def _counted(p: OutsidePod) -> bool:
    return True


def _not_leaving(p: OutsidePod) -> bool:
    return p.resident or p.deleted is None


def _used(pods: list[OutsidePod], which: Callable[[OutsidePod], bool]) -> dict[str, Decimal]:
    """What the picked Pods take of their node, a slot of its allocatable pods each: Kueue's non-TAS usage adds
    one pod per Pod (tas_non_tas_pod_cache.go addNodeUsage, OnePodRequest; kueue#5998)."""
    total: dict[str, Decimal] = {}
    for p in pods:
        if which(p):
            for r, v in p.requests.items():
                total[r] = total.get(r, Decimal(0)) + v
            total["pods"] = total.get("pods", Decimal(0)) + 1
    return total


def _domains(nodes: list[Mapping[str, Any]], level: str | None) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for n in nodes:
        key = s(m(m(n.get("metadata")).get("labels")).get(level)) if level else "*"
        if key is not None:
            out.setdefault(key, []).append(n)
    return out


def _with_leader(members: list[Mapping[str, Any]], per_pod: Mapping[str, Decimal], leader: Mapping[str, Decimal],
                 used: Callable[[Mapping[str, Any]], Mapping[str, Decimal]]) -> int:
    """The workers a domain holds beside its pod set group's leader, as Kueue's TAS counts a domain's
    podCountWithLeader: all its nodes' workers less the fewest the leader displaces on a node it fits on; none
    when the leader fits on no node."""
    total, displaced = 0, None
    for n in members:
        here = used(n)
        workers = _per_node(n, per_pod, here)
        total += workers
        if _per_node(n, leader, here) >= 1:
            beside = {r: here.get(r, Decimal(0)) + leader.get(r, Decimal(0)) for r in {*here, *leader}}
            beside["pods"] = here.get("pods", Decimal(0)) + 1  # the leader's own slot (leaderRequests + OnePodRequest)
            lost = workers - _per_node(n, per_pod, beside)
            displaced = lost if displaced is None else min(displaced, lost)
    return 0 if displaced is None else total - displaced


def _domain_capacity(nodes: list[Mapping[str, Any]], level: str | None, per_pod: Mapping[str, Decimal],
                     outside: Mapping[str, list[OutsidePod]], which: Callable[[OutsidePod], bool] = _stays,
                     leader: Mapping[str, Decimal] | None = None) -> tuple[int, int]:
    """The pods the largest domain holds with the requests of the Pods outside Kueue's TAS `which` picks taken
    away (beside the pod set group's `leader`, when there is one), and how many domains there are."""
    def used(n: Mapping[str, Any]) -> Mapping[str, Decimal]:
        return _used(outside.get(name(n) or "", []), which)

    per_domain = {key: (_with_leader(members, per_pod, leader, used) if leader is not None else
                        sum(_per_node(n, per_pod, used(n)) for n in members))
                  for key, members in _domains(nodes, level).items()}
    return max(per_domain.values(), default=0), len(per_domain)


def _too_large(nodes: list[Mapping[str, Any]], per_pod: Mapping[str, Decimal]) -> TooLarge | None:
    """A resource one Pod requests more of than any of the nodes allocates (Kueue: `excluded: resource "cpu": N`
    on every node): no domain ever holds a Pod, whatever the topology request or the pod count."""
    for res, need in sorted(per_pod.items()):
        if res == "pods" or need <= 0 or not nodes:
            continue
        most, where = max(((parse(_allocatable(n).get(res)) or Decimal(0), name(n) or "?") for n in nodes),
                          key=lambda x: x[0])
        if most < need:
            return TooLarge(res, need, most, where)
    return None


def _group(ctx: Context, podset: str) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """The pod set Kueue's TAS fits for a failure about `podset`, and its group's leader: pod sets sharing a
    topologyRequest.podSetGroupName are placed together in one domain, the second in spec order as the leader
    unless it has more pods than the first (findLeaderAndWorkers: on equal counts the second leads); Kueue names
    either pod set in its message."""
    sets = [m(p) for p in lst(ctx.spec.get("podSets"))]
    mine = next((p for p in sets if (s(p.get("name")) or "main") == podset), {})
    group = s(m(mine.get("topologyRequest")).get("podSetGroupName"))
    mates = [p for p in sets if group and s(m(p.get("topologyRequest")).get("podSetGroupName")) == group]
    if len(mates) != 2:
        return mine, None
    first, second = mates
    if (i(second.get("count")) or 1) > (i(first.get("count")) or 1):
        return second, first
    return first, second


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
    ps, leader_ps = _group(ctx, f.podset)
    if rf is None or not ps or flavor is None:
        return None
    level, required = _request(ps)
    pod_spec = m(m(ps.get("template")).get("spec"))
    per_pod = quota.pod_requests(pod_spec)
    tolerations = [*lst(pod_spec.get("tolerations")), *lst(spec(rf).get("tolerations"))]
    labels = dict(m(spec(rf).get("nodeLabels")))
    # Kueue's TAS also leaves out the nodes the pod set's own nodeSelector and required node affinity reject
    # ("excluded: nodeSelector: N, affinity: N")
    own = {"matchLabels": dict(m(pod_spec.get("nodeSelector")))}
    terms = [m(x) for x in lst(m(m(m(m(pod_spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))).get("nodeSelectorTerms"))]
    fit = TopologyFit(flavor, f.topology, level if required else None, required, i(ps.get("count")) or 1, 0, 0, 0)
    fit.podset = s(ps.get("name")) or "main"
    fit.implied = not m(ps.get("topologyRequest"))
    leader = None
    if leader_ps is not None:
        leader = quota.pod_requests(m(m(leader_ps.get("template")).get("spec")))
        fit.leader = s(leader_ps.get("name")) or "leader"
        fit.group = s(m(ps.get("topologyRequest")).get("podSetGroupName"))
    counted: list[Mapping[str, Any]] = []
    everything: list[Mapping[str, Any]] = []
    unselected: list[Mapping[str, Any]] = []
    in_flavor: list[Mapping[str, Any]] = []
    for n in ctx.state.nodes.values():
        meta = m(n.get("metadata"))
        if not label_selector_matches({"matchLabels": labels}, m(meta.get("labels"))):
            continue
        if not is_true(conditions(n).get("Ready")):
            continue
        in_flavor.append(n)
        node_name = s(meta.get("name")) or "?"
        selected = label_selector_matches(own, m(meta.get("labels"))) and (
            not terms or any(node_term_matches(term, n) for term in terms))
        if selected:
            everything.append(n)
        if spec(n).get("unschedulable"):
            if selected:
                fit.cordoned.append(node_name)
            continue
        blocking = [m(t) for t in lst(spec(n).get("taints"))
                    if m(t).get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(tolerations, m(t))]
        if blocking:
            for t in blocking if selected else ():
                text = f"{s(t.get('key'))}={s(t.get('value')) or ''}:{s(t.get('effect'))}"
                fit.tainted.setdefault(text, []).append(node_name)
            continue
        if not selected:
            fit.by_pods.append(node_name)
            unselected.append(n)
            continue
        counted.append(n)
    fit.nodes, fit.per_pod = len(counted), per_pod
    outside = outside_pods(ctx) if ctx.state.pods else {}
    fit.largest, fit.domains = _domain_capacity(counted, fit.level, per_pod, outside, leader=leader)
    fit.largest_now, _ = _domain_capacity(counted, fit.level, per_pod, outside, _counted, leader)
    fit.largest_unless_terminating, _ = _domain_capacity(counted, fit.level, per_pod, outside, _not_leaving, leader)
    fit.largest_with_all, _ = _domain_capacity(everything, fit.level, per_pod, outside, leader=leader)
    if unselected:
        fit.largest_without_own, _ = _domain_capacity(counted + unselected, fit.level, per_pod, outside,
                                                      leader=leader)
    if leader is not None:
        fit.largest_alone, _ = _domain_capacity(counted, fit.level, per_pod, outside, _counted)
    # too large for every node of the flavor: the request's, or the node sizes'; only for those the Pods' own
    # selector picks: the selector's (larger nodes are there, left out by it)
    fit.too_large = _too_large(in_flavor, per_pod)
    if fit.too_large is None and everything:
        fit.too_large_own = _too_large(everything, per_pod)
    fit.outside = sum(len(outside.get(name(n) or "", ())) for n in counted)
    if fit.largest < _domain_capacity(counted, fit.level, per_pod, {}, leader=leader)[0] and \
            all(parse(_allocatable(n).get("pods")) is not None for n in counted) and \
            _domain_capacity(counted, fit.level, {}, outside)[0] == fit.largest:  # the Pod slots bind, not requests
        fit.resident_slots = sum(1 for n in counted for p in outside.get(name(n) or "", ()) if p.resident)
    if fit.largest_now < fit.count <= fit.largest:  # the Pods that may leave on the largest domain: name them
        best = max(_domains(counted, fit.level).values(), key=lambda members: sum(
            _per_node(n, per_pod, _used(outside.get(name(n) or "", []), _stays)) for n in members))
        fit.held_nodes = best
        fit.held = sorted((p for n in best for p in outside.get(name(n) or "", ()) if not p.resident),
                          key=lambda p: (-sum(p.requests.get(r, Decimal(0)) / v for r, v in per_pod.items() if v > 0),
                                         p.ref))
    return fit


def describe(fit: TopologyFit, f: FlavorFailure) -> str:
    """Kueue's numbers, the level asked for and what an empty topology could hold there."""
    unit = f.unit or "pod"
    where = (f"one {fit.level} domain" if fit.level else "the whole topology (preferred or unconstrained)")
    asked = (f"requires {where}" if fit.required else f"prefers {where}")
    now = (f"Kueue can place only {f.fit} of {f.requested_count} {unit}(s) now" if f.fit is not None
           else f"Kueue cannot place the {f.requested_count or fit.count} {unit}(s)")
    largest = (f"of the {fit.domains} {fit.level} domains" if fit.level else "topology")
    holds, grp = f"holds {fit.largest_now} pod(s)", ""
    if fit.leader is not None:
        grp = (f", together with its leader, pod set {fit.leader} (podSetGroupName {fit.group}: Kueue places the "
               "group in one domain)")
        holds = f"holds {fit.largest_now} of them beside the leader ({fit.largest_alone} without it)"
        if f.fit is not None and f.requested_count is not None and f.fit >= f.requested_count:
            now += " (Kueue's count leaves the leader out: the group does not fit)"
    who = f.podset if fit.leader is None else fit.podset
    subject = (f"Pod set {who} ({fit.count} pods) makes no topology request; its ClusterQueue's flavors are all TAS, "
               f"so Kueue places it unconstrained in topology {fit.topology}, flavor {fit.flavor}" if fit.implied else
               f"Pod set {who} ({fit.count} pods) {asked} of topology {fit.topology} in flavor {fit.flavor}{grp}")
    if fit.held_back:
        text = (f"{subject}: "
                f"{now}. Even with no Workload running, the largest {largest} holds {fit.largest_now} pod(s), "
                f"{fit.largest} without Pods outside Kueue's TAS ({fit.nodes} usable node(s) in the flavor)")
    else:
        text = (f"{subject}: "
                f"{now}. Even with nothing running, the largest {largest} {holds} "
                f"({fit.nodes} usable node(s) in the flavor"
                + (f", less what {fit.outside} Pod(s) outside Kueue's TAS request there" if fit.outside else "")
                + ")")
        if fit.resident_slots:
            text += (f"; the nodes' allocatable pods bind there, {fit.resident_slots} Pod slot(s) taken by "
                     "DaemonSet/static Pods (Kueue counts a slot per Pod, kueue#5998)")
    left_out = []
    if fit.by_pods:
        left_out.append(f"{len(fit.by_pods)} outside the Pods' own nodeSelector/required node affinity "
                        f"({', '.join(sorted(fit.by_pods)[:3])})")
    if fit.cordoned:
        left_out.append(f"{len(fit.cordoned)} cordoned ({', '.join(sorted(fit.cordoned)[:3])})")
    for taint, nodes in sorted(fit.tainted.items()):
        left_out.append(f"{len(nodes)} tainted {taint} ({', '.join(sorted(nodes)[:3])})")
    if left_out:
        text += "; not counted: " + ", ".join(left_out)
    return text + "."


@dataclass(frozen=True)
class Held:
    """The pod set fits the flavor's nodes but for Pods outside Kueue's TAS: named, and who acts."""

    text: str
    action: ActionBy
    hints: list[str]


def _pod_text(ctx: Context, p: OutsidePod, shown: str) -> str:
    what = f"Pod {p.ref} ({shown})"
    if p.deleted is None:
        return what
    finalizers = f"; finalizer {', '.join(p.finalizers[:2])}" if p.finalizers else ""
    return (f"{what}, terminating since {when_text(p.deleted)} ({format_duration(ctx.now - p.deleted, True)}), "
            f"still {p.phase or 'not terminal'}{finalizers}")


def held(ctx: Context, fit: TopologyFit) -> Held | None:
    """Pods outside Kueue's TAS (not Workloads Kueue could wait for or preempt) keep the pod set off the flavor's
    nodes even as if empty. Kueue counts such a Pod until its phase is Succeeded or Failed or it is gone, and
    requeues within ~10s of that (kueue#8653, fixed in v0.19.2): a terminating one is waited for, until it has
    lasted `STALL_AFTER` past its grace period (then a kubelet or a finalizer holds it: the cluster admin's call)."""
    if not fit.held_back:
        return None
    # the resource that binds on those nodes (the fewest pods' worth left), then the one the held Pods take most of;
    # a slot of allocatable pods each counts too (Kueue's non-TAS usage: one pod per Pod, kueue#5998)
    need = {**{r: v for r, v in fit.per_pod.items() if v > 0 and r != "pods"}, "pods": Decimal(1)}
    outside = outside_pods(ctx)

    def left(r: str) -> int:
        return sum(max(int(((parse(_allocatable(n).get(r)) or Decimal(0))
                            - _used(outside.get(name(n) or "", []), _counted).get(r, Decimal(0))) // need[r]), 0)
                   for n in fit.held_nodes if parse(_allocatable(n).get(r)) is not None)

    def share(r: str) -> Decimal:
        return sum((_used([p], _counted).get(r, Decimal(0)) for p in fit.held), Decimal(0)) / need[r]

    res = min((r for r in need if r != "pods" or any(parse(_allocatable(n).get(r)) is not None
                                                      for n in fit.held_nodes)),
              key=lambda r: (left(r), -share(r)), default=None)
    if res is None:
        return None
    alloc = sum((parse(_allocatable(n).get(res)) or Decimal(0) for n in fit.held_nodes), Decimal(0))
    taken = sum((_used([p], _counted).get(res, Decimal(0)) for p in fit.held), Decimal(0))
    first = fit.held_nodes[0]
    if len(fit.held_nodes) == 1:
        where = f"Node {name(first)} has"
    elif fit.level:
        where = (f"The {len(fit.held_nodes)} nodes of {fit.level}="
                 f"{s(m(m(first.get('metadata')).get('labels')).get(fit.level)) or '?'} have")
    else:
        where = f"The {len(fit.held_nodes)} usable nodes have"
    slots = res == "pods"
    pods = "; ".join(_pod_text(ctx, p, "1 slot" if slots else
                               f"{quota.fmt(res, p.requests.get(res, Decimal(0)))} {res}") for p in fit.held[:3]) \
        + (f"; and {len(fit.held) - 3} more" if len(fit.held) > 3 else "")
    have, by = ("Pod slots (allocatable pods)", "taken") if slots else (f"{res} allocatable", "requested")
    text = f" {where} {quota.fmt(res, alloc)} {have}, {quota.fmt(res, taken)} {by} by {pods}."
    hints = [f"kubectl -n {p.namespace} describe pod {p.name}" for p in fit.held[:2]]
    # the terminating ones alone keep it off: waited for, until they have lasted
    terminating = [p for p in fit.held if p.deleted is not None] if fit.largest_unless_terminating >= fit.count else []
    stuck = [p for p in terminating if ctx.after(p.grace_ends, STALL_AFTER)]
    counts = " Kueue counts a Pod until its phase is Succeeded or Failed or it is gone"
    if stuck:
        p = stuck[0]
        if p.finalizers:
            hints.append(f"kubectl -n {p.namespace} patch pod {p.name} --type=merge -p "
                         "'{\"metadata\":{\"finalizers\":null}}'")
        hints.append(f"kubectl -n {p.namespace} delete pod {p.name} --grace-period=0 --force")
        grace = ("" if p.grace_ends == p.deleted else
                 f" (its grace period ended {format_duration(ctx.now - (p.grace_ends or ctx.now), True)} ago)")
        text += (f"{counts}{grace}. Cluster admin: find why it does not end (the kubelet on {p.node}"
                 + (f"; the owner of finalizer {p.finalizers[0]}" if p.finalizers else "")
                 + ") or end it (" + ("remove the finalizer; " if p.finalizers else "")
                 + "force-delete it if it stays); Kueue requeues within ~10s (kueue#8653).")
        return Held(text, ActionBy.CLUSTER_ADMIN, hints)
    if terminating:
        text += f"{counts}, then requeues the Workload within ~10s (kueue#8653): nothing to do unless it lasts."
        return Held(text, ActionBy.NOBODY, hints)
    text += (" Kueue's TAS does not preempt them: it fits once they end (Kueue then requeues within ~10s, kueue#8653). "
             "If they run on, the cluster admin keeps such Pods off the flavor's nodes (a taint; or a flavor of "
             "Kueue's that shares them) or adds nodes; or the owner relaxes the topology request.")
    return Held(text, ActionBy.CLUSTER_ADMIN, hints)
