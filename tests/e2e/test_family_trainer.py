"""TrainJobs through Kueue's trainer.kubeflow.org/trainjob integration, with the real Kubeflow Trainer v2, live.

The module fixture ``owner_kinds`` starts the JobSet controller and Trainer's controller manager (both with their
webhooks registered) and restarts Kueue with frameworks batch/job + jobset.x-k8s.io/jobset +
trainer.kubeflow.org/trainjob, for this module only. A TrainJob runs through a JobSet the Trainer builds from its
TrainingRuntime: TrainJob -> JobSet -> Job -> Pod, and Kueue's Workload belongs to the TrainJob. No training
runs: the fake kubelet runs the Pods (pause semantics). Snapshots are recorded as ``scenario-family-trainer-*.yaml``
(replayed offline by tests/unit/test_regressions.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.builders import Job

from . import families, kube
from .kube import Resources, condition, condition_is, wait_for, wait_for_workload
from .test_operator import SA_USER, Operator, adiag, run_operator
from .test_scenarios import _pool, _queue

pytestmark = pytest.mark.e2e

CONTROLLERS = ("jobset", "trainer")
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "torch-distributed"
ACCELERATOR = {"example.test/accelerator": "tpu"}  # a node label no fake node has


def _runtime(namespace: str, name: str = RUNTIME, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A TrainingRuntime shaped like the release's torch-distributed ClusterTrainingRuntime (pause image)."""
    pod: dict[str, Any] = {"containers": [{"name": "node", "image": families.IMAGE}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {"apiVersion": TRAINER_API, "kind": "TrainingRuntime",
            "metadata": {"name": name, "namespace": namespace, "labels": {"trainer.kubeflow.org/framework": "torch"}},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}},
                     "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                         "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                         "spec": {"template": {"spec": pod}}}}]}}}}


def _trainjob(name: str, namespace: str, queue: str | None, nodes: int, cpu: str,
              runtime: str = RUNTIME) -> dict[str, Any]:
    return {"apiVersion": TRAINER_API, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {families.QUEUE_LABEL: queue} if queue else {}},
            "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": runtime},
                     "trainer": {"numNodes": nodes, "resourcesPerNode": {"requests": {"cpu": cpu},
                                                                         "limits": {"cpu": cpu}}}}}


def _wl(api: Any, ns: str, name: str, ok: Any, what: str, timeout: float = 60) -> dict[str, Any]:
    return kube.wait_for_workload(api, ns, name, ok, timeout=timeout, what=what, kind="TrainJob")


def _qr_message(w: dict[str, Any]) -> str:
    return str((condition(w, "QuotaReserved") or {}).get("message", ""))


def _controller(obj: dict[str, Any]) -> tuple[str, str]:
    ref = next((r for r in obj["metadata"].get("ownerReferences", []) if r.get("controller")), {})
    return ref.get("kind", ""), ref.get("name", "")


def _chain(api: Any, namespace: str, trainjob: str) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                            list[dict[str, Any]]]:
    """The TrainJob's JobSet, its Jobs and their Pods, each owned (controller) by the one before."""
    (js,) = [j for j in kube.list_objects(api, "jobset.x-k8s.io/JobSet", namespace)
             if _controller(j) == ("TrainJob", trainjob)]
    jobs = [j for j in kube.list_objects(api, "Job", namespace) if _controller(j) == ("JobSet", js["metadata"]["name"])]
    names = {j["metadata"]["name"] for j in jobs}
    pods = [p for p in kube.list_objects(api, "Pod", namespace) if _controller(p)[0] == "Job"
            and _controller(p)[1] in names]
    return js, jobs, pods


@pytest.fixture(scope="module")
def operator(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    yield from run_operator(cluster, tmp_path_factory, "operator-trainer")


def _pods(api: Any, namespace: str, trainjob: str) -> list[dict[str, Any]]:
    """The TrainJob's Pods; none while its JobSet does not exist yet."""
    try:
        return _chain(api, namespace, trainjob)[2]
    except ValueError:
        return []


def _running_pods(api: Any, namespace: str, trainjob: str) -> list[dict[str, Any]] | None:
    pods = _pods(api, namespace, trainjob)
    return pods if pods and all(p["status"].get("phase") == "Running" for p in pods) else None


def test_trainjob_admitted_and_running_and_one_kueue_never_took(cluster: Any, resources: Resources, namespace: str,
                                                                owner_kinds: Any) -> None:
    """llama (queue-name label) is admitted and runs 2 nodes; free (no label) runs outside Kueue, which never
    suspends it, makes no Workload for it and refuses the label while it runs."""
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="8"))
    resources.create(_runtime(namespace))
    created = resources.create(_trainjob("llama", namespace, lq, 2, "1"))
    assert created["spec"].get("suspend") is True, "Kueue's TrainJob webhook suspends it at creation"
    assert [p["manager"] for p in created["spec"]["runtimePatches"]] == ["kueue.x-k8s.io/manager"]
    free = resources.create(_trainjob("free", namespace, None, 1, "500m"))
    assert not free["spec"].get("suspend"), "no queue-name label: Kueue's webhook leaves it alone"
    wl = _wl(api, namespace, "llama", lambda w: condition_is(w, "PodsReady"), "PodsReady=True", timeout=90)
    assert wl["status"]["admission"]["clusterQueue"] == cq
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)], wl["spec"]["podSets"]
    tj = kube.get(api, "trainer.kubeflow.org/TrainJob", "llama", namespace)
    assert tj is not None and tj["spec"]["suspend"] is False
    js, jobs, pods = _chain(api, namespace, "llama")
    assert js["spec"].get("suspend") is not True and len(jobs) == 1, (js["spec"], jobs)
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods), pods

    wait_for(lambda: _running_pods(api, namespace, "free"), timeout=60,
             message="the unlabelled TrainJob's Pod Running, outside Kueue")
    assert kube.workload_for(api, namespace, "free", "TrainJob") is None
    with pytest.raises(Exception) as refused:  # Kueue's validating webhook: the queue name is immutable while it runs
        kube.patch(api, "trainer.kubeflow.org/TrainJob", "free", {"metadata": {"labels": {families.QUEUE_LABEL: lq}}},
                   namespace)
    assert getattr(refused.value, "status", None) in (400, 403, 422), refused.value
    assert "queue-name" in str(getattr(refused.value, "body", refused.value)), refused.value

    st = families.recorded_verdict(api, namespace, "trainer-running", "TrainJob llama (2 nodes x 1 cpu) admitted, "
                                   "Running; TrainJob free (no queue-name label) running outside Kueue",
                                   owner=("TrainJob", "llama"), reason="Running", cause="PodsReady")
    assert st["pods"]["running"] == 2 and st["pods"]["expected"] == 2, st["pods"]
    # owner-first, live, as the user asks it
    out = families.explain(cluster, "-n", namespace, "trainjob/llama", "-o", "yaml")
    assert out.returncode == 0, out.stderr
    (live,) = list(yaml.safe_load_all(out.stdout))
    assert (live["spec"]["ownerRef"]["kind"], live["status"]["reason"], live["status"]["pods"]["running"]) == (
        "TrainJob", "Running", 2), live
    out = families.explain(cluster, "-n", namespace, "trainjob/free")
    assert out.returncode == 1 and not out.stdout.strip(), out  # EXIT_NOT_FOUND: no diagnosis, and why
    assert f"TrainJob {namespace}/free has no label {families.QUEUE_LABEL}" in out.stderr, out.stderr
    assert "manageJobsWithoutQueueName is off" in out.stderr, out.stderr
    assert "Kueue's webhook refuses the label while it runs" in out.stderr, out.stderr  # as the patch above saw


def test_trainjob_pending_for_quota(cluster: Any, resources: Resources, namespace: str, owner_kinds: Any) -> None:
    """A Job holds 3 of 4 cpu; the TrainJob's 2 nodes x 1 cpu wait for 1 more cpu, the TrainJob kept suspended."""
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="8"))
    resources.create(_runtime(namespace))
    resources.create(Job("hog", namespace).queue(lq).request("cpu", "3").manifest())
    wait_for_workload(api, namespace, "hog", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    resources.create(_trainjob("waits", namespace, lq, 2, "1"))
    wl = _wl(api, namespace, "waits", lambda w: "insufficient unused quota" in _qr_message(w),
             "pending: insufficient unused quota")
    assert _qr_message(wl).endswith("1 more needed"), _qr_message(wl)
    wait_for(lambda: (kube.get(api, "ClusterQueue", cq) or {}).get("status", {}).get("reservingWorkloads") == 1,
             timeout=30, message=f"ClusterQueue {cq} to count the running Job")
    tj = kube.get(api, "trainer.kubeflow.org/TrainJob", "waits", namespace)
    assert tj is not None and tj["spec"]["suspend"] is True
    # the Trainer builds the JobSet at once, suspended like the TrainJob; JobSet makes its Job, suspended; no Pod
    js, jobs, pods = wait_for(lambda: c if (c := _chain(api, namespace, "waits"))[1] else None, timeout=30,
                              message="the JobSet's Job (the JobSet controller makes it in its own time)")
    assert js["spec"]["suspend"] is True and [j["spec"]["suspend"] for j in jobs] == [True] and not pods, (js, jobs)
    assert [w["metadata"]["name"] for w in kube.list_objects(api, "Workload", namespace)
            if _controller(w)[0] != "Job"] == [wl["metadata"]["name"]], "one Workload, the TrainJob's: none for its JobSet"
    st = families.recorded_verdict(api, namespace, "trainer-pending-quota",
                                   f"TrainJob waits (2 x 1 cpu) suspended: Job hog holds 3 of {cq}'s 4 cpu",
                                   owner=("TrainJob", "waits"), reason="WaitingForQuota",
                                   cause="InsufficientUnusedQuota")
    assert st["clusterQueue"] == cq and "Needs 1 more cpu" in st["message"], st["message"]


def test_trainjob_admitted_pods_unschedulable(cluster: Any, resources: Resources, namespace: str,
                                              owner_kinds: Any) -> None:
    """Quota fits; the TrainingRuntime pins its nodes to a label no node has: admitted, both Pods Unschedulable."""
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    resources.create(_runtime(namespace, "torch-tpu", node_selector=ACCELERATOR))
    resources.create(_trainjob("pinned", namespace, lq, 2, "1", runtime="torch-tpu"))

    def unschedulable() -> list[dict[str, Any]] | None:
        pods = _pods(api, namespace, "pinned")
        stuck = [p for p in pods if (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable"]
        return pods if len(stuck) == 2 else None

    pods = wait_for(unschedulable, timeout=90, message="both TrainJob Pods Unschedulable")
    wl = kube.workload_for(api, namespace, "pinned", "TrainJob")
    assert wl is not None and condition_is(wl, "Admitted") and not condition_is(wl, "PodsReady"), wl
    wait_for(lambda: any(e.get("reason") == "FailedScheduling" for p in pods
                         for e in kube.events_for(api, namespace, p["metadata"]["name"], kind="Pod")),
             timeout=30, message="the scheduler's FailedScheduling events")
    st = families.recorded_verdict(api, namespace, "trainer-pods-unschedulable",
                                   "TrainJob pinned admitted; its TrainingRuntime's nodeSelector matches no node",
                                   owner=("TrainJob", "pinned"), reason="PodsUnschedulable",
                                   cause="NodeSelectorMismatch")
    assert st["pods"]["running"] == 0 and st["pods"]["expected"] == 2, st["pods"]
    assert st["blocker"]["podSet"] == "node", st


def test_trainjob_labelled_while_kueues_trainjob_integration_is_off(cluster: Any, resources: Resources,
                                                                     namespace: str, owner_kinds: Any) -> None:
    """Kueue restarted without trainer.kubeflow.org/trainjob: nobody suspends the labelled TrainJob, it runs with
    no Workload (nor one for its JobSet), and the verdict names the integration to enable."""
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    resources.create(_runtime(namespace))
    with cluster.kueue_settings(frameworks=["batch/job", "jobset.x-k8s.io/jobset"]):
        created = resources.create(_trainjob("orphan", namespace, lq, 1, "500m"))
        assert not created["spec"].get("suspend") and not created["spec"].get("runtimePatches"), created["spec"]

        wait_for(lambda: _running_pods(api, namespace, "orphan"), timeout=60,
                 message="the TrainJob's Pod Running outside Kueue")
        assert kube.list_objects(api, "Workload", namespace) == []
        st = families.recorded_verdict(
            api, namespace, "trainer-integration-disabled",
            "TrainJob orphan (queue-name label) while Kueue runs without its trainjob integration",
            owner=("TrainJob", "orphan"), reason="NoWorkload", cause="IntegrationNotEnabled")
        assert "trainer.kubeflow.org/trainjob" in st["message"], st["message"]
        kube.delete(api, "trainer.kubeflow.org/TrainJob", "orphan", namespace)  # before Kueue would take it
        wait_for(lambda: kube.get(api, "trainer.kubeflow.org/TrainJob", "orphan", namespace) is None, timeout=30,
                 message="the TrainJob gone")


def test_the_operator_diagnoses_trainjobs_and_writes_nothing_but_its_own_objects(
        cluster: Any, resources: Resources, namespace: str, owner_kinds: Any, operator: Operator) -> None:
    """The operator, with the manifests' least-privilege ServiceAccount, watches TrainJobs: one over its queue's
    maximum, one running; its AdmissionDiagnoses name the TrainJob, and the audit log shows it wrote nothing else."""
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "1"}, _pool(resources, cpu="4"))
    resources.create(_runtime(namespace))
    resources.create(_trainjob("big", namespace, lq, 2, "1"))
    resources.create(_trainjob("small", namespace, lq, 1, "500m"))
    names = {tj: _wl(api, namespace, tj, lambda w: bool(condition(w, "QuotaReserved")), "QuotaReserved written")
             ["metadata"]["name"] for tj in ("big", "small")}
    want = {"big": "ExceedsMaxQuota", "small": "Running"}

    def verdicts() -> dict[str, Any]:
        return {tj: (d := adiag(api, namespace, wl)) and d["status"].get("reason") for tj, wl in names.items()}

    wait_for(lambda: verdicts() == want, timeout=60, message=lambda: f"the operator's verdicts {want}, got "
             f"{verdicts()}:\n{operator.tail()}")
    for tj, wl in names.items():
        d = adiag(api, namespace, wl)
        assert d is not None and (d["spec"]["ownerRef"]["kind"], d["spec"]["ownerRef"]["name"]) == ("TrainJob", tj)
    big = adiag(api, namespace, names["big"])
    assert big is not None and big["status"]["clusterQueue"] == cq and "cpu" in big["status"]["message"], big
    small = adiag(api, namespace, names["small"])
    assert small is not None and small["status"]["pods"]["running"] == 1, small["status"]
    touched = {(w["objectRef"].get("apiGroup", ""), w["objectRef"]["resource"])
               for w in cluster.writes_by_user(SA_USER)}
    assert touched == {("kueue-doctor.dev", "admissiondiagnoses")}, touched
