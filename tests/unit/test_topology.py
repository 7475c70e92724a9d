"""Kueue's TAS counts the Pods it does not place (non-TAS usage) on a node until their phase is terminal: variations
of the catalog scenario tas-capacity-held-by-terminating-pod-outside-kueue (one 8-cpu node, a 6-cpu Pod outside
Kueue's TAS on it, a 4-cpu pod set)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kueue_doctor.engine.admission.topology import _group
from kueue_doctor.engine.context import Context
from kueue_doctor.state import ClusterState

from .test_catalog import SCENARIOS, verdict_of

NAME = "tas-capacity-held-by-terminating-pod-outside-kueue"


def scenario(**meta: Any) -> dict[str, Any]:
    """The catalog scenario with the Pod outside Kueue's metadata changed (a value None drops the key)."""
    found = copy.deepcopy(next(s for s in SCENARIOS if s["name"] == NAME))
    pod = next(o for o in found["objects"] if o["kind"] == "Pod")
    for key, value in meta.items():
        if value is None:
            pod["metadata"].pop(key, None)
        else:
            pod["metadata"][key] = value
    return found


def test_a_pod_terminating_for_minutes_is_waited_for_then_the_cluster_admins() -> None:
    s = scenario(deletionTimestamp="2026-12-01T09:25:00Z", deletionGracePeriodSeconds=30)
    status = verdict_of(s)
    assert (status["reason"], status["actionBy"]) == ("WaitingForQuota", "Nobody"), status["message"]
    assert "terminating since 2026-12-01T09:24:30Z (5m)" in status["message"], status["message"]
    assert "nothing to do unless it lasts" in status["message"], status["message"]
    s["now"] = "2026-12-01T09:35:01Z"
    status = verdict_of(s)
    assert status["actionBy"] == "ClusterAdmin", status["message"]
    assert "its grace period ended 10m ago" in status["message"], status["message"]


def test_a_running_pod_outside_kueue_is_named_and_not_waited_for() -> None:
    status = verdict_of(scenario(deletionTimestamp=None, deletionGracePeriodSeconds=None, finalizers=None))
    assert (status["reason"], status["cause"], status["actionBy"]) == (
        "WaitingForQuota", "TopologyPlacementFailed", "ClusterAdmin"), status["message"]
    assert "requested by Pod ops/log-shipper-debug (6 cpu)." in status["message"], status["message"]
    assert "Kueue's TAS does not preempt them" in status["message"], status["message"]


def test_a_daemonset_pod_never_leaves_so_the_pod_set_never_fits() -> None:
    owner = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "log-shipper", "uid": "u", "controller": True}]
    status = verdict_of(scenario(deletionTimestamp=None, deletionGracePeriodSeconds=None, finalizers=None,
                                 ownerReferences=owner))
    assert (status["reason"], status["actionBy"]) == ("ExceedsMaxQuota", "WorkloadOwner"), status["message"]
    assert "holds 0 pod(s)" in status["message"], status["message"]


def test_a_pod_kueues_tas_placed_is_counted_through_its_workload_not_as_the_nodes_usage() -> None:
    status = verdict_of(scenario(annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"}))
    assert "Pods outside Kueue's TAS" not in status["message"], status["message"]
    assert "holds 2 pod(s)" in status["message"], status["message"]


def test_a_terminating_pod_is_not_waited_for_when_running_ones_keep_the_pod_set_off_anyway() -> None:
    s = scenario(deletionTimestamp="2026-12-01T09:25:00Z", deletionGracePeriodSeconds=30)
    pod = next(o for o in s["objects"] if o["kind"] == "Pod")
    other = {**pod, "metadata": {"name": "cache-warmer", "namespace": "ops", "uid": "u-2",
                                 "creationTimestamp": "2026-11-30T14:00:00Z"},
             "spec": {**pod["spec"], "containers": [{"name": "main", "resources": {"requests": {"cpu": "5"}}}]}}
    s["objects"].append(other)
    status = verdict_of(s)
    assert status["actionBy"] == "ClusterAdmin", status["message"]
    assert "Pod ops/cache-warmer (5 cpu)" in status["message"], status["message"]
    assert "Kueue's TAS does not preempt them" in status["message"], status["message"]


def test_a_pod_set_group_of_equal_counts_takes_the_second_pod_set_as_leader_as_kueue_does() -> None:
    """Review B10: Kueue's findLeaderAndWorkers makes the second pod set of a podSetGroupName the leader unless it
    has more pods than the first, so on equal counts the first pod set is the workers."""
    def podset(name: str, count: int) -> dict[str, Any]:
        return {"name": name, "count": count, "topologyRequest": {"required": "rack", "podSetGroupName": "g"},
                "template": {"spec": {"containers": [{"name": "c"}]}}}

    def ctx(*sets: dict[str, Any]) -> Context:
        wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
              "metadata": {"name": "w", "namespace": "ns", "uid": "u"}, "spec": {"podSets": list(sets)}}
        return Context(wl, ClusterState.from_objects([wl]), datetime(2026, 11, 30, tzinfo=UTC))

    def names(found: tuple[Any, Any]) -> tuple[str, str]:
        return found[0]["name"], found[1]["name"]

    assert names(_group(ctx(podset("a", 2), podset("b", 2)), "a")) == ("a", "b")  # (workers, leader)
    assert names(_group(ctx(podset("a", 1), podset("b", 4)), "a")) == ("b", "a")
    assert names(_group(ctx(podset("a", 4), podset("b", 1)), "a")) == ("a", "b")
