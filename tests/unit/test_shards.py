"""Namespace shards (`--total-shards/--shard-index`): the partition, what a shard keeps, diagnoses and leads."""

from __future__ import annotations

import copy
import io
import marshal
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kueue_doctor.cli import build_parser, election_config, main, shard_of
from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.kube.kueue_config import CONFIG_MAP
from kueue_doctor.kube.load import load_files, newest_timestamp
from kueue_doctor.kube.shards import SPACE, Shard, fnv1a64, plan
from kueue_doctor.kube.slim import foreign_workload, slim
from kueue_doctor.live.inbox import Inbox
from kueue_doctor.live.kueue_install import DEPLOYMENT
from kueue_doctor.live.metrics import Stats
from kueue_doctor.live.orphans import diagnosis_keys
from kueue_doctor.live.publisher import Publisher
from kueue_doctor.live.snapshot import list_all, listings, narrowed
from kueue_doctor.state import ClusterState, Key
from tests.builders import ClusterQueue, LocalQueue, Pod, ResourceFlavor

from .apiserver import FakeApiServer, collection_path
from .scenario import waiting

NAMES = [f"team-{i}" for i in range(2000)] + ["default", "kube-system", "kueue-system", "ml", "a" * 63]


def test_the_hash_is_go_s_fnv1a_64() -> None:
    """The apiserver's sharded list/watch (KEP-5866) hashes with Go's hash/fnv New64a: published test vectors."""
    assert fnv1a64("") == 0xCBF29CE484222325
    assert fnv1a64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a64("foobar") == 0x85944171F73967E8


@pytest.mark.parametrize("total", [1, 2, 3, 4, 7])
def test_every_namespace_belongs_to_exactly_one_shard_and_the_shards_are_balanced(total: int) -> None:
    shards = [Shard(i, total) for i in range(total)]
    owners = {ns: [s.index for s in shards if s.owns(ns)] for ns in NAMES}
    assert all(len(o) == 1 for o in owners.values()), {ns: o for ns, o in owners.items() if len(o) != 1}
    counts = [sum(1 for o in owners.values() if o == [i]) for i in range(total)]
    assert min(counts) > 0.8 * len(NAMES) / total, counts  # no shard starved: the hash spreads names


def test_the_partition_is_the_same_in_every_process() -> None:
    """Python's hash() is salted per process; two replicas must agree on who owns a namespace."""
    code = ("import sys; sys.path.insert(0, 'operator'); from kueue_doctor.kube.shards import Shard; "
            "print([Shard(0, 3).of(f'team-{i}') for i in range(50)])")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert runs == {str([Shard(0, 3).of(f"team-{i}") for i in range(50)]) + "\n"}
    assert [Shard(0, 2).of(ns) for ns in ("default", "team-a", "team-b", "ml")] == [
        fnv1a64(ns) % 2 for ns in ("default", "team-a", "team-b", "ml")]


def test_names_that_differ_only_at_their_end_spread_over_the_shards() -> None:
    """team-a ... team-z: a split of the hash into ranges (KEP-5866's shardRange) would put all 26 in one shard."""
    teams = [f"team-{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
    for total in (2, 3, 4):
        counts = [sum(1 for ns in teams if Shard(i, total).owns(ns)) for i in range(total)]
        assert min(counts) >= len(teams) // total - 1, (total, counts)


def test_cluster_scoped_objects_workloads_and_local_queues_go_to_every_shard_the_rest_only_to_its_own() -> None:
    mine, theirs = next((a, b) for a in NAMES for b in NAMES if Shard(0, 2).owns(a) and not Shard(0, 2).owns(b))
    shard = Shard(0, 2)
    assert shard.keeps(ClusterQueue("cq").obj()) and shard.keeps(ResourceFlavor("rf").obj())
    assert shard.keeps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": theirs}})
    assert shard.keeps(LocalQueue("lq", theirs, "cq").obj())  # ClusterQueue-level facts read every Workload
    wl = waiting().obj()
    wl["metadata"]["namespace"] = theirs
    assert shard.keeps(wl) and not shard.owns(theirs)  # kept for queue positions, never diagnosed here
    assert shard.keeps(Pod("p", mine).obj()) and not shard.keeps(Pod("p", theirs).obj())
    # bound or not: the operator reads no Nodes, so no verdict counts another namespace's Pods on a node
    assert not shard.keeps(Pod("p", theirs).node("n1").request("cpu", "2").obj())
    diagnosis = {"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
                 "metadata": {"name": "x", "namespace": theirs}}
    assert not shard.keeps(diagnosis)
    assert all(Shard(0, 1).keeps(o) for o in (Pod("p", theirs).obj(), diagnosis))  # unsharded: everything


def test_a_shard_diagnoses_only_its_own_namespaces_workloads_and_drops_the_others_pods() -> None:
    mine, theirs = next((a, b) for a in NAMES for b in NAMES if Shard(1, 2).owns(a) and not Shard(1, 2).owns(b))
    objs = [ResourceFlavor("default-flavor").obj(), ClusterQueue("cq-a").obj()]
    for ns in (mine, theirs):
        wl = copy.deepcopy(waiting().obj())
        wl["metadata"]["namespace"] = ns
        objs.append(wl)
    state = ClusterState.from_objects(objs)
    box = Inbox(state, Stats(), Publisher(api=None), {}, Shard(1, 2))
    box.mark(state.workloads)
    assert {ns for ns, _ in box.take()} == {mine}
    box.observe("ADDED", Pod("p-theirs", theirs).obj())
    box.observe("ADDED", Pod("p-mine", mine).obj())
    box.drain()
    assert list(state.pods) == [(mine, "p-mine")]
    assert box.stats.events["Pod"] == 2  # still received and decoded: the filtering is client-side


@pytest.mark.parametrize("total", [2, 3, 4, 7])
def test_planned_ranges_balance_the_workloads_and_give_every_namespace_one_shard(total: int) -> None:
    weights = {ns: 1 + fnv1a64(ns) % 40 for ns in NAMES}  # uneven namespaces, as clusters have
    cuts = plan(weights, total)
    shards = [Shard(i, total, cuts) for i in range(total)]
    assert not shards[0].problems()
    owners = {ns: [s.index for s in shards if s.owns(ns)] for ns in NAMES}
    assert all(len(o) == 1 for o in owners.values())
    load = [sum(w for ns, w in weights.items() if owners[ns] == [i]) for i in range(total)]
    assert max(load) - min(load) <= 2 * max(weights.values()), load  # even, but for one namespace's weight
    teams = {f"team-{c}": 1 for c in "abcdefghijklmnopqrstuvwxyz"}  # equal ranges put all 26 in one shard
    cuts = plan(teams, total)
    counts = [sum(1 for ns in teams if Shard(i, total, cuts).owns(ns)) for i in range(total)]
    assert min(counts) >= len(teams) // total - 1, counts


def hex_less(a: str, b: str) -> bool:
    """The apiserver's comparison of two bounds (k8s.io/apimachinery/pkg/sharding.HexLess)."""
    return len(a) < len(b) if len(a) != len(b) else a < b


def test_a_ranged_shard_keeps_exactly_what_the_apiserver_sends_it() -> None:
    """Where the apiserver serves KEP-5866 it filters by the shardSelector; where not, `owns` must agree with it
    namespace by namespace, or an object would reach no shard, or two."""
    cuts = plan({ns: 1 for ns in NAMES}, 3)
    for index in range(3):
        shard = Shard(index, 3, cuts)
        selector = shard.selector
        assert selector is not None and selector.startswith("shardRange(object.metadata.namespace, '0x")
        start, end = (part.strip(" ')") for part in selector.split(",")[1:])
        assert (start == "0x0000000000000000") == (index == 0) and (end == "0x10000000000000000") == (index == 2)
        for ns in NAMES:
            served = f"0x{fnv1a64(ns):016x}"
            assert shard.owns(ns) == (not hex_less(served, start) and hex_less(served, end)), ns
    assert Shard(0, 2).selector is None and Shard(0, 1, ()).selector is None  # modulo: nothing to ask


def test_a_ranged_shard_narrows_the_lists_of_what_it_keeps_only_its_own_of() -> None:
    shard = Shard(1, 2, (SPACE // 2,))
    by_kind = {lst.kind: narrowed(lst, shard) for lst in listings("v1beta2")}
    narrowed_kinds = {k for k, lst in by_kind.items() if any("shardSelector" in q for q in lst.selectors)}
    assert narrowed_kinds == {"Job", "Event", "JobSet", "RayJob", "RayCluster", "RayService", "MPIJob",
                              "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob", "AppWrapper",
                              "SparkApplication", "LeaderWorkerSet", "StatefulSet", "Deployment",
                              "Pod"}  # not Workloads, LocalQueues
    assert by_kind["Pod"].selectors == ({"labelSelector": "kueue.x-k8s.io/podset", "shardSelector": shard.selector},
                                        {"labelSelector": "kueue.x-k8s.io/pod-group-name,!kueue.x-k8s.io/podset",
                                         "shardSelector": shard.selector})
    assert by_kind["Job"].selectors == ({"labelSelector": "kueue.x-k8s.io/queue-name",
                                         "shardSelector": shard.selector},)
    assert narrowed(by_kind["Pod"], Shard(1, 2)) == by_kind["Pod"]  # modulo: never
    api = FakeApiServer()
    api.serve_list(collection_path("AdmissionDiagnosis"), "kueue-doctor.dev/v1alpha1", "AdmissionDiagnosis", [])
    diagnosis_keys(api, [], shard)
    assert [r.query.get("shardSelector") for r in api.requests] == [shard.selector]


def test_shard_plan_prints_the_boundaries_that_balance_the_workloads(tmp_path: Path) -> None:
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in NAMES[:40]]
    objects += [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                 "metadata": {"name": f"w{i}", "namespace": NAMES[i % 40]}} for i in range(400)]
    dump = tmp_path / "dump.json"
    dump.write_text(__import__("json").dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    out, err = io.StringIO(), io.StringIO()
    assert main(["shard-plan", "--total-shards", "2", "-f", str(dump)], stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    cuts = plan({ns: 10 for ns in NAMES[:40]}, 2)
    assert f"--total-shards=2 --shard-boundaries=0x{cuts[0]:016x}" in text
    rows = [line.split() for line in text.splitlines() if line[:1].isdigit() and "0x" in line]
    assert [r[2:4] for r in rows] == [["20", "200"], ["20", "200"]], text  # namespaces, Workloads per range
    assert main(["shard-plan", "--total-shards", "1", "-f", str(dump)], stdout=out, stderr=err) == 2


def test_the_shard_flags() -> None:
    parser = build_parser()
    def parse(*argv: str, host: str | None = None) -> tuple[object, str]:
        err = io.StringIO()
        return shard_of(parser.parse_args(["run", *argv]), err, host), err.getvalue()

    assert parse() == (Shard(0, 1), "")
    assert parse("--total-shards", "3", "--shard-index", "2") == (Shard(2, 3), "")
    assert parse("--total-shards", "3", "--shard-index-from-hostname", host="kueue-doctor-1") == (Shard(1, 3), "")
    assert parse("--total-shards", "3", "--shard-index-from-hostname", host="kueue-doctor-4") == (Shard(1, 3), "")
    code, err = parse("--total-shards", "2", "--shard-index", "2")
    assert code == 2 and "--shard-index must be between 0 and 1 for 2 shard(s) (got 2)" in err
    code, err = parse("--total-shards", "2", "--shard-index-from-hostname", host="laptop")
    assert code == 2 and "'laptop' does not end in -<ordinal>" in err
    code, err = parse("--total-shards", "2", "--shard-index", "0", "--shard-index-from-hostname", host="kd-1")
    assert code == 2 and "contradicts" in err
    half = "0x8000000000000000"
    assert parse("--total-shards", "2", "--shard-index", "1", "--shard-boundaries", half) == (
        Shard(1, 2, (SPACE // 2,)), "")
    code, err = parse("--total-shards", "3", "--shard-boundaries", half)
    assert code == 2 and "needs 2 cut point(s) for 3 shards, got 1" in err and "shard-plan --total-shards 3" in err
    code, err = parse("--total-shards", "3", "--shard-boundaries", f"{half},0x10")
    assert code == 2 and "must rise strictly" in err
    code, err = parse("--total-shards", "2", "--shard-boundaries", "half")
    assert code == 2 and "hex numbers separated by commas" in err


def test_each_shard_elects_its_own_leader_on_its_own_lease() -> None:
    args = build_parser().parse_args(["run", "--leader-elect", "--leader-elect-resource-namespace", "ops"])
    unsharded = election_config(args, io.StringIO(), Shard(0, 1))
    sharded = election_config(args, io.StringIO(), Shard(1, 2))
    assert not isinstance(unsharded, int) and unsharded is not None and unsharded.lease_name == "kueue-doctor"
    assert not isinstance(sharded, int) and sharded is not None and sharded.lease_name == "kueue-doctor-shard-1-of-2"


def test_a_shard_lists_only_its_own_pods_and_diagnoses_so_its_resync_never_touches_another_shards() -> None:
    """The resync deletes diagnoses it lists whose Workload is gone: listing another shard's would be a write fight
    (an owner's own diagnosis, whose owner only the other shard keeps, would look orphaned here)."""
    shard = Shard(0, 2)
    mine, theirs = next((a, b) for a in NAMES for b in NAMES if shard.owns(a) and not shard.owns(b))
    api = FakeApiServer()
    api.serve_list(collection_path("AdmissionDiagnosis"), "kueue-doctor.dev/v1alpha1", "AdmissionDiagnosis",
                   [{"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
                     "metadata": {"name": "job-a-00001", "namespace": ns, "uid": f"ad-{ns}"}} for ns in (mine, theirs)])
    api.serve_list(collection_path("Pod"), "v1", "Pod", [Pod("p", ns).workload("job-a-00001").obj()
                                                          for ns in (mine, theirs)])
    assert [ns for ns, _ in diagnosis_keys(api, [], shard)] == [mine]
    assert len(diagnosis_keys(api, [])) == 2  # unsharded: all
    pod_listing = next(lst for lst in listings("v1beta2") if lst.kind == "Pod")
    kept = list_all(api, pod_listing, keep=shard.keeps)
    assert kept is not None and [p["metadata"]["namespace"] for p in kept] == [mine]


def _sources() -> list[tuple[str, list[dict[str, Any]], datetime]]:
    """Every catalog scenario and every fixture recorded on the real control plane, as (name, objects, now)."""
    from tests.unit.test_catalog import PASSING, gen

    out = [(f"catalog {s['name']}", s["objects"], gen.parse_now(s["now"])) for s in PASSING]
    for path in sorted((Path(__file__).parents[1] / "e2e" / "fixtures").glob("*.yaml")):
        objects = [dict(o) for o in load_files([str(path)])]  # as `explain -f` reads a dump
        out.append((f"fixture {path.name}", objects, newest_timestamp(objects)))
    from .test_engine import NOW

    return [*out, ("StrictFIFO heap", _strict_fifo_heap(), NOW)]


def _strict_fifo_heap() -> list[dict[str, Any]]:
    """A StrictFIFO ClusterQueue whose oldest Workloads Kueue does not hold in its heap (in back-off, gated,
    parked for a namespace mismatch; all three of a higher priority), and a younger one boosted above the oldest
    held: it heads the queue, as Kueue's PriorityBoost feature gate (alpha, off by default) is on."""
    from tests.builders import condition

    from .test_engine import queue_setup, team_a_cq, workload

    short = condition("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient "
                      "unused quota for cpu in flavor default-flavor, 1 more needed")
    return [
        *queue_setup(team_a_cq().queueing_strategy("StrictFIFO")),
        workload("job-backoff-00001").created("2026-11-30T08:00:00Z").priority(100).condition(short).requeue_state(
            1, "2026-11-30T10:05:00Z").obj(),
        workload("job-gated-00002").created("2026-11-30T08:01:00Z").priority(100).annotation(
            "kueue.x-k8s.io/admission-gated-by", "example.com/budget").obj(),
        workload("job-parked-00003").created("2026-11-30T08:02:00Z").priority(100).condition(condition(
            "QuotaReserved", "False", "Inadmissible", "workload namespace doesn't match ClusterQueue selector")).obj(),
        workload("job-oldest-00004").created("2026-11-30T08:03:00Z").condition(short).obj(),
        workload("job-boosted-00005").created("2026-11-30T09:00:00Z").condition(short).annotation(
            "kueue.x-k8s.io/priority-boost", "10").obj(),
        workload("job-behind-00006").created("2026-11-30T09:30:00Z").condition(short).obj(),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
         "data": {"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
                  "kind: Configuration\nfeatureGates:\n  PriorityBoost: true\n"}},
    ]


def test_the_strict_fifo_head_is_the_first_workload_kueue_holds_in_its_heap() -> None:
    from tests.unit.test_engine import verdict

    st = verdict(_strict_fifo_heap(), "job-behind-00006")
    assert (st["cause"], [b["name"] for b in st["blockedBy"]]) == ("BlockedByQueueHead", ["job-boosted-00005"])


def test_the_priority_boost_counts_only_with_its_feature_gate_on() -> None:
    """Without the PriorityBoost gate (alpha in Kueue v0.19, off) Kueue ignores the annotation: the oldest heads."""
    from tests.unit.test_engine import verdict

    objects = [o for o in _strict_fifo_heap() if o.get("kind") != "ConfigMap"]
    st = verdict(objects, "job-behind-00006")
    assert (st["cause"], [b["name"] for b in st["blockedBy"]]) == ("BlockedByQueueHead", ["job-oldest-00004"])


def _shard_owning_only(mine: str, others: set[str]) -> Shard:
    """A shard partition in which `mine` is the only namespace of its shard."""
    for total in range(2, 500):
        shard = Shard(fnv1a64(mine) % total, total)
        if not any(shard.owns(ns) for ns in others - {mine}):
            return shard
    raise AssertionError(f"no partition separates {mine} from {others}")


# Kueue's ConfigMap and Deployment, in whatever namespace Kueue runs (kueue-system, openshift-kueue-operator ...)
_KUEUE_INSTALL = {("ConfigMap", CONFIG_MAP), ("Deployment", DEPLOYMENT)}


def _as_a_shard_keeps(objects: list[dict[str, Any]], key: Key, complete: set[str], dump: bool = False
                      ) -> ClusterState:
    """The state of the shard owning `key`'s namespace, built as the operator builds it (Shard.keeps, Shard.slim;
    Kueue's ConfigMap and Deployment are read by every shard), and stricter: the other Workloads of its own
    namespace are projected too, so every Workload but `key` (and the Workload slice it replaces, in its own
    namespace by construction) is read through its projection."""
    shard = _shard_owning_only(key[0], {o["metadata"].get("namespace") or "" for o in objects} - {""})
    state = ClusterState.packed()
    whole = {key}
    for obj in objects:
        md = obj["metadata"]
        if obj.get("kind") == "Workload" and (md.get("namespace"), md.get("name")) == key:
            replaced = (md.get("annotations") or {}).get("kueue.x-k8s.io/workload-slice-replacement-for", "")
            ns, _, replaced_name = replaced.partition("/")
            if replaced_name:
                whole.add((ns, replaced_name))
    for obj in objects:
        md, kind = obj["metadata"], obj.get("kind")
        if (kind, md.get("name")) in _KUEUE_INSTALL:
            state.upsert(slim(obj))  # live/kueue_install.py reads them (in --kueue-namespace) for every shard
        elif kind == "Workload" and (md.get("namespace"), md.get("name")) not in whole:
            state.upsert(foreign_workload(obj))
        elif shard.keeps(obj):
            state.upsert(shard.slim(obj))
    state.complete_kinds = set(complete)
    state.dump = dump  # read as the same dump (what a dump may have left out is judged alike)
    return state


def test_a_workload_gets_the_same_verdict_from_a_shard_as_from_one_replica() -> None:
    """What a shard keeps of other shards' objects (kube/slim.foreign_workload) is all that queue order,
    positions, StrictFIFO heads, victims and "nothing moved" read: each Workload of every scenario, diagnosed as
    a shard owning its namespace keeps the others, gets the verdict it gets from one replica holding everything.
    Both without Nodes, as the operator runs (it never reads them: `explain`, which does, is not sharded)."""
    checked = 0
    for label, every, now in _sources():
        objects = [o for o in every if o.get("kind") != "Node"]
        whole = ClusterState.from_objects([slim(o) for o in objects])
        expected = {(d["metadata"]["namespace"], d["metadata"]["name"]): d
                    for d in diagnose(whole, now, grace=timedelta(0))}
        for key, verdict in expected.items():
            state = _as_a_shard_keeps(objects, key, whole.complete_kinds, whole.dump)
            found = [d for d in diagnose(state, now, grace=timedelta(0))
                     if (d["metadata"]["namespace"], d["metadata"]["name"]) == key]
            assert found == [verdict], (label, key)
            checked += 1
    assert checked > 300  # the catalog's and the fixtures' Workloads and owners


def test_another_shards_workload_is_kept_as_a_small_projection_its_own_slimmed() -> None:
    mine, theirs = next((a, b) for a in NAMES for b in NAMES if Shard(0, 2).owns(a) and not Shard(0, 2).owns(b))
    shard = Shard(0, 2)
    wl = waiting().obj()
    wl["metadata"].update(namespace=theirs, labels={"team": "x"}, annotations={
        "kueue.x-k8s.io/priority-boost": "5", "example.com/note": "y" * 500})
    projected = shard.slim(wl)
    assert "podSets" not in projected["spec"] and "labels" not in projected["metadata"]
    assert projected["metadata"]["annotations"] == {"kueue.x-k8s.io/priority-boost": "5"}
    assert len(marshal.dumps(projected)) < 0.7 * len(marshal.dumps(slim(wl)))
    assert shard.slim(copy.deepcopy(wl) | {"metadata": {**wl["metadata"], "namespace": mine}}) == slim(
        copy.deepcopy(wl) | {"metadata": {**wl["metadata"], "namespace": mine}})  # its own: slimmed only


def test_a_shard_keeps_only_its_own_pods_and_its_resync_repairs_them() -> None:
    """Another shard's Pods, bound or not, are neither kept at start-up nor taken for missed by a resync (no
    verdict of the operator reads them: it reads no Nodes); a Pod of its own deleted in a watch gap goes."""
    import asyncio

    from kueue_doctor.live.runtime import Options, Runtime

    from .apiserver import METADATA_ONLY, cluster
    from .scenario import objects, start

    shard = Shard(fnv1a64("team-a") % 2, 2)
    theirs = next(ns for ns in NAMES if not shard.owns(ns))
    bound = [Pod(f"bound-{i}", theirs).workload("job-b-00001").node("n1").request("cpu", "1").obj() for i in range(2)]
    mine = [Pod(f"mine-{i}", "team-a").workload("job-a-00001").node("n1").obj() for i in range(2)]
    api = cluster([*objects(), *bound, *mine])
    rt = Runtime(api, Options(writes_per_second=0, shard=shard))
    asyncio.run(start(rt))
    assert set(rt.state.pods) == {("team-a", "mine-0"), ("team-a", "mine-1")}
    api.serve_list(collection_path("Pod"), "v1", "Pod", [*bound, mine[0]])  # mine-1 deleted in a watch gap
    before = len(api.requests)
    asyncio.run(rt.orphans.resync())
    assert set(rt.state.pods) == {("team-a", "mine-0")}
    # metadata only, once per selector (Kueue's podset label; gated Pod groups' Pods, by group label and those of
    # Kueue's LeaderWorkerSet and StatefulSet integrations)
    assert [METADATA_ONLY in r.accept for r in api.requests[before:]
            if r.path == collection_path("Pod")] == [True, True, True]
