"""Kueue's own scheduler performance scenarios with the operator watching: does it keep up with Kueue?

`python3 bench/operator_scale.py --kueue-perf baseline` (15,000 Workloads, 30 ClusterQueues in 5 cohorts) or
`--kueue-perf large-scale` (50,000, 1,000 in 10). The queues and Workloads are those of Kueue's
test/performance/scheduler/configs/<name>/generator.yaml, read from the Kueue module the local control plane is
built from, and created as its generator creates them (runner/generator/generator.go: per ClusterQueue, each
workload set one Workload per creation interval, all ClusterQueues at once). Beside them a runner does what
Kueue's perf runner does for Workloads without a job (runner/controller/controller.go): it finishes each admitted
Workload its class's running time after the admission (Finished=True), and gives back the quota of an evicted
one (QuotaReserved=False, the job controller's part after a preemption). The real Kueue admits and preempts at
its own pace; the operator is started on the queues before the first Workload.

Measured beside a bare watch of the Workloads in the same process, as in bench/churn.py: each transition (a
Workload created, first admitted, finished) and when the operator's diagnosis shows it (a diagnosis at all; a
stage past Admission; stage Finished), the backlog each second, the reaction per transition, and Kueue's own
pace (admissions a second, evictions, the time until every Workload finished), the operator's CPU, writes and RSS.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from churn import ADMITTED, CREATED, FINISHED, Transition, caught_up, reactions

if TYPE_CHECKING:
    from operator_scale import Bench

Key = tuple[str, str]
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"  # generator.RunningTimeLabel
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"


def config_path(name: str) -> Path:
    """generator.yaml of Kueue's perf scenario `name`, from the Kueue module of versions.env."""
    import localcluster as lc

    version = lc.read_versions()["KUEUE_VERSION"]
    configs = lc.go_module_dir("sigs.k8s.io/kueue", version) / "test/performance/scheduler/configs"
    path = configs / name / "generator.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: Kueue {version} has no perf scenario {name!r}")
    return Path(path)


@dataclass(order=True)
class Due:
    at: float
    seq: int
    action: str = field(compare=False)  # "create" | "finish"
    payload: Any = field(compare=False)


@dataclass
class Scenario:
    """The objects of one generator.yaml: ClusterQueues (namespace = LocalQueue = ClusterQueue's name) and each
    Workload's creation offset from the start, class, priority, cpu request and running time."""

    name: str
    flavor: str
    queues: list[dict[str, Any]]
    workloads: list[tuple[float, dict[str, Any]]]

    @classmethod
    def load(cls, name: str, path: Path) -> Scenario:
        cfg = yaml.safe_load(path.read_text())
        flavor = (cfg.get("resourceFlavor") or {}).get("name") or "rf"
        queues: list[dict[str, Any]] = []
        workloads: list[tuple[float, dict[str, Any]]] = []
        for cset in cfg["cohorts"]:
            for ci in range(cset["count"]):
                cohort = f"{cset['className']}-{ci}"
                for qsi, qset in enumerate(cset["queuesSets"]):
                    for qi in range(qset["count"]):
                        cq = f"{qset['className']}-{qsi}-{qi}-{cohort}"
                        queues.append({"name": cq, "cohort": cohort, "nominal": qset["nominalQuota"],
                                       "borrowing": qset.get("borrowingLimit"),
                                       "reclaim": qset.get("reclaimWithinCohort"),
                                       "within": qset.get("withinClusterQueue")})
                        for wsi, wset in enumerate(qset["workloadsSets"]):
                            delay = wset["creationIntervalMs"] / 1000
                            k = 0
                            for si in range(wset["count"]):
                                for i, wl in enumerate(wset["workloads"]):
                                    k += 1  # the generator waits one interval before each create
                                    workloads.append((k * delay, {
                                        "ns": cq, "name": f"{wl['className']}-{wsi}-{si}-{i}",
                                        "class": wl["className"], "priority": wl["priority"],
                                        "cpu": str(wl["request"]), "runtime_ms": wl["runtimeMs"],
                                        "count": wl.get("podCount") or 1}))
        workloads.sort(key=lambda x: x[0])
        return cls(name, flavor, queues, workloads)


def setup(bench: Bench, sc: Scenario) -> None:
    """The flavor, ClusterQueues, namespaces and LocalQueues, as the generator makes them."""
    from tests.builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, ResourceFlavor

    import operator_scale as osb

    api = bench.api

    def create(obj: dict[str, Any]) -> None:
        md = obj["metadata"]
        gv, plural = obj["apiVersion"], obj["kind"].lower() + "s"
        base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        path = f"{base}/namespaces/{md['namespace']}/{plural}" if md.get("namespace") else f"{base}/{plural}"
        osb.retrying(lambda: api.request("POST", path, obj), f"create {obj['kind']} {md['name']}")

    create(ResourceFlavor(sc.flavor).manifest())
    cqs = [ClusterQueue(q["name"]).cohort(q["cohort"]).resource_group(
        FlavorQuotas(sc.flavor).resource("cpu", q["nominal"], borrowing_limit=q["borrowing"]))
        .preemption(within_cluster_queue=q["within"], reclaim_within_cohort=q["reclaim"]).manifest()
        for q in sc.queues]
    osb.run_parallel(create, cqs, 8, "ClusterQueues")
    osb.run_parallel(create, [Namespace(q["name"]).manifest() for q in sc.queues], 8, "Namespaces")
    osb.run_parallel(create, [LocalQueue(q["name"], q["name"], q["name"]).manifest() for q in sc.queues], 8,
                     "LocalQueues")
    bench.wait_until(lambda: all(osb.cond_of(api.request("GET", f"{osb.KUEUE}/clusterqueues/{q['name']}"),
                                             "Active") is not None for q in sc.queues), 120, "ClusterQueues reconciled")


def run(bench: Bench, sc: Scenario, timeout: float, drain_timeout: float = 300.0) -> dict[str, Any]:
    """Create the scenario's Workloads on its timeline, run them as Kueue's perf runner does, and measure."""
    from tests.builders import Workload, condition

    import operator_scale as osb

    api, kueue = bench.api, osb.KUEUE
    lock = threading.Lock()
    transitions: list[Transition] = []
    pending: list[Transition] = []
    runtime: dict[Key, float] = {}
    admitted_once: set[Key] = set()
    finished: set[Key] = set()
    evictions = 0
    returned: set[tuple[Key, str]] = set()  # (key, eviction time) whose quota the runner gave back
    ending: set[tuple[Key, str]] = set()  # (key, admission time) whose finish is on the timeline
    bare_events: Counter[str] = Counter()
    timeline: list[Due] = []
    seq = 0
    wake = threading.Condition(lock)
    t_begin = time.time()

    def due(at: float, action: str, payload: Any) -> None:  # lock held
        nonlocal seq
        seq += 1
        heapq.heappush(timeline, Due(at, seq, action, payload))
        wake.notify()

    def is_true(obj: dict[str, Any], ctype: str) -> bool:
        return (osb.cond_of(obj, ctype) or {}).get("status") == "True"

    def on_wl(t: float, ev: dict[str, Any]) -> None:
        nonlocal evictions
        obj = ev["object"]
        md = obj["metadata"]
        key = (md["namespace"], md["name"])
        with lock:
            bare_events[ev["type"]] += 1
            new = []
            if ev["type"] == "ADDED":
                new.append(CREATED)
            if is_true(obj, "Finished"):
                if key not in finished:
                    finished.add(key)
                    new.append(FINISHED)
            elif is_true(obj, "Evicted") and is_true(obj, "QuotaReserved"):
                since = (osb.cond_of(obj, "Evicted") or {}).get("lastTransitionTime", "")
                if (key, since) not in returned:
                    returned.add((key, since))
                    evictions += 1
                    due(time.time(), "evicted", key)
            elif is_true(obj, "Admitted"):
                if key not in admitted_once:
                    admitted_once.add(key)
                    new.append(ADMITTED)
                # the runner finishes it its running time after this admission (a re-admission starts anew)
                since = str((osb.cond_of(obj, "Admitted") or {}).get("lastTransitionTime"))
                if (key, since) not in ending:
                    ending.add((key, since))
                    due(t + runtime.get(key, 0.0), "finish", (key, since))
            for kind in new:
                tr = Transition(key, kind, t)
                transitions.append(tr)
                pending.append(tr)

    rv = osb.current_rv(api, f"{kueue}/workloads")
    bare = osb.Watcher(api, f"{kueue}/workloads", rv, on_wl, "kueue-perf-watch")
    bare.start()

    def create(w: dict[str, Any]) -> None:
        obj = (Workload(w["name"], w["ns"]).queue(w["ns"]).priority(w["priority"]).count(w["count"])
               .label(RUNTIME_LABEL, str(w["runtime_ms"])).label(CLASS_LABEL, w["class"])
               .request("cpu", w["cpu"]).manifest())
        osb.retrying(lambda: api.request("POST", f"{kueue}/namespaces/{w['ns']}/workloads", obj),
                     f"create {w['name']}")

    def finish(key: Key, admitted_at: str) -> None:
        cur = api.request("GET", f"{kueue}/namespaces/{key[0]}/workloads/{key[1]}")
        adm = osb.cond_of(cur, "Admitted") or {}
        if adm.get("status") != "True" or str(adm.get("lastTransitionTime")) != admitted_at or \
                is_true(cur, "Finished"):
            return  # evicted (or finished) since: not this admission's end
        done = condition("Finished", "True", "ByTest", "By test runner", osb.now_rfc3339())
        osb.retrying(lambda: osb.apply_status_condition(api, *key, done), f"finish {key}")

    def give_back(key: Key) -> None:
        """The job controller's part after an eviction: the quota reservation is released (Kueue's
        UnsetQuotaReservationWithCondition, as the perf runner calls it): a read-modify-write of the status."""
        for _ in range(8):
            cur = api.request("GET", f"{kueue}/namespaces/{key[0]}/workloads/{key[1]}")
            st = cur.get("status") or {}
            if not (is_true(cur, "Evicted") and is_true(cur, "QuotaReserved")):
                return
            now = osb.now_rfc3339()
            conds = []
            for c in st.get("conditions") or []:
                if c["type"] == "QuotaReserved":
                    c = {**c, "status": "False", "reason": "Pending", "message": "Evicted by the test runner",
                         "lastTransitionTime": now}
                elif c["type"] == "Admitted" and c.get("status") == "True":
                    c = {**c, "status": "False", "reason": "NoReservation",
                         "message": "The workload has no reservation", "lastTransitionTime": now}
                conds.append(c)
            st = {k: v for k, v in st.items() if k != "admission"}
            st["conditions"] = conds
            try:
                api.request("PUT", f"{kueue}/namespaces/{key[0]}/workloads/{key[1]}/status", {**cur, "status": st})
                return
            except osb.ApiError as exc:
                if exc.status != 409:
                    raise
        osb.log(f"kueue-perf: could not give back the quota of {key} (conflicts)")

    stop = threading.Event()
    # creates on their own pool: 15,000 of them queue behind a loaded apiserver, and a finish or a quota given
    # back waiting behind them would hold Kueue's quota (Kueue's runner and generator are separate controllers)
    creators, runner = ThreadPoolExecutor(16), ThreadPoolExecutor(8)
    failures: Counter[str] = Counter()

    def submit(pool: ThreadPoolExecutor, fn: Callable[..., None], *args: Any) -> None:
        def done(fut: Any) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                with lock:
                    failures[f"{fn.__name__}: {type(fut.exception()).__name__}"] += 1
        pool.submit(fn, *args).add_done_callback(done)

    def dispatcher() -> None:
        while not stop.is_set():
            with lock:
                while not timeline and not stop.is_set():
                    wake.wait(0.5)
                if stop.is_set():
                    return
                first = timeline[0]
                wait = first.at - time.time()
                if wait > 0:
                    wake.wait(min(wait, 0.5))
                    continue
                heapq.heappop(timeline)
            if first.action == "create":
                submit(creators, create, first.payload)
            elif first.action == "finish":
                submit(runner, finish, *first.payload)
            else:
                submit(runner, give_back, first.payload)

    def catch_up(now: float) -> int:
        return caught_up(bench, lock, pending, t_begin, now)

    backlog: list[tuple[float, int]] = []
    t0 = time.time()

    def sample() -> None:
        while not stop.is_set():
            now = time.time()
            backlog.append((round(now - t0, 1), catch_up(now)))
            stop.wait(1.0)

    with lock:
        for offset, w in sc.workloads:
            runtime[(w["ns"], w["name"])] = w["runtime_ms"] / 1000
            due(t0 + offset, "create", w)
    total = len(sc.workloads)
    bench.audit_tail.read_new()
    cpu0 = osb.proc_cpu(bench.op.pid)  # type: ignore[union-attr]
    # the same window's CPU of Kueue, the apiserver and etcd, side by side: the operator must cost less than
    # the controller it watches, and what it leaves to the apiserver is what its writes queue behind
    pids = bench.cluster.pids() if bench.cluster is not None else {}
    peers0 = {name: osb.proc_cpu(pid) for name, pid in pids.items()}
    work0 = osb.metrics_of(bench.metrics_port)
    threads = [threading.Thread(target=dispatcher, name="kueue-perf-runner", daemon=True),
               threading.Thread(target=sample, name="kueue-perf-backlog", daemon=True)]
    for th in threads:
        th.start()
    osb.log(f"kueue-perf: {total} Workloads over {sc.workloads[-1][0]:.0f}s into {len(sc.queues)} ClusterQueues; "
            "Kueue admits, the runner finishes each after its running time")
    last_log = 0.0
    while time.time() - t0 < timeout:
        with lock:
            n_fin, n_adm, n_created = len(finished), len(admitted_once), bare_events["ADDED"]
        if n_fin >= total:
            break
        if time.time() - last_log > 15:
            last_log = time.time()
            osb.log(f"  kueue-perf {time.time() - t0:.0f}s: {n_created} created, {n_adm} admitted, {n_fin}/{total} "
                    f"finished, {evictions} evictions, backlog {backlog[-1][1] if backlog else 0}"
                    + (f", runner failures {dict(failures)}" if failures else ""))
        time.sleep(1.0)
    t_kueue_done = time.time()
    deadline = t_kueue_done + drain_timeout
    while time.time() < deadline and catch_up(time.time()) > 0:
        time.sleep(0.5)
    t_drained = time.time()
    stop.set()
    with lock:
        wake.notify_all()
    for th in threads:
        th.join(timeout=5)
    for pool in (creators, runner):
        pool.shutdown(wait=False, cancel_futures=True)
    bare.stop_flag = True
    left = catch_up(time.time())
    writes = [e for e in bench.audit_tail.read_new() if e["user"]["username"] == osb.SA_USER]
    codes = Counter((e.get("responseStatus") or {}).get("code") for e in writes)
    cpu = osb.proc_cpu(bench.op.pid) - cpu0  # type: ignore[union-attr]
    peers_cpu = {name: round(osb.proc_cpu(pid) - peers0[name], 1) for name, pid in pids.items() if name in peers0}
    work1 = osb.metrics_of(bench.metrics_port)
    work = {k: round(v - work0.get(k, 0.0)) for k, v in work1.items()
            if k.startswith(("kueue_doctor_diagnosis_workloads", "kueue_doctor_diagnosis_passes_total",
                             "kueue_doctor_watch_events_total"))}
    by_kind, all_ms = reactions(transitions, (CREATED, ADMITTED, FINISHED))
    adm_t = sorted(tr.seen for tr in transitions if tr.kind == ADMITTED)
    kueue_s = t_kueue_done - t0
    during = [b for t, b in backlog if t <= kueue_s]
    samples = [(t, r) for t, r, _ in bench.sampler.samples if t0 <= t <= t_drained]
    result = {
        "scenario": sc.name,
        "workloads": total, "cluster_queues": len(sc.queues), "creation_span_s": round(sc.workloads[-1][0], 1),
        "kueue_all_finished_s": round(kueue_s, 1), "kueue_finished": len(finished),
        "kueue_admissions": len(adm_t),
        "kueue_admissions_per_s": round(len(adm_t) / max(kueue_s, 1e-9), 1),
        "kueue_evictions": evictions,
        "transitions": len(transitions),
        "reaction_ms": {"p50": round(osb.pct(all_ms, 50), 1), "p99": round(osb.pct(all_ms, 99), 1),
                        "max": round(max(all_ms, default=float("nan")), 1)},
        "by_kind": by_kind,
        "backlog_max": max(during, default=0),
        "backlog_p50": sorted(during)[len(during) // 2] if during else 0,
        "backlog_series": backlog,
        "drained_after_s": round(t_drained - t_kueue_done, 1), "not_caught_up": left,
        "operator_cpu_s": round(cpu, 1), "operator_cpu_share": round(cpu / max(t_drained - t0, 1e-9), 2),
        "component_cpu_s": peers_cpu,
        "operator_work": work,  # passes, Workloads diagnosed, watch events by kind, over the scenario
        # the operator's own part of the reaction: a verdict change found by a pass until its write was accepted
        "operator_write_delay": osb.write_delay(work0, work1),
        "operator_writes": len(writes), "operator_writes_by_code": {str(k): v for k, v in codes.items()},
        "operator_writes_per_transition": round(len(writes) / max(len(transitions), 1), 2),
        "operator_rss_start_mib": round((samples[0][1] if samples else 0) / 1024),
        "operator_rss_end_mib": round(osb.proc_status(bench.op.pid).get("VmRSS", 0) / 1024),  # type: ignore[union-attr]
        "operator_rss_peak_mib": round(max((r for _, r in samples), default=0) / 1024),
        "bare_watch_events": dict(bare_events),
        "runner_failures": dict(failures),
    }
    osb.log(f"kueue-perf: { {k: v for k, v in result.items() if k != 'backlog_series'} }")
    return result


def rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The Kueue-perf rows of operator_scale's table."""
    import operator_scale as osb

    c = r.get("kueue_perf")
    if not c:
        return []
    work = c.get("operator_work", {})
    kinds = ", ".join(f"{k} {v['n']} (p50 {v['p50_ms']} / p99 {v['p99_ms']} ms)" for k, v in c["by_kind"].items())
    return [
        ("kueue-perf: load", f"{c['workloads']} Workloads into {c['cluster_queues']} ClusterQueues over "
                             f"{c['creation_span_s']} s (Kueue's {r['args'].get('kueue_perf')} scenario)"),
        ("kueue-perf: Kueue", f"all finished after {c['kueue_all_finished_s']} s; {c['kueue_admissions']} admitted "
                              f"({c['kueue_admissions_per_s']}/s), {c['kueue_evictions']} evictions"),
        ("kueue-perf: reaction p50 / p99 / max", f"{c['reaction_ms']['p50']} / {c['reaction_ms']['p99']} / "
                                                 f"{c['reaction_ms']['max']} ms over {c['transitions']} transitions "
                                                 f"({kinds})"),
        ("kueue-perf: of which the operator's write delay", osb.delay_row(c.get("operator_write_delay"))),
        ("kueue-perf: backlog / drain", f"max {c['backlog_max']}, p50 {c['backlog_p50']}; drained "
                                        f"{c['drained_after_s']} s after Kueue finished, {c['not_caught_up']} "
                                        "never caught up"),
        ("kueue-perf: operator CPU, writes", f"{c['operator_cpu_s']} s ({c['operator_cpu_share']} cores), "
                                             f"{c['operator_writes']} writes ({c['operator_writes_per_transition']} "
                                             f"per transition) {c['operator_writes_by_code']}"),
        ("kueue-perf: CPU s beside the operator's", ", ".join(f"{k} {v}" for k, v in sorted(
            c.get("component_cpu_s", {}).items(), key=lambda kv: -kv[1])) or "-"),
        ("kueue-perf: operator work", f"{work.get('kueue_doctor_diagnosis_passes_total', '-')} passes, "
                                      f"{work.get('kueue_doctor_diagnosis_workloads_total', '-')} Workloads diagnosed"),
        ("kueue-perf: operator RSS start / end / peak", f"{c['operator_rss_start_mib']} / "
                                                        f"{c['operator_rss_end_mib']} / {c['operator_rss_peak_mib']} "
                                                        "MiB"),
    ]
