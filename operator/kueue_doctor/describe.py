"""`kueue-doctor describe`: one diagnosis top to bottom, as `kubectl describe` prints an object.

The order is the order an SRE reads it in: the verdict (where, why, who, since when), the numbers, the Pods,
the ways out, the pending limit, the facts it rests on, then the Warning events of the Workload, its owner and
its Pods. Sections without content say `<none>`, as kubectl does, so a missing section is never a surprise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .kube.objects import format_duration, parse_time
from .state import ClusterState

INDENT = "  "


def _age(now: datetime, when: Any) -> str:
    t = parse_time(when if isinstance(when, str) else None)
    return format_duration(now - t, precise=True) if t is not None else "<unknown>"


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """kubectl describe's sub-tables: a header, a dashed rule, aligned columns (the last one free)."""
    cells = [[_one_line(c) if c not in (None, "") else "-" for c in row] for row in rows]
    if not cells:
        return [f"{INDENT}<none>"]
    grid = [list(head), ["-" * len(h) for h in head], *cells]
    widths = [max(len(r[c]) for r in grid) for c in range(len(head) - 1)]
    return [INDENT + "  ".join([*(r[c].ljust(widths[c]) for c in range(len(widths))), r[-1]]).rstrip()
            for r in grid]


def _fields(pairs: Sequence[tuple[str, Any]], indent: str = "") -> list[str]:
    """`Key: value` lines; a value's line breaks (a quoted webhook error) shown as ⏎, one field per line."""
    width = max(len(k) for k, _ in pairs) + 2
    return [f"{indent}{(k + ':').ljust(width)}{_one_line(v) if v not in (None, '') else '<none>'}"
            for k, v in pairs]


def _one_line(value: Any) -> str:
    return " ⏎ ".join(str(value).splitlines())


def _section(title: str, lines: list[str]) -> list[str]:
    return [f"{title}:", *(lines or [f"{INDENT}<none>"])]


def _quota(st: Mapping[str, Any]) -> list[str]:
    head = ["FLAVOR", "RESOURCE", "REQUESTED", "NOMINAL", "BORROWING LIMIT", "USED", "BORROWABLE", "MAXIMUM",
            "MISSING", "SOURCE"]
    return _table(head, ([q.get("flavor"), q.get("resource"), q.get("requested"), q.get("nominal"),
                          q.get("borrowingLimit"), q.get("used"), q.get("borrowable"), q.get("maximum"),
                          q.get("missing"), q.get("source")] for q in st.get("quota") or []))


def _pods(st: Mapping[str, Any]) -> list[str]:
    pods = st.get("pods")
    if not pods:
        return []
    lines = _fields([("Summary", pods.get("summary")),
                     ("Counts", f"{pods.get('expected', 0)} expected, {pods.get('created', 0)} created, "
                                f"{pods.get('scheduled', 0)} scheduled, {pods.get('running', 0)} running, "
                                f"{pods.get('ready', 0)} ready, {pods.get('succeeded', 0)} succeeded, "
                                f"{pods.get('failed', 0)} failed")], INDENT)
    if pods.get("waiting"):
        lines += _table(["COUNT", "CATEGORY", "REASON", "POD", "MESSAGE"],
                        ([g.get("count"), g.get("category"), g.get("reason"), g.get("pod"), g.get("message")]
                         for g in pods["waiting"]))
    return lines


def _eviction(st: Mapping[str, Any]) -> list[str]:
    ev = st.get("lastEviction")
    if not ev:
        return []
    return _fields([(k, ev.get(f)) for k, f in (("Reason", "reason"), ("Underlying cause", "underlyingCause"),
                                                ("By", "by"), ("Time", "time"), ("Count", "count"),
                                                ("Message", "message"))], INDENT)


def _remedies(st: Mapping[str, Any]) -> list[str]:
    lines = []
    for r in st.get("remedies") or []:
        where = f"{r.get('kind')} {r.get('namespace') + '/' if r.get('namespace') else ''}{r.get('name')}"
        exact = "exact, from Kueue's numbers" if r.get("exact") else "an estimate"
        lines.append(f"{INDENT}{r.get('actionBy')}: {where} {r.get('field')}: {r.get('now')} -> {r.get('enough')} "
                     f"({exact})")
        lines.append(f"{INDENT}{INDENT}{r.get('message')}")
    return lines


def _pending_limit(st: Mapping[str, Any], now: datetime) -> list[str]:
    pl = st.get("pendingLimit")
    if not pl:
        return []
    where = f"{pl.get('sourceKind')} {pl.get('sourceNamespace') + '/' if pl.get('sourceNamespace') else ''}" \
            f"{pl.get('sourceName')}"
    state = (f"EXCEEDED since {pl.get('exceededSince')} ({_age(now, pl.get('exceededSince'))} ago)"
             if pl.get("exceeded") else "not exceeded")
    pairs: list[tuple[str, Any]] = [("Limit", f"{pl.get('limit')} (annotation kueue-doctor.dev/max-pending on "
                                              f"{where})"),
                                    ("Waiting since", f"{pl.get('waitingSince')} ({_age(now, pl.get('waitingSince'))})"
                                     if pl.get("waitingSince") else None),
                                    ("State", state)]
    if pl.get("problem"):
        pairs.append(("Problem", pl["problem"]))
    return _fields(pairs, INDENT)


def _position(st: Mapping[str, Any]) -> list[str]:
    pos = st.get("queuePosition")
    if not pos:
        return []
    return [f"{INDENT}{pos.get('position')} of {pos.get('pending')} pending in ClusterQueue {st.get('clusterQueue')}: "
            f"{pos.get('higherPriority')} ahead by priority, {pos.get('samePriorityEarlier')} of the same priority "
            f"queued earlier ({str(pos.get('source') or 'Computed').lower()}, in Kueue's order{_kueue_says(pos)})"]


def _kueue_says(pos: Mapping[str, Any]) -> str:
    vis = pos.get("visibility")
    if vis is None:
        return ""
    return "; Kueue's visibility API agrees" if vis == pos.get("position") else f"; Kueue's visibility API says {vis}"


def _history(st: Mapping[str, Any]) -> list[str]:
    rows = [[t.get("stage"), t.get("reason") or "-", "-", f"{t.get('entries')} earlier, folded",
             format_duration(int(t.get("seconds") or 0), precise=True)] for t in st.get("historyFolded") or []]
    for e in st.get("history") or []:
        start, end = parse_time(e.get("since")), parse_time(e.get("until"))
        took = format_duration(end - start, precise=True) if start is not None and end is not None else "-"
        rows.append([e.get("stage"), e.get("reason") or "-", e.get("cause") or "-",
                     f"{e.get('since')}{' (rebuilt)' if e.get('rebuilt') else ''}", took])
    return _table(["STAGE", "REASON", "CAUSE", "SINCE", "TOOK"], rows) if rows else []


def _events(diagnosis: Mapping[str, Any], state: ClusterState, now: datetime) -> list[str]:
    if not state.knows("Event"):
        return [f"{INDENT}<not read: the input has no Events (kubectl get events -A -o yaml)>"]
    md, spec = diagnosis["metadata"], diagnosis.get("spec") or {}
    ns, name = md["namespace"], md["name"]
    about: list[tuple[str, str]] = [("Workload", name)]
    owner = spec.get("ownerRef") or {}
    if owner.get("kind") and owner.get("name"):
        about.append((owner["kind"], owner["name"]))
    workload = state.workloads.get((ns, name))
    if workload is not None:
        about += [("Pod", (p.get("metadata") or {}).get("name") or "") for p in state.pods_of(workload)]
    events = [(kind, nm, ev) for kind, nm in about for ev in state.events_about(kind, ns, nm)]

    def when(ev: Mapping[str, Any]) -> str:
        return str(ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("metadata") or {})
                   .get("creationTimestamp") or "")

    events.sort(key=lambda e: when(e[2]))

    def source(ev: Mapping[str, Any]) -> str:
        src = ev.get("source") or {}
        return str(ev.get("reportingComponent") or src.get("component") or ev.get("reportingController") or "-")

    return _table(["TYPE", "REASON", "AGE", "FROM", "OBJECT", "MESSAGE"],
                  ([ev.get("type"), ev.get("reason"), _age(now, when(ev)) + _count(ev), source(ev),
                    f"{kind}/{nm}", " ".join(str(ev.get("message") or ev.get("note") or "").split())]
                   for kind, nm, ev in events[-20:]))


def _count(ev: Mapping[str, Any]) -> str:
    n = ev.get("count") or (ev.get("series") or {}).get("count")
    return f" (x{n})" if isinstance(n, int) and n > 1 else ""


def describe_one(d: Mapping[str, Any], state: ClusterState, now: datetime) -> str:
    md, spec, st = d["metadata"], d.get("spec") or {}, d["status"]
    owner = spec.get("ownerRef") or {}
    wref = spec.get("workloadRef")
    queue = st.get("clusterQueue")
    if queue and st.get("cohort"):
        queue = f"{queue} (cohort {st['cohort']})"
    lines = _fields([("Name", md["name"]), ("Namespace", md["namespace"]),
                     ("Owner", f"{owner.get('kind')}/{owner.get('name')}" if owner else None),
                     ("Workload", wref.get("name") if wref else "none yet: Kueue has made no Workload"),
                     ("LocalQueue", st.get("localQueue")), ("ClusterQueue", queue),
                     ("Flavors", ", ".join(st.get("flavors") or []))])
    since = st.get("since")
    lines += _section("Verdict", _fields([
        ("Stage", st.get("stage")), ("Reason", st.get("reason")), ("Cause", st.get("cause")),
        ("Action by", st.get("actionBy")),
        ("For", f"{_age(now, since)} (since {since})" if since else None),
        ("Message", st.get("message"))], INDENT))
    parts: list[tuple[str, Callable[[], list[str]]]] = [
        ("Quota", lambda: _quota(st) if st.get("quota") else []),
        ("Admission Checks", lambda: _table(["NAME", "STATE", "ACTIVE", "CONTROLLER", "MESSAGE"], (
            [c.get("name"), c.get("state"), c.get("active"), c.get("controllerName"), c.get("message")]
            for c in st.get("admissionChecks") or []))),
        ("Pods", lambda: _pods(st)),
        ("Blocked By", lambda: _table(["ROLE", "WORKLOAD"], (
            [b.get("role"), f"{b.get('namespace') or md['namespace']}/{b.get('name') or b.get('uid') or '?'}"]
            for b in st.get("blockedBy") or []))),
        ("Last Eviction", lambda: _eviction(st)),
        ("Remedies", lambda: _remedies(st)),
        ("Pending Limit", lambda: _pending_limit(st, now)),
        ("Queue Position", lambda: _position(st)),
        ("History", lambda: _history(st)),
        ("Evidence", lambda: _table(["OBJECT", "FIELD", "REASON", "TIME", "MESSAGE"], (
            [f"{e.get('kind')}/{e.get('name')}", e.get("field"), e.get("reason"), e.get("time"),
             " ".join(str(e.get("message") or "").split())] for e in st.get("evidence") or []))),
        ("Hints", lambda: [f"{INDENT}- {h}" for h in st.get("hints") or []]),
        ("Events", lambda: _events(d, state, now)),
    ]
    for title, render in parts:
        lines += _section(title, render())
    return "\n".join(lines) + "\n"


def describe(diagnoses: Sequence[Mapping[str, Any]], state: ClusterState, now: datetime) -> str:
    """Every diagnosis, one block each, separated by a blank line (as kubectl describe separates objects)."""
    return "\n\n".join(describe_one(d, state, now) for d in diagnoses)
