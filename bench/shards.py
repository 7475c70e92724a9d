"""Namespace shards beside one replica, on the same cluster and load: RSS, CPU and what each process diagnoses.

Run by `python bench/operator_scale.py --shards N` (its cluster, load, CRD and the operator's least-privilege
ServiceAccount), or alone against a cluster that has them (`--kubeconfig`): this starts `kueue-doctor run` once
unsharded, measures it, stops it, then starts `--total-shards N` processes at once (shard 0 .. N-1), and measures
each. A process is measured once
its first pass is done and the Workloads it exports have not changed for `--settle` seconds: VmRSS then, VmHWM
(peak), CPU seconds since start, and the Workloads it exports (sum of kueue_doctor_workloads).

    python bench/operator_scale.py --quick --shards 2
    python bench/shards.py --kubeconfig operator.kubeconfig [--shards 2] [--settle 20]
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


def exported(port: int) -> tuple[float, float] | None:
    """(Workloads exported, passes), None while the metrics are not served."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as rsp:
            text = rsp.read().decode()
    except OSError:
        return None
    workloads = passes = 0.0
    for line in text.splitlines():
        if line.startswith("kueue_doctor_workloads{"):
            workloads += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kueue_doctor_diagnosis_passes_total "):
            passes = float(line.rsplit(" ", 1)[1])
    return workloads, passes


def start(kubeconfig: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    metrics, health = free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": operator_path()}
    env.pop("KUBECONFIG", None)
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "kueue_doctor", "run", "--kubeconfig", str(kubeconfig),
                                 "--metrics-port", str(metrics), "--health-port", str(health), *extra],
                                stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, metrics


def measure(procs: list[tuple[subprocess.Popen[bytes], int]], settle: float, timeout: float) -> list[dict[str, Any]]:
    t0 = time.monotonic()
    last: list[tuple[float, float] | None] = [None] * len(procs)
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
            if last[i] is None or now[0] != last[i][0]:  # type: ignore[index]
                last[i], stable_since[i] = now, time.monotonic()
            elif time.monotonic() - stable_since[i] >= settle:
                st = proc_status(proc.pid)
                done[i] = {"rss_mib": round(st.get("VmRSS", 0) / 1024), "peak_mib": round(st.get("VmHWM", 0) / 1024),
                           "cpu_s": round(proc_cpu(proc.pid), 1), "workloads": int(now[0]),
                           "settled_after_s": round(time.monotonic() - t0 - settle, 1)}
        time.sleep(1)
    return [d for d in done if d is not None]


def stop(procs: list[tuple[subprocess.Popen[bytes], int]]) -> None:
    for proc, _ in procs:
        proc.terminate()
    for proc, _ in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def compare(kubeconfig: Path, workdir: Path, total: int, settle: float = 20.0, timeout: float = 900.0
            ) -> dict[str, Any]:
    """One unsharded process, measured and stopped; then `total` shards at once, each measured. A first unsharded
    process writes every diagnosis and is not measured: the measured ones all find them written (a first install's
    writes would inflate whichever ran first)."""
    flags = ("--resync-interval", "3600")  # no resync inside the measurement
    warm = [start(kubeconfig, workdir / "warm-up.log", *flags)]
    try:
        measure(warm, settle, timeout)
    finally:
        stop(warm)
    one = [start(kubeconfig, workdir / "one.log", *flags)]
    try:
        single = measure(one, settle, timeout)[0]
    finally:
        stop(one)
    shards = [start(kubeconfig, workdir / f"shard-{i}.log", *flags, f"--total-shards={total}", f"--shard-index={i}")
              for i in range(total)]
    try:
        sharded = measure(shards, settle, timeout)
    finally:
        stop(shards)
    for r in sharded:
        r["rss_vs_one_replica"] = round(r["rss_mib"] / max(single["rss_mib"], 1), 2)
    return {"one_replica": single, "shards": sharded}


def table(result: dict[str, Any]) -> str:
    single, sharded = result["one_replica"], result["shards"]
    rows = [f"{'process':<14}{'RSS MiB':>9}{'peak MiB':>10}{'CPU s':>8}{'Workloads':>11}{'RSS / one':>11}"]
    for name, r in [("one replica", single)] + [(f"shard {i}/{len(sharded)}", r) for i, r in enumerate(sharded)]:
        rows.append(f"{name:<14}{r['rss_mib']:>9}{r['peak_mib']:>10}{r['cpu_s']:>8}{r['workloads']:>11}"
                    f"{r['rss_mib'] / max(single['rss_mib'], 1):>11.2f}")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", required=True, help="a kubeconfig of the operator's ServiceAccount")
    ap.add_argument("--workdir", default=".", help="where the processes' logs go")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--settle", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    a = ap.parse_args()
    print(table(compare(Path(a.kubeconfig), Path(a.workdir), a.shards, a.settle, a.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
