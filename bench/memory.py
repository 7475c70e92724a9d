"""Where the operator's memory goes, per kind: the objects it keeps (slimmed as the inbox slims them) and
the state's indices, measured with tracemalloc, beside the size of the same objects as JSON.

The `pods` mix of bench/engine.py (60% of Workloads admitted with 5 Pods each, Jobs, Warning Events, 40
Nodes) is built, each object serialized and decoded again (as a watch delivers it), slimmed with
`kube.slim.slim` and upserted into a `ClusterState` kind by kind; the bytes allocated per kind are those
tracemalloc sees grow (the decoded full objects are dropped first). Twice, side by side: a plain state (what
`explain` and the engine bench build) and the operator's packed one (`ClusterState.packed()`: Workloads, Pods
and Events compressed, kube/packed.py); then the cost of reading every admitted Workload's Pods from each, as the
engine does. The last column is what a namespace shard keeps of a Workload another shard diagnoses
(kube/slim.foreign_workload, packed), with the index it builds from those projections (another shard's Pods
are not kept at all since session 22).
Kopf's own per-object memory is not in it: `bench/operator_scale.py` measures the whole process on the real
control plane.

    python bench/memory.py [--workloads 10000] [--queues 100] [--mix pods|quota]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from engine import pods_mix, quota_mix  # noqa: E402  (bench/engine.py: the mixes)
from kueue_doctor.kube.slim import foreign_workload, slim  # noqa: E402
from kueue_doctor.state import ClusterState  # noqa: E402

TARGETS = {"Workload": 4096, "Pod": 1024}  # bytes per object, issue 12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--mix", choices=("pods", "quota"), default="pods",
                    help="bench/engine.py's mix: pods (5 Pods per admitted Workload) or quota (long Kueue messages)")
    args = ap.parse_args()
    by_kind: dict[str, list[str]] = defaultdict(list)
    for obj in (pods_mix if args.mix == "pods" else quota_mix)(args.workloads, args.queues):
        by_kind[obj["kind"]].append(json.dumps(obj))
    plain = measure(ClusterState(), by_kind)
    packed = measure(ClusterState.packed(), by_kind)
    other = measure(ClusterState.packed(), {"Workload": by_kind["Workload"]}, foreign_workload)
    print(f"{'kind':<16}{'objects':>9}{'JSON B/obj':>12}{'plain B/obj':>13}{'packed B/obj':>14}{'packed MiB':>12}"
          f"{'other shard B/obj':>19}  target")
    for (kind, n, kept, raw), (_, _, kept_packed, _) in zip(plain.rows, packed.rows, strict=True):
        target = f"<= {TARGETS[kind]} B" if kind in TARGETS else ""
        foreign = {"Workload": f"{other.rows[0][2] / n:.0f}", "Pod": "0"}.get(kind, "")
        print(f"{kind:<16}{n:>9}{raw / n:>12.0f}{kept / n:>13.0f}{kept_packed / n:>14.0f}"
              f"{kept_packed / 2**20:>12.1f}{foreign:>19}  {target}")
    print(f"{'index':<16}{'':>9}{'':>12}{plain.index / 2**20:>11.1f}Mi{packed.index / 2**20:>12.1f}Mi"
          f"{other.index / 2**20:>18.1f}Mi")
    print(f"{'total MiB':<16}{sum(r[1] for r in plain.rows):>9}{'':>12}{plain.total / 2**20:>13.1f}"
          f"{packed.total / 2**20:>14.1f}")
    # what packing costs the engine: each admitted Workload's Pods read once (Context.pods), best of 3
    reads = {}
    for label, state in (("plain", plain.state), ("packed", packed.state)):
        admitted = [wl for wl in state.workloads.values() if "admission" in wl.get("status", {})]
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            n_pods = sum(len(state.pods_of(wl)) for wl in admitted)
            best = min(best, time.perf_counter() - t0)
        reads[label] = best
        print(f"read the Pods of {len(admitted)} admitted Workloads ({n_pods} Pods), {label}: {best * 1e3:.0f} ms")
    print(f"packed/plain read time: {reads['packed'] / reads['plain']:.2f}x; packed/plain memory: "
          f"{packed.total / plain.total:.2f}x")


class Measured:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.rows: list[tuple[str, int, int, int]] = []
        self.index = 0

    @property
    def total(self) -> int:
        return sum(r[2] for r in self.rows) + self.index


def measure(state: ClusterState, by_kind: dict[str, list[str]],
            transform: Callable[[Mapping[str, Any]], dict[str, Any]] = slim) -> Measured:
    out = Measured(state)
    tracemalloc.start()
    for kind in sorted(by_kind, key=lambda k: -len(by_kind[k])):
        texts = by_kind[kind]
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for text in texts:
            state.upsert(transform(json.loads(text)))
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        out.rows.append((kind, len(texts), kept, sum(map(len, texts))))
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    state.index  # noqa: B018  (the Workload/queue index, built on first use)
    out.index = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return out


if __name__ == "__main__":
    main()
