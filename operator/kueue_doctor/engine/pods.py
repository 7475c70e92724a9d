"""The Pod side of a diagnosis: what the Pods of one admitted Workload are waiting for.

Once Kueue has admitted a Workload its Pods still have to be created (Job controller), placed on
nodes (kube-scheduler) and started (kubelet). This module reads the Pods and the Events about them,
exactly as the API server returns them (plain dicts), and says how many exist, are scheduled,
running and ready, and groups the others by what blocks them, keeping one exact upstream message
per group::

    0/8 scheduled, 0 running, 0 ready: 8 Unschedulable (0/3 nodes: 3 Insufficient nvidia.com/gpu)

Pure and stdlib-only: no I/O, no clock (pass ``now``), never raises on malformed input.

Texts it reads (pinned to Kubernetes v1.36.3; ``tests/cases/pod_messages.yaml`` keeps one example of
each with its source):

* kube-scheduler ``FitError.Error()`` (``pkg/scheduler/framework/types.go``), written both into the
  ``PodScheduled=False`` condition (reason ``Unschedulable`` or ``SchedulerError``) and, cut to 1024
  characters with a ``" ..."`` suffix, into the ``FailedScheduling`` event::

      0/<all>: nodes are available: <PreFilter message>. <PostFilter messages>
      0/<all> nodes are available: <n> <reason>, <n> <reason>. <PostFilter messages>

  The ``<n> <reason>`` items are sorted as *strings* (``"10 x"`` sorts before ``"2 y"``). PostFilter
  messages are joined with ``", "``; with DynamicResources on (default) a Pod without claims gets
  ``"no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful
  for scheduling."``. Older releases ended with a second period (``"scheduling.."``), and up to v1.33
  named the taint (``"node(s) had untolerated taint {dedicated: gpu}"``) where v1.34+ write
  ``"node(s) had untolerated taint(s)"``. Both shapes are read.
* kubelet container ``state.waiting.reason`` / ``state.terminated.reason`` and its events.
* Job controller ``FailedCreate`` events (``"Error creating: pods \\"x\\" is forbidden: exceeded
  quota: ..."``, webhook denials).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "BENIGN_WAITING_REASONS",
    "CATEGORIES",
    "DEFAULT_SCHEDULING_GATED_MESSAGE",
    "KUEUE_GATES",
    "MESSAGE_LIMIT",
    "NO_NODES_MESSAGE",
    "NodeFitReason",
    "PodBlocker",
    "PodSummary",
    "SchedulingFailure",
    "event_count",
    "event_first_time",
    "event_message",
    "event_time",
    "is_kueue_gate",
    "job_failed_create",
    "parse_scheduler_message",
    "parse_time",
    "summarize_pods",
]

KUEUE_GATES = ("kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology", "kueue.x-k8s.io/elastic-job")

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
# ErrNoNodesAvailable in pkg/scheduler/scheduler.go: the cluster has no nodes at all.
NO_NODES_MESSAGE = "no nodes available to schedule pods"
# Messages kept on a PodBlocker are cut to this many characters.
MESSAGE_LIMIT = 500

# kubelet waiting reasons that are normal for a short while (the engine decides how long, from `since`).
BENIGN_WAITING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})
# Waiting reasons that mean the container ran and keeps failing, not that it cannot start.
_FAILING_WAITING_REASONS = frozenset({"CrashLoopBackOff", "RunContainerError", "PostStartHookError"})
# kubelet events that explain a Pod stuck in ContainerCreating, most telling first.
_STARTUP_EVENT_REASONS = (
    "FailedCreatePodSandBox", "FailedPrepareDynamicResources", "FailedAttachVolume", "FailedMapVolume",
    "FailedMount",
)
_EVENT_REASONS_KEPT = frozenset({*_STARTUP_EVENT_REASONS, "FailedScheduling", "Unhealthy"})

_EMPTY: Mapping[str, Any] = {}
_NODES_ARE_AVAILABLE = " nodes are available"
_PREEMPTION = "preemption: "
_TRUNCATED = " ..."


# --------------------------------------------------------------------------------------------------
# Result types


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

    @property
    def top_reason(self) -> NodeFitReason | None:
        """The reason that rejected the most nodes; on a tie, the more actionable one."""
        if not self.reasons:
            return None
        return min(self.reasons, key=lambda r: (-r.count, _reason_rank(r.text)))

    def short(self) -> str:
        """``"0/3 nodes: 2 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)"``."""
        if self.total == 0 and not self.reasons:
            return NO_NODES_MESSAGE
        if not self.reasons:
            return _bound(self.raw, 200)
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

    @property
    def kueue_gated(self) -> bool:
        """SchedulingGated by one of Kueue's own gates (Kueue removes them), not by another controller."""
        return self.category == "SchedulingGated" and any(
            is_kueue_gate(g) for g in self.reason.split(", ")
        )

    def label(self) -> str:
        """The blocker without its count, as ``PodSummary.describe`` prints it."""
        if self.category == "Unschedulable":
            if self.failure is not None and self.failure.reasons:
                return f"Unschedulable ({self.failure.short()})"
            return f"Unschedulable: {_bound(self.reason, 160)}"
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
        of = self.expected if self.expected > 0 else self.created
        if self.all_ready and not self.blockers:
            head = f"{self.ready}/{of} ready"
        else:
            head = f"{self.scheduled}/{of} scheduled, {self.running} running, {self.ready} ready"
            if self.created < self.expected:
                head = f"{self.created}/{self.expected} created, {head}"
        extra = [f"{n} {word}" for n, word in ((self.succeeded, "succeeded"), (self.failed, "failed"),
                                                (self.terminating, "terminating")) if n]
        if extra:
            head = f"{head}, {', '.join(extra)}"
        if not self.blockers:
            return head
        parts = []
        for b in self.blockers:
            text = f"{b.count} {b.label()}"
            if self.observed_at is not None and b.since is not None and b.category != "Failing":
                text += f" for {_age(self.observed_at - b.since)}"
            parts.append(text)
        return f"{head}: {'; '.join(parts)}"


# --------------------------------------------------------------------------------------------------
# Tolerant field access


def _m(x: object) -> Mapping[str, Any]:
    if type(x) is dict:  # the common case, without the slower ABC check
        return x
    return x if isinstance(x, Mapping) else _EMPTY


def _seq(x: object) -> Sequence[Any]:
    if type(x) is list:
        return x
    return x if isinstance(x, list | tuple) else ()


def _s(x: object) -> str:
    return x if isinstance(x, str) else ""


def _int(x: object) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _bound(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - len(_TRUNCATED)] + _TRUNCATED


def _age(delta: Any) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 120 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def parse_time(value: object) -> datetime | None:
    """RFC 3339 (``metav1.Time``) or MicroTime (``eventTime``) string, or a datetime; always UTC-aware."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not 10 <= len(value) <= 40:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _min_time(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a <= b else b


# --------------------------------------------------------------------------------------------------
# Events: core/v1 and events.k8s.io/v1 shapes


def event_time(ev: Mapping[str, Any]) -> datetime | None:
    """When the event was last observed, for both Event APIs.

    core/v1: ``series.lastObservedTime``, ``lastTimestamp``, ``eventTime``, ``firstTimestamp``;
    events.k8s.io/v1: ``series.lastObservedTime``, ``deprecatedLastTimestamp``, ``eventTime``,
    ``deprecatedFirstTimestamp``; then ``metadata.creationTimestamp``. Events written through
    events.k8s.io (kube-scheduler, controller-runtime) and read as core/v1 have null
    ``lastTimestamp`` and carry ``eventTime`` and ``series`` instead.
    """
    ev = _m(ev)
    for value in (_m(ev.get("series")).get("lastObservedTime"), ev.get("lastTimestamp"),
                  ev.get("deprecatedLastTimestamp"), ev.get("eventTime"), ev.get("firstTimestamp"),
                  ev.get("deprecatedFirstTimestamp"), _m(ev.get("metadata")).get("creationTimestamp")):
        t = parse_time(value)
        if t is not None:
            return t
    return None


def event_first_time(ev: Mapping[str, Any]) -> datetime | None:
    """When the event (or its series) was first observed, for both Event APIs."""
    ev = _m(ev)
    for value in (ev.get("firstTimestamp"), ev.get("deprecatedFirstTimestamp"), ev.get("eventTime"),
                  ev.get("lastTimestamp"), ev.get("deprecatedLastTimestamp"),
                  _m(ev.get("metadata")).get("creationTimestamp")):
        t = parse_time(value)
        if t is not None:
            return t
    return None


def event_count(ev: Mapping[str, Any]) -> int:
    """How often it happened: the largest of ``series.count``, ``count``, ``deprecatedCount``; at least 1."""
    ev = _m(ev)
    counts = [c for c in (_int(_m(ev.get("series")).get("count")), _int(ev.get("count")),
                          _int(ev.get("deprecatedCount"))) if c is not None]
    return max(1, *counts) if counts else 1


def event_message(ev: Mapping[str, Any]) -> str:
    """``message`` (core/v1) or ``note`` (events.k8s.io/v1)."""
    ev = _m(ev)
    return _s(ev.get("message")) or _s(ev.get("note"))


def _event_object(ev: Mapping[str, Any]) -> Mapping[str, Any]:
    return _m(ev.get("involvedObject")) or _m(ev.get("regarding"))


def job_failed_create(events: Iterable[Mapping[str, Any]]) -> tuple[str, str, datetime | None] | None:
    """The newest Job controller ``FailedCreate`` event: ``(reason, message, time)``, or None.

    Its message is ``"Error creating: <API error>"`` (``pkg/controller/controller_utils.go``), e.g.
    ``Error creating: pods "train-7xk2p" is forbidden: exceeded quota: team-a, requested: ..., used:
    ..., limited: ...`` or ``Error creating: admission webhook "x" denied the request: ...``.
    Events about other kinds are skipped; events without a kind are accepted.
    """
    best: tuple[str, str, datetime | None] | None = None
    best_key: tuple[bool, datetime] | None = None
    for ev in events if isinstance(events, Iterable) else ():
        ev = _m(ev)
        if _s(ev.get("reason")) != "FailedCreate":
            continue
        kind = _s(_event_object(ev).get("kind"))
        if kind and kind != "Job":
            continue
        t = event_time(ev)
        key = (t is not None, t or datetime.min.replace(tzinfo=UTC))
        if best_key is None or key > best_key:
            best, best_key = ("FailedCreate", event_message(ev), t), key
    return best


@dataclass
class _EventInfo:
    message: str
    last: datetime | None
    first: datetime | None
    count: int


class _PodEvents:
    """Events about Pods, by Pod name: the newest event per (uid, reason) for the reasons we use."""

    def __init__(self, events: object) -> None:
        self._by_name: dict[str, list[tuple[str, str, str, _EventInfo]]] = {}
        for ev in events if isinstance(events, Iterable) and not isinstance(events, str | bytes) else ():
            ev = _m(ev)
            reason = _s(ev.get("reason"))
            if reason not in _EVENT_REASONS_KEPT:
                continue
            obj = _event_object(ev)
            kind = _s(obj.get("kind"))
            name = _s(obj.get("name"))
            if not name or (kind and kind != "Pod"):
                continue
            info = _EventInfo(event_message(ev), event_time(ev), event_first_time(ev), event_count(ev))
            self._by_name.setdefault(name, []).append(
                (_s(obj.get("namespace")), _s(obj.get("uid")), reason, info))

    def for_pod(self, name: str, namespace: str, uid: str) -> dict[str, _EventInfo]:
        found: dict[str, _EventInfo] = {}
        for ns, ev_uid, reason, info in self._by_name.get(name, ()):
            if (ns and namespace and ns != namespace) or (ev_uid and uid and ev_uid != uid):
                continue  # another namespace, or an earlier Pod of the same name
            old = found.get(reason)
            if old is None:
                found[reason] = info
                continue
            newer = info if _later(info.last, old.last) else old
            found[reason] = _EventInfo(newer.message, newer.last, _min_time(old.first, info.first),
                                       max(old.count, info.count))
        return found


def _later(a: datetime | None, b: datetime | None) -> bool:
    return a is not None and (b is None or a >= b)


# --------------------------------------------------------------------------------------------------
# kube-scheduler messages


def parse_scheduler_message(message: str) -> SchedulingFailure:
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
        if clause and not clause.endswith(_TRUNCATED):
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
        if text and not s[start:end].rstrip().endswith(_TRUNCATED):  # an event cut at 1024 characters
            reasons.append(NodeFitReason(count, text))
        pos = min(n, end + 2)
        break
    return tuple(reasons), s[pos:]


# --------------------------------------------------------------------------------------------------
# Pods


def is_kueue_gate(name: str) -> bool:
    return name in KUEUE_GATES or name.startswith("kueue.x-k8s.io/")


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

    def add(self, pod: str, message: str, since: datetime | None, detail: str) -> None:
        self.count += 1
        self.since = _min_time(self.since, since)
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
            category=self.category, reason=self.reason, count=self.count, message=_bound(message),
            pod=self.pod_of[message], since=self.since, detail=self.detail_of[message], failure=failure,
            pods=tuple(sorted(self.names)[:10]),
        )


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for cond in _seq(status.get("conditions")):
        cond = _m(cond)
        ctype = _s(cond.get("type"))
        if ctype:
            out[ctype] = cond
    return out


def _terminated_detail(terminated: Mapping[str, Any]) -> str:
    reason = _s(terminated.get("reason"))
    code = _int(terminated.get("exitCode"))
    parts = [p for p in (reason, f"exit code {code}" if code is not None else "") if p]
    return ", ".join(parts)


def _container_blocker(status: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """The most telling container state: ``(category, reason, message, detail)`` or None if all fine.

    Init containers come first (regular ones only wait with ``PodInitializing`` while they run).
    """
    benign: tuple[str, str, str, str] | None = None
    for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
        for cs in _seq(status.get(key)):
            cs = _m(cs)
            state = _m(cs.get("state"))
            where = f"init container {_s(cs.get('name'))}" if init else ""
            waiting = _m(state.get("waiting"))
            if waiting:
                reason = _s(waiting.get("reason")) or "Waiting"
                message = _s(waiting.get("message"))
                if reason in BENIGN_WAITING_REASONS:
                    benign = benign or ("ContainersNotStarting", reason, message, where)
                    continue
                detail = where
                if reason in _FAILING_WAITING_REASONS:
                    last = _terminated_detail(_m(_m(cs.get("lastState")).get("terminated")))
                    detail = ", ".join(p for p in (last, where) if p)
                    return "Failing", reason, message, detail
                return "ContainersNotStarting", reason, message, detail
            terminated = _m(state.get("terminated"))
            if terminated and _int(terminated.get("exitCode")) not in (0, None):
                reason = _s(terminated.get("reason")) or "Error"
                detail = ", ".join(p for p in (_terminated_detail(terminated), where) if p)
                return "Failing", reason, _s(terminated.get("message")), detail
    return benign


def _failed_pod(status: Mapping[str, Any]) -> tuple[str, str, str]:
    """Why a Pod is in phase Failed: ``(reason, message, detail)``."""
    reason = _s(status.get("reason"))
    message = _s(status.get("message"))
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in _seq(status.get(key)):
            terminated = _m(_m(_m(cs).get("state")).get("terminated"))
            if terminated and _int(terminated.get("exitCode")) not in (0, None):
                detail = _terminated_detail(terminated)
                if reason:
                    return reason, message, detail
                return (_s(terminated.get("reason")) or "Error", _s(terminated.get("message")) or message,
                        detail)
    return reason or "Failed", message, ""

_Blocked = tuple[str, str, str, datetime | None, str]  # category, reason, message, since, detail


def _unbound_blocker(spec: Mapping[str, Any], sched: Mapping[str, Any], created_at: datetime | None,
                     evs: Mapping[str, _EventInfo]) -> _Blocked:
    """Why a Pod without a node waits: scheduling gates, the scheduler's verdict, or no attempt yet."""
    sched_since = parse_time(sched.get("lastTransitionTime"))
    gates = sorted({_s(_m(g).get("name")) for g in _seq(spec.get("schedulingGates"))} - {""})
    if gates:
        message = _s(sched.get("message")) or DEFAULT_SCHEDULING_GATED_MESSAGE
        return "SchedulingGated", ", ".join(gates), message, sched_since or created_at, ""
    # A SchedulingGated condition without gates is stale: the scheduler has not tried since the ungating.
    judged = _s(sched.get("status")) == "False" and _s(sched.get("reason")) != "SchedulingGated"
    message = _s(sched.get("message")) if judged else ""
    since = sched_since if judged else None
    fs = evs.get("FailedScheduling")
    if not message and fs is not None:
        message, since = fs.message, _min_time(since, fs.first)
    if judged and _s(sched.get("reason")) == "SchedulerError":
        return "Unschedulable", "SchedulerError", message, since, ""
    if judged or message:
        parsed = parse_scheduler_message(message)
        top = parsed.top_reason
        if top is not None:
            key = top.text
        elif parsed.total == 0:
            key = NO_NODES_MESSAGE
        else:
            key = _bound(message, 160) or "Unschedulable"
        return "Unschedulable", key, message, since, ""
    scheduler = _s(spec.get("schedulerName"))
    detail = f"schedulerName {scheduler}" if scheduler and scheduler != "default-scheduler" else ""
    return "Pending", "NoSchedulingAttempt", "", created_at, detail


def _bound_blocker(spec: Mapping[str, Any], status: Mapping[str, Any], phase: str, sched: Mapping[str, Any],
                   ready_cond: Mapping[str, Any], created_at: datetime | None,
                   evs: Mapping[str, _EventInfo]) -> _Blocked:
    """Why a Pod on a node is not ready: container errors, startup trouble (events), or readiness."""
    node = _s(spec.get("nodeName"))
    not_ready_since = parse_time(ready_cond.get("lastTransitionTime"))
    if phase == "Unknown":
        return "Failing", "Unknown", _s(status.get("message")), not_ready_since, f"node {node}" if node else ""
    started_since = created_at
    if _s(sched.get("status")) == "True":
        started_since = _min_time(parse_time(sched.get("lastTransitionTime")), created_at)
    found = _container_blocker(status)
    if found is not None and found[0] == "Failing":
        return found[0], found[1], found[2], not_ready_since or started_since, found[3]
    if found is not None and found[1] not in BENIGN_WAITING_REASONS:
        return found[0], found[1], found[2], started_since, found[3]
    has_statuses = bool(_seq(status.get("containerStatuses")) or _seq(status.get("initContainerStatuses")))
    if found is not None or not has_statuses or phase == "Pending":
        startup = next((r for r in _STARTUP_EVENT_REASONS if r in evs), None)
        if startup is not None:  # FailedMount & co. say why ContainerCreating lasts
            info = evs[startup]
            return ("ContainersNotStarting", startup, info.message, _min_time(started_since, info.first),
                    found[1] if found else "")
        if found is not None:
            return found[0], found[1], found[2], started_since, found[3]
        # Bound but no container status at all: the kubelet has not reported (or there is none: fake nodes).
        return "ContainersNotStarting", "NoContainerStatus", "", started_since, f"node {node}" if node else ""
    unhealthy = evs.get("Unhealthy")
    if unhealthy is not None:
        return "NotReady", "Unhealthy", unhealthy.message, not_ready_since or started_since, ""
    return "NotReady", "NotReady", _s(ready_cond.get("message")), not_ready_since or started_since, ""


def summarize_pods(
    pods: Sequence[Mapping[str, Any]],
    expected: int,
    events: Sequence[Mapping[str, Any]] = (),
    now: datetime | None = None,
) -> PodSummary:
    """Count the Pods of one admitted Workload and group the ones not ready by what blocks them.

    ``expected``: how many Pods the admitted PodSets ask for. ``events``: Events about these Pods
    (either API shape; others are ignored). Unschedulable Pods take their message from the
    ``PodScheduled=False`` condition and fall back to the newest ``FailedScheduling`` event.
    """
    index = _PodEvents(events)
    expected_n = max(0, _int(expected) or 0)
    created = scheduled = running = ready = succeeded = failed = terminating = 0
    first_ready: datetime | None = None
    last_ready: datetime | None = None
    groups: dict[tuple[str, str], _Group] = {}
    unschedulable_messages: Counter[str] = Counter()

    def block(category: str, reason: str, pod: str, message: str, since: datetime | None,
              detail: str = "") -> None:
        group = groups.get((category, reason))
        if group is None:
            group = groups[category, reason] = _Group(category, reason)
        group.add(pod, message, since, detail)

    for pod in pods if isinstance(pods, Iterable) and not isinstance(pods, str | bytes) else ():
        if not isinstance(pod, Mapping):
            continue
        created += 1
        md = _m(pod.get("metadata"))
        spec = _m(pod.get("spec"))
        status = _m(pod.get("status"))
        name = _s(md.get("name"))
        phase = _s(status.get("phase"))
        created_at = parse_time(md.get("creationTimestamp"))

        if phase == "Succeeded":
            succeeded += 1
            continue
        if phase == "Failed":
            failed += 1
            reason, message, detail = _failed_pod(status)
            finished = parse_time(_m(_conditions(status).get("Ready")).get("lastTransitionTime"))
            block("Failing", reason, name, message, finished, detail)
            continue
        deleted_at = md.get("deletionTimestamp")
        if deleted_at:
            terminating += 1
            block("Terminating", "Terminating", name, _s(status.get("message")), parse_time(deleted_at))
            continue

        conds = _conditions(status)
        sched = conds.get("PodScheduled", _EMPTY)
        is_scheduled = bool(_s(spec.get("nodeName"))) or _s(sched.get("status")) == "True"
        if is_scheduled:
            scheduled += 1
        if phase == "Running":
            running += 1
        ready_cond = conds.get("Ready", _EMPTY)
        if _s(ready_cond.get("status")) == "True":
            ready += 1
            t = parse_time(ready_cond.get("lastTransitionTime"))
            if t is not None:
                first_ready = _min_time(first_ready, t)
                last_ready = t if last_ready is None or t > last_ready else last_ready
            continue

        evs = index.for_pod(name, _s(md.get("namespace")), _s(md.get("uid")))
        if is_scheduled:
            found = _bound_blocker(spec, status, phase, sched, ready_cond, created_at, evs)
        else:
            found = _unbound_blocker(spec, sched, created_at, evs)
        category, reason, message, since, detail = found
        if category == "Unschedulable" and reason != "SchedulerError" and message:
            unschedulable_messages[message] += 1
        block(category, reason, name, message, since, detail)

    blockers = tuple(sorted((g.freeze() for g in groups.values()),
                            key=lambda b: (-b.count, _SEVERITY.get(b.category, 99), b.reason)))
    failure: SchedulingFailure | None = None
    if unschedulable_messages:
        top_message = min(unschedulable_messages, key=lambda msg: (-unschedulable_messages[msg], msg))
        failure = parse_scheduler_message(top_message)
    return PodSummary(
        expected=expected_n, created=created, scheduled=scheduled, running=running, ready=ready,
        succeeded=succeeded, failed=failed, terminating=terminating, blockers=blockers, failure=failure,
        first_ready=first_ready, last_ready=last_ready,
        observed_at=parse_time(now) if now is not None else None,
    )
