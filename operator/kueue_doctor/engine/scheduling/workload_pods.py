"""Admitted: are the Pods created, placed on nodes and started? One rule per way they are not.

The Pods are summarised once per Workload (`pod_view`, no clock: messages stay stable between passes);
each rule then reads one fact of the summary. Neighbours: `engine/pods/` (kube-scheduler and kubelet
texts), `nodes.py` (the flavor's nodes), `dispatch.py` (asked before these).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...kube.kueue_names import POD_GROUP_KEY, PODSET_LABEL, provisioning_request_name
from ...kube.objects import (
    clip,
    closed,
    conditions,
    format_duration,
    i,
    is_true,
    labels,
    later,
    lst,
    m,
    name,
    owner_refs,
    parse_time,
    pod_owner_refs,
    s,
    spec,
    when_text,
)
from ...state import QUEUE_LABEL, Derived
from ...vocabulary import ActionBy, Cause, Reason
from .. import pods as podlib
from ..context import Context
from ..owner_status import (
    SERVE_READY,
    owner_rejected,
    owner_text,
    pods_command,
    rayservice_describe,
    rayservice_ready,
)
from ..rules import Finding, Phase, pairs, rule
from . import accounting, appwrapper, early_start, followers
from .nodes import flavor_node_hint, flavor_selector
from .owners import (
    admitted_since,
    assigned_flavors,
    base_evidence,
    expected_by_pod_set,
    expected_pods,
    owner_jobset,
    topology_assigned_pods,
    unmet_dependencies,
)
from .placement import Placement, conflict_note, job_failures, placement, resource_claims

CONTAINER_CREATING_GRACE = timedelta(minutes=5)
CONTAINER_CAUSES = {str(c): c for c in (
    Cause.IMAGE_PULL_BACKOFF, Cause.ERR_IMAGE_PULL, Cause.INVALID_IMAGE_NAME, Cause.CREATE_CONTAINER_CONFIG_ERROR,
    Cause.CREATE_CONTAINER_ERROR, Cause.CRASH_LOOP_BACKOFF, Cause.RUN_CONTAINER_ERROR, Cause.CONTAINER_CREATING,
    Cause.FAILED_MOUNT, Cause.FAILED_ATTACH_VOLUME, Cause.FAILED_MAP_VOLUME, Cause.FAILED_CREATE_POD_SANDBOX,
    Cause.FAILED_PREPARE_DYNAMIC_RESOURCES)}
# the kubelet's other waiting reasons (pkg/kubelet/images/types.go, kuberuntime), told by the cause they refine;
# the message keeps the kubelet's own word
KUBELET_ALIASES = {"ErrImageNeverPull": Cause.ERR_IMAGE_PULL, "ImageInspectError": Cause.ERR_IMAGE_PULL,
                   "RegistryUnavailable": Cause.ERR_IMAGE_PULL, "SignatureValidationFailed": Cause.ERR_IMAGE_PULL,
                   "PreStartHookError": Cause.CREATE_CONTAINER_ERROR, "PostStartHookError": Cause.RUN_CONTAINER_ERROR}
# kubelet start-up failures that are the node's or the platform's to fix, not the Job owner's
NODE_SIDE_CAUSES = {Cause.FAILED_CREATE_POD_SANDBOX, Cause.FAILED_ATTACH_VOLUME, Cause.FAILED_MAP_VOLUME,
                    Cause.FAILED_PREPARE_DYNAMIC_RESOURCES}
NODE_SIDE_REASONS = {"ImageInspectError"}  # the node's runtime cannot read an image it holds


def timeout_note(ctx: Context) -> str:
    """When the Pods' wait ends by itself: the owner's own reset (an AppWrapper's), Kueue's waitForPodsReady, its
    maximum execution time."""
    return appwrapper.reset_note(ctx) + _kueue_timeout_note(ctx) + max_exec_note(ctx)


def max_exec_note(ctx: Context) -> str:
    """When Kueue stops an admitted Workload for its maximum execution time: its admitted time, earlier admissions'
    included (status.accumulatedPastExecutionTimeSeconds), reaching spec.maximumExecutionTimeSeconds deactivates it
    (workload_controller.go reconcileMaxExecutionTime, from Admitted's lastTransitionTime)."""
    limit = i(ctx.spec.get("maximumExecutionTimeSeconds"))
    admitted = ctx.cond_time("Admitted") if ctx.true("Admitted") else None
    if limit <= 0 or admitted is None:
        return ""
    used = i(ctx.status.get("accumulatedPastExecutionTimeSeconds"))
    deadline = later(admitted, limit - used)
    if deadline is None:  # a limit no clock reaches
        return ""
    left = deadline - admitted
    ref = ctx.owner_ref
    what = (f"spec.maximumExecutionTimeSeconds {limit}"
            + (f", from {owner_text(ctx)}'s label kueue.x-k8s.io/max-exec-time-seconds" if ref is not None else "")
            + (f"; {used}s of it used by earlier admissions" if used else ""))
    if ctx.after(admitted, left):
        return (f" Its maximum execution time ran out at {when_text(deadline)} ({what}): expect Kueue to deactivate "
                "it and stop its Pods (Evicted DeactivatedDueToMaximumExecutionTimeExceeded).")
    return (f" Kueue deactivates it and stops its Pods at about {when_text(deadline)} ({what}): the clock runs from "
            "the admission, time spent waiting for Pods included.")


NO_CONFIG = "; its Configuration is not in the input"  # an aside a long message may drop (Finding.notes)


def pods_ready_deadline(ctx: Context, start: datetime, recovering: bool = False
                        ) -> tuple[str, datetime | None] | None:
    """waitForPodsReady's timeout (or recoveryTimeout) as Kueue applies it to this Workload: (its length and where it
    comes from, the deadline counted from `start`; None for a timeout no clock reaches), or None when Kueue runs
    without waitForPodsReady (no PodsReady condition, or none configured)."""
    cfg = ctx.state.kueue_config
    seconds = cfg.pods_ready_recovery_timeout if recovering else cfg.pods_ready_timeout
    if seconds is None or not ctx.cond("PodsReady"):
        return None
    length = format_duration(seconds, precise=True)
    which = (f"{length}, {cfg.source}" if cfg.known
             else f"Kueue's default {length}{NO_CONFIG}")
    return which, later(start, seconds)


def _kueue_timeout_note(ctx: Context, ready: str = "the Pods become ready") -> str:
    found = _pods_ready_timeout(ctx)
    if found is None:
        return ""
    field_, which, deadline, passed = found
    if passed:
        return (f" waitForPodsReady's {field_} passed at {when_text(deadline)} ({which}): expect Kueue to evict it "
                "(PodsReadyTimeout).")
    return (f" With waitForPodsReady's {field_} ({which}), Kueue evicts it at about {when_text(deadline)} unless "
            f"{ready}.")


def _pods_ready_timeout(ctx: Context) -> tuple[str, str, datetime, bool] | None:
    """waitForPodsReady's clock on this Workload while its Pods are not ready: (timeout or recoveryTimeout, its
    length and source, the deadline, whether it passed); None without one."""
    if is_true(ctx.cond("PodsReady")) or ctx.cond_reason("PodsReady") not in ("WaitForStart", "WaitForRecovery", ""):
        return None
    recovering = ctx.cond_reason("PodsReady") == "WaitForRecovery"
    start = ctx.cond_time("PodsReady") if recovering else admitted_since(ctx)
    timeout = pods_ready_deadline(ctx, start, recovering) if start is not None else None
    if start is None or timeout is None:
        return None
    which, deadline = timeout
    if deadline is None:  # a timeout no clock reaches
        return None
    return "recoveryTimeout" if recovering else "timeout", which, deadline, ctx.after(start, deadline - start)


def transient_note(ctx: Context) -> str:
    """The end of a verdict whose wait is kube-scheduler's own and short (preempted Pods terminating, Pods being
    bound): nothing to do, unless waitForPodsReady's deadline passed meanwhile: then Kueue evicts the Workload
    (workload_controller.go reconcileNotReadyTimeout, "Exceeded the PodsReady timeout"), transient or not, and the
    Workload goes back to the queue with its Pods stopped."""
    found = _pods_ready_timeout(ctx)
    if found is None or not found[3]:
        return " Nothing to do: this is transient."
    field_, which, deadline, _ = found
    return (f" Transient on kube-scheduler's side, but waitForPodsReady's {field_} ({which}) passed at "
            f"{when_text(deadline)}, {format_duration(ctx.now - deadline)} ago: expect Kueue to evict it "
            "(PodsReadyTimeout) and stop its Pods whatever kube-scheduler does meanwhile, then requeue it after a "
            "back-off.")


@dataclass(frozen=True)
class PodView:
    """The Workload's Pods summarised once, and what every Pod verdict shows of them."""

    expected: int
    summary: podlib.PodSummary
    status: dict[str, Any]

    @property
    def blocker(self) -> podlib.PodBlocker | None:
        return self.summary.blockers[0] if self.summary.blockers else None


def _groups(blockers: tuple[podlib.PodBlocker, ...]) -> list[dict[str, Any]]:
    return [{k: v for k, v in {"category": b.category, "reason": b.reason, "count": b.count,
                               "message": (b.message or "")[:512] or None, "pod": b.pod}.items()
             if v is not None} for b in blockers[:8]]


def _pods_status(summary: podlib.PodSummary) -> dict[str, Any]:
    out = {
        "expected": summary.expected, "created": summary.created, "scheduled": summary.scheduled,
        "running": summary.running, "ready": summary.ready, "succeeded": summary.succeeded, "failed": summary.failed,
        "summary": summary.describe(), "waiting": _groups(summary.blockers),
    }
    if summary.history:
        out["history"] = _groups(summary.history)
    return out


def _events(ctx: Context) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for pod in ctx.pods:
        out.extend(ctx.state.events_about("Pod", ctx.ns, name(pod)))
    if ctx.owner is not None:
        out.extend(ctx.state.events_about(s(ctx.owner.get("kind")) or "", ctx.ns, name(ctx.owner)))
    return out


def pod_view(ctx: Context) -> PodView:
    expected = expected_pods(ctx)
    summary = podlib.summarize_pods(ctx.pods, expected, _events(ctx))
    return PodView(expected, summary, _pods_status(summary))


UNSCHEDULABLE_CAUSES = (Cause.FAILED_SCHEDULING, Cause.INSUFFICIENT_RESOURCES, Cause.POD_TOO_LARGE,
                        Cause.NODE_SELECTOR_MISMATCH, Cause.UNTOLERATED_TAINT, Cause.VOLUME_NOT_BOUND,
                        Cause.VOLUME_NODE_CONFLICT, Cause.POD_PREEMPTION_IN_PROGRESS)


# who posts each reason (FailedCreate: the controller of the object it is about, Job or StatefulSet)
_CREATOR = {"FailedCreatePod": "the training operator", "FailedToCreateWorkerPod": "KubeRay",
            "FailedToCreateHeadPod": "KubeRay", podlib.JOB_CREATION_FAILED: "the JobSet controller"}


# the apiserver's validation of a container asking for an extended resource (nvidia.com/gpu ...) without a limit
_NO_LIMIT = "Limit must be set for non overcommitable resources"
_EXTENDED_NO_LIMIT = ("The apiserver refuses a container that requests an extended resource (nvidia.com/gpu, "
                      "google.com/tpu ...) without a limit: the owner sets limits equal to the requests for it (a "
                      "TrainJob: spec.trainer.resourcesPerNode, or its runtime's template) and recreates it "
                      "(kubeflow/trainer#2363).")


def _failed_create(ctx: Context) -> tuple[str, str, datetime | None, Mapping[str, Any]] | None:
    """The newest "could not create Pods" event about the owner or an object it made (a JobSet's or TrainJob's
    Jobs, a RayJob's RayCluster: the controller that failed posts it on its own object), and that object."""
    if ctx.owner is None:
        return None
    best: tuple[str, str, datetime | None, Mapping[str, Any]] | None = None
    for obj in (ctx.owner, *ctx.state.descendants(ctx.owner)):
        found = podlib.job_failed_create(ctx.state.events_about(s(obj.get("kind")) or "", ctx.ns, name(obj)))
        if found is not None and (best is None or (found[2] is not None and (best[2] is None or found[2] > best[2]))):
            best = (*found, obj)
    return best


def _running(ctx: Context, cause: Cause, since: datetime | None, summary: podlib.PodSummary | None = None,
             unverified: bool = False) -> Finding:
    if summary is None and ctx.pods:
        summary = podlib.summarize_pods(ctx.pods, expected_pods(ctx), ())
    counts = f"; Pods: {summary.describe()}" if summary is not None else ""
    text = f"Admitted by {ctx.cq_text} and running" + counts + "."
    if summary is not None and cause == Cause.PODS_RUNNING:
        text += _rayservice_not_ready(ctx)
    if unverified:
        text = (f"Admitted by {ctx.cq_text} at {when_text(since)}; Kueue reports no PodsReady "
                "condition (waitForPodsReady off) and the input has no Pods, so it is taken as running.")
    books = accounting.own_overrun(ctx) if ctx.pods else ""  # more Pods run than Kueue charges (kueue#14609)
    books += conflict_note(ctx) if ctx.pods else ""  # Kueue sent the Pods to one flavor's nodes only (kueue#14409)
    text += max_exec_note(ctx)
    return Finding(Reason.RUNNING, cause, text + books, ActionBy.CLUSTER_ADMIN if books else ActionBy.NOBODY,
                   since=since, evidence=base_evidence(ctx),
                   pods=_pods_status(summary) if summary is not None else None, flavors=assigned_flavors(ctx))


def _rayservice_not_ready(ctx: Context) -> str:
    """Every Pod ready next to Kueue's PodsReady=False: a RayService KubeRay does not call Ready (`SERVE_READY`),
    which waitForPodsReady evicts at its timeout all the same."""
    if ctx.cond("PodsReady") is None or ctx.true("PodsReady"):
        return ""
    said = rayservice_ready(ctx)
    if said is None:
        return ""
    return (f" Kueue's PodsReady is False ({ctx.cond_reason('PodsReady') or 'no reason'}) all the same: {SERVE_READY}; "
            f"{said}: its Serve applications do not serve yet ({rayservice_describe(ctx)} shows their statuses and "
            "KubeRay's Events)."
            + _kueue_timeout_note(ctx, "KubeRay calls the RayService Ready"))


@rule(Phase.ADMITTED, [(Reason.RUNNING, Cause.PODS_READY), (Reason.PODS_NOT_CREATED, Cause.FAILED_CREATE),
                        *pairs(Reason.PODS_UNSCHEDULABLE, *UNSCHEDULABLE_CAUSES)])
def pods_ready(ctx: Context) -> Finding | None:
    if not ctx.true("PodsReady"):
        return None
    ready_at = ctx.cond_time("PodsReady")
    stuck = _unschedulable_while_ready(ctx, ready_at)
    if stuck is not None:
        return stuck
    failed = _failed_create(ctx)
    if failed is not None and failed[2] is not None and (ready_at is None or failed[2] > ready_at):
        # Kueue counts succeeded Pods as ready (a Job with completions > parallelism keeps PodsReady=True
        # between waves): with none active and the controller failing to create the next ones, nothing runs
        summary = podlib.summarize_pods(ctx.pods, expected_pods(ctx), ())
        if summary.created - summary.succeeded - summary.failed <= 0:
            return _not_created(ctx, summary, _pods_status(summary), base_evidence(ctx))
    return _running(ctx, Cause.PODS_READY, ready_at or admitted_since(ctx))


# seconds a Pod stays unschedulable under PodsReady=True before that is news: a replaced Pod is pending for a moment
UNSCHEDULABLE_WHILE_READY_AFTER = timedelta(seconds=120)


def _unschedulable_while_ready(ctx: Context, ready_at: datetime | None) -> Finding | None:
    """PodsReady=True while Pods of the Workload stay unschedulable: Kueue counted the Workload ready too early (a
    plain Pod group with pod-group-fast-admission whose Pods differ, kubernetes-sigs/kueue#11595), so
    waitForPodsReady never evicts it and its quota stays held. The Pods' own verdict, with that said."""
    if all(s(spec(pod).get("nodeName")) for pod in ctx.pods):
        return None  # every Pod has a node: none is unschedulable, and a running Workload's Pods are not read twice
    view = ctx.lazy(pod_view)
    blocker = view.blocker
    if blocker is None or blocker.category != "Unschedulable" \
            or not ctx.after(blocker.since, UNSCHEDULABLE_WHILE_READY_AFTER):
        return None
    found = pods_unschedulable.check(ctx)
    if found is None:
        return None
    since = f" since {when_text(ready_at)}" if ready_at is not None else ""
    found.message += (f" Kueue nevertheless reports PodsReady=True{since}, so waitForPodsReady will not evict the "
                      f"Workload and its quota in {ctx.cq_name or 'the ClusterQueue'} stays held while these Pods wait "
                      "(Kueue counts a pod group with pod-group-fast-admission ready before all its Pods are, "
                      "kubernetes-sigs/kueue#11595).")
    return found


@rule(Phase.ADMITTED, pairs(Reason.PODS_NOT_CREATED, Cause.FAILED_CREATE))
def pods_failed_create(ctx: Context) -> Finding | None:
    if ctx.pods or _failed_create(ctx) is None:
        return None
    summary = podlib.summarize_pods(ctx.pods, expected_pods(ctx), ())
    return _not_created(ctx, summary, _pods_status(summary), base_evidence(ctx))


@rule(Phase.ADMITTED, [(Reason.PODS_NOT_READY, Cause.PODS_NOT_VISIBLE), (Reason.RUNNING, Cause.PODS_RUNNING)])
def pods_not_visible(ctx: Context) -> Finding | None:
    if ctx.pods or (ctx.state.knows("Pod") and not (ctx.state.dump and ctx.ns in ctx.state.derived(PODS_LEFT_OUT))):
        return None
    since = admitted_since(ctx)
    if not ctx.cond("PodsReady"):
        return _running(ctx, Cause.PODS_RUNNING, since, unverified=True)
    text = (f"Admitted by {ctx.cq_text} at {when_text(since)}, but Kueue reports the Pods not "
            f"ready ({ctx.cond_reason('PodsReady') or 'no PodsReady condition'}) and kueue-doctor cannot see the "
            f"Pods (none in the input): {pods_command(ctx)}." + timeout_note(ctx))
    return Finding(Reason.PODS_NOT_READY, Cause.PODS_NOT_VISIBLE, text, ActionBy.NOBODY, since=since,
                   evidence=base_evidence(ctx), flavors=assigned_flavors(ctx))


def _pods_left_out(state: Any) -> frozenset[str]:
    """A dump's namespaces without a single Pod but with Events about Pods: its Pods were dumped for other
    namespaces only, so "no Pod" there says nothing."""
    with_pods = {ns for ns, _ in state.pods}
    out = set()
    for event in state.events.values():
        ref = m(event.get("involvedObject") or event.get("regarding"))
        ns = s(ref.get("namespace")) or ""
        if ref.get("kind") == "Pod" and ns not in with_pods:
            out.add(ns)
    return frozenset(out)


PODS_LEFT_OUT: Derived[frozenset[str]] = Derived("namespaces whose Pods a dump left out", _pods_left_out)


@rule(Phase.ADMITTED, pairs(Reason.PODS_NOT_CREATED, Cause.PODS_FAILED))
def pod_group_replacements(ctx: Context) -> Finding | None:
    """A plain Pod group whose failed Pods Kueue waits to see replaced (WaitingForReplacementPods=True): no
    controller makes plain Pods, so the group's creator must, whatever the failed ones' containers said."""
    if not ctx.true("WaitingForReplacementPods") or pod_owner_refs(ctx.wl) is None:
        return None
    view = ctx.lazy(pod_view)
    summary = view.summary
    failed = [b for b in summary.blockers if b.category == "Failing"]
    missing = max(summary.expected - summary.active - summary.succeeded, 1)
    cond = ctx.cond("WaitingForReplacementPods") or {}
    why = "; ".join(f"{b.count} failed ({b.detail or b.reason}, pod {b.pod})" for b in failed[:3])
    group = name(ctx.wl) or ""
    since = parse_time(m(cond).get("lastTransitionTime")) or admitted_since(ctx)
    text = (f"Admitted Pod group {ctx.ns}/{group} has {summary.active} of {summary.expected} Pods active"
            + (f": {why}" if why else "") + f". Kueue waits for {missing} replacement Pod(s) "
            f"(WaitingForReplacementPods: \"{s(m(cond).get('message')) or 'Some Failed pods need replacement'}\"). "
            "This is a plain Pod group: no controller creates its Pods, so whoever created them must create the "
            f"replacements (label {POD_GROUP_KEY}={group}, the queue label and the same pod-group-total-count), after "
            "fixing what made the others fail." + timeout_note(ctx))
    evidence = [ctx.condition_evidence("WaitingForReplacementPods"),
                *(e for b in failed[:1] for e in _blocker_evidence(ctx, b))]
    return Finding(Reason.PODS_NOT_CREATED, Cause.PODS_FAILED, text, ActionBy.WORKLOAD_OWNER, since=since,
                   evidence=evidence, pods=view.status, flavors=assigned_flavors(ctx))


@rule(Phase.ADMITTED, [(Reason.RUNNING, Cause.PODS_RUNNING), (Reason.CONTAINERS_NOT_STARTING, Cause.PODS_NOT_READY)])
def pods_running(ctx: Context) -> Finding | None:
    """All expected Pods run (or none is blocked and enough run). No blocker, all created, fewer running
    than expected (Pods Ready but not in phase Running): ContainersNotStarting/PodsNotReady, nobody acts."""
    view = ctx.lazy(pod_view)
    summary = view.summary
    if summary.running + summary.succeeded >= view.expected > 0 and not summary.blockers:
        return _running(ctx, Cause.PODS_RUNNING, admitted_since(ctx), summary=summary)
    if view.blocker is not None or summary.created < view.expected:
        return None
    if summary.running >= view.expected:
        return _running(ctx, Cause.PODS_RUNNING, admitted_since(ctx), summary=summary)
    since = admitted_since(ctx)
    text = f"Admitted at {when_text(since)}; Pods: {summary.describe()}."
    return Finding(Reason.CONTAINERS_NOT_STARTING, Cause.PODS_NOT_READY, text + timeout_note(ctx), ActionBy.NOBODY,
                   since=since, evidence=base_evidence(ctx), pods=view.status, flavors=assigned_flavors(ctx))


@rule(Phase.ADMITTED, pairs(Reason.PODS_NOT_CREATED, Cause.FAILED_CREATE, Cause.PODS_PENDING))
def pods_not_created(ctx: Context) -> Finding | None:
    view = ctx.lazy(pod_view)
    if view.blocker is not None or view.summary.created >= view.expected:
        return None
    return _not_created(ctx, view.summary, view.status, base_evidence(ctx))


def _not_created(ctx: Context, summary: podlib.PodSummary, pods_status: dict[str, Any],
                 evidence: list[dict[str, Any]]) -> Finding:
    failed = _failed_create(ctx)
    since = admitted_since(ctx)
    rejected = owner_rejected(ctx.owner) if failed is None else None
    if rejected is not None and ctx.owner is not None:  # Kueue 0.19.0 kept such a Workload admitted
        text = (f"Admitted, but KubeRay rejected RayJob {ctx.ns}/{name(ctx.owner)} (jobDeploymentStatus "
                f"ValidationFailed: \"{rejected[:300]}\") and creates no Pods ({_existing(summary)}); the Workload "
                "holds its quota meanwhile (Kueue 0.19.1+ holds it OnHold and releases it). The owner must fix what "
                "KubeRay says and recreate the RayJob.")
        return Finding(Reason.PODS_NOT_CREATED, Cause.FAILED_CREATE, text, ActionBy.WORKLOAD_OWNER, since=since,
                       evidence=evidence, pods=pods_status, flavors=assigned_flavors(ctx))
    if failed is not None:
        reason, message, when, about = failed
        evidence.append(ctx.object_evidence("Event", name(about), "event", reason, message, when, ctx.ns))
        where = "" if about is ctx.owner else f" of {s(about.get('kind'))} {name(about)}"
        creator = _CREATOR.get(reason) or f"the {s(about.get('kind')) or 'owner'}'s controller"
        if reason == "FailedCreate" and s(about.get("kind")) in ("Job", "StatefulSet", "ReplicaSet"):
            creator = f"the {s(about.get('kind'))} controller"
        what = "the Jobs, hence no Pods," if reason == podlib.JOB_CREATION_FAILED else "the Pods"
        denial = podlib.create_denial(message)
        said = message[:denial.head] if denial is not None and denial.head > 0 else message  # the advice restates
        advice = _EXTENDED_NO_LIMIT if _NO_LIMIT in message else _denial_advice(ctx, denial)
        text = (f"Admitted, but {creator} cannot create {what}{where} "
                f"({_existing(summary)}): "
                f"{closed(clip(said, 400) or '')} " + advice
                + f" Meanwhile the Workload holds its quota in {ctx.cq_text}." + timeout_note(ctx))
        # a webhook the apiserver cannot call refuses every Pod whatever the Job says: its operator's to restore
        action = ActionBy.CLUSTER_ADMIN if denial is not None and denial.plugin == podlib.WEBHOOK_UNREACHABLE \
            else ActionBy.WORKLOAD_OWNER
        return Finding(Reason.PODS_NOT_CREATED, Cause.FAILED_CREATE, text, action,
                       since=when or since, evidence=evidence, pods=pods_status, flavors=assigned_flavors(ctx))
    text = (f"Admitted at {when_text(since)}; {summary.created}/{summary.expected} Pods exist so far"
            + (f" ({summary.describe()})" if summary.created else "") + ".")
    waiting = _dependency_wait(ctx)
    if waiting is not None:
        text += waiting[0]
        return Finding(Reason.PODS_NOT_CREATED, Cause.PODS_PENDING, text, waiting[1], since=since, evidence=evidence,
                       pods=pods_status, flavors=assigned_flavors(ctx))
    action = ActionBy.NOBODY
    silent = _jobset_never_reconciled(ctx, summary, since)
    if silent:
        return Finding(Reason.PODS_NOT_CREATED, Cause.PODS_PENDING, text + silent + timeout_note(ctx),
                       ActionBy.CLUSTER_ADMIN,
                       since=since, evidence=evidence, pods=pods_status, flavors=assigned_flavors(ctx))
    if pod_owner_refs(ctx.wl) is not None:  # no controller creates plain Pods: whoever made the others must
        text += (f" This is a plain Pod group: Kueue creates no Pods, so whoever created the others must create "
                 f"the missing {summary.expected - summary.created} (same group name, queue label and total count)"
                 + (", replacing the failed ones (Kueue says WaitingForReplacementPods)"
                    if ctx.true("WaitingForReplacementPods") else "") + ".")
        action = ActionBy.WORKLOAD_OWNER
    text += timeout_note(ctx)
    return Finding(Reason.PODS_NOT_CREATED, Cause.PODS_PENDING, text, action, since=since, evidence=evidence,
                   pods=pods_status, flavors=assigned_flavors(ctx))


# how long a JobSet may go unreconciled after its admission before its controller is called absent (its controller
# writes its status within seconds of the JobSet's creation)
JOBSET_UNRECONCILED_AFTER = timedelta(minutes=10)


def _jobset_never_reconciled(ctx: Context, summary: podlib.PodSummary, since: datetime | None) -> str:
    """" JobSet x has no status at all ...": no Pod exists, and the JobSet (the owner, or a TrainJob's) has neither
    status.replicatedJobsStatus nor a condition `JOBSET_UNRECONCILED_AFTER` after Kueue admitted it. The JobSet
    controller writes both on its first pass, even while Kueue keeps the JobSet suspended (recorded live:
    tests/e2e/fixtures/scenario-family-jobset-*.yaml), so none means no JobSet controller ever looked at it (not
    installed, down, or crash-looping: kueue#1787): Kueue only unsuspends the JobSet and nothing makes its Jobs.
    "" otherwise."""
    jobset = owner_jobset(ctx)
    if jobset is None or summary.created or not ctx.after(since, JOBSET_UNRECONCILED_AFTER) or since is None:
        return ""
    st = m(jobset.get("status"))
    if lst(st.get("replicatedJobsStatus")) or lst(st.get("conditions")) or spec(jobset).get("managedBy"):
        return ""
    jobs = [j for j in ctx.state.descendants(jobset, depth=1) if s(j.get("kind")) == "Job"]
    if jobs:
        return ""
    # a dump lists the owners' kinds together: a Job listed at all says its Jobs were dumped too
    listed = ctx.state.knows("Job") and (not ctx.state.dump or any(k[1] == "Job" for k in ctx.state.owners))
    made = " and has made no Job" if listed else ""
    nm = name(jobset) or ""
    return (f" JobSet {ctx.ns}/{nm} has no status at all (no replicatedJobsStatus, no condition)"
            f" {format_duration(ctx.now - since)} after Kueue admitted it{made}: the JobSet controller writes both on "
            "its first pass, even while the JobSet is suspended, so no JobSet controller has reconciled it. Kueue only "
            "unsuspends the JobSet; the JobSet controller makes its Jobs and Pods. The cluster admin checks that the "
            "JobSet controller runs and reads its logs (kubectl -n jobset-system get pods; kubectl -n jobset-system "
            f"logs deploy/jobset-controller-manager | grep {nm}).")


POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"


def _denial_advice(ctx: Context, denial: podlib.CreateDenial | None) -> str:
    """What refused the Pods at creation and who changes what: the namespace's ResourceQuota (Kueue admits against its
    ClusterQueue and never reads it), its Pod Security level, a LimitRange, or a webhook."""
    if denial is None:
        return "Fix what the message names (webhook, LimitRange, PodSecurity, ResourceQuota)."
    items = "; ".join(denial.items[:4]) + ("; ..." if len(denial.items) > 4 else "")
    if denial.plugin == "ResourceQuota" and denial.items and denial.items[0].startswith("must specify"):
        return (f"ResourceQuota {denial.name} of namespace {ctx.ns} caps those resources, so every Pod must state "
                "them: the owner sets them in the Job's Pod template, or the namespace admin adds a LimitRange that "
                "defaults them.")
    if denial.plugin == "ResourceQuota":
        return (f"Namespace {ctx.ns}'s ResourceQuota {denial.name} is full ({items}): Kueue admits against its "
                "ClusterQueue's quota and never reads ResourceQuotas, so Pods outside Kueue or a ResourceQuota below "
                "the queue's share refuse what Kueue admitted. Raise the ResourceQuota or lower the request.")
    if denial.plugin == "PodSecurity":
        namespace = ctx.state.namespaces.get(ctx.ns)
        labelled = namespace is not None and bool(labels(namespace).get(POD_SECURITY_ENFORCE))
        source = (f"label {POD_SECURITY_ENFORCE}" if labelled or namespace is None else
                  f"the cluster's default: the Namespace has no label {POD_SECURITY_ENFORCE}")
        return (f"Namespace {ctx.ns} enforces Pod Security level {denial.name} ({source}): the owner makes the Job's "
                "Pod template comply" + (f" ({items})" if items else "")
                + ", or the namespace admin relaxes the level.")
    if denial.plugin == podlib.WEBHOOK_UNREACHABLE:
        return _webhook_unreachable(denial)
    if denial.plugin == "LimitRange":
        return (f"A LimitRange of namespace {ctx.ns} refuses them ({items}): the owner fits the Pod template's "
                "requests and limits to it (Kueue admitted those requests), or the namespace admin changes it.")
    return (f"Admission webhook {denial.name} refuses them" + (f" ({items})" if items else "") + ": the owner "
            "changes what it names, or whoever runs the webhook its policy.")


_KUEUE_WEBHOOK_URL = re.compile(rf"https://{podlib.KUEUE_WEBHOOK_SERVICE}\.([a-z0-9-]+)\.svc")


def _webhook_unreachable(denial: podlib.CreateDenial) -> str:
    """The apiserver could not call a webhook with failurePolicy Fail: no policy said no, the call failed (no
    endpoints, refused, a timeout, a certificate), so every Pod is refused until its operator restores it. Kueue's own
    Pod webhook (mpod.kb.io, served by kueue-controller-manager) is the common one: its manager down or restarting."""
    said = denial.items[0] if denial.items else ""
    kueue = _KUEUE_WEBHOOK_URL.search(said)
    who = (f"It is Kueue's own webhook (Service {podlib.KUEUE_WEBHOOK_SERVICE} in namespace {kueue.group(1)}): "
           f"kueue-controller-manager is down or not ready; the cluster admin checks it (kubectl get pods -n "
           f"{kueue.group(1)})." if kueue is not None else
           f"The cluster admin, or whoever runs webhook {denial.name}, restores it (its Pods, its Service's "
           "endpoints, its TLS certificate).")
    return (f"The apiserver cannot call admission webhook {denial.name} (failurePolicy Fail): every Pod is refused, "
            f"nothing in the Job is at fault. {who} The controller retries and creates the Pods once it answers.")


_RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def _dependency_wait(ctx: Context) -> tuple[str, ActionBy] | None:
    """The Pods missing are only those of a JobSet's replicated Jobs whose dependsOn is not reached (an initializer
    before the trainers): JobSet creates them later by design, yet Kueue v0.19 counts every replicated Job for
    PodsReady (JobSet.PodsReady, TrainJob.PodsReady: kueue#6796), so waitForPodsReady evicts the Workload unless
    the dependency finishes in time. The sentences that say so, and who acts."""
    jobset = owner_jobset(ctx)
    unmet = unmet_dependencies(jobset) if jobset is not None else {}
    if jobset is None or not unmet:
        return None
    have: dict[str, int] = {}
    for pod in ctx.pods:
        ps = s(labels(pod).get(_RJOB_LABEL)) or s(labels(pod).get(PODSET_LABEL)) or ""
        have[ps] = have.get(ps, 0) + 1
    missing = {ps: n - have.get(ps, 0) for ps, n in expected_by_pod_set(ctx).items() if n > have.get(ps, 0)}
    if not missing or any(ps not in unmet for ps in missing):
        return None
    waits = "; ".join(f"{n} of replicated Job {ps}, which dependsOn "
                      + " and ".join(f"{dep} ({want})" for dep, want in unmet[ps]) for ps, n in missing.items())
    deps = list(dict.fromkeys(dep for ps in missing for dep, _ in unmet[ps]))
    text = (f" Missing: {waits}. JobSet {name(jobset)} creates those Jobs only once that is reached, and "
            + "; ".join(_dependency_progress(ctx, jobset, dep) for dep in deps) + ".")
    note = timeout_note(ctx)
    if not note:
        return text + " Without waitForPodsReady nothing evicts it meanwhile: nothing to do.", ActionBy.NOBODY
    which, waiting = " and ".join(deps), " and ".join(missing)
    return (text + f" Kueue v0.19 nevertheless counts those Pods for PodsReady (kueue#6796).{note} Evicted, the "
            f"work of {which} is thrown away and every readmission repeats it. The cluster admin must raise "
            f"waitForPodsReady.timeout in Kueue's Configuration ({ctx.state.kueue_config.source}) above the run time "
            f"of {which} plus the time {waiting}'s Pods take to become ready."), ActionBy.CLUSTER_ADMIN


def _dependency_progress(ctx: Context, jobset: Mapping[str, Any], dep: str) -> str:
    """"initializer (Job x-initializer-0) has run since 09:00:03Z (0/1 succeeded)": how far a dependency is."""
    replicas = next((i(m(r).get("replicas"), 1) for r in lst(spec(jobset).get("replicatedJobs"))
                     if s(m(r).get("name")) == dep), 1)
    st = next((m(x) for x in lst(m(jobset.get("status")).get("replicatedJobsStatus"))
               if s(m(x).get("name")) == dep), {})
    jobs = [j for j in ctx.state.descendants(jobset, depth=1)
            if s(j.get("kind")) == "Job" and labels(j).get(_RJOB_LABEL) == dep]
    if not jobs:
        return f"{dep} has no Job yet"
    started = min(filter(None, (parse_time(m(j.get("status")).get("startTime")) for j in jobs)), default=None)
    named = ", ".join(sorted(name(j) or "" for j in jobs)[:3]) + (", ..." if len(jobs) > 3 else "")
    return (f"{dep} (Job {named}) " + (f"has run since {when_text(started)}" if started else "has not started")
            + f" ({i(st.get('succeeded'))}/{replicas} succeeded)")


def _existing(summary: podlib.PodSummary) -> str:
    """"1/3 exist", or "2 finished, none active" when only finished Pods remain (a Job between waves)."""
    active = summary.created - summary.succeeded - summary.failed
    if active <= 0 and summary.succeeded:
        return f"{summary.succeeded} finished, none active"
    return f"{summary.created}/{summary.expected} exist"


def history_note(summary: podlib.PodSummary) -> str:
    """" 1 earlier Pod failed and was replaced (Error, exit code 143, DisruptionTarget ...): history, ..." """
    if not summary.history:
        return ""
    n = sum(b.count for b in summary.history)
    first = summary.history[0]
    how = first.detail if first.detail.startswith(first.reason) else ", ".join(
        p for p in (first.reason, first.detail) if p)
    return (f" {n} replaced Pod(s) failed earlier ({how}; pod {first.pod}): history, not what blocks now "
            "(status.pods.history).")


def _blocked(ctx: Context, category: str) -> tuple[PodView, podlib.PodBlocker, list[dict[str, Any]]] | None:
    """The Pod view, its first blocker and the evidence, when that blocker is of this category."""
    view = ctx.lazy(pod_view)
    blocker = view.blocker
    if blocker is None or blocker.category != category:
        return None
    return view, blocker, _blocker_evidence(ctx, blocker)


def _blocker_evidence(ctx: Context, blocker: podlib.PodBlocker) -> list[dict[str, Any]]:
    history = [ctx.object_evidence("Pod", b.pod, "status (replaced)", b.reason,
                                   "; ".join(p for p in (b.detail, b.message) if p), b.since, ctx.ns)
               for b in ctx.lazy(pod_view).summary.history[:3]]
    return [*base_evidence(ctx), ctx.object_evidence("Pod", blocker.pod, "status", blocker.reason,
                                                     blocker.message, blocker.since, ctx.ns), *history]


def unschedulable_placement(ctx: Context) -> Placement | None:
    """The placement verdict of the first Unschedulable group, once per Workload (the remedies read it too)."""
    blocker = ctx.lazy(pod_view).blocker
    if blocker is None or blocker.category != "Unschedulable":
        return None
    return placement(ctx, blocker)


# the cluster autoscaler's word on a Pod it was asked to make room for: GKE's (and NAP's) FailedScaleUp ("Node
# scale up in zones ... associated with this pod failed: <why>. Pod is at risk of not being scheduled."), the
# upstream autoscaler's NotTriggerScaleUp ("pod didn't trigger scale-up: <why>") and TriggeredScaleUp (a node is
# being added); the value says whether a cluster admin must act on it (a failed scale-up: cloud quota,
# reservation, node pool limit)
_AUTOSCALER_EVENTS = {"FailedScaleUp": True, "NotTriggerScaleUp": False, "TriggeredScaleUp": False}
# the autoscaler says it again while it still holds (each retry updates the Event's lastTimestamp); a node group
# that failed is retried after a back-off of at most --max-node-group-backoff-duration, 30m by default: a word
# older than that is history, not what the autoscaler thinks now
AUTOSCALER_WORD_LASTS = timedelta(minutes=30)


@dataclass(frozen=True)
class AutoscalerWord:
    """What the cluster autoscaler last said about a blocked Pod."""
    text: str
    evidence: dict[str, Any]
    cluster_admin: bool  # a failed scale-up: no node comes until a cluster admin acts


def _autoscaler_said(ctx: Context, pod: str | None) -> AutoscalerWord | None:
    """The newest cluster-autoscaler event about the blocked Pod, while it is recent: kube-scheduler says no node
    fits now, the autoscaler says whether one is coming, and a failed scale-up is the cluster admin's
    (google/tunix#2342: a TPU slice NAP cannot create without a reservation leaves every Pod Pending, and the
    scheduler's words alone point at the node selector). A newer TriggeredScaleUp supersedes an older failure."""
    if not pod:
        return None
    newest = podlib.newest_event(ev for ev in ctx.state.events_about("Pod", ctx.ns, pod)
                                 if s(ev.get("reason")) in _AUTOSCALER_EVENTS)
    if newest is None:
        return None
    reason, when = s(newest.get("reason")) or "", podlib.event_time(newest)
    if ctx.after(when, AUTOSCALER_WORD_LASTS):
        return None
    said = closed(podlib.event_message(newest)[:300])
    failed = _AUTOSCALER_EVENTS[reason]
    if failed:
        text = (f" The cluster autoscaler tried to add a node for Pod {pod} and failed ({reason}, "
                f"{when_text(when)}): {said} No node comes until a cluster admin fixes what it names (cloud "
                "quota, reservation, node pool limits).")
    elif reason == "TriggeredScaleUp":
        text = (f" The cluster autoscaler is adding a node for Pod {pod} ({reason}, {when_text(when)}): {said} "
                "kube-scheduler places the Pod once the node is Ready, if it matches what the Pod asks for.")
    else:
        text = f" The cluster autoscaler will not add a node for Pod {pod} ({reason}, {when_text(when)}): {said}"
    evidence = ctx.object_evidence("Event", pod, "event", reason, podlib.event_message(newest), when, ctx.ns)
    return AutoscalerWord(text, evidence, failed)


# Kueue's provisioning check writes it on the Pods it admits (provisioning controller PodSetUpdates): cluster-autoscaler
# scales up for such a Pod only through that ProvisioningRequest and skips it otherwise ("Unschedulable pod didn't
# trigger scale-up, because it's consuming ProvisioningRequest ..."), and Kueue ignores the request's later
# BookingExpired once the Workload is admitted (provisioning/controller.go)
CONSUME_PROVISIONING_REQUEST = "autoscaling.x-k8s.io/consume-provisioning-request"
BOOKING_LASTS = timedelta(minutes=10)  # cluster-autoscaler keeps provisioned capacity booked this long


def _provisioned_note(ctx: Context, pod: str | None) -> str:
    """The blocked Pod consumes a ProvisioningRequest and still finds no node: what was provisioned is not there
    for it any more, and nothing provisions again while the Workload stays admitted."""
    found = ctx.state.pods.get((ctx.ns, pod or ""))
    request = s(m(m((found or {}).get("metadata")).get("annotations")).get(CONSUME_PROVISIONING_REQUEST))
    if not request:
        return ""
    suffix = request.rpartition("-")[2]  # the attempt; a name cut to Kueue's limit ends with a hash instead
    attempts = (int(suffix),) if suffix.isdigit() else range(1, 33)
    check = next((m(c) for c in lst(ctx.status.get("admissionChecks")) if m(c).get("state") == "Ready" and any(
        provisioning_request_name(ctx.name, s(m(c).get("name")) or "", n) == request for n in attempts)), None)
    provisioned = parse_time(check.get("lastTransitionTime")) if check is not None else admitted_since(ctx)
    if not ctx.after(provisioned, BOOKING_LASTS):
        return ""  # the provisioned nodes may still be coming up
    ready = (f" (admission check {s(check.get('name'))} Ready since {when_text(provisioned)})"
             if check is not None else "")
    return (f" Its Pods consume ProvisioningRequest {request}{ready}: cluster-autoscaler scales up for them only "
            "through that request and skips them otherwise, so the capacity it provisioned is gone or went to other "
            "Pods (a booking lasts about 10 minutes), and Kueue provisions nothing again while the Workload stays "
            f"admitted. Cluster admin: kubectl get provisioningrequest {request} -n {ctx.ns} -o yaml, and the "
            "autoscaler's logs; evicting the Workload (spec.active false, then true) makes Kueue provision anew.")


def _free_contradicted(place: Placement, fit: podlib.SchedulingFailure | None) -> str:
    """The funnel's free estimate counts only the Pods in the input (the operator reads only Kueue's): where it finds
    room that kube-scheduler, which counts every Pod on the node, says is not there (`Placement.unseen`), the
    scheduler is right."""
    short = [r for r in (fit.reasons if fit is not None else ()) if r.text.startswith("Insufficient ")]
    if not place.unseen or not short:
        return ""
    said = ", ".join(f"{r.count} {r.text}" for r in short[:2])
    return f" counting the Pods in the input only (kube-scheduler, counting every Pod, says {said})"


@rule(Phase.ADMITTED, pairs(Reason.PODS_UNSCHEDULABLE, *UNSCHEDULABLE_CAUSES))
def pods_unschedulable(ctx: Context) -> Finding | None:
    found = _blocked(ctx, "Unschedulable")
    place = ctx.lazy(unschedulable_placement)
    if found is None or place is None:
        return None
    view, blocker, evidence = found
    flavors = assigned_flavors(ctx)
    books = ""
    if place.cause == Cause.INSUFFICIENT_RESOURCES:  # Kueue's own numbers may be why it admitted too much
        books = accounting.uncounted_holders(ctx, place.flavor, place.resource) + (
            accounting.undercharged(ctx) or (accounting.above_capacity(ctx, place.flavor, place.resource)
                                             if place.flavor and place.resource else ""))
    fit = view.summary.failure
    said = f" ({fit.raw[:300]})" if fit is not None and fit.raw and not place.binding else ""
    head = (f"Admitted by {ctx.cq_text}; kube-scheduler is binding {blocker.count}/{view.summary.expected} Pods, "
            f"not yet bound: {place.why}" if place.binding else
            f"Admitted by {ctx.cq_text}, but kube-scheduler cannot place "
            f"{blocker.count}/{view.summary.expected} Pods (since {when_text(blocker.since)}): {place.why}")
    text = "." + followers.withheld_note(ctx, view.summary)
    # the node funnel says nothing more once the Pods are pinned to a node that is gone ("0 carry ...hostname=x3")
    nodes = f" Nodes: {place.funnel.line()}{_free_contradicted(place, fit)}." if place.funnel is not None \
        and not (place.cause == Cause.NODE_SELECTOR_MISMATCH and place.pinned) else ""
    preempted = _preempted_by_scheduler(ctx, view.summary)
    history = "" if preempted else history_note(view.summary)
    text += nodes + (preempted or history)
    hints = []
    for fname in flavors:
        hint = flavor_node_hint(ctx, fname)
        if hint:
            if place.funnel is None:
                text += " " + hint
            selector = flavor_selector(ctx, fname)
            hints.append(f"kubectl get nodes -l {selector}" if selector else "kubectl get nodes")
            break
    action = place.action
    scaler = _autoscaler_said(ctx, blocker.pod)
    if scaler is not None:
        text += scaler.text
        evidence = [*evidence, scaler.evidence]
        if scaler.cluster_admin:
            action = ActionBy.CLUSTER_ADMIN
    if books:
        text, action = text + books, ActionBy.CLUSTER_ADMIN
    provisioned = _provisioned_note(ctx, blocker.pod) if place.cause == Cause.INSUFFICIENT_RESOURCES else ""
    if provisioned:
        text, action = text + provisioned, ActionBy.CLUSTER_ADMIN
    elif not books and not hints and place.funnel is None and not place.own_rule and not preempted and \
            place.cause in (Cause.FAILED_SCHEDULING, Cause.INSUFFICIENT_RESOURCES):
        text += (" Kueue's quota is not node capacity: compare the flavor's nodeLabels/taints and the Pods' requests "
                 "with real nodes.")
    if place.cause == Cause.POD_PREEMPTION_IN_PROGRESS or place.binding:
        text += transient_note(ctx)
    else:
        text += timeout_note(ctx)
    # over the budget, kube-scheduler's own words go first (the evidence has them), then the Pods' history
    # (status.pods.history) and the node funnel (status.nodeMatches), the eviction deadline last
    return Finding(Reason.PODS_UNSCHEDULABLE, place.cause, head + said + text, action,
                   since=blocker.since or admitted_since(ctx), evidence=evidence, pods=view.status, flavors=flavors,
                   hints=[*hints, f"kubectl describe pod {blocker.pod} -n {ctx.ns}"], blocker=place.blocker,
                   node_matches=place.funnel.steps if place.funnel is not None else [], notes=(said, history, nodes))


@rule(Phase.ADMITTED, pairs(Reason.PODS_UNSCHEDULABLE, Cause.SCHEDULING_GATED))
def pods_scheduling_gated(ctx: Context) -> Finding | None:
    found = _blocked(ctx, "SchedulingGated")
    if found is None:
        return None
    view, blocker, evidence = found
    short = _short_topology(ctx, blocker, evidence) or _awaiting_replacement(ctx, blocker, evidence)
    if short is not None:
        return short
    kueue_gate = blocker.kueue_gated
    # the owner's own spec carries it: in the Workload's pod templates, or a plain Pod created with it
    own = not kueue_gate and (_gates_in_template(ctx, blocker.reason) or pod_owner_refs(ctx.wl) is not None)
    # from the admission, or from the Pods' creation when they came later (the gate is theirs from the start)
    admitted = max(filter(None, (admitted_since(ctx), blocker.since)), default=None)
    kueue_late = kueue_gate and ctx.after(admitted, GATE_STUCK_AFTER)
    unlabelled = kueue_late and _pods_unqueued(ctx, blocker.pods)
    text = (f"{blocker.count}/{view.expected} Pods are held by scheduling gate {blocker.reason}"
            + (f": Kueue removes its own gate right after admission, and {format_duration(ctx.now - admitted)} after "
               f"the admission (or the Pods' creation) the gate is still there, and the Pods carry no label "
               f"{QUEUE_LABEL}: Kueue's Pod controller does not take them for its own and never ungates them (an "
               "owner whose Pod template was never given the label, such as a LeaderWorkerSet created before "
               "Kueue managed it: kueue#13968, Kueue v0.19.0, fixed in a later v0.19 patch). The cluster admin "
               "re-applies the owner so that Kueue's webhook labels its Pods, or upgrades Kueue."
               if unlabelled and admitted is not None else
               f": Kueue removes its own gate right after admission, and {format_duration(ctx.now - admitted)} after "
               "the admission (or the Pods' creation) the gate is still there: its update of the Pods is refused (a "
               "validating webhook, an OpenShift SCC or another admission plugin, kueue#9492) or its controller is "
               "failing. The cluster admin reads the Kueue controller logs for these Pods."
               if kueue_late and admitted is not None else
               ": Kueue removes its own gates after admission; if this lasts, check the Kueue controller."
               if kueue_gate else ": the Pods were created with it (their own spec, or a webhook at creation): "
               "remove it from the Pod or Job spec, or have the controller it waits for remove it." if own
               else ": the controller that added the gate must remove it.")
            + timeout_note(ctx))
    return Finding(Reason.PODS_UNSCHEDULABLE, Cause.SCHEDULING_GATED, text,
                   ActionBy.CLUSTER_ADMIN if kueue_late else ActionBy.NOBODY if kueue_gate
                   else ActionBy.WORKLOAD_OWNER if own else ActionBy.CLUSTER_ADMIN,
                   since=blocker.since or admitted_since(ctx), evidence=evidence, pods=view.status,
                   flavors=assigned_flavors(ctx))


TOPOLOGY_GATE = "kueue.x-k8s.io/topology"


def _short_topology(ctx: Context, blocker: podlib.PodBlocker, evidence: list[dict[str, Any]]) -> Finding | None:
    """Pods held by Kueue's topology gate in a pod set whose topologyAssignment places fewer Pods than it admitted
    (a podSetSliceSize that does not divide the count: TAS places count // size whole slices, kueue#15277). The TAS
    ungater ungates Pods only into the assignment's domains (pkg/controller/tas/topology_ungater.go), so the rest
    keep the gate for good: definite at once, before any "Kueue is late" guess."""
    if TOPOLOGY_GATE not in blocker.reason.split(", "):
        return None
    gated_sets = {s(labels(p).get(PODSET_LABEL)) for p in ctx.pods if name(p) in blocker.pods} - {None, ""}
    short = []
    for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")):
        ps, placed = s(m(psa).get("name")) or "main", topology_assigned_pods(m(psa))
        admitted = i(m(psa).get("count"), -1)
        if placed is not None and 0 <= placed < admitted and (not gated_sets or ps in gated_sets):
            short.append((ps, admitted, placed))
    if not short:
        return None
    ps, admitted, placed = short[0]
    request = next((m(m(x).get("topologyRequest")) for x in lst(ctx.spec.get("podSets"))
                    if (s(m(x).get("name")) or "main") == ps), {})
    layers = [m(c) for c in lst(request.get("podsetSliceRequiredTopologyConstraints"))]
    size = i(layers[0].get("size")) if layers else i(request.get("podSetSliceSize"))
    level = s(layers[0].get("topology")) if layers else s(request.get("podSetSliceRequiredTopology"))
    slices = (f": slices of {size} Pods per {level or 'domain'} cannot cover {admitted}" if size > 1 else "")
    text = (f"{blocker.count}/{ctx.lazy(pod_view).expected} Pods are held by scheduling gate {blocker.reason}, and "
            f"Kueue will never remove it from {admitted - placed} of them: pod set {ps} was admitted with {admitted} "
            f"Pods, but its topologyAssignment places only {placed}{slices}. Kueue's TAS ungater has no topology "
            f"domain for the rest, so their gate stays (kueue#15277; pod {blocker.pod}); this is not Kueue failing to "
            "update the Pods. " + _slice_fix(ctx, ps, admitted, size))
    note = timeout_note(ctx)
    text += (note + " Readmitted, it gets the same short assignment." if note else
             " Without waitForPodsReady nothing evicts it: the admitted quota stays held until the owner is fixed.")
    evidence = [*evidence, ctx.object_evidence(
        "Workload", ctx.name, f"status.admission.podSetAssignments[{ps}].topologyAssignment", "ShortAssignment",
        f"places {placed} of {admitted} Pods", admitted_since(ctx), ctx.ns)]
    return Finding(Reason.PODS_UNSCHEDULABLE, Cause.SCHEDULING_GATED, text, ActionBy.WORKLOAD_OWNER,
                   since=blocker.since or admitted_since(ctx), evidence=evidence, pods=ctx.lazy(pod_view).status,
                   flavors=assigned_flavors(ctx))


REPLACEMENT_STUCK_AFTER = timedelta(minutes=10)  # a replacement node is found (or the Workload evicted) in seconds


def _node_state(ctx: Context, node: str) -> str:
    found = ctx.state.nodes.get(node)
    if found is None:
        return "deleted" if ctx.state.knows("Node") else "not in the input"
    ready = conditions(found).get("Ready")
    if not is_true(ready):
        return f"Ready={s(m(ready).get('status')) or 'missing'}"
    return "tainted" if lst(spec(found).get("taints")) else "unhealthy"


def _awaiting_replacement(ctx: Context, blocker: podlib.PodBlocker, evidence: list[dict[str, Any]]) -> Finding | None:
    """Pods held by Kueue's topology gate while nodes of the assignment are in status.unhealthyNodes: Kueue's TAS
    ungater leaves them gated on purpose until its scheduler swaps in a replacement node (or, with
    TASFailedNodeReplacementFailFast, on by default, evicts the Workload, NodeFailures): not a failed update of the
    Pods (pkg/controller/tas/topology_ungater.go). Lasting, the second pass neither places nor evicts it."""
    unhealthy = [s(m(u).get("name")) or "?" for u in lst(ctx.status.get("unhealthyNodes"))]
    if TOPOLOGY_GATE not in blocker.reason.split(", ") or not unhealthy:
        return None
    nodes = ", ".join(f"{n} ({_node_state(ctx, n)})" for n in unhealthy[:3])
    text = (f"{blocker.count}/{ctx.lazy(pod_view).expected} Pods are held by scheduling gate {TOPOLOGY_GATE} on "
            f"purpose: node(s) {nodes} of the topologyAssignment are in status.unhealthyNodes, and Kueue's TAS "
            "ungater keeps Pods off an unhealthy node until its scheduler swaps in a replacement node; when none "
            "fits it evicts the Workload (NodeFailures) and requeues it.")
    since = blocker.since or admitted_since(ctx)
    action = ActionBy.NOBODY
    failed = [ev for ev in ctx.state.events_about("Workload", ctx.ns, ctx.name)
              if s(ev.get("reason")) == "SecondPassFailed"]
    if since is not None and ctx.after(since, REPLACEMENT_STUCK_AFTER):
        action = ActionBy.CLUSTER_ADMIN
        said = (f" Kueue's second pass failed {sum(podlib.event_count(e) for e in failed)} time(s), last: "
                f"\"{podlib.event_message(failed[-1])[:300]}\"." if failed else
                " No SecondPassFailed event on the Workload either.")
        text += (f" {format_duration(ctx.now - since)} later it has done neither: with "
                 f"TASFailedNodeReplacementFailFast off it retries, with backoff, while no node fits.{said} The "
                 "cluster admin frees or adds a node in the Workload's topology domain, or evicts the Workload "
                 "(spec.active false, then true) to place it afresh; Kueue's scheduler logs tell more.")
    else:
        text += " Nothing to do unless it lasts."
    return Finding(Reason.PODS_UNSCHEDULABLE, Cause.SCHEDULING_GATED, text + timeout_note(ctx), action,
                   since=since, evidence=[*evidence, ctx.object_evidence(
                       "Workload", ctx.name, "status.unhealthyNodes", "UnhealthyNodes", ", ".join(unhealthy),
                       None, ctx.ns)],
                   pods=ctx.lazy(pod_view).status, flavors=assigned_flavors(ctx),
                   hints=[f"kubectl get node {unhealthy[0]}", f"kubectl -n {ctx.ns} get events "
                          f"--field-selector involvedObject.name={ctx.name}"])


_DIVISOR_SEARCH = 100_000  # beyond any pod set's count or slice size Kueue admits


def _slice_fix(ctx: Context, pod_set: str, count: int, size: int) -> str:
    """What the owner changes so that the slice size divides the pod set's count (KEP-2724 requires it)."""
    if size <= 1:
        return "The owner must make the pod set's Pods fit its topology request, then re-apply it."
    # the divisor searches bounded: a hand-edited count or slice size (10^20) would otherwise never end
    lower = max(d for d in range(1, min(size, count, _DIVISOR_SEARCH) + 1) if count % d == 0)
    upper = next((d for d in range(size, min(count, size + _DIVISOR_SEARCH) + 1) if count % d == 0), None)
    sizes = f"slice size {lower}" + (f" or {upper}" if upper is not None and upper != lower else "")
    bigger = -(-count // size) * size  # the next multiple of the slice size
    why = " (KEP-2724: the slice size must evenly divide the pod set's count)."
    owner = ctx.owner
    if owner is not None and s(owner.get("kind")) == "LeaderWorkerSet" and pod_set != "leader":
        group = i(m(spec(owner).get("leaderWorkerTemplate")).get("size"), count + 1)
        return (f"The owner must make leaderWorkerTemplate.size - 1 of LeaderWorkerSet {ctx.ns}/{name(owner)} (now "
                f"{group - 1}) a multiple of the workers' kueue.x-k8s.io/podset-slice-size ({size}): size "
                f"{group - count + bigger}, or {sizes}" + why)
    return (f"The owner must make pod set {pod_set}'s {count} Pods a multiple of its slice size ({size}, "
            f"kueue.x-k8s.io/podset-slice-size on its Pod template): {bigger} Pods, or {sizes}" + why)


GATE_STUCK_AFTER = timedelta(seconds=120)  # after admission with Kueue's own gate still on the Pods: its update failed


# owners whose Pods Kueue's Pod integration gates and ungates one by one (the Pods, not the owner, are its jobs)
_POD_INTEGRATION_OWNERS = frozenset({"Pod", "StatefulSet", "Deployment", "LeaderWorkerSet"})


def _pods_unqueued(ctx: Context, names: tuple[str, ...]) -> bool:
    """The Workload's Pods are Kueue's Pod integration's (plain Pods, a StatefulSet's, a Deployment's, a
    LeaderWorkerSet's) and none of these gated Pods has the queue-name label: Kueue's Pod controller ignores
    them."""
    refs = owner_refs(ctx.wl)
    if not refs or any(s(r.get("kind")) not in _POD_INTEGRATION_OWNERS for r in refs):
        return False
    gated = [p for p in ctx.pods if name(p) in names]
    return bool(gated) and not any(m(m(p.get("metadata")).get("labels")).get(QUEUE_LABEL) for p in gated)


def _gates_in_template(ctx: Context, gates: str) -> bool:
    """Are the gates ("a, b") in the Workload's pod templates, so the owner's own spec carries them (not a
    webhook that added them at creation)?"""
    names = {s(m(g).get("name")) for ps in lst(ctx.spec.get("podSets"))
             for g in lst(m(m(m(ps).get("template")).get("spec")).get("schedulingGates"))}
    return bool(names) and all(g.strip() in names for g in gates.split(","))


def _claims_held_back(ctx: Context, blocker: podlib.PodBlocker) -> tuple[str, ActionBy] | None:
    """The Pods name DRA ResourceClaims and kube-scheduler (schedulerName default-scheduler) never tried them: its
    DynamicResources PreEnqueue holds back, writing no condition and no event, a Pod whose claim does not exist, is
    being deleted, or (from a template) is not created yet (K pkg/scheduler/framework/plugins/dynamicresources/
    dynamicresources.go:280-288, foreachPodResourceClaim :423-453). The input has no ResourceClaims: named, not
    checked. A claim by name is the owner's to create; a template's claim the resourceclaim controller's."""
    pod = ctx.state.pods.get((ctx.ns, blocker.pod))
    scheduler = s(spec(pod).get("schedulerName")) if pod is not None else None
    if pod is None or (scheduler and scheduler != "default-scheduler"):
        return None
    claims = resource_claims(pod)
    if not claims:
        return None
    named = [c.claim for c in claims if c.claim]
    unmade = [f"{c.name} (template {c.template})" for c in claims if c.template and not c.made]
    if named:
        listed = ", ".join(named[:3])
        return (f"they name ResourceClaim {listed} (spec.resourceClaims), and kube-scheduler holds back, without a "
                "condition or an event, a Pod whose claim does not exist or is being deleted (DynamicResources "
                f"PreEnqueue). The owner creates it or fixes the name in the Job (kubectl get resourceclaim {named[0]} "
                f"-n {ctx.ns}); a claim each Pod gets of its own is a resourceClaimTemplateName.",
                ActionBy.WORKLOAD_OWNER)
    if unmade:
        return (f"their claim {', '.join(unmade[:3])} has not been created (no status.resourceClaimStatuses entry, no "
                "FailedResourceClaimCreation event), and kube-scheduler does not try a Pod before its claims exist. "
                "The resourceclaim controller of kube-controller-manager makes them: the cluster admin checks that it "
                "runs with DynamicResourceAllocation on.", ActionBy.CLUSTER_ADMIN)
    return None


@rule(Phase.ADMITTED, pairs(Reason.PODS_UNSCHEDULABLE, Cause.NO_SCHEDULING_ATTEMPT))
def pods_not_scheduled(ctx: Context) -> Finding | None:
    found = _blocked(ctx, "Pending")
    if found is None:
        return None
    view, blocker, evidence = found
    since = blocker.since or admitted_since(ctx)
    if blocker.reason == podlib.CLAIM_NOT_CREATED:  # the Job names a ResourceClaimTemplate that cannot be used
        text = (f"{blocker.count}/{view.expected} Pods wait for their ResourceClaims, which Kubernetes cannot create "
                f"from the Job's ResourceClaimTemplate (pod {blocker.pod}: {blocker.message[:300]}); kube-scheduler "
                "does not try a Pod before its claims exist. Create the template or fix its name in the Job."
                + timeout_note(ctx))
        return Finding(Reason.PODS_UNSCHEDULABLE, Cause.NO_SCHEDULING_ATTEMPT, text, ActionBy.WORKLOAD_OWNER,
                       since=since, evidence=evidence, pods=view.status, flavors=assigned_flavors(ctx),
                       hints=[f"kubectl get resourceclaimtemplates -n {ctx.ns}"])
    held = _claims_held_back(ctx, blocker)
    if held is not None:
        text, action = held
        return Finding(Reason.PODS_UNSCHEDULABLE, Cause.NO_SCHEDULING_ATTEMPT,
                       f"{blocker.count}/{view.expected} Pods have had no scheduling attempt since {when_text(since)}: "
                       + text + timeout_note(ctx), action, since=since, evidence=evidence, pods=view.status,
                       flavors=assigned_flavors(ctx), hints=[f"kubectl get resourceclaims -n {ctx.ns}"])
    text = (f"{blocker.count}/{view.expected} Pods have not been looked at by a scheduler "
            f"since {when_text(since)}: check spec.schedulerName and that that scheduler runs." + timeout_note(ctx))
    return Finding(Reason.PODS_UNSCHEDULABLE, Cause.NO_SCHEDULING_ATTEMPT, text, ActionBy.CLUSTER_ADMIN, since=since,
                   evidence=evidence, pods=view.status, flavors=assigned_flavors(ctx))


@rule(Phase.ADMITTED, pairs(Reason.CONTAINERS_NOT_STARTING, Cause.TERMINATING))
def pods_terminating(ctx: Context) -> Finding | None:
    found = _blocked(ctx, "Terminating")
    if found is None:
        return None
    view, blocker, evidence = found
    since = blocker.since or admitted_since(ctx)
    node = unhealthy_node(ctx, blocker.pod)
    if node is not None and ctx.after(since, STUCK_TERMINATING):
        # the kubelet that must confirm the deletion is gone: nothing finishes it (the Pod garbage collector
        # force-deletes only on nodes tainted out-of-service), and the quota stays held
        text = (f"{blocker.count} Pod(s) have been terminating since {when_text(since)} on node {node[0]}, which "
                f"{node[1]}: no kubelet confirms the deletion, so it never finishes by itself and the Workload keeps "
                "its quota. The cluster admin must recover the node, or taint it node.kubernetes.io/out-of-service "
                "(NoExecute) so the Pods are force-deleted, or delete the Node object if it is gone.")
        return Finding(Reason.CONTAINERS_NOT_STARTING, Cause.TERMINATING, text, ActionBy.CLUSTER_ADMIN, since=since,
                       evidence=evidence + _node_evidence(ctx, node[0]), pods=view.status,
                       flavors=assigned_flavors(ctx), hints=[f"kubectl describe node {node[0]}"])
    text = f"{blocker.count} Pod(s) are terminating; Pods: {view.summary.describe()}."
    return Finding(Reason.CONTAINERS_NOT_STARTING, Cause.TERMINATING, text, ActionBy.NOBODY,
                   since=since, evidence=evidence, pods=view.status, flavors=assigned_flavors(ctx))


STUCK_TERMINATING = timedelta(minutes=10)  # past the default grace period and the taint manager's 300 s
_NODE_DOWN_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")


def unhealthy_node(ctx: Context, pod_name: str) -> tuple[str, str] | None:
    """(node, what is wrong with it) for the node a Pod is bound to, when the input's Node says it is not
    Ready or the node lifecycle controller tainted it unreachable/not-ready; None when healthy or not in the
    input."""
    pod = ctx.state.pods.get((ctx.ns, pod_name))
    node_name = s(m(pod.get("spec")).get("nodeName")) if pod is not None else None
    node = ctx.state.nodes.get(node_name) if node_name else None
    if node is None or node_name is None:
        return None
    ready = next((m(c) for c in lst(m(node.get("status")).get("conditions")) if m(c).get("type") == "Ready"), None)
    taints = [s(m(t).get("key")) for t in lst(m(node.get("spec")).get("taints"))]
    down = [t for t in _NODE_DOWN_TAINTS if t in taints]
    if (ready is None or s(ready.get("status")) == "True") and not down:
        return None
    said = (f"is not Ready (Ready={s(ready.get('status')) or 'missing'}"
            + (f", {s(ready.get('reason'))}" if s(ready.get("reason")) else "")
            + (f": {s(ready.get('message'))}" if s(ready.get("reason")) and s(ready.get("message")) else "") + ")"
            if ready is not None and s(ready.get("status")) != "True" else "is tainted")
    return node_name, said + (f" and tainted {', '.join(down)}" if down else "")


def _node_evidence(ctx: Context, node: str) -> list[dict[str, Any]]:
    return [ctx.object_evidence("Node", node, "status.conditions[Ready]", reason="NotReady")]


def _memory_limits(ctx: Context, pod_name: str) -> str:
    """" (main: 512Mi)": the memory limits of the Pod's containers, as the kubelet enforces them."""
    return podlib.memory_limits(next((p for p in ctx.pods if name(p) == pod_name), None))


def _container_cause(blocker: podlib.PodBlocker) -> Cause:
    if blocker.reason == "OOMKilled" or (blocker.category == "Failing" and blocker.detail.startswith("OOMKilled")):
        return Cause.OOM_KILLED  # killed at its memory limit, restarting (CrashLoopBackOff) or failed
    found = CONTAINER_CAUSES.get(blocker.reason) or KUBELET_ALIASES.get(blocker.reason)
    if found is not None:
        return found
    if blocker.reason == "NoContainerStatus":  # bound, the kubelet has not reported the containers yet
        return Cause.CONTAINER_CREATING
    return Cause.PODS_FAILED if blocker.category == "Failing" else Cause.PODS_NOT_READY


@rule(Phase.ADMITTED, pairs(Reason.CONTAINERS_NOT_STARTING, *CONTAINER_CAUSES.values(), Cause.PODS_FAILED,
                            Cause.PODS_NOT_READY, Cause.OOM_KILLED))
def containers_not_starting(ctx: Context) -> Finding | None:
    view = ctx.lazy(pod_view)
    blocker = view.blocker
    if blocker is None:
        return None
    evidence = _blocker_evidence(ctx, blocker)
    cause = _container_cause(blocker)
    since = blocker.since or admitted_since(ctx)
    node = unhealthy_node(ctx, blocker.pod) if blocker.reason in ("NotReady", "Unknown") else None
    if node is not None:  # the node lifecycle controller marked its Pods not ready: no probe of the Job's failed
        text = (f"Admitted and scheduled, but {blocker.count}/{view.summary.expected} Pods are not ready because "
                f"their node {node[0]} {node[1]} (pod {blocker.pod}): the node lifecycle controller marked them not "
                "ready; after their tolerationSeconds (300 s by default) the Pods are evicted and the Job controller "
                "replaces them elsewhere. The cluster admin must look at the node." + timeout_note(ctx))
        return Finding(Reason.CONTAINERS_NOT_STARTING, Cause.PODS_NOT_READY, text, ActionBy.CLUSTER_ADMIN, since=since,
                       evidence=evidence + _node_evidence(ctx, node[0]), pods=view.status,
                       flavors=assigned_flavors(ctx), hints=[f"kubectl describe node {node[0]}"])
    fresh = since is not None and not ctx.after(since, CONTAINER_CREATING_GRACE)
    silent_kubelet = blocker.reason == "NoContainerStatus"
    # a kubelet that never reports the Pod it was given is a node problem, not the owner's
    action = ActionBy.NOBODY if cause == Cause.CONTAINER_CREATING else \
        ActionBy.CLUSTER_ADMIN if cause in NODE_SIDE_CAUSES or blocker.reason in NODE_SIDE_REASONS else \
        ActionBy.WORKLOAD_OWNER
    if silent_kubelet and not fresh:
        action = ActionBy.CLUSTER_ADMIN
    storage = cause == Cause.FAILED_MOUNT and _mount_side(ctx, blocker) == "storage"
    if storage:  # the driver or the node cannot mount what exists: not the owner's spec
        action = ActionBy.CLUSTER_ADMIN
    msg = f": {blocker.message[:300]}" if blocker.message else ""
    early = early_start.failing_early(view.summary)
    if early is not None and blocker.category in ("ContainersNotStarting", "NotReady"):
        # the workers lead, and the launcher burns its Job's backoffLimit while they wait: the owner's MPIJob fails
        # unless someone acts, so a normal wait is no longer nobody's
        text = early_start.explain(ctx, blocker, early) + timeout_note(ctx)
        if action == ActionBy.NOBODY:
            action = ActionBy.WORKLOAD_OWNER
        evidence.append(ctx.object_evidence("Pod", early.pod, "status", early.reason, early.message, early.since,
                                            ctx.ns))
    elif cause == Cause.OOM_KILLED:
        limit = _memory_limits(ctx, blocker.pod)
        looping = blocker.reason == "CrashLoopBackOff"
        text = (f"Admitted and scheduled, but {blocker.count}/{view.summary.expected} Pods were OOMKilled: a "
                f"container used more memory than its limit{limit} and was killed"
                + (", and restarts in a loop (CrashLoopBackOff)" if looping else "; the Pod failed")
                + f" (pod {blocker.pod}). Raise the memory limit in the Job or lower the program's memory use."
                + timeout_note(ctx))
    elif silent_kubelet:
        text = (f"Admitted and scheduled; the kubelet has not reported the containers of {blocker.count}/"
                f"{view.summary.expected} Pods yet (pod {blocker.pod}, bound since {when_text(since)})"
                + ("." if fresh else ": check the node's kubelet.") + timeout_note(ctx))
    elif storage:
        text = _storage_mount(ctx, blocker, view.summary)
    elif cause in (Cause.ERR_IMAGE_PULL, Cause.IMAGE_PULL_BACKOFF) and podlib.pull_rate_limited(blocker.message):
        text, action = _pull_rate_limited(ctx, blocker, view.summary, fresh)
    elif cause in (Cause.ERR_IMAGE_PULL, Cause.IMAGE_PULL_BACKOFF) and blocker.message:
        said, step, platform = podlib.image_pull_said(blocker.message)
        if platform:
            action = ActionBy.CLUSTER_ADMIN
        detail = f" ({blocker.detail})" if blocker.detail and blocker.detail != blocker.reason else ""
        text = (f"Admitted and scheduled, but containers of {blocker.count}/{view.summary.expected} Pods do not "
                f"start: {blocker.reason}{detail}: {said} (pod {blocker.pod}).{' ' + step if step else ''}"
                f"{history_note(view.summary)}{timeout_note(ctx)}")
    elif blocker.category == "Failing" and blocker.reason == "DeadlineExceeded":
        text = (f"Admitted and started, but {blocker.count}/{view.summary.expected} Pods failed with DeadlineExceeded"
                f"{msg} (pod {blocker.pod}): they ran longer than activeDeadlineSeconds (the Job's spec or its Pod "
                "template's). Raise it, or make the work fit in it." + history_note(view.summary) + timeout_note(ctx))
    elif blocker.category == "Failing" and blocker.reason.startswith("OutOf"):
        # the kubelet's admission refused the Pod the scheduler placed (its view of the node was stale, or
        # Pods the scheduler does not count hold the node): the node's, and the Job controller replaces them
        action = ActionBy.CLUSTER_ADMIN
        text = (f"Admitted and scheduled, but the kubelet rejected {blocker.count}/{view.summary.expected} Pods "
                f"({blocker.reason}{msg}, pod {blocker.pod}): the node had less free than kube-scheduler counted "
                "(Pods it does not see, such as static Pods, or a race). The Job controller replaces failed Pods; "
                "if it repeats, the cluster admin must look at what runs on that node." + history_note(view.summary)
                + timeout_note(ctx))
    elif blocker.category == "Failing" and blocker.reason == "Evicted" and podlib.own_limit_eviction(blocker.message):
        text = _own_limit_eviction(ctx, blocker, view.summary)
    elif blocker.category == "Failing" and blocker.reason == "Evicted":  # the kubelet, under node pressure
        text = (f"Admitted and started, but the kubelet evicted {blocker.count}/{view.summary.expected} Pods{msg} "
                f"(pod {blocker.pod}): the node ran short, and Pods using more than they request go first. Raise "
                "the Pods' requests to what they use; the Job controller replaces evicted Pods."
                + history_note(view.summary) + timeout_note(ctx))
    elif blocker.category == "Failing" and blocker.reason == "CrashLoopBackOff":
        text = _crash_loop(ctx, blocker, view.summary)
    elif blocker.category == "Failing":
        text = _failed(ctx, blocker, view.summary, msg)
    else:
        detail = f" ({blocker.detail})" if blocker.detail and blocker.detail != blocker.reason else ""
        text = (f"Admitted and scheduled, but containers of {blocker.count}/{view.summary.expected} Pods do not "
                f"start: {blocker.reason}{detail}{msg} (pod {blocker.pod}).{history_note(view.summary)}"
                f"{timeout_note(ctx)}")
    return Finding(Reason.CONTAINERS_NOT_STARTING, cause, text, action, since=since, evidence=evidence,
                   pods=view.status, flavors=assigned_flavors(ctx),
                   hints=[f"kubectl describe pod {blocker.pod} -n {ctx.ns}"])


def _failed(ctx: Context, blocker: podlib.PodBlocker, summary: podlib.PodSummary, msg: str) -> str:
    """Pods that failed for their program: the container that ended them and its logs, an init container named as
    such (it failed before the main containers started: kubectl shows Init:Error)."""
    pod = ctx.state.pods.get((ctx.ns, blocker.pod))
    ended = podlib.failed_pods([pod])[0] if pod is not None and s(m(pod.get("status")).get("phase")) == "Failed" \
        else None
    init = _INIT_CONTAINER.search(blocker.detail)
    container = init.group(1) if init is not None else ended.container if ended is not None else ""
    logs = (ended.logs_command(ctx.ns) if ended is not None else
            f"kubectl logs {blocker.pod} -n {ctx.ns}" + (f" -c {container}" if container else ""))
    if init is not None:
        how = blocker.detail[:init.start()].rstrip(", ") or blocker.reason
        what = (f"failed in init container {container} ({how}{msg}), before their main containers started (pod "
                f"{blocker.pod}): its logs say why ({logs}).")
    else:
        detail = f" ({blocker.detail})" if blocker.detail and blocker.detail != blocker.reason else ""
        what = f"failed: {blocker.reason}{detail}{msg} (pod {blocker.pod}): read their logs ({logs})."
    return (f"Admitted and scheduled, but {blocker.count}/{summary.expected} Pods {what}{history_note(summary)}"
            f"{timeout_note(ctx)}")


_INIT_CONTAINER = re.compile(r"init container (\S+)")


def _own_limit_eviction(ctx: Context, blocker: podlib.PodBlocker, summary: podlib.PodSummary) -> str:
    """Evicted by the kubelet for outgrowing the Pod's own ephemeral-storage limit (or an emptyDir's sizeLimit): not
    node pressure, so more requests or another node never help, and every replacement that writes as much meets the
    same end, each counted against the Job's backoffLimit."""
    what, which, limit = podlib.own_limit_eviction(blocker.message) or ("pod", "", "")
    exceeded = {"pod": f"the Pod's ephemeral-storage limit ({limit}, the sum of its containers' limits)",
                "container": f"container {which}'s ephemeral-storage limit ({limit})",
                "emptyDir": f"emptyDir volume {which}'s sizeLimit ({limit})"}[what]
    fix = (f"Raise emptyDir.sizeLimit of volume {which} in the Job's Pod template, or put that data on a "
           "PersistentVolume" if what == "emptyDir" else
           "Raise resources.limits.ephemeral-storage (and the request with it) in the Job's Pod template, or write "
           "the large files to a PersistentVolume instead of the container's filesystem")
    failures = job_failures(ctx).removeprefix("; ")
    replaced = f" ({failures})" if failures else ""
    said = blocker.message.strip()[:160]
    return (f"Admitted and started, but the kubelet evicted {blocker.count}/{summary.expected} Pods for writing more "
            f"to the node's local disk than {exceeded} allows (pod {blocker.pod}: \"{said}\"): "
            "their own limit, not node pressure, so more requests or another node do not help. "
            f"{fix}. The Job controller replaces evicted Pods{replaced}; a replacement that "
            "writes as much is evicted again." + history_note(summary) + timeout_note(ctx))


def _pull_rate_limited(ctx: Context, blocker: podlib.PodBlocker, summary: podlib.PodSummary,
                       fresh: bool) -> tuple[str, ActionBy]:
    """Image pulls refused for their rate, not for the image: Kueue starts all of a Workload's Pods at once, so their
    pulls arrive together. The kubelet's own throttle passes by itself (lasting, the node's configuration is the
    platform's); a registry's pull limit is lifted by pulling with credentials or from a mirror (the owner's image
    reference and pull secrets), or with time."""
    who, said = podlib.pull_rate_limited(blocker.message) or ("registry", "")
    head = f"Admitted and scheduled, but the image pulls of {blocker.count}/{summary.expected} Pods are refused"
    if who == "kubelet":
        pod = ctx.state.pods.get((ctx.ns, blocker.pod))
        node = s(spec(pod).get("nodeName")) if pod is not None else None
        text = (f"{head} by the kubelet of node {node or '?'} itself ({blocker.reason}: \"{said}\", "
                f"pod {blocker.pod}): "
                "it throttles how many pulls it starts (kubelet configuration registryPullQPS/registryBurst, 5/10 by "
                "default), and these Pods pull together; the image and its registry are not at fault. ")
        if fresh:
            return text + "The kubelet retries with back-off: nothing to do unless it lasts." + timeout_note(ctx), \
                ActionBy.NOBODY
        return (text + f"The Pods have waited since {when_text(blocker.since)} and it has not passed: the "
                "cluster admin raises registryPullQPS/registryBurst on these nodes (0 lifts the throttle) or pre-pulls "
                "the image."
                + timeout_note(ctx)), ActionBy.CLUSTER_ADMIN
    return (f"{head} by the registry's pull rate limit ({blocker.reason}, HTTP 429: \"{said}\", pod {blocker.pod}): "
            "the image and tag are fine, the registry refuses more pulls for the credentials (or the anonymous "
            "address) used. The owner pulls with an account that has a higher limit (imagePullSecrets in the Job's Pod "
            "template) or from a mirror; the cluster admin can give the nodes a pull-through cache. The kubelet "
            "retries with back-off, and the limit lifts when its window ends." + timeout_note(ctx)), \
        ActionBy.WORKLOAD_OWNER


def _mount_side(ctx: Context, blocker: podlib.PodBlocker) -> str:
    pod = ctx.state.pods.get((ctx.ns, blocker.pod))
    return podlib.mount_failure_side(blocker.message, lst(spec(pod).get("volumes")) if pod is not None else [])


def _storage_mount(ctx: Context, blocker: podlib.PodBlocker, summary: podlib.PodSummary) -> str:
    """A volume the Pods' spec names rightly (the claim is bound, the Pod placed) that the node cannot mount: the
    storage driver's or the node's trouble, retried by the kubelet for as long as it lasts; no change to the Job
    helps, and Kueue's waitForPodsReady, if on, evicts the Workload meanwhile."""
    pod = ctx.state.pods.get((ctx.ns, blocker.pod))
    node = s(spec(pod).get("nodeName")) if pod is not None else None
    claims = sorted({s(m(m(v).get("persistentVolumeClaim")).get("claimName")) or "" for v in lst(spec(pod or {}).get(
        "volumes"))} - {""})
    return (f"Admitted and scheduled, but a volume of {blocker.count}/{summary.expected} Pods does not mount on node "
            f"{node or '?'} (pod {blocker.pod}, FailedMount: \"{blocker.message[:300]}\"): the storage driver or the "
            "node fails, not the Job's spec" + (f" (claim {', '.join(claims[:3])} is bound)" if claims else "")
            + ". The cluster admin checks the CSI driver's node plugin on that node, the volume's attachment "
            "(kubectl get volumeattachments) and the storage backend; the kubelet keeps retrying."
            + history_note(summary) + timeout_note(ctx))


def _crash_loop(ctx: Context, blocker: podlib.PodBlocker, summary: podlib.PodSummary) -> str:
    """A container that starts, exits and is restarted with back-off: the Pods have not failed (the Job sees them
    active, so its backoffLimit does not end it), and an init container's loop keeps the main containers from ever
    starting. Its last run's logs say why: `kubectl logs --previous` of that container, named."""
    pod = ctx.state.pods.get((ctx.ns, blocker.pod))
    looping = [(init, m(c)) for init, key in ((True, "initContainerStatuses"), (False, "containerStatuses"))
               for c in lst(m((pod or {}).get("status")).get(key))
               if s(m(m(m(c).get("state")).get("waiting")).get("reason")) == "CrashLoopBackOff"]
    init, found = looping[0] if looping else (False, {})
    container = s(found.get("name")) or "?"
    ended = m(m(found.get("lastState")).get("terminated"))
    how = ", ".join(p for p in (s(ended.get("reason")), f"exit code {ended.get('exitCode')}"
                                if ended.get("exitCode") is not None else "") if p) or "exits"
    restarts = i(found.get("restartCount"))
    what = (f"init container {container} of {blocker.count}/{summary.expected} Pods exits ({how}) and is restarted "
            f"in a loop ({restarts} restarts, CrashLoopBackOff), so their main containers never start" if init else
            f"container {container} of {blocker.count}/{summary.expected} Pods exits ({how}) and is restarted in a "
            f"loop ({restarts} restarts, CrashLoopBackOff)")
    return (f"Admitted and scheduled, but {what} (pod {blocker.pod}). The program fails, not the scheduling: its last "
            f"run's logs say why (kubectl logs {blocker.pod} -n {ctx.ns} -c {container} --previous)."
            + _restarts_budget(ctx) + history_note(summary) + timeout_note(ctx))


def _restarts_budget(ctx: Context) -> str:
    """A Job with restartPolicy OnFailure counts its active Pods' container restarts against backoffLimit and fails
    at it (K pkg/controller/job/job_controller.go pastBackoffLimitOnFailure); Kueue then finishes the Workload."""
    owner = ctx.owner
    if owner is None or s(owner.get("kind")) != "Job" or s(m(m(spec(owner).get("template")).get("spec")).get(
            "restartPolicy")) != "OnFailure":
        return ""
    limit = i(spec(owner).get("backoffLimit"), 6)
    used = sum(i(m(c).get("restartCount")) for p in ctx.pods if s(m(p.get("status")).get("phase")) in (
        "Pending", "Running") for key in ("initContainerStatuses", "containerStatuses")
        for c in lst(m(p.get("status")).get(key)))
    return (f" With restartPolicy OnFailure the Job controller counts these restarts against backoffLimit ({used} of "
            f"{limit}) and fails the Job when they reach it.")


# kube-scheduler's condition on a victim (K pkg/scheduler/framework/preemption/executor.go:129), as history says it
PREEMPTED_BY_SCHEDULER = "DisruptionTarget PreemptionByScheduler"


def _preempted_by_scheduler(ctx: Context, summary: podlib.PodSummary) -> str:
    """A Pod of the admitted Workload that kube-scheduler preempted for a Pod of higher priority (its DisruptionTarget
    condition): that Pod holds the room its replacement now lacks. Kueue's quota never stops kube-scheduler's priority
    preemption, and Kueue keeps the Workload admitted (kueue#3210): the history is the cause here, not noise. The
    preemptor is named from kube-scheduler's Preempted event (its `related` object) when the input has it."""
    victim = next((b for b in summary.history if PREEMPTED_BY_SCHEDULER in b.detail), None)
    if victim is None:
        return ""
    event = next((ev for ev in ctx.state.events_about("Pod", ctx.ns, victim.pod) if s(ev.get("reason")) == "Preempted"),
                 None)
    related = m((event or {}).get("related"))
    by, queued = "a Pod of higher priority", None
    if s(related.get("name")):
        other = ctx.state.pods.get((s(related.get("namespace")) or ctx.ns, s(related.get("name")) or ""))
        prio = m(spec(other)).get("priority") if other is not None else None
        queued = bool(labels(other).get(QUEUE_LABEL)) if other is not None else None
        by = (f"pod {s(related.get('namespace')) or ctx.ns}/{related.get('name')}"
              + (f" (priority {prio}" + (", admitted by Kueue" if queued else ", not managed by Kueue") + ")"
                 if isinstance(prio, int) else ""))
    when = f" at {when_text(victim.since)}" if victim.since is not None else ""
    return (f" kube-scheduler preempted pod {victim.pod}{when} ({PREEMPTED_BY_SCHEDULER}) for {by}, which now holds "
            "the room its replacement lacks: Kueue's quota does not stop kube-scheduler's priority preemption, and "
            "Kueue keeps this Workload admitted (kueue#3210). " + (
                "Pods outside Kueue use the nodes Kueue's quota counts on: the cluster admin keeps them off the "
                "flavor's nodes (taints, node selectors) or lowers the quota by what they use." if queued is False else
                "The ClusterQueues admit more than the nodes hold: the cluster admin keeps the quotas within the "
                "nodes, or gives the Workloads that share these nodes one PriorityClass."))
