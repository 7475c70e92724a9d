"""The operator's parts, built once and wired together; the start-up list that fills them.

One ClusterState, kept current by the inbox (inbox.py), diagnosed by the loop (loop.py), repaired by the
resync (orphans.py), within what the cluster lets us see (discovery.py); the publisher (publisher.py) is
the only writer and metrics.py reads the verdicts and counters. service.py starts it all under Kopf.
Each part holds the few others it needs; this module builds them, runs the start-up list, and keeps the
watches going through faults (`run_watches`, `supervise`):

* Kopf's watches are restarted in-process, never the operator, when RBAC takes a kind away or gives it
  back (a 403 on a watch ends the relay's streams, `relay.py`) or when they fail: the state, the diagnoses'
  records and `since` stay in memory, and the re-list rewrites nothing unchanged;
* every recheck interval RBAC and the CRD are asked again (`Discovery.recheck_access`, `check_crd`): a kind
  taken away is dropped from the state and no longer complete (verdicts say what is not visible), a kind
  given back is listed and watched again; a CRD event pauses or resumes writing at once;
* seconds after Kopf re-listed a kind (after a 410 Gone), the apiserver is asked about what the state holds
  and the re-list did not bring (`Orphans.after_relist`): what vanished in the gap is dropped with its metrics
  and diagnosis.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kube.shards import Shard
from ..kube.slim import slim
from ..state import ClusterState, Key
from . import kueue_install, rest
from .discovery import Discovery
from .inbox import Inbox
from .loop import DiagnosisLoop
from .metrics import Stats, Verdict
from .orphans import OWNER_KIND_NAMES, Orphans, diagnosis_pages
from .publisher import Publisher, records_of
from .reports import ReportMirror
from .snapshot import Listing, Unreadable, list_all, list_pages
from .team_labels import DEFAULT_LABEL_VALUES

log = logging.getLogger("kueue_doctor.runtime")
RELIST_SETTLE = 1.0  # seconds without re-listed objects before the re-list is compared with the state
RELIST_RETRY = 5.0  # seconds before a comparison that failed (apiserver unreachable) is tried again
TICK = 0.25  # how often the supervisor looks at what came in
WATCH_BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)  # between restarts of failed watches; reset after a quiet minute


@dataclass
class Options:
    namespaces: list[str] = field(default_factory=list)  # empty: all
    refresh_interval: float = 60.0
    resync_interval: float = 300.0
    debounce: float = 0.5  # the longest a burst of changes is collected before a pass
    max_workload_series: int = 2000
    writes_per_second: float = 100.0
    refresh_writes_per_second: float = 50.0  # numbers-only rewrites of unchanged verdicts, across all diagnoses
    kueue_namespace: str = "kueue-system"  # where Kueue's ConfigMap and Deployment are read
    metric_labels: list[str] = field(default_factory=list)  # --metric-label-from (team_labels.py)
    metric_label_values: int = DEFAULT_LABEL_VALUES  # distinct values per custom_ label (team_labels.py)
    reports: bool = False  # also mirror the verdicts into OpenReports Reports (reports.py)
    recheck_interval: float = 30.0  # RBAC, the AdmissionDiagnosis CRD and Kueue's API asked again this often
    shard: Shard = field(default_factory=Shard)  # --shard-index/--total-shards: the namespaces this replica owns


class Runtime:
    def __init__(self, api: Any, options: Options) -> None:
        self.api = api
        self.options = options
        self.state = ClusterState.packed()  # filled in place by `initial_sync`: every part holds this one
        self.stats = Stats()
        self.verdicts: dict[Key, Verdict] = {}  # the metrics' read model, one per diagnosed Workload
        self.ready = asyncio.Event()
        self.publisher = Publisher(api, options.refresh_interval, writes_per_second=options.writes_per_second,
                                   refresh_writes_per_second=options.refresh_writes_per_second,
                                   on_write=self.stats.written, on_delay=self.stats.delayed)
        self.discovery = Discovery(api, options.namespaces, self.stats, self.publisher, options.kueue_namespace,
                                   options.shard)
        self.inbox = Inbox(self.state, self.stats, self.publisher, self.verdicts, options.shard)
        self.orphans = Orphans(api, self.state, self.inbox, self.discovery, self.publisher, self.verdicts,
                               self.stats, options.shard)
        self.loop = DiagnosisLoop(self.state, self.inbox, self.orphans, self.publisher, self.verdicts, self.stats,
                                  options.debounce, options.resync_interval)
        self.reports = ReportMirror(api, options.namespaces, options.shard) if options.reports else None
        self.loop.reports = self.reports
        self.inbox.on_crd = self.crd_event
        self._stop_watches: asyncio.Event | None = None  # set to restart Kopf's watches (run_watches)
        self.watch_restarts = 0
        self._stopping = False

    async def initial_sync(self) -> None:
        """One paged LIST of everything, so the first verdicts never rest on a half-filled cache."""
        complete: set[str] = set()
        for listing in self.discovery.listings():
            if not self.discovery.allowed(listing.kind):
                continue
            if await self._list_into_state(listing):
                complete.add(listing.kind)
        install, readable = await asyncio.to_thread(kueue_install.read, self.api, self.options.kueue_namespace)
        for obj in install:
            self.state.upsert(slim(obj))
        self.state.complete_kinds = complete | readable
        existing = await asyncio.to_thread(records_of, diagnosis_pages(self.api, self.options.namespaces,
                                                                       self.options.shard))
        self.publisher.seed(existing)
        if self.reports is not None:
            await self.reports.seed()
        self.inbox.mark(self.state.workloads)
        self.inbox.mark(self.state.owner_workload_names())  # owners Kueue has made no Workload for
        self.inbox.wake.set()  # the first pass at once: Kopf's listing of the same objects wakes nobody
        self.loop.synced()
        self.inbox.live = True
        await self.discovery.check_crd()
        log.info("Initial sync: %d Workloads, %d Pods, %d existing AdmissionDiagnoses; kinds listed: %s",
                 len(self.state.workloads), len(self.state.pods), len(existing), ", ".join(sorted(complete)))
        shard = self.options.shard
        if shard.sharded:
            own = sum(1 for ns, _ in self.state.workloads if shard.owns(ns))
            log.info("Namespace %s: this replica diagnoses and writes for %d of the %d Workloads (those of the "
                     "namespaces whose FNV-1a hash %s); it keeps every Workload and LocalQueue for queue positions "
                     "and cohort usage, and only its own namespaces' Pods, Events, owners and AdmissionDiagnoses%s.",
                     shard.describe(), own, len(self.state.workloads),
                     "falls in its range" if shard.boundaries else "modulo the shard count is its index",
                     "; the apiserver is asked to send only its own namespaces' Events, owners and "
                     "AdmissionDiagnoses (KEP-5866 shardSelector; ignored where the alpha gate "
                     "ShardedListAndWatch is off, then filtered here)" if shard.selector else "")

    # ----- faults: RBAC and CRDs changing at runtime, watch gaps, failing watches -----
    async def run_watches(self, start: Callable[[asyncio.Event], Awaitable[None]]) -> None:
        """Run Kopf (`start(stop_flag)`) until it stops on a signal, restarting it in-process when it fails
        (a watch forbidden or no longer served) or when the kinds to watch change (`restart_watches`)."""
        supervisor = asyncio.create_task(self.supervise(), name="supervisor")
        failures = 0
        try:
            while True:
                stop = self._stop_watches = asyncio.Event()
                started = time.monotonic()
                try:
                    await start(stop)
                except Exception as exc:  # a failed watch (403, 404) ends the relay: the operator must not
                    if time.monotonic() - started > 60:
                        failures = 0
                    wait = WATCH_BACKOFF[min(failures, len(WATCH_BACKOFF) - 1)]
                    failures += 1
                    log.warning("The watches stopped (%s: %s): checking RBAC and restarting them in %.0fs; the "
                                "verdicts so far stay in memory.", type(exc).__name__, exc, wait)
                    self.stats.count(self.stats.errors, "watch")
                    await asyncio.sleep(wait)
                    await self.recheck()
                else:
                    if not stop.is_set() or self._stopping:
                        return  # Kopf stopped on a signal: so does the operator
                self.watch_restarts += 1
        finally:
            supervisor.cancel()

    def restart_watches(self) -> None:
        if self._stop_watches is not None:
            self._stop_watches.set()

    def stop(self) -> None:
        """End the watches and the operator (a signal, after the Lease was handed over)."""
        self._stopping = True
        self.restart_watches()

    async def supervise(self) -> None:
        """Forever: repair re-lists once they settle; ask RBAC and the CRD again every recheck interval."""
        next_check = time.monotonic() + self.options.recheck_interval
        while True:
            await asyncio.sleep(TICK)
            if rest.throttled_total:
                self.stats.errors["throttled"] = rest.throttled_total
            relisted = self.inbox.relisted_at
            if relisted is not None and time.monotonic() - relisted >= RELIST_SETTLE:
                self.inbox.relisted_at = None
                await self._after_relist()
            confirm = self.discovery.confirm_due()
            if (time.monotonic() >= min(next_check, confirm or next_check)
                    or (self.publisher.paused and self.stats.crd_installed)):
                next_check = time.monotonic() + self.options.recheck_interval
                try:
                    await self.recheck()
                except Exception as exc:  # e.g. the apiserver went away while a kind given back was listed
                    self.stats.count(self.stats.errors, "recheck")
                    log.warning("Re-checking RBAC and the CRD failed (%s): trying again in %.0fs.", exc,
                                self.options.recheck_interval)

    async def _after_relist(self) -> None:
        try:
            gone = await self.orphans.after_relist()
        except Exception as exc:  # tried again shortly (the apiserver may be restarting)
            self.stats.count(self.stats.errors, "resync")
            log.warning("Could not compare the re-listed objects with a fresh LIST (%s): trying again in %.0fs.",
                        exc, RELIST_RETRY)
            self.inbox.relisted_at = time.monotonic() + RELIST_RETRY - RELIST_SETTLE
            return
        if gone:
            log.info("After a watch gap (410 Gone), %d Workload(s) deleted meanwhile were dropped with their "
                     "diagnoses and metrics.", gone)

    async def recheck(self) -> None:
        """RBAC per kind and the CRD, asked again; the state and the watches follow what changed."""
        changed = await self.discovery.recheck_access()
        if self.discovery.unreachable_since is None and await self.discovery.check_crd():
            self.republish()
        if not changed:
            return
        for kind, allowed in changed.items():
            if kind == "CustomResourceDefinition":
                continue
            if allowed:
                await self._list_kind(kind)
            else:
                async with self.inbox.state_lock:  # never in the middle of a pass
                    self._drop_kind(kind)
        self.inbox.mark(self.state.workloads)
        self.inbox.mark(self.state.owner_workload_names())
        self.inbox.wake.set()
        self.restart_watches()

    async def _list_into_state(self, listing: Listing) -> bool:
        """One kind's paged LIST, each page slimmed in a thread and stored (packed) before the next is read, so
        the start-up never holds every Pod decoded at once (its peak is what the process keeps). False, and
        nothing of the kind kept, when it cannot be read."""
        listed = list_pages(self.api, listing, self.options.namespaces, False, self.options.shard.slim,
                            self.options.shard.keeps)
        try:
            while (page := await asyncio.to_thread(next, listed, None)) is not None:
                for obj in page:
                    self.state.upsert(obj)
        except Unreadable:
            self._drop_kind(listing.kind)  # forbidden half-way (RBAC changed): the state had none of it before
            return False
        return True

    async def _list_kind(self, kind: str) -> None:
        listing = next((lst for lst in self.discovery.listings() if lst.kind == kind), None)
        if listing is None:
            return
        items = await asyncio.to_thread(list_all, self.api, listing, self.options.namespaces, False,
                                        self.options.shard.slim, self.options.shard.keeps)
        if items is None:
            return
        async with self.inbox.state_lock:  # never in the middle of a pass
            self._drop_kind(kind)  # whatever was kept from before is replaced by the fresh list, in one step
            for obj in items:
                self.state.upsert(obj)
            self.state.complete_kinds.add(kind)

    def _drop_kind(self, kind: str) -> None:
        """Forget every object of `kind`: what we may not see must not decide a verdict."""
        self.state.complete_kinds.discard(kind)
        collection = self.state.collection(kind) or {}
        for key, obj in list(collection.items()):
            if kind in OWNER_KIND_NAMES and key[1] != kind:
                continue  # owners of every kind share one collection
            self.state.remove(obj)
            if kind == "Workload":
                self.verdicts.pop(key, None)
                self.publisher.forget(key)

    def crd_event(self, event_type: str | None, crd: Mapping[str, Any]) -> None:
        """A watch event of a CustomResourceDefinition: ours deleted or back is acted on at once."""
        if self.discovery.crd_observed(event_type, crd):
            self.republish()

    def republish(self) -> None:
        """The CRD is (back) in place: every diagnosis is written again (keeping `since`), and nothing else."""
        self.publisher.unwritten()
        self.inbox.mark(self.state.workloads)
        self.inbox.mark(self.state.owner_workload_names())
        self.inbox.wake.set()
