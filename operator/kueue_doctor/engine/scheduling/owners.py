"""The owners Kueue suspends until admission, how many Pods an admitted Workload should have, and what every
scheduling-stage verdict shows of the admission (its time, its conditions as evidence)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...kube.objects import group_of, i, lst, m, s
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


def owner_suspended(owner: Mapping[str, Any]) -> bool | None:
    path = SUSPEND_PATHS.get((group_of(owner.get("apiVersion")), s(owner.get("kind")) or ""))
    if path is None:
        return None
    node: Any = owner
    for part in path:
        node = m(node).get(part)
    return node is True


def expected_pods(ctx: Context) -> int:
    total = 0
    assignments = lst(m(ctx.status.get("admission")).get("podSetAssignments"))
    counts: dict[str, int] = {}
    for ps in lst(ctx.spec.get("podSets")):
        counts[s(m(ps).get("name")) or "main"] = i(m(ps).get("count"), 1)
    if assignments:
        for psa in assignments:
            psa = m(psa)
            total += i(psa.get("count"), counts.get(s(psa.get("name")) or "main", 1))
    else:
        total = sum(counts.values())
    reclaimable = sum(i(m(r).get("count")) for r in lst(ctx.status.get("reclaimablePods")))
    return max(total - reclaimable, 0)


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
