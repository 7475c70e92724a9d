"""An apiserver outage, as the operator sees it: one WARNING saying what is retried and since when, one INFO when
the apiserver answers again, no traceback and no ERROR; then the verdicts catch up.

The outage is a TCP proxy between the operator and the apiserver (tcpproxy.py) that resets every connection and
refuses new ones for OUTAGE seconds: the same as a stopped apiserver from the operator's side, without touching
the shared control plane. The operator runs as the chart runs it (JSON logs, leader election).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from tests.builders import Job

from . import kube
from .conftest import ClusterHandle
from .tcpproxy import TcpProxy
from .test_failover import ELECTION, LEASE_PATH, ready_role, replica_account
from .test_operator import install_crd_and_rbac, reason_of, setup_queue, start_operator, token_kubeconfig

OUTAGE = 25.0  # seconds: several of Kopf's retries (1, 1, 2, 3, 5, 8 s), the Lease's renew deadline, a write retry


def records(log: Path, offset: int) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace")[offset:].splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            out.append({"severity": "RAW", "message": line})
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def test_an_apiserver_outage_logs_one_warning_and_one_info_and_the_verdicts_catch_up(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str, tmp_path: Path) -> None:
    if cluster.local is None:
        pytest.skip("needs the local control plane (token minting)")
    api = cluster.api_client
    install_crd_and_rbac(cluster)
    replica_account(cluster, "kd-outage")
    kubeconfig = token_kubeconfig(cluster, tmp_path, "kd-outage")
    config = yaml.safe_load(kubeconfig.read_text())
    server = urlparse(config["clusters"][0]["cluster"]["server"])
    proxy = TcpProxy(server.hostname or "127.0.0.1", server.port or 443)
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    kubeconfig.write_text(yaml.safe_dump(config))
    op = start_operator(kubeconfig, tmp_path, "-n", namespace, "--log-format=json", *ELECTION)
    try:
        kube.wait_for(lambda: ready_role(op) == "leader", timeout=30, message=lambda: f"a leader:\n{op.tail()}")
        cq = setup_queue(resources, namespace, 2)
        resources.create(Job("big", namespace).queue("main").parallelism(3).request("cpu", "100m").manifest())
        wl_name = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]
        kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "ExceedsMaxQuota", timeout=60,
                      message=lambda: f"ExceedsMaxQuota:\n{op.tail()}")
        offset = len(op.log.read_text(errors="replace"))

        proxy.cut()
        t_cut = time.time()
        time.sleep(OUTAGE / 2)
        kube.patch(api, "ClusterQueue", cq, {"spec": {"stopPolicy": "Hold"}})  # a change the operator cannot see yet
        time.sleep(OUTAGE / 2)
        assert op.proc.poll() is None, op.tail()
        proxy.restore()
        t_back = time.time()
        kube.wait_for(lambda: reason_of(api, namespace, wl_name) != "ExceedsMaxQuota", timeout=60, interval=0.2,
                      message=lambda: f"the verdict to catch up after the outage:\n{op.tail()}")
        caught_up = time.time() - t_back
        time.sleep(3)
        after = records(op.log, offset)
        assert ready_role(op) == "leader"  # it stepped down during the outage (no renewal) and leads again
    finally:
        op.stop()
        proxy.stop()
        try:
            kube.request_json(api, "DELETE", LEASE_PATH)
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise
    print(f"\noutage {t_back - t_cut:.0f}s; verdict caught up {caught_up:.1f}s after; log records during and after:")
    for rec in after:
        print(f"  {rec.get('severity')}: {str(rec.get('message'))[:200]}")
    loud = [r for r in after if str(r.get("severity", "")).upper() in ("ERROR", "CRITICAL", "RAW")
            or "Traceback" in json.dumps(r)]
    assert loud == [], loud
    warnings = [r for r in after if str(r.get("severity", "")).upper() in ("WARNING", "WARN")]
    assert len(warnings) == 1, warnings
    assert "does not answer since" in warnings[0]["message"] and "Retrying" in warnings[0]["message"]
    infos = [r for r in after if "answers again after" in str(r.get("message"))]
    assert len(infos) == 1 and str(infos[0].get("severity")).upper() == "INFO", infos
    assert [str(r.get("severity")).upper() for r in after if "No longer leading" in str(r.get("message"))] == ["INFO"]
    assert caught_up < 30.0
