"""A real Prometheus scrapes the real operator: the dashboard's queries and the alert rules work on its data.

The operator runs as in test_operator.py (least-privilege ServiceAccount token); Prometheus (Debian's
package, `bash hack/prometheus.sh`) runs on 127.0.0.1 with a temporary TSDB, scrapes it every second and
evaluates the alert rules every second. The rules are loaded with their thresholds set to 0 (what the chart's
`prometheusRule.thresholds` does), so an alert goes pending within the test; the original expressions are
queried as well, and must stay silent for Workloads that are seconds old.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import Job

from ..prom import DASHBOARD, RULES, alerts, need_binary
from . import kube
from .conftest import ClusterHandle
from .test_operator import (
    Operator,
    adiag,
    install_crd_and_rbac,
    setup_queue,
    start_operator,
    token_kubeconfig,
)

JOB = "kueue-doctor-metrics"  # the job name the chart's ServiceMonitor gives; KueueDoctorDown matches it


class Prometheus:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as rsp:
                body = json.loads(rsp.read().decode())
        except urllib.error.HTTPError as exc:  # 400/422: a bad query; say which and why
            raise AssertionError(f"{url}: {exc.code} {exc.read().decode(errors='replace')}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def zero_thresholds(rules: dict[str, Any]) -> dict[str, Any]:
    """The rules with every trailing `> N` threshold set to `> 0`."""
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["expr"] = re.sub(r">\s*[0-9.]+\s*$", "> 0", rule["expr"])
    return rules


def start_prometheus(binary: str, workdir: Path, metrics_port: int) -> Prometheus:
    rules = workdir / "alerts.rules.yaml"
    rules.write_text(yaml.safe_dump(zero_thresholds(yaml.safe_load(RULES.read_text())), sort_keys=False))
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
    }))
    (port,) = kube.lc.free_ports(1)
    log = workdir / "prometheus.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    prom = Prometheus(proc, port, log)
    kube.wait_serving(proc, f"http://127.0.0.1:{port}/-/ready", "prometheus", prom.tail, prom.stop, timeout=30)
    return prom


@pytest.fixture(scope="module")
def stack(cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Operator, Prometheus]]:
    binary = need_binary("prometheus")
    if cluster.local is None:
        pytest.skip("the operator tests need the local control plane (token minting)")
    install_crd_and_rbac(cluster)
    workdir = tmp_path_factory.mktemp("prometheus")
    op = start_operator(token_kubeconfig(cluster, workdir), workdir)
    try:
        prom = start_prometheus(binary, workdir, op.metrics_port)
        try:
            yield op, prom
        finally:
            prom.stop()
    finally:
        op.stop()


def dashboard_queries(cq: str, namespace: str) -> dict[str, str]:
    """Panel title -> first query, with the dashboard's variables set to this test's queue and namespace."""
    out: dict[str, str] = {}
    panels = json.loads(DASHBOARD.read_text())["panels"]
    for p in panels:
        for t in p.get("targets") or []:
            # the names are [a-z0-9-]: literal as regular expressions, no escaping (PromQL rejects "\\-")
            expr = (t["expr"].replace("$__rate_interval", "1m").replace("$cluster_queue", cq)
                    .replace("$workload_namespace", namespace))
            out.setdefault(p["title"], expr)
    return out


def by_labels(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1]) for r in result}


def test_prometheus_sees_the_verdicts_the_dashboard_shows_them_and_an_alert_goes_pending(
        cluster: ClusterHandle, stack: tuple[Operator, Prometheus], resources: kube.Resources,
        namespace: str) -> None:
    op, prom = stack
    api = cluster.api_client
    cq = setup_queue(resources, namespace, 1)
    resources.create(Job("big", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    resources.create(Job("small", namespace).queue("main").request("cpu", "100m").manifest())
    big = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]
    small = kube.wait_for_workload(api, namespace, "small")["metadata"]["name"]

    def reason(name: str) -> str | None:
        d = adiag(api, namespace, name)
        return d["status"]["reason"] if d else None

    kube.wait_for(lambda: reason(big) == "ExceedsMaxQuota" and reason(small) == "Running", timeout=60,
                  message=lambda: f"diagnoses, got {reason(big)}, {reason(small)}\n{op.tail()}")

    # 1. the complete per-queue gauge, as Prometheus stored it
    expected = {("Admission", "ExceedsMaxQuota"): 1.0, ("Running", "Running"): 1.0}
    kube.wait_for(lambda: by_labels(prom.query(f'kueue_doctor_workloads{{cluster_queue="{cq}"}}'),
                                    "stage", "reason") == expected,
                  timeout=20, message=lambda: f"Prometheus to scrape the verdicts:\n{prom.tail()}")

    # 2. every dashboard query runs; the main ones show this scenario
    queries = dashboard_queries(cq, namespace)
    results = {title: prom.query(expr) for title, expr in queries.items()}
    assert by_labels(results["Waiting Workloads by stage and reason"], "stage", "reason") == {
        ("Admission", "ExceedsMaxQuota"): 1.0}
    assert by_labels(results["Admission vs scheduling per ClusterQueue"], "cluster_queue", "stage") == {
        (cq, "Admission"): 1.0}
    assert by_labels(results["Never admittable"]) == {(): 1.0}
    assert by_labels(results["Waiting for admission"]) == {(): 1.0}
    assert by_labels(results["Running"]) == {(): 1.0}
    oldest = results["Oldest waiting Workloads"]
    assert [(r["metric"]["workload"], r["metric"]["reason"], r["metric"]["workload_namespace"]) for r in oldest] == [
        (big, "ExceedsMaxQuota", namespace)]
    assert 0 <= float(oldest[0]["value"][1]) < 300
    assert [r["metric"]["workload"] for r in results["Misconfigured Workloads"]] == [big]
    never = results["Never admittable, per LocalQueue (complete)"]
    assert [(r["metric"]["local_queue"], r["metric"]["action_by"]) for r in never] == [("main", "QueueAdmin")]
    assert by_labels(results["Kueue API"]) == {(): 1.0}
    assert by_labels(results["Scraped"]) == {(): 1.0}
    assert 0 <= by_labels(results["Last pass"])[()] < 60
    assert by_labels(results["Resource access"], "kind")[("Pod",)] == 1.0

    # 3. the alert expressions: without the threshold they find this queue; with it they stay silent
    exprs = {r["alert"]: r["expr"] for r in alerts()}
    ages = prom.query(re.sub(r">\s*[0-9.]+\s*$", "", exprs["KueueDoctorExceedsMaxQuota"]))
    mine = [r for r in ages if r["metric"].get("cluster_queue") == cq]
    assert [(r["metric"]["workload_namespace"], r["metric"]["local_queue"], r["metric"]["reason"]) for r in mine] == [
        (namespace, "main", "ExceedsMaxQuota")]
    for name in ("KueueDoctorExceedsMaxQuota", "KueueDoctorClusterQueueMisconfigured", "KueueDoctorDown",
                 "KueueDoctorPassesStalled", "KueueDoctorKueueNotInstalled", "KueueDoctorWriteErrors"):
        found = [r for r in prom.query(exprs[name]) if r["metric"].get("cluster_queue") in (None, cq)]
        assert found == [], (name, found)

    # 4. the rules Prometheus evaluates (thresholds 0): the ExceedsMaxQuota alert of this queue goes pending
    def pending() -> dict[str, Any] | None:
        for a in prom.api("alerts")["alerts"]:
            if a["labels"]["alertname"] == "KueueDoctorExceedsMaxQuota" and a["labels"].get("cluster_queue") == cq:
                return dict(a)
        return None

    alert = kube.wait_for(pending, timeout=20, message=lambda: f"the alert, got {prom.api('alerts')}")
    assert alert["state"] == "pending"  # `for: 1m` has not elapsed
    assert alert["labels"]["workload_namespace"] == namespace and alert["labels"]["severity"] == "warning"
    assert f"{namespace}/main" in alert["annotations"]["description"]
    assert alert["annotations"]["runbook_url"].endswith("#kueuedoctorexceedsmaxquota")
    firing = {a["labels"]["alertname"] for a in prom.api("alerts")["alerts"] if a["state"] == "firing"}
    assert "KueueDoctorDown" not in firing


def test_a_pending_limit_declared_on_the_local_queue_fires_its_alert(
        cluster: ClusterHandle, stack: tuple[Operator, Prometheus], resources: kube.Resources,
        namespace: str) -> None:
    """The team declares 5s on its LocalQueue; a Job that can never be admitted passes it. The operator wakes by
    itself (no change happens), writes status.pendingLimit, exports it, and the shipped alert fires (its real
    `for: 1m`), in a real Prometheus."""
    op, prom = stack
    api = cluster.api_client
    cq = setup_queue(resources, namespace, 1)
    kube.patch(api, "LocalQueue", "main", {"metadata": {"annotations": {"kueue-doctor.dev/max-pending": "5s"}}},
               namespace)
    resources.create(Job("big", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
    name = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]

    def limit() -> dict[str, Any]:
        d = adiag(api, namespace, name)
        return dict((d or {}).get("status", {}).get("pendingLimit") or {})
    got = kube.wait_for(lambda: (lim := limit()).get("exceeded") and lim, timeout=60,
                        message=lambda: f"the pending limit to pass, got {limit()}\n{op.tail()}")
    assert (got["limit"], got["seconds"], got["sourceKind"], got["sourceName"]) == ("5s", 5, "LocalQueue", "main")
    assert adiag(api, namespace, name)["status"]["reason"] == "ExceedsMaxQuota"  # type: ignore[index]
    kube.wait_for(lambda: by_labels(prom.query(
        f'kueue_doctor_pending_limit_exceeded_workloads{{cluster_queue="{cq}"}}'), "local_queue") == {("main",): 1.0},
        timeout=20, message=lambda: f"Prometheus to scrape the limit:\n{prom.tail()}")

    def alert() -> dict[str, Any] | None:
        for a in prom.api("alerts")["alerts"]:
            if a["labels"]["alertname"] == "KueueDoctorPendingLimitExceeded" and a["labels"].get("cluster_queue") == cq:
                return dict(a)
        return None
    fired = kube.wait_for(lambda: (a := alert()) is not None and a["state"] == "firing" and a, timeout=100,
                          message=lambda: f"the alert to fire, got {alert()}")
    assert fired["labels"]["workload_namespace"] == namespace and fired["labels"]["severity"] == "warning"
    assert fired["annotations"]["runbook_url"].endswith("#kueuedoctorpendinglimitexceeded")
