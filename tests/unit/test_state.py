"""ClusterState tells the operator exactly which Workloads a change can affect."""

from __future__ import annotations

from typing import Any

from kueue_doctor.state import ClusterState
from tests.builders import (
    Admission,
    ClusterQueue,
    Event,
    Job,
    LocalQueue,
    Namespace,
    Pod,
    ResourceFlavor,
    Workload,
    condition,
)


def build() -> tuple[ClusterState, dict[str, dict]]:  # type: ignore[type-arg]
    j = Job("trainer", "team-a").queue("lq-a").request("cpu", "1").suspend(False)

    def cq(name: str) -> ClusterQueue:
        return ClusterQueue(name).quotas({"default-flavor": {"cpu": "2"}})

    def wl(name: str, namespace: str, queue: str) -> Workload:
        return Workload(name, namespace).queue(queue).request("cpu", "1")

    at = "2026-11-30T09:00:05Z"
    objs = {
        "rf": ResourceFlavor("default-flavor").obj(),
        "cq_a": cq("cq-a").cohort("research").obj(),
        "cq_b": cq("cq-b").cohort("research").obj(),
        "cq_c": cq("cq-c").obj(),
        "lq_a": LocalQueue("lq-a", "team-a", "cq-a").obj(),
        "lq_b": LocalQueue("lq-b", "team-b", "cq-b").obj(),
        "lq_c": LocalQueue("lq-c", "team-c", "cq-c").obj(),
        "job": j.obj(),
        "wl_a": wl("job-trainer-00001", "team-a", "lq-a").owner(j).admission(
            Admission("cq-a").assignment(flavors={"cpu": "default-flavor"}, usage={"cpu": "1"})).conditions(
            condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a", at),
            condition("Admitted", "True", "Admitted", "The workload is admitted", at)).obj(),
        "wl_b": wl("job-b-00002", "team-b", "lq-b").obj(),
        "wl_c": wl("job-c-00003", "team-c", "lq-c").obj(),
    }
    objs["pod"] = Pod("trainer-x", "team-a").owner(j).workload("job-trainer-00001").obj()
    objs["victim"] = wl("job-v-00004", "team-b", "lq-b").condition(condition(
        "Evicted", "True", "Preempted", f"Preempted to accommodate a workload (UID: {objs['wl_b']['metadata']['uid']},"
        " JobUID: x) due to prioritization in the ClusterQueue; preemptor path: /research/cq-b; preemptee path: "
        "/research/cq-b")).obj()
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
    ev = Event(o["job"], "FailedCreate", 'Error creating: pods "x" is forbidden: exceeded quota: q').obj()
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
    ev = Event(o["job"], "FailedCreate", 'Error creating: pods "x" is forbidden: exceeded quota: q').obj()
    ns = Namespace("team-a").obj()
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


def _with_event(name: str) -> tuple[ClusterState, dict[str, Any]]:
    """The state of a catalog scenario, and its Event."""
    from tests.unit.test_catalog import SCENARIOS

    scenario = next(s for s in SCENARIOS if s["name"] == name)
    return ClusterState.from_objects(scenario["objects"]), next(o for o in scenario["objects"] if o["kind"] == "Event")


def _about(event: dict[str, Any], **ref: str) -> dict[str, Any]:
    return {**event, "involvedObject": {**event["involvedObject"], **ref}}


def test_an_event_about_a_child_job_marks_the_workload_of_the_owner_above_it() -> None:
    """The Job controller posts FailedCreate on a JobSet's child Job; the JobSet's Workload is the one whose
    verdict it changes (the operator must re-diagnose it when the Event arrives)."""
    state, event = _with_event("jobset-child-job-cannot-create-pods")
    assert state.affected_workloads(event) == {("team-a", "jobset-llm-pretrain-2b4d7")}
    assert state.affected_workloads(_about(event, name="another-job")) == set()


def test_a_warning_about_a_claim_marks_the_workloads_of_its_namespace() -> None:
    """The PersistentVolume controller's Warning on a claim says why the Pods' volume is unbound: the operator must
    re-diagnose the Workloads whose Pods may mount it (those of the claim's namespace) when it arrives."""
    state, event = _with_event("claim-names-a-storage-class-that-does-not-exist")
    assert state.affected_workloads(event) == {("team-a", "job-trainer-5d4c3")}
    assert state.affected_workloads(_about(event, namespace="team-b")) == set()


def test_a_group_workload_counts_only_its_own_groups_pods() -> None:
    """LeaderWorkerSet: one Workload per group, but one leader StatefulSet owns every group's leader Pod; the
    owner chain would hand group 0 the leader of group 1 (a gated Pod in a running group)."""
    def meta(name: str, uid: str, owner: dict[str, str] | None = None, **extra: object) -> dict[str, object]:
        return {"name": name, "namespace": "team-a", "uid": uid, "creationTimestamp": "2026-11-30T09:00:00Z",
                **({"ownerReferences": [{**owner, "controller": True}]} if owner else {}), **extra}

    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "srv", "uid": "u-lws"}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "srv", "uid": "u-sts"}
    objs: list[dict[str, object]] = [
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta("srv", "u-lws"),
         "spec": {}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("srv", "u-sts", lws), "spec": {}}]
    for group in (0, 1):
        objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                     "metadata": meta(f"leaderworkerset-srv-{group}", f"u-wl-{group}", lws,
                                      annotations={"kueue.x-k8s.io/is-group-workload": "true"}),
                     "spec": {"queueName": "q", "podSets": []}, "status": {}})
        objs.append({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}, "status": {"phase": "Pending"},
                     "metadata": meta(f"srv-{group}", f"u-pod-{group}", sts, annotations={
                         "kueue.x-k8s.io/pod-group-name": f"leaderworkerset-srv-{group}"})})
    state = ClusterState.from_objects(objs)
    for group in (0, 1):
        pods = state.pods_of(state.workloads[("team-a", f"leaderworkerset-srv-{group}")])
        assert [p["metadata"]["name"] for p in pods] == [f"srv-{group}"]


def test_a_provisioning_request_config_re_diagnoses_the_workloads_of_queues_with_a_provisioning_check() -> None:
    """Its retryStrategy and class are in the provisioning check's verdict: a change must reach those Workloads;
    without it in the input the verdict says nothing of its settings."""
    from datetime import datetime

    from kueue_doctor import diagnose_objects

    from .test_catalog import SCENARIOS

    scenario = next(s for s in SCENARIOS if s["name"] == "provisioning-retry-is-the-last")
    objects = scenario["objects"]
    state = ClusterState.from_objects(objects)
    config = next(o for o in objects if o["kind"] == "ProvisioningRequestConfig")
    assert state.provisioning_configs == {"dws-config": config}
    assert state.affected_workloads(config) == {("team-a", "job-sample-1a2b3")}
    state.remove(config)
    assert state.provisioning_configs == {}
    now = datetime.fromisoformat(scenario["now"].replace("Z", "+00:00"))
    without = [o for o in objects if o["kind"] != "ProvisioningRequestConfig"]
    message = next(d for d in diagnose_objects(without, now) if d["metadata"]["name"] == "job-sample-1a2b3")
    assert "retryStrategy.backoffLimitCount is used up" in message["status"]["message"]
