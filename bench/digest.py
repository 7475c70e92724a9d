"""The sha256 of the engine's whole output on each bench/engine.py mix: a speed change must leave it as it was.

Run it before and after the change, under several hash seeds (set iteration order must never show):

    for s in 0 1 2; do PYTHONHASHSEED=$s python bench/digest.py; done    # [--workloads 2000] [--queues 20]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "operator"), str(ROOT)]

import engine  # noqa: E402  (bench/engine.py: the mixes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=2000)
    ap.add_argument("--queues", type=int, default=20)
    args = ap.parse_args()
    for mix, build in engine.MIXES.items():
        objs = json.loads(json.dumps(build(args.workloads, args.queues)))  # as decoded from the apiserver
        engine.clear_parse_caches()
        out = engine.diagnose(engine.ClusterState.from_objects(objs), engine.NOW)
        print(mix, hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest())


if __name__ == "__main__":
    main()
