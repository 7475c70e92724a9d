"""What the operator finds it may see: RBAC per kind, Kueue's version, the CRD it writes against."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import generate_latest

from kueue_doctor.live.metrics import registry_for
from kueue_doctor.live.runtime import Options, Runtime
from kueue_doctor.live.service import watches

from .apiserver import CRD_PATH, cluster, collection_path, installed_crd, not_found, status

OPERATOR_LOG = "kueue_doctor.runtime"
NOT_SERVED = status(404, "NotFound", "the server could not find the requested resource")


def test_forbidden_kinds_are_not_watched_and_the_log_and_metrics_say_so(caplog: pytest.LogCaptureFixture) -> None:
    api = cluster([], forbidden=("Pod", "Event", "Job"))
    rt = Runtime(api, Options())
    with caplog.at_level(logging.WARNING, logger=OPERATOR_LOG):
        asyncio.run(rt.discovery.check_access())
    assert not rt.discovery.allowed("Pod") and rt.discovery.allowed("Workload")
    plurals = [plural for _group, _version, plural, _kind in watches(rt.discovery)]
    assert plurals == ["workloads", "localqueues", "clusterqueues", "resourceflavors", "cohorts", "admissionchecks",
                       "topologies", "namespaces", "workloadpriorityclasses", "multikueueclusters",
                       "multikueueconfigs", "provisioningrequestconfigs", "jobsets", "deployments",
                       "admissiondiagnoses"]  # Kopf would exit on a 403 watch; RayJobs etc. are not served here
    assert ("RBAC forbids listing Pod: running without that detail from Pods. Grant get/list/watch on it "
            "(see manifests/) for complete verdicts.") in caplog.messages
    assert len(caplog.messages) == 3  # owner CRDs that are not installed (404) are no RBAC problem to warn of
    metrics = generate_latest(registry_for(rt)).decode()
    assert 'kueue_doctor_resource_access{kind="Pod"} 0.0' in metrics
    assert 'kueue_doctor_resource_access{kind="Workload"} 1.0' in metrics
    assert api.writes == []  # the access check is a LIST with limit=1, nothing else
    assert {r.query["limit"] for r in api.requests} == {"1"}


def test_a_forbidden_kueue_kind_is_a_missing_diagnosis_not_a_missing_detail(caplog: pytest.LogCaptureFixture) -> None:
    rt = Runtime(cluster([], forbidden=("ClusterQueue",)), Options())
    with caplog.at_level(logging.WARNING, logger=OPERATOR_LOG):
        asyncio.run(rt.discovery.check_access())
    assert caplog.messages == ["RBAC forbids listing ClusterQueue: running without that diagnosis. Grant "
                               "get/list/watch on it (see manifests/) for complete verdicts."]


def test_with_namespaces_access_is_checked_in_each_of_them() -> None:
    api = cluster([])
    api.namespaced_lists = False  # only the namespaces' Workloads have a route
    for ns in ("team-a", "team-b"):
        api.serve_list(collection_path("Workload", ns), "kueue.x-k8s.io/v1beta2", "Workload", [])
    rt = Runtime(api, Options(namespaces=["team-a", "team-b"]))
    asyncio.run(rt.discovery.check_access())
    assert rt.discovery.allowed("Workload") and rt.discovery.allowed("ClusterQueue")
    assert not rt.discovery.allowed("Pod")  # no route for team-a's Pods: 404 here, as for an unserved kind
    listed = [r.path for r in api.requests if "workloads" in r.path]
    assert listed == ["/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads",
                      "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-b/workloads"]


def test_kueue_v1beta1_is_used_when_v1beta2_is_not_served() -> None:
    api = cluster([])
    api.answer("GET", "/apis/kueue.x-k8s.io/v1beta2", NOT_SERVED, 404)
    api.answer("GET", "/apis/kueue.x-k8s.io/v1beta1", {"kind": "APIResourceList", "apiVersion": "v1",
                                                       "groupVersion": "kueue.x-k8s.io/v1beta1",
                                                       "resources": [{"name": "workloads", "kind": "Workload"}]})
    rt = Runtime(api, Options())
    assert asyncio.run(rt.discovery.kueue_served())
    assert rt.discovery.version == "v1beta1"
    assert watches(rt.discovery)[0] == ("kueue.x-k8s.io", "v1beta1", "workloads", "Workload")
    assert rt.discovery.listings()[0].path == "/apis/kueue.x-k8s.io/v1beta1/{ns}workloads"


def test_no_kueue_served_means_nothing_to_diagnose() -> None:
    api = cluster([])
    api.answer("GET", "/apis/kueue.x-k8s.io/v1beta2", NOT_SERVED, 404)
    assert not asyncio.run(Runtime(api, Options()).discovery.kueue_served())


def test_a_missing_crd_pauses_writing_and_its_install_resumes_it(caplog: pytest.LogCaptureFixture) -> None:
    api = cluster([])
    name = "admissiondiagnoses.kueue-doctor.dev"
    api.answer("GET", CRD_PATH, not_found("customresourcedefinitions", "apiextensions.k8s.io", name), 404)
    rt = Runtime(api, Options())
    with caplog.at_level(logging.INFO, logger=OPERATOR_LOG):
        asyncio.run(rt.discovery.check_crd())
        assert rt.publisher.paused and not rt.stats.crd_installed
        api.get(CRD_PATH, installed_crd())
        asyncio.run(rt.discovery.check_crd())
    assert not rt.publisher.paused and rt.stats.crd_installed and rt.stats.crd_current
    assert caplog.messages == [
        "The AdmissionDiagnosis CRD (admissiondiagnoses.kueue-doctor.dev) is not installed: diagnoses are computed "
        "(metrics work) but not written. Install crds/ or the Helm chart.",
        "The AdmissionDiagnosis CRD is installed: publishing diagnoses."]


def test_an_outdated_crd_is_reported_once_and_writing_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    api = cluster([])
    crd = installed_crd()
    crd["metadata"]["annotations"]["kueue-doctor.dev/schema-hash"] = "0123456789abcdef"
    api.get(CRD_PATH, crd)
    rt = Runtime(api, Options())
    with caplog.at_level(logging.WARNING, logger=OPERATOR_LOG):
        asyncio.run(rt.discovery.check_crd())
        asyncio.run(rt.discovery.check_crd())  # every resync asks again; the warning is not repeated
    assert not rt.stats.crd_current and not rt.publisher.paused
    assert len(caplog.messages) == 1
    assert caplog.messages[0].startswith("The installed AdmissionDiagnosis CRD (schema 0123456789abcdef) is not the "
                                         "one this operator expects")


def test_without_rbac_on_crds_the_api_group_tells_whether_it_is_installed() -> None:
    api = cluster([])
    api.answer("GET", CRD_PATH, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": 'customresourcedefinitions.apiextensions.k8s.io "admissiondiagnoses.'
                                 'kueue-doctor.dev" is forbidden: User "system:serviceaccount:kueue-doctor:'
                                 'kueue-doctor" cannot get resource "customresourcedefinitions" in API group '
                                 '"apiextensions.k8s.io" at the cluster scope', "reason": "Forbidden",
                                 "details": {"name": "admissiondiagnoses.kueue-doctor.dev",
                                             "group": "apiextensions.k8s.io", "kind": "customresourcedefinitions"},
                                 "code": 403}, 403)
    api.answer("GET", "/apis/kueue-doctor.dev/v1alpha1", {"kind": "APIResourceList", "apiVersion": "v1",
                                                          "groupVersion": "kueue-doctor.dev/v1alpha1",
                                                          "resources": []})
    rt = Runtime(api, Options())
    asyncio.run(rt.discovery.check_crd())
    assert rt.stats.crd_installed and rt.stats.crd_current and not rt.publisher.paused
