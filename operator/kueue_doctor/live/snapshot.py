"""One LIST of everything the engine reads, for `kueue-doctor explain` without -f.

Each kind is listed on its own: a kind that is forbidden (RBAC) or not served is left out and not
marked complete, so the engine never concludes that an object is missing when it could not look.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..state import ClusterState
from . import rest

KUEUE = "kueue.x-k8s.io"
JOB_SELECTOR = "kueue.x-k8s.io/queue-name"  # Jobs Kueue manages (the webhook sets it, also for a default queue)
POD_SELECTOR = "kueue.x-k8s.io/podset"  # Kueue labels every Pod it starts
EVENT_SELECTOR = "type=Warning"  # what explains a stuck Pod or Job: FailedCreate, FailedScheduling, FailedMount


class LiveError(Exception):
    """The cluster cannot be read at all (no kubeconfig, unreachable, unauthorised)."""


@dataclass(frozen=True)
class Listing:
    kind: str
    path: str  # collection path without namespace part, e.g. /apis/batch/v1/{ns}jobs
    namespaced: bool
    api_version: str
    selectors: tuple[dict[str, str], ...] = field(default=({},))


def listings(kueue_version: str) -> list[Listing]:
    kv = f"/apis/{KUEUE}/{kueue_version}"
    av = f"{KUEUE}/{kueue_version}"
    return [
        Listing("Workload", kv + "/{ns}workloads", True, av),
        Listing("LocalQueue", kv + "/{ns}localqueues", True, av),
        Listing("ClusterQueue", kv + "/clusterqueues", False, av),
        Listing("ResourceFlavor", kv + "/resourceflavors", False, av),
        Listing("Cohort", kv + "/cohorts", False, av),
        Listing("AdmissionCheck", kv + "/admissionchecks", False, av),
        Listing("Topology", kv + "/topologies", False, av),
        # the same selectors as the operator's watches, so a LIST and a WATCH always agree on membership
        Listing("Job", "/apis/batch/v1/{ns}jobs", True, "batch/v1", ({"labelSelector": JOB_SELECTOR},)),
        Listing("Pod", "/api/v1/{ns}pods", True, "v1", ({"labelSelector": POD_SELECTOR},)),
        Listing("Event", "/api/v1/{ns}events", True, "v1", ({"fieldSelector": EVENT_SELECTOR},)),
        Listing("Namespace", "/api/v1/namespaces", False, "v1"),
        Listing("Node", "/api/v1/nodes", False, "v1"),
    ]


def get_json(api: Any, path: str, query: Mapping[str, str] | None = None, metadata_only: bool = False
             ) -> tuple[int, Any]:
    """(status, body); status 0 when the cluster cannot be reached."""
    try:
        return 200, rest.request(api, "GET", path, query=query,
                                 accept=rest.METADATA_ONLY if metadata_only else "application/json")
    except rest.ApiError as exc:
        return exc.status, None


def list_all(api: Any, listing: Listing, namespace: str | None, metadata_only: bool = False,
             transform: Any = None) -> list[dict[str, Any]] | None:
    """Every object of one kind (paged, each page passed through `transform`); None when it cannot be read."""
    ns_part = f"namespaces/{namespace}/" if namespace and listing.namespaced else ""
    path = listing.path.format(ns=ns_part)
    items: list[dict[str, Any]] = []
    for selector in listing.selectors:
        cont = ""
        while True:
            query = dict(selector, limit="500")
            if cont:
                query["continue"] = cont
            code, body = get_json(api, path, query, metadata_only)
            if code != 200 or not isinstance(body, dict):
                if code in (401,):
                    raise LiveError(f"the cluster refused our credentials (HTTP 401) listing {path}")
                if code == 0:
                    raise LiveError(f"cannot reach the cluster listing {path}: check the kubeconfig's server")
                return None
            for item in body.get("items") or []:
                item["kind"] = listing.kind
                item["apiVersion"] = listing.api_version
                items.append(transform(item) if transform is not None else item)
            cont = (body.get("metadata") or {}).get("continue") or ""
            if not cont:
                break
    return items


def snapshot(namespace: str | None = None, kubeconfig: str | None = None, context: str | None = None,
             api: Any = None) -> ClusterState:
    if api is None:
        try:
            api = rest.load_client(kubeconfig, context)
        except rest.ApiError as exc:
            raise LiveError(str(exc)) from exc
    code, _ = get_json(api, f"/apis/{KUEUE}/v1beta2")
    if code == 0:
        raise LiveError("cannot reach the cluster: check the kubeconfig's server and your network")
    version = "v1beta2" if code == 200 else "v1beta1"
    if version == "v1beta1" and get_json(api, f"/apis/{KUEUE}/v1beta1")[0] != 200:
        raise LiveError(f"Kueue's API ({KUEUE}) is not served by this cluster: is Kueue installed?")
    objects: list[dict[str, Any]] = []
    complete: set[str] = set()
    for listing in listings(version):
        items = list_all(api, listing, namespace)
        if items is None:
            continue
        objects.extend(items)
        complete.add(listing.kind)
    return ClusterState.from_objects(objects, complete_kinds=complete)
