"""Queue problems seen on the objects themselves: LocalQueue / ClusterQueue missing, stopped or inactive,
the namespace not selected. Asked before Kueue's own message, which may lag behind the objects.

Each rule looks one step further along Workload -> LocalQueue -> ClusterQueue, in the order of
`registry.py`: a rule may rely on the ones before it having found nothing (the ClusterQueue rules run
only once the LocalQueue exists and is not stopped). When a step's object is not in the input and the
input does not list that kind completely, nothing is guessed and Kueue's message (`kueue_message.py`)
speaks instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...kube.objects import conditions, is_true, lst, m, parse_time, s, spec, when_text
from ...kube.selectors import label_selector_matches
from ...state import MULTIKUEUE_CONTROLLER, PROVISIONING_CONTROLLER, Derived
from ...vocabulary import ActionBy, Cause, Reason
from .. import messages, multikueue
from ..context import Context
from ..messages import Template
from ..rules import Finding, Phase, pairs, rule
from . import checks


def cq_hint(cq: str | None) -> str:
    return f"kubectl describe clusterqueue {cq}" if cq else "kubectl get clusterqueues"


def _since(ctx: Context) -> datetime | None:
    return ctx.cond_time("QuotaReserved") or ctx.created


def _queues_known(ctx: Context) -> bool:
    """Both queues are in the input (the later rules' precondition)."""
    return ctx.lq is not None and ctx.cq is not None


@rule(Phase.PENDING, pairs(Reason.QUEUE_MISCONFIGURED, Cause.LOCAL_QUEUE_NOT_FOUND))
def no_queue_name(ctx: Context) -> Finding | None:
    if ctx.lq_name:
        return None
    owner = _owner(ctx)
    existing = sorted(nm for (ns, nm) in ctx.state.local_queues if ns == ctx.ns)
    pick = f"one of {', '.join(existing[:5])}" if len(existing) > 1 else existing[0] if existing else "<LocalQueue>"
    default = ("A LocalQueue named 'default' is applied only to objects created after it exists (Kueue's webhook "
               "sets it at creation), so it will not help this one." if "default" in existing else
               "A LocalQueue named 'default' in the namespace would be applied to objects created after it, not to "
               "this one.")
    where = f" LocalQueues in {ctx.ns}: {', '.join(existing[:5])}." if existing else \
        f" There is no LocalQueue in namespace {ctx.ns} at all: the queue admin must create one."
    text = (f"The Workload has no spec.queueName (its {owner} has no label kueue.x-k8s.io/queue-name, and Kueue "
            f"made the Workload anyway, as manageJobsWithoutQueueName does): set the label "
            f"kueue.x-k8s.io/queue-name={pick} on the {owner}, or recreate it with the label.{where} {default}")
    return Finding(Reason.QUEUE_MISCONFIGURED, Cause.LOCAL_QUEUE_NOT_FOUND, text, since=_since(ctx),
                   hints=[f"kubectl get localqueues -n {ctx.ns}"])


@rule(Phase.PENDING, pairs(Reason.QUEUE_MISCONFIGURED, Cause.LOCAL_QUEUE_NOT_FOUND))
def local_queue_missing(ctx: Context) -> Finding | None:
    if ctx.lq is not None or not ctx.state.knows("LocalQueue") or ctx.qr_parsed.template not in (
            Template.UNKNOWN, Template.PENDING_EVALUATION):
        return None  # present, or not in the input: let Kueue's own message speak
    return local_queue_not_found(ctx, _since(ctx))


def _owner(ctx: Context) -> str:
    """``<Kind> <name>`` of the owner the Workload was made for (the one whose queue-name label counts), else
    'its owner'."""
    ref = ctx.owner_ref
    return f"{s(ref.get('kind')) or 'owner'} {s(ref.get('name')) or ''}".rstrip() if ref else "its owner"


def local_queue_not_found(ctx: Context, since: datetime | None) -> Finding:
    existing = sorted(nm for (ns, nm) in ctx.state.local_queues if ns == ctx.ns)
    others = f" LocalQueues in {ctx.ns}: {', '.join(existing[:5])}." if existing else \
        f" There is no LocalQueue in namespace {ctx.ns} at all."
    # the owner's kind, not always a Job: a LeaderWorkerSet group's Workload is the LeaderWorkerSet's (its label)
    text = (f"LocalQueue {ctx.lq_name} does not exist in namespace {ctx.ns}: fix the label kueue.x-k8s.io/queue-name "
            f"of {_owner(ctx)} or ask the queue admin to create it.{others}")
    return Finding(Reason.QUEUE_MISCONFIGURED, Cause.LOCAL_QUEUE_NOT_FOUND, text, since=since,
                   evidence=[ctx.condition_evidence("QuotaReserved")] if ctx.cond("QuotaReserved") else [],
                   hints=[f"kubectl get localqueues -n {ctx.ns}"])


@rule(Phase.PENDING, pairs(Reason.QUEUE_STOPPED, Cause.LOCAL_QUEUE_STOPPED))
def local_queue_stopped(ctx: Context) -> Finding | None:
    lq_stop = (s(spec(ctx.lq).get("stopPolicy")) or "None") if ctx.lq is not None else "None"
    if lq_stop == "None":
        return None
    text = (f"LocalQueue {ctx.ns}/{ctx.lq_name} is stopped (stopPolicy {lq_stop}): nothing in it is admitted "
            f"until its admin sets stopPolicy to None.")
    return Finding(Reason.QUEUE_STOPPED, Cause.LOCAL_QUEUE_STOPPED, text, since=_since(ctx),
                   evidence=[ctx.object_evidence("LocalQueue", ctx.lq_name, "spec.stopPolicy", lq_stop, ns=ctx.ns)])


@rule(Phase.PENDING, pairs(Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_NOT_FOUND))
def cluster_queue_missing(ctx: Context) -> Finding | None:
    if ctx.lq is None or ctx.cq is not None or not ctx.state.knows("ClusterQueue"):
        return None
    if ctx.cq_name is None:  # a hand-edited or partial LocalQueue: Kueue's webhook requires the field
        text = (f"LocalQueue {ctx.ns}/{ctx.lq_name} names no ClusterQueue (no spec.clusterQueue): recreate it with "
                "spec.clusterQueue set to an existing ClusterQueue (kubectl get clusterqueues).")
    else:
        text = (f"LocalQueue {ctx.ns}/{ctx.lq_name} points at ClusterQueue {ctx.cq_name}, which does not exist: "
                "create it or recreate the LocalQueue with an existing spec.clusterQueue (kubectl get clusterqueues).")
    return Finding(Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_NOT_FOUND, text, since=_since(ctx),
                   evidence=[ctx.object_evidence("LocalQueue", ctx.lq_name, "spec.clusterQueue", None,
                                                 ctx.cq_name, ns=ctx.ns)])


@rule(Phase.PENDING, pairs(Reason.QUEUE_STOPPED, Cause.CLUSTER_QUEUE_STOPPED))
def cluster_queue_stopped(ctx: Context) -> Finding | None:
    cq_stop = (s(spec(ctx.cq).get("stopPolicy")) or "None") if _queues_known(ctx) and ctx.cq else "None"
    if cq_stop == "None":
        return None
    text = (f"ClusterQueue {ctx.cq_name} is stopped (stopPolicy {cq_stop}): it admits nothing until a platform "
            "admin sets stopPolicy to None." + _also_inactive(ctx, "Stopped"))
    return Finding(Reason.QUEUE_STOPPED, Cause.CLUSTER_QUEUE_STOPPED, text, since=_since(ctx),
                   evidence=[ctx.object_evidence("ClusterQueue", ctx.cq_name, "spec.stopPolicy", cq_stop)])


INACTIVE_CAUSES = {"FlavorNotFound": Cause.FLAVOR_NOT_FOUND, "AdmissionCheckNotFound": Cause.ADMISSION_CHECK_NOT_FOUND,
                   "AdmissionCheckInactive": Cause.ADMISSION_CHECK_INACTIVE,
                   "TopologyNotFound": Cause.TOPOLOGY_NOT_FOUND, "Stopped": Cause.CLUSTER_QUEUE_STOPPED}
INACTIVE_VERDICTS = [*pairs(Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_INACTIVE,
                            *(c for c in INACTIVE_CAUSES.values() if c != Cause.CLUSTER_QUEUE_STOPPED)),
                     (Reason.QUEUE_STOPPED, Cause.CLUSTER_QUEUE_STOPPED)]


@rule(Phase.PENDING, INACTIVE_VERDICTS)
def cluster_queue_inactive(ctx: Context) -> Finding | None:
    if not ctx.cq or ctx.lq is None:  # `_queues_known` and a ClusterQueue object, without a call
        return None
    active = _inactive_condition(ctx)
    if active is None:
        return None
    return inactive(ctx, m(active), _since(ctx))


def _inactive_condition(ctx: Context) -> Mapping[str, Any] | None:
    """The ClusterQueue's Active condition when it is not True, else None: kept per index with its test (every
    pending Workload of the queue asks; the answer is the queue's alone)."""
    memo = ctx.state.derived(INACTIVE_CONDITIONS)
    cq_name = ctx.cq_name or ""
    try:
        found: Mapping[str, Any] | None = memo[cq_name]
    except KeyError:
        active = conditions(ctx.cq).get("Active") if ctx.cq else None
        found = memo[cq_name] = None if active is None or is_true(active) else active
    return found


INACTIVE_CONDITIONS: Derived[dict[str, Mapping[str, Any] | None]] = Derived(
    "Active condition per ClusterQueue, when not True", lambda _: {})


def _deleting(ctx: Context) -> tuple[datetime, list[tuple[str, str]], str] | None:
    """(when its deletion began, the Workloads holding its quota, them named) for a ClusterQueue being deleted."""
    cq = ctx.cq
    deleted = parse_time(m(cq.get("metadata")).get("deletionTimestamp")) if cq else None
    if deleted is None:
        return None
    idx = ctx.state.index
    holders = sorted(k for k in idx.workloads_by_cq.get(ctx.cq_name or "", ()) if idx.holds_quota(k))
    shown = ", ".join(f"{ns}/{nm}" for ns, nm in holders[:3]) + (f" and {len(holders) - 3} more"
                                                                  if len(holders) > 3 else "")
    return deleted, holders, shown


def deleting_note(ctx: Context) -> str:
    """For a Workload holding quota in a ClusterQueue being deleted: Kueue keeps the queue (Active=False
    Terminating, "Can't admit new workloads") until its Workloads holding quota are gone, its finalizer
    kueue.x-k8s.io/resource-in-use removed only then (clusterqueue_controller.go Reconcile, ClusterQueueEmpty,
    Kueue 0.19.2); this one runs on, but once it is evicted or preempted it is never admitted there again."""
    found = _deleting(ctx)
    if found is None:
        return ""
    deleted, holders, shown = found
    others = [k for k in holders if k != (ctx.ns, ctx.name)]
    keeps = (f"this Workload and {len(others)} other(s) holding its quota finish ({shown})" if others
             else "this Workload, the last one holding its quota, finishes")
    lq = f"LocalQueue {ctx.ns}/{ctx.lq_name}" if ctx.lq_name else "its LocalQueue"
    return (f" Its ClusterQueue {ctx.cq_name} is being deleted (since {when_text(deleted)}): Kueue keeps it, "
            f"admitting nothing new, until {keeps}. Evicted or preempted before it finishes, this Workload is never "
            f"admitted again, nor is anything else queued in {lq}: the cluster admin recreates {ctx.cq_name} once it "
            f"is gone, or recreates {lq} on another ClusterQueue.")


def deleting_text(ctx: Context) -> str | None:
    """The ClusterQueue is being deleted (kueue#13676): what that means for a Workload queued in it, with the
    Workloads that keep it alive; None when it is not."""
    found = _deleting(ctx)
    if found is None:
        return None
    deleted, holders, shown = found
    return (f"ClusterQueue {ctx.cq_name} is being deleted (since {when_text(deleted)}): it admits nothing new, and "
            "Kueue's finalizer keeps it until "
            + (f"the {len(holders)} Workload(s) holding its quota finish ({shown})" if holders
               else "Kueue lets it go")
            + f". Nothing queued in it is ever admitted: the cluster admin recreates {ctx.cq_name} once it is gone, "
            f"or recreates LocalQueue {ctx.ns}/{ctx.lq_name} on another ClusterQueue (spec.clusterQueue is immutable; "
            "the owner may instead relabel the Job's kueue.x-k8s.io/queue-name while it is suspended).")


def inactive(ctx: Context, active: Mapping[str, Any], since: datetime | None, cq_name: str | None = None
             ) -> Finding:
    """A ClusterQueue whose Active condition is False, with the cause its reason names (`cq_name`: the one Kueue's
    message names, when the input lacks the LocalQueue that leads to it)."""
    cq_name = cq_name or ctx.cq_name
    reason = s(active.get("reason")) or "Unknown"
    message = s(active.get("message")) or ""
    parts = messages.parse_cluster_queue_inactive(message)
    cause = INACTIVE_CAUSES.get(reason, Cause.CLUSTER_QUEUE_INACTIVE)
    detail = "; ".join(f"{c}: {d}" for c, d in parts) if parts else message
    deleting = deleting_text(ctx)
    if deleting is not None:
        text = deleting
    elif cause == Cause.FLAVOR_NOT_FOUND:
        missing = _missing_flavors(ctx)
        what = ", ".join(missing) if missing else detail
        text = (f"ClusterQueue {cq_name} is inactive: it references ResourceFlavor(s) that do not exist ({what}); "
                f"create them or fix spec.resourceGroups. No Workload of this queue is admitted meanwhile."
                + _also_inactive(ctx, "FlavorNotFound"))
    elif reason == "NotFound":  # Kueue's cache has no such ClusterQueue (cache.go): not the object's fault
        text = (f"ClusterQueue {cq_name} is inactive because Kueue's cache does not hold it (NotFound: "
                f"{message.rstrip('.') or 'no message'}): Kueue has not taken it in yet (just created, or the Kueue "
                "controller is restarting) and admits nothing from it meanwhile. If this lasts more than a minute, "
                f"the cluster admin checks the Kueue controller logs (kubectl -n {ctx.state.kueue_config.namespace} "
                "logs deploy/kueue-controller-manager) for errors about this ClusterQueue.")
    else:
        text = (f"ClusterQueue {cq_name} is inactive ({reason}): {message.rstrip('.') or 'no message'}. "
                "It admits nothing until fixed" + _INACTIVE_FIX.get(reason, "") + ".")
    evidence = [ctx.object_evidence("ClusterQueue", cq_name, "condition/Active", reason, message,
                                    parse_time(active.get("lastTransitionTime")))]
    hints = [cq_hint(cq_name)]
    if cause == Cause.ADMISSION_CHECK_INACTIVE:
        for check in _inactive_checks(ctx, MULTIKUEUE_CONTROLLER):
            text += " " + multikueue.inactive_check_detail(ctx, check)
            evidence += multikueue.evidence(ctx, check)
            hints.append(f"kubectl get admissioncheck {check} -o yaml")
        for check in _inactive_checks(ctx, PROVISIONING_CONTROLLER):
            text += " " + checks.inactive_provisioning_detail(ctx, check)
            hints.append(f"kubectl get admissioncheck {check} -o yaml")
    verdict = Reason.QUEUE_STOPPED if cause == Cause.CLUSTER_QUEUE_STOPPED else Reason.QUEUE_MISCONFIGURED
    return Finding(verdict, cause, text, ActionBy.CLUSTER_ADMIN, since=since, evidence=evidence, hints=hints)


# what the cluster admin changes for an Active=False reason Kueue names without a finer cause (clusterqueue.go
# updateQueueStatus: one MultiKueue check, for the whole queue, and no ProvisioningRequest check on a manager)
_INACTIVE_FIX = {
    "MultiKueueWithProvisioningRequest": ": on a MultiKueue manager the Pods run on the worker clusters, so the "
    "ProvisioningRequest check belongs on the workers' ClusterQueues; remove it from this one's "
    "spec.admissionChecksStrategy",
    "MultipleMultiKueueAdmissionChecks": ": keep one MultiKueue AdmissionCheck in spec.admissionChecksStrategy (its "
    "MultiKueueConfig lists every worker cluster)",
    "MultiKueueAdmissionCheckAppliedPerFlavor": ": a MultiKueue AdmissionCheck applies to the whole ClusterQueue; "
    "remove its onFlavors in spec.admissionChecksStrategy",
}

_PART_TEXT = {"Stopped": "it is stopped (stopPolicy)", "FlavorNotFound": "missing ResourceFlavor(s): {}",
              "AdmissionCheckNotFound": "missing AdmissionCheck(s): {}", "AdmissionCheckInactive":
              "inactive AdmissionCheck(s): {}", "TopologyNotFound": "missing Topology: {}"}


def _also_inactive(ctx: Context, told: str) -> str:
    """The other reasons Kueue lists in the ClusterQueue's Active message (it stays inactive while any remains):
    " It stays inactive after that too: missing AdmissionCheck(s): prov." """
    active = _inactive_condition(ctx)
    parts = messages.parse_cluster_queue_inactive(s(m(active).get("message")) or "") if active is not None else ()
    others = [_PART_TEXT.get(cause, cause + ": {}").format(detail).rstrip(": ") for cause, detail in parts
              if cause != told]
    return f" It stays inactive after that too: {'; '.join(others)}." if others else ""


def _inactive_checks(ctx: Context, controller: str) -> list[str]:
    """The ClusterQueue's AdmissionChecks of that controller that are in the input and not Active."""
    names = [s(m(c).get("name")) for c in lst(m(spec(ctx.cq or {}).get("admissionChecksStrategy"))
                                              .get("admissionChecks"))]
    return [n for n in names if n and checks.controller_of(ctx, n) == controller
            and not is_true(conditions(ctx.state.admission_checks[n]).get("Active"))]


def _missing_flavors(ctx: Context) -> list[str]:
    if not ctx.state.knows("ResourceFlavor") or ctx.cq is None:
        return []
    out = []
    for group in lst(spec(ctx.cq).get("resourceGroups")):
        for fq in lst(m(group).get("flavors")):
            fname = s(m(fq).get("name"))
            if fname and fname not in ctx.state.flavors and fname not in out:
                out.append(fname)
    return out


@rule(Phase.PENDING, pairs(Reason.QUEUE_MISCONFIGURED, Cause.NAMESPACE_NOT_SELECTED))
def namespace_not_selected(ctx: Context) -> Finding | None:
    if not _queues_known(ctx) or namespace_selected(ctx):
        return None
    return namespace_rejected(ctx, _since(ctx))


def namespace_selected(ctx: Context) -> bool:
    """Evaluate the ClusterQueue's namespaceSelector; True when we cannot tell (no Namespace object).

    The same for every Workload of a namespace in the ClusterQueue: kept per index, with the Namespace
    object it was read from (a Namespace change does not rebuild the index)."""
    memo = ctx.state.derived(NAMESPACE_SELECTED)
    key = (ctx.cq_name or "", ctx.ns)
    ns_obj = ctx.state.namespaces.get(ctx.ns)
    found = memo.get(key)
    if found is None or found[0] is not ns_obj:
        found = memo[key] = (ns_obj, _namespace_selected(ctx))
    return found[1]


NAMESPACE_SELECTED: Derived[dict[tuple[str, str], tuple[Mapping[str, Any] | None, bool]]] = Derived(
    "namespace selected by a ClusterQueue", lambda _: {})


def _namespace_selected(ctx: Context) -> bool:
    sp = spec(ctx.cq) if ctx.cq is not None else {}
    selector = sp.get("namespaceSelector")
    if selector is None:
        return False  # null or left out (Kueue's webhook does not default it): a nil selector selects no namespace
    ns_obj = ctx.state.namespaces.get(ctx.ns)
    if ns_obj is None:
        return True
    ns_labels = dict(m(m(ns_obj.get("metadata")).get("labels")))
    ns_labels.setdefault("kubernetes.io/metadata.name", ctx.ns)
    return label_selector_matches(m(selector), ns_labels)


def namespace_rejected(ctx: Context, since: datetime | None) -> Finding:
    """Kueue's "namespace doesn't match" with what the selector is; a null one (or one left out of the manifest,
    which Kueue reads as null: the CRD has no default and the webhook sets none) selects no namespace at all, so
    no label on the namespace can help, only {} or a real selector on the ClusterQueue."""
    cq_name = ctx.cq_name or "<ClusterQueue>"
    selector = spec(ctx.cq).get("namespaceSelector") if ctx.cq is not None else None
    patch = (f"kubectl patch clusterqueue {cq_name} --type merge -p '{{\"spec\":{{\"namespaceSelector\":{{}}}}}}'")
    if ctx.cq is None:
        shown = "not in the input"
        text = (f"{ctx.cq_text} does not accept Workloads from namespace {ctx.ns} (Kueue's namespaceSelector check; "
                f"the ClusterQueue is not in the input to say how it selects). The cluster admin reads it "
                f"(kubectl get clusterqueue {cq_name} -o jsonpath='{{.spec.namespaceSelector}}'): empty output is a "
                "null selector, which selects no namespace (Kueue does not default it): set {} to accept every "
                f"namespace ({patch}); otherwise label namespace {ctx.ns} to match it or widen it.")
    elif selector is None:
        how = "null" if "namespaceSelector" in spec(ctx.cq) else "not set (Kueue reads it as null: no default)"
        shown = "null (selects no namespace)"
        text = (f"{ctx.cq_text} does not accept Workloads from any namespace: its spec.namespaceSelector is {how}, "
                "and a null selector selects no namespace, so no label on the namespace helps. The cluster admin "
                f"sets it to {{}} to accept every namespace ({patch}) or to a selector that matches namespace "
                f"{ctx.ns}.")
    else:
        shown = json.dumps(selector, separators=(",", ":"), sort_keys=True)[:200]
        text = (f"{ctx.cq_text} does not accept Workloads from namespace {ctx.ns}: its namespaceSelector "
                f"is {shown}. Label the namespace to match, or widen the selector.")
    return Finding(Reason.QUEUE_MISCONFIGURED, Cause.NAMESPACE_NOT_SELECTED, text, since=since,
                   evidence=[ctx.object_evidence("ClusterQueue", ctx.cq_name, "spec.namespaceSelector", None,
                                                 shown)],
                   hints=[cq_hint(ctx.cq_name)] if ctx.cq is not None and selector is None
                   else [f"kubectl get namespace {ctx.ns} --show-labels"])


def cohort_cycle(ctx: Context, cq: Mapping[str, Any] | None) -> list[str]:
    """The cohort names of a parentName cycle above the ClusterQueue, or [] (only with Cohorts in the input)."""
    name_ = s(spec(cq).get("cohortName")) if cq else None
    seen: list[str] = []
    while name_ and name_ not in seen and len(seen) < 64:
        seen.append(name_)
        cohort = ctx.state.cohorts.get(name_)
        name_ = s(spec(cohort).get("parentName")) if cohort else None
    if name_ and name_ in seen:
        return [*seen[seen.index(name_):], name_]
    return []
