"""A whole Workload condition message or Workload event note: which template it is and the facts in it.

`parse_workload_message` reads the QuotaReserved, Evicted, Preempted, Requeued and Admitted condition
messages and the notes of the events Kueue posts about a Workload. Dispatch is cheap and table-driven:
an exact-text table (`_LITERALS`), the flavor-assignment shapes (handed to `flavors.py`), then anchored
regexes bucketed by their first word (`_RULES`: the words, the regex, the builder of the facts it yields).
Wrappers ("Previously: ", "The workload is deactivated due to ", "Evicted on manager: ") parse their inner
message, at most `_MAX_DEPTH` deep. Results are cached: Kueue repeats a few texts across thousands of
Workloads.

Neighbours: `templates.py` (Template, ParsedMessage), `flavors.py` (the reasons inside a flavor-assignment
message and the "Flavors considered" list of the QuotaReserved note), `events.py` (event-only views built
on this parser).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from ...kube.objects import TRUNCATION_SUFFIX
from .flavors import ASSIGNMENT_PREFIXES, parse_assignment, parse_attempts
from .templates import ParsedMessage, PreemptionInfo, Template, is_truncated

_MAX_DEPTH = 6  # nesting of "Previously: " / "deactivated due to" / "Evicted on manager: " wrappers

# =================================================================================================
# Exact texts: one dict look-up before any regex
# =================================================================================================

_LITERALS: dict[str, Template] = {
    # workload_controller.go
    "Workload is pending evaluation in the scheduling queue": Template.PENDING_EVALUATION,
    "AdmissionGatedBy cleared, waiting for quota reservation": Template.ADMISSION_GATE_CLEARED,
    "Admission gate cleared, workload is now admissible": Template.ADMISSION_GATE_CLEARED,  # event
    # statefulset_reconciler.go clearOnHold: scaled up from zero, requeued, not yet looked at again
    "Workload no longer on hold; waiting for quota reservation": Template.PENDING_EVALUATION,
    "Bypassed scheduling evaluation because an equivalent workload recently failed":
        Template.BYPASSED_EQUIVALENT,
    "The workload is deactivated": Template.DEACTIVATED,
    "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled":
        Template.DRA_FEATURE_DISABLED,
    "KueueDRAIntegration feature does not support use of resource claims":
        Template.DRA_RESOURCE_CLAIMS_UNSUPPORTED,
    "DRA resource claims not supported": Template.DRA_RESOURCE_CLAIMS_UNSUPPORTED,  # Requeued message
    "The ClusterQueue is stopped": Template.CLUSTER_QUEUE_STOPPED_EVICTION,
    "The LocalQueue is stopped": Template.LOCAL_QUEUE_STOPPED_EVICTION,
    "exceeding the maximum execution time": Template.MAXIMUM_EXECUTION_TIME_EXCEEDED,
    "exceeding the maximum number of re-queuing retries": Template.REQUEUING_LIMIT_EXCEEDED,
    "The workload backoff was finished": Template.BACKOFF_FINISHED,
    "The workload was reactivated": Template.REACTIVATED,
    "The ClusterQueue was restarted after being stopped": Template.CLUSTER_QUEUE_RESTARTED,
    "The LocalQueue was restarted after being stopped": Template.LOCAL_QUEUE_RESTARTED,
    # scheduler.go
    "The workload has failed admission checks": Template.FAILED_ADMISSION_CHECKS,
    "Workload has overlapping preemption targets with another workload":
        Template.OVERLAPPING_PREEMPTION_TARGETS,
    "Workload has overlapping preemption targets with another workload, but will fit after these preemptions "
    "complete": Template.OVERLAPPING_PREEMPTION_WILL_FIT,
    "Workload no longer fits after processing another workload": Template.NO_LONGER_FITS,
    "Workload requires preemption, but it's gated": Template.PREEMPTION_GATED,
    "waiting for all admitted workloads to be in PodsReady condition": Template.WAITING_FOR_PODS_READY,
    "A more favorable variant is already admitted": Template.MORE_FAVORABLE_VARIANT_ADMITTED,
    "Target flavor is below LastAcceptableFlavorName": Template.BELOW_LAST_ACCEPTABLE_FLAVOR,
    # concurrentadmission/controller.go
    "Admitted variant was evicted": Template.VARIANT_EVICTED,
    "No variant is running": Template.NO_VARIANT_RUNNING,
    # workload/admissionchecks.go (Admitted condition)
    "The workload is admitted": Template.ADMITTED,
    "The workload has no reservation": Template.NO_RESERVATION,
    "The workload has no reservation and not all checks ready": Template.NO_RESERVATION,
    "The workload has not all checks ready": Template.UNSATISFIED_CHECKS,
    "There are pending delayed topology requests": Template.PENDING_DELAYED_TOPOLOGY,
}

# =================================================================================================
# Builders: the facts a matched rule yields
# =================================================================================================

_Builder = Callable[[str, "re.Match[str]", int, bool], ParsedMessage]


def _names_builder(template: Template, details: str | None = None) -> _Builder:
    """A builder that copies every named group (except `details`) into `names`."""

    def build(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
        names = {k: v for k, v in m.groupdict().items() if v is not None and k != "details"}
        det = m.groupdict().get("details") if details is None else details
        return ParsedMessage(template, text, names=names, details=det, truncated=truncated)

    return build


def _b_pods_ready(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    names: dict[str, str] = {}
    key = m.group("workload")
    if key:
        names["workload"] = key
        ns, sep, nm = key.partition("/")
        if sep:
            names["namespace"], names["name"] = ns, nm
        else:
            names["name"] = key
    return ParsedMessage(Template.PODS_READY_TIMEOUT, text, names=names, truncated=truncated)


_CHECK_START_RX = re.compile(r'(?:\A|; )"(?P<name>[^"]*)"(?= \(|; "|\Z)')


def _parse_checks(s: str) -> tuple[tuple[str, str], ...]:
    """ "name" (message); "name2" (message2) -> (("name", "message"), ...) (buildAdmissionChecksMessage)."""
    starts = list(_CHECK_START_RX.finditer(s))
    out: list[tuple[str, str]] = []
    for i, st in enumerate(starts):
        seg = s[st.end(): starts[i + 1].start() if i + 1 < len(starts) else len(s)]
        seg = seg[2:-1] if seg.startswith(" (") and seg.endswith(")") else seg.strip()
        out.append((st.group("name"), seg))
    return tuple(out)


def _checks_builder(template: Template) -> _Builder:
    def build(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
        det = m.group("details")
        return ParsedMessage(template, text, names={"state": m.group("state")}, details=det,
                             checks=_parse_checks(det), truncated=truncated)

    return build


_CAUSE_BY_INNER: dict[Template, str] = {
    Template.MAXIMUM_EXECUTION_TIME_EXCEEDED: "MaximumExecutionTimeExceeded",
    Template.REQUEUING_LIMIT_EXCEEDED: "RequeuingLimitExceeded",
    Template.ADMISSION_CHECK_REJECTED: "AdmissionCheck",
    Template.EVICTED_ON_MANAGER: "EvictedOnManagerCluster",
}


def _wrapper_builder(template: Template) -> _Builder:
    def build(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
        rest = m.group("details")
        inner = _parse(rest, depth + 1, truncated) if depth < _MAX_DEPTH else None
        names: dict[str, str] = {}
        cause = _CAUSE_BY_INNER.get(inner.template) if inner is not None else None
        if template is Template.DEACTIVATED_DUE_TO and cause is not None:
            names["underlyingCause"] = cause
        return ParsedMessage(template, text, names=names, inner=inner, details=rest, truncated=truncated)

    return build


_PREEMPTION_REASONS: dict[str, str] = {
    # preemption.go HumanReadablePreemptionReasons
    "prioritization in the ClusterQueue": "InClusterQueue",
    "reclamation within the cohort": "InCohortReclamation",
    "Fair Sharing within the cohort": "InCohortFairSharing",
    "reclamation within the cohort while borrowing": "InCohortReclaimWhileBorrowing",
}
_PRIORITIES = (r"(?:; preemptor effective priority: (?P<p_eff>-?\d+) \(base: (?P<p_base>-?\d+), "
               r"boost: (?P<p_boost>-?\d+)\); preemptee effective priority: (?P<t_eff>-?\d+) "
               r"\(base: (?P<t_base>-?\d+), boost: (?P<t_boost>-?\d+)\))?")


def _unknown_none(v: str | None) -> str | None:
    return None if v is None or v == "UNKNOWN" else v


def _preemption_info(m: re.Match[str], preemptor_uid: str | None = None, preemptor_job_uid: str | None = None,
                     reason_phrase: str | None = None, reason: str | None = None,
                     preemptor_path: str | None = None, preemptee_path: str | None = None) -> PreemptionInfo:
    info = PreemptionInfo(preemptor_uid=preemptor_uid, preemptor_job_uid=preemptor_job_uid,
                          reason_phrase=reason_phrase, reason=reason, preemptor_path=preemptor_path,
                          preemptee_path=preemptee_path)
    if m.group("p_eff") is None:  # no priority suffix (condition messages): one look-up, not six
        return info
    return info._replace(
        preemptor_priority=_gint(m, "p_eff"), preemptor_base_priority=_gint(m, "p_base"),
        preemptor_boost=_gint(m, "p_boost"), preemptee_priority=_gint(m, "t_eff"),
        preemptee_base_priority=_gint(m, "t_base"), preemptee_boost=_gint(m, "t_boost"),
    )


def _gint(m: re.Match[str], name: str) -> int | None:
    v = m.group(name)
    try:
        return int(v) if isinstance(v, str) else None
    except ValueError:
        return None


def _b_preempted(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    phrase = m.group("phrase")
    origin = m.group("origin")
    reason: str | None
    if phrase is not None:
        reason = _PREEMPTION_REASONS.get(phrase)
    elif origin is not None:  # v0.7: "... (UID: %s) in the ClusterQueue|cohort"
        phrase = f"in the {origin}"
        reason = "InClusterQueue" if origin == "ClusterQueue" else "InCohortReclamation"
    else:  # <= v0.6: "Preempted to accommodate a higher priority Workload"
        phrase = "a higher priority Workload"
        reason = None
    info = _preemption_info(
        m, preemptor_uid=_unknown_none(m.group("uid")), preemptor_job_uid=_unknown_none(m.group("juid")),
        reason_phrase=_unknown_none(phrase), reason=reason, preemptor_path=_unknown_none(m.group("ppath")),
        preemptee_path=_unknown_none(m.group("epath")),
    )
    names: dict[str, str] = {}
    if info.preemptor_uid is not None:
        names["preemptorUID"] = info.preemptor_uid
    if info.preemptor_job_uid is not None:
        names["preemptorJobUID"] = info.preemptor_job_uid
    return ParsedMessage(Template.PREEMPTED, text, names=names, preemption=info, truncated=truncated)


def _b_preempted_workload(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    key = m.group("workload")
    ns, sep, nm = key.partition("/")
    names = {"workload": key, "name": nm if sep else key, "uid": m.group("uid"),
             "clusterQueue": m.group("clusterQueue")}
    if sep:
        names["namespace"] = ns
    info = _preemption_info(m)
    return ParsedMessage(Template.PREEMPTED_WORKLOAD, text, names=names, preemption=info, truncated=truncated)


def _b_quota_reserved(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    names = {"clusterQueue": m.group("clusterQueue")}
    if m.group("waitSeconds") is not None:
        names["waitSeconds"] = m.group("waitSeconds")
    fc = m.group("fc")
    considered = parse_attempts(fc, truncated) if fc is not None else ()
    return ParsedMessage(Template.QUOTA_RESERVED, text, names=names, details=fc,
                         flavors_considered=considered, truncated=truncated)


def _b_dra(text: str, m: re.Match[str], depth: int, truncated: bool) -> ParsedMessage:
    return ParsedMessage(Template.DRA_FIELD_ERRORS, text, details=text, truncated=truncated)


# =================================================================================================
# The rule table: (first words, anchored regex, builder), bucketed by the first word
# =================================================================================================

_LQ = r"LocalQueue (?P<localQueue>\S*) "  # the name may be empty: "LocalQueue  doesn't exist"
_CQ = r"ClusterQueue (?P<clusterQueue>\S*) "
_S = re.S
_W = Template  # shorter lines below

_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str], _Builder], ...] = (
    # workload_controller.go getQueueBlocker and the reconcile...QueueStopped/Terminating paths
    (("localqueue",), re.compile(_LQ + "doesn't exist"), _names_builder(_W.LOCAL_QUEUE_NOT_FOUND)),
    (("localqueue",), re.compile(_LQ + "is inactive"), _names_builder(_W.LOCAL_QUEUE_INACTIVE)),
    (("localqueue",), re.compile(_LQ + "is stopped"), _names_builder(_W.LOCAL_QUEUE_STOPPED)),
    (("localqueue",), re.compile(_LQ + "is terminating or missing"),
     _names_builder(_W.LOCAL_QUEUE_TERMINATING)),
    # "doesn't exist": workload controller; "not found": scheduler nominate
    (("clusterqueue",), re.compile(_CQ + "(?:doesn't exist|not found)"),
     _names_builder(_W.CLUSTER_QUEUE_NOT_FOUND)),
    (("clusterqueue",), re.compile(_CQ + "is inactive"), _names_builder(_W.CLUSTER_QUEUE_INACTIVE)),
    (("clusterqueue",), re.compile(_CQ + "is stopped"), _names_builder(_W.CLUSTER_QUEUE_STOPPED)),
    (("clusterqueue",), re.compile(_CQ + "is terminating or missing"),
     _names_builder(_W.CLUSTER_QUEUE_TERMINATING)),
    # workload/resources.go ValidateAdmissibility; "Workload ..." (capital W) up to v0.18.4
    (("workload",), re.compile(r"workload namespace doesn't match ClusterQueue selector", re.I),
     _names_builder(_W.NAMESPACE_NOT_SELECTED)),
    (("workload",),
     re.compile(r'workload namespace "(?P<namespace>[^"]*)" does not exist: (?P<details>.*)', _S),
     _names_builder(_W.NAMESPACE_MISSING)),
    (("could",), re.compile(r"Could not obtain workload namespace: (?P<details>.*)", _S),  # <= v0.18.4
     _names_builder(_W.NAMESPACE_MISSING)),
    (("invalid",), re.compile(r"invalid namespace selector: (?P<details>.*)", _S),
     _names_builder(_W.INVALID_NAMESPACE_SELECTOR)),
    (("resources",), re.compile(r"resources validation failed: (?P<details>.*)", _S),
     _names_builder(_W.RESOURCES_INVALID)),
    (("resources",), re.compile(r"resources didn't satisfy LimitRange constraints: (?P<details>.*)", _S),
     _names_builder(_W.LIMIT_RANGE)),
    # condition "Admission is gated by: %s"; event AdmissionGated "Workload admission is gated by: %s"
    (("admission", "workload"),
     re.compile(r"(?:Workload admission|Admission) is gated by: (?P<gatedBy>.*)", _S),
     _names_builder(_W.ADMISSION_GATED)),
    (("failed",), re.compile(r"Failed to admit workload: (?P<details>.*)", _S),
     _names_builder(_W.FAILED_TO_ADMIT)),
    # evictions; preemption.go preemptionMessage (+ the Preempted event's priority suffix) and older forms
    (("preempted",), re.compile(
        r"Preempted to accommodate (?:a higher priority Workload"
        r"|a workload \(UID: (?P<uid>[^,)]*)(?:, JobUID: (?P<juid>[^)]*))?\) "
        r"(?:in the (?P<origin>ClusterQueue|cohort)"
        r"|due to (?P<phrase>.*?)(?:; preemptor path: (?P<ppath>[^;]*); preemptee path: (?P<epath>[^;]*))?))"
        + _PRIORITIES, _S), _b_preempted),
    (("preempted",), re.compile(r"Preempted workload (?P<workload>\S+) \(UID: (?P<uid>[^)]*)\) "
                                r"in ClusterQueue (?P<clusterQueue>[^\s;]*)" + _PRIORITIES),
     _b_preempted_workload),
    (("exceeded",), re.compile(r"Exceeded the PodsReady timeout(?: (?P<workload>\S*))?"), _b_pods_ready),
    (("evicted",),
     re.compile(r"Evicted due to AdmissionChecks? in (?P<state>Retry) state: (?P<details>.*)", _S),
     _checks_builder(_W.ADMISSION_CHECK_EVICTION)),
    (("admissioncheck", "admissionchecks"),
     re.compile(r"AdmissionChecks? in (?P<state>Rejected) state: (?P<details>.*)", _S),
     _checks_builder(_W.ADMISSION_CHECK_REJECTED)),
    (("workload",), re.compile(r"(?:Workload was evicted as there was no replacement for unhealthy node\(s\)"
                               r"|Workload eviction triggered due to multiple TAS assigned node failures, "
                               r"including): (?P<nodes>.*)", _S), _names_builder(_W.NODE_FAILURES)),
    (("evicted",), re.compile(r"Evicted to accommodate a workload \(UID: (?P<preemptorUID>[^)]*)\) due to "
                              r"migration to more favorable resource flavor"),
     _names_builder(_W.FLAVOR_MIGRATION)),
    (("evicted",), re.compile(r"Evicted on manager: (?P<details>.*)", _S),
     _wrapper_builder(_W.EVICTED_ON_MANAGER)),
    # Evicted "The workload is deactivated due to %s"; event AdmissionCheckRejected "Deactivated due to %s"
    (("the", "deactivated"),
     re.compile(r"(?:The workload is deactivated|Deactivated) due to (?P<details>.*)", _S),
     _wrapper_builder(_W.DEACTIVATED_DUE_TO)),
    (("the",), re.compile(r"The maximum execution time \((?P<seconds>\d+)s\) exceeded"),
     _names_builder(_W.MAXIMUM_EXECUTION_TIME_EXCEEDED)),
    (("previously:",), re.compile(r"Previously: (?P<details>.*)", _S), _wrapper_builder(_W.PREVIOUSLY)),
    # admissionchecks/multikueue/workload.go reconcileGroup (v0.19, kueue#13047): the check message MultiKueue sets
    # with state Retry when a worker's Kueue finished its copy OutOfSync (updateACS appends the state it left), and
    # the note of the Warning MultiKueue event about it; inside an AdmissionCheck eviction message too
    (("remote",), re.compile(r'Remote workload on worker cluster "(?P<cluster>[^"]*)" is out of sync with its user '
                             r'job, resetting for re-dispatch(?:, Previously: "(?P<previous>[A-Za-z]*)")?'),
     _names_builder(_W.MULTIKUEUE_REMOTE_OUT_OF_SYNC)),
    (("replaced",), re.compile(r"Replaced to accommodate a workload \(UID: (?P<uid>[^,)]*), "
                               r"JobUID: (?P<jobUID>[^)]*)\) due to workload slice aggregation"),
     _names_builder(_W.WORKLOAD_SLICE_REPLACED)),
    # positive: condition "Quota reserved in ClusterQueue %s"; event adds wait time and Flavors considered
    (("quota",), re.compile(r"Quota reserved in ClusterQueue (?P<clusterQueue>[^\s,;]*)"
                            r"(?:, wait time since queued was (?P<waitSeconds>\d+)s)?"
                            r"(?:; Flavors considered: (?P<fc>.*))?", _S), _b_quota_reserved),
    # event Admitted "Admitted by ClusterQueue %s, wait time ..."; Job event "Admitted by clusterQueue %v"
    (("admitted",), re.compile(r"Admitted by (?:ClusterQueue|clusterQueue) (?P<clusterQueue>[^\s,;]*)"
                               r"(?:, wait time since reservation was (?P<waitSeconds>\d+)s)?"),
     _names_builder(_W.ADMITTED)),
)
_RULES_BY_WORD: dict[str, tuple[tuple[re.Pattern[str], _Builder], ...]] = {}
for _words, _rr, _bb in _RULES:
    for _w in _words:
        _RULES_BY_WORD[_w] = (*_RULES_BY_WORD.get(_w, ()), (_rr, _bb))

_DRA_FIELD_ERROR_RX = re.compile(r"\[?spec\.podSets\[\d+\]\.\S*: .*", re.S)


# =================================================================================================
# Dispatch
# =================================================================================================

def _parse(text: str, depth: int, truncated: bool) -> ParsedMessage:
    lit = _LITERALS.get(text)
    if lit is not None:
        return ParsedMessage(lit, text, truncated=truncated)
    body = text[:-len(TRUNCATION_SUFFIX)] if truncated and text.endswith(TRUNCATION_SUFFIX) else text
    if body.startswith(ASSIGNMENT_PREFIXES):
        return parse_assignment(text, body, truncated)
    sp = body.find(" ")
    word = (body[:sp] if sp >= 0 else body).lower()
    for rx, build in _RULES_BY_WORD.get(word, ()):
        m = rx.fullmatch(body)
        if m is not None:
            return build(text, m, depth, truncated)
    if body.startswith(("spec.podSets[", "[spec.podSets[")):
        dm = _DRA_FIELD_ERROR_RX.fullmatch(body)
        if dm is not None:
            return _b_dra(text, dm, depth, truncated)
    return ParsedMessage(Template.UNKNOWN, text, details=text or None, truncated=truncated)


def parse_workload_message(text: object) -> ParsedMessage:
    """Parse any QuotaReserved/Evicted/Preempted/Requeued/Admitted condition message or Workload event note.

    Never raises; a text that matches no known template gives `Template.UNKNOWN`.
    """
    if not isinstance(text, str):
        return ParsedMessage(Template.UNKNOWN, "")
    return _parse_cached(text)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> ParsedMessage:
    """Kueue repeats the same few messages across thousands of Workloads; results are immutable."""
    try:
        return _parse(text, 0, is_truncated(text))
    except Exception:  # defensive: a parser bug must never break a diagnosis pass
        return ParsedMessage(Template.UNKNOWN, text, details=text or None)
