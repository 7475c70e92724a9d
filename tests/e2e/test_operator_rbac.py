"""The operator without RBAC on Pods, Events and Jobs: it runs and says what it cannot see.

A module of its own: the full-RBAC operator of test_operator.py (module-scoped) must not be running at
the same time, or two operators would write the same diagnoses.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.builders import Job

from . import kube
from .conftest import ClusterHandle
from .test_operator import (
    ROOT,
    SA_NAMESPACE,
    adiag,
    install_crd_and_rbac,
    setup_queue,
    start_operator,
    token_kubeconfig,
)


def test_without_rbac_on_pods_events_and_jobs_it_runs_and_says_what_it_cannot_see(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    if cluster.local is None:
        pytest.skip("needs the local control plane")
    api = cluster.api_client
    install_crd_and_rbac(cluster)
    name = "kueue-doctor-restricted"
    role = next(d for d in yaml.safe_load_all((ROOT / "manifests" / "base" / "rbac.yaml").read_text())
                if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "kueue-doctor")
    role["metadata"]["name"] = name
    role["rules"] = [r for r in role["rules"] if r["apiGroups"] not in ([""], ["batch"])]
    kube.request_json(api, "POST", f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts",
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    kube.request_json(api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    kube.request_json(api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": SA_NAMESPACE}]})
    workdir = tmp_path_factory.mktemp("restricted")
    op = start_operator(token_kubeconfig(cluster, workdir, name), workdir, "-n", namespace)
    try:
        setup_queue(resources, namespace, 2)
        resources.create(Job("held", namespace).queue("main").request("cpu", "100m")
                         .pod_annotation(kube.FAKE_HOLD_ANNOTATION, "true").manifest())
        wl_name = kube.wait_for_workload(api, namespace, "held")["metadata"]["name"]
        def diagnosed() -> dict[str, Any] | None:
            d = adiag(api, namespace, wl_name)  # one read: the reason and cause checked are of the same object
            return d if d and d["status"]["reason"] == "PodsNotReady" else None

        d = kube.wait_for(diagnosed, timeout=60,
                          message=lambda: f"PodsNotReady, got {adiag(api, namespace, wl_name)}\n{op.tail()}")
        assert d["status"]["cause"] == "PodsNotVisible"
        metrics = op.metrics()
        assert 'kueue_doctor_resource_access{kind="Pod"} 0.0' in metrics
        assert 'kueue_doctor_resource_access{kind="Workload"} 1.0' in metrics
        assert op.proc.poll() is None
    finally:
        op.stop()
        for path in (f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
                     f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
                     f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{name}"):
            kube.request_json(api, "DELETE", path)
