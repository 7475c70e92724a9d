"""`kueue-doctor run` as a separate process, with the least-privilege ServiceAccount of manifests/.

The operator is started once for this module with a token of the `kueue-doctor` ServiceAccount bound
to the ClusterRole in manifests/base/rbac.yaml; the apiserver's audit log proves what it wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_doctor.kube.objects import parse_time
from tests.builders import ClusterQueue, Job, LocalQueue, ResourceFlavor

from . import kube
from .conftest import ClusterHandle
from .kube import lc

ROOT = Path(__file__).resolve().parents[2]
SA_NAMESPACE, SA_NAME = "kueue-doctor", "kueue-doctor"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
ADIAG = "/apis/kueue-doctor.dev/v1alpha1"


def apply_manifest(api: Any, path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        group_version = doc["apiVersion"]
        plural = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
                  "ClusterRoleBinding": "clusterrolebindings", "CustomResourceDefinition":
                  "customresourcedefinitions", "Namespace": "namespaces", "Role": "roles",
                  "RoleBinding": "rolebindings"}[doc["kind"]]
        ns = doc["metadata"].get("namespace")
        base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        path_ = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
        kube.request_json(api, "PATCH", f"{path_}/{doc['metadata']['name']}", doc,
                          query={"fieldManager": "e2e", "force": "true"}, content_type="application/apply-patch+yaml")


def token_kubeconfig(cluster: ClusterHandle, directory: Path, sa_name: str = SA_NAME) -> Path:
    out = kube.request_json(cluster.api_client, "POST",
                            f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{sa_name}/token",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 7200}})
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    cluster_entry = admin["clusters"][0]
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "operator",
              "clusters": [cluster_entry],
              "users": [{"name": "operator", "user": {"token": out["status"]["token"]}}],
              "contexts": [{"name": "operator", "context": {"cluster": cluster_entry["name"], "user": "operator"}}]}
    path = directory / f"{sa_name}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


class Operator:
    def __init__(self, proc: subprocess.Popen[bytes], metrics: int, health: int, log: Path) -> None:
        self.proc, self.metrics_port, self.health_port, self.log = proc, metrics, health, log

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as rsp:
            return str(rsp.read().decode())

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-60:])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def install_crd_and_rbac(cluster: ClusterHandle) -> None:
    api = cluster.api_client
    apply_manifest(api, ROOT / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml")
    kube.wait_for(lambda: kube.request_json(api, "GET", ADIAG), timeout=30, message="the CRD to be served")
    apply_manifest(api, ROOT / "manifests" / "base" / "namespace.yaml")
    apply_manifest(api, ROOT / "manifests" / "base" / "rbac.yaml")


def start_operator(kubeconfig: Path, workdir: Path, *extra: str) -> Operator:
    metrics, health = lc.free_ports(2)
    log = workdir / f"{kubeconfig.stem}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "operator")}  # this checkout's code
    env.pop("KUBECONFIG", None)
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kueue_doctor", "run", "--kubeconfig", str(kubeconfig),
             "--metrics-port", str(metrics), "--health-port", str(health), "--refresh-interval", "2",
             "--resync-interval", "15", *extra],
            stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    op = Operator(proc, metrics, health, log)
    kube.wait_serving(proc, f"http://127.0.0.1:{health}/healthz", "the operator", op.tail, op.stop)
    return op


def run_operator(cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory, name: str, *extra: str
                 ) -> Iterator[Operator]:
    """The operator with the manifests' ServiceAccount and `extra` flags, for a module's tests (a fixture body)."""
    if cluster.local is None:
        pytest.skip("the operator tests need the local control plane (token minting, audit log)")
    install_crd_and_rbac(cluster)
    workdir = tmp_path_factory.mktemp(name)
    op = start_operator(token_kubeconfig(cluster, workdir), workdir, *extra)
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture(scope="module")
def operator(cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    yield from run_operator(cluster, tmp_path_factory, "operator")


def adiag(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        out: dict[str, Any] = kube.request_json(api, "GET", f"{ADIAG}/namespaces/{namespace}/admissiondiagnoses/{name}")
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise
    return out


def reason_of(api: Any, namespace: str, name: str) -> str | None:
    d = adiag(api, namespace, name)
    return d["status"]["reason"] if d else None


def setup_queue(resources: kube.Resources, namespace: str, pods: int) -> str:
    """A ClusterQueue for `pods` Pods of 100m cpu (small, so the fake nodes always have room)."""
    suffix = kube.unique_name("op")
    rf, cq = f"rf-{suffix}", f"cq-{suffix}"
    resources.node(f"node-{suffix}", cpu="4")
    resources.create(ResourceFlavor(rf).manifest())
    resources.create(ClusterQueue(cq).quotas({rf: {"cpu": f"{pods * 100}m", "pods": str(pods)}}).manifest())
    resources.create(LocalQueue("main", namespace, cq).manifest())
    return cq


def test_operator_follows_a_workload_from_exceeds_max_quota_to_running_and_removes_it_with_the_workload(
        cluster: ClusterHandle, operator: Operator, resources: kube.Resources, namespace: str) -> None:
    api = cluster.api_client
    cq = setup_queue(resources, namespace, 2)
    resources.create(Job("big", namespace).queue("main").parallelism(3).request("cpu", "100m").manifest())
    wl = kube.wait_for_workload(api, namespace, "big")
    wl_name = wl["metadata"]["name"]
    # the Workload's watch event may come before its LocalQueue's (separate watch streams): the diagnosis names
    # the ClusterQueue once the LocalQueue is known, and is rewritten then
    d = kube.wait_for(lambda: d if (d := adiag(api, namespace, wl_name)) and d["status"].get("reason") == "ExceedsMaxQuota"
                      and d["status"].get("clusterQueue") == cq else None, timeout=60,
                      message=lambda: f"ExceedsMaxQuota diagnosis naming {cq}: {adiag(api, namespace, wl_name)}\n"
                      f"{operator.tail()}")
    assert d["metadata"]["labels"]["kueue-doctor.dev/reason"] == "ExceedsMaxQuota"
    assert d["metadata"]["ownerReferences"][0]["uid"] == wl["metadata"]["uid"]
    assert {"controller", "blockOwnerDeletion"}.isdisjoint(d["metadata"]["ownerReferences"][0])
    # spec and status are atomic: the apiserver records the operator as the owner of each whole, not per field
    mine = [e for e in d["metadata"]["managedFields"] if e["manager"] == "kueue-doctor"]
    assert [(e["fieldsV1"]["f:spec"], e["fieldsV1"]["f:status"]) for e in mine] == [({}, {})], mine

    # the platform admin raises the quota: Kueue admits, the diagnosis follows
    kube.patch(api, "ClusterQueue", cq, {"spec": {"resourceGroups": [{"coveredResources": ["cpu", "pods"], "flavors": [
        {"name": f"rf-{cq.removeprefix('cq-')}", "resources": [{"name": "cpu", "nominalQuota": "400m"},
                                                              {"name": "pods", "nominalQuota": "4"}]}]}]}})
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) in ("Running", "PodsUnschedulable", "PodsNotCreated",
                                                                  "ContainersNotStarting"),
                  timeout=60, message=lambda: f"post-admission verdict, got {reason_of(api, namespace, wl_name)}")
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "Running", timeout=60,
                  message=lambda: f"Running, got {adiag(api, namespace, wl_name)}")

    # deleting the Job deletes the Workload, and with it the diagnosis
    kube.delete(api, "Job", "big", namespace)
    kube.wait_for(lambda: adiag(api, namespace, wl_name) is None, timeout=60,
                  message="the diagnosis to go with its Workload")


def test_hand_edited_or_deleted_diagnosis_is_restored(
        cluster: ClusterHandle, operator: Operator, resources: kube.Resources, namespace: str) -> None:
    api = cluster.api_client
    setup_queue(resources, namespace, 1)
    resources.create(Job("big", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    wl_name = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "ExceedsMaxQuota", timeout=60,
                  message="first diagnosis")
    path = f"{ADIAG}/namespaces/{namespace}/admissiondiagnoses/{wl_name}"
    original = adiag(api, namespace, wl_name)
    assert original is not None
    kube.request_json(api, "PATCH", path, {"status": {"reason": "EditedByHand"}},
                      content_type="application/merge-patch+json")
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "ExceedsMaxQuota", timeout=30,
                  message="the edited diagnosis to be restored")
    kube.request_json(api, "DELETE", path)
    restored = kube.wait_for(lambda: adiag(api, namespace, wl_name), timeout=30,
                             message="the deleted diagnosis to be restored")
    assert restored["status"]["since"] == original["status"]["since"]  # the operator remembers since


def test_metrics_agree_with_the_diagnoses_in_the_cluster(
        cluster: ClusterHandle, operator: Operator, resources: kube.Resources, namespace: str) -> None:
    api = cluster.api_client
    cq = setup_queue(resources, namespace, 1)
    resources.create(Job("big", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    resources.create(Job("small", namespace).queue("main").request("cpu", "100m").manifest())
    names = {kube.wait_for_workload(api, namespace, j)["metadata"]["name"] for j in ("big", "small")}
    kube.wait_for(lambda: all(reason_of(api, namespace, n) in ("ExceedsMaxQuota", "Running") for n in names)
                  and {reason_of(api, namespace, n) for n in names} == {"ExceedsMaxQuota", "Running"},
                  timeout=60, message="both diagnoses")

    def series() -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for line in operator.metrics().splitlines():
            if line.startswith("kueue_doctor_workloads{") and f'cluster_queue="{cq}"' in line:
                labels, value = line.rsplit(" ", 1)
                stage = labels.split('stage="')[1].split('"')[0]
                reason = labels.split('reason="')[1].split('"')[0]
                out[stage, reason] = float(value)
        return out

    kube.wait_for(lambda: series() == {("Admission", "ExceedsMaxQuota"): 1.0, ("Running", "Running"): 1.0},
                  timeout=30, message=lambda: f"metrics to agree, got {series()}")
    text = operator.metrics()
    big = next(n for n in names if reason_of(api, namespace, n) == "ExceedsMaxQuota")
    since = adiag(api, namespace, big)["status"]["since"]  # type: ignore[index]
    line = next(ln for ln in text.splitlines() if ln.startswith("kueue_doctor_workload_waiting_since_timestamp_seconds{")
                and f'workload="{big}"' in ln)
    assert f'workload_namespace="{namespace}"' in line
    expected = time.mktime(time.strptime(since, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert abs(float(line.rsplit(" ", 1)[1]) - expected) < 1.5


def test_nothing_is_written_while_nothing_changes_and_never_to_watched_objects(
        cluster: ClusterHandle, operator: Operator, resources: kube.Resources, namespace: str) -> None:
    api = cluster.api_client
    setup_queue(resources, namespace, 1)
    resources.create(Job("big", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    wl_name = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "ExceedsMaxQuota", timeout=60, message="diagnosis")
    time.sleep(3)  # let the refresh interval (2s) pass so any pending minor write happens
    before = len(cluster.writes_by_user(SA_USER))
    time.sleep(8)  # several passes and a refresh interval: an unchanged cluster gets no write
    assert len(cluster.writes_by_user(SA_USER)) == before
    writes = cluster.writes_by_user(SA_USER)
    assert writes, "the audit log shows no write by the operator at all: is it logging?"
    touched = {(w["objectRef"].get("apiGroup", ""), w["objectRef"]["resource"]) for w in writes}
    assert touched == {("kueue-doctor.dev", "admissiondiagnoses")}, touched


def job_too_big_for_its_queue(resources: kube.Resources, namespace: str, job: str = "big") -> str:
    """A Job of 2 Pods in a ClusterQueue for 1, once Kueue has said so (QuotaReserved): its Workload's name."""
    api = resources.api
    setup_queue(resources, namespace, 1)
    resources.create(Job(job, namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    wl_name: str = kube.wait_for_workload(api, namespace, job)["metadata"]["name"]
    kube.wait_for(lambda: kube.condition(kube.get(api, "Workload", wl_name, namespace), "QuotaReserved"),
                  timeout=30, message="Kueue's verdict")
    return wl_name


def test_explain_without_files_reads_the_live_cluster_once(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str) -> None:
    wl_name = job_too_big_for_its_queue(resources, namespace)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": str(ROOT / "operator")}
    out = subprocess.run([sys.executable, "-m", "kueue_doctor", "explain", "-n", namespace, "-o", "yaml"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    (d,) = list(yaml.safe_load_all(out.stdout))
    assert (d["metadata"]["name"], d["status"]["reason"], d["status"]["cause"]) == (
        wl_name, "ExceedsMaxQuota", "ExceedsNominalQuota")


def test_operator_warns_when_the_installed_crd_is_not_the_one_it_expects(
        cluster: ClusterHandle, operator: Operator) -> None:
    api = cluster.api_client
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/admissiondiagnoses.kueue-doctor.dev"
    key = "kueue-doctor.dev/schema-hash"
    current = kube.request_json(api, "GET", path)["metadata"]["annotations"][key]

    def gauge() -> str:
        return next(ln for ln in operator.metrics().splitlines()
                    if ln.startswith("kueue_doctor_admissiondiagnosis_crd_current "))

    assert gauge().endswith(" 1.0")
    kube.request_json(api, "PATCH", path, {"metadata": {"annotations": {key: "an-older-schema"}}},
                      content_type="application/merge-patch+json")
    try:
        kube.wait_for(lambda: gauge().endswith(" 0.0"), timeout=45, message="the outdated-CRD metric")
        assert "is not the one this operator expects" in operator.log.read_text()
    finally:
        kube.request_json(api, "PATCH", path, {"metadata": {"annotations": {key: current}}},
                          content_type="application/merge-patch+json")


def test_owners_kueue_never_took_get_their_own_diagnosis_from_the_operator_and_from_explain(
        cluster: ClusterHandle, operator: Operator, resources: kube.Resources, namespace: str) -> None:
    """A JobSet while Kueue manages only Jobs, and a Job in a namespace outside managedJobsNamespaceSelector:
    after the 30 s grace period each has an AdmissionDiagnosis named as Kueue would name its Workload, owned by
    the owner (which takes it along when deleted); `explain KIND/NAME` on the live cluster says the same."""
    from kueue_doctor.kube.kueue_names import expected_workload_name
    from tests.builders import Namespace

    from .test_owner_scenarios import _jobset, _jobset_served

    api = cluster.api_client
    if not _jobset_served(api):
        pytest.skip("no JobSet CRD in this cluster")
    setup_queue(resources, namespace, 2)
    jobset = resources.create(_jobset("trainer", namespace, "main"))
    unmanaged = kube.unique_name("t-unmanaged")
    resources.create(Namespace(unmanaged).label(lc.UNMANAGED_NAMESPACE_LABEL, "true").manifest())
    resources.create(LocalQueue("main", unmanaged, "nowhere").manifest())
    job = resources.create(Job("stuck", unmanaged).queue("main").request("cpu", "100m").manifest())
    expected = {(namespace, expected_workload_name(jobset)): "IntegrationNotEnabled",
                (unmanaged, expected_workload_name(job)): "NamespaceNotManaged"}

    def verdicts() -> dict[tuple[str, str], str | None]:
        return {k: (d := adiag(api, *k)) and d["status"].get("cause") for k in expected}
    kube.wait_for(lambda: verdicts() == expected, timeout=90,
                  message=lambda: f"NoWorkload diagnoses, got {verdicts()}:\n{operator.tail()}")
    d = adiag(api, namespace, expected_workload_name(jobset))
    assert d is not None and d["status"]["reason"] == "NoWorkload" and "workloadRef" not in d["spec"]
    assert d["metadata"]["ownerReferences"] == [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                                 "name": "trainer", "uid": jobset["metadata"]["uid"]}]
    assert kube.list_objects(api, "Workload", namespace) == []  # still none: the verdict is the owner's own

    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": str(ROOT / "operator")}
    out = subprocess.run([sys.executable, "-m", "kueue_doctor", "explain", "-n", unmanaged, "job/stuck", "-o",
                          "yaml"], env=env, capture_output=True, text=True, timeout=120, check=True)
    (live,) = list(yaml.safe_load_all(out.stdout))
    assert (live["metadata"]["name"], live["status"]["reason"], live["status"]["cause"]) == (
        expected_workload_name(job), "NoWorkload", "NamespaceNotManaged")

    kube.delete(api, "jobset.x-k8s.io/JobSet", "trainer", namespace)  # the garbage collector takes it along
    kube.wait_for(lambda: adiag(api, namespace, expected_workload_name(jobset)) is None, timeout=60,
                  message="the JobSet's diagnosis to go with it")


def test_a_job_that_waits_for_quota_then_for_pods_then_runs_gets_a_history_and_a_post_mortem(
        cluster: ClusterHandle, operator: Operator, resources: kube.Resources, namespace: str) -> None:
    """Issue 11: the history the operator observed agrees with the apiserver's timestamps within a second,
    the Finished message says where the time went, and the histogram has the wait for quota."""
    api = cluster.api_client
    cq = setup_queue(resources, namespace, 1)
    blocker = (Job("blocker", namespace).queue("main").request("cpu", "100m")
               .pod_annotation(kube.FAKE_RUN_SECONDS_ANNOTATION, "6"))
    resources.create(blocker.manifest())
    kube.wait_for_workload(api, namespace, "blocker", lambda w: kube.condition_is(w, "PodsReady"), what="PodsReady")
    train = (Job("train", namespace).queue("main").request("cpu", "100m")
             .pod_annotation(kube.FAKE_HOLD_ANNOTATION, "true").pod_annotation(kube.FAKE_RUN_SECONDS_ANNOTATION, "3"))
    resources.create(train.manifest())
    wl_name = kube.wait_for_workload(api, namespace, "train")["metadata"]["name"]
    kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "WaitingForQuota", timeout=30,
                  message=lambda: f"WaitingForQuota, got {adiag(api, namespace, wl_name)}")
    # the blocker ends; Kueue admits train; its Pod is held Pending by the fake kubelet (waiting for Pods)
    kube.wait_for(lambda: (adiag(api, namespace, wl_name) or {}).get("status", {}).get("stage") == "Scheduling",
                  timeout=60, message=lambda: f"the Scheduling stage, got {adiag(api, namespace, wl_name)}")
    time.sleep(3)
    for pod in kube.pods_of_job(api, namespace, "train"):
        kube.patch(api, "Pod", pod["metadata"]["name"],
                   {"metadata": {"annotations": {kube.FAKE_HOLD_ANNOTATION: "false"}}}, namespace)
    wl = kube.wait_for_workload(api, namespace, "train", lambda w: kube.condition_is(w, "Finished"), timeout=60,
                                what="Finished=True")
    d = kube.wait_for(lambda: adiag(api, namespace, wl_name) if reason_of(api, namespace, wl_name) == "Finished"
                      else None, timeout=30, message=lambda: f"Finished diagnosis:\n{operator.tail()}")
    st = d["status"]
    steps = st["history"]
    assert not any(e.get("rebuilt") for e in steps), steps  # observed from the first sight on
    assert steps[0]["since"] == wl["metadata"]["creationTimestamp"] and steps[-1]["reason"] == "Finished", steps
    assert [e.get("until") for e in steps[:-1]] == [e["since"] for e in steps[1:]], steps  # no gaps, no overlaps
    quota = next(e for e in steps if e["reason"] == "WaitingForQuota")
    running = next(e for e in steps if e["reason"] == "Running")
    assert any(e["stage"] == "Scheduling" for e in steps[steps.index(quota):steps.index(running)]), steps

    def near(stamp: str | None, ctype: str) -> bool:
        cond = kube.condition(wl, ctype)
        assert cond is not None and stamp is not None
        start, end = parse_time(stamp), parse_time(cond["lastTransitionTime"])
        return start is not None and end is not None and abs((start - end).total_seconds()) <= 1

    assert near(quota["until"], "QuotaReserved"), (steps, wl["status"]["conditions"])
    assert near(running["since"], "PodsReady"), (steps, wl["status"]["conditions"])
    assert near(running["until"], "Finished") and near(st["since"], "Finished"), (steps, wl["status"]["conditions"])
    assert st["postMortem"].startswith("Where the time went: waited ") and f"for quota in ClusterQueue {cq}" in \
        st["postMortem"] and "; ran " in st["postMortem"], st["postMortem"]
    assert st["message"].endswith(st["postMortem"])

    def observed() -> float:
        for line in operator.metrics().splitlines():
            if line.startswith("kueue_doctor_time_in_reason_seconds_count{") and f'cluster_queue="{cq}"' in line \
                    and 'reason="WaitingForQuota"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    kube.wait_for(lambda: observed() >= 1, timeout=10, message="the time-in-reason histogram to observe the wait")
