"""The publisher's decisions: write what changed, when it should, and keep `since`."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kueue_doctor.live.publisher import decide, record_of, with_since


def diag(reason: str = "WaitingForQuota", message: str = "Needs 1 more cpu", since: str = "2026-11-30T09:00:00Z",
         stage: str = "Admission") -> dict[str, Any]:
    return {"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
            "metadata": {"name": "w", "namespace": "ns", "labels": {"kueue-doctor.dev/reason": reason},
                         "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "w",
                                              "uid": "u"}]},
            "spec": {"workloadRef": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "w",
                                     "uid": "u"}},
            "status": {"stage": stage, "reason": reason, "actionBy": "Nobody", "message": message, "since": since}}


def test_new_diagnosis_is_written_identical_content_never() -> None:
    assert decide(None, diag(), now=0.0, refresh=60).write
    prev = record_of(diag(), written_at=0.0)
    assert not decide(prev, diag(), now=1000.0, refresh=60).write


def test_verdict_change_is_written_at_once_but_numbers_only_once_per_refresh_interval() -> None:
    prev = record_of(diag(), written_at=100.0)
    assert decide(prev, diag(reason="ExceedsMaxQuota"), now=101.0, refresh=60).write
    minor = decide(prev, diag(message="Needs 2 more cpu"), now=101.0, refresh=60)
    assert not minor.write and minor.due == 160.0
    assert decide(prev, diag(message="Needs 2 more cpu"), now=161.0, refresh=60).write


def test_the_cluster_queue_a_diagnosis_names_is_written_at_once_when_it_appears_or_moves() -> None:
    """A Workload seen before its LocalQueue has no ClusterQueue yet; users select diagnoses by it (labels,
    `kubectl get -l`), so naming it must not wait for the refresh interval."""
    prev = record_of(diag(), written_at=100.0)
    queued = diag()
    queued["status"]["clusterQueue"] = "cq-a"
    assert decide(prev, queued, now=101.0, refresh=60).write
    moved = copy.deepcopy(queued)
    moved["status"]["clusterQueue"] = "cq-b"
    assert decide(record_of(queued, written_at=101.0), moved, now=102.0, refresh=60).write


def test_objects_found_at_start_up_are_not_rewritten_when_unchanged() -> None:
    existing = record_of(diag(), written_at=None)
    assert not decide(existing, diag(), now=5.0, refresh=60).write


def test_since_is_kept_while_the_reason_holds_and_moves_when_it_changes() -> None:
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    prev = record_of(diag(since="2026-11-30T08:00:00Z"), written_at=0.0)
    same = with_since(copy.deepcopy(diag(since="2026-11-30T09:30:00Z")), prev, observed)
    assert same["status"]["since"] == "2026-11-30T08:00:00Z"
    # a new reason with an older Kueue timestamp (the condition did not flip): now is when it changed
    changed = with_since(diag(reason="ExceedsMaxQuota", since="2026-11-30T07:00:00Z"), prev, observed)
    assert changed["status"]["since"] == "2026-11-30T10:00:00Z"
    # a new reason with a newer Kueue timestamp (e.g. Evicted just now): Kueue's time is more exact
    evicted = with_since(diag(reason="Preempted", since="2026-11-30T09:59:30Z"), prev, observed)
    assert evicted["status"]["since"] == "2026-11-30T09:59:30Z"


def test_numbers_only_refreshes_share_a_budget_and_never_hold_back_a_verdict_change() -> None:
    """Each admission changes the usage numbers of every waiting Workload: 100 refreshes due at once go out
    at the budget's pace, while a verdict change among them is written at once."""
    from kueue_doctor.live.publisher import Publisher

    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

    def named(n: int, **kw: Any) -> dict[str, Any]:
        d = diag(**kw)
        d["metadata"]["name"] = f"w{n}"
        return d

    pub = Publisher(api=None, refresh_interval=60, refresh_writes_per_second=10)
    pub.seed([named(n) for n in range(100)])  # found at start-up: written_at unknown, due for a refresh
    changed = [named(n, message="Needs 2 more cpu") for n in range(99)] + [named(99, reason="ExceedsMaxQuota")]
    first = pub.prepare(changed, observed)
    names = [k[1] for k, _ in first]
    assert "w99" in names and len(first) <= 11  # the verdict change, and one second's budget of refreshes
    assert len(pub.deferred) == 100 - len(first)
    assert pub.next_due() is not None
