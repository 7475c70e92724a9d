"""The verdicts a Workload went through (`status.history`), and where the time went once it finished.

Two sources, one shape. The operator saw each verdict change and keeps the list in the object
(`carry`, called by the publisher when it writes); offline, and the first time a Workload is seen, the
list is rebuilt from the timestamps Kueue leaves on the Workload (`rebuild`): creation, QuotaReserved,
Admitted, Evicted, PodsReady, Finished, and the Pods' start times where PodsReady's no longer tells it. Kueue
keeps only the latest transition of each condition, so a rebuilt list is coarser (the reason of a past wait is
often not told) and each of its entries says `rebuilt: true`. Bounded: at most MAX_ENTRIES entries and
MAX_BYTES of JSON; older entries fold into a total per reason (`historyFolded`). Pure: no I/O, the time comes in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any

from ..api import MAX_TEXT
from ..kube.objects import clip, format_duration, format_time, lst, m, meta, parse_time, s, time_text
from ..vocabulary import Cause, Reason, Stage
from . import pods as podlib
from .context import Context

MAX_ENTRIES = 20
MAX_BYTES = 4096
SETTLING = 60  # seconds: a rebuilt wait this short before a verdict of the same stage is Kueue's first look

Entry = dict[str, Any]


# (time, the text it was read from, stage, reason, cause)
Point = tuple[datetime, Any, str, str | None, str | None]
# PodsReady reasons Kueue writes only once PodsReady was True (jobframework generatePodsReadyCondition, v0.19.2):
# a Pod failed since (WaitForRecovery), and for Recovered they are all ready again
_AFTER_READY = ("WaitForRecovery", "Recovered")
POD_START = "PodsRunning"  # the cause of a Running entry rebuilt from the Pods' start times, not from PodsReady


def rebuild(ctx: Context, status: Mapping[str, Any]) -> list[Entry]:
    """The history as far as Kueue's own timestamps tell it, ending with the current verdict."""
    # asked for every Workload of every pass: the conditions are read once, each time only if its status counts
    since_text = status.get("since")
    since = parse_time(since_text)
    conds = ctx.conds
    # `Point`s: an entry writes the text as `time_text` gives it, which is `format_time` of the time without
    # formatting one (Kueue's timestamps are already in that form)
    points: list[Point] = []
    if ctx.created is not None:
        points.append((ctx.created, meta(ctx.wl)["creationTimestamp"], "Admission", None, None))
    qr, adm = conds.get("QuotaReserved"), conds.get("Admitted")
    admitted_text = adm.get("lastTransitionTime") if adm else None
    admitted = parse_time(admitted_text)
    if qr and qr.get("status") == "True" and (reserved := parse_time(text := qr.get("lastTransitionTime"))) \
            is not None and (admitted is None or admitted > reserved):
        points.append((reserved, text, "Admission", "WaitingForAdmissionChecks", None))
    ready = conds.get("PodsReady")
    if adm and adm.get("status") == "True" and admitted is not None:
        if ready is None or ready.get("reason") in _AFTER_READY:  # the PodsReady time is not when they started
            _pods_ran(ctx, status, admitted, admitted_text, ready, points)
        else:
            points.append((admitted, admitted_text, "Scheduling", None, None))
            if ready.get("status") != "True" and status.get("stage") == "Finished":
                # finished without its Pods ever all ready (one ran and failed before the others were, a readiness
                # probe that never passed): what ran did run, from its start; not a wait for Pods to start
                started = podlib.first_start(ctx.pods, admitted, parse_time(status.get("since")))
                if started is not None:
                    points.append((started, format_time(started), "Running", "Running", POD_START))
    if ready and ready.get("status") == "True" and (at := parse_time(text := ready.get("lastTransitionTime"))) \
            is not None:
        points.append((at, text, "Running", "Running", None))
    ev = conds.get("Evicted")
    if ev and ev.get("status") == "True" and (at := parse_time(text := ev.get("lastTransitionTime"))) is not None:
        points.append((at, text, "Admission", "Preempted" if ev.get("reason") == "Preempted" else "Evicted", None))
    if len(points) > 1:
        points.sort(key=itemgetter(0))  # by time only, stable: the order above breaks ties
        if points[0][3] is None and any(point[3] in ("Preempted", "Evicted") for point in points[1:]):
            points[0] = (*points[0][:2], "Unknown", None, None)  # it ran before the eviction; Kueue no longer says when
    entries: list[Entry] = []
    for at, text, stage, reason, cause in points:
        if since is not None and at >= since:
            break
        if entries and entries[-1]["stage"] == stage and entries[-1].get("reason") == reason:
            continue
        when = time_text(text)
        _close(entries, when)
        # `_entry(stage, reason, cause, when, rebuilt=True)`, inline: a time is never None
        entries.append({"stage": stage, "since": when, "rebuilt": True} if reason is None else
                       {"stage": stage, "reason": reason, "since": when, "rebuilt": True} if cause is None else
                       {"stage": stage, "reason": reason, "cause": cause, "since": when, "rebuilt": True})
    _close(entries, since_text)
    current = _current(status)
    if entries:
        last = entries[-1]
        if last.get("reason") is None and last["stage"] == status.get("stage") and since is not None \
                and (start := parse_time(last.get("since"))) is not None \
                and (since - start).total_seconds() < SETTLING:
            # Kueue's first look, seconds after creation: the verdict that followed it starts there, so the
            # history covers the Workload's whole life whenever it is first seen
            current["since"] = entries.pop()["since"]
    entries.append(current)
    if len(entries) <= _FITS_ANYWAY:
        return entries
    return _bounded(entries, [])[0]


def _pods_ran(ctx: Context, status: Mapping[str, Any], admitted: datetime, admitted_text: Any,
              ready: Mapping[str, Any] | None, points: list[Point]) -> None:
    """Admitted, where PodsReady's time does not say when the Pods started: WaitForRecovery or Recovered (they
    were ready before, Kueue kept only the later change), or no PodsReady (Kueue without waitForPodsReady). The
    Pods' own start times say it. Without them the time from the admission is Unknown, not a wait for Pods to
    start, where the wait cannot be told from the run: the Pods ran in it (PodsReady's history), or it finished
    (except FailedToStart: its Pods never started)."""
    ready_at = parse_time(ready.get("lastTransitionTime")) if ready is not None else None
    started = podlib.first_start(ctx.pods, admitted, ready_at if ready is not None else parse_time(status.get("since")))
    ran = ready is not None or (status.get("stage") == "Finished" and status.get("cause") != "FailedToStart")
    points.append((admitted, admitted_text, "Unknown" if started is None and ran else "Scheduling", None, None))
    if started is not None:
        points.append((started, format_time(started), "Running", "Running", POD_START))
    if ready is not None and ready.get("status") == "False" and ready.get("reason") == "WaitForRecovery" \
            and ready_at is not None:  # "At least one pod has failed, waiting for recovery"
        points.append((ready_at, ready.get("lastTransitionTime"), "Scheduling", "ContainersNotStarting", "PodsFailed"))


def _close(entries: list[Entry], until: str | None) -> None:
    """End the last rebuilt entry; one that took no time (two timestamps in the same second) is dropped."""
    if entries:
        if entries[-1].get("since") == until:
            entries.pop()
        else:
            entries[-1]["until"] = until


def carry(previous: Sequence[Mapping[str, Any]], folded: Sequence[Mapping[str, Any]],
          status: dict[str, Any]) -> None:
    """Continue the kept history with this verdict: the same reason updates the open entry, a new one
    closes it at the new `since` and opens another. Sets status.history (and historyFolded)."""
    entries = [dict(e) for e in previous]
    current = entries[-1] if entries else None
    if current is not None and current.get("until") is None and current.get("reason") == status.get("reason"):
        began = current.get("since")  # the entry began when the reason did (a rebuilt start may precede `since`)
        current.update(_current(status))
        current["since"] = began or status.get("since")
    else:
        if current is not None and current.get("until") is None:
            current["until"] = status.get("since")
        entries.append(_current(status))
    kept, totals = _bounded(entries, [dict(t) for t in folded])
    status["history"] = kept
    if totals:
        status["historyFolded"] = totals
    else:
        status.pop("historyFolded", None)


def conclude(status: dict[str, Any]) -> None:
    """A Finished Workload's message says where the time went (status.postMortem), from its history."""
    old = s(status.get("postMortem"))
    message = s(status.get("message")) or ""
    for sep in (". ", " "):
        if old and message.endswith(sep + old):
            message = message[: -len(old) - len(sep)]
            break
    status.pop("postMortem", None)
    if status.get("stage") == "Finished":
        text = post_mortem(lst(status.get("history")), lst(status.get("historyFolded")), s(status.get("clusterQueue")))
        if text:
            status["postMortem"] = text
            message = f"{message}{' ' if message.endswith('.') else '. '}{text}"
    status["message"] = clip(message, MAX_TEXT) or ""


def post_mortem(history: Sequence[Any], folded: Sequence[Any], cluster_queue: str | None) -> str | None:
    """'Where the time went: waited 2h40m for quota in ClusterQueue x, 22m for admission checks; ran 72m, then 5m
    with failed Pods.'"""
    spent: dict[tuple[str, str | None], float] = {}
    failing: float | None = None  # with failed Pods: after they started, no wait for them to start
    admitted: float | None = None  # rebuilt from the admission on: when its Pods started, the input does not say
    rebuilt = from_pods = False
    for total in folded:
        total = m(total)
        key = (s(total.get("stage")) or "Unknown", s(total.get("reason")))
        spent[key] = spent.get(key, 0.0) + float(total.get("seconds") or 0)
    for n, entry in enumerate(history):
        entry = m(entry)
        start, end = parse_time(entry.get("since")), parse_time(entry.get("until"))
        stage = s(entry.get("stage")) or "Unknown"
        if stage == "Finished" or start is None or end is None:
            continue
        rebuilt = rebuilt or bool(entry.get("rebuilt"))
        if entry.get("rebuilt") and entry.get("cause") == POD_START:
            from_pods = True
        reason = s(entry.get("reason"))
        seconds = max(0.0, (end - start).total_seconds())
        if reason == "ContainersNotStarting" and entry.get("cause") in _FAILING:
            failing = (failing or 0.0) + seconds
        elif stage == "Unknown" and reason is None and not _before_admission(history, n):
            admitted = (admitted or 0.0) + seconds
        else:
            spent[(stage, reason)] = spent.get((stage, reason), 0.0) + seconds
    waits = [_phrase(stage, reason, seconds, cluster_queue) for (stage, reason), seconds in spent.items()
             if stage != "Running"]
    ran = sum(seconds for (stage, _), seconds in spent.items() if stage == "Running")
    parts = []
    if waits:
        parts.append("waited " + ", ".join(waits))
    if admitted is not None:
        parts.append(f"{format_duration(int(admitted), precise=True)} admitted (when its Pods started is not in the "
                     "input)")
    running = []
    if any(stage == "Running" for stage, _ in spent):
        at_least = "at least " if admitted is not None else ""  # the admitted time holds some of the run
        running.append(f"ran {at_least}{format_duration(int(ran), precise=True)}")
    if failing is not None:
        running.append(f"{format_duration(int(failing), precise=True)} with failed Pods")
    if running:
        parts.append(", then ".join(running))
    if not parts:
        return None
    source = ""
    if rebuilt:
        pods_too = "the Pods' start times and " if from_pods else ""
        source = f" (rebuilt from {pods_too}Kueue's timestamps, which keep only each condition's latest change)"
    return f"Where the time went{source}: " + "; ".join(parts) + "."


# ContainersNotStarting causes that mean Pods failed (ran and ended, or crash-loop), not that they wait to start
_FAILING = frozenset({"PodsFailed", "OOMKilled", "CrashLoopBackOff"})


def _before_admission(history: Sequence[Any], n: int) -> bool:
    """A rebuilt Unknown entry that ends at an eviction (an Admission entry follows): it ran before it, or still
    waited; Kueue no longer says. Otherwise it began at the admission."""
    return n + 1 < len(history) and m(history[n + 1]).get("stage") == "Admission"


_WAITS = {
    "NotYetEvaluated": "for Kueue's first look",
    "WaitingForQuota": "for quota",
    "WaitingForPreemption": "for preemption to free quota",
    "WaitingForAdmissionChecks": "for admission checks",
    "PodsNotCreated": "for the owner to create Pods",
    "PodsUnschedulable": "for kube-scheduler to place Pods",
    "ContainersNotStarting": "for containers to start",
    "PodsNotReady": "for Pods to become ready",
    "JobSuspended": "for the owner to unsuspend",
}
_STAGE_WAITS = {"Admission": "for admission", "Scheduling": "for Pods to start", "Unknown": "admitted or waiting"}


def _phrase(stage: str, reason: str | None, seconds: float, cluster_queue: str | None) -> str:
    what = _WAITS.get(reason or "") or (f"in {reason}" if reason else _STAGE_WAITS.get(stage, f"in {stage}"))
    where = f" in ClusterQueue {cluster_queue}" if stage == "Admission" and cluster_queue else ""
    return f"{format_duration(int(seconds), precise=True)} {what}{where}"


def _current(status: Mapping[str, Any]) -> Entry:
    """`_entry` of the verdict in `status`, read inline (once per Workload of every pass)."""
    stage, reason, cause, since = status.get("stage"), status.get("reason"), status.get("cause"), status.get("since")
    entry: Entry = {"stage": stage if type(stage) is str and stage else "Unknown"}
    if type(reason) is str and reason:
        entry["reason"] = reason
    if type(cause) is str and cause:
        entry["cause"] = cause
    if type(since) is str and since:
        entry["since"] = since
    return entry


def _entry(stage: str, reason: str | None, cause: str | None, since: str | None, rebuilt: bool = False) -> Entry:
    entry: Entry = {"stage": stage}  # one per verdict of every Workload of every pass: the keys set inline
    if reason is not None:
        entry["reason"] = reason
    if cause is not None:
        entry["cause"] = cause
    if since is not None:
        entry["since"] = since
    if rebuilt:
        entry["rebuilt"] = True
    return entry


def _over_bytes(entries: list[Entry]) -> bool:
    """More than MAX_BYTES of JSON. A bound first, without encoding: every short history passes it (each pass
    asks for every Workload), a long or odd one (a hand-edited entry) is measured."""
    bound = 2
    for entry in entries:
        for key, value in entry.items():
            # key and quotes, `": "`, `, `; json.dumps escapes an ASCII character to at most 6 bytes (\u001f),
            # any other to at most 12 (a surrogate pair); `true` is 4
            if type(value) is str:
                bound += len(key) + 8 + (6 if value.isascii() else 12) * len(value)
            else:
                bound += len(key) + 8 + (4 if value is True else 64)
    return bound > MAX_BYTES and len(json.dumps(entries)) > MAX_BYTES


# The most JSON one rebuilt entry can take by `_over_bytes`' bound: its values are vocabulary words and RFC 3339
# times (20 characters), so this many entries never need the check.
_WORST_ENTRY = sum(len(key) + 8 + 6 * width for key, width in (
    ("stage", max(len(x.value) for x in Stage)), ("reason", max(len(x.value) for x in Reason)),
    ("cause", max(len(x.value) for x in Cause)), ("since", 20), ("until", 20))) + len("rebuilt") + 8 + 4
_FITS_ANYWAY = min(MAX_ENTRIES, (MAX_BYTES - 2) // _WORST_ENTRY)


def _bounded(entries: list[Entry], folded: list[Entry]) -> tuple[list[Entry], list[Entry]]:
    """At most MAX_ENTRIES entries and MAX_BYTES of JSON: the oldest fold into a total per reason."""
    while len(entries) > 1 and (len(entries) > MAX_ENTRIES or _over_bytes(entries)):
        old = entries.pop(0)
        start, end = parse_time(old.get("since")), parse_time(old.get("until"))
        seconds = int((end - start).total_seconds()) if start is not None and end is not None else 0
        key = (old.get("stage"), old.get("reason"))
        total = next((t for t in folded if (t.get("stage"), t.get("reason")) == key), None)
        if total is None:
            total = {k: v for k, v in (("stage", old.get("stage")), ("reason", old.get("reason"))) if v is not None}
            total.update(entries=0, seconds=0)
            folded.append(total)
        total["entries"] += 1
        total["seconds"] += max(0, seconds)
    return entries, folded
