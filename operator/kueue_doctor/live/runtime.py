"""The operator's core: an in-memory ClusterState fed by watch events, one diagnosis loop, one writer.

Handlers only append to an inbox. The loop drains it, marks exactly the Workloads each change can
affect, waits a debounce window so a burst costs one pass, diagnoses the dirty Workloads and hands
the results to the publisher. A periodic resync re-lists what a watch gap may have hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..api import GROUP, PLURAL, VERSION
from ..engine.diagnose import diagnose
from ..kube.objects import m, name, namespace, parse_time, s
from ..kube.slim import slim
from ..state import ClusterState, kind_key
from . import rest
from .publisher import Publisher, diagnosis_path
from .snapshot import KUEUE, Listing, list_all, listings

log = logging.getLogger("kueue_doctor.runtime")
Key = tuple[str, str]
OPTIONAL_KINDS = ("Job", "Pod", "Event", "Namespace")  # diagnosis works without them, with less detail


@dataclass
class Options:
    namespaces: list[str] = field(default_factory=list)  # empty: all
    refresh_interval: float = 60.0
    resync_interval: float = 300.0
    debounce: float = 0.5
    max_workload_series: int = 2000


@dataclass(frozen=True)
class Verdict:
    """What metrics need of one diagnosis."""

    namespace: str
    name: str
    local_queue: str
    cluster_queue: str
    stage: str
    reason: str
    action_by: str
    since: float | None  # unix seconds


class Stats:
    """Operational counters the metrics collector reads."""

    def __init__(self) -> None:
        self.passes = 0
        self.pass_seconds: list[float] = []
        self.writes: dict[str, int] = {}
        self.events: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.last_pass: float | None = None  # unix time of the last successful pass
        self.kueue_installed = False
        self.access: dict[str, bool] = {}

    def count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1


class Runtime:
    def __init__(self, api: Any, options: Options) -> None:
        self.api = api
        self.options = options
        self.state = ClusterState()
        self.stats = Stats()
        self.publisher = Publisher(api, options.refresh_interval, on_write=lambda r: self.stats.count(
            self.stats.writes, r))
        self.verdicts: dict[Key, Verdict] = {}
        self.inbox: deque[tuple[str, Mapping[str, Any]]] = deque()
        self.dirty: set[Key] = set()
        self.wake = asyncio.Event()
        self.ready = asyncio.Event()
        self.kueue_version = "v1beta2"
        self._next_resync = 0.0

    # ----- fed by the Kopf handlers -----
    def observe(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        key = kind_key(obj)
        self.stats.count(self.stats.events, key[1] if key else "unknown")
        self.inbox.append((event_type or "ADDED", obj))
        self.wake.set()

    # ----- start-up -----
    async def check_access(self) -> None:
        """Which optional kinds may we list? Kopf exits on a 403 watch, so only watch what is allowed."""
        for listing in self._listings():
            allowed = await asyncio.to_thread(self._can_list, listing)
            self.stats.access[listing.kind] = allowed
            if not allowed:
                what = "diagnosis" if listing.kind not in OPTIONAL_KINDS else f"detail from {listing.kind}s"
                log.warning("RBAC forbids listing %s: running without that %s. Grant get/list/watch on it "
                            "(see manifests/) for complete verdicts.", listing.kind, what)

    def _can_list(self, listing: Listing) -> bool:
        """A LIST with limit=1 per namespace: a read, so the access check itself writes nothing."""
        namespaces = self.options.namespaces if listing.namespaced and self.options.namespaces else [None]
        for ns in namespaces:
            path = listing.path.format(ns=f"namespaces/{ns}/" if ns else "")
            try:
                rest.request(self.api, "GET", path, query={"limit": "1"})
            except rest.ApiError as exc:
                if exc.status in (401, 403, 404):
                    return False
                raise
        return True

    def allowed(self, kind: str) -> bool:
        return self.stats.access.get(kind, False)

    def _listings(self) -> list[Listing]:
        return [lst for lst in listings(self.kueue_version) if lst.kind not in ("Node",)]

    async def kueue_served(self) -> bool:
        for version in ("v1beta2", "v1beta1"):
            try:
                await asyncio.to_thread(rest.request, self.api, "GET", f"/apis/{KUEUE}/{version}")
            except rest.ApiError:
                continue
            self.kueue_version = version
            return True
        return False

    async def initial_sync(self) -> None:
        """One paged LIST of everything, so the first verdicts never rest on a half-filled cache."""
        objects: list[dict[str, Any]] = []
        complete: set[str] = set()
        for listing in self._listings():
            if not self.allowed(listing.kind):
                continue
            items = await asyncio.to_thread(self._list_kind, listing)
            if items is None:
                continue
            objects.extend(slim(o) for o in items)
            complete.add(listing.kind)
        self.state = ClusterState.from_objects(objects, complete_kinds=complete)
        existing = await asyncio.to_thread(self._list_diagnoses)
        self.publisher.seed(existing)
        self.dirty = set(self.state.workloads)
        self._next_resync = time.monotonic() + self.options.resync_interval
        log.info("Initial sync: %d Workloads, %d Pods, %d existing AdmissionDiagnoses; kinds listed: %s",
                 len(self.state.workloads), len(self.state.pods), len(existing), ", ".join(sorted(complete)))

    def _list_kind(self, listing: Listing) -> list[dict[str, Any]] | None:
        if listing.namespaced and self.options.namespaces:
            out: list[dict[str, Any]] = []
            for ns in self.options.namespaces:
                items = list_all(self.api, listing, ns)
                if items is None:
                    return None
                out.extend(items)
            return out
        return list_all(self.api, listing, None)

    def _list_diagnoses(self) -> list[dict[str, Any]]:
        paths = [diagnosis_path(ns) for ns in self.options.namespaces] or [f"/apis/{GROUP}/{VERSION}/{PLURAL}"]
        out: list[dict[str, Any]] = []
        for path in paths:
            cont = ""
            while True:
                query = {"limit": "500", **({"continue": cont} if cont else {})}
                try:
                    body = rest.request(self.api, "GET", path, query=query)
                except rest.ApiError as exc:
                    log.warning("Cannot list AdmissionDiagnoses (%s): every diagnosis is rewritten once.", exc)
                    return out
                out.extend(m(body).get("items") or [])
                cont = s(m(m(body).get("metadata")).get("continue")) or ""
                if not cont:
                    break
        return out

    # ----- the loop -----
    def _drain(self) -> None:
        if not self.inbox:
            return
        batch = []
        while self.inbox:
            batch.append(self.inbox.popleft())
        before: set[Key] = set()
        for _etype, obj in batch:  # relations as they were: a deleted or moved object's old Workloads
            before |= self.state.affected_workloads(obj)
        changed = []
        for etype, obj in batch:
            if kind_key(obj) == ("kueue-doctor.dev", "AdmissionDiagnosis"):
                self._diagnosis_event(etype, obj)
                continue
            if etype == "DELETED":
                self.state.remove(obj)
                if kind_key(obj) == (KUEUE, "Workload"):
                    key = (namespace(obj) or "", name(obj) or "")
                    self.verdicts.pop(key, None)
                    self.publisher.forget(key)
                    before.discard(key)
            else:
                self.state.upsert(slim(obj))
                changed.append(obj)
        after: set[Key] = set()
        for obj in changed:
            after |= self.state.affected_workloads(obj)
        self.dirty |= {k for k in before | after if k in self.state.workloads}

    def _diagnosis_event(self, etype: str, obj: Mapping[str, Any]) -> None:
        key = (namespace(obj) or "", name(obj) or "")
        if etype == "DELETED":
            if key in self.state.workloads:
                self.publisher.forget(key)
                self.dirty.add(key)  # restored on the next pass, after the Workload is checked to exist
            return
        if self.publisher.observed(obj) and key in self.state.workloads:
            self.dirty.add(key)

    async def run_once(self) -> int:
        """Drain the inbox and diagnose what is dirty; the number of Workloads diagnosed."""
        self._drain()
        now = datetime.now(UTC)
        mono = time.monotonic()
        due = self.publisher.next_due()
        if mono >= self._next_resync:
            await self.resync()
            self._next_resync = mono + self.options.resync_interval
        if due is not None and due <= mono:
            self.dirty |= {k for k in self.publisher.deferred if k in self.state.workloads}
        keys, self.dirty = self.dirty, set()
        await self._verify_restores(keys)
        t0 = time.perf_counter()
        diagnoses = []
        chunk = sorted(k for k in keys if k in self.state.workloads)
        for start in range(0, len(chunk), 500):  # yield to the watchers between chunks
            diagnoses.extend(diagnose(self.state, now, chunk[start:start + 500]))
            await asyncio.sleep(0)
        for d in diagnoses:
            self._remember(d)
        await self.publisher.publish(diagnoses, now)
        self.stats.passes += 1
        self.stats.pass_seconds.append(time.perf_counter() - t0)
        self.stats.last_pass = time.time()
        return len(diagnoses)

    async def _verify_restores(self, keys: set[Key]) -> None:
        """Before re-creating a diagnosis, make sure its Workload exists (no fight with the garbage collector)."""
        for key in [k for k in keys if k in self.state.workloads and k not in self.publisher.records]:
            if key in self.verdicts:  # seen alive by us; only a restore after deletion needs the check
                wl = await self._get_workload(key)
                if wl is None:
                    self.state.remove({"apiVersion": f"{KUEUE}/v1beta2", "kind": "Workload",
                                       "metadata": {"namespace": key[0], "name": key[1]}})
                    self.verdicts.pop(key, None)
                    keys.discard(key)

    async def _get_workload(self, key: Key) -> dict[str, Any] | None:
        path = f"/apis/{KUEUE}/{self.kueue_version}/namespaces/{key[0]}/workloads/{key[1]}"
        try:
            obj = await asyncio.to_thread(rest.request, self.api, "GET", path)
        except rest.ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return dict(obj) if isinstance(obj, dict) else None

    def _remember(self, d: Mapping[str, Any]) -> None:
        st = d["status"]
        since = parse_time(st.get("since"))
        key = (d["metadata"]["namespace"], d["metadata"]["name"])
        self.verdicts[key] = Verdict(key[0], key[1], st.get("localQueue") or "", st.get("clusterQueue") or "",
                                     st["stage"], st["reason"], st["actionBy"], since.timestamp() if since else None)

    async def resync(self) -> None:
        """Drop Workloads a watch gap hid the deletion of; delete diagnoses whose Workload is gone."""
        listing = next(lst for lst in self._listings() if lst.kind == "Workload")
        try:
            names = await asyncio.to_thread(self._list_kind, listing)
        except rest.ApiError as exc:
            self.stats.count(self.stats.errors, "resync")
            log.warning("Resync could not list Workloads: %s", exc)
            return
        if names is not None:
            alive = {(namespace(o) or "", name(o) or "") for o in names}
            for key in [k for k in self.state.workloads if k not in alive]:
                self.state.remove({"apiVersion": f"{KUEUE}/v1beta2", "kind": "Workload",
                                   "metadata": {"namespace": key[0], "name": key[1]}})
                self.verdicts.pop(key, None)
            for obj in names:
                key = (namespace(obj) or "", name(obj) or "")
                if key not in self.state.workloads:
                    self.state.upsert(slim(obj))
                    self.dirty.add(key)
        existing = await asyncio.to_thread(self._list_diagnoses)
        for obj in existing:
            key = (namespace(obj) or "", name(obj) or "")
            if key not in self.state.workloads and await self._get_workload(key) is None:
                await self.publisher.delete(key)
        self.dirty |= set(self.state.workloads)  # time alone moves some verdicts (deadlines, back-off)

    async def loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=self._sleep_for())
            self.wake.clear()
            await asyncio.sleep(self.options.debounce)
            try:
                await self.run_once()
            except Exception as exc:  # a failed pass must not stop the operator; the next one retries
                self.stats.count(self.stats.errors, type(exc).__name__)
                log.exception("Diagnosis pass failed (%s); retrying on the next change or resync.", exc)
                await asyncio.sleep(5)

    def _sleep_for(self) -> float:
        mono = time.monotonic()
        due = self.publisher.next_due()
        candidates = [self._next_resync - mono]
        if due is not None:
            candidates.append(due - mono)
        return max(0.05, min(candidates))

