"""Small helpers for end-to-end tests against a real API server (no mocks).

Everything works on plain dicts exactly as the API server returns them (like ``kubectl get -o
json``): list items get ``apiVersion``/``kind`` filled in, as kubectl does.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

_HACK = Path(__file__).resolve().parents[2] / "hack" / "control-plane"
if str(_HACK) not in sys.path:
    sys.path.insert(0, str(_HACK))

import localcluster as lc  # noqa: E402

FAKE_EXIT_CODE_ANNOTATION = lc.FAKE_EXIT_CODE_ANNOTATION
FAKE_HOLD_ANNOTATION = lc.FAKE_HOLD_ANNOTATION
FAKE_RUN_SECONDS_ANNOTATION = lc.FAKE_RUN_SECONDS_ANNOTATION
create_fake_node = lc.create_fake_node
request_json = lc.request_json

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/v1beta2"
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"

T = TypeVar("T")


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def key(self) -> str:
        """``Kind`` for core, batch and Kueue kinds; ``<group>/<Kind>`` for the others."""
        if self.api_version in ("v1", "batch/v1", KUEUE_API_VERSION):
            return self.kind
        return f"{self.api_version.split('/')[0]}/{self.kind}"

    def collection(self, namespace: str | None = None) -> str:
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def item(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection(namespace)}/{name}"


#: Kinds the helpers know, keyed by kind (``events.k8s.io/Event`` for the new Event API).
KINDS: dict[str, Kind] = {
    k.key: k
    for k in (
        Kind("v1", "Namespace", "namespaces", False),
        Kind("v1", "Node", "nodes", False),
        Kind("v1", "Pod", "pods", True),
        Kind("v1", "Event", "events", True),
        Kind("v1", "LimitRange", "limitranges", True),
        Kind("v1", "ConfigMap", "configmaps", True),
        Kind("v1", "Secret", "secrets", True),
        Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True),
        Kind("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", True),
        Kind("ray.io/v1", "RayJob", "rayjobs", True),
        Kind("ray.io/v1", "RayCluster", "rayclusters", True),
        Kind("ray.io/v1", "RayService", "rayservices", True),
        Kind("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True),
        Kind("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "trainingruntimes", True),
        Kind("workload.codeflare.dev/v1beta2", "AppWrapper", "appwrappers", True),
        Kind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", True),
        Kind("apps/v1", "Deployment", "deployments", True),
        Kind("apps/v1", "StatefulSet", "statefulsets", True),
        Kind("apps/v1", "ReplicaSet", "replicasets", True),
        Kind("events.k8s.io/v1", "Event", "events", True),
        Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
        Kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
        Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
        Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True),
        Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False),
        Kind(
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            False,
        ),
        Kind("batch/v1", "Job", "jobs", True),
        Kind(KUEUE_API_VERSION, "Workload", "workloads", True),
        Kind(KUEUE_API_VERSION, "LocalQueue", "localqueues", True),
        Kind(KUEUE_API_VERSION, "ClusterQueue", "clusterqueues", False),
        Kind(KUEUE_API_VERSION, "ResourceFlavor", "resourceflavors", False),
        Kind(KUEUE_API_VERSION, "Cohort", "cohorts", False),
        Kind(KUEUE_API_VERSION, "AdmissionCheck", "admissionchecks", False),
        Kind(KUEUE_API_VERSION, "WorkloadPriorityClass", "workloadpriorityclasses", False),
        Kind(KUEUE_API_VERSION, "Topology", "topologies", False),
        Kind(KUEUE_API_VERSION, "ProvisioningRequestConfig", "provisioningrequestconfigs", False),
        Kind(KUEUE_API_VERSION, "MultiKueueCluster", "multikueueclusters", False),
        Kind(KUEUE_API_VERSION, "MultiKueueConfig", "multikueueconfigs", False),
        Kind("autoscaling.x-k8s.io/v1", "ProvisioningRequest", "provisioningrequests", True),
    )
}


def kind_of(obj: Mapping[str, Any]) -> Kind:
    api_version, kind = obj["apiVersion"], obj["kind"]
    for k in KINDS.values():
        if k.api_version == api_version and k.kind == kind:
            return k
    raise KeyError(f"unknown kind {api_version}/{kind}; add it to tests/e2e/kube.py KINDS")


def unique_name(prefix: str) -> str:
    """``<prefix>-<6 hex>``, a valid DNS-1123 label (prefix is cut to fit 63 chars)."""
    clean = "".join(ch if ch.isalnum() else "-" for ch in prefix.lower()).strip("-")[:50] or "t"
    return f"{clean}-{uuid.uuid4().hex[:6]}"


# ---- basic CRUD ------------------------------------------------------------------------------


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status", None)


def create(api: Any, body: Mapping[str, Any]) -> dict[str, Any]:
    k = kind_of(body)
    ns = body.get("metadata", {}).get("namespace")
    out: dict[str, Any] = request_json(api, "POST", k.collection(ns), dict(body))
    return out


def get(api: Any, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    """The object (with apiVersion/kind) or None if it does not exist."""
    try:
        out: dict[str, Any] = request_json(api, "GET", KINDS[kind].item(name, namespace))
    except Exception as exc:
        if _status(exc) == 404:
            return None
        raise
    return out


def get_path(api: Any, path: str) -> dict[str, Any] | None:
    """GET an API path; None on 404 (kinds KINDS does not know: Reports, monitoring objects, ...)."""
    try:
        out: dict[str, Any] = request_json(api, "GET", path)
    except Exception as exc:
        if _status(exc) == 404:
            return None
        raise
    return out


def install_missing_crds(api: Any, crds: Iterable[Mapping[str, Any]]) -> list[str]:
    """Create the CRDs the cluster does not have yet; the names created (to delete afterwards)."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    created = []
    for crd in crds:
        name = crd["metadata"]["name"]
        if get_path(api, f"{base}/{name}") is None:
            request_json(api, "POST", base, dict(crd))
            created.append(name)
    return created


def patch(
    api: Any,
    kind: str,
    name: str,
    body: Mapping[str, Any],
    namespace: str | None = None,
    *,
    subresource: str | None = None,
) -> dict[str, Any]:
    path = KINDS[kind].item(name, namespace) + (f"/{subresource}" if subresource else "")
    out: dict[str, Any] = request_json(
        api, "PATCH", path, dict(body), content_type="application/merge-patch+json"
    )
    return out


def delete(
    api: Any, kind: str, name: str, namespace: str | None = None, *, propagation: str | None = "Background"
) -> bool:
    """Delete; False if it was already gone."""
    body = {"propagationPolicy": propagation} if propagation else None
    try:
        request_json(api, "DELETE", KINDS[kind].item(name, namespace), body)
    except Exception as exc:
        if _status(exc) == 404:
            return False
        raise
    return True


def list_objects(
    api: Any, kind: str, namespace: str | None = None, *, label_selector: str | None = None
) -> list[dict[str, Any]]:
    """Items of a list with ``apiVersion``/``kind`` filled in (as ``kubectl get -o json`` does)."""
    k = KINDS[kind]
    query = {"labelSelector": label_selector} if label_selector else None
    data = request_json(api, "GET", k.collection(namespace if k.namespaced else None), query=query)
    items: list[dict[str, Any]] = []
    for item in data.get("items", []):
        items.append({"apiVersion": k.api_version, "kind": k.kind, **item})
    return items


# ---- waiting ---------------------------------------------------------------------------------


def wait_for(
    check: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.25,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Poll ``check`` until it returns something truthy; return it. AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # e.g. a 404 while an object is being created
            last_exc = exc
        if time.monotonic() > deadline:
            msg = message() if callable(message) else message
            extra = f" (last error: {last_exc!r})" if last_exc else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {msg}{extra}")
        time.sleep(interval)


def wait_quiet(count: Callable[[], int], *, seconds: float = 4.0, timeout: float = 60.0,
               what: str = "the writes") -> int:
    """Wait until ``count`` (writes seen so far) has not moved for ``seconds``; return it. AssertionError when
    it is still moving after ``timeout``."""
    deadline = time.monotonic() + timeout
    last, since = count(), time.monotonic()
    while time.monotonic() - since < seconds:
        assert time.monotonic() < deadline, f"{what} kept coming for {timeout:.0f}s"
        time.sleep(0.5)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
    return last


def http_ok(url: str) -> bool:
    """True when GET url answers 200 (a process's health or readiness endpoint)."""
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as rsp:
            return bool(rsp.status == 200)
    except OSError:
        return False


def wait_serving(proc: Any, url: str, what: str, tail: Callable[[], str], stop: Callable[[], None],
                 timeout: float = 60.0) -> None:
    """Wait until a process we started answers 200 on `url`; fail fast if it exits; stop it on failure."""

    def serving() -> bool:
        assert proc.poll() is None, f"{what} exited ({proc.returncode}):\n{tail()}"
        return http_ok(url)

    try:
        wait_for(serving, timeout=timeout, message=lambda: f"{what} to answer {url}:\n{tail()}")
    except BaseException:
        stop()
        raise


def condition(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    if not obj:
        return None
    for cond in obj.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def condition_is(obj: Mapping[str, Any] | None, ctype: str, status: str = "True") -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == status


def workload_for(api: Any, namespace: str, owner_name: str, owner_kind: str = "Job") -> dict[str, Any] | None:
    """The Workload a job owns (by controller ownerReference), or None."""
    for wl in list_objects(api, "Workload", namespace):
        for ref in wl["metadata"].get("ownerReferences", []) or []:
            if ref.get("kind") == owner_kind and ref.get("name") == owner_name:
                return wl
    return None


def wait_for_workload(
    api: Any,
    namespace: str,
    job_name: str,
    predicate: Callable[[dict[str, Any]], object] = lambda wl: True,
    *,
    timeout: float = 60.0,
    what: str = "",
    kind: str = "Job",
) -> dict[str, Any]:
    """The Workload of the owner `kind`/`job_name` once `predicate` holds for it."""
    last: dict[str, Any] = {}

    def check() -> dict[str, Any] | None:
        wl = workload_for(api, namespace, job_name, kind)
        if wl is not None:
            last["wl"] = wl
            if predicate(wl):
                return wl
        return None

    def message() -> str:
        wl = last.get("wl")
        conds = wl.get("status", {}).get("conditions") if wl else None
        return f"Workload of {kind} {namespace}/{job_name} {what or 'to match'}; last conditions: {conds}"

    return wait_for(check, timeout=timeout, message=message)


def pods_of_job(api: Any, namespace: str, job_name: str) -> list[dict[str, Any]]:
    return list_objects(api, "Pod", namespace, label_selector=f"batch.kubernetes.io/job-name={job_name}")


def events_for(api: Any, namespace: str, name: str, *, kind: str | None = None) -> list[dict[str, Any]]:
    """core/v1 Events whose involvedObject has this name (and kind)."""
    out = []
    for ev in list_objects(api, "Event", namespace):
        inv = ev.get("involvedObject", {})
        if inv.get("name") == name and (kind is None or inv.get("kind") == kind):
            out.append(ev)
    return out


# Objects to create are built with tests/builders.py (``Job(...).queue(lq).manifest()``).


# ---- snapshot for the diagnosis engine -------------------------------------------------------

SNAPSHOT_CLUSTER_KINDS = (
    "ClusterQueue",
    "ResourceFlavor",
    "Cohort",
    "AdmissionCheck",
    "WorkloadPriorityClass",
    "Node",
)
SNAPSHOT_NAMESPACED_KINDS = ("Workload", "LocalQueue", "Job", "Pod", "Event", "events.k8s.io/Event")


def cluster_snapshot(
    api: Any,
    namespaces: Iterable[str] | None = None,
    *,
    cluster_kinds: Iterable[str] = SNAPSHOT_CLUSTER_KINDS,
    namespaced_kinds: Iterable[str] = SNAPSHOT_NAMESPACED_KINDS,
) -> list[dict[str, Any]]:
    """Every object the diagnosis engine reads, as plain dicts with apiVersion and kind.

    ``namespaces=None`` lists namespaced kinds across all namespaces. Cluster-scoped kinds
    (ClusterQueues, ResourceFlavors, Cohorts, AdmissionChecks, WorkloadPriorityClasses, Nodes)
    are always listed whole.
    """
    objects: list[dict[str, Any]] = []
    for kind in cluster_kinds:
        objects += list_objects(api, kind)
    ns_list: list[str | None] = list(namespaces) if namespaces is not None else [None]
    for ns in ns_list:
        for kind in namespaced_kinds:
            objects += list_objects(api, kind, ns)
    return objects


# ---- fixtures on disk ------------------------------------------------------------------------


def strip_for_fixture(obj: Mapping[str, Any], keep_managed_fields: Iterable[str] = ()) -> dict[str, Any]:
    """Drop managedFields (noise) unless the kind is in ``keep_managed_fields`` (``Kind`` or
    ``group/Kind`` keys); keep everything else exactly as the API server returned it."""
    out = dict(obj)
    keep = set(keep_managed_fields)
    if out.get("kind") in keep or f"{str(out.get('apiVersion', '')).split('/')[0]}/{out.get('kind')}" in keep:
        return out
    meta = dict(out.get("metadata", {}))
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def record_fixture(name: str, objects: Iterable[Mapping[str, Any]], *, note: str = "",
                   keep_managed_fields: Iterable[str] = ()) -> Path | None:
    """Write ``tests/e2e/fixtures/<name>.yaml`` when KUEUE_DOCTOR_RECORD_FIXTURES=1 (else no-op).

    ``keep_managed_fields``: kinds whose ``metadata.managedFields`` stay (who set a field, and when).
    """
    if os.environ.get("KUEUE_DOCTOR_RECORD_FIXTURES") != "1":
        return None
    FIXTURES_DIR.mkdir(parents=True, exist_ok=True)
    path = FIXTURES_DIR / f"{name}.yaml"
    header = f"# Recorded from a real cluster by tests/e2e ({note or name}); do not edit by hand.\n"
    docs = [strip_for_fixture(o, keep_managed_fields) for o in objects]
    path.write_text(header + yaml.safe_dump_all(docs, sort_keys=False, width=200))
    return path


# ---- per-test resources with ordered cleanup -------------------------------------------------

_CLEANUP_RANK = {
    "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": -2,
    "admissionregistration.k8s.io/ValidatingAdmissionPolicy": -1,
    "Job": 0,
    "jobset.x-k8s.io/JobSet": 0,
    "ray.io/RayJob": 0,
    "ray.io/RayCluster": 0,
    "ray.io/RayService": 0,
    "trainer.kubeflow.org/TrainJob": 0,
    "trainer.kubeflow.org/TrainingRuntime": 1,
    "workload.codeflare.dev/AppWrapper": 0,
    "leaderworkerset.x-k8s.io/LeaderWorkerSet": 0,
    "apps/Deployment": 0,
    "apps/StatefulSet": 0,
    "Pod": 0,
    "Workload": 1,
    "LocalQueue": 2,
    "ClusterQueue": 3,
    "Cohort": 4,
    "ResourceFlavor": 5,
    "AdmissionCheck": 5,
    "WorkloadPriorityClass": 5,
    "scheduling.k8s.io/PriorityClass": 5,
    "Node": 6,
    "Namespace": 7,
}


class Resources:
    """Creates objects for one test and deletes them in Kueue's order at the end.

    Order: Jobs/Pods -> (wait) Workloads -> LocalQueues -> ClusterQueues (wait, Kueue removes
    its finalizer) -> Cohorts -> ResourceFlavors (wait) -> Nodes -> Namespaces. Kueue must still
    be running during cleanup.
    """

    def __init__(self, api: Any) -> None:
        self.api = api
        self.created: list[tuple[str, str, str | None]] = []

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        obj = create(self.api, body)
        self.created.append((kind_of(body).key, obj["metadata"]["name"], obj["metadata"].get("namespace")))
        return obj

    def node(self, name: str, **kwargs: Any) -> dict[str, Any]:
        obj = create_fake_node(self.api, name, **kwargs)
        self.created.append(("Node", name, None))
        return obj

    def _wait_gone(self, kind: str, name: str, namespace: str | None, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if get(self.api, kind, name, namespace) is None:
                return
            time.sleep(0.25)
        obj = get(self.api, kind, name, namespace) or {}
        warnings.warn(
            f"cleanup: {kind} {namespace + '/' if namespace else ''}{name} still present "
            f"after {timeout:.0f}s "
            f"(finalizers {obj.get('metadata', {}).get('finalizers')})",
            stacklevel=2,
        )

    def cleanup(self, timeout: float = 60.0) -> None:
        items = sorted(set(self.created), key=lambda it: _CLEANUP_RANK.get(it[0], 5))
        namespaces = {ns for _, _, ns in items if ns} | {n for k, n, _ in items if k == "Namespace"}
        # 0. admission policies a test used to freeze objects; 1. jobs (and their pods through the
        # garbage collector), then the workloads go
        for kind, name, ns in items:
            if _CLEANUP_RANK.get(kind, 5) <= 0:
                delete(self.api, kind, name, ns)
        for ns in namespaces:
            for wl in list_objects(self.api, "Workload", ns):
                delete(self.api, "Workload", wl["metadata"]["name"], ns)
            for wl in list_objects(self.api, "Workload", ns):
                self._wait_gone("Workload", wl["metadata"]["name"], ns, timeout)
        # 2. queues, cohorts, flavors, nodes: wait for each Kueue finalizer
        for kind, name, ns in items:
            rank = _CLEANUP_RANK.get(kind, 5)
            if rank <= 1 or kind == "Namespace":
                continue
            if delete(self.api, kind, name, ns) and kind in ("ClusterQueue", "ResourceFlavor", "LocalQueue"):
                self._wait_gone(kind, name, ns, timeout)
        # 3. namespaces last (not awaited: the namespace controller finishes on its own)
        for kind, name, ns in items:
            if kind == "Namespace":
                delete(self.api, kind, name, ns)
        self.created.clear()


# ---- freezing a Job's status (hold a moment that is otherwise too short to observe) -----------


def denying_policy(resources: Resources, prefix: str, spec: dict[str, Any]) -> str:
    """A ValidatingAdmissionPolicy with `spec` and its Deny binding, both named `prefix`-<unique>, both deleted by
    ``cleanup``; its name."""
    name = unique_name(prefix)
    resources.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                      "metadata": {"name": name}, "spec": spec})
    resources.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                      "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})
    return name


def freeze_job_status(resources: Resources, namespace: str, job_name: str) -> Callable[[], None]:
    """Deny every write to ``jobs/status`` of one Job (a ValidatingAdmissionPolicy) until unfrozen.

    Kueue releases an evicted batch/v1 Job's quota as soon as ``status.active`` drops to 0, which the
    Job controller writes within a second of suspending it. With the status frozen the Job stays
    "active", so the preemptor stays in its "Pending the preemption" state for as long as a test
    needs. Returns ``unfreeze()``: deletes the policy and pokes the Job so its controller syncs at
    once (instead of after its error back-off). Both objects are also deleted by ``cleanup``.
    """
    api = resources.api
    name = denying_policy(resources, f"freeze-{job_name}", {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceRules": [
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["jobs/status"]}
            ],
        },
        "matchConditions": [{"name": "this-job", "expression": f"object.metadata.name == '{job_name}'"}],
        "validations": [{"expression": "false", "message": "kueue-doctor e2e: Job status frozen"}],
    })
    status_path = KINDS["Job"].item(job_name, namespace) + "/status"

    def frozen() -> bool:
        try:
            request_json(
                api,
                "PATCH",
                status_path,
                {"status": {}},
                content_type="application/merge-patch+json",
                query={"dryRun": "All"},
            )
        except Exception as exc:
            return "Job status frozen" in str(getattr(exc, "body", exc))
        return False

    wait_for(frozen, timeout=20, message=f"the status of Job {namespace}/{job_name} to be frozen")

    def unfreeze() -> None:
        delete(api, "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding", name)
        delete(api, "admissionregistration.k8s.io/ValidatingAdmissionPolicy", name)
        wait_for(lambda: not frozen(), timeout=20, message=f"the status of Job {namespace}/{job_name} to thaw")
        patch(api, "Job", job_name, {"metadata": {"annotations": {"kueue-doctor.local/poke": name}}}, namespace)

    return unfreeze
