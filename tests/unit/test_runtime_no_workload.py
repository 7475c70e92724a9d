"""The operator and owners Kueue made no Workload for, on a canned apiserver: the owner's own diagnosis is
written once under Kueue's Workload name, continued by the Workload's, deleted when no longer true, kept by
the resync; Kueue's ConfigMap is read by name."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from kueue_doctor.kube.kueue_names import expected_workload_name
from kueue_doctor.live.runtime import Runtime
from tests.builders import Workload, condition

from .apiserver import cluster
from .scenario import DIAGNOSES, objects, started

OLD = (datetime.now(UTC) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _config_map(frameworks: list[str]) -> dict[str, Any]:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
           "integrations": {"frameworks": frameworks}}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system", "resourceVersion": "7"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(doc)}}


def _jobset(created: str = OLD, rv: str = "300", queue: str | None = "user-queue") -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "trainer", "namespace": "team-a", "uid": "5b1c9f0e-0000-4000-8000-000000000301",
                         "creationTimestamp": created, "resourceVersion": rv, "labels": labels},
            "spec": {"suspend": False, "replicatedJobs": []}, "status": {}}


def _path(owner: dict[str, Any]) -> str:
    return f"{DIAGNOSES}/{expected_workload_name(owner)}"


def test_an_owner_without_workload_gets_its_own_diagnosis_named_as_kueue_names_the_workload() -> None:
    objs = [*objects(), _config_map(["batch/job"]), _jobset()]
    rt, api = started(objs)
    assert asyncio.run(rt.loop.run_once()) == 3
    (mine,) = [r for r in api.applies() if r.path == _path(_jobset())]
    body = mine.body
    assert (body["status"]["reason"], body["status"]["cause"]) == ("NoWorkload", "IntegrationNotEnabled")
    assert body["metadata"]["ownerReferences"] == [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                                    "name": "trainer",
                                                    "uid": "5b1c9f0e-0000-4000-8000-000000000301"}]
    assert "ConfigMap kueue-system/kueue-manager-config" in body["status"]["message"]
    assert asyncio.run(rt.loop.run_once()) == 0  # nothing new: nothing written
    assert len(api.applies()) == 3


def test_within_the_grace_period_nothing_is_written_and_the_loop_wakes_when_it_ends() -> None:
    fresh = (datetime.now(UTC) - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    rt, api = started([*objects(), _config_map(["batch/job"]), _jobset(created=fresh)])
    asyncio.run(rt.loop.run_once())
    assert _path(_jobset()) not in [r.path for r in api.applies()]
    assert rt.loop._sleep_for() <= 26  # woken when the 30 s grace period ends, not at the next resync


def test_the_workloads_diagnosis_continues_the_owners_and_a_stale_one_is_deleted() -> None:
    js = _jobset()
    rt, api = started([*objects(), _config_map(["batch/job", "jobset.x-k8s.io/jobset"]), js])
    asyncio.run(rt.loop.run_once())
    assert [r.body["status"]["cause"] for r in api.applies() if r.path == _path(js)] == ["WorkloadNotCreated"]
    wl = (Workload(expected_workload_name(js), "team-a").queue("user-queue").request("cpu", "1").owner(js)
          .condition(condition("QuotaReserved", "False", "Pending", "Workload is pending")).resource_version("301"))
    rt.inbox.observe("ADDED", wl.obj())
    asyncio.run(rt.loop.run_once())
    latest = [r.body for r in api.applies() if r.path == _path(js)][-1]
    assert latest["spec"]["workloadRef"]["name"] == expected_workload_name(js)
    assert latest["metadata"]["ownerReferences"][0]["kind"] == "Workload"

    other = _jobset(queue=None, rv="302")  # a second owner that loses its queue label: its diagnosis goes
    other["metadata"].update(name="scratch", uid="5b1c9f0e-0000-4000-8000-000000000399")
    rt.inbox.observe("ADDED", {**other, "metadata": {**other["metadata"],
                                                      "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}})
    asyncio.run(rt.loop.run_once())
    assert _path(other) in [r.path for r in api.applies()]
    rt.inbox.observe("MODIFIED", {**other, "metadata": {**other["metadata"], "resourceVersion": "303"}})
    asyncio.run(rt.loop.run_once())
    assert ("DELETE", _path(other)) in [(r.method, r.path) for r in api.writes]


def test_a_resync_keeps_an_owners_diagnosis_and_rereads_kueues_configuration() -> None:
    js = _jobset()
    api = cluster([*objects(), _config_map(["batch/job"]), js])
    rt, api = started([*objects(), _config_map(["batch/job"]), js], api)
    asyncio.run(rt.loop.run_once())
    written = [r.body for r in api.applies() if r.path == _path(js)]
    api.serve_list("/apis/kueue-doctor.dev/v1alpha1/admissiondiagnoses", "kueue-doctor.dev/v1alpha1",
                   "AdmissionDiagnosis", written)
    api.get("/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config",
            {**_config_map(["batch/job", "jobset.x-k8s.io/jobset"]), "metadata": {
                "name": "kueue-manager-config", "namespace": "kueue-system", "resourceVersion": "8"}})
    asyncio.run(rt.orphans.resync())
    asyncio.run(rt.loop.run_once())
    assert ("DELETE", _path(js)) not in [(r.method, r.path) for r in api.writes]
    latest = [r.body for r in api.applies() if r.path == _path(js)][-1]
    assert latest["status"]["cause"] == "WorkloadNotCreated"  # the JobSet integration is on now


def test_without_rbac_on_kueues_configmap_the_verdict_says_what_it_could_not_read() -> None:
    objs = [*objects(), _jobset()]
    api = cluster(objs)
    api.answer("GET", "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config",
               {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                "message": 'configmaps "kueue-manager-config" is forbidden'}, 403)
    rt, api = started(objs, api)
    asyncio.run(rt.loop.run_once())
    (body,) = [r.body for r in api.applies() if r.path == _path(_jobset())]
    assert body["status"]["cause"] == "WorkloadNotCreated"
    assert "could not read Kueue's Configuration" in body["status"]["message"]


def test_an_owner_that_leaves_the_watch_takes_its_diagnosis_with_it() -> None:
    # the label removed: a label-selected watch reports DELETED although the JobSet still exists, so the
    # garbage collector will not delete the diagnosis: the operator must
    js = _jobset()
    rt, api = started([*objects(), _config_map(["batch/job"]), js])
    asyncio.run(rt.loop.run_once())
    assert _path(js) in [r.path for r in api.applies()]
    rt.inbox.observe("DELETED", {**js, "metadata": {**js["metadata"], "resourceVersion": "310", "labels": {}}})
    asyncio.run(rt.loop.run_once())
    assert ("DELETE", _path(js)) in [(r.method, r.path) for r in api.writes]
    assert _path(js) not in [r.path for r in api.applies()][3:]


def test_a_resync_notices_kueues_configmap_deleted() -> None:
    js = _jobset()
    rt, api = started([*objects(), _config_map(["batch/job"]), js])
    asyncio.run(rt.loop.run_once())
    assert [r.body["status"]["cause"] for r in api.applies() if r.path == _path(js)] == ["IntegrationNotEnabled"]
    api.forget("GET", "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config")  # now a 404
    asyncio.run(rt.orphans.resync())
    asyncio.run(rt.loop.run_once())
    latest = [r.body for r in api.applies() if r.path == _path(js)][-1]
    assert latest["status"]["cause"] == "WorkloadNotCreated"
    assert "was looked for and not found" in latest["status"]["message"]


def _member(i: int, created: str = OLD, total: int = 3, rv: str | None = None) -> dict[str, Any]:
    """A Pod of group trio as Kueue's pod webhook leaves it before admission: gated, no podset label."""
    from tests.builders import Pod

    pod = (Pod(f"member-{i}", "team-a").label("kueue.x-k8s.io/queue-name", "user-queue")
           .label("kueue.x-k8s.io/managed", "true").label("kueue.x-k8s.io/pod-group-name", "trio")
           .annotation("kueue.x-k8s.io/pod-group-total-count", str(total)).request("cpu", "1").obj())
    pod["metadata"].update(creationTimestamp=created, resourceVersion=rv or f"40{i}")
    pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return pod


GROUP = f"{DIAGNOSES}/trio"
PODS = "/api/v1/pods"


def test_an_incomplete_pod_group_gets_a_diagnosis_though_no_watch_brings_its_pods() -> None:
    """Kueue makes no Workload for a Pod group missing Pods and does not label its Pods podset (what the Pod watch
    selects): the start-up list and the poll read them by the group label, the operator diagnoses the group under
    the name its Workload will have, and drops that diagnosis when the group is complete or gone."""
    pods = [_member(0), _member(1)]
    api = cluster([*objects(), _config_map(["batch/job", "pod"]), *pods])
    rt, api = started([], api)
    assert {k for k in rt.state.pods} == {("team-a", "member-0"), ("team-a", "member-1")}
    asyncio.run(rt.loop.run_once())
    (body,) = [r.body for r in api.applies() if r.path == GROUP]
    assert (body["status"]["reason"], body["status"]["cause"]) == ("NoWorkload", "PodGroupIncomplete")
    assert "has 2 of 3 Pods" in body["status"]["message"]

    # the third Pod is created: the poll brings it (no watch does), the group is complete; Kueue makes its Workload
    # within a second, so within the grace period the stand-in stays as it was (neither rewritten nor deleted) and
    # the loop looks again when the grace ends
    third = _member(2, created=(datetime.now(UTC) - timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    api.serve_list(PODS, "v1", "Pod", [*pods, third])
    assert asyncio.run(rt.orphans.poll_pod_groups()) == 1  # only what is new: the two known ones are dropped
    writes = len(api.writes)
    asyncio.run(rt.loop.run_once())
    assert len(api.writes) == writes and rt.loop._sleep_for() <= 29
    assert ("team-a", "member-2") in rt.state.pods

    # Kueue admits it: the watch brings member-0 with the podset label; a poll read before that arrives late
    admitted = {**pods[0], "metadata": {**pods[0]["metadata"], "resourceVersion": "500",
                                        "labels": {**pods[0]["metadata"]["labels"], "kueue.x-k8s.io/podset": "main"}}}
    rt.inbox.observe("MODIFIED", admitted)
    rt.inbox.put("ADDED", pods[0])
    rt.inbox.drain()
    assert rt.state.pods["team-a", "member-0"]["metadata"]["resourceVersion"] == "500"

    # the gated ones are deleted: the poll no longer lists them and drops them from the state
    api.serve_list(PODS, "v1", "Pod", [admitted])
    assert asyncio.run(rt.orphans.poll_pod_groups()) == 2
    rt.inbox.drain()
    assert set(rt.state.pods) == {("team-a", "member-0")}


def test_a_pod_group_within_the_grace_period_wakes_the_loop_when_it_ends_and_no_poll_without_the_integration() -> None:
    fresh = (datetime.now(UTC) - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    rt, api = started([*objects(), _config_map(["batch/job", "pod"]), _member(0, fresh), _member(1, fresh)])
    asyncio.run(rt.loop.run_once())
    assert GROUP not in [r.path for r in api.applies()]
    assert rt.loop._sleep_for() <= 26  # the 30 s grace period after the newest Pod

    for frameworks, polled in ((["batch/job", "pod"], True), (["batch/job"], False)):
        rt, api = started([*objects(), _config_map(frameworks)])
        rt.loop._next_group_poll = 0.0  # due

        async def one_pass(rt: Runtime) -> None:
            await rt.loop.run_once()
            if rt.loop._group_poll is not None:
                await rt.loop._group_poll

        before = len(api.requests)
        asyncio.run(one_pass(rt))
        asked = [r for r in api.requests[before:] if r.path == PODS
                 and r.query.get("labelSelector") == "kueue.x-k8s.io/pod-group-name,!kueue.x-k8s.io/podset"]
        assert bool(asked) is polled, frameworks  # without Kueue's pod integration no Pod is gated


def _surge_pod(i: int, worker: bool) -> dict[str, Any]:
    """A Pod of LeaderWorkerSet serve's surge group 2 as Kueue v0.19 leaves it while it has made no Workload
    (kueue#8769): gated, its group and prebuilt Workload named by annotations (WorkloadIdentifierAnnotations)."""
    from tests.builders import Pod

    group = "leaderworkerset-serve-2-1358a"
    pod = (Pod(f"serve-2{'-1' if worker else ''}", "team-a").label("kueue.x-k8s.io/queue-name", "user-queue")
           .label("kueue.x-k8s.io/managed", "true").label("leaderworkerset.sigs.k8s.io/name", "serve")
           .label("leaderworkerset.sigs.k8s.io/group-index", "2")
           .label("statefulset.kubernetes.io/pod-name", f"serve-2{'-1' if worker else ''}")
           .annotation("kueue.x-k8s.io/pod-group-name", group).annotation("kueue.x-k8s.io/prebuilt-workload-name", group)
           .annotation("kueue.x-k8s.io/pod-group-total-count", "2")
           .annotation("kueue.x-k8s.io/pod-suspending-parent", "leaderworkerset.x-k8s.io/leaderworkerset")
           .request("cpu", "1").obj())
    pod["metadata"].update(creationTimestamp=OLD, resourceVersion=f"50{i}")
    pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return pod


def test_a_leaderworkerset_group_without_its_workload_is_polled_though_its_group_name_is_an_annotation() -> None:
    """Kueue v0.19 names a LeaderWorkerSet group's Workload in annotations, which the group-label selector cannot
    select: the poll reads such gated Pods by the StatefulSet pod-name and managed labels, the group is diagnosed
    under its Workload's name, and a resync keeps them (its Pod listing selects them too)."""
    pods = [_surge_pod(0, False), _surge_pod(1, True)]
    api = cluster([*objects(), _config_map(["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]), *pods])
    rt, api = started([], api)
    assert ("team-a", "serve-2") not in rt.state.pods  # the start-up list selects the group label only
    assert asyncio.run(rt.orphans.poll_pod_groups()) == 2
    rt.inbox.drain()
    asyncio.run(rt.loop.run_once())
    path = f"{DIAGNOSES}/leaderworkerset-serve-2-1358a"
    (body,) = [r.body for r in api.applies() if r.path == path]
    assert (body["status"]["reason"], body["status"]["cause"], body["status"]["actionBy"]) == (
        "NoWorkload", "WorkloadNotCreated", "ClusterAdmin")
    assert "Group 2 of LeaderWorkerSet team-a/serve" in body["status"]["message"]
    assert "kueue#8769" in body["status"]["message"]

    asyncio.run(rt.orphans.resync())
    rt.inbox.drain()
    assert {("team-a", "serve-2"), ("team-a", "serve-2-1")} <= set(rt.state.pods)
    asyncio.run(rt.loop.run_once())
    assert ("DELETE", path) not in [(r.method, r.path) for r in api.writes]
