"""Scheduling-stage rules: Kueue admitted the Workload, why are its Pods not running?

Objects first (Pod conditions, scheduling gates, container states, Kueue's PodsReady), Events only for
what no object holds (the Job controller's FailedCreate).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..kube.objects import conditions, format_time, i, is_true, lst, m, name, parse_time, s, spec, status
from ..vocabulary import ActionBy
from . import pods as podlib
from .admission import label_selector_matches
from .context import Context, Finding, Rule

NOBODY, OWNER, CADMIN = ActionBy.NOBODY, ActionBy.WORKLOAD_OWNER, ActionBy.CLUSTER_ADMIN
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
PODS_READY_TIMEOUT = timedelta(minutes=30)  # Kueue's waitForPodsReady default since v0.19
CONTAINER_CREATING_GRACE = timedelta(minutes=5)

# How owners show suspension: (group, kind) -> path of the boolean. Kueue suspends these until admission.
SUSPEND_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch", "Job"): ("spec", "suspend"),
    ("jobset.x-k8s.io", "JobSet"): ("spec", "suspend"),
    ("ray.io", "RayJob"): ("spec", "suspend"),
    ("ray.io", "RayCluster"): ("spec", "suspend"),
    ("kubeflow.org", "MPIJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PyTorchJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "TFJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "XGBoostJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PaddleJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "JAXJob"): ("spec", "runPolicy", "suspend"),
    ("trainer.kubeflow.org", "TrainJob"): ("spec", "suspend"),
}


def _group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def owner_suspended(owner: Mapping[str, Any]) -> bool | None:
    path = SUSPEND_PATHS.get((_group(s(owner.get("apiVersion")) or ""), s(owner.get("kind")) or ""))
    if path is None:
        return None
    node: Any = owner
    for part in path:
        node = m(node).get(part)
    return node is True


def expected_pods(ctx: Context) -> int:
    total = 0
    assignments = lst(m(ctx.status.get("admission")).get("podSetAssignments"))
    counts: dict[str, int] = {}
    for ps in lst(ctx.spec.get("podSets")):
        counts[s(m(ps).get("name")) or "main"] = i(m(ps).get("count"), 1)
    if assignments:
        for psa in assignments:
            psa = m(psa)
            total += i(psa.get("count"), counts.get(s(psa.get("name")) or "main", 1))
    else:
        total = sum(counts.values())
    reclaimable = sum(i(m(r).get("count")) for r in lst(ctx.status.get("reclaimablePods")))
    return max(total - reclaimable, 0)


def assigned_flavors(ctx: Context) -> list[str]:
    out: list[str] = []
    for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")):
        for flavor in m(m(psa).get("flavors")).values():
            if isinstance(flavor, str) and flavor not in out:
                out.append(flavor)
    return out


def _admitted_since(ctx: Context) -> datetime | None:
    return ctx.cond_time("Admitted") or ctx.cond_time("QuotaReserved")


def _base_evidence(ctx: Context) -> list[dict[str, Any]]:
    ev = [ctx.condition_evidence("Admitted")]
    if ctx.cond("PodsReady"):
        ev.append(ctx.condition_evidence("PodsReady"))
    return ev


def _timeout_note(ctx: Context) -> str:
    if is_true(ctx.cond("PodsReady")) or ctx.cond_reason("PodsReady") not in ("WaitForStart", "WaitForRecovery", ""):
        return ""
    start = ctx.cond_time("PodsReady") if ctx.cond_reason("PodsReady") == "WaitForRecovery" else _admitted_since(ctx)
    if start is None or not ctx.cond("PodsReady"):
        return ""
    deadline = start + PODS_READY_TIMEOUT
    if deadline <= ctx.now:
        return (f" waitForPodsReady's default 30m timeout passed at {format_time(deadline)}: expect Kueue to evict "
                "it (PodsReadyTimeout) if the timeout is the default.")
    return (f" With waitForPodsReady's default 30m timeout, Kueue evicts it at about {format_time(deadline)} "
            "unless the Pods become ready.")


# --------------------------------------------------------------------------------------------------


def multikueue(ctx: Context) -> Finding | None:
    cluster = s(ctx.status.get("clusterName"))
    via_check = None
    for c in lst(ctx.status.get("admissionChecks")):
        ac = ctx.state.admission_checks.get(s(m(c).get("name")) or "")
        if ac is not None and s(spec(ac).get("controllerName")) == MULTIKUEUE_CONTROLLER:
            via_check = s(m(c).get("name"))
    if not cluster and not via_check:
        return None
    where = f"worker cluster {cluster}" if cluster else "a MultiKueue worker cluster"
    text = (f"Admitted and dispatched by MultiKueue to {where}: its Pods run there, not here. Look at the Workload "
            f"{ctx.ns}/{ctx.name} on {where} (run kueue-doctor there) for scheduling problems.")
    return Finding("Running", "DispatchedToWorkerCluster", NOBODY, text, since=_admitted_since(ctx),
                   evidence=_base_evidence(ctx), flavors=assigned_flavors(ctx))


def suspended_owner(ctx: Context) -> Finding | None:
    owner = ctx.owner
    if owner is None or owner_suspended(owner) is not True:
        return None
    since = _admitted_since(ctx)
    kind = s(owner.get("kind")) or "owner"
    late = since is not None and ctx.now - since > timedelta(minutes=2)
    text = (f"Admitted by {ctx.cq_text} at {format_time(since)}, but {kind} {name(owner)} is still "
            "suspended: Kueue's job controller unsuspends it after admission"
            + (" and should have by now; check the Kueue controller logs and the Job's events." if late else "."))
    return Finding("JobSuspended", "OwnerSuspended", NOBODY, text, since=since, evidence=_base_evidence(ctx),
                   flavors=assigned_flavors(ctx))


def pods_stage(ctx: Context) -> Finding | None:
    expected = expected_pods(ctx)
    since = _admitted_since(ctx)
    pods = ctx.pods
    if ctx.true("PodsReady"):
        return _running(ctx, "PodsReady", ctx.cond_time("PodsReady") or since, pods, expected)
    if not pods and _failed_create(ctx) is not None:
        summary = podlib.summarize_pods(pods, expected, ())
        return _not_created(ctx, summary, _pods_status(summary), _base_evidence(ctx))
    if not pods and not ctx.state.knows("Pod"):
        text = (f"Admitted by {ctx.cq_text} at {format_time(since)}, but Kueue reports the Pods not "
                f"ready ({ctx.cond_reason('PodsReady') or 'no PodsReady condition'}) and kueue-doctor cannot see the "
                f"Pods (none in the input): {_pods_command(ctx)}."
                + _timeout_note(ctx))
        if not ctx.cond("PodsReady"):
            return _running(ctx, "PodsRunning", since, pods, expected, unverified=True)
        return Finding("PodsNotReady", "PodsNotVisible", NOBODY, text, since=since, evidence=_base_evidence(ctx),
                       flavors=assigned_flavors(ctx))
    events = _pod_and_owner_events(ctx, pods)
    summary = podlib.summarize_pods(pods, expected, events)  # no clock: messages stay stable between passes
    pods_status = _pods_status(summary)
    evidence = _base_evidence(ctx)
    if summary.running + summary.succeeded >= expected > 0 and not summary.blockers:
        return _running(ctx, "PodsRunning", since, pods, expected, summary=summary)
    blocker = summary.blockers[0] if summary.blockers else None
    if blocker is None and summary.created < expected:
        return _not_created(ctx, summary, pods_status, evidence)
    if blocker is None:
        if ctx.true("PodsReady") or summary.running >= expected:
            return _running(ctx, "PodsRunning", since, pods, expected, summary=summary)
        text = f"Admitted at {format_time(since)}; Pods: {summary.describe()}."
        return Finding("ContainersNotStarting", "PodsNotReady", NOBODY, text + _timeout_note(ctx), since=since,
                       evidence=evidence, pods=pods_status, flavors=assigned_flavors(ctx))
    evidence.append(ctx.object_evidence("Pod", blocker.pod, "status", blocker.reason, blocker.message, blocker.since,
                                        ctx.ns))
    if blocker.category == "Unschedulable":
        return _unschedulable(ctx, summary, blocker, pods_status, evidence)
    if blocker.category == "SchedulingGated":
        kueue_gate = blocker.kueue_gated
        text = (f"{blocker.count}/{expected} Pods are held by scheduling gate {blocker.reason}"
                + (": Kueue removes its own gates after admission; if this lasts, check the Kueue controller."
                   if kueue_gate else ": the controller that added the gate must remove it.")
                + _timeout_note(ctx))
        return Finding("PodsUnschedulable", "SchedulingGated", NOBODY if kueue_gate else CADMIN, text,
                       since=blocker.since or since, evidence=evidence, pods=pods_status, flavors=assigned_flavors(ctx))
    if blocker.category == "Pending":
        text = (f"{blocker.count}/{expected} Pods have not been looked at by a scheduler "
                f"since {format_time(blocker.since or since)}: check spec.schedulerName and that that scheduler "
                "runs."
                + _timeout_note(ctx))
        return Finding("PodsUnschedulable", "NoSchedulingAttempt", CADMIN, text, since=blocker.since or since,
                       evidence=evidence, pods=pods_status, flavors=assigned_flavors(ctx))
    if blocker.category == "Terminating":
        text = f"{blocker.count} Pod(s) are terminating; Pods: {summary.describe()}."
        return Finding("ContainersNotStarting", "Terminating", NOBODY, text, since=blocker.since or since,
                       evidence=evidence, pods=pods_status, flavors=assigned_flavors(ctx))
    return _containers(ctx, summary, blocker, pods_status, evidence)


def _pods_command(ctx: Context) -> str:
    ref = ctx.owner_ref
    if ref is not None and ref.get("kind") == "Job" and s(ref.get("name")):
        return f"kubectl get pods -n {ctx.ns} -l batch.kubernetes.io/job-name={ref.get('name')}"
    return f"kubectl get pods -n {ctx.ns} -o wide | grep {s(ref.get('name')) if ref else ctx.name}"


def _failed_create(ctx: Context) -> tuple[str, str, datetime | None] | None:
    if ctx.owner is None:
        return None
    return podlib.job_failed_create(ctx.state.events_about(s(ctx.owner.get("kind")) or "", ctx.ns, name(ctx.owner)))


def _pod_and_owner_events(ctx: Context, pods: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for pod in pods:
        out.extend(ctx.state.events_about("Pod", ctx.ns, name(pod)))
    if ctx.owner is not None:
        out.extend(ctx.state.events_about(s(ctx.owner.get("kind")) or "", ctx.ns, name(ctx.owner)))
    return out


def _pods_status(summary: podlib.PodSummary) -> dict[str, Any]:
    return {
        "expected": summary.expected, "created": summary.created, "scheduled": summary.scheduled,
        "running": summary.running, "ready": summary.ready, "succeeded": summary.succeeded, "failed": summary.failed,
        "summary": summary.describe(),
        "waiting": [{k: v for k, v in {"category": b.category, "reason": b.reason, "count": b.count,
                                        "message": (b.message or "")[:512] or None, "pod": b.pod}.items()
                     if v is not None} for b in summary.blockers[:8]],
    }


def _running(ctx: Context, cause: str, since: datetime | None, pods: list[Mapping[str, Any]], expected: int,
             summary: podlib.PodSummary | None = None, unverified: bool = False) -> Finding:
    if summary is None and pods:
        summary = podlib.summarize_pods(pods, expected, ())
    counts = f"; Pods: {summary.describe()}" if summary is not None else ""
    text = f"Admitted by {ctx.cq_text} and running" + counts + "."
    if unverified:
        text = (f"Admitted by {ctx.cq_text} at {format_time(since)}; Kueue reports no PodsReady "
                "condition (waitForPodsReady off) and the input has no Pods, so it is taken as running.")
    return Finding("Running", cause, NOBODY, text, since=since, evidence=_base_evidence(ctx),
                   pods=_pods_status(summary) if summary is not None else None, flavors=assigned_flavors(ctx))


def _not_created(ctx: Context, summary: podlib.PodSummary, pods_status: dict[str, Any],
                 evidence: list[dict[str, Any]]) -> Finding:
    failed = _failed_create(ctx)
    since = _admitted_since(ctx)
    if failed is not None:
        reason, message, when = failed
        evidence.append(ctx.object_evidence("Event", name(ctx.owner) if ctx.owner else None, "event", reason,
                                            message, when, ctx.ns))
        quota_denied = "exceeded quota" in message
        text = (f"Admitted, but the Job controller cannot create the Pods "
                f"({summary.created}/{summary.expected} exist): "
                f"{message[:400]}. "
                + ("A namespace ResourceQuota denies them: raise it or lower the request."
                   if quota_denied else "Fix what the message names (webhook, LimitRange, PodSecurity)."))
        return Finding("PodsNotCreated", "FailedCreate", OWNER, text, since=when or since, evidence=evidence,
                       pods=pods_status, flavors=assigned_flavors(ctx))
    text = (f"Admitted at {format_time(since)}; {summary.created}/{summary.expected} Pods exist so far"
            + (f" ({summary.describe()})" if summary.created else "") + "." + _timeout_note(ctx))
    return Finding("PodsNotCreated", "PodsPending", NOBODY, text, since=since, evidence=evidence, pods=pods_status,
                   flavors=assigned_flavors(ctx))


def _unschedulable(ctx: Context, summary: podlib.PodSummary, blocker: podlib.PodBlocker,
                   pods_status: dict[str, Any], evidence: list[dict[str, Any]]) -> Finding:
    flavors = assigned_flavors(ctx)
    fit = summary.failure
    nodes = f" ({fit.raw[:300]})" if fit is not None and fit.raw else ""
    text = (f"Admitted by {ctx.cq_text}, but kube-scheduler cannot place "
            f"{blocker.count}/{summary.expected} "
            f"Pods (since {format_time(blocker.since)}): {blocker.reason}{nodes}.")
    hints = []
    for fname in flavors:
        hint = flavor_node_hint(ctx, fname)
        if hint:
            text += " " + hint
            hints.append(f"kubectl get nodes -l {_selector(fname, ctx)}" if _selector(fname, ctx) else
                         "kubectl get nodes")
            break
    if not hints:
        text += (" Kueue's quota is not node capacity: compare the flavor's nodeLabels/taints and the Pods' requests "
                 "with real nodes.")
    text += _timeout_note(ctx)
    action = CADMIN
    return Finding("PodsUnschedulable", "FailedScheduling", action, text, since=blocker.since or _admitted_since(ctx),
                   evidence=evidence, pods=pods_status, flavors=flavors,
                   hints=[*hints, f"kubectl describe pod {blocker.pod} -n {ctx.ns}"])


def _selector(flavor: str, ctx: Context) -> str:
    rf = ctx.state.flavors.get(flavor)
    labels = m(spec(rf).get("nodeLabels")) if rf else {}
    return ",".join(f"{k}={v}" for k, v in labels.items())


def flavor_node_hint(ctx: Context, flavor: str) -> str | None:
    """How many known nodes carry the flavor's nodeLabels (only when Nodes are in the input)."""
    rf = ctx.state.flavors.get(flavor)
    if rf is None:
        return None
    labels = dict(m(spec(rf).get("nodeLabels")))
    taints = [m(t) for t in lst(spec(rf).get("nodeTaints"))]
    if not labels and not taints:
        return None
    desc = f"ResourceFlavor {flavor} sends the Pods to nodes with " + (
        ",".join(f"{k}={v}" for k, v in labels.items()) or "any labels")
    if ctx.state.knows("Node"):
        matching = [n for n in ctx.state.nodes.values()
                    if label_selector_matches({"matchLabels": labels}, m(m(n.get("metadata")).get("labels")))]
        ready = [n for n in matching if is_true(conditions(n).get("Ready")) and not spec(n).get("unschedulable")]
        desc += f": {len(matching)} of {len(ctx.state.nodes)} nodes match ({len(ready)} ready and schedulable"
        node_taints = _node_taints(matching)
        desc += f"; tainted {', '.join(node_taints[:3])})" if node_taints else ")"
        if not matching:
            desc += "; fix the flavor's nodeLabels or label the nodes"
    return desc + "."


def _node_taints(nodes: list[Mapping[str, Any]]) -> list[str]:
    """Distinct NoSchedule/NoExecute taints of these nodes, as ``key=value:Effect``."""
    out: list[str] = []
    for n in nodes:
        for t in lst(spec(n).get("taints")):
            t = m(t)
            if t.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            value = s(t.get("value"))
            text = f"{s(t.get('key'))}{'=' + value if value else ''}:{t.get('effect')}"
            if text not in out:
                out.append(text)
    return out


def _container_cause(blocker: podlib.PodBlocker) -> str:
    if blocker.reason in CONTAINER_CAUSES:
        return blocker.reason
    if blocker.reason == "NoContainerStatus":  # bound, the kubelet has not reported the containers yet
        return "ContainerCreating"
    return "PodsFailed" if blocker.category == "Failing" else "PodsNotReady"


def _containers(ctx: Context, summary: podlib.PodSummary, blocker: podlib.PodBlocker, pods_status: dict[str, Any],
                evidence: list[dict[str, Any]]) -> Finding:
    cause = _container_cause(blocker)
    since = blocker.since or _admitted_since(ctx)
    fresh = since is not None and ctx.now - since < CONTAINER_CREATING_GRACE
    silent_kubelet = blocker.reason == "NoContainerStatus"
    # a kubelet that never reports the Pod it was given is a node problem, not the owner's
    action = NOBODY if cause == "ContainerCreating" else CADMIN if cause in NODE_SIDE_CAUSES else OWNER
    if silent_kubelet and not fresh:
        action = CADMIN
    msg = f": {blocker.message[:300]}" if blocker.message else ""
    if silent_kubelet:
        text = (f"Admitted and scheduled; the kubelet has not reported the containers of {blocker.count}/"
                f"{summary.expected} Pods yet (pod {blocker.pod}, bound since {format_time(since)})"
                + ("." if fresh else ": check the node's kubelet.") + _timeout_note(ctx))
    else:
        text = (f"Admitted and scheduled, but containers of {blocker.count}/{summary.expected} Pods do not start: "
                f"{blocker.reason}{msg} (pod {blocker.pod}).{_timeout_note(ctx)}")
    return Finding("ContainersNotStarting", cause, action, text, since=since, evidence=evidence, pods=pods_status,
                   flavors=assigned_flavors(ctx), hints=[f"kubectl describe pod {blocker.pod} -n {ctx.ns}"])


CONTAINER_CAUSES = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError",
                    "CreateContainerError", "CrashLoopBackOff", "RunContainerError", "ContainerCreating",
                    "FailedMount", "FailedAttachVolume", "FailedMapVolume", "FailedCreatePodSandBox",
                    "FailedPrepareDynamicResources"}
# kubelet start-up failures that are the node's or the platform's to fix, not the Job owner's
NODE_SIDE_CAUSES = {"FailedCreatePodSandBox", "FailedAttachVolume", "FailedMapVolume", "FailedPrepareDynamicResources"}

RULES: list[Rule] = [multikueue, suspended_owner, pods_stage]
"""Rules for an admitted Workload, in the order they are asked."""

__all__ = ["RULES", "parse_time", "status"]
