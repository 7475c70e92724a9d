"""Install artefacts without a cluster: Kustomize base and overlays, RBAC, Deployment hardening,
the chart's copy of the CRD, the Dockerfile.

Kustomize output comes from `kubectl kustomize`: the control plane's kubectl when it is built
(hack/control-plane/build.sh), else a kubectl on PATH. Without either, the Kustomize tests skip
locally and fail when a cluster is required (KUEUE_DOCTOR_REQUIRE_CLUSTER=1, or CI=true), the same
rule as tests/e2e/conftest.py. The chart itself is rendered by tests/e2e/test_chart.py (it needs helm).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "manifests" / "base"
OVERLAYS = sorted(p.parent for p in (ROOT / "manifests" / "overlays").glob("*/kustomization.yaml"))
CRD = ROOT / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml"
CHART = ROOT / "charts" / "kueue-doctor"
CHART_CRD = CHART / "crds-src" / CRD.name
OWN_GROUP = "kueue-doctor.dev"
READ_VERBS = {"get", "list", "watch"}


def _cluster_required() -> bool:
    flag = os.environ.get("KUEUE_DOCTOR_REQUIRE_CLUSTER")
    if flag is not None:
        return flag == "1"
    return os.environ.get("CI", "").lower() == "true"


@cache
def _kubectl() -> str | None:
    proc = subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build.sh"), "--print-bin-dir-if-built"],
                          capture_output=True, text=True, check=False)
    if proc.returncode == 0 and proc.stdout.strip():
        candidate = Path(proc.stdout.strip().splitlines()[-1]) / "kubectl"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("kubectl")


@cache
def _kustomize_text(directory: Path) -> str:
    kubectl = _kubectl()
    if kubectl is None:
        msg = "no kubectl for `kubectl kustomize`: run bash hack/control-plane/build.sh"
        if _cluster_required():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    proc = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"kubectl kustomize {directory} failed:\n{proc.stderr}"
    return proc.stdout


def kustomize(directory: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(_kustomize_text(directory)) if d]


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in by_kind(objs, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


# ---- checks shared with tests/e2e/test_chart.py (the chart renders the same objects) ----------


def assert_least_privilege(rules: list[dict[str, Any]], where: str) -> None:
    """Read-only everywhere but kueue-doctor.dev; nothing on Secrets; no wildcards, no escalation."""
    for rule in rules:
        groups, resources, verbs = rule.get("apiGroups", []), rule.get("resources", []), set(rule.get("verbs", []))
        assert "*" not in groups and "*" not in resources and "*" not in verbs, f"{where}: wildcard in {rule}"
        assert not rule.get("nonResourceURLs"), f"{where}: nonResourceURLs in {rule}"
        assert not {"secrets", "secrets/*"} & set(resources), f"{where}: Secrets access in {rule}"
        assert not {"escalate", "bind", "impersonate"} & verbs, f"{where}: privileged verb in {rule}"
        assert not any(r.endswith("/status") for r in resources) or groups == [OWN_GROUP], rule
        if groups != [OWN_GROUP]:
            assert verbs <= READ_VERBS, f"{where}: write verb {sorted(verbs - READ_VERBS)} on {groups} {resources}"
        else:
            assert resources == ["admissiondiagnoses"], f"{where}: {rule}"


def assert_operator_can_read_what_it_watches(rules: list[dict[str, Any]]) -> None:
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    needed = [("kueue.x-k8s.io", r) for r in ("workloads", "localqueues", "clusterqueues", "resourceflavors",
                                              "cohorts", "admissionchecks", "topologies",
                                              "workloadpriorityclasses", "multikueueclusters",
                                              "multikueueconfigs", "provisioningrequestconfigs")]
    needed += [("jobset.x-k8s.io", "jobsets"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters"), ("ray.io", "rayservices"),
               ("sparkoperator.k8s.io", "sparkapplications"), ("leaderworkerset.x-k8s.io", "leaderworkersets"),
               ("apps", "statefulsets"), ("apps", "deployments"),
               ("kubeflow.org", "pytorchjobs"), ("trainer.kubeflow.org", "trainjobs")]  # owners without Workload
    needed += [("batch", "jobs"), ("", "pods"), ("", "events"), ("", "namespaces"),
               ("apiextensions.k8s.io", "customresourcedefinitions"), (OWN_GROUP, "admissiondiagnoses")]
    for group, resource in needed:
        for verb in READ_VERBS:
            assert (group, resource, verb) in granted, f"missing {verb} on {group or 'core'}/{resource}"
    for verb in ("create", "patch", "update", "delete"):
        assert (OWN_GROUP, "admissiondiagnoses", verb) in granted, f"missing {verb} on admissiondiagnoses"


LEASE_RULES = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
               {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]


def assert_lease_role(role: dict[str, Any], lease: str) -> None:
    """Leader election needs create on leases, and get/update on its one Lease: nothing more, nowhere else."""
    assert role["kind"] == "Role", "leases only in the operator's own namespace"
    create, renew = role["rules"]
    assert create == LEASE_RULES[0]
    assert renew == {**LEASE_RULES[1], "resourceNames": [lease]}


def assert_hardened_deployment(dep: dict[str, Any]) -> None:
    spec = dep["spec"]
    args = spec["template"]["spec"]["containers"][0]["args"]
    if spec["replicas"] > 1 or "--leader-elect" in args:  # one writer: the Lease's holder
        assert "--leader-elect" in args, "two replicas without leader election would both write"
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
               for e in spec["template"]["spec"]["containers"][0]["env"]}
        assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
    else:
        assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    pod = spec["template"]["spec"]
    assert pod.get("automountServiceAccountToken") is True, "explicit: the token is what the operator talks with"
    psc = pod.get("securityContext", {})
    assert psc.get("runAsNonRoot") is True
    assert psc.get("runAsUser", 65532) != 0
    assert psc.get("seccompProfile", {}).get("type") == "RuntimeDefault"
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    (container,) = pod["containers"]
    csc = container["securityContext"]
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["capabilities"]["drop"] == ["ALL"]
    assert not csc.get("capabilities", {}).get("add")
    assert not csc.get("privileged")
    assert csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True
    assert csc.get("seccompProfile", psc.get("seccompProfile", {})).get("type") == "RuntimeDefault"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    args = container["args"]
    assert args[0] == "run"
    assert f"--metrics-port={ports['metrics']}" in args and f"--health-port={ports['health']}" in args
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert "memory" in container["resources"]["limits"] and container["resources"]["requests"]
    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
    assert "/tmp" in mounts, "a writable /tmp next to the read-only root filesystem"
    assert not any("hostPath" in v for v in pod.get("volumes", []))


# ---- Kustomize: base ----------------------------------------------------------------------------


def test_base_renders_the_expected_objects() -> None:
    objs = kustomize(BASE)
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    assert kinds == sorted([
        ("Namespace", "kueue-doctor"), ("CustomResourceDefinition", "admissiondiagnoses.kueue-doctor.dev"),
        ("ServiceAccount", "kueue-doctor"), ("ClusterRole", "kueue-doctor"), ("ClusterRole", "kueue-doctor-view"),
        ("ClusterRoleBinding", "kueue-doctor"), ("Deployment", "kueue-doctor"), ("Service", "kueue-doctor-metrics"),
        ("ClusterRole", "kueue-doctor-kueue-config"), ("ClusterRoleBinding", "kueue-doctor-kueue-config"),
        ("Role", "kueue-doctor-leader-election"), ("RoleBinding", "kueue-doctor-leader-election"),
        ("PodDisruptionBudget", "kueue-doctor"),
    ])
    for o in objs:
        if o["kind"] in ("ServiceAccount", "Deployment", "Service", "Role", "RoleBinding", "PodDisruptionBudget"):
            assert o["metadata"]["namespace"] == "kueue-doctor", o["metadata"]
        assert o["metadata"]["labels"]["app.kubernetes.io/name"] == "kueue-doctor"


def test_base_crd_is_the_committed_crd() -> None:
    crd = one(kustomize(BASE), "CustomResourceDefinition")
    committed = yaml.safe_load(CRD.read_text())
    assert crd["spec"] == committed["spec"]


def test_base_clusterrole_is_least_privilege() -> None:
    objs = kustomize(BASE)
    role = one(objs, "ClusterRole", "kueue-doctor")
    assert_least_privilege(role["rules"], "manifests/base ClusterRole")
    assert_operator_can_read_what_it_watches(role["rules"])
    view = one(objs, "ClusterRole", "kueue-doctor-view")
    assert view["rules"] == [{"apiGroups": [OWN_GROUP], "resources": ["admissiondiagnoses"],
                              "verbs": ["get", "list", "watch"]}]
    for aggregate in ("view", "edit", "admin"):
        assert view["metadata"]["labels"][f"rbac.authorization.k8s.io/aggregate-to-{aggregate}"] == "true"
    config = one(objs, "ClusterRole", "kueue-doctor-kueue-config")
    assert config["rules"] == [  # Kueue's two objects, by name, read-only
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kueue-manager-config"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["kueue-controller-manager"],
         "verbs": ["get"]}]
    binding = one(objs, "ClusterRoleBinding", "kueue-doctor")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "kueue-doctor"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kueue-doctor", "namespace": "kueue-doctor"}]


def test_base_deployment_is_hardened_and_uses_the_service_account() -> None:
    objs = kustomize(BASE)
    dep = one(objs, "Deployment")
    assert_hardened_deployment(dep)
    assert one(objs, "ServiceAccount")["automountServiceAccountToken"] is False, "only the operator's Pod mounts it"
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == one(objs, "ServiceAccount")["metadata"]["name"]


def test_base_runs_two_replicas_one_lease_and_a_disruption_budget() -> None:
    objs = kustomize(BASE)
    dep = one(objs, "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert dep["spec"]["replicas"] == 2 and "--leader-elect-resource-name=kueue-doctor" in args
    assert_lease_role(one(objs, "Role", "kueue-doctor-leader-election"), "kueue-doctor")
    binding = one(objs, "RoleBinding", "kueue-doctor-leader-election")
    assert binding["roleRef"]["name"] == "kueue-doctor-leader-election"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kueue-doctor", "namespace": "kueue-doctor"}]
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_base_service_selects_the_pods_and_names_the_metrics_port() -> None:
    objs = kustomize(BASE)
    svc, dep = one(objs, "Service"), one(objs, "Deployment")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    (port,) = svc["spec"]["ports"]
    assert port["name"] == "metrics" and port["targetPort"] == "metrics"


# ---- Kustomize: overlays ------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS, ids=[p.name for p in OVERLAYS])
def test_overlay_renders_and_keeps_the_base_safe(overlay: Path) -> None:
    objs = kustomize(overlay)
    assert objs, f"{overlay} renders nothing"
    resources = yaml.safe_load((overlay / "kustomization.yaml").read_text()).get("resources", [])
    if "../../base" in resources:
        base = {(o["kind"], o["metadata"]["name"]) for o in kustomize(BASE)}
        assert base <= {(o["kind"], o["metadata"]["name"]) for o in objs}
    for role in by_kind(objs, "ClusterRole"):
        assert_least_privilege(role["rules"], f"{overlay.name} ClusterRole {role['metadata']['name']}")
    for dep in by_kind(objs, "Deployment"):
        assert_hardened_deployment(dep)


def test_service_monitor_overlay_scrapes_the_metrics_service() -> None:
    objs = kustomize(ROOT / "manifests" / "overlays" / "service-monitor")
    sm, svc = one(objs, "ServiceMonitor"), one(objs, "Service")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["namespace"] == svc["metadata"]["namespace"] == "kueue-doctor"
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [svc["metadata"]["namespace"]]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    others = [o for o in by_kind(objs, "Service") if o is not svc]
    assert not others, "the selector must match the metrics Service only"
    port_names = {p["name"] for p in svc["spec"]["ports"]}
    assert [e["port"] for e in sm["spec"]["endpoints"]] == ["metrics"] and "metrics" in port_names
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"


# ---- the chart's sources (rendering: tests/e2e/test_chart.py) ---------------------------------------


def test_chart_crd_copy_is_the_committed_crd_byte_for_byte() -> None:
    assert CHART_CRD.read_bytes() == CRD.read_bytes(), (
        f"{CHART_CRD.relative_to(ROOT)} differs from {CRD.relative_to(ROOT)}; after `kueue-doctor crd > "
        f"{CRD.relative_to(ROOT)}` run: cp {CRD.relative_to(ROOT)} {CHART_CRD.relative_to(ROOT)}")


def test_chart_crd_is_not_in_helms_crds_folder() -> None:
    # Helm installs crds/ once and never upgrades it; the CRD is a template (templates/crd.yaml).
    assert not (CHART / "crds").exists()


def test_chart_versions_match_the_package_and_the_base_image() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == version
    base_image = (BASE / "deployment.yaml").read_text()
    image = re.search(r"image:\s*(\S+)", base_image)
    assert image is not None
    assert image.group(1) == f"{values['image']['repository']}:{version}"
    assert values["image"]["tag"] == "", "the tag defaults to appVersion"


def test_chart_values_defaults_match_the_operator_defaults() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    base = yaml.safe_load((BASE / "deployment.yaml").read_text())
    (container,) = base["spec"]["template"]["spec"]["containers"]
    assert f"--metrics-port={values['metrics']['port']}" in container["args"]
    assert f"--health-port={values['health']['port']}" in container["args"]
    assert values["watchNamespaces"] == []
    assert values["serviceMonitor"]["enabled"] is False and values["prometheusRule"]["enabled"] is False
    assert values["grafanaDashboard"]["labels"] == {"grafana_dashboard": "1"}
    assert values["crds"]["install"] is True and values["rbac"]["create"] is True


# ---- Dockerfile ---------------------------------------------------------------------------------------


def test_dockerfile_installs_the_repo_and_runs_as_non_root() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.strip()
             and not ln.strip().startswith("#")]
    froms = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    assert froms and all(f.startswith("python:3.11-slim") for f in froms), froms
    final_stage = lines[max(i for i, ln in enumerate(lines) if ln.startswith("FROM ")):]
    users = [ln.split()[1] for ln in final_stage if ln.startswith("USER ")]
    assert users, "the runtime stage must set USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric non-root USER (runAsNonRoot can only check a number)"
    text = "\n".join(lines)
    assert re.search(r"^COPY requirements\.lock pyproject\.toml", text, re.M) and re.search(r"^COPY operator/", text, re.M)
    assert re.search(r"pip install --require-hashes -r requirements\.lock", text), "the dependencies from the lock"
    assert re.search(r"KUEUE_DOCTOR_COMPILE=1 pip wheel --no-build-isolation --no-deps .*\.", text), \
        "the package from the repository, its engine compiled as hack/compiled.sh compiles it"
    assert re.search(r"/opt/kueue-doctor/bin/pip install --no-deps /tmp/wheels/kueue_doctor-\*\.whl", text), \
        "that wheel in the virtualenv, nothing unpinned"
    entry = [ln for ln in final_stage if ln.startswith("ENTRYPOINT")]
    assert entry and '"kueue-doctor"' in entry[-1]
    assert "PYTHONDONTWRITEBYTECODE=1" in text, "read-only root filesystem: no .pyc writes"
