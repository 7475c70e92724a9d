"""Queue positions in Kueue's order: priority, then the queue timestamp, then the UID."""

from __future__ import annotations

from datetime import UTC, datetime

from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.engine.queue_position import with_positions
from kueue_doctor.state import ClusterState
from tests.builders import Admission, ClusterQueue, LocalQueue, Namespace, ResourceFlavor, Workload, condition

PENDING = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
           "1 more needed")


def pending(name: str, created: str, priority: int = 0) -> Workload:
    return (Workload(name, "team-a").queue("user-queue").request("cpu", "1").priority(priority).created(created)
            .condition(condition("QuotaReserved", "False", "Pending", PENDING, created)))


def positions(*workloads: Workload) -> dict[str, tuple[int, int, int, int]]:
    objs = [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq-a").quotas({"default-flavor": {"cpu": "1"}}).obj(),
            LocalQueue("user-queue", "team-a", "cq-a").obj(), *(w.obj() for w in workloads)]
    state = ClusterState.from_objects(objs)
    out = with_positions(state, diagnose(state, datetime(2026, 11, 30, 12, tzinfo=UTC)))
    return {d["metadata"]["name"]: (p["position"], p["pending"], p["higherPriority"], p["samePriorityEarlier"])
            for d in out if (p := d["status"].get("queuePosition"))}


def test_higher_priority_first_then_the_older_and_admitted_or_inactive_ones_do_not_count() -> None:
    running = (Workload("running", "team-a").queue("user-queue").request("cpu", "1").created("2026-11-30T08:00:00Z")
               .admission(Admission("cq-a").assignment(flavors={"cpu": "default-flavor"}, usage={"cpu": "1"}))
               .conditions(condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved", "2026-11-30T08:00:01Z"),
                           condition("Admitted", "True", "Admitted", "The workload is admitted",
                                     "2026-11-30T08:00:01Z")))
    assert positions(running, pending("old", "2026-11-30T09:00:00Z"), pending("new", "2026-11-30T10:00:00Z"),
                     pending("urgent", "2026-11-30T11:00:00Z", priority=100),
                     pending("off", "2026-11-30T08:30:00Z").active(False)) == {
        "urgent": (1, 3, 0, 0), "old": (2, 3, 1, 0), "new": (3, 3, 1, 1)}


def test_an_eviction_by_the_pods_ready_timeout_sends_a_workload_to_the_back() -> None:
    evicted = pending("evicted", "2026-11-30T08:00:00Z").condition(
        condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/evicted",
                  "2026-11-30T10:30:00Z"))
    assert positions(evicted, pending("queued", "2026-11-30T09:00:00Z")) == {
        "queued": (1, 2, 0, 0), "evicted": (2, 2, 0, 1)}
