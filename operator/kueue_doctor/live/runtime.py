"""The operator's parts, built once and wired together; the start-up list that fills them.

One ClusterState, kept current by the inbox (inbox.py), diagnosed by the loop (loop.py), repaired by the
resync (orphans.py), within what the cluster lets us see (discovery.py); the publisher (publisher.py) is
the only writer and metrics.py reads the verdicts and counters. service.py starts it all under Kopf.
Each part holds the few others it needs; this module only builds them and runs the start-up list.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..kube.slim import slim
from ..state import ClusterState, Key
from . import kueue_install
from .discovery import Discovery
from .inbox import Inbox
from .loop import DiagnosisLoop
from .metrics import Stats, Verdict
from .orphans import Orphans, list_diagnoses
from .publisher import Publisher
from .reports import ReportMirror
from .snapshot import list_all
from .team_labels import DEFAULT_LABEL_VALUES

log = logging.getLogger("kueue_doctor.runtime")


@dataclass
class Options:
    namespaces: list[str] = field(default_factory=list)  # empty: all
    refresh_interval: float = 60.0
    resync_interval: float = 300.0
    debounce: float = 0.5  # the longest a burst of changes is collected before a pass
    max_workload_series: int = 2000
    writes_per_second: float = 100.0
    refresh_writes_per_second: float = 10.0  # numbers-only rewrites of unchanged verdicts, across all diagnoses
    kueue_namespace: str = "kueue-system"  # where Kueue's ConfigMap and Deployment are read
    metric_labels: list[str] = field(default_factory=list)  # --metric-label-from (team_labels.py)
    metric_label_values: int = DEFAULT_LABEL_VALUES  # distinct values per custom_ label (team_labels.py)
    reports: bool = False  # also mirror the verdicts into OpenReports Reports (reports.py)


class Runtime:
    def __init__(self, api: Any, options: Options) -> None:
        self.api = api
        self.options = options
        self.state = ClusterState()  # filled in place by `initial_sync`: every part holds this one
        self.stats = Stats()
        self.verdicts: dict[Key, Verdict] = {}  # the metrics' read model, one per diagnosed Workload
        self.ready = asyncio.Event()
        self.publisher = Publisher(api, options.refresh_interval, writes_per_second=options.writes_per_second,
                                   refresh_writes_per_second=options.refresh_writes_per_second,
                                   on_write=self.stats.written)
        self.discovery = Discovery(api, options.namespaces, self.stats, self.publisher, options.kueue_namespace)
        self.inbox = Inbox(self.state, self.stats, self.publisher, self.verdicts)
        self.orphans = Orphans(api, self.state, self.inbox, self.discovery, self.publisher, self.verdicts,
                               self.stats)
        self.loop = DiagnosisLoop(self.state, self.inbox, self.orphans, self.publisher, self.verdicts, self.stats,
                                  options.debounce, options.resync_interval)
        self.reports = ReportMirror(api, options.namespaces) if options.reports else None
        self.loop.reports = self.reports

    async def initial_sync(self) -> None:
        """One paged LIST of everything, so the first verdicts never rest on a half-filled cache."""
        complete: set[str] = set()
        for listing in self.discovery.listings():
            if not self.discovery.allowed(listing.kind):
                continue
            items = await asyncio.to_thread(list_all, self.api, listing, self.options.namespaces, False, slim)
            if items is None:
                continue
            for obj in items:
                self.state.upsert(obj)
            complete.add(listing.kind)
        install, readable = await asyncio.to_thread(kueue_install.read, self.api, self.options.kueue_namespace)
        for obj in install:
            self.state.upsert(slim(obj))
        self.state.complete_kinds = complete | readable
        existing = await asyncio.to_thread(list_diagnoses, self.api, self.options.namespaces)
        self.publisher.seed(existing)
        if self.reports is not None:
            await self.reports.seed()
        self.inbox.mark(self.state.workloads)
        self.inbox.mark(self.state.owner_workload_names())  # owners Kueue has made no Workload for
        self.loop.synced()
        await self.discovery.check_crd()
        log.info("Initial sync: %d Workloads, %d Pods, %d existing AdmissionDiagnoses; kinds listed: %s",
                 len(self.state.workloads), len(self.state.pods), len(existing), ", ".join(sorted(complete)))
