"""The vocabulary of Kueue's messages and the parsed results, shared by every parser of the package.

`Template` names the message template a text matched and `FailureKind` what one flavor reason says; the
immutable records (NamedTuples on the hot path, frozen dataclasses elsewhere) are what the parsers return.
Kueue's size limits and the " ..." it cuts texts with are here too, because every parser must recognise a
cut text. Nothing in this module parses: `flavors.py` fills `FlavorFailure` and `FlavorAttempt`,
`workload.py` builds `ParsedMessage`, `events.py` gives `PreemptedWorkloadEvent`, `cluster_queue.py` reads
the ClusterQueue's Active message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from ...kube.objects import TRUNCATION_SUFFIX

# pkg/util/api/api.go: maxConditionMsgSize / maxEventMsgSize, both in bytes, suffix " ...".
CONDITION_MESSAGE_LIMIT = 32 * 1024
EVENT_MESSAGE_LIMIT = 1024


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
    # -- MultiKueue's check message on the manager (also the note of its Warning MultiKueue event) ------
    MULTIKUEUE_REMOTE_OUT_OF_SYNC = "MultiKueueRemoteOutOfSync"  # a worker finished its copy OutOfSync (v0.19)
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


class FlavorFailure(NamedTuple):
    """One reason of a pod set part: what it says and the facts in it (None / () when not stated).

    A NamedTuple, not a frozen dataclass: as immutable, but built in a fifth of the time (a frozen
    dataclass's __init__ calls object.__setattr__ once per field, 19 here). The quota mix builds 20,000
    per pass; callers only read the attributes.
    """

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


class PreemptionInfo(NamedTuple):
    """Facts of "Preempted to accommodate a workload (UID: ..., JobUID: ...) due to ...".

    Kueue writes UNKNOWN for absent values; those become None here. A NamedTuple, like `FlavorFailure`.
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


_NO_NAMES: Mapping[str, str] = {}  # the `names` of most messages; read-only by its type


class ParsedMessage(NamedTuple):
    """A whole message: the template it matched and the facts in it.

    A NamedTuple like `FlavorFailure` (a frozen dataclass's __init__ set its 14 fields one
    object.__setattr__ at a time: 15% of the parse of a quota message). Messages without names share
    one empty `names` mapping; the results are shared through the parse cache anyway.
    """

    template: Template
    text: str
    names: Mapping[str, str] = _NO_NAMES
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


def is_truncated(text: str) -> bool:
    """Whether Kueue cut the text: it ends with " ..." and is about as long as the smaller limit (bytes)."""
    if not text.endswith(TRUNCATION_SUFFIX) or len(text) < EVENT_MESSAGE_LIMIT // 4:
        return False
    return len(text.encode("utf-8", "replace")) >= EVENT_MESSAGE_LIMIT - 8
