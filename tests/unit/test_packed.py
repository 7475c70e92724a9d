"""The operator keeps its Workloads, Pods and Events packed (kube/packed.py): the same verdicts, the projections kept
current, little memory, one decoded copy per pass."""

from __future__ import annotations

from typing import Any

from kueue_doctor import diagnose_objects
from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.kube.packed import PackedObjects
from kueue_doctor.kube.slim import slim
from kueue_doctor.state import POD_GROUP_LABEL, QUEUE_LABEL, ClusterState
from tests.builders import POD_CREATED, Job, Pod

from . import test_slim


def _kubelet_pod(name: str, node: str) -> dict[str, Any]:
    job = Job("trainer", "team-a").queue("main").request("cpu", "2")
    return (Pod(name, "team-a").owner(job).workload("job-trainer-1a2b3").queues("main", "team-a-cq")
            .request("cpu", "2").node(node).running(POD_CREATED).obj())


def test_a_read_gives_an_equal_fresh_copy_and_a_non_json_value_is_kept_as_given() -> None:
    store: PackedObjects[str] = PackedObjects()
    pod = slim(_kubelet_pod("trainer-0", "node-1"))
    store["a"] = pod
    first, second = store["a"], store["a"]
    assert first == pod and second == pod and first is not second
    odd = _Odd({"kind": "Pod"})
    store["odd"] = odd
    assert store["odd"] is odd  # marshal refuses a Mapping subclass: kept, never mangled
    del store["a"]
    assert "a" not in store and len(store) == 1 and list(store) == ["odd"]


def test_while_remembering_each_object_is_decoded_once_and_a_write_replaces_the_copy() -> None:
    store: PackedObjects[str] = PackedObjects()
    store["a"] = slim(_kubelet_pod("trainer-0", "node-1"))
    with store.remembering():
        first = store["a"]
        assert store["a"] is first  # a pass reads one copy (the engine compares Workloads by identity)
        with store.remembering():  # nested (the loop's chunk, then the engine's pass)
            assert store["a"] is first
        assert store["a"] is first
        store["a"] = slim(_kubelet_pod("trainer-0", "node-2"))
        assert store["a"]["spec"]["nodeName"] == "node-2"  # written meanwhile: the new object, not the copy
        del store["a"]
        assert "a" not in store
    store["a"] = first
    assert store["a"] is not store["a"]  # outside a pass: fresh copies, nothing kept
    store["b"] = first
    with store.remembering():  # a walk over every object (the index build) keeps none of them decoded
        walked = dict(store.items())
        assert walked == {"a": first, "b": first} and list(store.values()) == [first, first]
        assert store["a"] is not walked["a"] and store["a"] is store["a"]


class _Odd(dict[str, Any]):
    pass


def test_a_kubelet_written_pod_packs_into_less_than_a_kibibyte() -> None:
    # issue 12's budget: <= 1 KiB per Pod kept; the Pods of a Job compress against the first one stored
    store: PackedObjects[int] = PackedObjects()
    pods = [slim(_kubelet_pod(f"trainer-{i}", f"node-{i % 7}")) for i in range(50)]
    for i, pod in enumerate(pods):
        store[i] = pod
    assert store.stored_bytes() / len(pods) < 1024, store.stored_bytes() / len(pods)
    assert [store[i] for i in range(50)] == pods


def test_the_slim_scenario_gets_the_same_verdicts_from_packed_pods() -> None:
    objects = test_slim.scenario()
    packed = ClusterState.from_objects([slim(o) for o in objects], packed=True)
    assert isinstance(packed.pods, PackedObjects) and len(packed.pods) == 2
    assert isinstance(packed.workloads, PackedObjects) and len(packed.workloads) == 2
    assert diagnose(packed, test_slim.NOW) == diagnose_objects(objects, test_slim.NOW)


def test_node_usage_and_pod_groups_follow_every_pod_change() -> None:
    # what every pass reads of all Pods is kept at upsert, so a packed Pod is never decoded for it
    for state in (ClusterState(), ClusterState.packed()):
        a = _kubelet_pod("trainer-0", "node-1")
        state.upsert(a)
        assert [(n, p) for n, p, _ in state.bound_pods()] == [("node-1", "Running")]
        assert next(state.bound_pods())[2]["containers"][0]["resources"]["requests"] == {"cpu": "2"}
        done = Pod("trainer-0", "team-a").node("node-1").phase("Succeeded").obj()
        state.upsert(done)
        assert [(n, p) for n, p, _ in state.bound_pods()] == [("node-1", "Succeeded")]
        state.remove(done)
        assert list(state.bound_pods()) == []

        grouped = [Pod(f"g-{i}", "team-b").label(POD_GROUP_LABEL, "grp").label(QUEUE_LABEL, "main").obj()
                   for i in range(3)]
        for pod in grouped:
            state.upsert(pod)
        state.upsert(Pod("loner", "team-b").label(POD_GROUP_LABEL, "grp").obj())  # no queue label: not Kueue's
        [(group, pods)] = list(state.pod_groups())
        assert group == ("team-b", "grp") and [p["metadata"]["name"] for p in pods] == ["g-0", "g-1", "g-2"]
        for pod in grouped:
            state.remove(pod)
        assert list(state.pod_groups()) == []
