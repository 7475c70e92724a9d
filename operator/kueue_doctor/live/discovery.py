"""What the cluster lets the operator see: Kueue's served version, RBAC per kind, the CRD it writes.

Asked at start-up (`kueue_served`, `check_access`) and again on every resync (`check_crd`). Only reads:
the access check is a LIST with limit=1. Neighbours: service.py registers a watch only for the kinds
allowed here (Kopf exits on a 403 watch); runtime.py and orphans.py list only those kinds; the publisher
is paused while the CRD is missing; metrics.py exports what is found here (resource_access, the CRD gauges).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from ..api import GROUP, PLURAL, SCHEMA_ANNOTATION, VERSION, schema_hash
from ..kube.objects import m
from . import rest
from .metrics import Stats
from .publisher import Publisher
from .snapshot import KUEUE, OWNER_RESOURCES, Listing, listings

log = logging.getLogger("kueue_doctor.runtime")  # the operator's log lines keep the name they always had
# diagnosis works without them, with less detail (owners of a kind whose CRD is not installed are skipped)
OPTIONAL_KINDS = ("Job", "Pod", "Event", "Namespace", "WorkloadPriorityClass",
                  *(kind for _g, _v, _p, kind in OWNER_RESOURCES))


class Discovery:
    def __init__(self, api: Any, namespaces: Sequence[str], stats: Stats, publisher: Publisher,
                 kueue_namespace: str = "kueue-system") -> None:
        self.api = api
        self.kueue_namespace = kueue_namespace  # where Kueue's ConfigMap and Deployment are read
        self.namespaces = list(namespaces)  # empty: all
        self.stats = stats
        self.publisher = publisher
        self.version = "v1beta2"  # Kueue's API version served, found by `kueue_served`

    async def kueue_served(self) -> bool:
        for version in ("v1beta2", "v1beta1"):
            try:
                await asyncio.to_thread(rest.request, self.api, "GET", f"/apis/{KUEUE}/{version}")
            except rest.ApiError:
                continue
            self.version = version
            return True
        return False

    def listings(self) -> list[Listing]:
        """The kinds the operator lists and watches (Nodes are only read by `explain`)."""
        return [lst for lst in listings(self.version) if lst.kind not in ("Node",)]

    async def check_access(self) -> None:
        """Which optional kinds may we list? Kopf exits on a 403 watch, so only watch what is allowed."""
        for listing in self.listings():
            allowed = await asyncio.to_thread(self._can_list, listing)
            self.stats.access[listing.kind] = allowed is True
            if allowed is None:
                log.debug("%s is not served by this cluster (its CRD is not installed): not watched.", listing.kind)
            elif not allowed:
                what = "diagnosis" if listing.kind not in OPTIONAL_KINDS else f"detail from {listing.kind}s"
                log.warning("RBAC forbids listing %s: running without that %s. Grant get/list/watch on it "
                            "(see manifests/) for complete verdicts.", listing.kind, what)

    def allowed(self, kind: str) -> bool:
        return self.stats.access.get(kind, False)

    def _can_list(self, listing: Listing) -> bool | None:
        """A LIST with limit=1 per namespace: a read, so the access check itself writes nothing. None: the kind
        is not served at all (an owner CRD that is not installed), which is no RBAC problem to warn about."""
        namespaces = self.namespaces if listing.namespaced and self.namespaces else [None]
        for ns in namespaces:
            path = listing.path.format(ns=f"namespaces/{ns}/" if ns else "")
            try:
                rest.request(self.api, "GET", path, query={"limit": "1"})
            except rest.ApiError as exc:
                if exc.status == 404 and listing.kind in OPTIONAL_KINDS:
                    return None
                if exc.status in (401, 403, 404):
                    return False
                raise
        return True

    async def check_crd(self) -> None:
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
