"""Repairs: what a watch gap hid, diagnoses whose Workload is gone, and restores that must not happen.

After a 410 Gone, Kopf re-lists without reporting deletions: seconds after such a re-list runtime.py calls
`after_relist`, which asks the apiserver about what the state holds and the re-list did not bring, and queues
the deleted ones in the inbox. `resync`, on every resync interval, compares a metadata-only LIST of each kind
with the state (`repair`), and deletes a diagnosis only after a GET confirms its Workload is gone (or being
deleted). `confirm_restores` runs before each pass: a diagnosis someone deleted is re-created only if a GET
shows its Workload alive, since the garbage collector deletes the dependents of a Workload in foreground
deletion and re-creating them would fight it.
Neighbours: loop.py calls both on its timers; inbox.py applies the repairs; discovery.py says which kinds
may be listed and re-checks the CRD; the publisher deletes (it is the only writer).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..api import GROUP, PLURAL, VERSION
from ..kube.kueue_config import CONFIG_MAP
from ..kube.kueue_names import PODSET_LABEL
from ..kube.objects import labels, m, name, namespace, ns_name
from ..kube.shards import Shard
from ..kube.slim import slim
from ..state import KUEUE, OWNER_KINDS, ClusterState, Key
from . import kueue_install, rest
from .discovery import Discovery
from .inbox import Inbox, Relisted
from .metrics import Stats, Verdict
from .publisher import Publisher, diagnosis_path
from .snapshot import GATED_GROUP_SELECTOR, GATED_SERVING_SELECTOR, Listing, LiveError, list_all, list_pages, pages

log = logging.getLogger("kueue_doctor.runtime")  # the operator's log lines keep the name they always had
OWNER_KIND_NAMES = {kind for _group, kind in OWNER_KINDS}
RELIST_CHECKS = 50  # objects of one kind asked about one by one (a re-list missed them, or restores); more: one LIST


def _identity_of(obj: dict[str, Any]) -> dict[str, Any]:
    """What the repair compares of a listed object (its key). A metadata-only list still carries managedFields,
    about 5 KB a Pod: 50,000 of them held at once were the resync's memory peak."""
    md = m(obj.get("metadata"))
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in md}}


def gated(pod: Mapping[str, Any]) -> bool:
    """A Pod no watch brings (not admitted yet: no podset label): a gated Pod group's, kept by `poll_pod_groups`."""
    return PODSET_LABEL not in labels(pod)


# the label selectors of the Pods `poll_pod_groups` keeps beside the watch's
GATED_SELECTORS = ({"labelSelector": GATED_GROUP_SELECTOR}, {"labelSelector": GATED_SERVING_SELECTOR})


def gated_selectors(listing: Listing) -> tuple[dict[str, str], ...]:
    """GATED_SELECTORS, each with the shard's shardSelector when `listing` (the Pod listing) carries one."""
    shard = next((sel["shardSelector"] for sel in listing.selectors if "shardSelector" in sel), None)
    return tuple({**sel, "shardSelector": shard} if shard else sel for sel in GATED_SELECTORS)


def with_gated_pods(listing: Listing) -> Listing:
    """The Pod listing with every Pod the poll keeps: a resync that left some out would drop them (and their
    group's diagnosis) until the next poll."""
    extra = tuple(sel for sel in gated_selectors(listing) if sel not in listing.selectors) \
        if listing.kind == "Pod" else ()
    return replace(listing, selectors=(*listing.selectors, *extra)) if extra else listing


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(m(obj.get("metadata")).get("deletionTimestamp"))


def diagnosis_pages(api: Any, namespaces: Sequence[str], shard: Shard | None = None, metadata_only: bool = False
                    ) -> Iterator[list[dict[str, Any]]]:
    """Every AdmissionDiagnosis in the watched namespaces (of this shard's namespaces: another shard's are never
    repaired nor deleted here), page by page, so that a caller keeps only what it needs of each: 50,000 diagnoses
    decoded at once are about 230 MiB. On an error, the pages read so far and a warning."""
    paths = [diagnosis_path(ns) for ns in namespaces] or [f"/apis/{GROUP}/{VERSION}/{PLURAL}"]
    query = {"shardSelector": shard.selector} if shard is not None and shard.selector else {}
    for path in paths:
        try:
            for page in pages(api, path, query, metadata_only=metadata_only):
                yield [o for o in page if shard is None or shard.owns(namespace(o))]
        except rest.ApiError as exc:
            log.warning("Cannot list AdmissionDiagnoses (%s): those not listed are rewritten once at start-up, and "
                        "a resync deletes none of them whose Workload is gone; check the operator's RBAC (list on "
                        "admissiondiagnoses).", exc)
            return


def diagnosis_keys(api: Any, namespaces: Sequence[str], shard: Shard | None = None) -> list[Key]:
    """(namespace, name) of every AdmissionDiagnosis `diagnosis_pages` lists, from a metadata-only LIST."""
    return [ns_name(o) for page in diagnosis_pages(api, namespaces, shard, True) for o in page]


class Orphans:
    def __init__(self, api: Any, state: ClusterState, inbox: Inbox, discovery: Discovery, publisher: Publisher,
                 verdicts: dict[Key, Verdict], stats: Stats, shard: Shard | None = None) -> None:
        self.api = api
        self.state = state
        self.inbox = inbox
        self.discovery = discovery
        self.publisher = publisher
        self.verdicts = verdicts
        self.stats = stats
        self.shard = shard or Shard()

    async def repair(self) -> set[Key]:
        """Repair what a watch gap hid: after a 410 Gone, Kopf re-lists without reporting deletions.

        Every kind is re-listed as metadata only; objects gone from the cluster are queued as deleted (unless a
        watch event about them came in while listing: it is newer than the LIST), objects missing from memory
        are fetched. The Workloads found gone.
        """
        gone: set[Key] = set()
        for listing in self.discovery.listings():
            if self.discovery.allowed(listing.kind) and listing.kind in self.state.complete_kinds:
                gone |= await self._repair_kind(with_gated_pods(listing))
        return gone

    async def _repair_kind(self, listing: Listing, strict: bool = False) -> set[Key]:
        """`strict`: raise when the kind cannot be listed (a re-list's repair is tried again shortly), instead of
        leaving it to the next resync."""
        namespaces = self.discovery.namespaces
        with self.inbox.recording() as seen:
            try:
                alive = await asyncio.to_thread(list_all, self.api, listing, namespaces, True, _identity_of,
                                                self.shard.keeps)
            except LiveError:
                raise  # the cluster cannot be reached: no other kind can be listed either
            except Exception as exc:  # one kind failing must not stop the others
                if strict:
                    raise
                self.stats.count(self.stats.errors, "resync")
                log.warning("Resync could not list %s: %s", listing.kind, exc)
                return set()
        if alive is None:
            if strict:
                raise LiveError(f"{listing.kind} could not be listed (forbidden or not served)")
            return set()
        gone = self._reconcile(listing, alive, seen)  # another shard's Pods all listed: its bound ones stay
        if any(self._missing(listing.kind, o) for o in alive if self.shard.keeps(o)):  # not its unbound ones
            items = await asyncio.to_thread(list_all, self.api, listing, namespaces, False, self.shard.slim,
                                           self.shard.keeps)
            for obj in items or []:
                if self._missing(listing.kind, obj):
                    self.inbox.put("ADDED", obj)
        self.stats.heartbeat = time.monotonic()
        return gone

    async def after_relist(self) -> int:
        """Kopf re-listed some kinds (after a 410 Gone, when its watches restart, and once after start-up): drop
        what vanished meanwhile, with its diagnosis, at once rather than at the next resync. The number of
        Workloads found gone.

        A re-list brings every object alive, so only what the state holds and the re-list did not bring can be
        gone: each is asked about with a LIST by name (`_still_listed`), or, past RELIST_CHECKS of one kind (the
        re-list was cut short), the kind is listed whole (`_repair_kind`). Kopf's listing right after start-up
        brings what the start-up list read: it costs nothing (it was a metadata LIST of every kind, 10-20 s of
        CPU at 10,000 Workloads). A kind whose re-list came back empty sends no event, so the objects it held
        are dropped by the next resync, not here.
        """
        relisted = self.inbox.take_relisted()
        try:
            gone = await self._repair_relisted(relisted)
        except Exception:
            self.inbox.give_back_relisted(relisted)  # compared again on the retry
            raise
        for key in sorted(gone):
            if self.shard.owns(key[0]):  # not only recorded ones: the inbox may have drained the deletion already
                await self.publisher.delete(key)  # the garbage collector may have been first: a 404 is fine
        self.inbox.wake.set()
        return len(gone)

    async def _repair_relisted(self, relisted: dict[str, Relisted]) -> set[Key]:
        gone: set[Key] = set()
        for listing in self.discovery.listings():
            listed = relisted.get(listing.kind)
            if listed is None or not self.discovery.allowed(listing.kind) or (
                    listing.kind not in self.state.complete_kinds):
                continue
            collection = self.state.collection(listing.kind) or {}
            owners = listing.kind in OWNER_KIND_NAMES  # owners of every kind share one collection
            unlisted = [k for k in list(collection)
                        if hash(k) not in listed.keys and (not owners or k[1] == listing.kind)]
            if listing.namespaced and self.discovery.namespaces:  # a watch per namespace: only its own re-listed
                unlisted = [k for k in unlisted if namespace(collection.get(k) or {}) in listed.namespaces]
            if listing.kind == "Pod":  # the watch never brings gated Pod groups' Pods: the poll keeps them
                unlisted = [k for k in unlisted if not gated(collection.get(k) or {})]
            if len(unlisted) > RELIST_CHECKS:
                gone |= await self._repair_kind(with_gated_pods(listing), strict=True)
                continue
            for key in unlisted:
                obj = collection.get(key)
                if obj is None:
                    continue  # a watch event removed it meanwhile
                with self.inbox.recording() as seen:
                    listed_now = await asyncio.to_thread(self._still_listed, listing, namespace(obj) or "",
                                                         name(obj) or "")
                if not listed_now and (listing.kind, key) not in seen:  # else an event is newer
                    self.inbox.put("DELETED", obj)
                    if listing.kind == "Workload":
                        gone.add(key)
            self.stats.heartbeat = time.monotonic()
        return gone

    async def poll_pod_groups(self) -> int:
        """Keep the Pods of Pod groups Kueue has not admitted current: without the podset label no watch brings
        them (a watch takes one label selector), and while such a group is incomplete, or its prebuilt Workload
        is missing, they are all there is to diagnose (Kueue makes no Workload). Plain groups are selected by
        their group label, those of Kueue's LeaderWorkerSet and StatefulSet integrations by
        GATED_SERVING_SELECTOR. They are few: listed whole and queued like a re-list's changes
        (the inbox drops what it holds at the same version); those the state holds and the list did not bring
        are gone (or admitted meanwhile: then the watch brought them). The number of changes queued."""
        pod_listing = next((lst for lst in self.discovery.listings() if lst.kind == "Pod"), None)
        if pod_listing is None or not self.discovery.allowed("Pod") or "Pod" not in self.state.complete_kinds:
            return 0
        listing = replace(pod_listing, selectors=gated_selectors(pod_listing))
        with self.inbox.recording() as seen:
            alive = await asyncio.to_thread(list_all, self.api, listing, self.discovery.namespaces, False,
                                            self.shard.slim, self.shard.keeps)
        if alive is None:
            self.stats.count(self.stats.errors, "pod-groups")
            log.warning("Could not list the Pods of Pod groups Kueue has not admitted (labels %s; %s); those "
                        "groups are diagnosed from what the last resync read. Check the operator's RBAC for pods.",
                        GATED_GROUP_SELECTOR, GATED_SERVING_SELECTOR)
            return 0
        listed: set[Key] = set()
        queued = 0
        for obj in alive:
            key = ns_name(obj)
            listed.add(key)
            if not self.inbox.holds(obj):
                self.inbox.put("ADDED", obj)
                queued += 1
        for group in self.state.pod_group_names():
            if group in self.state.workloads:
                continue  # its Pods matter once it is admitted (the watch's), and the resync repairs the others
            for pod in self.state.pod_group(group):
                key = ns_name(pod)
                if gated(pod) and key not in listed and ("Pod", key) not in seen:
                    self.inbox.put("DELETED", pod)
                    queued += 1
        if queued:
            self.inbox.wake.set()
        return queued

    def _still_listed(self, listing: Listing, ns: str, nm: str) -> bool:
        """Does the listing (its selectors included: an object that stopped matching is gone for us too) still
        hold this object? Asked in the namespace's own path, where the apiserver reads one key (a cluster-wide
        LIST filtered by namespace scans the whole kind). LiveError when the apiserver does not say (a restarting
        one answers 403 for seconds: runtime.py tries again)."""
        by_name = replace(listing, selectors=tuple(
            {**selector, "fieldSelector": ",".join(f for f in (selector.get("fieldSelector"), f"metadata.name={nm}")
                                                   if f)} for selector in listing.selectors))
        items = list_all(self.api, by_name, [ns], metadata_only=True)
        if items is None:
            raise LiveError(f"could not check whether {listing.kind} {ns}/{nm} still exists (forbidden, not "
                            "served or failing)")
        # compared by name too: a server that ignored the field selector answers the whole list
        return any(name(o) == nm and (namespace(o) or "") == ns for o in items)

    async def resync(self) -> None:
        """The periodic repair (`repair`), the CRD re-checked, diagnoses of gone Workloads deleted, Kueue's
        installation re-read, and every Workload diagnosed again."""
        namespaces = self.discovery.namespaces
        try:
            await self.repair()
        except LiveError as exc:
            self.stats.count(self.stats.errors, "resync")
            log.warning("Resync skipped: %s. Trying again at the next resync.", exc)
            return
        await self.inbox.drain_between_passes()
        await self.discovery.check_crd()
        if self.stats.crd_installed:
            for key in await asyncio.to_thread(diagnosis_keys, self.api, namespaces, self.shard):
                if not self.state.diagnosable(key):  # an owner's own diagnosis lives as long as the owner
                    wl = await self._get_workload(key)
                    if wl is None or deleting(wl):
                        await self.publisher.delete(key)
        await self._reread_kueue_install()
        self.inbox.mark_background(self.state.workloads)  # time alone moves some verdicts (deadlines, back-off)
        self.inbox.mark_background(self.state.owner_workload_names())

    async def _reread_kueue_install(self) -> None:
        """Kueue reads its Configuration when it starts: a resync is soon enough to notice a change."""
        kueue_ns = self.discovery.kueue_namespace
        try:
            install, readable = await asyncio.to_thread(kueue_install.read, self.api, kueue_ns)
        except rest.ApiError as exc:
            self.stats.count(self.stats.errors, "resync")
            log.warning("Resync could not read Kueue's ConfigMap and Deployment in %s: %s", kueue_ns, exc)
            return
        for found in install:
            self.inbox.put("ADDED", slim(found))
        if "ConfigMap" in readable and not any(o.get("kind") == "ConfigMap" for o in install):
            self.inbox.put("DELETED", {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": CONFIG_MAP, "namespace": kueue_ns}})
        async with self.inbox.state_lock:
            self.state.complete_kinds |= readable
            self.inbox.drain()

    def _missing(self, kind: str, obj: Mapping[str, Any]) -> bool:
        return self.state.key_of(kind, obj) not in (self.state.collection(kind) or {})

    def _reconcile(self, listing: Listing, alive: list[dict[str, Any]], seen: set[tuple[str, Any]]) -> set[Key]:
        keep = {self.state.key_of(listing.kind, o) for o in alive}
        gone: set[Key] = set()
        collection = self.state.collection(listing.kind) or {}
        for key in list(collection):  # keys only: a packed Pod is decoded only when it is gone
            if listing.kind in OWNER_KIND_NAMES and key[1] != listing.kind:
                continue  # owners of every kind share one collection: reconcile only this kind
            if key not in keep and (listing.kind, key) not in seen:
                self.inbox.put("DELETED", collection[key])
                if listing.kind == "Workload":
                    gone.add(key)
        return gone

    async def confirm_restores(self, keys: set[Key]) -> set[Key]:
        """Of the Workloads about to be diagnosed, those whose deleted diagnosis must not be restored.

        A diagnosis we wrote and someone (or the garbage collector) deleted is re-created only after a
        GET shows its Workload exists and is not being deleted; the others are dropped and returned.
        """
        dropped: set[Key] = set()
        # seen alive by us; only a restore after deletion needs the check
        restores = [k for k in keys if k in self.state.workloads and self.publisher.restoring(k) and k in self.verdicts]
        live: dict[Key, bool] | None = None  # key -> being deleted, from one LIST when many are to be restored
        if len(restores) > RELIST_CHECKS:  # `kubectl delete admissiondiagnoses --all`: one LIST, not a GET each
            live = await asyncio.to_thread(self._workloads_deleting)
        for key in restores:
            if live is not None:
                gone = live.get(key, True)
            else:
                wl = await self._get_workload(key)
                gone = wl is None or deleting(wl)
            if gone:
                self._drop_workload(key)
                dropped.add(key)
        return dropped

    def _workloads_deleting(self) -> dict[Key, bool]:
        """Every Workload this replica watches, from a metadata-only LIST: whether it is being deleted."""
        listing = next(lst for lst in self.discovery.listings() if lst.kind == "Workload")
        return {ns_name(o): deleting(o) for page in list_pages(self.api, listing, self.discovery.namespaces, True)
                for o in page}

    async def _get_workload(self, key: Key) -> dict[str, Any] | None:
        path = f"/apis/{KUEUE}/{self.discovery.version}/namespaces/{key[0]}/workloads/{key[1]}"
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
