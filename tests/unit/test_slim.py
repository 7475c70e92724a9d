"""The operator keeps slimmed objects: verdicts on them must equal verdicts on the full objects."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kueue_doctor import diagnose_objects
from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.kube.slim import slim
from kueue_doctor.state import ClusterState
from tests.builders import Admission, ClusterQueue, Job, LocalQueue, Node, Pod, Workload, condition

from . import test_engine

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def scenario() -> list[dict[str, Any]]:
    j = Job("trainer", "team-a").queue("user-queue").parallelism(2).request("cpu", "1").suspend(False)
    wl = Workload("job-trainer-5d4c3", "team-a").queue("user-queue").owner(j).count(2).request("cpu", "1").admission(
        Admission("team-a-cq").assignment(count=2, flavors={"cpu": "default-flavor"}, usage={"cpu": "1"})
    ).conditions(condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-cq"),
                 condition("Admitted", "True", "Admitted", "The workload is admitted"),
                 condition("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded")).annotation(
        "kubectl.kubernetes.io/last-applied-configuration", "x" * 5000).obj()
    wl["metadata"]["managedFields"] = [{"manager": "kueue-admission", "fieldsV1": {"f:status": {}}}]
    p1 = Pod("trainer-a", "team-a").owner(j).workload(wl["metadata"]["name"]).node("n1").container_status({
        "name": "main", "ready": False, "restartCount": 3, "image": "img", "imageID": "",
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}}}
    ).obj()
    p2 = Pod("trainer-b", "team-a").owner(j).workload(wl["metadata"]["name"]).gate("example.com/gate").obj()
    pending = Workload("job-b-00002", "team-a").queue("user-queue").request("cpu", "1").condition(condition(
        "QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused quota for "
        "cpu in flavor default-flavor, 1 more needed")).obj()
    return [*test_engine.queue_setup(), ClusterQueue("other").quotas({"default-flavor": {"cpu": "1"}}).obj(),
            LocalQueue("lq2", "team-b", "other").obj(), Node("n1").obj(), j.obj(), wl, p1, p2, pending]


def test_verdicts_on_slimmed_objects_equal_verdicts_on_full_objects() -> None:
    full = scenario()
    assert diagnose_objects([slim(o) for o in full], NOW) == diagnose_objects(full, NOW)


def test_slim_drops_managed_fields_and_foreign_annotations_but_keeps_kueue_ones() -> None:
    wl = next(o for o in scenario() if o["kind"] == "Workload")
    wl["metadata"]["annotations"]["kueue.x-k8s.io/admission-gated-by"] = "example.com/ctl"
    out = slim(wl)
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"kueue.x-k8s.io/admission-gated-by": "example.com/ctl"}


def test_slim_keeps_only_who_wrote_an_owners_suspend_flag() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "a", "managedFields": [
        {"manager": "kubectl-create", "operation": "Update", "apiVersion": "batch/v1", "time": "2026-11-30T09:00:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:suspend": {}, "f:template": {"f:spec": {}}},
                                                 "f:metadata": {"f:labels": {}}}},
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
         "time": "2026-11-30T09:00:01Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:active": {}}}},
        {"manager": "policy-controller", "operation": "Apply", "time": "2026-11-30T09:05:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:suspend": {}}}}]}, "spec": {"suspend": True}}
    kept = slim(job)["metadata"]["managedFields"]
    assert kept == [
        {"manager": "kubectl-create", "operation": "Update", "time": "2026-11-30T09:00:00Z", "fieldsV1": {"f:spec": {"f:suspend": {}}}},
        {"manager": "policy-controller", "operation": "Apply", "time": "2026-11-30T09:05:00Z",
         "fieldsV1": {"f:spec": {"f:suspend": {}}}}]


def test_slim_keeps_what_the_launcher_and_follower_verdicts_read() -> None:
    """An MPIJob launcher Job's backoffLimit (how many restarts it has left, mpi-operator#615) and JobSet's
    exclusive-topology annotation (why followers are withheld, jobset#1187)."""
    key = "alpha.jobset.sigs.k8s.io/exclusive-topology"
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "x-launcher", "namespace": "a", "annotations": {key: "pool", "other/a": "b"}},
           "spec": {"backoffLimit": 6, "template": {}}}
    out = slim(job)
    assert out["spec"] == {"backoffLimit": 6} and out["metadata"]["annotations"] == {key: "pool"}


def test_every_recorded_real_cluster_fixture_gets_the_same_verdicts_slimmed_and_packed() -> None:
    # what the operator keeps in memory must give what `explain -f` gives on the full objects: every fixture
    # recorded on the real control plane (JobSets, Kueue's ConfigMap, managedFields of re-suspended Jobs)
    from datetime import timedelta
    from pathlib import Path

    import yaml

    from kueue_doctor.kube.load import newest_timestamp

    fixtures = sorted((Path(__file__).parents[1] / "e2e" / "fixtures").glob("*.yaml"))
    assert len(fixtures) >= 25
    for path in fixtures:
        docs = [o for o in yaml.safe_load_all(path.read_text()) if isinstance(o, dict)]
        objects = [i for o in docs for i in (o.get("items") or [o])]
        now = newest_timestamp(objects)
        full = diagnose_objects(objects, now, grace=timedelta(0))
        slimmed = [slim(o) for o in objects]
        assert diagnose_objects(slimmed, now, grace=timedelta(0)) == full, path.name
        # and as the operator keeps them: Pods and Events packed (kube/packed.py)
        assert diagnose(ClusterState.from_objects(slimmed, packed=True), now, grace=timedelta(0)) == full, path.name


def test_every_catalog_scenario_gets_the_same_verdicts_slimmed() -> None:
    # the operator keeps what slim keeps and ignores changes to the rest (a LocalQueue's status): a rule that
    # starts reading a dropped field fails here on the scenario that needs it
    from tests.unit.test_catalog import PASSING, gen

    # the operator does not keep a Pod's priority: the Pod kube-scheduler preempted for is often another
    # namespace's, which a namespace shard never keeps (tests/unit/test_shards.py), so one replica says no more
    # than a shard: "for pod team-b/infer-qx2lm", without "(priority 1000, admitted by Kueue)"
    known = {"pod-preempted-by-kube-scheduler-for-another-queues-workload"}
    for s in PASSING:
        now = gen.parse_now(s["now"])
        same = diagnose_objects([slim(o) for o in s["objects"]], now) == diagnose_objects(s["objects"], now)
        assert same != (s["name"] in known), s["name"]
