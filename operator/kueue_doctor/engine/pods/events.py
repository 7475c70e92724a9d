"""Events about Pods and Jobs, in both API shapes: when, how often, what they say, and which are newest.

The API server serves Events as core/v1 (``message``, ``lastTimestamp``, ``count``) and as
events.k8s.io/v1 (``note``, ``deprecatedLastTimestamp``, ``series``); events written through one API and
read through the other carry a mix. These accessors read either. `PodEvents` indexes the events of
the reasons the Pod summary uses by Pod, and `job_failed_create` finds the Job controller's newest
``FailedCreate`` (Pods that were never created: quota, webhooks).

Neighbours: `summary.py` asks `PodEvents` per Pod; `kubelet.py` names the start-up reasons and
`scheduler.py` parses the ``FailedScheduling`` messages found here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...kube.objects import as_time, earliest, int_or_none, m, s


def event_time(ev: Mapping[str, Any]) -> datetime | None:
    """When the event was last observed, for both Event APIs.

    core/v1: ``series.lastObservedTime``, ``lastTimestamp``, ``eventTime``, ``firstTimestamp``;
    events.k8s.io/v1: ``series.lastObservedTime``, ``deprecatedLastTimestamp``, ``eventTime``,
    ``deprecatedFirstTimestamp``; then ``metadata.creationTimestamp``. Events written through
    events.k8s.io (kube-scheduler, controller-runtime) and read as core/v1 have null
    ``lastTimestamp`` and carry ``eventTime`` and ``series`` instead.
    """
    ev = m(ev)
    for value in (m(ev.get("series")).get("lastObservedTime"), ev.get("lastTimestamp"),
                  ev.get("deprecatedLastTimestamp"), ev.get("eventTime"), ev.get("firstTimestamp"),
                  ev.get("deprecatedFirstTimestamp"), m(ev.get("metadata")).get("creationTimestamp")):
        t = as_time(value)
        if t is not None:
            return t
    return None


def newest_event(events: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The event last observed (`event_time`; one without a time counts as oldest), the first of equals; None for
    none."""
    oldest = datetime.min.replace(tzinfo=UTC)
    return max(events, key=lambda ev: event_time(ev) or oldest, default=None)


def event_first_time(ev: Mapping[str, Any]) -> datetime | None:
    """When the event (or its series) was first observed, for both Event APIs."""
    ev = m(ev)
    for value in (ev.get("firstTimestamp"), ev.get("deprecatedFirstTimestamp"), ev.get("eventTime"),
                  ev.get("lastTimestamp"), ev.get("deprecatedLastTimestamp"),
                  m(ev.get("metadata")).get("creationTimestamp")):
        t = as_time(value)
        if t is not None:
            return t
    return None


def event_count(ev: Mapping[str, Any]) -> int:
    """How often it happened: the largest of ``series.count``, ``count``, ``deprecatedCount``; at least 1."""
    ev = m(ev)
    counts = [c for c in (int_or_none(m(ev.get("series")).get("count")), int_or_none(ev.get("count")),
                          int_or_none(ev.get("deprecatedCount"))) if c is not None]
    return max(1, *counts) if counts else 1


def event_message(ev: Mapping[str, Any]) -> str:
    """``message`` (core/v1) or ``note`` (events.k8s.io/v1)."""
    ev = m(ev)
    return s(ev.get("message")) or s(ev.get("note")) or ""


def _event_object(ev: Mapping[str, Any]) -> Mapping[str, Any]:
    return m(ev.get("involvedObject")) or m(ev.get("regarding"))


# the JobSet controller cannot create a child Job (the apiserver refuses its template), so no Pods either:
# "job \"<name>\" creation failed with error: <API error>" on the JobSet (jobset_controller.go)
JOB_CREATION_FAILED = "JobCreationFailed"
# the controllers' events for Pods they could not create: the Job controller ("FailedCreate", also on each
# child Job of a JobSet or TrainJob), Kubeflow's training-operator ("FailedCreatePod", on the PyTorchJob etc.),
# KubeRay ("FailedToCreateWorkerPod" / "FailedToCreateHeadPod", on the RayCluster)
FAILED_CREATE_REASONS = frozenset({"FailedCreate", "FailedCreatePod", "FailedToCreateWorkerPod",
                                   "FailedToCreateHeadPod", JOB_CREATION_FAILED})


def job_failed_create(events: Iterable[Mapping[str, Any]]) -> tuple[str, str, datetime | None] | None:
    """The newest controller event about Pods it could not create: ``(reason, message, time)``, or None.

    The Job controller's message is ``"Error creating: <API error>"`` (``pkg/controller/controller_utils.go``),
    e.g. ``Error creating: pods "train-7xk2p" is forbidden: exceeded quota: team-a, requested: ..., used:
    ..., limited: ...`` or ``Error creating: admission webhook "x" denied the request: ...``; the others
    carry the same API error. The caller passes the events about the owner and the objects it made.
    """
    best: tuple[str, str, datetime | None] | None = None
    best_key: tuple[bool, datetime] | None = None
    for ev in events if isinstance(events, Iterable) else ():
        ev = m(ev)
        reason = s(ev.get("reason"))
        if reason not in FAILED_CREATE_REASONS:
            continue
        t = event_time(ev)
        key = (t is not None, t or datetime.min.replace(tzinfo=UTC))
        if best_key is None or key > best_key:
            best, best_key = (reason or "FailedCreate", event_message(ev), t), key
    return best


WEBHOOK_UNREACHABLE = "WebhookUnreachable"


@dataclass(frozen=True)
class CreateDenial:
    """Which admission plugin refused a Pod the controller tried to create, and what it said, parsed."""

    plugin: str  # ResourceQuota, PodSecurity, LimitRange, Webhook, WebhookUnreachable (not a refusal: a call failed)
    name: str  # the ResourceQuota, the Pod Security level ("restricted:latest"), the webhook
    items: tuple[str, ...]  # "requests.cpu: 1 requested, 8 used of 8"; 'container "main" must set ...'; ...
    head: int = -1  # where the message's details (restated by `items`) start; -1: nothing to cut


# The API errors a Pod create meets in admission (v1.36.3): AS pkg/admission/plugin/resourcequota/controller.go:471,622
# (K pkg/quota/v1/evaluator/core/pods.go:170 "must specify"), pod-security-admission admission/admission.go:481, K
# plugin/pkg/admission/limitranger/admission.go:315-354, AS pkg/admission/plugin/webhook/errors/statuserror.go:29,47.
_EXCEEDED = re.compile(r"exceeded quota: ([^,]+), requested: (.*?), used: (.*?), limited: (.*?)(?:$|\]|, \w+ quota)")
_MUST_SPECIFY = re.compile(r"failed quota: ([^:]+): must specify (.+)")
_POD_SECURITY = re.compile(r'violates PodSecurity "([^"]+)": (.+)')
_LIMIT_RANGE = re.compile(r"(?:maximum|minimum) \S+ usage per \w+ is [^,\]]+(?:, but (?:limit|request) is [^,\]]+"
                          r"|\.  No (?:limit|request) is specified)")
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request(?::| without explanation)\s*(.*)')
# The apiserver could not call a webhook whose failurePolicy is Fail (AS pkg/util/webhook/error.go:36,38; the reason
# "failed to call webhook: %w" of admission/plugin/webhook/mutating/dispatcher.go:310 and validating/dispatcher.go:311,
# wrapped by apimachinery errors.go:395 "Internal error occurred: %v"): down, no endpoints, a timeout, a certificate.
_WEBHOOK_UNREACHABLE = re.compile(r'failed calling webhook "([^"]+)"'
                                  r'(?:: (?:failed to call webhook: )?(.*)|; no further details available)')
# Kueue's own webhooks are served by kueue-controller-manager behind this Service (Kueue v0.19.2 config/components/
# webhook/service.yaml, namePrefix kueue-)
KUEUE_WEBHOOK_SERVICE = "kueue-webhook-service"


def _pairs(text: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in text.split(",") if "=" in p)


def create_denial(message: str) -> CreateDenial | None:
    """The admission refusal a FailedCreate message carries, parsed; None for other errors."""
    found = _EXCEEDED.search(message)
    if found is not None:
        requested, used, limited = (_pairs(found.group(n)) for n in (2, 3, 4))
        return CreateDenial("ResourceQuota", found.group(1).strip(), tuple(
            f"{r}: {requested[r]} requested, {used.get(r, '?')} used of {limited.get(r, '?')}" for r in requested))
    found = _MUST_SPECIFY.search(message)
    if found is not None:
        return CreateDenial("ResourceQuota", found.group(1).strip(), tuple(
            f"must specify {x.strip()}" for x in found.group(2).split(";") if x.strip()))
    found = _POD_SECURITY.search(message)
    if found is not None:
        musts = re.findall(r"\(([^()]*\bmust\b[^()]*)\)", found.group(2)) or found.group(2).split("), ")
        return CreateDenial("PodSecurity", found.group(1), tuple(dict.fromkeys(x.strip() for x in musts)),
                            found.start(2) - 2)
    limits = _LIMIT_RANGE.findall(message)
    if limits:
        return CreateDenial("LimitRange", "", tuple(x.replace(".  ", ": ") for x in limits))
    found = _WEBHOOK.search(message)
    if found is not None:
        return CreateDenial("Webhook", found.group(1), (found.group(2).strip(),) if found.group(2).strip() else ())
    found = _WEBHOOK_UNREACHABLE.search(message)
    if found is not None:
        said = (found.group(2) or "").strip()
        return CreateDenial(WEBHOOK_UNREACHABLE, found.group(1), (said,) if said else ())
    return None


@dataclass
class EventInfo:
    message: str
    last: datetime | None
    first: datetime | None
    count: int


# The kubelet's summary of a mount that timed out (K pkg/kubelet/kubelet.go:2204, volumemanager/volume_manager.go:463):
# "Unable to attach or mount volumes: unmounted volumes=[data], ...: context deadline exceeded". It comes every sync,
# so it is usually the newest FailedMount, while the operation's own error ("MountVolume.SetUp failed for volume ...")
# says why: a summary never replaces a specific message of the same reason.
SUMMARY_PREFIXES = {"FailedMount": "Unable to attach or mount volumes: "}


class PodEvents:
    """Events about Pods, by Pod name: the newest event per (uid, reason), for the given reasons only (a specific
    message before a newer summary, SUMMARY_PREFIXES)."""

    def __init__(self, events: object, reasons: Collection[str]) -> None:
        self._by_name: dict[str, list[tuple[str, str, str, EventInfo]]] = {}
        # a list first: the ABC check is a Python call, once per admitted Workload
        for ev in events if type(events) is list or (isinstance(events, Iterable) and not isinstance(
                events, str | bytes)) else ():
            ev = m(ev)
            reason = s(ev.get("reason")) or ""
            if reason not in reasons:
                continue
            obj = _event_object(ev)
            kind = s(obj.get("kind"))
            name = s(obj.get("name"))
            if not name or (kind and kind != "Pod"):
                continue
            info = EventInfo(event_message(ev), event_time(ev), event_first_time(ev), event_count(ev))
            self._by_name.setdefault(name, []).append(
                (s(obj.get("namespace")) or "", s(obj.get("uid")) or "", reason, info))

    def for_pod(self, name: str, namespace: str, uid: str) -> dict[str, EventInfo]:
        found: dict[str, EventInfo] = {}
        for ns, ev_uid, reason, info in self._by_name.get(name, ()):
            if (ns and namespace and ns != namespace) or (ev_uid and uid and ev_uid != uid):
                continue  # another namespace, or an earlier Pod of the same name
            old = found.get(reason)
            if old is None:
                found[reason] = info
                continue
            summary = SUMMARY_PREFIXES.get(reason)
            vague_new, vague_old = (bool(summary) and x.message.startswith(summary or "\0") for x in (info, old))
            newer = (old if vague_new and not vague_old else info if vague_old and not vague_new
                     else info if _later(info.last, old.last) else old)
            found[reason] = EventInfo(newer.message, newer.last, earliest(old.first, info.first),
                                      max(old.count, info.count))
        return found


def _later(a: datetime | None, b: datetime | None) -> bool:
    return a is not None and (b is None or a >= b)
