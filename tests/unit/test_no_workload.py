"""Owners Kueue made no Workload for: who qualifies, how the diagnosis is named, Kueue's Configuration read as
Kueue reads it, and the CLI's answer when the named owner has no diagnosis."""

from __future__ import annotations

import io
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_doctor import diagnose_objects
from kueue_doctor.cli import main
from kueue_doctor.engine.no_workload import unmanaged_reason
from kueue_doctor.kube.kueue_config import UNREAD, from_config_map
from kueue_doctor.kube.kueue_names import expected_workload_name, workload_name
from kueue_doctor.kube.objects import controller_ref
from kueue_doctor.state import ClusterState
from tests.builders import ClusterQueue, Job, LocalQueue, Namespace, Workload

FIXTURES = Path(__file__).parents[1] / "e2e" / "fixtures"
CREATED = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LATER = CREATED + timedelta(minutes=10)


def _queues() -> list[dict[str, Any]]:
    return [Namespace("team-a").obj(), LocalQueue("main", "team-a", "cq").obj(),
            ClusterQueue("cq").obj()]


def _config(**fields: Any) -> dict[str, Any]:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
           **fields}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(doc)}}


def _verdicts(objects: list[dict[str, Any]], now: datetime = LATER) -> dict[str, tuple[str, str | None]]:
    return {d["metadata"]["name"]: (d["status"]["reason"], d["status"].get("cause"))
            for d in diagnose_objects(objects, now)}


def _scaled_to_zero() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "team-a", "uid": "sts-uid",
                         "creationTimestamp": "2026-11-30T09:00:00Z", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"replicas": 0, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def test_a_statefulset_without_workload_is_expected_under_kueues_name() -> None:
    """Kueue v0.19 gives a StatefulSet one Workload (statefulset-<name>-<hash>) while it has replicas."""
    sts = _scaled_to_zero()
    sts["spec"]["replicas"] = 2
    name = expected_workload_name(sts)
    assert name.startswith("statefulset-web-")
    assert _verdicts([*_queues(), _config(), sts]) == {name: ("NoWorkload", "IntegrationNotEnabled")}  # not default
    enabled = _config(integrations={"frameworks": ["batch/job", "pod", "statefulset"]})
    assert _verdicts([*_queues(), enabled, sts]) == {name: ("NoWorkload", "WorkloadNotCreated")}


# ----- naming: exactly Kueue's ---------------------------------------------------------------------

def test_the_name_is_kueues_own_for_its_unit_test_job() -> None:
    # pkg/controller/jobframework/reconciler_test.go: Job "test-job" with UID "test-job" -> job-test-job-ce737
    assert workload_name("Job", "batch", "test-job", "test-job") == "job-test-job-ce737"


def test_the_name_matches_every_workload_kueue_made_on_the_real_cluster() -> None:
    checked = 0
    for path in sorted(FIXTURES.glob("*.yaml")):
        objects = [o for o in yaml.safe_load_all(path.read_text()) if isinstance(o, Mapping)]
        items = [i for o in objects for i in (o.get("items") or [o])]
        owners = {o["metadata"].get("uid"): o for o in items if o.get("kind") == "Job"}
        for wl in (o for o in items if o.get("kind") == "Workload"):
            ref = controller_ref(wl)
            owner = owners.get(ref.get("uid")) if ref else None
            if owner is not None:
                assert expected_workload_name(owner) == wl["metadata"]["name"], path.name
                checked += 1
    assert checked >= 5, "the recorded fixtures should hold Jobs with the Workloads Kueue made for them"


def test_long_owner_names_are_truncated_like_kueue() -> None:
    long = "x" * 300
    got = workload_name("Job", "batch", long, "u")
    assert len(got) == 253 and got.startswith("job-xxx") and got[-6] == "-"
    assert len(workload_name("Job", "batch", long, "u", short=True)) == 63


# ----- who gets a NoWorkload diagnosis ------------------------------------------------------------

def test_a_labelled_job_without_workload_is_diagnosed_under_kueues_name_owned_by_the_job() -> None:
    job = Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj()
    out = diagnose_objects([*_queues(), _config(), job], LATER)
    assert len(out) == 1
    d = out[0]
    assert d["metadata"]["name"] == expected_workload_name(job)
    assert d["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "trainer",
                                                 "uid": job["metadata"]["uid"]}]
    assert "workloadRef" not in d["spec"] and d["spec"]["ownerRef"]["name"] == "trainer"
    assert d["metadata"]["labels"]["kueue-doctor.dev/owner-name"] == "trainer"
    assert (d["status"]["reason"], d["status"]["cause"]) == ("NoWorkload", "WorkloadNotCreated")
    assert d["status"]["since"] == "2026-11-30T09:00:00Z"


def _pod_priority_class(job: dict[str, Any], name: str) -> dict[str, Any]:
    job["spec"]["template"]["spec"]["priorityClassName"] = name
    return job


def test_a_pod_priority_class_is_named_as_the_suspect_only_where_kueue_reads_it() -> None:
    """kueue#15171: a missing PriorityClass leaves no trace but the name in the template. Not when a
    WorkloadPriorityClass label decides the priority, nor for the classes every cluster has."""
    def message(job: dict[str, Any]) -> str:
        out = diagnose_objects([*_queues(), _config(), job], LATER)
        assert [(d["status"]["reason"], d["status"]["cause"]) for d in out] == [("NoWorkload", "WorkloadNotCreated")]
        text: str = out[0]["status"]["message"]
        return text

    plain = Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj()
    assert "PriorityClass" not in message(plain)
    ranked = _pod_priority_class(Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj(), "hi")
    assert "Its Pods name PriorityClass hi" in message(ranked)
    system = _pod_priority_class(Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj(),
                                 "system-cluster-critical")
    assert "PriorityClass" not in message(system)
    labelled = _pod_priority_class(Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj(), "hi")
    labelled["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "batch-low"
    # no WorkloadPriorityClasses in the input: Kueue's own Event would say; the Pods' class is not read
    assert "PriorityClass hi" not in message(labelled)


def test_once_kueue_makes_the_workload_the_same_diagnosis_name_continues() -> None:
    job = Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj()
    before = {d["metadata"]["name"] for d in diagnose_objects([*_queues(), _config(), job], LATER)}
    wl = Workload(expected_workload_name(job), "team-a").queue("main").owner(job).created(CREATED).obj()
    after = diagnose_objects([*_queues(), _config(), job, wl], LATER)
    assert {d["metadata"]["name"] for d in after} == before
    assert after[0]["status"]["reason"] != "NoWorkload" and after[0]["spec"]["workloadRef"]["uid"]


@pytest.mark.parametrize(("why", "job", "extra"), [
    ("no queue-name label and manageJobsWithoutQueueName off",
     Job("plain", "team-a").suspend(False), []),
    ("still in the grace period", Job("fresh", "team-a").queue("main").created(LATER - timedelta(seconds=5)), []),
    ("finished", Job("done", "team-a").queue("main").status(
        conditions=[{"type": "Complete", "status": "True"}]), []),
    ("a child of a JobSet (Kueue manages the JobSet)", Job("js-workers-0", "team-a").queue("main").owner(
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "js-uid"}), []),
    ("being deleted", Job("gone", "team-a").queue("main").deleted(LATER), []),
    # Kueue integrations kueue-doctor does not diagnose itself still manage their children (FindAncestorJob...)
    ("a child of an AppWrapper", Job("aw-job", "team-a").queue("main").owner(
        {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw", "uid": "aw-uid"}), []),
    ("a StatefulSet scaled to 0 (Kueue makes no Workload for it)", _scaled_to_zero(), []),
])
def test_owners_kueue_does_not_manage_or_has_not_had_time_for_get_no_diagnosis(
        why: str, job: Job | dict[str, Any], extra: list[dict[str, Any]]) -> None:
    obj = job if isinstance(job, dict) else job.obj()
    if obj["metadata"]["name"] != "fresh":
        obj["metadata"]["creationTimestamp"] = "2026-11-30T09:00:00Z"
    assert _verdicts([*_queues(), _config(), obj, *extra]) == {}, why


def test_manage_jobs_without_queue_name_makes_an_unlabelled_job_expected() -> None:
    job = Job("plain", "team-a").created(CREATED).obj()
    assert _verdicts([*_queues(), _config(manageJobsWithoutQueueName=True), job]) == {
        expected_workload_name(job): ("NoWorkload", "WorkloadNotCreated")}


def test_a_dump_without_workloads_or_queues_claims_nothing() -> None:
    # nothing says Workloads were listed at all: kueue-doctor must not claim they are missing
    job = Job("trainer", "team-a").queue("main").created(CREATED).obj()
    assert diagnose_objects([job], LATER) == []


def test_default_namespace_selector_excludes_kube_system() -> None:
    ns = Namespace("kube-system").obj()
    job = Job("sys", "kube-system").queue("main").created(CREATED).obj()
    assert _verdicts([*_queues(), ns, _config(), job]) == {
        expected_workload_name(job): ("NoWorkload", "NamespaceNotManaged")}


# ----- Kueue's Configuration ----------------------------------------------------------------------

def test_configuration_defaults_are_kueues() -> None:
    cfg = from_config_map(_config())
    assert cfg.known and cfg.frameworks == {"batch/job"} and not cfg.manage_jobs_without_queue_name
    assert cfg.managed_jobs_namespace_selector == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]}


def test_v1beta1_configuration_is_read_the_same_way() -> None:
    cm = _config(integrations={"frameworks": ["batch/job", "ray.io/rayjob"]})
    text = cm["data"]["controller_manager_config.yaml"].replace("config.kueue.x-k8s.io/v1beta2",
                                                                 "config.kueue.x-k8s.io/v1beta1")
    cm["data"]["controller_manager_config.yaml"] = text
    assert from_config_map(cm).frameworks == {"batch/job", "ray.io/rayjob"}


@pytest.mark.parametrize(("data", "problem"), [
    ({}, "has no key controller_manager_config.yaml"),
    ({"controller_manager_config.yaml": "a: [b"}, "is not YAML"),
    ({"controller_manager_config.yaml": "kind: Something"}, "is not a Kueue Configuration"),
])
def test_an_unreadable_configuration_is_said_not_guessed(data: dict[str, str], problem: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"}, "data": data}
    cfg = from_config_map(cm)
    assert not cfg.known and problem in (cfg.problem or "")
    job = Job("trainer", "team-a").queue("main").created(CREATED).obj()
    out = diagnose_objects([*_queues(), cm, job], LATER)
    assert out[0]["status"]["cause"] == "WorkloadNotCreated" and problem in out[0]["status"]["message"]
    assert not UNREAD.known


# ----- the CLI, starting from the owner -----------------------------------------------------------

def _explain(objects: list[dict[str, Any]], *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO(yaml.safe_dump_all(objects))
    code = main(["explain", "-f", "-", "--now", "2026-11-30T09:10:00Z", *args], stdin=stdin, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_explain_job_slash_name_finds_the_owner_without_workload() -> None:
    job = Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj()
    code, out, _ = _explain([*_queues(), _config(integrations={"frameworks": ["kubeflow.org/mpijob"]}), job],
                            "-n", "team-a", "job/trainer")
    assert code == 0 and "NoWorkload" in out and "IntegrationNotEnabled" in out


def test_an_unlabelled_job_in_a_namespace_the_selector_leaves_out_is_not_blamed_on_the_flag() -> None:
    """kueue#7649: manageJobsWithoutQueueName is on, but managedJobsNamespaceSelector leaves the namespace out
    (kube-system and kueue-system by default): Kueue leaves its unlabelled Jobs alone on purpose, so they get no
    verdict (the operator would otherwise write a ClusterAdmin diagnosis for every Job of kube-system), and the
    user who names one is told why."""
    job = Job("plain", "team-a").suspend(False).created(CREATED).obj()
    config = _config(manageJobsWithoutQueueName=True, managedJobsNamespaceSelector={
        "matchLabels": {"kueue-managed": "true"}})
    code, out, _ = _explain([*_queues(), config, job], "-A")
    assert "plain" not in out, out
    code, _, err = _explain([*_queues(), config, job], "-n", "team-a", "job/plain")
    assert code == 1 and "namespace team-a does not match managedJobsNamespaceSelector" in err, err
    # suspended, though (an older Kueue's webhook did it): nothing will start it, so it still gets a verdict
    held = Job("plain", "team-a").suspend(True).created(CREATED).obj()
    code, out, _ = _explain([*_queues(), config, held], "-n", "team-a", "job/plain")
    assert code == 0 and "NoWorkload" in out and "NamespaceNotManaged" in out, out
    # asked about by name when the input holds no Workloads at all: the sentence names the selector, not the flag
    state = ClusterState.from_objects([*_queues(), config, job])
    said = unmanaged_reason(state, job, LATER)
    assert said is not None and "namespace team-a does not match managedJobsNamespaceSelector" in said, said
    assert "manageJobsWithoutQueueName is off" not in said, said


def test_explain_says_why_an_unlabelled_job_has_no_diagnosis() -> None:
    job = Job("plain", "team-a").suspend(True).created(CREATED).obj()
    code, _, err = _explain([*_queues(), _config(), job], "-n", "team-a", "job/plain")
    assert code == 1
    assert "has no label kueue.x-k8s.io/queue-name and manageJobsWithoutQueueName is off" in err
    assert "To queue it, set the label: kubectl -n team-a label job plain kueue.x-k8s.io/queue-name=<LocalQueue>" \
        in err


def test_an_unlabelled_running_owner_must_be_recreated_or_suspended_before_it_can_be_queued() -> None:
    """Kueue's webhook keeps the queue name immutable while the owner runs (seen live on a TrainJob): the plain
    "set the label" advice would be refused."""
    job = Job("plain", "team-a").suspend(False).created(CREATED).obj()
    code, _, err = _explain([*_queues(), _config(), job], "-n", "team-a", "job/plain")
    assert code == 1 and "To queue it" not in err
    assert "Kueue's webhook refuses the label while it runs: recreate it with the label " \
           "kueue.x-k8s.io/queue-name=<LocalQueue>, or set spec.suspend: true first" in err


def test_explain_points_from_a_child_job_to_its_jobset() -> None:
    child = Job("js-workers-0", "team-a").queue("main").created(CREATED).owner(
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "js-uid"}).obj()
    code, _, err = _explain([*_queues(), _config(), child], "-n", "team-a", "js-workers-0")
    assert code == 1 and "kueue-doctor explain -n team-a jobset/js" in err


def test_a_dump_read_without_now_judges_an_owner_created_at_its_newest_timestamp() -> None:
    # the dump's time is only its newest timestamp: the stuck Job may be the newest object of a dump taken
    # hours later, so `explain -f` applies no grace period; --now restores it
    job = Job("trainer", "team-a").queue("main").suspend(True).created(CREATED).obj()
    objects = [*_queues(), _config(), job]
    out, err = io.StringIO(), io.StringIO()
    assert main(["explain", "-f", "-"], stdin=io.StringIO(yaml.safe_dump_all(objects)), stdout=out, stderr=err) == 0
    assert "NoWorkload" in out.getvalue()
    assert _explain(objects, "job/trainer")[0] == 0  # --now 09:10, created 09:00: past the grace
    out, err = io.StringIO(), io.StringIO()
    assert main(["explain", "-f", "-", "--now", "2026-11-30T09:00:10Z", "job/trainer"],
                stdin=io.StringIO(yaml.safe_dump_all(objects)), stdout=out, stderr=err) == 1
    assert "Kueue has not made its Workload yet" in err.getvalue() and "Ask again in 20s" in err.getvalue()


# ----- owners Kueue never manages as written (NotManagedByKueue) ---------------------------------------

def test_a_queue_name_annotation_is_named_and_only_a_suspended_owner_gets_a_verdict() -> None:
    """Kueue reads only the label (the annotation went in v0.15): a Job its creator suspended waits forever and is
    diagnosed; a running one merely runs outside Kueue, and naming it says why with the label command filled in."""
    held = Job("sample", "team-a").annotation("kueue.x-k8s.io/queue-name", "main").suspend(True).created(
        CREATED).obj()
    assert _verdicts([*_queues(), _config(), held]) == {expected_workload_name(held): ("NoWorkload",
                                                                                        "NotManagedByKueue")}
    running = Job("sample", "team-a").annotation("kueue.x-k8s.io/queue-name", "main").suspend(False).created(
        CREATED).obj()
    assert _verdicts([*_queues(), _config(), running]) == {}
    code, _, err = _explain([*_queues(), _config(), running], "-n", "team-a", "job/sample")
    assert code == 1 and "kueue.x-k8s.io/queue-name=main is an annotation, which Kueue does not read" in err, err
    assert "label job sample kueue.x-k8s.io/queue-name=main" in err, err
    # manageJobsWithoutQueueName on: Kueue manages it anyway, the annotation is beside the point
    managed = _verdicts([*_queues(), _config(manageJobsWithoutQueueName=True), held])
    assert managed == {expected_workload_name(held): ("NoWorkload", "WorkloadNotCreated")}


def _rayjob(suspend: bool) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "eval", "namespace": "team-a", "uid": "rayjob-uid",
                         "creationTimestamp": "2026-11-30T09:00:00Z", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"entrypoint": "python eval.py", "clusterSelector": {"ray.io/cluster": "shared"},
                     "suspend": suspend}}


def test_a_rayjob_on_an_existing_raycluster_is_never_kueues() -> None:
    """kueue#7219: Kueue v0.19 skips a RayJob with spec.clusterSelector (RayJob.Skip). Suspended (by Kueue's webhook,
    for its queue-name label), it waits forever: the owner recreates it without the label, whatever Kueue's
    Configuration says; unsuspended, it runs on the RayCluster's quota and gets no verdict."""
    ray = _config(integrations={"frameworks": ["batch/job", "ray.io/rayjob"]})
    held = _rayjob(suspend=True)
    for config in (ray, _config()):  # the integration off or on: Kueue skips it either way
        out = diagnose_objects([*_queues(), config, held], LATER)
        assert [(d["status"]["cause"], d["status"]["actionBy"]) for d in out] == [
            ("NotManagedByKueue", "WorkloadOwner")]
        assert "kueue#7219" in out[0]["status"]["message"]
        assert "Kueue, which skips it, will never unsuspend it" in out[0]["status"]["message"]  # no KubeRay verdict yet
    assert "without the label kueue.x-k8s.io/queue-name" in diagnose_objects([*_queues(), ray, held], LATER)[0][
        "status"]["message"]
    running = _rayjob(suspend=False)
    assert _verdicts([*_queues(), ray, running]) == {}
    code, _, err = _explain([*_queues(), ray, running], "-n", "team-a", "rayjob/eval")
    assert code == 1 and "kueue-doctor explain -n team-a raycluster/shared" in err, err


def _kueue_deployment(image: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system", "uid": "kueue-uid"},
            "spec": {"template": {"spec": {"containers": [{"name": "manager", "image": image}]}}},
            "status": {"availableReplicas": 1}}


def test_a_default_queue_label_in_a_namespace_left_out_is_blamed_on_kueues_defaulting_only_before_v0_19_1() -> None:
    """kueue#13374: Kueue v0.19.0 put queue-name=default on a Job in a namespace managedJobsNamespaceSelector left
    out, where a LocalQueue 'default' exists; labelling the namespace is then the last remedy, not the first."""
    objects = [Namespace("tools").obj(), LocalQueue("default", "tools", "cq").obj(), ClusterQueue("cq").obj(),
               _config(manageJobsWithoutQueueName=True, managedJobsNamespaceSelector={
                   "matchLabels": {"managed-by-kueue": "true"}}),
               Job("backup", "tools").queue("default").suspend(True).created(CREATED).obj()]

    def message(image: str | None) -> str:
        extra = [_kueue_deployment(image)] if image else []
        out = diagnose_objects([*objects, *extra], LATER)
        assert [(d["status"]["reason"], d["status"]["cause"]) for d in out] == [("NoWorkload", "NamespaceNotManaged")]
        text: str = out[0]["status"]["message"]
        return text

    assert "Kueue v0.19.0 likely wrote its label" in message("registry.k8s.io/kueue/kueue:v0.19.0")
    assert "Kueue (if older than v0.19.1) likely wrote" in message(None)
    fixed = message("registry.k8s.io/kueue/kueue:v0.19.2@sha256:0123")
    assert "kueue#13374" not in fixed and "A cluster admin must label the namespace" in fixed
