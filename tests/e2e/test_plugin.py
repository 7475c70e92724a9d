"""`kubectl kueue-doctor`, as a user gets it: krew installs the plugin from the manifest and the archive of this
checkout, the launcher installs the package into its own virtualenv on the first run, and the real kubectl of the
control plane finds it on PATH and runs it against the real cluster with kubectl's global flags.

krew and its manifest validator come from `bash hack/krew/build.sh` (cached outside the tree). The launcher's
pip install is pointed at a copy of this checkout with pip's own settings (no index, no dependencies: they are
on PYTHONPATH, from the Python running the tests), so no release on PyPI is needed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from . import kube
from .conftest import ClusterHandle, _cluster_required, built_tool
from .test_operator import job_too_big_for_its_queue

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "plugins" / "kueue-doctor.yaml"
EXAMPLE = ROOT / "examples" / "headlamp-exceeds-max-quota.yaml"
sys.path.insert(0, str(ROOT / "hack" / "plugin"))
import archive  # noqa: E402  (hack/plugin/archive.py: the archive the manifest's sha256 is of)


def krew_dir() -> Path:
    return Path(built_tool(ROOT / "hack" / "krew" / "build.sh", "krew", "about 2 minutes cold"))


def kubectl_binary() -> Path:
    try:
        return kube.lc.find_bin_dir() / "kubectl"
    except kube.lc.BinariesNotBuilt as exc:
        if _cluster_required():
            pytest.fail(f"no kubectl: {exc}", pytrace=False)
        pytest.skip(f"no kubectl: {exc}")


@dataclass
class Plugin:
    path: str  # PATH with kubectl, and kubectl-kueue_doctor as krew installed it
    env: dict[str, str]
    venv: Path  # the launcher's virtualenv, made on the first run
    bindir: Path  # kubectl (and kubectl-krew) alone

    def kubectl(self, *args: str, path: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["kubectl", *args], env={**self.env, "PATH": path or self.path}, capture_output=True,
                              text=True, timeout=180, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc


def _krew_env(root: Path, bindir: Path) -> dict[str, str]:
    return {"HOME": str(root / "home"), "KREW_ROOT": str(root / "krew"), "PATH": f"{bindir}:/usr/bin:/bin"}


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Plugin:
    """krew install --manifest plugins/kueue-doctor.yaml --archive <this checkout's archive>, then the first run."""
    krew, kubectl = krew_dir(), kubectl_binary()
    root = tmp_path_factory.mktemp("plugin")
    bindir = root / "path"
    bindir.mkdir()
    (bindir / "kubectl").symlink_to(kubectl)
    (bindir / "kubectl-krew").symlink_to(krew / "kubectl-krew")
    zipped = root / "kubectl-kueue_doctor.zip"
    zipped.write_bytes(archive.archive_bytes())
    subprocess.run(["kubectl", "krew", "install", f"--manifest={MANIFEST}", f"--archive={zipped}"],
                   env=_krew_env(root, bindir), check=True, capture_output=True, text=True, timeout=120)
    src = root / "src"  # a copy: pip builds in the source tree, and this checkout stays clean
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "operator", src / "operator", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = root / "venv"
    env = {"HOME": str(root / "home"), "KUEUE_DOCTOR_PLUGIN_VENV": str(venv), "KUEUE_DOCTOR_PIP_SPEC": str(src),
           "KUEUE_DOCTOR_PYTHON": sys.executable, "PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1",
           "PIP_NO_BUILD_ISOLATION": "0", "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    out = Plugin(f"{root / 'krew' / 'bin'}:{bindir}:/usr/bin:/bin", env, venv, bindir)
    first = out.kubectl("kueue-doctor", "--version")
    assert first.stdout.strip() == "kueue-doctor 0.1.0", first
    assert f"first run: installing {src} into {venv}" in first.stderr
    return out


def test_krews_own_validator_accepts_the_manifest() -> None:
    proc = subprocess.run([str(krew_dir() / "validate-krew-manifest"), "-manifest", str(MANIFEST), "-skip-install"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "structural validation OK" in proc.stderr and "no overlapping spec.platform[].selector" in proc.stderr
    assert archive.problems() == [], "run python hack/plugin/archive.py --update-manifest"


def test_krew_refuses_an_archive_that_is_not_the_one_the_manifest_names(tmp_path: Path) -> None:
    """The manifest's sha256 is of this checkout's archive: krew checks it, so a changed launcher must update it."""
    bindir = tmp_path / "path"
    bindir.mkdir()
    (bindir / "kubectl").symlink_to(kubectl_binary())
    (bindir / "kubectl-krew").symlink_to(krew_dir() / "kubectl-krew")
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("kubectl-kueue_doctor", "#!/bin/sh\necho not ours\n")
        zf.writestr("LICENSE", "x")
    proc = subprocess.run(["kubectl", "krew", "install", f"--manifest={MANIFEST}", f"--archive={other}"],
                          env=_krew_env(tmp_path, bindir), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "checksum does not match" in proc.stderr, proc.stderr


def test_installed_by_krew_or_by_pip_kubectl_finds_it_and_it_explains_the_bundled_example(plugin: Plugin) -> None:
    """The issue's "done when": `kubectl kueue-doctor explain -f examples/headlamp-exceeds-max-quota.yaml`."""
    krew = plugin.kubectl("kueue-doctor", "explain", "-f", str(EXAMPLE))
    row = krew.stdout.splitlines()[1].split()
    assert row[:6] == ["default", "job-sample-job-8c7a4", "Admission", "ExceedsMaxQuota", "ExceedsNominalQuota",
                       "QueueAdmin"]
    # the pip route: the console script of `pip install` on PATH, no krew
    pip_path = f"{plugin.venv / 'bin'}:{plugin.bindir}:/usr/bin:/bin"
    pip = plugin.kubectl("kueue-doctor", "explain", "-f", str(EXAMPLE), path=pip_path)
    assert pip.stdout == krew.stdout
    listed = plugin.kubectl("plugin", "list", path=pip_path)
    assert f"{plugin.venv / 'bin' / 'kubectl-kueue_doctor'}" in listed.stdout


def _kubeconfigs(cluster: ClusterHandle, directory: Path, namespace: str) -> Mapping[str, Path]:
    """The admin kubeconfig, one whose current context is unreachable with the real one as `real`, and one whose
    context's namespace is the test's."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    ctx = admin["contexts"][0]
    broken = {**admin, "clusters": [*admin["clusters"], {"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}],
              "contexts": [{"name": "real", "context": ctx["context"]},
                           {"name": "nowhere", "context": {**ctx["context"], "cluster": "nowhere"}}],
              "current-context": "nowhere"}
    scoped = {**admin, "contexts": [{"name": "scoped", "context": {**ctx["context"], "namespace": namespace}}],
              "current-context": "scoped"}
    paths = {"admin": cluster.kubeconfig, "two-contexts": directory / "two.kubeconfig",
             "scoped": directory / "scoped.kubeconfig"}
    paths["two-contexts"].write_text(yaml.safe_dump(broken))
    paths["scoped"].write_text(yaml.safe_dump(scoped))
    return paths


def test_kubectl_kueue_doctor_explains_a_real_job_with_kubectls_global_flags(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str, plugin: Plugin, tmp_path: Path) -> None:
    wl_name = job_too_big_for_its_queue(resources, namespace, "trainer")
    k = _kubeconfigs(cluster, tmp_path, namespace)

    def verdict(text: str) -> list[str]:
        (row,) = [ln.split() for ln in text.splitlines()[1:]]
        return row[:5]

    expected = [namespace, wl_name, "Admission", "ExceedsMaxQuota", "ExceedsNominalQuota"]
    out = plugin.kubectl("kueue-doctor", "explain", "job/trainer", "-n", namespace, "--kubeconfig", str(k["admin"]))
    assert verdict(out.stdout) == expected
    # --context picks the reachable one; without it the current (unreachable) context is read, and said so
    out = plugin.kubectl("kueue-doctor", "explain", "job/trainer", "-n", namespace, "--kubeconfig",
                         str(k["two-contexts"]), "--context", "real")
    assert verdict(out.stdout) == expected
    down = plugin.kubectl("kueue-doctor", "explain", "job/trainer", "-n", namespace, "--kubeconfig",
                          str(k["two-contexts"]), check=False)
    assert down.returncode == 2 and "cannot reach the cluster" in down.stderr
    # kubectl's habits: flags before the command, --flag=value, -o; the context's namespace without -n
    out = plugin.kubectl("kueue-doctor", f"--kubeconfig={k['admin']}", "-n", namespace, "-o", "json", "explain",
                         "job/trainer")
    (d,) = json.loads(out.stdout)
    assert (d["metadata"]["name"], d["status"]["reason"], d["spec"]["ownerRef"]["name"]) == (
        wl_name, "ExceedsMaxQuota", "trainer")
    out = plugin.kubectl("kueue-doctor", "explain", "job/trainer", "--kubeconfig", str(k["scoped"]))
    assert verdict(out.stdout) == expected
    other = plugin.kubectl("kueue-doctor", "explain", "job/trainer", "-n", "default", "--kubeconfig",
                           str(k["admin"]), check=False)
    assert other.returncode == 1 and "no Job named trainer in namespace default in the cluster" in other.stderr


def test_kubectl_kueue_doctor_describe_reads_top_to_bottom_on_the_real_cluster(
        cluster: ClusterHandle, resources: kube.Resources, namespace: str, plugin: Plugin) -> None:
    wl_name = job_too_big_for_its_queue(resources, namespace, "trainer")
    env = {**plugin.env, "KUBECONFIG": str(cluster.kubeconfig), "PATH": plugin.path}  # kubectl passes it through

    def describe() -> str:
        return subprocess.run(["kubectl", "kueue-doctor", "describe", "job/trainer", "-n", namespace], env=env,
                              capture_output=True, text=True, timeout=180, check=True).stdout

    def pending_event(text: str) -> list[str] | None:  # Kueue's scheduler records a Warning Pending event
        rows = [ln.split() for ln in text[text.index("Events:"):].splitlines()[3:]]
        return next((r for r in rows if r[:2] == ["Warning", "Pending"] and f"Workload/{wl_name}" in r), None)

    text = kube.wait_for(lambda: (t := describe()) and pending_event(t) and t, timeout=60,
                         message=lambda: f"Kueue's Pending event in describe:\n{describe()}")
    assert text.startswith(f"Name:         {wl_name}\nNamespace:    {namespace}\nOwner:        Job/trainer\n"), text
    assert "  Reason:    ExceedsMaxQuota" in text and "Remedies:\n  QueueAdmin: ClusterQueue" in text
    assert text.index("Verdict:") < text.index("Quota:") < text.index("Remedies:") < text.index("Pending Limit:") \
        < text.index("Evidence:") < text.index("Events:")
    row = pending_event(text)
    assert row is not None and "couldn't" in row and "kueue-admission" in row, row
