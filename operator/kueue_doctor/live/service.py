"""`kueue-doctor run`: Kopf's watches feeding the runtime's inbox; metrics and liveness endpoints.

Read-only towards everything it watches (KOPF-NOTES): `on.event` registrations only (they say what to watch;
`relay` hands the events to the inbox), standalone (no peering), no Kopf event posting, no finalizers,
annotations or status on watched objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kopf
from kopf._cogs.structs import references  # no public name; the Kopf version is pinned (pyproject.toml)
from prometheus_client import start_http_server

from . import heap, memprofile, rest
from .discovery import Discovery
from .leader import ElectionConfig, LeaderElector
from .metrics import registry_for
from .outage import Outage
from .relay import relay
from .runtime import Options, Runtime
from .snapshot import JOB_SELECTOR, KUEUE, OWNER_RESOURCES, POD_SELECTOR

log = logging.getLogger("kueue_doctor.service")

# (group, version, plural, kind); Kueue's version is pinned to v1beta2 (storage since v0.16)
KUEUE_WATCHES = [("workloads", "Workload"), ("localqueues", "LocalQueue"), ("clusterqueues", "ClusterQueue"),
                 ("resourceflavors", "ResourceFlavor"), ("cohorts", "Cohort"), ("admissionchecks", "AdmissionCheck"),
                 ("topologies", "Topology")]
OPTIONAL_WATCHES = [("batch", "v1", "jobs", "Job"), ("", "v1", "pods", "Pod"), ("", "v1", "events", "Event"),
                    ("", "v1", "namespaces", "Namespace"), (KUEUE, "v1beta2", "workloadpriorityclasses",
                                                            "WorkloadPriorityClass"),
                    (KUEUE, "v1beta2", "multikueueclusters", "MultiKueueCluster"),
                    (KUEUE, "v1beta2", "multikueueconfigs", "MultiKueueConfig"),
                    (KUEUE, "v1beta2", "provisioningrequestconfigs", "ProvisioningRequestConfig"), *OWNER_RESOURCES]


def connection_info() -> kopf.ConnectionInfo:
    """Kopf's credentials from the client configuration `rest.load_client` loaded (the same identity).

    Kopf's own login re-reads the default kubeconfig location, which ignores --kubeconfig.
    """
    from kubernetes import client

    cfg = client.Configuration.get_default_copy()
    # through the getter, so the client's refresh hook renews short-lived tokens on Kopf's re-login
    auth = cfg.get_api_key_with_prefix("authorization") or cfg.get_api_key_with_prefix("BearerToken") or ""
    scheme, _, token = auth.partition(" ")
    return kopf.ConnectionInfo(
        server=cfg.host, ca_path=cfg.ssl_ca_cert, insecure=not cfg.verify_ssl,
        scheme=scheme or None, token=token or None,
        certificate_path=cfg.cert_file, private_key_path=cfg.key_file, proxy_url=cfg.proxy)


def watches(discovery: Discovery) -> list[tuple[str, str, str, str]]:
    """(group, version, plural, kind) to watch: Kueue's kinds, the optional kinds RBAC allows (a 403 watch
    ends the relay), our own AdmissionDiagnosis objects (to restore them when edited or deleted), and, when allowed,
    CustomResourceDefinitions (our CRD deleted or re-applied is acted on at once)."""
    out = [(KUEUE, discovery.version, plural, kind) for plural, kind in KUEUE_WATCHES]
    out += [w for w in OPTIONAL_WATCHES if discovery.allowed(w[3])]
    out.append(("kueue-doctor.dev", "v1alpha1", "admissiondiagnoses", "AdmissionDiagnosis"))
    if discovery.crds_watchable:
        out.append(("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition"))
    return out


async def declared(**_: Any) -> None:
    """Never called: the registration tells Kopf's resource observer what to watch, and `relay` hands the
    events to the inbox without Kopf's per-object processing (which would call this)."""
    return None


def build_registry(runtime: Runtime, elector: LeaderElector | None = None) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    if elector is not None:
        @kopf.on.cleanup(registry=registry)
        async def release_lease(**_: Any) -> None:
            """First thing on SIGTERM: stop writing and give the Lease up, so a standby leads within a retry
            period (Kopf's own shutdown takes seconds more)."""
            await elector.release()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.peering.standalone = True
        settings.watching.chunk_size = 500
        settings.watching.label_selectors["batch", "v1", "jobs"] = JOB_SELECTOR
        for group, version, plural, _kind in OWNER_RESOURCES:  # the same membership as snapshot.listings
            settings.watching.label_selectors[group, version, plural] = JOB_SELECTOR
        settings.watching.label_selectors["v1", "pods"] = POD_SELECTOR  # gated Pod groups: polled (orphans.py)
        settings.watching.field_selectors["v1", "events"] = "type=Warning"
        shard = runtime.options.shard
        if shard.selector:  # ranges: only this shard's Events, owners and diagnoses (KEP-5866), as the LISTs
            namespaced = {lst.kind for lst in runtime.discovery.listings() if lst.namespaced} | {"AdmissionDiagnosis"}
            for group, version, plural, kind in watches(runtime.discovery):
                if kind in namespaced and shard.narrows(kind):
                    key = (group, version, plural) if group else (version, plural)
                    settings.watching.shard_selectors[key] = shard.selector

    for group, version, plural, _kind in watches(runtime.discovery):
        kopf.on.event(group, version, plural, id=f"observe-{plural}", registry=registry)(declared)
    return registry


class QuietServer(ThreadingHTTPServer):
    """A probe that hangs up before reading its answer is no error: no traceback for it in the log."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            log.debug("A health probe from %s closed the connection before reading the answer.", client_address)
            return
        super().handle_error(request, client_address)


KOPF_DIR = os.path.dirname(kopf.__file__)


class OutsideKopf(Collection[asyncio.Task[object]]):
    """The tasks Kopf must leave alone when it stops: those that existed before it started and every task whose
    coroutine is not Kopf's (the diagnosis loop's wait_for and the publisher's gather create theirs while Kopf
    runs). Kopf's `run_tasks` cancels every other task as "hung" when it stops, which would end the diagnosis
    loop at the first restart of the watches."""

    def __init__(self, before: Collection[asyncio.Task[object]]) -> None:
        self.before = set(before)

    def __contains__(self, task: object) -> bool:
        if task in self.before or not isinstance(task, asyncio.Task):
            return True
        code = getattr(task.get_coro(), "cr_code", None)
        return code is None or not code.co_filename.startswith(KOPF_DIR)

    def __iter__(self) -> Iterator[asyncio.Task[object]]:
        return iter(self.before)

    def __len__(self) -> int:
        return len(self.before)


class Health:
    """`/healthz` from the first second: starting, waiting for Kueue and long passes are all alive.

    Unhealthy only when the diagnosis loop has shown no sign of life (a pass chunk, a write, a wake-up)
    for `stale_after` seconds: a stuck loop, which a restart fixes. A standby is as healthy as a leader.

    `/readyz`: 503 only while the start-up LIST fills the state; then 200, for a leader and a standby alike
    (a standby's state is warm, it can take over at once; a NotReady standby would stall rolling updates and
    make the PodDisruptionBudget forbid evicting the leader). Waiting for Kueue to be installed is ready too.
    """

    def __init__(self, runtime: Runtime, stale_after: float) -> None:
        self.runtime, self.stale_after = runtime, stale_after
        self.waiting_for_kueue = False

    def ready(self) -> tuple[int, dict[str, Any]]:
        if self.runtime.ready.is_set() or self.waiting_for_kueue:
            return 200, {"ready": True, "leader": self.runtime.stats.leader}
        return 503, {"ready": False, "reason": "the start-up LIST of the cluster is still filling the state"}

    def check(self) -> tuple[int, dict[str, Any]]:
        st = self.runtime.stats
        quiet = time.monotonic() - st.heartbeat
        discovery = self.runtime.discovery
        body = {"phase": "running" if self.runtime.ready.is_set() else "starting",
                "role": "leader" if st.leader else "standby", "kueueInstalled": st.kueue_installed,
                "crdInstalled": st.crd_installed,
                "secondsSinceLoopActivity": round(quiet, 1), "passes": st.passes,
                "apiserverReachable": discovery.unreachable_since is None,
                "forbiddenKinds": sorted(discovery.forbidden)}
        if discovery.unreachable_since is not None:
            body["apiserverUnreachableSince"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                              time.gmtime(discovery.unreachable_since))
        if self.runtime.ready.is_set() and quiet > self.stale_after:
            body["error"] = (f"the diagnosis loop has shown no activity for {quiet:.0f}s (limit "
                             f"{self.stale_after:.0f}s): restarting is the fix; see the logs for the last pass")
            return 500, body
        return 200, body

    def handler(self) -> type[BaseHTTPRequestHandler]:
        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/healthz"):
                    code, body = health.check()
                elif self.path.startswith("/readyz"):
                    code, body = health.ready()
                else:
                    code, body = 404, {"error": "not found"}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # probes every few seconds would flood the log

        return Handler

    def serve(self, port: int) -> None:
        server = QuietServer(("0.0.0.0", port), self.handler())
        threading.Thread(target=server.serve_forever, name="healthz", daemon=True).start()


def follow_leadership(runtime: Runtime, leading: bool) -> None:
    """Only the leader writes. On taking over, every Workload is diagnosed again and compared with what is
    stored (the standby's records follow the leader's writes through the watch), so only what changed since
    the old leader's last write is written."""
    runtime.publisher.leading = leading
    runtime.stats.leader = leading
    if leading:
        runtime.inbox.mark(runtime.state.workloads)
        runtime.inbox.mark(runtime.state.owner_workload_names())
        runtime.inbox.wake.set()


def hand_over_on_signals(elector: LeaderElector, stop: Callable[[], None]) -> None:
    """SIGTERM (a rolling update, a drain) and SIGINT: release the Lease first, then stop Kopf.

    Kopf's own shutdown takes 2-6 s before its cleanup handlers run; releasing first lets the standby lead
    within one retry period. Installed after the election's first attempt, by when Kopf has installed its own
    handlers (these replace them; the operator then stops through `stop`). After a restart of the watches
    Kopf's own handlers answer again: the Lease is then released when the operator ends."""
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task[None]] = set()

    async def hand_over() -> None:
        try:
            await elector.release()
        finally:
            stop()

    def on_signal(signum: int) -> None:
        log.info("Signal %s received: handing the Lease over, then stopping.", signal.Signals(signum).name)
        task = loop.create_task(hand_over(), name="hand-over")
        running.add(task)
        task.add_done_callback(running.discard)

    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, on_signal, signum)


async def serve(options: Options, metrics_port: int, health_port: int, kubeconfig: str | None,
                context: str | None, election: ElectionConfig | None = None, verbose: bool = False) -> int:
    try:
        api = rest.load_client(kubeconfig, context)
        await asyncio.to_thread(rest.request, api, "GET", "/version")
    except rest.ApiError as exc:
        log.error("Cannot reach the Kubernetes API: %s. Check the kubeconfig (KUBECONFIG, --kubeconfig) or the "
                  "in-cluster service account, and the network to the apiserver.", exc)
        return 1
    outage = Outage(api)
    outage.install(verbose)
    outage_task = asyncio.create_task(outage.watch(), name="outage-watch")
    trim_task = asyncio.create_task(heap.trim_periodically(), name="heap-trim")
    runtime = Runtime(api, options)
    elector = None
    if election is not None:
        elector = LeaderElector(api, election, lambda leading: follow_leadership(runtime, leading))
        follow_leadership(runtime, False)  # a standby until the Lease is ours
    start_http_server(metrics_port, registry=registry_for(runtime))
    health = Health(runtime, stale_after=max(3 * options.resync_interval, 600.0))
    health.serve(health_port)
    log.info("Metrics on :%d/metrics, liveness on :%d/healthz, readiness on :%d/readyz", metrics_port, health_port,
             health_port)
    waited = False
    while not await runtime.discovery.kueue_served():
        health.waiting_for_kueue = True
        runtime.stats.kueue_installed = False
        runtime.stats.heartbeat = time.monotonic()
        if not waited:
            log.warning("Kueue's API (%s) is not served by this cluster: nothing to diagnose yet. Install Kueue; "
                        "checking again every %.0fs.", KUEUE, min(30.0, options.recheck_interval))
        waited = True
        await asyncio.sleep(min(30.0, options.recheck_interval))
    if waited:
        log.info("Kueue's API (%s) is served now: starting.", KUEUE)
    health.waiting_for_kueue = False
    runtime.stats.kueue_installed = True
    await runtime.discovery.check_access()
    await runtime.initial_sync()
    runtime.stats.heartbeat = time.monotonic()
    runtime.ready.set()
    loop_task = asyncio.create_task(runtime.loop.run(), name="diagnosis-loop")
    election_task = None
    if elector is not None:  # the election starts once the state is warm: whoever leads can write at once
        election_task = asyncio.create_task(elector.run(lambda: hand_over_on_signals(elector, runtime.stop)),
                                            name="leader-election")

    async def watch(stop: asyncio.Event) -> None:  # restarted by the runtime when the kinds to watch change
        outside = OutsideKopf(asyncio.all_tasks())
        settings, insights = kopf.OperatorSettings(), references.Insights()
        tasks = await kopf.spawn_tasks(registry=build_registry(runtime, elector), standalone=True,
                                       clusterwide=not options.namespaces, namespaces=options.namespaces,
                                       stop_flag=stop, settings=settings, insights=insights,
                                       _command=relay(settings, insights, runtime.inbox.observe))
        try:
            await kopf.run_tasks(tasks, ignored=outside)
        finally:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):  # Kopf's handlers answer only while it runs
                loop.remove_signal_handler(sig)
    try:
        await runtime.run_watches(watch)
    finally:
        loop_task.cancel()
        outage_task.cancel()
        trim_task.cancel()
        if elector is not None and election_task is not None:
            election_task.cancel()
            await elector.release()
    return 0


def run(options: Options, metrics_port: int = 8080, health_port: int = 8081, kubeconfig: str | None = None,
        context: str | None = None, log_format: str = "text", verbose: bool = False,
        election: ElectionConfig | None = None) -> int:
    heap.limit_arenas()  # before the first thread: a thread keeps the arena it got
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat.JSON if log_format == "json" else kopf.LogFormat.PLAIN)
    memprofile.install_from_env()
    return asyncio.run(serve(options, metrics_port, health_port, kubeconfig, context, election, verbose))
