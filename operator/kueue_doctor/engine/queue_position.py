"""Where a pending Workload stands in its ClusterQueue, in Kueue's order (pkg/cache/queue baseCompareFunc):
higher priority first, then the earlier queue timestamp (creation, or the eviction by PodsReady timeout or by
an admission check, which sends it to the back), then the UID.

Computed when asked (`kueue-doctor explain`), never kept in the AdmissionDiagnosis by the operator: one
admission moves every Workload behind it, so a stored position would rewrite every waiting diagnosis of
the ClusterQueue on each admission (Kueue dropped positions from LocalQueue status for the same reason and
serves them on demand through its visibility API).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..kube.objects import conditions, i, is_true, m, parse_time, s
from ..state import ClusterState, Derived, Key

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_REQUEUED_AT_BACK = ("PodsReadyTimeout", "AdmissionCheck")  # evictions that move the queue timestamp
WAITING = ("WaitingForQuota", "WaitingForPreemption", "NotYetEvaluated", "BlockedByQueueHead")


def _order(wl: Mapping[str, Any]) -> tuple[int, datetime, str]:
    md, spec = m(wl.get("metadata")), m(wl.get("spec"))
    stamp = parse_time(md.get("creationTimestamp")) or _EPOCH
    evicted = conditions(wl).get("Evicted")
    if is_true(evicted) and m(evicted).get("reason") in _REQUEUED_AT_BACK:
        stamp = parse_time(m(evicted).get("lastTransitionTime")) or stamp
    return -i(spec.get("priority")), stamp, s(md.get("uid")) or ""


def _pending(wl: Mapping[str, Any]) -> bool:
    if m(wl.get("spec")).get("active", True) is False or m(wl.get("metadata")).get("deletionTimestamp"):
        return False
    conds = conditions(wl)
    return not (is_true(conds.get("QuotaReserved")) or is_true(conds.get("Finished")))


QUEUES: Derived[dict[str, list[tuple[tuple[int, datetime, str], Key]]]] = Derived("pending order per ClusterQueue",
                                                                                 lambda _: {})


def _queue(state: ClusterState, cluster_queue: str) -> list[tuple[tuple[int, datetime, str], Key]]:
    """The pending Workloads of one ClusterQueue in Kueue's order, sorted once per state change."""
    queues = state.derived(QUEUES)
    if cluster_queue not in queues:
        workloads = state.workloads
        queues[cluster_queue] = sorted((_order(workloads[k]), k) for k in state.index.workloads_by_cq.get(
            cluster_queue, ()) if k in workloads and _pending(workloads[k]))
    return queues[cluster_queue]


def queue_position(state: ClusterState, key: Key, cluster_queue: str | None) -> dict[str, Any] | None:
    """status.queuePosition for a pending Workload, or None when it is not pending in a known ClusterQueue."""
    if not cluster_queue:
        return None
    queue = _queue(state, cluster_queue)
    mine = next((n for n, (_, k) in enumerate(queue) if k == key), None)
    if mine is None:
        return None
    priority = queue[mine][0][0]
    higher = sum(1 for order, _ in queue[:mine] if order[0] < priority)
    return {"position": mine + 1, "pending": len(queue), "higherPriority": higher,
            "samePriorityEarlier": mine - higher, "source": "Computed"}


def with_positions(state: ClusterState, diagnoses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add status.queuePosition to the diagnoses of Workloads that wait for quota (the CLI asks for it)."""
    for d in diagnoses:
        st = d["status"]
        if st.get("reason") in WAITING:
            pos = queue_position(state, (d["metadata"]["namespace"], d["metadata"]["name"]), st.get("clusterQueue"))
            if pos is not None:
                st["queuePosition"] = pos
    return diagnoses
