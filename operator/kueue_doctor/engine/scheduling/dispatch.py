"""Admitted, and the Pods are elsewhere or not started yet: MultiKueue dispatch, a suspended owner."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ...kube.objects import (
    format_duration,
    group_of,
    lst,
    m,
    name,
    parse_time,
    release,
    s,
    spec,
    status,
    uid,
    when_text,
)
from ...state import MULTIKUEUE_CONTROLLER
from ...vocabulary import ActionBy, Cause, Reason
from .. import multikueue as mk
from ..context import Context
from ..owner_status import is_rayservice
from ..rules import Finding, Phase, pairs, rule
from .ghost import held_quota
from .owners import (
    FieldWriter,
    admitted_since,
    assigned_flavors,
    base_evidence,
    expected_pods,
    owner_suspended,
    suspend_path,
    suspend_writer,
)
from .workload_pods import NO_CONFIG, pod_view, pods_ready_deadline

SUSPENDED_AFTER = timedelta(minutes=2)  # Kueue unsuspends an admitted owner within seconds: minutes of it are not lag


@rule(Phase.ADMITTED, [*pairs(Reason.RUNNING, Cause.DISPATCHED_TO_WORKER_CLUSTER),
                        *pairs(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_PENDING,
                               Cause.ADMISSION_CHECK_RETRY),
                        (Reason.EVICTED, Cause.REQUEUE_LOOP)])
def multikueue(ctx: Context) -> Finding | None:
    cluster = s(ctx.status.get("clusterName"))
    via_check = None
    check_state: Mapping[str, Any] = {}
    for c in lst(ctx.status.get("admissionChecks")):
        ac = ctx.state.admission_checks.get(s(m(c).get("name")) or "")
        if ac is not None and s(spec(ac).get("controllerName")) == MULTIKUEUE_CONTROLLER:
            via_check, check_state = s(m(c).get("name")), m(c)
    if not cluster and not via_check:
        return None
    state = s(check_state.get("state")) or "Ready"
    if via_check and state not in ("Ready", "Rejected"):
        return _redispatching(ctx, via_check, check_state, state)
    where = f"worker cluster {cluster}" if cluster else "a MultiKueue worker cluster"
    text = (f"Admitted and dispatched by MultiKueue to {where}: its Pods run there, not here. Look at the Workload "
            f"{ctx.ns}/{ctx.name} on {where} (run kueue-doctor there) for scheduling problems.")
    lost, active = mk.cluster_text(ctx, cluster) if cluster else ("", None)
    evidence = base_evidence(ctx)
    if lost:
        # workload.go: a Ready check whose admitting worker is unreachable waits workerLostTimeout, then Retry
        text += (f" But {lost}: Kueue cannot see the Workload there; it keeps it admitted for "
                 "multiKueue.workerLostTimeout (15m by default) after losing the worker, then sets the check to Retry "
                 "(\"Admitting remote lost\") and requeues it. Platform admin: restore the connection "
                 f"(`kubectl get multikueuecluster {cluster} -o yaml`).")
        if active is not None:
            evidence.append(ctx.object_evidence("MultiKueueCluster", cluster, "condition/Active",
                                                s(active.get("reason")), s(active.get("message")),
                                                parse_time(active.get("lastTransitionTime"))))
    return Finding(Reason.RUNNING, Cause.DISPATCHED_TO_WORKER_CLUSTER, text,
                   ActionBy.CLUSTER_ADMIN if lost else ActionBy.NOBODY,
                   since=admitted_since(ctx), evidence=evidence, flavors=assigned_flavors(ctx))


def _redispatching(ctx: Context, check: str, entry: Mapping[str, Any], state: str) -> Finding:
    """Admitted=True on the manager while its MultiKueue check is Pending or Retry again: the worker evicted
    the Workload and the manager dispatches it anew, keeping its stale Admitted=True meanwhile
    (kubernetes-sigs/kueue#9338). It runs on no worker now. Retry because a worker found the Job out of sync
    (Kueue v0.19) is said as such, and from the second time on it is a requeue loop (`mk.out_of_sync_loop`)."""
    since = parse_time(entry.get("lastTransitionTime")) or admitted_since(ctx)
    said = s(entry.get("message"))
    out_of_sync = mk.out_of_sync(ctx) if state == "Retry" else None
    evidence = [*base_evidence(ctx), ctx.object_evidence("Workload", ctx.name, f"admissionChecks/{check}", state,
                                                         said or None, since, ctx.ns)]
    if out_of_sync is not None:
        loop = mk.out_of_sync_loop(ctx, out_of_sync)
        if loop is not None:
            loop.evidence[:0] = evidence
            loop.flavors = assigned_flavors(ctx)
            return loop
        text = ("Runs on no worker cluster now, although this manager still shows it Admitted: "
                + mk.out_of_sync_once(ctx, out_of_sync))
        return Finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_RETRY, text, ActionBy.NOBODY,
                       since=since, evidence=evidence, flavors=assigned_flavors(ctx),
                       hints=mk.out_of_sync_hints(ctx, out_of_sync), notes=mk.OUT_OF_SYNC_NOTES)
    text = (f"Runs on no worker cluster now, although this manager still shows it Admitted: its MultiKueue "
            f"admission check {check} is {state} again since {when_text(since)}"
            + (f" (Kueue: {said[:300]})" if said else "")
            + ": the worker that had admitted it evicted it (or was lost), and MultiKueue is dispatching it to the "
            "worker clusters anew; Kueue keeps the stale Admitted=True on the manager meanwhile (kueue#9338). It "
            "runs once a worker admits it; see the Workload on the workers "
            f"(kubectl get workload {ctx.name} -n {ctx.ns} on each) for why none has yet.")
    cause = Cause.ADMISSION_CHECK_RETRY if state == "Retry" else Cause.ADMISSION_CHECK_PENDING
    return Finding(Reason.WAITING_FOR_ADMISSION_CHECKS, cause, text, ActionBy.NOBODY, since=since,
                   evidence=evidence, flavors=assigned_flavors(ctx))


# Where an owner names the controller that runs it (Kubeflow's training jobs and MPIJob: spec.runPolicy.managedBy).
# Kueue's webhook sets it to MultiKueue's name for every kind MultiKueue dispatches when the LocalQueue's ClusterQueue
# has a MultiKueue check (jobframework ApplyDefaultForManagedBy, Kueue v0.19.2); nothing takes it away, and it is
# immutable.
_MANAGED_BY_PATHS = (("spec", "managedBy"), ("spec", "runPolicy", "managedBy"))
# the controller that would run the owner, which skips an owner managed by another
_OWN_CONTROLLER = {"Job": "the Kubernetes Job controller", "JobSet": "the JobSet controller", "RayJob": "KubeRay",
                   "RayCluster": "KubeRay", "RayService": "KubeRay", "TrainJob": "Kubeflow Trainer",
                   "MPIJob": "the MPI operator", "AppWrapper": "the AppWrapper controller",
                   "SparkApplication": "the Spark operator"}
_TRAINING_OPERATOR = "the Kubeflow training operator"  # PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob
# asides of its message, dropped in this order when it is too long (Finding.notes)
_EXPORTED = " (a manifest exported from a MultiKueue manager cluster carries it)"
_STATUS_EMPTY = " (the Job's status stays empty)"
# the Job controller honours spec.managedBy with the JobManagedBy feature (alpha in 1.30, beta and on in 1.32)
_JOB_MANAGED_BY = " (JobManagedBy, on by default since Kubernetes 1.32)"


def _managed_by(owner: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, value) of the owner's managedBy, when it names MultiKueue."""
    for path in _MANAGED_BY_PATHS:
        node: Any = owner
        for part in path:
            node = m(node).get(part)
        if node == MULTIKUEUE_CONTROLLER:
            return ".".join(path), node
    return None


@rule(Phase.ADMITTED, pairs(Reason.PODS_NOT_CREATED, Cause.EXTERNALLY_MANAGED))
def managed_by_multikueue(ctx: Context) -> Finding | None:
    """Admitted through a ClusterQueue without a MultiKueue check while the owner's managedBy still names MultiKueue
    (the check was removed from the queue while it waited, or the manifest came from a MultiKueue manager): Kueue
    admits and starts it like any other, its own controller skips it (an object managed by another controller) and
    MultiKueue acts only on a Workload that has its check (GetMultiKueueAdmissionCheck), so no Pod is ever made.
    Asked after `multikueue` (a Workload with the check is dispatched) and before the owner's suspension and the
    Pods: the field says at once that nothing will create them."""
    owner = ctx.owner
    managed = _managed_by(owner) if owner is not None else None
    if owner is None or managed is None or ctx.pods:
        return None
    kind = s(owner.get("kind")) or "owner"
    batch_job = kind == "Job" and group_of(owner.get("apiVersion")) == "batch"
    if not ctx.state.knows("Pod") and not (batch_job and not status(owner).get("startTime")):
        return None  # nothing says no Pod exists
    mk_checks = {n for n, ac in ctx.state.admission_checks.items()
                 if s(spec(ac).get("controllerName")) == MULTIKUEUE_CONTROLLER}
    own = [s(m(c).get("name")) or "" for c in lst(ctx.status.get("admissionChecks"))]
    queue = [s(m(c).get("name")) or "" for c in lst(m(spec(ctx.cq or {}).get("admissionChecksStrategy"))
                                                       .get("admissionChecks"))]
    if any(c in mk_checks or c not in ctx.state.admission_checks for c in own + queue):
        return None  # MultiKueue's own check, or one whose controller the input does not say
    field_, value = managed
    since = admitted_since(ctx)
    owner_name = f"{ctx.ns}/{name(owner)}"
    cq = ctx.cq_name or "?"
    controller = _OWN_CONTROLLER.get(kind, _TRAINING_OPERATOR if field_ == "spec.runPolicy.managedBy"
                                     else f"the {kind} controller")
    gate = _JOB_MANAGED_BY if batch_job else ""
    empty = _STATUS_EMPTY if batch_job and not status(owner) else ""
    quota = held_quota(ctx)
    holds = ", ".join(f"{x['requested']} {x['resource']} in flavor {x['flavor']}" for x in quota)
    text = (f"Admitted by {ctx.cq_text} at {when_text(since)}, but {kind} {owner_name} has {field_}: {value} and "
            f"ClusterQueue {cq} has no MultiKueue admission check: {controller} skips an object another controller "
            f"manages{gate}, and MultiKueue dispatches only Workloads that carry its check, so nobody will ever "
            f"create its {expected_pods(ctx)} Pod(s){empty}. Meanwhile it holds {holds or 'its quota'} of "
            f"{ctx.cq_text}. " + _eviction_loop(ctx, since))
    elsewhere = sorted(mk_checks)
    if elsewhere:
        users = sorted(n for n, q in ctx.state.cluster_queues.items()
                       if any(m(c).get("name") in mk_checks
                              for c in lst(m(spec(q).get("admissionChecksStrategy")).get("admissionChecks"))))
        on = f" (on ClusterQueue {', '.join(users[:3])})" if users else ""
        text += (f" MultiKueue check {', '.join(elsewhere)} exists here{on} but not on {cq} (Kueue's webhook set "
                 f"{field_} while {cq} had it, or the manifest came from elsewhere). Cluster admin: put it back on "
                 f"{cq} if it should send work to the workers; else the owner recreates the {kind} without "
                 f"{field_} (immutable).")
        action = ActionBy.CLUSTER_ADMIN
    else:
        text += (f" Owner: {field_} cannot be changed: delete the {kind} and create it again without it"
                 f"{_EXPORTED}, or submit it to a queue with a MultiKueue check.")
        action = ActionBy.WORKLOAD_OWNER
    evidence = [*base_evidence(ctx),
                ctx.object_evidence(kind, name(owner), field_, "ManagedByMultiKueue", value, ns=ctx.ns)]
    return Finding(Reason.PODS_NOT_CREATED, Cause.EXTERNALLY_MANAGED, text, action, since=since, evidence=evidence,
                   quota=quota, flavors=assigned_flavors(ctx), pods=ctx.lazy(pod_view).status,
                   notes=(NO_CONFIG, _EXPORTED, empty, gate),
                   hints=[f"kubectl get {kind.lower()} {name(owner)} -n {ctx.ns} -o yaml > {name(owner)}.yaml   "
                          f"# remove {field_}, metadata.uid/resourceVersion and status, then delete and create it"])


def _eviction_loop(ctx: Context, since: datetime | None) -> str:
    """What waitForPodsReady does with Pods that never come: evict at its timeout, requeue, admit again, forever."""
    timeout = pods_ready_deadline(ctx, since) if since is not None else None
    if timeout is None:
        return "Without waitForPodsReady nothing evicts it: it holds that quota until the owner is deleted."
    which, deadline = timeout
    at = f", about {when_text(deadline)}" if deadline is not None else ""
    return (f"At waitForPodsReady's timeout ({which}){at}, Kueue evicts it, requeues it and admits it again, and "
            "every admission ends the same way.")


@rule(Phase.ADMITTED, pairs(Reason.JOB_SUSPENDED, Cause.SUSPENDED_BY_OTHER_MANAGER, Cause.OWNER_SUSPENDED))
def suspended_owner(ctx: Context) -> Finding | None:
    """Admitted, the owner still suspended. SuspendedByOtherManager when the last writer of its suspend field
    is not Kueue and wrote after the admission: at creation the creator's manager owns the suspend=true that
    Kueue's webhook set, which is the normal path and stays OwnerSuspended."""
    owner = ctx.owner
    if owner is None or owner_suspended(owner) is not True:
        return None
    since = admitted_since(ctx)
    kind = s(owner.get("kind")) or "owner"
    writer = suspend_writer(owner)
    # managedFields times have whole seconds: a write in the admission's second counts, unless it is the owner's
    # creation (the creator's manager owns the suspend=true Kueue's webhook set then)
    created = parse_time(m(owner.get("metadata")).get("creationTimestamp"))
    if writer is not None and not writer.is_kueue and writer.time is not None and since is not None \
            and writer.time >= since and (created is None or writer.time > created):
        return _suspended_by_other(ctx, owner, kind, since, writer)
    if kind == "TrainJob" and not _has_kueue_runtime_patch(owner):
        return _trainjob_without_runtime_patch(ctx, owner, since)
    late = ctx.after(since, SUSPENDED_AFTER)
    waited = format_duration(ctx.now - since, precise=True) if late and since is not None else ""
    text = (f"Admitted by {ctx.cq_text} at {when_text(since)}, but {kind} {name(owner)} is still "
            "suspended: Kueue's job controller unsuspends it right after admission"
            + (f", and {waited} later it has not, while the Workload holds its quota (kueue#4224). Cluster admin: "
               "check the Kueue controller manager's logs and the Job's events; deactivating the Workload "
               "(spec.active: false) and reactivating it makes Kueue start over, and waitForPodsReady in Kueue's "
               "Configuration evicts such Workloads by itself." if late else "."))
    return Finding(Reason.JOB_SUSPENDED, Cause.OWNER_SUSPENDED, text,
                   ActionBy.CLUSTER_ADMIN if late else ActionBy.NOBODY, since=since,
                   evidence=base_evidence(ctx), flavors=assigned_flavors(ctx))


# KubeRay's RayService copies its spec.rayClusterConfig onto the RayCluster it makes (suspend included), and from
# v1.6.2 on applies a later suspend change to it in place (rayservice_controller.go shouldUpdateCluster); before, a
# RayCluster made while Kueue held the RayService stayed suspended forever (ray-project/kuberay#4686)
_KUBERAY_FIXED = (1, 6, 2)
KUBERAY_VERSION_ANNOTATION = "ray.io/kuberay-version"


@rule(Phase.ADMITTED, pairs(Reason.JOB_SUSPENDED, Cause.OWNER_SUSPENDED))
def suspended_ray_cluster(ctx: Context) -> Finding | None:
    """Admitted and the RayService unsuspended, but the RayCluster KubeRay made while it waited for admission is
    still suspended: no head, no worker, the quota held. Asked after `suspended_owner` (the RayService itself)."""
    owner = ctx.owner
    if owner is None or not is_rayservice(owner) or owner_suspended(owner) is not False:
        return None
    live = {s(m(r).get("uid")) for p in ctx.pods if s(status(p).get("phase")) not in ("Succeeded", "Failed")
            for r in lst(m(p.get("metadata")).get("ownerReferences"))}
    stuck = [c for c in ctx.state.descendants(owner, depth=1)
             if s(c.get("kind")) == "RayCluster" and spec(c).get("suspend") is True
             and not m(c.get("metadata")).get("deletionTimestamp") and uid(c) not in live]
    if not stuck:
        return None
    cluster = stuck[0]
    since = admitted_since(ctx)
    rc = f"RayCluster {ctx.ns}/{name(cluster)}"
    evidence = [*base_evidence(ctx),
                ctx.object_evidence("RayCluster", name(cluster), "spec.suspend", "True",
                                    f"status.state {s(status(cluster).get('state')) or 'unset'}", ns=ctx.ns)]
    head = (f"Admitted by {ctx.cq_text} at {when_text(since)} and Kueue unsuspended RayService {ctx.ns}/{name(owner)} "
            f"(spec.rayClusterConfig.suspend: false), but its {rc} still has spec.suspend: true")
    if not ctx.after(since, SUSPENDED_AFTER):
        return Finding(Reason.JOB_SUSPENDED, Cause.OWNER_SUSPENDED,
                       head + ": KubeRay copies the change onto it within seconds, then creates its Pods.",
                       ActionBy.NOBODY, since=since, evidence=evidence, flavors=assigned_flavors(ctx))
    waited = format_duration(ctx.now - since, precise=True) if since is not None else "minutes"
    quota = held_quota(ctx)
    holds = ", ".join(f"{x['requested']} {x['resource']} in flavor {x['flavor']}" for x in quota)
    version = s(m(m(cluster.get("metadata")).get("annotations")).get(KUBERAY_VERSION_ANNOTATION)) or ""
    fixed = (release(version) or (0, 0, 0)) >= _KUBERAY_FIXED
    made_by = f" (it was made by KubeRay {version})" if version else ""
    text = (f"{head} {waited} later: KubeRay creates no head or worker Pod while the Workload holds "
            f"{holds or 'its quota'} of {ctx.cq_text}. KubeRay made that RayCluster while the RayService waited for "
            f"admission, suspended like it{made_by}; ")
    if fixed:
        text += (f"KubeRay v1.6.2 and later apply the RayService's suspend change to it in place, so this one "
                 f"failed to: cluster admin, look for errors about {name(cluster)} in the KubeRay operator's logs.")
    else:
        text += ("KubeRay before v1.6.2 never applies the RayService's later suspend change to an existing RayCluster "
                 "(ray-project/kuberay#4686). Cluster admin: upgrade KubeRay to v1.6.2 or later"
                 + ("." if version else " (the RayCluster does not say which KubeRay made it)."))
    text += (f" Meanwhile `kubectl delete raycluster {name(cluster)} -n {ctx.ns}` makes KubeRay create it again "
             "under the same name from the RayService's current spec, unsuspended; the Workload stays admitted.")
    return Finding(Reason.JOB_SUSPENDED, Cause.OWNER_SUSPENDED, text, ActionBy.CLUSTER_ADMIN, since=since,
                   evidence=evidence, quota=quota, flavors=assigned_flavors(ctx),
                   hints=[f"kubectl delete raycluster {name(cluster)} -n {ctx.ns}"])


# pkg/controller/jobs/trainjob: the webhook appends this patch at creation; RunWithPodSetsInfo writes the
# admission into it and fails with "kueue runtime patch not found" when it is missing
_KUEUE_RUNTIME_PATCH_MANAGER = "kueue.x-k8s.io/manager"


def _has_kueue_runtime_patch(owner: Mapping[str, Any]) -> bool:
    return any(s(m(p).get("manager")) == _KUEUE_RUNTIME_PATCH_MANAGER for p in lst(spec(owner).get("runtimePatches")))


def _trainjob_without_runtime_patch(ctx: Context, owner: Mapping[str, Any], since: datetime | None) -> Finding:
    """Kueue v0.17+ unsuspends a TrainJob only through its own spec.runtimePatches entry; without it every start
    fails ("kueue runtime patch not found", in Kueue's logs only) and the admitted Workload holds its quota for
    nothing. The entry is missing when the TrainJob CRD predates runtimePatches (Trainer before v2.2, whose
    apiserver prunes the field Kueue's webhook set) or when Kueue's webhook did not see the TrainJob's creation
    (kueue#11931)."""
    text = (f"Admitted by {ctx.cq_text} at {when_text(since)}, but TrainJob {ctx.ns}/{name(owner)} stays "
            "suspended and never will: it has no spec.runtimePatches entry of manager "
            f"{_KUEUE_RUNTIME_PATCH_MANAGER!r}, which Kueue's TrainJob webhook adds at creation and Kueue v0.17+ "
            "writes the admission into before unsuspending; without it every start fails with "
            "\"kueue runtime patch not found\" (Kueue's logs only) while the Workload holds its quota "
            "(kueue#11931). The usual cause is a Kubeflow Trainer older than v2.2, whose TrainJob CRD has no "
            "spec.runtimePatches, so the apiserver drops what the webhook set. Cluster admin: upgrade Kubeflow "
            "Trainer to v2.2 or later, its CRDs included (a Helm upgrade leaves them as they were: "
            "`kubectl get crd trainjobs.trainer.kubeflow.org -o yaml | grep runtimePatches`), or run a Kueue "
            "older than v0.17 with it; then delete and recreate the TrainJob, because the webhook adds the entry "
            "only at creation.")
    evidence = [*base_evidence(ctx),
                ctx.object_evidence("TrainJob", name(owner), "spec.runtimePatches", "NoKueuePatch",
                                    f"no entry of manager {_KUEUE_RUNTIME_PATCH_MANAGER}", ns=ctx.ns)]
    return Finding(Reason.JOB_SUSPENDED, Cause.OWNER_SUSPENDED, text, ActionBy.CLUSTER_ADMIN, since=since,
                   evidence=evidence, flavors=assigned_flavors(ctx),
                   hints=["kubectl get crd trainjobs.trainer.kubeflow.org -o yaml | grep runtimePatches"])


def _suspended_by_other(ctx: Context, owner: Mapping[str, Any], kind: str, since: datetime,
                        writer: FieldWriter) -> Finding:
    field_ = ".".join(suspend_path(owner) or ("spec", "suspend"))
    after = format_duration(writer.time - since, precise=True) if writer.time else "?"
    who = ("A kubectl command (or a mutating webhook acting on it)" if writer.manager.startswith("kubectl")
           else "Another controller or a mutating webhook")
    text = (f"Admitted by {ctx.cq_text} at {when_text(since)}, but {kind} {ctx.ns}/{name(owner)} is suspended "
            f"again: field manager {writer.manager!r} ({writer.operation}) wrote {field_} at "
            f"{when_text(writer.time)}, {after} after the admission. {who} "
            "re-suspended the Job after Kueue admitted it; Kueue keeps trying to unsuspend it while the Workload is "
            f"admitted, and the quota stays reserved meanwhile. Cluster admin: find the controller or webhook "
            f"behind {writer.manager!r} (`kubectl get mutatingwebhookconfigurations`, "
            f"`kubectl get {kind.lower()} {name(owner)} -n {ctx.ns} --show-managed-fields -o yaml`) and stop it "
            "from setting suspend on Kueue-managed Jobs.")
    evidence = [*base_evidence(ctx),
                ctx.object_evidence(kind, name(owner), f"metadata.managedFields[{field_}]", writer.manager,
                                    f"operation {writer.operation}", writer.time, ctx.ns)]
    return Finding(Reason.JOB_SUSPENDED, Cause.SUSPENDED_BY_OTHER_MANAGER, text, since=writer.time,
                   evidence=evidence, flavors=assigned_flavors(ctx),
                   hints=["kubectl get mutatingwebhookconfigurations",
                          f"kubectl get {kind.lower()} {name(owner)} -n {ctx.ns} --show-managed-fields -o yaml"])
