"""What the cluster lets the operator see: Kueue's served version, RBAC per kind, the CRD it writes.

Asked at start-up (`kueue_served`, `check_access`), again every recheck interval (`recheck_access`,
`check_crd`: RBAC and the CRD can change at runtime), and told at once when the CRD is deleted or
re-applied (`crd_observed`, from the watch on CustomResourceDefinitions). Only reads: the access check is
a metadata-only LIST with limit=1. Neighbours: service.py watches only the kinds allowed here (Kopf exits
on a 403 watch; runtime.py restarts the watches when access changes); runtime.py and orphans.py list only
those kinds; the publisher is paused while the CRD is missing; metrics.py exports what is found here
(resource_access, the CRD gauges) and /healthz says which kinds are forbidden and whether the apiserver answers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..api import GROUP, PLURAL, SCHEMA_ANNOTATION, VERSION, schema_hash
from ..kube.objects import m, name
from ..kube.shards import Shard
from . import rest
from .metrics import Stats
from .publisher import Publisher
from .snapshot import KUEUE, OWNER_RESOURCES, Listing, listings, narrowed

log = logging.getLogger("kueue_doctor.runtime")  # the operator's log lines keep the name they always had
# diagnosis works without them, with less detail (owners of a kind whose CRD is not installed are skipped)
OPTIONAL_KINDS = ("Job", "Pod", "Event", "Namespace", "WorkloadPriorityClass", "MultiKueueCluster", "MultiKueueConfig",
                  "ProvisioningRequestConfig",
                  *(kind for _g, _v, _p, kind in OWNER_RESOURCES))
CRD_NAME = f"{PLURAL}.{GROUP}"
# A kind found forbidden is taken away only when a second check this many seconds later still says so: an
# apiserver that just (re)started answers 403 for a few seconds until its RBAC cache is filled.
CONFIRM_AFTER = 5.0
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class Discovery:
    def __init__(self, api: Any, namespaces: Sequence[str], stats: Stats, publisher: Publisher,
                 kueue_namespace: str = "kueue-system", shard: Shard | None = None) -> None:
        self.api = api
        self.shard = shard or Shard()  # its ranges narrow the LISTs of the kinds a shard keeps only its own of
        self.kueue_namespace = kueue_namespace  # where Kueue's ConfigMap and Deployment are read
        self.namespaces = list(namespaces)  # empty: all
        self.stats = stats
        self.publisher = publisher
        self.version = "v1beta2"  # Kueue's API version served, found by `kueue_served`
        self.forbidden: set[str] = set()  # kinds RBAC forbids (not merely unserved), for /healthz
        self.crds_watchable = False  # may we watch CustomResourceDefinitions (the CRD's deletion seen at once)?
        self.unreachable_since: float | None = None  # unix time of the first failed check of an outage
        self._suspect: dict[str, float] = {}  # kind -> monotonic time it was first found no longer allowed

    async def kueue_served(self) -> bool:
        """Is Kueue's API served, with its Workloads (CRDs being installed: the group can come before them)?"""
        for version in ("v1beta2", "v1beta1"):
            try:
                found = await asyncio.to_thread(rest.request, self.api, "GET", f"/apis/{KUEUE}/{version}")
            except rest.ApiError:
                continue
            if not any(m(r).get("name") == "workloads" for r in m(found).get("resources") or []):
                continue
            self.version = version
            return True
        return False

    def listings(self) -> list[Listing]:
        """The kinds the operator lists and watches (Nodes are only read by `explain`), each narrowed to this
        shard's namespaces where the apiserver can do it (the same selectors as the watches: service.py)."""
        return [narrowed(lst, self.shard) for lst in listings(self.version) if lst.kind not in ("Node",)]

    async def check_access(self) -> None:
        """Which optional kinds may we list? Kopf exits on a 403 watch, so only watch what is allowed."""
        for listing in self.listings():
            allowed = await asyncio.to_thread(self._can_list, listing)
            self.stats.access[listing.kind] = allowed is True
            self._note_forbidden(listing.kind, allowed)
            if allowed is None and listing.kind not in OPTIONAL_KINDS:
                log.warning("Kueue's %s is not served (404): its CRD is not installed or not established yet; "
                            "diagnosis goes without it until it is (checked again every recheck interval).",
                            listing.kind)
            elif allowed is None:
                log.debug("%s is not served by this cluster (its CRD is not installed): not watched.", listing.kind)
            elif not allowed:
                what = "diagnosis" if listing.kind not in OPTIONAL_KINDS else f"detail from {listing.kind}s"
                log.warning("RBAC forbids listing %s: running without that %s. Grant get/list/watch on it "
                            "(see manifests/) for complete verdicts.", listing.kind, what)
        self.crds_watchable = await asyncio.to_thread(self._can_list_crds)

    async def recheck_access(self) -> dict[str, bool]:
        """Ask again (RBAC and installed CRDs change at runtime); the kinds whose access changed, and to what.

        Nothing changes while the apiserver cannot be reached or answers with another error: the kinds keep
        the access they had, and `unreachable_since` says since when no check got through.
        """
        found: dict[str, bool | None] = {}
        try:
            for listing in self.listings():
                found[listing.kind] = await asyncio.to_thread(self._can_list, listing)
            crds = await asyncio.to_thread(self._can_list_crds)
        except rest.ApiError as exc:
            if self.unreachable_since is None:
                self.unreachable_since = time.time()
                log.warning("Cannot check RBAC and the AdmissionDiagnosis CRD (%s): keeping what was last seen; "
                            "checking again every recheck interval.", exc)
            return {}
        if self.unreachable_since is not None:
            log.info("The apiserver answers again (unreachable or failing since %s).",
                     time.strftime("%H:%M:%S", time.gmtime(self.unreachable_since)))
            self.unreachable_since = None
        changed: dict[str, bool] = {}
        mono = time.monotonic()
        for kind, allowed in found.items():
            now = allowed is True
            if now or not self.stats.access.get(kind, False):
                self._suspect.pop(kind, None)
            elif mono - self._suspect.setdefault(kind, mono) < CONFIRM_AFTER:
                continue  # allowed until a second check confirms it (`confirm_due`)
            if self.stats.access.get(kind, False) != now:
                self._suspect.pop(kind, None)
                changed[kind] = now
                self.stats.access[kind] = now
                self._log_change(kind, allowed)
            self._note_forbidden(kind, allowed)
        if crds != self.crds_watchable:
            changed["CustomResourceDefinition"] = crds
            self.crds_watchable = crds
        return changed

    def confirm_due(self) -> float | None:
        """Monotonic time of the check that confirms a kind taken away; None when none is in doubt."""
        return min(self._suspect.values()) + CONFIRM_AFTER if self._suspect else None

    def _note_forbidden(self, kind: str, allowed: bool | None) -> None:
        if allowed is False:
            self.forbidden.add(kind)
        else:
            self.forbidden.discard(kind)

    def _log_change(self, kind: str, allowed: bool | None) -> None:
        if allowed:
            log.info("RBAC now allows listing %s: listing and watching them; verdicts use them again.", kind)
        elif allowed is None:
            log.info("%s is no longer served (its CRD was removed): no longer watched.", kind)
        else:
            what = "no diagnosis rests on" if kind not in OPTIONAL_KINDS else "verdicts now go without"
            log.warning("RBAC no longer allows listing %s (403): %s them until access is back (resource_access "
                        "metric 0, /healthz forbiddenKinds). Grant get/list/watch on them (see manifests/).", kind,
                        what)

    def _can_list_crds(self) -> bool:
        try:
            rest.request(self.api, "GET", CRDS_PATH, query={"limit": "1"}, accept=rest.METADATA_ONLY)
        except rest.ApiError as exc:
            if exc.status in (401, 403, 404):
                return False
            raise
        return True

    def allowed(self, kind: str) -> bool:
        return self.stats.access.get(kind, False)

    def _can_list(self, listing: Listing) -> bool | None:
        """A LIST with limit=1 per namespace: a read, so the access check itself writes nothing. None: the kind
        is not served at all (its CRD is not installed), which is no RBAC problem to warn about."""
        namespaces = self.namespaces if listing.namespaced and self.namespaces else [None]
        for ns in namespaces:
            path = listing.path.format(ns=f"namespaces/{ns}/" if ns else "")
            try:
                rest.request(self.api, "GET", path, query={"limit": "1"}, accept=rest.METADATA_ONLY)
            except rest.ApiError as exc:
                if exc.status == 404:
                    return None
                if exc.status in (401, 403):
                    return False
                raise
        return True

    async def check_crd(self) -> bool:
        """Is the AdmissionDiagnosis CRD installed, and is it the one this operator writes against?
        True when it has just become installed (every diagnosis is to be written again)."""
        path = f"{CRDS_PATH}/{CRD_NAME}"
        try:
            crd = await asyncio.to_thread(rest.request, self.api, "GET", path)
            md = m(m(crd).get("metadata"))
            installed, current = not md.get("deletionTimestamp"), m(md.get("annotations")).get(SCHEMA_ANNOTATION)
        except rest.ApiError as exc:
            if exc.status != 404:  # no RBAC to read CRDs, or a blip: judge by the API group instead
                try:
                    await asyncio.to_thread(rest.request, self.api, "GET", f"/apis/{GROUP}/{VERSION}")
                    installed, current = True, schema_hash()
                except rest.ApiError as exc2:
                    installed, current = exc2.status != 404, schema_hash()
            else:
                installed, current = False, None
        return self._crd_state(installed, current)

    def crd_observed(self, event_type: str | None, crd: Mapping[str, Any]) -> bool:
        """A watch event of our CRD: deleted (or being deleted) pauses writing at once, established resumes it.
        True when it has just become installed (every diagnosis is to be written again)."""
        if name(crd) != CRD_NAME:
            return False
        md = m(crd.get("metadata"))
        conditions = m(crd.get("status")).get("conditions") or []
        established = any(m(c).get("type") == "Established" and m(c).get("status") == "True" for c in conditions)
        installed = event_type != "DELETED" and not md.get("deletionTimestamp") and established
        if not installed and event_type != "DELETED" and not md.get("deletionTimestamp"):
            return False  # created but not served yet: the next event says Established
        return self._crd_state(installed, m(md.get("annotations")).get(SCHEMA_ANNOTATION))

    def _crd_state(self, installed: bool, current: Any) -> bool:
        was = self.stats.crd_installed and not self.publisher.paused  # a failed write (404) paused it
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
        return installed and not was
