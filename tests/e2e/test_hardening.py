"""The Deployment's Pod under the `restricted` Pod Security Standard, judged by the real apiserver's PodSecurity
admission; and the operator itself on a read-only root filesystem.

PodSecurity: the Pod templates of the chart (1 and 2 replicas) and of manifests/base are created with
dryRun=All in a namespace labelled `pod-security.kubernetes.io/enforce: restricted` (the local kcm runs no
Deployment controller, and admission is what decides; a dry run passes through it all). A copy with its
securityContext removed must be refused, so the check can fail.

Read-only root: `kueue-doctor run` in a mount namespace whose `/` is remounted read-only (`unshare -m -r`, as
the container's readOnlyRootFilesystem), without even the /tmp emptyDir the manifests mount: it must start,
lead, write a diagnosis and log no file-system error.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.builders import Job, Namespace
from tests.unit.test_manifests import BASE, kustomize, one

from . import kube
from .conftest import ClusterHandle
from .test_chart import helm, template  # noqa: F401  (the module-scoped helm fixture)
from .test_failover import ELECTION, ready_role, replica_account
from .test_operator import (
    ROOT,
    Operator,
    install_crd_and_rbac,
    reason_of,
    setup_queue,
    token_kubeconfig,
)


def pod_of(deployment: dict[str, Any], namespace: str) -> dict[str, Any]:
    template_ = copy.deepcopy(deployment["spec"]["template"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": kube.unique_name("kd-pss"), "namespace": namespace, "labels": template_["metadata"]["labels"]},
        "spec": template_["spec"]}


def create_dry_run(api: Any, pod: dict[str, Any]) -> tuple[int, str]:
    try:
        kube.request_json(api, "POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod,
                          query={"dryRun": "All", "fieldValidation": "Strict"})
    except Exception as exc:
        return int(getattr(exc, "status", 0) or 0), str(exc)
    return 201, ""


@pytest.fixture
def restricted_namespace(resources: kube.Resources) -> str:
    name = kube.unique_name("t-pss-restricted")
    resources.create(Namespace(name).label("pod-security.kubernetes.io/enforce", "restricted")
                     .label("pod-security.kubernetes.io/enforce-version", "latest").manifest())
    return name


@pytest.mark.parametrize("source", ["chart-2-replicas", "chart-1-replica", "manifests-base"])
def test_the_operator_pod_passes_the_restricted_pod_security_standard(
        cluster: ClusterHandle, restricted_namespace: str, helm: str, tmp_path: Path, source: str) -> None:  # noqa: F811
    if source == "manifests-base":
        dep = one(kustomize(BASE), "Deployment")
    else:
        values = {} if source == "chart-2-replicas" else {"replicaCount": 1, "leaderElection": {"enabled": False}}
        dep = one(template(helm, tmp_path, values=values), "Deployment")
    pod = pod_of(dep, restricted_namespace)
    code, error = create_dry_run(cluster.api_client, pod)
    assert code == 201, f"the restricted namespace refused the operator's Pod: {error}"

    careless = copy.deepcopy(pod)  # the same Pod without its hardening: refused, so the check can fail
    careless["spec"].pop("securityContext", None)
    careless["spec"]["containers"][0].pop("securityContext", None)
    code, error = create_dry_run(cluster.api_client, careless)
    assert code == 403 and "violates PodSecurity" in error, (code, error)


def test_the_operator_runs_on_a_read_only_root_filesystem(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str, tmp_path: Path) -> None:
    if cluster.local is None:
        pytest.skip("needs the local control plane (token minting)")
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "-r", "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no unprivileged mount namespaces here (unshare -m -r)")
    api = cluster.api_client
    install_crd_and_rbac(cluster)
    replica_account(cluster, "kd-readonly")
    kubeconfig = token_kubeconfig(cluster, tmp_path, "kd-readonly")
    metrics, health = kube.lc.free_ports(2)
    log = tmp_path / "readonly.log"
    argv = [sys.executable, "-m", "kueue_doctor", "run", "--kubeconfig", str(kubeconfig), "--metrics-port",
            str(metrics), "--health-port", str(health), "-n", namespace, *ELECTION]
    script = ('mount --bind / / && mount -o remount,bind,ro / && if touch /tmp/.rw 2>/dev/null; then '
              'echo "root is still writable" >&2; exit 97; fi; exec "$@"')
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": str(ROOT / "operator")}
    env.pop("KUBECONFIG", None)
    with log.open("wb") as fh:
        proc = subprocess.Popen(["unshare", "-m", "-r", "--propagation", "private", "sh", "-c", script, "sh", *argv],
                                stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    op = Operator(proc, metrics, health, log)
    try:
        kube.wait_serving(proc, f"http://127.0.0.1:{health}/healthz", "the read-only operator", op.tail, op.stop)
        kube.wait_for(lambda: ready_role(op) == "leader", timeout=30, message=lambda: f"it to lead:\n{op.tail()}")
        setup_queue(resources, namespace, 1)
        resources.create(Job("big", namespace).queue("main").parallelism(2).request("cpu", "100m").manifest())
        wl_name = kube.wait_for_workload(api, namespace, "big")["metadata"]["name"]
        kube.wait_for(lambda: reason_of(api, namespace, wl_name) == "ExceedsMaxQuota", timeout=60,
                      message=lambda: f"a diagnosis from the read-only operator:\n{op.tail()}")
        assert "Metrics on" in log.read_text()
        op.metrics()
    finally:
        op.stop()
        lease = "/apis/coordination.k8s.io/v1/namespaces/kueue-doctor/leases/kueue-doctor"
        if kube.get(api, "Namespace", "kueue-doctor"):
            try:
                kube.request_json(api, "DELETE", lease)
            except Exception as exc:
                if getattr(exc, "status", None) != 404:
                    raise
    text = log.read_text(errors="replace")
    assert "Read-only file system" not in text and "Traceback" not in text, text[-3000:]
