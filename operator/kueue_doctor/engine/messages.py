"""Parse the free-text messages Kueue writes into Workload conditions and events.

Kueue (checked against v0.19.2, commit 8eab687, and main at ff69552e) does not expose the facts behind
an inadmissible Workload as structured data: the QuotaReserved/Evicted/Preempted/Requeued condition
messages and the event notes are the only place that says which resource, which flavor and how much
quota is missing. This module turns those texts back into data.

Rules it follows (see docs/messages.md and tests/cases/kueue_messages.yaml):

* every template is anchored (whole-text match); a text that matches no template is `UNKNOWN`;
* the reasons inside one pod set are sorted and joined by ", " and several contain ", " themselves,
  so they are found by scanning with the reason templates, never by splitting on commas; text left
  over between recognised reasons becomes an `UNPARSED` failure, so no text is ever dropped;
* condition messages are cut at 32 KiB and event notes at 1 KiB with the suffix " ..."; the reason
  cut in the middle becomes `UNPARSED`;
* no function here raises on any `str` input.

Pure: standard library only, no I/O. Regexes are compiled once at import time and every parser
dispatches on a cheap prefix look-up before it runs a regex (10,000 Workloads per pass).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "CONDITION_MESSAGE_LIMIT",
    "EVENT_MESSAGE_LIMIT",
    "FailureKind",
    "FlavorAttempt",
    "FlavorFailure",
    "ParsedMessage",
    "PreemptedWorkloadEvent",
    "PreemptionInfo",
    "Template",
    "parse_cluster_queue_inactive",
    "parse_flavors_considered",
    "parse_preempted_workload_event",
    "parse_workload_message",
    "split_name_list",
]

# pkg/util/api/api.go: maxConditionMsgSize / maxEventMsgSize, both in bytes, suffix " ...".
CONDITION_MESSAGE_LIMIT = 32 * 1024
EVENT_MESSAGE_LIMIT = 1024
_TRUNCATION_SUFFIX = " ..."
_MAX_DEPTH = 6  # nesting of "Previously: " / "deactivated due to" / "Evicted on manager: " wrappers


class Template(StrEnum):
    """Which Kueue message template a condition message or event note matched."""

    # -- scheduler: flavor assignment (QuotaReserved=False, Warning event, SecondPassFailed) ------
    FLAVOR_ASSIGNMENT = "FlavorAssignment"  # couldn't assign flavors to pod set X: <reasons> [trailer]
    FLAVOR_ASSIGNMENT_ERROR = "FlavorAssignmentError"  # failed to assign flavors to pod set X: <error>
    PENDING_MIGRATION = "PendingMigration"  # ". Pending the migration of 1 workload(s)" alone
    # -- queue blockers (workload controller / scheduler) -------------------------------------------
    LOCAL_QUEUE_NOT_FOUND = "LocalQueueNotFound"
    LOCAL_QUEUE_INACTIVE = "LocalQueueInactive"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    LOCAL_QUEUE_TERMINATING = "LocalQueueTerminating"
    CLUSTER_QUEUE_NOT_FOUND = "ClusterQueueNotFound"  # "doesn't exist" (controller), "not found" (scheduler)
    CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    CLUSTER_QUEUE_TERMINATING = "ClusterQueueTerminating"
    # -- admissibility (scheduler nominate / granular workload controller) ---------------------------
    NAMESPACE_NOT_SELECTED = "NamespaceNotSelected"
    NAMESPACE_MISSING = "NamespaceMissing"
    INVALID_NAMESPACE_SELECTOR = "InvalidNamespaceSelector"
    RESOURCES_INVALID = "ResourcesInvalid"
    LIMIT_RANGE = "LimitRange"
    ADMISSION_GATED = "AdmissionGated"
    ADMISSION_GATE_CLEARED = "AdmissionGateCleared"
    PENDING_EVALUATION = "PendingEvaluation"
    BYPASSED_EQUIVALENT = "BypassedEquivalent"
    DEACTIVATED = "Deactivated"
    FAILED_ADMISSION_CHECKS = "FailedAdmissionChecks"
    # -- scheduler: after assignment ----------------------------------------------------------------
    OVERLAPPING_PREEMPTION_TARGETS = "OverlappingPreemptionTargets"
    OVERLAPPING_PREEMPTION_WILL_FIT = "OverlappingPreemptionWillFit"
    NO_LONGER_FITS = "NoLongerFits"
    PREEMPTION_GATED = "PreemptionGated"
    WAITING_FOR_PODS_READY = "WaitingForPodsReady"
    FAILED_TO_ADMIT = "FailedToAdmit"
    MORE_FAVORABLE_VARIANT_ADMITTED = "MoreFavorableVariantAdmitted"
    BELOW_LAST_ACCEPTABLE_FLAVOR = "BelowLastAcceptableFlavor"
    # -- DRA (QuotaReserved=False and Requeued=False/Inadmissible) -----------------------------------
    DRA_FEATURE_DISABLED = "DRAFeatureDisabled"
    DRA_RESOURCE_CLAIMS_UNSUPPORTED = "DRAResourceClaimsUnsupported"
    DRA_FIELD_ERRORS = "DRAFieldErrors"
    # -- eviction (Evicted / Preempted / Requeued conditions, EvictedDueTo* events) -------------------
    PREEMPTED = "Preempted"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    ADMISSION_CHECK_EVICTION = "AdmissionCheckEviction"
    CLUSTER_QUEUE_STOPPED_EVICTION = "ClusterQueueStoppedEviction"
    LOCAL_QUEUE_STOPPED_EVICTION = "LocalQueueStoppedEviction"
    NODE_FAILURES = "NodeFailures"
    FLAVOR_MIGRATION = "FlavorMigration"
    VARIANT_EVICTED = "VariantEvicted"
    NO_VARIANT_RUNNING = "NoVariantRunning"
    DEACTIVATED_DUE_TO = "DeactivatedDueTo"  # wrapper; `inner` holds the DeactivationTarget message
    # -- DeactivationTarget messages (also the inner part of DEACTIVATED_DUE_TO) ---------------------
    MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
    REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
    ADMISSION_CHECK_REJECTED = "AdmissionCheckRejected"
    EVICTED_ON_MANAGER = "EvictedOnManager"  # wrapper; `inner` holds the manager's eviction message
    PREVIOUSLY = "Previously"  # wrapper; `inner` holds the previous message
    # -- Requeued=True ---------------------------------------------------------------------------------
    BACKOFF_FINISHED = "BackoffFinished"
    REACTIVATED = "Reactivated"
    CLUSTER_QUEUE_RESTARTED = "ClusterQueueRestarted"
    LOCAL_QUEUE_RESTARTED = "LocalQueueRestarted"
    # -- positive / informational --------------------------------------------------------------------
    QUOTA_RESERVED = "QuotaReserved"  # condition and QuotaReserved event (wait time, Flavors considered)
    ADMITTED = "Admitted"  # Admitted=True condition and Admitted / Started events
    NO_RESERVATION = "NoReservation"
    UNSATISFIED_CHECKS = "UnsatisfiedChecks"
    PENDING_DELAYED_TOPOLOGY = "PendingDelayedTopologyRequests"
    WORKLOAD_SLICE_REPLACED = "WorkloadSliceReplaced"
    PREEMPTED_WORKLOAD = "PreemptedWorkload"  # event on the preemptor
    UNKNOWN = "Unknown"


class FailureKind(StrEnum):
    """What one reason inside a "couldn't assign flavors to pod set" part says."""

    INSUFFICIENT_UNUSED_QUOTA = "InsufficientUnusedQuota"
    EXCEEDS_MAXIMUM_CAPACITY = "ExceedsMaximumCapacity"
    RESOURCE_NOT_COVERED = "ResourceNotCovered"
    FLAVOR_NOT_FOUND = "FlavorNotFound"
    UNTOLERATED_TAINT = "UntoleratedTaint"
    NODE_AFFINITY_MISMATCH = "NodeAffinityMismatch"
    TOPOLOGY_FLAVOR = "TopologyFlavor"  # Flavor "%s" does not support TAS / info missing / level / only TAS
    TOPOLOGY_PLACEMENT = "TopologyPlacement"  # topology %q doesn't allow to fit ...
    TOPOLOGY_REQUEST = "TopologyRequest"  # TAS request does not fit the Topology (levels, slice sizes)
    TOPOLOGY_ERROR = "TopologyError"  # TAS evaluation error (invalid selectors, podSetUpdate, capacities)
    NODE_REPLACEMENT = "NodeReplacement"  # TAS failed-node replacement impossible
    SLICE_FLAVOR_MISMATCH = "SliceFlavorMismatch"  # elastic workload slice must keep the original flavor
    FLAVOR_SKIPPED = "FlavorSkipped"
    UNPARSED = "Unparsed"


@dataclass(frozen=True)
class FlavorFailure:
    kind: FailureKind
    podset: str
    text: str  # exactly this reason's text
    resource: str | None = None
    flavor: str | None = None
    missing: str | None = None  # "N more needed": raw Kubernetes quantity text
    previous: str | None = None  # previously considered podsets requests (raw quantity)
    requested: str | None = None  # current podset request (raw quantity)
    maximum: str | None = None  # maximum capacity, raw; may be "<unlimited>"
    taint: str | None = None  # "key=value:Effect" (Taint.ToString form), rebuilt from the Go struct text
    topology: str | None = None
    fit: int | None = None
    requested_count: int | None = None
    unit: str | None = None  # "pod" | "slice"
    excluded: tuple[tuple[str, int], ...] = ()  # ('resource "cpu"', 6), ('nodeSelector', 2), ...
    total_nodes: int | None = None
    layers: tuple[tuple[str, int, int], ...] = ()  # multi-layer TAS: (level, fit, needed)
    level: str | None = None  # TOPOLOGY_REQUEST: the topology level named in the reason
    detail: str | None = None  # TOPOLOGY_FLAVOR problem, TOPOLOGY_ERROR text, node, original flavor


@dataclass(frozen=True)
class PreemptionInfo:
    """Facts of "Preempted to accommodate a workload (UID: ..., JobUID: ...) due to ...".

    Kueue writes UNKNOWN for absent values; those become None here.
    """

    preemptor_uid: str | None = None
    preemptor_job_uid: str | None = None
    reason_phrase: str | None = None  # e.g. "reclamation within the cohort"
    reason: str | None = None  # InClusterQueue | InCohortReclamation | InCohortFairSharing | ...
    preemptor_path: str | None = None  # /<root cohort>/.../<cluster queue>
    preemptee_path: str | None = None
    # only in the "Preempted" / "PreemptedWorkload" event notes:
    preemptor_priority: int | None = None
    preemptor_base_priority: int | None = None
    preemptor_boost: int | None = None
    preemptee_priority: int | None = None
    preemptee_base_priority: int | None = None
    preemptee_boost: int | None = None


@dataclass(frozen=True)
class FlavorAttempt:
    """One "<flavor>(<mode>[;borrow=N][;<reason>...])" of a QuotaReserved event's Flavors considered."""

    podset: str
    flavor: str
    text: str
    mode: str | None = None  # NoFit | Preempt | Fit | DeferredFit | Unknown
    preemption_mode: str | None = None  # NoCandidates | Preempt | Reclaim
    borrow: int | None = None
    reasons: tuple[FlavorFailure, ...] = ()


@dataclass(frozen=True)
class PreemptedWorkloadEvent:
    """ "Preempted workload %s (UID: %s) in ClusterQueue %s; preemptor effective priority: ..." """

    workload: str  # "<namespace>/<name>" (klog.KObj)
    namespace: str | None
    name: str
    uid: str
    cluster_queue: str
    preemption: PreemptionInfo


@dataclass(frozen=True)
class ParsedMessage:
    template: Template
    text: str
    names: Mapping[str, str] = field(default_factory=dict)
    failures: tuple[FlavorFailure, ...] = ()
    podset_errors: tuple[tuple[str, str], ...] = ()  # (podset, error) for "failed to assign flavors"
    pending_preemptions: int | None = None
    failed_preemptions: int | None = None
    pending_migrations: int | None = None
    preemption: PreemptionInfo | None = None
    inner: ParsedMessage | None = None  # Previously: / deactivated due to / Evicted on manager:
    details: str | None = None  # free text remainder (field errors, check messages, node names)
    checks: tuple[tuple[str, str], ...] = ()  # admission checks (name, message) of Retry/Rejected texts
    flavors_considered: tuple[FlavorAttempt, ...] = ()  # QuotaReserved event only
    truncated: bool = False  # Kueue cut the text (" ..." at the 1 KiB / 32 KiB limit)

    @property
    def podsets(self) -> tuple[str, ...]:
        """Pod sets named by the failures, in message order, without duplicates."""
        seen: dict[str, None] = {}
        for f in self.failures:
            seen.setdefault(f.podset, None)
        for ps, _ in self.podset_errors:
            seen.setdefault(ps, None)
        return tuple(seen)

    def failures_of(self, kind: FailureKind) -> tuple[FlavorFailure, ...]:
        return tuple(f for f in self.failures if f.kind is kind)


# =================================================================================================
# Reasons inside one pod set part
# =================================================================================================

_N = r"[^\s,]+"  # a resource / flavor name or a quantity: never contains blanks or commas
_END = r"(?=, |\Z)"  # a reason ends at the ", " separator or at the end of the part

_ReasonBuilder = Callable[[str, "re.Match[str]"], FlavorFailure]


def _rx(body: str) -> re.Pattern[str]:
    return re.compile(body + _END)


def _g(m: re.Match[str], name: str) -> str | None:
    v = m.group(name)
    return v if isinstance(v, str) else None


def _gi(m: re.Match[str], name: str) -> int | None:
    v = m.group(name)
    return int(v) if isinstance(v, str) and v.isdigit() else None


def _b_unused(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.INSUFFICIENT_UNUSED_QUOTA, ps, m.group(0), resource=_g(m, "resource"),
                         flavor=_g(m, "flavor"), missing=_g(m, "missing"))


def _b_max(ps: str, m: re.Match[str]) -> FlavorFailure:
    gd = m.groupdict()
    return FlavorFailure(FailureKind.EXCEEDS_MAXIMUM_CAPACITY, ps, m.group(0), resource=gd.get("resource"),
                         flavor=gd.get("flavor"), previous=gd.get("previous"), requested=gd.get("requested"),
                         maximum=gd.get("maximum"))


def _b_resource(ps: str, m: re.Match[str]) -> FlavorFailure:
    gd = m.groupdict()
    return FlavorFailure(FailureKind.RESOURCE_NOT_COVERED, ps, m.group(0), resource=gd.get("resource"),
                         flavor=gd.get("flavor"))


def _b_flavor_not_found(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.FLAVOR_NOT_FOUND, ps, m.group(0), flavor=_g(m, "flavor"))


def _b_affinity(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.NODE_AFFINITY_MISMATCH, ps, m.group(0), flavor=_g(m, "flavor"))


def _taint_string(key: str, value: str, effect: str) -> str:
    # k8s.io/api/core/v1 Taint.ToString()
    if not effect:
        return f"{key}={value}:" if value else key
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def _b_taint(ps: str, m: re.Match[str]) -> FlavorFailure:
    taint = _taint_string(m.group("key") or "", m.group("value") or "", m.group("effect") or "")
    return FlavorFailure(FailureKind.UNTOLERATED_TAINT, ps, m.group(0), flavor=_g(m, "flavor"), taint=taint)


def _b_tas_flavor(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.TOPOLOGY_FLAVOR, ps, m.group(0), flavor=_g(m, "flavor"),
                         detail=_g(m, "problem"))


_EXCLUDED_ITEM_RX = re.compile(r'(?P<what>[A-Za-z]+(?: "[^"]*")?): (?P<count>\d+)')
_LAYER_RX = re.compile(r"; (?P<fit>\d+)/(?P<needed>\d+) slice\(s\) fit on level (?P<level>[^\s;]+?)(?=; |\Z)")


def _b_tas_fit(ps: str, m: re.Match[str]) -> FlavorFailure:
    excluded: tuple[tuple[str, int], ...] = ()
    raw_excl = _g(m, "excluded")
    if raw_excl:
        excluded = tuple((e.group("what"), int(e.group("count")))
                         for e in _EXCLUDED_ITEM_RX.finditer(raw_excl))
    layers: tuple[tuple[str, int, int], ...] = ()
    raw_layers = _g(m, "layers")
    if raw_layers:
        layers = tuple((la.group("level"), int(la.group("fit")), int(la.group("needed")))
                       for la in _LAYER_RX.finditer(raw_layers))
    requested = _gi(m, "req0")
    if requested is None:
        requested = _gi(m, "req1")
    fit = _gi(m, "fit")
    if fit is None and _g(m, "req0") is not None:
        fit = 0
    return FlavorFailure(FailureKind.TOPOLOGY_PLACEMENT, ps, m.group(0), topology=_g(m, "topology"), fit=fit,
                         requested_count=requested, unit=_g(m, "unit0") or _g(m, "unit1"), excluded=excluded,
                         total_nodes=_gi(m, "total"), layers=layers)


def _b_tas_request(ps: str, m: re.Match[str]) -> FlavorFailure:
    level = next((v for k, v in m.groupdict().items() if k.startswith("lvl") and v is not None), None)
    return FlavorFailure(FailureKind.TOPOLOGY_REQUEST, ps, m.group(0), level=level)


def _b_tas_error(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.TOPOLOGY_ERROR, ps, m.group(0), detail=_g(m, "detail"))


def _b_node(ps: str, m: re.Match[str]) -> FlavorFailure:
    detail = _g(m, "node") or _g(m, "domain")
    return FlavorFailure(FailureKind.NODE_REPLACEMENT, ps, m.group(0), detail=detail)


def _b_slice(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.SLICE_FLAVOR_MISMATCH, ps, m.group(0), flavor=_g(m, "flavor"),
                         detail=_g(m, "original"))


def _b_skipped(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.FLAVOR_SKIPPED, ps, m.group(0), flavor=_g(m, "flavor"),
                         resource=_g(m, "resource"))


_EXCL = r'[A-Za-z]+(?: "[^"]*")?: \d+'
# (first character, regex, builder). Tried in order at every reason boundary.
_REASON_TABLE: tuple[tuple[str, re.Pattern[str], _ReasonBuilder], ...] = (
    # flavorassigner.go fitsResourceQuota (v0.19.2:1368); "in cohort" variant: <= v0.9
    ("i", _rx(rf"insufficient unused quota (?:in cohort )?for (?P<resource>{_N}) in flavor (?P<flavor>{_N}), "
              rf"(?P<missing>{_N}) more needed"), _b_unused),
    # flavorassigner.go:1350 (v0.14.5+, v0.13.9+)
    ("i", _rx(rf"insufficient quota for (?P<resource>{_N}) in flavor (?P<flavor>{_N}), previously considered "
              r"podsets requests \((?P<previous>[^()]*)\) \+ current podset request "
              r"\((?P<requested>[^()]*)\) > maximum capacity \((?P<maximum>[^()]*)\)"), _b_max),
    # <= v0.14.4
    ("i", _rx(rf"insufficient quota for (?P<resource>{_N}) in flavor (?P<flavor>{_N}), request > maximum "
              r"capacity \((?P<requested>[^\s()]+) > (?P<maximum>[^()]+)\)"), _b_max),
    # <= v0.9
    ("i", _rx(rf"insufficient quota for (?P<resource>{_N}) in flavor (?P<flavor>{_N}) in ClusterQueue"),
     _b_max),
    ("b", _rx(rf"borrowing limit for (?P<resource>{_N}) in flavor (?P<flavor>{_N}) exceeded"), _b_max),
    # flavorassigner.go:1071
    ("r", _rx(rf"resource (?P<resource>{_N}) unavailable in ClusterQueue"), _b_resource),
    # flavorassigner.go:1220, 1252; flavor_assigner_attempts.go (Flavors considered only)
    ("f", _rx(rf"flavor (?P<flavor>{_N}) not found"), _b_flavor_not_found),
    ("f", _rx(rf"flavor (?P<flavor>{_N}) doesn't match node affinity"), _b_affinity),
    ("f", _rx(rf"flavor (?P<flavor>{_N}) does not provide resource (?P<resource>{_N})"), _b_resource),
    # flavorassigner.go:1243: "%s" of a corev1.Taint struct: {Key Value Effect TimeAdded}
    ("u", _rx(r"untolerated taint \{(?P<key>[^\s{}]*) (?P<value>[^\s{}]*) (?P<effect>[^\s{}]*)"
              rf"(?: (?P<added>[^{{}}]*))?\}} in flavor (?P<flavor>{_N})"), _b_taint),
    # tas_flavorassigner.go:182-200
    ("F", _rx(r'Flavor "(?P<flavor>[^"]*)" (?P<problem>does not support TopologyAwareScheduling'
              r"|information missing in TAS cache|does not contain the requested level"
              r"|supports only TopologyAwareScheduling)"),
     _b_tas_flavor),
    # tas_flavor_snapshot.go notFitMessage / multiLayerNotFitMessage (v0.19.2:1996-2066)
    ("t", _rx(r'topology "(?P<topology>[^"]*)" (?:'
              r"doesn't allow to fit any of (?P<req0>\d+) (?P<unit0>pod|slice)\(s\)"
              r"|allows to fit only (?P<fit>\d+) out of (?P<req1>\d+) (?P<unit1>pod|slice)\(s\)"
              r"|doesn't allow to fit(?P<layers>(?:; \d+/\d+ slice\(s\) fit on level [^\s;]+?)*))"
              rf"(?:\. Total nodes: (?P<total>\d+); excluded: (?P<excluded>{_EXCL}(?:, {_EXCL})*))?"),
     _b_tas_fit),
    # tas_flavor_snapshot.go: the TAS request does not fit the Topology
    ("n", _rx(rf"no topology domains at level: (?P<lvl1>{_N})"), _b_tas_request),
    ("n", _rx(rf"no requested topology level(?: for slices| for additional slice layer)?: (?P<lvl2>{_N})"),
     _b_tas_request),
    ("p", _rx(rf"podset slice topology (?P<lvl3>{_N}) is above the podset topology {_N}"), _b_tas_request),
    ("a", _rx(rf"additional slice layer topology (?P<lvl4>{_N}) must be at a lower level than {_N}"),
     _b_tas_request),
    ("a", _rx(r"additional slice layer size \d+ must evenly divide parent layer size \d+"), _b_tas_request),
    ("t", _rx(r"topology level not specified"), _b_tas_request),
    ("s", _rx(r"slice topology requested, but slice size not provided"), _b_tas_request),
    # tas_flavor_snapshot.go: errors, free text to the end of the part
    ("i", _rx(r"(?:invalid node selectors: |invalid affinity node selectors: "
              r"|invalid preferred node affinity terms: |invalid podSetUpdate for PodSet )(?P<detail>.*)"),
     _b_tas_error),
    ("u", _rx(r"unable to calculate domain capacities for PodSet (?P<detail>.*)"), _b_tas_error),
    ("c", _rx(r"cannot find replacement assignment for unhealthy node: (?P<node>[^\s,]*)"), _b_node),
    ("C", _rx(r"Cannot replace the node, because the existing topologyAssignment is invalid, as it contains "
              r"the stale domain (?P<domain>.*)"), _b_node),
    # flavorassigner.go:1129 (ElasticJobsViaWorkloadSlices)
    ("c", _rx(rf"could not assign (?P<flavor>{_N}) flavor since the original workload is assigned: "
              r"(?P<original>[^\s,]*)"), _b_slice),
    # flavorassigner.go:1093, 1097
    ("s", _rx(rf"skipping flavor (?P<flavor>{_N}) (?:as it is not found in the nomination mapping for "
              rf"resource (?P<resource>{_N})|due to WorkloadAllowedResourceFlavorAnnotation annotation)"),
     _b_skipped),
)

_REASONS_BY_CHAR: dict[str, tuple[tuple[re.Pattern[str], _ReasonBuilder], ...]] = {}
for _c, _r, _b in _REASON_TABLE:
    _REASONS_BY_CHAR[_c] = (*_REASONS_BY_CHAR.get(_c, ()), (_r, _b))


def _unparsed(podset: str, text: str) -> FlavorFailure:
    return FlavorFailure(FailureKind.UNPARSED, podset, text)


def _scan_reasons(podset: str, part: str, truncated: bool = False) -> list[FlavorFailure]:
    """Recognise the reasons of one pod set part; never split on commas, never drop text."""
    out: list[FlavorFailure] = []
    n = len(part)
    pos = 0
    gap_start = -1
    while pos < n:
        found: FlavorFailure | None = None
        end = pos
        for rx, build in _REASONS_BY_CHAR.get(part[pos], ()):
            m = rx.match(part, pos)
            if m is not None:
                found = build(podset, m)
                end = m.end()
                break
        if found is None:
            if gap_start < 0:
                gap_start = pos
            nxt = part.find(", ", pos)
            if nxt < 0:
                break
            pos = nxt + 2
            continue
        if gap_start >= 0:
            out.append(_unparsed(podset, part[gap_start:pos - 2]))
            gap_start = -1
        out.append(found)
        pos = end + 2  # skip ", " (the lookahead guarantees it, or the end of the part)
    if gap_start >= 0:
        out.append(_unparsed(podset, part[gap_start:]))
    if truncated and out and out[-1].kind is not FailureKind.UNPARSED:
        out[-1] = _unparsed(podset, out[-1].text)
    if not out and part:
        out.append(_unparsed(podset, part))
    return out


# =================================================================================================
# The flavor-assignment message (Assignment.Message() + scheduler trailers)
# =================================================================================================

_PODSET_HEADER = "couldn't assign flavors to pod set "
_PODSET_HEADER_RX = re.compile(r"(?:\A|(?<=; ))couldn't assign flavors to pod set (?P<podset>[^\s:;]*): ")
_PODSET_ERROR_RX = re.compile(r"failed to assign flavors to pod set (?P<podset>[^\s:;]*): (?P<error>.*)",
                              re.S)
_TRAILER_RX = re.compile(
    r"\. (?:Pending the preemption of (?P<pending>\d+) workload\(s\)"
    r"|Preempting (?P<failed>\d+) workload\(s\) failed, will retry\."
    r"|Pending the migration of (?P<migrating>\d+) workload\(s\))\Z"
)
_TRAILER_WINDOW = 64


def _strip_trailers(text: str) -> tuple[str, int | None, int | None, int | None]:
    pending = failed = migrating = None
    for _ in range(3):
        m = _TRAILER_RX.search(text, max(0, len(text) - _TRAILER_WINDOW))
        if m is None:
            break
        if m.group("pending") is not None and pending is None:
            pending = int(m.group("pending"))
        elif m.group("failed") is not None and failed is None:
            failed = int(m.group("failed"))
        elif m.group("migrating") is not None and migrating is None:
            migrating = int(m.group("migrating"))
        else:
            break
        text = text[:m.start()]
    return text, pending, failed, migrating


def _parse_assignment(text: str, body: str, truncated: bool) -> ParsedMessage:
    body, pending, failed, migrating = _strip_trailers(body)
    if not body:
        tpl = Template.PENDING_MIGRATION if migrating is not None else Template.FLAVOR_ASSIGNMENT
        return ParsedMessage(tpl, text, truncated=truncated, pending_preemptions=pending,
                             failed_preemptions=failed, pending_migrations=migrating)
    if body.startswith("failed to assign flavors to pod set "):
        m = _PODSET_ERROR_RX.fullmatch(body)
        if m is None:
            return ParsedMessage(Template.UNKNOWN, text, truncated=truncated)
        ps, err = m.group("podset"), m.group("error")
        return ParsedMessage(Template.FLAVOR_ASSIGNMENT_ERROR, text, names={"podSet": ps},
                             podset_errors=((ps, err),), details=err, truncated=truncated,
                             pending_preemptions=pending, failed_preemptions=failed,
                             pending_migrations=migrating)
    headers = list(_PODSET_HEADER_RX.finditer(body))
    if not headers or headers[0].start() != 0:
        return ParsedMessage(Template.UNKNOWN, text, truncated=truncated)
    failures: list[FlavorFailure] = []
    last = len(headers) - 1
    for i, h in enumerate(headers):
        stop = headers[i + 1].start() - 2 if i < last else len(body)
        failures.extend(_scan_reasons(h.group("podset"), body[h.end():stop], truncated and i == last))
    return ParsedMessage(Template.FLAVOR_ASSIGNMENT, text, failures=tuple(failures), truncated=truncated,
                         pending_preemptions=pending, failed_preemptions=failed, pending_migrations=migrating)


# =================================================================================================
# Everything else: exact literals, then anchored regexes bucketed by the first word
# =================================================================================================

_LITERALS: dict[str, Template] = {
    # workload_controller.go
    "Workload is pending evaluation in the scheduling queue": Template.PENDING_EVALUATION,
    "AdmissionGatedBy cleared, waiting for quota reservation": Template.ADMISSION_GATE_CLEARED,
    "Admission gate cleared, workload is now admissible": Template.ADMISSION_GATE_CLEARED,  # event
    "Bypassed scheduling evaluation because an equivalent workload recently failed":
        Template.BYPASSED_EQUIVALENT,
    "The workload is deactivated": Template.DEACTIVATED,
    "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled":
        Template.DRA_FEATURE_DISABLED,
    "KueueDRAIntegration feature does not support use of resource claims":
        Template.DRA_RESOURCE_CLAIMS_UNSUPPORTED,
    "DRA resource claims not supported": Template.DRA_RESOURCE_CLAIMS_UNSUPPORTED,  # Requeued message
    "The ClusterQueue is stopped": Template.CLUSTER_QUEUE_STOPPED_EVICTION,
    "The LocalQueue is stopped": Template.LOCAL_QUEUE_STOPPED_EVICTION,
    "exceeding the maximum execution time": Template.MAXIMUM_EXECUTION_TIME_EXCEEDED,
    "exceeding the maximum number of re-queuing retries": Template.REQUEUING_LIMIT_EXCEEDED,
    "The workload backoff was finished": Template.BACKOFF_FINISHED,
    "The workload was reactivated": Template.REACTIVATED,
    "The ClusterQueue was restarted after being stopped": Template.CLUSTER_QUEUE_RESTARTED,
    "The LocalQueue was restarted after being stopped": Template.LOCAL_QUEUE_RESTARTED,
    # scheduler.go
    "The workload has failed admission checks": Template.FAILED_ADMISSION_CHECKS,
    "Workload has overlapping preemption targets with another workload":
        Template.OVERLAPPING_PREEMPTION_TARGETS,
    "Workload has overlapping preemption targets with another workload, but will fit after these preemptions "
    "complete": Template.OVERLAPPING_PREEMPTION_WILL_FIT,
    "Workload no longer fits after processing another workload": Template.NO_LONGER_FITS,
    "Workload requires preemption, but it's gated": Template.PREEMPTION_GATED,
    "waiting for all admitted workloads to be in PodsReady condition": Template.WAITING_FOR_PODS_READY,
    "A more favorable variant is already admitted": Template.MORE_FAVORABLE_VARIANT_ADMITTED,
    "Target flavor is below LastAcceptableFlavorName": Template.BELOW_LAST_ACCEPTABLE_FLAVOR,
    # concurrentadmission/controller.go
    "Admitted variant was evicted": Template.VARIANT_EVICTED,
    "No variant is running": Template.NO_VARIANT_RUNNING,
    # workload/admissionchecks.go (Admitted condition)
    "The workload is admitted": Template.ADMITTED,
    "The workload has no reservation": Template.NO_RESERVATION,
    "The workload has no reservation and not all checks ready": Template.NO_RESERVATION,
    "The workload has not all checks ready": Template.UNSATISFIED_CHECKS,
    "There are pending delayed topology requests": Template.PENDING_DELAYED_TOPOLOGY,
}

_Builder = Callable[[str, "re.Match[str]", int, bool], ParsedMessage]


def _names_builder(template: Template, details: str | None = None) -> _Builder:
    """A builder that copies every named group (except `details`) into `names`."""

    def build(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
        names = {k: v for k, v in m.groupdict().items() if v is not None and k != "details"}
        det = m.groupdict().get("details") if details is None else details
        return ParsedMessage(template, text, names=names, details=det, truncated=truncated)

    return build


def _b_pods_ready(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    names: dict[str, str] = {}
    key = m.group("workload")
    if key:
        names["workload"] = key
        ns, sep, nm = key.partition("/")
        if sep:
            names["namespace"], names["name"] = ns, nm
        else:
            names["name"] = key
    return ParsedMessage(Template.PODS_READY_TIMEOUT, text, names=names, truncated=truncated)


_CHECK_START_RX = re.compile(r'(?:\A|; )"(?P<name>[^"]*)"(?= \(|; "|\Z)')


def _parse_checks(s: str) -> tuple[tuple[str, str], ...]:
    """ "name" (message); "name2" (message2) -> (("name", "message"), ...) (buildAdmissionChecksMessage)."""
    starts = list(_CHECK_START_RX.finditer(s))
    out: list[tuple[str, str]] = []
    for i, st in enumerate(starts):
        seg = s[st.end(): starts[i + 1].start() if i + 1 < len(starts) else len(s)]
        seg = seg[2:-1] if seg.startswith(" (") and seg.endswith(")") else seg.strip()
        out.append((st.group("name"), seg))
    return tuple(out)


def _checks_builder(template: Template) -> _Builder:
    def build(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
        det = m.group("details")
        return ParsedMessage(template, text, names={"state": m.group("state")}, details=det,
                             checks=_parse_checks(det), truncated=truncated)

    return build


_CAUSE_BY_INNER: dict[Template, str] = {
    Template.MAXIMUM_EXECUTION_TIME_EXCEEDED: "MaximumExecutionTimeExceeded",
    Template.REQUEUING_LIMIT_EXCEEDED: "RequeuingLimitExceeded",
    Template.ADMISSION_CHECK_REJECTED: "AdmissionCheck",
    Template.EVICTED_ON_MANAGER: "EvictedOnManagerCluster",
}


def _wrapper_builder(template: Template) -> _Builder:
    def build(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
        rest = m.group("details")
        inner = _parse(rest, depth + 1, truncated) if depth < _MAX_DEPTH else None
        names: dict[str, str] = {}
        cause = _CAUSE_BY_INNER.get(inner.template) if inner is not None else None
        if template is Template.DEACTIVATED_DUE_TO and cause is not None:
            names["underlyingCause"] = cause
        return ParsedMessage(template, text, names=names, inner=inner, details=rest, truncated=truncated)

    return build


_PREEMPTION_REASONS: dict[str, str] = {
    # preemption.go HumanReadablePreemptionReasons
    "prioritization in the ClusterQueue": "InClusterQueue",
    "reclamation within the cohort": "InCohortReclamation",
    "Fair Sharing within the cohort": "InCohortFairSharing",
    "reclamation within the cohort while borrowing": "InCohortReclaimWhileBorrowing",
}
_PRIORITIES = (r"(?:; preemptor effective priority: (?P<p_eff>-?\d+) \(base: (?P<p_base>-?\d+), "
               r"boost: (?P<p_boost>-?\d+)\); preemptee effective priority: (?P<t_eff>-?\d+) "
               r"\(base: (?P<t_base>-?\d+), boost: (?P<t_boost>-?\d+)\))?")


def _unknown_none(v: str | None) -> str | None:
    return None if v is None or v == "UNKNOWN" else v


def _preemption_info(m: re.Match[str], **facts: str | None) -> PreemptionInfo:
    return PreemptionInfo(
        preemptor_uid=facts.get("preemptor_uid"), preemptor_job_uid=facts.get("preemptor_job_uid"),
        reason_phrase=facts.get("reason_phrase"), reason=facts.get("reason"),
        preemptor_path=facts.get("preemptor_path"), preemptee_path=facts.get("preemptee_path"),
        preemptor_priority=_gint(m, "p_eff"), preemptor_base_priority=_gint(m, "p_base"),
        preemptor_boost=_gint(m, "p_boost"), preemptee_priority=_gint(m, "t_eff"),
        preemptee_base_priority=_gint(m, "t_base"), preemptee_boost=_gint(m, "t_boost"),
    )


def _gint(m: re.Match[str], name: str) -> int | None:
    v = m.group(name)
    try:
        return int(v) if isinstance(v, str) else None
    except ValueError:
        return None


def _b_preempted(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    phrase = _g(m, "phrase")
    origin = _g(m, "origin")
    reason: str | None
    if phrase is not None:
        reason = _PREEMPTION_REASONS.get(phrase)
    elif origin is not None:  # v0.7: "... (UID: %s) in the ClusterQueue|cohort"
        phrase = f"in the {origin}"
        reason = "InClusterQueue" if origin == "ClusterQueue" else "InCohortReclamation"
    else:  # <= v0.6: "Preempted to accommodate a higher priority Workload"
        phrase = "a higher priority Workload"
        reason = None
    info = _preemption_info(
        m, preemptor_uid=_unknown_none(_g(m, "uid")), preemptor_job_uid=_unknown_none(_g(m, "juid")),
        reason_phrase=_unknown_none(phrase), reason=reason, preemptor_path=_unknown_none(_g(m, "ppath")),
        preemptee_path=_unknown_none(_g(m, "epath")),
    )
    names: dict[str, str] = {}
    if info.preemptor_uid is not None:
        names["preemptorUID"] = info.preemptor_uid
    if info.preemptor_job_uid is not None:
        names["preemptorJobUID"] = info.preemptor_job_uid
    return ParsedMessage(Template.PREEMPTED, text, names=names, preemption=info, truncated=truncated)


def _b_preempted_workload(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    key = m.group("workload")
    ns, sep, nm = key.partition("/")
    names = {"workload": key, "name": nm if sep else key, "uid": m.group("uid"),
             "clusterQueue": m.group("clusterQueue")}
    if sep:
        names["namespace"] = ns
    info = _preemption_info(m)
    return ParsedMessage(Template.PREEMPTED_WORKLOAD, text, names=names, preemption=info, truncated=truncated)


def _b_quota_reserved(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    names = {"clusterQueue": m.group("clusterQueue")}
    if m.group("waitSeconds") is not None:
        names["waitSeconds"] = m.group("waitSeconds")
    fc = m.group("fc")
    considered = _parse_considered_list(fc, truncated) if fc is not None else ()
    return ParsedMessage(Template.QUOTA_RESERVED, text, names=names, details=fc,
                         flavors_considered=considered, truncated=truncated)


def _b_dra(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    return ParsedMessage(Template.DRA_FIELD_ERRORS, text, details=text, truncated=truncated)


_LQ = r"LocalQueue (?P<localQueue>\S*) "  # the name may be empty: "LocalQueue  doesn't exist"
_CQ = r"ClusterQueue (?P<clusterQueue>\S*) "
_S = re.S
_W = Template  # shorter lines below

_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str], _Builder], ...] = (
    # workload_controller.go getQueueBlocker and the reconcile...QueueStopped/Terminating paths
    (("localqueue",), re.compile(_LQ + "doesn't exist"), _names_builder(_W.LOCAL_QUEUE_NOT_FOUND)),
    (("localqueue",), re.compile(_LQ + "is inactive"), _names_builder(_W.LOCAL_QUEUE_INACTIVE)),
    (("localqueue",), re.compile(_LQ + "is stopped"), _names_builder(_W.LOCAL_QUEUE_STOPPED)),
    (("localqueue",), re.compile(_LQ + "is terminating or missing"),
     _names_builder(_W.LOCAL_QUEUE_TERMINATING)),
    # "doesn't exist": workload controller; "not found": scheduler nominate
    (("clusterqueue",), re.compile(_CQ + "(?:doesn't exist|not found)"),
     _names_builder(_W.CLUSTER_QUEUE_NOT_FOUND)),
    (("clusterqueue",), re.compile(_CQ + "is inactive"), _names_builder(_W.CLUSTER_QUEUE_INACTIVE)),
    (("clusterqueue",), re.compile(_CQ + "is stopped"), _names_builder(_W.CLUSTER_QUEUE_STOPPED)),
    (("clusterqueue",), re.compile(_CQ + "is terminating or missing"),
     _names_builder(_W.CLUSTER_QUEUE_TERMINATING)),
    # workload/resources.go ValidateAdmissibility; "Workload ..." (capital W) up to v0.18.4
    (("workload",), re.compile(r"workload namespace doesn't match ClusterQueue selector", re.I),
     _names_builder(_W.NAMESPACE_NOT_SELECTED)),
    (("workload",),
     re.compile(r'workload namespace "(?P<namespace>[^"]*)" does not exist: (?P<details>.*)', _S),
     _names_builder(_W.NAMESPACE_MISSING)),
    (("could",), re.compile(r"Could not obtain workload namespace: (?P<details>.*)", _S),  # <= v0.18.4
     _names_builder(_W.NAMESPACE_MISSING)),
    (("invalid",), re.compile(r"invalid namespace selector: (?P<details>.*)", _S),
     _names_builder(_W.INVALID_NAMESPACE_SELECTOR)),
    (("resources",), re.compile(r"resources validation failed: (?P<details>.*)", _S),
     _names_builder(_W.RESOURCES_INVALID)),
    (("resources",), re.compile(r"resources didn't satisfy LimitRange constraints: (?P<details>.*)", _S),
     _names_builder(_W.LIMIT_RANGE)),
    # condition "Admission is gated by: %s"; event AdmissionGated "Workload admission is gated by: %s"
    (("admission", "workload"),
     re.compile(r"(?:Workload admission|Admission) is gated by: (?P<gatedBy>.*)", _S),
     _names_builder(_W.ADMISSION_GATED)),
    (("failed",), re.compile(r"Failed to admit workload: (?P<details>.*)", _S),
     _names_builder(_W.FAILED_TO_ADMIT)),
    # evictions; preemption.go preemptionMessage (+ the Preempted event's priority suffix) and older forms
    (("preempted",), re.compile(
        r"Preempted to accommodate (?:a higher priority Workload"
        r"|a workload \(UID: (?P<uid>[^,)]*)(?:, JobUID: (?P<juid>[^)]*))?\) "
        r"(?:in the (?P<origin>ClusterQueue|cohort)"
        r"|due to (?P<phrase>.*?)(?:; preemptor path: (?P<ppath>[^;]*); preemptee path: (?P<epath>[^;]*))?))"
        + _PRIORITIES, _S), _b_preempted),
    (("preempted",), re.compile(r"Preempted workload (?P<workload>\S+) \(UID: (?P<uid>[^)]*)\) "
                                r"in ClusterQueue (?P<clusterQueue>[^\s;]*)" + _PRIORITIES),
     _b_preempted_workload),
    (("exceeded",), re.compile(r"Exceeded the PodsReady timeout(?: (?P<workload>\S*))?"), _b_pods_ready),
    (("evicted",),
     re.compile(r"Evicted due to AdmissionChecks? in (?P<state>Retry) state: (?P<details>.*)", _S),
     _checks_builder(_W.ADMISSION_CHECK_EVICTION)),
    (("admissioncheck", "admissionchecks"),
     re.compile(r"AdmissionChecks? in (?P<state>Rejected) state: (?P<details>.*)", _S),
     _checks_builder(_W.ADMISSION_CHECK_REJECTED)),
    (("workload",), re.compile(r"(?:Workload was evicted as there was no replacement for unhealthy node\(s\)"
                               r"|Workload eviction triggered due to multiple TAS assigned node failures, "
                               r"including): (?P<nodes>.*)", _S), _names_builder(_W.NODE_FAILURES)),
    (("evicted",), re.compile(r"Evicted to accommodate a workload \(UID: (?P<preemptorUID>[^)]*)\) due to "
                              r"migration to more favorable resource flavor"),
     _names_builder(_W.FLAVOR_MIGRATION)),
    (("evicted",), re.compile(r"Evicted on manager: (?P<details>.*)", _S),
     _wrapper_builder(_W.EVICTED_ON_MANAGER)),
    # Evicted "The workload is deactivated due to %s"; event AdmissionCheckRejected "Deactivated due to %s"
    (("the", "deactivated"),
     re.compile(r"(?:The workload is deactivated|Deactivated) due to (?P<details>.*)", _S),
     _wrapper_builder(_W.DEACTIVATED_DUE_TO)),
    (("the",), re.compile(r"The maximum execution time \((?P<seconds>\d+)s\) exceeded"),
     _names_builder(_W.MAXIMUM_EXECUTION_TIME_EXCEEDED)),
    (("previously:",), re.compile(r"Previously: (?P<details>.*)", _S), _wrapper_builder(_W.PREVIOUSLY)),
    (("replaced",), re.compile(r"Replaced to accommodate a workload \(UID: (?P<uid>[^,)]*), "
                               r"JobUID: (?P<jobUID>[^)]*)\) due to workload slice aggregation"),
     _names_builder(_W.WORKLOAD_SLICE_REPLACED)),
    # positive: condition "Quota reserved in ClusterQueue %s"; event adds wait time and Flavors considered
    (("quota",), re.compile(r"Quota reserved in ClusterQueue (?P<clusterQueue>[^\s,;]*)"
                            r"(?:, wait time since queued was (?P<waitSeconds>\d+)s)?"
                            r"(?:; Flavors considered: (?P<fc>.*))?", _S), _b_quota_reserved),
    # event Admitted "Admitted by ClusterQueue %s, wait time ..."; Job event "Admitted by clusterQueue %v"
    (("admitted",), re.compile(r"Admitted by (?:ClusterQueue|clusterQueue) (?P<clusterQueue>[^\s,;]*)"
                               r"(?:, wait time since reservation was (?P<waitSeconds>\d+)s)?"),
     _names_builder(_W.ADMITTED)),
)
_RULES_BY_WORD: dict[str, tuple[tuple[re.Pattern[str], _Builder], ...]] = {}
for _words, _rr, _bb in _RULES:
    for _w in _words:
        _RULES_BY_WORD[_w] = (*_RULES_BY_WORD.get(_w, ()), (_rr, _bb))

_DRA_FIELD_ERROR_RX = re.compile(r"\[?spec\.podSets\[\d+\]\.\S*: .*", re.S)


def _is_truncated(text: str) -> bool:
    if not text.endswith(_TRUNCATION_SUFFIX) or len(text) < EVENT_MESSAGE_LIMIT // 4:
        return False
    return len(text.encode("utf-8", "replace")) >= EVENT_MESSAGE_LIMIT - 8


def _parse(text: str, depth: int, truncated: bool) -> ParsedMessage:
    lit = _LITERALS.get(text)
    if lit is not None:
        return ParsedMessage(lit, text, truncated=truncated)
    body = text[:-len(_TRUNCATION_SUFFIX)] if truncated and text.endswith(_TRUNCATION_SUFFIX) else text
    if body.startswith((_PODSET_HEADER, "failed to assign flavors to pod set ", ". P")):
        return _parse_assignment(text, body, truncated)
    sp = body.find(" ")
    word = (body[:sp] if sp >= 0 else body).lower()
    for rx, build in _RULES_BY_WORD.get(word, ()):
        m = rx.fullmatch(body)
        if m is not None:
            return build(text, m, depth, truncated)
    if body.startswith(("spec.podSets[", "[spec.podSets[")):
        dm = _DRA_FIELD_ERROR_RX.fullmatch(body)
        if dm is not None:
            return _b_dra(text, dm, depth, truncated)
    return ParsedMessage(Template.UNKNOWN, text, details=text or None, truncated=truncated)


def parse_workload_message(text: str) -> ParsedMessage:
    """Parse any QuotaReserved/Evicted/Preempted/Requeued/Admitted condition message or Workload event note.

    Never raises; a text that matches no known template gives `Template.UNKNOWN`.
    """
    if not isinstance(text, str):
        return ParsedMessage(Template.UNKNOWN, "")
    return _parse_cached(text)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> ParsedMessage:
    """Kueue repeats the same few messages across thousands of Workloads; results are immutable."""
    try:
        return _parse(text, 0, _is_truncated(text))
    except Exception:  # defensive: a parser bug must never break a diagnosis pass
        return ParsedMessage(Template.UNKNOWN, text, details=text or None)


# =================================================================================================
# QuotaReserved event: "; Flavors considered: <podset>: <flavor>(<mode>[;borrow=N][;reason...]), ... | ..."
# =================================================================================================

_ATTEMPT_SPLIT_RX = re.compile(r";(?! )")  # reasons are joined by ";" and may contain "; " themselves
_MODES = frozenset({"NoFit", "Preempt", "Fit", "DeferredFit", "Unknown"})


def _attempt(podset: str, flavor: str, content: str, text: str, truncated: bool) -> FlavorAttempt:
    tokens = _ATTEMPT_SPLIT_RX.split(content) if content else []
    mode = preemption_mode = None
    borrow: int | None = None
    i = 0
    if tokens and (tokens[0] in _MODES or tokens[0].startswith("preemptionMode=")):
        if tokens[0].startswith("preemptionMode="):
            preemption_mode = tokens[0][len("preemptionMode="):]
            mode = "Preempt" if preemption_mode in ("Preempt", "Reclaim") else None
        else:
            mode = tokens[0]
        i = 1
    if i < len(tokens) and tokens[i].startswith("borrow=") and tokens[i][7:].isdigit():
        borrow = int(tokens[i][7:])
        i += 1
    reasons: list[FlavorFailure] = []
    rest = tokens[i:]
    for j, tok in enumerate(rest):
        reasons.extend(_scan_reasons(podset, tok, truncated and j == len(rest) - 1))
    if truncated and not rest and content:
        reasons.append(_unparsed(podset, content))
    return FlavorAttempt(podset, flavor, text, mode=mode, preemption_mode=preemption_mode, borrow=borrow,
                         reasons=tuple(reasons))


def _parse_considered_list(s: str, truncated: bool) -> tuple[FlavorAttempt, ...]:
    if truncated and s.endswith(_TRUNCATION_SUFFIX):
        s = s[:-len(_TRUNCATION_SUFFIX)]
    out: list[FlavorAttempt] = []
    n = len(s)
    pos = 0
    podset = ""
    expect_podset = True
    while pos < n:
        if expect_podset:
            colon = s.find(": ", pos)
            if colon < 0:
                break
            podset = s[pos:colon]
            pos = colon + 2
            expect_podset = False
        paren = s.find("(", pos)
        if paren < 0:
            break
        flavor = s[pos:paren]
        depth = 0
        close = -1
        for k in range(paren, n):
            ch = s[k]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    close = k
                    break
        if close < 0:  # cut by the 1 KiB event limit
            out.append(_attempt(podset, flavor, s[paren + 1:], s[pos:], True))
            break
        out.append(_attempt(podset, flavor, s[paren + 1:close], s[pos:close + 1], False))
        pos = close + 1
        if s.startswith(", ", pos):
            pos += 2
        elif s.startswith(" | ", pos):
            pos += 3
            expect_podset = True
        else:
            break
    return tuple(out)


def parse_flavors_considered(note: str) -> tuple[FlavorAttempt, ...]:
    """Flavor attempts of a QuotaReserved event note (or of just its "Flavors considered" list)."""
    if not isinstance(note, str):
        return ()
    try:
        idx = note.find("; Flavors considered: ")
        if idx >= 0:
            s = note[idx + len("; Flavors considered: "):]
        elif note.startswith("Flavors considered: "):
            s = note[len("Flavors considered: "):]
        elif note.startswith("Quota reserved in ClusterQueue "):
            return ()
        else:
            s = note
        return _parse_considered_list(s, _is_truncated(note))
    except Exception:
        return ()


# =================================================================================================
# PreemptedWorkload event (on the preemptor)
# =================================================================================================


def parse_preempted_workload_event(note: str) -> PreemptedWorkloadEvent | None:
    """Parse "Preempted workload ns/name (UID: u) in ClusterQueue cq; preemptor effective priority: ...".

    Returns None for any other text.
    """
    p = parse_workload_message(note)
    if p.template is not Template.PREEMPTED_WORKLOAD or p.preemption is None:
        return None
    n = p.names
    return PreemptedWorkloadEvent(workload=n.get("workload", ""), namespace=n.get("namespace"),
                                  name=n.get("name", ""), uid=n.get("uid", ""),
                                  cluster_queue=n.get("clusterQueue", ""), preemption=p.preemption)


# =================================================================================================
# ClusterQueue Active=False message (pkg/cache/scheduler/clusterqueue.go inactiveReason)
# =================================================================================================

_CQ_PARTS: tuple[tuple[str, str], ...] = (
    ("is stopped", "Stopped"),
    ("references missing ResourceFlavor(s): ", "FlavorNotFound"),
    ("references missing AdmissionCheck(s): ", "AdmissionCheckNotFound"),
    ("references inactive AdmissionCheck(s): ", "AdmissionCheckInactive"),
    ("Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: ",
     "MultipleMultiKueueAdmissionChecks"),
    ("Cannot specify MultiKueue AdmissionCheck per flavor, found: ",
     "MultiKueueAdmissionCheckAppliedPerFlavor"),
    ("Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: ",
     "MultiKueueWithProvisioningRequest"),
    ("there is no Topology ", "TopologyNotFound"),
)
_CQ_CAUSE = dict(_CQ_PARTS)
_CQ_PART_RX = re.compile(r"(?:\A|, )(?P<prefix>" + "|".join(re.escape(p) for p, _ in _CQ_PARTS) + ")")
_CQ_PREFIX = "Can't admit new workloads: "


def parse_cluster_queue_inactive(message: str) -> tuple[tuple[str, str], ...]:
    """ClusterQueue Active=False message -> ((cause, detail), ...) in message order.

    cause is one of FlavorNotFound, AdmissionCheckNotFound, AdmissionCheckInactive, Stopped, Terminating,
    TopologyNotFound, MultipleMultiKueueAdmissionChecks, MultiKueueAdmissionCheckAppliedPerFlavor,
    MultiKueueWithProvisioningRequest, Unknown. detail is the raw text after the part's fixed prefix: for
    the name lists Kueue writes "a,b" (v0.12+, no blank) or "[a b]" (<= v0.11); see `split_name_list`.
    "Can admit new workloads" (Active=True) gives ().
    """
    if not isinstance(message, str):
        return ()
    try:
        return _parse_cq_inactive(message)
    except Exception:
        return (("Unknown", message),)


def _parse_cq_inactive(message: str) -> tuple[tuple[str, str], ...]:
    if message in ("", "Can admit new workloads"):
        return ()
    if message == "Can't admit new workloads; clusterQueue is terminating":
        return (("Terminating", ""),)
    if message == "Can't admit new workloads.":
        return (("Unknown", ""),)
    if not message.startswith(_CQ_PREFIX):
        return (("Unknown", message),)
    body = message[len(_CQ_PREFIX):]
    if body.endswith(_TRUNCATION_SUFFIX) and _is_truncated(message):
        body = body[:-len(_TRUNCATION_SUFFIX)]
    elif body.endswith("."):
        body = body[:-1]
    starts = list(_CQ_PART_RX.finditer(body))
    out: list[tuple[str, str]] = []
    if not starts:
        return (("Unknown", body),)
    first = starts[0].start()
    if first > 0:
        out.append(("Unknown", body[:first]))
    for i, st in enumerate(starts):
        stop = starts[i + 1].start() if i + 1 < len(starts) else len(body)
        out.append((_CQ_CAUSE[st.group("prefix")], body[st.end():stop]))
    return tuple(out)


def split_name_list(detail: str) -> tuple[str, ...]:
    """Names of a ClusterQueue inactive detail: "a,b" (v0.12+), "[a b]" (<= v0.11), "a, b" (both MultiKueue
    and ProvisioningRequest: two lists) or '"topo" for TAS flavor "f"' (-> ("topo", "f"))."""
    d = detail.strip()
    if d.startswith('"'):
        return tuple(re.findall(r'"([^"]*)"', d))
    if d.startswith("[") and d.endswith("]"):
        return tuple(x for x in d[1:-1].split() if x)
    return tuple(x for x in re.split(r",\s*", d) if x)

