"""Faults of single control-plane components, without tearing the whole cluster down.

Used by ``tests/e2e/test_faults.py`` (through the ``control_plane_faults`` fixture) on a running
:class:`localcluster.LocalCluster`:

* :func:`component_down` stops one component (``etcd``, ``kube-apiserver``, ``kueue``, ...) and starts it
  again, with the same command line, ports and data directory, when the block ends;
* :func:`restart` does both at once and returns how long the component took to be healthy again;
* :func:`compact_etcd` compacts etcd's history up to its current revision, through etcd's HTTP gateway
  (``POST /v3/kv/compaction`` on the client URL; no etcdctl is built), so that any watch asking for an
  older revision gets "410 Gone";
* :class:`BareApiserver` is a second kube-apiserver on the same etcd under its own key prefix: an empty
  cluster with no CRDs (Kueue not installed yet), for tests that install Kueue's CRDs after a client started.

Only the standard library and what ``localcluster`` already uses. A hook that fails says which component and
shows its last log lines (``Component.describe_failure``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import localcluster as lc

ETCD, APISERVER = "etcd", "kube-apiserver"


def _api_context(cluster: lc.LocalCluster) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cluster.ca_cert))


def _healthy(cluster: lc.LocalCluster, name: str) -> bool:
    """The component's own health endpoint answers 200 (the same checks `LocalCluster.start` waits for)."""
    p = cluster.ports
    if name == ETCD:
        res = lc.http_get(f"http://127.0.0.1:{p['etcd']}/health")
        return res is not None and res[0] == 200 and '"health":"true"' in res[1].replace(" ", "")
    if name == APISERVER:
        res = lc.http_get(f"{cluster.api_url}/readyz", _api_context(cluster))
        return res is not None and res[0] == 200
    if name == "kueue":
        return cluster._kueue_ready()
    insecure = lc._insecure_context()
    port, path = {"kube-controller-manager": (p["kcm"], "/healthz"),
                  "kube-scheduler": (p["scheduler"], "/readyz")}[name]
    res = lc.http_get(f"https://127.0.0.1:{port}{path}", insecure)
    return res is not None and res[0] == 200


def stop(cluster: lc.LocalCluster, name: str) -> None:
    """Stop one component (SIGTERM, then SIGKILL after 10 s); the others keep running."""
    comp = cluster.components[name]
    comp.stop()
    cluster._log(f"fault: stopped {name}")


def start(cluster: lc.LocalCluster, name: str, timeout: float = 120.0) -> float:
    """Start a stopped component again with its command line, ports and data; seconds until it is healthy."""
    comp = cluster.components[name]
    if comp.alive():
        raise lc.ControlPlaneError(f"{name} is running; stop it first")
    t0 = time.monotonic()
    comp.start()
    others = [c for n, c in cluster.components.items() if n != name and n != ETCD and c.alive()]
    watch = [comp] + ([cluster.components[ETCD]] if name != ETCD else [])
    cluster._wait(f"{name} to be healthy again", lambda: _healthy(cluster, name), timeout, watch)
    if name in (ETCD, APISERVER):  # the others talk to the apiserver: say so if one gave up meanwhile
        cluster._wait("the apiserver after the restart", lambda: _healthy(cluster, APISERVER), timeout,
                      [comp, *others])
    took = round(time.monotonic() - t0, 2)
    cluster.timings[f"last-{name}-restart"] = took
    cluster._log(f"fault: started {name} again, healthy in {took}s")
    return took


@contextlib.contextmanager
def component_down(cluster: lc.LocalCluster, name: str, timeout: float = 120.0) -> Iterator[None]:
    """The block runs with `name` stopped; it is started again however the block ends."""
    stop(cluster, name)
    try:
        yield
    finally:
        start(cluster, name, timeout)


def restart(cluster: lc.LocalCluster, name: str, down_for: float = 0.0, timeout: float = 120.0) -> float:
    """Stop, wait `down_for` seconds, start; the seconds from the start until it is healthy."""
    stop(cluster, name)
    time.sleep(down_for)
    return start(cluster, name, timeout)


# ---- etcd's HTTP gateway -------------------------------------------------------------------------


def _etcd_post(cluster: lc.LocalCluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"http://127.0.0.1:{cluster.ports['etcd']}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=30) as rsp:
        out: dict[str, Any] = json.loads(rsp.read())
        return out


def etcd_revision(cluster: lc.LocalCluster) -> int:
    """etcd's current revision (the newest resourceVersion the apiserver can hand out)."""
    out = _etcd_post(cluster, "/v3/kv/range", {"key": base64.b64encode(b"/").decode(), "limit": 1,
                                                "keys_only": True})
    return int(out["header"]["revision"])


def compact_etcd(cluster: lc.LocalCluster, revision: int | None = None) -> int:
    """Compact etcd's history up to `revision` (default: the current one); the revision compacted to.

    Afterwards a watch or a LIST at an older resourceVersion that reaches etcd gets "410 Gone", as when
    the apiserver's own compaction (every 5 minutes) passed a client's last resourceVersion.
    """
    rev = revision if revision is not None else etcd_revision(cluster)
    _etcd_post(cluster, "/v3/kv/compaction", {"revision": str(rev), "physical": True})
    cluster._log(f"fault: compacted etcd to revision {rev}")
    return rev


# ---- a second, empty apiserver on the same etcd ----------------------------------------------------


def _replace_flag(argv: list[str], flag: str, value: str | None) -> list[str]:
    out = [a for a in argv if not a.startswith(f"{flag}=")]
    return out if value is None else [*out, f"{flag}={value}"]


@dataclass
class BareApiserver:
    """A kube-apiserver on the cluster's etcd under key prefix `/<name>`: an empty cluster (no CRDs, no
    Kueue, no controllers), with its own port, audit log and admin kubeconfig (system:masters)."""

    cluster: lc.LocalCluster
    name: str
    component: lc.Component | None = None
    kubeconfig: Path = field(default_factory=Path)
    url: str = ""

    def start(self, timeout: float = 120.0) -> float:
        cluster = self.cluster
        if cluster.pki is None:
            raise lc.ControlPlaneError("the cluster is not started")
        (port,) = lc.free_ports(1)
        self.url = f"https://127.0.0.1:{port}"
        argv = list(cluster.components[APISERVER].argv)
        for flag, value in (("--secure-port", str(port)), ("--etcd-prefix", f"/{self.name}"),
                            ("--audit-log-path", str(self.audit_log))):
            argv = _replace_flag(argv, flag, value)
        self.component = lc.Component(self.name, argv, cluster.workdir / "logs" / f"{self.name}.log")
        t0 = time.monotonic()
        self.component.start()
        pair = cluster.pki.issue(f"{self.name}-admin", lc.ADMIN_USER, organizations=["system:masters"],
                                 client=True)
        self.kubeconfig = lc.write_kubeconfig(cluster.workdir / f"{self.name}.kubeconfig", self.url,
                                              cluster.pki.ca_pem, pair, lc.ADMIN_USER)
        ctx = _api_context(cluster)

        def ready() -> bool:
            res = lc.http_get(f"{self.url}/readyz", ctx)
            return res is not None and res[0] == 200

        cluster._wait(f"{self.name} /readyz", ready, timeout, [self.component, cluster.components[ETCD]])
        return round(time.monotonic() - t0, 2)

    @property
    def audit_log(self) -> Path:
        return self.cluster.workdir / f"{self.name}-audit.log"

    def api_client(self) -> Any:
        return lc.new_api_client(self.kubeconfig)

    def user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A client-certificate kubeconfig for `user` on this apiserver (no RBAC is given)."""
        assert self.cluster.pki is not None
        stem = f"{self.name}-" + "".join(ch if ch.isalnum() else "-" for ch in user)
        pair = self.cluster.pki.issue(stem, user, organizations=groups, client=True)
        return lc.write_kubeconfig(self.cluster.workdir / f"{stem}.kubeconfig", self.url, self.cluster.pki.ca_pem,
                                   pair, user)

    def install_kueue_crds(self, api: Any) -> list[str]:
        """Kueue's CRDs (the same files the cluster installs), waited for until Established and discovered."""
        assert self.component is not None
        names = self.cluster._install_crds(api)
        self.cluster._wait_crds(api, names, [self.component])
        return names

    def stop(self) -> None:
        """Stop it and delete what it stored in etcd (its key prefix)."""
        if self.component is not None:
            self.component.stop()
            delete_etcd_prefix(self.cluster, f"/{self.name}/")


def delete_etcd_prefix(cluster: lc.LocalCluster, prefix: str) -> int:
    """Delete every etcd key under `prefix` (what a BareApiserver stored); the number of keys deleted."""
    key = prefix.encode()
    end = key[:-1] + bytes([key[-1] + 1])
    out = _etcd_post(cluster, "/v3/kv/deleterange", {"key": base64.b64encode(key).decode(),
                                                      "range_end": base64.b64encode(end).decode()})
    return int(out.get("deleted", 0))


@dataclass
class Faults:
    """The hooks above bound to one running cluster (what the e2e fixture `control_plane_faults` hands out)."""

    cluster: lc.LocalCluster

    def down(self, name: str, timeout: float = 120.0) -> contextlib.AbstractContextManager[None]:
        return component_down(self.cluster, name, timeout)

    def restart(self, name: str, down_for: float = 0.0, timeout: float = 120.0) -> float:
        return restart(self.cluster, name, down_for, timeout)

    def stop(self, name: str) -> None:
        stop(self.cluster, name)

    def start(self, name: str, timeout: float = 120.0) -> float:
        return start(self.cluster, name, timeout)

    def compact_etcd(self) -> int:
        return compact_etcd(self.cluster)

    def bare_apiserver(self, name: str) -> BareApiserver:
        return BareApiserver(self.cluster, name)

    def kueue_reconciles(self, timeout: float = 120.0) -> None:
        """Wait until Kueue activates a new ClusterQueue again (after the apiserver or etcd came back)."""
        cluster = self.cluster
        cluster._wait("Kueue /readyz", cluster._kueue_ready, timeout, list(cluster.components.values()))
        cluster._wait_kueue_reconciles(cluster.api, list(cluster.components.values()), timeout)
