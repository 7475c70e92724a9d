"""The way out (status.remedies) on the objects the real control plane recorded: the Headlamp case gives exactly
nominalQuota 2 -> 3 (cpu and pods) or parallelism 3 -> 2; a cohort makes a quota change an estimate; waiting for
quota says what must be freed (Kueue's "N more needed")."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from kueue_doctor import diagnose_objects
from kueue_doctor.kube.load import newest_timestamp

FIXTURES = Path(__file__).resolve().parents[1] / "e2e" / "fixtures"


def _remedies(fixture: str, job: str) -> list[dict[str, Any]]:
    objects = [o for o in yaml.safe_load_all((FIXTURES / f"{fixture}.yaml").read_text()) if o]
    out = diagnose_objects(objects, newest_timestamp(objects), grace=timedelta(0))
    (d,) = [d for d in out if d["spec"].get("ownerRef", {}).get("name") == job]
    return list(d["status"].get("remedies") or [])


def test_the_headlamp_case_has_exactly_the_two_ways_out() -> None:
    got = [(r["actionBy"], r["kind"], r["field"], r["now"], r["enough"], r["exact"])
           for r in _remedies("scenario-exceeds-nominal-quota", "blog")]
    assert got == [
        ("QueueAdmin", "ClusterQueue", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "2", "3", True),
        ("QueueAdmin", "ClusterQueue", "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota", "2", "3", True),
        ("WorkloadOwner", "Job", "spec.parallelism", "3", "2", True)]
    quota_raises = _remedies("scenario-exceeds-nominal-quota", "blog")[:2]  # cpu and pods: both are needed
    assert all("Needed together with the other 1 quota change(s) listed" in r["message"] for r in quota_raises)


def test_a_borrowing_limit_is_raised_by_the_platform_and_only_estimated() -> None:
    (r,) = _remedies("scenario-borrowing-limit", "greedy")
    assert (r["actionBy"], r["field"].rsplit(".", 1)[-1], r["now"], r["enough"], r["exact"]) == (
        "ClusterAdmin", "borrowingLimit", "1", "2", False)
    assert "an estimate" in r["message"]


def test_waiting_for_quota_says_what_must_be_freed_from_kueues_more_needed() -> None:
    (r,) = _remedies("scenario-waiting-for-unused-quota", "blog")  # 3 cpu asked, 2 of 4 used: "1 more needed"
    assert (r["actionBy"], r["field"].rsplit(".", 1)[-1], r["now"], r["enough"], r["exact"]) == (
        "QueueAdmin", "nominalQuota", "4", "5", True)
    assert r["message"].startswith("1 cpu in flavor ") and "must be freed by Workloads of ClusterQueue" in r["message"]


def test_a_running_workload_has_no_remedies() -> None:
    assert _remedies("scenario-waiting-for-unused-quota", "hog") == []
