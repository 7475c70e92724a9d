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
