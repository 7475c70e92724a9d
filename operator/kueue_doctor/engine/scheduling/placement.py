"""Why kube-scheduler cannot place the admitted Pods: the constraint that blocks, named, counted, structured.

kube-scheduler says how many nodes each filter rejected (`engine/pods/scheduler.py`); the Nodes, when in
the input, say how many pass each of the Pod's constraints in turn (`funnel`): its node selector and
required affinity, then its tolerations, then cordons, then allocatable, then free capacity. Together they
give the cause, `status.blocker` and `status.nodeMatches`, which the remedies quote. The node counts are
exact (the Node objects); free capacity is an estimate (Pods kueue-doctor does not see use the nodes too).
A taint put on the Pods' nodes after they were placed (a maintenance, a drain) is told apart from one they never
tolerated, and so is a Pod Kueue's topology-aware scheduling pinned to one node (kueue#14917), or to a node its bound
volume cannot be used on (kueue#14708).

Neighbours: `workload_pods.py` (the rule and the Pod summary), `nodes.py` (the flavor's nodes, for the
message), `engine/remedies.py` (the way out, from the `Placement` computed here).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from ...kube.kueue_names import PODSET_LABEL
from ...kube.objects import (
    as_time,
    conditions,
    i,
    is_true,
    labels,
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
from ...vocabulary import ActionBy, Cause
from .. import pods as podlib
from .. import quota
from ..context import Context
from ..pods.scheduler import (
    CSI_DRIVER_MISSING,
    DEVICE_CLASS_MISSING,
    DEVICE_TEXTS,
    EXISTING_ANTI_AFFINITY,
    INTER_POD_TEXTS,
    MAX_VOLUME_COUNT,
    NODE_PORTS_TAKEN,
    POD_AFFINITY_UNMET,
    PREEMPTION_WAITING,
    PREFILTER_VOLUME_CONFLICT,
    RWOP_IN_USE,
    SPREAD_LABEL_MISSING,
    SPREAD_UNMET,
    Constraint,
    claim_of,
    constraint_of,
    decisive,
    named_taint,
    resource_of,
)
from .followers import EXCLUSIVE_KEY
from .owners import admitted_since, assigned_flavors, expected_by_pod_set

Node = Mapping[str, Any]
_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")
_NODE_STATE_TAINT = "node.kubernetes.io/"  # not-ready, unreachable, unschedulable, *-pressure: node health


# ---- the Pod's constraints, evaluated on one node, as kube-scheduler does -------------------------------------


def taint_text(t: Mapping[str, Any]) -> str:
    value = s(t.get("value"))
    return f"{s(t.get('key')) or ''}{'=' + value if value else ''}:{s(t.get('effect')) or ''}"


def taint_of(text: str) -> dict[str, str]:
    """`taint_text` read back: key[=value]:effect."""
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    return {"key": key, "value": value, "effect": effect}


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint: effect (empty = all), key (empty with Exists = all), value."""
    for tol in tolerations:
        effect = s(tol.get("effect"))
        if effect and effect != taint.get("effect"):
            continue
        key, op = s(tol.get("key")) or "", s(tol.get("operator")) or "Equal"
        if key and key != taint.get("key"):
            continue
        if op == "Exists" or (key and (s(tol.get("value")) or "") == (s(taint.get("value")) or "")):
            return True
    return False


@dataclass(frozen=True)
class PodConstraints:
    """What one Pod asks of a node."""

    node_selector: Mapping[str, Any]
    terms: tuple[Mapping[str, Any], ...]  # required node affinity: OR of terms
    tolerations: tuple[Mapping[str, Any], ...]
    requests: Mapping[str, Decimal]  # per Pod, "pods": 1 included

    @classmethod
    def of(cls, pod: Mapping[str, Any], flavor_labels: Mapping[str, Any]) -> PodConstraints:
        """The Pod's constraints; the flavor's nodeLabels count as part of its selector (Kueue injects them at
        start, so only Pods created before that lack them)."""
        sp = spec(pod)
        required = m(m(m(sp.get("affinity")).get("nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution"))
        requests = dict(quota.pod_requests(sp))
        requests["pods"] = Decimal(1)
        # maps of strings on any apiserver: a value of another type (a hand edit) selects nothing readable
        selector = {k: v for k, v in {**flavor_labels, **m(sp.get("nodeSelector"))}.items() if type(v) is str}
        return cls(selector, tuple(m(t) for t in lst(required.get("nodeSelectorTerms"))),
                   tuple(m(t) for t in lst(sp.get("tolerations"))), requests)

    def selector_text(self) -> str:
        parts = [f"{k}={v}" for k, v in self.node_selector.items()]
        for term in self.terms[:1]:  # the first term: enough to name it
            for e in lst(term.get("matchExpressions"))[:3]:
                e = m(e)
                values = ",".join(str(v) for v in lst(e.get("values")))
                op = s(e.get("operator")) or ""
                parts.append(f"{s(e.get('key'))} {op}" + (f" ({values})" if values else ""))
        if len(self.terms) > 1:
            parts.append(f"or {len(self.terms) - 1} more affinity term(s)")
        return ",".join(parts)

    def selects(self, node: Node) -> bool:
        labels = m(m(node.get("metadata")).get("labels"))
        if any(str(labels.get(k)) != str(v) if k in labels else True for k, v in self.node_selector.items()):
            return False
        return not self.terms or any(node_term_matches(t, node) for t in self.terms)

    def untolerated(self, node: Node) -> list[str]:
        return [taint_text(m(t)) for t in lst(spec(node).get("taints"))
                if m(t).get("effect") in _SCHEDULE_EFFECTS and not tolerates(self.tolerations, m(t))]


# ---- the funnel -----------------------------------------------------------------------------------------------


@dataclass
class Funnel:
    """The nodes that pass each of the Pod's constraints in turn."""

    total: int
    selected: list[Node]
    tolerated: list[Node]
    schedulable: list[Node]
    allocatable: list[Node]
    free: list[Node]
    untolerated: list[str]  # taints of the selected nodes the Pod does not tolerate, most common first
    largest: dict[str, tuple[Decimal, str]] = field(default_factory=dict)  # resource -> most allocatable, node
    most_free: dict[str, tuple[Decimal, str]] = field(default_factory=dict)  # resource -> most free, node
    steps: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        """"12 nodes; 3 carry pool=spot; 0 of those tolerate gpu=true:NoSchedule"."""
        return "; ".join(_step_text(st, n == 0) for n, st in enumerate(self.steps))


def _step_text(step: Mapping[str, Any], first: bool) -> str:
    n, value, kind = step["nodes"], step.get("value") or "", step["constraint"]
    if first:
        return f"{n} node{'s' if n != 1 else ''}"
    text = {"NodeSelector": f"{n} carry {value}", "Taints": f"{n} of those tolerate {value}",
            "Schedulable": f"{n} of those are not cordoned",
            "Allocatable": f"{n} of those can allocate {value}",
            "Free": f"{n} of those have {value} free (estimate)"}
    return text.get(kind, f"{n} pass {kind}")


@dataclass
class _Usage:
    """Requests of the Pods in the input bound to each node, for one clock value (one pass)."""

    now: Any = None
    by_node: dict[str, dict[str, Decimal]] = field(default_factory=dict)


NODE_USAGE: Derived[_Usage] = Derived("requests of the known Pods per node", lambda _: _Usage())


def _used_on(ctx: Context, node_name: str) -> dict[str, Decimal]:
    usage = ctx.state.derived(NODE_USAGE)
    if usage.now != ctx.now:  # Pods change without rebuilding the index: recomputed once per pass
        usage.now, usage.by_node = ctx.now, {}
        for node, phase, pod_spec in ctx.state.bound_pods():
            if phase in ("Succeeded", "Failed"):
                continue
            used = usage.by_node.setdefault(node, {"pods": Decimal(0)})
            for r, v in quota.pod_requests(pod_spec).items():
                used[r] = used.get(r, Decimal(0)) + v
            used["pods"] += 1
    return usage.by_node.get(node_name, {"pods": Decimal(0)})


def _resource_order(resource: str) -> tuple[int, str]:
    return {"cpu": 0, "memory": 1}.get(resource, 2), resource


def _fmt(resource: str, value: Decimal) -> str:
    return quota.fmt(resource, value) or str(value)


@dataclass
class _Funnels:
    """Funnels by Pod shape, for one Node version and clock: the Pods of a Job (and most Jobs of a queue) share
    their selector, tolerations and requests, so one walk over the Nodes serves them all. The steps before
    the requests (selector, taints, cordons) are kept apart too: shapes of different requests share them."""

    version: Any = None
    nodes: list[Node] = field(default_factory=list)
    by_shape: dict[tuple[str, str], Funnel] = field(default_factory=dict)
    by_filter: dict[str, _Filtered] = field(default_factory=dict)
    allocatable: dict[str, dict[str, Decimal | None]] = field(default_factory=dict)  # node name -> parsed


@dataclass(frozen=True)
class _Filtered:
    """The nodes that pass a Pod's selector and affinity, its tolerations, and no cordon; the taints it lacks."""

    selected: list[Node]
    tolerated: list[Node]
    schedulable: list[Node]
    untolerated: list[str]  # most common first


FUNNELS: Derived[_Funnels] = Derived("node funnel per Pod shape", lambda _: _Funnels())


def funnel(ctx: Context, pc: PodConstraints) -> Funnel | None:
    """The node funnel for one Pod's constraints; None without Nodes in the input."""
    if not ctx.state.knows("Node") or not ctx.state.nodes:
        return None
    memo = ctx.state.derived(FUNNELS)
    version = (ctx.state.nodes_version, len(ctx.state.nodes), ctx.now)
    if memo.version != version:
        memo.version, memo.by_shape, memo.by_filter, memo.allocatable = version, {}, {}, {}
        memo.nodes = sorted(ctx.state.nodes.values(), key=lambda n: name(n) or "")
    fkey = repr((sorted(pc.node_selector.items()), pc.terms, pc.tolerations))
    shape = (fkey, repr(sorted(pc.requests.items())))
    found = memo.by_shape.get(shape)
    if found is None:
        filtered = memo.by_filter.get(fkey)
        if filtered is None:
            filtered = memo.by_filter[fkey] = _filter(pc, memo.nodes)
        found = memo.by_shape[shape] = _funnel(ctx, pc, memo, filtered)
    return found


def _filter(pc: PodConstraints, nodes: list[Node]) -> _Filtered:
    selected = [n for n in nodes if pc.selects(n)]
    counts: dict[str, int] = {}
    tolerated = []
    for n in selected:
        taints = pc.untolerated(n) if lst(spec(n).get("taints")) else []
        for t in taints:
            counts[t] = counts.get(t, 0) + 1
        if not taints:
            tolerated.append(n)
    schedulable = [n for n in tolerated if not spec(n).get("unschedulable")]
    return _Filtered(selected, tolerated, schedulable, sorted(counts, key=lambda t: (-counts[t], t)))


def _funnel(ctx: Context, pc: PodConstraints, memo: _Funnels, filtered: _Filtered) -> Funnel:
    nodes, selected, tolerated, schedulable = memo.nodes, filtered.selected, filtered.tolerated, filtered.schedulable
    wanted = {r: v for r, v in pc.requests.items() if v > 0}
    largest: dict[str, tuple[Decimal, str]] = {}
    most_free: dict[str, tuple[Decimal, str]] = {}
    allocatable, free = [], []
    for n in schedulable:
        node_name = name(n) or ""
        alloc = memo.allocatable.get(node_name)
        if alloc is None:
            alloc = memo.allocatable[node_name] = {r: parse(v) for r, v in m(status(n).get("allocatable")).items()}
        used = _used_on(ctx, node_name)
        fits_alloc = fits_free = True
        for r, need in wanted.items():
            have = alloc.get(r) or Decimal(0)
            left = have - used.get(r, Decimal(0))
            if have > largest.get(r, (Decimal(-1), ""))[0]:
                largest[r] = (have, node_name)
            if left > most_free.get(r, (Decimal(-1), ""))[0]:
                most_free[r] = (left, node_name)
            fits_alloc = fits_alloc and have >= need
            fits_free = fits_free and left >= need
        if fits_alloc:
            allocatable.append(n)
            if fits_free:
                free.append(n)
    f = Funnel(len(nodes), selected, tolerated, schedulable, allocatable, free, list(filtered.untolerated), largest,
               most_free)
    f.steps.append({"constraint": "Nodes", "nodes": len(nodes), "exact": True})
    if pc.node_selector or pc.terms:
        f.steps.append({"constraint": "NodeSelector", "value": pc.selector_text(), "nodes": len(selected),
                        "exact": True})
    if len(tolerated) != len(selected):
        f.steps.append({"constraint": "Taints", "value": ", ".join(f.untolerated[:3]), "nodes": len(tolerated),
                        "exact": True})
    if len(schedulable) != len(tolerated):
        f.steps.append({"constraint": "Schedulable", "nodes": len(schedulable), "exact": True})
    shown = ", ".join(f"{_fmt(r, wanted[r])} {r}" for r in sorted(wanted, key=_resource_order) if r != "pods") \
        or "1 pod"
    if schedulable:  # past a step no node passes, the later ones say nothing
        f.steps.append({"constraint": "Allocatable", "value": shown, "nodes": len(allocatable), "exact": True})
    if allocatable:
        f.steps.append({"constraint": "Free", "value": shown, "nodes": len(free), "exact": False})
    return f


# ---- the verdict ---------------------------------------------------------------------------------------------


@dataclass
class Placement:
    """What blocks the representative unschedulable Pod, and why, with the numbers."""

    cause: Cause
    action: ActionBy
    blocker: dict[str, Any]
    why: str  # one clause for the message
    pod: Mapping[str, Any] | None
    constraints: PodConstraints | None
    funnel: Funnel | None
    flavor: str | None
    flavor_steers: bool  # the flavor's nodeLabels decide where the Pods go
    resource: str | None = None
    short: list[str] = field(default_factory=list)  # untolerated taints, or claim names
    lost: bool = False  # the pod set Kueue admitted tolerates the taints the Pods do not (lost on the way)
    late: list[str] = field(default_factory=list)  # untolerated taints put on after the Pods were placed
    tainted: list[str] = field(default_factory=list)  # the usable nodes carrying them (late taints)
    pinned: str | None = None  # the node Kueue's topology-aware scheduling pinned the Pods to
    # the verdict names what rejects the nodes beyond labels, taints and capacity (the Pods' own placement rule:
    # hostPort, topology spread, pod affinity; others' anti-affinity, volume limits, a missing DeviceClass): no
    # "compare the flavor with real nodes" hint
    own_rule: bool = False
    checks: dict[str, str] = field(default_factory=dict)  # selector key -> the check whose podSetUpdates add it
    binding: str | None = None  # the node kube-scheduler chose and binds the Pods to (nominatedNodeName, no preemption)
    # kube-scheduler says Insufficient where the free estimate (the Pods in the input only) finds room: Pods the input
    # lacks hold it; the message and the node funnel's line both say so
    unseen: bool = False
    conflict: LabelConflict | None = None  # the assigned flavors disagree on a node label the Pods carry (kueue#14409)


def _pod_set_of(pod: Mapping[str, Any] | None) -> str | None:
    """The pod set Kueue labelled the Pod with (kueue.x-k8s.io/podset)."""
    return s(labels(pod or {}).get(PODSET_LABEL))


def _flavor_labels(ctx: Context, flavor: str | None) -> dict[str, Any]:
    rf = ctx.state.flavors.get(flavor or "")
    return dict(m(spec(rf).get("nodeLabels"))) if rf else {}


@dataclass(frozen=True)
class LabelConflict:
    """Two ResourceFlavors assigned to one pod set that set the same node-label key to different values: Kueue
    v0.19 copies every assigned flavor's nodeLabels into the Pods' nodeSelector, last writer wins, in Go map order
    (pkg/podset/podset.go FromAssignment, kueue#14409), so the Pods carry one flavor's value and never reach the
    other flavor's nodes."""

    key: str
    pod_set: str
    values: dict[str, str]  # flavor -> its value for the key, in assignment order
    resources: dict[str, list[str]]  # flavor -> the pod set's resources assigned to it
    got: str | None  # the value the Pods carry (None: not one of the flavors', or no Pod read)

    @property
    def winner(self) -> str | None:
        return next((f for f, v in self.values.items() if v == self.got), None) if self.got is not None else None

    def text(self) -> str:
        """"ResourceFlavors cpu-pool (cpu) and gpu-a100 (nvidia.com/gpu) of pod set main set node label pool to cpu
        and gpu; ..."."""
        flavors = " and ".join(f"{f} ({', '.join(self.resources.get(f, [])) or '?'})" for f in self.values)
        return (f"ResourceFlavors {flavors} of pod set {self.pod_set} set node label {self.key} to "
                f"{' and '.join(self.values.values())}; Kueue merges all into the Pods' nodeSelector and one value "
                "wins at random (kueue#14409)")

    def fix(self, running: bool = False) -> str:
        return ("Cluster admin (the ClusterQueue's flavors): give them non-conflicting nodeLabels (a key of their own, "
                f"or one value for {self.key})"
                + (" before the next start" if running else
                   ", then evict the Workload (spec.active false, then true): the Pods keep the selector Kueue "
                   "injected at start"))


def conflict_note(ctx: Context) -> str:
    """A running Workload whose Pods carry one assigned flavor's value of a node label another assigned flavor sets
    otherwise (kueue#14409): they run on the first flavor's nodes while Kueue charges the other's resources to the
    other flavor ("" when none)."""
    pod = next((p for p in ctx.pods if s(spec(p).get("nodeName"))), None)
    if pod is None:
        return ""
    conflict = flavor_label_conflict(ctx, pod, PodConstraints.of(pod, {}))
    if conflict is None or conflict.got is None or conflict.key in _template_selector(ctx, conflict):
        return ""
    others = [f for f, v in conflict.values.items() if v != conflict.got]
    charged = " and ".join(f"the {', '.join(conflict.resources.get(f, [])) or '?'} Kueue charges to {f}"
                           for f in others)
    return (f" But {conflict.text()}: the Pods got {conflict.key}={conflict.got} ({conflict.winner}'s), so {charged} "
            f"is used on {conflict.winner}'s nodes, and at a next start the Pods may get the other value and stay "
            f"pending. {conflict.fix(running=True)}.")


def _template_selector(ctx: Context, conflict: LabelConflict) -> Mapping[str, Any]:
    """The node selector of the Workload's pod template for the conflict's pod set (what the owner asked)."""
    for ps in lst(spec(ctx.wl).get("podSets")):
        if s(m(ps).get("name")) == conflict.pod_set:
            return m(m(m(m(ps).get("template")).get("spec")).get("nodeSelector"))
    return {}


def flavor_label_conflict(ctx: Context, pod: Mapping[str, Any] | None, pc: PodConstraints | None
                          ) -> LabelConflict | None:
    """The first node-label key the ResourceFlavors assigned to the Pod's pod set disagree on, with the value the
    Pod carries; None without such a conflict (or without the flavors in the input). A key the Workload's own pod
    template selects is never one: Kueue then assigns only flavors whose label matches it."""
    podset = _pod_set_of(pod)
    assignments = [m(a) for a in lst(m(ctx.status.get("admission")).get("podSetAssignments"))]
    if podset is None and len(assignments) != 1:
        return None
    for psa in assignments:
        ps_name = s(psa.get("name")) or ""
        if podset is not None and ps_name != podset:
            continue
        resources: dict[str, list[str]] = {}
        for res, flavor in m(psa.get("flavors")).items():
            if isinstance(flavor, str):
                resources.setdefault(flavor, []).append(str(res))
        by_key: dict[str, dict[str, str]] = {}
        for flavor in resources:
            for k, v in _flavor_labels(ctx, flavor).items():
                if isinstance(v, str):
                    by_key.setdefault(str(k), {})[flavor] = v
        found = []
        for key, values in by_key.items():
            if len(set(values.values())) < 2:
                continue
            got = pc.node_selector.get(key) if pc is not None else None
            found.append(LabelConflict(key, ps_name, values, {f: resources[f] for f in values},
                                       got if isinstance(got, str) and got in values.values() else None))
        if found:  # a key the Pods carry one flavor's value of first: that one decides where they go
            return next((c for c in found if c.got is not None), found[0])
    return None


def _injected(ctx: Context, pc: PodConstraints, checks: Mapping[str, str]) -> dict[str, Any]:
    """Without the ResourceFlavor in the input: the Pods' selector keys their Workload's pod templates lack,
    which Kueue added at admission (the flavor's nodeLabels; a check's podSetUpdates are `checks`), not the owner."""
    template: dict[str, Any] = {}
    for ps in lst(spec(ctx.wl).get("podSets")):
        template.update(m(m(m(m(ps).get("template")).get("spec")).get("nodeSelector")))
    if not lst(spec(ctx.wl).get("podSets")):
        return {}
    return {k: v for k, v in pc.node_selector.items() if k not in template and k not in checks}


def _check_selectors(ctx: Context, pod: Mapping[str, Any] | None, pc: PodConstraints | None) -> dict[str, str]:
    """The Pods' selector keys an AdmissionCheck set (status.admissionChecks[].podSetUpdates[].nodeSelector), by
    key, with the check's name: Kueue merges them into the owner's Pod template at every start and takes them out
    again at every stop, so neither the owner nor the flavor wrote them."""
    if pc is None:
        return {}
    podset = _pod_set_of(pod)
    single = len(lst(spec(ctx.wl).get("podSets"))) <= 1
    out: dict[str, str] = {}
    for check in lst(ctx.status.get("admissionChecks")):
        for update in lst(m(check).get("podSetUpdates")):
            if (s(m(update).get("name")) != podset) if podset else not single:
                continue
            for k, v in m(m(update).get("nodeSelector")).items():
                if k in pc.node_selector and str(pc.node_selector[k]) == str(v):
                    out.setdefault(k, s(m(check).get("name")) or "?")
    return out


def _check_blocks(ctx: Context, pc: PodConstraints | None, checks: Mapping[str, str], known: bool
                  ) -> tuple[dict[str, str], list[Node]]:
    """The checks' selector keys that keep the Pods off every node the rest of their selector allows (those
    nodes too); without Nodes in the input, all of them. Empty when the rest selects no node already."""
    if not checks or pc is None:
        return {}, []
    if not known:
        return dict(checks), []
    rest = PodConstraints({k: v for k, v in pc.node_selector.items() if k not in checks}, pc.terms,
                          pc.tolerations, pc.requests)
    candidates = [n for n in ctx.state.nodes.values() if rest.selects(n)]
    if not candidates or any(pc.selects(n) for n in candidates):
        return {}, candidates
    alone = {k: c for k, c in checks.items() if not any(
        str(m(m(n.get("metadata")).get("labels")).get(k, "\0")) == str(pc.node_selector[k]) for n in candidates)}
    return alone or dict(checks), candidates


def _check_why(ctx: Context, checks: Mapping[str, str], selector: Mapping[str, Any], nodes: Sequence[Node]) -> str:
    """"k=v comes from AdmissionCheck x's podSetUpdates (controller, state 'message'); the nodes carry k=w"."""
    parts = []
    for check in sorted(set(checks.values())):
        keys = [k for k, c in checks.items() if c == check]
        state = next((m(c) for c in lst(ctx.status.get("admissionChecks")) if s(m(c).get("name")) == check), {})
        controller = s(spec(ctx.state.admission_checks.get(check) or {}).get("controllerName"))
        said = s(state.get("message"))
        text = (", ".join(f"{k}={selector[k]}" for k in keys) + f" comes from AdmissionCheck {check}'s podSetUpdates ("
                + (f"controller {controller}; " if controller else "")
                + f"{s(state.get('state')) or '?'}" + (f" '{said[:80]}'" if said else "") + ")")
        for k in keys:
            carried = sorted({str(m(m(n.get("metadata")).get("labels"))[k]) for n in nodes
                              if k in m(m(n.get("metadata")).get("labels"))})
            text += (f" and the nodes carry {k}={','.join(carried[:3])}" if carried else
                     f" and no node carries {k}" if nodes else "")
        parts.append(text)
    return "; ".join(parts)


# where a toleration of the admitted pod set is known to go missing on its way to the Pods
_LOST_TOLERATION = {
    "TrainJob": " (Kueue v0.19 writes the flavor's tolerations into the TrainJob's runtimePatches, and Trainer "
                "replaces the runtime's tolerations with them: kueue#15161, fixed in Kueue v0.20; until then "
                "add the runtime's toleration to the ResourceFlavor)",
}


def _admitted_tolerations(ctx: Context, pod: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The tolerations of the pod set (of the Workload) the Pod belongs to: what Kueue admitted."""
    podset = _pod_set_of(pod)
    for ps in lst(spec(ctx.wl).get("podSets")):
        if podset and s(m(ps).get("name")) == podset:
            return [m(t) for t in lst(m(m(m(ps).get("template")).get("spec")).get("tolerations"))]
    return []


# the PersistentVolume controller's Warnings on a claim it cannot bind (pkg/controller/volume/persistentvolume)
_CLASS_NOT_FOUND = re.compile(r'^storageclass\.storage\.k8s\.io "([^"]+)" not found$')
_NO_CLASS = "no persistent volumes available for this claim and no storage class is set"


def claim_said(ctx: Context, claims: Sequence[str]) -> str:
    """": PersistentVolumeClaim data says ProvisioningFailed: ...": the newest Warning about the first claim that has
    one (the PersistentVolume controller's or a provisioner's, read from the Events), in the words of who fixes
    it; "" when none is in the input."""
    for claim in claims[:4]:
        newest = podlib.newest_event(ctx.state.events_about("PersistentVolumeClaim", ctx.ns, claim))
        if newest is None:
            continue
        reason, said = s(newest.get("reason")) or "Warning", podlib.event_message(newest)
        head = (f": PersistentVolumeClaim {claim} says {reason} ({when_text(podlib.event_time(newest))}, "
                f"{podlib.event_count(newest)}x): {said[:300]}")
        missing = _CLASS_NOT_FOUND.match(said)
        if missing:
            return (head + f". StorageClass {missing.group(1)} does not exist: the owner fixes the claim's "
                    "storageClassName (kubectl get storageclass lists those that do), or the cluster admin creates it")
        if said == _NO_CLASS:
            return (head + ". The claim names no StorageClass and the cluster has no default one: the owner sets "
                    "storageClassName, or the cluster admin marks a default StorageClass or creates a matching "
                    "PersistentVolume")
        return head + ": the cluster admin looks at its StorageClass and provisioner"
    return ""


def _claims(pod: Mapping[str, Any] | None) -> list[str]:
    out = []
    for v in lst(spec(pod or {}).get("volumes")):
        claim = s(m(m(v).get("persistentVolumeClaim")).get("claimName"))
        if claim is None and m(v).get("ephemeral") is not None:
            claim = f"{name(pod or {}) or ''}-{s(m(v).get('name')) or ''}"
        if claim:
            out.append(claim)
    return out


@dataclass(frozen=True)
class PodClaim:
    """One entry of a Pod's spec.resourceClaims (DRA): the ResourceClaim it names, or the template the resourceclaim
    controller makes its claim from (status.resourceClaimStatuses then names the claim made)."""

    name: str  # the entry's name in the Pod
    claim: str | None  # resourceClaimName: a claim the owner creates
    template: str | None  # resourceClaimTemplateName: one claim per Pod, made by the resourceclaim controller
    made: bool  # status.resourceClaimStatuses has the entry: the controller made (or needs not make) its claim
    generated: str | None  # the claim made from the template, as status.resourceClaimStatuses names it

    @property
    def label(self) -> str:
        """The claim's name as a message gives it: the claim, the one made from the template, or the template."""
        return self.claim or self.generated or self.template or self.name or "?"


def resource_claims(pod: Mapping[str, Any] | None) -> list[PodClaim]:
    """The Pod's DRA claims (spec.resourceClaims), with what status.resourceClaimStatuses says of each."""
    made = {s(m(x).get("name")) or "": s(m(x).get("resourceClaimName"))
            for x in lst(status(pod or {}).get("resourceClaimStatuses"))}
    out = []
    for c in lst(spec(pod or {}).get("resourceClaims")):
        c = m(c)
        entry = s(c.get("name")) or ""
        out.append(PodClaim(entry, s(c.get("resourceClaimName")), s(c.get("resourceClaimTemplateName")),
                            entry in made, made.get(entry)))
    return out


def placement(ctx: Context, blocker: podlib.PodBlocker) -> Placement:
    """The cause behind one Unschedulable group of Pods."""
    pod = next((p for p in ctx.pods if name(p) == blocker.pod), None)
    flavors = assigned_flavors(ctx)
    flavor = flavors[0] if flavors else None
    pc = PodConstraints.of(pod, _flavor_labels(ctx, flavor)) if pod is not None else None
    nodes = funnel(ctx, pc) if pc is not None else None
    steers = bool(_flavor_labels(ctx, flavor))
    failure = blocker.failure
    base: dict[str, Any] = {"flavor": flavor, "podSet": _pod_set_of(pod)}
    if failure is not None:
        base["totalNodes"] = failure.total

    def make(cause: Cause, action: ActionBy, kind: str, why: str, **kw: Any) -> Placement:
        extra = {k: v for k, v in kw.items() if k in ("resource", "short", "lost", "late", "tainted", "pinned",
                                                       "checks", "own_rule", "binding", "unseen", "conflict")}
        fields = {k: v for k, v in kw.items() if k not in extra}
        found = {"kind": kind, **{k: v for k, v in {**base, **fields}.items() if v is not None}}
        return Placement(cause, action, found, why, pod, pc, nodes, flavor, steers, **extra)

    nominated = s(status(pod or {}).get("nominatedNodeName"))
    preemption = (failure.preemption or "") if failure is not None else ""
    waiting = any(w in preemption for w in PREEMPTION_WAITING)
    if nominated and not waiting and (blocker.reason in (podlib.BINDING, SCHEDULER_ERROR) or failure is None
                                      or failure.preemption is not None):
        return _binding(ctx, make, nominated, blocker, pod)
    if nominated or waiting:
        where = f"node {nominated}" if nominated else "its nominated node"
        return make(Cause.POD_PREEMPTION_IN_PROGRESS, ActionBy.NOBODY, "Preemption",
                    f"kube-scheduler preempted lower-priority Pods on {where} and waits for them to terminate",
                    name=nominated, source="Scheduler")
    if blocker.reason == SCHEDULER_ERROR:
        return _scheduler_error(ctx, make, blocker.message, pod)
    if failure is None or not failure.reasons:
        return make(Cause.FAILED_SCHEDULING, ActionBy.CLUSTER_ADMIN, "Scheduler", blocker.reason,
                    name=blocker.reason[:200])
    constraint, reasons = decisive(failure)
    if nodes is not None and constraint in (Constraint.TAINT, Constraint.NODE_SELECTOR):
        decided = constraint
        if not nodes.selected and (pc is not None and (pc.node_selector or pc.terms)):
            constraint = Constraint.NODE_SELECTOR
        elif not nodes.tolerated and nodes.selected:
            constraint = Constraint.TAINT
        if constraint != decided:  # the Nodes name another constraint: its own reasons, not the decided one's
            reasons = tuple(r for r in failure.reasons if constraint_of(r.text) == constraint)
    conflict = flavor_label_conflict(ctx, pod, pc) if constraint in (Constraint.NODE_SELECTOR, Constraint.RESOURCE) \
        else None
    lost = [r for f, v in conflict.values.items() if v != conflict.got for r in conflict.resources.get(f, [])] \
        if conflict is not None else []
    if conflict is not None and conflict.got is not None and conflict.key not in _template_selector(ctx, conflict) \
            and (constraint == Constraint.NODE_SELECTOR or any(resource_of(r.text) in lost for r in reasons)):
        # Kueue itself sent the Pods to one flavor's nodes only (kueue#14409): not the owner's selector; nor capacity
        # when what the nodes lack is a resource admitted in the other flavor
        others = [f"{f}'s ({conflict.key}={v})" for f, v in conflict.values.items() if v != conflict.got]
        selected = [r for r in failure.reasons if constraint_of(r.text) == Constraint.NODE_SELECTOR]
        return make(Cause.NODE_SELECTOR_MISMATCH, ActionBy.CLUSTER_ADMIN, "NodeSelector",
                    f"{conflict.text()}. The Pods got {conflict.key}={conflict.got} ({conflict.winner}'s), which "
                    f"keeps them off {' and '.join(others)} nodes, where their {', '.join(lost) or 'resources'} "
                    f"was admitted. {conflict.fix()}",
                    name=f"{conflict.key}={conflict.got}", nodes=_count(failure, Constraint.NODE_SELECTOR, selected,
                                                                        nodes),
                    source="Nodes" if nodes is not None else "Scheduler", flavor=conflict.winner, conflict=conflict)
    count = _count(failure, constraint, reasons, nodes)
    if constraint == Constraint.NODE_SELECTOR:
        gone = gone_pinned_node(ctx, pod)
        if gone is not None:  # Kueue's TAS chose the node, which is gone: not the owner's selector
            return make(Cause.NODE_SELECTOR_MISMATCH, ActionBy.CLUSTER_ADMIN, "NodeSelector", _gone_why(ctx, gone, pod),
                        name=f"{HOSTNAME}={gone}", nodes=count, source="Nodes", pinned=gone)
        selector = pc.selector_text() if pc is not None else ""
        checks = _check_selectors(ctx, pod, pc)
        flavor_sel = _injected(ctx, pc, checks) if flavor and flavor not in ctx.state.flavors and pc is not None \
            else _flavor_labels(ctx, flavor)
        # the Pods' own constraints beyond the flavor's nodeLabels and the checks' podSetUpdates (Kueue injects both)
        own = pc is not None and (bool(pc.terms) or any(
            k not in checks and (k not in flavor_sel or str(flavor_sel[k]) != str(v))
            for k, v in pc.node_selector.items()))
        blocking, candidates = _check_blocks(ctx, pc, checks, nodes is not None)
        if blocking and not own and pc is not None:  # a check's podSetUpdates select no node: its controller's call
            flavor_too = (f"; or ResourceFlavor {flavor}'s nodeLabels: the input has no Nodes to tell which"
                          if nodes is None and flavor_sel else "")
            return make(Cause.NODE_SELECTOR_MISMATCH, ActionBy.CLUSTER_ADMIN, "NodeSelector",
                        f"no node matches {selector}: {_check_why(ctx, blocking, pc.node_selector, candidates)}"
                        f"{flavor_too}. Kueue merges a check's podSetUpdates into the Pods at every start: not the "
                        "owner's to fix"
                        + (", the check's controller chose a value no node carries" if nodes is not None else ""),
                        name=selector or None, nodes=count, source="Nodes" if nodes is not None else "Scheduler",
                        checks=blocking)
        if nodes is None and flavor_sel and own:  # no Nodes in the input: either may select nothing
            action = ActionBy.WORKLOAD_OWNER
            whose = (f"ResourceFlavor {flavor}'s nodeLabels or the Pods' own node selector/affinity; the input has no "
                     "Nodes to tell which: `kubectl get nodes -l` with each")
        else:
            flavor_blind = bool(flavor_sel) and (nodes is None or not any(
                all(str(m(m(n.get("metadata")).get("labels")).get(k)) == str(v) for k, v in flavor_sel.items())
                for n in ctx.state.nodes.values()))
            action = ActionBy.CLUSTER_ADMIN if flavor_blind else ActionBy.WORKLOAD_OWNER
            whose = (f"ResourceFlavor {flavor}'s nodeLabels" if flavor_blind
                     else "the Pods' own node selector/affinity")
        return make(Cause.NODE_SELECTOR_MISMATCH, action, "NodeSelector",
                    f"no node matches {selector or 'the node selector'} ({whose})", name=selector or None,
                    nodes=count, source="Nodes" if nodes is not None else "Scheduler", checks=checks)
    if constraint == Constraint.TAINT:
        taints = list(nodes.untolerated) if nodes is not None and nodes.untolerated else [
            t for t in (named_taint(r.text) for r in reasons) if t]
        health = bool(taints) and all(t.startswith(_NODE_STATE_TAINT) for t in taints)
        action = ActionBy.CLUSTER_ADMIN if (health or steers) else ActionBy.WORKLOAD_OWNER
        named = ", ".join(taints[:3]) or "a taint (kube-scheduler 1.34+ does not name it; see the nodes)"
        admitted = _admitted_tolerations(ctx, pod)
        lost = [tt for tt in taints if tolerates(admitted, taint_of(tt))] if admitted else []
        if lost and not health:
            return make(Cause.UNTOLERATED_TAINT, ActionBy.CLUSTER_ADMIN, "Taint",
                        f"{count} node(s) carry {', '.join(lost[:3])}, which the Pods do not tolerate although the "
                        f"pod set Kueue admitted does (the Workload's template): the toleration was lost between "
                        "admission and the Pods" + _LOST_TOLERATION.get(s((ctx.owner or {}).get("kind")) or "", ""),
                        name=", ".join(lost[:3]), nodes=count,
                        source="Nodes" if nodes is not None and nodes.untolerated else "Scheduler", short=lost,
                        lost=True)
        pinned = tas_pinned_node(ctx, pod)
        late = _late_taints(ctx, nodes, taints, pinned) if not health else None
        if late is not None and pinned is not None and pinned in late.nodes:
            pinned_action, why = _pinned_why(ctx, pinned, late)
            return make(Cause.UNTOLERATED_TAINT, pinned_action, "Taint", why, name=", ".join(late.taints[:3]),
                        nodes=count,
                        source="Nodes" if nodes is not None and nodes.untolerated else "Scheduler", short=taints,
                        late=late.taints, tainted=[pinned], pinned=pinned)
        if late is not None:
            return make(Cause.UNTOLERATED_TAINT, ActionBy.CLUSTER_ADMIN, "Taint",
                        f"{count} node(s) carry {named}, which the Pods do not tolerate; "
                        + ("it" if late.taints == taints else ", ".join(late.taints[:3]))
                        + f" came after the Pods were placed ({late.how}): a maintenance or a drain, not a taint to "
                        "tolerate; the cluster admin removes it or adds nodes",
                        name=", ".join(taints[:3]) or None, nodes=count,
                        source="Nodes" if nodes is not None and nodes.untolerated else "Scheduler", short=taints,
                        late=late.taints, tainted=late.nodes)
        return make(Cause.UNTOLERATED_TAINT, action, "Taint",
                    f"{count} node(s) carry {named}, which the Pods do not tolerate"
                    + (" (set by Kubernetes for the node's state: cordoned, not ready, unreachable or under "
                       "pressure)" if health else ""),
                    name=", ".join(taints[:3]) or None, nodes=count,
                    source="Nodes" if nodes is not None and nodes.untolerated else "Scheduler", short=taints)
    if constraint == Constraint.RESOURCE:
        devices = [r for r in reasons if r.text in DEVICE_TEXTS]
        if devices and not any(resource_of(r.text) for r in reasons):
            return _devices(make, devices, pod)
        return _resources(ctx, make, reasons, pc, nodes)
    if constraint in (Constraint.VOLUME, Constraint.VOLUME_NODE_AFFINITY):
        claims = [c for c in (claim_of(r.text) for r in reasons) if c] or _claims(pod)
        text = reasons[0].text
        if constraint == Constraint.VOLUME_NODE_AFFINITY:
            return _volume_node_conflict(make, text, failure.prefilter, claims, count, tas_pinned_node(ctx, pod))
        storage = text.startswith("node(s)") or "unbound immediate" in text
        said = claim_said(ctx, claims) if storage else ""
        return make(Cause.VOLUME_NOT_BOUND, ActionBy.CLUSTER_ADMIN if storage else ActionBy.WORKLOAD_OWNER, "Volume",
                    f"{text} (claim {', '.join(claims) or '?'})"
                    + ((said or ": no PersistentVolume is bound or can be provisioned for it (StorageClass, "
                        "provisioner)") if storage else ": create the claim or fix its name in the Job"),
                    name=", ".join(claims) or None, nodes=count, short=claims)
    if constraint == Constraint.PORTS:
        return _host_ports(ctx, make, count, pod)
    spread = [r for r in reasons if r.text.startswith(SPREAD_UNMET)]
    if spread:
        return _spread(ctx, make, spread, failure, pod)
    texts = {r.text for r in reasons}
    if RWOP_IN_USE in texts:
        return _rwop(ctx, make, count, pod)
    if MAX_VOLUME_COUNT in texts or any(CSI_DRIVER_MISSING.match(x) for x in texts):
        return _volume_limits(make, reasons, count, pod)
    for r in reasons:
        missing = DEVICE_CLASS_MISSING.match(r.text)
        if missing:
            return _device_class(make, missing.group(1), missing.group(2), count, pod)
    why = failure.short()
    action = ActionBy.CLUSTER_ADMIN
    if constraint == Constraint.NODE_STATE:
        why = (f"{count} node(s) the Pods could use are cordoned (spec.unschedulable: a drain?) or in an unknown "
               f"state ({why}): uncordon them or add nodes")
    elif any(r.text in INTER_POD_TEXTS for r in reasons):
        return _inter_pod(ctx, make, reasons, failure, pod, nodes)
    return make(Cause.FAILED_SCHEDULING, action, "Scheduler", why, name=reasons[0].text[:200], nodes=count,
                own_rule=action == ActionBy.WORKLOAD_OWNER)


def _host_ports(ctx: Context, make: Callable[..., Placement], count: int | None,
                pod: Mapping[str, Any] | None) -> Placement:
    """A hostPort of the Pods is taken on every node their other constraints allow: one Pod per node and port, which
    Kueue's quota does not count. Held by the Workload's own Pods, it needs as many such nodes as Pods; held by others
    (a DaemonSet), by them. Either way the hostPort is the owner's choice to drop."""
    asked = {(i(m(p).get("hostPort")), s(m(p).get("protocol")) or "TCP")
             for c in (*lst(spec(pod or {}).get("containers")), *lst(spec(pod or {}).get("initContainers")))
             for p in lst(m(c).get("ports")) if i(m(p).get("hostPort"))}
    ports = ", ".join(f"{port}/{proto}" for port, proto in sorted(asked)) or "a hostPort"
    own = sorted((s(spec(p).get("nodeName")) or "", name(p) or "") for p in ctx.pods
                 if s(spec(p).get("nodeName")) and s(status(p).get("phase")) not in ("Succeeded", "Failed")
                 and any((i(m(x).get("hostPort")), s(m(x).get("protocol")) or "TCP") in asked
                         for c in lst(spec(p).get("containers")) for x in lst(m(c).get("ports"))))
    held = (f", held there by {len(own)} of this Workload's own Pods ("
            + ", ".join(f"{pod_name} on {node}" for node, pod_name in own[:3]) + ")" if own else
            ", held there by other Pods (a DaemonSet's, another Job's)")
    expected = sum(i(m(psa).get("count")) for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")))
    need = f"its {expected} Pods need {expected} such nodes" if expected > 1 else "it needs a node where it is free"
    return make(Cause.FAILED_SCHEDULING, ActionBy.WORKLOAD_OWNER, "Scheduler",
                f"{count} node(s) the Pods may use have hostPort {ports} in use{held}: a hostPort fits one Pod per "
                f"node, so {need}, which Kueue's quota does not count. The owner drops hostPort from the Job's Pod "
                "template (reach the Pods by their IP or a Service), or the cluster admin adds nodes",
                name=NODE_PORTS_TAKEN, nodes=count, own_rule=True)


def _spread(ctx: Context, make: Callable[..., Placement], reasons: Sequence[podlib.NodeFitReason],
            failure: podlib.SchedulingFailure, pod: Mapping[str, Any] | None) -> Placement:
    """The Pods' own DoNotSchedule topologySpreadConstraints reject the nodes: a topologyKey the nodes do not carry
    (the owner's key, often misspelt), or a skew one more Pod would exceed while the domains that may take it are
    full (what rejects those nodes is named too: more room there, or a looser constraint)."""
    hard = [m(c) for c in lst(spec(pod or {}).get("topologySpreadConstraints"))
            if (s(m(c).get("whenUnsatisfiable")) or "DoNotSchedule") == "DoNotSchedule"]
    count = sum(r.count for r in reasons)
    if any(r.text == SPREAD_LABEL_MISSING for r in reasons):
        keys = sorted({s(c.get("topologyKey")) or "?" for c in hard}) or ["?"]
        carried = ""
        if ctx.state.knows("Node") and ctx.state.nodes:
            having = [k for k in keys if any(k in m(m(n.get("metadata")).get("labels"))
                                             for n in ctx.state.nodes.values())]
            carried = (f" (no node in the cluster carries {', '.join(k for k in keys if k not in having)})"
                       if len(having) < len(keys) else "")
        return make(Cause.FAILED_SCHEDULING, ActionBy.WORKLOAD_OWNER, "Scheduler",
                    f"{count} node(s) lack the label {', '.join(keys)} that the Pods' topologySpreadConstraints "
                    f"(whenUnsatisfiable DoNotSchedule) spread over{carried}: kube-scheduler places such a Pod only on "
                    "nodes that carry its topologyKey. The owner fixes topologyKey in the Job's Pod template (a "
                    "misspelt key?) or makes the constraint ScheduleAnyway", name=SPREAD_LABEL_MISSING, nodes=count,
                    own_rule=True)
    rule_ = "; ".join(f"{s(c.get('topologyKey')) or '?'} maxSkew {i(c.get('maxSkew'), 1)}" for c in hard[:2])
    others = [r for r in failure.reasons if not r.text.startswith(SPREAD_UNMET)]
    short = (f"; the other {sum(r.count for r in others)} node(s), where a Pod would keep the spread, are rejected "
             "for " + ", ".join(f"{r.count} {r.text}" for r in others[:3]) if others else "")
    return make(Cause.FAILED_SCHEDULING, ActionBy.CLUSTER_ADMIN, "Scheduler",
                f"{count} node(s) would break the Pods' own topologySpreadConstraints ({rule_ or 'DoNotSchedule'}, "
                f"whenUnsatisfiable DoNotSchedule): one more Pod there exceeds the skew{short}. The cluster admin "
                "makes room in the domains with fewer of these Pods, or the owner loosens the constraint (a larger "
                "maxSkew, or ScheduleAnyway); Kueue's quota knows no topology domains",
                name=SPREAD_UNMET, nodes=count, own_rule=True)


# ---- pod affinity and anti-affinity (kube-scheduler's InterPodAffinity) ----------------------------------------

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def required_terms(pod: Mapping[str, Any] | None, kind: str) -> list[Mapping[str, Any]]:
    """The Pod's required podAffinity or podAntiAffinity terms (`kind`)."""
    return [m(t) for t in lst(m(m(spec(pod or {}).get("affinity")).get(kind)).get(_REQUIRED))]


def selector_text(selector: Mapping[str, Any]) -> str:
    """"app=trainer,tier In (a,b)": a label selector as kubectl writes it; "every Pod" for an empty one."""
    parts = [f"{k}={v}" for k, v in m(selector.get("matchLabels")).items()]
    for e in lst(selector.get("matchExpressions"))[:3]:
        e = m(e)
        values = ",".join(str(v) for v in lst(e.get("values")))
        parts.append(f"{s(e.get('key'))} {s(e.get('operator')) or ''}" + (f" ({values})" if values else ""))
    return ",".join(parts) or "every Pod"


def _term_covers(term: Mapping[str, Any], term_ns: str, ns: str) -> bool:
    """Does a term of a Pod in namespace `term_ns` look at Pods of namespace `ns`: its namespaces, else its own
    namespace; a namespaceSelector (the input has no Namespace labels to evaluate it) is taken to cover them all."""
    if term.get("namespaceSelector") is not None:
        return True
    names = [str(x) for x in lst(term.get("namespaces"))]
    return ns in names if names else ns == term_ns


def _matches(term: Mapping[str, Any], term_ns: str, pod: Mapping[str, Any]) -> bool:
    return _term_covers(term, term_ns, namespace(pod) or "") and label_selector_matches(
        m(term.get("labelSelector")), labels(pod))


def _running_pods(ctx: Context, namespaces: set[str] | None) -> list[Mapping[str, Any]]:
    """The Pods of the input bound to a node and not finished, in those namespaces (None: all), by key."""
    by_ns = _running(ctx).by_ns
    return [p for ns in sorted(by_ns if namespaces is None else namespaces & by_ns.keys()) for p in by_ns[ns]]


@dataclass
class _Running:
    """The running Pods by namespace, and those with a required podAntiAffinity, for one clock value (one pass):
    every Pod is read once however many Workloads the pod (anti-)affinity and ReadWriteOncePod verdicts ask about
    (each used to walk all the Pods' keys, 50,000 of them on a big cluster)."""

    now: Any = None
    by_ns: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    excluders: list[Mapping[str, Any]] = field(default_factory=list)


RUNNING: Derived[_Running] = Derived("running Pods by namespace, and those with required anti-affinity",
                                     lambda _: _Running())


def _running(ctx: Context) -> _Running:
    memo = ctx.state.derived(RUNNING)
    if memo.now != ctx.now:  # Pods change without rebuilding the index: recomputed once per pass
        by_ns: dict[str, list[Mapping[str, Any]]] = {}
        for key in sorted(ctx.state.pods):
            found = ctx.state.pods.get(key)
            if found is not None and s(spec(found).get("nodeName")) \
                    and s(status(found).get("phase")) not in ("Succeeded", "Failed"):
                by_ns.setdefault(key[0], []).append(found)
        memo.now, memo.by_ns = ctx.now, by_ns
        memo.excluders = [p for pods in by_ns.values() for p in pods if required_terms(p, "podAntiAffinity")]
    return memo


def _excluders(ctx: Context) -> list[Mapping[str, Any]]:
    return _running(ctx).excluders


def _pods_text(ctx: Context, pods: Sequence[Mapping[str, Any]]) -> str:
    """"this Workload's a on n1, b on n2 and 1 more" and/or "pod ns/x on n3": the Pods, where they run."""
    own_names = {name(p) for p in ctx.pods}
    own = [p for p in pods if namespace(p) == ctx.ns and name(p) in own_names]
    others = [p for p in pods if p not in own]

    def listed(group: Sequence[Mapping[str, Any]], full: bool) -> str:
        where = [(f"{namespace(p)}/" if full else "") + f"{name(p)} on "
                 f"{s(spec(p).get('nodeName'))}" for p in group[:2]]
        return ", ".join(where) + (f" and {len(group) - 2} more" if len(group) > 2 else "")

    parts = ([f"this Workload's {listed(own, False)}"] if own else []) + (
        [f"Pod{'s' if len(others) > 1 else ''} {listed(others, True)}"] if others else [])
    return "; ".join(parts)


def _domains(nodes: Sequence[Node], key: str) -> set[str]:
    return {str(labels(n)[key]) for n in nodes if key in labels(n)}


def _rejected_else(failure: podlib.SchedulingFailure) -> str:
    """"; the other 2 node(s) are rejected for 2 Insufficient cpu": what keeps the Pods off the nodes the rule
    allows."""
    others = [r for r in failure.reasons if r.text not in INTER_POD_TEXTS]
    if not others:
        return ""
    return (f"; the other {sum(r.count for r in others)} node(s) are rejected for "
            + ", ".join(f"{r.count} {r.text}" for r in others[:3]))


def _inter_pod(ctx: Context, make: Callable[..., Placement], reasons: Sequence[podlib.NodeFitReason],
               failure: podlib.SchedulingFailure, pod: Mapping[str, Any] | None, nodes: Funnel | None) -> Placement:
    """kube-scheduler's InterPodAffinity rejects the nodes. The Pods' own required podAffinity or podAntiAffinity is
    the owner's rule, which Kueue's quota does not see: named with its selector, its topologyKey and the Pods that
    decide it (their own, when the rule matches the Pods themselves: one per domain, so a pod set larger than the
    usable domains never fits). Another Pod's required podAntiAffinity that excludes these Pods is not the owner's:
    those Pods are named, when the input has them."""
    by = {text: sum(r.count for r in reasons if r.text == text) for text in INTER_POD_TEXTS}
    text = max(INTER_POD_TEXTS, key=lambda x: by[x])
    count = by[text]
    pod_ns = namespace(pod or {}) or ctx.ns
    usable = nodes.schedulable if nodes is not None else None
    rest = _rejected_else(failure)
    if text == EXISTING_ANTI_AFFINITY:
        excluding = [p for p in _excluders(ctx) if any(
            _matches(t, namespace(p) or "", pod or {})
            for t in required_terms(p, "podAntiAffinity"))]
        own = {name(p) for p in ctx.pods}
        theirs = [p for p in excluding if not (namespace(p) == ctx.ns and name(p) in own)]
        if excluding and not theirs:  # the Workload's own Pods, by a rule the incoming Pods do not share
            return make(Cause.FAILED_SCHEDULING, ActionBy.WORKLOAD_OWNER, "Scheduler",
                        f"{count} node(s) run {_pods_text(ctx, excluding)} whose required podAntiAffinity excludes "
                        f"these Pods{rest}: the Job's own rule; the owner relaxes it in its Pod template",
                        name=text, nodes=count, own_rule=True)
        if theirs:
            term = next(t for t in required_terms(theirs[0], "podAntiAffinity")
                        if _matches(t, namespace(theirs[0]) or "", pod or {}))
            held = (f"{_pods_text(ctx, theirs)}, whose own required podAntiAffinity ("
                    f"{selector_text(m(term.get('labelSelector')))}, topologyKey {s(term.get('topologyKey')) or '?'}) "
                    "excludes these Pods")
        else:
            held = ("Pods whose own required podAntiAffinity excludes these Pods; the input does not have them "
                    "(kubectl get pods -A -o wide on the flavor's nodes, and their spec.affinity.podAntiAffinity)")
        return make(Cause.FAILED_SCHEDULING, ActionBy.CLUSTER_ADMIN, "Scheduler",
                    f"{count} node(s) run {held}{rest}: not the Job's rule, and Kueue's quota does not see it. The "
                    "cluster admin keeps those Pods off the flavor's nodes or adds nodes, or their owners relax the "
                    "rule", name=text, nodes=count, own_rule=True)
    kind = "podAffinity" if text == POD_AFFINITY_UNMET else "podAntiAffinity"
    terms = required_terms(pod, kind)
    term = terms[0] if terms else {}
    key = s(term.get("topologyKey")) or "?"
    rule_ = (f"spec.affinity.{kind}: {selector_text(m(term.get('labelSelector')))}, topologyKey {key}"
             + (f", and {len(terms) - 1} more term(s)" if len(terms) > 1 else "") if terms else
             f"spec.affinity.{kind}; the input's Pod does not show its terms")
    self_match = bool(term) and pod is not None and _matches(term, pod_ns, pod)
    running = [p for p in _running_pods(ctx, None if term.get("namespaceSelector") is not None else
                                        {str(x) for x in lst(term.get("namespaces"))} or {pod_ns})
               if term and _matches(term, pod_ns, p) and p is not pod]
    fix = ("The owner relaxes it in the Job's Pod template (preferredDuringSchedulingIgnoredDuringExecution, "
           "or another topologyKey)")
    if kind == "podAntiAffinity":
        per = "node" if key == HOSTNAME else f"{key} value"
        podset = _pod_set_of(pod)
        expected = expected_by_pod_set(ctx).get(podset or "main") if self_match else None
        domains = _domains(usable, key) if usable is not None else None
        held = _pods_text(ctx, running) if running else "Pods the input does not have"
        if self_match and expected and domains is not None and usable is not None and expected > len(domains):
            offer = (f"{len(usable)} are usable" if key == HOSTNAME else
                     f"the {len(usable)} usable node(s) carry {len(domains)} {key} value(s)")
            return make(Cause.FAILED_SCHEDULING, ActionBy.WORKLOAD_OWNER, "Scheduler",
                        f"{count} node(s) run a Pod the Pods' own required podAntiAffinity excludes ({rule_}): it "
                        f"matches the Pods themselves, so at most one of them fits per {per}; the pod set's {expected} "
                        f"Pods need {expected} {per}s and {offer} ({held} run there): waiting never helps, and "
                        f"Kueue's quota counts no {per}s. {fix} or runs fewer Pods; or the cluster admin adds nodes "
                        "to the flavor", name=text, nodes=count, own_rule=True)
        exclusive = s(m(m((pod or {}).get("metadata")).get("annotations")).get(EXCLUSIVE_KEY)) == key
        head = (f"JobSet's exclusive placement (one Job per {key}) keeps them off the {count} node(s) where its "
                f"other Jobs run ({held})" if exclusive else
                f"{count} node(s) run Pods the Pods' own required podAntiAffinity excludes ({rule_}"
                + (f"; it matches the Pods themselves, so at most one of them fits per {per}" if self_match else "")
                + f"; held by {held})")
        if rest:  # the nodes the rule leaves are rejected for something else: room there, the cluster's
            return make(Cause.FAILED_SCHEDULING, ActionBy.CLUSTER_ADMIN, "Scheduler",
                        f"{head}{rest}: the cluster admin makes room there, or the owner relaxes the rule",
                        name=text, nodes=count, own_rule=True)
        others = [p for p in running if name(p) not in {name(x) for x in ctx.pods}]
        return make(Cause.FAILED_SCHEDULING, ActionBy.WORKLOAD_OWNER, "Scheduler",
                    f"{head}. {fix}" + (", or waits for those Pods to end" if others or not running else "")
                    + "; or the cluster admin adds nodes", name=text, nodes=count, own_rule=True)
    # podAffinity: the node must carry every term's topologyKey and a Pod to join must run in its domain
    missing = [k for k in dict.fromkeys(s(t.get("topologyKey")) or "" for t in terms)
               if usable and not _domains(usable, k)]
    if missing:
        what = (f"; no usable node carries the label {', '.join(missing)}, which kube-scheduler requires of a node "
                "for every required podAffinity term (a misspelt topologyKey?)")
    elif running:
        where = sorted({s(spec(p).get("nodeName")) or "" for p in running})
        what = (f"; the Pods it must join are {_pods_text(ctx, running)}, so only node(s) in their {key} "
                f"domain ({', '.join(where[:3])}) may take them{rest}")
    elif self_match:
        what = ("; it matches the Pods themselves, and kube-scheduler lets the first Pod of such a group in only "
                "when no Pod in the cluster matches: Pods the input does not have match it")
    else:
        what = "; no running Pod in the input matches it, so no domain has one to join"
        fix = "Start the Pods they must join first, or the owner relaxes the rule in the Job's Pod template " \
              "(preferredDuringSchedulingIgnoredDuringExecution)"
    return make(Cause.FAILED_SCHEDULING, ActionBy.WORKLOAD_OWNER, "Scheduler",
                f"{count} node(s) do not satisfy the Pods' own required pod affinity ({rule_}){what}. {fix}",
                name=text, nodes=count, own_rule=True)


def _count(failure: podlib.SchedulingFailure, constraint: str, reasons: Sequence[podlib.NodeFitReason],
           nodes: Funnel | None) -> int | None:
    """The nodes rejected for the constraint named: kube-scheduler's count of that constraint's reasons; the
    Nodes' when kube-scheduler gave none for it (its filters stop at a node's first failure, in their order)."""
    if failure.prefilter:
        return failure.total
    if reasons or nodes is None:
        return sum(r.count for r in reasons)
    if constraint == Constraint.TAINT:
        return len(nodes.selected) - len(nodes.tolerated)
    if constraint == Constraint.NODE_SELECTOR:
        return nodes.total - len(nodes.selected)
    return 0


# ---- nodes tainted after the Pods were placed; Kueue's topology-aware scheduling pinning a Pod to one node ----

HOSTNAME = "kubernetes.io/hostname"


def assigned_nodes(assignment: Mapping[str, Any]) -> set[str]:
    """The nodes of a topologyAssignment whose lowest level is the hostname (Kueue then keeps that level alone):
    v1beta2 `slices` (per domain, the last level's `universal` or prefix + root + suffix), v1beta1 `domains`."""
    levels = lst(assignment.get("levels"))
    if not levels or levels[-1] != HOSTNAME:
        return set()
    out = {str(lst(m(d).get("values"))[-1]) for d in lst(assignment.get("domains")) if lst(m(d).get("values"))}
    for piece in lst(assignment.get("slices")):
        per_level = lst(m(piece).get("valuesPerLevel"))
        last = m(per_level[-1]) if per_level else {}
        if s(last.get("universal")):
            out.add(str(last["universal"]))
            continue
        individual = m(last.get("individual"))
        prefix, suffix = s(individual.get("prefix")) or "", s(individual.get("suffix")) or ""
        out.update(f"{prefix}{root}{suffix}" for root in lst(individual.get("roots")))
    return out


def tas_pinned_node(ctx: Context, pod: Mapping[str, Any] | None) -> str | None:
    """The node Kueue's topology-aware scheduling pinned the Pod to: its nodeSelector's hostname when that node is
    in its pod set's topologyAssignment (Kueue's topology ungater copies the assigned domain's level values into
    the Pod's nodeSelector when it ungates it)."""
    host = s(m(spec(pod or {}).get("nodeSelector")).get(HOSTNAME))
    if not host:
        return None
    podset = _pod_set_of(pod)
    for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")):
        if (not podset or s(m(psa).get("name")) == podset) and host in assigned_nodes(
                m(m(psa).get("topologyAssignment"))):
            return host
    return None


def gone_pinned_node(ctx: Context, pod: Mapping[str, Any] | None) -> str | None:
    """The node Kueue's TAS pinned the Pod to (a hostname in its nodeSelector that its Workload's pod templates lack:
    the topology ungater copied it from the topologyAssignment) when no Node of that name is left. Only with the
    Nodes in the input: without them a missing node is not a fact."""
    host = s(m(spec(pod or {}).get("nodeSelector")).get(HOSTNAME))
    if not host or not ctx.state.knows("Node") or not topology_assigned(ctx):
        return None
    if any(s(m(m(m(m(ps).get("template")).get("spec")).get("nodeSelector")).get(HOSTNAME)) == host
           for ps in lst(ctx.spec.get("podSets"))):
        return None  # the owner's own selector
    if host in ctx.state.nodes or any(s(m(m(n.get("metadata")).get("labels")).get(HOSTNAME)) == host
                                      for n in ctx.state.nodes.values()):
        return None
    return host


def _gone_why(ctx: Context, node: str, pod: Mapping[str, Any] | None) -> str:
    """Pods Kueue's TAS pinned to a node that is gone. Kueue v0.19's TAS node controller records a deleted node in
    status.unhealthyNodes and its scheduler swaps in a replacement (or evicts, NodeFailures); but it fails Pods
    pinned to a node, unbound and ungated (TerminatedByKueue), only while the Node object exists: its reconcile stops
    at "Node not found" (pkg/controller/tas/node_controller.go). A Pod already ungated onto the node keeps its
    nodeSelector, immutable once ungated, and stays Pending until someone deletes it."""
    stuck = sorted(name(p) or "" for p in ctx.pods
                   if s(m(spec(p).get("nodeSelector")).get(HOSTNAME)) == node and not s(spec(p).get("nodeName"))
                   and s(status(p).get("phase")) not in ("Succeeded", "Failed"))
    pods = f"{len(stuck)} Pod(s) ({', '.join(stuck[:3])})" if stuck else "the Pods"
    assigned = set().union(*(assigned_nodes(m(m(psa).get("topologyAssignment")))
                             for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments"))))
    if node not in assigned:
        state = (f"Kueue already replaced it in the topologyAssignment (now {', '.join(sorted(assigned)[:4])})"
                 if assigned else "it is no longer in the topologyAssignment")
    elif any(s(m(u).get("name")) == node for u in lst(ctx.status.get("unhealthyNodes"))):
        state = ("Kueue recorded it in status.unhealthyNodes and swaps in a replacement node (or evicts the "
                 "Workload, NodeFailures, when none fits)")
    else:
        state = ("it is still in the topologyAssignment and not in status.unhealthyNodes: Kueue's TAS node controller "
                 "marks a deleted node at once (feature gate TASFailedNodeReplacement, on by default); the cluster "
                 "admin checks that gate and the Kueue controller logs")
    one = len(stuck) == 1
    them, they, their = ("it", "it stays", "its") if one else ("them", "they stay", "their")
    controlled = any(r.get("controller") for r in owner_refs(pod or {}))
    fix = (f"Delete {them} (kubectl -n {ctx.ns} delete pod {' '.join(stuck[:3]) or '<pod>'}): the owner recreates "
           f"{them} with Kueue's topology gate and Kueue ungates {them} into the current assignment" if controlled
           else f"Delete and re-create {them}: a bare Pod's nodeSelector cannot change")
    return (f"Kueue's TAS pinned {pods} to node {node} ({HOSTNAME}={node} from the topologyAssignment, not the "
            f"owner's template), and Node {node} no longer exists; {state}. Kueue fails a Pod pinned to a lost node "
            f"only while the Node object exists, so {they} Pending ({their} nodeSelector is immutable once "
            f"ungated). {fix}; either the owner or the cluster admin may delete {them}")


@dataclass(frozen=True)
class _Late:
    """Untolerated taints put on the Pods' nodes after the Pods were placed, and how that is known."""

    taints: list[str]
    nodes: list[str]
    how: str
    since: datetime | None  # the earliest timeAdded of those taints, when the Node says


def _on_nodes(ctx: Context) -> dict[str, list[Mapping[str, Any]]]:
    """The Workload's Pods still on a node (bound, neither finished nor being deleted), by node."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for pod in ctx.pods:
        node = s(spec(pod).get("nodeName"))
        if node and s(status(pod).get("phase")) not in ("Succeeded", "Failed") \
                and not m(pod.get("metadata")).get("deletionTimestamp"):
            out.setdefault(node, []).append(pod)
    return out


def _late_taints(ctx: Context, nodes: Funnel | None, taints: Sequence[str], pinned: str | None) -> _Late | None:
    """The untolerated taints that came after the Pods were placed: on the node Kueue's topology-aware scheduling
    pinned them to (it leaves out nodes with taints the pod set does not tolerate), added after the admission
    (the taint's timeAdded), or on a node where a Pod of the Workload that does not tolerate it still runs. A
    taint put on nodes in use is a maintenance or a drain: tolerating it defeats it."""
    if nodes is None:
        return None
    admitted, bound = admitted_since(ctx), _on_nodes(ctx)
    found: dict[str, None] = {}
    how, since = "", None
    for node in nodes.selected:
        node_name = name(node) or ""
        for taint in lst(spec(node).get("taints")):
            taint = m(taint)
            text = taint_text(taint)
            if text not in taints:
                continue
            added = as_time(taint.get("timeAdded"))
            running = [p for p in bound.get(node_name, ()) if not tolerates(
                [m(t) for t in lst(spec(p).get("tolerations"))], taint)]
            if added is not None and admitted is not None and added > admitted:
                why = f"on {node_name} since {when_text(added)}, admitted {when_text(admitted)}"
            elif running:
                why = f"pod {name(running[0])} still runs on {node_name}"
            elif node_name == pinned:
                why = f"Kueue's topology-aware scheduling chose node {node_name} without it"
            else:
                continue
            found[text] = None
            how = how or why
            since = added if added is not None and (since is None or added < since) else since
    if not found:
        return None
    carrying = [name(n) or "" for n in nodes.selected  # every usable node with one of them, late there or not
                if any(taint_text(m(t)) in found for t in lst(spec(n).get("taints")))]
    return _Late(list(found), carrying, how, since)


def _kueue_terminated(ctx: Context, node: str) -> list[str]:
    """The Workload's Pods Kueue's TAS node controller failed while they were pinned to this node."""
    return sorted(name(p) or "" for p in ctx.pods
                  if s(m(spec(p).get("nodeSelector")).get(HOSTNAME)) == node
                  and is_true(conditions(p).get(podlib.TERMINATED_BY_KUEUE)))


def job_failures(ctx: Context) -> str:
    """"; Job failures 22/100 backoffLimit": every Pod Kueue fails counts against the Job's backoffLimit."""
    owner = ctx.owner
    if owner is None or s(owner.get("kind")) != "Job":
        return ""
    failed, limit = status(owner).get("failed"), spec(owner).get("backoffLimit")
    if not isinstance(failed, int) or not failed:
        return ""
    return f"; Job failures {failed}" + (f"/{limit} backoffLimit" if isinstance(limit, int) else "")


def _pinned_why(ctx: Context, node: str, late: _Late) -> tuple[ActionBy, str]:
    """Pods Kueue's topology-aware scheduling pinned to a node tainted since: who acts, and the clause. Kueue
    v0.19's TAS node controller fails each Pod pinned to a tainted node that cannot schedule, and looks for a
    replacement node only once it records the node in status.unhealthyNodes, which it does not while another
    Pod of the Workload still runs there (kueue#14917). Short: the rule adds kube-scheduler's text and more."""
    admitted = admitted_since(ctx)
    when = f" since {when_text(late.since)}" if late.since is not None else ""
    # Kueue's TAS leaves out nodes with taints the pod set does not tolerate: an assigned node got it later
    before = late.since is not None and admitted is not None and late.since <= admitted
    after = "" if before else ", after the admission"
    head = (f"Kueue's TAS pinned them to node {node} (its topologyAssignment), tainted "
            f"{', '.join(late.taints[:3])}{when}{after}")
    if any(s(m(u).get("name")) == node for u in lst(ctx.status.get("unhealthyNodes"))):
        return ActionBy.NOBODY, (f"{head}; Kueue recorded it in status.unhealthyNodes and looks for a replacement "
                                 "node, or evicts the Workload when none fits")
    terminated = _kueue_terminated(ctx, node)
    failed = (f"Kueue's TAS node controller failed {len(terminated)} replacement Pod(s) there "
              f"({podlib.TERMINATED_BY_KUEUE}{job_failures(ctx)})" if terminated else
              f"Kueue's TAS node controller fails Pods pinned there ({podlib.TERMINATED_BY_KUEUE}{job_failures(ctx)})")
    running = _on_nodes(ctx).get(node, [])
    stuck = (f"as pod {name(running[0])} still runs on {node}, Kueue never marks the node unhealthy, so nothing "
             "re-places them (kueue#14917)" if running else
             "Kueue should mark the node unhealthy and re-place them; else (kueue#14917) nothing does")
    return ActionBy.CLUSTER_ADMIN, (
        f"{head}. {failed}; {stuck} until the Workload is evicted (waitForPodsReady, or spec.active false then true) "
        "or the taint removed: the cluster admin's call; tolerating a taint put on a node in use is no fix")




def topology_assigned(ctx: Context) -> bool:
    """Kueue's topology-aware scheduling chose the nodes (a podSetAssignment with a topologyAssignment)."""
    return any(m(psa).get("topologyAssignment")
               for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")))


def _volume_node_conflict(make: Callable[..., Placement], text: str, prefilter: bool, claims: list[str],
                          count: int | None, pinned: str | None) -> Placement:
    """A bound volume the Pods' node cannot reach. Pinned there by Kueue's topology-aware scheduling, which does not
    look at bound volumes when it picks nodes (kueue#14708): its selector, not the owner's template nor a lack of
    nodes, keeps kube-scheduler off the volume's node. The input has no PersistentVolumes: that node is not named."""
    claim = ", ".join(claims) or "?"
    if pinned is not None:  # kube-scheduler's text follows in the message: not repeated, the room is short
        return make(Cause.VOLUME_NODE_CONFLICT, ActionBy.CLUSTER_ADMIN, "VolumeNodeAffinity",
                    f"Kueue's TAS pinned them to {pinned} (nodeSelector {HOSTNAME}={pinned} from the "
                    f"topologyAssignment); the volume of claim {claim} is bound elsewhere. TAS ignores bound volumes "
                    f"(kueue#14708): its selector, not room, bars the volume's node, and an eviction may pick "
                    f"{pinned} again", name=claim if claims else None, nodes=count, short=claims, pinned=pinned)
    if text == PREFILTER_VOLUME_CONFLICT:
        return make(Cause.VOLUME_NODE_CONFLICT, ActionBy.WORKLOAD_OWNER, "VolumeNodeAffinity",
                    f"{text}: the nodes the Pods' own required node affinity names (matchFields metadata.name) and "
                    f"the nodes the local volume bound to claim {claim} lives on do not overlap: pin the Pods to the "
                    "volume's node, or drop the node-name affinity", name=claim if claims else None, nodes=count,
                    short=claims)
    said = text if prefilter else f"{count} node(s): {text}"
    return make(Cause.VOLUME_NODE_CONFLICT, ActionBy.WORKLOAD_OWNER, "VolumeNodeAffinity",
                f"{said}: the claim {claim} is bound to a volume no usable node can reach (another zone or node)",
                name=claim if claims else None, nodes=count, short=claims)


# PodScheduled=False reason SchedulerError (K pkg/scheduler/schedule_one.go:1212): a plugin failed, not a verdict on
# the nodes; its text is the plugin's error, e.g. the binding cycle's (framework/runtime/framework.go:1649 "running
# PreBind plugin %q: %w"). VolumeBinding's PreBind waits for the Pod's WaitForFirstConsumer claims to be provisioned
# and bound on the node it chose (plugins/volumebinding/binder.go:501 "binding volumes: %w"), up to its bindTimeout
# (600 s): the provisioner gave up ("provisioning failed for PVC %q", :684; "selectedNode annotation reset for PVC
# %q", :677), or the wait ran out ("context deadline exceeded"). kube-scheduler then clears nominatedNodeName and
# tries the Pod again.
SCHEDULER_ERROR = "SchedulerError"
_VOLUME_PREBIND = 'running PreBind plugin "VolumeBinding": '
_PVC_NAMED = re.compile(r'PVC "([^"]+)"')


def _binding(ctx: Context, make: Callable[..., Placement], node: str, blocker: podlib.PodBlocker,
             pod: Mapping[str, Any] | None) -> Placement:
    """nominatedNodeName without a preemption behind it: a preemption that nominates writes its FitError without a
    "preemption: " text (its PostFilter succeeded, K schedule_one.go:294), and one that failed clears the nomination
    (framework/preemption/preemption.go:147). What is left is the binding cycle's own nomination (schedule_one.go:410,
    NominatedNodeNameForExpectation): kube-scheduler placed the Pod and PreBind waits for its volumes to be provisioned
    on that node (or for DRA devices, or a Permit plugin). A PodScheduled=False condition, if any, is from before."""
    claims = _claims(pod)
    stale = (f"; the PodScheduled=False condition (\"{blocker.message[:160]}\") is from an earlier attempt"
             if blocker.message else "")
    if claims:
        return make(Cause.VOLUME_NOT_BOUND, ActionBy.NOBODY, "Volume",
                    f"kube-scheduler chose node {node} (status.nominatedNodeName) and binds them once claim "
                    f"{', '.join(claims[:3])} is provisioned there (WaitForFirstConsumer): not a preemption, nothing "
                    "blocks yet{stale}. If provisioning fails or takes over 10 minutes, kube-scheduler reports "
                    "SchedulerError and tries again".replace("{stale}", stale),
                    name=", ".join(claims[:3]), short=claims, source="Scheduler", own_rule=True, binding=node)
    return make(Cause.FAILED_SCHEDULING, ActionBy.NOBODY, "Scheduler",
                f"kube-scheduler chose node {node} (status.nominatedNodeName) and binds them once its PreBind or "
                f"Permit plugins are done (DRA devices, a gang's other Pods): not a preemption{stale}. A failure "
                "there shows as SchedulerError", name=node, source="Scheduler", own_rule=True, binding=node)


def _scheduler_error(ctx: Context, make: Callable[..., Placement], message: str,
                     pod: Mapping[str, Any] | None) -> Placement:
    """kube-scheduler failed with an error rather than finding no node: the plugin's own words are the verdict. Binding
    the Pods' volumes on the chosen node (VolumeBinding PreBind) is the storage provisioner's side: named apart."""
    said = message.strip()[:300] or "no message"
    if message.startswith(_VOLUME_PREBIND):
        claims = list(dict.fromkeys(_PVC_NAMED.findall(message))) or _claims(pod)
        named = ", ".join(claims[:3]) or "?"
        timed_out = "context deadline exceeded" in message
        what = ("was not provisioned and bound within kube-scheduler's bind timeout (10 minutes)" if timed_out else
                "could not be provisioned (the provisioner gave up; kube-scheduler tries again)")
        return make(Cause.VOLUME_NOT_BOUND, ActionBy.CLUSTER_ADMIN, "Volume",
                    f"kube-scheduler chose a node, but the volume of claim {named} {what} (SchedulerError: "
                    f"\"{said}\"): the StorageClass's provisioner or its storage backend fails, not the nodes' "
                    "capacity" + (claim_said(ctx, claims) or f". The claim's events say why (kubectl describe pvc "
                                  f"{claims[0] if claims else ''} -n {ctx.ns}: ProvisioningFailed)"),
                    name=named if claims else None, short=claims, source="Scheduler")
    return make(Cause.FAILED_SCHEDULING, ActionBy.CLUSTER_ADMIN, "Scheduler",
                f"kube-scheduler failed with an error, not for lack of a node (SchedulerError: \"{said}\"); it "
                "retries the Pods, and its logs say more", name=said[:200], source="Scheduler")


def _rwop(ctx: Context, make: Callable[..., Placement], count: int | None, pod: Mapping[str, Any] | None) -> Placement:
    """A ReadWriteOncePod claim of the Pods is in use by another Pod: one Pod in the whole cluster may use it, so no
    node helps. The Workload's own Pods sharing one such claim never all run (the owner's spec); another Pod holding it
    must end first. Claims live in the Pods' namespace: whoever runs these Pods runs that one too."""
    claims = _claims(pod)
    ns = namespace(pod or {}) or ctx.ns
    users = [p for p in _running_pods(ctx, {ns}) if name(p) != name(pod or {}) and set(_claims(p)) & set(claims)]
    own = {name(p) for p in ctx.pods}
    named = ", ".join(claims[:3]) or "?"
    podset = _pod_set_of(pod)
    expected = expected_by_pod_set(ctx).get(podset or "main", 0)
    head = f"claim {named} has access mode ReadWriteOncePod (one Pod in the cluster at a time)"
    if users and all(name(p) in own for p in users) and expected > 1:
        why = (f"{head} and all {expected} Pods of the pod set mount it: {_pods_text(ctx, users)} holds it, so "
               "the rest never run beside it. The owner gives each Pod its own claim (an ephemeral volume, or a "
               "claim per completion index) or uses a ReadWriteMany/ReadOnlyMany claim")
    else:
        held = (_pods_text(ctx, users) if users else
                f"a Pod the input does not have (kubectl describe pvc {claims[0] if claims else ''} -n {ns}: Used By)")
        why = (f"{head} and {held} uses it: these Pods wait until that Pod ends. The owner stops it, or gives these "
               "Pods a claim of their own")
    return make(Cause.FAILED_SCHEDULING, ActionBy.WORKLOAD_OWNER, "Scheduler",
                f"{why}; kube-scheduler rejects every node ({count}) for it, and no node or quota helps",
                name=named if claims else RWOP_IN_USE,
                nodes=count, short=claims, own_rule=True)


def _volume_limits(make: Callable[..., Placement], reasons: Sequence[podlib.NodeFitReason], count: int | None,
                   pod: Mapping[str, Any] | None) -> Placement:
    """kube-scheduler's NodeVolumeLimits: the nodes' CSI driver attaches no more volumes, or is not installed there.
    The nodes' side, and not in Kueue's quota."""
    claims = ", ".join(_claims(pod)[:3]) or "its volumes"
    drivers = sorted({x.group(1) for x in (CSI_DRIVER_MISSING.match(r.text) for r in reasons) if x})
    full = sum(r.count for r in reasons if r.text == MAX_VOLUME_COUNT)
    parts = []
    if full:
        parts.append(f"{full} node(s) already attach as many volumes as their CSI driver allows (CSINode "
                     f"spec.drivers[].allocatable.count) and the Pods' claim(s) {claims} would exceed it: the cluster "
                     "admin frees attachments (kubectl get volumeattachments: volumes of ended Pods not yet detached) "
                     "or adds nodes")
    if drivers:
        missing = sum(r.count for r in reasons if CSI_DRIVER_MISSING.match(r.text))
        parts.append(f"{missing} node(s) lack CSI driver {', '.join(drivers)} that the Pods' claim(s) {claims} need "
                     "(its node plugin does not run there): the cluster admin installs it on the flavor's nodes")
    return make(Cause.FAILED_SCHEDULING, ActionBy.CLUSTER_ADMIN, "Scheduler",
                "; ".join(parts) + "; Kueue's quota does not count volume attachments",
                name=MAX_VOLUME_COUNT if full else f"{', '.join(drivers)} CSI driver is not installed on the node",
                nodes=count, own_rule=True)


def _device_class(make: Callable[..., Placement], request: str, device_class: str, count: int | None,
                  pod: Mapping[str, Any] | None) -> Placement:
    """DRA: a request of the Pods' ResourceClaims names a DeviceClass that does not exist, so kube-scheduler tries no
    node (DynamicResources PreFilter) until one is created. Kueue admitted it: its DRA integration maps that class
    (resources.deviceClassMappings) or does not look at claims; the class comes with the DRA driver."""
    claims = ", ".join(sorted({c.claim or f"{c.name} (template {c.template})" for c in resource_claims(pod)})[:3]) \
        or "its ResourceClaims"
    return make(Cause.FAILED_SCHEDULING, ActionBy.CLUSTER_ADMIN, "Scheduler",
                f"request {request} of the Pods' claim {claims} asks DeviceClass {device_class}, which does not "
                "exist (kubectl get deviceclasses), so kube-scheduler tries no node: the cluster admin installs the "
                f"DRA driver that provides {device_class} (or creates the class); if the name is misspelt in the "
                "claim's template, the owner fixes it. The Pods are tried again once the class exists",
                name=device_class, nodes=count, own_rule=True)


def _devices(make: Callable[..., Placement], reasons: Sequence[podlib.NodeFitReason],
             pod: Mapping[str, Any] | None) -> Placement:
    """DRA: kube-scheduler could not allocate the devices of the Pod's ResourceClaims on any node (kueue#10548).
    Kueue's quota counts devices only as much as it admitted; the nodes' devices may be held by claims outside
    Kueue. The input has no ResourceSlices to count free devices: named, not estimated."""
    count = max((x.count for x in reasons), default=0)
    claims = sorted({c.claim or c.template or c.name or "?" for c in resource_claims(pod)})
    named = ", ".join(claims[:3]) or "its claims"
    text = reasons[0].text
    return make(Cause.INSUFFICIENT_RESOURCES, ActionBy.CLUSTER_ADMIN, "Resource",
                f"{count} node(s): {text} ({named}): the devices the Pod's ResourceClaims ask for (DRA) are allocated "
                "to other claims or not on those nodes; Kueue's quota counts only the devices of what it admitted, "
                "not those in use outside Kueue (`kubectl get resourceclaims -A`, `kubectl get resourceslices`)",
                name=named, nodes=count, source="Scheduler")


def _resources(ctx: Context, make: Callable[..., Placement], reasons: Sequence[podlib.NodeFitReason],
               pc: PodConstraints | None, nodes: Funnel | None) -> Placement:
    resources = [r for r in (resource_of(x.text) for x in reasons) if r]
    resource = resources[0] if resources else "?"
    count = max((x.count for x in reasons), default=0)
    need = pc.requests.get(resource) if pc is not None else None
    requested = _fmt(resource, need) if need is not None else None
    if nodes is not None and nodes.schedulable and need is not None:
        too_large = [r for r in resources if pc is not None and r in pc.requests
                     and nodes.largest.get(r, (Decimal(0), ""))[0] < pc.requests[r]]
        if too_large:
            r = too_large[0]
            most, where = nodes.largest.get(r, (Decimal(0), ""))
            req = pc.requests[r] if pc is not None else Decimal(0)
            if most <= 0:  # no usable node offers it at all: the nodes' side (a device plugin down), not the Pod's
                return make(Cause.INSUFFICIENT_RESOURCES, ActionBy.CLUSTER_ADMIN, "Resource",
                            f"one Pod requests {_fmt(r, req)} {r} and none of the {len(nodes.schedulable)} usable "
                            f"node(s) advertises any allocatable {r}: the nodes lack it, or its device plugin is not "
                            f"running on them (`kubectl describe node`: Allocatable); cluster admin: fix the nodes",
                            name=r, requested=_fmt(r, req), available="0", nodes=count, source="Nodes", resource=r)
            return make(Cause.POD_TOO_LARGE, ActionBy.WORKLOAD_OWNER, "PodTooLarge",
                        f"one Pod requests {_fmt(r, req)} {r}, more than any of the {len(nodes.schedulable)} usable "
                        f"node(s) can allocate (at most {_fmt(r, most)} on {where}): waiting never helps",
                        name=r, requested=_fmt(r, req), available=_fmt(r, most), nodes=count, source="Nodes",
                        resource=r)
        free, where = nodes.most_free.get(resource, (Decimal(0), ""))
        # the estimate counts only the Pods in the input; kube-scheduler counts them all, and it is right
        unseen = free >= need
        estimate = (f"the Pods in the input leave up to {_fmt(resource, free)} free ({where}), so Pods the input "
                    "lacks (outside Kueue: DaemonSets, other workloads) hold the rest" if unseen else
                    f"the most free on a usable node is about {_fmt(resource, max(free, Decimal(0)))} ({where}, an "
                    "estimate)")
        return make(Cause.INSUFFICIENT_RESOURCES, ActionBy.CLUSTER_ADMIN, "Resource",
                    f"{count} node(s) lack free {resource}: one Pod requests {requested}; {estimate}"
                    + (": Kueue's topology-aware scheduling placed it there (the Workload's topologyAssignment), "
                       "so Kueue counted the room the node lacks (Pods Kueue does not count, or kueue#5243); the "
                       "request is not the owner's to cut" if topology_assigned(ctx) else ""),
                    name=resource, requested=requested,
                    available=None if unseen else _fmt(resource, max(free, Decimal(0))),
                    nodes=count, source="Scheduler" if unseen else "Estimate", resource=resource, unseen=unseen)
    return make(Cause.INSUFFICIENT_RESOURCES, ActionBy.CLUSTER_ADMIN, "Resource",
                f"{count} node(s) lack free {', '.join(resources) or resource}"
                + (f" (one Pod requests {requested})" if requested else ""),
                name=resource, requested=requested, nodes=count, resource=resource)
