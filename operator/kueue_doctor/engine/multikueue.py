"""MultiKueue as the manager cluster shows it: a check's MultiKueueConfig, its worker clusters and their Active
conditions (Kueue v0.19.2 pkg/controller/admissionchecks/multikueue), and the resets MultiKueue makes when a worker
finds the Job out of sync with its Workload (`out_of_sync`). kueue-doctor reads only the manager: what a worker's own
Kueue says about the copy it was sent is on the worker, and the texts say so.

The AdmissionCheck is Active while one worker is connected (`Active`, `SomeActiveClusters`), else False
(`NoUsableClusters`: "Inactive clusters: [...]", `BadConfig`), which makes every ClusterQueue using it inactive;
a MultiKueueCluster is Active=True `Active` "Connected", or False with `BadKubeConfig`, `InsecureKubeConfig`,
`ClientConnectionFailed`, `BadClusterProfile`, ... and the error text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from ..kube.kueue_config import DEPLOYMENT as KUEUE_DEPLOYMENT
from ..kube.kueue_config import DISPATCHER_ALL_AT_ONCE, DISPATCHER_INCREMENTAL, INCREMENTAL_ROUND
from ..kube.objects import (
    closed,
    conditions,
    format_duration,
    i,
    is_true,
    lst,
    m,
    parse_time,
    s,
    spec,
    when_text,
)
from ..state import MULTIKUEUE_CONTROLLER
from ..vocabulary import ActionBy, Cause, Reason
from .context import Context
from .messages import Template, parse_workload_message
from .pods.events import event_count, event_message, event_time
from .rules import Finding

# workload.go: a Rejected check's message gets ', Previously: "<state>"' appended
_PREVIOUSLY = re.compile(r', Previously: "[A-Za-z]*"$')
_LISTED_CLUSTERS = re.compile(r"(?:Missing|Inactive) clusters: \[([^\]]*)\]")
# what MultiKueue puts on the objects it creates on a worker; it deletes or syncs no object without it
_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
# Copies out on workers with none admitted: on a busy fleet that is a plain wait for a worker's quota, which the
# manager cannot see, so the platform admin is called only after an hour, not after kueue-doctor's usual ten
# minutes; before that the verdict says the Workload waits for a worker (kueue#12404 is the case it must not miss).
UNANSWERED_AFTER = timedelta(hours=1)
# workload.go reconcileGroup 6a: why MultiKueue set its check Retry although a worker had admitted the Workload
_LOST = "Admitting remote lost"
_GONE = "Admitting remote no longer exists"


def is_multikueue(ctx: Context, check_name: str) -> bool:
    ac = ctx.state.admission_checks.get(check_name)
    return ac is not None and s(spec(ac).get("controllerName")) == MULTIKUEUE_CONTROLLER


def workers(ctx: Context, check_name: str) -> list[str]:
    """The worker clusters of the check's MultiKueueConfig; without the config in the input, the ones the check's
    Active message names ("Missing clusters: [a], Inactive clusters: [b c]", Go's %v of a list)."""
    ac = ctx.state.admission_checks.get(check_name) or {}
    config = ctx.state.multikueue_configs.get(s(m(spec(ac).get("parameters")).get("name")) or "")
    if config is not None:
        return [c for c in (s(x) for x in lst(spec(config).get("clusters"))) if c]
    said = s(m(conditions(ac).get("Active")).get("message")) or ""
    return [c for group in _LISTED_CLUSTERS.findall(said) for c in group.split()]


def cluster_text(ctx: Context, cluster: str) -> tuple[str, Mapping[str, Any] | None]:
    """How one worker stands (`` "" `` when it is connected), and its Active condition when it is not."""
    obj = ctx.state.multikueue_clusters.get(cluster)
    if obj is None:
        if not ctx.state.knows("MultiKueueCluster"):
            return "", None
        return f"MultiKueueCluster {cluster} does not exist", None
    active = conditions(obj).get("Active")
    if is_true(active):
        return "", None
    if active is None:
        return f"MultiKueueCluster {cluster} has no Active condition yet (Kueue has not connected to it)", None
    kubeconfig = m(m(spec(obj).get("clusterSource")).get("kubeConfig"))
    profile = _profile(obj)
    source = ""
    if profile:
        source = f"; it connects through ClusterProfile {profile} in Kueue's namespace (spec.clusterSource)"
    elif s(kubeconfig.get("locationType")) in (None, "Secret") and s(kubeconfig.get("location")):
        source = f"; its kubeconfig is Secret {kubeconfig.get('location')} (key kubeconfig) in Kueue's namespace"
    elif s(kubeconfig.get("location")):
        source = f"; its kubeconfig is the file {kubeconfig.get('location')} on Kueue's Pod"
    return (f"MultiKueueCluster {cluster} is not connected (Active=False {s(m(active).get('reason')) or '?'}: "
            f"{s(m(active).get('message')) or 'no message'}){source}"), m(active)


def inactive_workers(ctx: Context, check_name: str) -> list[tuple[str, str, Mapping[str, Any] | None]]:
    """(cluster, text, its Active condition) for each worker of the check that is not connected."""
    out = []
    for cluster in workers(ctx, check_name):
        text, active = cluster_text(ctx, cluster)
        if text:
            out.append((cluster, text, active))
    return out


def evidence(ctx: Context, check_name: str) -> list[dict[str, Any]]:
    return [ctx.object_evidence("MultiKueueCluster", cluster, "condition/Active", s(active.get("reason")),
                                s(active.get("message")), parse_time(active.get("lastTransitionTime")))
            for cluster, _, active in inactive_workers(ctx, check_name)[:3] if active is not None]


def inactive_check_detail(ctx: Context, check_name: str) -> str:
    """Why a MultiKueue AdmissionCheck is not Active, down to its workers; who fixes it."""
    ac = ctx.state.admission_checks.get(check_name) or {}
    active = m(conditions(ac).get("Active"))
    head = (f"MultiKueue AdmissionCheck {check_name} is not Active ({s(active.get('reason')) or '?'}: "
            f"{s(active.get('message')) or 'no message'})")
    down = inactive_workers(ctx, check_name)
    if not down:
        return head + "."
    names = ", ".join(c for c, _, _ in down)
    fixes = [_PROFILE_FIXES[reason].format(cluster=c, profile=_profile(ctx.state.multikueue_clusters.get(c) or {}))
             for c, _, active in down if (reason := s(m(active).get("reason")) or "") in _PROFILE_FIXES]
    fix = ("; ".join(dict.fromkeys(fixes)) if len(fixes) == len(down) else
           f"make worker cluster(s) {names} reachable from Kueue's manager, or fix the kubeconfig it is given")
    return (f"{head}: {'; '.join(t for _, t, _ in down)}. Platform admin: {fix} "
            f"(`kubectl get multikueuecluster {down[0][0]} -o yaml`).")


# a worker reached through a ClusterProfile (spec.clusterSource.clusterProfileRef): what to fix, by the Active=False
# reason multikueuecluster.go loadClientConfig writes (kubeconfig and connection reasons: the sentence above)
_PROFILE_FIXES = {
    "MultiKueueClusterProfileFeatureDisabled": (
        "turn on Kueue's MultiKueueClusterProfile feature gate, alpha and off by default in v0.19 "
        "(featureGates: {{MultiKueueClusterProfile: true}} in its Configuration, or --feature-gates on "
        "kueue-controller-manager), or give MultiKueueCluster "
        "{cluster} a kubeConfig source instead"),
    "BadClusterProfile": "fix ClusterProfile {profile} (does it exist in Kueue's namespace? its access provider?)",
    "BadRestConfig": "fix the credentials ClusterProfile {profile}'s access provider gives Kueue",
}


def _profile(cluster: Mapping[str, Any]) -> str:
    return s(m(m(spec(cluster).get("clusterSource")).get("clusterProfileRef")).get("name")) or ""


def unanswered_since(ctx: Context, check: Mapping[str, Any]) -> datetime | None:
    """Since when a Pending MultiKueue check has had its copies out on workers with none reported admitted
    (status.nominatedClusterNames set, status.clusterName not), or has waited for an external dispatcher to
    nominate workers: the check's own transition time, or the quota reservation, whichever is later. None when
    that is not the shape."""
    if check.get("state") != "Pending" or s(ctx.status.get("clusterName")):
        return None
    if not [x for x in lst(ctx.status.get("nominatedClusterNames")) if s(x)] and not external_dispatcher(ctx):
        return None
    times = [t for t in (parse_time(check.get("lastTransitionTime")), ctx.cond_time("QuotaReserved")) if t]
    return max(times) if times else None


def pending_check_detail(ctx: Context, check_name: str, stalled_since: datetime | None = None) -> str:
    """A MultiKueue check still Pending with quota reserved here: where the copies went, what is not visible.
    `stalled_since`: the copies have been out long (`unanswered_since`). The manager cannot tell a worker without
    room from one that admitted its copy while MultiKueue cannot create or sync the owner there, which Kueue
    v0.19.2 only logs ("validating remote controller object", workload.go reconcileGroup): both are named."""
    nominated = [c for c in (s(x) for x in lst(ctx.status.get("nominatedClusterNames"))) if c]
    down = inactive_workers(ctx, check_name)
    again, named = _redispatched(ctx, check_name, down, brief=nominated != [] and stalled_since is not None)
    rest = [t for c, t, _ in down if c not in named]
    not_connected = (" Not connected: " + "; ".join(rest) + ".") if rest else ""
    if nominated and stalled_since is not None:  # redispatched or not: the copies out now are unanswered for long
        return again + _unanswered_detail(ctx, nominated, stalled_since) + not_connected
    if nominated:
        where = ", ".join(nominated)
        took = f" {format_duration(ctx.now - stalled_since, precise=True)} ago" if stalled_since is not None else ""
        return (again + f" MultiKueue sent a copy to worker cluster(s) {where} (status.nominatedClusterNames){took} "
                "and waits for one of them to admit it; this (manager) cluster does not show why none has: the "
                f"worker's own Kueue keeps its reason. Look at Workload {ctx.ns}/{ctx.name} on {nominated[0]} (run "
                "kueue-doctor there; its ClusterQueue may lack quota for it). The quota reserved here stays held "
                "meanwhile." + _incremental_round(ctx, check_name, nominated) + not_connected)
    assigned = s(ctx.status.get("clusterName"))
    if assigned:  # dispatched: a worker reserved quota; the check turns Ready once that worker admits it
        return (f" MultiKueue dispatched it to worker cluster {assigned}, which reserved quota for it "
                "(status.clusterName); the check turns Ready once that worker admits it (after its own admission "
                f"checks). Look at Workload {ctx.ns}/{ctx.name} on {assigned} (run kueue-doctor there). If the worker "
                "shows it admitted and the check stays Pending here, MultiKueue is stuck (seen with pod groups, "
                "kueue#5891): the platform admin reads the MultiKueue controller's logs on this manager cluster."
                + not_connected)
    external = external_dispatcher(ctx)
    if external:  # workload.go nominateAndSynchronizeWorkers: only the workers the dispatcher nominated
        took = f" in {format_duration(ctx.now - stalled_since, precise=True)}" if stalled_since is not None else " yet"
        text = (f" MultiKueue sends it only to the worker clusters dispatcher {external} writes into "
                f"status.nominatedClusterNames (multiKueue.dispatcherName, {ctx.state.kueue_config.source}), and it "
                f"has written none{took}.")
        if stalled_since is not None:
            text += (" Platform admin: check that dispatcher's controller is running and sees this Workload "
                     "(its logs).")
        return text + not_connected
    return " MultiKueue has not sent it to a worker cluster yet." + not_connected


def external_dispatcher(ctx: Context) -> str:
    """The dispatcher Kueue's Configuration names when it is not one of Kueue's own (kueue_config), else ""."""
    name = ctx.state.kueue_config.dispatcher  # an unread Configuration has no raw: Kueue's default dispatcher
    return "" if name in (DISPATCHER_ALL_AT_ONCE, DISPATCHER_INCREMENTAL) else name


def _redispatched(ctx: Context, check_name: str, down: list[tuple[str, str, Mapping[str, Any] | None]],
                  brief: bool = False) -> tuple[str, set[str]]:
    """Kueue evicted it to dispatch it again because the worker that had admitted it was lost, or lost its copy
    (workload.go reconcileGroup 6a sets the check Retry; the eviction clears status.clusterName). Read from the
    Evicted condition, which keeps MultiKueue's words (True, or False "Previously: ..." once quota is reserved
    again). (text, the workers it names); `brief`: without the aside on the lost copy, when more must follow."""
    said = ctx.cond_message("Evicted")
    found = out_of_sync(ctx)
    if found is not None:  # the loop, from the second reset on, is an Evicted/RequeueLoop verdict of its own
        at = f" at {when_text(found.at)}" if found.at is not None else ""
        return (f" Kueue evicted it{at} to dispatch it again: {_found_out_of_sync(found)}. {_NOT_THAT} If "
                f"{found.worker} changes the Job the same way again, this repeats on every dispatch: the platform "
                "admin then finds what changes it there (a webhook or policy on Jobs, another Kubernetes version, "
                "other Kueue feature gates).", set())
    if f'"{check_name}" ({_LOST}' in said:
        lost = [c for c, _, _ in down]
        who = f" (likely {' or '.join(lost)}, not connected now)" if lost else ""
        return (f" Kueue evicted it to dispatch it again: MultiKueue lost the worker that had admitted it{who} for "
                f"longer than workerLostTimeout (\"{_LOST}\")."
                + ("" if brief else " Its copy there may still run; MultiKueue settles that only once the worker "
                   "reconnects."), set(lost))
    if f'"{check_name}" ({_GONE}' in said:
        return (" Kueue evicted it to dispatch it again: the worker that had admitted it no longer had its copy "
                f"(\"{_GONE}\": deleted there, or out of sync).", set())
    return "", set()


# ---- a worker found the Job out of sync (Kueue v0.19, kueue#13047) -------------------------------------------------
# The worker's Kueue compares the Job MultiKueue created there with the Workload copied from the manager (jobframework
# ensurePrebuiltWorkloadInSync, EquivalentToWorkload: each pod set's count and minCount, its containers and init
# containers, tolerations before admission, the maximum execution time) and finishes its copy Finished=True OutOfSync
# when they differ; MultiKueue then sets its check Retry (workload.go reconcileGroup 3), Kueue evicts the Workload
# for AdmissionCheck, requeues it and MultiKueue dispatches it again, and a worker that changes the Job once changes
# it the same way every time.
PREBUILT_OUT_OF_SYNC = "The prebuilt workload is out of sync with its user job"  # the worker's Finished message
OUT_OF_SYNC_LOOP_AFTER = 2  # resets: the second one shows the worker changes the Job every time


class OutOfSync(NamedTuple):
    """The latest MultiKueue reset of the Workload was for a worker's OutOfSync finish."""

    check: str  # the MultiKueue check
    worker: str  # the worker cluster the latest reset names
    said: str  # MultiKueue's words, without the ', Previously: "Ready"' updateACS appends
    times: int  # resets so far, this one included
    evictions: int  # evictions for AdmissionCheck so far (status.schedulingStats)
    at: datetime | None  # the latest reset
    retrying: bool  # the check is Retry now: Kueue has not evicted the Workload for this reset yet
    events: int  # the Warning MultiKueue events saying so (their counts summed)


def out_of_sync(ctx: Context) -> OutOfSync | None:
    """The facts of a MultiKueue reset for a worker's OutOfSync finish, when that is the latest thing MultiKueue did
    to the Workload: its check is Retry with that message now, or, with no check in Retry, the latest eviction
    (Evicted=True, or False "Previously: ..." once quota is reserved again) quotes it. The count is the largest of
    the AdmissionCheck evictions (status.schedulingStats; and the check's retryCount, which each such eviction
    raises), plus the reset not evicted yet, and the count of MultiKueue's Warning events saying so."""
    checks = [m(c) for c in lst(ctx.status.get("admissionChecks"))]
    retry = next((c for c in checks if c.get("state") == "Retry" and is_multikueue(ctx, s(c.get("name")) or "")),
                 None)
    if retry is not None:
        parsed = parse_workload_message(s(retry.get("message")) or "")
        if parsed.template is not Template.MULTIKUEUE_REMOTE_OUT_OF_SYNC:
            return None  # MultiKueue resets it for another reason now (a lost worker, ...)
        check, entry, retrying = s(retry.get("name")) or "?", retry, True
        at = parse_time(retry.get("lastTransitionTime"))
    else:
        evicted = ctx.evicted_parsed
        if evicted.template is Template.PREVIOUSLY and evicted.inner is not None:
            evicted = evicted.inner
        if evicted.template is not Template.ADMISSION_CHECK_EVICTION:
            return None
        found = next(((cname, p) for cname, text in evicted.checks
                      if (p := parse_workload_message(text)).template is Template.MULTIKUEUE_REMOTE_OUT_OF_SYNC), None)
        if found is None:
            return None
        check, parsed, retrying = found[0], found[1], False
        entry = next((c for c in checks if c.get("name") == check), {})
        if entry.get("state") == "Ready":  # a worker has admitted it since: the reset is history
            return None
        # Evicted=False "Previously: ..." is as old as the new reservation; the check's reset is the eviction's time
        at = (ctx.cond_time("Evicted") if ctx.true("Evicted") else parse_time(entry.get("lastTransitionTime"))
              or ctx.cond_time("Evicted"))
    evictions = sum(i(m(e).get("count")) for e in lst(m(ctx.status.get("schedulingStats")).get("evictions"))
                    if m(e).get("reason") == "AdmissionCheck")
    said_events = [ev for ev in ctx.state.events_about("Workload", ctx.ns, ctx.name)
                   if s(ev.get("reason")) == "MultiKueue" and parse_workload_message(
                       event_message(ev)).template is Template.MULTIKUEUE_REMOTE_OUT_OF_SYNC]
    events = sum(event_count(ev) for ev in said_events)
    if at is None:
        at = max((t for t in (event_time(ev) for ev in said_events) if t is not None), default=None)
    times = max(max(evictions, i(entry.get("retryCount"))) + (1 if retrying else 0), events, 1)
    said = _PREVIOUSLY.sub("", parsed.text)
    return OutOfSync(check, parsed.names.get("cluster", "?"), said, times, evictions, at, retrying, events)


# asides, dropped in this order when the message is too long (Finding.notes)
_COPY_GONE = " Its copy there shows Finished=True OutOfSync only until MultiKueue deletes it after the reset."
_EXAMPLES = " (Kyverno, Gatekeeper)"
_COMPARED = " (Kueue compares each pod set's Pod count, containers and init containers with the Workload's)"
_FINISHED = f" (it finished its copy as OutOfSync: \"{PREBUILT_OUT_OF_SYNC}\")"
OUT_OF_SYNC_NOTES = (_COPY_GONE, _EXAMPLES, _COMPARED, _FINISHED)  # for a verdict quoting `out_of_sync_once`
_NOT_THAT = "Not an eviction by the worker, not a lost worker, not a lack of quota."


def _found_out_of_sync(o: OutOfSync) -> str:
    return f"{o.worker}'s Kueue found the Job MultiKueue created there out of sync with its Workload{_FINISHED}"


def _where_to_look(ctx: Context, o: OutOfSync) -> str:
    kind, _ = _owner(ctx)
    return (f"on {o.worker}, find what changes the {kind} there{_COMPARED}: a mutating webhook or policy{_EXAMPLES} "
            "on Jobs, another Kubernetes version's defaults, or Kueue feature gates (PartialAdmission) that differ "
            "from this manager's." + _COPY_GONE)


def out_of_sync_hints(ctx: Context, o: OutOfSync) -> list[str]:
    kind, owner = _owner(ctx)
    return [f"kubectl get {kind.lower()} {owner} -n {ctx.ns} -o yaml   # here: what MultiKueue copies to {o.worker}",
            f"kubectl get mutatingwebhookconfigurations   # on {o.worker}",
            f"kubectl get workload {ctx.name} -n {ctx.ns} -o jsonpath='{{.status.conditions}}'   # on {o.worker}, "
            "while a copy is there"]


def out_of_sync_once(ctx: Context, o: OutOfSync) -> str:
    """One reset: what happened, that it is not what a Retry usually means, what comes next, where to look if it
    repeats."""
    at = f" at {when_text(o.at)}" if o.at is not None else ""
    text = f"{_found_out_of_sync(o)}, so MultiKueue set check {o.check} to Retry{at}. {_NOT_THAT} "
    again = f"{o.worker} changes the Job the same way again, this repeats on every dispatch"
    text += f"Kueue evicts, requeues and re-dispatches it; if {again}" if o.retrying else f"If {again}"
    return text + f". Platform admin, if it does: {_where_to_look(ctx, o)}"


def out_of_sync_loop(ctx: Context, o: OutOfSync | None = None) -> Finding | None:
    """Reset for OutOfSync twice or more: the worker changes the Job the same way on every dispatch, so the Workload
    is evicted, requeued and dispatched again forever (each time through Kueue's requeue back-off); nobody but the
    platform admin, who runs the workers, can end it. The verdict of other requeue loops (Evicted/RequeueLoop),
    from two resets on instead of three: OutOfSync is no bad luck."""
    o = o or out_of_sync(ctx)
    if o is None or o.times < OUT_OF_SYNC_LOOP_AFTER:
        return None
    if o.retrying:
        head = (f"Reset for re-dispatch {o.times} times ({o.evictions} eviction(s) for AdmissionCheck so far, the "
                "next one under way)")
    else:
        head = f"Evicted {o.times} times for AdmissionCheck"
    now, aside = _now(ctx, o)
    text = (f"{head}: each time a worker's Kueue found the Job MultiKueue created there out of sync with its "
            f"Workload and finished its copy as OutOfSync (last: {o.worker}, \"{PREBUILT_OUT_OF_SYNC}\"), so "
            f"MultiKueue set check {o.check} to Retry and Kueue evicted, requeued and re-dispatched it. {_NOT_THAT} "
            f"{now}{aside}. The worker changes the Job the same way every time: requeuing alone does not help. "
            f"Platform admin: {_where_to_look(ctx, o)}")
    evidence = [ctx.object_evidence("Workload", ctx.name, "status.schedulingStats.evictions", "AdmissionCheck",
                                    f"count {o.evictions}", ns=ctx.ns)]
    if ctx.cond("Evicted"):
        evidence.insert(0, ctx.condition_evidence("Evicted"))
    if o.events:
        evidence.append(ctx.object_evidence("Event", ctx.name, "event", "MultiKueue",
                                            f"{o.said} (count {o.events})", o.at, ctx.ns))
    return Finding(Reason.EVICTED, Cause.REQUEUE_LOOP, text, ActionBy.CLUSTER_ADMIN, since=o.at, evidence=evidence,
                   hints=out_of_sync_hints(ctx, o), notes=(aside, *OUT_OF_SYNC_NOTES))


def _now(ctx: Context, o: OutOfSync) -> tuple[str, str]:
    """Where the Workload stands in the cycle, and an aside that only adds detail."""
    last = f"Last reset at {when_text(o.at)}"
    if o.retrying:
        return f"{last}: Kueue is evicting it now", " (this manager may still show it Admitted)"
    if ctx.true("Evicted") and ctx.true("QuotaReserved"):
        return f"{last}: Kueue is releasing its quota in {ctx.cq_text}", ""
    if ctx.true("Evicted"):
        requeue_at = parse_time(m(ctx.status.get("requeueState")).get("requeueAt"))
        if requeue_at is not None and not ctx.after(requeue_at, timedelta(0)):
            return f"{last}; Kueue requeues it at {when_text(requeue_at)}", " (requeueState.requeueAt)"
        return f"{last}; it is queued again", ""
    nominated = [c for c in (s(x) for x in lst(ctx.status.get("nominatedClusterNames"))) if c]
    return (f"{last}; quota in {ctx.cq_text} is reserved again since {when_text(ctx.cond_time('QuotaReserved'))} "
            "and MultiKueue is dispatching it anew" + (f" to {', '.join(nominated)}" if nominated else ""),
            " (status.nominatedClusterNames)" if nominated else "")


def _owner(ctx: Context) -> tuple[str, str]:
    ref = ctx.owner_ref
    return (s(ref.get("kind")) or "owner", s(ref.get("name")) or "?") if ref else ("owner", "?")


def _unanswered_detail(ctx: Context, nominated: list[str], since: datetime) -> str:
    kind, owner = _owner(ctx)
    return (f" MultiKueue sent copies to {', '.join(nominated)} (status.nominatedClusterNames) "
            f"{format_duration(ctx.now - since, precise=True)} ago and none is reported admitted (no "
            "status.clusterName). Either no worker has room (run kueue-doctor there on Workload "
            f"{ctx.ns}/{ctx.name}), or a worker admitted it but MultiKueue cannot create or sync {kind} "
            f"{ctx.ns}/{owner} there: a {kind} of that name with no {_ORIGIN_LABEL} label exists there and holds the "
            f"quota for nothing (kueue#12404). Platform admin: look for that {kind} on each worker, and for "
            "'validating remote controller object' in this cluster's Kueue logs; rename one of the two.")


def unanswered_hints(ctx: Context) -> list[str]:
    """Where to look when copies went out long ago and no worker is reported admitting one."""
    if not lst(ctx.status.get("nominatedClusterNames")):
        return []
    kind, owner = _owner(ctx)
    return [f"kubectl get {kind.lower()} {owner} -n {ctx.ns} -L {_ORIGIN_LABEL}   # on each worker cluster",
            f"kubectl -n {ctx.state.kueue_config.namespace} logs deploy/{KUEUE_DEPLOYMENT} | grep 'validating remote "
            f"controller object' | grep {owner}"]


def _incremental_round(ctx: Context, check_name: str, nominated: list[str]) -> str:
    """The incremental dispatcher tries a few workers at a time: the others get no copy until a round of 5 minutes
    passes without an admission (workloaddispatcher.nominateWorkers), so a worker with room may not be tried yet."""
    cfg = ctx.state.kueue_config
    if cfg.dispatcher != DISPATCHER_INCREMENTAL:
        return ""
    every = workers(ctx, check_name)
    left = [w for w in every if w not in nominated]
    if not cfg.gate("MultiKueueIncrementalDispatcherRespectConfigOrder"):
        left.sort()
    if not left:
        return (f" Kueue's incremental dispatcher has nominated every worker cluster of the check ({len(every)}): "
                "none is left to try, one of them must admit it.") if every else ""
    step = cfg.incremental_step
    return (f" Kueue's incremental dispatcher (multiKueue.dispatcherName) has nominated {len(nominated)} of the "
            f"{len(every)} worker clusters so far: each {INCREMENTAL_ROUND // 60} minutes that none admits it, it "
            f"adds up to {step} more (next: {', '.join(left[:step])}); the others get no copy until then.")


def rejected_detail(ctx: Context) -> str:
    """A MultiKueue check that rejected the Workload: its words, and what the owner must change."""
    for c in (m(x) for x in lst(ctx.status.get("admissionChecks"))):
        cname = s(c.get("name")) or ""
        if c.get("state") != "Rejected" or not is_multikueue(ctx, cname):
            continue
        said = _PREVIOUSLY.sub("", s(c.get("message")) or "")
        text = f" MultiKueue check {cname} rejected it: {closed(said or 'no message')}"
        if "Expecting spec.managedBy" in said:
            text += (" spec.managedBy cannot be changed on a Job: recreate it without spec.managedBy (Kueue's webhook "
                     "then sets kueue.x-k8s.io/multikueue), or send it to a ClusterQueue without a MultiKueue check; "
                     "setting spec.active back to true only gets it rejected again.")
        elif said.startswith("No multikueue adapter found"):
            text += (" MultiKueue cannot dispatch this kind of owner: submit it to a ClusterQueue without a MultiKueue "
                     "check, or the platform admin enables MultiKueue for its integration.")
        return text
    return ""
