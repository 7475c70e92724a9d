"""Queue positions in Kueue's order: priority, then the queue timestamp, then the UID."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from kueue_doctor.cli import main
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


def test_a_workload_waiting_for_its_preemptions_heads_a_best_effort_queue_whatever_the_priorities() -> None:
    """kueue#7301: requeued with PendingPreemption it is Kueue's sticky head (cluster_queue.go baseCompareFunc);
    once its message no longer says so (found not to fit) the usual order is back."""
    waiting = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
               "1 more needed. Pending the preemption of 1 workload(s)")
    preempting = (Workload("preempting", "team-a").queue("user-queue").request("cpu", "1").priority(10)
                  .created("2026-11-30T10:00:00Z")
                  .condition(condition("QuotaReserved", "False", "Pending", waiting, "2026-11-30T10:00:01Z")))
    urgent = pending("urgent", "2026-11-30T11:00:00Z", priority=100)
    assert positions(preempting, urgent, pending("old", "2026-11-30T09:00:00Z")) == {
        "preempting": (1, 3, 0, 0), "urgent": (2, 3, 0, 1), "old": (3, 3, 2, 0)}
    unfit = pending("preempting", "2026-11-30T10:00:00Z", priority=10)
    assert positions(unfit, urgent)["urgent"][0] == 1


# ---- the cross-check with Kueue's visibility API -------------------------------------------------------------------
# PendingWorkloadsSummary exactly as Kueue v0.19.2 returns it (tests/e2e/fixtures/scenario-visibility-positions.yaml) (apis/visibility/v1beta2/types.go,
# pkg/visibility/storage/utils.go newPendingWorkload): metadata {name, namespace, creationTimestamp, ownerReferences},
# priority, localQueueName, positionInClusterQueue and positionInLocalQueue (both 0-based); the summary itself has no
# name (`kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq-a/pendingworkloads`).

def kueue_item(name: str, namespace: str, in_cq: int, in_lq: int, priority: int = 0,
               local_queue: str = "user-queue") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-11-30T09:00:00Z",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                              "uid": f"uid-{name}"}]},
            "priority": priority, "localQueueName": local_queue, "positionInClusterQueue": in_cq,
            "positionInLocalQueue": in_lq}


def kueue_summary(*items: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    return {"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
            "metadata": {"name": name} if name else {}, "items": list(items)}


def checked(*objects: dict[str, Any], namespaces: tuple[str, ...] = ("team-a",)) -> dict[str, dict[str, Any]]:
    base = [ResourceFlavor("default-flavor").obj(), ClusterQueue("cq-a").quotas({"default-flavor": {"cpu": "1"}}).obj()]
    for ns in namespaces:
        base += [Namespace(ns).obj(), LocalQueue("user-queue", ns, "cq-a").obj()]
    state = ClusterState.from_objects([*base, *objects])
    return {d["metadata"]["name"]: d["status"]
            for d in with_positions(state, diagnose(state, datetime(2026, 11, 30, 12, tzinfo=UTC)))}


THREE = (pending("old", "2026-11-30T09:00:00Z"), pending("new", "2026-11-30T10:00:00Z"),
         pending("urgent", "2026-11-30T11:00:00Z", priority=100))


def test_kueues_positions_are_kept_next_to_the_computed_ones_and_agreeing_adds_nothing_to_the_message() -> None:
    alone = checked(*(w.obj() for w in THREE))
    kueue = kueue_summary(kueue_item("urgent", "team-a", 0, 0, 100), kueue_item("old", "team-a", 1, 1),
                          kueue_item("new", "team-a", 2, 2))
    both = checked(*(w.obj() for w in THREE), kueue)  # no name: its ClusterQueue is that of its LocalQueue
    for wl, expected in {"urgent": 1, "old": 2, "new": 3}.items():
        assert both[wl]["queuePosition"] == {**alone[wl]["queuePosition"], "visibility": expected}
        assert both[wl]["queuePosition"]["position"] == expected
        assert both[wl]["message"] == alone[wl]["message"]


def test_workloads_of_other_namespaces_that_the_input_lacks_explain_a_disagreement() -> None:
    """`explain -n team-a`: Kueue counts team-b's Workload too; the message says so and how to read it all."""
    kueue = kueue_summary(kueue_item("urgent", "team-a", 0, 0, 100), kueue_item("theirs", "team-b", 1, 0),
                          kueue_item("old", "team-a", 2, 1), kueue_item("new", "team-a", 3, 2), name="cq-a")
    st = checked(*(w.obj() for w in THREE), kueue, namespaces=("team-a", "team-b"))
    assert st["urgent"]["queuePosition"]["visibility"] == 1
    assert "visibility API" not in st["urgent"]["message"]
    assert (st["old"]["queuePosition"]["position"], st["old"]["queuePosition"]["visibility"]) == (2, 3)
    assert st["old"]["message"].endswith(
        "Kueue's visibility API puts it at 3 of 4 pending in ClusterQueue cq-a, kueue-doctor computed 2 of 3: Kueue has "
        "1 pending Workload ahead of it that the computation does not (from namespaces team-b, not in the input: "
        "`explain -A` reads every namespace).")


def test_another_order_for_the_same_workloads_is_said_to_come_from_what_is_not_modelled() -> None:
    kueue = kueue_summary(kueue_item("old", "team-a", 0, 0), kueue_item("urgent", "team-a", 1, 1, 100),
                          kueue_item("new", "team-a", 2, 2))  # e.g. fair sharing or a sticky preemptor
    st = checked(*(w.obj() for w in THREE), kueue)
    assert st["old"]["message"].endswith(
        "Kueue's visibility API puts it at 1 of 3 pending in ClusterQueue cq-a, kueue-doctor computed 2 of 3: the same "
        "Workloads in another order: admission fair sharing, the priority-boost annotation and a preemptor Kueue keeps "
        "at the head are not modelled here.")
    assert "kueue-doctor computed 1 of 3: the same Workloads in another order" in st["urgent"]["message"]
    assert "visibility API" not in st["new"]["message"]


def test_a_workload_computed_ahead_that_kueue_does_not_queue_is_named() -> None:
    kueue = kueue_summary(kueue_item("old", "team-a", 0, 0), kueue_item("new", "team-a", 1, 1))  # urgent: not yet
    st = checked(*(w.obj() for w in THREE), kueue)
    assert st["old"]["message"].endswith(
        "Kueue's visibility API puts it at 1 of 2 pending in ClusterQueue cq-a, kueue-doctor computed 2 of 3: 1 Workload "
        "computed ahead of it is not in Kueue's queue (just created or admitted between the two reads).")


def test_a_workload_kueue_does_not_list_is_said_so_unless_the_list_was_cut_at_the_limit() -> None:
    short = kueue_summary(kueue_item("urgent", "team-a", 0, 0, 100), kueue_item("old", "team-a", 1, 1), name="cq-a")
    st = checked(*(w.obj() for w in THREE), short)
    assert "visibility" not in st["new"]["queuePosition"]
    assert st["new"]["message"].endswith("Kueue's visibility API does not list it among the 2 Workloads pending in "
                                         "ClusterQueue cq-a: Kueue has not queued it yet, or admitted it between the "
                                         "two reads; run explain again.")
    cut = kueue_summary(*(kueue_item(f"other-{n}", "team-b", n, n) for n in range(1000)), name="cq-a")
    st = checked(*(w.obj() for w in THREE), cut, namespaces=("team-a", "team-b"))
    assert "visibility" not in st["new"]["queuePosition"] and "visibility API" not in st["new"]["message"]


def test_kueue_before_0_19_2_inflating_the_local_queue_position_is_named() -> None:
    """What Kueue v0.19.1 returned: positionInLocalQueue counted by the LocalQueue's name alone (kueue#14435)."""
    kueue = kueue_summary(kueue_item("theirs", "team-b", 0, 0, 100), kueue_item("urgent", "team-a", 1, 1, 100),
                          name="cq-a")
    theirs = pending("theirs", "2026-11-30T08:00:00Z", priority=100).obj()
    theirs["metadata"]["namespace"] = "team-b"
    st = checked(*(w.obj() for w in THREE), theirs, kueue, namespaces=("team-a", "team-b"))
    assert st["urgent"]["queuePosition"]["visibility"] == st["urgent"]["queuePosition"]["position"] == 2
    assert st["urgent"]["message"].endswith(
        "Kueue gives it positionInLocalQueue 1 (0-based) but 0 Workloads of LocalQueue team-a/user-queue are ahead of "
        "it: it counted those of the LocalQueues named user-queue in namespaces team-b too, a bug of Kueue before "
        "v0.19.2 (kubernetes-sigs/kueue#14435); upgrade Kueue to trust that number.")
    fixed = kueue_summary(kueue_item("theirs", "team-b", 0, 0, 100), kueue_item("urgent", "team-a", 1, 0, 100),
                          name="cq-a")  # what v0.19.2 returns
    st = checked(*(w.obj() for w in THREE), theirs, fixed, namespaces=("team-a", "team-b"))
    assert "14435" not in st["urgent"]["message"]


def test_a_dump_with_kueues_raw_answer_shows_both_positions_in_wide_and_describe(tmp_path: Path) -> None:
    """`kubectl get ... -o yaml > objects.yaml` and `kubectl get --raw .../pendingworkloads > kueue.json`, both -f."""
    objects = [Namespace("team-a").obj(), Namespace("team-b").obj(), ResourceFlavor("default-flavor").obj(),
               ClusterQueue("cq-a").quotas({"default-flavor": {"cpu": "1"}}).obj(),
               LocalQueue("user-queue", "team-a", "cq-a").obj(), *(w.obj() for w in THREE)]
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    (tmp_path / "kueue.json").write_text(json.dumps(kueue_summary(
        kueue_item("urgent", "team-a", 0, 0, 100), kueue_item("theirs", "team-b", 1, 0),
        kueue_item("old", "team-a", 2, 1), kueue_item("new", "team-a", 3, 2))))
    files = ["-f", str(tmp_path / "objects.yaml"), "-f", str(tmp_path / "kueue.json")]
    out, err = io.StringIO(), io.StringIO()
    assert main(["explain", *files, "-o", "wide"], stdout=out, stderr=err) == 0, err.getvalue()
    cells = {line.split()[1]: line.split() for line in out.getvalue().splitlines()[1:] if line.startswith("team-a")}
    assert "1/3" in cells["urgent"] and "2/3(kueue:3)" in cells["old"] and "3/3(kueue:4)" in cells["new"], cells
    out = io.StringIO()
    assert main(["describe", *files, "-n", "team-a", "old"], stdout=out, stderr=err) == 0, err.getvalue()
    assert ("2 of 3 pending in ClusterQueue cq-a: 1 ahead by priority, 0 of the same priority queued earlier "
            "(computed, in Kueue's order; Kueue's visibility API says 3)") in out.getvalue(), out.getvalue()


def test_kueues_positions_read_through_local_queues_count_but_do_not_name_the_others() -> None:
    """A tenant's read (`namespaces/team-a/localqueues/user-queue/pendingworkloads`): Kueue's positions in the
    ClusterQueue, only the LocalQueue's Workloads listed; explain names the summary after the LocalQueue."""
    through_lq = kueue_summary(kueue_item("urgent", "team-a", 0, 0, 100), kueue_item("old", "team-a", 2, 1),
                               kueue_item("new", "team-a", 3, 2), name="user-queue")
    through_lq["metadata"]["namespace"] = "team-a"
    st = checked(*(w.obj() for w in THREE), through_lq)
    assert {wl: (s["queuePosition"]["position"], s["queuePosition"]["visibility"]) for wl, s in st.items()} == {
        "urgent": (1, 1), "old": (2, 3), "new": (3, 4)}
    assert "visibility API" not in st["urgent"]["message"]
    assert st["new"]["message"].endswith(
        "Kueue's visibility API puts it at 4 in ClusterQueue cq-a, kueue-doctor computed 3 of 3: Kueue counts 1 more "
        "Workload ahead of it than the input has (read through its LocalQueue, Kueue does not name them: Workloads of "
        "other namespaces' LocalQueues in the same ClusterQueue, or Workloads admitted between the reads).")
    # the ClusterQueue's own list wins over a LocalQueue's, whichever comes first
    whole = kueue_summary(kueue_item("urgent", "team-a", 0, 0, 100), kueue_item("old", "team-a", 1, 1),
                          kueue_item("new", "team-a", 2, 2), name="cq-a")
    st = checked(*(w.obj() for w in THREE), whole, through_lq)
    assert [st[wl]["queuePosition"]["visibility"] for wl in ("urgent", "old", "new")] == [1, 2, 3]
