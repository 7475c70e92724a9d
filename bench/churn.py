"""Kueue-paced churn, a phase of bench/operator_scale.py: does the operator keep up with Kueue?

While the operator runs, admitted Workloads finish at a steady rate (Finished=True through /status, as their
job controller would write it), a new Workload arrives in the same queue for each, and the real Kueue admits
waiting Workloads into the freed quota at its own pace. A bare watch of the Workloads in the same process sees
each transition (an admission, a finish, an arrival); the operator's diagnosis of that Workload has caught up
when it shows the transition (stage past Admission, stage Finished, a diagnosis at all).

Reported beside the bare watch: the backlog each second (transitions seen by the bare watch that the operator's
diagnoses do not show yet), the reaction per transition (bare watch -> diagnosis on a watch; p50/p99/max),
Kueue's achieved admission rate, and the operator's CPU, writes and RSS over the phase. After the churn stops
the backlog must drain to 0: a backlog that grows with time means the operator cannot keep up with Kueue.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from operator_scale import Bench

Key = tuple[str, str]
ADMITTED, FINISHED, CREATED = "admitted", "finished", "created"
# what the operator's diagnosis shows once it has caught up with each kind of transition
CAUGHT_UP: dict[str, Callable[[str], bool]] = {
    ADMITTED: lambda stage: stage not in ("Admission", ""),
    FINISHED: lambda stage: stage == "Finished",
    CREATED: lambda stage: True,
}


@dataclass
class Transition:
    key: Key
    kind: str
    seen: float  # the bare watch received it
    caught_up: float | None = None  # the operator's diagnosis showed it (received on the diagnosis watch)


def reactions(transitions: list[Transition], kinds: tuple[str, ...]) -> tuple[dict[str, dict[str, Any]], list[float]]:
    """Per kind of transition: how many, how many the operator caught up with, and the reaction p50/p99/max in ms;
    and every caught-up reaction (bench/kueue_perf.py reports the same)."""
    import operator_scale as osb

    by_kind: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        ms = [(tr.caught_up - tr.seen) * 1e3 for tr in transitions if tr.kind == kind and tr.caught_up is not None]
        by_kind[kind] = {"n": sum(1 for tr in transitions if tr.kind == kind), "caught_up": len(ms),
                         "p50_ms": round(osb.pct(ms, 50), 1), "p99_ms": round(osb.pct(ms, 99), 1),
                         "max_ms": round(max(ms, default=float("nan")), 1)}
    return by_kind, [(tr.caught_up - tr.seen) * 1e3 for tr in transitions if tr.caught_up is not None]


def caught_up(bench: Bench, lock: threading.Lock, pending: list[Transition], t_begin: float, now: float) -> int:
    """Mark the transitions the diagnoses now show and drop them from `pending`; the backlog is what the bare watch
    saw by `now` and the operator's diagnoses do not show yet (bench/kueue_perf.py counts it the same way)."""
    with bench.lock, lock:
        still = []
        for tr in pending:
            # the first diagnosis event of the phase showing it: matched by state, not by time, because
            # the two watches of one apiserver may deliver in either order (a reaction can be just below 0)
            hit = next((t for t, stage in bench.diag_stages.get(tr.key, ())
                        if t >= t_begin and CAUGHT_UP[tr.kind](stage)), None)
            if hit is not None:
                tr.caught_up = hit
            else:
                still.append(tr)
        pending[:] = still
        return sum(1 for tr in still if tr.seen <= now)


def churn(bench: Bench, seconds: float, rate: float, drain_timeout: float = 180.0) -> dict[str, Any]:
    from tests.builders import condition

    import operator_scale as osb

    def _true(obj: dict[str, Any], ctype: str) -> bool:
        return (osb.cond_of(obj, ctype) or {}).get("status") == "True"

    api, plan = bench.api, bench.plan
    t_begin = time.time()
    kueue = osb.KUEUE
    items, rv = osb.list_all(api, f"{kueue}/workloads")
    admitted_now = deque((w["metadata"]["namespace"], w["metadata"]["name"]) for w in items
                         if _true(w, "Admitted") and not _true(w, "Finished"))
    was_admitted = set(admitted_now)
    finished_keys: set[Key] = {(w["metadata"]["namespace"], w["metadata"]["name"]) for w in items
                               if _true(w, "Finished")}
    cq_of_ns = {w["ns"]: w["cq"] for w in plan.wl}
    count_of: dict[Key, int] = {(w["ns"], w["name"]): w["count"] for w in plan.wl}  # an arrival asks what it replaces
    lock = threading.Lock()
    transitions: list[Transition] = []
    pending: list[Transition] = []
    created: set[Key] = set()
    bare_events: Counter[str] = Counter()

    def on_wl(t: float, ev: dict[str, Any]) -> None:
        obj = ev["object"]
        md = obj["metadata"]
        key = (md["namespace"], md["name"])
        with lock:
            bare_events[ev["type"]] += 1
            new: list[str] = []
            if ev["type"] == "ADDED" and key in created:
                new.append(CREATED)
            if key not in was_admitted and _true(obj, "Admitted"):
                was_admitted.add(key)
                admitted_now.append(key)
                new.append(ADMITTED)
            if key not in finished_keys and _true(obj, "Finished"):
                finished_keys.add(key)
                new.append(FINISHED)
            for kind in new:
                tr = Transition(key, kind, t)
                transitions.append(tr)
                pending.append(tr)

    bare = osb.Watcher(api, f"{kueue}/workloads", rv, on_wl, "churn-bare-watch")
    bare.start()

    def catch_up(now: float) -> int:
        return caught_up(bench, lock, pending, t_begin, now)

    def finish_one(key: Key) -> None:
        # PodsReady with it: the bench's apply owns both, and one without the other would drop PodsReady
        ready = condition("PodsReady", "True", "Started", "All pods reached readiness and the workload is running",
                          osb.now_rfc3339())
        done = condition("Finished", "True", "Succeeded", "Job finished successfully", osb.now_rfc3339())
        osb.retrying(lambda: osb.apply_status_condition(api, *key, ready, done), f"finish {key}")

    def arrive(replaces: Key, i: int) -> None:
        ns = replaces[0]
        w = {"name": f"churn-{i:05d}", "ns": ns, "cq": cq_of_ns[ns], "count": count_of.get(replaces, 1),
             "kind": "waiting"}
        with lock:
            created.add((ns, w["name"]))
            count_of[(ns, w["name"])] = w["count"]
        osb.retrying(lambda: api.request("POST", f"{kueue}/namespaces/{ns}/workloads", osb.workload_obj(w)),
                     f"create {w['name']}")

    backlog: list[tuple[float, int]] = []
    stop_sampling = threading.Event()
    t0 = time.time()

    def sample() -> None:
        while not stop_sampling.is_set():
            now = time.time()
            backlog.append((round(now - t0, 1), catch_up(now)))
            stop_sampling.wait(1.0)

    sampler = threading.Thread(target=sample, name="churn-backlog", daemon=True)
    bench.audit_tail.read_new()
    cpu0 = osb.proc_cpu(bench.op.pid)  # type: ignore[union-attr]
    metrics0 = osb.metrics_of(bench.metrics_port)
    sampler.start()
    osb.log(f"churn: {seconds:.0f}s, {rate}/s admitted Workloads finish and as many arrive; Kueue admits at its pace")
    finished = arrivals = starved = 0
    with ThreadPoolExecutor(8) as pool:
        k = 0
        while time.time() - t0 < seconds:
            due = t0 + k / rate
            if due > time.time():
                time.sleep(due - time.time())
            with lock:
                key = admitted_now.popleft() if admitted_now else None
            if key is None:
                starved += 1  # nothing admitted to finish: Kueue is behind the churn
            else:
                pool.submit(finish_one, key)
                pool.submit(arrive, key, k)
                finished += 1
                arrivals += 1
            k += 1
    t_sent = time.time()
    osb.log(f"churn: sent {finished} finishes and {arrivals} arrivals in {t_sent - t0:.1f}s; draining")
    deadline = t_sent + drain_timeout
    while time.time() < deadline:
        if catch_up(time.time()) == 0 and time.time() - t_sent > 5:
            break
        time.sleep(0.5)
    t_drained = time.time()
    stop_sampling.set()
    sampler.join(timeout=5)
    bare.stop_flag = True
    left = catch_up(time.time())
    writes = [e for e in bench.audit_tail.read_new() if e["user"]["username"] == osb.SA_USER]
    cpu = osb.proc_cpu(bench.op.pid) - cpu0  # type: ignore[union-attr]
    by_kind, all_ms = reactions(transitions, (ADMITTED, FINISHED, CREATED))
    admitted_t = sorted(tr.seen for tr in transitions if tr.kind == ADMITTED)
    during = [b for t, b in backlog if t <= t_sent - t0]
    result = {
        "seconds": round(t_sent - t0, 1), "rate_per_s": rate, "finishes_sent": finished, "arrivals_sent": arrivals,
        "ticks_with_nothing_admitted_to_finish": starved,
        "kueue_admissions": len(admitted_t),
        "kueue_admissions_per_s": round(len(admitted_t) / max(t_sent - t0, 1e-9), 1),
        "transitions": len(transitions), "reaction_ms": {"p50": round(osb.pct(all_ms, 50), 1),
                                                         "p99": round(osb.pct(all_ms, 99), 1),
                                                         "max": round(max(all_ms, default=float("nan")), 1)},
        "by_kind": by_kind,
        # the operator's own part of the reaction: a verdict change found by a pass until its write was accepted
        "operator_write_delay": osb.write_delay(metrics0, osb.metrics_of(bench.metrics_port)),
        "backlog_max_during": max(during, default=0),
        "backlog_p50_during": sorted(during)[len(during) // 2] if during else 0,
        "backlog_last_10s_of_churn": during[-10:],
        "drained_after_s": round(t_drained - t_sent, 1), "not_caught_up": left,
        "backlog_series": backlog,
        "operator_cpu_s": round(cpu, 1), "operator_cpu_share": round(cpu / max(t_drained - t0, 1e-9), 2),
        "operator_writes": len(writes),
        "operator_rss_end_mib": round(osb.proc_status(bench.op.pid).get("VmRSS", 0) / 1024),  # type: ignore[union-attr]
        "operator_rss_peak_during_mib": round(bench.sampler.peak_rss(t0, t_drained) / 1024),
        "bare_watch_events": dict(bare_events),
    }
    osb.log(f"churn: { {k: v for k, v in result.items() if k != 'backlog_series'} }")
    return result


def rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The churn rows of operator_scale's table."""
    import operator_scale as osb

    c = r.get("churn")
    if not c:
        return []
    kinds = ", ".join(f"{k} {v['n']} (p50 {v['p50_ms']} / p99 {v['p99_ms']} ms)" for k, v in c["by_kind"].items())
    return [
        ("churn: load", f"{c['finishes_sent']} finishes + {c['arrivals_sent']} arrivals in {c['seconds']} s; Kueue "
                        f"admitted {c['kueue_admissions']} ({c['kueue_admissions_per_s']}/s)"),
        ("churn: reaction p50 / p99 / max", f"{c['reaction_ms']['p50']} / {c['reaction_ms']['p99']} / "
                                            f"{c['reaction_ms']['max']} ms over {c['transitions']} transitions "
                                            f"({kinds})"),
        ("churn: of which the operator's write delay", osb.delay_row(c.get("operator_write_delay"))),
        ("churn: backlog during / drain", f"max {c['backlog_max_during']}, p50 {c['backlog_p50_during']}, last 10 s "
                                          f"{c['backlog_last_10s_of_churn']}; drained {c['drained_after_s']} s after, "
                                          f"{c['not_caught_up']} never caught up"),
        ("churn: operator CPU, writes, RSS", f"{c['operator_cpu_s']} s ({c['operator_cpu_share']} cores), "
                                             f"{c['operator_writes']} writes, RSS end {c['operator_rss_end_mib']} "
                                             f"MiB, peak {c['operator_rss_peak_during_mib']} MiB"),
    ]
