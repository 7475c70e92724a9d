"""Pod-side diagnosis: counting the Pods of an admitted Workload and naming what blocks the others."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_doctor.engine import pods as P
from tests.builders import (
    Event,
    Job,
    Pod,
    container_running,
    container_terminated,
    container_waiting,
    pod_condition,
    ref,
    terminated,
)

CORPUS = Path(__file__).resolve().parents[1] / "cases" / "pod_messages.yaml"
T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
NS = "team-a"
IMAGE = "registry.example.com/team-a/trainer:v9"
TRAIN = Job("train", NS).queue("user-queue").created(T0)


def ts(minutes: float = 0) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro(minutes: float = 0) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def condition(ctype: str, status: str, minutes: float = 0, reason: str | None = None,
              message: str | None = None) -> dict[str, Any]:
    return pod_condition(ctype, status, ts(minutes), reason, message)


def trainer(name: str) -> Pod:
    """A Pod of Job ``train`` (one GPU) as Kueue started it; bound Pods started a minute later."""
    return (Pod(name, NS).owner(TRAIN).workload("job-train-3f2a1").queues("user-queue").created(ts(0))
            .container_name("trainer").image(IMAGE).limit("nvidia.com/gpu", "1").start_time(ts(1)))


def unschedulable(name: str, message: str, minutes: float = 0) -> dict[str, Any]:
    return trainer(name).unschedulable(message, ts(minutes)).obj()


def bound_conditions(ready: bool = False, minutes: float = 1) -> list[dict[str, Any]]:
    flag = "True" if ready else "False"
    not_ready = None if ready else "ContainersNotReady"
    msg = None if ready else "containers with unready status: [trainer]"
    return [
        condition("PodReadyToStartContainers", flag, minutes),
        condition("Initialized", "True", minutes),
        condition("Ready", flag, minutes + (2 if ready else 0), not_ready, msg),
        condition("ContainersReady", flag, minutes, not_ready, msg),
        condition("PodScheduled", "True", minutes),
    ]


def waiting_status(reason: str, message: str = "", name: str = "trainer") -> dict[str, Any]:
    return container_waiting(reason, message, name=name, image=IMAGE)


def waiting_pod(name: str, reason: str, message: str = "") -> dict[str, Any]:
    return (trainer(name).node("gpu-node-1").conditions(*bound_conditions())
            .container_status(waiting_status(reason, message)).obj())


def running_pod(name: str, ready: bool = True, minutes: float = 1) -> dict[str, Any]:
    return (trainer(name).phase("Running").node("gpu-node-1").conditions(*bound_conditions(ready, minutes))
            .container_status(container_running(ts(2), ready=ready, name="trainer", image=IMAGE)).obj())


def _about(name: str, kind: str, uid: str | None) -> dict[str, Any]:
    return ref(kind, name, NS, uid, {"Job": "batch/v1", "ReplicaSet": "apps/v1"}.get(kind, "v1"))


def core_event(pod_name: str, reason: str, message: str, *, minutes: float = 0, count: int = 1,
               uid: str | None = None, kind: str = "Pod", component: str = "kubelet") -> dict[str, Any]:
    """core/v1, as the kubelet and the job controller record it (firstTimestamp, lastTimestamp, count)."""
    return Event(_about(pod_name, kind, uid), reason, message, at=ts(minutes)).source(component).count(count).obj()


def events_v1_event(pod_name: str, reason: str, note: str, *, minutes: float = 0, series: int | None = None,
                    uid: str | None = None, kind: str = "Pod") -> dict[str, Any]:
    """events.k8s.io/v1, as kube-scheduler writes it."""
    ev = Event(_about(pod_name, kind, uid), reason, note, api="events.k8s.io/v1", at=micro(minutes))
    return (ev.series(series, micro(minutes + 5)) if series is not None else ev).obj()


GPU_3 = ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: "
         "0/3 nodes are available: 3 No preemption victims found for incoming pod.")
GPU_TAINT_4 = ("0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient "
               "nvidia.com/gpu. no new claims to deallocate, preemption: 0/4 nodes are available: 1 "
               "Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod.")
SELECTOR_3 = ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. no new "
              "claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
              "scheduling.")
PULL_BACKOFF = ('Back-off pulling image "registry.example.com/team-a/trainer:v9": ErrImagePull: failed to '
                'pull and unpack image "registry.example.com/team-a/trainer:v9": not found')


# ------------------------------------------------------------------------------------------ scheduling


def test_unschedulable_pods_report_the_most_common_node_fit_reason() -> None:
    pods = [unschedulable(f"train-{i}", GPU_TAINT_4) for i in range(7)] + [running_pod("train-7")]
    summary = P.summarize_pods(pods, expected=8)
    assert (summary.created, summary.scheduled, summary.running, summary.ready) == (8, 1, 1, 1)
    [blocker] = summary.blockers
    assert (blocker.category, blocker.reason, blocker.count) == (
        "Unschedulable", "Insufficient nvidia.com/gpu", 7)
    assert blocker.message == GPU_TAINT_4
    assert blocker.pod == "train-0"
    assert blocker.since == T0
    assert summary.failure is not None and summary.failure.total == 4
    assert summary.failure.top_reason == P.NodeFitReason(3, "Insufficient nvidia.com/gpu")


def test_unschedulable_pods_with_different_top_reasons_form_separate_groups() -> None:
    pods = [unschedulable(f"a-{i}", GPU_3) for i in range(3)] + [unschedulable("b-0", SELECTOR_3)]
    summary = P.summarize_pods(pods, expected=4)
    assert [(b.reason, b.count) for b in summary.blockers] == [
        ("Insufficient nvidia.com/gpu", 3), ("node(s) didn't match Pod's node affinity/selector", 1)]
    assert summary.failure is not None and summary.failure.raw == GPU_3


def test_condition_message_is_preferred_over_failed_scheduling_events() -> None:
    pods = [unschedulable("train-0", GPU_3)]
    events = [events_v1_event("train-0", "FailedScheduling", SELECTOR_3, minutes=9, series=4)]
    [blocker] = P.summarize_pods(pods, expected=1, events=events).blockers
    assert blocker.message == GPU_3
    assert blocker.reason == "Insufficient nvidia.com/gpu"


@pytest.mark.parametrize("make_event", [core_event, events_v1_event], ids=["core/v1", "events.k8s.io/v1"])
def test_failed_scheduling_event_fills_in_when_the_condition_has_no_message(make_event: Any) -> None:
    bare = trainer("train-0").condition(condition("PodScheduled", "False", 3, "Unschedulable")).obj()
    events = [make_event("train-0", "FailedScheduling", GPU_3, minutes=1),
              make_event("train-0", "FailedScheduling", SELECTOR_3, minutes=0)]
    [blocker] = P.summarize_pods([bare], expected=1, events=events).blockers
    assert (blocker.category, blocker.reason) == ("Unschedulable", "Insufficient nvidia.com/gpu")
    assert blocker.message == GPU_3  # the newest event
    assert blocker.since == T0  # the earliest time seen: the older event


def test_failed_scheduling_event_alone_makes_a_pod_unschedulable() -> None:
    no_condition = trainer("train-0").obj()
    events = [events_v1_event("train-0", "FailedScheduling", GPU_3, minutes=2)]
    [blocker] = P.summarize_pods([no_condition], expected=1, events=events).blockers
    assert (blocker.category, blocker.reason) == ("Unschedulable", "Insufficient nvidia.com/gpu")


def test_events_about_an_earlier_pod_of_the_same_name_or_another_kind_are_ignored() -> None:
    bare = trainer("train-0").obj()
    events = [core_event("train-0", "FailedScheduling", GPU_3, uid="older-uid"),
              core_event("train-0", "FailedScheduling", GPU_3, kind="Job")]
    [blocker] = P.summarize_pods([bare], expected=1, events=events).blockers
    assert (blocker.category, blocker.reason) == ("Pending", "NoSchedulingAttempt")


def test_scheduler_error_is_reported_as_its_own_reason() -> None:
    msg = 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    broken = trainer("train-0").condition(condition("PodScheduled", "False", 0, "SchedulerError", msg)).obj()
    [blocker] = P.summarize_pods([broken], expected=1).blockers
    assert (blocker.category, blocker.reason, blocker.message) == ("Unschedulable", "SchedulerError", msg)


def test_cluster_without_nodes_is_named_plainly() -> None:
    summary = P.summarize_pods([unschedulable("train-0", "no nodes available to schedule pods")], expected=1)
    assert summary.blockers[0].reason == "no nodes available to schedule pods"
    assert "no nodes available to schedule pods" in summary.describe()


def test_scheduling_gates_are_grouped_by_gate_and_kueue_gates_are_recognised() -> None:
    gated = condition("PodScheduled", "False", 0, "SchedulingGated", P.DEFAULT_SCHEDULING_GATED_MESSAGE)
    pods = [trainer(f"t-{i}").gate("kueue.x-k8s.io/topology").condition(gated).obj() for i in range(3)]
    pods.append(trainer("o-0").gate("example.com/quota-check").condition(gated).obj())
    summary = P.summarize_pods(pods, expected=4)
    kueue, other = summary.blockers
    assert (kueue.category, kueue.reason, kueue.count, kueue.kueue_gated) == (
        "SchedulingGated", "kueue.x-k8s.io/topology", 3, True)
    assert kueue.message == "Scheduling is blocked due to non-empty scheduling gates"
    assert (other.reason, other.kueue_gated) == ("example.com/quota-check", False)
    assert all(P.is_kueue_gate(g) for g in P.KUEUE_GATES)


def test_gated_condition_left_after_the_gates_are_removed_is_pending_not_unschedulable() -> None:
    ungated = trainer("t-0").condition(
        condition("PodScheduled", "False", 0, "SchedulingGated", P.DEFAULT_SCHEDULING_GATED_MESSAGE)).obj()
    [blocker] = P.summarize_pods([ungated], expected=1).blockers
    assert (blocker.category, blocker.reason) == ("Pending", "NoSchedulingAttempt")


def test_scheduler_verdict_after_ungating_comes_from_the_event_not_the_stale_gated_condition() -> None:
    ungated = trainer("t-0").condition(
        condition("PodScheduled", "False", 0, "SchedulingGated", P.DEFAULT_SCHEDULING_GATED_MESSAGE)).obj()
    events = [events_v1_event("t-0", "FailedScheduling", SELECTOR_3, minutes=2)]
    [blocker] = P.summarize_pods([ungated], expected=1, events=events).blockers
    assert (blocker.category, blocker.message) == ("Unschedulable", SELECTOR_3)
    assert blocker.since == T0 + timedelta(minutes=2)


def test_pod_on_a_lost_node_is_failing_with_phase_unknown() -> None:
    lost = running_pod("t-0", ready=False)
    lost["status"]["phase"] = "Unknown"
    [blocker] = P.summarize_pods([lost], expected=1).blockers
    assert (blocker.category, blocker.reason, blocker.detail) == ("Failing", "Unknown", "node gpu-node-1")


def test_unscheduled_pod_without_any_attempt_is_pending_and_names_a_custom_scheduler() -> None:
    [blocker] = P.summarize_pods([trainer("t-0").scheduler("volcano").obj()], expected=1).blockers
    assert (blocker.category, blocker.reason, blocker.detail) == (
        "Pending", "NoSchedulingAttempt", "schedulerName volcano")
    assert blocker.since == T0


# ------------------------------------------------------------------------------------------ startup


def test_container_creating_exposes_since_for_the_engine_to_judge() -> None:
    creating = waiting_pod("train-0", "ContainerCreating")
    summary = P.summarize_pods([creating], expected=1, now=T0 + timedelta(minutes=4))
    [blocker] = summary.blockers
    assert (blocker.category, blocker.reason) == ("ContainersNotStarting", "ContainerCreating")
    assert blocker.since == T0  # creation, earlier than the PodScheduled transition
    assert summary.scheduled == 1 and summary.running == 0
    assert summary.describe().endswith("1 ContainerCreating for 4m")


def test_failed_mount_event_explains_container_creating() -> None:
    creating = waiting_pod("train-0", "ContainerCreating")
    msg = 'MountVolume.SetUp failed for volume "config" : configmap "trainer-config" not found'
    events = [core_event("train-0", "FailedMount", msg, minutes=3, count=7)]
    [blocker] = P.summarize_pods([creating], expected=1, events=events).blockers
    assert (blocker.category, blocker.reason, blocker.message) == (
        "ContainersNotStarting", "FailedMount", msg)
    assert blocker.detail == "ContainerCreating"


def test_the_kubelets_newer_mount_summary_does_not_hide_the_operations_error() -> None:
    creating = waiting_pod("train-0", "ContainerCreating")
    why = ('MountVolume.MountDevice failed for volume "pvc-5b7e" : rpc error: code = DeadlineExceeded desc = context '
           "deadline exceeded")
    summary = ("Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process "
               "volumes=[]: context deadline exceeded")
    events = [core_event("train-0", "FailedMount", why, minutes=3, count=9),
              core_event("train-0", "FailedMount", summary, minutes=5, count=4)]
    [blocker] = P.summarize_pods([creating], expected=1, events=events).blockers
    assert (blocker.reason, blocker.message) == ("FailedMount", why)
    assert P.mount_failure_side(why, []) == "storage"
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}, {"name": "cfg", "configMap": {"name": "c"}}]
    assert P.mount_failure_side(summary, volumes) == "storage"
    assert P.mount_failure_side(summary.replace("[data]", "[cfg]"), volumes) == "owner"
    assert P.mount_failure_side('MountVolume.SetUp failed for volume "cfg" : configmap "c" not found', volumes) == "owner"


def test_a_pull_under_way_names_the_image_and_a_finished_one_does_not() -> None:
    pulling = core_event("train-0", "Pulling", f'Pulling image "{IMAGE}"', minutes=1)
    [blocker] = P.summarize_pods([waiting_pod("train-0", "ContainerCreating")], expected=1,
                                 events=[pulling]).blockers
    assert (blocker.reason, blocker.detail, blocker.message) == (
        "ContainerCreating", "pulling image", f'Pulling image "{IMAGE}"')
    pulled = core_event("train-0", "Pulled", f'Successfully pulled image "{IMAGE}" in 2m0s (2m0s including '
                        "waiting). Image size: 9876543210 bytes.", minutes=3)
    [blocker] = P.summarize_pods([waiting_pod("train-0", "ContainerCreating")], expected=1,
                                 events=[pulling, pulled]).blockers
    assert (blocker.reason, blocker.detail, blocker.message) == ("ContainerCreating", "", "")


_MPI = {"training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-name": "allreduce"}


def _mpi_launcher(reason: str = "Error", code: int = 1) -> dict[str, Any]:
    status = container_waiting("CrashLoopBackOff", "back-off 1m20s restarting failed container=trainer",
                               name="trainer", image=IMAGE, restarts=4,
                               last_terminated=terminated(code, reason, started_at=ts(5), finished_at=ts(6),
                                                          container_id="containerd://2"))
    return (trainer("allreduce-launcher-x").labels({**_MPI, "training.kubeflow.org/job-role": "launcher"})
            .phase("Running").node("n1").conditions(*bound_conditions()).container_status(status).obj())


def _mpi_worker(name: str, ready: bool = False) -> dict[str, Any]:
    pod = running_pod(name, ready=True) if ready else waiting_pod(name, "ContainerCreating")
    pod["metadata"]["labels"].update({**_MPI, "training.kubeflow.org/job-role": "worker"})
    return pod


def test_an_mpi_launcher_failing_while_its_workers_are_not_up_ranks_after_their_wait() -> None:
    """mpi-operator starts the launcher with its workers when the MPIJob started suspended (mpi-operator#615):
    its failures follow from the workers' wait, which leads even though a ContainerCreating wait never does."""
    summary = P.summarize_pods([_mpi_launcher(), _mpi_worker("allreduce-worker-0")], expected=2)
    assert [(b.reason, b.waits_for) for b in summary.blockers] == [("ContainerCreating", ""),
                                                                   ("CrashLoopBackOff", "worker")]


def test_an_mpi_launcher_fails_on_its_own_when_its_workers_are_up_or_it_ran_out_of_memory() -> None:
    ready = P.summarize_pods([_mpi_launcher(), _mpi_worker("allreduce-worker-0", ready=True)], expected=2)
    assert [(b.reason, b.waits_for) for b in ready.blockers] == [("CrashLoopBackOff", "")]
    oom = P.summarize_pods([_mpi_launcher("OOMKilled", 137), _mpi_worker("allreduce-worker-0")], expected=2)
    assert [(b.reason, b.waits_for) for b in oom.blockers] == [("CrashLoopBackOff", ""), ("ContainerCreating", "")]
    other = _mpi_launcher()
    other["metadata"]["labels"]["training.kubeflow.org/operator-name"] = "pytorchjob-controller"
    plain = P.summarize_pods([other, _mpi_worker("allreduce-worker-0")], expected=2)
    assert plain.blockers[0].reason == "CrashLoopBackOff" and not plain.blockers[0].waits_for


def test_image_pull_backoff_is_reported_with_the_kubelet_message() -> None:
    pods = [running_pod(f"ok-{i}") for i in range(3)]
    pods.append(waiting_pod("bad-0", "ImagePullBackOff", PULL_BACKOFF))
    summary = P.summarize_pods(pods, expected=4)
    [blocker] = summary.blockers
    assert (blocker.category, blocker.reason, blocker.message, blocker.pod) == (
        "ContainersNotStarting", "ImagePullBackOff", PULL_BACKOFF, "bad-0")


def test_init_container_errors_win_over_pod_initializing() -> None:
    blocked = trainer("t-0").node("n1").conditions(*bound_conditions()).init_container_status(waiting_status(
        "CreateContainerConfigError", "couldn't find key password in Secret team-a/db", "setup")).container_status(
        waiting_status("PodInitializing")).obj()
    [blocker] = P.summarize_pods([blocked], expected=1).blockers
    assert (blocker.reason, blocker.detail) == ("CreateContainerConfigError", "init container setup")


def test_crashloop_backoff_carries_the_last_termination() -> None:
    status = container_waiting("CrashLoopBackOff", "back-off 5m0s restarting failed container=trainer "
                               "pod=train-0_team-a(uid-train-0)", name="trainer", image=IMAGE, restarts=6,
                               last_terminated=terminated(137, "OOMKilled", started_at=ts(5), finished_at=ts(6),
                                                          container_id="containerd://2"))
    looping = trainer("train-0").phase("Running").node("n1").conditions(*bound_conditions()).container_status(
        status).obj()
    summary = P.summarize_pods([looping], expected=1)
    [blocker] = summary.blockers
    assert (blocker.category, blocker.reason, blocker.detail) == ("Failing", "CrashLoopBackOff",
                                                                  "OOMKilled, exit code 137")
    assert summary.running == 1 and summary.ready == 0
    assert "1 CrashLoopBackOff (OOMKilled, exit code 137)" in summary.describe()


def test_running_pod_failing_its_readiness_probe_is_not_ready() -> None:
    msg = "Readiness probe failed: HTTP probe failed with statuscode: 503"
    events = [core_event("train-0", "Unhealthy", msg, minutes=4, count=30)]
    summary = P.summarize_pods([running_pod("train-0", ready=False)], expected=1, events=events)
    [blocker] = summary.blockers
    assert (blocker.category, blocker.reason, blocker.message) == ("NotReady", "Unhealthy", msg)
    without_event = P.summarize_pods([running_pod("train-0", ready=False)], expected=1).blockers[0]
    assert (without_event.reason, without_event.message) == (
        "NotReady", "containers with unready status: [trainer]")


def test_bound_pod_without_container_status_is_reported() -> None:
    # What a fake node without a kubelet looks like: bound, Pending, no container statuses.
    bound = trainer("train-0").node("fake-a1").condition(condition("PodScheduled", "True", 1)).obj()
    [blocker] = P.summarize_pods([bound], expected=1).blockers
    assert (blocker.category, blocker.reason, blocker.detail) == (
        "ContainersNotStarting", "NoContainerStatus", "node fake-a1")


# ------------------------------------------------------------------------------------------ lifecycle


def test_succeeded_pods_count_as_succeeded_and_are_not_blocked() -> None:
    done = trainer("train-0").phase("Succeeded").node("n1").conditions(*bound_conditions()).obj()
    summary = P.summarize_pods([done, running_pod("train-1")], expected=2)
    assert (summary.succeeded, summary.blockers) == (1, ())


def test_failed_pods_are_failing_with_the_termination_reason() -> None:
    oom = trainer("train-0").phase("Failed").node("n1").conditions(*bound_conditions()).container_status(
        container_terminated(137, "OOMKilled", finished_at=ts(9), name="trainer", image=IMAGE)).obj()
    evicted = trainer("train-1").phase("Failed").node("n1").status_reason(
        "Evicted", "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi. ").obj()
    summary = P.summarize_pods([oom, evicted], expected=2)
    assert summary.failed == 2
    assert {(b.category, b.reason, b.detail) for b in summary.blockers} == {
        ("Failing", "OOMKilled", "OOMKilled, exit code 137"), ("Failing", "Evicted", "")}


def test_terminating_pods_are_counted_apart_and_not_blocked_otherwise() -> None:
    going = running_pod("train-0")
    going["metadata"]["deletionTimestamp"] = ts(20)
    summary = P.summarize_pods([going], expected=1)
    assert (summary.terminating, summary.running, summary.ready) == (1, 0, 0)
    [blocker] = summary.blockers
    assert (blocker.category, blocker.since) == ("Terminating", T0 + timedelta(minutes=20))


def test_ready_times_are_exposed() -> None:
    pods = [running_pod("a", minutes=1), running_pod("b", minutes=5)]
    summary = P.summarize_pods(pods, expected=2)
    assert summary.first_ready == T0 + timedelta(minutes=3)
    assert summary.last_ready == T0 + timedelta(minutes=7)
    assert summary.all_ready


# ------------------------------------------------------------------------------------------ ordering, words


def test_blockers_are_ordered_by_count_then_category_severity() -> None:
    pods = [trainer("g-0").gate("kueue.x-k8s.io/admission").obj(), unschedulable("u-0", GPU_3),
            waiting_pod("w-0", "ImagePullBackOff", PULL_BACKOFF), waiting_pod("w-1", "ImagePullBackOff")]
    summary = P.summarize_pods(pods, expected=4)
    assert [b.category for b in summary.blockers] == [
        "ContainersNotStarting", "Unschedulable", "SchedulingGated"]
    assert summary.blockers[0].message == PULL_BACKOFF  # the most common message; ties -> smallest pod name


def test_describe_gives_the_sre_one_liner() -> None:
    pods = [unschedulable(f"train-{i}", GPU_3) for i in range(7)]
    pods.append(waiting_pod("train-7", "ImagePullBackOff", PULL_BACKOFF))
    summary = P.summarize_pods(pods, expected=8)
    assert summary.describe() == (
        "1/8 scheduled, 0 running, 0 ready: "
        "7 Unschedulable (0/3 nodes: 3 Insufficient nvidia.com/gpu); 1 ImagePullBackOff")


def test_describe_says_how_many_pods_are_missing_and_finished() -> None:
    pods = [unschedulable("train-0", GPU_TAINT_4), trainer("done").phase("Succeeded").node("n1").obj()]
    summary = P.summarize_pods(pods, expected=4, now=T0 + timedelta(minutes=90))
    assert summary.describe() == (
        "2/4 created, 0/4 scheduled, 0 running, 0 ready, 1 succeeded: 1 Unschedulable "
        "(0/4 nodes: 3 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)) for 90m")


def test_describe_when_everything_is_ready() -> None:
    summary = P.summarize_pods([running_pod("a"), running_pod("b")], expected=2)
    assert summary.describe() == "2/2 ready"


def test_messages_are_bounded_to_about_500_characters() -> None:
    long = "0/900 nodes are available: " + ", ".join(f"1 node(s) had untolerated taint {{k{i}: v}}"
                                                      for i in range(300)) + "."
    [blocker] = P.summarize_pods([unschedulable("t-0", long)], expected=1).blockers
    assert len(blocker.message) == P.MESSAGE_LIMIT and blocker.message.endswith(" ...")
    assert blocker.failure is not None and len(blocker.failure.reasons) == 300


# ------------------------------------------------------------------------------------------ events helpers


def test_event_time_and_count_read_both_event_apis() -> None:
    core = core_event("p", "FailedMount", "m", minutes=2, count=5)
    assert P.event_time(core) == T0 + timedelta(minutes=2)
    assert P.event_count(core) == 5
    # core/v1 view of an event written through events.k8s.io: null timestamps, eventTime and series.
    seen_as_core = dict(core, firstTimestamp=None, lastTimestamp=None, count=None, eventTime=micro(1),
                        series={"count": 12, "lastObservedTime": micro(8)})
    assert P.event_time(seen_as_core) == T0 + timedelta(minutes=8)
    assert P.event_first_time(seen_as_core) == T0 + timedelta(minutes=1)
    assert P.event_count(seen_as_core) == 12
    new = events_v1_event("p", "FailedScheduling", "n", minutes=3)
    assert P.event_time(new) == T0 + timedelta(minutes=3)
    assert P.event_count(new) == 1
    assert P.event_count(dict(new, deprecatedCount=4)) == 4
    assert P.event_message(new) == "n"
    assert P.event_time({}) is None and P.event_count({}) == 1


def test_job_failed_create_returns_the_newest_denial() -> None:
    quota = ('Error creating: pods "train-7xk2p" is forbidden: exceeded quota: team-a-quota, requested: '
             "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4")
    webhook = ('Error creating: admission webhook "validate.policy.example.com" denied the request: '
               "images must come from registry.example.com")
    events = [core_event("train", "FailedCreate", quota, minutes=1, kind="Job"),
              events_v1_event("train", "FailedCreate", webhook, minutes=5, kind="Job"),
              core_event("train", "SuccessfulCreate", "Created pod: train-x", minutes=9, kind="Job")]
    assert P.job_failed_create(events) == ("FailedCreate", webhook, T0 + timedelta(minutes=5))
    assert P.job_failed_create(events[:1]) == ("FailedCreate", quota, T0 + timedelta(minutes=1))
    assert P.job_failed_create([]) is None
    # the other controllers' reasons for the same failure (training-operator, KubeRay), on their own objects
    ray = "Failed to create worker Pod for the cluster team-a/rc, " + quota.removeprefix("Error creating: ")
    assert P.job_failed_create([*events, core_event("rc", "FailedToCreateWorkerPod", ray, minutes=7,
                                                    kind="RayCluster")]) == \
        ("FailedToCreateWorkerPod", ray, T0 + timedelta(minutes=7))
    assert P.job_failed_create([core_event("bert", "FailedCreatePod", quota, minutes=2, kind="PyTorchJob")]) == \
        ("FailedCreatePod", quota, T0 + timedelta(minutes=2))


def test_parse_scheduler_message_keeps_the_raw_text_of_unknown_shapes() -> None:
    failure = P.parse_scheduler_message("pod group is unschedulable")
    assert (failure.reasons, failure.total, failure.raw) == ((), None, "pod group is unschedulable")
    assert P.parse_scheduler_message(None).raw == ""  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ corpus


def _corpus() -> list[dict[str, Any]]:
    entries = yaml.safe_load(CORPUS.read_text())
    assert isinstance(entries, list)
    return entries


def _reasons(items: list[list[Any]]) -> tuple[P.NodeFitReason, ...]:
    return tuple(P.NodeFitReason(int(n), str(t)) for n, t in items)


def _corpus_pod(entry: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    kind = entry["kind"]
    if kind == "waiting":
        return waiting_pod("p-0", entry["reason"], entry["message"]), []
    if kind == "init_waiting":
        return trainer("p-0").node("n1").conditions(*bound_conditions()).init_container_status(
            waiting_status(entry["reason"], entry["message"], "setup")).container_status(
            waiting_status("PodInitializing")).obj(), []
    if kind == "crashloop":
        status = container_waiting("CrashLoopBackOff", entry["message"], name="trainer", image=IMAGE,
                                   last_terminated=entry["last_terminated"])
        return trainer("p-0").phase("Running").node("n1").conditions(*bound_conditions()).container_status(
            status).obj(), []
    if kind == "pod_failed":
        statuses = []
        if "terminated" in entry:
            statuses = [{"name": "trainer", "state": {"terminated": entry["terminated"]}}]
        return trainer("p-0").phase("Failed").node("n1").container_status(*statuses).status_reason(
            entry.get("pod_reason"), entry.get("pod_message")).obj(), []
    if kind == "gated":
        return trainer("p-0").gate(*entry["gates"]).condition(
            condition("PodScheduled", "False", 0, "SchedulingGated", entry["message"])).obj(), []
    if kind == "pod_event":
        ev = entry["event"]
        make = core_event if ev["api"] == "core/v1" else events_v1_event
        event = make("p-0", ev["reason"], ev["message"], minutes=1)
        state = entry["pod_state"]
        if state == "container_creating":
            return waiting_pod("p-0", "ContainerCreating"), [event]
        if state == "running_not_ready":
            return running_pod("p-0", ready=False), [event]
        return trainer("p-0").condition(condition("PodScheduled", "False", 0, "Unschedulable")).obj(), [event]
    raise AssertionError(f"unknown corpus kind {kind}")


@pytest.mark.parametrize("entry", _corpus(), ids=lambda e: e["id"])
def test_pod_message_corpus(entry: dict[str, Any]) -> None:
    assert entry.get("source"), "every corpus entry cites where its text comes from"
    expect = entry["expect"]
    if entry["kind"] == "scheduler":
        failure = P.parse_scheduler_message(entry["text"])
        assert failure.raw == entry["text"]
        if "total" in expect:
            assert failure.total == expect["total"]
        if "reasons" in expect:
            assert failure.reasons == _reasons(expect["reasons"])
        assert failure.prefilter == expect.get("prefilter", False)
        if "preemption_reasons" in expect:
            assert failure.preemption_reasons == _reasons(expect["preemption_reasons"])
        if "preemption" in expect:
            assert failure.preemption == expect["preemption"]
        if "post_filter" in expect:
            assert failure.post_filter == tuple(expect["post_filter"])
        if "top" in expect:
            assert failure.top_reason is not None and failure.top_reason.text == expect["top"]
        return
    if entry["kind"] == "job_event":
        ev = entry["event"]
        make = core_event if ev["api"] == "core/v1" else events_v1_event
        found = P.job_failed_create([make("train", ev["reason"], ev["message"], minutes=2, kind="Job")])
        assert found is not None
        assert found[0] == expect["reason"] and expect["message_contains"] in found[1]
        assert found[1] == ev["message"]
        if "denial" in expect:  # which admission plugin refused the Pod, as the verdict names it
            denial = P.create_denial(found[1])
            assert denial is not None
            assert (denial.plugin, denial.name, list(denial.items)) == (
                expect["denial"]["plugin"], expect["denial"]["name"], expect["denial"]["items"])
        return
    the_pod, events = _corpus_pod(entry)
    [blocker] = P.summarize_pods([the_pod], expected=1, events=events).blockers
    assert (blocker.category, blocker.reason) == (expect["category"], expect["reason"])
    if "detail_contains" in expect:
        assert expect["detail_contains"] in blocker.detail
    if "kueue_gated" in expect:
        assert blocker.kueue_gated is expect["kueue_gated"]
    upstream = entry.get("message") or entry.get("pod_message") or entry.get("event", {}).get("message")
    if upstream:
        assert blocker.message == upstream  # the exact upstream text is kept


# ------------------------------------------------------------------------------------------ robustness


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30)
    | st.sampled_from(["Pending", "Running", "Failed", "Succeeded", "Unknown", "False", "True", "Pod",
                       "PodScheduled", "Ready", "Unschedulable", "SchedulingGated", "FailedScheduling",
                       "FailedMount", "CrashLoopBackOff", "ContainerCreating", "2026-03-02T09:00:00Z",
                       GPU_3]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["metadata", "spec", "status", "name", "namespace", "uid", "phase", "conditions",
                         "type", "status", "reason", "message", "note", "lastTransitionTime", "nodeName",
                         "schedulingGates", "containerStatuses", "initContainerStatuses", "state", "waiting",
                         "terminated", "lastState", "exitCode", "deletionTimestamp", "involvedObject",
                         "regarding", "kind", "series", "count", "eventTime", "creationTimestamp"]),
        children, max_size=6),
    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(pods=st.lists(_json, max_size=5) | _json, events=st.lists(_json, max_size=5) | _json,
       expected=st.integers(-3, 10) | st.none() | st.text(max_size=3))
def test_summarize_pods_never_raises_on_malformed_objects(pods: Any, events: Any, expected: Any) -> None:
    summary = P.summarize_pods(pods, expected, events, now=T0)
    summary.describe()
    assert sum(b.count for b in summary.blockers) <= summary.created
    P.job_failed_create(events if isinstance(events, list) else [])


_fragments = st.sampled_from(["0/", "3", "10", " nodes are available", ": ", ", ", ". ", ".", " ...",
                              "preemption: ", "Insufficient cpu", "node(s) had untolerated taint {a: b}",
                              "no new claims to deallocate", "1 ", "x", ""])


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80) | st.lists(_fragments, max_size=14).map("".join))
def test_parse_scheduler_message_never_raises(text: str) -> None:
    failure = P.parse_scheduler_message(text)
    assert failure.raw == text
    assert all(r.count >= 0 and r.text for r in failure.reasons)
    failure.short()


def test_fifty_thousand_pods_are_counted_exactly() -> None:
    """50,000 Pods of five shapes; speed is measured in bench/engine.py --mix pods, never here."""
    shapes = [running_pod("r"), unschedulable("u", GPU_TAINT_4), unschedulable("u", GPU_3),
              waiting_pod("w", "ContainerCreating"), trainer("g").gate("kueue.x-k8s.io/topology").obj()]

    def named(shape: dict[str, Any], name: str) -> dict[str, Any]:  # one built Pod per shape, renamed
        return {**shape, "metadata": {**shape["metadata"], "name": name, "uid": f"uid-{name}"}}

    pods = []
    for i in range(50_000):
        if i % 4 == 0:
            pods.append(named(shapes[0], f"r-{i}"))
        elif i % 4 == 1:
            pods.append(named(shapes[1] if i % 3 else shapes[2], f"u-{i}"))
        elif i % 4 == 2:
            pods.append(named(shapes[3], f"w-{i}"))
        else:
            pods.append(named(shapes[4], f"g-{i}"))
    events = [core_event(f"w-{i}", "FailedMount", "MountVolume.SetUp failed", minutes=1, uid=f"uid-w-{i}")
              for i in range(2, 50_000, 40)]
    summary = P.summarize_pods(pods, expected=50_000, events=events)
    assert summary.created == 50_000 and summary.ready == 12_500


def test_failed_pods_name_how_and_when_each_ended_earliest_first_and_count_the_rest() -> None:
    """What a finished Workload's message lists: the container's end (its reason and exit code), else the Pod's
    own reason; the earliest failure first; three named, the others counted; `kubectl logs` of the container that
    ended it, with --previous only for one that restarted."""
    def failed(name: str, minutes: float, reason: str, code: int, restarts: int = 0) -> dict[str, Any]:
        status = container_terminated(code, reason, finished_at=ts(minutes), started_at=ts(1), name="trainer")
        return trainer(name).phase("Failed").container_status({**status, "restartCount": restarts}).obj()

    evicted = (trainer("train-e").phase("Failed").status_reason("Evicted", "The node was low on resource: memory.")
               .conditions(condition("Ready", "False", 30, "PodFailed")).obj())
    pods = [failed("train-c", 20, "Error", 1, restarts=2), failed("train-a", 10, "OOMKilled", 137), evicted,
            failed("train-b", 15, "Error", 143), trainer("train-ok").running(ts(1)).obj()]
    ends = P.failed_pods(pods)
    assert [(f.name, f.reason, f.exit_code) for f in ends] == [
        ("train-a", "OOMKilled", 137), ("train-b", "Error", 143), ("train-c", "Error", 1), ("train-e", "Evicted", None)]
    assert ends[0].text() == f"train-a (OOMKilled, exit code 137) at {ts(10)}"
    assert ends[3].text() == f"train-e (Evicted) at {ts(30)}"  # no container ended it: the Pod's Ready time
    assert P.failed_pods_text(ends) == (f"4 Pods failed: train-a (OOMKilled, exit code 137) at {ts(10)}, train-b "
                                        f"(Error, exit code 143) at {ts(15)}, train-c (Error, exit code 1) at "
                                        f"{ts(20)} and 1 more")
    assert ends[0].logs_command(NS) == "kubectl logs train-a -n team-a -c trainer"
    assert ends[2].logs_command(NS) == "kubectl logs train-c -n team-a -c trainer --previous"
    assert P.failed_pods_text([]) == ""


def test_the_first_pod_start_counts_only_after_the_admission_and_before_the_bound() -> None:
    earlier = trainer("train-old").phase("Failed").container_status(container_terminated(
        1, "Error", finished_at=ts(3), started_at=ts(2), name="trainer")).obj()  # an earlier admission's Pod
    restarted = trainer("train-r").container_status({**container_running(ts(30), name="trainer"), "lastState": {
        "terminated": terminated(1, "Error", finished_at=ts(29), started_at=ts(12))}}).obj()
    late = trainer("train-late").running(ts(50)).obj()
    admitted = T0 + timedelta(minutes=10)
    assert P.first_start([earlier, restarted, late], admitted, None) == T0 + timedelta(minutes=12)
    assert P.first_start([earlier, late], admitted, T0 + timedelta(minutes=40)) is None


def test_image_pull_said_keeps_the_end_of_a_long_runtime_error_and_names_the_next_step() -> None:
    # K pkg/kubelet/images/image_manager.go:338-346,368; containerd's words as it writes them
    image = "europe-west4-docker.pkg.dev/ml-platform-prod/team-a-images/trainer:2026.11.30-7f3c2a1"
    missing = (f'Back-off pulling image "{image}": ErrImagePull: rpc error: code = NotFound desc = failed to pull and '
               f'unpack image "{image}": failed to resolve reference "{image}": {image}: not found')
    said, step, platform = P.image_pull_said(missing)
    assert said.endswith(f"{image}: not found") and not said.startswith("Back-off")
    assert len(said) <= 300 and "does not exist" in step and not platform
    denied = (f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": pull access denied, '
              "repository does not exist or may require authorization: server message: insufficient_scope: "
              "authorization failed")
    said, step, platform = P.image_pull_said(denied)
    assert "insufficient_scope" in said and "imagePullSecrets" in step and not platform
    # the node cannot reach the registry: the platform's, whatever the Job says
    for unreachable in (
            f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": failed to do request: '
            'Head "https://europe-west4-docker.pkg.dev/v2/ml-platform-prod/team-a-images/trainer/manifests/'
            '2026.11.30-7f3c2a1": dial tcp 142.250.1.82:443: i/o timeout',
            f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": failed to do request: '
            'Head "https://registry.internal/v2/trainer/manifests/v9": tls: failed to verify certificate: x509: '
            "certificate signed by unknown authority",
            f"image pull failed for {image} because the registry is unavailable: 503 Service Unavailable"):
        said, step, platform = P.image_pull_said(unreachable)
        assert platform and "Cluster admin" in step and len(said) <= 300, unreachable
        assert said.endswith(unreachable[-20:]), said
    typo = ('failed to pull and unpack image "registy.internal/trainer:v9": failed to resolve reference '
            '"registy.internal/trainer:v9": failed to do request: Head "https://registy.internal/v2/trainer/manifests/'
            'v9": dial tcp: lookup registy.internal on 10.96.0.10:53: no such host')
    said, step, platform = P.image_pull_said(typo)
    assert not platform and "registy.internal" in step and "registry name" in step
    assert P.image_pull_said("rpc error: code = Unknown desc = something new")[1:] == ("", False)
    # a back-off before the kubelet kept a pull error (a restart, the first back-off): the image is all it says
    alone = f'Back-off pulling image "{image}"'
    assert P.image_pull_said(alone) == (alone, "", False)
