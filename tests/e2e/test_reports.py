"""`kueue-doctor run --reports`: one OpenReports Report per namespace, against the real Report CRD
(config/crd/openreports.io_reports.yaml of the Go module github.com/openreports/reports-api at
OPENREPORTS_VERSION in hack/control-plane/versions.env), written by the least-privilege ServiceAccount
of manifests/base plus manifests/optional/reports-rbac.yaml; the audit log counts its writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import Job

from . import kube
from .conftest import ClusterHandle
from .kube import lc
from .test_operator import (
    ROOT,
    SA_USER,
    Operator,
    adiag,
    apply_manifest,
    install_crd_and_rbac,
    reason_of,
    setup_queue,
    start_operator,
    token_kubeconfig,
)

REPORTS = "/apis/openreports.io/v1alpha1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture(scope="module")
def report_crd(cluster: ClusterHandle) -> Iterator[None]:
    """The real OpenReports Report CRD (left installed when the cluster already had it)."""
    api = cluster.api_client
    try:
        (path,) = lc.module_files("OPENREPORTS_VERSION", "github.com/openreports/reports-api",
                                  "config/crd/openreports.io_reports.yaml")
    except lc.ControlPlaneError as exc:
        pytest.fail(f"the OpenReports CRD: {exc}", pytrace=False)
    created = kube.install_missing_crds(api, [yaml.safe_load(path.read_text())])
    kube.wait_for(lambda: kube.request_json(api, "GET", f"{REPORTS}/reports"), timeout=30,
                  message="openreports.io reports to be served")
    try:
        yield
    finally:
        for name in created:
            kube.request_json(api, "DELETE", f"{CRDS}/{name}")


def report(api: Any, namespace: str) -> dict[str, Any] | None:
    return kube.get_path(api, f"{REPORTS}/namespaces/{namespace}/reports/kueue-doctor")


def workloads_in(rep: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {r["properties"]["workload"]: r for r in (rep or {}).get("results") or []}


def report_writes(cluster: ClusterHandle, namespace: str) -> list[dict[str, Any]]:
    return [e for e in cluster.writes_by_user(SA_USER)
            if e["objectRef"].get("resource") == "reports" and e["objectRef"].get("namespace") == namespace]


def test_report_mirrors_the_waiting_workloads_and_is_written_only_on_change(
        cluster: ClusterHandle, report_crd: None, resources: kube.Resources, namespace: str,
        tmp_path: Path) -> None:
    if cluster.local is None:
        pytest.skip("needs the local control plane (token minting, audit log)")
    api = cluster.api_client
    install_crd_and_rbac(cluster)
    apply_manifest(api, ROOT / "manifests" / "optional" / "reports-rbac.yaml")
    op: Operator = start_operator(token_kubeconfig(cluster, tmp_path), tmp_path, "--reports", "--namespace", namespace)
    try:
        cq = setup_queue(resources, namespace, 2)
        for name in ("train-a", "train-b"):
            resources.create(Job(name, namespace).queue("main").parallelism(3).request("cpu", "100m").manifest())
        wls = {name: kube.wait_for_workload(api, namespace, name)["metadata"]["name"] for name in ("train-a", "train-b")}
        def mirrored(count: int) -> dict[str, Any] | None:
            """The Report once it has `count` results, each the current reason of its diagnosis."""
            r = report(api, namespace)
            got = workloads_in(r)
            def same(w: str, x: dict[str, Any]) -> bool:
                st = (adiag(api, namespace, w) or {}).get("status", {})
                return bool(st.get("reason") == x["policy"] and st.get("actionBy") == x["properties"]["actionBy"])
            return r if len(got) == count and all(same(w, x) for w, x in got.items()) else None

        # the Workload's watch event may come before its queues' (separate streams): wait for the diagnosis that
        # names its ClusterQueue (until then who must act cannot be told from the queue's quota)
        kube.wait_for(lambda: (d := adiag(api, namespace, wls["train-a"])) and d["status"].get("reason") ==
                      "ExceedsMaxQuota" and d["status"].get("clusterQueue") == cq, timeout=60,
                      message=lambda: f"train-a ExceedsMaxQuota naming {cq}:\n{op.tail()}")
        rep = kube.wait_for(lambda: mirrored(2),
                            timeout=60, message=lambda: f"a Report with 2 results:\n{report(api, namespace)}\n{op.tail()}")
        results = workloads_in(rep)
        assert set(results) == set(wls.values())
        big = results[wls["train-a"]]
        assert big["policy"] == "ExceedsMaxQuota" and big["result"] == "fail"
        assert big["severity"] == "high", "QueueAdmin must act, and the Workload never fits: high"
        assert cq in big["message"] and "300m" in big["message"], big["message"]
        for r in results.values():
            assert r["source"] == "kueue-doctor" and r["rule"] == r["properties"]["cause"]
            assert r["result"] == ("warn" if r["properties"]["actionBy"] == "Nobody" else "fail")
            (res,) = r["resources"]
            assert res["kind"] == "AdmissionDiagnosis" and res["name"] == r["properties"]["workload"]
            assert r["properties"]["owner"] in ("Job/train-a", "Job/train-b")
        assert rep["summary"]["fail"] + rep["summary"]["warn"] == 2 and rep["source"] == "kueue-doctor"
        assert rep["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kueue-doctor"
        (owner,) = rep["metadata"]["ownerReferences"]
        assert owner["kind"] == "CustomResourceDefinition" and owner["name"] == "admissiondiagnoses.kueue-doctor.dev"

        # nothing changes: nothing is written (the operator refreshes every 2 s and resyncs every 15 s). First let
        # Kueue settle: its usage numbers, which the results quote, may still move for a few seconds
        settled = kube.wait_quiet(lambda: len(report_writes(cluster, namespace)), timeout=30,
                                  what="the Report's writes")
        time.sleep(6)
        assert len(report_writes(cluster, namespace)) == settled, "the Report was rewritten with nothing changed"

        # the queue admin raises the quota to 3 Pods: one Job is admitted, the other waits for quota
        kube.patch(api, "ClusterQueue", cq, {"spec": {"resourceGroups": [{"coveredResources": ["cpu", "pods"],
                   "flavors": [{"name": f"rf-{cq.removeprefix('cq-')}", "resources": [
                       {"name": "cpu", "nominalQuota": "300m"}, {"name": "pods", "nominalQuota": "3"}]}]}]}})
        kube.wait_for(lambda: "Running" in {reason_of(api, namespace, w) for w in wls.values()}, timeout=60,
                      message=lambda: f"one Job running:\n{op.tail()}")
        rep = kube.wait_for(lambda: mirrored(1),
                            timeout=60, message=lambda: f"a Report with 1 result:\n{report(api, namespace)}\n{op.tail()}")
        (waiting,) = workloads_in(rep).values()
        assert waiting["policy"] != "Running" and rep["summary"]["fail"] + rep["summary"]["warn"] == 1

        # the waiting Job is deleted: nothing left to report, the Report goes
        job = next(j for j, w in wls.items() if w == waiting["properties"]["workload"])
        kube.delete(api, "Job", job, namespace)
        kube.wait_for(lambda: report(api, namespace) is None, timeout=60,
                      message=lambda: f"the Report to be deleted:\n{report(api, namespace)}\n{op.tail()}")
        writes = report_writes(cluster, namespace)
        assert {e["verb"] for e in writes} <= {"patch", "delete"}, "server-side apply and delete only"
        # the Report changes only when a mirrored verdict does, and each such change is a diagnosis write too
        # (its number-only changes are not mirrored): never more Report writes than diagnosis applies, + the delete
        applies = [e for e in cluster.writes_by_user(SA_USER) if e["objectRef"].get("resource") == "admissiondiagnoses"
                   and e["objectRef"].get("namespace") == namespace and e["verb"] == "patch"]
        assert len(writes) <= len(applies) + 1, f"{len(writes)} Report writes for {len(applies)} diagnosis writes"
        assert not [e for e in cluster.writes_by_user(SA_USER)
                    if e["objectRef"].get("namespace") == namespace
                    and e["objectRef"].get("resource") not in ("reports", "admissiondiagnoses")]
    finally:
        op.stop()
