"""What one AdmissionDiagnosis write costs the apiserver, by how it is written, side by side in one run.

The operator writes one diagnosis per changed verdict; under Kueue's own pace on a small control plane the
apiserver, not the operator, is the limit (docs/scale.md, session 10). This measures the apiserver's (and etcd's)
CPU seconds per write for each way of writing the same change to the same kind of object:

* ``apply``: server-side apply of the whole object, what the operator does (``live/rest.apply``);
* ``apply-ignore``: the same with ``fieldValidation=Ignore`` (the apiserver's default is ``Warn``: it looks for
  unknown and duplicate fields in every body, which ours, rendered from the CRD's own models, never have);
* ``apply-meta``: the same, answered as ``PartialObjectMetadata`` (the writer reads only the resourceVersion);
* ``apply-granular``: the same, to a copy of the CRD without ``x-kubernetes-map-type: atomic`` on spec and
  status (the apiserver then tracks and stores who owns each field, as it did before session 11);
* ``merge``: a JSON merge patch of the whole object;
* ``merge-diff``: a JSON merge patch of only the fields that changed (the message, ``since``);
* ``update``: a PUT of the whole object with the resourceVersion last read;
* ``configmap``: the yardstick, a JSON merge patch of a ConfigMap holding the same diagnosis as one string (no
  schema, a built-in kind).

Each way has its own N objects, created the way that writer would create them (``apply``: by apply, the others by
POST), so that no object carries another writer's managedFields. The bodies are the engine's own diagnoses of
``bench/engine.py``'s quota mix, without their ownerReferences (no Workload exists here, and the garbage
collector would delete them). Each round changes every object once per way, the ways in a rotating order, with
8 writer threads as in the operator; CPU comes from /proc of each process, so the bench's own client work does
not count. Reported per way: apiserver and etcd CPU ms per write (median of the rounds), writes per second, and
the stored object's size with its managedFields.

    python bench/write_cost.py [--objects 1000] [--rounds 5]     # ~6 min on 2 cores
    python bench/write_cost.py --objects 300 --rounds 1 --pprof apply   # and where the apiserver's time goes
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "operator")]

import engine  # noqa: E402  (bench/engine.py: the mixes and the engine)
import operator_scale as scale  # noqa: E402  (the keep-alive client, /proc readers, the local cluster)

WAYS = ("apply", "apply-ignore", "apply-meta", "apply-granular", "merge", "merge-diff", "update", "configmap")
GRANULAR_GROUP = "granular.kueue-doctor.dev"  # the same CRD with spec and status granular for server-side apply
THREADS = 8
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
MANAGER = "kueue-doctor"


def diagnoses(n: int) -> list[dict[str, Any]]:
    """n diagnoses as the engine renders them for the quota mix (3.4 KB each on average; the pods mix's 4.0 KB)."""
    objs = json.loads(json.dumps(engine.MIXES["quota"](n, 20)))
    engine.clear_parse_caches()
    return engine.diagnose(engine.ClusterState.from_objects(objs), engine.NOW)[:n]


def path_of(obj: dict[str, Any], named: bool = True) -> str:
    md = obj["metadata"]
    base = (f"/api/v1/namespaces/{md['namespace']}/configmaps" if obj["kind"] == "ConfigMap" else
            f"/apis/{obj['apiVersion']}/namespaces/{md['namespace']}/admissiondiagnoses")
    return f"{base}/{md['name']}" if named else base


def granular_crd(crd: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(crd)
    out["metadata"] = {"name": f"{crd['spec']['names']['plural']}.{GRANULAR_GROUP}"}
    out["spec"]["group"] = GRANULAR_GROUP
    for version in out["spec"]["versions"]:
        props = version["schema"]["openAPIV3Schema"]["properties"]
        for part in ("spec", "status"):
            props[part].pop("x-kubernetes-map-type", None)
    return out


def configmap(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(obj["metadata"]),
            "data": {"diagnosis": json.dumps({"spec": obj["spec"], "status": obj["status"]})}}


class Writer:
    """One way of writing: its objects, the resourceVersions it last saw, its request per object."""

    def __init__(self, api: scale.Api, way: str, objects: list[dict[str, Any]]) -> None:
        self.api, self.way = api, way
        self.objects = objects
        self.rv: dict[int, str] = {}

    def apply(self, obj: dict[str, Any]) -> Any:
        query = {"fieldManager": MANAGER, "force": "true"}
        if self.way == "apply-ignore":
            query["fieldValidation"] = "Ignore"
        accept = METADATA if self.way == "apply-meta" else "application/json"
        return self.api.request("PATCH", path_of(obj), obj, query=query, content_type="application/apply-patch+yaml",
                                accept=accept)

    def create(self, k: int) -> None:
        obj = self.objects[k]
        if self.way.startswith("apply"):
            out = self.apply(obj)
        elif self.way == "configmap":
            out = self.api.request("POST", path_of(configmap(obj), named=False), configmap(obj),
                                   query={"fieldManager": MANAGER})
        else:
            out = self.api.request("POST", path_of(obj, named=False), obj, query={"fieldManager": MANAGER})
        self.rv[k] = out["metadata"]["resourceVersion"]

    def change(self, k: int, rnd: int) -> None:
        """A verdict change: a new message and `since`, written this writer's way."""
        obj = self.objects[k]
        status = obj["status"]
        status["message"] = f"{status['message'].split(' [r')[0]} [r{rnd}]"
        status["since"] = f"2026-12-01T{rnd % 24:02d}:00:00Z"
        if self.way.startswith("apply"):
            out = self.apply(obj)
        elif self.way == "merge":
            out = self.api.request("PATCH", path_of(obj), obj, query={"fieldManager": MANAGER},
                                   content_type="application/merge-patch+json")
        elif self.way == "configmap":
            out = self.api.request("PATCH", path_of(configmap(obj)), {"data": configmap(obj)["data"]},
                                   query={"fieldManager": MANAGER}, content_type="application/merge-patch+json")
        elif self.way == "merge-diff":
            out = self.api.request("PATCH", path_of(obj),
                                   {"status": {"message": status["message"], "since": status["since"]}},
                                   query={"fieldManager": MANAGER}, content_type="application/merge-patch+json")
        else:
            body = copy.deepcopy(obj)
            body["metadata"]["resourceVersion"] = self.rv[k]
            out = self.api.request("PUT", path_of(obj), body, query={"fieldManager": MANAGER})
        self.rv[k] = out["metadata"]["resourceVersion"]


def profile(api: scale.Api, out: Path, pool: ThreadPoolExecutor, writer: Writer, n: int) -> None:
    """The apiserver's own CPU profile while `writer` writes, where its time per write goes."""
    done = threading.Event()

    def load() -> None:
        rnd = 1000
        while not done.is_set():
            list(pool.map(lambda k, r=rnd: writer.change(k, r), range(n)))
            rnd += 1

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    conn = api.connect(timeout=60)
    conn.request("GET", "/debug/pprof/profile?seconds=20", headers=api.headers)
    out.write_bytes(conn.getresponse().read())
    done.set()
    thread.join()
    binary = scale.lc.find_bin_dir() / "kube-apiserver"
    top = subprocess.run(["go", "tool", "pprof", "-top", "-cum", "-nodecount=60", str(binary), str(out)],
                         capture_output=True, text=True, check=False)
    print(f"\n== the apiserver's CPU profile while '{writer.way}' writes ({out})\n{top.stdout or top.stderr}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=1000, help="objects per way")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pprof", choices=WAYS, help="then write this way for 20 s while taking the apiserver's CPU "
                    "profile (/debug/pprof/profile), and print its top functions (`go tool pprof -top`)")
    args = ap.parse_args()
    bodies = diagnoses(args.objects)
    n = len(bodies)
    cluster = scale.lc.LocalCluster(Path(tempfile.mkdtemp(prefix="kd-writes-")) / "cluster", fake_kubelet=False,
                                    apiserver_args=["--profiling=true"] if args.pprof else [])
    cluster.start()
    try:
        cluster.components["kube-scheduler"].stop()
        api = scale.Api(cluster.kubeconfig, cluster.workdir)
        crd = scale.yaml.safe_load((ROOT / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml").read_text())
        api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", granular_crd(crd))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                for group in ("kueue-doctor.dev", GRANULAR_GROUP):
                    api.request("GET", f"/apis/{group}/v1alpha1/admissiondiagnoses", query={"limit": "1"})
                break
            except scale.ApiError:
                time.sleep(0.5)
        writers = {}
        for w, way in enumerate(WAYS):
            objs = copy.deepcopy(bodies)
            for obj in objs:  # the ways' objects side by side in the same namespaces, one name each
                obj["metadata"]["name"] = f"{obj['metadata']['name'][:240]}-{w}"
                obj["metadata"]["namespace"] = f"w-{obj['metadata']['namespace']}"[:63]
                obj["metadata"].pop("ownerReferences", None)  # no Workload here: the garbage collector would delete it
                if way == "apply-granular":
                    obj["apiVersion"] = f"{GRANULAR_GROUP}/v1alpha1"
            writers[way] = Writer(api, way, objs)
        for ns in sorted({o["metadata"]["namespace"] for o in writers["apply"].objects}):
            api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": ns}})
        pids = {"apiserver": cluster.components["kube-apiserver"].pid, "etcd": cluster.components["etcd"].pid}
        with ThreadPoolExecutor(THREADS) as pool:
            for way, writer in writers.items():
                t = time.time()
                list(pool.map(writer.create, range(n)))
                scale.log(f"{way}: {n} created in {time.time() - t:.1f}s")
            per: dict[str, dict[str, list[float]]] = {way: {"apiserver": [], "etcd": [], "rate": []} for way in WAYS}
            for rnd in range(args.rounds):
                order = WAYS[rnd % len(WAYS):] + WAYS[:rnd % len(WAYS)]
                for way in order:
                    time.sleep(1.0)  # the previous way's watch fan-out is done
                    cpu0 = {k: scale.proc_cpu(p) for k, p in pids.items() if p}
                    t = time.time()
                    list(pool.map(lambda k, w=writers[way], r=rnd: w.change(k, r), range(n)))
                    wall = time.time() - t
                    time.sleep(1.0)  # count the fan-out of the last writes too
                    for k, p in pids.items():
                        if p:
                            per[way][k].append((scale.proc_cpu(p) - cpu0[k]) * 1000 / n)
                    per[way]["rate"].append(n / wall)
                    scale.log(f"round {rnd} {way}: {n / wall:.0f} writes/s, apiserver "
                              f"{per[way]['apiserver'][-1]:.2f} ms CPU per write")
            if args.pprof:
                profile(api, cluster.workdir / "apiserver.pprof", pool, writers[args.pprof], n)
        print(f"\n{n} objects per way, {args.rounds} rounds, {THREADS} writer threads; medians of the rounds")
        print(f"{'way':12} {'apiserver ms/write':>19} {'etcd ms/write':>14} {'writes/s':>9} {'stored B':>9} "
              f"{'managedFields B':>16} {'vs apply':>9}")
        base = statistics.median(per["apply"]["apiserver"])
        for way, writer in writers.items():
            first = writer.objects[0]
            stored = api.request("GET", path_of(configmap(first) if way == "configmap" else first))
            mf = len(json.dumps(stored["metadata"].get("managedFields", []), separators=(",", ":")))
            size = len(json.dumps(stored, separators=(",", ":")))
            cpu = statistics.median(per[way]["apiserver"])
            print(f"{way:12} {cpu:19.2f} {statistics.median(per[way]['etcd']):14.2f} "
                  f"{statistics.median(per[way]['rate']):9.0f} {size:9d} {mf:16d} {cpu / base:9.2f}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
