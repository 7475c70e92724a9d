"""The diagnosis loop: when to run a pass, and the pass itself.

It sleeps until the inbox wakes it or a timer is due (the next resync, a deferred write, a failed write
to retry, the stale Workloads whose quoted numbers moved); a lone change is diagnosed at once, a burst is
collected until it pauses (at most four times the last pass's duration or 0.1 s, and `debounce`), so a burst
costs one pass. A pass diagnoses the dirty Workloads in chunks of 500 (yielding to the watches between them)
and hands the diagnoses to the publisher; nothing is dirty, nothing is written. What no event named (the
resync's every Workload, the stale ones) comes from the inbox a batch per pass, and the next pass follows at
once until none is left.
Neighbours: inbox.py supplies the dirty set; orphans.py runs the resync (a task beside the passes: its LISTs
must not hold back changes, and what it found is applied only between passes, under the inbox's state lock)
and confirms restores; the publisher decides what to write; the verdicts kept here after each pass are what
metrics.py exports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..engine.diagnose import diagnose
from ..engine.no_workload import grace_ends, pod_group_grace_ends, should_have_workload
from ..kube.allocation import cycle_collection_paused
from ..state import ClusterState, Key
from .inbox import Inbox
from .metrics import Stats, Verdict
from .orphans import Orphans, deleting
from .publisher import Publisher, Write
from .reports import ReportMirror

log = logging.getLogger("kueue_doctor.runtime")  # the operator's log lines keep the name they always had
RETRY_AFTER = 10.0  # seconds before a failed write is tried again
FIRST_LOOK = 0.005  # seconds: a change is diagnosed this long after it arrived unless more came meanwhile
BURST_PAUSE = 0.02  # seconds without a new event that end a burst
BURST_SHARE = 4.0  # a burst is collected for at most this many times the last pass's duration (and `debounce`)
BURST_MIN = 0.1  # seconds a burst may always be collected: at most 10 passes a second while events never pause
CHUNK = 500  # Workloads diagnosed between two yields to the watches
POD_GROUP_POLL = 20.0  # seconds between two reads of gated Pod groups' Pods (no watch brings them: orphans.py)


class DiagnosisLoop:
    def __init__(self, state: ClusterState, inbox: Inbox, orphans: Orphans, publisher: Publisher,
                 verdicts: dict[Key, Verdict], stats: Stats, debounce: float, resync_interval: float) -> None:
        self.state = state
        self.inbox = inbox
        self.orphans = orphans
        self.publisher = publisher
        self.verdicts = verdicts
        self.stats = stats
        self.debounce = debounce  # the longest a burst of changes is collected before a pass
        self._last_pass = 0.0  # seconds the last pass took (wall time): how long the next burst may be collected
        self.resync_interval = resync_interval
        self._next_resync = 0.0  # monotonic; 0: at the first pass
        self._resync: asyncio.Task[None] | None = None  # the periodic repair, running beside the passes
        self._next_group_poll = 0.0  # monotonic: the next read of gated Pod groups' Pods
        self._group_poll: asyncio.Task[None] | None = None
        self._wake: dict[Key, float] = {}  # monotonic times when time alone changes a verdict (grace, limits)
        self._retry_at: float | None = None  # a pass is due then for the writes that failed since the last one
        publisher.on_failed = self._write_failed
        self.reports: ReportMirror | None = None  # OpenReports mirror (--reports), fed after each pass

    def synced(self) -> None:
        """The state was just listed whole: the next resync is one interval away."""
        self._next_resync = time.monotonic() + self.resync_interval
        self._next_group_poll = time.monotonic() + self._group_poll_interval()

    def _group_poll_interval(self) -> float:
        return min(POD_GROUP_POLL, self.resync_interval)

    def _polls_groups(self) -> bool:
        """Without Kueue's pod integration no Pod is gated: nothing to poll (an unread Configuration: polled)."""
        config = self.state.kueue_config
        return not config.known or config.framework_enabled("pod")

    async def run(self) -> None:
        """Forever: wait for a change or a timer, collect the burst, run a pass."""
        try:
            await self._run()
        finally:
            for task in (self._resync, self._group_poll):
                if task is not None:
                    task.cancel()
            await self.publisher.close()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.inbox.wake.wait(), timeout=self._sleep_for())
            self.inbox.wake.clear()
            self.stats.heartbeat = time.monotonic()
            await self._collect_burst()
            started = time.monotonic()
            try:
                await self.run_once(wait_for_writes=False)
            except Exception as exc:  # a failed pass must not stop the operator; the next one retries
                self.stats.count(self.stats.errors, type(exc).__name__)
                log.exception("Diagnosis pass failed (%s); retrying on the next change or resync.", exc)
                await asyncio.sleep(5)
            self._last_pass = time.monotonic() - started

    def _write_failed(self, key: Key) -> None:
        """A write failed (the publisher's callback): its Workload is diagnosed and written again on the next pass,
        which comes in RETRY_AFTER at the latest."""
        self.inbox.mark([key])
        due = time.monotonic() + RETRY_AFTER
        if self._retry_at is None or due < self._retry_at:
            self._retry_at = due

    async def run_once(self, wait_for_writes: bool = True) -> int:
        """Drain the inbox and diagnose what is dirty; the number of Workloads diagnosed. Its writes stream to the
        publisher's writers; `wait_for_writes` (a one-off pass, the tests) waits until every one has landed."""
        count = await self._run_once()
        if wait_for_writes:
            await self.publisher.flush()
        return count

    async def _run_once(self) -> int:
        self._retry_at = None  # this pass takes the failed writes' Workloads (marked)
        self.inbox.drain()
        mono = time.monotonic()
        if mono >= self._next_resync and self._resync is None:
            self._next_resync = mono + self.resync_interval
            self._resync = asyncio.create_task(self._resync_beside(), name="resync")
        if mono >= self._next_group_poll and self._group_poll is None and self._polls_groups():
            self._next_group_poll = mono + self._group_poll_interval()
            self._group_poll = asyncio.create_task(self._poll_groups_beside(), name="pod-groups")
        due = self.publisher.next_due()
        if due is not None and due <= mono:
            self.inbox.mark(k for k in self.publisher.deferred if k in self.state.workloads)
        ripe = [k for k, at in self._wake.items() if at <= mono]
        for k in ripe:
            del self._wake[k]
        self.inbox.mark(ripe)
        keys = self.inbox.take()
        try:
            return await self._pass(keys)
        except BaseException:
            self.inbox.mark(keys)  # nothing is lost: the next pass takes them again
            raise

    async def _resync_beside(self) -> None:
        """The periodic repair (orphans.resync) as a task of its own: its LIST of every kind (50,000 Pods take tens
        of seconds) must not hold back the passes that follow changes meanwhile; it marks every Workload when it
        is done, and the next pass diagnoses them."""
        try:
            await self.orphans.resync()
        except Exception as exc:  # the next resync retries; the passes go on meanwhile
            self.stats.count(self.stats.errors, "resync")
            log.exception("Resync failed (%s); trying again at the next resync.", exc)
        finally:
            self._resync = None
            self.inbox.wake.set()

    async def _poll_groups_beside(self) -> None:
        """The gated Pod groups' Pods re-read (orphans.poll_pod_groups), beside the passes like the resync."""
        try:
            await self.orphans.poll_pod_groups()
        except Exception as exc:  # the next poll retries
            self.stats.count(self.stats.errors, "pod-groups")
            log.warning("Reading the Pods of Pod groups Kueue has not admitted failed (%s); trying again in %.0f s.",
                        exc, self._group_poll_interval())
        finally:
            self._group_poll = None

    async def _pass(self, keys: set[Key]) -> int:
        now = datetime.now(UTC)
        async with self.inbox.state_lock:  # one state for the whole pass: a resync drains only between passes
            keys -= await self.orphans.confirm_restores(keys)
            chunk = sorted(k for k in keys if k in self.state.workloads)  # those being deleted are left out below
            owners = sorted(k for k in keys if k not in self.state.workloads
                            and (self.state.diagnosable(k) or k in self.publisher.records))
            writes: list[Write] = []
            count = 0
            reports = self.reports if not self.publisher.paused and self.publisher.leading else None

            def take(part: list[dict[str, Any]]) -> None:
                """One chunk's diagnoses into the metrics, the OpenReports results and the packed writes; then they
                are dropped: a first pass over 10,000 Workloads never holds 10,000 diagnoses at once, and every metric
                is current before the first write goes out."""
                nonlocal writes, count
                count += len(part)
                writes += self.publisher.prepare(part, now)
                for d in part:  # `since` is the one written (kept across reason-stable passes)
                    self._remember(d, now)
                if reports is not None:
                    reports.take(part)

            elapsed = 0.0  # the engine's time (and the owners' checks), not the hand-over
            for start in range(0, len(chunk), CHUNK):  # yield to the watchers between chunks
                t0 = time.perf_counter()
                # each packed Workload decoded once for the check and the diagnosis, no cycle collection meanwhile
                wakes: dict[Key, datetime] = {}
                numbers: set[Key] = set()
                with cycle_collection_paused(promote_survivors=False), self.state.reading():
                    targets = [k for k in chunk[start:start + CHUNK] if not deleting(self.state.workloads[k])]
                    part = diagnose(self.state, now, targets, wakes=wakes, numbers=numbers)
                elapsed += time.perf_counter() - t0
                self.inbox.diagnosed(targets, numbers)
                for key, when in wakes.items():  # a threshold the clock alone passes: looked at again then
                    self._wake_at(key, when, now)
                take(part)
                del part
                self.stats.heartbeat = time.monotonic()
                await asyncio.sleep(0)
            if owners:
                t0 = time.perf_counter()
                part = await self._owners_without_workload(owners, now)
                elapsed += time.perf_counter() - t0
                take(part)
        self.publisher.submit(writes)  # the writers apply them while the next changes are collected
        if self.reports is not None and not self.publisher.paused and self.publisher.leading:
            await self.reports.sync((), self.verdicts.keys())
        self.stats.passes += 1
        self.stats.diagnosed += count
        self.stats.pass_seconds_sum += elapsed
        self.stats.last_pass = time.time()
        self.stats.heartbeat = time.monotonic()
        return count

    async def _owners_without_workload(self, keys: list[Key], now: datetime) -> list[dict[str, Any]]:
        """Owners Kueue has made no Workload for (yet): diagnosed after the grace period, which the loop
        sleeps until; a diagnosis whose owner no longer needs one (labelled off, finished) is deleted."""
        out = diagnose(self.state, now, keys)
        given = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in out}
        for key in keys:
            if key in given:
                continue
            owner = self.state.owner_for_workload_name(key)
            if owner is not None:
                ends = grace_ends(owner) if should_have_workload(self.state, owner) else None
            else:  # a Pod group's, or nobody's any more
                ends = pod_group_grace_ends(self.state, key, self.state.pod_group(key))
            if ends is not None and ends > now:
                self._wake_at(key, ends, now)
            elif key in self.publisher.records:
                await self.publisher.delete(key)
                self.verdicts.pop(key, None)
        return out

    def _wake_at(self, key: Key, when: datetime, now: datetime) -> None:
        due = time.monotonic() + (when - now).total_seconds() + 0.1
        if due >= self._next_resync > 0:
            return  # the next resync diagnoses every Workload before then, and it is noted again: at 50,000 waiting
            # Workloads, each with a ten-minute stall check, the list stays short
        self._wake[key] = min(self._wake.get(key, due), due)

    def _remember(self, d: Mapping[str, Any], now: datetime) -> None:
        verdict = Verdict.of(d)
        key = (verdict.namespace, verdict.name)
        prev = self.verdicts.get(key)
        if prev is not None and prev.reason != verdict.reason and prev.since is not None:
            self.stats.time_in_reason.observe((prev.cluster_queue, prev.stage, prev.reason),
                                              max(0.0, now.timestamp() - prev.since))
        self.verdicts[key] = verdict

    async def _collect_burst(self) -> None:
        """A lone change is diagnosed at once; a burst is collected until it pauses, at most BURST_SHARE times
        as long as the last pass took (at least BURST_MIN, at most `debounce`).

        Under Kueue's steady pace the events never pause (Workloads, Pods, Events, our own writes' echoes): a
        fixed 0.5 s window then held every change for most of it, while the pass it saved cost milliseconds. Tied
        to the pass's cost, batching still spares a pass that re-diagnoses a cohort, and passes keep a bounded
        share of the loop's time. The first look comes after FIRST_LOOK, long enough for the events of one watch
        chunk to reach the inbox; a 20 ms first look was a fifth of the change -> diagnosis latency measured beside
        kube-state-metrics (docs/scale-history.md, session 20)."""
        deadline = time.monotonic() + min(self.debounce, max(BURST_MIN, BURST_SHARE * self._last_pass))
        seen = len(self.inbox)
        pause = FIRST_LOOK
        while time.monotonic() < deadline:
            await asyncio.sleep(pause)
            if len(self.inbox) == seen:
                return
            seen, pause = len(self.inbox), BURST_PAUSE

    def _sleep_for(self) -> float:
        mono = time.monotonic()
        due = self.publisher.next_due()
        candidates = [self._next_resync - mono]
        if self._polls_groups():
            candidates.append(self._next_group_poll - mono)
        if due is not None:
            candidates.append(due - mono)
        if self._wake:
            candidates.append(min(self._wake.values()) - mono)
        stale = self.inbox.stale_due()
        if stale is not None:
            candidates.append(stale - mono)
        if self._retry_at is not None:
            candidates.append(self._retry_at - mono)
        if self.inbox.background():  # the next batch at once (the changes meanwhile join it)
            candidates.append(0.0)
        if self.publisher.queued():  # a write may yet fail while the loop sleeps: look again by then
            candidates.append(RETRY_AFTER)
        return max(0.05, min(candidates))
