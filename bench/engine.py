"""Engine speed: 10,000 synthetic Workloads over 100 ClusterQueues in cohorts.

Reports microseconds per Workload for one full diagnosis pass (building the ClusterState included)
and the ratio to `json.loads` of the same objects, measured side by side in one run, best of N
rounds each, so a noisy shared machine affects both alike. Target: ratio <= 1.0.

    python bench/engine.py [--workloads 10000] [--queues 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kueue_doctor.engine import messages, pods
from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.kube import objects, quantity
from kueue_doctor.state import ClusterState

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
T = "2026-11-30T09:00:00Z"


def cond(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": T,
            "observedGeneration": 1}


def synthetic(n_workloads: int, n_queues: int, seed: int = 7) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    objs: list[dict[str, Any]] = []
    for f in ("default-flavor", "gpu-a100"):
        objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                     "metadata": {"name": f, "uid": f"rf-{f}"}, "spec": {"nodeLabels": {"pool": f}}})
    for q in range(n_queues):
        cq = f"cq-{q:03d}"
        objs.append({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": cq, "uid": f"cq-uid-{q}", "creationTimestamp": T},
            "spec": {"cohortName": f"cohort-{q % 10}", "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
                         {"name": "default-flavor", "resources": [
                             {"name": "cpu", "nominalQuota": "64", "borrowingLimit": "32"},
                             {"name": "memory", "nominalQuota": "256Gi"},
                             {"name": "nvidia.com/gpu", "nominalQuota": "0"}]},
                         {"name": "gpu-a100", "resources": [
                             {"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "128Gi"},
                             {"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "4"}]}]}]},
            "status": {"conditions": [cond("Active", "True", "Ready", "Can admit new workloads")],
                       "reservingWorkloads": 40, "admittedWorkloads": 40, "pendingWorkloads": 60,
                       "flavorsReservation": [
                           {"name": "default-flavor", "resources": [
                               {"name": "cpu", "total": str(rnd.randint(0, 90)), "borrowed": "0"},
                               {"name": "memory", "total": "100Gi", "borrowed": "0"},
                               {"name": "nvidia.com/gpu", "total": "0", "borrowed": "0"}]},
                           {"name": "gpu-a100", "resources": [
                               {"name": "cpu", "total": "8", "borrowed": "0"},
                               {"name": "memory", "total": "64Gi", "borrowed": "0"},
                               {"name": "nvidia.com/gpu", "total": str(rnd.randint(0, 8)), "borrowed": "0"}]}]}})
        objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                     "metadata": {"name": "lq", "namespace": f"ns-{q:03d}", "uid": f"lq-uid-{q}"},
                     "spec": {"clusterQueue": cq, "stopPolicy": "None"},
                     "status": {"conditions": [
                         cond("Active", "True", "Ready", "Can submit new workloads to localQueue")]}})
    for w in range(n_workloads):
        q = w % n_queues
        ns, cq, name = f"ns-{q:03d}", f"cq-{q:03d}", f"job-train-{w:05d}-a1b2c"
        kind = w % 10
        count = rnd.choice((1, 2, 4, 8))
        conds: list[dict[str, Any]]
        status: dict[str, Any] = {}
        job_uid = f"job-uid-{w}"
        if kind < 3:  # admitted and running
            conds = [cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"),
                     cond("Admitted", "True", "Admitted", "The workload is admitted"),
                     cond("PodsReady", "True", "Started", "All pods reached readiness and the workload is running")]
            status["admission"] = {"clusterQueue": cq, "podSetAssignments": [
                {"name": "main", "count": count, "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
                 "resourceUsage": {"cpu": str(count * 2), "memory": f"{count * 4}Gi"}}]}
        elif kind < 6:  # waiting for quota
            conds = [cond("QuotaReserved", "False", "Pending",
                          "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                          f"default-flavor, {count} more needed, insufficient unused quota for nvidia.com/gpu in "
                          f"flavor gpu-a100, {count} more needed")]
            status["resourceRequests"] = [{"name": "main", "resources": {
                "cpu": str(count * 2), "memory": f"{count * 4}Gi", "nvidia.com/gpu": str(count)}}]
        elif kind == 6:  # exceeds max
            conds = [cond("QuotaReserved", "False", "Pending",
                          "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
                          "default-flavor, previously considered podsets requests (0) + current podset request "
                          f"({count * 8}) > maximum capacity (0), insufficient quota for nvidia.com/gpu in flavor "
                          "gpu-a100, previously considered podsets requests (0) + current podset request "
                          f"({count * 8}) > maximum capacity (12)")]
        elif kind == 7:  # admitted, pods unschedulable
            conds = [cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"),
                     cond("Admitted", "True", "Admitted", "The workload is admitted"),
                     cond("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded")]
            status["admission"] = {"clusterQueue": cq, "podSetAssignments": [
                {"name": "main", "count": count, "flavors": {"cpu": "gpu-a100", "nvidia.com/gpu": "gpu-a100"},
                 "resourceUsage": {"cpu": str(count), "nvidia.com/gpu": str(count)}}]}
            for p in range(count):
                objs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": f"{name}-{p}", "namespace": ns, "uid": f"pod-{w}-{p}",
                    "labels": {"kueue.x-k8s.io/podset": "main"}, "annotations": {"kueue.x-k8s.io/workload": name},
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"train-{w}",
                                         "uid": job_uid, "controller": True}]},
                    "spec": {"nodeSelector": {"pool": "gpu-a100"}, "containers": [{"name": "main", "image": "x"}]},
                    "status": {"phase": "Pending", "conditions": [{
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
                        "lastTransitionTime": T, "message": "0/40 nodes are available: 8 Insufficient nvidia.com/gpu, "
                        "32 node(s) didn't match Pod's node affinity/selector. preemption: 0/40 nodes are available: "
                        "40 Preemption is not helpful for scheduling."}]}})
        elif kind == 8:  # queued, never evaluated
            conds = []
        else:  # preempted and requeued
            msg = (f"Preempted to accommodate a workload (UID: wl-uid-{w - 1}, JobUID: job-uid-{w - 1}) due to "
                   f"prioritization in the ClusterQueue; preemptor path: /cohort-{q % 10}/{cq}; preemptee path: "
                   f"/cohort-{q % 10}/{cq}")
            conds = [cond("Evicted", "True", "Preempted", msg), cond("Preempted", "True", "InClusterQueue", msg),
                     cond("Requeued", "True", "Preempted", msg), cond("QuotaReserved", "False", "Pending", msg)]
        objs.append({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "uid": f"wl-uid-{w}", "creationTimestamp": T,
                         "labels": {"kueue.x-k8s.io/job-uid": job_uid},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"train-{w}",
                                              "uid": job_uid, "controller": True, "blockOwnerDeletion": True}],
                         "finalizers": ["kueue.x-k8s.io/resource-in-use"]},
            "spec": {"active": True, "queueName": "lq", "priority": rnd.choice((0, 100, 1000)), "podSets": [
                {"name": "main", "count": count, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "registry.example/train:1", "resources": {
                        "requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}]},
            "status": {"conditions": conds, **status}})
    return objs


def best(fn: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    objs = synthetic(args.workloads, args.queues)
    texts = [json.dumps(o) for o in objs]
    size = sum(map(len, texts))

    def decode() -> list[Any]:
        return [json.loads(t) for t in texts]

    decoded = decode()

    def engine() -> list[dict[str, Any]]:
        # every round starts cold, like a first pass over a fresh snapshot: the parse/format caches are
        # emptied (within a pass they still serve the messages Kueue repeats across Workloads)
        for cache in (messages._parse_cached, pods._parse_cached, objects._parse_time, objects.format_time,
                      quantity._parse, quantity.format_quantity):
            cache.cache_clear()
        return diagnose(ClusterState.from_objects(decoded), NOW)

    result = engine()  # warm-up: imports, regex compilation, caches of the first pass
    t_json = best(decode, args.rounds)
    t_engine = best(engine, args.rounds)
    tracemalloc.start()
    engine()
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    reasons: dict[str, int] = {}
    for d in result:
        reasons[d["status"]["reason"]] = reasons.get(d["status"]["reason"], 0) + 1
    n = args.workloads
    print(f"objects: {len(objs)} ({n} Workloads, {args.queues} ClusterQueues, {len(objs) - n - 2 * args.queues - 2} "
          f"Pods), {size / 1e6:.1f} MB of JSON; best of {args.rounds} rounds")
    print(f"json.loads of all objects : {t_json * 1e3:8.1f} ms  ({t_json / n * 1e6:6.1f} us per Workload)")
    print(f"engine (state + diagnose) : {t_engine * 1e3:8.1f} ms  ({t_engine / n * 1e6:6.1f} us per Workload)")
    print(f"ratio engine / json.loads : {t_engine / t_json:8.2f}   (target <= 1.0)")
    print(f"engine peak allocation    : {peak / 1e6:8.1f} MB (tracemalloc)")
    print("verdicts: " + ", ".join(f"{k}={v}" for k, v in sorted(reasons.items())))


if __name__ == "__main__":
    main()
