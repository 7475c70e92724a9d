"""What Kueue's QuotaReserved=False message says, one handler per message Template.

The parser (`engine/messages/`) turns the text into a Template and facts; `handlers.HANDLERS` maps each
Template to a handler record that declares the verdicts it may give, like a rule. Flavor-assignment
failures, the numbers-heavy case, register from `flavors.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from ...kube.objects import (
    closed,
    conditions,
    format_duration,
    is_true,
    lst,
    m,
    name,
    parse_time,
    s,
    when_text,
)
from ...kube.slim import MORE_NEEDED
from ...state import ClusterState, Derived
from ...vocabulary import ActionBy, Cause, Reason
from .. import quota
from ..context import Context
from ..messages import ParsedMessage, Template, parse_workload_message
from ..owner_status import owner_rejected
from ..pods.events import event_first_time, event_message
from ..rules import Finding, Phase, pairs, rule
from . import flavors  # noqa: F401  (registers the FLAVOR_ASSIGNMENT handler)
from .check_states import failed_checks
from .eviction import ignored_rejection, ignored_rejection_hints, ignored_rejection_text
from .handlers import HANDLERS, MessageHandler, finding, handles
from .order import pending_in
from .queue_restart import stale_queue_message
from .queues import (
    cohort_cycle,
    cq_hint,
    deleting_text,
    inactive,
    local_queue_not_found,
    namespace_rejected,
)
from .stalled import STALL_AFTER


def _queue_message(templates: Iterable[Template], reason: Reason, cause: Cause, action: ActionBy, fmt: str,
                   ) -> MessageHandler:
    def handle(ctx: Context, p: ParsedMessage) -> Finding | None:
        cq = p.names.get("clusterQueue") or ctx.cq_name
        # "ClusterQueue x", or how the context names it when neither Kueue's message nor the input does
        names = {"lq": p.names.get("localQueue") or ctx.lq_name, "cq": cq, "ns": ctx.ns,
                 "CQ": f"ClusterQueue {cq}" if cq else ctx.cq_text,
                 "get_cq": f"kubectl get clusterqueue {cq} -o yaml" if cq else "kubectl get clusterqueues -o yaml"}
        if stale_queue_message(ctx) is not None:
            return None  # the queue runs again: `order.not_yet_evaluated` says so
        text = fmt.format(**names)
        return finding(reason, cause, text[:1].upper() + text[1:], ctx, action, hints=[cq_hint(cq)])
    return handles(*templates, emits=[(reason, cause)])(handle)


# Kueue writes "LocalQueue x is inactive" only for a LocalQueue whose stopPolicy is not None (getQueueBlocker)
_queue_message([Template.LOCAL_QUEUE_INACTIVE, Template.LOCAL_QUEUE_STOPPED], Reason.QUEUE_STOPPED,
               Cause.LOCAL_QUEUE_STOPPED, ActionBy.QUEUE_ADMIN,
               "LocalQueue {ns}/{lq} is stopped (stopPolicy Hold or HoldAndDrain): nothing in it is admitted until "
               "its admin sets stopPolicy to None (kubectl get localqueue {lq} -n {ns} -o "
               "jsonpath='{{.spec.stopPolicy}}').")
_queue_message([Template.LOCAL_QUEUE_TERMINATING], Reason.QUEUE_MISCONFIGURED, Cause.LOCAL_QUEUE_NOT_FOUND,
               ActionBy.QUEUE_ADMIN, "LocalQueue {ns}/{lq} is terminating or missing; Kueue dropped the quota "
               "reservation.")
_queue_message([Template.CLUSTER_QUEUE_NOT_FOUND], Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_NOT_FOUND,
               ActionBy.CLUSTER_ADMIN, "ClusterQueue {cq} (of LocalQueue {ns}/{lq}) does not exist: create it, or "
               "recreate the LocalQueue with an existing one (its spec.clusterQueue is immutable).")
_queue_message([Template.CLUSTER_QUEUE_STOPPED], Reason.QUEUE_STOPPED, Cause.CLUSTER_QUEUE_STOPPED,
               ActionBy.CLUSTER_ADMIN, "{CQ} is stopped: it admits nothing until a platform admin sets "
               "stopPolicy to None.")


@handles(Template.CLUSTER_QUEUE_TERMINATING, emits=pairs(Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_NOT_FOUND))
def _cluster_queue_terminating(ctx: Context, p: ParsedMessage) -> Finding:
    cq = p.names.get("clusterQueue") or ctx.cq_name
    text = deleting_text(ctx) or (f"ClusterQueue {cq} is terminating or missing: Kueue admits nothing from it; the "
                                  f"cluster admin recreates it, or recreates LocalQueue {ctx.ns}/{ctx.lq_name} on "
                                  "another ClusterQueue (its spec.clusterQueue is immutable).")
    return finding(Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_NOT_FOUND, text, ctx, ActionBy.CLUSTER_ADMIN,
                   hints=[cq_hint(cq)])


_queue_message([Template.NAMESPACE_MISSING], Reason.QUEUE_MISCONFIGURED, Cause.NAMESPACE_NOT_SELECTED,
               ActionBy.CLUSTER_ADMIN, "Kueue could not read namespace {ns} to match the ClusterQueue's "
               "namespaceSelector.")
_queue_message([Template.INVALID_NAMESPACE_SELECTOR], Reason.QUEUE_MISCONFIGURED, Cause.NAMESPACE_NOT_SELECTED,
               ActionBy.CLUSTER_ADMIN, "{CQ} has an invalid namespaceSelector: fix it ({get_cq}).")


@handles(Template.FLAVOR_ASSIGNMENT_ERROR,
         emits=pairs(Reason.QUEUE_MISCONFIGURED, Cause.TOPOLOGY_MISMATCH, Cause.NO_MATCHING_FLAVOR))
def _flavor_error(ctx: Context, p: ParsedMessage) -> Finding:
    ps, err = p.podset_errors[0] if p.podset_errors else ("?", p.details or ctx.cond_message("QuotaReserved"))
    topo = "topology" in err.lower() or "tas" in err.lower()
    text = f"Kueue cannot assign flavors to pod set {ps}: {closed(err)}"
    return finding(Reason.QUEUE_MISCONFIGURED, Cause.TOPOLOGY_MISMATCH if topo else Cause.NO_MATCHING_FLAVOR, text,
                   ctx, ActionBy.CLUSTER_ADMIN)


@handles(Template.LOCAL_QUEUE_NOT_FOUND, emits=pairs(Reason.QUEUE_MISCONFIGURED, Cause.LOCAL_QUEUE_NOT_FOUND))
def _local_queue_not_found(ctx: Context, p: ParsedMessage) -> Finding:
    return local_queue_not_found(ctx, ctx.cond_time("QuotaReserved"))


@handles(Template.CLUSTER_QUEUE_INACTIVE, emits=[
    *pairs(Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_INACTIVE, Cause.COHORT_CYCLE, Cause.FLAVOR_NOT_FOUND,
           Cause.ADMISSION_CHECK_NOT_FOUND, Cause.ADMISSION_CHECK_INACTIVE, Cause.TOPOLOGY_NOT_FOUND),
    (Reason.QUEUE_STOPPED, Cause.CLUSTER_QUEUE_STOPPED)])
def _cluster_queue_inactive(ctx: Context, p: ParsedMessage) -> Finding | None:
    if stale_queue_message(ctx) is not None:
        return None  # Active again since Kueue wrote it: `order.not_yet_evaluated` says so
    cq_name = p.names.get("clusterQueue") or ctx.cq_name
    cq = ctx.state.cluster_queues.get(cq_name or "")
    active = conditions(cq).get("Active") if cq else None
    if active is not None and not is_true(active):
        f = inactive(ctx, m(active), ctx.cond_time("QuotaReserved"), cq_name)
        f.evidence.insert(0, ctx.condition_evidence("QuotaReserved"))
        return f
    cycle = cohort_cycle(ctx, cq)
    if cycle:
        text = (f"ClusterQueue {cq_name} is Active but Kueue treats it as inactive: its cohort tree has a cycle "
                f"({' -> '.join(cycle)}). Fix the Cohorts' spec.parentName; nothing in the tree is admitted meanwhile.")
        return finding(Reason.QUEUE_MISCONFIGURED, Cause.COHORT_CYCLE, text, ctx,
                       hints=[f"kubectl get cohorts {' '.join(dict.fromkeys(cycle))} -o yaml"])
    text = (f"Kueue says ClusterQueue {cq_name} is inactive; its Active condition says why (missing "
            f"ResourceFlavor or AdmissionCheck, stopped, cohort cycle): kubectl describe clusterqueue {cq_name}.")
    return finding(Reason.QUEUE_MISCONFIGURED, Cause.CLUSTER_QUEUE_INACTIVE, text, ctx, hints=[cq_hint(cq_name)])


@handles(Template.NAMESPACE_NOT_SELECTED, emits=pairs(Reason.QUEUE_MISCONFIGURED, Cause.NAMESPACE_NOT_SELECTED))
def _namespace_not_selected(ctx: Context, p: ParsedMessage) -> Finding:
    f = namespace_rejected(ctx, ctx.cond_time("QuotaReserved"))
    f.evidence.insert(0, ctx.condition_evidence("QuotaReserved"))
    return f


@handles(Template.RESOURCES_INVALID, Template.LIMIT_RANGE,
         emits=pairs(Reason.QUEUE_MISCONFIGURED, Cause.INVALID_REQUESTS))
def _invalid_requests(ctx: Context, p: ParsedMessage) -> Finding:
    text = (f"Kueue rejects the Pod requests: {p.details or ctx.cond_message('QuotaReserved')}. Fix the containers' "
            "requests/limits in the Job.")
    if p.template == Template.LIMIT_RANGE:
        # scheduler.go parks it as inadmissible, and a LimitRange change requeues nothing (kueue#14965, fixed after
        # v0.19.2): a relaxed LimitRange leaves this message until another event of the ClusterQueue
        text += (f" If the namespace's LimitRange was relaxed after {when_text(ctx.cond_time('QuotaReserved'))}, "
                 "this is stale: Kueue v0.19 does not evaluate the Workload again for a LimitRange change "
                 f"(kueue#14965), only when something else in {ctx.cq_text} changes (a Workload finishing, an edit "
                 "of the queue); recreating the Job makes it evaluate it now.")
    return finding(Reason.QUEUE_MISCONFIGURED, Cause.INVALID_REQUESTS, text, ctx, ActionBy.WORKLOAD_OWNER)


@handles(Template.ADMISSION_GATED, emits=pairs(Reason.NOT_YET_EVALUATED, Cause.ADMISSION_GATED))
def _admission_gated(ctx: Context, p: ParsedMessage) -> Finding:
    gates = p.names.get("gatedBy") or s(m(m(ctx.wl.get("metadata")).get("annotations")).get(
        "kueue.x-k8s.io/admission-gated-by")) or "?"
    text = (f"Admission is gated by {gates} (annotation kueue.x-k8s.io/admission-gated-by); Kueue evaluates it "
            "once those controllers remove their gate.")
    return finding(Reason.NOT_YET_EVALUATED, Cause.ADMISSION_GATED, text, ctx)


@handles(Template.PENDING_EVALUATION, Template.ADMISSION_GATE_CLEARED, Template.DEACTIVATED, emits=[])
def _decided_elsewhere(ctx: Context, p: ParsedMessage) -> Finding | None:
    """Not yet evaluated: `order.not_yet_evaluated` (it also knows the queue head); deactivated: spec.active
    decides (`terminal.deactivated`), so a stale message falls through."""
    return None


@handles(Template.BYPASSED_EQUIVALENT, emits=[(Reason.WAITING_FOR_QUOTA, Cause.EQUIVALENT_WORKLOAD_FAILED),
                                              (Reason.EXCEEDS_MAX_QUOTA, Cause.EQUIVALENT_WORKLOAD_FAILED),
                                              (Reason.QUEUE_MISCONFIGURED, Cause.EQUIVALENT_WORKLOAD_FAILED)])
def _bypassed(ctx: Context, p: ParsedMessage) -> Finding:
    text = ("Kueue skipped evaluating it because a Workload of the same shape in "
            f"{ctx.cq_text} just failed to fit; it will be retried when quota changes. That Workload's diagnosis "
            "applies here too.")
    reason = {"ExceedsMaxQuota": Reason.EXCEEDS_MAX_QUOTA, "NoMatchingFlavor": Reason.QUEUE_MISCONFIGURED}.get(
        ctx.cond_reason("QuotaReserved"), Reason.WAITING_FOR_QUOTA)
    return finding(reason, Cause.EQUIVALENT_WORKLOAD_FAILED, text, ctx)


@handles(Template.FAILED_ADMISSION_CHECKS,
         emits=pairs(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_RETRY, Cause.ADMISSION_CHECK_REJECTED))
def _failed_checks(ctx: Context, p: ParsedMessage) -> Finding:
    """Kueue's scheduler skips a Workload while one of its checks is in Retry or Rejected ("The workload has failed
    admission checks"); the check's controller resets a Retry once the back-off is over. When the back-off ended long
    ago and a check is still in Retry, nothing will move it (kueue#5129). A Rejected one Kueue deactivates only while
    the Workload holds quota: here it holds none, so it stays until the owner acts (kueue#10807)."""
    checks = [m(x) for x in lst(ctx.status.get("admissionChecks"))]
    failed = failed_checks(ctx)
    if not failed:
        text = ("Kueue last skipped it because an admission check was in Retry or Rejected state; its checks are "
                "Pending again, so Kueue considers it at its next scheduling attempt. See status.admissionChecks.")
        reset = [t for t in (parse_time(c.get("lastTransitionTime")) for c in checks) if t is not None]
        if checks and len(reset) == len(checks) and ctx.after(max(reset), STALL_AFTER):
            # any attempt since would have rewritten this message (a flavor assignment, or quota reserved)
            text = (f"Kueue last skipped it because an admission check was in Retry or Rejected state, but its checks "
                    f"were reset to Pending {format_duration(ctx.now - max(reset))} ago and Kueue has not tried it "
                    "since (its message would have changed): it is stuck (kueue#5129). The cluster admin reads the "
                    "Kueue controller logs for this Workload; deleting the Workload (Kueue makes a new one for its "
                    "owner) queues it afresh.")
            return finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_RETRY, text, ctx,
                           ActionBy.CLUSTER_ADMIN)
        return finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_RETRY, text, ctx, ActionBy.NOBODY)
    first = failed[0]
    cname, state = s(first.get("name")) or "?", s(first.get("state"))
    said, since = s(first.get("message")) or "no message", parse_time(first.get("lastTransitionTime"))
    backoff_end = parse_time(m(ctx.status.get("requeueState")).get("requeueAt"))
    if ctx.cond_reason("Requeued") == "BackoffFinished":
        backoff_end = max(filter(None, (backoff_end, ctx.cond_time("Requeued"))), default=None)
    if state == "Rejected":
        ignored = ignored_rejection(ctx)
        if ignored is not None:  # no quota: Kueue never deactivates it (kueue#10807)
            return finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_REJECTED,
                           ignored_rejection_text(ctx, ignored), ctx, ActionBy.WORKLOAD_OWNER,
                           hints=ignored_rejection_hints(ctx))
        # Kueue decided while it held quota (DeactivationTarget): its workload controller sets spec.active=false
        text = (f"Admission check {cname} rejected it (\"{said[:300]}\") and Kueue is deactivating the Workload "
                f"(DeactivationTarget since {when_text(ctx.cond_time('DeactivationTarget'))}); it is not retried. "
                "See status.admissionChecks.")
        return finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_REJECTED, text, ctx, ActionBy.NOBODY)
    if backoff_end is not None and ctx.after(max(backoff_end, since or backoff_end), STALL_AFTER):
        text = (f"Admission check {cname} has been in {state} for {format_duration(ctx.now - (since or ctx.now))} "
                f"(\"{said[:300]}\") and the re-queue back-off ended {format_duration(ctx.now - backoff_end)} ago, "
                "yet the check was never reset to Pending: Kueue's scheduler skips a Workload while a check is in "
                f"Retry, so nothing moves it (kueue#5129). The cluster admin looks at check {cname}'s controller "
                f"(kubectl get admissioncheck {cname} -o yaml, and its logs); deleting the Workload (Kueue makes a "
                "new one for its owner) starts the check afresh.")
        return finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_RETRY, text, ctx,
                       ActionBy.CLUSTER_ADMIN)
    in_backoff = backoff_end is not None and not ctx.after(backoff_end, timedelta(0))
    until = f" (back-off until {when_text(backoff_end)})" if in_backoff else ""
    text = (f"Admission check {cname} is in {state} (\"{said[:300]}\"); Kueue re-queues the Workload after the "
            f"check's back-off{until} and its controller resets the check. See status.admissionChecks.")
    return finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_RETRY, text, ctx, ActionBy.NOBODY)



@handles(Template.NO_LONGER_FITS, emits=pairs(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA))
def _no_longer_fits(ctx: Context, p: ParsedMessage) -> Finding:
    heads = reserving_heads(ctx)
    if heads:
        who = "; ".join(f"ClusterQueue {cq}'s head {ns}/{nm} (reclaimWithinCohort {policy})" for cq, ns, nm, policy
                        in heads[:3])
        text = (f"Kueue sets quota of cohort {ctx.cohort} aside in every scheduling cycle for the head of another "
                f"ClusterQueue that needs preemption and finds no Workload it may preempt: {who}. So the quota this "
                f"Workload needs in {ctx.cq_text} is not handed out until that head is admitted. The cluster admin "
                "can set preemption.reclaimWithinCohort: Any on that ClusterQueue (Kueue then preempts for it instead "
                "of setting quota aside), or give it quota of its own.")
        return finding(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA, text, ctx, ActionBy.CLUSTER_ADMIN,
                       hints=[f"kubectl describe clusterqueue {heads[0][0]}"])
    text = (f"Another Workload of the cohort took the quota in the same scheduling cycle; it waits for quota in "
            f"{ctx.cq_text}.")
    return finding(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA, text, ctx)


def reserving_heads(ctx: Context) -> list[tuple[str, str, str, str]]:
    """(ClusterQueue, namespace, name, its reclaimWithinCohort) of the heads of the cohort's other queues that
    wait for unused quota ("N more needed"): Kueue finds no preemption candidate for such a head and, unless its
    queue may always reclaim (reclaimWithinCohort Any), adds its request to the cohort's usage for the rest of
    the cycle (scheduler.go reserveCapacityForUnreclaimablePreempt): the Workloads after it "no longer fit"."""
    if not ctx.cohort:
        return []
    out = []
    for cq_name in ctx.state.index.cqs_by_cohort.get(ctx.cohort, ()):
        cq = ctx.state.cluster_queues.get(cq_name)
        policy = s(m(m(cq.get("spec")).get("preemption")).get("reclaimWithinCohort")) if cq else None
        if cq_name == ctx.cq_name or cq is None or (policy or "Never") == "Any":
            continue
        pending = pending_in(ctx, cq_name)
        if not pending:
            continue
        _, ns, nm = pending[0]
        head = ctx.state.workloads.get((ns, nm))
        said = m(conditions(head).get("QuotaReserved")) if head is not None else None
        if said is not None and s(said.get("status")) == "False" and MORE_NEEDED in (s(said.get("message")) or "") \
                and head is not None and _may_preempt(ctx, cq_name, head, s(said.get("message")) or ""):
            out.append((cq_name, ns, nm, policy or "Never"))
    return out


def _may_preempt(ctx: Context, cq_name: str, head: Mapping[str, Any], message: str) -> bool:
    """Does Kueue try preemption for the head (and so set its request aside when it finds no candidate)? For
    every resource its message says is short (`quota.tries_preemption`); unknown (a projection, a cut message):
    assumed so."""
    requests, _ = quota.workload_requests(head)
    for f in parse_workload_message(message).failures:
        if not f.resource or not f.flavor or not requests:
            continue
        asked = sum((r.get(f.resource, Decimal(0)) for r in requests.values()), Decimal(0))
        fq = quota.flavor_quota(ctx.state, "ClusterQueue", cq_name, f.flavor, f.resource)
        if fq is not None and not quota.tries_preemption(ctx.state, cq_name, asked, fq.nominal):
            return False
    return True


@handles(Template.OVERLAPPING_PREEMPTION_TARGETS, Template.OVERLAPPING_PREEMPTION_WILL_FIT,
         emits=[(Reason.WAITING_FOR_PREEMPTION, Cause.PREEMPTION_IN_PROGRESS),
                (Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA)])
def _overlapping(ctx: Context, p: ParsedMessage) -> Finding:
    will_fit = p.template == Template.OVERLAPPING_PREEMPTION_WILL_FIT
    text = ("Another Workload needs the same preemption victims; Kueue handles that one first"
            + (" and this one fits once those preemptions complete." if will_fit else " and retries this one."))
    if will_fit:
        return finding(Reason.WAITING_FOR_PREEMPTION, Cause.PREEMPTION_IN_PROGRESS, text, ctx)
    first = _pending_since(ctx)  # not the event's count: it grows every cycle, the diagnosis would follow it
    if ctx.after(first, STARVED_AFTER):
        text = (f"Since {when_text(first)} (Kueue's Pending event about it) every scheduling cycle found "
                "another Workload needing the same preemption victims and handled that one first: this one is "
                "starved, not briefly skipped (seen with fair sharing in hierarchical cohorts, kueue#13320). Cluster "
                "admin: find the Workload that keeps winning in the cohort and the borrowing that makes Kueue order "
                "this one last (`kubectl get cohorts,clusterqueues -o wide`); a higher priority for this Workload, "
                "or less borrowing by its siblings, lets it through.")
        return finding(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA, text, ctx, ActionBy.CLUSTER_ADMIN)
    return finding(Reason.WAITING_FOR_QUOTA, Cause.INSUFFICIENT_UNUSED_QUOTA, text, ctx)


STARVED_AFTER = timedelta(hours=1)  # the same "overlapping preemption targets" this long: not a one-cycle skip


def _pending_since(ctx: Context) -> datetime | None:
    """The first time of Kueue's Warning "Pending" event series about this Workload with its current message: how
    long the same verdict of Kueue's scheduler has lasted (the condition's time moves with any other change)."""
    message = ctx.cond_message("QuotaReserved")
    times = [event_first_time(ev) for ev in ctx.state.events_about("Workload", ctx.ns, ctx.name)
             if s(ev.get("reason")) == "Pending" and event_message(ev) == message]
    return min((t for t in times if t is not None), default=None)


@handles(Template.PREEMPTION_GATED, emits=pairs(Reason.WAITING_FOR_PREEMPTION, Cause.PREEMPTION_GATED))
def _preemption_gated(ctx: Context, p: ParsedMessage) -> Finding:
    """Kueue checks preemption gates only with ConcurrentAdmission or MultiKueueOrchestratedPreemption (both alpha,
    scheduler.go): each of its own gates opens by its own rule; any other is opened by whoever set it."""
    opened = {s(m(g).get("name")): m(g) for g in lst(ctx.status.get("preemptionGates"))
              if s(m(g).get("position")) == "Open"}
    closed = [n for n in (s(m(g).get("name")) for g in lst(ctx.spec.get("preemptionGates"))) if n and n not in opened]
    if not closed:
        text = "The Workload needs to preempt others, but a preemption gate (spec.preemptionGates) is closed."
        return finding(Reason.WAITING_FOR_PREEMPTION, Cause.PREEMPTION_GATED, text, ctx)
    many = len(closed) > 1
    text = (f"The Workload needs to preempt others to fit, but its preemption gate{'s' if many else ''} "
            f"{', '.join(closed)} {'are' if many else 'is'} closed (spec.preemptionGates, no Open position in "
            f"status.preemptionGates): Kueue preempts nothing for it until {'each' if many else 'it'} opens.")
    for gate in closed[:3]:
        text += " " + _GATE_OPENS.get(gate, f"{gate} is not one of Kueue's gates and Kueue never opens it: the "
                                             "controller that added it must set its position to Open in "
                                             "status.preemptionGates (ask its owner why it holds).")
    return finding(Reason.WAITING_FOR_PREEMPTION, Cause.PREEMPTION_GATED, text, ctx)


_GATE_OPENS = {  # controllers/constants: MultiKueuePreemptionGate, ConcurrentAdmissionPreemptionGate
    "kueue.x-k8s.io/multikueue": (
        "kueue.x-k8s.io/multikueue marks a MultiKueue worker's copy: the manager cluster opens it on one worker at a "
        "time, so that one worker preempts for the Workload while the others wait (MultiKueueOrchestratedPreemption); "
        "it opens when the manager picks this worker, or when the one picked before runs out of time. The Workload "
        "on the manager cluster shows where its copies stand."),
    "kueue.x-k8s.io/concurrent-admission": (
        "kueue.x-k8s.io/concurrent-admission marks a ConcurrentAdmission variant: Kueue lets one variant of the "
        "parent Workload preempt at a time and opens this gate once the variant preempting now is done or runs out "
        "of time."),
}


@handles(Template.WAITING_FOR_PODS_READY, emits=pairs(Reason.NOT_YET_EVALUATED, Cause.WAITING_FOR_PODS_READY))
def _waiting_pods_ready(ctx: Context, p: ParsedMessage) -> Finding:
    text = ("Kueue admits nothing new until every Workload holding quota has its Pods ready (waitForPodsReady."
            "blockAdmission), in every ClusterQueue")
    holders = ctx.state.derived(NOT_READY_HOLDERS)
    if holders:
        shown = ", ".join(f"{ns}/{nm}" for ns, nm in holders[:3])
        more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
        verb = "holds" if len(holders) == 1 else "hold"
        text += (f": {shown}{more} {verb} quota without PodsReady=True (one still waiting for an admission check, "
                 "a ProvisioningRequest say, blocks everyone too); see their diagnoses.")
    else:
        text += "; look for Workloads holding quota with PodsReady not True."
    return finding(Reason.NOT_YET_EVALUATED, Cause.WAITING_FOR_PODS_READY, text, ctx)


def _not_ready_holders(state: ClusterState) -> list[tuple[str, str]]:
    """The Workloads Kueue's blockAdmission waits for: quota reserved, not finished, PodsReady not True (the
    scheduler cache counts every one holding quota, admitted or still waiting for its checks)."""
    out = []
    for key in sorted(k for k in state.workloads if state.index.holds_quota(k)):
        conds = conditions(state.workloads[key])
        if not is_true(conds.get("PodsReady")) and not is_true(conds.get("Finished")):
            out.append(key)
    return out


NOT_READY_HOLDERS: Derived[list[tuple[str, str]]] = Derived("quota holders without PodsReady", _not_ready_holders)


@handles(Template.FAILED_TO_ADMIT, Template.MORE_FAVORABLE_VARIANT_ADMITTED, Template.BELOW_LAST_ACCEPTABLE_FLAVOR,
         Template.PENDING_MIGRATION, emits=pairs(Reason.NOT_YET_EVALUATED, Cause.PENDING_EVALUATION))
def _transient(ctx: Context, p: ParsedMessage) -> Finding:
    text = (f"Kueue is still deciding ({ctx.cond_message('QuotaReserved')[:300]}); it retries by itself. If this "
            "lasts, check the Kueue controller logs.")
    return finding(Reason.NOT_YET_EVALUATED, Cause.PENDING_EVALUATION, text, ctx)


@handles(Template.DRA_FEATURE_DISABLED, Template.DRA_RESOURCE_CLAIMS_UNSUPPORTED, Template.DRA_FIELD_ERRORS,
         emits=pairs(Reason.QUEUE_MISCONFIGURED, Cause.DYNAMIC_RESOURCES_UNSUPPORTED))
def _dra(ctx: Context, p: ParsedMessage) -> Finding:
    """Each DRA refusal has its own fixer: the gate off is the platform's, a named ResourceClaim is the owner's (Kueue
    counts only claims made from templates, whatever its Configuration), a DeviceClass not mapped is the platform's."""
    said = ctx.cond_message("QuotaReserved")
    kind = (s(ctx.owner_ref.get("kind")) if ctx.owner_ref else None) or "Job"
    if p.template == Template.DRA_RESOURCE_CLAIMS_UNSUPPORTED:
        claims = _named_claims(ctx)
        named = f" ({', '.join(claims[:3])})" if claims else ""
        text = (f"Kueue refuses it: \"{said}\". Its Pods name existing ResourceClaims{named} through "
                "resourceClaimName, and Kueue's DRA integration counts only claims the Pods get from a "
                "ResourceClaimTemplate (resourceClaimTemplateName): no Configuration change admits a shared claim. "
                f"The owner of the {kind} must request the devices through a ResourceClaimTemplate and recreate it.")
        return finding(Reason.QUEUE_MISCONFIGURED, Cause.DYNAMIC_RESOURCES_UNSUPPORTED, text, ctx,
                       ActionBy.WORKLOAD_OWNER)
    if p.template == Template.DRA_FEATURE_DISABLED:
        cfg = ctx.state.kueue_config
        where = f"; {cfg.gates_source}" if "KueueDRAIntegration" in cfg.feature_gates else ""
        text = (f"Kueue refuses it: \"{said}\". Kueue's KueueDRAIntegration feature gate is off (on by "
                f"default since Kueue v0.18, so someone turned it off{where}), and "
                "KueueDRARejectWorkloadsWhenDRADisabled makes Kueue refuse every Workload whose Pods claim devices "
                "rather than admit them uncounted. The platform admin turns KueueDRAIntegration on and maps the "
                "claims' DeviceClasses in resources.deviceClassMappings of Kueue's Configuration; until then only "
                f"a {kind} without resourceClaims is admitted.")
        return finding(Reason.QUEUE_MISCONFIGURED, Cause.DYNAMIC_RESOURCES_UNSUPPORTED, text, ctx)
    if "is not mapped in DRA configuration" in said:  # dra/claims.go: the platform's mapping lacks the class
        text = (f"Kueue cannot count these Pods' Dynamic Resource Allocation claims: {said}. The platform admin maps "
                "the DeviceClass to a resource in resources.deviceClassMappings of Kueue's Configuration (and the "
                "ClusterQueue's quota covers that resource).")
        return finding(Reason.QUEUE_MISCONFIGURED, Cause.DYNAMIC_RESOURCES_UNSUPPORTED, text, ctx)
    # the claim as written: FirstAvailable, adminAccess, allocationMode All, a CEL selector that fails, an extended
    # resource whose DeviceClass counts by counters or capacity (dra/claims.go, extended_resources.go)
    text = (f"Kueue cannot count the devices these Pods claim, as the claims are written: {said}. The owner of the "
            f"{kind} changes the ResourceClaimTemplate (or the request) as the message says and recreates the {kind}.")
    return finding(Reason.QUEUE_MISCONFIGURED, Cause.DYNAMIC_RESOURCES_UNSUPPORTED, text, ctx,
                   ActionBy.WORKLOAD_OWNER)


def _named_claims(ctx: Context) -> list[str]:
    """The resourceClaimName of each pod set's Pod template: what Kueue's DRA integration refuses."""
    return [str(c["resourceClaimName"]) for ps in lst(ctx.spec.get("podSets"))
            for c in (m(x) for x in lst(m(m(m(ps).get("template")).get("spec")).get("resourceClaims")))
            if s(c.get("resourceClaimName"))]


def _on_hold(ctx: Context) -> Finding:
    """Kueue 0.19 holds a Workload (releasing its quota, never requeuing it) for a StatefulSet scaled to zero,
    which scaling up lifts, and for an owner its controller rejected (JobWithOnHold: a RayJob in ValidationFailed,
    "Job is on hold"), which only a fixed, recreated owner lifts."""
    said = ctx.cond_message("QuotaReserved") or "no message"
    kind = s(ctx.owner.get("kind")) if ctx.owner is not None else None
    rejected = owner_rejected(ctx.owner)
    hints: list[str] = []
    if rejected is not None and ctx.owner is not None:
        text = (f"KubeRay rejected RayJob {ctx.ns}/{name(ctx.owner)} (jobDeploymentStatus ValidationFailed: "
                f"\"{rejected[:300]}\"), so Kueue holds its Workload (OnHold: {said}) and released its quota. Nothing "
                "lifts the hold: the owner must fix what KubeRay says and recreate the RayJob (a name cannot be "
                "changed in place).")
        action = ActionBy.WORKLOAD_OWNER
    elif kind == "StatefulSet" or "scaled to zero" in said:
        text = (f"Its StatefulSet was scaled to zero: Kueue released the quota and holds the Workload (OnHold: {said}) "
                "until it is scaled up again; nobody needs to act unless it should run.")
        action = ActionBy.NOBODY
    else:
        text = (f"Kueue holds it (OnHold: {said}) and released its quota because the owner's controller rejected the "
                "owner (Kueue 0.19 does so for a RayJob KubeRay marked ValidationFailed): read the owner's "
                "status.message, fix it and recreate the owner; nothing lifts the hold by itself.")
        action = ActionBy.WORKLOAD_OWNER
    if kind and ctx.owner is not None and action == ActionBy.WORKLOAD_OWNER:
        hints = [f"kubectl -n {ctx.ns} get {kind.lower()} {name(ctx.owner)} -o jsonpath='{{.status.message}}'"]
    return finding(Reason.NOT_YET_EVALUATED, Cause.ON_HOLD, text, ctx, action, hints=hints)


@rule(Phase.PENDING, [(Reason.NOT_YET_EVALUATED, Cause.ON_HOLD), *(v for h in HANDLERS.values() for v in h.emits)])
def from_kueue_message(ctx: Context) -> Finding | None:
    if not ctx.cond("QuotaReserved"):
        return None
    if ctx.cond_reason("QuotaReserved") == "OnHold":
        return _on_hold(ctx)
    handler = HANDLERS.get(ctx.qr_parsed.template)
    return handler.handle(ctx, ctx.qr_parsed) if handler else None


@rule(Phase.PENDING, pairs(Reason.UNKNOWN, Cause.UNRECOGNIZED_MESSAGE))
def unrecognized(ctx: Context) -> Finding | None:
    text = (f"Not admitted; Kueue wrote {ctx.cond_reason('QuotaReserved') or 'no reason'}: "
            f"{ctx.cond_message('QuotaReserved')[:600] or 'no message'}. kueue-doctor does not recognise this "
            "message: read it and the Workload's events (kubectl describe workload).")
    return Finding(Reason.UNKNOWN, Cause.UNRECOGNIZED_MESSAGE, text, since=ctx.cond_time("QuotaReserved"),
                   evidence=[ctx.condition_evidence("QuotaReserved")] if ctx.cond("QuotaReserved") else [],
                   hints=[f"kubectl describe workload {ctx.name} -n {ctx.ns}"])
