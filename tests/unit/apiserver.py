"""A canned apiserver behind the two ApiClient methods `live/rest.py` calls, for the operator's unit tests.

It answers only what a test told it, with the bodies the apiserver sends for them: List objects (paged
with `limit`/`continue`, PartialObjectMetadataList for a metadata-only Accept), the objects themselves,
and Status objects for errors. Field selectors on name and namespace and label selectors made of equality,
existence and `!key` terms are applied; other selectors are recorded, not applied: what the apiserver selects is
checked against a real one in tests/e2e. Every request is recorded, so a test can say what was written.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import yaml

METADATA_ONLY = "as=PartialObjectMetadataList"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    accept: str
    content_type: str | None
    body: Any


class Response:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self._data = json.dumps(body).encode() if body is not None else b""

    def read(self) -> bytes:
        return self._data


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": code}


def not_found(resource: str, group: str, name: str) -> dict[str, Any]:
    """The 404 for a named object, e.g. not_found("workloads", "kueue.x-k8s.io", "job-x")."""
    full = f"{resource}.{group}" if group else resource
    return status(404, "NotFound", f'{full} "{name}" not found', {"name": name, "group": group, "kind": resource})


def forbidden_list(resource: str, group: str, namespace: str | None = None,
                   user: str = "system:serviceaccount:kueue-doctor:kueue-doctor") -> dict[str, Any]:
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return status(403, "Forbidden", f'{resource} is forbidden: User "{user}" cannot list resource "{resource}" in '
                  f'API group "{group}" {scope}', {"kind": resource, **({"group": group} if group else {})})


class FakeApiServer:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._answers: dict[tuple[str, str], tuple[int, Any]] = {}
        self._lists: dict[str, tuple[str, str, list[dict[str, Any]]]] = {}
        self._rv = 1000
        self.namespaced_lists = True  # a namespace's path of a served collection answers its part (as an apiserver)

    # ----- what the test says the cluster holds -----
    def answer(self, method: str, path: str, body: Any, code: int = 200) -> None:
        self._answers[method, path] = (code, body)

    def forget(self, method: str, path: str) -> None:
        """Back to the default answer (an apply succeeds, an unknown path is 404)."""
        self._answers.pop((method, path), None)

    def serve_list(self, path: str, api_version: str, kind: str, items: list[dict[str, Any]]) -> None:
        """A collection of `items` (whole objects); listed as the apiserver lists them."""
        self._lists[path] = (api_version, kind, items)

    def get(self, path: str, obj: dict[str, Any]) -> None:
        self.answer("GET", path, obj)

    # ----- what the operator did -----
    @property
    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method != "GET"]

    def applies(self) -> list[Request]:
        return [r for r in self.requests if r.method == "PATCH" and r.content_type == "application/apply-patch+yaml"]

    # ----- kubernetes.client.ApiClient, as far as live/rest.py uses it -----
    def param_serialize(self, method: str, resource_path: str, query_params: list[tuple[str, str]] | None = None,
                        header_params: dict[str, str] | None = None, body: Any = None, **_: Any
                        ) -> tuple[str, str, dict[str, str], Any, list[Any]]:
        url = resource_path + (f"?{urlencode(query_params)}" if query_params else "")
        return method, url, dict(header_params or {}), body, []

    def call_api(self, method: str, url: str, header_params: dict[str, str] | None = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> Response:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        headers = header_params or {}
        if isinstance(body, (bytes, str)):  # sent serialized already (rest.apply of the publisher's JSON)
            body = json.loads(body)
        req = Request(method, parts.path, query, headers.get("Accept", ""), headers.get("Content-Type"),
                      copy.deepcopy(body))
        self.requests.append(req)
        if (method, parts.path) in self._answers:
            code, answer = self._answers[method, parts.path]
            return Response(code, copy.deepcopy(answer))
        if method == "GET" and parts.path in self._lists:
            return Response(200, self._list_body(parts.path, query, METADATA_ONLY in req.accept))
        if method == "GET" and self.namespaced_lists and (served := self._namespaced(parts.path)) is not None:
            return Response(200, self._list_body(served[0], query, METADATA_ONLY in req.accept, served[1]))
        if method == "PATCH" and req.content_type == "application/apply-patch+yaml":
            self._rv += 1
            applied = copy.deepcopy(body)
            applied.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
            return Response(200, applied)
        if method == "DELETE":
            return Response(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        return Response(404, status(404, "NotFound", "the server could not find the requested resource"))

    def _namespaced(self, path: str) -> tuple[str, dict[str, str]] | None:
        """A namespace's collection of a served cluster-wide one: (that path, the namespace as a field selector)."""
        head, sep, rest = path.partition("/namespaces/")
        ns, _, plural = rest.partition("/")
        if not sep or not ns or "/" in plural or f"{head}/{plural}" not in self._lists:
            return None
        return f"{head}/{plural}", {"metadata.namespace": ns}

    def _list_body(self, path: str, query: dict[str, str], metadata_only: bool,
                   scope: dict[str, str] | None = None) -> dict[str, Any]:
        """The list as the apiserver answers it: paged, `metadata.name`/`metadata.namespace` field selectors (and a
        namespace's path) applied; other selectors are not evaluated (the fixtures hold only matching objects)."""
        api_version, kind, items = self._lists[path]
        wanted = dict(scope or {})
        for term in (query.get("fieldSelector") or "").split(","):
            field_name, eq, value = term.partition("=")
            if eq and field_name in ("metadata.name", "metadata.namespace") and not value.startswith("="):
                wanted[field_name] = value
        if wanted:
            items = [o for o in items if all((o["metadata"].get(f.split(".")[1]) or "") == v for f, v in wanted.items())]
        if query.get("labelSelector"):
            items = [o for o in items if _labels_match(query["labelSelector"], o["metadata"].get("labels") or {})]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items)
        page = items[start:start + limit]
        more = start + limit < len(items)
        meta = {"resourceVersion": str(self._rv), **({"continue": str(start + limit)} if more else {})}
        if "." not in api_version.split("/")[0]:  # built-in kinds (v1, batch/v1): items carry no apiVersion, kind
            page = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in page]
        if metadata_only:
            return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                    "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": copy.deepcopy(o["metadata"])} for o in page]}
        return {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta, "items": copy.deepcopy(page)}


def _labels_match(selector: str, labels: dict[str, str]) -> bool:
    """The apiserver's label selector, as far as the operator writes them: `key`, `!key`, `key=value`,
    `key!=value`, comma-separated (all must hold)."""
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/admissiondiagnoses.kueue-doctor.dev"
# kind -> (group, version, plural) of what the operator lists cluster-wide
COLLECTIONS = {
    "Workload": ("kueue.x-k8s.io", "v1beta2", "workloads"),
    "LocalQueue": ("kueue.x-k8s.io", "v1beta2", "localqueues"),
    "ClusterQueue": ("kueue.x-k8s.io", "v1beta2", "clusterqueues"),
    "ResourceFlavor": ("kueue.x-k8s.io", "v1beta2", "resourceflavors"),
    "Cohort": ("kueue.x-k8s.io", "v1beta2", "cohorts"),
    "AdmissionCheck": ("kueue.x-k8s.io", "v1beta2", "admissionchecks"),
    "Topology": ("kueue.x-k8s.io", "v1beta2", "topologies"),
    "Job": ("batch", "v1", "jobs"),
    "Pod": ("", "v1", "pods"),
    "Event": ("", "v1", "events"),
    "Namespace": ("", "v1", "namespaces"),
    "WorkloadPriorityClass": ("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses"),
    "MultiKueueCluster": ("kueue.x-k8s.io", "v1beta2", "multikueueclusters"),
    "MultiKueueConfig": ("kueue.x-k8s.io", "v1beta2", "multikueueconfigs"),
    "ProvisioningRequestConfig": ("kueue.x-k8s.io", "v1beta2", "provisioningrequestconfigs"),
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "ConfigMap": ("", "v1", "configmaps"),
    "Deployment": ("apps", "v1", "deployments"),
    "AdmissionDiagnosis": ("kueue-doctor.dev", "v1alpha1", "admissiondiagnoses"),
}


def collection_path(kind: str, namespace: str | None = None) -> str:
    group, version, plural = COLLECTIONS[kind]
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


def installed_crd() -> dict[str, Any]:
    """The AdmissionDiagnosis CRD as `kubectl apply -f crds/` installs it."""
    crd: dict[str, Any] = yaml.safe_load((ROOT / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml").read_text())
    crd["metadata"].update(uid="crd-0001", resourceVersion="12", creationTimestamp="2026-11-30T08:00:00Z")
    return crd


def cluster(objects: list[dict[str, Any]], forbidden: tuple[str, ...] = ()) -> FakeApiServer:
    """Kueue v1beta2 served, the CRD installed, every kind the operator lists holding `objects`, and
    `forbidden` kinds answering 403 (RBAC without them)."""
    api = FakeApiServer()
    api.answer("GET", "/apis/kueue.x-k8s.io/v1beta2", {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "kueue.x-k8s.io/v1beta2",
        "resources": [{"name": plural, "singularName": plural[:-1], "namespaced": plural in ("workloads",
                       "localqueues"), "kind": kind, "verbs": ["get", "list", "watch"]}
                      for kind, (group, _v, plural) in COLLECTIONS.items() if group == "kueue.x-k8s.io"]})
    api.get(CRD_PATH, installed_crd())
    for kind, (group, version, plural) in COLLECTIONS.items():
        path = collection_path(kind)
        if kind in forbidden:
            api.answer("GET", path, forbidden_list(plural, group), 403)
        else:
            api.serve_list(path, f"{group}/{version}" if group else version, kind,
                           [o for o in objects if o["kind"] == kind])
    for obj in objects:
        api.get(object_path(obj), obj)
    return api


def object_path(obj: dict[str, Any]) -> str:
    return f"{collection_path(obj['kind'], obj['metadata'].get('namespace'))}/{obj['metadata']['name']}"
