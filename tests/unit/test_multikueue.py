"""MultiKueue, replayed from the manager-side snapshots recorded on two real control planes
(tests/e2e/test_family_multikueue.py): what the verdicts say beyond their reason and cause, and what changes when
the MultiKueue objects are missing from the input."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from kueue_doctor import diagnose_objects
from kueue_doctor.kube.load import newest_timestamp
from kueue_doctor.state import ClusterState

from .test_regressions import MULTIKUEUE_V1BETA1, NO_GRACE, _load


def _status(objects: list[dict[str, Any]], job: str = "trainer") -> dict[str, Any]:
    for d in diagnose_objects(objects, newest_timestamp(objects), grace=NO_GRACE):
        if d["status"].get("owner", {}).get("name") == job or d["metadata"]["name"].startswith(f"job-{job}-"):
            st: dict[str, Any] = d["status"]
            return st
    raise AssertionError(f"no diagnosis for Job {job}")


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def test_dispatched_names_the_worker_and_never_asks_for_pods_on_the_manager() -> None:
    objects = _load("scenario-family-multikueue-dispatched")
    cluster = _one(objects, "MultiKueueCluster")["metadata"]["name"]
    assert not [o for o in objects if o["kind"] == "Pod"], "the recording has no Pod on the manager"
    st = _status(objects)
    assert (st["reason"], st["cause"], st["actionBy"]) == ("Running", "DispatchedToWorkerCluster", "Nobody")
    assert f"worker cluster {cluster}: its Pods run there, not here" in st["message"], st["message"]


@pytest.mark.parametrize(("fixture", "reason"), [("worker-unreachable", "ClientConnectionFailed"),
                                                  ("worker-secret-missing", "BadKubeConfig"),
                                                  ("worker-kubeconfig-insecure", "InsecureKubeConfig")])
def test_a_worker_not_connected_names_the_check_the_cluster_and_its_active_reason(fixture: str, reason: str) -> None:
    objects = _load(f"scenario-family-multikueue-{fixture}")
    cluster = _one(objects, "MultiKueueCluster")
    check = _one(objects, "AdmissionCheck")["metadata"]["name"]
    active = next(c for c in cluster["status"]["conditions"] if c["type"] == "Active")
    st = _status(objects)
    assert (st["reason"], st["cause"], st["actionBy"]) == ("QueueMisconfigured", "AdmissionCheckInactive",
                                                           "ClusterAdmin")
    name = cluster["metadata"]["name"]
    for part in (f"MultiKueue AdmissionCheck {check} is not Active (NoUsableClusters: Inactive clusters: [{name}])",
                 f"MultiKueueCluster {name} is not connected (Active=False {reason}: {active['message']})",
                 f"Secret {name}-kubeconfig (key kubeconfig) in Kueue's namespace",
                 f"Platform admin: make worker cluster(s) {name} reachable"):
        assert part in st["message"], (part, st["message"])
    assert ".." not in st["message"], st["message"]
    evidence = [e for e in st["evidence"] if e["kind"] == "MultiKueueCluster"]
    assert evidence == [{"kind": "MultiKueueCluster", "name": name, "field": "condition/Active",
                         "reason": reason, "message": active["message"],
                         "time": active["lastTransitionTime"]}], evidence
    assert f"kubectl get admissioncheck {check} -o yaml" in st["hints"]


def test_unreachable_worker_without_the_multikueue_objects_still_names_the_check() -> None:
    """An input without MultiKueueClusters/Configs (an older dump, no RBAC for them): the check's own words."""
    objects = [o for o in _load("scenario-family-multikueue-worker-unreachable")
               if o["kind"] not in ("MultiKueueCluster", "MultiKueueConfig")]
    st = _status(objects)
    assert st["cause"] == "AdmissionCheckInactive" and "Inactive clusters: [" in st["message"], st["message"]
    assert "is not connected" not in st["message"] and "Platform admin" not in st["message"], st["message"]


def test_no_worker_quota_says_where_the_copy_went_and_that_the_reason_is_on_the_worker() -> None:
    objects = _load("scenario-family-multikueue-no-worker-quota")
    cluster = _one(objects, "MultiKueueCluster")["metadata"]["name"]
    wl = _one(objects, "Workload")
    st = _status(objects)
    assert (st["reason"], st["cause"], st["actionBy"]) == ("WaitingForAdmissionChecks", "AdmissionCheckPending",
                                                           "Nobody")
    assert f"MultiKueue sent a copy to worker cluster(s) {cluster} (status.nominatedClusterNames)" in st["message"]
    assert f"Look at Workload {wl['metadata']['namespace']}/{wl['metadata']['name']} on {cluster}" in st["message"]
    assert "Not connected" not in st["message"], "the worker is connected"


def test_a_workload_a_worker_reserved_is_not_said_to_be_unsent() -> None:
    """kueue#5891: status.clusterName names the worker that reserved quota and the check is still Pending: the
    verdict sends the user to that worker, and never says MultiKueue has not sent it anywhere."""
    objects = _load("scenario-family-multikueue-no-worker-quota")
    wl = _one(objects, "Workload")
    wl["status"].pop("nominatedClusterNames", None)
    wl["status"]["clusterName"] = "worker-eu-1"
    st = _status(objects)
    assert st["cause"] == "AdmissionCheckPending", st
    assert "MultiKueue dispatched it to worker cluster worker-eu-1, which reserved quota for it" in st["message"]
    assert "has not sent it" not in st["message"], st["message"]


def test_a_worker_that_goes_down_while_the_check_is_pending_is_named() -> None:
    """The same recording with the worker's MultiKueueCluster turned Active=False (its apiserver went away)."""
    objects = _load("scenario-family-multikueue-no-worker-quota")
    cluster = _one(objects, "MultiKueueCluster")
    _disconnect(cluster)
    st = _status(objects)
    assert st["cause"] == "AdmissionCheckPending"
    assert f"Not connected: MultiKueueCluster {cluster['metadata']['name']} is not connected " \
           "(Active=False ClientConnectionFailed" in st["message"], st["message"]
    assert any(e["kind"] == "MultiKueueCluster" for e in st["evidence"]), st["evidence"]


def test_a_multikueue_cluster_change_re_diagnoses_the_workloads_of_queues_with_a_multikueue_check() -> None:
    objects = _load("scenario-family-multikueue-no-worker-quota")
    state = ClusterState.from_objects(objects)
    wl = _one(objects, "Workload")
    key = (wl["metadata"]["namespace"], wl["metadata"]["name"])
    assert state.affected_workloads(_one(objects, "MultiKueueCluster")) == {key}
    assert state.affected_workloads(_one(objects, "MultiKueueConfig")) == {key}


def test_a_v1beta1_multikueue_cluster_reads_as_v1beta2() -> None:
    """v1beta1 has spec.kubeConfig where v1beta2 has spec.clusterSource.kubeConfig (API-NOTES 1.1)."""
    objects = _load("scenario-family-multikueue-worker-unreachable")
    cluster = _one(objects, "MultiKueueCluster")
    cluster["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    cluster["spec"] = {"kubeConfig": cluster["spec"]["clusterSource"]["kubeConfig"]}
    st = _status(objects)
    assert f"Secret {cluster['metadata']['name']}-kubeconfig (key kubeconfig)" in st["message"], st["message"]


def test_a_rejected_job_names_the_check_its_words_and_what_the_owner_recreates() -> None:
    objects = _load("scenario-family-multikueue-rejected")
    check = _one(objects, "AdmissionCheck")["metadata"]["name"]
    st = _status(objects)
    assert (st["reason"], st["cause"], st["actionBy"]) == ("Deactivated", "AdmissionCheckRejected", "WorkloadOwner")
    assert (f'MultiKueue check {check} rejected it: The owner is not managed by Kueue: Expecting spec.managedBy to '
            'be "kueue.x-k8s.io/multikueue" not "example.com/batch-runner". spec.managedBy cannot be changed on a '
            "Job: recreate it without spec.managedBy") in st["message"], st["message"]
    assert 'Previously: "Pending"' not in st["message"].split("rejected it:")[1], st["message"]


def _disconnect(cluster: dict[str, Any]) -> dict[str, Any]:
    """The recorded MultiKueueCluster as Kueue writes it once its worker's apiserver went away."""
    active = {"type": "Active", "status": "False", "reason": "ClientConnectionFailed",
              "message": 'Get "https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused',
              "lastTransitionTime": cluster["status"]["conditions"][0]["lastTransitionTime"]}
    cluster["status"]["conditions"] = [active]
    return active


def test_a_worker_lost_after_admission_is_named_and_the_platform_admin_acts() -> None:
    """workload.go: the check stays Ready for workerLostTimeout while the admitting worker is unreachable (recorded:
    the worker's kube-apiserver stopped after the admission)."""
    objects = _load("scenario-family-multikueue-worker-lost")
    cluster = _one(objects, "MultiKueueCluster")
    active = next(c for c in cluster["status"]["conditions"] if c["type"] == "Active")
    st = _status(objects)
    assert (st["reason"], st["cause"], st["actionBy"]) == ("Running", "DispatchedToWorkerCluster", "ClusterAdmin")
    name = cluster["metadata"]["name"]
    assert f"But MultiKueueCluster {name} is not connected (Active=False ClientConnectionFailed" in st["message"]
    assert "multiKueue.workerLostTimeout (15m by default)" in st["message"], st["message"]
    assert {"kind": "MultiKueueCluster", "name": name, "field": "condition/Active", "reason": "ClientConnectionFailed",
            "message": active["message"], "time": active["lastTransitionTime"]} in st["evidence"]


def test_without_the_multikueue_config_the_workers_come_from_the_checks_message() -> None:
    """A dump with the MultiKueueClusters but not the MultiKueueConfig: "Inactive clusters: [name]" names them."""
    objects = [o for o in _load("scenario-family-multikueue-worker-unreachable") if o["kind"] != "MultiKueueConfig"]
    name = _one(objects, "MultiKueueCluster")["metadata"]["name"]
    st = _status(objects)
    assert f"MultiKueueCluster {name} is not connected (Active=False ClientConnectionFailed" in st["message"]


@pytest.mark.parametrize("fixture", MULTIKUEUE_V1BETA1)
def test_the_v1beta1_read_back_gives_the_same_verdict_and_message(fixture: str) -> None:
    old = _load(f"{fixture}-v1beta1")
    assert {o["apiVersion"] for o in old if o["apiVersion"].startswith("kueue.x-k8s.io/")} == {"kueue.x-k8s.io/v1beta1"}
    keys = ("stage", "reason", "cause", "actionBy", "message")  # not the evidence: read back a moment later
    new, back = _status(_load(fixture)), _status(old)
    assert [new[k] for k in keys] == [back[k] for k in keys], (new, back)


def test_copies_unanswered_for_long_point_at_the_logs_in_kueues_own_namespace() -> None:
    """Review B9: the hint for MultiKueue's log line reads Kueue's namespace from its Configuration (the Red Hat
    build runs Kueue in openshift-kueue-operator), never a hard-coded kueue-system."""
    objects = _load("scenario-family-multikueue-no-worker-quota")
    config = _one(objects, "ConfigMap")  # the recorded Kueue's, moved to where the Red Hat build runs Kueue
    config["metadata"]["namespace"] = "openshift-kueue-operator"
    key = "controller_manager_config.yaml"
    config["data"][key] = re.sub(r"(?m)^namespace: .*$", "namespace: openshift-kueue-operator", config["data"][key])
    later = newest_timestamp(objects) + timedelta(hours=2)
    st = next(d["status"] for d in diagnose_objects(objects, later, grace=NO_GRACE)
              if d["metadata"]["name"].startswith("job-trainer-"))
    assert st["actionBy"] == "ClusterAdmin", st
    logs = [h for h in st["hints"] if "validating remote controller object" in h]
    assert logs and logs[0].startswith("kubectl -n openshift-kueue-operator logs deploy/kueue-controller-manager"), \
        st["hints"]
