"""Engine speed against json.loads, on three realistic mixes of 10,000 Workloads.

Each mix is built once with tests/builders.py (objects shaped as the API server returns them for Kueue v0.19
on Kubernetes 1.36) and serialized. Then, side by side in one process so a noisy shared machine affects both
alike, best of N rounds each: ``json.loads`` of every object, and the engine (``ClusterState.from_objects`` +
``diagnose``) on the decoded objects, every parse cache emptied before each engine round (``_clear_caches``)
as on a first pass over a fresh snapshot. Target: ratio <= 1.0.

Two denominators, because most of what ``json.loads`` of 10,000 objects costs in a process holding them is the
cycle collector, not the decoding: the full collections it triggers walk every object alive (measured: the same
26 MB decode in 0.25-0.36 s with the collector paused and 0.7-1.5 s with it running, in one process). The engine
pauses the collector during a pass (kube/allocation.py), so ``ratio`` compares each side as the operator runs it
(a watch client decodes with the collector on) and ``ratio, collector paused`` compares the work alone: that one
is the honest measure of the engine's own cost per byte.

For context, the size of what the engine builds: its diagnoses as JSON (``out MB``) and ``json.loads`` of them
with the collector paused (C speed building the same objects), against the input's. The quota mix writes more
than it reads (36 MB of diagnoses from 26 MB of objects: quota lines, remedies, history per Workload), so
there even building its output at C speed costs about as much as decoding its input; the target still
compares with the input.

Mixes (``--queues`` ClusterQueues in cohorts of 10):

* ``current``: the historical mix, proportions unchanged: 30% running, 30% waiting for quota, 10% larger than
  the cohort can ever give, 10% admitted with unschedulable Pods, 10% never evaluated, 10% preempted.
* ``quota``: 60% waiting for quota (Kueue's "insufficient unused quota ... more needed" over several flavors
  and pod sets, legacy ``Pending`` and granular ``WaitingForQuota``), multi-flavor resource groups with
  borrowing and lending limits, reservation/usage status, Cohort objects; the rest admitted, too big,
  preempting, waiting for admission checks, on stopped queues, backed off, deactivated, finished.
* ``pods``: 60% admitted with 5 Pods each, half of those Pods Pending with kube-scheduler's FailedScheduling
  text for 40 Nodes, the rest Running, their Jobs and Warning Events; the other Workloads pending, finished,
  preempted or never evaluated.

Texts vary like a real cluster's (names, counts, flavors, amounts), so the parse caches see thousands of
distinct messages, not one. Objects the engine would only index are left out (the Jobs of Workloads that were
never admitted, Kueue's Events about Workloads), so bytes it skips do not flatter the ratio.

With ``--compiled``, each mix is measured twice, side by side in one run: this checkout as pure Python, then
compiled by mypyc (``hack/compiled.sh``, what the image ships), each in a fresh child process that builds the
same mix with the same seed and measures its own ``json.loads`` (fresh processes hold the same heap, so the
collector's share of ``json.loads`` is alike: in a process that measured another mix before, it is smaller).

    python bench/engine.py [--mix current|quota|pods|all] [--workloads 10000] [--queues 100] [--rounds 5]
                           [--compiled]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# --engine-path DIR: the package to measure, first on the path before anything imports it (the compiled one that
# hack/compiled.sh unpacks); by default this checkout's pure-Python source
_ENGINE = sys.argv[sys.argv.index("--engine-path") + 1] if "--engine-path" in sys.argv[:-1] else str(ROOT / "operator")
sys.path.insert(0, _ENGINE)

from tests.builders import (  # noqa: E402
    Admission,
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Event,
    FlavorQuotas,
    Job,
    LocalQueue,
    Namespace,
    Node,
    Pod,
    PodSet,
    ResourceFlavor,
    Workload,
    condition,
    ref,
    toleration,
)

from kueue_doctor.engine.diagnose import (  # noqa: E402
    clear_parse_caches,
    diagnose,
)
from kueue_doctor.state import ClusterState  # noqa: E402

# what this process measures: the source, or an extension module (--engine-path to hack/compiled.sh's build)
ENGINE_NAME = "compiled" if (sys.modules[diagnose.__module__].__file__ or "").endswith(".so") else "python"

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
T = "2026-11-30T09:00:00Z"
Obj = dict[str, Any]


def ago(minutes: float) -> str:
    return (NOW - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def hex5(*parts: object) -> str:
    """The 5 hex characters Kueue appends to Workload names (sha1 of the owner)."""
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:5]


# Kueue's quantity formatting in messages (pkg/resources/resource_formatter.go)
def cpu(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def mem(mib: int) -> str:
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def amount(resource: str, value: int) -> str:
    """``value`` in milli-cpu for cpu, MiB for memory, units otherwise."""
    return cpu(value) if resource == "cpu" else mem(value) if resource == "memory" else str(value)


# The condition texts Kueue writes (API-NOTES §2.4, §3), verbatim
def quota_reserved(cq: str, at: str) -> Obj:
    return condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", at)


def admitted(at: str) -> Obj:
    return condition("Admitted", "True", "Admitted", "The workload is admitted", at)


def pods_ready(at: str) -> Obj:
    return condition("PodsReady", "True", "Started", "All pods reached readiness and the workload is running", at)


def pods_not_ready(at: str) -> Obj:
    return condition("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded", at)


def preempted_message(preemptor_uid: str, job_uid: str, why: str, preemptor: str, preemptee: str) -> str:
    return (f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: {job_uid}) due to {why}; "
            f"preemptor path: {preemptor}; preemptee path: {preemptee}")


PREEMPTION_KINDS = [("InClusterQueue", "prioritization in the ClusterQueue"),
                    ("InCohortReclamation", "reclamation within the cohort"),
                    ("InCohortReclaimWhileBorrowing", "reclamation within the cohort while borrowing")]


# ---------------------------------------------------------------------------------------------- current


def current_mix(n_workloads: int, n_queues: int, seed: int = 7) -> list[Obj]:
    """Today's mix, object for object (random draws in the same order as before the builders)."""
    rnd = random.Random(seed)
    objs: list[Obj] = [ResourceFlavor(f).node_labels({"pool": f}).obj() for f in ("default-flavor", "gpu-a100")]
    for q in range(n_queues):
        cq = f"cq-{q:03d}"
        objs.append(ClusterQueue(cq).cohort(f"cohort-{q % 10}").queueing_strategy("BestEffortFIFO").resource_group(
            FlavorQuotas("default-flavor").resource("cpu", "64", borrowing_limit="32").resource("memory", "256Gi")
            .resource("nvidia.com/gpu", "0"),
            FlavorQuotas("gpu-a100").resource("cpu", "32").resource("memory", "128Gi")
            .resource("nvidia.com/gpu", "8", lending_limit="4"))
            .workloads(reserving=40, admitted=40, pending=60)
            .reservation("default-flavor", "cpu", rnd.randint(0, 90)).reservation("default-flavor", "memory", "100Gi")
            .reservation("gpu-a100", "cpu", "8").reservation("gpu-a100", "memory", "64Gi")
            .reservation("gpu-a100", "nvidia.com/gpu", rnd.randint(0, 8)).obj())
        objs.append(LocalQueue("lq", f"ns-{q:03d}", cq).obj())
    names = [f"job-train-{w:05d}-a1b2c" for w in range(n_workloads)]
    for w in range(n_workloads):
        q = w % n_queues
        ns, cq, name = f"ns-{q:03d}", f"cq-{q:03d}", names[w]
        job = Job(f"train-{w}", ns)
        kind = w % 10
        count = rnd.choice((1, 2, 4, 8))
        wl = (Workload(name, ns).queue("lq").owner(job).count(count).image("registry.example/train:1")
              .request("cpu", "2").request("memory", "4Gi").limit("nvidia.com/gpu", "1"))
        if kind < 3:  # admitted and running
            wl.conditions(quota_reserved(cq, T), admitted(T), pods_ready(T)).admission(Admission(cq).assignment(
                count=count, flavors={"cpu": "default-flavor", "memory": "default-flavor"},
                usage={"cpu": str(count * 2), "memory": f"{count * 4}Gi"}))
        elif kind < 6:  # waiting for quota
            wl.condition(condition(
                "QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused "
                f"quota for cpu in flavor default-flavor, {count} more needed, insufficient unused quota for "
                f"nvidia.com/gpu in flavor gpu-a100, {count} more needed", T))
            wl.resource_requests("main", {"cpu": str(count * 2), "memory": f"{count * 4}Gi", "nvidia.com/gpu": count})
        elif kind == 6:  # exceeds max
            wl.condition(condition(
                "QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient quota for "
                "nvidia.com/gpu in flavor default-flavor, previously considered podsets requests (0) + current podset "
                f"request ({count * 8}) > maximum capacity (0), insufficient quota for nvidia.com/gpu in flavor "
                f"gpu-a100, previously considered podsets requests (0) + current podset request ({count * 8}) > "
                "maximum capacity (12)", T))
        elif kind == 7:  # admitted, pods unschedulable
            wl.conditions(quota_reserved(cq, T), admitted(T), pods_not_ready(T)).admission(Admission(cq).assignment(
                count=count, flavors={"cpu": "gpu-a100", "nvidia.com/gpu": "gpu-a100"},
                usage={"cpu": str(count), "nvidia.com/gpu": str(count)}))
            for p in range(count):
                objs.append(Pod(f"{name}-{p}", ns).owner(job).workload(name).node_selector({"pool": "gpu-a100"})
                            .image("x").unschedulable(
                                "0/40 nodes are available: 8 Insufficient nvidia.com/gpu, 32 node(s) didn't match "
                                "Pod's node affinity/selector. preemption: 0/40 nodes are available: 40 Preemption "
                                "is not helpful for scheduling.", T).obj())
        elif kind == 9:  # preempted and requeued
            prev = w - 1
            pq = prev % n_queues
            msg = preempted_message(Workload(names[prev], f"ns-{pq:03d}").get_uid(),
                                    Job(f"train-{prev}", f"ns-{pq:03d}").get_uid(),
                                    "prioritization in the ClusterQueue", f"/cohort-{q % 10}/{cq}",
                                    f"/cohort-{q % 10}/{cq}")
            wl.conditions(condition("Evicted", "True", "Preempted", msg, T),
                          condition("Preempted", "True", "InClusterQueue", msg, T),
                          condition("Requeued", "True", "Preempted", msg, T),
                          condition("QuotaReserved", "False", "Pending", msg, T))
        objs.append(wl.priority(rnd.choice((0, 100, 1000))).obj())
    return objs


# ---------------------------------------------------------------------------------------------- fleet

TEAMS = ["vision", "nlp", "speech", "recsys", "fraud", "search", "ads", "maps", "robotics", "genomics", "pricing",
         "forecast", "safety", "ranking", "payments", "infra", "data-eng", "sim", "llm-pretrain", "llm-finetune"]
ENVS = ["prod", "staging", "research", "batch", "dev"]
COHORTS = ["ml-platform", "research", "prod-eu", "prod-us", "analytics", "gpu-pool", "batch-shared", "inference",
           "science", "edge"]
MODELS = ["resnet50", "bert-large", "llama3-8b", "llama3-70b", "whisper", "vit-h14", "t5-xl", "dlrm", "gpt-neox",
          "mixtral", "sdxl", "wav2vec2", "yolo-v8", "clip-l14", "xgboost", "lightgbm", "prophet", "alphafold"]
VERBS = ["train", "finetune", "eval", "sweep", "etl", "embed", "distill", "score", "backfill", "pretrain"]
CAPACITY = "karpenter.sh/capacity-type"
FAMILY = "karpenter.k8s.aws/instance-family"
PRODUCT = "nvidia.com/gpu.product"
CPU_FLAVORS: dict[str, dict[str, str]] = {
    "on-demand": {CAPACITY: "on-demand"},
    "spot": {CAPACITY: "spot"},
    "reserved": {CAPACITY: "reserved"},
    "highmem": {CAPACITY: "on-demand", FAMILY: "r7i"},
}
GPU_FLAVORS: dict[str, dict[str, str]] = {
    "h100-80gb": {PRODUCT: "NVIDIA-H100-80GB-HBM3"},
    "a100-80gb": {PRODUCT: "NVIDIA-A100-SXM4-80GB"},
    "l4-24gb": {PRODUCT: "NVIDIA-L4"},
}
GPU = "nvidia.com/gpu"


def flavor_objects() -> list[Obj]:
    out = []
    for name, labels in CPU_FLAVORS.items():
        rf = ResourceFlavor(name).node_labels(labels)
        if name == "spot":
            rf.toleration(toleration(CAPACITY, "Equal", "spot", "NoSchedule"))
        out.append(rf.obj())
    for name, labels in GPU_FLAVORS.items():
        out.append(ResourceFlavor(name).node_labels(labels).toleration(toleration(GPU, "Exists", effect="NoSchedule"))
                   .obj())
    return out


@dataclass
class Queue:
    """One namespace, its ClusterQueue and LocalQueues, and what the quota looks like."""

    index: int
    team: str
    env: str
    namespace: str
    cq: str
    cohort: str
    local_queues: list[str]
    cpu_flavors: list[str]
    gpu_flavors: list[str]
    covers_pods: bool
    nominal: dict[tuple[str, str], int]  # (flavor, resource) -> milli-cpu / MiB / units
    borrowing: dict[tuple[str, str], int]
    lending: dict[tuple[str, str], int]
    stopped: bool = False
    checks: bool = False
    strict: bool = False
    selector: bool = False

    def resources(self, flavor: str) -> list[str]:
        if flavor in self.gpu_flavors:
            return [GPU]
        return ["cpu", "memory", *(["pods"] if self.covers_pods else [])]


def fleet(n_queues: int, rnd: random.Random) -> list[Queue]:
    out = []
    for q in range(n_queues):
        team, env = TEAMS[q % len(TEAMS)], ENVS[q // len(TEAMS) % len(ENVS)]
        ns = f"{team}-{env}" + (f"-{q // (len(TEAMS) * len(ENVS))}" if q >= len(TEAMS) * len(ENVS) else "")
        cpu_flavors = rnd.sample(list(CPU_FLAVORS), k=rnd.choice((1, 2, 2, 3)))
        gpu_flavors = rnd.sample(list(GPU_FLAVORS), k=rnd.choice((1, 2))) if rnd.random() < 0.6 else []
        local_queues = ["main", "batch"] if rnd.random() < 0.3 else ["main"]
        queue = Queue(q, team, env, ns, f"{ns}-cq", COHORTS[q // 10 % len(COHORTS)], local_queues, cpu_flavors,
                      gpu_flavors, rnd.random() < 0.3, {}, {}, {})
        for f in cpu_flavors:
            cores = rnd.choice((16, 32, 48, 64, 96, 128, 192, 256))
            queue.nominal[f, "cpu"] = cores * 1000
            queue.nominal[f, "memory"] = cores * rnd.choice((4, 8)) * 1024
            queue.nominal[f, "pods"] = cores * 2
            for r in ("cpu", "memory"):
                if rnd.random() < 0.5:
                    queue.borrowing[f, r] = queue.nominal[f, r] * rnd.choice((0, 1, 2, 4)) // 4
                if rnd.random() < 0.3:
                    queue.lending[f, r] = queue.nominal[f, r] * rnd.choice((0, 1, 2)) // 4
        for f in gpu_flavors:
            queue.nominal[f, GPU] = rnd.choice((0, 4, 8, 16, 32, 64))
            if rnd.random() < 0.5:
                queue.borrowing[f, GPU] = rnd.choice((0, 4, 8, 16))
            if rnd.random() < 0.3:
                queue.lending[f, GPU] = queue.nominal[f, GPU] // 2
        out.append(queue)
    for q in rnd.sample(out, k=max(1, n_queues // 50)):
        q.stopped = True
    for q in rnd.sample(out, k=max(1, n_queues // 10)):
        q.checks = True
    for q in rnd.sample(out, k=n_queues // 5):
        q.strict = True
    for q in rnd.sample(out, k=n_queues // 10):
        q.selector = True
    return out


def queue_objects(queues: list[Queue], reserved: dict[str, Counter[tuple[str, str]]],
                  counts: dict[str, Counter[str]], rnd: random.Random) -> list[Obj]:
    """ClusterQueues with the reservation the admitted Workloads hold, their LocalQueues, Namespaces, Cohorts."""
    out: list[Obj] = []
    for q in queues:
        def fq(flavor: str, q: Queue = q) -> FlavorQuotas:
            f = FlavorQuotas(flavor)
            for r in q.resources(flavor):
                f.resource(r, amount(r, q.nominal[flavor, r]), borrowing_limit=(
                    amount(r, q.borrowing[flavor, r]) if (flavor, r) in q.borrowing else None), lending_limit=(
                    amount(r, q.lending[flavor, r]) if (flavor, r) in q.lending else None))
            return f

        cq = ClusterQueue(q.cq).cohort(q.cohort).resource_group(*(fq(f) for f in q.cpu_flavors))
        if q.gpu_flavors:
            cq.resource_group(*(fq(f) for f in q.gpu_flavors))
        cq.preemption(within_cluster_queue=rnd.choice(("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
                      reclaim_within_cohort=rnd.choice(("Never", "LowerPriority", "Any")))
        if q.strict:
            cq.queueing_strategy("StrictFIFO")
        if q.selector:
            cq.namespace_selector({"matchLabels": {"kueue.x-k8s.io/team": q.team}})
        if q.checks:
            cq.admission_check("prov-req")
        if q.stopped:
            cq.stop_policy("Hold").active("False", "Stopped", "Can't admit new workloads: is stopped.")
        held = reserved.get(q.cq, Counter())
        for (f, r), total in held.items():
            nominal = q.nominal.get((f, r), 0)
            borrowed = max(0, total - nominal)
            cq.reservation(f, r, amount(r, total), amount(r, borrowed))
            used = total - (total // 10 if q.checks else 0)
            cq.usage(f, r, amount(r, used), amount(r, max(0, used - nominal)))
        c = counts.get(q.cq, Counter())
        cq.workloads(pending=c["pending"], reserving=c["reserving"], admitted=c["admitted"])
        out.append(cq.obj())
        out.append(Namespace(q.namespace).label("kueue.x-k8s.io/team", q.team).label("environment", q.env).obj())
        for lq in q.local_queues:
            out.append(LocalQueue(lq, q.namespace, q.cq).workloads(
                pending=c[f"pending/{lq}"], reserving=c[f"reserving/{lq}"], admitted=c[f"admitted/{lq}"]).obj())
    for cohort in sorted({q.cohort for q in queues}):
        out.append(Cohort(cohort).obj())
    if any(q.checks for q in queues):
        check = AdmissionCheck("prov-req").parameters("kueue.x-k8s.io", "ProvisioningRequestConfig", "prov-req-config")
        out.append(check.active("True", "Active", "The admission check is active").obj())
    return out


@dataclass
class Shape:
    """What one Workload asks for: pod sets (name, count, per-pod requests) and its owner."""

    owner_kind: str
    owner_name: str
    podsets: list[tuple[str, int, dict[str, int]]]
    gpu: bool


def shape(rnd: random.Random, w: int, q: Queue, gpu_share: float = 0.7) -> Shape:
    gpu = bool(q.gpu_flavors) and rnd.random() < gpu_share
    owner = f"{rnd.choice(VERBS)}-{rnd.choice(MODELS)}-{w:05d}"

    def per_pod() -> dict[str, int]:
        req = {"cpu": rnd.choice((250, 500, 1000, 2000, 4000, 8000, 16000)),
               "memory": rnd.choice((512, 1024, 2048, 4096, 8192, 16384, 32768, 65536))}
        if gpu:
            req[GPU] = rnd.choice((1, 1, 2, 4, 8))
        if q.covers_pods:
            req["pods"] = 1
        return req

    roll = rnd.random()
    if roll < 0.7:
        return Shape("Job", owner, [("main", rnd.choice((1, 1, 2, 4, 8, 16, 32)), per_pod())], gpu)
    if roll < 0.85:
        return Shape("JobSet", owner, [("driver", 1, per_pod()), ("workers", rnd.choice((2, 4, 8, 16)), per_pod())],
                     gpu)
    return Shape("PyTorchJob", owner, [("master", 1, per_pod()), ("worker", rnd.choice((2, 3, 4, 8)), per_pod())], gpu)


OWNER_API = {"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "PyTorchJob": "kubeflow.org/v1"}


def workload_of(sh: Shape, q: Queue, lq: str, created: str, priority: int) -> tuple[Workload, Job | None]:
    kind = sh.owner_kind
    job = Job(sh.owner_name, q.namespace).queue(lq) if kind == "Job" else None
    owner: Any = job if job is not None else ref(kind, sh.owner_name, q.namespace, api_version=OWNER_API[kind])
    wl = Workload(f"{kind.lower()}-{sh.owner_name}-{hex5(kind, q.namespace, sh.owner_name)}", q.namespace)
    pod_sets = []
    image = pod_image(sh)
    for name, count, req in sh.podsets:
        ps = PodSet(name, count).image(image)
        for r, v in req.items():
            if r == "pods":
                continue
            ps.request(r, amount(r, v))
            if r == GPU:
                ps.limit(r, str(v))
        if sh.gpu:
            ps.toleration(toleration(GPU, "Exists", effect="NoSchedule"))
        pod_sets.append(ps)
    wl.pod_sets(*pod_sets).queue(lq).owner(owner).created(created).priority(priority)
    if job is not None:
        name, count, req = sh.podsets[0]
        job.parallelism(count).image(image).created(created)
        for r, v in req.items():
            if r != "pods":
                job.request(r, amount(r, v))
    return wl, job


def totals(sh: Shape) -> list[tuple[str, int, dict[str, int]]]:
    return [(name, count, {r: v * count for r, v in req.items()}) for name, count, req in sh.podsets]


def group_flavor(q: Queue, resource: str, rnd: random.Random) -> str:
    return rnd.choice(q.gpu_flavors) if resource == GPU else rnd.choice(q.cpu_flavors)


def unused_quota_message(q: Queue, sh: Shape, rnd: random.Random) -> str:
    """Kueue's flavor assigner message: per pod set that did not fit, one reason per (flavor, resource) tried."""
    parts = []
    for name, _count, total in totals(sh):
        reasons = []
        for flavors, resources in ((q.cpu_flavors, [r for r in total if r != GPU]), (q.gpu_flavors, [GPU])):
            if not flavors or not all(r in total for r in resources):
                continue
            tried = flavors[:rnd.randint(1, len(flavors))]
            for f in tried:
                short = [r for r in resources if rnd.random() < 0.6] or [rnd.choice(resources)]
                for r in short:
                    missing = max(1, total[r] * rnd.randint(5, 100) // 100)
                    if r == "cpu":
                        missing = max(100, missing // 100 * 100)
                    reasons.append(f"insufficient unused quota for {r} in flavor {f}, {amount(r, missing)} more needed")
        if reasons and (len(parts) == 0 or rnd.random() < 0.6):
            parts.append(f"couldn't assign flavors to pod set {name}: " + ", ".join(sorted(reasons)))
    if not parts:
        name, _count, total = totals(sh)[0]
        r = next(iter(total))
        parts.append(f"couldn't assign flavors to pod set {name}: insufficient unused quota for {r} in flavor "
                     f"{group_flavor(q, r, rnd)}, {amount(r, max(1, total[r] // 2))} more needed")
    return "; ".join(parts)


def max_quota_message(q: Queue, sh: Shape, rnd: random.Random) -> str:
    parts = []
    previous: Counter[str] = Counter()
    for name, _count, total in totals(sh):
        reasons = []
        for r, req in total.items():
            flavors = q.gpu_flavors if r == GPU else q.cpu_flavors
            for f in flavors:
                cap = q.nominal.get((f, r), 0) + q.borrowing.get((f, r), q.nominal.get((f, r), 0))
                if req + previous[r] > cap and rnd.random() < 0.8:
                    reasons.append(f"insufficient quota for {r} in flavor {f}, previously considered podsets requests "
                                   f"({amount(r, previous[r])}) + current podset request ({amount(r, req)}) > "
                                   f"maximum capacity ({amount(r, cap)})")
        previous.update(total)
        if reasons:
            parts.append(f"couldn't assign flavors to pod set {name}: " + ", ".join(sorted(reasons)))
    if not parts:
        name, _count, total = totals(sh)[-1]
        r = "cpu"
        f = q.cpu_flavors[0]
        cap = q.nominal[f, r]
        parts.append(f"couldn't assign flavors to pod set {name}: insufficient quota for cpu in flavor {f}, previously "
                     f"considered podsets requests (0) + current podset request ({amount(r, cap * 3)}) > maximum "
                     f"capacity ({amount(r, cap)})")
    return "; ".join(parts)


def admit(wl: Workload, q: Queue, sh: Shape, rnd: random.Random, held: Counter[tuple[str, str]]) -> Admission:
    adm = Admission(q.cq)
    cpu_flavor = rnd.choice(q.cpu_flavors)
    gpu_flavor = rnd.choice(q.gpu_flavors) if q.gpu_flavors else None
    for name, count, total in totals(sh):
        flavors = {r: (gpu_flavor if r == GPU else cpu_flavor) for r in total}
        adm.assignment(name, count=count, flavors={r: f for r, f in flavors.items() if f},
                       usage={r: amount(r, v) for r, v in total.items()})
        for r, v in total.items():
            held[flavors[r] or cpu_flavor, r] += v
    wl.admission(adm)
    return adm


# The quota mix's states, per 10,000 Workloads (exact counts; scaled with --workloads).
QUOTA_STATES = {"waiting": 6000, "running": 1800, "exceeds": 400, "preempting": 300, "checks": 300,
                "unevaluated": 300, "finished": 200, "being-preempted": 200, "stopped": 100, "backoff": 100,
                "no-local-queue": 100, "no-flavor": 100, "deactivated": 50, "check-retry": 50}


def quota_mix(n_workloads: int, n_queues: int, seed: int = 11) -> list[Obj]:
    rnd = random.Random(seed)
    queues = fleet(n_queues, rnd)
    weights = {q.cq: 1 / (i + 1) ** 0.7 for i, q in enumerate(rnd.sample(queues, len(queues)))}
    pools = {"stopped": [q for q in queues if q.stopped], "checks": [q for q in queues if q.checks and not q.stopped]}
    open_queues = [q for q in queues if not q.stopped]
    states = [st for st, n in QUOTA_STATES.items() for _ in range(n * n_workloads // 10_000)]
    states += ["waiting"] * (n_workloads - len(states))
    rnd.shuffle(states)
    reserved: dict[str, Counter[tuple[str, str]]] = {}
    counts: dict[str, Counter[str]] = {}
    objs: list[Obj] = []
    admitted_uids: list[tuple[str, str, Queue]] = []
    for w, kind_of_state in enumerate(states):
        candidates = pools.get(kind_of_state) or open_queues
        q = rnd.choices(candidates, [weights[c.cq] for c in candidates])[0]
        lq = rnd.choice(q.local_queues)
        sh = shape(rnd, w, q)
        created = ago(rnd.uniform(1, 600))
        wl, job = workload_of(sh, q, lq, created, rnd.choice((0, 0, 100, 1000, 10000)))
        held = reserved.setdefault(q.cq, Counter())
        c = counts.setdefault(q.cq, Counter())
        evaluated = ago(rnd.uniform(0, 30))
        state = "pending"
        if kind_of_state == "stopped":
            wl.conditions(condition("QuotaReserved", "False", rnd.choice(("Inadmissible", "Suspended")),
                                    f"ClusterQueue {q.cq} is inactive", evaluated), pods_not_ready(created))
        elif kind_of_state == "waiting":
            reason = "Pending" if rnd.random() < 0.65 else "WaitingForQuota"
            wl.condition(condition("QuotaReserved", "False", reason, unused_quota_message(q, sh, rnd), evaluated))
            wl.condition(pods_not_ready(created))
            for name, _count, total in totals(sh):
                wl.resource_requests(name, {r: amount(r, v) for r, v in total.items()})
            if admitted_uids and rnd.random() < 0.1:  # preempted earlier, waiting again
                by_uid, by_job, by_q = rnd.choice(admitted_uids)
                kind, why = rnd.choice(PREEMPTION_KINDS)
                msg = preempted_message(by_uid, by_job, why, f"/{by_q.cohort}/{by_q.cq}", f"/{q.cohort}/{q.cq}")
                at = ago(rnd.uniform(30, 120))
                wl.condition(condition("Evicted", "True", "Preempted", msg, at))
                wl.condition(condition("Preempted", "True", kind, msg, at))
                wl.condition(condition("Requeued", "True", "Preempted", msg, at))
                wl.eviction_stats("Preempted", "", rnd.randint(1, 3))
        elif kind_of_state == "running":
            at = ago(rnd.uniform(1, 300))
            admit(wl, q, sh, rnd, held)
            wl.conditions(quota_reserved(q.cq, at), admitted(at), pods_ready(ago(rnd.uniform(0, 1))))
            admitted_uids.append((wl.get_uid(), job.get_uid() if job else wl.get_uid(), q))
            state = "admitted"
            if job is not None:
                job.suspend(False).status(active=sh.podsets[0][1], ready=sh.podsets[0][1], startTime=at)
                objs.append(job.obj())
        elif kind_of_state == "exceeds":  # larger than the ClusterQueue can ever give
            reason = "Pending" if rnd.random() < 0.65 else "ExceedsMaxQuota"
            wl.condition(condition("QuotaReserved", "False", reason, max_quota_message(q, sh, rnd), evaluated))
            wl.condition(pods_not_ready(created))
        elif kind_of_state == "preempting":
            n = rnd.randint(1, 4)
            reason = "Pending" if rnd.random() < 0.65 else "WaitingForPreemptedWorkloads"
            wl.condition(condition("QuotaReserved", "False", reason, unused_quota_message(q, sh, rnd) +
                                   f". Pending the preemption of {n} workload(s)", evaluated))
        elif kind_of_state == "checks" and q.checks:  # quota reserved, admission check pending
            at = ago(rnd.uniform(1, 60))
            admit(wl, q, sh, rnd, held)
            wl.condition(quota_reserved(q.cq, at)).admission_check("prov-req", "Pending", rnd.choice((
                "Waiting for resources. Currently there are not enough resources available to fulfill the request.",
                "Provisioning Request was successfully queued.", "")), at)
            state = "reserving"
        elif kind_of_state in ("unevaluated", "checks"):  # queued, not evaluated yet
            if rnd.random() < 0.35:
                wl.condition(condition("QuotaReserved", "False", "PendingEvaluation",
                                       "Workload is pending evaluation in the scheduling queue", created))
        elif kind_of_state == "finished":
            at = ago(rnd.uniform(1, 60))
            wl.conditions(quota_reserved(q.cq, ago(120)), admitted(ago(120)), pods_ready(ago(110)),
                          condition("Finished", "True", rnd.choice(("Succeeded", "Succeeded", "Failed")),
                                    rnd.choice(("Job finished successfully", "Job has reached the specified backoff "
                                                "limit")), at))
            state = "finished"
        elif kind_of_state == "being-preempted" and admitted_uids:  # evicted, still holding quota
            by_uid, by_job, by_q = rnd.choice(admitted_uids)
            kind, why = rnd.choice(PREEMPTION_KINDS)
            msg = preempted_message(by_uid, by_job, why, f"/{by_q.cohort}/{by_q.cq}", f"/{q.cohort}/{q.cq}")
            at = ago(rnd.uniform(0, 2))
            admit(wl, q, sh, rnd, held)
            wl.conditions(quota_reserved(q.cq, ago(90)), admitted(ago(90)), pods_ready(ago(85)),
                          condition("Evicted", "True", "Preempted", msg, at), condition("Preempted", "True", kind, msg,
                                                                                        at))
            state = "admitted"
        elif kind_of_state in ("backoff", "being-preempted"):  # backed off after a PodsReady timeout
            msg = f"Exceeded the PodsReady timeout {q.namespace}/{wl.name}"
            at = ago(rnd.uniform(1, 5))
            wl.conditions(condition("Evicted", "True", "PodsReadyTimeout", msg, at),
                          condition("Requeued", "False", "PodsReadyTimeout", msg, at),
                          condition("QuotaReserved", "False", "Pending", msg, at), pods_not_ready(at))
            wl.requeue_state(rnd.randint(1, 5), ago(-rnd.uniform(1, 30))).eviction_stats("PodsReadyTimeout",
                                                                                          "WaitForStart")
        elif kind_of_state == "no-local-queue":
            typo = rnd.choice(("default", "gpu", "main-queue", "user-queue", f"{lq}s"))
            wl.queue(typo).condition(condition("QuotaReserved", "False", rnd.choice(("Inadmissible", "Misconfigured")),
                                               f"LocalQueue {typo} doesn't exist", evaluated))
        elif kind_of_state == "no-flavor":  # no flavor matches / namespace not selected
            text = rnd.choice((
                f"couldn't assign flavors to pod set {sh.podsets[0][0]}: resource example.com/fpga unavailable in "
                "ClusterQueue",
                "workload namespace doesn't match ClusterQueue selector",
                f"couldn't assign flavors to pod set {sh.podsets[-1][0]}: flavor {q.cpu_flavors[0]} doesn't match "
                "node affinity"))
            wl.condition(condition("QuotaReserved", "False", rnd.choice(("Pending", "NoMatchingFlavor")), text,
                                   evaluated))
        elif kind_of_state == "deactivated":
            wl.active(False).conditions(condition("Evicted", "True", "Deactivated", "The workload is deactivated",
                                                  evaluated),
                                        condition("QuotaReserved", "False", "Pending", "The workload is deactivated",
                                                  evaluated))
        else:  # check-retry: requeued after a failed admission check, backing off
            msg = 'Evicted due to AdmissionCheck in Retry state: "prov-req" (Retrying after failure: capacity)'
            wl.conditions(condition("Evicted", "True", "AdmissionCheck", msg, evaluated),
                          condition("Requeued", "False", "AdmissionCheck", msg, evaluated),
                          condition("QuotaReserved", "False", "Pending", msg, evaluated))
            wl.requeue_state(1, ago(-rnd.uniform(1, 10)))
        c[state] += 1
        c[f"{state}/{lq}"] += 1
        if state == "admitted":
            c["reserving"] += 1
            c[f"reserving/{lq}"] += 1
        objs.append(wl.obj())
    return [*flavor_objects(), *queue_objects(queues, reserved, counts, rnd), *objs]


# ---------------------------------------------------------------------------------------------- pods

@dataclass
class NodeSpec:
    name: str
    labels: dict[str, str]
    taints: list[str]  # taint keys (effect NoSchedule)
    allocatable: dict[str, str]
    cordoned: bool = False


def nodes_40() -> list[NodeSpec]:
    """40 Nodes: (count, capacity type, instance family, GPU product, allocatable)."""
    pools = [(12, "on-demand", "m7i", None, {"cpu": "63770m", "memory": "248Gi", "pods": "110"}),
             (4, "on-demand", "r7i", None, {"cpu": "95690m", "memory": "744Gi", "pods": "110"}),
             (6, "spot", "m7i", None, {"cpu": "63770m", "memory": "248Gi", "pods": "110"}),
             (4, "reserved", "c7i", None, {"cpu": "191450m", "memory": "364Gi", "pods": "110"}),
             (6, "reserved", "p5", "NVIDIA-H100-80GB-HBM3", {"cpu": "191450m", "memory": "1900Gi", "pods": "110",
                                                             GPU: "8"}),
             (6, "on-demand", "p4d", "NVIDIA-A100-SXM4-80GB", {"cpu": "95690m", "memory": "1100Gi", "pods": "110",
                                                               GPU: "8"}),
             (2, "spot", "g6", "NVIDIA-L4", {"cpu": "47690m", "memory": "180Gi", "pods": "110", GPU: "4"})]
    out = []
    for count, capacity, family, product, alloc in pools:
        for i in range(count):
            labels = {CAPACITY: capacity, FAMILY: family, "node.kubernetes.io/instance-type": f"{family}.24xlarge",
                      "topology.kubernetes.io/zone": f"eu-west-1{'abc'[i % 3]}"}
            taints = [GPU] if product else []
            if product:
                labels[PRODUCT] = product
            if capacity == "spot":
                taints.append(CAPACITY)
            k = len(out)
            out.append(NodeSpec(f"ip-10-0-{k // 200}-{k % 200 + 20}.eu-west-1.compute.internal", labels, taints,
                                alloc, cordoned=(i == count - 1 and family in ("m7i", "p4d") and capacity != "spot")))
    return out


def node_object(n: NodeSpec) -> Obj:
    node = Node(n.name).labels(n.labels).capacity(n.allocatable).heartbeat(ago(0.5))
    for key in n.taints:
        node.taint(key, "present" if key == GPU else "spot", "NoSchedule")
    return (node.unschedulable() if n.cordoned else node).obj()


def _histogram(items: Counter[str]) -> str:
    """kube-scheduler's reason histogram: "<n> <reason>" items sorted as strings, joined by ", "."""
    return ", ".join(sorted(f"{n} {reason}" for reason, n in items.items() if n))


def fit_error(nodes: list[NodeSpec], selector: dict[str, str], tolerated: set[str], short: list[str],
              rnd: random.Random) -> str:
    """kube-scheduler 1.36's FailedScheduling text for a Pod no Node fits (K pkg/scheduler/framework/types.go).

    Filters run in the default order and a Node reports its first failure: NodeUnschedulable, TaintToleration,
    NodeAffinity, then NodeResourcesFit (every short resource of that Node). PostFilter: DynamicResources, then
    DefaultPreemption ("Preemption is not helpful" where evicting Pods cannot help).
    """
    filters: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    for n in nodes:
        if n.cordoned:
            filters["node(s) were unschedulable"] += 1
        elif any(t not in tolerated for t in n.taints):
            filters["node(s) had untolerated taint(s)"] += 1
        elif any(n.labels.get(k) != v for k, v in selector.items()):
            filters["node(s) didn't match Pod's node affinity/selector"] += 1
        else:
            missing = [r for r in short if rnd.random() < 0.5] or [rnd.choice(short)]
            for r in missing:
                filters[f"Insufficient {r}"] += 1
            if rnd.random() < 0.05:
                filters["Too many pods"] += 1
            preemption["No preemption victims found for incoming pod" if rnd.random() < 0.85 else
                       "Preemption is not helpful for scheduling"] += 1
            continue
        preemption["Preemption is not helpful for scheduling"] += 1
    head = f"0/{len(nodes)} nodes are available: {_histogram(filters)}. no new claims to deallocate, "
    if rnd.random() < 0.05:
        return head + "preemption: not eligible due to preemptionPolicy=Never."
    return head + f"preemption: 0/{len(nodes)} nodes are available: {_histogram(preemption)}."


def fits(n: NodeSpec, selector: dict[str, str], tolerated: set[str]) -> bool:
    return (not n.cordoned and all(t in tolerated for t in n.taints)
            and all(n.labels.get(k) == v for k, v in selector.items()))


def placements(q: Queue, nodes: list[NodeSpec]) -> tuple[list[tuple[str, str]], list[str]]:
    """(cpu flavor, GPU flavor) pairs and cpu flavors of ``q`` whose merged nodeLabels some Node fits."""
    gpu_pairs, cpu_only = [], []
    for c in q.cpu_flavors:
        tolerated = {CAPACITY} if c == "spot" else set()
        if any(fits(n, CPU_FLAVORS[c], tolerated) for n in nodes):
            cpu_only.append(c)
        for g in q.gpu_flavors:
            selector = {**CPU_FLAVORS[c], **GPU_FLAVORS[g]}
            if any(fits(n, selector, tolerated | {GPU}) for n in nodes):
                gpu_pairs.append((c, g))
    return gpu_pairs, cpu_only


def pods_mix(n_workloads: int, n_queues: int, seed: int = 13, per_workload: int = 5) -> list[Obj]:
    rnd = random.Random(seed)
    queues = [q for q in fleet(n_queues, rnd) if not q.stopped] or fleet(n_queues, rnd)
    nodes = nodes_40()
    reserved: dict[str, Counter[tuple[str, str]]] = {}
    counts: dict[str, Counter[str]] = {}
    objs: list[Obj] = []
    n_admitted = n_workloads * 6 // 10
    pending_pattern = (0, 5, 2, 3, 5, 0)  # Pending Pods per admitted Workload: half of all Pods
    preemptors: list[tuple[str, str]] = []  # (Workload UID, Job UID) of admitted Workloads
    for w in range(n_workloads):
        q = queues[w % len(queues)]
        lq = q.local_queues[w % len(q.local_queues)]
        created = ago(rnd.uniform(10, 240))
        c = counts.setdefault(q.cq, Counter())
        held = reserved.setdefault(q.cq, Counter())
        if w >= n_admitted:
            objs.append(not_admitted(w, q, lq, created, rnd, c, preemptors))
            continue
        gpu_pairs, cpu_only = placements(q, nodes)
        gpu = bool(gpu_pairs) and rnd.random() < 0.7
        cpu_flavor, gpu_flavor = rnd.choice(gpu_pairs) if gpu else (rnd.choice(cpu_only), None)
        per_pod = {"cpu": rnd.choice((500, 1000, 2000, 4000, 8000)), "memory": rnd.choice((1024, 4096, 16384))}
        if gpu:
            per_pod[GPU] = rnd.choice((1, 2, 4))
        if q.covers_pods:
            per_pod["pods"] = 1
        owner = f"{rnd.choice(VERBS)}-{rnd.choice(MODELS)}-{w:05d}"
        sh = Shape("Job", owner, [("main", per_workload, per_pod)], gpu)
        wl, job = workload_of(sh, q, lq, created, rnd.choice((0, 100, 1000)))
        assert job is not None
        preemptors.append((wl.get_uid(), job.get_uid()))
        flavors = {r: (gpu_flavor if r == GPU else cpu_flavor) or cpu_flavor for r in per_pod}
        wl.admission(Admission(q.cq).assignment(count=per_workload, flavors=flavors, usage={
            r: amount(r, v * per_workload) for r, v in per_pod.items()}))
        for r, v in per_pod.items():
            held[flavors[r], r] += v * per_workload
        at = ago(rnd.uniform(2, 90))
        n_pending = pending_pattern[w % len(pending_pattern)]
        wl.conditions(quota_reserved(q.cq, at), admitted(at), pods_ready(ago(rnd.uniform(0, 2))) if n_pending == 0
                      else pods_not_ready(at))
        # what Kueue merged into the Job's template at start: every assigned flavor's nodeLabels and tolerations
        selector = {**CPU_FLAVORS[cpu_flavor], **(GPU_FLAVORS[gpu_flavor] if gpu_flavor else {})}
        tolerated = ({CAPACITY} if cpu_flavor == "spot" else set()) | ({GPU} if gpu else set())
        tolerations = [toleration(CAPACITY, "Equal", "spot", "NoSchedule")] if cpu_flavor == "spot" else []
        tolerations += [toleration(GPU, "Exists", effect="NoSchedule")] if gpu else []
        job.node_selector(selector).suspend(False).status(active=per_workload, ready=per_workload - n_pending,
                                                          startTime=at)
        for t in tolerations:
            job.toleration(t)
        objs.append(job.obj())
        short = [GPU, "cpu"] if gpu else ["cpu", "memory"]
        candidates = [n.name for n in nodes if fits(n, selector, tolerated)]
        for p in range(per_workload):
            suffix = "".join(ch for ch in hashlib.sha1(f"{wl.name}/{p}".encode()).hexdigest() if ch.isalpha())
            pod = (Pod(f"{owner}-{(suffix + 'xxxxx')[:5]}", q.namespace).owner(job).workload(wl.name)
                   .queues(lq, q.cq).created(at).image(pod_image(sh)).node_selector(selector))
            for t in tolerations:
                pod.toleration(t)
            for r, v in per_pod.items():
                if r != "pods":
                    pod.request(r, amount(r, v))
            if gpu:
                pod.limit(GPU, str(per_pod[GPU]))
            if p < n_pending:
                message = fit_error(nodes, selector, tolerated, short, rnd)
                pod.unschedulable(message, at)
                if rnd.random() < 0.35:  # its FailedScheduling Event: the newest attempt, sometimes another text
                    note = message if rnd.random() < 0.7 else fit_error(nodes, selector, tolerated, short, rnd)
                    ev = Event(pod, "FailedScheduling", note, api=rnd.choice(("v1", "events.k8s.io/v1")),
                               at=ago(rnd.uniform(0, 5)))
                    ev.reporting("default-scheduler", "default-scheduler-7d9f8b6c5-x2x9q", "Scheduling")
                    objs.append(ev.series(rnd.randint(2, 40), ago(rnd.uniform(0, 1))).obj())
            else:
                node = rnd.choice(candidates)
                pod.node(node).running(ago(rnd.uniform(1, 60)))
                if rnd.random() < 0.04:  # a readiness probe failed a while ago, the kubelet said so
                    objs.append(Event(pod, "Unhealthy", f'Readiness probe failed: Get "http://10.244.{p}.17:8080/'
                                      'healthz": context deadline exceeded (Client.Timeout exceeded while awaiting '
                                      'headers)', at=ago(rnd.uniform(30, 60))).source("kubelet", node)
                                .count(rnd.randint(1, 12)).obj())
            objs.append(pod.obj())
        for key in ("admitted", "reserving"):
            c[key] += 1
            c[f"{key}/{lq}"] += 1
        objs.append(wl.obj())
    return [*flavor_objects(), *(node_object(n) for n in nodes), *queue_objects(queues, reserved, counts, rnd), *objs]


def not_admitted(w: int, q: Queue, lq: str, created: str, rnd: random.Random, c: Counter[str],
                 preemptors: list[tuple[str, str]]) -> Obj:
    """The pods mix's other Workloads: waiting for quota, too big, finished, or preempted and requeued."""
    sh = shape(rnd, w, q)
    wl, _job = workload_of(sh, q, lq, created, rnd.choice((0, 100, 1000)))
    roll = rnd.random()
    evaluated = ago(rnd.uniform(0, 20))
    if roll < 0.6:
        reason = "Pending" if rnd.random() < 0.65 else "WaitingForQuota"
        wl.conditions(condition("QuotaReserved", "False", reason, unused_quota_message(q, sh, rnd), evaluated),
                      pods_not_ready(created))
    elif roll < 0.7:
        wl.conditions(condition("QuotaReserved", "False", "Pending", max_quota_message(q, sh, rnd), evaluated))
    elif roll < 0.85:
        wl.conditions(quota_reserved(q.cq, ago(200)), admitted(ago(200)), pods_ready(ago(190)),
                      condition("Finished", "True", "Succeeded", "Job finished successfully", ago(rnd.uniform(1, 60))))
    elif roll < 0.92:
        kind, why = rnd.choice(PREEMPTION_KINDS)
        by_uid, by_job = rnd.choice(preemptors)
        msg = preempted_message(by_uid, by_job, why, f"/{q.cohort}/{q.cq}", f"/{q.cohort}/{q.cq}")
        wl.conditions(condition("Evicted", "True", "Preempted", msg, evaluated),
                      condition("Preempted", "True", kind, msg, evaluated),
                      condition("Requeued", "True", "Preempted", msg, evaluated),
                      condition("QuotaReserved", "False", "Pending", unused_quota_message(q, sh, rnd), evaluated))
    c["pending"] += 1
    c[f"pending/{lq}"] += 1
    return wl.obj()


def pod_image(sh: Shape) -> str:
    return f"registry.example.com/ml/{sh.owner_name.split('-')[1]}:2026.11.{len(sh.owner_name) % 9}"


# ---------------------------------------------------------------------------------------------- measuring

MIXES: dict[str, Callable[[int, int], list[Obj]]] = {"current": current_mix, "quota": quota_mix, "pods": pods_mix}


def _clear_caches() -> None:
    """Empty every parse/format cache of the engine, so a round starts cold like a first pass over a fresh
    snapshot (within a pass the caches still serve the messages Kueue repeats across Workloads)."""
    clear_parse_caches()


def best(fn: Callable[[], object], rounds: int, setup: Callable[[], object] = lambda: None) -> float:
    """The shortest of `rounds` runs of `fn`, each after `setup` (untimed) and a full collection."""
    times = []
    for _ in range(rounds):
        setup()
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


@dataclass
class Result:
    mix: str
    kinds: Counter[str]
    objects: int
    workloads: int
    mb: float
    json_s: float
    json_paused_s: float
    engine_s: float
    peak_mb: float
    verdicts: Counter[str]
    distinct_messages: int
    out_mb: float  # the diagnoses as JSON: what the engine builds, beside what it reads
    json_out_paused_s: float  # json.loads of that output, collector paused: C speed building the same objects

    @property
    def ratio(self) -> float:
        return self.engine_s / self.json_s

    @property
    def ratio_paused(self) -> float:
        return self.engine_s / self.json_paused_s


def measure(mix: str, objs: list[Obj], rounds: int) -> Result:
    """Serialize the mix (and let go of the built objects), then time both sides."""
    texts = [json.dumps(o) for o in objs]
    kinds = Counter(o["kind"] if o["kind"] != "Event" else f"Event({o['apiVersion']})" for o in objs)
    distinct = len({c.get("message") for o in objs if o["kind"] == "Workload"
                    for c in o["status"].get("conditions", []) if c.get("type") == "QuotaReserved"} |
                   {c.get("message") for o in objs if o["kind"] == "Pod"
                    for c in o["status"].get("conditions", []) if c.get("type") == "PodScheduled"})
    del objs

    def decode() -> list[Any]:
        return [json.loads(t) for t in texts]

    decoded = decode()

    def engine() -> list[dict[str, Any]]:
        return diagnose(ClusterState.from_objects(decoded), NOW)

    def decode_paused() -> list[Any]:
        gc.disable()
        try:
            return decode()
        finally:
            gc.enable()

    result = engine()  # warm-up: imports, regex compilation
    _clear_caches()
    t_json = best(decode, rounds)
    t_json_paused = best(decode_paused, rounds)
    t_engine = best(engine, rounds, setup=_clear_caches)  # emptying the memos is the round's set-up, not its work
    _clear_caches()
    tracemalloc.start()
    engine()
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    verdicts = Counter(d["status"]["reason"] for d in result)
    out_texts = [json.dumps(d) for d in result]
    del result

    def decode_out_paused() -> list[Any]:
        gc.disable()
        try:
            return [json.loads(t) for t in out_texts]
        finally:
            gc.enable()

    t_json_out = best(decode_out_paused, rounds)
    return Result(mix, kinds, len(texts), kinds["Workload"], sum(map(len, texts)) / 1e6, t_json, t_json_paused,
                  t_engine, peak / 1e6, verdicts, distinct, sum(map(len, out_texts)) / 1e6, t_json_out)


def report(r: Result, rounds: int, engine_name: str = "python") -> None:
    n = r.workloads
    kinds = ", ".join(f"{v} {k}" for k, v in r.kinds.most_common())
    print(f"== mix {r.mix}, {engine_name} engine: {r.objects} objects ({kinds}), "
          f"{r.mb:.1f} MB of JSON, {r.distinct_messages} distinct QuotaReserved/PodScheduled messages; "
          f"best of {rounds} rounds")
    print(f"json.loads of all objects : {r.json_s * 1e3:8.1f} ms  ({r.json_s / n * 1e6:6.1f} us per Workload)")
    print(f"  the same, collector paused: {r.json_paused_s * 1e3:6.1f} ms  "
          f"({r.json_paused_s / n * 1e6:6.1f} us per Workload)")
    print(f"engine (state + diagnose) : {r.engine_s * 1e3:8.1f} ms  ({r.engine_s / n * 1e6:6.1f} us per Workload)")
    print(f"ratio engine / json.loads : {r.ratio:8.2f}   (target <= 1.0)")
    print(f"  the same, collector paused: {r.ratio_paused:6.2f}   (the work alone)")
    print(f"engine peak allocation    : {r.peak_mb:8.1f} MB (tracemalloc)")
    print(f"output (the diagnoses)    : {r.out_mb:8.1f} MB of JSON; json.loads of it, collector paused, "
          f"{r.json_out_paused_s * 1e3:.1f} ms: {r.json_out_paused_s / r.json_paused_s:.2f}x the input's (context)")
    print("verdicts: " + ", ".join(f"{k}={v}" for k, v in sorted(r.verdicts.items())), flush=True)


def table(rows: list[tuple[str, Result]]) -> None:
    print(f"{'mix':<8} {'engine':<9} {'objects':>8} {'MB':>6} {'json.loads ms':>14} {'paused ms':>10} "
          f"{'engine ms':>10} {'ratio':>6} {'paused':>7} {'peak MB':>8} {'out MB':>7}")
    for engine_name, r in rows:
        print(f"{r.mix:<8} {engine_name:<9} {r.objects:>8} {r.mb:>6.1f} {r.json_s * 1e3:>14.1f} "
              f"{r.json_paused_s * 1e3:>10.1f} {r.engine_s * 1e3:>10.1f} {r.ratio:>6.2f} {r.ratio_paused:>7.2f} "
              f"{r.peak_mb:>8.1f} {r.out_mb:>7.1f}")


def child_result(mix: str, args: argparse.Namespace, site: str) -> Result:
    """The mix measured by a child process that imports the package found in `site` (its own json.loads too)."""
    out = subprocess.run([sys.executable, __file__, "--mix", mix, "--workloads", str(args.workloads), "--queues",
                          str(args.queues), "--rounds", str(args.rounds), "--engine-path", site, "--json"],
                         check=True, capture_output=True, text=True).stdout
    data = json.loads(out.strip().splitlines()[-1])
    data["kinds"], data["verdicts"] = Counter(data["kinds"]), Counter(data["verdicts"])
    return Result(**data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mix", choices=[*MIXES, "all"], default="all")
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compiled", action="store_true",
                    help="also measure the mypyc-compiled package (hack/compiled.sh builds it), side by side")
    ap.add_argument("--engine-path", help="measure the package found in this directory (read before import)")
    ap.add_argument("--json", action="store_true", help="print each result as one JSON line (for --compiled)")
    ap.add_argument("--dump", action="store_true",
                    help="measure nothing: print every diagnosis of each mix, one JSON line each (for comparing "
                         "two engines: tests/compiled/test_compiled.py)")
    args = ap.parse_args()
    if args.dump:
        for mix in MIXES if args.mix == "all" else [args.mix]:
            for d in diagnose(ClusterState.from_objects(MIXES[mix](args.workloads, args.queues)), NOW):
                print(json.dumps(d, sort_keys=True))
        return
    site = subprocess.run(["bash", str(ROOT / "hack" / "compiled.sh")], check=True, capture_output=True,
                          text=True).stdout.strip() if args.compiled else None
    if site is not None:
        print(f"(pure engine from {ROOT / 'operator'}; compiled from {site})", file=sys.stderr)
    rows: list[tuple[str, Result]] = []
    for mix in MIXES if args.mix == "all" else [args.mix]:
        if site is not None:  # each engine in a fresh child: the same heap, so json.loads' collector does the same
            for name, path in (("python", str(ROOT / "operator")), ("compiled", site)):
                rows.append((name, child_result(mix, args, path)))
                report(rows[-1][1], args.rounds, name)
                print()
            continue
        t0 = time.perf_counter()
        result = measure(mix, MIXES[mix](args.workloads, args.queues), args.rounds)
        print(f"(built and measured the {mix} mix in {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        if args.json:
            print(json.dumps(result.__dict__), flush=True)
            continue
        rows.append((ENGINE_NAME, result))
        report(result, args.rounds, ENGINE_NAME)
        print()
        gc.collect()
    if len(rows) > 1:
        table(rows)


if __name__ == "__main__":
    main()
