"""The one paging loop every LIST goes through, and what a LIST that fails means."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import urllib3

from kueue_doctor.live.orphans import diagnosis_keys, diagnosis_pages
from kueue_doctor.live.snapshot import LiveError, Unreadable, list_all, list_pages, listings, named_owner, snapshot
from kueue_doctor.state import kind_key
from tests.builders import Job, Pod

from .apiserver import FakeApiServer, cluster, collection_path, forbidden_list, status

LISTINGS = {lst.kind: lst for lst in listings("v1beta2")}


def pods(n: int, namespace: str = "team-a") -> list[dict[str, Any]]:
    """Pending Pods of Job trainer as Kueue started it (one cpu each)."""
    owner = Job("trainer", namespace).queue("user-queue").request("cpu", "1").suspend(False)
    return [Pod(f"trainer-{i:05d}", namespace).owner(owner).workload("job-trainer-00001").request("cpu", "1").obj()
            for i in range(n)]


def test_a_list_follows_continue_page_by_page_with_the_watch_selector_then_takes_gated_pod_groups() -> None:
    """Kueue labels the Pods it started (podset); a plain Pod group it has not admitted has none, and while the
    group is incomplete its Pods are all there is: they are listed too, by the group label without podset."""
    api = FakeApiServer()
    gated = [Pod(f"member-{i}", "team-a").label("kueue.x-k8s.io/queue-name", "user-queue")
             .label("kueue.x-k8s.io/pod-group-name", "trio").obj() for i in range(2)]
    unrelated = Pod("web", "team-a").obj()
    api.serve_list(collection_path("Pod"), "v1", "Pod", [*pods(1201), *gated, unrelated])
    items = list_all(api, LISTINGS["Pod"])
    assert items is not None and len(items) == 1203
    assert [i["metadata"]["name"] for i in items[-2:]] == ["member-0", "member-1"]
    assert {kind_key(i) for i in items} == {("", "Pod")}  # list items carry no kind: stamped from the listing
    assert [(r.query["labelSelector"], r.query["limit"], r.query.get("continue")) for r in api.requests] == [
        ("kueue.x-k8s.io/podset", "500", None), ("kueue.x-k8s.io/podset", "500", "500"),
        ("kueue.x-k8s.io/podset", "500", "1000"),
        ("kueue.x-k8s.io/pod-group-name,!kueue.x-k8s.io/podset", "500", None)]


def test_pages_come_one_at_a_time_so_the_start_up_never_holds_every_pod_decoded() -> None:
    # the operator stores each page before the next is read (runtime.initial_sync): its start-up peak
    api = FakeApiServer()
    api.serve_list(collection_path("Pod"), "v1", "Pod", pods(1201))
    listed = list_pages(api, LISTINGS["Pod"])
    assert len(next(listed)) == 500 and len(api.requests) == 1  # the second page is not asked for yet
    assert [len(page) for page in listed] == [500, 201, 0] and len(api.requests) == 4  # 0: no gated Pod group


def test_a_forbidden_kind_is_unreadable_not_an_empty_list() -> None:
    api = FakeApiServer()
    api.answer("GET", collection_path("Pod"), forbidden_list("pods", ""), 403)
    with pytest.raises(Unreadable):
        next(list_pages(api, LISTINGS["Pod"]))
    assert list_all(api, LISTINGS["Pod"]) is None


def test_each_page_is_slimmed_and_metadata_only_lists_ask_for_partial_objects() -> None:
    api = FakeApiServer()
    api.serve_list(collection_path("Pod"), "v1", "Pod", pods(3))
    slimmed = list_all(api, LISTINGS["Pod"], transform=lambda o: {"metadata": {"name": o["metadata"]["name"]}})
    assert slimmed == [{"metadata": {"name": f"trainer-{i:05d}"}} for i in range(3)]
    partial = list_all(api, LISTINGS["Pod"], metadata_only=True)
    assert partial is not None and [p["kind"] for p in partial] == ["Pod"] * 3 and "spec" not in partial[0]
    assert "as=PartialObjectMetadataList" in api.requests[-1].accept


def test_namespaced_kinds_are_listed_per_namespace_cluster_scoped_ones_once() -> None:
    api = FakeApiServer()
    for ns in ("team-a", "team-b"):
        api.serve_list(collection_path("Pod", ns), "v1", "Pod", pods(2, ns))
    api.serve_list(collection_path("Namespace"), "v1", "Namespace", [])
    items = list_all(api, LISTINGS["Pod"], ["team-a", "team-b"])
    assert items is not None and sorted({i["metadata"]["namespace"] for i in items}) == ["team-a", "team-b"]
    assert list_all(api, LISTINGS["Namespace"], ["team-a", "team-b"]) == []
    assert [r.path for r in api.requests] == ["/api/v1/namespaces/team-a/pods"] * 2 + [  # two selectors each
        "/api/v1/namespaces/team-b/pods"] * 2 + ["/api/v1/namespaces"]


def test_a_forbidden_kind_is_left_out_of_a_snapshot_and_never_marked_complete() -> None:
    state = snapshot(api=cluster(pods(2), forbidden=("Pod",)))
    assert "Pod" not in state.complete_kinds and "Workload" in state.complete_kinds
    assert state.pods == {}


def test_an_owner_the_user_names_is_read_by_name_whatever_its_labels() -> None:
    """The owners' LISTs select on the queue-name label; `explain job/plain` also reads Job plain by name, so the
    answer can say why Kueue ignores it (the real apiserver's field selector: tests/e2e/test_family_trainer.py)."""
    api = cluster([Job("plain", "team-a").obj()])
    state = snapshot(api=api, named=("Job", "plain"))
    by_name = [r for r in api.requests if r.query.get("fieldSelector") == "metadata.name=plain"]
    assert [r.path for r in by_name] == ["/apis/batch/v1/jobs"] and "labelSelector" not in by_name[0].query
    assert ("team-a", "Job", "plain") in state.owners
    unnamed = cluster([Job("plain", "team-a").obj()])
    snapshot(api=unnamed)  # nothing named: no LIST by name
    assert not [r for r in unnamed.requests if "fieldSelector" in r.query and r.path.endswith("/jobs")]
    # only owners Kueue makes Workloads for: a Pod or a Workload is never read by name
    assert named_owner(listings("v1beta2"), "Pod", "x") is None
    assert named_owner(listings("v1beta2"), "Workload", "x") is None
    one = named_owner(listings("v1beta2"), "TrainJob", "free")
    assert one is not None and one.path == "/apis/trainer.kubeflow.org/v1alpha1/{ns}trainjobs"


def test_refused_credentials_and_an_unreachable_cluster_are_errors_not_empty_lists() -> None:
    api = FakeApiServer()
    api.answer("GET", collection_path("Pod"), status(401, "Unauthorized", "Unauthorized"), 401)
    with pytest.raises(LiveError, match="refused our credentials"):
        list_all(api, LISTINGS["Pod"])

    class Unreachable(FakeApiServer):
        def call_api(self, *args: Any, **kwargs: Any) -> Any:
            raise urllib3.exceptions.MaxRetryError(None, "/api/v1/pods", "Connection refused")  # type: ignore[arg-type]

    with pytest.raises(LiveError, match="cannot reach the cluster"):
        list_all(Unreachable(), LISTINGS["Pod"])


def test_diagnoses_that_cannot_be_listed_are_a_warning_and_those_read_so_far(
        caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApiServer()
    api.serve_list(collection_path("AdmissionDiagnosis", "team-a"), "kueue-doctor.dev/v1alpha1", "AdmissionDiagnosis",
                   [{"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
                     "metadata": {"name": "job-a-00001", "namespace": "team-a", "uid": "ad-1"}}])
    api.answer("GET", collection_path("AdmissionDiagnosis", "team-b"),
               forbidden_list("admissiondiagnoses", "kueue-doctor.dev", "team-b"), 403)
    with caplog.at_level(logging.WARNING, logger="kueue_doctor.runtime"):
        found = [d for page in diagnosis_pages(api, ["team-a", "team-b"]) for d in page]
    assert [d["metadata"]["name"] for d in found] == ["job-a-00001"]
    assert caplog.messages == [
        'Cannot list AdmissionDiagnoses (GET /apis/kueue-doctor.dev/v1alpha1/namespaces/team-b/admissiondiagnoses: '
        'HTTP 403: admissiondiagnoses is forbidden: User "system:serviceaccount:kueue-doctor:kueue-doctor" cannot '
        'list resource "admissiondiagnoses" in API group "kueue-doctor.dev" in the namespace "team-b"): those not '
        "listed are rewritten once at start-up, and a resync deletes none of them whose Workload is gone; check the "
        "operator's RBAC (list on admissiondiagnoses)."]
    assert diagnosis_keys(api, ["team-a", "team-b"]) == [("team-a", "job-a-00001")]  # the resync's, metadata only
    assert "PartialObjectMetadataList" in api.requests[-2].accept


def test_a_snapshot_reads_kueues_configmap_and_deployment_by_name_and_a_labelled_jobset() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
          "data": {"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
                   "kind: Configuration\nintegrations:\n  frameworks: [batch/job]\n"}}
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "trainer", "namespace": "team-a", "uid": "js-1",
                       "creationTimestamp": "2026-11-30T09:00:00Z", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
          "spec": {"suspend": True}}
    state = snapshot(api=cluster([cm, js]))
    assert state.kueue_config.known and state.kueue_config.frameworks == {"batch/job"}
    assert ("team-a", "JobSet", "trainer") in state.owners and state.knows("JobSet")
    # Kueue's own Deployment (404 here) is read by name and says nothing; Deployments are known from the LIST of
    # those labelled with a queue name, the Deployment integration's
    assert state.knows("ConfigMap") and state.knows("Deployment")
    assert not any(kind == "Deployment" for _, kind, _ in state.owners)


def test_a_snapshot_without_kueues_configmap_knows_it_is_missing() -> None:
    state = snapshot(api=cluster([]))
    assert not state.kueue_config.known and "not found" in (state.kueue_config.problem or "")


def test_explain_reads_a_named_statefulset_and_the_gated_pods_of_serving_groups() -> None:
    """A LeaderWorkerSet's worker StatefulSet carries no queue-name label and belongs to its group leader Pod, which
    waits gated with its group's name as an annotation: `explain sts/NAME` reads the StatefulSet by name and the
    gated Pods by the selector the operator polls them with (live: tests/e2e/test_family_lws.py)."""
    one = named_owner(listings("v1beta2"), "StatefulSet", "serve-1")
    assert one is not None and one.path == "/apis/apps/v1/{ns}statefulsets", one
    assert one.selectors == ({"fieldSelector": "metadata.name=serve-1"},)
    lws = named_owner(listings("v1beta2"), "LeaderWorkerSet", "serve")
    assert lws is not None and lws.path == "/apis/leaderworkerset.x-k8s.io/v1/{ns}leaderworkersets", lws
    api = cluster([])
    snapshot(api=api, named=("StatefulSet", "serve-1"))
    assert [r.path for r in api.requests if r.query.get("fieldSelector") == "metadata.name=serve-1"] == [
        "/apis/apps/v1/statefulsets"]
    assert [r.query["labelSelector"] for r in api.requests if r.path == "/api/v1/pods"] == [
        "kueue.x-k8s.io/podset", "kueue.x-k8s.io/pod-group-name,!kueue.x-k8s.io/podset",
        "statefulset.kubernetes.io/pod-name,kueue.x-k8s.io/managed,!kueue.x-k8s.io/pod-group-name,!kueue.x-k8s.io/podset"]
