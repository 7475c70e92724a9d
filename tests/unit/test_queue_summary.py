"""Grouping diagnoses by ClusterQueue and verdict: what blocks most comes first, running Workloads block nothing."""

from __future__ import annotations

from typing import Any

from kueue_doctor.engine.queue_summary import by_queue


def diag(name: str, cq: str, reason: str, cause: str | None, since: str, stage: str = "Admission") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a"},
            "status": {"stage": stage, "reason": reason, "cause": cause, "actionBy": "Nobody", "since": since,
                       "clusterQueue": cq, "message": f"{name} waits"}}


def test_the_largest_group_first_and_running_workloads_left_out() -> None:
    ds = [diag("a", "ci", "WaitingForQuota", "InsufficientUnusedQuota", "2026-11-30T09:00:00Z"),
          diag("b", "gpu", "QueueStopped", "ClusterQueueStopped", "2026-11-30T08:00:00Z"),
          diag("c", "gpu", "QueueStopped", "ClusterQueueStopped", "2026-11-30T07:00:00Z"),
          diag("d", "gpu", "Running", "PodsReady", "2026-11-30T06:00:00Z", stage="Running")]
    groups = by_queue(ds)
    assert [(g.cluster_queue, g.reason, g.count) for g in groups] == [("gpu", "QueueStopped", 2),
                                                                      ("ci", "WaitingForQuota", 1)]
    assert groups[0].oldest == "team-a/c" and groups[0].message == "c waits"
    assert [g.reason for g in by_queue(ds, include_running=True)].count("Running") == 1
