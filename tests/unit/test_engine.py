"""The engine's verdicts on realistic snapshots, one behaviour a user relies on per test."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from tests.builders import (
    Admission,
    AdmissionCheck,
    ClusterQueue,
    Event,
    Job,
    LocalQueue,
    Namespace,
    Node,
    Pod,
    ResourceFlavor,
    Workload,
    condition,
    pod_condition,
)

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
NS = "team-a"


def verdict(objects: list[dict[str, Any]], name: str, now: datetime = NOW) -> dict[str, Any]:
    out = diagnose_objects(objects, now)
    for d in out:
        AdmissionDiagnosis.model_validate(d)  # every verdict is a valid CR, exactly what the operator writes
    matches = [d for d in out if d["metadata"]["name"] == name]
    assert matches, f"no diagnosis for {name}: {[d['metadata']['name'] for d in out]}"
    return matches[0]["status"]


def team_a_cq(cpu: str = "2") -> ClusterQueue:
    return ClusterQueue("team-a-cq").quotas({"default-flavor": {"cpu": cpu}})


def queue_setup(cq: ClusterQueue | None = None) -> list[dict[str, Any]]:
    return [ResourceFlavor("default-flavor").obj(), (cq or team_a_cq()).obj(),
            LocalQueue("user-queue", NS, "team-a-cq").obj()]


def workload(name: str) -> Workload:
    return Workload(name, NS).queue("user-queue").request("cpu", "1")


def pending(message: str, reason: str = "Pending") -> Workload:
    return workload("job-sample-1a2b3").condition(condition("QuotaReserved", "False", reason, message))


def admitted(cq: str, at: str = "2026-11-30T09:00:05Z") -> list[dict[str, Any]]:
    return [condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", at),
            condition("Admitted", "True", "Admitted", "The workload is admitted", at)]


def one_pod(cq: str, count: int = 1, cpu: str = "1") -> Admission:
    return Admission(cq).assignment(count=count, flavors={"cpu": "default-flavor"}, usage={"cpu": cpu})


# ---------------------------------------------------------------------------------------------- admission


def test_request_above_nominal_without_cohort_is_exceeds_max_quota_with_the_numbers() -> None:
    msg = ("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
           "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)")
    st = verdict([*queue_setup(), pending(msg).count(3).obj()], "job-sample-1a2b3")
    assert (st["stage"], st["reason"], st["cause"], st["actionBy"]) == (
        "Admission", "ExceedsMaxQuota", "ExceedsNominalQuota", "QueueAdmin")
    assert st["clusterQueue"] == "team-a-cq"
    assert st["quota"] == [{"flavor": "default-flavor", "resource": "cpu", "requested": "3", "nominal": "2",
                            "used": "0", "maximum": "2", "source": "Kueue"}]
    assert "Needs 3 cpu in flavor default-flavor" in st["message"]
    assert "never give more than 2 (nominal 2, no cohort)" in st["message"]


def test_insufficient_unused_quota_is_waiting_for_quota_with_missing_amount_and_usage() -> None:
    msg = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
           "1 more needed")
    cq = team_a_cq("4").reservation("default-flavor", "cpu", "3").workloads(reserving=1, admitted=1)
    st = verdict([*queue_setup(cq), pending(msg).count(2).obj()], "job-sample-1a2b3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("WaitingForQuota", "InsufficientUnusedQuota", "Nobody")
    assert st["quota"][0]["missing"] == "1"
    assert st["quota"][0]["used"] == "3"
    assert st["quota"][0]["nominal"] == "4"
    assert "Needs 1 more cpu" in st["message"] and "3 in use" in st["message"]


def test_granular_reason_vocabulary_gives_the_same_verdict() -> None:
    msg = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
           "1 more needed")
    st = verdict([*queue_setup(team_a_cq("4")), pending(msg, reason="WaitingForQuota").obj()], "job-sample-1a2b3")
    assert st["reason"] == "WaitingForQuota"


def test_borrowing_limit_below_the_request_names_the_borrowing_limit() -> None:
    objs = [ResourceFlavor("default-flavor").obj(),
            ClusterQueue("team-a-cq").cohort("research")
            .quotas({"default-flavor": {"cpu": {"nominalQuota": "2", "borrowingLimit": "1"}}}).obj(),
            ClusterQueue("team-b-cq").cohort("research").quotas({"default-flavor": {"cpu": "6"}}).obj(),
            LocalQueue("user-queue", NS, "team-a-cq").obj(),
            pending("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
                    "previously considered podsets requests (0) + current podset request (4) > maximum capacity (3)"
                    ).count(4).obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"]) == ("ExceedsMaxQuota", "BorrowingLimitReached")
    assert st["cohort"] == "research"
    line = st["quota"][0]
    assert (line["nominal"], line["borrowingLimit"], line["maximum"]) == ("2", "1", "3")
    assert line["borrowable"] == "1"  # 6 unused in team-b, capped by the borrowingLimit
    assert "borrowingLimit 1" in st["message"]


def test_missing_local_queue_blames_the_workload_owner_and_lists_existing_queues() -> None:
    objs = [*queue_setup(), pending("LocalQueue typo-queue doesn't exist", reason="Inadmissible")
            .queue("typo-queue").obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("QueueMisconfigured", "LocalQueueNotFound",
                                                           "WorkloadOwner")
    assert "typo-queue" in st["message"] and "user-queue" in st["message"]


def test_local_queue_pointing_at_missing_cluster_queue() -> None:
    objs = [ResourceFlavor("default-flavor").obj(), LocalQueue("user-queue", NS, "ghost-cq").obj(),
            pending("ClusterQueue ghost-cq doesn't exist", reason="Inadmissible").obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("QueueMisconfigured", "ClusterQueueNotFound",
                                                           "ClusterAdmin")
    assert st["clusterQueue"] == "ghost-cq"


def test_stopped_cluster_queue_is_queue_stopped_not_misconfigured() -> None:
    cq = team_a_cq().stop_policy("Hold").active("False", "Stopped", "Can't admit new workloads: is stopped.")
    objs = [*queue_setup(cq), pending("ClusterQueue team-a-cq is inactive", reason="Inadmissible").obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("QueueStopped", "ClusterQueueStopped", "ClusterAdmin")


def test_missing_resource_flavor_makes_the_cluster_queue_inactive() -> None:
    objs = [ClusterQueue("team-a-cq").quotas({"gpu-flavor": {"cpu": "2"}}).active(
                "False", "FlavorNotFound",
                "Can't admit new workloads: references missing ResourceFlavor(s): gpu-flavor.").obj(),
            LocalQueue("user-queue", NS, "team-a-cq").obj(), ResourceFlavor("other").obj(),
            pending("ClusterQueue team-a-cq is inactive", reason="Inadmissible").obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("QueueMisconfigured", "FlavorNotFound", "ClusterAdmin")
    assert "gpu-flavor" in st["message"]


def test_namespace_not_selected_by_cluster_queue() -> None:
    objs = [*queue_setup(team_a_cq().namespace_selector({"matchLabels": {"team": "b"}})),
            Namespace(NS).label("team", "a").obj(),
            pending("workload namespace doesn't match ClusterQueue selector").obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"]) == ("QueueMisconfigured", "NamespaceNotSelected")
    assert '"team":"b"' in st["message"]


def test_resource_not_covered_blames_the_request() -> None:
    objs = [*queue_setup(), pending("couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable "
                                    "in ClusterQueue").request("nvidia.com/gpu", "1").obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("QueueMisconfigured", "ResourceNotCovered",
                                                           "WorkloadOwner")
    assert "nvidia.com/gpu" in st["message"] and "covers cpu" in st["message"]


def test_no_quota_condition_yet_is_not_yet_evaluated() -> None:
    st = verdict([*queue_setup(), workload("job-new-00001").created("2026-11-30T09:59:50Z").obj()], "job-new-00001")
    assert (st["stage"], st["reason"], st["cause"], st["actionBy"]) == ("Admission", "NotYetEvaluated",
                                                                        "PendingEvaluation", "Nobody")


def test_strict_fifo_head_blocks_the_workloads_behind_it() -> None:
    head = pending("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                   "default-flavor, 1 more needed").created("2026-11-30T08:30:00Z").obj()
    behind = workload("job-behind-00002").created("2026-11-30T09:10:00Z").obj()
    st = verdict([*queue_setup(team_a_cq().queueing_strategy("StrictFIFO")), head, behind], "job-behind-00002")
    assert (st["reason"], st["cause"]) == ("NotYetEvaluated", "BlockedByQueueHead")
    assert st["blockedBy"] == [{"role": "QueueHead", "namespace": NS, "name": "job-sample-1a2b3",
                                "uid": head["metadata"]["uid"]}]


def test_preemptor_waits_for_victims_named_in_blocked_by() -> None:
    preemptor = pending("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                        "default-flavor, 1 more needed. Pending the preemption of 1 workload(s)").priority(100).obj()
    victim = workload("job-low-00003").conditions(
        *admitted("team-a-cq"),
        condition("Evicted", "True", "Preempted",
                  f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: j-1) due to "
                  "prioritization in the ClusterQueue; preemptor path: /team-a-cq; preemptee path: /team-a-cq"),
        condition("Preempted", "True", "InClusterQueue", "same")).admission(one_pod("team-a-cq")).obj()
    objs = [*queue_setup(), preemptor, victim]
    st = verdict(objs, "job-sample-1a2b3")
    assert (st["reason"], st["cause"]) == ("WaitingForPreemption", "PreemptionInProgress")
    assert st["blockedBy"][0]["name"] == "job-low-00003" and st["blockedBy"][0]["role"] == "Victim"
    vst = verdict(objs, "job-low-00003")
    assert (vst["reason"], vst["cause"]) == ("Preempted", "InClusterQueue")
    assert vst["lastEviction"]["by"] == f"Workload {NS}/job-sample-1a2b3"
    assert vst["blockedBy"][0]["role"] == "Preemptor"


def test_preempted_then_retried_shows_the_current_blocker_and_keeps_the_eviction_story() -> None:
    eviction_msg = ("Preempted to accommodate a workload (UID: abc, JobUID: def) due to prioritization in the "
                    "ClusterQueue; preemptor path: /team-a-cq; preemptee path: /team-a-cq")
    wl = workload("job-low-00004").conditions(
        condition("Evicted", "True", "Preempted", eviction_msg, "2026-11-30T09:10:00Z"),
        condition("Requeued", "True", "Preempted", eviction_msg, "2026-11-30T09:10:05Z"),
        condition("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused "
                  "quota for cpu in flavor default-flavor, 1 more needed", "2026-11-30T09:10:05Z")).obj()
    st = verdict([*queue_setup(), wl], "job-low-00004")
    assert st["reason"] == "WaitingForQuota"
    assert st["lastEviction"]["reason"] == "Preempted"
    assert st["lastEviction"]["underlyingCause"] == "InClusterQueue"


def test_requeue_backoff_after_pods_ready_timeout_is_evicted() -> None:
    wl = workload("job-slow-00005").conditions(
        condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/job-slow-00005",
                  "2026-11-30T09:50:00Z"),
        condition("Requeued", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/job-slow-00005"),
        condition("QuotaReserved", "False", "Pending", "Exceeded the PodsReady timeout team-a/job-slow-00005"),
    ).requeue_state(2, "2026-11-30T10:02:00Z").obj()
    st = verdict([*queue_setup(), wl], "job-slow-00005")
    assert (st["reason"], st["cause"]) == ("Evicted", "RequeueBackoff")
    assert "2026-11-30T10:02:00Z" in st["message"]


def _kueue_config(requeuing: dict[str, Any]) -> dict[str, Any]:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
           "waitForPodsReady": {"timeout": "10m", "requeuingStrategy": requeuing}}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(doc)}}


def _timed_out(count: int, requeue_at: str) -> dict[str, Any]:
    said = "Exceeded the PodsReady timeout team-a/job-slow-00005"
    return workload("job-slow-00005").conditions(
        condition("Evicted", "True", "PodsReadyTimeout", said, "2026-11-30T09:50:00Z"),
        condition("Requeued", "False", "PodsReadyTimeout", said, "2026-11-30T09:50:00Z"),
        condition("QuotaReserved", "False", "Pending", said, "2026-11-30T09:50:01Z"),
    ).requeue_state(count, requeue_at).eviction_stats("PodsReadyTimeout", "WaitForStart", count).obj()


@pytest.mark.parametrize(("requeuing", "count", "requeue_at", "said"), [
    ({"backoffLimitCount": 2}, 1, "2026-11-30T10:01:00Z",
     "requeued 1 of 2 times, next try at 2026-11-30T10:01:00Z (back-off 60s); the 2nd PodsReady timeout from now "
     "deactivates it (backoffLimitCount 2, base 60s, max 3600s: waitForPodsReady.requeuingStrategy in ConfigMap "
     "kueue-system/kueue-manager-config)"),
    ({"backoffLimitCount": 2, "backoffBaseSeconds": 30}, 2, "2026-11-30T10:01:00Z",
     "requeued 2 of 2 times, next try at 2026-11-30T10:01:00Z (back-off 60s); the next PodsReady timeout "
     "deactivates it"),
    ({"backoffBaseSeconds": 600, "backoffMaxSeconds": 900}, 2, "2026-11-30T10:05:00Z",
     "requeued 2 time(s), next try at 2026-11-30T10:05:00Z (back-off 900s); backoffLimitCount unset (base 600s, "
     "max 900s"),
    # review B7: explicit zeros are kept (Kueue's defaults.go cmp.Or on the pointers): a max of 0 is no cap
    ({"backoffBaseSeconds": 3000, "backoffMaxSeconds": 0}, 2, "2026-11-30T10:05:00Z",
     "requeued 2 time(s), next try at 2026-11-30T10:05:00Z (back-off 6000s); backoffLimitCount unset (base 3000s, "
     "max 0s, no cap"),
    ({"backoffBaseSeconds": 0}, 2, "2026-11-30T10:05:00Z",
     "requeued 2 time(s), next try at 2026-11-30T10:05:00Z (back-off 0s); backoffLimitCount unset (base 0s, "
     "max 3600s"),
])
def test_requeue_backoff_counts_against_backoff_limit_count_from_kueues_configuration(
        requeuing: dict[str, Any], count: int, requeue_at: str, said: str) -> None:
    """kueue#15255: the limit, the back-off and the next try come from the Configuration Kueue runs with."""
    st = verdict([*queue_setup(), _kueue_config(requeuing), _timed_out(count, requeue_at)], "job-slow-00005")
    assert (st["reason"], st["cause"]) == ("Evicted", "RequeueBackoff")
    assert said in st["message"], st["message"]


def test_deactivated_workload_says_how_to_reactivate() -> None:
    wl = workload("job-off-00006").active(False).obj()
    st = verdict([*queue_setup(), wl], "job-off-00006")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("Deactivated", "DeactivatedByUser", "WorkloadOwner")
    assert '"active":true' in st["message"]


def test_pending_admission_check_after_quota_reservation() -> None:
    wl = workload("job-prov-00007").condition(
        condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-cq")
    ).admission(one_pod("team-a-cq")).admission_check("prov-req", "Pending", "Waiting for capacity",
                                                      "2026-11-30T09:01:00Z").obj()
    ac = AdmissionCheck("prov-req").active("True", "Active", "The admission check is active").obj()
    st = verdict([*queue_setup(team_a_cq().admission_check("prov-req")), ac, wl], "job-prov-00007")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("WaitingForAdmissionChecks", "AdmissionCheckPending",
                                                           "Nobody")
    assert st["admissionChecks"] == [{"name": "prov-req", "state": "Pending", "message": "Waiting for capacity",
                                      "lastTransitionTime": "2026-11-30T09:01:00Z",
                                      "controllerName": "kueue.x-k8s.io/provisioning-request", "active": True}]


# ---------------------------------------------------------------------------------------------- scheduling


def admitted_job(parallelism: int = 2) -> tuple[Job, Workload]:
    j = Job("trainer", NS).queue("user-queue").parallelism(parallelism).request("cpu", "1").suspend(False)
    wl = workload("job-trainer-5d4c3").owner(j).count(parallelism).conditions(
        *admitted("team-a-cq"),
        condition("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded", "2026-11-30T09:00:05Z"),
    ).admission(one_pod("team-a-cq", count=parallelism, cpu=str(parallelism)))
    return j, wl


def trainer_pod(name: str, j: Job) -> Pod:
    return Pod(name, NS).owner(j).workload("job-trainer-5d4c3")


def test_unschedulable_pods_after_admission_are_a_scheduling_problem_with_scheduler_counts() -> None:
    j, wl = admitted_job()
    msg = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    pods = [trainer_pod(f"trainer-{n}", j).unschedulable(msg, "2026-11-30T09:00:07Z").obj() for n in "ab"]
    st = verdict([*queue_setup(), j.obj(), wl.obj(), *pods], "job-trainer-5d4c3")
    assert (st["stage"], st["reason"], st["cause"]) == ("Scheduling", "PodsUnschedulable", "InsufficientResources")
    assert st["blocker"] == {"kind": "Resource", "name": "cpu", "flavor": "default-flavor", "podSet": "main",
                             "nodes": 3, "totalNodes": 3}
    assert st["pods"]["expected"] == 2 and st["pods"]["scheduled"] == 0
    assert "Insufficient cpu" in st["pods"]["summary"]
    assert "evicts it at about 2026-11-30T09:30:05Z" not in st["message"]  # the deadline has passed at 10:00
    assert "timeout passed at 2026-11-30T09:30:05Z" in st["message"]


def test_the_pods_ready_deadline_is_the_configured_one() -> None:
    """waitForPodsReady.timeout from Kueue's Configuration sets when Kueue evicts; turned off, no deadline."""
    import yaml

    def config(ready: dict[str, object]) -> dict[str, object]:
        doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "waitForPodsReady": ready}
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {"controller_manager_config.yaml": yaml.safe_dump(doc)}}

    j, wl = admitted_job()
    msg = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    pods = [trainer_pod(f"trainer-{n}", j).unschedulable(msg, "2026-11-30T09:00:07Z").obj() for n in "ab"]
    objs = [*queue_setup(), j.obj(), wl.obj(), *pods]
    st = verdict([*objs, config({"enable": True, "timeout": "2h"})], "job-trainer-5d4c3")
    assert ("With waitForPodsReady's timeout (2h00m, ConfigMap kueue-system/kueue-manager-config), Kueue evicts it at "
            "about 2026-11-30T11:00:05Z") in st["message"], st["message"]
    st = verdict([*objs, config({"enable": False})], "job-trainer-5d4c3")
    assert "waitForPodsReady" not in st["message"], st["message"]


def test_flavor_node_labels_matching_no_node_are_named() -> None:
    j, wl = admitted_job(1)
    msg = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    p = trainer_pod("trainer-a", j).unschedulable(msg, "2026-11-30T09:00:07Z").obj()
    objs = [ResourceFlavor("default-flavor").node_labels({"pool": "gpu-a100"}).obj(), team_a_cq().obj(),
            LocalQueue("user-queue", NS, "team-a-cq").obj(), Node("n1").label("pool", "cpu").obj(),
            Node("n2").label("pool", "cpu").obj(), j.obj(), wl.obj(), p]
    st = verdict(objs, "job-trainer-5d4c3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("PodsUnschedulable", "NodeSelectorMismatch", "ClusterAdmin")
    assert "Nodes: 2 nodes; 0 carry pool=gpu-a100." in st["message"]


def test_a_node_labelled_later_is_counted_by_the_next_pass_on_the_same_state() -> None:
    """The node hint is kept per index, and Node changes do not rebuild it: the operator's next pass must
    still count a Node that was labelled meanwhile."""
    from kueue_doctor.engine.diagnose import diagnose
    from kueue_doctor.state import ClusterState

    j, wl = admitted_job(1)
    msg = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    p = trainer_pod("trainer-a", j).unschedulable(msg, "2026-11-30T09:00:07Z").obj()
    state = ClusterState.from_objects([
        ResourceFlavor("default-flavor").node_labels({"pool": "gpu-a100"}).obj(), team_a_cq().obj(),
        LocalQueue("user-queue", NS, "team-a-cq").obj(), Node("n1").label("pool", "cpu").obj(),
        Node("n2").label("pool", "cpu").obj(), j.obj(), wl.obj(), p])
    assert "2 nodes; 0 carry pool=gpu-a100." in diagnose(state, NOW)[0]["status"]["message"]
    state.upsert(Node("n2").label("pool", "gpu-a100").obj())
    assert "2 nodes; 1 carry pool=gpu-a100;" in diagnose(state, NOW)[0]["status"]["message"]
    state.remove(Node("n2").obj())
    assert "1 node; 0 carry pool=gpu-a100." in diagnose(state, NOW)[0]["status"]["message"]


def test_image_pull_back_off_is_containers_not_starting_for_the_owner() -> None:
    j, wl = admitted_job(1)
    p = trainer_pod("trainer-a", j).node("n1").condition(pod_condition("PodScheduled", "True", "2026-11-30T09:00:07Z")
                                                         ).container_status({
        "name": "main", "ready": False, "restartCount": 0, "image": "registry.example/typo:1", "imageID": "",
        "started": False, "state": {"waiting": {"reason": "ImagePullBackOff",
                                                "message": 'Back-off pulling image "registry.example/typo:1"'}}}).obj()
    st = verdict([*queue_setup(), j.obj(), wl.obj(), p], "job-trainer-5d4c3")
    assert (st["reason"], st["cause"], st["actionBy"]) == ("ContainersNotStarting", "ImagePullBackOff",
                                                           "WorkloadOwner")


def test_job_failed_create_from_resource_quota_is_pods_not_created() -> None:
    j, wl = admitted_job(1)
    ev = Event(j, "FailedCreate", 'Error creating: pods "trainer-x7k2p" is forbidden: exceeded quota: compute, '
               "requested: requests.cpu=1, used: requests.cpu=4, limited: requests.cpu=4").obj()
    st = verdict([*queue_setup(), j.obj(), wl.obj(), ev, Node("n1").obj()], "job-trainer-5d4c3")
    assert (st["reason"], st["cause"]) == ("PodsNotCreated", "FailedCreate")
    assert "ResourceQuota" in st["message"]


def test_admitted_but_still_suspended_job() -> None:
    j, wl = admitted_job(1)
    st = verdict([*queue_setup(), j.suspend(True).obj(), wl.obj()], "job-trainer-5d4c3")
    assert (st["stage"], st["reason"]) == ("Scheduling", "JobSuspended")


def test_running_when_pods_ready() -> None:
    j, wl = admitted_job(1)
    wl.condition(condition("PodsReady", "True", "Started", "All pods reached readiness and the workload is running"))
    st = verdict([*queue_setup(), j.obj(), wl.obj()], "job-trainer-5d4c3")
    assert (st["stage"], st["reason"], st["cause"]) == ("Running", "Running", "PodsReady")


def test_finished_workload() -> None:
    wl = workload("job-done-00008").conditions(*admitted("team-a-cq"),
                                               condition("Finished", "True", "Succeeded", "Job finished successfully"))
    st = verdict([*queue_setup(), wl.obj()], "job-done-00008")
    assert (st["stage"], st["reason"], st["cause"]) == ("Finished", "Finished", "Succeeded")


def test_multikueue_admission_never_says_job_suspended() -> None:
    j, wl = admitted_job(1)
    j.suspend(True)  # the manager cluster's Job stays suspended: it runs on the worker
    wl.status_field("clusterName", "worker-eu-1")
    st = verdict([*queue_setup(), j.obj(), wl.obj()], "job-trainer-5d4c3")
    assert (st["stage"], st["cause"]) == ("Running", "DispatchedToWorkerCluster")
    assert "worker-eu-1" in st["message"]


# ---------------------------------------------------------------------------------------------- robustness


def test_v1beta1_objects_read_like_v1beta2() -> None:
    cq = ClusterQueue("team-a-cq").cohort("research").quotas(
        {"default-flavor": {"cpu": {"nominalQuota": "2", "borrowingLimit": "1"}}}).obj()
    cq["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    cq["spec"]["cohort"] = cq["spec"].pop("cohortName")
    msg = ("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
           "previously considered podsets requests (0) + current podset request (4) > maximum capacity (3)")
    wl = pending(msg).obj()
    wl["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    st = verdict([ResourceFlavor("default-flavor").obj(), cq, LocalQueue("user-queue", NS, "team-a-cq").obj(), wl],
                 "job-sample-1a2b3")
    assert (st["cohort"], st["cause"]) == ("research", "BorrowingLimitReached")


def test_unknown_message_is_unknown_with_the_text_quoted() -> None:
    st = verdict([*queue_setup(), pending("something Kueue 0.25 invented").obj()], "job-sample-1a2b3")
    assert (st["stage"], st["reason"], st["cause"]) == ("Unknown", "Unknown", "UnrecognizedMessage")
    assert "something Kueue 0.25 invented" in st["message"]


@pytest.mark.parametrize("broken", [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": NS}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": NS, "uid": "x"},
     "spec": {"podSets": "not a list"}, "status": {"conditions": [{"type": 3}, "junk", None]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": NS, "uid": "x"},
     "spec": {}, "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": 42}],
                            "admission": "nope", "requeueState": {"requeueAt": "yesterday"}}},
])
def test_malformed_workloads_get_a_verdict_not_an_exception(broken: dict[str, Any]) -> None:
    st = verdict([*queue_setup(), broken], "w")
    assert st["stage"] in ("Unknown", "Admission")


def test_diagnosis_is_owned_by_the_workload_without_controller_or_block_owner_deletion() -> None:
    wl = pending("LocalQueue typo doesn't exist", reason="Inadmissible").queue("typo").obj()
    d = next(x for x in diagnose_objects([wl], NOW))
    assert d["metadata"]["ownerReferences"] == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                                  "name": wl["metadata"]["name"], "uid": wl["metadata"]["uid"]}]
    assert d["metadata"]["labels"]["kueue-doctor.dev/reason"] == "QueueMisconfigured"
    assert d["spec"]["workloadRef"]["uid"] == wl["metadata"]["uid"]


def test_diagnosis_labels_name_the_owner_so_users_can_select_by_job() -> None:
    _, built = admitted_job()
    wl = built.obj()
    d = next(x for x in diagnose_objects([wl], NOW))
    ref = wl["metadata"]["ownerReferences"][0]
    assert d["metadata"]["labels"]["kueue-doctor.dev/owner-kind"] == ref["kind"] == "Job"
    assert d["metadata"]["labels"]["kueue-doctor.dev/owner-name"] == ref["name"]
    long = pending("LocalQueue typo doesn't exist", reason="Inadmissible").queue("typo").owner(
        Job("x" * 64, "team-a")).obj()
    labels = next(x for x in diagnose_objects([long], NOW))["metadata"]["labels"]
    assert "kueue-doctor.dev/owner-name" not in labels  # longer than a label value may be: left out, not cut
    assert labels["kueue-doctor.dev/owner-kind"] == "Job"


def test_verdicts_do_not_change_with_the_clock_alone() -> None:
    """The operator writes only on change: the same objects a minute later must give the same objects."""
    j, wl = admitted_job()
    msg = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    pods = [trainer_pod(f"trainer-{n}", j).unschedulable(msg, "2026-11-30T09:00:07Z").obj() for n in "ab"]
    objs = [*queue_setup(), j.obj(), wl.obj(), *pods, workload("job-new-00001").obj(),
            pending("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                    "default-flavor, 1 more needed").obj()]
    t1 = datetime(2026, 11, 30, 9, 5, tzinfo=UTC)
    t2 = datetime(2026, 11, 30, 9, 6, tzinfo=UTC)
    assert diagnose_objects(objs, t1) == diagnose_objects(objs, t2)


def test_a_workload_in_requeue_back_off_is_not_the_strict_fifo_head() -> None:
    backoff = workload("job-slow-00005").created("2026-11-30T08:00:00Z").conditions(
        condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/job-slow-00005",
                  "2026-11-30T09:55:00Z"),
        condition("Requeued", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/job-slow-00005"),
        condition("QuotaReserved", "False", "Pending", "Exceeded the PodsReady timeout team-a/job-slow-00005"),
    ).requeue_state(1, "2026-11-30T10:05:00Z").obj()
    behind = workload("job-behind-00002").created("2026-11-30T09:58:00Z").obj()
    st = verdict([*queue_setup(team_a_cq().queueing_strategy("StrictFIFO")), backoff, behind], "job-behind-00002")
    assert st["cause"] == "PendingEvaluation"  # Kueue does not hold the backed-off one in the heap


def test_a_rejected_admission_check_outranks_a_pending_one() -> None:
    wl = workload("job-prov-00007").condition(
        condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-cq")
    ).admission(one_pod("team-a-cq")).admission_check("prov", "Pending", at="2026-11-30T09:01:00Z").admission_check(
        "budget", "Rejected", "over budget", "2026-11-30T09:01:00Z").obj()
    st = verdict([*queue_setup(), wl], "job-prov-00007")
    assert (st["cause"], st["actionBy"]) == ("AdmissionCheckRejected", "WorkloadOwner")


def test_borrowable_counts_what_other_members_already_borrowed() -> None:
    def member(name: str, cpu: str) -> ClusterQueue:
        return ClusterQueue(name).cohort("co").quotas({"default-flavor": {"cpu": cpu}})

    objs = [ResourceFlavor("default-flavor").obj(),
            member("cq-a", "4").reservation("default-flavor", "cpu", "4").obj(), member("cq-b", "4").obj(),
            member("cq-c", "0").reservation("default-flavor", "cpu", "4").obj(),
            LocalQueue("user-queue", NS, "cq-a").obj(),
            pending("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                    "default-flavor, 2 more needed").count(2).obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert st["quota"][0]["borrowable"] == "0"  # cq-c took everything cq-b lent
    assert "could lend about 0 now" in st["message"]


def test_a_large_borrowing_limit_is_not_blamed_when_the_cohort_is_the_limit() -> None:
    objs = [ResourceFlavor("default-flavor").obj(),
            ClusterQueue("team-a-cq").cohort("research")
            .quotas({"default-flavor": {"cpu": {"nominalQuota": "4", "borrowingLimit": "100"}}}).obj(),
            ClusterQueue("team-b-cq").cohort("research").quotas({"default-flavor": {"cpu": "2"}}).obj(),
            LocalQueue("user-queue", NS, "team-a-cq").obj(),
            pending("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
                    "previously considered podsets requests (0) + current podset request (8) > maximum capacity (6)"
                    ).count(8).obj()]
    st = verdict(objs, "job-sample-1a2b3")
    assert st["cause"] == "ExceedsCohortQuota"


@pytest.mark.parametrize(("terms", "labels", "allowed"), [
    ([[{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["master0"]}]], {}, True),  # kueue#2391
    ([[{"key": "pool", "operator": "In", "values": ["a"]}]], {"pool": "a"}, True),
    ([[{"key": "pool", "operator": "In", "values": ["b"]}]], {"pool": "a"}, False),
    ([[{"key": "pool", "operator": "In", "values": ["b"]}], [{"key": "zone", "operator": "Exists"}]],
     {"pool": "a"}, True),  # the second term names no flavor key: it allows every flavor
    ([[{"key": "pool", "operator": "DoesNotExist"}]], {"pool": "a"}, False),
    ([[{"key": "gen", "operator": "Gt", "values": ["3"]}]], {"gen": "4"}, False),  # not evaluated: not said to fit
])
def test_a_required_node_affinity_counts_only_for_the_flavors_node_label_keys(
        terms: list[list[dict[str, Any]]], labels: dict[str, str], allowed: bool) -> None:
    """As Kueue's flavor assigner reads it: a stall is said only for a flavor Kueue could pick for the Pods."""
    from kueue_doctor.engine.admission.stalled import _affinity_allows

    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}}
    assert _affinity_allows(pod, labels) is allowed
