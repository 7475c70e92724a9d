"""Where a pending Workload stands in its ClusterQueue, in Kueue's order (pkg/cache/queue baseCompareFunc):
a BestEffortFIFO queue's sticky head first (a Workload waiting for its preemptions), then higher priority,
then the earlier queue timestamp (creation, or the eviction by an admission check or by a PodsReady timeout, which
sends it to the back; waitForPodsReady.requeuingStrategy.timestamp Creation keeps the creation time for the
latter), then the UID.

Computed when asked (`kueue-doctor explain`), never kept in the AdmissionDiagnosis by the operator: one
admission moves every Workload behind it, so a stored position would rewrite every waiting diagnosis of
the ClusterQueue on each admission (Kueue dropped positions from LocalQueue status for the same reason and
serves them on demand through its visibility API).

Cross-checked with Kueue's own answer where the input has it: a PendingWorkloadsSummary of Kueue's visibility
API (`visibility.kueue.x-k8s.io/v1beta2 clusterqueues/<cq>/pendingworkloads`, read by `explain` or in a dump).
`visibility` gets Kueue's position (1-based, as `position`); the computed one stays; when they differ the message
says by how much and why they can (Workloads only one side has, an order not modelled here). Kueue before
v0.19.2 inflated its positionInLocalQueue when LocalQueues of the same name in other namespaces share the
ClusterQueue (kubernetes-sigs/kueue#14435); the message says so when Kueue's answer shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..kube.objects import conditions, i, is_true, lst, m, name, namespace, ns_name, parse_time, s, spec
from ..state import ClusterState, Derived, Key
from .victims import VICTIMS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WAITING = ("WaitingForQuota", "WaitingForPreemption", "NotYetEvaluated", "BlockedByQueueHead")
#: Kueue's default (and kueue-doctor's) `limit` of a pendingworkloads read (pkg/constants DefaultPendingWorkloadsLimit)
VISIBILITY_LIMIT = 1000
#: The Kueue release that stopped inflating positionInLocalQueue (kubernetes-sigs/kueue#14435)
LQ_POSITION_FIXED_IN = "v0.19.2"


def requeued_at_back(state: ClusterState, evicted: Mapping[str, Any] | None) -> bool:
    """The Evicted condition moves the Workload's queue timestamp to the eviction time (GetQueueOrderTimestamp):
    an admission check's eviction always; a PodsReady timeout's unless Kueue's Configuration sets
    waitForPodsReady.requeuingStrategy.timestamp Creation."""
    if not is_true(evicted):
        return False
    reason = m(evicted).get("reason")
    return reason == "AdmissionCheck" or (reason == "PodsReadyTimeout" and state.kueue_config.requeues_at_eviction)


def _order(state: ClusterState, wl: Mapping[str, Any]) -> tuple[int, datetime, str]:
    md = m(wl.get("metadata"))
    stamp = parse_time(md.get("creationTimestamp")) or _EPOCH
    evicted = conditions(wl).get("Evicted")
    if requeued_at_back(state, evicted):
        stamp = parse_time(m(evicted).get("lastTransitionTime")) or stamp
    return -state.priority_of(wl), stamp, s(md.get("uid")) or ""


def _pending(wl: Mapping[str, Any]) -> bool:
    if m(wl.get("spec")).get("active", True) is False or m(wl.get("metadata")).get("deletionTimestamp"):
        return False
    conds = conditions(wl)
    return not (is_true(conds.get("QuotaReserved")) or is_true(conds.get("Finished")))


def _sticky_heads(state: ClusterState) -> dict[str, tuple[Key, datetime | None]]:
    """Per BestEffortFIFO ClusterQueue, the pending Workload Kueue keeps at its head while the Workloads it
    preempted release their quota (cluster_queue.go preemptorWorkload, kueue#6929/#7301), with when that began:
    requeued with PendingPreemption it sorts before every other Workload, whatever their priority, and is popped
    again each cycle, so Kueue evaluates nothing else of the queue until it is admitted, found unfit or deleted.
    Kueue keeps one per queue; a second candidate (a message from before a Kueue restart) yields to the first in
    the order."""
    heads: dict[str, tuple[tuple[int, datetime, str], Key, Mapping[str, Any]]] = {}
    for key, cq_name in state.index.preempting.items():
        cq = state.cluster_queues.get(cq_name)
        wl = state.workloads.get(key)
        if cq is None or wl is None or s(spec(cq).get("queueingStrategy")) == "StrictFIFO" \
                or fair_sharing_ordered(cq) or not _pending(wl):
            continue
        order = _order(state, wl)
        if cq_name not in heads or order < heads[cq_name][0]:
            heads[cq_name] = (order, key, wl)
    victims = state.derived(VICTIMS) if heads else {}
    out: dict[str, tuple[Key, datetime | None]] = {}
    for cq_name, (_, key, wl) in heads.items():
        since = min((v.evicted_at for v in victims.get(s(m(wl.get("metadata")).get("uid")) or "", ())
                     if v.evicted_at is not None), default=None)  # the first of its victims still evicted now
        if since is None:  # its victims are gone already: since it last went QuotaReserved=False
            since = parse_time(m(conditions(wl).get("QuotaReserved")).get("lastTransitionTime"))
        out[cq_name] = (key, since)
    return out


STICKY_HEADS: Derived[dict[str, tuple[Key, datetime | None]]] = Derived("BestEffortFIFO sticky heads", _sticky_heads)


def sticky_head(state: ClusterState, cluster_queue: str | None) -> tuple[Key, datetime | None] | None:
    """The Workload Kueue keeps at the head of this BestEffortFIFO ClusterQueue while its preemptions complete, and
    since when (the first eviction of its victims)."""
    return state.derived(STICKY_HEADS).get(cluster_queue or "")


QUEUES: Derived[dict[str, list[tuple[tuple[int, datetime, str], Key]]]] = Derived("pending order per ClusterQueue",
                                                                                 lambda _: {})


def _queue(state: ClusterState, cluster_queue: str) -> list[tuple[tuple[int, datetime, str], Key]]:
    """The pending Workloads of one ClusterQueue in Kueue's order, sorted once per state change."""
    queues = state.derived(QUEUES)
    if cluster_queue not in queues:
        workloads = state.workloads
        queue = sorted((_order(state, workloads[k]), k) for k in state.index.workloads_by_cq.get(
            cluster_queue, ()) if k in workloads and _pending(workloads[k]))
        sticky = sticky_head(state, cluster_queue)
        if sticky is not None:  # ahead of every other, whatever their priority
            queue.sort(key=lambda entry: entry[1] != sticky[0])
        queues[cluster_queue] = queue
    return queues[cluster_queue]


def fair_sharing_ordered(cq: Mapping[str, Any] | None) -> bool:
    """Kueue orders this ClusterQueue's Workloads by their LocalQueue's usage first (admission fair sharing,
    cluster_queue.go queueOrderingFunc), from a ledger the input does not hold: positions across LocalQueues
    cannot be computed; within one LocalQueue the usual order holds."""
    return s(m(spec(cq or {}).get("admissionScope")).get("admissionMode")) == "UsageBasedAdmissionFairSharing"


def queue_position(state: ClusterState, key: Key, cluster_queue: str | None) -> dict[str, Any] | None:
    """status.queuePosition for a pending Workload, or None when it is not pending in a known ClusterQueue (or
    the queue orders by fair sharing)."""
    if not cluster_queue or fair_sharing_ordered(state.cluster_queues.get(cluster_queue)):
        return None
    queue = _queue(state, cluster_queue)
    mine = next((n for n, (_, k) in enumerate(queue) if k == key), None)
    if mine is None:
        return None
    priority = queue[mine][0][0]
    higher = sum(1 for order, _ in queue[:mine] if order[0] < priority)
    return {"position": mine + 1, "pending": len(queue), "higherPriority": higher,
            "samePriorityEarlier": mine - higher, "source": "Computed"}


def pending_cluster_queues(state: ClusterState) -> set[str]:
    """The ClusterQueues with at least one pending Workload in the input (those worth one visibility read)."""
    return {cq for key, wl in state.workloads.items() if _pending(wl) and (cq := state.cluster_queue_of(wl))}


def pending_local_queues(state: ClusterState) -> set[Key]:
    """The LocalQueues (namespace, name) with at least one pending Workload in the input."""
    return {(key[0], lq) for key, wl in state.workloads.items()
            if _pending(wl) and (lq := s(spec(wl).get("queueName"))) and (key[0], lq) in state.local_queues}


def _summary_queue(state: ClusterState, summary: Mapping[str, Any]) -> str | None:
    """The ClusterQueue a PendingWorkloadsSummary is about: explain names it after its ClusterQueue, or after the
    LocalQueue it was read through (with its namespace); else the LocalQueue of its Workloads tells (Kueue's own
    answer, e.g. `kubectl get --raw`, has no name)."""
    if namespace(summary):
        lq = state.local_queues.get(ns_name(summary))
        return s(spec(lq).get("clusterQueue")) if lq is not None else None
    if name(summary):
        return name(summary)
    for item in lst(summary.get("items")):
        lq = state.local_queues.get((namespace(m(item)) or "", s(m(item).get("localQueueName")) or ""))
        if lq is not None and s(spec(lq).get("clusterQueue")):
            return s(spec(lq).get("clusterQueue"))
    return None


@dataclass
class KueueQueue:
    """Kueue's answer for one ClusterQueue: its pending Workloads in Kueue's order, indexed once. `whole` when it
    is the ClusterQueue's list from its head (positionInClusterQueue = the index), not only those of some
    LocalQueues (read through `namespaces/<ns>/localqueues/<lq>/pendingworkloads`, RBAC a tenant has)."""

    items: list[Mapping[str, Any]]
    keys: list[Key] = field(init=False)  # (namespace, name) of each item
    local_queues: list[str] = field(init=False)  # localQueueName of each item
    at: dict[Key, int] = field(init=False)
    listed: set[Key] = field(init=False)
    cut: bool = field(init=False)  # as long as the read's limit: Workloads further back were not read
    whole: bool = field(init=False)
    _computed: set[Key] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.keys = [_key(item) for item in self.items]
        self.local_queues = [s(item.get("localQueueName")) or "" for item in self.items]
        self.at = {k: n for n, k in enumerate(self.keys)}
        self.listed = set(self.at)
        self.cut = len(self.items) >= VISIBILITY_LIMIT
        self.whole = all(i(item.get("positionInClusterQueue")) == n for n, item in enumerate(self.items))
        self._computed = None  # set here too: a compiled dataclass leaves an init=False default unset

    def computed(self, state: ClusterState, cluster_queue: str) -> set[Key]:
        """The Workloads the computation counts as pending in the ClusterQueue (once per ClusterQueue)."""
        if self._computed is None:
            self._computed = {k for _, k in _queue(state, cluster_queue)}
        return self._computed


def summaries(state: ClusterState) -> dict[str, KueueQueue]:
    """Kueue's pending Workloads per ClusterQueue, in Kueue's order (positionInClusterQueue): the ClusterQueue's
    own list where the input has it, else the union of its LocalQueues' lists."""
    whole: dict[str, list[Mapping[str, Any]]] = {}
    parts: dict[str, dict[Key, Mapping[str, Any]]] = {}
    for summary in state.pending_summaries:
        cq = _summary_queue(state, summary)
        if cq is None:
            continue
        items = [m(item) for item in lst(summary.get("items"))]
        if namespace(summary):
            parts.setdefault(cq, {}).update((_key(item), item) for item in items)
        else:
            whole[cq] = items
    return {cq: KueueQueue(sorted(items, key=lambda item: i(item.get("positionInClusterQueue"))))
            for cq, items in {**{cq: list(p.values()) for cq, p in parts.items()}, **whole}.items()}


def _key(item: Mapping[str, Any]) -> Key:
    return ns_name(item)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _namespaces(keys: list[Key]) -> str:
    names = sorted({ns for ns, _ in keys})
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def cross_check(state: ClusterState, key: Key, cluster_queue: str, pos: dict[str, Any], kueue: KueueQueue
                ) -> str | None:
    """Set pos["visibility"] from Kueue's pending list of the ClusterQueue; the sentence for the message when
    Kueue's answer differs from the computed one (or shows Kueue's positionInLocalQueue inflated), else None."""
    mine = kueue.at.get(key)
    cq = f"ClusterQueue {cluster_queue}"
    if mine is None:
        if kueue.cut or not kueue.whole:
            return None  # beyond what was read, or not in the LocalQueues read: Kueue says nothing about it
        return (f"Kueue's visibility API does not list it among the {len(kueue.items)} Workloads pending in {cq}: "
                "Kueue has not queued it yet, or admitted it between the two reads; run explain again.")
    item, ahead = kueue.items[mine], kueue.keys[:mine]
    pos["visibility"] = i(item.get("positionInClusterQueue")) + 1
    if not kueue.whole:
        return _partial_check(pos, cq)
    notes = []
    if pos["visibility"] != pos["position"]:
        computed_ahead = {k for _, k in _queue(state, cluster_queue)[:pos["position"] - 1]}
        only_kueue = sorted(set(ahead) - kueue.computed(state, cluster_queue))
        only_here = [] if kueue.cut else sorted(computed_ahead - kueue.listed)
        why = []
        if only_kueue:
            unread = [k for k in only_kueue if k not in state.workloads]
            why.append(f"Kueue has {_count(len(only_kueue), 'pending Workload')} ahead of it that the computation "
                       "does not" + (f" (from namespaces {_namespaces(unread)}, not in the input: `explain -A` reads "
                                "every namespace)" if unread else ""))
        if only_here:
            verb = "is" if len(only_here) == 1 else "are"
            why.append(f"{_count(len(only_here), 'Workload')} computed ahead of it {verb} not in Kueue's queue (just "
                       "created or admitted between the two reads)")
        if not why:
            why.append("the same Workloads in another order: admission fair sharing, the priority-boost annotation "
                       "and a preemptor Kueue keeps at the head are not modelled here")
        notes.append(f"Kueue's visibility API puts it at {pos['visibility']} of {len(kueue.items)} pending in {cq}, "
                     f"kueue-doctor computed {pos['position']} of {pos['pending']}: {'; '.join(why)}.")
    lq = kueue.local_queues[mine]
    same_name = [k for k, q in zip(ahead, kueue.local_queues[:mine], strict=True) if q == lq]
    own = sum(1 for k in same_name if k[0] == key[0])
    others = [k for k in same_name if k[0] != key[0]]
    if i(item.get("positionInLocalQueue")) > own and others:
        notes.append(f"Kueue gives it positionInLocalQueue {i(item.get('positionInLocalQueue'))} (0-based) but "
                     f"{own} Workloads of LocalQueue {key[0]}/{lq} are ahead of it: it counted those of the "
                     f"LocalQueues named {lq} in namespaces {_namespaces(others)} too, a bug of Kueue before "
                     f"{LQ_POSITION_FIXED_IN} (kubernetes-sigs/kueue#14435); upgrade Kueue to trust that number.")
    return " ".join(notes) or None


def _partial_check(pos: dict[str, Any], cq: str) -> str | None:
    """Kueue's position read through LocalQueues: who is ahead is not known, only how many."""
    more = pos["visibility"] - pos["position"]
    if not more:
        return None
    if more > 0:
        why = (f"Kueue counts {_count(more, 'more Workload')} ahead of it than the input has (read through its "
               "LocalQueue, Kueue does not name them: Workloads of other namespaces' LocalQueues in the same "
               "ClusterQueue, or Workloads admitted between the reads)")
    else:
        why = (f"Kueue counts {_count(-more, 'Workload')} fewer ahead of it (admitted between the reads, or an "
               "order not modelled here: admission fair sharing, the priority-boost annotation, a preemptor Kueue "
               "keeps at the head)")
    return (f"Kueue's visibility API puts it at {pos['visibility']} in {cq}, kueue-doctor computed "
            f"{pos['position']} of {pos['pending']}: {why}.")


def with_positions(state: ClusterState, diagnoses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add status.queuePosition to the diagnoses of Workloads that wait for quota (the CLI asks for it),
    cross-checked with Kueue's visibility API where the input has its answer."""
    kueue = summaries(state)
    for d in diagnoses:
        st = d["status"]
        if st.get("reason") in WAITING:
            key = (d["metadata"]["namespace"], d["metadata"]["name"])
            pos = queue_position(state, key, st.get("clusterQueue"))
            if pos is not None:
                st["queuePosition"] = pos
                note = cross_check(state, key, st["clusterQueue"], pos, kueue[st["clusterQueue"]]) \
                    if st.get("clusterQueue") in kueue else None
                if note:
                    st["message"] = f"{st['message']} {note}"
    return diagnoses
