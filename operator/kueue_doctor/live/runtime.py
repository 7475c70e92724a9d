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

from ..api import GROUP, PLURAL, SCHEMA_ANNOTATION, VERSION, schema_hash
from ..engine.diagnose import diagnose
from ..kube.objects import m, name, namespace, parse_time, s
from ..kube.slim import slim
from ..state import OWNER_KINDS, ClusterState, kind_key
from . import rest
from .publisher import Publisher, diagnosis_path
from .snapshot import KUEUE, Listing, list_all, listings, pages

log = logging.getLogger("kueue_doctor.runtime")
Key = tuple[str, str]
OPTIONAL_KINDS = ("Job", "Pod", "Event", "Namespace")  # diagnosis works without them, with less detail
RETRY_AFTER = 10.0  # seconds before a failed write is tried again
EVENT_KINDS = {"Pod", "Job", "Workload"} | {kind for _group, kind in OWNER_KINDS}


def _event_is_relevant(obj: Mapping[str, Any]) -> bool:
    ref = m(obj.get("involvedObject") or obj.get("regarding"))
    return s(ref.get("kind")) in EVENT_KINDS


def _same_version(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    rv = m(a.get("metadata")).get("resourceVersion")
    return bool(rv) and rv == m(b.get("metadata")).get("resourceVersion")


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(m(obj.get("metadata")).get("deletionTimestamp"))


@dataclass
class Options:
    namespaces: list[str] = field(default_factory=list)  # empty: all
    refresh_interval: float = 60.0
    resync_interval: float = 300.0
    debounce: float = 0.5  # the longest a burst of changes is collected before a pass
    max_workload_series: int = 2000
    writes_per_second: float = 100.0


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
        self.pass_seconds_sum = 0.0
        self.heartbeat = time.monotonic()  # the loop's last sign of life (liveness)
        self.crd_installed = True
        self.crd_current = True
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
        self.publisher = Publisher(api, options.refresh_interval, writes_per_second=options.writes_per_second,
                                   on_write=self._written)
        self.verdicts: dict[Key, Verdict] = {}
        self.inbox: deque[tuple[str, Mapping[str, Any]]] = deque()
        self.dirty: set[Key] = set()
        self.wake = asyncio.Event()
        self.ready = asyncio.Event()
        self.kueue_version = "v1beta2"
        self._next_resync = 0.0
        self._retry_at: float | None = None

    def _written(self, result: str) -> None:
        self.stats.count(self.stats.writes, result)
        self.stats.heartbeat = time.monotonic()  # a long first pass of writes is alive, not stuck

    # ----- fed by the Kopf handlers -----
    def observe(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        key = kind_key(obj)
        self.stats.count(self.stats.events, key[1] if key else "unknown")
        if key == ("", "Event") and not _event_is_relevant(obj):
            return  # a Warning about a Node, a Service...: never read, so never kept
        if key != ("kueue-doctor.dev", "AdmissionDiagnosis"):  # our own objects are compared whole
            obj = slim(obj)  # queued slim: a re-list of 50,000 Pods must not sit in memory whole
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
            objects.extend(items)
            complete.add(listing.kind)
        self.state = ClusterState.from_objects(objects, complete_kinds=complete)
        existing = await asyncio.to_thread(self._list_diagnoses)
        self.publisher.seed(existing)
        self.dirty = set(self.state.workloads)
        self._next_resync = time.monotonic() + self.options.resync_interval
        await self._check_crd()
        log.info("Initial sync: %d Workloads, %d Pods, %d existing AdmissionDiagnoses; kinds listed: %s",
                 len(self.state.workloads), len(self.state.pods), len(existing), ", ".join(sorted(complete)))

    def _list_kind(self, listing: Listing, metadata_only: bool = False) -> list[dict[str, Any]] | None:
        """All objects of a kind in the watched namespaces, slimmed page by page (or metadata only)."""
        return list_all(self.api, listing, self.options.namespaces, metadata_only, None if metadata_only else slim)

    def _list_diagnoses(self) -> list[dict[str, Any]]:
        paths = [diagnosis_path(ns) for ns in self.options.namespaces] or [f"/apis/{GROUP}/{VERSION}/{PLURAL}"]
        out: list[dict[str, Any]] = []
        for path in paths:
            try:
                for page in pages(self.api, path):
                    out.extend(page)
            except rest.ApiError as exc:
                log.warning("Cannot list AdmissionDiagnoses (%s): every diagnosis is rewritten once.", exc)
                return out
        return out

    # ----- the loop -----
    def _drain(self) -> None:
        if not self.inbox:
            return
        batch = []
        while self.inbox:
            batch.append(self.inbox.popleft())
        before: set[Key] = set()
        todo: list[tuple[str, Mapping[str, Any], bool]] = []
        for etype, obj in batch:
            key = kind_key(obj)
            if key == ("kueue-doctor.dev", "AdmissionDiagnosis"):
                self._diagnosis_event(etype, obj)
                continue
            prev = self._stored(key[1] if key else "", obj)
            if etype != "DELETED" and prev is not None and _same_version(prev, obj):
                continue  # a re-list or a duplicate event: nothing new
            status_only = prev is not None and key == (KUEUE, "ClusterQueue") and prev.get("spec") == obj.get("spec")
            before |= self.state.affected_workloads(prev or obj, status_only)  # relations as they were
            todo.append((etype, obj, status_only))
        after: set[Key] = set()
        for etype, obj, _ in todo:
            if etype == "DELETED":
                self.state.remove(obj)
                if kind_key(obj) == (KUEUE, "Workload"):
                    key = (namespace(obj) or "", name(obj) or "")
                    self.verdicts.pop(key, None)
                    self.publisher.forget(key)
                    before.discard(key)
            else:
                self.state.upsert(obj)  # slimmed when observed
        for etype, obj, status_only in todo:
            if etype != "DELETED":
                after |= self.state.affected_workloads(obj, status_only)
        self.dirty |= {k for k in before | after if k in self.state.workloads}

    def _stored(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        collection = self.state.collection(kind)
        return None if collection is None else collection.get(self.state.key_of(kind, obj))

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
        mono = time.monotonic()
        if mono >= self._next_resync:
            await self.resync()
            self._next_resync = mono + self.options.resync_interval
        due = self.publisher.next_due()
        if due is not None and due <= mono:
            self.dirty |= {k for k in self.publisher.deferred if k in self.state.workloads}
        keys, self.dirty = self.dirty, set()
        try:
            return await self._pass(keys)
        except BaseException:
            self.dirty |= keys  # nothing is lost: the next pass takes them again
            raise

    async def _pass(self, keys: set[Key]) -> int:
        now = datetime.now(UTC)
        await self._verify_restores(keys)
        t0 = time.perf_counter()
        diagnoses = []
        chunk = sorted(k for k in keys if k in self.state.workloads and not _deleting(self.state.workloads[k]))
        for start in range(0, len(chunk), 500):  # yield to the watchers between chunks
            diagnoses.extend(diagnose(self.state, now, chunk[start:start + 500]))
            self.stats.heartbeat = time.monotonic()
            await asyncio.sleep(0)
        elapsed = time.perf_counter() - t0
        failed = await self.publisher.publish(diagnoses, now)
        for d in diagnoses:  # after publish: `since` is the one written (kept across reason-stable passes)
            self._remember(d)
        if failed:
            self.dirty |= failed
            self._retry_at = time.monotonic() + RETRY_AFTER
        self.stats.passes += 1
        self.stats.pass_seconds_sum += elapsed
        self.stats.last_pass = time.time()
        self.stats.heartbeat = time.monotonic()
        return len(diagnoses)

    async def _verify_restores(self, keys: set[Key]) -> None:
        """Before re-creating a deleted diagnosis, make sure its Workload exists and is not being deleted:
        the garbage collector deletes dependents of a Workload in foreground deletion, and re-creating
        them would fight it."""
        for key in [k for k in keys if k in self.state.workloads and k not in self.publisher.records]:
            if key in self.verdicts:  # seen alive by us; only a restore after deletion needs the check
                wl = await self._get_workload(key)
                if wl is None or _deleting(wl):
                    self._drop_workload(key)
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

    def _drop_workload(self, key: Key) -> None:
        self.state.remove({"apiVersion": f"{KUEUE}/v1beta2", "kind": "Workload",
                           "metadata": {"namespace": key[0], "name": key[1]}})
        self.verdicts.pop(key, None)
        self.publisher.forget(key)

    def _remember(self, d: Mapping[str, Any]) -> None:
        st = d["status"]
        since = parse_time(st.get("since"))
        key = (d["metadata"]["namespace"], d["metadata"]["name"])
        self.verdicts[key] = Verdict(key[0], key[1], st.get("localQueue") or "", st.get("clusterQueue") or "",
                                     st["stage"], st["reason"], st["actionBy"], since.timestamp() if since else None)

    async def resync(self) -> None:
        """Repair what a watch gap hid: after a 410 Gone, Kopf re-lists without reporting deletions.

        Every kind is re-listed as metadata only; objects gone from the cluster are dropped, objects
        missing from memory are fetched; diagnoses whose Workload is gone are deleted.
        """
        for listing in self._listings():
            if not self.allowed(listing.kind) or listing.kind not in self.state.complete_kinds:
                continue
            try:
                alive = await asyncio.to_thread(self._list_kind, listing, True)
            except Exception as exc:  # one kind failing must not stop the others
                self.stats.count(self.stats.errors, "resync")
                log.warning("Resync could not list %s: %s", listing.kind, exc)
                continue
            if alive is None:
                continue
            self._reconcile(listing, alive)
            if any(self._missing(listing.kind, o) for o in alive):
                items = await asyncio.to_thread(self._list_kind, listing)
                for obj in items or []:
                    if self._missing(listing.kind, obj):
                        self.inbox.append(("ADDED", obj))
            self.stats.heartbeat = time.monotonic()
        self._drain()
        await self._check_crd()
        if self.stats.crd_installed:
            for obj in await asyncio.to_thread(self._list_diagnoses):
                key = (namespace(obj) or "", name(obj) or "")
                if key not in self.state.workloads:
                    wl = await self._get_workload(key)
                    if wl is None or _deleting(wl):
                        await self.publisher.delete(key)
        self.dirty |= set(self.state.workloads)  # time alone moves some verdicts (deadlines, back-off)

    def _missing(self, kind: str, obj: Mapping[str, Any]) -> bool:
        return self.state.key_of(kind, obj) not in (self.state.collection(kind) or {})

    def _reconcile(self, listing: Listing, alive: list[dict[str, Any]]) -> None:
        keep = {self.state.key_of(listing.kind, o) for o in alive}
        for key, obj in list((self.state.collection(listing.kind) or {}).items()):
            if listing.kind == "Job" and key[1] != "Job":
                continue  # JobSets and other owners are not re-listed here
            if key not in keep:
                self.inbox.append(("DELETED", obj))

    async def _check_crd(self) -> None:
        """Is the AdmissionDiagnosis CRD installed, and is it the one this operator writes against?"""
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{PLURAL}.{GROUP}"
        try:
            crd = await asyncio.to_thread(rest.request, self.api, "GET", path)
            installed, current = True, m(m(crd).get("metadata")).get("annotations", {}).get(SCHEMA_ANNOTATION)
        except rest.ApiError as exc:
            if exc.status != 404:  # no RBAC to read CRDs, or a blip: judge by the API group instead
                try:
                    await asyncio.to_thread(rest.request, self.api, "GET", f"/apis/{GROUP}/{VERSION}")
                    installed, current = True, schema_hash()
                except rest.ApiError as exc2:
                    installed, current = exc2.status != 404, schema_hash()
            else:
                installed, current = False, None
        if installed != self.stats.crd_installed:
            if installed:
                log.info("The AdmissionDiagnosis CRD is installed: publishing diagnoses.")
            else:
                log.error("The AdmissionDiagnosis CRD (%s.%s) is not installed: diagnoses are computed (metrics "
                          "work) but not written. Install crds/ or the Helm chart.", PLURAL, GROUP)
        up_to_date = not installed or current == schema_hash()
        if installed and not up_to_date and self.stats.crd_current:
            log.warning("The installed AdmissionDiagnosis CRD (schema %s) is not the one this operator expects "
                        "(schema %s): upgrade it (kubectl apply --server-side -f crds/, or helm upgrade) so that "
                        "kubectl explain and the printer columns match what is written.", current or "unknown",
                        schema_hash())
        self.stats.crd_installed = installed
        self.stats.crd_current = up_to_date
        self.publisher.paused = not installed

    async def loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=self._sleep_for())
            self.wake.clear()
            self._retry_at = None
            self.stats.heartbeat = time.monotonic()
            await self._collect_burst()
            try:
                await self.run_once()
            except Exception as exc:  # a failed pass must not stop the operator; the next one retries
                self.stats.count(self.stats.errors, type(exc).__name__)
                log.exception("Diagnosis pass failed (%s); retrying on the next change or resync.", exc)
                await asyncio.sleep(5)

    async def _collect_burst(self) -> None:
        """A lone change is diagnosed at once; a burst is collected until it pauses (at most `debounce`)."""
        deadline = time.monotonic() + self.options.debounce
        seen = len(self.inbox)
        while time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            if len(self.inbox) == seen:
                return
            seen = len(self.inbox)

    def _sleep_for(self) -> float:
        mono = time.monotonic()
        due = self.publisher.next_due()
        candidates = [self._next_resync - mono]
        if due is not None:
            candidates.append(due - mono)
        if self._retry_at is not None:
            candidates.append(self._retry_at - mono)
        return max(0.05, min(candidates))

