"""Parse the free-text messages Kueue writes into Workload conditions and events.

Kueue (checked against v0.19.2, commit 8eab687, and main at ff69552e) does not expose the facts behind
an inadmissible Workload as structured data: the QuotaReserved/Evicted/Preempted/Requeued condition
messages and the event notes are the only place that says which resource, which flavor and how much
quota is missing. This package turns those texts back into data.

Rules it follows (see docs/messages.md and tests/cases/kueue_messages.yaml):

* every template is anchored (whole-text match); a text that matches no template is `UNKNOWN`;
* the reasons inside one pod set are sorted and joined by ", " and several contain ", " themselves,
  so they are found by scanning with the reason templates, never by splitting on commas; text left
  over between recognised reasons becomes an `UNPARSED` failure, so no text is ever dropped;
* condition messages are cut at 32 KiB and event notes at 1 KiB with the suffix " ..."; the reason
  cut in the middle becomes `UNPARSED`;
* no function here raises on any `str` input.

Pure: no I/O. Regexes are compiled once at import time and every parser dispatches on a cheap prefix
look-up before it runs a regex (10,000 Workloads per pass).

Modules, each owning one sub-concern:

* `templates.py`: the vocabulary (`Template`, `FailureKind`), the parsed records, Kueue's limits;
* `flavors.py`: the per-flavor reason table and its scanner, the "couldn't assign flavors to pod set"
  message, the attempts of a "Flavors considered" list;
* `workload.py`: `parse_workload_message`, the literal texts and anchored rules of every condition
  message and Workload event note (queues, admissibility, evictions, preemption, wrappers);
* `events.py`: the QuotaReserved event's "Flavors considered" and the PreemptedWorkload event;
* `cluster_queue.py`: the ClusterQueue `Active=False` message.

Import from the package (`from kueue_doctor.engine.messages import parse_workload_message`); the
modules are its layout, not its API.
"""

from __future__ import annotations

from .cluster_queue import parse_cluster_queue_inactive, split_name_list
from .events import parse_flavors_considered, parse_preempted_workload_event
from .templates import (
    CONDITION_MESSAGE_LIMIT,
    EVENT_MESSAGE_LIMIT,
    FailureKind,
    FlavorAttempt,
    FlavorFailure,
    ParsedMessage,
    PreemptedWorkloadEvent,
    PreemptionInfo,
    Template,
)
from .workload import _parse_cached as _parse_cached  # the memo, emptied by engine.diagnose.clear_parse_caches
from .workload import parse_workload_message

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
