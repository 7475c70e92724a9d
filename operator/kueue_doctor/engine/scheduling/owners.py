"""The owners Kueue suspends until admission, how many Pods an admitted Workload should have, and what every
scheduling-stage verdict shows of the admission (its time, its conditions as evidence)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...kube.objects import i, lst, m, meta, parse_time, s, spec
from ..context import Context

# read by both phases, so defined beside them; the scheduling rules import them from here
from ..owner_status import SUSPEND_PATHS as SUSPEND_PATHS
from ..owner_status import owner_suspended as owner_suspended
from ..owner_status import suspend_path as suspend_path


@dataclass(frozen=True)
class FieldWriter:
    """A metadata.managedFields entry that owns a field: who wrote it, how, and when."""

    manager: str
    operation: str
    time: datetime | None

    @property
    def is_kueue(self) -> bool:
        # Kueue's manager binary writes as "kueue" (its user agent, pkg/util/useragent); its named field
        # owners all start with it too: kueue-admission, kueue-<kind>-controller, kueue-<condition>.
        return self.manager.lower().startswith("kueue")


def suspend_writer(owner: Mapping[str, Any]) -> FieldWriter | None:
    """The latest field manager (by its entry's time) that owns the owner's suspend field, or None when the
    object carries no managedFields for it (dumps often strip them)."""
    path = suspend_path(owner)
    if path is None:
        return None
    latest: FieldWriter | None = None
    for entry in lst(meta(owner).get("managedFields")):
        entry = m(entry)
        if s(entry.get("subresource")):  # status writes never own spec.suspend
            continue
        node: Any = entry.get("fieldsV1")
        for part in path:
            node = m(node).get(f"f:{part}")
            if node is None:
                break
        manager = s(entry.get("manager"))
        if node is None or manager is None:
            continue
        writer = FieldWriter(manager, s(entry.get("operation")) or "Update", parse_time(entry.get("time")))
        if latest is None or (writer.time is not None and (latest.time is None or writer.time >= latest.time)):
            latest = writer
    return latest


def pod_set_counts(workload: Mapping[str, Any]) -> dict[str, int]:
    """spec.podSets[].count by pod set (Kueue defaults a missing count to 1)."""
    return {s(m(ps).get("name")) or "main": i(m(ps).get("count"), 1) for ps in lst(spec(workload).get("podSets"))}


def reclaimable_by_pod_set(workload: Mapping[str, Any]) -> dict[str, int]:
    """status.reclaimablePods by pod set: the Pods Kueue no longer charges (finished, as the owner reported them)."""
    out: dict[str, int] = {}
    for r in lst(m(workload.get("status")).get("reclaimablePods")):
        name_ = s(m(r).get("name")) or "main"
        out[name_] = out.get(name_, 0) + i(m(r).get("count"))
    return out


def expected_by_pod_set(ctx: Context) -> dict[str, int]:
    """The Pods the admission stands for now, per pod set, as Kueue counts them
    (workload.totalRequestsFromAdmission): the admitted count, capped by the spec's count less its reclaimable Pods
    (an elastic Job scaled down keeps its admission count). A stale reclaimable count makes this lower than the
    Pods that run (kueue#14609): `accounting.overruns` says so."""
    counts = pod_set_counts(ctx.wl)
    reclaimable = reclaimable_by_pod_set(ctx.wl)
    assignments = lst(m(ctx.status.get("admission")).get("podSetAssignments"))
    if not assignments:
        return {ps: max(n - reclaimable.get(ps, 0), 0) for ps, n in counts.items()}
    out: dict[str, int] = {}
    for psa in assignments:
        ps_name = s(m(psa).get("name")) or "main"
        admitted = i(m(psa).get("count"), counts.get(ps_name, 1))
        now = counts.get(ps_name, admitted) - reclaimable.get(ps_name, 0)
        out[ps_name] = max(min(admitted, now), 0)
    return out


def expected_pods(ctx: Context) -> int:
    """The Pods the admission stands for now (`expected_by_pod_set`, summed)."""
    return sum(expected_by_pod_set(ctx).values())


def topology_assigned_pods(psa: Mapping[str, Any]) -> int | None:
    """The Pods a podSetAssignment's topologyAssignment places, None without one. v1beta2: per slice, domainCount
    domains of podCounts.universal Pods each, or podCounts.individual[] per domain; v1beta1: domains[].count."""
    ta = m(psa.get("topologyAssignment"))
    if not ta:
        return None
    total = sum(i(m(d).get("count")) for d in lst(ta.get("domains")))
    for sl in lst(ta.get("slices")):
        counts = m(m(sl).get("podCounts"))
        universal = counts.get("universal")
        total += (i(m(sl).get("domainCount"), 1) * i(universal) if universal is not None
                  else sum(i(c) for c in lst(counts.get("individual"))))
    return total


def assigned_flavors(ctx: Context) -> list[str]:
    out: list[str] = []
    for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")):
        for flavor in m(m(psa).get("flavors")).values():
            if isinstance(flavor, str) and flavor not in out:
                out.append(flavor)
    return out


def admitted_since(ctx: Context) -> datetime | None:
    return ctx.cond_time("Admitted") or ctx.cond_time("QuotaReserved")


def base_evidence(ctx: Context) -> list[dict[str, Any]]:
    ev = [ctx.condition_evidence("Admitted")]
    if ctx.cond("PodsReady"):
        ev.append(ctx.condition_evidence("PodsReady"))
    return ev


def owner_jobset(ctx: Context) -> Mapping[str, Any] | None:
    """The JobSet that makes the Workload's Pods: the owner itself, or the one a TrainJob's runtime made."""
    owner = ctx.owner
    if owner is None:
        return None
    if s(owner.get("kind")) == "JobSet":
        return owner
    return next((d for d in ctx.state.descendants(owner, depth=1) if s(d.get("kind")) == "JobSet"), None)


def unmet_dependencies(jobset: Mapping[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """Per replicated Job, its dependsOn entries (name, Ready|Complete) not reached yet: JobSet creates none of its
    Jobs before all are (jobset pkg/controllers/depends_on.go dependencyReachedStatus: Complete = every replica
    succeeded, Ready = every replica ready, failed or succeeded; no status yet = not reached)."""
    rjobs = [m(r) for r in lst(spec(jobset).get("replicatedJobs"))]
    replicas = {s(r.get("name")) or "": i(r.get("replicas"), 1) for r in rjobs}
    statuses = {s(m(x).get("name")) or "": m(x) for x in lst(m(jobset.get("status")).get("replicatedJobsStatus"))}
    out: dict[str, list[tuple[str, str]]] = {}
    for r in rjobs:
        unmet = []
        for dep in lst(r.get("dependsOn")):
            dep_name, want = s(m(dep).get("name")) or "", s(m(dep).get("status")) or "Complete"
            st = statuses.get(dep_name)
            done = i(st.get("succeeded")) if st is not None else -1
            reached = st is not None and (done == replicas.get(dep_name, 1) if want == "Complete" else
                                          i(st.get("ready")) + i(st.get("failed")) + done == replicas.get(dep_name, 1))
            if not reached:
                unmet.append((dep_name, want))
        if unmet:
            out[s(r.get("name")) or ""] = unmet
    return out
