"""Namespace shards beside one replica, on the same cluster and load: RSS, CPU and what each process diagnoses.

Run by `python bench/operator_scale.py --shards N` (its cluster, load, CRD and the operator's least-privilege
ServiceAccount), or alone against a cluster that has them (`--kubeconfig`): this starts `kueue-doctor run` once
unsharded, measures it, stops it, then starts `--total-shards N` processes at once (shard 0 .. N-1), and measures
each, then the same N split by the ranges `kueue-doctor shard-plan` prints (`--shard-boundaries`: where the
apiserver serves KEP-5866, as the bench's does, it sends each shard only its own Events, Pods, owners and
diagnoses).
A process is measured once its first pass is done, every diagnosis is written (kueue_doctor_writes_pending 0)
and the Workloads it exports have not changed for `--settle` seconds, and again `--hold` seconds later (what it
keeps once Kopf's own re-listing after start-up is done and the operator has handed freed memory back:
live/heap.py trims every 30 s): VmRSS at both, VmHWM (peak), CPU seconds since start, the Workloads it exports
(sum of kueue_doctor_workloads) and the watch events it received (kueue_doctor_watch_events_total, every kind: what it
decoded, kept or not). The held RSS is the one compared.

What a shard cannot divide is what a process costs with nothing to diagnose (the interpreter, Kopf, aiohttp, the
client, the metrics registry). `baseline()` measures that on the cluster before the bench's load exists, and the
table gives both ratios: RSS / one replica, and (RSS - baseline) / (one replica - baseline), the share of what one
replica keeps for the cluster that a shard still keeps.

    python bench/operator_scale.py --quick --shards 2
    python bench/shards.py --kubeconfig operator.kubeconfig [--shards 2] [--settle 20] [--hold 60] [--baseline-mib 82]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from operator_scale import free_port, operator_path, proc_cpu, proc_status  # noqa: E402


def events_received(port: int) -> int:
    """Watch events the process received, every kind (what it decoded, kept or not)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as rsp:
        text = rsp.read().decode()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("kueue_doctor_watch_events_total{")))


def exported(port: int) -> tuple[float, float, float] | None:
    """(Workloads exported, passes, diagnoses waiting to be written), None while the metrics are not served."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as rsp:
            text = rsp.read().decode()
    except OSError:
        return None
    workloads = passes = pending = 0.0
    for line in text.splitlines():
        if line.startswith("kueue_doctor_workloads{"):
            workloads += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kueue_doctor_diagnosis_passes_total "):
            passes = float(line.rsplit(" ", 1)[1])
        elif line.startswith("kueue_doctor_writes_pending"):
            pending += float(line.rsplit(" ", 1)[1])
    return workloads, passes, pending


def start(kubeconfig: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    metrics, health = free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": operator_path()}
    env.pop("KUBECONFIG", None)
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "kueue_doctor", "run", "--kubeconfig", str(kubeconfig),
                                 "--metrics-port", str(metrics), "--health-port", str(health), *extra],
                                stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, metrics


def measure(procs: list[tuple[subprocess.Popen[bytes], int]], settle: float, timeout: float, hold: float = 0.0
            ) -> list[dict[str, Any]]:
    t0 = time.monotonic()
    last: list[tuple[float, float, float] | None] = [None] * len(procs)
    stable_since = [0.0] * len(procs)
    done: list[dict[str, Any] | None] = [None] * len(procs)
    while not all(done):
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"not settled after {timeout:.0f}s: {last}")
        for i, (proc, port) in enumerate(procs):
            if done[i] is not None:
                continue
            if proc.poll() is not None:
                raise SystemExit(f"process {i} exited with {proc.returncode}")
            now = exported(port)
            if now is None or now[1] < 1:
                continue
            if last[i] is None or now[0] != last[i][0] or now[2] > 0:  # type: ignore[index]
                last[i], stable_since[i] = now, time.monotonic()  # settled: every diagnosis written, too
            elif time.monotonic() - stable_since[i] >= settle:
                done[i] = {**sample(proc), "workloads": int(now[0]),
                           "settled_after_s": round(time.monotonic() - t0 - settle, 1)}
        time.sleep(1)
    if hold > 0:
        time.sleep(hold)
        for (proc, _port), d in zip(procs, done, strict=True):
            if proc.poll() is not None or d is None:
                raise SystemExit(f"a process exited during the {hold:.0f}s hold: {proc.returncode}")
            d.update({"rss_at_settle_mib": d["rss_mib"], **sample(proc), "held_s": hold})
    for (_proc, port), d in zip(procs, done, strict=True):
        if d is not None:
            d["watch_events"] = events_received(port)
    return [d for d in done if d is not None]


def sample(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    st = proc_status(proc.pid)
    return {"rss_mib": round(st.get("VmRSS", 0) / 1024), "peak_mib": round(st.get("VmHWM", 0) / 1024),
            "cpu_s": round(proc_cpu(proc.pid), 1)}


def run_measured(kubeconfig: Path, logs: list[Path], extra: list[tuple[str, ...]], settle: float, timeout: float,
                 hold: float = 0.0) -> list[dict[str, Any]]:
    """Processes started at once (one per log, each with its flags and no resync inside), measured, stopped."""
    procs = [start(kubeconfig, log, "--resync-interval", "3600", *flags)
             for log, flags in zip(logs, extra, strict=True)]
    try:
        return measure(procs, settle, timeout, hold)
    finally:
        stop(procs)


def baseline(kubeconfig: Path, workdir: Path, settle: float = 20.0, timeout: float = 300.0, hold: float = 60.0
             ) -> dict[str, Any]:
    """One unsharded process on the cluster as it is (the bench calls it before its load exists): what every
    process costs before any object, which no shard can divide."""
    return run_measured(kubeconfig, [workdir / "baseline.log"], [()], settle, timeout, hold)[0]


def stop(procs: list[tuple[subprocess.Popen[bytes], int]]) -> None:
    for proc, _ in procs:
        proc.terminate()
    for proc, _ in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def compare(kubeconfig: Path, workdir: Path, total: int, settle: float = 20.0, timeout: float = 900.0,
            hold: float = 60.0, empty: dict[str, Any] | None = None, ranges: bool = True) -> dict[str, Any]:
    """One unsharded process, measured and stopped; then `total` shards at once, each measured; then (`ranges`)
    `total` shards split by planned ranges (--shard-boundaries), each measured. A first unsharded process writes
    every diagnosis and is not measured: the measured ones all find them written (a first install's writes would
    inflate whichever ran first)."""
    run_measured(kubeconfig, [workdir / "warm-up.log"], [()], settle, timeout)
    single = run_measured(kubeconfig, [workdir / "one.log"], [()], settle, timeout, hold)[0]
    sharded = run_measured(kubeconfig, [workdir / f"shard-{i}.log" for i in range(total)],
                           [(f"--total-shards={total}", f"--shard-index={i}") for i in range(total)],
                           settle, timeout, hold)
    ranged: list[dict[str, Any]] = []
    if ranges:  # the same, split by the ranges `kueue-doctor shard-plan` prints (the apiserver narrows them)
        planned = subprocess.run([sys.executable, "-m", "kueue_doctor", "shard-plan", f"--total-shards={total}",
                                  "--kubeconfig", str(kubeconfig)], capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": operator_path()}).stdout
        flag = next(w for w in planned.split() if w.startswith("--shard-boundaries="))
        ranged = run_measured(kubeconfig, [workdir / f"range-{i}.log" for i in range(total)],
                              [(f"--total-shards={total}", f"--shard-index={i}", flag) for i in range(total)],
                              settle, timeout, hold)
    for r in sharded + ranged:
        r["rss_vs_one_replica"] = round(r["rss_mib"] / max(single["rss_mib"], 1), 2)
        if empty is not None:
            r["above_baseline_vs_one_replica"] = round(above(r, empty) / max(above(single, empty), 1), 2)
    return {"baseline": empty, "one_replica": single, "shards": sharded, "ranged_shards": ranged}


def above(r: dict[str, Any], empty: dict[str, Any]) -> int:
    """MiB a process keeps above the baseline: what the cluster's objects cost it."""
    return int(r["rss_mib"]) - int(empty["rss_mib"])


def table(result: dict[str, Any]) -> str:
    empty, single, sharded = result.get("baseline"), result["one_replica"], result["shards"]
    ranged = result.get("ranged_shards") or []
    rows = [f"{'process':<16}{'RSS MiB':>9}{'at settle':>11}{'peak MiB':>10}{'CPU s':>8}{'Workloads':>11}"
            f"{'events':>9}{'RSS / one':>11}{'above baseline / one':>22}"]
    named = [("one replica", single)] + [(f"shard {i}/{len(sharded)}", r) for i, r in enumerate(sharded)]
    named += [(f"range {i}/{len(ranged)}", r) for i, r in enumerate(ranged)]
    for name, r in ([("baseline (empty)", empty)] if empty else []) + named:
        share = f"{above(r, empty) / max(above(single, empty), 1):.2f}" if empty and r is not empty else "-"
        rows.append(f"{name:<16}{r['rss_mib']:>9}{r.get('rss_at_settle_mib', '-'):>11}{r['peak_mib']:>10}"
                    f"{r['cpu_s']:>8}{r['workloads']:>11}{r.get('watch_events', '-'):>9}"
                    f"{r['rss_mib'] / max(single['rss_mib'], 1):>11.2f}{share:>22}")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", required=True, help="a kubeconfig of the operator's ServiceAccount")
    ap.add_argument("--workdir", default=".", help="where the processes' logs go")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--settle", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--hold", type=float, default=60.0, help="seconds after settling until the RSS compared")
    ap.add_argument("--baseline-mib", type=int, help="RSS of one process on the empty cluster, measured before")
    a = ap.parse_args()
    empty = {"rss_mib": a.baseline_mib, "peak_mib": "-", "cpu_s": "-", "workloads": 0} if a.baseline_mib else None
    print(table(compare(Path(a.kubeconfig), Path(a.workdir), a.shards, a.settle, a.timeout, a.hold, empty)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
