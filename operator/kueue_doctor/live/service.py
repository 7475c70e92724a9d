"""`kueue-doctor run`: Kopf watches feeding the runtime's inbox; metrics and liveness endpoints.

Read-only towards everything it watches (KOPF-NOTES): only `on.event` handlers that return None,
standalone (no peering), no Kopf event posting, no finalizers, annotations or status on watched objects.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Collection, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kopf
from prometheus_client import start_http_server

from . import rest
from .discovery import Discovery
from .metrics import registry_for
from .runtime import Options, Runtime
from .snapshot import JOB_SELECTOR, KUEUE, OWNER_RESOURCES

log = logging.getLogger("kueue_doctor.service")

# (group, version, plural, kind); Kueue's version is pinned to v1beta2 (storage since v0.16)
KUEUE_WATCHES = [("workloads", "Workload"), ("localqueues", "LocalQueue"), ("clusterqueues", "ClusterQueue"),
                 ("resourceflavors", "ResourceFlavor"), ("cohorts", "Cohort"), ("admissionchecks", "AdmissionCheck"),
                 ("topologies", "Topology")]
OPTIONAL_WATCHES = [("batch", "v1", "jobs", "Job"), ("", "v1", "pods", "Pod"), ("", "v1", "events", "Event"),
                    ("", "v1", "namespaces", "Namespace"), (KUEUE, "v1beta2", "workloadpriorityclasses",
                                                            "WorkloadPriorityClass"), *OWNER_RESOURCES]


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
    """(group, version, plural, kind) to watch: Kueue's kinds, the optional kinds RBAC allows (Kopf exits on a
    403 watch), our own AdmissionDiagnosis objects (to restore them when edited or deleted), and, when allowed,
    CustomResourceDefinitions (our CRD deleted or re-applied is acted on at once)."""
    out = [(KUEUE, discovery.version, plural, kind) for plural, kind in KUEUE_WATCHES]
    out += [w for w in OPTIONAL_WATCHES if discovery.allowed(w[3])]
    out.append(("kueue-doctor.dev", "v1alpha1", "admissiondiagnoses", "AdmissionDiagnosis"))
    if discovery.crds_watchable:
        out.append(("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition"))
    return out


def build_registry(runtime: Runtime) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

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
        settings.watching.label_selectors["v1", "pods"] = "kueue.x-k8s.io/podset"
        settings.watching.field_selectors["v1", "events"] = "type=Warning"

    def feed(kind: str) -> Any:
        async def handler(event: dict[str, Any], **_: Any) -> None:
            obj = event.get("object")
            if isinstance(obj, dict):
                obj.setdefault("kind", kind)
                runtime.inbox.observe(event.get("type"), obj)
            return None  # a value would be patched into the watched object's status
        handler.__name__ = f"observe_{kind.lower()}"
        return handler

    for group, version, plural, kind in watches(runtime.discovery):
        kopf.on.event(group, version, plural, id=f"observe-{plural}", registry=registry)(feed(kind))
    return registry


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
    for `stale_after` seconds: a stuck loop, which a restart fixes.
    """

    def __init__(self, runtime: Runtime, stale_after: float) -> None:
        self.runtime, self.stale_after = runtime, stale_after

    def check(self) -> tuple[int, dict[str, Any]]:
        st = self.runtime.stats
        quiet = time.monotonic() - st.heartbeat
        discovery = self.runtime.discovery
        body = {"phase": "running" if self.runtime.ready.is_set() else "starting",
                "kueueInstalled": st.kueue_installed, "crdInstalled": st.crd_installed,
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

    def serve(self, port: int) -> None:
        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code, body = health.check() if self.path.startswith("/healthz") else (404, {"error": "not found"})
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # probes every few seconds would flood the log

        server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        threading.Thread(target=server.serve_forever, name="healthz", daemon=True).start()


async def serve(options: Options, metrics_port: int, health_port: int, kubeconfig: str | None,
                context: str | None) -> int:
    try:
        api = rest.load_client(kubeconfig, context)
        await asyncio.to_thread(rest.request, api, "GET", "/version")
    except rest.ApiError as exc:
        log.error("Cannot reach the Kubernetes API: %s. Check the kubeconfig (KUBECONFIG, --kubeconfig) or the "
                  "in-cluster service account, and the network to the apiserver.", exc)
        return 1
    runtime = Runtime(api, options)
    start_http_server(metrics_port, registry=registry_for(runtime))
    Health(runtime, stale_after=max(3 * options.resync_interval, 600.0)).serve(health_port)
    log.info("Metrics on :%d/metrics, liveness on :%d/healthz", metrics_port, health_port)
    waited = False
    while not await runtime.discovery.kueue_served():
        runtime.stats.kueue_installed = False
        runtime.stats.heartbeat = time.monotonic()
        if not waited:
            log.warning("Kueue's API (%s) is not served by this cluster: nothing to diagnose yet. Install Kueue; "
                        "checking again every %.0fs.", KUEUE, min(30.0, options.recheck_interval))
        waited = True
        await asyncio.sleep(min(30.0, options.recheck_interval))
    if waited:
        log.info("Kueue's API (%s) is served now: starting.", KUEUE)
    runtime.stats.kueue_installed = True
    await runtime.discovery.check_access()
    await runtime.initial_sync()
    runtime.stats.heartbeat = time.monotonic()
    runtime.ready.set()
    loop_task = asyncio.create_task(runtime.loop.run(), name="diagnosis-loop")

    async def watch(stop: asyncio.Event) -> None:  # restarted by the runtime when the kinds to watch change
        outside = OutsideKopf(asyncio.all_tasks())
        tasks = await kopf.spawn_tasks(registry=build_registry(runtime), standalone=True,
                                       clusterwide=not options.namespaces, namespaces=options.namespaces,
                                       stop_flag=stop)
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
    return 0


def run(options: Options, metrics_port: int = 8080, health_port: int = 8081, kubeconfig: str | None = None,
        context: str | None = None, log_format: str = "text", verbose: bool = False) -> int:
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat.JSON if log_format == "json" else kopf.LogFormat.PLAIN)
    if not verbose:  # Kopf logs every handled watch event at INFO: 10,000s of lines an hour on a busy cluster
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    return asyncio.run(serve(options, metrics_port, health_port, kubeconfig, context))
