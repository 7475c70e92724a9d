"""Variants of two catalog scenarios: a LeaderWorkerSet surge group without its Workload (kueue#8769) and a TAS
failure in the flavor Kueue's scan stops at while a later flavor fits (kueue#13658). The scenarios hold the
verdicts; these pin what must change them and what must not."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kueue_doctor import diagnose_objects
from tests.unit.test_catalog import SCENARIOS


def _scenario(name: str) -> tuple[list[dict[str, Any]], datetime]:
    found = next(s for s in SCENARIOS if s["name"] == name)
    return copy.deepcopy(found["objects"]), datetime.fromisoformat(found["now"].replace("Z", "+00:00"))


def _status(objects: list[dict[str, Any]], now: datetime, wl: str) -> dict[str, Any] | None:
    return next((d["status"] for d in diagnose_objects(objects, now) if d["metadata"]["name"] == wl), None)


LWS = "lws-surge-groups-percentage-maxsurge-no-workload"
SURGE = "leaderworkerset-llama-serve-2-1358a"


def _lws(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "LeaderWorkerSet")


def test_an_integer_max_surge_says_kueue_should_have_made_the_surge_workload() -> None:
    objects, now = _scenario(LWS)
    _lws(objects)["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] = 2
    st = _status(objects, now, SURGE)
    assert st is not None and (st["cause"], st["actionBy"]) == ("WorkloadNotCreated", "ClusterAdmin")
    assert "though for an integer maxSurge it should" in st["message"]
    assert "0 for a percentage" not in st["message"]


def test_without_the_leaderworkerset_in_the_input_the_percentage_is_named_as_the_suspect() -> None:
    objects, now = _scenario(LWS)
    st = _status([o for o in objects if o["kind"] != "LeaderWorkerSet"], now, SURGE)
    assert st is not None and st["cause"] == "WorkloadNotCreated"
    assert "Group 2 of LeaderWorkerSet inference/llama-serve" in st["message"] and "kueue#8769" in st["message"]


def test_a_group_whose_prebuilt_workload_exists_or_that_is_within_the_grace_period_gets_no_stand_in() -> None:
    objects, now = _scenario(LWS)
    assert _status(objects, datetime(2026, 11, 30, 10, 20, 20, tzinfo=UTC), SURGE) is None  # 18 s after creation
    wl = copy.deepcopy(next(o for o in objects if o["kind"] == "Workload"))
    wl["metadata"].update(name=SURGE, uid="000000e1-22a1-4000-8000-0000000000ff")
    st = _status([*objects, wl], now, SURGE)
    assert st is not None and st["reason"] != "NoWorkload"


def test_plain_pods_naming_a_missing_prebuilt_workload_are_their_owners_to_fix() -> None:
    objects, now = _scenario(LWS)
    for o in objects:
        if o["kind"] == "Pod":
            del o["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"]
    st = _status([o for o in objects if o["kind"] != "LeaderWorkerSet"], now, SURGE)
    assert st is not None and (st["cause"], st["actionBy"]) == ("PrebuiltWorkloadNotFound", "WorkloadOwner")
    assert f"must create Workload inference/{SURGE}" in st["message"]


TAS = "tas-first-flavor-pinned-next-flavor-fits"
TAS_WL = "job-finetune-13b-38b64"


def test_before_the_stall_threshold_kueue_is_expected_to_move_on_by_itself() -> None:
    objects, _ = _scenario(TAS)
    objects = [o for o in objects if o["kind"] != "Event"]
    st = _status(objects, datetime(2026, 11, 30, 9, 35, tzinfo=UTC), TAS_WL)
    assert st is not None and (st["cause"], st["actionBy"]) == ("TopologyPlacementFailed", "Nobody")
    assert "next flavor pool-b fits now" in st["message"] and "tries pool-b in its next cycle" in st["message"]


def _cq(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == name)


def test_without_quota_or_room_in_the_later_flavor_the_verdict_stays_wait() -> None:
    objects, now = _scenario(TAS)
    pool_b = _cq(objects, "train-cq")["spec"]["resourceGroups"][0]["flavors"][1]
    next(r for r in pool_b["resources"] if r["name"] == "nvidia.com/gpu")["borrowingLimit"] = "8"
    st = _status(objects, now, TAS_WL)
    assert st is not None and (st["cause"], st["actionBy"]) == ("TopologyPlacementFailed", "Nobody")
    assert "Kueue retries by itself" in st["message"] and "pool-b" not in st["message"]

    objects, now = _scenario(TAS)
    for o in objects:
        if o["kind"] == "Node" and o["metadata"]["labels"].get("cloud.example.com/pool") == "b":
            o["spec"]["unschedulable"] = True
    st = _status(objects, now, TAS_WL)
    assert st is not None and st["actionBy"] == "Nobody" and "pool-b" not in st["message"]
