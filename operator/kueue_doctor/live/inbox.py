"""The operator's inbox: watch events in, the ClusterState kept current, the dirty Workloads out.

`observe` is all a Kopf handler does (filter, slim, queue, wake the loop). `drain` applies a batch:
it drops what is not new (the same resourceVersion: a re-list or a duplicate event), stores or removes
the rest, and marks exactly the Workloads each change can affect, as they were related before the change
and after it (`ClusterState.affected_workloads`). Neighbours: service.py feeds it; loop.py drains it and
`take`s the dirty set before each pass; orphans.py queues its repairs here (`put`), so every change
reaches the state the same way; the publisher hears of our own AdmissionDiagnosis objects from here.

Numbers only: a ClusterQueue status change that leaves its conditions as they were (Kueue rewrites usage and
pending counts on every admission, about 40 a second on a busy cluster) can change the diagnosis only of a
Workload whose last diagnosis read those numbers (`diagnosed`, as the engine reports it: one Kueue has not evaluated
yet reads none), mostly the numbers its message quotes. Those of its cohort's Workloads that wait are marked
`stale`, not dirty: the loop diagnoses them once `numbers_pace` after the first such change (`stale_due`), so a
stream of admissions costs one re-diagnosis of each such Workload per pace, not one per admission; with tens of
thousands waiting the pace stretches so that these rounds take at most a quarter of the loop (`stale_pace`).
Their numbers are written within the publisher's refresh budget anyway.

Nothing kept changed: the state keeps what the rules read (kube/slim.py); an event whose slimmed object equals
the kept one but for its resourceVersion (a LocalQueue's counts, which Kueue rewrites on every admission in it;
a Pod's IP) marks nothing.

Background: what no event named but must be diagnosed again (the resync's every Workload, the stale ones once
due) is taken BACKGROUND_BATCH at a time beside the changes, so a change never waits behind a pass over all of
them; the loop runs the next batch at once.

Watch gaps: Kopf re-lists a kind after a "410 Gone" (or when its watches restart) and reports the listed
objects as events of type None, but never the objects deleted meanwhile. `relisted` says when such a re-list
came in after the operator's own start-up list, and `take_relisted` which objects each re-listed kind listed
(their keys' hashes), so that runtime.py asks the apiserver about only what the state holds and the re-list did
not bring (orphans.py `after_relist`): Kopf's own first listing after start-up costs nothing more.
`recording` collects what was observed during a repair's LIST, which is not taken as gone.
Events of a kind RBAC no longer lets us list are dropped (the state must not hold what we may not see), and
events of our own CRD go to `on_crd` (discovery.py pauses or resumes writing at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kube.kueue_names import PODSET_LABEL, expected_workload_name
from ..kube.objects import m, name, namespace, ns_name, s
from ..kube.packed import Codec
from ..kube.shards import Shard
from ..state import KUEUE, OWNER_KINDS, ClusterState, Key, kind_key
from .metrics import Stats, Verdict
from .publisher import Publisher

Body = bytes | Mapping[str, Any]  # a queued watch event's object, packed (kube/packed.Codec) or as it came
DIAGNOSIS = ("kueue-doctor.dev", "AdmissionDiagnosis")
CRD = ("apiextensions.k8s.io", "CustomResourceDefinition")
POD = ("", "Pod")
# Events about others: dropped (a claim's: why its Pods' volume is unbound)
EVENT_KINDS = {"Pod", "Job", "Workload", "PersistentVolumeClaim"} | {kind for _group, kind in OWNER_KINDS}


def event_is_relevant(obj: Mapping[str, Any]) -> bool:
    """A (Warning) Event the engine may read: about a Pod, a Workload, a Workload's owner or a claim."""
    ref = m(obj.get("involvedObject") or obj.get("regarding"))
    return s(ref.get("kind")) in EVENT_KINDS


# events queued as they came before the next ones are packed: between two passes a few dozen wait, and packing
# each (then unpacking it) was a twentieth of the operator's CPU in Kueue's perf scenario; a backlog stays small
PACK_QUEUED_AFTER = 200
BACKGROUND_BATCH = 1000  # background Workloads per pass: about 0.7 s at 50,000, the longest a change waits for them
NUMBERS_PACE = 10.0  # seconds: the longest a waiting Workload's quoted usage lags its ClusterQueue's
# ... unless re-diagnosing the stale Workloads would take more than 1/NUMBERS_SHARE of that pace: at 28,000
# waiting Workloads in cohorts of 100 queues (Kueue's 50,000-Workload perf scenario, 0.3-0.7 ms each) a round
# every 10 s would keep the loop busy for good, taking the cores the apiserver needs for the writes
NUMBERS_SHARE = 4


def numbers_pace(last_round: int, per_workload: float, floor: float, ceiling: float) -> float:
    """Seconds between numbers-only rounds: `floor`, or NUMBERS_SHARE times what the last round cost when that is
    longer (rounds then take at most 1/NUMBERS_SHARE of the loop); never over `ceiling`, the publisher's refresh
    interval, which holds their writes back anyway."""
    return max(floor, min(NUMBERS_SHARE * last_round * per_workload, ceiling))


def _numbers_only(prev: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> bool:
    """A ClusterQueue's status changed in its numbers only: the same spec and the same conditions."""
    return prev is not None and prev.get("spec") == obj.get("spec") and (
        m(prev.get("status")).get("conditions") == m(obj.get("status")).get("conditions"))


def _same_version(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    rv = m(a.get("metadata")).get("resourceVersion")
    return bool(rv) and rv == m(b.get("metadata")).get("resourceVersion")


def _nothing_kept_changed(prev: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Both slimmed (kube/slim.py: what the rules read) and equal but for the resourceVersion: no verdict can change.

    A LocalQueue's status (Kueue rewrites its counts on every admission and finish in it: each such event would
    otherwise mark all of its Workloads), the fields of a Pod or a Job the rules never read."""
    pm, om = m(prev.get("metadata")), m(obj.get("metadata"))
    if len(pm) != len(om) or any(om.get(k) != v for k, v in pm.items() if k != "resourceVersion"):
        return False
    return len(prev) == len(obj) and all(obj.get(k) == v for k, v in prev.items() if k != "metadata")


def _admission_undone(prev: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """A gated Pod group's Pod as the poll read it (orphans.poll_pod_groups) before Kueue admitted it, arriving
    after the watch brought it admitted: Kueue never takes the podset label off, so this copy is the older one."""
    return PODSET_LABEL in m(m(prev.get("metadata")).get("labels")) and (
        PODSET_LABEL not in m(m(obj.get("metadata")).get("labels")))


@dataclass
class Relisted:
    """One kind's re-list: the hashes of the keys it listed, and of those the watch brought after it (alive too),
    and the namespaces it listed objects in (a watch per namespace re-lists its namespace only).

    64-bit hashes, not the keys: 50,000 Pods listed by Kopf at start-up would hold ~10 MB of new key tuples; a
    collision (~1e-10 at 50,000) only defers the removal of one deleted object to the next resync."""

    keys: set[int] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)


class Inbox:
    def __init__(self, state: ClusterState, stats: Stats, publisher: Publisher, verdicts: dict[Key, Verdict],
                 shard: Shard | None = None) -> None:
        self.state = state
        self.shard = shard or Shard()  # only its namespaces' Workloads leave `take`; what `observe` keeps
        self.stats = stats
        self.publisher = publisher
        self.verdicts = verdicts
        self.wake = asyncio.Event()  # set on every observed event; the loop waits on it
        # queued packed (kube/packed.Codec) past PACK_QUEUED_AFTER: the loop drains between passes, and a first
        # pass's 10,000 writes take minutes, during which every write comes back as a watch event of its own
        # diagnosis
        self._queue: deque[tuple[str, Body]] = deque()
        self._codec = Codec()
        self._dirty: set[Key] = set()
        # ClusterQueues whose numbers moved (see the module docstring): their cohorts' waiting Workloads are
        # found when the round is due, once, not on each of the thousands of status writes before it
        self._stale_cqs: set[str] = set()
        self._stale_since: float | None = None  # monotonic time of the first numbers-only change not yet taken
        self._fresh: set[Key] = set()  # diagnosed since that change: their numbers are current
        # Workloads whose last diagnosis read a ClusterQueue's numbers (engine `diagnose(numbers=...)`): the only
        # ones a numbers round takes; one never evaluated by Kueue reads none and keeps its diagnosis
        self._reads_numbers: set[Key] = set()
        self._last_round = 0  # Workloads the last numbers round re-diagnosed (`stale_pace`)
        self._background: set[Key] = set()  # diagnosed again though nothing about them changed (`mark_background`)
        self.numbers_pace = min(NUMBERS_PACE, publisher.refresh)
        self.on_crd: Callable[[str | None, Mapping[str, Any]], None] = lambda event_type, obj: None
        self.live = False  # set once the start-up list is in the state: a type-None event after it is a re-list
        self.relisted_at: float | None = None  # monotonic time of the last re-listed object not yet repaired
        # per re-listed kind, what it listed and what the watch brought since (`Relisted`)
        self._relisted: dict[str, Relisted] = {}
        self._recorders: list[set[tuple[str, Any]]] = []
        # held while a pass reads the state and while a task beside the passes (the resync, an RBAC recheck)
        # changes it: a pass yields between chunks, and its Workloads must all be diagnosed against one state
        self.state_lock = asyncio.Lock()

    def __len__(self) -> int:
        """Events queued and not yet drained (the loop's debounce watches this grow)."""
        return len(self._queue)

    def queued_bytes(self) -> int:
        """The packed bytes of what is queued (a few hundred per event)."""
        return sum(len(body) for _etype, body in self._queue if isinstance(body, bytes))

    # ----- fed by the Kopf handlers -----
    def observe(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        key = kind_key(obj)
        if key == CRD:
            self.on_crd(event_type, obj)  # only the CRD itself matters, never kept
            return
        self.stats.count(self.stats.events, key[1] if key else "unknown")
        if key == ("", "Event") and not event_is_relevant(obj):
            return  # a Warning about a Node, a Service...: never read, so never kept
        if not self.shard.keeps(obj):
            return  # another namespace shard's Pod, Event, owner or diagnosis: decoded, counted, never kept
        if key is not None and self.stats.access.get(key[1]) is False:
            return  # RBAC no longer lets us list this kind: what a still-open watch sends is not used
        kind = key[1] if key else ""
        if self.live:
            listed = self._relisted.get(kind)
            if event_type is None:
                self.relisted_at = time.monotonic()
                if listed is None:
                    listed = self._relisted[kind] = Relisted()
                listed.namespaces.add(namespace(obj) or "")
            if listed is not None and event_type != "DELETED":  # what the watch brought after the re-list is alive
                listed.keys.add(hash(self.state.key_of(kind, obj)))
        for seen in self._recorders:
            seen.add((kind, self.state.key_of(kind, obj)))
        if key == DIAGNOSIS:  # compared whole (publisher.digest), but for the apiserver's bookkeeping
            md = m(obj.get("metadata"))
            obj = {**obj, "metadata": {k: v for k, v in md.items() if k != "managedFields"}}
        else:
            if event_type is None and (prev := self._stored(key[1] if key else "", obj)) is not None and (
                    _same_version(prev, obj)):
                return  # listed at the version the state holds (Kopf lists what the start-up list just read)
            obj = self.shard.slim(obj)  # queued slim: a re-list of 50,000 Pods must not sit in memory whole
        queued = obj if len(self._queue) < PACK_QUEUED_AFTER else self._codec.pack(obj)
        self._queue.append((event_type or "ADDED", queued))
        self.wake.set()

    def take_relisted(self) -> dict[str, Relisted]:
        """What Kopf re-listed since the last call, per kind."""
        taken, self._relisted = self._relisted, {}
        return taken

    def give_back_relisted(self, taken: dict[str, Relisted]) -> None:
        """A repair that failed: what it took is compared again with what was re-listed since."""
        for kind, listed in taken.items():
            mine = self._relisted.setdefault(kind, Relisted())
            mine.keys |= listed.keys
            mine.namespaces |= listed.namespaces

    @contextlib.contextmanager
    def recording(self) -> Iterator[set[tuple[str, Any]]]:
        """(kind, key) of every object observed while the block runs (a LIST in a thread)."""
        seen: set[tuple[str, Any]] = set()
        self._recorders.append(seen)
        try:
            yield seen
        finally:
            self._recorders.remove(seen)

    def put(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """A change found by a re-list (orphans.py), already slim: drained like a watch event, not counted as one."""
        self._queue.append((event_type, obj))

    # ----- the dirty set -----
    def mark(self, keys: Iterable[Key]) -> None:
        """Workloads to diagnose on the next pass."""
        self._dirty |= set(keys)

    def mark_background(self, keys: Iterable[Key]) -> None:
        """Workloads to diagnose again though no event named them (a resync: time alone moves deadlines and
        back-offs). A pass takes at most BACKGROUND_BATCH of them beside what changed: at 50,000 Workloads a pass
        over all of them takes about 40 s, and the changes that came in meanwhile waited for it."""
        self._background.update(k for k in keys if self.shard.owns(k[0]))

    def background(self) -> int:
        """Workloads marked in the background and not yet taken (the loop runs another pass at once)."""
        return len(self._background)

    def take(self) -> set[Key]:
        """The Workloads marked so far, leaving none marked, and the next batch of background ones; the stale ones
        join the background once they are due."""
        keys, self._dirty = self._dirty, set()
        if self.shard.sharded:  # every Workload is kept (queue positions), only this shard's are diagnosed
            keys = {k for k in keys if self.shard.owns(k[0])}
        due = self.stale_due()
        if due is not None and due <= time.monotonic():
            stale = (self.state.waiting_near(self._stale_cqs) & self._reads_numbers) - keys - self._fresh
            stale = {k for k in stale if self.state.diagnosable(k) and self.shard.owns(k[0])}
            self._background |= stale
            self._last_round = len(stale)
            self._stale_cqs, self._stale_since, self._fresh = set(), None, set()
        elif due is not None:
            self._fresh |= keys  # diagnosed now anyway
        if self._background:
            self._background -= keys
            batch = set(itertools.islice(self._background, BACKGROUND_BATCH))
            self._background -= batch
            keys |= batch
        return keys

    def diagnosed(self, keys: Iterable[Key], read_numbers: set[Key]) -> None:
        """Workloads a pass diagnosed, and those of them whose diagnosis read a ClusterQueue's numbers."""
        for key in keys:
            if key in read_numbers:
                self._reads_numbers.add(key)
            else:
                self._reads_numbers.discard(key)

    def stale_due(self) -> float | None:
        """Monotonic time when the stale Workloads are diagnosed; None when there are none."""
        return None if self._stale_since is None else self._stale_since + self.stale_pace()

    def stale_pace(self) -> float:
        """Seconds from the first numbers-only change to its round (`numbers_pace` of the last round's cost)."""
        st = self.stats
        return numbers_pace(self._last_round, st.pass_seconds_sum / st.diagnosed if st.diagnosed else 0.0,
                            self.numbers_pace, self.publisher.refresh)

    # ----- applying a batch -----
    async def drain_between_passes(self) -> None:
        """`drain` from a task beside the loop: waits for a pass in progress to finish reading the state."""
        async with self.state_lock:
            self.drain()

    def drain(self) -> None:
        if not self._queue:
            return
        batch = []
        while self._queue:
            batch.append(self._queue.popleft())
        before: set[Key] = set()
        numbers_moved: set[str] = set()  # ClusterQueues whose status changed in its numbers only
        todo: list[tuple[str, Mapping[str, Any], bool]] = []
        for etype, body in batch:
            obj: Mapping[str, Any] = self._codec.unpack(body)
            key = kind_key(obj)
            if key == DIAGNOSIS:
                self._diagnosis_event(etype, obj)
                continue
            if key is not None and self.stats.access.get(key[1]) is False:
                continue  # queued before RBAC took the kind away
            prev = self._stored(key[1] if key else "", obj)
            if etype != "DELETED" and prev is not None and _same_version(prev, obj):
                continue  # a re-list or a duplicate event: nothing new
            if etype != "DELETED" and prev is not None and key == POD and _admission_undone(prev, obj):
                continue
            if etype != "DELETED" and prev is not None and _nothing_kept_changed(prev, obj):
                self.state.upsert(obj)  # its newest resourceVersion: a later re-list of it is then nothing new
                continue
            status_only = prev is not None and key == (KUEUE, "ClusterQueue") and prev.get("spec") == obj.get("spec")
            if status_only and etype != "DELETED" and _numbers_only(prev, obj):
                self.state.upsert(obj)  # relations unchanged: no before and after
                numbers_moved.add(name(obj) or "")
                continue
            before |= self.state.affected_workloads(prev or obj, status_only)  # relations as they were
            todo.append((etype, obj, status_only))
        after: set[Key] = set()
        for etype, obj, _ in todo:
            if etype == "DELETED":
                self.state.remove(obj)
                gone = kind_key(obj)
                key = ns_name(obj)
                if gone == (KUEUE, "Workload"):
                    self.verdicts.pop(key, None)
                    self._reads_numbers.discard(key)
                    self.publisher.forget(key)
                    before.discard(key)
                elif gone in OWNER_KINDS:  # deleted, or no longer labelled (the watch's selector): its own
                    stand_in = (key[0], expected_workload_name(obj))  # diagnosis, if any, is deleted next pass
                    if stand_in not in self.state.workloads and stand_in in self.publisher.records:
                        self._dirty.add(stand_in)
            else:
                self.state.upsert(obj)  # slimmed when observed
        for etype, obj, status_only in todo:
            if etype != "DELETED":
                after |= self.state.affected_workloads(obj, status_only)
        self._dirty |= {k for k in before | after if self.state.diagnosable(k)}
        if numbers_moved:
            if self._stale_since is None:
                self._stale_since = time.monotonic()
            self._stale_cqs |= numbers_moved

    def holds(self, obj: Mapping[str, Any]) -> bool:
        """The state holds this object at this resourceVersion (what `drain` drops as nothing new)."""
        key = kind_key(obj)
        prev = self._stored(key[1] if key else "", obj)
        return prev is not None and _same_version(prev, obj)

    def _stored(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        collection = self.state.collection(kind)
        return None if collection is None else collection.get(self.state.key_of(kind, obj))

    def _diagnosis_event(self, etype: str, obj: Mapping[str, Any]) -> None:
        """Someone deleted or edited one of our diagnoses: its Workload is diagnosed (and it restored) again."""
        key = ns_name(obj)
        if etype == "DELETED":
            if not self.stats.crd_installed:
                return  # the CRD is being deleted and takes every diagnosis along: rewritten when it is back
            if self.state.diagnosable(key):
                self.publisher.lost(key)  # since and history are kept for the restore
                self._dirty.add(key)  # restored on the next pass, after the Workload is checked to exist
            return
        if self.publisher.observed(obj) and self.state.diagnosable(key):
            self._dirty.add(key)
