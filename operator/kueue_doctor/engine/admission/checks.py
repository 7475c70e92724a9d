"""Quota reserved, not admitted: admission checks, a delayed topology request, or Kueue about to admit.

Neighbours: `eviction.py` (a reserved Workload being evicted is asked there first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from ...kube.kueue_names import provisioning_request_name
from ...kube.objects import (
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
from ...state import MULTIKUEUE_CONTROLLER, PROVISIONING_CONTROLLER
from ...vocabulary import ActionBy, Cause, Reason
from .. import multikueue, quota
from ..context import Context
from ..pods.events import event_count, event_first_time, event_message, event_time
from ..rules import Finding, Phase, pairs, rule
from .check_states import RANK
from .eviction import evictions_total
from .stalled import STALL_AFTER

_CHECK_CAUSES = {"Retry": Cause.ADMISSION_CHECK_RETRY, "Rejected": Cause.ADMISSION_CHECK_REJECTED}

# ---- ProvisioningRequest checks (pkg/controller/admissionchecks/provisioning in Kueue v0.19.2) ----------------
# the check message Kueue writes on Retry, by the ProvisioningRequest condition behind it (controller.go)
_RETRY_PREFIXES = (("Retrying after failure: ", "Failed"), ("Retrying after booking expired: ", "BookingExpired"))
_INACTIVE_MESSAGE = "the check is not active"
# the cluster autoscaler's Provisioned=False CapacityIsNotFound texts (best-effort-atomic-scale-up, check-capacity):
# it found no scale-up and tries again each loop, with no end until it fails the request at EXPIRES_AFTER
_CAPACITY_NOT_FOUND = "Capacity is not found"
EXPIRES_AFTER = timedelta(days=7)  # cluster-autoscaler provreq defaultExpirationTime: then Failed=True, Expired
# a scale-up is asked for within a minute; an hour of "not found" while holding quota is no longer a blip
CAPACITY_WAIT = timedelta(hours=1)


def is_provisioning(ctx: Context, check_name: str) -> bool:
    return controller_of(ctx, check_name) == PROVISIONING_CONTROLLER


def _retry_schedule(ctx: Context, check: Mapping[str, Any]) -> str:
    after = check.get("requeueAfterSeconds")
    at = s(m(ctx.status.get("requeueState")).get("requeueAt"))
    if isinstance(after, int) and at:
        return f" after a {after}s back-off (requeueAt {at})"
    if isinstance(after, int):
        return f" after a {after}s back-off"
    return f" at {at}" if at else ""


def provisioning_config(ctx: Context, check_name: str) -> tuple[str, Mapping[str, Any] | None]:
    """The name of the ProvisioningRequestConfig a check's spec.parameters names, and that object when it is in
    the input (None: not read, so nothing is said about its settings)."""
    params = m(spec(ctx.state.admission_checks.get(check_name) or {}).get("parameters"))
    config = s(params.get("name")) or ""
    if s(params.get("kind")) != "ProvisioningRequestConfig":
        return config, None
    return config, ctx.state.provisioning_configs.get(config)


class BackoffLimit(NamedTuple):
    """A ProvisioningRequestConfig's retryStrategy.backoffLimitCount."""
    config: str  # the ProvisioningRequestConfig's name
    limit: int


def backoff_limit(ctx: Context, check_name: str) -> BackoffLimit | None:
    """The check's ProvisioningRequestConfig's retryStrategy.backoffLimitCount when the config is in the input; 3
    when it sets none (the API default). Attempt n fails into Retry while n <= the limit, else Rejected."""
    config, obj = provisioning_config(ctx, check_name)
    if obj is None:
        return None
    limit = m(spec(obj).get("retryStrategy")).get("backoffLimitCount")
    return BackoffLimit(config, limit if isinstance(limit, int) and not isinstance(limit, bool) else 3)


def _retry_budget(ctx: Context, check_name: str, attempt: int) -> str:
    """After attempt `attempt` went to Retry: which retry the next attempt is, of how many, and what follows."""
    known = backoff_limit(ctx, check_name)
    if known is None:
        return ("; once the ProvisioningRequestConfig's retryStrategy.backoffLimitCount is used up it deactivates "
                "the Workload.")
    config, limit = known
    head = (f"; that is retry {attempt} of {limit} (ProvisioningRequestConfig {config} "
            "retryStrategy.backoffLimitCount)")
    if attempt >= limit:
        return head + ", the last: if it fails too, Kueue deactivates the Workload."
    return head + f": {limit - attempt} more after it, then a failure deactivates the Workload."


def provisioning_detail(ctx: Context, check: Mapping[str, Any]) -> str:
    """What the ProvisioningRequest of a not-Ready provisioning check says and what Kueue does next, with
    the request's name, the attempt and the retry state Kueue wrote (retryCount, requeueAfterSeconds)."""
    name = s(check.get("name")) or "?"
    state = s(check.get("state")) or "Pending"
    msg = s(check.get("message")) or ""
    retries = i(check.get("retryCount"))
    attempt = retries + 1
    pr = f"ProvisioningRequest {ctx.ns}/{provisioning_request_name(ctx.name, name, attempt)}"
    if state == "Retry":
        condition, text = next(((c, msg[len(p):]) for p, c in _RETRY_PREFIXES if msg.startswith(p)),
                               ("Failed", msg))
        what = ("the cluster autoscaler could not provision the capacity" if condition == "Failed"
                else "the capacity it booked expired before the Workload was admitted" + _not_admitted_why(ctx, name))
        return (f"{pr} (attempt {attempt}) is {condition}: {what} ({text or 'no message'}). Kueue releases the "
                f"quota and retries with attempt {attempt + 1}{_retry_schedule(ctx, check)}"
                + _retry_budget(ctx, name, attempt))
    if state == "Rejected":
        said = msg.rstrip(".") or "no message"  # mid-sentence: no full stop of its own
        return f"{pr} (attempt {attempt}) was rejected: {said}; Kueue deactivates the Workload."
    earlier = ""
    if retries:
        previous = ctx.evicted_parsed.inner or ctx.evicted_parsed
        why = next((text for cname, text in previous.checks if cname == name), "")
        known = backoff_limit(ctx, name)
        of = f"; this is retry {retries} of {known.limit}" if known is not None else ""
        earlier = (f" {retries} earlier attempt(s) did not get capacity" + (f" (last: {why})" if why else "")
                   + of + ".")
    if msg == _INACTIVE_MESSAGE:
        return f"{pr}: Kueue says the check is not active (its ProvisioningRequestConfig is missing or invalid)."
    if creation_failed(check):  # the caller quotes the check's message (the error) just before
        head = (f"Kueue could not create {pr} (or its PodTemplate), so no autoscaler sees it, and the Workload "
                "holds its quota meanwhile.")
        return head + (_single_pod_set(ctx, msg) or (
            " Cluster admin: fix what the error names (a ResourceQuota on provisioningrequests or podtemplates in "
            "the namespace, a webhook, Kueue's RBAC); Kueue creates it on its next reconcile."))
    if msg:
        return f"The cluster autoscaler is working on {pr} (attempt {attempt}): {closed(msg)}{earlier}"
    return (f"{pr} (attempt {attempt}) has no condition yet: the cluster autoscaler has not accepted it (is it "
            f"running with ProvisioningRequest support?).{earlier}")


def no_condition_for_long(ctx: Context, check: Mapping[str, Any], since: datetime | None) -> str | None:
    """Ten minutes on, the ProvisioningRequest still has no condition (Kueue writes an empty message then): no
    autoscaler processes it. The cluster autoscaler reads them only with --enable-provisioning-requests and skips,
    silently, one of a provisioningClassName it does not serve; the Workload holds its quota all the while."""
    if s(check.get("state")) != "Pending" or s(check.get("message")):
        return None
    if since is None or not ctx.after(since, STALL_AFTER):
        return None
    config, obj = provisioning_config(ctx, s(check.get("name")) or "")
    klass = s(spec(obj).get("provisioningClassName")) if obj is not None else None
    return (f" After {format_duration(ctx.now - since)} it still has none, and the Workload holds its quota in "
            f"{ctx.cq_text} meanwhile: no autoscaler is processing it. The cluster autoscaler reads "
            "ProvisioningRequests only when started with --enable-provisioning-requests=true, and silently skips one "
            "whose provisioningClassName it does not serve (check-capacity.autoscaling.x-k8s.io, "
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io; on GKE also queued-provisioning.gke.io). Cluster "
            "admin: compare "
            + (f"ProvisioningRequestConfig {config}'s" if config else "the ProvisioningRequestConfig's")
            + " provisioningClassName" + (f" ({klass})" if klass else "") + " with what the autoscaler serves, "
            "and its flags.")


def _not_admitted_why(ctx: Context, name: str) -> str:
    """Why a Workload whose provisioning check was Ready stayed unadmitted until the booking expired (10 minutes):
    another check not Ready, or, with TAS, the delayed topology assignment not made (SyncAdmittedCondition)."""
    others = [s(m(c).get("name")) or "?" for c in lst(ctx.status.get("admissionChecks"))
              if m(c).get("name") != name and m(c).get("state") != "Ready"]
    if others:
        return f", while check(s) {', '.join(others)} were not Ready"
    delayed = [s(m(p).get("name")) or "?" for p in lst(m(ctx.status.get("admission")).get("podSetAssignments"))
               if m(p).get("delayedTopologyRequest") == "Pending"]
    if delayed:
        return (f", while the delayed topology assignment of pod set {delayed[0]} was still Pending (Kueue's "
                "second TAS pass had not placed it)")
    return ""


def capacity_not_found_for_long(ctx: Context, check: Mapping[str, Any], since: datetime | None) -> str | None:
    """The autoscaler has found no capacity for an hour while the Workload holds its quota. Kueue sets no deadline
    on a ProvisioningRequest (kueue#3245) and the autoscaler fails it only after 7 days, so nothing moves on its
    own before then: the cluster admin decides (fix the capacity, or noRetry so Kueue's retryStrategy applies)."""
    if s(check.get("state")) != "Pending" or not (s(check.get("message")) or "").startswith(_CAPACITY_NOT_FOUND):
        return None
    if since is None or not ctx.after(since, CAPACITY_WAIT):
        return None
    config, obj = provisioning_config(ctx, s(check.get("name")) or "")
    no_retry = obj is not None and s(m(spec(obj).get("parameters")).get("noRetry")) == "true"
    fix = (f"; ProvisioningRequestConfig {config} already sets parameters.noRetry: \"true\", which this "
           "autoscaler ignores for its class" if no_retry else
           ", or set parameters.noRetry: \"true\" in the ProvisioningRequestConfig so a request it cannot serve "
           "fails at once and Kueue backs off with the quota released")
    return (f" No capacity for {format_duration(ctx.now - since)}, with quota held in {ctx.cq_text}: Kueue sets no "
            "deadline on a ProvisioningRequest (kueue#3245) and the autoscaler fails it only 7 days after its "
            f"creation (about {when_text(since + EXPIRES_AFTER)}), when Kueue's retryStrategy applies. Cluster "
            "admin: find why no node group fits it (at max size, cloud quota, stock-out: the autoscaler's events "
            f"say){fix}.")


def inactive_provisioning_detail(ctx: Context, check_name: str) -> str:
    """Why a ProvisioningRequest AdmissionCheck is not Active and who fixes it. Kueue's provisioning controller sets
    Active on it (admissioncheck_reconciler.go); no condition at all means that controller never ran: Kueue sets it
    up only when the ProvisioningRequest API (autoscaling.x-k8s.io/v1) is served at its start (kueue#3195)."""
    ac = ctx.state.admission_checks.get(check_name) or {}
    active = conditions(ac).get("Active")
    if active is None:
        return (f"AdmissionCheck {check_name} has no Active condition: Kueue's ProvisioningRequest controller never "
                "took it up. Kueue sets that controller up only if the ProvisioningRequest API "
                "(provisioningrequests.autoscaling.x-k8s.io/v1) is served when Kueue starts (its log says \"Skipping "
                "provisioning controller setup: Provisioning Requests not supported\", kueue#3195). Cluster admin: "
                "install a cluster autoscaler with ProvisioningRequest support (and its CRD), then restart the Kueue "
                "controller manager.")
    reason, said = s(m(active).get("reason")) or "?", s(m(active).get("message")) or "no message"
    params = m(spec(ac).get("parameters"))
    ref = f"{s(params.get('kind')) or '?'} {s(params.get('name')) or '?'}" if params else "none"
    text = f"AdmissionCheck {check_name} is not Active ({reason}: {said.rstrip('.')})."
    if reason == "BadParametersRef" and said.endswith("not found"):
        return (text + f" Its spec.parameters names {ref}: the cluster admin creates that ProvisioningRequestConfig "
                "(kubectl get provisioningrequestconfigs), or points spec.parameters at one that exists.")
    if reason == "BadParametersRef":  # refValidForGK: no reference, an empty name, a wrong group or kind
        return (text + f" Its spec.parameters is {ref} (apiGroup {s(params.get('apiGroup')) or 'none'}): the "
                "cluster admin sets it to apiGroup kueue.x-k8s.io, kind ProvisioningRequestConfig and the name of "
                "an existing one.")
    return text + " The cluster admin reads the Kueue controller logs about it."


def _single_pod_set(ctx: Context, msg: str) -> str:
    """GKE's queued provisioning takes one pod set per ProvisioningRequest (ray-project/ray#57839: a RayJob whose
    head and workers both ask for GPUs)."""
    if "single PodSet" not in msg and "single podset" not in msg.lower():
        return ""
    sets = [s(m(ps).get("name")) or "?" for ps in lst(ctx.spec.get("podSets"))]
    return (f" The Workload has {len(sets)} pod sets ({', '.join(sets)}) and this provisioner takes one per "
            "request: keep the accelerators to one pod set (a Ray head without GPUs, say), or, when the pod sets "
            "ask for the same, set podSetMergePolicy: IdenticalWorkloadSchedulingRequirements in the "
            "ProvisioningRequestConfig.")


def creation_failed(check: Mapping[str, Any]) -> bool:
    """Kueue's provisioning controller failed to create the request (handleError: the message stays on the
    Pending check until a reconcile succeeds)."""
    return (s(check.get("message")) or "").startswith(_CREATE_ERRORS)


_CREATE_ERRORS = ("Error creating ProvisioningRequest ", "Error creating PodTemplate ")


def rejected_provisioning_detail(ctx: Context) -> str:
    """For a Workload Kueue deactivated because a provisioning check was Rejected: which ProvisioningRequest
    condition it was. The check's message is the autoscaler's text whatever the condition, and the eviction
    resets the check (podSetUpdates dropped, retryCount cleared), so the condition is read from what else
    remains: time it ran (CapacityRevoked), Kueue's AdmissionCheckUpdated event (from Ready: the capacity had
    been provisioned; from Pending/Retry: Failed with no retries left)."""
    parsed = ctx.evicted_parsed.inner or ctx.evicted_parsed
    for cname, text in parsed.checks:
        if not is_provisioning(ctx, cname):
            continue
        check = next((m(c) for c in lst(ctx.status.get("admissionChecks")) if m(c).get("name") == cname), {})
        came_from = _rejected_from(ctx, cname)
        if i(ctx.status.get("accumulatedPastExecutionTimeSeconds")):  # it ran: BookingExpired is ignored then
            what = "CapacityRevoked: the cluster autoscaler took back the nodes it had provisioned"
        elif check.get("podSetUpdates") or came_from == "Ready":
            what = ("the capacity was provisioned and then withdrawn (CapacityRevoked, or BookingExpired with no "
                    "retries left)")
        elif came_from in ("Pending", "Retry"):
            known = backoff_limit(ctx, cname)
            limit = (f"ProvisioningRequestConfig {known.config} retryStrategy.backoffLimitCount {known.limit}: "
                     f"{known.limit + 1} attempts" if known is not None
                     else "ProvisioningRequestConfig retryStrategy.backoffLimitCount")
            what = f"Failed with no retries left: the cluster autoscaler could not provision the capacity ({limit})"
        else:
            what = ("Failed with no retries left, or the capacity was withdrawn (the Workload's events, "
                    "AdmissionCheckUpdated, tell which)")
        # the eviction cleared retryCount: each earlier attempt ended in an AdmissionCheck eviction
        attempt = max(evictions_total(ctx, "AdmissionCheck"), i(check.get("retryCount"))) + 1
        pr = f"ProvisioningRequest {ctx.ns}/{provisioning_request_name(ctx.name, cname, attempt)}"
        return f" Check {cname} ({pr}): {what}; the autoscaler said: {closed(text or 'no message')}"
    return ""


def _rejected_from(ctx: Context, cname: str) -> str | None:
    """The state the check left for Rejected, from Kueue's newest AdmissionCheckUpdated event about it
    ("Admission check dws-prov updated state from Ready to Rejected with message: ...")."""
    prefix, best, at = f"Admission check {cname} updated state from ", None, None
    for ev in ctx.state.events_about("Workload", ctx.ns, ctx.name):
        text = s(ev.get("message")) or s(ev.get("note")) or ""
        if not text.startswith(prefix) or " to Rejected" not in text:
            continue
        when = parse_time(ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("deprecatedLastTimestamp"))
        if best is None or (when is not None and (at is None or when > at)):
            best, at = text[len(prefix):].split(" ", 1)[0], when
    return best


def _evidence(ctx: Context) -> list[dict[str, Any]]:
    evidence = [ctx.condition_evidence("QuotaReserved")]
    if ctx.cond("Admitted"):
        evidence.append(ctx.condition_evidence("Admitted"))
    return evidence


class Waiting(NamedTuple):
    """What the controller behind a pending check adds to the finding: its state in words, who must act when it is
    stuck (None: as the check's state says), and where to look."""
    text: str = ""
    action: ActionBy | None = None
    evidence: tuple[dict[str, Any], ...] = ()
    hints: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # asides of `text` (Finding.notes)


def _provisioning_wait(ctx: Context, check: Mapping[str, Any], began: datetime | None, active: bool) -> Waiting:
    cname = s(check.get("name")) or "?"
    if not active:
        return Waiting(" Kueue creates no ProvisioningRequest for it while the check is not Active, and the Workload "
                       "holds its quota meanwhile. " + inactive_provisioning_detail(ctx, cname), ActionBy.CLUSTER_ADMIN)
    text = " " + provisioning_detail(ctx, check)
    if creation_failed(check):
        return Waiting(text, ActionBy.CLUSTER_ADMIN)
    long_wait = capacity_not_found_for_long(ctx, check, began) or no_condition_for_long(ctx, check, began)
    return Waiting(text + long_wait, ActionBy.CLUSTER_ADMIN) if long_wait else Waiting(text)


def _multikueue_wait(ctx: Context, check: Mapping[str, Any], began: datetime | None, active: bool) -> Waiting:
    cname = s(check.get("name")) or "?"
    unanswered = multikueue.unanswered_since(ctx, check)
    # copies out on workers: a wait for their quota for an hour; no worker nominated: ten minutes
    nominated = any(s(x) for x in lst(ctx.status.get("nominatedClusterNames")))
    stalled = unanswered if ctx.after(unanswered, multikueue.UNANSWERED_AFTER if nominated else STALL_AFTER) else None
    text = multikueue.pending_check_detail(ctx, cname, stalled)
    if not active:
        text += " " + multikueue.inactive_check_detail(ctx, cname)
    # no worker admitted its copy for long, or MultiKueue cannot sync: its logs only
    stuck = stalled is not None or not active
    return Waiting(text, ActionBy.CLUSTER_ADMIN if stuck else None, tuple(multikueue.evidence(ctx, cname)),
                   tuple(multikueue.unanswered_hints(ctx)) if stalled is not None else (),
                   multikueue.OUT_OF_SYNC_NOTES)


def _other_wait(ctx: Context, check: Mapping[str, Any], began: datetime | None, active: bool) -> Waiting:
    if active:
        return Waiting()
    return Waiting(f" AdmissionCheck {s(check.get('name')) or '?'} is not Active: the platform admin must fix its "
                   "controller.", ActionBy.CLUSTER_ADMIN)


# what each check controller kueue-doctor knows adds; any other controller's check is read from its state alone
_WAITS: dict[str, Callable[[Context, Mapping[str, Any], datetime | None, bool], Waiting]] = {
    PROVISIONING_CONTROLLER: _provisioning_wait,
    MULTIKUEUE_CONTROLLER: _multikueue_wait,
}


# Admitted=False while the quota stays reserved: a check no longer Ready (workload.SyncAdmittedCondition). Without
# UnadmittedWorkloadsObservability (Kueue v0.19's default) Kueue writes it only when it takes an admission back; with
# it, from the reservation on, so only a later change says it was admitted before
_CHECKS_UNSATISFIED = ("UnsatisfiedChecks", "UnsatisfiedAdmissionChecks")


def _admission_revoked(ctx: Context, reserved: datetime | None) -> datetime | None:
    """When Kueue took the admission back because a check left Ready, else None."""
    cond = ctx.cond("Admitted")
    at = ctx.cond_time("Admitted")
    if not cond or cond.get("status") != "False" or cond.get("reason") not in _CHECKS_UNSATISFIED or at is None \
            or reserved is None or (at - reserved).total_seconds() < 2:
        return None
    return at


@rule(Phase.RESERVED, pairs(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.ADMISSION_CHECK_PENDING,
                            Cause.ADMISSION_CHECK_RETRY, Cause.ADMISSION_CHECK_REJECTED))
def admission_checks_not_ready(ctx: Context) -> Finding | None:
    checks = [m(c) for c in lst(ctx.status.get("admissionChecks"))]
    pending: list[Mapping[str, Any]] = sorted((c for c in checks if c.get("state") != "Ready"),
                                              key=lambda c: RANK.get(s(c.get("state")) or "", 2))
    if not pending:
        return None
    since = ctx.cond_time("QuotaReserved")
    first = pending[0]
    if len(pending) > 1 and _controller(ctx, first) == MULTIKUEUE_CONTROLLER and first.get("state") == "Pending":
        # MultiKueue dispatches nothing until every other check is Ready (allNonMKAdmissionChecksReady)
        first = next((c for c in pending if _controller(ctx, c) != MULTIKUEUE_CONTROLLER), first)
    waiting_mk = [s(c.get("name")) for c in pending if c is not first and _controller(ctx, c) == MULTIKUEUE_CONTROLLER]
    state = s(first.get("state")) or "Pending"
    cname = s(first.get("name")) or "?"
    ac = ctx.state.admission_checks.get(cname)
    controller = controller_of(ctx, cname)
    said = f" ({s(first.get('message'))})" if s(first.get("message")) else ""  # also in the evidence
    revoked = _admission_revoked(ctx, since)
    text = (f"Quota reserved in {ctx.cq_text} since {when_text(since)}, waiting for "
            f"{len(pending)}/{len(checks)} admission check(s): {cname} is {state}" + said
            + (f"; its controller is {controller}" if controller else "") + ".")
    if revoked is not None:  # it was admitted and ran: the wait began when Kueue took the admission back
        ran = i(ctx.status.get("accumulatedPastExecutionTimeSeconds"))
        text = (f"Admitted, then not any more since {when_text(revoked)}: admission check {cname} went back to "
                f"{state}{said}, so Kueue took the admission back and suspended the owner (its Pods stopped"
                + (f"; it had run {format_duration(ran, precise=True)} in all" if ran else "")
                + f"), keeping the quota reserved in {ctx.cq_text}; it runs again once the check is Ready."
                + (f" Its controller is {controller}." if controller else ""))
        since = revoked
    # status.blocker names the check this message is about, and the pod set and flavor it applies through
    pod_set, flavor, per_flavor = check_pod_set(ctx, cname)
    if per_flavor:
        text += (f" It applies through flavor {flavor} of pod set {pod_set or 'main'} (admissionChecksStrategy "
                 "onFlavors).")
    # this attempt began at the later of the reservation and the check's last state change (a retry resets it)
    began = max((t for t in (since, parse_time(first.get("lastTransitionTime"))) if t is not None), default=None)
    active = ac is None or is_true(conditions(ac).get("Active"))
    waiting = _WAITS.get(controller or "", _other_wait)(ctx, first, began, active)
    text += waiting.text
    if waiting_mk and controller != MULTIKUEUE_CONTROLLER:
        text += (f" MultiKueue check {waiting_mk[0]} sends it to no worker cluster until every other check is "
                 "Ready: this one holds it.")
    # Pending and Retry resolve themselves (Kueue retries after the back-off); Rejected needs the owner
    action = waiting.action or (ActionBy.WORKLOAD_OWNER if state == "Rejected" else ActionBy.NOBODY)
    evidence = [*_evidence(ctx), *waiting.evidence]
    for c in pending[:4]:
        evidence.append(ctx.object_evidence("Workload", ctx.name, f"status.admissionChecks[{c.get('name')}]",
                                            s(c.get("state")), s(c.get("message")),
                                            parse_time(c.get("lastTransitionTime")), ctx.ns))
    blocker = {k: v for k, v in {"kind": "AdmissionCheck", "name": cname, "flavor": flavor,
                                 "podSet": pod_set, "source": "Kueue"}.items() if v}
    hints = [f"kubectl get workload {ctx.name} -n {ctx.ns} -o jsonpath='{{.status.admissionChecks}}'",
             *waiting.hints]
    return Finding(Reason.WAITING_FOR_ADMISSION_CHECKS, _CHECK_CAUSES.get(state, Cause.ADMISSION_CHECK_PENDING), text,
                   action, since=since, evidence=evidence, blocker=blocker, hints=hints,
                   notes=(said, *waiting.notes))


def check_pod_set(ctx: Context, check_name: str) -> tuple[str | None, str | None, bool]:
    """(pod set, flavor, per flavor) a check applies through. Kueue adds a check whose onFlavors lists any flavor the
    Workload was assigned (AdmissionChecksForWorkload): the first pod set holding one; without onFlavors, the first
    pod set's first flavor."""
    rules = lst(m(spec(ctx.cq or {}).get("admissionChecksStrategy")).get("admissionChecks"))
    wanted = {s(f) for r in rules if m(r).get("name") == check_name for f in lst(m(r).get("onFlavors"))}
    first: tuple[str | None, str | None] | None = None
    for psa in (m(p) for p in lst(m(ctx.status.get("admission")).get("podSetAssignments"))):
        flavors = [v for v in m(psa.get("flavors")).values() if isinstance(v, str)]
        first = first or (s(psa.get("name")), next(iter(flavors), None))
        hit = next((f for f in flavors if f in wanted), None)
        if hit is not None:
            return s(psa.get("name")), hit, True
    pod_set, flavor = first or (None, None)
    return pod_set, flavor, False


def _controller(ctx: Context, check: Mapping[str, Any]) -> str | None:
    return controller_of(ctx, s(check.get("name")) or "")


def controller_of(ctx: Context, check_name: str) -> str | None:
    """The controllerName of the AdmissionCheck of that name, when it is in the input."""
    ac = ctx.state.admission_checks.get(check_name)
    return s(spec(ac).get("controllerName")) if ac else None


@rule(Phase.RESERVED, pairs(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.DELAYED_TOPOLOGY_REQUEST))
def delayed_topology_request(ctx: Context) -> Finding | None:
    delayed = [m(p) for p in lst(m(ctx.status.get("admission")).get("podSetAssignments"))
               if m(p).get("delayedTopologyRequest") == "Pending"]
    if not delayed:
        return None
    text = (f"Quota reserved in {ctx.cq_text}; the topology assignment of pod set "
            f"{s(delayed[0].get('name')) or 'main'} is delayed until a second scheduling pass (ProvisioningRequest + "
            "TAS).")
    failed, action = _second_pass_failures(ctx), ActionBy.NOBODY
    if failed is not None:
        count, first, last, said = failed
        span = f" over {format_duration(last - first)}" if first is not None and last is not None and last > first \
            else ""
        text += (f" That second pass failed {count} time(s){span} (Warning SecondPassFailed, last at "
                 f"{when_text(last)}): \"{said[:400]}\".")
        reserved = ctx.cond_time("QuotaReserved")
        if count >= 3 and last is not None and reserved is not None \
                and last - reserved > STALL_AFTER:
            action = ActionBy.CLUSTER_ADMIN
            text += (" It keeps failing: when the shortfall is quota this Workload itself holds, Kueue counts its own "
                     "reservation (kueue#9048). The cluster admin reads the ClusterQueue's usage (kubectl describe "
                     f"clusterqueue {ctx.cq_name}); evicting the Workload (spec.active false, then true) retries "
                     "from scratch.")
    else:
        checks = [m(c) for c in lst(ctx.status.get("admissionChecks"))]
        ready = [t for t in (parse_time(c.get("lastTransitionTime")) for c in checks if c.get("state") == "Ready")
                 if t is not None]
        if checks and len(ready) == len(checks) and ctx.after(max(ready), STALL_AFTER):
            action = ActionBy.CLUSTER_ADMIN
            fair = " (with fair sharing on, seen when its ClusterQueue also has a head waiting: kueue#14090)" \
                if quota.fair_sharing_on(ctx.state, ctx.cq) else ""
            text += (f" Its admission checks have been Ready for {format_duration(ctx.now - max(ready))} (the "
                     "newest), yet Kueue has run no second pass (no SecondPassFailed event either): it is stuck"
                     f"{fair}. The cluster admin reads the Kueue controller logs for this Workload; evicting it "
                     "(spec.active false, then true) retries from scratch.")
    return Finding(Reason.WAITING_FOR_ADMISSION_CHECKS, Cause.DELAYED_TOPOLOGY_REQUEST, text, action,
                   since=ctx.cond_time("QuotaReserved"), evidence=_evidence(ctx))


def _second_pass_failures(ctx: Context) -> tuple[int, datetime | None, datetime | None, str] | None:
    """(count, first, last, message) of Kueue's SecondPassFailed Warning events about the Workload, if any."""
    count, first, last, said = 0, None, None, ""
    for ev in ctx.state.events_about("Workload", ctx.ns, ctx.name):
        if s(ev.get("reason")) != "SecondPassFailed":
            continue
        count += event_count(ev)  # both Event APIs (Kueue writes events.k8s.io/v1: note, series)
        start, end = event_first_time(ev), event_time(ev)
        if start is not None and (first is None or start < first):
            first = start
        if end is not None and (last is None or end >= last):
            last, said = end, event_message(ev)
    return (count, first, last, said) if count else None


@rule(Phase.RESERVED, pairs(Reason.NOT_YET_EVALUATED, Cause.QUOTA_RESERVED_AWAITING_ADMISSION))
def reserved_awaiting_admission(ctx: Context) -> Finding | None:
    since = ctx.cond_time("QuotaReserved")
    text = (f"Quota reserved in {ctx.cq_text} since {when_text(since)}; Kueue has not marked it "
            "Admitted yet (normally seconds). If it stays, check the Kueue controller logs.")
    return Finding(Reason.NOT_YET_EVALUATED, Cause.QUOTA_RESERVED_AWAITING_ADMISSION, text, since=since,
                   evidence=_evidence(ctx))
