"""Kueue's own installation, read by name: its Configuration (ConfigMap kueue-manager-config) and its
controller manager's Deployment. They say why an owner has no Workload (integration off, namespace not
managed, Kueue down). Two GETs by name, so RBAC can grant exactly these two objects (`resourceNames`).

Neighbours: snapshot.py reads them for `explain`; runtime.py at start-up and orphans.py on every resync
(Kueue reads its Configuration only when it starts, so a resync is soon enough).
"""

from __future__ import annotations

import logging
from typing import Any

from ..kube.kueue_config import CONFIG_MAP
from . import rest

log = logging.getLogger("kueue_doctor.runtime")
DEPLOYMENT = "kueue-controller-manager"


def read(api: Any, kueue_namespace: str) -> tuple[list[dict[str, Any]], set[str]]:
    """(objects found, kinds looked for and readable): a 404 still counts as read (it is not there), a 403 not."""
    found: list[dict[str, Any]] = []
    complete: set[str] = set()
    for kind, api_version, path in (
            ("ConfigMap", "v1", f"/api/v1/namespaces/{kueue_namespace}/configmaps/{CONFIG_MAP}"),
            ("Deployment", "apps/v1", f"/apis/apps/v1/namespaces/{kueue_namespace}/deployments/{DEPLOYMENT}")):
        try:
            obj = rest.request(api, "GET", path)
        except rest.ApiError as exc:
            if exc.status == 404:
                if kind == "ConfigMap":
                    complete.add(kind)
                continue
            if exc.status == 0:
                raise
            log.debug("Cannot read %s %s/%s (HTTP %s); NoWorkload verdicts say what could not be read.",
                      kind, kueue_namespace, path.rsplit("/", 1)[-1], exc.status)
            continue
        if isinstance(obj, dict):
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", api_version)
            found.append(obj)
            complete.add(kind)
    return found, complete
