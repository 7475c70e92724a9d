"""Notifications through report CRs: one OpenReports `Report` per namespace mirroring the verdicts that
are not Running or Finished (`kueue-doctor run --reports`, chart value `reports.enabled`; off by default).

Policy Reporter (Kyverno's) and other OpenReports consumers then send them to Slack, Teams, webhooks, Jira
or Alertmanager (docs/notifications.md). One result per Workload: `policy` the reason, `rule` the cause,
`category` the stage, `message` the verdict's sentence, `severity` from who must act and the reason
(`severity_of`), `result` fail when someone must act and warn when the Workload only waits, the
AdmissionDiagnosis as the resource. The Report is named `kueue-doctor`, labelled managed-by kueue-doctor,
owned by the AdmissionDiagnosis CRD (cluster-scoped, so the garbage collector removes every Report with
the operator's CRD; never a Kueue object). It is written by server-side apply only when its content
changes, and deleted when the namespace has nothing left to report. Fed by the loop after each pass
with the diagnoses it published and the keys that still have a diagnosis.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..api import GROUP, KIND, LABEL_OWNER_KIND, LABEL_OWNER_NAME, PLURAL, VERSION
from ..kube.objects import m, parse_time, s
from ..kube.shards import Shard
from ..vocabulary import ActionBy, Reason, Stage
from . import rest
from .snapshot import pages

log = logging.getLogger("kueue_doctor.reports")
Key = tuple[str, str]

REPORT_GROUP, REPORT_VERSION, REPORT_PLURAL = "openreports.io", "v1alpha1", "reports"
REPORT_NAME = "kueue-doctor"
SOURCE = "kueue-doctor"
MANAGED_BY = "app.kubernetes.io/managed-by"
CRD_NAME = f"{PLURAL}.{GROUP}"
NOT_REPORTED = {Stage.RUNNING.value, Stage.FINISHED.value}

SEVERITIES = ("info", "low", "medium", "high", "critical")  # OpenReports' enum, in order
BY_ACTOR = {ActionBy.NOBODY.value: "info", ActionBy.WORKLOAD_OWNER.value: "medium",
            ActionBy.QUEUE_ADMIN.value: "medium", ActionBy.CLUSTER_ADMIN.value: "high"}
#: Reasons that never clear by waiting: one step more severe than who acts says.
STUCK_UNTIL_FIXED = {Reason.QUEUE_MISCONFIGURED.value, Reason.QUEUE_STOPPED.value, Reason.EXCEEDS_MAX_QUOTA.value,
                     Reason.DEACTIVATED.value, Reason.NO_WORKLOAD.value}


def report_path(namespace: str, name: str | None = REPORT_NAME) -> str:
    base = f"/apis/{REPORT_GROUP}/{REPORT_VERSION}/namespaces/{namespace}/{REPORT_PLURAL}"
    return f"{base}/{name}" if name else base


def severity_of(action_by: str, reason: str, limit_exceeded: bool) -> str:
    """Who must act sets the level; a reason that never clears by waiting, and a passed pending limit
    (kueue-doctor.dev/max-pending), each raise it one step."""
    level = SEVERITIES.index(BY_ACTOR.get(action_by, "medium"))
    level += (reason in STUCK_UNTIL_FIXED) + limit_exceeded
    return SEVERITIES[min(level, len(SEVERITIES) - 1)]


def result_of(diagnosis: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Report result of one published AdmissionDiagnosis; None when there is nothing to report."""
    md, st = m(diagnosis.get("metadata")), m(diagnosis.get("status"))
    stage, reason, action = s(st.get("stage")) or "", s(st.get("reason")) or "", s(st.get("actionBy")) or ""
    if stage in NOT_REPORTED or not reason:
        return None
    labels = m(md.get("labels"))
    exceeded = bool(m(st.get("pendingLimit")).get("exceeded"))
    props = {"workload": s(md.get("name")), "stage": stage, "reason": reason, "cause": s(st.get("cause")),
             "actionBy": action, "clusterQueue": s(st.get("clusterQueue")), "localQueue": s(st.get("localQueue")),
             "since": s(st.get("since")), "pendingLimitExceeded": "true" if exceeded else None}
    # Policy Reporter tells new results from known ones by this id: a new verdict notifies, new numbers do not
    props["resultID"] = f"{s(md.get('namespace'))}/{s(md.get('name'))}/{reason}/{s(st.get('cause')) or '-'}"
    owner_kind, owner_name = s(labels.get(LABEL_OWNER_KIND)), s(labels.get(LABEL_OWNER_NAME))
    if owner_kind and owner_name:
        props["owner"] = f"{owner_kind}/{owner_name}"
    out: dict[str, Any] = {
        "source": SOURCE, "policy": reason, "rule": s(st.get("cause")) or reason, "category": stage,
        "result": "warn" if action == ActionBy.NOBODY.value else "fail",
        "severity": severity_of(action, reason, exceeded), "scored": True,
        "message": s(st.get("message")) or reason,
        "properties": {k: v for k, v in props.items() if v},
        "resources": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "namespace": s(md.get("namespace")),
                       "name": s(md.get("name"))}],
    }
    since = parse_time(st.get("since"))
    if since is not None:  # the verdict's own time: unchanged while the verdict is, so no needless write
        out["timestamp"] = {"seconds": int(since.timestamp()), "nanos": 0}
    return out


def build_report(namespace: str, results: Iterable[dict[str, Any]], owner: Mapping[str, Any]) -> dict[str, Any]:
    ordered = sorted(results, key=lambda r: r["properties"].get("workload", ""))
    summary = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    for r in ordered:
        summary[r["result"]] += 1
    return {
        "apiVersion": f"{REPORT_GROUP}/{REPORT_VERSION}", "kind": "Report",
        "metadata": {"name": REPORT_NAME, "namespace": namespace, "labels": {MANAGED_BY: SOURCE},
                     "ownerReferences": [dict(owner)]},
        "source": SOURCE,
        "scope": {"apiVersion": "v1", "kind": "Namespace", "name": namespace},
        "summary": summary,
        "results": ordered,
    }


def digest(report: Mapping[str, Any]) -> str:
    """Hash of what we own in a Report; equal for our write and the object the server returns."""
    md = m(report.get("metadata"))
    owned = {"labels": {MANAGED_BY: m(md.get("labels")).get(MANAGED_BY)}, "owners": md.get("ownerReferences"),
             **{k: report.get(k) for k in ("source", "scope", "summary", "results")}}
    return hashlib.sha256(json.dumps(owned, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class ReportMirror:
    def __init__(self, api: Any, namespaces: list[str], shard: Shard | None = None) -> None:
        self.api = api
        self.namespaces = namespaces  # empty: all
        self.shard = shard or Shard()  # another shard's Reports are never rewritten nor deleted here
        self.results: dict[Key, dict[str, Any]] = {}  # what each diagnosed Workload contributes
        self.written: dict[str, str] = {}  # namespace -> digest of the Report in the cluster
        self.writes = 0  # applies and deletes done (tests and logs)
        self._owner: dict[str, Any] | None = None
        self._dirty: set[str] = set()  # namespaces to write again (changed, or a failed write)
        self._warned: set[str] = set()

    async def seed(self) -> None:
        """Remember the Reports already in the cluster, so a restart rewrites nothing unchanged."""
        selector = {"labelSelector": f"{MANAGED_BY}={SOURCE}"}
        if self.shard.selector:  # another shard's Reports not even sent, where the apiserver can narrow
            selector["shardSelector"] = self.shard.selector
        paths = ([report_path(ns, None) for ns in self.namespaces] if self.namespaces
                 else [f"/apis/{REPORT_GROUP}/{REPORT_VERSION}/{REPORT_PLURAL}"])
        for path in paths:
            try:
                self.written.update(await asyncio.to_thread(self._digests, path, selector))
            except rest.ApiError as exc:
                self._warn_once("list", "Cannot list OpenReports Reports (%s): is the openreports.io CRD installed "
                                "and may the operator list reports (docs/notifications.md)? Writing them anyway.", exc)
        self._dirty |= set(self.written)  # checked after the first pass: kept, rewritten or deleted

    def _digests(self, path: str, selector: Mapping[str, str]) -> dict[str, str]:
        """namespace -> digest of our Reports under `path`, page by page: together they hold a result per
        Workload, as large as every diagnosis at once."""
        out: dict[str, str] = {}
        for page in pages(self.api, path, selector):
            for item in page:
                md = m(item.get("metadata"))
                if s(md.get("name")) == REPORT_NAME and s(md.get("namespace")) and self.shard.owns(
                        s(md.get("namespace"))):
                    out[str(md["namespace"])] = digest(item)
        return out

    async def sync(self, diagnoses: Iterable[Mapping[str, Any]], current: Iterable[Key]) -> None:
        """After a pass: take the published diagnoses, drop Workloads without a diagnosis, write what changed."""
        self.take(diagnoses)
        for key in self.results.keys() - set(current):
            del self.results[key]
            self._dirty.add(key[0])
        if self._dirty:
            await self._write_dirty()

    def take(self, diagnoses: Iterable[Mapping[str, Any]]) -> None:
        """A pass's diagnoses, chunk by chunk: their results kept, their namespaces marked for `sync`."""
        for d in diagnoses:
            md = m(d.get("metadata"))
            key = (s(md.get("namespace")) or "", s(md.get("name")) or "")
            new = result_of(d)
            if new != self.results.get(key):
                self._dirty.add(key[0])
                if new is None:
                    self.results.pop(key, None)
                else:
                    self.results[key] = new

    async def _write_dirty(self) -> None:
        owner = await self._owner_ref()
        if owner is None:
            return  # kept dirty: tried again after the next pass
        by_ns: dict[str, list[dict[str, Any]]] = {}
        for (ns, _), result in self.results.items():
            if ns in self._dirty:
                by_ns.setdefault(ns, []).append(result)
        for ns in sorted(self._dirty):
            results = by_ns.get(ns)
            ok = await (self._apply(ns, build_report(ns, results, owner)) if results else self._delete(ns))
            if ok:
                self._dirty.discard(ns)

    async def _apply(self, ns: str, report: dict[str, Any]) -> bool:
        want = digest(report)
        if self.written.get(ns) == want:
            return True
        try:
            out = await asyncio.to_thread(rest.apply, self.api, report_path(ns), report)
        except rest.ApiError as exc:
            self.written.pop(ns, None)
            self._warn_once(f"apply/{ns}", "Cannot write the OpenReports Report %s/%s: %s. Is the openreports.io "
                            "CRD installed, and may the operator patch reports (docs/notifications.md)? Retrying after "
                            "the next pass.", ns, REPORT_NAME, exc)
            return False
        self.writes += 1
        self.written[ns] = digest(out) if isinstance(out, Mapping) else want
        self._warned.discard(f"apply/{ns}")
        return True

    async def _delete(self, ns: str) -> bool:
        if ns not in self.written:
            return True
        try:
            await asyncio.to_thread(rest.request, self.api, "DELETE", report_path(ns))
            self.writes += 1
        except rest.ApiError as exc:
            if exc.status != 404:
                self._warn_once(f"delete/{ns}", "Cannot delete the OpenReports Report %s/%s (nothing left to "
                                "report): %s. Retrying after the next pass.", ns, REPORT_NAME, exc)
                return False
        del self.written[ns]
        return True

    async def _owner_ref(self) -> dict[str, Any] | None:
        """The AdmissionDiagnosis CRD: cluster-scoped (a Report may be owned across namespaces only so), the
        operator's own object, and readable with the RBAC the operator has anyway."""
        if self._owner is None:
            try:
                crd = await asyncio.to_thread(rest.request, self.api, "GET",
                                              f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
            except rest.ApiError as exc:
                self._warn_once("owner", "Cannot read the CRD %s to own the OpenReports Reports by it: %s. No Report "
                                "is written until it can be read.", CRD_NAME, exc)
                return None
            self._owner = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                           "name": CRD_NAME, "uid": crd["metadata"]["uid"]}
        return self._owner

    def _warn_once(self, what: str, msg: str, *args: object) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning(msg, *args)
