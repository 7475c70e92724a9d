"""A Deployment's rolling update that waits for its own quota (kueue#5118). Kueue gives every Pod of a Deployment a
Workload of its own (pod integration; its Deployment reconciler does nothing): the new ReplicaSet's Pods wait for
quota that the old ReplicaSet's Pods hold, and with maxUnavailable 0 (the default 25% of fewer than 4 replicas
rounds down to 0) the Deployment controller deletes an old Pod only once a new one is available. Unless other
Workloads free the quota, nothing ever will."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ...kube.objects import deployment_of, i, m, meta, s, spec
from ...state import WORKLOAD_ANNOTATION
from ..context import Context
from ..holders import quota_holders


@dataclass(frozen=True)
class Rollout:
    """The waiting Pod's Deployment and what its previous ReplicaSets' Pods hold of the short resource."""

    deployment: str
    old_sets: list[str]
    old_pods: list[str]
    held: Decimal  # by the old Pods
    others: Decimal  # by every other Workload of the ClusterQueue
    max_unavailable: int | None  # None: the Deployment is not in the input
    replicas: int | None


def _max_unavailable(deployment: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(maxUnavailable in Pods, replicas) as the Deployment controller resolves them (a percentage rounds down);
    maxUnavailable None for a Recreate strategy, which deletes the old Pods first."""
    sp = spec(deployment)
    replicas = i(sp.get("replicas"), 1)
    strategy = m(sp.get("strategy"))
    if s(strategy.get("type")) == "Recreate":
        return None, replicas
    value = m(strategy.get("rollingUpdate")).get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return replicas * int(value[:-1]) // 100, replicas
    return i(value), replicas


def rollout(ctx: Context, flavor: str, resource: str) -> Rollout | None:
    """The rollout this Workload's Pod belongs to, when Pods of the same Deployment's earlier ReplicaSets hold
    quota of (flavor, resource) in its ClusterQueue; None otherwise, or when its strategy frees them anyway."""
    mine = next((d for d in map(deployment_of, ctx.pods) if d is not None), None)
    if mine is None or not ctx.cq_name:
        return None
    dep, own_set = mine
    deployment = ctx.state.owners.get((ctx.ns, "Deployment", dep))
    max_unavailable, replicas = _max_unavailable(deployment) if deployment is not None else (0, None)
    if max_unavailable is None or max_unavailable > 0:
        return None  # Recreate, or room to delete an old Pod first: the controller frees the quota itself
    old_sets: set[str] = set()
    old_pods: list[str] = []
    held = others = Decimal(0)
    for holder in quota_holders(ctx, ctx.cq_name).holders:
        amount = holder.usage.get((flavor, resource), Decimal(0))
        pod = _old_pod(ctx, holder.key, dep, own_set)
        if pod is None:
            others += amount
            continue
        old_sets.add(pod[1])
        old_pods.append(pod[0])
        held += amount
    if not old_pods or held <= 0:
        return None
    return Rollout(dep, sorted(old_sets), sorted(old_pods), held, others,
                   max_unavailable if deployment is not None else None, replicas)


def _old_pod(ctx: Context, key: tuple[str, str], dep: str, own_set: str) -> tuple[str, str] | None:
    """(Pod, ReplicaSet) when the holder `key` is the Workload of a Pod of Deployment `dep` from another
    ReplicaSet. Kueue names a Pod's Workload pod-<Pod>-<hash> and the Pod names it back (its workload
    annotation): read from the name, the holder itself is not decoded (a shard keeps no owners of another's)."""
    ns, wl_name = key
    if ns != ctx.ns or not wl_name.startswith(f"pod-{dep}-") or wl_name.startswith(f"pod-{own_set}-"):
        return None
    pod_name = wl_name[len("pod-"):].rpartition("-")[0]
    pod = ctx.state.pods.get((ns, pod_name))
    if pod is None or s(m(meta(pod).get("annotations")).get(WORKLOAD_ANNOTATION)) not in (None, wl_name):
        return None
    found = deployment_of(pod)
    if found is None or found[0] != dep or found[1] == own_set:
        return None
    return pod_name, found[1]
