"""Publishing AdmissionDiagnosis objects: the only code that writes to the cluster.

Decides per diagnosis whether to write (`decide`, pure), keeps `status.since` across reason changes
and restarts, applies in one server-side apply, and deletes diagnoses whose Workload is gone.
A verdict change (stage, reason, cause, actionBy, the ClusterQueue, a passed pending limit) is written at
once; a change only in numbers or evidence at most once per refresh interval; identical content is never
written.

Writes stream: a pass hands its writes over (`submit`) and goes on, and a fixed set of writers applies them
in the order they became due, each Workload's newest body only, one write per Workload in flight at a time.
When the apiserver is the slower side (Kueue admitting tens of Workloads a second on a busy control plane), the
passes, and so the metrics, stay current; a diagnosis that changes again while it waits is written once, with
its newest content, in its first place in line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import marshal
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from ..api import (
    GROUP,
    LABEL_CLUSTER_QUEUE,
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REASON,
    LABEL_STAGE,
    PLURAL,
    VERSION,
)
from ..engine import history
from ..kube.objects import format_time, lst, m, ns_name, parse_time, s
from ..kube.packed import Deflate
from . import rest

log = logging.getLogger("kueue_doctor.publisher")
Key = tuple[str, str]
# writes in flight at most: at Kueue's pace on a busy apiserver a write takes ~80 ms; 16 writers peaked the churn
# backlog at 3,014-4,020 against 5,463 with 8 (docs/scale-history.md, session 20); 429s still pace them
WRITERS = 16
OWN_VERSIONS = 8  # our writes' versions remembered per diagnosis until their echo (more only after a watch gap)
OWN_LABELS = (LABEL_STAGE, LABEL_REASON, LABEL_CLUSTER_QUEUE, LABEL_OWNER_KIND, LABEL_OWNER_NAME)


def diagnosis_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return f"{base}/{name}" if name else base


def digest(obj: Mapping[str, Any]) -> str:
    """Hash of what we own in a diagnosis; equal for our write and the object the server returns."""
    md = m(obj.get("metadata"))
    owned = {
        "labels": {k: v for k, v in m(md.get("labels")).items() if k in OWN_LABELS},
        "ownerReferences": md.get("ownerReferences"),
        "spec": obj.get("spec"),
        "status": obj.get("status"),
    }
    return hashlib.sha256(json.dumps(owned, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def fingerprint(obj: Mapping[str, Any]) -> int:
    """Equal for equal bodies built in the same key order (ours, pass after pass), 0 when it cannot tell; about a
    tenth of `digest`'s cost, which every diagnosis of every pass paid to learn that nothing changed. Never leaves
    the process (Python's salted hash of marshal version 0 bytes, which hold no shared references)."""
    try:
        return hash(marshal.dumps(obj, 0))  # type: ignore[arg-type]  # plain JSON values; ValueError otherwise
    except ValueError:
        return 0


def verdict_of(obj: Mapping[str, Any]) -> tuple[str | None, ...]:
    """What is written at once when it changes (the rest waits for the refresh interval): the words,
    whether the pending limit is passed (users alert on it), and the queue it waits in (users select by it: a
    Workload first seen before its LocalQueue names its ClusterQueue as soon as the queue arrives)."""
    st = m(obj.get("status"))
    passed = "exceeded" if m(st.get("pendingLimit")).get("exceeded") else None
    return (s(st.get("stage")), s(st.get("reason")), s(st.get("cause")), s(st.get("actionBy")), passed,
            s(st.get("clusterQueue")))


@dataclass(slots=True)
class Record:
    """What the cluster holds for one diagnosis, as far as we know: one per Workload, kept for the process's life,
    so compact (the history as JSON bytes, the verdict's words interned)."""

    digest: str
    verdict: tuple[str | None, ...]
    since: str | None
    written_at: float | None  # monotonic time of our last write; None: found at start-up
    # status.history and historyFolded as stored, continued by the next verdict; kept as JSON: as decoded dicts,
    # 50,000 records held ~50 MiB and pinned pieces of every LIST page that brought them
    stored_history: bytes = b""
    absent: bool = False  # someone deleted it: restored (with since and history) once its Workload is confirmed
    # resourceVersions our writes got whose watch echo has not been seen yet (oldest first): an echo that comes
    # after a newer write landed (Kopf delivers events a batch window late) is ours, not someone's edit
    own: tuple[str, ...] = ()
    # `fingerprint` of our body that `digest` was taken from (0: none, as for a diagnosis found in the cluster);
    # reset with the digest
    ours: int = 0

    def kept_history(self) -> tuple[list[Any], list[Any]]:
        """(status.history, status.historyFolded) as stored."""
        if not self.stored_history:
            return [], []
        entries, folded = json.loads(self.stored_history)
        return lst(entries), lst(folded)


def record_of(obj: Mapping[str, Any], written_at: float | None, known_digest: str = "") -> Record:
    """`known_digest`: `digest(obj)` when the caller took it already (`decide`)."""
    status = m(obj.get("status"))
    entries, folded = lst(status.get("history")), lst(status.get("historyFolded"))
    stored = json.dumps([entries, folded], separators=(",", ":")).encode() if entries else b""
    return Record(known_digest or digest(obj), tuple(None if v is None else sys.intern(v) for v in verdict_of(obj)),
                  s(status.get("since")), written_at, stored)


def key_of(obj: Mapping[str, Any]) -> Key:
    """(namespace, name) of a diagnosis; the namespace interned, as it repeats across every record."""
    ns, nm = ns_name(obj)
    return sys.intern(ns), nm


def records_of(pages: Iterable[list[dict[str, Any]]]) -> dict[Key, Record]:
    """The records of diagnoses found in the cluster, built page by page as a LIST brings them (in a thread at
    start-up): what is kept of 50,000 is then their records, not the list decoded whole."""
    return {key_of(obj): record_of(obj, None) for page in pages for obj in page}


def unsure(prev: Record) -> Record:
    """What we know when the stored object is not what we wrote (a failed write, an edit): its content is
    rewritten on the next pass, its since and history are kept."""
    return replace(prev, digest="", written_at=None, absent=False, ours=0)


def with_since(new: dict[str, Any], prev: Record | None, observed: datetime) -> dict[str, Any]:
    """Keep `since` while the reason is unchanged; on a change take Kueue's time if it is newer, else now."""
    status = new["status"]
    if prev is None:
        return new
    if prev.verdict[1] == status.get("reason"):
        if prev.since:
            status["since"] = prev.since
        return new
    engine_since, prev_since = parse_time(status.get("since")), parse_time(prev.since)
    if engine_since is None or (prev_since is not None and engine_since <= prev_since):
        status["since"] = format_time(observed)
    return new


def with_history(new: dict[str, Any], prev: Record | None) -> dict[str, Any]:
    """Continue the stored history (the engine's is rebuilt from Kueue's timestamps, for a first sight)."""
    if prev is not None and prev.stored_history:
        entries, folded = prev.kept_history()
        history.carry(entries, folded, new["status"])
        history.conclude(new["status"])
    return new


@dataclass(slots=True, frozen=True)
class Pending:
    """A diagnosis to write, as prepared by the pass: the apply body's JSON, deflated (thousands wait while the
    apiserver is the slower side), and the record of what the cluster holds once it lands. The writer sends the
    bytes as they are: it never decodes, walks or encodes a body again."""

    body: bytes
    record: Record
    found: float  # monotonic: the pass that found the change (a newer body in its place keeps the first's)


class Write(NamedTuple):
    """A diagnosis to write: `minor` when it only refreshes numbers of the verdict the cluster shows."""

    key: Key
    body: Pending
    minor: bool


def _refresh_only(prev: Record | None, new: Mapping[str, Any]) -> bool:
    """A write that only refreshes numbers or evidence of a verdict the cluster already shows."""
    return prev is not None and bool(prev.digest) and prev.verdict == verdict_of(new)


@dataclass(frozen=True)
class Decision:
    write: bool
    due: float | None = None  # when a deferred minor change becomes writable
    digest: str = ""  # `digest(new)` when it was taken: the record of its write reuses it


def decide(prev: Record | None, new: Mapping[str, Any], now: float, refresh: float) -> Decision:
    """Write a new or changed verdict now, a minor change after `refresh`, nothing identical (pure but for a
    cache in `prev`). Identical is what the cluster holds (`prev.digest`): by our own last body's fingerprint when
    it is that body's, else by the digest, after which `prev` remembers the fingerprint (the next pass compares
    fast)."""
    if prev is None:
        return Decision(True)
    fast = fingerprint(new)
    if fast and prev.ours == fast:
        return Decision(False)
    taken = digest(new)
    if prev.digest == taken:
        prev.ours = fast
        return Decision(False)
    if prev.verdict != verdict_of(new) or prev.written_at is None or now - prev.written_at >= refresh:
        return Decision(True, digest=taken)
    return Decision(False, prev.written_at + refresh, taken)


class Publisher:
    def __init__(self, api: Any, refresh_interval: float = 60.0, concurrency: int = WRITERS,
                 writes_per_second: float = 50.0, on_write: Callable[[str], None] | None = None,
                 refresh_writes_per_second: float = 0.0, on_delay: Callable[[float], None] | None = None) -> None:
        self.api = api
        self.refresh = refresh_interval
        self.records: dict[Key, Record] = {}
        # bodies waiting to be written (a pass's writes, the deferred refreshes) are kept packed: 10,000 first
        # writes are 10,000 diagnoses of a few KB each, held until the apiserver has taken them all
        self._deflate = Deflate()
        self.deferred: dict[Key, tuple[float, Pending]] = {}
        self._concurrency = concurrency
        # threads of their own: asyncio.to_thread's default pool has min(32, cores + 4) threads, 6 on 2 cores, so it
        # held 8 writers to 6 requests in flight and shared them with the resync's LISTs (docs/scale-history.md,
        # session 20)
        self._pool = self._new_pool()
        # due writes in the order they became due (a key keeps its first place): verdict changes before
        # numbers-only refreshes, so that a budget of refreshes never delays a Workload that moved
        self._urgent: dict[Key, Pending] = {}
        self._minor: dict[Key, Pending] = {}
        self._flying: dict[Key, Pending] = {}  # being applied now (one per key)
        self._workers: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the writers' loop (tests run several, one by one)
        self._work = asyncio.Event()
        self._drained = asyncio.Event()
        self.on_failed: Callable[[Key], None] = lambda key: None  # the loop retries it (set by DiagnosisLoop)
        self._interval = 1.0 / writes_per_second if writes_per_second > 0 else 0.0
        self._next_slot = 0.0
        self._on_write = on_write or (lambda result: None)
        self._on_delay = on_delay or (lambda seconds: None)  # a verdict change's write landed after this long
        self.paused = False  # the CRD is missing: compute, do not write
        self.leading = True  # False on a standby replica (leader.py): compute, write nothing, adopt what is stored
        # numbers-only refreshes share a budget (a token bucket): when every admission changes the usage
        # numbers of every waiting Workload, they are rewritten in turn, not all at each refresh interval
        self._refresh_rate = refresh_writes_per_second
        self._tokens = max(1.0, refresh_writes_per_second)
        self._tokens_at = time.monotonic()

    def _refresh_token(self, now: float) -> bool:
        if self._refresh_rate <= 0:
            return True
        self._tokens = min(max(1.0, self._refresh_rate), self._tokens + (now - self._tokens_at) * self._refresh_rate)
        self._tokens_at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def _refresh_wait(self) -> float:
        return (1.0 - self._tokens) / self._refresh_rate

    # ----- start-up -----
    def seed(self, found: Mapping[Key, Record]) -> None:
        """Remember what is already in the cluster (`records_of` a LIST), so a restart rewrites nothing unchanged
        and keeps since and the history."""
        self.records.update(found)

    # ----- the pass -----
    def prepare(self, diagnoses: list[dict[str, Any]], observed: datetime) -> list[Write]:
        """Give each diagnosis its kept `since` and history (in place) and decide what to write: what the
        metrics then show is final before the first write is sent."""
        now = time.monotonic()
        writes: list[Write] = []
        for new in diagnoses:
            key = (new["metadata"]["namespace"], new["metadata"]["name"])
            prev = self.records.get(key)
            new = with_history(with_since(new, prev, observed), prev)
            if key in self._urgent or key in self._minor or key in self._flying:  # on its way: replace or withdraw
                self._supersede(key, new, prev, writes)
                continue
            decision = decide(prev, new, now, self.refresh)
            minor = decision.write and _refresh_only(prev, new)
            if minor and not self._refresh_token(now):
                # its turn comes when the refresh budget has a token for it
                self.deferred[key] = (now + self._refresh_wait(), self._pending(new, decision.digest))
            elif decision.write:
                self.deferred.pop(key, None)
                writes.append(Write(key, self._pending(new, decision.digest), minor))
            elif decision.due is not None:
                self.deferred[key] = (decision.due, self._pending(new, decision.digest))
            else:
                self.deferred.pop(key, None)
        written = {w.key for w in writes}
        for key, (due, obj) in list(self.deferred.items()):
            if due <= now and key not in written:
                if not self._refresh_token(now):
                    self.deferred[key] = (now + self._refresh_wait(), obj)
                    continue
                del self.deferred[key]
                writes.append(Write(key, obj, True))  # a deferred write is a numbers-only refresh
        if self.paused or not self.leading:
            for new in diagnoses:  # keep since across the pause; nothing is written
                key = (new["metadata"]["namespace"], new["metadata"]["name"])
                self.deferred.pop(key, None)
            return []
        return writes

    def _supersede(self, key: Key, new: Mapping[str, Any], prev: Record | None,
                   writes: list[Write]) -> None:
        """A newer diagnosis of a Workload whose write is queued or in flight: what will be stored once that
        write lands (or what is stored, while only queued) is compared with it: equal, the queued write is
        withdrawn; different, the newest body takes the queued one's place."""
        landing = self._flying.get(key)
        target = landing.record.digest if landing is not None else (prev.digest if prev else "")
        taken = digest(new)
        if taken == target:
            self._urgent.pop(key, None)
            self._minor.pop(key, None)
        else:
            self.deferred.pop(key, None)
            writes.append(Write(key, self._pending(new, taken), _refresh_only(prev, new)))

    def _pending(self, new: Mapping[str, Any], known_digest: str) -> Pending:
        record = record_of(new, None, known_digest)
        record.ours = fingerprint(new)
        return Pending(self._deflate.compress(json.dumps(new, separators=(",", ":")).encode()), record,
                       time.monotonic())

    def submit(self, writes: list[Write]) -> None:
        """Hand the prepared writes to the writers and return at once: a Workload already queued keeps its place
        with the newest body; one in flight is written again after it lands."""
        if not writes:
            return
        for key, body, minor in writes:
            if minor and key not in self._urgent:
                self._minor[key] = body
            else:
                self._minor.pop(key, None)
                waiting = self._urgent.get(key)
                # the change it replaces has waited since then: the write shows both
                self._urgent[key] = body if waiting is None else replace(body, found=waiting.found)
        self._bind()
        self._drained.clear()
        self._work.set()

    def _bind(self) -> None:
        """Writers (and their events) on the running loop, started on first use."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # the first use, or a new loop after the last one ended (its writers with it)
            self._loop, self._work, self._drained = loop, asyncio.Event(), asyncio.Event()
            self._workers = []
        self._workers = [t for t in self._workers if not t.done()]  # one ended by a cancel is replaced
        if len(self._workers) < self._concurrency and (self._urgent or self._minor):
            self._workers += [asyncio.create_task(self._writer(), name=f"writer-{n}")
                              for n in range(len(self._workers), self._concurrency)]

    async def flush(self) -> None:
        """Until nothing is queued or in flight."""
        self._bind()
        while self.queued():
            self._drained.clear()
            await self._drained.wait()

    def queued(self) -> int:
        """Writes due and not yet landed (queued or in flight): how far the apiserver is behind the passes."""
        return len(self._urgent) + len(self._minor) + len(self._flying)

    async def close(self) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        # a request in flight finishes in its thread, nothing waits for it; a new pool (no thread until used) keeps
        # the publisher usable, as its writers are (they start again with the next submit)
        self._pool.shutdown(wait=False)
        self._pool = self._new_pool()

    def _new_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        return concurrent.futures.ThreadPoolExecutor(self._concurrency, thread_name_prefix="kueue-doctor-write")

    async def _request(self, call: Callable[..., Any], *args: Any) -> Any:
        """A blocking `rest` call on the writers' own threads."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, call, self.api, *args)

    def _next(self) -> tuple[dict[Key, Pending], Key] | None:
        for queue in (self._urgent, self._minor):
            for key in queue:
                if key not in self._flying:
                    return queue, key
        return None

    async def _writer(self) -> None:
        while True:
            found = self._next()
            if found is None:
                if not self.queued():
                    self._drained.set()
                self._work.clear()
                await self._work.wait()
                continue
            queue, key = found
            body = self._flying[key] = queue.pop(key)
            try:
                landed = await self._write(key, body, urgent=queue is self._urgent)
            except Exception as exc:  # never the end of a writer: the write is retried like a failed one
                log.exception("Writing AdmissionDiagnosis %s/%s failed unexpectedly (%s); retrying on the next pass.",
                              key[0], key[1], exc)
                landed = False
            finally:
                del self._flying[key]
            if not landed:
                self.on_failed(key)
            if key in self._urgent or key in self._minor:  # a newer body waited for this one to land
                self._work.set()
            if not self.queued():
                self._drained.set()

    def next_due(self) -> float | None:
        return min((due for due, _ in self.deferred.values()), default=None)

    async def _slot(self) -> None:
        if self._interval <= 0:
            return
        now = time.monotonic()
        self._next_slot = max(self._next_slot, now) + self._interval
        wait = self._next_slot - self._interval - now
        if wait > 0:
            await asyncio.sleep(wait)

    async def _write(self, key: Key, pending: Pending, urgent: bool) -> bool:
        """Apply one diagnosis; False when it failed (its record is then unsure: rewritten on retry). `urgent`: a
        verdict change, whose delay is reported."""
        await self._slot()
        if not self.leading:  # stepped down while this write waited for its slot
            return True
        try:
            answer = await self._request(rest.apply, diagnosis_path(*key), self._deflate.decompress(pending.body))
        except rest.ApiError as exc:
            self._on_write("error")
            prev = self.records.get(key)
            if prev is not None:  # unknown state: written again on retry, with the history kept
                self.records[key] = unsure(prev)
            if exc.status == 404 and not self.paused:
                self.paused = True
                log.error("Cannot write AdmissionDiagnosis objects: %s. Is the CRD installed (crds/, or the "
                          "Helm chart)? Writing resumes when it is.", exc)
            elif exc.status != 404:
                log.warning("Cannot write AdmissionDiagnosis %s/%s: %s. Retrying in a few seconds; check the "
                            "operator's RBAC (create/patch on admissiondiagnoses).", key[0], key[1], exc)
            return False
        landed = time.monotonic()
        prev, record = self.records.get(key), replace(pending.record, written_at=landed)
        version = s(m(m(answer).get("metadata")).get("resourceVersion"))
        if version:
            record.own = ((prev.own if prev is not None else ()) + (version,))[-OWN_VERSIONS:]
        self.records[key] = record
        self._on_write("applied")
        if urgent:
            self._on_delay(landed - pending.found)
        return True

    # ----- external changes to our objects -----
    def observed(self, obj: Mapping[str, Any]) -> bool:
        """A watch event for a diagnosis: True when it differs from what we wrote (edited by someone)."""
        key = key_of(obj)
        prev = self.records.get(key)
        if not self.leading:  # a standby adopts what the leader stored: a takeover rewrites nothing unchanged
            self.records[key] = record_of(obj, time.monotonic())
            return False
        if key in self._flying:  # most likely our own write, seen before its answer: that answer sets the record
            return False
        if prev is None:
            self.records[key] = record_of(obj, None)
            return False
        version = s(m(obj.get("metadata")).get("resourceVersion"))
        if version and version in prev.own:  # the echo of one of our writes, maybe of one since overwritten
            prev.own = prev.own[prev.own.index(version) + 1:]
            return False
        if prev.digest != digest(obj):
            self.records[key] = unsure(prev)  # the next pass re-applies our version
            return True
        return False

    def lost(self, key: Key) -> None:
        """Our diagnosis was deleted by someone else: what it said is kept for its restore."""
        prev = self.records.get(key)
        if prev is not None:
            self.records[key] = replace(unsure(prev), absent=True)
        self.deferred.pop(key, None)

    def restoring(self, key: Key) -> bool:
        """Written by us, then deleted by someone else (`lost`): its restore waits for a GET of the Workload. Not
        a diagnosis never written or whose first write is still queued: under a write backlog those are most of
        the Workloads a pass sees, and one GET each, one after another, held every pass for minutes."""
        prev = self.records.get(key)
        return prev is not None and prev.absent

    def unwritten(self) -> None:
        """Every diagnosis is gone from the cluster (its CRD was deleted and re-applied): each is written again on
        its next pass, keeping its `since` and verdict, as if found unwritten at start-up."""
        self.records = {k: replace(r, digest="", written_at=None, ours=0) for k, r in self.records.items()}
        self.deferred.clear()

    def forget(self, key: Key) -> None:
        self.records.pop(key, None)
        self.deferred.pop(key, None)
        self._urgent.pop(key, None)
        self._minor.pop(key, None)

    async def delete(self, key: Key) -> None:
        self._urgent.pop(key, None)  # a queued write of it must not bring it back
        self._minor.pop(key, None)
        while key in self._flying:  # nor one in flight, landing after the delete
            await asyncio.sleep(0.01)
        if not self.leading:  # the leader deletes it; its watch event then makes us forget it
            return
        try:
            await self._request(rest.request, "DELETE", diagnosis_path(*key))
            self._on_write("deleted")
        except rest.ApiError as exc:
            if exc.status != 404:
                self._on_write("error")
                log.warning("Cannot delete AdmissionDiagnosis %s/%s of a deleted Workload: %s", key[0], key[1], exc)
                return
        self.forget(key)

