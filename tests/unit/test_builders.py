"""tests/builders.py builds what the API server returns: field names and JSON types as recorded from the real
control plane (tests/e2e/fixtures), manifests a user could send, and fresh objects on every call."""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders as b

FIXTURES = Path(__file__).resolve().parents[1] / "e2e" / "fixtures"
# fields whose keys are data, not schema (label keys, resource names, flavor names)
MAPS = {"labels", "annotations", "nodeSelector", "requests", "limits", "nodeLabels", "capacity", "allocatable",
        "flavors", "resourceUsage", "resources", "matchLabels", "uncountedTerminatedPods"}
# the real kubelet writes them; the fake kubelet the fixtures were recorded with does not
KUBELET_ONLY = {".status.hostIP", ".status.hostIPs", ".status.hostIPs[]", ".status.hostIPs[].ip", ".status.podIP",
                ".status.podIPs", ".status.podIPs[]", ".status.podIPs[].ip"}
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def paths(o: Any, prefix: str = "") -> set[tuple[str, str]]:
    """(path, JSON type) of every value, list items as ``[]``, data keys of MAPS fields as ``*``."""
    if isinstance(o, dict):
        out = {(prefix, "object")}
        for k, v in o.items():
            key = "*" if prefix.rsplit(".", 1)[-1] in MAPS and not isinstance(v, dict | list) else k
            out |= paths(v, f"{prefix}.{key}")
        return out
    if isinstance(o, list):
        out = {(prefix, "array")}
        for v in o:
            out |= paths(v, prefix + "[]")
        return out
    return {(prefix, JSON_TYPES[type(o)])}


@cache
def recorded() -> dict[tuple[str, str], set[tuple[str, str]]]:
    out: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for f in sorted(FIXTURES.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc and doc.get("kind") != "List":
                out[doc["apiVersion"], doc["kind"]] |= paths(doc)
    return out


def typical() -> list[dict[str, Any]]:
    """One built object per state the fixtures recorded."""
    job = b.Job("blog", "team-a").queue("main").parallelism(3).request("cpu", "1")
    pod = b.Pod("blog-x7k2p", "team-a").owner(job).workload("job-blog-8ec0a").queues("main", "cq").request("cpu", "1")
    return [
        b.Namespace("team-a").label("team", "a").obj(),
        b.Node("node-1").capacity(cpu="8", memory="8Gi").taint("dedicated", "gpu").obj(),
        b.ResourceFlavor("rf").node_labels({"pool": "a"}).node_taint("dedicated", "gpu").obj(),
        b.ClusterQueue("cq").cohort("co").quotas({"rf": {"cpu": "4", "pods": "4"}})
        .namespace_selector({"matchLabels": {"team": "a"}}).reservation("rf", "cpu", "2").usage("rf", "cpu", "2")
        .workloads(pending=1, reserving=1, admitted=1).obj(),
        b.LocalQueue("main", "team-a", "cq").reservation("rf", "cpu", "2").usage("rf", "cpu", "2")
        .workloads(admitted=1).obj(),
        job.obj(),
        b.Job("hog", "team-a").queue("main").request("cpu", "2").suspend(False)
        .status(active=1, ready=1, startTime=b.CREATED).obj(),
        b.Workload("job-blog-8ec0a", "team-a").queue("main").owner(job).count(3).request("cpu", "1")
        .condition(b.condition("QuotaReserved", "False", "Pending", "m")).resource_requests("main", {"cpu": "3"})
        .obj(),
        b.Workload("job-hog-00202", "team-a").queue("main").owner(job).priority_class("high").priority(1000)
        .request("cpu", "2").admission(b.Admission("cq").assignment(flavors={"cpu": "rf"}, usage={"cpu": "2"}))
        .condition(b.condition("QuotaReserved", "True", "QuotaReserved", "m")).eviction_stats("Preempted")
        .status_field("accumulatedPastExecutionTimeSeconds", 12).obj(),
        pod.node_selector({"pool": "a"}).unschedulable("0/1 nodes are available").obj(),
        b.Pod("blog-abcde", "team-a").owner(job).workload("job-blog-8ec0a").request("cpu", "1").node("node-1")
        .running(b.POD_CREATED).obj(),
        b.Pod("blog-gone1", "team-a").owner(job).request("cpu", "1").node("node-1").running(b.POD_CREATED)
        .deleted(b.EVENT_AT).obj(),
        b.Event(job, "Suspended", "m", type="Normal").obj(),
        b.Event(job, "Suspended", "m", type="Normal", api="events.k8s.io/v1").source("job-controller").obj(),
        b.Event(pod, "FailedScheduling", "m").reporting("default-scheduler", "default-scheduler-vm", "Scheduling")
        .series(2, b.EVENT_AT).obj(),
        b.Event(pod, "FailedScheduling", "m", api="events.k8s.io/v1").series(2, b.EVENT_AT).obj(),
        b.WorkloadPriorityClass("high", 1000).obj(),
    ]


@pytest.mark.parametrize("obj", typical(), ids=lambda o: f"{o['kind']}/{o['metadata']['name']}")
def test_built_objects_have_only_fields_and_types_the_api_server_returned(obj: dict[str, Any]) -> None:
    seen = recorded()[obj["apiVersion"], obj["kind"]]
    assert seen, f"no recorded {obj['apiVersion']} {obj['kind']}"
    unknown = sorted(p for p in paths(obj) - seen if p[0] not in KUBELET_ONLY)
    assert not unknown, f"fields never seen on a real {obj['kind']}: {unknown}"


def test_manifests_carry_nothing_the_server_sets() -> None:
    job = b.Job("trainer", "team-a").queue("main").request("cpu", "100m")
    for builder in (b.Namespace("team-a"), b.ResourceFlavor("rf"), b.ClusterQueue("cq").quotas({"rf": {"cpu": 1}}),
                    b.LocalQueue("main", "team-a", "cq"), b.Cohort("co"), job, b.Workload("wl", "team-a"),
                    b.Pod("p", "team-a").owner(job), b.AdmissionCheck("ac")):
        m = builder.manifest()
        assert "status" not in m and set(m["metadata"]) <= {"name", "namespace", "labels", "annotations"}, m
    assert job.manifest()["spec"] == {"parallelism": 1, "completions": 1, "template": {"metadata": {}, "spec": {
        "containers": [{"name": "main", "image": b.IMAGE, "resources": {"requests": {"cpu": "100m"}}}],
        "restartPolicy": "Never"}}}
    # a null namespaceSelector admits no namespace: {} must be sent explicitly, and is
    assert b.ClusterQueue("cq").manifest()["spec"]["namespaceSelector"] == {}
    assert b.ClusterQueue("cq").namespace_selector(None).obj()["spec"]["namespaceSelector"] is None


def test_every_call_returns_a_fresh_object() -> None:
    wl = b.Workload("wl", "team-a").condition(b.condition("QuotaReserved", "False", "Pending", "m"))
    first = wl.obj()
    first["status"]["conditions"].clear()
    first["spec"]["podSets"][0]["count"] = 9
    assert wl.obj()["status"]["conditions"] and wl.obj()["spec"]["podSets"][0]["count"] == 1


def test_uids_are_deterministic_and_references_agree() -> None:
    job = b.Job("trainer", "team-a")
    pod = b.Pod("trainer-abcde", "team-a").owner(job).obj()
    assert pod["metadata"]["uid"] == b.uid_for("Pod", "trainer-abcde", "team-a") == b.Pod("trainer-abcde", "team-a").obj()[
        "metadata"]["uid"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == job.obj()["metadata"]["uid"]
    assert pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == job.get_uid()
    by_name = b.Event(b.ref("Pod", "trainer-abcde", "team-a"), "FailedScheduling", "m").obj()
    assert by_name["involvedObject"]["uid"] == pod["metadata"]["uid"]
    wl = b.Workload("job-trainer-1a2b3", "team-a").owner(job).obj()
    assert wl["metadata"]["labels"] == {b.JOB_UID_LABEL: job.get_uid()}
    two = [b.Event(job, "Started", "m").obj()["metadata"] for _ in range(2)]
    assert two[0]["name"] != two[1]["name"] and two[0]["uid"] != two[1]["uid"]


def test_cluster_queue_status_lists_every_flavor_and_resource_with_what_is_reserved() -> None:
    cq = (b.ClusterQueue("cq").cohort("co")
          .resource_group(b.FlavorQuotas("on-demand").resource("cpu", "8", borrowing_limit="4")
                          .resource("memory", "32Gi"),
                          b.FlavorQuotas("spot").resource("cpu", "16", lending_limit="8").resource("memory", "64Gi"))
          .reservation("spot", "cpu", "20", borrowed="4").obj())
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"][0]["resources"][0] == {"name": "cpu", "nominalQuota": "8", "borrowingLimit": "4"}
    assert group["flavors"][1]["resources"][0] == {"name": "cpu", "nominalQuota": "16", "lendingLimit": "8"}
    assert cq["status"]["flavorsReservation"][1]["resources"][0] == {"name": "cpu", "total": "20", "borrowed": "4"}
    assert cq["status"]["flavorsUsage"][0]["resources"] == [{"name": "cpu", "total": "0", "borrowed": "0"},
                                                            {"name": "memory", "total": "0", "borrowed": "0"}]
    same = b.ClusterQueue("cq").quotas({"on-demand": {"cpu": {"nominalQuota": "8", "borrowingLimit": "4"}}}).obj()
    assert same["spec"]["resourceGroups"][0]["flavors"][0] == group["flavors"][0] | {"resources": [
        group["flavors"][0]["resources"][0]]}


def test_pod_qos_class_follows_requests_and_limits() -> None:
    assert b.Pod("p", "ns").obj()["status"]["qosClass"] == "BestEffort"
    assert b.Pod("p", "ns").limit("nvidia.com/gpu", 1).obj()["status"]["qosClass"] == "BestEffort"
    assert b.Pod("p", "ns").request("cpu", "1").obj()["status"]["qosClass"] == "Burstable"
    assert b.Pod("p", "ns").limit("cpu", "1").limit("memory", "1Gi").obj()["status"]["qosClass"] == "Guaranteed"


def test_times_are_rfc3339_strings() -> None:
    from datetime import UTC, datetime

    t = datetime(2026, 11, 30, 9, 1, 2, 345678, tzinfo=UTC)
    assert b.rfc3339(t) == "2026-11-30T09:01:02Z" and b.micro_time(t) == "2026-11-30T09:01:02.345678Z"
    assert b.rfc3339("2026-11-30T09:01:02.345678Z") == "2026-11-30T09:01:02Z"
    ev = b.Event(b.ref("Pod", "p", "ns"), "FailedScheduling", "m", api="events.k8s.io/v1", at=t).obj()
    assert ev["eventTime"] == "2026-11-30T09:01:02.345678Z"
    assert ev["metadata"]["creationTimestamp"] == "2026-11-30T09:01:02Z"
