"""Repairs after watch gaps, orphaned diagnoses, and restores: only on what a GET has confirmed."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kueue_doctor.live import orphans

from .apiserver import METADATA_ONLY, cluster, collection_path, not_found, object_path
from .scenario import DIAGNOSES, objects, started

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
RUNNING, WAITING = ("team-a", "job-run-00001"), ("team-a", "job-wait-00002")


def diagnosis(name: str, uid: str) -> dict[str, Any]:
    """An AdmissionDiagnosis as the apiserver lists it (written by an earlier run of the operator)."""
    return {"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"ad-{uid}", "resourceVersion": "300",
                         "creationTimestamp": "2026-11-30T09:01:00Z",
                         "labels": {"kueue-doctor.dev/reason": "WaitingForQuota"},
                         "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": name,
                                              "uid": f"wl-{uid}"}]},
            "spec": {"workloadRef": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": name,
                                     "uid": f"wl-{uid}"}},
            "status": {"stage": "Admission", "reason": "WaitingForQuota", "actionBy": "Nobody",
                       "since": "2026-11-30T09:00:00Z", "message": "Waiting for quota in ClusterQueue cq-a"}}


def being_deleted(obj: dict[str, Any]) -> dict[str, Any]:
    """As a GET returns it during foreground deletion: the GC's finalizer and a deletionTimestamp."""
    out = copy.deepcopy(obj)
    out["metadata"].update(deletionTimestamp="2026-11-30T09:45:00Z", deletionGracePeriodSeconds=0,
                           resourceVersion="400")
    out["metadata"]["finalizers"] = ["foregroundDeletion", *out["metadata"].get("finalizers", [])]
    return out


def test_an_orphaned_diagnosis_is_deleted_only_after_a_get_confirms_its_workload_is_gone() -> None:
    objs = objects()
    api = cluster(objs)
    new_wl = copy.deepcopy(objs[5])
    new_wl["metadata"].update(name="job-new-00010", uid="wl-00010")
    ending_wl = being_deleted({**objs[5], "metadata": {**objs[5]["metadata"], "name": "job-ending-00011"}})
    api.get(f"{WORKLOADS}/job-new-00010", new_wl)  # created after the LIST: the watch has not delivered it yet
    api.get(f"{WORKLOADS}/job-ending-00011", ending_wl)
    api.answer("GET", f"{WORKLOADS}/job-gone-00009", not_found("workloads", "kueue.x-k8s.io", "job-gone-00009"), 404)
    api.serve_list(collection_path("AdmissionDiagnosis"), "kueue-doctor.dev/v1alpha1", "AdmissionDiagnosis",
                   [diagnosis(n, u) for n, u in [("job-gone-00009", "00009"), ("job-new-00010", "00010"),
                                                 ("job-ending-00011", "00011")]])
    rt, api = started(objs, api)
    asyncio.run(rt.orphans.resync())
    deletes = [r.path for r in api.writes if r.method == "DELETE"]
    assert deletes == [f"{DIAGNOSES}/job-gone-00009", f"{DIAGNOSES}/job-ending-00011"]
    paths = [(r.method, r.path) for r in api.requests]
    for name in ("job-gone-00009", "job-ending-00011"):
        assert paths.index(("GET", f"{WORKLOADS}/{name}")) < paths.index(("DELETE", f"{DIAGNOSES}/{name}"))
    assert ("GET", f"{WORKLOADS}/job-new-00010") in paths  # asked, found alive: its diagnosis stays
    assert rt.stats.writes == {"deleted": 2}


def test_no_orphan_is_deleted_while_the_crd_is_missing() -> None:
    objs = objects()
    api = cluster(objs)
    api.serve_list(collection_path("AdmissionDiagnosis"), "kueue-doctor.dev/v1alpha1", "AdmissionDiagnosis",
                   [diagnosis("job-gone-00009", "00009")])
    rt, api = started(objs, api)
    api.answer("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/admissiondiagnoses.kueue-doctor.dev",
               not_found("customresourcedefinitions", "apiextensions.k8s.io", "admissiondiagnoses.kueue-doctor.dev"),
               404)
    asyncio.run(rt.orphans.resync())
    assert api.writes == []


def test_a_diagnosis_deleted_with_its_workload_in_foreground_deletion_is_not_restored() -> None:
    objs = objects()
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    assert len(api.applies()) == 2
    ours = [copy.deepcopy(r.body) for r in api.applies()]
    # the garbage collector deletes the dependents first; the Workload's own update may arrive later
    api.get(object_path(objs[5]), being_deleted(objs[5]))
    for d in ours:
        rt.inbox.observe("DELETED", d)
    asyncio.run(rt.loop.run_once())
    assert [r.path for r in api.applies()[2:]] == [f"{DIAGNOSES}/job-run-00001"]  # alive: restored
    assert WAITING not in rt.state.workloads and WAITING not in rt.verdicts  # being deleted: dropped
    paths = [r.path for r in api.requests if r.method == "GET" and r.path.startswith(WORKLOADS)]
    assert sorted(paths) == [f"{WORKLOADS}/job-run-00001", f"{WORKLOADS}/job-wait-00002"]


def test_a_workload_diagnosed_again_before_its_first_diagnosis_is_written_is_not_fetched() -> None:
    """Under a write backlog (Kueue's perf scenario: 15,000 new Workloads) a pass sees thousands of Workloads whose
    first diagnosis is still queued; each was fetched with a GET, one after another, while the pass held the state,
    and passes came minutes apart. Only a diagnosis deleted after we wrote it needs that GET before its restore."""
    objs = objects()
    api = cluster(objs)
    api.answer("PATCH", f"{DIAGNOSES}/job-wait-00002", {"kind": "Status", "code": 500}, 500)  # not written yet
    rt, api = started(objs, api)
    asyncio.run(rt.loop.run_once())
    assert WAITING in rt.verdicts and not rt.publisher.restoring(WAITING)
    rt.inbox.mark([WAITING])
    asyncio.run(rt.loop.run_once())
    assert ("GET", f"{WORKLOADS}/job-wait-00002") not in [(r.method, r.path) for r in api.requests]


def test_many_deleted_diagnoses_are_checked_with_one_list_not_a_get_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kubectl delete admissiondiagnoses --all` at 50,000 Workloads: a GET each, one after another while the pass
    holds the state, would stall the operator for an hour; past RELIST_CHECKS one metadata LIST answers for all."""
    monkeypatch.setattr(orphans, "RELIST_CHECKS", 1)
    objs = objects()
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    ours = [copy.deepcopy(r.body) for r in api.applies()]
    for d in ours:
        rt.inbox.observe("DELETED", d)
    before = len(api.requests)
    asyncio.run(rt.loop.run_once())
    asked = [(r.method, r.path) for r in api.requests[before:] if "/workloads" in r.path]
    assert asked == [("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads")]  # the LIST, no GET by name
    assert sorted(r.path for r in api.applies()[len(ours):]) == sorted(r.path for r in api.applies()[:len(ours)])


def test_a_workload_seen_being_deleted_is_not_diagnosed() -> None:
    objs = objects()
    rt, api = started(objs)
    rt.inbox.observe("MODIFIED", being_deleted(objs[5]))
    asyncio.run(rt.loop.run_once())
    assert [r.path for r in api.applies()] == [f"{DIAGNOSES}/job-run-00001"]


def test_a_resync_drops_what_the_watch_missed_deleting_and_fetches_what_it_missed_adding() -> None:
    objs = objects()
    rt, api = started(objs)
    asyncio.run(rt.loop.run_once())
    # a watch gap (410 Gone): the waiting Workload was deleted, another one created, no events for either
    created = copy.deepcopy(objs[5])
    created["metadata"].update(name="job-late-00003", uid="wl-00003", resourceVersion="500")
    api.serve_list(collection_path("Workload"), "kueue.x-k8s.io/v1beta2", "Workload", [objs[4], created])
    api.answer("GET", f"{WORKLOADS}/job-wait-00002", not_found("workloads", "kueue.x-k8s.io", "job-wait-00002"), 404)
    api.serve_list(collection_path("AdmissionDiagnosis"), "kueue-doctor.dev/v1alpha1", "AdmissionDiagnosis",
                   [copy.deepcopy(r.body) for r in api.applies()])
    before = len(api.requests)
    asyncio.run(rt.orphans.resync())
    assert set(rt.state.workloads) == {RUNNING, ("team-a", "job-late-00003")}
    assert WAITING not in rt.verdicts
    workload_lists = [r for r in api.requests[before:] if r.path == collection_path("Workload")]
    assert [METADATA_ONLY in r.accept for r in workload_lists] == [True, False]  # whole objects only when missing
    assert [r.path for r in api.writes if r.method == "DELETE"] == [f"{DIAGNOSES}/job-wait-00002"]
    asyncio.run(rt.loop.run_once())  # the resync marked every Workload: only the new one has news
    assert [r.path for r in api.applies()[2:]] == [f"{DIAGNOSES}/job-late-00003"]
