"""Admission-stage rules: why Kueue has not admitted the Workload (yet).

Each rule is a small function `Context -> Finding | None`; `RULES` gives the order in which they are
asked, from the most definite (finished, deactivated) to the least (not yet evaluated).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ..kube.objects import conditions, format_time, i, is_true, lst, m, name, namespace, parse_time, s, spec, status
from ..kube.quantity import parse
from ..vocabulary import ActionBy
from . import messages, quota
from .context import Context, Finding, Rule
from .messages import FailureKind, Template

NOBODY, OWNER, QADMIN, CADMIN = ActionBy.NOBODY, ActionBy.WORKLOAD_OWNER, ActionBy.QUEUE_ADMIN, ActionBy.CLUSTER_ADMIN

# Kueue's severity of flavor-assignment failures (resolveNoFitReason): higher is worse.
SEVERITY = {
    FailureKind.RESOURCE_NOT_COVERED: 4, FailureKind.FLAVOR_NOT_FOUND: 4, FailureKind.UNTOLERATED_TAINT: 4,
    FailureKind.NODE_AFFINITY_MISMATCH: 4, FailureKind.TOPOLOGY_FLAVOR: 4,
    FailureKind.EXCEEDS_MAXIMUM_CAPACITY: 3, FailureKind.INSUFFICIENT_UNUSED_QUOTA: 2,
    FailureKind.TOPOLOGY_PLACEMENT: 1,
}


def cq_hint(cq: str | None) -> str:
    return f"kubectl describe clusterqueue {cq}" if cq else "kubectl get clusterqueues"


def admitted_in(cq: str | None) -> str:
    return (f"kubectl get workloads -A --field-selector status.admission.clusterQueue={cq}" if cq
            else "kubectl get workloads -A")


# --------------------------------------------------------------------------------------------------
# terminal and parked states


def finished(ctx: Context) -> Finding | None:
    if not ctx.true("Finished"):
        return None
    reason = ctx.cond_reason("Finished") or "Succeeded"
    cause = reason
    msg = ctx.cond_message("Finished")
    text = f"Finished ({reason}) at {format_time(ctx.cond_time('Finished'))}"
    text += f": {msg}" if msg and msg not in ("Job finished successfully",) else "."
    return Finding("Finished", cause, NOBODY, text, since=ctx.cond_time("Finished"),
                   evidence=[ctx.condition_evidence("Finished")])


def deactivated(ctx: Context) -> Finding | None:
    if ctx.spec.get("active", True) is not False:
        return None
    ev_reason = ctx.cond_reason("Evicted")
    cause = "DeactivatedByUser"
    for known in ("RequeuingLimitExceeded", "MaximumExecutionTimeExceeded", "AdmissionCheck",
                  "EvictedOnManagerCluster"):
        if ev_reason.endswith(known) or ctx.cond_reason("DeactivationTarget") == known:
            cause = "AdmissionCheckRejected" if known == "AdmissionCheck" else known
    since = ctx.cond_time("Evicted") if ctx.true("Evicted") else ctx.cond_time("QuotaReserved")
    why = {
        "DeactivatedByUser": "spec.active is false",
        "RequeuingLimitExceeded": "Kueue deactivated it after too many requeues (waitForPodsReady backoffLimitCount; "
        f"requeued {i(m(ctx.status.get('requeueState')).get('count'))} times)",
        "MaximumExecutionTimeExceeded": "Kueue deactivated it: it ran longer than spec.maximumExecutionTimeSeconds="
        f"{ctx.spec.get('maximumExecutionTimeSeconds')}",
        "AdmissionCheckRejected": "an admission check rejected it",
        "EvictedOnManagerCluster": "it was evicted on the MultiKueue manager cluster",
    }[cause]
    text = (f"Deactivated: {why}; Kueue will not admit it until spec.active is set back to true "
            f"(kubectl patch workload {ctx.name} -n {ctx.ns} --type merge -p '{{\"spec\":{{\"active\":true}}}}') "
            "or the Job is recreated.")
    ev = [ctx.condition_evidence(c) for c in ("Evicted", "DeactivationTarget", "QuotaReserved") if ctx.cond(c)]
    return Finding("Deactivated", cause, OWNER, text, since=since, evidence=ev)


# --------------------------------------------------------------------------------------------------
# evictions and preemptions


def last_eviction(ctx: Context) -> dict[str, Any] | None:
    """The latest eviction, from the Evicted condition (True now, or False 'Previously: ...')."""
    cond = ctx.cond("Evicted")
    if not cond:
        return None
    parsed = ctx.evicted_parsed
    if parsed.template == Template.PREVIOUSLY and parsed.inner is not None:
        parsed = parsed.inner
    reason = ctx.cond_reason("Evicted")
    if not is_true(cond):
        if reason == "QuotaReserved":  # Kueue rewrote it on re-admission: recover the old eviction
            reason = _eviction_reason_of(parsed) or "Unknown"
        else:
            return None
    underlying = ctx.cond_reason("Preempted") if ctx.cond("Preempted") else None
    by = None
    if parsed.preemption is not None:
        underlying = parsed.preemption.reason or underlying
        preemptor = _workload_by_uid(ctx, parsed.preemption.preemptor_uid)
        by = (f"Workload {preemptor[0]}/{preemptor[1]}" if preemptor
              else f"Workload UID {parsed.preemption.preemptor_uid}")
    count = 0
    for ev in lst(m(ctx.status.get("schedulingStats")).get("evictions")):
        count += i(m(ev).get("count"))
    out = {"reason": reason, "underlyingCause": underlying, "by": by,
           "message": (s(cond.get("message")) or "")[:1024] or None,
           "time": format_time(parse_time(cond.get("lastTransitionTime"))), "count": count or None}
    return {k: v for k, v in out.items() if v is not None}


def _eviction_reason_of(parsed: messages.ParsedMessage) -> str | None:
    return {
        Template.PREEMPTED: "Preempted", Template.PODS_READY_TIMEOUT: "PodsReadyTimeout",
        Template.ADMISSION_CHECK_EVICTION: "AdmissionCheck", Template.CLUSTER_QUEUE_STOPPED_EVICTION:
        "ClusterQueueStopped", Template.LOCAL_QUEUE_STOPPED_EVICTION: "LocalQueueStopped",
        Template.NODE_FAILURES: "NodeFailures", Template.DEACTIVATED: "Deactivated",
    }.get(parsed.template)


def _workload_by_uid(ctx: Context, wl_uid: str | None) -> tuple[str, str] | None:
    if not wl_uid:
        return None
    memo = ctx.state.index.memo
    by_uid: dict[str, tuple[str, str]] | None = memo.get("by_uid")
    if by_uid is None:
        by_uid = {}
        for key, wl in ctx.state.workloads.items():
            u = s(m(wl.get("metadata")).get("uid"))
            if u:
                by_uid[u] = key
        memo["by_uid"] = by_uid
    return by_uid.get(wl_uid)


def victims_of(ctx: Context) -> list[tuple[str, str, str | None]]:
    memo = ctx.state.index.memo
    victims: dict[str, list[tuple[str, str, str | None]]] | None = memo.get("victims")
    if victims is None:
        victims = {}
        for (ns, nm), wl in ctx.state.workloads.items():
            cond = conditions(wl).get("Evicted")
            if not is_true(cond) or m(cond).get("reason") != "Preempted":
                continue
            parsed = messages.parse_workload_message(s(m(cond).get("message")) or "")
            if parsed.preemption and parsed.preemption.preemptor_uid:
                victims.setdefault(parsed.preemption.preemptor_uid, []).append(
                    (ns, nm, s(m(wl.get("metadata")).get("uid"))))
        memo["victims"] = victims
    return victims.get(ctx.uid, [])


def eviction_in_progress(ctx: Context) -> Finding | None:
    """Evicted=True while quota is still held: Kueue is stopping the Pods."""
    if not (ctx.true("Evicted") and ctx.true("QuotaReserved")):
        return None
    ev = last_eviction(ctx) or {}
    preempted = ctx.cond_reason("Evicted") == "Preempted"
    reason = "Preempted" if preempted else "Evicted"
    cause = ev.get("underlyingCause") if preempted else ctx.cond_reason("Evicted") or None
    who = f" by {ev['by']}" if ev.get("by") else ""
    text = (f"{reason}{who} at {format_time(ctx.cond_time('Evicted'))} ({ctx.cond_reason('Evicted')}): Kueue is "
            f"stopping its Pods; quota in {ctx.cq_text} is released once they are gone, then it is "
            "queued again." + (" If this lasts, look for Pods stuck Terminating." if ctx.cond("Admitted") else ""))
    return Finding(reason, cause, NOBODY, text, since=ctx.cond_time("Evicted"),
                   evidence=[ctx.condition_evidence("Evicted"), ctx.condition_evidence("QuotaReserved")],
                   blocked_by=_preemptor_ref(ctx, ev))


def _preemptor_ref(ctx: Context, ev: Mapping[str, Any]) -> list[dict[str, Any]]:
    parsed = ctx.evicted_parsed
    if parsed.template == Template.PREVIOUSLY and parsed.inner is not None:
        parsed = parsed.inner
    if parsed.preemption is None:
        return []
    key = _workload_by_uid(ctx, parsed.preemption.preemptor_uid)
    return [ctx.workload_ref("Preemptor", key[0] if key else None, key[1] if key else None,
                             parsed.preemption.preemptor_uid)]


def recent_eviction(ctx: Context) -> Finding | None:
    """Preempted/Evicted while the eviction is the latest event: back-off, held, or not retried yet."""
    if not ctx.true("Evicted") or ctx.true("QuotaReserved"):
        return None
    requeue_at = parse_time(m(ctx.status.get("requeueState")).get("requeueAt"))
    in_backoff = requeue_at is not None and requeue_at > ctx.now
    held = ctx.cond("Requeued") is not None and not ctx.true("Requeued")
    qr_msg = ctx.cond_message("QuotaReserved")
    not_retried = (not ctx.cond("QuotaReserved") or qr_msg == ctx.cond_message("Evicted")
                   or _eviction_reason_of(ctx.qr_parsed) is not None
                   or ctx.qr_parsed.template == Template.PENDING_EVALUATION)
    if not (in_backoff or held or not_retried):
        return None
    ev = last_eviction(ctx) or {}
    evicted_reason = ctx.cond_reason("Evicted")
    preempted = evicted_reason == "Preempted"
    reason = "Preempted" if preempted else "Evicted"
    cause = (ev.get("underlyingCause") if preempted else evicted_reason) or None
    who = f" by {ev['by']}" if ev.get("by") else ""
    text = f"{reason}{who} at {format_time(ctx.cond_time('Evicted'))} ({evicted_reason})"
    action = NOBODY
    if in_backoff:
        cause = "RequeueBackoff"
        text += (f"; Kueue requeues it at {format_time(requeue_at)} (back-off "
                 f"after {i(m(ctx.status.get('requeueState')).get('count'))} requeue(s))")
    elif held:
        text += f"; held out of the queue ({ctx.cond_reason('Requeued')}) until that is resolved"
        if evicted_reason in ("ClusterQueueStopped", "LocalQueueStopped"):
            action = CADMIN if evicted_reason == "ClusterQueueStopped" else QADMIN
    else:
        text += "; requeued, Kueue has not tried to admit it again yet"
    if evicted_reason == "PodsReadyTimeout":
        text += ". Its Pods did not all become ready in time: check images, node capacity and the flavor's " \
                "nodeLabels before it runs again"
        action = OWNER if action is NOBODY and not in_backoff else action
    text += "."
    ev_list = [ctx.condition_evidence("Evicted")]
    if ctx.cond("Requeued"):
        ev_list.append(ctx.condition_evidence("Requeued"))
    return Finding(reason, cause, action, text, since=ctx.cond_time("Evicted"), evidence=ev_list,
                   blocked_by=_preemptor_ref(ctx, ev))


# --------------------------------------------------------------------------------------------------
# quota reserved, not admitted


def awaiting_admission_checks(ctx: Context) -> Finding | None:
    if not ctx.true("QuotaReserved") or ctx.true("Admitted"):
        return None
    checks = [m(c) for c in lst(ctx.status.get("admissionChecks"))]
    rank = {"Rejected": 0, "Retry": 1}  # the state that decides what happens next comes first
    pending = sorted((c for c in checks if c.get("state") != "Ready"),
                     key=lambda c: rank.get(s(c.get("state")) or "", 2))
    delayed = [m(p) for p in lst(m(ctx.status.get("admission")).get("podSetAssignments"))
               if m(p).get("delayedTopologyRequest") == "Pending"]
    since = ctx.cond_time("QuotaReserved")
    evidence = [ctx.condition_evidence("QuotaReserved")]
    if ctx.cond("Admitted"):
        evidence.append(ctx.condition_evidence("Admitted"))
    if pending:
        first = pending[0]
        state = s(first.get("state")) or "Pending"
        cause = {"Retry": "AdmissionCheckRetry", "Rejected": "AdmissionCheckRejected"}.get(state,
                                                                                        "AdmissionCheckPending")
        cname = s(first.get("name")) or "?"
        ac = ctx.state.admission_checks.get(cname)
        controller = s(spec(ac).get("controllerName")) if ac else None
        detail = s(first.get("message"))
        text = (f"Quota reserved in {ctx.cq_text} since {format_time(since)}, waiting for "
                f"{len(pending)}/{len(checks)} admission check(s): {cname} is {state}"
                + (f" ({detail})" if detail else "")
                + (f"; its controller is {controller}" if controller else "") + ".")
        # Pending and Retry resolve themselves (Kueue retries after the back-off); Rejected needs the owner
        action = OWNER if state == "Rejected" else NOBODY
        if ac is not None and not is_true(conditions(ac).get("Active")):
            action = CADMIN
            text += f" AdmissionCheck {cname} is not Active: the platform admin must fix its controller."
        for c in pending[:4]:
            evidence.append(ctx.object_evidence("Workload", ctx.name, f"status.admissionChecks[{c.get('name')}]",
                                                s(c.get("state")), s(c.get("message")),
                                                parse_time(c.get("lastTransitionTime")), ctx.ns))
        return Finding("WaitingForAdmissionChecks", cause, action, text, since=since, evidence=evidence,
                       hints=[f"kubectl get workload {ctx.name} -n {ctx.ns} -o jsonpath='{{.status.admissionChecks}}'"])
    if delayed:
        text = (f"Quota reserved in {ctx.cq_text}; the topology assignment of pod set "
                f"{s(delayed[0].get('name'))} is delayed until a second scheduling pass (ProvisioningRequest + TAS).")
        return Finding("WaitingForAdmissionChecks", "DelayedTopologyRequest", NOBODY, text, since=since,
                       evidence=evidence)
    text = (f"Quota reserved in {ctx.cq_text} since {format_time(since)}; Kueue has not marked it "
            "Admitted yet (normally seconds). If it stays, check the Kueue controller logs.")
    return Finding("NotYetEvaluated", "QuotaReservedAwaitingAdmission", NOBODY, text, since=since, evidence=evidence)


# --------------------------------------------------------------------------------------------------
# queue problems seen on the objects themselves


def queue_objects(ctx: Context) -> Finding | None:
    """LocalQueue / ClusterQueue missing, stopped or inactive, seen on the objects (Kueue may lag)."""
    if ctx.true("QuotaReserved"):
        return None
    st = ctx.state
    since = ctx.cond_time("QuotaReserved") or ctx.created
    if not ctx.lq_name:
        text = ("The Workload has no spec.queueName: add the label kueue.x-k8s.io/queue-name=<LocalQueue> to the "
                "Job (or create a LocalQueue named 'default' in the namespace).")
        return Finding("QueueMisconfigured", "LocalQueueNotFound", OWNER, text, since=since)
    if ctx.lq is None:
        if not st.knows("LocalQueue") or ctx.qr_parsed.template not in (Template.UNKNOWN, Template.PENDING_EVALUATION):
            return None  # not in the input: let Kueue's own message speak
        names = sorted(nm for (ns, nm) in st.local_queues if ns == ctx.ns)
        return _lq_missing(ctx, names, since)
    lq_stop = s(spec(ctx.lq).get("stopPolicy")) or "None"
    if lq_stop != "None":
        text = (f"LocalQueue {ctx.ns}/{ctx.lq_name} is stopped (stopPolicy {lq_stop}): nothing in it is admitted "
                f"until its admin sets stopPolicy to None.")
        return Finding("QueueStopped", "LocalQueueStopped", QADMIN, text, since=since,
                       evidence=[ctx.object_evidence("LocalQueue", ctx.lq_name, "spec.stopPolicy", lq_stop,
                                                     ns=ctx.ns)])
    cq_name = ctx.cq_name
    if ctx.cq is None:
        if not st.knows("ClusterQueue"):
            return None
        text = (f"LocalQueue {ctx.ns}/{ctx.lq_name} points at ClusterQueue {cq_name}, which does not exist: create "
                f"it or recreate the LocalQueue with an existing spec.clusterQueue (kubectl get clusterqueues).")
        return Finding("QueueMisconfigured", "ClusterQueueNotFound", CADMIN, text, since=since,
                       evidence=[ctx.object_evidence("LocalQueue", ctx.lq_name, "spec.clusterQueue", None,
                                                     cq_name, ns=ctx.ns)])
    cq_stop = s(spec(ctx.cq).get("stopPolicy")) or "None"
    if cq_stop != "None":
        text = (f"ClusterQueue {cq_name} is stopped (stopPolicy {cq_stop}): it admits nothing until a platform "
                "admin sets stopPolicy to None.")
        return Finding("QueueStopped", "ClusterQueueStopped", CADMIN, text, since=since,
                       evidence=[ctx.object_evidence("ClusterQueue", cq_name, "spec.stopPolicy", cq_stop)])
    active = conditions(ctx.cq).get("Active")
    if active is not None and not is_true(active):
        return _cq_inactive(ctx, m(active), since)
    if not _namespace_selected(ctx):
        return _namespace_not_selected(ctx, since)
    return None


def _lq_missing(ctx: Context, existing: list[str], since: Any) -> Finding:
    others = f" LocalQueues in {ctx.ns}: {', '.join(existing[:5])}." if existing else \
        f" There is no LocalQueue in namespace {ctx.ns} at all."
    text = (f"LocalQueue {ctx.lq_name} does not exist in namespace {ctx.ns}: fix the Job's label "
            f"kueue.x-k8s.io/queue-name or ask the queue admin to create it.{others}")
    return Finding("QueueMisconfigured", "LocalQueueNotFound", OWNER, text, since=since,
                   evidence=[ctx.condition_evidence("QuotaReserved")] if ctx.cond("QuotaReserved") else [],
                   hints=[f"kubectl get localqueues -n {ctx.ns}"])


def _cq_inactive(ctx: Context, active: Mapping[str, Any], since: Any) -> Finding:
    cq_name = ctx.cq_name
    reason = s(active.get("reason")) or "Unknown"
    message = s(active.get("message")) or ""
    parts = messages.parse_cluster_queue_inactive(message)
    cause_map = {"FlavorNotFound": "FlavorNotFound", "AdmissionCheckNotFound": "AdmissionCheckNotFound",
                 "AdmissionCheckInactive": "AdmissionCheckInactive", "TopologyNotFound": "TopologyNotFound",
                 "Stopped": "ClusterQueueStopped"}
    cause = cause_map.get(reason, "ClusterQueueInactive")
    detail = "; ".join(f"{c}: {d}" for c, d in parts) if parts else message
    if cause == "FlavorNotFound":
        missing = _missing_flavors(ctx)
        what = ", ".join(missing) if missing else detail
        text = (f"ClusterQueue {cq_name} is inactive: it references ResourceFlavor(s) that do not exist ({what}); "
                f"create them or fix spec.resourceGroups. No Workload of this queue is admitted meanwhile.")
    else:
        text = (f"ClusterQueue {cq_name} is inactive ({reason}): {message or 'no message'}. "
                "It admits nothing until fixed.")
    return Finding("QueueStopped" if cause == "ClusterQueueStopped" else "QueueMisconfigured", cause, CADMIN, text,
                   since=since, evidence=[ctx.object_evidence("ClusterQueue", cq_name, "condition/Active", reason,
                                                              message, parse_time(active.get("lastTransitionTime")))],
                   hints=[cq_hint(cq_name)])


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


def _namespace_selected(ctx: Context) -> bool:
    """Evaluate the ClusterQueue's namespaceSelector; True when we cannot tell (no Namespace object)."""
    if ctx.cq is None:
        return True
    sp = spec(ctx.cq)
    if "namespaceSelector" not in sp:
        return True  # the API defaults it; an absent field in a dump is most likely {} stripped
    selector = sp.get("namespaceSelector")
    if selector is None:
        return False  # null selects no namespace
    ns_obj = ctx.state.namespaces.get(ctx.ns)
    if ns_obj is None:
        return True
    ns_labels = dict(m(m(ns_obj.get("metadata")).get("labels")))
    ns_labels.setdefault("kubernetes.io/metadata.name", ctx.ns)
    return label_selector_matches(m(selector), ns_labels)


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    for k, v in m(selector.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for expr in lst(selector.get("matchExpressions")):
        expr = m(expr)
        key, op, values = s(expr.get("key")) or "", expr.get("operator"), lst(expr.get("values"))
        present = key in labels
        if op == "In" and (not present or labels.get(key) not in values):
            return False
        if op == "NotIn" and present and labels.get(key) in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _namespace_not_selected(ctx: Context, since: Any) -> Finding:
    selector = spec(ctx.cq).get("namespaceSelector") if ctx.cq else None
    shown = "null (selects no namespace)" if selector is None else _short(selector)
    text = (f"{ctx.cq_text} does not accept Workloads from namespace {ctx.ns}: its namespaceSelector "
            f"is {shown}. Label the namespace to match, or widen the selector.")
    return Finding("QueueMisconfigured", "NamespaceNotSelected", CADMIN, text, since=since,
                   evidence=[ctx.object_evidence("ClusterQueue", ctx.cq_name, "spec.namespaceSelector", None,
                                                 shown)],
                   hints=[f"kubectl get namespace {ctx.ns} --show-labels"])


def _short(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), sort_keys=True)[:200]


# --------------------------------------------------------------------------------------------------
# what Kueue's QuotaReserved=False message says


def from_kueue_message(ctx: Context) -> Finding | None:
    if ctx.true("QuotaReserved") or not ctx.cond("QuotaReserved"):
        return None
    if ctx.cond_reason("QuotaReserved") == "OnHold":
        text = (f"Its owner holds it (Kueue's OnHold: {ctx.cond_message('QuotaReserved') or 'no message'}), for "
                "example a StatefulSet scaled to zero; Kueue evaluates it when the owner releases it.")
        return _msg_finding("NotYetEvaluated", "OnHold", NOBODY, text, ctx)
    parsed = ctx.qr_parsed
    handler = MESSAGE_HANDLERS.get(parsed.template)
    return handler(ctx, parsed) if handler else None


def _msg_finding(reason: str, cause: str, action: ActionBy, text: str, ctx: Context, **kw: Any) -> Finding:
    return Finding(reason, cause, action, text, since=ctx.cond_time("QuotaReserved"),
                   evidence=[ctx.condition_evidence("QuotaReserved")], **kw)


def _lq_not_found_msg(ctx: Context, p: messages.ParsedMessage) -> Finding:
    existing = sorted(nm for (ns, nm) in ctx.state.local_queues if ns == ctx.ns)
    return _lq_missing(ctx, existing, ctx.cond_time("QuotaReserved"))


def _queue_msg(reason: str, cause: str, action: ActionBy, fmt: str) -> Any:
    def handler(ctx: Context, p: messages.ParsedMessage) -> Finding:
        names = {"lq": p.names.get("localQueue") or ctx.lq_name, "cq": p.names.get("clusterQueue") or ctx.cq_name,
                 "ns": ctx.ns}
        return _msg_finding(reason, cause, action, fmt.format(**names), ctx, hints=[cq_hint(names["cq"])])
    return handler


def _cq_inactive_msg(ctx: Context, p: messages.ParsedMessage) -> Finding:
    cq_name = p.names.get("clusterQueue") or ctx.cq_name
    cq = ctx.state.cluster_queues.get(cq_name or "")
    active = conditions(cq).get("Active") if cq else None
    if active is not None and not is_true(active):
        f = _cq_inactive(ctx, m(active), ctx.cond_time("QuotaReserved"))
        f.evidence.insert(0, ctx.condition_evidence("QuotaReserved"))
        return f
    cycle = cohort_cycle(ctx, cq)
    if cycle:
        text = (f"ClusterQueue {cq_name} is Active but Kueue treats it as inactive: its cohort tree has a cycle "
                f"({' -> '.join(cycle)}). Fix the Cohorts' spec.parentName; nothing in the tree is admitted meanwhile.")
        return _msg_finding("QueueMisconfigured", "CohortCycle", CADMIN, text, ctx,
                            hints=[f"kubectl get cohorts {' '.join(dict.fromkeys(cycle))} -o yaml"])
    text = (f"Kueue says ClusterQueue {cq_name} is inactive; its Active condition says why (missing "
            f"ResourceFlavor or AdmissionCheck, stopped, cohort cycle): kubectl describe clusterqueue {cq_name}.")
    return _msg_finding("QueueMisconfigured", "ClusterQueueInactive", CADMIN, text, ctx, hints=[cq_hint(cq_name)])


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


def _namespace_msg(ctx: Context, p: messages.ParsedMessage) -> Finding:
    f = _namespace_not_selected(ctx, ctx.cond_time("QuotaReserved"))
    f.evidence.insert(0, ctx.condition_evidence("QuotaReserved"))
    return f


def _invalid_requests(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = (f"Kueue rejects the Pod requests: {p.details or ctx.cond_message('QuotaReserved')}. Fix the containers' "
            "requests/limits in the Job.")
    return _msg_finding("QueueMisconfigured", "InvalidRequests", OWNER, text, ctx)


def _pending_eval(ctx: Context, p: messages.ParsedMessage) -> Finding | None:
    return None  # handled by not_yet_evaluated, which also looks at the queue head


def _admission_gated(ctx: Context, p: messages.ParsedMessage) -> Finding:
    gates = p.names.get("gatedBy") or s(m(m(ctx.wl.get("metadata")).get("annotations")).get(
        "kueue.x-k8s.io/admission-gated-by")) or "?"
    text = (f"Admission is gated by {gates} (annotation kueue.x-k8s.io/admission-gated-by); Kueue evaluates it "
            "once those controllers remove their gate.")
    return _msg_finding("NotYetEvaluated", "AdmissionGated", NOBODY, text, ctx)


def _waiting_pods_ready(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = ("Kueue admits nothing new until every admitted Workload has its Pods ready (waitForPodsReady."
            "blockAdmission); look for admitted Workloads with PodsReady=False.")
    return _msg_finding("NotYetEvaluated", "WaitingForPodsReady", NOBODY, text, ctx)


def _bypassed(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = ("Kueue skipped evaluating it because a Workload of the same shape in ClusterQueue "
            f"{ctx.cq_name} just failed to fit; it will be retried when quota changes. That Workload's diagnosis "
            "applies here too.")
    reason = {"ExceedsMaxQuota": "ExceedsMaxQuota", "NoMatchingFlavor": "QueueMisconfigured"}.get(
        ctx.cond_reason("QuotaReserved"), "WaitingForQuota")
    return _msg_finding(reason, "EquivalentWorkloadFailed", NOBODY, text, ctx)


def _deactivated_msg(ctx: Context, p: messages.ParsedMessage) -> Finding | None:
    return None  # spec.active decides (rule `deactivated`); a stale message falls through


def _failed_checks(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = ("An admission check of this Workload is in Retry or Rejected state; Kueue re-queues it after the "
            "check's back-off. See status.admissionChecks.")
    return _msg_finding("WaitingForAdmissionChecks", "AdmissionCheckRetry", NOBODY, text, ctx)


def _no_longer_fits(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = (f"Another Workload of the cohort took the quota in the same scheduling cycle; it waits for quota in "
            f"{ctx.cq_text}.")
    return _msg_finding("WaitingForQuota", "InsufficientUnusedQuota", NOBODY, text, ctx)


def _overlapping(ctx: Context, p: messages.ParsedMessage) -> Finding:
    will_fit = p.template == Template.OVERLAPPING_PREEMPTION_WILL_FIT
    text = ("Another Workload needs the same preemption victims; Kueue handles that one first"
            + (" and this one fits once those preemptions complete." if will_fit else " and retries this one."))
    return _msg_finding("WaitingForPreemption" if will_fit else "WaitingForQuota",
                        "PreemptionInProgress" if will_fit else "InsufficientUnusedQuota", NOBODY, text, ctx)


def _preemption_gated(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = "The Workload needs to preempt others, but a preemption gate (spec.preemptionGates) is closed."
    return _msg_finding("WaitingForPreemption", "PreemptionGated", NOBODY, text, ctx)


def _flavor_error(ctx: Context, p: messages.ParsedMessage) -> Finding:
    ps, err = p.podset_errors[0] if p.podset_errors else ("?", p.details or ctx.cond_message("QuotaReserved"))
    topo = "topology" in err.lower() or "tas" in err.lower()
    text = f"Kueue cannot assign flavors to pod set {ps}: {err}."
    return _msg_finding("QueueMisconfigured", "TopologyMismatch" if topo else "NoMatchingFlavor", CADMIN, text, ctx)


def _transient(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = (f"Kueue is still deciding ({ctx.cond_message('QuotaReserved')[:300]}); it retries by itself. If this "
            "lasts, check the Kueue controller logs.")
    return _msg_finding("NotYetEvaluated", "PendingEvaluation", NOBODY, text, ctx)


def _dra(ctx: Context, p: messages.ParsedMessage) -> Finding:
    text = (f"Kueue cannot admit these Pods' Dynamic Resource Allocation claims: {ctx.cond_message('QuotaReserved')}"
            ". The platform admin must enable Kueue's DRA integration and map the DeviceClass in Kueue's "
            "configuration; Jobs must request devices through ResourceClaimTemplates, not shared ResourceClaims.")
    return _msg_finding("QueueMisconfigured", "DynamicResourcesUnsupported", CADMIN, text, ctx)


def _flavor_assignment(ctx: Context, p: messages.ParsedMessage) -> Finding:
    return classify_flavor_failures(ctx, p)


MESSAGE_HANDLERS: dict[Template, Any] = {
    Template.FLAVOR_ASSIGNMENT: _flavor_assignment,
    Template.FLAVOR_ASSIGNMENT_ERROR: _flavor_error,
    Template.LOCAL_QUEUE_NOT_FOUND: _lq_not_found_msg,
    Template.LOCAL_QUEUE_INACTIVE: _queue_msg(
        "QueueMisconfigured", "LocalQueueInactive", QADMIN,
        "LocalQueue {ns}/{lq} is inactive: its ClusterQueue {cq} is missing or inactive (kubectl describe localqueue "
        "{lq} -n {ns})."),
    Template.LOCAL_QUEUE_STOPPED: _queue_msg(
        "QueueStopped", "LocalQueueStopped", QADMIN,
        "LocalQueue {ns}/{lq} is stopped: nothing in it is admitted until its admin sets stopPolicy to None."),
    Template.LOCAL_QUEUE_TERMINATING: _queue_msg(
        "QueueMisconfigured", "LocalQueueNotFound", QADMIN,
        "LocalQueue {ns}/{lq} is terminating or missing; Kueue dropped the quota reservation."),
    Template.CLUSTER_QUEUE_NOT_FOUND: _queue_msg(
        "QueueMisconfigured", "ClusterQueueNotFound", CADMIN,
        "ClusterQueue {cq} (of LocalQueue {ns}/{lq}) does not exist: create it or point the LocalQueue at an "
        "existing one."),
    Template.CLUSTER_QUEUE_INACTIVE: _cq_inactive_msg,
    Template.CLUSTER_QUEUE_STOPPED: _queue_msg(
        "QueueStopped", "ClusterQueueStopped", CADMIN,
        "ClusterQueue {cq} is stopped: it admits nothing until a platform admin sets stopPolicy to None."),
    Template.CLUSTER_QUEUE_TERMINATING: _queue_msg(
        "QueueMisconfigured", "ClusterQueueNotFound", CADMIN,
        "ClusterQueue {cq} is terminating or missing; Kueue dropped the quota reservation."),
    Template.NAMESPACE_NOT_SELECTED: _namespace_msg,
    Template.NAMESPACE_MISSING: _queue_msg(
        "QueueMisconfigured", "NamespaceNotSelected", CADMIN,
        "Kueue could not read namespace {ns} to match the ClusterQueue's namespaceSelector."),
    Template.INVALID_NAMESPACE_SELECTOR: _queue_msg(
        "QueueMisconfigured", "NamespaceNotSelected", CADMIN,
        "ClusterQueue {cq} has an invalid namespaceSelector: fix it (kubectl get clusterqueue {cq} -o yaml)."),
    Template.RESOURCES_INVALID: _invalid_requests,
    Template.LIMIT_RANGE: _invalid_requests,
    Template.ADMISSION_GATED: _admission_gated,
    Template.PENDING_EVALUATION: _pending_eval,
    Template.ADMISSION_GATE_CLEARED: _pending_eval,
    Template.BYPASSED_EQUIVALENT: _bypassed,
    Template.DEACTIVATED: _deactivated_msg,
    Template.FAILED_ADMISSION_CHECKS: _failed_checks,
    Template.OVERLAPPING_PREEMPTION_TARGETS: _overlapping,
    Template.OVERLAPPING_PREEMPTION_WILL_FIT: _overlapping,
    Template.NO_LONGER_FITS: _no_longer_fits,
    Template.PREEMPTION_GATED: _preemption_gated,
    Template.WAITING_FOR_PODS_READY: _waiting_pods_ready,
    Template.FAILED_TO_ADMIT: _transient,
    Template.MORE_FAVORABLE_VARIANT_ADMITTED: _transient,
    Template.BELOW_LAST_ACCEPTABLE_FLAVOR: _transient,
    Template.PENDING_MIGRATION: _transient,
    Template.DRA_FEATURE_DISABLED: _dra,
    Template.DRA_RESOURCE_CLAIMS_UNSUPPORTED: _dra,
    Template.DRA_FIELD_ERRORS: _dra,
}


# --------------------------------------------------------------------------------------------------
# flavor assignment: the numbers


GRANULAR_SEVERITY = {"NoMatchingFlavor": 4, "ExceedsMaxQuota": 3, "WaitingForQuota": 2, "TopologyPlacementFailed": 1}


def _group_of(cq: Mapping[str, Any] | None, f: messages.FlavorFailure) -> Any:
    """The resource group a failure belongs to: by resource, else by flavor; one group when unknown."""
    if cq is None:
        return "*"
    if f.resource:
        n = quota.resource_group_of(cq, f.resource)
        return n if n >= 0 else f"resource:{f.resource}"  # not covered at all: a group of its own
    n = quota.flavor_group_of(cq, f.flavor or "")
    return n if n >= 0 else "*"


def classify_flavor_failures(ctx: Context, p: messages.ParsedMessage) -> Finding:
    failures = list(p.failures)
    # Kueue keeps the least severe flavor per (pod set, resource group) and the most severe group
    # (resolveNoFitReason); with the granular reason vocabulary it tells us the result directly.
    groups: dict[tuple[str, Any], dict[str | None, int]] = {}
    for f in failures:
        sev = SEVERITY.get(f.kind)
        if sev is None:
            continue
        flavors = groups.setdefault((f.podset, _group_of(ctx.cq, f)), {})
        flavors[f.flavor] = max(flavors.get(f.flavor, 0), sev)
    severity = max((min(fl.values()) for fl in groups.values()), default=0)
    granular = ctx.cond_reason("QuotaReserved")
    if p.pending_preemptions or p.failed_preemptions or granular == "WaitingForPreemptedWorkloads":
        return _waiting_for_preemption(ctx, p)
    if granular in GRANULAR_SEVERITY and any(SEVERITY.get(f.kind) == GRANULAR_SEVERITY[granular] for f in failures):
        severity = GRANULAR_SEVERITY[granular]
    decisive = [f for f in failures if SEVERITY.get(f.kind) == severity] or failures
    if severity == 4:
        return _no_matching_flavor(ctx, decisive)
    if severity == 3:
        return _exceeds_max(ctx, decisive)
    if severity == 2:
        return _waiting_for_quota(ctx, decisive)
    if severity == 1:
        return _topology(ctx, decisive, granular == "TopologyPlacementFailed")
    text = f"Kueue could not fit it and wrote: {ctx.cond_message('QuotaReserved')[:600]}"
    return _msg_finding("Unknown", "UnrecognizedMessage", NOBODY, text, ctx)


def _requested(ctx: Context, podset: str, resource: str) -> Decimal | None:
    return ctx.requests.get(podset, {}).get(resource)


def quota_line(ctx: Context, f: messages.FlavorFailure) -> dict[str, Any]:
    res, flavor = f.resource or "", f.flavor or ""
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    requested = f.requested or quota.fmt(res, _requested(ctx, f.podset, res))
    line: dict[str, Any] = {"flavor": flavor, "resource": res, "requested": requested}
    if fq is not None:
        line["nominal"] = quota.fmt(res, fq.nominal)
        if fq.borrowing_limit is not None:
            line["borrowingLimit"] = quota.fmt(res, fq.borrowing_limit)
        if fq.lending_limit is not None:
            line["lendingLimit"] = quota.fmt(res, fq.lending_limit)
    if ctx.cq is not None:
        used = quota.reserved_in(ctx.state, ctx.cq_name or "", flavor, res)
        if used is not None:
            line["used"] = quota.fmt(res, used)
    borrowable = quota.cohort_borrowable(ctx.state, ctx.cq_name or "", flavor, res) if ctx.cohort else None
    if borrowable is not None:
        line["borrowable"] = quota.fmt(res, borrowable)
    if f.maximum:
        line["maximum"] = f.maximum
    if f.missing:
        line["missing"] = f.missing
    # the amounts Kueue stated win; a request read from Pod templates is our own estimate
    line["source"] = "Kueue" if (f.maximum or f.missing) else "Estimate" if ctx.requests_source == "Estimate" \
        else "Objects"
    return {k: v for k, v in line.items() if v is not None}


def _exceeds_max(ctx: Context, failures: list[messages.FlavorFailure]) -> Finding:
    f = next((x for x in failures if x.kind == FailureKind.EXCEEDS_MAXIMUM_CAPACITY), failures[0])
    lines = [quota_line(ctx, x) for x in failures if x.resource and x.flavor]
    res, flavor = f.resource or "?", f.flavor or "?"
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    previous = parse(f.previous) if f.previous else None
    need = f.requested or quota.fmt(res, _requested(ctx, f.podset, res)) or "?"
    nominal = quota.fmt(res, fq.nominal) if fq else None
    if ctx.cq is None:
        cause = "ExceedsMaximumCapacity"
        limits = "the ClusterQueue object is not in the input"
        fix = "raise the ClusterQueue's quota or lower the request"
    elif not ctx.cohort:
        cause = "ExceedsNominalQuota"
        limits = f"nominal {nominal}, no cohort" if nominal else "no cohort"
        fix = "raise nominalQuota, put the ClusterQueue in a cohort, or lower the request (parallelism x requests)"
    elif (fq is not None and fq.borrowing_limit is not None
          and parse(f.maximum) == (fq.nominal or 0) + fq.borrowing_limit):
        cause = "BorrowingLimitReached"
        limits = f"nominal {nominal} + borrowingLimit {quota.fmt(res, fq.borrowing_limit)} in cohort {ctx.cohort}"
        fix = "raise borrowingLimit or nominalQuota, or lower the request"
    else:
        cause = "ExceedsCohortQuota"
        limits = f"nominal {nominal} + what cohort {ctx.cohort} can lend" if nominal else f"cohort {ctx.cohort}"
        fix = "add quota to the cohort or this ClusterQueue, or lower the request"
    earlier = f" on top of {f.previous} for earlier pod sets" if previous else ""
    text = (f"Needs {need} {res} in flavor {flavor}{earlier} but {ctx.cq_text} can never give more than "
            f"{f.maximum or '?'} ({limits}): {fix}.")
    others = [x for x in failures if x is not f and x.resource]
    if others:
        shown = "; ".join(f"{x.resource} in {x.flavor}: needs {x.requested or '?'}, max {x.maximum or '?'}"
                          for x in others[:3])
        more = f" and {len(others) - 3} more in status.quota" if len(others) > 3 else ""
        text += f" Also short: {shown}{more}."
    action = CADMIN if cause != "ExceedsNominalQuota" else QADMIN
    return _msg_finding("ExceedsMaxQuota", cause, action, text, ctx, quota=lines,
                        flavors=_flavors_of(failures), hints=[cq_hint(ctx.cq_name)])


def _waiting_for_quota(ctx: Context, failures: list[messages.FlavorFailure]) -> Finding:
    f = failures[0]
    lines = [quota_line(ctx, x) for x in failures if x.resource and x.flavor]
    line = lines[0] if lines else {}
    res, flavor = f.resource or "?", f.flavor or "?"
    cause = "InsufficientUnusedQuota"
    fq = quota.flavor_quota(ctx.state, "ClusterQueue", ctx.cq_name, flavor, res)
    if fq is not None and fq.borrowing_limit is not None and ctx.cohort:
        used = parse(line.get("used")) or Decimal(0)
        req = parse(line.get("requested")) or Decimal(0)
        if used + req > (fq.nominal or Decimal(0)) + fq.borrowing_limit:
            cause = "BorrowingLimitReached"
    usage = []
    if line.get("nominal"):
        usage.append(f"nominal {line['nominal']}")
    if line.get("used"):
        usage.append(f"{line['used']} in use")
    if fq is not None and fq.borrowing_limit is not None:
        usage.append(f"borrowingLimit {quota.fmt(res, fq.borrowing_limit)}")
    if ctx.cohort and line.get("borrowable") is not None:
        usage.append(f"cohort {ctx.cohort} could lend about {line['borrowable']} now")
    elif not ctx.cohort and ctx.cq is not None:
        usage.append("no cohort")
    detail = f" ({', '.join(usage)})" if usage else ""
    reserving = i(status(ctx.cq).get("reservingWorkloads")) if ctx.cq else 0
    text = (f"Needs {f.missing or '?'} more {res} in flavor {flavor} than {ctx.cq_text} has unused now"
            f"{detail}: it is admitted when running Workloads release quota"
            + (f" ({reserving} hold quota in {ctx.cq_name})" if reserving else "")
            + ("; the borrowingLimit stops it from borrowing more" if cause == "BorrowingLimitReached" else "")
            + ". To go faster, add quota or lower the request.")
    return _msg_finding("WaitingForQuota", cause, NOBODY, text, ctx, quota=lines, flavors=_flavors_of(failures),
                        hints=[admitted_in(ctx.cq_name), cq_hint(ctx.cq_name)])


def _no_matching_flavor(ctx: Context, failures: list[messages.FlavorFailure]) -> Finding:
    f = failures[0]
    if f.kind == FailureKind.RESOURCE_NOT_COVERED:
        covered = sorted(quota.covered_resources(ctx.cq)) if ctx.cq is not None else []
        text = (f"Requests {f.resource}, which {ctx.cq_text} does not cover"
                + (f" (it covers {', '.join(covered)})" if covered else "")
                + ": remove the request from the Job, or add the resource to the queue's resourceGroups.")
        return _msg_finding("QueueMisconfigured", "ResourceNotCovered", OWNER, text, ctx,
                            hints=[cq_hint(ctx.cq_name)])
    if f.kind == FailureKind.FLAVOR_NOT_FOUND:
        text = (f"ResourceFlavor {f.flavor} used by {ctx.cq_text} does not exist: create it or remove it "
                "from the ClusterQueue.")
        return _msg_finding("QueueMisconfigured", "FlavorNotFound", CADMIN, text, ctx, flavors=_flavors_of(failures))
    if f.kind == FailureKind.TOPOLOGY_FLAVOR:
        text = f"No flavor fits the Pods' topology request: {f.text}."
        return _msg_finding("QueueMisconfigured", "TopologyMismatch", OWNER, text, ctx, flavors=_flavors_of(failures))
    reasons = "; ".join(x.text for x in failures[:4])
    text = (f"No flavor of {ctx.cq_text} fits the Pods: {reasons}. Add tolerations or fix the node "
            "selector/affinity in the Job, or change the flavors' nodeLabels/nodeTaints.")
    return _msg_finding("QueueMisconfigured", "NoMatchingFlavor", OWNER, text, ctx, flavors=_flavors_of(failures))


def _topology(ctx: Context, failures: list[messages.FlavorFailure], never: bool) -> Finding:
    f = failures[0]
    text = f"Topology Aware Scheduling cannot place the Pods: {f.text}."
    if never:
        text += " Even an empty topology cannot fit them: lower the pod count or relax the topology request."
        return _msg_finding("ExceedsMaxQuota", "TopologyPlacementFailed", OWNER, text, ctx,
                            flavors=_flavors_of(failures))
    return _msg_finding("WaitingForQuota", "TopologyPlacementFailed", NOBODY, text, ctx, flavors=_flavors_of(failures))


def _waiting_for_preemption(ctx: Context, p: messages.ParsedMessage) -> Finding:
    victims = victims_of(ctx)
    blocked = [ctx.workload_ref("Victim", ns, nm, u) for ns, nm, u in victims[:10]]
    n = p.pending_preemptions or p.failed_preemptions or len(victims)
    if p.failed_preemptions:
        text = (f"Kueue tried to preempt {p.failed_preemptions} Workload(s) to make room in ClusterQueue "
                f"{ctx.cq_name} but the API calls failed; it will retry.")
        cause = "PreemptionFailed"
    else:
        names = ", ".join(f"{b.get('namespace')}/{b.get('name')}" for b in blocked[:3])
        text = (f"Kueue is preempting {n} Workload(s) to make room in {ctx.cq_text}"
                + (f" ({names})" if names else "") + "; it is admitted once they release their quota.")
        cause = "PreemptionInProgress"
    lines = [quota_line(ctx, x) for x in p.failures if x.resource and x.flavor]
    return _msg_finding("WaitingForPreemption", cause, NOBODY, text, ctx, blocked_by=blocked, quota=lines,
                        flavors=_flavors_of(list(p.failures)))


def _flavors_of(failures: list[messages.FlavorFailure]) -> list[str]:
    out: list[str] = []
    for f in failures:
        if f.flavor and f.flavor not in out:
            out.append(f.flavor)
    return out


# --------------------------------------------------------------------------------------------------
# nothing decided yet


def not_yet_evaluated(ctx: Context) -> Finding | None:
    if ctx.true("QuotaReserved"):
        return None
    cond = ctx.cond("QuotaReserved")
    undecided = (Template.PENDING_EVALUATION, Template.ADMISSION_GATE_CLEARED)
    if cond is not None and ctx.qr_parsed.template not in undecided:
        return None
    since = ctx.cond_time("QuotaReserved") or ctx.created
    gated = s(m(m(ctx.wl.get("metadata")).get("annotations")).get("kueue.x-k8s.io/admission-gated-by"))
    if gated:
        return Finding("NotYetEvaluated", "AdmissionGated", NOBODY,
                       f"Admission is gated by {gated}; Kueue evaluates it once they remove their gate.", since=since)
    head = queue_head(ctx)
    if head is not None:
        hns, hname, huid = head
        text = (f"Waits behind {hns}/{hname} at the head of StrictFIFO {ctx.cq_text}: Kueue admits "
                "nothing after the head until the head is admitted (see its diagnosis).")
        return Finding("NotYetEvaluated", "BlockedByQueueHead", NOBODY, text, since=since,
                       blocked_by=[ctx.workload_ref("QueueHead", hns, hname, huid)],
                       hints=[f"kubectl get admissiondiagnosis {hname} -n {hns}"])
    text = (f"Queued in LocalQueue {ctx.ns}/{ctx.lq_name} since {format_time(since)}; Kueue has not evaluated it "
            "yet. "
            "Normally seconds: if it lasts, check that the Kueue controller is running.")
    return Finding("NotYetEvaluated", "PendingEvaluation", NOBODY, text, since=since,
                   evidence=[ctx.condition_evidence("QuotaReserved")] if cond else [])


def queue_order(wl: Mapping[str, Any], ctx: Context) -> tuple[int, str, str] | None:
    """Kueue's queue order for a pending Workload (higher priority, then older queue timestamp, then UID),
    or None when Kueue does not hold it in the queue's heap at all (back-off, gated, held, parked)."""
    cond = conditions(wl)
    if is_true(cond.get("QuotaReserved")) or is_true(cond.get("Finished")) or spec(wl).get("active", True) is False:
        return None
    md = m(wl.get("metadata"))
    if s(m(md.get("annotations")).get("kueue.x-k8s.io/admission-gated-by")):
        return None
    requeue_at = parse_time(m(m(wl.get("status")).get("requeueState")).get("requeueAt"))
    if requeue_at is not None and requeue_at > ctx.now:
        return None
    if cond.get("Requeued") is not None and not is_true(cond.get("Requeued")):
        return None
    qr_message = s(m(cond.get("QuotaReserved")).get("message")) or ""
    if qr_message.lower().startswith("workload namespace doesn't match"):
        return None  # Kueue parks namespace mismatches as inadmissible even under StrictFIFO
    lq = ctx.state.local_queues.get((s(md.get("namespace")) or "", s(spec(wl).get("queueName")) or ""))
    if lq is not None and (s(spec(lq).get("stopPolicy")) or "None") != "None":
        return None
    prio = spec(wl).get("priority")
    p = prio if isinstance(prio, int) and not isinstance(prio, bool) else 0
    boost = s(m(md.get("annotations")).get("kueue.x-k8s.io/priority-boost"))
    if boost and boost.lstrip("-").isdigit():
        p += int(boost)
    stamp = s(md.get("creationTimestamp")) or ""
    evicted = cond.get("Evicted")
    if is_true(evicted):  # GetQueueOrderTimestamp: some evictions requeue at the eviction time
        reason = s(m(evicted).get("reason"))
        when = format_time(parse_time(m(evicted).get("lastTransitionTime")))
        preempted = s(m(cond.get("Preempted")).get("reason"))
        if when and (reason in ("PodsReadyTimeout", "AdmissionCheck") or preempted == "InCohortReclaimWhileBorrowing"):
            stamp = when + ("+1ms" if preempted == "InCohortReclaimWhileBorrowing" else "")
    return -p, stamp, s(md.get("uid")) or ""


def queue_head(ctx: Context) -> tuple[str, str, str | None] | None:
    """The pending Workload ahead of this one in a StrictFIFO ClusterQueue, if it is stuck there."""
    if ctx.cq is None or s(spec(ctx.cq).get("queueingStrategy")) != "StrictFIFO":
        return None
    memo = ctx.state.index.memo
    heads: dict[str, list[tuple[tuple[int, str, str], str, str]]] | None = memo.get("strict_pending")
    if heads is None:
        heads = {}
        for (ns, nm), wl in ctx.state.workloads.items():
            cq = ctx.state.cluster_queue_of(wl)
            order = queue_order(wl, ctx) if cq else None
            if cq and order is not None:
                heads.setdefault(cq, []).append((order, ns, nm))
        for entries in heads.values():
            entries.sort()
        memo["strict_pending"] = heads
    entries = heads.get(ctx.cq_name or "", [])
    if not entries:
        return None
    order, hns, hname = entries[0]
    if (hns, hname) == (ctx.ns, ctx.name) or queue_order(ctx.wl, ctx) is None:
        return None
    return hns, hname, order[2] or None


def unrecognized(ctx: Context) -> Finding | None:
    if ctx.true("QuotaReserved"):
        return None
    text = (f"Not admitted; Kueue wrote {ctx.cond_reason('QuotaReserved') or 'no reason'}: "
            f"{ctx.cond_message('QuotaReserved')[:600] or 'no message'}. kueue-doctor does not recognise this "
            "message: read it and the Workload's events (kubectl describe workload).")
    return Finding("Unknown", "UnrecognizedMessage", NOBODY, text, since=ctx.cond_time("QuotaReserved"),
                   evidence=[ctx.condition_evidence("QuotaReserved")] if ctx.cond("QuotaReserved") else [],
                   hints=[f"kubectl describe workload {ctx.name} -n {ctx.ns}"])


RULES: list[Rule] = [
    queue_objects,
    recent_eviction,
    from_kueue_message,
    not_yet_evaluated,
    unrecognized,
]
"""Rules for a Workload that holds no quota, in the order they are asked."""

RESERVED_RULES: list[Rule] = [eviction_in_progress, awaiting_admission_checks]
"""Rules for a Workload that holds quota but is not admitted."""

TERMINAL_RULES: list[Rule] = [finished, deactivated]

__all__ = ["RESERVED_RULES", "RULES", "TERMINAL_RULES", "last_eviction", "name", "namespace"]
