"""kube-scheduler's verdict on a Pod: the `FitError` text, parsed into a histogram of node-fit reasons.

kube-scheduler writes ``FitError.Error()`` (``pkg/scheduler/framework/types.go``, Kubernetes v1.36.3) into
the ``PodScheduled=False`` condition (reason ``Unschedulable`` or ``SchedulerError``) and, cut to 1024
characters with a ``" ..."`` suffix, into the ``FailedScheduling`` event::

    0/<all>: nodes are available: <PreFilter message>. <PostFilter messages>
    0/<all> nodes are available: <n> <reason>, <n> <reason>. <PostFilter messages>

The ``<n> <reason>`` items are sorted as *strings* (``"10 x"`` sorts before ``"2 y"``). PostFilter
messages are joined with ``", "``; with DynamicResources on (default) a Pod without claims gets
``"no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful
for scheduling."``. Older releases ended with a second period (``"scheduling.."``), and up to v1.33
named the taint (``"node(s) had untolerated taint {dedicated: gpu}"``) where v1.34+ write
``"node(s) had untolerated taint(s)"``. Both shapes are read. Items are split at ``", <digits> "``,
never at every comma: reasons contain commas of their own.

Neighbours: `summary.py` groups Unschedulable Pods by the top reason found here; `events.py` supplies
the ``FailedScheduling`` message when the Pod's condition has none.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

from ...kube.objects import TRUNCATION_SUFFIX, clip

# ErrNoNodesAvailable in pkg/scheduler/scheduler.go: the cluster has no nodes at all.
NO_NODES_MESSAGE = "no nodes available to schedule pods"

_NODES_ARE_AVAILABLE = " nodes are available"
_PREEMPTION = "preemption: "


@dataclass(frozen=True)
class NodeFitReason:
    """One ``<count> <text>`` item of a scheduler message: ``count`` nodes rejected the Pod for ``text``."""

    count: int
    text: str


@dataclass(frozen=True)
class SchedulingFailure:
    """A parsed kube-scheduler ``FitError`` message.

    ``reasons`` are in message order (upstream sorts them as strings). When a PreFilter plugin
    rejected the Pod for every node, the message has no counts; ``prefilter`` is True and
    ``reasons`` holds that one text with ``count=total``. ``preemption`` is what follows
    ``"preemption: "`` and ``preemption_reasons`` its histogram, if it has one. ``post_filter`` keeps
    other PostFilter texts (e.g. ``"no new claims to deallocate"``). Unknown shapes: ``reasons=()``.
    """

    available: int | None
    total: int | None
    reasons: tuple[NodeFitReason, ...]
    preemption: str | None
    raw: str
    preemption_reasons: tuple[NodeFitReason, ...] = ()
    post_filter: tuple[str, ...] = ()
    prefilter: bool = False

    @functools.cached_property
    def top_reason(self) -> NodeFitReason | None:
        """The reason that rejected the most nodes; on a tie, the more actionable one. Kept on the parsed
        message, which the parse memo shares among all Pods with that text."""
        if not self.reasons:
            return None
        return min(self.reasons, key=lambda r: (-r.count, _reason_rank(r.text)))

    def short(self) -> str:
        """``"0/3 nodes: 2 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)"``."""
        return self._short

    @functools.cached_property
    def _short(self) -> str:
        """`short`, once per parsed message (the parse memo shares it among the Pods with that text)."""
        if self.total == 0 and not self.reasons:
            return NO_NODES_MESSAGE
        if not self.reasons:
            return clip(self.raw, 200) or ""
        ordered = sorted(self.reasons, key=lambda r: (-r.count, _reason_rank(r.text)))
        items = ", ".join(r.text if self.prefilter else f"{r.count} {r.text}" for r in ordered)
        if self.total is None:
            return items
        return f"{self.available or 0}/{self.total} nodes: {items}"


_NODE_STATE_REASONS = frozenset({"node(s) were unschedulable", "node(s) had unknown conditions"})


def _reason_rank(text: str) -> int:
    # Ties go to what an SRE can act on: missing capacity first, control-plane taints and cordons last.
    if text.startswith("Insufficient ") or text == "Too many pods":
        return 0
    if "untolerated taint" in text or text in _NODE_STATE_REASONS:
        return 2
    return 1


def parse_scheduler_message(message: object) -> SchedulingFailure:
    """Parse a kube-scheduler ``PodScheduled=False`` / ``FailedScheduling`` message. Never raises."""
    if not isinstance(message, str):
        return SchedulingFailure(None, None, (), None, "")
    try:
        return _parse_cached(message)
    except Exception:  # a safety net: parsing is best effort, the raw text is always kept
        return SchedulingFailure(None, None, (), None, message)


@functools.lru_cache(maxsize=4096)
def _parse_cached(message: str) -> SchedulingFailure:
    text = message.strip()
    if text.startswith(NO_NODES_MESSAGE):
        return SchedulingFailure(0, 0, (), None, message)
    total, body = _split_prefix(text)
    if total is None or body is None:
        return SchedulingFailure(None, total, (), None, message)
    preemption: str | None = None
    cut = body.find(_PREEMPTION)
    if cut >= 0 and (cut == 0 or body[cut - 1] == " "):
        preemption = body[cut + len(_PREEMPTION):].strip()
        body = body[:cut]
    prefilter = False
    if not _count_at(body, 0):
        end = _end_of_clause(body, 0)
        clause = body[:end].rstrip(".").strip()
        reasons: tuple[NodeFitReason, ...] = ()
        if clause and not clause.endswith(TRUNCATION_SUFFIX):
            reasons = (NodeFitReason(total, clause),)
        prefilter = bool(reasons)
        rest = body[end + 2:]
    else:
        reasons, rest = _parse_histogram(body)
    post = tuple(p for p in (x.strip().rstrip(".") for x in rest.strip().rstrip(",").split(", ")) if p)
    preemption_reasons: tuple[NodeFitReason, ...] = ()
    if preemption is not None:
        sub_total, sub_body = _split_prefix(preemption)
        if sub_total is not None and sub_body is not None and _count_at(sub_body, 0):
            preemption_reasons, _ = _parse_histogram(sub_body)
    return SchedulingFailure(0, total, reasons, preemption, message, preemption_reasons, post, prefilter)


def _split_prefix(text: str) -> tuple[int | None, str | None]:
    """``"0/3 nodes are available: rest"`` -> ``(3, "rest")``; other shapes -> ``(None, None)``."""
    if not text.startswith("0/"):
        return None, None
    i = text.find(_NODES_ARE_AVAILABLE, 2)
    digits = text[2:i] if i > 2 else ""
    if not digits.isdigit() or not digits.isascii() or len(digits) > 9:
        return None, None
    rest = text[i + len(_NODES_ARE_AVAILABLE):]
    if not rest.startswith(":"):
        return int(digits), None  # e.g. the pre-1.19 " to run pod x: ..." form
    return int(digits), rest[1:].lstrip(" ")


def _count_at(s: str, pos: int) -> int:
    """Length of ``"<digits> "`` at ``pos`` (0 if there is none)."""
    j = pos
    n = len(s)
    while j < n and "0" <= s[j] <= "9":
        j += 1
    return j - pos + 1 if j > pos and j < n and s[j] == " " else 0


def _end_of_clause(s: str, pos: int) -> int:
    """Index of the ``". "`` that ends the clause starting at ``pos``, or ``len(s)``."""
    dot = s.find(". ", pos)
    return len(s) if dot < 0 else dot


def _parse_histogram(s: str) -> tuple[tuple[NodeFitReason, ...], str]:
    """``"1 a, 2 b. rest"`` -> ``((1 a), (2 b)), "rest"``. Items are split at ``", <digits> "``."""
    reasons: list[NodeFitReason] = []
    pos = 0
    n = len(s)
    while True:
        k = _count_at(s, pos)
        if not k:
            break
        count = int(s[pos:pos + k - 1])
        start = pos + k
        end = _end_of_clause(s, start)
        comma = s.find(", ", start, end)
        while comma >= 0 and not _count_at(s, comma + 2):
            comma = s.find(", ", comma + 2, end)
        if comma >= 0:
            reasons.append(NodeFitReason(count, s[start:comma]))
            pos = comma + 2
            continue
        text = s[start:end].rstrip().rstrip(".")
        if text and not s[start:end].rstrip().endswith(TRUNCATION_SUFFIX):  # an event cut at 1024 characters
            reasons.append(NodeFitReason(count, text))
        pos = min(n, end + 2)
        break
    return tuple(reasons), s[pos:]


# ---- what each node-fit reason is about ---------------------------------------------------------------

class Constraint:
    """The kind of constraint a node-fit reason reports, named as `status.blocker.kind` names it."""

    RESOURCE: Final = "Resource"
    NODE_SELECTOR: Final = "NodeSelector"
    TAINT: Final = "Taint"
    NODE_STATE: Final = "NodeState"  # cordoned, unknown conditions: the nodes' state, not the Pod's constraints
    VOLUME: Final = "Volume"
    VOLUME_NODE_AFFINITY: Final = "VolumeNodeAffinity"
    PORTS: Final = "Ports"  # a hostPort of the Pod taken on the node (named Scheduler in status.blocker)
    OTHER: Final = "Scheduler"


# kube-scheduler's default Filter order (v1.36 default_plugins): a node is rejected by the first plugin that
# fails, so a node reported for a later plugin passed every earlier one (a node that lacks cpu matched the
# selector and tolerated the taints). The stage of a constraint is its place in that order.
STAGE = {Constraint.NODE_STATE: 0, Constraint.TAINT: 1, Constraint.NODE_SELECTOR: 2, Constraint.PORTS: 3,
         Constraint.RESOURCE: 4, Constraint.VOLUME: 5, Constraint.VOLUME_NODE_AFFINITY: 6, Constraint.OTHER: 7}

# PreFilter (K pkg/scheduler/framework/runtime/framework.go:973): the nodes NodeAffinity names (the Pod's required
# affinity on metadata.name) and those VolumeBinding names (the nodes of its bound local PersistentVolumes) do not
# overlap. VolumeBinding narrowed the nodes so on kube-scheduler v1.27-v1.31 (kubernetes#109877; gone since #125398,
# v1.32 and the 1.29-1.31 patch releases); v1.36.3 still writes the format, for any plugins.
PREFILTER_VOLUME_CONFLICT = "node(s) didn't satisfy plugin(s) [NodeAffinity VolumeBinding] simultaneously"

# NodePorts (K .../nodeports/node_ports.go:51): a hostPort the Pod asks is in use on the node. PodTopologySpread
# (K .../podtopologyspread/plugin.go:41,43): a DoNotSchedule constraint's skew would be exceeded, or the node lacks
# the constraint's topologyKey label. All three are the Pods' own rules, not the nodes' capacity.
NODE_PORTS_TAKEN = "node(s) didn't have free ports for the requested pod ports"
SPREAD_UNMET = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL_MISSING = SPREAD_UNMET + " (missing required label)"

# InterPodAffinity (K .../interpodaffinity/filtering.go:37-41, 420-428): the incoming Pod's own required podAffinity
# finds no Pod to join in the node's domain (or the node lacks the term's topologyKey), its own required
# podAntiAffinity finds a Pod it excludes in the node's domain, or a Pod already there excludes it by that Pod's own
# required podAntiAffinity. Checked in that order: a node fails for the first only.
POD_AFFINITY_UNMET = "node(s) didn't match pod affinity rules"
POD_ANTI_AFFINITY_UNMET = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
INTER_POD_TEXTS = (POD_AFFINITY_UNMET, POD_ANTI_AFFINITY_UNMET, EXISTING_ANTI_AFFINITY)

# VolumeRestrictions (K .../volumerestrictions/volume_restrictions.go:60, 297): a ReadWriteOncePod claim of the Pod is
# in use by another Pod (the count is cluster-wide: every node reports it). NodeVolumeLimits (K .../nodevolumelimits/
# csi.go:44, 296, 349): the node's CSI driver attaches no more volumes (CSINode allocatable count), or is not installed
# on the node. DynamicResources PreFilter (K .../dynamicresources/dynamicresources.go:693): a request of a claim names
# a DeviceClass that does not exist ("request <name>: device class <class> does not exist").
RWOP_IN_USE = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
               "another pod")
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
CSI_DRIVER_MISSING = re.compile(r"^(\S+) CSI driver is not installed on the node$")
DEVICE_CLASS_MISSING = re.compile(r"^request (\S+): device class (\S+) does not exist$")

# Texts of K pkg/scheduler/framework/plugins (v1.36.3), by the constraint they report.
_EXACT = {
    "node(s) didn't match Pod's node affinity/selector": Constraint.NODE_SELECTOR,  # nodeaffinity:64
    "node(s) didn't match the requested node name": Constraint.NODE_SELECTOR,  # nodename:43
    "node(s) didn't satisfy plugin(s) [NodeAffinity]": Constraint.NODE_SELECTOR,  # schedule_one.go:687
    "node(s) had untolerated taint(s)": Constraint.TAINT,  # tainttoleration:131
    "node(s) had taints that the pod didn't tolerate": Constraint.TAINT,  # tainttoleration:53
    "node(s) were unschedulable": Constraint.NODE_STATE,  # nodeunschedulable:51
    "node(s) had unknown conditions": Constraint.NODE_STATE,  # nodeunschedulable:49
    "Too many pods": Constraint.RESOURCE,  # noderesources/fit.go:685
    NODE_PORTS_TAKEN: Constraint.PORTS,
    "pod has unbound immediate PersistentVolumeClaims": Constraint.VOLUME,  # volumebinding:378
    "node(s) didn't find available persistent volumes to bind": Constraint.VOLUME,  # binder.go:64
    "node(s) did not have enough free storage": Constraint.VOLUME,  # binder.go:68
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)": Constraint.VOLUME,  # binder.go:70
    "node(s) didn't match PersistentVolume's node affinity": Constraint.VOLUME_NODE_AFFINITY,  # binder.go:66
    "node(s) had no available volume zone": Constraint.VOLUME_NODE_AFFINITY,  # volumezone:61
    PREFILTER_VOLUME_CONFLICT: Constraint.VOLUME_NODE_AFFINITY,
    # dynamicresources:879, 918 (DRA): the devices a claim asks for are taken or not on the node
    "cannot allocate all claims": Constraint.RESOURCE,
    "resourceclaim not available on the node": Constraint.RESOURCE,
}
DEVICE_TEXTS = frozenset({"cannot allocate all claims", "resourceclaim not available on the node"})


def constraint_of(text: str) -> str:
    """The constraint a node-fit reason (or PreFilter text) reports; `Constraint.OTHER` when not one we split."""
    found = _EXACT.get(text)
    if found is not None:
        return found
    if text.startswith("Insufficient "):
        return Constraint.RESOURCE
    if text.startswith("node(s) had untolerated taint"):  # v1.33 and older name it: "{key: value}"
        return Constraint.TAINT
    if text.startswith("persistentvolumeclaim ") or text.startswith("waiting for ephemeral volume controller"):
        return Constraint.VOLUME  # volumebinding:331-346 (not found, lost, being deleted)
    return Constraint.OTHER


def resource_of(text: str) -> str | None:
    """``"Insufficient nvidia.com/gpu"`` -> ``"nvidia.com/gpu"``; ``"Too many pods"`` -> ``"pods"``."""
    if text.startswith("Insufficient "):
        return text[len("Insufficient "):].strip() or None
    return "pods" if text == "Too many pods" else None


def claim_of(text: str) -> str | None:
    """The claim a volumebinding PreFilter text names: ``persistentvolumeclaim "data" not found`` -> ``data``."""
    for prefix in ("persistentvolumeclaim \"", "waiting for ephemeral volume controller to create the "
                   "persistentvolumeclaim \""):
        if text.startswith(prefix):
            end = text.find('"', len(prefix))
            return text[len(prefix):end] if end > len(prefix) else None
    return None


def named_taint(text: str) -> str | None:
    """v1.33 and older: ``node(s) had untolerated taint {dedicated: gpu}`` -> ``dedicated=gpu``."""
    start, end = text.find("{"), text.rfind("}")
    if not text.startswith("node(s) had untolerated taint {") or end < start:
        return None
    key, _, value = text[start + 1:end].partition(":")
    value = value.strip()
    return f"{key.strip()}={value}" if value else key.strip()


# DefaultPreemption (K .../defaultpreemption/default_preemption.go:183,381): the Pod already preempted victims
# on its nominated node and waits for them to terminate.
PREEMPTION_WAITING = ("not eligible due to a terminating pod on the nominated node",
                      "waiting for the preemption for this pod to be finished")


def decisive(failure: SchedulingFailure) -> tuple[str, tuple[NodeFitReason, ...]]:
    """The constraint that blocks the nodes that got furthest through kube-scheduler's filters, and its
    reasons. Taints and selectors come before the others in the filter order, so a node reported for
    "Insufficient cpu" matched the selector and tolerated the taints: that resource is what blocks."""
    by: dict[str, list[NodeFitReason]] = {}
    for r in failure.reasons:
        by.setdefault(constraint_of(r.text), []).append(r)
    if not by:
        return Constraint.OTHER, ()
    best = max(by, key=lambda c: (STAGE[c], sum(r.count for r in by[c])))
    if best in (Constraint.TAINT, Constraint.NODE_SELECTOR, Constraint.NODE_STATE) and len(by) > 1:
        # only these early stages: a node rejected for a taint was never checked against the selector;
        # the larger count decides here (the callers refine it from the Nodes when they have them)
        early = {c: v for c, v in by.items()
                 if c in (Constraint.TAINT, Constraint.NODE_SELECTOR, Constraint.NODE_STATE)}
        best = max(early, key=lambda c: (sum(r.count for r in early[c]), -STAGE[c]))
    return best, tuple(by[best])
