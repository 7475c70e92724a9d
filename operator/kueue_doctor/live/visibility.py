"""Kueue's visibility API (`visibility.kueue.x-k8s.io/v1beta2`, feature gate VisibilityOnDemand): the pending
Workloads of a ClusterQueue in Kueue's own order, read by `kueue-doctor explain` to cross-check the computed queue
positions (engine/queue_position.py).

One discovery GET, then one GET per ClusterQueue that has a pending Workload in the snapshot (`limit` = Kueue's
default, 1000; a Workload further back is not cross-checked), never one per Workload. That endpoint is
cluster-scoped; when RBAC forbids it (a tenant), one GET per LocalQueue with a pending Workload instead
(`namespaces/<ns>/localqueues/<lq>/pendingworkloads`, which Kueue's `view`-aggregated role grants in a namespace).
Only reads. Where the API is not served (404: the feature gate is off, or Kueue is older): nothing, silently.
Forbidden (403) or not answering (Kueue down: 503): one log line, then positions are computed only. The
operator does not read it: it keeps no queue position (see engine/queue_position.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..engine.queue_position import VISIBILITY_LIMIT
from ..kube.objects import m
from ..state import PENDING_SUMMARY, VISIBILITY_GROUP, Key
from . import rest

VERSION = "v1beta2"
BASE = f"/apis/{VISIBILITY_GROUP}/{VERSION}"
RESOURCE = "clusterqueues/pendingworkloads"
LQ_RESOURCE = "localqueues/pendingworkloads"
#: seconds per request: the aggregator waits on Kueue's server, and a hung Kueue must not stall explain for minutes
TIMEOUT = 10.0
log = logging.getLogger("kueue_doctor.visibility")


def _not_read(exc: rest.ApiError, what: str) -> None:
    if exc.status in (401, 403):
        log.warning("kueue-doctor: RBAC forbids reading Kueue's visibility API (%s, HTTP %s): queue positions are "
                    "computed only, not cross-checked with Kueue's. Grant get on %s %s, or %s in the namespace "
                    "(Kueue's ClusterRoles kueue-pending-workloads-cq-viewer-role, kueue-pending-workloads-lq-viewer-"
                    "role) to cross-check them.", what, exc.status, VISIBILITY_GROUP, RESOURCE, LQ_RESOURCE)
    else:
        log.warning("kueue-doctor: Kueue's visibility API did not answer (%s): queue positions are computed only, "
                    "not cross-checked with Kueue's. %s", what, exc)


def _read(api: Any, path: str, metadata: dict[str, str]) -> dict[str, Any]:
    body = rest.request(api, "GET", path, query={"limit": str(VISIBILITY_LIMIT)}, timeout=TIMEOUT)
    summary = dict(m(body))
    summary.update(apiVersion=f"{VISIBILITY_GROUP}/{VERSION}", kind=PENDING_SUMMARY,
                   metadata={**m(summary.get("metadata")), **metadata})
    return summary


def pending_workloads(api: Any, cluster_queues: Iterable[str], local_queues: Mapping[Key, str] | None = None
                      ) -> list[dict[str, Any]]:
    """Kueue's PendingWorkloadsSummary of each ClusterQueue (metadata.name set to it), or, where RBAC forbids that,
    of each of `local_queues` ((namespace, name) -> its ClusterQueue; metadata name and namespace set to the
    LocalQueue's); [] when not served or not readable."""
    wanted = sorted(set(cluster_queues))
    if not wanted:
        return []
    try:
        found = rest.request(api, "GET", BASE, timeout=TIMEOUT)
    except rest.ApiError as exc:
        if exc.status != 404:  # 404: not served (feature gate off, or a Kueue without it): nothing to say
            _not_read(exc, f"discovery of {BASE}")
        return []
    if not any(m(r).get("name") == RESOURCE for r in m(found).get("resources") or []):
        return []
    out: list[dict[str, Any]] = []
    for n, cq in enumerate(wanted):
        path = f"{BASE}/clusterqueues/{cq}/pendingworkloads"
        try:
            out.append(_read(api, path, {"name": cq}))
        except rest.ApiError as exc:
            if exc.status == 404:
                continue  # Kueue does not know this ClusterQueue (not reconciled yet, or being deleted)
            if exc.status == 403 and local_queues:
                return out + _through_local_queues(api, local_queues, set(wanted[n:]), exc)
            _not_read(exc, f"GET {path}")
            return out  # one line, not one per ClusterQueue
    return out


def _through_local_queues(api: Any, local_queues: Mapping[Key, str], cluster_queues: set[str],
                          forbidden: rest.ApiError) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for (ns, lq), cq in sorted(local_queues.items()):
        if cq not in cluster_queues:
            continue
        path = f"{BASE}/namespaces/{ns}/localqueues/{lq}/pendingworkloads"
        try:
            out.append(_read(api, path, {"name": lq, "namespace": ns}))
        except rest.ApiError as exc:
            if exc.status == 404:
                continue
            _not_read(exc if exc.status != 403 else forbidden, f"{RESOURCE} and GET {path}")
            return out
    return out
