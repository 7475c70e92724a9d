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
    assert "Needed together with raising pods in flavor" in quota_raises[0]["message"]
    assert "Needed together with raising cpu in flavor" in quota_raises[1]["message"]
    assert all("none is enough alone" in r["message"] for r in quota_raises)


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


def _catalog_remedies(name: str) -> list[dict[str, Any]]:
    from tests.unit.test_catalog import SCENARIOS, verdict_of
    (scenario,) = [s for s in SCENARIOS if s["name"] == name]
    return list(verdict_of(scenario).get("remedies") or [])


def test_a_taint_put_on_nodes_in_use_is_removed_not_tolerated() -> None:
    # kueue#14917: Kueue's TAS pinned the Pods to the drained node: the taint's end, or an eviction for new nodes
    got = [(r["actionBy"], r["kind"], r["field"]) for r in _catalog_remedies("tas-tainted-node-replacement-loop")]
    assert got == [("ClusterAdmin", "Node", "spec.taints"), ("ClusterAdmin", "Workload", "spec.active")]
    got = [(r["actionBy"], r["kind"], r["field"])
           for r in _catalog_remedies("drain-taint-on-the-pools-nodes-after-the-pods-started")]
    assert got == [("ClusterAdmin", "Node", "spec.taints")]
    # a taint the nodes had before the Pods came: tolerating it stays the way out
    kinds = [r["kind"] for r in _catalog_remedies("flavor-nodes-carry-an-untolerated-taint")]
    assert kinds == ["ResourceFlavor", "Job"]


def test_flavors_of_one_resource_group_are_alternatives_not_joint_raises() -> None:
    # a pod set takes all of a resource group's resources from one flavor: each flavor's raise is enough alone
    for name in ("resource-group-flavors-are-alternatives", "borrowing-limit-zero-flavor-is-an-alternative"):
        raises = [r for r in _catalog_remedies(name) if r["field"].endswith("nominalQuota")]
        assert len(raises) == 2, name
        assert all("none is enough alone" not in r["message"] and "Or instead the raise for flavor" in r["message"]
                   for r in raises), name
    on_demand, spot = _catalog_remedies("borrowing-limit-zero-flavor-is-an-alternative")[:2]
    assert "Or cohort all gets 5 more cpu in flavor on-demand to lend" in on_demand["message"]
    assert "borrowingLimit 0 for cpu in flavor spot-tainted keeps it from borrowing" in spot["message"]


def test_no_reclaim_remedy_where_its_own_borrowing_limit_caps_it() -> None:
    # nothing of strict-fifo-cq is lent (the cohort's 2 free are its own): only its own lower-priority Workload helps
    fields = [r["field"] for r in _catalog_remedies("own-borrowing-limit-zero-no-reclaim-helps")]
    assert "spec.preemption.reclaimWithinCohort" not in fields
    assert "spec.preemption.withinClusterQueue" in fields
    freed = _catalog_remedies("own-borrowing-limit-zero-no-reclaim-helps")[0]["message"]
    assert "or of cohort" not in freed  # the cohort finishing Workloads frees nothing it may use
