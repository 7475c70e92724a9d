"""ClusterState tells the operator exactly which Workloads a change can affect."""

from __future__ import annotations

from kueue_doctor.state import ClusterState

from .factory import admission, admitted_conditions, cluster_queue, cond, event, flavor, job, local_queue, pod, workload


def build() -> tuple[ClusterState, dict[str, dict]]:  # type: ignore[type-arg]
    j = job("trainer", "team-a", suspend=False)
    objs = {
        "rf": flavor("default-flavor"),
        "cq_a": cluster_queue("cq-a", {"default-flavor": {"cpu": "2"}}, cohort="research"),
        "cq_b": cluster_queue("cq-b", {"default-flavor": {"cpu": "2"}}, cohort="research"),
        "cq_c": cluster_queue("cq-c", {"default-flavor": {"cpu": "2"}}),
        "lq_a": local_queue("lq-a", "team-a", "cq-a"),
        "lq_b": local_queue("lq-b", "team-b", "cq-b"),
        "lq_c": local_queue("lq-c", "team-c", "cq-c"),
        "job": j,
        "wl_a": workload("job-trainer-00001", "team-a", "lq-a", owner=j, admission=admission("cq-a"),
                         conditions=admitted_conditions("cq-a")),
        "wl_b": workload("job-b-00002", "team-b", "lq-b"),
        "wl_c": workload("job-c-00003", "team-c", "lq-c"),
    }
    objs["pod"] = pod("trainer-x", j, "job-trainer-00001")
    objs["victim"] = workload("job-v-00004", "team-b", "lq-b", conditions=[cond(
        "Evicted", "True", "Preempted", f"Preempted to accommodate a workload (UID: {objs['wl_b']['metadata']['uid']},"
        " JobUID: x) due to prioritization in the ClusterQueue; preemptor path: /research/cq-b; preemptee path: "
        "/research/cq-b")])
    return ClusterState.from_objects(objs.values()), objs


def keys(*pairs: tuple[str, str]) -> set[tuple[str, str]]:
    return set(pairs)


def test_cluster_queue_change_affects_its_cohort_only() -> None:
    state, o = build()
    assert state.affected_workloads(o["cq_a"]) == keys(("team-a", "job-trainer-00001"), ("team-b", "job-b-00002"),
                                                       ("team-b", "job-v-00004"))
    assert state.affected_workloads(o["cq_c"]) == keys(("team-c", "job-c-00003"))


def test_local_queue_pod_and_job_event_changes_affect_their_workload() -> None:
    state, o = build()
    assert state.affected_workloads(o["lq_c"]) == keys(("team-c", "job-c-00003"))
    assert state.affected_workloads(o["pod"]) == keys(("team-a", "job-trainer-00001"))
    ev = event(o["job"], "FailedCreate", 'Error creating: pods "x" is forbidden: exceeded quota: q')
    assert state.affected_workloads(ev) == keys(("team-a", "job-trainer-00001"))


def test_a_victim_change_re_diagnoses_its_preemptor_but_a_plain_change_only_itself() -> None:
    state, o = build()
    assert state.affected_workloads(o["victim"]) == keys(("team-b", "job-v-00004"), ("team-b", "job-b-00002"))
    assert state.affected_workloads(o["wl_c"]) == keys(("team-c", "job-c-00003"))


def test_flavor_change_affects_the_workloads_of_queues_using_it() -> None:
    state, o = build()
    assert len(state.affected_workloads(o["rf"])) == 4


def test_every_kind_the_operator_watches_is_found_where_key_of_says_also_from_metadata_only() -> None:
    state, o = build()
    ev = event(o["job"], "FailedCreate", 'Error creating: pods "x" is forbidden: exceeded quota: q')
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns-uid"}}
    for obj in [*o.values(), ev, ns]:
        state.upsert(obj)
        kind = obj["kind"]
        collection = state.collection(kind)
        assert collection is not None, kind
        assert collection[state.key_of(kind, obj)] == obj, kind
        # the resync compares a metadata-only LIST (PartialObjectMetadata items) with what is kept
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
        assert state.key_of(kind, partial) == state.key_of(kind, obj), kind
    assert state.collection("AdmissionDiagnosis") is None  # not kept: the operator compares those whole
