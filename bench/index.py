"""What one admission costs the operator: the kept index against rebuilding it, side by side in one run.

Each admission makes Kueue write the Workload's status and its ClusterQueue's status (reservation, usage,
pending counts). The operator then re-diagnoses the Workload and the Workloads of that ClusterQueue's cohort
still waiting for quota (`ClusterState.affected_workloads`). Three timings of exactly that work, best of N
rounds, on the `quota` mix of bench/engine.py (the heaviest: 60% waiting, cohorts, multi-flavor groups):

* ``ideal``   : diagnose those Workloads on a state that did not change (the floor: work proportional to them);
* ``kept``    : upsert the two objects, find the affected Workloads, diagnose them (the index kept up to date);
* ``rebuild`` : the same with the Workload/queue index dropped on the change, as before the index was kept;
* ``paced``   : the operator's inbox: the admitted Workload at once, the waiting Workloads whose quoted usage
  numbers moved once per numbers pace (`live/inbox.py`), all the admissions falling within one pace.

Shapes like Kueue's own scalability tests (kubernetes-sigs/kueue test/performance/scheduler): 15,000
Workloads on 30 ClusterQueues (cohorts of 6) and 50,000 on 1,000 ClusterQueues (cohorts of 10 in the mix).
Target: kept / ideal close to 1, independent of the cluster's size. `--quiet-minutes 60` diagnoses the same
mix an hour later, when nothing has moved in the queues for that long (a stuck cluster, when users ask): every
waiting Workload then also asks whether Kueue looks stalled (engine/admission/stalled.py).

    python bench/index.py [--shape 15k|50k|all] [--rounds 5] [--admissions 20] [--quiet-minutes 0]
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from engine import NOW, best, quota_mix  # noqa: E402  (bench/engine.py: the mixes, best of N rounds)
from kueue_doctor.engine.diagnose import diagnose  # noqa: E402
from kueue_doctor.live.inbox import Inbox  # noqa: E402
from kueue_doctor.live.metrics import Stats  # noqa: E402
from kueue_doctor.live.publisher import Publisher  # noqa: E402
from kueue_doctor.state import ClusterState, Key  # noqa: E402

SHAPES = {"15k": (15_000, 30), "50k": (50_000, 1_000)}
AT = NOW  # when the changes are diagnosed (--quiet-minutes moves it)


def admissions(state: ClusterState, n: int, seed: int = 3) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """n (Workload, ClusterQueue) pairs as Kueue writes them on an admission: new resourceVersions, the
    ClusterQueue's pending count one lower (the content the engine reads changes, so nothing is cached)."""
    rnd = random.Random(seed)
    out = []
    for key in rnd.sample(sorted(state.workloads), n):
        wl = copy.deepcopy(dict(state.workloads[key]))
        cq_name = state.cluster_queue_of(wl)
        if not cq_name or cq_name not in state.cluster_queues:
            continue
        cq = copy.deepcopy(dict(state.cluster_queues[cq_name]))
        wl["metadata"]["resourceVersion"] = str(rnd.randrange(10**9))
        cq["metadata"]["resourceVersion"] = str(rnd.randrange(10**9))
        cq.setdefault("status", {})["pendingWorkloads"] = rnd.randrange(1000)
        out.append((wl, cq))
    return out


def one(state: ClusterState, wl: dict[str, Any], cq: dict[str, Any], *, drop_index: bool) -> int:
    state.upsert(wl)
    state.upsert(cq)
    if drop_index:
        state._index = None  # the behaviour before the index was kept
    keys: set[Key] = state.affected_workloads(wl) | state.affected_workloads(cq, status_only=True)
    return len(diagnose(state, AT, keys))


def ideal(state: ClusterState, wl: dict[str, Any], cq: dict[str, Any]) -> int:
    keys: set[Key] = state.affected_workloads(wl) | state.affected_workloads(cq, status_only=True)
    state.index.derived.clear()  # the facts are recomputed for what is asked, as after a change
    return len(diagnose(state, AT, keys))


_RV = iter(range(10**12, 10**13))


def paced(state: ClusterState, changes: list[tuple[dict[str, Any], dict[str, Any]]], readers: set[Key]) -> int:
    """The operator's own path (live/inbox.py): each admission's Workload diagnosed at once, the waiting
    Workloads whose quoted numbers moved diagnosed once when the numbers pace is due, after all of them (a
    stream of admissions within one pace: 40 a second on a busy cluster, 10 s). `readers`: the Workloads whose
    diagnosis read the numbers in the first pass (the only ones a round takes)."""
    box = Inbox(state, Stats(), Publisher(api=None), {})
    box.diagnosed(state.workloads, readers)

    def one_pass(keys: set[Key]) -> int:
        read: set[Key] = set()
        done = len(diagnose(state, AT, keys, numbers=read))
        box.diagnosed(keys, read)
        return done

    done = 0
    for wl, cq in changes:
        for obj in (copy.deepcopy(wl), copy.deepcopy(cq)):  # never the dicts the other timings stored
            obj["metadata"]["resourceVersion"] = str(next(_RV))  # new to the state in every round
            box.observe("MODIFIED", obj)
        box.drain()
        done += one_pass(box.take())
    box.numbers_pace = 0.0  # the pace has passed: the round, batch after batch, as the loop takes it
    while keys := box.take():
        done += one_pass(keys)
    return done


def run(shape: str, rounds: int, n: int) -> None:
    workloads, queues = SHAPES[shape]
    t0 = time.perf_counter()
    state = ClusterState.from_objects(quota_mix(workloads, queues))
    readers: set[Key] = set()
    diagnose(state, AT, numbers=readers)  # warm: the parse caches hold Kueue's texts, as in a running operator
    changes = admissions(state, n)
    built = time.perf_counter() - t0
    diagnosed = sum(ideal(state, wl, cq) for wl, cq in changes)
    t_ideal = best(lambda: [ideal(state, wl, cq) for wl, cq in changes], rounds)
    t_kept = best(lambda: [one(state, wl, cq, drop_index=False) for wl, cq in changes], rounds)
    t_rebuild = best(lambda: [one(state, wl, cq, drop_index=True) for wl, cq in changes], rounds)
    t_paced = best(lambda: paced(state, changes, readers), rounds)
    per = len(changes)
    paced_n = paced(state, changes, readers)
    print(f"== {shape}: {len(state.workloads)} Workloads, {len(state.cluster_queues)} ClusterQueues"
          + (f", {(AT - NOW).total_seconds() / 60:.0f} min without a change" if AT != NOW else "") + ", "
          f"{per} admissions re-diagnosing {diagnosed / per:.0f} Workloads each on average "
          f"(set-up {built:.0f} s), best of {rounds} rounds; paced diagnoses {paced_n} in all")
    for label, t in (("ideal (no change)", t_ideal), ("kept index", t_kept), ("rebuilt index", t_rebuild),
                     (f"paced ({per} in one)", t_paced)):
        print(f"{label:<18}: {t / per * 1e3:8.2f} ms per admission   {t / t_ideal:6.2f}x ideal")
    print(flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--admissions", type=int, default=20)
    ap.add_argument("--quiet-minutes", type=float, default=0.0)
    args = ap.parse_args()
    global AT
    AT = NOW + timedelta(minutes=args.quiet_minutes)
    for shape in SHAPES if args.shape == "all" else [args.shape]:
        run(shape, args.rounds, args.admissions)


if __name__ == "__main__":
    main()
