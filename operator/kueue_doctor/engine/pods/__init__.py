"""The Pod side of a diagnosis: what the Pods of one admitted Workload are waiting for.

Once Kueue has admitted a Workload its Pods still have to be created (Job controller), placed on
nodes (kube-scheduler) and started (kubelet). This package reads the Pods and the Events about them,
exactly as the API server returns them (plain dicts), and says how many exist, are scheduled,
running and ready, and groups the others by what blocks them, keeping one exact upstream message
per group::

    0/8 scheduled, 0 running, 0 ready: 8 Unschedulable (0/3 nodes: 3 Insufficient nvidia.com/gpu)

Pure: no I/O, no clock (pass ``now``), never raises on malformed input. Fields, times and durations
are read with `kube/objects.py`.

Texts it reads are pinned to Kubernetes v1.36.3; ``tests/cases/pod_messages.yaml`` keeps one example of
each with its source. Modules, each owning one sub-concern:

* `scheduler.py`: kube-scheduler's ``FitError`` text (``PodScheduled=False``, ``FailedScheduling``);
* `kubelet.py`: container ``state.waiting`` / ``state.terminated`` reasons and start-up event reasons;
* `events.py`: Event accessors for core/v1 and events.k8s.io/v1, the Pod event index, the Job
  controller's ``FailedCreate`` (``"Error creating: pods \\"x\\" is forbidden: exceeded quota: ..."``,
  webhook denials, webhooks the apiserver cannot call);
* `peers.py`: Pods an operator starts before the Pods they need (an MPIJob's launcher before its workers);
* `summary.py`: `summarize_pods`, `PodSummary`, `PodBlocker`, Kueue's scheduling gates;
* `lifecycle.py`: when the Pods started and how the failed ones ended (`failed_pods`, `first_start`), for a
  Workload that ran.

Import from the package (``from kueue_doctor.engine import pods``); the modules are its layout.
"""

from __future__ import annotations

from ...kube.objects import as_time as parse_time  # kept for importers: RFC 3339 text or a datetime
from .events import (
    JOB_CREATION_FAILED,
    KUEUE_WEBHOOK_SERVICE,
    WEBHOOK_UNREACHABLE,
    CreateDenial,
    create_denial,
    event_count,
    event_first_time,
    event_message,
    event_time,
    job_failed_create,
    newest_event,
)
from .kubelet import (
    BENIGN_WAITING_REASONS,
    image_pull_said,
    mount_failure_side,
    own_limit_eviction,
    pull_rate_limited,
)
from .lifecycle import FailedPod, failed_pods, failed_pods_text, first_start, memory_limits
from .scheduler import NO_NODES_MESSAGE, NodeFitReason, SchedulingFailure, parse_scheduler_message
from .scheduler import _parse_cached as _parse_cached  # the memo, emptied by engine.diagnose.clear_parse_caches
from .summary import (
    BINDING,
    CATEGORIES,
    CLAIM_NOT_CREATED,
    DEFAULT_SCHEDULING_GATED_MESSAGE,
    KUEUE_GATES,
    MESSAGE_LIMIT,
    TERMINATED_BY_KUEUE,
    PodBlocker,
    PodSummary,
    is_kueue_gate,
    summarize_pods,
)

__all__ = [
    "BENIGN_WAITING_REASONS",
    "BINDING",
    "CATEGORIES",
    "CLAIM_NOT_CREATED",
    "DEFAULT_SCHEDULING_GATED_MESSAGE",
    "JOB_CREATION_FAILED",
    "KUEUE_GATES",
    "KUEUE_WEBHOOK_SERVICE",
    "MESSAGE_LIMIT",
    "NO_NODES_MESSAGE",
    "TERMINATED_BY_KUEUE",
    "WEBHOOK_UNREACHABLE",
    "CreateDenial",
    "FailedPod",
    "NodeFitReason",
    "PodBlocker",
    "PodSummary",
    "SchedulingFailure",
    "create_denial",
    "event_count",
    "event_first_time",
    "event_message",
    "event_time",
    "failed_pods",
    "failed_pods_text",
    "first_start",
    "image_pull_said",
    "is_kueue_gate",
    "job_failed_create",
    "memory_limits",
    "mount_failure_side",
    "newest_event",
    "own_limit_eviction",
    "parse_scheduler_message",
    "parse_time",
    "pull_rate_limited",
    "summarize_pods",
]
