"""The engine on snapshots recorded from the real local cluster (Kueue v0.19.2, Kubernetes v1.36.3).

Each fixture is everything ``tests/e2e/test_scenarios.py`` read back from the API server at the
moment it asserted a verdict (``KUEUE_DOCTOR_RECORD_FIXTURES=1`` re-records them). Offline, the
engine must reach the same verdict on the same bytes: when Kueue or kube-scheduler change a text,
the e2e test fails first, the fixture is re-recorded, and this test keeps the new text covered.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.engine.queue_position import with_positions
from kueue_doctor.kube.load import newest_timestamp
from kueue_doctor.state import ClusterState

NO_GRACE = timedelta(0)  # replayed as `explain -f` replays a dump: its time is only its newest timestamp
FIXTURES = Path(__file__).resolve().parents[1] / "e2e" / "fixtures"

# fixture -> Job name -> (stage, reason, cause, actionBy)
EXPECTED: dict[str, dict[str, tuple[str, str, str, str]]] = {
    "scenario-exceeds-nominal-quota": {"blog": ("Admission", "ExceedsMaxQuota", "ExceedsNominalQuota", "QueueAdmin")},
    "scenario-waiting-for-unused-quota": {
        "blog": ("Admission", "WaitingForQuota", "InsufficientUnusedQuota", "Nobody"),
        "hog": ("Running", "Running", "PodsReady", "Nobody"),
    },
    # tests/e2e/test_visibility.py: Kueue had evaluated the first two when its visibility API was read
    "scenario-visibility-positions": {
        **dict.fromkeys(("urgent", "old-low"), ("Admission", "WaitingForQuota", "InsufficientUnusedQuota", "Nobody")),
        **dict.fromkeys(("theirs-low", "new-low"), ("Admission", "NotYetEvaluated", "PendingEvaluation", "Nobody")),
        "hog": ("Scheduling", "ContainersNotStarting", "ContainerCreating", "Nobody")},
    "scenario-local-queue-not-found": {
        "lost": ("Admission", "QueueMisconfigured", "LocalQueueNotFound", "WorkloadOwner")},
    "scenario-cluster-queue-not-found": {
        "orphan": ("Admission", "QueueMisconfigured", "ClusterQueueNotFound", "ClusterAdmin")},
    "scenario-cluster-queue-stopped": {"held": ("Admission", "QueueStopped", "ClusterQueueStopped", "ClusterAdmin")},
    "scenario-flavor-not-found": {
        "flavorless": ("Admission", "QueueMisconfigured", "FlavorNotFound", "ClusterAdmin")},
    "scenario-namespace-not-selected": {
        "outsider": ("Admission", "QueueMisconfigured", "NamespaceNotSelected", "ClusterAdmin")},
    "scenario-resource-not-covered": {
        "gpu": ("Admission", "QueueMisconfigured", "ResourceNotCovered", "WorkloadOwner")},
    "scenario-limitrange-resource-not-covered": {
        "scratch": ("Admission", "QueueMisconfigured", "ResourceNotCovered", "ClusterAdmin")},
    "scenario-borrowing-running": {"borrower": ("Running", "Running", "PodsReady", "Nobody")},
    "scenario-borrowing-limit": {
        "greedy": ("Admission", "ExceedsMaxQuota", "BorrowingLimitReached", "ClusterAdmin")},
    "scenario-unschedulable-node-labels": {
        "stranded": ("Scheduling", "PodsUnschedulable", "NodeSelectorMismatch", "ClusterAdmin")},
    "scenario-unschedulable-node-taint": {
        "untolerated": ("Scheduling", "PodsUnschedulable", "UntoleratedTaint", "ClusterAdmin")},
    "scenario-unschedulable-pod-too-large": {
        "whale": ("Scheduling", "PodsUnschedulable", "PodTooLarge", "WorkloadOwner")},
    "scenario-unschedulable-insufficient-cpu": {
        "late": ("Scheduling", "PodsUnschedulable", "InsufficientResources", "ClusterAdmin"),
        "hog": ("Running", "Running", "PodsReady", "Nobody")},
    # a drain: the evicted Pod's Error is history (status.pods.history), the verdict is its replacement's
    "scenario-drained-pod-replaced": {
        "drained": ("Scheduling", "PodsUnschedulable", "FailedScheduling", "ClusterAdmin")},
    "scenario-unschedulable-job-node-selector": {
        "picky": ("Scheduling", "PodsUnschedulable", "NodeSelectorMismatch", "WorkloadOwner")},
    # the claim's own Warning (PersistentVolume controller) names the StorageClass that does not exist
    "scenario-unschedulable-claim-storage-class-missing": {
        "stateful": ("Scheduling", "PodsUnschedulable", "VolumeNotBound", "ClusterAdmin")},
    "scenario-flavor-taint": {"picky": ("Admission", "QueueMisconfigured", "NoMatchingFlavor", "WorkloadOwner")},
    # regression: a bound Pod the kubelet has not reported yet was PodsNotReady / WorkloadOwner
    "scenario-bound-not-started": {
        "slow": ("Scheduling", "ContainersNotStarting", "ContainerCreating", "Nobody")},
    "scenario-preemption-in-progress": {
        "preemptor": ("Admission", "WaitingForPreemption", "PreemptionInProgress", "Nobody"),
        "victim": ("Admission", "Preempted", "InClusterQueue", "Nobody"),
    },
    "scenario-preempted-requeued": {"victim": ("Admission", "WaitingForQuota", "InsufficientUnusedQuota", "Nobody")},
    # kueue#7301: the preemptor kept at the head of its BestEffortFIFO queue while its victim cannot stop
    "scenario-sticky-head-blocks-the-queue": {
        "hotfix": ("Admission", "NotYetEvaluated", "BlockedByQueueHead", "Nobody"),
        "preemptor": ("Admission", "WaitingForPreemption", "PreemptionInProgress", "Nobody"),
        "victim": ("Admission", "Preempted", "InClusterQueue", "Nobody")},
    "scenario-running": {"fine": ("Running", "Running", "PodsReady", "Nobody")},
    "scenario-finished": {"done": ("Finished", "Finished", "Succeeded", "Nobody")},
    "scenario-finished-failed": {"crash": ("Finished", "Finished", "Failed", "WorkloadOwner")},
    # topology-aware scheduling (tests/e2e/test_kueue_features.py): blocks/racks over fake nodes, one tainted, one cordoned
    "scenario-tas": {
        "fits": ("Running", "Running", "PodsReady", "Nobody"),
        "busy": ("Admission", "WaitingForQuota", "TopologyPlacementFailed", "Nobody"),
        "anywhere": ("Admission", "WaitingForQuota", "TopologyPlacementFailed", "Nobody"),
        "block": ("Admission", "ExceedsMaxQuota", "TopologyPlacementFailed", "ClusterAdmin"),
        "huge": ("Admission", "ExceedsMaxQuota", "TopologyPlacementFailed", "WorkloadOwner"),
    },
    # fair sharing on (Kueue Configuration fairSharing): cq-b's Job would borrow and preempts cq-a's borrower
    "scenario-fair-sharing-preemption": {
        "hog": ("Admission", "Preempted", "InCohortFairSharing", "Nobody"),
        "claim": ("Admission", "WaitingForPreemption", "PreemptionInProgress", "Nobody"),
    },
    # a two-level cohort tree: inner (borrowingLimit 1) under root, cq-b lending 2 to root
    "scenario-cohort-tree": {
        "greedy": ("Admission", "ExceedsMaxQuota", "BorrowingLimitReached", "ClusterAdmin"),
        "borrower": ("Running", "Running", "PodsReady", "Nobody"),
        # inner's borrowingLimit is used up while cq-b's lent quota sits idle in root: the limit holds it back
        "more": ("Admission", "WaitingForQuota", "BorrowingLimitReached", "Nobody"),
    },
    # ProvisioningRequest admission checks (tests/e2e/test_kueue_features.py; the test plays the cluster autoscaler)
    "scenario-provisioning-pending": {
        "gpu": ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckPending", "Nobody")},
    "scenario-provisioning-accepted": {
        "gpu": ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckPending", "Nobody")},
    "scenario-provisioning-provisioned": {"gpu": ("Running", "Running", "PodsReady", "Nobody")},
    "scenario-provisioning-capacity-revoked": {
        "gpu": ("Admission", "Deactivated", "AdmissionCheckRejected", "WorkloadOwner")},
    "scenario-provisioning-booking-expired": {
        "late": ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckRetry", "Nobody")},
    "scenario-provisioning-failed": {
        "backoff": ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckRetry", "Nobody"),
        "again": ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckPending", "Nobody"),
        "nomore": ("Admission", "Deactivated", "AdmissionCheckRejected", "WorkloadOwner"),
    },
}

# The same scenarios recorded with Kueue restarted on UnadmittedWorkloadsObservability=true (the v0.20 default):
# the granular QuotaReserved reasons, the same messages, the same verdicts (tests/e2e/kueue_reasons.py).
GRANULAR = ("scenario-exceeds-nominal-quota", "scenario-waiting-for-unused-quota", "scenario-local-queue-not-found",
            "scenario-cluster-queue-not-found", "scenario-cluster-queue-stopped", "scenario-flavor-not-found",
            "scenario-namespace-not-selected", "scenario-resource-not-covered",
            "scenario-limitrange-resource-not-covered", "scenario-borrowing-limit",
            "scenario-flavor-taint", "scenario-preemption-in-progress", "scenario-preempted-requeued",
            "scenario-provisioning-failed", "scenario-tas", "scenario-cohort-tree")
EXPECTED.update({f"{name}-granular": EXPECTED[name] for name in GRANULAR})

# The same snapshots with every Kueue object read back through kueue.x-k8s.io/v1beta1 (Kueue's conversion webhook):
# spec.cohort, topologyAssignment.domains, the v1beta1 status fields; the same verdicts and messages.
V1BETA1 = tuple(f"{name}{wording}" for name in ("scenario-tas", "scenario-cohort-tree", "scenario-provisioning-failed")
                for wording in ("", "-granular"))
EXPECTED.update({f"{name}-v1beta1": EXPECTED[name.removesuffix("-granular")] for name in V1BETA1})

# Workloads without a Job left (ownerRef gone): fixture -> Workload name prefix -> verdict.
EXPECTED_BY_WORKLOAD: dict[str, dict[str, tuple[str, str, str, str]]] = {
    "scenario-owner-deleted-workload-finished": {
        "job-gone-": ("Finished", "Finished", "OwnerNotFound", "Nobody")},
}

# The owner scenarios of tests/e2e/test_owner_scenarios.py: fixture -> owner "Kind/name" (or
# "Workload/<name prefix>") -> (reasons, None = any; cause).
OWNER_SCENARIOS: dict[str, dict[str, tuple[tuple[str, ...] | None, str]]] = {
    "scenario-no-workload-integration-disabled": {"JobSet/trainer": (("NoWorkload",), "IntegrationNotEnabled")},
    "scenario-no-workload-namespace-not-managed": {"Job/stuck": (("NoWorkload",), "NamespaceNotManaged")},
    "scenario-job-suspended-by-other-manager": {"Job/held": (("JobSuspended",), "SuspendedByOtherManager")},
    "scenario-job-managed-by-multikueue-in-a-plain-queue": {"Job/exported": (("PodsNotCreated",), "ExternallyManaged")},
    "scenario-ghost-reservation": {"Workload/job-ghost-": (None, "GhostReservation")},
    "scenario-requeue-loop-evicting": {"Job/looping": (("Evicted",), "RequeueLoop")},
    "scenario-requeue-loop-backoff": {"Job/looping": (("Evicted", "Preempted"), "RequeueLoop")},
    # the Kueue family, live (tests/e2e/test_family_*.py, issue 9)
    "scenario-family-pod-group-incomplete": {"Pod/member-0": (("NoWorkload",), "PodGroupIncomplete")},
    "scenario-family-pod-group-running": {"Workload/duo": (("Running",), "PodsReady")},
    "scenario-family-plain-pod-exceeds-quota": {"Workload/pod-lonely-": (("ExceedsMaxQuota",), "ExceedsNominalQuota")},
    "scenario-family-statefulset-quota": {"Workload/statefulset-web-": (("ExceedsMaxQuota",), "ExceedsNominalQuota")},
    "scenario-family-deployment-quota": {
        "Workload/pod-web-5c6dbb9ff8-5kjdd-": (("Running",), "PodsReady"),
        "Workload/pod-web-5c6dbb9ff8-7t4bw-": (("WaitingForQuota",), "InsufficientUnusedQuota")},
    "scenario-family-jobset-running": {"JobSet/trainer": (("Running",), "PodsReady")},
    "scenario-family-jobset-exceeds-quota": {"JobSet/greedy": (("ExceedsMaxQuota",), "ExceedsNominalQuota")},
    "scenario-family-jobset-workers-unschedulable": {"JobSet/split": (("PodsUnschedulable",), "NodeSelectorMismatch")},
    "scenario-family-jobset-suspended-waiting": {
        "JobSet/first": (("Running",), "PodsReady"),
        "JobSet/second": (("WaitingForQuota",), "InsufficientUnusedQuota")},
    "scenario-family-jobset-deactivated": {"JobSet/paused": (("Deactivated",), "DeactivatedByUser")},
    "scenario-family-multikueue-dispatched": {"Job/trainer": (("Running",), "DispatchedToWorkerCluster")},
    "scenario-family-multikueue-worker-lost": {"Job/trainer": (("Running",), "DispatchedToWorkerCluster")},
    "scenario-family-multikueue-worker-unreachable": {
        "Job/trainer": (("QueueMisconfigured",), "AdmissionCheckInactive")},
    "scenario-family-multikueue-worker-secret-missing": {
        "Job/trainer": (("QueueMisconfigured",), "AdmissionCheckInactive")},
    "scenario-family-multikueue-worker-kubeconfig-insecure": {
        "Job/trainer": (("QueueMisconfigured",), "AdmissionCheckInactive")},
    "scenario-family-multikueue-no-worker-quota": {
        "Job/trainer": (("WaitingForAdmissionChecks",), "AdmissionCheckPending")},
    "scenario-family-multikueue-rejected": {"Job/trainer": (("Deactivated",), "AdmissionCheckRejected")},
    "scenario-family-ray-rayjob-pending-quota": {
        "Job/hog": (("Running",), "PodsReady"),
        "RayJob/train": (("WaitingForQuota",), "InsufficientUnusedQuota")},
    "scenario-family-ray-rayjob-workers-unschedulable": {"RayJob/tpu": (("PodsUnschedulable",), "NodeSelectorMismatch")},
    "scenario-family-ray-raycluster-head-image-pull": {
        "RayCluster/broken": (("ContainersNotStarting",), "ImagePullBackOff")},
    "scenario-family-ray-raycluster-exceeds-quota": {"RayCluster/huge": (("ExceedsMaxQuota",), "ExceedsNominalQuota")},
    "scenario-family-ray-rayservice-exceeds-quota": {
        "RayService/serve": (("ExceedsMaxQuota",), "ExceedsNominalQuota")},
    "scenario-family-ray-rayservice-worker-starting": {
        "RayService/serve": (("ContainersNotStarting",), "ContainerCreating")},
    "scenario-family-ray-rayservice-running-serve-not-ready": {"RayService/serve": (("Running",), "PodsRunning")},
    "scenario-family-ray-rayservice-evicted-serve-not-ready": {"RayService/serve": (("Evicted",), "RequeueBackoff")},
    "scenario-family-trainer-running": {"TrainJob/llama": (("Running",), "PodsReady")},
    "scenario-family-trainer-pending-quota": {
        "Job/hog": (("Running",), "PodsReady"),
        "TrainJob/waits": (("WaitingForQuota",), "InsufficientUnusedQuota")},
    "scenario-family-trainer-pods-unschedulable": {"TrainJob/pinned": (("PodsUnschedulable",), "NodeSelectorMismatch")},
    "scenario-family-trainer-integration-disabled": {"TrainJob/orphan": (("NoWorkload",), "IntegrationNotEnabled")},
    "scenario-family-appwrapper-running": {"AppWrapper/train": (("Running",), "PodsReady")},
    "scenario-family-appwrapper-exceeds-quota": {"AppWrapper/greedy": (("ExceedsMaxQuota",), "ExceedsNominalQuota")},
    "scenario-family-appwrapper-pods-unschedulable": {
        "AppWrapper/pinned": (("PodsUnschedulable",), "NodeSelectorMismatch")},
    "scenario-family-appwrapper-pod-failed-unseen": {"AppWrapper/flaky": (("ContainersNotStarting",), "PodsFailed")},
    "scenario-family-appwrapper-resetting": {"AppWrapper/flaky": (("PodsNotCreated",), "PodsPending")},
    "scenario-family-appwrapper-failed": {"AppWrapper/doomed": (("Finished",), "Failed")},
    # a Workload per LeaderWorkerSet group (leaderworkerset-<lws>-<group>-<hash>), its Pods gated until admitted
    "scenario-family-lws-second-group-waits": {
        "Workload/leaderworkerset-serve-0-": (("Running",), "PodsReady"),
        "Workload/leaderworkerset-serve-1-": (("WaitingForQuota",), "InsufficientUnusedQuota")},
    "scenario-family-lws-exceeds-quota": {
        "Workload/leaderworkerset-huge-0-": (("ExceedsMaxQuota",), "ExceedsNominalQuota")},
    "scenario-family-lws-local-queue-missing": {
        "Workload/leaderworkerset-lost-0-": (("QueueMisconfigured",), "LocalQueueNotFound")},
}
# MultiKueue snapshots read back through kueue.x-k8s.io/v1beta1 (MultiKueueCluster spec.kubeConfig, by Kueue's
# conversion webhook): the same verdicts (tests/unit/test_multikueue.py compares the messages too)
MULTIKUEUE_V1BETA1 = ("scenario-family-multikueue-dispatched", "scenario-family-multikueue-worker-unreachable",
                      "scenario-family-multikueue-worker-secret-missing",
                      "scenario-family-multikueue-worker-kubeconfig-insecure")
OWNER_SCENARIOS.update({f"{name}-v1beta1": OWNER_SCENARIOS[name] for name in MULTIKUEUE_V1BETA1})


def _load(name: str) -> list[dict[str, Any]]:
    path = FIXTURES / f"{name}.yaml"
    return [o for o in yaml.safe_load_all(path.read_text()) if o]


def _by_job(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE)
    for d in out:
        AdmissionDiagnosis.model_validate(d)
    return {d["spec"]["ownerRef"]["name"]: d["status"] for d in out if "ownerRef" in d["spec"]}


def test_every_scenario_fixture_has_an_expectation() -> None:
    recorded = {p.stem for p in FIXTURES.glob("scenario-*.yaml")}
    expected = set(EXPECTED) | set(EXPECTED_BY_WORKLOAD) | set(OWNER_SCENARIOS)
    assert recorded == expected, f"fixtures without expectations: {recorded - expected}, " \
                                 f"expectations without fixtures: {expected - recorded}"


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_recorded_scenario_keeps_its_verdict(fixture: str) -> None:
    diagnoses = _by_job(_load(fixture))
    for job, expected in EXPECTED[fixture].items():
        st = diagnoses[job]
        assert (st["stage"], st["reason"], st["cause"], st["actionBy"]) == expected, (job, st["message"])


@pytest.mark.parametrize("fixture", sorted(EXPECTED_BY_WORKLOAD))
def test_recorded_ownerless_workload_keeps_its_verdict(fixture: str) -> None:
    objects = _load(fixture)
    diagnoses = diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE)
    for prefix, expected in EXPECTED_BY_WORKLOAD[fixture].items():
        st = next(d["status"] for d in diagnoses if (d["spec"].get("workloadRef") or {}).get("name", "").startswith(prefix))
        assert (st["stage"], st["reason"], st["cause"], st["actionBy"]) == expected, (prefix, st["message"])


def _is_target(d: dict[str, Any], target: str) -> bool:
    """``Kind/name`` of the owner, or ``Workload/<name prefix>``."""
    kind, _, name = target.partition("/")
    if kind == "Workload":
        return bool((d["spec"].get("workloadRef") or {}).get("name", "").startswith(name))
    ref = d["spec"].get("ownerRef") or {}
    return (ref.get("kind"), ref.get("name")) == (kind, name)


@pytest.mark.parametrize("fixture", sorted(OWNER_SCENARIOS))
def test_recorded_owner_scenario_keeps_its_verdict(fixture: str) -> None:
    objects = _load(fixture)
    for target, (reasons, cause) in OWNER_SCENARIOS[fixture].items():
        diagnoses = diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE)
        for d in diagnoses:
            AdmissionDiagnosis.model_validate(d)
        found = [d["status"] for d in diagnoses if _is_target(d, target)]
        assert found, f"{fixture}: no diagnosis for {target}"
        st = found[0]
        assert (reasons is None or st["reason"] in reasons) and st["cause"] == cause, (target, st)


def _quota(st: dict[str, Any], resource: str) -> dict[str, Any]:
    return next(q for q in st["quota"] if q["resource"] == resource)


def test_headlamp_numbers_come_from_kueue() -> None:
    st = _by_job(_load("scenario-exceeds-nominal-quota"))["blog"]
    for resource in ("cpu", "pods"):  # Kueue names both shortfalls in one message
        q = _quota(st, resource)
        assert (q["requested"], q["nominal"], q["maximum"], q["source"]) == ("3", "2", "2", "Kueue"), q


def test_borrowing_limit_numbers() -> None:
    q = _quota(_by_job(_load("scenario-borrowing-limit"))["greedy"], "cpu")
    assert (q["requested"], q["nominal"], q["borrowingLimit"], q["maximum"]) == ("3", "1", "1", "2"), q


def test_preemption_links_preemptor_and_victim() -> None:
    d = _by_job(_load("scenario-preemption-in-progress"))
    preemptor, victim = d["preemptor"], d["victim"]
    assert [b["role"] for b in preemptor["blockedBy"]] == ["Victim"]
    assert [b["role"] for b in victim["blockedBy"]] == ["Preemptor"]
    assert victim["lastEviction"]["underlyingCause"] == "InClusterQueue"
    requeued = _by_job(_load("scenario-preempted-requeued"))["victim"]
    assert requeued["lastEviction"]["reason"] == "Preempted"
    assert _quota(requeued, "cpu")["missing"] == "1"


def test_kube_scheduler_136_taint_text_names_the_node_taint_from_the_nodes() -> None:
    st = _by_job(_load("scenario-unschedulable-node-taint"))["untolerated"]
    assert "node(s) had untolerated taint(s)" in st["pods"]["waiting"][0]["message"]
    # kube-scheduler 1.36 does not name the taint; the Nodes in the snapshot do
    assert "0 of those tolerate kueue-doctor.local/dedicated=gpu:NoSchedule" in st["message"], st["message"]
    assert st["blocker"]["name"] == "kueue-doctor.local/dedicated=gpu:NoSchedule", st["blocker"]


def test_recorded_scheduling_causes_keep_their_blocker_and_node_counts() -> None:
    """The real kube-scheduler texts and Nodes, offline: what blocks, with the numbers, and the node funnel."""
    whale = _by_job(_load("scenario-unschedulable-pod-too-large"))["whale"]
    assert (whale["blocker"]["kind"], whale["blocker"]["requested"], whale["blocker"]["available"]) == (
        "PodTooLarge", "3", "2"), whale["blocker"]
    assert [s["constraint"] for s in whale["nodeMatches"]][-1] == "Allocatable", whale["nodeMatches"]
    late = _by_job(_load("scenario-unschedulable-insufficient-cpu"))["late"]
    assert (late["blocker"]["kind"], late["blocker"]["name"], late["blocker"]["source"]) == (
        "Resource", "cpu", "Estimate"), late["blocker"]
    assert {s["constraint"]: s["nodes"] for s in late["nodeMatches"]}["Free"] == 0, late["nodeMatches"]
    drained = _by_job(_load("scenario-drained-pod-replaced"))["drained"]
    assert [h["category"] for h in drained["pods"]["history"]] == ["Replaced"], drained["pods"]
    assert "DisruptionTarget EvictionByEvictionAPI" in drained["message"], drained["message"]
    picky = _by_job(_load("scenario-unschedulable-job-node-selector"))["picky"]
    assert picky["blocker"]["kind"] == "NodeSelector" and picky["remedies"][0]["actionBy"] == "WorkloadOwner", picky
    stateful = _by_job(_load("scenario-unschedulable-claim-storage-class-missing"))["stateful"]
    assert "says ProvisioningFailed" in stateful["message"] and "does not exist" in stateful["message"], stateful


LEGACY_REASONS = {"Pending", "Inadmissible"}


@pytest.mark.parametrize("fixture", GRANULAR)
def test_both_wordings_give_one_verdict_and_say_which_kueue_wrote(fixture: str) -> None:
    """Per Job pending in both recordings: the legacy one carries Pending/Inadmissible, the granular one a
    granular reason; the verdicts are equal and each message names the reason Kueue wrote in that recording."""
    said = {}
    for name, wording in ((fixture, "legacy wording"), (f"{fixture}-granular", "granular wording")):
        objects = _load(name)
        reasons = {wl["metadata"]["name"]: c["reason"] for wl in objects if wl.get("kind") == "Workload"
                   for c in wl.get("status", {}).get("conditions", [])
                   if c["type"] == "QuotaReserved" and c["status"] == "False"}
        assert reasons, name
        assert all((r in LEGACY_REASONS) == (wording == "legacy wording") for r in reasons.values()), reasons
        for job, st in _by_job(objects).items():
            if st["stage"] != "Admission" or f"({wording}" not in st["message"]:
                continue
            wl_reason = next(r for r in reasons.values() if f"reason {r} ({wording}" in st["message"])
            said[(job, wording)] = (st["reason"], st["cause"], st["actionBy"], wl_reason)
    legacy = {job: v[:3] for (job, w), v in said.items() if w == "legacy wording"}
    granular = {job: v[:3] for (job, w), v in said.items() if w == "granular wording"}
    assert legacy and legacy == granular, said


def test_provisioning_request_states_are_named_from_what_kueue_wrote() -> None:
    """Which ProvisioningRequest condition is behind each check state, with the attempt and back-off."""
    pending = _by_job(_load("scenario-provisioning-pending"))["gpu"]["message"]
    assert "(attempt 1) has no condition yet: the cluster autoscaler has not accepted it" in pending, pending
    failed = _by_job(_load("scenario-provisioning-failed"))
    assert "(attempt 1) is Failed: the cluster autoscaler could not provision the capacity" in \
        failed["backoff"]["message"] and "after a 30s back-off" in failed["backoff"]["message"], failed["backoff"]
    assert "(attempt 2) has no condition yet" in failed["again"]["message"], failed["again"]
    assert "Failed with no retries left" in failed["nomore"]["message"], failed["nomore"]
    expired = _by_job(_load("scenario-provisioning-booking-expired"))["late"]["message"]
    assert "is BookingExpired: the capacity it booked expired before the Workload was admitted" in expired, expired
    revoked = _by_job(_load("scenario-provisioning-capacity-revoked"))["gpu"]["message"]
    assert "CapacityRevoked: the cluster autoscaler took back the nodes it had provisioned" in revoked, revoked


def test_tas_names_the_level_and_the_numbers() -> None:
    """Legacy wording (no TopologyPlacementFailed reason): never-fits is computed from the Nodes, as Kueue's
    granular reason says it in the other recording."""
    d = _by_job(_load("scenario-tas"))
    assert "requires one kueue-doctor.local/rack domain" in d["busy"]["message"], d["busy"]
    assert "Kueue can place only 0 of 2 pod(s) now" in d["busy"]["message"], d["busy"]
    assert "not counted: 1 cordoned" in d["block"]["message"], d["block"]
    assert "largest of the 2 kueue-doctor.local/block domains holds 2 pod(s)" in d["huge"]["message"], d["huge"]


def test_cohort_tree_numbers_are_computed_and_agree_with_kueue() -> None:
    d = _by_job(_load("scenario-cohort-tree"))
    assert "capped by Cohort inner-" in d["greedy"]["message"] and "estimate" not in d["greedy"]["message"], d
    assert _quota(d["more"], "cpu")["borrowable"] == "0", d["more"]["quota"]
    assert "Cohort inner-" in d["more"]["message"] and "borrowingLimit 1 stops its subtree" in d["more"]["message"]
    cohort_raise = [r for r in d["more"].get("remedies", []) if r["kind"] == "Cohort"]
    assert [(r["now"], r["enough"]) for r in cohort_raise] == [("1", "2")], d["more"].get("remedies")


@pytest.mark.parametrize("fixture", V1BETA1)
def test_v1beta1_read_back_gives_the_same_diagnosis(fixture: str) -> None:
    old = _load(f"{fixture}-v1beta1")
    assert {o["apiVersion"] for o in old if o["apiVersion"].startswith("kueue.x-k8s.io/")} == {"kueue.x-k8s.io/v1beta1"}
    new, back = _by_job(_load(fixture)), _by_job(old)
    for job in EXPECTED[fixture]:
        keys = ("stage", "reason", "cause", "actionBy", "message")
        assert [new[job][k] for k in keys] == [back[job][k] for k in keys], (job, new[job], back[job])


def test_rayjob_shortfall_is_the_last_pod_sets_cumulative_figure() -> None:
    """Kueue counts the earlier pod sets in a later one's "N more needed" (head 1 + workers 2 + submitter 100m
    against 2 free): the Workload lacks 1100m, not 1 (the workers' part) nor 2100m (the two figures added)."""
    st = _by_job(_load("scenario-family-ray-rayjob-pending-quota"))["train"]
    assert "Needs 1100m more cpu in flavor rf-911e00, all its pod sets together," in st["message"], st["message"]
    assert "counting the pod sets placed before it" in st["message"], st["message"]
    freed = [r for r in st["remedies"] if r["field"].endswith("nominalQuota")]
    assert [(r["now"], r["enough"]) for r in freed] == [("4", "5100m")], st["remedies"]
    # the blocker asks what the message lacks it for: all pod sets together (3100m), 2 of it unused, no pod set's own
    assert (st["blocker"]["requested"], st["blocker"]["available"]) == ("3100m", "2"), st["blocker"]
    assert "podSet" not in st["blocker"], st["blocker"]


def _positions(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    state = ClusterState.from_objects(objects)
    diagnoses = with_positions(state, diagnose(state, newest_timestamp(objects), grace=NO_GRACE))
    return {d["spec"]["ownerRef"]["name"]: d["status"] for d in diagnoses if d["status"].get("queuePosition")}


def test_kueues_recorded_visibility_answer_confirms_the_computed_positions() -> None:
    """Kueue's PendingWorkloadsSummary as the real Kueue v0.19.2 returned it, next to the objects of that moment."""
    st = _positions(_load("scenario-visibility-positions"))
    assert {job: (s["queuePosition"]["position"], s["queuePosition"]["visibility"]) for job, s in st.items()} == {
        "urgent": (1, 1), "old-low": (2, 2), "theirs-low": (3, 3), "new-low": (4, 4)}
    assert not any("visibility API" in s["message"] for s in st.values())


def test_kueues_recorded_answer_names_the_workloads_a_one_namespace_input_lacks() -> None:
    objects = _load("scenario-visibility-positions")
    other = next(o["metadata"]["namespace"] for o in objects if o["kind"] == "Workload"
                 and o["metadata"]["name"].startswith("job-theirs-low-"))
    st = _positions([o for o in objects if o["kind"] != "Workload" or o["metadata"]["namespace"] != other])
    assert (st["new-low"]["queuePosition"]["position"], st["new-low"]["queuePosition"]["visibility"]) == (3, 4)
    assert f"(from namespaces {other}, not in the input: `explain -A` reads every namespace)" in st["new-low"]["message"]


# ---- Kubeflow Trainer v2, live (tests/e2e/test_family_trainer.py) ----------------------------


def test_a_trainjobs_pods_are_found_through_its_jobset_and_jobs() -> None:
    """TrainJob -> JobSet -> Job -> Pod, as the real Trainer and JobSet controllers built it."""
    objects = _load("scenario-family-trainer-running")
    chain = {(o["kind"], o["metadata"]["name"]): [r["kind"] for r in o["metadata"].get("ownerReferences", [])]
             for o in objects if o["kind"] in ("JobSet", "Job")}
    assert chain[("JobSet", "llama")] == ["TrainJob"] and chain[("Job", "llama-node-0")] == ["JobSet"], chain
    st = next(d["status"] for d in diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE)
              if _is_target(d, "TrainJob/llama"))
    assert (st["pods"]["running"], st["pods"]["expected"]) == (2, 2), st["pods"]


def test_a_trainjob_kueue_never_took_is_explained_not_diagnosed(capsys: pytest.CaptureFixture[str]) -> None:
    """free has no queue-name label and runs: no diagnosis, and `explain trainjob/free` says why and that Kueue's
    webhook refuses the label while it runs (the e2e test saw the refusal)."""
    from kueue_doctor.cli import main

    objects = _load("scenario-family-trainer-running")
    assert not [d for d in diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE)
                if _is_target(d, "TrainJob/free")]
    code = main(["explain", "-f", str(FIXTURES / "scenario-family-trainer-running.yaml"), "trainjob/free"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "has no label kueue.x-k8s.io/queue-name and manageJobsWithoutQueueName is off" in err, err
    assert "Kueue's webhook refuses the label while it runs" in err and "spec.suspend: true" in err, err


def test_an_unschedulable_trainjob_is_sent_to_its_runtime_and_not_to_the_flavor_whose_label_nodes_carry() -> None:
    objects = _load("scenario-family-trainer-pods-unschedulable")
    st = next(d["status"] for d in diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE)
              if _is_target(d, "TrainJob/pinned"))
    assert [(r["actionBy"], r["kind"], r["name"]) for r in st["remedies"]] == [
        ("WorkloadOwner", "TrainJob", "pinned")], st["remedies"]  # the flavor's pool label is on the node
    remedy = st["remedies"][0]
    assert remedy["field"].startswith("spec.runtimePatches[*].") and remedy["field"].endswith(
        ".nodeSelector[example.test/accelerator]"), remedy
    assert "its runtime, TrainingRuntime torch-tpu (spec.runtimeRef)" in remedy["message"], remedy["message"]


def test_a_trainjob_too_large_for_any_node_is_told_to_lower_resources_per_node() -> None:
    """The recorded unschedulable TrainJob, its Pods made larger than the node instead (as kube-scheduler words
    it): a TrainJob sets its Pods' requests in spec.trainer.resourcesPerNode (a runtime patch has no resources)."""
    objects = _load("scenario-family-trainer-pods-unschedulable")
    too_large = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption " \
                "victims found for incoming pod."
    for o in objects:
        if o["kind"] == "Pod":
            o["spec"]["nodeSelector"].pop("example.test/accelerator")
            for c in o["spec"]["containers"]:
                c["resources"] = {"requests": {"cpu": "16"}, "limits": {"cpu": "16"}}
            for c in o["status"]["conditions"]:
                if c["type"] == "PodScheduled":
                    c["message"] = too_large
        elif o["kind"] == "Event" and o.get("reason") == "FailedScheduling":
            o["message"] = too_large
    st = next(d["status"] for d in diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE)
              if _is_target(d, "TrainJob/pinned"))
    assert (st["reason"], st["cause"]) == ("PodsUnschedulable", "PodTooLarge"), st["message"]
    owner = [r for r in st["remedies"] if r["actionBy"] == "WorkloadOwner"]
    assert [(r["kind"], r["field"]) for r in owner] == [("TrainJob", "spec.trainer.resourcesPerNode.requests[cpu]")]
