"""AppWrappers through Kueue's workload.codeflare.dev/appwrapper integration, with CodeFlare's real AppWrapper
controller (github.com/project-codeflare/appwrapper), live.

The module fixture ``owner_kinds`` starts the AppWrapper controller (its webhooks off, as its dev mode; release
defaults otherwise) after installing its CRD, and restarts Kueue with frameworks batch/job +
workload.codeflare.dev/appwrapper, for this module only: Kueue's webhook suspends the AppWrapper and its Workload
(pod sets ``<name>-<i>``) holds the quota; once admitted, the AppWrapper controller creates the wrapped batch Job,
whose Pods carry ``workload.codeflare.dev/appwrapper: <name>``. The fake kubelet runs the Pods (pause semantics).
Snapshots are recorded as ``scenario-family-appwrapper-*.yaml`` (replayed offline by tests/unit/test_regressions.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import families, kube
from .kube import Resources, condition, condition_is, wait_for
from .test_operator import SA_USER, Operator, adiag, run_operator
from .test_scenarios import _pool, _queue

pytestmark = pytest.mark.e2e

CONTROLLERS = ("appwrapper",)
FRAMEWORKS = ["batch/job", "workload.codeflare.dev/appwrapper"]
AW = "workload.codeflare.dev/AppWrapper"
AW_LABEL = "workload.codeflare.dev/appwrapper"  # on the wrapped components and their Pods
ACCELERATOR = {"example.test/accelerator": "tpu"}  # a node label no fake node has


def _appwrapper(name: str, namespace: str, queue: str, pods: int, cpu: str,
                node_selector: dict[str, str] | None = None, *, backoff_limit: int = 0,
                annotations: dict[str, str] | None = None,
                pod_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """An AppWrapper wrapping one batch Job of ``pods`` Pods (its pod set inferred: template.spec.template,
    replicas = parallelism), as the AppWrapper samples write it; ``annotations`` are the AppWrapper's (its fault
    tolerance settings), ``pod_annotations`` its Pods' (the fake kubelet's)."""
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": families.IMAGE, "resources": {"requests": {"cpu": cpu}}}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    template: dict[str, Any] = {"spec": pod}
    if pod_annotations:
        template["metadata"] = {"annotations": pod_annotations}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"parallelism": pods, "completions": pods, "backoffLimit": backoff_limit, "template": template}}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {families.QUEUE_LABEL: queue}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "metadata": meta,
            "spec": {"components": [{"template": job}]}}


def _wl(api: Any, ns: str, name: str, ok: Any, what: str, timeout: float = 60) -> dict[str, Any]:
    return kube.wait_for_workload(api, ns, name, ok, timeout=timeout, what=what, kind="AppWrapper")


def _qr_message(w: dict[str, Any]) -> str:
    return str((condition(w, "QuotaReserved") or {}).get("message", ""))


def _pods(api: Any, namespace: str, appwrapper: str) -> list[dict[str, Any]]:
    return [p for p in kube.list_objects(api, "Pod", namespace)
            if p["metadata"].get("labels", {}).get(AW_LABEL) == appwrapper]


def _phase(api: Any, namespace: str, name: str) -> str:
    return str(((kube.get(api, AW, name, namespace) or {}).get("status") or {}).get("phase", ""))


@pytest.fixture(scope="module")
def operator(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    yield from run_operator(cluster, tmp_path_factory, "operator-appwrapper")


def test_appwrapper_admitted_and_running(cluster: Any, resources: Resources, namespace: str,
                                        owner_kinds: Any) -> None:
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    created = resources.create(_appwrapper("train", namespace, lq, 2, "1"))
    assert created["spec"].get("suspend") is True, "Kueue's AppWrapper webhook suspends it at creation"
    wl = _wl(api, namespace, "train", lambda w: condition_is(w, "PodsReady"), "PodsReady=True")
    assert wl["status"]["admission"]["clusterQueue"] == cq
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("train-0", 2)], wl["spec"]["podSets"]
    aw = kube.get(api, AW, "train", namespace)
    # unsuspended by Kueue: the field is gone (omitempty), not false
    assert aw is not None and "suspend" not in aw["spec"] and aw["status"]["phase"] == "Running", aw
    assert condition_is(aw, "PodsReady"), aw["status"]
    (job,) = kube.list_objects(api, "Job", namespace)
    assert job["metadata"]["labels"].get(AW_LABEL) == "train", job["metadata"]
    assert [r["kind"] for r in job["metadata"]["ownerReferences"]] == ["AppWrapper"], job["metadata"]
    pods = _pods(api, namespace, "train")
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods), pods
    objects = families.snapshot(api, [namespace])
    families.record("appwrapper-running", objects, "AppWrapper train (a Job of 2 x 1 cpu), admitted, Running")
    st = families.verdict(objects, namespace, owner=("AppWrapper", "train"), reason="Running", cause="PodsReady")
    assert st["pods"]["running"] == 2 and st["pods"]["expected"] == 2, st["pods"]


def test_appwrapper_exceeds_its_queue(cluster: Any, resources: Resources, namespace: str, owner_kinds: Any) -> None:
    """3 x 1 cpu in a 2 cpu ClusterQueue: Kueue never admits it; the AppWrapper stays suspended, nothing is created."""
    api = cluster.api_client
    rf, cq, lq = _queue(resources, namespace, {"cpu": "2"})
    resources.create(_appwrapper("greedy", namespace, lq, 3, "1"))
    wl = _wl(api, namespace, "greedy", lambda w: "maximum capacity" in _qr_message(w), "pending: maximum capacity")
    msg = _qr_message(wl)
    assert "pod set greedy-0" in msg and f"flavor {rf}" in msg, msg
    wait_for(lambda: (kube.get(api, AW, "greedy", namespace) or {}).get("status", {}).get("phase") == "Suspended",
             timeout=30, message="the AppWrapper controller to mark it Suspended")
    aw = kube.get(api, AW, "greedy", namespace)
    assert aw is not None and aw["spec"]["suspend"] is True, aw
    assert not kube.list_objects(api, "Job", namespace) and not kube.list_objects(api, "Pod", namespace)
    objects = families.snapshot(api, [namespace])
    families.record("appwrapper-exceeds-quota", objects, f"AppWrapper greedy: a Job of 3 x 1 cpu > {cq} 2 cpu")
    # the diagnosis is the AppWrapper's (families.verdict finds it by its ownerRef AppWrapper/greedy)
    st = families.verdict(objects, namespace, owner=("AppWrapper", "greedy"), reason="ExceedsMaxQuota",
                          cause="ExceedsNominalQuota")
    assert st["clusterQueue"] == cq and "Needs 3 cpu" in st["message"], st["message"]


def test_appwrapper_admitted_pods_unschedulable(cluster: Any, resources: Resources, namespace: str,
                                                owner_kinds: Any) -> None:
    """Quota fits; the wrapped Job's Pods ask for a node label no node has: admitted, its Pods Pending, and the
    AppWrapper controller's warmup grace period (5m by default) running towards a reset."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    resources.create(_appwrapper("pinned", namespace, lq, 2, "1", node_selector=ACCELERATOR))

    def unschedulable() -> list[dict[str, Any]] | None:
        pods = _pods(api, namespace, "pinned")
        stuck = [p for p in pods if (c := condition(p, "PodScheduled")) and c.get("reason") == "Unschedulable"]
        return pods if len(stuck) == 2 else None

    pods = wait_for(unschedulable, timeout=60, message="2 Pods of the AppWrapper's Job Unschedulable")
    wl = kube.workload_for(api, namespace, "pinned", "AppWrapper")
    assert wl is not None and condition_is(wl, "Admitted") and not condition_is(wl, "PodsReady")
    wait_for(lambda: all(any(e.get("reason") == "FailedScheduling"
                             for e in kube.events_for(api, namespace, p["metadata"]["name"], kind="Pod"))
                         for p in pods), timeout=30, message="the scheduler's FailedScheduling events")
    aw = kube.get(api, AW, "pinned", namespace)
    assert aw is not None and aw["status"]["phase"] == "Running" and not condition_is(aw, "PodsReady"), aw["status"]
    objects = families.snapshot(api, [namespace])
    families.record("appwrapper-pods-unschedulable", objects,
                    f"AppWrapper pinned admitted; its Job's nodeSelector matches no node of pool {pool}")
    st = families.verdict(objects, namespace, owner=("AppWrapper", "pinned"), reason="PodsUnschedulable",
                          cause="NodeSelectorMismatch")
    assert st["pods"]["expected"] == 2 and st["pods"]["running"] == 0, st["pods"]
    assert st["actionBy"] == "WorkloadOwner", st
    assert f"AppWrapper {namespace}/pinned resets itself at about" in st["message"], st["message"]
    assert "warmupGracePeriodDuration 5m" in st["message"], st["message"]
    (remedy,) = st["remedies"]  # the field inside the AppWrapper's component, and how to change it
    assert remedy["field"] == "spec.components[0].template.spec.template.spec.nodeSelector[example.test/accelerator]"
    assert "components are immutable" in remedy["message"], remedy


def test_appwrapper_resetting_after_a_pod_failure(cluster: Any, resources: Resources, namespace: str,
                                                 owner_kinds: Any) -> None:
    """A Pod of the wrapped Job fails (exit 1) 8s after it started, once the AppWrapper is PodsReady. The controller
    is not told (its Pod watch maps only Succeeded Pods): it sees the failure at its next check, a minute after
    PodsReady. The Job would retry it (backoffLimit 3), but the controller counts the failed Pod, which the Job
    keeps: after its failure grace period (5s here) it resets the AppWrapper, deletes the Job and its Pods, and waits
    its retry pause (10m here) before redeploying. Kueue's Workload stays admitted throughout. Both moments are
    recorded: the failure not yet seen, and the reset."""
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    resources.create(_appwrapper(
        "flaky", namespace, lq, 1, "1", backoff_limit=3,
        annotations={"workload.codeflare.dev.appwrapper/failureGracePeriodDuration": "5s",
                     "workload.codeflare.dev.appwrapper/retryPausePeriodDuration": "10m"},
        pod_annotations={kube.FAKE_RUN_SECONDS_ANNOTATION: "8", kube.FAKE_EXIT_CODE_ANNOTATION: "1"}))

    def failed_unseen() -> bool:
        aw = kube.get(api, AW, "flaky", namespace) or {}
        return condition_is(aw, "PodsReady") and not condition_is(aw, "Unhealthy") and any(
            p["status"].get("phase") == "Failed" for p in _pods(api, namespace, "flaky"))

    wait_for(failed_unseen, timeout=40, message="a failed Pod the AppWrapper controller has not marked yet")
    objects = families.snapshot(api, [namespace])
    families.record("appwrapper-pod-failed-unseen", objects,
                    "AppWrapper flaky PodsReady; its Job's Pod failed, the controller's 1m check not come yet")
    st = families.verdict(objects, namespace, owner=("AppWrapper", "flaky"), reason="ContainersNotStarting",
                          cause="PodsFailed")
    assert st["actionBy"] == "Nobody" and "sees them at its next check (every 1m" in st["message"], st
    wait_for(lambda: _phase(api, namespace, "flaky") == "Resetting" and not _pods(api, namespace, "flaky")
             and not kube.list_objects(api, "Job", namespace), timeout=90,
             message=lambda: f"the AppWrapper Resetting, its Job and Pods deleted: {_phase(api, namespace, 'flaky')}")
    aw = kube.get(api, AW, "flaky", namespace)
    assert aw is not None and aw["status"].get("resettingCount") == 1, aw["status"]
    unhealthy = condition(aw, "Unhealthy") or {}
    assert (unhealthy.get("status"), unhealthy.get("reason")) == ("True", "FoundFailedPods"), aw["status"]
    wl = kube.workload_for(api, namespace, "flaky", "AppWrapper")
    assert wl is not None and condition_is(wl, "Admitted") and wl["status"]["admission"]["clusterQueue"] == cq
    objects = families.snapshot(api, [namespace])
    families.record("appwrapper-resetting", objects,
                    "AppWrapper flaky: its Job's Pod failed, failure grace 5s, reset 1 of 3, retry pause 10m")
    st = families.verdict(objects, namespace, owner=("AppWrapper", "flaky"), reason="PodsNotCreated",
                          cause="PodsPending")
    assert st["actionBy"] == "Nobody", st
    assert "is resetting, reset 1 of 3" in st["message"] and "10m after the failure" in st["message"], st["message"]
    assert "a Job keeps its failed Pods" in st["message"], st["message"]  # why the Job's backoffLimit did not help


def test_appwrapper_failed_at_its_retry_limit(cluster: Any, resources: Resources, namespace: str,
                                             owner_kinds: Any) -> None:
    """retryLimit 0: the first failed Pod fails the AppWrapper once its failure grace period (2s here) ends; the
    controller deletes its Job, and Kueue finishes the Workload with its fixed "AppWrapper failed"."""
    api = cluster.api_client
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, _pool(resources, cpu="4"))
    resources.create(_appwrapper(
        "doomed", namespace, lq, 1, "1", backoff_limit=3,
        annotations={"workload.codeflare.dev.appwrapper/failureGracePeriodDuration": "2s",
                     "workload.codeflare.dev.appwrapper/retryLimit": "0"},
        pod_annotations={kube.FAKE_RUN_SECONDS_ANNOTATION: "1", kube.FAKE_EXIT_CODE_ANNOTATION: "1"}))
    wl = _wl(api, namespace, "doomed", lambda w: condition_is(w, "Finished"), "Finished", timeout=90)
    assert (condition(wl, "Finished") or {}).get("message") == "AppWrapper failed", wl["status"]
    aw = kube.get(api, AW, "doomed", namespace)
    assert aw is not None and aw["status"]["phase"] == "Failed", aw["status"]
    objects = families.snapshot(api, [namespace])
    families.record("appwrapper-failed", objects,
                    "AppWrapper doomed: its Job's Pod failed with retryLimit 0: Failed, Workload Finished")
    st = families.verdict(objects, namespace, owner=("AppWrapper", "doomed"), reason="Finished", cause="Failed")
    assert "FoundFailedPods" in st["message"] and "retry limit (0" in st["message"], st["message"]


def test_the_operator_diagnoses_appwrappers_and_writes_nothing_but_its_own_objects(
        cluster: Any, resources: Resources, namespace: str, owner_kinds: Any, operator: Operator) -> None:
    """The operator, with the manifests' least-privilege ServiceAccount, lists and watches AppWrappers and links
    their Pods by label: one over its queue's maximum, one running; its AdmissionDiagnoses name the AppWrapper, and
    the audit log shows it wrote nothing else."""
    api = cluster.api_client
    _, cq, lq = _queue(resources, namespace, {"cpu": "1"}, _pool(resources, cpu="4"))
    resources.create(_appwrapper("big", namespace, lq, 2, "1"))
    resources.create(_appwrapper("small", namespace, lq, 1, "500m"))
    names = {aw: _wl(api, namespace, aw, lambda w: bool(condition(w, "QuotaReserved")), "QuotaReserved written")
             ["metadata"]["name"] for aw in ("big", "small")}
    want = {"big": "ExceedsMaxQuota", "small": "Running"}

    def verdicts() -> dict[str, Any]:
        return {aw: (d := adiag(api, namespace, wl)) and d["status"].get("reason") for aw, wl in names.items()}

    wait_for(lambda: verdicts() == want, timeout=90, message=lambda: f"the operator's verdicts {want}, got "
             f"{verdicts()}:\n{operator.tail()}")
    for aw, wl in names.items():
        d = adiag(api, namespace, wl)
        assert d is not None and (d["spec"]["ownerRef"]["kind"], d["spec"]["ownerRef"]["name"]) == ("AppWrapper", aw)
    big = adiag(api, namespace, names["big"])
    assert big is not None and big["status"]["clusterQueue"] == cq and "cpu" in big["status"]["message"], big
    small = adiag(api, namespace, names["small"])
    wait_for(lambda: ((adiag(api, namespace, names["small"]) or {}).get("status", {}).get("pods") or {}).get(
        "running") == 1, timeout=60, message=lambda: f"the operator to count the AppWrapper's running Pod: "
        f"{(adiag(api, namespace, names['small']) or {}).get('status')}")
    assert small is not None
    touched = {(w["objectRef"].get("apiGroup", ""), w["objectRef"]["resource"])
               for w in cluster.writes_by_user(SA_USER)}
    assert touched == {("kueue-doctor.dev", "admissiondiagnoses")}, touched
