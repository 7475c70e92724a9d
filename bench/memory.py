"""Where the operator's memory goes, per kind: the objects it keeps (slimmed as the inbox slims them) and
the state's indices, measured with tracemalloc, beside the size of the same objects as JSON.

The `pods` mix of bench/engine.py (60% of Workloads admitted with 5 Pods each, Jobs, Warning Events, 40
Nodes) is built, each object serialized and decoded again (as a watch delivers it), slimmed with
`kube.slim.slim` and upserted into a `ClusterState` kind by kind; the bytes allocated per kind are those
tracemalloc sees grow (the decoded full objects are dropped first). Kopf's own per-object memory is not in
it: `bench/operator_scale.py` measures the whole process on the real control plane.

    python bench/memory.py [--workloads 10000] [--queues 100]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from engine import pods_mix  # noqa: E402  (bench/engine.py: the mixes)
from kueue_doctor.kube.slim import slim  # noqa: E402
from kueue_doctor.state import ClusterState  # noqa: E402

TARGETS = {"Workload": 4096, "Pod": 1024}  # bytes per object, issue 12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--queues", type=int, default=100)
    args = ap.parse_args()
    by_kind: dict[str, list[str]] = defaultdict(list)
    for obj in pods_mix(args.workloads, args.queues):
        by_kind[obj["kind"]].append(json.dumps(obj))
    state = ClusterState()
    tracemalloc.start()
    rows = []
    for kind in sorted(by_kind, key=lambda k: -len(by_kind[k])):
        texts = by_kind[kind]
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for text in texts:
            state.upsert(slim(json.loads(text)))
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        rows.append((kind, len(texts), kept, sum(map(len, texts))))
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    state.index  # noqa: B018  (the Workload/queue index, built on first use)
    index = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    print(f"{'kind':<16}{'objects':>9}{'kept MiB':>10}{'B/object':>10}{'JSON B/obj':>12}{'kept/JSON':>10}  target")
    for kind, n, kept, raw in rows:
        target = f"<= {TARGETS[kind]} B" if kind in TARGETS else ""
        print(f"{kind:<16}{n:>9}{kept / 2**20:>10.1f}{kept / n:>10.0f}{raw / n:>12.0f}{kept / raw:>10.2f}  {target}")
    print(f"{'index':<16}{'':>9}{index / 2**20:>10.1f}")
    total = sum(r[2] for r in rows) + index
    print(f"{'total':<16}{sum(r[1] for r in rows):>9}{total / 2**20:>10.1f}")


if __name__ == "__main__":
    main()
