"""Owners Kueue never took, and Workloads admitted but not running: the real cluster's side.

Each test makes the situation happen on the real control plane (Kueue v0.19.2, Kubernetes v1.36.3),
asserts what the objects really look like (conditions, events, managedFields, audit log), records
the snapshot (``KUEUE_DOCTOR_RECORD_FIXTURES=1`` -> ``tests/e2e/fixtures/scenario-*.yaml``) and
then asserts the engine's verdict. The snapshot adds what ``cluster_snapshot`` does not list yet:
the JobSets of the test's namespaces and Kueue's ConfigMap ``kueue-system/kueue-manager-config``.

The verdicts: ``NoWorkload``/``IntegrationNotEnabled``, ``NoWorkload``/``NamespaceNotManaged``,
``JobSuspended``/``SuspendedByOtherManager``, ``GhostReservation``, ``Evicted``/``RequeueLoop``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from tests.builders import ClusterQueue, Job, LocalQueue, Namespace, ResourceFlavor

from . import kube
from .conftest import ClusterHandle
from .kube import Resources, condition, condition_is, lc, wait_for, wait_for_workload
from .test_scenarios import _diagnose, _pool, _queue, _snapshot

pytestmark = pytest.mark.e2e

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: What the Owner-scenario fixtures keep managedFields for (who set spec.suspend, and when).
OWNER_KINDS = ("Job", "jobset.x-k8s.io/JobSet")


# ---- snapshot, fixtures, verdicts ------------------------------------------------------------


def _owner_snapshot(api: Any, namespaces: Iterable[str]) -> list[dict[str, Any]]:
    """``_snapshot`` + the namespaces' JobSets + Kueue's Configuration ConfigMap (taken directly)."""
    namespaces = list(namespaces)
    objects = _snapshot(api, namespaces)
    if _jobset_served(api):
        for ns in namespaces:
            objects += kube.list_objects(api, "jobset.x-k8s.io/JobSet", ns)
    cm = kube.get(api, "ConfigMap", lc.KUEUE_CONFIG_MAP, lc.KUEUE_NAMESPACE)
    assert cm is not None, "the harness publishes kueue-system/kueue-manager-config"
    objects.append(cm)
    return objects


def _jobset_served(api: Any) -> bool:
    try:
        kube.request_json(api, "GET", "/apis/jobset.x-k8s.io/v1alpha2")
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return False
        raise
    return True


def _record(name: str, objects: list[dict[str, Any]], note: str) -> None:
    kube.record_fixture(f"scenario-{name}", objects, note=note, keep_managed_fields=OWNER_KINDS)


def _diagnosis_of(diagnoses: list[dict[str, Any]], namespace: str, *, owner: tuple[str, str] | None = None,
                  workload: str | None = None) -> dict[str, Any] | None:
    for d in diagnoses:
        if d["metadata"].get("namespace") != namespace:
            continue
        spec = d.get("spec", {})
        ref = spec.get("ownerRef") or {}
        if owner is not None and (ref.get("kind"), ref.get("name")) == owner:
            return d
        if workload is not None and (spec.get("workloadRef") or {}).get("name") == workload:
            return d
    return None


def _expect_verdict(objects: list[dict[str, Any]], namespace: str, *, reason: str | Iterable[str] | None,
                    cause: str, owner: tuple[str, str] | None = None, workload: str | None = None) -> dict[str, Any]:
    """The engine's verdict on the owner (or Workload). ``reason=None``: any reason (only the cause counts)."""
    reasons = [] if reason is None else [reason] if isinstance(reason, str) else list(reason)
    # as `explain -f` reads the recorded snapshot (no grace period: a dump's time is its newest timestamp);
    # the operator's 30 s grace period is waited out by tests/e2e/test_operator.py
    diagnoses = diagnose_objects(objects, grace=timedelta(0))
    for x in diagnoses:
        AdmissionDiagnosis.model_validate(x)
    d = _diagnosis_of(diagnoses, namespace, owner=owner, workload=workload)
    assert d is not None, (f"no diagnosis for {owner or workload} in {namespace}: "
                           f"{[(x['metadata']['name'], x['status'].get('reason')) for x in diagnoses]}")
    st = d["status"]
    assert (not reasons or st["reason"] in reasons) and st["cause"] == cause, st
    return st


# ---- small helpers ---------------------------------------------------------------------------


def _ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _kueue_writes(cluster: ClusterHandle, resource: str, namespace: str, name: str | None = None) -> list[dict[str, Any]]:
    """Audit events of writes by the Kueue manager on one resource (in one namespace)."""
    out = []
    for ev in cluster.writes_by_user(lc.KUEUE_USER):
        ref = ev.get("objectRef", {})
        if ref.get("resource") == resource and ref.get("namespace") == namespace and name in (None, ref.get("name")):
            out.append(ev)
    return out


def _kueue_events(api: Any, namespace: str, name: str, kind: str) -> list[tuple[str, str, str]]:
    evs = kube.events_for(api, namespace, name, kind=kind)
    return [(e.get("type", ""), e.get("reason", ""), e.get("message", "")) for e in evs
            if "kueue" in (e.get("reportingComponent") or e.get("source", {}).get("component") or "")]


def _control_job(resources: Resources, api: Any, cq: str) -> dict[str, Any]:
    """A plain Job through the same ClusterQueue, in a namespace of its own (kept out of the snapshot):
    once its Workload exists, Kueue is up and reconciling Jobs created after the one under test."""
    ns = kube.unique_name("t-control")
    resources.create(Namespace(ns).manifest())
    resources.create(LocalQueue("main", ns, cq).manifest())
    resources.create(Job("control", ns).queue("main").request("cpu", "100m").manifest())
    return wait_for_workload(api, ns, "control", lambda w: bool(w), what="to exist")


def _stays(check: Callable[[], bool], seconds: float, what: str, interval: float = 0.5) -> None:
    """Assert ``check()`` holds on every poll for ``seconds`` (a negative fact needs some time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), f"{what} stopped holding"
        time.sleep(interval)


def _jobset(name: str, namespace: str, queue: str) -> dict[str, Any]:
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m"}}}],
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {
            "spec": {"parallelism": 1, "completions": 1, "template": {"spec": pod}}}}]},
    }


# ---- 1. an owner kind whose integration is off -----------------------------------------------


def test_jobset_with_queue_name_but_integration_disabled(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """Kueue runs with frameworks [batch/job]: a JobSet with the queue-name label is never managed."""
    api = cluster.api_client
    if not _jobset_served(api):
        pytest.skip("no JobSet CRD in this cluster (the local cluster installs it)")
    cfg = yaml.safe_load(kube.get(api, "ConfigMap", lc.KUEUE_CONFIG_MAP, lc.KUEUE_NAMESPACE)["data"][  # type: ignore[index]
        lc.KUEUE_CONFIG_MAP_KEY])
    if "jobset.x-k8s.io/jobset" in cfg["integrations"]["frameworks"]:
        pytest.skip("Kueue manages JobSets in this cluster")
    if cluster.local is not None:
        assert cfg["integrations"]["frameworks"] == ["batch/job"], cfg["integrations"]
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"})
    created = resources.create(_jobset("trainer", namespace, lq))
    assert "suspend" not in created["spec"], created["spec"]  # no JobSet webhook defaults it, Kueue's neither
    _control_job(resources, api, cq)
    _stays(lambda: kube.workload_for(api, namespace, "trainer", "JobSet") is None, 3,
           "no Workload for the JobSet")
    js = kube.get(api, "jobset.x-k8s.io/JobSet", "trainer", namespace)
    assert js is not None
    assert js["metadata"]["labels"][QUEUE_LABEL] == lq
    assert js["metadata"]["generation"] == 1 and js["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert "status" not in js or not js["status"], js.get("status")  # no JobSet controller runs either
    assert [m["manager"] for m in js["metadata"]["managedFields"]] == [m["manager"] for m in created["metadata"][
        "managedFields"]], js["metadata"]["managedFields"]
    assert not _kueue_writes(cluster, "jobsets", namespace), "Kueue wrote to the JobSet"
    assert not [w for w in kube.list_objects(api, "Workload", namespace)
                if any(r["kind"] == "JobSet" for r in w["metadata"].get("ownerReferences", []))]
    objects = _owner_snapshot(api, [namespace])
    _record("no-workload-integration-disabled", objects,
            "JobSet with queue-name, Kueue frameworks [batch/job]: no Workload ever")
    _expect_verdict(objects, namespace, owner=("JobSet", "trainer"), reason="NoWorkload",
                    cause="IntegrationNotEnabled")


# ---- 2. a namespace outside managedJobsNamespaceSelector -------------------------------------


def test_job_in_a_namespace_kueue_does_not_manage(cluster: ClusterHandle, resources: Resources) -> None:
    """The webhook suspends a queue-name Job anywhere; the reconciler skips the namespace: stuck."""
    api = cluster.api_client
    cfg = yaml.safe_load(kube.get(api, "ConfigMap", lc.KUEUE_CONFIG_MAP, lc.KUEUE_NAMESPACE)["data"][  # type: ignore[index]
        lc.KUEUE_CONFIG_MAP_KEY])
    exprs = cfg["managedJobsNamespaceSelector"]["matchExpressions"]
    assert {"key": lc.UNMANAGED_NAMESPACE_LABEL, "operator": "DoesNotExist"} in exprs, exprs
    ns = kube.unique_name("t-unmanaged")
    resources.create(Namespace(ns).label(lc.UNMANAGED_NAMESPACE_LABEL, "true").manifest())
    rf = str(resources.create(ResourceFlavor(kube.unique_name("rf")).manifest())["metadata"]["name"])
    cq = str(resources.create(ClusterQueue(kube.unique_name("cq")).quotas({rf: {"cpu": "4"}}).manifest())[
        "metadata"]["name"])  # namespaceSelector {} : the ClusterQueue itself would take both namespaces
    resources.create(LocalQueue("main", ns, cq).manifest())
    created = resources.create(Job("stuck", ns).queue("main").request("cpu", "100m").manifest())
    assert created["spec"]["suspend"] is True, "Kueue's mutating webhook suspends it (queue-name label)"
    _control_job(resources, api, cq)  # the same ClusterQueue, a managed namespace: that one gets a Workload
    _stays(lambda: not kube.list_objects(api, "Workload", ns), 3, "no Workload in the unmanaged namespace")
    job = kube.get(api, "Job", "stuck", ns)
    assert job is not None and job["spec"]["suspend"] is True
    assert condition_is(job, "Suspended"), job.get("status")  # the Job controller: JobSuspended
    assert not kube.pods_of_job(api, ns, "stuck")
    assert not _kueue_writes(cluster, "jobs", ns), "Kueue wrote to the Job after its creation"
    assert not _kueue_events(api, ns, "stuck", "Job")
    lq = kube.get(api, "LocalQueue", "main", ns)
    assert lq is not None and lq.get("status", {}).get("pendingWorkloads", 0) == 0, lq.get("status")
    objects = _owner_snapshot(api, [ns])
    _record("no-workload-namespace-not-managed", objects,
            "queue-name Job in a namespace outside managedJobsNamespaceSelector: suspended, no Workload")
    _expect_verdict(objects, ns, owner=("Job", "stuck"), reason="NoWorkload", cause="NamespaceNotManaged")


# ---- 3. Kueue's Configuration as a real install keeps it -------------------------------------


def test_kueue_configuration_is_published_as_the_release_config_map(cluster: ClusterHandle) -> None:
    if cluster.local is None:
        pytest.skip("an external cluster keeps its own Configuration")
    cm = kube.get(cluster.api_client, "ConfigMap", lc.KUEUE_CONFIG_MAP, lc.KUEUE_NAMESPACE)
    assert cm is not None
    text = cm["data"][lc.KUEUE_CONFIG_MAP_KEY]
    assert text == (cluster.local.workdir / "kueue-config.yaml").read_text(), "the same bytes Kueue reads"
    cfg = yaml.safe_load(text)
    assert (cfg["apiVersion"], cfg["kind"], cfg["namespace"]) == (
        "config.kueue.x-k8s.io/v1beta2", "Configuration", lc.KUEUE_NAMESPACE)
    assert cfg["waitForPodsReady"]["timeout"] == cluster.local.kueue.wait_for_pods_ready_timeout


# ---- 4. admitted, then suspended again by someone else ---------------------------------------

POLICY_LABEL = "kueue-doctor.test/suspend-policy"
POLICY_PROBE = "kueue-doctor.test/policy-probe"


def _hold_suspend_policy(resources: Resources, namespace: str) -> tuple[str, Callable[[], None]]:
    """A ValidatingAdmissionPolicy denying spec.suspend true -> false on labelled Jobs of a namespace."""
    api = resources.api
    name = kube.denying_policy(resources, "hold-suspend", {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "objectSelector": {"matchLabels": {POLICY_LABEL: "hold"}},
            "resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["UPDATE"],
                               "resources": ["jobs"]}],
        },
        "validations": [
            {"expression": f"!has(object.metadata.annotations) || !('{POLICY_PROBE}' in object.metadata.annotations)",
             "message": "policy probe"},
            {"expression": "!(oldObject.spec.suspend == true && object.spec.suspend == false)",
             "message": "policy-controller: this Job stays suspended"},
        ],
    })

    def remove() -> None:
        kube.delete(api, "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding", name)
        kube.delete(api, "admissionregistration.k8s.io/ValidatingAdmissionPolicy", name)

    return name, remove


def _policy_active(api: Any, namespace: str, job: str) -> bool:
    try:
        kube.request_json(api, "PATCH", kube.KINDS["Job"].item(job, namespace),
                          {"metadata": {"annotations": {POLICY_PROBE: "1"}}},
                          content_type="application/merge-patch+json", query={"dryRun": "All"})
    except Exception as exc:
        return "policy probe" in str(getattr(exc, "body", exc))
    return False


def test_running_job_suspended_again_by_another_manager(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    resources.create(Job("held", namespace).queue(lq).request("cpu", "1").label(POLICY_LABEL, "hold").manifest())
    wl = wait_for_workload(api, namespace, "held", lambda w: condition_is(w, "PodsReady"), what="PodsReady=True")
    admitted_at = _ts(condition(wl, "Admitted")["lastTransitionTime"])  # type: ignore[index]
    before = _kueue_events(api, namespace, "held", "Job")
    assert [r for _, r, _ in before] == ["CreatedWorkload", "Started"], before
    _, remove_policy = _hold_suspend_policy(resources, namespace)
    wait_for(lambda: _policy_active(api, namespace, "held"), timeout=20, message="the policy to take effect")

    t0 = time.monotonic()
    kube.request_json(api, "PATCH", kube.KINDS["Job"].item("held", namespace), {"spec": {"suspend": True}},
                      content_type="application/merge-patch+json", query={"fieldManager": "policy-controller"})
    wait_for(lambda: not kube.pods_of_job(api, namespace, "held"), timeout=30, message="the Job's Pods to go")
    pods_gone = time.monotonic() - t0
    wl = wait_for_workload(api, namespace, "held", lambda w: condition_is(w, "PodsReady", "False"), timeout=30,
                           what="PodsReady=False")
    # Kueue tries to start the admitted Job again; the policy denies each try.
    denied = wait_for(lambda: [e for e in _kueue_writes(cluster, "jobs", namespace, "held")
                               if e.get("responseStatus", {}).get("code") in (403, 422)], timeout=30,
                      message="a Kueue write to the Job denied by the policy")
    job = kube.get(api, "Job", "held", namespace)
    assert job is not None and job["spec"]["suspend"] is True
    assert condition_is(job, "Suspended"), job.get("status")
    assert condition_is(wl, "Admitted") and condition_is(wl, "QuotaReserved"), wl["status"]["conditions"]
    assert not condition_is(wl, "Evicted"), wl["status"]["conditions"]
    owners = [m for m in job["metadata"]["managedFields"] if "f:suspend" in m.get("fieldsV1", {}).get("f:spec", {})]
    assert [m["manager"] for m in owners] == ["policy-controller"], job["metadata"]["managedFields"]
    assert owners[0]["operation"] == "Update" and _ts(owners[0]["time"]) >= admitted_at, owners
    assert "this Job stays suspended" in denied[0]["responseStatus"]["message"], denied[0]["responseStatus"]
    assert _kueue_events(api, namespace, "held", "Job") == before, "Kueue retries silently: no new event"
    _stays(lambda: condition_is(kube.workload_for(api, namespace, "held"), "Admitted"), 3,
           "the Workload stays Admitted")
    objects = _owner_snapshot(api, [namespace])
    _record("job-suspended-by-other-manager", objects,
            "admitted Job set suspend=true by fieldManager policy-controller; a policy keeps it suspended")
    facts = {"pods_gone_s": round(pods_gone, 1), "kueue_denied_writes": len(denied),
             "denied": (denied[0]["verb"], denied[0]["responseStatus"]),
             "suspend_owner": owners[0], "admitted_at": str(admitted_at),
             "wl_conditions": [(c["type"], c["status"], c["reason"]) for c in wl["status"]["conditions"]],
             "job_conditions": [(c["type"], c["status"], c["reason"]) for c in job["status"].get("conditions", [])],
             "cq": cq}
    print("suspended-by-other-manager facts:", facts)

    remove_policy()
    wait_for(lambda: not _policy_active(api, namespace, "held"), timeout=20, message="the policy to go")
    kube.patch(api, "Job", "held", {"metadata": {"annotations": {"kueue-doctor.local/poke": "1"}}}, namespace)
    t1 = time.monotonic()
    wait_for(lambda: kube.get(api, "Job", "held", namespace)["spec"]["suspend"] is False,  # type: ignore[index]
             timeout=30, message="Kueue to start the admitted Job again once the policy is gone")
    print("restarted by Kueue after the policy went:", round(time.monotonic() - t1, 1), "s;",
          _kueue_events(api, namespace, "held", "Job"))
    _expect_verdict(objects, namespace, owner=("Job", "held"), reason="JobSuspended",
                    cause="SuspendedByOtherManager")


# ---- 5. the owner deleted, the Workload left behind ------------------------------------------


def test_job_still_managed_by_multikueue_in_a_queue_without_its_check(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """A Job carrying spec.managedBy: kueue.x-k8s.io/multikueue (a manifest exported from a MultiKueue manager, or
    defaulted while its queue had the check) in a plain queue: Kueue admits and unsuspends it, the Job controller
    skips it, nobody creates its Pods (Kueue v0.19.2, Kubernetes v1.36.3: JobManagedBy on)."""
    api = cluster.api_client
    pool = _pool(resources, cpu="4")
    _, _cq, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    job = Job("exported", namespace).queue(lq).request("cpu", "1").manifest()
    job["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    resources.create(job)
    wait_for_workload(api, namespace, "exported", lambda w: condition_is(w, "Admitted"), what="Admitted=True")
    wait_for(lambda: kube.get(api, "Job", "exported", namespace)["spec"]["suspend"] is False,  # type: ignore[index]
             timeout=30, message="Kueue to unsuspend the admitted Job")
    _stays(lambda: not kube.pods_of_job(api, namespace, "exported"), 5, "no Pod is created")
    stored = kube.get(api, "Job", "exported", namespace)
    assert stored is not None and stored["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue", stored["spec"]
    assert not stored.get("status", {}).get("startTime"), stored.get("status")
    objects = _owner_snapshot(api, [namespace])
    _record("job-managed-by-multikueue-in-a-plain-queue", objects,
            "Job with spec.managedBy kueue.x-k8s.io/multikueue admitted by a ClusterQueue without a MultiKueue check")
    st = _expect_verdict(objects, namespace, reason="PodsNotCreated", cause="ExternallyManaged",
                         owner=("Job", "exported"))
    assert st["actionBy"] == "WorkloadOwner", st
    assert "spec.managedBy: kueue.x-k8s.io/multikueue" in st["message"], st["message"]


def _running_job(resources: Resources, api: Any, namespace: str, name: str) -> tuple[dict[str, Any], str]:
    pool = _pool(resources, cpu="4")
    _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, pool)
    resources.create(Job(name, namespace).queue(lq).request("cpu", "1").manifest())
    return wait_for_workload(api, namespace, name, lambda w: condition_is(w, "PodsReady"), what="PodsReady"), cq


def _cq_admitted(api: Any, cq: str) -> int:
    return int((kube.get(api, "ClusterQueue", cq) or {}).get("status", {}).get("admittedWorkloads", 0))


def test_job_deleted_with_orphan_propagation_kueue_finishes_the_workload(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """Kueue 0.19 (FinishOrphanedWorkloads, Beta, on): no ghost, the Workload is Finished/OwnerNotFound."""
    api = cluster.api_client
    wl, cq = _running_job(resources, api, namespace, "gone")
    name = wl["metadata"]["name"]
    t0 = time.monotonic()
    kube.delete(api, "Job", "gone", namespace, propagation="Orphan")
    wl = wait_for(lambda: (w := kube.get(api, "Workload", name, namespace)) and condition_is(w, "Finished") and w,
                  timeout=30, message="Kueue to finish the orphaned Workload")
    finished_after = time.monotonic() - t0
    fin = condition(wl, "Finished")
    assert fin is not None and (fin["reason"], fin["message"]) == (
        "OwnerNotFound", "The workload's owner no longer exists"), fin
    wait_for(lambda: _cq_admitted(api, cq) == 0, timeout=30, message="the ClusterQueue to release the quota")
    wl = kube.get(api, "Workload", name, namespace)
    assert wl is not None
    print("orphan-delete facts:", {"finished_after_s": round(finished_after, 1),
                                   "ownerReferences": wl["metadata"].get("ownerReferences"),
                                   "finalizers": wl["metadata"].get("finalizers"),
                                   "pods": [(p["metadata"]["name"], p["status"].get("phase"),
                                             p["metadata"].get("ownerReferences"))
                                            for p in kube.pods_of_job(api, namespace, "gone")]})
    assert kube.get(api, "Job", "gone", namespace) is None
    objects = _owner_snapshot(api, [namespace])
    _record("owner-deleted-workload-finished", objects,
            "Job deleted with propagationPolicy Orphan: Kueue finishes the Workload (OwnerNotFound)")
    d = _diagnosis_of(_diagnose(objects), namespace, workload=name)
    assert d is not None
    st = d["status"]
    assert (st["stage"], st["reason"], st["cause"], st["actionBy"]) == ("Finished", "Finished", "OwnerNotFound",
                                                                         "Nobody"), st


def test_ghost_reservation_when_kueue_does_not_finish_orphans(
    cluster: ClusterHandle, resources: Resources, namespace: str
) -> None:
    """FinishOrphanedWorkloads off (a real setting; Kueue < 0.18 behaves so): the quota stays held."""
    api = cluster.api_client
    if cluster.local is None:
        pytest.skip("restarts Kueue with a feature gate off: local cluster only")
    gates = {**cluster.local.kueue.feature_gates, "FinishOrphanedWorkloads": False}
    with cluster.kueue_settings(feature_gates=gates):
        wl, cq = _running_job(resources, api, namespace, "ghost")
        name = wl["metadata"]["name"]
        kube.delete(api, "Job", "ghost", namespace, propagation="Orphan")
        wait_for(lambda: kube.get(api, "Job", "ghost", namespace) is None, timeout=30, message="the Job to go")
        wl = wait_for(lambda: (w := kube.get(api, "Workload", name, namespace)) and
                      not w["metadata"].get("ownerReferences") and w, timeout=30,
                      message="the garbage collector to orphan the Workload")
        _stays(lambda: condition_is(kube.get(api, "Workload", name, namespace), "Admitted"), 5,
               "the ownerless Workload stays Admitted")
        wl = kube.get(api, "Workload", name, namespace)
        assert wl is not None and not condition_is(wl, "Finished"), wl["status"]["conditions"]
        assert condition_is(wl, "QuotaReserved") and wl["status"]["admission"]["clusterQueue"] == cq
        assert wl["metadata"]["labels"].get("kueue.x-k8s.io/job-uid"), wl["metadata"]["labels"]
        assert _cq_admitted(api, cq) == 1, "the ClusterQueue still counts the ghost"
        objects = _owner_snapshot(api, [namespace])
        _record("ghost-reservation", objects,
                "Job deleted with Orphan while FinishOrphanedWorkloads=false: ownerless Workload keeps its quota")
        print("ghost facts:", {"finalizers": wl["metadata"].get("finalizers"),
                               "cq_usage": kube.get(api, "ClusterQueue", cq)["status"].get("flavorsUsage"),  # type: ignore[index]
                               "pods": [(p["metadata"]["name"], p["status"].get("phase"))
                                        for p in kube.list_objects(api, "Pod", namespace)]})
    # Kueue back on its defaults: the restarted manager finishes the ghost.
    t0 = time.monotonic()
    wl = wait_for(lambda: (w := kube.get(api, "Workload", name, namespace)) and condition_is(w, "Finished") and w,
                  timeout=60, message="the restarted Kueue (gate on) to finish the ghost")
    print("ghost finished after restart:", round(time.monotonic() - t0, 1), condition(wl, "Finished"))
    _expect_verdict(objects, namespace, workload=name, reason=None,
                    cause="GhostReservation")


# ---- 6. evicted over and over: PodsReadyTimeout ----------------------------------------------


def test_requeue_loop_pods_ready_timeout(cluster: ClusterHandle, resources: Resources, namespace: str) -> None:
    """Quota fits, the Pods can never be placed: waitForPodsReady evicts, requeues, admits, again."""
    api = cluster.api_client
    strategy = {"timestamp": "Eviction", "backoffBaseSeconds": 5, "backoffMaxSeconds": 10}
    with cluster.kueue_settings(wait_for_pods_ready_timeout="5s", pods_ready_requeuing_strategy=strategy):
        _pool(resources, cpu="4")
        _, cq, lq = _queue(resources, namespace, {"cpu": "4"}, kube.unique_name("nowhere"))
        resources.create(Job("looping", namespace).queue(lq).request("cpu", "1").manifest())
        t0 = time.monotonic()
        seen: list[tuple[float, int, str]] = []

        def count_at_least_3_and_evicted(w: Mapping[str, Any]) -> bool:
            count = int((w.get("status", {}).get("requeueState") or {}).get("count", 0))
            ev = condition(w, "Evicted") or {}
            if not seen or seen[-1][1] != count:
                seen.append((round(time.monotonic() - t0, 1), count, str(ev.get("reason"))))
            return count >= 3 and ev.get("status") == "True" and ev.get("reason") == "PodsReadyTimeout"

        wl = wait_for_workload(api, namespace, "looping", count_at_least_3_and_evicted, timeout=180,
                               what="requeueState.count >= 3 and Evicted=True/PodsReadyTimeout")
        took = time.monotonic() - t0
        evicting = _owner_snapshot(api, [namespace])
        _record("requeue-loop-evicting", evicting,
                "waitForPodsReady 5s, backoff 5-10s, Pods unschedulable: the 3rd PodsReadyTimeout eviction, "
                "quota not yet released")
        evicted = condition(wl, "Evicted")
        assert evicted is not None and evicted["reason"] == "PodsReadyTimeout", evicted
        assert evicted["message"].startswith("Exceeded the PodsReady timeout"), evicted
        assert wl["status"]["requeueState"]["count"] >= 3, wl["status"]
        assert wl["status"]["schedulingStats"]["evictions"] == [
            {"count": wl["status"]["requeueState"]["count"], "reason": "PodsReadyTimeout",
             "underlyingCause": "WaitForStart"}], wl["status"]["schedulingStats"]

        # then, until requeueAt: quota released, Requeued=False, the Job suspended again
        def in_backoff(w: Mapping[str, Any]) -> bool:
            rq = condition(w, "Requeued") or {}
            return (condition_is(w, "QuotaReserved", "False") and rq.get("status") == "False"
                    and int(w["status"].get("requeueState", {}).get("count", 0)) >= 3)

        wl = wait_for_workload(api, namespace, "looping", in_backoff, timeout=30, what="in backoff")
        backoff = _owner_snapshot(api, [namespace])
        _record("requeue-loop-backoff", backoff,
                "waitForPodsReady 5s, backoff 5-10s: evicted 3 times by PodsReadyTimeout, waiting for requeueAt")
        requeue_at = _ts(wl["status"]["requeueState"]["requeueAt"])
        rq = condition(wl, "Requeued")
        assert rq is not None and requeue_at > _ts(rq["lastTransitionTime"]), (rq, requeue_at)
        job = kube.get(api, "Job", "looping", namespace)
        assert job is not None and job["spec"]["suspend"] is True
        print("requeue-loop facts:", {"took_s": round(took, 1), "counts": seen,
                                      "requeueState": wl["status"]["requeueState"],
                                      "evictions": wl["status"].get("schedulingStats"),
                                      "conditions": [(c["type"], c["status"], c["reason"], c["message"][:60])
                                                     for c in wl["status"]["conditions"]],
                                      "events": _kueue_events(api, namespace, wl["metadata"]["name"], "Workload")[-4:],
                                      "cq": cq})
    _expect_verdict(evicting, namespace, owner=("Job", "looping"), reason="Evicted", cause="RequeueLoop")
    _expect_verdict(backoff, namespace, owner=("Job", "looping"), reason=("Evicted", "Preempted"), cause="RequeueLoop")
