"""What kube-scheduler's constraints mean on a node, and which constraint blocks: the pieces behind the scheduling
causes (the whole verdicts are catalog scenarios in tests/cases/verdicts.yaml)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from kueue_doctor.engine.pods import parse_scheduler_message
from kueue_doctor.engine.pods.scheduler import Constraint, claim_of, constraint_of, decisive, named_taint, resource_of
from kueue_doctor.engine.pods.summary import replaced_pods
from kueue_doctor.engine.scheduling.placement import PodConstraints, assigned_nodes, tolerates


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize("toleration,tolerated", [
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "value": "present"}, True),  # operator defaults to Equal, empty effect: all
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"operator": "Exists"}, True),  # empty key with Exists tolerates everything
    ({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}, False),
])
def test_a_toleration_tolerates_a_taint_as_core_v1_says(toleration: dict[str, str], tolerated: bool) -> None:
    assert tolerates([toleration], GPU_TAINT) is tolerated


def test_required_node_affinity_is_an_or_of_terms_and_an_and_of_expressions() -> None:
    pod = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]},
                                  {"key": "spot", "operator": "DoesNotExist"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]},
        ]}}}, "containers": []}}
    pc = PodConstraints.of(pod, {})
    assert pc.selects(node("n1", {"pool": "a"}))
    assert not pc.selects(node("n2", {"pool": "a", "spot": "true"}))
    assert not pc.selects(node("n3", {"pool": "c"}))
    assert pc.selects(node("special", {}))


def test_the_flavor_labels_count_as_the_pods_selector_and_taints_are_named() -> None:
    pod = {"spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "2"}}}],
                    "tolerations": [{"key": "other", "operator": "Exists"}]}}
    pc = PodConstraints.of(pod, {"pool": "gpu"})
    assert pc.selector_text() == "pool=gpu"
    assert pc.requests == {"cpu": Decimal(2), "pods": Decimal(1)}
    assert pc.untolerated(node("g", {"pool": "gpu"}, [GPU_TAINT, {"key": "soft", "effect": "PreferNoSchedule"}])) == [
        "nvidia.com/gpu=present:NoSchedule"]


@pytest.mark.parametrize("text,constraint", [
    ("Insufficient nvidia.com/gpu", Constraint.RESOURCE),
    ("Too many pods", Constraint.RESOURCE),
    ("node(s) didn't match Pod's node affinity/selector", Constraint.NODE_SELECTOR),
    ("node(s) had untolerated taint(s)", Constraint.TAINT),
    ("node(s) had untolerated taint {dedicated: gpu}", Constraint.TAINT),
    ("node(s) were unschedulable", Constraint.NODE_STATE),
    ('persistentvolumeclaim "data" not found', Constraint.VOLUME),
    ("pod has unbound immediate PersistentVolumeClaims", Constraint.VOLUME),
    ("node(s) didn't match PersistentVolume's node affinity", Constraint.VOLUME_NODE_AFFINITY),
    ("node(s) had no available volume zone", Constraint.VOLUME_NODE_AFFINITY),
    ("node(s) didn't match pod anti-affinity rules", Constraint.OTHER),
])
def test_each_scheduler_reason_names_its_constraint(text: str, constraint: str) -> None:
    assert constraint_of(text) == constraint


def test_names_read_from_scheduler_reasons() -> None:
    assert resource_of("Insufficient nvidia.com/gpu") == "nvidia.com/gpu" and resource_of("Too many pods") == "pods"
    assert claim_of('persistentvolumeclaim "data" not found') == "data"
    assert named_taint("node(s) had untolerated taint {dedicated: gpu}") == "dedicated=gpu"
    assert named_taint("node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }") == \
        "node-role.kubernetes.io/control-plane"


def test_the_nodes_that_got_furthest_through_the_filters_decide() -> None:
    """A node reported for "Insufficient cpu" passed the taint and selector filters: cpu blocks, although more
    nodes were rejected for their labels."""
    msg = ("0/12 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, 2 Insufficient memory. "
           "no new claims to deallocate, preemption: 0/12 nodes are available: 10 Preemption is not helpful for "
           "scheduling, 2 No preemption victims found for incoming pod.")
    constraint, reasons = decisive(parse_scheduler_message(msg))
    assert constraint == Constraint.RESOURCE and [r.count for r in reasons] == [2]
    only_early = "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node " \
                 "affinity/selector."
    assert decisive(parse_scheduler_message(only_early))[0] == Constraint.NODE_SELECTOR  # the larger count


def _pod(name: str, phase: str, created: str, index: str | None = None, disrupted: bool = False) -> dict[str, Any]:
    conditions = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}] if disrupted \
        else []
    annotations = {"batch.kubernetes.io/job-completion-index": index} if index is not None else {}
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
            "status": {"phase": phase, "conditions": conditions}}


def test_replaced_pods_are_history_by_disruption_index_or_count() -> None:
    t0, t1 = "2026-11-30T09:00:00Z", "2026-11-30T09:10:00Z"
    assert replaced_pods([_pod("a", "Failed", t0, disrupted=True)], 1) == {"a": "DisruptionTarget EvictionByEvictionAPI"}
    # indexed: index 0 was replaced by a newer Pod; index 1 failed and has no successor yet (current)
    indexed = [_pod("a0", "Failed", t0, "0"), _pod("b0", "Pending", t1, "0"), _pod("a1", "Failed", t0, "1")]
    assert replaced_pods(indexed, 2) == {"a0": "replaced by a newer Pod of index 0"}
    # not indexed: 2 expected, 1 running + 2 failed: the newest failure is current, the older one history
    plain = [_pod("run", "Running", t1), _pod("old", "Failed", t0), _pod("new", "Failed", t1)]
    assert replaced_pods(plain, 2) == {"old": "replaced by a newer Pod"}
    assert replaced_pods([_pod("x", "Failed", t0), _pod("y", "Failed", t1)], 2) == {}  # both still count


def test_the_nodes_of_a_topology_assignment_are_read_in_both_api_versions() -> None:
    v1beta2 = {"levels": ["kubernetes.io/hostname"], "slices": [
        {"domainCount": 2, "valuesPerLevel": [{"individual": {"prefix": "gpu-", "suffix": "-a", "roots": ["1", "2"]}}],
         "podCounts": {"universal": 2}},
        {"domainCount": 1, "valuesPerLevel": [{"universal": "cpu-9"}], "podCounts": {"individual": [1]}}]}
    assert assigned_nodes(v1beta2) == {"gpu-1-a", "gpu-2-a", "cpu-9"}
    v1beta1 = {"levels": ["kubernetes.io/hostname"], "domains": [{"values": ["n1"], "count": 2}]}
    assert assigned_nodes(v1beta1) == {"n1"}
    # the lowest level is a rack: the Pods are pinned to a rack, not to one node
    assert assigned_nodes({"levels": ["example.com/rack"], "domains": [{"values": ["r1"], "count": 2}]}) == set()


def _tas_loop_variant(change: Any) -> dict[str, Any]:
    """The kueue#14917 catalog scenario, changed; its Workload's verdict."""
    import copy

    from kueue_doctor import diagnose_objects
    from tests.unit.test_catalog import SCENARIOS, gen
    (scenario,) = [s for s in SCENARIOS if s["name"] == "tas-tainted-node-replacement-loop"]
    objects = copy.deepcopy(scenario["objects"])
    change(objects)
    (found,) = [d for d in diagnose_objects(objects, gen.parse_now(scenario["now"]))
                if d["metadata"]["name"] == "job-trainer-7c1e2"]
    return dict(found["status"])


def test_a_tas_pinned_node_recorded_unhealthy_is_kueues_to_replace() -> None:
    def recorded(objects: list[dict[str, Any]]) -> None:
        (wl,) = [o for o in objects if o["kind"] == "Workload"]
        wl["status"]["unhealthyNodes"] = [{"name": "gpu-node-2"}]
    got = _tas_loop_variant(recorded)
    assert (got["cause"], got["actionBy"]) == ("UntoleratedTaint", "Nobody")
    assert "Kueue recorded it in status.unhealthyNodes and looks for a replacement node" in got["message"]


def test_a_tas_pinned_node_nothing_runs_on_is_kueues_to_mark_unhealthy() -> None:
    def gone(objects: list[dict[str, Any]]) -> None:  # the Pod that kept the node "healthy" finished
        objects[:] = [o for o in objects if o["metadata"]["name"] != "trainer-2-g5h6i"]
    got = _tas_loop_variant(gone)
    assert (got["cause"], got["actionBy"]) == ("UntoleratedTaint", "ClusterAdmin")
    assert "Kueue should mark the node unhealthy and re-place them" in got["message"]
    assert "still runs" not in got["message"]
