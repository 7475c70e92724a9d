"""Owners Kueue should manage and has made no Workload for: "did Kueue even take my Job?"

An owner (Job, JobSet, RayJob, ...) that carries the queue-name label (or any owner, when Kueue runs with
manageJobsWithoutQueueName) gets a Workload within a second from Kueue's job controller. When none exists
after `GRACE`, the engine diagnoses a Workload-shaped stand-in (`stand_in`) named as Kueue would name the
Workload, so the diagnosis object the user reads now is the one that continues once the Workload exists.
The rules below say why Kueue did not act, from Kueue's Configuration, the namespace, the owner's labels,
Kueue's own Events and Deployment; when none of that shows a cause, `WorkloadNotCreated` says what to collect.
A few owners Kueue never manages as they are written still get a stand-in because they wait suspended forever
(`NotManagedByKueue`: a queue name given as an annotation, a RayJob on an existing RayCluster).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..kube import kueue_config
from ..kube.kueue_names import (
    POD_GROUP_KEY,
    PODSET_LABEL,
    PREBUILT_LABEL,
    expected_workload_name,
    identifier,
    workload_name,
)
from ..kube.objects import (
    KUEUE_GROUP,
    conditions,
    controller_ref,
    format_duration,
    format_time,
    group_of,
    i,
    is_true,
    labels,
    lst,
    m,
    meta,
    name,
    namespace,
    ns_name,
    parse_time,
    release,
    s,
    spec,
    status,
    uid,
    when_text,
)
from ..kube.selectors import label_selector_matches
from ..state import OWNER_KINDS, QUEUE_LABEL, WORKLOAD_ANNOTATION, ClusterState, Derived
from ..vocabulary import ActionBy, Cause, Reason
from .admission.stalled import STALL_AFTER
from .context import STAND_IN_ANNOTATION, Context
from .owner_status import (
    RAY_CLUSTER_SELECTOR_KEY,
    existing_cluster_selector,
    owner_rejected,
    rayjob_finished,
    still_stopping,
)
from .pods.events import event_message, event_time
from .rules import Finding, Phase, rule
from .scheduling.owners import owner_suspended, suspend_path

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"  # workload slices: Kueue does not wait for such an owner
GRACE = timedelta(seconds=30)  # Kueue creates a Workload in well under a second; a cold start takes longer
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_DEPLOYMENT = kueue_config.DEPLOYMENT

# Owners that get one Workload of their own, and the name of their integration in Kueue's Configuration.
FRAMEWORKS: dict[tuple[str, str], str] = {
    ("batch", "Job"): "batch/job",
    ("jobset.x-k8s.io", "JobSet"): "jobset.x-k8s.io/jobset",
    ("ray.io", "RayJob"): "ray.io/rayjob",
    ("ray.io", "RayCluster"): "ray.io/raycluster",
    ("ray.io", "RayService"): "ray.io/rayservice",
    ("kubeflow.org", "MPIJob"): "kubeflow.org/mpijob",
    ("kubeflow.org", "PyTorchJob"): "kubeflow.org/pytorchjob",
    ("kubeflow.org", "TFJob"): "kubeflow.org/tfjob",
    ("kubeflow.org", "XGBoostJob"): "kubeflow.org/xgboostjob",
    ("kubeflow.org", "PaddleJob"): "kubeflow.org/paddlejob",
    ("kubeflow.org", "JAXJob"): "kubeflow.org/jaxjob",
    ("trainer.kubeflow.org", "TrainJob"): "trainer.kubeflow.org/trainjob",
    ("workload.codeflare.dev", "AppWrapper"): "workload.codeflare.dev/appwrapper",
    ("sparkoperator.k8s.io", "SparkApplication"): "sparkoperator.k8s.io/sparkapplication",  # alpha, behind a gate
    ("apps", "StatefulSet"): "statefulset",  # one Workload per StatefulSet (v0.19), while replicas > 0
}
# Conditions (type) by which an owner says it is done: a finished owner needs no Workload any more.
_DONE = ("Complete", "Completed", "Failed", "Succeeded", "SuccessCriteriaMet", "FailureTarget")
# a SparkApplication's status.applicationState.state when it is over (Kueue's Finished() reads the same)
_SPARK_DONE = ("COMPLETED", "FAILED", "SUBMISSION_FAILED")
# Warning Events Kueue's job reconciler posts on an owner it cannot build a Workload for.
# (PriorityClassNotFound: proposed in kubernetes-sigs/kueue#15175; v0.19 posts nothing for a missing PriorityClass)
_KUEUE_WARNINGS = ("ErrWorkloadCompose", "JobNestingTooDeep", "WorkloadPriorityClassNotFound",
                   "PriorityClassNotFound", "FailedToCreateWorkload", "CreateWorkloadFailed")
# PriorityClasses every cluster has (the apiserver creates them): naming one never keeps Kueue from a Workload
_SYSTEM_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


def _kind_key(owner: Mapping[str, Any]) -> tuple[str, str]:
    return group_of(owner.get("apiVersion")), s(owner.get("kind")) or ""


def _finished(owner: Mapping[str, Any]) -> bool:
    if rayjob_finished(owner) is not None:
        return True
    st = status(owner)
    if s(m(st.get("applicationState")).get("state")) in _SPARK_DONE:
        return True
    if s(st.get("phase")) in ("Succeeded", "Failed"):  # AppWrapper (its conditions name no end)
        return True
    return any(m(c).get("type") in _DONE and is_true(m(c)) for c in lst(st.get("conditions")))


def _child_of_owner(owner: Mapping[str, Any]) -> bool:
    """Kueue manages a child (a JobSet's Jobs, a RayJob's RayCluster) through its ancestor's Workload."""
    ref = controller_ref(owner)
    return ref is not None and (group_of(ref.get("apiVersion")), s(ref.get("kind")) or "") in OWNER_KINDS


def should_have_workload(state: ClusterState, owner: Mapping[str, Any]) -> bool:
    """Does Kueue manage this owner, and has it (as far as the input shows) no Workload? Grace not applied."""
    key = _kind_key(owner)
    if key not in FRAMEWORKS or not uid(owner) or meta(owner).get("deletionTimestamp"):
        return False
    if not state.knows("Workload") or _child_of_owner(owner) or _finished(owner):
        return False
    if key == ("apps", "StatefulSet") and spec(owner).get("replicas", 1) == 0:  # Kueue makes none for 0 replicas
        return False
    if existing_cluster_selector(owner) and not (owner_suspended(owner) or owner_rejected(owner)):
        return False  # Kueue skips it (kueue#7219): unsuspended and not refused by KubeRay, it runs outside Kueue
    if not s(labels(owner).get(QUEUE_LABEL)):
        cfg = state.kueue_config
        if not (cfg.known and cfg.manage_jobs_without_queue_name):
            # Kueue leaves it alone; one suspended by its creator that names its queue in an annotation waits forever
            if not (queue_annotation(owner) and owner_suspended(owner)):
                return False
        elif namespace_left_out(state, namespace(owner) or "") and not owner_suspended(owner):
            return False  # manage-all stops at the selector: a namespace left out on purpose (kube-system, by default)
    prebuilt = identifier(owner, PREBUILT_LABEL)
    if prebuilt and (namespace(owner) or "", prebuilt) in state.workloads:
        return False
    return not state.workloads_of_owner(owner)


def queue_annotation(owner: Mapping[str, Any]) -> str | None:
    """The queue name an owner gives as an annotation: Kueue reads only the label (QueueNameForObject; the
    annotation was dropped in v0.15), so such an owner is not queued by it."""
    return s(m(meta(owner).get("annotations")).get(QUEUE_LABEL)) or None


def grace_ends(owner: Mapping[str, Any], grace: timedelta = GRACE) -> datetime | None:
    created = parse_time(meta(owner).get("creationTimestamp"))
    return created + grace if created is not None else None


def stand_in(state: ClusterState, owner: Mapping[str, Any], now: datetime, grace: timedelta = GRACE
             ) -> dict[str, Any] | None:
    """The Workload Kueue would have made for `owner`, to be diagnosed in its place; None when Kueue has one,
    does not manage the owner, or `grace` has not passed since the owner was created (0 for a dump whose
    time is only known from its newest timestamp: the dump may have been taken long after)."""
    if not should_have_workload(state, owner):
        return None
    ends = grace_ends(owner, grace)
    if ends is not None and now < ends:
        return None
    kind = _kind_key(owner)[1]
    nm, ns, u = name(owner) or "", namespace(owner) or "", uid(owner) or ""
    wl_spec: dict[str, Any] = {}
    queue = s(labels(owner).get(QUEUE_LABEL))
    if queue:
        wl_spec["queueName"] = queue
    md: dict[str, Any] = {
        "name": expected_workload_name(owner),
        "namespace": ns,
        "annotations": {STAND_IN_ANNOTATION: "true"},
        "ownerReferences": [{"apiVersion": s(owner.get("apiVersion")) or "", "kind": kind, "name": nm, "uid": u,
                             "controller": True}],
    }
    if meta(owner).get("creationTimestamp"):
        md["creationTimestamp"] = meta(owner)["creationTimestamp"]
    return {"apiVersion": f"{KUEUE_GROUP}/v1beta2", "kind": "Workload", "metadata": md, "spec": wl_spec}


def stand_ins(state: ClusterState, now: datetime, grace: timedelta = GRACE) -> dict[tuple[str, str], dict[str, Any]]:
    """Every owner without a Workload, as (namespace, name) -> stand-in (and every incomplete Pod group)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for owner in state.owners.values():
        wl = stand_in(state, owner, now, grace)
        if wl is not None:
            out[ns_name(wl)] = wl
    out.update(pod_group_stand_ins(state, now, grace))
    return out


# ----- Pod groups (Kueue's pod integration): the Workload is the group's, named after it -----
# Seen on the real cluster (tests/e2e/test_family_pods.py): with fewer queued Pods than the group's
# pod-group-total-count, Kueue v0.19 creates no Workload at all, keeps every Pod gated
# (kueue.x-k8s.io/admission) and posts ErrWorkloadCompose "'<group>' group has fewer runnable pods than
# expected" on a Pod. Pods are no owners here, so such a group gets its own stand-in, named like Kueue's Workload.
POD_GROUP_LABEL = POD_GROUP_KEY
POD_GROUP_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
ADMISSION_GATE = "kueue.x-k8s.io/admission"


def _group_total(pods: list[Mapping[str, Any]]) -> int | None:
    for pod in pods:
        raw = s(m(meta(pod).get("annotations")).get(POD_GROUP_TOTAL_ANNOTATION))
        if raw and raw.isdigit() and int(raw) > 0:
            return int(raw)
    return None


def _runnable(pods: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The group's Pods Kueue counts: not failed, not being deleted (as its validatePodGroupMetadata)."""
    return [p for p in pods if s(status(p).get("phase")) != "Failed" and not meta(p).get("deletionTimestamp")]


def _gated(pod: Mapping[str, Any]) -> bool:
    return any(m(g).get("name") == ADMISSION_GATE for g in lst(spec(pod).get("schedulingGates")))


def _prebuilt(pods: list[Mapping[str, Any]]) -> str | None:
    """The prebuilt Workload the group's Pods name (Kueue's LeaderWorkerSet and StatefulSet integrations write
    it on every Pod, a user may on plain Pods)."""
    return next((found for p in pods if (found := identifier(p, PREBUILT_LABEL))), None)


def _prebuilt_missing(state: ClusterState, key: tuple[str, str], pods: list[Mapping[str, Any]]) -> bool:
    """A group whose Pods wait gated for the prebuilt Workload they name, which does not exist: Kueue waits for
    it and never creates one (handleJobWithNoWorkload returns ErrPrebuiltWorkloadNotFound). A group an owner
    kept here names by its own Workload's name (a StatefulSet's) is diagnosed through that owner."""
    prebuilt = _prebuilt(pods)
    return (prebuilt is not None and (key[0], prebuilt) not in state.workloads
            and any(_gated(p) for p in _runnable(pods)) and state.owner_for_workload_name(key) is None)


def _not_composed(state: ClusterState, key: tuple[str, str], pods: list[Mapping[str, Any]]) -> bool:
    """A complete group, gated, naming no prebuilt Workload, without a Workload: Kueue could not compose one (its
    Pods disagree on what it copies), or its controller is not running."""
    return (_prebuilt(pods) is None and any(_gated(p) for p in _runnable(pods))
            and state.owner_for_workload_name(key) is None)


def _disagreement(state: ClusterState, pods: list[Mapping[str, Any]]) -> tuple[str, list[tuple[str, str]]] | None:
    """(what, [(pod, value), ...]) of the first metadata the group's Pods disagree on that makes Kueue refuse to
    compose their Workload (pod_controller.go validatePodGroupMetadata: the queue name, the total count; getByKey:
    a label of integrations.labelKeysToCopy). Kueue only logs these: no Event says it."""
    live = sorted((p for p in pods if s(status(p).get("phase")) != "Failed"), key=lambda p: name(p) or "")
    copied = [s(k) or "" for k in lst(m(state.kueue_config.raw.get("integrations")).get("labelKeysToCopy"))]
    checks = [("label", QUEUE_LABEL, f"label {QUEUE_LABEL}"),
              ("annotation", POD_GROUP_TOTAL_ANNOTATION, f"annotation {POD_GROUP_TOTAL_ANNOTATION}")]
    checks += [("label", k, f"label {k} (copied to the Workload: integrations.labelKeysToCopy)") for k in copied if k]
    for where, key, what in checks:
        seen = [(name(p) or "", s(m(meta(p).get(f"{where}s")).get(key)) or "") for p in live]
        # a label Kueue copies may be missing on some Pods (getByKey compares only the values present)
        values = {v for _, v in seen if v or key in (QUEUE_LABEL, POD_GROUP_TOTAL_ANNOTATION)}
        if len(values) > 1:
            return what, seen
    return None


def pod_group_grace_ends(state: ClusterState, key: tuple[str, str], pods: list[Mapping[str, Any]],
                         grace: timedelta = GRACE) -> datetime | None:
    """When the Pod group `key` gets its stand-in: `grace` after its newest Pod was created (the minimum time
    when no Pod says); None when it is neither an incomplete group without a Workload nor a complete one whose
    prebuilt Workload is missing (`_prebuilt_missing`)."""
    total = _group_total(pods)
    if key in state.workloads or total is None:
        return None
    if len(_runnable(pods)) >= total and not _prebuilt_missing(state, key, pods) \
            and not _not_composed(state, key, pods):
        return None
    created = [t for t in (parse_time(meta(p).get("creationTimestamp")) for p in pods) if t is not None]
    return max(created) + grace if created else datetime.min.replace(tzinfo=UTC)


def pod_group_stand_ins(state: ClusterState, now: datetime, grace: timedelta = GRACE
                        ) -> dict[tuple[str, str], dict[str, Any]]:
    """Pod groups with fewer runnable queued Pods than their total count and no Workload, or complete ones
    whose prebuilt Workload is missing, `grace` after the newest Pod was created: (namespace, group) -> a
    stand-in Workload named after the group."""
    if not state.knows("Workload"):
        return {}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (ns, group), pods in state.pod_groups():
        ends = pod_group_grace_ends(state, (ns, group), pods, grace)
        if ends is None or now < ends:
            continue
        created = [t for t in (parse_time(meta(p).get("creationTimestamp")) for p in pods) if t is not None]
        first = min(pods, key=lambda p: name(p) or "")
        md: dict[str, Any] = {
            "name": group, "namespace": ns, "labels": {POD_GROUP_LABEL: group},
            "annotations": {STAND_IN_ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name(first) or "", "uid": uid(first) or "",
                                 "controller": True}],
        }
        if created:  # the first Pod's, among those with a readable one (a hand edit may leave one without)
            md["creationTimestamp"] = format_time(min(created))
        out[ns, group] = {"apiVersion": f"{KUEUE_GROUP}/v1beta2", "kind": "Workload", "metadata": md,
                          "spec": {"queueName": s(labels(first).get(QUEUE_LABEL)) or ""}}
    return out


# ----- the rules: why Kueue made no Workload -----

def _admitted_mark(pod: Mapping[str, Any]) -> str | None:
    """What Kueue writes only on the Pods of a Workload it admitted: its name (annotation), or the podset label."""
    said = s(m(meta(pod).get("annotations")).get(WORKLOAD_ANNOTATION))
    if said:
        return f"annotation {WORKLOAD_ANNOTATION}={said}"
    return f"label {PODSET_LABEL}" if PODSET_LABEL in labels(pod) else None


def _left_out(state: ClusterState) -> dict[str, tuple[str, str]]:
    """Namespaces whose Pods name a Workload the input lacks: namespace -> (Pod, Workload), the first found."""
    out: dict[str, tuple[str, str]] = {}
    for ns, wl_name, pod_name in state.named_workloads():
        if ns not in out and (ns, wl_name) not in state.workloads:
            out[ns] = (pod_name, wl_name)
    return out


WORKLOAD_NAMESPACES: Derived[frozenset[str]] = Derived("namespaces with Workloads in the input",
                                                        lambda state: frozenset(ns for ns, _ in state.workloads))
LEFT_OUT: Derived[dict[str, tuple[str, str]]] = Derived("namespaces whose Workloads the input left out", _left_out)


@rule(Phase.NO_WORKLOAD, [(Reason.UNKNOWN, Cause.WORKLOAD_NOT_IN_INPUT)])
def workload_not_in_input(ctx: Context) -> Finding | None:
    """Asked first: a dump with no Workload in the owner's namespace, where the owner's Pods carry what Kueue
    writes on an admitted Workload's Pods, or other Pods there name Workloads: the dump left them out, so no
    NoWorkload claim. Only for a dump: a listed cluster holds every Workload (a missing one is being recreated)."""
    if not ctx.state.dump or ctx.ns in ctx.state.derived(WORKLOAD_NAMESPACES):
        return None  # a namespace with Workloads in the dump: a missing one was deleted, not left out
    if ctx.owner is not None and _workload_gone_events(ctx):
        return None  # Kueue's own Event on the owner says its Workload was deleted
    owner = (f"{s(ctx.owner_ref.get('kind'))} {ctx.ns}/{s(ctx.owner_ref.get('name'))}" if ctx.owner_ref
             else f"{ctx.ns}/{ctx.name}")
    mine = next(((pod, mark) for pod in ctx.pods if (mark := _admitted_mark(pod)) is not None), None)
    if mine is not None:
        pod, mark = mine
        why = (f"its Pod {name(pod)} carries {mark}, which Kueue sets only on the Pods of a Workload it admitted: "
               "the dump left the Workload out")
    else:
        other = ctx.state.derived(LEFT_OUT).get(ctx.ns)
        if other is None:
            return None
        why = (f"Pod {other[0]} in the same namespace names Workload {other[1]}, which the input lacks too: the dump "
               "left this namespace's Workloads out")
    text = (f"The input has no Workload for {owner}, but {why}. Add them (kubectl get workloads -n {ctx.ns} -o yaml) "
            "to diagnose it.")
    evidence = [ctx.object_evidence("Pod", name(mine[0]), "metadata", reason=mine[1], ns=ctx.ns)] if mine else []
    return Finding(Reason.UNKNOWN, Cause.WORKLOAD_NOT_IN_INPUT, text, since=ctx.created, evidence=evidence,
                   hints=[f"kubectl get workloads -n {ctx.ns} -o yaml"])


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.POD_GROUP_INCOMPLETE)])
def pod_group_incomplete(ctx: Context) -> Finding | None:
    """Asked first: a Pod group's stand-in has no owner object (the other rules read the owner's)."""
    group = s(labels(ctx.wl).get(POD_GROUP_LABEL))
    if not group:
        return None
    pods = list(ctx.pods)
    runnable, total = len(_runnable(pods)), _group_total(pods) or 0
    if runnable >= total:
        return None  # complete: its prebuilt Workload is missing (pod_group_prebuilt_missing)
    gated = sum(1 for p in pods if _gated(p))
    said = [e for p in pods for e in ctx.state.events_about("Pod", ctx.ns, name(p))
            if s(e.get("reason")) == "ErrWorkloadCompose"]
    quote = f' Kueue said so on the Pods (ErrWorkloadCompose: "{event_message(said[-1])}").' if said else ""
    text = (f"Pod group {ctx.ns}/{group} has {runnable} of {total} Pods ({POD_GROUP_TOTAL_ANNOTATION}={total}"
            f"{f', {len(pods) - runnable} failed or deleting' if len(pods) > runnable else ''}), so Kueue has created "
            f"no Workload for it yet and keeps its Pods gated ({gated} carry the {ADMISSION_GATE} scheduling gate)."
            f"{quote} The owner of the Pods must create the missing {total - runnable} (label {POD_GROUP_LABEL}="
            f"{group}, queue label and the same total count), or set {POD_GROUP_TOTAL_ANNOTATION} to the group's "
            "real size.")
    ev = [ctx.object_evidence("Pod", name(p), f"metadata.annotations[{POD_GROUP_TOTAL_ANNOTATION}]",
                              reason=str(total), ns=ctx.ns) for p in pods[:1]]
    ev += [ctx.object_evidence("Event", name(e), "reason", reason="ErrWorkloadCompose", message=event_message(e),
                               ns=ctx.ns) for e in said[-1:]]
    return Finding(Reason.NO_WORKLOAD, Cause.POD_GROUP_INCOMPLETE, text, since=ctx.created, evidence=ev,
                   hints=[f"kubectl -n {ctx.ns} get pods -l {POD_GROUP_LABEL}={group}"])


# ----- a complete Pod group whose prebuilt Workload is missing -----
PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"  # the integration that gates the Pods (SuspendedByParent)
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


def _go_int_value(value: object) -> int:
    """Go's intstr.IntValue(), as Kueue reads maxSurge: a string is strconv.Atoi'd, a percentage is 0."""
    if isinstance(value, int):
        return value
    text = s(value) or ""
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else 0


MAX_SURGE_GROUPS = 1_000  # more surge groups than any rollout makes: the most `_lws_groups` names


def _lws_groups(ctx: Context, lws: Mapping[str, Any], first: int, last: int) -> list[tuple[int, str]]:
    """(index, Workload name) of the LeaderWorkerSet's groups first..last-1 whose Pods wait here for a Workload
    that does not exist (named as Kueue's GetWorkloadName does)."""
    lws_name, lws_uid = name(lws) or "", uid(lws) or ""
    waiting = set(ctx.state.pod_group_names())
    out = []
    # bounded: a hand-edited status.replicas (10^20) would otherwise keep the pass hashing names for ever
    for idx in range(first, min(last, first + MAX_SURGE_GROUPS)):
        wl = workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io", f"{lws_name}-{idx}", lws_uid)
        if (ctx.ns, wl) in waiting and (ctx.ns, wl) not in ctx.state.workloads:
            out.append((idx, wl))
    return out


def _lws_text(ctx: Context, pods: list[Mapping[str, Any]], waiting: str, gate: str, logs: str
              ) -> tuple[str, list[dict[str, Any]]]:
    """A LeaderWorkerSet group's missing Workload: what the rollout shows and why Kueue's LeaderWorkerSet
    integration made none (kueue#8769), from the LeaderWorkerSet when the input has it (the operator does not
    watch them). Kueue creates one Workload per group index below spec.replicas and, while a rolling update
    with maxSurge > 0 (read with IntValue()) has updatedReplicas below spec.replicas, below status.replicas
    (leaderworkerset_reconciler.go filterWorkloads / isRollingUpdateWithSurge)."""
    lws_name = s(labels(pods[0]).get(LWS_NAME_LABEL)) or "?"
    index = s(labels(pods[0]).get(LWS_GROUP_INDEX_LABEL)) or "?"
    lws = ctx.state.owners.get((ctx.ns, "LeaderWorkerSet", lws_name))
    head = (f"Group {index} of LeaderWorkerSet {ctx.ns}/{lws_name} has no Workload{waiting}: {gate}, which "
            "Kueue's LeaderWorkerSet integration named on them and owes")
    if lws is None:
        return (f"{head}. Kueue creates one per group below spec.replicas and, in a rolling update with an integer "
                "maxSurge, below status.replicas; up to v0.19.2 it reads a percentage maxSurge as 0 and makes none "
                "for the surge groups (kueue#8769). If this is a surge group and maxSurge is a percentage, a cluster "
                f"admin (or the LeaderWorkerSet's owner) sets maxSurge to an integer; otherwise search Kueue's logs "
                f"({logs})."), []
    replicas = spec(lws).get("replicas", 1)
    replicas = replicas if isinstance(replicas, int) else 1
    current, updated = i(status(lws).get("replicas")), i(status(lws).get("updatedReplicas"))
    surge_raw = m(m(spec(lws).get("rolloutStrategy")).get("rollingUpdateConfiguration")).get("maxSurge")
    surge_text = str(surge_raw) if surge_raw is not None else "0"
    numbers = (f"spec.replicas {replicas}, status.replicas {current}, updatedReplicas {updated}, maxSurge "
               f"{surge_text}")
    ev = [ctx.object_evidence("LeaderWorkerSet", lws_name, "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge",
                              reason=surge_text, ns=ctx.ns)]
    if not (index.isdigit() and int(index) >= replicas and current > replicas):
        return (f"{head} ({numbers}). Kueue creates one for every group below spec.replicas and has not for this "
                f"one: a cluster admin searches its logs ({logs})."), ev
    missing = _lws_groups(ctx, lws, replicas, current)
    groups = ", ".join(str(n) for n, _ in missing) or index
    rolling_out = (f"{head}. The LeaderWorkerSet is rolling out ({numbers}) and Kueue made no Workload for surge "
                   f"group(s) {groups}")
    if _go_int_value(surge_raw) > 0 and updated < replicas:
        return (f"{rolling_out}, though for an integer maxSurge it should (fixed in v0.16.2 and v0.17, kueue#8769): "
                f"a cluster admin checks Kueue's version and searches its logs ({logs})."), ev
    if not (isinstance(surge_raw, str) and surge_raw.endswith("%")):
        return (f"{rolling_out}: Kueue counts surge groups only while maxSurge is above 0 and updatedReplicas below "
                f"spec.replicas, so the LeaderWorkerSet should drop them as the rollout ends; if they stay, a cluster "
                f"admin searches Kueue's logs ({logs})."), ev
    surge = current - replicas
    patch = '{"spec":{"rolloutStrategy":{"rollingUpdateConfiguration":{"maxSurge":' + str(surge) + '}}}}'
    return (f"{rolling_out}: up to v0.19.2 it reads maxSurge with IntValue(), 0 for a percentage, so it keeps "
            f"Workloads for groups 0-{replicas - 1} only (kueue#8769), and the rollout is stuck. A cluster admin (or "
            f"the LeaderWorkerSet's owner) sets maxSurge to an integer, {surge} (the surge groups made): kubectl -n "
            f"{ctx.ns} patch leaderworkerset {lws_name} --type merge -p '{patch}', or 0; Kueue then creates the "
            "surge groups' Workloads."), ev


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED)])
def pod_group_not_composed(ctx: Context) -> Finding | None:
    """After `pod_group_incomplete`: a complete, gated Pod group that names no prebuilt Workload and has none
    (`_not_composed`). Its Pods disagreeing on what Kueue compares is theirs to fix; else Kueue's logs tell."""
    group = s(labels(ctx.wl).get(POD_GROUP_LABEL))
    pods = sorted(ctx.pods, key=lambda p: name(p) or "")
    if not group or not pods or _prebuilt(pods) is not None:
        return None
    waiting = f" after {format_duration(ctx.now - ctx.created, precise=True)}" if ctx.created else ""
    gate = f"all {len(_runnable(pods))} of its Pods exist, {sum(1 for p in pods if _gated(p))} behind the " \
        f"{ADMISSION_GATE} scheduling gate"
    hints = [f"kubectl -n {ctx.ns} get pods -l {POD_GROUP_LABEL}={group} --show-labels"]
    found = _disagreement(ctx.state, pods)
    if found is not None:
        what, seen = found
        values = ", ".join(f"{v or '(none)'} on {pod}" for pod, v in seen[:4])
        text = (f"Pod group {ctx.ns}/{group} has no Workload{waiting}: {gate}, but they disagree on {what} "
                f"({values}), so Kueue cannot build the group's Workload; it only logs it (no Event), and the Pods "
                "stay gated. The owner of the Pods gives every Pod of the group the same value (or recreates them "
                "so).")
        return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED, text, ActionBy.WORKLOAD_OWNER,
                       since=ctx.created, hints=hints,
                       evidence=[ctx.object_evidence("Pod", pod, what.split(" (")[0], reason=v or "(none)", ns=ctx.ns)
                                 for pod, v in seen[:4]])
    logs = f"kubectl -n {ctx.state.kueue_config.namespace} logs deploy/{KUEUE_DEPLOYMENT} | grep {group}"
    text = (f"Pod group {ctx.ns}/{group} has no Workload{waiting}: {gate}, and Kueue has not made its Workload, "
            "which takes it a second; the input does not show why (the Pods agree on their queue, total count and "
            f"the labels Kueue copies). A cluster admin reads Kueue's logs ({logs}).")
    return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED, text, since=ctx.created, hints=[*hints, logs])


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED),
                          (Reason.NO_WORKLOAD, Cause.PREBUILT_WORKLOAD_NOT_FOUND)])
def pod_group_prebuilt_missing(ctx: Context) -> Finding | None:
    """After `pod_group_incomplete`, and before the rules that read an owner (a group's stand-in has none): a
    complete Pod group whose Pods wait gated for the prebuilt Workload they name (`_prebuilt_missing`). Kueue
    waits for that Workload and never creates one; who owes it is who wrote the name: Kueue's integration of
    the parent that gates the Pods (pod-suspending-parent: LeaderWorkerSet, StatefulSet), else the Pods'
    creator."""
    group = s(labels(ctx.wl).get(POD_GROUP_LABEL))
    pods = sorted(ctx.pods, key=lambda p: name(p) or "")
    if not group or not pods:
        return None
    prebuilt = _prebuilt(pods) or group
    gated = sum(1 for p in pods if _gated(p))
    waiting = f" after {format_duration(ctx.now - ctx.created, precise=True)}" if ctx.created else ""
    parent = s(m(meta(pods[0]).get("annotations")).get(PARENT_ANNOTATION))
    ev = [ctx.object_evidence("Pod", name(pods[0]), f"metadata.annotations[{PREBUILT_LABEL}]", reason=prebuilt,
                              ns=ctx.ns, time=ctx.created)]
    logs = f"kubectl -n {ctx.state.kueue_config.namespace} logs deploy/{KUEUE_DEPLOYMENT} | grep {prebuilt}"
    gate = (f"all {_group_total(pods) or len(pods)} of its Pods exist and wait, {gated} behind the {ADMISSION_GATE} "
            f"scheduling gate, for the prebuilt Workload {prebuilt}")
    if not parent:
        text = (f"Pod group {ctx.ns}/{group} has no Workload{waiting}: {gate} ({PREBUILT_LABEL}), which does not exist "
                f"in {ctx.ns}; Kueue waits for it instead of creating one. The owner of the Pods must create Workload "
                f"{ctx.ns}/{prebuilt}, or recreate the Pods without that key.")
        return Finding(Reason.NO_WORKLOAD, Cause.PREBUILT_WORKLOAD_NOT_FOUND, text, since=ctx.created, evidence=ev,
                       hints=[f"kubectl -n {ctx.ns} get pods -l {POD_GROUP_LABEL}={group}"])
    if parent == LWS_FRAMEWORK and LWS_NAME_LABEL in labels(pods[0]):
        text, more = _lws_text(ctx, pods, waiting, f"its {gated} Pods wait behind the {ADMISSION_GATE} gate for "
                               f"{prebuilt}", logs)
        lws = s(labels(pods[0]).get(LWS_NAME_LABEL))
        return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED, text, since=ctx.created, evidence=[*ev, *more],
                       hints=[f"kubectl -n {ctx.ns} get leaderworkerset {lws} -o yaml", logs])
    text = (f"Pod group {ctx.ns}/{group} has no Workload{waiting}: {gate}, which Kueue's {parent} integration "
            "named on them and must create; Kueue waits for it and makes none itself (\"prebuilt workload not "
            f"found\" in its logs). A cluster admin searches Kueue's logs ({logs}).")
    return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED, text, since=ctx.created, evidence=ev, hints=[logs])


def _owner(ctx: Context) -> Mapping[str, Any]:
    owner = ctx.owner
    assert owner is not None, "a stand-in always has its owner in the state"
    return owner


def _what(ctx: Context) -> str:
    owner = _owner(ctx)
    return f"{s(owner.get('kind'))} {ctx.ns}/{name(owner)}"


def _waiting(ctx: Context) -> str:
    """The symptom: how long without a Workload, and whether the owner waits suspended or runs outside Kueue."""
    created = ctx.created
    age = f" after {format_duration(ctx.now - created)}" if created else ""
    suspended = owner_suspended(_owner(ctx))
    if suspended is True:  # not "until Kueue admits it": for some owners Kueue never will (the rule says which)
        state = " (it is suspended, so none of its Pods starts)"
    elif suspended is False:
        state = " (it is not suspended: it runs outside Kueue's quota)"
    else:
        state = ""
    return f"{_what(ctx)} has no Workload{age}{state}"


def _evidence(ctx: Context, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    owner = _owner(ctx)
    queue = s(labels(owner).get(QUEUE_LABEL))
    ev = [ctx.object_evidence(s(owner.get("kind")) or "", name(owner), f"metadata.labels[{QUEUE_LABEL}]",
                              reason=queue or "(none)", ns=ctx.ns, time=ctx.created)]
    return [*ev, *extra]


def _config_evidence(ctx: Context, field_: str, value: str) -> dict[str, Any]:
    kind, obj_name, ns = ctx.state.kueue_config.ref
    return ctx.object_evidence(kind, obj_name, field_, reason=value, ns=ns)


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.PREBUILT_WORKLOAD_NOT_FOUND)])
def prebuilt_workload_missing(ctx: Context) -> Finding | None:
    prebuilt = identifier(_owner(ctx), PREBUILT_LABEL)
    if not prebuilt:
        return None
    text = (f"{_waiting(ctx)}. Its {PREBUILT_LABEL}={prebuilt} (annotation or label) names a prebuilt Workload "
            f"that does not exist in {ctx.ns}, and Kueue waits for it instead of creating one. The owner of the Job "
            f"must create Workload {ctx.ns}/{prebuilt} or remove that key.")
    return Finding(Reason.NO_WORKLOAD, Cause.PREBUILT_WORKLOAD_NOT_FOUND, text, since=ctx.created,
                   evidence=_evidence(ctx))


# the owners Kueue v0.19.2 lets be elastic (workloadslicing.Enabled in their webhooks): resized while they run
_ELASTIC_KINDS = frozenset({"Job", "RayCluster", "RayService", "SparkApplication"})
# jobframework's own texts when the Workload is gone (reconciler.go: ensureOneWorkload's "Missing Workload; unable to
# restore pod templates" and "No matching Workload; restoring pod templates according to existent Workload", the
# Workload's deletion's "Workload is deleted"); stopJob posts every other stop (an eviction's message, such as
# "Workload was evicted as there was no replacement for unhealthy node(s)") as a Stopped Event too
_GONE_PREFIXES = ("Missing Workload;", "No matching Workload;", "Workload is deleted")


def _workload_gone_events(ctx: Context) -> list[Mapping[str, Any]]:
    """Kueue's Events on the owner that say its Workload went away: Stopped with one of `_GONE_PREFIXES`, and
    DeletedWorkload "Deleted not matching Workload: ns/name" (jobframework ensureOneWorkload)."""
    owner = _owner(ctx)
    return [e for e in ctx.state.events_about(s(owner.get("kind")) or "", ctx.ns, name(owner))
            if (s(e.get("reason")) == "Stopped" and (s(e.get("message")) or "").startswith(_GONE_PREFIXES))
            or s(e.get("reason")) == "DeletedWorkload"]


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED)])
def owner_still_active(ctx: Context) -> Finding | None:
    """After Kueue's Configuration and a missing prebuilt Workload: a suspended owner whose status still counts it
    active. Kueue creates a Workload only once the owner is inactive (handleJobWithNoWorkload: "Job is suspended but
    still has active pods, waiting"), as after its Workload was deleted while it ran (Kueue suspends it then, Event
    Stopped "Missing Workload; unable to restore pod templates"). Elastic owners (workload slices) do not wait.
    A stop takes a while (Pods get their grace period): nobody's to act on until STALL_AFTER from when it began,
    unless a Pod waits on a node that is down."""
    owner = _owner(ctx)
    if m(meta(owner).get("annotations")).get(ELASTIC_JOB_ANNOTATION) == "true":
        return None
    stopping = still_stopping(ctx, "creates its Workload")
    if stopping is None:
        return None
    stopped = next((e for e in _workload_gone_events(ctx) if s(e.get("reason")) == "Stopped"), None)
    at = event_time(stopped) if stopped is not None else None
    lead = f"{_waiting(ctx)}."
    if stopped is not None:
        msg = s(stopped.get("message")) or ""
        lead = (f"{_what(ctx)} has had no Workload since Kueue stopped it at {when_text(at)}"
                + (f" ({format_duration(ctx.now - at)} ago)" if at is not None else "") + f" (\"{msg}\"): "
                + ("it ran without a Workload (deleted while it ran, or the owner was created unsuspended)."
                   if msg.startswith("Missing") else
                   "its pod sets changed while it ran (worker replicas, or a template), so its "
                   "Workload no longer matched it and Kueue deleted it"
                   + (f"; only an elastic one (annotation {ELASTIC_JOB_ANNOTATION}: \"true\", feature gate "
                      "ElasticJobsViaWorkloadSlices) may be resized while it runs."
                      if s(owner.get("kind")) in _ELASTIC_KINDS else ".")))
    text = f"{lead} {stopping.text}"
    since = at or stopping.since or ctx.created
    action = ActionBy.CLUSTER_ADMIN
    if not stopping.node_down and since is not None and not ctx.after(since, STALL_AFTER):
        action = ActionBy.NOBODY
        text += (f" Nothing to do yet: stopping takes the Pods' grace period, and Kueue creates the Workload once it "
                 f"is done (still stopping {format_duration(STALL_AFTER)} after {when_text(since)}, it is stuck).")
    ev = [ctx.object_evidence("Event", name(stopped), "reason", reason="Stopped", message=s(stopped.get("message")),
                              ns=ctx.ns)] if stopped is not None else []
    return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED, text, action, since=since,
                   evidence=_evidence(ctx, *stopping.evidence, *ev))


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.NOT_MANAGED_BY_KUEUE)])
def rayjob_on_existing_cluster(ctx: Context) -> Finding | None:
    """Before Kueue's Configuration, which cannot change it: Kueue v0.19 skips a RayJob with spec.clusterSelector
    (RayJob.Skip) while its webhook still suspends one that has a queue name, and KubeRay refuses to run a
    suspended RayJob on an existing cluster (kueue#7219). Its stand-in exists only when it is suspended or
    refused (`should_have_workload`)."""
    owner = _owner(ctx)
    selector = existing_cluster_selector(owner)
    if selector is None:
        return None
    cluster = selector.get(RAY_CLUSTER_SELECTOR_KEY, "")
    chosen = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
    queue = s(labels(owner).get(QUEUE_LABEL))
    rejected = owner_rejected(owner)
    why = (f"Its label {QUEUE_LABEL}={queue} still made Kueue's webhook suspend it at creation" if queue else
           "It is suspended (with manageJobsWithoutQueueName on, Kueue's webhook suspends every RayJob created in a "
           "namespace it manages, even one it then skips)")
    then = (f", and KubeRay refuses a suspended RayJob: jobDeploymentStatus ValidationFailed, \"{rejected}\", which "
            "KubeRay never retries" if rejected else ", and Kueue, which skips it, will never unsuspend it")
    fix = (f"delete the RayJob and create it again without the label {QUEUE_LABEL}" if queue else
           "create it again in a namespace managedJobsNamespaceSelector leaves out")
    text = (f"{_waiting(ctx)}. It runs on an existing RayCluster (spec.clusterSelector {chosen}), and Kueue does not "
            f"manage such RayJobs (kueue#7219): their Pods are the RayCluster's, whose quota "
            f"{_cluster_workload(ctx, cluster)}. {why}{then}. The owner of the RayJob must {fix}.")
    ev = [ctx.object_evidence("RayJob", name(owner), "spec.clusterSelector", reason=chosen, ns=ctx.ns)]
    if rejected:
        ev.append(ctx.object_evidence("RayJob", name(owner), "status.jobDeploymentStatus", reason="ValidationFailed",
                                      message=rejected, ns=ctx.ns))
    return Finding(Reason.NO_WORKLOAD, Cause.NOT_MANAGED_BY_KUEUE, text, since=ctx.created,
                   evidence=_evidence(ctx, *ev),
                   hints=[f"kubectl -n {ctx.ns} get raycluster {cluster}" if cluster else
                          f"kubectl -n {ctx.ns} get rayclusters --show-labels"])


def _cluster_workload(ctx: Context, cluster: str) -> str:
    """Where the quota of a RayJob on an existing RayCluster is held, as the end of a sentence: the RayCluster's
    Workload (found by owner, else by the name Kueue gives it, which is all a shard keeps of another's)."""
    rc = ctx.state.owners.get((ctx.ns, "RayCluster", cluster)) if cluster else None
    if rc is None:
        return (f"is held by the Workload of RayCluster {ctx.ns}/{cluster}, when it is queued through Kueue" if cluster
                else "is held by the Workload of the RayCluster it selects, when that is queued through Kueue")
    keys = ctx.state.workloads_of_owner(rc)
    key = keys[0] if keys else (ctx.ns, expected_workload_name(rc))
    wl = ctx.state.workloads.get(key)
    if wl is None:
        return (f"Kueue does not hold at all: RayCluster {ctx.ns}/{cluster} has no Workload in the input (it needs a "
                f"{QUEUE_LABEL} label of its own)")
    admitted = "admitted" if is_true(conditions(wl).get("Admitted")) else "not admitted"
    return f"is held by Workload {key[0]}/{key[1]} of RayCluster {cluster} ({admitted})"


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.INTEGRATION_NOT_ENABLED)])
def integration_not_enabled(ctx: Context) -> Finding | None:
    cfg = ctx.state.kueue_config
    framework = FRAMEWORKS[_kind_key(_owner(ctx))]
    if not cfg.known or cfg.framework_enabled(framework):
        return None
    enabled = ", ".join(sorted(cfg.frameworks | cfg.external_frameworks))
    text = (f"{_waiting(ctx)}. Kueue does not manage {s(_owner(ctx).get('kind'))}s: integration "
            f"{framework} is not in integrations.frameworks of Kueue's Configuration ({cfg.source}; enabled: "
            f"{enabled}). A cluster admin must add {framework} there and restart Kueue's controller manager.")
    return Finding(Reason.NO_WORKLOAD, Cause.INTEGRATION_NOT_ENABLED, text, since=ctx.created,
                   evidence=_evidence(ctx, _config_evidence(ctx, "integrations.frameworks", enabled)),
                   hints=[f"kubectl -n {cfg.namespace} get configmap kueue-manager-config -o yaml"])


def namespace_left_out(state: ClusterState, ns: str) -> bool:
    """Kueue's Configuration (read) has a managedJobsNamespaceSelector that the namespace (in the input) fails."""
    cfg = state.kueue_config
    ns_obj, selector = state.namespaces.get(ns), cfg.managed_jobs_namespace_selector
    return cfg.known and ns_obj is not None and selector is not None \
        and not label_selector_matches(selector, labels(ns_obj))


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.NAMESPACE_NOT_MANAGED)])
def namespace_not_managed(ctx: Context) -> Finding | None:
    if not namespace_left_out(ctx.state, ctx.ns):
        return None
    cfg = ctx.state.kueue_config
    ns_obj, selector = ctx.state.namespaces[ctx.ns], cfg.managed_jobs_namespace_selector or {}
    text = (f"{_waiting(ctx)}. Namespace {ctx.ns} does not match managedJobsNamespaceSelector of Kueue's "
            f"Configuration ({cfg.source}), so Kueue's job controller ignores the namespace"
            + (" although its webhook suspended the Job" if owner_suspended(_owner(ctx)) else "") + ". "
            + (_defaulted_queue(ctx) or "A cluster admin must label the namespace to match the selector"
               + (f" (`{command}`)" if (command := _label_command(ctx.ns, selector, labels(ns_obj))) else "")
               + " (or widen the selector), or run the Job in a managed namespace."))
    ns_labels = ", ".join(f"{k}={v}" for k, v in sorted(labels(ns_obj).items())) or "(none)"
    return Finding(Reason.NO_WORKLOAD, Cause.NAMESPACE_NOT_MANAGED, text, since=ctx.created,
                   evidence=_evidence(ctx, _config_evidence(ctx, "managedJobsNamespaceSelector", str(dict(selector))),
                                      ctx.object_evidence("Namespace", ctx.ns, "metadata.labels", reason=ns_labels)),
                   hints=[f"kubectl get namespace {ctx.ns} --show-labels"])


def _label_command(ns: str, selector: Mapping[str, Any], has: Mapping[str, Any]) -> str | None:
    """The one command that opts the namespace in, when the selector is plain matchLabels (the Red Hat build of
    Kueue's kueue.openshift.io/managed=true is one): the label to add, not a selector to decode at 3 a.m. With
    --overwrite when the namespace has the key with another value (`has`: its labels), which kubectl refuses
    otherwise."""
    match = m(selector.get("matchLabels"))
    if not match or lst(selector.get("matchExpressions")):
        return None
    overwrite = " --overwrite" if any(k in has for k in match) else ""
    return (f"kubectl label namespace {ns}{overwrite} "
            + " ".join(f"{k}={s(v) or ''}" for k, v in sorted(match.items())))


DEFAULT_LOCAL_QUEUE = "default"  # constants.DefaultLocalQueueName
_DEFAULTING_FIXED = (0, 19, 1)  # ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector (kueue#13374)


def _defaulted_queue(ctx: Context) -> str | None:
    """The remedy when Kueue itself put the owner's queue name there: before v0.19.1 its webhook set
    queue-name=default on an unlabelled owner in a namespace with a LocalQueue 'default' without asking
    managedJobsNamespaceSelector, and the label then made it suspend the owner (kueue#13374). Labelling the
    namespace would hand Kueue a namespace left out on purpose, so that is the last remedy, not the first."""
    owner = _owner(ctx)
    if s(labels(owner).get(QUEUE_LABEL)) != DEFAULT_LOCAL_QUEUE or (ctx.ns, DEFAULT_LOCAL_QUEUE) not in \
            ctx.state.local_queues:
        return None
    version = _kueue_version(ctx.state)
    if version is not None and version[0] >= _DEFAULTING_FIXED:
        return None  # fixed: someone else wrote the label
    lq, kind = f"{ctx.ns}/{DEFAULT_LOCAL_QUEUE}", s(owner.get("kind")) or ""
    suspend = ".".join(suspend_path(owner) or ("spec", "suspend"))
    running = f"Kueue {version[1]}" if version is not None else "Kueue (if older than v0.19.1)"
    return (f"{running} likely wrote its label {QUEUE_LABEL}={DEFAULT_LOCAL_QUEUE} itself: as LocalQueue {lq} exists, "
            f"it sets that label on a {kind} created without one before it checks the selector, then suspends it "
            f"for the label (kueue#13374, fixed in v0.19.1). If {ctx.ns} is left out on purpose, a cluster admin "
            f"upgrades Kueue or deletes LocalQueue {lq} (unused in a namespace Kueue does not manage); then the "
            f"{kind}'s owner creates it again, or removes the label and sets {suspend}: false (Kueue refuses the "
            f"removal while {lq} exists). Otherwise label {ctx.ns} to match the selector.")


def _kueue_version(state: ClusterState) -> tuple[tuple[int, int, int], str] | None:
    """The release of Kueue's controller manager, from its Deployment's image tag (vX.Y.Z); None when the input
    has no such Deployment or the tag is no release."""
    deployment = state.owners.get((state.kueue_config.namespace, "Deployment", KUEUE_DEPLOYMENT))
    pod_spec = m(m(spec(deployment or {}).get("template")).get("spec"))
    for container in lst(pod_spec.get("containers")):
        found = release(m(container).get("image"))
        if found:
            return found, "v" + ".".join(map(str, found))
    return None


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.NOT_MANAGED_BY_KUEUE)])
def queue_name_in_annotation(ctx: Context) -> Finding | None:
    """After Kueue's Configuration (an integration off or a namespace left out explains it first): an owner with
    no queue-name label, its queue named in an annotation, suspended by its creator. Kueue reads only the label,
    so it never makes a Workload and never unsuspends it; its stand-in exists only so (`should_have_workload`)."""
    owner = _owner(ctx)
    queue = queue_annotation(owner)
    mode = _unlabelled_unmanaged(ctx.state, owner)
    if not queue or s(labels(owner).get(QUEUE_LABEL)) or owner_suspended(owner) is not True or mode is None:
        return None
    kind = s(owner.get("kind")) or ""
    command = f"kubectl -n {ctx.ns} label {kind.lower()} {name(owner)} {QUEUE_LABEL}={queue}"
    existing = sorted(nm for (ns, nm) in ctx.state.local_queues if ns == ctx.ns)
    missing = (f" LocalQueue {queue} does not exist in {ctx.ns} either: name one that does ("
               f"{', '.join(existing[:5]) or 'there is none'})." if ctx.state.knows("LocalQueue")
               and (ctx.ns, queue) not in ctx.state.local_queues else "")
    text = (f"{_waiting(ctx)}. It carries {QUEUE_LABEL}={queue} as an annotation, not a label: Kueue reads only the "
            f"label (it dropped the annotation in v0.15) and {mode}, so Kueue does not manage this {kind}. It is "
            f"suspended all the same (not by Kueue, which leaves it alone), and nothing will ever "
            f"unsuspend it. The owner of the {kind} must set the label ({command}; Kueue's webhook accepts it while "
            f"the {kind} is suspended) and move the queue name to metadata.labels in its manifest.{missing}")
    return Finding(Reason.NO_WORKLOAD, Cause.NOT_MANAGED_BY_KUEUE, text, since=ctx.created,
                   evidence=_evidence(ctx, ctx.object_evidence(kind, name(owner),
                                                               f"metadata.annotations[{QUEUE_LABEL}]", reason=queue,
                                                               ns=ctx.ns)),
                   hints=[command])


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.KUEUE_NOT_RUNNING)])
def kueue_not_running(ctx: Context) -> Finding | None:
    kueue_ns = ctx.state.kueue_config.namespace
    deployment = ctx.state.owners.get((kueue_ns, "Deployment", KUEUE_DEPLOYMENT))
    if deployment is None:
        return None
    available = status(deployment).get("availableReplicas")
    if isinstance(available, int) and available > 0:
        return None
    text = (f"{_waiting(ctx)}. Deployment {kueue_ns}/{KUEUE_DEPLOYMENT} has no available replica, so Kueue creates "
            "and admits no Workload at all. A cluster admin must get Kueue's controller manager running again "
            f"(kubectl -n {kueue_ns} get pods; kubectl -n {kueue_ns} logs deploy/{KUEUE_DEPLOYMENT}).")
    return Finding(Reason.NO_WORKLOAD, Cause.KUEUE_NOT_RUNNING, text, since=ctx.created,
                   evidence=_evidence(ctx, ctx.object_evidence("Deployment", KUEUE_DEPLOYMENT,
                                                               "status.availableReplicas", reason=str(available or 0),
                                                               ns=kueue_ns)))


def _kueue_warnings(ctx: Context) -> list[Mapping[str, Any]]:
    owner = _owner(ctx)
    out = []
    for ev in ctx.state.events_about(s(owner.get("kind")) or "", ctx.ns, name(owner)):
        source = s(m(ev.get("source")).get("component")) or s(ev.get("reportingController")) or ""
        if s(ev.get("type")) == "Warning" and (s(ev.get("reason")) in _KUEUE_WARNINGS or "kueue" in source):
            out.append(ev)
    return sorted(out, key=lambda e: s(e.get("lastTimestamp")) or s(e.get("eventTime")) or "")


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.WORKLOAD_PRIORITY_CLASS_NOT_FOUND)])
def priority_class_missing(ctx: Context) -> Finding | None:
    wanted = s(labels(_owner(ctx)).get(PRIORITY_LABEL))
    said = [e for e in _kueue_warnings(ctx) if s(e.get("reason")) == "WorkloadPriorityClassNotFound"]
    missing = bool(wanted) and ctx.state.knows("WorkloadPriorityClass") and wanted not in ctx.state.priority_classes
    if not said and not missing:
        return None
    text = (f"{_waiting(ctx)}. Its label {PRIORITY_LABEL}={wanted or '?'} names a WorkloadPriorityClass that does not "
            "exist, so Kueue cannot build the Workload. The owner of the Job must fix the label (kubectl get "
            "workloadpriorityclasses lists the valid ones), or a cluster admin creates that class.")
    ev = [ctx.object_evidence("Event", name(e), "reason", reason=s(e.get("reason")), message=s(e.get("message")),
                              ns=ctx.ns) for e in said[-1:]]
    return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_PRIORITY_CLASS_NOT_FOUND, text, since=ctx.created,
                   evidence=_evidence(ctx, *ev))


# A Workload holds at most this many PodSets (jobframework.MaxPodSets, the CRD's spec.podSets maxItems, Kueue v0.19).
MAX_POD_SETS = 18
# Owners whose every entry of this list becomes one PodSet, and that Kueue's webhook does not limit (RayCluster's does).
_POD_SET_LISTS = {("jobset.x-k8s.io", "JobSet"): "replicatedJobs"}


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED)])
def too_many_pod_sets(ctx: Context) -> Finding | None:
    """The owner would make a Workload of more PodSets than the CRD allows: the apiserver refuses it, and Kueue
    only logs the error (no Event), retrying for ever (kubernetes-sigs/jobset#597)."""
    owner = _owner(ctx)
    field = _POD_SET_LISTS.get(_kind_key(owner))
    count = len(lst(spec(owner).get(field))) if field else 0
    if count <= MAX_POD_SETS:
        return None
    kind = s(owner.get("kind")) or ""
    text = (f"{_waiting(ctx)}. It has {count} {field} and Kueue makes one PodSet of each, but a Workload holds at "
            f"most {MAX_POD_SETS}: the apiserver refuses the Workload (\"spec.podSets: Too many: {count}: must have at "
            f"most {MAX_POD_SETS} items\" in Kueue's logs, no Event), so Kueue can never admit it. The owner of the "
            f"{kind} must bring it to {MAX_POD_SETS} {field} or fewer (merge those with the same Pod template into one "
            f"with more replicas, or split the {kind}) and create it again (kubernetes-sigs/jobset#597).")
    return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED, text, ActionBy.WORKLOAD_OWNER, since=ctx.created,
                   evidence=_evidence(ctx, ctx.object_evidence(kind, name(owner), f"spec.{field}", reason=str(count),
                                                               ns=ctx.ns)))


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.WORKLOAD_REJECTED)])
def workload_rejected(ctx: Context) -> Finding | None:
    warnings = _kueue_warnings(ctx)
    if not warnings:
        return None
    last = warnings[-1]
    text = (f"{_waiting(ctx)}. Kueue could not create its Workload and said so in a Warning Event "
            f"{s(last.get('reason'))}: \"{s(last.get('message'))}\". The owner of the Job must fix what the Event "
            f"names (kubectl -n {ctx.ns} describe {s(_owner(ctx).get('kind'))} {name(_owner(ctx))}).")
    return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_REJECTED, text, since=ctx.created,
                   evidence=_evidence(ctx, ctx.object_evidence("Event", name(last), "reason",
                                                               reason=s(last.get("reason")),
                                                               message=s(last.get("message")), ns=ctx.ns)))


@rule(Phase.NO_WORKLOAD, [(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED)])
def workload_not_created(ctx: Context) -> Finding | None:
    """Asked last: nothing in the input says why."""
    cfg = ctx.state.kueue_config
    kueue_ns = cfg.namespace
    unread = "" if cfg.known else (
        f" kueue-doctor could not read Kueue's Configuration ({cfg.problem or cfg.source}), so it cannot tell "
        "whether the integration is enabled or the namespace managed; grant it get on ConfigMap "
        f"{kueue_ns}/kueue-manager-config.")
    text = (f"{_waiting(ctx)}, and the input does not show why.{unread}{_priority_class_hint(ctx)} A cluster admin "
            "should check that Kueue runs "
            f"(kubectl -n {kueue_ns} get pods) and search its logs for the owner's name (kubectl -n {kueue_ns} logs "
            f"deploy/{KUEUE_DEPLOYMENT} | grep {name(_owner(ctx))}).")
    return Finding(Reason.NO_WORKLOAD, Cause.WORKLOAD_NOT_CREATED, text, since=ctx.created, evidence=_evidence(ctx))


def _priority_class_hint(ctx: Context) -> str:
    """The one silent cause the owner shows: without a WorkloadPriorityClass label Kueue takes the priority from
    the Pods' PriorityClass, and when that class does not exist it makes no Workload and posts no Event
    (kubernetes-sigs/kueue#15171). kueue-doctor does not read PriorityClasses, so it is named as a suspect."""
    owner = _owner(ctx)
    if s(labels(owner).get(PRIORITY_LABEL)):
        return ""
    classes = sorted(set(_pod_priority_classes(spec(owner))) - _SYSTEM_PRIORITY_CLASSES)
    if not classes:
        return ""
    return (f" Its Pods name PriorityClass {', '.join(classes)}: if it does not exist (kubectl get priorityclass "
            f"{classes[0]}), Kueue cannot set the Workload's priority and creates none, without an Event "
            "(kubernetes-sigs/kueue#15171); then the owner of the Job fixes priorityClassName, or a cluster admin "
            "creates the class.")


def _pod_priority_classes(value: Any, depth: int = 0) -> list[str]:
    """Every priorityClassName under an owner's spec, at any depth (a Job's template, a JobSet's replicated Jobs',
    a RayJob's head and workers')."""
    if depth > 12:
        return []
    if isinstance(value, Mapping):
        found = [v for k, v in value.items() if k == "priorityClassName" and isinstance(v, str) and v]
        for k, v in value.items():
            if k != "priorityClassName" and isinstance(v, (Mapping, list)):
                found += _pod_priority_classes(v, depth + 1)
        return found
    if isinstance(value, list):
        return [c for v in value for c in _pod_priority_classes(v, depth + 1)]
    return []


def _unlabelled_unmanaged(state: ClusterState, owner: Mapping[str, Any]) -> str | None:
    """Why Kueue leaves an owner without a queue name alone, from its Configuration; None when it manages it."""
    cfg = state.kueue_config
    if not cfg.known:
        return "Kueue manages unlabelled Jobs only with manageJobsWithoutQueueName"
    if not cfg.manage_jobs_without_queue_name:
        return "manageJobsWithoutQueueName is off in Kueue's Configuration"
    ns = namespace(owner) or ""
    if namespace_left_out(state, ns):
        return (f"namespace {ns} does not match managedJobsNamespaceSelector of Kueue's Configuration "
                "(manageJobsWithoutQueueName is on, for the namespaces that selector matches)")
    return None


def unmanaged_reason(state: ClusterState, owner: Mapping[str, Any], now: datetime, grace: timedelta = GRACE
                     ) -> str | None:
    """Why an owner the user named has no diagnosis, in one sentence (None: it has one, or a Workload)."""
    what = f"{s(owner.get('kind'))} {namespace(owner)}/{name(owner)}"
    if state.workloads_of_owner(owner):
        return None
    if _kind_key(owner) not in FRAMEWORKS:
        return (f"kueue-doctor: {what} has no Workload in the input; Kueue gives each Pod of a "
                f"{s(owner.get('kind'))} a Workload of its own (labelled {QUEUE_LABEL}), and the input has none of "
                f"its Pods with one: kubectl get pods -n {namespace(owner)} --show-labels, then explain pod/NAME.")
    if _child_of_owner(owner):
        ref = controller_ref(owner) or {}
        return (f"kueue-doctor: {what} belongs to {s(ref.get('kind'))} {s(ref.get('name'))}; Kueue manages it through "
                f"that owner's Workload: kueue-doctor explain -n {namespace(owner)} "
                f"{(s(ref.get('kind')) or '').lower()}/{s(ref.get('name'))}")
    if _finished(owner):
        keep = state.kueue_config.retention("afterFinished")
        deleted = (f" (Kueue deletes finished Workloads {format_duration(keep, precise=True)} after they finish: "
                   "objectRetentionPolicies.workloads.afterFinished of its Configuration)" if keep is not None else "")
        return f"kueue-doctor: {what} has finished, and Kueue keeps no Workload for it in the input{deleted}."
    selector = existing_cluster_selector(owner)
    if selector is not None:
        cluster = selector.get(RAY_CLUSTER_SELECTOR_KEY, "")
        return (f"kueue-doctor: {what} runs on an existing RayCluster (spec.clusterSelector), and Kueue does not "
                "manage such RayJobs (kueue#7219): its Pods are the RayCluster's and count against that one's Workload"
                + (f": kueue-doctor explain -n {namespace(owner)} raycluster/{cluster}" if cluster else "."))
    mode = _unlabelled_unmanaged(state, owner) if not s(labels(owner).get(QUEUE_LABEL)) else None
    if mode is not None:
        annotated = queue_annotation(owner)
        queue = annotated or "<LocalQueue>"
        head = (f"kueue-doctor: {what} has no label {QUEUE_LABEL}"
                + (f" (its {QUEUE_LABEL}={annotated} is an annotation, which Kueue does not read)" if annotated else "")
                + f" and {mode}, so Kueue does not manage it")
        kind = s(owner.get("kind")) or ""
        path = suspend_path(owner)
        if owner_suspended(owner) is False and path is not None:
            # Kueue's webhook keeps the queue name immutable while the owner runs (validateUpdateForQueueName)
            return (f"{head}: it runs outside Kueue's quota. Kueue's webhook refuses the label while it runs: "
                    f"recreate it with the label {QUEUE_LABEL}={queue}, or set {'.'.join(path)}: true first "
                    f"and then the label (kubectl -n {namespace(owner)} label {kind.lower()} {name(owner)} "
                    f"{QUEUE_LABEL}={queue}).")
        return (f"{head}: it runs (or waits) outside Kueue. To queue it, set the label: kubectl -n "
                f"{namespace(owner)} label {kind.lower()} {name(owner)} {QUEUE_LABEL}={queue}")
    if not state.knows("Workload"):
        return (f"kueue-doctor: {what} asks for Kueue, but the input has no Workloads to look in; include "
                "`kubectl get workloads -A -o yaml`.")
    ends = grace_ends(owner, grace)
    if ends is not None and now < ends:
        return (f"kueue-doctor: {what} was created {format_duration(now - (ends - grace))} ago and Kueue has not made "
                f"its Workload yet; that normally takes under a second. Ask again in {format_duration(ends - now)}.")
    return None
