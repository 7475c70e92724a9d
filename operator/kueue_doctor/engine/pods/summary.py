"""The Pod summary of one admitted Workload: counts, and the blocked Pods grouped by what blocks them.

`summarize_pods` counts the Pods that exist, are scheduled, running and ready, and puts every other Pod
into one `PodBlocker` group per (category, reason), keeping one exact upstream message per group and the
earliest time the group has been blocked::

    0/8 scheduled, 0 running, 0 ready: 8 Unschedulable (0/3 nodes: 3 Insufficient nvidia.com/gpu)

An unbound Pod waits for its scheduling gates, for kube-scheduler (its verdict, `scheduler.py`) or for a
first attempt; a bound one for the kubelet (`kubelet.py`) or its readiness probes. Events (`events.py`)
fill in what the Pod object does not say: a ``FailedScheduling`` message, ``FailedMount`` and the like.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...kube.objects import (
    EMPTY,
    KUEUE_GROUP,
    as_time,
    clip,
    conditions,
    earliest,
    format_duration,
    int_or_none,
    lst,
    m,
    s,
)
from .events import EventInfo, PodEvents
from .kubelet import (
    BENIGN_WAITING_REASONS,
    IMAGE_PULL_EVENT_REASONS,
    PULLING_IMAGE,
    STARTUP_EVENT_REASONS,
    container_blocker,
    failed_pod,
)
from .peers import OPERATOR_LABEL, Peer, connection_failure, peer_of
from .scheduler import NO_NODES_MESSAGE, SchedulingFailure, parse_scheduler_message

# Kueue's own scheduling gates; it removes them itself once the Workload is admitted (and placed, for TAS).
KUEUE_GATES = (f"{KUEUE_GROUP}/admission", f"{KUEUE_GROUP}/topology", f"{KUEUE_GROUP}/elastic-job")
_KUEUE_PREFIX = f"{KUEUE_GROUP}/"
# The Pod events the summary reads: start-up trouble, the scheduler's verdict, failing readiness probes.
# the resourceclaim controller cannot make a Pod's claim from its ResourceClaimTemplate (K pkg/controller/
# resourceclaim/controller.go): the Pod is never scheduled
CLAIM_NOT_CREATED = "FailedResourceClaimCreation"
_EVENT_REASONS_KEPT = frozenset({*STARTUP_EVENT_REASONS, *IMAGE_PULL_EVENT_REASONS, "FailedScheduling", "Unhealthy",
                                 CLAIM_NOT_CREATED})

# Categories of blocked Pods, most severe first (the order breaks ties between groups of equal size).
#   Failing                containers crash / the Pod failed
#   Unschedulable          kube-scheduler cannot place the Pod (PodScheduled=False)
#   ContainersNotStarting  bound to a node, containers not running yet (image, volumes, config, sandbox)
#   NotReady               containers run, the Pod is not Ready (readiness probes)
#   SchedulingGated        spec.schedulingGates not empty: the scheduler does not even try
#   Pending                not bound, no scheduling attempt recorded (scheduler down, wrong schedulerName)
#   Terminating            metadata.deletionTimestamp is set
CATEGORIES = (
    "Failing", "Unschedulable", "ContainersNotStarting", "NotReady", "SchedulingGated", "Pending",
    "Terminating",
)
_SEVERITY = {c: i for i, c in enumerate(CATEGORIES)}

# PodScheduled=False message the API server writes for gated Pods (pkg/registry/core/pod/strategy.go).
DEFAULT_SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
# Messages kept on a PodBlocker are cut to this many characters.
MESSAGE_LIMIT = 500


def _cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return clip(text, limit) or ""


@dataclass(frozen=True)
class PodBlocker:
    """One group of Pods blocked for the same reason."""

    category: str  # one of CATEGORIES
    reason: str  # gate name(s) / top node-fit reason / kubelet waiting reason / event reason ...
    count: int
    message: str  # exact upstream text of the representative Pod, cut to MESSAGE_LIMIT
    pod: str  # the representative Pod
    since: datetime | None  # earliest transition / event time seen in this group
    detail: str = ""  # e.g. "OOMKilled, exit code 137", "init container setup", "schedulerName my-sched"
    failure: SchedulingFailure | None = None  # Unschedulable groups: the representative parsed message
    pods: tuple[str, ...] = ()  # up to 10 Pod names of this group, sorted
    # Failing Pods their operator started before the Pods they need (`peers.py`), which are not up: the role they
    # wait for (an MPIJob launcher's "worker"). Their failures follow from that wait, so the group ranks last.
    waits_for: str = ""

    @property
    def kueue_gated(self) -> bool:
        """SchedulingGated by one of Kueue's own gates (Kueue removes them), not by another controller."""
        return self.category == "SchedulingGated" and any(
            is_kueue_gate(g) for g in self.reason.split(", ")
        )

    def label(self) -> str:
        """The blocker without its count, as ``PodSummary.describe`` prints it."""
        if self.category == "Unschedulable":
            if self.reason == BINDING:
                return f"binding ({self.detail})"
            if self.failure is not None and self.failure.reasons:
                return f"Unschedulable ({self.failure.short()})"
            return f"Unschedulable: {_cut(self.reason, 160)}"
        if self.category == "SchedulingGated":
            return f"SchedulingGated ({self.reason})"
        if self.category == "Pending":
            text = "Pending (no scheduling attempt yet)"
            return f"{text[:-1]}, {self.detail})" if self.detail else text
        if self.category == "Terminating":
            return "Terminating"
        if self.category == "NotReady" and self.reason == "NotReady":
            return "NotReady"
        base = f"NotReady ({self.reason})" if self.category == "NotReady" else self.reason
        return f"{base} ({self.detail})" if self.detail else base


@dataclass(frozen=True)
class PodSummary:
    expected: int
    created: int
    scheduled: int
    running: int
    ready: int
    succeeded: int
    failed: int
    terminating: int
    blockers: tuple[PodBlocker, ...]  # most Pods first, then category severity
    failure: SchedulingFailure | None  # the most common parsed scheduler message, if any
    first_ready: datetime | None = None  # earliest Ready=True transition among ready Pods
    last_ready: datetime | None = None  # latest one: when the last of the ready Pods became ready
    observed_at: datetime | None = None  # `now` as given to summarize_pods
    history: tuple[PodBlocker, ...] = ()  # failed Pods that were replaced (drained, or a newer Pod took over)

    @property
    def active(self) -> int:
        """Pods that exist and are neither finished nor terminating."""
        return self.created - self.succeeded - self.failed - self.terminating

    @property
    def all_ready(self) -> bool:
        return self.expected > 0 and self.ready >= self.expected

    def blocked(self, category: str) -> int:
        return sum(b.count for b in self.blockers if b.category == category)

    def describe(self) -> str:
        """One line for an SRE, e.g.
        ``"1/8 scheduled, 0 running, 0 ready: 7 Unschedulable (0/3 nodes: 3 Insufficient nvidia.com/gpu);
        1 ImagePullBackOff"``."""
        return self._description

    @functools.cached_property
    def _description(self) -> str:
        """`describe`, once per summary (immutable): the verdict's text and status.pods both print it."""
        of = self.expected if self.expected > 0 else self.created
        if self.all_ready and not self.blockers:
            head = f"{self.ready}/{of} ready"
        else:
            head = f"{self.scheduled}/{of} scheduled, {self.running} running, {self.ready} ready"
            if self.created < self.expected:
                head = f"{self.created}/{self.expected} created, {head}"
        replaced = sum(b.count for b in self.history)
        extra = [f"{n} {word}" for n, word in ((self.succeeded, "succeeded"), (self.failed, "failed"),
                                                (self.terminating, "terminating"), (replaced, "replaced")) if n]
        if extra:
            head = f"{head}, {', '.join(extra)}"
        if not self.blockers:
            return head
        parts = []
        for b in self.blockers:
            text = f"{b.count} {b.label()}"
            if self.observed_at is not None and b.since is not None and b.category != "Failing":
                text += f" for {format_duration(self.observed_at - b.since)}"
            parts.append(text)
        return f"{head}: {'; '.join(parts)}"



def is_kueue_gate(name: str) -> bool:
    return name in KUEUE_GATES or name.startswith(_KUEUE_PREFIX)


@dataclass
class _Group:
    category: str
    reason: str
    count: int = 0
    since: datetime | None = None
    messages: Counter[str] = field(default_factory=Counter)
    pod_of: dict[str, str] = field(default_factory=dict)  # message -> smallest pod name with it
    detail_of: dict[str, str] = field(default_factory=dict)  # message -> detail of that pod
    names: list[str] = field(default_factory=list)
    waits_for: str = ""  # see PodBlocker.waits_for

    def add(self, pod: str, message: str, since: datetime | None, detail: str) -> None:
        self.count += 1
        self.since = earliest(self.since, since)
        self.messages[message] += 1
        old = self.pod_of.get(message)
        if old is None or pod < old:
            self.pod_of[message] = pod
            self.detail_of[message] = detail
        self.names.append(pod)

    def freeze(self) -> PodBlocker:
        message = min(self.messages, key=lambda msg: (-self.messages[msg], self.pod_of[msg]))
        failure = parse_scheduler_message(message) if self.category == "Unschedulable" and message else None
        return PodBlocker(
            category=self.category, reason=self.reason, count=self.count, message=_cut(message),
            pod=self.pod_of[message], since=self.since, detail=self.detail_of[message], failure=failure,
            pods=tuple(sorted(self.names)[:10]), waits_for=self.waits_for,
        )


# what a Pod that is neither failed nor going away waits for: not up yet, and nothing it did wrong
_WAITING = frozenset({"Unschedulable", "ContainersNotStarting", "NotReady", "SchedulingGated", "Pending"})


def _mark_early_starters(groups: Mapping[tuple[str, str], _Group], peers: Mapping[str, Peer]) -> None:
    """Mark the Failing groups made only of Pods their operator started before the peers they need (`peers.py`),
    failing as a process that cannot reach them does, while some of those peers still wait: their failures
    follow from that wait, which then leads the summary."""
    waiting = set()
    for group in groups.values():
        if group.category in _WAITING:
            for pod in group.names:
                peer = peers.get(pod)
                if peer is not None:
                    waiting.add((peer.operator, peer.job, peer.role))
    if not waiting:
        return
    for group in groups.values():
        if group.category != "Failing" or not all(connection_failure(group.reason, d)
                                                  for d in group.detail_of.values()):
            continue
        found = [peers.get(pod) for pod in group.names]
        if all(p is not None and p.needs and (p.operator, p.job, p.needs) in waiting for p in found):
            group.waits_for = found[0].needs if found[0] is not None else ""


def _scheduled_and_ready(status: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The Pod's PodScheduled and Ready conditions, the last of each type as in `conditions` (one scan of the
    list instead of a dict of all of them: asked for every Pod of every Workload)."""
    sched = ready = EMPTY
    for cond in lst(status.get("conditions")):
        if type(cond) is dict or isinstance(cond, Mapping):
            ctype = cond.get("type")
            if ctype == "PodScheduled":
                sched = cond
            elif ctype == "Ready":
                ready = cond
    return sched, ready


_Blocked = tuple[str, str, str, datetime | None, str]  # category, reason, message, since, detail


# An unbound Pod with status.nominatedNodeName and no verdict yet: kube-scheduler chose that node and its binding cycle
# waits (K pkg/scheduler/schedule_one.go:410-425, NominatedNodeNameForExpectation, on by default since v1.35) for a
# PreBind plugin (volumes to provision, DRA devices) or a Permit plugin. Not "no scheduling attempt".
BINDING = "Binding"


def _unbound_blocker(spec: Mapping[str, Any], sched: Mapping[str, Any], created_at: datetime | None,
                     evs: Mapping[str, EventInfo], nominated: str = "") -> _Blocked:
    """Why a Pod without a node waits: scheduling gates, the scheduler's verdict, or no attempt yet."""
    sched_since = as_time(sched.get("lastTransitionTime"))
    raw_gates = lst(spec.get("schedulingGates"))
    gates = sorted({s(m(g).get("name")) or "" for g in raw_gates} - {""}) if raw_gates else []
    if gates:
        message = s(sched.get("message")) or DEFAULT_SCHEDULING_GATED_MESSAGE
        return "SchedulingGated", ", ".join(gates), message, sched_since or created_at, ""
    # A SchedulingGated condition without gates is stale: the scheduler has not tried since the ungating.
    judged = s(sched.get("status")) == "False" and s(sched.get("reason")) != "SchedulingGated"
    message = (s(sched.get("message")) or "") if judged else ""
    since = sched_since if judged else None
    fs = evs.get("FailedScheduling")
    if not message and fs is not None:
        message, since = fs.message, earliest(since, fs.first)
    if judged and s(sched.get("reason")) == "SchedulerError":
        return "Unschedulable", "SchedulerError", message, since, ""
    if judged or message:
        parsed = parse_scheduler_message(message)
        top = parsed.top_reason
        if top is not None:
            key = top.text
        elif parsed.total == 0:
            key = NO_NODES_MESSAGE
        else:
            key = _cut(message, 160) or "Unschedulable"
        return "Unschedulable", key, message, since, ""
    if nominated:
        return "Unschedulable", BINDING, "", created_at, f"node {nominated}"
    claim = evs.get(CLAIM_NOT_CREATED)
    if claim is not None:  # the scheduler does not try a Pod whose ResourceClaims do not exist yet
        return "Pending", CLAIM_NOT_CREATED, claim.message, earliest(created_at, claim.first), ""
    scheduler = s(spec.get("schedulerName"))
    detail = f"schedulerName {scheduler}" if scheduler and scheduler != "default-scheduler" else ""
    return "Pending", "NoSchedulingAttempt", "", created_at, detail


def _pulling(evs: Mapping[str, EventInfo]) -> EventInfo | None:
    """The kubelet's newest "Pulling image" event when no "Pulled" came after it: a pull still under way."""
    pulling, pulled = evs.get("Pulling"), evs.get("Pulled")
    if pulling is None or (pulled is not None and (pulling.last is None or (
            pulled.last is not None and pulled.last >= pulling.last))):
        return None
    return pulling


def _bound_blocker(spec: Mapping[str, Any], status: Mapping[str, Any], phase: str, sched: Mapping[str, Any],
                   ready_cond: Mapping[str, Any], created_at: datetime | None,
                   evs: Mapping[str, EventInfo]) -> _Blocked:
    """Why a Pod on a node is not ready: container errors, startup trouble (events), or readiness."""
    node = s(spec.get("nodeName")) or ""
    not_ready_since = as_time(ready_cond.get("lastTransitionTime"))
    if phase == "Unknown":
        return "Failing", "Unknown", s(status.get("message")) or "", not_ready_since, f"node {node}" if node else ""
    started_since = created_at
    if s(sched.get("status")) == "True":
        started_since = earliest(as_time(sched.get("lastTransitionTime")), created_at)
    found = container_blocker(status)
    if found is not None and found[0] == "Failing":
        return found[0], found[1], found[2], not_ready_since or started_since, found[3]
    if found is not None and found[1] not in BENIGN_WAITING_REASONS:
        return found[0], found[1], found[2], started_since, found[3]
    has_statuses = bool(lst(status.get("containerStatuses")) or lst(status.get("initContainerStatuses")))
    if found is not None or not has_statuses or phase == "Pending":
        startup = next((r for r in STARTUP_EVENT_REASONS if r in evs), None)
        if startup is not None:  # FailedMount & co. say why ContainerCreating lasts
            info = evs[startup]
            return ("ContainersNotStarting", startup, info.message, earliest(started_since, info.first),
                    found[1] if found else "")
        pulling = _pulling(evs) if found is not None and found[1] == "ContainerCreating" else None
        if found is not None and pulling is not None:  # the kubelet's event names the image the status does not
            return (found[0], found[1], pulling.message, started_since,
                    ", ".join(p for p in (PULLING_IMAGE, found[3]) if p))
        if found is not None:
            return found[0], found[1], found[2], started_since, found[3]
        # Bound but no container status at all: the kubelet has not reported (or there is none: fake nodes).
        return "ContainersNotStarting", "NoContainerStatus", "", started_since, f"node {node}" if node else ""
    unhealthy = evs.get("Unhealthy")
    if unhealthy is not None:
        return "NotReady", "Unhealthy", unhealthy.message, not_ready_since or started_since, ""
    return "NotReady", "NotReady", s(ready_cond.get("message")) or "", not_ready_since or started_since, ""


# A Pod evicted by a drain, preempted by kube-scheduler or deleted by the taint manager (K pkg/apis/core
# DisruptionTarget): it failed for the node's or the cluster's sake, and its controller replaces it.
DISRUPTION_TARGET = "DisruptionTarget"
_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


# Kueue's TAS node controller fails a Pod pinned to a node with a taint it does not tolerate before it ever ran
# (Kueue v0.19.2 pkg/controller/tas/node_controller.go markPodsFailed): phase Failed and this condition, reason
# UnschedulableOnAssignedNode; the Pod's controller replaces it, and a Job counts it against its backoffLimit.
TERMINATED_BY_KUEUE = "TerminatedByKueue"


def why_failed(status: Mapping[str, Any]) -> tuple[str, str, str]:
    """`failed_pod`, or Kueue's TerminatedByKueue condition for a Pod Kueue failed (no status reason, no
    container that ran): ``(reason, message, detail)``."""
    found = failed_pod(status)
    if found[0] != "Failed" or found[2]:
        return found
    for cond in lst(status.get("conditions")):
        cond = m(cond)
        if cond.get("type") == TERMINATED_BY_KUEUE and cond.get("status") == "True":
            return TERMINATED_BY_KUEUE, s(cond.get("message")) or "", s(cond.get("reason")) or ""
    return found


def _index_of(md: Mapping[str, Any]) -> str | None:
    return s(m(md.get("annotations")).get(_COMPLETION_INDEX)) or s(m(md.get("labels")).get(_COMPLETION_INDEX))


def replaced_pods(pods: Sequence[Mapping[str, Any]], expected: int) -> dict[str, str]:
    """Failed Pods that are history, by name -> why: disrupted (DisruptionTarget=True), or a newer Pod of
    the same completion index exists, or (no index) enough newer Pods fill the expected count."""
    out: dict[str, str] = {}
    failed: list[tuple[str, str, Mapping[str, Any]]] = []  # (creation, name, metadata)
    newest_by_index: dict[str, str] = {}
    filled = 0
    for pod in pods:
        if not isinstance(pod, Mapping):
            continue
        md = m(pod.get("metadata"))
        created = s(md.get("creationTimestamp")) or ""
        index = _index_of(md)
        if index is not None and created > newest_by_index.get(index, ""):
            newest_by_index[index] = created
        if s(m(pod.get("status")).get("phase")) != "Failed":
            filled += 1
            continue
        nm = s(md.get("name")) or ""
        disrupted = conditions(pod).get(DISRUPTION_TARGET)
        if s(m(disrupted).get("status")) == "True":
            out[nm] = f"{DISRUPTION_TARGET} {s(m(disrupted).get('reason')) or ''}".strip()
            continue
        failed.append((created, nm, md))
    slots = expected - filled
    for created, nm, md in sorted(failed, reverse=True):
        index = _index_of(md)
        if index is not None:
            if newest_by_index.get(index, "") > created:
                out[nm] = f"replaced by a newer Pod of index {index}"
        elif expected > 0 and slots <= 0:
            out[nm] = "replaced by a newer Pod"
        else:
            slots -= 1
    return out


def summarize_pods(
    pods: Sequence[Mapping[str, Any]],
    expected: object,  # an int; anything else counts as 0 (a malformed count never raises)
    events: Sequence[Mapping[str, Any]] = (),
    now: datetime | None = None,
) -> PodSummary:
    """Count the Pods of one admitted Workload and group the ones not ready by what blocks them.

    ``expected``: how many Pods the admitted PodSets ask for. ``events``: Events about these Pods
    (either API shape; others are ignored). Unschedulable Pods take their message from the
    ``PodScheduled=False`` condition and fall back to the newest ``FailedScheduling`` event.
    """
    index = PodEvents(events, _EVENT_REASONS_KEPT)
    expected_n = max(0, int_or_none(expected) or 0)
    created = scheduled = running = ready = succeeded = failed = terminating = 0
    first_ready: datetime | None = None
    last_ready: datetime | None = None
    groups: dict[tuple[str, str], _Group] = {}
    past: dict[tuple[str, str], _Group] = {}
    unschedulable_messages: dict[str, int] = {}  # a plain dict: a Counter's constructor is Python code, per Workload
    peers: dict[str, Peer] = {}  # Pods of operators that start some Pods before the ones they need

    def block(category: str, reason: str, pod: str, message: str, since: datetime | None,
              detail: str = "", into: dict[tuple[str, str], _Group] = groups) -> None:
        group = into.get((category, reason))
        if group is None:
            group = into[category, reason] = _Group(category, reason)
        group.add(pod, message, since, detail)

    listed = pods if type(pods) is list or (isinstance(pods, Iterable) and not isinstance(pods, str | bytes)) \
        else ()
    history = replaced_pods(listed, expected_n) if any(
        s(m(m(p).get("status")).get("phase")) == "Failed" for p in listed) else {}
    for pod in listed:
        if type(pod) is not dict and not isinstance(pod, Mapping):  # the ABC check only for the rare non-dict
            continue
        md = m(pod.get("metadata"))
        spec = m(pod.get("spec"))
        status = m(pod.get("status"))
        name = s(md.get("name")) or ""
        phase = s(status.get("phase")) or ""
        created_at = as_time(md.get("creationTimestamp"))
        pod_labels = m(md.get("labels"))
        if OPERATOR_LABEL in pod_labels:
            peer = peer_of(pod_labels)
            if peer is not None:
                peers[name] = peer

        if phase == "Failed" and name in history:  # history: kept apart, never the verdict
            reason, message, detail = why_failed(status)
            finished = as_time(m(conditions(pod).get("Ready")).get("lastTransitionTime"))
            block("Replaced", reason, name, message, finished,
                  ", ".join(p for p in (detail, history[name]) if p), into=past)
            continue
        created += 1
        if phase == "Succeeded":
            succeeded += 1
            continue
        if phase == "Failed":
            failed += 1
            reason, message, detail = why_failed(status)
            finished = as_time(m(conditions(pod).get("Ready")).get("lastTransitionTime"))
            block("Failing", reason, name, message, finished, detail)
            continue
        deleted_at = md.get("deletionTimestamp")
        if deleted_at:
            terminating += 1
            block("Terminating", "Terminating", name, s(status.get("message")) or "", as_time(deleted_at))
            continue

        sched, ready_cond = _scheduled_and_ready(status)
        is_scheduled = bool(s(spec.get("nodeName"))) or s(sched.get("status")) == "True"
        if is_scheduled:
            scheduled += 1
        if phase == "Running":
            running += 1
        if s(ready_cond.get("status")) == "True":
            ready += 1
            t = as_time(ready_cond.get("lastTransitionTime"))
            if t is not None:
                first_ready = earliest(first_ready, t)
                last_ready = t if last_ready is None or t > last_ready else last_ready
            continue

        evs = index.for_pod(name, s(md.get("namespace")) or "", s(md.get("uid")) or "")
        if is_scheduled:
            found = _bound_blocker(spec, status, phase, sched, ready_cond, created_at, evs)
        else:
            found = _unbound_blocker(spec, sched, created_at, evs, s(status.get("nominatedNodeName")) or "")
        category, reason, message, since, detail = found
        if category == "Unschedulable" and reason != "SchedulerError" and message:
            unschedulable_messages[message] = unschedulable_messages.get(message, 0) + 1
        block(category, reason, name, message, since, detail)

    if peers:
        _mark_early_starters(groups, peers)
    # a normal wait (an init container running, containers being created) never leads: the Pods behind it often
    # wait for the others (PyTorch workers for their master, Ray workers for the head's GCS); but failures that
    # follow from such a wait (an MPIJob launcher started before its workers are up) rank after it
    blockers = tuple(sorted((g.freeze() for g in groups.values()),
                            key=lambda b: (bool(b.waits_for),
                                           b.category == "ContainersNotStarting" and b.reason in BENIGN_WAITING_REASONS,
                                           -b.count, _SEVERITY.get(b.category, 99), b.reason)))
    failure: SchedulingFailure | None = None
    if unschedulable_messages:
        top_message = min(unschedulable_messages, key=lambda msg: (-unschedulable_messages[msg], msg))
        failure = parse_scheduler_message(top_message)
    return PodSummary(
        expected=expected_n, created=created, scheduled=scheduled, running=running, ready=ready,
        succeeded=succeeded, failed=failed, terminating=terminating, blockers=blockers, failure=failure,
        first_ready=first_ready, last_ready=last_ready,
        observed_at=as_time(now) if now is not None else None,
        history=tuple(sorted((g.freeze() for g in past.values()), key=lambda b: (-b.count, b.reason))),
    )
