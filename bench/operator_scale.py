"""Operator scale probe: 10,000 Workloads and 50,000 Pods on the local control plane with the real Kueue.

Measures, in one run and against the same cluster:

* creation rate of the load (Workloads through Kueue's webhooks, Pods, Pod status);
* operator start-up: process spawn -> an AdmissionDiagnosis exists for every Workload;
* operator RSS (VmRSS at milestones, peak VmHWM) and CPU seconds per phase;
* API writes per minute by the operator's ServiceAccount while nothing changes (audit log; must be 0),
  with every other user's writes in the same window to show that nothing did change;
* the time from a Kueue status change (QuotaReserved condition patched through /status) to
  (a) a bare watch client receiving it and (b) the updated AdmissionDiagnosis arriving on a watch,
  p50/p99 of both and their ratio, side by side;
* Kueue-paced churn (bench/churn.py, ``--churn-seconds``/``--churn-rate``): admitted Workloads finish and as many
  arrive while the real Kueue admits into the freed quota at its own pace; beside a bare watch in the same run, the
  operator's backlog each second, its reaction per transition (p50/p99), and that the backlog drains;
* with ``--peer ksm`` (the default once ``bash hack/ksm/build.sh`` has built it), kube-state-metrics with a
  custom-resource-state configuration of the Workloads' conditions (hack/ksm/workload-conditions.yaml) and its
  ``pods`` collector, started with the operator on the same cluster: its RSS, CPU, spawn -> every condition on
  /metrics, and (c) the time from the same change until its /metrics shows it (scraped at 20 Hz).

    python bench/operator_scale.py                    # 10,000 Workloads, 50,000 Pods (~20 min)
    python bench/operator_scale.py --quick            # 1,000 / 5,000 (~5 min)
    python bench/operator_scale.py --quick --peer ksm # the same, kube-state-metrics beside it (built if needed)

The load (see docs/scale.md): 100 ClusterQueues in cohorts of 10, one LocalQueue each in its own
namespace. Kueue really admits a share of the Workloads (their quota is sized so they fit exactly),
then the rest arrive and Kueue really evaluates each once (waiting for quota, or larger than the
cohort can ever give); the ClusterQueues of the last cohort are stopped (Hold). Every Workload has
its Pods (label kueue.x-k8s.io/podset, annotation kueue.x-k8s.io/workload): Pods of admitted
Workloads are bound to Nodes without kubelet and patched Running/Ready; the others carry Kueue's
admission scheduling gate, as the pod-group integration creates them. kube-scheduler is stopped
after start-up (it would otherwise write a SchedulingGated condition into every gated Pod; no
Pod needs it). The fake kubelet is off.

Uses KUEUE_DOCTOR_E2E_KUBECONFIG when set (no audit log then: writes come from the operator's own
metrics, and kube-scheduler is not stopped).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "hack" / "control-plane"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

# --compiled: the unpacked wheel of hack/compiled.sh, put first on the operator processes' PYTHONPATH
ENGINE_PATH_ENV = "KUEUE_DOCTOR_BENCH_ENGINE_PATH"


def operator_path() -> str:
    """Where the operator processes import kueue_doctor from: this checkout, or its compiled build (--compiled)."""
    return os.environ.get(ENGINE_PATH_ENV) or str(ROOT / "operator")


# run as a script, this module is __main__: the phases in bench/churn.py and bench/shards.py import it by name,
# and must get this module (its clock T0, its classes), not a second copy
sys.modules.setdefault("operator_scale", sys.modules[__name__])

import localcluster as lc  # type: ignore[import-not-found]  # noqa: E402
from tests.builders import (  # noqa: E402
    ClusterQueue,
    Cohort,
    LocalQueue,
    Namespace,
    Node,
    Pod,
    ResourceFlavor,
    Workload,
    condition,
    throttle,
)

import ksm as peer  # noqa: E402  (bench/ksm.py: kube-state-metrics beside the operator)
from churn import rows as churn_rows  # noqa: E402  (bench/churn.py: the Kueue-paced phase)
from kueue_perf import rows as kueue_perf_rows  # noqa: E402  (bench/kueue_perf.py: Kueue's perf scenarios)

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
ADIAG = "/apis/kueue-doctor.dev/v1alpha1"
SA_NAMESPACE, SA_NAME = "kueue-doctor", "kueue-doctor"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
BENCH_MANAGER = "kueue-doctor-bench"
NODE_LABEL = "kueue-doctor.bench/node"
FLAVOR = "bench-flavor"
POD_CPU, POD_MEM_MI = 250, 256  # millicores, MiB per Pod
BIG_POD_CPU = 60_000  # an "exceeds max" Pod: 60 cpu
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------------------------
# a small keep-alive HTTPS client (one connection per thread), plain dicts in and out
# ------------------------------------------------------------------------------------------------
class ApiError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:300]}")
        self.status = status


class Api:
    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        ctx_name = cfg.get("current-context") or cfg["contexts"][0]["name"]
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        url = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.ssl = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
            self.ssl = ssl.create_default_context(cadata=ca)
        elif "certificate-authority" in cluster:
            self.ssl = ssl.create_default_context(cafile=cluster["certificate-authority"])
        if cluster.get("insecure-skip-tls-verify"):
            self.ssl.check_hostname = False
            self.ssl.verify_mode = ssl.CERT_NONE
        self.headers: dict[str, str] = {}
        if "client-certificate-data" in user:
            fd, cert = tempfile.mkstemp(dir=workdir, suffix=".crt")
            os.write(fd, base64.b64decode(user["client-certificate-data"]) + b"\n" +
                     base64.b64decode(user["client-key-data"]))
            os.close(fd)
            self.ssl.load_cert_chain(cert)
        elif "client-certificate" in user:
            self.ssl.load_cert_chain(user["client-certificate"], user["client-key"])
        if "token" in user:
            self.headers["Authorization"] = f"Bearer {user['token']}"
        self._local = threading.local()

    def connect(self, timeout: float | None = 60.0) -> http.client.HTTPSConnection:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ssl, timeout=timeout)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def request(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None,
                content_type: str = "application/json", accept: str = "application/json") -> Any:
        if query:
            path = f"{path}?{urllib.parse.urlencode(query)}"
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": accept, **self.headers}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self.connect()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
                continue
            if not 200 <= resp.status <= 299:
                raise ApiError(resp.status, method, path, raw.decode(errors="replace"))
            return json.loads(raw) if raw else None
        raise AssertionError("unreachable")

    def stream(self, path: str, query: dict[str, str]) -> Iterator[tuple[float, bytes]]:
        """Watch lines as they arrive: (receive time, raw line)."""
        conn = self.connect(timeout=None)
        try:
            conn.request("GET", f"{path}?{urllib.parse.urlencode(query)}",
                         headers={"Accept": "application/json", **self.headers})
            resp = conn.getresponse()
            if resp.status != 200:
                raise ApiError(resp.status, "WATCH", path, resp.read().decode(errors="replace"))
            while True:
                line = resp.readline()
                t = time.time()
                if not line:
                    return
                yield t, line
        finally:
            conn.close()


def retrying(fn: Callable[[], Any], what: str, attempts: int = 8) -> Any:
    """Retry 429/5xx/webhook timeouts with back-off; AlreadyExists is success."""
    delay = 0.2
    for attempt in range(attempts):
        try:
            return fn()
        except ApiError as exc:
            if exc.status == 409 and "already exists" in str(exc):
                return None
            if exc.status in (429, 500, 502, 503, 504) and attempt < attempts - 1:
                time.sleep(delay)
                delay = min(delay * 2, 5)
                continue
            raise RuntimeError(f"{what}: {exc}") from exc
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(delay)
    raise AssertionError("unreachable")


def run_parallel(fn: Callable[[Any], Any], items: list[Any], threads: int, label: str) -> float:
    """Run fn over items with a thread pool; returns the rate (items/s) and logs it."""
    t0 = time.time()
    done = 0
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            done += 1
            if done % 5000 == 0:
                log(f"  {label}: {done}/{len(items)}")
    dt = max(time.time() - t0, 1e-9)
    rate = len(items) / dt
    log(f"{label}: {len(items)} in {dt:.1f}s = {rate:.0f}/s")
    return rate


# ------------------------------------------------------------------------------------------------
# the load
# ------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    workloads: int
    pods: int
    queues: int
    cohort_size: int
    admitted_fraction: float
    stopped_fraction: float
    exceeds_fraction: float
    seed: int = 7
    wl: list[dict[str, Any]] = field(default_factory=list)  # name, ns, cq, count, kind

    def build(self) -> None:
        rnd = random.Random(self.seed)
        per_wl, extra = divmod(self.pods, self.workloads)
        self.n_stopped = round(self.queues * self.stopped_fraction)
        self.active_cqs = self.queues - self.n_stopped
        self.per_cq = [self.workloads // self.queues + (1 if q < self.workloads % self.queues else 0)
                       for q in range(self.queues)]
        self.admit_per_cq = [round(n * self.admitted_fraction) if q < self.active_cqs else 0
                             for q, n in enumerate(self.per_cq)]
        i = 0
        for q in range(self.queues):
            for j in range(self.per_cq[q]):
                count = per_wl + (1 if i < extra else 0)
                if j < self.admit_per_cq[q]:
                    kind = "admitted"
                elif q >= self.active_cqs:
                    kind = "stopped"
                else:
                    kind = "exceeds" if rnd.random() < self.exceeds_fraction else "waiting"
                self.wl.append({"name": f"wl-{i:05d}", "ns": ns_of(q), "cq": cq_of(q), "count": max(count, 1),
                                "kind": kind})
                i += 1

    def quota(self, q: int) -> tuple[int, int]:
        """nominal cpu (m) and memory (Mi) of ClusterQueue q: exactly its admitted Workloads."""
        wls = [w for w in self.wl if w["cq"] == cq_of(q) and w["kind"] == "admitted"]
        pods = sum(w["count"] for w in wls)
        return max(pods * POD_CPU, 1000), max(pods * POD_MEM_MI, 1024)


def ns_of(q: int) -> str:
    return f"bench-{q:03d}"


def cq_of(q: int) -> str:
    return f"cq-{q:03d}"


def cohort_of(q: int, size: int) -> str:
    return f"cohort-{q // size:02d}"


def workload_obj(w: dict[str, Any]) -> dict[str, Any]:
    cpu = BIG_POD_CPU if w["kind"] == "exceeds" else POD_CPU
    return (Workload(w["name"], w["ns"]).label("kueue-doctor.bench/kind", w["kind"]).queue("lq").count(w["count"])
            .image("registry.example/train:1").request("cpu", f"{cpu}m").request("memory", f"{POD_MEM_MI}Mi")
            .manifest())


def _pod(w: dict[str, Any], i: int) -> Pod:
    cpu = BIG_POD_CPU if w["kind"] == "exceeds" else POD_CPU
    return (Pod(f"{w['name']}-{i}", w["ns"]).workload(w["name"]).restart_policy("Never").grace_period(0)
            .image("registry.example/train:1").request("cpu", f"{cpu}m").request("memory", f"{POD_MEM_MI}Mi"))


def pod_obj(w: dict[str, Any], i: int, node: str | None) -> dict[str, Any]:
    """Bound to ``node`` (admitted Workloads), or held by Kueue's admission gate as the pod-group integration does."""
    pod = _pod(w, i)
    return (pod.node(node) if node else pod.gate("kueue.x-k8s.io/admission")).manifest()


def running_status(w: dict[str, Any], i: int, node: str, started: str) -> dict[str, Any]:
    """The status the kubelet would write for a bound Pod: Running, Ready, every container running."""
    status = _pod(w, i).node(node).running(started).obj()["status"]
    status.pop("qosClass")  # set by the API server at creation; immutable
    return {"status": status}


def apply_status_condition(api: Api, ns: str, name: str, *conds: dict[str, Any]) -> Any:
    body = {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "status": {"conditions": list(conds)}}  # a server-side apply patch: only the conditions the bench owns
    return api.request("PATCH", f"{KUEUE}/namespaces/{ns}/workloads/{name}/status", body,
                       query={"fieldManager": BENCH_MANAGER, "force": "true"},
                       content_type="application/apply-patch+yaml")


def list_all(api: Api, path: str, query: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], str]:
    items: list[dict[str, Any]] = []
    cont, rv = "", ""
    while True:
        q = {"limit": "1000", **(query or {}), **({"continue": cont} if cont else {})}
        body = api.request("GET", path, query=q)
        items.extend(body.get("items") or [])
        rv = rv or body["metadata"].get("resourceVersion", "")
        cont = body["metadata"].get("continue") or ""
        if not cont:
            return items, rv


def current_rv(api: Api, path: str) -> str:
    """The collection's current resourceVersion (one LIST of one item), to start a watch from."""
    return str(api.request("GET", path, query={"limit": "1"})["metadata"]["resourceVersion"])


def cond_of(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


# ------------------------------------------------------------------------------------------------
# watches, audit log, process sampling
# ------------------------------------------------------------------------------------------------
class Watcher(threading.Thread):
    """A raw watch; calls on_event(receive_time, event dict) for every event. Re-watches from the last RV."""

    def __init__(self, api: Api, path: str, rv: str, on_event: Callable[[float, dict[str, Any]], None],
                 name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.api, self.path, self.rv, self.on_event = api, path, rv, on_event
        self.stop_flag = False
        self.events = 0
        self.error: str | None = None

    def run(self) -> None:
        while not self.stop_flag:
            try:
                for t, line in self.api.stream(self.path, {"watch": "1", "resourceVersion": self.rv,
                                                           "allowWatchBookmarks": "true",
                                                           "timeoutSeconds": "3600"}):
                    if self.stop_flag:
                        return
                    ev = json.loads(line)
                    if ev.get("type") == "ERROR":
                        self.error = str(ev.get("object", {}).get("message"))
                        log(f"watch {self.name}: ERROR {self.error}; relisting")
                        self.rv = current_rv(self.api, self.path)
                        break
                    self.rv = ev["object"]["metadata"].get("resourceVersion", self.rv)
                    if ev.get("type") == "BOOKMARK":
                        continue
                    self.events += 1
                    self.on_event(t, ev)
            except Exception as exc:  # reconnect
                if self.stop_flag:
                    return
                log(f"watch {self.name} broke ({exc}); re-watching from {self.rv}")
                time.sleep(0.5)


class AuditTail:
    """Incremental reader of the apiserver's JSON audit log (only writes are logged)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None  # of the file `offset` is in

    def skip_to_end(self) -> None:
        if self.path and self.path.exists():
            st = self.path.stat()
            self.offset, self.inode = st.st_size, st.st_ino

    def read_new(self) -> list[dict[str, Any]]:
        if not self.path or not self.path.exists():
            return []
        data = b""
        inode = self.path.stat().st_ino
        if self.inode is not None and inode != self.inode:
            # rotated (--audit-log-maxsize, every 100 MB: a churn phase writes more, Kueue's large-scale scenario
            # 500 MB): the rest of the file we were reading, now a backup (audit-<time>.log, all kept), then every
            # backup made after it, whole, then the new file from its start
            backups = sorted(self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}"))  # by rotation time
            ours = next((n for n, b in enumerate(backups) if b.stat().st_ino == self.inode), None)
            for n, backup in enumerate(backups[ours:] if ours is not None else []):
                with backup.open("rb") as fh:
                    fh.seek(self.offset if n == 0 else 0)
                    chunk = fh.read()
                    data += chunk[:chunk.rfind(b"\n") + 1]
            self.offset = 0
        self.inode = inode
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            fresh = fh.read()
        end = fresh.rfind(b"\n") + 1
        self.offset += end
        data += fresh[:end]
        out = []
        for line in data.splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out


def audit_ts(ev: dict[str, Any]) -> float:
    ts = ev.get("stageTimestamp") or ev.get("requestReceivedTimestamp") or ""
    return datetime.strptime(ts[:26].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def is_lease(ev: dict[str, Any]) -> bool:
    return (ev.get("objectRef") or {}).get("resource") == "leases"


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])  # kB
    except OSError:
        pass
    return out


def proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(name="sampler", daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, int, float]] = []  # time, rss kB, cpu s
        self.stop_flag = False

    def run(self) -> None:
        while not self.stop_flag:
            st = proc_status(self.pid)
            if st:
                self.samples.append((time.time(), st.get("VmRSS", 0), proc_cpu(self.pid)))
            time.sleep(0.5)

    def peak_rss(self, t0: float, t1: float) -> int:
        return max((r for t, r, _ in self.samples if t0 <= t <= t1), default=0)

    def rss_at(self, t: float) -> int:
        """RSS (kB) of the last sample at or before t."""
        return next((r for ts, r, _ in reversed(self.samples) if ts <= t), 0)


class KsmInstance:
    """One kube-state-metrics process: the Workload conditions plus `resources` of its own collectors."""

    def __init__(self, binary: Path, resources: str, kubeconfig: Path, workdir: Path, hz: float) -> None:
        self.resources, self.hz = resources, hz
        self.name = "ksm" + "".join(f"+{x}" for x in resources.split(",") if x)
        self.port, telemetry = free_port(), free_port()
        self.log_path = workdir / f"{self.name}.log"
        self.argv = peer.argv(binary, kubeconfig, peer.CONFIG, self.port, telemetry, resources)
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.r: dict[str, Any] = {"resources": resources, "command": " ".join(
            ["kube-state-metrics", *(x.replace(str(workdir), "<workdir>").replace(str(ROOT) + "/", "")
                                     for x in self.argv[1:])])}
        self.proc: subprocess.Popen[bytes] | None = None
        self.scraper: peer.Scraper | None = None

    def start(self, conditions: int, pods: int) -> None:
        """Spawn it; a thread stamps when /metrics holds `conditions` Workload condition series and `pods` Pods."""
        self.r.update({"want_conditions": conditions, "want_pods": pods})
        t_spawn = time.time()
        with self.log_path.open("wb") as fh:
            self.proc = subprocess.Popen(self.argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        self.sampler = Sampler(self.proc.pid)
        self.sampler.start()
        log(f"{self.name} started (pid {self.proc.pid}, :{self.port}), waiting for {conditions} Workload condition "
            f"series and {pods} Pods on /metrics")

        def ready() -> None:
            while self.proc is not None and self.proc.poll() is None:
                with contextlib.suppress(OSError):
                    text = peer.scrape_bytes(self.url)  # counted as bytes: 4 KB a Pod, never decoded here
                    n_cond = text.count(peer.METRIC.encode() + b"{")
                    n_pods = text.count(b"\nkube_pod_info{")
                    if n_cond >= conditions and n_pods >= pods:
                        t = time.time()
                        self.r["startup"] = {
                            "to_all_exposed_s": round(t - t_spawn, 1), "series": n_cond, "pods": n_pods,
                            "metrics_page_kib": round(len(text) / 1024), "rss_at_all_exposed_mib": self.rss_mib(),
                            "cpu_s_to_all_exposed": round(self.cpu(), 1)}
                        log(f"{self.name}: all {n_cond} condition series and {n_pods} Pods on /metrics "
                            f"{t - t_spawn:.1f}s after spawn; RSS {self.rss_mib()} MiB, page {len(text) >> 10} KiB")
                        return
                time.sleep(0.5 if not pods else 2.0)
            log(f"{self.name} exited ({self.proc.returncode if self.proc else '?'}):\n"
                + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:]))

        self.ready = threading.Thread(target=ready, name=f"{self.name}-ready", daemon=True)
        self.ready.start()

    def cpu(self) -> float:
        return proc_cpu(self.proc.pid) if self.proc is not None else 0.0

    def rss_mib(self) -> int:
        return round(proc_status(self.proc.pid).get("VmRSS", 0) / 1024) if self.proc is not None else 0

    def start_scraper(self, want: dict[peer.Key, tuple[str, str]]) -> None:
        """Before the changes: what it shows of the targets (a reason it already shows cannot be seen to change),
        then the scraper process (none at 0 Hz)."""
        if not self.hz:
            return
        page = peer.condition_series(peer.scrape(self.url), peer.METRIC, "QuotaReserved")
        self.before = Counter(f"{c.status}/{c.reason}" if c else "none" for c in map(page.get, want))
        self.scraper = peer.Scraper(self.url, "QuotaReserved", want, self.hz)
        self.scraper.start()
        self.cpu0 = self.cpu()

    def sent(self, key: peer.Key, t: float) -> None:
        if self.scraper is not None:
            self.scraper.sent(key, t)

    def seen(self) -> int:
        return self.scraper.seen() if self.scraper is not None else 1 << 30

    def stop_scraper(self, sent: dict[tuple[str, str], float]) -> dict[str, Any]:
        if self.scraper is None:
            return {"n": 0, "p50": None, "p99": None, "hz_asked": 0, "note": "not scraped during the changes"}
        got = self.scraper.stop()
        self.scraper = None
        ms = [(t - sent[(ns, name)]) * 1e3 for (ns, name, _), t in got["seen"].items()]
        scrape_ms = [d * 1e3 for d in got["scrape_s"]]
        return {"n": len(ms), "p50": round(pct(ms, 50), 1), "p99": round(pct(ms, 99), 1),
                "max": round(max(ms, default=float("nan")), 1), "before": dict(self.before),
                "scrapes": got["scrapes"], "scrape_errors": got["errors"], "hz_asked": self.hz,
                "hz_got": round(got["scrapes"] / max(got["seconds"], 1e-9), 1),
                "scrape_ms_p50": round(pct(scrape_ms, 50), 1), "scrape_ms_p99": round(pct(scrape_ms, 99), 1),
                "cpu_s": round(self.cpu() - self.cpu0, 1)}

    def finish(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            st = proc_status(self.proc.pid)
            self.r.update({"rss_end_mib": round(st.get("VmRSS", 0) / 1024),
                           "peak_vmhwm_mib": round(st.get("VmHWM", 0) / 1024),
                           "peak_sampled_mib": round(max((x for _, x, _ in self.sampler.samples), default=0) / 1024),
                           "cpu_s_total": round(self.cpu(), 1)})

    def stop(self) -> None:
        if self.scraper is not None:
            with contextlib.suppress(Exception):
                self.scraper.stop(timeout=5)
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)


def metrics_of(port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as rsp:
            text = rsp.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("kueue_doctor_") and not line.startswith(("kueue_doctor_workload_waiting_since",
                                                                      "kueue_doctor_oldest_waiting")):
            k, _, v = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[k] = float(v)
    return out


def write_delay(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The operator's own kueue_doctor_write_delay_seconds between two `metrics_of` reads: how many verdict changes
    were written, and their p50 / p99 as Prometheus' histogram_quantile interpolates them (seconds)."""
    prefix = 'kueue_doctor_write_delay_seconds_bucket{le="'
    buckets = sorted((float(k[len(prefix):-2]), v - before.get(k, 0.0))
                     for k, v in after.items() if k.startswith(prefix))
    total = buckets[-1][1] if buckets else 0.0

    def quantile(q: float) -> float:
        if total <= 0:
            return float("nan")
        rank, lower, below = q * total, 0.0, 0.0
        for bound, count in buckets:
            if count >= rank:
                if bound == float("inf"):
                    return lower  # as histogram_quantile: the highest finite bound
                return lower + (bound - lower) * (rank - below) / max(count - below, 1e-9)
            lower, below = bound, count
        return lower

    return {"n": round(total), "p50_s": round(quantile(0.5), 3), "p99_s": round(quantile(0.99), 3)}


def delay_row(d: dict[str, Any] | None) -> str:
    """kueue_doctor_write_delay_seconds over the phase: the pass that found a verdict change -> its write accepted."""
    if not d:
        return "-"
    return (f"p50 {d['p50_s']} / p99 {d['p99_s']} s over {d['n']} verdict changes written "
            "(kueue_doctor_write_delay_seconds)")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------------
class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.r: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if k != "func"}}
        self.cluster: lc.LocalCluster | None = None
        self.op: subprocess.Popen[bytes] | None = None
        self.ksms: list[KsmInstance] = []

    # ---- cluster ----
    def start_cluster(self) -> None:
        ext = os.environ.get("KUEUE_DOCTOR_E2E_KUBECONFIG")
        base = Path(self.args.workdir) if self.args.workdir else Path(tempfile.mkdtemp(prefix="kd-scale-"))
        base.mkdir(parents=True, exist_ok=True)
        self.workdir = base
        if ext:
            self.kubeconfig, self.audit = Path(ext), None
            log(f"using the external cluster of {ext} (no audit log)")
        else:
            t = time.time()
            settings = lc.KueueSettings(wait_for_pods_ready_timeout=self.args.pods_ready_timeout)
            self.cluster = lc.LocalCluster(base / "cluster", fake_kubelet=False, kueue=settings)
            self.cluster.start()
            self.kubeconfig, self.audit = self.cluster.kubeconfig, self.cluster.audit_log
            self.r["cluster_start_s"] = round(time.time() - t, 1)
            log(f"local cluster up in {self.r['cluster_start_s']}s ({self.cluster.workdir})")
            self.cluster.components["kube-scheduler"].stop()
            log("kube-scheduler stopped (no Pod needs it; see the module docstring)")
        self.api = Api(self.kubeconfig, base)

    # ---- load ----
    def create_load(self) -> None:
        a, api = self.args, self.api
        plan = Plan(a.workloads, a.pods, a.queues, a.cohort_size, a.admitted_fraction, a.stopped_fraction,
                    a.exceeds_fraction)
        plan.build()
        self.plan = plan
        kinds = Counter(w["kind"] for w in plan.wl)
        log(f"plan: {len(plan.wl)} Workloads {dict(kinds)}, {sum(w['count'] for w in plan.wl)} Pods, "
            f"{plan.queues} ClusterQueues ({plan.n_stopped} stopped) in cohorts of {plan.cohort_size}")
        self.r["load"] = {"workloads": len(plan.wl), "pods": sum(w["count"] for w in plan.wl), "kinds": dict(kinds),
                          "cluster_queues": plan.queues, "stopped_cluster_queues": plan.n_stopped}
        rates: dict[str, float] = {}
        t_load = time.time()

        def create(obj: dict[str, Any]) -> None:
            md = obj["metadata"]
            group_version, plural = obj["apiVersion"], obj["kind"].lower() + "s"
            base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            path = f"{base}/namespaces/{md['namespace']}/{plural}" if md.get("namespace") else f"{base}/{plural}"
            retrying(lambda: api.request("POST", path, obj), f"create {obj['kind']} {md['name']}")

        # queues, namespaces, nodes
        setup: list[dict[str, Any]] = [ResourceFlavor(FLAVOR).manifest()]
        for q in range(plan.queues):
            cpu, mem = plan.quota(q)
            if q >= plan.active_cqs:
                cpu, mem = 1000, 1024
            cq = (ClusterQueue(cq_of(q)).cohort(cohort_of(q, plan.cohort_size)).queueing_strategy("BestEffortFIFO")
                  .quotas({FLAVOR: {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}))
            setup.append((cq.stop_policy("Hold") if q >= plan.active_cqs else cq).manifest())
        for c in sorted({cohort_of(q, plan.cohort_size) for q in range(plan.queues)}):
            setup.append(Cohort(c).manifest())
        nodes = [f"bench-node-{k:03d}" for k in range(a.nodes)]
        run_parallel(create, setup, 8, "ResourceFlavor/ClusterQueues/Cohorts")
        run_parallel(create, [Namespace(ns_of(q)).manifest() for q in range(plan.queues)], 8, "Namespaces")
        run_parallel(create, [LocalQueue("lq", ns_of(q), cq_of(q)).manifest() for q in range(plan.queues)], 8,
                     "LocalQueues")

        def node(name: str) -> None:
            # a Node create keeps the status it is sent: the kubelet's, without a kubelet
            n = (Node(name).label(NODE_LABEL, "true").capacity(cpu="512", memory="2Ti", pods="1000")
                 .ready("True", "KubeletReady", "bench node without kubelet").heartbeat(now_rfc3339()))
            retrying(lambda: api.request("POST", "/api/v1/nodes", {**n.manifest(), "status": n.obj()["status"]}),
                     f"node {name}")
        run_parallel(node, nodes, 8, "Nodes")
        self.wait_until(lambda: all(cond_of(api.request("GET", f"{KUEUE}/clusterqueues/{cq_of(q)}"), "Active")
                                    is not None for q in range(plan.queues)), 60, "ClusterQueues reconciled")

        # 1. the Workloads Kueue admits; 2. the others, evaluated once each against full queues
        admitted = [w for w in plan.wl if w["kind"] == "admitted"]
        others = [w for w in plan.wl if w["kind"] != "admitted"]
        rates["workloads_admissible"] = run_parallel(lambda w: create(workload_obj(w)), admitted, a.threads,
                                                     "Workloads (to be admitted)")
        self.wait_kueue(len(admitted), 0, "admission")
        # the job controller's part for admitted Workloads: PodsReady=True (bare Workloads have no Job)
        started = now_rfc3339()
        rates["pods_ready_conditions"] = run_parallel(lambda w: retrying(lambda: apply_status_condition(
            api, w["ns"], w["name"], condition("PodsReady", "True", "Started",
                                               "All pods reached readiness and the workload is running", started)),
            "PodsReady"), admitted, a.threads, "PodsReady=True on admitted Workloads")
        rates["workloads_pending"] = run_parallel(lambda w: create(workload_obj(w)), others, a.threads,
                                                  "Workloads (pending)")
        self.wait_kueue(len(admitted), len(others), "evaluation")

        # Pods
        pods: list[tuple[dict[str, Any], int, str | None]] = []
        n = 0
        for w in plan.wl:
            for i in range(w["count"]):
                pods.append((w, i, nodes[n % len(nodes)] if w["kind"] == "admitted" else None))
                n += 1
        rates["pods"] = run_parallel(lambda p: create(pod_obj(*p)), pods, a.threads, "Pods")
        bound = [p for p in pods if p[2]]
        started = now_rfc3339()
        rates["pod_status_running"] = run_parallel(lambda p: retrying(lambda: api.request(
            "PATCH", f"/api/v1/namespaces/{p[0]['ns']}/pods/{p[0]['name']}-{p[1]}/status",
            running_status(p[0], p[1], p[2], started), content_type="application/merge-patch+json"), "pod status"),
            bound, a.threads,
            "Pod status Running (admitted Workloads)")
        self.r["creation_rates_per_s"] = {k: round(v) for k, v in rates.items()}
        self.r["load_seconds"] = round(time.time() - t_load, 1)

    def wait_until(self, fn: Callable[[], bool], timeout: float, what: str, interval: float = 1.0) -> None:
        t = time.time()
        while True:
            with contextlib.suppress(ApiError):
                if fn():
                    return
            if time.time() - t > timeout:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(interval)

    def wait_kueue(self, admitted: int, pending: int, what: str) -> None:
        """Until Kueue admitted `admitted`, evaluated all `pending`, and no Workload changed for 5 s."""
        t0 = time.time()
        last_rv, stable_since = None, time.time()
        while True:
            items, _ = list_all(self.api, f"{KUEUE}/workloads")
            n_adm = sum(1 for w in items if (cond_of(w, "Admitted") or {}).get("status") == "True")
            n_eval = sum(1 for w in items if (cond_of(w, "QuotaReserved") or {}).get("status") == "False")
            max_rv = max((int(w["metadata"]["resourceVersion"]) for w in items), default=0)
            if max_rv != last_rv:
                last_rv, stable_since = max_rv, time.time()
            log(f"  Kueue {what}: {n_adm}/{admitted} admitted, {n_eval}/{pending} evaluated pending")
            # Kueue 0.19 evaluates one Workload of a shape per queue and skips equivalent ones
            # (SchedulingEquivalenceHashing) without a status write: "settled" = nothing changed for 8 s
            if n_adm >= admitted and n_eval >= min(pending, 1) and time.time() - stable_since >= 8:
                break
            if time.time() - t0 > self.args.kueue_timeout:
                raise TimeoutError(f"Kueue {what}: {n_adm}/{admitted} admitted, {n_eval}/{pending} evaluated")
            time.sleep(3)
        self.r[f"kueue_{what}_s"] = round(time.time() - t0, 1)
        self.r[f"kueue_{what}_evaluated"] = n_eval
        log(f"Kueue {what} settled in {time.time() - t0:.1f}s")

    # ---- operator ----
    def apply(self, path: Path) -> None:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            plural = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
                      "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
                      "Namespace": "namespaces",
                      "CustomResourceDefinition": "customresourcedefinitions"}[doc["kind"]]
            ns = doc["metadata"].get("namespace")
            base = "/api/v1" if doc["apiVersion"] == "v1" else f"/apis/{doc['apiVersion']}"
            p = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
            self.api.request("PATCH", f"{p}/{doc['metadata']['name']}", doc,
                             query={"fieldManager": BENCH_MANAGER, "force": "true"},
                             content_type="application/apply-patch+yaml")

    def install_operator(self) -> Path:
        self.apply(ROOT / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml")
        self.wait_until(lambda: bool(self.api.request("GET", f"{ADIAG}/admissiondiagnoses", query={"limit": "1"})
                                     is not None), 30, "the AdmissionDiagnosis CRD")
        self.apply(ROOT / "manifests" / "base" / "namespace.yaml")
        self.apply(ROOT / "manifests" / "base" / "rbac.yaml")
        out = self.api.request("POST", f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{SA_NAME}/token",
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 7200}})
        admin = yaml.safe_load(self.kubeconfig.read_text())
        entry = admin["clusters"][0]
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "operator", "clusters": [entry],
                  "users": [{"name": "operator", "user": {"token": out["status"]["token"]}}],
                  "contexts": [{"name": "operator", "context": {"cluster": entry["name"], "user": "operator"}}]}
        path = self.workdir / "operator.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def quiet_cluster(self, seconds: float = 10.0) -> dict[str, int]:
        """Writes by anyone (leases excluded) over `seconds`: the load has settled when this is empty."""
        tail = AuditTail(self.audit)
        tail.skip_to_end()
        time.sleep(seconds)
        return dict(Counter(e["user"]["username"] for e in tail.read_new() if not is_lease(e)))

    def run_operator(self) -> None:
        a = self.args
        kubeconfig = self.install_operator()
        for _ in range(6):
            noise = self.quiet_cluster(5)
            if not noise:
                break
            log(f"cluster not quiet yet: writes in 5s {noise}")
        self.r["writes_before_operator_5s"] = noise
        # diagnosis watch: from now on, every diagnosis the operator writes
        self.diag: dict[tuple[str, str], tuple[float, str]] = {}
        self.diag_first: dict[tuple[str, str], float] = {}
        self.diag_history: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
        self.diag_stages: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)  # for bench/churn.py
        self.lock = threading.Lock()

        def on_diag(t: float, ev: dict[str, Any]) -> None:
            md = ev["object"]["metadata"]
            key = (md["namespace"], md["name"])
            status = ev["object"].get("status") or {}
            reason = status.get("reason", "")
            with self.lock:
                if ev["type"] == "DELETED":
                    self.diag.pop(key, None)
                    return
                self.diag[key] = (t, reason)
                self.diag_first.setdefault(key, t)
                self.diag_history[key].append((t, reason))
                self.diag_stages[key].append((t, status.get("stage", "")))

        rv = current_rv(self.api, f"{ADIAG}/admissiondiagnoses")
        self.diag_watch = Watcher(self.api, f"{ADIAG}/admissiondiagnoses", rv, on_diag, "adiag-watch")
        self.diag_watch.start()

        self.audit_tail = AuditTail(self.audit)
        self.audit_tail.skip_to_end()
        self.metrics_port, health = free_port(), free_port()
        self.op_log = self.workdir / "operator.log"
        # this checkout's code, never whatever `pip install -e` last pointed the shared install at
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": operator_path()}
        self.r["operator_engine"] = "compiled" if os.environ.get(ENGINE_PATH_ENV) else "python"
        env.pop("KUBECONFIG", None)
        if a.tracemalloc:  # live/memprofile.py: where the memory goes, written on SIGUSR2 at the end of the idle window
            env["KUEUE_DOCTOR_TRACEMALLOC"] = str(self.workdir / "tracemalloc.txt")
        argv = [sys.executable, "-m", "kueue_doctor", "run", "--kubeconfig", str(kubeconfig),
                "--metrics-port", str(self.metrics_port), "--health-port", str(health),
                "--refresh-interval", str(a.refresh_interval), "--resync-interval", str(a.resync_interval)]
        self.r["operator_command"] = " ".join(["python", *argv[1:3], "run", "--kubeconfig", "<sa-token-kubeconfig>",
                                                *argv[6:]])
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True, check=True).stdout.strip()
            dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "operator"],
                                   capture_output=True, text=True, check=True).stdout.strip()
            self.r["operator_commit"] = head + ("+dirty" if dirty else "")
        if a.peer == "ksm":
            self.start_ksm()
        if a.apf_shares:
            self.throttle(a.apf_shares)
        t_spawn = time.time()
        with self.op_log.open("wb") as fh:
            self.op = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                       cwd=str(ROOT))
        self.sampler = Sampler(self.op.pid)
        self.sampler.start()
        self.follow_log(("Initial sync:", "Traceback", "ERROR"))
        log(f"operator started (pid {self.op.pid}), log {self.op_log}")
        want = {(w["ns"], w["name"]) for w in self.plan.wl}
        last_log = last_scrape = 0.0
        t_metrics: float | None = None  # every Workload counted on /metrics (the first complete pass)
        while True:
            if self.op.poll() is not None:
                raise RuntimeError(f"the operator exited ({self.op.returncode}):\n{self.tail_log()}")
            if t_metrics is None and time.time() - last_scrape >= 1.0:
                last_scrape = time.time()
                counted = sum(v for k, v in metrics_of(self.metrics_port).items()
                              if k.startswith("kueue_doctor_workloads{"))
                if counted >= len(want):
                    t_metrics = time.time()
            with self.lock:
                have = len(want & self.diag.keys())
            if have == len(want):
                break
            if time.time() - last_log > 10:
                st = proc_status(self.op.pid)
                log(f"  diagnosed {have}/{len(want)}; operator RSS {st.get('VmRSS', 0) / 1024:.0f} MiB, "
                    f"cpu {proc_cpu(self.op.pid):.0f}s")
                last_log = time.time()
            if time.time() - t_spawn > a.startup_timeout:
                raise TimeoutError(f"only {have}/{len(want)} diagnosed after {a.startup_timeout}s")
            time.sleep(0.2)
        t_all = time.time()
        with self.lock:
            firsts = sorted(self.diag_first[k] for k in want)
        st = proc_status(self.op.pid)
        initial_sync = self.log_time(r"Initial sync:")
        self.r["startup"] = {
            "to_initial_sync_done_s": round(initial_sync - t_spawn, 1) if initial_sync else None,
            # none with --kueue-perf: the operator starts on the queues before the first Workload
            "to_first_diagnosis_s": round(firsts[0] - t_spawn, 1) if firsts else None,
            "to_half_diagnosed_s": round(firsts[len(firsts) // 2] - t_spawn, 1) if firsts else None,
            "to_all_diagnosed_s": round(t_all - t_spawn, 1),
            "to_all_on_metrics_s": round(t_metrics - t_spawn, 1) if t_metrics is not None else None,
            "rss_at_all_diagnosed_mib": round(st.get("VmRSS", 0) / 1024),
            "cpu_s_to_all_diagnosed": round(proc_cpu(self.op.pid), 1),
        }
        writes = self.audit_tail.read_new()
        op_writes = [e for e in writes if e["user"]["username"] == SA_USER]
        self.r["startup"]["operator_writes"] = len(op_writes)
        self.r["startup"]["operator_writes_by_verb"] = dict(Counter(e["verb"] for e in op_writes))
        codes = Counter((e.get("responseStatus") or {}).get("code") for e in op_writes)
        self.r["startup"]["operator_writes_by_code"] = {str(k): v for k, v in codes.items()}
        span = max((audit_ts(e) for e in op_writes), default=t_spawn) - min((audit_ts(e) for e in op_writes),
                                                                           default=t_spawn)
        self.r["startup"]["operator_writes_accepted_per_s"] = round(
            sum(v for k, v in codes.items() if k and 200 <= k < 300) / max(span, 1e-9), 1)
        if a.apf_shares:
            m = metrics_of(self.metrics_port)
            self.r["startup"]["throttled_metric"] = m.get('kueue_doctor_errors_total{kind="throttled"}', 0)
        self.t_spawn, self.t_all = t_spawn, t_all
        log(f"all {len(want)} diagnosed {t_all - t_spawn:.1f}s after spawn; RSS {st.get('VmRSS', 0) / 1024:.0f} MiB")
        for k in self.ksms:
            k.ready.join(timeout=max(a.startup_timeout - (time.time() - t_spawn), 1))
            k.r["rss_at_operator_all_diagnosed_mib"] = round(k.sampler.rss_at(t_all) / 1024)

    def throttle(self, shares: int) -> None:
        """API Priority and Fairness holds the operator's ServiceAccount to `shares` nominal concurrency shares and
        rejects (429, Retry-After) what does not fit: the start-up writes then go as fast as the apiserver lets
        them, and none may be lost. Left in place for the rest of the run."""
        fc = "/apis/flowcontrol.apiserver.k8s.io/v1"
        name = "kueue-doctor-bench-throttle"
        level, schema = throttle(name, SA_NAME, SA_NAMESPACE, shares)
        self.api.request("POST", f"{fc}/prioritylevelconfigurations", level)
        self.api.request("POST", f"{fc}/flowschemas", schema)
        self.wait_until(lambda: any(c.get("type") == "Dangling" and c.get("status") == "False" for c in (
            self.api.request("GET", f"{fc}/flowschemas/{name}").get("status") or {}).get("conditions") or []),
            30, "the FlowSchema to be served")
        self.r["apf"] = {"priority_level": name, "nominal_concurrency_shares": shares, "limit_response": "Reject"}
        log(f"API Priority and Fairness: the operator's ServiceAccount held to {shares} share(s), excess rejected")

    # ---- the peer: kube-state-metrics ----
    def start_ksm(self) -> None:
        """Every KSM instance (one per --ksm-resources) on the same cluster, spawned just before the operator."""
        a = self.args
        binary = peer.build()
        version = subprocess.run([str(binary), "version"], capture_output=True, text=True).stdout.strip()
        wls, _ = list_all(self.api, f"{KUEUE}/workloads")
        conditions = sum(len((w.get("status") or {}).get("conditions") or []) for w in wls)
        pods = len(list_all(self.api, "/api/v1/pods")[0])
        self.r["ksm"] = {}
        for resources in a.ksm_resources:
            own = [x for x in resources.split(",") if x]
            hz = a.ksm_hz if not own else a.ksm_collectors_hz
            k = KsmInstance(binary, resources, self.kubeconfig, self.workdir, hz)
            k.r.update({"version": version.splitlines()[0] if version else "?",
                        "custom_resource_state_config": str(peer.CONFIG.relative_to(ROOT))})
            k.start(conditions, pods if "pods" in own else 0)
            self.ksms.append(k)
            self.r["ksm"][k.name] = k.r

    def tail_log(self, n: int = 40) -> str:
        return "\n".join(self.op_log.read_text(errors="replace").splitlines()[-n:])

    def log_time(self, pattern: str) -> float | None:
        """Wall time at which the first operator log line containing `pattern` was seen (polled every 0.1 s)."""
        return self._log_seen.get(pattern)

    def follow_log(self, patterns: tuple[str, ...]) -> None:
        self._log_seen: dict[str, float] = {}

        def run() -> None:
            offset = 0
            while self.op is not None and self.op.poll() is None:
                with contextlib.suppress(OSError), self.op_log.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
                    offset += len(data)
                    t = time.time()
                    text = data.decode(errors="replace")
                    for pat in patterns:
                        if pat not in self._log_seen and pat in text:
                            self._log_seen[pat] = t
                time.sleep(0.1)

        threading.Thread(target=run, name="log-follow", daemon=True).start()

    def idle(self) -> None:
        a = self.args
        time.sleep(a.settle)
        self.audit_tail.read_new()  # drop what happened before the window
        m0 = metrics_of(self.metrics_port)
        t0, cpu0 = time.time(), proc_cpu(self.op.pid)  # type: ignore[union-attr]
        resync_at = self.t_spawn + a.resync_interval  # lower bound: the first resync is due after initial sync
        seconds = a.idle_seconds
        if a.idle_cover_resync and resync_at + 30 > t0 + seconds:
            seconds = min(resync_at + 30 - t0, a.idle_seconds + a.resync_interval)
        log(f"idle window: {seconds:.0f}s (first resync due no earlier than {resync_at - t0:.0f}s into it)")
        ksm_cpu0 = {k.name: k.cpu() for k in self.ksms}
        per_min: list[int] = []
        others: Counter[str] = Counter()
        op_all: list[dict[str, Any]] = []
        end = t0 + seconds
        minute_start = t0
        minute_count = 0
        while time.time() < end:
            time.sleep(min(5.0, max(end - time.time(), 0)))
            for e in self.audit_tail.read_new():
                if e["user"]["username"] == SA_USER:
                    op_all.append(e)
                    minute_count += 1
                elif not is_lease(e):
                    others[e["user"]["username"]] += 1
            if time.time() - minute_start >= 60:
                per_min.append(minute_count)
                minute_count, minute_start = 0, time.time()
        if time.time() - minute_start > 5:
            per_min.append(minute_count)
        m1 = metrics_of(self.metrics_port)
        dt = time.time() - t0
        passes = m1.get("kueue_doctor_diagnosis_passes_total", 0) - m0.get("kueue_doctor_diagnosis_passes_total", 0)
        applied_key = 'kueue_doctor_writes_total{result="applied"}'
        self.r["idle"] = {
            "seconds": round(dt),
            "operator_writes": len(op_all),
            "operator_writes_per_minute": round(len(op_all) / dt * 60, 2),
            "operator_writes_each_minute": per_min,
            "operator_writes_metric_delta": m1.get(applied_key, 0) - m0.get(applied_key, 0),
            "operator_write_samples": [f"{e['verb']} {e['objectRef'].get('namespace')}/{e['objectRef'].get('name')}"
                                       for e in op_all[:5]],
            "other_writes_excluding_leases": dict(others),
            "diagnosis_passes": passes,
            "covered_first_resync": t0 + dt > resync_at,
            "operator_cpu_s": round(proc_cpu(self.op.pid) - cpu0, 1),  # type: ignore[union-attr]
            "rss_end_mib": round(proc_status(self.op.pid).get("VmRSS", 0) / 1024),  # type: ignore[union-attr]
        }
        for k in self.ksms:
            k.r["idle"] = {"cpu_s": round(k.cpu() - ksm_cpu0[k.name], 1), "rss_end_mib": k.rss_mib()}
        log(f"idle: {self.r['idle']}")
        if a.tracemalloc:
            self.r["tracemalloc"] = self.memory_report()

    def memory_report(self) -> list[str]:
        """The operator's live bytes by source file and line (live/memprofile.py), asked with SIGUSR2."""
        report = self.workdir / "tracemalloc.txt"
        report.unlink(missing_ok=True)
        os.kill(self.op.pid, signal.SIGUSR2)  # type: ignore[union-attr]
        deadline = time.time() + 120
        while not report.exists() and time.time() < deadline:
            time.sleep(0.5)
        lines = report.read_text().splitlines() if report.exists() else ["no report within 120 s"]
        log("operator memory (tracemalloc, traced while running: RSS is about doubled in this run):\n"
            + "\n".join(lines[:30]))
        return lines

    def latency(self) -> None:
        a = self.args
        api = self.api
        with self.lock:
            candidates = [w for w in self.plan.wl if w["kind"] == "waiting"
                          and self.diag.get((w["ns"], w["name"]), (0, ""))[1] != "QueueMisconfigured"]
        rnd = random.Random(11)
        targets = rnd.sample(candidates, min(a.changes, len(candidates)))
        before = {}
        with self.lock:
            for w in targets:
                before[(w["ns"], w["name"])] = self.diag[(w["ns"], w["name"])][1]
        target_keys = set(before)
        bare: dict[tuple[str, str], float] = {}
        bare_events: Counter[str] = Counter()

        def on_wl(t: float, ev: dict[str, Any]) -> None:
            md = ev["object"]["metadata"]
            key = (md["namespace"], md["name"])
            bare_events[ev["type"]] += 1
            if key in target_keys and key not in bare:
                c = cond_of(ev["object"], "QuotaReserved") or {}
                if "doesn't exist" in (c.get("message") or ""):
                    bare[key] = t

        rv = current_rv(api, f"{KUEUE}/workloads")
        bare_watch = Watcher(api, f"{KUEUE}/workloads", rv, on_wl, "bare-watch")
        bare_watch.start()
        want = {(ns, name, "QuotaReserved"): ("False", "Inadmissible") for ns, name in target_keys}
        for k in self.ksms:
            k.start_scraper(want)
        noise = self.pod_noise(a.background_pod_rate)
        time.sleep(1.0)
        self.audit_tail.read_new()
        cpu0 = proc_cpu(self.op.pid)  # type: ignore[union-attr]
        sent: dict[tuple[str, str], tuple[float, float]] = {}
        interval = 1.0 / a.change_rate
        t_start = time.time()
        log(f"latency: {len(targets)} QuotaReserved changes at {a.change_rate}/s")

        def change(w: dict[str, Any], at: float) -> None:
            delay = at - time.time()
            if delay > 0:
                time.sleep(delay)
            key = (w["ns"], w["name"])
            t_send = time.time()
            for k in self.ksms:
                k.sent((*key, "QuotaReserved"), t_send)
            apply_status_condition(api, w["ns"], w["name"], condition(
                "QuotaReserved", "False", "Inadmissible", "LocalQueue lq doesn't exist", now_rfc3339()))
            sent[key] = (t_send, time.time())

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda iw: change(iw[1], t_start + 0.5 + iw[0] * interval), enumerate(targets)))
        t_sent = time.time()

        def updated(key: tuple[str, str]) -> float | None:
            t_send = sent[key][0]
            for t, reason in self.diag_history.get(key, []):
                if t >= t_send and reason != before[key]:
                    return t
            return None

        deadline = time.time() + a.latency_timeout
        while time.time() < deadline:
            with self.lock:
                done = sum(1 for k in sent if updated(k) is not None)
            if done == len(sent) and len(bare) >= len(sent) and all(k.seen() >= len(sent) for k in self.ksms):
                break
            time.sleep(0.2)
        t_end = time.time()
        bare_watch.stop_flag = True
        noise_sent = noise()
        with self.lock:
            op_lat = {k: updated(k) for k in sent}
            new_reasons = Counter(self.diag[k][1] for k in sent if k in self.diag)
        bare_ms = [(bare[k] - sent[k][0]) * 1e3 for k in sent if k in bare]
        op_ms = [(t - sent[k][0]) * 1e3 for k, t in op_lat.items() if t is not None]
        ack_ms = [(b - a_) * 1e3 for a_, b in sent.values()]
        writes = [e for e in self.audit_tail.read_new() if e["user"]["username"] == SA_USER]
        self.r["latency"] = {
            "changes": len(sent), "rate_per_s": a.change_rate, "send_seconds": round(t_sent - t_start, 1),
            "patch_ack_ms": {"p50": round(pct(ack_ms, 50), 1), "p99": round(pct(ack_ms, 99), 1)},
            "bare_watch_ms": {"n": len(bare_ms), "p50": round(pct(bare_ms, 50), 1), "p99": round(pct(bare_ms, 99), 1),
                              "max": round(max(bare_ms, default=float("nan")), 1)},
            "operator_ms": {"n": len(op_ms), "p50": round(pct(op_ms, 50), 1), "p99": round(pct(op_ms, 99), 1),
                            "max": round(max(op_ms, default=float("nan")), 1)},
            "reasons_before": dict(Counter(before.values())), "reasons_after": dict(new_reasons),
            "operator_writes_during": len(writes),
            "operator_cpu_s": round(proc_cpu(self.op.pid) - cpu0, 1),  # type: ignore[union-attr]
            "operator_cpu_share": round((proc_cpu(self.op.pid) - cpu0) / max(t_end - t_start, 1e-9), 2),  # type: ignore[union-attr]
            "bare_watch_events": dict(bare_events),
            "background_pod_patches": noise_sent,
        }
        lat = self.r["latency"]
        lat["ratio_p50"] = round(lat["operator_ms"]["p50"] / lat["bare_watch_ms"]["p50"], 1)
        lat["ratio_p99"] = round(lat["operator_ms"]["p99"] / lat["bare_watch_ms"]["p99"], 1)
        if self.ksms:
            lat["ksm"] = {}
        for k in self.ksms:
            km = lat["ksm"][k.name] = k.stop_scraper({key: t for key, (t, _) in sent.items()})
            for q in ("p50", "p99"):
                km[f"ratio_operator_ksm_{q}"] = round(lat["operator_ms"][q] / km[q], 2) if km.get(q) else None
        log(f"latency: {lat}")

    def pod_noise(self, rate: float) -> Callable[[], int]:
        """A steady stream of Pod updates beside the changes (a kubelet's status, a label), `rate` a second over the
        load's Pods: on a busy cluster the watch events never pause. Returns the function that stops it and says how
        many it sent."""
        stop, sent = threading.Event(), [0]

        def run() -> None:
            pods = self.api.request("GET", "/api/v1/pods", query={"limit": "2000"}).get("items") or []
            refs = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
            t0 = time.time()
            while refs and not stop.is_set():
                ns, name = refs[sent[0] % len(refs)]
                with contextlib.suppress(Exception):
                    self.api.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}",
                                     body={"metadata": {"annotations": {"bench.kueue-doctor.dev/tick": str(sent[0])}}},
                                     content_type="application/merge-patch+json")
                sent[0] += 1
                delay = t0 + sent[0] / rate - time.time()
                if delay > 0:
                    time.sleep(delay)

        thread = threading.Thread(target=run, name="pod-noise", daemon=True)
        if rate > 0:
            thread.start()

        def halt() -> int:
            stop.set()
            if rate > 0:
                thread.join(timeout=10)
            return sent[0]

        return halt

    def finish(self) -> None:
        if self.op is not None and self.op.poll() is None:
            st = proc_status(self.op.pid)
            self.r["operator_rss"] = {"end_mib": round(st.get("VmRSS", 0) / 1024),
                                      "peak_vmhwm_mib": round(st.get("VmHWM", 0) / 1024),
                                      "cpu_s_total": round(proc_cpu(self.op.pid), 1)}
            m = metrics_of(self.metrics_port)
            self.r["operator_metrics"] = {k: v for k, v in m.items() if any(s in k for s in (
                "passes", "pass_duration", "diagnosis_workloads", "writes", "watch_events", "errors"))}
            items, _ = list_all(self.api, f"{ADIAG}/admissiondiagnoses")
            self.r["diagnoses_final"] = {"count": len(items),
                                         "by_reason": dict(Counter(i["status"]["reason"] for i in items))}
            for k in self.ksms:
                k.finish()
            if self.cluster is not None:
                self.r["component_rss_mib"] = {name: round(proc_status(pid).get("VmRSS", 0) / 1024)
                                               for name, pid in self.cluster.pids().items()}

    def stop(self) -> None:
        for k in self.ksms:
            k.stop()
        if self.op is not None and self.op.poll() is None:
            os.killpg(self.op.pid, signal.SIGTERM)
            try:
                self.op.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.op.pid, signal.SIGKILL)
        if self.cluster is not None and not self.args.keep:
            self.cluster.stop()


def table(r: dict[str, Any]) -> str:
    su, idle, lat = r.get("startup", {}), r.get("idle", {}), r.get("latency", {})
    rates = r.get("creation_rates_per_s", {})
    load = r.get("load", {})
    rows = [
        ("load", f"{load.get('workloads')} Workloads {load.get('kinds')}, {load.get('pods')} Pods, "
                 f"{load.get('cluster_queues')} ClusterQueues"),
        ("creation rate /s", ", ".join(f"{k} {v}" for k, v in rates.items())),
        ("load created + settled", f"{r.get('load_seconds')} s (Kueue admission {r.get('kueue_admission_s')} s, "
                                   f"evaluation {r.get('kueue_evaluation_s')} s)"),
        ("start-up: spawn -> first diagnosis", f"{su.get('to_first_diagnosis_s')} s"),
        ("start-up: spawn -> half diagnosed", f"{su.get('to_half_diagnosed_s')} s"),
        ("start-up: spawn -> all on /metrics", f"{su.get('to_all_on_metrics_s')} s (the first complete pass)"),
        ("start-up: spawn -> all diagnosed", f"{su.get('to_all_diagnosed_s')} s  ({su.get('operator_writes')} writes "
                                             f"{su.get('operator_writes_by_verb')})"),
        ("start-up writes by HTTP code", f"{su.get('operator_writes_by_code')}, accepted "
                                         f"{su.get('operator_writes_accepted_per_s')}/s"
                                         + (f"; APF {r['apf']['nominal_concurrency_shares']} share(s), Reject: "
                                            f"throttled metric {su.get('throttled_metric')}" if r.get("apf") else "")),
        ("operator CPU to all diagnosed", f"{su.get('cpu_s_to_all_diagnosed')} s"),
        ("operator RSS at all diagnosed", f"{su.get('rss_at_all_diagnosed_mib')} MiB"),
        ("operator RSS end / peak (VmHWM)", f"{r.get('operator_rss', {}).get('end_mib')} MiB / "
                                            f"{r.get('operator_rss', {}).get('peak_vmhwm_mib')} MiB"),
        ("idle: operator writes/min", f"{idle.get('operator_writes_per_minute')} ({idle.get('operator_writes')} in "
                                      f"{idle.get('seconds')} s, per minute {idle.get('operator_writes_each_minute')}; "
                                      f"resync inside: {idle.get('covered_first_resync')})"),
        ("idle: other writes (no leases)", f"{idle.get('other_writes_excluding_leases')}"),
        ("idle: operator CPU", f"{idle.get('operator_cpu_s')} s over {idle.get('seconds')} s, "
                               f"{idle.get('diagnosis_passes')} passes"),
        ("latency: changes", f"{lat.get('changes')} at {lat.get('rate_per_s')}/s, {lat.get('reasons_before')} -> "
                             f"{lat.get('reasons_after')}; {lat.get('background_pod_patches', 0)} Pod updates beside "
                             "them"),
        ("latency: bare watch p50 / p99", f"{lat.get('bare_watch_ms', {}).get('p50')} / "
                                          f"{lat.get('bare_watch_ms', {}).get('p99')} ms"),
        ("latency: operator p50 / p99", f"{lat.get('operator_ms', {}).get('p50')} / "
                                        f"{lat.get('operator_ms', {}).get('p99')} ms "
                                        f"(n={lat.get('operator_ms', {}).get('n')})"),
        ("latency: ratio operator / bare", f"p50 {lat.get('ratio_p50')}x, p99 {lat.get('ratio_p99')}x"),
        ("latency: operator writes, CPU", f"{lat.get('operator_writes_during')} writes for {lat.get('changes')} "
                                          f"changes; CPU {lat.get('operator_cpu_share')} cores"),
        *ksm_rows(r),
        *churn_rows(r),
        *kueue_perf_rows(r),
        ("run time", f"{r.get('run_seconds')} s"),
    ]
    if r.get("kueue_perf"):  # no load of ours, no idle or latency phase: the scenario's rows alone
        rows = [rows[0], *[row for row in rows if row[0].startswith(("operator RSS end", "kueue-perf"))],
                ("run time", f"{r.get('run_seconds')} s")]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def ksm_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The peers' rows, each beside the operator's figure of the same run."""
    lat, op, oi = r.get("latency", {}), r.get("operator_rss", {}), r.get("idle", {})
    om = lat.get("operator_ms", {})
    rows: list[tuple[str, str]] = []
    for name, k in (r.get("ksm") or {}).items():
        su, ki, km = k.get("startup", {}), k.get("idle", {}), lat.get("ksm", {}).get(name, {})
        rows += [
            (f"peer {name}", f"{k.get('version')}, resources {k.get('resources')!r} + "
                             f"{k.get('custom_resource_state_config')}"),
            (f"{name}: spawn -> all on /metrics", f"{su.get('to_all_exposed_s')} s ({su.get('series')} condition "
                                                  f"series, {su.get('pods')} Pods, page {su.get('metrics_page_kib')} "
                                                  f"KiB)"),
            (f"{name}: RSS steady / peak", f"{ki.get('rss_end_mib')} / {k.get('peak_vmhwm_mib')} MiB (operator "
                                           f"{oi.get('rss_end_mib')} / {op.get('peak_vmhwm_mib')} MiB)"),
            (f"{name}: CPU total, idle window", f"{k.get('cpu_s_total')} s, {ki.get('cpu_s')} s (operator "
                                                f"{op.get('cpu_s_total')} s, {oi.get('operator_cpu_s')} s)"),
            (f"{name}: change -> /metrics p50/p99", f"{km.get('p50')} / {km.get('p99')} ms (n={km.get('n')}; "
                                                   f"{km.get('hz_got')} scrapes/s of p50 {km.get('scrape_ms_p50')} "
                                                   f"ms; operator {om.get('p50')} / {om.get('p99')} ms: "
                                                   f"{km.get('ratio_operator_ksm_p50')}x / "
                                                   f"{km.get('ratio_operator_ksm_p99')}x)"),
        ]
    return rows


def machine() -> dict[str, Any]:
    mem = next((ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")),
               "0")
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), "?")
    return {"cpus": os.cpu_count(), "cpu_model": model, "mem_gib": round(int(mem) / 1024 / 1024, 1),
            "python": sys.version.split()[0], "load_avg_at_start": os.getloadavg()}


class _Done(Exception):
    """A mode that replaces the phases after start-up has run to its end."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--pods", type=int, default=50_000)
    ap.add_argument("--quick", action="store_true", help="1,000 Workloads, 5,000 Pods, 100 changes, 60 s idle")
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--cohort-size", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--admitted-fraction", type=float, default=0.2)
    ap.add_argument("--stopped-fraction", type=float, default=0.1, help="share of ClusterQueues with stopPolicy Hold")
    ap.add_argument("--exceeds-fraction", type=float, default=0.1, help="share of pending Workloads too big ever")
    ap.add_argument("--threads", type=int, default=16, help="creation threads (keep-alive connection each)")
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--background-pod-rate", type=float, default=0.0, metavar="N",
                    help="during the single changes, N Pod updates a second beside them (a busy cluster's kubelets: "
                         "the watch events never pause); 0: none")
    ap.add_argument("--change-rate", type=float, default=5.0)
    ap.add_argument("--idle-seconds", type=float, default=120.0)
    ap.add_argument("--churn-seconds", type=float, default=120.0,
                    help="Kueue-paced churn after the latency phase (bench/churn.py): admitted Workloads finish and as "
                    "many arrive, Kueue admits into the freed quota; 0 skips it")
    ap.add_argument("--churn-rate", type=float, default=40.0,
                    help="finishes (and arrivals) per second during the churn; Kueue's perf scenarios admit about 42/s")
    ap.add_argument("--idle-cover-resync", action=argparse.BooleanOptionalAction, default=True,
                    help="stretch the idle window past the operator's first resync (default on)")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after all diagnosed before the idle window")
    ap.add_argument("--refresh-interval", type=float, default=60.0)
    ap.add_argument("--resync-interval", type=float, default=300.0)
    ap.add_argument("--pods-ready-timeout", default="1h", help="Kueue waitForPodsReady timeout")
    ap.add_argument("--startup-timeout", type=float, default=900.0)
    ap.add_argument("--kueue-timeout", type=float, default=600.0)
    ap.add_argument("--latency-timeout", type=float, default=180.0)
    ap.add_argument("--peer", choices=("auto", "ksm", "none"), default="auto",
                    help="kube-state-metrics beside the operator (auto: when bash hack/ksm/build.sh has built it)")
    ap.add_argument("--ksm-resources", action="append",
                    help="one KSM instance per use: its own collectors besides the Workload conditions, comma "
                         "separated, '' for none (default: two instances, '' and 'pods')")
    ap.add_argument("--ksm-hz", type=float, default=20.0,
                    help="/metrics scrapes per second during the changes, of an instance with no collectors of its own")
    ap.add_argument("--ksm-collectors-hz", type=float, default=2.0,
                    help="the same for an instance with collectors of its own (its page is about 4 KB per Pod; "
                         "0: not scraped during the changes)")
    ap.add_argument("--apf-shares", type=int, default=0,
                    help="above 0: a FlowSchema holds the operator's ServiceAccount to this many nominal concurrency "
                    "shares and rejects the rest with 429 + Retry-After, for the whole run (0: not throttled)")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="trace the operator's allocations and report them by file and line after the idle window "
                    "(its RSS figures are then about doubled: never compare them with an untraced run)")
    ap.add_argument("--workdir", help="work directory (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--compiled", action="store_true",
                    help="run the operator compiled by mypyc, as the image ships it (hack/compiled.sh builds it)")
    ap.add_argument("--kueue-perf", choices=("baseline", "large-scale"),
                    help="instead of the load and the phases after start-up: Kueue's own scheduler perf scenario "
                    "(test/performance/scheduler/configs/NAME of the Kueue module), Kueue admitting and a runner "
                    "finishing the Workloads while the operator runs (bench/kueue_perf.py)")
    ap.add_argument("--kueue-perf-timeout", type=float, default=3600.0,
                    help="seconds to wait for Kueue to finish every Workload of --kueue-perf")
    ap.add_argument("--shards", type=int, default=1,
                    help="above 1: one process before the load (the baseline), then after it one replica and N "
                    "namespace shards side by side (bench/shards.py) instead of the start-up, idle and latency phases")
    args = ap.parse_args()
    if args.compiled:  # every operator process this bench starts (here and in bench/shards.py) reads it
        os.environ[ENGINE_PATH_ENV] = subprocess.run(["bash", str(ROOT / "hack" / "compiled.sh")], check=True,
                                                     capture_output=True, text=True).stdout.strip()
    if args.quick:
        args.workloads, args.pods = min(args.workloads, 1000), min(args.pods, 5000)
        args.changes, args.idle_seconds = min(args.changes, 100), min(args.idle_seconds, 60)
        args.churn_seconds, args.churn_rate = min(args.churn_seconds, 60), min(args.churn_rate, 10)
    if args.peer == "auto":
        built = subprocess.run(["bash", str(peer.BUILD), "--print-if-built"], capture_output=True).returncode == 0
        args.peer = "ksm" if built else "none"
    args.ksm_resources = args.ksm_resources if args.ksm_resources is not None else ["", "pods"]
    bench = Bench(args)
    bench.r["machine"] = machine()
    bench.r["command"] = " ".join(["python", "bench/operator_scale.py", *sys.argv[1:]])
    code = 0
    try:
        bench.start_cluster()
        if args.kueue_perf:
            import kueue_perf

            scenario = kueue_perf.Scenario.load(args.kueue_perf, kueue_perf.config_path(args.kueue_perf))
            kueue_perf.setup(bench, scenario)
            bench.plan = Plan(0, 0, len(scenario.queues), 1, 0, 0, 0)  # no Workload before the operator starts
            bench.r["load"] = {"workloads": len(scenario.workloads), "cluster_queues": len(scenario.queues),
                               "kinds": {"kueue-perf": args.kueue_perf}, "pods": 0}
            bench.run_operator()
            bench.r["kueue_perf"] = kueue_perf.run(bench, scenario, args.kueue_perf_timeout)
            bench.finish()
            raise _Done
        empty = None
        if args.shards > 1:  # what one process costs before the load exists: no shard can divide it
            from shards import baseline

            empty = baseline(bench.install_operator(), bench.workdir)
            log(f"one process on the cluster before the load: {empty['rss_mib']} MiB RSS")
        bench.create_load()
        if args.shards > 1:
            from shards import compare
            from shards import table as shard_table

            bench.r["shards"] = compare(bench.install_operator(), bench.workdir, args.shards, empty=empty)
            log("namespace shards beside one replica, same load:\n" + shard_table(bench.r["shards"]))
        else:
            bench.run_operator()
            bench.idle()
            bench.latency()
            if args.churn_seconds > 0:
                from churn import churn

                bench.r["churn"] = churn(bench, args.churn_seconds, args.churn_rate)
            bench.finish()
    except _Done:
        pass
    except BaseException as exc:
        code = 1
        bench.r["error"] = f"{type(exc).__name__}: {exc}"
        log(f"FAILED: {bench.r['error']}")
        if bench.op is not None:
            log("operator log tail:\n" + bench.tail_log())
    finally:
        bench.r["run_seconds"] = round(time.time() - T0)
        bench.stop()
    out = json.dumps(bench.r, indent=2, default=str)
    path = Path(args.json) if args.json else bench.workdir / "results.json" if hasattr(bench, "workdir") else None
    if path:
        path.write_text(out)
        log(f"results: {path}")
    print(table(bench.r))
    return code


if __name__ == "__main__":
    sys.exit(main())
