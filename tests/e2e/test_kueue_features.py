"""Kueue features on the real Kueue v0.19.2: ProvisioningRequest admission checks.

The ProvisioningRequest CRD comes from the cluster-autoscaler apis module at the version Kueue's go.mod
requires; once it is served, Kueue is restarted so that its provisioning admission-check controller
starts (it only does when the API exists at start-up). No cluster autoscaler runs: the test plays it,
writing the ProvisioningRequest's conditions (``Accepted``, ``Provisioned``, ``Failed``,
``BookingExpired``, ``CapacityRevoked``) through the status subresource, and Kueue reacts as it would.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tests.builders import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Job,
    LocalQueue,
    ResourceFlavor,
    WorkloadPriorityClass,
)

from . import kube
from .conftest import ClusterHandle
from .kube import Resources, condition, condition_is, lc, wait_for, wait_for_workload
from .kueue_reasons import KueueReasons
from .test_scenarios import (
    POOL_LABEL,
    _diagnose,
    _diagnosis,
    _line,
    _of,
    _pool,
    _snapshot,
    _verdict,
    _wait_pending,
)

pytestmark = pytest.mark.e2e

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
PR_API = "/apis/autoscaling.x-k8s.io/v1"


@pytest.fixture(scope="module")
def provisioning(cluster: ClusterHandle) -> Iterator[None]:
    """The ProvisioningRequest API served, and Kueue started after it (its controller is on)."""
    api = cluster.api_client
    if cluster.local is None:
        pytest.skip("restarting Kueue after installing the ProvisioningRequest CRD needs the local cluster")
    lc.install_crd(api, lc.provisioning_request_crd_path())
    cluster.local.restart_kueue()
    yield


def _provisioning_queue(resources: Resources, namespace: str, *, retries: int, base: int = 1, lq: str = "main",
                        extra_check: str | None = None) -> tuple[str, str, str]:
    """ProvisioningRequestConfig (``retries`` = backoffLimitCount, 1 s back-off) + its AdmissionCheck +
    a flavor on a fresh pool + a ClusterQueue using the check (and ``extra_check``) + LocalQueue 'main'."""
    prc = kube.unique_name("prc")
    resources.create({
        "apiVersion": kube.KUEUE_API_VERSION, "kind": "ProvisioningRequestConfig", "metadata": {"name": prc},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io",
                 "retryStrategy": {"backoffLimitCount": retries, "backoffBaseSeconds": base,
                                   "backoffMaxSeconds": 2 * base}},
    })
    check = kube.unique_name("prov")
    resources.create(AdmissionCheck(check, PROVISIONING_CONTROLLER).parameters(
        "kueue.x-k8s.io", "ProvisioningRequestConfig", prc).manifest())
    pool = _pool(resources, cpu="4")
    rf = str(resources.create(ResourceFlavor(kube.unique_name("rf")).node_labels({POOL_LABEL: pool}).manifest())
             ["metadata"]["name"])
    cq = ClusterQueue(kube.unique_name("cq")).quotas({rf: {"cpu": "4"}}).admission_check(check)
    if extra_check:
        cq = cq.admission_check(extra_check)
    cq_name = str(resources.create(cq.manifest())["metadata"]["name"])
    resources.create(LocalQueue(lq, namespace, cq_name).manifest())
    wait_for(lambda: condition_is(kube.get(resources.api, "AdmissionCheck", check), "Active"),
             message=f"AdmissionCheck {check} Active")
    return check, cq_name, rf


def _check_state(wl: Mapping[str, Any] | None, check: str) -> dict[str, Any]:
    for c in (wl or {}).get("status", {}).get("admissionChecks", []):
        if c["name"] == check:
            return dict(c)
    return {}


def _read_back_v1beta1(api: Any, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same snapshot with every Kueue object read again through kueue.x-k8s.io/v1beta1 (served by Kueue's
    conversion webhook for Workloads, queues and Cohorts; the others are stored the same in both)."""
    out = []
    for obj in objects:
        if obj.get("apiVersion") != kube.KUEUE_API_VERSION:
            out.append(obj)
            continue
        meta = obj["metadata"]
        path = kube.kind_of(obj).item(meta["name"], meta.get("namespace")).replace("/v1beta2/", "/v1beta1/")
        old = kube.request_json(api, "GET", path)
        assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1", old["apiVersion"]
        out.append(old)
    return out


def _same_verdicts_through_v1beta1(api: Any, namespace: str, objects: list[dict[str, Any]], jobs: Iterator[str] | Any,
                                   record: str) -> list[dict[str, Any]]:
    """Diagnose the v1beta1 read-back of ``objects``: every Job gets the same verdict and message."""
    old = _read_back_v1beta1(api, objects)
    kube.record_fixture(f"scenario-{record}-v1beta1", old, note=f"{record}, Kueue objects read through v1beta1")
    new_d, old_d = _diagnose(objects), _diagnose(old)
    for job in jobs:
        a, b = _of(new_d, namespace, job)["status"], _of(old_d, namespace, job)["status"]
        assert (_verdict(a), a["message"]) == (_verdict(b), b["message"]), (job, a, b)
    return old


def _request(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    return kube.get(api, "autoscaling.x-k8s.io/ProvisioningRequest", name, namespace)


def _play_autoscaler(api: Any, namespace: str, name: str, **conditions: tuple[str, str, str]) -> None:
    """Write the ProvisioningRequest's conditions as the cluster autoscaler does: type=(status, reason, msg)."""
    now = lc._now_rfc3339()
    body = {"status": {"conditions": [
        {"type": t, "status": st, "reason": reason, "message": msg, "lastTransitionTime": now}
        for t, (st, reason, msg) in conditions.items()]}}
    kube.request_json(api, "PATCH", f"{PR_API}/namespaces/{namespace}/provisioningrequests/{name}/status", body,
                      content_type="application/merge-patch+json")


def _reserved_with_request(api: Any, namespace: str, job: str, check: str, attempt: int = 1) -> str:
    """Wait until the Job's Workload holds quota with the check Pending and Kueue made the ProvisioningRequest
    of ``attempt``; its name."""
    wl = wait_for_workload(api, namespace, job, lambda w: condition_is(w, "QuotaReserved")
                           and _check_state(w, check).get("state") == "Pending"
                           and int(_check_state(w, check).get("retryCount") or 0) == attempt - 1,
                           what=f"quota reserved, check {check} Pending (attempt {attempt})")
    pr_name = f"{wl['metadata']['name']}-{check}-{attempt}"
    wait_for(lambda: _request(api, namespace, pr_name), message=f"ProvisioningRequest {pr_name}")
    return pr_name


def _manual_check(resources: Resources) -> str:
    """An AdmissionCheck whose controller is the test: Active, and Pending on every Workload forever."""
    name = kube.unique_name("gate")
    resources.create(AdmissionCheck(name, "kueue-doctor.test/manual").manifest())
    kube.request_json(resources.api, "PATCH", f"/apis/kueue.x-k8s.io/v1beta2/admissionchecks/{name}/status",
                      {"status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
                                                  "message": "played by the test",
                                                  "lastTransitionTime": lc._now_rfc3339()}]}},
                      content_type="application/merge-patch+json")
    return name


ACCEPTED = ("True", "Accepted", "the request was accepted")
PROVISIONED = ("True", "Provisioned", "capacity is provisioned")
FAILED = ("True", "CapacityNotAvailable", "capacity not available in zone us-east1-b")


def test_provisioning_request_pending_accepted_provisioned_then_revoked(
    cluster: ClusterHandle, resources: Resources, namespace: str, provisioning: None
) -> None:
    """The happy path and its end: the autoscaler accepts, provisions, then takes the nodes back."""
    api = cluster.api_client
    check, cq, rf = _provisioning_queue(resources, namespace, retries=1)
    resources.create(Job("gpu", namespace).queue("main").request("cpu", "1").manifest())
    pr = _reserved_with_request(api, namespace, "gpu", check)

    st, _ = _diagnosis(api, namespace, "gpu", record="provisioning-pending", note="ProvisioningRequest, no condition")
    assert _verdict(st) == ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckPending", "Nobody"), st
    assert f"ProvisioningRequest {namespace}/{pr} (attempt 1) has no condition yet" in st["message"], st["message"]
    assert st["clusterQueue"] == cq and [c["name"] for c in st["admissionChecks"]] == [check], st

    eta = "waiting for capacity, ETA 2026-12-01T20:00:00Z"
    _play_autoscaler(api, namespace, pr, Accepted=ACCEPTED, Provisioned=("False", "Provisioning", eta))
    wait_for_workload(api, namespace, "gpu", lambda w: _check_state(w, check).get("message") == eta,
                      what="the autoscaler's ETA in the check message")
    st, _ = _diagnosis(api, namespace, "gpu", record="provisioning-accepted", note="Accepted, Provisioned=False + ETA")
    assert _verdict(st) == ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckPending", "Nobody"), st
    assert f"The cluster autoscaler is working on ProvisioningRequest {namespace}/{pr} (attempt 1): {eta}" in \
        st["message"], st["message"]

    _play_autoscaler(api, namespace, pr, Accepted=ACCEPTED, Provisioned=PROVISIONED)
    wait_for_workload(api, namespace, "gpu", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    st, _ = _diagnosis(api, namespace, "gpu", record="provisioning-provisioned", note="Provisioned=True, running")
    assert _verdict(st) == ("Running", "Running", "PodsReady", "Nobody"), st
    assert [(c["name"], c["state"]) for c in st["admissionChecks"]] == [(check, "Ready")], st
    assert st["flavors"] == [rf]

    revoked = "the nodes of this request were removed by the autoscaler"
    _play_autoscaler(api, namespace, pr, Accepted=ACCEPTED, Provisioned=PROVISIONED,
                     CapacityRevoked=("True", "CapacityRevoked", revoked))
    wait_for_workload(api, namespace, "gpu", lambda w: w["spec"].get("active") is False
                      and condition_is(w, "QuotaReserved", "False"), what="deactivated, quota released")
    st, _ = _diagnosis(api, namespace, "gpu", record="provisioning-capacity-revoked", note="CapacityRevoked")
    assert _verdict(st) == ("Admission", "Deactivated", "AdmissionCheckRejected", "WorkloadOwner"), st
    assert f"Check {check} (ProvisioningRequest {namespace}/{pr}): CapacityRevoked" in st["message"], st["message"]
    assert revoked in st["message"], st["message"]


def test_provisioning_request_failed_is_retried_or_rejected(
    cluster: ClusterHandle, resources: Resources, namespace: str, provisioning: None, kueue_reasons: KueueReasons
) -> None:
    """Failed: retried with Kueue's back-off while backoffLimitCount allows (seen in back-off, and on the next
    attempt), else the check is Rejected and Kueue deactivates the Workload."""
    api = cluster.api_client
    slow, _, _ = _provisioning_queue(resources, namespace, retries=1, base=30, lq="slow")
    resources.create(Job("backoff", namespace).queue("slow").request("cpu", "1").manifest())
    fast, _, _ = _provisioning_queue(resources, namespace, retries=1, base=1, lq="fast")
    resources.create(Job("again", namespace).queue("fast").request("cpu", "1").manifest())
    none, _, _ = _provisioning_queue(resources, namespace, retries=0, lq="none")
    resources.create(Job("nomore", namespace).queue("none").request("cpu", "1").manifest())
    for job, check in (("backoff", slow), ("again", fast), ("nomore", none)):
        _play_autoscaler(api, namespace, _reserved_with_request(api, namespace, job, check), Failed=FAILED)

    wait_for_workload(api, namespace, "backoff", lambda w: _check_state(w, slow).get("state") == "Retry",
                      what="check Retry")
    second = _reserved_with_request(api, namespace, "again", fast, attempt=2)
    wait_for_workload(api, namespace, "nomore", lambda w: w["spec"].get("active") is False
                      and condition_is(w, "QuotaReserved", "False"), what="deactivated, quota released")
    objects = _snapshot(api, [namespace])
    kube.record_fixture(f"scenario-{kueue_reasons.fixture('provisioning-failed')}", objects, note="Failed: back-off, next attempt, rejected")
    diagnoses = _diagnose(objects)
    _same_verdicts_through_v1beta1(api, namespace, objects, ("backoff", "again", "nomore"),
                                   kueue_reasons.fixture("provisioning-failed"))

    st = _of(diagnoses, namespace, "backoff")["status"]
    assert _verdict(st) == ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckRetry", "Nobody"), st
    assert "(attempt 1) is Failed: the cluster autoscaler could not provision the capacity (" + FAILED[2] in \
        st["message"], st["message"]
    assert "retries with attempt 2 after a 30s back-off (requeueAt " in st["message"], st["message"]

    st = _of(diagnoses, namespace, "again")["status"]
    assert _verdict(st) == ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckPending", "Nobody"), st
    assert f"ProvisioningRequest {namespace}/{second} (attempt 2) has no condition yet" in st["message"], st
    assert f"1 earlier attempt(s) did not get capacity (last: Retrying after failure: {FAILED[2]})" in \
        st["message"], st["message"]

    st = _of(diagnoses, namespace, "nomore")["status"]
    assert _verdict(st) == ("Admission", "Deactivated", "AdmissionCheckRejected", "WorkloadOwner"), st
    assert f"Check {none} (ProvisioningRequest {namespace}/" in st["message"], st["message"]
    assert "Failed with no retries left" in st["message"] and FAILED[2] in st["message"], st["message"]
    # the granular path writes Deactivated, then PendingEvaluation once the eviction is done
    wl = next(o for o in objects if o["kind"] == "Workload" and o["metadata"]["name"].startswith("job-nomore-"))
    kueue_reasons.check(api, namespace, "nomore", st, {"Deactivated", "PendingEvaluation"}, wl)


def test_provisioning_booking_expired_before_admission(
    cluster: ClusterHandle, resources: Resources, namespace: str, provisioning: None
) -> None:
    """Provisioned, but another check holds the Workload back until the booking expires: Kueue retries."""
    api = cluster.api_client
    gate = _manual_check(resources)
    check, _, _ = _provisioning_queue(resources, namespace, retries=1, base=30, extra_check=gate)
    resources.create(Job("late", namespace).queue("main").request("cpu", "1").manifest())
    pr = _reserved_with_request(api, namespace, "late", check)
    _play_autoscaler(api, namespace, pr, Accepted=ACCEPTED, Provisioned=PROVISIONED)
    wait_for_workload(api, namespace, "late", lambda w: _check_state(w, check).get("state") == "Ready",
                      what="provisioning check Ready")
    st, _ = _diagnosis(api, namespace, "late")
    assert _verdict(st) == ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckPending", "Nobody"), st
    assert f"{gate} is Pending; its controller is kueue-doctor.test/manual" in st["message"], st["message"]

    expired = "the booking of 10m expired"
    _play_autoscaler(api, namespace, pr, Accepted=ACCEPTED, Provisioned=PROVISIONED,
                     BookingExpired=("True", "BookingExpired", expired))
    wait_for_workload(api, namespace, "late", lambda w: _check_state(w, check).get("state") == "Retry",
                      what="check Retry after the booking expired")
    st, _ = _diagnosis(api, namespace, "late", record="provisioning-booking-expired", note="BookingExpired")
    assert _verdict(st) == ("Admission", "WaitingForAdmissionChecks", "AdmissionCheckRetry", "Nobody"), st
    assert (f"ProvisioningRequest {namespace}/{pr} (attempt 1) is BookingExpired: the capacity it booked expired "
            f"before the Workload was admitted, while check(s) {gate} were not Ready ({expired})") in st["message"], \
        st["message"]
    assert "after a 30s back-off" in st["message"], st["message"]


# ---- topology-aware scheduling ---------------------------------------------------------------

BLOCK, RACK, HOST = "kueue-doctor.local/block", "kueue-doctor.local/rack", "kubernetes.io/hostname"
REQUIRED, PREFERRED = "kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"


def _topology_queue(resources: Resources, namespace: str, racks: Mapping[str, Mapping[str, int]],
                    taints: Mapping[str, list[dict[str, str]]] | None = None,
                    cordoned: tuple[str, ...] = ()) -> tuple[str, str, dict[str, str]]:
    """A Topology block/rack/hostname over fresh fake nodes ({"b1/r1": {"n1": cpu, ...}}), a flavor on those
    nodes with topologyName, a ClusterQueue with ample quota and LocalQueue 'main'. Returns (topology, flavor,
    {short node name: real name})."""
    pool = kube.unique_name("tas")
    nodes: dict[str, str] = {}
    for path, hosts in racks.items():
        block, rack = path.split("/")
        for short, cpu in hosts.items():
            name = kube.unique_name(short)
            nodes[short] = name
            resources.node(name, cpu=str(cpu), memory="8Gi", taints=(taints or {}).get(short, []),
                           unschedulable=short in cordoned,
                           labels={POOL_LABEL: pool, BLOCK: f"{pool}-{block}", RACK: f"{pool}-{rack}"})
    topo = kube.unique_name("topo")
    resources.create({"apiVersion": kube.KUEUE_API_VERSION, "kind": "Topology", "metadata": {"name": topo},
                      "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}})
    rf = str(resources.create(ResourceFlavor(kube.unique_name("rf")).node_labels({POOL_LABEL: pool})
                              .topology(topo).manifest())["metadata"]["name"])
    cq = str(resources.create(ClusterQueue(kube.unique_name("cq")).quotas({rf: {"cpu": "64"}}).manifest())
             ["metadata"]["name"])
    resources.create(LocalQueue("main", namespace, cq).manifest())
    return topo, rf, nodes


def _tas_job(resources: Resources, namespace: str, name: str, pods: int, level: str, *, required: bool = True) -> None:
    job = Job(name, namespace).queue("main").request("cpu", "1").parallelism(pods).completions(pods)
    resources.create(job.pod_annotation(REQUIRED if required else PREFERRED, level).manifest())


def test_topology_aware_scheduling_fits_waits_or_never_fits(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    """Two blocks: b1 = rack r1 (n1, n2 tainted) + rack r2 (n3 cordoned), b2 = rack r3 (n4); 2 cpu per node,
    1 cpu per pod. Two rack-sized Jobs fill r1 and r3 and run; then a third waits for a rack, a preferred-
    topology Job waits for room anywhere, 5 pods in one block fit only with n2 and n3 back (the admin acts),
    7 pods never fit a block (the owner acts)."""
    api = cluster.api_client
    broken = {"key": "kueue-doctor.local/broken", "value": "disk", "effect": "NoSchedule"}
    topo, rf, nodes = _topology_queue(resources, namespace, {"b1/r1": {"n1": 2, "n2": 2}, "b1/r2": {"n3": 2},
                                                             "b2/r3": {"n4": 2}},
                                      taints={"n2": [broken]}, cordoned=("n3",))
    for name in ("fits", "fits2"):
        _tas_job(resources, namespace, name, 2, RACK)
    for name in ("fits", "fits2"):
        wait_for_workload(api, namespace, name, lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    _tas_job(resources, namespace, "busy", 2, RACK)
    _tas_job(resources, namespace, "anywhere", 2, BLOCK, required=False)
    _tas_job(resources, namespace, "block", 5, BLOCK)
    _tas_job(resources, namespace, "huge", 7, BLOCK)
    for name in ("busy", "anywhere", "block", "huge"):
        _wait_pending(api, namespace, name, f'topology "{topo}"')
    objects = _snapshot(api, [namespace])
    kube.record_fixture(f"scenario-{kueue_reasons.fixture('tas')}", objects, note="TAS: fits, waits, never fits")
    d = {name: _of(_diagnose(objects), namespace, name)["status"] for name in
         ("fits", "fits2", "busy", "anywhere", "block", "huge")}
    wls = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Workload"}

    for name in ("fits", "fits2"):
        assert _verdict(d[name]) == ("Running", "Running", "PodsReady", "Nobody"), d[name]
        assert d[name]["flavors"] == [rf]
    assigned = {wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0]
                ["valuesPerLevel"][0]["universal"] for wl in wls.values() if wl["status"].get("admission")}
    assert assigned == {nodes["n1"], nodes["n4"]}, assigned  # one rack each, never the tainted or cordoned node

    left_out = (f"not counted: 1 cordoned ({nodes['n3']}), 1 tainted kueue-doctor.local/broken=disk:NoSchedule "
                f"({nodes['n2']})")
    st = d["busy"]
    assert _verdict(st) == ("Admission", "WaitingForQuota", "TopologyPlacementFailed", "Nobody"), st
    assert (f"Pod set main (2 pods) requires one {RACK} domain of topology {topo} in flavor {rf}: Kueue can place "
            f"only 0 of 2 pod(s) now. Even with nothing running, the largest of the 2 {RACK} domains holds 2 pod(s) "
            f"(2 usable node(s) in the flavor); {left_out}.") in st["message"], st["message"]
    assert st["flavors"] == [rf]
    st = d["anywhere"]
    assert _verdict(st) == ("Admission", "WaitingForQuota", "TopologyPlacementFailed", "Nobody"), st
    assert "prefers the whole topology" in st["message"] and "largest topology holds 4 pod(s)" in st["message"], st
    st = d["block"]
    assert _verdict(st) == ("Admission", "ExceedsMaxQuota", "TopologyPlacementFailed", "ClusterAdmin"), st
    assert f"the largest of the 2 {BLOCK} domains holds 2 pod(s)" in st["message"], st["message"]
    assert "It would fit on the cordoned/tainted nodes" in st["message"], st["message"]
    st = d["huge"]
    assert _verdict(st) == ("Admission", "ExceedsMaxQuota", "TopologyPlacementFailed", "WorkloadOwner"), st
    assert "It cannot fit until nodes are added" in st["message"], st["message"]
    old = _same_verdicts_through_v1beta1(api, namespace, objects, d, kueue_reasons.fixture("tas"))
    assert any("domains" in (wl.get("status", {}).get("admission") or {}).get("podSetAssignments", [{}])[0].get(
        "topologyAssignment", {}) for wl in old if wl["kind"] == "Workload"), "v1beta1 topologyAssignment.domains"
    for name in ("busy", "anywhere", "block", "huge"):
        kueue_reasons.check(api, namespace, name, d[name],
                            "WaitingForQuota" if name in ("busy", "anywhere") else "TopologyPlacementFailed",
                            wls[kube.workload_for(api, namespace, name)["metadata"]["name"]])  # type: ignore[index]


# ---- cohort trees ----------------------------------------------------------------------------


def test_cohort_tree_borrowing_through_an_inner_cohort_with_a_borrowing_limit(
    cluster: ClusterHandle, resources: Resources, namespace: str, kueue_reasons: KueueReasons
) -> None:
    """root <- inner (nominal 0, borrowingLimit 1) <- cq-a (nominal 1); root <- cq-b (nominal 4, lendingLimit 2).
    cq-a can reach 2 cpu at most (inner's borrowingLimit binds before root's 3): 3 cpu never fits; 2 cpu borrows
    1 through the tree and runs; then 1 cpu more waits (inner has nothing left to borrow)."""
    api = cluster.api_client
    pool = _pool(resources, cpu="8")
    rf = str(resources.create(ResourceFlavor(kube.unique_name("rf")).node_labels({POOL_LABEL: pool}).manifest())
             ["metadata"]["name"])
    root, inner = kube.unique_name("root"), kube.unique_name("inner")
    resources.create(Cohort(root).manifest())
    resources.create(Cohort(inner).parent(root).quotas(
        {rf: {"cpu": {"nominalQuota": "0", "borrowingLimit": "1"}}}).manifest())
    cq_a = str(resources.create(ClusterQueue(kube.unique_name("cq-a")).quotas({rf: {"cpu": "1"}}).cohort(inner)
                                .manifest())["metadata"]["name"])
    resources.create(ClusterQueue(kube.unique_name("cq-b")).quotas(
        {rf: {"cpu": {"nominalQuota": "4", "lendingLimit": "2"}}}).cohort(root).manifest())
    resources.create(LocalQueue("main", namespace, cq_a).manifest())

    resources.create(Job("greedy", namespace).queue("main").request("cpu", "3").manifest())
    _wait_pending(api, namespace, "greedy", "maximum capacity (2)")
    resources.create(Job("borrower", namespace).queue("main").request("cpu", "2").manifest())
    wait_for_workload(api, namespace, "borrower", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    resources.create(Job("more", namespace).queue("main").request("cpu", "1").manifest())
    _wait_pending(api, namespace, "more", "insufficient unused quota")
    objects = _snapshot(api, [namespace])
    kube.record_fixture(f"scenario-{kueue_reasons.fixture('cohort-tree')}", objects, note="two-level cohort tree")
    d = {name: _of(_diagnose(objects), namespace, name)["status"] for name in ("greedy", "borrower", "more")}

    st = d["greedy"]
    assert _verdict(st) == ("Admission", "ExceedsMaxQuota", "BorrowingLimitReached", "ClusterAdmin"), st
    assert st["cohort"] == inner
    assert f"can never give more than 2 (capped by Cohort {inner}'s borrowingLimit 1; cohort {inner}: subtree 1" \
        in st["message"], st["message"]
    assert f"cohort {root}: subtree 3" in st["message"], st["message"]
    assert "estimate" not in st["message"], st["message"]  # our tree arithmetic agrees with Kueue's maximum
    assert _verdict(d["borrower"]) == ("Running", "Running", "PodsReady", "Nobody"), d["borrower"]
    st = d["more"]
    # inner's borrowingLimit (1) is used up while cq-b's lent quota sits idle in root: that limit holds it back
    assert _verdict(st) == ("Admission", "WaitingForQuota", "BorrowingLimitReached", "Nobody"), st
    assert f"Cohort {inner}'s borrowingLimit 1 stops its subtree from borrowing more" in st["message"], st["message"]
    cpu = _line(st, "cpu", rf)
    assert (cpu["used"], cpu["missing"], cpu["borrowable"]) == ("2", "1", "0"), cpu
    old = _same_verdicts_through_v1beta1(api, namespace, objects, d, kueue_reasons.fixture("cohort-tree"))
    assert {o["spec"].get("cohort") for o in old if o["kind"] == "ClusterQueue"} >= {inner, root}  # v1beta1 field
    wls = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Workload"}
    for name, granular in (("greedy", "ExceedsMaxQuota"), ("more", "WaitingForQuota")):
        wl = next(w for n, w in wls.items() if n.startswith(f"job-{name}-"))
        kueue_reasons.check(api, namespace, name, d[name], granular, wl)


# ---- fair sharing ----------------------------------------------------------------------------


def test_fair_sharing_preempts_the_borrower_in_the_cohort(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """Kueue with fair sharing on; cq-a, cq-b, cq-c 2 cpu each in one cohort. cq-a runs a low-priority 5-cpu Job
    (borrowing 3); cq-b's 3-cpu Job would borrow 1, and its share stays below cq-a's: Kueue preempts the hog for
    fair sharing (not reclamation: cq-b asks for more than its nominal). The victim is Preempted /
    InCohortFairSharing, the preemptor waits for it."""
    api = cluster.api_client
    pool = _pool(resources, cpu="8")
    rf = str(resources.create(ResourceFlavor(kube.unique_name("rf")).node_labels({POOL_LABEL: pool}).manifest())
             ["metadata"]["name"])
    cohort = kube.unique_name("fair")
    queues = {}
    for team in ("a", "b", "c"):
        cq = ClusterQueue(kube.unique_name(f"cq-{team}")).quotas({rf: {"cpu": "2"}}).cohort(cohort).preemption(
            within_cluster_queue="LowerPriority", reclaim_within_cohort="Any").fair_sharing("1")
        queues[team] = str(resources.create(cq.manifest())["metadata"]["name"])
        resources.create(LocalQueue(team, namespace, queues[team]).manifest())
    low = kube.unique_name("low")
    resources.create(WorkloadPriorityClass(low, 10).manifest())
    strategies = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]  # config v1beta2: present = enabled
    with cluster.kueue_settings(extra_config={"fairSharing": {"preemptionStrategies": strategies}}):
        resources.create(Job("hog", namespace).queue("a").request("cpu", "5").workload_priority_class(low).manifest())
        hog = wait_for_workload(api, namespace, "hog", lambda w: condition_is(w, "PodsReady"), what="PodsReady")
        unfreeze = kube.freeze_job_status(resources, namespace, "hog")
        resources.create(Job("claim", namespace).queue("b").request("cpu", "3").manifest())
        claim = _wait_pending(api, namespace, "claim", "Pending the preemption of 1 workload(s)")
        wait_for_workload(api, namespace, "hog", lambda w: condition_is(w, "Evicted"), what="Evicted=True")
        objects = _snapshot(api, [namespace])
        kube.record_fixture("scenario-fair-sharing-preemption", objects, note="fair sharing reclaims the borrower")
        d = _diagnose(objects)
        victim, preemptor = _of(d, namespace, "hog")["status"], _of(d, namespace, "claim")["status"]
        unfreeze()
        wait_for_workload(api, namespace, "claim", lambda w: condition_is(w, "Admitted"), what="Admitted=True")
    assert condition(kube.get(api, "Workload", hog["metadata"]["name"], namespace), "Preempted")["reason"] \
        == "InCohortFairSharing"  # type: ignore[index]
    assert _verdict(victim) == ("Admission", "Preempted", "InCohortFairSharing", "Nobody"), victim
    assert victim["lastEviction"]["underlyingCause"] == "InCohortFairSharing", victim
    assert [(b["role"], b["name"]) for b in victim["blockedBy"]] == [("Preemptor", claim["metadata"]["name"])], victim
    assert _verdict(preemptor) == ("Admission", "WaitingForPreemption", "PreemptionInProgress", "Nobody"), preemptor
    assert [(b["role"], b["name"]) for b in preemptor["blockedBy"]] == [("Victim", hog["metadata"]["name"])], preemptor
    assert victim["cohort"] == cohort and preemptor["clusterQueue"] == queues["b"]
