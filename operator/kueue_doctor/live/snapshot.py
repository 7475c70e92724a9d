"""LISTs: one paged LIST of everything the engine reads, for `kueue-doctor explain` without -f, and the
one paging loop (`pages`) every LIST of the package goes through (the operator's start-up list and its
resync in runtime.py and orphans.py, the AdmissionDiagnosis list in orphans.py).

`snapshot` also asks Kueue's visibility API for the pending Workloads of each ClusterQueue that has one
(visibility.py), for the queue positions' cross-check.

Each kind is listed on its own: a kind that is forbidden (RBAC) or not served is left out and not
marked complete, so the engine never concludes that an object is missing when it could not look.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..engine.queue_position import pending_cluster_queues, pending_local_queues
from ..kube.kueue_config import DEFAULT_NAMESPACE
from ..kube.kueue_names import POD_GROUP_KEY, PODSET_LABEL
from ..kube.objects import KUEUE_GROUP, s, spec
from ..kube.shards import Shard
from ..state import ClusterState
from . import kueue_install, rest
from .visibility import pending_workloads

KUEUE = KUEUE_GROUP
JOB_SELECTOR = "kueue.x-k8s.io/queue-name"  # Jobs Kueue manages (the webhook sets it, also for a default queue)
POD_SELECTOR = PODSET_LABEL  # Kueue labels every Pod it starts
# Pods of a plain Pod group not admitted yet: without the podset label, and with no Workload at all while the
# group is incomplete. Not watched (a watch takes one selector, and these are few): polled (orphans.poll_pod_groups).
GATED_GROUP_SELECTOR = f"{POD_GROUP_KEY},!{PODSET_LABEL}"
# Pods of the groups Kueue's LeaderWorkerSet and StatefulSet integrations make, not admitted yet: since v0.18
# (WorkloadIdentifierAnnotations) Kueue writes their group's name as an annotation, which GATED_GROUP_SELECTOR
# cannot select. Every StatefulSet Pod (a LeaderWorkerSet's too) has the pod-name label, and Kueue labels the Pods
# it manages; a group whose Workload Kueue never made (kueue#8769) has no other way in. The operator polls them
# (orphans.poll_pod_groups); `explain` lists them with the other Pods (snapshot).
GATED_SERVING_SELECTOR = f"statefulset.kubernetes.io/pod-name,kueue.x-k8s.io/managed,!{POD_GROUP_KEY},!{PODSET_LABEL}"
EVENT_SELECTOR = "type=Warning"  # what explains a stuck Pod or Job: FailedCreate, FailedScheduling, FailedMount


# Owners with a Workload of their own, besides batch Jobs: listed and watched when their CRD is installed.
OWNER_RESOURCES: tuple[tuple[str, str, str, str], ...] = (
    ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"),
    ("ray.io", "v1", "rayjobs", "RayJob"),
    ("ray.io", "v1", "rayclusters", "RayCluster"),
    ("ray.io", "v1", "rayservices", "RayService"),
    ("kubeflow.org", "v2beta1", "mpijobs", "MPIJob"),
    ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    ("kubeflow.org", "v1", "tfjobs", "TFJob"),
    ("kubeflow.org", "v1", "xgboostjobs", "XGBoostJob"),
    ("kubeflow.org", "v1", "paddlejobs", "PaddleJob"),
    ("kubeflow.org", "v1", "jaxjobs", "JAXJob"),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob"),
    ("workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper"),
    ("sparkoperator.k8s.io", "v1beta2", "sparkapplications", "SparkApplication"),
    # Kueue's pod-based integrations: the owner says what its Pods' Workloads cannot (replicas, surge, a rollout)
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet"),
    ("apps", "v1", "statefulsets", "StatefulSet"),
    ("apps", "v1", "deployments", "Deployment"),
)



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
        Listing("WorkloadPriorityClass", kv + "/workloadpriorityclasses", False, av),
        Listing("MultiKueueCluster", kv + "/multikueueclusters", False, av),
        Listing("MultiKueueConfig", kv + "/multikueueconfigs", False, av),
        Listing("ProvisioningRequestConfig", kv + "/provisioningrequestconfigs", False, av),
        # the same selectors as the operator's watches, so a LIST and a WATCH always agree on membership
        Listing("Job", "/apis/batch/v1/{ns}jobs", True, "batch/v1", ({"labelSelector": JOB_SELECTOR},)),
        *(Listing(kind, f"/apis/{group}/{version}/{{ns}}{plural}", True, f"{group}/{version}",
                  ({"labelSelector": JOB_SELECTOR},)) for group, version, plural, kind in OWNER_RESOURCES),
        Listing("Pod", "/api/v1/{ns}pods", True, "v1", ({"labelSelector": POD_SELECTOR},
                                                         {"labelSelector": GATED_GROUP_SELECTOR})),
        Listing("Event", "/api/v1/{ns}events", True, "v1", ({"fieldSelector": EVENT_SELECTOR},)),
        Listing("Namespace", "/api/v1/namespaces", False, "v1"),
        Listing("Node", "/api/v1/nodes", False, "v1"),
    ]


def narrowed(listing: Listing, shard: Shard) -> Listing:
    """`listing` with the shard's KEP-5866 shardSelector, for the kinds a shard keeps only its own namespaces' of
    (an apiserver without the alpha gate ignores it; `Shard.keeps` filters what it sends all the same)."""
    selector = shard.selector
    if selector is None or not listing.namespaced or not shard.narrows(listing.kind):
        return listing
    return replace(listing, selectors=tuple({**q, "shardSelector": selector} for q in listing.selectors))


def get_json(api: Any, path: str, query: Mapping[str, str] | None = None, metadata_only: bool = False
             ) -> tuple[int, Any]:
    """(status, body); status 0 when the cluster cannot be reached."""
    try:
        return 200, rest.request(api, "GET", path, query=query,
                                 accept=rest.METADATA_ONLY if metadata_only else "application/json")
    except rest.ApiError as exc:
        return exc.status, None


PAGE_SIZE = "500"


def pages(api: Any, path: str, query: Mapping[str, str] | None = None, metadata_only: bool = False
          ) -> Iterator[list[dict[str, Any]]]:
    """The items of one LIST, page by page (`limit` and `continue`); rest.ApiError when a page fails."""
    cont = ""
    while True:
        params = dict(query or {}, limit=PAGE_SIZE)
        if cont:
            params["continue"] = cont
        body = rest.request(api, "GET", path, query=params,
                            accept=rest.METADATA_ONLY if metadata_only else "application/json")
        if not isinstance(body, dict):
            raise rest.ApiError(502, "GET", path, "the response to a LIST is not a JSON object")
        yield list(body.get("items") or [])
        cont = (body.get("metadata") or {}).get("continue") or ""
        if not cont:
            return


class Unreadable(Exception):
    """The kind cannot be read (forbidden, not served)."""


def list_pages(api: Any, listing: Listing, namespaces: Sequence[str] = (), metadata_only: bool = False,
               transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
               keep: Callable[[dict[str, Any]], bool] | None = None) -> Iterator[list[dict[str, Any]]]:
    """Every object of one kind in `namespaces` (all when empty) that `keep` accepts (a namespace shard's, checked
    before `transform`: another shard's objects are never held), page by page, each passed through `transform`:
    a caller that stores each page as it comes never holds 50,000 Pods decoded at once.

    Unreadable when the kind cannot be read; LiveError when the cluster cannot be read at all.
    """
    scopes: Sequence[str | None] = namespaces if namespaces and listing.namespaced else [None]
    for ns in scopes:
        path = listing.path.format(ns=f"namespaces/{ns}/" if ns else "")
        for selector in listing.selectors:
            try:
                for page in pages(api, path, selector, metadata_only):
                    out = []
                    for item in page:
                        item["kind"] = listing.kind
                        item["apiVersion"] = listing.api_version
                        if keep is not None and not keep(item):
                            continue
                        out.append(transform(item) if transform is not None else item)
                    del page
                    yield out
            except rest.ApiError as exc:
                if exc.status == 401:
                    raise LiveError(f"the cluster refused our credentials (HTTP 401) listing {path}") from exc
                if exc.status == 0:
                    raise LiveError(f"cannot reach the cluster listing {path}: check the kubeconfig's server"
                                    ) from exc
                raise Unreadable(path) from exc


def list_all(api: Any, listing: Listing, namespaces: Sequence[str] = (), metadata_only: bool = False,
             transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
             keep: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]] | None:
    """`list_pages` in one list; None when the kind cannot be read (forbidden, not served)."""
    try:
        return [item for page in list_pages(api, listing, namespaces, metadata_only, transform, keep)
                for item in page]
    except Unreadable:
        return None


def named_owner(kueue_listings: Sequence[Listing], kind: str, name: str) -> Listing | None:
    """The LIST of one owner the user named (kind/name), whatever its labels: the owners' listings select on the
    queue-name label, and an owner without it is the one whose "why does Kueue ignore it" the user asks."""
    for listing in kueue_listings:  # a LeaderWorkerSet's worker StatefulSets too: they carry no queue-name label
        if listing.kind == kind and listing.selectors == ({"labelSelector": JOB_SELECTOR},):
            return replace(listing, selectors=({"fieldSelector": f"metadata.name={name}"},))
    return None


def namespaces_and_workloads(kubeconfig: str | None = None, context: str | None = None) -> list[dict[str, Any]]:
    """Every Namespace and Workload as metadata only (what `shard-plan` weighs), in pages."""
    try:
        api = rest.load_client(kubeconfig, context)
    except rest.ApiError as exc:
        raise LiveError(str(exc)) from exc
    version = "v1beta2" if get_json(api, f"/apis/{KUEUE}/v1beta2")[0] == 200 else "v1beta1"
    out: list[dict[str, Any]] = []
    for listing in listings(version):
        if listing.kind in ("Namespace", "Workload"):
            out.extend(list_all(api, listing, metadata_only=True) or [])
    return out


def snapshot(namespace: str | None = None, kubeconfig: str | None = None, context: str | None = None,
             api: Any = None, kueue_namespace: str = DEFAULT_NAMESPACE,
             named: tuple[str, str] | None = None, visibility: bool = True) -> ClusterState:
    """Everything the engine reads; ``named`` = (owner kind, name) the user asked about, read even unlabelled;
    ``visibility``: Kueue's pending Workloads per ClusterQueue too, for the queue positions' cross-check."""
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
    # the gated Pods of LeaderWorkerSet and StatefulSet groups too (the operator polls them): `explain pod/NAME` or
    # `sts/NAME` of a group still waiting leads to its Workload through them
    kinds = [replace(lst, selectors=(*lst.selectors, {"labelSelector": GATED_SERVING_SELECTOR})) if lst.kind == "Pod"
             else lst for lst in listings(version)]
    for listing in kinds:
        items = list_all(api, listing, [namespace] if namespace else [])
        if items is None:
            continue
        objects.extend(items)
        complete.add(listing.kind)
    one = named_owner(kinds, *named) if named else None
    if one is not None:
        objects.extend(list_all(api, one, [namespace] if namespace else []) or [])
    try:
        install, readable = kueue_install.read(api, kueue_namespace)
    except rest.ApiError as exc:
        raise LiveError(f"cannot reach the cluster reading Kueue's installation: {exc}") from exc
    objects.extend(install)
    state = ClusterState.from_objects(objects, complete_kinds=complete | readable)
    if visibility:
        local_queues = {lq: s(spec(state.local_queues[lq]).get("clusterQueue")) or ""
                        for lq in pending_local_queues(state)}
        for summary in pending_workloads(api, pending_cluster_queues(state), local_queues):
            state.upsert(summary)
    return state
