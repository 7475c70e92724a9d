"""Diagnosis: objects in, AdmissionDiagnosis objects out. Pure: no I/O, the clock injected.

The operator, the CLI and the tests all call `diagnose` (or `kueue_doctor.diagnose_objects`), so the
three front doors always agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from ..api import (
    API_VERSION,
    KIND,
    LABEL_CLUSTER_QUEUE,
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REASON,
    LABEL_STAGE,
    MAX_EVIDENCE,
    MAX_HINTS,
    MAX_TEXT,
)
from ..kube import objects, quantity
from ..kube.allocation import cycle_collection_paused
from ..kube.objects import clip, format_time, lst, m, s
from ..state import ClusterState
from ..vocabulary import REASONS, ActionBy, Cause, Reason
from . import history, messages, pods
from .admission.eviction import last_eviction
from .admission.queues import deleting_note
from .admission.wording import kueue_wording
from .context import Context
from .no_workload import GRACE, pod_group_stand_ins, stand_in, stand_ins
from .pending_limit import limit_hint, pending_limit
from .registry import BY_PHASE
from .remedies import remedies
from .rules import Finding, Phase, Rule
from .scheduling.workload_pods import timeout_note

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def clear_parse_caches() -> None:
    """Empty every memo of message, Pod, time, quantity and label parsing, so that the next pass starts cold.

    The parsers memoise because Kueue and kube-scheduler repeat a few texts across thousands of objects;
    results are immutable, so the memos never need clearing for correctness. A benchmark round that
    measures a first pass (bench/engine.py) empties them here.
    """
    for cache in (messages._parse_cached, pods._parse_cached, objects._parse_time, objects.format_time,
                  objects._time_text, quantity._parse, quantity.format_quantity, quantity.readable, _label):
        cache.cache_clear()


def diagnose(state: ClusterState, now: datetime, keys: Iterable[tuple[str, str]] | None = None,
             grace: timedelta = GRACE, wakes: dict[tuple[str, str], datetime] | None = None,
             numbers: set[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """Diagnose the given Workloads (all by default), sorted by namespace and name, as seen at `now`.

    Owners Kueue should manage and has made no Workload for `grace` after their creation are diagnosed
    too, under the name Kueue would give their Workload (`no_workload.stand_in`); a key names either.
    `wakes`, when given, receives for each Workload whose verdict the clock alone may change the first time it
    may (`Context.after`): the operator diagnoses it again then. `numbers`, when given, receives each Workload whose
    diagnosis read a ClusterQueue's status numbers (`ClusterState.read_numbers`): only those can change when Kueue
    rewrites the numbers alone.
    """
    # a whole one-shot pass (explain, a dump) promotes what survives; a packed Workload is decoded once per pass
    with cycle_collection_paused(promote_survivors=keys is None), state.reading():
        if keys is None:
            targets = {**stand_ins(state, now, grace), **state.workloads}
        else:
            targets = {}
            groups: dict[tuple[str, str], dict[str, Any]] | None = None  # incomplete Pod groups, read once if asked
            for key in keys:
                wl = state.workloads.get(key)
                if wl is None:
                    owner = state.owner_for_workload_name(key)
                    wl = stand_in(state, owner, now, grace) if owner is not None else None
                if wl is None:
                    groups = pod_group_stand_ins(state, now, grace) if groups is None else groups
                    wl = groups.get(key)
                if wl is not None:
                    targets[key] = wl
        return [diagnose_workload(targets[k], state, now, wakes, numbers) for k in sorted(targets)]


def diagnose_workload(workload: Mapping[str, Any], state: ClusterState, now: datetime,
                      wakes: dict[tuple[str, str], datetime] | None = None,
                      numbers: set[tuple[str, str]] | None = None) -> dict[str, Any]:
    read = state.numbers_read
    ctx = Context(workload, state, now)
    finding = decide(ctx)[1]
    try:
        out = render(ctx, finding)
    except Exception as exc:  # a bug in rendering costs this verdict, never the pass
        out = render(ctx, _failed(ctx, exc), sections=False)
    if wakes is not None and ctx.wake_at is not None:
        wakes[(ctx.ns, ctx.name)] = ctx.wake_at
    if numbers is not None and state.numbers_read != read:
        numbers.add((ctx.ns, ctx.name))
    return out


def _failed(ctx: Context, exc: Exception) -> Finding:
    return Finding(Reason.UNKNOWN, Cause.DIAGNOSIS_FAILED,
                   f"kueue-doctor failed to diagnose this Workload ({type(exc).__name__}: {exc}); the "
                   "evidence shows its conditions. Please report this with the Workload's YAML.",
                   evidence=[ctx.condition_evidence(c) for c in list(ctx.conds)[:MAX_EVIDENCE]])


def phase_of(ctx: Context) -> Phase:
    """Where the Workload is in Kueue's life cycle, decided once so that no rule re-checks it."""
    if ctx.stand_in:
        return Phase.NO_WORKLOAD
    if ctx.true("Finished") or ctx.spec.get("active", True) is False:
        return Phase.TERMINAL
    if ctx.true("QuotaReserved"):
        return Phase.ADMITTED if ctx.true("Admitted") and not ctx.true("Evicted") else Phase.RESERVED
    return Phase.PENDING


def _malformed(ctx: Context) -> str | None:
    """What makes the Workload unreadable (the rules would take it for one Kueue has not looked at); None when
    its shape is Kueue's. Plain-type checks first: an ABC check is a Python call, once per Workload."""
    if not ctx.uid:
        return "has no metadata.uid"
    raw_spec = ctx.wl.get("spec")
    if type(raw_spec) is not dict and not isinstance(raw_spec, Mapping):
        return "has no spec"
    pod_sets = raw_spec.get("podSets")
    if pod_sets is not None and type(pod_sets) is not list:
        return f"has spec.podSets as a {type(pod_sets).__name__}, not a list"
    raw_status = ctx.wl.get("status")
    if raw_status is None:
        return None
    if type(raw_status) is not dict and not isinstance(raw_status, Mapping):
        return f"has status as a {type(raw_status).__name__}, not an object"
    conds = raw_status.get("conditions")
    if conds is None:
        return None
    if type(conds) is not list:
        return f"has status.conditions as a {type(conds).__name__}, not a list"
    for i, cond in enumerate(conds):
        if type(cond) is not dict and not isinstance(cond, Mapping):
            return f"has status.conditions[{i}] as a {type(cond).__name__}, not a condition"
    return None


_HOLDS_QUOTA = frozenset({Phase.ADMITTED, Phase.RESERVED})


def decide(ctx: Context) -> tuple[Rule | None, Finding]:
    """The first rule of the Workload's phase that answers, and its finding (no rule: Unknown)."""
    broken = None if ctx.stand_in else _malformed(ctx)
    if broken is not None:
        return None, Finding(Reason.UNKNOWN, Cause.MALFORMED_WORKLOAD,
                             f"The Workload object {broken}, which no apiserver serves; kueue-doctor cannot diagnose "
                             "it. Is the input a complete, unedited `kubectl get workloads -o yaml` dump?")
    try:
        phase = phase_of(ctx)
        for rule in BY_PHASE[phase]:
            found = rule.check(ctx)
            if found is not None:
                if phase in _HOLDS_QUOTA and ctx.cq is not None and m(ctx.cq.get("metadata")).get("deletionTimestamp"):
                    found.message += deleting_note(ctx)  # whatever holds it up, its queue is going (kueue#13676)
                return rule, found
    except Exception as exc:  # a rule bug must cost one verdict, never the pass
        return None, _failed(ctx, exc)
    return None, Finding(Reason.UNKNOWN, Cause.UNRECOGNIZED_MESSAGE,
                         "kueue-doctor cannot classify this Workload's state; read status.evidence.",
                         evidence=[ctx.condition_evidence(c) for c in list(ctx.conds)[:MAX_EVIDENCE]])


@lru_cache(maxsize=4096)
def _label(value: str | None) -> str | None:
    if not value or len(value) > 63:
        return None
    # most values (owner names are unique per Workload, so the memo rarely hits) pass this C-speed check,
    # which accepts only what the regex accepts; the regex decides the rest
    if value.isascii() and value[0].isalnum() and value[-1].isalnum() and not value.strip(_LABEL_CHARS):
        return value
    return value if _LABEL_VALUE.match(value) else None


_LABEL_CHARS = "-_.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


_STAGE_OF = {reason: info.stage.value for reason, info in REASONS.items()}  # render reads it per Workload
# the plain values of the words, read per Workload (an enum's `.value` is a Python-level descriptor call)
_VALUE: dict[Reason | Cause | ActionBy, str] = {w: w.value for e in (Reason, Cause, ActionBy) for w in e}


def render(ctx: Context, f: Finding, sections: bool = True) -> dict[str, Any]:
    """The complete AdmissionDiagnosis object, exactly as the operator writes it (`sections=False`: without
    what is read from the Workload beyond the finding, for the verdict of a failed diagnosis)."""
    stage = _STAGE_OF[f.reason]
    ref = ctx.owner_ref
    # the owner reference's fields, each read once (the labels, ownerReferences and spec.ownerRef use them)
    ref_kind, ref_name, ref_uid = (s(ref.get("kind")), s(ref.get("name")), s(ref.get("uid"))) if ref is not None \
        else (None, None, None)
    # the labels in their fixed order, each only when it is a valid label value (`_label` gives None or the value)
    labels = {LABEL_STAGE: stage}
    if (value := _label(_VALUE[f.reason])) is not None:
        labels[LABEL_REASON] = value
    if (value := _label(ctx.cq_name)) is not None:
        labels[LABEL_CLUSTER_QUEUE] = value
    if ref:
        if (value := _label(ref_kind)) is not None:
            labels[LABEL_OWNER_KIND] = value
        if (value := _label(ref_name)) is not None:
            labels[LABEL_OWNER_NAME] = value
    wl_api = s(ctx.wl.get("apiVersion")) or "kueue.x-k8s.io/v1beta2"
    metadata: dict[str, Any] = {"name": ctx.name, "namespace": ctx.ns, "labels": labels}
    spec: dict[str, Any] = {}
    if ctx.stand_in:  # no Workload yet: owned by the owner, so it goes with it; workloadRef comes with the Workload
        if ref is not None and ref_uid:
            metadata["ownerReferences"] = [{"apiVersion": s(ref.get("apiVersion")) or "", "kind": ref.get("kind"),
                                            "name": ref.get("name"), "uid": ref.get("uid")}]
    else:
        if ctx.uid:
            metadata["ownerReferences"] = [{"apiVersion": wl_api, "kind": "Workload", "name": ctx.name,
                                            "uid": ctx.uid}]
        spec["workloadRef"] = {"apiVersion": wl_api, "kind": "Workload", "name": ctx.name, "uid": ctx.uid}
    if ref is not None and ref_kind and ref_name:
        spec["ownerRef"] = {"apiVersion": s(ref.get("apiVersion")) or "", "kind": ref_kind, "name": ref_name}
        if ref_uid is not None:
            spec["ownerRef"]["uid"] = ref_uid
    status: dict[str, Any] = {"stage": stage, "reason": _VALUE[f.reason]}
    if f.cause is not None:
        status["cause"] = _VALUE[f.cause]
    status["actionBy"] = _VALUE[f.actor]
    wording = kueue_wording(ctx, f)  # the sentence survives clipping: it tells which reason Kueue wrote
    budget = MAX_TEXT - len(wording)
    status["message"] = (clip(_fitted(ctx, f, budget), budget) or "") + wording
    if (value := format_time(f.since or ctx.created)) is not None:
        status["since"] = value
    if (value := ctx.cq_name) is not None:
        status["clusterQueue"] = value
    if (value := ctx.lq_name) is not None:
        status["localQueue"] = value
    if (value := ctx.cohort) is not None:
        status["cohort"] = value
    if f.flavors:
        status["flavors"] = f.flavors
    if f.quota:
        status["quota"] = f.quota
    checks = _admission_checks(ctx) if sections else []
    if checks:
        status["admissionChecks"] = checks
    if f.pods is not None:
        status["pods"] = f.pods
    if f.blocked_by:
        status["blockedBy"] = f.blocked_by
    blocker = f.blocker or (_check_blocker(ctx) if f.reason == Reason.WAITING_FOR_ADMISSION_CHECKS else None)
    if blocker:
        status["blocker"] = blocker
        if "flavors" not in status and blocker.get("flavor"):
            status["flavors"] = [blocker["flavor"]]
    if f.node_matches:
        status["nodeMatches"] = f.node_matches
    if sections and (f.quota or f.blocker):
        ways_out = remedies(ctx, f)
        if ways_out:
            status["remedies"] = ways_out
    hints = list(f.hints)
    if stage != "Finished" and sections:
        eviction = last_eviction(ctx)
        if eviction:
            status["lastEviction"] = eviction
        if stage != "Running":
            limit = pending_limit(ctx, eviction)
            if limit is not None:
                status["pendingLimit"] = limit
                passed = limit_hint(limit, ctx.now)
                if passed:
                    hints.insert(0, passed)
    if f.evidence:
        status["evidence"] = _dedupe(f.evidence)[:MAX_EVIDENCE]
    if hints:
        status["hints"] = list(dict.fromkeys(hints))[:MAX_HINTS]
    if sections:
        status["history"] = history.rebuild(ctx, status)
        if stage == "Finished" or len(status["message"]) > MAX_TEXT:  # else a no-op: no post-mortem, clipped
            history.conclude(status)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def _check_blocker(ctx: Context) -> dict[str, Any] | None:
    """Quota reserved, checks (a ProvisioningRequest) or a delayed topology pending: the flavor it holds."""
    for psa in lst(m(ctx.status.get("admission")).get("podSetAssignments")):
        psa = m(psa)
        flavor = next((v for v in m(psa.get("flavors")).values() if isinstance(v, str)), None)
        if psa.get("delayedTopologyRequest") == "Pending":
            return {k: v for k, v in {"kind": "Topology", "flavor": flavor, "podSet": s(psa.get("name")),
                                      "source": "Kueue"}.items() if v}
        check = next((m(c) for c in lst(ctx.status.get("admissionChecks")) if m(c).get("state") != "Ready"), None)
        if check is not None:
            return {k: v for k, v in {"kind": "AdmissionCheck", "name": s(check.get("name")), "flavor": flavor,
                                      "podSet": s(psa.get("name")), "source": "Kueue"}.items() if v}
    return None


def _admission_checks(ctx: Context) -> list[dict[str, Any]]:
    out = []
    for c in lst(ctx.status.get("admissionChecks")):
        c = m(c)
        cname = s(c.get("name"))
        if not cname:
            continue
        ac = ctx.state.admission_checks.get(cname)
        entry: dict[str, Any] = {"name": cname, "state": s(c.get("state")) or "Pending"}
        if s(c.get("message")):
            entry["message"] = clip(c.get("message"), 512)
        if s(c.get("lastTransitionTime")):
            entry["lastTransitionTime"] = c.get("lastTransitionTime")
        if ac is not None:
            controller = s(m(ac.get("spec")).get("controllerName"))
            if controller:
                entry["controllerName"] = controller
            active = next((x for x in lst(m(ac.get("status")).get("conditions"))
                           if m(x).get("type") == "Active"), None)
            if active is not None:
                entry["active"] = m(active).get("status") == "True"
        out.append(entry)
    return out


def _dedupe(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(items) < 2:  # the common case: nothing to compare
        return list(items)
    seen: set[tuple[Any, ...]] = set()
    out = []
    for item in items:
        key = (item.get("kind"), item.get("name"), item.get("field"))
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _fitted(ctx: Context, f: Finding, budget: int) -> str:
    """A message over the status' budget loses its notes (`Finding.notes`), then the note of when the Pods' wait
    ends by itself (waitForPodsReady's eviction, the maximum execution time, an owner's own reset), which the
    scheduling rules append: clipped instead, the message was cut mid-sentence at its end, where what to do is."""
    message = f.message
    wait_ends = timeout_note(ctx) if len(message) > budget else ""
    for note in (*f.notes, *(() if wait_ends in f.notes else (wait_ends,))):
        if len(message) <= budget:
            break
        if note and note in message:
            message = message.replace(note, "", 1)
    return message
