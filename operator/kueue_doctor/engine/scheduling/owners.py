"""The owners Kueue suspends until admission, how many Pods an admitted Workload should have, and what every
scheduling-stage verdict shows of the admission (its time, its conditions as evidence)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...kube.objects import group_of, i, lst, m, meta, parse_time, s
from ..context import Context

# How owners show suspension: (group, kind) -> path of the boolean. Kueue suspends these until admission.
SUSPEND_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch", "Job"): ("spec", "suspend"),
    ("jobset.x-k8s.io", "JobSet"): ("spec", "suspend"),
    ("ray.io", "RayJob"): ("spec", "suspend"),
    ("ray.io", "RayCluster"): ("spec", "suspend"),
    ("kubeflow.org", "MPIJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PyTorchJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "TFJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "XGBoostJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PaddleJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "JAXJob"): ("spec", "runPolicy", "suspend"),
    ("trainer.kubeflow.org", "TrainJob"): ("spec", "suspend"),
}


def suspend_path(owner: Mapping[str, Any]) -> tuple[str, ...] | None:
    return SUSPEND_PATHS.get((group_of(owner.get("apiVersion")), s(owner.get("kind")) or ""))


def owner_suspended(owner: Mapping[str, Any]) -> bool | None:
    path = suspend_path(owner)
    if path is None:
        return None
    node: Any = owner
    for part in path:
        node = m(node).get(part)
    return node is True


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


def expected_pods(ctx: Context) -> int:
    """The Pods the admission stands for now, as Kueue counts them (workload.totalRequestsFromAdmission): per pod
    set the admitted count, capped by the spec's count less its reclaimable Pods (an elastic Job scaled down
    keeps its admission count)."""
    counts: dict[str, int] = {}
    for ps in lst(ctx.spec.get("podSets")):
        counts[s(m(ps).get("name")) or "main"] = i(m(ps).get("count"), 1)
    reclaimable: dict[str, int] = {}
    for r in lst(ctx.status.get("reclaimablePods")):
        name_ = s(m(r).get("name")) or "main"
        reclaimable[name_] = reclaimable.get(name_, 0) + i(m(r).get("count"))
    assignments = lst(m(ctx.status.get("admission")).get("podSetAssignments"))
    if not assignments:
        return max(sum(counts.values()) - sum(reclaimable.values()), 0)
    total = 0
    for psa in assignments:
        ps_name = s(m(psa).get("name")) or "main"
        admitted = i(m(psa).get("count"), counts.get(ps_name, 1))
        now = counts.get(ps_name, admitted) - reclaimable.get(ps_name, 0)
        total += max(min(admitted, now), 0)
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
