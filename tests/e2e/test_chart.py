"""The Helm chart (charts/kueue-doctor): `helm lint`, `helm template` with default and non-default
values, and every rendered object accepted by the real kube-apiserver (server-side apply with
dryRun=All and fieldValidation=Strict).

helm comes from `bash hack/helm/build.sh` (never built from here): missing, the tests skip locally
and fail when a cluster is required (KUEUE_DOCTOR_REQUIRE_CLUSTER=1, or CI=true), as in conftest.py.

The local control plane has no Prometheus Operator. For the ServiceMonitor and PrometheusRule
dry runs the test installs the Prometheus Operator's own CRDs (servicemonitors and prometheusrules
of monitoring.coreos.com, from example/prometheus-operator-crd/ of the Go module
github.com/prometheus-operator/prometheus-operator at PROMETHEUS_OPERATOR_VERSION in
hack/control-plane/versions.env, taken from the module cache or `go mod download`), and removes
them afterwards. An existing cluster that already serves them is used as it is. The Kustomize
overlays' ServiceMonitor and PrometheusRule are dry-run against the same CRDs.

files/alerts.rules.yaml and files/dashboard.json belong to the alerts work: the override mechanics
are tested on a copy of the chart with small stand-in files; the real files, when present, are
rendered unchanged and dry-run too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import Namespace
from tests.unit.test_manifests import (
    OVERLAYS,
    assert_hardened_deployment,
    assert_lease_role,
    assert_least_privilege,
    assert_operator_can_read_what_it_watches,
    kustomize,
    one,
)

from . import kube
from .conftest import ClusterHandle, built_tool
from .kube import lc

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kueue-doctor"
CRD = ROOT / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml"
BASE = ROOT / "manifests" / "base"
MONITORING = "monitoring.coreos.com"

STAND_IN_RULES = """\
groups:
- name: kueue-doctor.rules
  rules:
  - alert: KueueDoctorWorkloadStuck
    expr: time() - kueue_doctor_oldest_waiting_since_timestamp_seconds{reason=~"QueueMisconfigured|ExceedsMaxQuota"} > 900
    for: 5m
    labels:
      severity: warning
    annotations:
      summary: 'Stuck in {{ $labels.workload_namespace }}/{{ $labels.local_queue }} for {{ $value | humanizeDuration }}'
  - alert: KueueDoctorLoopStuck
    expr: |
      time() - kueue_doctor_last_successful_pass_timestamp_seconds > 900
    labels:
      severity: critical
  - record: kueue_doctor:workloads:sum
    expr: sum by (cluster_queue, stage) (kueue_doctor_workloads)
- name: kueue-doctor.operator
  rules:
  - alert: KueueDoctorDown
    expr: absent(up{job="kueue-doctor-metrics"} == 1)
    for: 10m
    labels:
      severity: critical
"""
STAND_IN_DASHBOARD = {"title": "kueue-doctor", "uid": "kueue-doctor",
                      "panels": [{"type": "timeseries", "targets": [
                          {"expr": "sum by (cluster_queue) (kueue_doctor_workloads)",
                           "legendFormat": "{{cluster_queue}}"}]}]}

NON_DEFAULT_VALUES: dict[str, Any] = {
    "fullnameOverride": "doctor",
    "commonLabels": {"team": "platform"},
    "image": {"repository": "registry.example.com/kd", "tag": "1.2.3", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "watchNamespaces": ["team-a", "team-b"],
    "kueueNamespace": "default",  # not kueue-system, and a namespace the dry run finds
    "logFormat": "text",
    "maxWorkloadSeries": 500,
    "refreshInterval": 30,
    "resyncInterval": 600,
    "verbose": True,
    "replicaCount": 3,
    "leaderElection": {"leaseName": "doctor-lease", "leaseDuration": 20, "renewDeadline": 15, "retryPeriod": 4},
    "podDisruptionBudget": {"maxUnavailable": 2},
    "networkPolicy": {"enabled": True, "healthFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]},
    "metrics": {"port": 9090},
    "health": {"port": 9091},
    "service": {"port": 9090, "annotations": {"example.com/scrape": "true"}},
    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    "podAnnotations": {"example.com/owner": "platform"},
    "podLabels": {"tier": "ops"},
    "priorityClassName": "system-cluster-critical",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}},
    "serviceAccount": {"name": "doctor-sa", "annotations": {"example.com/role": "ro"}},
    "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}, "interval": "15s", "scrapeTimeout": "5s",
                       "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"],
                                              "regex": "kueue_doctor_watch_events_total"}]},
    "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
    "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "Kueue"}},
}

#: Overrides for the stand-in rules file (keyed by its alert names).
RULE_OVERRIDES: dict[str, Any] = {"prometheusRule": {
    "enabled": True,
    "additionalRuleLabels": {"team": "platform"},
    "severities": {"KueueDoctorWorkloadStuck": "critical"},
    "thresholds": {"KueueDoctorWorkloadStuck": 3600, "KueueDoctorLoopStuck": 1800},
    "for": {"KueueDoctorDown": "30m"},
    "rules": {"KueueDoctorDown": {"annotations": {"runbook_url": "https://runbooks.example.com/kd-down"}},
              "KueueDoctorLoopStuck": {"labels": {"page": "true"}}},
}}

#: kind -> (API path prefix, plural, namespaced): every kind the chart may render.
KIND_PATHS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Service": ("/api/v1", "services", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "StatefulSet": ("/apis/apps/v1", "statefulsets", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "ServiceMonitor": (f"/apis/{MONITORING}/v1", "servicemonitors", True),
    "PrometheusRule": (f"/apis/{MONITORING}/v1", "prometheusrules", True),
}


# ---- helm -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> str:
    return built_tool(ROOT / "hack" / "helm" / "build.sh", "helm", "a few minutes cold")


@pytest.fixture(scope="module")
def stand_in_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the chart with stand-in files/alerts.rules.yaml and files/dashboard.json."""
    dest = tmp_path_factory.mktemp("chart") / "kueue-doctor"
    shutil.copytree(CHART, dest)
    (dest / "files").mkdir(exist_ok=True)
    (dest / "files" / "alerts.rules.yaml").write_text(STAND_IN_RULES)
    (dest / "files" / "dashboard.json").write_text(json.dumps(STAND_IN_DASHBOARD, indent=2))
    return dest


@pytest.fixture(scope="module")
def bare_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the chart without files/ (before the alerts work lands, or a trimmed fork)."""
    dest = tmp_path_factory.mktemp("bare") / "kueue-doctor"
    shutil.copytree(CHART, dest, ignore=shutil.ignore_patterns("files"))
    return dest


def run_helm(helm: str, *args: str, values: dict[str, Any] | None = None, tmp: Path | None = None,
             check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [helm, *args]
    if values is not None:
        assert tmp is not None
        vfile = tmp / f"values-{len(list(tmp.glob('values-*')))}.yaml"
        vfile.write_text(yaml.safe_dump(values))
        argv += ["-f", str(vfile)]
    env = {**os.environ, "HELM_CACHE_HOME": str(tmp or "/tmp"), "HELM_CONFIG_HOME": str(tmp or "/tmp"),
           "HELM_DATA_HOME": str(tmp or "/tmp")}
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=120)
    if check:
        assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def template(helm: str, tmp: Path, chart: Path = CHART, values: dict[str, Any] | None = None,
             release: str = "kueue-doctor", namespace: str = "kueue-doctor") -> list[dict[str, Any]]:
    proc = run_helm(helm, "template", release, str(chart), "--namespace", namespace, values=values, tmp=tmp)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def container_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


# ---- lint and template ----------------------------------------------------------------------------------


def test_helm_lint_strict_default_and_non_default(helm: str, stand_in_chart: Path, tmp_path: Path) -> None:
    run_helm(helm, "lint", "--strict", str(CHART), tmp=tmp_path)
    run_helm(helm, "lint", "--strict", str(CHART), values=NON_DEFAULT_VALUES, tmp=tmp_path)
    run_helm(helm, "lint", "--strict", str(stand_in_chart), values={**NON_DEFAULT_VALUES, **RULE_OVERRIDES},
             tmp=tmp_path)


def test_default_render_matches_manifests_base(helm: str, tmp_path: Path) -> None:
    objs = template(helm, tmp_path)
    assert kinds(objs) == sorted(["CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRole",
                                  "ClusterRoleBinding", "Deployment", "Service", "Role", "RoleBinding", "Role",
                                  "RoleBinding", "PodDisruptionBudget"])
    base = kustomize(BASE)
    role = one(objs, "ClusterRole", "kueue-doctor")
    assert role["rules"] == one(base, "ClusterRole", "kueue-doctor")["rules"], "chart RBAC == manifests/base RBAC"
    assert_least_privilege(role["rules"], "chart ClusterRole")
    assert_operator_can_read_what_it_watches(role["rules"])
    view = one(objs, "ClusterRole", "kueue-doctor-view")
    assert view["rules"] == one(base, "ClusterRole", "kueue-doctor-view")["rules"]
    for aggregate in ("view", "edit", "admin"):
        assert view["metadata"]["labels"][f"rbac.authorization.k8s.io/aggregate-to-{aggregate}"] == "true"
    # the chart can use a Role in Kueue's namespace; Kustomize a ClusterRole
    kueue_config = one(objs, "Role", "kueue-doctor-kueue-config")
    assert kueue_config["metadata"]["namespace"] == "kueue-system"
    assert kueue_config["rules"] == one(base, "ClusterRole", "kueue-doctor-kueue-config")["rules"]
    assert one(objs, "RoleBinding", "kueue-doctor-kueue-config")["roleRef"]["name"] == kueue_config["metadata"]["name"]
    lease_role = one(objs, "Role", "kueue-doctor-leader-election")
    assert lease_role["rules"] == one(base, "Role", "kueue-doctor-leader-election")["rules"]
    assert_lease_role(lease_role, "kueue-doctor")
    assert lease_role["metadata"]["namespace"] == "kueue-doctor"
    assert one(objs, "PodDisruptionBudget")["spec"] == one(base, "PodDisruptionBudget")["spec"] | {
        "selector": one(objs, "PodDisruptionBudget")["spec"]["selector"]}
    binding = one(objs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "kueue-doctor"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kueue-doctor", "namespace": "kueue-doctor"}]
    dep = one(objs, "Deployment")
    assert_hardened_deployment(dep)
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "kueue-doctor"
    assert one(objs, "ServiceAccount")["automountServiceAccountToken"] is False  # only the operator's Pod mounts it
    c = container_of(objs)
    assert c["image"] == "ghcr.io/kueue-doctor/kueue-doctor:0.1.0"
    assert c["args"] == ["run", "--metrics-port=8080", "--health-port=8081", "--log-format=json",
                         "--max-workload-series=2000", "--refresh-interval=60", "--resync-interval=300",
                         "--recheck-interval=30",
                         "--max-writes-per-second=1000", "--max-refresh-writes-per-second=50",
                         "--kueue-namespace=kueue-system", "--leader-elect",
                         "--leader-elect-resource-name=kueue-doctor", "--leader-elect-resource-namespace=kueue-doctor",
                         "--leader-elect-lease-duration=10", "--leader-elect-renew-deadline=7",
                         "--leader-elect-retry-period=2"]
    base_dep = one(base, "Deployment")
    base_c = base_dep["spec"]["template"]["spec"]["containers"][0]
    assert c["livenessProbe"] == {**base_c["livenessProbe"]}
    assert c["readinessProbe"]["httpGet"] == base_c["readinessProbe"]["httpGet"]
    assert c["securityContext"] == base_c["securityContext"]
    assert (dep["spec"]["replicas"], dep["spec"]["strategy"]) == (base_dep["spec"]["replicas"],
                                                                  base_dep["spec"]["strategy"])
    svc = one(objs, "Service")
    assert svc["metadata"]["name"] == "kueue-doctor-metrics"
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert dep["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"]
    for o in objs:
        if o["kind"] in ("ServiceAccount", "Deployment", "Service"):
            assert o["metadata"]["namespace"] == "kueue-doctor"


def test_one_replica_without_leader_election_and_the_optional_network_policy(helm: str, tmp_path: Path) -> None:
    objs = template(helm, tmp_path, values={"replicaCount": 1, "leaderElection": {"enabled": False}})
    dep = one(objs, "Deployment")
    assert_hardened_deployment(dep)
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    assert not any(a.startswith("--leader-elect") for a in container_of(objs)["args"])
    assert "PodDisruptionBudget" not in kinds(objs), "a budget of one replica would block every drain"
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Role"] == ["kueue-doctor-kueue-config"]
    assert "NetworkPolicy" not in kinds(objs)
    proc = run_helm(helm, "template", "kd", str(CHART), values={"leaderElection": {"enabled": False}}, tmp=tmp_path,
                    check=False)
    assert proc.returncode != 0 and "replicaCount > 1 needs leaderElection.enabled" in proc.stderr

    # a namespace shard: its own Lease, named by the release
    objs = template(helm, tmp_path, release="shard-a", values={
        "leaderElection": {"leaseName": "kueue-doctor-shard-a"}, "watchNamespaces": ["team-a"],
        "networkPolicy": {"enabled": True, "metricsFrom": [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}}}]}})
    assert "--leader-elect-resource-name=kueue-doctor-shard-a" in container_of(objs)["args"]
    assert_lease_role(one(objs, "Role", "shard-a-kueue-doctor-leader-election"), "kueue-doctor-shard-a")
    policy = one(objs, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == one(objs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    metrics_rule, health_rule = policy["spec"]["ingress"]
    assert metrics_rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert metrics_rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert health_rule == {"ports": [{"port": "health", "protocol": "TCP"}]}


def test_shards_run_as_a_statefulset_whose_ordinal_is_the_shard_each_with_its_own_lease(
        helm: str, tmp_path: Path) -> None:
    objs = template(helm, tmp_path, values={"shards": 2})
    assert "Deployment" not in kinds(objs)
    sts = one(objs, "StatefulSet")
    pod, dep_pod = sts["spec"]["template"], one(template(helm, tmp_path), "Deployment")["spec"]["template"]
    assert pod["spec"]["containers"][0].pop("args")[:-2] == dep_pod["spec"]["containers"][0].pop("args")
    assert pod == dep_pod, "the same hardened Pod as the Deployment's, only the shard flags added"
    objs = template(helm, tmp_path, values={"shards": 2})
    sts = one(objs, "StatefulSet")
    assert sts["spec"]["replicas"] == 4  # 2 shards x replicaCount 2: ordinals 2 and 3 stand by for shards 0 and 1
    assert sts["spec"]["podManagementPolicy"] == "Parallel" and sts["spec"]["serviceName"] == "kueue-doctor-metrics"
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert c["args"][-2:] == ["--total-shards=2", "--shard-index-from-hostname"]
    assert "--leader-elect-resource-name=kueue-doctor" in c["args"]  # the operator appends -shard-I-of-N
    create, renew = one(objs, "Role", "kueue-doctor-leader-election")["rules"]
    assert renew["resourceNames"] == ["kueue-doctor-shard-0-of-2", "kueue-doctor-shard-1-of-2"]
    assert renew["verbs"] == ["get", "update"] and create["verbs"] == ["create"]
    svc = one(objs, "Service")
    assert svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    # one shard is today's Deployment, unchanged
    assert one(template(helm, tmp_path, values={"shards": 1}), "Deployment") == one(template(helm, tmp_path),
                                                                                   "Deployment")
    proc = run_helm(helm, "template", "kd", str(CHART), values={"shards": 0}, tmp=tmp_path, check=False)
    assert proc.returncode != 0 and "shards" in proc.stderr
    # planned ranges (kueue-doctor shard-plan) reach every shard alike
    ranged = one(template(helm, tmp_path, values={"shards": 2, "shardBoundaries": "0x7a1f000000000000"}),
                 "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ranged[-3:] == ["--total-shards=2", "--shard-index-from-hostname", "--shard-boundaries=0x7a1f000000000000"]
    proc = run_helm(helm, "template", "kd", str(CHART), values={"shards": 2, "shardBoundaries": "half"},
                    tmp=tmp_path, check=False)
    assert proc.returncode != 0 and "shardBoundaries" in proc.stderr


def test_rendered_crd_is_the_committed_crd_and_is_kept_on_uninstall(helm: str, tmp_path: Path) -> None:
    crd = one(template(helm, tmp_path), "CustomResourceDefinition")
    committed = yaml.safe_load(CRD.read_text())
    assert crd["spec"] == committed["spec"]
    assert crd["metadata"]["name"] == committed["metadata"]["name"]
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert committed["metadata"]["labels"].items() <= crd["metadata"]["labels"].items()
    assert not any(o["kind"] == "CustomResourceDefinition"
                   for o in template(helm, tmp_path, values={"crds": {"install": False}}))


def test_non_default_values_reach_the_objects(helm: str, tmp_path: Path) -> None:
    objs = template(helm, tmp_path, values=NON_DEFAULT_VALUES, release="prod", namespace="ops")
    # the real chart renders the PrometheusRule / dashboard only once files/ exists
    expected = ["ClusterRole", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Deployment",
                "Service", "ServiceAccount", "ServiceMonitor", "Role", "RoleBinding", "Role", "RoleBinding",
                "PodDisruptionBudget", "NetworkPolicy"]
    if (CHART / "files" / "alerts.rules.yaml").exists():
        expected.append("PrometheusRule")
    if (CHART / "files" / "dashboard.json").exists():
        expected.append("ConfigMap")
    assert kinds(objs) == sorted(expected)
    for o in objs:
        assert o["metadata"]["labels"]["team"] == "platform", o["kind"]
        if o["kind"] != "CustomResourceDefinition":
            assert o["metadata"]["name"].startswith("doctor"), o["metadata"]["name"]
    dep = one(objs, "Deployment")
    assert_hardened_deployment(dep)
    pod = dep["spec"]["template"]["spec"]
    c = container_of(objs)
    assert c["image"] == "registry.example.com/kd:1.2.3" and c["imagePullPolicy"] == "Always"
    assert c["args"] == ["run", "--metrics-port=9090", "--health-port=9091", "--log-format=text",
                         "--max-workload-series=500", "--refresh-interval=30", "--resync-interval=600",
                         "--recheck-interval=30",
                         "--max-writes-per-second=1000", "--max-refresh-writes-per-second=50",
                         "--kueue-namespace=default", "--leader-elect",
                         "--leader-elect-resource-name=doctor-lease", "--leader-elect-resource-namespace=ops",
                         "--leader-elect-lease-duration=20", "--leader-elect-renew-deadline=15",
                         "--leader-elect-retry-period=4", "--namespace=team-a", "--namespace=team-b", "--verbose"]
    # Kueue's two objects are read where it runs
    assert one(objs, "Role", "doctor-kueue-config")["metadata"]["namespace"] == "default"
    for binding in ("doctor-kueue-config", "doctor-leader-election"):
        assert one(objs, "RoleBinding", binding)["subjects"] == [
            {"kind": "ServiceAccount", "name": "doctor-sa", "namespace": "ops"}]
    assert_lease_role(one(objs, "Role", "doctor-leader-election"), "doctor-lease")
    assert dep["spec"]["replicas"] == 3 and one(objs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 2
    assert one(objs, "NetworkPolicy")["spec"]["ingress"][1]["from"] == [{"ipBlock": {"cidr": "10.0.0.0/8"}}]
    assert c["resources"] == NON_DEFAULT_VALUES["resources"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"metrics": 9090, "health": 9091}
    assert pod["tolerations"] == NON_DEFAULT_VALUES["tolerations"]
    assert pod["nodeSelector"] == NON_DEFAULT_VALUES["nodeSelector"]
    assert pod["affinity"] == NON_DEFAULT_VALUES["affinity"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == "doctor-sa"
    meta = dep["spec"]["template"]["metadata"]
    assert meta["annotations"] == {"example.com/owner": "platform"}
    assert meta["labels"]["tier"] == "ops"
    assert one(objs, "ServiceAccount")["metadata"]["name"] == "doctor-sa"
    binding = one(objs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "doctor-sa", "namespace": "ops"}]
    assert binding["roleRef"]["name"] == one(objs, "ClusterRole", "doctor")["metadata"]["name"]
    svc = one(objs, "Service")
    assert svc["spec"]["ports"][0]["port"] == 9090
    sm = one(objs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["namespaceSelector"]["matchNames"] == ["ops"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["interval"] == "15s" and endpoint["scrapeTimeout"] == "5s"
    assert endpoint["metricRelabelings"] == NON_DEFAULT_VALUES["serviceMonitor"]["metricRelabelings"]


def test_switches_turn_objects_off(helm: str, tmp_path: Path) -> None:
    objs = template(helm, tmp_path, values={"rbac": {"create": False}, "serviceAccount": {"create": False,
                                                                                         "name": "mine"},
                                            "crds": {"install": False}})
    assert kinds(objs) == ["Deployment", "PodDisruptionBudget", "Service"]
    assert one(objs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    objs = template(helm, tmp_path, values={"rbac": {"aggregateToDefaultRoles": False}})
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "ClusterRole"] == ["kueue-doctor"]
    digest = "sha256:" + "a" * 64
    c = container_of(template(helm, tmp_path, values={"image": {"digest": digest}}))
    assert c["image"] == f"ghcr.io/kueue-doctor/kueue-doctor@{digest}"


def test_team_labels_reach_the_operators_flags(helm: str, tmp_path: Path) -> None:
    c = container_of(template(helm, tmp_path, values={"metrics": {
        "labelsFrom": ["team", "cost_center=example.com/cost-center"], "labelValues": 20}}))
    assert c["args"][-3:] == ["--metric-label-from=team", "--metric-label-from=cost_center=example.com/cost-center",
                              "--metric-label-values=20"]
    assert not any(a.startswith("--metric-label") for a in container_of(template(helm, tmp_path))["args"])


def test_reports_are_off_by_default_and_switch_on_the_flag_and_their_rbac(helm: str, tmp_path: Path) -> None:
    default = template(helm, tmp_path)
    assert "--reports" not in container_of(default)["args"]
    assert not [o for o in default if o["metadata"]["name"].endswith("-reports")]
    objs = template(helm, tmp_path, values={"reports": {"enabled": True}}, namespace="ops")
    assert container_of(objs)["args"][-1] == "--reports"
    optional = [d for d in yaml.safe_load_all((ROOT / "manifests" / "optional" / "reports-rbac.yaml").read_text()) if d]
    role = one(objs, "ClusterRole", "kueue-doctor-reports")
    assert role["rules"] == one(optional, "ClusterRole")["rules"], "chart == manifests/optional/reports-rbac.yaml"
    assert role["rules"] == [{"apiGroups": ["openreports.io"], "resources": ["reports"],
                              "verbs": ["get", "list", "watch", "create", "patch", "delete"]}]
    binding = one(objs, "ClusterRoleBinding", "kueue-doctor-reports")
    assert binding["roleRef"]["name"] == "kueue-doctor-reports"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kueue-doctor", "namespace": "ops"}]


@pytest.mark.parametrize(("values", "needle"), [
    ({"logFormat": "xml"}, "logFormat"),
    ({"watchNamespaces": ["Not_A_Namespace"]}, "watchNamespaces"),
    ({"replicaCount": -1}, "replicaCount"),
    ({"leaderElection": {"leaseDuration": 0}}, "leaseDuration"),
    ({"metrics": {"port": 0}}, "port"),
    ({"serviceMonitor": {"interval": "often"}}, "interval"),
    ({"metrics": {"labelsFrom": ["not a label"]}}, "labelsFrom"),
])
def test_schema_rejects_bad_values(helm: str, tmp_path: Path, values: dict[str, Any], needle: str) -> None:
    proc = run_helm(helm, "template", "kd", str(CHART), values=values, tmp=tmp_path, check=False)
    assert proc.returncode != 0 and needle in proc.stderr, proc.stderr


def test_prometheus_rule_and_dashboard_are_empty_without_their_files(helm: str, bare_chart: Path,
                                                                     tmp_path: Path) -> None:
    values = {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}
    objs = template(helm, tmp_path, chart=bare_chart, values=values)
    assert "PrometheusRule" not in kinds(objs) and "ConfigMap" not in kinds(objs)


def test_prometheus_rule_wraps_the_rules_file_unchanged_by_default(helm: str, stand_in_chart: Path,
                                                                   tmp_path: Path) -> None:
    objs = template(helm, tmp_path, chart=stand_in_chart, values={"prometheusRule": {"enabled": True}})
    rule = one(objs, "PrometheusRule")
    assert rule["apiVersion"] == f"{MONITORING}/v1"
    assert rule["spec"]["groups"] == yaml.safe_load(STAND_IN_RULES)["groups"]
    # Prometheus' own {{ $labels }} templating passes through Helm untouched
    summary = rule["spec"]["groups"][0]["rules"][0]["annotations"]["summary"]
    assert "{{ $labels.workload_namespace }}" in summary and "{{ $value | humanizeDuration }}" in summary


def test_real_rules_file_and_dashboard_render_unchanged(helm: str, tmp_path: Path) -> None:
    rules_file, dashboard = CHART / "files" / "alerts.rules.yaml", CHART / "files" / "dashboard.json"
    if not rules_file.exists() and not dashboard.exists():
        pytest.skip("charts/kueue-doctor/files/ does not exist yet (alerts and dashboard work)")
    objs = template(helm, tmp_path, values={"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}})
    if rules_file.exists():
        assert one(objs, "PrometheusRule")["spec"]["groups"] == yaml.safe_load(rules_file.read_text())["groups"]
    if dashboard.exists():
        cm = one(objs, "ConfigMap")
        assert json.loads(cm["data"]["kueue-doctor.json"]) == json.loads(dashboard.read_text())
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_prometheus_rule_thresholds_severities_and_overrides(helm: str, stand_in_chart: Path, tmp_path: Path) -> None:
    objs = template(helm, tmp_path, chart=stand_in_chart, values=RULE_OVERRIDES)
    rules = {r.get("alert") or r["record"]: r
             for g in one(objs, "PrometheusRule")["spec"]["groups"] for r in g["rules"]}
    stuck, loop, down = rules["KueueDoctorWorkloadStuck"], rules["KueueDoctorLoopStuck"], rules["KueueDoctorDown"]
    assert stuck["expr"].endswith("> 3600") and "ExceedsMaxQuota" in stuck["expr"]
    assert stuck["labels"] == {"severity": "critical", "team": "platform"}
    assert loop["expr"].strip() == "time() - kueue_doctor_last_successful_pass_timestamp_seconds > 1800"
    assert loop["labels"] == {"severity": "critical", "team": "platform", "page": "true"}
    assert down["for"] == "30m" and down["annotations"] == {"runbook_url": "https://runbooks.example.com/kd-down"}
    assert rules["kueue_doctor:workloads:sum"] == yaml.safe_load(STAND_IN_RULES)["groups"][0]["rules"][2]
    # disabling one alert drops it; a group left empty is dropped
    objs = template(helm, tmp_path, chart=stand_in_chart, values={"prometheusRule": {
        "enabled": True, "rules": {"KueueDoctorDown": {"enabled": False}}}})
    groups = one(objs, "PrometheusRule")["spec"]["groups"]
    assert [g["name"] for g in groups] == ["kueue-doctor.rules"]


@pytest.mark.parametrize(("values", "needle"), [
    ({"thresholds": {"KueueDoctorTypo": 5}}, "no alert named KueueDoctorTypo"),
    ({"severities": {"KueueDoctorTypo": "info"}}, "no alert named KueueDoctorTypo"),
    ({"thresholds": {"KueueDoctorDown": 5}}, "does not end with a comparison"),
])
def test_prometheus_rule_overrides_fail_loudly(helm: str, stand_in_chart: Path, tmp_path: Path,
                                               values: dict[str, Any], needle: str) -> None:
    proc = run_helm(helm, "template", "kd", str(stand_in_chart), values={"prometheusRule": {"enabled": True, **values}},
                    tmp=tmp_path, check=False)
    assert proc.returncode != 0 and needle in proc.stderr, proc.stderr


def test_grafana_dashboard_configmap(helm: str, stand_in_chart: Path, tmp_path: Path) -> None:
    objs = template(helm, tmp_path, chart=stand_in_chart, values={"grafanaDashboard": {
        "enabled": True, "labels": {"grafana_dashboard": "kueue"}, "namespace": "monitoring"}})
    cm = one(objs, "ConfigMap")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "kueue"
    assert json.loads(cm["data"]["kueue-doctor.json"]) == STAND_IN_DASHBOARD


# ---- the real API server -----------------------------------------------------------------------


PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
MONITORING_CRD_FILES = tuple(f"example/prometheus-operator-crd/{MONITORING}_{plural}.yaml"
                             for plural in ("servicemonitors", "prometheusrules"))


def prometheus_operator_crds() -> list[dict[str, Any]]:
    """The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs, as it ships them."""
    try:
        paths = lc.module_files("PROMETHEUS_OPERATOR_VERSION", PROMETHEUS_OPERATOR_MODULE, *MONITORING_CRD_FILES)
    except lc.ControlPlaneError as exc:
        pytest.fail(f"the Prometheus Operator CRDs: {exc}", pytrace=False)
    return [yaml.safe_load(p.read_text()) for p in paths]


def apply_dry_run(api: Any, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    prefix, plural, namespaced = KIND_PATHS[obj["kind"]]
    ns = obj["metadata"].get("namespace") or namespace
    collection = f"{prefix}/namespaces/{ns}/{plural}" if namespaced else f"{prefix}/{plural}"
    out: dict[str, Any] = kube.request_json(
        api, "PATCH", f"{collection}/{obj['metadata']['name']}", obj,
        query={"dryRun": "All", "fieldManager": "helm-chart-test", "force": "true", "fieldValidation": "Strict"},
        content_type="application/apply-patch+yaml")
    return out


@pytest.fixture(scope="module")
def monitoring_crds(cluster: ClusterHandle) -> Iterator[list[dict[str, Any]]]:
    """The Prometheus Operator's monitoring.coreos.com CRDs, unless the cluster already serves them."""
    api, base = cluster.api_client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    crds = prometheus_operator_crds()
    created = kube.install_missing_crds(api, crds)
    for crd in crds:
        plural = crd["spec"]["names"]["plural"]
        kube.wait_for(lambda p=plural: kube.request_json(api, "GET", f"/apis/{MONITORING}/v1/{p}"),
                      timeout=30, message=f"{MONITORING} {plural} to be served")
    try:
        yield crds
    finally:
        for name in created:
            kube.request_json(api, "DELETE", f"{base}/{name}")


@pytest.fixture(scope="module")
def release_namespace(cluster: ClusterHandle) -> Iterator[str]:
    name = kube.unique_name("chart")
    kube.create(cluster.api_client, Namespace(name).manifest())
    try:
        yield name
    finally:
        kube.delete(cluster.api_client, "Namespace", name)


@pytest.mark.parametrize("variant", ["default", "non-default", "stand-in-files", "shards"])
def test_every_rendered_object_is_accepted_by_the_api_server(
        helm: str, cluster: ClusterHandle, monitoring_crds: list[dict[str, Any]], release_namespace: str, stand_in_chart: Path,
        tmp_path: Path, variant: str) -> None:
    values: dict[str, Any] | None = None
    chart = CHART
    if variant == "non-default":
        values = NON_DEFAULT_VALUES
    elif variant == "stand-in-files":
        values, chart = {**NON_DEFAULT_VALUES, **RULE_OVERRIDES, "reports": {"enabled": True}}, stand_in_chart
    elif variant == "shards":
        values = {"shards": 2}
    objs = template(helm, tmp_path, chart=chart, values=values, release=f"kd-{variant}",
                    namespace=release_namespace)
    unknown = sorted({o["kind"] for o in objs} - KIND_PATHS.keys())
    assert not unknown, f"add {unknown} to KIND_PATHS"
    if variant == "stand-in-files":
        assert {"ServiceMonitor", "PrometheusRule", "ConfigMap"} <= set(kinds(objs))
    for obj in objs:
        out = apply_dry_run(cluster.api_client, obj, release_namespace)
        assert out["kind"] == obj["kind"] and out["metadata"]["name"] == obj["metadata"]["name"]
        if obj["kind"] in ("Deployment", "StatefulSet"):  # defaulting ran: the server saw the whole Pod template
            pod = out["spec"]["template"]["spec"]
            assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    # dry run persisted nothing
    assert kube.request_json(cluster.api_client, "GET",
                             f"/apis/apps/v1/namespaces/{release_namespace}/deployments")["items"] == []


def test_api_server_rejects_what_the_schema_would_miss(cluster: ClusterHandle, monitoring_crds: list[dict[str, Any]],
                                                       release_namespace: str, helm: str, tmp_path: Path) -> None:
    """The dry run is a real check: a misspelt field in a rendered object is refused (Strict)."""
    dep = one(template(helm, tmp_path, namespace=release_namespace), "Deployment")
    dep["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    with pytest.raises(Exception) as info:
        apply_dry_run(cluster.api_client, dep, release_namespace)
    # server-side apply refuses a field its schema does not declare (status 500 from the typed
    # conversion in 1.36, 422 from strict validation elsewhere): either way it names the field
    assert getattr(info.value, "status", 0) >= 400, info.value
    assert "securityContxt" in str(getattr(info.value, "body", "")), getattr(info.value, "body", info.value)


def test_monitoring_crds_are_the_prometheus_operators_own(cluster: ClusterHandle,
                                                           monitoring_crds: list[dict[str, Any]]) -> None:
    pinned = lc.read_versions()["PROMETHEUS_OPERATOR_VERSION"].removeprefix("v")
    for crd in monitoring_crds:
        served = kube.request_json(cluster.api_client, "GET",
                                   f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")
        assert served["metadata"]["annotations"]["operator.prometheus.io/version"] == pinned
        assert served["spec"]["versions"][0]["schema"] == crd["spec"]["versions"][0]["schema"]


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o.name in ("service-monitor", "prometheus-rule")],
                         ids=lambda o: o.name)
def test_overlay_monitoring_objects_are_accepted_by_the_prometheus_operator_crds(
        cluster: ClusterHandle, monitoring_crds: list[dict[str, Any]], release_namespace: str, overlay: Path) -> None:
    objs = [o for o in kustomize(overlay) if o["kind"] in ("ServiceMonitor", "PrometheusRule")]
    assert objs, f"{overlay.name} renders no monitoring object"
    for obj in objs:
        obj["metadata"]["namespace"] = release_namespace
        out = apply_dry_run(cluster.api_client, obj)
        assert out["kind"] == obj["kind"] and out["metadata"]["name"] == obj["metadata"]["name"]


def test_prometheus_operator_crds_refuse_what_prometheus_would_refuse(
        helm: str, cluster: ClusterHandle, monitoring_crds: list[dict[str, Any]], release_namespace: str,
        tmp_path: Path) -> None:
    """The CRDs are real checks: a bad duration and a misspelt field in a rendered ServiceMonitor are refused."""
    sm = one(template(helm, tmp_path, values=NON_DEFAULT_VALUES, namespace=release_namespace), "ServiceMonitor")
    for bad_endpoint in ({"interval": "15 seconds"}, {"scrapeTimeut": "5s"}):
        obj = json.loads(json.dumps(sm))
        obj["spec"]["endpoints"][0].update(bad_endpoint)
        with pytest.raises(Exception) as info:
            apply_dry_run(cluster.api_client, obj, release_namespace)
        assert getattr(info.value, "status", 0) >= 400, info.value
        assert next(iter(bad_endpoint)) in str(getattr(info.value, "body", "")), getattr(info.value, "body", "")


def test_helm_install_dry_run_against_the_server_prints_the_notes(
        helm: str, cluster: ClusterHandle, release_namespace: str, bare_chart: Path, tmp_path: Path) -> None:
    """Helm's own install path against the real API server (nothing is created: --dry-run=server).

    crds.install=false: the AdmissionDiagnosis CRD may already exist in the session's cluster without
    Helm's ownership annotations, which Helm (rightly) refuses to adopt.
    """
    values = {"crds": {"install": False}, "prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True},
              "watchNamespaces": ["team-a"]}
    out = run_helm(helm, "install", "kd-notes", str(bare_chart), "--namespace", release_namespace,
                   "--dry-run=server", "--kubeconfig", str(cluster.kubeconfig), values=values, tmp=tmp_path).stdout
    assert "STATUS: pending-install" in out
    assert f"installed in namespace {release_namespace}, watching namespaces: team-a." in out
    assert "no files/alerts.rules.yaml" in out and "no files/dashboard.json" in out
    assert "crds.install=false" in out
