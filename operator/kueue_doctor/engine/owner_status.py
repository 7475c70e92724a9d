"""What an owner's own controller says about it, read by both phases (a rejected owner holds its Workload
OnHold, or leaves an admitted one without Pods; an owner still unsuspended long after its eviction): kept out of
admission/ and scheduling/, which import neither the other."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..kube.objects import (
    conditions,
    group_of,
    i,
    is_true,
    lst,
    m,
    meta,
    name,
    namespace,
    parse_duration,
    parse_time,
    s,
    when_text,
)
from ..state import ClusterState
from .context import Context


def owner_text(ctx: Context) -> str:
    """"Job ns/name" from the owner reference (the owner object need not be in the input); "its owner" without."""
    ref = ctx.owner_ref
    kind, owner = (s(ref.get("kind")), s(ref.get("name"))) if ref is not None else (None, None)
    return f"{kind} {ctx.ns}/{owner}" if kind and owner else "its owner"


def pods_command(ctx: Context) -> str:
    """The command that lists the owner's Pods: by the Job controller's label for a Job, else by name."""
    ref = ctx.owner_ref
    if ref is not None and ref.get("kind") == "Job" and s(ref.get("name")):
        return f"kubectl get pods -n {ctx.ns} -l batch.kubernetes.io/job-name={ref.get('name')}"
    return f"kubectl get pods -n {ctx.ns} -o wide | grep {(s(ref.get('name')) if ref else None) or ctx.name}"


def owner_rejected(owner: Mapping[str, Any] | None) -> str | None:
    """The owner's controller refused it and will make nothing: a RayJob KubeRay marked ValidationFailed (a name
    over 47 characters, a bad spec). Its status.message, or a stand-in; None otherwise. Kueue 0.19.1+ then holds
    its Workload (OnHold) and releases the quota; 0.19.0 left it admitted."""
    if owner is None or s(owner.get("kind")) != "RayJob":
        return None
    st = m(owner.get("status"))
    if s(st.get("jobDeploymentStatus")) != "ValidationFailed":
        return None
    return s(st.get("message")) or "no message"


RAYJOB_DONE = ("Complete", "Failed")  # KubeRay's terminal jobDeploymentStatus values


def rayjob_finished(owner: Mapping[str, Any] | None) -> tuple[str, str, datetime | None] | None:
    """A RayJob KubeRay is done with: (jobDeploymentStatus, jobStatus, status.endTime), else None. A RayJob has no
    conditions; Kueue's RayJob.Finished reads only jobDeploymentStatus Complete or Failed, and KubeRay sets endTime
    on that transition (rayjob_controller updateRayJobStatus)."""
    if owner is None or s(owner.get("kind")) != "RayJob":
        return None
    st = m(owner.get("status"))
    deployment = s(st.get("jobDeploymentStatus"))
    if deployment not in RAYJOB_DONE:
        return None
    return deployment or "", s(st.get("jobStatus")) or "", parse_time(st.get("endTime"))


RAY_REDIS_CLEANUP_FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"  # KubeRay's GCS fault tolerance
RAY_CLUSTER_SELECTOR_KEY = "ray.io/cluster"  # KubeRay's utils.RayJobClusterSelectorKey: the RayCluster's name


def existing_cluster_selector(owner: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A RayJob that runs on an existing RayCluster (spec.clusterSelector; KubeRay reads the cluster's name from
    its ray.io/cluster key): its selector, else None. Kueue v0.19 skips such RayJobs (RayJob.Skip, kueue#7219):
    their quota is the RayCluster's Workload."""
    if owner is None or s(owner.get("kind")) != "RayJob":
        return None
    selector = m(m(owner.get("spec")).get("clusterSelector"))
    return {str(k): str(v) for k, v in selector.items()} or None


def _rayjob_active(st: Mapping[str, Any]) -> str | None:
    # active unless New ("") or Suspended (rayjob_controller.go IsActive)
    deployment = s(st.get("jobDeploymentStatus")) or ""
    return f"status.jobDeploymentStatus {deployment}" if deployment not in ("", "Suspended") else None


def _raycluster_active(st: Mapping[str, Any]) -> str | None:
    return "status.state ready" if s(st.get("state")) == "ready" else None


def _rayservice_active(st: Mapping[str, Any]) -> str | None:
    # Kueue's RayService.IsActive: its Ready condition is True
    return "condition Ready True" if is_true(conditions({"status": st}).get("Ready")) else None


def _spark_active(st: Mapping[str, Any]) -> str | None:
    # Kueue's SparkApplication.IsActive: status.applicationState.state RUNNING
    return "status.applicationState.state RUNNING" if m(st.get("applicationState")).get("state") == "RUNNING" else None


def _job_active(st: Mapping[str, Any]) -> str | None:
    return f"status.active {i(st.get('active'))}" if i(st.get("active")) else None


def _replicas_active(field_: str, keyed: bool) -> Callable[[Mapping[str, Any]], str | None]:
    """The reader of a status that counts active replicas per replicated job (a list of {name, active}) or per
    replica type (a map, Kubeflow's replicaStatuses)."""
    def active(st: Mapping[str, Any]) -> str | None:
        counts = ({str(k): i(m(v).get("active")) for k, v in m(st.get(field_)).items()} if keyed else
                  {s(m(r).get("name")) or "?": i(m(r).get("active")) for r in lst(st.get(field_))})
        busy = [f"{k} {n}" for k, n in counts.items() if n > 0]
        return f"status.{field_} active: {', '.join(busy)}" if busy else None
    return active


_kubeflow = _replicas_active("replicaStatuses", keyed=True)
# (group, kind) -> what the owner's status still counts active; the kinds whose IsActive Kueue reads from status
_ACTIVE: dict[tuple[str, str], Callable[[Mapping[str, Any]], str | None]] = {
    ("ray.io", "RayJob"): _rayjob_active,
    ("ray.io", "RayCluster"): _raycluster_active,
    ("ray.io", "RayService"): _rayservice_active,
    ("sparkoperator.k8s.io", "SparkApplication"): _spark_active,
    ("batch", "Job"): _job_active,
    ("jobset.x-k8s.io", "JobSet"): _replicas_active("replicatedJobsStatus", keyed=False),
    ("trainer.kubeflow.org", "TrainJob"): _replicas_active("jobsStatus", keyed=False),
    **{("kubeflow.org", kind): _kubeflow for kind in ("MPIJob", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob",
                                                      "JAXJob")},
}


def owner_active(owner: Mapping[str, Any]) -> str | None:
    """What the owner's status still counts active, as Kueue's integration reads it (GenericJob.IsActive), else None
    (also for kinds Kueue reads otherwise). Kueue releases an evicted Workload's quota, and makes a missing Workload,
    only once the owner is inactive (jobframework reconciler): a controller slow to stop its owner holds both up."""
    read = _ACTIVE.get((group_of(owner.get("apiVersion")) or "", s(owner.get("kind")) or ""))
    return read(m(owner.get("status"))) if read is not None else None


def owner_counts_none_active(state: ClusterState, owner: Mapping[str, Any]) -> str | None:
    """What in the owner's own status says it runs nothing (the words, for a message), else None: a Job's counts, a
    JobSet's replicated jobs, the Jobs it made, or the status Kueue's integration reads for IsActive (a RayJob's
    jobDeploymentStatus Suspended, a Kubeflow job's replicaStatuses). Read only where the input has no Pods."""
    st = m(owner.get("status"))
    if s(owner.get("kind")) == "Job" and group_of(owner.get("apiVersion")) == "batch":
        # 0 is omitted: a status at all
        return "status.active 0" if st and not (i(st.get("active")) or i(st.get("ready"))) else None
    replicated = lst(st.get("replicatedJobsStatus"))
    if replicated:
        busy = any(i(m(r).get("active")) or i(m(r).get("ready")) for r in replicated)
        return None if busy else "status.replicatedJobsStatus active 0"
    jobs = [j for j in state.descendants(owner) if s(j.get("kind")) == "Job"]
    if jobs:
        return None if any(i(m(j.get("status")).get("active")) for j in jobs) else "none of the Jobs it made active"
    if s(owner.get("kind")) == "RayJob" and group_of(owner.get("apiVersion")) == "ray.io":
        # only the state KubeRay sets once it stopped it (a New RayJob has an empty one, which says nothing)
        said = s(st.get("jobDeploymentStatus"))
        return f"status.jobDeploymentStatus {said}" if said == "Suspended" else None
    read = _ACTIVE.get((group_of(owner.get("apiVersion")) or "", s(owner.get("kind")) or ""))
    if read is None or not st or read(st) is not None:
        return None
    return "its status counts none active"


def owner_stopped(ctx: Context) -> str | None:
    """"RayJob ns/x is suspended and its status counts nothing active (...)": the owner is stopped the way Kueue's
    job reconciler reads it, which then releases an evicted Workload's quota at once (jobframework reconciler.go,
    "handle eviction": !job.IsActive() -> UnsetQuotaReservation); None when that is not known. With Pods in the
    input, none of the owner's may be left; without, its own status must say it."""
    owner = ctx.owner
    if owner is None or owner_suspended(owner) is not True:
        return None
    kind = s(owner.get("kind")) or "owner"
    if ctx.state.knows("Pod"):
        if any(s(m(p.get("status")).get("phase")) not in ("Succeeded", "Failed") for p in ctx.pods):
            return None
        left = "no Pod of it is left"
    else:
        said = owner_counts_none_active(ctx.state, owner)
        if said is None:
            return None
        left = f"its status counts nothing active ({said}; the input has no Pods)"
    return f"{kind} {ctx.ns}/{name(owner)} is suspended and {left}"


def deleting_children(state: ClusterState, owner: Mapping[str, Any]
                      ) -> list[tuple[Mapping[str, Any], datetime | None, list[str]]]:
    """The owners `owner` made (a RayJob's RayCluster, a JobSet's Jobs) that are being deleted and held by finalizers:
    (child, deletionTimestamp, finalizers). A RayJob stays Suspending until its RayCluster is gone (KubeRay)."""
    out = []
    for child in state.descendants(owner, depth=1):
        md = meta(child)
        finalizers = [s(f) or "" for f in lst(md.get("finalizers"))]
        if md.get("deletionTimestamp") and finalizers:
            out.append((child, parse_time(md.get("deletionTimestamp")), finalizers))
    return sorted(out, key=lambda c: name(c[0]) or "")


@dataclass(frozen=True)
class Stopping:
    """What holds a suspended owner that still counts itself active."""
    text: str
    evidence: list[dict[str, Any]]
    since: datetime | None  # when the deletion it waits for began, when the input shows one
    node_down: bool  # a Pod waits on a node that is not Ready: no kubelet will confirm it, whatever the wait


def still_stopping(ctx: Context, waits: str) -> Stopping | None:
    """Kueue did suspend the owner, yet its status still counts it active (`owner_active`): Kueue `waits` (releases
    an evicted Workload's quota, creates a missing Workload) until it does not, so the owner's own controller has
    not finished stopping it. Says what holds it: a child being deleted, held by a finalizer (a RayJob stays
    Suspending until its RayCluster is gone). None when the owner is not suspended or counts nothing active."""
    owner = ctx.owner
    if owner is None or owner_suspended(owner) is not True:
        return None
    active = owner_active(owner)
    if active is None:
        return None
    kind, nm = s(owner.get("kind")) or "owner", name(owner) or ""
    text = (f"Kueue suspended {kind} {ctx.ns}/{nm}, but its controller still reports it active ({active}), and Kueue "
            f"{waits} only once the {kind} is inactive.")
    evidence = [ctx.object_evidence(kind, nm, active.split(" ")[0], "Active", active, ns=ctx.ns)]
    held = deleting_children(ctx.state, owner)
    began: datetime | None = None
    down = ""
    for child, since, finalizers in held[:1]:
        began = since
        ckind, cname = s(child.get("kind")) or "", name(child) or ""
        text += (f" The {kind} waits for {ckind} {ctx.ns}/{cname}, being deleted since {when_text(since)} and "
                 f"held by finalizer {', '.join(finalizers)}")
        if RAY_REDIS_CLEANUP_FINALIZER in finalizers:
            text += (" (KubeRay removes it once its Redis cleanup Job finishes: kubectl -n "
                     f"{ctx.ns} get jobs -l ray.io/cluster={cname},ray.io/node-type=redis-cleanup; if that Job cannot "
                     "run, clean the Redis storage namespace by hand and remove the finalizer, as KubeRay's GCS fault "
                     "tolerance guide says)")
        text += f". Whoever runs the {kind}s (its owner or the cluster admin) must get that deletion done."
        evidence.append(ctx.object_evidence(ckind, cname, "metadata.finalizers", "Deleting", ", ".join(finalizers),
                                            since, ctx.ns))
    left = [p for p in ctx.pods if meta(p).get("deletionTimestamp")]
    if not held and left:
        pod = left[0]
        node = s(m(pod.get("spec")).get("nodeName")) or ""
        down = _node_down(ctx.state, node) if node else ""
        began = parse_time(meta(pod).get("deletionTimestamp"))
        text += ((f" Its Pod {name(pod)} is still being deleted, since " if len(left) == 1 else
                  f" {len(left)} of its Pods are still being deleted: {name(pod)} since ")
                 + when_text(began)
                 + (f" on node {node}{down}" if node else "")
                 + f" (the {kind} counts it until it is gone).")
        evidence.append(ctx.object_evidence("Pod", name(pod), "metadata.deletionTimestamp", "Terminating",
                                            node or None, parse_time(meta(pod).get("deletionTimestamp")), ctx.ns))
    elif not held:
        text += (f" Its controller has not finished stopping it: see kubectl -n {ctx.ns} describe "
                 f"{kind.lower()} {nm} and the controller's logs.")
    return Stopping(text, evidence, began, bool(down))


def _node_down(state: ClusterState, node: str) -> str:
    """", which is not Ready (Unknown: Kubelet stopped posting node status.)" when the input's Node says so: no
    kubelet confirms the deletion there, and the cluster admin must recover the node or force the Pods out."""
    ready = conditions(state.nodes.get(node) or {}).get("Ready")
    if ready is None or s(ready.get("status")) == "True":
        return ""
    said = s(ready.get("message")) or s(ready.get("reason"))
    return (f", which is not Ready ({s(ready.get('status')) or 'no status'}" + (f": {said}" if said else "") + "): "
            "no kubelet confirms the deletion: the cluster admin recovers the node or taints it "
            "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute to force-delete its Pods")


# How owners show suspension: (group, kind) -> path of the boolean. Kueue suspends these until admission.
SUSPEND_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch", "Job"): ("spec", "suspend"),
    ("jobset.x-k8s.io", "JobSet"): ("spec", "suspend"),
    ("ray.io", "RayJob"): ("spec", "suspend"),
    ("ray.io", "RayCluster"): ("spec", "suspend"),
    ("ray.io", "RayService"): ("spec", "rayClusterConfig", "suspend"),  # Kueue suspends its cluster's spec
    ("kubeflow.org", "MPIJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PyTorchJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "TFJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "XGBoostJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PaddleJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "JAXJob"): ("spec", "runPolicy", "suspend"),
    ("trainer.kubeflow.org", "TrainJob"): ("spec", "suspend"),
    ("workload.codeflare.dev", "AppWrapper"): ("spec", "suspend"),
    ("sparkoperator.k8s.io", "SparkApplication"): ("spec", "suspend"),
}


def suspend_path(owner: Mapping[str, Any]) -> tuple[str, ...] | None:
    return SUSPEND_PATHS.get((group_of(owner.get("apiVersion")), s(owner.get("kind")) or ""))


def owner_suspended(owner: Mapping[str, Any]) -> bool | None:
    path = suspend_path(owner)
    if path is None:
        return None
    node: Any = owner
    for part in path:
        node = m(node).get(part)
    return node is True


# ----- AppWrapper (project-codeflare/appwrapper v1.2, internal/controller/appwrapper/appwrapper_controller.go) -----
# Kueue's AppWrapper integration finishes the Workload with the fixed text "AppWrapper failed" (Finished()); why, and
# how far the AppWrapper controller's own fault tolerance got, is only in the AppWrapper's status and annotations.
AW_GROUP = "workload.codeflare.dev"
AW_ANNOTATION = "workload.codeflare.dev.appwrapper/"
# the controller's defaults (pkg/config/config.go NewAppWrapperConfig; its config's faultTolerance may change them)
AW_DEFAULT_RETRY_LIMIT = 3
AW_DEFAULT_GRACE: dict[str, int] = {"admissionGracePeriodDuration": 60, "warmupGracePeriodDuration": 300,
                                    "failureGracePeriodDuration": 60, "retryPausePeriodDuration": 90}
# Unhealthy reasons after which the controller resets the AppWrapper (resetOrFail) until its retry limit, and what each
# means; MissingComponent and a fatal CreateFailed fail it at once
_AW_UNHEALTHY: dict[str, str] = {
    "MissingComponent": ("a wrapped component was deleted, or was not yet visible to the AppWrapper controller right "
                         "after it made it; the controller fails this at once, with no grace period and no retry"),
    "FailedComponent": "a wrapped component's own controller marked it failed (a Job's Failed condition)",
    "FoundFailedPods": ("Failed Pods of its components were still there when its failure grace period ended (the "
                        "controller counts every Failed Pod it labelled; a Job keeps its failed Pods, so the Job's own "
                        "retries do not prevent this)"),
    "InsufficientPodsReady": "its Pods were not all running when the controller's grace period ended",
    "CreateFailed": "the AppWrapper controller could not create a component",
    "AutopilotNoExecute": "its Pods ran on nodes Autopilot marked NoExecute (such a reset is not counted)",
}
_AW_RETRIED = frozenset({"FailedComponent", "FoundFailedPods", "InsufficientPodsReady", "CreateFailed"})


def aw_unhealthy_text(reason: str) -> str:
    """What an Unhealthy reason of the AppWrapper controller means, in words."""
    return _AW_UNHEALTHY.get(reason, f"Unhealthy {reason or '(no reason)'}")


def aw_duration(seconds: int) -> str:
    """"90s", "5m", "1h30m": a grace period as exactly as its annotation would spell it."""
    if seconds < 120 or seconds % 60:
        return f"{seconds}s"
    hours, minutes = divmod(seconds // 60, 60)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes or not hours else "")


def is_appwrapper(owner: Mapping[str, Any] | None) -> bool:
    return owner is not None and s(owner.get("kind")) == "AppWrapper" and group_of(owner.get("apiVersion")) == AW_GROUP


def aw_grace(owner: Mapping[str, Any], key: str) -> tuple[int, str]:
    """(seconds, where from) of one of the controller's grace periods: the AppWrapper's annotation, else the default
    (a malformed annotation falls back to the default, as the controller does)."""
    text = s(m(meta(owner).get("annotations")).get(AW_ANNOTATION + key))
    seconds = parse_duration(text) if text else None
    if seconds is not None:
        return seconds, f"annotation {AW_ANNOTATION}{key}"
    return AW_DEFAULT_GRACE[key], "the AppWrapper controller's default"


def aw_retries(owner: Mapping[str, Any]) -> tuple[int, int, str]:
    """(resets so far, retry limit, where the limit is from)."""
    done = i(m(owner.get("status")).get("resettingCount"))
    text = s(m(meta(owner).get("annotations")).get(AW_ANNOTATION + "retryLimit"))
    if text is not None and text.strip().lstrip("-").isdigit():
        return done, int(text), f"annotation {AW_ANNOTATION}retryLimit"
    return done, AW_DEFAULT_RETRY_LIMIT, "the AppWrapper controller's default"


def aw_components(owner: Mapping[str, Any]) -> str:
    """"Job sample-job, RayCluster rc": the components the controller made (status.componentStatus)."""
    parts = [f"{s(m(c).get('kind')) or '?'} {s(m(c).get('name')) or '?'}"
             for c in lst(m(owner.get("status")).get("componentStatus"))]
    return ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")


def aw_failure(owner: Mapping[str, Any] | None) -> str:
    """Why a failed AppWrapper failed, from its Unhealthy condition and resettingCount, with who acts; "" when the
    owner is not a failed AppWrapper."""
    if not is_appwrapper(owner) or owner is None or s(m(owner.get("status")).get("phase")) != "Failed":
        return ""
    where = f"AppWrapper {namespace(owner)}/{name(owner)}"
    cond = conditions(owner).get("Unhealthy") or {}
    reason, msg = s(cond.get("reason")) or "", s(cond.get("message")) or ""
    if not is_true(cond) or not reason:
        return (f" {where} failed with no Unhealthy reason in its status: read its events (kubectl -n "
                f"{namespace(owner)} describe appwrapper {name(owner)}).")
    when = s(cond.get("lastTransitionTime"))
    text = (f" {where} failed{f' at {when}' if when else ''}, Unhealthy {reason}" + (f" ({msg})" if msg else "")
            + f": {_AW_UNHEALTHY.get(reason, 'see its events')}")
    if reason in _AW_RETRIED:
        done, limit, source = aw_retries(owner)
        if done >= limit:
            text += f", after {done} reset{'s' if done != 1 else ''}, its retry limit ({limit}, {source})"
        elif reason != "CreateFailed":
            text += (f", with {done} of {limit} resets used: an exit code the AppWrapper makes terminal (annotations "
                     f"{AW_ANNOTATION}terminalExitCodes / retryableExitCodes) failed it at once")
        else:
            text += f", with {done} of {limit} resets used: the error was fatal (an invalid or unknown component)"
    ns, nm = namespace(owner), name(owner)
    text += (f". Its components ({aw_components(owner) or 'none recorded'}) and their Pods are deleted; what is "
             f"left is in kubectl -n {ns} get events --field-selector involvedObject.name={nm}. The AppWrapper's owner "
             "fixes the cause and resubmits it (delete and recreate the AppWrapper)")
    if reason == "MissingComponent":
        text += ("; if nobody deleted the component, the AppWrapper controller's admin checks its logs for a stale "
                 "cache (appwrapper#416)")
    return text + "."


def is_rayservice(owner: Mapping[str, Any] | None) -> bool:
    return owner is not None and s(owner.get("kind")) == "RayService" and group_of(owner.get("apiVersion")) == "ray.io"


# Kueue's PodsReady of a RayService (jobs/rayservice PodsReady) is KubeRay's Ready condition of the RayService, True
# once its Serve applications serve: every Pod of it can be ready while Kueue says "Not all pods are ready", and
# waitForPodsReady then evicts it all the same (seen live: tests/e2e/test_family_ray.py)
SERVE_READY = "for a RayService Kueue's PodsReady is its Ready condition (Serve applications serving), not its Pods'"


def rayservice_ready(ctx: Context, short: bool = False) -> str | None:
    """"KubeRay reports RayService x Ready=False (Initializing: "...") since T" ("Ready=False (Initializing) since T"
    `short`), of a RayService owner whose Ready condition is not True; None for any other owner (or a ready one)."""
    owner = ctx.owner
    if owner is None or not is_rayservice(owner):
        return None
    ready = conditions(owner).get("Ready")
    if is_true(ready):
        return None
    if not ready:
        return "no Ready condition yet" if short else f"KubeRay has not reported RayService {name(owner)} Ready"
    word = "" if short else s(ready.get("message")) or ""
    word = word if len(word) <= 120 else word[:117] + "..."
    said = (f"Ready={s(ready.get('status')) or 'without a status'} ({s(ready.get('reason')) or 'no reason'}"
            + (f': "{word}"' if word else "")
            + f") since {when_text(parse_time(ready.get('lastTransitionTime')))}")
    return said if short else f"KubeRay reports RayService {name(owner)} {said}"


def rayservice_describe(ctx: Context) -> str:
    owner = ctx.owner
    return f"`kubectl describe rayservice {name(owner) if owner is not None else '?'} -n {ctx.ns}`"
