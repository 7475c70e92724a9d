"""The OpenReports mirror's pure parts (live/reports.py): which verdicts are reported, how severe, and
that an unchanged verdict gives an identical Report (so nothing is rewritten). The writes themselves are
tested on the real control plane with the real Report CRD (tests/e2e/test_reports.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_doctor.live.reports import build_report, digest, result_of, severity_of

OWNER = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
         "name": "admissiondiagnoses.kueue-doctor.dev", "uid": "u-1"}


def diagnosis(name: str, stage: str, reason: str, action: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": name,
                         "labels": {"kueue-doctor.dev/owner-kind": "Job", "kueue-doctor.dev/owner-name": name}},
            "status": {"stage": stage, "reason": reason, "actionBy": action, "cause": status.pop("cause", ""),
                       "message": f"{reason}: the numbers", "since": "2026-01-02T03:04:05Z", **status}}


@pytest.mark.parametrize(("action", "reason", "exceeded", "severity"), [
    ("Nobody", "WaitingForQuota", False, "info"),
    ("Nobody", "WaitingForQuota", True, "low"),
    ("WorkloadOwner", "PodsUnschedulable", False, "medium"),
    ("QueueAdmin", "ExceedsMaxQuota", False, "high"),
    ("ClusterAdmin", "QueueMisconfigured", False, "critical"),
    ("ClusterAdmin", "QueueMisconfigured", True, "critical"),
])
def test_severity_from_who_acts_the_reason_and_the_pending_limit(action: str, reason: str, exceeded: bool,
                                                                  severity: str) -> None:
    assert severity_of(action, reason, exceeded) == severity


def test_running_and_finished_are_not_reported() -> None:
    assert result_of(diagnosis("a", "Running", "Running", "Nobody")) is None
    assert result_of(diagnosis("a", "Finished", "Finished", "Nobody")) is None


def test_result_names_the_workload_the_verdict_and_the_diagnosis() -> None:
    r = result_of(diagnosis("job-a", "Admission", "ExceedsMaxQuota", "QueueAdmin", cause="ExceedsNominalQuota",
                            clusterQueue="cq", pendingLimit={"exceeded": True}))
    assert r is not None
    assert (r["policy"], r["rule"], r["category"], r["result"], r["severity"]) == (
        "ExceedsMaxQuota", "ExceedsNominalQuota", "Admission", "fail", "critical")
    assert r["message"] == "ExceedsMaxQuota: the numbers" and r["source"] == "kueue-doctor"
    assert r["properties"]["owner"] == "Job/job-a" and r["properties"]["pendingLimitExceeded"] == "true"
    assert r["properties"]["resultID"] == "team-a/job-a/ExceedsMaxQuota/ExceedsNominalQuota", "a new verdict, a new id"
    assert "localQueue" not in r["properties"], "empty values are left out (the CRD wants strings)"
    assert r["resources"] == [{"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
                               "namespace": "team-a", "name": "job-a"}]
    assert r["timestamp"] == {"seconds": 1767323045, "nanos": 0}, "the verdict's since, not the time of the pass"
    waiting = result_of(diagnosis("job-b", "Admission", "WaitingForQuota", "Nobody"))
    assert waiting is not None and waiting["result"] == "warn" and waiting["rule"] == "WaitingForQuota"


def test_report_is_ordered_counted_and_stable() -> None:
    a = result_of(diagnosis("a", "Admission", "ExceedsMaxQuota", "QueueAdmin"))
    b = result_of(diagnosis("b", "Admission", "WaitingForQuota", "Nobody"))
    assert a is not None and b is not None
    rep = build_report("team-a", [b, a], OWNER)
    assert [r["properties"]["workload"] for r in rep["results"]] == ["a", "b"]
    assert rep["summary"] == {"pass": 0, "fail": 1, "warn": 1, "error": 0, "skip": 0}
    assert rep["metadata"]["ownerReferences"] == [OWNER] and rep["scope"]["name"] == "team-a"
    assert rep["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kueue-doctor"}
    assert digest(rep) == digest(build_report("team-a", [a, b], OWNER)), "same verdicts, same Report"
    server = {**rep, "metadata": {**rep["metadata"], "resourceVersion": "7", "uid": "x"}}
    assert digest(server) == digest(rep), "what the server adds is not ours"
    assert digest(build_report("team-a", [a], OWNER)) != digest(rep)
